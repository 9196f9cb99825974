"""`shift`: gradient steps of softmax regression move A to B = A + dA; how many queries see it?
(docs/maths.md §11)

Softmax regression (Li et al. 2023, arXiv 2304.13276: in-context learning acts like such a
weight shift) fits A to data (q_j, y_j), j = 1..m, by the loss

    L(A) = (1 / 2m) sum_j ||p_j - y_j||^2,   p_j = softmax(A q_j).

With r_j = p_j - y_j, the chain rule through the softmax Jacobian diag(p) - p p^T gives

    dL/dz_j = p_j * (r_j - <p_j, r_j>),   dL/dA = (1/m) sum_j (dL/dz_j) q_j^T.

Every dL/dz_j sums to zero, so every gradient (and dA) has rows summing to zero: it is already
row-centred, and ||dA||_{2->inf} carries no softmax-invisible common shift 1 w^T.
Queries are processed in blocks so that only a block of the m x n probability matrix exists.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_matrix, open_npz
from bhtcli.io.write import OUT_SUFFIXES, check_output_path, save_array
from bhtcli.results import ShiftResult
from bhtcli.io.validation import check_error, check_matrix, check_positive, check_seed

BLOCK_ENTRIES = 1 << 21     # entries of one block of probabilities (16 MB in float64)


# ---------------------------------------------------------------- the loss and its gradient
def softmax_regression_loss_and_grad(A, Q, Y, *, with_grad: bool = True):
    """L(A) = (1/2m) sum_j ||softmax(A q_j) - y_j||^2 and its gradient (n x d).

    Parameters
    ----------
    A : ndarray, shape (n, d)
    Q : ndarray, shape (m, d)
        One query per row.
    Y : ndarray, shape (m, n)
        One target distribution per row.
    with_grad : bool
        False skips the gradient (returns None in its place).

    Returns
    -------
    (float, ndarray or None)
    """
    A = np.asarray(A, dtype=np.float64)
    m, n = Y.shape
    block = max(1, BLOCK_ENTRIES // max(n, 1))
    total = 0.0
    grad = np.zeros(A.shape) if with_grad else None
    for s in range(0, m, block):
        q = np.asarray(Q[s:s + block], dtype=np.float64)
        Z = q @ A.T                                   # (b, n) logits
        Z -= Z.max(axis=1, keepdims=True)             # stable softmax: exp of values <= 0
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        R = P - Y[s:s + block]
        total += float(np.einsum("ij,ij->", R, R))
        if with_grad:
            R -= np.einsum("ij,ij->i", P, R)[:, None]   # r - <p, r>
            R *= P                                      # dL/dz (times m)
            grad += R.T @ q
    if with_grad:
        grad /= m
    return total / (2.0 * m), grad


def softmax_regression_grad(A, Q, Y) -> np.ndarray:
    """Gradient of the softmax-regression loss (see the module docstring), shape (n, d)."""
    return softmax_regression_loss_and_grad(A, Q, Y)[1]


def softmax_regression_loss(A, Q, Y) -> float:
    """The softmax-regression loss L(A) alone."""
    return softmax_regression_loss_and_grad(A, Q, Y, with_grad=False)[0]


# ---------------------------------------------------------------- the data set
def load_data(data, n: int, d: int, name: str | None = None):
    """Load and check the data set (Q, Y) for a model with n rows and d columns.

    Parameters
    ----------
    data : str, os.PathLike, mapping or (Q, Y) pair
        A ``.npz`` archive (never unpickled) or a mapping holding ``Q`` (m x d queries) and
        ``Y``: m x n target distributions (rows >= 0 summing to 1), or m integer class labels
        in 0..n-1 (one-hot targets).
    n, d : int
        The model's shape.

    Returns
    -------
    (Q, Y) : float64 arrays of shapes (m, d) and (m, n)

    Raises
    ------
    InputError
        Missing arrays, wrong shapes, or targets that are not distributions; the message names
        the first bad row.
    """
    if isinstance(data, (str, os.PathLike)):
        label = name or os.fspath(data)
        Q, Y = _read_npz(os.fspath(data), label)
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        label = name or "data"
        Q, Y = data
    else:
        label = name or "data"
        missing = [k for k in ("Q", "Y") if k not in data]
        if missing:
            raise InputError(f"{label} has no {' or '.join(missing)}; it needs Q (m x d queries) "
                             "and Y (m x n target distributions)")
        Q, Y = data["Q"], data["Y"]
    Q = check_matrix(Q, f"{label}: Q")
    if Q.shape[1] != d:
        raise InputError(f"{label}: Q has {Q.shape[1]} columns but A has d = {d}; "
                         "each row of Q is one query x (a vector of d numbers)")
    Y = _targets(Y, Q.shape[0], n, label)
    return Q, Y


def _read_npz(path: str, label: str):
    if not os.path.exists(path):
        raise InputError(f"{parameter_name('data')} {path}: no such file; check the path")
    if os.path.isdir(path) or not path.lower().endswith(".npz"):
        raise InputError(f"{parameter_name('data')} {path}: expected a .npz archive holding Q (m x d queries) and Y "
                         "(m x n targets); write it with numpy.savez('D.npz', Q=Q, Y=Y)")
    with open_npz(path, label) as archive:
        keys = list(archive.files)
        missing = [k for k in ("Q", "Y") if k not in keys]
        if missing:
            raise InputError(f"{label} has no array {' or '.join(missing)}; it holds: "
                             f"{', '.join(keys) or 'none'}; write it with numpy.savez('D.npz', Q=Q, Y=Y)")
        return archive["Q"], archive["Y"]


def _targets(Y, m: int, n: int, label: str) -> np.ndarray:
    """Y as an m x n matrix of distributions (integer labels become one-hot rows)."""
    Y = np.asarray(Y)
    if Y.ndim == 1 and Y.dtype.kind in "iu":
        if Y.shape[0] != m:
            raise InputError(f"{label}: Y has {Y.shape[0]} labels but Q has {m} rows; one target per query")
        bad = np.flatnonzero((Y < 0) | (Y >= n))
        if bad.size:
            j = int(bad[0])
            raise InputError(f"{label}: Y label {int(Y[j])} in row {j} is outside 0..{n - 1} (A has n = {n} rows)")
        onehot = np.zeros((m, n))
        onehot[np.arange(m), Y] = 1.0
        return onehot
    tol = max(1e-6, 4.0 * n * float(np.finfo(Y.dtype).eps)) if Y.dtype.kind == "f" else 1e-6
    Y = check_matrix(Y, f"{label}: Y")
    if Y.shape[0] != m:
        raise InputError(f"{label}: Y has {Y.shape[0]} rows but Q has {m}; one target per query")
    if Y.shape[1] != n:
        raise InputError(f"{label}: Y has {Y.shape[1]} columns but A has n = {n} rows; "
                         "each row of Y is a distribution over the n answers")
    neg = np.flatnonzero((Y < 0).any(axis=1))
    if neg.size:
        j = int(neg[0])
        k = int(np.argmin(Y[j]))
        raise InputError(f"{label}: Y row {j} has a negative entry ({Y[j, k]:.6g} in column {k}); "
                         "every row must be a probability distribution")
    sums = Y.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if off.size:
        j = int(off[0])
        raise InputError(f"{label}: Y row {j} sums to {sums[j]:.10g}, not 1 (tolerance {tol:.1g}); "
                         "normalise the rows: Y / Y.sum(axis=1, keepdims=True)")
    return Y


def check_lr(lr) -> float:
    """The learning rate: finite and > 0."""
    return check_positive(lr, f"{parameter_name('lr')}")


def check_steps(steps) -> int:
    """The number of gradient steps: a whole number >= 1."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise InputError(f"{parameter_name('steps')} must be a whole number >= 1, got {steps!r}")
    return int(steps)


# ---------------------------------------------------------------- the command
def shift(A, data, lr: float, steps: int = 1, *, out: str | None = None, energy: float | None = None,
          error: float = 0.05, seed: int = 0, progress=None, force: bool = False) -> ShiftResult:
    """K full-batch gradient steps of softmax regression from A: B = A - lr grad L, K times.

    Parameters
    ----------
    A : array_like or path
        The n x d starting model (paths are read with :func:`bhtcli.load_matrix`).
    data : path, mapping or (Q, Y)
        The data set, see :func:`load_data`.
    lr : float
        Learning rate eta > 0.
    steps : int
        Number of full-batch gradient steps K >= 1.
    out : str, optional
        Write B here (atomically, only after everything else succeeded), in the format of the
        extension: .npy, .csv, .txt or .json. An input (A or the data set) is refused.
    energy : float, optional
        If given, also report how many queries with ||x|| <= energy detect the update:
        ``design(A, B, energy)`` and the small-perturbation estimate of docs/maths.md §10.2
        (:func:`bhtcli.analysis.perturbation.small_perturbation_estimate`).
    error : float
        Target error alpha of those counts.
    seed : int
        Seed of the random starts of both searches.
    progress : callable, optional
        Called with short status strings.
    force : bool
        Allow `out` to be one of the inputs.

    Returns
    -------
    ShiftResult
        With ``updated`` = B.

    Raises
    ------
    InputError
        Invalid model, data set or options.
    """
    lr, steps = check_lr(lr), check_steps(steps)
    if energy is not None:
        from bhtcli.io.validation import check_energy
        energy, error, seed = check_energy(energy), check_error(error), check_seed(seed)
    if out is not None:
        check_output_path(out, inputs=(A, data), force=force, suffixes=OUT_SUFFIXES)
    t0 = time.perf_counter()
    A = np.array(load_matrix(A, None if isinstance(A, (str, os.PathLike)) else "A"), dtype=np.float64)
    n, d = A.shape
    Q, Y = load_data(data, n, d)
    if progress:
        progress(f"{steps} gradient step{'s' if steps > 1 else ''} on {Q.shape[0]} data points")
    B = A.copy()
    history = []
    grad_norm = None
    with np.errstate(over="ignore", invalid="ignore"):   # overflow is checked and reported below
        for _ in range(steps):
            loss, grad = softmax_regression_loss_and_grad(B, Q, Y)
            history.append(loss)
            if grad_norm is None:
                grad_norm = float(np.linalg.norm(grad))
            B -= lr * grad
            if not np.isfinite(B).all():
                _overflow(lr, len(history))
        history.append(softmax_regression_loss(B, Q, Y))
        delta = B - A
        frobenius = float(np.linalg.norm(delta))
        norm_2inf = float(np.sqrt(np.einsum("ij,ij->i", delta, delta).max()))
    if not (math.isfinite(frobenius) and math.isfinite(history[-1])):
        _overflow(lr, steps)
    detection = None
    if energy is not None:
        detection = detect_update(A, B, energy, error, seed, progress)
    if out is not None:
        save_array(out, B)
    warnings = []
    if history[-1] > history[0]:
        warnings.append(f"the loss rose from {history[0]:.6g} to {history[-1]:.6g}: the learning rate "
                        f"{lr:g} overshoots; the update is not a descent (try a smaller {parameter_name('lr')})")
    return ShiftResult(n, d, Q.shape[0], lr, steps, history[0], history[-1], history, grad_norm,
                       frobenius, norm_2inf, out, detection, time.perf_counter() - t0, warnings, B,
                       energy=energy, target_error=error if energy is not None else None)


def _overflow(lr: float, steps: int):
    # Only absurd learning rates get here: every gradient entry is bounded by max ||q||.
    raise InputError(f"{parameter_name('lr')} {lr:g}: the update left the float64 range within {steps} step(s); "
                     "use a smaller learning rate")


def detect_update(A, B, energy: float, error: float = 0.05, seed: int = 0, progress=None) -> dict:
    """Queries needed to tell B from A: the designed query next to the small-perturbation estimate.

    ``estimate_over_design`` is (nu/8) / D with D the designed query's Bhattacharyya distance:
    1 for small updates, and how far the second-order estimate is off for large ones.
    """
    from bhtcli.commands.design import design
    from bhtcli.models.spec import DesignOptions, ModelSpec
    from bhtcli.analysis.perturbation import small_perturbation_estimate
    if progress:
        progress("designing the query that best detects the update")
    r = design(A, B, ModelSpec.build(energy=energy), DesignOptions.build(error, seed=seed))
    if progress:
        progress("small-perturbation estimate (nu = sup Var)")
    if r.distinguishable:
        est = small_perturbation_estimate(A, B, energy, error=error, seed=seed, query=np.asarray(r.query))
    else:   # B = A + 1 w^T: every variance is rounding noise; report the exact answer, 0
        est = {"nu": 0.0, "query_norm": 0.0, "bhattacharyya_distance_estimate": 0.0, "hellinger_squared_estimate": 0.0,
               "samples": {"lower": None, "upper": None, "predicted": None},
               "paper_order": None, "local_maxima": 0, "starts": 0}
    D = r.bhattacharyya_distance
    return {"distinguishable": r.distinguishable,
            "hellinger_squared": r.hellinger_squared, "bhattacharyya_distance": r.bhattacharyya_distance,
            "query_norm": r.query_norm, "samples": r.samples,
            "small_perturbation": est,
            # D ~ nu/8 is the second-order statement (H^2 = 1 - e^-D saturates; D does not)
            "estimate_over_design": est["bhattacharyya_distance_estimate"] / D if r.distinguishable and D > 0 else None}
