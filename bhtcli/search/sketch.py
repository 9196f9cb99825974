"""The sketched-subspace search: screened starts halved in an n x r problem, lifted to full d.

At a KKT point of D on the ball, x* = (C^T w_c + G^T w_g) / mu: the maximiser lies in the
span of the rows (c_i, g_i) that carry weight there (docs/maths.md §5.3). The search

1. screens every row for a single-row maximum against the bulk of the others (closed form,
   no product; docs/maths.md §5.2) and pre-scores two-row swaps with the bulk counted;
2. builds an orthonormal basis Q (d x r, r ~ 70-100) of the screened rows' (c_i, g_i), the
   swap directions, a few spectral directions of A - B and the rows of largest ||c_i||,
   ||g_i||; one wide product gives K Q (2n x r);
3. evaluates all ~90 starts once in the subspace, climbs the best 16 a few iterations, the
   best 4 to the exploration tolerance (successive halving);
4. lifts the survivors: values and gradient weights from K Q (x = Q y), the full gradient from
   one backward pass; while the full KKT residual is large and (float32) a growth round could
   still raise D by more than float32 resolves (growth_gain), adds the Lagrangian gradients and
   the heaviest rows to Q and climbs again (docs/maths.md §5.3); polishes in full d only where
   the basis cannot grow; scans the ray through the winner in the subspace. The lift is
   Subspace.lift, the one driver, under one set of rules, that the K models' sketch
   (bottleneck.py) runs too.

`solver.passes` counts full passes over A and B (the wide products K Q and the backward
products of the lift among them); the products in the subspace read n x r numbers, not A and
B, and are not counted. At 50,000 x 1,024 float32 the whole search is 5 passes.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from bhtcli.maths.divergences import softplus
from bhtcli.maths.subspaces import orthonormal_span, orthonormalise
from bhtcli.models.kway import large_empty
from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.ascent import BatchedAscent, distinct, enough, project, ray_start
from bhtcli.search.kkt import kkt_residuals, lagrangian_gradient
from bhtcli.search.result import SearchResult
from bhtcli.search.starts import norm_order, row_norms, spectral_directions, swap_directions

from bhtcli.settings import DEFAULT_SEARCH_SPACE, SEARCH_SPACES  # noqa: F401 (re-exported)
SKETCH_MIN_SIZE = 5_000_000   # n * d from which search_space="auto" uses the sketch ...
SKETCH_MIN_D = 256            # ... when d is also at least this (below, the basis is most of R^d)
SKETCH_SPECTRAL = 8           # spectral directions of A - B in the first basis
SKETCH_ROWS = 4               # rows of largest ||c_i|| and of largest ||g_i|| in it
SKETCH_SWAPS = 16             # best two-row-swap directions by the bulk-aware pre-score
SKETCH_CANDIDATES = 24        # rows of the single-row screen (two starts each)
SWAP_ANCHORS = 32             # the single-row screen's best rows, paired with every partner too
SKETCH_RANDOM = 4             # random starts in the subspace
SCREEN_ANGLES = 24            # angles per row in the single-row screen
HALVING_FIRST = 16            # starts climbed after one evaluation of all of them, in a
                              # subspace (pairs and K models; 24 for pairs before, §8.13 for K)
FULL_D_HALVING_FIRST = 24     # ... and in full d, where a pass is one product whatever its
                              # width: 16 cost 12% more passes on a --mid pair (benchmarks)
HALVING_STEPS = 8             # their iterations before the best HALVING_KEEP continue
HALVING_KEEP = 4
SKETCH_HEAVY = 4              # rows of largest weight at the best lifted point added per round
SKETCH_ROUNDS = 6             # rounds of basis growth at most
SKETCH_KKT = (1e-7, 1e-4)     # (float64, float32): a lifted point with a smaller relative KKT residual ends the growth
                              # (float32: a pair's; the K models', which finish in float64, 1e-3)
SKETCH_RESOLUTION = (0.0, 1e-6)  # (float64, float32): ... and so does one where a growth round could
                              # raise D by no more than this, relative (growth_gain): float32
                              # values resolve ~1e-6 (the rise the rounds count as an
                              # improvement); float64 keeps its residual target alone. A pair's
                              # stop; the K models finish in float64 instead (Subspace.finish)
SKETCH_POLISH = (1e-3, 1e-2)  # (float64, float32): a stalled growth still polishes in full d above
LIFT_CLIMB = 100              # iterations of the lift's climb in the subspace after each growth
LIFT_POLISH = 200             # iterations of its polish in full d (each one a pass)
SKETCH_MAX_RANK = 512
RAY_MARGIN = (1e-9, 1e-5)     # (float64, float32): a point on the ray through the winner climbs
                              # again when it beats the winner by this, relative


def use_sketch(pair: SoftmaxPair, search_space: str | None, starts: int | None = None) -> bool:
    """The size rule: "sketch" always, "full" never; "auto" (the default) when n * d >=
    SKETCH_MIN_SIZE and d >= SKETCH_MIN_D, for exp links and the Bhattacharyya objective, and
    only when the number of starts is not fixed (`starts` = N asks for the full multistart
    search with exactly N starts). Measured in docs/search.md §5: at 50,000 x 1,024 the
    sketch takes 8 passes where the full search takes ~575, and finds a better maximum."""
    if search_space is None:
        search_space = DEFAULT_SEARCH_SPACE
    if search_space == "sketch":
        return True
    if search_space == "full":
        return False
    return (starts is None and pair.readout.exp_links and pair.objective == "bhattacharyya"
            and at_sketch_size(pair))


def at_sketch_size(problem) -> bool:
    """Whether `problem` (a pair or K models) is large enough for the sketch under "auto":
    n d >= SKETCH_MIN_SIZE with d >= SKETCH_MIN_D (the size rule of pairs and K models)."""
    return problem.n * problem.d >= SKETCH_MIN_SIZE and problem.d >= SKETCH_MIN_D


def _orth(Q: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning the part of `new` orthogonal to Q (Q orthonormal).

    Columns that lie in span(Q) to 1e-6 of their norm are dropped, so the result stays
    orthogonal to Q to rounding: x = [Q, result] y then has ||x|| = ||y||, which keeps every
    point of the subspace search inside the ball."""
    new = np.asarray(new, dtype=np.float64)
    if new.shape[1] == 0:
        return new
    before = np.linalg.norm(new, axis=0)
    for _ in range(2):
        if Q.shape[1]:
            new = new - Q @ (Q.T @ new)
    after = np.linalg.norm(new, axis=0)
    new = new[:, after > 1e-6 * np.maximum(before, 1e-300)]
    if new.shape[1] == 0:
        return new
    U = orthonormal_span(new / np.linalg.norm(new, axis=0), rtol=1e-6)
    if Q.shape[1] and U.shape[1]:
        U = orthonormalise(U - Q @ (Q.T @ U))
    return U


orthonormal_extension = _orth     # public: the K-way sketch (bottleneck.py) grows its basis so


def _heavy_rows(pair: SoftmaxPair, X: np.ndarray, count: int) -> np.ndarray:
    """Rows of largest softmax weight under A or B at the columns of X (one full pass)."""
    c, delta = pair.logits(X)
    rows = []
    for half in (0.5, -0.5):
        z = c + half * delta
        rows.append(np.argsort(-z, axis=0, kind="stable")[:count].ravel())
    return np.unique(np.concatenate(rows))


def single_row_screen(pair: SoftmaxPair, energy: float, count: int,
                      angles: int = SCREEN_ANGLES, ranked: int = 0):
    """Rows whose single-row maximum looks largest, and a starting point for each.

    A common kind of maximum puts a large share of the softmax mass on one row i and spends
    the rest of the budget on separating that row: x = E (cos t c_i/|c_i| + sin t u_i) with
    u_i the unit part of g_i orthogonal to c_i (docs/maths.md §5.2). With the other n - 1
    rows modelled as a bulk at logit 0 (the scores are centred), D at such x depends only on
    |c_i|, g_i.c_i and |g_i| -- numbers one read of K gives for every row -- so all rows are
    ranked at `angles` angles in O(n * angles) with no product. Returns (rows, X): the best
    `count` rows and, for each, the query at its best angle with either sign of u_i
    (2 * count columns; the sign that the model prefers first). With `ranked` > count, the
    rows returned are the best `ranked` (the points still for the best `count` only).
    """
    cn, gn = row_norms(pair)
    cg = _row_dots(pair)
    n = pair.n
    if n < 2 or count <= 0:
        return np.zeros(0, dtype=int), np.zeros((pair.d, 0))
    bm = bd = 0.0
    if pair.readout.bias_a is not None or pair.readout.bias_b is not None:
        mid, diff = pair.readout.bias_offsets(n)
        bm, bd = (mid - mid.mean())[:, None], (diff - diff.mean())[:, None]
    nc = np.sqrt(cn)
    with np.errstate(divide="ignore", invalid="ignore"):
        gpar = np.where(nc > 0, cg / nc, 0.0)
    gperp = np.sqrt(np.maximum(gn - gpar ** 2, 0.0))
    t = (np.arange(angles) + 0.5) / angles * (0.5 * math.pi)
    a, b = energy * np.cos(t), energy * np.sin(t)
    w = nc[:, None] * a + bm - math.log(n - 1)             # row i's logit against the bulk's
    best, best_t, best_s = np.full(n, -np.inf), np.zeros(n), np.ones(n)
    midpoint = softplus(w)                  # the same for both signs: computed once
    for sign in (1.0, -1.0):
        delta = gpar[:, None] * a + sign * gperp[:, None] * b + bd
        D = row_against_bulk(w, delta, midpoint)
        j = np.argmax(D, axis=1)
        v = D[np.arange(n), j]
        better = v > best
        best[better], best_t[better], best_s[better] = v[better], t[j[better]], sign
    ranking = np.argsort(-best, kind="stable")[:max(count, ranked)]
    rows = ranking[:count]
    f64 = np.float64
    C, G = np.asarray(pair.C[rows], f64), np.asarray(pair.G[rows], f64)
    ch = C / np.maximum(nc[rows], 1e-300)[:, None]
    u = G - np.sum(G * ch, axis=1)[:, None] * ch
    u /= np.maximum(np.linalg.norm(u, axis=1), 1e-300)[:, None]
    cos, sin = np.cos(best_t[rows])[:, None], np.sin(best_t[rows])[:, None]
    first = energy * (cos * ch + best_s[rows][:, None] * sin * u)
    second = energy * (cos * ch - best_s[rows][:, None] * sin * u)
    return ranking, np.concatenate([first.T, second.T], axis=1)


def row_against_bulk(w, delta, midpoint=None):
    """D between two laws on {row i, bulk}: row i with log-weight w + delta/2 (A) or
    w - delta/2 (B) against a bulk of log-weight 0 under both, w = z_i - log(n - 1)
    (docs/maths.md §5.2). `midpoint`: log(1 + e^w) if already computed (the same bits)."""
    midpoint = softplus(w) if midpoint is None else midpoint
    half = 0.5 * delta
    total = softplus(w + half)
    total += softplus(w - half)
    total *= 0.5
    total -= midpoint
    return total


def _row_dots(pair: SoftmaxPair) -> np.ndarray:
    """c_i . g_i for every row (one read of K, cached)."""
    return pair.cache.get_or_build("row_dots", lambda: np.einsum("ij,ij->i", pair.C, pair.G, dtype=np.float64))


def growth_gain(Q: np.ndarray, x: np.ndarray, g: np.ndarray, value: float, energy: float) -> float:
    """The rise of D, relative to `value`, that a growth round could bring at x = Q y on the
    sphere: ||g_out||^2 / (2 mu D) with g_out the part of the gradient g outside span(Q) and
    mu = g.x / ||x||^2 (docs/maths.md §5.3: moving along g_out, the sphere's curvature mu bends
    D down and D's own curvature there is ~0, the subspace holding the heavy rows). Inside the
    ball, or where the gradient does not point outward, infinite (no estimate)."""
    nx2 = float(x @ x)
    mu = float(g @ x) / max(nx2, 1e-300)
    if nx2 < (energy * (1 - 1e-9)) ** 2 or not mu > 0 or not value > 0:
        return math.inf
    out = g - Q @ (Q.T @ g)
    return float(out @ out) / (2.0 * mu * value)


def full_pass_tick(progress, pair, before: int = 0):
    """The progress display's tick for climbs in a subspace: their iterations after `before`,
    the best D so far and the passes over the full pair (None without a display)."""
    tick = getattr(progress, "tick", None)
    if tick is None:
        return None
    return lambda iterations, value, _passes: tick(before + iterations, value, pair.passes)


def successive_halving(objective, Y0: np.ndarray, energy: float, gtol: float,
                       climb: int = 500, tick=None, score=None, judge=None,
                       first: int = HALVING_FIRST):
    """Score every column of Y0 (projected into the ball) once and climb the best `first`
    distinct ones HALVING_STEPS iterations, keep the best HALVING_KEEP distinct
    end points and climb them `climb` more (500: to the end). `score` ranks the starts
    (default: the objective's values), `judge` the end points (default: the climb's own
    values; the bottleneck's soft minimum is judged by the true minimum). Returns (run, the
    end points' values by `judge`, their distinct indices best first)."""
    Y0 = project(Y0, energy)
    score = objective.value if score is None else score
    # 32 columns at a time: one n x 100 block of float64 temporaries costs more in fresh pages
    # (~0.4 s at n = 50,000) than the whole evaluation in blocks that the allocator reuses
    f0 = np.concatenate([score(Y0[:, s:s + 32]) for s in range(0, Y0.shape[1], 32)])
    run = BatchedAscent(objective, Y0[:, distinct(Y0, f0, energy, tol=1e-3)[:first]], energy)
    run.tick = tick
    run.run(HALVING_STEPS, gtol=gtol)
    ends = run.f.copy() if judge is None else judge(run.X)
    finals = distinct(run.X, ends, energy, tol=1e-3)
    run.keep(finals[:HALVING_KEEP])
    run.run(climb, gtol=gtol)
    return run, ends, finals


FINISH_GTOL = 0.1           # float32 with `finish`: the lift's climbs stop at this times its
                            # target (relative gradient): a tenth of what it asks (§8.10)
FINISH_ITERATIONS = 300     # the float64 finish in the subspace (no pass; the sharpest soft
                            # minimum can take more than 100 there: 107 on a d = 48 case)


@dataclass
class Lifted:
    """What Subspace.lift found."""

    x: np.ndarray           # the best point, full coordinates
    value: float
    residual: float         # its relative KKT residual in full d
    Y: np.ndarray           # the survivors' subspace coordinates (after the last growth)
    f: np.ndarray           # their values at the last evaluation
    iterations: int
    polished: bool          # the best point came from the polish in full d (outside span Q)


class Subspace:
    """x = Q y with Q orthonormal (d x r): a problem restricted to it (its stacked matrix
    times Q, one counted pass), the basis growth and the lift: one driver for a pair (this
    class) and for K models (bottleneck.py: Subspace, this class with their products). A
    family gives its products (`_product`), its reduced problem (`_restrict`, `_stacked`) and
    its heaviest rows (`heavy_columns`); the lift's rules are one set for both (the float64
    target, SKETCH_POLISH, LIFT_CLIMB, LIFT_POLISH, every survivor's gradient), but for how a
    float32 lift ends (`finish`, `float32_kkt`)."""

    finish = False              # float32: False, the growth stops where the rise left outside
                                # span(Q) is below float32's resolution (SKETCH_RESOLUTION) or
                                # the residual below float32_kkt; True, the first winner whose
                                # residual lies mostly inside span(Q) climbs on there in float64
                                # (docs/maths.md §8.10). Each family loses with the other's
                                # ending (docs/benchmarks.md, "One set of lift rules")
    float32_kkt = SKETCH_KKT[1]
    value_name = "D"            # in the progress lines
    growth_notes = True         # a progress line after each growth

    def __init__(self, problem, Q: np.ndarray):
        self.problem, self.Q = problem, Q
        self.reduced = self._restrict(self._product(Q))

    def _product(self, Q):
        return self.problem.forward(Q, out_dtype=self.problem.dtype)

    def _restrict(self, stacked):
        pair = self.problem
        return SoftmaxPair.from_stacked(stacked, pair.n, pair.readout, pair.objective)

    @staticmethod
    def _stacked(reduced):
        return reduced.K

    def heavy_columns(self, y: np.ndarray) -> np.ndarray:
        """Rows of largest softmax weight under A or B at x = Q y (SKETCH_HEAVY of each), as
        d-vectors: their c_i, then their g_i."""
        heavy = _heavy_rows(self.reduced, y[:, None], SKETCH_HEAVY)
        pair = self.problem
        return np.concatenate([np.asarray(pair.C[heavy], np.float64).T,
                               np.asarray(pair.G[heavy], np.float64).T], axis=1)

    def grow(self, new: np.ndarray) -> np.ndarray:
        """Add the part of the columns `new` outside span(Q) (up to SKETCH_MAX_RANK); returns
        the columns added (d x m, possibly m = 0)."""
        grow = _orth(self.Q, new)[:, :max(0, SKETCH_MAX_RANK - self.Q.shape[1])]
        if grow.shape[1]:
            stacked = fresh_copy(self._stacked(self.reduced), extra=self._product(grow))
            self.Q = np.concatenate([self.Q, grow], axis=1)
            self.reduced = self._restrict(stacked)
        return grow

    def _finish_in_float64(self, make, y: np.ndarray, energy: float, gtol: float):
        """From here on the subspace's products run in float64 on the stacked matrix times Q
        (rounded once, by the passes that made it; no pass over the models): climb from y
        there; the end point if it is at least as good, else y. Its full gradient costs one
        backward pass. Returns (y, f, g, iterations)."""
        self.reduced = self._restrict(fresh_copy(self._stacked(self.reduced), dtype=np.float64))
        objective = make(self.reduced)
        run = BatchedAscent(objective, y[:, None], energy)
        start = float(run.f[0])
        run.run(FINISH_ITERATIONS, gtol=gtol)
        end = run.X[:, 0] if run.f[0] >= start else y
        f, *w = objective.evaluate(end[:, None])
        return end, float(f[0]), self.problem.pullback(*w)[:, 0], run.iterations

    def lift(self, make, Y: np.ndarray, energy: float, gtol: float, progress=None,
             say=None, tick=None):
        """Grow the basis until the best column of Y (subspace coordinates) is a KKT point of
        the objective `make(problem)` in full d, climbing again after each growth; polish in
        full d where the growth stalls above SKETCH_POLISH. `say(rounds, text)` words the
        progress lines, `tick(iterations)` gives the climbs' progress tick. Returns a Lifted."""
        problem = self.problem
        exact = problem.dtype == np.float64
        say = say or (lambda rounds, text: text)
        tick = tick or (lambda iterations: None)
        target = SKETCH_KKT[0] if exact else self.float32_kkt
        if self.finish and not exact:   # float32: climbs that end at a tenth of the target suffice
            gtol = max(gtol, FINISH_GTOL * target)
        best_x, best_f, residual, last = None, -np.inf, np.inf, np.inf
        stalled, finished, spanned, polished, iterations = False, False, False, False, 0
        gain = np.inf                  # the rise a growth round could still bring, relative
        for rounds in range(1, SKETCH_ROUNDS + 2):
            points = self.Q @ Y
            f, *w = make(self.reduced).evaluate(Y)
            g = problem.pullback(*w)                # the full gradient: one backward pass
            res = kkt_residuals(points, f, g, energy)
            b = int(np.argmax(f))
            improved = f[b] > best_f * (1 + (1e-9 if exact else 1e-6))
            if f[b] >= best_f:
                best_x, best_f, residual = points[:, b].copy(), float(f[b]), float(res[b])
                if not self.finish:
                    gain = growth_gain(self.Q, best_x, g[:, b], best_f, energy)
                if self.finish and not exact and not finished and residual > target and \
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
                progress(say(rounds, f"lifted: {self.value_name} {f[b]:.7e}, "
                                     f"KKT residual {res[b]:.2e}"))
            if residual <= target or rounds > SKETCH_ROUNDS or enough(best_f):
                break
            if gain <= SKETCH_RESOLUTION[0 if exact else 1]:
                # what is left outside the subspace is worth less than float32 resolves; the
                # rest of the residual is the subspace's, where the climb ended as a stalled
                # round does
                stalled = True
                break
            if not improved and res[b] >= 0.5 * last:
                stalled = True      # float32: the residual left is below what the products resolve
                break
            last = float(res[b])
            g_lagrange, _ = lagrangian_gradient(points, g, energy, sphere_rtol=1e-9)
            grow = self.grow(np.concatenate([g_lagrange, self.heavy_columns(Y[:, b])], axis=1))
            if grow.shape[1] == 0:
                spanned = True          # the Lagrangian gradient lies in span Q already
                break
            Y = np.concatenate([Y, grow.T @ points], axis=0)   # the same points, new coordinates
            if progress and self.growth_notes:
                progress(say(rounds, f"sketched subspace of rank {self.Q.shape[1]} (growth {rounds})"))
            run = BatchedAscent(make(self.reduced), Y, energy)
            run.tick = tick(iterations)
            run.run(LIFT_CLIMB, gtol=gtol)
            iterations += run.iterations
            Y = run.X
        # after a float64 finish in a subspace that holds the Lagrangian gradient, a float32
        # polish in full d would climb the same problem less precisely (§8.10): done
        if residual > target and not (finished and spanned) and \
                (not stalled or residual > SKETCH_POLISH[0 if exact else 1]) and not enough(best_f):
            if progress:
                progress(say(None, "polishing the best point in full d"))
            objective = make(problem)
            run = BatchedAscent(objective, best_x[:, None], energy)
            run.tick = tick(iterations)
            run.run(LIFT_POLISH, gtol=gtol)
            iterations += run.iterations
            if run.f[0] >= best_f:
                fx, gx = objective.value_and_grad(run.X)
                best_x, best_f = run.X[:, 0].copy(), float(fx[0])
                residual = float(kkt_residuals(run.X, fx, gx, energy)[0])
                polished = True
        return Lifted(best_x, best_f, residual, Y, f, iterations, polished)


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


def sketch_search(pair: SoftmaxPair, energy: float, *, starts=None, seed: int = 0,
                  max_starts: int = 128, keep: int = 4, progress=None, tolerances,
                  carried=None) -> SearchResult:
    """One budget's search through the sketched subspace (module docstring).

    `starts`, `max_starts` and `keep` are accepted for the signature of the full search and
    not used: the screens choose the starts (a fixed number of starts selects the full search,
    see use_sketch)."""
    t0 = time.perf_counter()
    explore_gtol, polish_gtol, ray_gtol = tolerances
    f64 = np.float64
    d = pair.d
    by_c, by_g = norm_order(pair)
    top = np.unique(np.concatenate([by_c[:SKETCH_ROWS], by_g[:SKETCH_ROWS]]))
    V = spectral_directions(pair, SKETCH_SPECTRAL, seed, power=1)
    rows, S = single_row_screen(pair, energy, SKETCH_CANDIDATES, ranked=SWAP_ANCHORS)
    W = swap_directions(pair, energy, SKETCH_SWAPS, bulk=True, exact=False,
                        anchors=rows[:SWAP_ANCHORS])
    # phases, for the progress line: screens, subspace, climb, at most SKETCH_ROUNDS + 1 lifts,
    # the polish; the search may end earlier (then the count jumps to the end)
    phases = 4 + SKETCH_ROUNDS + 1
    if progress:
        progress(f"[phase 1 of at most {phases}] screened every row and {W.shape[1]} two-row "
                 "swaps against the bulk")
    extra = np.zeros((d, 0)) if carried is None or not np.size(carried) else \
        project(np.asarray(carried, dtype=f64), energy)
    space = Subspace(pair, _orth(np.zeros((d, 0)), np.concatenate(
        [V, W, S, np.asarray(pair.C[top], f64).T, np.asarray(pair.G[top], f64).T, extra], axis=1)))
    Q = space.Q
    if progress:
        progress(f"[phase 2 of at most {phases}] sketched subspace of rank {Q.shape[1]}")
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((Q.shape[1], SKETCH_RANDOM))
    R *= energy / np.linalg.norm(R, axis=0)
    R[:, 1::2] *= rng.uniform(size=R[:, 1::2].shape[1]) ** (1.0 / Q.shape[1])
    spectral = Q.T @ V
    Y0 = np.concatenate([Q.T @ extra, Q.T @ S, energy * (Q.T @ W),
                         *(s * energy * spectral for s in (1.0, -1.0, 0.25, -0.25)), R], axis=1)
    total = Y0.shape[1]
    if progress:
        progress(f"[phase 3 of at most {phases}] climbing from {total} starts in the subspace "
                 f"(budget {energy:g})")
    run, _, _ = successive_halving(space.reduced, Y0, energy, explore_gtol,
                                   tick=full_pass_tick(progress, pair))
    iterations = run.iterations
    values = sorted({float(v) for v in run.f}, reverse=True)
    # lift: full-d gradients at the survivors; grow the subspace until they are KKT points.
    # At x = Q y the scores K x are (K Q) y: the reduced pair gives the values and the
    # gradient weights, and one backward pass with the full K the full gradient.
    say = lambda rounds, text: (f"[phase {phases} of {phases}] {text}" if rounds is None
                                else f"[phase {3 + rounds} of at most {phases}] {text}")
    lifted = space.lift(lambda problem: problem, run.X, energy, polish_gtol, progress, say=say,
                        tick=lambda more: full_pass_tick(progress, pair, iterations + more))
    iterations += lifted.iterations
    best_x, best_f, residual = lifted.x, lifted.value, lifted.residual
    Q, points, f_full = space.Q, space.Q @ lifted.Y, lifted.f
    exact = pair.dtype == np.float64
    # the winner left the subspace (polished in full d): check the ray in full d
    reduced = pair if lifted.polished else space.reduced
    # interior check along the ray through the winner, in the subspace (x = Q y exactly)
    lift = (lambda Y: Y) if reduced is pair else (lambda Y: Q @ Y)
    y = best_x if reduced is pair else Q.T @ best_x
    start = ray_start(reduced.value, y, energy, best_f * (1 + RAY_MARGIN[0 if exact else 1]))
    if start is not None:
        again = BatchedAscent(reduced, start, energy)
        again.run(500, gtol=ray_gtol)
        iterations += again.iterations
        xr = lift(again.X)
        fx, gx = pair.value_and_grad(xr)
        if fx[0] > best_f:
            best_x, best_f = xr[:, 0].copy(), float(fx[0])
            residual = float(kkt_residuals(xr, fx, gx, energy)[0])
    on_boundary = bool(np.linalg.norm(best_x) >= energy * (1 - 1e-9))
    values = sorted(set(values) | {best_f}, reverse=True)
    keep_idx = distinct(points, f_full, energy, tol=1e-3)[:4]
    hits = int(np.sum((np.linalg.norm(points - best_x[:, None], axis=0) <= 1e-2 * energy)
                      & (f_full >= best_f * (1 - 1e-6))))
    return SearchResult(x=best_x, value=best_f, starts=total, iterations=iterations,
                        local_maxima=len(values), values=values[:10],
                        on_boundary=on_boundary, kkt_residual=residual,
                        seconds=time.perf_counter() - t0, best_hits=max(hits, 1),
                        rounds=1, stop_reason=f"successive halving of {total} screened starts in a "
                        f"subspace of rank {Q.shape[1]}", budget_exhausted=False, rungs=[energy],
                        points=project(points[:, keep_idx], energy), search_space="sketch")
