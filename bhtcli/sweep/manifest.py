"""Sweep manifests: one task per row (CSV or JSONL), validated and given a stable identity.

A manifest problem (missing file, unknown or missing column, malformed line) is an InputError
before any work; a problem of one row (a missing matrix, an invalid energy) becomes that task's
``problem``, and the sweep refuses to start while any row has one, listing them all
(bhtcli/sweep/driver.py). What only loading the matrices reveals (shapes, NaN) fails that
task at run time, in its result row, while the other tasks run.

Adding a model setting is one line in COLUMNS: the column name, how a cell is parsed, its
default and the keyword argument of design/bound it becomes. A default of None ("the library's
default") keeps the identity of tasks written before the column existed.
"""
from __future__ import annotations

import csv
import difflib
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Callable

from bhtcli.errors import InputError
from bhtcli.io.text import read_text

MODELS = ("softmax", "leverage")
LABEL_PREFIX = "label_"
MANIFEST_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


# The checkers load numpy: imported when a manifest is read, not when the CLI starts (the
# sweep command's help lists COLUMNS).
def check_energy(value, name):
    from bhtcli.io.validation import check_energy as check
    return check(value, name)


def check_error(value, name):
    from bhtcli.io.validation import check_error as check
    return check(value, name)


def check_seed(value, name):
    from bhtcli.io.validation import check_seed as check
    return check(value, name)


def check_starts(value, name):
    from bhtcli.io.validation import check_starts as check
    return check(value, name)


def _number(raw, column: str) -> float:
    if isinstance(raw, bool):
        raise InputError(f"{column} must be a number, got {raw!r}")
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise InputError(f"{column} must be a number, got {raw!r}") from None


def _whole(raw, column: str) -> int:
    value = _number(raw, column)
    if not value.is_integer():
        raise InputError(f"{column} must be a whole number, got {raw!r}")
    return int(value)


def _path(raw, column: str, base: str) -> str:
    """Absolute path (FILE.npz:KEY keeps its key) of a matrix named relative to the manifest."""
    spec = str(raw).strip()
    if spec == "-":
        raise InputError(f"{column}: standard input cannot feed a sweep; give a matrix file")
    path, key = split_npz_key(spec)
    if "\0" in spec or not path:
        raise InputError(f"{column} = {spec!r} is not a file name")
    path = os.path.realpath(os.path.join(base, os.path.expanduser(path)))
    if not os.path.isfile(path):
        raise InputError(f"{column} = {spec}: no such file {path}; check the path (relative to the manifest)")
    return path + (f":{key}" if key else "")


# Between the paths of a `models` cell: '|' cannot occur in a Windows path (nor does any of the
# shells' usual file names use it); on POSIX only '/' and NUL cannot, so a POSIX file whose
# name holds '|' needs a JSONL manifest, where `models` is a list of paths (no separator).
MODELS_SEPARATOR = "|"


def _paths(raw, column: str, base: str) -> list:
    """The K absolute paths of a `models` cell: paths separated by MODELS_SEPARATOR, or (JSONL)
    a list of paths."""
    from bhtcli.commands.kway import MAX_MODELS
    if isinstance(raw, (list, tuple)):
        items = [str(p).strip() for p in raw]
    elif isinstance(raw, str):
        items = [p.strip() for p in raw.split(MODELS_SEPARATOR)]
    else:
        raise InputError(f"{column} must be paths separated by '{MODELS_SEPARATOR}' (JSONL: a list "
                         f"of paths), got {raw!r}")
    if any(not p for p in items):
        raise InputError(f"{column} = {raw!r} has an empty path; separate the models' files by "
                         f"'{MODELS_SEPARATOR}' with nothing empty between them")
    if not 2 <= len(items) <= MAX_MODELS:
        raise InputError(f"{column} needs 2 to {MAX_MODELS} models separated by "
                         f"'{MODELS_SEPARATOR}', got {len(items)}")
    return [_path(p, column, base) for p in items]


def split_npz_key(spec: str) -> tuple[str, str]:
    """'m.npz:KEY' -> ('m.npz', 'KEY'); any other path -> (path, '')."""
    head, sep, key = spec.rpartition(":")
    return (head, key) if sep and head.lower().endswith(".npz") and key else (spec, "")


def _energy(raw, column, base):
    return check_energy(_number(raw, column), column)


def _floor(raw, column, base):
    return _number(raw, column)          # the box rules are the ModelSpec's


def _link(raw, column, base):
    from bhtcli.models.links import parse_link
    return parse_link(raw, column).name


def _items(raw, column: str) -> list:
    """The entries of a per-model cell: a comma list, as the CLI's --links and --biases take
    (JSONL: a list too); an empty entry stays empty."""
    if isinstance(raw, (list, tuple)):
        return ["" if v is None else str(v).strip() for v in raw]
    if isinstance(raw, str):
        return [v.strip() for v in raw.split(",")]
    raise InputError(f"{column} must be one value per model separated by ',' (JSONL: a list), "
                     f"got {raw!r}")


def _links(raw, column, base):
    """The models' links as one comma list of their names (exp for an empty entry)."""
    from bhtcli.errors import parameter_names
    from bhtcli.models.spec import per_model
    items = _items(raw, column)
    with parameter_names(str):
        return ",".join(link.name for link in per_model(items, len(items), column, True))


def _biases(raw, column, base):
    """The models' bias files (absolute, relative to the manifest; None: an empty entry, no bias)."""
    from bhtcli.errors import parameter_names
    from bhtcli.models.spec import per_model
    items = _items(raw, column)
    with parameter_names(str):
        given = per_model(items, len(items), column, False)
    return [None if b is None else _path(b, f"{column} (model {k + 1})", base)
            for k, b in enumerate(given)]


def _dtype(raw, column, base):
    from bhtcli.io.validation import check_dtype
    return check_dtype(str(raw).strip(), column)


def _model(raw, column, base):
    value = str(raw).strip().lower()
    if value not in MODELS:
        raise InputError(f"{column} must be one of {', '.join(MODELS)}, got {raw!r}")
    return value


@dataclass(frozen=True)
class Column:
    """A known manifest column: parse(raw cell, column name, manifest folder) -> value."""

    parse: Callable
    default: object = None          # used when the cell is empty or absent
    kwarg: str | None = None        # keyword argument of design/bound (None: not passed)
    required: bool = False
    is_path: bool = False           # a file: its size and modification time join the identity
    implicit: object = None         # a value that means "not set": left out of the identity


COLUMNS = {
    "a": Column(_path, kwarg="A", required=True, is_path=True),
    "b": Column(_path, kwarg="B", required=True, is_path=True),
    # instead of a and b: K models, a K-way design (docs/kway.md); run_task loads them
    "models": Column(_paths, is_path=True),
    "energy": Column(_energy, kwarg="energy", required=True),
    "model": Column(_model, default="softmax", kwarg="model"),
    "floor": Column(_floor, kwarg="floor"),
    "target_error": Column(lambda raw, c, base: check_error(_number(raw, c), c), default=0.05,
                           kwarg="error"),
    "seed": Column(lambda raw, c, base: check_seed(_whole(raw, c), c), default=0, kwarg="seed"),
    "starts": Column(lambda raw, c, base: check_starts(_whole(raw, c), c), kwarg="starts"),
    "link_a": Column(_link, kwarg="link_a", implicit="exp"),
    "link_b": Column(_link, kwarg="link_b", implicit="exp"),
    "bias_a": Column(_path, kwarg="bias_a", is_path=True),
    "bias_b": Column(_path, kwarg="bias_b", is_path=True),
    # one per model, as --links and --biases: a `models` row's (a pair's: link_a .. bias_b)
    "links": Column(_links, kwarg="links"),
    "biases": Column(_biases, kwarg="biases", is_path=True),
    "dtype": Column(_dtype, kwarg="dtype", implicit="float64"),
    "queries": Column(lambda raw, c, base: _queries(raw, c), kwarg="queries"),
}


def _queries(raw, column):
    from bhtcli.io.validation import check_queries
    return check_queries(_whole(raw, column), column)


def _check_row(values: dict, softcap=None) -> dict:
    """Rules across columns of one row: the ModelSpec's (column names are its parameter names);
    `links` and `biases` those of the CLI's --links and --biases (models/spec.py
    readout_lists: a pair row's become link_a .. bias_b); a `models` row, the K-way design's.
    Returns the links the row's checkpoints declare where it sets none (:func:`_declared_links`)."""
    from bhtcli.errors import parameter_names
    from bhtcli.models.spec import ModelSpec, readout_lists
    kway = values.get("models") is not None
    given = {name: None if values[name] == COLUMNS[name].implicit else values[name]
             for name in READOUT_COLUMNS}
    with parameter_names(str):          # messages name the manifest's columns
        pair = readout_lists(values["models"] if kway else [values["a"], values["b"]],
                             values["links"], values["biases"], *given.values(), split=not kway)
        if kway:
            from bhtcli.commands.kway import check_kway_options
            check_kway_options(model=values["model"], readout_plain=pair[:4] == (None,) * 4,
                               floor=values["floor"], queries=values["queries"])
            check_energy(values["energy"], "energy")
        else:
            readout = {name: v for name, v in zip(READOUT_COLUMNS, pair) if v is not None}
            if values["dtype"] is not None:
                readout["dtype"] = values["dtype"]
            ModelSpec.build(values["model"], values["energy"], values["floor"], **readout)
        # an empty softmax `starts` stays empty: the task runs design's own (default) search
        return _declared_links(values, given, softcap)


def _declared_links(values: dict, given: dict, softcap=None) -> dict:
    """The links a softmax row leaves unset (no `links`; an empty or exp link_a, link_b) that
    its checkpoints declare, as `bht design` reads them (models/spec.py checkpoint_links, a
    note each): the task hands design the loaded matrices, no longer the files. A pair row's
    become link_a, link_b; a `models` row's, links."""
    if values["model"] != "softmax" or values["links"] is not None:
        return {}
    from bhtcli.models.spec import checkpoint_links
    kway = values.get("models") is not None
    paths = values["models"] if kway else [values["a"], values["b"]]
    unset = [None] * len(paths) if kway else [given["link_a"], given["link_b"]]
    links = checkpoint_links(unset, paths, pair=False, softcap=softcap)
    found = {k: link.name for k, (link, was) in enumerate(zip(links, unset))
             if was is None and not link.is_exp}
    if not found:
        return {}
    if kway:
        return {"links": ",".join(link.name for link in links)}
    return {("link_a", "link_b")[k]: name for k, name in found.items()}


READOUT_COLUMNS = ("link_a", "link_b", "bias_a", "bias_b")


def call_arguments(values: dict) -> dict:
    """Keyword arguments of :func:`bhtcli.design` for one task's values."""
    return {COLUMNS[name].kwarg: value for name, value in values.items()
            if name in COLUMNS and COLUMNS[name].kwarg and value not in (None, COLUMNS[name].implicit)}


@dataclass(frozen=True)
class Task:
    """One manifest row: its identity, where it is, its values and what is wrong with it."""

    key: str                 # 16 hex digits, see task_key
    line: int                # line of the manifest (for messages; not part of the identity)
    values: dict             # column -> normalised value (paths absolute); None: not given
    shown: dict              # the columns as a result row shows them (paths as written)
    labels: dict = field(default_factory=dict)
    problem: str | None = None


def task_key(values: dict) -> str:
    """Stable identity of a task: a hash of its normalised values and its files' stamps.

    Labels and the row's position do not count; a matrix file with another size or
    modification time makes a new task (its old result is not reused).
    """
    ident = {k: v for k, v in values.items() if v is not None and v != COLUMNS[k].implicit}
    for name, column in COLUMNS.items():
        value = values.get(name)
        if column.is_path and isinstance(value, (str, list)):
            ident[f"{name}@"] = ([_stamp(v) for v in value] if isinstance(value, list)
                                 else _stamp(value))
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _stamp(path: str | None):
    """[size, modification time] of a matrix file (None when it cannot be read, or no file)."""
    if path is None:
        return None
    try:
        st = os.stat(split_npz_key(path)[0])
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return None


def matrix_paths(value) -> list:
    """The matrix files of one path column's value (a path, a list of paths or None; a list's
    None entries, no bias, are no file)."""
    return ([v for v in value if v is not None] if isinstance(value, list)
            else [value] if isinstance(value, str) else [])


@dataclass(frozen=True)
class Manifest:
    path: str
    tasks: list              # one per manifest row, in order (duplicates kept: they share a key)
    columns: list            # the manifest's columns in order
    notes: list

    @property
    def distinct(self) -> dict:
        """key -> first task with that key, in manifest order."""
        out = {}
        for t in self.tasks:
            out.setdefault(t.key, t)
        return out


def read_manifest(path) -> Manifest:
    """Read and check a sweep manifest (.csv, .tsv, .jsonl/.ndjson).

    Parameters
    ----------
    path : str or os.PathLike
        The manifest; matrix paths in it are relative to its folder.

    Returns
    -------
    Manifest
        Its tasks in order; a row with a bad cell becomes a task with a ``problem``.

    Raises
    ------
    InputError
        Unreadable or malformed manifest, unknown column, missing required column, no rows.
    """
    path = os.fspath(path)
    kind = MANIFEST_SUFFIXES.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise InputError(f"{path}: a manifest is .csv, .tsv or .jsonl (one task per row)")
    _, text = read_text(path, "a manifest (.csv, .tsv or .jsonl, UTF-8, one task per row)")
    rows, columns = (_jsonl_rows if kind == "jsonl" else _csv_rows)(text, path, kind)
    rows, columns = _canonical_names(rows, columns, path)
    _check_columns(columns, path)
    if not rows:
        raise InputError(f"{path} has no tasks; add one row per task under the header")
    base = os.path.dirname(os.path.abspath(path))
    notes, first = [], {}
    from functools import lru_cache
    from bhtcli.errors import notes_to
    from bhtcli.io.checkpoint import checkpoint_softcap
    softcap = lru_cache(maxsize=None)(checkpoint_softcap)      # a file in many rows: read once
    with notes_to(notes.append):         # the checkpoints' declared links
        tasks = [_task(line, cells, base, softcap) for line, cells in rows]
    for t in tasks:
        if t.key in first:
            notes.append(f"{path}: line {t.line} repeats the task of line {first[t.key]}; it runs once")
        first.setdefault(t.key, t.line)
    return Manifest(path, tasks, columns, notes)


def _csv_rows(text: str, path: str, kind: str):
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{path} is empty; it needs a header (a,b,energy,...) and one row per task")
    reader = csv.reader([line for _, line in lines], delimiter="\t" if kind == "tsv" else ",")
    parsed = list(reader)
    header = [h.strip() for h in parsed[0]]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(f"{path}: column {dupes[0]!r} appears twice in the header")
    rows = []
    for (lineno, _), cells in zip(lines[1:], parsed[1:]):
        if len(cells) != len(header):
            raise InputError(f"{path}, line {lineno}: {len(cells)} cells but the header has "
                             f"{len(header)}; every row needs one cell per column (empty for a default)")
        rows.append((lineno, {h: c.strip() for h, c in zip(header, cells)}))
    return rows, header


def _jsonl_rows(text: str, path: str, kind: str):
    rows, columns = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise InputError(f"{path}, line {lineno} is not JSON; each line is one object such as "
                             '{"a": "A.npy", "b": "B.npy", "energy": 1}') from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}, line {lineno} is not a JSON object (one task per line)")
        columns += [k for k in obj if k not in columns]
        rows.append((lineno, obj))
    return rows, columns


# Former column names, still read: `error` is alpha, named target_error as in every result.
ALIASES = {"error": "target_error"}


def _canonical_names(rows: list, columns: list, path: str):
    """Rows and columns with former names (ALIASES) replaced by the current ones."""
    for old, new in ALIASES.items():
        if old in columns and new in columns:
            raise InputError(f"{path}: columns {old!r} and {new!r} are the same setting ({old!r} is "
                             f"its former name); keep {new!r}")
    if not any(old in columns for old in ALIASES):
        return rows, columns
    columns = [ALIASES.get(c, c) for c in columns]
    rows = [(line, {ALIASES.get(k, k): v for k, v in cells.items()}) for line, cells in rows]
    return rows, columns


def _check_columns(columns: list, path: str) -> None:
    for name in columns:
        if name not in COLUMNS and not is_label(name):
            near = difflib.get_close_matches(name, list(COLUMNS), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise InputError(f"{path}: unknown column {name!r}{hint}; known columns: "
                             f"{', '.join(COLUMNS)}; keep your own labels in 'name' or in columns "
                             f"starting with '{LABEL_PREFIX}'")
    missing = [name for name, c in COLUMNS.items() if c.required and name not in columns
               and not (name in PAIR_COLUMNS and "models" in columns)]
    if missing:
        raise InputError(f"{path}: no column {', '.join(map(repr, missing))}; a manifest needs the "
                         f"columns a, b and energy, or models and energy (one task per row)")


def is_label(name: str) -> bool:
    """Columns carried into the results unchanged: 'name' and 'label_*'."""
    return name == "name" or name.startswith(LABEL_PREFIX)


PAIR_COLUMNS = ("a", "b")      # required unless the row gives `models`


def _task(line: int, cells: dict, base: str, softcap=None) -> Task:
    values, shown, problems = {}, {}, []
    raw_models = cells.get("models")
    kway = not (raw_models is None or (isinstance(raw_models, str) and not raw_models.strip()))
    for name, column in COLUMNS.items():
        raw = cells.get(name)
        empty = raw is None or (isinstance(raw, str) and not raw.strip())
        shown[name] = None if empty else (raw.strip() if isinstance(raw, str) else raw)
        if kway and name in PAIR_COLUMNS and not empty:
            problems.append(f"give either models or a and b, not both ({name} = {raw!r})")
        if empty:
            values[name] = column.default
            if column.required and not (kway and name in PAIR_COLUMNS):
                problems.append(f"no value for {name}")
            continue
        try:
            values[name] = column.parse(raw, name, base)
        except InputError as exc:
            values[name] = ("invalid", str(raw))      # still part of the identity
            problems.append(str(exc))
    if not problems:
        try:
            values.update(_check_row(values, softcap))
        except InputError as exc:
            problems.append(str(exc))
    for name in COLUMNS:              # typed values; an invalid cell shows as null (the failure quotes it)
        if isinstance(values[name], tuple):
            shown[name] = None
        elif not COLUMNS[name].is_path:
            shown[name] = values[name]
    labels = {k: v for k, v in cells.items() if is_label(k)}
    problem = "; ".join(problems) if problems else None
    return Task(task_key(values), line, values, shown, labels, problem)
