"""Command-line interface: parse, call one library function, render. Nothing else."""
from __future__ import annotations

import os
import sys

import click
from rich.console import Console

from bhtcli import __version__
from bhtcli.maths.bounds import bound as bound_fn
from bhtcli.commands.design import METHODS, design as design_fn
from bhtcli.errors import BhtError, InputError
from bhtcli.io.load import check_output_path, save_npy_atomic
from bhtcli.search.ladder import DEFAULT_MAX_STARTS
from bhtcli.search.optimize import DEFAULT_STARTS
from bhtcli.cli.render import render_bound_table, render_design_table, render_json

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _stdout() -> Console:
    return Console(no_color="NO_COLOR" in os.environ, soft_wrap=False)


def _stderr() -> Console:
    return Console(stderr=True, no_color="NO_COLOR" in os.environ)


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="bht")
def cli():
    """Design queries under an energy budget that tell two softmax models apart."""


MODEL_OPTION = click.option(
    "--model", type=click.Choice(["softmax", "leverage"]), default="softmax", show_default=True,
    help="softmax: answers ~ softmax(Ax), query x; leverage: answers ~ leverage scores of S^-1 A, query s.")
FLOOR_OPTION = click.option(
    "--floor", type=float, default=None,
    help="Leverage models only (required there): the box is FLOOR <= s_i^2 <= ENERGY.")


LINK_HELP = ("exp (softmax), poly:K (p_i ∝ s_i^K) or taylor:K (p_i ∝ sum_{j<=K} s_i^j/j!), "
             "K even; s = A x + bias")


def readout_options(fn):
    """--link-a/--link-b/--bias-a/--bias-b: how each model turns scores into probabilities."""
    for decorator in reversed([
        click.option("--link-a", default="exp", show_default=True, metavar="LINK",
                     help="Link of model A: " + LINK_HELP + "."),
        click.option("--link-b", default="exp", show_default=True, metavar="LINK",
                     help="Link of model B (as --link-a)."),
        click.option("--bias-a", default=None, metavar="FILE",
                     help="Bias of model A, one entry per row (any matrix format, e.g. F.safetensors:lm_head.bias)."),
        click.option("--bias-b", default=None, metavar="FILE", help="Bias of model B (as --bias-a)."),
    ]):
        fn = decorator(fn)
    return fn


DTYPE_OPTION = click.option(
    "--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
    help="Precision of the products with A and B during the search (float32: half the memory); "
         "reported numbers are recomputed in float64.")


def model_pair_options(fn=None, *, energy_list=False):
    """A, B, --model, --energy, --floor and --error: shared by commands that compare two models
    (energy_list: --energy also takes a comma list of budgets)."""
    if fn is None:
        return lambda f: model_pair_options(f, energy_list=energy_list)
    energy = click.option(
        "--energy", "-E", type=str if energy_list else float, required=True,
        help="softmax: budget on ||x||_2; leverage: upper bound C on every s_i^2"
             + ("; a comma list (0.5,1,2,4) gives one design per budget." if energy_list else "."))
    for decorator in reversed([
        click.argument("a", metavar="A"),
        click.argument("b", metavar="B"),
        MODEL_OPTION,
        energy,
        FLOOR_OPTION,
        click.option("--error", "alpha", type=float, default=0.05, show_default=True,
                     help="Target for both error probabilities (0 < ALPHA < 0.5)."),
        readout_options,
    ]):
        fn = decorator(fn)
    return fn


def _readout(model, link_a, link_b, bias_a, bias_b) -> dict:
    """The link/bias keyword arguments for the library (refused for leverage models)."""
    settings = dict(link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b)
    if model == "leverage":
        from bhtcli.models.answers import check_no_readout
        check_no_readout(*settings.values())
        return {}
    return settings


@cli.command(context_settings=CONTEXT)
@model_pair_options(energy_list=True)
@click.option("--starts", type=int, default=None,
              help=f"Exact number of starting points [default: adaptive rounds of {DEFAULT_STARTS} and more, see --max-starts; leverage: 6, or 3 when n*d^2 > 1e7].")
@click.option("--max-starts", type=int, default=DEFAULT_MAX_STARTS, show_default=True,
              help="Budget of the adaptive rounds: at most this many starts per budget (raise it when the table warns).")
@click.option("--queries", default=None, metavar="N",
              help="Find the smallest budget <= --energy whose designed query needs at most N queries.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="With a list of budgets: write a PNG of H^2 and predicted queries against the budget.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random starts.")
@click.option("--method", type=click.Choice(METHODS), default="lbfgs", show_default=True,
              help="lbfgs: batched projected L-BFGS (scales); ccp: cvxpy cross-check (small models).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of tables.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the query x to this .npy file.")
@DTYPE_OPTION
def design(a, b, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b, starts, max_starts,
           queries, plot, seed, method, as_json, out, dtype):
    """Find the query x (||x|| <= E) that best separates A from B, and how many it takes.

    A and B are n x d matrices: .npy, .npz (FILE.npz:KEY), .csv/.txt, or - for stdin.

    \b
    Examples:
      bht design A.npy B.npy --energy 1.0
      bht design A.npy B.npy --energy 1.0 --json | jq .samples.predicted
      bht design A.csv B.csv --energy 2 --error 0.01 --out x.npy
      bht design A.npy A.npy --link-b taylor:4 --energy 3     # softmax vs its degree-4 surrogate
      bht design A.npy B.npy --energy 8 --queries 100         # the smallest budget for 100 queries
      bht design A.npy B.npy --energy 0.5,1,2,4 --plot curve.png   # the budget curve
    """
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    energies = _energy_list(energy)
    if out:
        check_output_path(out)
    if plot:
        check_output_path(plot, "--plot")
        if not plot.lower().endswith(".png"):
            raise InputError(f"--plot {plot}: the plot is a PNG; name the file *.png")
        if len(energies) < 2:
            raise InputError("--plot draws the budget curve: give --energy a comma list (0.5,1,2,4)")
    if queries is not None:
        from bhtcli.commands.design import check_queries
        queries = check_queries(queries)
        if len(energies) != 1:
            raise InputError("--queries searches budgets up to one --energy EMAX; give one number")
    if len(energies) > 1 and out:
        raise InputError("--out writes one query: use it with a single --energy")
    err = _stderr()
    progress = (lambda msg: err.print(f"[dim]{msg}[/dim]")) if not as_json else None
    if len(energies) > 1 or queries is not None:
        result = _design_budgets(a, b, model, energies, floor, alpha, settings, starts, max_starts,
                                 queries, seed, method, dtype, progress)
        if len(energies) > 1:
            for w in result.designs[0].warnings:
                err.print(f"Warning: {w}", markup=False, highlight=False)
            if plot:
                from bhtcli.cli.plot import plot_budget_curve
                plot_budget_curve(result, plot)
            from bhtcli.cli.render import render_curve_table
            _emit(result, as_json, render_curve_table)
            return
    elif model == "leverage":
        from bhtcli.commands.leverage_design import design_leverage
        if method != "lbfgs":
            raise InputError("--method ccp is for softmax models; leverage models use L-BFGS-B")
        if dtype != "float64":
            raise InputError("--dtype float32 is for softmax-family models; leverage models run in float64")
        result = design_leverage(a, b, energy, floor, error=alpha, seed=seed, progress=progress,
                                 starts=starts)
    else:
        _no_floor(floor)
        result = design_fn(a, b, energies[0], error=alpha, seed=seed, method=method,
                           progress=progress, starts=starts, max_starts=max_starts, dtype=dtype,
                           **settings)
    for w in result.warnings:
        err.print(f"Warning: {w}", markup=False, highlight=False)
    if out:
        import numpy as np
        save_npy_atomic(out, np.asarray(result.query))
    _emit(result, as_json, render_design_table)


def _energy_list(text) -> list:
    """--energy E or a comma list E1,E2,... (increasing, each > 0)."""
    from bhtcli.commands.design import check_energies
    parts = [p.strip() for p in str(text).split(",")]
    if any(p == "" for p in parts):
        raise InputError(f"--energy {text}: give a number or a comma list of numbers (0.5,1,2,4)")
    return check_energies(parts)


def _design_budgets(a, b, model, energies, floor, alpha, settings, starts, max_starts, queries,
                    seed, method, dtype, progress):
    """--queries N or a list of budgets: one library call each."""
    if method != "lbfgs":
        raise InputError("--method ccp designs at one budget; lists and --queries use lbfgs")
    if model == "leverage":
        from bhtcli.commands import leverage_design as lev
        if dtype != "float64":
            raise InputError("--dtype float32 is for softmax-family models; leverage models run in float64")
        if queries is not None:
            return lev.design_leverage_for_queries(a, b, queries, energies[0], floor, error=alpha,
                                                   seed=seed, progress=progress, starts=starts)
        return lev.design_leverage_curve(a, b, energies, floor, error=alpha, seed=seed,
                                         progress=progress, starts=starts)
    _no_floor(floor)
    from bhtcli.commands.design import design_curve, design_for_queries
    kw = dict(error=alpha, seed=seed, progress=progress, starts=starts, max_starts=max_starts,
              dtype=dtype, **settings)
    if queries is not None:
        return design_for_queries(a, b, queries, energies[0], **kw)
    return design_curve(a, b, energies, **kw)


@cli.command(context_settings=CONTEXT)
@model_pair_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of a table.")
def bound(a, b, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b, as_json):
    """Closed-form bounds, no optimisation: certified sup H^2 and query lower bounds.

    \b
    Examples:
      bht bound A.npy B.npy --energy 1.0
      bht bound A.npy B.npy --energy 1.0 --json | jq .samples_lower_any_strategy
    """
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    if model == "leverage":
        from bhtcli.commands.leverage_design import bound_leverage
        result = bound_leverage(a, b, energy, floor, error=alpha)
    else:
        _no_floor(floor)
        result = bound_fn(a, b, energy, error=alpha, **settings)
    _emit(result, as_json, render_bound_table)


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@MODEL_OPTION
@click.option("--query", "-x", required=True,
              help="The query (.npy from `design --out`, or any matrix format): x, or s for leverage.")
@click.option("--count", "-n", type=int, required=True, help="Number of answers to draw.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--link-a", "link", default="exp", show_default=True, metavar="LINK",
              help="Link of model A: " + LINK_HELP + ".")
@click.option("--bias-a", "bias", default=None, metavar="FILE", help="Bias of model A, one entry per row.")
def sample(a, model, query, count, seed, link, bias):
    """Draw answers of model A to query x: 0-based indices, one per line (a stand-in black box).

    \b
    Examples:
      bht sample A.npy --query x.npy --count 50
      bht sample A.npy --query x.npy --count 50 | bht decide A.npy B.npy --query x.npy -
    """
    from bhtcli.models.answers import sample as sample_fn
    answers = sample_fn(a, query, count, seed=seed, model=model, link=link, bias=bias)
    out = sys.stdout
    for start in range(0, len(answers), 65536):
        out.write("\n".join(map(str, answers[start:start + 65536].tolist())) + "\n")


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.argument("answers", metavar="ANSWERS")
@MODEL_OPTION
@click.option("--query", "-x", required=True, help="The query the answers respond to (x, or s for leverage).")
@click.option("--error", "alpha", type=float, default=0.05, show_default=True,
              help="Target error: SPRT thresholds +-ln((1-ALPHA)/ALPHA).")
@readout_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of a table.")
def decide(a, b, answers, model, query, alpha, link_a, link_b, bias_a, bias_b, as_json):
    """Decide from observed answers (a file or -, one index per line or a JSON list) which model answered.

    \b
    Examples:
      bht decide A.npy B.npy --query x.npy answers.txt
      bht sample B.npy --query x.npy --count 40 | bht decide A.npy B.npy --query x.npy - --json
    """
    from bhtcli.commands.decide import decide as decide_fn
    from bhtcli.cli.render import render_decide_table
    if a == "-" or b == "-":
        raise InputError("A and B must be files for decide (standard input carries the answers)")
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    result = decide_fn(a, b, query, answers, error=alpha, model=model, **settings)
    _emit(result, as_json, render_decide_table)


@cli.command(context_settings=CONTEXT)
@model_pair_options
@click.option("--query", "-x", default=None, help="Simulate this query instead of designing one.")
@click.option("--trials", type=int, default=10_000, show_default=True, help="Monte Carlo trials per model.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (design and simulation).")
@click.option("--policy", type=click.Choice(["fixed", "sprt", "adaptive", "all"]), default="all",
              show_default=True, help="Which strategies to simulate.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Write a PNG: max error against n, empirical vs predicted and bounds (needs fixed).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of tables.")
@DTYPE_OPTION
def simulate(a, b, model, energy, floor, alpha, link_a, link_b, bias_a, bias_b, query, trials, seed,
             policy, plot, as_json, dtype):
    """Simulate how many queries it really takes: fixed n, Wald's SPRT, Chernoff's adaptive rule.

    \b
    Examples:
      bht simulate A.npy B.npy --energy 1.0
      bht simulate A.npy B.npy --energy 1.0 --policy fixed --plot errors.png
      bht simulate A.npy B.npy --energy 1.0 --query x.npy --json | jq .sprt
    """
    from bhtcli.cli.render import render_simulate_table
    from bhtcli.commands.simulate import simulate as simulate_fn
    if plot:
        check_output_path(plot, "--plot")
        if not plot.lower().endswith(".png"):
            raise InputError(f"--plot {plot}: the plot is a PNG; name the file *.png")
        if policy not in ("fixed", "all"):
            raise InputError("--plot draws the fixed-n experiment; use --policy fixed or all")
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TimeElapsedColumn(), console=_stderr(), transient=True,
                   disable=not _stderr().is_terminal)
    with bar:
        task = bar.add_task("simulating", total=None)

        def say(message, step=None, total=None):
            bar.update(task, description=message, completed=step, total=total)

        if model != "leverage":
            _no_floor(floor)
        settings = _readout(model, link_a, link_b, bias_a, bias_b)
        if model != "leverage":
            settings["dtype"] = dtype
        result = simulate_fn(a, b, energy, query=query, error=alpha, trials=trials, seed=seed,
                             policy=policy, progress=say, model=model, floor=floor,
                             predicted_points=80 if plot else 0, **settings)
        if plot:
            say("plotting")
            from bhtcli.cli.plot import plot_fixed
            plot_fixed(result, plot)
    _emit(result, as_json, render_simulate_table)


@cli.command(context_settings=CONTEXT)
@click.argument("manifest", metavar="MANIFEST")
@click.option("--out", "results", required=True, metavar="RESULTS",
              help="Results journal (JSONL, one row per finished task); rerun the same command to resume.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786) [default: a local cluster on this machine].")
@click.option("--workers", type=int, default=None, help="Worker processes of the local cluster [default: the CPUs].")
@click.option("--export", type=click.Path(dir_okay=False), default=None,
              help="At the end, write the manifest's rows with their results to FILE.csv or FILE.parquet.")
@click.option("--retry-failed", is_flag=True, help="Run the tasks whose rows say failed again.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of a table.")
def sweep(manifest, results, scheduler, workers, export, retry_failed, as_json):
    """Run design for every row of a manifest (a, b, energy, ...) on Dask, resumably.

    MANIFEST is a CSV or JSONL file, one task per row: a, b (matrix paths relative to it),
    energy, and optionally model, floor, error, seed, starts, queries (the smallest budget <=
    energy for that many queries), name and label_* columns.

    \b
    Examples:
      bht sweep pairs.csv --out results.jsonl
      bht sweep pairs.csv --out results.jsonl --workers 2 --export results.parquet
      bht sweep pairs.jsonl --out results.jsonl --scheduler tcp://10.0.0.5:8786 --json
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from bhtcli.cli.render import render_sweep_table
    from bhtcli.sweep.driver import sweep as sweep_fn
    err = _stderr()
    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                   TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal)
    with bar:
        task = bar.add_task("sweep", total=None, failed=0)
        try:
            result = sweep_fn(manifest, results, scheduler=scheduler, workers=workers, export=export,
                              retry_failed=retry_failed,
                              progress=lambda done, total, failed: bar.update(task, completed=done, total=total,
                                                                              failed=failed),
                              notice=lambda message: click.echo(f"Note: {message}", err=True))
        except KeyboardInterrupt:
            click.echo(f"Error: interrupted; finished tasks are saved in {results}: rerun the same "
                       "command to run the rest", err=True)
            sys.exit(130)
    _emit(result, as_json, render_sweep_table)
    if result.failed:
        raise BhtError(f"{result.failed} of {result.tasks} tasks failed; their rows in {results} have "
                       'status "failed" and say why in the column failure')


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@click.option("--data", "data", required=True,
              help="A .npz archive: Q (m x d queries) and Y (m x n target distributions, or m integer labels).")
@click.option("--lr", type=float, required=True, help="Learning rate eta of the gradient steps (> 0).")
@click.option("--steps", type=int, default=1, show_default=True, help="Number of full-batch gradient steps.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Write the updated model B here (.npy).")
@click.option("--energy", "-E", type=float, default=None,
              help="Also report how many queries with ||x|| <= ENERGY detect the update (design + small-perturbation estimate).")
@click.option("--error", "alpha", type=float, default=0.05, show_default=True,
              help="Target for both error probabilities of those counts (0 < ALPHA < 0.5).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random starts (with --energy).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of a table.")
def shift(a, data, lr, steps, out, energy, alpha, seed, as_json):
    """Gradient steps of softmax regression move A to B: write B, report the loss and the shift.

    The loss is L(A) = (1/2m) sum_j ||softmax(A q_j) - y_j||^2 over the data set.

    \b
    Examples:
      bht shift A.npy --data D.npz --lr 10 --steps 10 --out B.npy
      bht shift A.npy --data D.npz --lr 10 --out B.npy --energy 1.0 --json | jq .detection.samples
    """
    from bhtcli.cli.render import render_shift_table
    from bhtcli.commands.shift import shift as shift_fn
    err = _stderr()
    progress = (lambda msg: err.print(f"[dim]{msg}[/dim]")) if not as_json else None
    result = shift_fn(a, data, lr, steps, out=out, energy=energy, error=alpha, seed=seed, progress=progress)
    _emit(result, as_json, render_shift_table)


def _emit(result, as_json: bool, render_table) -> None:
    """The one place a result reaches stdout: one JSON object, or tables."""
    if as_json:
        click.echo(render_json(result))
    else:
        render_table(result, _stdout())


def _no_floor(floor):
    if floor is not None:
        raise InputError("--floor applies to --model leverage only; softmax queries are bounded by "
                         "--energy on ||x||_2")


def main(argv=None) -> None:
    """Console entry point: every expected failure is one 'Error: ...' line on stderr."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:                      # plain `bht`: the overview, as help, successfully
        click.echo(cli.get_help(click.Context(cli, info_name="bht")))
        sys.exit(0)
    try:
        cli.main(args=args, prog_name="bht", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Error: aborted", err=True)
        sys.exit(1)
    except click.UsageError as exc:
        click.echo(f"Error: {exc.format_message()} (see bht {_command(exc)}--help)", err=True)
        sys.exit(2)
    except InputError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except BhtError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except MemoryError:
        click.echo("Error: out of memory; the matrices are too large for this machine", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("Error: interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


def _command(exc) -> str:
    ctx = getattr(exc, "ctx", None)
    return f"{ctx.info_name} " if ctx is not None and ctx.parent is not None else ""
