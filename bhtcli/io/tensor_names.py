"""Messages about tensor names shared by the checkpoint readers (GGUF, Hugging Face folders):
an unknown name with the close ones, no head found, and the note naming the head."""
from __future__ import annotations

import difflib
import math

from bhtcli.errors import InputError

LISTED = 8


def missing_tensor(label: str, tensor: str, shapes: dict) -> InputError:
    """'no tensor X; close names: ...; its 2-D tensors: ...' (shapes: name -> (shape, type))."""
    close = difflib.get_close_matches(tensor, list(shapes), n=5, cutoff=0.5)
    said = f"close names: {', '.join(close)}; " if close else ""
    return InputError(f"{label} has no tensor {tensor!r}; {said}its largest 2-D tensors: "
                      f"{_listing(shapes)} (bht tensors {label} lists them all)")


def no_head(label: str, tried, shapes: dict) -> InputError:
    return InputError(f"{label}: no output layer found (looked for {', '.join(tried)}); name the "
                      f"tensor with {label}:TENSOR; its largest 2-D tensors: {_listing(shapes)}")


def _listing(shapes: dict) -> str:
    two_d = sorted((k for k, (shape, _) in shapes.items() if len(shape) == 2),
                   key=lambda k: (-math.prod(shapes[k][0]), k))
    text = ", ".join(f"{k} ({' x '.join(map(str, shapes[k][0]))} {shapes[k][1]})"
                     for k in two_d[:LISTED]) or "none"
    return text + (f" and {len(two_d) - LISTED} more" if len(two_d) > LISTED else "")


def note_head(label: str, name: str, shape, stored: str, tied: bool, absent: str) -> None:
    """The note saying which tensor was read as the head."""
    from bhtcli.errors import note
    size = " x ".join(f"{v:,}" for v in shape)
    why = f" (tied to the input embedding; {absent})" if tied else ""
    note(f"{label}: the head is {name}, {size} {stored}{why}")
