"""The paper's small-perturbation estimate (docs/maths.md §10.2, Theorems 3.5/3.6) made concrete.

For B = A + M (the paper's eps absorbed into M = B - A) and a query x, write p = softmax(Ax)
and delta = Mx. To second order in M,

    D(x) ~ H^2(x) ~ V(x) / 8,   V(x) = Var_{i ~ p}(delta_i),

so the paper's nu = sup_{||x|| <= E} V(x) gives D ~ nu / 8 and the counts of docs/maths.md §3
with that D. In the same limit the log-likelihood ratio of one answer is Gaussian with mean
+-nu/2 and variance nu under A and B, so the minimax test needs N = 4 z^2 / nu,
z = Phi^-1(1 - alpha) (the "predicted" count of this estimate).

nu is itself a nonconvex maximisation over the ball. With mu = E_p[delta], dev = delta - mu:

    grad V = A^T [p * (dev^2 - V)] + M^T [2 p * dev]

(d/dz E_p[f] = p * (f - E_p f) for the logits z = Ax; the derivative through mu vanishes
because E_p[dev] = 0). `VarianceObjective` exposes V in the interface of
bhtcli.models.softmax.SoftmaxPair that the designer's batched projected L-BFGS
(bhtcli.search.ascent.BatchedAscent) uses (evaluate / pullback), so it climbs V from many starts
at once.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

from bhtcli.io.load import load_pair
from bhtcli.search.ascent import climb, project
from bhtcli.maths.counts import ceil_count, lower_count, upper_count
from bhtcli.io.validation import check_energy, check_error, check_seed, check_starts

from bhtcli.settings import DEFAULT_STARTS  # noqa: E402


class VarianceObjective:
    """V(x) = Var_{i ~ softmax(Ax)}((Mx)_i) for blocks of queries, with its gradient.

    Holds K = [A; M], both row-centred (V ignores a common shift of either's rows). One pass
    is one product of K with a block of queries.
    """

    def __init__(self, A: np.ndarray, M: np.ndarray):
        n, d = A.shape
        self.n, self.d = n, d
        K = np.empty((2 * n, d))
        K[:n] = A
        K[n:] = M
        K[:n] -= K[:n].mean(axis=0)
        K[n:] -= K[n:].mean(axis=0)
        self.K = K
        self.passes = 0

    @property
    def M(self) -> np.ndarray:
        """The row-centred perturbation."""
        return self.K[self.n:]

    def top_directions(self, r: int, seed: int) -> np.ndarray:
        """Top-r right singular vectors of the row-centred M (columns): near x = 0,
        V(x) ~ ||M x||^2 / n, so these are the small-budget maximisers."""
        M = self.M
        r = min(r, self.n, self.d)
        if self.n * self.d <= 4_000_000:
            return np.linalg.svd(M, full_matrices=False)[2][:r].T.copy()
        rng = np.random.default_rng(seed + 7919)          # randomised subspace iteration
        Q = np.linalg.qr(rng.standard_normal((self.d, r + 6)))[0]
        for _ in range(3):
            Q = np.linalg.qr(M.T @ (M @ Q))[0]
        self.passes += 6
        return (Q @ np.linalg.svd(M @ Q, full_matrices=False)[2].T)[:, :r]

    def evaluate(self, X: np.ndarray):
        """V at each column of X and the gradient weights (w_a, w_m): grad V = A^T w_a + M^T w_m."""
        self.passes += 1
        Z = self.K @ X
        z, delta = Z[: self.n], Z[self.n:]
        z = z - z.max(axis=0)
        p = np.exp(z)
        p /= p.sum(axis=0)
        dev = delta - np.sum(p * delta, axis=0)
        sq = dev * dev
        V = np.sum(p * sq, axis=0)
        return V, p * (sq - V), 2.0 * p * dev

    def pullback(self, w_a: np.ndarray, w_m: np.ndarray) -> np.ndarray:
        """A^T w_a + M^T w_m in one product."""
        self.passes += 1
        return self.K.T @ np.concatenate([w_a, w_m], axis=0)

    def value(self, X: np.ndarray) -> np.ndarray:
        return self.evaluate(X)[0]

    def value_and_grad(self, X: np.ndarray):
        V, w_a, w_m = self.evaluate(X)
        return V, self.pullback(w_a, w_m)


def ridge_directions(objective: VarianceObjective, pool: int, rng) -> np.ndarray:
    """Unit directions on which the two largest logits of A x tie, near `pool` random ones.

    Far from the origin softmax(Ax) concentrates on its top row and V decays, except on the
    ridges where two rows i, j tie: there V = ((m_i - m_j) x)^2 / 4 keeps growing with ||x||,
    so the large-budget maxima of V sit on (or next to) such ridges, in narrow peaks that
    random starts miss. Each random direction u is projected onto the ridge of its own top
    two rows: u - ((a_i - a_j) u / ||a_i - a_j||^2) (a_i - a_j).
    """
    n, d = objective.n, objective.d
    if n < 2:
        return np.zeros((d, 0))
    U = rng.standard_normal((d, pool))
    U /= np.linalg.norm(U, axis=0)
    A = objective.K[:n]
    objective.passes += 1
    top2 = np.argpartition(-(A @ U), 1, axis=0)[:2]
    diff = (A[top2[0]] - A[top2[1]]).T                      # (d, pool)
    sq = np.sum(diff * diff, axis=0)
    ok = sq > 0
    R = U[:, ok] - diff[:, ok] * (np.sum(diff[:, ok] * U[:, ok], axis=0) / sq[ok])
    norms = np.linalg.norm(R, axis=0)
    return R[:, norms > 1e-12] / norms[norms > 1e-12]


def maximize_variance(objective: VarianceObjective, energy: float, starts: int = DEFAULT_STARTS,
                      seed: int = 0, query=None):
    """(x, nu, distinct local maxima seen) for nu = sup_{||x|| <= energy} V(x).

    Starts: `query` (e.g. the designed query) if given; the top singular vectors of the
    row-centred M with both signs at radius E and E/2 (V ~ ||(I - 11^T/n) M x||^2 / n near
    x = 0); the best half of the rest screened (one pass) from ridge directions where two
    rows of A tie (see :func:`ridge_directions`); seeded random points on the sphere and
    inside the ball. All climb together;
    the best 4 distinct maxima are polished; finally the ray through the winner is scanned
    for a better interior point.
    """
    d = objective.d
    cols = [] if query is None else [np.asarray(query, dtype=np.float64)]
    V = objective.top_directions(3, seed)
    for j in range(V.shape[1]):
        cols += [energy * V[:, j], -energy * V[:, j]]
    cols += [0.5 * energy * V[:, 0], -0.5 * energy * V[:, 0]]
    rng = np.random.default_rng(seed)
    n_ridge = (starts - len(cols)) // 2
    if n_ridge > 0:
        cand = energy * ridge_directions(objective, 16 * starts, rng)
        score = objective.value(cand)
        cols += list(cand[:, np.argsort(-score, kind="stable")[:n_ridge]].T)
    while len(cols) < starts:
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        radius = energy * rng.uniform() ** (1.0 / d) if len(cols) % 2 else energy
        cols.append(radius * u)
    found = climb(objective, np.stack(cols[:starts], axis=1), energy,
                  explore_gtol=1e-6, polish_gtol=1e-10, ray_gtol=1e-11)
    x, nu, seen = found.x, found.value, len(found.finals)
    return project(x[:, None], energy)[:, 0], nu, seen


def small_perturbation_estimate(A, B, energy: float, error: float = 0.05, starts: int = DEFAULT_STARTS,
                                seed: int = 0, query=None) -> dict:
    """nu = sup_{||x|| <= E} Var_{softmax(Ax)}((B - A) x) and the query counts it predicts.

    Parameters
    ----------
    A, B : array_like or path
        The model before and after the update (n x d).
    energy : float
        Budget E on ||x||_2.
    error : float
        Target error alpha of both error types.
    starts, seed : int
        Multi-start search for nu (see :func:`maximize_variance`).
    query : array_like, optional
        An extra starting point (the designed query).

    Returns
    -------
    dict
        ``nu``; ``query_norm`` of the maximiser; ``bhattacharyya_distance_estimate`` = nu/8 (D ~ H^2 ~ nu/8);
        ``hellinger_squared_estimate`` = 1 - exp(-nu/8); ``samples`` with ``lower`` and
        ``upper`` (docs/maths.md §3 with D = nu/8) and ``predicted`` = ceil(4 z^2 / nu), the
        Gaussian limit of the minimax likelihood-ratio test; ``paper_order`` = 1/nu (the
        Theta(eps^-2 nu^-1) of Theorem 3.5 with eps absorbed); ``local_maxima``.
        Counts are None when nu is 0.
    """
    energy, error = check_energy(energy), check_error(error)
    starts, seed = check_starts(starts), check_seed(seed)
    A, B = load_pair(A, B)
    A = np.asarray(A, dtype=np.float64)
    objective = VarianceObjective(A, np.asarray(B, dtype=np.float64) - A)
    x, nu, seen = maximize_variance(objective, energy, starts, seed, query)
    D = nu / 8.0
    z = float(ndtri(1.0 - error))
    return {"nu": nu, "query_norm": float(np.linalg.norm(x)), "bhattacharyya_distance_estimate": D,
            "hellinger_squared_estimate": -math.expm1(-D),
            "samples": {"lower": lower_count(D, error), "upper": upper_count(D, error),
                        "predicted": ceil_count(4.0 * z * z / nu) if nu > 0 else None},
            "paper_order": 1.0 / nu if nu > 0 else None, "local_maxima": seen, "starts": starts}
