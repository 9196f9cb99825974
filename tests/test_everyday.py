"""Everyday use by a new user: outputs never replace inputs and are checked before any work,
completion, decide against design, progress, pandas CSV files, sweep manifests checked up
front, one behaviour across commands, errors naming the right thing.
"""
import json
import os

import numpy as np
import pytest

from bhtcli.cli.main import main
from cli_run import run


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


@pytest.mark.slow
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
    "design": ["A", "B", "[M3 ...]", "--bias-a", "--bias-b", "--candidates", "--names", "--subspace", "--out", "--plot"],
    "bound": ["A", "B", "[M3 ...]", "--bias-a", "--bias-b"],
    "sample": ["A", "--query", "--schedule", "--bias-a"],
    "decide": ["A", "B", "[M3 ...] ANSWERS", "--query", "--bias-a", "--bias-b"],
    "simulate": ["A", "B", "[M3 ...]", "--query", "--bias-a", "--bias-b", "--plot"],
    "rank": ["A", "B", "[M3 ...] H", "--names", "--bias-a", "--bias-b", "--out"],
    "sweep": ["MANIFEST", "--out", "--export"],
    "shift": ["A", "--data", "--out"],
    "tensors": ["FILE|DIR", "[OTHER]"],
    "quantize": ["SRC", "--out"],
    "prompts": ["A.gguf B.gguf [C.gguf ...]", "--prompts"],
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


@pytest.mark.slow
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


# ---------------------------------------------------------------- 6. a pandas CSV with its index
def test_pandas_index_column_is_refused_by_name(capsys, files, tmp_path):
    A = np.loadtxt(files["A.csv"], delimiter=",")
    pandas_csv = tmp_path / "pandas.csv"      # what pd.DataFrame(A).to_csv(path) writes
    pandas_csv.write_text("," + ",".join(map(str, range(3))) + "\n"
                          + "".join(f"{i}," + ",".join(repr(float(v)) for v in row) + "\n"
                                    for i, row in enumerate(A)))
    code, out, err = run(capsys, "bound", str(pandas_csv), files["B.npy"], "-E", "1")
    assert (code, out) == (2, "")
    assert err == (f"Error: {pandas_csv}: the first column has no name in the header and holds whole "
                   "numbers: a row index (pandas' to_csv writes one), not model data; save with "
                   "df.to_csv(path, index=False) or delete that column\n")
    named = tmp_path / "named.csv"            # a header naming every column: data, read as is
    named.write_text("a,b,c,d\n" + "".join(f"{i}," + ",".join(repr(float(v)) for v in row[:2]) + ",1\n"
                                            for i, row in enumerate(A)))
    from bhtcli import load_matrix
    assert load_matrix(str(named)).shape == (6, 4)


# ---------------------------------------------------------------- 8. one behaviour across commands
@pytest.mark.slow
def test_rank_on_the_same_model_says_not_distinguishable(capsys, files):
    f = files
    code, out, err = run(capsys, "rank", f["A.csv"], f["A.csv"], f["H.csv"], "-E", "10", "--json")
    r = json.loads(out)
    assert code == 0 and r["distinguishable"] is False and "A and B are identical" in r["note"]
    code, out, err = run(capsys, "rank", f["A.csv"], f["A.csv"], f["H.csv"], "-E", "10")
    assert "distinguishable               no" in out and "Top" not in out
    code, out, err = run(capsys, "rank", f["A.csv"], f["B.npy"], f["H.csv"], "-E", "10", "--json")
    assert json.loads(out)["distinguishable"] is True and json.loads(out)["note"] is None


@pytest.mark.parametrize("command", ["bound", "simulate", "rank"])
def test_budget_list_on_a_one_budget_command_is_one_clear_error(capsys, files, command):
    f = files
    extra = [f["H.csv"]] if command == "rank" else []
    code, out, err = run(capsys, command, f["A.csv"], f["B.npy"], *extra, "-E", "0.5,1")
    assert (code, out) == (2, "")
    assert err == ("Error: Invalid value for '--energy' / '-E': '0.5,1': this command takes one budget; "
                   "a comma list of budgets (0.5,1,2,4) is for bht design (the budget curve) "
                   f"(see bht {command} --help)\n")


def test_every_command_takes_quiet():
    from bhtcli.cli.main import cli
    for name, command in cli.commands.items():
        assert any("--quiet" in p.opts and "-q" in p.opts for p in command.params), name


def test_design_top_without_candidates_is_refused_like_names(capsys, files):
    code, out, err = run(capsys, "design", files["A.csv"], files["B.npy"], "-E", "1", "--top", "3")
    assert (code, out) == (2, "")
    assert err == "Error: --top lists the best rows of --candidates; give --candidates too\n"


# ---------------------------------------------------------------- 9. errors name the right thing
def test_rank_names_its_positional_h_by_path(capsys, files, tmp_path):
    np.save(tmp_path / "H4.npy", np.ones((5, 4)))
    code, out, err = run(capsys, "rank", files["A.csv"], files["B.npy"], str(tmp_path / "H4.npy"), "-E", "1")
    assert code == 2 and err == (f"Error: {tmp_path / 'H4.npy'} has 4 columns but each candidate must have 3 "
                                 "entries (a query x, one entry per column of A, d = 3)\n")
    code, out, err = run(capsys, "design", files["A.csv"], files["B.npy"], "--candidates",
                         str(tmp_path / "H4.npy"), "-E", "1")
    assert code == 2 and err.startswith(f"Error: --candidates {tmp_path / 'H4.npy'} has 4 columns")


def test_huge_values_name_the_file(capsys, files, tmp_path):
    big = tmp_path / "Big.npy"
    np.save(big, np.loadtxt(files["A.csv"], delimiter=",") * 1e300)
    code, out, err = run(capsys, "design", str(big), files["B.npy"], "-E", "1")
    assert code == 2 and err.startswith(f"Error: {big} has values up to ") and "rescale the matrix" in err
    code, out, err = run(capsys, "rank", files["A.csv"], files["B.npy"], str(big), "-E", "1")
    assert code == 2 and err.startswith(f"Error: {big}: row 0 (0-based) has values beyond 1e+150")


def test_a_safetensors_file_named_bin_is_read_by_its_bytes(capsys, files, tmp_path):
    from safetensors.numpy import save_file
    A = np.loadtxt(files["A.csv"], delimiter=",")
    save_file({"lm_head.weight": A}, str(tmp_path / "model.bin"))
    code, out, err = run(capsys, "bound", str(tmp_path / "model.bin"), files["B.npy"], "-E", "1", "--json")
    assert code == 0
    untimed = lambda text: {k: v for k, v in json.loads(text).items() if k not in ("seconds", "run")}
    assert untimed(out) == untimed(run(capsys, "bound", files["A.csv"], files["B.npy"], "-E", "1", "--json")[1])
    assert json.loads(out)["run"]["inputs"][0]["format"] == "safetensors"
    import pickle
    (tmp_path / "real.bin").write_bytes(pickle.dumps(A, protocol=4))
    code, out, err = run(capsys, "bound", str(tmp_path / "real.bin"), files["B.npy"], "-E", "1")
    assert code == 2 and "is a PyTorch checkpoint (.bin, a pickle)" in err


@pytest.mark.slow
def test_rank_out_write_failure_names_its_option(capsys, files, tmp_path, monkeypatch):
    import errno
    import bhtcli.io.write as write
    real = write.tempfile.mkstemp
    calls = []

    def full(*args, **kwargs):          # the up-front probe passes, the write at the end fails
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)
    monkeypatch.setattr(write.tempfile, "mkstemp", full)
    out_file = tmp_path / "scores.csv"
    code, out, err = run(capsys, "rank", files["A.csv"], files["B.npy"], files["H.csv"], "-E", "10",
                         "--out", str(out_file))
    assert code == 1 and err == (f"Error: --out {out_file}: cannot write it (No space left on device); "
                                 "free some space or write elsewhere\n")


# ---------------------------------------------------------------- 10. help and docs
def test_help_slips():
    from click.testing import CliRunner
    from bhtcli.cli.main import cli
    runner = CliRunner()
    helps = {name: runner.invoke(cli, [name, "--help"], terminal_width=200).output
             for name in ("rank", "bound", "shift", "design")}
    assert "optional with design --candidates and rank" not in helps["rank"] + helps["bound"]
    assert "search" not in [line for line in helps["rank"].splitlines() if "--dtype" in line][0]
    assert "--data FILE.npz" in helps["shift"]
    top = runner.invoke(cli, ["--help"], terminal_width=200).output
    assert "bht COMMAND --help" in top and "_BHT_COMPLETE=bash_source" in top


def test_subspace_error_says_transposed_once(capsys, files, tmp_path):
    np.save(tmp_path / "V.npy", np.ones((2, 3)))
    code, out, err = run(capsys, "design", files["A.csv"], files["B.npy"], "--subspace", str(tmp_path / "V.npy"), "-E", "1")
    assert code == 2 and err.count("transposed") == 1 and err.endswith("it looks transposed (2 x 3): save V.T\n")


def test_docs_slips():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    read = lambda name: open(os.path.join(root, name), encoding="utf-8").read()
    assert "bht[parquet]" not in read("README.md") + read("docs/sweep.md")
    assert "`A.json`" in read("docs/inputs.md")
    assert "decide, simulate, rank, shift" in read("docs/api.md")
    assert "`best x23` means" in " ".join(read("docs/search.md").split())


# ---------------------------------------------------------------- 7. sweep
def test_sweep_interrupted_before_any_task_does_not_claim_a_file(capsys, monkeypatch, tmp_path):
    (tmp_path / "m.csv").write_text("a,b,energy\nA.npy,B.npy,1\n")
    out = tmp_path / "r.jsonl"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("bhtcli.api.sweep", interrupted)
    code, stdout, err = run(capsys, "sweep", str(tmp_path / "m.csv"), "--out", str(out))
    assert (code, stdout, err) == (130, "", "Error: interrupted before any task finished; nothing was saved\n")
    out.write_text('{"task": "0123456789abcdef"}\n')     # an earlier run's rows are there
    code, stdout, err = run(capsys, "sweep", str(tmp_path / "m.csv"), "--out", str(out))
    assert code == 130 and err == (f"Error: interrupted; finished tasks are saved in {out}: rerun the "
                                   "same command to run the rest\n")


# ---------------------------------------------------------------- 11. | head under PYTHONUNBUFFERED
FAKE_RANK = """
import sys
import bhtcli.commands.candidates as c
from bhtcli.results import RankResult
top = [{"index": i, "name": None, "hellinger_squared": 0.1, "bhattacharyya_distance": 0.1,
        "predicted": 10, "lower": 5, "upper": 20, "query_norm": 1.0} for i in range(3000)]
c.rank = lambda *a, **k: RankResult("softmax", 6, 3, None, None, 0.05, 5000, 5000, 0, None, top,
                                    None, "float64", None, 0.1)
from bhtcli.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", ["", "1"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_reader_that_leaves_early_gets_141_even_unbuffered(files, unbuffered, as_json):
    """A rank table of 3,000 rows (150 kB, more than a pipe holds) read by `head -1`: one write
    that the reader cuts short. The scoring is replaced by a ready result (3,000 exact counts
    take minutes)."""
    import subprocess
    import sys
    env = dict(os.environ, PYTHONUNBUFFERED=unbuffered)
    args = [sys.executable, "-c", FAKE_RANK, "rank", files["A.csv"], files["B.npy"], files["H.csv"]]
    child = subprocess.Popen(args + (["--json"] if as_json else []), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    first = child.stdout.read(100)
    child.stdout.close()              # what head -1 does after its first line
    err = child.stderr.read()
    assert child.wait(timeout=60) == 141 and err == b"" and first


# ---------------------------------------------------------------- 5. progress
class Recorder:
    def __init__(self):
        self.calls, self.ticks = [], []

    def __call__(self, message, step=None, total=None):
        self.calls.append((message, step, total))

    def tick(self, iterations, value, passes=None):
        self.ticks.append((iterations, value))


def test_search_progress_never_goes_down_and_ends_at_the_result():
    from bhtcli import api
    rng = np.random.default_rng(11)
    A = rng.standard_normal((40, 6))
    B = A + 0.4 * rng.standard_normal((40, 6))
    rec = Recorder()
    result = api.design(A, B, 2.0, progress=rec, search_space="full")
    iterations = [t[0] for t in rec.ticks]
    values = [t[1] for t in rec.ticks]
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert all(b >= a for a, b in zip(iterations, iterations[1:]))
    assert values[-1] == pytest.approx(result.bhattacharyya_distance, rel=1e-12)


def test_the_progress_line_counts_iterations_and_keeps_a_better_value():
    from bhtcli.cli.progress import Reporter
    r = Reporter()
    with r:
        r.enabled = True
        r.tick(3, 0.01)
        r.tick(4, 0.02)                    # within 0.1 s, but better: shown
        status = r._progress.tasks[0].fields["status"]
    assert status.startswith("iteration 4  best H^2 0.0198") and "round" not in status


def test_rank_reports_rows_done_of_the_total():
    f_rng = np.random.default_rng(4)
    A = f_rng.standard_normal((30, 3))
    B = A + 0.3 * f_rng.standard_normal((30, 3))
    H = f_rng.standard_normal((500, 3))
    from bhtcli import api
    rec = Recorder()
    api.rank(A, B, H, top=3, block_rows=7, progress=rec)
    counted = [c for c in rec.calls if c[0] == "scoring candidates"]
    assert counted and counted[-1][1:] == (500, 500)
    assert all(total == 500 and 0 < done <= 500 for _, done, total in counted)


def test_a_new_round_of_starts_continues_the_counts():
    from bhtcli.search.ladder import _tick_after
    rec = Recorder()
    second_round = _tick_after(rec.tick, 120, 0.5)     # round 1 took 120 iterations, best D 0.5
    second_round(3, 0.2)
    second_round(9, 0.7)
    assert rec.ticks == [(123, 0.5), (129, 0.7)]


def test_quantize_never_replaces_its_source(tmp_path, capsys):
    # its help says "never over SRC": --force does not exist for quantize (it used to write over SRC)
    src = tmp_path / "A.npy"
    A = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    np.save(src, A)
    code, out, err = run(capsys, "quantize", str(src), "--to", "q8_0", "--out", str(src))
    assert (code, out) == (2, "") and err == (f"Error: --out {src} is also an input of this command; writing it "
                                              "would replace the input: choose another name\n")
    code, out, err = run(capsys, "quantize", str(src), "--to", "q8_0", "--out", str(src), "--force", "-q")
    assert (code, out) == (2, "") and err.startswith("Error: No such option '--force'")
    np.testing.assert_array_equal(np.load(src), A)              # the model is untouched
    assert os.listdir(tmp_path) == ["A.npy"]


def test_the_sketched_search_reports_its_phase_out_of_a_known_count():
    from bhtcli.models.softmax import SoftmaxPair
    from bhtcli.search import maximize
    rng = np.random.default_rng(3)
    A = rng.standard_normal((300, 24))
    B = A + 0.2 * rng.standard_normal((300, 24))
    said = []
    maximize(SoftmaxPair(A, B), 2.0, "sketch", progress=said.append)
    phased = [m for m in said if m.startswith("[phase ")]
    assert phased and phased[0].startswith("[phase 1 of at most ")
    steps = [int(m.split()[1]) for m in phased]
    totals = {int(m.split("]")[0].split()[-1]) for m in phased}
    assert steps == sorted(steps) and len(totals) == 1 and max(steps) <= totals.pop()
