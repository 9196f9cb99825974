"""Convex-concave procedure (docs/maths.md §5) with cvxpy: a slow, independent cross-check.

Maximising D = 1/2 lse(Ax) + 1/2 lse(Bx) - lse(Cx) (C = (A+B)/2) is minimising
lse(Cx) - [1/2 lse(Ax) + 1/2 lse(Bx)]. Linearising the bracket at x_k (a convex function,
so the linearisation is below it) gives the convex step

    x_{k+1} = argmin_{||x|| <= E} lse(Cx) - g_k^T x,   g_k = 1/2 A^T p_A(x_k) + 1/2 B^T p_B(x_k),

which never decreases D (Lipp and Boyd 2016). Each step is an exponential-cone program.
"""
from __future__ import annotations

import numpy as np

from bhtcli.errors import InputError, SolverError, parameter_name

CCP_MAX_SIZE = 200_000   # n * d


def ccp_maximize(A: np.ndarray, B: np.ndarray, X0: np.ndarray, energy: float,
                 max_steps: int = 100, rtol: float = 1e-10):
    """Run CCP from each column of X0; return (X, D values, total convex solves, passes over
    A and B). cvxpy's own warnings are kept off the user's terminal."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # e.g. a UserWarning about solution accuracy
        return _ccp(A, B, X0, energy, max_steps, rtol)


def _ccp(A, B, X0, energy, max_steps, rtol):
    import cvxpy as cp

    n, d = A.shape
    if n * d > CCP_MAX_SIZE:
        raise InputError(f"{parameter_name('method')} ccp solves a cone program per step and is meant for small "
                         f"models (n*d <= {CCP_MAX_SIZE}); this one has n*d = {n * d}: "
                         f"use the default {parameter_name('method')} lbfgs")
    C = 0.5 * (A + B)
    x = cp.Variable(d)
    g = cp.Parameter(d)
    problem = cp.Problem(cp.Minimize(cp.log_sum_exp(C @ x) - g @ x), [cp.norm(x, 2) <= energy])

    passes = [0]

    def D_and_linear(xv):
        passes[0] += 1
        a, b, c = A @ xv, B @ xv, C @ xv
        lse = lambda z: z.max() + np.log(np.exp(z - z.max()).sum())
        pa, pb = np.exp(a - lse(a)), np.exp(b - lse(b))
        return 0.5 * lse(a) + 0.5 * lse(b) - lse(c), 0.5 * A.T @ pa + 0.5 * B.T @ pb

    ends, values, solves = [], [], 0
    for j in range(X0.shape[1]):
        xv = X0[:, j].copy()
        D, lin = D_and_linear(xv)
        for _ in range(max_steps):
            g.value = lin
            try:
                problem.solve(solver=cp.CLARABEL)
            except cp.error.SolverError as exc:
                raise SolverError(f"cvxpy could not solve a CCP step: {exc}") from None
            solves += 1
            if x.value is None:
                raise SolverError(f"cvxpy returned no solution (status {problem.status})")
            new = np.asarray(x.value, dtype=np.float64)
            nrm = np.linalg.norm(new)
            if nrm > energy:
                new *= energy / nrm
            D_new, lin_new = D_and_linear(new)
            if D_new < D:          # solver tolerance; CCP itself is monotone
                break
            improved = D_new - D
            xv, D, lin = new, D_new, lin_new
            if improved <= rtol * max(abs(D), 1e-300):
                break
        ends.append(xv)
        values.append(D)
    return np.stack(ends, axis=1), np.array(values), solves, passes[0]


def ccp_search(pair, A, B, energy: float, starts: int, seed: int):
    """The CCP cross-check from the full search's starting points (`pair` is A and B's
    SoftmaxPair), as a SearchResult; its passes over A and B are added to ``pair.passes``."""
    import time

    from bhtcli.search.kkt import kkt_state
    from bhtcli.search.result import SearchResult
    from bhtcli.search.starts import starting_points

    t = time.perf_counter()
    X0 = starting_points(pair, energy, starts, seed)
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    X, values, solves, passes = ccp_maximize(A, B, X0, energy)
    pair.passes += passes
    best = int(np.argmax(values))
    x = X[:, best]
    # The cone solver's tolerance (~1e-8) leaves x just inside the sphere: judge the KKT
    # conditions on the sphere at that tolerance, not at L-BFGS's 1e-9.
    on_boundary, residual = kkt_state(pair, x, energy, boundary_rtol=1e-6)
    order = []                          # values equal to the solver's tolerance: one maximum
    for v in sorted(values.tolist(), reverse=True):
        if all(abs(v - u) > 1e-6 * max(abs(u), 1e-300) for u in order):
            order.append(v)
    return SearchResult(x=x, value=float(values[best]), starts=X0.shape[1], iterations=solves,
                        local_maxima=len(order), values=order, on_boundary=on_boundary,
                        kkt_residual=residual, seconds=time.perf_counter() - t, method="ccp",
                        message=f"{solves} convex solves from {X0.shape[1]} starts")
