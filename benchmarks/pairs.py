"""Synthetic pairs (A, B) shared by the search benchmarks: each function takes (n, d, seed) and
returns two n x d matrices built from numpy's default_rng(seed)."""
from __future__ import annotations

import numpy as np


def gaussian(n, d, seed):
    """bench_scale.py's structure: row norms 0.6-1.6, B = A + 0.01 N(0, 1/d)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * np.exp(0.25 * rng.standard_normal((n, 1))) / np.sqrt(d)
    return A, A + 0.01 / np.sqrt(d) * rng.standard_normal((n, d))


def lowrank(n, d, seed, rank=16):
    """Low-rank-plus-noise A; B = A except in 8 rows."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)) / np.sqrt(d * rank) * 2 \
        + 0.1 * rng.standard_normal((n, d)) / np.sqrt(d)
    B = A.copy()
    rows = rng.choice(n, 8, replace=False)
    B[rows] += 0.5 * rng.standard_normal((8, d)) / np.sqrt(d)
    return A, B


def checkpoint(n, d, seed):
    """bench_search.py's structure: N(0, 9/d) entries, B = A + 10% noise."""
    rng = np.random.default_rng(seed)
    s = 3.0 / np.sqrt(d)
    A = s * rng.standard_normal((n, d))
    return A, A + 0.1 * s * rng.standard_normal((n, d))


def int8(n, d, seed):
    """B = A's per-row symmetric int8 round trip."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * np.exp(0.3 * rng.standard_normal((n, 1))) / np.sqrt(d)
    scale = np.abs(A).max(axis=1, keepdims=True) / 127
    return A, np.round(A / scale) * scale


def zipf(n, d, seed):
    """LM-head-like: a few frequent rows of large norm, a direction shared by all rows."""
    rng = np.random.default_rng(seed)
    norms = 0.5 + 2.0 / (1 + np.arange(n)) ** 0.3
    A = (rng.standard_normal((n, d)) + 0.5 * rng.standard_normal(d)) * (norms / np.sqrt(d))[:, None]
    return A, A + 0.02 / np.sqrt(d) * rng.standard_normal((n, d)) * norms[:, None]


def spread(n, d, seed):
    """Row norms spread over two orders of magnitude (log-normal, sigma 1), B = A + 2% noise
    per row."""
    rng = np.random.default_rng(seed)
    norms = np.exp(rng.standard_normal((n, 1)) - 0.5)
    A = rng.standard_normal((n, d)) * norms / np.sqrt(d)
    return A, A + 0.02 * norms / np.sqrt(d) * rng.standard_normal((n, d))
