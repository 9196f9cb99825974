"""K softmax models as one linear operator, and the objectives a K-way search climbs.

The K models M_1 .. M_K (n x d each) are stored as S = [R; Delta_2; ...; Delta_K] with
R = M_1 and Delta_k = M_k - M_1 (each block row-centred: softmax ignores a common shift of all
logits). One product S X gives the scores of every model at every column of X, and the pair
(i, j) is read off as the midpoint c_ij = r + (delta_i + delta_j)/2 and the difference
delta_ij = delta_i - delta_j (delta_1 = 0), computed from the difference blocks: nearly equal
models keep their difference (docs/maths.md §2, and §8 for the K-way objective).

Objectives (anything :class:`bhtcli.search.ascent.BatchedAscent` climbs: evaluate(X) ->
(f, w_r, w_delta), pullback(w_r, w_delta), value(X)):

- :class:`WeightedSum`: sum_p lambda_p D_p(x) for fixed weights lambda (the pricing problem of
  a schedule's column generation);
- :class:`SoftBottleneck`: the power-mean soft minimum (sum_p D_p^-s)^(-1/s) of the pairs'
  Bhattacharyya distances, a smooth lower bound on min_p D_p that tends to it as s grows
  (P^(-1/s) min_p D_p <= f <= min_p D_p, P pairs).
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from bhtcli.maths.divergences import bhattacharyya_weights
from bhtcli.maths.kway_coefficients import coefficient_distances, coefficient_pairs
from bhtcli.maths.kway_pairs import fused_pairs
from bhtcli.models.problem import ProblemCache
from bhtcli.models.readout import Readout
from bhtcli.models.softmax import block_product, own_pass_seconds, timed_product
from bhtcli.models.threads import in_two_halves

TINY_D = 1e-300      # D below this counts as this in the soft minimum (plateaus: D == 0)


class KModels:
    """The stacked matrix S = [M_1; M_2 - M_1; ...; M_K - M_1] (row-centred blocks).

    One *pass* is one product of S (K n x d) with a block of queries, forward or backward:
    it reads the K models once (K/2 times the data of a pair's pass).
    """

    # True: with read-outs, every pair through its own Readout, pair by pair (the path before
    # each model's read-out was evaluated once), kept for benchmarks/bench_kway.py --part readouts
    readouts_per_pair = False

    @property
    def _per_pair(self) -> bool:
        """Read-outs evaluated pair by pair (:attr:`readouts_per_pair`, and there are some)."""
        return self.readouts is not None and self.readouts_per_pair

    def __init__(self, models, dtype: str = "float64", readouts=None):
        """`readouts`: a :class:`bhtcli.models.kway_readout.KReadouts` (None: every model plain
        softmax). Blocks are row-centred only when every link is exp."""
        self.K = len(models)
        n, d = models[0].shape
        self.n, self.d = n, d
        self.dtype = np.dtype(dtype)
        S = large_empty((self.K * n, d), self.dtype)
        rows = 8192
        starts = list(range(0, n, rows))

        def stack(lo, hi):
            for s in starts[lo:hi]:
                e = min(s + rows, n)
                blocks = [np.asarray(m[s:e]) for m in models]
                if all(b.dtype == self.dtype for b in blocks):
                    # in the stored precision: a float32 difference is the float64 one rounded
                    # once more (double rounding is exact for p' >= 2p + 2), 20x faster
                    np.copyto(S[s:e], blocks[0])
                    for k in range(1, self.K):
                        np.subtract(blocks[k], blocks[0], out=S[k * n + s:k * n + e])
                    continue
                first = np.asarray(blocks[0], dtype=np.float64)
                S[s:e] = first
                for k in range(1, self.K):
                    S[k * n + s:k * n + e] = np.asarray(blocks[k], np.float64) - first

        def centre(lo, hi):             # each half of the blocks: the same means, rows apart
            for k in range(lo, hi):
                block = S[k * n:(k + 1) * n]
                block -= block.mean(axis=0, dtype=np.float64).astype(self.dtype)
        readouts = None if readouts is None or readouts.plain else readouts
        centred = readouts is None or readouts.exp_links
        if S.nbytes >= PLAIN_PAGES_BYTES:   # two threads touch the fresh pages (docs/maths.md §8.13)
            in_two_halves(stack, len(starts))
            if centred:
                in_two_halves(centre, self.K)
        else:
            stack(0, len(starts))
            if centred:
                centre(0, self.K)
        self._hold(S, self.K, n, timed=True, readouts=readouts)

    def _hold(self, S: np.ndarray, K: int, n: int, timed: bool, readouts=None):
        """The one place the K models' state is set: the stacked S (K n x d), the P = K(K-1)/2
        pairs under the bottleneck (the search protocol, problem.py), the pass count and the
        first products' timings (None: never timed), the shared cache, the read-outs (None:
        plain softmax; else each model's read-out is evaluated once per evaluation and the
        pairs are formed from the models' log-weights, :meth:`_model_scores`)."""
        self.readouts = readouts
        self.K, self.n, self.d = K, n, S.shape[1]
        self.dtype = np.dtype(S.dtype)
        self.S = S
        self.pairs = list(itertools.combinations(range(K), 2))
        self.passes = 0
        self._first_seconds = {} if timed else None
        self._pass_seconds = None
        self.cache = ProblemCache()

    def product(self, X: np.ndarray, out_dtype=np.float64) -> np.ndarray:
        """S X: one counted pass, timed for :meth:`pass_seconds`."""
        self.passes += 1
        return self._multiply("forward", self.S, X, out_dtype)

    def _multiply(self, kind: str, M: np.ndarray, X: np.ndarray, out_dtype=np.float64):
        """M X for a pass (:func:`bhtcli.models.softmax.timed_product`: the long ones on all
        the BLAS's threads, the first of each kind timed)."""
        return timed_product(self, kind, M, X, out_dtype)

    def scores(self, X: np.ndarray):
        """(r, deltas): r = M_1 X and deltas[k] = (M_k - M_1) X (deltas[0] = 0), float64."""
        Z = self.product(X)
        n = self.n
        deltas = [np.zeros_like(Z[:n])] + [Z[k * n:(k + 1) * n] for k in range(1, self.K)]
        return Z[:n], deltas

    def pair_logits(self, r, deltas, i: int, j: int, out=None):
        """(c, delta) of the pair (i, j): midpoint log-weights and their difference. With
        `out` = (c, delta) float64 buffers the values are written there, the same numbers
        from the stored-precision deltas (deltas[0] may be None: model 1 against itself)."""
        if out is None:
            return r + 0.5 * (deltas[i] + deltas[j]), deltas[i] - deltas[j]
        c, delta = out
        f64 = np.float64
        if deltas[i] is None:               # i = 0: c = r + delta_j / 2, delta = -delta_j
            np.multiply(deltas[j], 0.5, out=c, dtype=f64)
            np.negative(deltas[j], out=delta, dtype=f64)
        else:
            np.add(deltas[i], deltas[j], out=c, dtype=f64)
            c *= 0.5
            np.subtract(deltas[i], deltas[j], out=delta, dtype=f64)
        c += r
        return c, delta

    def _model_scores(self, X: np.ndarray):
        """:meth:`_stored_scores` with the read-outs applied, plus the links' derivatives:
        (X2, one, r', deltas', jac). Plain softmax: the scores themselves and jac None. With
        read-outs: r' = u_1 and deltas'[k] = u_k - u_1 from each model's log-weights u_k,
        computed once (KReadouts.model_log_weights), so that every pair's (c, delta) is
        :meth:`pair_logits` of them, as for plain softmax; jac (None for exp links) takes
        the weights back (:meth:`_through_links`)."""
        X2, one, r, deltas = self._stored_scores(X)
        if self.readouts is None or self._per_pair:
            return X2, one, r, deltas, None
        r, deltas, jac = self.readouts.model_log_weights(r, deltas)
        return X2, one, r, deltas, jac

    def _through_links(self, w_r: np.ndarray, w_delta: np.ndarray, jac):
        """The weights (w_r, w_delta) on (r', deltas') = (u_1, u_k - u_1) as weights on the
        scores (r, deltas), :meth:`combine`'s layout: model k's log-weights carry g_1 = w_r -
        sum_k w_delta[k] and g_k = w_delta[k], its scores h_k = g_k phi_k'(s_k) (the chain
        rule once per model), and s_k = r + delta_k gives w_r = sum_k h_k, w_delta[k] = h_k.
        Worked on k x n transposes (the fused pairs hand over such), returned as n x k views."""
        if jac is None:
            return w_r, w_delta
        n = self.n
        wr, wd = w_r.T, w_delta.T
        g = np.array(wr, dtype=np.float64)
        out = np.empty(wd.shape)
        for k in range(1, self.K):
            block = slice((k - 1) * n, k * n)
            g -= wd[:, block]
            np.multiply(wd[:, block], jac[k].T, out=out[:, block])
        g *= jac[0].T
        for k in range(1, self.K):
            g += out[:, (k - 1) * n:k * n]
        return g.T, out.T

    def _stored_scores(self, X: np.ndarray):
        """(X as a d x k block, whether X was one vector, r in float64, deltas in the stored
        precision with deltas[0] None): one pass, no float64 copy of K n x k."""
        X = np.asarray(X, dtype=np.float64)
        one = X.ndim == 1
        X2 = X[:, None] if one else X
        Z = self.product(X2, out_dtype=self.S.dtype)
        n = self.n
        r = np.asarray(Z[:n], dtype=np.float64)
        return X2, one, r, [None] + [Z[k * n:(k + 1) * n] for k in range(1, self.K)]

    def pair_distances(self, X: np.ndarray, weights: bool = False, ranking: bool = False):
        """D_p at every column of X for every pair p (rows of a P x k array), one pass; with
        `weights`, also each pair's gradient weights (w_c, w_g) (docs/maths.md §2.4), pair by
        pair. Without weights the pairs are evaluated together (maths/kway_pairs.py) where
        the columns allow it. `ranking`: values only to rank columns by, from the
        Bhattacharyya coefficients where they resolve D (maths/kway_coefficients.py:
        coefficient_distances, 2.5x cheaper), else the same numbers as without."""
        X2, one, r, deltas, jac = self._model_scores(X)
        if ranking and not weights and not self._per_pair:
            D = coefficient_distances(r, deltas, self.pairs)
            if D is not None:
                return D[:, 0] if one else D
        fused = None if weights or self._per_pair else fused_pairs(r, deltas, self.pairs, keep_u=False)
        if fused is not None:
            D = np.maximum(fused.D, 0.0)
        else:
            D, ws = self._pairwise(r, deltas, X2.shape[1], weights)
            if jac is not None:         # each pair's weights back to its (m, D) scores
                ws = [Readout.backward(*w, (jac[i], jac[j])) for w, (i, j) in zip(ws, self.pairs)]
        if one:
            D = D[:, 0]
        return (D, ws) if weights else D

    def pair_terms(self, X: np.ndarray, rough: bool = False):
        """(D, combine) at the columns of X, one pass: D as :meth:`pair_distances` and
        combine(mu) the stacked weights (w_r, w_delta) of sum_p mu_p D_p (:meth:`combine`'s
        layout), from the pairs evaluated together (maths/kway_pairs.py) where the columns
        allow it, else pair by pair. `rough`: from the Bhattacharyya coefficients where they
        resolve D (maths/kway_coefficients.py: good to ~1e-16 / D relative, 4-8x cheaper), to
        climb with while exploring."""
        X2, _, r, deltas, jac = self._model_scores(X)
        if not self._per_pair:
            if rough:
                found = coefficient_pairs(r, deltas, self.pairs, keep=True)
                if found is not None:
                    return found.D, lambda mu: self._through_links(*found.combine(mu), jac)
            fused = fused_pairs(r, deltas, self.pairs, keep_u=True)
            if fused is not None:
                return np.maximum(fused.D, 0.0), lambda mu: self._through_links(*fused.combine(mu), jac)
        D, ws = self._pairwise(r, deltas, X2.shape[1], True)
        return D, lambda mu: self._through_links(*self.combine(mu, ws), jac)

    def _pairwise(self, r, deltas, k: int, weights: bool):
        """(D, per-pair weights or []) pair by pair (bhattacharyya_weights); the pairs'
        logits are formed in two buffers shared by all pairs. With read-outs and
        :attr:`readouts_per_pair` the pair's midpoint and difference scores go through its
        Readout (forward to (c, delta), and the weights back to the scores): the pair design's
        code, each model's link evaluated 2(K - 1) times."""
        D = np.empty((len(self.pairs), k))
        buffers = (np.empty_like(r), np.empty_like(r))
        ws = []
        for p, (i, j) in enumerate(self.pairs):
            c, delta = self.pair_logits(r, deltas, i, j, buffers)
            jac = None
            if self._per_pair:
                c, delta, jac = self.readouts.pair_logits(c, delta, i, j)
            Dp, w_c, w_g = bhattacharyya_weights(c, delta)
            D[p] = np.maximum(Dp, 0.0)
            if weights:
                ws.append(Readout.backward(w_c, w_g, jac))
        return D, ws

    def combine(self, mu: np.ndarray, ws) -> tuple:
        """The stacked gradient weights of sum_p mu_p D_p (mu: P x k): (w_r, w_delta) with
        grad = R^T w_r + sum_k Delta_k^T w_delta[k] (see :meth:`pullback`):
        w_r = sum_p mu_p w_c,p and model k's block gets mu_p (w_c,p / 2 +- w_g,p), added in
        place through one buffer (the same operations, in the same order, as the direct
        expressions: the same bits)."""
        n, k = ws[0][0].shape
        w_r = np.zeros((n, k))
        w_delta = np.zeros(((self.K - 1) * n, k))
        t = np.empty((n, k))
        for p, (i, j) in enumerate(self.pairs):
            w_c, w_g = ws[p]
            m = mu[p]
            np.multiply(m, w_c, out=t)
            w_r += t
            for model, sign in ((i, np.add), (j, np.subtract)):
                if model > 0:
                    np.multiply(0.5, w_c, out=t)
                    sign(t, w_g, out=t)
                    t *= m
                    w_delta[(model - 1) * n:model * n] += t
        return w_r, w_delta

    def pass_seconds(self, width: int = 32) -> float:
        """Seconds of one pass forward and back: what the run's own first forward product and
        first backward product over the K models took, timed as they ran (no product is added
        to measure it: at vocabulary scale the sketch's S Q, d x r with r ~ 90, and the lift's
        backward product with a few columns); before both ran, one forward K n x d times
        d x `width` product and one back, timed here (not counted)."""
        own = own_pass_seconds(self)
        if own is not None:
            return own
        if self._pass_seconds is None:
            X = np.full((self.d, width), 1.0 / np.sqrt(self.d))
            W = np.full((self.S.shape[0], width), 1e-3)
            t0 = time.perf_counter()
            block_product(self.S, X)
            block_product(self.S.T, W)
            self._pass_seconds = time.perf_counter() - t0
        return self._pass_seconds

    def pullback(self, w_r: np.ndarray, w_delta: np.ndarray) -> np.ndarray:
        """R^T w_r + [Delta_2; ...]^T w_delta in one product (float64 result)."""
        self.passes += 1
        # stacked as k x (K n) rows (the fused pairs' weights are transposes of such rows):
        # W is its n x k transpose, no copy
        W = np.concatenate([w_r.T, w_delta.T], axis=1, dtype=self.dtype, casting="same_kind").T
        return self._multiply("backward", self.S.T, W)


PLAIN_PAGES_BYTES = 64 << 20    # arrays from this size are mapped without huge-page advice


def large_empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype); when large, in a private anonymous map with no huge-page
    advice (Linux and macOS). numpy advises transparent huge pages for large arrays, and when
    the kernel has to compact memory to find them the first touch of the K models' stacked
    copy (0.8 GB at 50,000 x 1,024 float32, K = 4) took 1.0-2.0 s of CPU; with 4 kB pages it
    takes 0.33-0.39 s every time (0.05 s when huge pages happen to be free). Freed with the
    array (it holds the map)."""
    import mmap
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    private = getattr(mmap, "MAP_PRIVATE", None)
    if size < PLAIN_PAGES_BYTES or private is None or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.empty(shape, dtype=dtype)
    buf = mmap.mmap(-1, size, flags=private | mmap.MAP_ANONYMOUS)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class _PairsObjective:
    """What BatchedAscent climbs, built from the pairs' D of K models: a subclass gives
    `evaluate` (value and the weights of the backward product) and `value`."""

    def __init__(self, models: KModels):
        self.models = models
        self.d, self.dtype = models.d, models.dtype

    @property
    def passes(self):
        return self.models.passes

    def pullback(self, w_r, w_delta):
        return self.models.pullback(w_r, w_delta)

    def value_and_grad(self, X):
        f, w_r, w_delta = self.evaluate(X)
        return f, self.pullback(w_r, w_delta)


class WeightedSum(_PairsObjective):
    """sum_p lambda_p D_p(x) for fixed lambda >= 0 (climbed by BatchedAscent)."""

    def __init__(self, models: KModels, weights):
        super().__init__(models)
        self.weights = np.asarray(weights, dtype=np.float64)

    def evaluate(self, X):
        D, combine = self.models.pair_terms(X)
        mu = np.repeat(self.weights[:, None], D.shape[1], axis=1)
        return self.weights @ D, *combine(mu)

    def value(self, X):
        return self.weights @ self.models.pair_distances(X)


def soft_minimum(D: np.ndarray, sharpness: float):
    """(f, lambda) per column of D (P x k): f = (sum_p D_p^-s)^(-1/s) and
    lambda_p = D_p^-s / sum_q D_q^-s, so that grad f = sum_p (f lambda_p / D_p) grad D_p.
    Computed in log space (D spans many orders of magnitude)."""
    logD = np.log(np.maximum(D, TINY_D))
    z = -sharpness * logD
    top = z.max(axis=0)
    e = np.exp(z - top)
    total = e.sum(axis=0)
    lam = e / total
    f = np.exp(-(top + np.log(total)) / sharpness)
    return f, lam


class SoftBottleneck(_PairsObjective):
    """The power-mean soft minimum of the pairs' D (a smooth stand-in for the bottleneck
    min_p D_p, from below; exact as `sharpness` -> infinity). `rough`: the pairs' D and
    weights from the Bhattacharyya coefficients where they resolve D (KModels.pair_terms),
    for the exploring climbs."""

    def __init__(self, models: KModels, sharpness: float, rough: bool = False):
        super().__init__(models)
        self.sharpness = float(sharpness)
        self.rough = rough

    def evaluate(self, X):
        D, combine = self.models.pair_terms(X, rough=self.rough)
        f, lam = soft_minimum(D, self.sharpness)
        mu = f * lam / np.maximum(D, TINY_D)
        return f, *combine(mu)

    def value(self, X):
        return soft_minimum(self.models.pair_distances(X, ranking=self.rough), self.sharpness)[0]


def kway_scores_at(models, x: np.ndarray, rows: int | None = None):
    """(r, deltas) at one query in float64, streamed over row blocks: r = M_1 x and
    deltas[k] = (M_k - M_1) x from the differences (deltas[0] = 0); no stacked matrix built."""
    from bhtcli.models.softmax import stream_rows
    n, d = models[0].shape
    rows = stream_rows(d) if rows is None else rows
    x = np.asarray(x, dtype=np.float64)
    r = np.empty(n)
    deltas = [np.zeros(n)] + [np.empty(n) for _ in models[1:]]
    for s in range(0, n, rows):
        first = np.asarray(models[0][s:s + rows], dtype=np.float64)
        r[s:s + rows] = first @ x
        for k in range(1, len(models)):
            deltas[k][s:s + rows] = (np.asarray(models[k][s:s + rows], dtype=np.float64) - first) @ x
    return r, deltas


# S Q X in float32 with at most this many columns is formed as (S Q) X and transposed: a
# product of 200,000 x 88 float32 with k = 2..16 columns took 6.9-14.8 ms this way against
# 17.4-23.8 ms as X^T (S Q)^T (the rows the fused pairs read), the same either way at 20 and
# slower from 24 on; in float64 the X^T (S Q)^T form is the faster at every width measured
# (OpenBLAS 0.3.31, numpy 2.4; docs/benchmarks.md)
FORWARD_ROWS_MAX_K = 16


class ReducedKModels(KModels):
    """The K models restricted to x = Q y: S Q (K n x r) as the stacked matrix. Its products
    read K n x r numbers, not the models, and are not counted as passes over them."""

    def __init__(self, SQ: np.ndarray, K: int, n: int):
        self._hold(SQ, K, n, timed=False)   # products in the subspace are not passes: not timed

    def _multiply(self, kind: str, M: np.ndarray, X: np.ndarray, out_dtype=np.float64):
        """M X on the calling thread's BLAS threads (one, inside a search), never all of them:
        S Q is K n x r (70 MB at 50,000 x 88, K = 4, float32), a product with it is bound by
        memory, and after a threaded product OpenBLAS's workers spin for a while on the other
        core, where the certificate's facts run (docs/maths.md §8.12). The result is the
        transpose of a k x (K n) array: the fused pairs read every column's scores as one
        contiguous row (maths/kway_pairs.py: columns_first)."""
        X = np.asarray(X, dtype=M.dtype)
        if M.dtype == np.float32 and M.flags.c_contiguous and 1 < X.shape[1] <= FORWARD_ROWS_MAX_K:
            # OpenBLAS 0.3.31's sgemm is ~3x slower as X^T M^T than as M X at these widths
            return np.ascontiguousarray((M @ X).T, dtype=out_dtype).T
        return np.asarray((X.T @ M.T).T, dtype=out_dtype)


class PairRows:
    """The rows of one stacked block combination sum_k a_k S_k of the K models (S_1 = M_1,
    S_k = M_k - M_1), built on demand: rows[idx] is float64, nothing n x d is materialised."""

    def __init__(self, S: np.ndarray, n: int, coeffs):
        self.S, self.n = S, n
        self.coeffs = [(k, float(a)) for k, a in enumerate(coeffs) if a != 0.0]

    def __getitem__(self, idx):
        idx = np.asarray(idx)
        out = None
        for k, a in self.coeffs:
            part = a * np.asarray(self.S[k * self.n + idx], dtype=np.float64)
            out = part if out is None else out + part
        return out


class PairView:
    """The pair (i, j) of K models as the screens of the sketched search see a SoftmaxPair:
    rows of the midpoint C = M_1 + (Delta_i + Delta_j)/2 and the difference G = Delta_i -
    Delta_j (row-centred, as the stacked blocks are), their row norms and dots from the
    blocks' per-row Gram matrix; plain softmax readout."""

    def __init__(self, models: KModels, i: int, j: int, gram: np.ndarray):
        K, n = models.K, models.n
        a, b = np.zeros(K), np.zeros(K)
        a[0] = 1.0
        for model, sign in ((i, 1.0), (j, -1.0)):
            if model > 0:
                a[model] += 0.5
                b[model] += sign
        self.n, self.d, self.dtype = n, models.d, models.dtype
        self.readout = Readout()
        self.objective = "bhattacharyya"
        self.C, self.G = PairRows(models.S, n, a), PairRows(models.S, n, b)
        self.cache = ProblemCache(
            row_norms=(np.einsum("k,nkl,l->n", a, gram, a), np.einsum("k,nkl,l->n", b, gram, b)),
            row_dots=np.einsum("k,nkl,l->n", a, gram, b))


def block_gram(models: KModels, rows: int = 256) -> np.ndarray:
    """Per row, the Gram matrix of the K blocks' rows: gram[r, k, l] = S_k[r] . S_l[r]
    (n x K x K, float64; K(K+1)/2 row-wise dot products, no pass). Row blocks of the K blocks
    are converted to float64 once into a cache-sized buffer (the same numbers as dot
    products of the stored rows in float64, 3x faster than converting per product), the
    blocks in two halves on two threads."""
    K, n = models.K, models.n
    gram = np.empty((n, K, K))
    starts = list(range(0, n, rows))

    def some(lo, hi):
        buf = np.empty((K, min(rows, n), models.d))
        for s in starts[lo:hi]:
            e = min(s + rows, n)
            for k in range(K):
                np.copyto(buf[k, :e - s], models.S[k * n + s:k * n + e], casting="unsafe")
            rows_k = buf[:, :e - s]
            for k in range(K):
                for l in range(k, K):
                    gram[s:e, k, l] = gram[s:e, l, k] = np.einsum("ij,ij->i", rows_k[k], rows_k[l])
    in_two_halves(some, len(starts))        # the same numbers; 0.19 -> 0.14 s at scale
    return gram


def pairs_at(law, pairs, error: float) -> list:
    """Each pair's H^2, D and predicted count at the one query of `law` (a
    maths.kway.KwayLaw): {i, j, hellinger_squared, bhattacharyya_distance, predicted} per pair,
    the numbers of divergences_from_tilt and query_counts bit for bit. Only D and H^2 are
    taken from the tilt (its memoised g(+-1/2)), not the divergences the report does not print
    (total variation, KL, Chernoff's golden-section search)."""
    import math
    from bhtcli.maths.counts import query_counts
    from bhtcli.maths.divergences import bhattacharyya_from_tilt
    out = []
    for i, j in pairs:
        tilt = law.tilts[(i, j)][0]
        D = bhattacharyya_from_tilt(tilt)[0]
        out.append({"i": i, "j": j, "hellinger_squared": -math.expm1(-D),
                    "bhattacharyya_distance": D,
                    "predicted": query_counts(tilt, D, error).predicted})
    return out
