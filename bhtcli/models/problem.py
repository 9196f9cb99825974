"""What the searches consume: one protocol for a pair and for K models under a bottleneck.

`search.maximize` (search/entry.py), the batched ascent (search/ascent.py) and the screens
(search/starts.py, search/sketch.py) read a problem through this protocol only. A
`SoftmaxPair` (softmax.py) is P = 1 pair; `KModels` (kway.py) holds P = K(K-1)/2 pairs, and
the objectives built on them (kway.py: SoftBottleneck, WeightedSum) climb their bottleneck or
a weighted sum. A problem restricted to a subspace x = Q y is built through its own class's
constructor (`SoftmaxPair.from_stacked`, `ReducedKModels`), so that every attribute below is
set in one place.
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np


class ProblemCache(dict):
    """The budget-free work that every search on one problem shares (row norms, orders,
    spectral directions, the ladder's rung climbs), declared on the problem as `cache` and
    filled on first use; the names a problem may hold are listed in CACHED."""

    CACHED = ("row_norms", "row_dots", "norm_order", "spectral", "swap_partners", "rung_climbs")

    def get_or_build(self, name: str, build: Callable[[], object]):
        """What `build()` returns, computed once per problem."""
        if name not in self.CACHED:
            raise KeyError(f"{name!r} is not a declared problem cache ({', '.join(self.CACHED)})")
        value = dict.get(self, name)
        if value is None:
            value = build()
            self[name] = value
        return value


class Problem(Protocol):
    """A maximisation of a divergence over the ball ||x|| <= E, as the searches see it.

    n, d, dtype: rows, query size and the precision of the products; passes: products with
    the model matrices so far (the cost at scale); pairs: the (i, j) model pairs it holds
    ([(0, 1)] for a pair). evaluate(X) gives the objective at the columns of X and the
    gradient weights, pullback(weights) the gradient from them (one backward pass); value and
    value_and_grad are the two together as the ascent asks for them."""

    n: int
    d: int
    dtype: np.dtype
    passes: int
    pairs: list

    def evaluate(self, X: np.ndarray) -> tuple: ...

    def pullback(self, *weights: np.ndarray) -> np.ndarray: ...

    def value(self, X: np.ndarray) -> np.ndarray: ...

    def value_and_grad(self, X: np.ndarray) -> tuple: ...
