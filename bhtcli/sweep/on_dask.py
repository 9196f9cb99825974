"""The engine of `bht sweep`: Dask (dask.distributed), on a local cluster or a running scheduler.

The local cluster has one single-threaded process per worker, with BLAS pinned to one thread
in each (set before the worker process starts, so numpy's BLAS reads it), no dashboard, and
Dask's own logging kept off stderr unless something is wrong. A worker that dies is replaced
and its task retried by Dask; a task that kills workers repeatedly is reported as failed.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time

from distributed.diagnostics.plugin import WorkerPlugin

from bhtcli.errors import BhtError, InputError, parameter_name
from bhtcli.settings import __version__
from bhtcli.sweep.task import failed_fields, run_task

BLAS_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}
QUIET = ("distributed", "dask", "tornado", "bokeh", "asyncio")
CONNECT_TIMEOUT, WORKERS_TIMEOUT = "10s", 60


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_on_dask(tasks: list, on_done, scheduler: str | None = None, workers: int | None = None,
                design=None) -> dict:
    """Run `tasks` with bhtcli.sweep.driver.run_task on Dask, calling on_done(task, outcome) as each ends.

    Returns the engine's description: engine, workers, startup_seconds, run_seconds.
    A task Dask could not finish for reasons outside the task (the cluster went away) gets
    no outcome: the caller reports it and a rerun runs it.
    """
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    t0 = time.perf_counter()
    with _quiet_logs(), _client(scheduler, workers, len(tasks)) as (client, label, n_workers):
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        futures = client.map(run_task, tasks, design=design, pure=False)
        task_of = {f.key: t for f, t in zip(futures, tasks)}
        lost = []
        for future in as_completed(futures, loop=client.loop):
            task = task_of[future.key]
            if future.status == "finished":
                on_done(task, future.result())
            else:
                try:
                    exc = future.exception()
                except FutureCancelledError as cancelled:
                    exc = cancelled
                if isinstance(exc, KilledWorker):
                    message = ("the workers running this task died repeatedly (out of memory? a crash "
                               f"in native code?); rerun with {parameter_name('retry_failed')} and fewer workers")
                    on_done(task, {"row": failed_fields(message), "query": None})
                else:
                    lost.append(f"line {task.line}: {type(exc).__name__}: {exc}")
            future.release()
        run_seconds = time.perf_counter() - t1
    if lost:
        raise BhtError(f"the cluster did not finish {len(lost)} tasks ({lost[0]}); "
                       "the finished ones are saved: rerun the same command to finish the rest")
    return {"engine": label, "workers": n_workers, "startup_seconds": startup, "run_seconds": run_seconds}


@contextlib.contextmanager
def _client(scheduler, workers, n_tasks):
    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise InputError(f"{parameter_name('scheduler')} {scheduler}: cannot connect ({exc}); start one with "
                             f"`dask scheduler`, or leave {parameter_name('scheduler')} out to use this machine") from None
        with contextlib.closing(client):
            try:
                client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
            except TimeoutError:
                raise InputError(f"{parameter_name('scheduler')} {scheduler} has no workers after {WORKERS_TIMEOUT} s; "
                                 f"start some with `dask worker {scheduler}`") from None
            _check_workers(client, scheduler)
            yield client, f"dask {scheduler}", len(client.scheduler_info()["workers"])
        return
    n = workers or min(available_cpus(), n_tasks)
    pre_spawn = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}), **BLAS_ENV)
    # Ctrl-C is the driver's to handle (it stops the cluster); workers started while SIGINT is
    # ignored inherit that, and the plugin does the same for workers restarted later.
    with dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn}), _sigint_ignored():
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
        except Exception as exc:
            raise BhtError(f"could not start a local Dask cluster of {n} workers ({exc})") from None
    with contextlib.closing(cluster), contextlib.closing(Client(cluster, set_as_default=False)) as client:
        client.register_plugin(IgnoreInterrupt())
        yield client, "dask local cluster", n


class IgnoreInterrupt(WorkerPlugin):
    """Worker plugin: local workers ignore SIGINT (a Ctrl-C reaches the whole process group)."""

    name = "bht-ignore-sigint"

    def setup(self, worker):
        import threading
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _sigint_ignored():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _check_workers(client, scheduler: str) -> None:
    """Every worker must run this version of bht (the tasks are its functions)."""
    from importlib.metadata import version
    for address, found in client.run(version, "bht", on_error="return").items():
        if isinstance(found, BaseException):
            raise InputError(f"{parameter_name('scheduler')} {scheduler}: worker {address} has no bht installed; "
                             f"install bht {__version__} in the workers' Python")
        if found != __version__:
            raise InputError(f"{parameter_name('scheduler')} {scheduler}: worker {address} runs bht {found}, this is "
                             f"bht {__version__}; install the same version on the workers")


@contextlib.contextmanager
def _quiet_logs():
    """Dask's INFO/WARNING chatter off stderr for the sweep's duration; errors still show."""
    loggers = [logging.getLogger(name) for name in QUIET]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
