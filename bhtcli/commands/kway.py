"""Which of K models answers: the K-way design (a query or a schedule) and bound
(docs/kway.md; the maths in docs/maths.md §8)."""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
import warnings
from dataclasses import replace

import numpy as np

from bhtcli.analysis.diameter import DifferenceRows
from bhtcli.analysis.facts import analyse_pair, bottleneck_certificate
from bhtcli.analysis.kway_facts import iter_pair_facts
from bhtcli.errors import InputError, note, parameter_name
from bhtcli.io.load import load_models as load_same_shape
from bhtcli.maths.certificate import certificate_from_variance
from bhtcli.maths.kway import KwayLaw, allocate, kway_counts
from bhtcli.models.kway import KModels, kway_scores_at, pairs_at
from bhtcli.models.threads import beside, single_threaded
from bhtcli.results import BoundResult, BudgetCurveResult, DesignResult
from bhtcli.search.entry import maximize
from bhtcli.search.schedule import best_schedule
from bhtcli.search.result import solver_dict

MAX_MODELS = 8
WHY_MAX = ("the bottleneck has K(K-1)/2 pairs and every step of the search evaluates each of "
           f"them ({MAX_MODELS * (MAX_MODELS - 1) // 2} pairs at K = {MAX_MODELS}), and the "
           "schedule's linear programme has one constraint per pair")


def model_names(models) -> list:
    """The names of the models as given: paths as written, M1, M2, ... for arrays."""
    return [os.fspath(m) if isinstance(m, (str, os.PathLike)) else f"M{k + 1}"
            for k, m in enumerate(models)]


def load_models(models, dtype=None, merge_identical: bool = False):
    """(matrices, names): every model loaded and checked; the same shape for all. With
    `merge_identical`, inputs whose matrices are identical (every value equal) count once: a
    Note names each group, and the first of it stands for the rest (an InputError when all
    are one)."""
    models = list(models)
    K = len(models)
    if K < 2:
        raise InputError(f"give at least two models to tell apart, got {K}")
    if K > MAX_MODELS:
        raise InputError(f"at most {MAX_MODELS} models at a time, got {K}: {WHY_MAX}; compare "
                         "them in groups")
    names = model_names(models)
    mats = load_same_shape(models, names, dtype=dtype)    # shapes from headers first
    if merge_identical:
        mats, names = distinct_builds(mats, names)
    return mats, names


def same_values(M, R, rows: int = 8192) -> bool:
    """Whether M and R hold the same values (compared as float64, so -0.0 equals 0.0, whatever
    dtype or file each was stored in). A sample of rows first (the first and last 16, and 16
    spread between them): two different models almost always differ there, and nothing else
    is read; then every row block, stopping at the first that differs."""
    if M.shape != R.shape:
        return False
    n = M.shape[0]
    f64 = lambda X, at: np.asarray(X[at], dtype=np.float64)
    sample = np.unique(np.r_[0:min(n, 16), max(n - 16, 0):n, np.linspace(0, n - 1, 16).astype(int)])
    if not np.array_equal(f64(M, sample), f64(R, sample)):
        return False
    return all(np.array_equal(f64(M, slice(s, s + rows)), f64(R, slice(s, s + rows)))
               for s in range(0, n, rows))


def distinct_builds(mats, names):
    """The inputs with identical matrices merged (the first of each group kept), with a Note
    per group; one pass over each input, before any search."""
    keep = distinct_indices(mats, names)
    return [mats[k] for k in keep], [names[k] for k in keep]


def distinct_indices(mats, names, readouts=None) -> list:
    """The inputs kept when identical models are merged (the first of each group), with a
    Note per group: identical matrices, and with `readouts` (KReadouts) the same link and
    bias too."""
    tag = (lambda k: "") if readouts is None else readouts.tag
    groups: list[list[int]] = []        # each group's first member stands for it
    for k, M in enumerate(mats):
        home = next((g for g in groups if tag(g[0]) == tag(k) and same_values(mats[g[0]], M)), None)
        if home is None:
            groups.append([k])
        else:
            home.append(k)
    if len(groups) == len(mats):
        return list(range(len(mats)))
    alike = "" if readouts is None else " with the same link and bias"
    for members in groups:
        if len(members) > 1:
            listed = ", ".join(f"{k + 1} ({names[k]})" for k in members)
            note(f"models {listed} are identical (every value equal{alike}): the same build, "
                 f"counted once as model {members[0] + 1}")
    if len(groups) == 1:
        raise InputError(f"all {len(mats)} models are identical (every value equal{alike}): "
                         "there is nothing to tell apart")
    keep = [members[0] for members in groups]
    note(f"telling apart the {len(keep)} distinct builds: "
         + ", ".join(names[k] for k in keep))
    return keep


def load_kway(models, spec=None):
    """(matrices, names, readouts): :func:`load_models` with identical models merged, and
    the K read-outs of `spec` (a ModelSpec with `links`/`biases`; models/kway_readout.py)
    loaded against the models' rows, None when every model is plain softmax."""
    if spec is None or spec.links is None:
        return (*load_models(models, merge_identical=True), None)
    mats, names = load_models(models)
    readouts = spec.kway_readouts(mats[0].shape[0])
    keep = distinct_indices(mats, names, readouts)
    return [mats[k] for k in keep], [names[k] for k in keep], readouts.subset(keep)


def pair_facts(mats, names, energy: float, readouts=None) -> list:
    """analyse_pair for every pair (i < j): the same-model rule and each pair's ceiling, from
    passes shared by all pairs (analysis/kway_facts.py: the same facts, bit for bit); with
    `readouts` each pair's own analyse_pair under its read-out. Raises InputError naming the
    first two inputs that are the same model."""
    out = []
    pairs = itertools.combinations(range(len(mats)), 2)
    each = iter_pair_facts(mats, energy) if readouts is None else (
        analyse_pair(mats[i], mats[j], DifferenceRows(mats[i], mats[j]), energy, readouts.pair(i, j))
        for i, j in itertools.combinations(range(len(mats)), 2))
    for (i, j), facts in zip(pairs, each):
        if not facts.distinguishable:
            # the pair rule's own reason: exactly the same, or the same up to rounding
            # (docs/maths.md §1.3); never "the same vector" when that is not exact
            raise InputError(f"models {i + 1} ({names[i]}) and {j + 1} ({names[j]}): "
                             f"{facts.reason.replace('A and B are', 'they are', 1)}; drop one of them")
        out.append(facts)
    return out


def exact_ceilings(facts: list, mats, energy: float, readouts=None, progress=None) -> list:
    """Each pair's facts with the bilinear ceiling added (--certificate exact; docs/maths.md
    §4.14), as a pair's design and bound add it: K(K-1)/2 of them, one n x n matrix each."""
    from bhtcli.analysis.bilinear import with_bilinear_ceiling
    out = []
    for f, (i, j) in zip(facts, itertools.combinations(range(len(mats)), 2)):
        f = with_bilinear_ceiling(f, mats[i], mats[j], energy,
                                  None if readouts is None else readouts.pair(i, j), log=progress)
        if f.ceiling is not None and "bilinear" in f.ceiling.candidates and \
                f.ceiling.candidates["bilinear"] is None:
            # a pair's JSON says why in certificate.note; the K models' certificate has none
            note(f"{parameter_name('certificate')} exact, M{i + 1} - M{j + 1}: {f.ceiling.note}")
        out.append(f)
    return out


class _Watched:
    """The search's progress callback while the facts run beside it: each message first
    raises what the facts raised, so that bad input they find (two inputs that are the same
    model, a budget whose logits overflow) stops the search at its next stage."""

    def __init__(self, progress, job):
        self.progress, self.job = progress, job
        self.tick = getattr(progress, "tick", None)

    def __call__(self, message: str) -> None:
        if self.job.done() and self.job.exception() is not None:
            raise self.job.exception()
        if self.progress:
            self.progress(message)


@contextlib.contextmanager
def facts_beside(mats, names, energy: float, progress=None, readouts=None):
    """:func:`pair_facts` in a background thread while the block runs (the search: only the
    certificate needs the facts, and the search's small products leave the second core
    idle). Yields (job, progress for the block); job.result() is the facts. When the block
    fails, an InputError of the facts is raised in its place: bad input is named as such,
    not by what it made the search do; the block's warnings are shown only when it ends
    without error. Throughout the block the passes take one BLAS thread (models/threads.py:
    beside): the same numbers in every run, whenever the facts end."""
    # the block's warnings wait for the facts: on bad input the search may warn about what
    # the input made it do, and the user is owed one Error line, not those
    with warnings.catch_warnings(record=True) as caught, \
            beside(pair_facts, mats, names, energy, readouts) as job:
        try:
            yield job, _Watched(progress, job)
        except Exception:
            if isinstance(job.exception(), InputError):        # waits for the facts
                raise job.exception() from None
            raise
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _law_at(mats, queries, weights, readouts=None):
    scores = [kway_scores_at(mats, x) for x in queries]
    return KwayLaw.build([s[0] for s in scores], [s[1] for s in scores], weights, readouts)


def preferred(schedule_predicted, single_predicted, schedule_d: float, single_d: float) -> str:
    """"schedule" or "single": the one that needs fewer answers by the predicted count (the
    maximum-likelihood test's, docs/maths.md §8.5), the single query on a tie (one query is
    simpler to send); by the exponent when a count is missing. A larger exponent alone does
    not decide: the counts' constants differ between a schedule and one query (docs/maths.md
    §8.3)."""
    if schedule_predicted is not None and single_predicted is not None:
        return "schedule" if schedule_predicted < single_predicted else "single"
    return "schedule" if schedule_d > single_d else "single"


def schedule_report(mats, pairs_ij, queries: np.ndarray, weights, single_d: float,
                    error: float, single_predicted=None, readouts=None):
    """(the schedule's report, its per-pair D in the order of pairs_ij) for the queries
    (d x m) used in proportions `weights`, recomputed in float64: its bottleneck exponent
    min_p sum_l w_l D_p(x_l), counts, answers per query, the gain over the single query's
    bottleneck `single_d`, and which of the two to use (:func:`preferred`; single_predicted:
    the single query's predicted count)."""
    law = _law_at(mats, list(queries.T), weights, readouts)
    Dm = law.distance_matrix()
    per_pair = [float(Dm[i, j]) for i, j in pairs_ij]
    sD = min(per_pair)
    samples = kway_counts(law, error)
    total = samples["predicted"]
    return ({"queries": queries.T.tolist(), "weights": np.asarray(weights).tolist(),
             "bhattacharyya_distance": sD, "hellinger_squared": -math.expm1(-sD),
             "samples": samples, "counts": None if total is None else allocate(weights, total),
             "gain_vs_single": sD / single_d if single_d > 0 else None,
             "preferred": preferred(total, single_predicted, sD, single_d)}, per_pair)


def pair_schedule(result: DesignResult) -> DesignResult:
    """`result` with its `schedule`: for two models the best schedule is the single query
    (the programme's one pair: max over mixes of sum_l w_l D(x_l) is max_x D(x)), weight 1, with
    the report's own numbers; its dual bound is the search's maximum D (docs/maths.md §8.3)."""
    s = result.samples
    D = result.bhattacharyya_distance
    sched = {"queries": [result.query], "weights": [1.0], "bhattacharyya_distance": D,
             "hellinger_squared": result.hellinger_squared, "samples": dict(s),
             "counts": None if s.get("predicted") is None else [s["predicted"]],
             "gain_vs_single": 1.0 if D > 0 else None, "preferred": "single"}
    if result.candidates is not None:       # the programme over the given rows: the best one
        sched["indices"] = [result.candidates["best_index"]]
    sched.update(dual_bound=D, converged=True, rounds=0,
                 candidates=1 if result.candidates is None else result.candidates["eligible"])
    return replace(result, schedule=sched)


def at_query(mats, pairs_ij, x, error: float, readouts=None):
    """(pairs, index of the bottleneck pair, samples) at the query x, in float64."""
    law = _law_at(mats, [x], [1.0], readouts)
    pairs = pairs_at(law, pairs_ij, error)
    worst = min(range(len(pairs)), key=lambda p: pairs[p]["bhattacharyya_distance"])
    return pairs, worst, kway_counts(law, error)


def design_kway(models, energy: float, options, *, dtype: str = "float64", schedule: bool = False,
                progress=None, spec=None, certificate: str = "fast") -> DesignResult:
    """The query x (||x|| <= energy) that maximises the bottleneck min_{i<j} D_ij(x) among K
    softmax models, and how many answers name the true model with every error <= error.

    Parameters
    ----------
    models : sequence of array_like or path
        The K n x d models, 2 <= K <= MAX_MODELS.
    energy : float
        Budget E on ||x||_2 (checked by the caller: bhtcli.api).
    options : DesignOptions
        error (alpha for every error probability: naming a wrong model when model k is true),
        starts (default 32), seed, and search_space: "auto" is the sketched subspace search at
        the pair sketch's sizes (n d >= 5e6 with d >= 256, starts not fixed), else the full
        search; "full" or "sketch" force one (docs/kway.md, "Vocabulary scale").
    dtype : {"float64", "float32"}
        Precision of the search's products; the report is recomputed in float64.
    schedule : bool
        Also find the best schedule: queries used in fixed proportions (column generation).
    progress : callable, optional
    spec : ModelSpec, optional
        Its `links` and `biases`: each model's read-out (None: plain softmax).
    certificate : {"fast", "exact"}
        "exact" adds each pair's bilinear ceiling (:func:`exact_ceilings`).

    Returns
    -------
    DesignResult
        With `models`, `pairs`, `bottleneck` (and `schedule`; `readout` with read-outs).
    """
    return design_loaded(*load_kway(models, spec), energy, options, dtype=dtype,
                         schedule=schedule, progress=progress, certificate=certificate)


def design_kway_curve(models, energies, options, *, dtype: str = "float64", progress=None,
                      spec=None) -> BudgetCurveResult:
    """One K-way design per budget (increasing), the models read once: each budget's search
    also climbs from the smaller budget's query (inside the larger ball), so that where the
    full search runs, the bottleneck found never falls along the list (the balls nest)."""
    mats, names, readouts = load_kway(models, spec)
    designs = []
    for e in energies:
        if progress:
            progress(f"budget {e:g}")
        carried = None if not designs else np.asarray(designs[-1].query, dtype=np.float64)[:, None]
        designs.append(design_loaded(mats, names, readouts, e, options, dtype=dtype,
                                      progress=progress, carried=carried))
    return BudgetCurveResult(designs)


def design_kway_for_queries(models, queries: int, options, *, dtype: str = "float64",
                            progress=None, spec=None) -> DesignResult:
    """The smallest budget <= spec.energy at which the K-way design needs at most `queries`
    answers (samples.predicted, the maximum-likelihood verdict's count), to 0.5% relative, by
    the pair's bracket (commands/budgets.py smallest_budget); the result is that trial's design,
    with `energy_search`. The models are read once."""
    from bhtcli.commands.budgets import energy_search, smallest_budget
    mats, names, readouts = load_kway(models, spec)
    designs = {}

    def trial(e):
        if progress:
            progress(f"{parameter_name('queries')} {queries}: trying budget {e:.6g}")
        designs[e] = design_loaded(mats, names, readouts, e, options, dtype=dtype)
        return designs[e].samples["predicted"], designs[e].hellinger_squared

    hi, tried = smallest_budget(trial, spec.energy, queries)
    return replace(designs[hi], energy_search=energy_search(queries, spec.energy, tried))


def design_loaded(mats, names, readouts, energy: float, options, *, dtype: str,
                  schedule: bool = False, progress=None, carried=None,
                  certificate: str = "fast") -> DesignResult:
    """design_kway on models already read: `carried` (d x m) points the search climbs from too."""
    error, starts, seed = options.error, options.starts, options.seed
    search_space = options.search_space
    t0 = time.perf_counter()
    if progress:
        progress(f"checking {len(mats) * (len(mats) - 1) // 2} pairs beside the search")
    with facts_beside(mats, names, energy, progress, readouts) as (job, watched):
        km = KModels(mats, dtype=dtype, readouts=readouts)
        found = maximize(km, energy, search_space, starts=starts, seed=seed,
                         progress=watched, carried=carried)
        space, directions = found.subspace, found.directions
        x = found.x
        pairs, worst, samples = at_query(mats, km.pairs, x, error, readouts)
        D = pairs[worst]["bhattacharyya_distance"]
        sched = None
        if schedule:
            columns = np.concatenate([x[:, None]] + ([found.points] if found.points is not None
                                                     else []), axis=1)
            with single_threaded():     # its pricing climbs are small products too
                ss = best_schedule(km, energy, columns, seed=seed, directions=directions,
                                   progress=watched, space=space)
            sched, sched_D = schedule_report(mats, km.pairs, ss.queries, ss.weights, D, error,
                                             samples["predicted"], readouts)
            sched.update(dual_bound=ss.dual_bound, converged=ss.converged, rounds=ss.rounds,
                         candidates=ss.columns)
        facts = job.result()
    if certificate == "exact":
        facts = exact_ceilings(facts, mats, energy, readouts, progress)
    printed = [[q["bhattacharyya_distance"] for q in pairs]]
    if sched is not None:
        printed.append(sched_D)
    cert = bottleneck_certificate(facts, km.pairs, error, D, printed)
    solver = solver_dict(found.method, found.starts, found.iterations, km.passes,
                         found.local_maxima, [-math.expm1(-v) for v in found.values[:5]],
                         found.kkt_residual, found.seconds, pass_seconds=km.pass_seconds(),
                         seconds=time.perf_counter() - t0, message=found.stop_reason,
                         search_space=found.search_space)
    warnings = []
    if found.kkt_residual > (1e-3 if km.dtype == np.float64 else 1e-2):
        warnings.append(f"the KKT residual at the query is {found.kkt_residual:.2g}: the point "
                        "found is not a verified local maximum of the bottleneck; try more starts")
    return bottleneck_result(names, km, energy, error, x, float(np.linalg.norm(x)),
                             found.on_boundary, pairs, worst, samples, cert, solver,
                             schedule=sched, warnings=warnings)


def bottleneck_result(names, km: KModels, energy: float, error: float, x, query_norm: float,
                      on_boundary: bool, pairs: list, worst: int, samples: dict, cert: dict,
                      solver: dict, **extra) -> DesignResult:
    """The DesignResult of K models at the query x: the bottleneck pair's H^2 and D, every
    pair, the counts for naming the true model; the keys of one pair left out (PAIR_ONLY)."""
    i, j = km.pairs[worst]
    return DesignResult("softmax", km.n, km.d, energy, error, np.asarray(x).tolist(), query_norm,
                        bool(on_boundary), None, pairs[worst]["hellinger_squared"],
                        pairs[worst]["bhattacharyya_distance"], None, None, None, None, True,
                        None, samples=samples, certificate=cert, solver=solver,
                        dtype=str(km.dtype), models=names, bottleneck={"i": i, "j": j},
                        pairs=pairs, readout=readout_of(km.readouts), **extra)


def readout_of(readouts):
    """The result's `readout` of K models: each model's link and whether it has a bias
    (None, and no key, for plain softmax models)."""
    return None if readouts is None else readouts.description


def bound_kway(models, energy: float, error: float = 0.05, spec=None, certificate: str = "fast",
               progress=None) -> BoundResult:
    """Each pair's closed-form ceiling (docs/maths.md §4.4) and the bottleneck's: no query and
    no schedule separates the closest pair better than the smallest ceiling (`spec`: the
    models' read-outs, as for :func:`design_kway`; "exact" `certificate`: each pair's bilinear
    ceiling too)."""
    mats, names, readouts = load_kway(models, spec)
    facts = pair_facts(mats, names, energy, readouts)
    if certificate == "exact":
        facts = exact_ceilings(facts, mats, energy, readouts, progress)
    K = len(mats)
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    cert = bottleneck_certificate(facts, pairs, error, None)
    rows = []
    for (i, j), f, b in zip(pairs, facts, cert["pair_bounds"]):
        c = certificate_from_variance(8.0 * b if b is not None else None, error, True)
        rows.append({"i": i, "j": j, "bhattacharyya_max_bound": b,
                     "hellinger_squared_max_bound": c.hellinger_squared_max_bound,
                     "samples_lower_any_strategy": c.samples_lower_any_strategy,
                     "row_diameter": f.diameter.value,
                     "ceiling_method": f.ceiling.method if f.ceiling else None})
    n, d = mats[0].shape
    shown = {k: cert[k] for k in ("bhattacharyya_max_bound", "hellinger_squared_max_bound",
                                  "binding_pair", "ceiling_method", "samples_lower_any_strategy")}
    return BoundResult("softmax", n, d, energy, error, True, None, None, None, shown,
                       readout=readout_of(readouts), models=names, pairs=rows)


def check_kway_options(*, model: str = "softmax", readout_plain: bool = True, **given) -> None:
    """The rules of K >= 3 models, one message each: softmax models, read-outs per model
    (links, biases; the pair's link_a .. bias_b name model A and model B), and none of the
    options in `given` that pairs have and K models have not yet (called by bhtcli.api and
    by sweep manifests)."""
    p = parameter_name
    if model != "softmax":
        raise InputError(f"{p('model')} leverage compares two models at a time: K-way designs are "
                         "for softmax models (a leverage query weights rows, and the K-way search "
                         "climbs softmax scores)")
    if not readout_plain:
        raise InputError(f"{p('link_a')}, {p('link_b')}, {p('bias_a')} and {p('bias_b')} name the "
                         "two models of a pair; with three or more models give "
                         f"{p('links')} and {p('biases')}, one per model in their order "
                         "(e.g. exp,softcap:30,exp)")
    extra = [f"{p(k)} {v}" if k in ("certificate", "method") else p(k)     # "certificate exact"
             for k, v in given.items() if v is not None and not (np.isscalar(v) and not v)]
    if extra:
        raise InputError(f"{', '.join(extra)} is not supported with three or more models "
                         "(docs/kway.md lists what is)")
