"""Closed-form quantities (no optimisation): the certificate (docs/maths.md §4) and the paper's eps.

For every query x with ||x|| <= E and Delta = (A - B) x:
    D(x) <= range(Delta)^2 / 32 <= E^2 diam^2 / 32,   KL <= range(Delta)^2 / 8 <= E^2 diam^2 / 8,
with diam = max_ij ||(A-B)_i - (A-B)_j|| (invariant under B -> B + 1 w^T). Hence
    H^2_max <= 1 - exp(-E^2 diam^2 / 32),
    any strategy with a fixed budget of N queries (adaptive or not) needs
        N >= ln(1/(4 alpha (1-alpha))) / (2 E^2 diam^2 / 32),
    any sequential strategy needs E[N] >= (1 - 2 alpha) ln((1-alpha)/alpha) / (E^2 diam^2 / 8).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bhtcli.models.readout import Readout
from bhtcli.results import Result
from bhtcli.maths.counts import ceil_count
from bhtcli.io.validation import check_logit_scale

EXACT_DIAMETER_MAX_N = 10_000
EPS = np.finfo(np.float64).eps


@dataclass(frozen=True)
class Diameter:
    value: float        # an upper bound on max_ij ||g_i - g_j|| (equal to it when exact)
    exact: bool


def row_diameter(G: np.ndarray, exact_max_n: int = EXACT_DIAMETER_MAX_N) -> Diameter:
    """Diameter of the rows of G (a row-centred A - B; docs/maths.md §4.2).

    Exact (O(n^2 d), blocked Gram products) up to `exact_max_n` rows, with a rounding margin
    so that it stays an upper bound; beyond, 2 max_i ||g_i - mean||, a rigorous upper bound.
    """
    n, d = G.shape
    mean = np.asarray(G.mean(axis=0, dtype=np.float64))
    if n > exact_max_n:                 # streamed: no copy of a large (or float32) G
        far = 0.0
        for s in range(0, n, 8192):
            blk = np.asarray(G[s:s + 8192], dtype=np.float64) - mean
            far = max(far, float(np.einsum("ij,ij->i", blk, blk).max()))
        return Diameter(2.0 * math.sqrt(far) * (1 + 4 * d * EPS), False)
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


def centred_difference(A: np.ndarray, B: np.ndarray, rows: int = 8192) -> np.ndarray:
    """A - B with its mean row subtracted (one streamed pass over A and B)."""
    G = np.empty(A.shape, dtype=np.float64)
    for s in range(0, A.shape[0], rows):
        np.subtract(A[s:s + rows], B[s:s + rows], out=G[s:s + rows])
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
    """The docs/maths.md §4 bounds for a budget E and a diameter (upper bound)."""
    return certificate_from_spread(energy * diameter, alpha, distinguishable)


def certificate_from_spread(spread: float, alpha: float, distinguishable: bool) -> Certificate:
    """The bounds from L >= max_ij (delta_i - delta_j) over the ball: D <= L^2/32, KL <= L^2/8
    (docs/maths.md §4.1).
    An infinite L (no bound known) gives no certificate (None everywhere)."""
    if not distinguishable:
        return Certificate(0.0, 0.0, 0.0, None, None)
    if not math.isfinite(spread):
        return Certificate(None, None, None, None, None)
    r2 = spread ** 2
    d_max = r2 / 32.0
    kl_max = r2 / 8.0
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


@dataclass(frozen=True)
class PairFacts:
    """What design and bound establish about a pair before any optimisation."""

    eps_2inf: float                 # the paper's eps = ||A - B||_{2->inf}
    diameter: Diameter              # of the rows of A - B
    distinguishable: bool
    reason: str | None              # why not, when the models are the same
    spread: float                   # L >= max_ij (delta_i - delta_j) over the ball (inf: none)
    certificate_note: str | None    # why there is no certificate, or how it was obtained


def analyse_pair(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray, energy: float,
                 readout: Readout | None = None) -> PairFacts:
    """The same-model rule and the spread bound behind the certificate (also checks that the
    budget keeps the logits in float64's useful range; docs/maths.md §1.3, §4.3). pair_G: A - B
    (centred or not)."""
    readout = Readout() if readout is None else readout
    n = A.shape[0]
    eps_2inf = max(row_norm_2inf(np.asarray(A[s:s + 8192], dtype=np.float64)
                                 - np.asarray(B[s:s + 8192], dtype=np.float64))
                   for s in range(0, n, 8192))
    norm_a, norm_b = row_norm_2inf(A), row_norm_2inf(B)
    max_norm = max(norm_a, norm_b)
    check_logit_scale(energy, max_norm)
    diam = row_diameter(pair_G)
    _, dbias = readout.bias_offsets(n)
    bias_range = float(dbias.max() - dbias.min())
    bias_scale = max(_abs_max(readout.bias_a), _abs_max(readout.bias_b))
    tiny = 32.0 * EPS * max(max_norm, bias_scale)          # docs/maths.md §1.3
    same = _same_model(A, B, readout, diam.value, bias_range, tiny)
    if same:
        return PairFacts(eps_2inf, diam, False, same, 0.0, None)
    spread = energy * diam.value + bias_range
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
            note = ("certificate for taylor links: the spread of log-weight differences is "
                    f"bounded by E diam + bias range + the oscillation of log T_K(s) - s ({wobble:.3g}); "
                    "valid but loose")
    return PairFacts(eps_2inf, diam, True, None, spread, note)


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
    if la == lb and la.kind == "taylor":
        if max(row_norm_2inf(ta - tb) for ta, tb in blocks()) <= tiny:
            return f"A and B are equal (rows and biases), with the same link {la.name}"
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
    """Closed-form bounds for two models (docs/maths.md §4 and §5.1).

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
    cert = certificate_from_spread(facts.spread, error, facts.distinguishable)
    eps = facts.eps_2inf
    paper = (1.0 / (eps * energy) ** 2
             if readout.exp_links and facts.distinguishable and eps > 0 else None)
    return BoundResult("softmax", A.shape[0], A.shape[1], energy, error, eps, facts.diameter.value,
                       facts.diameter.exact, facts.distinguishable, facts.reason,
                       cert.hellinger_squared_max_bound, cert.bhattacharyya_max_bound,
                       cert.kl_max_bound, cert.samples_lower_any_strategy,
                       cert.mean_samples_lower_sequential, paper,
                       facts.spread if np.isfinite(facts.spread) else None,
                       facts.certificate_note, readout.description)
