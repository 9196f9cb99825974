"""Everyday use by a new user: outputs never replace inputs and are checked before any work,
completion, decide against design, progress, pandas CSV files, sweep manifests checked up
front, one behaviour across commands, errors naming the right thing.
"""
import json
import os

import numpy as np
import pytest

from bhtcli.cli.main import main


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    """A (CSV), B (.npy), candidates H (CSV), names, a bias (CSV): the inputs of rank."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 3))
    B = A + 0.3 * rng.standard_normal((6, 3))
    paths = {name: str(tmp_path / name) for name in ("A.csv", "B.npy", "H.csv", "names.csv", "bias.csv")}
    np.savetxt(paths["A.csv"], A, delimiter=",")
    np.save(paths["B.npy"], B)
    np.savetxt(paths["H.csv"], rng.standard_normal((20, 3)), delimiter=",")
    with open(paths["names.csv"], "w") as fh:
        fh.write("".join(f"prompt {i}\n" for i in range(20)))
    np.savetxt(paths["bias.csv"], rng.standard_normal(6))
    return paths


def _snapshot(paths):
    return {p: open(p, "rb").read() for p in paths}


# ---------------------------------------------------------------- 1. outputs never replace inputs
@pytest.mark.parametrize("target", ["A.csv", "H.csv", "names.csv", "bias.csv"])
def test_rank_out_refuses_every_input(capsys, files, target):
    f = files
    before = _snapshot(f.values())
    code, out, err = run(capsys, "rank", f["A.csv"], f["B.npy"], f["H.csv"], "--names", f["names.csv"],
                         "--bias-a", f["bias.csv"], "--energy", "10", "--out", f[target])
    assert (code, out) == (2, "")
    assert err == (f"Error: --out {f[target]} is also an input of this command; writing it would "
                   "replace the input: choose another name (or add --force)\n")
    assert _snapshot(f.values()) == before


def test_rank_out_force_replaces_the_input(capsys, files):
    f = files
    code, out, err = run(capsys, "rank", f["A.csv"], f["B.npy"], f["H.csv"], "--energy", "10",
                         "--out", f["H.csv"], "--force", "--json")
    assert code == 0 and json.loads(out)["out"] == f["H.csv"]
    assert open(f["H.csv"]).readline().startswith("index,name,eligible")


def test_plot_refuses_inputs_and_takes_force(capsys, files, tmp_path):
    f = files
    png = tmp_path / "bias.png"
    png.write_bytes(b"not a picture, an input")
    np.savetxt(tmp_path / "bias.png.csv", np.zeros(6))
    for args in (("design", f["A.csv"], f["B.npy"], "-E", "0.5,1", "--link-a", "poly:2",
                  "--bias-a", f"{png}"),
                 ("simulate", f["A.csv"], f["B.npy"], "-E", "1", "--bias-a", f"{png}", "--trials", "100")):
        # --bias-a names a file whose name ends in .png: bht refuses to draw over it
        code, out, err = run(capsys, *args, "--plot", str(png))
        assert code == 2 and "is also an input of this command" in err and "(or add --force)" in err
        assert png.read_bytes() == b"not a picture, an input"


def test_sweep_export_never_replaces_a_model_file(capsys, tmp_path):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 3))
    np.savetxt(tmp_path / "Am.csv", A, delimiter=",")
    np.save(tmp_path / "Bm.npy", A + 0.2)
    (tmp_path / "m.csv").write_text("a,b,energy\nAm.csv,Bm.npy,1\n")
    before = (tmp_path / "Am.csv").read_bytes()
    code, out, err = run(capsys, "sweep", str(tmp_path / "m.csv"), "--out", str(tmp_path / "r.jsonl"),
                         "--export", str(tmp_path / "Am.csv"))
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: --export {tmp_path / 'Am.csv'} is also an input of this command")
    assert (tmp_path / "Am.csv").read_bytes() == before and not (tmp_path / "r.jsonl").exists()
    # nor can the results journal be one of the matrices
    code, out, err = run(capsys, "sweep", str(tmp_path / "m.csv"), "--out", str(tmp_path / "Am.csv"))
    assert code == 2 and "is also an input of this command" in err
    assert (tmp_path / "Am.csv").read_bytes() == before


# ---------------------------------------------------------------- 2. writable before the work
def _unwritable(folder="/sys"):
    import tempfile
    try:
        fd, probe = tempfile.mkstemp(dir=folder)
    except OSError:
        return True
    os.close(fd)
    os.unlink(probe)
    return False


@pytest.mark.skipif(not _unwritable(), reason="needs a folder nobody can write in (/sys)")
@pytest.mark.parametrize("command", ["design", "rank", "simulate"])
def test_unwritable_output_folder_is_refused_before_any_work(capsys, files, command):
    f = files
    args = {"design": ("design", f["A.csv"], f["B.npy"], "-E", "1", "--out", "/sys/x.npy"),
            "rank": ("rank", f["A.csv"], f["B.npy"], f["H.csv"], "-E", "10", "--out", "/sys/x.csv"),
            "simulate": ("simulate", f["A.csv"], f["B.npy"], "-E", "1", "--plot", "/sys/x.png")}[command]
    option = args[-2]
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert err == (f"Error: {option} {args[-1]}: cannot write in folder /sys (Permission denied); "
                   "choose a folder you can write to\n")


# ---------------------------------------------------------------- 3. completion of file names
def _complete(capsys, monkeypatch, words):
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(words.split()) - 1))
    monkeypatch.setenv("_BHT_COMPLETE", "bash_complete")
    with pytest.raises(SystemExit):
        main([])
    return capsys.readouterr().out.split()


FILE_PARAMETERS = {    # command -> every argument and option that names a file
    "design": ["A", "B", "--bias-a", "--bias-b", "--candidates", "--names", "--subspace", "--out", "--plot"],
    "bound": ["A", "B", "--bias-a", "--bias-b"],
    "sample": ["A", "--query", "--bias-a"],
    "decide": ["A", "B", "ANSWERS", "--query", "--bias-a", "--bias-b"],
    "simulate": ["A", "B", "--query", "--bias-a", "--bias-b", "--plot"],
    "rank": ["A", "B", "H", "--names", "--bias-a", "--bias-b", "--out"],
    "sweep": ["MANIFEST", "--out", "--export"],
    "shift": ["A", "--data", "--out"],
}


@pytest.mark.parametrize("command", sorted(FILE_PARAMETERS))
def test_completion_offers_file_names_for_every_path(capsys, monkeypatch, command):
    arguments = [p for p in FILE_PARAMETERS[command] if not p.startswith("-")]
    for k in range(len(arguments)):          # the k-th argument, after k earlier ones
        words = " ".join(["bht", command] + [f"f{j}" for j in range(k)] + ["exa"])
        assert _complete(capsys, monkeypatch, words) == ["file,exa"], words
    for option in (p for p in FILE_PARAMETERS[command] if p.startswith("-")):
        assert _complete(capsys, monkeypatch, f"bht {command} {option} exa") == ["file,exa"], option


def test_every_path_parameter_is_listed_above():
    from bhtcli.cli.main import cli
    import click
    for name, command in cli.commands.items():
        paths = sorted((p.human_readable_name if isinstance(p, click.Argument) else p.opts[0])
                       for p in command.params if isinstance(p.type, click.Path))
        assert paths == sorted(FILE_PARAMETERS[name]), name
