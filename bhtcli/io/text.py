"""Small text inputs (answers, names, manifests): read a file or standard input as UTF-8."""
from __future__ import annotations

import json
import sys

from bhtcli.errors import InputError
from bhtcli.io import reads


def read_text(spec, what: str, stdin=None, label: str | None = None) -> tuple[str, str]:
    """(label, text) of the file `spec`, or of standard input when spec is '-'.

    `what` says what the file should hold ("the observed answers, one per line"); every
    failure to read it is one InputError naming the file (or `label`, say "--names F") and
    that. A UTF-8 byte-order mark is
    dropped; universal newlines are left to the caller (str.splitlines handles them).
    """
    if spec == "-":
        label = label or "standard input"
        raw = (stdin if stdin is not None else sys.stdin.buffer).read()
    else:
        label = label or str(spec)
        reads.record(spec)
        try:
            with open(spec, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            raise InputError(f"{label}: no such file; give {what}") from None
        except IsADirectoryError:
            raise InputError(f"{label} is a folder, not a file; give {what}") from None
        except PermissionError:
            raise InputError(f"{label}: permission denied; make the file readable") from None
    try:
        return label, raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{label} is not UTF-8 text; give {what}") from None


def parse_json(data, label: str, expected: str, parse_int=int):
    """``json.loads`` of `data` (bytes or str), every failure one InputError naming `label` and
    `expected` (what the file should hold): bad UTF-8, bad JSON, nesting deeper than Python's
    recursion limit, an integer of more than 4,300 digits (``parse_int=float`` reads integers
    as floats instead, as a matrix needs: huge ones become inf, which the matrix check names).
    """
    try:
        text = data.decode("utf-8-sig") if isinstance(data, (bytes, bytearray)) else data
        return json.loads(text, parse_int=parse_int)
    except UnicodeDecodeError:
        raise InputError(f"{label} is not UTF-8 text; expected {expected}") from None
    except RecursionError:
        raise InputError(f"{label}: JSON nested too deeply to read; expected {expected}") from None
    except ValueError as exc:          # JSONDecodeError, and int() refusing > 4,300 digits
        raise InputError(f"{label} could not be read as JSON ({_first_line(exc)}); expected {expected}") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).split(";")[0] if "digits" in str(exc) else str(exc)
    return " ".join(text.split())[:200]
