"""The files a command read, so that no output is ever written over one of them.

Every reader in bhtcli/io records the files it opens (:func:`record`): a matrix file, a
checkpoint folder's config.json, index and shards, the config.json beside a .safetensors file
whose softcap it supplied, a GGUF file, an answers or names file, a manifest. The one guard of
outputs refuses a path that is one of them, the same file however it is spelled (a symlink, a
hard link, ``sub/../A.npy``): :func:`bhtcli.io.write.check_output_path` before any work,
against the files its inputs' headers open, and :func:`bhtcli.io.write.atomic_file` at the
write, against every file the command read so far.

The record lives for one command invocation (:func:`input_session`; the CLI opens one per
command), across its threads: one command at a time per process. Outside a session nothing is
kept, so a long-lived Python process does not accumulate reads; check_output_path then still
refuses the files its inputs' headers open. The same record lists, for the run record
(:mod:`bhtcli.io.run_record`), the files a command read (:func:`files`).
"""
from __future__ import annotations

import contextlib
import os
import stat
import threading

from bhtcli.errors import InputError, parameter_name

_lock = threading.Lock()
_scopes: list = []              # the open sessions and captures, outermost first: _Reads
_forced: dict = {}              # output key -> force as check_output_path was given it


class _Reads(set):
    """The keys of the files read in one scope (a set), and `paths`: each file's real path ->
    the path it was first read by, in the order read."""

    def __init__(self):
        super().__init__()
        self.paths: dict = {}


def record(path) -> None:
    """Note that the current command reads `path` (a regular file; anything else is ignored)."""
    if not _scopes or not isinstance(path, (str, os.PathLike)):
        return
    path = os.fspath(path)
    keys = _keys(path)
    if keys:
        with _lock:
            for scope in _scopes:
                scope.update(keys)
                scope.paths.setdefault(_key_of(path), path)


def files() -> list:
    """The regular files the current command has read, each once (by the path it was first
    read by), in the order read; [] outside a session."""
    with _lock:
        return list(_scopes[0].paths.values()) if _scopes else []


@contextlib.contextmanager
def input_session():
    """The reads of one command invocation; inside an open session, that session."""
    if _scopes:
        yield
        return
    with _scope(_Reads()):
        try:
            yield
        finally:
            _forced.clear()


@contextlib.contextmanager
def capture():
    """The set of files read inside the block (also recorded in the enclosing session); its
    `paths` lists them by the path each was read by, in order."""
    read = _Reads()
    with _scope(read):
        yield read


@contextlib.contextmanager
def _scope(read: _Reads):
    with _lock:
        _scopes.append(read)
    try:
        yield
    finally:
        with _lock:
            _scopes.remove(read)


def refuse(path: str, option: str | None, read=None, force: bool | None = False) -> None:
    """InputError when `path` is one of the files `read` (default: every file the current
    session read), unless `force`; None: the caller has no --force to suggest.

    The answer of the last call for this path is remembered for the session: the write
    (`read` and `force` left out) then honours the --force given, and suggests it only where
    the command has one.
    """
    keys = _keys(path)
    if read is None:
        if not _scopes:
            return
        force = _forced.get(_key_of(path))
        read = _scopes[0]
    elif _scopes:
        _forced[_key_of(path)] = force
    if force or not keys & read:
        return
    hint = "" if force is None else f" (or add {parameter_name('force')})"
    label = f"{option} {path}" if option else path
    raise InputError(f"{label} is also an input of this command; writing it would replace the "
                     f"input: choose another name{hint}")


def _keys(path: str) -> set:
    """How a regular file is recognised: its device and inode, and its resolved path."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return set()
    if not stat.S_ISREG(st.st_mode):
        return set()
    return {("inode", st.st_dev, st.st_ino), ("path", os.path.realpath(path))}


def _key_of(path: str) -> str:
    return os.path.realpath(path)
