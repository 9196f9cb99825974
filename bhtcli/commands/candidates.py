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

H is streamed in blocks of rows: a block of k candidates costs one product of the stacked
2n x d model matrix with a d x k block, and k is chosen so that the n x k score blocks stay
near BLOCK_ENTRIES numbers: no m x n array is formed. With dtype="float32" the products
run in float32; the best candidates (the top list and a margin of POOL_MARGIN more) are then
re-scored in float64, and every reported number comes from those float64 scores.
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


@dataclass
class Scores:
    """Every candidate's score (O(m) numbers, never m x n)."""

    D: np.ndarray             # Bhattacharyya distance (float64 re-scored where `exact`)
    norms: np.ndarray         # ||x|| (leverage: ||s||)
    eligible: np.ndarray      # inside the budget (and, for leverage, no zero entry)
    exact: np.ndarray         # D recomputed in float64 at this row
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


def score_softmax(pair, A, B, H, label: str, norms, eligible, why, keep: int,
                  rows: int | None = None, progress=None) -> Scores:
    """D at every eligible row of H (as a query x); float64 re-scoring of the best."""
    from bhtcli.models.softmax import logits_at
    m = H.shape[0]
    rows = block_rows(pair.n) if rows is None else rows
    D = np.zeros(m)
    idx = np.flatnonzero(eligible)
    for k, start in enumerate(range(0, idx.size, rows)):
        part = idx[start:start + rows]
        X = np.asarray(H[part], dtype=np.float64).T
        c, delta = pair.logits(X)
        D[part] = np.maximum(Tilt.from_logits(c, delta).bhattacharyya_distance(), 0.0)
        if progress and (k % 50 == 49 or start + part.size == idx.size):
            progress("scoring candidates", start + part.size, idx.size)
    exact = np.zeros(m, dtype=bool)
    if pair.dtype != np.float64:          # re-score the best in float64, then re-rank them
        for i in best_rows(D, eligible, keep + POOL_MARGIN):
            x = np.asarray(H[i], dtype=np.float64)
            D[i] = max(float(Tilt.from_logits(*logits_at(A, B, x, pair.readout)).bhattacharyya_distance()), 0.0)
            exact[i] = True
    else:
        exact[:] = True
    return Scores(D, norms, eligible, exact, why)


def score_leverage(pair, H, norms, eligible, why, progress=None) -> Scores:
    """D at every eligible row of H as a weight vector s (theta = -log s^2)."""
    m = H.shape[0]
    D = np.zeros(m)
    idx = np.flatnonzero(eligible)
    for k, i in enumerate(idx):
        s = np.asarray(H[i], dtype=np.float64)
        D[i] = max(float(pair.tilt(-np.log(s * s)).bhattacharyya_distance()), 0.0)
        if progress and (k % 1000 == 999 or k + 1 == idx.size):
            progress("scoring candidates", k + 1, idx.size)
    return Scores(D, norms, eligible, np.ones(m, dtype=bool), why)


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
    A: np.ndarray
    B: np.ndarray
    H: np.ndarray
    pair: object
    scores: Scores
    names: list | None
    top_rows: np.ndarray
    top: list
    energy: float | None
    floor: float | None
    error: float
    readout: object | None
    t0: float
    box_source: str = "energy"


def _rank(A, B, H, spec: ModelSpec, *, error, names, top, rows, progress, h_option=None) -> _Ranked:
    t0 = time.perf_counter()
    model, energy, floor, dtype = spec.family, spec.energy, spec.floor, spec.dtype
    if model == "leverage":
        from bhtcli.models.leverage import LeveragePair
        box = None if spec.energy is None else spec.box
        A, B = load_pair(A, B)
        n, d = A.shape
        H, label = open_candidates(H, n, f"a weight vector s, one entry per row of A, n = {n}",
                                   h_option)
        names = None if names is None else load_names(names, H.shape[0])
        norms, eligible, why, s2 = survey(H, label, rows or block_rows(n), box=box, leverage=True)
        if not eligible.any():
            raise InputError(_none_eligible(label, model, why, norms, energy))
        pair, readout = LeveragePair(A, B), None
        if progress:
            progress(f"scoring {int(eligible.sum()):,} candidate weight vectors")
        scores = score_leverage(pair, H, norms, eligible, why, progress)
        if box is None:     # the box of the comparison: the candidates' own range of s_i^2
            box = (float(s2[1][eligible].max()), float(s2[0][eligible].min()))
            box_source = "range of the eligible candidates' s_i^2"
        else:
            box_source = "energy"
        energy, floor = box
    else:
        from bhtcli.models.softmax import SoftmaxPair
        A, B = load_pair(A, B, dtype=None)
        n, d = A.shape
        H, label = open_candidates(H, d, f"a query x, one entry per column of A, d = {d}",
                                   h_option)
        names = None if names is None else load_names(names, H.shape[0])
        readout = spec.readout(n)
        norms, eligible, why, _ = survey(H, label, MAX_BLOCK_ROWS, energy=energy)
        if not eligible.any():
            raise InputError(_none_eligible(label, model, why, norms, energy))
        pair = SoftmaxPair(A, B, readout=readout, dtype=dtype)
        if progress:
            progress(f"scoring {int(eligible.sum()):,} candidate queries")
        scores = score_softmax(pair, A, B, H, label, norms, eligible, why, top, rows, progress)
        box_source = "energy" if energy is not None else "largest eligible candidate norm"
    top_rows = best_rows(scores.D, scores.eligible, top)
    entries = []
    for k, i in enumerate(top_rows):
        if progress and k % 10 == 0:
            progress("exact counts of the best candidates", k, len(top_rows))
        entries.append(_entry(int(i), scores, names, _counts(model, pair, A, B, H, int(i), readout, error)))
    return _Ranked(model, n, d, A, B, H, pair, scores, names, top_rows, entries, energy, floor,
                   error, readout, t0, box_source)


def _none_eligible(label, model, why, norms, energy) -> str:
    if model == "leverage":
        return (f"no row of {label} is an admissible weight vector ({why}); "
                "every s_i must be non-zero and FLOOR <= s_i^2 <= ENERGY")
    return (f"no row of {label} has ||x|| <= E = {energy:g} (the smallest norm is "
            f"{float(norms.min()):.6g}); raise {parameter_name('energy')} or rescale the candidates")


def _counts(model, pair, A, B, H, i, readout, error):
    """(tilt, sample counts) at candidate i, from float64 scores."""
    x = np.asarray(H[i], dtype=np.float64)
    if model == "leverage":
        tilt = pair.tilt(-np.log(x * x))
    else:
        from bhtcli.models.softmax import logits_at
        tilt = Tilt.from_logits(*logits_at(A, B, x, readout))
    D = max(float(tilt.bhattacharyya_distance()), 0.0)
    return query_counts(tilt, D, error)


def _entry(i, scores, names, counts) -> dict:
    D = float(scores.D[i])
    return {"index": i, "name": None if names is None else names[i],
            "hellinger_squared": -math.expm1(-D), "bhattacharyya_distance": D,
            "predicted": counts.predicted, "lower": counts.lower, "upper": counts.upper,
            "query_norm": float(scores.norms[i])}


# ---------------------------------------------------------------- rank
def rank(A, B, H, spec: ModelSpec = ModelSpec(), *, error: float = 0.05, names=None,
         top: int = DEFAULT_TOP, out=None, block_rows: int | None = None, progress=None,
         force: bool = False) -> RankResult:
    """Score every candidate query (a row of H) and write all of them to `out`.

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models.
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
        It must not be one of the inputs (A, B, H, `names`, the biases) unless `force`.
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
        check_out(out, (A, B, H, names, spec.bias_a, spec.bias_b), force)
    r = _rank(A, B, H, spec, error=error, names=names, top=top, rows=block_rows,
              progress=progress)
    if out is not None:
        write_scores(out, r.scores, r.names, {e["index"]: e for e in r.top}, r.error,
                     option=parameter_name("out"))
    best = int(r.top_rows[0])
    given = r.box_source == "energy"        # the budget the user gave (not one derived from H)
    note = None if r.top[0]["bhattacharyya_distance"] > 0 else _why_inseparable(r)
    return RankResult(r.model, r.n, r.d, r.energy if given else None, r.floor if given else None,
                      r.error, int(r.H.shape[0]),
                      int(r.scores.eligible.sum()), best, None if r.names is None else r.names[best],
                      r.top, None if out is None else os.fspath(out),
                      "float64" if r.model == "leverage" else str(r.pair.dtype),
                      None if r.readout is None else r.readout.description,
                      time.perf_counter() - r.t0, distinguishable=note is None, note=note)


def _why_inseparable(r: _Ranked) -> str:
    """Why H^2 = 0 at every eligible candidate: the same model (design's rule), or the rows."""
    if r.model == "softmax":
        from bhtcli.analysis.facts import pair_base
        same = pair_base(r.A, r.B, r.pair.G, r.readout).same
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


def write_scores(out, scores: Scores, names, top: dict, error: float, option: str | None = None) -> None:
    """Every candidate, in order: JSONL or CSV by the extension (`predicted` for the top rows)."""
    def row(i: int) -> dict:
        ok = bool(scores.eligible[i])
        D = float(scores.D[i])
        return {"index": i, "name": None if names is None else names[i], "eligible": ok,
                "query_norm": float(scores.norms[i]),
                "hellinger_squared": -math.expm1(-D) if ok else None,
                "bhattacharyya_distance": D if ok else None,
                "lower": lower_count(D, error) if ok else None,
                "upper": upper_count(D, error) if ok else None,
                "predicted": top[i]["predicted"] if i in top else None}
    write_rows(out, COLUMNS, map(row, range(scores.D.shape[0])), option)


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
def design_candidates(A, B, H, spec: ModelSpec = ModelSpec(),
                      options: DesignOptions = DesignOptions(), *, names=None,
                      top: int = DEFAULT_TOP, block_rows: int | None = None, progress=None):
    """The best of the candidate queries (rows of H), its design report and the reachable fraction.

    Parameters are those of :func:`rank`, with the target error, starts and seed of the search
    for the optimum in `options` (the usual design, over the ball of radius `energy`, or the largest eligible
    candidate norm without it; leverage: the box, or the candidates' range of s_i^2).

    Returns
    -------
    DesignResult
        The usual report at the best eligible candidate (its row as `query`), with
        `candidates` = {count, eligible, ineligible, why_ineligible, best_index, best_name,
        top, radius, floor, radius_from, reachable_fraction, optimum}: `radius` is the E of
        the comparison (leverage: the box's upper end, `floor` its lower end).
    """
    starts, seed = options.starts, options.seed
    r = _rank(A, B, H, spec, error=options.error, names=names, top=top, rows=block_rows,
              progress=progress, h_option=parameter_name("candidates"))
    best = int(r.top_rows[0])
    x = np.asarray(r.H[best], dtype=np.float64)
    if r.model == "leverage":
        result, optimum, (radius, box_floor), source = _leverage_reports(r, x, starts, seed, progress)
    else:
        result, optimum, radius, source = _softmax_reports(r, x, starts, seed, progress)
        box_floor = None
    h2 = r.top[0]["hellinger_squared"]
    opt = optimum["hellinger_squared"] if optimum else None
    fraction = None
    if opt is not None and opt > 0:
        fraction = min(h2 / opt, 1.0)
    elif opt == 0.0:
        fraction = None                     # the same model: nothing to reach
    eligible = int(r.scores.eligible.sum())
    cand = {"count": int(r.H.shape[0]), "eligible": eligible,
            "ineligible": int(r.H.shape[0]) - eligible, "why_ineligible": r.scores.why_not,
            "best_index": best, "best_name": None if r.names is None else r.names[best],
            "top": r.top, "radius": radius, "floor": box_floor, "radius_from": source,
            "reachable_fraction": fraction, "optimum": optimum}
    return replace(result, candidates=cand)


def _softmax_reports(r: _Ranked, x, starts, seed, progress):
    from bhtcli.commands.report import ReportContext, report, same_model_report
    from bhtcli.analysis.facts import analyse_pair
    from bhtcli.models.softmax import logits_at
    from bhtcli.search.entry import maximize
    from bhtcli.search.kkt import kkt_state
    from bhtcli.search.result import solver_dict
    eligible_norms = r.scores.norms[r.scores.eligible]
    if r.energy is not None:
        radius, source = r.energy, "energy"
    else:
        radius, source = float(eligible_norms.max()), "largest eligible candidate norm"
        if radius == 0:
            raise InputError("every eligible candidate is the zero vector, which separates no two "
                             "softmax models; give non-zero candidate queries")
    pair = r.pair
    facts = analyse_pair(r.A, r.B, pair.G, radius, pair.readout)
    ctx = ReportContext(r.A, r.B, pair, radius, r.error, facts, r.t0)
    on_boundary, residual = kkt_state(pair, x, radius)
    solver = solver_dict("candidates", 0, 0, pair.passes, 0, [], residual, 0.0,
                         message="the best of the given queries (no search at the query)")
    if not facts.distinguishable:
        return same_model_report(ctx, solver), {"hellinger_squared": 0.0, "predicted": None,
                                          "query_norm": 0.0, "on_boundary": False}, radius, source
    if progress:
        progress(f"designing the optimum over the ball of radius {radius:g} for comparison")
    extra = np.stack([np.asarray(r.H[i], dtype=np.float64) for i in r.top_rows[:EXTRA_STARTS]], axis=1)
    # design's own search (a number of starts asks for the full search with exactly that many),
    # the best candidates climbing too
    found = maximize(pair, radius, "auto" if starts is None else "full", starts=starts, seed=seed,
                     progress=progress, carried=extra)
    tilt = Tilt.from_logits(*logits_at(r.A, r.B, found.x, pair.readout))
    D = max(float(tilt.bhattacharyya_distance()), 0.0)
    counts = query_counts(tilt, D, r.error)
    optimum = {"hellinger_squared": -math.expm1(-D), "predicted": counts.predicted,
               "lower": counts.lower, "upper": counts.upper,
               "query_norm": float(np.linalg.norm(found.x)), "on_boundary": found.on_boundary,
               "starts": found.starts, "iterations": found.iterations,
               "query": found.x.tolist()}
    solver = dict(solver, search_seconds=found.seconds)
    return report(ctx, x, on_boundary, solver), optimum, radius, source


def _leverage_reports(r: _Ranked, s, starts, seed, progress):
    from bhtcli.commands.leverage_design import design_leverage, leverage_report_for_query
    C, c, source = r.energy, r.floor, r.box_source
    report = leverage_report_for_query(r.A, r.B, s, ModelSpec.build("leverage", C, c), r.error)
    if progress:
        progress(f"designing the optimum over the box {c:g} <= s_i^2 <= {C:g} for comparison")
    opt = design_leverage(r.A, r.B, ModelSpec.build("leverage", C, c),
                          DesignOptions(r.error, starts, seed))
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
    return report, optimum, (C, c), source
