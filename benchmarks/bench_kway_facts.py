"""Benchmark: the certificate facts of K models -- every pair's PairFacts from passes shared by
the K models (analysis/kway_facts.py, docs/maths.md §4.17) against one analyse_pair per pair,
in the same run, and whether the two agree to the bit.

Run:  OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_kway_facts.py
      OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_kway_facts.py --K 3,4,8
      OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_kway_facts.py --size 20000x512 --dtype float64

Models as benchmarks/bench_kway.py's scale part builds them (A: rows ~ N(0, 1/d), each other
model A + 0.01 N(0, 1/d)). For each K: CPU and wall seconds of both (the best of --repeats,
alternating), their ratio, the load, and "identical" when every pair's facts (every float of
the diameter, the spread, the ceiling and its candidates) have the same bits.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from itertools import combinations

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bhtcli.analysis.diameter import DifferenceRows  # noqa: E402
from bhtcli.analysis.facts import analyse_pair  # noqa: E402
from bhtcli.analysis.kway_facts import analyse_pairs  # noqa: E402


def per_pair(mats, energy):
    return [analyse_pair(mats[i], mats[j], DifferenceRows(mats[i], mats[j]), energy)
            for i, j in combinations(range(len(mats)), 2)]


def bits(x):
    """Every float of a PairFacts (nested dataclasses and dicts) as bytes, in order."""
    if dataclasses.is_dataclass(x):
        return b"".join(bits(getattr(x, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, dict):
        return b"".join(bits(v) for v in x.values())
    if isinstance(x, (float, np.floating)):
        return np.float64(x).tobytes()
    return repr(x).encode()


def timed(f, *args):
    t0, c0 = time.perf_counter(), time.process_time()
    out = f(*args)
    return out, time.process_time() - c0, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="50000x1024")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--K", default="4")
    ap.add_argument("--energy", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    n, d = (int(v) for v in a.size.split("x"))
    print(f"certificate facts of K models, {n:,} x {d:,} {a.dtype}, E = {a.energy}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for K in (int(k) for k in a.K.split(",")):
        rng = np.random.default_rng(0)
        A = (rng.standard_normal((n, d)) / np.sqrt(d)).astype(a.dtype)
        mats = [A] + [(A + 0.01 * rng.standard_normal((n, d)) / np.sqrt(d)).astype(a.dtype)
                      for _ in range(K - 1)]
        load = os.getloadavg()[0]
        best = {"pairs": (np.inf, np.inf), "shared": (np.inf, np.inf)}
        for _ in range(a.repeats):
            want, c_old, w_old = timed(per_pair, mats, a.energy)
            got, c_new, w_new = timed(analyse_pairs, mats, a.energy)
            best["pairs"] = min(best["pairs"], (c_old, w_old))
            best["shared"] = min(best["shared"], (c_new, w_new))
        same = [bits(x) for x in want] == [bits(x) for x in got]
        (c_old, w_old), (c_new, w_new) = best["pairs"], best["shared"]
        print(f"K = {K} ({K * (K - 1) // 2} pairs): per pair {c_old:.2f} s CPU ({w_old:.2f} s wall), "
              f"shared {c_new:.2f} s CPU ({w_new:.2f} s wall); ratio {c_new / c_old:.2f} CPU, "
              f"{w_new / w_old:.2f} wall; {'identical' if same else 'DIFFERENT'}; load "
              f"{load:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
