"""Lower bounds on the per-row ceiling (docs/maths.md §4.11, §4.16): when one exceeds the range
ceiling, the per-row value could not bind and its d x d Gram is not computed.

Two floors, each for any number of budgets in one streamed pass over A and B:

- the *trace* floor (:func:`trace_floors`): the quadratic averaged over 2d points +-E q_k
  of an orthonormal basis, (E^2 / d) times the cap-weighted trace plus the bias part, O(n d);
- the *Rayleigh* floor (:func:`rayleigh_floors`): the quadratic averaged over the two points
  +-E u of one direction u, chosen in the span of the rows that carry the most cap-weighted
  mass (the trace floor's pass ranks them); it reaches the top of the spectrum where the
  trace floor sees its mean. One more pass, tried only where the trace floor comes close.

Every budget's numbers are the same, bit for bit, whichever other budgets share the pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bhtcli.analysis.diameter import f64_rows, sub_rows
from bhtcli.maths.certificate import EPS, rounding_gamma, weight_cap
from bhtcli.maths.subspaces import orthonormal_span
from bhtcli.models.threads import single_threaded

RAYLEIGH_ROWS = 16     # rows whose differences span the Rayleigh floor's directions
RAYLEIGH_TRY = 16      # tried when the trace floor is within this factor of the range ceiling


@dataclass
class FloorBudget:
    """One budget's share of the floor passes: its settings, then what the trace pass found."""

    E: float
    osc_a: float = 0.0
    osc_b: float = 0.0
    above: float | None = None      # the range ceiling the floors are compared with
    cap: np.ndarray | None = None   # the floor's caps c_i (below the full path's, §4.11)
    t1: float = 0.0                 # sum_i c_i ||h_i||^2
    v: np.ndarray | None = None     # sum_i c_i h_i
    w: float = 0.0                  # sum_i c_i
    c2: float = 0.0                 # sum_i c_i e_i^2
    c1: float = 0.0                 # sum_i c_i e_i
    top_caps: np.ndarray | None = None       # the heavy_rows largest caps (the split's allowance)
    h2max: float = 0.0
    e2max: float = 0.0
    mass: list = field(default_factory=list)   # (c_i ||h_i||^2, i) of the heaviest rows so far
    trace: float = 0.0              # the trace floor
    rayleigh: float | None = None   # the Rayleigh floor (None: not tried)

    @property
    def value(self) -> float:
        return self.trace if self.rayleigh is None else max(self.trace, self.rayleigh)


@dataclass
class FloorContext:
    """What both passes need that no budget changes."""

    n: int
    d: int
    abar: np.ndarray
    bbar: np.ndarray
    gbar: np.ndarray
    at: np.ndarray
    bt: np.ndarray
    e: np.ndarray
    mean_err: float
    sub: int
    heavy_rows: int
    hh: np.ndarray | None = None    # ||h_i||^2 of every row (the trace pass stores it)
    log_n1: float = 0.0             # log(n - 1) (the trace pass sets it and bias_err)
    bias_err: float = 0.0


def per_row_floors(A, B, budgets, stats, at, bt, e, mean_err: float, rows: int,
                   heavy_rows: int = 0) -> list:
    """The floor of each budget (FloorBudget list, `budgets`): the trace floor of all in one
    pass, then the Rayleigh floor, in one more pass, of those whose trace floor is at most the
    range ceiling (`above`) but within RAYLEIGH_TRY of it. Returns `budgets`, filled in."""
    sh = floor_context(A, stats, at, bt, e, mean_err, rows, heavy_rows)
    trace_floors(A, B, budgets, sh)
    return rayleigh_where_close(A, B, budgets, sh)


def rayleigh_where_close(A, B, budgets, sh: FloorContext) -> list:
    """After the trace pass: the Rayleigh floor (one more pass) of the budgets whose trace
    floor is at most the range ceiling but within RAYLEIGH_TRY of it. Returns `budgets`."""
    tried = [b for b in budgets if b.above is not None and b.trace <= b.above
             and RAYLEIGH_TRY * b.trace >= b.above] if sh.heavy_rows <= 0 else []
    if tried:
        rayleigh_floors(A, B, tried, sh)
    return budgets


def floor_context(A, stats, at, bt, e, mean_err, rows, heavy_rows=0) -> "FloorContext":
    """What the floor passes share: the mean rows, the centred biases, the sub-blocks."""
    n, d = A.shape
    abar, bbar = stats.abar, stats.bbar
    return FloorContext(n, d, abar, bbar, abar - bbar, at, bt, e, mean_err, sub_rows(d, rows),
                        max(heavy_rows, 0))


def trace_floors(A, B, budgets, sh: FloorContext) -> None:
    """The trace floor of every budget (docs/maths.md §4.11) in one O(n d) pass:
    (E^2 / d) min_m sum_i c_i ||h_i - m||^2 + min_mu sum_i c_i (e_i - mu)^2, with caps c_i
    below the exact kappa(rho_i) (rho deflated by more than its rounding), minus the rounding
    of these sums; with heavy_rows > 0 also below the heavy-row split's variants (§4.9)."""
    n, d, sub = sh.n, sh.d, sh.sub
    ta, tb, tc = (np.empty((sub, d)) for _ in range(3))
    start_trace(budgets, sh)
    for k in range(0, n, sub):
        m = min(n, k + sub) - k
        a, bb = f64_rows(A, k, m, ta), f64_rows(B, k, m, tb)
        na, nb = centred_row_norms(a, sh.abar, tc), centred_row_norms(bb, sh.bbar, tc)
        h = np.subtract(a, bb, out=tc[:m])
        h -= sh.gbar                            # as per_row_variance: the same h, bit for bit
        trace_rows(budgets, sh, k, na, nb, h)
    finish_trace(budgets, sh)


def centred_row_norms(a: np.ndarray, mean: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """||a_i - mean|| for the rows of a (buf: scratch of at least a's shape)."""
    c = np.subtract(a, mean, out=buf[:a.shape[0]])
    return np.sqrt(np.einsum("ij,ij->i", c, c))


def start_trace(budgets, sh: FloorContext) -> None:
    """Zero the trace pass's sums of every budget (before the first :func:`trace_rows`)."""
    n, d = sh.n, sh.d
    sh.log_n1 = math.log(n - 1) if n > 1 else -math.inf
    sh.bias_err = 2 * rounding_gamma(n + 2) * (_abs_max(sh.at) + _abs_max(sh.bt) + 1.0)
    for b in budgets:
        b.cap, b.v, b.top_caps = np.empty(n), np.zeros(d), np.zeros(sh.heavy_rows)
        b.t1 = b.c2 = b.c1 = b.w = b.h2max = b.e2max = 0.0
        b.mass = []
    sh.hh = np.empty(n)


def trace_rows(budgets, sh: FloorContext, k: int, na, nb, h, caps=None) -> None:
    """The trace pass at rows k .. k+m (one sub-block of sh.sub rows, in order): na, nb the
    norms ||a_i - abar||, ||b_i - bbar||, h the rows (a_i - b_i) - gbar; caps: each budget's
    :func:`floor_caps` of these rows when already computed."""
    m = h.shape[0]
    ak, bk = sh.at[k:k + m], sh.bt[k:k + m]
    es = sh.e[k:k + m]
    hh = np.einsum("ij,ij->i", h, h)
    sh.hh[k:k + m] = hh
    for index, b in enumerate(budgets):
        if caps is None:
            cap = floor_caps(b.E, na, nb, ak, bk, b.osc_a, b.osc_b, sh.mean_err, sh.bias_err,
                             sh.log_n1, sh.n, sh.d)
        else:
            cap = caps[index]
        b.cap[k:k + m] = cap
        b.t1 += float(cap @ hh)
        if sh.heavy_rows > 0:
            b.h2max = max(b.h2max, float(hh.max()))
            b.e2max = max(b.e2max, float(np.max(es * es)))
            b.top_caps = np.sort(np.concatenate([b.top_caps, np.sort(cap)[-sh.heavy_rows:]]))[-sh.heavy_rows:]
        b.v += cap @ h
        b.w += float(cap.sum())
        b.c2 += float(cap @ (es * es))
        b.c1 += float(cap @ es)
        _keep_heaviest(b, cap * hh, k, RAYLEIGH_ROWS)


def floor_caps(E: float, na, nb, ak, bk, osc_a: float, osc_b: float, mean_err, bias_err,
               log_n1: float, n: int, d: int) -> np.ndarray:
    """The trace floor's caps c_i at budget E, below the exact kappa(rho_i) (elementwise: rows
    of several pairs stacked, mean_err and bias_err a column each, give each pair's bits)."""
    rho = np.maximum(E * na + ak + osc_a, E * nb + bk + osc_b)
    # rounding down, by more than per_row_variance rounds up: the exact rho is above
    rho = (rho * (1 - 16 * (d + 4) * EPS) - 2 * E * mean_err - bias_err
           - 16 * EPS * (E * (na + nb) + np.abs(ak) + np.abs(bk) + np.abs(rho) + log_n1 + 1.0))
    return weight_cap(rho, n, log_n1) * (1 - 16 * EPS)


def finish_trace(budgets, sh: FloorContext) -> None:
    """Each budget's trace floor from the sums of the pass."""
    n, d = sh.n, sh.d
    gam = rounding_gamma(n + d + 8)
    for b in budgets:
        b.trace = 0.0
        if not b.w > 0:
            continue
        trace = b.t1 - float(b.v @ b.v) / b.w - 8 * gam * b.t1
        c0 = _c0(b, gam)
        if sh.heavy_rows > 0:
            # rows T out of the Gram: min_m sum_{i not in T} c_i |h_i - m|^2 >= (the same over
            # all rows) - sum_{i in T} c_i (2 max|h|)^2 (the bulk's mean lies in the hull of the
            # h_i); c_i <= the heavy_rows largest caps (computed caps are above the floor's
            # own, so their sum is inflated by 16 eps)
            trace -= _heavy_allowance(b)
        b.trace = (b.E * b.E * max(trace, 0.0) / d + max(c0, 0.0)) * (1 - 32 * EPS)


def _c0(b: FloorBudget, gam: float) -> float:
    """min_mu sum_i c_i (e_i - mu)^2, rounded down (with the split's allowance)."""
    c0 = b.c2 - b.c1 * b.c1 / b.w - 8 * gam * b.c2
    if len(b.top_caps):
        c0 -= float(b.top_caps.sum()) * (1 + 16 * EPS) * 4 * b.e2max * (1 + 16 * EPS)
    return c0


def _heavy_allowance(b: FloorBudget) -> float:
    """What the split's rows out of the Gram can contribute to sum_i c_i ((h_i - m) u)^2 for a
    unit u, at most (0 without the split)."""
    if not len(b.top_caps):
        return 0.0
    return float(b.top_caps.sum()) * (1 + 16 * EPS) * 4 * b.h2max * (1 + 16 * EPS)


def _keep_heaviest(b: FloorBudget, mass: np.ndarray, start: int, count: int) -> None:
    """Keep the `count` rows of largest c_i ||h_i||^2 (ties: the first row)."""
    if len(b.mass) >= count and float(mass.max()) <= b.mass[-1][0]:
        return                  # later rows, none heavier than the last kept: none enters
    k = min(count, mass.size)
    pick = np.argpartition(-mass, k - 1)[:k] if mass.size > k else np.arange(mass.size)
    b.mass += [(float(mass[j]), start + int(j)) for j in pick]
    b.mass.sort(key=lambda t: (-t[0], t[1]))
    del b.mass[count:]


def rayleigh_floors(A, B, budgets, sh: FloorContext) -> None:
    """The Rayleigh floor of each budget (docs/maths.md §4.16), after :func:`trace_floors`:
    U an orthonormal basis of the differences h_j of its heaviest rows, Y = H U in one
    streamed pass (the rows h_i computed as everywhere else, bit for bit), then the direction
    u = U v of the top eigenvector v of the cap-weighted covariance of Y, and
    E^2 var_c(H u) / ||u||^2 + c0, every rounding taken off."""
    n, d, sub = sh.n, sh.d, sh.sub
    ta, tb, tc = (np.empty((sub, d)) for _ in range(3))
    with single_threaded():     # small products: threads would wait on busy cores (threads.py)
        bases = [_basis(A, B, b, sh) for b in budgets]
        Ys = [np.empty((n, U.shape[1])) for U in bases]
        for k in range(0, n, sub):
            m = min(n, k + sub) - k
            a, bb = f64_rows(A, k, m, ta), f64_rows(B, k, m, tb)
            h = np.subtract(a, bb, out=tc[:m])
            h -= sh.gbar                        # the trace pass's h, bit for bit
            for U, Y in zip(bases, Ys):
                if U.shape[1]:
                    Y[k:k + m] = h @ U
        for b, U, Y in zip(budgets, bases, Ys):
            b.rayleigh = _rayleigh_value(b, U, Y, sh) if U.shape[1] else 0.0


def _basis(A, B, b: FloorBudget, sh: FloorContext) -> np.ndarray:
    """Orthonormal columns spanning the heaviest rows' h_j (any basis gives a valid floor)."""
    rows = sorted(j for _, j in b.mass)
    if not rows:
        return np.zeros((sh.d, 0))
    # row by row (slices: any matrix the streamed passes read), as the passes compute h_j
    H = np.vstack([np.asarray(A[j:j + 1], dtype=np.float64) - np.asarray(B[j:j + 1], dtype=np.float64)
                   for j in rows]) - sh.gbar
    return orthonormal_span(H.T, rtol=1e-6)


def _rayleigh_value(b: FloorBudget, U: np.ndarray, Y: np.ndarray, sh: FloorContext) -> float:
    n, d = sh.n, sh.d
    k = U.shape[1]
    c = b.cap
    W = float(c.sum())
    if not W > 0:
        return 0.0
    v = _direction(c, W, Y)
    z = Y @ v
    gam = rounding_gamma(n + k + 8)
    t = float(c @ (z * z))
    mean = float(c @ z)
    var = t - mean * mean / W - 8 * gam * t          # the computed z's weighted variance, down
    # |z_i - (H u)_i| for the exact product with u = U v: the products h_i . u_j and z = Y v
    # (docs/maths.md §4.16); their weighted root-mean-square comes off by Minkowski
    ucol = float(np.max(np.linalg.norm(U, axis=0))) * (1 + 2 * (d + 2) * EPS)
    v1 = float(np.sum(np.abs(v))) * (1 + 2 * (k + 2) * EPS)
    ynorm = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    err = 2 * rounding_gamma(d + k + 2) * v1 * (ucol * np.sqrt(sh.hh) + ynorm)
    off = math.sqrt(float(c @ (err * err)) * (1 + 2 * gam)) * 1.01
    root = math.sqrt(max(var, 0.0)) - off
    if not root > 0:
        return 0.0
    quad = root * root * (1 - 8 * EPS)
    # ||u|| from above: the computed U v, its rounding and that of the norm
    un = float(np.linalg.norm(U @ v)) * (1 + 2 * (d + 2) * EPS) \
        + rounding_gamma(k + 2) * float(np.linalg.norm(U)) * float(np.linalg.norm(v)) * 1.01
    quad = max(quad, 0.0) / (un * un) * (1 - 8 * EPS)
    c0 = _c0(b, rounding_gamma(n + d + 8))
    return (b.E * b.E * quad + max(c0, 0.0)) * (1 - 32 * EPS)


def _direction(c: np.ndarray, W: float, Y: np.ndarray) -> np.ndarray:
    """v: the top eigenvector of the c-weighted covariance of the rows of Y. Any v gives a
    valid floor; this one makes it largest over the span of U."""
    s = c @ Y
    M = (Y * c[:, None]).T @ Y - np.outer(s, s) / W
    return np.linalg.eigh(0.5 * (M + M.T))[1][:, -1]


def _abs_max(v) -> float:
    return 0.0 if v is None else float(np.max(np.abs(v)))
