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


def top_k_columns(z: np.ndarray, k: int) -> np.ndarray:
    """(m, k) column indices of each row's k largest entries, ties at the boundary to the lower
    index, in ascending index order. A partition and one pass, not a sort of the row."""
    m, n = z.shape
    part = np.argpartition(z, n - k, axis=1)[:, n - k:]
    kth = np.take_along_axis(z, part, axis=1).min(axis=1, keepdims=True)
    above, equal = z > kth, z == kth
    need = k - above.sum(axis=1, keepdims=True)
    chosen = above | (equal & (np.cumsum(equal, axis=1) <= need))
    return np.nonzero(chosen)[1].reshape(m, k)


def support(logits: np.ndarray, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
            greedy: bool = False) -> np.ndarray:
    """Boolean mask (same shape as the (m, n) `logits`) of the tokens the chain can draw.

    Only top-p needs the candidates in order, and only the top-k candidates when top-k is on:
    the rows are sorted only then (a full row sort of a 262,144-token vocabulary costs ~10 ms)."""
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    m, n = z.shape
    rows = np.arange(m)[:, None]
    out = np.zeros((m, n), dtype=bool)
    if greedy:
        out[rows[:, 0], np.argmax(z, axis=1)] = True        # the first largest: ties by token id
        return out
    floor_gap = np.float32(np.log(np.float32(min_p))) if min_p > 0.0 else None
    if top_p >= 1.0 and not 0 < top_k < n:                  # no order needed
        if floor_gap is None:
            return np.ones((m, n), dtype=bool)
        return z >= z.max(axis=1, keepdims=True) + floor_gap
    cols = top_k_columns(z, top_k) if 0 < top_k < n else np.broadcast_to(np.arange(n), (m, n))
    by_value = np.argsort(-np.take_along_axis(z, cols, axis=1), axis=1, kind="stable")
    order = np.take_along_axis(cols, by_value, axis=1)      # descending, ties by token id
    zs = np.take_along_axis(z, order, axis=1)
    w = zs.shape[1]
    keep = np.ones((m, w), dtype=bool)
    if top_p < 1.0:
        # the normaliser summed over the whole row's width (zeros past the candidates): the
        # float32 sums of a full sort, bit for bit
        p = np.exp(zs - zs[:, :1]).astype(np.float32)
        total = np.concatenate([p, np.zeros((m, n - w), dtype=np.float32)], axis=1)
        p /= total.sum(axis=1, dtype=np.float32, keepdims=True)
        cum = np.cumsum(p, axis=1, dtype=np.float32)
        # keep ranks 0..first index where cum >= top_p
        first = np.argmax(cum >= np.float32(top_p), axis=1)
        first = np.where((cum >= np.float32(top_p)).any(axis=1), first, w - 1)
        keep &= np.arange(w)[None, :] <= first[:, None]
    if floor_gap is not None:
        keep &= zs >= zs[:, :1] + floor_gap
        keep[:, 0] = True
    out[rows, order] = keep
    return out


def sampler_log_probs(logits: np.ndarray, temperature: float = 1.0, top_k: int = 0,
                      top_p: float = 1.0, min_p: float = 0.0) -> np.ndarray:
    """log P(token) under the chain, float64 (m, n); -inf outside the support."""
    z = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    greedy = temperature == 0
    keep = support(z, top_k, top_p, min_p, greedy)
    if greedy:
        return np.where(keep, 0.0, -np.inf)
    s = z / float(temperature)
    if not keep.all():
        s = np.where(keep, s, -np.inf)
    return s - logsumexp(s, axis=1)[:, None]
