"""Writing a GGUF file from another one: its metadata copied byte for byte (one item
replaced or added), a new tensor table, and each tensor's bytes streamed in.

The layout is GGUF version 3 (llama.cpp's ``gguf.cpp``; the `gguf` package's ``GGUFWriter``
writes the same): the magic, the version, the tensor and metadata counts (u64), the
metadata items, the tensor table (name, dimension count, dimensions fastest-varying first,
type, offset of the data relative to the data section), zero padding up to the alignment
(``general.alignment``, else 32), then each tensor's bytes, each padded to the alignment.
Metadata items are copied as they are, so the tokenizer, the chat template and every
architecture key stay bit for bit the source's. The file is written through
:func:`bhtcli.io.write.atomic_file`: an interrupted run leaves no partial file.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from bhtcli.errors import parameter_name
from bhtcli.io.gguf_file import MAGIC, metadata_spans

VERSION = 3
UINT32 = 4                         # GGUF metadata value type of a u32


@dataclass(frozen=True)
class TensorPlan:
    """One tensor of the file to write: its name, shape (numpy order), GGML type and size."""

    name: str
    shape: tuple
    type_name: str
    nbytes: int


def plan(name: str, shape: tuple, type_name: str) -> TensorPlan:
    """The plan of a tensor of `shape` stored as `type_name` (its size from the type's block)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return TensorPlan(name, tuple(int(v) for v in shape), type_name, math.prod(shape) // block * size)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _u32_item(key: str, value: int) -> bytes:
    return _string(key) + struct.pack("<II", UINT32, value)


def write_gguf(path: str, src_buf, label: str, alignment: int, plans: list, chunks, *,
               set_u32: dict) -> None:
    """Write `plans`' tensors to `path` with the metadata of the GGUF bytes `src_buf`.

    Parameters
    ----------
    path : str
        The file to write (atomically).
    src_buf : bytes or uint8 array
        The source GGUF file, already checked by :func:`bhtcli.io.gguf_file.parse_header`.
    label : str
        Its name for messages.
    alignment : int
        The source's alignment (its ``general.alignment`` item, copied, says the same).
    plans : list of TensorPlan
        The tensors, in the order their data is written.
    chunks : callable
        ``chunks(plan)`` yields the tensor's bytes in pieces (a row block at a time), exactly
        ``plan.nbytes`` in all.
    set_u32 : dict
        Metadata keys whose value is replaced (or added) as a u32, e.g.
        ``{"general.file_type": 7}``.
    """
    from bhtcli.io.write import atomic_file
    from gguf.constants import GGMLQuantizationType
    spans = metadata_spans(src_buf, label)
    items = [_u32_item(key, set_u32[key]) if key in set_u32 else bytes(src_buf[start:end])
             for key, start, end in spans]
    present = {key for key, _, _ in spans}
    items += [_u32_item(key, value) for key, value in set_u32.items() if key not in present]
    table, offset = [], 0
    for p in plans:
        dims = tuple(reversed(p.shape))
        table.append(_string(p.name) + struct.pack(f"<I{len(dims)}Q", len(dims), *dims)
                     + struct.pack("<IQ", GGMLQuantizationType[p.type_name].value, offset))
        offset += p.nbytes + (-p.nbytes % alignment)
    head = b"".join([MAGIC, struct.pack("<IQQ", VERSION, len(plans), len(items)), *items, *table])
    with atomic_file(path, "wb", option=parameter_name("out")) as fh:
        fh.write(head + bytes(-len(head) % alignment))
        for p in plans:
            written = 0
            for piece in chunks(p):
                fh.write(piece)
                written += len(piece)
            if written != p.nbytes:          # a bug, not bad input: never leave such a file
                raise RuntimeError(f"{p.name}: {written} bytes written, {p.nbytes} planned")
            fh.write(bytes(-written % alignment))
