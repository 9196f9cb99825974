"""The K models' schedule: queries used in fixed proportions that maximise
min_{i<j} sum_l w_l D_ij(x_l) (docs/maths.md §8).

A linear programme over candidate queries (HiGHS); column generation adds the query that
maximises sum_p lambda_p D_p(x) for the programme's dual weights lambda (a smooth weighted
design problem, climbed by :class:`bhtcli.search.ascent.BatchedAscent`), until no query
improves the programme: by LP duality that maximum bounds every schedule's bottleneck from
above.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bhtcli.models.kway import KModels, WeightedSum
from bhtcli.search.ascent import BatchedAscent, distinct, gradient_tolerances, project
from bhtcli.search.bottleneck import pair_directions

SCHEDULE_ROUNDS = 12        # column-generation rounds at most
SCHEDULE_ADD = 3            # best distinct pricing maxima added per round
SCHEDULE_RTOL = 1e-6        # stop when the pricing maximum is within this of the LP value


def schedule_lp(D: np.ndarray):
    """max_w min_p sum_l w_l D[p, l] over the simplex (a linear programme, HiGHS).

    Returns (value, w, lambda): lambda >= 0 (sum 1) are the duals of the pairs' constraints,
    the weights of the pricing problem. D is scaled to max 1 for the solver and back.
    """
    from scipy.optimize import linprog
    P, m = D.shape
    scale = float(D.max()) if D.max() > 0 else 1.0
    Ds = D / scale
    c = np.zeros(m + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-Ds, np.ones((P, 1))])
    A_eq = np.concatenate([np.ones(m), [0.0]])[None, :]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(P), A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * m + [(None, None)], method="highs")
    if res.status != 0:
        from bhtcli.errors import SolverError
        raise SolverError(f"the schedule's linear programme failed: {res.message}")
    w = np.maximum(res.x[:m], 0.0)
    w /= w.sum()
    lam = np.maximum(-res.ineqlin.marginals, 0.0)
    lam = lam / lam.sum() if lam.sum() > 0 else np.full(P, 1.0 / P)
    return float(np.min(D @ w)), w, lam


@dataclass
class ScheduleSearch:
    queries: np.ndarray          # d x m, the queries with positive weight
    weights: np.ndarray          # m, summing to 1
    value: float                 # the schedule's bottleneck min_p sum_l w_l D_p(x_l)
    dual_bound: float            # max_x sum_p lambda_p D_p(x) found at the last duals
    rounds: int
    columns: int                 # candidate queries the programme saw
    passes: int
    seconds: float
    converged: bool              # the pricing found no query that improves the programme


def best_schedule(models: KModels, energy: float, columns: np.ndarray, *, seed: int = 0,
                  directions: list | None = None, progress=None,
                  rounds: int = SCHEDULE_ROUNDS, space=None) -> ScheduleSearch:
    """Column generation from the candidate queries `columns` (d x m, e.g. the single design
    and the search's other maxima). With `space` (a bottleneck.Subspace, at vocabulary
    scale) the pricing problem climbs in that subspace and is lifted to a KKT point in full d
    as the sketched bottleneck search is (bottleneck.Subspace.lift)."""
    t0 = time.perf_counter()
    passes0 = models.passes
    explore_gtol, polish_gtol, _ = gradient_tolerances(models)
    X = project(np.asarray(columns, dtype=np.float64), energy)
    D = models.pair_distances(X)
    if directions is None:
        directions = pair_directions(models, 2, seed)
    spectral = np.concatenate([energy * V[:, :1] for V in directions]
                              + [-energy * V[:, :1] for V in directions], axis=1)
    rng = np.random.default_rng(seed + 11)
    bound, converged, done = np.inf, False, 0
    for done in range(1, rounds + 1):
        value, w, lam = schedule_lp(D)
        if progress:
            progress(f"schedule: round {done}, {X.shape[1]} candidate queries, bottleneck {value:.6g}")
        U = rng.standard_normal((models.d, 4))
        U *= energy / np.linalg.norm(U, axis=0)
        X0 = np.concatenate([X[:, w > 1e-12], spectral, U], axis=1)
        if space is None:
            obj = WeightedSum(models, lam)
            run = BatchedAscent(obj, X0, energy)
            run.run(600, gtol=explore_gtol)
            top = distinct(run.X, run.f, energy, tol=1e-3)[:SCHEDULE_ADD]
            pol = BatchedAscent(obj, run.X[:, top], energy)
            pol.run(1000, gtol=polish_gtol)
            found, values, D_found = pol.X, pol.f, None
        else:
            found = _price_in_subspace(space, lam, X0, energy, explore_gtol, polish_gtol)
            D_found = models.pair_distances(found)
            values = lam @ D_found
        bound = float(values.max())
        if bound <= value * (1 + SCHEDULE_RTOL):
            converged = True
            break
        better = values > value * (1 + SCHEDULE_RTOL)
        new = found[:, better]
        X = np.concatenate([X, new], axis=1)
        D = np.concatenate([D, models.pair_distances(new) if D_found is None
                            else D_found[:, better]], axis=1)
    value, w, lam = schedule_lp(D)
    keep = w > 1e-9
    w = w[keep] / w[keep].sum()
    return ScheduleSearch(X[:, keep], w, float(np.min(D[:, keep] @ w)), bound, done, X.shape[1],
                          models.passes - passes0, time.perf_counter() - t0, converged)


def _price_in_subspace(space, lam, X0, energy: float, explore_gtol: float,
                       polish_gtol: float) -> np.ndarray:
    """The pricing problem max_x sum_p lam_p D_p(x) climbed in the sketched subspace from X0
    (projected into it), its best SCHEDULE_ADD distinct maxima polished there and the best
    lifted to a KKT point in full d; returns those points (d x m, full coordinates)."""
    make = lambda km: WeightedSum(km, lam)
    Y0 = project(space.Q.T @ X0, energy)
    run = BatchedAscent(make(space.reduced), Y0, energy)
    run.run(600, gtol=explore_gtol)
    top = distinct(run.X, run.f, energy, tol=1e-3)[:SCHEDULE_ADD]
    pol = BatchedAscent(make(space.reduced), run.X[:, top], energy)
    pol.run(1000, gtol=polish_gtol)
    lifted = space.lift(make, pol.X, energy, polish_gtol)
    x, points = lifted.x, space.Q @ lifted.Y
    if np.min(np.linalg.norm(points - x[:, None], axis=0)) > 1e-9 * energy:
        points = np.concatenate([x[:, None], points], axis=1)     # polished in full d
    return project(points, energy)
