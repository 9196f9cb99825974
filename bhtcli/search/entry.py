"""The one entry point of the searches, dispatching on the method (as scipy.optimize.minimize).

    "auto"    the one default pipeline (pipeline.py): the bulk-aware screened starts climbed in
              a sketched subspace or in full d (by cost), and the full multistart ladder too
              where it is affordable; a fixed number of `starts` asks for "full"
    "full"    the full multistart search in R^d: budget ladder, adaptive rounds of starts
    "sketch"  screens, successive halving in a sketched subspace, lift and polish in full d
    "ccp"     the convex-concave procedure with cvxpy (a slow, independent cross-check)
    "box"     leverage-score models: L-BFGS-B over the box of weights (box.py)

Every method returns a :class:`bhtcli.search.result.SearchResult`.
"""
from __future__ import annotations

import numpy as np

from bhtcli.models.threads import single_threaded
from bhtcli.search.ascent import enough
from bhtcli.search.result import SearchResult

METHODS = ("auto", "full", "sketch", "ccp", "box")


def maximize(problem, energy: float, method: str = "auto", *, starts: int | None = None,
             seed: int = 0, max_starts: int | None = None, keep: int = 4, progress=None,
             carried=None, box=None, models=None, objective: str = "bhattacharyya",
             tolerances=None) -> SearchResult:
    """The best query for `problem` under the budget `energy`.

    Parameters
    ----------
    problem : SoftmaxPair, LeveragePair or KModels
        What to maximise (its Bhattacharyya distance, or `objective` for "box"; K models: the
        bottleneck min_{i<j} D_ij, full or sketched by the pair's size rule, with "auto",
        "full" or "sketch"; models with read-outs in full d, "sketch" a ValueError for them;
        the result carries the subspace and the pairs' directions).
    energy : float
        The radius of the ball ||x|| <= energy (softmax methods; unused by "box").
    method : {"auto", "full", "sketch", "ccp", "box"}
    starts : int, optional
        Exactly this many starts (full search: one round instead of adaptive rounds; "auto"
        then chooses the full search). "ccp" defaults to 32, "box" to box.default_starts.
    seed : int
    max_starts : int, optional
        Budget of the full search's adaptive rounds (default ladder.DEFAULT_MAX_STARTS).
    carried : (d, m) array, optional
        Extra starting points (scaled into the ball), e.g. the best candidate queries.
    box : (lo, hi)
        "box" only: the bounds on theta = -log s^2.
    models : (A, B)
        "ccp" only: the two matrices (the convex steps need them, not the pair's K).
    objective : {"bhattacharyya", "kl"}
        "box" only.
    """
    with single_threaded():     # the small products; the passes take the threads back
        found = _maximize(problem, energy, method, starts=starts, seed=seed,
                          max_starts=max_starts, keep=keep, progress=progress, carried=carried,
                          box=box, models=models, objective=objective, tolerances=tolerances)
    if enough(found.value) and "one answer already decides" not in found.stop_reason:
        found.stop_reason += "; stopped there: one answer already decides"
    return found


def _maximize(problem, energy, method, *, starts, seed, max_starts, keep, progress, carried,
              box, models, objective, tolerances) -> SearchResult:
    if method == "box":
        from bhtcli.search.box import default_starts, maximize_box
        lo, hi = box
        if starts is None:
            starts = default_starts(problem.n, problem.a.At.shape[0])
        return maximize_box(problem, lo, hi, starts, seed, objective)
    from bhtcli.models.kway import KModels
    if isinstance(problem, KModels):            # P = K(K-1)/2 pairs under a bottleneck
        return _maximize_bottleneck(problem, energy, method, starts=starts, seed=seed,
                                    progress=progress, carried=carried)
    if method == "ccp":
        from bhtcli.search.ccp import ccp_search
        from bhtcli.search.starts import DEFAULT_STARTS
        A, B = models
        return ccp_search(problem, A, B, energy, DEFAULT_STARTS if starts is None else starts, seed)
    from bhtcli.search.ascent import gradient_tolerances
    from bhtcli.search.ladder import DEFAULT_MAX_STARTS, search_budgets
    if method not in ("auto", "full", "sketch"):
        raise ValueError(f"unknown search method {method!r}; one of {', '.join(METHODS)}")
    tolerances = tolerances or gradient_tolerances(problem)
    max_starts = DEFAULT_MAX_STARTS if max_starts is None else max_starts
    if carried is not None and np.size(carried):
        from bhtcli.search.ascent import project
        carried = project(np.asarray(carried, dtype=np.float64), energy)
    else:
        carried = None
    from bhtcli.models.softmax import SoftmaxPair
    from bhtcli.search.scan import pair_scan, scan_applies, with_scan
    if isinstance(problem, SoftmaxPair) and scan_applies(problem.d):
        # d <= 2: the whole ball's grid among the starts, for every link and method
        carried = with_scan(carried, pair_scan(problem, float(energy)))
    if method == "auto" and starts is None:
        from bhtcli.search.pipeline import search
        return search(problem, float(energy), seed=seed, max_starts=max_starts, keep=keep,
                      progress=progress, tolerances=tolerances, carried=carried)
    if method == "sketch":
        from bhtcli.search.sketch import sketch_search
        return sketch_search(problem, float(energy), starts=starts, seed=seed,
                             max_starts=max_starts, keep=keep, progress=progress,
                             tolerances=tolerances, carried=carried)
    return search_budgets(problem, [energy], starts=starts, seed=seed, max_starts=max_starts,
                          keep=keep, progress=progress, tolerances=tolerances,
                          carried=carried)[0]


def _maximize_bottleneck(models, energy, method, *, starts, seed, progress, carried):
    """K models: the sketched bottleneck search at vocabulary scale, else the full one
    (bottleneck.py); the pairs' spectral directions are found once and handed on."""
    from bhtcli.search.bottleneck import (SKETCH_SPECTRAL, maximize_bottleneck, pair_directions,
                                          sketch_bottleneck, use_kway_sketch)
    if method not in ("auto", "full", "sketch"):
        raise ValueError(f"K models are searched by 'auto', 'full' or 'sketch', not {method!r}")
    if use_kway_sketch(models, method, starts):
        directions = pair_directions(models, SKETCH_SPECTRAL, seed)
        found, space = sketch_bottleneck(models, energy, seed=seed, directions=directions,
                                         progress=progress, carried=carried)
        found.subspace = space
    else:
        directions = pair_directions(models, 2, seed)
        found = maximize_bottleneck(models, energy, starts=starts, seed=seed, progress=progress,
                                    directions=directions, carried=carried)
    found.directions = directions
    return found
