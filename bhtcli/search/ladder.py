"""Budget continuation and adaptive multistart: the global search behind `design` (docs/search.md).

1. **Ladder.** Budgets nest (docs/maths.md §5.1): every point of
   the ball of radius E' < E lies in the ball of radius E. The search climbs a ladder of
   budgets E/4^k, ..., E/4, E (and, for a list of budgets, every one of them), starting at the
   smallest rung from the small-budget answer (the top right singular vectors of the
   row-centred A - B) and warm-starting every rung from the previous rung's best points, both
   as they are and scaled up to the new radius. A maximum found in a smaller ball is never
   lost, so the designed value is non-decreasing along the ladder, and plateaus (both
   softmaxes one-hot on the same row, gradient exactly 0) are entered from a smaller ball
   where the landscape still has slope.
2. **Rounds.** At each requested budget, starts are added in rounds (32, then as many again,
   doubling) until the evidence says the best maximum has been found -- it was reached from
   BEST_HITS independent starts, or a whole round found nothing better -- or the budget of
   starts runs out (reported). `starts=N` fixes the number exactly instead (one round).
   The first round climbs every start to the end (what a fixed number of starts does); a
   later round only looks for a maximum above the best found, so its starts climb by
   successive halving (LATER_ROUND_HALVING) and the survivors to the end.
3. Then the best few distinct maxima are polished and the ray through the winner is checked
   for interior maxima (optimize.finish).
"""
from __future__ import annotations

import math
import time

import numpy as np

from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.ascent import (BatchedAscent, distinct, enough, finish, gradient_tolerances,
                                  halve, project)
from bhtcli.search.kkt import kkt_state
from bhtcli.search.result import SearchResult
from bhtcli.search.starts import DEFAULT_STARTS, row_norms, spectral_directions, starting_points

from bhtcli.settings import DEFAULT_MAX_STARTS  # noqa: E402 (adaptive rounds stop here at the latest)
BEST_HITS = 3               # the best maximum reached from this many starts: evidence enough
MAX_GRID_RUNGS = 5          # grid points climbed below the smallest requested budget, at most
RUNG_RATIO = 4.0            # ratio of consecutive rungs below the smallest requested budget
RUNG_ITERATIONS = 10        # loose climbs on the intermediate rungs
CARRY = 4                   # best distinct points carried from rung to rung
LATER_ROUND_HALVING = ((20, 2), (20, 4), (40, 8))   # a later round: (iterations, then keep the
                            # best distinct 1/m of its starts, at least HALVING_KEEP), in turn
HALVING_KEEP = 4


def rung_energies(pair: SoftmaxPair, energies, max_rungs: int = MAX_GRID_RUNGS) -> list:
    """Ascending budgets to climb: the points of the pair's budget grid below each target, then
    the target (flagged).

    The grid is the same for every run on the pair: g_k = RUNG_RATIO^k / s (k = 0, 1, ...), with
    s the spread of the logits per unit of budget (E s ~ 1 is the nearly quadratic regime of
    docs/maths.md), so two runs at E1 < E2 climb the same rungs up to E1 and carry the same
    points into them (ordered results across runs, docs/search.md §1). Below the smallest
    target at most `max_rungs` grid points (the largest ones); between two targets the grid
    points in between.

    Returns a list of (energy, is_target).
    """
    targets = sorted(float(e) for e in energies)
    cn, gn = row_norms(pair)
    # the logits of A and B spread by at most E * (2 max ||c_i|| + max ||g_i||)
    scale = 2.0 * math.sqrt(float(cn.max(initial=0.0))) + math.sqrt(float(gn.max(initial=0.0)))
    if not scale > 0 or not math.isfinite(scale):
        return [(t, True) for t in targets]
    grid = []
    k = 0
    while RUNG_RATIO ** k / scale < targets[-1] * (1 - 1e-9):
        grid.append(RUNG_RATIO ** k / scale)
        k += 1
    rungs, previous = [], 0.0
    for i, t in enumerate(targets):
        between = [g for g in grid if previous * (1 + 1e-9) < g < t * (1 - 1e-9)]
        if i == 0:
            between = between[-max_rungs:]
        rungs += [(g, False) for g in between]
        rungs.append((t, True))
        previous = t
    return rungs


def _rung_cache(pair) -> dict:
    return pair.cache.get_or_build("rung_climbs", dict)


def _carry_starts(carried: np.ndarray, energy: float) -> np.ndarray:
    """The carried points as they are (feasible: the balls nest) and scaled to the sphere."""
    if carried.shape[1] == 0:
        return carried
    norms = np.linalg.norm(carried, axis=0)
    scaled = carried[:, norms > 0] * (energy / norms[norms > 0])
    return np.concatenate([carried, scaled], axis=1)


def _best_points(X: np.ndarray, f: np.ndarray, energy: float, count: int = CARRY):
    keep = distinct(X, f, energy, tol=1e-3)[:count]
    return X[:, keep], f[keep]


def search_budgets(pair: SoftmaxPair, energies, starts: int | None = None, seed: int = 0,
                   max_starts: int = DEFAULT_MAX_STARTS, keep: int = 4, progress=None,
                   tolerances=None, carried: np.ndarray | None = None) -> list:
    """One SearchResult per requested budget (ascending), from one warm-started ladder.

    Parameters
    ----------
    pair : SoftmaxPair
    energies : sequence of float
        Budgets (> 0), any order; results come back in ascending order.
    starts : int, optional
        Exact number of starts at every requested budget (carried points included);
        None (default): adaptive rounds up to `max_starts`.
    seed : int
    max_starts : int
        Budget of the adaptive rounds (starts at one requested budget).
    carried : (d, m) array, optional
        Points to climb from as well (e.g. a design at a nearby budget); scaled into the ball.
    """
    explore_gtol, polish_gtol, ray_gtol = tolerances or gradient_tolerances(pair)
    V = spectral_directions(pair, 3, seed)
    extra = np.zeros((pair.d, 0)) if carried is None else np.asarray(carried, dtype=np.float64)
    carried = np.zeros((pair.d, 0))
    out, previous = [], None
    rungs = rung_energies(pair, energies)
    climbed = []
    for energy, is_target in rungs:
        climbed.append(energy)
        if not is_target:
            # below the first target the climbs depend on the grid and the seed alone: every
            # search on this pair (each budget of a list, each trial of --queries) shares them
            cache = _rung_cache(pair) if previous is None else {}
            key = (energy, seed, carried.tobytes())
            if key not in cache:
                X0 = np.concatenate([_carry_starts(carried, energy), energy * V, -energy * V], axis=1)
                if carried.shape[1] == 0:
                    X0 = np.concatenate([X0, 0.5 * energy * V[:, :1], -0.5 * energy * V[:, :1]], axis=1)
                run = BatchedAscent(pair, X0, energy)
                run.run(RUNG_ITERATIONS, gtol=1e-3)
                cache[key] = _best_points(run.X, run.f, energy)[0]
            carried = cache[key]
            continue
        if progress and len(climbed) > 1:
            progress("budget ladder " + ", ".join(f"{e:.4g}" for e in climbed))
        result = _target(pair, energy, carried, starts, seed, max_starts, keep, progress,
                         explore_gtol, polish_gtol, ray_gtol,
                         extra=project(extra, energy) if extra.shape[1] else None)
        result.rungs = list(climbed)
        if previous is not None and previous.value > result.value:
            # budgets nest: the smaller ball's answer is feasible here and better
            on_boundary, residual = kkt_state(pair, previous.x, energy)
            result.x, result.value = previous.x.copy(), previous.value
            result.on_boundary, result.kkt_residual = on_boundary, residual
            result.values = sorted(set(result.values) | {previous.value}, reverse=True)[:10]
        out.append(result)
        previous = result
        carried = np.concatenate([result.x[:, None], result.points], axis=1)
        carried, _ = _best_points(carried, pair.value(carried), energy)
        climbed = []
    return out


def _tick_after(tick, iterations: int, best: float):
    """The progress hook of one round of starts: iterations and the best value counted over
    every round at this budget so far, so neither goes down when a round begins."""
    if tick is None:
        return None
    return lambda it, value, passes=None: tick(iterations + it, max(value, best), passes)


def _target(pair, energy, carried, starts, seed, max_starts, keep, progress,
            explore_gtol, polish_gtol, ray_gtol, extra=None) -> SearchResult:
    """The search at one requested budget. `carried`: the ladder's points (they count among
    the starts); `extra`: points given by the caller (the screened search's winners, a
    neighbouring budget's design, the best candidates) that climb too but neither take the
    place of a start nor count as evidence (they are not independent starts)."""
    t0 = time.perf_counter()
    fixed = starts is not None
    if fixed and extra is not None:
        carried, extra = np.concatenate([carried, extra], axis=1), None   # exactly `starts`
    carry = _carry_starts(carried, energy)
    first = starts if fixed else DEFAULT_STARTS
    fresh = max(first - carry.shape[1], 1 if carry.shape[1] == 0 else 0)
    if fixed and carry.shape[1] > first:
        carry = carry[:, :first]           # the best carried point as it is comes first
    X0 = np.concatenate([carry, starting_points(pair, energy, fresh, seed)], axis=1) \
        if fresh else carry
    skip = 0
    if extra is not None:
        extra = _carry_starts(extra, energy)
        X0, skip = np.concatenate([extra, X0], axis=1), extra.shape[1]
    ends_X, ends_f = [], []
    iterations, total, rounds, best_before = 0, 0, 0, -math.inf
    stop, ran_out = "", False
    while True:
        rounds += 1
        if progress:
            progress(f"climbing from {X0.shape[1]} starts (budget {energy:g}, round {rounds})")
        run = BatchedAscent(pair, X0, energy)
        run.tick = _tick_after(getattr(progress, "tick", None), iterations,
                               max(map(np.max, ends_f), default=-math.inf))
        if rounds > 1:
            halve(run, [(steps, max(X0.shape[1] // m, HALVING_KEEP)) for steps, m in LATER_ROUND_HALVING],
                  explore_gtol)
        run.run(500, gtol=explore_gtol)
        iterations += run.iterations
        total += X0.shape[1] - (skip if rounds == 1 else 0)    # the search's own starts
        ends_X.append(run.X)
        ends_f.append(run.f)
        X, f = np.concatenate(ends_X, axis=1), np.concatenate(ends_f)
        best = float(f.max())
        hits = best_hits(X[:, skip:], f[skip:], energy, above=float(f.max()))
        if fixed:
            stop = f"fixed number of starts ({total})"
            break
        if enough(best):
            stop = "one answer already decides"
            break
        if hits >= BEST_HITS:
            stop = f"best maximum reached from {hits} starts"
            break
        if rounds > 1 and best <= best_before * (1 + 1e-6):
            stop = f"round {rounds} ({X0.shape[1]} new starts) found no better maximum"
            break
        size = total                                   # doubling
        if total + size > max_starts:
            stop = f"budget of {max_starts} starts reached"
            ran_out = True
            break
        best_before = best
        X0 = more_starts(pair, energy, size, seed + 7 * rounds)
    found = finish(pair, X, f, energy, polish_gtol=polish_gtol, ray_gtol=ray_gtol, keep=keep,
                   progress=progress)
    tick = getattr(progress, "tick", None)
    if tick is not None:            # the display ends at the result
        tick(iterations + found.iterations, found.value, getattr(pair, "passes", None))
    finals = distinct(X, f, energy, tol=1e-3)
    values = with_polished(f[finals], found.value)
    on_boundary, residual = kkt_state(pair, found.x, energy)
    points, _ = _best_points(X, f, energy)
    return SearchResult(x=found.x, value=found.value, starts=total,
                        iterations=iterations + found.iterations, local_maxima=len(values),
                        values=values[:10], on_boundary=on_boundary, kkt_residual=residual,
                        seconds=time.perf_counter() - t0, best_hits=hits, rounds=rounds,
                        stop_reason=stop, budget_exhausted=ran_out, points=points)


def with_polished(explored, polished: float, rtol: float = 1e-9) -> list:
    """Distinct local-maximum values, best first: the explored ones and the polished best,
    where an explored value just below the polished one (within `rtol`) is the same maximum
    before its polish, not another one."""
    kept = {float(v) for v in explored if not polished * (1 - rtol) <= v <= polished}
    return sorted(kept | {float(polished)}, reverse=True)


def more_starts(pair, energy, count, seed) -> np.ndarray:
    """Seeded random starts for a later round: half on the sphere, half inside the ball."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((pair.d, count))
    U /= np.linalg.norm(U, axis=0)
    radius = np.full(count, energy)
    radius[1::2] = energy * rng.uniform(size=count // 2) ** (1.0 / pair.d)
    return U * radius


def best_hits(X: np.ndarray, f: np.ndarray, energy: float, above: float | None = None) -> int:
    """Starts whose end point is the best maximum (same value to 1e-6, within 1% of E); with
    `above`, 0 unless that maximum reaches `above` (to 1e-6: found by these starts too)."""
    if f.size == 0:
        return 0
    b = int(np.argmax(f))
    if f[b] <= 0 or (above is not None and f[b] < above * (1 - 1e-6)):
        return 0          # every start on a plateau, or the best found elsewhere: no evidence
    near = np.linalg.norm(X - X[:, [b]], axis=0) <= 1e-2 * energy
    return int(np.sum(near & (f >= f[b] * (1 - 1e-6))))


def warm_climb(pair: SoftmaxPair, energy: float, points: np.ndarray, seed: int = 0,
               tolerances=None) -> SearchResult:
    """Climb at `energy` from `points` (as they are where feasible, scaled into the ball, and
    scaled onto the sphere) and the spectral directions: the cheap trial of a bisection."""
    explore_gtol, polish_gtol, ray_gtol = tolerances or gradient_tolerances(pair)
    t0 = time.perf_counter()
    V = spectral_directions(pair, 3, seed)
    points = np.asarray(points, dtype=np.float64)
    X0 = np.concatenate([project(_carry_starts(points, energy), energy), energy * V,
                         -energy * V], axis=1)
    run = BatchedAscent(pair, X0, energy)
    run.run(500, gtol=explore_gtol)
    found = finish(pair, run.X, run.f, energy, polish_gtol=polish_gtol, ray_gtol=ray_gtol)
    on_boundary, residual = kkt_state(pair, found.x, energy)
    pts, _ = _best_points(np.concatenate([found.x[:, None], run.X], axis=1),
                          np.concatenate([[found.value], run.f]), energy)
    return SearchResult(x=found.x, value=found.value, starts=X0.shape[1],
                        iterations=run.iterations + found.iterations, local_maxima=0,
                        values=[found.value], on_boundary=on_boundary, kkt_residual=residual,
                        seconds=time.perf_counter() - t0, stop_reason="warm start (bisection)",
                        points=pts)
