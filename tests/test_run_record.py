"""The run record in every command's JSON (`run`): the bht version, the inputs as given, every
file read with its size and SHA-256 (checked against hashlib), `--no-hash`, the engine's record
of `prompts`, `decide --prompt` and `sample --prompt`, arrays given to the Python API, the
sweep's manifest."""
import hashlib
import json
import os

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import bhtcli
from bhtcli import api
from bhtcli.errors import InputError
from cli_run import run
from test_gguf import write_gguf

EX = os.path.join(os.path.dirname(__file__), "..", "examples")
RNG = np.random.default_rng(38)


def sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def json_of(capsys, *args) -> dict:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """A.npy and B.npy in the working folder, named by relative paths."""
    monkeypatch.chdir(tmp_path)
    np.save("A.npy", np.load(os.path.join(EX, "A.npy")))
    np.save("B.npy", np.load(os.path.join(EX, "B.npy")))
    return "A.npy", "B.npy"


def test_design_on_two_npy_files_names_and_hashes_them(pair, capsys):
    run_ = json_of(capsys, "design", *pair, "-E", "1")["run"]
    assert run_["bht_version"] == bhtcli.__version__ and run_["hashed"] is True
    assert run_["inputs"] == [{"given": name, "format": "npy", "tensor": None, "shape": [40, 8],
                               "stored": "float64"} for name in pair]
    assert run_["files"] == [{"path": name, "size": os.path.getsize(name), "sha256": sha(name),
                              "symlink_to": None} for name in pair]


def test_no_hash_gives_null_hashes(pair, capsys):
    run_ = json_of(capsys, "design", *pair, "-E", "1", "--no-hash")["run"]
    assert run_["hashed"] is False
    assert [(f["path"], f["size"], f["sha256"]) for f in run_["files"]] == [
        (name, os.path.getsize(name), None) for name in pair]


def test_every_file_read_is_listed_with_its_hash(pair, capsys):
    """The query and the answers of decide are files read too, after the models."""
    x = os.path.join(EX, "x.npy")
    answers = os.path.join(EX, "answers.txt")
    run_ = json_of(capsys, "decide", *pair, "-x", x, answers)["run"]
    assert [i["given"] for i in run_["inputs"]] == list(pair)
    assert {f["path"]: f["sha256"] for f in run_["files"]} == {
        p: sha(p) for p in (*pair, x, answers)}


def test_a_gguf_pair_records_the_tensor_chosen_and_the_file_hashes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    head = RNG.standard_normal((64, 32)).astype(np.float32)
    write_gguf("a.gguf", {"token_embd.weight": (head, Q.Q8_0)})
    write_gguf("b.gguf", {"token_embd.weight": (head + 0.1 * RNG.standard_normal(head.shape)
                                                .astype(np.float32), Q.Q8_0)})
    run_ = json_of(capsys, "design", "a.gguf", "b.gguf", "-E", "1")["run"]
    assert [(i["given"], i["format"], i["tensor"], i["shape"], i["stored"]) for i in run_["inputs"]] == [
        (name, "gguf", "token_embd.weight", [64, 32], "Q8_0") for name in ("a.gguf", "b.gguf")]
    assert [(f["path"], f["size"], f["sha256"]) for f in run_["files"]] == [
        (name, os.path.getsize(name), sha(name)) for name in ("a.gguf", "b.gguf")]
    tensor = json_of(capsys, "design", "a.gguf:token_embd.weight", "b.gguf", "-E", "1")["run"]
    assert tensor["inputs"][0]["given"] == "a.gguf:token_embd.weight"
    assert tensor["files"][0]["path"] == "a.gguf"


@pytest.mark.slow
def test_every_command_carries_the_run_record(pair, tmp_path, capsys):
    """Every command with --json (sample only with --prompt: below) ends with `run`, whose
    version is bhtcli.__version__ and whose files include its inputs."""
    from bhtcli.cli.main import cli
    np.save("H.npy", 0.3 * RNG.standard_normal((10, 8)))
    shift_A = os.path.join(EX, "shift_A.npy")
    data = os.path.join(EX, "shift_data.npz")
    x = os.path.join(EX, "x.npy")
    runs = {"design": ["design", *pair, "-E", "0.5,1"],
            "bound": ["bound", *pair, "-E", "1"],
            "decide": ["decide", *pair, "-x", x, os.path.join(EX, "answers.txt")],
            "simulate": ["simulate", *pair, "-E", "1", "--trials", "100", "--policy", "fixed"],
            "rank": ["rank", *pair, "H.npy", "-E", "1"],
            "shift": ["shift", shift_A, "--data", data, "--lr", "1", "--out", "S.npy"],
            "tensors": ["tensors", "A.npy"],
            "quantize": ["quantize", "A.npy", "--to", "bf16", "--out", "A16.npy"]}
    assert set(cli.commands) - {"sample", "sweep", "prompts"} == set(runs)  # the other three: below
    for command, args in runs.items():
        r = json_of(capsys, *args)
        assert list(r)[-1] == "run", command
        assert r["run"]["bht_version"] == bhtcli.__version__, command
        given = [i["given"] for i in r["run"]["inputs"]]
        assert given == {"shift": [shift_A], "tensors": ["A.npy"], "quantize": ["A.npy"]}.get(
            command, list(pair)), command
        hashes = {f["path"]: f["sha256"] for f in r["run"]["files"]}
        assert all(hashes[g] == sha(g) for g in given), command
    assert {f["path"] for f in json_of(capsys, *runs["shift"])["run"]["files"]} == {shift_A, data}
    curve = json_of(capsys, *runs["design"])
    assert all("run" not in d for d in curve["designs"])       # one record, the curve's


def test_the_python_api_records_arrays_and_files(pair):
    A, B = np.load("A.npy"), np.load("B.npy").astype(np.float32)
    r = api.design(A, B, 1.0).to_dict()["run"]
    assert r["inputs"] == [{"given": None, "format": "array", "tensor": None, "shape": [40, 8],
                            "stored": dtype} for dtype in ("float64", "float32")]
    assert r["files"] == [] and r["bht_version"] == bhtcli.__version__
    # a call's record lists what it read, and nothing of the calls before it
    r = api.bound("A.npy", B, 1.0, hash_files=False).to_dict()["run"]
    assert [f["path"] for f in r["files"]] == ["A.npy"] and r["files"][0]["sha256"] is None
    assert api.design([A, "B.npy", A + 0.1 * RNG.standard_normal((40, 8))], 1.0).run["files"][0]["sha256"] == sha("B.npy")
    with pytest.raises(InputError, match="hash_files must be True or False"):
        api.bound("A.npy", "B.npy", 1.0, hash_files="no")


def test_the_sweep_summary_records_its_manifest(pair, capsys):
    from bhtcli.sweep.task import run_task
    with open("m.csv", "w") as fh:
        fh.write("a,b,energy\nA.npy,B.npy,1\n")

    def engine(tasks, on_done, **kwargs):
        for t in tasks:
            on_done(t, run_task(t, kwargs["design"]))
        return {"engine": "test", "workers": 1, "startup_seconds": 0.0, "run_seconds": 0.0}
    r = api.sweep("m.csv", "out.jsonl", engine=engine).to_dict()
    assert r["ok"] == 1 and r["run"]["bht_version"] == bhtcli.__version__
    assert r["run"]["inputs"] == []
    files = {f["path"]: f["sha256"] for f in r["run"]["files"]}
    assert files["m.csv"] == sha("m.csv")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    from tiny_llama import two_builds
    return two_builds(tmp_path_factory.mktemp("builds"))


@pytest.mark.slow
def test_engine_commands_carry_the_engine_record(builds, tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("Beautiful is better than\nSparse is better than\n")
    r = json_of(capsys, "prompts", *builds, "--prompts", str(prompts), "--top", "1")
    assert r["run"]["engine"] == r["engine"] and r["run"]["engine"]["engine"] == "llama.cpp"
    assert [i["given"] for i in r["run"]["inputs"]] == list(builds)
    assert {f["path"]: f["sha256"] for f in r["run"]["files"]} == {
        p: sha(p) for p in (*builds, str(prompts))}
    answers = tmp_path / "tokens.txt"
    answers.write_text("300\n301\n")
    r = json_of(capsys, "decide", *builds, str(answers), "--prompt", "Beautiful is better than")
    assert r["run"]["engine"]["engine"] == "llama.cpp" and r["run"]["engine"]["threads"] == 2
    assert "engine" not in r                                 # decide's own keys are unchanged
    assert r["run"]["bht_version"] == bhtcli.__version__
    assert {f["path"] for f in r["run"]["files"]} == {*builds, str(answers)}
    r = json_of(capsys, "sample", builds[0], "--prompt", "Beautiful is better than", "-n", "3")
    assert r["run"]["engine"]["engine"] == "llama.cpp" and r["run"]["engine"]["kv_type"] == "f16"
    assert list(r)[-1] == "run" and r["run"]["bht_version"] == bhtcli.__version__
    assert [(f["path"], f["sha256"]) for f in r["run"]["files"]] == [(builds[0], sha(builds[0]))]
