"""The everyday conventions of the CLI (docs/cli.md): version, completion, signals, I/O faults,
--out formats, pipes, colour, --json errors, exit statuses, progress.

Subprocess tests use real pipes, /dev/full, a SIGINT or SIGTERM sent to a child and pseudo-terminals
(the pty module) where the behaviour depends on a terminal.
"""
import importlib
import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from cli_run import run
from bhtcli.io.load import load_matrix, load_query
from bhtcli.io.write import atomic_file

BHT = os.path.join(os.path.dirname(sys.executable), "bht")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def bht(*args, env=None, **kwargs):
    return subprocess.run([BHT, *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), **kwargs)


# ------------------------------------------------------------------ -V and completion
def test_short_version_flag():
    p = bht("-V")
    assert p.returncode == 0 and p.stdout.strip() == bht("--version").stdout.strip()
    assert "bht" in p.stdout and p.stderr == ""


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F"), ("zsh", "#compdef bht"),
                                           ("fish", "complete --no-files --command bht")])
def test_completion_script_not_help(shell, marker):
    p = subprocess.run([BHT], capture_output=True, text=True,
                       env=dict(os.environ, _BHT_COMPLETE=f"{shell}_source"))
    assert p.returncode == 0 and marker in p.stdout and "Usage:" not in p.stdout


def test_completion_completes_commands_and_options():
    env = dict(os.environ, _BHT_COMPLETE="bash_complete", COMP_WORDS="bht des", COMP_CWORD="1")
    p = subprocess.run([BHT], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "design" in p.stdout
    env.update(COMP_WORDS="bht design --ene", COMP_CWORD="2")
    assert "--energy" in subprocess.run([BHT], capture_output=True, text=True, env=env).stdout


# ------------------------------------------------------------------ Ctrl-C
def _pty_child(args, stdout=subprocess.DEVNULL, env=None):
    """A child whose stderr is a pseudo-terminal; returns (process, master fd)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BHT, *args], stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave,
                         env=dict(os.environ, TERM="xterm-256color", COLUMNS="120", **(env or {})),
                         cwd=ROOT)
    os.close(slave)
    return p, master


def _read_until(master, p, needle: bytes, timeout: float) -> bytes:
    data, end = b"", time.monotonic() + timeout
    while needle not in data and time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        elif p.poll() is not None:
            break
    return data


def _drain(master, p, timeout=60) -> bytes:
    data, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout)
    os.close(master)
    return data


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory):
    """Models large enough that design with 256 starts runs for many seconds."""
    folder = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((20000, 64))
    np.save(folder / "A.npy", A)
    np.save(folder / "B.npy", A + 0.1 * rng.standard_normal(A.shape))
    return str(folder / "A.npy"), str(folder / "B.npy"), folder


@pytest.mark.slow
@pytest.mark.parametrize("command, wait_for", [
    (["design", "{A}", "{B}", "-E", "1", "--starts", "256", "--out", "{dir}/x.npy"], b"climbing"),
    (["simulate", "{A}", "{B}", "-E", "1", "--plot", "{dir}/p.png"], b"designing"),
])
def test_sigint_exits_130_with_one_line_and_no_file(big_pair, command, wait_for):
    a, b, folder = big_pair
    args = [c.format(A=a, B=b, dir=folder) for c in command]
    before = set(os.listdir(folder))
    p, master = _pty_child(args)
    seen = _read_until(master, p, wait_for, timeout=120)
    assert wait_for in seen, seen
    p.send_signal(signal.SIGINT)
    err = seen + _drain(master, p)
    assert p.returncode == 130
    assert err.count(b"Error:") == 1 and b"Error: interrupted" in err and b"Traceback" not in err
    assert b"Aborted" not in err
    assert set(os.listdir(folder)) == before          # no output, no temporary file


@pytest.mark.slow
def test_sigterm_exits_143_with_one_line_and_no_file(big_pair):
    """SIGTERM (a service manager, `timeout`, `kill`) ends as Ctrl-C does, as 128 + 15."""
    a, b, folder = big_pair
    before = set(os.listdir(folder))
    p, master = _pty_child(["design", a, b, "-E", "1", "--starts", "256", "--out", f"{folder}/x.npy"])
    seen = _read_until(master, p, b"climbing", timeout=120)
    assert b"climbing" in seen, seen
    p.send_signal(signal.SIGTERM)
    err = seen + _drain(master, p)
    assert p.returncode == 143
    assert err.count(b"Error:") == 1 and b"Error: terminated" in err and b"Traceback" not in err
    assert set(os.listdir(folder)) == before          # no output, no temporary file


def test_keyboard_interrupt_is_exactly_one_line(capsys, monkeypatch, pair_files):
    a, b, _, _ = pair_files

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("bhtcli.api.design", interrupted)
    code, out, err = run(capsys, "design", a, b, "-E", "1")
    assert (code, out, err) == (130, "", "Error: interrupted\n")


# ------------------------------------------------------------------ I/O faults and pipes
def test_stdout_on_a_full_disk_is_one_error_line(pair_files):
    a, b, _, _ = pair_files
    with open("/dev/full", "w") as full:
        p = subprocess.run([BHT, "design", a, b, "-E", "1", "--json"], stdout=full,
                           stderr=subprocess.PIPE, text=True)
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: standard output: cannot write it"), p.stderr
    assert "No space left" in lines[0]


@pytest.mark.slow
def test_out_on_a_full_disk_is_one_error_line(pair_files):
    a, b, _, _ = pair_files
    p = bht("design", a, b, "-E", "1", "--out", "/dev/full.npy" if False else "/dev/full")
    # /dev/full has no extension: the format check refuses it first (exit 2) ...
    assert p.returncode == 2 and "unknown extension" in p.stderr
    # ... and a symbolic link named x.npy to it reaches the write
    link = os.path.join(os.path.dirname(a), "full.npy")
    os.symlink("/dev/full", link)
    p = bht("design", a, b, "-E", "1", "--out", link)
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"Error: --out {link}: cannot write it (No space left on device)")


@pytest.mark.slow
def test_closed_pipe_is_quiet(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.load(os.path.join(EXAMPLES, "x.npy")))
    p = subprocess.Popen([BHT, "sample", os.path.join(EXAMPLES, "A.npy"), "-x", str(x), "-n", "2000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()                           # what `| head -1` does
    err = p.stderr.read()
    p.wait(120)
    assert first.strip().isdigit()
    assert err == b"" and p.returncode == 141


def test_closed_pipe_through_a_shell_head(pair_files):
    a, b, _, _ = pair_files
    p = subprocess.run(["bash", "-c", f"set -o pipefail; '{BHT}' design '{a}' '{b}' -E 1 | head -1; "
                        "echo status=${PIPESTATUS[0]}"], capture_output=True, text=True)
    assert p.stdout.startswith("bht design") and "status=" in p.stdout
    assert "Error" not in p.stderr and "Traceback" not in p.stderr


# ------------------------------------------------------------------ --out
@pytest.mark.parametrize("suffix", [".npy", ".csv", ".txt", ".json"])
def test_out_format_by_extension_reads_back(capsys, pair_files, tmp_path, suffix):
    a, b, _, _ = pair_files
    out = tmp_path / f"x{suffix}"
    code, stdout, _ = run(capsys, "design", a, b, "-E", "1", "--out", str(out), "--json")
    assert code == 0
    query = json.loads(stdout)["query"]
    raw = out.read_bytes()
    if suffix == ".npy":
        assert raw.startswith(b"\x93NUMPY")
    elif suffix == ".json":
        assert json.loads(raw) == query
    else:
        lines = raw.decode().splitlines()
        assert len(lines) == 3 and [float(v) for v in lines] == query
    assert load_query(str(out), 3).tolist() == query          # exact round trip
    code, stdout, _ = run(capsys, "sample", a, "-x", str(out), "-n", "3")
    assert code == 0 and len(stdout.split()) == 3


def test_out_unknown_extension_is_exit_2_before_work(capsys, pair_files, tmp_path):
    a, b, _, _ = pair_files
    code, out, err = run(capsys, "design", a, b, "-E", "1", "--out", str(tmp_path / "x.xlsx"))
    assert code == 2 and out == "" and "unknown extension '.xlsx'" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.npy", "B.npy"]


def test_out_refuses_to_overwrite_an_input(capsys, pair_files, tmp_path):
    a, b, A, _ = pair_files
    code, _, err = run(capsys, "design", a, b, "-E", "1", "--out", a)
    assert code == 2 and "is also an input" in err and "--force" in err
    np.testing.assert_array_equal(np.load(a), A)
    code, _, _ = run(capsys, "design", a, b, "-E", "1", "--out", a, "--force")
    assert code == 0 and np.load(a).shape == (3,)


def test_shift_out_refuses_its_input(capsys, tmp_path):
    a = os.path.join(EXAMPLES, "shift_A.npy")
    copy = tmp_path / "A.npy"
    np.save(copy, np.load(a))
    code, _, err = run(capsys, "shift", str(copy), "--data", os.path.join(EXAMPLES, "shift_data.npz"),
                       "--lr", "1", "--out", str(copy))
    assert code == 2 and "is also an input" in err


@pytest.mark.slow
def test_files_follow_the_umask(capsys, pair_files, tmp_path):
    a, b, _, _ = pair_files
    old = os.umask(0o022)
    try:
        code, _, _ = run(capsys, "design", a, b, "-E", "1", "--out", str(tmp_path / "x.npy"))
        assert code == 0
        code, _, _ = run(capsys, "simulate", a, b, "-E", "1", "--trials", "200", "--policy", "fixed",
                         "--plot", str(tmp_path / "p.png"))
        assert code == 0
        code, _, _ = run(capsys, "shift", os.path.join(EXAMPLES, "shift_A.npy"), "--data",
                         os.path.join(EXAMPLES, "shift_data.npz"), "--lr", "1", "--out", str(tmp_path / "B.csv"))
        assert code == 0
        for name in ("x.npy", "p.png", "B.csv"):
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o644, name
        os.umask(0o027)
        with atomic_file(str(tmp_path / "y.txt")) as fh:
            fh.write("1\n")
        assert stat.S_IMODE(os.stat(tmp_path / "y.txt").st_mode) == 0o640
    finally:
        os.umask(old)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bht-")] == []


# ------------------------------------------------------------------ reading inputs
@pytest.mark.parametrize("text", [
    "a,b,c\n1,2,3\n4,5,6\n",
    "a;b;c\n1;2;3\n4;5;6\n",
    "a\tb\tc\n1\t2\t3\n4\t5\t6\n",
    "1;2;3\n4;5;6\n",
    "# comment\nx y z\n1 2 3\n4 5 6\n",
])
def test_csv_header_and_delimiters_sniffed(tmp_path, text):
    p = tmp_path / "m.csv"
    p.write_text(text)
    np.testing.assert_array_equal(load_matrix(str(p)), [[1, 2, 3], [4, 5, 6]])


def test_a_non_numeric_row_after_the_first_is_still_an_error(tmp_path):
    from bhtcli.errors import InputError
    p = tmp_path / "m.csv"
    p.write_text("1,2,3\n4,five,6\n")
    with pytest.raises(InputError, match="line 2: 'five' is not a number"):
        load_matrix(str(p))


@pytest.mark.parametrize("kind", ["npy", "npz", "safetensors", "csv", "json"])
def test_format_sniffed_from_bytes_without_extension(tmp_path, kind):
    from safetensors.numpy import save_file
    M = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    p = tmp_path / "noext"
    if kind == "npy":
        with open(p, "wb") as fh:
            np.save(fh, M)
    elif kind == "npz":
        with open(p, "wb") as fh:
            np.savez(fh, M=M)
    elif kind == "safetensors":
        save_file({"w": M}, str(p))
    elif kind == "csv":
        p.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in M))
    else:
        p.write_text(json.dumps(M.tolist()))
    np.testing.assert_array_equal(load_matrix(str(p)), M)


def test_process_substitution(tmp_path):
    x = os.path.join(EXAMPLES, "x.npy")
    a = os.path.join(EXAMPLES, "A.npy")
    p = subprocess.run(["bash", "-c", f"'{BHT}' sample '{a}' -x <(cat '{x}') -n 5"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.split()) == 5


def test_sniffed_pickle_is_refused(tmp_path):
    import pickle
    from bhtcli.errors import InputError
    p = tmp_path / "noext"
    p.write_bytes(pickle.dumps([[1.0]], protocol=4))
    with pytest.raises(InputError, match="pickle"):
        load_matrix(str(p))


# ------------------------------------------------------------------ plain output, colour
@pytest.mark.slow
def test_tables_are_plain_lines_when_stdout_is_not_a_terminal():
    p = bht("design", "examples/A.npy", "examples/B.npy", "-E", "1", env={"COLUMNS": "50"}, cwd=ROOT)
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert "\x1b" not in p.stdout
    assert all(line == line.rstrip() for line in lines)
    assert "(any strategy, adaptive too)" in p.stdout
    query = [line for line in lines if line.startswith("query x")]
    assert len(query) == 1 and query[0].endswith("]")
    assert max(len(line) for line in lines) > 50              # not wrapped at COLUMNS


def _stdout_on_a_pty(args, env):
    master, slave = pty.openpty()
    p = subprocess.Popen([BHT, *args], stdout=slave, stderr=subprocess.DEVNULL, cwd=ROOT,
                         env=dict({k: v for k, v in os.environ.items() if k != "NO_COLOR"},
                                  TERM="xterm-256color", COLUMNS="120", **env))
    os.close(slave)
    return _drain(master, p)


@pytest.mark.slow
def test_no_color_means_no_escape_codes_on_a_terminal():
    args = ["design", "examples/A.npy", "examples/B.npy", "-E", "1"]
    styled = _stdout_on_a_pty(args, {})
    assert b"\x1b[" in styled                                  # the test can fail
    plain = _stdout_on_a_pty(args, {"NO_COLOR": "1"})
    assert b"Hellinger" in plain and b"\x1b" not in plain


# ------------------------------------------------------------------ --json errors
@pytest.mark.parametrize("args, status", [
    (["design", "nope.npy", "{b}", "-E", "1"], 2),
    (["design", "{a}", "{b}"], 2),                      # a usage error: missing --energy
    (["bound", "{a}", "{b}", "-E", "0"], 2),
])
def test_json_errors_are_one_line_and_one_object(capsys, pair_files, args, status):
    a, b, _, _ = pair_files
    code, out, err = run(capsys, *[x.format(a=a, b=b) for x in args], "--json")
    assert code == status
    assert err.count("\n") == 1 and err.startswith("Error: ")
    obj = json.loads(out)
    assert obj == {"error": err[len("Error: "):].rstrip("\n"), "exit_status": status}


def test_sweep_failure_keeps_its_result_as_the_only_json(capsys, tmp_path):
    (tmp_path / "A.npy").write_bytes(b"")
    m = tmp_path / "m.csv"
    m.write_text("a,b,energy\nA.npy,A.npy,1\n")           # an empty file: fails at run time

    def engine(tasks, on_done, **kwargs):
        from bhtcli.sweep.task import run_task
        for t in tasks:
            on_done(t, run_task(t, kwargs["design"]))
        return {"engine": "test", "workers": 1, "startup_seconds": 0.0, "run_seconds": 0.0}
    driver = importlib.import_module("bhtcli.sweep.driver")   # bhtcli.sweep is the function
    original = driver.sweep
    try:
        driver.sweep = lambda *a, **k: original(*a, engine=engine, **k)
        code, out, err = run(capsys, "sweep", str(m), "--out", str(tmp_path / "r.jsonl"), "--json")
    finally:
        driver.sweep = original
    assert code == 1
    assert json.loads(out)["failed"] == 1                 # one object: the sweep's result
    assert err.strip().splitlines()[-1].startswith("Error: 1 of 1 tasks failed")


# ------------------------------------------------------------------ one exit status table
def test_indistinguishable_models_exit_0_for_every_command(capsys, pair_files, tmp_path):
    a, _, A, _ = pair_files
    same = tmp_path / "S.npy"
    np.save(same, A + 2.0)
    x = tmp_path / "x.npy"
    np.save(x, np.ones(3) / np.sqrt(3))
    answers = tmp_path / "answers.txt"
    answers.write_text("0\n1\n")
    for args in (["design", a, str(same), "-E", "1"], ["bound", a, str(same), "-E", "1"],
                 ["simulate", a, str(same), "-E", "1", "--trials", "200"],
                 ["decide", a, str(same), "-x", str(x), str(answers)]):
        code, out, err = run(capsys, *args, "--json")
        r = json.loads(out)
        assert code == 0, (args, err)
        assert r.get("distinguishable", r.get("decision") == "undecided") in (False, True)
    code, out, _ = run(capsys, "simulate", a, str(same), "-E", "1", "--trials", "200", "--json")
    r = json.loads(out)
    assert r["distinguishable"] is False and r["fixed"] is None and "nothing is simulated" in r["note"]
    code, out, _ = run(capsys, "decide", a, str(same), "-x", str(x), str(answers), "--json")
    assert json.loads(out)["decision"] == "undecided" and code == 0


def test_exit_status_table_in_the_help_epilog():
    from bhtcli.cli.main import EXIT_STATUSES
    p = bht("--help")
    for code, short, _ in EXIT_STATUSES:
        assert f"{code:<4} {short}" in p.stdout


# ------------------------------------------------------------------ progress
@pytest.mark.slow
def test_progress_on_a_terminal_stderr_and_quiet(big_pair):
    a, b, _ = big_pair
    args = ["design", a, b, "-E", "1", "--starts", "8"]
    p, master = _pty_child(args)
    err = _drain(master, p, timeout=300)
    assert p.returncode == 0
    assert b"best H^2" in err and b"round" in err and b"passes" in err
    p, master = _pty_child(args + ["--quiet"])
    assert _drain(master, p, timeout=300) == b"" and p.returncode == 0


# ------------------------------------------------------------------ smaller items
@pytest.mark.slow
def test_ccp_report_is_consistent_and_quiet(capsys, tmp_path):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((6, 3))
    B = A + 0.5 * rng.standard_normal((6, 3))
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    code, out, err = run(capsys, "design", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"), "-E", "1",
                         "--method", "ccp", "--starts", "6", "--json")
    assert code == 0 and err == ""                       # no cvxpy UserWarning
    v = json.loads(out)["solver"]
    assert v["kkt_residual"] < 1e-3
    assert v["local_maxima"] < 6
    assert v["passes"] > v["iterations"]                 # every convex solve is a pass or more
    code, out, _ = run(capsys, "design", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"), "-E", "1",
                       "--method", "ccp", "--starts", "6")
    assert "convex solves" in out


@pytest.mark.slow
def test_mean_sequential_bound_printed_only_when_at_least_one(capsys):
    a, b = os.path.join(EXAMPLES, "A.npy"), os.path.join(EXAMPLES, "B.npy")
    for command in ("design", "bound"):
        code, out, _ = run(capsys, command, a, b, "-E", "100", "--json")
        r = json.loads(out)
        assert (r.get("certificate") or r)["mean_samples_lower_sequential"] == 0   # below one query
        code, out, _ = run(capsys, command, a, b, "-E", "100")
        assert code == 0 and "mean sequential queries" not in out                 # says nothing
        code, out, _ = run(capsys, command, a, b, "-E", "1")
        line = next(line for line in out.splitlines() if line.startswith("mean sequential queries"))
        assert int(line.split(">=")[1].split()[0].replace(",", "")) >= 1


@pytest.mark.slow
def test_poly_kink_maximum_warns():
    from bhtcli import design
    rng = np.random.default_rng(103)
    A = rng.normal(size=(6, 2)) * 1.5
    r = design(A, A, 2.0, link_a="poly:2", link_b="taylor:4", bias_a=rng.normal(size=6), starts=16, seed=3)
    assert any("KKT residual" in w for w in r.warnings)


def test_shift_warns_when_the_loss_rises(capsys, tmp_path):
    code, out, err = run(capsys, "shift", os.path.join(EXAMPLES, "shift_A.npy"), "--data",
                         os.path.join(EXAMPLES, "shift_data.npz"), "--lr", "1e6",
                         "--out", str(tmp_path / "B.npy"))
    r_code, r_out, _ = run(capsys, "shift", os.path.join(EXAMPLES, "shift_A.npy"), "--data",
                           os.path.join(EXAMPLES, "shift_data.npz"), "--lr", "1e6",
                           "--out", str(tmp_path / "B.npy"), "--json")
    r = json.loads(r_out)
    assert r["loss_after"] > r["loss_before"]
    assert code == 0 and err.startswith("Warning: the loss rose")
    code, _, err = run(capsys, "shift", os.path.join(EXAMPLES, "shift_A.npy"), "--data",
                       os.path.join(EXAMPLES, "shift_data.npz"), "--lr", "1", "--out", str(tmp_path / "B.npy"))
    assert code == 0 and err == ""


def test_leverage_query_length_message_says_rows(capsys, tmp_path):
    s = tmp_path / "s.npy"
    np.save(s, np.ones(3))
    code, _, err = run(capsys, "sample", os.path.join(EXAMPLES, "leverage_A.npy"), "--model", "leverage",
                       "-x", str(s), "-n", "2")
    assert code == 2 and "one per row of A" in err and "column" not in err


def test_simulate_leverage_header_shows_the_box(capsys):
    la, lb = os.path.join(EXAMPLES, "leverage_A.npy"), os.path.join(EXAMPLES, "leverage_B.npy")
    code, out, err = run(capsys, "simulate", la, lb, "--model", "leverage", "-E", "4", "--floor", "1",
                         "--trials", "200", "--policy", "sprt")
    assert code == 0, err
    assert "box 1 <= s_i^2 <= 4" in out and "E=4" not in out
    assert "x repeated" not in out and "s repeated" in out


@pytest.mark.slow
def test_help_lists_formats_columns_and_plurals(capsys, tmp_path):
    assert ".safetensors" in bht("design", "-h").stdout
    sweep_help = " ".join(bht("sweep", "-h").stdout.split())
    for column in ("link_a", "link_b", "bias_a", "bias_b", "dtype"):
        assert column in sweep_help
    from bhtcli.cli.render import _plural
    assert _plural(1, "answer") == "1 answer" and _plural(2, "worker") == "2 workers"


def test_sweep_export_refuses_the_manifest(capsys, tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("a,b,energy\nA.npy,B.npy,1\n")
    code, _, err = run(capsys, "sweep", str(m), "--out", str(tmp_path / "r.jsonl"), "--export", str(m))
    assert code == 2 and "--export" in err and "is also an input" in err
    assert m.read_text() == "a,b,energy\nA.npy,B.npy,1\n"
