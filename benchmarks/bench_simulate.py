"""Benchmark: `simulate` at scale, 10,000 trials per model, 1,000 answers, n of about 10^4.

Run:  .venv/bin/python benchmarks/bench_simulate.py
A: 1,000 x 16 with N(0, 1/4) entries, B = A + 0.03 N(0, 1/4), E = 1; the query is designed
once, then each policy is timed alone on it.
"""
import time

import numpy as np

from bhtcli import design
from bhtcli.api import simulate


def main():
    rng = np.random.default_rng(0)
    A = 0.5 * rng.standard_normal((1000, 16))
    B = A + 0.03 * rng.standard_normal((1000, 16))
    r = design(A, B, 1.0)
    x = np.array(r.query)
    print(f"predicted n = {r.samples['predicted']:,} (lower {r.samples['lower']:,}, "
          f"upper {r.samples['upper']:,})\n")
    print("| policy | seconds | result |")
    print("|---|---|---|")
    for policy in ("fixed", "sprt", "adaptive"):
        t = time.perf_counter()
        s = simulate(A, B, 1.0, query=x, trials=10_000, policy=policy, seed=0)
        secs = time.perf_counter() - t
        if policy == "fixed":
            f = s.fixed
            what = f"empirical n {f['empirical']:,} (95% interval {f['interval'][0]:,}-{f['interval'][1]:,})"
        else:
            p = getattr(s, policy)
            what = f"mean queries {p['mean_samples_a']:,.0f} / {p['mean_samples_b']:,.0f} (A / B true)"
        print(f"| {policy} | {secs:.1f} | {what} |", flush=True)


if __name__ == "__main__":
    main()
