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
product the threads back. Both are no-ops where numpy's BLAS is not an OpenBLAS this can
reach (then nothing changes). Only the thread count changes, never a result: a product's
value does not depend on how many threads computed it (up to the order of partial sums in
a few BLAS kernels, i.e. rounding).
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading

_LOCK = threading.Lock()
_STATE: dict = {}


def _controls():
    """(get, set, default count) of the OpenBLAS that numpy loaded, or None."""
    if "controls" in _STATE:
        return _STATE["controls"]
    controls = None
    try:
        import numpy
        base = os.path.dirname(numpy.__file__)
        paths = sorted(glob.glob(os.path.join(base, os.pardir, "numpy.libs", "*openblas*"))
                       + glob.glob(os.path.join(base, ".dylibs", "*openblas*")))
        for path in paths:
            lib = ctypes.CDLL(path)
            for get_name, set_name in (("scipy_openblas_get_num_threads64_",
                                        "scipy_openblas_set_num_threads64_"),
                                       ("scipy_openblas_get_num_threads",
                                        "scipy_openblas_set_num_threads"),
                                       ("openblas_get_num_threads64_",
                                        "openblas_set_num_threads64_"),
                                       ("openblas_get_num_threads", "openblas_set_num_threads")):
                get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
                if get is not None and put is not None:
                    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                    controls = (get, put, max(int(get()), 1))
                    break
            if controls:
                break
    except (OSError, ImportError, AttributeError, ValueError):
        controls = None
    _STATE["controls"] = controls
    return controls


_LOCAL = threading.local()      # this thread's depth of single_threaded blocks


def _depth() -> int:
    return getattr(_LOCAL, "depth", 0)


@contextlib.contextmanager
def _threads(single: bool):
    controls = _controls()
    if controls is None:
        yield
        return
    _, put, default = controls
    _LOCAL.depth = _depth() + (1 if single else 0)
    with _LOCK:
        put(1 if single else default)
    try:
        yield
    finally:
        # back to what this thread's enclosing block asks for (not to a value read before,
        # which another thread may have set meanwhile)
        _LOCAL.depth = _depth() - (1 if single else 0)
        with _LOCK:
            put(1 if _depth() > 0 else default)


def single_threaded():
    """A block in which the BLAS uses one thread (the searches' small products)."""
    return _threads(True)


def all_threads():
    """A block in which the BLAS uses all its threads again (a pass over A and B)."""
    return _threads(False)
