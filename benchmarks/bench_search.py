"""Benchmark: the default adaptive search against the best of 2,048 starts and a fixed 32.

Run:  .venv/bin/python benchmarks/bench_search.py            (a few minutes on 2 cores)
      .venv/bin/python benchmarks/bench_search.py --reference   (recompute the reference: ~1 h)

Checkpoint-like pairs (A with N(0, 9/d) entries, B = A + 10% noise), seeded, n 2,000-5,000,
d 16-128, E 2-16. For each pair: H^2 of the default search (adaptive rounds, budget ladder),
H^2 of the best of 2,048 starts (the reference: four seeded blocks of 512 fixed starts,
cached as the best query per pair in benchmarks/search_reference.npz), their ratio, and the
cost of the default against a fixed 32-start run in the same process (passes over A and B,
and seconds; the machine may be shared, so passes are the steadier measure).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search import maximize

PAIRS = [(2000, 64, 8.0, 1), (3000, 128, 16.0, 2), (5000, 16, 4.0, 3), (2000, 16, 2.0, 4),
         (4000, 32, 8.0, 5), (2500, 128, 12.0, 6)]
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_reference.npz")


def checkpoint_pair(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    s = 3.0 / np.sqrt(d)
    A = s * rng.standard_normal((n, d))
    return A, A + 0.1 * s * rng.standard_normal((n, d))


def key(n, d, E, seed) -> str:
    return f"n{n}_d{d}_E{E:g}_s{seed}"


def h2(value: float) -> float:
    return float(-np.expm1(-value))


def compute_reference(path: str) -> None:
    out = {}
    for n, d, E, seed in PAIRS:
        A, B = checkpoint_pair(n, d, seed)
        best, bx = -1.0, None
        for block in range(4):
            r = maximize(SoftmaxPair(A, B), E, starts=512, seed=1000 + block)
            if r.value > best:
                best, bx = r.value, r.x
        out[key(n, d, E, seed)] = bx
        print(f"reference {key(n, d, E, seed)}: H^2 = {h2(best):.8g}", flush=True)
    np.savez(path, **out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", action="store_true", help="recompute the cached reference")
    args = ap.parse_args()
    if args.reference or not os.path.exists(REFERENCE):
        compute_reference(REFERENCE)
    ref = np.load(REFERENCE)
    print("| n x d, E | default H^2 | best of 2,048 H^2 | ratio | default starts, stop | "
          "passes default / fixed 32 | seconds default / fixed 32 |")
    print("|---|---|---|---|---|---|---|")
    total = np.zeros(4)
    worst = np.inf
    for n, d, E, seed in PAIRS:
        A, B = checkpoint_pair(n, d, seed)
        p = SoftmaxPair(A, B)
        reference = h2(float(p.value(ref[key(n, d, E, seed)][:, None])[0]))
        runs = {}
        for name, starts in (("fixed", 32), ("default", None)):
            pair = SoftmaxPair(A, B)
            t = time.perf_counter()
            r = maximize(pair, E, starts=starts, seed=0)
            runs[name] = (r, pair.passes, time.perf_counter() - t)
        (r, pd, td), (_, pf, tf) = runs["default"], runs["fixed"]
        ratio = h2(r.value) / reference
        worst = min(worst, ratio)
        total += [pd, pf, td, tf]
        print(f"| {n:,} x {d}, {E:g} | {h2(r.value):.6f} | {reference:.6f} | {ratio:.4f} | "
              f"{r.starts}, {r.stop_reason} | {pd} / {pf} ({pd / pf:.2f}x) | "
              f"{td:.1f} / {tf:.1f} ({td / tf:.2f}x) |", flush=True)
    print(f"\nworst ratio {worst:.5f}; summed cost of the default: {total[0] / total[1]:.2f}x the "
          f"passes and {total[2] / total[3]:.2f}x the seconds of fixed 32-start runs")


if __name__ == "__main__":
    main()
