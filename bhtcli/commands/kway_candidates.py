"""K models and given candidate queries: the best real query for naming the true model
(docs/kway.md, "Candidate queries"). Every row of H is scored by its bottleneck min_{i<j}
D_ij(h) (one product of the K stacked models per block of rows), the best rows get their
counts, and the best one gets the K-way design's full report, next to the designed optimum
over the ball (the bottleneck search, with the best candidates among its starts)."""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from bhtcli.commands.candidates import (DEFAULT_TOP, MAX_BLOCK_ROWS, best_rows, block_rows,
                                        blocks, load_names, open_candidates, survey)
from bhtcli.commands.kway import (at_query, kway_certificate, load_models, pair_facts,
                                  search_bottleneck)
from bhtcli.errors import InputError, parameter_name
from bhtcli.io.validation import check_dtype, check_energy, check_error, check_seed, check_starts
from bhtcli.models.kway import KModels
from bhtcli.results import KwayDesignResult
from bhtcli.search.kkt import kkt_residuals
from bhtcli.search.result import solver_dict

EXTRA_STARTS = 4      # the best candidates among the optimum's starting points


def score_rows(km: KModels, H, label: str, eligible: np.ndarray, progress=None):
    """(bottleneck D, bottleneck pair index) of every row of H; ineligible rows get -inf."""
    m = H.shape[0]
    D, which = np.full(m, -np.inf), np.zeros(m, dtype=np.int64)
    rows = block_rows(km.K * km.n)
    for start, blk in blocks(H, label, rows):
        sl = slice(start, start + len(blk))
        ok = eligible[sl]
        if ok.any():
            Dp = km.pair_distances(blk[ok].T)
            D[sl][ok] = Dp.min(axis=0)
            which[sl][ok] = Dp.argmin(axis=0)
        if progress:
            progress("scoring candidates", min(start + rows, m), m)
    return D, which


def design_kway_candidates(models, H, energy=None, *, error: float = 0.05, names=None,
                           top: int = DEFAULT_TOP, starts=None, seed: int = 0,
                           dtype: str = "float64", search_space=None,
                           progress=None) -> KwayDesignResult:
    """The best row of H for naming the true one of K models (largest bottleneck exponent),
    its K-way report, the best `top` rows, and the fraction of the designed optimum it reaches.

    `energy` bounds the eligible rows (||h|| <= energy) and is the radius of the optimum;
    without it the radius is the largest eligible norm."""
    t0 = time.perf_counter()
    error, seed, dtype = check_error(error), check_seed(seed), check_dtype(dtype)
    starts = None if starts is None else check_starts(starts)
    from bhtcli.commands.design import check_search_space
    from bhtcli.io.validation import check_top
    top, search_space = check_top(top), check_search_space(search_space)
    energy = None if energy is None else check_energy(energy)
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
    if energy is None:
        radius, source = float(norms[eligible].max()), "largest eligible candidate norm"
        if radius == 0:
            raise InputError("every eligible candidate is the zero vector, which separates no two "
                             "softmax models; give non-zero candidate queries")
    else:
        radius, source = energy, "energy"
    facts = pair_facts(mats, model_names, radius)
    km = KModels(mats, dtype=dtype)
    if progress:
        progress(f"scoring {int(eligible.sum()):,} candidate queries by their bottleneck")
    D, which = score_rows(km, H, label, eligible, progress)
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
    best = int(top_rows[0])
    x = np.asarray(H[best], dtype=np.float64)
    pairs, worst, samples = at_query(mats, km.pairs, x, error)
    Dbest = pairs[worst]["bhattacharyya_distance"]
    if progress:
        progress(f"designing the optimum over the ball of radius {radius:g} for comparison")
    carried = np.stack([np.asarray(H[i], dtype=np.float64) for i in top_rows[:EXTRA_STARTS]], axis=1)
    found, _, _ = search_bottleneck(km, radius, search_space=search_space, starts=starts,
                                    seed=seed, progress=progress, carried=carried)
    opt_pairs, opt_worst, opt_samples = at_query(mats, km.pairs, found.x, error)
    Dopt = opt_pairs[opt_worst]["bhattacharyya_distance"]
    optimum = {"hellinger_squared": -math.expm1(-Dopt), "predicted": opt_samples["predicted"],
               "lower": opt_samples["lower"], "upper": opt_samples["upper"],
               "query_norm": float(np.linalg.norm(found.x)), "on_boundary": found.on_boundary,
               "starts": found.starts, "iterations": found.iterations, "query": found.x.tolist()}
    fraction = min(-math.expm1(-Dbest) / optimum["hellinger_squared"], 1.0) \
        if optimum["hellinger_squared"] > 0 else None
    cert = kway_certificate(facts, km.pairs, error, Dbest)
    from bhtcli.models.kway import SoftBottleneck
    from bhtcli.search.kway import SHARPNESS
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
    i, j = km.pairs[worst]
    result = KwayDesignResult(
        "softmax", n, d, radius, error, model_names, x.tolist(), float(norms[best]),
        bool(norms[best] >= radius * (1 - 1e-9)), pairs[worst]["hellinger_squared"], Dbest,
        {"i": i, "j": j}, pairs, samples, cert, solver, dtype=str(km.dtype))
    return replace(result, candidates=cand)
