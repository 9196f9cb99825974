"""Real English sentences from text that Python itself ships (no download, no import of modules):
the same corpus as `bht prompts` (bhtcli/io/corpus.py: the interpreter's help topics and the
standard library's docstrings, 6 to 30 words, plain punctuation, seeded sample). The set
depends on the Python version (the documented run used the repository's .venv, Python 3.11).
"""
from __future__ import annotations

from bhtcli.io.corpus import real_sentences  # noqa: F401  (the example's import)


def masked_prompt(sentence: str) -> str:
    """The sentence with its last word replaced by [MASK] (the fill-mask query)."""
    body = sentence[:-1].rstrip()
    head, _, _ = body.rpartition(" ")
    return f"{head} [MASK]."
