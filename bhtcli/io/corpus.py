"""Natural prompts for a causal language model, from text Python ships (no download).

The Zen of Python (the `this` module's text, ROT13-decoded from its source, not imported:
importing `this` prints it) first, then sentences from the interpreter's help topics
(`pydoc_data.topics`) and the standard library's docstrings (read with `ast`, nothing is
imported). A sentence is kept when it has 6 to 30 words, starts with a capital letter, ends
with a full stop and holds only letters, digits, spaces and , ; : ' " ( ) -; duplicates are
dropped, and a seeded sample is taken. Each prompt is its sentence without the last word and
the full stop, so the next token the model predicts is that word:
"Beautiful is better than" -> " ugly". The set depends on the Python version.
"""
from __future__ import annotations

import ast
import codecs
import random
import re
import sysconfig
from pathlib import Path

from bhtcli.errors import InputError, parameter_name

SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
KEEP = re.compile(r"^[A-Z][A-Za-z0-9 ,;:'\"()\-]+[a-z)][.]$")


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def zen_lines() -> list[str]:
    """The 19 aphorisms of `import this`, read from this.py's source (the module is not run)."""
    tree = ast.parse((_stdlib() / "this.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "s":
            text = codecs.decode(node.value.value, "rot13")
            return [line.strip() for line in text.splitlines()[2:] if line.strip()]
    return []


def _sentences(text: str):
    for paragraph in re.split(r"\n\s*\n", text):
        if re.search(r"^\s*(>>>|\.\.\.|\$ )", paragraph, re.M):   # code examples
            continue
        for s in SPLIT.split(" ".join(paragraph.split())):
            if 6 <= len(s.split()) <= 30 and KEEP.match(s) and s.count("(") == s.count(")"):
                yield s


def _docstrings():
    root = _stdlib()
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2:][0] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in _definitions(tree):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
STATEMENT_LISTS = {"body", "orelse", "finalbody", "handlers", "cases"}   # what holds statements


def _definitions(node):
    """The module, class and function nodes under `node`, in `ast.walk`'s order, visiting
    statements only: a definition is a statement, so expressions (most of a tree's nodes)
    cannot hold one."""
    todo = [node]
    while todo:
        node = todo.pop(0)
        if isinstance(node, DEFINITIONS):
            yield node
        for field in node._fields:                          # in ast.walk's field order
            if field in STATEMENT_LISTS:
                todo.extend(getattr(node, field))


def real_sentences(count: int, seed: int = 0) -> list[str]:
    """`count` distinct sentences (a seeded sample of all that pass the filter)."""
    import pydoc_data.topics
    seen, pool = set(), []
    texts = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    for text in texts + list(_docstrings()):
        for s in _sentences(text):
            if s not in seen:
                seen.add(s)
                pool.append(s)
    return random.Random(seed).sample(pool, min(count, len(pool)))


def cut_last_word(sentence: str) -> str | None:
    """The sentence without its last word and final punctuation (None if too short)."""
    body = sentence.rstrip().rstrip(".!?").rstrip()
    head, _, _ = body.rpartition(" ")
    return head if len(head.split()) >= 3 else None


def natural_prompts(count: int = 1000, seed: int = 0) -> list[str]:
    """`count` distinct prompts: the Zen's aphorisms first, then seeded documentation sentences."""
    out, seen = [], set()
    for s in zen_lines() + real_sentences(max(count * 2, 50), seed):
        p = cut_last_word(s)
        if p and p not in seen:
            seen.add(p)
            out.append(p)
        if len(out) == count:
            return out
    raise InputError(f"{parameter_name('corpus')}: this Python ships only {len(out)} natural "
                     f"prompts; ask for at most that many")
