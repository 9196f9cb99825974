"""`design` over several budgets: the budget curve (a list of budgets, one warm-started ladder)
and `queries` (the smallest budget whose design needs at most N queries)."""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from bhtcli.analysis.facts import analyse_pair, pair_base
from bhtcli.commands.design import solver_record
from bhtcli.commands.report import ReportContext, report, same_model_report
from bhtcli.errors import NotReachable, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.io.validation import (check_dtype, check_energies, check_energy, check_error, check_queries,
                                  check_seed, check_starts)
from bhtcli.maths.counts import query_counts
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from bhtcli.models.readout import make_readout
from bhtcli.models.softmax import SoftmaxPair, logits_at
from bhtcli.results import BudgetCurveResult, DesignResult
from bhtcli.search.entry import maximize_budgets
from bhtcli.search.kkt import kkt_state
from bhtcli.search.ladder import DEFAULT_MAX_STARTS, warm_climb
from bhtcli.search.result import solver_dict


def _setup(A, B, error, starts, seed, dtype, max_starts, link_a, link_b, bias_a, bias_b):
    error, seed, dtype = check_error(error), check_seed(seed), check_dtype(dtype)
    if starts is not None:
        starts = check_starts(starts)
    max_starts = check_starts(max_starts, parameter_name("max_starts"))
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    pair = SoftmaxPair(A, B, readout=readout, dtype=dtype)
    return A, B, pair, error, starts, seed, max_starts


def design_curve(A, B, energies, error: float = 0.05, starts: int | None = None, seed: int = 0,
                 progress=None, *, link_a="exp", link_b="exp", bias_a=None, bias_b=None,
                 dtype: str = "float64", max_starts: int = DEFAULT_MAX_STARTS) -> BudgetCurveResult:
    """One design per budget (increasing), from one warm-started ladder: the designed H^2 is
    non-decreasing along the list (the balls nest). Parameters as :func:`design`."""
    energies = check_energies(energies)
    A, B, pair, error, starts, seed, max_starts = _setup(
        A, B, error, starts, seed, dtype, max_starts, link_a, link_b, bias_a, bias_b)
    t0 = time.perf_counter()
    base = pair_base(A, B, pair.G, pair.readout)       # the diameter once for every budget
    facts = [analyse_pair(A, B, pair.G, e, pair.readout, base) for e in energies]
    if not facts[0].distinguishable:
        solver = solver_dict("lbfgs", 0, 0, pair.passes, 0, [], 0.0, 0.0)
        return BudgetCurveResult([same_model_report(ReportContext(A, B, pair, e, error, f, t0), solver)
                                  for e, f in zip(energies, facts)])
    found = maximize_budgets(pair, energies, starts=starts, seed=seed, max_starts=max_starts,
                             progress=progress)
    designs = []
    for e, f, r in zip(energies, facts, found):
        ctx = ReportContext(A, B, pair, e, error, f, t0)
        designs.append(report(ctx, r.x, r.on_boundary, solver_record(r, starts, max_starts)))
        if len(designs) > 1 and designs[-1].hellinger_squared < designs[-2].hellinger_squared:
            # the smaller ball's query is feasible here: never report less (rounding aside)
            prev = designs[-2]
            x = np.asarray(prev.query)
            designs[-1] = report(ctx, x, kkt_state(pair, x, e)[0],
                                  solver_record(r, starts, max_starts))
    return BudgetCurveResult(designs)


QUERIES_TOLERANCE = 0.005     # relative width of the final bracket of --queries


def design_for_queries(A, B, queries: int, energy_max: float, error: float = 0.05,
                       starts: int | None = None, seed: int = 0, progress=None, *,
                       link_a="exp", link_b="exp", bias_a=None, bias_b=None,
                       dtype: str = "float64", max_starts: int = DEFAULT_MAX_STARTS) -> DesignResult:
    """The smallest budget E <= energy_max whose designed query needs at most `queries`
    queries (samples.predicted), to 0.5% relative, and the design there.

    Bisection on the budget curve: every trial budget climbs from the best points of the
    bracket's ends (the lower end's as they are, the upper end's scaled down: both feasible),
    so the curve it walks is non-decreasing in E. The result is :func:`design`'s at the budget
    found, plus ``energy_search = {queries, energy_max, rungs, relative_tolerance}`` (rungs:
    every budget tried, with its H^2 and predicted count).

    Raises
    ------
    InputError
        Invalid options (queries must be a whole number >= 1).
    NotReachable
        Even energy_max needs more than `queries` queries (the message gives the count).
    """
    queries = check_queries(queries)
    energy_max = check_energy(energy_max)
    A, B, pair, error, starts, seed, max_starts = _setup(
        A, B, error, starts, seed, dtype, max_starts, link_a, link_b, bias_a, bias_b)
    t0 = time.perf_counter()
    base = pair_base(A, B, pair.G, pair.readout)
    facts_max = analyse_pair(A, B, pair.G, energy_max, pair.readout, base)
    if not facts_max.distinguishable:
        raise NotReachable(f"A and B are the same model ({facts_max.reason}): no number of "
                           "queries tells them apart")
    top = maximize_budgets(pair, [energy_max], starts=starts, seed=seed, max_starts=max_starts,
                           progress=progress)[0]
    tried = []

    def predicted(e, x):
        c, delta = _float64_logits(A, B, pair, x)
        tilt = Tilt.from_logits(c, delta)
        d = divergences_from_tilt(tilt)
        n = query_counts(tilt, d.bhattacharyya_distance, error).predicted \
            if d.bhattacharyya_distance > 0 else None
        tried.append({"energy": e, "hellinger_squared": d.hellinger_squared, "predicted": n})
        return n

    n_top = predicted(energy_max, top.x)
    if n_top is None or n_top > queries:
        count = "no finite number of" if n_top is None else f"{n_top:,}"
        raise NotReachable(f"{parameter_name('queries')} {queries:,}: even {parameter_name('energy')} "
                           f"{energy_max:g} needs {count} "
                           "queries for the designed query; raise --energy")
    hi, hi_r = energy_max, top
    lo, lo_r = 0.0, None
    # bracket by halving, then bisect; each trial climbs from both ends' best points
    while True:
        e = hi / 2 if lo == 0.0 else 0.5 * (lo + hi)
        if lo > 0 and hi - lo <= QUERIES_TOLERANCE * hi:
            break
        if lo == 0.0 and e < energy_max * 1e-9:
            break
        points = hi_r.points if lo_r is None else np.concatenate([lo_r.points, hi_r.points], axis=1)
        if progress:
            progress(f"{parameter_name('queries')} {queries}: trying budget {e:.6g}")
        r = warm_climb(pair, e, points, seed=seed)
        n = predicted(e, r.x)
        if n is not None and n <= queries:
            hi, hi_r = e, r
        else:
            lo, lo_r = e, r
    # the full search at the budget found (its H^2 can only be higher)
    final = maximize_budgets(pair, [hi], starts=starts, seed=seed, max_starts=max_starts,
                             carried=hi_r.points)[0] if hi != energy_max else top
    if final.value < hi_r.value:
        final = hi_r
    facts = facts_max if hi == energy_max else analyse_pair(A, B, pair.G, hi, pair.readout, base)
    ctx = ReportContext(A, B, pair, hi, error, facts, t0)
    result = report(ctx, final.x, final.on_boundary, solver_record(final, starts, max_starts))
    if result.samples["predicted"] is None or result.samples["predicted"] > queries:
        result = report(ctx, hi_r.x, hi_r.on_boundary, solver_record(hi_r, starts, max_starts))
    search = {"queries": queries, "energy_max": energy_max,
              "rungs": sorted(tried, key=lambda t: t["energy"]),
              "relative_tolerance": QUERIES_TOLERANCE}
    return replace(result, energy_search=search)


def _float64_logits(A, B, pair, x):
    if pair.dtype == np.float64:
        return pair.logits(x)
    return logits_at(A, B, x, pair.readout)
