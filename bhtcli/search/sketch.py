"""The sketched-subspace search: climb the many starts in an n x r problem, polish in full d.

At a KKT point of D on the ball, x* = (C^T w_c + G^T w_g) / mu: the maximiser lies in the
span of the rows (c_i, g_i) that carry weight there (docs/maths.md §14). The search therefore

1. builds an orthonormal basis Q (d x r, r << d) of the spectral directions of A - B and the
   rows of largest ||c_i|| and ||g_i||; one wide product gives K Q (2n x r);
2. runs the whole budget-ladder, adaptive-multistart search (ladder.py) on the reduced pair
   K Q, where every evaluation is an n x r product;
3. lifts the best points to full d, reads off the rows that carry the weight there and the
   full gradient, adds both to the basis and climbs again from the best points (a few
   rounds, until the lifted points are KKT points in full d or nothing improves);
4. polishes the best few lifted points in full d (optimize.finish).

`solver.passes` counts full passes over A and B (the wide product K Q is one of them);
the products in the subspace read n x r numbers, not A and B, and are not counted.
"""
from __future__ import annotations

import time

import numpy as np

from bhtcli.models.softmax import SoftmaxPair, block_product
from bhtcli.search.optimize import (BatchedAscent, SearchResult, distinct, finish, kkt_state, project,
                                    row_norms, spectral_directions, swap_directions)

SEARCH_SPACES = ("full", "sketch", "auto")
DEFAULT_SEARCH_SPACE = "full"
SKETCH_MIN_SIZE = 5_000_000   # n * d from which search_space="auto" uses the sketch ...
SKETCH_MIN_D = 1024           # ... when d is also at least this (below, the basis is most of R^d)
SKETCH_SPECTRAL = 16          # spectral directions of A - B in the first basis
SKETCH_ROWS = 48              # rows of largest ||c_i|| and of largest ||g_i|| in it
SKETCH_SWAPS = 32             # best two-row-swap directions (screened in full d) in it
SKETCH_HEAVY = 16             # rows of largest weight at each lifted point added per round
SKETCH_ROUNDS = 4             # rounds of basis growth at most
SKETCH_MAX_RANK = 512


class _ReducedPair(SoftmaxPair):
    """The pair restricted to x = Q y: K Q as the model matrix (already centred)."""

    def __init__(self, KQ: np.ndarray, n: int, readout, objective: str):
        self.n, self.d = n, KQ.shape[1]
        self.readout, self.objective = readout, objective
        self.dtype = np.dtype(KQ.dtype)
        self.K = KQ
        self.passes = 0


def use_sketch(pair: SoftmaxPair, search_space: str | None) -> bool:
    """The size rule: "sketch" always, "full" never, "auto" when n * d >= SKETCH_MIN_SIZE and
    d >= SKETCH_MIN_D (measured: at 20,000 x 512 the basis grows to most of R^512 and the
    sketch takes twice the full search's time; at 50,000 x 1,024 it takes 0.55 of it)."""
    if search_space is None:
        search_space = DEFAULT_SEARCH_SPACE
    if search_space == "sketch":
        return True
    if search_space == "full":
        return False
    return pair.n * pair.d >= SKETCH_MIN_SIZE and pair.d >= SKETCH_MIN_D


def _orth(Q: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Columns of `new` orthonormalised against Q and each other (numerically null ones dropped)."""
    new = np.asarray(new, dtype=np.float64)
    if Q.shape[1]:
        new = new - Q @ (Q.T @ new)
        new = new - Q @ (Q.T @ new)
    if new.shape[1] == 0:
        return new
    scale = np.linalg.norm(new, axis=0)
    new = new[:, scale > 1e-10 * max(scale.max(initial=0.0), 1e-300)]
    if new.shape[1] == 0:
        return new
    U, s, _ = np.linalg.svd(new, full_matrices=False)
    return U[:, s > 1e-8 * s[0]]


def _heavy_rows(pair: SoftmaxPair, X: np.ndarray, count: int) -> np.ndarray:
    """Rows of largest softmax weight under A or B at the columns of X (one full pass)."""
    c, delta = pair.logits(X)
    rows = []
    for half in (0.5, -0.5):
        z = c + half * delta
        rows.append(np.argsort(-z, axis=0, kind="stable")[:count].ravel())
    return np.unique(np.concatenate(rows))


def sketch_search(pair: SoftmaxPair, energy: float, *, starts=None, seed: int = 0,
                  max_starts: int = 128, keep: int = 4, progress=None, tolerances,
                  carried=None) -> SearchResult:
    """One budget's search through the sketched subspace (module docstring)."""
    from bhtcli.search.ladder import search_budgets
    t0 = time.perf_counter()
    explore_gtol, polish_gtol, ray_gtol = tolerances
    f64 = np.float64
    cn, gn = row_norms(pair)
    top = np.unique(np.concatenate([np.argsort(-cn, kind="stable")[:SKETCH_ROWS],
                                    np.argsort(-gn, kind="stable")[:SKETCH_ROWS]]))
    V = spectral_directions(pair, SKETCH_SPECTRAL, seed)
    # the two-row swaps are screened in full d: a swap's partner row can be any row
    W = swap_directions(pair, energy, SKETCH_SWAPS)
    Q = _orth(np.zeros((pair.d, 0)),
              np.concatenate([V, W, np.asarray(pair.C[top], f64).T,
                              np.asarray(pair.G[top], f64).T], axis=1))
    if carried is not None and np.size(carried):
        Q = np.concatenate([Q, _orth(Q, carried)], axis=1)
    KQ = block_product(pair.K, Q, out_dtype=pair.dtype)
    pair.passes += 1
    if progress:
        progress(f"sketched subspace of rank {Q.shape[1]}")
    reduced = _ReducedPair(KQ, pair.n, pair.readout, pair.objective)
    inner = search_budgets(reduced, [energy], starts=starts, seed=seed, max_starts=max_starts,
                           keep=keep, tolerances=tolerances, space="full",
                           carried=None if carried is None or not np.size(carried)
                           else Q.T @ np.asarray(carried, dtype=f64))[0]
    points = Q @ np.concatenate([inner.x[:, None], inner.points], axis=1)
    rounds = 0
    best = -np.inf
    while rounds < SKETCH_ROUNDS and Q.shape[1] < SKETCH_MAX_RANK:
        rounds += 1
        f_full, g_full = pair.value_and_grad(points)
        if f_full.max() <= best * (1 + 1e-7):
            break
        best = float(f_full.max())
        heavy = _heavy_rows(pair, points, SKETCH_HEAVY)
        grow = _orth(Q, np.concatenate([g_full, np.asarray(pair.C[heavy], f64).T,
                                        np.asarray(pair.G[heavy], f64).T], axis=1))
        if grow.shape[1] == 0:
            break
        grow = grow[:, :SKETCH_MAX_RANK - Q.shape[1]]
        KQ = np.concatenate([KQ, block_product(pair.K, grow, out_dtype=pair.dtype)], axis=1)
        pair.passes += 1
        Q = np.concatenate([Q, grow], axis=1)
        if progress:
            progress(f"sketched subspace of rank {Q.shape[1]} (round {rounds + 1})")
        reduced = _ReducedPair(KQ, pair.n, pair.readout, pair.objective)
        run = BatchedAscent(reduced, Q.T @ points, energy)
        run.run(500, gtol=explore_gtol)
        points = Q @ run.X
    f_full = pair.value(points)
    found = finish(pair, points, f_full, energy, polish_gtol=polish_gtol, ray_gtol=ray_gtol,
                   keep=keep, progress=progress)
    on_boundary, residual = kkt_state(pair, found.x, energy)
    keep_idx = distinct(points, f_full, energy, tol=1e-3)[:4]
    values = sorted({float(v) for v in inner.values} | {found.value}, reverse=True)
    return SearchResult(x=found.x, value=found.value, starts=inner.starts,
                        iterations=inner.iterations + found.iterations,
                        local_maxima=inner.local_maxima, values=values[:10],
                        on_boundary=on_boundary, kkt_residual=residual,
                        seconds=time.perf_counter() - t0, best_hits=inner.best_hits,
                        rounds=inner.rounds, stop_reason=inner.stop_reason,
                        budget_exhausted=inner.budget_exhausted, rungs=inner.rungs,
                        points=project(points[:, keep_idx], energy), search_space="sketch")
