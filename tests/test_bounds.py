import math

import numpy as np
import pytest

from bhtcli import bound, design
from bhtcli.analysis.diameter import row_diameter
from bhtcli.maths.certificate import certificate
from bhtcli.models.softmax import SoftmaxPair


def brute_diameter(G):
    return max(np.linalg.norm(G[i] - G[j]) for i in range(len(G)) for j in range(len(G)))


def test_exact_diameter_matches_all_pairs_and_stays_an_upper_bound():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((60, 5)) + 100.0        # a large common part must not matter
    ref = brute_diameter(G)
    got = row_diameter(G)
    assert got.exact
    assert ref <= got.value <= ref * (1 + 1e-10)


def test_cheap_diameter_is_a_rigorous_upper_bound():
    rng = np.random.default_rng(1)
    G = rng.standard_normal((300, 4))
    cheap = row_diameter(G, exact_max_n=10, max_pair_work=0)   # no pruned exact path
    assert not cheap.exact
    assert brute_diameter(G) <= cheap.value <= 2 * brute_diameter(G)


def test_certificate_formulas_by_hand():
    c = certificate(energy=2.0, diameter=0.5, alpha=0.05, distinguishable=True)
    r2 = (2.0 * 0.5) ** 2
    assert c.hellinger_squared_max_bound == pytest.approx(1 - math.exp(-r2 / 32))
    assert c.samples_lower_any_strategy == math.ceil(math.log(1 / (4 * 0.05 * 0.95)) / (2 * r2 / 32))
    assert c.mean_samples_lower_sequential == math.floor(0.9 * math.log(19) / (r2 / 8))


def test_no_query_beats_the_certificate():
    rng = np.random.default_rng(2)
    for trial in range(5):
        A = rng.standard_normal((30, 4)) * (trial + 1)
        B = A + rng.standard_normal((30, 4))
        E = 0.5 + trial
        b = bound(A, B, E)
        X = rng.standard_normal((4, 500))
        X *= E / np.linalg.norm(X, axis=0) * rng.uniform(size=500) ** 0.25
        D = SoftmaxPair(A, B).value(X)
        assert np.all(-np.expm1(-D) <= b.certificate["hellinger_squared_max_bound"])
        # D <= range(Delta)^2/32 pointwise (docs/maths.md §4.1)
        delta = (A - B) @ X
        assert np.all(D <= (delta.max(0) - delta.min(0)) ** 2 / 32 * (1 + 1e-12))


def test_bound_reports_paper_eps_and_same_model():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((10, 3))
    B = A + 0.1 * rng.standard_normal((10, 3))
    b = bound(A, B, 1.0)
    assert b.row_norm_2inf == pytest.approx(np.linalg.norm(A - B, axis=1).max())
    assert b.certificate["row_diameter"] <= 2 * b.row_norm_2inf * (1 + 1e-12)
    same = bound(A, A + np.array([1.0, -2.0, 0.5]), 1.0)
    assert not same.distinguishable
    assert same.certificate["samples_lower_any_strategy"] is None and same.certificate["mean_samples_lower_sequential"] is None


def test_same_model_rule_and_tiny_differences():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((15, 4))
    for B in (A.copy(), A + 3.0, A + np.outer(np.ones(15), rng.standard_normal(4))):
        r = design(A, B, 1.0)
        assert not r.distinguishable and r.hellinger == 0.0
        assert r.samples["predicted"] is None and r.certificate["samples_lower_any_strategy"] is None
    close = A + 1e-9 * rng.standard_normal((15, 4))
    r = design(A, close, 1.0)
    assert r.distinguishable
    assert 0 < r.hellinger_squared < 1e-15
    assert isinstance(r.samples["upper"], int) and r.samples["upper"] > 10 ** 15
    assert r.samples["lower"] <= r.samples["predicted"] <= r.samples["upper"]
    assert r.hellinger_squared <= r.certificate["hellinger_squared_max_bound"]
