"""The default search ("auto" in entry.py): one pipeline for every path (docs/search.md §6).

Every caller that wants "the best query at this budget" -- a single design, each budget of a
list, each trial of `--queries`, the optimum that `--candidates` and `--subspace` compare
against, sweep tasks -- runs this one function, so they all get the same answer for the same
pair, budget and seed. It

1. screens every row for a single-row maximum against the bulk and pre-scores two-row swaps
   with the bulk counted, at several mixes (sketch.py, docs/maths.md §5.2): the screened starts;
2. climbs them by successive halving, in a sketched subspace where that is cheaper than
   climbing in full d (the basis has fewer than d / SUBSPACE_MIN_RATIO columns: sketch.py),
   else in full d;
3. where the full multistart search is affordable (n * d below the sketch's size rule, or d
   too small for a subspace), runs it too -- the budget ladder on the grid shared by all runs,
   adaptive rounds of starts -- with the screened winners among its first round's starts, and
   returns the better of the two.

The choice between 2's two climbs and whether 3 runs are by cost (the size of the basis against
d; the full search's passes against the sketch's), never by the quality of what was found.
`method="full"` (3 alone, `--search-space full`, or any fixed `--starts N`) and
`method="sketch"` (1-2 in the subspace) stay for experts.
"""
from __future__ import annotations

import time

import numpy as np

from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.ascent import Climb, enough, finish, project
from bhtcli.search.kkt import kkt_state
from bhtcli.search.result import SearchResult

SUBSPACE_MIN_RATIO = 4       # the screened starts climb in a subspace when d >= this x its basis


def screens_apply(pair) -> bool:
    """The bulk-aware screens model exp links and the Bhattacharyya objective."""
    return (isinstance(pair, SoftmaxPair) and pair.readout.exp_links
            and pair.objective == "bhattacharyya")


def basis_columns(pair: SoftmaxPair, carried: int = 0) -> int:
    """Columns of the sketch's first basis before orthogonalisation (its rank at most)."""
    from bhtcli.search import sketch
    return (sketch.SKETCH_SPECTRAL + sketch.SKETCH_SWAPS + 2 * sketch.SKETCH_CANDIDATES
            + 4 * sketch.SKETCH_ROWS + carried)


def subspace_pays(pair: SoftmaxPair, carried: int = 0) -> bool:
    """Climbing in the sketched subspace costs less than in full d: its basis is at most
    d / SUBSPACE_MIN_RATIO wide (every product then reads fewer numbers, and the one wide
    product K Q is repaid by the climbs)."""
    return pair.d >= SUBSPACE_MIN_RATIO * basis_columns(pair, carried)


def full_search_pays(pair: SoftmaxPair) -> bool:
    """The full multistart search (hundreds of passes over A and B) runs too, except at the
    sizes where it costs ~100x the sketch's handful of passes (sketch.use_sketch's rule)."""
    from bhtcli.search.sketch import use_sketch
    return not use_sketch(pair, "auto")


def search(pair, energy: float, *, seed: int = 0, max_starts: int, keep: int = 4,
           progress=None, tolerances, carried=None) -> SearchResult:
    """The default search at one budget (module docstring). `carried`: extra starting points,
    already in the ball."""
    from bhtcli.search.ladder import search_budgets
    if not isinstance(pair, SoftmaxPair):
        return generic_search(pair, energy, seed=seed, starts=max(32, max_starts // 4),
                              keep=keep, progress=progress, tolerances=tolerances, carried=carried)
    if not screens_apply(pair):
        return search_budgets(pair, [energy], seed=seed, max_starts=max_starts, keep=keep,
                              progress=progress, tolerances=tolerances, carried=carried)[0]
    m = 0 if carried is None else carried.shape[1]
    if subspace_pays(pair, m):
        from bhtcli.search.sketch import sketch_search
        screened = sketch_search(pair, float(energy), seed=seed, progress=progress,
                                 tolerances=tolerances, carried=carried)
    else:
        # polished here only when nothing polishes after it
        screened = screened_search(pair, float(energy), seed=seed, progress=progress,
                                   tolerances=tolerances, carried=carried,
                                   polish=not full_search_pays(pair))
    if not full_search_pays(pair) or enough(screened.value):
        return screened
    seeds = np.concatenate([screened.x[:, None], screened.points] +
                           ([] if carried is None else [carried]), axis=1)
    full = search_budgets(pair, [energy], seed=seed, max_starts=max_starts, keep=keep,
                          progress=progress, tolerances=tolerances, carried=seeds)[0]
    full.seconds += screened.seconds
    full.stop_reason = f"{full.stop_reason} (first round with {screened.starts} screened starts' best)"
    if screened.value > full.value:
        full.x, full.value = screened.x.copy(), screened.value
        full.on_boundary, full.kkt_residual = screened.on_boundary, screened.kkt_residual
        full.values = sorted(set(full.values) | {screened.value}, reverse=True)[:10]
    return full


def screened_pool(pair: SoftmaxPair, energy: float, seed: int, carried=None) -> np.ndarray:
    """The sketch's starting points in full coordinates: the single-row screen's 2 per row,
    the bulk-aware swaps, spectral directions at +-E and +-E/4, a few seeded random points and
    the carried ones."""
    from bhtcli.search import sketch
    from bhtcli.search.starts import spectral_directions, swap_directions
    V = spectral_directions(pair, sketch.SKETCH_SPECTRAL, seed, power=1)
    rows, S = sketch.single_row_screen(pair, energy, sketch.SKETCH_CANDIDATES,
                                       ranked=sketch.SWAP_ANCHORS)
    W = swap_directions(pair, energy, sketch.SKETCH_SWAPS, bulk=True, exact=False,
                        anchors=rows[:sketch.SWAP_ANCHORS])
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((pair.d, sketch.SKETCH_RANDOM))
    R *= energy / np.linalg.norm(R, axis=0)
    R[:, 1::2] *= rng.uniform(size=R[:, 1::2].shape[1]) ** (1.0 / pair.d)
    extra = np.zeros((pair.d, 0)) if carried is None else carried
    return np.concatenate([extra, S, energy * W, *(s * energy * V for s in (1.0, -1.0, 0.25, -0.25)),
                           R], axis=1)


def screened_search(pair: SoftmaxPair, energy: float, *, seed: int = 0, progress=None,
                    tolerances, carried=None, polish: bool = True) -> SearchResult:
    """The screened starts climbed in full d (where a subspace would not pay): successive
    halving as in the sketch, the survivors climbed to the end, then the polish of the best
    distinct maxima and the ray check. Without `polish` (the full search follows), the
    survivors of the halving as they are: the full search's first round climbs them with its
    own starts, to the end, in the same passes."""
    from bhtcli.search.ascent import distinct
    from bhtcli.search.sketch import FULL_D_HALVING_FIRST, successive_halving
    t0 = time.perf_counter()
    explore_gtol, polish_gtol, ray_gtol = tolerances
    X0 = screened_pool(pair, energy, seed, carried)
    if progress:
        progress(f"climbing from {X0.shape[1]} screened starts in full d (budget {energy:g})")
    run, _, _ = successive_halving(pair, X0, energy, explore_gtol, climb=500 if polish else 0,
                                   first=FULL_D_HALVING_FIRST)
    if polish:
        found = finish(pair, run.X, run.f, energy, polish_gtol=polish_gtol, ray_gtol=ray_gtol,
                       progress=progress)
    else:
        b = int(np.argmax(run.f))
        found = Climb(run.X[:, b].copy(), float(run.f[b]), 0, run.f, [b])
    on_boundary, residual = kkt_state(pair, found.x, energy)
    keep = distinct(run.X, run.f, energy, tol=1e-3)[:4]
    return SearchResult(x=found.x, value=found.value, starts=X0.shape[1],
                        iterations=run.iterations + found.iterations, local_maxima=len(keep),
                        values=[found.value], on_boundary=on_boundary, kkt_residual=residual,
                        seconds=time.perf_counter() - t0, best_hits=1,
                        stop_reason=f"successive halving of {X0.shape[1]} screened starts in full d",
                        rungs=[energy], points=project(run.X[:, keep], energy))


def generic_search(problem, energy: float, *, seed: int = 0, starts: int = 32, keep: int = 4,
                   progress=None, tolerances, carried=None) -> SearchResult:
    """Any objective that BatchedAscent climbs (evaluate / pullback / value, attributes d and
    dtype), e.g. a K-model objective: `problem.starting_points(energy, count, seed)` if it has
    one, else seeded random points on the sphere and inside the ball, plus the carried ones;
    all climb together, the best distinct maxima are polished and the ray checked."""
    from bhtcli.search.ascent import climb
    from bhtcli.search.ladder import more_starts
    t0 = time.perf_counter()
    explore_gtol, polish_gtol, ray_gtol = tolerances
    own = getattr(problem, "starting_points", None)
    X0 = own(energy, starts, seed) if own is not None else more_starts(problem, energy, starts, seed)
    if carried is not None:
        X0 = np.concatenate([carried, X0], axis=1)
    found = climb(problem, X0, energy, explore_gtol=explore_gtol, polish_gtol=polish_gtol,
                  ray_gtol=ray_gtol, keep=keep, progress=progress)
    fx, gx = problem.value_and_grad(found.x[:, None])
    from bhtcli.search.kkt import kkt_residuals
    residual = float(kkt_residuals(found.x[:, None], fx, gx, energy)[0])
    values = sorted({float(v) for v in found.explored[found.finals]} | {found.value}, reverse=True)
    return SearchResult(x=found.x, value=found.value, starts=X0.shape[1],
                        iterations=found.iterations, local_maxima=len(found.finals),
                        values=values[:10], on_boundary=bool(np.linalg.norm(found.x) >= energy * (1 - 1e-9)),
                        kkt_residual=residual, seconds=time.perf_counter() - t0,
                        stop_reason=f"fixed number of starts ({X0.shape[1]})", rungs=[energy])
