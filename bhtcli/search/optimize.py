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

from bhtcli.models.softmax import SoftmaxPair, block_product
from bhtcli.search.result import SearchResult  # noqa: F401  (re-exported: the searches' result)

DEFAULT_STARTS = 32


@dataclass
class Ascent:
    """Local maxima found from a block of starts."""

    X: np.ndarray          # (d, k) end points
    f: np.ndarray          # (k,) D at the end points
    iterations: int


def project(X: np.ndarray, energy: float) -> np.ndarray:
    """Project every column onto the ball of radius `energy`."""
    norms = np.linalg.norm(X, axis=0)
    scale = np.minimum(1.0, energy / np.maximum(norms, 1e-300))
    return X * scale


def spectral_directions(pair: SoftmaxPair, r: int, seed: int, power: int = 3) -> np.ndarray:
    """Top-r right singular vectors of the row-centred A - B (columns, unit norm); with
    non-exp links, of the stacked [(A+B)/2; A-B], since the scores themselves matter there
    (A against A with a different link has A - B = 0)."""
    G = pair.G if pair.readout.exp_links else pair.K
    n, d = G.shape
    r = min(r, d, n)
    if n * d <= 4_000_000:
        _, _, vt = np.linalg.svd(np.asarray(G, dtype=np.float64), full_matrices=False)
        return vt[:r].T.copy()
    # Randomised subspace iteration: each of the `power` rounds is two block products with G.
    rng = np.random.default_rng(seed + 7919)
    Q = np.linalg.qr(rng.standard_normal((d, r + 6)))[0]
    for _ in range(power):
        Q = np.linalg.qr(_matmul(G.T, _matmul(G, Q)))[0]
        pair.passes += 2
    Y = _matmul(G, Q)
    pair.passes += 1
    _, _, vt = np.linalg.svd(Y, full_matrices=False)
    return (Q @ vt.T)[:, :r]


def _matmul(M: np.ndarray, X: np.ndarray) -> np.ndarray:
    """M @ X in M's precision (a float32 M is never up-cast as a whole), float64 result."""
    return block_product(M, X)


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


def row_norms(pair: SoftmaxPair):
    """(||c_i||^2, ||g_i||^2) for every row, computed once per pair (one read of K)."""
    cached = getattr(pair, "_row_norms", None)
    if cached is None:
        C, G = pair.C, pair.G
        cached = (np.einsum("ij,ij->i", C, C, dtype=np.float64),
                  np.einsum("ij,ij->i", G, G, dtype=np.float64))
        pair._row_norms = cached
    return cached


SWAP_TOP = 4          # rows of largest ||g_i||, and twice as many of largest ||c_i||, paired
                      # with every other row
SWAP_PARTNERS = 4096  # at most this many partners (by ||g_j||) for each of them
SWAP_MIXES = (0.5, 1.0, 2.0)  # with the bulk counted: weights of the difference part against the midpoint part
SWAP_ROWS = 192       # rows (largest ||c_i||) the cheap pre-score looks at, besides i and j


def swap_directions(pair: SoftmaxPair, energy: float, keep: int, bulk: bool = False,
                    exact: bool = True) -> np.ndarray:
    """The best `keep` two-row-swap directions (unit columns), screened cheaply.

    A swap maximum puts most of P_A's mass on row i and most of P_B's on row j. For every
    pair (i, j) with i among the SWAP_TOP rows of largest ||g_i|| (g = a - b) or the
    2 SWAP_TOP of largest ||c_i|| (c = (a + b)/2), and j any other row (at most SWAP_PARTNERS of them, half by
    ||g_j||, half by ||c_j||), both orientations of
    u = +-unit(g_i - g_j) + unit(c_i + c_j), made orthogonal to c_i - c_j (rows i and j get
    equal midpoint scores, the difference decides), are pre-scored by D at x = E u restricted
    to rows i, j and the SWAP_ROWS rows of largest ||c||; the best 4 * keep are scored
    exactly (one product per block) and the best `keep` returned. With `bulk`, the pre-score
    also counts the other rows, as a bulk at logit 0 (the scores are centred) holding their
    mass; at vocabulary scale that mass is what a swap competes with (docs/maths.md §16).
    With exact=False the best `keep` by the pre-score are returned without the exact scoring
    (the sketched search ranks them itself, in its subspace, for no pass over A and B).
    """
    n, d = pair.n, pair.d
    if n < 3 or keep <= 0:
        return np.zeros((d, 0))
    cn, gn = row_norms(pair)
    by_g, by_c = np.argsort(-gn, kind="stable"), np.argsort(-cn, kind="stable")
    top = np.unique(np.concatenate([by_g[:SWAP_TOP], by_c[:2 * SWAP_TOP]]))
    partners = SWAP_PARTNERS // 2 if bulk else SWAP_PARTNERS   # three mixes: half the partners
    half = partners // 2
    J = np.arange(n) if n <= partners else \
        np.unique(np.concatenate([by_g[:half], by_c[:half]]))
    R = by_c[:SWAP_ROWS // 4 if bulk else SWAP_ROWS]     # with the bulk counted, fewer suffice
    f64 = np.float64
    CJ, GJ = np.asarray(pair.C[J], f64), np.asarray(pair.G[J], f64)       # m x d
    CT, GT = np.asarray(pair.C[top], f64).T, np.asarray(pair.G[top], f64).T  # d x t
    CR, GR = np.asarray(pair.C[R], f64), np.asarray(pair.G[R], f64)
    # Every score at x = E u is linear in (g_i, g_j, c_i, c_j): one set of products serves
    # all candidates (rows R against the partners and the top rows; partners against tops).
    RJ = {(a, b): Ra @ Mb.T for a, Ra in (("c", CR), ("g", GR)) for b, Mb in (("c", CJ), ("g", GJ))}
    RT = {(a, b): Ra @ Mb for a, Ra in (("c", CR), ("g", GR)) for b, Mb in (("c", CT), ("g", GT))}
    JT = {(a, b): Ma @ Mb for a, Ma in (("c", CJ), ("g", GJ)) for b, Mb in (("c", CT), ("g", GT))}
    cc_j, gg_j, gc_j = cn[J], gn[J], np.einsum("ij,ij->i", CJ, GJ)
    in_r = R[:, None] == J[None, :]
    scores, dirs = [], []
    for t, i in enumerate(top):
        cc_i, gg_i, gc_i = cn[i], gn[i], float(CT[:, t] @ GT[:, t])
        cc_ij, gg_ij = JT["c", "c"][:, t], JT["g", "g"][:, t]        # c_j.c_i, g_j.g_i
        cj_gi, gj_ci = JT["c", "g"][:, t], JT["g", "c"][:, t]        # c_j.g_i, g_j.c_i
        with np.errstate(divide="ignore", invalid="ignore"):
            n_gd = np.sqrt(np.maximum(gg_i - 2 * gg_ij + gg_j, 0.0))
            n_cs = np.sqrt(np.maximum(cc_i + 2 * cc_ij + cc_j, 0.0))
            n_cd = np.sqrt(np.maximum(cc_i - 2 * cc_ij + cc_j, 0.0))
            gd_cd = gc_i - cj_gi - gj_ci + gc_j            # (g_i - g_j).(c_i - c_j)
            gd_cs = gc_i + cj_gi - gj_ci - gc_j            # (g_i - g_j).(c_i + c_j)
            cs_cd = cc_i - cc_j                            # (c_i + c_j).(c_i - c_j)
            for sign, mix in ((s_, w_) for s_ in (1.0, -1.0) for w_ in (SWAP_MIXES if bulk else (1.0,))):
                # u0 = sign mix (g_i - g_j)/n_gd + (c_i + c_j)/n_cs, minus its part along c_i - c_j
                tt = np.where(n_cd > 0, (sign * mix * gd_cd / n_gd + cs_cd / n_cs) / n_cd, 0.0)
                n1 = np.sqrt(np.maximum(1.0 + mix * mix + 2 * sign * mix * gd_cs / (n_gd * n_cs)
                                        - tt ** 2, 0.0))
                k = energy / n1
                a_gi, a_gj = k * sign * mix / n_gd, -k * sign * mix / n_gd
                a_ci = k * (1.0 / n_cs - np.where(n_cd > 0, tt / n_cd, 0.0))
                a_cj = k * (1.0 / n_cs + np.where(n_cd > 0, tt / n_cd, 0.0))
                ok = np.isfinite(a_gi) & np.isfinite(a_ci) & np.isfinite(a_cj) & (J != i)
                a_gi, a_gj, a_ci, a_cj = (np.where(ok, v, 0.0) for v in (a_gi, a_gj, a_ci, a_cj))

                def at_rows(r):        # scores r.x of rows R (r = "c" or "g")
                    return (RT[r, "g"][:, [t]] * a_gi + RJ[r, "g"] * a_gj
                            + RT[r, "c"][:, [t]] * a_ci + RJ[r, "c"] * a_cj)
                c_r = np.where(in_r | (R[:, None] == i), -np.inf, at_rows("c"))
                g_r = np.where(in_r | (R[:, None] == i), 0.0, at_rows("g"))
                c_i = a_gi * gc_i + a_gj * gj_ci + a_ci * cc_i + a_cj * cc_ij
                g_i = a_gi * gg_i + a_gj * gg_ij + a_ci * gc_i + a_cj * cj_gi
                c_j = a_gi * cj_gi + a_gj * gc_j + a_ci * cc_ij + a_cj * cc_j
                g_j = a_gi * gg_ij + a_gj * gg_j + a_ci * gj_ci + a_cj * gc_j
                cs, gs = [c_r, c_i, c_j], [g_r, g_i, g_j]
                if bulk and n > len(R) + 2:
                    cs.append(np.full_like(c_i, math.log(n - len(R) - 2)))
                    gs.append(np.zeros_like(g_i))
                score = _restricted_d(np.vstack(cs), np.vstack(gs))
                score[~ok] = -np.inf
                scores.append(score)
                dirs.append((i, sign, a_gi, a_gj, a_ci, a_cj))
    flat = np.concatenate(scores)
    m = len(J)
    pick = np.argsort(-flat, kind="stable")[:4 * keep if exact else keep]
    pick = pick[np.isfinite(flat[pick])]
    cols = []
    for q in pick:
        i, _, a_gi, a_gj, a_ci, a_cj = dirs[q // m]
        r = q % m
        cols.append(a_gi[r] * np.asarray(pair.G[i], f64) + a_gj[r] * GJ[r]
                    + a_ci[r] * np.asarray(pair.C[i], f64) + a_cj[r] * CJ[r])
    if not cols:
        return np.zeros((d, 0))
    cand = np.stack(cols, axis=1)
    if not exact:
        return cand / np.maximum(np.linalg.norm(cand, axis=0), 1e-300)
    scores = np.concatenate([pair.value(cand[:, s:s + 64]) for s in range(0, cand.shape[1], 64)])
    order = np.argsort(-scores, kind="stable")[:keep]
    return cand[:, order] / np.maximum(np.linalg.norm(cand[:, order], axis=0), 1e-300)


def _restricted_d(c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Plain-form D per column from midpoint scores c (-inf = row absent) and differences g."""
    def lse(z):
        m = z.max(axis=0)
        return m + np.log(np.exp(z - m).sum(axis=0))
    return 0.5 * (lse(c + 0.5 * g) + lse(c - 0.5 * g)) - lse(c)


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
    if n_rows > 0 and len(cols) < starts and starts >= 8:
        cols += list((energy * swap_directions(pair, energy, n_rows)).T)
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
    return Climb(x, fx, iterations, f, finals)


def maximize(pair: SoftmaxPair, energy: float, starts: int | None = DEFAULT_STARTS, seed: int = 0,
             keep: int = 4, progress=None, *, max_starts: int | None = None,
             extra_starts=None) -> SearchResult:
    """Best query over the ball of radius `energy`: the budget ladder and, with starts=None,
    adaptive rounds of starts (bhtcli.search.ladder; the module docstring there).

    extra_starts, a (d, j) block, adds j starting points (e.g. the best candidate queries, so
    that the search can only improve on them).
    """
    from bhtcli.search.ladder import DEFAULT_MAX_STARTS, search_budgets
    carried = None
    if extra_starts is not None and np.size(extra_starts):
        carried = project(np.asarray(extra_starts, dtype=np.float64), energy)
    return search_budgets(pair, [energy], starts=starts, seed=seed, keep=keep, progress=progress,
                          max_starts=DEFAULT_MAX_STARTS if max_starts is None else max_starts,
                          carried=carried)[0]


def lagrangian_gradient(X: np.ndarray, g: np.ndarray, energy: float, sphere_rtol: float = 1e-12):
    """(g - mu X, mu) per column: mu = max(g.x, 0) / E^2 on the sphere (||x|| >= E (1 -
    sphere_rtol)), 0 inside; the part of the gradient that the ball's constraint does not absorb."""
    on_sphere = np.linalg.norm(X, axis=0) >= energy * (1 - sphere_rtol)
    mu = np.where(on_sphere, np.maximum(np.sum(g * X, axis=0), 0.0) / energy ** 2, 0.0)
    return g - mu * X, mu


def kkt_residuals(X: np.ndarray, f: np.ndarray, g: np.ndarray, energy: float,
                  boundary_rtol: float = 1e-9) -> np.ndarray:
    """The relative KKT residual of :func:`kkt_state` for every column of X, from values f and
    gradients g already computed."""
    nx = np.linalg.norm(X, axis=0)
    scale = np.maximum(np.maximum(np.linalg.norm(g, axis=0), f / energy), 1e-300)
    on = nx >= energy * (1 - boundary_rtol)
    mu = np.where(on, np.maximum(np.sum(g * X, axis=0), 0.0) / np.maximum(nx * nx, 1e-300), 0.0)
    return np.linalg.norm(g - mu * X, axis=0) / scale


def kkt_state(pair: SoftmaxPair, x: np.ndarray, energy: float, boundary_rtol: float = 1e-9):
    """(on_boundary, relative KKT residual) at x (on the sphere: ||x|| >= E (1 - boundary_rtol)).

    On the sphere the gradient must point outward (g = mu x, mu >= 0); inside it must vanish.
    The residual is the norm of the part of g that violates this, over the norm of g at x or
    of g's scale (D / E), whichever is larger.
    """
    X = np.asarray(x, dtype=np.float64)[:, None]
    D, g = pair.value_and_grad(X)
    on_boundary = bool(np.linalg.norm(X) >= energy * (1 - boundary_rtol))
    return on_boundary, float(kkt_residuals(X, D, g, energy, boundary_rtol)[0])
