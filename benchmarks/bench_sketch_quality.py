"""Benchmark: the sketched search against the full multistart search, pair by pair.

Run:  .venv/bin/python benchmarks/bench_sketch_quality.py                    (15 pairs, float64)
      .venv/bin/python benchmarks/bench_sketch_quality.py --dtype float32
      .venv/bin/python benchmarks/bench_sketch_quality.py --minilm           (needs make audit's weights)

Seeded 10,000 x 256 pairs of five structures (E per structure), each searched twice in the
same process with `bhtcli.search.maximize`: method "sketch" (the default at vocabulary scale)
and "full" (the adaptive multistart search alone). `--defaults` instead compares the default
search (method "auto", what every command runs) against the best of the sketch and a 256-start
full search, with its cost against a fixed 32-start full search (see bench_search.py). Prints H^2, passes over
A and B and the ratio sketch / full. With --minilm: all-MiniLM-L6-v2's token embeddings
(30,522 x 384) against their int8 per-row and float16 round trips at six budgets, float32,
the full search with 32 starts (what examples/quantization_audit/audit.py runs).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bhtcli.models.softmax import SoftmaxPair, pass_seconds
from bhtcli.search import maximize
from pairs import checkpoint, gaussian, int8, lowrank, zipf


STRUCTURES = {"gaussian": (gaussian, 10.0), "lowrank": (lowrank, 8.0),
              "checkpoint": (checkpoint, 4.0), "int8": (int8, 10.0), "zipf": (zipf, 6.0)}


def compare(A, B, energy, dtype, full_starts=None):
    out = {}
    for space, starts in (("sketch", None), ("full", full_starts)):
        pair = SoftmaxPair(A, B, dtype=dtype)
        pt = pass_seconds(pair)
        t0 = time.perf_counter()
        r = maximize(pair, energy, space, starts=starts)
        out[space] = (-np.expm1(-r.value), pair.passes, (time.perf_counter() - t0) / pt)
    return out


def row(label, energy, out):
    (hs, ps, ts), (hf, pf, tf) = out["sketch"], out["full"]
    return (f"| {label} | {energy:g} | {hs:.8g} | {ps} | {ts:.0f} | {hf:.8g} | {pf} | {tf:.0f} "
            f"| {hs / hf if hf else float('nan'):.6f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="10000x256")
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--minilm", action="store_true")
    ap.add_argument("--defaults", action="store_true",
                    help="the default search against the best of (sketch, 256 full starts)")
    ap.add_argument("--structures", default=",".join(STRUCTURES))
    args = ap.parse_args(argv)
    if args.defaults:
        from bench_search import defaults_table
        n, d = (int(v) for v in args.size.split("x"))
        pairs = [(f"{name} {n:,} x {d}, seed {seed}", *STRUCTURES[name][0](n, d, seed),
                  STRUCTURES[name][1]) for name in args.structures.split(",")
                 for seed in (int(s) for s in args.seeds.split(","))]
        defaults_table(pairs, args.dtype)
        return
    print("| pair | E | sketch H² | passes | search pass-times | full H² | passes | search pass-times "
          "| sketch / full |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    if args.minilm:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "quantization_audit"))
        from audit import TENSOR, int8_round_trip, model_file
        from bhtcli.io.load import load_matrix
        A = np.asarray(load_matrix(f"{model_file()}:{TENSOR}"), dtype=np.float32)
        variants = {"MiniLM int8": int8_round_trip(A), "MiniLM float16": A.astype(np.float16).astype(np.float32)}
        for label, B in variants.items():
            for energy in (1.0, 3.0, 10.0, 16.17, 30.0, 100.0):
                print(row(label, energy, compare(A, B, energy, "float32", full_starts=32)), flush=True)
        return
    n, d = (int(v) for v in args.size.split("x"))
    for name, (make, energy) in STRUCTURES.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            A, B = make(n, d, seed)
            print(row(f"{name} {n:,} x {d}, seed {seed}, {args.dtype}", energy,
                      compare(A, B, energy, args.dtype)), flush=True)


if __name__ == "__main__":
    main()
