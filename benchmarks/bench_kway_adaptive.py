"""Benchmark: sequential answers with K models -- the matrix SPRT with the designed query, with
the designed schedule, and Chernoff's adaptive rule (docs/kway.md, docs/maths.md §3.6), on
seeded cases, in the same run.

Run:  .venv/bin/python benchmarks/bench_kway_adaptive.py [--trials 4000]

Cases: K = 3, 4 and 5 random models (N(0, 1) entries, n = 30, d = 6) at E = 0.5 and 0.3, K = 3
or 4 models of the bundled example's size (n = 40, d = 8, N(0, 1.5^2)) at E = 1 (easy: about
two answers), and the bundled example's three models (examples/A.npy, B.npy, C.npy) at E = 1;
alpha = 0.05. For
each strategy: the mean answers averaged over the true model, the largest mean (the worst true
model), the largest realised error (every one should be <= alpha), and the adaptive rule's
saving against the SPRT with the designed query. All three stop by the same matrix SPRT.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bhtcli import api  # noqa: E402

CASES = (  # (K, n, d, scale, E, seed)
    (3, 30, 6, 1.0, 0.5, 21), (4, 30, 6, 1.0, 0.5, 22), (5, 30, 6, 1.0, 0.5, 23),
    (3, 40, 8, 1.5, 1.0, 24), (4, 40, 8, 1.5, 1.0, 25), (3, 30, 6, 1.0, 0.3, 26),
    (3, 40, 8, None, 1.0, 0),        # the bundled example
)
EXAMPLE = [str(Path(__file__).resolve().parents[1] / "examples" / f) for f in ("A.npy", "B.npy", "C.npy")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    args = parser.parse_args(argv)
    print(f"matrix SPRT: designed query, designed schedule, Chernoff's adaptive rule "
          f"({args.trials:,} trials per model; load {os.getloadavg()[0]:.1f})")
    print(f"{'K':>2} {'n x d':>6} {'E':>4} | {'query: mean / worst / max err':>30} | "
          f"{'schedule: mean / worst / max err':>33} | {'adaptive: mean / worst / max err':>33} | "
          f"{'saving':>6} {'seconds':>7}")
    savings = []
    for K, n, d, scale, E, seed in CASES:
        rng = np.random.default_rng(seed)
        models = EXAMPLE if scale is None else [scale * rng.standard_normal((n, d)) for _ in range(K)]
        t0 = time.perf_counter()
        one = api.simulate(models, energy=E, trials=args.trials, seed=seed, policy="all").to_dict()
        sch = api.simulate(models, energy=E, trials=args.trials, seed=seed, policy="sprt",
                           schedule=True).to_dict()
        seconds = time.perf_counter() - t0
        s, a, c = one["sequential"], one["adaptive"], sch["sequential"]
        cell = lambda r: (f"{np.mean(r['mean_samples']):>8.2f} / {max(r['mean_samples']):>7.2f} / "
                          f"{max(r['error']):>6.4f}")
        saving = 1 - np.mean(a["mean_samples"]) / np.mean(s["mean_samples"])
        savings.append(saving)
        print(f"{K:>2} {n:>3}x{d:<2} {E:>4} | {cell(s):>30} | {cell(c):>33} | {cell(a):>33} | "
              f"{100 * saving:>5.1f}% {seconds:>7.1f}", flush=True)
    print(f"adaptive against the designed query's SPRT: mean saving {100 * np.mean(savings):.1f}%, "
          f"range {100 * min(savings):.1f}% .. {100 * max(savings):.1f}%")


if __name__ == "__main__":
    main()
