"""Benchmark: the default adaptive search against the best of 2,048 starts and a fixed 32.

Run:  .venv/bin/python benchmarks/bench_search.py            (a few minutes on 2 cores)
      .venv/bin/python benchmarks/bench_search.py --reference   (recompute the reference: ~1 h)
      .venv/bin/python benchmarks/bench_search.py --mid         (mid-size pairs, ~15 min)

Checkpoint-like pairs (A with N(0, 9/d) entries, B = A + 10% noise), seeded, n 2,000-5,000,
d 16-128, E 2-16. For each pair: H^2 of the default search (adaptive rounds, budget ladder),
H^2 of the best of 2,048 starts (the reference: four seeded blocks of 512 fixed starts,
cached as the best query per pair in benchmarks/search_reference.npz), their ratio, and the
cost of the default against a fixed 32-start run in the same process (passes over A and B,
and seconds; the machine may be shared, so passes are the steadier measure).

With --mid: seeded mid-size pairs of several structures (spread row norms, Gaussian, low-rank
plus changed rows, checkpoint-like, int8 round trips; 3,000 x 48 to 10,000 x 256), each
searched four times in the same process: the default (method "auto"), the sketch, a 256-start
full search and a fixed 32-start full search. The default's H^2 is compared with the best of
the sketch and the 256-start search ("best known"), its cost with the fixed 32-start search.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search import maximize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pairs import checkpoint, gaussian, int8, lowrank, spread  # noqa: E402

checkpoint_pair = checkpoint     # the reference pairs (search_reference.npz)

PAIRS = [(2000, 64, 8.0, 1), (3000, 128, 16.0, 2), (5000, 16, 4.0, 3), (2000, 16, 2.0, 4),
         (4000, 32, 8.0, 5), (2500, 128, 12.0, 6)]
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_reference.npz")


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
            r = maximize(SoftmaxPair(A, B), E, "full", starts=512, seed=1000 + block)
            if r.value > best:
                best, bx = r.value, r.x
        out[key(n, d, E, seed)] = bx
        print(f"reference {key(n, d, E, seed)}: H^2 = {h2(best):.8g}", flush=True)
    np.savez(path, **out)


def mid_pairs(dtype_note=""):
    """(label, A, B, E) of the --mid table."""
    out = []
    for make, name, n, d, E, seeds in (
            (spread, "spread row norms", 10_000, 256, 10.0, (0, 1)),
            (gaussian, "gaussian", 10_000, 256, 10.0, (0,)),
            (lowrank, "low-rank + 8 rows", 10_000, 256, 8.0, (0,)),
            (checkpoint, "checkpoint-like", 3_000, 48, 5.0, (0, 1)),
            (spread, "spread row norms", 3_000, 48, 5.0, (0,)),
            (int8, "int8 round trip", 5_000, 128, 10.0, (0,))):
        for seed in seeds:
            A, B = make(n, d, seed)
            out.append((f"{name} {n:,} x {d}, seed {seed}", A, B, E))
    return out


def defaults_table(pairs, dtype="float64"):
    """For each (label, A, B, E): the default search against the best of (sketch, 256 full
    starts), and its cost against a fixed 32-start full search, all in this process."""
    print("| pair | E | default H² | best known H² (sketch / 256 starts) | default / best | "
          "passes default / fixed 32 | seconds default / fixed 32 |")
    print("|---|---:|---:|---|---:|---:|---:|")
    worst, cost = np.inf, np.zeros(4)
    for label, A, B, E in pairs:
        runs = {}
        for name, method, starts in (("fixed", "full", 32), ("default", "auto", None),
                                     ("sketch", "sketch", None), ("full256", "full", 256)):
            pair = SoftmaxPair(A, B, dtype=dtype)
            t = time.perf_counter()
            r = maximize(pair, E, method, starts=starts, seed=0)
            runs[name] = (h2(float(SoftmaxPair(A, B).value(r.x[:, None])[0])), pair.passes,
                          time.perf_counter() - t)
        best = max(runs["sketch"][0], runs["full256"][0])
        (hd, pd, td), (_, pf, tf) = runs["default"], runs["fixed"]
        worst = min(worst, hd / best)
        cost += [pd, pf, td, tf]
        print(f"| {label} | {E:g} | {hd:.8g} | {best:.8g} ({runs['sketch'][0]:.6g} / "
              f"{runs['full256'][0]:.6g}) | {hd / best:.6f} | {pd} / {pf} ({pd / pf:.2f}x) | "
              f"{td:.1f} / {tf:.1f} ({td / tf:.2f}x) |", flush=True)
    print(f"\nworst default / best known {worst:.6f}; summed cost of the default: "
          f"{cost[0] / cost[1]:.2f}x the passes and {cost[2] / cost[3]:.2f}x the seconds of fixed "
          "32-start full searches")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", action="store_true", help="recompute the cached reference")
    ap.add_argument("--mid", action="store_true", help="the mid-size pairs (module docstring)")
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    args = ap.parse_args()
    if args.mid:
        defaults_table(mid_pairs(), args.dtype)
        return
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
            r = maximize(pair, E, "full" if starts else "auto", starts=starts, seed=0)
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
