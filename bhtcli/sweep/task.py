"""One sweep task on a worker: load its matrices (once per worker), run design, make the row.

Runs in Dask's worker processes; never raises for a problem of the task itself, so that one bad
row does not stop a sweep.
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np

from bhtcli.errors import BhtError, InputError, parameter_names
from bhtcli.io.load import read_array
from bhtcli.io.shapes import check_same_shape
from bhtcli.sweep.manifest import Task, call_arguments, split_npz_key
from bhtcli.io.validation import check_matrix, check_pair

# Result columns of a row: name -> where it is in DesignResult.to_dict(). The certificate
# columns are the numbers `bht bound` reports (design computes them on the way).
RESULT_FIELDS = {
    "n": ("n",), "d": ("d",), "distinguishable": ("distinguishable",),
    "hellinger_squared": ("hellinger_squared",), "hellinger": ("hellinger",),
    "bhattacharyya_distance": ("bhattacharyya_distance",), "total_variation": ("total_variation",),
    "kl_ab": ("kl_ab",), "kl_ba": ("kl_ba",), "chernoff_information": ("chernoff_information",),
    "query_norm": ("query_norm",), "on_boundary": ("on_boundary",),
    "samples.lower": ("samples", "lower"), "samples.predicted": ("samples", "predicted"),
    "samples.upper": ("samples", "upper"), "samples.method": ("samples", "method"),
    "certificate.hellinger_squared_max_bound": ("certificate", "hellinger_squared_max_bound"),
    "certificate.samples_lower_any_strategy": ("certificate", "samples_lower_any_strategy"),
    "certificate.mean_samples_lower_sequential": ("certificate", "mean_samples_lower_sequential"),
    "certificate.design_over_bound": ("certificate", "design_over_bound"),
    "certificate.row_diameter": ("certificate", "row_diameter"), "row_norm_2inf": ("row_norm_2inf",),
    "certificate.tv_max_bound": ("certificate", "tv_max_bound"),
    "solver.starts": ("solver", "starts"), "solver.local_maxima": ("solver", "local_maxima"),
    "seconds": ("seconds",), "note": ("note",), "energy_found": ("energy",),
    # K-way rows (`models`): the bottleneck pair at the query (0-based; null for pairs)
    "bottleneck.i": ("bottleneck", "i"), "bottleneck.j": ("bottleneck", "j"),
}


class MatrixCache:
    """Loaded matrices kept per worker process, so that tasks sharing a file load it once.

    Keyed by path, size and modification time; least recently used arrays leave first once
    the arrays held in memory pass `max_bytes` (memory-mapped .npy files cost nothing here).
    """

    def __init__(self, max_bytes: int = 2 << 30):
        self.max_bytes, self.loads = max_bytes, 0
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def load(self, spec: str, name: str) -> np.ndarray:
        st = os.stat(split_npz_key(spec)[0])
        key = (spec, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        arr = check_matrix(read_array(spec, name), name)
        with self._lock:
            self.loads += 1
            self._items[key] = arr
            while len(self._items) > 1 and sum(_resident(a) for a in self._items.values()) > self.max_bytes:
                self._items.popitem(last=False)
        return arr


def _resident(arr: np.ndarray) -> int:
    return 0 if isinstance(arr, np.memmap) or isinstance(arr.base, np.memmap) else arr.nbytes


_WORKER_CACHE = MatrixCache()


def run_task(task: Task, design, cache: MatrixCache | None = None) -> dict:
    """Run one task (on a worker): {"row": result columns, "query": the query or None}.

    `design` is the design function the sweep runs (:func:`bhtcli.api.design`, handed down
    by the caller: the sweep sits below the API and does not import it).

    Never raises for a problem of the task itself: the message goes into the row
    (status "failed", column failure), so one bad row does not stop a sweep.
    """
    cache = _WORKER_CACHE if cache is None else cache
    t0 = time.perf_counter()
    try:
        if task.problem:
            raise InputError(task.problem)
        v = task.values
        if v.get("models") is not None:
            # K models: the K-way design of `bht design M1 ... MK` (its own shape and
            # same-model checks name the models by position)
            names = [f"model {k + 1}" for k in range(len(v["models"]))]
            check_same_shape(v["models"], names, numbered=True)     # from headers, before loading
            models = [cache.load(p, name) for p, name in zip(v["models"], names)]
            with parameter_names(str):
                result = design(**dict(call_arguments(v), A=models))
        else:
            check_same_shape([v["a"], v["b"]], [task.shown["a"], task.shown["b"]])
            A = cache.load(v["a"], task.shown["a"])
            B = cache.load(v["b"], task.shown["b"])
            check_pair(A, B, task.shown["a"], task.shown["b"])
            # links or biases (one per model): the pair as a list of two, as `bht design A B
            # --links ...` reads them (as link_a .. bias_b)
            models = (dict(A=[A, B]) if v.get("links") is not None or v.get("biases") is not None
                      else dict(A=A, B=B))
            with parameter_names(str):      # messages name the manifest's columns, in any process
                result = design(**dict(call_arguments(v), **models))
    except BhtError as exc:
        return {"row": failed_fields(str(exc), time.perf_counter() - t0), "query": None}
    except MemoryError:
        return {"row": failed_fields("out of memory on the worker", time.perf_counter() - t0), "query": None}
    except Exception as exc:          # a bug: still a row, so that the sweep goes on
        return {"row": failed_fields(f"unexpected {type(exc).__name__}: {exc}", time.perf_counter() - t0),
                "query": None}
    r = result.to_dict()
    row = {"status": "ok", "failure": None}
    for name, where in RESULT_FIELDS.items():
        value = r
        for part in where:
            value = value.get(part) if isinstance(value, dict) else None
        row[name] = value
    row["warnings"] = "; ".join(r["warnings"]) or None
    return {"row": row, "query": np.asarray(result.query, dtype=np.float64)}


def failed_fields(message: str, seconds: float | None = None) -> dict:
    """The result columns of a task that failed: its message, and nulls."""
    row = {"status": "failed", "failure": message, **dict.fromkeys(RESULT_FIELDS)}
    row["seconds"], row["warnings"] = seconds, None
    return row
