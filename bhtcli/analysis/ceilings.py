"""The variance ceilings of the certificate (docs/maths.md §4.4): bounds V on the variance of
the log-likelihood ratio over every query in the ball."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bhtcli.analysis.diameter import DifferenceRows, f64_rows, sub_rows
from bhtcli.analysis.floors import FloorBudget, per_row_floors
from bhtcli.maths.certificate import EPS, rounding_gamma, h2_from_variance, trust_region_max, weight_cap
from bhtcli.models.readout import Readout
from bhtcli.models.threads import single_threaded


CEILING_ROWS = 8192


# The per-row ceiling's d x d Gram (2 n d^2 flops) and eigendecomposition are skipped when a
# cheap lower bound on their result (one or two O(n d) passes: analysis/floors.py) already
# exceeds the range ceiling, so that they could not bind (docs/maths.md §4.11, §4.16), for pairs with n d^2 at least this (below it
# they cost little and the per-row value is reported as well). math.inf: never skip.
PER_ROW_SKIP_MIN_WORK = float(1 << 30)


# Outward rounding of every variance ceiling (relative), on top of the margins that make each
# one a rigorous bound: it covers the few ulps by which a float64 evaluation of H^2 at a query
# can exceed the exact value, so that a design at the supremum prints below its ceiling
# (docs/maths.md §4.10; the report raises the ceiling to the design when even this is not enough).
CEILING_GUARD = 64 * EPS


@dataclass(frozen=True)
class Ceiling:
    """The smallest valid variance ceiling found and the H^2 ceiling of each candidate."""

    variance: float | None          # V (None: no valid ceiling)
    method: str | None              # the candidate that binds: "per_row" or "range"
    candidates: dict                # method -> H^2 ceiling 1 - exp(-V/8) (None: not applicable)
    note: str | None = None         # why a candidate does not apply


def variance_ceiling(A, B, energy: float, spread: float, readout: Readout | None = None,
                     stats: PairStats | None = None, rows: int = CEILING_ROWS) -> Ceiling:
    """The smallest of the variance ceilings that apply (see the module notes).

    Parameters
    ----------
    A, B : (n, d) arrays (any float dtype, memory maps welcome: streamed by row blocks)
    energy : float
        The budget E.
    spread : float
        L >= the range of delta over the ball (the range ceiling V = L^2 / 4; inf: none).
    readout : Readout, optional
        Links and biases. The per-row ceiling holds for exp and taylor links (poly: no).
    stats : PairStats, optional
        From :func:`pair_stats` (else one more pass computes it).
    """
    return variance_ceilings(A, B, [energy], [spread], readout, stats, rows)[0]


def variance_ceilings(A, B, energies, spreads, readout: Readout | None = None,
                      stats: PairStats | None = None, rows: int = CEILING_ROWS, *,
                      floors=None) -> list:
    """:func:`variance_ceiling` at each budget (with its spread), the per-row ceilings of all
    budgets in one streamed pass (:func:`per_row_variances`): the same Ceiling, bit for bit,
    as one call per budget. floors: as for :func:`per_row_variances`."""
    readout = Readout() if readout is None else readout
    ranges = [spread ** 2 / 4.0 if math.isfinite(spread) else None for spread in spreads]
    per_rows = per_row_variances(A, B, energies, readout, stats, rows, above=ranges, floors=floors)
    return [_ceiling(range_v, per_row, why) for range_v, (per_row, why) in zip(ranges, per_rows)]


def _ceiling(range_v: float | None, per_row: float | None, why: str | None) -> Ceiling:
    values = {} if range_v is None else {"range": range_v}
    note = None
    if per_row is not None:
        values["per_row"] = per_row
    else:
        note = why
    values = {m: v * (1 + CEILING_GUARD) for m, v in values.items()}
    cands = {m: h2_from_variance(values[m]) if m in values else None for m in ("per_row", "range")}
    if not values:
        return Ceiling(None, None, cands, note)
    method = min(values, key=values.get)
    return Ceiling(values[method], method, cands, note)


@dataclass(frozen=True)
class PairStats:
    """What one streamed pass over A and B gives (float64)."""

    abar: np.ndarray            # mean row of A
    bbar: np.ndarray            # mean row of B
    mean_abs: np.ndarray        # mean of |A| + |B| + |A - B| by column (rounding margins)
    norm_a: float               # max_i ||a_i||
    norm_b: float               # max_i ||b_i||
    eps_2inf: float             # max_i ||a_i - b_i||, the paper's eps
    gmean: np.ndarray | None = None   # mean row of A - B, as DifferenceRows.mean computes it


class RunningSum:
    """Column sums of consecutive sub-blocks, added row by row in the order in which
    ``block.sum(axis=0)`` over their concatenation adds them (so the bits are the same).
    A sub-block is written into ``rows(m)`` (row 0 of the buffer is kept for the sum so far),
    so adding it copies nothing. `buf` ((sub + 1) x d): a buffer that other sums use in turn
    (each writes and adds its sub-block before the next one writes)."""

    def __init__(self, d: int, sub: int, buf: np.ndarray | None = None):
        self.buf = np.empty((sub + 1, d)) if buf is None else buf
        self.acc = None

    def rows(self, m: int) -> np.ndarray:
        return self.buf[1:m + 1]

    def add(self, m: int) -> None:
        if self.acc is None:
            self.acc = self.buf[1:m + 1].sum(axis=0)
            return
        self.buf[0] = self.acc
        self.acc = self.buf[:m + 1].sum(axis=0)

    def pop(self) -> np.ndarray:
        acc, self.acc = self.acc, None
        return acc


def pair_stats(A, B, rows: int = CEILING_ROWS) -> PairStats:
    """Row means, largest row norms and ||A - B||_{2->inf} in one streamed pass (blocks of
    `rows` rows, each read in cache-sized sub-blocks; the values do not depend on the latter)."""
    n, d = A.shape
    sub = sub_rows(d, rows)
    sa, sb, sg, sabs = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d)
    na = nb = ng = 0.0
    tu = np.empty((sub, d))
    ra, rb, rg, rt = (RunningSum(d, sub) for _ in range(4))
    for s in range(0, n, rows):
        end = min(n, s + rows)
        for k in range(s, end, sub):
            m = min(end, k + sub) - k
            a, b, g, t = ra.rows(m), rb.rows(m), rg.rows(m), rt.rows(m)
            np.copyto(a, A[k:k + m], casting="unsafe")
            np.copyto(b, B[k:k + m], casting="unsafe")
            np.subtract(a, b, out=g)
            na = max(na, float(np.einsum("ij,ij->i", a, a).max()))
            nb = max(nb, float(np.einsum("ij,ij->i", b, b).max()))
            ng = max(ng, float(np.einsum("ij,ij->i", g, g).max()))
            ra.add(m)
            rb.add(m)
            rg.add(m)
            np.abs(a, out=t)                    # (|a| + |b|) + |g|, as before
            t += np.abs(b, out=tu[:m])
            t += np.abs(g, out=g)
            rt.add(m)
        sa += ra.pop()
        sb += rb.pop()
        sg += rg.pop()
        sabs += rt.pop()
    gmean = sg / n if rows == DifferenceRows.ROWS else None    # the same sums as its mean()
    return PairStats(sa / n, sb / n, sabs / n, math.sqrt(na), math.sqrt(nb), math.sqrt(ng), gmean)


def mean_rounding(stats: PairStats, n: int) -> float:
    """A bound on ||computed mean row - exact|| for the mean rows of `stats`: gamma_{n+2}
    ||mean of |A| + |B| + |A - B| || (any summation order; docs/maths.md §4.8)."""
    return 1.01 * rounding_gamma(n + 2) * float(np.linalg.norm(stats.mean_abs))


def _link_oscillation(link, radius: float) -> float:
    return 0.0 if link.is_exp else link.psi_oscillation(radius)


def per_row_variance(A, B, energy: float, readout: Readout | None = None, stats=None,
                     rows: int = CEILING_ROWS, *, above: float | None = None,
                     heavy_rows: int | None = None):
    """(V, None) with V >= sup_{x, t} Var_{pi_t}(delta) from per-row weight caps, or
    (None, reason) when the proof does not cover the links, or when `above` (a variance
    ceiling already known, e.g. the range one) is given, n d^2 >= PER_ROW_SKIP_MIN_WORK and a
    lower bound on V exceeds it: then V could not be the smaller one and is not computed.

    One streamed pass over A and B (plus :func:`pair_stats` when not given), a d x d
    accumulator and one d x d eigendecomposition; rounding can only increase the result
    (float64 throughout, margins from the standard error bounds: docs/maths.md). The skip
    test costs one streamed pass without the d x d work (the trace floor, docs/maths.md §4.11),
    and one more where the Rayleigh floor is tried (§4.16; analysis/floors.py).
    heavy_rows: how many rows may get their own direction-dependent bound (docs/maths.md §4.9;
    default HEAVY_ROWS, 0: none); the smallest of the variants is returned.
    """
    return per_row_variances(A, B, [energy], readout, stats, rows, above=[above],
                             heavy_rows=heavy_rows)[0]


def per_row_variances(A, B, energies, readout: Readout | None = None, stats=None,
                      rows: int = CEILING_ROWS, *, above=None, heavy_rows: int | None = None,
                      floors=None):
    """:func:`per_row_variance` at each budget of `energies` (with `above`, one value or None
    per budget), in one streamed pass for all of them: what does not depend on the budget
    (the rows in float64, their differences and norms) is computed once per block of rows,
    the caps and the d x d accumulator once per budget. Each budget's result is the same, bit
    for bit, as a call with that budget alone (the same blocks, the same operations).
    floors: a function called as :func:`bhtcli.analysis.floors.per_row_floors` is, which it
    replaces (e.g. one that hands over trace floors of a pass shared by K models)."""
    readout = Readout() if readout is None else readout
    la, lb = readout.link_a, readout.link_b
    if la.kind == "poly" or lb.kind == "poly":
        return [(None, "no per-row ceiling either (no weight cap holds for poly:K)")] * len(energies)
    n, d = A.shape
    stats = pair_stats(A, B, rows) if stats is None else stats
    abar, bbar = stats.abar, stats.bbar
    alpha = np.zeros(n) if readout.bias_a is None else np.asarray(readout.bias_a, dtype=np.float64)
    beta = np.zeros(n) if readout.bias_b is None else np.asarray(readout.bias_b, dtype=np.float64)
    at, bt = alpha - alpha.mean(), beta - beta.mean()        # centred biases
    e = at - bt                                              # centred bias difference
    log_n1 = math.log(n - 1) if n > 1 else -math.inf
    gam = rounding_gamma(n + 2)
    mean_err = mean_rounding(stats, n)
    heavy_rows = split_rows(readout, n, d, heavy_rows)
    above = [None] * len(energies) if above is None else list(above)
    results, budgets, tests = [None] * len(energies), [], []
    for k, energy in enumerate(energies):
        E = float(energy)
        osc_a = osc_b = 0.0
        if not readout.exp_links:
            # psi = phi - s oscillates by at most osc over the scores' range [-R, R]
            na, nb = stats.norm_a, stats.norm_b
            ra_, rb_ = E * na + float(np.max(np.abs(alpha))), E * nb + float(np.max(np.abs(beta)))
            osc_a, osc_b = _link_oscillation(la, ra_), _link_oscillation(lb, rb_)
            if not (math.isfinite(osc_a) and math.isfinite(osc_b)):
                results[k] = (None, "per-row ceiling: the links' oscillation is unbounded")
                continue
            # the log-weight spread stays below links.LOG_FLOOR, so no weight is floored
            from bhtcli.models.links import LOG_FLOOR
            if 2 * ra_ + osc_a > LOG_FLOOR or 2 * rb_ + osc_b > LOG_FLOOR:
                results[k] = (None, "per-row ceiling: log-weights span more than the link floor")
                continue
        if above[k] is not None and n * d * d >= PER_ROW_SKIP_MIN_WORK:
            tests.append((k, FloorBudget(E, osc_a, osc_b, above[k])))
        else:
            budgets.append((k, _BudgetSums(E, osc_a, osc_b, d, heavy_rows)))
    if tests:
        # the floors of all budgets tried in one pass (two where the Rayleigh floor is tried)
        (floors or per_row_floors)(A, B, [f for _, f in tests], stats, at, bt, e, mean_err, rows,
                                   heavy_rows)
    for k, floor in tests:
        low = floor.value
        if low > above[k]:
            results[k] = (None, f"per-row ceiling not computed: it is at least {h2_from_variance(low):.3g}, "
                                f"above the range ceiling {h2_from_variance(above[k]):.3g}, so it cannot "
                                "bind (docs/maths.md §4.11)")
        else:
            budgets.append((k, _BudgetSums(floor.E, floor.osc_a, floor.osc_b, d, heavy_rows)))
    budgets.sort(key=lambda kb: kb[0])
    if not budgets:
        return results
    h_err = 0.0            # max_i of a bound on ||computed h_i - exact h_i||
    gbar = abar - bbar
    # row blocks in buffers made once (fresh 8,192 x d temporaries cost their page faults at
    # every block), filled by cache-sized sub-blocks (the conversions and differences stay in
    # cache; only h, and the centred rows where the split keeps some, reach the block): the
    # same operations on the same values, row by row: the same bits
    width = min(rows, n)
    th, ths = np.empty((width, d)), np.empty((width, d))
    centred = (np.empty((width, d)), np.empty((width, d))) if heavy_rows > 0 else None
    sub = sub_rows(d, rows)
    tmp = [np.empty((min(sub, width), d)) for _ in range(4)]
    for s in range(0, n, rows):
        m = min(n, s + rows) - s
        h, ac, bc, na, nb, hh, gn = _centred_block(A, B, s, m, sub, abar, bbar, gbar, th, centred, tmp)
        block = (s, h[:m], ac, bc, na, nb, hh, e[s:s + rows], at[s:s + rows], bt[s:s + rows], ths[:m])
        for _, sums in budgets:
            sums.add(block, n, d, log_n1, mean_err)
        h_err = max(h_err, float(np.max(2 * EPS * (gn + np.sqrt(hh)))))
    h_err += 2 * mean_err
    e_err = 4 * EPS * (float(np.max(np.abs(alpha))) + float(np.max(np.abs(beta)))) * (1 + gam)
    bias_abs = float(np.max(np.abs(at))) + float(np.max(np.abs(bt)))
    for k, sums in budgets:
        results[k] = (sums.bound(n, d, gam, mean_err, bias_abs, h_err, e_err), None)
    return results


def _centred_block(A, B, s: int, m: int, sub: int, abar, bbar, gbar, th, centred, tmp):
    """Rows s .. s+m of the per-row pass: h_i = (a_i - b_i) - gbar into th, ||a_i - abar||,
    ||b_i - bbar||, ||h_i||^2 and ||a_i - b_i||, and (centred: two buffers) a_i - abar and
    b_i - bbar (else None), each row computed exactly as from the whole block."""
    na, nb, hh, gn = (np.empty(m) for _ in range(4))
    ta, tb, tg, tc = tmp
    for k in range(0, m, sub):
        q = min(m, k + sub) - k
        a, b = f64_rows(A, s + k, q, ta), f64_rows(B, s + k, q, tb)
        g = np.subtract(a, b, out=tg[:q])
        gn[k:k + q] = np.sqrt(np.einsum("ij,ij->i", g, g))
        h = np.subtract(g, gbar, out=th[k:k + q])
        hh[k:k + q] = np.einsum("ij,ij->i", h, h)
        ac = np.subtract(a, abar, out=tc[:q] if centred is None else centred[0][k:k + q])
        na[k:k + q] = np.sqrt(np.einsum("ij,ij->i", ac, ac))
        bc = np.subtract(b, bbar, out=tc[:q] if centred is None else centred[1][k:k + q])
        nb[k:k + q] = np.sqrt(np.einsum("ij,ij->i", bc, bc))
    if centred is None:
        return th[:m], None, None, na, nb, hh, gn
    return th[:m], centred[0][:m], centred[1][:m], na, nb, hh, gn


class _BudgetSums:
    """One budget's share of :func:`per_row_variances`: the caps of each block of rows, the
    cap-weighted sums (S, sv, sh, c0, se, w) and the heavy rows."""

    def __init__(self, E: float, osc_a: float, osc_b: float, d: int, heavy_rows: int):
        self.E, self.osc_a, self.osc_b = E, osc_a, osc_b
        self.S, self.sv, self.sh = np.zeros((d, d)), np.zeros(d), np.zeros(d)
        self.c0 = self.se = self.w = 0.0
        self.trace_abs = 0.0        # sum_i cap_i ||h_i||^2 (for the Gram rounding margin)
        self.heavy_rows = heavy_rows
        self.heavy = _HeavyRows(heavy_rows)

    def add(self, block, n: int, d: int, log_n1: float, mean_err: float) -> None:
        s, h, ac, bc, na, nb, hh, es, ats, bts, room = block
        E, osc_a, osc_b = self.E, self.osc_a, self.osc_b
        rho = np.maximum(E * na + ats + osc_a, E * nb + bts + osc_b)
        # rounding up: norms (relative (d + 4) eps), the means (mean_err), the biases
        rho = (rho * (1 + 8 * (d + 4) * EPS) + 2 * E * mean_err
               + 8 * EPS * (E * (na + nb) + np.abs(ats) + np.abs(bts) + 1.0))
        cap = weight_cap(rho, n, log_n1) * (1 + 8 * EPS)
        # the Gram as Hs^T Hs, Hs = diag(s) H with s_i^2 >= cap_i (a symmetric rank-k update,
        # half the multiply-adds of (W H)^T H): sum_i s_i^2 h_i h_i^T is above sum_i cap_i h_i
        # h_i^T in the PSD order, and so is every recentred or split form (docs/maths.md §4.8)
        hs = np.multiply(h, np.sqrt(cap * (1 + 8 * EPS))[:, None], out=room)
        self.S += hs.T @ hs
        self.sv += (cap * es) @ h
        self.sh += cap @ h
        self.c0 += float(cap @ (es * es))
        self.se += float(cap @ es)
        self.w += float(cap.sum())
        # s_i^2 <= cap_i (1 + 16 eps): the Gram's rounding margin scales with this trace
        self.trace_abs += float(cap @ hh) * (1 + 16 * EPS) + float(cap @ (es * es))
        self.heavy.offer(s, cap * hh, cap, h, ac, bc, na, nb, es, ats, bts)

    def bound(self, n: int, d: int, gam: float, mean_err: float, bias_abs: float, h_err: float,
              e_err: float) -> float:
        E = self.E
        sums = (self.S, self.sv, self.sh, self.c0, self.se, self.w)
        best = quad_bound(sums, E, d, gam, self.trace_abs)
        # the heavy-row split (docs/maths.md §4.9): the k rows of largest cap_i |h_i|^2 leave the
        # Gram and get their own direction-dependent bound; any k gives a valid V, the smallest is kept
        for k in sorted({1, self.heavy_rows}) if self.heavy_rows else ():
            rows_k = self.heavy.top(k)
            if 0 < len(rows_k) < n and len(rows_k) == k:
                best = min(best, _split_bound(sums, rows_k, E, n, d, gam, self.trace_abs, mean_err,
                                              bias_abs, h_err))
        # Minkowski: the inexact h and e add at most E h_err + e_err to the root-mean-square
        root = math.sqrt(max(best, 0.0)) + E * h_err + e_err + self.osc_a + self.osc_b
        return root * root * (1 + 4 * EPS)


HEAVY_ROWS = 4     # rows taken out of the per-row Gram for their own bound (docs/maths.md §4.9)
HEAVY_SPLIT_MAX_D = 512    # the split's variants (k = 1 and HEAVY_ROWS) only up to this d (an eigh each)


def split_rows(readout: Readout, n: int, d: int, heavy_rows: int | None = None) -> int:
    """How many heavy rows the per-row ceiling splits off (None: the default for n x d)."""
    if heavy_rows is None:      # each variant costs one more d x d eigendecomposition
        heavy_rows = HEAVY_ROWS if d <= HEAVY_SPLIT_MAX_D else 0
    return heavy_rows if readout.exp_links and n > 1 else 0


def quad_bound(sums, E: float, d: int, gam: float, trace_abs: float, m=None, mu0=None) -> float:
    """sup_{|x| <= E} sum_i cap_i ((h_i - m) x + e_i - mu0)^2 (plus its rounding margins) from
    the accumulated sums (S, sv, sh, c0, se, w) = sum_i cap_i (h h^T, e h, h, e^2, e, 1); m, mu0
    default to the cap-weighted means (docs/maths.md §4.7, §4.8)."""
    S, sv, sh, c0, se, w = sums
    # centre at the cap-weighted mean (m, mu0) = (sh, se) / w: sum_i cap_i ((h_i - m) x +
    # e_i - mu0)^2 is still >= Var_pi(delta), and never larger than about the uniform mean
    if m is None:
        m, mu0 = sh / w, se / w
    S = S - np.outer(m, sh) - np.outer(sh, m) + w * np.outer(m, m)
    sv = sv - mu0 * sh - se * m + w * mu0 * m
    c0 = max(c0 - 2 * mu0 * se + w * mu0 * mu0, 0.0)
    S = 0.5 * (S + S.T)
    with single_threaded():     # a threaded eigh waits on busy cores (models/threads.py)
        if np.any(sv):
            sigma, Q = np.linalg.eigh(S)
            st = Q.T @ sv
        else:
            # no linear term (no biases): the dual needs the eigenvalues alone, which cost a
            # third of the eigenvectors' work at d = 1,024 (the same backward error bound)
            sigma, st = np.linalg.eigvalsh(S), np.zeros(d)
    # exact S <= computed S + delta I: Gram rounding (gamma_{n+2} sum cap |h|^2, Frobenius <=
    # trace for the PSD |H|^T W |H|) and the eigensolver's backward error
    top = max(float(np.max(np.abs(sigma))), 0.0)
    delta = 3 * gam * trace_abs + 16 * (d + 1) * EPS * top
    quad = trust_region_max(sigma + delta, st, c0, E)
    return quad * (1 + 16 * (d + 1) * EPS) + 3 * gam * trace_abs + 16 * (d + 1) * EPS * (c0 + E * float(np.linalg.norm(sv)))


class _HeavyRows:
    """The k rows of largest score seen so far, with what their own bound needs."""

    def __init__(self, k: int):
        self.k = k
        self.rows = []          # (score, index, cap, h, ac, bc, |ac|, |bc|, e, at, bt)

    def offer(self, start, score, cap, h, ac, bc, na, nb, e, at, bt):
        if self.k == 0:
            return
        pick = np.argsort(-score)[:self.k]
        for j in pick:
            self.rows.append((float(score[j]), start + int(j), float(cap[j]), h[j].copy(), ac[j].copy(),
                              bc[j].copy(), float(na[j]), float(nb[j]), float(e[j]), float(at[j]), float(bt[j])))
        self.rows.sort(key=lambda r: (-r[0], r[1]))
        del self.rows[self.k:]

    def top(self, k: int):
        return self.rows[:k]


def _split_bound(sums, heavy, E: float, n: int, d: int, gam: float, trace_abs: float,
                 mean_err: float, bias_abs: float, h_err: float) -> float:
    """V_R + sum over the heavy rows of f_i* (docs/maths.md §4.9): the bulk's quadratic bound
    with the heavy rows' terms removed, centred at the bulk's cap-weighted means, plus for each
    heavy row sup_x kappa(g_i x + c_i) ((h_i - m) x + e_i - mu0)^2, a one-dimensional problem."""
    S, sv, sh, c0, se, w = sums
    S, sv, sh = S.copy(), sv.copy(), sh.copy()
    for r in heavy:
        cap, h, e = r[2], r[3], r[8]
        S -= cap * np.outer(h, h)
        sv -= cap * e * h
        sh -= cap * h
        c0 -= cap * e * e
        se -= cap * e
        w -= cap
    if not w > 0:
        return math.inf
    m, mu0 = sh / w, se / w
    # the subtractions: |error| <= 4 gamma_{k+4} (sum cap |h|^2 over all rows) entrywise
    extra = 4 * rounding_gamma(len(heavy) + 4) * trace_abs
    bulk = quad_bound((S, sv, sh, max(c0, 0.0), se, w), E, d, gam, trace_abs + extra, m, mu0)
    log_n1 = math.log(n - 1)
    total = bulk
    for _, _, _, h, ac, bc, na, nb, e, at_i, bt_i in heavy:
        total += heavy_row_bound(h, ac, bc, na, nb, e, at_i, bt_i, m, mu0, E, n, d, log_n1,
                                  mean_err, bias_abs, gam, h_err)
    return total


HEAVY_GRID = 1 << 14        # intervals of s in [-E, E] for a heavy row's one-dimensional bound


def heavy_row_bound(h, ac, bc, na, nb, e, at_i, bt_i, m, mu0, E, n, d, log_n1, mean_err,
                     bias_abs, gam, h_err) -> float:
    """An upper bound on sup_{|x| <= E, |t| <= 1/2} pi_{t,i}(x) ((h - m) x + e - mu0)^2 for one
    row (docs/maths.md §4.9): with g = (ac + bc) / 2, s = g x / |g| and u = h - m = p g/|g| + q w
    (w a unit vector orthogonal to g), it is at most
        max_{|s| <= E} kappa(|g| s + c) (|p s + e'| + q sqrt(E^2 - s^2))^2,
    c = |h| E / 2 + max(at, bt) plus rounding; bounded on a grid of intervals of s, each by
    its worst corner (kappa increasing, the rest monotone in |s| on each side)."""
    g = 0.5 * (ac + bc)
    G = float(np.linalg.norm(g))
    u = h - m
    un = float(np.linalg.norm(u))
    ep = e - mu0
    if G > 0:
        p = float(u @ g) / G
        q = math.sqrt(max(un * un - p * p, 0.0))
    else:
        p, q = 0.0, un
    # rounding: g against the exact midpoint row, |h| against the exact difference, the
    # biases, norms and the decomposition (p, q) of u (docs/maths.md §4.9)
    err_g = 4 * EPS * (na + nb) + 2 * mean_err + 8 * (d + 4) * EPS * G
    c = (0.5 * E * (float(np.linalg.norm(h)) + h_err) + max(at_i, bt_i) + E * err_g
         + 8 * EPS * (abs(at_i) + abs(bt_i) + 1.0) + 2 * gam * (bias_abs + 1.0))
    c += 16 * EPS * (abs(c) + E * G + log_n1 + 1.0)
    slack = E * (16 * (d + 4) * EPS * un + EPS * un) + 2 * EPS * abs(ep)
    s = np.linspace(-E, E, HEAVY_GRID + 1)
    s0, s1 = s[:-1], s[1:]
    kap = weight_cap(G * s1 + c, n, log_n1) * (1 + 8 * EPS)
    lin = np.maximum(np.abs(p * s0 + ep), np.abs(p * s1 + ep))
    s2min = np.where((s0 <= 0) & (s1 >= 0), 0.0, np.minimum(s0 * s0, s1 * s1))
    side = np.sqrt(np.maximum(E * E - s2min, 0.0))
    val = kap * (lin + q * side + slack) ** 2
    return float(np.max(val)) * (1 + 64 * EPS)


def abs_max(v) -> float:
    return 0.0 if v is None else float(np.max(np.abs(v)))
