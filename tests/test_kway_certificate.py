"""K-model certificates meet the pair standards (docs/maths.md §4.10, §1.3, §8.4): the
bottleneck ceiling is the smallest pair ceiling, never below a printed D (one guarded rounding,
design_over_bound <= 1), above every bottleneck on a dense grid (d = 1), and a pair equal only
up to rounding is not called "the same vector"."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bhtcli import api
from bhtcli.errors import InputError


def bhattacharyya_from_logits(c, delta):
    """D of the columns of midpoint logits c and logit differences delta (n x m) without
    cancellation (independent of bht's own evaluation): with p = softmax(c + delta/2),
    q = softmax(c - delta/2), r_i = log(q_i / p_i) = -delta_i + log1p(sum_j q_j expm1(delta_j))
    and H^2 = (1/2) sum_i p_i expm1(r_i / 2)^2, D = -log1p(-H^2)."""
    u, v = c + delta / 2, c - delta / 2
    q = np.exp(v - v.max(axis=0))
    q /= q.sum(axis=0)
    p = np.exp(u - u.max(axis=0))
    p /= p.sum(axis=0)
    r = -delta + np.log1p(np.sum(q * np.expm1(delta), axis=0))
    h2 = 0.5 * np.sum(p * np.expm1(r / 2) ** 2, axis=0)
    return -np.log1p(-h2)


def _bottleneck_on_grid(mats, E, points=4001):
    s = np.linspace(-E, E, points)          # d = 1: the whole segment at once; the differences
    K = len(mats)                           # of the rows first, so that delta keeps its digits
    D = np.min([bhattacharyya_from_logits(0.5 * (mats[i] + mats[j])[:, :1] * s, (mats[i] - mats[j])[:, :1] * s)
                for i in range(K) for j in range(i + 1, K)], axis=0)
    return float(D.max())


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 4), log_e=st.floats(-8, 1),
       kind=st.sampled_from(["random", "mirror", "near"]))
def test_kway_ceiling_is_above_every_printed_and_grid_bottleneck(seed, n, log_e, kind):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 1))
    if kind == "mirror":            # B = -A: the range bound is tight at tiny budgets (§4.10)
        mats = [A, -A, 0.5 * A]
    elif kind == "near":
        mats = [A, A + 1e-6 * rng.normal(size=(n, 1)), A - 1e-6 * rng.normal(size=(n, 1))]
    else:
        mats = [A, rng.normal(size=(n, 1)), rng.normal(size=(n, 1))]
    E = 10.0 ** log_e
    r = api.design(mats, energy=E, starts=4, seed=0)
    c = r.certificate
    assert c["design_over_bound"] is None or c["design_over_bound"] <= 1.0
    assert c["hellinger_squared_max_bound"] >= r.hellinger_squared
    for p, b in zip(r.pairs, c["pair_bounds"]):
        assert b >= p["bhattacharyya_distance"]
    assert c["bhattacharyya_max_bound"] >= _bottleneck_on_grid(mats, E) * (1 - 1e-12)
    k = api.bound(mats, energy=E)
    assert k.certificate["bhattacharyya_max_bound"] >= _bottleneck_on_grid(mats, E) * (1 - 1e-12)


def test_a_pair_equal_only_up_to_rounding_is_not_called_the_same_vector():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 3))
    B = A + rng.normal(size=3)          # a rounded shift: equal up to float64 rounding only
    C = rng.normal(size=(6, 3))
    with pytest.raises(InputError) as err:
        api.design([A, B, C], energy=1.0, starts=2)
    msg = str(err.value)
    assert "models 1" in msg and "and 2" in msg and "up to float64 rounding" in msg
    assert "same vector" not in msg
    with pytest.raises(InputError, match="every row of A - B is the same vector"):
        D = np.round(A * 64) / 64                                # dyadic: D + 0.25 is exact
        api.design([D, D + 0.25, C], energy=1.0, starts=2)       # exact: then it says so


def test_union_count_is_the_smallest_integer_even_when_it_is_huge():
    from bhtcli.maths.kway import union_upper
    # K = 2: max_k sum_j exp(-N D_kj) = exp(-N D) <= alpha  <=>  N >= ln(1/alpha) / D
    assert union_upper(np.array([[0.0, 0.1], [0.1, 0.0]]), 0.05) == 30          # 29.957...
    for D in (5.75e-17, 3e-13, 1e-9):
        n = union_upper(np.array([[0.0, D], [D, 0.0]]), 0.05)
        assert abs(n * D - math.log(20.0)) <= 1e-9 * math.log(20.0) + D
    # K = 3 with nearly equal models (D ~ 1e-17): the count of ~1e17 is found (formerly one
    # integer at a time from brentq's estimate, which took minutes)
    Dm = np.array([[0.0, 5.75e-17, 6e-17], [5.75e-17, 0.0, 5.5e-17], [6e-17, 5.5e-17, 0.0]])
    n = union_upper(Dm, 0.05)
    assert np.max(np.log(np.exp(-n * Dm)[~np.eye(3, dtype=bool)].reshape(3, 2).sum(axis=1))) <= math.log(0.05) + 1e-9
