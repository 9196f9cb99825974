"""Small text inputs (answers, names, manifests): read a file or standard input as UTF-8."""
from __future__ import annotations

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
