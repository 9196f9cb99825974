"""The GPT-2-style byte-level BPE tokenizer stored in a GGUF file's metadata, in plain Python.

`tokenizer.ggml.tokens` holds the vocabulary in GPT-2's byte-to-unicode alphabet (every byte
0-255 is one printable character, a space is "Ġ"), `tokenizer.ggml.merges` the merges
"left right" in priority order. Encoding: split the text with the pre-tokenizer, map each
piece's UTF-8 bytes to that alphabet, then apply the merges lowest rank first.

The pre-tokenizer is llama.cpp's for `tokenizer.ggml.pre = smollm`: every digit alone, then
the GPT-2 pattern  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S).
Python's `re` has no \\p{..} classes: letters are [^\\W\\d_] and numbers \\d (Unicode decimal
digits), so numerals outside Nd (superscripts, Roman numerals) count as letters here; ASCII
text splits as in llama.cpp. Special tokens such as <|im_start|> in the text are not recognised (plain text only).
"""
from __future__ import annotations

import re
from functools import lru_cache

_L = r"[^\W\d_]"
_NOT_LN = r"(?:[^\s\w]|_)"                 # neither space, letter nor number (\w holds "_")
_PIECES = re.compile(rf"'s|'t|'re|'ve|'m|'ll|'d| ?{_L}+| ?\d+| ?{_NOT_LN}+|\s+(?!\S)|\s+")
_DIGIT = re.compile(r"\d")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pre_tokenize(text: str) -> list[str]:
    """The pieces BPE runs on: each digit alone, then the GPT-2 pattern on the text between."""
    out, pos = [], 0
    for m in _DIGIT.finditer(text):
        out.extend(_gpt2_split(text[pos:m.start()]))
        out.append(m.group())
        pos = m.end()
    out.extend(_gpt2_split(text[pos:]))
    return out


def _gpt2_split(text: str) -> list[str]:
    return [m.group() for m in _PIECES.finditer(text)] if text else []


class Tokenizer:
    """Byte-level BPE from a vocabulary (list of token strings) and merges ("a b" strings)."""

    def __init__(self, tokens: list[str], merges: list[str]):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
        self._bpe = lru_cache(maxsize=65536)(self._bpe_uncached)

    def _bpe_uncached(self, word: str) -> tuple[int, ...]:
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best = min((p for p in pairs if p[0] is not None), default=None)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        try:
            return tuple(self.ids[p] for p in parts)
        except KeyError as e:
            raise ValueError(f"token {e.args[0]!r} is not in the vocabulary") from None

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no BOS: this model's GGUF sets add_bos_token false)."""
        ids: list[int] = []
        for piece in pre_tokenize(text):
            ids.extend(self._bpe("".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))))
        return ids

    def decode(self, ids) -> str:
        """The text of token ids (invalid UTF-8 from a partial character becomes U+FFFD)."""
        data = bytes(CHAR_TO_BYTE[c] for i in ids for c in self.tokens[int(i)] if c in CHAR_TO_BYTE)
        return data.decode("utf-8", errors="replace")
