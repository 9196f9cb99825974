"""Soundness of the certificate: no query in the ball beats the ceiling (per-row, range, both).

The best H^2 is found independently of the ceiling: a dense grid for d = 1, 2, random points
plus bht's multi-start search for d >= 3; KL against its own ceiling (V/2) at the same points.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bhtcli import bound, design
from bhtcli.analysis.ceilings import Readout, pair_stats, per_row_variance, variance_ceiling
from bhtcli.maths.certificate import trust_region_max, weight_cap
from bhtcli.maths.divergences import divergences
from bhtcli.models.readout import make_readout
from bhtcli.models.softmax import SoftmaxPair


def ball_points(d, E, rng, k=3000):
    """Candidates in the ball: a dense grid for d = 1, 2, random points (and their sphere
    projections) beyond."""
    if d == 1:
        return np.linspace(-E, E, 4001)[None, :]
    if d == 2:
        th = np.linspace(0, 2 * np.pi, 721)[:-1]
        r = E * np.sqrt(np.linspace(0, 1, 61)[1:])
        R, T = np.meshgrid(r, th)
        return np.vstack([(R * np.cos(T)).ravel(), (R * np.sin(T)).ravel()])
    X = rng.standard_normal((d, k))
    X /= np.linalg.norm(X, axis=0)
    return np.hstack([E * X[:, : k // 2], E * X[:, k // 2:] * rng.uniform(size=k - k // 2) ** (1 / d)])


def best_found(A, B, E, readout, rng):
    """max H^2 and max KL (both directions) over the candidates (+ the search for d >= 3)."""
    d = A.shape[1]
    X = ball_points(d, E, rng)
    if d >= 3:
        r = design(A, B, E, starts=8, seed=int(rng.integers(1 << 30)),
                   link_a=readout.link_a.name, link_b=readout.link_b.name,
                   bias_a=readout.bias_a, bias_b=readout.bias_b)
        if r.distinguishable:
            X = np.hstack([X, np.asarray(r.query)[:, None]])
    pair = SoftmaxPair(A, B, readout=readout)
    D = pair.value(X)
    k = int(np.argmax(D))
    kl = 0.0
    for j in {k, *np.argsort(-D)[:5].tolist()}:
        div = pair.divergences(X[:, j])
        kl = max(kl, div.kl_ab, div.kl_ba)
    return float(-np.expm1(-D[k])), kl


def check_sound(A, B, E, readout=None, seed=0):
    readout = Readout() if readout is None else readout
    names = dict(link_a=readout.link_a.name, link_b=readout.link_b.name,
                 bias_a=readout.bias_a, bias_b=readout.bias_b)
    b = bound(A, B, E, **names)
    if not b.distinguishable:
        return b
    h2, kl = best_found(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64),
                        E, readout, np.random.default_rng(seed))
    tol = 1 + 1e-12                   # the reference's own rounding, not the ceiling's
    assert h2 <= b.certificate["hellinger_squared_max_bound"] * tol
    for method, ceiling in b.certificate["ceilings"].items():
        if ceiling is not None:
            assert h2 <= ceiling * tol, method
    assert kl <= b.certificate["kl_max_bound"] * tol
    assert b.certificate["ceiling_method"] in b.certificate["ceilings"]
    assert b.certificate["hellinger_squared_max_bound"] == min(v for v in b.certificate["ceilings"].values() if v is not None)
    return b


@st.composite
def pairs(draw):
    n = draw(st.integers(2, 8))
    d = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2 ** 31))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    A = scale * rng.standard_normal((n, d))
    kind = draw(st.sampled_from(["random", "close", "one_row", "shifted"]))
    if kind == "random":
        B = scale * rng.standard_normal((n, d))
    elif kind == "close":
        B = A + draw(st.sampled_from([1e-9, 1e-4, 0.1])) * rng.standard_normal((n, d))
    elif kind == "one_row":
        B = A.copy()
        B[draw(st.integers(0, n - 1))] += rng.standard_normal(d)
    else:                               # a common shift 1 w^T plus a small change
        B = A + rng.standard_normal(d) + 0.05 * rng.standard_normal((n, d))
    E = float(np.exp(draw(st.floats(math.log(0.01), math.log(10.0)))))
    biases = draw(st.sampled_from(["none", "a", "both"]))
    ba = rng.standard_normal(n) if biases != "none" else None
    bb = rng.standard_normal(n) if biases == "both" else None
    link = draw(st.sampled_from(["exp", "exp", "exp", "taylor:4"]))
    readout = make_readout(n, link, link, ba, bb)
    return A, B, E, readout, seed


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_no_query_beats_the_ceiling(case):
    A, B, E, readout, seed = case
    check_sound(A, B, E, readout, seed)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_large_logits(d):
    rng = np.random.default_rng(10 + d)
    A = 300.0 * rng.standard_normal((7, d))
    B = A + rng.standard_normal((7, d))
    for E in (0.01, 1.0, 10.0):
        check_sound(A, B, E, seed=d)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_nearly_equal_and_one_row_changed(d):
    rng = np.random.default_rng(20 + d)
    A = rng.standard_normal((8, d))
    B = A + 1e-9 * rng.standard_normal((8, d))
    for E in (0.01, 0.3, 3.0, 10.0):
        b = check_sound(A, B, E, seed=d)
        assert b.certificate["ceiling_method"] == "per_row" if E <= 0.3 else True
    C = A.copy()
    C[3] += 0.5 * rng.standard_normal(d)
    for E in (0.01, 1.0, 10.0):
        check_sound(A, C, E, seed=d)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_float32_inputs_stay_valid(d):
    rng = np.random.default_rng(30 + d)
    A = rng.standard_normal((8, d)).astype(np.float32)
    for B in (A + np.float32(1e-6) * rng.standard_normal((8, d)).astype(np.float32),
              (A + 0.1 * rng.standard_normal((8, d))).astype(np.float32)):
        for E in (0.05, 1.0, 8.0):
            b32 = check_sound(A, B, E, seed=d)        # the truth uses the float32 values exactly
            b64 = bound(A.astype(np.float64), B.astype(np.float64), E)
            assert b32.certificate["hellinger_squared_max_bound"] == pytest.approx(b64.certificate["hellinger_squared_max_bound"], rel=1e-12)


def test_per_row_matches_an_independent_computation_and_the_issue_formula():
    """The streamed per-row ceiling equals a direct recomputation (blocks of 3 rows vs one),
    and is never above (E^2/8) lambda_max((1/n) sum e^{E r_i} h_i h_i^T)."""
    rng = np.random.default_rng(5)
    n, d, E = 40, 3, 1.7
    A = rng.standard_normal((n, d))
    B = A + 0.2 * rng.standard_normal((n, d))
    V, _ = per_row_variance(A, B, E, rows=3, heavy_rows=0)
    V1, _ = per_row_variance(A, B, E, heavy_rows=0)
    assert V == pytest.approx(V1, rel=1e-12)
    split3, split = per_row_variance(A, B, E, rows=3)[0], per_row_variance(A, B, E)[0]
    assert split3 == pytest.approx(split, rel=1e-12) and split <= V1   # the smallest variant
    At, Bt = A - A.mean(0), B - B.mean(0)
    H = At - Bt
    r = np.maximum(np.linalg.norm(At, axis=1), np.linalg.norm(Bt, axis=1))
    cap = 1 / (1 + (n - 1) * np.exp(-n * E * r / (n - 1)))
    m = cap @ H / cap.sum()
    S = (H - m).T @ np.diag(cap) @ (H - m)
    assert V == pytest.approx(E ** 2 * np.linalg.eigvalsh(S)[-1], rel=1e-9)
    issue = E ** 2 * np.linalg.eigvalsh(H.T @ np.diag(np.exp(E * r) / n) @ H)[-1]
    assert V <= issue


def test_trust_region_bound_is_the_maximum():
    """The dual value equals the maximum of x^T S x + 2 s^T x + c over the disc (grid)."""
    rng = np.random.default_rng(6)
    for _ in range(5):
        M = rng.standard_normal((2, 2))
        S = M @ M.T
        s, c, E = rng.standard_normal(2), 0.3, float(rng.uniform(0.1, 3))
        sig, Q = np.linalg.eigh(S)
        got = trust_region_max(sig, Q.T @ s, c, E)
        th = np.linspace(0, 2 * np.pi, 200001)
        X = E * np.vstack([np.cos(th), np.sin(th)])
        ref = float(np.max(np.einsum("ik,ij,jk->k", X, S, X) + 2 * s @ X + c))
        assert ref <= got <= ref * (1 + 1e-8)
    # the hard case: s orthogonal to the top eigenvector; max of 2 - c^2 + c at c = 1/2
    got = trust_region_max(np.array([1.0, 2.0]), np.array([0.5, 0.0]), 0.0, 1.0)
    assert 2.25 <= got <= 2.25 * (1 + 1e-9)
    # and s = 0 exactly: lambda_max E^2 + c
    assert trust_region_max(np.array([1.0, 2.0]), np.zeros(2), 0.5, 3.0) == 2.0 * 9 + 0.5


def test_weight_cap_is_jensen_and_at_most_one():
    rng = np.random.default_rng(7)
    for n in (2, 5, 1000):
        z = rng.standard_normal((n, 200)) * 3
        p = np.exp(z - z.max(0))
        p /= p.sum(0)
        cap = weight_cap(z - z.mean(0), n, math.log(n - 1))
        assert np.all(p <= cap * (1 + 1e-12))
        assert np.all(cap <= 1.0)


def test_poly_links_keep_no_certificate_and_say_why():
    rng = np.random.default_rng(8)
    A, B = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    c = variance_ceiling(A, B, 1.0, math.inf, make_readout(6, "poly:2", "poly:2"))
    assert c.variance is None and c.method is None and "poly:K" in c.note
    b = bound(A, B, 1.0, link_a="poly:2", link_b="poly:2")
    assert b.certificate["hellinger_squared_max_bound"] is None and b.certificate["ceiling_method"] is None


def test_design_and_bound_print_the_same_ceiling():
    rng = np.random.default_rng(9)
    A = rng.standard_normal((30, 4))
    B = A + 0.1 * rng.standard_normal((30, 4))
    bias = rng.standard_normal(30)
    for E, kw in ((0.5, {}), (3.0, {"bias_a": bias}), (20.0, {})):
        b = bound(A, B, E, **kw)
        r = design(A, B, E, starts=4, **kw)
        c = r.certificate
        assert c["hellinger_squared_max_bound"] == b.certificate["hellinger_squared_max_bound"]
        assert c["ceiling_method"] == b.certificate["ceiling_method"] and c["ceilings"] == b.certificate["ceilings"]
        assert c["samples_lower_any_strategy"] == b.certificate["samples_lower_any_strategy"]
        assert c["mean_samples_lower_sequential"] == b.certificate["mean_samples_lower_sequential"]
        assert c["design_over_bound"] == pytest.approx(r.hellinger_squared / b.certificate["hellinger_squared_max_bound"])
    assert bound(A, B, 0.5).certificate["ceiling_method"] == "per_row"
    assert bound(A, B, 20.0).certificate["ceiling_method"] == "range"


def test_stats_pass_matches_numpy():
    rng = np.random.default_rng(11)
    A, B = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
    s = pair_stats(A, B, rows=7)
    assert np.allclose(s.abar, A.mean(0)) and np.allclose(s.bbar, B.mean(0))
    assert s.eps_2inf == pytest.approx(np.linalg.norm(A - B, axis=1).max())
    assert s.norm_a == pytest.approx(np.linalg.norm(A, axis=1).max())


@pytest.mark.slow
@pytest.mark.parametrize("seed,scale,ratio", [(0, 0.003, 2.0), (1, 0.01, 4.0), (2, 0.1, 10.0),
                                              (3, 0.5, 3.0), (4, 0.05, 1.0)])
def test_leverage_spectral_tv_bound_is_valid_and_never_looser(seed, scale, ratio):
    from bhtcli.commands.leverage_design import spectral_tv_bound, thm42_quantities, tv_bound
    from bhtcli.models.leverage import LeveragePair
    rng = np.random.default_rng(seed)
    n, d = 15, 3
    A = rng.standard_normal((n, d)) * rng.uniform(0.2, 3, d)       # uneven spectrum
    B = A + scale * rng.standard_normal((n, d))
    tau = spectral_tv_bound(A, B, ratio, 1.0)
    assert tau <= tv_bound(ratio, 1.0, *thm42_quantities(A, B), d) * (1 + 1e-12)
    pair = LeveragePair(A, B)
    lo, hi = -math.log(ratio), 0.0
    thetas = [rng.uniform(lo, hi, n) for _ in range(100)] + [rng.choice([lo, hi], n) for _ in range(200)]
    worst = 0.0
    for th in thetas:
        sa, sb = pair.states(th)
        worst = max(worst, 0.5 * np.abs(sa.h / sa.rank - sb.h / sb.rank).sum())
    assert worst <= tau + 1e-12


def test_pruned_exact_diameter_matches_all_pairs():
    """The pruned diameter (heavy-tailed row norms, large common part) equals the all-pairs
    one up to its rounding margin, and falls back to the Gram path when pruning would not pay."""
    from bhtcli.analysis.diameter import _pruned_diameter, row_diameter
    rng = np.random.default_rng(12)
    for _ in range(20):
        n, d = int(rng.integers(3, 300)), int(rng.integers(1, 6))
        G = rng.standard_normal((n, d)) * rng.exponential(1, (n, 1)) ** 3 + 10 * rng.standard_normal(d)
        ref = max(np.linalg.norm(G - G[i], axis=1).max() for i in range(n))
        got = row_diameter(G, exact_max_n=2)            # the pruned path, even beyond exact_max_n
        assert got.exact and ref <= got.value <= ref * (1 + 1e-12) + 1e-12
    G = rng.standard_normal((400, 3))
    assert _pruned_diameter(G, G.mean(0), max_pair_work=10.0) is None


@pytest.mark.slow
@pytest.mark.parametrize("links", [("exp", "taylor:2"), ("taylor:6", "exp"), ("taylor:2", "taylor:8")])
def test_mixed_links(links):
    rng = np.random.default_rng(13)
    for d in (1, 2, 4):
        A = rng.standard_normal((6, d))
        B = A + 0.3 * rng.standard_normal((6, d))
        readout = make_readout(6, *links, rng.standard_normal(6), None)
        for E in (0.05, 1.0, 4.0):
            check_sound(A, B, E, readout, seed=d)


@pytest.mark.slow
def test_diameter_of_a_float32_pair_streams_the_same_value():
    """DifferenceRows (float64 rows of A - B on demand) gives the same diameter as the full
    float64 centred difference, by pruned pairs and by blocked Gram products alike, and both
    bound a brute force on the exact float64 differences of the float32 inputs (subtracting in
    float32 would round A - B and could put the diameter below the true one)."""
    from bhtcli.analysis.diameter import DifferenceRows, centred_difference, row_diameter
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3000, 16)).astype(np.float32)
    B = (A + 0.01 * rng.standard_normal((3000, 16))).astype(np.float32)
    B[[7, 1900]] += 0.5
    lazy, full = DifferenceRows(A, B), centred_difference(A, B)
    assert np.allclose(lazy.mean(axis=0), (A.astype(np.float64) - B).mean(axis=0), rtol=0, atol=1e-15)
    for kwargs in ({}, {"max_pair_work": 0}):
        a, b = row_diameter(lazy, **kwargs), row_diameter(full, **kwargs)
        assert a.exact == b.exact
        assert a.value == pytest.approx(b.value, rel=1e-12)
    exact = A.astype(np.float64) - B.astype(np.float64)
    brute = max(np.linalg.norm(exact - exact[i], axis=1).max() for i in range(0, 3000))
    assert brute <= row_diameter(lazy).value <= brute * (1 + 1e-12)


# --- the heavy-row split (docs/maths.md §4.9) ---------------------------------------------------
def heavy_pair(n, d, seed, heavy=1, size=0.5, bias=False):
    """A - B small on every row but `heavy` rows, where it is large: the split's case."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    B = A + 0.01 * rng.standard_normal((n, d))
    B[:heavy] += size * rng.standard_normal((heavy, d))
    readout = make_readout(n, "exp", "exp", rng.standard_normal(n) if bias else None, None)
    return A, B, readout


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 2, 5])
@pytest.mark.parametrize("E", [0.3, 1.0, 3.0, 10.0])
def test_heavy_row_split_is_sound(d, E):
    for seed, heavy, bias in ((0, 1, False), (1, 2, False), (2, 1, True), (3, 4, False)):
        A, B, readout = heavy_pair(12, d, seed + 10 * d, heavy, bias=bias)
        plain = per_row_variance(A, B, E, readout, heavy_rows=0)[0]
        split = per_row_variance(A, B, E, readout)[0]
        assert split <= plain
        check_sound(A, B, E, readout, seed)                # grid (d <= 2) or points + search
        if d > 2:                                          # and a many-start search
            names = dict(bias_a=readout.bias_a)
            r = design(A, B, E, starts=64, seed=seed, **names)
            assert r.hellinger_squared <= bound(A, B, E, **names).certificate["hellinger_squared_max_bound"]


def test_heavy_row_split_binds_where_one_row_dominates():
    won = []
    for d, E in ((5, 1.0), (20, 1.0), (20, 0.3)):
        A, B, readout = heavy_pair(40, d, d, 1, size=0.1)
        plain = per_row_variance(A, B, E, readout, heavy_rows=0)[0]
        split = per_row_variance(A, B, E, readout)[0]
        won.append(split / plain)
        check_sound(A, B, E, readout, d)
    assert max(won) < 0.8, won                   # at least 20 % tighter in each case (0.63, 0.41, 0.59)


@pytest.mark.slow
def test_heavy_row_bound_against_sampling():
    """One row's bound >= sup over the ball and |t| <= 1/2 of kappa(z_i - mean z) (u x + e')^2,
    sampled densely in the three-dimensional span that matters."""
    from bhtcli.analysis.ceilings import heavy_row_bound
    rng = np.random.default_rng(3)
    n, d = 50, 3
    for _ in range(20):
        ac, bc = rng.standard_normal(d), rng.standard_normal(d)
        ac, bc = ac, ac + rng.uniform(0.01, 1.0) * rng.standard_normal(d)
        h, m = ac - bc, 0.1 * rng.standard_normal(d)
        e, mu0, at, bt = rng.standard_normal(4) * rng.uniform(0, 1)
        E = float(np.exp(rng.uniform(np.log(0.1), np.log(10))))
        f = heavy_row_bound(h, ac, bc, np.linalg.norm(ac), np.linalg.norm(bc), e, at, bt, m, mu0,
                             E, n, d, math.log(n - 1), 0.0, abs(at) + abs(bt), 0.0, 0.0)
        X = rng.standard_normal((d, 200000))
        X *= E * rng.uniform(size=200000) ** (1 / d) / np.linalg.norm(X, axis=0)
        X[:, :100000] *= E / np.linalg.norm(X[:, :100000], axis=0)          # half on the sphere
        best = 0.0
        for t in (-0.5, 0.0, 0.5):
            z = (0.5 + t) * (ac @ X + at) + (0.5 - t) * (bc @ X + bt)
            best = max(best, float(np.max(weight_cap(z, n, math.log(n - 1)) * ((h - m) @ X + e - mu0) ** 2)))
        assert best <= f


@pytest.mark.parametrize("links,biased,dtype,rows,skip", [
    (("exp", "exp"), False, np.float64, 8192, False), (("exp", "exp"), True, np.float32, 7, True),
    (("taylor:4", "exp"), True, np.float64, 5, False), (("poly:2", "poly:2"), False, np.float64, 8192, False)])
def test_ceilings_of_several_budgets_in_one_pass_equal_one_budget_at_a_time(monkeypatch, links, biased,
                                                                           dtype, rows, skip):
    """variance_ceilings / analyse_budgets (a budget curve: one streamed pass for all budgets)
    give every budget exactly what a call with that budget alone gives: heavy rows, biases,
    links, small row blocks, float32 storage, and the skip test on some budgets and not others."""
    from bhtcli.analysis import ceilings
    from bhtcli.analysis.ceilings import variance_ceilings
    from bhtcli.analysis.facts import analyse_budgets, analyse_pair
    if skip:
        monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    rng = np.random.default_rng(11)
    n, d = 37, 5
    A = (rng.standard_normal((n, d)) * np.exp(rng.standard_normal((n, 1)))).astype(dtype)
    B = (A + 0.3 * rng.standard_normal((n, d))).astype(dtype)
    readout = make_readout(n, *links, *((rng.standard_normal(n), rng.standard_normal(n)) if biased
                                        else (None, None)))
    energies = [0.05, 0.7, 2.0, 9.0]
    spreads = [e * 3.0 for e in energies[:2]] + [math.inf, 0.5]
    together = variance_ceilings(A, B, energies, spreads, readout, None, rows)
    alone = [variance_ceiling(A, B, e, s, readout, None, rows) for e, s in zip(energies, spreads)]
    assert together == alone
    assert {c.method for c in alone} - {None}, alone          # some budget has a ceiling
    if links[0] == "exp":
        assert any(c.candidates["per_row"] is not None for c in alone)
    facts = analyse_budgets(A, B, A - B, energies, readout)
    assert facts == [analyse_pair(A, B, A - B, e, readout) for e in energies]
