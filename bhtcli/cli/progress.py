"""The progress display on stderr: a live rich line when stderr is a terminal, nothing otherwise.

The library reports through two optional hooks: calling the reporter with a message (a new
phase, optionally with its step and total) and, during a search, `tick(iterations, value,
passes)` with the best Bhattacharyya distance D so far (shown as H^2 = 1 - exp(-D)).
"""
from __future__ import annotations

import math
import time

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from bhtcli.cli.render import stderr


class Reporter:
    """Context manager; `enabled` is False under --quiet or when stderr is not a terminal."""

    def __init__(self, quiet: bool = False, bar: bool = False):
        console = stderr()
        self.enabled = console.is_terminal and not quiet
        columns = [TextColumn("{task.description}")]
        if bar:
            columns += [BarColumn(), TextColumn("{task.completed}/{task.total}")]
        columns += [TextColumn("{task.fields[status]}"), TimeElapsedColumn()]
        self._progress = Progress(*columns, console=console, transient=True, disable=not self.enabled)
        self._task = None
        self._last = 0.0

    def __enter__(self):
        self._progress.__enter__()
        self._task = self._progress.add_task("preparing", total=None, status="")
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def __call__(self, message: str, step=None, total=None) -> None:
        if self.enabled:
            self._progress.update(self._task, description=message, completed=step, total=total)

    def tick(self, iterations: int, value: float, passes=None) -> None:
        """A search round: iterations so far, the best D so far and the passes over A and B."""
        now = time.monotonic()
        if not self.enabled or now - self._last < 0.1:
            return
        self._last = now
        status = f"round {iterations:,}  best H^2 {-math.expm1(-value):.6g}"
        if passes is not None:
            status += f"  {passes:,} passes"
        self._progress.update(self._task, status=status)
