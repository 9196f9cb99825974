"""The Bhattacharyya-coefficient form of the K-way pairs (maths/kway_coefficients.py), which
the sketched K-way search climbs with while exploring: its D and gradient weights against the
cancellation-free fused pairs, its gradient against central differences of D computed pair by
pair, where it declines, and the k x n layout of the scores (the same numbers from n x k
arrays in either memory order)."""
import itertools

import numpy as np
import pytest

from bhtcli.maths.divergences import bhattacharyya_weights
from bhtcli.maths.kway_coefficients import RANK_MIN_D, coefficient_pairs
from bhtcli.maths.kway_pairs import fused_pairs
from bhtcli.models.kway import KModels, SoftBottleneck


def _scores(seed, n=6000, k=3, K=4, scale=0.2):
    rng = np.random.default_rng(seed)
    r = 2.0 * rng.standard_normal((n, k))
    deltas = [None] + [scale * rng.standard_normal((n, k)) for _ in range(K - 1)]
    return r, deltas, list(itertools.combinations(range(K), 2)), rng


@pytest.mark.parametrize("K,k", [(2, 1), (3, 2), (4, 1), (4, 5), (5, 3)])
def test_distances_and_weights_agree_with_the_fused_pairs(K, k):
    """D within ~1e-16 / D relative; the combined weights of sum_p mu_p D_p (some pairs' mu
    zero) within 1e-10 of the largest weight."""
    r, deltas, pairs, rng = _scores(K * 10 + k, k=k, K=K)
    mu = rng.random((len(pairs), k)) + 0.1
    if len(pairs) > 2:
        mu[1] = 0.0
    ref, got = fused_pairs(r, deltas, pairs), coefficient_pairs(r, deltas, pairs)
    assert got is not None
    assert np.all(np.abs(got.D - ref.D) <= 1e-14 + 1e-11 * ref.D)
    for a, b in zip(got.combine(mu), ref.combine(mu)):
        assert a.shape == b.shape
        assert np.max(np.abs(a - b)) <= 1e-10 * np.max(np.abs(b))


def test_gradient_against_central_differences_pair_by_pair():
    """grad of sum_p mu_p D_p through the K models (rough soft minimum's pullback) against
    central differences of the soft minimum of D computed pair by pair with the plain
    per-pair form (bhattacharyya_weights), which shares no code with the coefficient form."""
    rng = np.random.default_rng(3)
    n, d, K = 400, 6, 3
    A = rng.standard_normal((n, d)) / np.sqrt(d)
    mats = [A] + [A + 0.2 * rng.standard_normal((n, d)) / np.sqrt(d) for _ in range(K - 1)]
    km = KModels(mats)
    objective = SoftBottleneck(km, 16.0, rough=True)
    x = rng.standard_normal(d)
    _, g = objective.value_and_grad(x[:, None])

    def soft_min(v):
        D = []
        for i, j in km.pairs:
            a, b = mats[i] @ v, mats[j] @ v
            D.append(bhattacharyya_weights(((a + b) / 2)[:, None], (a - b)[:, None])[0][0])
        D = np.array(D)
        return np.sum(D ** -16.0) ** (-1 / 16.0)
    h = 1e-5
    numeric = np.array([(soft_min(x + h * e) - soft_min(x - h * e)) / (2 * h) for e in np.eye(d)])
    assert np.allclose(g[:, 0], numeric, rtol=1e-6, atol=1e-9 * np.abs(numeric).max())


def test_declines_below_the_ranking_floor_and_outside_the_fused_form():
    """None when some D is below RANK_MIN_D (the rounding of a coefficient near 1 would
    matter) or a delta spans more than the fused form takes; the rough objective then climbs
    on the fused pairs' numbers, bit for bit."""
    r, deltas, pairs, _ = _scores(7, k=2)
    near = [None] + [dk * 1e-5 for dk in deltas[1:]]
    assert fused_pairs(r, near, pairs, keep_u=False).D.min() < RANK_MIN_D
    assert coefficient_pairs(r, near, pairs) is None
    wide = [None] + [dk * 1e3 for dk in deltas[1:]]
    assert coefficient_pairs(r, wide, pairs) is None
    rng = np.random.default_rng(4)
    A = rng.standard_normal((300, 5))
    km = KModels([A, A + 1e-7 * rng.standard_normal((300, 5)), A + 2e-7 * rng.standard_normal((300, 5))])
    X = rng.standard_normal((5, 2))
    rough, exact = SoftBottleneck(km, 64.0, rough=True), SoftBottleneck(km, 64.0)
    for a, b in zip(rough.evaluate(X), exact.evaluate(X)):
        assert np.array_equal(a, b)


def test_either_memory_order_gives_the_same_bits():
    """Scores handed over as n x k C-ordered arrays or as transposes of k x n ones (what the
    subspace's products give) are read as the same k x n rows: the same D and weights."""
    r, deltas, pairs, rng = _scores(9, k=4)
    mu = rng.random((len(pairs), 4))
    f_order = (np.asfortranarray(r), [None] + [np.asfortranarray(dk) for dk in deltas[1:]])
    for make in (lambda a, b: fused_pairs(a, b, pairs), lambda a, b: coefficient_pairs(a, b, pairs)):
        c, f = make(r, deltas), make(*f_order)
        assert np.array_equal(c.D, f.D)
        for a, b in zip(c.combine(mu), f.combine(mu)):
            assert np.array_equal(a, b)

