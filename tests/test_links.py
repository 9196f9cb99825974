"""Link functions (exp, poly:K, taylor:K), biases and float32 products, against direct formulas."""
import math
import subprocess
import sys

import mpmath as mp
import numpy as np
import pytest

from bhtcli import design
from bhtcli.api import bound
from bhtcli.errors import InputError
from bhtcli.models.links import Link, log_taylor, _taylor_psi, parse_link, taylor_difference
from bhtcli.models.readout import Readout, make_readout
from bhtcli.models.softmax import SoftmaxPair, logits_at
from bhtcli.maths.divergences import divergences

mp.mp.dps = 60


def weights(link: str, s: np.ndarray) -> np.ndarray:
    """f(s) straight from the definition (no logs, no tricks)."""
    if link == "exp":
        return np.exp(s)
    kind, K = link.split(":")
    K = int(K)
    if kind == "poly":
        return s ** K
    return sum(s ** j / math.factorial(j) for j in range(K + 1))


def direct_h2(A, B, x, la, lb, ba=None, bb=None):
    sa = A @ x + (0 if ba is None else ba)
    sb = B @ x + (0 if bb is None else bb)
    p, q = weights(la, sa), weights(lb, sb)
    p = p / p.sum() if p.sum() > 0 else np.full(len(p), 1 / len(p))
    q = q / q.sum() if q.sum() > 0 else np.full(len(q), 1 / len(q))
    return 1.0 - float(np.sum(np.sqrt(p * q)))


def h2_at(A, B, x, la="exp", lb="exp", ba=None, bb=None):
    readout = make_readout(A.shape[0], la, lb, ba, bb)
    return divergences(*logits_at(A, B, x, readout)).hellinger_squared


# --- parsing -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,kind,K", [("exp", "exp", 0), ("poly:2", "poly", 2), ("taylor:8", "taylor", 8),
                                         ("TAYLOR:4", "taylor", 4), ("softmax", "exp", 0)])
def test_parse_link(text, kind, K):
    link = parse_link(text)
    assert (link.kind, link.degree) == (kind, K)


@pytest.mark.parametrize("text", ["poly:3", "taylor:1", "taylor:0", "poly:66", "poly", "taylor:x", "cubic", "poly:-2"])
def test_parse_link_refuses(text):
    with pytest.raises(InputError):
        parse_link(text, "--link-b")


# --- the link functions against high precision ------------------------------------------------
@pytest.mark.parametrize("K", [2, 4, 6, 8, 20])
def test_log_taylor_and_psi_match_mpmath(K):
    for s in [-60.0, -21.0, -8.0, -3.0, -1.99, -0.7, -1e-4, 0.0, 1e-6, 0.3, 1.5, 2.0, 7.0, 40.0, 1e5]:
        exact = mp.log(sum(mp.mpf(s) ** j / mp.factorial(j) for j in range(K + 1)))
        got = log_taylor(np.array([s]), K)[0]
        assert abs(got - float(exact)) <= 1e-13 * max(1.0, abs(float(exact)))
        with mp.workdps(250):        # log T_K(s) - s cancels ~K log10(1/s) digits near 0
            psi = mp.log(sum(mp.mpf(s) ** j / mp.factorial(j) for j in range(K + 1))) - mp.mpf(s)
        got_psi = _taylor_psi(np.array([s]), K)[0]
        if psi == 0:
            assert got_psi == 0.0
        else:
            assert abs(got_psi - float(psi)) <= 1e-12 * abs(float(psi)), (K, s)


@pytest.mark.parametrize("name", ["exp", "poly:2", "poly:4", "taylor:2", "taylor:6"])
def test_log_weight_and_derivative(name):
    link = parse_link(name)
    s = np.array([-7.0, -2.5, -0.3, 0.4, 1.0, 3.3, 12.0])
    assert np.allclose(np.exp(link.log_weight(s)), weights(name, s), rtol=1e-13)
    h = 1e-6
    fd = (link.log_weight(s + h) - link.log_weight(s - h)) / (2 * h)
    assert np.allclose(link.dlog_weight(s), fd, rtol=1e-6, atol=1e-8)


def test_taylor_difference_has_no_cancellation():
    sa = np.array([0.3, -2.0, 5.0])
    ds = np.array([1e-12, -3e-11, 2e-10])
    sb = sa - ds
    for K in (2, 4, 8):
        exact = [float(sum((mp.mpf(a) ** j - mp.mpf(b) ** j) / mp.factorial(j) for j in range(1, K + 1)))
                 for a, b in zip(sa, sb)]
        assert np.allclose(taylor_difference(sa, sb, ds, K), exact, rtol=1e-9)


def test_taylor_psi_is_decreasing_so_its_oscillation_is_the_end_points():
    link = parse_link("taylor:4")
    s = np.linspace(-9, 9, 2001)
    psi = link.psi(s)
    assert np.all(np.diff(psi) <= 1e-15)
    assert link.psi_oscillation(9.0) == pytest.approx(psi[0] - psi[-1], rel=1e-12)


# --- probabilities: every pair of links, with and without biases --------------------------------
LINKS = ["exp", "poly:2", "poly:4", "taylor:2", "taylor:4", "taylor:8"]


@pytest.mark.slow
@pytest.mark.parametrize("la", LINKS)
@pytest.mark.parametrize("lb", LINKS)
def test_h2_matches_the_direct_formula(la, lb):
    rng = np.random.default_rng(hash((la, lb)) % 2**32)
    A, B = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    ba, bb = rng.normal(size=7), rng.normal(size=7)
    for x in rng.normal(size=(4, 3)):
        assert h2_at(A, B, x, la, lb) == pytest.approx(direct_h2(A, B, x, la, lb), rel=1e-10, abs=1e-15)
        assert h2_at(A, B, x, la, lb, ba, bb) == pytest.approx(direct_h2(A, B, x, la, lb, ba, bb),
                                                               rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("link", ["poly:2", "taylor:4"])
def test_nearly_equal_models_with_the_same_link_keep_their_digits(link):
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 2))
    B = A + 1e-9 * rng.normal(size=(6, 2))
    x = np.array([0.8, -0.6])
    K = int(link.split(":")[1])

    def f(s):
        s = mp.mpf(s)
        return s ** K if link.startswith("poly") else sum(s ** j / mp.factorial(j) for j in range(K + 1))
    Am, Bm = mp.matrix(A.tolist()), mp.matrix(B.tolist())
    xm = mp.matrix(x.tolist())
    p = [f((Am * xm)[i]) for i in range(6)]
    q = [f((Bm * xm)[i]) for i in range(6)]
    exact = 1 - sum(mp.sqrt(pi * qi) for pi, qi in zip(p, q)) / mp.sqrt(sum(p) * sum(q))
    assert 1e-22 < exact < 1e-16
    assert h2_at(A, B, x, link, link) == pytest.approx(float(exact), rel=1e-6)


def test_poly_degenerate_cases():
    A = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])   # third row: weight 0 for every x
    B = np.array([[1.0, 1.0], [2.0, 0.0], [1.0, -1.0]])
    # x = 0: every poly weight is 0, the model answers uniformly
    c, delta = logits_at(A, B, np.zeros(2), make_readout(3, "poly:2", "exp"))
    from bhtcli.maths.divergences import Tilt
    la, lb = Tilt.from_logits(c, delta).log_probs()
    assert np.allclose(np.exp(la), 1 / 3) and np.allclose(np.exp(lb), 1 / 3)
    # a row that is always 0 under poly but not under exp: exact H^2, p_2 = 0
    x = np.array([0.3, -0.9])
    assert h2_at(A, B, x, "poly:2", "exp") == pytest.approx(direct_h2(A, B, x, "poly:2", "exp"), rel=1e-12)
    la, _ = Tilt.from_logits(*logits_at(A, B, x, make_readout(3, "poly:2", "exp"))).log_probs()
    assert np.exp(la[2]) == 0.0
    # a query orthogonal to a row: that answer has probability 0
    x = np.array([0.0, 1.0])
    assert h2_at(A, B, x, "poly:4", "taylor:2") == pytest.approx(direct_h2(A, B, x, "poly:4", "taylor:2"), rel=1e-12)


# --- gradients -----------------------------------------------------------------------------------
@pytest.mark.parametrize("la,lb", [("exp", "taylor:4"), ("poly:2", "exp"), ("taylor:6", "taylor:6"),
                                   ("poly:4", "poly:4"), ("taylor:2", "poly:2")])
def test_gradient_matches_finite_differences(la, lb):
    rng = np.random.default_rng(11)
    A, B = rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    readout = make_readout(9, la, lb, rng.normal(size=9), None)
    pair = SoftmaxPair(A, B, readout=readout)
    X = rng.normal(size=(4, 3))
    _, g = pair.value_and_grad(X)
    h = 1e-6
    for j in range(4):
        e = np.zeros((4, 1))
        e[j] = h
        fd = (pair.value(X + e) - pair.value(X - e)) / (2 * h)
        assert np.allclose(g[j], fd, rtol=1e-5, atol=1e-9)


# --- global search on grids (d = 1, 2) -------------------------------------------------------------
def grid_max(A, B, E, la, lb, ba=None, bb=None):
    d = A.shape[1]
    if d == 1:
        xs = np.linspace(-E, E, 20001)[:, None]
    else:
        r = np.linspace(0, E, 301)
        t = np.linspace(0, 2 * np.pi, 1441)
        R, T = np.meshgrid(r, t)
        xs = np.stack([(R * np.cos(T)).ravel(), (R * np.sin(T)).ravel()], axis=1)
    pair = SoftmaxPair(A, B, readout=make_readout(A.shape[0], la, lb, ba, bb))
    D = pair.value(xs.T)
    k = int(np.argmax(D))
    return float(-np.expm1(-D[k])), xs[k]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("la,lb", [("exp", "taylor:4"), ("exp", "poly:2"), ("taylor:2", "taylor:2"),
                                   ("poly:2", "taylor:4")])
def test_design_finds_the_grid_maximum(seed, la, lb):
    rng = np.random.default_rng(100 + seed)
    d = 1 + seed % 2
    A = rng.normal(size=(6, d)) * 1.5
    B = A if la != lb else A + 0.5 * rng.normal(size=(6, d))
    E = 2.0
    ba = rng.normal(size=6) if seed >= 2 else None
    best, _ = grid_max(A, B, E, la, lb, ba)
    r = design(A, B, E, link_a=la, link_b=lb, bias_a=ba, starts=16, seed=seed)
    assert r.hellinger_squared >= best * (1 - 1e-4)
    assert r.hellinger_squared <= direct_h2(A, B, np.array(r.query), la, lb, ba) * (1 + 1e-9) + 1e-15


@pytest.mark.slow
@pytest.mark.parametrize("d,n,scale", [(1, 3, 2.0), (2, 2, 3.0)])
def test_interior_maximum_with_biases_is_found(d, n, scale):
    # Same rows, different biases: at x = 0 the biases alone separate the models; far out the
    # row with the largest score dominates both, so the best query lies inside the ball.
    rng = np.random.default_rng(0)
    A = rng.normal(size=(n, d)) * scale
    ba, bb = rng.normal(size=n), rng.normal(size=n)
    best, xbest = grid_max(A, A, 3.0, "exp", "exp", ba, bb)
    assert np.linalg.norm(xbest) < 2.0
    r = design(A, A, 3.0, bias_a=ba, bias_b=bb, starts=8)
    # (with n = 2 rows the maximisers form a line x.(a_1 - a_2) = t*, which meets the sphere's
    # inside: any of its interior points is a right answer)
    assert not r.on_boundary and (d == 2 or r.query_norm < 2.0)
    assert r.hellinger_squared >= best * (1 - 1e-6)


# --- same-model rules, certificates ------------------------------------------------------------------
@pytest.mark.slow
def test_same_model_rules():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(5, 3))
    assert not design(A, A, 1.0, link_a="taylor:4", link_b="taylor:4").distinguishable
    assert not design(A, -2.0 * A, 1.0, link_a="poly:2", link_b="poly:2").distinguishable
    assert design(A, A, 1.0, link_a="exp", link_b="taylor:4").distinguishable
    same_rows = np.tile(rng.normal(size=(1, 3)), (5, 1))
    assert not design(same_rows, 2 * same_rows, 1.0, link_a="exp", link_b="poly:2").distinguishable
    b = rng.normal(size=5)
    assert not design(A, A, 1.0, bias_a=b, bias_b=b + 3.0).distinguishable      # constant shift
    assert design(A, A, 1.0, bias_a=b, bias_b=-b).distinguishable


@pytest.mark.slow
def test_taylor_certificate_holds_and_poly_has_none():
    rng = np.random.default_rng(8)
    A = rng.normal(size=(8, 3))
    B = A + 0.3 * rng.normal(size=(8, 3))
    E = 1.5
    r = bound(A, B, E, link_a="exp", link_b="taylor:4")
    assert r.distinguishable and r.certificate["hellinger_squared_max_bound"] is not None
    for x in rng.normal(size=(200, 3)):
        x *= E * rng.uniform() ** (1 / 3) / np.linalg.norm(x)
        assert h2_at(A, B, x, "exp", "taylor:4") <= r.certificate["hellinger_squared_max_bound"]
    p = bound(A, B, E, link_a="poly:2")
    assert p.certificate["hellinger_squared_max_bound"] is None and "poly" in p.certificate["note"]


# --- float32 products ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("settings", [{}, {"link_b": "taylor:4"}])
def test_float32_design_reaches_the_float64_h2(settings):
    rng = np.random.default_rng(21)
    A = rng.normal(size=(600, 24)) / 5
    B = A + 0.05 * rng.normal(size=(600, 24)) / 5 if not settings else A
    h64 = design(A, B, 2.0, seed=1, **settings)
    h32 = design(A.astype(np.float32), B.astype(np.float32), 2.0, seed=1, dtype="float32", **settings)
    assert h32.dtype == "float32"
    assert abs(h32.hellinger_squared - h64.hellinger_squared) <= 1e-4 * h64.hellinger_squared


def test_float32_pair_keeps_the_matrix_in_float32():
    A = np.ones((4, 3), dtype=np.float32)
    pair = SoftmaxPair(A, 2 * A, dtype="float32")
    assert pair.K.dtype == np.float32
    c, delta = pair.logits(np.ones(3))
    assert c.dtype == np.float64


# --- answers and decisions with links ---------------------------------------------------------------
def test_sampled_answers_follow_the_link():
    from bhtcli.models.answers import sample
    A = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x = np.array([1.0, -0.5])
    bias = np.array([0.0, 2.0, 0.5])
    draws = sample(A, x, 60_000, seed=4, link="poly:2", bias=bias)
    p = weights("poly:2", A @ x + bias)
    p /= p.sum()
    freq = np.bincount(draws, minlength=3) / len(draws)
    assert np.allclose(freq, p, atol=4 * np.sqrt(p * (1 - p) / len(draws)).max())


def test_decide_uses_the_links():
    from bhtcli.api import decide
    A = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x = np.array([1.0, -0.5])
    answers = [0, 2, 2, 1, 0]
    r = decide(A, A, x, answers, link_a="exp", link_b="taylor:2")
    p, q = weights("exp", A @ x), weights("taylor:2", A @ x)
    llr = np.log(p / p.sum()) - np.log(q / q.sum())
    assert r.llr == pytest.approx(float(llr[answers].sum()), rel=1e-12)


# --- command line --------------------------------------------------------------------------------------
def bht(*args):
    return subprocess.run([sys.executable, "-m", "bhtcli", *args], capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("args,needle", [
    (["--link-a", "poly:3"], "--link-a"),
    (["--link-b", "taylor:5"], "--link-b"),
    (["--link-b", "sigmoid"], "--link-b"),
    (["--bias-a", "examples/x.npy"], "--bias-a"),
    (["--bias-b", "missing.npy"], "missing.npy"),
    (["--model", "leverage", "--floor", "0.5", "--link-a", "taylor:2"], "leverage"),
    (["--method", "ccp", "--link-b", "taylor:2"], "ccp"),
    (["--model", "leverage", "--floor", "0.5", "--dtype", "float32"], "float32"),
])
def test_cli_errors_are_one_line(args, needle):
    p = bht("design", "examples/A.npy", "examples/B.npy", "--energy", "1", *args)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0]


@pytest.mark.slow
def test_cli_links_in_json_and_every_command(tmp_path):
    import json
    p = bht("design", "examples/A.npy", "examples/A.npy", "--link-b", "taylor:4", "-E", "2", "--json",
            "--starts", "8", "--out", str(tmp_path / "x.npy"))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["readout"] == {"link_a": "exp", "link_b": "taylor:4", "bias_a": False, "bias_b": False}
    assert r["distinguishable"] and r["samples"]["predicted"] >= 1
    b = bht("bound", "examples/A.npy", "examples/A.npy", "--link-b", "taylor:4", "-E", "2", "--json")
    assert json.loads(b.stdout)["certificate"]["hellinger_squared_max_bound"] >= r["hellinger_squared"]
    s = bht("sample", "examples/A.npy", "--query", str(tmp_path / "x.npy"), "-n", "30", "--link-a", "taylor:4")
    assert s.returncode == 0 and len(s.stdout.split()) == 30
    (tmp_path / "ans.txt").write_text(s.stdout)
    d = bht("decide", "examples/A.npy", "examples/A.npy", str(tmp_path / "ans.txt"), "--query",
            str(tmp_path / "x.npy"), "--link-b", "taylor:4", "--json")
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["samples_total"] == 30


def test_simulate_with_links_matches_the_prediction():
    from bhtcli.api import simulate
    A = np.load("examples/A.npy")
    r = simulate(A, A, 1.0, link_b="taylor:2", trials=2000, policy="fixed", seed=3)
    assert r.fixed is not None
    pred, emp = r.fixed["predicted"], r.fixed["empirical"]
    assert abs(emp - pred) <= max(0.15 * pred, 2)


# --- properties ---------------------------------------------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402

entries = st.floats(-3, 3, allow_nan=False).map(lambda v: 0.0 if abs(v) < 1e-6 else v)
link_names = st.sampled_from(LINKS)


@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(arrays(np.float64, (5, 2), elements=entries), arrays(np.float64, (5, 2), elements=entries),
       arrays(np.float64, (2,), elements=entries), arrays(np.float64, (5,), elements=entries),
       link_names, link_names)
def test_h2_is_symmetric_and_matches_the_direct_formula(A, B, x, bias, la, lb):
    h_ab = h2_at(A, B, x, la, lb, bias, None)
    h_ba = h2_at(B, A, x, lb, la, None, bias)
    # Poly weights of exactly 0 sit at a log-weight floor 1400 below the column's largest
    # (links.py); sums then mix terms of size ~1400, which costs ~1400 eps ~ 3e-13 in the
    # logs: hypothesis found swaps differing by 4e-12 (x = [1e-5, 2], zero rows), so 1e-10.
    assert abs(h_ab - h_ba) <= 1e-10
    assert 0.0 <= h_ab <= 1.0
    direct = direct_h2(A, B, x, la, lb, bias, None)
    assert abs(h_ab - direct) <= 1e-9 * max(direct, 1e-6)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (4, 2), elements=entries), arrays(np.float64, (2,), elements=entries),
       arrays(np.float64, (4,), elements=entries), st.floats(-5, 5, allow_nan=False))
def test_a_constant_added_to_an_exp_bias_changes_nothing(A, x, bias, shift):
    B = A[::-1].copy()
    assert abs(h2_at(A, B, x, ba=bias) - h2_at(A, B, x, ba=bias + shift)) <= 1e-12


@pytest.mark.slow
def test_poly2_maximum_on_a_zero_score_ridge_is_flagged():
    # poly:2 weights are s^2, so sqrt(p) ~ |s| has a kink where a score is 0; here the best
    # query sits on such a ridge (s_3 = 0). L-BFGS stops near it (within 1e-3 of the best
    # H^2 a fine grid finds with 16 starts) and says so with a large KKT residual.
    rng = np.random.default_rng(103)
    A = rng.normal(size=(6, 2)) * 1.5
    ba = rng.normal(size=6)
    r = design(A, A, 2.0, link_a="poly:2", link_b="taylor:4", bias_a=ba, starts=16, seed=3)
    assert r.hellinger_squared >= 0.4462 * (1 - 1e-3)
    assert abs((A @ np.array(r.query) + ba)[2]) < 1e-8
    assert r.solver["kkt_residual"] > 1e-3


@pytest.mark.parametrize("link", ["softcap:2", "taylor:4"])
def test_close_difference_falls_back_only_where_the_scores_are_huge(link):
    """Readout's delta phi(sa) - phi(sb): the close form where the scores are moderate, the
    plain difference where they are huge (|s/C| > 300, |s| > 700), whether a column holds
    both kinds or one: against mpmath at 50 digits."""
    import mpmath
    from bhtcli.models.readout import Readout
    L = parse_link(link)
    ro = Readout(L, L)
    mpmath.mp.dps = 50

    def phi(s):
        if L.kind == "softcap":
            return L.cap * mpmath.tanh(mpmath.mpf(s) / L.cap)
        return mpmath.log(sum(mpmath.mpf(s) ** k / mpmath.factorial(k) for k in range(L.degree + 1)))
    sb = np.array([0.3, -1.2, 2000.0, 0.7])
    ds = np.array([1e-9, 3e-6, 1.5, -2e-7])
    for idx in ([0, 1], [2], [0, 1, 2, 3]):
        got = ro._difference(sb[idx] + ds[idx], sb[idx], ds[idx])
        for g, s, e in zip(got, sb[idx], ds[idx]):
            exact = float(phi(mpmath.mpf(s) + mpmath.mpf(e)) - phi(s))
            assert g == pytest.approx(exact, rel=1e-8, abs=1e-300 if abs(s) < 700 else 1e-9)
