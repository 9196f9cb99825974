"""The lattice behind `predicted` (docs/maths.md §3.3) is sized to the resolution the count
needs: the counts are those of the finest lattice (the 2^18-cell grid every N used before), and
those of the exact law of the likelihood-ratio sum where it can be enumerated."""
import math

import numpy as np
import pytest
from scipy.special import gammaln, softmax

from bhtcli.maths import counts
from bhtcli.maths.counts import LatticeTest, lattice_count, lower_count, upper_count
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from count_cases import draw_problem, finest
from test_samples import empirical_minimax_exact


def seeded_problems(count, seed=0):
    """(tilt, alpha, lower, upper) of `count` seeded pairs whose counts the lattice computes
    (tests/count_cases.py)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        problem = draw_problem(rng)
        if problem is not None:
            out.append(problem[1:])
    return out


def test_the_sized_lattice_is_never_finer_than_before_and_coarser_where_it_can_be():
    la, lb = np.log(softmax([0, 0.5, -0.3, 1.2, 0.1, -1.0])), np.log(softmax([0, 0.6, -0.4, 1.0, 0.3, -0.8]))
    test = LatticeTest(la - lb, np.exp(la), np.exp(lb))
    for N in (1, 4, 10, 116, 692, 4000):
        assert 64 <= test.cells(N) <= finest(N)
    assert test.cells(1) == test.cells(4) == 4096          # tiny N: the floor keeps every cell
    assert test.cells(116) * 116 < counts.LATTICE_CELLS / 8


@pytest.mark.parametrize("seed,count", [(2, 6), pytest.param(0, 40, marks=pytest.mark.slow),
                                        pytest.param(1, 40, marks=pytest.mark.slow)])
def test_counts_are_those_of_the_finest_lattice(seed, count, monkeypatch):
    problems = seeded_problems(count, seed)
    sized = [lattice_count(t, a, lo, up) for t, a, lo, up in problems]
    monkeypatch.setattr(LatticeTest, "cells", lambda self, N: finest(N))
    fine = [lattice_count(t, a, lo, up) for t, a, lo, up in problems]
    assert sized == fine


def trinomial_minimax_error(p, q, N):
    """Exact minimax error of the randomised likelihood-ratio test on N answers of three kinds:
    every count vector (c0, c1, c2) enumerated with its multinomial probability (no lattice)."""
    c0, c1 = np.meshgrid(np.arange(N + 1), np.arange(N + 1), indexing="ij")
    keep = c0 + c1 <= N
    c = np.stack([c0[keep], c1[keep], N - c0[keep] - c1[keep]], axis=1)
    log_coef = gammaln(N + 1) - gammaln(c + 1).sum(axis=1)
    P = np.exp(log_coef + c @ np.log(p))
    Q = np.exp(log_coef + c @ np.log(q))
    S = c @ (np.log(p) - np.log(q))
    return empirical_minimax_exact(S, P, Q)


@pytest.mark.parametrize("a,b,alpha", [
    ([0.0, 0.5, -0.3], [0.0, 0.2, -0.1], 0.05),
    ([0.0, 1.0, -1.0], [0.3, 0.6, -0.8], 0.05),
    ([0.0, 0.8, 0.2], [0.0, 0.4, 0.5], 0.01),
])
def test_counts_match_the_exact_law_of_three_answers(a, b, alpha):
    """predicted is the smallest N at which the exact minimax test reaches alpha: the lattice's
    test is a real test (never below the exact error) and no coarser than the count needs."""
    p, q = softmax(a), softmax(b)
    tilt = Tilt.from_logits((np.array(a) + b) / 2, np.array(a) - np.array(b))
    D = divergences_from_tilt(tilt).bhattacharyya_distance
    got = counts.query_counts(tilt, D, alpha)
    assert got.method == "lattice" and 20 <= got.predicted <= 400
    N = got.predicted
    assert trinomial_minimax_error(p, q, N) <= alpha < trinomial_minimax_error(p, q, N - 1)
    ll = np.log(p) - np.log(q)
    for M in (N - 1, N):
        exact = trinomial_minimax_error(p, q, M)
        lattice = LatticeTest(ll, p, q).minimax_error(M)
        assert exact - 1e-12 <= lattice <= exact * (1 + 1e-3)


def test_the_power_is_numpys():
    z = np.exp(1j * np.linspace(0, 6, 1001)) * np.linspace(0.2, 1, 1001)
    for N in (0, 1, 2, 7, 99, 100, 693, 4000):
        assert np.allclose(counts._power(z, N), z ** N, rtol=1e-12, atol=1e-300)
