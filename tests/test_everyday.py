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


# ---------------------------------------------------------------- 4. decide agrees with design
def test_decide_fixed_error_meets_alpha_at_designs_predicted_count(tmp_path):
    from bhtcli import api
    rng = np.random.default_rng(5)
    A = rng.standard_normal((30, 4))
    B = A + 0.25 * rng.standard_normal((30, 4))
    d = api.design(A, B, 1.5, starts=8)
    N = d.samples["predicted"]
    assert N > d.samples["lower"]                   # so N - 1 answers are not enough
    x = np.array(d.query)
    answers = api.sample(B, x, N, seed=1)
    at_n = api.decide(A, B, x, answers)
    short = api.decide(A, B, x, answers[:-1])
    assert at_n.fixed_error <= 0.05 < short.fixed_error
    assert at_n.fixed_error < at_n.fixed_error_bound      # the exact error, not BC^N


def test_decide_fixed_error_is_the_exact_minimax_error_by_hand(tmp_path):
    """p = (1/4, 3/4) under A, (3/4, 1/4) under B: the number T of answers 1 among N is
    Binomial(N, 3/4) under A and Binomial(N, 1/4) under B; the best test decides A when T is
    large, randomising at one value. Its minimax error by a brute-force scan of (tau, gamma)."""
    from scipy.stats import binom
    from bhtcli import api
    ln3 = np.log(3.0)
    A, B, x = np.array([[0.0], [ln3]]), np.array([[0.0], [-ln3]]), np.array([1.0])
    for answers in ([1, 1, 0, 1, 1], [0, 0, 1, 0, 1, 1, 0], [1, 0, 1, 0]):
        N = len(answers)
        pa, pb = binom.pmf(np.arange(N + 1), N, 0.75), binom.pmf(np.arange(N + 1), N, 0.25)
        best = 1.0
        for tau in range(N + 1):
            for gamma in np.linspace(0, 1, 20001):
                e1 = pa[:tau].sum() + gamma * pa[tau]
                e2 = pb[tau + 1:].sum() + (1 - gamma) * pb[tau]
                best = min(best, max(e1, e2))
        r = api.decide(A, B, x, answers)
        assert r.fixed_error == pytest.approx(best, abs=1e-4)
        ones = sum(answers)
        assert r.fixed_verdict == ("A" if ones > N / 2 else "B" if ones < N / 2 else "tie")


def test_decide_table_names_the_exact_error_and_whole_answers(capsys, tmp_path):
    ln3 = np.log(3.0)
    for name, arr in {"A": [[0.0], [ln3]], "B": [[0.0], [-ln3]], "x": [1.0]}.items():
        np.save(tmp_path / f"{name}.npy", np.array(arr))
    (tmp_path / "ans.txt").write_text("1\n0\n1\n")
    code, out, err = run(capsys, "decide", *(str(tmp_path / f) for f in ("A.npy", "B.npy")), str(tmp_path / "ans.txt"),
                         "--query", str(tmp_path / "x.npy"))
    assert code == 0 and err == ""
    assert "fixed-sample verdict          A  (best test on 3 answers: both errors 0.156)" in out
    # Wald: (ln 19 - ln 3) / (ln 3 / 2) = 3.36 more answers, said as 4
    assert "more answers needed           about 4 answers (Wald, if A is true)" in out
