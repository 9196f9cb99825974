"""The bilinear ceiling (docs/maths.md §4.14, §4.15): the per-row ceiling's caps replaced, for
every row but the heaviest, by Bennett's expansion of the tilt e^{g_i x}, whose quartic term
sum_i w_i (g_i x)^2 (u_i x)^2 is bounded by the top eigenvalue of an n x n matrix, certified by
one floating-point Cholesky factorisation. Opt-in (`bht bound --certificate exact`): it needs
the n x n matrix in memory (8 n^2 bytes) and about n^3/3 flops."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from bhtcli.analysis.ceilings import (CEILING_GUARD, Ceiling, PairStats, heavy_row_bound,
                                      mean_rounding, pair_stats, quad_bound)
from bhtcli.analysis.facts import PairFacts, join_notes
from bhtcli.maths.certificate import EPS, bennett_phi_upper, h2_from_variance, rounding_gamma, weight_cap
from bhtcli.maths.psd import top_eigenvalue_certified

BILINEAR_MAX_ROWS = 40_000      # the n x n matrix: 12.8 GB at this n (refused above)
BILINEAR_HEAVY_ROWS = 1         # rows that keep the direction-dependent bound of §4.9
GRAM_BLOCK = 512                # rows of the n x n matrix formed per step
ETA_FLOOR = 1e-6                # the smallest eta of the odd term's AM-GM split (§4.14 (iv))


@dataclass(frozen=True)
class BilinearCeiling:
    """V >= sup over ||x|| <= E and |t| <= 1/2 of Var_{pi_t}(delta), and its parts (Var units)."""

    variance: float
    uniform: float              # (1 + eta/2) sup_x sum_i (c_i/n) (u_i x)^2, the quadratic part
    quartic: float              # E^4 lambda / n, the certified quartic part
    heavy: float                # sum of the heavy rows' own bounds f_i*
    eta: float
    lanczos: float              # the Lanczos estimate of lambda (a lower estimate)
    certified: float            # the certified lambda >= the exact one
    attempts: int               # Cholesky factorisations run


def with_bilinear_ceiling(facts: PairFacts, A, B, energy: float, readout=None, log=None) -> PairFacts:
    """`facts` with the bilinear ceiling added to the candidates (`ceilings.bilinear`; it binds
    when it is the smallest), or with a note saying why it does not apply (exp links without
    biases, distinguishable pairs, n <= BILINEAR_MAX_ROWS)."""
    ceiling = facts.ceiling
    if ceiling is None or not facts.distinguishable:
        return facts
    plain = readout is None or (readout.exp_links and readout.bias_a is None and readout.bias_b is None)
    result, why = (bilinear_variance(A, B, energy, log=log) if plain else
                   (None, "the bilinear ceiling covers exp links without biases only"))
    cands = dict(ceiling.candidates)
    cands["bilinear"] = None
    if result is None:
        return replace(facts, ceiling=replace(ceiling, candidates=cands, note=join_notes(ceiling.note, why)))
    V = result.variance * (1 + CEILING_GUARD)
    cands["bilinear"] = h2_from_variance(V)
    note = ceiling.note
    if result.attempts == 0:
        note = join_notes(note, "the bilinear ceiling's quartic part is 0: K = 0, since every "
                                "centred midpoint row g_i = (a_i + b_i)/2 is 0 (B = -A) or has "
                                "h_i = m")
    if ceiling.variance is None or V < ceiling.variance:
        ceiling = Ceiling(V, "bilinear", cands, note)
    else:
        ceiling = replace(ceiling, candidates=cands, note=note)
    return replace(facts, ceiling=ceiling)


def bilinear_variance(A, B, energy: float, stats: PairStats | None = None, *,
                      heavy_rows: int = BILINEAR_HEAVY_ROWS, max_rows: int = BILINEAR_MAX_ROWS,
                      log=None):
    """(BilinearCeiling, None), or (None, reason) when it does not apply (exp links without
    biases only: the caller checks the readout) or the pair has more than `max_rows` rows.
    `log`: an optional callable for progress lines."""
    n, d = A.shape
    E = float(energy)
    if n > max_rows:
        return None, (f"the bilinear ceiling needs an n x n matrix ({8 * n * n / 1e9:.1f} GB); "
                      f"refused above {max_rows:,} rows")
    if n < heavy_rows + 2 or not E > 0:
        return None, "the bilinear ceiling needs at least two rows besides the heavy ones"
    say = log or (lambda _msg: None)
    stats = pair_stats(A, B) if stats is None else stats
    rows = _Rows(A, B, stats, E)
    heavy = rows.heaviest(heavy_rows)
    bulk = np.ones(n, bool)
    bulk[heavy] = False
    # the tilt's t-part and the rounding of g go into the row factor c_i (§4.14)
    c = np.exp(0.5 * E * (rows.hn * (1 + (d + 4) * EPS) + rows.h_err) + E * rows.g_err) * (1 + 8 * EPS)
    c[heavy] = 0.0
    m = (c @ rows.h) / float(c.sum())                 # any m is valid; the c-weighted mean
    radius = E * rows.gn * (1 + (d + 6) * EPS)        # g_i x <= R_i on the ball
    phi = bennett_phi_upper(radius)
    if not np.all(np.isfinite(phi[bulk])):
        return None, "the bilinear ceiling: the tilts e^{E |g_i|} overflow"
    uniform = _uniform_part(rows.h, c, m, E, n, d)
    u = rows.h - m
    # K = 0 exactly when every bulk row has g_i = 0 or u_i = 0 (B = -A: every g_i is 0): the
    # quartic part vanishes, any eta > 0 is valid, and the smallest one leaves the quadratic part
    zero = not np.any(np.any(rows.g[bulk] != 0, axis=1) & np.any(u[bulk] != 0, axis=1))
    eta = ETA_FLOOR if zero else _choose_eta(rows.g[bulk], u[bulk], c[bulk], uniform, E, n)
    w = c * (phi + 1.0 / (2.0 * eta)) * (1 + 8 * EPS)
    w[heavy] = 0.0
    say(f"bilinear ceiling: eta = {eta:.3g}, forming the {n - len(heavy):,} x {n - len(heavy):,} matrix")
    try:
        lam, lanczos, attempts = ((0.0, 0.0, 0) if zero else
                                  _certified_top(rows.g[bulk], u[bulk], w[bulk], say))
    except MemoryError:
        return None, f"the bilinear ceiling: no memory for its n x n matrix ({8 * n * n / 1e9:.1f} GB)"
    if lam is None:
        return None, "the bilinear ceiling: no Cholesky factorisation succeeded"
    quartic = E ** 4 * lam / n * (1 + 16 * EPS)
    heavy_part = sum(heavy_row_bound(rows.h[i], rows.ac[i], rows.bc[i], rows.na[i], rows.nb[i], 0.0,
                                     0.0, 0.0, m, 0.0, E, n, d, math.log(n - 1), rows.mean_err, 0.0,
                                     rounding_gamma(n + 2), rows.h_err) for i in heavy)
    inner = ((1 + eta / 2) * uniform + quartic + heavy_part) * (1 + 16 * EPS)
    root = math.sqrt(inner) + E * rows.h_err
    V = root * root * (1 + 16 * EPS)
    return BilinearCeiling(V, (1 + eta / 2) * uniform, quartic, heavy_part, eta, lanczos * E ** 4 / n,
                           lam * E ** 4 / n, attempts), None


class _Rows:
    """The centred rows in float64 and the bounds on their rounding (docs/maths.md §4.8, §4.9)."""

    def __init__(self, A, B, stats: PairStats, E: float):
        n, d = A.shape
        a = np.asarray(A, dtype=np.float64)
        b = np.asarray(B, dtype=np.float64)
        self.mean_err = mean_rounding(stats, n)
        self.ac, self.bc = a - stats.abar, b - stats.bbar
        diff = a - b
        self.h = diff - (stats.abar - stats.bbar)
        self.g = 0.5 * (self.ac + self.bc)
        self.na = np.sqrt(np.einsum("ij,ij->i", self.ac, self.ac))
        self.nb = np.sqrt(np.einsum("ij,ij->i", self.bc, self.bc))
        self.hn = np.sqrt(np.einsum("ij,ij->i", self.h, self.h))
        self.gn = np.sqrt(np.einsum("ij,ij->i", self.g, self.g))
        dn = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        self.h_err = float(np.max(2 * EPS * (dn + self.hn))) + 2 * self.mean_err
        # |computed g_i - exact g_i| (as for the heavy rows, §4.9)
        self.g_err = 4 * EPS * (self.na + self.nb) + 2 * self.mean_err + 8 * (d + 4) * EPS * self.gn
        rho = E * np.maximum(self.na, self.nb)
        self.score = weight_cap(rho, n, math.log(n - 1)) * self.hn ** 2

    def heaviest(self, k: int) -> np.ndarray:
        """The k rows of largest cap_i |h_i|^2 (the choice only affects tightness)."""
        return np.argsort(-self.score, kind="stable")[:k]


def _uniform_part(h, c, m, E: float, n: int, d: int) -> float:
    """sup_{|x| <= E} sum_i (c_i/n) ((h_i - m) x)^2 with its rounding margins (the per-row
    ceiling's quadratic bound with weights c_i/n in place of the caps; §4.7, §4.8)."""
    cap = c / n * (1 + 2 * EPS)
    hh = np.einsum("ij,ij->i", h, h)
    sums = ((h * cap[:, None]).T @ h, np.zeros(d), cap @ h, 0.0, 0.0, float(cap.sum()))
    return quad_bound(sums, E, d, rounding_gamma(n + 2), float(cap @ hh), m, 0.0)


def _choose_eta(g, u, c, uniform: float, E: float, n: int) -> float:
    """eta minimising (1 + eta/2) U + P / (2 eta) with P = E^4/n lambda_max of the quartic with
    weights c (a rough Lanczos estimate: any eta > 0 gives a valid ceiling)."""
    p = E ** 4 / n * operator_top_estimate(g, u, c, tol=1e-2)
    if not (p > 0 and uniform > 0):
        return 1.0
    return max(math.sqrt(p / uniform), ETA_FLOOR)


def operator_top_estimate(g, u, w, tol: float) -> float:
    """Estimate of the top eigenvalue of Z -> sum_i w_i <M_i, Z> M_i on symmetric d x d Z,
    M_i = sym(g_i u_i^T) (d^2 space, 4 n d^2 flops per product; no n x n matrix)."""
    from scipy.sparse.linalg import LinearOperator, eigsh
    d = g.shape[1]

    def apply(z):
        Z = z.reshape(d, d)
        Z = 0.5 * (Z + Z.T)
        coef = np.einsum("ij,ij->i", g @ Z, u) * w
        M = g.T @ (u * coef[:, None])
        return (0.5 * (M + M.T)).ravel()
    if d * d <= 64:
        dense = np.column_stack([apply(col) for col in np.eye(d * d)])
        return float(np.linalg.eigvalsh(0.5 * (dense + dense.T))[-1])
    op = LinearOperator((d * d, d * d), matvec=apply, dtype=np.float64)
    return float(eigsh(op, k=1, which="LA", tol=tol, ncv=20, v0=np.eye(d).ravel())[0][0])


def quartic_matrix(g, u, w, out: np.ndarray | None = None):
    """(T, error): the lower triangle (diagonal included) of T_ij = sqrt(w_i w_j) <M_i, M_j> =
    sqrt(w_i w_j) ((g_i g_j)(u_i u_j) + (g_i u_j)(u_i g_j)) / 2, formed by blocks of rows into
    `out` (n x n float64; the strict upper triangle is left as it was: the Cholesky reads the
    lower one, and :func:`lower_matvec` multiplies by the symmetric matrix), and a bound on the
    spectral norm of (computed T) - (exact T for these float rows and weights): the entrywise
    error is at most gamma_{4d+32} s_i s_j with s_i = sqrt(w_i) |g_i| |u_i|, a rank-one
    majorant whose norm is gamma |s|^2 (docs/maths.md §4.15)."""
    n, d = g.shape
    T = np.empty((n, n)) if out is None else out
    sw = np.sqrt(w)
    for s in range(0, n, GRAM_BLOCK):
        e = min(n, s + GRAM_BLOCK)
        blk = T[s:e, :e]
        np.matmul(g[s:e], g[:e].T, out=blk)
        blk *= u[s:e] @ u[:e].T
        cross = g[s:e] @ u[:e].T
        cross *= u[s:e] @ g[:e].T
        blk += cross
        blk *= 0.5 * sw[s:e, None]
        blk *= sw[None, :e]
    s2 = w * np.einsum("ij,ij->i", g, g) * np.einsum("ij,ij->i", u, u)
    error = rounding_gamma(4 * d + 32) * float(s2.sum()) * (1 + 2 * rounding_gamma(n))
    return T, error


def lower_matvec(T: np.ndarray, v: np.ndarray) -> np.ndarray:
    """T v for the symmetric matrix whose lower triangle (diagonal included) T holds."""
    n = T.shape[0]
    y = np.zeros(n)
    for s in range(0, n, GRAM_BLOCK):
        e = min(n, s + GRAM_BLOCK)
        blk = T[s:e, :e]
        diag = np.tril(blk[:, s:e])
        diag += np.tril(diag, -1).T
        y[s:e] += diag @ v[s:e] + blk[:, :s] @ v[:s]
        y[:s] += blk[:, :s].T @ v[s:e]
    return y


def _certified_top(g, u, w, say, tries=(1e-7, 1e-5, 1e-3, 1e-1)):
    """(certified upper bound on lambda_max(T), Lanczos estimate, factorisations run): T is formed,
    its top eigenvalue estimated by Lanczos (the residual added), then certified by a Cholesky
    factorisation of fl(s I - T) at s slightly above; T is formed again for each retry."""
    from scipy.sparse.linalg import LinearOperator, eigsh
    n = g.shape[0]
    T, error = quartic_matrix(g, u, w, out=np.empty((n, n)))
    if n <= 64:
        vals, vecs = np.linalg.eigh(T, UPLO="L")
        lam, v = float(vals[-1]), vecs[:, -1]
    else:
        from scipy.sparse.linalg import ArpackError
        op = LinearOperator((n, n), matvec=lambda z: lower_matvec(T, np.ravel(z)), dtype=np.float64)
        try:
            vals, vecs = eigsh(op, k=1, which="LA", tol=1e-10, ncv=32, v0=np.ones(n))
        except ArpackError:         # e.g. T 1 = 0: a start with no part in T's range
            vals, vecs = eigsh(op, k=1, which="LA", tol=1e-10, ncv=32,
                               v0=np.random.default_rng(0).standard_normal(n))
        lam, v = float(vals[0]), vecs[:, 0]
    resid = float(np.linalg.norm(lower_matvec(T, v) - lam * v)) / max(float(np.linalg.norm(v)), 1e-300)
    say(f"bilinear ceiling: Lanczos {lam:.6g} (residual {resid:.2g}); Cholesky of the shifted matrix")
    for k, rel in enumerate(tries, start=1):
        if k > 1:
            quartic_matrix(g, u, w, out=T)
        shift = lam + 2 * resid + rel * max(abs(lam), float(np.max(np.abs(T.diagonal()))), 1e-300)
        bound = top_eigenvalue_certified(T, shift, error)
        if bound is not None:
            return bound, lam, k
        say(f"bilinear ceiling: Cholesky failed at {shift:.6g}; trying higher")
    return None, lam, len(tries)

