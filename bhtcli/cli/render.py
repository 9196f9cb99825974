"""The only code that prints results: `emit(result)` picks the table renderer by the result's
type, or writes one JSON object; `stderr()` is the console for progress and warnings.

Streams: stdout carries the result only (a table or one JSON object); warnings, notes and
progress go to stderr. When stdout is not a terminal the tables are plain lines: no colour or
other escape codes, no wrapping, nothing cut, no trailing spaces. NO_COLOR (set and not empty)
removes every style escape on a terminal too.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time

from rich.console import Console
from rich.table import Table

from bhtcli.api import (BoundResult, BudgetCurveResult, DecideResult, DesignResult,
                        LeverageBoundResult, QuantizeResult, RankResult, ShiftResult, SimulateResult,
                        SweepResult, TensorsResult, PromptsResult)

from bhtcli.cli import render_sections as sections  # noqa: E402
from bhtcli.cli.cells import num as _num, query_text as _query_text, short as _short, two_columns as _table  # noqa: E402
from bhtcli.cli.output import ClosedPipe, OutputState  # noqa: E402

PLAIN_WIDTH = 1 << 20        # "no wrapping" for plain output: wider than any line


def no_color() -> bool:
    """NO_COLOR is set to a non-empty value (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def stderr() -> Console:
    """Progress, warnings and notes: styled on a terminal (no styles under NO_COLOR)."""
    return Console(stderr=True, color_system=None if no_color() else "auto", highlight=False)


def render_json(result) -> str:
    """Exactly one JSON object (no NaN/Infinity: non-finite numbers become null)."""
    return json.dumps(result.to_dict(), allow_nan=False)


# The console of the live progress line while one is shown (cli/progress.py): a line written
# to stderr then goes above the live line through it, instead of onto the line's text.
LIVE: list = []


def stderr_line(text: str) -> None:
    """One line on stderr, above the live progress line when one is shown."""
    if LIVE:
        LIVE[-1].print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def warn(messages) -> None:
    """Each message as one 'Warning: ...' line on stderr."""
    for message in messages:
        stderr_line(f"Warning: {message}")


def emit(result, as_json: bool = False) -> None:
    """The one place a result reaches stdout: one JSON object, or its tables.

    The result's warnings (if any) go to stderr first.
    """
    warn(getattr(result, "warnings", None) or [])
    OutputState.stdout_used = True
    with _stdout_faults():
        if as_json:
            write_stdout(render_json(result) + "\n")
            return
        render = RENDERERS[type(result)]
        if sys.stdout.isatty():
            render(result, Console(color_system=None if no_color() else "auto", soft_wrap=False,
                                   highlight=False))
            return
        buffer = io.StringIO()
        render(result, Console(file=buffer, width=PLAIN_WIDTH, color_system=None, force_terminal=False,
                               highlight=False, soft_wrap=False))
        write_stdout("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def write_lines(values, block: int = 65536) -> None:
    """Integers (or lines) to stdout, one per line (sample's answers), in blocks."""
    OutputState.stdout_used = True
    with _stdout_faults():
        for start in range(0, len(values), block):
            chunk = values[start:start + block]
            write_stdout("\n".join(map(str, chunk.tolist() if hasattr(chunk, "tolist") else chunk))
                         + "\n")


def write_stdout(text: str) -> None:
    """Write `text` to stdout whole, and flush.

    Under PYTHONUNBUFFERED=1 stdout's text layer sits on the raw file, whose write may write
    only part of the bytes (a pipe whose reader left: | head) and say so in its return value,
    which the text layer ignores: the rest would be lost without an error, and the run would
    end with status 0 instead of 141. The bytes are written here until all of them are taken
    (or the next write raises BrokenPipeError)."""
    stream = sys.stdout
    binary = getattr(stream, "buffer", None)
    if binary is None:              # a text-only stream (io.StringIO)
        stream.write(text)
        stream.flush()
        return
    stream.flush()
    data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    while data:
        written = binary.write(data)
        if written is None:         # a non-blocking stdout that is full: wait, then go on
            time.sleep(0.01)
            continue
        data = data[written:]
    binary.flush()


@contextlib.contextmanager
def _stdout_faults():
    """A failed write to stdout (disk full, I/O error) becomes one OutputError; a closed pipe
    (BrokenPipeError) becomes ClosedPipe, on which the caller ends quietly."""
    from bhtcli.api import OutputError
    try:
        yield
    except BrokenPipeError:
        raise ClosedPipe() from None
    except OSError as exc:
        raise OutputError(f"standard output: cannot write it ({exc.strerror or exc}); free some "
                          "space or redirect it elsewhere") from None


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _readout_rows(table, r) -> None:
    """Links, biases and precision, shown only when they differ from plain float64 softmax."""
    ro = r.get("readout")
    if ro and "links" in ro:            # K models: one link and bias each, in their order
        if any(link != "exp" for link in ro["links"]):
            table.add_row("links", "   ".join(f"{k + 1}: {link}" for k, link in enumerate(ro["links"])))
        if any(ro["biases"]):
            table.add_row("biases", "   ".join(f"{k + 1}: {'yes' if b else 'no'}"
                                               for k, b in enumerate(ro["biases"])))
        ro = None
    if ro and (ro["link_a"] != "exp" or ro["link_b"] != "exp"):
        table.add_row("links", f"A: {ro['link_a']}   B: {ro['link_b']}")
    if ro and (ro["bias_a"] or ro["bias_b"]):
        table.add_row("biases", f"A: {'yes' if ro['bias_a'] else 'no'}   B: {'yes' if ro['bias_b'] else 'no'}")
    if r.get("dtype", "float64") != "float64":
        table.add_row("precision", f"{r['dtype']} products, float64 report")


def _models(r: dict) -> str:
    """'  3 models' in a title when the result is of K models, else nothing."""
    return f"  {len(r['models'])} models" if r.get("models") else ""


def render_design_table(result, console: Console) -> None:
    """design's tables, two models or K (docs/kway.md): the query, the separation and counts
    (K: each pair's as matrices), the certificate, the solver, the candidates, the schedule."""
    r = result.to_dict()
    console.print(_design_head(r))
    if r["distinguishable"]:
        sections.separation(r, console)
        console.print(sections.certificate_table(r))
        console.print(sections.solver_table(r))
    if r.get("candidates"):
        sections.candidates(r, console)
    sections.schedule(r, console)


def _design_head(r: dict) -> Table:
    leverage = r["model"] == "leverage"
    box = f"box {_num(r['floor'])} <= s_i^2 <= {_num(r['energy'])}" if leverage else f"E={_num(r['energy'])}"
    head = _table(f"bht design  {r['model']}{_models(r)}  n={r['n']:,}  d={r['d']:,}  {box}  "
                  f"alpha={_num(r['target_error'])}")
    if not r["distinguishable"]:
        _readout_rows(head, r)
        head.add_row("distinguishable", "no")
        head.add_row("why", r.get("note"))
        ceiling = (r.get("certificate") or {}).get("hellinger_squared_max_bound")
        if ceiling:         # equal up to rounding: exact arithmetic would allow this much
            head.add_row("samples needed", "- (the difference is below float64's resolution)")
            head.add_row("sup H^2 over the ball <=", _num(ceiling) + "  (in exact arithmetic)")
        else:
            head.add_row("samples needed", "- (no query x can tell these two matrices apart)")
        return head
    if leverage:
        s2 = [v * v for v in r["query"]]
        head.add_row("query s", _query_text(r["query"]) + ("  (full vector: --json or --out)" if r["n"] > 8 else ""))
        head.add_row("s_i^2 range", f"{_num(min(s2))} to {_num(max(s2))}  "
                     f"({100 * r['solver']['fraction_at_box_faces']:.0f}% of entries on a face of the box)")
    else:
        where = "on the sphere" if r["on_boundary"] else "inside the ball"
        cand = r.get("candidates")
        what = "query x"
        if cand:
            what = f"query x = candidate {cand['best_index']:,}"
        head.add_row(what, _query_text(r["query"]) + ("  (full vector: --json or --out)" if r["d"] > 8 else ""))
        if cand and cand.get("best_name") is not None:
            head.add_row("name", _short(cand["best_name"], 72))
        head.add_row("||x||", f"{_num(r['query_norm'])}  ({where})")
        if r.get("subspace_rank"):
            head.add_row("subspace", f"x = V z, V of rank {r['subspace_rank']:,} (orthonormalised); "
                                     "certificate: over that subspace")
        if r.get("models"):
            head.add_row("bottleneck pair", f"{sections.pair_name(r['bottleneck'])}  (the closest pair at x)")
            head.add_row("bottleneck H^2", _num(r["hellinger_squared"]))
            head.add_row("bottleneck D", _num(r["bhattacharyya_distance"]))
    _readout_rows(head, r)
    head.add_row("distinguishable", "yes")
    es = r.get("energy_search")
    if es:
        what = "C" if leverage else "E"
        head.add_row("budget found", f"{what} = {_num(r['energy'])}: the smallest <= {_num(es['energy_max'])} "
                     f"whose query needs <= {_num(es['queries'])} queries "
                     f"(bisection to {100 * es['relative_tolerance']:g}%, {len(es['rungs'])} budgets tried)")
    if r.get("note"):
        head.add_row("note", r["note"])
    return head


def render_bound_table(result, console: Console) -> None:
    """bound's table: leverage's box, two softmax models, or K (each pair's ceiling as a matrix)."""
    r = result.to_dict()
    c = r["certificate"]
    if r["model"] == "leverage":
        t = _table(f"bht bound  leverage  n={r['n']:,}  d={r['d']:,}  box {_num(r['floor'])} <= s_i^2 <= "
                   f"{_num(r['energy'])}  alpha={_num(r['target_error'])}")
        t.add_row("distinguishable", "yes" if r["distinguishable"] else "no")
        t.add_row("rank of A / B", f"{r['rank_a']} / {r['rank_b']}")
        t.add_row("lambda_min (larger of A^T A, B^T B)", _num(c["lambda_min_larger"]))
        t.add_row("sum_i ||b_i b_i^T - a_i a_i^T||_op", _num(c["sum_op_norm_diff"]))
        t.add_row("TV over the box <=", _num(c["tv_max_bound"]) + sections.tv_method(c))
        t.add_row("fixed-budget queries >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
        console.print(t)
        return
    t = _table(f"bht bound  softmax{_models(r)}  n={r['n']:,}  d={r['d']:,}  E={_num(r['energy'])}  "
               f"alpha={_num(r['target_error'])}")
    if r.get("models"):
        if sections.bottleneck_ceiling(t, c, "({})"):
            t.add_row("bottleneck H^2 <=", _num(c["hellinger_squared_max_bound"]))
            t.add_row("fixed-budget answers >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
        console.print(t)
        sections.pairs_sections(r, console, (("Ceiling on D over the ball, each pair", "bhattacharyya_max_bound"),))
        return
    _readout_rows(t, r)
    t.add_row("distinguishable", "yes" if r["distinguishable"] else "no")
    if r["note"]:
        t.add_row("why", r["note"])
    t.add_row("paper's eps = ||A - B||_{2->inf}", _num(r["row_norm_2inf"]))
    t.add_row("row diameter of A - B", _num(c["row_diameter"]) + ("  (exact)" if c["row_diameter_exact"] else "  (upper bound)"))
    if r.get("readout") and not (r["readout"]["link_a"] == r["readout"]["link_b"] == "exp"):
        t.add_row("spread of log-weight differences <=", _num(c["score_spread_bound"]))
    t.add_row("sup H^2 over the ball <=", _num(c["hellinger_squared_max_bound"]) + sections.binds(c))
    t.add_row("fixed-budget queries >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    if sections.says_something(c["mean_samples_lower_sequential"]):
        t.add_row("mean sequential queries >=", _num(c["mean_samples_lower_sequential"]))
    if c.get("note"):
        t.add_row("note", c["note"])
    console.print(t)


def render_decide_table(result, console: Console) -> None:
    """decide's table: the SPRT of two models, or K models' matrix SPRT and posterior."""
    r = result.to_dict()
    names = r.get("models")
    N = _plural(r["samples_total"], "answer")
    t = _table(f"bht decide{_models(r)}  {N}  alpha={_num(r['target_error'])}")
    used = f"after {r['samples_used']:,} of {r['samples_total']:,} answers"
    if not names:
        t.add_row("SPRT decision", f"{r['decision']}  ({used}; thresholds +-{_num(r['threshold'], 4)})")
        t.add_row("log-likelihood ratio", f"{_num(r['llr'])}  (all answers; > 0 favours A)")
        t.add_row("P(A | answers)", f"{_num(r['posterior_a'])}  (equal priors)")
        t.add_row("fixed-sample verdict", f"{r['fixed_verdict']}  (best test on {N}: "
                                          f"both errors {_num(r['fixed_error'], 3)})")
        t.add_row("Bhattacharyya bound", f"{_num(r['fixed_error_bound'], 3)}  (BC^N, a looser bound on both errors)")
        if r["expected_more"] is not None:
            t.add_row("more answers needed", f"about {_plural(r['expected_more'], 'answer')} (Wald, if {r['favoured']} is true)")
        console.print(t)
        return
    name = lambda k: "undecided" if k is None else f"M{k + 1} ({names[k]})"
    t.add_row("sequential decision", f"{name(r['decision_index'])}  ({used}; every log-likelihood "
              f"ratio past {_num(r['threshold'], 4)})")
    t.add_row("fixed-sample verdict", f"{'tie' if r['fixed_verdict_index'] is None else name(r['fixed_verdict_index'])}  "
              f"(maximum likelihood on {N}: largest error {_num(r['fixed_error'], 3)}, predicted)")
    bound = r["fixed_error_bound"]
    t.add_row("union bound", f"{_num(bound, 3)}  (every error <= this, a looser bound)" if bound < 1
              else "says nothing at this many answers (sum of Chernoff bounds >= 1)")
    if r["queries_used"] > 1:
        t.add_row("queries", f"{r['queries_used']} (a schedule)")
    console.print(t)
    m = Table(title="\nEach model", title_justify="left", box=None, pad_edge=False, header_style="bold")
    for col in ("model", "log-likelihood", "prior", "posterior", "name"):
        m.add_column(col, justify="left" if col == "name" else "right", no_wrap=True)
    for k, (ll, pr, po) in enumerate(zip(r["log_likelihoods"], r["priors"], r["posterior"])):
        m.add_row(f"M{k + 1}", _num(ll), _num(pr, 4), _num(po, 4), names[k])
    console.print(m)


def render_simulate_table(result, console: Console) -> None:
    """simulate's tables: fixed n, the SPRT and the adaptive rule, for two models or K."""
    r = result.to_dict()
    names = r.get("models")
    q = "s" if r["model"] == "leverage" else "x"
    box = (f"box {_num(r.get('floor'))} <= s_i^2 <= {_num(r['energy'])}" if q == "s"
           else f"E={_num(r['energy'])}")
    head = _table(f"bht simulate  {_models(r).strip() or r['model']}  n={r['n']:,}  d={r['d']:,}  {box}  "
                  f"alpha={_num(r['target_error'])}  {_plural(r['trials'], 'trial')}"
                  + ("" if names else " per model"))
    if names:
        _simulate_kway(r, head, console)
    else:
        _simulate_pair(r, q, head, console)
    console.print(f"\n[dim]{r['seconds']:.2f} s[/dim]")


def _simulate_pair(r: dict, q: str, head: Table, console: Console) -> None:
    head.add_row(f"query {q}", _query_text(r["query"]))
    head.add_row(f"H^2 at {q}", _num(r["hellinger_squared"]))
    if not r["distinguishable"]:
        head.add_row("distinguishable", "no")
        head.add_row("why", r["note"])
        console.print(head)
        return
    console.print(head)
    f = r["fixed"]
    if f:
        t = _table(f"\nFixed n (best threshold test, {q} repeated)")
        lo, hi = f["interval"]
        t.add_row("empirical n", f"{_num(f['empirical'])}  (95% interval {_num(lo)}-{_num(hi)})")
        t.add_row("predicted", _num(f["predicted"]))
        t.add_row("lower / upper bound", f"{_num(f['lower'])} / {_num(f['upper'])}")
        console.print(t)
    for key, title in (("sprt", f"Wald's SPRT, {q} repeated"), ("adaptive", "Adaptive (Chernoff's rule)")):
        s = r[key]
        if not s:
            continue
        t = _table(f"\n{title}")
        t.add_row("mean queries (A / B true)", f"{_num(s['mean_samples_a'], 4)} / {_num(s['mean_samples_b'], 4)}")
        t.add_row("95th percentile (A / B)", f"{_num(s['p95_samples_a'])} / {_num(s['p95_samples_b'])}")
        t.add_row("realised error (A / B)", f"{_num(s['error_a'], 3)} / {_num(s['error_b'], 3)}")
        if key == "sprt":
            t.add_row("Wald lower bound (A / B)", f"{_num(s['wald_lower_a'], 4)} / {_num(s['wald_lower_b'], 4)}  (this query)")
        else:
            t.add_row(f"saving vs SPRT with {q}", f"{100 * s['saving_vs_sprt']:.1f}%")
        if s["undecided"]:
            t.add_row("undecided trials", _num(s["undecided"]))
        console.print(t)


def _simulate_kway(r: dict, head: Table, console: Console) -> None:
    """K models: the query or schedule, fixed n, the matrix SPRT, Chernoff's adaptive rule."""
    if len(r["weights"]) == 1:
        head.add_row("query x", _query_text(r["queries"][0]))
    else:
        head.add_row("schedule", ", ".join(f"{100 * w:.1f}%" for w in r["weights"]) + f" of {len(r['weights'])} queries")
    head.add_row("bottleneck D", _num(r["bhattacharyya_distance"]))
    _readout_rows(head, r)
    console.print(head)
    which = "  (" + " / ".join(f"M{k + 1}" for k in range(len(r["models"]))) + " true)"
    f, s, a = r["fixed"], r["sequential"], r.get("adaptive")
    if f:
        ft = _table("\nFixed n (maximum likelihood, every error <= alpha)")
        ft.add_row("empirical n", _num(f["empirical"]))
        ft.add_row("predicted", _num(f["predicted"]))
        ft.add_row("lower / upper bound", f"{_num(f['lower'])} / {_num(f['upper'])}")
        ft.add_row("worst error at predicted n", f"{_num(f['error_at_predicted'], 3)}  (model M{f['worst_model'] + 1})")
        console.print(ft)
    for rule, title in ((s, "Matrix SPRT (every error <= alpha)"),
                        (a, "Chernoff's adaptive rule (the leader's mix of queries; matrix SPRT stop)")):
        if not rule:
            continue
        t = _table("\n" + title)
        t.add_row("mean answers", " / ".join(_num(v, 4) for v in rule["mean_samples"]) + which)
        if rule is a:
            t.add_row("first-order mean", " / ".join("-" if v is None else _num(v, 4)
                                                    for v in a["mean_samples_predicted"])
                      + "  (ln((K-1)/alpha) / the leader's exponent)")
        t.add_row("realised error", " / ".join(_num(v, 3) for v in rule["error"]) + which)
        if rule is s:
            t.add_row("stop", f"the leader's log-likelihood ratio against every other model >= {_num(s['threshold'], 4)}")
        else:
            t.add_row("queries", f"{len(a['queries'])} candidates asked (the simulated query, "
                                 "argmax KL(P_k||P_j))")
            if "saving_vs_sprt" in a:
                t.add_row("saving vs the SPRT", f"{100 * a['saving_vs_sprt']:.1f}%  (mean over the true model)")
        t.add_row("undecided at the cap", _num(rule["undecided"]))
        console.print(t)


def render_sweep_table(result, console: Console) -> None:
    r = result.to_dict()
    t = _table(f"bht sweep  {r['manifest']} -> {r['results']}")
    t.add_row("tasks", f"{_num(r['tasks'])}  ({_num(r['ok'])} ok, {_num(r['failed'])} failed)"
              + (f"  from {_num(r['manifest_rows'])} manifest rows" if r["manifest_rows"] != r["tasks"] else ""))
    t.add_row("run now", f"{_num(r['ran'])}  ({_num(r['already_done'])} already in the results)")
    if r["workers"]:
        rate = f", {r['tasks_per_second']:.3g} tasks/s" if r["tasks_per_second"] else ""
        t.add_row("engine", f"{r['engine']}, {_plural(r['workers'], 'worker')}{rate}")
    if r["stale_rows"]:
        t.add_row("rows of no current task", f"{_num(r['stale_rows'])}  (kept in the results, not exported)")
    for f in r["failures"]:
        t.add_row(f"failed, line {f['line']}", f["failure"])
    if r["failed"] > len(r["failures"]):
        t.add_row("", f"... and {_num(r['failed'] - len(r['failures']))} more (status \"failed\" in the results)")
    if r["export"]:
        t.add_row("exported", r["export"])
    t.add_row("time", f"{r['seconds']:.2f} s")
    console.print(t)


def render_shift_table(result, console: Console) -> None:
    r = result.to_dict()
    t = _table(f"bht shift  softmax regression  n={r['n']:,}  d={r['d']:,}  m={r['m']:,}  "
               f"lr={_num(r['lr'])}  steps={r['steps']:,}")
    t.add_row("loss before", _num(r["loss_before"]))
    t.add_row("loss after", f"{_num(r['loss_after'])}  ({_num(r['loss_after'] - r['loss_before'], 4)})")
    t.add_row("||grad L(A)||_F", _num(r["grad_norm"]))
    t.add_row("||B - A||_F", _num(r["delta_frobenius"]))
    t.add_row("||B - A||_{2->inf}", _num(r["row_norm_2inf"]))
    if r["out"]:
        t.add_row("B written to", r["out"])
    console.print(t)
    det = r["detection"]
    if not det:
        return
    sp = det["small_perturbation"]
    title = (f"\nQueries that detect the update (||x|| <= {_num(r['energy'])}, both errors <= "
             f"{_num(r['target_error'])})")
    if not det["distinguishable"]:
        d = _table(title)
        d.add_row("distinguishable", "no (B = A + 1 w^T: the same softmax model)")
        console.print(d)
        return
    d = Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold")
    d.add_column("", style="bold", no_wrap=True, min_width=28)
    d.add_column("designed query", no_wrap=True)
    d.add_column("small-perturbation estimate", no_wrap=True)
    s, e = det["samples"], sp["samples"]
    d.add_row("nu = sup Var_A((B - A) x)", "-", _num(sp["nu"]))
    d.add_row("Bhattacharyya D", _num(det["bhattacharyya_distance"]), f"{_num(sp['bhattacharyya_distance_estimate'])}  (nu/8)")
    d.add_row("H^2", _num(det["hellinger_squared"]), f"{_num(sp['hellinger_squared_estimate'])}  (1 - e^-nu/8)")
    d.add_row("lower (any test)", _num(s["lower"]), _num(e["lower"]))
    d.add_row("predicted", f"{_num(s['predicted'])}  \\[{s['method']}]", f"{_num(e['predicted'])}  (4 z^2 / nu)")
    d.add_row("upper (LR test, Chernoff)", _num(s["upper"]), _num(e["upper"]))
    d.add_row("||x||", _num(det["query_norm"]), _num(sp["query_norm"]))
    d.add_row("estimate / design (D)", "", _num(det["estimate_over_design"], 4))
    console.print(d)


def render_rank_table(result, console: Console) -> None:
    """rank's table and top rows (K models: by the bottleneck, with their numbers)."""
    r = result.to_dict()
    box = ""
    if r["energy"] is not None:
        box = (f"  box {_num(r['floor'])} <= s_i^2 <= {_num(r['energy'])}" if r["model"] == "leverage"
               else f"  E={_num(r['energy'])}")
    t = _table(f"bht rank  {r['model']}{_models(r)}  n={r['n']:,}  d={r['d']:,}{box}  alpha={_num(r['target_error'])}")
    _readout_rows(t, r)
    t.add_row("candidates", f"{r['count']:,}  ({r['eligible']:,} eligible)")
    if not r["distinguishable"]:
        t.add_row("distinguishable", "no")
        t.add_row("why", r["note"])
    else:
        t.add_row("best", f"row {r['best_index']:,}" + (f"  {_short(r['best_name'], 60)}" if r["best_name"] else ""))
    if r["out"]:
        t.add_row("all scores written to", r["out"])
    t.add_row("time", f"{r['seconds']:.2f} s")
    console.print(t)
    if r.get("models"):
        sections.pairs_sections(r, console, ())
    if r["distinguishable"]:
        console.print(sections.top_table(f"\nTop {len(r['top'])} candidates by {sections.by_what(r)} "
                                          "(row: 0-based in H)", r["top"]))


def render_curve_table(result, console: Console) -> None:
    """`design --energy E1,E2,...`: one row per budget."""
    rows = result.to_dict()["designs"]
    r0 = rows[0]
    leverage = r0["model"] == "leverage"
    t = Table(title=f"bht design  {r0['model']}  n={r0['n']:,}  d={r0['d']:,}  "
                    f"alpha={_num(r0['target_error'])}  budget curve", title_justify="left",
              box=None, pad_edge=False, header_style="bold")
    for name in ("C" if leverage else "E", "H^2", "predicted", "lower", "upper", "starts", "evidence"):
        t.add_column(name, no_wrap=True, justify="left" if name == "evidence" else "right")
    warn = False
    for r in rows:
        s, v = r["samples"], r["solver"]
        ev = v.get("evidence") or {}
        warn |= bool(ev.get("budget_exhausted"))
        evidence = f"best x{ev['best_hits']}" + ("  (budget ran out)" if ev.get("budget_exhausted") else "") \
            if "best_hits" in ev else ""
        t.add_row(_num(r["energy"]), _num(r["hellinger_squared"]), _num(s["predicted"]),
                  _num(s["lower"]), _num(s["upper"]), _num(v.get("starts")), evidence)
    console.print(t)
    if warn:
        console.print("warning: at some budgets the search budget ran out before the evidence; "
                      "raise --max-starts", markup=False, highlight=False)


def _bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} B"


def render_tensors_table(result, console: Console) -> None:
    r = result.to_dict()
    head = _table(f"bht tensors  {r['format']}  {_plural(len(r['tensors']), 'tensor')}")
    head.add_row("file", r["file"])
    head.add_row("size", f"{_bytes(r['total_bytes'])}  (tensor data)")
    if r["architecture"]:
        head.add_row("architecture", r["architecture"])
    if r["head"]:
        tied = "  (tied: the input embedding)" if r["head_tied"] else ""
        head.add_row("head", f"{r['head']}{tied}")
    else:
        head.add_row("head", "none found: name a tensor with FILE:TENSOR")
    if r["softcap"]:
        head.add_row("softcap", f"final_logit_softcapping {_num(r['softcap'])}: read out with softcap:{r['softcap']:g}")
    if r["compared_with"] is not None:
        _render_differences(r, head, console)
        return
    console.print(head)
    t = Table(box=None, pad_edge=False, show_edge=False)
    for name, justify in (("name", "left"), ("shape", "right"), ("dtype", "left"), ("bytes", "right")):
        t.add_column(name, justify=justify, no_wrap=True)
    for row in r["tensors"]:
        t.add_row(row["name"], " x ".join(map(str, row["shape"])) or "scalar", row["dtype"], f"{row['bytes']:,}")
    console.print()
    console.print(t)


def _render_differences(r: dict, head: Table, console: Console) -> None:
    """`bht tensors FILE OTHER`: the counts, then one row per tensor that differs."""
    head.add_row("compared with", r["compared_with"])
    differ = r["differ"]
    head.add_row("identical", f"{r['identical']} tensors (same type, same bytes)")
    head.add_row("differ", f"{len(differ)} tensors" + ("" if differ else ": the builds are the same"))
    for key, what in (("only_in_file", "only in FILE"), ("only_in_other", "only in OTHER")):
        if r[key]:
            head.add_row(what, f"{len(r[key])}: " + _short(", ".join(r[key]), 72))
    console.print(head)
    if not differ:
        return
    t = Table(box=None, pad_edge=False, show_edge=False)
    for name, justify in (("name", "left"), ("shape", "right"), ("FILE", "left"), ("OTHER", "left"),
                          ("max |d|", "right")):
        t.add_column(name, justify=justify, no_wrap=True)
    for row in differ:
        shape = " x ".join(map(str, row["shape"])) or "scalar"
        if row["other_shape"] != row["shape"]:
            shape += " / " + (" x ".join(map(str, row["other_shape"])) or "scalar")
        t.add_row(row["name"], shape, row["dtype"], row["other_dtype"],
                  "-" if row["max_abs_error"] is None else _num(row["max_abs_error"]))
    console.print()
    console.print(t)


def render_quantize_table(result, console: Console) -> None:
    r = result.to_dict()
    build = r["tensors"] is not None
    t = _table(f"bht quantize  {r['to']}  n={r['n']}  d={r['d']}")
    t.add_row("source", r["source"])
    t.add_row("written to", f"{r['out']}  " + (f"(GGUF, general.file_type {r['file_type']})" if build
                                               else "(float32)"))
    t.add_row("bits per weight", f"{_num(r['bits_per_weight'], 4)}  (blocks of {r['block_size']:,} values)")
    which = f"  (the head {r['head']})" if build and r["head"] else ""
    exact = (f"  (exact: {'the head is' if build else 'the values are'} already {r['to']}; the round "
             "trip changes nothing)") if r["exact"] else ""
    t.add_row("max |A' - A|", _num(r["max_abs_error"]) + which + exact)
    t.add_row("||A' - A||_F / ||A||_F", _num(r["relative_frobenius_error"]))
    t.add_row("||A' - A||_{2->inf}", _num(r["row_norm_2inf"]))
    if build:
        rows = r["tensors"]
        redone = [x for x in rows if x["reencoded"]]
        same = sum(1 for x in redone if x["max_abs_error"] == 0)
        t.add_row("tensors", f"{len(redone)} re-encoded ({same} unchanged in value), "
                  f"{len(rows) - len(redone)} copied as stored (1-D, norms, ...)")
        for kind in sorted({(x["from"], x["to"]) for x in redone}):
            group = [x for x in redone if (x["from"], x["to"]) == kind]
            t.add_row(f"  {kind[0]} -> {kind[1]}", f"{len(group)} tensors, max |T' - T| "
                      f"{_num(max(x['max_abs_error'] for x in group))}")
        if r["fallbacks"]:
            t.add_row("f16 fallback", f"{len(r['fallbacks'])} tensors (rows not a multiple of the block): "
                      + _short(", ".join(r["fallbacks"]), 72))
    t.add_row("time", f"{r['seconds']:.2f} s")
    console.print(t)


def render_prompts_table(result, console: Console) -> None:
    r = result.to_dict()
    e, smp = r["engine"], r["sampler"]
    head = _table(f"bht prompts  {len(r['builds'])} builds  {r['prompts_scored']:,} prompts  "
                  f"vocabulary {r['n']:,}")
    for k, b in enumerate(r["builds"]):
        head.add_row(f"build {chr(65 + k) if k < 26 else k}", b)
    head.add_row("prompts", r["source"])
    head.add_row("sampler", f"temperature {_num(smp['temperature'])}  top-k {smp['top_k']}  "
                            f"top-p {_num(smp['top_p'])}  min-p {_num(smp['min_p'])}")
    head.add_row("engine", f"{e['engine']} ({e['binding']} {e['binding_version']})  "
                           f"{e['threads']} threads  batch {e['batch']}  KV {e['kv_type']}  "
                           f"flash-attn {'on' if e['flash_attn'] else 'off'}  "
                           f"{e['sequences']} prompts/call")
    head.add_row("cpu", " ".join(e["cpu_features"]))
    head.add_row("median H^2", _num(r["median_hellinger_squared"]))
    if r["border_prompts"] is not None:
        head.add_row("border prompts", f"{r['border_prompts']:,} (top token differs)")
    if r["min_margin"] is not None:
        head.add_row("left out", f"{r['excluded']:,} prompts below {_num(r['min_margin'])}x their floor")
    pps = r["prompts_per_second"]
    head.add_row("time", f"{r['seconds']:.1f} s" + (f"  ({pps:.1f} prompts/s scored)" if pps else ""))
    console.print(head)
    t = Table(box=None, pad_edge=False, show_edge=False)
    for name, justify in (("#", "right"), ("H^2", "right"), ("D", "right"), ("lower", "right"),
                          ("predicted", "right"), ("upper", "right"), ("floor", "right"),
                          ("margin", "right"), ("top tokens", "left"), ("prompt", "left")):
        t.add_column(name, justify=justify, no_wrap=name != "prompt")
    for row in r["top"]:
        c = row["samples"]
        margin = "-" if row["margin"] is None else f"{row['margin']:.3g}" + (" !" if row["flagged"] else "")
        tokens = " | ".join(repr(x["piece"]) for x in row["top_tokens"])
        t.add_row(str(row["rank"]), _num(row["hellinger_squared"]), _num(row["bhattacharyya_distance"]),
                  _count(c["lower"]), _count(c["predicted"]), _count(c["upper"]),
                  _floor(row), margin, tokens, row["text"])
    console.print()
    console.print(t)
    if r["search"] is not None:
        _render_prompt_search(r["search"], console)


def _floor(row: dict) -> str:
    """The engine floor and the build it is of ("9.7e-05 B")."""
    k = row["floor_build"]
    return f"{_num(row['floor_hellinger_squared'])} {chr(65 + k) if k < 26 else k}"


def _render_prompt_search(s: dict, console: Console) -> None:
    """--search: the found prompts as the ranking's rows, then H^2 against passes."""
    console.print()
    console.print(f"search: {s['passes']:,} of {s['budget']:,} forward passes (one prompt on "
                  f"one build each), {s['rounds']} rounds, {s['candidates']:,} candidates, "
                  f"{s['rejected_tokenization']:,} proposals dropped (not the same ids after "
                  f"tokenizing their text), {s['search_seconds']:.1f} s; best start H^2 "
                  f"{_num(s['start_hellinger_squared'])}"
                  + (f"; {s['margin_dropped']:,} of {s['margin_checked']:,} checked dropped by "
                     "--min-margin" if s["margin_dropped"] else ""))
    t = Table(box=None, pad_edge=False, show_edge=False)
    for name, justify in (("#", "right"), ("H^2", "right"), ("lower", "right"),
                          ("predicted", "right"), ("upper", "right"), ("floor", "right"),
                          ("margin", "right"), ("edits", "right"), ("token ids", "left"),
                          ("prompt", "left")):
        t.add_column(name, justify=justify, no_wrap=name != "prompt")
    for row in s["found"]:
        c = row["samples"]
        margin = "-" if row["margin"] is None else f"{row['margin']:.3g}" + (" !" if row["flagged"] else "")
        t.add_row(str(row["rank"]), _num(row["hellinger_squared"]), _count(c["lower"]),
                  _count(c["predicted"]), _count(c["upper"]), _floor(row),
                  margin, str(row["edits"]), " ".join(map(str, row["token_ids"])), repr(row["text"]))
    console.print(t)
    console.print()
    h = Table(box=None, pad_edge=False, show_edge=False)
    h.add_column("passes", justify="right")
    h.add_column("best H^2", justify="right")
    for point in s["history"]:
        h.add_row(f"{point['passes']:,}", _num(point["hellinger_squared"]))
    console.print(h)


def _count(v) -> str:
    return "-" if v is None else f"{v:,}"


RENDERERS = {
    PromptsResult: render_prompts_table,
    TensorsResult: render_tensors_table,
    QuantizeResult: render_quantize_table,
    DesignResult: render_design_table,
    BoundResult: render_bound_table,
    LeverageBoundResult: render_bound_table,
    DecideResult: render_decide_table,
    SimulateResult: render_simulate_table,
    SweepResult: render_sweep_table,
    ShiftResult: render_shift_table,
    RankResult: render_rank_table,
    BudgetCurveResult: render_curve_table,
}

