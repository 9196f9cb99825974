import mpmath
import numpy as np
import pytest

from bhtcli import design
from bhtcli.search.ascent import ascend, project
from bhtcli.models.softmax import SoftmaxPair
from conftest import grid_max_h2


def random_pair(seed, n, d, scale=1.0, noise=0.5):
    rng = np.random.default_rng(seed)
    A = scale * rng.standard_normal((n, d))
    return A, A + noise * scale * rng.standard_normal((n, d))


@pytest.mark.slow
@pytest.mark.parametrize("seed,n,energy", [(0, 5, 1.0), (1, 8, 3.0), (2, 20, 6.0), (3, 3, 10.0)])
def test_d1_matches_brute_force(seed, n, energy):
    A, B = random_pair(seed, n, 1)
    best, _ = grid_max_h2(A, B, energy)
    r = design(A, B, energy)
    assert r.query_norm <= energy * (1 + 1e-12)
    assert r.hellinger_squared >= best * (1 - 1e-7)
    assert r.hellinger_squared <= best * (1 + 1e-3)     # the grid is fine enough to be close


@pytest.mark.slow
@pytest.mark.parametrize("seed,n,energy", [(4, 6, 1.0), (5, 12, 3.0), (6, 30, 5.0), (7, 50, 8.0)])
def test_d2_matches_brute_force(seed, n, energy):
    A, B = random_pair(seed, n, 2)
    best, _ = grid_max_h2(A, B, energy)
    r = design(A, B, energy)
    assert r.query_norm <= energy * (1 + 1e-12)
    assert r.hellinger_squared >= best * (1 - 1e-6)


def interior_pair():
    """Eight shared rows on a big circle dominate both models for large ||x||, so both
    distributions collapse onto the same row and H -> 0: the best query is inside the ball."""
    t = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    ring = 3.0 * np.stack([np.cos(t), np.sin(t)], axis=1)
    A = np.vstack([ring, [[0.0, 0.0], [0.5, -0.5]]])
    B = np.vstack([ring, [[1.5, 0.5], [-0.5, 0.5]]])
    return A, B


@pytest.mark.slow
def test_interior_maximum_is_found_and_reported():
    A, B = interior_pair()
    energy = 6.0
    best, x_grid = grid_max_h2(A, B, energy)
    assert np.linalg.norm(x_grid) < 0.8 * energy        # the landscape really peaks inside
    r = design(A, B, energy)
    assert r.hellinger_squared >= best * (1 - 1e-6)
    assert not r.on_boundary
    assert r.query_norm < 0.9 * energy
    assert r.solver["kkt_residual"] < 1e-5


@pytest.mark.slow
def test_multimodal_landscape_single_local_runs_fail_but_design_does_not():
    A, B = random_pair(11, 40, 2, scale=1.0, noise=0.8)
    energy = 6.0
    best, _ = grid_max_h2(A, B, energy)
    pair = SoftmaxPair(A, B)
    t = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    X0 = energy * np.stack([np.cos(t), np.sin(t)])
    local = ascend(pair, X0, energy, gtol=1e-10, max_iter=2000)
    h2 = -np.expm1(-local.f)
    distinct_values = np.unique(np.round(h2, 6))
    assert len(distinct_values) >= 3, "the landscape should have several local maxima"
    assert h2.min() < 0.8 * best, "some single local run should end on a poor local maximum"
    r = design(A, B, energy)
    assert r.hellinger_squared >= best * (1 - 1e-6)
    assert r.solver["local_maxima"] >= 2


def test_kkt_point_on_sphere_has_outward_gradient():
    A, B = random_pair(3, 200, 10)
    r = design(A, B, 2.0)
    assert r.on_boundary
    assert r.solver["kkt_residual"] < 1e-6


@pytest.mark.slow
def test_deterministic_for_a_seed_and_seed_matters_only_for_random_starts():
    A, B = random_pair(5, 300, 12)
    r1, r2 = design(A, B, 3.0, seed=4), design(A, B, 3.0, seed=4)
    assert r1.query == r2.query
    assert r1.hellinger_squared == r2.hellinger_squared


@pytest.mark.slow
def test_ccp_cross_check_reaches_the_same_maximum():
    A, B = random_pair(8, 15, 3)
    fast = design(A, B, 1.5)
    slow = design(A, B, 1.5, method="ccp", starts=8)
    assert slow.hellinger_squared == pytest.approx(fast.hellinger_squared, rel=1e-5)


def test_design_is_never_better_than_the_certificate_and_beats_random_queries():
    A, B = random_pair(9, 100, 6)
    r = design(A, B, 2.0)
    assert r.hellinger_squared <= r.certificate["hellinger_squared_max_bound"]
    rng = np.random.default_rng(0)
    X = project(rng.standard_normal((6, 2000)) * 5, 2.0)
    assert r.bhattacharyya_distance >= SoftmaxPair(A, B).value(X).max()


def test_gradient_matches_high_precision_finite_differences_for_nearly_equal_models():
    mpmath.mp.dps = 60
    rng = np.random.default_rng(1)
    for eps in [1.0, 1e-9]:
        A = rng.standard_normal((6, 3))
        B = A + eps * rng.standard_normal((6, 3))
        x = rng.standard_normal(3)
        D, g = SoftmaxPair(A, B).value_and_grad(x[:, None])

        def D_mp(xv):
            a = [mpmath.fsum(mpmath.mpf(A[i, j]) * xv[j] for j in range(3)) for i in range(6)]
            b = [mpmath.fsum(mpmath.mpf(B[i, j]) * xv[j] for j in range(3)) for i in range(6)]
            c = [(u + v) / 2 for u, v in zip(a, b)]
            lse = lambda v: mpmath.log(mpmath.fsum(mpmath.exp(t) for t in v))
            return lse(a) / 2 + lse(b) / 2 - lse(c)

        xv = [mpmath.mpf(t) for t in x]
        h = mpmath.mpf("1e-25")
        fd = []
        for j in range(3):
            xp, xm = list(xv), list(xv)
            xp[j] += h
            xm[j] -= h
            fd.append(float((D_mp(xp) - D_mp(xm)) / (2 * h)))
        assert D[0] == pytest.approx(float(D_mp(xv)), rel=1e-12)
        np.testing.assert_allclose(g[:, 0], fd, rtol=1e-9, atol=1e-12 * np.abs(fd).max())


def test_logits_of_a_million_stay_finite():
    rng = np.random.default_rng(12)
    A = 1e5 * rng.standard_normal((20, 3))
    B = A + 1e3 * rng.standard_normal((20, 3))
    with np.errstate(over="raise", invalid="raise"):
        r = design(A, B, 10.0)            # |Ax| ~ 1e6
    d = r.to_dict()
    for key in ("hellinger_squared", "total_variation", "kl_ab", "kl_ba", "chernoff_information"):
        assert d[key] is not None and np.isfinite(d[key])
    assert 0 < r.hellinger_squared <= 1
    assert r.samples["lower"] <= r.samples["predicted"] <= r.samples["upper"]


def test_one_start_and_degenerate_shapes():
    A, B = random_pair(13, 10, 4)
    r = design(A, B, 1.0, starts=1)
    assert r.solver["starts"] == 1 and r.hellinger_squared > 0
    one_row = design(A[:1], B[:1], 1.0)
    assert not one_row.distinguishable     # a single answer carries no information
