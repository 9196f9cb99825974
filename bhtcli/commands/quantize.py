"""`quantize`: a matrix's round trip through a quantization type, for "how detectable would
this quantization be?" audits (`bht design SRC DST.npy ...` then compares the two), or a whole
GGUF build re-encoded (`--out DST.gguf`: a model llama.cpp loads).

The GGML types (q8_0, q5_1, q5_0, q4_1, q4_0, f16, bf16, f32) go through the gguf package's
own ``quantize`` and ``dequantize``, a block of rows at a time: every block of 32 values of a
row is quantized on its own, so the result is bit for bit the package's on the whole matrix.
``int8-row`` is the per-row symmetric int8 of examples/quantization_audit: scale_i =
max_j |a_ij| / 127 (1 for a zero row), q = clip(rint(a / scale), -127, 127), a' = q scale.
The matrix result is float32 (what the dequantizers return).

A whole build (SRC a GGUF file, DST ending in .gguf) re-encodes the tensors llama.cpp's
``llama-quantize --pure`` re-encodes, every one to the same type: tensors of two or more
dimensions whose name ends in "weight", except norms, MoE routers (ffn_gate_inp), position
and token-type embeddings and the small 2-D tensors llama.cpp lists (ssm_conv1d, time_mix_*,
attn_rel_b, altup, laurel, per_layer_model_proj). A tensor whose rows are not a multiple of
the type's block falls back to f16, as llama.cpp's and convert_hf_to_gguf.py's last fallback
does. Every other tensor, and every metadata item (tokenizer, chat template), is copied byte
for byte; ``general.file_type`` is set to the type. Tensors are streamed a block of rows at a
time: memory holds one block, never the model.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.results import QuantizeResult
from bhtcli.settings import QUANTIZE_TYPES as TYPES

BLOCK_BYTES = 1 << 24            # rows per block: about 16 MB of float32
# llama.cpp's is_quantizable (src/llama-quant.cpp): name parts never re-encoded
KEEP_PARTS = ("_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
              "ssm_conv1d.weight", "shortconv.conv.weight", "time_mix_", "attn_rel_b.weight")
KEEP_NAMES = ("pos_embd.weight", "token_types.weight")
FALLBACK = "F16"
NOT_FLOAT = ("I8", "I16", "I32", "I64", "F64")     # kept as stored: not weights to re-encode
FILE_TYPES = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "bf16": "MOSTLY_BF16", "q8_0": "MOSTLY_Q8_0",
              "q5_1": "MOSTLY_Q5_1", "q5_0": "MOSTLY_Q5_0", "q4_1": "MOSTLY_Q4_1", "q4_0": "MOSTLY_Q4_0"}


def quantize(src, to: str, out: str, *, progress=None) -> QuantizeResult:
    """Write SRC's round trip through the type `to` to `out`, atomically, never over SRC:
    .npy (float32), .csv/.txt/.json (as :func:`bhtcli.io.write.save_array` writes them), or,
    for a GGUF SRC, .gguf: the whole build re-encoded (see the module's docstring).

    Parameters
    ----------
    src : path or array_like
        The matrix (any input bht reads: .npy, FILE.safetensors:TENSOR, FILE.gguf, DIR, ...);
        a GGUF file for a .gguf `out`.
    to : {"q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "f16", "bf16", "f32", "int8-row"}
    out : path
    progress : callable, optional

    Returns
    -------
    QuantizeResult
        The round trip of the matrix (for a GGUF: of its head) and, for a .gguf `out`, every
        tensor's old and new type and max |Δ|.

    Raises
    ------
    InputError
        An unknown type, rows whose length is not a multiple of the type's block (32), an
        output that names the input or has an unknown extension, a .gguf output from another
        source or with int8-row.
    """
    from bhtcli.io.load import load_matrix
    from bhtcli.io.write import OUT_SUFFIXES, check_output_path
    start = time.perf_counter()
    kind = _check_type(to)
    whole = Path(os.fspath(out)).suffix.lower() == ".gguf" if not hasattr(out, "shape") else False
    check_output_path(out, inputs=(src,), force=None, suffixes=OUT_SUFFIXES + (".gguf",))
    if whole:
        return _build(src, kind, out, progress, start)
    label = str(src) if not hasattr(src, "shape") else "the matrix"
    A = load_matrix(src, dtype=None)      # as stored: f16/bf16 up-cast exactly to float32
    n, d = A.shape
    round_trip, block, bits = _round_trip(kind)
    if d % block:
        raise InputError(f"{label} has rows of {d} values; {kind} quantizes blocks of {block} values, so "
                         f"the row length must be a multiple of {block} (f16, bf16, f32 and int8-row take any)")
    result = np.empty((n, d), dtype=np.float32)
    errors = RoundTripErrors()
    step = _rows_per_block(d)
    for s in range(0, n, step):
        if progress:
            progress(f"quantizing to {kind}", s, n)
        a = np.asarray(A[s:s + step])
        result[s:s + step] = errors.add(a, round_trip(a))
    _write(out, result)
    if kind == "int8-row":
        block, bits = d, 8 + 32 / max(d, 1)
    return errors.result(label, kind, str(out), block, bits, time.perf_counter() - start, n, d)


def _check_type(to) -> str:
    kind = str(to).strip().lower()
    if kind in TYPES:
        return kind
    from gguf.constants import GGMLQuantizationType
    known = kind.upper() in GGMLQuantizationType.__members__
    why = (f"the gguf package reads {kind} but cannot write it (llama.cpp's llama-quantize can)"
           if known else "unknown type")
    raise InputError(f"{parameter_name('to')} {to!r}: {why}; bht quantize writes {', '.join(TYPES)}")


def _rows_per_block(width: int) -> int:
    return max(1, BLOCK_BYTES // (4 * max(width, 1)))


class RoundTripErrors:
    """Running max |a' - a|, sum of squares of a' - a and of a, and the largest row change
    ||a'_i - a_i||^2, over the row blocks of a round trip (in float64)."""

    def __init__(self):
        self.worst = self.sq_err = self.sq_ref = self.row = 0.0

    def add(self, a: np.ndarray, q: np.ndarray) -> np.ndarray:
        a64 = a.astype(np.float64).reshape(-1, a.shape[-1] if a.ndim else 1)
        diff = q.astype(np.float64).reshape(a64.shape) - a64
        self.worst = max(self.worst, float(np.max(np.abs(diff), initial=0.0)))
        rows2 = np.einsum("ij,ij->i", diff, diff)
        self.row = max(self.row, float(np.max(rows2, initial=0.0)))
        self.sq_err += float(rows2.sum())
        self.sq_ref += float(np.einsum("ij,ij->", a64, a64))
        return q

    def result(self, label, kind, out, block, bits, seconds, n, d, **extra) -> QuantizeResult:
        sq_err, sq_ref = self.sq_err, self.sq_ref
        rel = math.sqrt(sq_err / sq_ref) if sq_ref > 0 else (0.0 if sq_err == 0 else math.inf)
        return QuantizeResult(label, kind, out, block, bits, self.worst, rel, math.sqrt(self.row),
                              seconds, exact=self.worst == 0.0, n=n, d=d, **extra)


def _round_trip(kind: str):
    """(function of a row block -> float32 round trip, block size, bits per value)."""
    if kind == "int8-row":
        return int8_row_round_trip, 1, 8.0
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize, quantize as gguf_quantize
    qtype = GGMLQuantizationType[kind.upper()]
    block, size = GGML_QUANT_SIZES[qtype]
    return (lambda a: dequantize(gguf_quantize(a, qtype), qtype)), block, 8.0 * size / block


def int8_row_round_trip(A: np.ndarray) -> np.ndarray:
    """Per-row symmetric int8 quantization, dequantized to float32 (the audit's function)."""
    scale = np.abs(A).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(A / scale), -127, 127).astype(np.int8)
    return (q.astype(np.float32) * scale).astype(np.float32)


def _write(out: str, result: np.ndarray) -> None:
    from bhtcli.io.write import atomic_file, save_array
    if Path(out).suffix.lower() == ".npy":
        with atomic_file(out, "wb", option=parameter_name("out")) as fh:
            np.save(fh, result, allow_pickle=False)
    else:
        save_array(out, result, option=parameter_name("out"))


# --- a whole GGUF build ----------------------------------------------------------------------
def reencoded(name: str, shape: tuple) -> bool:
    """Whether a whole build re-encodes this tensor (llama.cpp's is_quantizable, ndim >= 2)."""
    return (len(shape) >= 2 and name.endswith("weight") and not any(p in name for p in KEEP_PARTS)
            and not any(name == k or name.endswith("." + k) for k in KEEP_NAMES))


def _open_source(src):
    """(header, uint8 buffer) of a GGUF source: a file is memory-mapped, a pipe read once (and
    refused by the header parser when it is not GGUF)."""
    from bhtcli.io.gguf_file import open_gguf_stream
    path = None if hasattr(src, "shape") or not isinstance(src, (str, os.PathLike)) else os.fspath(src)
    gguf_file = path is not None and os.path.exists(path) and not os.path.isdir(path)
    if gguf_file and os.path.isfile(path):
        with open(path, "rb") as fh:
            gguf_file = fh.read(4) == b"GGUF"
    if not gguf_file:
        raise InputError(f"{path or 'the matrix'} is not a GGUF file; {parameter_name('out')} .gguf writes a "
                         "whole GGUF build (FILE.gguf without :TENSOR): write another matrix's round trip "
                         "to .npy")
    return open_gguf_stream(path)


def _build(src, kind: str, out: str, progress, start: float) -> QuantizeResult:
    import gguf
    from gguf.quants import dequantize, quantize as gguf_quantize

    from bhtcli.io.gguf_file import DEFAULT_ALIGNMENT, row_blocks
    from bhtcli.io.gguf_write import plan, write_gguf
    if kind == "int8-row":
        raise InputError(f"{parameter_name('to')} int8-row is not a GGML type; a .gguf build takes "
                         f"{', '.join(t for t in TYPES if t != 'int8-row')}")
    header, buf = _open_source(src)
    target = kind.upper()
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[target]]
    plans, errors = [], {}
    for info in header.tensors.values():
        to = info.type_name
        if reencoded(info.name, info.shape) and info.type_name not in NOT_FLOAT:
            to = target if info.shape[-1] % block == 0 else FALLBACK
            errors[info.name] = RoundTripErrors()
        plans.append(plan(info.name, info.shape, to))
    total = sum(math.prod(header.tensors[name].shape) for name in errors)
    done = 0

    def chunks(p):
        nonlocal done
        info = header.tensors[p.name]
        if p.name not in errors:                   # kept: its bytes as stored
            yield bytes(buf[info.offset:info.offset + info.nbytes])
            return
        qtype = gguf.GGMLQuantizationType[p.type_name]
        for a in row_blocks(buf, info, _rows_per_block(info.shape[-1])):
            if progress:
                progress(f"re-encoding to {kind}", done, total)
            q = gguf_quantize(a, qtype)
            errors[p.name].add(a, dequantize(q, qtype))
            done += a.size
            yield q.tobytes()

    file_type = int(gguf.LlamaFileType[FILE_TYPES[kind]])
    alignment = header.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    write_gguf(out, buf, header.label, alignment, plans, chunks, set_u32={"general.file_type": file_type})
    rows = [{"name": p.name, "shape": list(p.shape), "from": header.tensors[p.name].type_name,
             "to": p.type_name, "reencoded": p.name in errors,
             "max_abs_error": errors[p.name].worst if p.name in errors else 0.0} for p in plans]
    head_name, _ = header.head()
    shape = header.tensors[head_name].shape if head_name else (0, 0)
    return errors.get(head_name, RoundTripErrors()).result(
        header.label, kind, str(out), block, 8.0 * size / block, time.perf_counter() - start,
        int(shape[0]), int(shape[-1]), head=head_name, file_type=file_type, tensors=rows,
        fallbacks=[r["name"] for r in rows if r["reencoded"] and r["to"] != target])
