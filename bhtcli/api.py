"""The public Python API: one function per command, dispatching on the model family.

Every function takes arrays or paths and the options of the CLI command of the same name, and
returns the result object whose ``to_dict()`` is what ``bht COMMAND --json`` prints. The model
settings (``model``, ``energy``, ``floor``, ``link_a``, ``link_b``, ``bias_a``, ``bias_b``,
``dtype``) are checked together once, by :class:`bhtcli.models.spec.ModelSpec`; ``model`` may
also be a ready ModelSpec, and then the other model settings are left out.

Errors are :class:`bhtcli.errors.InputError` (bad input) and :class:`bhtcli.errors.SolverError`;
their messages name the parameters of these functions.
"""
from __future__ import annotations

import functools
import os

from bhtcli.errors import (BhtError, InputError, NotReachable, OutputError, SolverError,  # noqa: F401
                           note, notes_to, parameter_name, parameter_names, phases_to)

from bhtcli.settings import (CERTIFICATES, DEFAULT_STARTS, DESIGN_METHODS, FORMATS, OUT_FORMATS,  # noqa: F401
                             OUT_SUFFIXES, QUANTIZE_TYPES)

from bhtcli.settings import __version__  # noqa: E402,F401  (re-exported; one version, in settings)

# Names importable from here without loading numpy until they are used (PEP 562): the result
# types, the model settings, loading, and what the command-line front end needs besides.
_LAZY = {
    "ModelSpec": "bhtcli.models.spec",
    "load_matrix": "bhtcli.io.load",
    **dict.fromkeys(["EngineSettings", "Sampler"], "bhtcli.engine.settings"),
    **dict.fromkeys(["DesignResult", "BudgetCurveResult", "BoundResult", "LeverageBoundResult",
                     "DecideResult", "SimulateResult", "ShiftResult", "RankResult",
                     "SweepResult", "TensorsResult", "QuantizeResult", "PromptsResult",
                     "SampleResult"],
                    "bhtcli.results"),
    # for front ends: formats, output checks and writers, budget parsing, defaults
    **dict.fromkeys(["check_output_path", "save_array", "atomic_file"], "bhtcli.io.write"),
    "input_session": "bhtcli.io.reads",
    **dict.fromkeys(["SCHEDULE_SUFFIXES", "check_schedule_path", "save_schedule"],
                    "bhtcli.io.schedule_file"),
    **dict.fromkeys(["check_queries", "energies_of"], "bhtcli.io.validation"),
    "COLUMNS": "bhtcli.sweep.manifest",
    **dict.fromkeys(["SCHEMA", "HEADER", "ERROR", "RUN"], "bhtcli.schema"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _recorded(inputs_of):
    """Decorator of a public function whose result a command prints: the result gets `run`,
    the run record (bhtcli/io/run_record.py) of the inputs ``inputs_of(*args, **kwargs)``
    names (the models as given) and of every file the call read, with their SHA-256 unless the
    call passes ``hash_files=False`` (a keyword each such function declares). The call runs in
    an input session (bhtcli/io/reads.py): the CLI's when one is open, else its own, so a
    Python caller's record lists what the call read, and nothing of earlier calls."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            from bhtcli.io import reads
            hashes = kwargs.get("hash_files", True)
            if not isinstance(hashes, bool):
                raise InputError(f"{parameter_name('hash_files')} must be True or False, "
                                 f"got {hashes!r}")
            with reads.input_session():
                result = fn(*args, **kwargs)
                inputs = inputs_of(*args, **kwargs)
                _record_inputs(inputs)
                return _with_run(result, inputs, hashes, reads.files())
        return call
    return wrap


def _record_inputs(inputs) -> None:
    """Each input file among the files read, also where a command reads only its header
    without recording it (bht tensors on a .npy); pipes and folders are not files here."""
    from bhtcli.io import reads
    from bhtcli.io.shapes import split_key
    for spec in inputs:
        if isinstance(spec, (str, os.PathLike)) and os.fspath(spec) != "-":
            reads.record(split_key(os.fspath(spec))[0])


def _with_run(result, inputs, hashes: bool, files: list):
    """`result` with its run record; the engine's record is the one the command put in `run`
    (decide --prompt) or the result's own `engine` (prompts)."""
    from dataclasses import replace

    from bhtcli.io.run_record import run_record
    engine = (result.run or {}).get("engine")
    if engine is None and isinstance(getattr(result, "engine", None), dict):
        engine = result.engine
    return replace(result, run=run_record(inputs, files=files, hashes=hashes, engine=engine))


def _model_inputs(A, B=None, *_, **__) -> list:
    """The models of a call as given: A's list of K models, else A and B."""
    if isinstance(A, (list, tuple)) and A and all(
            isinstance(m, (str, os.PathLike)) or getattr(m, "ndim", None) == 2 for m in A):
        return list(A)
    return [A] if B is None else [A, B]


def model_spec(model="softmax", energy=None, floor=None, *, link_a=None, link_b=None,
               bias_a=None, bias_b=None, dtype="float64", need_energy: bool = True, inputs=None,
               budget_list: bool = False):
    """The ModelSpec for these settings; `model` may already be one (then nothing else is given).
    Links left as None are those the checkpoints among `inputs` (A, B) declare, else exp."""
    from bhtcli.models.spec import ModelSpec
    if isinstance(model, ModelSpec):
        given = dict(energy=energy is not None, floor=floor is not None,
                     link_a=link_a is not None and str(link_a) != "exp",
                     link_b=link_b is not None and str(link_b) != "exp",
                     bias_a=bias_a is not None, bias_b=bias_b is not None, dtype=str(dtype) != "float64")
        extra = [name for name, set_ in given.items() if set_]
        if extra:
            raise TypeError(f"model is a ModelSpec: give {', '.join(extra)} in the spec, not as well")
        return model
    return ModelSpec.build(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                           bias_b=bias_b, dtype=dtype, need_energy=need_energy, inputs=inputs,
                           budget_list=budget_list)


@_recorded(_model_inputs)
def design(A, B=None, energy=None, *, model="softmax", floor=None, error: float = 0.05,
           starts: int | None = None, seed: int = 0, method: str = "lbfgs", link_a=None,
           link_b=None, bias_a=None, bias_b=None, dtype="float64", candidates=None, names=None,
           top: int | None = None, subspace=None, queries=None, max_starts=None, progress=None,
           search_space=None, schedule: bool = False, certificate: str = "fast",
           links=None, biases=None, hash_files: bool = True):
    """The query that best separates A from B under the budget, and how many it takes.

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`). Or A is a
        list of K models (B omitted, or the energy): the K-way design (docs/kway.md), a
        :class:`bhtcli.results.DesignResult` with `models`, `pairs` and `bottleneck`; K = 2 is the
        pair design.
    energy : float or list of float
        softmax: the budget E on ||x||_2; leverage: the upper end C of c <= s_i^2 <= C.
        An increasing list (or "0.5,1,2,4") gives the budget curve: one design per budget (each
        at least what a single design finds there, seeded by its neighbours too), as a
        :class:`bhtcli.results.BudgetCurveResult`.
        With `queries`, the largest budget to consider.
    model : {"softmax", "leverage"} or ModelSpec
    floor : float, optional
        leverage only: the lower end c of the box.
    error : float
        Target alpha for both error probabilities, 0 < alpha < 0.5.
    starts : int, optional
        Exactly this many starting points (default: adaptive rounds of starts until the best
        maximum is reached from several starts, within `max_starts`; leverage: 6, or 3 when
        n d^2 > 1e7).
    max_starts : int, optional
        softmax: budget of the adaptive rounds (default 128).
    queries : int, optional
        The smallest budget <= `energy` at which `design` needs at most this many queries
        (to 0.5% relative); the result carries `energy_search`. Raises
        :class:`bhtcli.errors.NotReachable` when even `energy` needs more.
    seed : int
        Seed of the random starting points; equal seeds give equal results.
    method : {"lbfgs", "ccp"}
        softmax only: batched projected L-BFGS (default) or the cvxpy cross-check.
    link_a, link_b, bias_a, bias_b, dtype
        softmax family only: see :func:`bhtcli.commands.design.design`.
    links, biases : sequence, optional
        A list of models: the link of each ("exp", "poly:K", "taylor:K", "softcap:C") and
        its bias (array or path; None: no bias), in the models' order (also a comma list,
        "exp,softcap:30,exp"). Two models: the same as link_a, link_b, bias_a, bias_b.
    candidates : array_like or path, optional
        Only these queries (rows of an m x d matrix; leverage: m x n weights s): the report is
        the best eligible row's, with the top list and the reachable fraction (docs/reachable.md).
        `energy` is then optional (rows with a larger norm are not eligible).
    names : path or list of str, optional
        With `candidates`: one name per row.
    top : int, optional
        With `candidates`: how many of the best to list (default 10).
    subspace : array_like or path, optional
        softmax only: queries x = V z with V (d x r) orthonormalised, ||x|| <= energy.
    search_space : {"full", "sketch", "auto"}, optional
        softmax, one budget: "auto" (default) is the one search every path runs (screened
        starts, climbed in a sketched subspace or in full d by cost, plus the full multistart
        search where it is affordable; docs/search.md §6); "full" the full multistart search
        alone (also what `starts` or `max_starts` ask for); "sketch" the sketched search
        alone (docs/search.md §5).
    progress : callable, optional
        Called with short status strings.
    schedule : bool
        Also the best schedule (queries in fixed proportions, docs/kway.md); with
        `candidates`, the best schedule over the eligible candidate rows. Two models: the
        design's own object plus `schedule`, the single query with weight 1.
    certificate : {"fast", "exact"}
        "exact" adds the bilinear ceiling to the certificate, as :func:`bound` does: one budget,
        exp links, no biases (an n x n matrix in memory; minutes at n = 30,000); K models: each
        pair's.
    hash_files : bool
        The run record (the result's `run`) gives each file read its SHA-256; False leaves
        them out (null), for huge checkpoints: hashing reads every byte once more. Every
        function here whose result a command prints takes it.

    Returns
    -------
    bhtcli.results.DesignResult
    """
    _check_certificate(certificate)
    models = _models_of(A, B)
    link_a, link_b, bias_a, bias_b, links, biases = _readout_lists(
        models, links, biases, link_a, link_b, bias_a, bias_b)
    if models is not None:
        energy = B if energy is None and B is not None else energy
        if len(models) == 2:
            A, B, models = *models, None
    if models is not None:                  # K >= 3 models: the bottleneck (docs/kway.md)
        spec = _model_set(models, model, energy, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, links=links, biases=biases,
                          dtype=dtype, need_energy=candidates is None,
                          budget_list=True, floor=floor,
                          max_starts=max_starts, method=None if method == "lbfgs" else method)
    else:
        spec = model_spec(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, dtype=dtype, need_energy=candidates is None,
                          inputs=(A, B), budget_list=True)
    energies = None if spec.energies is None else list(spec.energies)
    _check_design_paths(spec, energies=energies, queries=queries, candidates=candidates,
                        subspace=subspace, names=names, top=top, method=method,
                        search_space=search_space)
    if schedule and (spec.leverage or energies is not None or queries is not None):
        raise InputError(f"{parameter_name('schedule')} mixes softmax queries at one budget: "
                         f"drop it, or give one {parameter_name('energy')} without "
                         f"{parameter_name('queries')}" + (" (leverage models: one weight vector)"
                                                           if spec.leverage else ""))
    if certificate != "fast" and spec.leverage:
        raise InputError(f"{parameter_name('certificate')} exact is for softmax models")
    if certificate != "fast":
        given = [parameter_name(k) for k, v in (("queries", queries), ("candidates", candidates),
                                                ("subspace", subspace)) if v is not None]
        if energies is not None:
            given.append(f"a list of {parameter_name('energy')}")
        if given:
            raise InputError(f"{parameter_name('certificate')} exact certifies one softmax pair at "
                             f"one budget; drop {', '.join(given)} (or run bht bound per budget)")
    from bhtcli.models.spec import DesignOptions
    options = DesignOptions.build(error, starts, seed, max_starts, method, search_space)
    if candidates is not None:
        from bhtcli.commands.candidates import DEFAULT_TOP
        from bhtcli.io.validation import check_top
        top = DEFAULT_TOP if top is None else check_top(top)
    if models is not None:
        from bhtcli.commands import kway
        if candidates is not None:
            from bhtcli.commands.candidates import design_candidates
            return design_candidates(models, candidates, spec, options, kway=True, names=names,
                                     top=top, schedule=schedule, progress=progress)
        if subspace is not None:
            from bhtcli.commands.subspace import design_kway_in_subspace
            return design_kway_in_subspace(models, subspace, spec, options, schedule=schedule,
                                           progress=progress)
        if queries is not None:
            return kway.design_kway_for_queries(models, _queries(queries), options,
                                                dtype=spec.dtype, progress=progress, spec=spec)
        if energies is not None:
            return kway.design_kway_curve(models, energies, options, dtype=spec.dtype,
                                          progress=progress, spec=spec)
        return kway.design_kway(models, spec.energy, options, dtype=spec.dtype,
                                schedule=schedule, progress=progress, spec=spec,
                                certificate=certificate)
    if spec.leverage:
        from bhtcli.commands import leverage_design as lev
        if queries is not None:
            return lev.design_leverage_for_queries(A, B, _queries(queries), spec, options, progress)
        if energies is not None:
            return lev.design_leverage_curve(A, B, energies, spec, options, progress)
        if candidates is None:
            return lev.design_leverage(A, B, spec, options, progress)
    if queries is not None or energies is not None:
        from bhtcli.commands import budgets
        if queries is not None:
            return budgets.design_for_queries(A, B, _queries(queries), spec, options, progress)
        return budgets.design_curve(A, B, energies, spec, options, progress)
    if candidates is not None:
        from bhtcli.commands.candidates import design_candidates
        result = design_candidates((A, B), candidates, spec, options, names=names, top=top,
                                   progress=progress)
    elif subspace is not None:
        from bhtcli.commands.subspace import design_in_subspace
        result = design_in_subspace(A, B, subspace, spec, options, progress)
    else:
        from bhtcli.commands.design import design as design_softmax
        result = design_softmax(A, B, spec, options, progress, certificate=certificate)
    if schedule:                            # two models: the query alone, weight 1
        from bhtcli.commands.kway import pair_schedule
        return pair_schedule(result)
    return result


def _check_certificate(certificate) -> None:
    if certificate not in CERTIFICATES:
        raise InputError(f"{parameter_name('certificate')} must be one of {', '.join(CERTIFICATES)}, "
                         f"got {certificate!r}")


def _queries(queries) -> int:
    from bhtcli.io.validation import check_queries
    return check_queries(queries)


def _models_of(A, B):
    """The list of models when A is one (a list or tuple of models, B None or the energy: a
    number, a list of numbers or a string), else None (A and B are the pair)."""
    if not isinstance(A, (list, tuple)) or not A:
        return None
    budget = lambda v: isinstance(v, (int, float, str)) or (
        isinstance(v, (list, tuple)) and all(isinstance(e, (int, float)) for e in v))
    if B is not None and not budget(B):
        return None
    if all(isinstance(m, (str, os.PathLike)) or getattr(m, "ndim", None) == 2 for m in A):
        return list(A)
    return None


def _plain(*readout) -> bool:
    link_a, link_b, bias_a, bias_b = readout
    name = lambda link: str(getattr(link, "name", link) or "exp")     # a Link, a string or None
    return name(link_a) == "exp" and name(link_b) == "exp" and bias_a is None and bias_b is None


def _model_set(models, model="softmax", energy=None, *, link_a=None, link_b=None, bias_a=None,
               bias_b=None, links=None, biases=None, dtype="float64", need_energy: bool = True,
               budget_list: bool = False, **refused):
    """The ModelSpec of K >= 3 models (their shared budget and dtype, each model's link and
    bias from `links` and `biases`, already per model: :func:`_readout_lists`), checked once,
    here, for every command (the rules: commands/kway.py check_kway_options, which sweep
    manifests use too). Each option in `refused` that is given (not None, not False) is named
    in one InputError: what pairs have that K models have not yet."""
    from bhtcli.commands.kway import check_kway_options
    spec_links = (getattr(model, k, None) for k in ("link_a", "link_b", "bias_a", "bias_b"))
    check_kway_options(model=getattr(model, "family", model),
                       readout_plain=_plain(link_a, link_b, bias_a, bias_b) and _plain(*spec_links),
                       **refused)
    if hasattr(model, "family"):          # a ready ModelSpec: its energy, dtype and read-outs
        spec = model_spec(model).with_models(links, biases)
    else:
        spec = model_spec("softmax", energy, dtype=dtype, need_energy=need_energy,
                          budget_list=budget_list).with_models(links, biases, inputs=models)
    return spec


def _readout_lists(models, links, biases, link_a, link_b, bias_a, bias_b, split: bool = True):
    """models/spec.py readout_lists, loaded when called (the command line's door to it)."""
    from bhtcli.models.spec import readout_lists
    return readout_lists(models, links, biases, link_a, link_b, bias_a, bias_b, split)


def _check_design_paths(spec, *, energies, queries, candidates, subspace, names, top, method,
                        search_space):
    """Which options of design() go together: the rules of the dispatch, in one place."""
    from bhtcli.errors import parameter_name as p
    one_budget = {"candidates": candidates, "subspace": subspace, "names": names, "top": top,
                  "search_space": search_space}
    if energies is not None or queries is not None:
        given = [p(k) for k, v in one_budget.items() if v is not None]
        if given:
            raise InputError(f"{', '.join(given)} designs at one budget: drop it, or give one "
                             f"{p('energy')} without {p('queries')}")
        if method != "lbfgs":
            raise InputError(f"{p('method')} ccp designs at one budget; budget lists and "
                             f"{p('queries')} use lbfgs")
        if queries is not None and energies is not None:
            raise InputError(f"{p('queries')} searches budgets up to one {p('energy')} (the largest "
                             "to consider); give one number")
        return
    if search_space == "sketch" and spec.links is not None:
        raise InputError(f"{p('search_space')} sketch models plain softmax models; three or more "
                         f"models with read-outs ({p('links')} or {p('biases')}, given or "
                         "declared by their checkpoints) are searched in full d: drop it")
    if candidates is not None and subspace is not None:
        raise InputError(f"{p('candidates')} and {p('subspace')} do not go together: rank "
                         "candidates in the full space, or design inside a subspace")
    if names is not None and candidates is None:
        raise InputError(f"{p('names')} labels the rows of {p('candidates')}; give "
                         f"{p('candidates')} too")
    if top is not None and candidates is None:
        raise InputError(f"{p('top')} lists the best rows of {p('candidates')}; give "
                         f"{p('candidates')} too")
    if spec.leverage:
        if subspace is not None:
            raise InputError(f"{p('subspace')} is for softmax models (a leverage query is a "
                             "weight vector s)")
        if method != "lbfgs":
            raise InputError(f"{p('method')} ccp is for softmax models; leverage models use "
                             "L-BFGS-B")
    elif candidates is not None and method != "lbfgs":
        raise InputError(f"{p('method')} ccp designs a query; with {p('candidates')} the optimum "
                         "for comparison uses the default lbfgs")


@_recorded(_model_inputs)
def bound(A, B=None, energy=None, *, model="softmax", floor=None, error: float = 0.05, link_a=None,
          link_b=None, bias_a=None, bias_b=None, certificate: str = "fast", progress=None,
          links=None, biases=None, hash_files: bool = True):
    """Closed-form certificate, no optimisation (docs/maths.md §4; leverage: §6.2).

    Parameters are those of :func:`design`, and `certificate`: "fast" (default) or "exact",
    which adds the bilinear ceiling for a softmax pair with exp links and no biases
    (docs/maths.md §4.14; an n x n matrix in memory, minutes at n = 30,000, refused above
    40,000 rows); `progress` (a callable taking a message) hears its phases; `links`,
    `biases` and `hash_files` as for :func:`design` (the result's `run`). Returns a
    :class:`bhtcli.results.BoundResult` or, for leverage models, a
    :class:`bhtcli.results.LeverageBoundResult`; a list of K models (A) gives each pair's
    ceiling and the bottleneck's, a :class:`bhtcli.results.BoundResult` with `models` and `pairs`.
    """
    _check_certificate(certificate)
    models = _models_of(A, B)
    link_a, link_b, bias_a, bias_b, links, biases = _readout_lists(
        models, links, biases, link_a, link_b, bias_a, bias_b, split=False)
    if models is not None:
        energy = B if energy is None and B is not None else energy
        spec = _model_set(models, model, energy, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, links=links, biases=biases, floor=floor)
        from bhtcli.commands.kway import bound_kway
        from bhtcli.io.validation import check_error
        return bound_kway(models, spec.energy, check_error(error), spec=spec,
                          certificate=certificate, progress=progress)
    from bhtcli.io.validation import check_error
    spec = model_spec(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                      bias_b=bias_b, inputs=(A, B))
    error = check_error(error)
    if spec.leverage:
        if certificate != "fast":
            raise InputError(f"{parameter_name('certificate')} exact is for softmax models")
        from bhtcli.commands.leverage_design import bound_leverage
        return bound_leverage(A, B, spec, error)
    from bhtcli.commands.bound import bound as bound_softmax
    return bound_softmax(A, B, spec, error, certificate, progress)


def _engine_args(temperature, top_k, top_p, min_p, threads, batch, kv_type, flash_attn):
    from bhtcli.engine.settings import EngineSettings, Sampler
    return (Sampler(temperature, top_k, top_p, min_p),
            EngineSettings(threads, batch, kv_type, flash_attn))


def sample(A, query=None, count: int = 1, *, seed: int = 0, model="softmax", link_a=None,
           bias_a=None, schedule=None, prompt=None, text: bool = False, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, threads: int = 2,
           batch: int = 512, kv_type: str = "f16", flash_attn: bool = False):
    """`count` answers of model A to `query`, as 0-based indices (seeded).

    Parameters
    ----------
    A : array_like or path
    query : array_like or path
        x (length d) for softmax models, s (length n, no zero entry) for leverage models.
        None with `schedule`.
    count : int
        Number of answers.
    seed : int
    model : {"softmax", "leverage"} or ModelSpec
    link_a, bias_a
        softmax family only: the link and bias of model A.
    schedule : path, optional
        A schedule file (``design --schedule --out``): the answers to its queries, interleaved
        by weight (every prefix keeps the proportions), in place of `query`.

    Returns
    -------
    numpy.ndarray
        The answers (int64), what ``bht sample`` prints one per line; with `schedule`, a
        count x 2 array of (query index, answer), a line "q a" each.

    With `prompt` (text, or a list of token ids), A is a GGUF build and the answers are the
    tokens the engine's sampler (temperature, top_k, top_p, min_p) draws after the prompt:
    token ids, or with `text` the vocabulary's token strings (:func:`sample_prompt`: the same
    draw as a result with the engine's record).
    """
    if prompt is not None:
        from bhtcli.commands.prompt_answers import sample_prompt
        sampler, settings = _engine_args(temperature, top_k, top_p, min_p, threads, batch,
                                         kv_type, flash_attn)
        return sample_prompt(A, prompt, count, sampler, settings, seed=seed, text=text)
    from bhtcli.models.answers import sample as sample_answers
    spec = model_spec(model, link_a=link_a, bias_a=bias_a, need_energy=False, inputs=(A,))
    if (schedule is None) == (query is None):
        raise InputError(f"give {parameter_name('query')} or {parameter_name('schedule')}, "
                         "not both" if schedule is not None else
                         f"give {parameter_name('query')} (or {parameter_name('schedule')})")
    if schedule is not None:
        if spec.leverage:
            raise InputError(f"{parameter_name('schedule')} is for softmax models")
        from bhtcli.commands.kway_loop import sample_schedule
        return sample_schedule(A, schedule, count, seed=seed, spec=spec)
    return sample_answers(A, query, count, seed=seed, model=spec, link=spec.link_a,
                          bias=spec.bias_a)


def _build_input(build, *_, **__) -> list:
    return [build]


@_recorded(_build_input)
def sample_prompt(build, prompt, count: int = 1, *, seed: int = 0, temperature: float = 1.0,
                  top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, threads: int = 2,
                  batch: int = 512, kv_type: str = "f16", flash_attn: bool = False,
                  hash_files: bool = True):
    """The tokens a GGUF build's engine (llama.cpp) draws after `prompt`, and what drew them:
    ``bht sample BUILD --prompt TEXT --json``.

    Parameters
    ----------
    build : path
        A GGUF file.
    prompt : str or sequence of int
        The prompt's text (tokenized by the engine) or its token ids.
    count : int
        Tokens to draw, each the first token of an independent completion.
    seed, temperature, top_k, top_p, min_p
        The sampler (llama.cpp's chain) and its seed, as for :func:`sample` with `prompt`.
    threads, batch, kv_type, flash_attn
        The engine's settings (:class:`bhtcli.engine.EngineSettings`).
    hash_files : bool
        As for :func:`design`.

    Returns
    -------
    bhtcli.results.SampleResult
        The drawn `token_ids` (those :func:`sample` returns for the same arguments), their
        `pieces` and vocabulary strings (`tokens`), the prompt's ids, the sampler, the seed;
        `run.engine` is the engine's record (binding, llama.cpp build, CPU features, threads,
        batch, KV type).
    """
    from bhtcli.commands.prompt_answers import draw_prompt
    sampler, settings = _engine_args(temperature, top_k, top_p, min_p, threads, batch,
                                     kv_type, flash_attn)
    return draw_prompt(build, prompt, count, sampler, settings, seed=seed)


@_recorded(_model_inputs)
def decide(A, B=None, query=None, answers=None, *, model="softmax", error: float = 0.05,
           link_a=None, link_b=None, bias_a=None, bias_b=None, stdin=None, prior=None,
           prompt=None, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           min_p: float = 0.0, threads: int = 2, batch: int = 512, kv_type: str = "f16",
           flash_attn: bool = False, links=None, biases=None, hash_files: bool = True):
    """Which model produced `answers` (Wald's SPRT in the order observed, docs/maths.md §3.6).

    Parameters
    ----------
    A, B : array_like or path
    query : array_like or path
        The query the answers respond to.
    answers : array_like of int, path or "-"
        Observed 0-based answers (a file: one per line or a JSON list; "-": `stdin`).
    model, error, link_a, link_b, bias_a, bias_b, links, biases
        As for :func:`design`.
    prior : sequence of float, optional
        K models (A a list): the prior of each model (default equal).
    hash_files : bool
        As for :func:`design` (the result's `run`; with `prompt`, `run.engine` too).

    A list of K models (A; then B is the query and query the answers) gives the K-way decision
    (maximum likelihood and the matrix SPRT), a :class:`bhtcli.results.DecideResult` with `models`;
    `query` may then hold a schedule's queries (one per row) and the answers say which query
    each came from (docs/kway.md).

    With `prompt` (text or token ids), A and B (or A, a list of 2 to 8 paths) are GGUF builds,
    `query` is unused and the answers are tokens (ids, or the vocabulary's strings) drawn by the
    engine's sampler (temperature, top_k, top_p, min_p) after the prompt; K >= 3 builds are
    decided as K models are (a DecideResult with models).

    Returns
    -------
    bhtcli.commands.decide.DecideResult
    """
    if prompt is not None:
        from bhtcli.commands.prompt_answers import decide_prompt
        from bhtcli.io.validation import check_error
        sampler, settings = _engine_args(temperature, top_k, top_p, min_p, threads, batch,
                                         kv_type, flash_attn)
        builds = list(A) if isinstance(A, (list, tuple)) else [A, B]
        return decide_prompt(builds, prompt, answers, sampler, settings, check_error(error),
                             stdin=stdin)
    if isinstance(A, (list, tuple)) and A and all(
            isinstance(m, (str, os.PathLike)) or getattr(m, "ndim", None) == 2 for m in A):
        if answers is None:                   # decide([M1, M2, M3], x, answers)
            query, answers = B, query
        pair = len(A) == 2 and prior is None
        link_a, link_b, bias_a, bias_b, links, biases = _readout_lists(
            A, links, biases, link_a, link_b, bias_a, bias_b, split=pair)
        if not pair:
            from bhtcli.commands.decide import check_prior, decide_models
            from bhtcli.io.validation import check_error
            spec = _model_set(A, model, link_a=link_a, link_b=link_b, bias_a=bias_a,
                              bias_b=bias_b, links=links, biases=biases, need_energy=False)
            return decide_models(A, query, answers, check_error(error), check_prior(prior, len(A)),
                                 stdin=stdin, spec=spec)
        A, B = A
    else:
        link_a, link_b, bias_a, bias_b, _, _ = _readout_lists(
            None, links, biases, link_a, link_b, bias_a, bias_b)
    from bhtcli.commands.decide import decide as decide_answers
    from bhtcli.io.validation import check_error
    spec = model_spec(model, link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b,
                      need_energy=False, inputs=(A, B))
    return decide_answers(A, B, query, answers, spec, check_error(error), stdin=stdin)


@_recorded(_model_inputs)
def simulate(A, B=None, energy=None, *, model="softmax", floor=None, query=None,
             error: float = 0.05, trials: int = 10_000, seed: int = 0, policy: str = "all",
             starts: int | None = None, link_a=None, link_b=None, bias_a=None, bias_b=None,
             dtype="float64", predicted_points: int = 0, progress=None, schedule: bool = False,
             weights=None, links=None, biases=None, hash_files: bool = True):
    """Monte Carlo of the fixed-n test, Wald's SPRT and Chernoff's adaptive rule.

    Parameters
    ----------
    A, B, energy, model, floor, error, starts, link_a, link_b, bias_a, bias_b, dtype
        As for :func:`design` (the query is designed first unless `query` is given).
    links, biases
        As for :func:`design`: every policy runs on the models' read-outs (the adaptive
        rule's KL queries are searched under each ordered pair's links and biases).
    query : array_like or path, optional
        Simulate this query instead of designing one.
    trials : int
        Monte Carlo trials per model (>= 100).
    seed : int
    policy : {"all", "fixed", "sprt", "adaptive"}
    predicted_points : int
        > 0 adds the predicted error curve at that many n (for plots).
    schedule : bool
        K models (A a list): simulate the designed schedule instead of the single query.
    weights : sequence of float, optional
        K models with `query` holding several queries (one per row): the share of each
        (default equal shares).
    hash_files : bool
        As for :func:`design` (the result's `run`).

    A list of K models (A) gives the K-way simulation (maximum likelihood at fixed n, the
    matrix SPRT, Chernoff's adaptive rule), a :class:`bhtcli.results.SimulateResult` with `models`.
    progress : callable, optional
        progress(message, step, total).

    Returns
    -------
    bhtcli.commands.simulate.SimulateResult
    """
    from bhtcli.commands.simulate import check_policy, check_trials, simulate as simulate_models
    from bhtcli.models.spec import DesignOptions
    models = _models_of(A, B)
    pair = models is None or not (len(models) != 2 or schedule or weights is not None)
    link_a, link_b, bias_a, bias_b, links, biases = _readout_lists(
        models, links, biases, link_a, link_b, bias_a, bias_b, split=pair)
    if models is not None:
        energy = B if energy is None and B is not None else energy
    policies = check_policy(policy)
    if not pair:
        spec = _model_set(models, model, energy, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, links=links, biases=biases, dtype=dtype, floor=floor)
    else:
        models, schedule, weights = models or [A, B], False, None     # a pair: one query
        spec = model_spec(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, dtype=dtype, inputs=tuple(models))
    return simulate_models(models, spec, DesignOptions.build(error, starts, seed), query=query,
                           trials=check_trials(trials), policy=policies,
                           predicted_points=predicted_points, progress=progress,
                           schedule=schedule, weights=weights)


@_recorded(_model_inputs)
def rank(A, B, H=None, energy=None, *, model="softmax", floor=None, error: float = 0.05, names=None,
         top: int = 10, out=None, link_a=None, link_b=None, bias_a=None, bias_b=None,
         dtype="float64", block_rows: int | None = None, progress=None, force: bool = False,
         links=None, biases=None, hash_files: bool = True):
    """Score every candidate query (a row of H) and write all of them to `out`.

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models.
    H : array_like or path
        m x d candidate queries x, one per row (leverage models: m x n weight vectors s),
        any matrix format; streamed in blocks of rows.
    energy : float, optional
        Budget: rows with ||x|| > energy are not eligible (leverage: the box
        floor <= s_i^2 <= energy, with `floor`). Without it every row is eligible.
    model, floor, error, link_a, link_b, bias_a, bias_b, dtype
        As for :func:`design`.
    names : path or list of str, optional
        One name per candidate (e.g. the prompts).
    top : int
        How many of the best eligible candidates get full counts (default 10).
    out : path, optional
        FILE.jsonl or FILE.csv: one record per candidate, in the order of H (written
        atomically). It must not be one of the inputs unless `force`.
    block_rows : int, optional
        Candidates per block (default: about 2e6 / n).
    hash_files : bool
        As for :func:`design` (the result's `run`).

    Returns
    -------
    bhtcli.results.RankResult

    K models: ``rank([M1, M2, M3], H, energy=...)`` scores each row by its bottleneck, the
    closest pair at that query (docs/kway.md); each top row carries that pair.
    """
    from bhtcli.commands.candidates import rank as rank_candidates
    from bhtcli.io.validation import check_error, check_top
    link_a, link_b, bias_a, bias_b, links, biases = _readout_lists(
        A if isinstance(A, (list, tuple)) else None, links, biases, link_a, link_b, bias_a,
        bias_b, split=False)
    if isinstance(A, (list, tuple)):
        if H is not None and energy is None and isinstance(H, (int, float)):
            H, energy = None, H                 # rank([M1, M2, M3], H, E)
        if H is not None:
            raise InputError("with K models give the candidates as the second argument: "
                             "rank([M1, M2, M3], H, energy=...)")
        spec = _model_set(A, model, energy, link_a=link_a, link_b=link_b, bias_a=bias_a,
                          bias_b=bias_b, links=links, biases=biases, dtype=dtype,
                          need_energy=False, floor=floor,
                          block_rows=block_rows)
        return rank_candidates(A, B, spec, kway=True, error=check_error(error), names=names,
                               top=check_top(top), out=out, progress=progress, force=force)
    spec = model_spec(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                      bias_b=bias_b, dtype=dtype, need_energy=False, inputs=(A, B))
    return rank_candidates((A, B), H, spec, error=check_error(error), names=names,
                           top=check_top(top), out=out, block_rows=block_rows,
                           progress=progress, force=force)


@_recorded(lambda *_, **__: [])
def sweep(manifest, out, scheduler: str | None = None, workers: int | None = None, *,
          export: str | None = None, retry_failed: bool = False, progress=None, notice=None,
          engine=None, force: bool = False, hash_files: bool = True):
    """Run every task of a sweep manifest (one design per row) on Dask; resumable.

    Parameters are those of :func:`bhtcli.sweep.driver.sweep`; every task runs :func:`design`
    (without hashing: a task's run record is not kept, only its row). `hash_files` as for
    :func:`design`: the result's `run` lists the manifest and every file this process read.
    Returns a :class:`bhtcli.results.SweepResult`.
    """
    from bhtcli.sweep.driver import sweep as run_sweep
    return run_sweep(manifest, out, scheduler, workers, export=export, retry_failed=retry_failed,
                     progress=progress, notice=notice, force=force,
                     design=functools.partial(design, hash_files=False),
                     **({} if engine is None else {"engine": engine}))


@_recorded(lambda builds, *_, **__: list(builds))
def prompts(builds, prompts=None, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
            min_p: float = 0.0, threads: int = 2, batch: int = 512, kv_type: str = "f16",
            flash_attn: bool = False, sequences: int = 16, context: int = 0,
            error: float = 0.05, top: int = 10, min_margin: float | None = None,
            corpus: int = 1000, search: int | None = None, seed: int = 0, progress=None,
            hash_files: bool = True):
    """Which prompts best tell K GGUF builds of one model apart, through the engine (llama.cpp).

    Parameters
    ----------
    builds : sequence of path
        2 to 8 GGUF files of one vocabulary and tokenizer (A first).
    prompts : path or sequence, optional
        A file (one prompt a line, or JSON Lines with `text` or `token_ids`), or a list of
        strings or of token-id lists; default: `corpus` natural prompts from text Python ships.
    temperature, top_k, top_p, min_p
        The sampler whose law is compared (llama.cpp's chain; default the raw softmax).
    threads, batch, kv_type, flash_attn, sequences, context
        The engine settings (:class:`bhtcli.engine.EngineSettings`).
    error : float
        alpha of the counts.
    top : int
        Prompts reported.
    min_margin : float, optional
        Leave out prompts whose H^2 is below this times their engine floor (the largest over
        the builds); with `search`, the found prompts too.
    search : int, optional
        Also search for better prompts from the best natural ones, within this many forward
        passes (one prompt scored on one build is one pass, however many an engine call packs;
        docs/llm_audit.md, "The prompt search"); the result's `search`.
    seed : int
        The search's random choices.
    hash_files : bool
        As for :func:`design`: the result's `run`, with the engine's record as `run.engine`.

    Returns
    -------
    bhtcli.results.PromptsResult
    """
    from bhtcli.commands.prompts import prompts as run
    from bhtcli.engine.settings import EngineSettings, Sampler
    from bhtcli.io.validation import check_error
    sampler = Sampler(temperature, top_k, top_p, min_p)
    settings = EngineSettings(threads, batch, kv_type, flash_attn, context, sequences)
    error = check_error(error)
    if not (isinstance(top, int) and top >= 1):
        raise InputError(f"{parameter_name('top')} must be an integer >= 1")
    if min_margin is not None and not (min_margin >= 0):
        raise InputError(f"{parameter_name('min_margin')} must be a number >= 0")
    if prompts is None:
        from bhtcli.io.corpus import natural_prompts
        if not (isinstance(corpus, int) and corpus >= 1):
            raise InputError(f"{parameter_name('corpus')} must be an integer >= 1")
        items, source = [(t, None) for t in natural_prompts(corpus)], "corpus"
    elif isinstance(prompts, (str, os.PathLike)):
        from bhtcli.io.prompt_file import read_prompts
        items, source = read_prompts(prompts), os.fspath(prompts)
    else:
        items = [(p, None) if isinstance(p, str) else (None, list(p)) for p in prompts]
        source = "list"
    searching = None
    if search is not None:
        from bhtcli.analysis.prompt_search import SearchSettings, check_budget
        from bhtcli.io.validation import check_seed
        searching = SearchSettings(check_budget(search, len(builds)), seed=check_seed(seed))
    return run(list(builds), items, source=source, sampler=sampler, settings=settings,
               error=error, top=top, min_margin=min_margin, search=searching, progress=progress)


@_recorded(lambda A, *_, **__: [A])
def shift(A, data, lr: float, steps: int = 1, *, out: str | None = None, energy=None,
          error: float = 0.05, seed: int = 0, progress=None, force: bool = False,
          hash_files: bool = True):
    """Gradient steps of softmax regression move A to B: :func:`bhtcli.commands.shift.shift`
    (its parameters), and `hash_files` as for :func:`design` (the result's `run`).

    Returns
    -------
    bhtcli.results.ShiftResult
    """
    from bhtcli.commands.shift import shift as run
    return run(A, data, lr, steps, out=out, energy=energy, error=error, seed=seed,
               progress=progress, force=force)


@_recorded(lambda path, *_, **__: [path])
def list_tensors(path, stdin=None, *, hash_files: bool = True):
    """What a checkpoint holds: :func:`bhtcli.commands.tensors.list_tensors`, and `hash_files`
    as for :func:`design` (the result's `run`).

    Returns
    -------
    bhtcli.results.TensorsResult
    """
    from bhtcli.commands.tensors import list_tensors as run
    return run(path, stdin=stdin)


@_recorded(lambda path, other, *_, **__: [path, other])
def compare_tensors(path, other, *, values: bool = True, stdin=None, progress=None,
                    hash_files: bool = True):
    """Which tensors of two GGUF builds differ: :func:`bhtcli.commands.tensors.compare_tensors`,
    and `hash_files` as for :func:`design` (the result's `run`).

    Returns
    -------
    bhtcli.results.TensorsResult
    """
    from bhtcli.commands.tensors import compare_tensors as run
    return run(path, other, values=values, stdin=stdin, progress=progress)


@_recorded(lambda src, *_, **__: [src])
def quantize(src, to: str, out: str, *, progress=None, hash_files: bool = True):
    """A matrix's or a GGUF build's quantization round trip, written to `out`:
    :func:`bhtcli.commands.quantize.quantize`, and `hash_files` as for :func:`design` (the
    result's `run`: the source's files; the output is not hashed).

    Returns
    -------
    bhtcli.results.QuantizeResult
    """
    from bhtcli.commands.quantize import quantize as run
    return run(src, to, out, progress=progress)
