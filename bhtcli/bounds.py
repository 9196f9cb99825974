"""Closed-form quantities (no optimisation): the certificate of SPEC section 4 and the paper's eps.

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

from .samples import ceil_count
from .validation import check_logit_scale

EXACT_DIAMETER_MAX_N = 10_000
EPS = np.finfo(np.float64).eps


@dataclass(frozen=True)
class Diameter:
    value: float        # an upper bound on max_ij ||g_i - g_j|| (equal to it when exact)
    exact: bool


def row_diameter(G: np.ndarray, exact_max_n: int = EXACT_DIAMETER_MAX_N) -> Diameter:
    """Diameter of the rows of G (a row-centred A - B).

    Exact (O(n^2 d), blocked Gram products) up to `exact_max_n` rows, with a rounding margin
    so that it stays an upper bound; beyond, 2 max_i ||g_i - mean||, a rigorous upper bound.
    """
    n, d = G.shape
    Gc = G - G.mean(axis=0)
    sq = np.einsum("ij,ij->i", Gc, Gc)
    if n > exact_max_n:
        return Diameter(2.0 * math.sqrt(float(sq.max())) * (1 + 4 * d * EPS), False)
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
    """SPEC section 4 bounds for a budget E and a diameter (upper bound)."""
    if not distinguishable:
        return Certificate(0.0, 0.0, 0.0, None, None)
    r2 = (energy * diameter) ** 2
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
class BoundResult:
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
    same_model_reason: str | None
    hellinger_squared_max_bound: float
    bhattacharyya_max_bound: float
    kl_max_bound: float
    samples_lower_any_strategy: int | None
    mean_samples_lower_sequential: int | None
    paper_lower_order: float | None   # Thm 3.2: Omega(eps^-2 E^-2), reported without constant

    def to_dict(self):
        return asdict(self)


def analyse_pair(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray, energy: float):
    """(eps, Diameter, distinguishable, reason) shared by design and bound; also checks that
    the budget keeps the logits in float64's useful range."""
    eps_2inf = max(row_norm_2inf(np.asarray(A[s:s + 8192]) - np.asarray(B[s:s + 8192]))
                   for s in range(0, A.shape[0], 8192))
    max_norm = max(row_norm_2inf(A), row_norm_2inf(B))
    check_logit_scale(energy, max_norm)
    diam = row_diameter(pair_G)
    threshold = 32.0 * EPS * max_norm          # SPEC section 1
    if diam.value <= threshold:
        reason = ("A and B are the same softmax model: every row of A - B is the same vector "
                  "(B = A + 1 w^T), so softmax(Ax) = softmax(Bx) for every query")
        return eps_2inf, diam, False, reason
    return eps_2inf, diam, True, None


def bound(A, B, energy: float, error: float = 0.05) -> BoundResult:
    """Closed-form bounds for two softmax models (SPEC section 4 and the paper's eps).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    energy : float
        The budget E on ||x||_2.
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5.

    Returns
    -------
    BoundResult
    """
    from .io import load_pair
    from .validation import check_energy, check_error

    energy, error = check_energy(energy), check_error(error)
    A, B = load_pair(A, B)
    eps_2inf, diam, distinguishable, reason = analyse_pair(A, B, centred_difference(A, B), energy)
    cert = certificate(energy, diam.value, error, distinguishable)
    paper = 1.0 / (eps_2inf * energy) ** 2 if distinguishable and eps_2inf > 0 else None
    return BoundResult("softmax", A.shape[0], A.shape[1], energy, error, eps_2inf, diam.value,
                       diam.exact, distinguishable, reason, cert.hellinger_squared_max_bound,
                       cert.bhattacharyya_max_bound, cert.kl_max_bound,
                       cert.samples_lower_any_strategy, cert.mean_samples_lower_sequential, paper)
