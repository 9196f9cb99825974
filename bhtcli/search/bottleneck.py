"""K models' bottleneck: the query that maximises min_{i<j} D_ij(x) over the ball
(docs/maths.md §8), climbed by :class:`bhtcli.search.ascent.BatchedAscent` on the objectives
of bhtcli/models/kway.py; `search.maximize` chooses the full or the sketched search.

The bottleneck is non-smooth (a minimum of P = K(K-1)/2 smooth functions). The full search
(maximize_bottleneck) climbs the power-mean soft minimum (sum_p D_p^-s)^(-1/s) from every
start at s = 4, then continues the best distinct end points up the sharpness ladder (sharpen:
every 4x of SHARPNESS), where at s = 16384 the soft minimum is within a factor P^(-1/s) (0.9999 for
P = 6) of the true minimum. The pairs' spectral directions (pair_directions) seed both
searches and the schedule's pricing (schedule.py).

The sketched search (sketch_bottleneck, at vocabulary scale: use_kway_sketch) rests on the
pair sketch's fact (sketch.py): at a KKT point the maximiser is a combination of the rows
that carry the softmaxes' weight, and at vocabulary scale those are one or two rows against
the bulk (docs/maths.md §5.3, §5.2). The bottleneck's KKT point is a convex combination of
the binding pairs' gradients (docs/maths.md §8.7), so the same holds for it, with the rows of
every binding pair. The search

1. screens every pair (i, j) as the pair search does -- the single-row screen and the
   two-row swaps against the bulk, from per-row norms and dots of the K blocks (no pass) --
   and takes each pair's top spectral directions from one randomised range finder of the
   stacked differences (pair_directions);
2. builds an orthonormal basis Q of all of them and computes S Q (K n x r) in one wide
   product;
3. scores every start once by the true bottleneck in the subspace, climbs the best 16 a few
   iterations of the soft minimum, the best 4 distinct ones 20 more (sketch.py:
   successive_halving), then continues (sharpen) the best distinct 4, 2 and 2 (by the true
   bottleneck) at every other stage of SHARPNESS (docs/maths.md §8.8);
   the climbs before the sharpest stage take the pairs' D and weights from the
   Bhattacharyya coefficients (maths/kway_coefficients.py, docs/maths.md §8.13);
4. lifts (sketch.py: Subspace.lift, the pair's driver and its rules) the better of
   the last two: at the survivor the full
   gradient costs one backward pass; while the relative KKT residual is large, the
   Lagrangian gradient and the rows of largest weight under each model join Q and the
   survivor climbs again; where the basis stops helping, the best point is polished in full
   d; the ray through the winner is scanned in the subspace. In float32 the first lifted
   winner whose residual lies mostly inside the subspace climbs on there in float64 first
   (docs/maths.md §8.10).

The schedule's column generation (schedule.py: best_schedule) climbs its weighted
subproblem sum_p lambda_p D_p(x) in the same subspace and lifts it the same way.
`passes` counts products with the K models (the wide products S Q, the lift's backward
products); products in the subspace read K n x r numbers and are not counted.
"""
from __future__ import annotations

import time

import numpy as np

from bhtcli.models.kway import (KModels, PairView, ReducedKModels, SoftBottleneck, WeightedSum,
                                block_gram)
from bhtcli.search.ascent import (BatchedAscent, distinct, gradient_tolerances, project,
                                  ray_start)
from bhtcli.search.kkt import HULL_MAX, hull_residual, kkt_residuals
from bhtcli.search.result import SearchResult, maxima_values
from bhtcli.search.scan import SCAN_KEEP, bottleneck_scan, scan_applies, with_scan, zoom
from bhtcli.search.sketch import (HALVING_KEEP, RAY_MARGIN, at_sketch_size,
                                  orthonormal_extension, single_row_screen,
                                  successive_halving)
from bhtcli.search.sketch import Subspace as PairSubspace
from bhtcli.search.starts import random_fill, range_finder, swap_directions

SHARPNESS = (4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)   # the soft minimum's ladder
DEFAULT_KWAY_STARTS = 32
KEEP = 4                    # distinct end points continued through the sharpness ladder
SVD_MAX_ENTRIES = 4_000_000
ACTIVE_RTOL = 1e-4          # pairs within this of the bottleneck count as active at a kink

# the sketched search (use_kway_sketch)
SKETCH_SPECTRAL = 4   # top singular directions of each pair's difference in the basis
SCREEN_ROWS = 4       # rows of each pair's single-row screen (two starts each)
SWAPS = 4             # two-row swaps of each pair
RANDOM = 4            # seeded random starts in the subspace
HEAVY = 4             # rows of largest weight under each model added per lift round
SOFT_ITERATIONS = 20         # the survivors' climb at the softest sharpness (a rough proxy: not to convergence)
SURVIVOR_ITERATIONS = 60     # each stage after
LADDER_KEEP = (4, 2, 2)      # survivors (distinct, best by the bottleneck) entering each stage after
LIFTED = 1                   # the best of the last stage's survivors that the lift takes
RAY_ITERATIONS = 100         # the climb from the ray through the winner


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
    P = spectral_pool(directions, energy)
    score = np.concatenate([models.pair_distances(P[:, s:s + 64]).min(axis=0)
                            for s in range(0, P.shape[1], 64)])
    take = np.argsort(-score, kind="stable")[:max(1, starts // 2)]
    return random_fill(list(P[:, take].T), starts, models.d, energy, seed)


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
    X, climbed, _, v = sharpen(models, X, energy, (explore_gtol, polish_gtol))
    iterations += climbed
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


def sharpen(models, X: np.ndarray, energy: float, gtols: tuple, *, stride: int = 1,
            climb: int = 600, keep: tuple | None = None, rough: bool = False):
    """Both searches' sharpness continuation (docs/maths.md §8.2, §8.8): X climbs the soft minimum
    at every `stride`-th stage of SHARPNESS after the first, `climb` iterations each to gtols =
    (explore, polish) (the sharpest: polish); only the best keep[k] distinct columns by the
    bottleneck enter stage k; `rough`: the coefficient form before the sharpest (§8.13).
    Returns (X, iterations, the columns left behind, the bottleneck at X)."""
    iterations, left = 0, []
    for k, s in enumerate(SHARPNESS[stride::stride]):
        if keep:
            order = distinct(X, bottleneck(models, X, ranking=True), energy, tol=1e-3)
            left.append(X[:, order[keep[k]:]])
            X = X[:, order[:keep[k]]]
        run = BatchedAscent(SoftBottleneck(models, s, rough=rough and s < SHARPNESS[-1]), X, energy)
        run.run(climb, gtol=gtols[s == SHARPNESS[-1]])
        iterations += run.iterations
        X = run.X
    return X, iterations, left, bottleneck(models, X)


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


# ------------------------------------------------------------------ the sketched search
def use_kway_sketch(models: KModels, search_space: str | None, starts: int | None) -> bool:
    """"sketch" always, "full" never; "auto" (the default) at the pair sketch's sizes (n d >=
    SKETCH_MIN_SIZE with d >= SKETCH_MIN_D) when the number of starts is not fixed, for plain
    softmax models: the screens and the subspace's products model plain softmax pairs, so
    models with read-outs (links, biases) are searched in full d, and "sketch" is refused for
    them (ValueError; bhtcli.api names the options before any model is read)."""
    if search_space == "sketch":
        if models.readouts is not None:
            raise ValueError("the sketched K-way search models plain softmax models; models "
                             "with read-outs are searched by 'full' (or 'auto')")
        return True
    if search_space == "full" or starts is not None or models.readouts is not None:
        return False
    return at_sketch_size(models)


class Subspace(PairSubspace):
    """x = Q y with Q orthonormal (d x r): the K models restricted to it (S Q, one counted
    pass), grown and lifted by the pair's driver (sketch.py: Subspace), finishing in float64."""

    finish = True
    float32_kkt = 1e-3          # the finish's climbs stop at a tenth of it (FINISH_GTOL)
    value_name = "objective"
    growth_notes = False

    def __init__(self, models: KModels, Q: np.ndarray):
        self.models = models
        super().__init__(models, Q)

    def _product(self, Q):
        return self.models.product(Q, out_dtype=self.models.dtype)

    def _restrict(self, stacked):
        return ReducedKModels(stacked, self.models.K, self.models.n)

    @staticmethod
    def _stacked(reduced):
        return reduced.S

    def heavy_columns(self, y: np.ndarray) -> np.ndarray:
        """Rows of the K models (as d-vectors, columns) that carry the most weight under any
        model at x = Q y: the HEAVY largest scores of each model, every model's row there."""
        r, deltas = self.reduced.scores(y[:, None])
        K, n = self.models.K, self.models.n
        rows = np.unique(np.concatenate(
            [np.argsort(-(r + dk)[:, 0], kind="stable")[:HEAVY] for dk in deltas]))
        S = self.models.S
        return np.concatenate([np.asarray(S[k * n + rows], dtype=np.float64).T
                               for k in range(K)], axis=1)


def bottleneck(models: KModels, X: np.ndarray, ranking: bool = False) -> np.ndarray:
    """min_p D_p at every column of X, 32 columns per product (`ranking`: values to rank the
    columns by only, KModels.pair_distances)."""
    return np.concatenate([models.pair_distances(X[:, s:s + 32], ranking=ranking).min(axis=0)
                           for s in range(0, X.shape[1], 32)])


def screened_starts(models: KModels, energy: float, directions: list, seed: int):
    """(basis columns, starting points) of every pair's screens: the single-row screen's
    starts, the bulk-aware swaps, the spectral directions at +-E and +-E/2 and the sums of
    two pairs' top directions (as bottleneck_starts); no pass."""
    gram = block_gram(models)
    cols, basis = [], []
    for i, j in models.pairs:
        view = PairView(models, i, j, gram)
        _, S = single_row_screen(view, energy, SCREEN_ROWS)
        W = swap_directions(view, energy, SWAPS, bulk=True, exact=False)
        # the screen's preferred sign of each row starts; both signs span the basis
        cols += [S[:, :SCREEN_ROWS], energy * W]
        basis.append(S[:, SCREEN_ROWS:])
    pool = spectral_pool([V[:, :2] for V in directions], energy)   # all SPECTRAL span the basis
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((models.d, RANDOM))
    R *= energy / np.linalg.norm(R, axis=0)
    basis = np.concatenate(cols + basis + [V for V in directions], axis=1)
    return basis, np.concatenate(cols + [pool, R], axis=1)


def sketch_bottleneck(models: KModels, energy: float, *, seed: int = 0, directions: list,
                      carried=None, progress=None):
    """The bottleneck's search in a sketched subspace (module docstring). Returns
    (SearchResult, Subspace); the result's `points` are the best distinct end points."""
    t0 = time.perf_counter()
    explore_gtol, polish_gtol, _ = gradient_tolerances(models)
    basis, X0 = screened_starts(models, energy, directions, seed)
    if carried is not None and np.size(carried):
        carried = project(np.asarray(carried, dtype=np.float64), energy)
        basis, X0 = np.concatenate([basis, carried], axis=1), np.concatenate([carried, X0], axis=1)
    space = Subspace(models, orthonormal_extension(np.zeros((models.d, 0)), basis))
    if progress:
        progress(f"sketched subspace of rank {space.Q.shape[1]} from the screens of "
                 f"{len(models.pairs)} pairs; {X0.shape[1]} starts")
    reduced = space.reduced
    run, true, finals = successive_halving(
        SoftBottleneck(reduced, SHARPNESS[0], rough=True), space.Q.T @ X0, energy,
        explore_gtol, SOFT_ITERATIONS, score=lambda Y: bottleneck(reduced, Y, ranking=True),
        judge=lambda Y: bottleneck(reduced, Y))
    explored = true[finals]
    if progress:
        progress(f"sharpening the best {run.X.shape[1]} in the subspace")
    # the sharpest stage climbs two survivors; the better of them by the true bottleneck is
    # lifted (which is better can change at that stage: docs/maths.md §8.13)
    Y, climbed, left, v = sharpen(reduced, run.X, energy, (explore_gtol, polish_gtol), stride=2,
                                  climb=SURVIVOR_ITERATIONS, keep=LADDER_KEEP, rough=True)
    iterations = run.iterations + climbed
    order = distinct(Y, v, energy, tol=1e-3)
    left.append(Y[:, order[LIFTED:]])
    make = lambda km: SoftBottleneck(km, SHARPNESS[-1])
    lifted = space.lift(make, Y[:, order[:LIFTED]], energy, polish_gtol, progress)
    x, residual, Y = lifted.x, lifted.residual, lifted.Y
    iterations += lifted.iterations
    rank = space.Q.shape[1]          # the lift grows the basis: Q_old y = Q [y; 0]
    Y = np.concatenate([Y] + [np.pad(L, ((0, rank - L.shape[0]), (0, 0))) for L in left], axis=1)
    best = float(bottleneck(models, x[:, None])[0])
    # interior maxima: scan the ray through the winner in the subspace (x = Q y exactly)
    y = space.Q.T @ x
    inside = np.linalg.norm(space.Q @ y - x) <= 1e-9 * max(np.linalg.norm(x), 1e-300)
    margin = best * (1 + RAY_MARGIN[0 if models.dtype == np.float64 else 1])
    start = ray_start(lambda R: bottleneck(space.reduced, R, ranking=True), y, energy, margin) \
        if inside else None
    if start is not None and bottleneck(space.reduced, start)[0] > margin:   # the exact value confirms
        again = BatchedAscent(make(space.reduced), start, energy)
        again.run(RAY_ITERATIONS, gtol=polish_gtol)
        iterations += again.iterations
        xr = space.Q @ again.X
        vr = float(bottleneck(models, xr)[0])
        if vr > best:
            f, g = make(models).value_and_grad(xr)
            x, best, residual = xr[:, 0].copy(), vr, float(kkt_residuals(xr, f, g, energy)[0])
    points = space.Q @ Y
    keep = distinct(points, bottleneck(space.reduced, Y, ranking=True), energy, tol=1e-3)[:HALVING_KEEP]
    result = SearchResult(
        x=x, value=best, starts=X0.shape[1], iterations=iterations, local_maxima=len(finals),
        values=maxima_values(explored, best), on_boundary=bool(np.linalg.norm(x) >= energy * (1 - 1e-9)),
        kkt_residual=residual, seconds=time.perf_counter() - t0, method="lbfgs",
        stop_reason=f"successive halving of {X0.shape[1]} screened starts in a subspace of "
                    f"rank {space.Q.shape[1]}",
        points=project(points[:, keep], energy), search_space="sketch")
    return result, space
