"""The one result of every search method (batched L-BFGS with its ladder, CCP, the leverage
models' L-BFGS-B), and the `solver` object of a design built from it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class SearchResult:
    """What a search found and how. `value` and `values` are Bhattacharyya distances D."""

    x: np.ndarray                   # the best query (leverage: theta = -log s^2)
    value: float                    # D(x)
    starts: int
    iterations: int                 # iterations (ccp: convex solves)
    local_maxima: int               # distinct local maxima seen among the starts
    values: list = field(default_factory=list)   # D at each distinct local maximum, best first
    on_boundary: bool = True
    kkt_residual: float | None = 0.0   # ||projected gradient|| / ||gradient at start|| (softmax)
    seconds: float = 0.0
    method: str = "lbfgs"           # lbfgs or ccp
    success: bool = True            # every start ran to its stopping test
    message: str = ""               # why the search stopped
    best_hits: int = 0              # starts whose climb ended at the best maximum
    rounds: int = 1                 # rounds of starts (ladder.py)
    stop_reason: str = ""           # why no more starts were added
    budget_exhausted: bool = False  # the budget of starts ran out before the evidence
    rungs: list = field(default_factory=list)    # budgets climbed up to this one (ladder.py)
    points: np.ndarray | None = None             # best distinct end points (carried further)
    search_space: str = "full"                   # "full" or "sketch" (sketch.py)
    subspace: object = None         # K models, sketched: the Subspace the schedule prices in
    directions: list | None = None  # K models: each pair's spectral directions (d x r)


SOLVER_CORE = ("method", "starts", "iterations", "passes", "seconds", "kkt_residual",
               "search_space")


def solver_dict(method, starts, iterations, passes, local_maxima, local_values, kkt_residual,
                search_seconds, fraction_at_box_faces=None, seconds=None, success=True,
                message="", pass_seconds=None, search_space=None) -> dict:
    """The `solver` object of a design. Its core keys (SOLVER_CORE) are there on every path,
    null where they do not apply; the rest come in groups: `local_maxima` and `success` of the
    search, `evidence` (the adaptive rounds of starts: an object, or null) and
    `fraction_at_box_faces` (leverage models)."""
    return {"method": method, "starts": starts, "iterations": iterations, "passes": passes,
            "seconds": seconds, "kkt_residual": kkt_residual, "search_space": search_space,
            "pass_seconds": pass_seconds, "search_seconds": search_seconds,
            "success": success, "message": message,
            "local_maxima": local_maxima, "local_maxima_values": local_values,
            "evidence": None, "fraction_at_box_faces": fraction_at_box_faces}


def solver_from(r: SearchResult, passes=None, *, adaptive: bool | None = None,
                max_starts: int | None = None) -> dict:
    """The `solver` object for a search result; `adaptive`/`max_starts` add the evidence of the
    adaptive rounds (ladder searches) as the `evidence` group."""
    solver = solver_dict(r.method, r.starts, r.iterations, passes, r.local_maxima,
                         [-math.expm1(-v) for v in r.values[:5]], r.kkt_residual, r.seconds,
                         success=r.success, message=r.message or r.stop_reason,
                         search_space=r.search_space if r.method == "lbfgs" else None)
    if adaptive is not None:
        solver["evidence"] = {"best_hits": r.best_hits, "rounds": r.rounds,
                              "stop_reason": r.stop_reason, "budget_exhausted": r.budget_exhausted,
                              "adaptive": adaptive, "max_starts": max_starts if adaptive else None,
                              "ladder": [float(e) for e in r.rungs]}
    return solver


def maxima_values(explored, best: float) -> list:
    """The distinct local maxima's bottleneck values, best first (at most 10), the first raised
    to the polished winner's value: one value per maximum counted in `local_maxima`."""
    values = sorted((float(v) for v in explored), reverse=True)
    values[0] = max(values[0], best)
    return values[:10]
