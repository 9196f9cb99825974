"""`tensors`: what a checkpoint or archive holds (name, shape, stored type, bytes), which tensor
bht reads as the head, and the softcap the checkpoint declares. Only headers are read from
files; a pipe (``<(cat model.gguf)``) or standard input (``-``) is read whole, as every other
command reads them, and recognised by its first bytes."""
from __future__ import annotations

import io
import json
import math
import os
import sys
import zipfile

import numpy as np

from bhtcli.errors import InputError
from bhtcli.io.npy_file import ZIP_ERRORS
from bhtcli.results import TensorsResult


def list_tensors(path, stdin=None) -> TensorsResult:
    """The tensors of a .gguf or .safetensors file, a Hugging Face checkpoint folder, a .npz
    archive or a .npy file (headers only; nothing is read into memory). A file whose name has
    none of these suffixes (a pipe such as ``<(cat model.gguf)``, ``/dev/stdin``) and standard
    input (``-``, read from `stdin`, default ``sys.stdin.buffer``) are recognised by their
    first bytes.

    Raises
    ------
    InputError
        A missing, unreadable or damaged file, or one of another format.
    """
    path = os.fspath(path)
    if path == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return _by_content("standard input", stream.read())
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file or folder; check the path")
    lower = path.lower()
    if os.path.isdir(path):
        return _folder(path)
    if lower.endswith(".gguf"):
        return _gguf(path)
    if lower.endswith(".safetensors"):
        return _safetensors(path)
    if lower.endswith(".npz"):
        return _npz(path)
    if lower.endswith(".npy"):
        return _npy(path)
    try:
        with open(path, "rb") as fh:
            if os.path.isfile(path):      # a regular file under another name: its first bytes
                return _by_content(path, fh.read(16), regular=True)
            return _by_content(path, fh.read())       # a pipe: read once, whole
    except PermissionError:
        raise InputError(f"{path}: permission denied; make the file readable") from None


def _by_content(label: str, data: bytes, regular: bool = False) -> TensorsResult:
    """Dispatch on the first bytes: GGUF, .npy, zip (.npz), safetensors. `data` is the whole
    stream, or with `regular` the first bytes of the file `label` (then read as a path)."""
    from bhtcli.io.load import NPY_MAGIC, ZIP_MAGIC
    if data.startswith(b"GGUF"):
        return _gguf(label) if regular else _gguf(label, data)
    if data.startswith(NPY_MAGIC):
        return _npy(label, None if regular else io.BytesIO(data))
    if data.startswith(ZIP_MAGIC):
        return _npz(label, None if regular else io.BytesIO(data))
    if len(data) >= 9 and data[8:9] == b"{":
        return _safetensors(label) if regular else _safetensor_stream(label, data)
    what = "file" if regular else "stream"
    raise InputError(f"{label}: bht tensors lists .gguf, .safetensors, .npz and .npy files and "
                     f"checkpoint folders, and this {what}'s first bytes are none of these formats")


def _result(path, fmt, rows, head=None, tied=None, softcap=None, arch=None) -> TensorsResult:
    shape = next((r["shape"] for r in rows if r["name"] == head), None)
    n, d = (shape if shape is not None and len(shape) == 2 else (None, None))
    return TensorsResult(path, fmt, rows, sum(r["bytes"] for r in rows), head,
                         tied if head is not None else None, softcap, arch, n=n, d=d)


def _row(name, shape, dtype, nbytes) -> dict:
    return {"name": name, "shape": [int(v) for v in shape], "dtype": dtype, "bytes": int(nbytes)}


def _gguf(path, data: bytes | None = None):
    from bhtcli.io.gguf_file import open_gguf, parse_header
    return _gguf_listing(open_gguf(path)[0] if data is None else parse_header(memoryview(data), path))


def _gguf_listing(header):
    path = header.label
    rows = [_row(t.name, t.shape, t.type_name, t.nbytes) for t in header.tensors.values()]
    head, tied = header.head()
    return _result(path, "gguf", rows, head, tied, header.softcap, header.architecture)


def _safetensor_rows(file, names=None) -> list:
    from bhtcli.io.safetensors_file import tensor_infos
    infos = tensor_infos(file)
    return [_row(k, v["shape"], v["dtype"], v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in infos.items() if names is None or names.get(k) == file]


def _folder(path):
    from bhtcli.io.hf_folder import open_folder
    folder = open_folder(path)
    rows = []
    for shard in dict.fromkeys(folder.weight_map.values()):
        rows += _safetensor_rows(shard, folder.weight_map)
    order = {name: k for k, name in enumerate(folder.weight_map)}
    rows.sort(key=lambda r: order.get(r["name"], len(order)))
    head, tied = folder.head()
    if tied and not folder.has_config:
        head, tied = None, None     # nothing says the embedding is the head: FILE alone is refused
    arch = folder.config.get("model_type")
    return _result(path, "folder", rows, head, tied, folder.softcap,
                   arch if isinstance(arch, str) else None)


def _safetensors(path):
    from bhtcli.io.checkpoint import checkpoint_softcap
    return _safetensor_listing(path, _safetensor_rows(path), checkpoint_softcap(path))


def _safetensor_listing(path, rows, softcap):
    from bhtcli.io.hf_folder import Folder
    two_d = [r["name"] for r in rows if len(r["shape"]) == 2]
    head, tied = Folder(path, {r["name"]: path for r in rows}, {}).head()
    if head is None and (len(rows) == 1 or len(two_d) == 1):    # what FILE alone reads
        head, tied = (rows[0]["name"] if len(rows) == 1 else two_d[0]), False
    return _result(path, "safetensors", rows, head, tied, softcap)


def _safetensor_stream(label: str, data: bytes):
    """Safetensors bytes from a pipe: listed from the header once the package has validated
    the whole stream (it has no header-only reader for bytes)."""
    from bhtcli.io.safetensors_file import read_safetensors_bytes
    try:
        header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
        header.pop("__metadata__", None)
        rows = [_row(k, v["shape"], v["dtype"], v["data_offsets"][1] - v["data_offsets"][0])
                for k, v in header.items()]
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError):
        raise InputError(f"{label} is not a valid .safetensors stream (its header is not the "
                         "format's JSON); re-save it with safetensors.numpy.save_file") from None
    if rows:
        read_safetensors_bytes(data, label, rows[0]["name"])    # validates every tensor
    return _safetensor_listing(label, rows, None)


def _npy_header(fh, label):
    from bhtcli.io.npy_file import read_header
    header = read_header(fh, label)
    return header.shape, header.dtype


def _npz(path, stream=None):
    rows = []
    try:
        with zipfile.ZipFile(path if stream is None else stream) as archive:
            for member in archive.namelist():
                if not member.endswith(".npy"):
                    continue
                with archive.open(member) as fh:
                    shape, dtype = _npy_header(fh, f"{path}:{member[:-4]}")
                rows.append(_row(member[:-4], shape, dtype.name, dtype.itemsize * math.prod(shape)))
    except ZIP_ERRORS as exc:
        raise InputError(f"{path} is not a valid .npz file ({exc}); re-save it with numpy.savez") from None
    head = rows[0]["name"] if len(rows) == 1 else None
    return _result(path, "npz", rows, head, False)


def _npy(path, stream=None):
    try:
        with (open(path, "rb") if stream is None else stream) as fh:
            shape, dtype = _npy_header(fh, path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a valid .npy file ({exc}); re-save it with numpy.save") from None
    name = os.path.basename(path)
    return _result(path, "npy", [_row(name, shape, dtype.name, dtype.itemsize * math.prod(shape))],
                   name, False)


# --- two builds: which tensors differ ------------------------------------------------------
BLOCK_VALUES = 1 << 22             # values per compared block of rows (16 MB of float32 a side)


def compare_tensors(path, other, *, values: bool = True, stdin=None, progress=None) -> TensorsResult:
    """FILE's listing and which of its tensors differ from OTHER's (two GGUF files, or pipes;
    one of them may be ``-``, standard input).

    A tensor is identical when both files store it with the same type and the same bytes;
    otherwise both are read as float32 (dequantized a block of rows at a time, so memory holds
    two blocks) and compared: max |T_other - T_file| (null when the shapes differ; with
    `values` False, null too: stored differently, values not read).

    Raises
    ------
    InputError
        Either file missing, damaged or not GGUF.
    """
    from dataclasses import replace

    from bhtcli.io.gguf_file import row_blocks
    if os.fspath(path) == "-" and os.fspath(other) == "-":
        raise InputError("FILE and OTHER cannot both be read from standard input; give one as a file")
    (ha, ba), (hb, bb) = _gguf_source(path, stdin), _gguf_source(other, stdin)
    differ, identical = [], 0
    common = [name for name in ha.tensors if name in hb.tensors]
    for k, name in enumerate(common):
        ta, tb = ha.tensors[name], hb.tensors[name]
        if (ta.type_name, ta.shape) == (tb.type_name, tb.shape) and \
                np.array_equal(ba[ta.offset:ta.offset + ta.nbytes], bb[tb.offset:tb.offset + tb.nbytes]):
            identical += 1
            continue
        if progress:
            progress("comparing tensors", k, len(common))
        worst = None
        if values and ta.shape == tb.shape and ta.shape:
            step = max(1, BLOCK_VALUES // ta.shape[-1])
            worst = 0.0
            for a, b in zip(row_blocks(ba, ta, step), row_blocks(bb, tb, step)):
                with np.errstate(invalid="ignore"):
                    worst = max(worst, float(np.max(np.abs(b.astype(np.float64) - a), initial=0.0)))
        differ.append({"name": name, "shape": list(ta.shape), "other_shape": list(tb.shape),
                       "dtype": ta.type_name, "other_dtype": tb.type_name, "max_abs_error": worst})
    return replace(_gguf_listing(ha), compared_with=hb.label, differ=differ, identical=identical,
                   only_in_file=[n for n in ha.tensors if n not in hb.tensors],
                   only_in_other=[n for n in hb.tensors if n not in ha.tensors])


def _gguf_source(spec, stdin=None):
    """(header, uint8 buffer) of a GGUF file, pipe or standard input (``-``)."""
    from bhtcli.io.gguf_file import open_gguf_stream, parse_header
    spec = os.fspath(spec)
    if spec == "-":
        data = (stdin if stdin is not None else sys.stdin.buffer).read()
        buf = np.frombuffer(data, dtype=np.uint8)
        return parse_header(memoryview(buf), "standard input"), buf
    if not os.path.exists(spec):
        raise InputError(f"{spec}: no such file; check the path")
    if os.path.isdir(spec) or spec.lower().endswith((".safetensors", ".npz", ".npy")):
        raise InputError(f"{spec}: bht tensors FILE OTHER compares two GGUF files; list other "
                         "checkpoints one at a time")
    return open_gguf_stream(spec)


def same_heads_note(A, B, reason: str | None) -> str | None:
    """design's and bound's `reason` when A and B are the same model, extended when they are the
    heads of two GGUF builds: whether the heads are identical bit for bit, how many other
    tensors differ, and that `bht prompts` compares the builds (the head alone cannot). The
    reason as it was for anything else (arrays, other formats, unreadable files)."""
    from bhtcli.io.gguf_file import open_gguf, split_gguf_name
    specs = []
    for spec in (A, B):
        if not isinstance(spec, (str, os.PathLike)):
            return reason
        path, tensor = split_gguf_name(os.fspath(spec))
        if not (path.lower().endswith(".gguf") and os.path.isfile(path)):
            return reason
        specs.append((path, tensor or open_gguf(path)[0].head()[0]))
    (pa, head), (pb, head_b) = specs
    found = compare_tensors(pa, pb, values=False)
    differ = {row["name"]: row for row in found.differ}
    others = [row for row in found.differ if row["name"] not in (head, head_b)]
    extra = len(found.only_in_file) + len(found.only_in_other)
    if not others and not extra:
        return reason
    if head == head_b and head not in differ:
        dtype = next(r["dtype"] for r in found.tensors if r["name"] == head)
        said = f"the heads are identical ({head}, {dtype}, bit for bit in both files)"
    else:
        said = f"the heads ({head}, {head_b}) are the same model: {reason}"
    kinds = {}
    for row in others:
        key = f"{row['dtype']} -> {row['other_dtype']}"
        kinds[key] = kinds.get(key, 0) + 1
    what = ", ".join(f"{count} {key}" for key, count in kinds.items())
    if extra:
        what += (", " if what else "") + f"{extra} in one file only"
    return (f"{said}, so no query of the head can tell them apart; but {len(others) + extra} other "
            f"tensor{'s' if len(others) + extra != 1 else ''} differ ({what}), so the builds can still "
            f"answer differently: bht prompts {pa} {pb} compares them on prompts")
