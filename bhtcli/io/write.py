"""Writing results: the one guard of output paths (:func:`check_output_path`, before any
work) and atomic writes (:func:`atomic_file`, :func:`save_array`, :func:`save_npy_atomic`): a
temporary file beside the target, fsync, os.replace; never over a file the command read
(bhtcli.io.reads). Reading inputs is bhtcli.io.load.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from bhtcli.errors import InputError, OutputError, parameter_name
from bhtcli.io import reads
from bhtcli.io.checkpoint import checkpoint_softcap
from bhtcli.io.shapes import split_key
from bhtcli.settings import OUT_FORMATS, OUT_SUFFIXES  # noqa: F401  (OUT_SUFFIXES: for callers)


def check_output_path(path: str, option: str | None = None, inputs=(), force: bool | None = False,
                      suffixes=None) -> str:
    """Fail early (before any work) on an output path that cannot be right.

    The one guard of every file-writing option (``--out``, ``--export``, ``--plot``): the
    folder must exist and be writable; `path` must not be a folder; with `suffixes`, its
    extension must be one of them; and it must not be any file that loading `inputs` (paths,
    ``FILE.npz:KEY``, checkpoints and ``-`` allowed) reads -- the file itself however spelled,
    a checkpoint folder's config.json, index and shards, the config.json beside a
    .safetensors head -- unless `force` (None: the caller has no force to suggest).
    :func:`atomic_file` checks the same again against every file the command read
    (bhtcli.io.reads).
    """
    option = parameter_name("out") if option is None else option
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{option} {path}: folder {folder} does not exist; create it first")
    if os.path.isdir(path):
        raise InputError(f"{option} {path} is a folder; give a file name such as x.npy")
    _check_writable(path, folder, option)
    if suffixes is not None:
        suffix = Path(path).suffix.lower()
        if suffix not in suffixes:
            raise InputError(f"{option} {path}: unknown extension {suffix or '(none)'!r}; the format is "
                             f"chosen by it: name the file with {_or(suffixes)}")
    with reads.capture() as read:
        for spec in inputs:
            _open_headers(spec)
    reads.refuse(path, option, read, force)
    return path


def _check_writable(path: str, folder: str, option: str) -> None:
    """Refuse, before any work, an output that could not be written at the end: a regular file
    is written as a temporary file in its folder (so the folder must take one; tried, because
    os.access is blind to read-only mounts and always says yes to root), a device or FIFO
    (/dev/stdout) in place."""
    if os.path.exists(path) and not os.path.isfile(path):
        if not os.access(path, os.W_OK):
            raise InputError(f"{option} {path}: permission denied; choose a file you can write")
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=".bht-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot write in folder {folder} "
                         f"({exc.strerror or exc}); choose a folder you can write to") from None
    try:
        os.close(fd)
    finally:
        os.unlink(probe)            # also when a signal lands here


def _or(items) -> str:
    items = list(items)
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else items[0]


def _open_headers(spec) -> None:
    """Record the files a load of `spec` opens, reading only headers and configs: the file
    itself, a checkpoint folder's config.json, index and shards, a GGUF header, the
    config.json beside a .safetensors head (the readers record them as they open them)."""
    if spec is None or not isinstance(spec, (str, os.PathLike)) or os.fspath(spec) == "-":
        return
    spec = os.fspath(spec)
    reads.record(split_key(spec)[0])
    checkpoint_softcap(spec)


def save_array(path: str, array, option: str | None = None) -> None:
    """Write `array` atomically in the format named by the extension of `path`.

    .npy: numpy's binary format; .csv: comma-separated rows (a vector: one value per line);
    .txt: the same with spaces; .json: a list (a vector) or a list of rows. Numbers are
    written with 17 significant digits, so every format reads back to the same float64.
    """
    option = parameter_name("out") if option is None else option
    arr = np.asarray(array, dtype=np.float64)
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        save_npy_atomic(path, arr, option)
    elif suffix in (".csv", ".txt"):
        sep = "," if suffix == ".csv" else " "
        rows = arr.reshape(-1, 1) if arr.ndim == 1 else arr
        text = "".join(sep.join(repr(float(v)) for v in row) + "\n" for row in rows)
        with atomic_file(path, "w", option=option, encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    elif suffix == ".json":
        with atomic_file(path, "w", option=option, encoding="utf-8") as fh:
            fh.write(json.dumps(arr.tolist()) + "\n")
    else:
        raise InputError(f"{option} {path}: unknown extension {suffix or '(none)'!r}; "
                         f"name the file with {OUT_FORMATS}")


def save_npy_atomic(path: str, array: np.ndarray, option: str | None = None) -> None:
    """Write `array` to `path` in .npy format via a temporary file and os.replace."""
    option = parameter_name("out") if option is None else option
    with atomic_file(path, "wb", option=option) as fh:
        np.save(fh, np.asarray(array, dtype=np.float64), allow_pickle=False)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", option: str | None = None, **kwargs):
    """Open a temporary file beside `path`; on success flush, fsync and rename it to `path`.

    A `path` that is a file the command read (bhtcli.io.reads) is refused, before the
    temporary file and again before the rename.

    The file gets the mode a plain open() would give (0666 less the umask), not mkstemp's
    0600. On any error the temporary file is removed and `path` is left as it was; an
    OSError (disk full, permission denied) becomes one OutputError naming `path`.
    """
    label = f"{option} {path}" if option else path
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    reads.refuse(path, option)
    if os.path.exists(path) and not os.path.isfile(path):   # /dev/stdout, a FIFO: written in place
        try:
            with open(path, mode, **kwargs) as fh:
                yield fh
            return
        except OSError as exc:
            raise OutputError(f"{label}: cannot write it ({exc.strerror or exc}); {_advice(exc)}") from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".bht-", suffix=".tmp", dir=folder)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        reads.refuse(path, option)     # nor a file read while it was written
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"{label}: cannot write it ({exc.strerror or exc}); {_advice(exc)}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp) -> None:
    if tmp is not None and os.path.exists(tmp):
        os.unlink(tmp)


def _advice(exc: OSError) -> str:
    import errno
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space or write elsewhere"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "choose a folder you can write to"
    return "check the path and the disk"
