"""The softcap readout p_i ∝ exp(C tanh(s_i / C)) through every command, against numpy
formulas written here (docs/maths.md §7.2)."""
import importlib
import json

import mpmath
import numpy as np
import pytest
from scipy.special import softmax

from bhtcli import InputError, bound, decide, design, sample, simulate
from bhtcli.cli.main import main
from bhtcli.models.links import Link, parse_link
from bhtcli.models.readout import Readout
from conftest import disk_points


def capped(s, c):
    """Log-weights: s (exp, c None), C tanh(s / C) (softcap, c a number), log T_K (c "taylor:K")."""
    if c is None:
        return s
    if isinstance(c, str):
        K = int(c.split(":")[1])
        return np.log(sum(s ** j / np.prod(np.arange(1, j + 1.0)) for j in range(K + 1)))
    return c * np.tanh(s / c)


def law(M, x, c=None, bias=None):
    """Probabilities of each column of x (d,) or (d, k): softmax(C tanh((M x + bias) / C))."""
    s = M @ x
    if bias is not None:
        s = s + (bias if s.ndim == 1 else bias[:, None])
    return softmax(capped(s, c), axis=0)


def h2(A, B, x, ca, cb, ba=None, bb=None):
    return 1 - np.sum(np.sqrt(law(A, x, ca, ba) * law(B, x, cb, bb)), axis=0)


def cap_of(link):
    if link.startswith("taylor"):
        return link
    return None if link == "exp" else float(link.split(":")[1])


def pair(seed, n=7, d=2, scale=2.0, diff=0.5):
    rng = np.random.default_rng(seed)
    A = scale * rng.standard_normal((n, d))
    return A, A + diff * rng.standard_normal((n, d)), rng


# --- the link ---------------------------------------------------------------------------------
def test_parse_and_name_round_trip():
    link = parse_link("softcap:30")
    assert link == Link("softcap", cap=30.0) and link.name == "softcap:30"
    assert parse_link("softcap:2.5").name == "softcap:2.5"
    assert parse_link(parse_link("softcap:0.1").name).cap == 0.1


@pytest.mark.parametrize("text", ["softcap:0", "softcap:-3", "softcap:abc", "softcap:inf", "softcap:nan", "softcap:"])
def test_bad_caps_are_refused(text):
    with pytest.raises(InputError, match="softcap"):
        parse_link(text, "--link-a")


def test_bad_cap_on_the_command_line(capsys, pair_files):
    a, b, *_ = pair_files
    with pytest.raises(SystemExit) as exc:
        main(["bound", a, b, "-E", "1", "--link-a", "softcap:0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("Error: --link-a 'softcap:0'")


def test_log_weight_derivative_and_oscillations():
    link = parse_link("softcap:3")
    s = np.linspace(-40, 40, 2001)
    np.testing.assert_allclose(link.log_weight(s), 3 * np.tanh(s / 3), rtol=0, atol=1e-15)
    h = 1e-5
    fd = (link.log_weight(s + h) - link.log_weight(s - h)) / (2 * h)
    np.testing.assert_allclose(link.dlog_weight(s), fd, atol=1e-9)
    assert np.all(link.dlog_weight(np.array([1e6, -1e6])) == 0)
    for r in (0.01, 1.0, 3.0, 50.0):
        grid = np.linspace(-r, r, 20001)
        psi = link.psi(grid)
        assert link.psi_oscillation(r) >= psi.max() - psi.min()
        phi = link.log_weight(grid)
        assert link.log_weight_oscillation(r) >= phi.max() - phi.min()
        assert link.log_weight_oscillation(r) <= 6 * (1 + 1e-12)


def test_equal_caps_delta_has_no_cancellation():
    # models 1e-9 apart: delta = C (tanh(sa/C) - tanh(sb/C)) against 50-digit mpmath
    rng = np.random.default_rng(4)
    m, D = 5 * rng.standard_normal(6), 1e-9 * rng.standard_normal(6)
    link = parse_link("softcap:2")
    _, delta, _ = Readout(link, link).forward(m, D)
    mpmath.mp.dps = 50
    for mi, Di, got in zip(m, D, delta):
        sa, sb = mpmath.mpf(mi) + mpmath.mpf(Di) / 2, mpmath.mpf(mi) - mpmath.mpf(Di) / 2
        exact = 2 * (mpmath.tanh(sa / 2) - mpmath.tanh(sb / 2))
        assert abs(got - float(exact)) <= 1e-14 * abs(float(exact))


# --- design, bound: against the direct formula and a grid --------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("seed,la,lb,bias", [
    (0, "softcap:1", "softcap:1", False), (1, "softcap:3", "softcap:3", True),
    (2, "exp", "softcap:2", False), (3, "softcap:2", "softcap:5", True), (4, "taylor:4", "softcap:3", False),
])
def test_design_and_certificate_against_a_grid(seed, la, lb, bias):
    A, B, rng = pair(seed)
    ba = rng.standard_normal(7) if bias else None
    E = 2.0
    xs = disk_points(E, 2, m=301)
    grid = h2(A, B, xs, cap_of(la), cap_of(lb), ba).max()
    d = design(A, B, E, link_a=la, link_b=lb, bias_a=ba, starts=64)
    x = np.asarray(d.query)
    direct = h2(A, B, x, cap_of(la), cap_of(lb), ba)
    assert d.hellinger_squared == pytest.approx(direct, rel=1e-10)
    assert d.hellinger_squared >= grid * (1 - 1e-3)            # the search finds the maximum
    assert np.linalg.norm(x) <= E * (1 + 1e-12)
    b = bound(A, B, E, link_a=la, link_b=lb, bias_a=ba)
    assert b.certificate["hellinger_squared_max_bound"] >= d.hellinger_squared   # the certificate holds
    assert b.certificate["hellinger_squared_max_bound"] >= grid
    assert d.readout["link_a"] == la and d.readout["link_b"] == lb


def test_two_capped_models_certificate_uses_the_cap():
    # scores far beyond C: the psi oscillation alone would give a useless ceiling (H^2 <= 1);
    # |phi| < C bounds the range of delta by 4C whatever the budget
    A, B, _ = pair(5, n=20, d=3, scale=10.0, diff=0.01)
    b = bound(A, B, 100.0, link_a="softcap:0.5", link_b="softcap:0.5")
    assert b.certificate["score_spread_bound"] <= max(4 * 0.5, 100 * 0.01 * 10) * (1 + 1e-9)
    assert "softcap" in b.certificate["note"]
    generic = bound(A, B, 100.0, link_a="softcap:0.5", link_b="taylor:4")
    assert generic.certificate["score_spread_bound"] > b.certificate["score_spread_bound"]


def test_same_model_with_equal_caps():
    A, _, _ = pair(6)
    r = design(A, A.copy(), 1.0, link_a="softcap:4", link_b="softcap:4")
    assert r.distinguishable is False
    B = A + 0.3   # a shift is a different softcap model (tanh is not linear)
    assert design(A, B, 1.0, link_a="softcap:4", link_b="softcap:4").distinguishable is True


# --- sample, decide, simulate, rank, sweep -----------------------------------------------------
def test_sample_frequencies_follow_the_capped_law():
    A, _, rng = pair(7, n=5)
    x = rng.standard_normal(2)
    draws = sample(A, x, 200_000, seed=3, link_a="softcap:1.5")
    freq = np.bincount(draws, minlength=5) / draws.size
    p = law(A, x, 1.5)
    assert np.max(np.abs(freq - p) / np.sqrt(p * (1 - p) / draws.size)) < 5


def test_decide_log_likelihood_ratio_is_the_direct_sum():
    A, B, rng = pair(8)
    x = rng.standard_normal(2)
    answers = rng.integers(0, 7, size=40)
    r = decide(A, B, x, answers, link_a="softcap:2", link_b="softcap:2")
    p, q = law(A, x, 2.0), law(B, x, 2.0)
    assert r.llr == pytest.approx(float(np.sum(np.log(p[answers]) - np.log(q[answers]))), rel=1e-10)


@pytest.mark.slow
def test_simulate_and_rank_with_softcap(tmp_path, capsys):
    A, B, rng = pair(9)
    s = simulate(A, B, 2.0, link_a="softcap:2", link_b="softcap:2", trials=300, policy="fixed", seed=1)
    assert s.distinguishable and s.fixed["empirical"] is not None
    H = rng.standard_normal((30, 2))
    np.save(tmp_path / "A.npy", A), np.save(tmp_path / "B.npy", B), np.save(tmp_path / "H.npy", H)
    with pytest.raises(SystemExit) as exc:
        main(["rank", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"), str(tmp_path / "H.npy"),
              "--link-a", "softcap:2", "--link-b", "softcap:2", "--top", "30", "--json"])
    assert exc.value.code == 0
    top = json.loads(capsys.readouterr().out)["top"]
    for row in top:
        assert row["hellinger_squared"] == pytest.approx(h2(A, B, H[row["index"]], 2.0, 2.0), rel=1e-9)


@pytest.mark.parametrize("command", [
    ["design", "-E", "1"], ["bound", "-E", "1"], ["simulate", "-E", "1", "--trials", "200"],
])
def test_every_pair_command_takes_softcap(command, pair_files, capsys):
    a, b, *_ = pair_files
    with pytest.raises(SystemExit) as exc:
        main([command[0], a, b, *command[1:], "--link-a", "softcap:30", "--link-b", "softcap:2", "--json"])
    assert exc.value.code == 0
    out = json.loads(capsys.readouterr().out)
    if command[0] == "simulate":          # the designed query's H^2 under the capped laws
        A, B = np.load(a), np.load(b)
        assert out["hellinger_squared"] == pytest.approx(h2(A, B, np.array(out["query"]), 30.0, 2.0), rel=1e-9)
    else:
        assert out["readout"] == {"link_a": "softcap:30", "link_b": "softcap:2", "bias_a": False, "bias_b": False}


def test_sweep_with_a_softcap_column(tmp_path):
    A, B, _ = pair(10)
    np.save(tmp_path / "A.npy", A), np.save(tmp_path / "B.npy", B)
    (tmp_path / "m.csv").write_text("a,b,energy,link_a,link_b\nA.npy,B.npy,1,softcap:3,softcap:3\n")
    driver = importlib.import_module("bhtcli.sweep.driver")
    from bhtcli.sweep.task import run_task

    def engine(tasks, on_done, **kwargs):
        for t in tasks:
            on_done(t, run_task(t, kwargs["design"]))
        return {"engine": "test", "workers": 1, "startup_seconds": 0.0, "run_seconds": 0.0}
    import bhtcli.api
    result = driver.sweep(str(tmp_path / "m.csv"), str(tmp_path / "r.jsonl"), engine=engine,
                          design=bhtcli.api.design)
    assert result.ok == 1
    row = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[-1])
    expected = design(A, B, 1.0, link_a="softcap:3", link_b="softcap:3", starts=32)
    assert row["hellinger_squared"] == pytest.approx(expected.hellinger_squared, rel=1e-6)
