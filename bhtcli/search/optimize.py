"""Global search for the query x (||x|| <= E) that maximises the Bhattacharyya distance D(x).

Maximising D is the same as maximising H^2 = 1 - exp(-D). The landscape is multimodal and the
maximiser can be inside the ball (docs/maths.md §6), so the method is:

1. starting points: the top right singular vectors of the row-centred A - B (the small-budget
   answer, docs/maths.md §6) with both signs at radius E and E/2; a quarter screened from row-based
   directions (one dominant row, x ~ c_i +- t g_i, or two, x ~ g_i - g_j; one forward pass
   scores them); the rest seeded random points on the sphere and inside the ball;
2. all starts climb together by projected L-BFGS (see BatchedAscent): every iteration is one
   forward product K X and, for accepted columns, one backward product K^T W over a d x k
   block, so k starts cost far less than k separate runs;
3. all starts run to a loose tolerance; the best 4 distinct local maxima are polished;
4. interior check: D along the ray through the best point is scanned from 0 to E and the
   polish restarts from any better point; the KKT state (interior or boundary, multiplier)
   is reported.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from bhtcli.models.softmax import SoftmaxPair

DEFAULT_STARTS = 32


@dataclass
class Ascent:
    """Local maxima found from a block of starts."""

    X: np.ndarray          # (d, k) end points
    f: np.ndarray          # (k,) D at the end points
    iterations: int


@dataclass
class SearchResult:
    x: np.ndarray
    value: float                    # D(x)
    starts: int
    iterations: int
    local_maxima: int               # distinct local maxima seen among the starts
    values: list = field(default_factory=list)   # D at each distinct local maximum, best first
    on_boundary: bool = True
    kkt_residual: float = 0.0       # ||projected gradient|| / ||gradient at start||, ~0 at a KKT point
    seconds: float = 0.0


def project(X: np.ndarray, energy: float) -> np.ndarray:
    """Project every column onto the ball of radius `energy`."""
    norms = np.linalg.norm(X, axis=0)
    scale = np.minimum(1.0, energy / np.maximum(norms, 1e-300))
    return X * scale


def spectral_directions(pair: SoftmaxPair, r: int, seed: int) -> np.ndarray:
    """Top-r right singular vectors of the row-centred A - B (columns, unit norm); with
    non-exp links, of the stacked [(A+B)/2; A-B], since the scores themselves matter there
    (A against A with a different link has A - B = 0)."""
    G = pair.G if pair.readout.exp_links else pair.K
    n, d = G.shape
    r = min(r, d, n)
    if n * d <= 4_000_000:
        _, _, vt = np.linalg.svd(np.asarray(G, dtype=np.float64), full_matrices=False)
        return vt[:r].T.copy()
    # Randomised subspace iteration: each round is two block products with G.
    rng = np.random.default_rng(seed + 7919)
    Q = np.linalg.qr(rng.standard_normal((d, r + 6)))[0]
    for _ in range(3):
        Q = np.linalg.qr(_matmul(G.T, _matmul(G, Q)))[0]
        pair.passes += 2
    Y = _matmul(G, Q)
    pair.passes += 1
    _, _, vt = np.linalg.svd(Y, full_matrices=False)
    return (Q @ vt.T)[:, :r]


def _matmul(M: np.ndarray, X: np.ndarray) -> np.ndarray:
    """M @ X in M's precision (a float32 M is never up-cast as a whole), float64 result."""
    return np.asarray(M @ X.astype(M.dtype, copy=False), dtype=np.float64)


def row_directions(pair: SoftmaxPair, pool: int) -> np.ndarray:
    """Candidate unit directions built from single rows and pairs of rows.

    Typical optima of D are of two kinds: one row dominates both models with different
    weights (x ~ c_i +- t g_i, for rows with a large midpoint c_i), or one row dominates P_A
    and another P_B (x ~ g_i - g_j tilted towards c_i + c_j). About `pool` candidates in all.
    """
    n = pair.n
    if n < 2:
        return np.zeros((pair.d, 0))
    C, G = pair.C, pair.G
    def unit(M):
        M = np.asarray(M, dtype=np.float64)
        return M / np.maximum(np.linalg.norm(M, axis=0), 1e-300)
    # single rows: the pool // 2 directions c_i + t g_i, t in {-1, -1/2, 1/2, 1}
    m1 = int(min(n, max(1, pool // 8)))
    top_c = np.argsort(-np.einsum("ij,ij->i", C, C), kind="stable")[:m1]
    cu, gu = unit(C[top_c].T), unit(G[top_c].T)
    singles = [unit(cu + t * gu) for t in (-1.0, -0.5, 0.5, 1.0)]
    # pairs of rows with a large ||g_i||
    m2 = int(min(n, max(2, math.isqrt(pool // 4) + 1)))
    top_g = np.argsort(-np.einsum("ij,ij->i", G, G), kind="stable")[:m2]
    I, J = np.meshgrid(top_g, top_g, indexing="ij")
    off = I != J
    I, J = I[off], J[off]
    diff, mid = unit((G[I] - G[J]).T), unit((C[I] + C[J]).T)
    return np.concatenate(singles + [diff, unit(diff + 0.5 * mid)], axis=1)


def starting_points(pair: SoftmaxPair, energy: float, starts: int, seed: int) -> np.ndarray:
    """`starts` columns: spectral directions (both signs, radius E and E/2), the best quarter
    of screened row-based directions, then seeded random points on the sphere and inside."""
    d = pair.d
    V = spectral_directions(pair, 3, seed)
    cols = []
    for j in range(V.shape[1]):
        cols += [energy * V[:, j], -energy * V[:, j]]
    cols += [0.5 * energy * V[:, 0], -0.5 * energy * V[:, 0]]
    n_rows = starts // 4
    if n_rows > 0 and len(cols) < starts:
        cand = energy * row_directions(pair, pool=8 * starts)
        if cand.shape[1]:
            # scored `starts` columns at a time: screening needs no more memory than the climb
            # (the n x 8*starts blocks of one product cost ~5 GB at n = 150,000)
            score = np.concatenate([pair.value(cand[:, s:s + starts])
                                    for s in range(0, cand.shape[1], starts)])
            best = np.argsort(-score, kind="stable")[:n_rows]
            cols += list(cand[:, best].T)
    rng = np.random.default_rng(seed)
    while len(cols) < starts:
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        inside = len(cols) % 2 == 1
        radius = energy * rng.uniform() ** (1.0 / d) if inside else energy
        cols.append(radius * u)
    return np.stack(cols[:starts], axis=1)


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
        on_sphere = np.linalg.norm(X, axis=0) >= self.energy * (1 - 1e-12)
        mu = np.where(on_sphere, np.maximum(np.sum(g * X, axis=0), 0.0) / self.energy ** 2, 0.0)
        return g - mu * X, mu

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
            trial[:, active_c] *= E / np.linalg.norm(trial[:, active_c], axis=0)
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
    finals = distinct(run.X, run.f, energy, tol=1e-3)
    if progress:
        progress(f"polishing the best {min(keep, len(finals))} local maxima")
    run.keep(finals[:keep])
    run.active[:] = True
    run.run(2000, gtol=polish_gtol)
    best = int(np.argmax(run.f))
    x, fx = run.X[:, best].copy(), float(run.f[best])
    iterations = run.iterations

    # Interior check: scan the ray through x; climb again from any better point on it.
    norm_x = np.linalg.norm(x)
    if norm_x > 0:
        ray = np.outer(x / norm_x, np.linspace(0.05, 1.0, 20) * energy)
        fr = objective.value(ray)
        j = int(np.argmax(fr))
        if fr[j] > fx * (1 + 1e-9):
            again = ascend(objective, ray[:, [j]], energy, max_iter=2000, gtol=ray_gtol)
            iterations += again.iterations
            if again.f[0] > fx:
                x, fx = again.X[:, 0].copy(), float(again.f[0])
    return Climb(x, fx, iterations, explored, finals)


def maximize(pair: SoftmaxPair, energy: float, starts: int = DEFAULT_STARTS, seed: int = 0,
             keep: int = 4, progress=None, extra_starts=None) -> SearchResult:
    """Best query over the ball of radius `energy` (see the module docstring for the method).

    extra_starts, a (d, j) block, adds j starting points to the usual `starts` (e.g. the best
    candidate queries, so that the search can only improve on them).
    """
    t0 = time.perf_counter()
    X0 = starting_points(pair, energy, starts, seed)
    if extra_starts is not None and np.size(extra_starts):
        X0 = np.concatenate([X0, project(np.asarray(extra_starts, dtype=np.float64), energy)], axis=1)
    k = X0.shape[1]
    if progress:
        progress(f"climbing from {k} starts")
    # Exploring to 1e-5 ranks the local maxima as well as 1e-7 does (same winners on the test
    # set) with ~40% fewer passes; only the best few are polished.
    # float32 products carry ~1e-7 relative noise (more after summing n terms): explore and
    # polish only to what they resolve; the value at a maximum is flat, so H^2 keeps ~1e-8.
    exact = pair.dtype == np.float64
    found = climb(pair, X0, energy, explore_gtol=1e-5 if exact else 1e-4,
                  polish_gtol=1e-10 if exact else 1e-5, ray_gtol=1e-11 if exact else 1e-5,
                  keep=keep, progress=progress)
    x, fx = found.x, found.value
    values = sorted({float(v) for v in found.explored[found.finals]} | {fx}, reverse=True)
    on_boundary, residual = kkt_state(pair, x, energy)
    return SearchResult(x=x, value=fx, starts=k, iterations=found.iterations,
                        local_maxima=len(values), values=values[:10], on_boundary=on_boundary,
                        kkt_residual=residual, seconds=time.perf_counter() - t0)


def kkt_state(pair: SoftmaxPair, x: np.ndarray, energy: float, boundary_rtol: float = 1e-9):
    """(on_boundary, relative KKT residual) at x (on the sphere: ||x|| >= E (1 - boundary_rtol)).

    On the sphere the gradient must point outward (g = mu x, mu >= 0); inside it must vanish.
    The residual is the norm of the part of g that violates this, over the norm of g at x or
    of g's scale (D / E), whichever is larger.
    """
    D, g = pair.value_and_grad(x[:, None])
    D, g = float(D[0]), g[:, 0]
    nx = np.linalg.norm(x)
    on_boundary = nx >= energy * (1 - boundary_rtol)
    scale = max(np.linalg.norm(g), D / energy, 1e-300)
    if on_boundary:
        mu = float(g @ x) / nx ** 2
        viol = g - max(mu, 0.0) * x
        return True, float(np.linalg.norm(viol) / scale)
    return False, float(np.linalg.norm(g) / scale)
