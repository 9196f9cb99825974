"""Benchmark: K-way designs (docs/kway.md) -- schedule gains, predicted against Monte Carlo, and
the cost of a K-model design against one pair design at the same size, in the same run.

Run:  .venv/bin/python benchmarks/bench_kway.py                       (all parts)
      .venv/bin/python benchmarks/bench_kway.py --part scale --sizes 50000x1024 --dtype float32
      .venv/bin/python benchmarks/bench_kway.py --part gain
      .venv/bin/python benchmarks/bench_kway.py --part counts
      .venv/bin/python benchmarks/bench_kway.py --part quality
      .venv/bin/python benchmarks/bench_kway.py --part scale --reference-starts 64
      .venv/bin/python benchmarks/bench_kway.py --part kernel
      .venv/bin/python benchmarks/bench_kway.py --part readouts --sizes 4000x64,20000x256

gain:   d = 2, n = 6, 3 and 4 random models (N(0, 1.5^2) entries), E = 2: the best schedule's
        bottleneck exponent over the best single query's.
counts: n = 30, d = 6, random models: `samples.predicted` against the empirical n at which the
        Monte Carlo maximum-likelihood test (20,000 trials per model) has every error <= alpha.
scale:  K = 4 models in memory (A: rows of norm ~1, each other model A + 0.01 N(0, 1/d)), the
        K-way design against the pair design of the first two, both in this process: wall
        times, passes, the measured pass-times (the pair's: one 2n x d product and back with a
        d x 32 block; the K models': Kn x d), wall over the pair's pass-time, and the ratio;
        also both CPU times of this process and their ratio (steadier than wall time on a
        shared machine; with OPENBLAS_NUM_THREADS=1 no thread spins while it waits);
        with --reference-starts N, the full K-way search with N starts on the same models.
quality: the sketched K-way search forced on six seeded mid-size cases (float64) against the
        full K-way search (32 starts): bottleneck ratio, passes, seconds.
kernel: one evaluation of the K = 4 fused pairs (maths/kway_pairs.py) at n = 50,000 and k
        columns, with combination: row blocks in turn against two threads (the first call,
        fresh pages, and the median of five after; the search uses no pool: it did not pay),
        the coefficient form with its combined weights (what the exploring climbs use) against
        the fused pairs in turn, and the coefficient form's D alone against the fused pairs'
        (docs/maths.md §8.12, §8.13).
readouts: K = 4 models with softcap:3 links and biases on two of them (A: rows of norm ~1, each
        other model A + 0.3 N(0, 1/d); float64, E = 10), api.design with each model's read-out
        evaluated once per step (the pairs through the fused kernel) against the pair-by-pair
        read-outs (KModels.readouts_per_pair, kept for this comparison), alternating, in the same
        run: wall seconds, passes and the bottleneck D each reaches.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bhtcli import api  # noqa: E402
from kway_cases import quality_case  # noqa: E402  (shared with the tests)
from bhtcli.commands.decide import log_probs_at  # noqa: E402
from bhtcli.commands.simulate import ml_errors_mc  # noqa: E402


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


def part_scale(sizes, dtype, energy, reference_starts):
    print(f"K = 4 against one pair design ({dtype}, E = {energy}); load {os.getloadavg()[0]:.1f}")
    for size in sizes:
        n, d = (int(v) for v in size.split("x"))
        rng = np.random.default_rng(0)
        A = (rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
        models = [A] + [(A + 0.01 * rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
                        for _ in range(3)]
        t0, c0 = time.perf_counter(), time.process_time()
        pair = api.design(models[0], models[1], energy, dtype=dtype)
        t_pair, c_pair = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        kway = api.design(models, energy=energy, dtype=dtype)
        t_kway, c_kway = time.perf_counter() - t0, time.process_time() - c0
        ps = pair.solver["pass_seconds"]
        print(f"{n:,} x {d:,}: pair {t_pair:.1f} s ({pair.solver['passes']} passes, "
              f"{t_pair / ps:.0f} pass-times, H^2 {pair.hellinger_squared:.4g}); "
              f"K = 4 [{kway.solver['search_space']}] {t_kway:.1f} s ({kway.solver['passes']} "
              f"passes of the 4 models, one = {kway.solver['pass_seconds'] / ps:.2f} pair passes; "
              f"{t_kway / ps:.0f} pair pass-times, of which search {kway.solver['search_seconds'] / ps:.0f}; "
              f"bottleneck D {kway.bhattacharyya_distance:.6g}, KKT residual "
              f"{kway.solver['kkt_residual']:.2g}); ratio {t_kway / t_pair:.2f}; CPU seconds (this "
              f"process, all threads) pair {c_pair:.1f}, K = 4 {c_kway:.1f}, ratio {c_kway / c_pair:.2f}",
              flush=True)
        if reference_starts:
            t0 = time.perf_counter()
            ref = api.design(models, energy=energy, dtype=dtype, starts=reference_starts)
            t_ref = time.perf_counter() - t0
            print(f"    full K-way search, {reference_starts} starts: {t_ref:.1f} s "
                  f"({ref.solver['passes']} passes, {t_ref / ps:.0f} pair pass-times), bottleneck D "
                  f"{ref.bhattacharyya_distance:.6g}; sketch / full "
                  f"{kway.bhattacharyya_distance / ref.bhattacharyya_distance:.6f}", flush=True)


def part_quality(dtype):
    """The sketched K-way search forced on seeded mid-size cases against the full search."""
    print(f"sketched against full K-way search ({dtype})")
    print(f"{'case':>26} {'full D':>12} {'sketch D':>12} {'ratio':>9} {'passes full/sketch':>18} "
          f"{'seconds full/sketch':>19}")
    worst = np.inf
    for seed, n, d, K, kind, E in QUALITY_CASES:
        models = quality_case(seed, n, d, K, kind)
        t0 = time.perf_counter()
        full = api.design(models, energy=E, dtype=dtype, search_space="full")
        t_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        sk = api.design(models, energy=E, dtype=dtype, search_space="sketch")
        t_sk = time.perf_counter() - t0
        ratio = sk.bhattacharyya_distance / full.bhattacharyya_distance
        worst = min(worst, ratio)
        print(f"{f'{n}x{d} K={K} {kind} E={E:g}':>26} {full.bhattacharyya_distance:>12.6g} "
              f"{sk.bhattacharyya_distance:>12.6g} {ratio:>9.6f} "
              f"{full.solver['passes']:>9}/{sk.solver['passes']:<8} {t_full:>9.1f}/{t_sk:<9.1f}", flush=True)
    print(f"worst sketch / full: {worst:.6f}\n")


def part_kernel(n=50000, K=4, widths=(1, 4, 8, 24, 32)):
    """The fused pairs in turn against the row-chunk pool, and the coefficient form."""
    import itertools
    from concurrent.futures import ThreadPoolExecutor
    from bhtcli.maths.kway_coefficients import coefficient_distances, coefficient_pairs
    from bhtcli.maths.kway_pairs import fused_pairs
    from bhtcli.models.threads import single_threaded
    executor = ThreadPoolExecutor(2)

    def over_chunks(work, count, chunks=4):       # the row blocks in 4 ranges on 2 threads
        bounds = [round(c * count / chunks) for c in range(chunks + 1)]
        for f in [executor.submit(work, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]:
            f.result()
    print(f"fused pairs, n = {n:,}, K = {K}: ms per evaluation with combination (first call / "
          f"median of 5); load {os.getloadavg()[0]:.1f}")
    pairs = list(itertools.combinations(range(K), 2))
    rng = np.random.default_rng(0)
    with single_threaded():
        for k in widths:
            r = 3.0 * rng.standard_normal((n, k))
            deltas = [None] + [(0.01 * rng.standard_normal((n, k))).astype(np.float32)
                               for _ in range(K - 1)]
            mu = rng.random((len(pairs), k))
            times = {}
            for name, runner in (("in turn", None), ("pool", over_chunks)) * 6:
                t0 = time.perf_counter()
                fused_pairs(r, deltas, pairs, run_blocks=runner).combine(mu)
                times.setdefault(name, []).append(1e3 * (time.perf_counter() - t0))
            t0 = time.perf_counter()
            D = fused_pairs(r, deltas, pairs, keep_u=False).D
            t_fused = 1e3 * (time.perf_counter() - t0)
            t0 = time.perf_counter()
            C = coefficient_distances(r, deltas, pairs)
            t_coef = 1e3 * (time.perf_counter() - t0)
            rel = float(np.max(np.abs(C - D) / D)) if C is not None else float("nan")
            rough = []                  # what the exploring climbs use: D and the weights
            for _ in range(5):
                t0 = time.perf_counter()
                W = coefficient_pairs(r, deltas, pairs).combine(mu)
                rough.append(1e3 * (time.perf_counter() - t0))
            ref = fused_pairs(r, deltas, pairs).combine(mu)
            w_rel = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(W, ref))
            turn, pool = times["in turn"], times["pool"]
            print(f"k = {k:>2}: in turn {turn[0]:6.1f} / {np.median(turn[1:]):6.1f}, pool "
                  f"{pool[0]:6.1f} / {np.median(pool[1:]):6.1f} (ratio {np.median(turn[1:]) / np.median(pool[1:]):.2f}); "
                  f"coefficient form with combination {np.median(rough):5.1f} (in turn / it "
                  f"{np.median(turn[1:]) / np.median(rough):.2f}, weights within {w_rel:.0e}); "
                  f"D only: fused {t_fused:6.1f}, coefficient {t_coef:5.1f} (ratio "
                  f"{t_fused / t_coef:.2f}, max relative difference {rel:.1e})", flush=True)
    print()


def part_readouts(sizes, repeats=2):
    """K = 4 softcap:3 models: the per-model read-outs against the pair-by-pair ones."""
    from bhtcli.models.kway import KModels
    print(f"K = 4 with softcap:3 links and two biases (float64, E = 10); load {os.getloadavg()[0]:.1f}")
    for size in sizes:
        n, d = (int(v) for v in size.split("x"))
        rng = np.random.default_rng(0)
        A = rng.standard_normal((n, d)) / np.sqrt(d)
        models = [A] + [A + 0.3 * rng.standard_normal((n, d)) / np.sqrt(d) for _ in range(3)]
        biases = [None, rng.standard_normal(n), None, 0.5 * rng.standard_normal(n)]
        links = ["softcap:3"] * 4
        for _ in range(repeats):
            for per_pair in (True, False):
                KModels.readouts_per_pair = per_pair
                t0 = time.perf_counter()
                r = api.design(models, energy=10.0, links=links, biases=biases)
                t = time.perf_counter() - t0
                print(f"{n:,} x {d:,} {'pair by pair' if per_pair else 'per model   '}: {t:6.2f} s, "
                      f"{r.solver['passes']} passes, bottleneck D {r.bhattacharyya_distance:.12g}",
                      flush=True)
        KModels.readouts_per_pair = False
    print()


QUALITY_CASES = ((1, 2000, 64, 3, "noise", 4.0), (2, 2000, 64, 4, "rows", 4.0),
                 (3, 3000, 128, 3, "rows", 8.0), (4, 4000, 96, 4, "noise", 2.0),
                 (5, 3000, 160, 5, "rows", 6.0), (6, 2500, 128, 3, "noise", 10.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("all", "gain", "counts", "quality", "scale", "kernel",
                                           "readouts"),
                    default="all")
    ap.add_argument("--reference-starts", type=int, default=0,
                    help="scale: also run the full K-way search with this many starts")
    ap.add_argument("--sizes", default="50000x1024")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--energy", type=float, default=10.0)
    a = ap.parse_args()
    if a.part in ("all", "gain"):
        part_gain()
    if a.part in ("all", "counts"):
        part_counts()
    if a.part in ("all", "quality"):
        part_quality("float64")
    if a.part in ("all", "kernel"):
        part_kernel()
    if a.part in ("all", "readouts"):
        part_readouts(["4000x64", "20000x256"] if a.part == "all" else a.sizes.split(","))
    if a.part in ("all", "scale"):
        part_scale(a.sizes.split(","), a.dtype, a.energy, a.reference_starts)


if __name__ == "__main__":
    main()
