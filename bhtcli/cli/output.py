"""What a command has written to stdout, and how a closed pipe ends it: the small part of the
output path that the command line needs before any result exists (no numpy, no rich)."""
from __future__ import annotations

import json
import sys


class ClosedPipe(Exception):
    """The reader of stdout went away (| head): not an error (click would exit 1 on EPIPE)."""


class OutputState:
    stdout_used = False      # a result reached stdout (main adds no JSON error object then)


def start_output() -> None:
    """A new command begins: nothing of it has reached stdout yet."""
    OutputState.stdout_used = False


def json_error(message: str, status: int) -> None:
    """With --json, a failure is also one JSON object on stdout (unless a result is there)."""
    if not OutputState.stdout_used:
        sys.stdout.write(json.dumps({"error": message, "exit_status": status}) + "\n")
        sys.stdout.flush()
