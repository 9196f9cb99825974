"""Divergences between softmax(a) and softmax(b) in a cancellation-free form.

Write a = c + delta/2, b = c - delta/2 (c = midpoint logits, delta = logit difference, both
computed from the matrices (A+B)/2 and A-B, so nothing cancels when A ~ B). Let
pi = softmax(c) and dbar = delta - E_pi[delta]. Everything follows from the cumulant
generating function of dbar under pi,

    g(t) = log E_pi[exp(t dbar)] = log1p(E_pi[h(t dbar)]),   h(y) = expm1(y) - y >= 0,

(E_pi[dbar] = 0 removes the first-order term exactly), evaluated in log space:

    D = -log BC = (g(1/2) + g(-1/2)) / 2                  (docs/maths.md §2.3)
    log sum p^lam q^(1-lam) = g(lam - 1/2) - lam g(1/2) - (1 - lam) g(-1/2)
    KL(P_A||P_B) = g'(1/2) - g(1/2) + g(-1/2),   KL(P_B||P_A) = -g'(-1/2) - g(-1/2) + g(1/2)

Every sum has terms of one sign, so relative accuracy is a few eps for models that agree to
1e-9 as well as for logits of 1e6 (no exp ever overflows). Functions take (n,) vectors or
(n, k) blocks (k queries side by side, reduced over axis 0).

The optimiser's objective uses :func:`bhattacharyya_weights`, the same quantities from two
exps and one expm1 per entry over row blocks that stay in cache (docs/maths.md §2.5).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bhtcli.maths.scalar import minimize_convex

LN2 = math.log(2.0)
# h(y)/(y^2/2) = sum_j 2 y^j / (j+2)!  for |y| < 1/2 (18 terms: truncation < 1e-19 relative)
_H_SERIES = np.array([2.0 / math.factorial(j + 2) for j in range(18)])[::-1]


def logsumexp(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """log(sum(exp(x))) along `axis`, safe for +-large values and columns of -inf."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp(x - m), axis=axis))
    return s + np.squeeze(m, axis=axis)


def _h_series(y: np.ndarray) -> np.ndarray:
    """sum_j 2 y^j / (j+2)! by Horner's rule in place (the same roundings as np.polyval)."""
    out = np.full_like(y, _H_SERIES[0])
    for coef in _H_SERIES[1:]:
        out *= y
        out += coef
    return out


def _log_h_small(y: np.ndarray) -> np.ndarray:
    """log h(y) for |y| < 1/2: 2 log|y| - log 2 + log(series)."""
    series = _h_series(y)
    with np.errstate(divide="ignore"):
        out = np.abs(y)
        np.log(out, out=out)
        out *= 2.0
        out -= LN2
        np.log(series, out=series)
        out += series
    return out


def log_h(y: np.ndarray) -> np.ndarray:
    """log(expm1(y) - y), elementwise; -inf at y = 0. Accurate for every finite y."""
    y = np.asarray(y, dtype=np.float64)
    small = np.abs(y) < 0.5
    if small.all():               # the usual case: no masked copies
        return _log_h_small(y)
    out = np.empty_like(y)
    out[small] = _log_h_small(y[small])
    big = y > 700.0
    yb = y[big]
    out[big] = yb + np.log1p(-(1.0 + yb) * np.exp(-yb))
    mid = ~(small | big)
    ym = y[mid]
    out[mid] = np.log(np.expm1(ym) - ym)
    return out


def log_abs_expm1(y: np.ndarray) -> np.ndarray:
    """log|expm1(y)| elementwise; -inf at y = 0; no overflow for large y."""
    y = np.asarray(y, dtype=np.float64)
    out = np.empty_like(y)
    pos_big = y > 30.0
    out[pos_big] = y[pos_big] + np.log1p(-np.exp(-y[pos_big]))
    rest = ~pos_big
    with np.errstate(divide="ignore"):
        out[rest] = np.log(np.abs(np.expm1(y[rest])))
    return out


def softplus(x):
    """log(1 + exp(x)) without overflow, as max(x, 0) + log1p(exp(-|x|)): numpy's vectorised
    exp and log1p, 4x faster than np.logaddexp(0, x) (a scalar loop) on large arrays, to the
    same rounding (both within an ulp or two; +-inf and NaN as logaddexp)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.abs(x, out=np.empty_like(x))
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    out += np.maximum(x, 0.0)
    return out[()] if out.ndim == 0 else out


# Row blocks of about this many entries (k columns x rows) keep the elementwise work of
# bhattacharyya_weights in the L2/L3 caches (an n x k float64 array at n = 50,000 is 12.8 MB).
BLOCK_ENTRIES = 32768
# Columns whose logit difference spans more than this (max delta - min delta) use the log-space
# Tilt form: below it no exp can overflow and an entry whose midpoint weight underflows carries
# under either model a mass below e^(-700) (docs/maths.md §2.5).
FUSED_SPREAD = 40.0


def column_max(x: np.ndarray, rows: int = 1024) -> np.ndarray:
    """max over axis 0 of an (n, k) array, exact: a running elementwise maximum of row blocks
    folded at the end (numpy's axis-0 max reduction is several times slower for narrow k)."""
    return _column_extremes(x, None, rows)[0]


def _column_extremes(c: np.ndarray, delta: np.ndarray | None, rows: int):
    """(max of c, max - min of delta) over axis 0, from running elementwise extremes of row
    blocks (one read of each; NaN entries propagate)."""
    n = c.shape[0]
    if n <= 2 * rows:
        hi = c.max(axis=0)
        return hi, (None if delta is None else delta.max(axis=0) - delta.min(axis=0))
    top = c[:rows].copy()
    dhi = None if delta is None else delta[:rows].copy()
    dlo = None if delta is None else delta[:rows].copy()
    for s in range(rows, n - rows + 1, rows):
        np.maximum(top, c[s:s + rows], out=top)
        if delta is not None:
            np.maximum(dhi, delta[s:s + rows], out=dhi)
            np.minimum(dlo, delta[s:s + rows], out=dlo)
    tail = n - n % rows if n % rows else n
    last = slice(tail, n)
    hi = np.maximum(top.max(axis=0), c[last].max(axis=0, initial=-np.inf))
    if delta is None:
        return hi, None
    spread = (np.maximum(dhi.max(axis=0), delta[last].max(axis=0, initial=-np.inf))
              - np.minimum(dlo.min(axis=0), delta[last].min(axis=0, initial=np.inf)))
    return hi, spread


def bhattacharyya_weights(c: np.ndarray, delta: np.ndarray, block: int = BLOCK_ENTRIES):
    """D = -log sum sqrt(p_a p_b) per column and the gradient weights (w_c, w_g) of
    docs/maths.md §2.4, for a = c + delta/2, b = c - delta/2, without cancellation.

    Same quantities as ``Tilt.from_logits(c, delta).gradient_weights()`` (to a few eps
    relative), from two exps and one expm1 per entry, over row blocks of about `block`
    entries (docs/maths.md §2.5): with pi = softmax(c), dbar = delta - E_pi delta and
    u = expm1(dbar/2) (1 + u = exp(dbar/2) is computed by its own exp),

        D = log1p(E_pi[u^2/(1+u)] + E_pi[u] E_pi[-u/(1+u)]) / 2,

    every term of the first mean >= 0 and the product O(D^2); with kappa = (g(1/2) - g(-1/2))/2
    and a = expm1(dbar/2 - kappa) = u e^-kappa + expm1(-kappa), 1 + a = exp(dbar/2) e^-kappa,

        w_c = pi (e^-D a^2/(2(1+a)) + expm1(-D)),   w_g = pi e^-D a (a+2) / (4(1+a)).

    Columns whose delta spans more than FUSED_SPREAD, or holds a non-finite value, use the
    Tilt form. Takes (n,) vectors or (n, k) blocks; returns (D, w_c, w_g) of matching shape.
    """
    c = np.asarray(c, dtype=np.float64)
    delta = np.asarray(delta, dtype=np.float64)
    if c.ndim == 1:
        D, w_c, w_g = bhattacharyya_weights(c[:, None], delta[:, None], block)
        return D[0], w_c[:, 0], w_g[:, 0]
    n, k = c.shape
    rows = max(16, block // max(k, 1))
    m, spread = _column_extremes(c, delta, rows)
    with np.errstate(invalid="ignore"):
        wide = ~((spread <= FUSED_SPREAD) & np.isfinite(m))
    if wide.any():
        D = np.empty(k)
        w_c, w_g = np.empty((n, k)), np.empty((n, k))
        cols = np.flatnonzero(wide)
        D[cols], w_c[:, cols], w_g[:, cols] = Tilt.from_logits(c[:, cols], delta[:, cols]).gradient_weights()
        rest = np.flatnonzero(~wide)
        if rest.size:
            D[rest], w_c[:, rest], w_g[:, rest] = _fused_weights(c[:, rest], delta[:, rest], rows,
                                                                 m[rest])
        return D, w_c, w_g
    return _fused_weights(c, delta, rows, m)


def _fused_weights(c: np.ndarray, delta: np.ndarray, rows: int, m: np.ndarray):
    """bhattacharyya_weights for columns of moderate spread (m = column max of c): three
    passes over blocks of `rows` rows."""
    n, k = c.shape
    e = np.empty((n, k))        # exp(c - m), then w_c
    u = np.empty((n, k))        # expm1(dbar/2), then expm1(z), then w_g
    v = np.empty((n, k))        # exp(dbar/2): 1 + u without its cancellation near u = -1
    t1, t2 = np.empty((min(rows, n), k)), np.empty((min(rows, n), k))
    ones = np.ones(min(rows, n))
    S, M1 = np.zeros(k), np.zeros(k)
    for s in range(0, n, rows):
        eb = e[s:s + rows]
        r = eb.shape[0]
        t, o = t1[:r], ones[:r]
        np.subtract(c[s:s + rows], m, out=eb)
        np.exp(eb, out=eb)
        S += o @ eb
        np.multiply(eb, delta[s:s + rows], out=t)
        M1 += o @ t
    half_mean = 0.5 * (M1 / S)
    Yp, Ym, T = np.zeros(k), np.zeros(k), np.zeros(k)
    for s in range(0, n, rows):
        eb, ub, vb = e[s:s + rows], u[s:s + rows], v[s:s + rows]
        r = eb.shape[0]
        t, tt, o = t1[:r], t2[:r], ones[:r]
        np.multiply(delta[s:s + rows], 0.5, out=ub)
        ub -= half_mean                     # dbar/2
        np.exp(ub, out=vb)
        np.expm1(ub, out=ub)                # u = expm1(dbar/2)
        np.multiply(eb, ub, out=tt)         # e u
        Yp += o @ tt
        np.divide(tt, vb, out=t)            # e u/(1+u) = -e expm1(-dbar/2)
        Ym -= o @ t
        t *= ub                             # e u^2/(1+u) = 4 e sinh^2(dbar/4) >= 0
        T += o @ t
    Yp /= S
    Ym /= S
    T /= S
    D = 0.5 * np.log1p(T + Yp * Ym)
    kappa = 0.5 * (np.log1p(Yp) - np.log1p(Ym))
    E1, F1 = np.exp(-kappa), np.expm1(-kappa)
    eD = np.exp(-D)
    al, be, ga = 0.5 * eD / S, np.expm1(-D) / S, 0.25 * eD / S
    for s in range(0, n, rows):
        eb, ub, vb = e[s:s + rows], u[s:s + rows], v[s:s + rows]
        r = eb.shape[0]
        t, tt = t1[:r], t2[:r]
        ub *= E1
        ub += F1                            # a = expm1(z), z = dbar/2 - kappa
        np.multiply(vb, E1, out=t)          # 1 + a = e^z
        np.divide(ub, t, out=t)             # a/(1+a)
        np.multiply(ub, t, out=tt)          # a^2/(1+a)
        tt *= al
        tt += be
        ub += 2.0
        ub *= t
        ub *= ga
        ub *= eb                            # w_g = pi e^-D a(a+2)/(4(1+a))
        eb *= tt                            # w_c = pi (e^-D a^2/(2(1+a)) + expm1(-D))
    return D, e, u


@dataclass
class Tilt:
    """pi = softmax(c) and the centred logit difference dbar, for one or k queries."""

    logpi: np.ndarray
    pi: np.ndarray
    dbar: np.ndarray
    # g(t) and the log-sum of g'(t)'s terms by t: the counts and Chernoff's search ask for the
    # same t several times (kappa, kappa', kappa'' at one lambda); the arrays are not changed
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_logits(cls, c: np.ndarray, delta: np.ndarray) -> "Tilt":
        c = np.asarray(c, dtype=np.float64)
        delta = np.asarray(delta, dtype=np.float64)
        logpi = c - logsumexp(c, axis=0)
        pi = np.exp(logpi)
        dbar = delta - np.sum(pi * delta, axis=0)
        return cls(logpi, pi, dbar)

    # --- the cumulant generating function of dbar under pi and its derivatives ---
    def cgf(self, t: float) -> np.ndarray:
        """g(t) = log E_pi exp(t dbar)."""
        if t == 0:
            return np.zeros(self.dbar.shape[1:])
        key = ("g", float(t))
        if key not in self._memo:
            self._memo[key] = softplus(logsumexp(self.logpi + log_h(t * self.dbar), axis=0))
        return self._memo[key].copy()

    def cgf_prime(self, t: float, g_t=None) -> np.ndarray:
        """g'(t) = E_pi[dbar expm1(t dbar)] / exp(g(t)); the summands all have the sign of t."""
        if t == 0:
            return np.zeros(self.dbar.shape[1:])
        g_t = self.cgf(t) if g_t is None else g_t
        key = ("g1", float(t))
        if key not in self._memo:
            if "log|dbar|" not in self._memo:
                with np.errstate(divide="ignore"):
                    self._memo["log|dbar|"] = np.log(np.abs(self.dbar))
            log_terms = self.logpi + self._memo["log|dbar|"] + log_abs_expm1(t * self.dbar)
            self._memo[key] = logsumexp(log_terms, axis=0)
        return math.copysign(1.0, t) * np.exp(self._memo[key] - g_t)

    def cgf_second(self, t: float, g_t=None) -> np.ndarray:
        """g''(t) = variance of dbar under the tilted law pi_t proportional to pi exp(t dbar)."""
        key = ("g2", float(t)) if g_t is None else None    # memoised for g(t) itself only
        if key in self._memo:
            return self._memo[key].copy()
        g_t = self.cgf(t) if g_t is None else g_t
        w = np.exp(self.logpi + t * self.dbar - g_t)
        mean = self.cgf_prime(t, g_t)
        out = np.sum(w * (self.dbar - mean) ** 2, axis=0)
        if key is not None:
            self._memo[key] = out
        return out.copy()

    def log_alpha_power(self, lam: float, g_plus=None, g_minus=None):
        """log sum_i p_i^lam q_i^(1-lam) (<= 0); its maximum over lam gives Chernoff information."""
        gp = self.cgf(0.5) if g_plus is None else g_plus
        gm = self.cgf(-0.5) if g_minus is None else g_minus
        return self.cgf(lam - 0.5) - lam * gp - (1.0 - lam) * gm

    # --- the two distributions and the log-likelihood ratio of one answer ---
    def log_probs(self, g_plus=None, g_minus=None):
        """(log P_A, log P_B) for the answers, from the shared tilt."""
        gp = self.cgf(0.5) if g_plus is None else g_plus
        gm = self.cgf(-0.5) if g_minus is None else g_minus
        return self.logpi + 0.5 * self.dbar - gp, self.logpi - 0.5 * self.dbar - gm

    def bhattacharyya_distance(self):
        """D = -log sum sqrt(p q) >= 0."""
        return 0.5 * (self.cgf(0.5) + self.cgf(-0.5))

    def gradient_weights(self):
        """D and the weights (w_c, w_g) with grad D = C^T w_c + G^T w_g (docs/maths.md §2.4).

        w_c = (p_a + p_b)/2 - pi and w_g = (p_a - p_b)/4, computed without the first-order
        cancellation: with z = dbar/2 - (g(1/2) - g(-1/2))/2, p_a = pi e^(z-D), p_b = pi e^(-z-D),
        (p_a + p_b)/2 - pi = pi (2 e^-D sinh^2(z/2) + expm1(-D)) and p_a - p_b = 2 pi e^-D sinh z.
        """
        gp, gm = self.cgf(0.5), self.cgf(-0.5)
        D = 0.5 * (gp + gm)
        z = 0.5 * self.dbar - 0.5 * (gp - gm)
        moderate = np.abs(z) <= 20.0
        zm = np.where(moderate, z, 0.0)
        eD = np.exp(-D)
        w_c = self.pi * (2.0 * eD * np.sinh(0.5 * zm) ** 2 + np.expm1(-D))
        w_g = 0.5 * self.pi * eD * np.sinh(zm)
        if not moderate.all():
            la, lb = self.log_probs(gp, gm)
            pa, pb = np.exp(la), np.exp(lb)
            w_c = np.where(moderate, w_c, 0.5 * (pa + pb) - self.pi)
            w_g = np.where(moderate, w_g, 0.25 * (pa - pb))
        return D, w_c, w_g


@dataclass(frozen=True)
class Divergences:
    """All divergences between P_A(x) and P_B(x) for one query (conventions of docs/maths.md §2.1)."""

    bhattacharyya_distance: float   # D = -log BC
    hellinger_squared: float        # 1 - BC
    hellinger: float
    total_variation: float
    kl_ab: float
    kl_ba: float
    chernoff_information: float
    chernoff_lambda: float


def divergences(c: np.ndarray, delta: np.ndarray) -> Divergences:
    """Every divergence of docs/maths.md §2.1 for midpoint logits `c` and logit difference `delta`."""
    return divergences_from_tilt(Tilt.from_logits(c, delta))


def bhattacharyya_from_tilt(tilt: Tilt) -> tuple[float, float, float]:
    """(D, g(1/2), g(-1/2)) for one query's tilt: D = (g(1/2) + g(-1/2)) / 2, at least 0."""
    gp, gm = float(tilt.cgf(0.5)), float(tilt.cgf(-0.5))
    return max(0.5 * (gp + gm), 0.0), gp, gm


def divergences_from_tilt(tilt: Tilt) -> Divergences:
    """Every divergence of docs/maths.md §2.1 for one query's tilt."""
    D, gp, gm = bhattacharyya_from_tilt(tilt)
    h2 = -math.expm1(-D)
    la, lb = tilt.log_probs(gp, gm)
    z = 0.5 * tilt.dbar - 0.5 * (gp - gm)
    if np.all(np.abs(z) <= 20.0):
        tv = float(np.sum(tilt.pi * np.exp(-D) * np.abs(np.sinh(z))))
    else:
        tv = 0.5 * float(np.sum(np.abs(np.exp(la) - np.exp(lb))))
    kl_ab = max(float(tilt.cgf_prime(0.5, gp)) - gp + gm, 0.0)
    kl_ba = max(-float(tilt.cgf_prime(-0.5, gm)) - gm + gp, 0.0)
    chern, lam = chernoff(tilt, gp, gm)
    return Divergences(D, h2, math.sqrt(h2), min(tv, 1.0), kl_ab, kl_ba, chern, lam)


def chernoff(tilt: Tilt, gp: float, gm: float):
    """Chernoff information max_lam -log sum p^lam q^(1-lam) and the maximising lam."""
    if gp + gm == 0.0:
        return 0.0, 0.5
    # log sum p^lam q^(1-lam) is convex in lam: golden-section search finds its minimum
    lam, value = minimize_convex(lambda t: float(tilt.log_alpha_power(t, gp, gm)), 0.0, 1.0,
                                 xtol=1e-10)
    best = -value
    half = 0.5 * (gp + gm)   # lam = 1/2 gives D; the maximum is never below it
    if half > best:
        best, lam = half, 0.5
    return best, lam
