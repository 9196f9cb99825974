"""A certified upper bound on the top eigenvalue of a symmetric matrix by one floating-point
Cholesky factorisation (docs/maths.md §4.15): if the factorisation of fl(s I - T) runs to
completion, then lambda_max(T) <= s + a margin that covers every rounding of the
factorisation (Demmel's componentwise bound; Rump 2006)."""
from __future__ import annotations

import math

import numpy as np

EPS = np.finfo(np.float64).eps
UNIT = EPS / 2                       # unit roundoff of float64
TINY = 1e-280                        # absolute allowance for underflow, far above n^2 * 2^-1074


def cholesky_gamma(n: int) -> float:
    """gamma_{n+2}/(1 - gamma_{n+2}), doubled: the factor of tr(M) by which a completed
    floating-point Cholesky of the n x n symmetric M may hide a negative eigenvalue (the +2 and the
    doubling cover kernels that divide by multiplying with a rounded reciprocal, and FMA)."""
    k = n + 2
    gam = k * UNIT / (1 - k * UNIT)
    return 2 * gam / (1 - gam)


def top_eigenvalue_certified(M: np.ndarray, shift: float, error: float = 0.0) -> float | None:
    """An upper bound on lambda_max(T) for every symmetric T with ||T - M||_2 <= error, or None.

    M : (n, n) float64, C-contiguous, symmetric (only its lower triangle is read); it is
        OVERWRITTEN (by s I - M and then its Cholesky factor): the caller's n^2 floats are all
        the memory this needs.
    shift : the trial s (e.g. a little above a Lanczos estimate of lambda_max(M)).
    error : a bound on the spectral norm of the difference between M and the exact matrix.

    If the Cholesky factorisation of the computed fl(s I - M) completes with a positive finite diagonal,
    s I - M >= -(cholesky_gamma(n) tr + 2u max diag) I, so the bound is s plus those and `error`
    (docs/maths.md §4.15). None when the factorisation fails (s is too low, or too close)."""
    n = M.shape[0]
    if M.ndim != 2 or M.shape[1] != n or M.dtype != np.float64 or not M.flags.c_contiguous:
        raise ValueError("M must be a square C-contiguous float64 array")
    if not (math.isfinite(shift) and math.isfinite(error) and error >= 0):
        return None
    np.negative(M, out=M)
    diag = M.reshape(-1)[::n + 1]          # a view of the diagonal
    diag += shift
    if not np.all(np.isfinite(diag)) or np.any(diag <= 0):
        return None
    trace = math.fsum(diag.tolist())
    top_diag = float(diag.max())
    if not cholesky_in_place(M):
        return None
    r = M.reshape(-1)[::n + 1]
    if not (np.all(np.isfinite(r)) and np.all(r > 0)):
        return None
    margin = cholesky_gamma(n) * trace + 2 * UNIT * top_diag + TINY * n
    bound = (shift + margin + error) * (1 + 4 * UNIT)
    return bound if math.isfinite(bound) else None


CHOLESKY_BLOCK = 1024


def cholesky_in_place(M: np.ndarray, block: int = CHOLESKY_BLOCK) -> bool:
    """The lower Cholesky factor of the symmetric C-ordered M (lower triangle read), written
    over its lower triangle; False when a pivot is not positive. Right-looking by blocks of
    columns: LAPACK's dpotrf on each diagonal block, a triangular solve for the panel below, and
    the trailing update by row chunks with conventional matrix products (each entry is still
    a_ij - sum_k l_ik l_jk, summed in some order, divided or square-rooted once: the rounding
    analysis of docs/maths.md §4.15 holds). Written here rather than one dpotrf call because
    OpenBLAS's threaded dpotrf crashed (SIGSEGV) on 24,000 x 24,000 matrices with 2 threads."""
    from scipy.linalg import lapack, solve_triangular

    n = M.shape[0]
    for k0 in range(0, n, block):
        k1 = min(n, k0 + block)
        diag = np.array(M[k0:k1, k0:k1], order="F")
        low, info = lapack.dpotrf(diag, lower=1, clean=1)
        if info != 0 or not np.all(np.isfinite(np.diagonal(low))):
            return False
        M[k0:k1, k0:k1] = np.tril(low) + np.triu(M[k0:k1, k0:k1], 1)
        if k1 == n:
            break
        panel = solve_triangular(low, M[k1:, k0:k1].T, lower=True, check_finite=False).T
        if not np.all(np.isfinite(panel)):
            return False
        M[k1:, k0:k1] = panel
        for r0 in range(k1, n, block):
            r1 = min(n, r0 + block)
            M[r0:r1, k1:r1] -= panel[r0 - k1:r1 - k1] @ panel[:r1 - k1].T
    return True
