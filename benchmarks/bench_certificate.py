"""Benchmark: the certificate's cost at vocabulary scale, in pass-times.

Run:  .venv/bin/python benchmarks/bench_certificate.py --pair DIR          (DIR/A.safetensors, B)
      .venv/bin/python benchmarks/bench_certificate.py --size 50000x1024   (writes a pair first)
      .venv/bin/python benchmarks/bench_certificate.py --size 150000x4096  (~6 GB: alone)

The pair is bench_scale.py's (A rows of norm 0.6-1.6, B = A + 0.01 N(0, 1/d), float32
safetensors, memory-mapped). In one process it measures the pass-time (``pass_seconds``: one
forward product of the stacked 2n x d float32 matrix with a d x 32 block plus the backward
one; timed before and after the rest, the smaller kept), then ``pair_base`` and ``analyse_pair`` at the budget (the fastest of --repeats), and
the peak memory they allocate (tracemalloc, numpy's allocations included). ``--full`` also
times the path without the per-row skip (math.inf threshold: the d x d Gram and its
eigendecomposition, as before the skip existed).
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bhtcli.analysis.ceilings as bounds  # noqa: E402
from bhtcli.io.load import load_pair  # noqa: E402
from bhtcli.analysis.facts import Readout, analyse_pair, pair_base  # noqa: E402
from bhtcli.models.softmax import SoftmaxPair, pass_seconds  # noqa: E402


def timed(fn, repeats):
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_bytes(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run(folder: Path, energy: float, repeats: int, full: bool) -> None:
    A, B = load_pair(str(folder / "A.safetensors"), str(folder / "B.safetensors"), dtype=None)
    n, d = A.shape
    pair = SoftmaxPair(A, B, dtype="float32")
    pt = pass_seconds(pair, repeats=3)
    readout = Readout()
    rows = []
    modes = [("skip", getattr(bounds, "PER_ROW_SKIP_MIN_WORK", math.inf))] + ([("full", math.inf)] if full else [])
    for name, threshold in modes:
        bounds.PER_ROW_SKIP_MIN_WORK = threshold
        tb, base = timed(lambda: pair_base(A, B, pair.G, readout), repeats)
        ta, facts = timed(lambda: analyse_pair(A, B, pair.G, energy, readout), repeats)
        tf, _ = timed(lambda: analyse_pair(A, B, pair.G, energy, readout, base), repeats)
        mem = peak_bytes(lambda: analyse_pair(A, B, pair.G, energy, readout))
        c = facts.ceiling
        rows.append((name, tb, ta, tf, mem, c))
    pair._pass_seconds = None                   # again after the timings: the smaller one
    pt = min(pt, pass_seconds(pair, repeats=3))
    print(f"{n} x {d} float32, E = {energy:g}: pass-time {pt:.4f} s")
    print("| path | pair_base | analyse_pair | + a budget (base given) | peak alloc | binds | per_row H² | range H² |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name, tb, ta, tf, mem, c in rows:
        pr = c.candidates["per_row"]
        print(f"| {name} | {tb:.3f} s ({tb / pt:.1f}) | {ta:.3f} s ({ta / pt:.1f}) | {tf:.3f} s ({tf / pt:.1f}) | "
              f"{mem / 2 ** 20:.0f} MiB | {c.method} | {'skipped' if pr is None else f'{pr:.4g}'} | "
              f"{c.candidates['range']:.6g} |")
    print("(seconds, and in parentheses pass-times)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, help="folder with A.safetensors and B.safetensors")
    parser.add_argument("--size", default="50000x1024", help="n x d of a pair to write (when no --pair)")
    parser.add_argument("--energy", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="also time the path without the skip")
    args = parser.parse_args(argv)
    if args.pair:
        run(args.pair, args.energy, args.repeats, args.full)
        return
    from bench_scale import write_pair
    n, d = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="bht-cert-") as tmp:
        write_pair(Path(tmp), n, d, "safetensors")
        run(Path(tmp), args.energy, args.repeats, args.full)


if __name__ == "__main__":
    main()
