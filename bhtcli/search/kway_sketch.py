"""The sketched K-way search: the bottleneck min_{i<j} D_ij(x), climbed in a subspace.

The pair's sketched search (sketch.py) rests on one fact: at a KKT point the maximiser is a
combination of the rows that carry the softmaxes' weight, and at vocabulary scale those are
one or two rows against the bulk (docs/maths.md §5.3, §5.2). The bottleneck's KKT point is a
convex combination of the binding pairs' gradients (docs/maths.md §8.7), so the same holds
for it, with the rows of every binding pair. The search

1. screens every pair (i, j) as the pair search does -- the single-row screen and the
   two-row swaps against the bulk, from per-row norms and dots of the K blocks (no pass) --
   and takes each pair's top spectral directions from one randomised range finder of the
   stacked differences (search/kway.py: pair_directions);
2. builds an orthonormal basis Q of all of them and computes S Q (K n x r) in one wide
   product;
3. scores every start once by the true bottleneck in the subspace, climbs the best 16 a few
   iterations of the soft minimum, the best 4 distinct ones 20 more, then continues the best
   distinct 4, 2 and 2 (by the true bottleneck) at the sharper stages (docs/maths.md §8.8);
   the climbs before the sharpest stage take the pairs' D and weights from the
   Bhattacharyya coefficients (maths/kway_coefficients.py, docs/maths.md §8.13);
4. lifts (:meth:`Subspace.lift`) the better of the last two: at the survivor the full
   gradient costs one backward pass; while the relative KKT residual is large, the
   Lagrangian gradient and the rows of largest weight under each model join Q and the
   survivor climbs again; where the basis stops helping, the best point is polished in full
   d; the ray through the winner is scanned in the subspace. In float32 the first lifted winner whose residual lies mostly
   inside the subspace climbs on there in float64 first (docs/maths.md §8.10).

The schedule's column generation (search/kway.py: best_schedule) climbs its weighted
subproblem sum_p lambda_p D_p(x) in the same subspace and lifts it the same way.
`passes` counts products with the K models (the wide products S Q, the lift's backward
products); products in the subspace read K n x r numbers and are not counted.
"""
from __future__ import annotations

import time

import numpy as np

from bhtcli.models.kway import (KModels, PairView, ReducedKModels, SoftBottleneck, block_gram,
                                large_empty)
from bhtcli.search.ascent import BatchedAscent, distinct, gradient_tolerances, project, ray_start
from bhtcli.search.kkt import kkt_residuals, lagrangian_gradient
from bhtcli.search.result import SearchResult, maxima_values
from bhtcli.search.sketch import (HALVING_KEEP, RAY_MARGIN, SKETCH_MAX_RANK, SKETCH_MIN_D, SKETCH_MIN_SIZE,
                                  orthonormal_extension, single_row_screen, successive_halving)
from bhtcli.search.starts import swap_directions

SPECTRAL = 4          # top singular directions of each pair's difference in the basis
SCREEN_ROWS = 4       # rows of each pair's single-row screen (two starts each)
SWAPS = 4             # two-row swaps of each pair
SHARPNESS = (4.0, 64.0, 1024.0, 16384.0)   # the soft minimum's sharpness ladder (search/kway.py
                                           # climbs every 4x; the subspace search every 16x)
RANDOM = 4            # seeded random starts in the subspace
HEAVY = 4             # rows of largest weight under each model added per lift round
LIFT_ROUNDS = 6
SOFT_ITERATIONS = 20         # the survivors' climb at the softest sharpness (a rough proxy: not to convergence)
SURVIVOR_ITERATIONS = 60     # each stage after
LADDER_KEEP = (4, 2, 2)      # survivors (distinct, best by the bottleneck) entering each stage after
LIFTED = 1                   # the best of the last stage's survivors that the lift takes
ROUGH = (True, True, False)  # the coefficient form for: the halving, the ladder before its
                             # sharpest stage, that stage (§8.13)
LIFT_ITERATIONS = 100        # the climb after each growth of the basis
FINISH_ITERATIONS = 300      # the float64 finish in the subspace (no pass; the sharpest soft
                             # minimum can take more than 100 there: 107 on a d = 48 case)
POLISH_ITERATIONS = 200      # the polish in full d (each iteration a pass over the K models)
LIFT_KKT = (1e-7, 1e-3)      # (float64, float32): a lifted point below this residual is done
FINISH_GTOL = 0.1            # float32: the lift's climbs stop at this times its target (relative
                             # gradient): a tenth of what the lift asks (docs/maths.md §8.10)
LIFT_POLISH = (1e-3, 1e-2)   # a stalled growth still polishes in full d above this


def use_kway_sketch(models: KModels, search_space: str | None, starts: int | None) -> bool:
    """"sketch" always, "full" never; "auto" (the default) at the pair sketch's sizes (n d >=
    SKETCH_MIN_SIZE with d >= SKETCH_MIN_D) when the number of starts is not fixed."""
    if search_space == "sketch":
        return True
    if search_space == "full" or starts is not None:
        return False
    return models.n * models.d >= SKETCH_MIN_SIZE and models.d >= SKETCH_MIN_D


class Subspace:
    """x = Q y with Q orthonormal (d x r): the K models restricted to it (S Q, one counted
    pass) and the basis growth of the lift."""

    def __init__(self, models: KModels, Q: np.ndarray):
        self.models, self.Q = models, Q
        self.reduced = ReducedKModels(self._product(Q), models.K, models.n)

    def _product(self, Q):
        return self.models.product(Q, out_dtype=self.models.dtype)

    def grow(self, new: np.ndarray) -> np.ndarray:
        """Add the part of the columns `new` outside span(Q) (up to SKETCH_MAX_RANK); returns
        the columns added (d x m, possibly m = 0)."""
        grow = orthonormal_extension(self.Q, new)[:, :max(0, SKETCH_MAX_RANK - self.Q.shape[1])]
        if grow.shape[1]:
            SQ = fresh_copy(self.reduced.S, extra=self._product(grow))
            self.Q = np.concatenate([self.Q, grow], axis=1)
            self.reduced = ReducedKModels(SQ, self.models.K, self.models.n)
        return grow

    def heavy_rows(self, y: np.ndarray) -> np.ndarray:
        """Rows of the K models (as d-vectors, columns) that carry the most weight under any
        model at x = Q y: the HEAVY largest scores of each model, every model's row there."""
        r, deltas = self.reduced.scores(y[:, None])
        K, n = self.models.K, self.models.n
        rows = np.unique(np.concatenate(
            [np.argsort(-(r + dk)[:, 0], kind="stable")[:HEAVY] for dk in deltas]))
        S = self.models.S
        return np.concatenate([np.asarray(S[k * n + rows], dtype=np.float64).T
                               for k in range(K)], axis=1)

    def _finish_in_float64(self, make, y: np.ndarray, energy: float, gtol: float):
        """From here on the subspace's products run in float64 on S Q (rounded once, by the
        passes that made it; no pass over the models): climb from y there; the end point if
        it is at least as good, else y. Its full gradient costs one backward pass. Returns
        (y, f, g, iterations)."""
        K, n = self.models.K, self.models.n
        self.reduced = ReducedKModels(fresh_copy(self.reduced.S, dtype=np.float64), K, n)
        objective = make(self.reduced)
        run = BatchedAscent(objective, y[:, None], energy)
        start = float(run.f[0])
        run.run(FINISH_ITERATIONS, gtol=gtol)
        end = run.X[:, 0] if run.f[0] >= start else y
        f, w_r, w_d = objective.evaluate(end[:, None])
        return end, float(f[0]), self.models.pullback(w_r, w_d)[:, 0], run.iterations

    def lift(self, make, Y: np.ndarray, energy: float, gtol: float, progress=None):
        """Grow the basis until the best column of Y (subspace coordinates) is a KKT point of
        the objective `make(models)` in full d, climbing again after each growth (in float32,
        the first lifted winner whose residual lies mostly inside span(Q) first climbs on there
        in float64: _finish_in_float64); polish in full d where the growth stalls above
        LIFT_POLISH. Returns (x, f, residual, Y, iterations): the best point in full
        coordinates and the survivors' coordinates."""
        models, exact = self.models, self.models.dtype == np.float64
        target = LIFT_KKT[0 if exact else 1]
        if not exact:               # float32: climbs that end at a tenth of the target suffice
            gtol = max(gtol, FINISH_GTOL * target)
        best_x, best_f, residual, last = None, -np.inf, np.inf, np.inf
        stalled, finished, spanned, iterations = False, False, False, 0
        for rounds in range(1, LIFT_ROUNDS + 2):
            points = self.Q @ Y
            f, w_r, w_d = make(self.reduced).evaluate(Y)
            g = models.pullback(w_r, w_d)          # the full gradient: one backward pass
            res = kkt_residuals(points, f, g, energy)
            b = int(np.argmax(f))
            improved = f[b] > best_f * (1 + (1e-9 if exact else 1e-6))
            if f[b] >= best_f:
                best_x, best_f, residual = points[:, b].copy(), float(f[b]), float(res[b])
                if not exact and not finished and residual > target and \
                        residual_inside(self.Q, best_x, g[:, b], best_f, energy) > target:
                    # the float32 climbs in the subspace stopped short of its KKT point:
                    # climb on there in float64 before judging the subspace (§8.10)
                    finished = True
                    Y[:, b], f[b], g[:, b], more = self._finish_in_float64(
                        make, Y[:, b], energy, gtol)
                    iterations += more
                    points[:, b] = self.Q @ Y[:, b]
                    res[b] = kkt_residuals(points[:, [b]], f[[b]], g[:, [b]], energy)[0]
                    best_x, best_f, residual = points[:, b].copy(), float(f[b]), float(res[b])
            if progress:
                progress(f"lifted: objective {f[b]:.7e}, KKT residual {res[b]:.2e}")
            if residual <= target or rounds > LIFT_ROUNDS:
                break
            if not improved and res[b] >= 0.5 * last:
                stalled = True
                break
            last = float(res[b])
            g_lagrange, _ = lagrangian_gradient(points, g, energy, sphere_rtol=1e-9)
            grow = self.grow(np.concatenate([g_lagrange[:, [b]], self.heavy_rows(Y[:, b])], axis=1))
            if grow.shape[1] == 0:
                spanned = True          # the Lagrangian gradient lies in span Q already
                break
            Y = np.concatenate([Y, grow.T @ points], axis=0)
            run = BatchedAscent(make(self.reduced), Y, energy)
            run.run(LIFT_ITERATIONS, gtol=gtol)
            iterations += run.iterations
            Y = run.X
        # after a float64 finish in a subspace that holds the Lagrangian gradient, a float32
        # polish in full d would climb the same problem less precisely (§8.10): done
        if residual > target and not (finished and spanned) and \
                (not stalled or residual > LIFT_POLISH[0 if exact else 1]):
            if progress:
                progress("polishing the best point in full d")
            objective = make(models)
            run = BatchedAscent(objective, best_x[:, None], energy)
            run.run(POLISH_ITERATIONS, gtol=gtol)
            iterations += run.iterations
            if run.f[0] >= best_f:
                fx, gx = objective.value_and_grad(run.X)
                best_x, best_f = run.X[:, 0].copy(), float(fx[0])
                residual = float(kkt_residuals(run.X, fx, gx, energy)[0])
        return best_x, best_f, residual, Y, iterations


def fresh_copy(M: np.ndarray, dtype=None, extra: np.ndarray | None = None) -> np.ndarray:
    """[M, extra] (columns side by side; `dtype`: M's unless given) in a fresh map without
    huge-page advice (models/kway.py: large_empty). S Q is 70-150 MB; late in a run, with the
    K models' 0.8 GB and their copies mapped, numpy's own allocation of such a copy took
    0.45-0.6 s against 0.08 s this way (measured at 50,000 x 1,024 float32, K = 4: the kernel
    compacts memory to find the huge pages numpy asks for)."""
    dtype = M.dtype if dtype is None else np.dtype(dtype)
    width = M.shape[1] + (0 if extra is None else extra.shape[1])
    out = large_empty((M.shape[0], width), np.result_type(dtype, *([] if extra is None else [extra])))
    out[:, :M.shape[1]] = M
    if extra is not None:
        out[:, M.shape[1]:] = extra
    return out


def residual_inside(Q: np.ndarray, x: np.ndarray, g: np.ndarray, value: float,
                    energy: float) -> float:
    """The part of the relative KKT residual (search/kkt.py) at x = Q y that lies in span(Q):
    what a climb in the subspace removes, with no pass over the models."""
    nx2 = float(x @ x)
    on = nx2 >= (energy * (1 - 1e-9)) ** 2
    mu = max(float(g @ x), 0.0) / max(nx2, 1e-300) if on else 0.0
    scale = max(float(np.linalg.norm(g)), value / energy, 1e-300)
    return float(np.linalg.norm(Q.T @ (g - mu * x))) / scale


def bottleneck(models: KModels, X: np.ndarray, ranking: bool = False) -> np.ndarray:
    """min_p D_p at every column of X, 32 columns per product (`ranking`: values to rank the
    columns by only, KModels.pair_distances)."""
    return np.concatenate([models.pair_distances(X[:, s:s + 32], ranking=ranking).min(axis=0)
                           for s in range(0, X.shape[1], 32)])


def screened_starts(models: KModels, energy: float, directions: list, seed: int):
    """(basis columns, starting points) of every pair's screens: the single-row screen's
    starts, the bulk-aware swaps, the spectral directions at +-E and +-E/2 and the sums of
    two pairs' top directions (as search/kway.py: bottleneck_starts); no pass."""
    from bhtcli.search.kway import spectral_pool
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
        SoftBottleneck(reduced, SHARPNESS[0], rough=ROUGH[0]), space.Q.T @ X0, energy,
        explore_gtol, SOFT_ITERATIONS, score=lambda Y: bottleneck(reduced, Y, ranking=True),
        judge=lambda Y: bottleneck(reduced, Y))
    iterations = run.iterations
    explored = true[finals]
    Y = run.X
    if progress:
        progress(f"sharpening the best {Y.shape[1]} in the subspace")
    left = []          # survivors left behind by the ladder (subspace coordinates)
    for s, keep in zip(SHARPNESS[1:], LADDER_KEEP):
        order = distinct(Y, bottleneck(space.reduced, Y, ranking=True), energy, tol=1e-3)
        left.append(Y[:, order[keep:]])
        rough = ROUGH[2] if s == SHARPNESS[-1] else ROUGH[1]
        run = BatchedAscent(SoftBottleneck(space.reduced, s, rough=rough), Y[:, order[:keep]],
                            energy)
        run.run(SURVIVOR_ITERATIONS, gtol=polish_gtol if s == SHARPNESS[-1] else explore_gtol)
        iterations += run.iterations
        Y = run.X
    # the sharpest stage climbs two survivors; the better of them by the true bottleneck is
    # lifted (which is better can change at that stage: docs/maths.md §8.13)
    order = distinct(Y, bottleneck(space.reduced, Y), energy, tol=1e-3)
    left.append(Y[:, order[LIFTED:]])
    make = lambda km: SoftBottleneck(km, SHARPNESS[-1])
    x, _, residual, Y, more = space.lift(make, Y[:, order[:LIFTED]], energy, polish_gtol, progress)
    iterations += more
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
        again.run(LIFT_ITERATIONS, gtol=polish_gtol)
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
