"""Benchmark: the lattice behind `predicted` sized to the count (docs/maths.md §3.3) against the
finest grid, min(4096, 2^18 / N) cells, that every N used before.

Run:  .venv/bin/python benchmarks/bench_counts.py              (400 seeded problems, a few minutes)
      .venv/bin/python benchmarks/bench_counts.py --problems 100 --seed 1

Prints how many of the seeded problems whose counts the lattice computes get a different count
(and, for each, the errors at that N on grids of several sizes, relative to alpha), and the CPU
seconds of both, then the CPU of `rank` on a 6 x 3 pair with 20 candidate rows both ways.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bhtcli.maths.counts import LatticeTest, lattice_count  # noqa: E402
from count_cases import draw_problem, finest as finest_cells  # noqa: E402


def finest(self, N):
    return finest_cells(N)


def problems(count, seed):
    """The problems of `count` seeded draws (tests/count_cases.py, as the tests draw them)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        problem = draw_problem(rng)
        if problem is not None:
            yield problem


def timed(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sized_cells = LatticeTest.cells
    cpu = {"sized": 0.0, "finest": 0.0}
    seen = differ = 0
    for n, tilt, alpha, lo, up in problems(args.problems, args.seed):
        seen += 1
        LatticeTest.cells = sized_cells
        a, t = timed(lambda: lattice_count(tilt, alpha, lo, up))
        cpu["sized"] += t
        LatticeTest.cells = finest
        b, t = timed(lambda: lattice_count(tilt, alpha, lo, up))
        cpu["finest"] += t
        if a != b:
            differ += 1
            la, lb = tilt.log_probs()
            test = LatticeTest(la - lb, np.exp(la), np.exp(lb))
            N = min(a, b)
            grids = {W: test.minimax_test(N, W)[0] / alpha for W in (100, 200, 400, 800, 1600)}
            print(f"differs: n = {n}, alpha = {alpha:g}: sized {a}, finest {b}; error / alpha at "
                  f"N = {N}: " + ", ".join(f"{W} cells {v:.6f}" for W, v in grids.items()))
    LatticeTest.cells = sized_cells
    print(f"{seen} lattice problems, {differ} with another count; CPU sized {cpu['sized']:.1f} s, "
          f"finest {cpu['finest']:.1f} s")

    import bhtcli
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 3))
    B = A + 0.3 * rng.standard_normal((6, 3))
    H = rng.standard_normal((20, 3))
    bhtcli.rank(A, B, H, 2.0)                    # warm: imports
    for name, cells in (("finest", finest), ("sized", sized_cells)):
        LatticeTest.cells = cells
        r, t = timed(lambda: [bhtcli.rank(A, B, H, 2.0) for _ in range(5)])
        top = [(row["index"], row["predicted"]) for row in r[-1].to_dict()["top"]]
        print(f"rank 6 x 3, 20 rows, E = 2 ({name} lattice): {t / 5:.3f} s CPU; top {top}")
    LatticeTest.cells = sized_cells


if __name__ == "__main__":
    main()
