"""The model pair as one linear operator: midpoint and difference scores in one product."""
from __future__ import annotations

import math
import time

import numpy as np

from bhtcli.maths.differences import reference_differences
from bhtcli.maths.divergences import bhattacharyya_weights, column_max, divergences
from bhtcli.models.problem import ProblemCache
from bhtcli.models.readout import Readout
from bhtcli.models.threads import all_threads

PASS_TIME_WIDTH = 32   # block width of the timed pass (the search's first round of starts)
THREADED_PRODUCT = 1 << 26  # multiply-adds from which a product uses all the BLAS's threads


def block_product(M: np.ndarray, X: np.ndarray, out_dtype=np.float64) -> np.ndarray:
    """M @ X in M's precision (a float32 M is never up-cast as a whole), result in
    `out_dtype` (float64 unless asked otherwise).

    Every product of the search with the model matrices goes through here (forward K X,
    backward K^T W, the range finder's products), so another backend replaces one place.
    A product of at least THREADED_PRODUCT multiply-adds runs on all the BLAS's threads, also
    inside a search's single-threaded block (threads.py).
    """
    X = np.asarray(X, dtype=M.dtype)
    width = X.shape[1] if X.ndim == 2 else 1
    if M.shape[0] * M.shape[1] * width >= THREADED_PRODUCT:
        with all_threads():
            return np.asarray(M @ X, dtype=out_dtype)
    return np.asarray(M @ X, dtype=out_dtype)


def timed_product(owner, kind: str, M: np.ndarray, X: np.ndarray, out_dtype=np.float64) -> np.ndarray:
    """M X (:func:`block_product`); the first product of each `kind` ("forward", "backward")
    made for `owner` (a pair, or the K models) is timed into ``owner._first_seconds`` (a dict
    set by the owner's constructor; None: never timed, e.g. products in a subspace): the run's
    own pass-time."""
    first = owner._first_seconds
    if first is None or kind in first:
        return block_product(M, X, out_dtype=out_dtype)
    t0 = time.perf_counter()
    Z = block_product(M, X, out_dtype=out_dtype)
    first[kind] = time.perf_counter() - t0
    return Z


def own_pass_seconds(owner) -> float | None:
    """The first forward plus the first backward product's seconds (:func:`timed_product`),
    None until both ran."""
    first = owner._first_seconds or {}
    return first["forward"] + first["backward"] if "forward" in first and "backward" in first else None


def pass_seconds(pair: "SoftmaxPair", width: int = PASS_TIME_WIDTH, repeats: int = 2) -> float:
    """The *pass-time* of `pair`, in seconds: what the run's own first forward product of the
    stacked 2n x d matrix and its first backward product took, timed as they ran (no extra
    product; at vocabulary scale the sketch's K Q, d x r with r ~ 70-100, and the lift's
    backward product with a few columns); before the pair has made both, one timed forward
    and backward product with a d x `width` block (:func:`measure_pass_seconds`). The timings
    are not counted in ``pair.passes``."""
    own = own_pass_seconds(pair)
    return own if own is not None else measure_pass_seconds(pair, width, repeats)


def measure_pass_seconds(pair: "SoftmaxPair", width: int = PASS_TIME_WIDTH,
                         repeats: int = 2) -> float:
    """One forward product of the stacked 2n x d matrix with a d x `width` block plus the
    backward product (2n x `width` back to d x `width`), timed in this process (the fastest of
    `repeats`; once when it takes over 0.5 s), in seconds: the pass-time's definition before
    the runs timed their own products, kept for the benchmarks that compare with it. Cached on
    the pair; the timing products are not counted in ``pair.passes``.
    """
    cached = getattr(pair, "_pass_seconds", None)
    if cached is not None:
        return cached
    K = pair.K
    # the values do not change the time of a product (no subnormals): constant blocks, which
    # cost nothing to make (2n x 32 normal draws took ~0.05 s, half a pass-time, at 50,000 rows)
    X = np.full((K.shape[1], width), 1.0 / math.sqrt(K.shape[1]))
    W = np.full((K.shape[0], width), 1e-3)
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        block_product(K, X)
        block_product(K.T, W)
        best = min(best, time.perf_counter() - t0)
        if best > 0.5:
            break           # a long pass is timed well once, and a repeat would cost a pass-time
    pair._pass_seconds = best
    return best


class SoftmaxPair:
    """One pair of models (P = 1 pair of the search protocol, problem.py). Holds K = [C; G] with C = (A+B)/2 and G = A-B, both row-centred when both links are
    exp (softmax ignores a common shift of all logits, so centring changes no probability but
    removes the large common component that would otherwise cancel). Links and biases are
    applied to the products by `readout` (readout.py).

    dtype="float32" stores K and runs the two products in float32 (half the memory, about
    twice the speed at vocabulary scale); everything after the products -- links,
    log-sum-exp, divergences, gradients' weights -- runs in float64.

    One *pass* is one product of K (2n x d) with a block of queries, forward (K X) or
    backward (K^T W): it reads A's and B's worth of data once, whatever the block width.
    """

    pairs = [(0, 1)]

    def __init__(self, A: np.ndarray, B: np.ndarray, objective: str = "bhattacharyya",
                 readout: Readout | None = None, dtype: str = "float64"):
        n, d = A.shape
        self.n, self.d = n, d
        self.readout = Readout() if readout is None else readout
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
        K = np.empty((2 * n, d), dtype=self.dtype)
        C, G = K[:n], K[n:]
        rows = 8192  # blocked so that memory-mapped inputs are streamed once
        # float64 exp-link pairs: G relative to its first row from the exact differences, so that
        # rows which differ at the rounding level of A - B keep that difference (docs/maths.md
        # §2.3); the common row this leaves changes no probability and the mean row removes it
        exact = self.readout.exp_links and self.dtype == np.float64
        ref = None
        for s in range(0, n, rows):
            a = np.asarray(A[s:s + rows], dtype=self.dtype)
            b = np.asarray(B[s:s + rows], dtype=self.dtype)
            np.add(a, b, out=C[s:s + rows])
            C[s:s + rows] *= 0.5
            if exact:
                ref = reference_differences(a, b, ref, out=G[s:s + rows])[1]
            else:
                np.subtract(a, b, out=G[s:s + rows])
        if self.readout.exp_links:
            # a common shift of all logits changes no softmax probability; other links are
            # not shift-invariant, so their scores stay as they are
            C -= C.mean(axis=0, dtype=np.float64).astype(self.dtype)
            G -= G.mean(axis=0, dtype=np.float64).astype(self.dtype)
        if objective not in ("bhattacharyya", "kl"):
            raise ValueError(f"unknown objective {objective!r}")
        self._hold(K, n, self.readout, objective, timed=True)

    def _hold(self, K: np.ndarray, n: int, readout: Readout, objective: str, timed: bool):
        """The one place a pair's state is set: the stacked K = [C; G] (2n x d), and what
        every search on it shares (the pass count, the first products' timings, the cache)."""
        self.n, self.d = n, K.shape[1]
        self.readout, self.objective = readout, objective
        self.dtype = np.dtype(K.dtype)
        self.K = K
        self.passes = 0
        # kind -> seconds of the first counted product (pass_seconds); None: never timed
        self._first_seconds = {} if timed else None
        self._pass_seconds = None   # measure_pass_seconds, once
        self.cache = ProblemCache()

    @classmethod
    def from_stacked(cls, K: np.ndarray, n: int, readout: Readout, objective: str) -> "SoftmaxPair":
        """The pair restricted to x = Q y, from its stacked K Q (2n x r, already centred):
        products in the subspace are not passes over the pair and are not timed."""
        pair = cls.__new__(cls)
        pair._hold(K, n, readout, objective, timed=False)
        return pair

    @property
    def C(self) -> np.ndarray:
        return self.K[: self.n]

    @property
    def G(self) -> np.ndarray:
        return self.K[self.n:]

    def forward(self, X: np.ndarray, out_dtype=np.float64) -> np.ndarray:
        """K X (2n x k) in `out_dtype`: one pass, counted, and the first one timed
        (:func:`pass_seconds`)."""
        self.passes += 1
        return timed_product(self, "forward", self.K, X, out_dtype)

    def product(self, X: np.ndarray):
        """(m, D) = (C X, G X) for a (d,) query or a (d, k) block, in float64."""
        Z = self.forward(X)
        return Z[: self.n], Z[self.n:]

    def logits(self, X: np.ndarray):
        """(c, delta): midpoint log-weights and their difference (readout.py) at X."""
        c, delta, _ = self.readout.forward(*self.product(X))
        return c, delta

    def pullback(self, w_c: np.ndarray, w_g: np.ndarray) -> np.ndarray:
        """C^T w_c + G^T w_g in one product (float64 result)."""
        self.passes += 1
        W = np.concatenate([w_c, w_g], axis=0, dtype=self.dtype, casting="same_kind")
        return timed_product(self, "backward", self.K.T, W)

    def evaluate(self, X: np.ndarray):
        """The objective at each column of X and its gradient weights (w_m, w_D), one pass.

        The objective is D (default) or, with objective="kl", KL(P_A(x) || P_B(x)) (used by
        Chernoff's adaptive rule; plain log-space form, not the nearly-equal-models one).

        grad = C^T w_m + G^T w_D (see :meth:`pullback`). D and the weights come from the
        cancellation-free fused form (divergences.bhattacharyya_weights, docs/maths.md §2.5):
        two exps and one expm1 per entry, over row blocks that stay in cache.
        """
        c, delta, jac = self.readout.forward(*self.product(X))
        if self.objective == "kl":
            value, w_c, w_g = _kl_and_weights(c, delta)
            return (value, *self.readout.backward(w_c, w_g, jac))
        D, w_c, w_g = bhattacharyya_weights(c, delta)
        return (np.maximum(D, 0.0), *self.readout.backward(w_c, w_g, jac))

    def value(self, X: np.ndarray) -> np.ndarray:
        """Bhattacharyya distance D at each column of X (one pass)."""
        return self.evaluate(X)[0]

    def value_and_grad(self, X: np.ndarray):
        """D and its gradient at each column of X (two passes)."""
        D, w_c, w_g = self.evaluate(X)
        return D, self.pullback(w_c, w_g)

    def divergences(self, x: np.ndarray):
        """Every divergence of docs/maths.md §2.1 at one query x."""
        c, delta = self.logits(np.asarray(x, dtype=np.float64))
        return divergences(c, delta)


STREAM_BLOCK_BYTES = 1 << 17   # float64 row blocks of the streamed products: ~1 MB, in L2


def stream_rows(d: int) -> int:
    """Rows per float64 block of the one-query streamed products (logits_at, scores_at):
    blocks above ~2 MB made each matrix-vector product 5-10x slower here (0.6 s instead of
    0.06 s at 50,000 x 1,024)."""
    return max(16, STREAM_BLOCK_BYTES // max(8 * d, 1))


def logits_at(A: np.ndarray, B: np.ndarray, x: np.ndarray, readout: Readout | None = None,
              rows: int | None = None):
    """(c, delta) for one query, streamed over row blocks in float64: no 2n x d matrix is
    built. The scores' difference comes from the difference matrix, so nearly equal models
    keep it. `rows` (default: :func:`stream_rows`) changes no digit, only the speed."""
    return logits_at_each(A, B, [x], readout, rows)[0]


def logits_at_each(A: np.ndarray, B: np.ndarray, queries, readout: Readout | None = None,
                   rows: int | None = None) -> list:
    """:func:`logits_at` for each query of `queries` in one streamed pass over A and B (the
    rows converted once, each query's own matrix-vector products): every query's (c, delta)
    the same, bit for bit, as a pass of its own (a budget curve's reports)."""
    n = A.shape[0]
    rows = stream_rows(A.shape[1]) if rows is None else rows
    readout = Readout() if readout is None else readout
    xs = [np.asarray(x, dtype=np.float64) for x in queries]
    ms, Ds = [np.empty(n) for _ in xs], [np.empty(n) for _ in xs]
    ref = None
    for s in range(0, n, rows):
        a = np.asarray(A[s:s + rows], dtype=np.float64)
        b = np.asarray(B[s:s + rows], dtype=np.float64)
        mid = 0.5 * (a + b)
        if readout.exp_links:       # shift-invariant: the rows relative to the first, exactly
            diff, ref = reference_differences(a, b, ref)
        else:
            diff = a - b
        for x, m, D in zip(xs, ms, Ds):
            m[s:s + rows] = mid @ x
            D[s:s + rows] = diff @ x
    return [readout.forward(m, D)[:2] for m, D in zip(ms, Ds)]


def scores_at(A: np.ndarray, x: np.ndarray, rows: int | None = None) -> np.ndarray:
    """A x in float64, streamed over row blocks (`rows` as in :func:`logits_at`)."""
    rows = stream_rows(A.shape[1]) if rows is None else rows
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(A.shape[0])
    for s in range(0, A.shape[0], rows):
        out[s:s + rows] = np.asarray(A[s:s + rows], dtype=np.float64) @ x
    return out


def _softmax_cols(z: np.ndarray):
    """(logsumexp, softmax) of every column with one exp per entry."""
    m = column_max(z) if z.ndim == 2 else z.max(axis=0)
    e = np.subtract(z, m)
    np.exp(e, out=e)
    total = e.sum(axis=0) if z.ndim == 1 else np.ones(z.shape[0]) @ e
    e /= total
    return np.log(total) + m, e


def _kl_and_weights(c: np.ndarray, delta: np.ndarray):
    """KL(P_A || P_B) per column and its gradient weights.

    With a = c + delta/2, b = c - delta/2 and w = p_a (delta - E_pa delta):
    grad KL = B^T (p_b - p_a) + A^T w = C^T (p_b - p_a + w) + G^T ((p_a - p_b)/2 + w/2).
    """
    lse_a, pa = _softmax_cols(c + 0.5 * delta)
    lse_b, pb = _softmax_cols(c - 0.5 * delta)
    mean = np.sum(pa * delta, axis=0)
    kl = np.maximum(mean - lse_a + lse_b, 0.0)
    w = pa * (delta - mean)
    return kl, pb - pa + w, 0.5 * (pa - pb) + 0.5 * w
