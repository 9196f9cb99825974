"""Reading tensors of GGUF files (llama.cpp, Ollama, LM Studio), dequantized by the `gguf`
package.

The header (magic, version, metadata, tensor table) is parsed here with `struct` on a
read-only memory map: the package's own ``GGUFReader`` builds a numpy view per metadata item,
which takes 8 s on the 262,144-token vocabulary of gemma-3-270m; skipping over the arrays
takes ~0.3 s. The tensors' bytes are then handed to ``gguf.quants.dequantize`` (F16, BF16,
Q4_0 ... Q8_0, the K-quants Q2_K ... Q6_K, the IQ types: whatever the installed package
dequantizes), a block of rows at a time, into one array of the requested dtype, so that
dequantizing never holds more than the result and one block.

GGUF lists a tensor's dimensions fastest-varying first (ne0, ne1, ...): an output layer of
n_vocab rows of length d is stored as [d, n_vocab]. Here shapes are in numpy's order, the
reverse (n_vocab x d), which is the n x d matrix bht reads.
"""
from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass

import numpy as np

from bhtcli.errors import InputError, phase
from bhtcli.io import reads
from bhtcli.io.limits import check_allocation, check_dims

MAGIC = b"GGUF"
SUFFIX = ".gguf"
# value types of the metadata: struct format of the scalars (8: string, 9: array)
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32
# stored types read as numbers without the package (numpy dtype; BF16 via ml_dtypes)
PLAIN = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I16": "<i2", "I32": "<i4",
         "I64": "<i8"}
BLOCK_BYTES = 1 << 22          # dequantize about 4 MB of float32 per block
MAX_NESTING = 16               # arrays of arrays: llama.cpp writes none; a deeper header is damaged


@dataclass(frozen=True)
class GGUFTensor:
    """One entry of the tensor table; `shape` in numpy order (GGUF's dimensions reversed)."""

    name: str
    shape: tuple
    type_name: str             # "Q8_0", "F32", ... (or "type N" when gguf does not know N)
    offset: int                # absolute byte offset of the data in the file
    nbytes: int
    block: tuple               # (values per block, bytes per block)

    @property
    def quantized(self) -> bool:
        return self.type_name not in PLAIN and self.type_name != "BF16"


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file holds: its metadata (arrays as their lengths only) and tensor table."""

    label: str
    version: int
    metadata: dict
    tensors: dict              # name -> GGUFTensor, in file order

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    @property
    def softcap(self) -> float | None:
        """`<arch>.final_logit_softcapping` (> 0), else None."""
        keys = [f"{self.architecture}.final_logit_softcapping"] if self.architecture else []
        keys += [k for k in self.metadata if k.endswith(".final_logit_softcapping")]
        for key in keys:
            value = self.metadata.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value) and value > 0:
                return float(value)
        return None

    def head(self) -> tuple[str | None, bool]:
        """(name of the output layer, tied): `output.weight`, else the tied `token_embd.weight`."""
        if "output.weight" in self.tensors:
            return "output.weight", False
        if "token_embd.weight" in self.tensors:
            return "token_embd.weight", True
        return None, False


class _Cursor:
    """Sequential little-endian reads from a buffer; running past its end is an InputError."""

    def __init__(self, buf, label: str):
        self.buf, self.pos, self.label, self.size = buf, 0, label, len(buf)

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > self.size:
            raise InputError(f"{self.label} is not a valid GGUF file (it ends inside its header: "
                             "truncated?); download it again")
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self) -> str:
        length = self.take("<Q")
        if self.pos + length > self.size:
            self.pos = self.size
            self.take("<B")                                # raises the truncation error
        raw = bytes(self.buf[self.pos:self.pos + length])
        self.pos += length
        return raw.decode("utf-8", errors="replace")

    def skip_array(self, depth: int = 0) -> int:
        if depth > MAX_NESTING:
            raise InputError(f"{self.label} is not a valid GGUF file (metadata arrays nested more "
                             f"than {MAX_NESTING} deep); download it again")
        kind, count = self.take("<I"), self.take("<Q")
        if kind == STRING:
            for _ in range(count):
                length = self.take("<Q")
                self.pos += length
                if self.pos > self.size:
                    self.take("<B")                        # raises the truncation error
        elif kind in SCALARS:
            self.pos += count * struct.calcsize(SCALARS[kind])
            if self.pos > self.size:
                self.take("<B")
        elif kind == ARRAY:
            for _ in range(count):
                self.skip_array(depth + 1)
        else:
            raise InputError(f"{self.label} is not a valid GGUF file (unknown metadata type {kind})")
        return count


def parse_header(buf, label: str) -> GGUFHeader:
    """Parse the GGUF header in `buf` (bytes or a uint8 memory map) and check that every
    tensor's data lies inside it.

    Raises
    ------
    InputError
        Wrong magic, an unsupported version or byte order, a truncated header or data, a
        tensor type the gguf package does not know.
    """
    if len(buf) < 4 or bytes(buf[:4]) != MAGIC:
        raise InputError(f"{label} is not a GGUF file (it does not start with the magic 'GGUF'); "
                         "check the path, or convert the model with llama.cpp's convert_hf_to_gguf.py")
    cur = _Cursor(buf, label)
    cur.pos = 4
    version = cur.take("<I")
    if version & 0xFFFF == 0 and version:
        raise InputError(f"{label} is a big-endian GGUF file, which bht does not read; "
                         "convert it to little-endian (llama.cpp's gguf_convert_endian.py)")
    if version not in (2, 3):
        raise InputError(f"{label} is GGUF version {version}; bht reads versions 2 and 3")
    n_tensors, n_kv = cur.take("<Q"), cur.take("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = cur.string()
        kind = cur.take("<I")
        if kind == STRING:
            metadata[key] = cur.string()
        elif kind in SCALARS:
            metadata[key] = cur.take(SCALARS[kind])
        elif kind == ARRAY:
            metadata[key] = ("array", cur.skip_array())
        else:
            raise InputError(f"{label} is not a valid GGUF file (metadata {key!r} has unknown type {kind})")
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    raw = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.take("<I")
        if n_dims > 8:
            raise InputError(f"{label} is not a valid GGUF file (tensor {name!r} has {n_dims} dimensions)")
        dims = [cur.take("<Q") for _ in range(n_dims)]
        code, offset = cur.take("<I"), cur.take("<Q")
        raw.append((name, dims, code, offset))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise InputError(f"{label} is not a valid GGUF file (general.alignment {alignment!r})")
    data_start = cur.pos + (-cur.pos % alignment)
    tensors = {}
    for name, dims, code, offset in raw:
        try:
            qtype = GGMLQuantizationType(code)
            block = GGML_QUANT_SIZES[qtype]
            type_name = qtype.name
        except (ValueError, KeyError):
            raise InputError(f"{label}:{name} is stored as GGML type {code}, which the installed gguf "
                             "package does not know; upgrade it (pip install -U gguf)") from None
        count = check_dims(dims, 8, f"{label}:{name}")
        if qtype.name not in PLAIN and qtype.name != "BF16" and not dims:
            raise InputError(f"{label} is not a valid GGUF file (tensor {name!r} is {type_name} "
                             "with no dimensions; quantized tensors have rows)")
        if dims and dims[0] % block[0]:
            raise InputError(f"{label} is not a valid GGUF file (tensor {name!r}: rows of {dims[0]} "
                             f"values, not a multiple of the {type_name} block of {block[0]})")
        nbytes = count // block[0] * block[1]
        start = data_start + offset
        if name in tensors:
            raise InputError(f"{label} is not a valid GGUF file (tensor {name!r} appears twice)")
        if start + nbytes > len(buf):
            raise InputError(f"{label} is not a valid GGUF file (tensor {name!r} runs past the end of "
                             f"the file: {start + nbytes:,} bytes needed, {len(buf):,} present; "
                             "truncated?); download it again")
        tensors[name] = GGUFTensor(name, tuple(reversed(dims)), type_name, start, nbytes, tuple(block))
    return GGUFHeader(label, version, metadata, tensors)


def open_gguf(path: str):
    """(header, read-only uint8 memory map of the whole file)."""
    reads.record(path)
    try:
        if os.path.getsize(path) == 0:
            raise InputError(f"{path} is empty, not a GGUF file")
        mm = np.memmap(path, dtype=np.uint8, mode="r")
    except PermissionError:
        raise InputError(f"{path}: permission denied; make the file readable") from None
    except OSError as exc:
        raise InputError(f"{path} could not be read ({exc.strerror or exc})") from None
    return parse_header(memoryview(mm), path), mm


def read_gguf(path: str, tensor: str | None = None, dtype=None) -> np.ndarray:
    """One tensor of a GGUF file as an array in numpy's shape order.

    Parameters
    ----------
    path : str
        The .gguf file.
    tensor : str, optional
        The tensor's name; without it, the output layer (:meth:`GGUFHeader.head`).
    dtype : {None, "float32", "float64"}
        Quantized tensors are dequantized into this dtype (None: float32). F32, F16, F64, BF16
        and integer tensors come back as read-only memory maps in their stored dtype (callers
        up-cast them block by block).

    Raises
    ------
    InputError
        A damaged file, an unknown tensor (the message lists close names), a type the gguf
        package cannot dequantize.
    """
    header, mm = open_gguf(path)
    info = header.tensors[choose_tensor(header, tensor)]
    return tensor_array(mm, info, path, dtype)


def choose_tensor(header: GGUFHeader, tensor: str | None) -> str:
    """The requested tensor's name, or the output layer's; InputError naming close names."""
    from bhtcli.io.tensor_names import missing_tensor, no_head, note_head
    if tensor is not None:
        if tensor not in header.tensors:
            raise missing_tensor(header.label, tensor, _shapes(header))
        return tensor
    name, tied = header.head()
    if name is None:
        raise no_head(header.label, ("output.weight", "token_embd.weight"), _shapes(header))
    info = header.tensors[name]
    note_head(header.label, name, info.shape, info.type_name, tied, "no output.weight")
    return name


def _shapes(header: GGUFHeader) -> dict:
    return {k: (v.shape, v.type_name) for k, v in header.tensors.items()}


def tensor_array(buf, info: GGUFTensor, label: str, dtype=None) -> np.ndarray:
    """The values of one tensor of the file in `buf` (a uint8 memory map or array)."""
    count = math.prod(info.shape)
    if info.type_name in PLAIN or info.type_name == "BF16":
        if info.type_name == "BF16":
            import ml_dtypes
            stored = np.dtype(ml_dtypes.bfloat16)
        else:
            stored = np.dtype(PLAIN[info.type_name])
        if count == 0:
            return np.zeros(info.shape, dtype=stored)
        return buf[info.offset:info.offset + info.nbytes].view(stored).reshape(info.shape)
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize
    qtype = GGMLQuantizationType[info.type_name]
    out_dtype = np.dtype(np.float32 if dtype is None else dtype)
    width = info.shape[-1] if info.shape else 1
    rows = count // width if width else 0
    check_allocation(count * out_dtype.itemsize, f"{label}:{info.name}", "the dequantized tensor")
    out = np.empty((rows, width), dtype=out_dtype)
    raw = buf[info.offset:info.offset + info.nbytes].reshape(rows, -1) if rows else None
    step = max(1, BLOCK_BYTES // (4 * max(width, 1)))
    try:
        for s in range(0, rows, step):
            phase(f"dequantizing {label}:{info.name} ({info.type_name}): {s:,} of {rows:,} rows",
                  s, rows)
            with np.errstate(all="ignore"):    # non-finite values: check_matrix names them
                out[s:s + step] = dequantize(np.asarray(raw[s:s + step]), qtype)
    except NotImplementedError:
        raise InputError(f"{label}:{info.name} is stored as {info.type_name}, which the installed gguf "
                         "package cannot dequantize; upgrade it (pip install -U gguf)") from None
    return out.reshape(info.shape)


def read_gguf_bytes(data: bytes, label: str, tensor: str | None = None, dtype=None) -> np.ndarray:
    """As :func:`read_gguf`, for GGUF bytes from a pipe (no file to map)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    header = parse_header(memoryview(buf), label)
    info = header.tensors[choose_tensor(header, tensor)]
    return tensor_array(buf, info, label, dtype)


def split_gguf_name(spec: str):
    """'m.gguf:token_embd.weight' -> ('m.gguf', 'token_embd.weight'); else (spec, None)."""
    at = spec.lower().find(SUFFIX + ":")
    if at < 0:
        return spec, None
    cut = at + len(SUFFIX)
    return spec[:cut], (spec[cut + 1:] or None)


def metadata_spans(buf, label: str) -> list:
    """[(key, start, end)]: where each metadata item (key, type and value) lies in the GGUF
    bytes `buf`, in file order, and the end of the last one (where the tensor table begins),
    for a writer that copies the items byte for byte. `buf` must have passed
    :func:`parse_header`."""
    cur = _Cursor(buf, label)
    cur.pos = 16                                   # magic, version, tensor count
    n_kv = cur.take("<Q")
    spans = []
    for _ in range(n_kv):
        start = cur.pos
        key = cur.string()
        kind = cur.take("<I")
        if kind == STRING:
            cur.string()
        elif kind in SCALARS:
            cur.take(SCALARS[kind])
        else:
            cur.skip_array()
        spans.append((key, start, cur.pos))
    return spans


def open_gguf_stream(path: str):
    """(header, uint8 buffer) of a GGUF file, memory-mapped, or of a pipe (``<(cat m.gguf)``,
    ``/dev/stdin``), read once into memory; InputError when the bytes are not GGUF."""
    if os.path.isfile(path):
        return open_gguf(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"{path} could not be read ({exc.strerror or exc})") from None
    buf = np.frombuffer(data, dtype=np.uint8)
    return parse_header(memoryview(buf), path), buf


def row_blocks(buf, info: GGUFTensor, rows_per_block: int):
    """One tensor's values as float32 rows (n_rows x last dimension), a block of rows at a
    time, each block read by :func:`tensor_array` from its own bytes: memory holds one block."""
    from dataclasses import replace
    width = info.shape[-1] if info.shape else 1
    rows = math.prod(info.shape) // width if width else 0
    row_bytes = info.nbytes // rows if rows else 0
    for s in range(0, rows, rows_per_block):
        count = min(rows_per_block, rows - s)
        part = replace(info, shape=(count, width), offset=info.offset + s * row_bytes,
                       nbytes=count * row_bytes)
        yield np.asarray(tensor_array(buf, part, info.name), dtype=np.float32)
