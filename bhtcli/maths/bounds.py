"""Closed-form quantities (no optimisation): the certificate (docs/maths.md §4, §12) and the
paper's eps.

Every ceiling bounds V >= sup over ||x|| <= E and |t| <= 1/2 of Var_{pi_t}(delta), with
pi_t = softmax(c + t delta), c and delta the midpoint log-weights and their difference; then
for every query D(x) <= V/8 and KL <= V/2 (docs/maths.md §12):
    range:   V = L^2/4, L >= range(delta) over the ball (L = E diam + bias range for softmax,
             diam = max_ij ||(A-B)_i - (A-B)_j||, invariant under B -> B + 1 w^T): D <= L^2/32;
    per_row: V = sup_x sum_i cap_i (h_i x + e_i)^2 with weight caps pi_i <= cap_i from Jensen
             (about e^{E r_i}/n, r_i = max(||a_i - abar||, ||b_i - bbar||), plus the centred
             biases): D <= (E^2/8) lambda_max((1/n) sum_i e^{E r_i} h_i h_i^T) without biases.
The certificate takes the smaller. Hence H^2_max <= 1 - exp(-V/8),
    any strategy with a fixed budget of N queries (adaptive or not) needs
        N >= ln(1/(4 alpha (1-alpha))) / (2 V/8),
    any sequential strategy needs E[N] >= (1 - 2 alpha) ln((1-alpha)/alpha) / (V/2).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bhtcli.models.links import softcap_spread
from bhtcli.models.readout import Readout
from bhtcli.results import Result
from bhtcli.maths.counts import ceil_count
from bhtcli.io.validation import check_logit_scale

EXACT_DIAMETER_MAX_N = 10_000
PRUNED_PAIR_WORK = 4e9          # pairs x d for the pruned exact diameter (~ a few seconds)
EPS = np.finfo(np.float64).eps


@dataclass(frozen=True)
class Diameter:
    value: float        # an upper bound on max_ij ||g_i - g_j|| (equal to it when exact)
    exact: bool


def row_diameter(G: np.ndarray, exact_max_n: int = EXACT_DIAMETER_MAX_N,
                 max_pair_work: float = PRUNED_PAIR_WORK, *, mean: np.ndarray | None = None) -> Diameter:
    """Diameter of the rows of G (a row-centred A - B; docs/maths.md §4.2).

    Exact, with a rounding margin so that it stays an upper bound: by pruned pairs when the
    row norms allow it (a pair can only beat the best distance found if the sum of its norms
    does; the farthest-point heuristic finds a good one first), else by blocked Gram products
    up to `exact_max_n` rows (O(n^2 d)); beyond, 2 max_i ||g_i - mean||, a rigorous upper bound.
    `mean`: G's mean row when already known (it must be the value ``G.mean(axis=0)`` gives).
    """
    n, d = G.shape
    if mean is None:
        mean = np.asarray(G.mean(axis=0, dtype=np.float64))
    sq, raw = _centred_norms(G, mean)          # one streamed pass, shared by both paths
    pruned = _pruned_diameter(G, mean, max_pair_work, norms=(sq, raw))
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
    sub = _sub_rows(d, rows)
    sq = np.empty(n)
    raw = 0.0                                   # max_i ||G_i|| (absolute rounding scale)
    tg, tc = np.empty((sub, d)), np.empty((sub, d))
    for k in range(0, n, sub):
        m = min(n, k + sub) - k
        blk = _f64_rows(G, k, m, tg)
        raw = max(raw, float(np.sqrt(np.einsum("ij,ij->i", blk, blk).max())))
        c = np.subtract(blk, mean, out=tc[:m])
        sq[k:k + m] = np.einsum("ij,ij->i", c, c)
    return sq, raw


def _pruned_diameter(G, mean, max_pair_work: float, rows: int = 8192,
                     norms: tuple[np.ndarray, float] | None = None) -> float | None:
    """The exact diameter (plus a rounding margin) from the pairs whose norms about the mean
    sum to more than the best distance found; None when those pairs cost more than
    `max_pair_work` (pairs times d) or there are fewer than 3 rows. `norms`: what
    :func:`_centred_norms` gives for G and mean, when already computed."""
    n, d = G.shape
    if n < 3:
        return None
    sq, raw = _centred_norms(G, mean, rows) if norms is None else norms
    nu = np.sqrt(sq)
    sub = _sub_rows(d, rows)
    tg, tc = np.empty((sub, d)), np.empty((sub, d))

    screen = (isinstance(G, DifferenceRows) and np.asarray(G.A[:1]).dtype == np.float32
              and np.asarray(G.B[:1]).dtype == np.float32)

    def far_from(i):
        gi = np.asarray(G[i:i + 1], dtype=np.float64)[0]
        found = _far_from_screened(G, gi, i, raw, sub) if screen else None
        if found is not None:
            return found
        best_d, best_j = -1.0, i
        for s in range(0, n, sub):
            m = min(n, s + sub) - s
            blk = np.subtract(_f64_rows(G, s, m, tg), gi, out=tc[:m])
            dist = np.einsum("ij,ij->i", blk, blk)
            j = int(np.argmax(dist))
            if dist[j] > best_d:
                best_d, best_j = float(dist[j]), s + j
        return math.sqrt(best_d), best_j

    best, i = 0.0, int(np.argmax(nu))
    for _ in range(4):                          # farthest-point steps: a lower bound
        dist, j = far_from(i)
        if dist <= best:
            break
        best, i = dist, j
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


def _far_from_screened(G: "DifferenceRows", gi: np.ndarray, i: int, raw: float, sub: int):
    """far_from(i) of _pruned_diameter for float32 A and B, the same (distance, row) bit for
    bit: float32 distances from row i screen the rows, and only those whose float32 value is
    within twice its rounding bound of the largest are recomputed in float64 (as before).
    Rounding (docs/maths.md §15): with r >= max_j ||g_j||, each float32 difference is within
    e = 8 u32 r of the exact one (u32 = 2^-24), the float32 sum of squares adds gamma32_d of
    it, so |dist32_j - D_j| <= gamma32_d (2r + e)^2 + 4 r e + e^2, and the float64 value is within
    (d + 4) eps64 (2r)^2 of D_j; a row beaten by that much twice over cannot be the maximum.
    None when float32 overflows (then the float64 loop runs)."""
    n, d = G.shape
    A, B = G.A, G.B
    gi32 = gi.astype(np.float32)
    dist = np.empty(n, dtype=np.float32)
    buf = np.empty((sub, d), dtype=np.float32)
    for s in range(0, n, sub):
        m = min(n, s + sub) - s
        x = np.subtract(A[s:s + m], B[s:s + m], out=buf[:m])
        x -= gi32
        dist[s:s + m] = np.einsum("ij,ij->i", x, x)
    u32 = 2.0 ** -24
    r = 1.001 * raw
    e = 8 * u32 * r
    g32 = d * u32 / (1 - d * u32)
    tol = g32 * (2 * r + e) ** 2 + 4 * r * e + e * e + (d + 4) * EPS * 4 * r * r
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
    """A - B with its mean row subtracted (one streamed pass over A and B)."""
    G = np.empty(A.shape, dtype=np.float64)
    for s in range(0, A.shape[0], rows):
        # up-cast first: float32 inputs subtracted in float32 would round A - B
        np.subtract(np.asarray(A[s:s + rows], dtype=np.float64),
                    np.asarray(B[s:s + rows], dtype=np.float64), out=G[s:s + rows])
    G -= G.mean(axis=0)
    return G


def row_norm_2inf(M: np.ndarray, rows: int = 8192) -> float:
    """max_i ||M_i||_2 (the paper's ||.||_{2->inf}), streamed over row blocks."""
    best = 0.0
    for s in range(0, M.shape[0], rows):
        blk = np.asarray(M[s:s + rows], dtype=np.float64)
        best = max(best, float(np.sqrt(np.einsum("ij,ij->i", blk, blk).max())))
    return best


@dataclass(frozen=True)
class Certificate:
    hellinger_squared_max_bound: float
    bhattacharyya_max_bound: float
    kl_max_bound: float
    samples_lower_any_strategy: int | None
    mean_samples_lower_sequential: int | None

    def to_dict(self):
        return asdict(self)


def certificate(energy: float, diameter: float, alpha: float, distinguishable: bool) -> Certificate:
    """The range bound for a budget E and a diameter (upper bound; docs/maths.md §4)."""
    return certificate_from_spread(energy * diameter, alpha, distinguishable)


def certificate_from_spread(spread: float, alpha: float, distinguishable: bool) -> Certificate:
    """The bounds from L >= max_ij (delta_i - delta_j) over the ball: D <= L^2/32, KL <= L^2/8
    (docs/maths.md §4.1).
    An infinite L (no bound known) gives no certificate (None everywhere)."""
    return certificate_from_variance(spread ** 2 / 4.0 if math.isfinite(spread) else None,
                                     alpha, distinguishable)


def certificate_from_variance(variance: float | None, alpha: float,
                              distinguishable: bool) -> Certificate:
    """The bounds from V >= sup over the ball and |t| <= 1/2 of Var_{pi_t}(delta):
    D <= V/8 and KL <= V/2 (docs/maths.md §12). None: no certificate."""
    if not distinguishable:
        return Certificate(0.0, 0.0, 0.0, None, None)
    if variance is None or not math.isfinite(variance):
        return Certificate(None, None, None, None, None)
    d_max = variance / 8.0
    kl_max = variance / 2.0
    h2_max = -math.expm1(-d_max)
    n_any = n_seq = None
    if d_max > 0:
        n_any = ceil_count(math.log(1.0 / (4 * alpha * (1 - alpha))) / (2.0 * d_max))
        # A lower bound on a mean: rounding down keeps it a valid bound.
        seq = (1 - 2 * alpha) * math.log((1 - alpha) / alpha) / kl_max
        n_seq = math.floor(seq) if math.isfinite(seq) else None
    return Certificate(h2_max, d_max, kl_max, n_any, n_seq)


@dataclass(frozen=True)
class BoundResult(Result):
    """What `bht bound` reports: closed-form quantities, no optimisation."""

    model: str
    n: int
    d: int
    energy: float
    target_error: float
    row_norm_2inf: float            # the paper's eps = ||A - B||_{2->inf}
    row_diameter: float             # diam of the rows of A - B (upper bound when not exact)
    row_diameter_exact: bool
    distinguishable: bool
    note: str | None                # why not distinguishable, when the models are the same
    hellinger_squared_max_bound: float
    bhattacharyya_max_bound: float
    kl_max_bound: float
    samples_lower_any_strategy: int | None
    mean_samples_lower_sequential: int | None
    paper_lower_order: float | None   # Thm 3.2: Omega(eps^-2 E^-2), reported without constant
    score_spread_bound: float | None = None   # L >= max_ij (delta_i - delta_j) over the ball
    certificate_note: str | None = None
    readout: dict | None = None               # links and biases
    ceiling_method: str | None = None         # the bound that gives the ceiling: per_row, range
    ceilings: dict | None = None              # H^2 ceiling of each bound (None: does not apply)


@dataclass(frozen=True)
class PairFacts:
    """What design and bound establish about a pair before any optimisation."""

    eps_2inf: float                 # the paper's eps = ||A - B||_{2->inf}
    diameter: Diameter              # of the rows of A - B
    distinguishable: bool
    reason: str | None              # why not, when the models are the same
    spread: float                   # L >= max_ij (delta_i - delta_j) over the ball (inf: none)
    certificate_note: str | None    # why there is no certificate, or how it was obtained
    ceiling: Ceiling | None = None  # the variance ceiling behind the certificate


@dataclass(frozen=True)
class PairBase:
    """What the certificate needs that does not depend on the budget: one computation serves
    every budget of a ladder, a budget curve or a --queries bisection."""

    stats: "PairStats"
    diameter: Diameter
    bias_range: float
    same: str | None                # why A and B are the same model (None: they differ)


def pair_base(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray,
              readout: Readout | None = None) -> PairBase:
    """Row statistics (one streamed pass over A and B), the row diameter and the same-model
    rule (docs/maths.md §1.3, §4.2). pair_G: A - B (centred or not)."""
    readout = Readout() if readout is None else readout
    stats = pair_stats(A, B)
    if np.asarray(pair_G[:1]).dtype != np.float64:    # a float32 search's G is rounded
        pair_G = DifferenceRows(A, B)                   # float64 rows, streamed
    mean = stats.gmean if isinstance(pair_G, DifferenceRows) else None   # saves a pass
    diam = row_diameter(pair_G, mean=mean)
    _, dbias = readout.bias_offsets(A.shape[0])
    bias_range = float(dbias.max() - dbias.min())
    bias_scale = max(_abs_max(readout.bias_a), _abs_max(readout.bias_b))
    tiny = 32.0 * EPS * max(stats.norm_a, stats.norm_b, bias_scale)    # docs/maths.md §1.3
    return PairBase(stats, diam, bias_range, _same_model(A, B, readout, diam.value, bias_range, tiny))


def analyse_pair(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray, energy: float,
                 readout: Readout | None = None, base: PairBase | None = None) -> PairFacts:
    """The same-model rule, the spread bound and the variance ceiling behind the certificate
    (also checks that the budget keeps the logits in float64's useful range; docs/maths.md
    §1.3, §4.3, §12). pair_G: A - B (centred or not). `base` (:func:`pair_base`) reuses the
    budget-independent part; then one streamed pass over A and B (the per-row ceiling's
    accumulator) is all a further budget costs."""
    readout = Readout() if readout is None else readout
    base = pair_base(A, B, pair_G, readout) if base is None else base
    stats, diam = base.stats, base.diameter
    norm_a, norm_b = stats.norm_a, stats.norm_b
    check_logit_scale(energy, max(norm_a, norm_b))
    if base.same:
        return PairFacts(stats.eps_2inf, diam, False, base.same, 0.0, None)
    spread = energy * diam.value + base.bias_range
    note = None
    if not readout.exp_links:
        ba, bb = _abs_max(readout.bias_a), _abs_max(readout.bias_b)
        wobble = (readout.link_a.psi_oscillation(energy * norm_a + ba)
                  + readout.link_b.psi_oscillation(energy * norm_b + bb))
        spread += wobble
        if math.isinf(spread):
            note = ("no certificate: a poly:K link's log-weight K log|s| is unbounded near s = 0, "
                    "so no closed-form bound on the separation holds")
        else:
            note = ("certificate for taylor links: log-weights are the scores plus psi = log T_K(s) - s, "
                    f"whose oscillation over the ball ({wobble:.3g}) widens both the range and the "
                    "per-row bounds; valid but looser than for exp links")
        capped = softcap_spread(readout.link_a, readout.link_b, energy, energy * norm_a + ba,
                                energy * norm_b + bb, stats.eps_2inf, diam.value, base.bias_range,
                                _abs_max(readout.bias_offsets(A.shape[0])[1]))
        if "softcap" in (readout.link_a.kind, readout.link_b.kind):
            note = ("certificate for softcap links: log-weights are the scores plus psi = C tanh(s/C) - s "
                    f"(oscillation over the ball {wobble:.3g})"
                    + ("; both capped, so the range bound uses |phi| < C and 0 < phi' <= 1 "
                       "(docs/maths.md §18)" if capped < math.inf else "")
                    + "; valid but looser than for exp links")
        spread = min(spread, capped)
    ceiling = variance_ceiling(A, B, energy, spread, readout, stats)
    return PairFacts(stats.eps_2inf, diam, True, None, spread, note, ceiling)


def _abs_max(v) -> float:
    return 0.0 if v is None else float(np.max(np.abs(v)))


def _same_model(A, B, readout: Readout, diam: float, bias_range: float, tiny: float) -> str | None:
    """A reason when P_A(x) = P_B(x) for every x, else None."""
    la, lb = readout.link_a, readout.link_b
    if readout.exp_links:
        if diam <= tiny and bias_range <= tiny:
            return ("A and B are the same softmax model: every row of A - B is the same vector "
                    "(B = A + 1 w^T" + (", biases differing by a constant" if not readout.plain else "")
                    + "), so softmax(Ax) = softmax(Bx) for every query")
        return None
    blocks = lambda: _augmented_blocks(A, B, readout.bias_a, readout.bias_b)
    if la == lb and la.kind in ("taylor", "softcap"):
        if max(row_norm_2inf(ta - tb) for ta, tb in blocks()) <= tiny:
            return f"A and B are equal (rows and biases), with the same link {la.name}"
        if la.kind == "taylor":
            return None
    if la == lb and la.kind == "poly":
        sa = sb = 0.0
        for ta, tb in blocks():                 # one pass for both norms
            sa, sb = sa + float(np.sum(ta * ta)), sb + float(np.sum(tb * tb))
        t = math.sqrt(sb / max(sa, 1e-300))
        worst = max(float(np.max(np.minimum(np.linalg.norm(tb - t * ta, axis=1),
                                            np.linalg.norm(tb + t * ta, axis=1))))
                    for ta, tb in blocks())
        if worst <= tiny * max(t, 1.0):
            return (f"B = +-{t:.6g} A row by row (biases included): with the link {la.name}, "
                    "(b_i x)^K is proportional to (a_i x)^K for every query")
        return None
    first = next(blocks())
    a0, b0 = first[0][0], first[1][0]
    if max(max(row_norm_2inf(ta - a0), row_norm_2inf(tb - b0)) for ta, tb in blocks()) <= tiny:
        return ("every row of A is the same (and so is every row of B, biases included): both "
                "models answer uniformly for every query")
    return None


def _augmented_blocks(A, B, bias_a, bias_b, rows: int = 8192):
    """Row blocks of [A, bias_a] and [B, bias_b] in float64 (a bias is one more column:
    s = [A, b] [x; 1]; zero when absent)."""
    for s in range(0, A.shape[0], rows):
        out = []
        for M, bias in ((A, bias_a), (B, bias_b)):
            blk = np.asarray(M[s:s + rows], dtype=np.float64)
            col = np.zeros((blk.shape[0], 1)) if bias is None else np.asarray(bias[s:s + rows], dtype=np.float64)[:, None]
            out.append(np.hstack([blk, col]))
        yield out[0], out[1]


def bound(A, B, energy: float, error: float = 0.05, *, link_a="exp", link_b="exp",
          bias_a=None, bias_b=None) -> BoundResult:
    """Closed-form bounds for two models (docs/maths.md §4, §5.1 and §12).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    energy : float
        The budget E on ||x||_2.
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5.
    link_a, link_b, bias_a, bias_b
        As for :func:`bhtcli.commands.design`. With a poly link no certificate exists (fields None,
        `certificate_note` says why); taylor links get a valid but loose one.

    Returns
    -------
    BoundResult
    """
    from bhtcli.io.load import load_pair
    from bhtcli.models.readout import make_readout
    from bhtcli.io.validation import check_energy, check_error

    energy, error = check_energy(energy), check_error(error)
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    facts = analyse_pair(A, B, centred_difference(A, B), energy, readout)
    ceiling = facts.ceiling
    cert = certificate_from_variance(ceiling.variance if ceiling else None, error,
                                     facts.distinguishable)
    eps = facts.eps_2inf
    paper = (1.0 / (eps * energy) ** 2
             if readout.exp_links and facts.distinguishable and eps > 0 else None)
    return BoundResult("softmax", A.shape[0], A.shape[1], energy, error, eps, facts.diameter.value,
                       facts.diameter.exact, facts.distinguishable, facts.reason,
                       cert.hellinger_squared_max_bound, cert.bhattacharyya_max_bound,
                       cert.kl_max_bound, cert.samples_lower_any_strategy,
                       cert.mean_samples_lower_sequential, paper,
                       facts.spread if np.isfinite(facts.spread) else None,
                       join_notes(facts.certificate_note, ceiling.note if ceiling else None),
                       readout.description,
                       ceiling.method if ceiling else None, ceiling.candidates if ceiling else None)


# --- the variance ceiling (docs/maths.md §12) -------------------------
#
# Every ceiling here bounds V >= sup over ||x|| <= E and |t| <= 1/2 of Var_{pi_t}(delta),
# pi_t = softmax(c + t delta) (c, delta the midpoint log-weights and their difference). Then
#     D(x) <= V / 8   and   KL(P_A || P_B), KL(P_B || P_A) <= V / 2   for every query.
# "range":   V = L^2 / 4 with L >= range(delta) over the ball (Popoviciu).
# "per_row": pi_{t,i} <= cap_i (Jensen on the log-partition function) and
#            V = sup_{||x|| <= E} sum_i cap_i (h_i x + e_i)^2 (second moment about the uniform
#            mean; h, e the row-centred A - B and bias difference), a trust-region problem
#            solved through a d x d eigendecomposition.

CEILING_ROWS = 8192
# The per-row ceiling's d x d Gram (2 n d^2 flops) and eigendecomposition are skipped when a
# cheap lower bound on their result (one O(n d) pass) already exceeds the range ceiling, so
# that they could not bind (docs/maths.md §15), for pairs with n d^2 at least this (below it
# they cost little and the per-row value is reported as well). math.inf: never skip.
PER_ROW_SKIP_MIN_WORK = float(1 << 30)


@dataclass(frozen=True)
class Ceiling:
    """The smallest valid variance ceiling found and the H^2 ceiling of each candidate."""

    variance: float | None          # V (None: no valid ceiling)
    method: str | None              # the candidate that binds: "per_row" or "range"
    candidates: dict                # method -> H^2 ceiling 1 - exp(-V/8) (None: not applicable)
    note: str | None = None         # why a candidate does not apply


def variance_ceiling(A, B, energy: float, spread: float, readout: Readout | None = None,
                     stats: PairStats | None = None, rows: int = CEILING_ROWS) -> Ceiling:
    """The smallest of the variance ceilings that apply (see the module notes).

    Parameters
    ----------
    A, B : (n, d) arrays (any float dtype, memory maps welcome: streamed by row blocks)
    energy : float
        The budget E.
    spread : float
        L >= the range of delta over the ball (the range ceiling V = L^2 / 4; inf: none).
    readout : Readout, optional
        Links and biases. The per-row ceiling holds for exp and taylor links (poly: no).
    stats : PairStats, optional
        From :func:`pair_stats` (else one more pass computes it).
    """
    readout = Readout() if readout is None else readout
    cands, values = {}, {}
    if math.isfinite(spread):
        values["range"] = spread ** 2 / 4.0
    note = None
    per_row, why = per_row_variance(A, B, energy, readout, stats, rows, above=values.get("range"))
    if per_row is not None:
        values["per_row"] = per_row
    else:
        note = why
    for m in ("per_row", "range"):
        cands[m] = _h2(values[m]) if m in values else None
    if not values:
        return Ceiling(None, None, cands, note)
    method = min(values, key=values.get)
    return Ceiling(values[method], method, cands, note)


def _h2(variance: float) -> float:
    return -math.expm1(-variance / 8.0)


@dataclass(frozen=True)
class PairStats:
    """What one streamed pass over A and B gives (float64)."""

    abar: np.ndarray            # mean row of A
    bbar: np.ndarray            # mean row of B
    mean_abs: np.ndarray        # mean of |A| + |B| + |A - B| by column (rounding margins)
    norm_a: float               # max_i ||a_i||
    norm_b: float               # max_i ||b_i||
    eps_2inf: float             # max_i ||a_i - b_i||, the paper's eps
    gmean: np.ndarray | None = None   # mean row of A - B, as DifferenceRows.mean computes it


def _sub_rows(d: int, rows: int) -> int:
    """Rows per cache-sized sub-block (~1 MB of float64) of a streamed block of `rows` rows.
    Row-wise results do not depend on it, and _RunningSum keeps column sums bit-identical to
    one sum over the whole block (numpy sums axis 0 row by row, except for d = 1, where it
    sums pairwise: no sub-blocks for d <= 16, whose blocks are small anyway)."""
    return rows if d <= 16 else max(16, min(rows, (1 << 17) // d))


def _f64_rows(M, k: int, m: int, buf: np.ndarray) -> np.ndarray:
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


class _RunningSum:
    """Column sums of consecutive sub-blocks, added row by row in the order in which
    ``block.sum(axis=0)`` over their concatenation adds them (so the bits are the same).
    A sub-block is written into ``rows(m)`` (row 0 of the buffer is kept for the sum so far),
    so adding it copies nothing."""

    def __init__(self, d: int, sub: int):
        self.buf = np.empty((sub + 1, d))
        self.acc = None

    def rows(self, m: int) -> np.ndarray:
        return self.buf[1:m + 1]

    def add(self, m: int) -> None:
        if self.acc is None:
            self.acc = self.buf[1:m + 1].sum(axis=0)
            return
        self.buf[0] = self.acc
        self.acc = self.buf[:m + 1].sum(axis=0)

    def pop(self) -> np.ndarray:
        acc, self.acc = self.acc, None
        return acc


def pair_stats(A, B, rows: int = CEILING_ROWS) -> PairStats:
    """Row means, largest row norms and ||A - B||_{2->inf} in one streamed pass (blocks of
    `rows` rows, each read in cache-sized sub-blocks; the values do not depend on the latter)."""
    n, d = A.shape
    sub = _sub_rows(d, rows)
    sa, sb, sg, sabs = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d)
    na = nb = ng = 0.0
    tu = np.empty((sub, d))
    ra, rb, rg, rt = (_RunningSum(d, sub) for _ in range(4))
    for s in range(0, n, rows):
        end = min(n, s + rows)
        for k in range(s, end, sub):
            m = min(end, k + sub) - k
            a, b, g, t = ra.rows(m), rb.rows(m), rg.rows(m), rt.rows(m)
            np.copyto(a, A[k:k + m], casting="unsafe")
            np.copyto(b, B[k:k + m], casting="unsafe")
            np.subtract(a, b, out=g)
            na = max(na, float(np.einsum("ij,ij->i", a, a).max()))
            nb = max(nb, float(np.einsum("ij,ij->i", b, b).max()))
            ng = max(ng, float(np.einsum("ij,ij->i", g, g).max()))
            ra.add(m)
            rb.add(m)
            rg.add(m)
            np.abs(a, out=t)                    # (|a| + |b|) + |g|, as before
            t += np.abs(b, out=tu[:m])
            t += np.abs(g, out=g)
            rt.add(m)
        sa += ra.pop()
        sb += rb.pop()
        sg += rg.pop()
        sabs += rt.pop()
    gmean = sg / n if rows == DifferenceRows.ROWS else None    # the same sums as its mean()
    return PairStats(sa / n, sb / n, sabs / n, math.sqrt(na), math.sqrt(nb), math.sqrt(ng), gmean)


def _link_oscillation(link, radius: float) -> float:
    return 0.0 if link.is_exp else link.psi_oscillation(radius)


def per_row_variance(A, B, energy: float, readout: Readout | None = None, stats=None,
                     rows: int = CEILING_ROWS, *, above: float | None = None):
    """(V, None) with V >= sup_{x, t} Var_{pi_t}(delta) from per-row weight caps, or
    (None, reason) when the proof does not cover the links, or when `above` (a variance
    ceiling already known, e.g. the range one) is given, n d^2 >= PER_ROW_SKIP_MIN_WORK and a
    lower bound on V exceeds it: then V could not be the smaller one and is not computed.

    One streamed pass over A and B (plus :func:`pair_stats` when not given), a d x d
    accumulator and one d x d eigendecomposition; rounding can only increase the result
    (float64 throughout, margins from the standard error bounds: docs/maths.md). The skip
    test costs one streamed pass without the d x d work (docs/maths.md §15).
    """
    readout = Readout() if readout is None else readout
    la, lb = readout.link_a, readout.link_b
    if la.kind == "poly" or lb.kind == "poly":
        return None, "no per-row ceiling either (no weight cap holds for poly:K)"
    n, d = A.shape
    E = float(energy)
    stats = pair_stats(A, B, rows) if stats is None else stats
    abar, bbar = stats.abar, stats.bbar
    alpha = np.zeros(n) if readout.bias_a is None else np.asarray(readout.bias_a, dtype=np.float64)
    beta = np.zeros(n) if readout.bias_b is None else np.asarray(readout.bias_b, dtype=np.float64)
    at, bt = alpha - alpha.mean(), beta - beta.mean()        # centred biases
    e = at - bt                                              # centred bias difference
    osc_a = osc_b = 0.0
    if not readout.exp_links:
        # psi = phi - s oscillates by at most osc over the scores' range [-R, R]
        na, nb = stats.norm_a, stats.norm_b
        ra_, rb_ = E * na + float(np.max(np.abs(alpha))), E * nb + float(np.max(np.abs(beta)))
        osc_a, osc_b = _link_oscillation(la, ra_), _link_oscillation(lb, rb_)
        if not (math.isfinite(osc_a) and math.isfinite(osc_b)):
            return None, "per-row ceiling: the links' oscillation is unbounded"
        # the log-weight spread stays below links.LOG_FLOOR, so no weight is floored
        from bhtcli.models.links import LOG_FLOOR
        if 2 * ra_ + osc_a > LOG_FLOOR or 2 * rb_ + osc_b > LOG_FLOOR:
            return None, "per-row ceiling: log-weights span more than the link floor"
    log_n1 = math.log(n - 1) if n > 1 else -math.inf
    # rounding of the means: ||computed mean - exact|| <= gamma_{n+2} ||mean |.| || (any order)
    gam = _gamma(n + 2)
    mean_err = 1.01 * gam * float(np.linalg.norm(stats.mean_abs))
    if above is not None and n * d * d >= PER_ROW_SKIP_MIN_WORK:
        low = per_row_floor(A, B, E, stats, at, bt, e, osc_a, osc_b, mean_err, rows)
        if low > above:
            return None, (f"per-row ceiling not computed: it is at least {_h2(low):.3g}, above the "
                          f"range ceiling {_h2(above):.3g}, so it cannot bind (docs/maths.md §15)")
    S = np.zeros((d, d))
    sv, sh = np.zeros(d), np.zeros(d)
    c0 = se = w = 0.0
    trace_abs = 0.0        # sum_i cap_i ||h_i||^2 (for the Gram rounding margin)
    h_err = 0.0            # max_i of a bound on ||computed h_i - exact h_i||
    gbar = abar - bbar
    for s in range(0, n, rows):
        a = np.asarray(A[s:s + rows], dtype=np.float64)
        b = np.asarray(B[s:s + rows], dtype=np.float64)
        g = a - b
        h = g - gbar
        ac, bc = a - abar, b - bbar
        na = np.sqrt(np.einsum("ij,ij->i", ac, ac))
        nb = np.sqrt(np.einsum("ij,ij->i", bc, bc))
        rho = np.maximum(E * na + at[s:s + rows] + osc_a, E * nb + bt[s:s + rows] + osc_b)
        # rounding up: norms (relative (d + 4) eps), the means (mean_err), the biases
        rho = (rho * (1 + 8 * (d + 4) * EPS) + 2 * E * mean_err
               + 8 * EPS * (E * (na + nb) + np.abs(at[s:s + rows]) + np.abs(bt[s:s + rows]) + 1.0))
        cap = _weight_cap(rho, n, log_n1) * (1 + 8 * EPS)
        hh = np.einsum("ij,ij->i", h, h)
        es = e[s:s + rows]
        S += (h * cap[:, None]).T @ h
        sv += (cap * es) @ h
        sh += cap @ h
        c0 += float(cap @ (es * es))
        se += float(cap @ es)
        w += float(cap.sum())
        trace_abs += float(cap @ hh) + float(cap @ (es * es))
        gn = np.sqrt(np.einsum("ij,ij->i", g, g))
        h_err = max(h_err, float(np.max(2 * EPS * (gn + np.sqrt(hh)))))
    h_err += 2 * mean_err
    e_err = 4 * EPS * (float(np.max(np.abs(alpha))) + float(np.max(np.abs(beta)))) * (1 + gam)
    # centre at the cap-weighted mean (m, mu0) = (sh, se) / w: sum_i cap_i ((h_i - m) x +
    # e_i - mu0)^2 is still >= Var_pi(delta), and never larger than about the uniform mean
    m, mu0 = sh / w, se / w
    S = S - w * np.outer(m, m)
    sv = sv - w * mu0 * m
    c0 = max(c0 - w * mu0 * mu0, 0.0)
    S = 0.5 * (S + S.T)
    sigma, Q = np.linalg.eigh(S)
    # exact S <= computed S + delta I: Gram rounding (gamma_{n+2} sum cap |h|^2, Frobenius <=
    # trace for the PSD |H|^T W |H|) and the eigensolver's backward error
    top = max(float(np.max(np.abs(sigma))), 0.0)
    delta = 3 * gam * trace_abs + 16 * (d + 1) * EPS * top
    st = Q.T @ sv
    quad = _trust_region_max(sigma + delta, st, c0, E)
    quad = quad * (1 + 16 * (d + 1) * EPS) + 3 * gam * trace_abs + 16 * (d + 1) * EPS * (c0 + E * float(np.linalg.norm(sv)))
    # Minkowski: the inexact h and e add at most E h_err + e_err to the root-mean-square
    root = math.sqrt(max(quad, 0.0)) + E * h_err + e_err + osc_a + osc_b
    return root * root * (1 + 4 * EPS), None


def per_row_floor(A, B, E: float, stats: PairStats, at, bt, e, osc_a: float, osc_b: float,
                  mean_err: float, rows: int = CEILING_ROWS) -> float:
    """A lower bound on the value :func:`per_row_variance` computes (docs/maths.md §15):
    (E^2 / d) min_m sum_i c_i ||h_i - m||^2 + min_mu sum_i c_i (e_i - mu)^2, with caps c_i
    below the exact kappa(rho_i) (rho deflated by more than its rounding), minus the rounding
    of these sums. One streamed pass, O(n d), no d x d work.

    at, bt, e: the centred biases and their difference (as per_row_variance computes them);
    osc_a, osc_b: the links' oscillations (0 for exp); mean_err: the bound on the rounding of
    the mean rows.
    """
    n, d = A.shape
    sub = _sub_rows(d, rows)
    abar, bbar = stats.abar, stats.bbar
    gbar = abar - bbar                          # as per_row_variance: the same h, bit for bit
    log_n1 = math.log(n - 1) if n > 1 else -math.inf
    bias_err = 2 * _gamma(n + 2) * (_abs_max(at) + _abs_max(bt) + 1.0)
    ta, tb, tc = (np.empty((sub, d)) for _ in range(3))
    v = np.zeros(d)
    t1 = c2 = c1 = w = 0.0
    for k in range(0, n, sub):
        m = min(n, k + sub) - k
        a, b = _f64_rows(A, k, m, ta), _f64_rows(B, k, m, tb)
        c = np.subtract(a, abar, out=tc[:m])
        na = np.sqrt(np.einsum("ij,ij->i", c, c))
        c = np.subtract(b, bbar, out=tc[:m])
        nb = np.sqrt(np.einsum("ij,ij->i", c, c))
        ak, bk = at[k:k + m], bt[k:k + m]
        rho = np.maximum(E * na + ak + osc_a, E * nb + bk + osc_b)
        # rounding down, by more than per_row_variance rounds up: the exact rho is above
        rho = (rho * (1 - 16 * (d + 4) * EPS) - 2 * E * mean_err - bias_err
               - 16 * EPS * (E * (na + nb) + np.abs(ak) + np.abs(bk) + np.abs(rho) + log_n1 + 1.0))
        cap = _weight_cap(rho, n, log_n1) * (1 - 16 * EPS)
        h = np.subtract(a, b, out=tc[:m])
        h -= gbar
        es = e[k:k + m]
        t1 += float(cap @ np.einsum("ij,ij->i", h, h))
        v += cap @ h
        w += float(cap.sum())
        c2 += float(cap @ (es * es))
        c1 += float(cap @ es)
    if not w > 0:
        return 0.0
    gam = _gamma(n + d + 8)
    trace = t1 - float(v @ v) / w - 8 * gam * t1
    c0 = c2 - c1 * c1 / w - 8 * gam * c2
    return (E * E * max(trace, 0.0) / d + max(c0, 0.0)) * (1 - 32 * EPS)


def _gamma(k: int) -> float:
    return k * EPS / (1 - k * EPS)


def _weight_cap(rho: np.ndarray, n: int, log_n1: float) -> np.ndarray:
    """pi_i <= 1 / (1 + (n-1) exp(-n rho_i / (n-1))) when z_i - mean(z) <= rho_i (Jensen over
    the other n - 1 rows); about e^rho / n for small rho, never above 1."""
    if n == 1:
        return np.ones_like(rho)
    y = n * rho / (n - 1) - log_n1
    from scipy.special import expit
    return expit(y)


def _trust_region_max(sigma: np.ndarray, st: np.ndarray, c0: float, E: float) -> float:
    """An upper bound on sup_{||x|| <= E} x^T S x + 2 s^T x + c0 (S = Q diag(sigma) Q^T,
    st = Q^T s, S PSD): the Lagrangian dual value lam E^2 + c0 + sum st_k^2 / (lam - sigma_k),
    valid for every lam > max(sigma); lam is chosen by bisection on the secular equation."""
    top = max(float(sigma.max()), 0.0)
    s2 = st * st
    norm_s = math.sqrt(float(s2.sum()))
    if norm_s == 0.0:
        return top * E * E + c0

    def dual(lam):
        return lam * E * E + c0 + float(np.sum(s2 / (lam - sigma)))

    # the derivative E^2 - sum s2 / (lam - sigma)^2 is increasing and >= 0 at top + |s| / E
    lo, hi = 0.0, norm_s / E          # offsets above top
    for _ in range(200):
        mid = 0.5 * (lo + hi) if lo > 0 else hi * 0.5
        if mid <= 0 or mid == hi:
            break
        grad = E * E - float(np.sum(s2 / (top + mid - sigma) ** 2))
        if grad > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-15 * (top + hi):
            break
    return min(dual(top + hi), dual(top + norm_s / E))


def join_notes(*notes):
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None
