"""First-order (KKT) conditions of max D(x) subject to ||x|| <= E: on the sphere the gradient
points outward (g = mu x, mu >= 0), inside it vanishes."""
from __future__ import annotations

import numpy as np

from bhtcli.models.softmax import SoftmaxPair


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


HULL_MAX = 6        # active functions at most for the exact minimum-norm point (2^6 subsets)


def hull_residual(x: np.ndarray, grads: np.ndarray, f: float, energy: float,
                  boundary_rtol: float = 1e-9) -> float | None:
    """The relative KKT residual of a maximum of min_p f_p at x, where the columns of `grads`
    are the gradients of the active f_p (those that equal the minimum there): the smallest
    Lagrangian residual of a convex combination of them (Clarke stationarity: a maximum on a
    kink, where two pairs' D are equal, has 0 in their hull, not a zero gradient of either).
    On the sphere the part along x that points outward is absorbed, as in
    :func:`kkt_residuals`. Exact over the subsets of the columns (their minimum-norm point
    lies in the affine hull of one of them); None beyond HULL_MAX columns."""
    d, m = grads.shape
    if m > HULL_MAX:
        return None
    from itertools import combinations
    nx = float(np.linalg.norm(x))
    T = grads
    if nx >= energy * (1 - boundary_rtol) and nx > 0:      # choose lambda on the tangent parts
        u = x / nx
        T = grads - np.outer(u, u @ grads)
    best = np.inf
    for k in range(1, min(m, d + 1) + 1):
        for subset in combinations(range(m), k):
            V = grads[:, subset]
            Q = T[:, subset].T @ T[:, subset]
            M = np.block([[Q, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            rhs = np.concatenate([np.zeros(k), [1.0]])
            lam = np.linalg.lstsq(M, rhs, rcond=None)[0][:k]
            if np.any(lam < -1e-12):
                continue
            g = V @ np.maximum(lam, 0.0) / max(float(np.maximum(lam, 0.0).sum()), 1e-300)
            best = min(best, float(kkt_residuals(x[:, None], np.array([f]), g[:, None], energy,
                                                 boundary_rtol)[0]))
    return best
