"""Maximising the separation over the budget. One entry, :func:`maximize` (entry.py), chooses
the method; the building blocks are starts.py (starting points), ascent.py (batched projected
L-BFGS and the polish), kkt.py (first-order conditions), ladder.py (the full multistart search
over a ladder of budgets), sketch.py (the sketched search), ccp.py (the cvxpy cross-check) and
box.py (the leverage-score search)."""


def __getattr__(name):            # lazy: importing the package costs nothing
    if name in ("maximize", "METHODS"):
        from bhtcli.search import entry
        return getattr(entry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
