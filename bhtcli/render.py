"""The only code that prints results: one table renderer and one JSON renderer per result."""
from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table


def render_json(result) -> str:
    """Exactly one JSON object (no NaN/Infinity: non-finite numbers become null)."""
    return json.dumps(result.to_dict(), allow_nan=False)


def _num(v, digits: int = 6) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.{digits}g}"


def _table(title: str) -> Table:
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True, min_width=28)   # aligned across the tables
    t.add_column(min_width=40)
    return t


def _query_text(query, shown: int = 8) -> str:
    head = ", ".join(f"{v:.4g}" for v in query[:shown])
    return f"[{head}{', ...' if len(query) > shown else ''}]"


def render_design_table(result, console: Console) -> None:
    r = result.to_dict()
    head = _table(f"bht design  softmax  n={r['n']:,}  d={r['d']:,}  E={_num(r['energy'])}  "
                  f"alpha={_num(r['target_error'])}")
    if not r["distinguishable"]:
        head.add_row("distinguishable", "no")
        head.add_row("why", r["note"])
        head.add_row("samples needed", "- (no number of queries can tell them apart)")
        console.print(head)
        return
    where = "on the sphere" if r["on_boundary"] else "inside the ball"
    head.add_row("query x", _query_text(r["query"]) + ("  (full vector: --json or --out)" if r["d"] > 8 else ""))
    head.add_row("||x||", f"{_num(r['query_norm'])}  ({where})")
    head.add_row("distinguishable", "yes")
    if r["note"]:
        head.add_row("note", r["note"])
    console.print(head)

    div = _table("\nSeparation at x")
    div.add_row("Hellinger H", _num(r["hellinger"]))
    div.add_row("H^2 = 1 - sum sqrt(pq)", _num(r["hellinger_squared"]))
    div.add_row("Bhattacharyya D", _num(r["bhattacharyya_distance"]))
    div.add_row("total variation", _num(r["total_variation"]))
    div.add_row("KL(P_A || P_B)", _num(r["kl_ab"]))
    div.add_row("KL(P_B || P_A)", _num(r["kl_ba"]))
    div.add_row("Chernoff information", _num(r["chernoff_information"]))
    console.print(div)

    s = r["samples"]
    sam = _table("\nQueries needed (x repeated, both errors <= alpha)")
    sam.add_row("lower (any test)", _num(s["lower"]))
    sam.add_row("predicted (minimax LR test)", f"{_num(s['predicted'])}  [{s['method']}]")
    sam.add_row("upper (LR test, Chernoff)", _num(s["upper"]))
    console.print(sam)

    c = r["certificate"]
    cer = _table("\nCertificate (no query with ||x|| <= E can do better)")
    cer.add_row("sup H^2 over the ball <=", _num(c["hellinger_squared_max_bound"]))
    cer.add_row("design's H^2 / bound", _num(1 / c["bound_over_design"]) if c["bound_over_design"] else "-")
    cer.add_row("fixed-budget queries >=", _num(c["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    cer.add_row("mean sequential queries >=", _num(c["mean_samples_lower_sequential"]))
    cer.add_row("row diameter of A - B", _num(c["row_diameter"]) + ("" if c["row_diameter_exact"] else "  (upper bound)"))
    console.print(cer)

    v = r["solver"]
    sol = _table("\nSolver")
    sol.add_row("method", f"{v['method']}, {v['starts']} starts, {v['iterations']} iterations, "
                          f"{v['passes']} passes over A and B")
    sol.add_row("distinct local maxima", f"{v['local_maxima']}  (best H^2: "
                + ", ".join(_num(h, 4) for h in v["local_maxima_values"]) + ")")
    sol.add_row("KKT residual", _num(v["kkt_residual"], 2))
    sol.add_row("time", f"{v['seconds']:.2f} s")
    console.print(sol)


def render_bound_table(result, console: Console) -> None:
    r = result.to_dict()
    t = _table(f"bht bound  softmax  n={r['n']:,}  d={r['d']:,}  E={_num(r['energy'])}  "
               f"alpha={_num(r['target_error'])}")
    t.add_row("distinguishable", "yes" if r["distinguishable"] else "no")
    if r["same_model_reason"]:
        t.add_row("why", r["same_model_reason"])
    t.add_row("paper's eps = ||A - B||_{2->inf}", _num(r["row_norm_2inf"]))
    t.add_row("row diameter of A - B", _num(r["row_diameter"]) + ("  (exact)" if r["row_diameter_exact"] else "  (upper bound)"))
    t.add_row("sup H^2 over the ball <=", _num(r["hellinger_squared_max_bound"]))
    t.add_row("fixed-budget queries >=", _num(r["samples_lower_any_strategy"]) + "  (any strategy, adaptive too)")
    t.add_row("mean sequential queries >=", _num(r["mean_samples_lower_sequential"]))
    console.print(t)
