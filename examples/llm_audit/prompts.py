"""Natural prompts for a causal language model, from text Python ships (no download).

The Zen of Python (the `this` module's text, ROT13-decoded from its source, not imported:
importing `this` prints it) first, then sentences from the interpreter's help topics and the
standard library's docstrings (examples/reachable_audit/sentences.py: 6 to 30 words, plain
punctuation, seeded sample). Each prompt is its sentence without the last word and the full
stop, so the next token the model predicts is that word: "Beautiful is better than" -> " ugly".
The set depends on the Python version.
"""
from __future__ import annotations

import ast
import codecs
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reachable_audit"))
from sentences import real_sentences  # noqa: E402


def zen_lines() -> list[str]:
    """The 19 aphorisms of `import this`, read from this.py's source (the module is not run)."""
    tree = ast.parse((Path(sysconfig.get_paths()["stdlib"]) / "this.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "s":
            text = codecs.decode(node.value.value, "rot13")
            return [line.strip() for line in text.splitlines()[2:] if line.strip()]
    raise SystemExit("this.py has no string s; the Python version ships a different `this` module")


def cut_last_word(sentence: str) -> str | None:
    """The sentence without its last word and final punctuation (None if too short)."""
    body = sentence.rstrip().rstrip(".!?").rstrip()
    head, _, _ = body.rpartition(" ")
    return head if len(head.split()) >= 3 else None


def natural_prompts(count: int, seed: int = 0) -> list[str]:
    """`count` distinct prompts: the Zen's aphorisms first, then seeded documentation sentences."""
    out, seen = [], set()
    pool = zen_lines() + real_sentences(max(count * 2, 50), seed)
    for s in pool:
        p = cut_last_word(s)
        if p and p not in seen:
            seen.add(p)
            out.append(p)
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} prompts; ask for fewer")
