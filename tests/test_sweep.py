"""bht sweep: manifests, the journal, resuming, and results equal to running design task by task.

Most tests send their tasks to one local Dask cluster shared by the module (--scheduler);
the subprocess tests run `bht sweep` as a user would, with its own local cluster, and kill it.
"""
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bhtcli.api import design as api_design
from bhtcli.api import sweep
from bhtcli.api import bound
from cli_run import run
from bhtcli.api import design
from bhtcli.errors import InputError
from bhtcli.sweep.journal import Journal
from bhtcli.sweep.manifest import read_manifest
from bhtcli.sweep.task import MatrixCache, run_task

BHT = os.path.join(os.path.dirname(sys.executable), "bht")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address


def write_zoo(folder, checkpoints=4, n=12, d=3):
    """Checkpoints of a softmax model (a random walk), a leverage pair and a badly shaped matrix."""
    rng = np.random.default_rng(7)
    W = rng.standard_normal((n, d))
    for i in range(checkpoints):
        np.save(folder / f"m{i}.npy", W)
        W = W + 0.3 * rng.standard_normal((n, d))
    for name in ("a", "b"):                           # the README's leverage pair (a quick design)
        np.save(folder / f"lev_{name}.npy", np.load(EXAMPLES / f"leverage_{name.upper()}.npy"))
    np.save(folder / "short.npy", np.ones((5, d)))


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def zoo(tmp_path):
    (tmp_path / "models").mkdir()
    write_zoo(tmp_path / "models")
    rows = [(f"m{i}-m{j}@{e}", f"models/m{i}.npy", f"models/m{j}.npy", e, "", "", "", "", "")
            for i in range(3) for j in range(i + 1, 3) for e in (0.5, 1.5)]
    rows[3] = rows[3][:4] + ("", "", 3, 8, "")                   # a seed and fewer starts
    rows += [("lev", "models/lev_a.npy", "models/lev_b.npy", 4, "leverage", 1, "", "", ""),
             ("alpha", "models/m0.npy", "models/m1.npy", 1, "", "", "", "", 0.01)]
    header = ["name", "a", "b", "energy", "model", "floor", "seed", "starts", "target_error"]
    manifest = write_csv(tmp_path / "pairs.csv", header, rows)
    return tmp_path, manifest


def read_rows(path):
    with open(path) as fh:
        return [json.loads(line) for line in fh]


def direct(folder, row):
    """design and bound called task by task, as a user would without a sweep."""
    A, B = str(folder / row["a"]), str(folder / row["b"])
    if row["model"] == "leverage":
        kw = dict(error=row["target_error"], seed=row["seed"])
        return (design(A, B, row["energy"], model="leverage", floor=row["floor"], starts=row["starts"], **kw),
                bound(A, B, row["energy"], model="leverage", floor=row["floor"], error=row["target_error"]))
    return (design(A, B, row["energy"], error=row["target_error"], starts=row["starts"], seed=row["seed"]),
            bound(A, B, row["energy"], error=row["target_error"]))


def assert_rows_match_design(folder, rows):
    for row in rows:
        d, b = direct(folder, row)
        assert row["status"] == "ok" and row["failure"] is None
        assert row["hellinger_squared"] == pytest.approx(d.hellinger_squared, rel=1e-9, abs=0)
        for col, key in (("samples.lower", "lower"), ("samples.predicted", "predicted"), ("samples.upper", "upper")):
            assert row[col] == d.samples[key]
        assert row["query_norm"] == pytest.approx(d.query_norm, rel=1e-9)
        assert (row["n"], row["d"], row["distinguishable"]) == (d.n, d.d, d.distinguishable)
        # the certificate columns are what `bht bound` reports
        assert row["certificate.hellinger_squared_max_bound"] == pytest.approx(b.certificate["hellinger_squared_max_bound"], rel=1e-12)
        assert row["certificate.samples_lower_any_strategy"] == b.certificate["samples_lower_any_strategy"]
        assert row["certificate.mean_samples_lower_sequential"] == b.certificate["mean_samples_lower_sequential"]
        if row["model"] == "softmax":
            assert row["certificate.row_diameter"] == pytest.approx(b.certificate["row_diameter"], rel=1e-12)
            assert row["row_norm_2inf"] == pytest.approx(b.row_norm_2inf, rel=1e-12)
        query = np.load(folder / row["query_file"])     # relative to the results file's folder
        np.testing.assert_allclose(query, d.query, rtol=1e-6, atol=1e-8)


@pytest.mark.slow
def test_sweep_equals_design_task_by_task(capsys, scheduler, zoo):
    folder, manifest = zoo
    out = str(folder / "r.jsonl")
    code, stdout, err = run(capsys, "sweep", manifest, "--out", out, "--scheduler", scheduler, "--json")
    assert code == 0, err
    assert err == ""
    summary = json.loads(stdout)
    assert (summary["tasks"], summary["ok"], summary["failed"], summary["ran"]) == (8, 8, 0, 8)
    rows = read_rows(out)
    assert sorted(r["name"] for r in rows) == sorted(r.split(",")[0] for r in open(manifest).read().split()[1:])
    by_name = {r["name"]: r for r in rows}
    assert by_name["m0-m2@1.5"]["seed"] == 3 and by_name["m0-m2@1.5"]["solver.starts"] == 8
    assert by_name["m0-m1@0.5"]["starts"] is None and by_name["lev"]["starts"] is None
    assert by_name["lev"]["solver.starts"] == 6 and by_name["lev"]["certificate.tv_max_bound"] > 0
    assert by_name["alpha"]["target_error"] == 0.01 and by_name["m0-m1@0.5"]["target_error"] == 0.05
    assert all(r["bht_version"] and r["query_file"].startswith("r.jsonl.queries/") for r in rows)
    assert_rows_match_design(folder, rows)


@pytest.mark.slow
def test_sweep_api_equals_the_cli(capsys, scheduler, zoo):
    """bhtcli.sweep returns what `bht sweep --json` prints (paths and timings aside), and the rows."""
    import bhtcli
    folder, manifest = zoo
    by_api = bhtcli.sweep(manifest, str(folder / "api.jsonl"), scheduler=scheduler).to_dict()
    code, stdout, err = run(capsys, "sweep", manifest, "--out", str(folder / "cli.jsonl"),
                            "--scheduler", scheduler, "--json")
    assert code == 0, err
    by_cli = json.loads(stdout)
    varying = {"results", "startup_seconds", "run_seconds", "seconds", "tasks_per_second"}
    assert {k: v for k, v in by_api.items() if k not in varying} == \
        {k: v for k, v in by_cli.items() if k not in varying}
    drop = {"seconds", "query_file"}
    rows = lambda name: sorted(({k: v for k, v in r.items() if k not in drop}
                                for r in read_rows(str(folder / name))), key=lambda r: r["task"])
    assert rows("api.jsonl") == rows("cli.jsonl")


@pytest.mark.slow
def test_links_biases_and_dtype_columns(capsys, scheduler, tmp_path):
    write_zoo(tmp_path)
    np.save(tmp_path / "bias.npy", np.linspace(-1, 1, 12))
    header = ["name", "a", "b", "energy", "link_a", "link_b", "bias_a", "dtype", "model", "floor"]
    rows = [("taylor", "m0.npy", "m0.npy", 0.5, "exp", "taylor:4", "", "", "", ""),
            ("bias", "m0.npy", "m1.npy", 1, "", "", "bias.npy", "float32", "", ""),
            ("poly", "m0.npy", "m1.npy", 1, "poly:2", "poly:2", "", "", "", "")]
    bad = [("bad link", "m0.npy", "m1.npy", 1, "taylor:5", "", "", "", "", ""),
           ("lev link", "lev_a.npy", "lev_b.npy", 4, "", "taylor:4", "", "", "leverage", 1)]
    out = tmp_path / "r.jsonl"
    code, stdout, err = run(capsys, "sweep", write_csv(tmp_path / "bad.csv", header, rows + bad),
                            "--out", str(out), "--scheduler", scheduler)
    assert code == 2 and "line 5: link_a" in err and "K must be even" in err
    assert "line 6: " in err and "apply to softmax models" in err
    manifest = write_csv(tmp_path / "m.csv", header, rows)
    code, stdout, err = run(capsys, "sweep", manifest, "--out", str(out), "--scheduler", scheduler, "--json")
    assert code == 0 and json.loads(stdout)["failed"] == 0
    got = {r["name"]: r for r in read_rows(out)}
    calls = {"taylor": dict(link_b="taylor:4"), "bias": dict(bias_a=str(tmp_path / "bias.npy"), dtype="float32"),
             "poly": dict(link_a="poly:2", link_b="poly:2")}
    for name, kw in calls.items():
        row = got[name]
        d = design(str(tmp_path / row["a"]), str(tmp_path / row["b"]), row["energy"], **kw)
        assert row["status"] == "ok" and row["hellinger_squared"] == pytest.approx(d.hellinger_squared, rel=1e-9)
        assert row["samples.predicted"] == d.samples["predicted"]
    assert (got["taylor"]["link_a"], got["taylor"]["link_b"], got["bias"]["bias_a"]) == ("exp", "taylor:4", "bias.npy")
    # an explicit default is the same task as an omitted one
    tasks = read_manifest(manifest).tasks
    write_csv(tmp_path / "m2.csv", ["a", "b", "energy", "link_b"], [("m0.npy", "m0.npy", 0.5, "taylor:4")])
    assert read_manifest(tmp_path / "m2.csv").tasks[0].key == tasks[0].key


@pytest.mark.slow
def test_rerun_skips_finished_and_torn_line_is_discarded(capsys, scheduler, zoo):
    folder, manifest = zoo
    out = folder / "r.jsonl"
    args = ("sweep", manifest, "--out", str(out), "--scheduler", scheduler, "--json")
    assert run(capsys, *args)[0] == 0
    before = out.read_bytes()
    code, stdout, err = run(capsys, *args)
    assert code == 0 and err == "" and out.read_bytes() == before
    assert json.loads(stdout)["ran"] == 0 and json.loads(stdout)["already_done"] == 8

    lines = before.decode().splitlines(keepends=True)
    out.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])   # killed mid-write
    code, stdout, err = run(capsys, *args)
    assert code == 0
    assert "discarded a torn last line" in err and json.loads(stdout)["ran"] == 1
    rows = read_rows(out)
    assert len(rows) == len({r["task"] for r in rows}) == 8
    old = {json.loads(line)["task"]: json.loads(line) for line in lines}
    for row in rows:
        assert row["hellinger_squared"] == pytest.approx(old[row["task"]]["hellinger_squared"], rel=1e-9)


def test_bad_rows_are_refused_before_anything_starts(capsys, tmp_path):
    """Rows whose cells are wrong (a missing file, a negative energy, ...) stop the sweep before
    the engine starts: exit 2, every bad row listed, no results file."""
    write_zoo(tmp_path)
    rows = [("ok1", "m0.npy", "m1.npy", 1, "", ""), ("missing", "m0.npy", "gone.npy", 1, "", ""),
            ("energy", "m0.npy", "m1.npy", -2, "", ""), ("floor", "m0.npy", "m1.npy", 1, "", 2),
            ("lev-nofloor", "lev_a.npy", "lev_b.npy", 4, "leverage", ""), ("ok2", "m1.npy", "m2.npy", 1, "", ""),
            ("model", "m0.npy", "m1.npy", 1, "gauss", "")]
    manifest = write_csv(tmp_path / "m.csv", ["name", "a", "b", "energy", "model", "floor"], rows)
    out = str(tmp_path / "r.jsonl")

    def engine(*args, **kwargs):
        raise AssertionError("the engine must not start")
    with pytest.raises(InputError) as exc:
        sweep(manifest, out, engine=engine)
    message = str(exc.value)
    assert message.startswith(f"{manifest}: 5 rows of 7 cannot run (line 3: b = gone.npy: no such file")
    for fragment in ("line 4: energy must be a finite number > 0", "line 5: floor applies to model leverage only",
                     "line 6: floor is required: model leverage needs a floor", "line 8: model must be one of softmax, leverage"):
        assert fragment in message
    assert message.endswith("fix or remove them, nothing was started")
    assert not os.path.exists(out) and not os.path.exists(out + ".queries")
    code, stdout, err = run(capsys, "sweep", manifest, "--out", out)
    assert (code, stdout) == (2, "") and err == f"Error: {message}\n"


@pytest.mark.slow
def test_run_time_failures_are_reported_and_the_others_done(capsys, scheduler, tmp_path):
    """What only loading reveals (shapes, NaN) fails that task at run time; the others run."""
    write_zoo(tmp_path)
    np.save(tmp_path / "nan.npy", np.full((12, 3), np.nan))
    rows = [("ok1", "m0.npy", "m1.npy", 1), ("shapes", "m0.npy", "short.npy", 1),
            ("nan", "m0.npy", "nan.npy", 1), ("ok2", "m1.npy", "m2.npy", 1)]
    manifest = write_csv(tmp_path / "m.csv", ["name", "a", "b", "energy"], rows)
    out = str(tmp_path / "r.jsonl")
    code, stdout, err = run(capsys, "sweep", manifest, "--out", out, "--scheduler", scheduler, "--json")
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("Error: 2 of 4 tasks failed")
    summary = json.loads(stdout)
    assert (summary["failed"], summary["ok"], summary["failed_now"]) == (2, 2, 2)
    assert [f["line"] for f in summary["failures"]] == [3, 4]
    got = {r["name"]: r for r in read_rows(out)}
    assert got["ok1"]["status"] == got["ok2"]["status"] == "ok"
    expect = {"shapes": "short.npy has shape (5, 3)", "nan": "contains NaN or Inf"}
    for name, fragment in expect.items():
        assert got[name]["status"] == "failed" and fragment in got[name]["failure"], got[name]["failure"]
        assert got[name]["hellinger_squared"] is None and got[name]["query_file"] is None
    # a rerun does not retry deterministic failures
    code, stdout, _ = run(capsys, "sweep", manifest, "--out", out, "--scheduler", scheduler, "--json")
    assert code == 1 and json.loads(stdout)["ran"] == 0


@pytest.mark.slow
def test_manifest_edits_duplicates_and_export(capsys, scheduler, tmp_path):
    pa = pytest.importorskip("pyarrow.parquet")
    write_zoo(tmp_path)
    header = ["name", "a", "b", "energy"]
    manifest = write_csv(tmp_path / "m.csv", header, [("x", "m0.npy", "m1.npy", 1), ("y", "m1.npy", "m2.npy", 1)])
    out = str(tmp_path / "r.jsonl")
    args = ("sweep", manifest, "--out", out, "--scheduler", scheduler, "--json")
    assert run(capsys, *args)[0] == 0
    # edited: y dropped, z added, x repeated under another name (same task), x's label renamed
    write_csv(tmp_path / "m.csv", header, [("x2", "m0.npy", "m1.npy", 1.0), ("z", "m2.npy", "m3.npy", 1),
                                           ("x3", "./m0.npy", "m1.npy", "1")])
    csv_out, pq_out = str(tmp_path / "e.csv"), str(tmp_path / "e.parquet")
    code, stdout, err = run(capsys, *args, "--export", csv_out)
    s = json.loads(stdout)
    assert code == 0 and (s["tasks"], s["manifest_rows"], s["ran"], s["already_done"], s["stale_rows"]) == (2, 3, 1, 1, 1)
    assert "line 4 repeats the task of line 2" in err and "1 row of tasks no longer in the manifest" in err
    assert len(read_rows(out)) == 3                      # the journal keeps y's row
    import csv
    exported = list(csv.DictReader(open(csv_out)))
    assert [r["name"] for r in exported] == ["x2", "z", "x3"]       # one row per manifest row, in order
    assert exported[0]["task"] == exported[2]["task"] and exported[2]["a"] == "./m0.npy"
    assert run(capsys, *args, "--export", pq_out)[0] == 0
    table = pa.read_table(pq_out).to_pylist()
    assert [r["name"] for r in table] == ["x2", "z", "x3"]
    assert table[1]["hellinger_squared"] == pytest.approx(float(exported[1]["hellinger_squared"]), rel=1e-15)
    assert isinstance(table[1]["samples.upper"], int) and table[1]["distinguishable"] is True


def test_the_former_column_name_error_is_still_read(tmp_path):
    (tmp_path / "models").mkdir()
    write_zoo(tmp_path / "models")
    m = tmp_path / "m.csv"
    m.write_text("a,b,energy,error\nmodels/m0.npy,models/m1.npy,1,0.01\n")
    task = read_manifest(m).tasks[0]
    assert task.values["target_error"] == 0.01 and task.problem is None
    m.write_text("a,b,energy,error,target_error\nmodels/m0.npy,models/m1.npy,1,0.01,0.02\n")
    with pytest.raises(InputError, match="former name"):
        read_manifest(m)


@pytest.mark.slow
def test_jsonl_manifest_and_retry_failed(capsys, scheduler, tmp_path):
    write_zoo(tmp_path)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"a": "m0.npy", "b": "m1.npy", "energy": 1, "label_step": 100}\n\n'
                        '{"a": "m1.npy", "b": "m2.npy", "energy": 0.5, "error": 0.01, "seed": 2}\n')
    out = tmp_path / "r.jsonl"
    args = ("sweep", str(manifest), "--out", str(out), "--scheduler", scheduler, "--json")
    assert run(capsys, *args)[0] == 0
    rows = read_rows(out)
    assert sorted(str(r.get("label_step")) for r in rows) == ["100", "None"]
    # a failure that was not the task's fault (say a worker ran out of memory) is run again on request
    rows[0].update(status="failed", failure="the workers running this task died repeatedly", hellinger_squared=None)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run(capsys, *args)[0] == 1
    code, stdout, err = run(capsys, *args, "--retry-failed")
    assert code == 0 and json.loads(stdout)["ran"] == 1 and "removed 1 row of failed tasks" in err
    rows = read_rows(out)
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert_rows_match_design(tmp_path, [dict(r, query_file=r["query_file"]) for r in rows])


@pytest.mark.parametrize("content,name,extra,message", [
    (None, "m.csv", [], "m.csv: no such file; give a manifest"),
    ("a,b,enrgy\nm0.npy,m1.npy,1\n", "m.csv", [], "unknown column 'enrgy' (did you mean 'energy'?)"),
    ("a,b\nm0.npy,m1.npy\n", "m.csv", [], "no column 'energy'"),
    ("a,b,energy\nm0.npy,m1.npy\n", "m.csv", [], "line 2: 2 cells but the header has 3"),
    ("a,b,energy\n", "m.csv", [], "has no tasks"),
    ('{"a": "m0.npy", "b": "m1.npy", "energy": 1}\n{"a": \n', "m.jsonl", [], "line 2 is not JSON"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.xlsx", [], "a manifest is .csv, .tsv or .jsonl"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.csv", ["--workers", "0"], "--workers must be a whole number >= 1"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.csv", ["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
     "--workers sizes the local cluster"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.csv", ["--scheduler", "nonsense"], "expected an address such as"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.csv", ["--export", "x.xlsx"], "name the file *.csv or *.parquet"),
    ("a,b,energy\nm0.npy,m1.npy,1\n", "m.csv", ["--export", "nofolder/x.csv"], "does not exist"),
])
def test_bad_manifest_is_exit_2_before_any_work(capsys, monkeypatch, tmp_path, content, name, extra, message):
    write_zoo(tmp_path)
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "sweep", str(path), "--out", "r.jsonl", *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("Error: ") and message in err, err
    assert not os.path.exists("r.jsonl") and not os.path.exists("r.jsonl.queries")


def test_parquet_without_pyarrow_is_a_clear_error(capsys, monkeypatch, tmp_path):
    write_zoo(tmp_path)
    manifest = write_csv(tmp_path / "m.csv", ["a", "b", "energy"], [("m0.npy", "m1.npy", 1)])
    monkeypatch.setitem(sys.modules, "pyarrow", None)          # import pyarrow now fails
    code, out, err = run(capsys, "sweep", manifest, "--out", str(tmp_path / "r.jsonl"), "--export",
                         str(tmp_path / "r.parquet"))
    assert code == 2 and "pip install pyarrow" in err and not (tmp_path / "r.jsonl").exists()


def test_results_file_that_is_not_a_journal_is_refused_untouched(capsys, tmp_path):
    write_zoo(tmp_path)
    manifest = write_csv(tmp_path / "m.csv", ["a", "b", "energy"], [("m0.npy", "m1.npy", 1)])
    for content in ("hello", "a,b,energy\nm0.npy,m1.npy,1\n", '{"task": "x"}\nnot json\n'):
        out = tmp_path / "r.txt"
        out.write_text(content)
        code, _, err = run(capsys, "sweep", manifest, "--out", str(out))
        assert code == 2 and "is the right file?" in err and out.read_text() == content
        assert not (tmp_path / "r.txt.queries").exists()
    code, _, err = run(capsys, "sweep", manifest, "--out", manifest)
    assert code == 2 and "is the manifest" in err
    out.write_text('{"task": "abc", "bht_version": "0.0.1"}\n')
    code, _, err = run(capsys, "sweep", manifest, "--out", str(out))
    assert code == 2 and "written by bht 0.0.1" in err


def test_journal_lock_and_torn_recovery(tmp_path):
    path = str(tmp_path / "r.jsonl")
    os.mkdir(path + ".queries")
    with Journal(path, lock_path=path + ".queries") as j:
        j.append({"task": "k1", "value": 1.5})
        with pytest.raises(InputError, match="locked"):
            Journal(path, lock_path=path + ".queries")
    with open(path, "ab") as fh:
        fh.write(b'{"task": "k2", "val')
    with Journal(path) as j:
        assert j.torn and list(j.rows) == ["k1"]
        j.append({"task": "k2", "value": 2.0})
    assert [r["task"] for r in read_rows(path)] == ["k1", "k2"]


def test_task_identity(tmp_path):
    write_zoo(tmp_path)
    write_csv(tmp_path / "m.csv", ["name", "a", "b", "energy", "error", "seed"],
              [("p", "m0.npy", "m1.npy", 1, "", ""), ("q", "./m0.npy", str(tmp_path / "m1.npy"), "1.0", 0.05, 0),
               ("r", "m0.npy", "m1.npy", 1, 0.01, ""), ("s", "m1.npy", "m0.npy", 1, "", "")])
    tasks = read_manifest(tmp_path / "m.csv").tasks
    assert tasks[0].key == tasks[1].key                  # same files, same values, other spelling and label
    assert len({tasks[0].key, tasks[2].key, tasks[3].key}) == 3
    st = os.stat(tmp_path / "m1.npy")
    os.utime(tmp_path / "m1.npy", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert read_manifest(tmp_path / "m.csv").tasks[0].key != tasks[0].key   # the file changed: a new task


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=',"\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'),
                              max_size=8), min_size=6, max_size=6))
def test_odd_cells_become_task_problems_never_crashes(tmp_path, cells):
    write_zoo(tmp_path)
    header = ["a", "b", "energy", "error", "seed", "starts"]
    (tmp_path / "m.csv").write_text(",".join(header) + "\n" + ",".join(cells) + "\n", encoding="utf-8")
    try:
        tasks = read_manifest(tmp_path / "m.csv").tasks
    except InputError:
        return                                           # e.g. a lone '#' makes the row a comment
    for t in tasks:
        if t.problem is None:
            assert t.values["energy"] > 0 and 0 < t.values["target_error"] < 0.5 and t.values["starts"] >= 1
            assert isinstance(t.values["seed"], int) and t.values["seed"] >= 0


def test_matrices_are_loaded_once_per_worker(tmp_path):
    write_zoo(tmp_path)
    write_csv(tmp_path / "m.csv", ["a", "b", "energy"],
              [("m0.npy", "m1.npy", 1), ("m0.npy", "m2.npy", 1), ("m0.npy", "m1.npy", 2)])
    cache = MatrixCache()
    for task in read_manifest(tmp_path / "m.csv").tasks:
        assert run_task(task, api_design, cache)["row"]["status"] == "ok"
    assert cache.loads == 3                              # m0, m1, m2: not 6


def start_sweep(folder, *args):
    return subprocess.Popen([BHT, "sweep", "m.csv", "--out", "r.jsonl", *args], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_rows(path, k, proc, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(path) and open(path, "rb").read().count(b"\n") >= k:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no {k} rows after {timeout} s")


def slow_manifest(folder, tasks=12):
    rng = np.random.default_rng(3)
    W = rng.standard_normal((100, 8))
    for i in range(4):
        np.save(folder / f"c{i}.npy", W + 0.1 * i * rng.standard_normal((100, 8)))
    rows = [(f"c{i}.npy", f"c{j}.npy", e) for i in range(4) for j in range(4) if i != j for e in (0.5, 1.0)]
    return write_csv(folder / "m.csv", ["a", "b", "energy"], rows[:tasks])


@pytest.mark.slow
def test_driver_killed_with_sigkill_resumes_each_task_exactly_once(tmp_path):
    slow_manifest(tmp_path)
    proc = start_sweep(tmp_path, "--workers", "1")
    try:
        wait_rows(tmp_path / "r.jsonl", 3, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)              # the workers stop by themselves; be sure
    except ProcessLookupError:
        pass
    done_before = len(read_rows(tmp_path / "r.jsonl"))
    assert 3 <= done_before < 12
    proc = start_sweep(tmp_path, "--workers", "1", "--json")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["ran"] == 12 - done_before
    rows = read_rows(tmp_path / "r.jsonl")
    assert len(rows) == 12 and len({r["task"] for r in rows}) == 12
    for row in rows[:: 3]:
        d = design(str(tmp_path / row["a"]), str(tmp_path / row["b"]), row["energy"])
        assert row["hellinger_squared"] == pytest.approx(d.hellinger_squared, rel=1e-9)


@pytest.mark.slow
def test_a_killed_worker_task_is_retried(tmp_path):
    psutil = pytest.importorskip("psutil")
    slow_manifest(tmp_path, tasks=8)
    proc = start_sweep(tmp_path, "--workers", "2", "--json")
    try:
        wait_rows(tmp_path / "r.jsonl", 1, proc)
        workers = [p for p in psutil.Process(proc.pid).children()
                   if "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) == 2
        for w in workers:                                # BLAS pinned to one thread in every worker
            env = w.environ()
            assert all(env.get(v) == "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
        workers[0].kill()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert json.loads(out)["ok"] == 8
    rows = read_rows(tmp_path / "r.jsonl")
    assert len(rows) == 8 and len({r["task"] for r in rows}) == 8


@pytest.mark.slow
def test_queries_column_runs_the_smallest_budget_search(tmp_path):
    write_zoo(tmp_path)
    write_csv(tmp_path / "m.csv", ["a", "b", "energy", "queries"],
              [("m0.npy", "m1.npy", 4, 200), ("m0.npy", "m1.npy", 4, 0), ("m0.npy", "m1.npy", 4, "")])
    tasks = read_manifest(tmp_path / "m.csv").tasks
    assert tasks[1].problem and "queries must be a whole number >= 1" in tasks[1].problem
    assert tasks[2].values["queries"] is None and tasks[0].key != tasks[2].key
    row = run_task(tasks[0], api_design, MatrixCache())["row"]
    expected = design(np.load(tmp_path / "m0.npy"), np.load(tmp_path / "m1.npy"), 4.0, queries=200,
                      starts=tasks[0].values["starts"])
    assert row["status"] == "ok", row["failure"]
    assert row["energy_found"] == expected.energy <= 4.0
    assert row["samples.predicted"] == expected.samples["predicted"] <= 200


def test_default_task_is_bht_design_bit_for_bit(capsys, tmp_path):
    """An empty `starts` runs design's own search: the row and the query are exactly what
    `bht design --json` prints for that pair, budget and seed (float64)."""
    write_zoo(tmp_path)
    write_csv(tmp_path / "m.csv", ["a", "b", "energy", "seed"], [("m0.npy", "m1.npy", 1.5, 2)])
    task = read_manifest(tmp_path / "m.csv").tasks[0]
    assert task.values["starts"] is None
    got = run_task(task, api_design, MatrixCache())
    code, out, err = run(capsys, "design", str(tmp_path / "m0.npy"), str(tmp_path / "m1.npy"),
                         "--energy", "1.5", "--seed", "2", "--json")
    assert code == 0, err
    expected = json.loads(out)
    assert got["row"]["hellinger_squared"] == expected["hellinger_squared"]
    assert got["row"]["samples.predicted"] == expected["samples"]["predicted"]
    assert got["row"]["solver.starts"] == expected["solver"]["starts"]
    assert got["query"].tolist() == expected["query"]


@pytest.mark.slow
def test_models_column_is_the_kway_design_bit_for_bit(capsys, tmp_path, scheduler):
    """A `models` row runs `bht design M1 ... MK`: the same query, bit for bit (float64, same
    seed); a CSV cell separates the paths by '|', a JSONL row may give a list."""
    rng = np.random.default_rng(11)
    for k in range(3):
        np.save(tmp_path / f"k{k}.npy", rng.standard_normal((15, 4)))
    paths = [str(tmp_path / f"k{k}.npy") for k in range(3)]
    manifest = write_csv(tmp_path / "k.csv", ["name", "models", "energy", "seed"],
                         [("three", "k0.npy|k1.npy|k2.npy", 1.5, 3), ("pair", "k0.npy|k1.npy", 1.5, 3)])
    tasks = read_manifest(manifest).tasks
    assert tasks[0].values["models"] == paths and tasks[0].problem is None
    out = run_task(tasks[0], api_design, MatrixCache())
    code, stdout, _ = run(capsys, "design", *paths, "-E", "1.5", "--seed", "3", "--json", "-q")
    ref = json.loads(stdout)
    assert out["row"]["status"] == "ok"
    assert out["query"].tolist() == ref["query"]                    # bit for bit
    assert out["row"]["hellinger_squared"] == ref["hellinger_squared"]
    assert (out["row"]["bottleneck.i"], out["row"]["bottleneck.j"]) == (ref["bottleneck"]["i"], ref["bottleneck"]["j"])
    assert out["row"]["samples.predicted"] == ref["samples"]["predicted"]
    two = run_task(tasks[1], api_design, MatrixCache())               # two models: the pair design
    assert two["query"].tolist() == api_design(paths[0], paths[1], 1.5, seed=3).query
    # JSONL: a list of paths is the same task as the '|' cell
    (tmp_path / "k.jsonl").write_text(json.dumps({"models": ["k0.npy", "k1.npy", "k2.npy"],
                                                  "energy": 1.5, "seed": 3}) + "\n")
    assert read_manifest(tmp_path / "k.jsonl").tasks[0].key == tasks[0].key
    # end to end, through the scheduler
    res = tmp_path / "r.jsonl"
    code, stdout, err = run(capsys, "sweep", manifest, "--out", str(res), "--scheduler", scheduler, "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in read_rows(res)}
    q = np.load(tmp_path / rows["three"]["query_file"])
    assert q.tolist() == ref["query"] and rows["three"]["models"] == "k0.npy|k1.npy|k2.npy"


def test_models_column_bad_rows(capsys, tmp_path):
    rng = np.random.default_rng(12)
    for k in range(2):
        np.save(tmp_path / f"k{k}.npy", rng.standard_normal((6, 3)))
    bad = write_csv(tmp_path / "bad.csv", ["a", "b", "models", "energy", "model", "floor"],
                    [("k0.npy", "", "k0.npy|k1.npy", 1, "", ""),
                     ("", "", "k0.npy", 1, "", ""),
                     ("", "", "k0.npy||k1.npy", 1, "", ""),
                     ("", "", "k0.npy|nope.npy", 1, "", ""),
                     ("", "", "k0.npy|k1.npy|k0.npy", 1, "leverage", 0.5),
                     ("", "", "", 1, "", "")])
    problems = [t.problem for t in read_manifest(bad).tasks]
    assert "either models or a and b" in problems[0]
    assert "2 to 8 models" in problems[1] and "empty path" in problems[2]
    assert "no such file" in problems[3] and "leverage compares two models" in problems[4]
    assert "no value for a" in problems[5]
    with pytest.raises(InputError, match="models and energy"):
        read_manifest(write_csv(tmp_path / "cols.csv", ["a", "energy"], [("k0.npy", 1)]))
