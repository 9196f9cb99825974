"""Leverage-score models: formulas, optimiser, same-model rule, bound, loop and CLI."""
import itertools
import json
import math

import numpy as np
import pytest

from cli_run import run
from bhtcli.models.leverage import LeverageModel, LeveragePair
from bhtcli.commands.leverage_design import thm42_quantities, tv_bound
from test_samples import monte_carlo_count
from bhtcli.api import bound, design, simulate


def design_leverage(A, B, C, floor, **options):
    return design(A, B, C, model="leverage", floor=floor, **options)


def bound_leverage(A, B, C, floor, **options):
    return bound(A, B, C, model="leverage", floor=floor, **options)


def explicit_leverage(A, s):
    """Textbook: diagonal of the projection onto the columns of S^-1 A, over the rank."""
    X = A / s[:, None]
    P = X @ np.linalg.pinv(X.T @ X) @ X.T
    return np.diag(P) / np.linalg.matrix_rank(A)


@pytest.mark.parametrize("n,d,deficient", [(9, 3, False), (20, 4, True), (5, 1, False)])
def test_probabilities_match_the_explicit_projection(n, d, deficient):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, d))
    if deficient:
        A[:, -1] = A[:, 0] - 2 * A[:, 1]
    s = np.exp(rng.uniform(-1, 1, n)) * rng.choice([-1, 1], n)
    st = LeverageModel(A).at(1 / s ** 2)
    np.testing.assert_allclose(st.h / st.rank, explicit_leverage(A, s), atol=1e-14)
    assert st.h.sum() / st.rank == pytest.approx(1.0)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((8, 3)), rng.standard_normal((8, 3))
    pair = LeveragePair(A, B)
    th = rng.uniform(-1, 1, 8)
    for objective in ("bhattacharyya", "kl"):
        _, g = pair.value_and_grad(th, objective)
        fd = [(pair.value_and_grad(th + 1e-6 * e, objective)[0]
               - pair.value_and_grad(th - 1e-6 * e, objective)[0]) / 2e-6 for e in np.eye(8)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def grid_best(A, B, C, c, m):
    """Brute force over the box in log-weights with the explicit formula (no bhtcli code):
    p_i = w_i a_i^T (sum_j w_j a_j a_j^T)^-1 a_i / d, batched over all grid points."""
    n, d = A.shape
    axis = np.linspace(-math.log(C), -math.log(c), m)
    W = np.exp(np.array(list(itertools.product(axis, repeat=n))))          # (G, n)

    def probs(M):
        G = np.einsum("gi,ij,ik->gjk", W, M, M)                              # sum_i w_i m_i m_i^T
        inv = np.linalg.inv(G)
        return W * np.einsum("ij,gjk,ik->gi", M, inv, M) / d

    p, q = probs(A), probs(B)
    return float(np.max(1 - np.sum(np.sqrt(p * q), axis=1)))


@pytest.mark.slow
@pytest.mark.parametrize("seed,n,d,C", [(0, 2, 1, 9.0), (1, 3, 1, 4.0), (2, 3, 2, 16.0), (3, 3, 2, 3.0)])
def test_optimiser_matches_brute_force_grid(seed, n, d, C):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    B = A + 0.8 * rng.standard_normal((n, d))
    best = grid_best(A, B, C, 1.0, 401 if n == 2 else 61)
    r = design_leverage(A, B, C, 1.0)
    s2 = np.array(r.query) ** 2
    assert s2.min() >= 1.0 - 1e-9 and s2.max() <= C * (1 + 1e-9)
    assert r.hellinger_squared >= best * (1 - 1e-6)


@pytest.mark.slow
def test_same_model_under_row_signs_and_column_mixing():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((25, 3))
    R = rng.standard_normal((3, 3))
    D = np.diag(rng.choice([-1.0, 1.0], 25))
    for B in (A @ R, D @ A @ R, 3.0 * A):
        r = design_leverage(A, B, 4.0, 1.0)
        assert not r.distinguishable and r.samples["predicted"] is None
        assert not bound_leverage(A, B, 4.0, 1.0).distinguishable
    assert design_leverage(A, A + 0.01 * rng.standard_normal((25, 3)), 4.0, 1.0).distinguishable


@pytest.mark.slow
def test_predicted_matches_monte_carlo():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((12, 2))
    B = A + 0.5 * rng.standard_normal((12, 2))
    r = design_leverage(A, B, 4.0, 1.0)
    w = 1 / np.array(r.query) ** 2
    pa, pb = LeverageModel(A).at(w), LeverageModel(B).at(w)
    mc = monte_carlo_count(pa.h / pa.rank, pb.h / pb.rank, 0.05, r.samples["upper"] + 5)
    assert abs(mc - r.samples["predicted"]) <= max(1, math.ceil(0.1 * r.samples["predicted"]))
    assert r.samples["lower"] <= r.samples["predicted"] <= r.samples["upper"]


@pytest.mark.slow
@pytest.mark.parametrize("seed,scale,ratio", [(0, 0.003, 2.0), (1, 0.01, 4.0), (2, 0.1, 10.0), (3, 0.5, 3.0)])
def test_tv_bound_is_never_violated(seed, scale, ratio):
    rng = np.random.default_rng(seed)
    n, d = 15, 3
    A = rng.standard_normal((n, d))
    B = A + scale * rng.standard_normal((n, d))
    delta, eps = thm42_quantities(A, B)
    tau = tv_bound(ratio, 1.0, delta, eps, d)
    if scale <= 0.01:
        assert tau < 1, "small perturbations must give a non-vacuous bound"
    pair = LeveragePair(A, B)
    lo, hi = -math.log(ratio), 0.0
    thetas = [rng.uniform(lo, hi, n) for _ in range(100)] + [rng.choice([lo, hi], n) for _ in range(100)]
    for th in thetas:
        sa, sb = pair.states(th)
        tv = 0.5 * np.abs(sa.h / sa.rank - sb.h / sb.rank).sum()
        assert tv <= tau + 1e-12
    r = design_leverage(A, B, ratio, 1.0)
    assert r.total_variation <= tau + 1e-12
    # the certificate holds for every query, the designed one included, and is never weaker
    # than Theorem 4.2's bound; a vacuous bound (tau >= 1) certifies nothing beyond one query
    assert r.certificate["tv_max_bound"] <= min(tau, 1.0) + 1e-12
    assert r.total_variation <= r.certificate["tv_max_bound"] + 1e-12
    assert r.certificate["samples_lower_any_strategy"] <= r.samples["lower"]
    if tau >= 1:
        assert r.certificate["samples_lower_any_strategy"] == 1


@pytest.mark.slow
def test_simulate_leverage_all_policies():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((20, 3))
    B = A + 0.4 * rng.standard_normal((20, 3))
    r = simulate(A, B, 4.0, model="leverage", floor=1.0, trials=4000, seed=1)
    f = r.fixed
    assert abs(f["empirical"] - f["predicted"]) <= max(1, 0.1 * f["predicted"])
    limit = 0.05 / 0.95 + 3 * math.sqrt(0.05 / 4000)
    assert r.sprt["error_a"] <= limit and r.adaptive["error_b"] <= limit


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((10, 2))
    B = A + 0.5 * rng.standard_normal((10, 2))
    paths = {"A": tmp_path / "A.npy", "B": tmp_path / "B.npy", "R": tmp_path / "R.npy",
             "s": tmp_path / "s.npy", "short": tmp_path / "short.npy", "dir": tmp_path,
             "Z": tmp_path / "Z.npy"}
    np.save(paths["Z"], np.zeros((10, 2)))
    np.save(paths["A"], A)
    np.save(paths["B"], B)
    np.save(paths["R"], np.column_stack([A[:, 0], 2 * A[:, 0]]))
    np.save(paths["short"], np.ones(4))
    return {k: str(v) for k, v in paths.items()}


@pytest.mark.slow
def test_cli_leverage_loop(capsys, files):
    code, out, err = run(capsys, "design", files["A"], files["B"], "--model", "leverage", "--energy", "4",
                         "--floor", "1", "--json", "--out", files["s"])
    r = json.loads(out)
    assert code == 0 and r["model"] == "leverage" and len(r["query"]) == 10
    assert set(r["samples"]) >= {"lower", "upper", "predicted"}
    code, out, _ = run(capsys, "sample", files["B"], "--model", "leverage", "--query", files["s"],
                       "--count", "300", "--seed", "2")
    assert code == 0 and len(out.split()) == 300
    answers = files["dir"] + "/ans.txt"
    open(answers, "w").write(out)
    code, out, _ = run(capsys, "decide", files["A"], files["B"], answers, "--model", "leverage",
                       "--query", files["s"], "--json")
    assert code == 0 and json.loads(out)["decision"] == "B"
    code, out, _ = run(capsys, "bound", files["A"], files["B"], "--model", "leverage", "--energy", "4",
                       "--floor", "1", "--json")
    b = json.loads(out)
    assert code == 0 and {"lambda_min_larger", "sum_op_norm_diff", "tv_max_bound",
                          "samples_lower_any_strategy"} <= set(b["certificate"])


def test_cli_rank_deficient_warns_and_succeeds(capsys, files):
    code, out, err = run(capsys, "design", files["R"], files["B"], "--model", "leverage", "--energy", "4",
                         "--floor", "1", "--json")
    assert code == 0
    assert "Warning: A has rank 1 < d = 2" in err
    r = json.loads(out)
    assert r["distinguishable"] and "rank 1 and B rank 2" in r["note"]


@pytest.mark.parametrize("args,message", [
    (["design", "{A}", "{B}", "--model", "leverage", "--energy", "1", "--floor", "4"], "--energy must be a finite number >= --floor"),
    (["design", "{A}", "{B}", "--model", "leverage", "--energy", "4", "--floor", "0"], "--floor must be a finite number > 0"),
    (["design", "{A}", "{B}", "--model", "leverage", "--energy", "4", "--floor", "-1"], "--floor must be a finite number > 0"),
    (["design", "{A}", "{B}", "--model", "leverage", "--energy", "4"], "--floor is required"),
    (["design", "{A}", "{B}", "--energy", "4", "--floor", "1"], "--floor applies to --model leverage only"),
    (["design", "{Z}", "{B}", "--model", "leverage", "--energy", "4", "--floor", "1"], "A is all zeros (rank 0)"),
    (["sample", "{A}", "--model", "leverage", "--query", "{short}", "--count", "3"], "has 4 entries but the models need 10"),
    (["simulate", "{A}", "{B}", "--model", "leverage", "--energy", "4", "--floor", "1", "--query", "{short}"], "has 4 entries but the models need 10"),
])
def test_cli_leverage_bad_inputs(capsys, files, args, message):
    code, out, err = run(capsys, *[a.format(**files) for a in args])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err


@pytest.mark.slow
def test_printed_query_is_inside_the_box():
    # exp(-theta/2) of a theta on the box's face can square to a few ulps above C (it did here
    # for 10 of the 40 budgets np.linspace(1.01, 9.7, 40), 3 of these 12): the printed s is
    # moved into the box
    A, B = np.load("examples/leverage_A.npy"), np.load("examples/leverage_B.npy")
    for C in np.linspace(1.01, 9.7, 40)[-12:]:
        s = np.array(design_leverage(A, B, float(C), floor=1 / 3, starts=2, seed=0).query)
        assert np.all(s * s <= C) and np.all(s * s >= 1 / 3)
