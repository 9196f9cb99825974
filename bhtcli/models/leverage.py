"""Leverage-score models (docs/maths.md §6.1): p_i(s) = sigma_i(S^-1 A) / rank.

With weights w_i = 1/s_i^2 and M = A^T W A: p_i = w_i a_i^T M^-1 a_i / r. Write
Y = W^(1/2) A L^-T (M = L L^T, or the left singular vectors of W^(1/2) A when A is
rank-deficient; stored as Z = Y^T), so the leverage of row i is h_i = ||y_i||^2 and
P = Y Y^T is the projection onto the column space of W^(1/2) A; nothing n x n is ever
formed. In log-weights theta = log w, the Jacobian of p applied to a vector u is

    (J^T u)_j = ( u_j h_j - y_j^T (Y^T diag(u) Y) y_j ) / r,

so any smooth function of p (and q for B) has an O(n d^2) gradient. Only the ratio C/c of the
box c <= s_i^2 <= C matters: p(t s) = p(s).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, solve_triangular

from bhtcli.maths.divergences import Tilt
from bhtcli.errors import InputError

RANK_RTOL = 1e-10


def matrix_rank(A: np.ndarray) -> int:
    s = np.linalg.svd(np.asarray(A, dtype=np.float64), compute_uv=False)
    return int(np.sum(s > RANK_RTOL * (s[0] if s.size else 0.0))) if s.size and s[0] > 0 else 0


@dataclass
class LeverageState:
    """Leverage scores of one model at one weight vector, with what the gradient needs."""

    h: np.ndarray        # leverage scores (sum = rank)
    Z: np.ndarray        # r x n factor, P = Z^T Z (stored this way round: contiguous rows)
    rank: int

    @property
    def log_p(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.h) - math.log(self.rank)

    work: np.ndarray | None = None   # scratch of Z's shape (reused: fresh large arrays are slow)

    def jacobian_t(self, u: np.ndarray) -> np.ndarray:
        """J^T u in theta = log w coordinates (see module docstring)."""
        work = np.empty_like(self.Z) if self.work is None else self.work
        np.multiply(self.Z, u, out=work)
        S = work @ self.Z.T
        np.matmul(S, self.Z, out=work)
        quad = np.einsum("ji,ji->i", work, self.Z)
        return (u * self.h - quad) / self.rank


class LeverageModel:
    """One leverage-score model A (n x d); rank is fixed once (it does not depend on w > 0)."""

    def __init__(self, A: np.ndarray, name: str = "A"):
        self.At = np.ascontiguousarray(np.asarray(A, dtype=np.float64).T)   # d x n
        self.rank = matrix_rank(self.At)
        if self.rank == 0:
            raise InputError(f"{name} is all zeros (rank 0): a leverage-score model needs at "
                             "least one non-zero row")
        self.full_rank = self.rank == self.At.shape[0]
        # Scratch reused across evaluations: on this class of machine a fresh multi-megabyte
        # array costs more in page faults than the arithmetic done in it.
        self._X = np.empty_like(self.At)
        self._Z = np.empty_like(self.At)
        self._work = np.empty_like(self.At)

    def at(self, w: np.ndarray) -> LeverageState:
        """Leverage scores at weights w. The state shares scratch with this model: use it
        before the next call to `at`."""
        Xt = np.multiply(self.At, np.sqrt(w), out=self._X)      # (W^1/2 A)^T, d x n
        if self.full_rank:
            try:
                L, _ = cho_factor(Xt @ Xt.T, lower=True, check_finite=False)
                Linv = solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False)
                Z = np.matmul(Linv, Xt, out=self._Z)
                h = np.einsum("ji,ji->i", Z, Z)
                if np.all(np.isfinite(h)):
                    return LeverageState(h, Z, self.rank, self._work)
            except np.linalg.LinAlgError:
                pass   # numerically singular at this w: fall through to the SVD
        _, _, vt = np.linalg.svd(Xt, full_matrices=False)
        Z = np.ascontiguousarray(vt[: self.rank])
        return LeverageState(np.einsum("ji,ji->i", Z, Z), Z, self.rank)


class LeveragePair:
    """Two leverage models; D(theta) = -log sum sqrt(p q) and KL, with gradients in theta."""

    def __init__(self, A: np.ndarray, B: np.ndarray):
        self.a, self.b = LeverageModel(A, "A"), LeverageModel(B, "B")
        self.n = A.shape[0]
        self.evaluations = 0

    def states(self, theta: np.ndarray):
        self.evaluations += 1
        w = np.exp(theta)
        return self.a.at(w), self.b.at(w)

    def tilt(self, theta: np.ndarray) -> Tilt:
        sa, sb = self.states(theta)
        return tilt_of(sa.log_p, sb.log_p)

    def value_and_grad(self, theta: np.ndarray, objective: str = "bhattacharyya"):
        """(objective, gradient in theta); objective D (default) or KL(P_A || P_B)."""
        sa, sb = self.states(theta)
        p, q = sa.h / sa.rank, sb.h / sb.rank
        if objective == "kl":
            live = p > 0
            ratio = np.where(live, p / np.where(q > 0, q, 1e-300), 0.0)
            logr = np.where(live, np.log(np.where(live, p, 1.0)) - np.log(np.where(q > 0, q, 1e-300)), 0.0)
            kl = float(np.sum(p * logr))
            grad = sa.jacobian_t(logr + 1.0) - sb.jacobian_t(ratio)
            return kl, grad
        root = np.sqrt(p * q)
        bc = float(root.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(p > 0, 0.5 * np.sqrt(q / np.where(p > 0, p, 1.0)), 0.0)
            v = np.where(q > 0, 0.5 * np.sqrt(p / np.where(q > 0, q, 1.0)), 0.0)
        dbc = sa.jacobian_t(u) + sb.jacobian_t(v)
        D = -math.log(bc) if bc > 0 else math.inf
        return D, -dbc / bc


def tilt_of(log_p: np.ndarray, log_q: np.ndarray) -> Tilt:
    """The shared tilt representation of two distributions given by their logs."""
    with np.errstate(invalid="ignore"):
        c = 0.5 * (log_p + log_q)
        delta = log_p - log_q
    # Answers impossible under both models carry no information: drop them from the tilt.
    both_zero = ~np.isfinite(log_p) & ~np.isfinite(log_q)
    c = np.where(both_zero, -np.inf, c)
    delta = np.where(both_zero, 0.0, delta)
    return Tilt.from_logits(c, delta)
