"""`design`: the best query under an energy budget, with everything a user decides from."""
from __future__ import annotations

import time

from bhtcli.analysis.facts import analyse_pair
from bhtcli.commands.report import ReportContext, report, same_model_report
from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.io.validation import check_dtype, check_energy, check_error, check_seed, check_starts
from bhtcli.models.readout import make_readout
from bhtcli.models.softmax import SoftmaxPair
from bhtcli.results import DesignResult
from bhtcli.search.entry import maximize
from bhtcli.search.ladder import DEFAULT_MAX_STARTS
from bhtcli.search.result import solver_dict, solver_from
from bhtcli.settings import DESIGN_METHODS

METHODS = DESIGN_METHODS


def design(A, B, energy: float, error: float = 0.05, starts: int | None = None,
           seed: int = 0, method: str = "lbfgs", progress=None, *, link_a="exp", link_b="exp",
           bias_a=None, bias_b=None, dtype: str = "float64",
           max_starts: int | None = None, search_space: str | None = None) -> DesignResult:
    """Find the query x (||x||_2 <= energy) that best separates softmax-family model A from B.

    The plain one-budget design; :func:`bhtcli.api.design` chooses between it and the other
    paths (candidates, subspace, leverage models, budget lists, a number of queries).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    energy : float
        Budget E on ||x||_2 (> 0).
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5 (default 0.05).
    starts : int, optional
        Exactly this many starting points (default: adaptive rounds up to `max_starts`).
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
    max_starts : int, optional
        Budget of the adaptive rounds of starts.
    search_space : {"auto", "full", "sketch"}, optional
        Where the search climbs (bhtcli.search.entry).

    Returns
    -------
    DesignResult

    Raises
    ------
    InputError
        Invalid matrices or options.
    """
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
    ctx = ReportContext(A, B, pair, energy, error, facts, t0)

    if not facts.distinguishable:
        solver = solver_dict(method, 0, 0, pair.passes, 0, [], 0.0, 0.0)
        return same_model_report(ctx, solver)

    if method == "ccp":
        found = maximize(pair, energy, "ccp", starts=starts, seed=seed, models=(A, B))
        return report(ctx, found.x, found.on_boundary, solver_from(found, pair.passes))
    if search_space == "auto" and fixed_starts is not None:
        search_space = "full"
    found = maximize(pair, energy, search_space, starts=starts, seed=seed, max_starts=max_starts,
                     progress=progress)
    return report(ctx, found.x, found.on_boundary, solver_record(found, starts, max_starts))


def check_search_space(value) -> str:
    """None (the default of bhtcli.search.sketch), "full", "sketch" or "auto"."""
    from bhtcli.search.sketch import DEFAULT_SEARCH_SPACE, SEARCH_SPACES
    if value is None:
        return DEFAULT_SEARCH_SPACE
    if value not in SEARCH_SPACES:
        raise InputError(f"{parameter_name('search_space')} must be one of "
                         f"{', '.join(SEARCH_SPACES)}, got {value!r}")
    return value


def solver_record(r, starts, max_starts) -> dict:
    """The `solver` object of a ladder search, with the evidence of the adaptive rounds."""
    sketched = r.search_space == "sketch"     # its starts come from its screens, not rounds
    return solver_from(r, 0, adaptive=starts is None and not sketched and r.adaptive,
                       max_starts=None if sketched else max_starts)
