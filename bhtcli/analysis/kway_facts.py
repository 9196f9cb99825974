"""The certificate facts of every pair of K models (docs/maths.md §4.17): the same PairFacts,
bit for bit, as :func:`bhtcli.analysis.facts.analyse_pair` on each pair, from two streamed
passes over the K models together instead of three over each pair's two. Each model's rows
are converted to float64 once per sub-block and its own statistics (sums, row norms, |a|,
norms about its mean) computed once; each pair's differences, their sums and norms and its
trace floor come from those cached rows by the operations the pair's own passes use."""
from __future__ import annotations

import math
from dataclasses import fields, replace
from itertools import combinations

import numpy as np

from bhtcli.analysis import ceilings
from bhtcli.analysis.ceilings import CEILING_ROWS, PairStats, RunningSum, mean_rounding, split_rows
from bhtcli.analysis.diameter import (DifferenceRows, f64_rows, far_from, farthest_steps,
                                      screens, sub_rows)
from bhtcli.analysis.facts import analyse_budgets, pair_base
from bhtcli.analysis.floors import (FloorBudget, centred_row_norms, finish_trace, floor_caps,
                                    floor_context, per_row_floors, rayleigh_where_close,
                                    start_trace, trace_rows)
from bhtcli.maths.certificate import EPS
from bhtcli.models.readout import Readout


def analyse_pairs(mats, energy: float) -> list:
    """analyse_pair(mats[i], mats[j], DifferenceRows(mats[i], mats[j]), energy) for every pair
    i < j (itertools.combinations order), the same PairFacts bit for bit (plain softmax
    models: no biases). A pair of the same model gets distinguishable False and its reason."""
    return list(iter_pair_facts(mats, energy))


def iter_pair_facts(mats, energy: float):
    """:func:`analyse_pairs` one pair at a time: the shared passes run before the first pair
    is given, what is left per pair (the same-model rule, the diameter's pruned search, the
    ceiling's decision) when it is asked for, so that a caller that stops at the first pair
    of the same model raises what a loop of analyse_pair would have raised."""
    pairs = list(combinations(range(len(mats)), 2))
    n, d = mats[0].shape
    traced = n * d * d >= ceilings.PER_ROW_SKIP_MIN_WORK     # per_row_variances tests its floor
    stats, norms, floors = shared_passes(mats, pairs, energy if traced else None)
    farthest = shared_farthest(mats, pairs, norms)
    for p, (i, j) in enumerate(pairs):
        A, B = mats[i], mats[j]
        G = DifferenceRows(A, B)
        base = pair_base(A, B, G, stats=stats[p], norms=norms[p], farthest=farthest[p])
        yield analyse_budgets(A, B, G, [energy], base=base, floors=floors[p])[0]


def shared_passes(mats, pairs, energy: float | None):
    """(stats, norms, floors) for every pair (i, j) of `pairs`: pair_stats(mats[i], mats[j]),
    the row diameter's centred norms of DifferenceRows(mats[i], mats[j]) about its mean (what
    diameter._centred_norms gives) and, when `energy` is given, a hand-over of the trace
    floor at that budget for per_row_variances (floors.trace_floors' numbers); None each
    otherwise. The same bits as the pair's own passes, from two streamed passes over the K
    models: the sums in the first, the rest in the second."""
    sums = _first_pass(mats, pairs, CEILING_ROWS)
    return _second_pass(mats, pairs, sums, energy, CEILING_ROWS)


def _first_pass(mats, pairs, rows: int) -> list:
    """pair_stats(mats[i], mats[j], rows) for every pair, the largest row norms still to come
    (nan): the column sums of each model's rows, of each pair's differences and of
    (|a| + |b|) + |a - b|, added as pair_stats adds them (blocks of `rows` rows)."""
    K, (n, d) = len(mats), mats[0].shape
    sub = _shared_sub(d, rows, K)
    sums = [np.zeros(d) for _ in range(K)]
    run = [RunningSum(d, sub) for _ in range(K)]
    absolute = [np.empty((sub, d)) for _ in range(K)]
    diff_sums, abs_sums = [np.zeros(d) for _ in pairs], [np.zeros(d) for _ in pairs]
    shared_g, shared_t = np.empty((sub + 1, d)), np.empty((sub + 1, d))     # used pair by pair
    run_g = [RunningSum(d, sub, shared_g) for _ in pairs]
    run_t = [RunningSum(d, sub, shared_t) for _ in pairs]
    for s in range(0, n, rows):
        end = min(n, s + rows)
        for k in range(s, end, sub):
            m = min(end, k + sub) - k
            for i, M in enumerate(mats):
                a = run[i].rows(m)
                np.copyto(a, M[k:k + m], casting="unsafe")
                run[i].add(m)
                np.abs(a, out=absolute[i][:m])
            for p, (i, j) in enumerate(pairs):
                g = np.subtract(run[i].rows(m), run[j].rows(m), out=run_g[p].rows(m))
                run_g[p].add(m)
                t = np.add(absolute[i][:m], absolute[j][:m], out=run_t[p].rows(m))   # (|a| + |b|)
                t += np.abs(g, out=g)                                                # + |g|
                run_t[p].add(m)
        for i in range(K):
            sums[i] += run[i].pop()
        for p in range(len(pairs)):
            diff_sums[p] += run_g[p].pop()
            abs_sums[p] += run_t[p].pop()
    means = [total / n for total in sums]
    nan = math.nan
    return [PairStats(means[i], means[j], abs_sums[p] / n, nan, nan, nan,
                      diff_sums[p] / n if rows == DifferenceRows.ROWS else None)
            for p, (i, j) in enumerate(pairs)]


def _shared_sub(d: int, rows: int, K: int) -> int:
    """Rows per sub-block of the first pass: the K models' rows in about 2 MB (measured best
    at 50,000 x 1,024, K = 4: 64 rows). The sums do not depend on it (RunningSum); d <= 16:
    no sub-blocks, as sub_rows."""
    return rows if d <= 16 else max(16, min(rows, (1 << 18) // (K * d)))


def _second_pass(mats, pairs, stats, energy: float | None, rows: int):
    """The largest row norms (screened: :class:`_LargestRow`), the diameter's centred norms
    and the trace floors of every pair; returns (stats with the norms, norms, floors)."""
    K, (n, d) = len(mats), mats[0].shape
    sub = sub_rows(d, rows)                     # the trace floor's sums follow its sub-blocks
    heavy_rows = split_rows(Readout(), n, d)
    zero = np.zeros(n)                          # no biases: centred bias rows of zeros
    contexts, budgets = [], []
    for st in stats:
        if energy is None:
            break
        sh = floor_context(mats[0], st, zero, zero, zero, mean_rounding(st, n), rows, heavy_rows)
        budget = [FloorBudget(float(energy), 0.0, 0.0, None)]
        start_trace(budget, sh)
        contexts.append(sh)
        budgets.append(budget)
    if contexts:                # the caps of all pairs at once: stacked, each pair's bits
        first, second = (np.array(side) for side in zip(*pairs))
        mean_err = np.array([[sh.mean_err] for sh in contexts])
        bias_err = np.array([[sh.bias_err] for sh in contexts])
        log_n1 = contexts[0].log_n1
    means = [None] * K
    for p, (i, j) in enumerate(pairs):          # each model's mean, from any pair holding it
        means[i], means[j] = stats[p].abar, stats[p].bbar
    own_norm = [_LargestRow(mean) for mean in means]
    diff_norm = [_LargestRow(st.gmean) for st in stats]
    sq = [np.empty(n) for _ in pairs]
    own = [np.empty((sub, d)) for _ in range(K)]
    tg, tc = np.empty((sub, d)), np.empty((sub, d))
    for k in range(0, n, sub):
        m = min(n, k + sub) - k
        rows64 = [f64_rows(M, k, m, buf) for M, buf in zip(mats, own)]
        centred = [centred_row_norms(a, mean, tc) for a, mean in zip(rows64, means)]
        for a, r, largest in zip(rows64, centred, own_norm):
            largest.add(a, r)
        if contexts:
            stacked = np.array(centred)
            caps = floor_caps(float(energy), stacked[first], stacked[second], zero[k:k + m],
                              zero[k:k + m], 0.0, 0.0, mean_err, bias_err, log_n1, n, d)
        for p, (i, j) in enumerate(pairs):
            g = np.subtract(rows64[i], rows64[j], out=tg[:m])
            c = np.subtract(g, stats[p].gmean, out=tc[:m])
            sq[p][k:k + m] = np.einsum("ij,ij->i", c, c)
            diff_norm[p].add(g, np.sqrt(sq[p][k:k + m]))
            if contexts:
                h = np.subtract(g, contexts[p].gbar, out=tc[:m])
                trace_rows(budgets[p], contexts[p], k, centred[i], centred[j], h, caps[p:p + 1])
    for budget, sh in zip(budgets, contexts):
        finish_trace(budget, sh)
    stats = [replace(st, norm_a=own_norm[i].value(), norm_b=own_norm[j].value(),
                     eps_2inf=diff_norm[p].value()) for p, ((i, j), st) in enumerate(zip(pairs, stats))]
    # max_i ||g_i||, the diameter's rounding scale: eps_2inf (the same largest row sum)
    norms = [(sq[p], stats[p].eps_2inf) for p in range(len(pairs))]
    hand = [_TracedFloors(b[0], sh) for b, sh in zip(budgets, contexts)] or [None] * len(pairs)
    return stats, norms, hand


def shared_farthest(mats, pairs, norms, rows: int = CEILING_ROWS) -> list:
    """diameter.farthest_point for every pair (its bound, the same bits; None where the pair's
    diameter takes no pruned search: fewer than 3 rows), the pairs' steps in lockstep: each
    step's float32 screen (float32 models) is one pass over the models for all pairs still
    stepping (:class:`_Screens`); the rest of each step is the pair's own far_from."""
    (n, d), sub = mats[0].shape, sub_rows(mats[0].shape[1], rows)
    if n < 3:
        return [None] * len(pairs)
    diffs = [DifferenceRows(mats[i], mats[j]) for i, j in pairs]
    steps = [farthest_steps(np.sqrt(sq)) for sq, _ in norms]
    out = [None] * len(pairs)
    live = {p: next(step) for p, step in enumerate(steps)}    # pair -> the row to measure from
    screen = _Screens(mats, pairs, sub)
    while live:
        dist = screen.distances({p: i for p, i in live.items() if screens(diffs[p])}, diffs)
        for p, i in list(live.items()):
            try:
                live[p] = steps[p].send(far_from(diffs[p], i, norms[p][1], sub, dist.get(p)))
            except StopIteration as done:
                out[p] = done.value
                del live[p]
    return out


class _Screens:
    """far_from's float32 screen for several pairs in one pass over the models, in the
    expanded form ||x_j||^2 - 2 x_j . g_i + ||g_i||^2 with x_j = fl32(a_j - b_j): a subtraction
    and a matrix-vector product per pair and step, the ||x_j||^2 kept from the first step.
    Within the direct form's rounding bound (docs/maths.md §4.17), so the float64 check finds
    the same farthest row."""

    def __init__(self, mats, pairs, sub: int):
        self.mats, self.pairs, self.sub = mats, pairs, sub
        self.squares = {}                       # pair -> ||x_j||^2 (float32), from step one

    def distances(self, live: dict, diffs) -> dict:
        """pair -> the screen's distances from row live[pair] (float32 pairs only)."""
        if not live:
            return {}
        mats, sub = self.mats, self.sub
        n, d = mats[0].shape
        gis = {p: np.asarray(diffs[p][i:i + 1], dtype=np.float64)[0].astype(np.float32)
               for p, i in live.items()}
        dots = {p: np.empty(n, dtype=np.float32) for p in live}
        fresh = [p for p in live if p not in self.squares]
        self.squares.update({p: np.empty(n, dtype=np.float32) for p in fresh})
        buf = np.empty((sub, d), dtype=np.float32)
        for k in range(0, n, sub):
            m = min(n, k + sub) - k
            for p in live:
                i, j = self.pairs[p]
                x = np.subtract(mats[i][k:k + m], mats[j][k:k + m], out=buf[:m])
                if p in fresh:
                    self.squares[p][k:k + m] = np.einsum("ij,ij->i", x, x)
                dots[p][k:k + m] = x @ gis[p]
        out = {}
        for p in live:
            gi = gis[p].astype(np.float64)
            out[p] = self.squares[p].astype(np.float64) - 2.0 * dots[p].astype(np.float64) + gi @ gi
        return out


class _LargestRow:
    """sqrt(max_i fl(x_i . x_i)) over the rows of a matrix given in sub-blocks (pair_stats'
    largest row norm, the same bits), with x_i . x_i computed only for the rows that can reach
    the largest: with r_i the computed ||x_i - centre||, ||x_i|| lies within ||centre|| of it,
    so a row whose upper bound is below another's lower bound is skipped (docs/maths.md §4.17;
    every rounding inside the factor RHO). Rows skipped early stay below the largest, as the
    lower bound only grows."""

    def __init__(self, centre: np.ndarray):
        d = centre.shape[0]
        self.rho = 1.0 + 8 * (d + 4) * EPS
        self.shift = float(np.linalg.norm(centre)) * self.rho      # >= ||centre||
        self.low = 0.0          # <= the largest x_i . x_i computed or to come
        self.best = 0.0

    def add(self, x: np.ndarray, r: np.ndarray) -> None:
        """x: rows (float64), r: the computed ||x_i - centre|| of each."""
        up = r * self.rho + self.shift
        up = up * up * self.rho
        lo = np.maximum(r / self.rho - self.shift, 0.0)
        self.low = max(self.low, float((lo * lo).max()) / self.rho)
        keep = up >= self.low
        count = int(np.count_nonzero(keep))
        if count:
            rows = x if count == keep.size else x[keep]
            self.best = max(self.best, float(np.einsum("ij,ij->i", rows, rows).max()))

    def value(self) -> float:
        return math.sqrt(self.best)


class _TracedFloors:
    """per_row_floors for one pair whose trace floor at one budget the shared pass computed:
    a call for that budget alone (the same settings) takes it over and adds the Rayleigh floor
    where due; any other call computes everything as per_row_floors does."""

    def __init__(self, budget: FloorBudget, sh):
        self.budget, self.sh = budget, sh

    def __call__(self, A, B, budgets, stats, at, bt, e, mean_err, rows, heavy_rows=0):
        done, sh = self.budget, self.sh
        if not (len(budgets) == 1 and budgets[0].E == done.E and budgets[0].osc_a == done.osc_a
                and budgets[0].osc_b == done.osc_b and mean_err == sh.mean_err
                and max(heavy_rows, 0) == sh.heavy_rows and not np.any(at) and not np.any(bt)
                and not np.any(e)):
            return per_row_floors(A, B, budgets, stats, at, bt, e, mean_err, rows, heavy_rows)
        for f in fields(FloorBudget):
            if f.name not in ("E", "osc_a", "osc_b", "above"):
                setattr(budgets[0], f.name, getattr(done, f.name))
        return rayleigh_where_close(A, B, budgets, sh)
