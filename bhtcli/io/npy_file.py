"""Reading .npy files and .npz archives without trusting their headers.

numpy's own reader is written for files numpy wrote: a header that is not a Python literal
goes through ``tokenize`` (a ``TokenError`` escapes), a header over 10 kB is reported as a
pickle, and the array is allocated at the declared size before a byte of data is read (a
300-byte file declaring 80 GB ends in a MemoryError; a truncated download in a ValueError).
Here the header is parsed once, checked (keys, dtype, a shape numpy can hold), and its
declared size compared with the bytes present before anything is mapped or read: a .npy file
is memory-mapped read-only (no copy); bytes already in memory (standard input) are viewed in
place; a zip member is read only after its size is checked against the member and the memory
budget (:mod:`bhtcli.io.limits`). Every failure is one InputError. Object arrays are refused,
never unpickled.
"""
from __future__ import annotations

import ast
import bz2  # noqa: F401  (zipfile's bzip2 members raise OSError/ValueError from it)
import contextlib
import io
import lzma
import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from bhtcli.errors import InputError
from bhtcli.io.limits import check_allocation, check_dims

MAGIC = b"\x93NUMPY"
MAX_HEADER = 1 << 20          # numpy writes ~128 bytes; anything near this is not a matrix
KEYS = {"descr", "fortran_order", "shape"}
NPY_FIX = "re-save it with numpy.save"
NPZ_FIX = "re-save it with numpy.savez"
PICKLED = {NPY_FIX: "holds a pickled/object array, which bht refuses to load (it can run code); "
                    "save a float array with numpy.save",
           NPZ_FIX: "holds a pickled/object array, which bht refuses to load; "
                    "save float arrays with numpy.savez"}
# every way the zip layer reports a damaged archive or member (zlib and lzma have their own;
# zipfile itself lets IndexError and KeyError out of some malformed directories)
ZIP_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error,
              lzma.LZMAError, NotImplementedError, RuntimeError, struct.error, OverflowError,
              IndexError, KeyError)


@dataclass(frozen=True)
class NpyHeader:
    """A checked .npy header: what the data must be, and where it starts."""

    shape: tuple
    dtype: np.dtype
    fortran: bool
    offset: int                # bytes before the data
    nbytes: int                # bytes of data the shape and dtype declare


def read_header(fh, label: str, fix: str = NPY_FIX) -> NpyHeader:
    """Parse and check the .npy header at the start of the binary stream `fh`.

    Raises
    ------
    InputError
        No .npy magic, an unknown version, a header that is truncated, too long, not a
        Python literal of the three numpy keys, an unknown or object dtype, an impossible
        shape.
    """
    bad = f"{label} is not a valid .npy file"
    lead = fh.read(len(MAGIC) + 2)
    if len(lead) < len(MAGIC) + 2 or not lead.startswith(MAGIC):
        raise InputError(f"{bad} (no .npy header); {NPY_FIX}")
    version = (lead[6], lead[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise InputError(f"{bad} (format version {version[0]}.{version[1]}; numpy writes 1.0-3.0); {NPY_FIX}")
    fmt = "<H" if version == (1, 0) else "<I"
    raw = fh.read(struct.calcsize(fmt))
    if len(raw) < struct.calcsize(fmt):
        raise InputError(f"{bad} (it ends inside its header: truncated?); {NPY_FIX}")
    (length,) = struct.unpack(fmt, raw)
    if length > MAX_HEADER:
        raise InputError(f"{bad} (a header of {length:,} bytes; numpy writes about 128); {NPY_FIX}")
    text = fh.read(length)
    if len(text) < length:
        raise InputError(f"{bad} (it ends inside its header: truncated?); {NPY_FIX}")
    shape, dtype, fortran = _fields(text, version, label, fix)
    count = check_dims(shape, dtype.itemsize, f"{label} (.npy header)")
    return NpyHeader(shape, dtype, fortran, len(MAGIC) + 2 + len(raw) + length, count * dtype.itemsize)


def _fields(text: bytes, version: tuple, label: str, fix: str):
    bad = f"{label} is not a valid .npy file"
    try:
        header = text.decode("utf-8" if version == (3, 0) else "latin-1")
    except UnicodeDecodeError:
        raise InputError(f"{bad} (its header is not text); {NPY_FIX}") from None
    value = _literal(header)
    if value is None and version == (1, 0):     # Python 2's numpy wrote longs: (3L, 4L)
        value = _literal(re.sub(r"(\d+)L\b", r"\1", header))
    if not isinstance(value, dict) or set(value) != KEYS:
        raise InputError(f"{bad} (its header is not numpy's {{'descr', 'fortran_order', 'shape'}} "
                         f"dictionary); {NPY_FIX}")
    shape, fortran = value["shape"], value["fortran_order"]
    if not isinstance(shape, tuple) or not isinstance(fortran, bool):
        raise InputError(f"{bad} (its header's shape or fortran_order is malformed); {NPY_FIX}")
    try:
        dtype = np.lib.format.descr_to_dtype(value["descr"])
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError,
            SyntaxError, MemoryError):     # numpy parses some dtype strings with literal_eval
        raise InputError(f"{bad} (its header names an unknown dtype {value['descr']!r:.60}); "
                         f"{NPY_FIX}") from None
    if dtype.hasobject:
        raise InputError(f"{label} {PICKLED[fix]}")
    return shape, dtype, fortran


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None


def _check_present(header: NpyHeader, present: int, label: str, fix: str = NPY_FIX) -> None:
    if present < header.nbytes:
        raise InputError(f"{label} is not a valid .npy file: its header declares "
                         f"{'x'.join(map(str, header.shape)) or 'a scalar'} {header.dtype} "
                         f"({header.nbytes:,} bytes of data) but {max(present, 0):,} bytes follow "
                         f"(truncated?); {fix}")


def _view(data, header: NpyHeader, label: str, offset: int = 0) -> np.ndarray:
    """The array of `header` over the buffer `data` (its data at `offset`), without a copy."""
    order = "F" if header.fortran else "C"
    try:
        if header.nbytes == 0:
            return np.zeros(header.shape, dtype=header.dtype, order=order)
        flat = np.frombuffer(data, dtype=header.dtype, count=header.nbytes // header.dtype.itemsize, offset=offset)
        return flat.reshape(header.shape, order=order)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{label} is not a valid .npy file ({exc}); {NPY_FIX}") from None


def npy_header(path: str) -> NpyHeader:
    """The checked header of a .npy file whose data is all present (InputError otherwise)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        header = read_header(fh, path)
    _check_present(header, size - header.offset, path)
    return header


def load_npy(path: str) -> np.ndarray:
    """A .npy file as a read-only memory map (an in-memory array when it holds no data)."""
    header = npy_header(path)
    if header.nbytes == 0:
        return _view(b"", header, path)
    try:
        return np.memmap(path, dtype=header.dtype, mode="r", offset=header.offset,
                         shape=header.shape, order="F" if header.fortran else "C")
    except (ValueError, OSError) as exc:
        raise InputError(f"{path} could not be mapped as .npy ({exc}); {NPY_FIX}") from None


def npy_from_bytes(data: bytes, label: str) -> np.ndarray:
    """The array of .npy bytes already in memory (standard input), viewed in place."""
    header = read_header(io.BytesIO(data), label)
    _check_present(header, len(data) - header.offset, label)
    return _view(data, header, label, header.offset)


def npy_from_stream(fh, size: int, label: str, fix: str = NPY_FIX) -> np.ndarray:
    """The array of a .npy stream of `size` bytes (a zip member), read once its declared size
    is known to fit the stream and the memory budget."""
    header = read_header(fh, label, fix)
    _check_present(header, size - header.offset, label, fix)
    check_allocation(header.nbytes, label)
    data = fh.read(header.nbytes)
    _check_present(header, len(data), label, fix)
    return _view(data, header, label)


class NpzArchive:
    """The .npy members of a zip archive, read one at a time (``files``: names without .npy)."""

    def __init__(self, archive: zipfile.ZipFile, label: str):
        self._zip, self.label = archive, label
        self._members = {m.filename[:-4] if m.filename.endswith(".npy") else m.filename: m
                         for m in archive.infolist() if not m.filename.endswith("/")}
        self.files = list(self._members)

    def __contains__(self, key) -> bool:
        return key in self._members

    def __getitem__(self, key: str) -> np.ndarray:
        with self._zip.open(self._member(key)) as fh:
            return npy_from_stream(fh, self._members[key].file_size, self.label, NPZ_FIX)

    def header(self, key: str) -> NpyHeader:
        """The checked .npy header of member `key` (its data present), the data left unread."""
        with self._zip.open(self._member(key)) as fh:
            header = read_header(fh, self.label, NPZ_FIX)
        _check_present(header, self._members[key].file_size - header.offset, self.label, NPZ_FIX)
        return header

    def _member(self, key: str):
        info = self._members[key]
        if not info.filename.endswith(".npy"):
            raise InputError(f"{self.label}:{key} is not an array (a .npz member must be a .npy "
                             f"file); {NPZ_FIX}")
        return info


@contextlib.contextmanager
def open_npz(source, label: str | None = None):
    """A .npz archive (a path or a binary file object) as an :class:`NpzArchive`; every failure
    inside the block (opening, reading a member) becomes one InputError naming `label`."""
    label = label or os.fspath(source)
    from bhtcli.io import reads
    reads.record(source)                # a path; a file object is not recorded
    try:
        with zipfile.ZipFile(source) as archive:
            yield NpzArchive(archive, label)
    except InputError:
        raise
    except PermissionError:
        raise InputError(f"{label}: permission denied; make the file readable") from None
    except ZIP_ERRORS as exc:
        raise InputError(f"{label} is not a valid .npz file ({_one_line(exc)}); {NPZ_FIX}") from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
