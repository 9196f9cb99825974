"""The shortcuts that make the K-way design cheap at vocabulary scale (docs/maths.md §8.8)
give the same answers as the direct computations they replace."""
import numpy as np
import pytest

from bhtcli.maths.kway import KwayLaw, kway_counts
from bhtcli.models.kway import kway_scores_at


def law_at(seed, K, n=40, d=5, scale=0.6):
    rng = np.random.default_rng(seed)
    models = [rng.standard_normal((n, d)) for _ in range(K)]
    x = scale * rng.standard_normal(d)
    r, deltas = kway_scores_at(models, x)
    return KwayLaw.build([r], [deltas], [1.0])


@pytest.mark.slow
@pytest.mark.parametrize("seed,K", [(1, 3), (2, 4), (3, 5), (4, 4)])
def test_copula_check_decides_as_the_full_errors(seed, K):
    law = law_at(seed, K)
    Dmin = law.distance_matrix()[~np.eye(K, dtype=bool)].min()
    for alpha in (0.2, 0.05, 0.01):
        for N in np.unique(np.geomspace(1, 40 / Dmin, 60).astype(int)):
            full = float(law.ml_errors(N).max()) <= alpha
            assert law.ml_errors_at_most(N, alpha) == full, (N, alpha)


@pytest.mark.slow
@pytest.mark.parametrize("seed,K", [(1, 3), (2, 4), (5, 6)])
def test_counts_equal_the_bisection_over_all_errors(seed, K):
    """kway_counts against its definition: the smallest N in [lower, upper] with
    max_k P_k(error) <= alpha, every P_k from ml_errors (a linear scan near the answer)."""
    law = law_at(seed, K)
    for alpha in (0.1, 0.05, 0.01):
        c = kway_counts(law, alpha)
        ok = lambda N: float(law.ml_errors(N).max()) <= alpha
        p = c["predicted"]
        assert ok(p)
        assert p == c["lower"] or not ok(p - 1)


def test_tilt_memo_returns_what_a_fresh_computation_gives():
    """g, g' and g'' asked repeatedly and in any order equal a fresh tilt's first answer, bit
    for bit (the pair counts ask for them hundreds of times)."""
    from bhtcli.maths.divergences import Tilt
    rng = np.random.default_rng(4)
    c, delta = 3 * rng.standard_normal(500), 1e-3 * rng.standard_normal(500)
    shared = Tilt.from_logits(c, delta)
    ts = rng.uniform(-0.5, 0.5, 12)
    for t in np.concatenate([ts, ts[::-1]]):
        fresh = Tilt.from_logits(c, delta)
        g2 = fresh.cgf_second(t)
        assert g2 == fresh.cgf_second(t, fresh.cgf(t))        # the unmemoised path
        for name in ("cgf", "cgf_prime", "cgf_second"):
            assert getattr(shared, name)(t) == getattr(Tilt.from_logits(c, delta), name)(t)
        assert shared.cgf_second(t) == g2
