"""The cells every table of bht shares: numbers as printed, the two-column table, a query."""
from __future__ import annotations

from rich.table import Table


def num(v, digits: int = 6) -> str:
    """A value as the tables print it: - for None, yes/no, whole numbers with commas."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.{digits}g}"


def two_columns(title: str) -> Table:
    """Names and values, the columns aligned across the tables of every command."""
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True, min_width=28)
    t.add_column(min_width=40)
    return t


def query_text(query, shown: int = 8) -> str:
    """The first `shown` entries of a query, then ... when there are more."""
    head = ", ".join(f"{v:.4g}" for v in query[:shown])
    return f"[{head}{', ...' if len(query) > shown else ''}]"


def short(text: str, width: int) -> str:
    """`text` on one line, cut to `width` with ... at the end."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."
