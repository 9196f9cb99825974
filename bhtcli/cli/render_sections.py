"""The sections of design's, bound's and rank's tables, for two models and for K (docs/kway.md):
the separation and counts (K: the pairwise matrices), certificates, the solver, the candidates,
the schedule. cli/render.py's one renderer per result prints them."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bhtcli.cli.cells import num as _num, query_text as _query_text, short as _short, two_columns as _table


def says_something(v) -> bool:
    """A lower bound on a mean count is printed only when it is at least one query (below,
    it rules nothing out)."""
    return v is not None and v >= 1


def tv_method(c) -> str:
    m = c.get("tv_method")
    return {"spectral": "  (Thm 4.2 with spectral constants)", "thm42": "  (Thm 4.2)"}.get(m, "")


CEILING_NAMES = {"per_row": "per-row bound", "range": "range bound", "bilinear": "bilinear bound"}


def binds(c) -> str:
    """'  (per-row bound; range bound 0.0029)': which ceiling binds, and the others."""
    method, ceilings = c.get("ceiling_method"), c.get("ceilings") or {}
    if method is None:
        return ""
    others = [f"{CEILING_NAMES.get(k, k)} {_num(v, 3)}" for k, v in ceilings.items()
              if k != method and v is not None]
    return f"  ({CEILING_NAMES.get(method, method)}" + (f"; {', '.join(others)}" if others else "") + ")"


def pair_name(p: dict) -> str:
    """'M1 - M2': a pair of the K models, numbered from 1."""
    return f"M{p['i'] + 1} - M{p['j'] + 1}"


def bottleneck_ceiling(t: Table, c: dict, binding: str) -> bool:
    """K models' 'bottleneck D <=' row (`binding`: how the binding pair is named); False when
    there is no closed-form ceiling."""
    if c["bhattacharyya_max_bound"] is None:
        t.add_row("bottleneck D <=", "- (no closed-form ceiling)")
        return False
    method = CEILING_NAMES.get(c.get("ceiling_method"))
    t.add_row("bottleneck D <=", f"{_num(c['bhattacharyya_max_bound'])}  "
              + binding.format(pair_name(c["binding_pair"]) + (f": {method}" if method else "")))
    return True


def pairs_sections(r: dict, console: Console, matrices) -> None:
    """K models: their numbers, then the K x K matrix of each (title, key) in `matrices`."""
    names = r["models"]
    t = _table("\nModels")
    for k, name in enumerate(names):
        t.add_row(f"M{k + 1}", name)
    console.print(t)
    for title, key in matrices:
        console.print("\n" + title, markup=False, highlight=False)
        console.print(_matrix(len(names), r["pairs"], key))


def _matrix(K: int, pairs: list, key: str) -> Table:
    """The K x K matrix of one pairwise quantity (upper triangle; models numbered from 1)."""
    t = Table(title=None, box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True, style="bold")
    for k in range(K):
        t.add_column(f"M{k + 1}", justify="right", no_wrap=True)
    cell = {(p["i"], p["j"]): p[key] for p in pairs}
    for i in range(K):
        t.add_row(f"M{i + 1}", *("" if j <= i else _num(cell[(i, j)]) for j in range(K)))
    return t


SAMPLES_ROWS = {False: ("lower (any test)", "predicted (minimax LR test)", "upper (LR test, Chernoff)"),
                True: ("lower (closest pair, any test)", "predicted (maximum likelihood)",
                       "upper (union of Chernoff bounds)")}


def samples_rows(t: Table, s: dict, kway: bool) -> None:
    """lower, predicted [method], upper: of a pair's test, or of naming one of K models."""
    lower, predicted, upper = SAMPLES_ROWS[kway]
    t.add_row(lower, _num(s["lower"]))
    t.add_row(predicted, f"{_num(s['predicted'])}  \\[{s['method']}]")
    t.add_row(upper, _num(s["upper"]))


def separation(r: dict, console: Console) -> None:
    """The divergences at the query (K models: each pair's, as matrices) and the counts."""
    q = "s" if r["model"] == "leverage" else "x"
    if r.get("models"):
        pairs_sections(r, console, (("H^2 at x, each pair", "hellinger_squared"),
                                    ("Bhattacharyya D at x, each pair", "bhattacharyya_distance"),
                                    ("Queries for that pair alone (predicted, x repeated)", "predicted")))
        sam = _table("\nAnswers to name the true model (x repeated, every error <= alpha)")
    else:
        div = _table(f"\nSeparation at {q}")
        for name, key in (("Hellinger H", "hellinger"), ("H^2 = 1 - sum sqrt(pq)", "hellinger_squared"),
                          ("Bhattacharyya D", "bhattacharyya_distance"), ("total variation", "total_variation"),
                          ("KL(P_A || P_B)", "kl_ab"), ("KL(P_B || P_A)", "kl_ba"),
                          ("Chernoff information", "chernoff_information")):
            div.add_row(name, _num(r[key]))
        console.print(div)
        sam = _table(f"\nQueries needed ({q} repeated, both errors <= alpha)")
    samples_rows(sam, r["samples"], bool(r.get("models")))
    console.print(sam)


def certificate_table(r: dict) -> Table:
    """What no query within the budget beats: leverage's box, two softmax models, or K."""
    c = r["certificate"]
    if r["model"] == "leverage":
        cer = _table("\nCertificate (Theorem 4.2, explicit constants)")
        cer.add_row("TV over the box <=", _num(c["tv_max_bound"]) + ("  (vacuous: models too far apart)"
                                                                     if c["tv_max_bound"] >= 1 else tv_method(c)))
        cer.add_row("fixed-budget queries >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
        cer.add_row("lambda_min(A^T A), (B^T B)", _num(c["lambda_min_larger"]) + "  (the larger)")
        cer.add_row("sum_i ||b_i b_i^T - a_i a_i^T||", _num(c["sum_op_norm_diff"]))
        return cer
    if r.get("models"):
        cer = _table("\nCertificate (no query, and no schedule, with ||x|| <= E does better)")
        if bottleneck_ceiling(cer, c, "(the ceiling of {}, the smallest of the pairs')"):
            cer.add_row("design's D / bound", _num(c["design_over_bound"]))
            cer.add_row("fixed-budget answers >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
        return cer
    cer = _table("\nCertificate (no query with ||x|| <= E can do better)")
    cer.add_row("sup H^2 over the ball <=", _num(c["hellinger_squared_max_bound"]) + binds(c))
    cer.add_row("design's H^2 / bound", _num(c["design_over_bound"]))
    cer.add_row("fixed-budget queries >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    if says_something(c["mean_samples_lower_sequential"]):
        cer.add_row("mean sequential queries >=", _num(c["mean_samples_lower_sequential"]))
    cer.add_row("row diameter of A - B", _num(c["row_diameter"]) + ("" if c["row_diameter_exact"] else "  (upper bound)"))
    if c.get("note"):
        cer.add_row("note", c["note"])
    return cer


def solver_table(r: dict) -> Table:
    """How the query was found, with the evidence of the search."""
    v = r["solver"]
    sol = _table("\nSolver")
    if r["model"] == "leverage":
        sol.add_row("method", f"L-BFGS-B over log-weights, {v['starts']} starts, {v['iterations']} iterations, "
                              f"{v['passes']} evaluations (one pass over A and B each)")
        if v.get("local_maxima_values"):
            sol.add_row("distinct local maxima", f"{v['local_maxima']}  (best H^2: "
                        + ", ".join(_num(h, 6) for h in v["local_maxima_values"]) + ")")
        sol.add_row("time", f"{v['seconds']:.2f} s")
        return sol
    K = len(r.get("models") or ())
    over, h2 = (f"the {K} models", "bottleneck H^2") if K else ("A and B", "H^2")
    if v["method"] == "candidates":
        opt = r["candidates"]["optimum"] or {}
        sol.add_row("method", f"scored {r['candidates']['count']:,} given queries; the optimum: "
                              f"{'soft-minimum ascent' if K else 'lbfgs'}, {opt.get('starts') or 0} starts "
                              f"(the best candidates among them), {opt.get('iterations') or 0} iterations")
        sol.add_row(f"passes over {over}", _num(v["passes"]))
        sol.add_row("time", f"{v['seconds']:.2f} s")
        return sol
    steps = "convex solves" if v["method"] == "ccp" else "iterations"
    method = f"soft-minimum ascent ({v['method']})" if K else v["method"]
    sol.add_row("method", f"{method}, {v['starts']} starts, {v['iterations']} {steps}, "
                          f"{v['passes']} passes over {over}")
    sol.add_row("distinct local maxima", f"{v['local_maxima']}  (best {h2}: "
                + ", ".join(_num(h, 6) for h in v["local_maxima_values"]) + ")")
    ev = v.get("evidence") or {}
    if v.get("search_space") == "sketch":
        sol.add_row("search", f"sketched (vocabulary scale, docs/search.md §5): {ev.get('stop_reason') or v['message']}")
    elif ev.get("stop_reason"):
        why = "" if ev["stop_reason"].startswith("best maximum") else f"; stopped: {ev['stop_reason']}"
        sol.add_row("evidence", f"best maximum reached from {ev['best_hits']} of {v['starts']} starts "
                    f"in {ev['rounds']} round{'s' if ev['rounds'] != 1 else ''}{why}")
        if ev.get("ladder") and len(ev["ladder"]) > 1:
            sol.add_row("budget ladder", ", ".join(_num(e, 4) for e in ev["ladder"]))
    if ev.get("budget_exhausted"):
        sol.add_row("warning", f"the budget of {ev['max_starts']} starts ran out before the evidence; "
                    "a better maximum may exist: raise --max-starts")
    sol.add_row("KKT residual", _num(v["kkt_residual"], 2))
    sol.add_row("time", f"{v['seconds']:.2f} s")
    return sol


def _percent(f: float) -> str:
    return f"{100 * f:.0f}%" if f >= 0.1 else f"{100 * f:.2g}%"


def top_table(title: str, top: list) -> Table:
    """The best rows of H: rank, row, H^2 (K models: the bottleneck's, and its pair), ..."""
    named = any(e.get("name") is not None for e in top)
    kway = any(e.get("bottleneck") for e in top)
    t = Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold",
              min_width=len(title.strip()))       # a title wider than the columns stays whole
    for col in ("rank", "row", "H^2") + (("pair",) if kway else ()) + ("predicted", "||x||") + (("name",) if named else ()):
        t.add_column(col, justify="left" if col == "name" else "right", no_wrap=True)
    for k, e in enumerate(top, start=1):
        cells = [str(k), f"{e['index']:,}", _num(e["hellinger_squared"], 4)]
        cells += [pair_name(e["bottleneck"])] if kway else []
        cells += [_num(e["predicted"]), _num(e["query_norm"], 4)] + ([_short(e["name"] or "", 60)] if named else [])
        t.add_row(*cells)
    return t


def by_what(r: dict) -> str:
    """What rows are ranked by: H^2, or (K models) the bottleneck H^2."""
    return "bottleneck H^2" if r.get("models") else "H^2"


def candidates(r: dict, console: Console) -> None:
    """The candidates part of `design --candidates`: counts, the fraction in words, the top list."""
    c = r["candidates"]
    leverage = r["model"] == "leverage"
    t = _table("\nCandidates (the queries you can send)")
    t.add_row("candidates", f"{c['count']:,}")
    t.add_row("eligible", f"{c['eligible']:,}" + (f"  ({c['ineligible']:,} not: {c['why_ineligible']})"
                                                  if c["ineligible"] else ""))
    t.add_row("best", f"row {c['best_index']:,}" + (f"  {_short(c['best_name'], 60)}" if c["best_name"] else ""))
    opt = c["optimum"] or {}
    where = (f"box {_num(c['floor'])} <= s_i^2 <= {_num(c['radius'])}" if leverage
             else f"||x|| <= {_num(c['radius'])}")
    h2 = by_what(r)
    t.add_row("optimum for comparison", f"{h2} {_num(opt.get('hellinger_squared'))}, predicted "
              f"{_num(opt.get('predicted'))} queries  ({where}, from {c['radius_from']})")
    f = c["reachable_fraction"]
    if f is not None:
        q = "weight vector" if leverage else "hidden state"
        t.add_row("reachable fraction", f"{_num(f, 4)}: the best of your {c['count']:,} candidates reaches "
                  f"{_percent(f)} of the {h2} an optimal {q} would")
    else:
        t.add_row("reachable fraction", "- (no query separates the models)")
    console.print(t)
    console.print(top_table(f"\nTop {len(c['top'])} candidates by {h2} (row: 0-based in H)", c["top"]))


def _preferred_text(sch: dict, single: dict) -> str:
    """Which to send, the schedule or the single query, with both predicted counts."""
    ps, p1 = sch["samples"]["predicted"], single["predicted"]
    if sch["preferred"] == "schedule":
        return f"the schedule: {_num(ps)} answers (predicted) against {_num(p1)} with the single query"
    return f"the single query: {_num(p1)} answers (predicted) against {_num(ps)} with the schedule"


def schedule(r: dict, console: Console) -> None:
    """The schedule section of design (any K; two models: the single query, weight 1)."""
    sch = r.get("schedule")
    if not sch:
        return
    m = len(sch["weights"])
    single = ("two models are best told apart by one" if len(r.get("models") or [0, 0]) == 2
              else "no mix of queries does better than the best one")
    st = Table(title=f"\nSchedule ({m} queries in fixed proportions)" if m > 1 else
               f"\nSchedule (one query: {single})",
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
    samples_rows(s2, sch["samples"], True)
    s2.add_row("use", _preferred_text(sch, r["samples"]))
    console.print(s2)
