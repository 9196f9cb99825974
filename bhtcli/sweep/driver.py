"""`sweep`: many design tasks from a manifest, on a Dask cluster, into a resumable journal.

The driver's loop, independent of the engine: read the manifest (bhtcli/sweep/manifest.py), skip the
tasks already in the journal (bhtcli/sweep/journal.py), hand the rest to the engine
(bhtcli/sweep/on_dask.py, which runs bhtcli/sweep/task.py on the workers), save each query and
append each row as it arrives, and optionally export the manifest's rows at the end.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time

from bhtcli.errors import BhtError, InputError, parameter_name
from bhtcli.io.write import check_output_path, save_npy_atomic
from bhtcli.sweep.journal import Journal, check_export_path, export_rows
from bhtcli.sweep.manifest import COLUMNS, Task, is_label, matrix_paths, read_manifest
from bhtcli.results import SweepResult, json_safe
from bhtcli.settings import __version__


def sweep(manifest, out, scheduler: str | None = None, workers: int | None = None,
          export: str | None = None, retry_failed: bool = False, progress=None, notice=None,
          engine=None, design=None, force: bool = False) -> SweepResult:
    """Run every task of a manifest not yet in the results journal `out`.

    Parameters
    ----------
    manifest : str
        CSV/TSV/JSONL with columns a, b, energy and optionally model, floor, error, seed,
        starts, name and label_* (see bhtcli.sweep.manifest).
    out : str
        The results journal (JSONL); queries go to ``<out>.queries/<task>.npy``.
    scheduler : str, optional
        Address of a running Dask scheduler; default a local cluster of `workers` processes.
    workers : int, optional
        Worker processes of the local cluster (default: the CPUs available).
    export : str, optional
        At the end, write the manifest's rows with their results to this .csv or .parquet;
        it must be neither the manifest nor one of its matrix files, unless `force`.
    retry_failed : bool
        Run tasks whose row says "failed" again (their rows are removed first).
    progress : callable, optional
        progress(done, total, failed) after each task (done counts earlier runs too).
    notice : callable, optional
        Receives notes as they arise (discarded torn line, repeated rows, stale rows).
    engine : callable, optional
        Replaces the Dask engine (tests): engine(tasks, on_done, scheduler=, workers=,
        design=) -> info, running each task with sweep.task.run_task(task, design).
    design : callable
        The design function each task runs (:func:`bhtcli.api.design` passes itself).
    force : bool
        Allow `export` to replace one of the manifest's matrix files (never the manifest).

    Returns
    -------
    SweepResult
    """
    t_start = time.perf_counter()
    _check_engine_options(scheduler, workers)
    plan = read_manifest(manifest)
    _check_paths(manifest, out, export, _matrix_files(plan), force)
    _check_rows(plan)
    notes = _Notes(notice)
    for message in plan.notes:
        notes(message)
    queries = out + ".queries"
    with _journal(out, queries) as journal:
        _check_versions(journal, out)
        distinct, stale = _reconcile(journal, plan, out, retry_failed, notes)
        done = [k for k in distinct if k in journal.rows]
        pending = [t for k, t in distinct.items() if k not in journal.rows]
        failed_before = sum(1 for k in done if journal.rows[k].get("status") != "ok")
        recorder = _Recorder(journal, out, queries, len(distinct), len(done), failed_before, progress)
        runnable, info = _run_pending(pending, recorder, engine, scheduler, workers, design)
        rows = journal.rows
        missing = [k for k in distinct if k not in rows]
        if missing:
            raise BhtError(f"the engine returned no result for {len(missing)} tasks; rerun to finish them")
        failures = [{"line": t.line, "task": k, "failure": rows[k].get("failure")}
                    for k, t in distinct.items() if rows[k].get("status") != "ok"]
        if export:
            export_rows([_export_row(t, rows[t.key]) for t in plan.tasks], export)
    ran, run_seconds = len(runnable), info["run_seconds"]
    return SweepResult(
        manifest=manifest, results=out, tasks=len(distinct), manifest_rows=len(plan.tasks),
        ok=len(distinct) - len(failures), failed=len(failures), ran=recorder.ran,
        failed_now=recorder.failed_now, already_done=len(done), stale_rows=stale,
        engine=info["engine"], workers=info["workers"], startup_seconds=info["startup_seconds"],
        run_seconds=run_seconds, seconds=time.perf_counter() - t_start,
        tasks_per_second=ran / run_seconds if ran and run_seconds > 0 else None,
        export=export, failures=failures[:10], notes=notes.messages)


def _check_engine_options(scheduler, workers) -> None:
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers or workers < 1):
        raise InputError(f"{parameter_name('workers')} must be a whole number >= 1, got {workers!r}")
    if workers is not None and scheduler:
        raise InputError(f"{parameter_name('workers')} sizes the local cluster; with {parameter_name('scheduler')} the cluster's own workers run the tasks")
    if scheduler and not re.fullmatch(r"(?:[a-z]+://)?[^\s/]+:\d+", scheduler):
        raise InputError(f"{parameter_name('scheduler')} {scheduler}: expected an address such as tcp://10.0.0.5:8786")


class _Notes:
    """Collects notes for the result and passes each one on as it arises."""

    def __init__(self, notice=None):
        self.messages, self.notice = [], notice

    def __call__(self, message: str) -> None:
        self.messages.append(message)
        if self.notice:
            self.notice(message)


def _reconcile(journal, plan, out: str, retry_failed: bool, note):
    """(the manifest's distinct tasks, rows of tasks no longer in it), after dropping a torn
    line and, with retry_failed, the rows of failed tasks."""
    if journal.torn:
        note(f"{out}: discarded a torn last line (an interrupted write); its task runs again")
    distinct = plan.distinct
    if retry_failed:
        gone = journal.rewrite(lambda r: not (r["task"] in distinct and r.get("status") == "failed"))
        if gone:
            note(f"{out}: removed {_rows(gone)} of failed tasks to run them again")
    stale = sum(1 for key in journal.rows if key not in distinct)
    if stale:
        note(f"{out} holds {_rows(stale)} of tasks no longer in the manifest; "
             f"they stay there and are left out of {parameter_name('export')}")
    return distinct, stale


class _Recorder:
    """Appends each finished task's row to the journal (once) and reports progress."""

    def __init__(self, journal, out, queries, total, done, failed, progress=None):
        self.journal, self.out, self.queries, self.total = journal, out, queries, total
        self.done, self.failed, self.ran, self.failed_now = done, failed, 0, 0
        self.progress = progress

    def __call__(self, task: Task, outcome: dict) -> None:
        if task.key in self.journal.rows:      # an engine that delivers twice changes nothing
            return
        try:
            self.journal.append(_journal_row(task, outcome, self.out, self.queries))
        except OSError as exc:            # disk full, folder removed: stop, keep what is saved
            raise BhtError(f"cannot write the results to {self.out} ({exc.strerror or exc}); the rows "
                           "written so far are kept: free space and rerun the same command") from None
        row = self.journal.rows[task.key]
        self.done += 1
        self.ran += 1
        if row["status"] != "ok":
            self.failed += 1
            self.failed_now += 1
        self.report()

    def report(self) -> None:
        if self.progress:
            self.progress(self.done, self.total, self.failed)


def _run_pending(pending, on_done: _Recorder, engine, scheduler, workers, design):
    """Run the pending tasks (their rows were checked by _check_rows); (tasks run, engine info)."""
    on_done.report()
    runnable = list(pending)
    info = {"engine": "none", "workers": None, "startup_seconds": 0.0, "run_seconds": 0.0}
    if runnable:
        if engine is None:
            from bhtcli.sweep.on_dask import run_on_dask as engine
        info = engine(runnable, on_done, scheduler=scheduler, workers=workers, design=design)
    return runnable, info


def _rows(k: int) -> str:
    return f"{k} row" if k == 1 else f"{k} rows"


def _check_rows(plan) -> None:
    """Every row's cells, checked before anything starts: one error listing every bad row."""
    bad = [t for t in plan.tasks if t.problem]
    if bad:
        rows = "; ".join(f"line {t.line}: {t.problem}" for t in bad)
        raise InputError(f"{plan.path}: {_rows(len(bad))} of {len(plan.tasks)} cannot run ({rows}); "
                         "fix or remove them, nothing was started")


def _matrix_files(plan) -> list:
    """Every matrix file the manifest's rows name (absolute; FILE.npz:KEY kept)."""
    return sorted({p for t in plan.tasks for name, v in t.values.items()
                   if COLUMNS[name].is_path for p in matrix_paths(v)})


def _check_paths(manifest, out, export, matrices, force: bool) -> None:
    check_output_path(out, inputs=matrices, force=None)      # the journal is appended to: never an input
    if os.path.exists(manifest) and os.path.exists(out) and os.path.samefile(manifest, out):
        raise InputError(f"{parameter_name('out')} {out} is the manifest; give the results a file of their own (e.g. results.jsonl)")
    if export:
        check_export_path(export)
        check_output_path(export, parameter_name("export"), inputs=(manifest,), force=None)     # never the manifest
        check_output_path(export, parameter_name("export"), inputs=matrices, force=force)
        if os.path.abspath(export) == os.path.abspath(out):
            raise InputError(f"{parameter_name('export')} {export} is the {parameter_name('out')} journal; give the export another name")


@contextlib.contextmanager
def _journal(out: str, queries: str):
    """The open (and locked) journal; a run that fails before its first row leaves nothing behind."""
    new_folder, new_file = not os.path.isdir(queries), not os.path.exists(out)
    os.makedirs(queries, exist_ok=True)
    journal = None
    try:
        journal = Journal(out, lock_path=queries)
        with journal:
            yield journal
    except BaseException:
        if new_file and journal is not None and not journal.rows and os.path.exists(out):
            os.unlink(out)
        if new_folder and (journal is None or not journal.rows):
            shutil.rmtree(queries, ignore_errors=True)
        raise


def _check_versions(journal: Journal, out: str) -> None:
    other = sorted({str(r.get("bht_version")) for r in journal.rows.values()} - {__version__})
    if other:
        raise InputError(f"{parameter_name('out')} {out} holds rows written by bht {', '.join(other)}; this is bht "
                         f"{__version__}, whose results may differ: give a new {parameter_name('out')} (or remove the file)")


def _journal_row(task: Task, outcome: dict, out: str, queries: str) -> dict:
    """The journal row of a finished task: key, labels, task columns, result columns."""
    row = {"task": task.key, **task.labels, **task.shown, **outcome["row"], "query_file": None,
           "bht_version": __version__}
    if outcome.get("query") is not None:
        save_npy_atomic(os.path.join(queries, f"{task.key}.npy"), outcome["query"])
        row["query_file"] = os.path.join(os.path.basename(queries), f"{task.key}.npy")
    return json_safe(row)


def _export_row(task: Task, row: dict) -> dict:
    """A manifest row's export: its journal row with the labels and paths as the manifest has them now."""
    out = {"task": row["task"], **task.labels}
    out.update((k, v) for k, v in row.items() if k != "task" and not is_label(k))
    out.update((name, task.shown[name]) for name in COLUMNS if COLUMNS[name].is_path)
    return out
