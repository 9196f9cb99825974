"""Schedule files: a few queries used in fixed proportions (docs/kway.md), as `design
--schedule --out` writes them and `sample --schedule`, `decide --query` and `simulate --query`
read them.

Two formats, by extension: `.json`, an object {"queries": [[...], ...], "weights": [...]}
(17 significant digits: reads back to the same float64), and `.npz`, the arrays `queries`
(m x d) and `weights` (m). The weights are shares: non-negative, summing to 1.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.io import reads

SCHEDULE_SUFFIXES = (".json", ".npz")


def check_schedule_path(path: str, option: str | None = None) -> None:
    """A schedule is written as .json or .npz (queries and weights): any other name is refused
    before the search runs."""
    option = parameter_name("out") if option is None else option
    suffix = Path(path).suffix.lower()
    if suffix not in SCHEDULE_SUFFIXES:
        raise InputError(f"{option} {path}: a schedule is queries and their weights; name the file "
                         f".json or .npz (without {parameter_name('schedule')}, {option} writes "
                         "the single query)")


def save_schedule(path: str, queries, weights, option: str | None = None) -> None:
    """Write the schedule atomically (io/write.atomic_file), in the format of the extension."""
    from bhtcli.io.write import atomic_file
    option = parameter_name("out") if option is None else option
    check_schedule_path(path, option)
    Q = np.asarray(queries, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if Path(path).suffix.lower() == ".json":
        with atomic_file(path, "w", option=option, encoding="utf-8") as fh:
            fh.write(json.dumps({"queries": Q.tolist(), "weights": w.tolist()}) + "\n")
        return
    with atomic_file(path, "wb", option=option) as fh:
        np.savez(fh, queries=Q, weights=w)


def is_schedule_file(path) -> bool:
    """`path` names a schedule file (.json holding an object, or .npz with `queries`): read as
    a schedule wherever queries are read. A damaged file is left to the readers to name."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = os.fspath(path)
    suffix = Path(p).suffix.lower()
    if suffix not in SCHEDULE_SUFFIXES or not os.path.isfile(p):
        return False
    if suffix == ".npz":
        try:
            with zipfile.ZipFile(p) as archive:
                return "queries.npy" in archive.namelist()
        except (OSError, zipfile.BadZipFile, ValueError):
            return False
    with open(p, "rb") as fh:
        head = fh.read(64).lstrip()
    return head.startswith(b"{")


def read_schedule(path, d: int, label: str | None = None):
    """(queries m x d, weights m) from a schedule file, through the project's readers of .npz
    and JSON (io/npy_file.open_npz, io/text.parse_json); every problem is one InputError."""
    from bhtcli.io.npy_file import open_npz
    from bhtcli.io.text import parse_json
    p = os.fspath(path)
    label = label or p
    if Path(p).suffix.lower() == ".npz":
        with open_npz(p, label) as z:
            if "queries" not in z.files or "weights" not in z.files:
                raise InputError(f"{label}: a schedule .npz holds the arrays 'queries' and "
                                 f"'weights'; it has {', '.join(z.files) or 'none'}")
            Q, w = np.asarray(z["queries"]), np.asarray(z["weights"])
    else:
        reads.record(p)
        try:
            data = Path(p).read_bytes()
        except OSError as exc:
            raise InputError(f"{label}: cannot read the schedule ({exc.strerror or exc})") from None
        doc = parse_json(data, label, "a schedule: an object with 'queries' and 'weights'",
                         parse_int=float)
        if not isinstance(doc, dict) or "queries" not in doc or "weights" not in doc:
            raise InputError(f"{label}: a schedule is a JSON object with 'queries' (a list of "
                             "queries) and 'weights' (one share per query)")
        Q, w = np.asarray(doc["queries"], dtype=object), np.asarray(doc["weights"], dtype=object)
    try:
        Q, w = Q.astype(np.float64), w.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{label}: the schedule's queries and weights must be numbers "
                         "(m queries of equal length, m weights)") from None
    if Q.ndim == 1:
        Q = Q.reshape(1, -1)
    if Q.ndim != 2 or Q.shape[1] != d or w.shape != (Q.shape[0],):
        raise InputError(f"{label}: the schedule has queries of shape {Q.shape} and {w.size} "
                         f"weights; expected m queries of length {d} and m weights")
    if not (np.isfinite(Q).all() and np.isfinite(w).all()) or (w < 0).any() or \
            not abs(float(w.sum()) - 1.0) <= 1e-9:
        raise InputError(f"{label}: the schedule's weights must be finite shares >= 0 summing "
                         f"to 1 (they sum to {float(w.sum()):.6g}), its queries finite")
    return Q, w
