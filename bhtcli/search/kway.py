"""The K-way searches: the query that maximises the bottleneck min_{i<j} D_ij(x) over the
ball, and the schedule (queries in proportions) that maximises min_{i<j} sum_l w_l D_ij(x_l).

Both are climbed by :class:`bhtcli.search.ascent.BatchedAscent` on the objectives of
bhtcli/models/kway.py (docs/maths.md §8):

- the bottleneck is non-smooth (a minimum of P = K(K-1)/2 smooth functions); the search
  climbs the power-mean soft minimum (sum_p D_p^-s)^(-1/s) from every start at s = 4, then
  continues the best distinct end points through s = 16, 64, ..., 16384, where the soft
  minimum is within a factor P^(-1/s) (0.9999 for P = 6) of the true minimum;
- the schedule is a linear programme over candidate queries (HiGHS); column generation adds
  the query that maximises sum_p lambda_p D_p(x) for the programme's dual weights lambda (a
  smooth weighted design problem), until no query improves the programme: by LP duality that
  maximum bounds every schedule's bottleneck from above.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bhtcli.models.kway import KModels, SoftBottleneck, WeightedSum
from bhtcli.search.ascent import BatchedAscent, distinct, gradient_tolerances, project
from bhtcli.search.kkt import HULL_MAX, hull_residual, kkt_residuals
from bhtcli.search.result import SearchResult, maxima_values
from bhtcli.search.scan import SCAN_KEEP, bottleneck_scan, scan_applies, with_scan, zoom
from bhtcli.search.starts import range_finder

SHARPNESS = (4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)
DEFAULT_KWAY_STARTS = 32
KEEP = 4                    # distinct end points continued through the sharpness ladder
SCHEDULE_ROUNDS = 12        # column-generation rounds at most
SCHEDULE_ADD = 3            # best distinct pricing maxima added per round
SCHEDULE_RTOL = 1e-6        # stop when the pricing maximum is within this of the LP value
SVD_MAX_ENTRIES = 4_000_000
ACTIVE_RTOL = 1e-4          # pairs within this of the bottleneck count as active at a kink


def pair_directions(models: KModels, r: int, seed: int) -> list:
    """Top-r right singular vectors (d x r, unit columns) of each pair's row-centred
    difference M_i - M_j, in the order of models.pairs. Small pairs: exact SVD; large ones:
    one randomised range finder of the stacked differences (search/starts.py: range_finder,
    three passes over them), then
    each pair's SVD inside that subspace."""
    n, d, K = models.n, models.d, models.K
    r = min(r, d, n)
    diff = models.S[n:]
    out = []
    if n * d <= SVD_MAX_ENTRIES:
        blocks = [np.zeros((n, d))] + [np.asarray(diff[(k - 1) * n:k * n], np.float64)
                                       for k in range(1, K)]
        for i, j in models.pairs:
            _, _, vt = np.linalg.svd(blocks[i] - blocks[j], full_matrices=False)
            out.append(vt[:r].T.copy())
        return out
    width = min(d, r * len(models.pairs) + 8)
    Q, Y = range_finder(diff, width, seed, power=1)
    models.passes += 3
    Yk = [np.zeros((n, width))] + [Y[(k - 1) * n:k * n] for k in range(1, K)]
    for i, j in models.pairs:
        Z = Yk[i] - Yk[j]
        # the right singular vectors of Z from its width x width Gram matrix (the top ones are
        # all that is used; an n x width SVD per pair cost seconds at vocabulary scale)
        vals, vecs = np.linalg.eigh(Z.T @ Z)
        out.append(Q @ vecs[:, ::-1][:, :r])
    return out


def spectral_pool(directions: list, energy: float) -> np.ndarray:
    """Every pair's spectral directions (both signs, radius E; the top one at E/2 too) and the
    normalised sums and differences of two pairs' top directions, at radius E (columns)."""
    pool = []
    for V in directions:
        for c in range(V.shape[1]):
            pool += [energy * V[:, c], -energy * V[:, c]]
        pool += [0.5 * energy * V[:, 0], -0.5 * energy * V[:, 0]]
    tops = [V[:, 0] for V in directions]
    for a in range(len(tops)):
        for b in range(a + 1, len(tops)):
            for sa, sb in ((1, 1), (1, -1)):
                u = sa * tops[a] + sb * tops[b]
                nu = np.linalg.norm(u)
                if nu > 0:
                    pool += [energy * u / nu, -energy * u / nu]
    return np.stack(pool, axis=1)


def bottleneck_starts(models: KModels, energy: float, starts: int, seed: int,
                      directions: list) -> np.ndarray:
    """`starts` columns: the best half (by the bottleneck, one pass) of a pool of every pair's
    spectral directions (both signs, radius E and E/2) and their pairwise sums, then seeded
    random points on the sphere and inside the ball."""
    d = models.d
    P = spectral_pool(directions, energy)
    score = np.concatenate([models.pair_distances(P[:, s:s + 64]).min(axis=0)
                            for s in range(0, P.shape[1], 64)])
    take = np.argsort(-score, kind="stable")[:max(1, starts // 2)]
    cols = list(P[:, take].T)
    rng = np.random.default_rng(seed)
    while len(cols) < starts:
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        inside = len(cols) % 2 == 1
        cols.append((energy * rng.uniform() ** (1.0 / d) if inside else energy) * u)
    return np.stack(cols[:starts], axis=1)


def maximize_bottleneck(models: KModels, energy: float, *, starts: int | None = None,
                        seed: int = 0, keep: int = KEEP, progress=None,
                        directions: list | None = None, carried=None) -> SearchResult:
    """The query x (||x|| <= energy) with the largest min_p D_p(x) found from `starts` starts
    (default DEFAULT_KWAY_STARTS), and from the `carried` points (d x m) too. `value` is the
    bottleneck min_p D_p at x, `values` the bottleneck at the distinct end points of the first
    climb."""
    t0 = time.perf_counter()
    starts = DEFAULT_KWAY_STARTS if starts is None else starts
    explore_gtol, polish_gtol, _ = gradient_tolerances(models)
    if directions is None:
        directions = pair_directions(models, 2, seed)
    X0 = bottleneck_starts(models, energy, starts, seed, directions)
    if carried is not None and np.size(carried):
        X0 = np.concatenate([X0, project(np.asarray(carried, dtype=np.float64), energy)], axis=1)
    if scan_applies(models.d):
        # d <= 2: the whole ball's grid among the starts, as for pairs (search/scan.py)
        X0 = with_scan(X0, bottleneck_scan(models, energy))
    if progress:
        progress(f"climbing the bottleneck of {len(models.pairs)} pairs from {X0.shape[1]} starts")
    run = BatchedAscent(SoftBottleneck(models, SHARPNESS[0]), X0, energy)
    run.tick = getattr(progress, "tick", None)
    run.run(300, gtol=explore_gtol)
    iterations = run.iterations
    ends = run.X
    true = models.pair_distances(ends).min(axis=0)
    finals = distinct(ends, true, energy, tol=1e-3)
    # the sharpening ladder continues the best distinct points by the true bottleneck among the
    # climbs' ends *and their starts*: at s = 4 the soft minimum of many pairs is a poor
    # stand-in for the minimum, and its climb can leave a start (a scan point next to the
    # maximum on a kink, where two pairs' D are equal) for a lower point (docs/maths.md §8.2)
    pool = np.concatenate([ends, X0], axis=1)
    pool_true = np.concatenate([true, models.pair_distances(X0).min(axis=0)])
    ranked = distinct(pool, pool_true, energy, tol=1e-3)
    X = pool[:, ranked[:keep]]
    if progress:
        progress(f"sharpening the best {X.shape[1]} of {len(finals)} distinct maxima")
    best_x, best_v = pool[:, ranked[0]].copy(), float(pool_true[ranked[0]])
    for s in SHARPNESS[1:]:
        run = BatchedAscent(SoftBottleneck(models, s), X, energy)
        run.run(600, gtol=polish_gtol if s == SHARPNESS[-1] else explore_gtol)
        iterations += run.iterations
        X = run.X
    v = models.pair_distances(X).min(axis=0)
    j = int(np.argmax(v))
    if v[j] >= best_v:
        best_x, best_v = X[:, j].copy(), float(v[j])
    if scan_applies(models.d):
        # d <= 2: the sharpened ends and the best starts finish on the true bottleneck by a
        # shrinking local grid, which climbs onto a kink that the smoothed ladder can miss
        # when three or more pairs nearly meet there (search/scan.py: zoom)
        bottleneck = lambda P: models.pair_distances(P).min(axis=0)
        Z, fz = zoom(bottleneck, np.concatenate([X, pool[:, ranked[:SCAN_KEEP]]], axis=1),
                     energy, models.K * models.n)
        j = int(np.argmax(fz))
        if fz[j] > best_v:
            best_x, best_v = Z[:, j].copy(), float(fz[j])
    obj = SoftBottleneck(models, SHARPNESS[-1])
    f, g = obj.value_and_grad(best_x[:, None])
    residual = float(kkt_residuals(best_x[:, None], f, g, energy)[0])
    if residual > ACTIVE_RTOL:
        # a maximum on a kink is stationary for the pairs' hull, not for the soft minimum
        kink = _kink_residual(models, best_x, energy)
        residual = residual if kink is None else min(residual, kink)
    on_boundary = bool(np.linalg.norm(best_x) >= energy * (1 - 1e-9))
    return SearchResult(x=best_x, value=best_v, starts=X0.shape[1], iterations=iterations,
                        local_maxima=len(finals), values=maxima_values(true[finals], best_v),
                        on_boundary=on_boundary,
                        kkt_residual=residual, seconds=time.perf_counter() - t0,
                        method="lbfgs", stop_reason=f"fixed number of starts ({X0.shape[1]})",
                        points=X)


def _kink_residual(models: KModels, x: np.ndarray, energy: float):
    """The KKT residual of the bottleneck at x over the hull of its active pairs' gradients
    (those within ACTIVE_RTOL of the minimum; search/kkt.py: hull_residual), or None."""
    D = models.pair_distances(x[:, None])[:, 0]
    active = np.flatnonzero(D <= D.min() * (1 + ACTIVE_RTOL))
    if active.size > HULL_MAX:
        return None
    grads = []
    for p in active:
        w = np.zeros(len(D))
        w[p] = 1.0
        grads.append(WeightedSum(models, w).value_and_grad(x[:, None])[1][:, 0])
    return hull_residual(x, np.stack(grads, axis=1), float(D.min()), energy)


# ------------------------------------------------------------------------------- schedules
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
    and the search's other maxima). With `space` (a kway_sketch.Subspace, at vocabulary
    scale) the pricing problem climbs in that subspace and is lifted to a KKT point in full d
    as the sketched bottleneck search is (kway_sketch.Subspace.lift)."""
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
    x, _, _, Y, _ = space.lift(make, pol.X, energy, polish_gtol)
    points = space.Q @ Y
    if np.min(np.linalg.norm(points - x[:, None], axis=0)) > 1e-9 * energy:
        points = np.concatenate([x[:, None], points], axis=1)     # polished in full d
    return project(points, energy)
