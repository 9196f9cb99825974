"""The results journal of a sweep (JSONL, one complete row per finished task) and its export.

Each row is written with one write, then flushed and fsync'ed, so a crash at any moment
leaves every earlier row intact and at worst a torn last line without its newline. Opening
the journal drops such a line (its task runs again); any other damage is refused rather
than repaired, so that a file that is not a journal is never truncated.
"""
from __future__ import annotations

import csv
import json
import os

from bhtcli.errors import InputError, parameter_name

ROW_START = b'{"task": "'      # every row starts so (the task key is the first field)
EXPORT_SUFFIXES = (".csv", ".parquet")


class Journal:
    """An open results file: ``rows`` (task key -> row) and ``append(row)``.

    Parameters
    ----------
    path : str
        The JSONL file; created when missing.
    lock_path : str
        A folder (or file) locked for the life of the journal, so that two sweeps cannot
        write the same results at once.
    """

    def __init__(self, path: str, lock_path: str | None = None):
        self.path = path
        self._lock = _lock(lock_path) if lock_path else None
        existed = os.path.exists(path)
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            self.close()
            raise InputError(f"{parameter_name('out')} {path}: cannot open it ({exc.strerror}); choose a writable file") from None
        if not existed:
            _fsync_folder(path)
        try:
            self.rows, self.torn = self._recover()
        except BaseException:
            self.close()
            raise

    def _recover(self):
        with open(self.path, "rb") as fh:
            data = fh.read()
        *lines, tail = data.split(b"\n")
        rows = {}
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = _parse_row(line)
            if row is None:
                raise InputError(f"{parameter_name('out')} {self.path}, line {number} is not a row of a bht sweep; "
                                 f"is this the right file? Give a new {parameter_name('out')} to start a sweep")
            rows.setdefault(row["task"], row)
        torn = bool(tail.strip())
        if torn:
            if not (tail.startswith(ROW_START) or ROW_START.startswith(tail)):
                raise InputError(f"{parameter_name('out')} {self.path} does not end like a bht sweep journal; "
                                 f"is this the right file? Give a new {parameter_name('out')} to start a sweep")
            os.ftruncate(self._fd, len(data) - len(tail))   # the interrupted write of one row
            os.fsync(self._fd)
        elif tail:                                          # stray whitespace after the last row
            os.ftruncate(self._fd, len(data) - len(tail))
        return rows, torn

    def append(self, row: dict) -> None:
        """Write one complete row, then flush it to disk (write + fsync)."""
        line = memoryview((json.dumps(row, allow_nan=False) + "\n").encode())
        while line:
            written = os.write(self._fd, line)
            line = line[written:]
        os.fsync(self._fd)
        self.rows.setdefault(row["task"], row)

    def rewrite(self, keep) -> int:
        """Atomically replace the file by the rows for which keep(row) is true; return how many went."""
        kept = {k: r for k, r in self.rows.items() if keep(r)}
        _write_atomic(self.path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept.values()))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        gone, self.rows = len(self.rows) - len(kept), kept
        return gone

    def close(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _parse_row(line: bytes):
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and isinstance(row.get("task"), str) else None


def _lock(path: str):
    try:
        import fcntl
    except ImportError:               # not POSIX: no protection against two writers
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise InputError(f"{path} is locked: another bht sweep is writing these results; "
                         f"wait for it or give another {parameter_name('out')}") from None
    return fd


def _fsync_folder(path: str) -> None:
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic(path: str, text: str, newline=None) -> None:
    from bhtcli.io.write import atomic_file
    with atomic_file(path, "w", encoding="utf-8", newline=newline) as fh:
        fh.write(text)


def check_export_path(path: str) -> str:
    """Fail before any work on an export name bht cannot write (.csv, or .parquet without pyarrow)."""
    from bhtcli.io.write import check_output_path
    check_output_path(path, f"{parameter_name('export')}")
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in EXPORT_SUFFIXES:
        raise InputError(f"{parameter_name('export')} {path}: name the file *.csv or *.parquet")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(f"{parameter_name('export')} {path}: Parquet needs pyarrow; install it with "
                             "pip install pyarrow (or export to .csv)") from None
    return path


def export_rows(rows: list, path: str) -> None:
    """Write rows (dicts) to a .csv or .parquet file atomically; columns in first-seen order."""
    columns = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    if path.lower().endswith(".parquet"):
        _write_parquet(rows, columns, path)
        return
    import io
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_cell(row.get(k)) for k in columns})
    _write_atomic(path, buf.getvalue(), newline="")


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def _write_parquet(rows: list, columns: list, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    arrays = {}
    for name in columns:
        values = [row.get(name) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            numeric = all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)
            # counts beyond int64 (an `upper` of 1e19) become float64; mixed labels become text
            arrays[name] = pa.array([None if v is None else (float(v) if numeric else str(v)) for v in values])
    from bhtcli.io.write import atomic_file
    with atomic_file(path, "wb") as fh:
        pq.write_table(pa.table(arrays), fh)
