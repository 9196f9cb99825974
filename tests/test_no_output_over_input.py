"""No output over any input (docs/cli.md): every file-writing option of every command refuses
every file the command reads -- a checkpoint folder's members, shards, config.json and index,
the config.json beside a .safetensors head -- however it is spelled; index.json cannot point
outside its folder; SIGTERM during a write leaves no temporary file and one Error line."""
import json
import os
import subprocess
import sys

import click
import numpy as np
import pytest
from safetensors.numpy import save_file

from bhtcli import InputError, load_matrix
from bhtcli.cli.main import cli
from bhtcli.io.write import save_array
from cli_run import run

N, D = 40, 6
PNG, CSV_OR_PARQUET, SCORES = (".png",), (".csv", ".parquet"), (".jsonl", ".csv")
MATRIX = (".npy", ".csv", ".txt", ".json")
# every file-writing option, with the command line that uses it on models A and B
# ({a}, {b}: model specs, {h}, {data}, {m}: other inputs, {t}: the output) and the extensions
# it accepts (None: any name); a third item names a variant of the option (what --out writes
# with --schedule)
OUTPUTS = {
    ("design", "--out"): (["design", "{a}", "{b}", "-E", "1", "-q", "--out", "{t}"], MATRIX),
    ("design", "--out", "--schedule"): (["design", "{a}", "{b}", "{c}", "-E", "1", "-q", "--schedule",
                                         "--out", "{t}"], (".json", ".npz")),
    ("design", "--plot"): (["design", "{a}", "{b}", "-E", "0.5,1", "-q", "--plot", "{t}"], PNG),
    ("simulate", "--plot"): (["simulate", "{a}", "{b}", "-E", "1", "-q", "--trials", "20",
                              "--policy", "fixed", "--plot", "{t}"], PNG),
    ("rank", "--out"): (["rank", "{a}", "{b}", "{h}", "-E", "10", "-q", "--out", "{t}"], SCORES),
    ("sweep", "--out"): (["sweep", "{m}", "-q", "--workers", "1", "--out", "{t}"], None),
    ("sweep", "--export"): (["sweep", "{m}", "-q", "--workers", "1", "--out", "{r}",
                             "--export", "{t}"], CSV_OR_PARQUET),
    ("shift", "--out"): (["shift", "{a}", "--data", "{data}", "--lr", "1", "-q", "--out", "{t}"], MATRIX),
    ("quantize", "--out"): (["quantize", "{a}", "--to", "int8-row", "-q", "--out", "{t}"], MATRIX),
}
# the kinds of file a command reads besides the file it is given
KINDS = ("member", "shard", "config", "index", "beside")
# a sweep manifest names matrix files, not folders (a folder is refused when the manifest is
# read): of these kinds a sweep reads the config.json beside a .safetensors head
CASES = [(output, kind) for output in OUTPUTS for kind in KINDS
         if output[0] != "sweep" or kind == "beside"]


def test_every_output_option_is_covered():
    """The options that name a file to write (click.Path without folders) are those above:
    a new one must join the table (and so the tests below)."""
    found = {(name, p.opts[0]) for name, c in cli.commands.items() for p in c.params
             if isinstance(p, click.Option) and isinstance(p.type, click.Path) and not p.type.dir_okay}
    assert found == {key[:2] for key in OUTPUTS}


def _tensors(shift=0.0):
    rng = np.random.default_rng(0)
    return {"lm_head.weight": (rng.standard_normal((N, D)) + shift).astype(np.float32),
            "model.norm.weight": np.ones(D, dtype=np.float32)}


def _checkpoint(tmp_path, kind, shard_suffix):
    """(spec of A, the file of A that the kind names): A is a folder, or with kind 'beside' a
    model.safetensors file with a config.json beside it (its softcap)."""
    folder = tmp_path / "A"
    folder.mkdir()
    tensors = _tensors()
    config = {"model_type": "gemma2", "final_logit_softcapping": 30.0}
    (folder / "config.json").write_text(json.dumps(config))
    if kind in ("member", "beside"):
        save_file(tensors, str(folder / "model.safetensors"))
    else:   # two shards listed by the index; the first named with an extension the option takes
        shards = {"lm_head.weight": f"model-00001-of-00002{shard_suffix}",
                  "model.norm.weight": "model-00002-of-00002.safetensors"}
        for name, file in shards.items():
            save_file({name: tensors[name]}, str(folder / file))
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    target = {"member": "model.safetensors", "shard": f"model-00001-of-00002{shard_suffix}",
              "config": "config.json", "index": "model.safetensors.index.json",
              "beside": "config.json"}[kind]
    spec = str(folder / "model.safetensors") if kind == "beside" else str(folder)
    return spec, str(folder / target)


def _snapshot(root):
    """Every file under root (hidden ones too) with its bytes."""
    return {os.path.join(d, f): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(root) for f in files}


def _inputs(tmp_path, kind, suffixes):
    shard_suffix = ".safetensors" if suffixes is None or ".safetensors" in suffixes else suffixes[0]
    a, target = _checkpoint(tmp_path, kind, shard_suffix)
    b = str(tmp_path / "B.npy")
    np.save(b, _tensors(0.2)["lm_head.weight"])
    c = str(tmp_path / "C.npy")
    np.save(c, _tensors(-0.2)["lm_head.weight"])
    h = str(tmp_path / "H.npy")
    np.save(h, np.random.default_rng(1).standard_normal((5, D)))
    data = str(tmp_path / "D.npz")
    rng = np.random.default_rng(2)
    np.savez(data, Q=rng.standard_normal((8, D)), Y=rng.integers(0, N, 8))
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"a,b,energy\n{os.path.relpath(a, tmp_path)},B.npy,1\n")
    return dict(a=a, b=b, c=c, h=h, data=data, m=str(manifest), r=str(tmp_path / "r.jsonl")), target


@pytest.mark.parametrize("output, kind", CASES, ids=["".join(o) + f"-{k}" for o, k in CASES])
def test_no_output_over_a_file_the_command_reads(capsys, tmp_path, output, kind):
    args, suffixes = OUTPUTS[output]
    files, target = _inputs(tmp_path, kind, suffixes)
    before = _snapshot(tmp_path)
    code, out, err = run(capsys, *[a.format(**files, t=target) for a in args])
    error = err.splitlines()[-1]        # after any Note: lines (the checkpoint's softcap)
    assert (code, out) == (2, "") and err.count("Error: ") == 1 and error.startswith("Error: "), err
    if suffixes is None or os.path.splitext(target)[1] in suffixes:
        assert error == (f"Error: {output[1]} {target} is also an input of this command; writing "
                         f"it would replace the input: choose another name"
                         f"{' (or add --force)' if _has_force(output) else ''}")
    else:       # a name the option cannot write at all (e.g. --plot config.json)
        assert "is also an input" not in error and target in error
    assert _snapshot(tmp_path) == before                # not a byte written, no temporary file
    load_matrix(files["a"])                             # the checkpoint still reads


def _has_force(output):
    """The option gives way to --force (a sweep's journal never does; quantize has none)."""
    return output[:2] != ("sweep", "--out") and \
        any("--force" in p.opts for p in cli.commands[output[0]].params)


@pytest.mark.parametrize("link", ["symlink", "hardlink", "dotdot"])
def test_any_spelling_of_a_folder_member_is_refused(capsys, tmp_path, link):
    a, config = _checkpoint(tmp_path, "config", ".safetensors")
    target = str(tmp_path / "other.json")
    if link == "symlink":
        os.symlink(config, target)
    elif link == "hardlink":
        os.link(config, target)
    else:
        (tmp_path / "sub").mkdir()
        target = str(tmp_path / "sub" / ".." / "A" / "config.json")
    np.save(tmp_path / "B.npy", _tensors(0.2)["lm_head.weight"])
    before = _snapshot(tmp_path)
    code, _, err = run(capsys, "design", a, str(tmp_path / "B.npy"), "-E", "1", "-q", "--out", target)
    assert code == 2 and "is also an input of this command" in err
    assert _snapshot(tmp_path) == before


def test_force_still_replaces_a_member_it_names(capsys, tmp_path):
    """--force keeps its meaning (the user asked to replace an input), for members too."""
    a, config = _checkpoint(tmp_path, "config", ".safetensors")
    np.save(tmp_path / "B.npy", _tensors(0.2)["lm_head.weight"])
    code, _, _ = run(capsys, "design", a, str(tmp_path / "B.npy"), "-E", "1", "-q", "--out", config,
                     "--force")
    assert code == 0 and len(json.loads(open(config).read())) == D     # the query, length d


def test_library_calls_are_guarded_too(tmp_path):
    """bhtcli.api.quantize, no CLI around it: the folder's config.json is refused."""
    from bhtcli import api
    a, config = _checkpoint(tmp_path, "config", ".safetensors")
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match="is also an input of this command"):
        api.quantize(a, "int8-row", config)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", KINDS)
def test_the_write_refuses_any_file_read_in_the_session(tmp_path, kind):
    """atomic_file's own check, named by no input list: every kind of file a load reads (a
    member or shard too, whose .safetensors name no output option takes today)."""
    from bhtcli.io import reads
    from bhtcli.io.checkpoint import checkpoint_softcap
    from bhtcli.io.write import atomic_file
    a, target = _checkpoint(tmp_path, kind, ".safetensors")
    before = _snapshot(tmp_path)
    with reads.input_session():
        load_matrix(a)
        checkpoint_softcap(a)           # the readout a command takes from the config beside
        with pytest.raises(InputError, match=f"^{target} is also an input of this command"):
            with atomic_file(target, "wb") as fh:
                fh.write(b"replaced")
        save_array(str(tmp_path / "x.json"), np.zeros(3))        # any other name is written
    assert _snapshot(tmp_path) == {**before, str(tmp_path / "x.json"): b"[0.0, 0.0, 0.0]\n"}
    with atomic_file(target, "wb") as fh:     # outside a command nothing is remembered
        fh.write(b"replaced")
    assert open(target, "rb").read() == b"replaced"


@pytest.mark.parametrize("shard", ["/etc/passwd", "../../etc/passwd", "sub/../../B/x.safetensors", ""])
def test_index_paths_stay_inside_the_folder(tmp_path, shard):
    folder = tmp_path / "A"
    folder.mkdir()
    save_file(_tensors(), str(folder / "model.safetensors"))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": shard}}))
    with pytest.raises(InputError, match=f"names the shard {shard!r}, outside the folder"):
        load_matrix(str(folder))


SIGTERM_IN_A_WRITE = """
import os, signal, sys
import numpy as np
from bhtcli.cli.main import main

def save(fh, array, allow_pickle=False):     # the write has begun when SIGTERM arrives
    fh.write(b"half a file")
    fh.flush()
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the write")

np.save = save                               # bhtcli.io.write.save_npy_atomic writes with it
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_sigterm_during_a_write_leaves_nothing_and_one_line(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((8, 3))
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", A + 0.3)
    p = subprocess.run([sys.executable, "-c", SIGTERM_IN_A_WRITE, "design", str(tmp_path / "A.npy"),
                        str(tmp_path / "B.npy"), "-E", "1", "-q", "--out", str(tmp_path / "x.npy")],
                       capture_output=True, text=True)
    assert (p.returncode, p.stdout, p.stderr) == (143, "", "Error: terminated\n")
    assert sorted(os.listdir(tmp_path)) == ["A.npy", "B.npy"]      # no x.npy, no .bht-*.tmp
