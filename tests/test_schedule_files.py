"""design --schedule --out writes the schedule (queries and weights); sample --schedule draws
answers interleaved by weight in decide's 'QUERY ANSWER' format; decide reads the file as
--query."""
import json
import os

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import chisquare

from bhtcli import api
from cli_run import run

EX = [os.path.join(os.path.dirname(__file__), "..", "examples", f) for f in ("A.npy", "B.npy", "C.npy")]


@pytest.fixture(scope="module")
def schedule_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schedule")
    paths = {}
    for suffix in ("json", "npz"):
        out = tmp / f"s.{suffix}"
        code = os.system(f"{os.path.dirname(os.sys.executable)}/bht design {' '.join(EX)} -E 1 "
                         f"--schedule --out {out} --json -q > {tmp}/design_{suffix}.json")
        assert code == 0
        paths[suffix] = str(out)
    paths["result"] = json.loads((tmp / "design_json.json").read_text())
    return paths


@pytest.mark.slow
def test_out_writes_the_schedule_in_both_formats(schedule_files):
    sch = schedule_files["result"]["schedule"]
    doc = json.loads(open(schedule_files["json"]).read())
    assert doc["queries"] == sch["queries"] and doc["weights"] == sch["weights"]
    with np.load(schedule_files["npz"]) as z:
        assert np.array_equal(z["queries"], np.array(sch["queries"]))
        assert np.array_equal(z["weights"], np.array(sch["weights"]))
    assert len(sch["weights"]) >= 2


def test_a_schedule_is_refused_as_a_single_query_file(capsys, tmp_path):
    code, out, err = run(capsys, "design", *EX, "-E", "1", "--schedule", "--out", str(tmp_path / "s.npy"))
    assert code == 2 and out == "" and err.startswith("Error: --out")
    assert ".json or .npz" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.npy").exists()


def test_sample_interleaves_by_weight_and_draws_each_querys_law(schedule_files):
    Q = np.array(schedule_files["result"]["schedule"]["queries"])
    w = np.array(schedule_files["result"]["schedule"]["weights"])
    A = np.load(EX[0])
    N = 20_000
    got = api.sample(EX[0], None, N, seed=3, schedule=schedule_files["json"])
    assert got.shape == (N, 2)
    # every prefix within one answer of the proportions
    for q in range(len(w)):
        prefix = np.cumsum(got[:, 0] == q)
        assert np.all(np.abs(prefix - w[q] * np.arange(1, N + 1)) <= 1.0 + 1e-9)
    # each query's answers follow softmax(A x_q) (chi-square, seeded)
    for q in range(len(w)):
        a = got[got[:, 0] == q, 1]
        p = softmax(A @ Q[q])
        big = p * a.size >= 5
        observed = np.bincount(a, minlength=A.shape[0])
        f_obs, f_exp = observed[big], p[big] * a.size
        if (~big).any():
            f_obs, f_exp = np.append(f_obs, observed[~big].sum()), np.append(f_exp, p[~big].sum() * a.size)
        assert chisquare(f_obs, f_exp).pvalue > 1e-4
    # the npz gives the same answers
    assert np.array_equal(got, api.sample(EX[0], None, N, seed=3, schedule=schedule_files["npz"]))


def test_sampled_schedule_answers_decide_the_true_model(capsys, monkeypatch, schedule_files):
    lines = api.sample(EX[1], None, 400, seed=1, schedule=schedule_files["json"])
    text = "".join(f"{q} {a}\n" for q, a in lines.tolist())
    code, out, err = run(capsys, "decide", *EX, "-", "--query", schedule_files["json"], "--json",
                         stdin=text, monkeypatch=monkeypatch)
    r = json.loads(out)
    assert code == 0 and r["queries_used"] == len(schedule_files["result"]["schedule"]["weights"])
    assert r["fixed_verdict"] == "M2"


@pytest.mark.parametrize("content,message", [
    ('{"queries": [[1, 2]], "weights": [1]}', "expected m queries of length 8"),
    ('{"queries": [[0,0,0,0,0,0,0,0],[0,0,0,0,0,0,0,1]], "weights": [0.5, 0.2]}', "summing to 1"),
    ('{"weights": [1]}', "a JSON object with 'queries'"),
])
def test_bad_schedule_files_are_one_error_line(capsys, tmp_path, content, message):
    f = tmp_path / "bad.json"
    f.write_text(content)
    code, out, err = run(capsys, "sample", EX[0], "--schedule", str(f), "--count", "5")
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1



@pytest.mark.parametrize("name,content,message", [
    ("bad.npz", b"PK\x03\x04garbage", "not a valid .npz file"),
    ("deep.json", b"{\"queries\": " + b"[" * 100_000 + b"]" * 100_000 + b", \"weights\": [1]}",
     "nested too deeply"),
    ("ragged.json", b'{"queries": [[1, 2], [3]], "weights": [0.5, 0.5]}', "must be numbers"),
])
def test_damaged_schedule_files_are_one_error_line(capsys, tmp_path, name, content, message):
    """A damaged schedule goes through the project's hardened readers: one Error line, no
    traceback (a corrupt .npz used to raise zipfile.BadZipFile)."""
    f = tmp_path / name
    f.write_bytes(content)
    code, out, err = run(capsys, "sample", EX[0], "--schedule", str(f), "--count", "5")
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1
