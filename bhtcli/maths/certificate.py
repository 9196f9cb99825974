"""The certificate's formulas (docs/maths.md §4): from a bound V on the variance of the
log-likelihood ratio, the ceiling on H^2 and KL and the sample counts no strategy can beat."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bhtcli.maths.counts import ceil_count

EPS = np.finfo(np.float64).eps


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
    D <= V/8 and KL <= V/2 (docs/maths.md §4.4). None: no certificate. Not distinguishable:
    no counts, and the ceiling is 0 unless a positive V is given (models equal only up to
    rounding: the ceiling on what exact arithmetic gives stays reported)."""
    if not distinguishable:
        if variance is None or not variance > 0 or not math.isfinite(variance):
            return Certificate(0.0, 0.0, 0.0, None, None)
        return Certificate(-math.expm1(-variance / 8.0), variance / 8.0, variance / 2.0, None, None)
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


def h2_from_variance(variance: float) -> float:
    return -math.expm1(-variance / 8.0)


def rounding_gamma(k: int) -> float:
    return k * EPS / (1 - k * EPS)


def weight_cap(rho: np.ndarray, n: int, log_n1: float) -> np.ndarray:
    """pi_i <= 1 / (1 + (n-1) exp(-n rho_i / (n-1))) when z_i - mean(z) <= rho_i (Jensen over
    the other n - 1 rows); about e^rho / n for small rho, never above 1."""
    if n == 1:
        return np.ones_like(rho)
    y = np.asarray(n * rho / (n - 1) - log_n1, dtype=np.float64)
    # the logistic function 1 / (1 + e^-y), without overflow on either side (a few ulps,
    # inside the margin the caller adds)
    e = np.exp(-np.abs(y))
    return np.where(y >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def trust_region_max(sigma: np.ndarray, st: np.ndarray, c0: float, E: float) -> float:
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



def bennett_phi_upper(R: np.ndarray) -> np.ndarray:
    """An upper bound (a few ulps above) on phi(R) = (e^R - 1 - R) / R^2 (phi(0) = 1/2), the
    coefficient with e^y <= 1 + y + phi(R) y^2 for every y <= R (docs/maths.md §4.14).
    R <= 1: the series sum_k R^k / (k+2)! (positive terms, 24 of them, plus the tail);
    R > 1: the closed form, whose cancellation loses at most a factor (e - 1)/(e - 2) < 2.4."""
    R = np.asarray(R, dtype=np.float64)
    small = np.abs(R) <= 1.0
    Rs = np.where(small, R, 0.0)
    total, term = np.zeros_like(R), np.full_like(R, 0.5)
    for k in range(24):
        total += term
        term = term * Rs / (k + 3)
    series = (total + np.abs(term) * 2) * (1 + 256 * EPS)
    Rb = np.where(small, 2.0, R)
    with np.errstate(over="ignore", invalid="ignore"):
        closed = (np.expm1(Rb) - Rb) / (Rb * Rb) * (1 + 64 * EPS)
    return np.where(small, series, closed)
