"""The leverage-score search: the best theta = -log s^2 over the box [lo, hi]^n by L-BFGS-B
from a few starts (docs/maths.md §6.2). Each evaluation is O(n d^2), so the defaults shrink for
large n d^2."""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import minimize

from bhtcli.models.leverage import LeveragePair
from bhtcli.search.result import SearchResult


DEFAULT_LEVERAGE_STARTS = 6
LARGE = 10_000_000            # n d^2 above which defaults shrink to fit ~60 s on 2 cores
LARGE_STARTS, LARGE_EVALUATIONS, EVALUATIONS = 3, 150, 400


def default_starts(n: int, d: int) -> int:
    """6 starts, or 3 when n d^2 > 1e7 (each evaluation is O(n d^2))."""
    return DEFAULT_LEVERAGE_STARTS if n * d * d <= LARGE else LARGE_STARTS


def leverage_starts(pair: LeveragePair, lo: float, hi: float, starts: int, seed: int):
    n = pair.n
    sa, sb = pair.states(np.zeros(n))
    p, q = sa.h / sa.rank, sb.h / sb.rank
    cand = [np.zeros(n), np.where(p > q, hi, lo), np.where(p > q, lo, hi)]
    rng = np.random.default_rng(seed)
    while len(cand) < starts:
        cand.append(rng.choice([lo, hi], size=n) if len(cand) % 2 else rng.uniform(lo, hi, n))
    return cand[:starts]


def maximize_box(pair: LeveragePair, lo: float, hi: float, starts: int, seed: int,
                 objective: str = "bhattacharyya"):
    """The best theta = -log s^2 over the box [lo, hi]^n (a SearchResult; `values` are the
    distinct local maxima, best first)."""
    t0 = time.perf_counter()
    if hi - lo < 1e-15:          # C = c: one admissible query up to scale
        th = np.zeros(pair.n)
        f = pair.value_and_grad(th, objective)[0]
        return SearchResult(x=th, value=f, starts=0, iterations=0, local_maxima=1, values=[f],
                            kkt_residual=None, message="the box is one point up to scale")
    bounds = [(lo, hi)] * pair.n
    d = pair.a.At.shape[0]
    max_evaluations = EVALUATIONS if pair.n * d * d <= LARGE else LARGE_EVALUATIONS
    best, best_f, values, iters, ok = None, -math.inf, [], 0, True
    for th0 in leverage_starts(pair, lo, hi, starts, seed):
        # Scale the objective to ~1 at the start: L-BFGS-B's tolerances are absolute, and D is
        # often ~1e-4 here; this halves the evaluations. Each start gets at most 400
        # evaluations (150 for large n d^2).
        scale = 1.0 / max(pair.value_and_grad(th0, objective)[0], 1e-300)
        res = minimize(lambda t: tuple(-scale * v for v in pair.value_and_grad(t, objective)), th0,
                       jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": 500, "maxfun": max_evaluations, "ftol": 1e-12, "gtol": 1e-9,
                                "maxcor": 20})
        iters += int(res.nit)
        ok &= bool(res.success)
        f = -float(res.fun) / scale
        values.append(f)
        if f > best_f:
            best, best_f = res.x.copy(), f
    distinct = []
    for v in sorted(values, reverse=True):      # equal up to 1e-9 relative: the same maximum
        if all(abs(v - u) > 1e-9 * max(abs(u), 1e-300) for u in distinct):
            distinct.append(v)
    return SearchResult(x=best, value=best_f, starts=len(values), iterations=iters,
                        local_maxima=len(distinct), values=distinct, kkt_residual=None,
                        seconds=time.perf_counter() - t0, success=ok,
                        message="L-BFGS-B converged from every start" if ok else
                        "L-BFGS-B stopped at its evaluation limit from some starts")
