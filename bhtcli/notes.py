"""Notes: facts the library tells the user beside the result (which tensor of a checkpoint it
read as the head, which readout the checkpoint asked for). The CLI prints them as `Note: ...`
lines on stderr; a library caller sees nothing unless it collects them with `notes_to`."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable

_SINK: ContextVar[Callable[[str], None] | None] = ContextVar("bht_note_sink", default=None)


def note(message: str) -> None:
    """Tell the current sink (if any) `message`, once per sink."""
    sink = _SINK.get()
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
    token = _SINK.set(once)
    try:
        yield
    finally:
        _SINK.reset(token)
