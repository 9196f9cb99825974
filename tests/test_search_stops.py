"""The search stops once one answer decides (docs/search.md §6): the counts are then final."""
import math

import numpy as np
import pytest

from bhtcli import api
from bhtcli.maths.counts import one_answer_distance, upper_count
from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.ascent import enough_at
from bhtcli.search.entry import maximize


def far_apart(seed=0, n=400, d=24):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    return A, A + 0.5 * rng.standard_normal((n, d))


def test_one_answer_distance_is_where_the_upper_count_becomes_one():
    for alpha in (0.05, 0.01, 1e-6):
        D = one_answer_distance(alpha)
        assert upper_count(D * (1 + 1e-12), alpha) == 1
        assert upper_count(D * 0.999, alpha) == 2
        # by hand: e^{-D} = alpha
        assert math.exp(-D) == __import__("pytest").approx(alpha)


@pytest.mark.slow
def test_design_stops_once_one_answer_decides_and_the_counts_are_those_of_the_maximum():
    A, B = far_apart()
    r = api.design(A, B, energy=20.0)
    assert r.samples["upper"] == r.samples["lower"] == r.samples["predicted"] == 1
    assert "one answer already decides" in r.solver["message"]
    # the unstopped search climbs further and reaches a larger D, with the same counts
    pair = SoftmaxPair(A, B)
    full = maximize(pair, 20.0)
    assert full.value >= r.bhattacharyya_distance * (1 - 1e-9)
    assert upper_count(full.value, 0.05) == 1


@pytest.mark.slow
def test_the_stop_saves_climbing():
    A, B = far_apart(1)
    pair = SoftmaxPair(A, B)
    free = maximize(pair, 20.0)
    pair2 = SoftmaxPair(A, B)
    with enough_at(one_answer_distance(0.05)):
        stopped = maximize(pair2, 20.0)
    assert stopped.value >= one_answer_distance(0.05)
    assert stopped.iterations < free.iterations
    assert pair2.passes < pair.passes


def test_below_the_stop_nothing_changes():
    """A pair whose best D is far below ln(1/alpha) climbs exactly as without the stop."""
    A, B = far_apart(2)
    B = A + 1e-3 * (B - A)
    free = maximize(SoftmaxPair(A, B), 1.0)
    with enough_at(one_answer_distance(0.05)):
        stopped = maximize(SoftmaxPair(A, B), 1.0)
    assert free.value < one_answer_distance(0.05)
    assert np.array_equal(free.x, stopped.x) and free.iterations == stopped.iterations
