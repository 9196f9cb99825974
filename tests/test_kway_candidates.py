"""`design M1 ... MK --candidates H`: the best row by the bottleneck against a direct
computation, the top list, the optimum, and the CLI against the API."""
import json
import os

import numpy as np
import pytest

from bhtcli import api
from bhtcli.cli.main import main
from bhtcli.errors import InputError

EX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def direct_bottleneck(models, H):
    """min over pairs of D at every row of H, the plain log-sum-exp form."""
    def lse(Z):
        m = Z.max(axis=0)
        return m + np.log(np.exp(Z - m).sum(axis=0))
    out = []
    for i in range(len(models)):
        for j in range(i + 1, len(models)):
            a, b = models[i] @ H.T, models[j] @ H.T
            out.append(0.5 * lse(a) + 0.5 * lse(b) - lse(0.5 * (a + b)))
    return np.min(out, axis=0)


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
    with pytest.raises(InputError, match="schedule"):
        api.design(paths, energy=1.0, candidates=H, schedule=True)
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
