"""How many repetitions of one query decide between A and B with both errors <= alpha.

docs/maths.md §3. With D = -log BC for the query:

- upper = ceil(ln(1/alpha) / D): the likelihood-ratio test at threshold 0 has both errors
  <= BC^N (Chernoff bound at lambda = 1/2);
- lower = ceil(ln(1/(4 alpha (1-alpha))) / (2 D)): necessary for any test on N answers;
- predicted = the smallest N at which the minimax likelihood-ratio test, randomised at the
  threshold, has max(type I, type II) <= alpha.

`predicted` is computed two ways:

* lattice (N up to LATTICE_MAX_N): the log-likelihood ratio of one answer is rounded to a
  grid of W cells; the N-fold sum of the rounded statistic has an exact law under A and under
  B (an FFT convolution power), so the randomised threshold test on it has *exactly* known
  errors. It is a real test no better than the exact LRT, so the N it needs is an upper
  bound on the exact minimax N that tightens as W grows. W is sized to the resolution the
  count needs (`LatticeTest.cells`, docs/maths.md §3.3), not to the largest grid affordable;
* saddlepoint (larger N): Lugannani-Rice tail approximations for the sum of N log-likelihood
  ratios under A and B, both from the one function kappa(lam) = log sum p^lam q^(1-lam),
  solved for the balanced threshold and then for N.

Counts are Python integers (no overflow when D ~ 1e-19).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bhtcli.maths.divergences import Tilt
from bhtcli.maths.scalar import (first_passing, lugannani_rice_log_lower, ndtri, next_fast_len,
                                 root_bracketed)

LATTICE_MAX_N = 4000
LATTICE_CELLS = 1 << 18     # most cells of the N-fold sum's grid (the finest grid used)
LATTICE_FLOOR_CELLS = 1 << 14  # at most this many cells cost nothing worth saving: W = 4096 up to N = 4
LATTICE_STEP = 0.3          # cell width h <= LATTICE_STEP * sd(one answer's LLR) / sqrt(N)
LATTICE_MIN_ALPHA = 1e-9    # below this FFT round-off (~1e-14) could matter: use saddlepoint


@dataclass(frozen=True)
class QueryCounts:
    """How many repetitions of the query (reported under the JSON key `samples`)."""

    lower: int | None
    upper: int | None
    predicted: int | None
    method: str                 # "lattice", "saddlepoint" or "none"


def ceil_count(x: float) -> int | None:
    """max(1, ceil(x)) as a Python int; None when x is not finite (D underflowed to 0)."""
    if not math.isfinite(x):
        return None
    return max(1, math.ceil(x))


def upper_count(D: float, alpha: float) -> int | None:
    """ceil(ln(1/alpha) / D): enough for the likelihood-ratio test (docs/maths.md §3.1)."""
    if not D > 0:
        return None
    return ceil_count(math.log(1.0 / alpha) / D)


def one_answer_distance(alpha: float) -> float:
    """The D from which upper_count is 1: one answer decides with both errors <= alpha, so
    every count (lower <= predicted <= upper) is 1 and no better query changes them."""
    return math.log(1.0 / alpha)


def lower_count(D: float, alpha: float) -> int | None:
    """ceil(ln(1/(4 alpha (1-alpha))) / (2 D)): needed by any test of N answers (docs/maths.md §3.2)."""
    if not D > 0:
        return None
    return ceil_count(math.log(1.0 / (4.0 * alpha * (1.0 - alpha))) / (2.0 * D))


# ---------------------------------------------------------------- lattice (exact for T)
class LatticeTest:
    """Exact errors of the randomised threshold test on T = sum of rounded per-answer LLRs."""

    def __init__(self, llr: np.ndarray, p: np.ndarray, q: np.ndarray):
        keep = (p > 0) | (q > 0)
        self.llr, self.p, self.q = llr[keep], p[keep] / p[keep].sum(), q[keep] / q[keep].sum()
        # Answers whose mass under both models is negligible are clamped into the end cells
        # (still an exact statement about the test that uses the clamped statistic).
        heavy = (self.p > 1e-16) | (self.q > 1e-16)
        self.lo = float(self.llr[heavy].min())
        self.hi = float(self.llr[heavy].max())
        m_a, m_b = float(self.p @ self.llr), float(self.q @ self.llr)
        self.sd = math.sqrt(max(min(float(self.p @ (self.llr - m_a) ** 2),
                                    float(self.q @ (self.llr - m_b) ** 2)), 0.0))

    def cells(self, N: int) -> int:
        """W, the cells across one answer's LLR range for the test on N answers.

        Rounding each answer's LLR to cells of width h adds to the N-answer sum (sd sigma
        sqrt(N)) a rounding term of sd about h sqrt(N / 12); it costs the test about
        N h^2 / (24 sigma^2) answers (docs/maths.md §3.3). h = LATTICE_STEP sigma / sqrt(N)
        keeps that below 0.001 answers whatever N, n or the divergence. W never exceeds the
        finest grid, min(4096, 2^18 / N) (what every N used before), nor falls below the
        cheap floor, min(4096, 2^14 / N) and 64.
        """
        finest = int(min(4096, max(64, LATTICE_CELLS // N)))
        floor = int(min(finest, max(64, LATTICE_FLOOR_CELLS // N)))
        if not self.sd > 0:
            return finest
        need = (self.hi - self.lo) * math.sqrt(N) / (LATTICE_STEP * self.sd)
        return finest if not need < finest else max(floor, math.ceil(need))

    def minimax_error(self, N: int) -> float:
        """min over thresholds (with randomisation) of max(P_A(decide B), P_B(decide A))."""
        return self.minimax_test(N)[0]

    def minimax_test(self, N: int, cells: int | None = None):
        """(error, cell, tau, gamma) of the minimax test on N answers: `cell(llr)` rounds one
        answer's LLR to its cell; the test decides A when the sum of the N cells is > tau, B
        when it is < tau, and B with probability gamma when it equals tau. `cells` overrides
        W (default `self.cells(N)`)."""
        if self.hi - self.lo <= 0:      # one LLR value: no information
            return 0.5, (lambda llr: np.zeros(np.shape(llr), dtype=np.int64)), 0, 0.5
        W = int(cells) if cells is not None else self.cells(N)
        h = (self.hi - self.lo) / W

        def cell(llr):
            return np.clip(np.rint((np.nan_to_num(llr) - self.lo) / h), 0, W).astype(np.int64)

        k = cell(self.llr)
        pk = np.bincount(k, weights=self.p, minlength=W + 1)
        qk = np.bincount(k, weights=self.q, minlength=W + 1)
        size = N * W + 1
        L = next_fast_len(size)
        PN = np.clip(np.fft.irfft(_power(np.fft.rfft(pk, L), N), L)[:size], 0.0, None)
        QN = np.clip(np.fft.irfft(_power(np.fft.rfft(qk, L), N), L)[:size], 0.0, None)
        PN /= PN.sum()
        QN /= QN.sum()
        error, tau, gamma = balanced_test(PN, QN)
        return error, cell, tau, gamma


def _power(z: np.ndarray, N: int) -> np.ndarray:
    """z ** N elementwise by repeated squaring: numpy's complex power takes exp(N log z)
    from N = 100 on, ten times slower than the ~2 log2(N) products."""
    if N == 0:
        return np.ones_like(z)
    result, base = None, z
    while True:
        if N & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        N >>= 1
        if not N:
            return result
        base = base * base


def balanced_test(P: np.ndarray, Q: np.ndarray):
    """(error, tau, gamma) of the minimax test 'decide A iff T > tau, randomise at tau' for laws
    P (A) and Q (B) of T on 0..len(P)-1.

    Type I (A true, decide B) = P(T < tau) + gamma P(T = tau);
    type II (B true, decide A) = Q(T > tau) + (1 - gamma) Q(T = tau).
    Moving (tau, gamma) upward raises type I and lowers type II continuously; the minimax is
    where they meet.
    """
    P_below = np.concatenate([[0.0], np.cumsum(P)[:-1]])          # P(T < tau)
    Q_above = np.concatenate([np.cumsum(Q[::-1])[::-1][1:], [0.0]])  # Q(T > tau)
    # at gamma = 1: e1 = P(T <= tau), e2 = Q(T > tau); first tau where e1 >= e2
    e1_full = P_below + P
    tau = int(np.argmax(e1_full >= Q_above))
    denom = P[tau] + Q[tau]
    gamma = 0.0 if denom <= 0 else (Q_above[tau] + Q[tau] - P_below[tau]) / denom
    gamma = min(max(gamma, 0.0), 1.0)
    return float(P_below[tau] + gamma * P[tau]), tau, gamma


# ---------------------------------------------------------------- saddlepoint (large N)
class Saddlepoint:
    """Lugannani-Rice tails of the N-answer log-likelihood ratio under A and under B (docs/maths.md §3.3)."""

    def __init__(self, tilt: Tilt):
        self.tilt = tilt
        self.gp, self.gm = float(tilt.cgf(0.5)), float(tilt.cgf(-0.5))

    def kappa(self, lam):          # log sum p^lam q^(1-lam)
        return float(self.tilt.log_alpha_power(lam, self.gp, self.gm))

    def kappa1(self, lam):         # its derivative: mean LLR under the tilted law
        return float(self.tilt.cgf_prime(lam - 0.5)) - self.gp + self.gm

    def kappa2(self, lam):
        return float(self.tilt.cgf_second(lam - 0.5))

    def log_errors(self, lam: float, N: float):
        """(log type I, log type II) of the test with threshold N * kappa'(lam)."""
        k, k1, k2 = self.kappa(lam), self.kappa1(lam), self.kappa2(lam)
        # Under A the CGF of one LLR is kappa(1 + theta); the saddle is theta = lam - 1 < 0.
        wa = -math.sqrt(max(2.0 * N * ((lam - 1.0) * k1 - k), 0.0))
        ua = (lam - 1.0) * math.sqrt(N * k2)
        # Under B it is kappa(theta); the saddle is theta = lam > 0.
        wb = math.sqrt(max(2.0 * N * (lam * k1 - k), 0.0))
        ub = lam * math.sqrt(N * k2)
        return lugannani_rice_log_lower(wa, ua), lugannani_rice_log_lower(-wb, -ub)

    def minimax_log_error(self, N: float) -> float:
        return self.minimax_log_test(N)[0]

    def minimax_log_test(self, N: float):
        """(log error, threshold) of the minimax test on N answers: it decides A when the sum
        of the N log-likelihood ratios log p/q exceeds the threshold, else B."""
        def balance(lam):
            a, b = self.log_errors(lam, N)
            return a - b
        lo, hi = 1e-6, 1 - 1e-6
        try:
            lam = root_bracketed(balance, lo, hi, xtol=1e-9)
        except ValueError:
            lam = lo if abs(balance(lo)) < abs(balance(hi)) else hi
        return max(self.log_errors(lam, N)), N * self.kappa1(lam)

    def count(self, alpha: float, lower: int, upper: int) -> int:
        target = math.log(alpha)
        f = lambda logN: self.minimax_log_error(math.exp(logN)) - target
        a, b = math.log(max(lower, 1) * 0.5), math.log(upper * 2.0)
        if f(a) <= 0:
            return lower
        if f(b) > 0:
            return upper
        return math.ceil(math.exp(root_bracketed(f, a, b, xtol=1e-7)))


# ---------------------------------------------------------------- public entry point
def query_counts(tilt: Tilt, D: float, alpha: float) -> QueryCounts:
    """lower, upper and predicted counts for one query given its tilt (see module docstring)."""
    lo, up = lower_count(D, alpha), upper_count(D, alpha)
    if lo is None or up is None:
        return QueryCounts(None, None, None, "none")
    if up <= LATTICE_MAX_N and alpha >= LATTICE_MIN_ALPHA:
        return QueryCounts(lo, up, lattice_count(tilt, alpha, lo, up), "lattice")
    return QueryCounts(lo, up, Saddlepoint(tilt).count(alpha, lo, up), "saddlepoint")


def lattice_count(tilt: Tilt, alpha: float, lower: int, upper: int) -> int:
    """Smallest N in [lower, upper] whose lattice minimax error is <= alpha.

    The search starts at the normal-approximation estimate and gallops from there, so a
    typical call evaluates the exact lattice error at three to six values of N.
    """
    la, lb = tilt.log_probs()
    llr, p, q = la - lb, np.exp(la), np.exp(lb)
    test = LatticeTest(llr, p, q)
    ok = lambda N: test.minimax_error(N) <= alpha
    guess = min(max(normal_guess(llr, p, q, alpha), lower), upper)
    if ok(guess):
        hi, step = guess, 1                      # gallop down to a failing N
        lo = guess - step
        while lo >= lower and ok(lo):
            hi, step = lo, step * 2
            lo = hi - step
        lo = max(lo, lower - 1)
    else:
        lo, step = guess, 1                      # gallop up to a passing N
        hi = guess + step
        while hi < upper and not ok(hi):
            lo, step = hi, step * 2
            hi = lo + step
        hi = min(hi, upper)
    return first_passing(ok, lo, hi)             # lo fails (or < lower), hi passes


def normal_guess(llr: np.ndarray, p: np.ndarray, q: np.ndarray, alpha: float) -> int:
    """N from the normal approximation: the LLR sum has mean N m_A, variance N v_A under A and
    mean -N m_B, variance N v_B under B; the balanced threshold needs
    sqrt(N) = z (sqrt(v_A) + sqrt(v_B)) / (m_A + m_B), z = Phi^-1(1 - alpha)."""
    m_a, m_b = float(p @ llr), float(-(q @ llr))
    v_a, v_b = float(p @ (llr - m_a) ** 2), float(q @ (llr + m_b) ** 2)
    z = float(ndtri(1.0 - alpha))
    if m_a + m_b <= 0:
        return 1
    root = z * (math.sqrt(v_a) + math.sqrt(v_b)) / (m_a + m_b)
    return max(1, math.ceil(root * root)) if math.isfinite(root) else 1


# ---------------------------------------------------------------- a given number of answers
@dataclass(frozen=True)
class FixedTest:
    """The best fixed-n test on N answers, as `query_counts` evaluates it for `predicted`."""

    error: float                # both error probabilities are at most this (exactly, for "lattice")
    verdict: str                # its decision on the observed answers: "A", "B" or "tie" (randomised)
    method: str                 # "lattice", "saddlepoint" or "none"


def fixed_test(tilt: Tilt, D: float, alpha: float, answers: np.ndarray) -> FixedTest:
    """The minimax likelihood-ratio test on the N = len(answers) observed answers (0-based
    indices of the tilt's answers): its error and its decision.

    The test, and the way its error is computed (lattice or saddlepoint), are those of
    :func:`query_counts` at the same alpha, so on N = predicted answers the error is <= alpha.
    """
    decide_b, error, method = fixed_tests(tilt, D, alpha, np.asarray(answers)[None, :])
    b = float(decide_b[0])
    verdict = "A" if b < 1e-9 else ("B" if b > 1 - 1e-9 else "tie")
    return FixedTest(error, verdict, method)


def fixed_tests(tilt: Tilt, D: float, alpha: float, answers: np.ndarray):
    """The test of :func:`fixed_test` on each row of `answers` (trials x N answer indices),
    built once: (the probability that it decides B on each row -- 0, 1, or its randomisation
    at the threshold --, its error, its method)."""
    answers = np.atleast_2d(np.asarray(answers, dtype=np.int64))
    la, lb = tilt.log_probs()
    llr = la - lb
    N = int(answers.shape[1])
    up = upper_count(D, alpha)
    if up is None or N == 0:
        return np.full(len(answers), 0.5), 0.5, "none"
    if up <= LATTICE_MAX_N and alpha >= LATTICE_MIN_ALPHA and N <= LATTICE_MAX_N:
        error, cell, tau, gamma = LatticeTest(llr, np.exp(la), np.exp(lb)).minimax_test(N)
        T = cell(llr[answers]).sum(axis=1)
        # the test randomises at T == tau: B with probability gamma
        decide_b = np.where(T > tau, 0.0, np.where(T < tau, 1.0, gamma))
        return decide_b, error, "lattice"
    log_error, threshold = Saddlepoint(tilt).minimax_log_test(N)
    total = llr[answers].sum(axis=1)
    decide_b = np.where(total > threshold, 0.0, np.where(total < threshold, 1.0, 0.5))
    return decide_b, min(math.exp(log_error), 0.5), "saddlepoint"
