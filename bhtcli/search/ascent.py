"""Batched projected L-BFGS over the ball ||x|| <= E, and the polish of its best end points.

All starts climb together (see BatchedAscent): every iteration is one forward product K X and,
for accepted columns, one backward product K^T W over a d x k block, so k starts cost far less
than k separate runs. `climb` explores from every start to a loose tolerance, polishes the best
distinct local maxima and scans the ray through the winner (the maximiser can be inside the
ball, docs/maths.md §5).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.kkt import lagrangian_gradient


# The value past which the caller's answer cannot change (design: one answer already decides,
# docs/search.md §6): every climb stops there, and the drivers skip their later rounds.
_ENOUGH: ContextVar[float] = ContextVar("bht_enough", default=math.inf)


@contextmanager
def enough_at(value: float):
    """Within the block, searches stop once they reach `value` (inf: never)."""
    token = _ENOUGH.set(float(value))
    try:
        yield
    finally:
        _ENOUGH.reset(token)


def enough(value: float) -> bool:
    """`value` is past the current block's stopping value (enough_at)."""
    return value >= _ENOUGH.get()


# The gradient tolerances of every climb, pairs and K models alike: (explore, polish, ray),
# relative. Tight in float64; float32 products resolve values to ~1e-6, so its climbs stop at
# 1e-5 (a tighter polish only runs to the iteration cap there).
TOLERANCES = {np.dtype(np.float64): (1e-5, 1e-10, 1e-11),
              np.dtype(np.float32): (1e-4, 1e-5, 1e-5)}


def gradient_tolerances(problem) -> tuple:
    """(explore, polish, ray) gradient tolerances for the problem's precision (TOLERANCES)."""
    return TOLERANCES[np.dtype(problem.dtype)]


@dataclass
class Ascent:
    """Local maxima found from a block of starts."""

    X: np.ndarray          # (d, k) end points
    f: np.ndarray          # (k,) D at the end points
    iterations: int


def column_norms(X: np.ndarray) -> np.ndarray:
    """Euclidean norm of every column, without overflow: a column whose squares overflow
    (entries beyond ~1e154, e.g. an L-BFGS step on a flat stretch) is scaled by its largest
    entry first; the others are np.linalg.norm's, bit for bit."""
    with np.errstate(over="ignore"):
        norms = np.linalg.norm(X, axis=0)
    big = ~np.isfinite(norms)
    if big.any():
        Y = X[:, big]
        m = np.max(np.abs(Y), axis=0)
        with np.errstate(invalid="ignore"):
            norms[big] = m * np.linalg.norm(Y / np.where(m > 0, m, 1.0), axis=0)
    return norms


def project(X: np.ndarray, energy: float) -> np.ndarray:
    """Project every column onto the ball of radius `energy`."""
    norms = column_norms(X)
    scale = np.minimum(1.0, energy / np.maximum(norms, 1e-300))
    return X * scale


class BatchedAscent:
    """Projected L-BFGS ascent of D for k queries at once (one block product per pass).

    Each column keeps its own curvature pairs. On the sphere with the gradient pointing
    outward, directions and pairs use the gradient of the Lagrangian D - mu/2 (||x||^2 - E^2),
    mu = g.x / E^2 (i.e. the tangential part of g), so the sphere's curvature enters the model
    instead of looking like negative curvature; the step is then projected back onto the ball.
    A step is kept only if D rises by an Armijo margin, otherwise that column's step shrinks.
    Columns leave the batch once converged, so late iterations cost little.
    """

    def __init__(self, pair: SoftmaxPair, X0: np.ndarray, energy: float, memory: int = 6):
        self.pair, self.energy, self.m = pair, energy, memory
        # Steps shorter than this (relative to E) change nothing the products resolve.
        self.min_step = 1e-14 if getattr(pair, "dtype", np.float64) == np.float64 else 1e-7
        self.X = project(np.array(X0, dtype=np.float64), energy)
        d, k = self.X.shape
        self.f, w_c, w_g = pair.evaluate(self.X)
        self.g = pair.pullback(w_c, w_g)
        self.S = np.zeros((memory, d, k))
        self.Y = np.zeros((memory, d, k))
        self.rho = np.zeros((memory, k))
        self.slot = 0
        gn = np.linalg.norm(self.g, axis=0)
        self.gscale = np.maximum(gn, 1e-300)               # for the relative stopping test
        self.t0 = 0.5 * energy / self.gscale               # gradient step: half the radius
        self.gamma = np.zeros(k)                           # initial inverse Hessian scale; 0 = none
        self.ls = np.ones(k)                               # line-search factor
        self.active = gn > 0
        self.iterations = 0
        self.tick = None            # progress hook: tick(iterations, best value, passes)

    def _lagrangian_gradient(self, X, g):
        return lagrangian_gradient(X, g, self.energy)

    def _direction(self, idx, gl):
        """Two-loop recursion (ascent form) with each column's own pairs."""
        q = gl.copy()
        newest_first = [(self.slot - 1 - i) % self.m for i in range(self.m)]
        alphas = []
        for i in newest_first:
            a = self.rho[i, idx] * np.sum(self.S[i][:, idx] * q, axis=0)
            q -= a * self.Y[i][:, idx]
            alphas.append(a)
        gamma = self.gamma[idx]
        r = np.where(gamma > 0, gamma, self.t0[idx]) * q
        for i, a in zip(reversed(newest_first), reversed(alphas)):
            b = self.rho[i, idx] * np.sum(self.Y[i][:, idx] * r, axis=0)
            r += self.S[i][:, idx] * (a - b)
        bad = np.sum(r * gl, axis=0) <= 0          # not an ascent direction: use the gradient
        r[:, bad] = self.t0[idx][bad] * gl[:, bad]
        return r

    def run(self, max_iter: int, gtol: float, armijo: float = 1e-4) -> None:
        """Up to max_iter iterations; a column stops when ||Lagrangian gradient|| <= gtol * scale."""
        E = self.energy
        for _ in range(max_iter):
            if not self.active.any():
                return
            if enough(float(np.max(self.f))):
                self.active[:] = False
                return
            self.iterations += 1
            idx = np.flatnonzero(self.active)
            X, g = self.X[:, idx], self.g[:, idx]
            gl, mu = self._lagrangian_gradient(X, g)
            p = self._direction(idx, gl)
            # While the constraint is active, move along the sphere: drop the radial part of
            # the step and retract; the iterate leaves the sphere only when g points inward.
            active_c = mu > 0
            p[:, active_c] -= np.sum(p[:, active_c] * X[:, active_c], axis=0) / E ** 2 * X[:, active_c]
            trial = X + self.ls[idx] * p
            trial[:, active_c] *= E / column_norms(trial[:, active_c])
            trial = project(trial, E)
            move = trial - X
            ft, wc, wg = self.pair.evaluate(trial)
            ok = ft >= self.f[idx] + armijo * np.sum(g * move, axis=0)
            slot = self.slot
            self.S[slot][:, idx] = 0.0
            self.Y[slot][:, idx] = 0.0
            self.rho[slot, idx] = 0.0
            if ok.any():
                acc = idx[ok]
                g_new = self.pair.pullback(wc[:, ok], wg[:, ok])
                xn, s = trial[:, ok], move[:, ok]
                gl_new, mu = self._lagrangian_gradient(xn, g_new)
                y = -(g_new - g[:, ok]) + mu * s           # minus the change of the Lagrangian gradient
                sy = np.sum(s * y, axis=0)
                good = sy > 1e-12 * np.linalg.norm(s, axis=0) * np.linalg.norm(y, axis=0)
                gi = acc[good]
                self.S[slot][:, gi] = s[:, good]
                self.Y[slot][:, gi] = y[:, good]
                self.rho[slot, gi] = 1.0 / sy[good]
                self.gamma[gi] = sy[good] / np.sum(y[:, good] ** 2, axis=0)
                self.X[:, acc], self.f[acc], self.g[:, acc] = xn, ft[ok], g_new
                self.ls[acc] = 1.0
                done = (np.linalg.norm(gl_new, axis=0) <= gtol * self.gscale[acc]) | \
                       (np.linalg.norm(s, axis=0) <= self.min_step * E)
                self.active[acc[done]] = False
            rej = idx[~ok]
            self.ls[rej] *= 0.25
            stuck = np.linalg.norm(move[:, ~ok], axis=0) <= self.min_step * E
            self.active[rej[stuck]] = False
            self.slot = (slot + 1) % self.m
            if self.tick is not None:
                self.tick(self.iterations, float(self.f.max()), getattr(self.pair, "passes", None))

    def keep(self, cols) -> None:
        """Continue with the columns `cols` only (the best few, for polishing)."""
        cols = np.asarray(cols)
        self.X, self.f, self.g = self.X[:, cols], self.f[cols], self.g[:, cols]
        self.S, self.Y, self.rho = self.S[:, :, cols], self.Y[:, :, cols], self.rho[:, cols]
        self.gscale, self.t0, self.gamma = self.gscale[cols], self.t0[cols], self.gamma[cols]
        self.ls, self.active = self.ls[cols], self.active[cols]


def ascend(pair: SoftmaxPair, X0: np.ndarray, energy: float, *, gtol: float = 1e-9,
           max_iter: int = 1000) -> Ascent:
    """Run every column of X0 to a local maximum."""
    run = BatchedAscent(pair, X0, energy)
    run.run(max_iter, gtol)
    return Ascent(run.X, run.f, run.iterations)


def halve(run: "BatchedAscent", stages, gtol: float) -> None:
    """Successive halving of a batch: per (iterations, survivors) stage, climb that many
    iterations and keep the best `survivors` distinct columns (end points within 1e-3 E of
    a better one count once)."""
    for steps, survivors in stages:
        run.run(steps, gtol=gtol)
        run.keep(distinct(run.X, run.f, run.energy, tol=1e-3)[:survivors])


def distinct(X: np.ndarray, f: np.ndarray, energy: float, tol: float = 1e-5):
    """Indices of distinct end points (by position), best first."""
    order = np.argsort(-f, kind="stable")
    keep = []
    for i in order:
        if all(np.linalg.norm(X[:, i] - X[:, j]) > tol * energy for j in keep):
            keep.append(i)
    return keep


@dataclass
class Climb:
    x: np.ndarray               # the best point after polishing and the interior check
    value: float
    iterations: int
    explored: np.ndarray        # objective at every start's end of the exploration
    finals: list                # indices of the distinct end points, best first


def climb(objective, X0: np.ndarray, energy: float, *, explore_gtol: float, polish_gtol: float,
          ray_gtol: float, keep: int = 4, progress=None) -> Climb:
    """Explore from every column of X0, polish the best `keep` distinct maxima, then scan the
    ray through the winner and climb again from any better point on it (interior maxima).

    `objective` is anything BatchedAscent climbs (evaluate/pullback/value), e.g. SoftmaxPair.
    """
    run = BatchedAscent(objective, X0, energy)
    run.tick = getattr(progress, "tick", None)
    run.run(500, gtol=explore_gtol)
    explored = run.f.copy()
    found = finish(objective, run.X, run.f, energy, polish_gtol=polish_gtol, ray_gtol=ray_gtol,
                   keep=keep, progress=progress)
    return Climb(found.x, found.value, run.iterations + found.iterations, explored,
                 distinct(run.X, run.f, energy, tol=1e-3))


def finish(objective, X: np.ndarray, f: np.ndarray, energy: float, *, polish_gtol: float,
           ray_gtol: float, keep: int = 4, progress=None) -> Climb:
    """Polish the best `keep` distinct end points of an exploration (columns of X, values f),
    then scan the ray through the winner and climb again from any better point on it."""
    finals = distinct(X, f, energy, tol=1e-3)
    if progress:
        progress(f"polishing the best {min(keep, len(finals))} local maxima")
    run = BatchedAscent(objective, X[:, finals[:keep]], energy)
    run.run(2000, gtol=polish_gtol)
    best = int(np.argmax(run.f))
    x, fx = run.X[:, best].copy(), float(run.f[best])
    iterations = run.iterations

    # Interior check: scan the ray through x; climb again from any better point on it.
    start = ray_start(objective.value, x, energy, fx * (1 + 1e-9))
    if start is not None:
        again = ascend(objective, start, energy, max_iter=2000, gtol=ray_gtol)
        iterations += again.iterations
        if again.f[0] > fx:
            x, fx = again.X[:, 0].copy(), float(again.f[0])
    return Climb(x, fx, iterations, f, finals)


def ray_start(value, x: np.ndarray, energy: float, above: float):
    """The interior check of every search (the maximiser can be inside the ball, docs/maths.md
    §5): the best of 20 points on the ray through x (radii 0.05 E to E) by `value` (a function
    of columns), as a d x 1 column where its value exceeds `above`; else None."""
    norm_x = np.linalg.norm(x)
    if not norm_x > 0:
        return None
    ray = np.outer(x / norm_x, np.linspace(0.05, 1.0, 20) * energy)
    fr = value(ray)
    j = int(np.argmax(fr))
    return ray[:, [j]] if fr[j] > above else None
