"""K >= 3 models with a link and a bias each (docs/kway.md, "Links, biases and softcaps"),
against references computed here from the definition: p_k = softmax(phi_k(M_k x + b_k))."""
import json
import math

import numpy as np
import pytest

from bhtcli import api
from cli_run import run
from bhtcli.models.kway import KModels, SoftBottleneck
from bhtcli.models.kway_readout import make_kreadouts
from bhtcli.models.softmax import SoftmaxPair

LINKS = ["exp", "softcap:1.5", "taylor:4"]


def _phi(link: str, s):
    """log f(s) straight from its definition (no floors: the cases here stay finite)."""
    if link == "exp":
        return s
    if link.startswith("softcap:"):
        C = float(link.split(":")[1])
        return C * np.tanh(s / C)
    K = int(link.split(":")[1])
    return np.log(sum(s ** j / math.factorial(j) for j in range(K + 1)))


def _laws(Ms, links, biases, X):
    """Each model's answer law at every column of X (n x k), from the definition."""
    out = []
    for M, link, b in zip(Ms, links, biases):
        s = M @ X + (0.0 if b is None else b[:, None])
        u = _phi(link, s)
        u = u - u.max(axis=0)
        p = np.exp(u)
        out.append(p / p.sum(axis=0))
    return out


def _bottleneck_h2(Ms, links, biases, X):
    """min over pairs of H^2 = 1 - sum sqrt(p q) at every column of X."""
    P = _laws(Ms, links, biases, X)
    K = len(P)
    return np.min([1.0 - np.sqrt(P[i] * P[j]).sum(axis=0)
                   for i in range(K) for j in range(i + 1, K)], axis=0)


def _case(seed=1, n=6, d=2):
    rng = np.random.default_rng(seed)
    Ms = [rng.standard_normal((n, d)) for _ in range(3)]
    return Ms, [None, rng.standard_normal(n), None]


@pytest.mark.slow
def test_design_matches_a_brute_force_grid_in_two_dimensions():
    Ms, biases = _case()
    E = 2.0
    r = api.design(Ms, energy=E, links=LINKS, biases=biases, seed=0)
    x = np.asarray(r.query)
    # the reported bottleneck is the definition's at the reported query
    assert r.hellinger_squared == pytest.approx(_bottleneck_h2(Ms, LINKS, biases, x[:, None])[0],
                                                rel=1e-10)
    # and no point of a fine polar grid of the disc does better (up to the grid's resolution)
    rad, ang = np.meshgrid(np.linspace(0.0, E, 401), np.linspace(0.0, 2 * np.pi, 1441))
    X = np.stack([(rad * np.cos(ang)).ravel(), (rad * np.sin(ang)).ravel()])
    grid = _bottleneck_h2(Ms, LINKS, biases, X).max()
    assert r.hellinger_squared >= grid - 1e-6
    assert r.hellinger_squared <= grid + 1e-3       # the grid's own spacing
    assert r.to_dict()["readout"] == {"links": LINKS, "biases": [False, True, False]}


def test_bottleneck_at_a_query_is_the_smallest_pair_design_value():
    Ms, biases = _case(seed=4, n=7, d=3)
    ro = make_kreadouts(7, LINKS, biases)
    km = KModels(Ms, readouts=ro)
    X = np.random.default_rng(0).standard_normal((3, 5))
    D = km.pair_distances(X)
    for p, (i, j) in enumerate(km.pairs):
        pair = SoftmaxPair(Ms[i], Ms[j], readout=ro.pair(i, j))
        np.testing.assert_allclose(D[p], pair.value(X), rtol=1e-12, atol=1e-15)
    # and H^2 from the definition: the bottleneck pair's, min over pairs
    h2 = -np.expm1(-D.min(axis=0))
    np.testing.assert_allclose(h2, _bottleneck_h2(Ms, LINKS, biases, X), rtol=1e-10)


def test_soft_bottleneck_gradient_against_finite_differences():
    Ms, biases = _case(seed=7, n=5, d=3)
    km = KModels(Ms, readouts=make_kreadouts(5, ["softcap:2", "exp", "poly:2"], biases))
    obj = SoftBottleneck(km, 16.0)
    x = np.array([[0.7], [-0.4], [1.1]])
    f, g = obj.value_and_grad(x)
    h = 1e-6
    fd = [(obj.value(x + h * e[:, None])[0] - obj.value(x - h * e[:, None])[0]) / (2 * h)
          for e in np.eye(3)]
    np.testing.assert_allclose(g[:, 0], fd, rtol=1e-6, atol=1e-9)


def test_report_counts_use_the_readouts():
    Ms, biases = _case(seed=2, n=6, d=2)
    r = api.design(Ms, energy=1.5, links=LINKS, biases=biases, seed=0, schedule=True)
    x = np.asarray(r.query)[:, None]
    P = _laws(Ms, LINKS, biases, x)
    for row in r.pairs:
        h2 = 1.0 - np.sqrt(P[row["i"]] * P[row["j"]]).sum()
        assert row["hellinger_squared"] == pytest.approx(h2, rel=1e-10)
    assert r.schedule["bhattacharyya_distance"] >= r.bhattacharyya_distance * (1 - 1e-9)


def test_bound_is_at_least_the_design():
    Ms, biases = _case(seed=3)
    d = api.design(Ms, energy=2.0, links=LINKS, biases=biases, seed=0)
    b = api.bound(Ms, energy=2.0, links=",".join(LINKS), biases=biases)
    assert b.certificate["bhattacharyya_max_bound"] >= d.bhattacharyya_distance
    assert b.to_dict()["readout"]["links"] == LINKS


def test_identical_matrices_with_different_links_are_different_models():
    Ms, _ = _case(seed=5)
    Ms[2] = Ms[0].copy()
    r = api.design(Ms, energy=2.0, links=["exp", "exp", "softcap:1"], seed=0)
    assert len(r.models) == 3 and r.bhattacharyya_distance > 0


def test_plain_lists_are_the_plain_design():
    Ms, _ = _case(seed=6)
    a = _strip(api.design(Ms, energy=1.0, seed=0).to_dict())
    b = _strip(api.design(Ms, energy=1.0, seed=0, links=["exp"] * 3, biases=[None] * 3).to_dict())
    assert a == b and "readout" not in a


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(11)
    paths = []
    for k in range(3):
        paths.append(str(tmp_path / f"M{k}.npy"))
        np.save(paths[-1], rng.standard_normal((6, 3)))
    np.save(tmp_path / "b.npy", rng.standard_normal(6))
    np.save(tmp_path / "b4.npy", rng.standard_normal(4))
    return paths, str(tmp_path / "b.npy"), str(tmp_path / "b4.npy")


def _strip(d):
    d.pop("run"), d.pop("seconds", None)
    for key in ("seconds", "pass_seconds", "search_seconds"):
        d["solver"].pop(key, None)
    return d


def test_cli_two_models_links_are_the_pair_options(files, capsys):
    (A, B, _), bias, _ = files
    for command in ("design", "bound"):
        one = run(capsys, command, A, B, "-E", "1", "--links", "exp,softcap:2", "--biases", f",{bias}", "--json")
        two = run(capsys, command, A, B, "-E", "1", "--link-b", "softcap:2", "--bias-b", bias, "--json")
        assert one[0] == 0 and two[0] == 0
        strip = _strip if command == "design" else (lambda d: (d.pop("run"), d.pop("seconds", None), d)[2])
        assert strip(json.loads(one[1])) == strip(json.loads(two[1]))


@pytest.mark.parametrize("extra, named", [
    (["--links", "exp,softcap:2"], "--links gives 2 values for 3 models"),
    (["--links", "exp,bad,exp"], "--links (model 2)"),
    (["--link-a", "softcap:2"], "--link-a, --link-b, --bias-a and --bias-b name the two models"),
    (["--links", "exp,exp,softcap:2", "--link-b", "exp"], "--links and --link-b both"),
    (["--biases", ",B4,"], "--biases (model 2)"),
    (["--links", "exp,exp,softcap:2", "--search-space", "sketch"], "--search-space sketch"),
])
def test_cli_bad_input_is_one_error_line(files, extra, named, capsys):
    (A, B, C), _, b4 = files
    extra = [e.replace("B4", b4) for e in extra]
    code, out, err = run(capsys, "design", A, B, C, "-E", "1", "-q", *extra)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and named in lines[0], err


@pytest.mark.slow
def test_simulate_of_k_models_under_readouts(files):
    """simulate runs every policy on the read-outs' laws: its predicted count is design's at the
    same query, the empirical errors meet alpha, and the matrix SPRT's answers are the
    definition's laws (checked through decide's likelihoods, test above); the adaptive rule
    runs too, with a ready ModelSpec's links as with --links (its KL queries:
    test_kway_adaptive_links.py)."""
    from bhtcli.models.links import parse_link
    (A, B, C), _, _ = files
    Ms, biases = _case(seed=5, n=6, d=2)
    d = api.design(Ms, energy=2.0, links=LINKS, biases=biases)
    r = api.simulate(Ms, energy=2.0, links=LINKS, biases=biases, query=np.array([d.query]),
                     trials=4000, seed=3, hash_files=False).to_dict()
    assert r["readout"]["links"] == LINKS and r["adaptive"]["queries"][0] == d.query
    assert max(r["adaptive"]["error"]) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)
    assert r["fixed"]["predicted"] == d.samples["predicted"]
    assert max(r["fixed"]["errors_at_empirical"]) <= 0.05
    assert max(r["sequential"]["error"]) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)
    P = _laws(Ms, LINKS, biases, np.array(d.query)[:, None])
    D = min(-math.log(float(np.sum(np.sqrt(P[i][:, 0] * P[j][:, 0]))))
            for i, j in ((0, 1), (0, 2), (1, 2)))
    assert r["bhattacharyya_distance"] == pytest.approx(D, rel=1e-9)
    plain = api.simulate(Ms, energy=2.0, query=np.array([d.query]), trials=500, policy="fixed",
                         hash_files=False).to_dict()
    assert "readout" not in plain
    spec = api.ModelSpec.build(energy=1.0).with_models(
        (parse_link("exp"), parse_link("exp"), parse_link("softcap:2")), None)
    got = api.simulate([A, B, C], energy=1.0, model=spec, policy="adaptive", trials=200,
                       hash_files=False).to_dict()
    assert got["readout"]["links"] == ["exp", "exp", "softcap:2"] and got["adaptive"]["queries"]


def test_rank_and_candidates_score_rows_under_the_readouts():
    Ms, biases = _case(seed=8, n=6, d=2)
    H = np.random.default_rng(1).standard_normal((20, 2))
    r = api.rank(Ms, H, energy=3.0, links=LINKS, biases=biases, top=3)
    ref = _bottleneck_h2(Ms, LINKS, biases, H.T)
    ok = np.linalg.norm(H, axis=1) <= 3.0
    best = int(np.flatnonzero(ok)[np.argmax(ref[ok])])
    assert r.best_index == best
    assert r.top[0]["hellinger_squared"] == pytest.approx(ref[best], rel=1e-10)
    assert r.to_dict()["readout"]["links"] == LINKS
    d = api.design(Ms, energy=3.0, candidates=H, links=LINKS, biases=biases, top=3)
    assert d.candidates["best_index"] == best
    assert d.hellinger_squared == pytest.approx(ref[best], rel=1e-10)


def test_decide_likelihoods_are_the_definitions():
    Ms, biases = _case(seed=9, n=6, d=2)
    x = np.array([0.8, -1.1])
    answers = [0, 3, 3, 5, 1, 3]
    r = api.decide(Ms, x, answers, links=LINKS, biases=biases)
    P = _laws(Ms, LINKS, biases, x[:, None])
    ref = [float(np.log(p[answers, 0]).sum()) for p in P]
    np.testing.assert_allclose(r.log_likelihoods, ref, rtol=1e-12)


def test_cli_simulate_adaptive_bad_links_is_one_error_and_decide_of_two_is_the_pair(files, capsys, tmp_path):
    (A, B, C), bias, b4 = files
    for bad in (["--links", "exp,softcap:2"], ["--links", "exp,exp,softcap:-1"],
                ["--biases", f",,{b4}"]):
        code, _, err = run(capsys, "simulate", A, B, C, "-E", "1", *bad, "-q", "--policy",
                           "adaptive")
        assert code == 2 and err.count("\n") == 1 and err.startswith("Error: "), err
    np.save(tmp_path / "x.npy", np.array([0.3, -0.2, 0.5]))
    (tmp_path / "ans.txt").write_text("0\n2\n2\n5\n")
    x, ans = str(tmp_path / "x.npy"), str(tmp_path / "ans.txt")
    one = run(capsys, "decide", A, B, "-x", x, ans, "--links", "softcap:2,exp", "--biases", f"{bias},", "--json")
    two = run(capsys, "decide", A, B, "-x", x, ans, "--link-a", "softcap:2", "--bias-a", bias, "--json")
    strip = lambda d: (d.pop("run"), d.pop("seconds", None), d)[2]
    assert one[0] == two[0] == 0 and strip(json.loads(one[1])) == strip(json.loads(two[1]))
