"""Orthonormal bases and top singular directions of tall matrices from their Gram matrices.

A Householder QR or an SVD of a tall d x r (or n x r) matrix makes O(r) calls into the
threaded BLAS, each a synchronisation of its threads; on a machine whose other cores are busy,
each waits for a scheduler slice (measured: 1.4 s for an SVD of 1,024 x 88 against 3 ms when
the cores are free). The Gram route makes a handful of matrix products and one small r x r
eigendecomposition, at any load (docs/maths.md §5.4).
"""
from __future__ import annotations

import numpy as np


def _scaled(M: np.ndarray) -> np.ndarray:
    """M / max|M| (the span and the singular directions are those of M): its Gram matrix
    neither overflows nor underflows whatever the scale of M's entries."""
    top = float(np.max(np.abs(M), initial=0.0))
    return M / top if top > 0 and np.isfinite(top) else M


def _inverse_sqrt(S: np.ndarray) -> np.ndarray:
    """S^(-1/2) of a symmetric positive definite S (well conditioned: callers check)."""
    w, V = np.linalg.eigh(S)
    return (V / np.sqrt(w)) @ V.T


def orthonormal_span(M: np.ndarray, rtol: float = 1e-6) -> np.ndarray:
    """Orthonormal columns spanning the columns of M, without the directions whose singular
    value is below `rtol` times the largest (as an SVD's U with those columns dropped).

    From M^T M = V diag(w) V^T: U = M V diag(w)^(-1/2) over the kept w > rtol^2 max w, largest
    first; orthonormal to ~eps / rtol^2, so one symmetric correction U (U^T U)^(-1/2) takes it
    to rounding (the kept part's condition number is below 1 / rtol). The Gram matrix resolves
    singular values down to ~1e-8 of the largest: `rtol` >= 1e-7."""
    M = np.asarray(M, dtype=np.float64)
    if M.shape[1] == 0:
        return M.copy()
    M = _scaled(M)
    w, V = np.linalg.eigh(M.T @ M)
    keep = np.flatnonzero(w > rtol * rtol * max(w[-1], 0.0))[::-1]
    if w[-1] <= 0 or keep.size == 0:
        return np.zeros((M.shape[0], 0))
    U = M @ (V[:, keep] / np.sqrt(w[keep]))
    return U @ _inverse_sqrt(U.T @ U)


def orthonormalise(M: np.ndarray) -> np.ndarray:
    """Orthonormal columns with the span of M's (M of full column rank), in the order of M's
    columns as far as a symmetric correction keeps them: M (M^T M)^(-1/2), applied twice.
    Falls back to a Householder QR where M^T M is too ill-conditioned for that."""
    M = np.asarray(M, dtype=np.float64)
    if M.shape[1] == 0:
        return M.copy()
    M = _scaled(M)
    S = M.T @ M
    w = np.linalg.eigvalsh(S)
    if not (w[0] > 1e-8 * w[-1] > 0):
        return np.linalg.qr(M)[0]
    U = M @ _inverse_sqrt(S)
    return U @ _inverse_sqrt(U.T @ U)


def top_right_singular_vectors(M: np.ndarray, r: int) -> np.ndarray:
    """The right singular vectors of M for its r largest singular values (columns, d x r),
    from the eigendecomposition of M^T M (d x d; as an SVD's for directions whose squared
    singular values are separated, arbitrary but orthonormal where they are not, e.g. for a
    rank below r). Signs: the largest entry of each column positive."""
    M = np.asarray(M, dtype=np.float64)
    d = M.shape[1]
    r = min(r, d)
    M = _scaled(M)
    _, V = np.linalg.eigh(M.T @ M)
    V = V[:, ::-1][:, :r]
    big = np.argmax(np.abs(V), axis=0)
    return V * np.where(V[big, np.arange(r)] < 0, -1.0, 1.0)
