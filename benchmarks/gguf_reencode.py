"""A second build of a GGUF model for measurements: every quantized tensor re-encoded as another
GGML type with the gguf package (dequantize, quantize), metadata and the other tensors copied.
A stand-in until `bht quantize --to TYPE --out OUT.gguf` writes whole GGUF files.

    python benchmarks/gguf_reencode.py IN.gguf OUT.gguf --to Q8_0
"""
from __future__ import annotations

import argparse

import numpy as np

FLOAT_TYPES = ("F32", "F16", "BF16")


def reencode(src, out, qtype: str = "Q8_0") -> None:
    import gguf
    reader = gguf.GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    q = gguf.GGMLQuantizationType[qtype]
    for t in reader.tensors:
        if t.tensor_type.name in FLOAT_TYPES:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        data = gguf.quants.quantize(w, q)
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=q)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--to", default="Q8_0")
    a = ap.parse_args()
    reencode(a.src, a.out, a.to)


if __name__ == "__main__":
    main()
