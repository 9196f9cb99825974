"""Link functions: how a model turns its scores s = A x (+ bias) into answer probabilities
(docs/maths.md §7.1).

    exp        p_i ∝ exp(s_i)                        softmax (the default)
    poly:K     p_i ∝ s_i^K            (K even >= 2)  polynomial attention
    taylor:K   p_i ∝ sum_{j<=K} s_i^j / j!  (K even)  the truncated exponential
    softcap:C  p_i ∝ exp(C tanh(s_i / C))   (C > 0)  logit soft-capping (Gemma 2)

Every link is handled through its log-weight phi(s) = log f(s) (so p = softmax(phi(s))) and
psi(s) = phi(s) - s, the part by which it differs from exp. An even K keeps every weight >= 0;
taylor:K is even > 0 everywhere (its minimum is positive), poly:K is 0 at s = 0. softcap:C has
phi(s) = C tanh(s / C): bounded by C, 1-Lipschitz, and psi = C tanh(s/C) - s is decreasing
(docs/maths.md §7.2).

Degenerate case (poly only): when every weight of a model is 0 (e.g. x = 0 and no bias) the
model answers uniformly. Weights below e^-1400 times the largest one are exactly 0 in float64
probabilities; poly weights of exactly 0 are floored there, so log-weights stay finite.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bhtcli.errors import InputError, parameter_name

MAX_DEGREE = 64
# log-weights more than this below a column's largest are 0 once exponentiated (e^-745 = 0).
LOG_FLOOR = 1400.0


@dataclass(frozen=True)
class Link:
    """One link function; `kind` is "exp", "poly", "taylor" or "softcap", `degree` K (poly,
    taylor), `cap` C (softcap)."""

    kind: str
    degree: int = 0
    cap: float = 0.0

    @property
    def name(self) -> str:
        if self.kind == "softcap":
            text = repr(float(self.cap))
            return "softcap:" + (text[:-2] if text.endswith(".0") else text)
        return "exp" if self.kind == "exp" else f"{self.kind}:{self.degree}"

    @property
    def is_exp(self) -> bool:
        return self.kind == "exp"

    @property
    def scale_free(self) -> bool:
        """poly:K without bias gives the same probabilities at x and t x (t != 0)."""
        return self.kind == "poly"

    # --- log-weights and their derivatives -------------------------------------------------
    def log_weight(self, s: np.ndarray) -> np.ndarray:
        """phi(s) = log f(s); -inf where a poly weight is exactly 0."""
        s = np.asarray(s, dtype=np.float64)
        if self.kind == "exp":
            return s.copy()
        if self.kind == "poly":
            with np.errstate(divide="ignore"):
                return self.degree * np.log(np.abs(s))
        if self.kind == "softcap":
            return self.cap * np.tanh(s / self.cap)
        return log_taylor(s, self.degree)

    def dlog_weight(self, s: np.ndarray, log_w: np.ndarray | None = None) -> np.ndarray:
        """phi'(s) = f'(s) / f(s) (0 where a poly weight is exactly 0); `log_w` = phi(s) when
        the caller has it (saves recomputing log T_K)."""
        s = np.asarray(s, dtype=np.float64)
        if self.kind == "exp":
            return np.ones_like(s)
        if self.kind == "poly":
            with np.errstate(divide="ignore"):
                out = self.degree / s
            out[s == 0] = 0.0
            return out
        if self.kind == "softcap":
            # sech^2(y) = 4 e^{-2|y|} / (1 + e^{-2|y|})^2: no overflow, no cancellation
            e = np.exp(-2.0 * np.abs(s / self.cap))
            return 4.0 * e / (1.0 + e) ** 2
        # T_{K-1}/T_K = 1 - (s^K / K!) / T_K
        K = self.degree
        with np.errstate(divide="ignore"):
            last = K * np.log(np.abs(s)) - math.lgamma(K + 1.0)
        return 1.0 - np.exp(last - (log_taylor(s, K) if log_w is None else log_w))

    def psi(self, s: np.ndarray) -> np.ndarray:
        """phi(s) - s, computed without cancellation (0 for exp)."""
        s = np.asarray(s, dtype=np.float64)
        if self.kind == "exp":
            return np.zeros_like(s)
        if self.kind == "poly":
            with np.errstate(divide="ignore"):
                return self.degree * np.log(np.abs(s)) - s
        if self.kind == "softcap":
            return self.cap * np.tanh(s / self.cap) - s
        return _taylor_psi(s, self.degree)

    def psi_oscillation(self, radius: float) -> float:
        """max - min of psi over [-radius, radius]: 0 for exp, psi(-r) - psi(r) for taylor
        (psi is decreasing: psi' = -(s^K/K!)/T_K(s) <= 0) and softcap (psi' = -tanh^2(s/C)),
        infinite for poly. Rounded up (an upper bound is what the certificate needs)."""
        if self.kind == "exp":
            return 0.0
        if self.kind == "poly":
            return math.inf
        if self.kind == "softcap":
            r = float(radius)
            return 2.0 * (r - self.cap * math.tanh(r / self.cap)) * (1 + 8 * _EPS) + 8 * _EPS * r
        r = np.array([-radius, radius], dtype=np.float64)
        lo_hi = _taylor_psi(r, self.degree)
        return float(lo_hi[0] - lo_hi[1])


    def log_weight_oscillation(self, radius: float) -> float:
        """An upper bound on max - min of phi over [-radius, radius]: phi(r) - phi(-r) for exp
        and softcap (increasing; at most 2C for softcap), 2r + the oscillation of psi for
        taylor, infinite for poly. Rounded up."""
        r = float(radius)
        if self.kind == "exp":
            return 2.0 * r
        if self.kind == "softcap":
            return 2.0 * self.cap * math.tanh(r / self.cap) * (1 + 8 * _EPS)
        if self.kind == "poly":
            return math.inf
        return 2.0 * r + self.psi_oscillation(r)


EXP = Link("exp")
_EPS = float(np.finfo(np.float64).eps)


def parse_link(text, option: str | None = None) -> Link:
    """'exp', 'poly:K', 'taylor:K' (K even, 2 <= K <= 64) or 'softcap:C' (C > 0) -> Link;
    InputError otherwise."""
    option = parameter_name("link") if option is None else option
    if isinstance(text, Link):
        return text
    if text is None:
        return EXP
    raw = str(text).strip().lower()
    if raw in ("exp", "softmax"):
        return EXP
    kind, sep, k = raw.partition(":")
    if kind == "softcap" and sep:
        return _parse_softcap(text, k, option)
    if kind not in ("poly", "taylor") or not sep:
        raise InputError(f"{option} {text!r}: expected exp, poly:K or taylor:K with K even "
                         "(e.g. taylor:4), or softcap:C with C > 0 (e.g. softcap:30)")
    try:
        K = int(k, 10)
    except ValueError:
        raise InputError(f"{option} {text!r}: the degree K must be a whole number, e.g. {kind}:4") from None
    if K < 2 or K % 2 or K > MAX_DEGREE:
        raise InputError(f"{option} {text!r}: K must be even and between 2 and {MAX_DEGREE} "
                         f"(an odd degree gives negative weights); try {kind}:{max(2, K + (K % 2))}")
    return Link(kind, K)


def _parse_softcap(text, value: str, option: str) -> Link:
    try:
        cap = float(value)
    except ValueError:
        raise InputError(f"{option} {text!r}: the cap C must be a number, e.g. softcap:30") from None
    if not (math.isfinite(cap) and cap > 0):
        raise InputError(f"{option} {text!r}: the cap C must be a finite number > 0, e.g. softcap:30")
    return Link("softcap", cap=cap)


# --- the truncated exponential T_K(s) = sum_{j<=K} s^j / j! in log space ----------------------
def log_taylor(s: np.ndarray, K: int) -> np.ndarray:
    """log T_K(s) for even K (T_K > 0 everywhere). |s| <= K: Horner in s (no overflow: terms
    are at most e^K); |s| > K: T_K(s) = (s^K/K!) * sum_i (K!/(K-i)!) s^-i, Horner in 1/s."""
    s = np.asarray(s, dtype=np.float64)
    out = np.empty_like(s)
    small = np.abs(s) <= K
    ss = s[small]
    acc = np.ones_like(ss)
    for j in range(K, 0, -1):              # T = 1 + s(1 + s/2 (1 + s/3 (...)))
        acc = 1.0 + acc * ss / j
    out[small] = np.log(acc)
    sb = s[~small]
    t = 1.0 / sb
    acc = np.ones_like(sb)
    for i in range(K, 0, -1):              # sum_i c_i t^i with c_i = K!/(K-i)! = c_{i-1} (K-i+1)
        acc = 1.0 + acc * t * (K - i + 1)
    out[~small] = K * np.log(np.abs(sb)) - math.lgamma(K + 1.0) + np.log(acc)
    return out


def _taylor_psi(s: np.ndarray, K: int) -> np.ndarray:
    """log(T_K(s) e^-s). For |s| < max(2, K/2) it is log1p(-R e^-s) with the remainder
    R = sum_{j>K} s^j/j! summed directly (no cancellation); beyond, psi is of the order of s
    and log T_K(s) - s is already accurate."""
    s = np.asarray(s, dtype=np.float64)
    out = log_taylor(s, K) - s
    near = np.abs(s) < max(2.0, 0.5 * K)      # the series' ratio |s|/(j+1) stays below 1/2
    if near.any():
        sn = s[near]
        with np.errstate(divide="ignore"):
            term = np.exp((K + 1) * np.log(np.abs(sn)) - math.lgamma(K + 2.0)) * np.sign(sn) ** (K + 1)
        R = np.zeros_like(sn)
        for j in range(K + 1, K + 60):
            R += term
            term = term * sn / (j + 1)
        out[near] = np.log1p(-R * np.exp(-sn))
    return out


def taylor_difference(sa: np.ndarray, sb: np.ndarray, ds: np.ndarray, K: int) -> np.ndarray:
    """T_K(sa) - T_K(sb) from ds = sa - sb without cancellation:
    sa^j - sb^j = sa (sa^(j-1) - sb^(j-1)) + ds sb^(j-1)."""
    diff = ds.copy()                      # j = 1
    power = np.ones_like(sb)              # sb^(j-1)
    total = diff.copy()
    fact = 1.0
    for j in range(2, K + 1):
        power = power * sb
        diff = sa * diff + ds * power
        fact *= j
        total += diff / fact
    return total


def softcap_spread(la: Link, lb: Link, energy: float, radius_a: float, radius_b: float,
                   eps_2inf: float, diameter: float, bias_range: float, bias_gap: float) -> float:
    """An upper bound L on max_ij (delta_i - delta_j) over the ball that holds when both links
    are softcap (docs/maths.md §7.3); infinite otherwise.

    radius_a, radius_b: bounds on the scores |s| of each model (E ||A||_{2->inf} + max|bias|);
    eps_2inf = max_i ||a_i - b_i||; diameter: of the rows of A - B; bias_range, bias_gap: range
    and largest magnitude of bias_a - bias_b.

    - Both softcap: phi_A and phi_B stay within an interval of length 2 C tanh(R / C) each.
    - The same softcap: delta_i = phi(s_A,i) - phi(s_B,i) lies between 0 and g_i = s_A,i - s_B,i
      (0 < phi' <= 1), so L = max(E diam + range(bias_a - bias_b), E eps + max|bias_a - bias_b|).
    """
    if la.kind != "softcap" or lb.kind != "softcap":
        return math.inf
    bound = la.log_weight_oscillation(radius_a) + lb.log_weight_oscillation(radius_b)
    if la == lb:
        same = max(energy * diameter + bias_range, energy * eps_2inf + bias_gap)
        bound = min(bound, same * (1 + 16 * _EPS))
    return bound
