"""A tiny llama GGUF built in the tests (2 layers, 300 tokens, F32 weights, a SentencePiece
vocabulary with byte fallback that llama.cpp accepts) and an independent numpy forward pass of
it: the oracle the engine's logits are checked against."""
from __future__ import annotations

import numpy as np

WORDS = ("the a of to and in is it that for on with as was be by this are or from at an not "
         "have but which one all can has more than better is beautiful ugly explicit implicit "
         "simple complex flat nested sparse dense errors never should silently").split()
DIM, HEADS, KV_HEADS, FFN, LAYERS, CONTEXT = 32, 4, 2, 64, 2, 64
EPS, ROPE_BASE = 1e-5, 10000.0


def vocabulary(extra: int = 0):
    """(tokens, scores, types): control tokens, the 256 byte tokens, then words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    full = ["\u2581" + w for w in dict.fromkeys(WORDS)] + [f"\u2581w{i}" for i in range(extra)]
    # SentencePiece merges pairs of pieces into a piece of the vocabulary: every prefix is one
    words = list(dict.fromkeys(["\u2581"] + list("abcdefghijklmnopqrstuvwxyz")
                               + [w[:k] for w in full for k in range(2, len(w) + 1)]))
    tokens += words
    types += [1] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return tokens, scores, types


def weights(seed: int, n_vocab: int, scale: float = 0.3) -> dict:
    """Random float32 tensors by GGUF name, numpy shape (out, in)."""
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * scale / np.sqrt(s[-1]) * 4).astype(np.float32)
    hd = DIM // HEADS
    t = {"token_embd.weight": w(n_vocab, DIM), "output.weight": w(n_vocab, DIM),
         "output_norm.weight": (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)}
    for i in range(LAYERS):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)
        t[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)
        t[p + "attn_q.weight"] = w(DIM, DIM)
        t[p + "attn_k.weight"] = w(KV_HEADS * hd, DIM)
        t[p + "attn_v.weight"] = w(KV_HEADS * hd, DIM)
        t[p + "attn_output.weight"] = w(DIM, DIM)
        t[p + "ffn_gate.weight"] = w(FFN, DIM)
        t[p + "ffn_up.weight"] = w(FFN, DIM)
        t[p + "ffn_down.weight"] = w(DIM, FFN)
    return t


def write_tiny(path, seed: int = 0, tensors: dict | None = None, extra_tokens: int = 0,
               tokenizer: str = "llama", rename: dict | None = None) -> dict:
    """Write the tiny model to `path` (`rename`: {token id: new text}); returns its tensors
    (float32, by name)."""
    import gguf
    tokens, scores, types = vocabulary(extra_tokens)
    for i, text in (rename or {}).items():
        tokens[i] = text
    tensors = tensors if tensors is not None else weights(seed, len(tokens))
    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_name("tiny")
    wr.add_context_length(CONTEXT)
    wr.add_embedding_length(DIM)
    wr.add_block_count(LAYERS)
    wr.add_feed_forward_length(FFN)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV_HEADS)
    wr.add_layer_norm_rms_eps(EPS)
    wr.add_rope_freq_base(ROPE_BASE)
    wr.add_rope_dimension_count(DIM // HEADS)
    wr.add_vocab_size(len(tokens))
    wr.add_file_type(0)
    wr.add_tokenizer_model(tokenizer)
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_unk_token_id(0)
    wr.add_add_bos_token(True)
    for name, arr in tensors.items():
        wr.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return tensors


# ---------------------------------------------------------------- the numpy oracle
def _rms(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _rope(x):
    """Rotate adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/hd): x (T, heads, hd)."""
    T, _, hd = x.shape
    inv = ROPE_BASE ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def forward(tensors: dict, ids) -> np.ndarray:
    """The logits after the last token of `ids` (float64 arithmetic)."""
    t = {k: v.astype(np.float64) for k, v in tensors.items()}
    hd, g = DIM // HEADS, HEADS // KV_HEADS
    x = t["token_embd.weight"][np.asarray(ids)]
    T = len(ids)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(LAYERS):
        p = f"blk.{i}."
        n = _rms(x, t[p + "attn_norm.weight"])
        q = _rope((n @ t[p + "attn_q.weight"].T).reshape(T, HEADS, hd))
        k = _rope((n @ t[p + "attn_k.weight"].T).reshape(T, KV_HEADS, hd))
        v = (n @ t[p + "attn_v.weight"].T).reshape(T, KV_HEADS, hd)
        heads = []
        for h in range(HEADS):
            s = q[:, h] @ k[:, h // g].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            heads.append((s / s.sum(axis=1, keepdims=True)) @ v[:, h // g])
        x = x + np.concatenate(heads, axis=1) @ t[p + "attn_output.weight"].T
        n = _rms(x, t[p + "ffn_norm.weight"])
        gate, up = n @ t[p + "ffn_gate.weight"].T, n @ t[p + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ t[p + "ffn_down.weight"].T
    return _rms(x[-1], t["output_norm.weight"]) @ t["output.weight"].T


def three_builds(folder, scales=(0.02, 0.05)):
    """(A, B, C) tiny GGUF builds in `folder`: A (seed 0); B its weights plus scales[0] of
    seeded noise (0.02: a quantization-sized change); C plus scales[1] (further away)."""
    a, b, c = folder / "A.gguf", folder / "B.gguf", folder / "C.gguf"
    ta = write_tiny(a, seed=0)
    rng = np.random.default_rng(5)
    for p, scale in zip((b, c), scales):
        write_tiny(p, tensors={k: v + scale * rng.standard_normal(v.shape).astype(np.float32)
                               for k, v in ta.items()})
    return a, b, c


def two_builds(folder):
    """(A, B) paths of two unrelated tiny GGUF builds (seeds 0 and 1) in `folder`."""
    a, b = folder / "a.gguf", folder / "b.gguf"
    write_tiny(a, seed=0)
    write_tiny(b, seed=1)
    return str(a), str(b)
