"""Can a user tell exact softmax from its degree-K Taylor surrogate (polynomial attention)?

For K in {2, 4, 6, 8}: the smallest energy E at which `bht design A A --link-b taylor:K`
predicts detection within 1,000 queries (samples.predicted <= 1,000 at alpha = 0.05), found
by bisection on log E (the designed H^2 grows with E: the ball only gets larger).

    .venv/bin/python examples/link_detection.py            # markdown table on stdout

Models: examples/A.npy (40 x 8, the README's example) and a random 500 x 64 key matrix with
rows of norm ~1 (seed 0). Prints E*, the largest score E* max_i ||a_i|| it allows, H^2 and
the predicted count there, and what the same energy gives against taylor:K+2.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bhtcli import design  # noqa: E402

TARGET = 1_000
ALPHA = 0.05


def predicted(A, K, energy, starts=16):
    r = design(A, A, energy, error=ALPHA, link_b=f"taylor:{K}", starts=starts, seed=0)
    return r


def smallest_energy(A, K, lo=1e-2, hi=1e3, steps=24):
    """Bisection on log E for predicted <= TARGET (assumes monotone in E)."""
    def ok(E):
        r = predicted(A, K, E)
        return r.samples["predicted"] is not None and r.samples["predicted"] <= TARGET
    while not ok(hi):
        hi *= 4
    while ok(lo):
        lo /= 4
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.01:             # E* to 1%
            break
    return hi


def main():
    rng = np.random.default_rng(0)
    models = {
        "examples/A.npy (40 x 8)": np.load(Path(__file__).with_name("A.npy")),
        "random keys (500 x 64, rows ~ unit norm)": rng.normal(size=(500, 64)) / 8.0,
    }
    for name, A in models.items():
        row = float(np.max(np.linalg.norm(A, axis=1)))
        print(f"\n{name}: exact softmax vs taylor:K, alpha = {ALPHA}, target {TARGET:,} queries\n")
        print("| K | smallest E | largest score E max‖a_i‖ | H² at E | predicted queries | "
              "queries at that E vs taylor:K+2 | seconds |")
        print("|---|---|---|---|---|---|---|")
        for K in (2, 4, 6, 8):
            t = time.perf_counter()
            E = smallest_energy(A, K)
            r = predicted(A, K, E)
            nxt = predicted(A, K + 2, E)
            print(f"| {K} | {E:.4g} | {E * row:.3g} | {r.hellinger_squared:.3g} | "
                  f"{r.samples['predicted']:,} | {nxt.samples['predicted'] or '-':,} | "
                  f"{time.perf_counter() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
