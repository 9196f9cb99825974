"""`design`: the best query under an energy budget, with everything a user decides from."""
from __future__ import annotations

import time
from dataclasses import replace

from bhtcli.analysis.facts import analyse_pair
from bhtcli.commands.report import ReportContext, report, same_model_report
from bhtcli.commands.tensors import same_heads_note
from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.maths.counts import one_answer_distance
from bhtcli.models.spec import DesignOptions, ModelSpec
from bhtcli.models.softmax import SoftmaxPair
from bhtcli.results import DesignResult
from bhtcli.search.ascent import enough_at
from bhtcli.search.entry import maximize
from bhtcli.search.result import solver_dict, solver_from


def design(A, B, spec: ModelSpec, options: DesignOptions = DesignOptions(),
           progress=None, certificate: str = "fast") -> DesignResult:
    """Find the query x (||x||_2 <= spec.energy) that best separates softmax-family model A from B.

    The plain one-budget design; :func:`bhtcli.api.design` checks the settings once and chooses
    between it and the other paths (candidates, subspace, leverage models, budget lists, a
    number of queries).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    spec : ModelSpec
        The softmax-family settings with the budget E on ||x||_2 (`ModelSpec.build(energy=E)`;
        links, biases and the search's dtype, docs/maths.md §7.1).
    options : DesignOptions
        The target error, starts, seed, method and search space (`DesignOptions.build(...)`).
    progress : callable, optional
        Called with short status strings (the CLI prints them on stderr).
    certificate : {"fast", "exact"}
        "exact" adds the bilinear ceiling (docs/maths.md §4.14), as `bound` does.

    Returns
    -------
    DesignResult

    Raises
    ------
    InputError
        Invalid matrices, or ccp with links or biases.
    """
    energy, error, method, starts, seed = (spec.energy, options.error, options.method,
                                           options.starts, options.seed)
    search_space, max_starts, dtype = options.search_space, options.rounds, spec.dtype
    sources = (A, B)
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = spec.readout(A.shape[0])
    if method == "ccp" and not readout.plain:
        raise InputError(f"{parameter_name('method')} ccp handles plain softmax models only (no links, no biases); "
                         "use the default lbfgs")
    t0 = time.perf_counter()
    pair = SoftmaxPair(A, B, readout=readout, dtype=dtype)
    facts = analyse_pair(A, B, pair.G, energy, readout)
    if certificate == "exact":
        from bhtcli.analysis.bilinear import with_bilinear_ceiling
        facts = with_bilinear_ceiling(facts, A, B, energy, readout, log=progress)
    if not facts.distinguishable:          # two GGUF builds: say what else differs
        facts = replace(facts, reason=same_heads_note(*sources, facts.reason))
    ctx = ReportContext(A, B, pair, energy, error, facts, t0)

    if not facts.distinguishable:
        solver = solver_dict(method, 0, 0, pair.passes, 0, [], 0.0, 0.0)
        return same_model_report(ctx, solver)

    if method == "ccp":
        found = maximize(pair, energy, "ccp", starts=starts, seed=seed, models=(A, B))
        return report(ctx, found.x, found.on_boundary, solver_from(found, pair.passes))
    if search_space == "auto" and options.fixed_starts is not None:
        search_space = "full"
    with enough_at(one_answer_distance(error)):     # past it, no query changes the counts
        found = maximize(pair, energy, search_space, starts=starts, seed=seed,
                         max_starts=max_starts, progress=progress)
    return report(ctx, found.x, found.on_boundary, solver_record(found, starts, max_starts))


def solver_record(r, starts, max_starts) -> dict:
    """The `solver` object of a ladder search, with the evidence of the adaptive rounds."""
    sketched = r.search_space == "sketch"     # its starts come from its screens, not rounds
    return solver_from(r, 0, adaptive=starts is None and not sketched,
                       max_starts=None if sketched else max_starts)
