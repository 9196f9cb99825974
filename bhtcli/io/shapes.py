"""What an input holds, from its headers alone: its format, the tensor a load would read and
that matrix's shape, so that models of different shapes are refused before anything is read,
converted or dequantized (dequantizing a 262,144-row GGUF head takes seconds).

Headers give the shape of a .npy file, a .npz member, a .safetensors tensor, a GGUF tensor and
a checkpoint folder's tensor (its config.json, index and the holding shard's header). Text
files, standard input and pipes (``<(...)``, whose bytes can be read only once) say nothing
until they are read: their shape is None here, and the loaded matrices are compared as before
(:func:`bhtcli.io.validation.check_pair`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from bhtcli.errors import InputError

TEXT_SUFFIXES = {".csv", ".txt", ".tsv", ".dat"}


@dataclass(frozen=True)
class Source:
    """One input as its headers describe it."""

    given: str | None          # the input as given (None: an array)
    kind: str                  # npy, npz, safetensors, gguf, folder, text, json, stream, array, unknown
    path: str | None           # the file or folder read (None: standard input, an array)
    tensor: str | None         # the tensor (or .npz key) a load reads; None: the file's one array
    shape: tuple | None        # as loaded (numpy order); None when only the data would tell
    dtype: str | None          # as stored: "float32", "Q8_0", "F16", ...


def split_key(spec: str):
    """'file.npz:key' -> ('file.npz', 'key'); 'f.safetensors:lm_head.weight', 'm.gguf:T' and
    'DIR:T' likewise; a Windows drive letter or a plain path -> (spec, None)."""
    from bhtcli.io.checkpoint import split_checkpoint
    from bhtcli.io.safetensors_file import split_tensor_name
    path, tensor = split_tensor_name(spec)
    if tensor is not None:
        return path, tensor
    checkpoint = split_checkpoint(spec)
    if checkpoint is not None:
        return checkpoint[1], checkpoint[2]
    head, sep, tail = spec.rpartition(":")
    if sep and head.lower().endswith(".npz") and tail:
        return head, tail
    return spec, None


def describe(spec) -> Source:
    """The :class:`Source` of `spec` (a path as :func:`bhtcli.io.load.read_array` takes it,
    ``-``, or an array), reading headers only.

    Raises
    ------
    InputError
        A damaged header, an unknown tensor, a folder without a head: what loading `spec`
        would also say.
    """
    if not isinstance(spec, (str, os.PathLike)):
        shape = getattr(spec, "shape", None)
        return Source(None, "array", None, None, tuple(shape) if shape is not None else None,
                      str(getattr(spec, "dtype", "")) or None)
    given = os.fspath(spec)
    if given == "-":
        return Source(given, "stream", None, None, None, None)
    from bhtcli.io.checkpoint import split_checkpoint
    checkpoint = split_checkpoint(given)
    if checkpoint is not None and checkpoint[0] == "folder":
        return _folder(given, checkpoint[1], checkpoint[2])
    path, key = split_key(given)
    if not os.path.isfile(path):                    # a pipe, /dev/stdin, a missing file
        kind = "gguf" if checkpoint is not None else ("stream" if os.path.exists(path) else "unknown")
        return Source(given, kind, path, key, None, None)
    if checkpoint is not None:
        return _gguf(given, path, key)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return _npy(given, path)
    if suffix == ".npz":
        return _npz(given, path, key)
    if suffix == ".safetensors":
        return _safetensors(given, path, key)
    if suffix in TEXT_SUFFIXES or suffix == ".json":
        return Source(given, suffix[1:] if suffix == ".json" else "text", path, None, None, None)
    return _sniffed(given, path, key)


def header_shape(spec) -> tuple | None:
    """The (n, d) matrix a load of `spec` gives, from headers; None when only reading the data
    would tell, the headers are damaged, or the shape is not a non-empty 2-D one (loading then
    says what is wrong, in its own words)."""
    try:
        shape = describe(spec).shape
    except (InputError, OSError):
        return None
    if shape is None or len(shape) != 2 or 0 in shape:
        return None
    return tuple(int(v) for v in shape)


def check_same_shape(specs, names, numbered: bool = False) -> None:
    """Refuse models of different shapes from their headers, before any is read.

    Parameters
    ----------
    specs : sequence
        The models as :func:`bhtcli.io.load.load_matrix` takes them (paths, ``-``, arrays).
    names : sequence of str
        How messages name each model.
    numbered : bool
        Messages say "model k (NAME)" (K models) instead of NAME (a pair).

    Raises
    ------
    InputError
        Two models whose headers give different shapes; the message names both and their
        shapes. Models whose shape the headers do not give are left to the loaded check.
    """
    known = [(k, shape) for k, shape in enumerate(map(header_shape, specs)) if shape is not None]
    for k, shape in known[1:]:
        j, first = known[0]
        if shape != first:
            raise shape_mismatch(names, j, first, k, shape, numbered)


def shape_mismatch(names, j: int, first: tuple, k: int, shape: tuple, numbered: bool) -> InputError:
    """The one message for models j and k of different shapes (from headers or loaded)."""
    if numbered:
        return InputError(f"model {k + 1} ({names[k]}) has shape {shape} but model {j + 1} "
                          f"({names[j]}) has shape {first}; all models need the same number of "
                          "rows (answers) and columns (query size)")
    return InputError(f"{names[j]} has shape {first} but {names[k]} has shape {shape}; both "
                      "models need the same number of rows (answers) and columns (query size)")


def _npy(given: str, path: str) -> Source:
    from bhtcli.io.npy_file import npy_header
    header = npy_header(path)
    return Source(given, "npy", path, None, tuple(header.shape), header.dtype.name)


def _npz(given: str, path: str, key: str | None) -> Source:
    from bhtcli.io.npy_file import open_npz
    with open_npz(path, path) as archive:
        if key is None and len(archive.files) == 1:
            key = archive.files[0]
        if key is None or key not in archive:
            return Source(given, "npz", path, key, None, None)
        header = archive.header(key)
    return Source(given, "npz", path, key, tuple(header.shape), header.dtype.name)


def _safetensors(given: str, path: str, tensor: str | None) -> Source:
    from bhtcli.io.safetensors_file import chosen_tensor
    name, info = chosen_tensor(path, tensor)
    return Source(given, "safetensors", path, name, tuple(info["shape"]), info["dtype"])


def _gguf(given: str, path: str, tensor: str | None) -> Source:
    from bhtcli.io.gguf_file import open_gguf
    header, _ = open_gguf(path)
    name = tensor if tensor is not None else header.head()[0]
    info = header.tensors.get(name)
    if info is None:
        return Source(given, "gguf", path, name, None, None)
    return Source(given, "gguf", path, name, tuple(info.shape), info.type_name)


def _folder(given: str, path: str, tensor: str | None) -> Source:
    from bhtcli.io.hf_folder import choose_tensor, open_folder, shard_info
    folder = open_folder(path)
    name = choose_tensor(folder, tensor, quiet=True)
    info = shard_info(folder, name)
    return Source(given, "folder", path, name, tuple(info["shape"]), info["dtype"])


def _sniffed(given: str, path: str, key: str | None) -> Source:
    """A regular file whose name says nothing (model.bin): its first bytes decide, as the
    reader's do (.npy magic, a safetensors header); anything else: shape unknown."""
    with open(path, "rb") as fh:
        head = fh.read(16)
        size = os.fstat(fh.fileno()).st_size
    if head.startswith(b"\x93NUMPY"):
        return _npy(given, path)
    if len(head) >= 9 and 2 <= int.from_bytes(head[:8], "little") <= size - 8 and head[8:9] == b"{":
        return _safetensors(given, path, key)
    return Source(given, "unknown", path, key, None, None)
