"""sample / decide / simulate: the closed loop."""
import json
import math

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import chisquare

from bhtcli.models.answers import sample
from cli_run import run
from bhtcli.api import decide, simulate

LN3 = math.log(3.0)


@pytest.fixture
def hand_models(tmp_path):
    """p = (1/4, 3/4) under A and q = (3/4, 1/4) under B at x = 1: each answer's LLR is +-ln 3."""
    A, B = np.array([[0.0], [LN3]]), np.array([[0.0], [-LN3]])
    paths = {k: str(tmp_path / f"{k}.npy") for k in ("A", "B", "x")}
    np.save(paths["A"], A)
    np.save(paths["B"], B)
    np.save(paths["x"], np.array([1.0]))
    return paths


def test_decide_against_hand_computed_llrs(hand_models):
    r = decide(hand_models["A"], hand_models["B"], hand_models["x"], [1, 1, 0, 1, 1, 1])
    # path: ln3, 2ln3, ln3, 2ln3, 3ln3 = 3.296 >= ln 19 = 2.944 at the 5th answer
    assert r.decision == "A" and r.samples_used == 5
    assert r.llr == pytest.approx(4 * LN3)
    assert r.llr_at_decision == pytest.approx(3 * LN3)
    assert r.posterior_a == pytest.approx(81 / 82)
    assert r.fixed_verdict == "A"
    assert r.fixed_error_bound == pytest.approx((math.sqrt(3) / 2) ** 6)
    assert r.expected_more is None
    und = decide(hand_models["A"], hand_models["B"], hand_models["x"], [1, 0])
    kl = 0.25 * math.log(1 / 3) + 0.75 * LN3
    assert und.decision == "undecided" and und.samples_used == 2 and und.llr == pytest.approx(0)
    assert und.expected_more == math.ceil(math.log(19) / kl)     # whole answers
    b = decide(hand_models["A"], hand_models["B"], hand_models["x"], [0, 0, 0, 1])
    assert b.decision == "B" and b.samples_used == 3 and b.fixed_verdict == "B"


def test_decide_cli_json_list_file_and_pipe(capsys, hand_models, tmp_path, monkeypatch):
    f = tmp_path / "answers.json"
    f.write_text("[1, 1, 0, 1, 1, 1]")
    code, out, err = run(capsys, "decide", hand_models["A"], hand_models["B"], str(f),
                         "--query", hand_models["x"], "--json")
    r = json.loads(out)
    assert code == 0 and err == ""
    assert {"decision", "llr", "posterior_a", "samples_used", "expected_more"} <= set(r)
    assert r["decision"] == "A" and r["samples_used"] == 5
    code, out, _ = run(capsys, "decide", hand_models["A"], hand_models["B"], "-", "--query",
                       hand_models["x"], "--json", stdin="0\n0\n0\n", monkeypatch=monkeypatch)
    assert code == 0 and json.loads(out)["decision"] == "B"


@pytest.mark.parametrize("content,message", [
    ("1\n2\n", "line 2: answer 2 is out of range"),
    ("1\nfoo\n", "line 2: 'foo' is not an integer"),
    ("1\n1.5\n", "line 2: '1.5' is not an integer"),
    ("[1, -1]", "item 2: answer -1 is out of range"),
    ("[1, true]", "item 2: True is not an integer"),
    ("", "holds no answers"),
])
def test_decide_bad_answers(capsys, hand_models, tmp_path, content, message):
    f = tmp_path / "a.txt"
    f.write_text(content)
    code, out, err = run(capsys, "decide", hand_models["A"], hand_models["B"], str(f), "--query", hand_models["x"])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


def test_sample_frequencies_match_the_model(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 2))
    x = np.array([0.7, -1.1])
    draws = sample(A, x, 60000, seed=5)
    assert draws.min() >= 0 and draws.max() < 6
    observed = np.bincount(draws, minlength=6)
    expected = 60000 * softmax(A @ x)
    assert chisquare(observed, expected).pvalue > 1e-3
    assert np.array_equal(draws, sample(A, x, 60000, seed=5))


def test_sample_cli_pipes_into_decide(capsys, hand_models, monkeypatch):
    code, out, _ = run(capsys, "sample", hand_models["B"], "--query", hand_models["x"], "--count", "200", "--seed", "1")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 200 and set(lines) <= {"0", "1"}
    code, out, _ = run(capsys, "decide", hand_models["A"], hand_models["B"], "-", "--query",
                       hand_models["x"], "--json", stdin=out, monkeypatch=monkeypatch)
    assert code == 0 and json.loads(out)["decision"] == "B"


@pytest.mark.parametrize("args,message", [
    (["sample", "{A}", "--query", "{x}", "--count", "0"], "--count must be a whole number >= 1"),
    (["sample", "{A}", "--query", "{x3}", "--count", "5"], "has 3 entries but the models need 1"),
    (["simulate", "{A}", "{B}", "--energy", "1", "--trials", "5"], "--trials must be a whole number >= 100"),
    (["simulate", "{A}", "{B}", "--energy", "1", "--plot", "{dir}/p.jpg"], "name the file with .png"),
    (["simulate", "{A}", "{B}", "--energy", "1", "--plot", "{dir}/nofolder/p.png"], "does not exist"),
    (["simulate", "{A}", "{B}", "--energy", "1", "--policy", "sprt", "--plot", "{dir}/p.png"], "--policy fixed or all"),
    (["simulate", "{A}", "{B}", "--energy", "1", "--policy", "magic"], "Invalid value for '--policy'"),
    (["simulate", "{A}", "{B}", "--energy", "0.5", "--query", "{x2}"], "norm 2 > --energy 0.5"),
])
def test_loop_bad_inputs(capsys, hand_models, tmp_path, args, message):
    np.save(tmp_path / "x3.npy", np.ones(3))
    np.save(tmp_path / "x2.npy", np.array([2.0]))
    fmt = dict(hand_models, x3=str(tmp_path / "x3.npy"), x2=str(tmp_path / "x2.npy"), dir=str(tmp_path))
    code, out, err = run(capsys, *[a.format(**fmt) for a in args])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert not (tmp_path / "p.png").exists()


@pytest.fixture(scope="module")
def sim():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((15, 4))
    B = A + 0.35 * rng.standard_normal((15, 4))
    return A, B, simulate(A, B, 1.5, trials=20000, seed=2)


@pytest.mark.slow
def test_sprt_and_adaptive_errors_respect_wald(sim):
    _, _, r = sim
    alpha, T = 0.05, 20000
    limit = alpha / (1 - alpha) + 3 * math.sqrt(alpha / T)
    for policy in (r.sprt, r.adaptive):
        assert policy["error_a"] <= limit and policy["error_b"] <= limit
        assert policy["undecided"] == 0
        assert policy["p95_samples_a"] >= policy["mean_samples_a"]
    # Wald's lower bound holds for the SPRT's means up to Monte Carlo noise
    assert r.sprt["mean_samples_a"] >= 0.9 * r.sprt["wald_lower_a"]
    assert -1 < r.adaptive["saving_vs_sprt"] < 1


def test_fixed_empirical_within_bounds_and_near_predicted(sim):
    _, _, r = sim
    f = r.fixed
    assert f["lower"] <= f["empirical"] <= f["upper"]
    assert abs(f["empirical"] - f["predicted"]) <= max(1, 0.1 * f["predicted"])
    lo, hi = f["interval"]
    assert lo <= f["empirical"] <= hi


@pytest.mark.slow
def test_fixed_by_multinomial_counts_for_large_n():
    rng = np.random.default_rng(4)
    A = 0.5 * rng.standard_normal((200, 6))
    B = A + 0.02 * rng.standard_normal((200, 6))
    r = simulate(A, B, 1.0, trials=2000, policy="fixed", seed=1)
    f = r.fixed
    assert f["method"].startswith("multinomial") and f["predicted"] > 20000
    assert abs(f["empirical"] - f["predicted"]) <= 0.1 * f["predicted"]


@pytest.mark.slow
def test_simulate_cli_json_and_png(capsys, sim, tmp_path):
    A, B, _ = sim
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    png = tmp_path / "errors.png"
    code, out, _ = run(capsys, "simulate", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"),
                       "--energy", "1.5", "--trials", "2000", "--plot", str(png), "--json")
    assert code == 0
    r = json.loads(out)
    assert {"query", "fixed", "sprt", "adaptive"} <= set(r)
    assert {"empirical", "interval", "predicted", "lower", "upper"} <= set(r["fixed"])
    assert {"mean_samples_a", "mean_samples_b", "p95_samples_a", "p95_samples_b", "error_a",
            "error_b"} <= set(r["sprt"])
    assert "saving_vs_sprt" in r["adaptive"]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000
    import matplotlib.image
    assert matplotlib.image.imread(str(png)).ndim == 3
    code, out, _ = run(capsys, "simulate", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"),
                       "--energy", "1.5", "--trials", "1000", "--policy", "sprt")
    assert code == 0 and "Wald" in out and "Adaptive" not in out


def test_decide_json_verdicts_are_strings_with_indices_for_two_and_k_models(capsys, hand_models, tmp_path):
    """Two models and K models report `decision` and `fixed_verdict` the same way: a string
    (A/B or M1..MK, undecided/tie) and its 0-based index (null when undecided or tied)."""
    f = tmp_path / "answers.json"
    f.write_text("[1, 1, 0, 1, 1, 1]")
    code, out, _ = run(capsys, "decide", hand_models["A"], hand_models["B"], str(f),
                       "--query", hand_models["x"], "--json")
    pair = json.loads(out)
    assert (pair["decision"], pair["decision_index"]) == ("A", 0)
    assert (pair["fixed_verdict"], pair["fixed_verdict_index"]) == ("A", 0)
    C = tmp_path / "C.npy"
    np.save(C, np.array([[0.0], [0.0]]))
    code, out, _ = run(capsys, "decide", hand_models["A"], hand_models["B"], str(C), str(f),
                       "--query", hand_models["x"], "--json")
    k = json.loads(out)
    assert code == 0
    for key in ("decision", "fixed_verdict"):
        assert isinstance(k[key], str) and isinstance(pair[key], str)
    # answers 1 favour A (p = 3/4) over C (1/2) and B (1/4): maximum likelihood names A = M1
    assert (k["fixed_verdict"], k["fixed_verdict_index"]) == ("M1", 0)
    assert k["decision"] in ("M1", "undecided")
    assert k["decision_index"] == (0 if k["decision"] == "M1" else None)
