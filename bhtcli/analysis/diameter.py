"""The row diameter of A - B, max_ij ||(A-B)_i - (A-B)_j|| (docs/maths.md §4): exact for
n <= 10,000, else an upper bound from centred norms, tightened by a pruned exact search."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bhtcli.maths.certificate import EPS
from bhtcli.maths.differences import reference_differences


EXACT_DIAMETER_MAX_N = 10_000


PRUNED_PAIR_WORK = 4e9          # pairs x d for the pruned exact diameter (~ a few seconds)


@dataclass(frozen=True)
class Diameter:
    value: float        # an upper bound on max_ij ||g_i - g_j|| (equal to it when exact)
    exact: bool


def row_diameter(G: np.ndarray, exact_max_n: int = EXACT_DIAMETER_MAX_N,
                 max_pair_work: float = PRUNED_PAIR_WORK, *, mean: np.ndarray | None = None,
                 norms: tuple[np.ndarray, float] | None = None,
                 farthest: float | None = None) -> Diameter:
    """Diameter of the rows of G (a row-centred A - B; docs/maths.md §4.2).

    Exact, with a rounding margin so that it stays an upper bound: by pruned pairs when the
    row norms allow it (a pair can only beat the best distance found if the sum of its norms
    does; the farthest-point heuristic finds a good one first), else by blocked Gram products
    up to `exact_max_n` rows (O(n^2 d)); beyond, 2 max_i ||g_i - mean||, a rigorous upper bound.
    `mean`: G's mean row when already known (it must be the value ``G.mean(axis=0)`` gives);
    `norms`: what :func:`_centred_norms` gives for G and that mean, when already computed;
    `farthest`: the farthest-point bound (:func:`farthest_point`), when already computed.
    """
    n, d = G.shape
    if mean is None:
        mean = np.asarray(G.mean(axis=0, dtype=np.float64))
    # one streamed pass, shared by both paths
    sq, raw = _centred_norms(G, mean) if norms is None else norms
    pruned = _pruned_diameter(G, mean, max_pair_work, norms=(sq, raw), farthest=farthest)
    if pruned is not None:
        return Diameter(pruned, True)
    if n > exact_max_n:                 # streamed: no copy of a large (or float32) G
        return Diameter(2.0 * math.sqrt(float(sq.max())) * (1 + 4 * d * EPS), False)
    Gc = np.asarray(G, dtype=np.float64) - mean
    sq = np.einsum("ij,ij->i", Gc, Gc)
    best = 0.0
    block = max(1, 2_000_000 // max(n, 1))
    for s in range(0, n, block):
        gram = Gc[s:s + block] @ Gc.T
        dist2 = sq[s:s + block, None] + sq[None, :] - 2.0 * gram
        best = max(best, float(dist2.max()))
    # Gram-form rounding: |error| <= ~(d + 2) eps (|g_i|^2 + |g_j|^2) <= 2 (d + 2) eps max|g|^2
    margin = 2.0 * (d + 2) * EPS * float(sq.max())
    return Diameter(math.sqrt(max(best, 0.0) + margin), True)


def _centred_norms(G, mean, rows: int = 8192) -> tuple[np.ndarray, float]:
    """(||G_i - mean||^2 for every i, max_i ||G_i||) in one streamed pass (cache-sized
    sub-blocks; row by row the same values as whole blocks)."""
    n, d = G.shape
    sub = sub_rows(d, rows)
    sq = np.empty(n)
    raw = 0.0                                   # max_i ||G_i|| (absolute rounding scale)
    tg, tc = np.empty((sub, d)), np.empty((sub, d))
    for k in range(0, n, sub):
        m = min(n, k + sub) - k
        blk = f64_rows(G, k, m, tg)
        raw = max(raw, float(np.sqrt(np.einsum("ij,ij->i", blk, blk).max())))
        c = np.subtract(blk, mean, out=tc[:m])
        sq[k:k + m] = np.einsum("ij,ij->i", c, c)
    return sq, raw


def _pruned_diameter(G, mean, max_pair_work: float, rows: int = 8192,
                     norms: tuple[np.ndarray, float] | None = None,
                     farthest: float | None = None) -> float | None:
    """The exact diameter (plus a rounding margin) from the pairs whose norms about the mean
    sum to more than the best distance found; None when those pairs cost more than
    `max_pair_work` (pairs times d) or there are fewer than 3 rows. `norms`: what
    :func:`_centred_norms` gives for G and mean, when already computed; `farthest`: what
    :func:`farthest_point` gives, when already computed."""
    n, d = G.shape
    if n < 3:
        return None
    sq, raw = _centred_norms(G, mean, rows) if norms is None else norms
    nu = np.sqrt(sq)
    sub = sub_rows(d, rows)
    best = farthest_point(G, nu, raw, sub) if farthest is None else farthest
    order = np.argsort(-nu, kind="stable")
    nus = nu[order]
    slack = 1 - 4 * (d + 4) * EPS               # prune only what rounding cannot rescue
    # rows k (in norm order) with partners before them: nus[j] + nus[k] > best
    active = int(np.searchsorted(-(nus + nus[0]), -best * slack, side="left"))
    partners = np.searchsorted(-nus, -(best * slack - nus[:active]), side="left")
    work = float(np.minimum(partners, np.arange(active)).sum()) * d
    if work > max_pair_work:
        return None
    # Row k (in norm order) is compared with the first p_k rows; p_k only shrinks as `best`
    # grows, so the rows up to max_k p_k (the "head") are the only ones held at once; the
    # others are read in blocks (memory: head + one block, never all active rows).
    ks = np.arange(1, active)
    heads = np.minimum(ks, np.searchsorted(-nus, -(best * slack - nus[ks]), side="left"))
    width = int(heads.max()) if heads.size else 0
    head = _rows64(G, order[:width])
    for k0 in range(1, active, rows):
        if nus[k0] + nus[0] <= best * slack:
            break
        block = _rows64(G, order[k0:min(active, k0 + rows)])
        for k in range(k0, min(active, k0 + rows)):
            if nus[k] + nus[0] <= best * slack:
                break
            p = min(k, width, int(np.searchsorted(-nus[:k], -(best * slack - nus[k]), side="left")))
            if p == 0:
                continue
            diff = head[:p] - block[k - k0]
            top = float(np.sqrt(np.einsum("ij,ij->i", diff, diff).max()))
            best = max(best, top)
    # direct differences: relative (d + 2) eps; the centring only enters the pruning (any
    # centre bounds a distance by the two norms about it)
    return float(best * (1 + 4 * (d + 4) * EPS) + 4 * EPS * raw)


def farthest_steps(nu: np.ndarray):
    """The farthest-point steps (a lower bound on the diameter) as a generator: it yields the
    row i to measure from, is sent far_from's (distance, row), and returns the bound. Up to 4
    steps, from the row of largest norm about the mean."""
    best, i = 0.0, int(np.argmax(nu))
    for _ in range(4):
        dist, j = yield i
        if dist <= best:
            break
        best, i = dist, j
    return best


def farthest_point(G, nu: np.ndarray, raw: float, sub: int) -> float:
    """The farthest-point steps' lower bound on the diameter of the rows of G."""
    steps = farthest_steps(nu)
    i = next(steps)
    while True:
        try:
            i = steps.send(far_from(G, i, raw, sub))
        except StopIteration as done:
            return done.value


def far_from(G, i: int, raw: float, sub: int, dist32: np.ndarray | None = None):
    """(max_j ||g_j - g_i||, the first such j) in float64, screened in float32 for float32
    A and B (dist32: the screen's distances, when a pass shared by several pairs made them)."""
    n, d = G.shape
    gi = np.asarray(G[i:i + 1], dtype=np.float64)[0]
    found = _far_from_screened(G, gi, i, raw, sub, dist32) if screens(G) else None
    if found is not None:
        return found
    tg, tc = np.empty((sub, d)), np.empty((sub, d))
    best_d, best_j = -1.0, i
    for s in range(0, n, sub):
        m = min(n, s + sub) - s
        blk = np.subtract(f64_rows(G, s, m, tg), gi, out=tc[:m])
        dist = np.einsum("ij,ij->i", blk, blk)
        j = int(np.argmax(dist))
        if dist[j] > best_d:
            best_d, best_j = float(dist[j]), s + j
    return math.sqrt(best_d), best_j


def screens(G) -> bool:
    """Whether far_from screens G's rows in float32 (A - B of two float32 matrices)."""
    return (isinstance(G, DifferenceRows) and np.asarray(G.A[:1]).dtype == np.float32
            and np.asarray(G.B[:1]).dtype == np.float32)


def distances32(A, B, k: int, m: int, gi32: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """The float32 screen's ||(a_j - b_j) - g_i||^2 for rows k .. k+m (all in float32)."""
    x = np.subtract(A[k:k + m], B[k:k + m], out=buf[:m])
    x -= gi32
    return np.einsum("ij,ij->i", x, x)


def _far_from_screened(G: "DifferenceRows", gi: np.ndarray, i: int, raw: float, sub: int,
                       dist: np.ndarray | None = None):
    """far_from(i) of _pruned_diameter for float32 A and B, the same (distance, row) bit for
    bit: float32 distances from row i screen the rows, and only those whose float32 value is
    within twice its rounding bound of the largest are recomputed in float64 (as before).
    Rounding (docs/maths.md §4.11): with r >= max_j ||g_j||, each float32 difference is within
    e = 8 u32 r of the exact one (u32 = 2^-24), the float32 sum of squares adds gamma32_d of
    it, so |dist32_j - D_j| <= gamma32_d (2r + e)^2 + 4 r e + e^2, and the float64 value is within
    (d + 4) eps64 (2r)^2 of D_j; a row beaten by that much twice over cannot be the maximum.
    None when float32 overflows (then the float64 loop runs)."""
    n, d = G.shape
    if dist is None:
        gi32 = gi.astype(np.float32)
        dist = np.empty(n, dtype=np.float32)
        buf = np.empty((sub, d), dtype=np.float32)
        for s in range(0, n, sub):
            m = min(n, s + sub) - s
            dist[s:s + m] = distances32(G.A, G.B, s, m, gi32, buf)
    tol = screen_tolerance(raw, d)
    top = float(dist.max())
    if not (math.isfinite(top) and math.isfinite(tol)):
        return None                             # float32 overflow: the float64 loop decides
    cand = np.flatnonzero(dist.astype(np.float64) >= top - 4 * tol)
    best_d, best_j = -1.0, i
    for s in range(0, cand.size, sub):
        idx = cand[s:s + sub]
        blk = G[idx] - gi
        dd = np.einsum("ij,ij->i", blk, blk)
        j = int(np.argmax(dd))
        if dd[j] > best_d:
            best_d, best_j = float(dd[j]), int(idx[j])
    return math.sqrt(best_d), best_j


def screen_tolerance(raw: float, d: int) -> float:
    """The bound of _far_from_screened on |dist32_j - D_j| plus the float64 value's error
    (raw >= max_j ||g_j||; docs/maths.md §4.11)."""
    u32 = 2.0 ** -24
    r = 1.001 * raw
    e = 8 * u32 * r
    g32 = d * u32 / (1 - d * u32)
    return g32 * (2 * r + e) ** 2 + 4 * r * e + e * e + (d + 4) * EPS * 4 * r * r


def _rows64(G, index) -> np.ndarray:
    """Rows `index` of G (in that order) in float64; memory maps read them in sorted order."""
    index = np.asarray(index, dtype=np.int64)
    if index.size == 0:
        return np.zeros((0, G.shape[1]))
    sort = np.argsort(index, kind="stable")
    out = np.empty((index.size, G.shape[1]))
    out[sort] = np.asarray(G[index[sort]], dtype=np.float64)
    return out


class DifferenceRows:
    """A - B as a read-only matrix of float64 rows computed on demand (row blocks or index
    arrays), so that the diameter of a float32 pair never holds an n x d float64 copy."""

    ROWS = 8192                 # the blocks of mean() (pair_stats reproduces its sums)

    def __init__(self, A, B):
        self.A, self.B = A, B
        self.shape = A.shape
        self.dtype = np.dtype(np.float64)

    def __getitem__(self, index):
        return np.asarray(self.A[index], dtype=np.float64) - np.asarray(self.B[index], dtype=np.float64)

    def __len__(self) -> int:
        return self.shape[0]

    def rows_into(self, k: int, m: int, out: np.ndarray) -> np.ndarray:
        """Rows k .. k+m into `out` (m x d float64): the same values as ``self[k:k + m]``."""
        np.copyto(out, self.A[k:k + m], casting="unsafe")
        return np.subtract(out, self.B[k:k + m], out=out)     # B up-cast exactly

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self[:], dtype=dtype)

    def mean(self, axis=0, dtype=None, rows: int = ROWS) -> np.ndarray:
        assert axis == 0
        total = np.zeros(self.shape[1])
        for s in range(0, self.shape[0], rows):
            total += self[s:s + rows].sum(axis=0)
        return total / self.shape[0]


def centred_difference(A: np.ndarray, B: np.ndarray, rows: int = 8192) -> np.ndarray:
    """A - B with its mean row subtracted (one streamed pass over A and B), the rows taken
    relative to the first from the exact differences first (maths/differences.py), as the
    float64 SoftmaxPair's G: the same values, bit for bit."""
    G = np.empty(A.shape, dtype=np.float64)
    ref = None
    for s in range(0, A.shape[0], rows):
        # up-cast first: float32 inputs subtracted in float32 would round A - B
        ref = reference_differences(np.asarray(A[s:s + rows], dtype=np.float64),
                                    np.asarray(B[s:s + rows], dtype=np.float64), ref,
                                    out=G[s:s + rows])[1]
    G -= G.mean(axis=0, dtype=np.float64)
    return G


def row_norm_2inf(M: np.ndarray, rows: int = 8192) -> float:
    """max_i ||M_i||_2 (the paper's ||.||_{2->inf}), streamed over row blocks."""
    best = 0.0
    for s in range(0, M.shape[0], rows):
        blk = np.asarray(M[s:s + rows], dtype=np.float64)
        best = max(best, float(np.sqrt(np.einsum("ij,ij->i", blk, blk).max())))
    return best


def sub_rows(d: int, rows: int) -> int:
    """Rows per cache-sized sub-block (~1 MB of float64) of a streamed block of `rows` rows.
    Row-wise results do not depend on it, and RunningSum keeps column sums bit-identical to
    one sum over the whole block (numpy sums axis 0 row by row, except for d = 1, where it
    sums pairwise: no sub-blocks for d <= 16, whose blocks are small anyway)."""
    return rows if d <= 16 else max(16, min(rows, (1 << 17) // d))


def f64_rows(M, k: int, m: int, buf: np.ndarray) -> np.ndarray:
    """Rows k .. k+m of M in float64: M's own rows when they are float64 (read only!),
    else converted into buf[:m]."""
    if isinstance(M, DifferenceRows):
        return M.rows_into(k, m, buf[:m])
    blk = M[k:k + m]
    if isinstance(blk, np.ndarray) and blk.dtype == np.float64:
        return blk
    out = buf[:m]
    np.copyto(out, blk, casting="unsafe")
    return out
