"""The BLAS's threads: all of them for the passes over A and B, one for everything else.

OpenBLAS (numpy's bundled BLAS) splits every product above a small size over its threads and
waits for all of them at the end of each call. On a machine whose other cores are busy (the
shared machines the benchmarks run on, or any user running two jobs) each of those waits can
last a scheduler slice, so the searches' many small products -- the subspace climbs (n x r),
L-BFGS's r-sized algebra, the bases' Gram matrices -- cost 10-100x their single-threaded time
(measured at load ~5 on 2 cores: a 1,024 x 88 Gram 62 ms against 0.2 ms, a design at
50,000 x 1,024 float32 9-11 s against 4-7 s). The full passes (a 2n x d matrix against a
block of queries) are long enough to gain from the threads at any load.

`single_threaded()` runs a block with one BLAS thread; `all_threads()` inside it gives a long
product the threads back. `beside()` runs a job in a background thread while a block runs
(the K-way design's certificate facts); throughout that block every product gets one
thread. Both are no-ops where threadpoolctl finds no BLAS to control (then nothing
changes). Only the thread count changes, never a result: a product's
value does not depend on how many threads computed it (up to the order of partial sums in
a few BLAS kernels, i.e. rounding).
"""
from __future__ import annotations

import contextlib
import threading

_LOCK = threading.Lock()
_STATE: dict = {}


def _controls():
    """(get, set, default count) of the BLAS that numpy loaded, or None. threadpoolctl (the
    library scikit-learn uses for this) finds it: OpenBLAS, MKL or BLIS, on every platform."""
    if "controls" in _STATE:
        return _STATE["controls"]
    controls = None
    try:
        import numpy  # noqa: F401  (its BLAS must be loaded before the controller looks)
        from threadpoolctl import ThreadpoolController
        libs = ThreadpoolController().select(user_api="blas").lib_controllers
        if libs:
            def get():
                return int(libs[0].get_num_threads())

            def put(count):
                for lib in libs:
                    lib.set_num_threads(count)
            controls = (get, put, max(get(), 1))
    except (ImportError, OSError, AttributeError, ValueError):
        controls = None
    _STATE["controls"] = controls
    return controls


_LOCAL = threading.local()      # this thread's depth of single_threaded blocks


def _depth() -> int:
    return getattr(_LOCAL, "depth", 0)


def _count(single: bool, default: int) -> int:
    """The BLAS threads a block gets: one when it asks for one or inside a block with a job
    beside it (beside), else all."""
    return 1 if single or _STATE.get("beside", 0) else default


@contextlib.contextmanager
def _threads(single: bool):
    controls = _controls()
    if controls is None or getattr(_LOCAL, "beside", False):
        yield
        return
    _, put, default = controls
    _LOCAL.depth = _depth() + (1 if single else 0)
    with _LOCK:
        put(_count(single, default))
    try:
        yield
    finally:
        # back to what this thread's enclosing block asks for (not to a value read before,
        # which another thread may have set meanwhile)
        _LOCAL.depth = _depth() - (1 if single else 0)
        with _LOCK:
            put(_count(_depth() > 0, default))


def single_threaded():
    """A block in which the BLAS uses one thread (the searches' small products)."""
    return _threads(True)


def all_threads():
    """A block in which the BLAS uses all its threads again (a pass over A and B)."""
    return _threads(False)


@contextlib.contextmanager
def beside(job, *args):
    """Run job(*args) in a background thread while the block runs; yields its Future.

    The count of BLAS threads is one setting for the whole process, so the job leaves it to
    the thread that started it: its own single_threaded/all_threads blocks change nothing (a
    background job that set one thread, or all of them, on leaving its block would undo the
    search's setting in the middle of its small products). For the whole block, whether the
    job still runs or not, all_threads() gives one thread too: the job keeps a core busy
    while it runs, and OpenBLAS's sums over wide products depend on its thread count, so a
    count that changed when the job ended would make two runs of one command differ in their
    last bits (and a chaotic search then in more). A daemon thread: an interrupted command
    exits without waiting for it."""
    from concurrent.futures import Future
    future = Future()

    def run():
        _LOCAL.beside = True
        if not future.set_running_or_notify_cancel():
            return
        try:
            value = job(*args)
        except BaseException as error:      # handed to whoever asks for the result
            future.set_exception(error)
        else:
            future.set_result(value)
    with _LOCK:
        _STATE["beside"] = _STATE.get("beside", 0) + 1
    try:
        threading.Thread(target=run, name="bht-beside", daemon=True).start()
        yield future
    finally:
        with _LOCK:
            _STATE["beside"] -= 1


def in_two_halves(work, count: int) -> None:
    """work(lo, hi) for the two halves of range(count): the second in a helper thread, the
    first on the calling thread. For loops whose parts write their own slices (the same
    numbers as one loop in turn) and spend their time in long numpy calls, which release the
    interpreter: the K models' stacked copy, whose first touch of 0.8 GB of pages is most of
    its cost (the pages fault in parallel)."""
    from concurrent.futures import ThreadPoolExecutor
    half = count // 2
    with ThreadPoolExecutor(1, thread_name_prefix="bht-half") as pool:
        second = pool.submit(work, half, count)
        work(0, half)
        second.result()
