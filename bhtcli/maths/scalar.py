"""Scalar root finding, bounded minimisation and the normal distribution (Phi, log Phi, Phi^-1)
on floats: the few scalar tools the reports need, in plain Python so that a small design does
not pay scipy's import time (about 0.3 s of CPU, more than the whole search on the bundled
example). Tested against scipy's brentq, minimize_scalar, log_ndtr, ndtr and ndtri in tests."""
from __future__ import annotations

import math

import numpy as np

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_GOLDEN = (3.0 - math.sqrt(5.0)) / 2.0


_RTOL = 4.0 * 2.220446049250313e-16      # scipy.optimize.brentq's default rtol


def root_bracketed(f, a: float, b: float, xtol: float = 1e-12, max_iter: int = 400) -> float:
    """A root of the continuous f in [a, b], where f(a) and f(b) differ in sign (else
    ValueError), to within `xtol` (+ 4 eps |x|): Brent's method, step for step as
    scipy.optimize.brentq (inverse quadratic or secant steps where they shrink the bracket
    fast enough, else bisection), so the same root in as many evaluations -- about 10 for a
    smooth f where bisection alone takes 30-40 (the counts' saddlepoint nests two of them)."""
    xpre, xcur = float(a), float(b)
    fpre, fcur = f(xpre), f(xcur)
    if fpre == 0.0:
        return xpre
    if fcur == 0.0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    xblk = fblk = spre = scur = 0.0
    for _ in range(max_iter):
        if fpre != 0.0 and fcur != 0.0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + _RTOL * abs(xcur)) / 2.0
        sbis = (xblk - xcur) / 2.0
        if fcur == 0.0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:                        # secant
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:                                   # inverse quadratic
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2.0 * abs(stry) < min(abs(spre), 3.0 * abs(sbis) - delta):
                spre, scur = scur, stry             # a good short step
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = f(xcur)
    return xcur


def first_passing(ok, lo: int, hi: int) -> int:
    """The smallest integer N in (lo, hi] with ok(N), for a predicate that stays true once true
    and holds at hi (lo fails, or lies below the range): bisection, one ok per halving. The
    counts' searches (maths/counts.py, maths/kway.py) end here."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def minimize_convex(f, a: float, b: float, xtol: float = 1e-10, max_iter: int = 200):
    """(x, f(x)) minimising a convex (or unimodal) f over [a, b] by golden-section search;
    the ends are candidates too."""
    x1 = a + _GOLDEN * (b - a)
    x2 = b - _GOLDEN * (b - a)
    f1, f2 = f(x1), f(x2)
    lo, hi = a, b
    for _ in range(max_iter):
        if hi - lo <= xtol:
            break
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = lo + _GOLDEN * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = hi - _GOLDEN * (hi - lo)
            f2 = f(x2)
    best = min(((x1, f1), (x2, f2), (a, f(a)), (b, f(b))), key=lambda t: t[1])
    return best


def log_ndtr(x: float) -> float:
    """log Phi(x), the log of the standard normal distribution function, accurate in both
    tails: erfc where it does not underflow, the asymptotic series below x = -30."""
    x = float(x)
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / _SQRT2))
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / _SQRT2))
    # Phi(x) = phi(x)/(-x) (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...), |terms| < 2e-14 at x = -30
    z = 1.0 / (x * x)
    series, term = 1.0, 1.0
    for k in range(1, 7):
        term *= -(2 * k - 1) * z
        series += term
    return -0.5 * x * x - _LOG_SQRT_2PI - math.log(-x) + math.log(series)


def next_fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n: a length the FFT handles fast."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


_SQRT_HALF = math.sqrt(0.5)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def ndtr(x) -> np.ndarray:
    """Phi(x) elementwise, 0.5 erfc(-x / sqrt 2) (math.erfc: accurate in both tails)."""
    return 0.5 * _erfc(-_SQRT_HALF * np.asarray(x, dtype=np.float64)).astype(np.float64)


def ndtri(p) -> np.ndarray:
    """Phi^-1(p) elementwise (statistics.NormalDist: Wichura's AS241); -inf at p <= 0, +inf
    at p >= 1, as scipy.special.ndtri."""
    from statistics import NormalDist
    inv = NormalDist().inv_cdf

    def one(v):
        return -math.inf if v <= 0.0 else math.inf if v >= 1.0 else inv(v)
    return np.array([one(float(v)) for v in np.ravel(p)]).reshape(np.shape(p))


def lugannani_rice_log_lower(w: float, u: float) -> float:
    """log P(sum <= threshold) by Lugannani-Rice: log [Phi(w) + phi(w) (1/w - 1/u)] for
    w, u < 0 (the signed root and the standardised tilt at the saddle point); log 1/2 at the
    centre (|w| or |u| below 1e-6, where 1/u would blow the correction up); the leading term
    phi(w) / (-w) far in the tail, where the correction breaks down."""
    if abs(w) < 1e-6 or abs(u) < 1e-6:
        return math.log(0.5)
    log_phi = -0.5 * w * w - _LOG_SQRT_2PI
    log_Phi = log_ndtr(w)
    ratio = math.exp(log_phi - log_Phi) * (1.0 / w - 1.0 / u)
    if ratio <= -1.0:
        return log_phi - math.log(-w)
    return log_Phi + math.log1p(ratio)
