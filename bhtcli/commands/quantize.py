"""`quantize`: a matrix's round trip through a quantization type, for "how detectable would
this quantization be?" audits (`bht design SRC DST.npy ...` then compares the two).

The GGML types (q8_0, q5_1, q5_0, q4_1, q4_0, f16, bf16) go through the gguf package's own
``quantize`` and ``dequantize``, a block of rows at a time: every block of 32 values of a row is
quantized on its own, so the result is bit for bit the package's on the whole matrix.
``int8-row`` is the per-row symmetric int8 of examples/quantization_audit: scale_i =
max_j |a_ij| / 127 (1 for a zero row), q = clip(rint(a / scale), -127, 127), a' = q scale.
The result is float32 (what the dequantizers return).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.results import QuantizeResult
from bhtcli.settings import QUANTIZE_TYPES as TYPES

BLOCK_BYTES = 1 << 24            # rows per block: about 16 MB of float32


def quantize(src, to: str, out: str, *, force: bool = False, progress=None) -> QuantizeResult:
    """Write SRC's round trip through the type `to` to `out` (.npy float32; .csv/.txt/.json
    as :func:`bhtcli.io.load.save_array` writes them), atomically, never over an input.

    Parameters
    ----------
    src : path or array_like
        The matrix (any input bht reads: .npy, FILE.safetensors:TENSOR, FILE.gguf, DIR, ...).
    to : {"q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "f16", "bf16", "int8-row"}
    out : path
    progress : callable, optional

    Raises
    ------
    InputError
        An unknown type, rows whose length is not a multiple of the type's block (32), an
        output that names the input or has an unknown extension.
    """
    from bhtcli.io.load import OUT_SUFFIXES, check_output_path, load_matrix
    start = time.perf_counter()
    kind = str(to).strip().lower()
    if kind not in TYPES:
        raise InputError(f"{parameter_name('to')} {to!r}: expected one of {', '.join(TYPES)}")
    check_output_path(out, inputs=(src,), force=force, suffixes=OUT_SUFFIXES)
    label = str(src) if not hasattr(src, "shape") else "the matrix"
    A = load_matrix(src, dtype=None)      # as stored: f16/bf16 up-cast exactly to float32
    n, d = A.shape
    round_trip, block, bits = _round_trip(kind, d)
    if d % block and kind != "int8-row":
        raise InputError(f"{label} has rows of {d} values; {kind} quantizes blocks of {block} values, so "
                         f"the row length must be a multiple of {block} (f16, bf16 and int8-row take any)")
    result = np.empty((n, d), dtype=np.float32)
    step = max(1, BLOCK_BYTES // (4 * max(d, 1)))
    worst = sq_err = sq_ref = row = 0.0
    for s in range(0, n, step):
        if progress:
            progress(f"quantizing to {kind}", s, n)
        a = np.asarray(A[s:s + step])
        q = round_trip(a)
        result[s:s + step] = q
        diff = q.astype(np.float64) - a.astype(np.float64)
        worst = max(worst, float(np.max(np.abs(diff), initial=0.0)))
        rows2 = np.einsum("ij,ij->i", diff, diff)
        row = max(row, float(np.max(rows2, initial=0.0)))
        sq_err += float(rows2.sum())
        a64 = a.astype(np.float64)
        sq_ref += float(np.einsum("ij,ij->", a64, a64))
    _write(out, result)
    rel = math.sqrt(sq_err / sq_ref) if sq_ref > 0 else (0.0 if sq_err == 0 else math.inf)
    return QuantizeResult(label, kind, str(out), block if kind != "int8-row" else d,
                          bits if kind != "int8-row" else 8 + 32 / max(d, 1), worst, rel,
                          math.sqrt(row), time.perf_counter() - start, n=n, d=d)


def _round_trip(kind: str, d: int):
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
    from bhtcli.io.load import atomic_file, save_array
    if Path(out).suffix.lower() == ".npy":
        with atomic_file(out, "wb", option=parameter_name("out")) as fh:
            np.save(fh, result, allow_pickle=False)
    else:
        save_array(out, result, option=parameter_name("out"))
