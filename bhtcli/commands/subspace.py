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


def project(mats, Q: np.ndarray, rows: int = 8192) -> list:
    """[M Q for M in mats] in float64, streamed over row blocks (one pass over each model)."""
    out = []
    for M in mats:
        MQ = np.empty((M.shape[0], Q.shape[1]))
        for s in range(0, M.shape[0], rows):
            MQ[s:s + rows] = np.asarray(M[s:s + rows], dtype=np.float64) @ Q
        out.append(MQ)
    return out


def design_in_subspace(A, B, V, spec, options=None, progress=None):
    """`design` restricted to x = V z (V orthonormalised), same report plus `subspace_rank`.

    `spec`, `options` and `progress` are those of :func:`bhtcli.commands.design.design`.
    """
    from bhtcli.commands.design import design
    A, B = load_pair(A, B, dtype=None)
    d = A.shape[1]
    Q = orthonormal_basis(V, d)
    AQ, BQ = project([A, B], Q)
    result = design(AQ, BQ, spec, *(() if options is None else (options,)), progress=progress)
    z = np.asarray(result.query, dtype=np.float64)
    note = result.note
    if not result.distinguishable:
        note = f"inside the subspace x = V z: {note}" if note else "inside the subspace x = V z"
    return replace(result, d=d, query=(Q @ z).tolist(), subspace_rank=int(Q.shape[1]), note=note)


def design_kway_in_subspace(models, V, spec, options, *, schedule: bool = False, progress=None):
    """The K-way design (commands/kway.py) restricted to x = V z: the K models projected to
    M_k Q, n x r, designed over the ball of radius E there, the query (and the schedule's
    queries) mapped back to x = Q z; `subspace_rank` as for a pair. Models that give the same
    laws for every query of the subspace are one InputError saying so."""
    from bhtcli.commands.kway import design_loaded, load_kway
    mats, names, readouts = load_kway(models, spec)
    d = mats[0].shape[1]
    Q = orthonormal_basis(V, d)
    try:
        result = design_loaded(project(mats, Q), names, readouts, spec.energy, options,
                                  dtype=spec.dtype, schedule=schedule, progress=progress)
    except InputError as e:
        raise InputError(f"inside the subspace x = V z: {e}") from None
    lift = lambda z: (Q @ np.asarray(z, dtype=np.float64)).tolist()
    sched = result.schedule
    if sched is not None:
        sched = {**sched, "queries": [lift(z) for z in sched["queries"]]}
    return replace(result, d=d, query=lift(result.query), subspace_rank=int(Q.shape[1]),
                   schedule=sched)
