"""Reading matrices (.npy, .npz, .safetensors, .csv/.txt, stdin); writing results is
bhtcli.io.write.

Which loads copy (see also :func:`bhtcli.io.validation.check_matrix`):

- ``.npy`` and ``.safetensors`` tensors already of the requested dtype: read-only memory
  map, no copy (pages are read from the file as the computation touches them);
- ``.npy``/``.safetensors`` of another dtype (float16, bfloat16, integers, float32 for a
  float64 computation, ...): one converted array, filled block by block from the memory map;
- ``.npz``, text and standard input: read into memory (zip members may be compressed), then
  converted when the dtype differs.

`design` and `bound` load with dtype=None (float32/float64 kept as stored) because everything
they compute from A and B converts row blocks itself: a float32 checkpoint is then never
copied to float64, whatever --dtype the products run in.
"""
from __future__ import annotations

import io
import math
import os
import sys
from pathlib import Path

import numpy as np

from bhtcli.errors import InputError, note
from bhtcli.io import reads
from bhtcli.io.npy_file import load_npy, npy_from_bytes, open_npz
from bhtcli.io.pickles import PICKLE_MAGICS, refuse_pickles
from bhtcli.io.checkpoint import read_checkpoint, split_checkpoint
from bhtcli.io.safetensors_file import read_safetensors
from bhtcli.io.shapes import TEXT_SUFFIXES, check_same_shape, shape_mismatch, split_key
from bhtcli.io.text import parse_json
from bhtcli.io.validation import MAX_ENTRY, check_matrix, check_pair

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
SLOW_TEXT_CELLS = 4_000_000   # a text matrix this large takes seconds to parse: say so
from bhtcli.settings import FORMATS  # noqa: E402


def load_matrix(spec, name: str | None = None, stdin=None, dtype=np.float64,
                max_entry: float = math.inf) -> np.ndarray:
    """Load and check one matrix.

    Parameters
    ----------
    spec : str, os.PathLike or array_like
        A path (``.npy``, ``.npz``, ``FILE.npz:KEY``, ``FILE.safetensors:TENSOR``,
        ``FILE.safetensors`` holding one 2-D tensor, ``.csv``/``.txt``), ``"-"`` for standard
        input (text or .npy bytes, told apart by the .npy magic string), or an array.
    name : str, optional
        How messages refer to the input; defaults to the path.
    stdin : binary file, optional
        Replaces ``sys.stdin.buffer`` (for tests).
    dtype : {"float64", "float32", None}
        Float type of the result (default float64); None keeps float32 and float64 data as
        stored (see :func:`bhtcli.io.validation.check_matrix`).

    Returns
    -------
    numpy.ndarray
        2-D finite matrix of `dtype`. A ``.npy`` file or ``.safetensors`` tensor already of
        that dtype is a read-only memory map (no copy); anything else is converted once
        (float16 and bfloat16 are up-cast block by block from the memory map).

    Raises
    ------
    InputError
        Any unreadable, unsupported or invalid input; the message names it and the fix.
    """
    if not isinstance(spec, (str, os.PathLike)):
        return check_matrix(spec, name or "matrix", dtype, max_entry)
    return check_matrix(read_array(spec, name, stdin, dtype=dtype), _label(spec, name, "matrix"), dtype,
                        max_entry)


def load_query(spec, length: int, name: str | None = None, what: str = "the query x") -> np.ndarray:
    """Load a query vector (any format load_matrix reads; (d,), (d, 1) or (1, d))."""
    from bhtcli.io.validation import check_query
    if not isinstance(spec, (str, os.PathLike)):
        return check_query(spec, name or "query", length, what)
    return check_query(np.asarray(read_array(spec, name)), _label(spec, name, "query"), length, what)


def load_vector(spec, length: int, option: str) -> np.ndarray:
    """A length-n vector such as a bias (any format read_array reads; (n,), (n, 1), (1, n)).

    `option` names it in messages (e.g. "--bias-a"). Arrays are accepted as they are.
    """
    label = f"{option} {os.fspath(spec)}" if isinstance(spec, (str, os.PathLike)) else option
    arr = np.asarray(read_array(spec, label) if isinstance(spec, (str, os.PathLike)) else spec)
    size = arr.shape[0] if arr.ndim == 1 else (max(arr.shape) if arr.ndim == 2 and 1 in arr.shape else None)
    if size is not None and size != length:
        raise InputError(f"{label} has {size} entries but the models have {length} rows; "
                         "a bias needs one entry per row (answer)")
    from bhtcli.io.validation import check_query
    return check_query(arr, label, length, what="a vector with one entry per row")


def read_array(spec, name: str | None = None, stdin=None, dtype=None) -> np.ndarray:
    """Read an array from a path or '-' without the matrix checks (see load_matrix).

    Any shape comes back (``FILE.safetensors:lm_head.bias`` gives a 1-D array), in the
    stored dtype: a ``.npy`` file or ``.safetensors`` tensor as a read-only memory map
    (float16 as float16, bfloat16 as ``ml_dtypes.bfloat16``; ``.astype`` up-casts them).
    ``FILE.gguf[:TENSOR]`` and checkpoint folders ``DIR[:TENSOR]`` are read by
    bhtcli.io.checkpoint (quantized GGUF tensors are dequantized into `dtype`, None: float32).
    """
    spec = os.fspath(spec)
    label = name or ("standard input" if spec == "-" else spec)
    if spec == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return _parse_bytes(stream.read(), label)
    checkpoint = split_checkpoint(spec)
    if checkpoint is not None:
        return read_checkpoint(*checkpoint, dtype=dtype)
    path, key = split_key(spec)
    suffix = Path(path).suffix.lower()
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file; check the path")
    if os.path.isdir(path):
        raise InputError(f"{path} is a folder, expected a matrix file ({FORMATS}) or a checkpoint folder")
    if key is not None and suffix not in (".npz", ".safetensors"):
        raise InputError(f"{spec}: ':KEY' selects an array inside a .npz or .safetensors file only")
    reads.record(path)
    try:
        if not suffix:                  # a pipe (<(...)), /dev/stdin or a bare name: sniff
            return _sniffed(path, key)
        known = TEXT_SUFFIXES | {".npy", ".npz", ".safetensors", ".json"}
        if suffix not in known:         # a name that may lie (model.bin): the bytes decide first
            arr = _sniffed_array(path, key)
            if arr is not None:
                return arr
        refuse_pickles(path, suffix, known=known)
        if suffix == ".npy":
            arr = load_npy(path)
        elif suffix == ".npz":
            arr = _load_npz(path, key)
        elif suffix == ".safetensors":
            arr = read_safetensors(path, key)
        elif suffix in TEXT_SUFFIXES:
            with open(path, "rb") as fh:
                arr = _parse_text(fh.read(), path)
        elif suffix == ".json":
            with open(path, "rb") as fh:
                arr = _parse_json(fh.read(), path)
        else:
            raise InputError(f"{path}: unknown extension {suffix or '(none)'!r}; "
                             f"use {FORMATS} (or - for standard input)")
    except PermissionError:
        raise InputError(f"{path}: permission denied; make the file readable") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a folder, expected a matrix file") from None
    return arr


def _sniffed(path: str, key: str | None) -> np.ndarray:
    """Read a file whose name says nothing (e.g. /dev/fd/63 from a shell's <(...)) by its
    bytes: the .npy magic, a zip (.npz), a safetensors header, a pickle (refused), else text."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(ZIP_MAGIC):
        return _load_npz(io.BytesIO(data), key, path)
    if data.startswith(b"GGUF"):
        from bhtcli.io.gguf_file import read_gguf_bytes
        return read_gguf_bytes(data, path, key)
    if _looks_like_safetensors(data):
        from bhtcli.io.safetensors_file import read_safetensors_bytes
        return read_safetensors_bytes(data, path, key)
    if data[:2] in PICKLE_MAGICS:
        raise InputError(f"{path} is a pickle; pickled files are refused because loading one runs "
                         "code stored in it: save the matrix with numpy.save instead")
    return _parse_bytes(data, path)


def _sniffed_array(path: str, key: str | None):
    """The array of a file whose extension is not a matrix format but whose bytes are .npy or
    safetensors (e.g. a safetensors file named model.bin); None for anything else."""
    with open(path, "rb") as fh:
        head = fh.read(16)
        size = os.fstat(fh.fileno()).st_size
    if head.startswith(NPY_MAGIC):
        return load_npy(path)
    if len(head) >= 9 and 2 <= int.from_bytes(head[:8], "little") <= size - 8 and head[8:9] == b"{":
        return read_safetensors(path, key)
    return None


def _looks_like_safetensors(data: bytes) -> bool:
    if len(data) < 10:
        return False
    size = int.from_bytes(data[:8], "little")
    return 2 <= size <= len(data) - 8 and data[8:9] == b"{"


def _load_npz(source, key: str | None, label: str | None = None) -> np.ndarray:
    """One array of a .npz archive (a path, or the bytes of a pipe in a BytesIO)."""
    label = label or source
    with open_npz(source, label) as archive:
        keys = list(archive.files)
        if key is None:
            if len(keys) != 1:
                raise InputError(f"{label} holds {len(keys)} arrays ({', '.join(keys) or 'none'}); "
                                 f"pick one with {label}:KEY")
            key = keys[0]
        if key not in keys:
            raise InputError(f"{label} has no array {key!r}; it holds: {', '.join(keys) or 'none'}")
        return archive[key]


def _parse_json(data: bytes, label: str) -> np.ndarray:
    """A JSON list of numbers (a vector) or of equal-length lists (a matrix), as --out writes."""
    # integers are read as floats (as CSV cells are): one beyond float64's range becomes inf,
    # which check_matrix names, instead of an OverflowError here
    value = parse_json(data, label, "a list of numbers or of rows", parse_int=float)
    if isinstance(value, dict) and "query" in value:   # a design --json result
        value = value["query"]
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise InputError(f"{label}: expected a JSON list of numbers or of equal-length rows of numbers") from None
    if arr.ndim not in (1, 2):
        raise InputError(f"{label}: expected a JSON list of numbers or of rows, got {arr.ndim} levels of lists")
    return arr


def _parse_bytes(data: bytes, label: str) -> np.ndarray:
    if data.lstrip()[:1] == b"[" or data.lstrip()[:1] == b"{":
        return _parse_json(data, label)
    if data.startswith(NPY_MAGIC):
        return npy_from_bytes(data, label)
    return _parse_text(data, label)


def _parse_text(data: bytes, label: str) -> np.ndarray:
    """Numbers separated by commas, semicolons, tabs or spaces (the delimiter is sniffed from the
    first row), one row per line; '#' starts a comment line; a first row that is not all
    numbers (a header) is skipped."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{label} is not text (nor .npy bytes); use UTF-8 CSV or a .npy file") from None
    lines = [(k, raw.strip()) for k, raw in enumerate(text.splitlines(), start=1)]
    lines = [(k, line) for k, line in lines if line and not line.startswith("#")]
    if not lines:
        raise InputError(f"{label} is empty; it needs at least one row of numbers")
    sep, split = _splitter(lines[0][1])
    first_cells = split(lines[0][1])
    header = None
    if len(lines) > 1 and not all(_is_float(c) for c in first_cells) and \
            len(first_cells) == len(split(lines[1][1])):
        header, lines = first_cells, lines[1:]      # a header row: names, not numbers
    if len(lines) * len(first_cells) > SLOW_TEXT_CELLS:
        note(f"{label}: reading {len(lines):,} rows of text, about {len(lines) * len(first_cells):,} "
             "numbers parsed one by one (some 2-5 million a second); numpy.save it once to a .npy "
             "file, which loads at once (memory-mapped)")
    arr = _fast_rows(lines, sep)
    if arr is None:
        arr = _checked_rows(lines, split, label)
    _refuse_index_column(header, arr, label)
    return arr


def _fast_rows(lines, sep):
    """The rows parsed by numpy's C reader (10-20x faster than a Python loop: 400,000 x 64
    cells in seconds rather than a minute), or None when it refuses anything: then
    _checked_rows reads them again, and says which cell and line are wrong. When it accepts,
    its values equal float() of every stripped cell (both parse with PyOS_string_to_double)."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.loadtxt([line for _, line in lines], delimiter=sep, dtype=np.float64,
                             comments=None, ndmin=2, quotechar=None)
    except (ValueError, TypeError, OverflowError):
        return None
    return arr if arr.shape[0] == len(lines) else None


def _checked_rows(lines, split, label: str) -> np.ndarray:
    """The rows parsed cell by cell with float(); the first bad cell or ragged row is an
    InputError naming its line."""
    rows, width, first_line = [], None, None
    for lineno, line in lines:
        cells = split(line)
        try:
            values = [float(c) for c in cells]
        except ValueError:
            bad = next(c for c in cells if not _is_float(c))
            raise InputError(f"{label}, line {lineno}: {bad!r} is not a number; "
                             "cells must be plain numbers (a header is only allowed on the first row)") from None
        if width is None:
            width, first_line = len(values), lineno
        elif len(values) != width:
            raise InputError(f"{label}, line {lineno}: {len(values)} values but line {first_line} has "
                             f"{width}; every row needs the same number of columns")
        rows.append(values)
    return np.array(rows, dtype=np.float64)


def _refuse_index_column(header, arr: np.ndarray, label: str) -> None:
    """pandas' to_csv writes the row index as an unnamed first column (header ',0,1,...'): read
    as data it would add a column to the model, silently. Refuse it, naming it."""
    if header is None or header[0].strip() not in ("", "Unnamed: 0") or arr.shape[1] < 2:
        return
    first = arr[:, 0]
    if np.all(first == np.round(first)):
        raise InputError(f"{label}: the first column has no name in the header and holds whole "
                         "numbers: a row index (pandas' to_csv writes one), not model data; save "
                         "with df.to_csv(path, index=False) or delete that column")


def _splitter(first: str):
    """(separator, how to cut a row into cells), from the first row: ';', tab, ',' or runs of
    spaces (separator None)."""
    for sep in (";", "\t", ","):
        if sep in first:
            return sep, lambda line, sep=sep: [c.strip() for c in line.split(sep)]
    return None, str.split


def _is_float(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def load_pair(A, B, name_a: str | None = None, name_b: str | None = None, dtype=np.float64):
    """Load and check both models (as `dtype`, see load_matrix); they must have the same shape."""
    if isinstance(A, str) and isinstance(B, str) and A == "-" and B == "-":
        raise InputError("A and B cannot both be read from standard input; give one as a file")
    check_same_shape([A, B], [_label(A, name_a, "A"), _label(B, name_b, "B")])   # before reading
    A_ = load_matrix(A, name_a or (A if isinstance(A, (str, os.PathLike)) else "A"), dtype=dtype,
                     max_entry=MAX_ENTRY)
    B_ = load_matrix(B, name_b or (B if isinstance(B, (str, os.PathLike)) else "B"), dtype=dtype,
                     max_entry=MAX_ENTRY)
    check_pair(A_, B_, _label(A, name_a, "A"), _label(B, name_b, "B"))
    return A_, B_


def load_models(models, names, dtype=None) -> list:
    """Load and check K models (as `dtype`, see load_matrix), all of the same shape.

    Shapes the headers give are compared first (:func:`bhtcli.io.shapes.check_same_shape`),
    so models of different shapes are refused before any is read or dequantized; the loaded
    matrices are compared again (text, standard input and pipes have no header).

    Raises
    ------
    InputError
        Two models of different shapes ("model k (NAME) has shape ..."), more than one model
        read from standard input, or any input load_matrix refuses.
    """
    models, names = list(models), list(names)
    if sum(1 for m in models if isinstance(m, str) and m == "-") > 1:
        raise InputError("at most one model can be read from standard input; give the others as files")
    check_same_shape(models, names, numbered=True)
    mats = [load_matrix(m, name, dtype=dtype) for m, name in zip(models, names)]
    for k in range(1, len(mats)):
        if mats[k].shape != mats[0].shape:
            raise shape_mismatch(names, 0, mats[0].shape, k, mats[k].shape, numbered=True)
    return mats


def _label(spec, name, default):
    if name:
        return name
    if isinstance(spec, (str, os.PathLike)):
        return "standard input" if os.fspath(spec) == "-" else os.fspath(spec)
    return default
