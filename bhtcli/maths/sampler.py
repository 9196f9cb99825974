"""The law llama.cpp's sampler chain draws a token from, given the logits (docs/maths.md §13).

The chain runs in llama.cpp's default order (common/sampling.cpp; llama-cpp-python's `Llama`
builds the same chain): top-k, top-p, min-p, temperature, then a draw from the softmax of what
is left. So top-p and min-p see the probabilities *before* the temperature:

- top-k keeps the k largest logits (k = 0: off);
- top-p takes the softmax of the candidates left, sorts them by probability and keeps the
  shortest prefix whose cumulative sum is >= p (the token that crosses p is kept; p = 1: off);
- min-p keeps the logits >= max logit + log(min_p) (min_p = 0: off);
- temperature T divides the logits left by T; the draw is from their softmax.
- T = 0 is greedy: the largest logit, probability 1.

Ties: llama.cpp breaks a tie at the top-k or top-p boundary by its (unstable) partial sort, so
which of two equal logits survives is not defined; here the lower token id is kept. The
cumulative sum of top-p runs in float32 as in the engine, so a boundary within float32
round-off of p falls the engine's way. Tokens outside the kept set have probability 0: laws
of two builds can have different supports.
"""
from __future__ import annotations

import numpy as np

from bhtcli.maths.divergences import logsumexp


def support(logits: np.ndarray, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
            greedy: bool = False) -> np.ndarray:
    """Boolean mask (same shape as the (m, n) `logits`) of the tokens the chain can draw."""
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    m, n = z.shape
    order = np.argsort(-z, axis=1, kind="stable")          # descending, ties by token id
    zs = np.take_along_axis(z, order, axis=1)
    keep = np.ones((m, n), dtype=bool)                      # in sorted order
    if greedy:
        keep[:, 1:] = False
    else:
        if 0 < top_k < n:
            keep[:, top_k:] = False
        if top_p < 1.0:
            cand = np.where(keep, zs, -np.inf)
            p = np.exp(cand - cand[:, :1]).astype(np.float32)
            p /= p.sum(axis=1, dtype=np.float32, keepdims=True)
            cum = np.cumsum(p, axis=1, dtype=np.float32)
            # keep ranks 0..first index where cum >= top_p
            first = np.argmax(cum >= np.float32(top_p), axis=1)
            first = np.where((cum >= np.float32(top_p)).any(axis=1), first, keep.sum(axis=1) - 1)
            keep &= np.arange(n)[None, :] <= first[:, None]
        if min_p > 0.0:
            floor = zs[:, :1] + np.float32(np.log(np.float32(min_p)))
            keep &= zs >= floor
            keep[:, 0] = True
    out = np.zeros((m, n), dtype=bool)
    np.put_along_axis(out, order, keep, axis=1)
    return out


def sampler_log_probs(logits: np.ndarray, temperature: float = 1.0, top_k: int = 0,
                      top_p: float = 1.0, min_p: float = 0.0) -> np.ndarray:
    """log P(token) under the chain, float64 (m, n); -inf outside the support."""
    z = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    greedy = temperature == 0
    keep = support(z, top_k, top_p, min_p, greedy)
    if greedy:
        return np.where(keep, 0.0, -np.inf)
    s = np.where(keep, z / float(temperature), -np.inf)
    return s - logsumexp(s, axis=1)[:, None]
