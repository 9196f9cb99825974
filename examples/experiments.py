"""The experiment the paper lacks: predicted against empirical query counts, and fixed vs
sequential vs adaptive strategies, over several model pairs and energies.

Run:  .venv/bin/python examples/experiments.py [--trials 10000] [--plot examples/errors.png]
Prints two Markdown tables (committed to docs/benchmarks.md).
"""
import argparse
import time

import numpy as np

from bhtcli.cli.plot import plot_fixed
from bhtcli.api import simulate


def pairs():
    """(name, A, B): checkpoint-like pairs of different sizes and kinds of difference."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 8))
    yield "40x8, small update + 3 rows", np.load("examples/A.npy"), np.load("examples/B.npy")
    A = rng.standard_normal((200, 16)) / 2
    yield "200x16, dense 10% noise", A, A + 0.1 * rng.standard_normal((200, 16)) / 2
    A = rng.standard_normal((1000, 32)) / 3
    B = A.copy()
    B[:50] += 0.3 * rng.standard_normal((50, 32))
    yield "1000x32, 50 rows changed", A, B


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    rows_fixed, rows_seq = [], []
    plotted = False
    for name, A, B in pairs():
        for energy in (0.5, 1.0, 2.0):
            t = time.perf_counter()
            r = simulate(A, B, energy, trials=args.trials, seed=1, predicted_points=80)
            secs = time.perf_counter() - t
            f, s, a = r.fixed, r.sprt, r.adaptive
            lo, hi = f["interval"]
            rows_fixed.append(f"| {name} | {energy:g} | {r.hellinger_squared:.4g} | {f['lower']:,} | "
                              f"{f['predicted']:,} | {f['empirical']:,} ({lo:,}-{hi:,}) | {f['upper']:,} | "
                              f"{(f['empirical'] - f['predicted']) / f['predicted']:+.1%} |")
            rows_seq.append(f"| {name} | {energy:g} | {f['empirical']:,} | "
                            f"{s['mean_samples_a']:.1f} / {s['mean_samples_b']:.1f} | "
                            f"{s['wald_lower_a']:.1f} / {s['wald_lower_b']:.1f} | "
                            f"{s['error_a']:.3f} / {s['error_b']:.3f} | "
                            f"{a['mean_samples_a']:.1f} / {a['mean_samples_b']:.1f} | "
                            f"{a['saving_vs_sprt']:+.1%} | {secs:.1f} |")
            if args.plot and not plotted and name.startswith("200x16") and energy == 1.0:
                plot_fixed(r, args.plot)
                plotted = True
    print(f"Predicted vs empirical queries for the fixed-n test (alpha = 0.05, {args.trials:,} "
          "trials per model; empirical with its 95% interval):\n")
    print("| models | E | H^2 | lower | predicted | empirical | upper | emp. vs pred. |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows_fixed))
    print("\nFixed n vs Wald's SPRT vs Chernoff's adaptive rule (mean queries when A / B is true):\n")
    print("| models | E | fixed n | SPRT mean | Wald lower bound | SPRT errors | adaptive mean | "
          "adaptive saving vs SPRT | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows_seq))


if __name__ == "__main__":
    main()
