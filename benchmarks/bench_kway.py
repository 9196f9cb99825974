"""Benchmark: K-way designs (docs/kway.md) -- schedule gains, predicted against Monte Carlo, and
the cost of a K-model design against one pair design at the same size, in the same run.

Run:  .venv/bin/python benchmarks/bench_kway.py                       (all three parts)
      .venv/bin/python benchmarks/bench_kway.py --part scale --sizes 50000x1024 --dtype float32
      .venv/bin/python benchmarks/bench_kway.py --part gain
      .venv/bin/python benchmarks/bench_kway.py --part counts

gain:   d = 2, n = 6, 3 and 4 random models (N(0, 1.5^2) entries), E = 2: the best schedule's
        bottleneck exponent over the best single query's.
counts: n = 30, d = 6, random models: `samples.predicted` against the empirical n at which the
        Monte Carlo maximum-likelihood test (20,000 trials per model) has every error <= alpha.
scale:  K = 4 models in memory (A: rows of norm ~1, each other model A + 0.01 N(0, 1/d)), the
        K-way design against the pair design of the first two, both in this process: wall
        times, passes, the measured pass-times (the pair's: one 2n x d product and back with a
        d x 32 block; the K models': Kn x d), wall over the pair's pass-time, and the ratio.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bhtcli import api  # noqa: E402
from bhtcli.commands.kway_loop import log_probs_at, ml_errors_mc  # noqa: E402


def part_gain():
    print("schedule gain (d = 2, n = 6, E = 2)")
    print(f"{'K':>2} {'seed':>4} {'single D':>10} {'schedule D':>11} {'queries':>7} {'gain':>6}")
    gains = []
    for K in (3, 4):
        for seed in range(1, 9):
            rng = np.random.default_rng(seed)
            models = [1.5 * rng.standard_normal((6, 2)) for _ in range(K)]
            r = api.design(models, energy=2.0, schedule=True)
            s = r.schedule
            gains.append(s["gain_vs_single"])
            print(f"{K:>2} {seed:>4} {r.bhattacharyya_distance:>10.4g} {s['bhattacharyya_distance']:>11.4g} "
                  f"{len(s['weights']):>7} {s['gain_vs_single']:>6.3f}")
    g = np.array(gains)
    print(f"gain: median {np.median(g):.3f}, max {g.max():.3f}, share > 1.25: {np.mean(g > 1.25):.2f}\n")


def part_counts(trials=20000):
    print("predicted against Monte Carlo (n = 30, d = 6)")
    print(f"{'K':>2} {'E':>4} {'alpha':>6} {'lower':>6} {'predicted':>9} {'empirical':>9} {'upper':>6} {'pred/emp':>8}")
    for K, E, alpha, seed in ((3, 0.5, 0.05, 11), (4, 0.4, 0.05, 12), (3, 0.4, 0.01, 13),
                              (5, 0.5, 0.05, 14), (4, 0.3, 0.01, 15)):
        rng = np.random.default_rng(seed)
        models = [rng.standard_normal((30, 6)) for _ in range(K)]
        r = api.design(models, energy=E, error=alpha)
        s = r.samples
        logp = log_probs_at(models, [np.array(r.query)])
        lo, hi = s["lower"] - 1, s["upper"]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok = ml_errors_mc(logp, [mid], trials, np.random.default_rng(mid)).max() <= alpha
            lo, hi = (lo, mid) if ok else (mid, hi)
        print(f"{K:>2} {E:>4} {alpha:>6} {s['lower']:>6} {s['predicted']:>9} {hi:>9} {s['upper']:>6} "
              f"{s['predicted'] / hi:>8.3f}")
    print()


def part_scale(sizes, dtype, energy):
    print(f"K = 4 against one pair design ({dtype}, E = {energy})")
    for size in sizes:
        n, d = (int(v) for v in size.split("x"))
        rng = np.random.default_rng(0)
        A = (rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
        models = [A] + [(A + 0.01 * rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
                        for _ in range(3)]
        t0 = time.perf_counter()
        pair = api.design(models[0], models[1], energy, dtype=dtype)
        t_pair = time.perf_counter() - t0
        t0 = time.perf_counter()
        kway = api.design(models, energy=energy, dtype=dtype)
        t_kway = time.perf_counter() - t0
        ps = pair.solver["pass_seconds"]
        print(f"{n:,} x {d:,}: pair {t_pair:.1f} s ({pair.solver['passes']} passes, "
              f"{t_pair / ps:.0f} pass-times, H^2 {pair.hellinger_squared:.4g}); "
              f"K = 4 {t_kway:.1f} s ({kway.solver['passes']} passes of the 4 models, one = "
              f"{kway.solver['pass_seconds'] / ps:.2f} pair passes; {t_kway / ps:.0f} pair pass-times, "
              f"bottleneck H^2 {kway.hellinger_squared:.4g}); ratio {t_kway / t_pair:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("all", "gain", "counts", "scale"), default="all")
    ap.add_argument("--sizes", default="50000x1024")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--energy", type=float, default=10.0)
    a = ap.parse_args()
    if a.part in ("all", "gain"):
        part_gain()
    if a.part in ("all", "counts"):
        part_counts()
    if a.part in ("all", "scale"):
        part_scale(a.sizes.split(","), a.dtype, a.energy)


if __name__ == "__main__":
    main()
