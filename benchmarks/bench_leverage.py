"""Benchmark: leverage-score `design` at n = 20,000, d = 64 (target: within 60 s).

Run:  .venv/bin/python benchmarks/bench_leverage.py
Models: A with N(0, 1) entries, B = A + 0.05 N(0, 1); box 1 <= s_i^2 <= 4.
"""
import time

import numpy as np

from bhtcli.api import design


def main():
    for n, d in [(2000, 16), (20000, 64)]:
        rng = np.random.default_rng(0)
        A = rng.standard_normal((n, d))
        B = A + 0.05 * rng.standard_normal((n, d))
        t = time.perf_counter()
        r = design(A, B, 4.0, model="leverage", floor=1.0)
        wall = time.perf_counter() - t
        s = r.solver
        print(f"| {n:,} x {d} | {wall:.1f} | {s['starts']} | {s['iterations']} | {s['passes']} | "
              f"{r.hellinger_squared:.4g} | {r.samples['predicted']:,} |", flush=True)


if __name__ == "__main__":
    print("| n x d | wall time (s) | starts | iterations | evaluations | H^2 | predicted |")
    print("|---|---|---|---|---|---|---|")
    main()
