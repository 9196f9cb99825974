"""The progress display on stderr: a live rich line when stderr is a terminal, nothing otherwise.

The library reports through two optional hooks: calling the reporter with a message (a new
phase, optionally with its step and total) and, during a search, `tick(iterations, value,
passes)` with the best Bhattacharyya distance D so far (shown as H^2 = 1 - exp(-D)).
"""
from __future__ import annotations

import math
import time

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

from bhtcli.cli.render import LIVE, stderr
from bhtcli.api import phases_to


class Reporter:
    """Context manager; `enabled` is False under --quiet or when stderr is not a terminal.
    While it shows its live line, `Note:` and `Warning:` lines go above it (render.stderr_line)."""

    def __init__(self, quiet: bool = False, bar: bool = False, console=None):
        console = console or stderr()
        self.enabled = console.is_terminal and not quiet
        # text columns wrap between words rather than cut a word at the terminal's edge
        wrap = lambda: Column(no_wrap=False, overflow="fold")
        columns = [TextColumn("{task.description}", table_column=wrap())]
        if bar:
            columns += [BarColumn(bar_width=20), TextColumn("{task.completed}/{task.total}"),
                        TimeRemainingColumn()]
        columns += [TextColumn("{task.fields[status]}", table_column=wrap()), TimeElapsedColumn()]
        self._progress = Progress(*columns, console=console, transient=True, disable=not self.enabled)
        self._task = None
        self._last = 0.0
        self._best = None

    def __enter__(self):
        self._progress.__enter__()
        self._task = self._progress.add_task("preparing", total=None, status="")
        if self.enabled:
            LIVE.append(self._progress.console)
        self._phases = phases_to(self)       # the loaders' phases (dequantizing ...) show here
        self._phases.__enter__()
        return self

    def __exit__(self, *exc):
        self._phases.__exit__(*exc)
        if self.enabled and LIVE and LIVE[-1] is self._progress.console:
            LIVE.pop()
        return self._progress.__exit__(*exc)

    def __call__(self, message: str, step=None, total=None) -> None:
        if self.enabled:
            self._progress.update(self._task, description=message, completed=step, total=total)

    def tick(self, iterations: int, value: float, passes=None) -> None:
        """During a search: iterations so far, the best D so far and the passes over A and B.

        A better value is always shown; otherwise the line changes at most ten times a second."""
        now = time.monotonic()
        better = self._best is None or value > self._best
        if not self.enabled or (now - self._last < 0.1 and not better):
            return
        self._last, self._best = now, value
        status = f"iteration {iterations:,}  best H^2 {-math.expm1(-value):.6g}"
        if passes is not None:
            status += f"  {passes:,} passes"
        self._progress.update(self._task, status=status)
