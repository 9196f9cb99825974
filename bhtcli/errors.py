"""Domain errors, how messages name parameters, notes (facts told beside a result) and phases
(what a long step below the commands is doing). Only the CLI turns errors into messages and
exit codes, notes into `Note:` lines and phases into its progress line."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable


class BhtError(Exception):
    """Base class for every error bht raises on purpose."""


class InputError(BhtError):
    """A matrix file or an option is unusable; the message names it and the fix (exit 2)."""


class SolverError(BhtError):
    """A numerical method failed at run time (exit 1)."""


# Messages name a parameter by its library name ("energy", "link_a"); a front end that calls
# the library under `parameter_names(...)` gets its own words instead (the CLI: "--energy").
_NAMER: ContextVar[Callable[[str], str] | None] = ContextVar("bht_parameter_namer", default=None)


def parameter_name(name: str) -> str:
    """How error messages refer to the library parameter `name` in the current context."""
    namer = _NAMER.get()
    return name if namer is None else namer(name)


@contextmanager
def parameter_names(namer: Callable[[str], str]):
    """Within the block, messages name parameters by `namer(name)` (e.g. CLI flags)."""
    token = _NAMER.set(namer)
    try:
        yield
    finally:
        _NAMER.reset(token)
class OutputError(BhtError):
    """An output file or stream could not be written (disk full, permission denied): exit 1."""


class NotReachable(BhtError):
    """queries=N: even the largest budget needs more than N queries (exit 1)."""


# Notes: facts the library tells the user beside the result (which tensor of a checkpoint it
# read as the head, which readout the checkpoint asked for). Nothing is told unless a front
# end collects them with `notes_to` (the CLI prints `Note: ...` lines on stderr).
_NOTES: ContextVar[Callable[[str], None] | None] = ContextVar("bht_note_sink", default=None)


def note(message: str) -> None:
    """Tell the current sink (if any) `message`."""
    sink = _NOTES.get()
    if sink is not None:
        sink(message)


@contextmanager
def notes_to(sink: Callable[[str], None]):
    """Within the block, each distinct note is passed to `sink` once (a checkpoint read twice
    is noted once)."""
    seen = set()

    def once(message: str) -> None:
        if message not in seen:
            seen.add(message)
            sink(message)
    token = _NOTES.set(once)
    try:
        yield
    finally:
        _NOTES.reset(token)


# Phases: long steps below the commands (dequantizing a tensor, converting a checkpoint) say
# what they are doing, with their step and total, to the front end's progress display if one
# is installed with `phases_to` (the CLI's progress line), else to nobody.
_PHASES: ContextVar[Callable | None] = ContextVar("bht_phase_sink", default=None)


def phase(message: str, step=None, total=None) -> None:
    """Tell the current progress display (if any) `message`, with its step and total."""
    sink = _PHASES.get()
    if sink is not None:
        sink(message, step, total)


@contextmanager
def phases_to(sink: Callable):
    """Within the block, `phase(...)` calls `sink(message, step, total)`."""
    token = _PHASES.set(sink)
    try:
        yield
    finally:
        _PHASES.reset(token)
