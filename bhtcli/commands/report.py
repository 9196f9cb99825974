"""The softmax design report: everything a user decides from, at a query found or given
(divergences, sample counts, the certificate, the paper's quantities, the solver record)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bhtcli.analysis.facts import PairFacts, analyse_pair, certificate_record
from bhtcli.errors import parameter_name
from bhtcli.io.load import load_pair
from bhtcli.maths.counts import query_counts
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from bhtcli.models.softmax import SoftmaxPair, logits_at_each, pass_seconds
from bhtcli.models.spec import ModelSpec
from bhtcli.results import DesignResult
from bhtcli.search.kkt import kkt_state
from bhtcli.search.result import solver_dict


KKT_WARN = 1e-3      # a relative KKT residual above this is reported as a warning ...


KKT_WARN_FLOAT32 = 1e-2  # ... or above this after a float32 search: the sketch stops growing
                         # its subspace where the rise left is below float32's resolution of D,
                         # at residuals up to ~1e-3 (docs/maths.md §5.3)


def report_for_query(A, B, x, spec: ModelSpec, error: float = 0.05) -> DesignResult:
    """The report `design` gives, for a query chosen by the caller (no optimisation); `spec`
    as for :func:`bhtcli.commands.design.design` (its dtype unused: the report is float64)."""
    energy = spec.energy
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = spec.readout(A.shape[0])
    t0 = time.perf_counter()
    pair = SoftmaxPair(A, B, readout=readout)
    facts = analyse_pair(A, B, pair.G, energy, readout)
    ctx = ReportContext(A, B, pair, energy, error, facts, t0)
    x = np.asarray(x, dtype=np.float64)
    on_boundary, residual = kkt_state(pair, x, energy)
    solver = solver_dict("given", 0, 0, pair.passes, 0, [], residual, 0.0)
    if not facts.distinguishable:
        return same_model_report(ctx, solver)
    return report(ctx, x, on_boundary, solver)


@dataclass(frozen=True)
class ReportContext:
    A: np.ndarray
    B: np.ndarray
    pair: SoftmaxPair
    energy: float
    error: float
    facts: PairFacts
    t0: float


def readout_warnings(readout) -> list:
    if readout.link_a.scale_free and readout.link_b.scale_free and \
            readout.bias_a is None and readout.bias_b is None:
        return ["both links are poly:K without bias: the probabilities are the same at x and "
                "t x, so the energy changes nothing here (it matters against an exp or taylor link)"]
    return []


def report(ctx: ReportContext, x, on_boundary, solver, extra_passes: int = 0, logits=None):
    """The design report at x. `logits`: (c, delta) at x already computed by
    :func:`report_logits` (a budget curve's queries share its pass)."""
    pair = ctx.pair
    # The reported numbers come from float64 scores at x: the pair's own product when it is
    # float64, one streamed float64 pass over A and B after a float32 search.
    if logits is not None:
        c, delta = logits
    elif pair.dtype == np.float64:
        c, delta = pair.logits(x)
    else:
        c, delta = logits_at_each(ctx.A, ctx.B, [x], pair.readout)[0]
    tilt = Tilt.from_logits(c, delta)
    div = divergences_from_tilt(tilt)
    counts = query_counts(tilt, div.bhattacharyya_distance, ctx.error)
    note = None
    certificate = certificate_dict(ctx, div, solver.get("local_maxima_values") or ())
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
    warnings = readout_warnings(pair.readout)
    kkt_warn = KKT_WARN if pair.dtype == np.float64 else KKT_WARN_FLOAT32
    if solver["method"] not in ("given", "candidates") and solver["kkt_residual"] > kkt_warn:
        warnings.append(f"the KKT residual at the query is {solver['kkt_residual']:.2g}: the point found "
                        "is not a verified local maximum (e.g. on a kink of a poly:K link); the "
                        f"certificate's bound still holds, try more {parameter_name('starts')}")
    return DesignResult(
        "softmax", pair.n, pair.d, ctx.energy, ctx.error, x.tolist(), float(np.linalg.norm(x)),
        on_boundary, div.hellinger, div.hellinger_squared, div.bhattacharyya_distance,
        div.total_variation, div.kl_ab, div.kl_ba, div.chernoff_information, distinguishable=True,
        note=note,
        samples={"lower": counts.lower, "upper": counts.upper, "predicted": counts.predicted,
                 "method": counts.method},
        certificate=certificate,
        **paper_dict(ctx, True), solver=solver, warnings=warnings,
        readout=pair.readout.description, dtype=str(pair.dtype))


def report_logits(ctx: ReportContext, queries) -> list:
    """(c, delta) at each query for :func:`report` after a float32 search: one streamed
    float64 pass over A and B for all the queries (:func:`bhtcli.models.softmax.logits_at_each`:
    the same bits as a pass per query). None for each query of a float64 pair: the report
    takes the pair's own product, counted in its passes as it goes."""
    if ctx.pair.dtype == np.float64:
        return [None] * len(queries)
    return logits_at_each(ctx.A, ctx.B, queries, ctx.pair.readout)


def same_model_report(ctx: ReportContext, solver):
    pair = ctx.pair
    zero = dict(bhattacharyya_distance=0.0, hellinger=0.0, hellinger_squared=0.0,
                total_variation=0.0, kl_ab=0.0, kl_ba=0.0, chernoff_information=0.0)
    solver = dict(solver, passes=pair.passes, pass_seconds=pass_seconds(pair),
                  seconds=time.perf_counter() - ctx.t0)
    return DesignResult("softmax", pair.n, pair.d, ctx.energy, ctx.error, [0.0] * pair.d, 0.0, False,
                        **zero, distinguishable=False, note=ctx.facts.reason,
                        samples={"lower": None, "upper": None, "predicted": None, "method": "none"},
                        certificate=certificate_dict(ctx),
                        **paper_dict(ctx, False), solver=solver,
                        readout=pair.readout.description, dtype=str(pair.dtype))


def certificate_dict(ctx: ReportContext, div=None, other_h2=()):
    """The certificate of a report (analysis.facts.certificate_record). `div`: the divergences
    at the design (None: no design), `other_h2`: further H^2 values the report prints (the
    search's local maxima); one guarded rounding covers them all (docs/maths.md §4.10)."""
    return certificate_record(ctx.facts, ctx.error, None if div is None else div.hellinger_squared,
                              div=div, other_h2=other_h2)


def paper_dict(ctx: ReportContext, distinguishable):
    eps = ctx.facts.eps_2inf
    softmax = ctx.pair.readout.exp_links
    return {"row_norm_2inf": eps,
            "paper_lower_order": (1.0 / (eps * ctx.energy) ** 2
                                  if softmax and distinguishable and eps > 0 else None)}
