"""`design --subspace V`: the best query of the form x = V z, ||x|| <= E.

With Q an orthonormal basis of the columns of V (d x r), x = Q z has ||x|| = ||z||, and the
scores are A x = (A Q) z: the search over the subspace is the search over the full ball of
radius E for the projected pair (A Q, B Q), an n x r pair. The usual designer runs on it
unchanged (links and biases act on the scores, so they carry over), and its answer z is
mapped back to x = Q z. The certificate it reports is that of the projected pair: a bound
over the queries of the subspace, not over the whole ball (docs/maths.md §9).
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_matrix, load_pair

RANK_RTOL = 1e-10     # singular values below this fraction of the largest count as zero


def orthonormal_basis(V, d: int, option: str | None = None) -> np.ndarray:
    """An orthonormal basis Q (d x r) of the columns of V, which must be d x r of rank r.

    Parameters
    ----------
    V : array_like or path
        The subspace's spanning vectors, one per column (any matrix format).
    d : int
        The models' query size (their number of columns).
    option : str
        How messages name V.

    Returns
    -------
    numpy.ndarray
        Q with Q^T Q = I spanning the same subspace as V.

    Raises
    ------
    InputError
        Wrong number of rows, more columns than rows, or linearly dependent columns.
    """
    option = parameter_name("subspace") if option is None else option
    label = f"{option} {os.fspath(V)}" if isinstance(V, (str, os.PathLike)) else option
    V = load_matrix(V, label)
    rows, r = V.shape
    if rows != d:
        hint = f"; it looks transposed ({rows} x {r}): save V.T" if r == d else ""
        raise InputError(f"{label} has {rows} rows but the models take queries of d = {d} entries; "
                         f"V must be d x r, one direction per column{hint}")
    if r > d:
        raise InputError(f"{label} has {r} columns but only {d} rows: at most d = {d} independent "
                         "directions exist; give V as d x r with r <= d")
    U, s, _ = np.linalg.svd(V, full_matrices=False)
    rank = int(np.sum(s > RANK_RTOL * s[0])) if s[0] > 0 else 0
    if rank < r:
        raise InputError(f"{label} has rank {rank} but {r} columns: its columns are linearly "
                         "dependent; drop the dependent columns (bht orthonormalises the rest)")
    return U[:, :r]


def project_pair(A: np.ndarray, B: np.ndarray, Q: np.ndarray, rows: int = 8192):
    """(A Q, B Q) in float64, streamed over row blocks (one pass over A and B)."""
    n = A.shape[0]
    AQ, BQ = np.empty((n, Q.shape[1])), np.empty((n, Q.shape[1]))
    for s in range(0, n, rows):
        AQ[s:s + rows] = np.asarray(A[s:s + rows], dtype=np.float64) @ Q
        BQ[s:s + rows] = np.asarray(B[s:s + rows], dtype=np.float64) @ Q
    return AQ, BQ


def design_in_subspace(A, B, V, spec, options=None, progress=None):
    """`design` restricted to x = V z (V orthonormalised), same report plus `subspace_rank`.

    `spec`, `options` and `progress` are those of :func:`bhtcli.commands.design.design`.
    """
    from bhtcli.commands.design import design
    A, B = load_pair(A, B, dtype=None)
    d = A.shape[1]
    Q = orthonormal_basis(V, d)
    AQ, BQ = project_pair(A, B, Q)
    result = design(AQ, BQ, spec, *(() if options is None else (options,)), progress=progress)
    z = np.asarray(result.query, dtype=np.float64)
    note = result.note
    if not result.distinguishable:
        note = f"inside the subspace x = V z: {note}" if note else "inside the subspace x = V z"
    return replace(result, d=d, query=(Q @ z).tolist(), subspace_rank=int(Q.shape[1]), note=note)
