"""A numpy forward pass of the llama architecture as llama.cpp runs a GGUF file.

Per layer: x += W_o · attention(rope(W_q·n), rope(W_k·n), W_v·n) with n = RMSNorm(x), then
x += W_down · (silu(W_gate·n') * W_up·n') with n' = RMSNorm(x); the final RMSNorm gives the
hidden state h whose logits are W_head · h (W_head = token_embd when the file has no
`output.weight`: tied embeddings).

Rotary embeddings in GGUF form: llama.cpp's converter permutes the rows of W_q and W_k so
that the rotation acts on adjacent pairs (x[2i], x[2i+1]) by the angle pos * base^(-2i/dim)
(ggml's rope mode 0, the one llama.cpp uses for this architecture); no un-permuting here.
Grouped-query attention: query head j reads key/value head j // (heads / kv_heads).

Batches: prompts are sorted by length and padded on the right; attention is causal, so a
prompt's last real position never sees the padding and its hidden state is exact.
Float32 throughout (the weights are dequantized to float32).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Config:
    layers: int
    dim: int
    heads: int
    kv_heads: int
    ffn: int
    eps: float
    rope_base: float
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @classmethod
    def from_meta(cls, meta: dict) -> "Config":
        a = meta["general.architecture"]
        if a != "llama":
            raise ValueError(f"architecture {a!r}: this forward pass is for llama only")
        return cls(layers=int(meta[f"{a}.block_count"]), dim=int(meta[f"{a}.embedding_length"]),
                   heads=int(meta[f"{a}.attention.head_count"]),
                   kv_heads=int(meta[f"{a}.attention.head_count_kv"]),
                   ffn=int(meta[f"{a}.feed_forward_length"]),
                   eps=float(meta[f"{a}.attention.layer_norm_rms_epsilon"]),
                   rope_base=float(meta.get(f"{a}.rope.freq_base", 10000.0)),
                   vocab=len(meta["tokenizer.ggml.tokens"]))


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * w


def rope_tables(length: int, head_dim: int, base: float):
    """cos and sin of pos * base^(-2i/head_dim), shape (length, head_dim/2)."""
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.arange(length, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate adjacent pairs of x (..., T, heads, head_dim) by the angles of each position T."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal grouped-query attention: q (B, T, H, hd), k and v (B, T, KV, hd) -> (B, T, H*hd)."""
    B, T, H, hd = q.shape
    KV = k.shape[2]
    g = H // KV
    qg = q.reshape(B, T, KV, g, hd).transpose(0, 2, 3, 1, 4)        # (B, KV, g, T, hd)
    kg = k.transpose(0, 2, 3, 1)[:, :, None]                        # (B, KV, 1, hd, T)
    vg = v.transpose(0, 2, 1, 3)[:, :, None]                        # (B, KV, 1, T, hd)
    s = (qg @ kg) * np.float32(1.0 / np.sqrt(hd))                   # (B, KV, g, T, T)
    s = s + np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    o = s @ vg                                                      # (B, KV, g, T, hd)
    return o.transpose(0, 3, 1, 2, 4).reshape(B, T, H * hd)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class Llama:
    """The forward pass over float32 weights given by GGUF tensor name."""

    def __init__(self, tensors: dict, config: Config):
        self.c = c = config
        t = tensors
        self.embed = t["token_embd.weight"]
        self.head = t.get("output.weight", self.embed)
        self.out_norm = t["output_norm.weight"]
        self.layers = []
        for i in range(c.layers):
            p = f"blk.{i}."
            self.layers.append(dict(
                attn_norm=t[p + "attn_norm.weight"], ffn_norm=t[p + "ffn_norm.weight"],
                qkv=np.ascontiguousarray(np.concatenate(
                    [t[p + "attn_q.weight"], t[p + "attn_k.weight"], t[p + "attn_v.weight"]]).T),
                o=np.ascontiguousarray(t[p + "attn_output.weight"].T),
                gate_up=np.ascontiguousarray(np.concatenate(
                    [t[p + "ffn_gate.weight"], t[p + "ffn_up.weight"]]).T),
                down=np.ascontiguousarray(t[p + "ffn_down.weight"].T)))

    def _batch(self, tok: np.ndarray, last: np.ndarray) -> np.ndarray:
        """Final hidden states (B, dim) at positions `last` of the right-padded batch `tok` (B, T)."""
        c = self.c
        B, T = tok.shape
        hd, H, KV = c.head_dim, c.heads, c.kv_heads
        cos, sin = rope_tables(T, hd, c.rope_base)
        x = self.embed[tok]                                          # (B, T, dim)
        for L in self.layers:
            n = rms_norm(x, L["attn_norm"], c.eps)
            qkv = n @ L["qkv"]
            q = rope(qkv[..., :H * hd].reshape(B, T, H, hd), cos, sin)
            k = rope(qkv[..., H * hd:(H + KV) * hd].reshape(B, T, KV, hd), cos, sin)
            v = qkv[..., (H + KV) * hd:].reshape(B, T, KV, hd)
            x = x + attention(q, k, v) @ L["o"]
            n = rms_norm(x, L["ffn_norm"], c.eps)
            gu = n @ L["gate_up"]
            x = x + (silu(gu[..., :c.ffn]) * gu[..., c.ffn:]) @ L["down"]
        return rms_norm(x[np.arange(B), last], self.out_norm, c.eps)

    def hidden(self, prompts, batch_tokens: int = 4096) -> np.ndarray:
        """The final hidden state at the last token of each prompt (lists of ids): (m, dim) float32.

        Prompts of similar length (within 1/8 of the shortest) share a batch of at most
        `batch_tokens` padded tokens, so padding wastes little.
        """
        m = len(prompts)
        out = np.empty((m, self.c.dim), dtype=np.float32)
        order = sorted(range(m), key=lambda i: len(prompts[i]))
        i = 0
        while i < m:
            j, lo = i, len(prompts[order[i]])
            while j < m and (j == i or (len(prompts[order[j]]) <= lo + lo // 8
                                        and (j - i + 1) * len(prompts[order[j]]) <= batch_tokens)):
                j += 1
            idx = order[i:j]
            T = len(prompts[idx[-1]])
            tok = np.zeros((len(idx), T), dtype=np.int64)
            last = np.empty(len(idx), dtype=np.int64)
            for r, k in enumerate(idx):
                if len(prompts[k]) == 0:
                    raise ValueError(f"prompt {k} is empty")
                tok[r, :len(prompts[k])] = prompts[k]
                last[r] = len(prompts[k]) - 1
            out[idx] = self._batch(tok, last)
            i = j
        return out

    def logits(self, h: np.ndarray) -> np.ndarray:
        """W_head · h for hidden states h (..., dim)."""
        return h @ self.head.T

    def greedy(self, ids, steps: int) -> list[int]:
        """`steps` tokens of greedy continuation (no cache: one full pass per step)."""
        ids = list(ids)
        for _ in range(steps):
            ids.append(int(np.argmax(self.logits(self.hidden([ids])[0]))))
        return ids
