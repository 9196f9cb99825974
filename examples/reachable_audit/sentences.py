"""Real English sentences from text that Python itself ships (no download, no import of modules).

Sources, in this order: the help topics of the interpreter's documentation
(`pydoc_data.topics`, the language reference that `help()` shows) and the docstrings of the
standard library's own modules (read with `ast`, nothing is imported). A sentence is kept
when it has 6 to 30 words, starts with a capital letter, ends with a full stop and holds
only letters, digits, spaces and , ; : ' " ( ) -; duplicates are dropped. The set therefore
depends on the Python version (the documented run used the repository's .venv, Python 3.11).
"""
from __future__ import annotations

import ast
import random
import re
import sysconfig
from pathlib import Path

SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
KEEP = re.compile(r"^[A-Z][A-Za-z0-9 ,;:'\"()\-]+[a-z)][.]$")


def _sentences(text: str):
    for paragraph in re.split(r"\n\s*\n", text):
        if re.search(r"^\s*(>>>|\.\.\.|\$ )", paragraph, re.M):   # code examples
            continue
        for s in SPLIT.split(" ".join(paragraph.split())):
            if 6 <= len(s.split()) <= 30 and KEEP.match(s) and s.count("(") == s.count(")"):
                yield s


def _docstrings():
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2:][0] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield doc


def real_sentences(count: int, seed: int = 0) -> list[str]:
    """`count` distinct sentences (seeded sample of all that pass the filter), in sample order."""
    import pydoc_data.topics
    seen, pool = set(), []
    texts = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    for text in texts + list(_docstrings()):
        for s in _sentences(text):
            if s not in seen:
                seen.add(s)
                pool.append(s)
    if count > len(pool):
        raise SystemExit(f"only {len(pool)} sentences pass the filter; ask for at most that many")
    return random.Random(seed).sample(pool, count)


def masked_prompt(sentence: str) -> str:
    """The sentence with its last word replaced by [MASK] (the fill-mask query)."""
    body = sentence[:-1].rstrip()
    head, _, _ = body.rpartition(" ")
    return f"{head} [MASK]."
