"""`design M1 ... MK --candidates H`: the best row by the bottleneck against a direct
computation, the top list, the optimum, and the CLI against the API."""
import json
import os

import numpy as np
import pytest

from bhtcli import api
from bhtcli.cli.main import main
from bhtcli.errors import InputError

pytestmark = pytest.mark.slow     # seconds of CPU each (docs/testing.md, "The fast loop")

EX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def direct_pairs(models, H):
    """D of every pair (rows, i < j) at every row of H (columns), the plain log-sum-exp form."""
    def lse(Z):
        m = Z.max(axis=0)
        return m + np.log(np.exp(Z - m).sum(axis=0))
    out = []
    for i in range(len(models)):
        for j in range(i + 1, len(models)):
            a, b = models[i] @ H.T, models[j] @ H.T
            out.append(0.5 * lse(a) + 0.5 * lse(b) - lse(0.5 * (a + b)))
    return np.array(out)


def direct_bottleneck(models, H):
    """min over pairs of D at every row of H."""
    return direct_pairs(models, H).min(axis=0)


def test_best_row_and_top_list_match_a_direct_computation(tmp_path):
    models = [np.load(os.path.join(EX, f)) for f in ("A.npy", "B.npy", "C.npy")]
    H = np.random.default_rng(3).standard_normal((40, 8)) * 0.25
    H[5] *= 10                                        # outside the ball: not eligible
    r = api.design(models, energy=1.0, candidates=H, top=5)
    c = r.candidates
    D = direct_bottleneck(models, H)
    eligible = np.linalg.norm(H, axis=1) <= 1.0
    order = np.argsort(-np.where(eligible, D, -np.inf), kind="stable")[:5]
    assert [e["index"] for e in c["top"]] == order.tolist() and c["best_index"] == order[0]
    assert c["eligible"] == eligible.sum() and c["ineligible"] == (~eligible).sum() >= 1
    assert r.query == H[order[0]].tolist()
    assert r.bhattacharyya_distance == pytest.approx(D[order[0]], rel=1e-9)
    for e in c["top"]:
        assert e["bhattacharyya_distance"] == pytest.approx(D[e["index"]], rel=1e-9)
    # the optimum over the ball starts from the best rows too: never below the best row
    assert c["optimum"]["hellinger_squared"] >= r.hellinger_squared
    assert 0 < c["reachable_fraction"] <= 1


def test_cli_json_equals_api_and_bad_options(capsys, tmp_path):
    paths = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    H = np.random.default_rng(4).standard_normal((12, 8)) * 0.2
    np.save(tmp_path / "H.npy", H)
    (tmp_path / "names.txt").write_text("".join(f"q{k}\n" for k in range(12)))
    with pytest.raises(SystemExit) as exc:
        main(["design", *paths, "--candidates", str(tmp_path / "H.npy"), "--names",
              str(tmp_path / "names.txt"), "--top", "3", "--json", "-q"])
    assert exc.value.code == 0
    got = json.loads(capsys.readouterr().out)
    ref = api.design(paths, candidates=str(tmp_path / "H.npy"), names=str(tmp_path / "names.txt"),
                     top=3).to_dict()
    for d in (got, ref):
        for k in ("seconds", "search_seconds", "pass_seconds"):
            d["solver"].pop(k)
    assert got == ref
    assert len(got["candidates"]["top"]) == 3 and got["candidates"]["best_name"].startswith("q")
    assert got["candidates"]["radius_from"] == "largest eligible candidate norm"
    with pytest.raises(InputError, match="candidates"):
        api.design(paths, energy=1.0, top=3)


def test_rank_with_k_models(capsys, tmp_path):
    paths = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    models = [np.load(p) for p in paths]
    H = np.random.default_rng(5).standard_normal((30, 8)) * 0.2
    np.save(tmp_path / "H.npy", H)
    out = tmp_path / "scores.jsonl"
    with pytest.raises(SystemExit) as exc:
        main(["rank", *paths, str(tmp_path / "H.npy"), "-E", "1", "--top", "4", "--out", str(out),
              "--json", "-q"])
    assert exc.value.code == 0
    got = json.loads(capsys.readouterr().out)
    ref = api.rank(paths, str(tmp_path / "H.npy"), energy=1.0, top=4).to_dict()
    for d in (got, ref):
        d.pop("seconds"), d.pop("out")
    assert got == ref and got["models"] == paths
    D = direct_bottleneck(models, H)
    eligible = np.linalg.norm(H, axis=1) <= 1.0
    order = np.argsort(-np.where(eligible, D, -np.inf), kind="stable")[:4]
    assert [e["index"] for e in got["top"]] == order.tolist()
    # the same ranking as design --candidates
    cand = api.design(paths, energy=1.0, candidates=H, top=4).candidates["top"]
    assert [e["index"] for e in cand] == order.tolist()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 30 and [r["index"] for r in rows] == list(range(30))
    for r in rows:
        if r["eligible"]:
            assert r["bhattacharyya_distance"] == pytest.approx(D[r["index"]], rel=1e-9)
            assert r["lower"] <= r["upper"]
        else:
            assert r["bhattacharyya_distance"] is None
    with pytest.raises(InputError, match="leverage compares two models"):
        api.rank(paths, H, energy=1.0, model="leverage", floor=0.5)


@pytest.mark.parametrize("seed,K", [(8, 3), (3, 4)])
def test_schedule_over_candidates_is_the_lp_optimum(seed, K, capsys, tmp_path):
    """The schedule over the eligible rows against the dual programme solved independently
    (min over pair weights lambda on the simplex of max over rows of sum_p lambda_p D_p(h),
    interior point, D in the plain form): by LP duality its optimum is the best schedule's."""
    from scipy.optimize import linprog
    rng = np.random.default_rng(seed)
    models = [1.5 * rng.standard_normal((6, 2)) for _ in range(K)]
    t = np.linspace(0, 2 * np.pi, 48, endpoint=False)
    H = np.concatenate([np.stack([np.cos(t), np.sin(t)], axis=1),
                        rng.standard_normal((12, 2))])     # the circle of radius 1, and others
    r = api.design(models, energy=1.0, candidates=H, schedule=True)
    s = r.schedule
    eligible = np.flatnonzero(np.linalg.norm(H, axis=1) <= 1.0)
    assert eligible.size < H.shape[0]
    Dp = direct_pairs(models, H[eligible])            # P x m
    P, m = Dp.shape
    res = linprog(np.r_[np.zeros(P), 1.0], A_ub=np.hstack([Dp.T, -np.ones((m, 1))]),
                  b_ub=np.zeros(m), A_eq=np.r_[np.ones(P), 0.0][None, :], b_eq=[1.0],
                  bounds=[(0, None)] * P + [(None, None)], method="highs-ipm")
    assert res.status == 0
    assert s["bhattacharyya_distance"] == pytest.approx(res.fun, rel=1e-6)
    assert s["dual_bound"] == pytest.approx(res.fun, rel=1e-6) and s["converged"]
    # a real mixture here: more than one row, and better than the best single row
    assert len(s["indices"]) >= 2 and s["gain_vs_single"] > 1.01
    assert s["gain_vs_single"] == pytest.approx(s["bhattacharyya_distance"] / r.bhattacharyya_distance)
    # the rows used are eligible rows of H, in the given proportions
    assert set(s["indices"]) <= set(eligible.tolist()) and len(s["indices"]) <= P
    assert s["queries"] == [H[i].tolist() for i in s["indices"]]
    assert sum(s["weights"]) == pytest.approx(1.0, abs=1e-12) and min(s["weights"]) > 0
    assert sum(s["counts"]) == s["samples"]["predicted"]
    # its exponent is the weighted mean of the rows' D, recomputed here
    mix = direct_pairs(models, H[s["indices"]]) @ np.array(s["weights"])
    assert s["bhattacharyya_distance"] == pytest.approx(mix.min(), rel=1e-9)
    assert r.certificate["design_over_bound"] <= 1
    # the CLI's JSON is the API's
    paths = []
    for k, M in enumerate(models):
        paths.append(str(tmp_path / f"M{k}.npy"))
        np.save(paths[-1], M)
    np.save(tmp_path / "H.npy", H)
    with pytest.raises(SystemExit) as exc:
        main(["design", *paths, "--energy", "1", "--candidates", str(tmp_path / "H.npy"),
              "--schedule", "--json"])
    assert exc.value.code == 0
    got = json.loads(capsys.readouterr().out)["schedule"]
    assert got["indices"] == s["indices"] and got["weights"] == s["weights"]


def test_rank_with_k_models_piped_keeps_every_title_whole(capsys, tmp_path):
    """Piped output is plain lines, never wrapped (docs/cli.md): the top list's long title too."""
    paths = [os.path.join(EX, f) for f in ("A.npy", "B.npy", "C.npy")]
    np.save(tmp_path / "H.npy", np.random.default_rng(5).standard_normal((30, 8)) * 0.2)
    with pytest.raises(SystemExit) as exc:
        main(["rank", *paths, str(tmp_path / "H.npy"), "-E", "1", "--top", "3", "-q"])
    assert exc.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    title = "Top 3 candidates by bottleneck H^2 (row: 0-based in H)"
    assert title in [line.strip() for line in lines]
