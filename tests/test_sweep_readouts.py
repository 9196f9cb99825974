"""Sweep manifests' `links` and `biases` columns: one value per model, as the CLI's --links
and --biases; a `models` row's are the K-way design's, a pair row's are link_a .. bias_b."""
import json

import numpy as np
import pytest

from bhtcli.api import design
from cli_run import run
from bhtcli.sweep.manifest import read_manifest
from bhtcli.sweep.task import MatrixCache, run_task


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def folder(tmp_path):
    """Three 10 x 3 models and a bias in a subfolder (paths relative to the manifest)."""
    rng = np.random.default_rng(31)
    (tmp_path / "m").mkdir()
    for k in range(3):
        np.save(tmp_path / "m" / f"k{k}.npy", rng.standard_normal((10, 3)))
    np.save(tmp_path / "m" / "b.npy", rng.standard_normal(10))
    return tmp_path


def test_kway_row_with_links_and_biases_is_the_direct_design(folder):
    cell = '"m/k0.npy|m/k1.npy|m/k2.npy"'
    manifest = write_csv(folder / "k.csv", ["models", "energy", "seed", "links", "biases"],
                         [(cell, 1.5, 2, '"exp, softcap:2,taylor:4"', '",m/b.npy,"')])
    task = read_manifest(manifest).tasks[0]
    assert task.problem is None, task.problem
    assert task.values["links"] == "exp,softcap:2,taylor:4"
    assert task.values["biases"] == [None, str(folder / "m" / "b.npy"), None]
    got = run_task(task, design, MatrixCache())
    assert got["row"]["status"] == "ok", got["row"]["failure"]
    paths = [str(folder / "m" / f"k{k}.npy") for k in range(3)]
    ref = design(paths, energy=1.5, seed=2, links=["exp", "softcap:2", "taylor:4"],
                 biases=[None, str(folder / "m" / "b.npy"), None])
    assert got["query"].tolist() == list(ref.query)                   # bit for bit
    assert got["row"]["hellinger_squared"] == ref.hellinger_squared
    assert got["row"]["samples.predicted"] == ref.samples["predicted"]
    assert (got["row"]["bottleneck.i"], got["row"]["bottleneck.j"]) == (ref.bottleneck["i"], ref.bottleneck["j"])
    plain = design(paths, energy=1.5, seed=2)
    assert plain.hellinger_squared != ref.hellinger_squared
    # JSONL lists are the same task as the CSV cells
    (folder / "k.jsonl").write_text(json.dumps({
        "models": ["m/k0.npy", "m/k1.npy", "m/k2.npy"], "energy": 1.5, "seed": 2,
        "links": ["exp", "softcap:2", "taylor:4"], "biases": [None, "m/b.npy", ""]}) + "\n")
    assert read_manifest(folder / "k.jsonl").tasks[0].key == task.key
    # the bias file's stamp is part of the identity
    np.save(folder / "m" / "b.npy", np.zeros(11))
    assert read_manifest(manifest).tasks[0].key != task.key


def test_pair_row_links_are_link_a_and_link_b(folder):
    """As `bht design A B --links L1,L2 --biases B1,B2`: the pair's link_a .. bias_b."""
    manifest = write_csv(folder / "p.csv", ["a", "b", "energy", "links", "biases"],
                         [("m/k0.npy", "m/k1.npy", 1, '"softcap:2,exp"', '",m/b.npy"')])
    task = read_manifest(manifest).tasks[0]
    assert task.problem is None, task.problem
    got = run_task(task, design, MatrixCache())
    A, B, b = (str(folder / "m" / f) for f in ("k0.npy", "k1.npy", "b.npy"))
    ref = design(A, B, 1, link_a="softcap:2", bias_b=b)
    assert got["row"]["status"] == "ok", got["row"]["failure"]
    assert got["query"].tolist() == list(ref.query)
    assert got["row"]["hellinger_squared"] == ref.hellinger_squared


@pytest.mark.parametrize("header, cells, message", [
    (["models", "energy", "links"], ('"m/k0.npy|m/k1.npy|m/k2.npy"', 1, '"exp,softcap:2"'),
     "line 2: links gives 2 values for 3 models: one per model, in their order (e.g. exp,softcap:30,exp)"),
    (["models", "energy", "biases"], ('"m/k0.npy|m/k1.npy|m/k2.npy"', 1, "m/b.npy"),
     "line 2: biases gives 1 value for 3 models"),
    (["models", "energy", "links"], ('"m/k0.npy|m/k1.npy|m/k2.npy"', 1, '"exp,taylor:3,exp"'),
     "line 2: links (model 2)"),
    (["models", "energy", "biases"], ('"m/k0.npy|m/k1.npy|m/k2.npy"', 1, '",m/gone.npy,"'),
     "line 2: biases (model 2) = m/gone.npy: no such file"),
    (["models", "energy", "link_a"], ('"m/k0.npy|m/k1.npy|m/k2.npy"', 1, "softcap:2"),
     "line 2: link_a, link_b, bias_a and bias_b name the two models of a pair; with three or more "
     "models give links and biases"),
    (["a", "b", "energy", "links", "link_b"], ("m/k0.npy", "m/k1.npy", 1, '"exp,exp"', "taylor:4"),
     "line 2: links and link_b both set read-outs"),
    (["a", "b", "energy", "links"], ("m/k0.npy", "m/k1.npy", 1, '"exp,exp,exp"'),
     "line 2: links gives 3 values for 2 models"),
])
def test_bad_cells_are_one_error_line(folder, capsys, header, cells, message):
    manifest = write_csv(folder / "bad.csv", header, [cells])
    out = folder / "r.jsonl"
    code, stdout, err = run(capsys, "sweep", manifest, "--out", str(out))
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, stdout) == (2, "") and len(lines) == 1, err
    assert lines[0].startswith(f"Error: {manifest}: 1 row of 1 cannot run (") and message in lines[0], err
    assert not out.exists()


@pytest.fixture
def capped(tmp_path):
    """Three GGUF heads (30 x 6) declaring caps 3, 2 and none."""
    from test_gguf import write_gguf
    rng = np.random.default_rng(41)
    W = rng.standard_normal((30, 6)).astype(np.float32)
    for k, cap in enumerate((3.0, 2.0, None)):
        M = W + 0.4 * k * rng.standard_normal(W.shape).astype(np.float32)
        meta = {"gemma2.final_logit_softcapping": cap} if cap else {}
        write_gguf(tmp_path / f"g{k}.gguf", {"token_embd.weight": (M, None)}, "gemma2", meta)
    return tmp_path, [str(tmp_path / f"g{k}.gguf") for k in range(3)]


def test_rows_of_checkpoints_read_their_declared_softcaps(capped):
    """The task loads the matrices, not the files: the manifest reads the checkpoints' declared
    links (a note each), so that a row is what `bht design` of its files gives."""
    folder, paths = capped
    manifest = write_csv(folder / "c.csv", ["name", "a", "b", "models", "energy", "seed", "links"],
                         [("pair", "g0.gguf", "g1.gguf", "", 1.5, 1, ""),
                          ("three", "", "", '"g0.gguf|g1.gguf|g2.gguf"', 1.5, 1, ""),
                          ("forced", "g0.gguf", "g1.gguf", "", 1.5, 1, '"exp,exp"')])
    m = read_manifest(manifest)
    pair, three, forced = m.tasks
    assert (pair.values["link_a"], pair.values["link_b"]) == ("softcap:3", "softcap:2")
    assert (pair.shown["link_a"], pair.shown["link_b"]) == ("softcap:3", "softcap:2")
    assert three.values["links"] == "softcap:3,softcap:2,exp"
    assert forced.values["link_a"] is None and forced.values["links"] == "exp,exp"
    assert m.notes == [f"{paths[0]} declares final_logit_softcapping 3: model 1 reads out with softcap:3 (set links to change it)",
                       f"{paths[1]} declares final_logit_softcapping 2: model 2 reads out with softcap:2 (set links to change it)"]
    refs = {"pair": design(paths[0], paths[1], 1.5, seed=1), "three": design(paths, energy=1.5, seed=1),
            "forced": design(paths[0], paths[1], 1.5, seed=1, link_a="exp", link_b="exp")}
    assert refs["pair"].hellinger_squared != refs["forced"].hellinger_squared
    for task in m.tasks:
        got = run_task(task, design, MatrixCache())
        ref = refs[task.labels["name"]]
        assert got["row"]["status"] == "ok", got["row"]["failure"]
        assert got["query"].tolist() == list(ref.query), task.labels["name"]
        assert got["row"]["hellinger_squared"] == ref.hellinger_squared
