"""The run record: what a command read, so that an audit can be reproduced and cited.

:func:`run_record` gives, as plain JSON-safe data, the inputs as given (with the format, the
tensor chosen and its shape, from the headers: :mod:`bhtcli.io.shapes`), every regular file
the command read (:mod:`bhtcli.io.reads`: matrix files, a folder's config.json, index and
shards, answers and names files) with its size and SHA-256, and the bht version.

- The SHA-256 is streamed (1 MiB at a time; a phase tells the progress line), and skipped on
  request (``hashes=False``: huge checkpoints): then every ``sha256`` is None (JSON null).
- A symlink is hashed through (its target's bytes); ``path`` is the path as read, and
  ``symlink_to`` the file it resolves to (None for a plain file).
- Standard input and pipes (``-``, ``<(...)``) are listed among the inputs (format
  ``stream``) but have no entry in ``files``: their bytes were read once and not kept, so
  there is no size or hash to give; the record says so by their absence.
"""
from __future__ import annotations

import hashlib
import os

from bhtcli.errors import InputError, phase
from bhtcli.io import reads

CHUNK = 1 << 20                 # bytes hashed per read


def run_record(inputs, *, files=None, hashes: bool = True, engine: dict | None = None) -> dict:
    """The run record of a command that read `inputs`.

    Parameters
    ----------
    inputs : sequence
        The model inputs as given (paths, ``FILE:TENSOR``, ``DIR``, ``-``, or arrays).
    files : sequence of str, optional
        The files read; default: those of the current command (:func:`bhtcli.io.reads.files`),
        or, outside a command's session, the files the inputs' headers open.
    hashes : bool
        Compute each file's SHA-256 (False: every ``sha256`` is None).
    engine : dict, optional
        The engine's own record, where one ran (``bht prompts``); added as ``engine``.

    Returns
    -------
    dict
        ``{"bht_version": str, "inputs": [{"given", "format", "tensor", "shape", "stored"}],
        "files": [{"path", "size", "sha256", "symlink_to"}], "hashed": bool}`` and
        ``engine`` when given. ``given`` is None for an array (its ``format`` is ``array``).
    """
    inputs = list(inputs)
    if files is None:
        files = reads.files() or _header_files(inputs)
    record = {"bht_version": version(),
              "inputs": [_input(spec) for spec in inputs],
              "files": [file_record(path, hashes) for path in files],
              "hashed": bool(hashes)}
    if engine is not None:
        record["engine"] = engine
    return record


def file_record(path: str, hashes: bool = True) -> dict:
    """{"path", "size", "sha256", "symlink_to"} of one regular file (sha256 None unless
    `hashes`)."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise InputError(f"{path} could not be read to record it ({exc.strerror or exc}); "
                         "was it moved while the command ran?") from None
    return {"path": path,
            "size": size,
            "sha256": sha256(path) if hashes else None,
            "symlink_to": os.path.realpath(path) if os.path.islink(path) else None}


def sha256(path: str) -> str:
    """The SHA-256 of the file's bytes (hex), read 1 MiB at a time."""
    digest = hashlib.sha256()
    size = os.path.getsize(path)
    done = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
                done += len(chunk)
                if size > 64 * CHUNK and done % (64 * CHUNK) == 0:
                    phase(f"hashing {path}: {done >> 20:,} of {size >> 20:,} MB", done, size)
    except OSError as exc:
        raise InputError(f"{path} could not be read to hash it ({exc.strerror or exc}); "
                         "check the file, or skip hashing") from None
    return digest.hexdigest()


def version() -> str:
    """bht's version: ``bhtcli.settings.__version__`` when it declares one, else the
    installed distribution's, else "unknown"."""
    from bhtcli import settings
    declared = getattr(settings, "__version__", None)
    if isinstance(declared, str):
        return declared
    from importlib.metadata import PackageNotFoundError, version as installed
    try:
        return installed("bht")
    except PackageNotFoundError:
        return "unknown"


def _input(spec) -> dict:
    from bhtcli.io.shapes import describe
    try:
        source = describe(spec)
    except (InputError, OSError):         # read before, so not expected: record what was given
        given = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
        return {"given": given, "format": None, "tensor": None, "shape": None, "stored": None}
    return {"given": source.given, "format": source.kind, "tensor": source.tensor,
            "shape": [int(v) for v in source.shape] if source.shape is not None else None,
            "stored": source.dtype}


def _header_files(inputs) -> list:
    """The files the inputs' headers open (a folder's config.json, index and every shard;
    the config.json beside a .safetensors head), in order."""
    from bhtcli.io.checkpoint import checkpoint_softcap
    from bhtcli.io.shapes import describe, split_key
    with reads.capture() as read:
        for spec in inputs:
            if not isinstance(spec, (str, os.PathLike)) or os.fspath(spec) == "-":
                continue
            reads.record(split_key(os.fspath(spec))[0])
            try:
                describe(spec)
            except (InputError, OSError):
                pass
            checkpoint_softcap(spec)
    return list(read.paths.values())
