"""Chernoff's adaptive rule with K models (bhtcli/commands/sequential.py): the KL matrices
against scipy's relative entropy, each leader's mix against a grid over the simplex, and the
Monte Carlo against the matrix SPRT's error guarantee and the non-adaptive SPRT."""
import json
import os

import numpy as np
import pytest
from scipy.special import log_softmax, rel_entr, softmax

from bhtcli import api
from bhtcli.cli.main import main
from bhtcli.commands.sequential import kl_matrices, leader_mixes, simulate_chernoff

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = [os.path.join(ROOT, "examples", f) for f in ("A.npy", "B.npy", "C.npy")]


def _models(seed, K=3, n=7, d=2, spread=1.0):
    rng = np.random.default_rng(seed)
    return [spread * rng.standard_normal((n, d)) for _ in range(K)]


def test_kl_matrices_equal_scipy_relative_entropy():
    mats = _models(0, K=4)
    X = np.random.default_rng(1).standard_normal((3, 2))
    logp = [np.stack([log_softmax(M @ x) for M in mats]) for x in X]
    got = kl_matrices(logp)
    for q, x in enumerate(X):
        P = [softmax(M @ x) for M in mats]
        ref = np.array([[rel_entr(P[k], P[j]).sum() for j in range(4)] for k in range(4)])
        assert np.allclose(got[q], ref, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_leader_mix_is_the_best_on_a_simplex_grid(seed):
    """max over λ in the simplex of min_j Σ λ_q KL_q(k||j), three queries: the programme's value
    is at least every grid point's and within the grid's resolution of the best."""
    rng = np.random.default_rng(seed)
    kl = rng.uniform(0.0, 1.0, (3, 3, 3))
    for k in range(3):
        kl[:, k, k] = 0.0
    mixes, exponents = leader_mixes(kl)
    step = np.linspace(0, 1, 201)
    a, b = np.meshgrid(step, step)
    ok = a + b <= 1
    lam = np.stack([a[ok], b[ok], 1 - a[ok] - b[ok]])          # 3 x grid points
    for k in range(3):
        others = [j for j in range(3) if j != k]
        grid = (kl[:, k, others].T @ lam).min(axis=0)
        assert exponents[k] >= grid.max() - 1e-12
        assert exponents[k] <= grid.max() + 0.02
        assert np.isclose((kl[:, k, others].T @ mixes[k]).min(), exponents[k], rtol=1e-9)
        assert np.isclose(mixes[k].sum(), 1.0) and (mixes[k] >= 0).all()


def test_one_query_per_leader_reaches_the_sprt_guarantee():
    """Three models whose pairs are told apart by different queries: with one query per leader
    the Monte Carlo keeps every error <= alpha (the matrix SPRT's guarantee, 4 standard errors
    of slack), and its mean answers match the SPRT's when every mix is that one query."""
    mats = _models(3, n=5)
    X = np.random.default_rng(4).standard_normal((2, 2))
    logp = [np.stack([log_softmax(M @ x) for M in mats]) for x in X]
    threshold, trials, alpha = np.log(2 / 0.05), 4000, 0.05
    same = simulate_chernoff(logp[:1], np.ones((3, 1)), 0, threshold, trials,
                             np.random.default_rng(5), cap=5000)
    assert same["undecided"] == 0
    se = np.sqrt(alpha * (1 - alpha) / trials)
    assert max(same["error"]) <= alpha + 4 * se
    from bhtcli.commands.sequential import matrix_sprt_runs
    sprt = matrix_sprt_runs(logp[:1], lambda t, L: np.zeros(len(L), np.int64), threshold, trials,
                            np.random.default_rng(6), 5000)
    for a, s in zip(same["mean_samples"], sprt["mean_samples"]):
        assert abs(a - s) <= 0.06 * s, (same["mean_samples"], sprt["mean_samples"])


@pytest.mark.slow
def test_adaptive_saves_answers_on_the_example_and_keeps_the_errors():
    r = api.simulate(EX, energy=1.0, trials=4000, seed=0).to_dict()
    a, s = r["adaptive"], r["sequential"]
    se = np.sqrt(0.05 * 0.95 / 4000)
    assert a["undecided"] == 0 and max(a["error"]) <= 0.05 + 4 * se
    assert all(x <= 1.03 * y for x, y in zip(a["mean_samples"], s["mean_samples"]))
    assert a["saving_vs_sprt"] > 0.1
    assert len(a["mixes"]) == 3 and all(np.isclose(sum(m), 1) for m in a["mixes"])
    assert np.allclose(a["queries"][0], r["queries"][0])       # the first answer's query
    assert all(np.linalg.norm(q) <= 1.0 * (1 + 1e-9) for q in a["queries"])


@pytest.mark.slow
def test_cli_policy_adaptive(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", *EX, "-E", "1", "--trials", "500", "--policy", "adaptive", "--json", "-q"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    r = json.loads(out)
    assert r["sequential"] is None and r["fixed"] is None and r["adaptive"]["mean_samples"]


@pytest.mark.slow
def test_the_adaptive_rule_says_before_its_extra_searches_and_counts_them(capsys):
    """K = 3: the rule runs K(K - 1) = 6 more searches; a Note says so before they start (with
    the design's search time as the estimate of each), and the progress hears each one."""
    from bhtcli.errors import notes_to
    notes, phases = [], []

    def progress(message, step=None, total=None):
        phases.append((message, step, total))
    with notes_to(notes.append):
        api.simulate(EX, energy=1.0, trials=200, seed=0, policy="adaptive", progress=progress)
    told = [m for m in notes if "adaptive rule runs 6 more searches" in m]
    assert len(told) == 1 and "design's search" in told[0]
    searches = [p for p in phases if p[0].startswith("adaptive rule: search")]
    assert [p[1] for p in searches] == list(range(6)) and all(p[2] == 6 for p in searches)
    assert "s left" in searches[-1][0]
    with pytest.raises(SystemExit):
        main(["simulate", *EX, "-E", "1", "--trials", "200", "--policy", "adaptive", "--json", "-q"])
    assert "Note: the adaptive rule runs 6 more searches" in capsys.readouterr().err


@pytest.mark.slow
def test_the_adaptive_rule_searches_in_the_dtype_asked_for(monkeypatch):
    """--dtype float32 reaches the K models' KL searches (each pair held in float32), as it
    reaches the design's search; the default stays float64."""
    import bhtcli.commands.sequential as sequential
    seen = []
    real = sequential.SoftmaxPair

    def recording(*args, **kwargs):
        seen.append(kwargs.get("dtype"))
        return real(*args, **kwargs)
    monkeypatch.setattr(sequential, "SoftmaxPair", recording)
    for dtype in ("float32", "float64"):
        seen.clear()
        r = api.simulate(_models(5), energy=1.0, trials=200, seed=0, policy="adaptive",
                         dtype=dtype).to_dict()
        assert seen == [dtype] * 6 and r["adaptive"]["mean_samples"]
