"""Reading a prompt file for `bht prompts`: one prompt a line, or JSON Lines with `text` or
`token_ids` on each line."""
from __future__ import annotations

import json
import os
from pathlib import Path

from bhtcli.errors import InputError, parameter_name
from bhtcli.io import reads


def read_prompts(path) -> list[tuple[str | None, list[int] | None]]:
    """(text, None) or (None, token ids) per prompt, in file order.

    A file whose first non-blank line starts with "{" is JSON Lines (each line an object with
    `text`, a string, or `token_ids`, a list of integers); otherwise every non-blank line is a
    prompt's text (its end-of-line removed, other whitespace kept)."""
    p = Path(os.fspath(path))
    name = f"{parameter_name('prompts')} {p}"
    reads.record(p)                     # an input: never written over, listed in the run record
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except UnicodeDecodeError:
        raise InputError(f"{name} is not UTF-8 text; give one prompt a line or JSON Lines") from None
    except OSError as e:
        raise InputError(f"{name}: {e.strerror}") from None
    body = [(k + 1, line) for k, line in enumerate(lines) if line.strip()]
    if not body:
        raise InputError(f"{name} holds no prompt; give one prompt a line")
    if not body[0][1].lstrip().startswith("{"):
        return [(line, None) for _, line in body]
    out = []
    for k, line in body:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{name}, line {k}: not JSON ({e.msg}); each line is "
                             '{"text": ...} or {"token_ids": [...]}') from None
        if not isinstance(obj, dict) or ("text" in obj) == ("token_ids" in obj):
            raise InputError(f"{name}, line {k}: give exactly one of \"text\" or \"token_ids\"")
        if "text" in obj:
            if not isinstance(obj["text"], str):
                raise InputError(f"{name}, line {k}: \"text\" must be a string")
            out.append((obj["text"], None))
        else:
            ids = obj["token_ids"]
            if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                    for t in ids):
                raise InputError(f"{name}, line {k}: \"token_ids\" must be a list of integers")
            out.append((None, ids))
    return out
