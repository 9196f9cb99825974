"""Command-line interface: parse, call one library function, emit. Nothing else.

Options shared by commands are declared once in bhtcli/cli/options.py; results reach stdout
only through bhtcli.cli.render.emit; `main` turns every expected failure into one `Error:`
line and the exit status of EXIT_STATUSES (docs/cli.md).
"""
from __future__ import annotations

import errno
import os
import signal
import sys

import click

from bhtcli.cli.options import (CONTEXT, INPUTS_HELP, LINK_DEFAULT, LINK_HELP, PATH, OneBudget, design_pair_options, dtype_option, error_option,
                                force_option, hash_option, json_option, model_option, model_pair_options,
                                out_option, query_option, quiet_option, rank_pair_options,
                                model_readout_options, readout_options, sampler_options, engine_options,
                                seed_option, starts_option)
import bhtcli.api as api
from bhtcli.api import (BhtError, InputError, OutputError, QUANTIZE_TYPES, __version__, notes_to,
                        parameter_names)

EXIT_STATUSES = (   # (status, short meaning for --help, what it covers for docs/cli.md)
    (0, "success, the result is on stdout",
     "also when A and B cannot be told apart (`distinguishable: false`), and whichever way "
     "`decide` decides (A, B or undecided: the decision is in the output)"),
    (1, "failure at run time",
     "a solver failed, an output could not be written at the end (disk full), tasks of "
     "a `sweep` failed, out of memory"),
    (2, "bad invocation or bad input",
     "unknown option, unreadable or invalid matrix, invalid value, an output file (`--out`, "
     "`--export`, `--plot`) naming an input, an unknown format or a folder that cannot be written"),
    (130, "interrupted (Ctrl-C)",
     "one `Error: interrupted` line; no output file is left half-written"),
    (141, "stdout closed early (| head)",
     "quiet, as coreutils (128 + SIGPIPE): the reader wanted no more"),
    (143, "terminated (SIGTERM)",
     "128 + SIGTERM, as a shell reports it: one `Error: terminated` line; as after Ctrl-C, no "
     "output file is left half-written and no temporary file is left behind"),
)
EPILOG = ("\b\nExit statuses:\n" + "\n".join(f"  {code:<4} {short}" for code, short, _ in EXIT_STATUSES)
          + "\n\nEvery command: bht COMMAND --help. Shell completion (bash): "
            "eval \"$(_BHT_COMPLETE=bash_source bht)\". Conventions and every --json key: "
            "docs/cli.md and docs/json.md in the bht source tree.")


class Interrupted(BhtError):
    """Ctrl-C or SIGTERM: the run stopped (exit 130, or 143 for SIGTERM)."""

    def __init__(self, message: str, status: int = 130):
        super().__init__(message)
        self.status = status


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread, it unwinds the command as Ctrl-C does
    (temporary files removed on the way) and ends as one line and exit 143."""


def _terminate(signum, frame):
    raise Terminated()


class BhtGroup(click.Group):
    """A click group whose commands' KeyboardInterrupt ends as one line and exit 130
    (click itself would print a blank line and "Aborted!"); every command records the files
    it reads, which its outputs may not replace (bhtcli.io.reads)."""

    def invoke(self, ctx):
        try:
            with api.input_session():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted("interrupted") from None
        except Terminated:
            raise Interrupted("terminated", 143) from None


@click.group(cls=BhtGroup, context_settings=CONTEXT, epilog=EPILOG)
@click.version_option(__version__, "--version", "-V", prog_name="bht")
def cli():
    """Design queries under an energy budget that tell two softmax models apart."""
    # the library's messages name its parameters; here they name the flags
    click.get_current_context().with_resource(parameter_names(_flag))
    click.get_current_context().with_resource(notes_to(_note))


def _note(message: str) -> None:
    """A `Note:` line on stderr, above the live progress line when one is shown."""
    from bhtcli.cli.render import stderr_line
    stderr_line(f"Note: {message}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _bias_files(biases) -> list:
    """The bias files of --biases (a comma list; empty entries are none)."""
    return [f for f in (biases or "").split(",") if f.strip()]


def _spec(model, energy, floor, link_a, link_b, bias_a, bias_b, dtype="float64",
          need_energy=True, inputs=None):
    """The model options checked together, once (bhtcli.models.spec); links not given are the
    checkpoints' own (`inputs`: A and B)."""
    if need_energy and energy is None:
        raise click.UsageError("Missing option '--energy' / '-E'.", ctx=click.get_current_context())
    return api.ModelSpec.build(model, energy, floor, link_a=link_a, link_b=link_b, bias_a=bias_a,
                               bias_b=bias_b, dtype=dtype, need_energy=need_energy, inputs=inputs)


def _reporter(quiet: bool, bar: bool = False):
    from bhtcli.cli.progress import Reporter
    return Reporter(quiet=quiet, bar=bar)


def _emit(result, as_json: bool) -> None:
    from bhtcli.cli.render import emit
    emit(result, as_json)


certificate_option = click.option(
    "--certificate", type=click.Choice(api.CERTIFICATES), default="fast", show_default=True,
    help="exact: also the bilinear ceiling, usually much tighter at vocabulary scale "
         "(docs/maths.md §4.14; one budget, exp links, no biases; K models: each pair's). It "
         "holds an n x n float64 matrix in memory (7.5 GB at n = 30,522; refused above 40,000 "
         "rows) and takes minutes per pair.")


@cli.command(context_settings=CONTEXT)
@design_pair_options
@click.argument("more", nargs=-1, metavar="[M3 ...]", type=PATH)
@model_readout_options
@click.option("--schedule", is_flag=True,
              help="Also the best schedule, a few queries used in fixed proportions (with "
                   "--candidates: a mix of the given rows; two models: the query alone; docs/kway.md).")
@starts_option
@click.option("--max-starts", type=int, default=None, metavar="N",
              help="Budget of the adaptive rounds: at most N starts per budget [default: 128]; "
                   "raise it when the table warns.")
@click.option("--search-space", type=click.Choice(("full", "sketch", "auto")), default=None,
              help="auto: the one default search (screened starts at every size, climbed in "
                   "a sketched subspace or in full d by cost, plus the full multistart search "
                   "below n*d = 5e6 or d = 256; docs/search.md §6); full: the full multistart "
                   "search alone (also what --starts/--max-starts ask for); sketch: the "
                   "sketched search alone [default: auto].")
@click.option("--queries", default=None, metavar="N",
              help="Find the smallest budget <= --energy whose designed query needs at most N queries.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="With a list of budgets: write a PNG of H^2 and predicted queries against the budget.")
@seed_option
@click.option("--method", type=click.Choice(api.DESIGN_METHODS), default="lbfgs", show_default=True,
              help="lbfgs: batched projected L-BFGS (scales); ccp: cvxpy cross-check (small models).")
@json_option
@hash_option
@out_option("the query (x, or s for leverage)")
@force_option
@dtype_option
@quiet_option
@click.option("--candidates", type=PATH, default=None, metavar="H",
              help="Only these queries: one per row of H (m x d; leverage: m x n weights s). Reports "
                   "the best eligible row (norm <= E), the top list and how much of the optimum it reaches.")
@click.option("--names", type=PATH, default=None, metavar="FILE", help="With --candidates: one name per row (e.g. the prompts).")
@click.option("--top", type=int, default=None, help="With --candidates: how many of the best to list [default: 10].")
@click.option("--subspace", type=PATH, default=None, metavar="V",
              help="Only queries x = V z (V: d x r, orthonormalised by bht, rank r), ||x|| <= E.")
@certificate_option
def design(a, b, more, links, biases, schedule, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b, starts,
           max_starts, search_space, queries, plot, seed, method, as_json, no_hash, out, force, dtype,
           quiet, candidates, names, top, subspace, certificate):
    """Find the query x (||x|| <= E) that best separates A from B, and how many it takes.

    {inputs} With three or more models (M3 ...) the query best names the true one of them:
    it maximises the closest pair's separation (docs/kway.md).

    \b
    Examples:
      bht design A.npy B.npy --energy 1.0
      bht design A.npy B.npy --energy 1.0 --json | jq .samples.predicted
      bht design A.csv B.csv --energy 2 --error 0.01 --out x.npy
      bht design A.npy A.npy --link-b taylor:4 --energy 3     # softmax vs its degree-4 surrogate
      bht design A.npy B.npy --energy 8 --queries 100         # the smallest budget for 100 queries
      bht design A.npy B.npy --energy 0.5,1,2,4 --plot curve.png   # the budget curve
      bht design A.npy B.npy --candidates H.npy --names prompts.txt --energy 12
      bht design A.npy B.npy --subspace V.npy --energy 1.0
      bht design F16.npy Q8.npy Q4.npy --energy 1.0 --schedule   # which of three models
      bht design G1.npy G2.npy G3.npy --energy 1.0 --links softcap:30,softcap:30,exp
    """
    from bhtcli.api import (OUT_SUFFIXES, SCHEDULE_SUFFIXES, BudgetCurveResult, check_output_path,
                            check_schedule_path, save_array, save_schedule)
    from bhtcli.api import design as design_fn
    if energy is None and candidates is None:
        raise click.UsageError("Missing option '--energy' / '-E'.", ctx=click.get_current_context())
    curve = energy is not None and "," in energy       # checked once, by the library
    inputs = (a, b, *more, bias_a, bias_b, *_bias_files(biases), candidates, names, subspace)
    if plot:
        check_output_path(plot, "--plot", inputs=inputs, force=force, suffixes=(".png",))
        if not curve:
            raise InputError("--plot draws the budget curve: give --energy a comma list (0.5,1,2,4)")
    if out:
        if curve:
            raise InputError("--out writes one query: use it with a single --energy")
        if schedule:
            check_schedule_path(out)
        check_output_path(out, inputs=inputs, force=force,
                          suffixes=SCHEDULE_SUFFIXES if schedule else OUT_SUFFIXES)
    with _reporter(quiet) as progress:
        result = design_fn([a, b, *more], energy=energy, model=model, floor=floor, link_a=link_a,
                           link_b=link_b, bias_a=bias_a, bias_b=bias_b, dtype=dtype, error=alpha, seed=seed, starts=starts,
                           method=method, progress=progress, candidates=candidates, names=names,
                           top=top, subspace=subspace, queries=queries, max_starts=max_starts,
                           search_space=search_space, schedule=schedule, certificate=certificate,
                           links=links, biases=biases, hash_files=not no_hash)
        if plot and isinstance(result, BudgetCurveResult):
            progress("plotting")
            from bhtcli.cli.plot import plot_budget_curve
            plot_budget_curve(result, plot)
    if out and schedule and result.schedule is not None:
        save_schedule(out, result.schedule["queries"], result.schedule["weights"])
    elif out:
        save_array(out, result.query)
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@model_pair_options
@click.argument("more", nargs=-1, metavar="[M3 ...]", type=PATH)
@model_readout_options
@certificate_option
@json_option
@hash_option
@quiet_option
def bound(a, b, more, links, biases, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b,
          certificate, as_json, no_hash, quiet):
    """Closed-form bounds, no optimisation: certified sup H^2 and query lower bounds.

    {inputs} With three or more models: each pair's ceiling and the bottleneck's.

    \b
    Examples:
      bht bound A.npy B.npy --energy 1.0
      bht bound A.npy B.npy --energy 1.0 --json | jq .samples_lower_any_strategy
      bht bound A.npy B.npy C.npy --energy 1.0
    """
    from bhtcli.api import bound as bound_fn
    if not more:                    # two models: --links, --biases are --link-a .. --bias-b
        link_a, link_b, bias_a, bias_b, _, _ = api._readout_lists(
            [a, b], links, biases, link_a, link_b, bias_a, bias_b)
    if more:
        if energy is None:
            raise click.UsageError("Missing option '--energy' / '-E'.", ctx=click.get_current_context())
        _emit(bound_fn([a, b, *more], energy=energy, model=model, floor=floor, error=alpha,
                       link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b,
                       links=links, biases=biases, certificate=certificate,
                       hash_files=not no_hash), as_json)
        return
    spec = _spec(model, energy, floor, link_a, link_b, bias_a, bias_b, inputs=(a, b))
    with _reporter(quiet) as progress:
        result = bound_fn(a, b, model=spec, error=alpha, certificate=certificate, progress=progress,
                          hash_files=not no_hash)
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A", type=PATH)
@model_option
@query_option(required=False, what="The query (or --schedule)")
@click.option("--schedule", type=PATH, default=None, metavar="FILE",
              help="A schedule file (design --schedule --out S.json): answers to its queries, "
                   "interleaved by weight, a line 'QUERY ANSWER' each (decide's format with "
                   "--query S.json).")
@click.option("--prompt", default=None, metavar="TEXT",
              help="A is a GGUF build: draw the tokens the engine's sampler gives after TEXT "
                   "(the sampler options apply).")
@click.option("--text", "as_text", is_flag=True,
              help="With --prompt: print the vocabulary's token strings instead of ids.")
@sampler_options
@click.option("--count", "-n", type=int, required=True, help="Number of answers to draw.")
@seed_option
@click.option("--link-a", "link", default=None, metavar="LINK",
              help="Link of model A: " + LINK_HELP + LINK_DEFAULT)
@click.option("--bias-a", "bias", type=PATH, default=None, metavar="FILE", help="Bias of model A, one entry per row.")
@click.option("--json", "as_json", is_flag=True,
              help="With --prompt: one JSON object instead of lines: the prompt and its token ids, "
                   "the sampler, the seed, the drawn ids with their pieces and token strings, and "
                   "run.engine, the engine's record (docs/json.md).")
@hash_option
@quiet_option
def sample(a, model, query, schedule, prompt, as_text, temperature, top_k, top_p, min_p, count,
           seed, link, bias, as_json, no_hash, quiet):
    """Draw answers of model A to query x: 0-based indices, one per line (a stand-in black box).

    With --prompt, A is a GGUF build and the answers are tokens drawn by llama.cpp's sampler
    chain (top-k, top-p, min-p, temperature), each the first token of an independent
    completion: token ids one a line, or with --text the vocabulary's token strings, or with
    --json one object that also records the engine that drew them.

    \b
    Examples:
      bht sample A.npy --query x.npy --count 50
      bht sample A.npy --query x.npy --count 50 | bht decide A.npy B.npy --query x.npy -
      bht sample A.npy --schedule s.json --count 50 | bht decide A.npy B.npy C.npy --query s.json -
      bht sample A.gguf --prompt "Beautiful is better than" --count 40 --temperature 0.8
      bht sample A.gguf --prompt "Beautiful is better than" --count 40 --json | jq .run.engine
    """
    from bhtcli.cli.render import write_lines
    from bhtcli.api import sample as sample_fn
    if as_json and prompt is None:
        raise InputError("--json is for --prompt (a GGUF build's tokens); without it sample "
                         "writes the answers one per line")
    if prompt is not None and as_json:
        from bhtcli.api import sample_prompt
        _emit(sample_prompt(a, prompt, count, seed=seed, temperature=temperature, top_k=top_k,
                            top_p=top_p, min_p=min_p, hash_files=not no_hash), True)
        return
    if prompt is not None:
        write_lines(sample_fn(a, count=count, seed=seed, prompt=prompt, text=as_text,
                              temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p))
        return
    if query is None and schedule is None:
        raise click.UsageError("Missing option '--query' / '-x' (or --schedule, or --prompt for a "
                               "GGUF build).", ctx=click.get_current_context())
    answers = sample_fn(a, query, count, seed=seed, model=model, link_a=link, bias_a=bias,
                        schedule=schedule)
    if answers.ndim == 2:
        write_lines([f"{q} {x}" for q, x in answers.tolist()])
    else:
        write_lines(answers)


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A", type=PATH)
@click.argument("b", metavar="B", type=PATH)
@click.argument("rest", nargs=-1, required=True, metavar="[M3 ...] ANSWERS", type=PATH)
@model_option
@query_option(required=False, what="The query the answers respond to (K models: one per row for a schedule)")
@click.option("--prompt", default=None, metavar="TEXT",
              help="A, B [C ...] are GGUF builds (2 to 8) and ANSWERS the tokens (ids, or token "
                   "strings as sample --text prints them) their API gave after TEXT.")
@sampler_options
@error_option
@readout_options
@model_readout_options
@click.option("--prior", default=None, metavar="P1,P2,...",
              help="Three or more models: prior probabilities, one per model [default: equal].")
@json_option
@hash_option
@quiet_option
def decide(a, b, rest, model, query, prompt, temperature, top_k, top_p, min_p, alpha, link_a,
           link_b, bias_a, bias_b, links, biases, prior, as_json, no_hash, quiet):
    """Decide from observed answers (a file or -, one index per line or a JSON list) which model answered.

    The SPRT uses the thresholds +-ln((1-ALPHA)/ALPHA). Whatever it decides (A, B or
    undecided), the exit status is 0: the decision is in the output. With three or more
    models: the maximum-likelihood verdict, the posterior and the matrix SPRT (every error
    <= ALPHA); with a schedule's queries each line of ANSWERS is "QUERY ANSWER".

    \b
    Examples:
      bht decide A.npy B.npy --query x.npy answers.txt
      bht sample B.npy --query x.npy --count 40 | bht decide A.npy B.npy --query x.npy - --json
      bht decide A.npy B.npy C.npy --query x.npy answers.txt
    """
    from bhtcli.api import decide as decide_fn
    more, answers = rest[:-1], rest[-1]
    if a == "-" or b == "-" or "-" in more:
        raise InputError("the models must be files for decide (standard input carries the answers)")
    if prompt is not None:
        _emit(decide_fn([a, b, *more], answers=answers, error=alpha, prompt=prompt,
                        temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                        hash_files=not no_hash), as_json)
        return
    if query is None:
        raise click.UsageError("Missing option '--query' / '-x' (or --prompt for GGUF builds).",
                               ctx=click.get_current_context())
    if more or prior is not None:
        priors = None
        if prior is not None:
            try:
                priors = [float(v) for v in prior.split(",")]
            except ValueError:
                raise InputError(f"--prior must be comma-separated numbers, got {prior!r}") from None
        _emit(decide_fn([a, b, *more], query, answers, model=model, link_a=link_a, link_b=link_b,
                        bias_a=bias_a, bias_b=bias_b, links=links, biases=biases, error=alpha,
                        prior=priors, hash_files=not no_hash), as_json)
        return
    link_a, link_b, bias_a, bias_b, _, _ = api._readout_lists(     # two models: the pair's options
        [a, b], links, biases, link_a, link_b, bias_a, bias_b)
    spec = _spec(model, None, None, link_a, link_b, bias_a, bias_b, need_energy=False, inputs=(a, b))
    _emit(decide_fn(a, b, query, answers, model=spec, error=alpha, hash_files=not no_hash), as_json)


@cli.command(context_settings=CONTEXT)
@model_pair_options
@click.argument("more", nargs=-1, metavar="[M3 ...]", type=PATH)
@model_readout_options
@click.option("--schedule", is_flag=True,
              help="Three or more models: simulate the designed schedule instead of one query.")
@query_option(required=False, what="Simulate this query instead of designing one")
@click.option("--trials", type=int, default=10_000, show_default=True, help="Monte Carlo trials per model.")
@seed_option
@click.option("--policy", type=click.Choice(["fixed", "sprt", "adaptive", "all"]), default="all",
              show_default=True, help="Which strategies to simulate.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write a PNG: max error against n, empirical vs predicted and bounds (needs fixed; K models: the largest error over the models).")
@force_option
@json_option
@hash_option
@dtype_option
@quiet_option
def simulate(a, b, more, links, biases, schedule, model, energy, floor, alpha, link_a, link_b, bias_a,
             bias_b, query, trials, seed, policy, plot, force, as_json, no_hash, dtype, quiet):
    """Simulate how many queries it really takes: fixed n, Wald's SPRT, Chernoff's adaptive rule.

    When A and B cannot be told apart nothing is simulated: the result says why (exit 0).

    \b
    Examples:
      bht simulate A.npy B.npy --energy 1.0
      bht simulate A.npy B.npy --energy 1.0 --policy fixed --plot errors.png
      bht simulate A.npy B.npy --energy 1.0 --query x.npy --json | jq .sprt
      bht simulate A.npy B.npy C.npy --energy 1.0 --schedule
    """
    from bhtcli.api import simulate as simulate_fn
    from bhtcli.api import check_output_path
    if plot:
        check_output_path(plot, "--plot", inputs=(a, b, *more, query, bias_a, bias_b), force=force,
                          suffixes=(".png",))
        if policy not in ("fixed", "all"):
            raise InputError("--plot draws the fixed-n experiment; use --policy fixed or all")
    if more or schedule:
        if energy is None:
            raise click.UsageError("Missing option '--energy' / '-E'.", ctx=click.get_current_context())
        with _reporter(quiet, bar=True) as progress:
            result = simulate_fn([a, b, *more], energy=energy, model=model, floor=floor,
                                 query=query, error=alpha, trials=trials, seed=seed,
                                 policy=policy,
                                 link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b,
                                 links=links, biases=biases, dtype=dtype, progress=progress,
                                 schedule=schedule, hash_files=not no_hash,
                                 predicted_points=80 if plot else 0)
            _plot_simulation(result, plot, progress)
        _emit(result, as_json)
        return
    link_a, link_b, bias_a, bias_b, _, _ = api._readout_lists(     # two models: the pair's options
        [a, b], links, biases, link_a, link_b, bias_a, bias_b)
    spec = _spec(model, energy, floor, link_a, link_b, bias_a, bias_b, dtype, inputs=(a, b))
    with _reporter(quiet, bar=True) as progress:
        result = simulate_fn(a, b, model=spec, query=query, error=alpha, trials=trials, seed=seed,
                             policy=policy, progress=progress, predicted_points=80 if plot else 0,
                             hash_files=not no_hash)
        _plot_simulation(result, plot, progress)
    _emit(result, as_json)


def _plot_simulation(result, plot, progress) -> None:
    """simulate --plot: the fixed-n experiment's PNG, when it ran."""
    if plot and result.fixed:
        progress("plotting")
        from bhtcli.cli.plot import plot_fixed
        plot_fixed(result, plot)


@cli.command(context_settings=CONTEXT)
@rank_pair_options
@click.argument("more", nargs=-1, required=True, metavar="[M3 ...] H", type=PATH)
@model_readout_options
@click.option("--names", type=PATH, default=None, metavar="FILE", help="One name per row of H (e.g. the prompts).")
@click.option("--top", type=int, default=10, show_default=True,
              help="How many of the best to list (with exact predicted counts).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write every candidate's scores to FILE.jsonl or FILE.csv (in the order of H).")
@force_option
@json_option
@hash_option
@dtype_option
@quiet_option
def rank(a, b, more, links, biases, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b,
         names, top, out, force, as_json, no_hash, dtype, quiet):
    """Score every candidate query (one per row of H) and rank them; no search.

    H is m x d (leverage: m x n weight vectors s), any matrix format, streamed in blocks.
    With --energy, rows with ||x|| > E are not eligible. `bht design --candidates H` adds the
    design report of the best row and how much of the optimum it reaches.

    With three or more models (A B M3 ... H) every row is scored by its bottleneck, the
    closest pair at that query (docs/kway.md).

    \b
    Examples:
      bht rank A.npy B.npy H.npy --energy 12 --out scores.jsonl
      bht rank A.npy B.npy H.safetensors:hidden --names prompts.txt --top 5 --json | jq .top
      bht rank F16.npy Q8.npy Q4.npy H.npy --energy 12     # which of three models
    """
    from bhtcli.api import rank as rank_fn
    h = more[-1]
    if len(more) > 1:
        with _reporter(quiet, bar=True) as progress:
            result = rank_fn([a, b, *more[:-1]], h, energy=energy, model=model, floor=floor,
                             error=alpha, names=names, top=top, out=out, link_a=link_a,
                             link_b=link_b, bias_a=bias_a, bias_b=bias_b, dtype=dtype,
                             links=links, biases=biases, progress=progress, force=force,
                             hash_files=not no_hash)
        _emit(result, as_json)
        return
    link_a, link_b, bias_a, bias_b, _, _ = api._readout_lists(     # two models: the pair's options
        [a, b], links, biases, link_a, link_b, bias_a, bias_b)
    spec = _spec(model, energy, floor, link_a, link_b, bias_a, bias_b, dtype, need_energy=False,
                 inputs=(a, b))
    with _reporter(quiet, bar=True) as progress:
        result = rank_fn(a, b, h, spec.energy, model=spec.family, floor=spec.floor, error=alpha,
                         names=names, top=top, out=out, dtype=spec.dtype, progress=progress,
                         force=force, hash_files=not no_hash, **spec.readout_options())
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("manifest", metavar="MANIFEST", type=PATH)
@click.option("--out", "results", type=click.Path(dir_okay=False), required=True, metavar="RESULTS",
              help="Results journal (JSONL, one row per finished task); rerun the same command to resume.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786) [default: a local cluster on this machine].")
@click.option("--workers", type=int, default=None, help="Worker processes of the local cluster [default: the CPUs].")
@click.option("--export", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="At the end, write the manifest's rows with their results to FILE.csv or FILE.parquet.")
@click.option("--retry-failed", is_flag=True, help="Run the tasks whose rows say failed again.")
@force_option
@json_option
@hash_option
@quiet_option
def sweep(manifest, results, scheduler, workers, export, retry_failed, force, as_json, no_hash,
          quiet):
    """Run design for every row of a manifest (a, b, energy, ...) on Dask, resumably.

    {columns}

    \b
    Examples:
      bht sweep pairs.csv --out results.jsonl
      bht sweep pairs.csv --out results.jsonl --workers 2 --export results.parquet
      bht sweep pairs.jsonl --out results.jsonl --scheduler tcp://10.0.0.5:8786 --json
    """
    from bhtcli.api import sweep as sweep_fn
    with _reporter(quiet, bar=True) as progress:
        try:
            result = sweep_fn(manifest, results, scheduler=scheduler, workers=workers, export=export,
                              retry_failed=retry_failed, force=force,
                              progress=lambda done, total, failed: progress(
                                  f"sweep ({failed:,} failed)", done, total),
                              notice=_note, hash_files=not no_hash)
        except (KeyboardInterrupt, Terminated) as exc:
            how, status = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
            if not (os.path.isfile(results) and os.path.getsize(results) > 0):
                raise Interrupted(f"{how} before any task finished; nothing was saved", status) from None
            raise Interrupted(f"{how}; finished tasks are saved in {results}: rerun the same "
                              "command to run the rest", status) from None
    _emit(result, as_json)
    if result.failed:
        raise BhtError(f"{result.failed} of {result.tasks} tasks failed; their rows in {results} have "
                       'status "failed" and say why in the column failure')


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A", type=PATH)
@click.option("--data", "data", type=PATH, required=True, metavar="FILE.npz",
              help="A .npz archive: Q (m x d queries) and Y (m x n target distributions, or m integer labels).")
@click.option("--lr", type=float, required=True, help="Learning rate eta of the gradient steps (> 0).")
@click.option("--steps", type=int, default=1, show_default=True, help="Number of full-batch gradient steps.")
@out_option("the updated model B", required=True)
@force_option
@click.option("--energy", "-E", type=OneBudget(), default=None,
              help="Also report how many queries with ||x|| <= ENERGY detect the update (design + small-perturbation estimate).")
@error_option
@seed_option
@json_option
@hash_option
@quiet_option
def shift(a, data, lr, steps, out, force, energy, alpha, seed, as_json, no_hash, quiet):
    """Gradient steps of softmax regression move A to B: write B, report the loss and the shift.

    The loss is L(A) = (1/2m) sum_j ||softmax(A q_j) - y_j||^2 over the data set.

    \b
    Examples:
      bht shift A.npy --data D.npz --lr 10 --steps 10 --out B.npy
      bht shift A.npy --data D.npz --lr 10 --out B.npy --energy 1.0 --json | jq .detection.samples
    """
    from bhtcli.api import shift as shift_fn
    with _reporter(quiet) as progress:
        result = shift_fn(a, data, lr, steps, out=out, energy=energy, error=alpha, seed=seed,
                          progress=progress, force=force, hash_files=not no_hash)
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("builds", metavar="A.gguf B.gguf [C.gguf ...]", nargs=-1, required=True, type=PATH)
@click.option("--prompts", "prompt_file", type=PATH, default=None, metavar="FILE",
              help="One prompt a line, or JSON Lines with text or token_ids [default: natural "
                   "prompts from text Python ships].")
@click.option("--corpus", type=int, default=1000, show_default=True,
              help="Natural prompts scored when --prompts is not given.")
@click.option("--top", type=int, default=10, show_default=True, help="Prompts reported.")
@click.option("--min-margin", type=float, default=None,
              help="Leave out prompts whose H^2 is below M x their engine floor; with "
                   "--search, the found prompts too.")
@click.option("--search", type=int, default=None, metavar="BUDGET",
              help="Also search (token substitution and extension, a beam) from the best "
                   "prompts for better ones, within BUDGET forward passes: one prompt scored on "
                   "one build is one pass however many an engine call packs, so a candidate "
                   "costs one pass per build. The report's re-scores of the found prompts "
                   "(counts, floor) are counted apart.")
@seed_option
@sampler_options
@engine_options
@error_option
@json_option
@hash_option
@quiet_option
def prompts(builds, prompt_file, corpus, top, min_margin, search, seed, temperature, top_k, top_p,
            min_p, threads, batch, kv_type, flash_attn, sequences, alpha, as_json, no_hash, quiet):
    """Which prompts best tell GGUF builds of one model apart, through llama.cpp.

    Every prompt's next-token law is computed by the engine for each build (2 to 8) and passed
    through the sampler's law (default: the raw softmax; APIs usually sample otherwise);
    prompts are ranked by H^2 (K builds: the closest pair). The top prompts come with the
    counts of design and the engine floor: the largest H^2, over the builds, between a build's
    laws under these engine settings and under an F32/F16 KV cache, flash attention toggled or
    batching; a prompt below 10x its floor is flagged.

    \b
    Examples:
      bht prompts A.gguf B.gguf
      bht prompts A.gguf B.gguf C.gguf --prompts prompts.txt --top 5 --min-margin 10
      bht prompts A.gguf B.gguf --temperature 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --json
      bht prompts A.gguf B.gguf --search 2000
    """
    with _reporter(quiet, bar=True) as progress:
        result = api.prompts(list(builds), prompt_file, temperature=temperature, top_k=top_k,
                             top_p=top_p, min_p=min_p, threads=threads, batch=batch,
                             kv_type=kv_type, flash_attn=flash_attn, sequences=sequences,
                             error=alpha, top=top, min_margin=min_margin, corpus=corpus,
                             search=search, seed=seed, progress=progress,
                             hash_files=not no_hash)
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("path", metavar="FILE|DIR", type=PATH)
@click.argument("other", metavar="[OTHER]", type=PATH, required=False)
@json_option
@hash_option
@quiet_option
def tensors(path, other, as_json, no_hash, quiet):
    """List a checkpoint's tensors (name, shape, stored type, bytes) and the head bht reads;
    with OTHER, which tensors of two GGUF builds differ.

    FILE is a .gguf, .safetensors, .npz or .npy file; DIR a Hugging Face checkpoint folder
    (config.json, model.safetensors or shards with model.safetensors.index.json); a pipe
    (<(cat model.gguf)) or - (standard input) is read by its first bytes. Shapes are in the
    order bht reads them (a GGUF head: n_vocab x d). Only headers are read from files.

    With OTHER (two GGUF files), each tensor of both is compared: identical (same type, same
    bytes), or its two types and max |T_OTHER - T_FILE| (dequantized a block of rows at a time).

    \b
    Examples:
      bht tensors model.gguf
      bht tensors ./gemma-2-2b-it --json | jq '.tensors[] | select(.shape | length == 2) | .name'
      bht tensors SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-q8_0.gguf
    """
    if other is None:
        _emit(api.list_tensors(path, hash_files=not no_hash), as_json)
        return
    with _reporter(quiet) as progress:
        result = api.compare_tensors(path, other, progress=progress, hash_files=not no_hash)
    _emit(result, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("src", metavar="SRC", type=PATH)
@click.option("--to", "to", required=True, type=click.Choice(QUANTIZE_TYPES, case_sensitive=False),
              help="The type of the round trip: GGML q8_0 ... q4_0, f16, bf16, f32 (the gguf package's "
                   "quantizers; it writes no K-quants), or int8-row (per-row symmetric int8).")
@click.option("--out", type=click.Path(dir_okay=False), required=True, metavar="FILE",
              help="Write SRC's round trip to FILE: .npy, .csv, .txt or .json (float32), or .gguf (a GGUF "
                   "SRC's whole build, re-encoded, that llama.cpp loads). Never over SRC.")
@json_option
@hash_option
@quiet_option
def quantize(src, to, out, as_json, no_hash, quiet):
    """Write SRC's round trip through a quantization type: how detectable would it be?

    SRC is any matrix bht reads (FILE.gguf, DIR, FILE.safetensors:TENSOR, .npy, ...). The GGML
    types quantize blocks of 32 values of a row, so the row length must be a multiple of 32.
    Then `bht design SRC OUT --energy E` says how many queries tell the two apart.

    With SRC a GGUF file and OUT ending in .gguf, the whole build is re-encoded as llama.cpp's
    `llama-quantize --pure` does: every weight of two or more dimensions to TYPE (rows not a
    multiple of its block: f16), norms and 1-D tensors and all metadata copied, general.file_type
    set. `bht tensors SRC OUT` then lists what differs; `bht prompts` compares the two builds.

    \b
    Examples:
      bht quantize model.safetensors:lm_head.weight --to q4_0 --out head_q4_0.npy
      bht quantize head.npy --to int8-row --out head_int8.npy --json | jq .row_norm_2inf
      bht quantize SmolLM2-135M-Instruct.Q4_1.gguf --to q8_0 --out SmolLM2-q8_0.gguf
    """
    with _reporter(quiet) as progress:
        result = api.quantize(src, to, out, progress=progress, hash_files=not no_hash)
    _emit(result, as_json)


def _fill_docstrings() -> None:
    from bhtcli.api import COLUMNS
    required = [name for name, c in COLUMNS.items() if c.required]
    optional = [name for name, c in COLUMNS.items() if not c.required and name != "models"]
    columns = (f"MANIFEST is a CSV or JSONL file, one task per row: {', '.join(required)} (matrix "
               f"paths relative to it; or models, K paths separated by '|', instead of a and b), "
               f"and optionally {', '.join(optional)}, name and label_* columns.")
    for command in cli.commands.values():
        if command.help:
            command.help = command.help.replace("{inputs}", INPUTS_HELP).replace("{columns}", columns)


_fill_docstrings()


def main(argv=None) -> None:
    """Console entry point: every expected failure is one 'Error: ...' line on stderr and an
    exit status of EXIT_STATUSES; with --json also one JSON object on stdout."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args and not os.environ.get("_BHT_COMPLETE"):   # plain `bht`: the overview
        click.echo(cli.get_help(click.Context(cli, info_name="bht", **CONTEXT)))
        sys.exit(0)
    options = args[:args.index("--")] if "--" in args else args
    sys.exit(_run(args, as_json="--json" in options))


def _run(args, as_json: bool) -> int:
    previous = _catch_sigterm()
    try:
        return _run_command(args, as_json)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _catch_sigterm():
    """SIGTERM raises Terminated in the main thread (the previous handler, to restore; None
    where handlers cannot be set: another thread)."""
    try:
        return signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        return None


def _run_command(args, as_json: bool) -> int:
    from bhtcli.cli.output import ClosedPipe, start_output
    start_output()
    try:
        try:
            cli.main(args=args, prog_name="bht", standalone_mode=False)
            sys.stdout.flush()
            return 0
        except click.exceptions.Exit as exc:
            sys.stdout.flush()
            return exc.exit_code
        except BrokenPipeError:
            raise
        except OSError as exc:
            if not _is_stdout_fault(exc):
                raise
            return _stdout_fault(exc)
    except (BrokenPipeError, ClosedPipe):
        _silence_stdout()
        return 141
    except (click.exceptions.Abort, KeyboardInterrupt):
        return _fail("interrupted", 130, as_json, newline=True)
    except Terminated:
        return _fail("terminated", 143, as_json)
    except Interrupted as exc:
        return _fail(str(exc), exc.status, as_json, newline=exc.status == 130)
    except click.UsageError as exc:
        return _fail(f"{exc.format_message()} (see bht {_command(exc)}--help)", 2, as_json)
    except InputError as exc:
        return _fail(str(exc), 2, as_json)
    except OutputError as exc:
        if "standard output" in str(exc):
            _silence_stdout()
            as_json = False
        return _fail(str(exc), 1, as_json)
    except BhtError as exc:
        return _fail(str(exc), 1, as_json)
    except MemoryError:
        return _fail("out of memory; the matrices are too large for this machine", 1, as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 1, as_json)


def _is_stdout_fault(exc: OSError) -> bool:
    return exc.filename is None and exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG)


def _stdout_fault(exc: OSError) -> int:
    _silence_stdout()
    return _fail(f"standard output: cannot write it ({exc.strerror or exc}); "
                 "free some space or redirect it elsewhere", 1, False)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush cannot fail again (the
    Python documentation's advice for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(message: str, status: int, as_json: bool, newline: bool = False) -> int:
    """One 'Error:' line on stderr (and with --json one JSON object on stdout)."""
    lead = "\n" if newline and sys.stderr.isatty() else ""    # after the terminal's ^C
    try:
        sys.stderr.write(f"{lead}Error: {message}\n")
        sys.stderr.flush()
        if as_json:
            from bhtcli.cli.output import json_error
            json_error(message, status)
    except OSError:
        _silence_stdout()
    return status


def _command(exc) -> str:
    ctx = getattr(exc, "ctx", None)
    return f"{ctx.info_name} " if ctx is not None and ctx.parent is not None else ""
