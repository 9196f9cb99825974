"""Benchmark: `design` against scipy SLSQP from the same number of random starts.

Run:  .venv/bin/python benchmarks/bench_design.py            (or: make bench)

For each size the two methods solve the same problem in the same process:
- bht `design` with its defaults (32 starts, batched projected L-BFGS);
- scipy.optimize.minimize(method="SLSQP") from 32 random points of the ball, one start at a
  time, with the same analytic gradient (SoftmaxPair.value_and_grad) and the constraint
  ||x||^2 <= E^2 with its gradient; ftol=1e-10, maxiter=500.
H^2 of both final points is evaluated by the same stable code. "design total" includes
everything `bht design` computes (certificate, divergences, sample counts); "design search"
is the optimisation alone, the like-for-like comparison with the peer. Then `design` alone on
n = 50,000, d = 1,024 (wall time and passes over A and B).

Model pairs imitate two checkpoints of an output layer: A has N(0, 9/d) entries (logits of a
few units at ||x|| ~ 1), B = A + 0.1 * N(0, 9/d).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize

from bhtcli import design
from bhtcli.models.softmax import SoftmaxPair


def checkpoint_pair(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    s = 3.0 / np.sqrt(d)
    A = s * rng.standard_normal((n, d))
    return A, A + 0.1 * s * rng.standard_normal((n, d))


def slsqp_multistart(A, B, energy: float, starts: int, seed: int):
    pair = SoftmaxPair(A, B)
    rng = np.random.default_rng(seed)
    d = A.shape[1]

    def neg(x):
        D, g = pair.value_and_grad(x[:, None])
        return -D[0], -g[:, 0]

    cons = [{"type": "ineq", "fun": lambda x: energy ** 2 - x @ x, "jac": lambda x: -2.0 * x}]
    best_x, best_D, evals = None, -np.inf, 0
    for _ in range(starts):
        u = rng.standard_normal(d)
        u *= energy * rng.uniform() ** (1.0 / d) / np.linalg.norm(u)
        res = minimize(neg, u, jac=True, method="SLSQP", constraints=cons,
                       options={"maxiter": 500, "ftol": 1e-10})
        evals += res.nfev
        x = res.x * min(1.0, energy / max(np.linalg.norm(res.x), 1e-300))
        D = pair.value(x[:, None])[0]
        if D > best_D:
            best_x, best_D = x, D
    return best_x, evals, pair.passes


def h2_at(A, B, x) -> float:
    return SoftmaxPair(A, B).divergences(x).hellinger_squared


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--energy", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-large", action="store_true", help="skip the 50,000 x 1,024 run")
    args = ap.parse_args()
    starts = 32
    print(f"energy E = {args.energy}, {starts} starts for both methods\n")
    design(*checkpoint_pair(50, 4, 1), 1.0)      # warm-up: lazy imports, FFT plans
    print("| n x d | design total (s) | design search (s) | SLSQP (s) | speed-up total | "
          "speed-up search | H^2 design | H^2 SLSQP | design - SLSQP |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, d in [(2000, 64), (20000, 256)]:
        A, B = checkpoint_pair(n, d, args.seed)
        t = time.perf_counter()
        r = design(A, B, args.energy, starts=starts, seed=args.seed)
        t_design = time.perf_counter() - t
        t = time.perf_counter()
        x_peer, _, _ = slsqp_multistart(A, B, args.energy, starts, args.seed)
        t_peer = time.perf_counter() - t
        h_peer = h2_at(A, B, x_peer)
        t_search = r.solver["search_seconds"]
        print(f"| {n:,} x {d:,} | {t_design:.2f} | {t_search:.2f} | {t_peer:.2f} | "
              f"{t_peer / t_design:.1f}x | {t_peer / t_search:.1f}x | {r.hellinger_squared:.10f} | "
              f"{h_peer:.10f} | {r.hellinger_squared - h_peer:+.1e} |", flush=True)
    if not args.skip_large:
        n, d = 50000, 1024
        A, B = checkpoint_pair(n, d, args.seed)
        t = time.perf_counter()
        r = design(A, B, args.energy, seed=args.seed)
        wall = time.perf_counter() - t
        s = r.solver
        print("\n| n x d | wall time (s) | passes over A and B | iterations | H^2 | KKT residual |")
        print("|---|---|---|---|---|---|")
        print(f"| {n:,} x {d:,} | {wall:.1f} | {s['passes']} | {s['iterations']} | "
              f"{r.hellinger_squared:.6f} | {s['kkt_residual']:.1e} |")


if __name__ == "__main__":
    main()
