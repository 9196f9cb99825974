import math

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import binom

from bhtcli import design
from bhtcli.maths.divergences import Tilt
from bhtcli.maths.counts import Saddlepoint, lower_count, query_counts, upper_count


def empirical_minimax(SA, SB):
    """Monte Carlo minimax error of 'decide A iff S > tau, randomise at tau' (independent code).

    SA, SB: LLR sums simulated under A and under B. For each candidate tau the errors are
    e1 = P_A(S < tau) + g P_A(S = tau), e2 = P_B(S > tau) + (1 - g) P_B(S = tau); the best g
    balances them.
    """
    SA, SB = np.round(SA, 9), np.round(SB, 9)
    taus = np.unique(np.concatenate([SA, SB]))
    sa, sb = np.sort(SA), np.sort(SB)
    lt_a = np.searchsorted(sa, taus, "left") / len(sa)
    eq_a = np.searchsorted(sa, taus, "right") / len(sa) - lt_a
    gt_b = 1 - np.searchsorted(sb, taus, "right") / len(sb)
    eq_b = 1 - np.searchsorted(sb, taus, "left") / len(sb) - gt_b
    denom = eq_a + eq_b
    g = np.clip(np.where(denom > 0, (gt_b + eq_b - lt_a) / np.where(denom > 0, denom, 1), 0), 0, 1)
    e1 = lt_a + g * eq_a
    e2 = gt_b + (1 - g) * eq_b
    return float(np.min(np.maximum(e1, e2)))


def monte_carlo_count(p, q, alpha, n_max, trials=40000, seed=0):
    rng = np.random.default_rng(seed)
    llr = np.log(p) - np.log(q)
    for N in range(1, n_max + 1):
        SA = rng.multinomial(N, p, size=trials) @ llr
        SB = rng.multinomial(N, q, size=trials) @ llr
        if empirical_minimax(SA, SB) <= alpha:
            return N
    return None


def tilt_of(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return Tilt.from_logits((a + b) / 2, a - b)


def exact_binary_count(p1, q1, alpha):
    """Exact minimax count for two answers (binomial law of the LLR sum)."""
    N = 1
    while True:
        k = np.arange(N + 1)
        P, Q = binom.pmf(k, N, p1), binom.pmf(k, N, q1)
        S = k * math.log(p1 / q1) + (N - k) * math.log((1 - p1) / (1 - q1))
        if empirical_minimax_exact(S, P, Q) <= alpha:
            return N
        N += 1


def empirical_minimax_exact(S, P, Q):
    o = np.argsort(S)
    S, P, Q = S[o], P[o], Q[o]
    below_a = np.concatenate([[0], np.cumsum(P)[:-1]])
    above_b = 1 - np.cumsum(Q)
    best = 1.0
    for i in range(len(S)):
        g = np.clip((above_b[i] + Q[i] - below_a[i]) / (P[i] + Q[i]), 0, 1)
        best = min(best, max(below_a[i] + g * P[i], above_b[i] + (1 - g) * Q[i]))
    return best


@pytest.mark.parametrize("a,b,alpha", [([0, 0.4], [0, -0.4], 0.05), ([0, 2.0], [0, 1.0], 0.05),
                                       ([0, 1.5], [0, -1.5], 0.01), ([0, 3.0], [0, -2.0], 0.1)])
def test_two_answers_match_the_exact_binomial_count(a, b, alpha):
    tilt = tilt_of(a, b)
    D = float(tilt.bhattacharyya_distance())
    counts = query_counts(tilt, D, alpha)
    p1, q1 = softmax(a)[1], softmax(b)[1]
    exact = exact_binary_count(p1, q1, alpha)
    assert abs(counts.predicted - exact) <= max(1, 0.02 * exact)
    assert counts.lower <= counts.predicted <= counts.upper


@pytest.mark.slow
@pytest.mark.parametrize("seed,scale,alpha", [(1, 1.5, 0.05), (2, 0.8, 0.05), (3, 2.5, 0.1),
                                              (4, 1.0, 0.01), (5, 0.35, 0.05)])
def test_predicted_matches_monte_carlo_of_the_randomised_test(seed, scale, alpha):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(12)
    b = a + scale * rng.standard_normal(12)
    tilt = tilt_of(a, b)
    D = float(tilt.bhattacharyya_distance())
    counts = query_counts(tilt, D, alpha)
    mc = monte_carlo_count(softmax(a), softmax(b), alpha, counts.upper + 5, seed=seed)
    assert mc is not None
    assert abs(counts.predicted - mc) <= max(1, math.ceil(0.1 * counts.predicted)), (counts, mc)


def test_small_counts_are_exact_not_normal_approximations():
    # Strongly separated models: N <= 5, where a normal approximation is far off.
    tilt = tilt_of([0, 3.0, -1.0], [0, -2.0, 1.5])
    D = float(tilt.bhattacharyya_distance())
    counts = query_counts(tilt, D, 0.05)
    assert counts.predicted <= 10
    mc = monte_carlo_count(softmax([0, 3.0, -1.0]), softmax([0, -2.0, 1.5]), 0.05, 20)
    assert abs(counts.predicted - mc) <= 1


def test_saddlepoint_agrees_with_the_lattice_where_both_apply():
    rng = np.random.default_rng(8)
    a = rng.standard_normal(30)
    b = a + 0.12 * rng.standard_normal(30)
    tilt = tilt_of(a, b)
    D = float(tilt.bhattacharyya_distance())
    counts = query_counts(tilt, D, 0.05)
    assert counts.method == "lattice" and counts.predicted > 200
    sp = Saddlepoint(tilt).count(0.05, counts.lower, counts.upper)
    assert abs(sp - counts.predicted) <= 0.02 * counts.predicted


def test_bounds_formulas_by_hand():
    D = 0.1
    assert upper_count(D, 0.05) == math.ceil(math.log(20) / 0.1) == 30
    assert lower_count(D, 0.05) == math.ceil(math.log(1 / (4 * 0.05 * 0.95)) / 0.2) == 9
    assert upper_count(0.0, 0.05) is None


def test_tiny_divergence_gives_huge_python_integers():
    a = np.array([0.1, -0.3, 0.7, 0.0])
    d = 1e-9 * np.array([1.0, -2.0, 0.5, 0.3])
    tilt = tilt_of(a, a - d)
    D = float(tilt.bhattacharyya_distance())
    counts = query_counts(tilt, D, 0.05)
    assert counts.method == "saddlepoint"
    assert isinstance(counts.upper, int) and counts.upper > 2 ** 63
    assert counts.lower <= counts.predicted <= counts.upper
    # predicted / lower tends to the normal-theory ratio (z_{1-alpha})^2 / (2 ln(1/(4a(1-a)))) * 4
    assert 1.2 < counts.predicted / counts.lower < 2.2


@pytest.mark.slow
def test_design_predicted_within_bounds_and_monte_carlo(pair_files):
    a, b, A, B = pair_files
    r = design(a, b, 2.0)
    s = r.samples
    assert s["lower"] <= s["predicted"] <= s["upper"]
    x = np.array(r.query)
    mc = monte_carlo_count(softmax(A @ x), softmax(B @ x), 0.05, s["upper"] + 5)
    assert abs(s["predicted"] - mc) <= max(1, math.ceil(0.1 * s["predicted"]))
