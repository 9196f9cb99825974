"""`design`: the best query under an energy budget, with everything a user decides from."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from bhtcli.maths.bounds import PairFacts, join_notes, analyse_pair, certificate_from_variance, pair_base
from bhtcli.results import Result
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from bhtcli.errors import BhtError, InputError, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.search.ladder import DEFAULT_MAX_STARTS, search_budgets, warm_climb
from bhtcli.search.optimize import DEFAULT_STARTS, kkt_state, starting_points
from bhtcli.search.result import SearchResult, solver_dict, solver_from
from bhtcli.maths.counts import query_counts
from bhtcli.models.readout import make_readout
from bhtcli.models.softmax import SoftmaxPair, logits_at, pass_seconds
from bhtcli.io.validation import (check_dtype, check_energies, check_energy, check_error, check_queries,
                                  check_seed, check_starts)

METHODS = ("lbfgs", "ccp")
KKT_WARN = 1e-3      # a relative KKT residual above this is reported as a warning ...
KKT_WARN_FLOAT32 = 1e-2  # ... or above this after a float32 search: at ill-conditioned (swap)
                         # maxima its climb ends near 1e-3 with D resolved to ~1e-7 relative
                         # (docs/maths.md §14)


class NotReachable(BhtError):
    """queries=N: even the largest budget needs more than N queries (exit 1)."""


@dataclass(frozen=True)
class DesignResult(Result):
    """What `bht design` reports (render with bhtcli.cli.render, or use `to_dict()`)."""

    model: str
    n: int
    d: int
    energy: float
    target_error: float
    query: list
    query_norm: float
    on_boundary: bool
    hellinger: float
    hellinger_squared: float
    bhattacharyya_distance: float
    total_variation: float
    kl_ab: float
    kl_ba: float
    chernoff_information: float
    distinguishable: bool
    note: str | None
    samples: dict = field(default_factory=dict)
    certificate: dict = field(default_factory=dict)
    solver: dict = field(default_factory=dict)
    row_norm_2inf: float | None = None       # the paper's eps = ||A - B||_{2->inf} (softmax)
    paper_lower_order: float | None = None   # Thm 3.2's 1 / (eps E)^2, without its constant
    floor: float | None = None           # leverage models: the box is floor <= s_i^2 <= energy
    warnings: list = field(default_factory=list)
    readout: dict | None = None          # softmax family: links and biases
    dtype: str = "float64"               # precision of the large products (the rest: float64)
    candidates: dict | None = None       # design --candidates: the ranking (commands/candidates.py)
    subspace_rank: int | None = None     # design --subspace: queries x = V z, V of this rank
    energy_search: dict | None = None    # design --queries: how the budget was found


@dataclass(frozen=True)
class BudgetCurveResult:
    """`bht design --energy E1,E2,...`: one design per budget, from one warm-started ladder."""

    designs: list

    @property
    def warnings(self) -> list:
        """The designs' warnings, each once (printed on stderr before the table)."""
        return list(dict.fromkeys(w for d in self.designs for w in d.warnings))

    def to_dict(self) -> list:
        return [d.to_dict() for d in self.designs]


def design(A, B, energy: float | None, error: float = 0.05, starts: int | None = None,
           seed: int = 0, method: str = "lbfgs", progress=None, *, link_a="exp", link_b="exp",
           bias_a=None, bias_b=None, dtype: str = "float64", candidates=None, names=None,
           top: int = 10, subspace=None,
           max_starts: int | None = None, search_space: str | None = None) -> DesignResult:
    """Find the query x (||x||_2 <= energy) that best separates model A from model B.

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    energy : float
        Budget E on ||x||_2 (> 0).
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5 (default 0.05).
    starts : int
        Number of starting points of the multi-start search (default 32).
    seed : int
        Seed of the random starting points; equal seeds give equal results.
    method : {"lbfgs", "ccp"}
        "lbfgs" (default, batched projected L-BFGS, scales to large models) or "ccp"
        (convex-concave procedure solved with cvxpy; plain softmax and small models only).
    progress : callable, optional
        Called with short status strings (the CLI prints them on stderr).
    link_a, link_b : str
        "exp" (softmax, default), "poly:K" or "taylor:K" (K even): p_i ∝ f(s_i), see links.py.
    bias_a, bias_b : array_like or path, optional
        Length-n biases: s = A x + bias_a (likewise B).
    dtype : {"float64", "float32"}
        Precision of the products with A and B during the search; the reported numbers are
        always recomputed in float64 at the final query.
    candidates : array_like or path, optional
        m x d candidate queries, one per row: report the best one (rows with norm > energy
        are not eligible; energy may then be None) and how close it comes to the designed
        optimum; see :func:`bhtcli.commands.candidates.design_candidates`.
    names : path, optional
        With `candidates`: a text file with one name per candidate row.
    top : int
        With `candidates`: how many of the best candidates to list (default 10).
    subspace : array_like or path, optional
        A d x r matrix V: search only the queries x = V z (V is orthonormalised; it must have
        rank r); the result carries `subspace_rank`.

    Returns
    -------
    DesignResult

    Raises
    ------
    InputError
        Invalid matrices or options.
    """
    if candidates is not None:
        from bhtcli.commands.candidates import design_candidates
        if subspace is not None:
            raise InputError("--candidates and --subspace do not go together: rank candidates "
                             "in the full space, or design inside a subspace")
        if method != "lbfgs":
            raise InputError("--method ccp designs a query; with --candidates the optimum for "
                             "comparison uses the default lbfgs")
        return design_candidates(A, B, candidates, energy, error=error, names=names, top=top,
                                 starts=starts, seed=seed, link_a=link_a, link_b=link_b,
                                 bias_a=bias_a, bias_b=bias_b, dtype=dtype, progress=progress)
    if names is not None:
        raise InputError("--names labels the rows of --candidates; give --candidates too")
    if subspace is not None:
        from bhtcli.commands.subspace import design_in_subspace
        return design_in_subspace(A, B, subspace, energy, error=error, starts=starts, seed=seed,
                                  method=method, progress=progress, link_a=link_a, link_b=link_b,
                                  bias_a=bias_a, bias_b=bias_b, dtype=dtype)
    energy, error = check_energy(energy), check_error(error)
    search_space = check_search_space(search_space)
    starts = None if starts is None else check_starts(starts)
    if search_space == "sketch" and (starts is not None or max_starts is not None):
        raise InputError(f"{parameter_name('search_space')} sketch picks its starts from its screens; "
                         f"{parameter_name('starts')} and {parameter_name('max_starts')} set those "
                         "of the full search: give one or the other")
    # an explicit number of starts asks for the full multistart search (the size rule steps back)
    fixed_starts = starts if max_starts is None else (starts or max_starts)
    max_starts = DEFAULT_MAX_STARTS if max_starts is None else max_starts
    max_starts = check_starts(max_starts, parameter_name("max_starts"))
    seed, dtype = check_seed(seed), check_dtype(dtype)
    if method not in METHODS:
        raise InputError(f"{parameter_name('method')} must be one of {', '.join(METHODS)}, got {method!r}")
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    if method == "ccp" and not readout.plain:
        raise InputError(f"{parameter_name('method')} ccp handles plain softmax models only (no links, no biases); "
                         "use the default lbfgs")
    t0 = time.perf_counter()
    pair = SoftmaxPair(A, B, readout=readout, dtype=dtype)
    facts = analyse_pair(A, B, pair.G, energy, readout)
    ctx = _Context(A, B, pair, energy, error, facts, t0)

    if not facts.distinguishable:
        solver = solver_dict(method, 0, 0, pair.passes, 0, [], 0.0, 0.0)
        return _same_model(ctx, solver)

    if method == "ccp":
        starts = DEFAULT_STARTS if starts is None else starts
        found, extra_passes = _run_ccp(A, B, pair, energy, starts, seed)
        return _report(ctx, found.x, found.on_boundary, solver_from(found, pair.passes), extra_passes)
    if search_space == "auto" and fixed_starts is not None:
        search_space = "full"
    found = search_budgets(pair, [energy], starts=starts, seed=seed, max_starts=max_starts,
                           progress=progress, space=search_space)[0]
    return _report(ctx, found.x, found.on_boundary, _solver_dict(found, starts, max_starts))


def check_search_space(value) -> str:
    """None (the default of bhtcli.search.sketch), "full", "sketch" or "auto"."""
    from bhtcli.search.sketch import DEFAULT_SEARCH_SPACE, SEARCH_SPACES
    if value is None:
        return DEFAULT_SEARCH_SPACE
    if value not in SEARCH_SPACES:
        raise InputError(f"{parameter_name('search_space')} must be one of "
                         f"{', '.join(SEARCH_SPACES)}, got {value!r}")
    return value


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
        return BudgetCurveResult([_same_model(_Context(A, B, pair, e, error, f, t0), solver)
                                  for e, f in zip(energies, facts)])
    found = search_budgets(pair, energies, starts=starts, seed=seed, max_starts=max_starts,
                           progress=progress)
    designs = []
    for e, f, r in zip(energies, facts, found):
        ctx = _Context(A, B, pair, e, error, f, t0)
        designs.append(_report(ctx, r.x, r.on_boundary, _solver_dict(r, starts, max_starts)))
        if len(designs) > 1 and designs[-1].hellinger_squared < designs[-2].hellinger_squared:
            # the smaller ball's query is feasible here: never report less (rounding aside)
            prev = designs[-2]
            x = np.asarray(prev.query)
            designs[-1] = _report(ctx, x, kkt_state(pair, x, e)[0],
                                  _solver_dict(r, starts, max_starts))
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
    top = search_budgets(pair, [energy_max], starts=starts, seed=seed, max_starts=max_starts,
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
    final = search_budgets(pair, [hi], starts=starts, seed=seed, max_starts=max_starts,
                           carried=hi_r.points)[0] if hi != energy_max else top
    if final.value < hi_r.value:
        final = hi_r
    facts = facts_max if hi == energy_max else analyse_pair(A, B, pair.G, hi, pair.readout, base)
    ctx = _Context(A, B, pair, hi, error, facts, t0)
    result = _report(ctx, final.x, final.on_boundary, _solver_dict(final, starts, max_starts))
    if result.samples["predicted"] is None or result.samples["predicted"] > queries:
        result = _report(ctx, hi_r.x, hi_r.on_boundary, _solver_dict(hi_r, starts, max_starts))
    search = {"queries": queries, "energy_max": energy_max,
              "rungs": sorted(tried, key=lambda t: t["energy"]),
              "relative_tolerance": QUERIES_TOLERANCE}
    return replace(result, energy_search=search)


def _float64_logits(A, B, pair, x):
    if pair.dtype == np.float64:
        return pair.logits(x)
    return logits_at(A, B, x, pair.readout)


def _solver_dict(r, starts, max_starts) -> dict:
    """The `solver` object of a ladder search, with the evidence of the adaptive rounds."""
    sketched = r.search_space == "sketch"     # its starts come from its screens, not rounds
    return solver_from(r, 0, adaptive=starts is None and not sketched,
                       max_starts=None if sketched else max_starts)


def report_for_query(A, B, x, energy: float, error: float = 0.05, *, link_a="exp", link_b="exp",
                     bias_a=None, bias_b=None) -> DesignResult:
    """The report `design` gives, for a query chosen by the caller (no optimisation)."""
    energy, error = check_energy(energy), check_error(error)
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    t0 = time.perf_counter()
    pair = SoftmaxPair(A, B, readout=readout)
    facts = analyse_pair(A, B, pair.G, energy, readout)
    ctx = _Context(A, B, pair, energy, error, facts, t0)
    x = np.asarray(x, dtype=np.float64)
    on_boundary, residual = kkt_state(pair, x, energy)
    solver = solver_dict("given", 0, 0, pair.passes, 0, [], residual, 0.0)
    if not facts.distinguishable:
        return _same_model(ctx, solver)
    return _report(ctx, x, on_boundary, solver)


@dataclass(frozen=True)
class _Context:
    A: np.ndarray
    B: np.ndarray
    pair: SoftmaxPair
    energy: float
    error: float
    facts: PairFacts
    t0: float


def _warnings(readout) -> list:
    if readout.link_a.scale_free and readout.link_b.scale_free and \
            readout.bias_a is None and readout.bias_b is None:
        return ["both links are poly:K without bias: the probabilities are the same at x and "
                "t x, so the energy changes nothing here (it matters against an exp or taylor link)"]
    return []


def _report(ctx: _Context, x, on_boundary, solver, extra_passes: int = 0):
    pair = ctx.pair
    # The reported numbers come from float64 scores at x: the pair's own product when it is
    # float64, one streamed float64 pass over A and B after a float32 search.
    if pair.dtype == np.float64:
        c, delta = pair.logits(x)
    else:
        c, delta = logits_at(ctx.A, ctx.B, x, pair.readout)
    tilt = Tilt.from_logits(c, delta)
    div = divergences_from_tilt(tilt)
    counts = query_counts(tilt, div.bhattacharyya_distance, ctx.error)
    note = None
    certificate = _certificate_dict(ctx, div.hellinger_squared)
    if div.bhattacharyya_distance == 0.0:
        ceiling = certificate["hellinger_squared_max_bound"]
        if ceiling == 0.0:          # proven: no query in the ball separates them in float64
            note = ("the models differ, but by less than float64 resolves at this budget: "
                    "H^2 underflows to 0 and no finite count can be given")
        else:
            allows = "has no closed form here" if ceiling is None else \
                f"allows up to H^2 = {ceiling:.3g} at this budget"
            note = ("the search ended at H^2 = 0 (at every point it reached both models put "
                    f"all their mass on the same rows), while the certificate {allows}: this "
                    "is not evidence that the models are indistinguishable; try more starts")
    solver = dict(solver, passes=pair.passes + extra_passes, pass_seconds=pass_seconds(pair),
                  seconds=time.perf_counter() - ctx.t0)
    warnings = _warnings(pair.readout)
    kkt_warn = KKT_WARN if pair.dtype == np.float64 else KKT_WARN_FLOAT32
    if solver["method"] not in ("given", "candidates") and solver["kkt_residual"] > kkt_warn:
        warnings.append(f"the KKT residual at the query is {solver['kkt_residual']:.2g}: the point found "
                        "is not a verified local maximum (e.g. on a kink of a poly:K link); the "
                        "certificate's bound still holds, try more --starts")
    return DesignResult(
        "softmax", pair.n, pair.d, ctx.energy, ctx.error, x.tolist(), float(np.linalg.norm(x)),
        on_boundary, div.hellinger, div.hellinger_squared, div.bhattacharyya_distance,
        div.total_variation, div.kl_ab, div.kl_ba, div.chernoff_information, distinguishable=True,
        note=note,
        samples={"lower": counts.lower, "upper": counts.upper, "predicted": counts.predicted,
                 "method": counts.method},
        certificate=certificate,
        **_paper_dict(ctx, True), solver=solver, warnings=warnings,
        readout=pair.readout.description, dtype=str(pair.dtype))


def _same_model(ctx: _Context, solver):
    pair = ctx.pair
    zero = dict(bhattacharyya_distance=0.0, hellinger=0.0, hellinger_squared=0.0,
                total_variation=0.0, kl_ab=0.0, kl_ba=0.0, chernoff_information=0.0)
    solver = dict(solver, passes=pair.passes, pass_seconds=pass_seconds(pair),
                  seconds=time.perf_counter() - ctx.t0)
    return DesignResult("softmax", pair.n, pair.d, ctx.energy, ctx.error, [0.0] * pair.d, 0.0, False,
                        **zero, distinguishable=False, note=ctx.facts.reason,
                        samples={"lower": None, "upper": None, "predicted": None, "method": "none"},
                        certificate=_certificate_dict(ctx, 0.0),
                        **_paper_dict(ctx, False), solver=solver,
                        readout=pair.readout.description, dtype=str(pair.dtype))


def _certificate_dict(ctx: _Context, h2):
    facts = ctx.facts
    ceiling = facts.ceiling
    cert = certificate_from_variance(ceiling.variance if ceiling else None, ctx.error,
                                     facts.distinguishable)
    bound = cert.hellinger_squared_max_bound
    ratio = h2 / bound if bound else None
    return {"hellinger_squared_max_bound": bound,
            "kl_max_bound": cert.kl_max_bound,
            "samples_lower_any_strategy": cert.samples_lower_any_strategy,
            "mean_samples_lower_sequential": cert.mean_samples_lower_sequential,
            "ceiling_method": ceiling.method if ceiling else None,
            "ceilings": ceiling.candidates if ceiling else None,
            "row_diameter": facts.diameter.value, "row_diameter_exact": facts.diameter.exact,
            "design_over_bound": ratio,
            "note": join_notes(facts.certificate_note, ceiling.note if ceiling else None)}


def _paper_dict(ctx: _Context, distinguishable):
    eps = ctx.facts.eps_2inf
    softmax = ctx.pair.readout.exp_links
    return {"row_norm_2inf": eps,
            "paper_lower_order": (1.0 / (eps * ctx.energy) ** 2
                                  if softmax and distinguishable and eps > 0 else None)}


def _run_ccp(A, B, pair, energy, starts, seed):
    from bhtcli.search.ccp import ccp_maximize
    t = time.perf_counter()
    X0 = starting_points(pair, energy, starts, seed)
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    X, values, solves, passes = ccp_maximize(A, B, X0, energy)
    best = int(np.argmax(values))
    x = X[:, best]
    # The cone solver's tolerance (~1e-8) leaves x just inside the sphere: judge the KKT
    # conditions on the sphere at that tolerance, not at L-BFGS's 1e-9.
    on_boundary, residual = kkt_state(pair, x, energy, boundary_rtol=1e-6)
    order = []                          # values equal to the solver's tolerance: one maximum
    for v in sorted(values.tolist(), reverse=True):
        if all(abs(v - u) > 1e-6 * max(abs(u), 1e-300) for u in order):
            order.append(v)
    found = SearchResult(x=x, value=float(values[best]), starts=X0.shape[1], iterations=solves,
                         local_maxima=len(order), values=order, on_boundary=on_boundary,
                         kkt_residual=residual, seconds=time.perf_counter() - t, method="ccp",
                         message=f"{solves} convex solves from {X0.shape[1]} starts")
    return found, passes
