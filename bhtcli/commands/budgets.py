"""`design` over several budgets: the budget curve (a list of budgets, each with design's own
search, seeded by its neighbours too) and `queries` (the smallest budget whose design needs at
most N queries)."""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from bhtcli.analysis.facts import analyse_budgets, analyse_pair, pair_base
from bhtcli.commands.design import solver_record
from bhtcli.commands.report import ReportContext, report, report_logits, same_model_report
from bhtcli.errors import NotReachable, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.maths.counts import query_counts
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from bhtcli.models.softmax import SoftmaxPair, logits_at
from bhtcli.models.spec import DesignOptions, ModelSpec
from bhtcli.results import BudgetCurveResult, DesignResult
from bhtcli.search.entry import maximize
from bhtcli.search.kkt import kkt_state
from bhtcli.search.ladder import warm_climb
from bhtcli.search.result import solver_dict


def _setup(A, B, spec: ModelSpec, options: DesignOptions):
    # as `design`: a number of starts (or a budget of them) asks for the full search alone
    method = "auto" if options.fixed_starts is None else "full"
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    pair = SoftmaxPair(A, B, readout=spec.readout(A.shape[0]), dtype=spec.dtype)
    return A, B, pair, options.error, options.starts, options.seed, options.rounds, method


def design_curve(A, B, energies, spec: ModelSpec, options: DesignOptions = DesignOptions(),
                 progress=None) -> BudgetCurveResult:
    """One design per budget (increasing). Every budget runs the search that `design` runs
    there (the same answer, the budget grid's rungs shared), then climbs again from its
    neighbours' best points (the smaller budget's as they are, the larger one's scaled into
    the ball): the designed H^2 is at least `design`'s at every budget and non-decreasing
    along the list (the balls nest). `energies`: increasing budgets (checked by
    :func:`bhtcli.io.validation.energies_of`); `spec` (its energy unused) and `options` as for
    :func:`bhtcli.commands.design.design`."""
    A, B, pair, error, starts, seed, max_starts, method = _setup(A, B, spec, options)
    t0 = time.perf_counter()
    base = pair_base(A, B, pair.G, pair.readout)       # the diameter once for every budget
    facts = analyse_budgets(A, B, pair.G, list(energies), pair.readout, base)   # one pass for all
    if not facts[0].distinguishable:
        solver = solver_dict("lbfgs", 0, 0, pair.passes, 0, [], 0.0, 0.0)
        return BudgetCurveResult([same_model_report(ReportContext(A, B, pair, e, error, f, t0), solver)
                                  for e, f in zip(energies, facts)])
    found = []
    for e in energies:
        if progress:
            progress(f"budget {e:g}")
        found.append(maximize(pair, e, method, starts=starts, seed=seed, max_starts=max_starts,
                              progress=progress))
    for i, e in enumerate(energies):
        seeds = [np.concatenate([found[j].x[:, None], found[j].points], axis=1)
                 for j in (i - 1, i + 1) if 0 <= j < len(found) and found[j].points is not None]
        if seeds:
            _improve(pair, found[i], e, np.concatenate(seeds, axis=1), seed)
    for i in range(1, len(found)):
        if found[i - 1].value > found[i].value:
            # the smaller ball's query is feasible here and better
            prev, r = found[i - 1], found[i]
            r.x, r.value = prev.x.copy(), prev.value
            r.on_boundary, r.kkt_residual = kkt_state(pair, r.x, energies[i])
    designs = []
    # the float64 scores of every budget's query in one pass over A and B (float32 searches)
    logits = report_logits(ReportContext(A, B, pair, energies[-1], error, facts[-1], t0),
                           [r.x for r in found])
    for e, f, r, at_x in zip(energies, facts, found, logits):
        ctx = ReportContext(A, B, pair, e, error, f, t0)
        designs.append(report(ctx, r.x, r.on_boundary, solver_record(r, starts, max_starts),
                              logits=at_x))
        if len(designs) > 1 and designs[-1].hellinger_squared < designs[-2].hellinger_squared:
            # float64 rounding of the report against the search's own precision
            x = np.asarray(designs[-2].query)
            designs[-1] = report(ctx, x, kkt_state(pair, x, e)[0], solver_record(r, starts, max_starts))
    return BudgetCurveResult(designs)


def _improve(pair, r, energy, points, seed) -> None:
    """Climb at `energy` from `points` (scaled into the ball); keep the end if it beats r.
    Not where the sketch alone is the default search (vocabulary scale): a climb in full d
    costs hundreds of passes there, and a second sketch per budget doubles the curve's cost
    (measured: 7x one design for 4 budgets); the smaller neighbour's query still counts."""
    from bhtcli.search.pipeline import full_search_pays, screens_apply
    if screens_apply(pair) and not full_search_pays(pair):
        return
    better = warm_climb(pair, energy, points, seed=seed)
    if better.value > r.value:
        r.x, r.value = better.x, better.value
        r.on_boundary, r.kkt_residual = better.on_boundary, better.kkt_residual
        r.values = sorted(set(r.values) | {better.value}, reverse=True)[:10]
        r.points = np.concatenate([better.x[:, None], r.points], axis=1)


QUERIES_TOLERANCE = 0.005     # relative width of the final bracket of --queries


def design_for_queries(A, B, queries: int, spec: ModelSpec,
                       options: DesignOptions = DesignOptions(), progress=None) -> DesignResult:
    """The smallest budget E <= energy_max = spec.energy whose designed query needs at most `queries`
    queries (samples.predicted), to 0.5% relative, and the design there.

    Every trial budget runs the search that `design` runs there, so the answer is a statement
    about `design` itself: `design` at E needs at most `queries`, and at the lower end of the
    final bracket (>= 0.995 E) more. The trials are placed by interpolating log(count) against
    log(E) between the bracket's ends (safeguarded, with bisection as the fallback), and the
    last two close the bracket from either side. The result is the trial's design at the budget
    found, plus ``energy_search = {queries, energy_max, rungs, relative_tolerance}`` (rungs:
    every budget tried, with its H^2 and predicted count; the rung at the budget found is the
    design reported).

    `queries`: a whole number >= 1 (checked by :func:`bhtcli.io.validation.check_queries`).

    Raises
    ------
    NotReachable
        Even energy_max needs more than `queries` queries (the message gives the count).
    """
    energy_max = spec.energy
    A, B, pair, error, starts, seed, max_starts, method = _setup(A, B, spec, options)
    t0 = time.perf_counter()
    base = pair_base(A, B, pair.G, pair.readout)
    facts_max = analyse_pair(A, B, pair.G, energy_max, pair.readout, base)
    if not facts_max.distinguishable:
        raise NotReachable(f"A and B are the same model ({facts_max.reason}): no number of "
                           "queries tells them apart")
    results = {}

    def trial(e):
        if progress:
            progress(f"{parameter_name('queries')} {queries}: trying budget {e:.6g}")
        r = maximize(pair, e, method, starts=starts, seed=seed, max_starts=max_starts)
        c, delta = _float64_logits(A, B, pair, r.x)
        tilt = Tilt.from_logits(c, delta)
        d = divergences_from_tilt(tilt)
        n = query_counts(tilt, d.bhattacharyya_distance, error).predicted \
            if d.bhattacharyya_distance > 0 else None
        results[e] = r
        return n, d.hellinger_squared

    hi, tried = smallest_budget(trial, energy_max, queries)
    final = results[hi]
    facts = facts_max if hi == energy_max else analyse_pair(A, B, pair.G, hi, pair.readout, base)
    ctx = ReportContext(A, B, pair, hi, error, facts, t0)
    result = report(ctx, final.x, final.on_boundary, solver_record(final, starts, max_starts))
    return replace(result, energy_search=energy_search(queries, energy_max, tried))


def smallest_budget(trial, energy_max: float, queries: int):
    """(the budget found, the rungs tried): the smallest budget E <= energy_max at which
    trial(E) -> (predicted count or None, H^2) is at most `queries`, to QUERIES_TOLERANCE
    relative (see :func:`design_for_queries`); for a pair and for K models alike. Raises
    NotReachable when energy_max needs more."""
    tried = []

    def count(e):
        n, h2 = trial(e)
        tried.append({"energy": e, "hellinger_squared": h2, "predicted": n})
        return n

    n_top = count(energy_max)
    if n_top is None or n_top > queries:
        many = "no finite number of" if n_top is None else f"{n_top:,}"
        raise NotReachable(f"{parameter_name('queries')} {queries:,}: even {parameter_name('energy')} "
                           f"{energy_max:g} needs {many} "
                           "queries for the designed query; raise " + parameter_name("energy"))
    hi, n_hi, lo, n_lo = energy_max, n_top, 0.0, None
    sides = []                    # which end each trial moved: interpolation that keeps
    for _ in range(60):           # moving one end falls back to bisection
        if lo > 0 and hi - lo <= QUERIES_TOLERANCE * hi:
            break
        if lo == 0.0 and hi < energy_max * 1e-9:
            break
        e = _next_budget(lo, n_lo, hi, n_hi, queries, bisect=sides[-3:] in (["hi"] * 3, ["lo"] * 3))
        n = count(e)
        if n is not None and n <= queries:
            hi, n_hi = e, n
            sides.append("hi")
        else:
            lo, n_lo = e, n
            sides.append("lo")
    return hi, tried


def energy_search(queries: int, energy_max: float, tried: list) -> dict:
    """The result's `energy_search`: the target, the largest budget, every rung tried."""
    return {"queries": queries, "energy_max": energy_max,
            "rungs": sorted(tried, key=lambda t: t["energy"]),
            "relative_tolerance": QUERIES_TOLERANCE}


def _next_budget(lo, n_lo, hi, n_hi, queries, bisect=False) -> float:
    """The next trial budget between lo (needs more than `queries`; 0: not tried, or no finite
    count) and hi (needs at most): where log(count) interpolated in log(E) meets
    log(queries) -- from hi alone the small-budget law count ~ 1/D ~ E^-2 -- aimed a little
    above, kept inside the bracket; then the probes that close it (hi (1 - tol), lo / (1 - tol))."""
    tol = QUERIES_TOLERANCE
    if lo == 0.0:
        guess = hi * math.sqrt(n_hi / queries)
        return min(max(guess, hi / 16), 0.5 * hi)       # a bracket first: at least halve
    if bisect or n_lo is None or n_lo <= n_hi:
        guess = math.sqrt(lo * hi)
    else:
        t = (math.log(n_lo) - math.log(queries)) / (math.log(n_lo) - math.log(max(n_hi, 1)))
        guess = math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo))) * (1 + tol / 4)
    width = hi - lo
    guess = min(max(guess, lo + 0.05 * width), hi - 0.05 * width)
    guess = min(guess, hi * (1 - tol * 0.999))          # closes the bracket if it needs more
    if guess <= lo / (1 - tol):
        guess = lo / (1 - tol * 0.999)                  # closes it if it needs at most
    return min(guess, hi * (1 - tol * 0.999)) if guess >= hi else guess
def _float64_logits(A, B, pair, x):
    if pair.dtype == np.float64:
        return pair.logits(x)
    return logits_at(A, B, x, pair.readout)
