"""The objective's elementwise formulas as they were before the fused evaluator (frozen copy
of SoftmaxPair.evaluate's plain/tilt split and of Tilt.gradient_weights), used by
tests/test_objective.py and benchmarks/bench_objective.py as the reference."""
from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
_H_SERIES = np.array([2.0 / math.factorial(j + 2) for j in range(18)])[::-1]
PLAIN_OK = 4.5e-5


def logsumexp(x, axis=0):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp(x - m), axis=axis))
    return s + np.squeeze(m, axis=axis)


def log_h(y):
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


def softplus(x):
    return np.logaddexp(0.0, x)


def tilt_weights(c, delta):
    """Tilt.from_logits(c, delta).gradient_weights() as it was."""
    c = np.asarray(c, dtype=np.float64)
    delta = np.asarray(delta, dtype=np.float64)
    logpi = c - logsumexp(c, axis=0)
    pi = np.exp(logpi)
    dbar = delta - np.sum(pi * delta, axis=0)
    cgf = lambda t: softplus(logsumexp(logpi + log_h(t * dbar), axis=0))
    gp, gm = cgf(0.5), cgf(-0.5)
    D = 0.5 * (gp + gm)
    z = 0.5 * dbar - 0.5 * (gp - gm)
    moderate = np.abs(z) <= 20.0
    zm = np.where(moderate, z, 0.0)
    eD = np.exp(-D)
    w_c = pi * (2.0 * eD * np.sinh(0.5 * zm) ** 2 + np.expm1(-D))
    w_g = 0.5 * pi * eD * np.sinh(zm)
    if not moderate.all():
        la, lb = logpi + 0.5 * dbar - gp, logpi - 0.5 * dbar - gm
        pa, pb = np.exp(la), np.exp(lb)
        w_c = np.where(moderate, w_c, 0.5 * (pa + pb) - pi)
        w_g = np.where(moderate, w_g, 0.25 * (pa - pb))
    return D, w_c, w_g


def softmax_cols(z):
    m = z.max(axis=0)
    e = np.exp(z - m)
    total = e.sum(axis=0)
    e /= total
    return np.log(total) + m, e


def old_weights(c, delta):
    """(D, w_c, w_g) exactly as SoftmaxPair.evaluate computed them from (c, delta)."""
    lse_c, pc = softmax_cols(c)
    lse_a, pa = softmax_cols(c + 0.5 * delta)
    lse_b, pb = softmax_cols(c - 0.5 * delta)
    D = 0.5 * (lse_a + lse_b) - lse_c
    w_c = 0.5 * (pa + pb) - pc
    w_g = 0.25 * (pa - pb)
    fragile = D < PLAIN_OK * (1.0 + np.abs(delta).max(axis=0))
    if fragile.any():
        cols = np.flatnonzero(fragile)
        Ds, wcs, wgs = tilt_weights(c[:, cols], delta[:, cols])
        D[cols], w_c[:, cols], w_g[:, cols] = Ds, wcs, wgs
    return np.maximum(D, 0.0), w_c, w_g


def old_tilt(c, delta):
    """A Tilt whose g(t) and g'(t) are computed as before (no memo, np.polyval log_h): the
    counts and divergences from it are the former report path's."""
    from bhtcli.maths.divergences import Tilt, log_abs_expm1

    class OldTilt(Tilt):
        def cgf(self, t):
            if t == 0:
                return np.zeros(self.dbar.shape[1:])
            return softplus(logsumexp(self.logpi + log_h(t * self.dbar), axis=0))

        def cgf_prime(self, t, g_t=None):
            if t == 0:
                return np.zeros(self.dbar.shape[1:])
            g_t = self.cgf(t) if g_t is None else g_t
            with np.errstate(divide="ignore"):
                log_terms = self.logpi + np.log(np.abs(self.dbar)) + log_abs_expm1(t * self.dbar)
            return math.copysign(1.0, t) * np.exp(logsumexp(log_terms, axis=0) - g_t)

    t = Tilt.from_logits(c, delta)
    return OldTilt(t.logpi, t.pi, t.dbar)
