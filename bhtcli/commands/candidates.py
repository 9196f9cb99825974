"""Queries an auditor can send: score given candidate queries, rank them, compare with the optimum.

An auditor cannot set the final hidden state x: they send prompts, and each prompt's hidden
state (computed with an open copy of the reference model) is one candidate. `rank` scores
every row of a candidate matrix H (m x d; for leverage models m x n weight vectors s) by
H^2 = 1 - sum sqrt(p q) and writes them all; `design_candidates` (`design --candidates`) also
runs the usual search over the ball and reports the best candidate with the usual design
report and

    reachable_fraction = H^2(best eligible candidate) / H^2(designed optimum),

the optimum taken over the ball of radius E (or, without --energy, the largest eligible
candidate norm), searched from the usual starts plus the best candidates themselves, so the
fraction is at most 1 (docs/maths.md §9).

The problem is two models or a set of K (docs/kway.md, "Candidate queries"): every row is
scored by its bottleneck min_{i<j} D_ij over the pairs of models (two models: the pair's D),
the best rows get their counts, and the best one the design report of its problem (K models:
the K-way report, the bottleneck search for the optimum, optionally the best schedule over
the eligible rows).

H is streamed in blocks of rows: a block of k candidates costs one product of the stacked
model matrix with a d x k block, and k is chosen so that the n x k score blocks stay near
BLOCK_ENTRIES numbers: no m x n array is formed. With dtype="float32" the products run in
float32; for two softmax models the best candidates (the top list and a margin of
POOL_MARGIN more) are then re-scored in float64, and every reported number comes from those
float64 scores.
"""
from __future__ import annotations

import csv
import json
import math
import os
import time
from dataclasses import dataclass, replace

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_pair, read_array
from bhtcli.io.write import atomic_file, check_output_path
from bhtcli.io.text import read_text
from bhtcli.io.validation import MAX_ENTRY
from bhtcli.models.spec import DesignOptions, ModelSpec
from bhtcli.maths.counts import lower_count, query_counts, upper_count
from bhtcli.maths.divergences import Tilt
from bhtcli.results import RankResult, json_safe

DEFAULT_TOP = 10
BLOCK_ENTRIES = 2_000_000     # n x k numbers per block of k candidates (~16 MB per array)
MAX_BLOCK_ROWS = 4096
POOL_MARGIN = 10              # float32 scoring: re-score top + this many in float64
EXTRA_STARTS = 4              # the best candidates also start the search for the optimum
NORM_RTOL = 1e-9              # a candidate with ||x|| <= E (1 + 1e-9) is eligible
OUT_FORMATS = (".jsonl", ".csv")
SCHEDULE_MIN_WEIGHT = 1e-9    # a row below this share of the LP's schedule is dropped (as best_schedule)


@dataclass
class Scores:
    """Every candidate's score (O(m P) numbers, never m x n)."""

    D: np.ndarray             # the bottleneck min over pairs of D (two models: float64 re-scored)
    Dall: np.ndarray | None   # every pair's D (P x m, NaN where not eligible)
    norms: np.ndarray         # ||x|| (leverage: ||s||)
    eligible: np.ndarray      # inside the budget (and, for leverage, no zero entry)
    why_not: str | None       # one line on why rows are not eligible


# ---------------------------------------------------------------- inputs
def open_candidates(spec, width: int, what: str, option: str | None = None):
    """The candidate matrix as stored (a memory map for .npy/.safetensors), shape-checked only.

    Rows are converted and checked for NaN block by block while they are scored. `option`
    names it in messages before the path (None: the path alone, as for a positional H).
    """
    if isinstance(spec, (str, os.PathLike)):
        label = f"{option} {os.fspath(spec)}" if option else os.fspath(spec)
    else:
        label = option or "H"
    arr = read_array(spec, label) if isinstance(spec, (str, os.PathLike)) else np.asarray(spec)
    if arr.dtype == object or (arr.dtype.kind not in "iuf" and arr.dtype.name != "bfloat16"):
        raise InputError(f"{label} has dtype {arr.dtype}, expected real numbers")
    if arr.ndim == 1 and arr.size == width:
        arr = arr.reshape(1, width)
    if arr.ndim != 2:
        raise InputError(f"{label} has shape {arr.shape}, expected an m x {width} matrix "
                         f"(one candidate per row: {what})")
    if arr.shape[0] == 0:
        raise InputError(f"{label} is empty (shape {arr.shape}); it needs at least one candidate row")
    if arr.shape[1] != width:
        hint = " (it looks transposed: one candidate per row)" if arr.shape[0] == width else ""
        raise InputError(f"{label} has {arr.shape[1]} columns but each candidate must have {width} "
                         f"entries ({what}){hint}")
    return arr, label


def load_names(path, m: int, option: str | None = None) -> list:
    """One name per candidate: the lines of a UTF-8 text file (exactly m lines)."""
    option = parameter_name("names") if option is None else option
    _, text = read_text(path, "a text file, one name per line", label=f"{option} {path}")
    names = text.splitlines()
    if len(names) != m:
        raise InputError(f"{option} {path} has {len(names):,} lines but there are {m:,} candidates; "
                         "give exactly one name per candidate row, in the same order")
    return names


def block_rows(n: int) -> int:
    """Candidates per block: about BLOCK_ENTRIES / n (at least 1, at most 4096)."""
    return max(1, min(MAX_BLOCK_ROWS, BLOCK_ENTRIES // max(n, 1)))


def blocks(H, label: str, rows: int):
    """(start, float64 block) over H, each block checked for NaN/Inf (the row is named)."""
    for start in range(0, H.shape[0], rows):
        blk = np.asarray(H[start:start + rows], dtype=np.float64)
        bad = ~(np.abs(blk) <= MAX_ENTRY).all(axis=1)          # NaN fails the comparison too
        if bad.any():
            row = start + int(np.argmax(bad))
            if np.isfinite(blk[row - start]).all():
                raise InputError(f"{label}: row {row} (0-based) has values beyond {MAX_ENTRY:g}, whose "
                                 "norm overflows float64; rescale the candidates")
            raise InputError(f"{label}: row {row} (0-based) contains NaN or Inf; fix or drop that row")
        yield start, blk


# ---------------------------------------------------------------- scoring
def survey(H, label: str, rows: int, energy: float | None = None, box=None, leverage: bool = False):
    """First pass over H (m x d numbers, no model product): NaN check, norms, eligibility.

    Returns (norms, eligible, why_not, s2_range) with s2_range the (min, max) of s_i^2 over
    each row (leverage only, else None).
    """
    m = H.shape[0]
    norms, eligible = np.empty(m), np.ones(m, dtype=bool)
    lo = hi = None
    if leverage:
        lo, hi = np.empty(m), np.empty(m)
    for start, blk in blocks(H, label, rows):
        sl = slice(start, start + len(blk))
        norms[sl] = np.linalg.norm(blk, axis=1)
        if leverage:
            s2 = blk * blk
            lo[sl], hi[sl] = s2.min(axis=1), s2.max(axis=1)
    reasons = []
    if leverage:
        zero = lo <= 0
        if zero.any():
            reasons.append("a zero entry")
        eligible &= ~zero
        if box is not None:
            C, c = box
            out = (lo < c * (1 - NORM_RTOL)) | (hi > C * (1 + NORM_RTOL))
            if (out & ~zero).any():
                reasons.append(f"s_i^2 outside [{c:g}, {C:g}]")
            eligible &= ~out
    elif energy is not None:
        eligible = norms <= energy * (1 + NORM_RTOL)
        if not eligible.all():
            reasons.append(f"||x|| > E = {energy:g}")
    return norms, eligible, (" or ".join(reasons) or None), (None if lo is None else (lo, hi))


def best_rows(D: np.ndarray, eligible: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k eligible rows with the largest D, best first (ties: lower index)."""
    idx = np.flatnonzero(eligible)
    if idx.size > k:
        part = np.argpartition(-D[idx], k - 1)[:k]
        threshold = D[idx[part]].min()
        idx = idx[D[idx] >= threshold]      # keep ties at the cut so the order is stable
    order = np.lexsort((idx, -D[idx]))
    return idx[order][:k]


# ---------------------------------------------------------------- the shared pipeline
@dataclass
class _Ranked:
    model: str
    n: int
    d: int
    mats: list                # the models' matrices (two models: [A, B])
    model_names: list | None  # K models (given as a set): their names; None for two models
    H: np.ndarray
    pair: object              # SoftmaxPair, LeveragePair or KModels
    scores: Scores
    names: list | None
    energy: float | None
    floor: float | None
    error: float
    readout: object | None
    t0: float
    box_source: str = "energy"
    top_rows: np.ndarray = None
    top: list = None


def _rank(models, H, spec: ModelSpec, *, kway, error, names, top, rows, progress,
          h_option=None) -> _Ranked:
    t0 = time.perf_counter()
    model, energy, floor = spec.family, spec.energy, spec.floor
    leverage = model == "leverage"
    if kway:
        from bhtcli.commands.kway import load_models
        mats, model_names = load_models(models)
    else:
        mats, model_names = list(load_pair(*models, dtype=np.float64 if leverage else None)), None
    n, d = mats[0].shape
    what = (f"a weight vector s, one entry per row of A, n = {n}" if leverage else
            f"a query x, one entry per column of {'the models' if kway else 'A'}, d = {d}")
    H, label = open_candidates(H, n if leverage else d, what, h_option)
    names = None if names is None else load_names(names, H.shape[0])
    readout = None if leverage else spec.readout(n) if not kway else \
        (spec.kway_readouts(n) if spec.links is not None else None)   # K models: KReadouts
    box = spec.box if leverage and energy is not None else None
    norms, eligible, why, s2 = survey(H, label, (rows or block_rows(n)) if leverage else MAX_BLOCK_ROWS,
                                      energy=energy, box=box, leverage=leverage)
    if not eligible.any():
        raise InputError(_none_eligible(label, model, why, norms, energy))
    if leverage:
        from bhtcli.models.leverage import LeveragePair
        pair = LeveragePair(*mats)
    elif kway:
        from bhtcli.models.kway import KModels
        pair = KModels(mats, dtype=spec.dtype, readouts=readout)
    else:
        from bhtcli.models.softmax import SoftmaxPair
        pair = SoftmaxPair(*mats, readout=readout, dtype=spec.dtype)
    if progress:
        progress(f"scoring {int(eligible.sum()):,} candidate "
                 f"{'weight vectors' if leverage else 'queries'}{' by their bottleneck' * kway}")
    r = _Ranked(model, n, d, mats, model_names, H, pair, Scores(np.zeros(H.shape[0]), None, norms,
                eligible, why), names, energy, floor, error, readout, t0)
    _score(r, rows or block_rows(n * (len(mats) if kway else 1)), top, progress)
    if leverage and box is None:    # the box of the comparison: the candidates' own range of s_i^2
        r.energy, r.floor = float(s2[1][eligible].max()), float(s2[0][eligible].min())
        r.box_source = "range of the eligible candidates' s_i^2"
    elif not leverage and energy is None:
        r.box_source = "largest eligible candidate norm"
    r.top_rows, r.top = best_rows(r.scores.D, eligible, top), []
    for k, i in enumerate(r.top_rows):
        if progress and k % 10 == 0:
            progress("exact counts of the best candidates", k, len(r.top_rows))
        r.top.append(_entry(r, int(i)))
    return r


def _score(r: _Ranked, rows: int, keep: int, progress=None) -> None:
    """The bottleneck D and every pair's D at each eligible row of H; two softmax models scored
    in float32: the best re-scored in float64."""
    s, m = r.scores, r.scores.D.shape[0]
    idx = np.flatnonzero(s.eligible)         # blocks: of eligible rows (K models: of rows)
    parts = ([idx[a:a + rows] for a in range(0, idx.size, rows)] if r.model_names is None else
             [a + np.flatnonzero(s.eligible[a:a + rows]) for a in range(0, m, rows)])
    done = 0
    for k, part in enumerate(p for p in parts if p.size):
        Dp = _distances(r, np.asarray(r.H[part], dtype=np.float64).T)
        if s.Dall is None:
            s.Dall = np.full((Dp.shape[0], m), np.nan)
        s.Dall[:, part], s.D[part], done = Dp, Dp.min(axis=0), done + part.size
        if progress and (k % 50 == 49 or done == idx.size):
            progress("scoring candidates", done, idx.size)
    if r.model_names is None and r.model == "softmax" and r.pair.dtype != np.float64:
        for i in best_rows(s.D, s.eligible, keep + POOL_MARGIN):
            s.D[i] = _distance_at(r, np.asarray(r.H[i], dtype=np.float64))


def _distances(r: _Ranked, X: np.ndarray) -> np.ndarray:
    """Every pair's D (P x k) at the columns of X."""
    if r.model_names is not None:
        return r.pair.pair_distances(X)
    if r.model == "leverage":
        return np.array([[_distance_at(r, s) for s in X.T]])
    return np.maximum(Tilt.from_logits(*r.pair.logits(X)).bhattacharyya_distance(), 0.0)[None]


def _tilt(r: _Ranked, x):
    """The tilt of two models at the query x (leverage: the weight vector s), in float64."""
    if r.model == "leverage":
        return r.pair.tilt(-np.log(x * x))
    from bhtcli.models.softmax import logits_at
    return Tilt.from_logits(*logits_at(*r.mats, x, r.readout))


def _distance_at(r: _Ranked, x) -> float:
    return max(float(_tilt(r, x).bhattacharyya_distance()), 0.0)


def _none_eligible(label, model, why, norms, energy) -> str:
    if model == "leverage":
        return (f"no row of {label} is an admissible weight vector ({why}); "
                "every s_i must be non-zero and FLOOR <= s_i^2 <= ENERGY")
    return (f"no row of {label} has ||x|| <= E = {energy:g} (the smallest norm is "
            f"{float(norms.min()):.6g}); raise {parameter_name('energy')} or rescale the candidates")


def _entry(r: _Ranked, i: int) -> dict:
    """Row i of the top list, with its counts from float64 scores (K models: at its bottleneck
    pair, which it names)."""
    x, extra = np.asarray(r.H[i], dtype=np.float64), {}
    if r.model_names is None:
        D, tilt = float(r.scores.D[i]), _tilt(r, x)
        c = query_counts(tilt, max(float(tilt.bhattacharyya_distance()), 0.0), r.error)
        c = {"predicted": c.predicted, "lower": c.lower, "upper": c.upper}
    else:
        from bhtcli.commands.kway import at_query
        pairs, worst, c = at_query(r.mats, r.pair.pairs, x, r.error, r.pair.readouts)
        D, extra = pairs[worst]["bhattacharyya_distance"], {
            "bottleneck": {"i": pairs[worst]["i"], "j": pairs[worst]["j"]}}
    return {"index": i, "name": None if r.names is None else r.names[i],
            "hellinger_squared": -math.expm1(-D), "bhattacharyya_distance": D, **extra,
            "predicted": c["predicted"], "lower": c["lower"], "upper": c["upper"],
            "query_norm": float(r.scores.norms[i])}


# ---------------------------------------------------------------- rank
def rank(models, H, spec: ModelSpec = ModelSpec(), *, kway: bool = False, error: float = 0.05,
         names=None, top: int = DEFAULT_TOP, out=None, block_rows: int | None = None,
         progress=None, force: bool = False) -> RankResult:
    """Score every candidate query (a row of H) and write all of them to `out`.

    Parameters
    ----------
    models : sequence of array_like or path
        The two n x d models (A, B), or with `kway` the set of K models (each top row then
        names its bottleneck pair).
    H : array_like or path
        m x d candidate queries x, one per row (leverage models: m x n weight vectors s),
        any matrix format; streamed in blocks of rows.
    spec : ModelSpec
        The model family and its settings (``ModelSpec.build(..., need_energy=False)``). Its
        energy, optional, is the budget: rows with ||x|| > energy are not eligible (leverage:
        the box floor <= s_i^2 <= energy). Without it every row is eligible.
    error : float
        Target error alpha of the counts, checked by the caller (default 0.05).
    names : path, optional
        A text file with one name per candidate (e.g. the prompts).
    top : int
        How many of the best eligible candidates get full counts (default 10).
    out : path, optional
        FILE.jsonl or FILE.csv: one record per candidate, in the order of H (written atomically).
        It must not be one of the inputs (the models, H, `names`, the biases) unless `force`.
    block_rows : int, optional
        Candidates per block (default: about 2e6 / n).
    progress : callable, optional
        Called with short status strings.

    Returns
    -------
    RankResult

    Raises
    ------
    InputError
        Bad matrices, names or options; no eligible candidate; an unknown output format.

    """
    if out is not None:
        check_out(out, (*models, H, names, spec.bias_a, spec.bias_b), force)
    r = _rank(models, H, spec, kway=kway, error=error, names=names, top=top, rows=block_rows,
              progress=progress, h_option=parameter_name("candidates") if kway else None)
    if out is not None:
        write_scores(out, r)
    best = int(r.top_rows[0])
    given = r.box_source == "energy"        # the budget the user gave (not one derived from H)
    note = None if r.top[0]["bhattacharyya_distance"] > 0 else _why_inseparable(r)
    return RankResult(r.model, r.n, r.d, r.energy if given else None, r.floor if given else None,
                      r.error, int(r.H.shape[0]),
                      int(r.scores.eligible.sum()), best, None if r.names is None else r.names[best],
                      r.top, None if out is None else os.fspath(out),
                      "float64" if r.model == "leverage" else str(r.pair.dtype),
                      None if r.readout is None else r.readout.description,
                      time.perf_counter() - r.t0, distinguishable=note is None, note=note,
                      models=r.model_names)


def _why_inseparable(r: _Ranked) -> str:
    """Why H^2 = 0 at every eligible candidate: the same model (design's rule), or the rows."""
    if r.model_names is not None:
        return ("no eligible candidate separates every pair of models (the bottleneck D is 0 at "
                "each); the design's own query may, see bht design")
    if r.model == "softmax":
        from bhtcli.analysis.facts import pair_base
        same = pair_base(*r.mats, r.pair.G, r.readout).same
        if same:
            return same
    return ("H^2 = 0 at every eligible candidate: none of these queries tells A and B apart "
            "(zero queries, or directions in which A and B agree)")


def check_out(out, inputs, force: bool) -> None:
    """`out` of rank (any K): a new *.jsonl or *.csv file that is none of the inputs."""
    option = parameter_name("out")
    if os.path.splitext(os.fspath(out))[1].lower() not in OUT_FORMATS:
        raise InputError(f"{option} {out}: name the file *.jsonl (one JSON object per candidate) or *.csv")
    check_output_path(os.fspath(out), option, inputs=inputs, force=force)


COLUMNS = ("index", "name", "eligible", "query_norm", "hellinger_squared", "bhattacharyya_distance",
           "lower", "upper", "predicted")


def write_scores(out, r: _Ranked) -> None:
    """Every candidate, in order: JSONL or CSV by the extension (`predicted` for the top rows).
    K models: also the bottleneck pair, and the union-of-Chernoff upper count."""
    from bhtcli.maths.kway import union_upper
    s, top, kway = r.scores, {e["index"]: e for e in r.top}, r.model_names is not None
    columns = COLUMNS[:6] + ("bottleneck_i", "bottleneck_j") * kway + COLUMNS[6:]

    def row(i: int) -> dict:
        ok, D = bool(s.eligible[i]), float(s.D[i])
        out = dict.fromkeys(columns)
        out.update(index=i, name=None if r.names is None else r.names[i], eligible=ok,
                   query_norm=float(s.norms[i]))
        if not ok:
            return out
        out.update(hellinger_squared=-math.expm1(-D), bhattacharyya_distance=D,
                   lower=lower_count(D, r.error), upper=upper_count(D, r.error),
                   predicted=top[i]["predicted"] if i in top else None)
        if kway:
            (a, b), Dm = r.pair.pairs[int(np.argmin(s.Dall[:, i]))], np.zeros((r.pair.K,) * 2)
            for q, (p, t) in enumerate(r.pair.pairs):
                Dm[p, t] = Dm[t, p] = s.Dall[q, i]
            out.update(bottleneck_i=a, bottleneck_j=b, upper=union_upper(Dm, r.error))
        return out
    write_rows(out, columns, map(row, range(s.D.shape[0])), parameter_name("out"))


def write_rows(out, columns, rows, option: str | None = None) -> None:
    """`rows` (dicts with the keys `columns`), in order, to `out` (written atomically): one JSON
    object a line (*.jsonl), or CSV with a header (booleans true/false, floats as repr)."""
    jsonl = os.fspath(out).lower().endswith(".jsonl")
    with atomic_file(os.fspath(out), "w", option=option, encoding="utf-8", newline="") as fh:
        writer = None if jsonl else csv.writer(fh)
        if writer:
            writer.writerow(columns)
        for row in rows:
            if jsonl:
                fh.write(json.dumps(json_safe(row), allow_nan=False) + "\n")
            else:
                writer.writerow(["" if row[k] is None else _cell(row[k]) for k in columns])


def _cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return v


# ---------------------------------------------------------------- design --candidates
def design_candidates(models, H, spec: ModelSpec = ModelSpec(),
                      options: DesignOptions = DesignOptions(), *, kway: bool = False, names=None,
                      top: int = DEFAULT_TOP, block_rows: int | None = None,
                      schedule: bool = False, progress=None):
    """The best of the candidate queries (rows of H), its design report and the reachable fraction.

    Parameters are those of :func:`rank`, with the target error, starts and seed of the search
    for the optimum in `options` (the usual design, over the ball of radius `energy`, or the largest eligible
    candidate norm without it; leverage: the box, or the candidates' range of s_i^2; K models:
    the bottleneck search). K models with `schedule`: also the best schedule over the eligible
    rows (candidate_schedule).

    Returns
    -------
    DesignResult
        The usual report at the best eligible candidate (its row as `query`), with
        `candidates` = {count, eligible, ineligible, why_ineligible, best_index, best_name,
        top, radius, floor, radius_from, reachable_fraction, optimum}: `radius` is the E of
        the comparison (leverage: the box's upper end, `floor` its lower end).
    """
    r = _rank(models, H, spec, kway=kway, error=options.error, names=names, top=top,
              rows=block_rows, progress=progress, h_option=parameter_name("candidates"))
    best = int(r.top_rows[0])
    x = np.asarray(r.H[best], dtype=np.float64)
    if r.model == "leverage":
        (result, optimum), radius, box_floor = _leverage_reports(r, x, options, progress), r.energy, r.floor
    else:
        radius, box_floor = _radius(r), None
        reports = _kway_reports if kway else _softmax_reports
        result, optimum = reports(r, x, radius, options, schedule, progress)
    h2, opt = r.top[0]["hellinger_squared"], optimum["hellinger_squared"]
    fraction = min(h2 / opt, 1.0) if opt > 0 else None     # opt = 0: the same model, nothing to reach
    eligible = int(r.scores.eligible.sum())
    cand = {"count": int(r.H.shape[0]), "eligible": eligible,
            "ineligible": int(r.H.shape[0]) - eligible, "why_ineligible": r.scores.why_not,
            "best_index": best, "best_name": None if r.names is None else r.names[best],
            "top": r.top, "radius": radius, "floor": box_floor, "radius_from": r.box_source,
            "reachable_fraction": fraction, "optimum": optimum}
    return replace(result, candidates=cand)


def _radius(r: _Ranked) -> float:
    """The radius of the comparison: the energy, or the largest eligible candidate norm."""
    if r.energy is not None:
        return r.energy
    radius = float(r.scores.norms[r.scores.eligible].max())
    if radius == 0:
        raise InputError("every eligible candidate is the zero vector, which separates no two "
                         "softmax models; give non-zero candidate queries")
    return radius


def _carried(r: _Ranked) -> np.ndarray:
    """The best candidates (d x EXTRA_STARTS), climbing too in the search for the optimum."""
    return np.stack([np.asarray(r.H[i], dtype=np.float64) for i in r.top_rows[:EXTRA_STARTS]], axis=1)


def _optimum(D: float, counts: dict, found) -> dict:
    return {"hellinger_squared": -math.expm1(-D), "predicted": counts["predicted"],
            "lower": counts["lower"], "upper": counts["upper"],
            "query_norm": float(np.linalg.norm(found.x)), "on_boundary": found.on_boundary,
            "starts": found.starts, "iterations": found.iterations, "query": found.x.tolist()}


def _softmax_reports(r: _Ranked, x, radius, options, schedule, progress):
    from bhtcli.commands.report import ReportContext, report, same_model_report
    from bhtcli.analysis.facts import analyse_pair
    from bhtcli.search.entry import maximize
    from bhtcli.search.kkt import kkt_state
    from bhtcli.search.result import solver_dict
    pair, starts = r.pair, options.starts
    facts = analyse_pair(*r.mats, pair.G, radius, pair.readout)
    ctx = ReportContext(*r.mats, pair, radius, r.error, facts, r.t0)
    on_boundary, residual = kkt_state(pair, x, radius)
    solver = solver_dict("candidates", 0, 0, pair.passes, 0, [], residual, 0.0,
                         message="the best of the given queries (no search at the query)")
    if not facts.distinguishable:
        return same_model_report(ctx, solver), {"hellinger_squared": 0.0, "predicted": None,
                                                "query_norm": 0.0, "on_boundary": False}
    if progress:
        progress(f"designing the optimum over the ball of radius {radius:g} for comparison")
    # design's own search (a number of starts asks for the full search with exactly that many),
    # the best candidates climbing too
    found = maximize(pair, radius, "auto" if starts is None else "full", starts=starts,
                     seed=options.seed, progress=progress, carried=_carried(r))
    tilt = _tilt(r, found.x)
    D = max(float(tilt.bhattacharyya_distance()), 0.0)
    counts = query_counts(tilt, D, r.error)
    optimum = _optimum(D, {"predicted": counts.predicted, "lower": counts.lower,
                           "upper": counts.upper}, found)
    return report(ctx, x, on_boundary, dict(solver, search_seconds=found.seconds)), optimum


def _kway_reports(r: _Ranked, x, radius, options, schedule, progress):
    """The K-way report at the best row x, and the optimum of the bottleneck search over the
    ball (the best rows among its starts)."""
    from bhtcli.analysis.facts import bottleneck_certificate
    from bhtcli.commands.kway import at_query, bottleneck_result, facts_beside
    from bhtcli.models.kway import SoftBottleneck
    from bhtcli.search.bottleneck import SHARPNESS
    from bhtcli.search.entry import maximize
    from bhtcli.search.kkt import kkt_residuals
    from bhtcli.search.result import solver_dict
    km, error, norm = r.pair, r.error, float(r.scores.norms[r.top_rows[0]])
    with facts_beside(r.mats, r.model_names, radius, progress, km.readouts) as (job, watched):
        pairs, worst, samples = at_query(r.mats, km.pairs, x, error, km.readouts)
        Dbest = pairs[worst]["bhattacharyya_distance"]
        watched(f"designing the optimum over the ball of radius {radius:g} for comparison")
        found = maximize(km, radius, options.search_space, starts=options.starts,
                         seed=options.seed, progress=watched, carried=_carried(r))
        facts = job.result()
    opt_pairs, opt_worst, opt_samples = at_query(r.mats, km.pairs, found.x, error, km.readouts)
    optimum = _optimum(opt_pairs[opt_worst]["bhattacharyya_distance"], opt_samples, found)
    sched, printed = None, [[q["bhattacharyya_distance"] for q in pairs]]
    if schedule:
        sched, sched_D = candidate_schedule(r.mats, km, r.H, r.scores.eligible, r.scores.Dall,
                                            Dbest, error, samples["predicted"])
        printed.append(sched_D)
    cert = bottleneck_certificate(facts, km.pairs, error, Dbest, printed)
    f, g = SoftBottleneck(km, SHARPNESS[-1]).value_and_grad(x[:, None])
    residual = float(kkt_residuals(x[:, None], f, g, radius)[0])
    solver = solver_dict("candidates", 0, 0, km.passes, 0, [], residual, found.seconds,
                         pass_seconds=km.pass_seconds(), seconds=time.perf_counter() - r.t0,
                         message="the best of the given queries (no search at the query)")
    return bottleneck_result(r.model_names, km, radius, error, x, norm, norm >= radius * (1 - 1e-9),
                             pairs, worst, samples, cert, solver, schedule=sched), optimum


def candidate_schedule(mats, km, H, eligible: np.ndarray, Dall: np.ndarray,
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
    sched, per_pair = schedule_report(mats, km.pairs, queries, w, single_d, error, single_predicted,
                                      km.readouts)
    sched.update(indices=[int(i) for i in rows[used]], dual_bound=value, converged=True,
                 rounds=0, candidates=int(rows.size))
    return sched, per_pair


def _leverage_reports(r: _Ranked, s, options, progress):
    from bhtcli.commands.leverage_design import design_leverage, leverage_report_for_query
    C, c = r.energy, r.floor
    report = leverage_report_for_query(*r.mats, s, ModelSpec.build("leverage", C, c), r.error)
    if progress:
        progress(f"designing the optimum over the box {c:g} <= s_i^2 <= {C:g} for comparison")
    opt = design_leverage(*r.mats, ModelSpec.build("leverage", C, c),
                          DesignOptions(r.error, options.starts, options.seed))
    optimum = {"hellinger_squared": opt.hellinger_squared, "predicted": opt.samples["predicted"],
               "lower": opt.samples["lower"], "upper": opt.samples["upper"],
               "query_norm": opt.query_norm, "on_boundary": opt.on_boundary,
               "starts": opt.solver.get("starts"), "iterations": opt.solver.get("iterations"),
               "query": opt.query}
    if r.top[0]["hellinger_squared"] > opt.hellinger_squared:
        # the box search did not reach this candidate: the candidate is the better optimum
        optimum = dict(optimum, hellinger_squared=r.top[0]["hellinger_squared"],
                       predicted=r.top[0]["predicted"], lower=r.top[0]["lower"],
                       upper=r.top[0]["upper"], query_norm=r.top[0]["query_norm"], query=list(map(float, s)),
                       note="the search's best was below the best candidate, which is reported instead")
    return report, optimum
