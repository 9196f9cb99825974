"""K models (docs/kway.md): the bottleneck design against a polar grid over the disk (d = 2),
schedules against a linear programme over the grid's points, the predicted count against a
Monte Carlo of the maximum-likelihood test, the certificate against the grid, hypothesis
properties, the matrix SPRT's guarantee, and the clear errors."""
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bhtcli import api
from cli_run import run
from bhtcli.commands.decide import log_probs_at
from bhtcli.commands.simulate import ml_errors_mc
from bhtcli.errors import InputError
from bhtcli.maths.kway import KwayLaw, kway_counts, union_upper
from bhtcli.models.kway import KModels, kway_scores_at
from bhtcli.search.schedule import schedule_lp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def models_2d(seed, K, n=6, scale=1.5):
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((n, 2)) for _ in range(K)]


def brute_pairs(models, X):
    """D of every pair at every column of X, the plain log-sum-exp form (independent of the
    stacked operator and its stable form)."""
    def lse(Z):
        m = Z.max(axis=0)
        return m + np.log(np.exp(Z - m).sum(axis=0))
    K = len(models)
    out = []
    for i in range(K):
        for j in range(i + 1, K):
            a, b = models[i] @ X, models[j] @ X
            out.append(0.5 * lse(a) + 0.5 * lse(b) - lse(0.5 * (a + b)))
    return np.array(out)


def disk_grid(E, radii=300, angles=1080):
    r = E * np.sqrt(np.linspace(0.0, 1.0, radii))
    t = np.linspace(0.0, 2 * np.pi, angles, endpoint=False)
    return np.stack([np.outer(r, np.cos(t)).ravel(), np.outer(r, np.sin(t)).ravel()])


@pytest.mark.slow
@pytest.mark.parametrize("seed,K,E", [(1, 3, 2.0), (2, 3, 1.0), (3, 4, 2.0), (4, 4, 3.0)])
def test_bottleneck_design_beats_the_polar_grid_and_schedule_beats_the_grid_lp(seed, K, E):
    models = models_2d(seed, K)
    r = api.design(models, energy=E, schedule=True)
    X = disk_grid(E)
    D = brute_pairs(models, X)
    grid_best = D.min(axis=0).max()
    assert r.bhattacharyya_distance >= grid_best * (1 - 1e-6)
    assert r.bhattacharyya_distance <= grid_best * (1 + 5e-3)    # the grid is fine enough
    # the reported pairs are the plain-form values at the query
    x = np.array(r.query)
    Dx = brute_pairs(models, x[:, None])[:, 0]
    assert np.allclose([p["bhattacharyya_distance"] for p in r.pairs], Dx, rtol=1e-9, atol=1e-14)
    assert r.bhattacharyya_distance == pytest.approx(Dx.min(), rel=1e-9)
    b = r.bottleneck
    assert [(p["i"], p["j"]) for p in r.pairs].index((b["i"], b["j"])) == int(np.argmin(Dx))
    # the best schedule over the grid's points (every 5th) is a linear programme
    lp_value, _, _ = schedule_lp(D[:, ::5])
    s = r.schedule
    assert s["bhattacharyya_distance"] >= lp_value * (1 - 1e-4)
    assert s["bhattacharyya_distance"] >= r.bhattacharyya_distance * (1 - 1e-9)
    assert s["dual_bound"] >= s["bhattacharyya_distance"] * (1 - 1e-9)
    assert sum(s["weights"]) == pytest.approx(1.0)
    assert s["gain_vs_single"] == pytest.approx(s["bhattacharyya_distance"] / r.bhattacharyya_distance)
    # the certificate holds at every grid point, for queries and schedules alike
    c = r.certificate
    assert D.min(axis=0).max() <= c["bhattacharyya_max_bound"]
    assert s["bhattacharyya_distance"] <= c["bhattacharyya_max_bound"]


@pytest.mark.slow
def test_schedules_gain_on_small_cases():
    """Small cases where mixing queries pays: the issue's 1.28-1.43x for 3-4 models in d = 2."""
    gains = [api.design(models_2d(seed, K), energy=2.0, schedule=True).schedule["gain_vs_single"]
             for seed, K in ((3, 4), (5, 4), (7, 3))]
    assert max(gains) > 1.25
    assert min(gains) >= 1.0 - 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("seed,K,E,alpha", [(11, 3, 0.5, 0.05), (12, 4, 0.4, 0.05), (13, 3, 0.4, 0.01)])
def test_predicted_count_matches_monte_carlo(seed, K, E, alpha):
    rng = np.random.default_rng(seed)
    models = [rng.standard_normal((30, 6)) for _ in range(K)]
    r = api.design(models, energy=E, error=alpha)
    pred = r.samples["predicted"]
    assert r.samples["lower"] <= pred <= r.samples["upper"]
    assert pred >= 15                      # counts large enough for a 10% comparison
    logp = log_probs_at(models, [np.array(r.query)])
    trials = 20000

    def worst(N):
        return ml_errors_mc(logp, [N], trials, np.random.default_rng(N)).max()
    lo, hi = r.samples["lower"] - 1, r.samples["upper"]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if worst(mid) <= alpha else (mid, hi)
    assert abs(hi - pred) <= 0.1 * hi, (hi, pred)


def test_union_upper_bounds_the_monte_carlo_error():
    rng = np.random.default_rng(5)
    models = [rng.standard_normal((20, 4)) for _ in range(4)]
    x = rng.standard_normal(4)
    r, d = kway_scores_at(models, x)
    law = KwayLaw.build([r], [d], [1.0])
    N = union_upper(law.distance_matrix(), 0.05)
    err = ml_errors_mc(log_probs_at(models, [x]), [N], 20000, rng)
    assert err.max() <= 0.05
    assert float(law.union_errors(N).max()) <= 0.05 < float(law.union_errors(N - 1).max())


@pytest.mark.slow
def test_k2_is_the_pair_design_and_the_kway_engine_agrees():
    A, B = np.load(os.path.join(EX, "A.npy")), np.load(os.path.join(EX, "B.npy"))
    pair = api.design(A, B, 1.0)
    routed = api.design([A, B], energy=1.0)
    assert routed.to_dict()["query"] == pair.to_dict()["query"]
    assert routed.samples == pair.samples
    from bhtcli.commands.kway import design_kway
    from bhtcli.models.spec import DesignOptions
    engine = design_kway([A, B], 1.0, DesignOptions(), schedule=True)   # the bottleneck engine
    assert engine.bhattacharyya_distance == pytest.approx(pair.bhattacharyya_distance, rel=1e-6)
    assert engine.schedule["gain_vs_single"] == pytest.approx(1.0, abs=1e-6)


def _untimed(obj):
    """A result's dict without its timings (they differ from run to run)."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items() if "seconds" not in k}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


def test_k2_schedule_is_the_pair_design_plus_its_schedule():
    """design([A, B], schedule=True) is the pair's object plus `schedule` (the single query,
    weight 1); design([A, B]) is the pair's object, bit for bit (timings aside)."""
    A, B = np.load(os.path.join(EX, "A.npy")), np.load(os.path.join(EX, "B.npy"))
    plain = api.design([A, B], energy=1.0).to_dict()
    with_schedule = api.design([A, B], energy=1.0, schedule=True).to_dict()
    schedule = with_schedule.pop("schedule")
    assert _untimed(plain) == _untimed(with_schedule)
    assert list(plain) == list(with_schedule)
    assert _untimed(plain) == _untimed(api.design(A, B, 1.0).to_dict())
    assert "schedule" not in plain and "models" not in plain and "pairs" not in plain
    assert schedule["queries"] == [plain["query"]] and schedule["weights"] == [1.0]
    assert schedule["bhattacharyya_distance"] == plain["bhattacharyya_distance"]
    assert schedule["samples"] == plain["samples"] and schedule["preferred"] == "single"
    with pytest.raises(InputError, match="^schedule mixes softmax queries at one budget"):
        api.design(A, B, [0.5, 1.0], schedule=True)


@pytest.mark.slow
def test_k3_budget_list_is_one_design_per_budget(capsys):
    """A budget list with K models: one bottleneck design per budget, as for a pair; each
    budget's search also climbs from the smaller budget's query (one start more, here the
    same maximum), and the models are read once (one note for identical builds, not one a
    budget)."""
    models = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    curve = api.design(models, energy=[0.5, 1.0], starts=4)
    assert [d.energy for d in curve.designs] == [0.5, 1.0]
    single = api.design(models, energy=1.0, starts=4).body()      # the run record aside
    carried = _untimed(curve.designs[1].body())
    assert carried["solver"].pop("starts") == single["solver"].pop("starts") + 1
    assert carried["solver"].pop("message") == "fixed number of starts (5)"
    single["solver"].pop("message")
    assert carried == _untimed(single)
    assert curve.to_dict()["energies"] == [0.5, 1.0]
    from bhtcli.cli.main import main
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["design", *models, models[1], "-E", "0.5,1,2", "--starts", "2", "--json", "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 0 and err.count("are identical") == 1, err


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), perm=st.permutations([0, 1, 2]))
def test_permuting_models_permutes_pairs_only(seed, perm):
    models = models_2d(seed, 3, n=5)
    r = api.design(models, energy=1.5, starts=16)
    q = api.design([models[k] for k in perm], energy=1.5, starts=16)
    assert q.bhattacharyya_distance == pytest.approx(r.bhattacharyya_distance, rel=1e-5)
    # the pairs at r's query, relabelled, are the pairs of the permuted models at that query
    x = np.array(r.query)
    back = {(min(perm[i], perm[j]), max(perm[i], perm[j])): (i, j) for i in range(3) for j in range(i + 1, 3)}
    Dp = brute_pairs([models[k] for k in perm], x[:, None])[:, 0]
    by_pair = {(p["i"], p["j"]): p["bhattacharyya_distance"] for p in r.pairs}
    for (i, j), v in zip([(0, 1), (0, 2), (1, 2)], Dp):
        orig = (min(perm[i], perm[j]), max(perm[i], perm[j]))
        assert by_pair[orig] == pytest.approx(v, rel=1e-9, abs=1e-15)
    assert back  # every pair maps to a pair


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_adding_a_model_never_raises_the_bottleneck(seed):
    models = models_2d(seed, 4, n=5)
    three = api.design(models[:3], energy=1.5)
    four = api.design(models, energy=1.5)
    assert four.bhattacharyya_distance <= three.bhattacharyya_distance * (1 + 1e-6)
    # and its certificate never rises either
    assert four.certificate["bhattacharyya_max_bound"] <= three.certificate["bhattacharyya_max_bound"]


def test_stacked_operator_is_accurate_for_nearly_equal_models():
    """delta_ij comes from the difference blocks: models 1e-9 apart keep their tiny D."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 4))
    M = rng.standard_normal((30, 4))
    models = [A, A + 1e-9 * M, A + 1e-3 * M]
    x = rng.standard_normal(4)
    km = KModels(models)
    D = km.pair_distances(x)
    # small-perturbation expansion: D ~ Var_pi(delta)/8 for delta = eps M x
    p = np.exp(A @ x - (A @ x).max())
    p /= p.sum()
    v = (1e-9 * M @ x)
    var = p @ (v - p @ v) ** 2
    assert D[0] == pytest.approx(var / 8, rel=1e-6)


@pytest.mark.slow
def test_matrix_sprt_keeps_every_error_below_alpha():
    rng = np.random.default_rng(3)
    models = [rng.standard_normal((25, 5)) for _ in range(3)]
    s = api.simulate(models, energy=1.0, trials=2000, policy="sprt", seed=1)
    assert max(s.sequential["error"]) <= 0.05
    assert s.sequential["undecided"] == 0


@pytest.mark.slow
def test_simulate_fixed_schedule_and_decide_from_a_schedule(tmp_path):
    models = models_2d(3, 4)
    s = api.simulate(models, energy=2.0, trials=2000, policy="fixed", schedule=True, seed=0)
    f = s.fixed
    assert len(s.weights) >= 2
    assert abs(f["empirical"] - f["predicted"]) <= max(2, 0.15 * f["empirical"])
    # answers from the schedule: "query answer" lines
    Q = np.array(s.queries)
    rng = np.random.default_rng(0)
    logp = log_probs_at(models, Q)
    lines = []
    for t in range(60):
        q = t % len(Q)
        lines.append(f"{q} {rng.choice(6, p=np.exp(logp[q][2]))}")
    (tmp_path / "ans.txt").write_text("\n".join(lines) + "\n")
    np.save(tmp_path / "Q.npy", Q)
    d = api.decide(models, str(tmp_path / "Q.npy"), str(tmp_path / "ans.txt"))
    assert d.queries_used == len(Q)
    assert len(d.log_likelihoods) == 4 and sum(d.posterior) == pytest.approx(1.0)
    # the log-likelihoods are sums of log-softmax at the answers' own queries
    ref = sum(logp[int(l.split()[0])][:, int(l.split()[1])] for l in lines)
    assert np.allclose(d.log_likelihoods, ref)
    assert d.fixed_verdict_index == int(np.argmax(ref)) and d.fixed_verdict == f"M{int(np.argmax(ref)) + 1}"


def test_decide_posterior_follows_the_prior():
    models = models_2d(1, 3)
    x = np.array([1.0, 0.5])
    equal = api.decide(models, x, [0, 1, 2, 3])
    tilted = api.decide(models, x, [0, 1, 2, 3], prior=[0.8, 0.1, 0.1])
    L = np.array(equal.log_likelihoods)
    post = 0.8 ** np.array([1, 0, 0]) * np.array([1, 1, 1]) * np.exp(L - L.max())
    post = np.array([0.8, 0.1, 0.1]) * np.exp(L - L.max())
    assert np.allclose(tilted.posterior, post / post.sum())


@pytest.mark.slow
def test_cli_json_equals_api_to_dict(capsys):
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    code, out, err = run(capsys, "design", A, B, C, "-E", "1", "--schedule", "--json", "-q")
    assert code == 0 and err == ""
    got = json.loads(out)
    ref = api.design([A, B, C], energy=1.0, schedule=True).to_dict()
    for k in ("solver",):
        got.pop(k), ref.pop(k)
    assert got == ref
    assert got["models"] == [A, B, C]
    assert {(p["i"], p["j"]) for p in got["pairs"]} == {(0, 1), (0, 2), (1, 2)}


def test_bad_inputs_are_one_clear_error(capsys, tmp_path):
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    np.save(tmp_path / "narrow.npy", np.zeros((40, 7)))
    code, _, err = run(capsys, "design", A, B, str(tmp_path / "narrow.npy"), "-E", "1")
    assert code == 2 and "model 3" in err and "(40, 7)" in err and "(40, 8)" in err
    code, _, err = run(capsys, "design", A, B, os.path.join(EX, "A_shifted.npy"), "-E", "1")
    assert code == 2 and "models 1" in err and "and 3" in err and "same softmax model" in err
    code, _, err = run(capsys, "design", *([A, B] + [C] * 7), "-E", "1")
    assert code == 2 and "at most 8 models" in err and "pairs" in err
    code, _, err = run(capsys, "design", A, B, C, "-E", "1", "--model", "leverage", "--floor", "1")
    assert code == 2 and err.count("\n") == 1 and "softmax" in err
    with pytest.raises(InputError, match="at least two models"):
        api.design([A], energy=1.0)
    with pytest.raises(InputError, match="name the two models of a pair; with three or more "
                                         "models give links and biases"):
        api.design([A, B, C], energy=1.0, link_b="softcap:30")
    with pytest.raises(InputError, match="^method ccp is not supported with three or more models"):
        api.design([A, B, C], energy=1.0, method="ccp")
    code, _, err = run(capsys, "design", A, B, C, "-E", "1", "--max-starts", "40")
    assert code == 2 and err == "Error: --max-starts is not supported with three or more models " \
        "(docs/kway.md lists what is)\n"


@pytest.mark.slow
def test_subspace_of_k_models_is_the_grid_maximum_inside_it(capsys, tmp_path):
    """design --subspace V with three models in d = 4, V of rank 2: the query lies in V's span
    on the ball, and its bottleneck D is the maximum of min_ij D_ij(Q z) over a polar grid of
    the disc (numpy's softmax, not bht's code), within the grid's resolution; the schedule's
    queries lie in the span too; models equal inside the subspace are one Error naming it."""
    from scipy.special import logsumexp
    rng = np.random.default_rng(11)
    M = [rng.standard_normal((7, 4)) for _ in range(3)]
    V = rng.standard_normal((4, 2))
    r = api.design(M, energy=1.5, subspace=V)
    x = np.array(r.query)
    Q = np.linalg.qr(V)[0]
    assert r.subspace_rank == 2 and r.d == 4 and np.linalg.norm(x) <= 1.5 * (1 + 1e-12)
    assert np.linalg.norm(x - Q @ (Q.T @ x)) < 1e-10
    th = np.linspace(0, 2 * np.pi, 1440, endpoint=False)
    rad = np.linspace(0, 1.5, 301)
    Z = (rad[:, None, None] * np.stack([np.cos(th), np.sin(th)])[None]).transpose(1, 0, 2).reshape(2, -1)
    logp = [S - logsumexp(S, axis=0) for S in (Mk @ Q @ Z for Mk in M)]
    D = np.min([-logsumexp(0.5 * (logp[i] + logp[j]), axis=0)
                for i in range(3) for j in range(i + 1, 3)], axis=0)
    assert r.bhattacharyya_distance >= D.max() * (1 - 1e-4), (r.bhattacharyya_distance, D.max())
    assert r.bhattacharyya_distance <= D.max() * (1 + 1e-2)
    s = api.design(M, energy=1.5, subspace=V, schedule=True).schedule
    for q in s["queries"]:
        q = np.array(q)
        assert np.linalg.norm(q - Q @ (Q.T @ q)) < 1e-10
    twin = M[0].copy()
    twin[:, 2:] += 1.0                  # the same for every query of the first two axes
    with pytest.raises(InputError, match="^inside the subspace x = V z: models 1 .* and 3"):
        api.design([M[0], M[1], twin], energy=1.5, subspace=np.eye(4)[:, :2])
    np.save(tmp_path / "V.npy", V.T)
    paths = []
    for k, Mk in enumerate(M):
        np.save(tmp_path / f"M{k}.npy", Mk)
        paths.append(str(tmp_path / f"M{k}.npy"))
    code, out, err = run(capsys, "design", *paths, "-E", "1.5", "--subspace", str(tmp_path / "V.npy"))
    assert code == 2 and err.count("\n") == 1 and "looks transposed" in err and out == ""


@pytest.mark.slow
def test_queries_of_k_models_finds_the_smallest_budget(capsys):
    """design --queries N with three models: the budget found needs at most N answers for the
    maximum-likelihood verdict, and a separate design 0.6% below it needs more (the bracket's
    0.5%); the design reported is the plain design at that budget; a budget that needs more
    even at --energy is one Error line, exit 1."""
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    r = api.design([A, B, C], energy=4.0, queries=30, starts=8)
    es = r.energy_search
    assert r.samples["predicted"] <= 30 and es["queries"] == 30 and es["energy_max"] == 4.0
    assert r.energy in [t["energy"] for t in es["rungs"]]
    below = api.design([A, B, C], energy=r.energy * 0.994, starts=8)
    assert below.samples["predicted"] > 30
    plain = api.design([A, B, C], energy=r.energy, starts=8).body()
    found = r.body()
    assert found.pop("energy_search") == es and "energy_search" not in plain
    assert _untimed(found) == _untimed(plain)
    code, out, err = run(capsys, "design", A, B, C, "-E", "0.05", "--queries", "30", "--json")
    assert code == 1 and err.startswith("Error: --queries 30: even --energy 0.05 needs")


def test_bound_kway_is_the_smallest_pair_ceiling(capsys):
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    k = api.bound([A, B, C], energy=1.0)
    pairs = [api.bound(A, B, 1.0), api.bound(A, C, 1.0), api.bound(B, C, 1.0)]
    assert k.certificate["bhattacharyya_max_bound"] == pytest.approx(
        min(p.certificate["bhattacharyya_max_bound"] for p in pairs))
    assert k.certificate["samples_lower_any_strategy"] == max(
        p.certificate["samples_lower_any_strategy"] for p in pairs)


def test_simulate_given_queries_uses_their_shares():
    """bhtcli.simulate with K models and several given queries simulates them in the given
    proportions (it used equal shares whatever was asked), and refuses bad shares."""
    import bhtcli
    from bhtcli.errors import InputError
    rng = np.random.default_rng(11)
    models = [rng.standard_normal((6, 2)) for _ in range(3)]
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    even = bhtcli.simulate(models, 1.5, query=Q, trials=200, seed=1, policy="fixed")
    tilted = bhtcli.simulate(models, 1.5, query=Q, weights=[0.9, 0.1], trials=200, seed=1,
                             policy="fixed")
    assert even.to_dict()["weights"] == [0.5, 0.5]
    assert tilted.to_dict()["weights"] == pytest.approx([0.9, 0.1])
    assert tilted.to_dict()["bhattacharyya_distance"] != even.to_dict()["bhattacharyya_distance"]
    for bad in ([1.0], [-1.0, 2.0], [0.0, 0.0], ["a", 1]):
        with pytest.raises(InputError, match="weights"):
            bhtcli.simulate(models, 1.5, query=Q, weights=bad, trials=200, policy="fixed")


@pytest.mark.slow
def test_simulate_table_names_every_model(capsys, tmp_path):
    """The SPRT rows of the K-model simulate table label each value with its model (M1 .. MK),
    however many models there are."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((10, 3))
    paths = []
    for k in range(4):
        p = tmp_path / f"M{k}.npy"
        np.save(p, A + 0.4 * k * rng.standard_normal((10, 3)))
        paths.append(str(p))
    code, out, err = run(capsys, "simulate", *paths, "-E", "1", "--trials", "200", "-q")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith(("mean answers", "realised error"))]
    assert len(rows) >= 2 and all(r.endswith("(M1 / M2 / M3 / M4 true)") for r in rows), rows


@pytest.mark.slow
def test_simulate_plot_of_k_models(capsys, tmp_path):
    """simulate --plot with three models: a PNG, and the JSON's curve (only then) with the
    fixed experiment's own numbers at its empirical count; the predicted curve crosses alpha
    where the predicted count says, and follows an independent Monte Carlo of the
    maximum-likelihood test (numpy draws, not the simulate code) within its noise."""
    paths = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    png = tmp_path / "k.png"
    code, out, err = run(capsys, "simulate", *paths, "-E", "1", "--trials", "2000",
                         "--policy", "fixed", "--plot", str(png), "--json", "-q")
    assert code == 0, err
    r = json.loads(out)
    c, f = r["curve"], r["fixed"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    at = dict(zip(c["n"], c["error"]))
    assert at[f["empirical"]] == max(f["errors_at_empirical"])
    assert at[f["predicted"]] == f["error_at_predicted"]
    pred = dict(zip(c["predicted_n"], c["predicted_error"]))
    assert c["n"][-1] >= f["upper"] and len(c["n"]) == len(c["standard_error"])
    assert pred[1] > 0.05 and min(e for n, e in pred.items() if n >= f["predicted"]) <= 0.05
    # an independent Monte Carlo at one n: ML over the three laws at the designed query
    x = np.array(r["queries"][0])
    logp = []
    for p in paths:
        s = np.load(p) @ x
        logp.append(s - s.max() - np.log(np.exp(s - s.max()).sum()))
    logp = np.array(logp)
    rng, N, trials = np.random.default_rng(0), 12, 20000
    worst = 0.0
    for k in range(3):
        counts = rng.multinomial(N, np.exp(logp[k]), size=trials)
        L = counts @ logp.T
        worst = max(worst, float(np.mean(L.argmax(axis=1) != k)))
    near = min(pred, key=lambda n: abs(n - N))
    assert abs(pred[near] - worst) < 0.15 * worst + 0.01, (pred[near], worst)
    code, out, _ = run(capsys, "simulate", *paths, "-E", "1", "--trials", "200",
                       "--policy", "fixed", "--json", "-q")
    assert code == 0 and "curve" not in json.loads(out)
    code, _, err = run(capsys, "simulate", *paths, "-E", "1", "--policy", "sprt", "--plot",
                       str(tmp_path / "s.png"))
    assert code == 2 and err.startswith("Error: --plot draws the fixed-n experiment")
    assert not (tmp_path / "s.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("n_answers", [12, 40])
def test_decide_fixed_error_matches_monte_carlo(n_answers):
    """decide's fixed_error (the maximum-likelihood test's largest error on this many answers,
    predicted as design predicts counts) against a Monte Carlo of that test, 40,000 trials."""
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    x = np.load(os.path.join(EX, "x.npy"))
    answers = np.random.default_rng(3).integers(0, 40, n_answers).tolist()
    r = api.decide([A, B, C], query=x, answers=answers)
    mats = [np.load(p) for p in (A, B, C)]
    mc = ml_errors_mc(log_probs_at(mats, x[None, :]), [n_answers], 40_000, np.random.default_rng(1))
    assert abs(r.fixed_error - mc.max()) <= 0.1 * mc.max() + 0.005, (r.fixed_error, mc)
    assert r.fixed_error <= r.fixed_error_bound or r.fixed_error_bound == 1.0
    assert r.to_dict()["seconds"] >= 0


@pytest.mark.parametrize("space", ["full", "sketch"])
def test_solver_lists_one_value_per_distinct_maximum(space):
    """`local_maxima_values` has one value per counted maximum (at most 5), best first, and
    the first is the bottleneck H^2 reported (the explored value of the winner's basin, before
    sharpening, is not listed as another maximum)."""
    models = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    r = api.design(models, energy=1.0, search_space=space)
    s = r.solver
    values = s["local_maxima_values"]
    assert len(values) == min(s["local_maxima"], 5), s
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(r.hellinger_squared, rel=1e-12)


def test_identical_builds_are_merged_before_the_search(capsys, tmp_path):
    """K builds of which two are identical (the same values, stored as float32 .npy and as a
    float64 .csv): a Note names the group, and bound/design go on with the distinct builds,
    as the pair alone would (the 3-model call used to abort: 'the same softmax model')."""
    from bhtcli.cli.main import main
    rng = np.random.default_rng(4)
    A = rng.standard_normal((30, 4)).astype(np.float32)
    B = (A + 0.3 * rng.standard_normal((30, 4))).astype(np.float32)
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    np.savetxt(tmp_path / "B_copy.csv", B.astype(np.float64), delimiter=",", fmt="%.17g")
    paths = [str(tmp_path / f) for f in ("A.npy", "B.npy", "B_copy.csv")]
    for command in (["bound", *paths, "-E", "1", "--json"], ["design", *paths, "-E", "1", "--json", "-q"]):
        with pytest.raises(SystemExit) as exc:
            main(command)
        captured = capsys.readouterr()
        assert exc.value.code == 0, captured.err
        assert "models 2 (" in captured.err and "3 (" in captured.err and "identical" in captured.err
        r = json.loads(captured.out)
        assert r["models"] == paths[:2]
    ref = api.bound(paths[:2], energy=1.0).body()          # the run record names 3 inputs
    with pytest.raises(SystemExit):
        main(["bound", *paths, "-E", "1", "--json"])
    assert {k: v for k, v in json.loads(capsys.readouterr().out).items() if k != "run"} == ref
    with pytest.raises(SystemExit) as exc:
        main(["bound", paths[1], paths[2], paths[1], "-E", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "all 3 models are identical" in err


def test_same_values_reads_every_row_when_the_sample_agrees():
    """The identical-build rule against numpy's own comparison of the float64 values: a model
    differing in one row the sample skips (one ulp, or a sign) is not the same; float32 and
    float64 copies of the same values, and -0.0 against 0.0, are; another shape is not."""
    from bhtcli.commands.kway import same_values
    rng = np.random.default_rng(9)
    M = rng.standard_normal((20000, 3)).astype(np.float32)
    assert same_values(M, M.astype(np.float64))
    for row in (17, 9_999, 12_345):               # between the sampled rows
        R = M.copy()
        R[row, 1] = np.nextafter(R[row, 1], np.float32(np.inf))
        assert not same_values(M, R) and not np.array_equal(M, R)
    Z = M.copy()
    Z[5000, 0] = 0.0
    negative = Z.copy()
    negative[5000, 0] = -0.0
    assert same_values(Z, negative)
    assert not same_values(M, M[:-1])


def _bottleneck_on_a_grid(km, E, angles=2000, radii=100):
    """max of min_p D_p over a polar grid of the disc (the true bottleneck, one pass a ring)."""
    th = np.linspace(0.0, 2.0 * np.pi, angles, endpoint=False)
    U = np.stack([np.cos(th), np.sin(th)])
    return max(float(km.pair_distances(r * U).min(axis=0).max()) for r in np.linspace(E / radii, E, radii))


@pytest.mark.slow
@pytest.mark.parametrize("seed, n, E", [(3, 6, 5e-4), (3, 6, 1e-3), (3, 6, 2e-3), (3, 6, 4e-3),
                                         (2, 20, 1e-3)])
def test_kway_bottleneck_reaches_the_grid_maximum_in_d2(seed, n, E):
    """K = 5 random models in d = 2: the maximum sits on a kink where two pairs' D are equal.
    Seed 3: the scan's start next to it (1.0245e-7 at E = 1e-3) was left by the first soft-minimum
    climb (s = 4 is a poor stand-in for the minimum of 10 pairs) for a point 2% lower; the
    sharpening now continues the best starts too. Seed 2, n = 20: three pairs nearly meet at a
    narrow peak on the sphere that no sharpness of the ladder climbs onto (0.26% short); the
    zoom finishes on the true bottleneck. Reference: a 2,000 x 100 polar grid."""
    from bhtcli.models.kway import KModels
    from bhtcli.search.bottleneck import maximize_bottleneck
    rng = np.random.default_rng(seed)
    km = KModels([rng.standard_normal((n, 2)) for _ in range(5)])
    grid = _bottleneck_on_a_grid(km, E)
    found = maximize_bottleneck(km, E)
    assert found.value >= grid * (1 - 2e-4)
    assert found.kkt_residual < 1e-3        # over the active pairs' hull: no false warning
    assert float(km.pair_distances(found.x[:, None]).min()) == pytest.approx(found.value, rel=1e-12)


@pytest.mark.slow
def test_schedule_or_single_query_by_the_predicted_count(capsys):
    """Four random models in d = 2 (seed 9, E = 0.04): the schedule's exponent is 1.002x the
    single query's, yet its predicted count is larger (8,089 against 7,948), so the single
    query is the one to send; the bundled three models are the other way round (20 against
    22). The choice follows the two printed counts; the table prints both."""
    from bhtcli.commands.kway import preferred
    rng = np.random.default_rng(9)
    models = [1.5 * rng.standard_normal((6, 2)) for _ in range(4)]
    r = api.design(models, energy=0.04, schedule=True)
    s = r.schedule
    assert s["gain_vs_single"] > 1 and s["samples"]["predicted"] > r.samples["predicted"]
    assert s["preferred"] == "single"
    r = api.design([os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")], energy=1.0,
                   schedule=True)
    assert r.schedule["samples"]["predicted"] < r.samples["predicted"]
    assert r.schedule["preferred"] == "schedule"
    code, out, _ = run(capsys, "design", *[os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")],
                       "--energy", "1", "--schedule")
    assert code == 0
    assert (f"the schedule: {r.schedule['samples']['predicted']} answers (predicted) against "
            f"{r.samples['predicted']} with the single query") in out
    assert preferred(100, 100, 2.0, 1.0) == "single"          # a tie: one query is simpler
    assert preferred(99, 100, 0.5, 1.0) == "schedule"         # the count decides, not D
    assert preferred(None, 100, 2.0, 1.0) == "schedule"       # no count: by the exponent
    assert preferred(None, None, 1.0, 1.0) == "single"


def test_hull_residual_is_zero_on_a_kink_and_not_off_it():
    """min(x1, -x1 + c) has its maximum on the kink x1 = c/2, where neither gradient vanishes but
    0 = (e1 - e1)/2 is in their hull; on the sphere the outward part is absorbed."""
    from bhtcli.search.kkt import hull_residual
    x = np.array([0.1, 0.0])
    assert hull_residual(x, np.array([[1.0, -1.0], [0.0, 0.0]]), 0.1, 1.0) == pytest.approx(0.0, abs=1e-15)
    assert hull_residual(x, np.array([[1.0, 1.0], [0.0, 0.5]]), 0.1, 1.0) == pytest.approx(1.0)
    on = np.array([0.6, 0.8])                      # ||x|| = E = 1: gradients along x are absorbed
    assert hull_residual(on, np.stack([on, 2 * on], axis=1), 0.1, 1.0) == pytest.approx(0.0, abs=1e-15)
    assert hull_residual(x, np.ones((2, 7)), 0.1, 1.0) is None


@pytest.mark.slow
def test_ml_errors_drawn_answers_match_exact_enumeration():
    """bht's K-way Monte Carlo draws few answers among many categories one by one (inverse
    CDF), many with a multinomial table: both against the exact error of the maximum-likelihood
    test by enumerating every answer sequence."""
    import itertools
    from bhtcli.commands.simulate import DRAW_FRACTION, ml_errors_mc
    rng = np.random.default_rng(7)
    for n, c in ((64, 2), (40, 3)):
        lp = rng.standard_normal((3, n)) * np.array([[1.0], [1.3], [0.8]])
        lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
        assert (c * DRAW_FRACTION < n) == (n == 64)               # one case per path
        exact = np.zeros(3)
        for seq in itertools.product(range(n), repeat=c):
            s = lp[:, seq].sum(axis=1)
            ties = s >= s.max() - 1e-9 * max(1.0, abs(s.max()))
            for k in range(3):
                exact[k] += math.exp(s[k]) * (1 - ties[k] / ties.sum())
        trials = 20000
        mc = ml_errors_mc([lp], [c], trials, np.random.default_rng(8))
        se = np.sqrt(exact * (1 - exact) / trials)
        assert np.all(np.abs(mc - exact) <= 4 * se + 1e-12), (n, c, mc, exact)


@pytest.mark.parametrize("command", ["design", "bound", "decide", "simulate"])
def test_k_models_refuse_pair_links_in_one_error_line(capsys, command):
    """--link-a .. --bias-b name the models of a pair: with three models every command says
    to give --links and --biases in one Error line (status 2), from the one K-model check in
    bhtcli.api."""
    A, B, C = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy"))
    tail = (["--query", os.path.join(EX, "x.npy"), os.path.join(EX, "answers.txt")]
            if command == "decide" else ["-E", "1"])
    code, out, err = run(capsys, command, A, B, C, *tail, "--link-b", "softcap:30")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("Error: --link-a, --link-b, --bias-a and --bias-b name the two models "
                          "of a pair; with three or more models give --links and --biases")


def test_k2_schedule_over_candidates_is_the_best_row():
    """Two models and given rows: the best schedule over the rows is the best row alone."""
    A, B, H = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "candidates.npy"))
    plain = api.design([A, B], energy=1.0, candidates=H, top=3).to_dict()
    r = api.design([A, B], energy=1.0, candidates=H, top=3, schedule=True).to_dict()
    s = r.pop("schedule")
    assert _untimed(r) == _untimed(plain)
    assert s["indices"] == [plain["candidates"]["best_index"]] and s["weights"] == [1.0]
    assert s["dual_bound"] == plain["bhattacharyya_distance"]
    assert s["candidates"] == plain["candidates"]["eligible"]


def test_one_query_schedule_title_names_k_models():
    """A one-query schedule of K >= 3 models does not say 'two models' (render_sections)."""
    import io
    from rich.console import Console
    from bhtcli import api
    from bhtcli.cli.render_sections import schedule
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    r = api.design([A, B], energy=1.0, schedule=True).to_dict()
    assert len(r["schedule"]["weights"]) == 1
    for models, words in ((None, "two models are best told apart by one"),
                          (["A", "B", "C", "D"], "no mix of queries does better")):
        out = io.StringIO()
        schedule(r if models is None else dict(r, models=models), Console(file=out, width=200))
        text = " ".join(out.getvalue().split())          # the title may wrap
        assert words in text
        assert ("two models" in text) == (models is None)
