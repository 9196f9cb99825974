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
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

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


def log_h(y: np.ndarray) -> np.ndarray:
    """log(expm1(y) - y), elementwise; -inf at y = 0. Accurate for every finite y."""
    y = np.asarray(y, dtype=np.float64)
    out = np.empty_like(y)
    small = np.abs(y) < 0.5
    ys = y[small]
    series = np.polyval(_H_SERIES, ys)
    with np.errstate(divide="ignore"):
        out[small] = 2.0 * np.log(np.abs(ys)) - LN2 + np.log(series)
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
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(0.0, x)


@dataclass
class Tilt:
    """pi = softmax(c) and the centred logit difference dbar, for one or k queries."""

    logpi: np.ndarray
    pi: np.ndarray
    dbar: np.ndarray

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
        return softplus(logsumexp(self.logpi + log_h(t * self.dbar), axis=0))

    def cgf_prime(self, t: float, g_t=None) -> np.ndarray:
        """g'(t) = E_pi[dbar expm1(t dbar)] / exp(g(t)); the summands all have the sign of t."""
        if t == 0:
            return np.zeros(self.dbar.shape[1:])
        g_t = self.cgf(t) if g_t is None else g_t
        with np.errstate(divide="ignore"):
            log_terms = self.logpi + np.log(np.abs(self.dbar)) + log_abs_expm1(t * self.dbar)
        return math.copysign(1.0, t) * np.exp(logsumexp(log_terms, axis=0) - g_t)

    def cgf_second(self, t: float, g_t=None) -> np.ndarray:
        """g''(t) = variance of dbar under the tilted law pi_t proportional to pi exp(t dbar)."""
        g_t = self.cgf(t) if g_t is None else g_t
        w = np.exp(self.logpi + t * self.dbar - g_t)
        mean = self.cgf_prime(t, g_t)
        return np.sum(w * (self.dbar - mean) ** 2, axis=0)

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


def divergences_from_tilt(tilt: Tilt) -> Divergences:
    """Every divergence of docs/maths.md §2.1 for one query's tilt."""
    gp, gm = float(tilt.cgf(0.5)), float(tilt.cgf(-0.5))
    D = max(0.5 * (gp + gm), 0.0)
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
    res = minimize_scalar(lambda lam: float(tilt.log_alpha_power(lam, gp, gm)),
                          bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-10})
    best, lam = -float(res.fun), float(res.x)
    half = 0.5 * (gp + gm)   # lam = 1/2 gives D; the maximum is never below it
    if half > best:
        best, lam = half, 0.5
    return best, lam
