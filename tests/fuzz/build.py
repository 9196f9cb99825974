"""Valid inputs of every format bht reads, written byte by byte where the fuzzer needs to bend
the structure (.npy headers, GGUF headers and metadata, safetensors headers, zip members), so
that a mutation can target one field. Nothing here imports bhtcli."""
from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np

NPY_MAGIC = b"\x93NUMPY"


def npy_bytes(array=None, header: str | None = None, version=(1, 0), data: bytes | None = None,
              pad_to: int = 64) -> bytes:
    """A .npy file: `header` (the dict literal, default numpy's for `array`) padded with spaces
    and a newline to a multiple of `pad_to`, then `data` (default the array's bytes)."""
    if header is None:
        arr = np.asarray(array)
        header = (f"{{'descr': '{np.lib.format.dtype_to_descr(arr.dtype)}', 'fortran_order': "
                  f"{arr.flags.f_contiguous and not arr.flags.c_contiguous}, 'shape': {arr.shape}, }}")
        data = arr.tobytes(order="F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C") \
            if data is None else data
    size_field = 2 if version == (1, 0) else 4
    raw = header.encode("utf-8" if version == (3, 0) else "latin-1", errors="replace")
    total = len(NPY_MAGIC) + 2 + size_field + len(raw) + 1
    raw += b" " * (-total % pad_to) + b"\n"
    fmt = "<H" if size_field == 2 else "<I"
    length = min(len(raw), 0xFFFF if size_field == 2 else 0xFFFFFFFF)
    return NPY_MAGIC + bytes(version) + struct.pack(fmt, length) + raw + (data or b"")


def zip_bytes(members, compress: bool = False) -> bytes:
    """A zip archive of (name, bytes) members (an .npz when they are .npy files)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", method) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buf.getvalue()


def safetensors_bytes(tensors, header_extra=None, raw_header: bytes | None = None) -> bytes:
    """A .safetensors file of (name, dtype code, shape, data bytes) tensors; `raw_header`
    replaces the JSON header as written."""
    header, offset, blobs = {}, 0, []
    for name, code, shape, data in tensors:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if header_extra:
        header.update(header_extra)
    raw = raw_header if raw_header is not None else json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs)


# GGUF metadata value types and GGML tensor types used by the builders
U8, I8, U16, I16, U32, I32, F32V, BOOL, STRING, ARRAY, U64, I64, F64V = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f",
              BOOL: "<?", U64: "<Q", I64: "<q", F64V: "<d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def gguf_string(text) -> bytes:
    raw = text if isinstance(text, bytes) else text.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf_value(kind: int, value) -> bytes:
    """A metadata value: a scalar, a string, ("array", item kind, items) or ("raw", bytes)."""
    if kind == STRING:
        return gguf_string(value)
    if kind == ARRAY and value[0] == "raw":
        return value[1]
    if kind == ARRAY:
        _, item_kind, items = value
        return struct.pack("<IQ", item_kind, len(items)) + b"".join(gguf_value(item_kind, v) for v in items)
    return struct.pack(SCALAR_FMT[kind], value)


def gguf_nested(depth: int) -> tuple:
    """An array value nested `depth` arrays deep around one uint8 (written without recursion)."""
    return ("raw", struct.pack("<IQ", ARRAY, 1) * depth + struct.pack("<IQ", U8, 1) + b"\x01")


def gguf_bytes(kvs, tensors, version: int = 3, alignment: int = 32, n_tensors=None, n_kv=None) -> bytes:
    """A GGUF file: `kvs` (key, kind, value); `tensors` (name, dims in GGUF order, type code,
    data bytes), data aligned to `alignment`; n_tensors/n_kv override the counts written."""
    out = bytearray(b"GGUF" + struct.pack("<I", version))
    out += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors,
                       len(kvs) if n_kv is None else n_kv)
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    offset, blobs = 0, []
    for name, dims, code, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", code, offset)
        padded = data + b"\0" * (-len(data) % alignment)
        blobs.append(padded)
        offset += len(padded)
    out += b"\0" * (-len(out) % alignment)
    return bytes(out) + b"".join(blobs)


def q8_0_rows(matrix: np.ndarray) -> bytes:
    """Q8_0 blocks (a float16 scale, 32 int8 values) of a float matrix whose rows are multiples
    of 32 long (the reference quantization, written here to keep this module standalone)."""
    blocks = matrix.astype(np.float32).reshape(-1, 32)
    scale = np.abs(blocks).max(axis=1) / 127
    q = np.round(blocks / np.where(scale == 0, 1, scale)[:, None]).astype(np.int8)
    out = bytearray()
    for s, row in zip(scale.astype(np.float16), q):
        out += s.tobytes() + row.tobytes()
    return bytes(out)
