"""`design`: the best query under an energy budget, with everything a user decides from."""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from bhtcli.maths.bounds import PairFacts, join_notes, analyse_pair, certificate_from_variance
from bhtcli.results import json_safe
from bhtcli.maths.divergences import Tilt, divergences_from_tilt
from bhtcli.errors import InputError
from bhtcli.io.load import load_pair
from bhtcli.search.optimize import DEFAULT_STARTS, kkt_state, maximize, starting_points
from bhtcli.maths.counts import sample_counts
from bhtcli.models.readout import make_readout
from bhtcli.models.softmax import SoftmaxPair, logits_at
from bhtcli.io.validation import check_dtype, check_energy, check_error, check_seed, check_starts

METHODS = ("lbfgs", "ccp")


@dataclass(frozen=True)
class DesignResult:
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
    paper: dict = field(default_factory=dict)
    solver: dict = field(default_factory=dict)
    floor: float | None = None           # leverage models: the box is floor <= s_i^2 <= energy
    warnings: list = field(default_factory=list)
    readout: dict | None = None          # softmax family: links and biases
    dtype: str = "float64"               # precision of the large products (the rest: float64)

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def design(A, B, energy: float, error: float = 0.05, starts: int = DEFAULT_STARTS,
           seed: int = 0, method: str = "lbfgs", progress=None, *, link_a="exp", link_b="exp",
           bias_a=None, bias_b=None, dtype: str = "float64") -> DesignResult:
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

    Returns
    -------
    DesignResult

    Raises
    ------
    InputError
        Invalid matrices or options.
    """
    energy, error, starts = check_energy(energy), check_error(error), check_starts(starts)
    seed, dtype = check_seed(seed), check_dtype(dtype)
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    if method == "ccp" and not readout.plain:
        raise InputError("--method ccp handles plain softmax models only (no links, no biases); "
                         "use the default lbfgs")
    t0 = time.perf_counter()
    pair = SoftmaxPair(A, B, readout=readout, dtype=dtype)
    facts = analyse_pair(A, B, pair.G, energy, readout)
    ctx = _Context(A, B, pair, energy, error, facts, t0)

    if not facts.distinguishable:
        solver = {"method": method, "starts": 0, "iterations": 0, "passes": pair.passes,
                  "local_maxima": 0, "local_maxima_values": [], "kkt_residual": 0.0,
                  "search_seconds": 0.0}
        return _same_model(ctx, solver)

    if method == "ccp":
        x, iterations, local_values, seconds, residual, on_boundary, local = _run_ccp(
            A, B, pair, energy, starts, seed)
    else:
        found = maximize(pair, energy, starts=starts, seed=seed, progress=progress)
        x, iterations, local_values = found.x, found.iterations, found.values
        seconds, residual, on_boundary = found.seconds, found.kkt_residual, found.on_boundary
        local = found.local_maxima

    solver = {"method": method, "starts": starts, "iterations": iterations,
              "passes": pair.passes, "local_maxima": local,
              "local_maxima_values": [-math.expm1(-v) for v in local_values[:5]],
              "kkt_residual": residual, "search_seconds": seconds}
    return _report(ctx, x, on_boundary, solver)


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
    solver = {"method": "given", "starts": 0, "iterations": 0, "passes": pair.passes,
              "local_maxima": 0, "local_maxima_values": [], "kkt_residual": residual,
              "search_seconds": 0.0}
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


def _report(ctx: _Context, x, on_boundary, solver):
    pair = ctx.pair
    # The reported numbers come from float64 scores at x: the pair's own product when it is
    # float64, one streamed float64 pass over A and B after a float32 search.
    if pair.dtype == np.float64:
        c, delta = pair.logits(x)
    else:
        c, delta = logits_at(ctx.A, ctx.B, x, pair.readout)
    tilt = Tilt.from_logits(c, delta)
    div = divergences_from_tilt(tilt)
    counts = sample_counts(tilt, div.bhattacharyya_distance, ctx.error)
    note = None
    if div.bhattacharyya_distance == 0.0:
        note = ("the models differ, but by less than float64 resolves at this budget: "
                "H^2 underflows to 0 and no finite count can be given")
    solver = dict(solver, passes=pair.passes, seconds=time.perf_counter() - ctx.t0)
    return DesignResult(
        "softmax", pair.n, pair.d, ctx.energy, ctx.error, x.tolist(), float(np.linalg.norm(x)),
        on_boundary, div.hellinger, div.hellinger_squared, div.bhattacharyya_distance,
        div.total_variation, div.kl_ab, div.kl_ba, div.chernoff_information, distinguishable=True,
        note=note,
        samples={"lower": counts.lower, "upper": counts.upper, "predicted": counts.predicted,
                 "method": counts.method},
        certificate=_certificate_dict(ctx, div.hellinger_squared),
        paper=_paper_dict(ctx, True), solver=solver, warnings=_warnings(pair.readout),
        readout=pair.readout.description, dtype=str(pair.dtype))


def _same_model(ctx: _Context, solver):
    pair = ctx.pair
    zero = dict(bhattacharyya_distance=0.0, hellinger=0.0, hellinger_squared=0.0,
                total_variation=0.0, kl_ab=0.0, kl_ba=0.0, chernoff_information=0.0)
    solver = dict(solver, passes=pair.passes, seconds=time.perf_counter() - ctx.t0)
    return DesignResult("softmax", pair.n, pair.d, ctx.energy, ctx.error, [0.0] * pair.d, 0.0, False,
                        **zero, distinguishable=False, note=ctx.facts.reason,
                        samples={"lower": None, "upper": None, "predicted": None, "method": "none"},
                        certificate=_certificate_dict(ctx, 0.0),
                        paper=_paper_dict(ctx, False), solver=solver,
                        readout=pair.readout.description, dtype=str(pair.dtype))


def _certificate_dict(ctx: _Context, h2):
    facts = ctx.facts
    ceiling = facts.ceiling
    cert = certificate_from_variance(ceiling.variance if ceiling else None, ctx.error,
                                     facts.distinguishable)
    bound = cert.hellinger_squared_max_bound
    gap = bound / h2 if h2 > 0 and bound is not None else None
    return {"hellinger_squared_max_bound": bound,
            "kl_max_bound": cert.kl_max_bound,
            "samples_lower_any_strategy": cert.samples_lower_any_strategy,
            "mean_samples_lower_sequential": cert.mean_samples_lower_sequential,
            "ceiling_method": ceiling.method if ceiling else None,
            "ceilings": ceiling.candidates if ceiling else None,
            "row_diameter": facts.diameter.value, "row_diameter_exact": facts.diameter.exact,
            "bound_over_design": gap,
            "note": join_notes(facts.certificate_note, ceiling.note if ceiling else None)}


def _paper_dict(ctx: _Context, distinguishable):
    eps = ctx.facts.eps_2inf
    softmax = ctx.pair.readout.exp_links
    return {"row_norm_2inf": eps,
            "thm32_order_eps2_E2_inverse": (1.0 / (eps * ctx.energy) ** 2
                                            if softmax and distinguishable and eps > 0 else None)}


def _run_ccp(A, B, pair, energy, starts, seed):
    from bhtcli.search.ccp import ccp_maximize
    t = time.perf_counter()
    X0 = starting_points(pair, energy, starts, seed)
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    X, values, solves = ccp_maximize(A, B, X0, energy)
    best = int(np.argmax(values))
    x = X[:, best]
    on_boundary, residual = kkt_state(pair, x, energy)
    order = sorted(set(values.tolist()), reverse=True)
    return x, solves, order, time.perf_counter() - t, residual, on_boundary, len(order)
