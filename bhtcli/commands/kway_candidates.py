"""K models and given candidate queries: the best real query for naming the true model
(docs/kway.md, "Candidate queries"): `rank` and `design --candidates`. Every row of H is
scored by its bottleneck min_{i<j} D_ij(h) (one product of the K stacked models per block of
rows), the best rows get their counts, and the best one gets the K-way design's full report,
next to the designed optimum over the ball (the bottleneck search, with the best candidates
among its starts)."""
from __future__ import annotations

import math
import os
import time
import numpy as np

from bhtcli.commands.candidates import (DEFAULT_TOP, MAX_BLOCK_ROWS, best_rows, block_rows,
                                        blocks, check_out, load_names, open_candidates, survey,
                                        write_rows)
from bhtcli.analysis.facts import bottleneck_certificate
from bhtcli.commands.kway import (at_query, bottleneck_result, facts_beside, load_models,
                                  search_bottleneck)
from bhtcli.errors import InputError, parameter_name
from bhtcli.models.kway import KModels
from bhtcli.results import DesignResult, RankResult
from bhtcli.search.kkt import kkt_residuals
from bhtcli.search.result import solver_dict

EXTRA_STARTS = 4      # the best candidates among the optimum's starting points
SCHEDULE_MIN_WEIGHT = 1e-9    # a row below this share of the LP's schedule is dropped (as best_schedule)


def score_rows(km: KModels, H, label: str, eligible: np.ndarray, progress=None):
    """(bottleneck D, every pair's D) of every row of H (m, and P x m); ineligible rows get
    -inf and NaN."""
    m = H.shape[0]
    D, Dall = np.full(m, -np.inf), np.full((len(km.pairs), m), np.nan)
    rows = block_rows(km.K * km.n)
    for start, blk in blocks(H, label, rows):
        idx = start + np.flatnonzero(eligible[start:start + len(blk)])
        if idx.size:
            Dp = km.pair_distances(blk[idx - start].T)
            Dall[:, idx], D[idx] = Dp, Dp.min(axis=0)
        if progress:
            progress("scoring candidates", min(start + rows, m), m)
    return D, Dall


def ranked(models, H, energy, *, error, names, top, dtype, progress):
    """The shared part of rank and design --candidates with K models: (mats, model names,
    KModels, H, label, row names, norms, eligible, why, bottleneck D, every pair's D, the
    best rows, their entries)."""
    mats, model_names = load_models(models)
    n, d = mats[0].shape
    H, label = open_candidates(H, d, f"a query x, one entry per column of the models, d = {d}",
                               parameter_name("candidates"))
    row_names = None if names is None else load_names(names, H.shape[0])
    norms, eligible, why, _ = survey(H, label, MAX_BLOCK_ROWS, energy=energy)
    if not eligible.any():
        raise InputError(f"no row of {label} has ||x|| <= E = {energy:g} (the smallest norm is "
                         f"{float(norms.min()):.6g}); raise {parameter_name('energy')} or rescale "
                         "the candidates")
    km = KModels(mats, dtype=dtype)
    if progress:
        progress(f"scoring {int(eligible.sum()):,} candidate queries by their bottleneck")
    D, Dall = score_rows(km, H, label, eligible, progress)
    top_rows = best_rows(D, eligible, top)
    entries = []
    for i in top_rows:
        x = np.asarray(H[i], dtype=np.float64)
        pairs, worst, samples = at_query(mats, km.pairs, x, error)
        Dx = pairs[worst]["bhattacharyya_distance"]
        entries.append({"index": int(i), "name": None if row_names is None else row_names[i],
                        "hellinger_squared": -math.expm1(-Dx), "bhattacharyya_distance": Dx,
                        "bottleneck": {"i": pairs[worst]["i"], "j": pairs[worst]["j"]},
                        "predicted": samples["predicted"], "lower": samples["lower"],
                        "upper": samples["upper"], "query_norm": float(norms[i])})
    return (mats, model_names, km, H, label, row_names, norms, eligible, why, D, Dall, top_rows,
            entries)


OUT_COLUMNS = ("index", "name", "eligible", "query_norm", "hellinger_squared",
               "bhattacharyya_distance", "bottleneck_i", "bottleneck_j", "lower", "upper",
               "predicted")


def write_kway_scores(out, km: KModels, D, Dall, norms, eligible, names, top: dict,
                      error: float) -> None:
    """Every candidate in order, JSONL or CSV by the extension: its bottleneck (pair, H^2, D),
    the closest pair's lower count and the union-of-Chernoff upper count (`predicted` for the
    top rows)."""
    from bhtcli.maths.counts import lower_count
    from bhtcli.maths.kway import union_upper

    def row(i: int) -> dict:
        out = dict.fromkeys(OUT_COLUMNS)
        out.update(index=i, name=None if names is None else names[i], eligible=bool(eligible[i]),
                   query_norm=float(norms[i]))
        if eligible[i]:
            p = int(np.argmin(Dall[:, i]))
            Dm = np.zeros((km.K, km.K))
            for q, (a, b) in enumerate(km.pairs):
                Dm[a, b] = Dm[b, a] = Dall[q, i]
            out.update(hellinger_squared=-math.expm1(-D[i]), bhattacharyya_distance=float(D[i]),
                       bottleneck_i=km.pairs[p][0], bottleneck_j=km.pairs[p][1],
                       lower=lower_count(float(D[i]), error), upper=union_upper(Dm, error),
                       predicted=top[i]["predicted"] if i in top else None)
        return out
    write_rows(out, OUT_COLUMNS, map(row, range(D.shape[0])), parameter_name("out"))


def rank_kway(models, H, energy=None, *, error: float = 0.05, names=None,
              top: int = DEFAULT_TOP, out=None, dtype: str = "float64", progress=None,
              force: bool = False) -> RankResult:
    """Every row of H scored by its bottleneck among K models, the best `top` with their
    counts, every row written to `out` (JSONL or CSV); no search."""
    t0 = time.perf_counter()
    if out is not None:
        check_out(out, (*models, H, names), force)
    (mats, model_names, km, H, _, row_names, norms, eligible, _, D, Dall, top_rows,
     entries) = ranked(models, H, energy, error=error, names=names, top=top, dtype=dtype,
                       progress=progress)
    if out is not None:
        write_kway_scores(out, km, D, Dall, norms, eligible, row_names,
                          {e["index"]: e for e in entries}, error)
    best = int(top_rows[0])
    note = None
    if entries[0]["bhattacharyya_distance"] <= 0:
        note = ("no eligible candidate separates every pair of models (the bottleneck D is 0 at "
                "each); the design's own query may, see bht design")
    return RankResult("softmax", km.n, km.d, energy, None, error, int(H.shape[0]),
                      int(eligible.sum()), best, None if row_names is None else row_names[best],
                      entries, None if out is None else os.fspath(out), str(km.dtype), None,
                      time.perf_counter() - t0, distinguishable=note is None, note=note,
                      models=model_names)


def design_kway_candidates(models, H, energy, options, *, names=None, top: int = DEFAULT_TOP,
                           dtype: str = "float64", schedule: bool = False,
                           progress=None) -> DesignResult:
    """The best row of H for naming the true one of K models (largest bottleneck exponent),
    its K-way report, the best `top` rows, and the fraction of the designed optimum it reaches;
    with `schedule`, also the best schedule over the eligible rows (candidate_schedule).
    Values as checked by bhtcli.api (options: a DesignOptions).

    `energy` bounds the eligible rows (||h|| <= energy) and is the radius of the optimum;
    without it (None) the radius is the largest eligible norm."""
    t0 = time.perf_counter()
    error, starts, seed, search_space = options.error, options.starts, options.seed, options.search_space
    (mats, model_names, km, H, label, row_names, norms, eligible, why, D, Dall, top_rows,
     entries) = ranked(models, H, energy, error=error, names=names, top=top, dtype=dtype,
                       progress=progress)
    n, d = km.n, km.d
    if energy is None:
        radius, source = float(norms[eligible].max()), "largest eligible candidate norm"
        if radius == 0:
            raise InputError("every eligible candidate is the zero vector, which separates no two "
                             "softmax models; give non-zero candidate queries")
    else:
        radius, source = energy, "energy"
    best = int(top_rows[0])
    x = np.asarray(H[best], dtype=np.float64)
    with facts_beside(mats, model_names, radius, progress) as (job, watched):
        pairs, worst, samples = at_query(mats, km.pairs, x, error)
        Dbest = pairs[worst]["bhattacharyya_distance"]
        watched(f"designing the optimum over the ball of radius {radius:g} for comparison")
        carried = np.stack([np.asarray(H[i], dtype=np.float64) for i in top_rows[:EXTRA_STARTS]],
                           axis=1)
        found, _, _ = search_bottleneck(km, radius, search_space=search_space, starts=starts,
                                        seed=seed, progress=watched, carried=carried)
        facts = job.result()
    opt_pairs, opt_worst, opt_samples = at_query(mats, km.pairs, found.x, error)
    Dopt = opt_pairs[opt_worst]["bhattacharyya_distance"]
    optimum = {"hellinger_squared": -math.expm1(-Dopt), "predicted": opt_samples["predicted"],
               "lower": opt_samples["lower"], "upper": opt_samples["upper"],
               "query_norm": float(np.linalg.norm(found.x)), "on_boundary": found.on_boundary,
               "starts": found.starts, "iterations": found.iterations, "query": found.x.tolist()}
    fraction = min(-math.expm1(-Dbest) / optimum["hellinger_squared"], 1.0) \
        if optimum["hellinger_squared"] > 0 else None
    sched, printed = None, [[q["bhattacharyya_distance"] for q in pairs]]
    if schedule:
        sched, sched_D = candidate_schedule(mats, km, H, eligible, Dall, Dbest, error,
                                            samples["predicted"])
        printed.append(sched_D)
    cert = bottleneck_certificate(facts, km.pairs, error, Dbest, printed)
    from bhtcli.models.kway import SoftBottleneck
    from bhtcli.search.bottleneck import SHARPNESS
    f, g = SoftBottleneck(km, SHARPNESS[-1]).value_and_grad(x[:, None])
    residual = float(kkt_residuals(x[:, None], f, g, radius)[0])
    solver = solver_dict("candidates", 0, 0, km.passes, 0, [], residual, found.seconds,
                         pass_seconds=km.pass_seconds(), seconds=time.perf_counter() - t0,
                         message="the best of the given queries (no search at the query)")
    cand = {"count": int(H.shape[0]), "eligible": int(eligible.sum()),
            "ineligible": int(H.shape[0] - eligible.sum()), "why_ineligible": why,
            "best_index": best, "best_name": None if row_names is None else row_names[best],
            "top": entries, "radius": radius, "floor": None, "radius_from": source,
            "reachable_fraction": fraction, "optimum": optimum}
    return bottleneck_result(model_names, km, radius, error, x, float(norms[best]),
                             norms[best] >= radius * (1 - 1e-9), pairs, worst, samples, cert,
                             solver, schedule=sched, candidates=cand)


def candidate_schedule(mats, km: KModels, H, eligible: np.ndarray, Dall: np.ndarray,
                       single_d: float, error: float, single_predicted=None):
    """The best schedule over the eligible rows of H: the linear programme of docs/maths.md
    §8.3 with every eligible row as a column (§8.9); no column generation, so its value is the
    optimum over these rows and `dual_bound` equals it. Returns (report, per-pair D)."""
    from bhtcli.commands.kway import schedule_report
    from bhtcli.search.schedule import schedule_lp
    rows = np.flatnonzero(eligible)
    value, w, _ = schedule_lp(Dall[:, rows])
    used = w > SCHEDULE_MIN_WEIGHT
    w = w[used] / w[used].sum()
    queries = np.stack([np.asarray(H[i], dtype=np.float64) for i in rows[used]], axis=1)
    sched, per_pair = schedule_report(mats, km.pairs, queries, w, single_d, error, single_predicted)
    sched.update(indices=[int(i) for i in rows[used]], dual_bound=value, converged=True,
                 rounds=0, candidates=int(rows.size))
    return sched, per_pair
