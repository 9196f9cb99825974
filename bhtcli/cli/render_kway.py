"""The sections results of K >= 3 models add to their commands' tables (docs/kway.md): the
pairwise matrix, the bottleneck, the schedule (any K), the decision among K models and its
simulation. cli/render.py's renderer of each result calls them."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bhtcli.cli.cells import num as _num, query_text as _query_text, two_columns as _table


def _matrix(title: str, names: list, pairs: list, key: str, digits: int = 6) -> Table:
    """The K x K matrix of one pairwise quantity (upper triangle; models numbered from 1)."""
    K = len(names)
    t = Table(title=None, box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True, style="bold")
    for k in range(K):
        t.add_column(f"M{k + 1}", justify="right", no_wrap=True)
    cell = {(p["i"], p["j"]): p[key] for p in pairs}
    for i in range(K):
        row = []
        for j in range(K):
            if j <= i:
                row.append("")
            else:
                v = cell[(i, j)]
                row.append(_num(v, digits) if not isinstance(v, int) else f"{v:,}")
        t.add_row(f"M{i + 1}", *row)
    return t


def _models_table(names: list) -> Table:
    t = _table("\nModels")
    for k, name in enumerate(names):
        t.add_row(f"M{k + 1}", name)
    return t


def _samples_rows(t: Table, s: dict) -> None:
    t.add_row("lower (closest pair, any test)", _num(s["lower"]))
    t.add_row("predicted (maximum likelihood)", f"{_num(s['predicted'])}  \\[{s['method']}]")
    t.add_row("upper (union of Chernoff bounds)", _num(s["upper"]))


def _preferred_text(sch: dict, single: dict) -> str:
    """Which to send, the schedule or the single query, with both predicted counts."""
    ps, p1 = sch["samples"]["predicted"], single["predicted"]
    if sch["preferred"] == "schedule":
        return f"the schedule: {_num(ps)} answers (predicted) against {_num(p1)} with the single query"
    return f"the single query: {_num(p1)} answers (predicted) against {_num(ps)} with the schedule"


def render_bottleneck(r: dict, console: Console) -> None:
    """design's tables for K >= 3 models (`r`: the result's dict): the query, the pairs matrix,
    the counts for naming the true model, the schedule, the certificate, the solver."""
    names = r["models"]
    K = len(names)
    head = _table(f"bht design  softmax  {K} models  n={r['n']:,}  d={r['d']:,}  E={_num(r['energy'])}  "
                  f"alpha={_num(r['target_error'])}")
    head.add_row("query x", _query_text(r["query"]) + ("  (full vector: --json or --out)" if r["d"] > 8 else ""))
    head.add_row("||x||", f"{_num(r['query_norm'])}  ({'on the sphere' if r['on_boundary'] else 'inside the ball'})")
    b = r["bottleneck"]
    head.add_row("bottleneck pair", f"M{b['i'] + 1} - M{b['j'] + 1}  (the closest pair at x)")
    head.add_row("bottleneck H^2", _num(r["hellinger_squared"]))
    head.add_row("bottleneck D", _num(r["bhattacharyya_distance"]))
    if r.get("dtype", "float64") != "float64":
        head.add_row("precision", f"{r['dtype']} products, float64 report")
    console.print(head)
    console.print(_models_table(names))
    for title, key in (("H^2 at x, each pair", "hellinger_squared"),
                       ("Bhattacharyya D at x, each pair", "bhattacharyya_distance"),
                       ("Queries for that pair alone (predicted, x repeated)", "predicted")):
        console.print("\n" + title, markup=False, highlight=False)
        console.print(_matrix(title, names, r["pairs"], key))
    sam = _table("\nAnswers to name the true model (x repeated, every error <= alpha)")
    _samples_rows(sam, r["samples"])
    console.print(sam)
    render_schedule(r, console)
    c = r["certificate"]
    cer = _table("\nCertificate (no query, and no schedule, with ||x|| <= E does better)")
    if c["bhattacharyya_max_bound"] is None:
        cer.add_row("bottleneck D <=", "- (no closed-form ceiling)")
    else:
        bp = c["binding_pair"]
        cer.add_row("bottleneck D <=", f"{_num(c['bhattacharyya_max_bound'])}  (the ceiling of "
                    f"M{bp['i'] + 1} - M{bp['j'] + 1}, the smallest of the pairs')")
        cer.add_row("design's D / bound", _num(c["design_over_bound"]))
        cer.add_row("fixed-budget answers >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    console.print(cer)
    if r.get("candidates"):
        _render_candidates(r, console)
    v = r["solver"]
    sol = _table("\nSolver")
    if v["method"] == "candidates":
        opt = r["candidates"]["optimum"]
        sol.add_row("method", f"scored {r['candidates']['count']:,} given queries; the optimum: "
                              f"soft-minimum ascent, {opt['starts']} starts (the best candidates "
                              f"among them), {v['passes']} passes over the {K} models")
    else:
        sol.add_row("method", f"soft-minimum ascent ({v['method']}), {v['starts']} starts, "
                              f"{v['iterations']} iterations, {v['passes']} passes over the {K} models")
        sol.add_row("distinct local maxima", f"{v['local_maxima']}  (best bottleneck H^2: "
                    + ", ".join(_num(h, 6) for h in v["local_maxima_values"]) + ")")
    sol.add_row("KKT residual", _num(v["kkt_residual"], 2))
    sol.add_row("time", f"{v['seconds']:.2f} s")
    console.print(sol)


def render_schedule(r: dict, console: Console) -> None:
    """The schedule section of design (any K; two models: the single query, weight 1)."""
    sch = r.get("schedule")
    if not sch:
        return
    m = len(sch["weights"])
    st = Table(title=f"\nSchedule ({m} queries in fixed proportions)" if m > 1 else
               "\nSchedule (one query: two models are best told apart by one)",
               title_justify="left", box=None, pad_edge=False, header_style="bold")
    rows = sch.get("indices")          # a schedule over given rows: their rows in H
    for name in ("query" if rows is None else "row", "share", "answers", "x"):
        st.add_column(name, no_wrap=True, justify="left" if name == "x" else "right")
    counts = sch["counts"] or [None] * len(sch["weights"])
    for l, (q, w, c) in enumerate(zip(sch["queries"], sch["weights"], counts)):
        st.add_row(str(l + 1 if rows is None else rows[l]), f"{100 * w:.1f}%", _num(c),
                   _query_text(q, 4))
    console.print(st)
    s2 = _table("")
    s2.add_row("bottleneck D (sum w D)", _num(sch["bhattacharyya_distance"]))
    s2.add_row("gain vs the single query", f"{_num(sch['gain_vs_single'], 4)}x the exponent")
    s2.add_row("no schedule exceeds" if rows is None else "no schedule of these rows exceeds",
               _num(sch["dual_bound"]) + ("" if sch["converged"] else
               "  (column generation stopped before it converged)"))
    _samples_rows(s2, sch["samples"])
    s2.add_row("use", _preferred_text(sch, r["samples"]))
    console.print(s2)


def _top_rows(title: str, top: list) -> Table:
    t = Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold",
              min_width=len(title.strip()))       # a title wider than the columns stays whole
    for col in ("row", "bottleneck H^2", "pair", "predicted", "||x||", "name"):
        t.add_column(col, no_wrap=True, justify="left" if col == "name" else "right")
    for e in top:
        b = e["bottleneck"]
        t.add_row(str(e["index"]), _num(e["hellinger_squared"]), f"M{b['i'] + 1} - M{b['j'] + 1}",
                  _num(e["predicted"]), _num(e["query_norm"], 4), e["name"] or "")
    return t


def render_kway_rank(r: dict, console: Console) -> None:
    """`bht rank M1 M2 M3 ... H`: the rows ranked by their bottleneck."""
    names = r["models"]
    box = f"  E={_num(r['energy'])}" if r["energy"] is not None else ""
    t = _table(f"bht rank  softmax  {len(names)} models  n={r['n']:,}  d={r['d']:,}{box}  "
               f"alpha={_num(r['target_error'])}")
    t.add_row("candidates", f"{r['count']:,}  ({r['eligible']:,} eligible)")
    if not r["distinguishable"]:
        t.add_row("why", r["note"])
    t.add_row("best", f"row {r['best_index']:,}" + (f"  {r['best_name']}" if r["best_name"] else ""))
    if r["out"]:
        t.add_row("all scores written to", r["out"])
    t.add_row("time", f"{r['seconds']:.2f} s")
    console.print(t)
    console.print(_models_table(names))
    console.print(_top_rows(f"\nTop {len(r['top'])} candidates by the bottleneck (row: 0-based in H; "
                            "predicted: answers to name the true model)", r["top"]))


def _render_candidates(r: dict, console: Console) -> None:
    """`design M1 ... MK --candidates H`: counts, the fraction reached, the top list."""
    c = r["candidates"]
    t = _table("\nCandidates (the query above is the best given row)")
    t.add_row("rows", f"{c['count']:,} ({c['eligible']:,} eligible"
              + (f"; left out: {c['why_ineligible']}" if c["why_ineligible"] else "") + ")")
    name = f"  {c['best_name']}" if c["best_name"] is not None else ""
    t.add_row("best row", f"{c['best_index']}{name}")
    opt = c["optimum"]
    t.add_row("designed optimum", f"bottleneck H^2 {_num(opt['hellinger_squared'])} at radius "
              f"{_num(c['radius'])} ({c['radius_from']}); predicted {_num(opt['predicted'])}")
    frac = c["reachable_fraction"]
    t.add_row("reachable fraction", "-" if frac is None else
              f"{_num(frac, 4)}  (the best row's bottleneck H^2 over the optimum's)")
    console.print(t)
    console.print(_top_rows(f"\nBest {len(c['top'])} rows by the bottleneck", c["top"]))


def render_kway_bound(r: dict, console: Console) -> None:
    names = r["models"]
    t = _table(f"bht bound  softmax  {len(names)} models  n={r['n']:,}  d={r['d']:,}  "
               f"E={_num(r['energy'])}  alpha={_num(r['target_error'])}")
    c = r["certificate"]
    if c["bhattacharyya_max_bound"] is None:
        t.add_row("bottleneck D <=", "- (no closed-form ceiling)")
    else:
        bp = c["binding_pair"]
        t.add_row("bottleneck D <=", f"{_num(c['bhattacharyya_max_bound'])}  (M{bp['i'] + 1} - M{bp['j'] + 1})")
        t.add_row("bottleneck H^2 <=", _num(c["hellinger_squared_max_bound"]))
        t.add_row("fixed-budget answers >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    console.print(t)
    console.print(_models_table(names))
    console.print("\nCeiling on D over the ball, each pair", markup=False, highlight=False)
    console.print(_matrix("", names, r["pairs"], "bhattacharyya_max_bound"))


def render_kway_decide(r: dict, console: Console) -> None:
    names = r["models"]
    name = lambda k: "undecided" if k is None else f"M{k + 1} ({names[k]})"
    t = _table(f"bht decide  {len(names)} models  {r['samples_total']:,} answers  "
               f"alpha={_num(r['target_error'])}")
    t.add_row("sequential decision", f"{name(r['decision_index'])}  (after {r['samples_used']:,} of "
              f"{r['samples_total']:,} answers; every log-likelihood ratio past {_num(r['threshold'], 4)})")
    t.add_row("fixed-sample verdict", f"{'tie' if r['fixed_verdict_index'] is None else name(r['fixed_verdict_index'])}  "
              f"(maximum likelihood on {r['samples_total']:,} answers: largest error "
              f"{_num(r['fixed_error'], 3)}, predicted)")
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


def render_kway_simulate(r: dict, console: Console) -> None:
    names = r["models"]
    t = _table(f"bht simulate  {len(names)} models  n={r['n']:,}  d={r['d']:,}  "
               f"E={_num(r['energy'])}  alpha={_num(r['target_error'])}  {r['trials']:,} trials")
    if len(r["weights"]) == 1:
        t.add_row("query x", _query_text(r["queries"][0]))
    else:
        t.add_row("schedule", ", ".join(f"{100 * w:.1f}%" for w in r["weights"]) + f" of {len(r['weights'])} queries")
    t.add_row("bottleneck D", _num(r["bhattacharyya_distance"]))
    console.print(t)
    f = r["fixed"]
    if f:
        ft = _table("\nFixed n (maximum likelihood, every error <= alpha)")
        ft.add_row("empirical n", _num(f["empirical"]))
        ft.add_row("predicted", _num(f["predicted"]))
        ft.add_row("lower / upper bound", f"{_num(f['lower'])} / {_num(f['upper'])}")
        ft.add_row("worst error at predicted n", f"{_num(f['error_at_predicted'], 3)}  (model M{f['worst_model'] + 1})")
        console.print(ft)
    s = r["sequential"]
    if s:
        stt = _table("\nMatrix SPRT (every error <= alpha)")
        which = "  (" + " / ".join(f"M{k + 1}" for k in range(len(names))) + " true)"
        stt.add_row("mean answers", " / ".join(_num(v, 4) for v in s["mean_samples"]) + which)
        stt.add_row("realised error", " / ".join(_num(v, 3) for v in s["error"]) + which)
        stt.add_row("stop", f"the leader's log-likelihood ratio against every other model >= {_num(s['threshold'], 4)}")
        stt.add_row("undecided at the cap", _num(s["undecided"]))
        console.print(stt)
    a = r.get("adaptive")
    if a:
        which = "  (" + " / ".join(f"M{k + 1}" for k in range(len(names))) + " true)"
        at = _table("\nChernoff's adaptive rule (the leader's mix of queries; matrix SPRT stop)")
        at.add_row("mean answers", " / ".join(_num(v, 4) for v in a["mean_samples"]) + which)
        at.add_row("first-order mean", " / ".join("-" if v is None else _num(v, 4)
                                                 for v in a["mean_samples_predicted"])
                   + "  (ln((K-1)/alpha) / the leader's exponent)")
        at.add_row("realised error", " / ".join(_num(v, 3) for v in a["error"]) + which)
        at.add_row("queries", f"{len(a['queries'])} candidates asked (the simulated query, "
                              "argmax KL(P_k||P_j))")
        if "saving_vs_sprt" in a:
            at.add_row("saving vs the SPRT", f"{100 * a['saving_vs_sprt']:.1f}%  (mean over the true model)")
        at.add_row("undecided at the cap", _num(a["undecided"]))
        console.print(at)
    console.print(f"\n{r['seconds']:.2f} s", markup=False, highlight=False)
