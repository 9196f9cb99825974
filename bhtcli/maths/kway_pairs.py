"""Every pair's Bhattacharyya distance and gradient weights among K softmax models, from each
model's exponentials once (docs/maths.md §8.11).

The scores at k queries are r = M_1 x and delta_k = (M_k - M_1) x (delta_1 = 0). The pair
(i, j) has midpoint logits c = r + (delta_i + delta_j)/2 and difference delta = delta_i -
delta_j; :func:`bhtcli.maths.divergences.bhattacharyya_weights` evaluates it with three
transcendental functions per entry (exp(c - m), exp(dbar/2), expm1(dbar/2)), so P = K(K-1)/2
pairs cost 3P per entry. Here, with per-column shifts m_0 = max r and s_k = max delta_k / 2,

    e_0 = exp(r - m_0),   F_k = exp(delta_k/2 - s_k),   G_k = 1/F_k   (F_1 = G_1 = 1),
    exp(c - m_0 - s_i - s_j) = e_0 F_i F_j,   exp(-dbar/2) = F_j G_i exp(h - s_i + s_j),

(h = E_pi[delta]/2), products of positive numbers (a few roundings, no cancellation), and only
u = expm1(dbar/2), which carries the cancellation-free difference, is taken per pair: K + P
transcendental functions per entry instead of 3P (10 against 18 at K = 4; G_k is one division,
F_k lies in [e^-10, 1]), and the divisions by 1 + u = exp(dbar/2) become multiplications by
exp(-dbar/2). The sums are those of bhattacharyya_weights, over row blocks that stay in cache,
every pair's in turn while the block's e_0 and F_k are loaded. Each block's sums are kept apart
and added in block order, so a caller's `run_blocks` may share the blocks out over threads and
get the same numbers, bit for bit, as in turn (measured: no faster here, docs/maths.md §8.12).

Columns qualify when every delta_k (k >= 2) spans at most FUSED_SPREAD/2 and r is finite: then
every pair's delta spans at most FUSED_SPREAD (bhattacharyya_weights' own condition), the
shift of a pair overshoots its true maximum by at most FUSED_SPREAD/2 (no weight underflows
that did not before beyond e^-20), and exp(+-dbar/2) lies in [e^-20, e^20]. When a column does
not qualify :func:`fused_pairs` returns None and the caller takes the per-pair form.
"""
from __future__ import annotations

import numpy as np

from bhtcli.maths.divergences import BLOCK_ENTRIES, FUSED_SPREAD

NEGLIGIBLE_MU = 1e-30    # combine leaves out a pair whose multipliers are below this times the largest


class FusedPairs:
    """D of every pair at every column (`D`, P x k) and, for any per-pair multipliers mu
    (P x k), the stacked gradient weights of sum_p mu_p D_p (:meth:`combine`)."""

    def __init__(self, r, deltas, pairs, m0, hi, rows: int, keep_u: bool, run_blocks=None):
        # r and deltas[q] are k x n (one row per column of the caller's n x k scores: the
        # per-column constants broadcast along contiguous rows, see columns_first)
        self.r, self.deltas, self.pairs, self.rows = r, deltas, pairs, rows
        self.m0, self.run_blocks = m0, run_blocks or in_turn
        k, n = r.shape
        K = len(deltas)
        self.shift = [np.zeros(k)] + [0.5 * hi[q] for q in range(1, K)]
        self.e0 = np.empty((k, n))
        self.F = [None] + [np.empty((k, n)) for _ in range(1, K)]
        self.G = [None] + [np.empty((k, n)) for _ in range(1, K)]      # 1 / F_k
        P = len(pairs)
        self.U = [np.empty((k, n)) for _ in range(P)] if keep_u else None
        self.starts = list(range(0, n, rows))
        # each row block's sums in its own slot, added in block order below: the same
        # numbers, bit for bit, however the blocks are shared out (models/threads.py)
        first = np.zeros((len(self.starts), 2, P, k))
        self._blocks(self._first_pass, first)
        S, M1 = _in_block_order(first[:, 0]), _in_block_order(first[:, 1])
        self.S = S
        self.half_mean = 0.5 * (M1 / S)
        self.inverse_scale = np.empty((P, k))
        for p, (i, j) in enumerate(pairs):
            self.inverse_scale[p] = np.exp(self.half_mean[p] - self.shift[i] + self.shift[j])
        second = np.zeros((len(self.starts), 3, P, k))
        self._blocks(self._second_pass, second)
        Yp, T = _in_block_order(second[:, 0]), _in_block_order(second[:, 2])
        Ym = _in_block_order(second[:, 1], negate=True)
        Yp /= S
        Ym /= S
        T /= S
        self.D = 0.5 * np.log1p(T + Yp * Ym)
        self.kappa = 0.5 * (np.log1p(Yp) - np.log1p(Ym))

    def _blocks(self, work, *args):
        """work(b, s, e, buffers, *args) for every row block b (rows s:e), the blocks handed
        out in ranges by self.run_blocks (each range with its own buffers)."""
        k, n = self.r.shape
        rows = min(self.rows, n)

        def blocks(lo, hi):
            buffers = [np.empty((k, rows)) for _ in range(4)]
            for b in range(lo, hi):
                work(b, self.starts[b], min(self.starts[b] + self.rows, n), buffers, *args)
        self.run_blocks(blocks, len(self.starts))

    def _first_pass(self, b, s, e, buffers, sums):
        """e_0, F_k, G_k on the block's rows; its sums of e_0 F_i F_j and of that times delta."""
        t, dl = buffers[0], buffers[1]
        np.subtract(self.r[:, s:e], self.m0[:, None], out=self.e0[:, s:e])
        np.exp(self.e0[:, s:e], out=self.e0[:, s:e])
        for q in range(1, len(self.deltas)):
            Fq = self.F[q][:, s:e]
            np.multiply(self.deltas[q][:, s:e], 0.5, out=Fq)
            Fq -= self.shift[q][:, None]
            np.exp(Fq, out=Fq)
            np.divide(1.0, Fq, out=self.G[q][:, s:e])      # G = 1/F: a division, not an exp
        o = np.ones(e - s)
        for p, (i, j) in enumerate(self.pairs):
            tb, db = self._weight(s, e, i, j, t), self._difference(s, e, i, j, dl)
            sums[b, 0, p] = tb @ o
            db *= tb
            sums[b, 1, p] = db @ o

    def _second_pass(self, b, s, e, buffers, sums):
        """u = expm1(dbar/2) of every pair on the block's rows (kept for the weights) and the
        block's sums of e u, e u/(1+u) and e u^2/(1+u)."""
        t, u_buf, v, dl = buffers
        o = np.ones(e - s)
        for p, (i, j) in enumerate(self.pairs):
            tb = self._weight(s, e, i, j, t)
            u = self.U[p][:, s:e] if self.U is not None else u_buf[:, :e - s]
            self._difference(s, e, i, j, u)
            u *= 0.5
            u -= self.half_mean[p][:, None]     # dbar/2
            np.expm1(u, out=u)                  # u = expm1(dbar/2)
            vb = self._inverse_ratio(s, e, p, i, j, v)  # exp(-dbar/2) = 1/(1 + u)
            db = dl[:, :e - s]
            np.multiply(tb, u, out=db)          # e u
            sums[b, 0, p] = db @ o
            db *= vb                            # e u/(1+u)
            sums[b, 1, p] = db @ o
            db *= u                             # e u^2/(1+u) >= 0
            sums[b, 2, p] = db @ o

    def _weight(self, s, e, i, j, out):
        """e_0 F_i F_j on rows s:e (exp(c - shift) of the pair)."""
        return geometric_weight(self.e0, self.F, i, j, slice(s, e), out)

    def _difference(self, s, e, i, j, out):
        """delta_i - delta_j on rows s:e (float64)."""
        db = out[:, :e - s]
        if i == 0:
            np.negative(self.deltas[j][:, s:e], out=db)
        else:
            np.subtract(self.deltas[i][:, s:e], self.deltas[j][:, s:e], out=db)
        return db

    def _inverse_ratio(self, s, e, p, i, j, out, scale=None):
        """exp(-dbar/2) = F_j G_i exp(h - s_i + s_j) on rows s:e (G = 1/F), times `scale`
        (per column) when given: multiplications only."""
        vb = out[:, :e - s]
        c = self.inverse_scale[p] if scale is None else self.inverse_scale[p] * scale
        np.multiply(self.F[j][:, s:e], c[:, None], out=vb)
        if i > 0:
            vb *= self.G[i][:, s:e]
        return vb

    def combine(self, mu: np.ndarray):
        """(w_r, w_delta) of sum_p mu_p D_p: grad = M_1^T w_r + sum_k Delta_k^T w_delta[k]
        (the layout of KModels.combine; n x k and (K-1) n x k, transposes of contiguous k x n
        arrays). A pair whose mu is below NEGLIGIBLE_MU times the largest of its column at
        every column is left out (its terms are below the sum's rounding; mu = 0 exactly, an
        underflowed soft-minimum weight, changes no bit)."""
        k, n = self.r.shape
        K = len(self.deltas)
        w_r = np.zeros((k, n))
        w_delta = np.zeros((k, (K - 1) * n))
        largest = np.max(np.abs(mu), axis=0)
        used = [p for p in range(len(self.pairs))
                if (np.abs(mu[p]) > NEGLIGIBLE_MU * largest).any()]
        terms = [(p, self._multipliers(p, mu[p])) for p in used]

        def blocks(lo, hi):
            rows = min(self.rows, n)
            buffers = [np.empty((k, rows)) for _ in range(4)]
            for b in range(lo, hi):
                s = self.starts[b]
                e = min(s + self.rows, n)
                for p, multipliers in terms:
                    i, j = self.pairs[p]
                    wc, wg = self._weights(s, e, p, multipliers, buffers)
                    w_r[:, s:e] += wc
                    wc *= 0.5
                    if i > 0:
                        w_delta[:, (i - 1) * n + s:(i - 1) * n + e] += wc
                        w_delta[:, (i - 1) * n + s:(i - 1) * n + e] += wg
                    w_delta[:, (j - 1) * n + s:(j - 1) * n + e] += wc
                    w_delta[:, (j - 1) * n + s:(j - 1) * n + e] -= wg
        self.run_blocks(blocks, len(self.starts))
        return w_r.T, w_delta.T

    def pair_weights(self, p: int):
        """(w_c, w_g) of pair p alone (docs/maths.md §2.4), n x k each, for tests."""
        k, n = self.r.shape
        w_c, w_g = np.zeros((k, n)), np.zeros((k, n))
        multipliers = self._multipliers(p, np.ones(k))
        buffers = [np.empty((k, min(self.rows, n))) for _ in range(4)]
        for s in self.starts:
            e = min(s + self.rows, n)
            w_c[:, s:e], w_g[:, s:e] = self._weights(s, e, p, multipliers, buffers)
        return w_c.T, w_g.T

    def _multipliers(self, p: int, mu: np.ndarray):
        """Pair p's per-column constants of :meth:`_weights` for the multipliers mu (k x 1
        each, to broadcast along the rows)."""
        D, S = self.D[p], self.S[p]
        E1, F1 = np.exp(-self.kappa[p]), np.expm1(-self.kappa[p])
        eD = np.exp(-D)
        return tuple(c[:, None] for c in
                     (E1, F1, mu * 0.5 * eD / S, mu * np.expm1(-D) / S, mu * 0.25 * eD / S))

    def _weights(self, s, e, p: int, multipliers, buffers):
        """Pair p's weights times mu on rows s:e, (mu w_c, mu w_g) in two of `buffers`:
        with kappa = (g(1/2) - g(-1/2))/2, a = expm1(dbar/2 - kappa) = u e^-kappa +
        expm1(-kappa) and 1 + a = exp(dbar/2) e^-kappa,
        w_c = pi (e^-D a^2/(2(1+a)) + expm1(-D)), w_g = pi e^-D a (a+2) / (4(1+a))."""
        i, j = self.pairs[p]
        E1, F1, al, be, ga = multipliers
        t, a, q, wc = buffers
        tb = self._weight(s, e, i, j, t)
        ab = a[:, :e - s]
        np.multiply(self.U[p][:, s:e], E1, out=ab)
        ab += F1                                # a
        qb = self._inverse_ratio(s, e, p, i, j, q, 1.0 / E1[:, 0])   # 1/(1 + a)
        qb *= ab                                # a/(1+a)
        wcb = wc[:, :e - s]
        np.multiply(ab, qb, out=wcb)            # a^2/(1+a)
        wcb *= al
        wcb += be
        wcb *= tb                               # mu w_c
        ab += 2.0
        ab *= qb
        ab *= ga
        ab *= tb                                # mu w_g
        return wcb, ab


def geometric_weight(e0, F, a: int, b: int, at: slice, out):
    """e_0 F_a F_b on the rows `at` (k x rows arrays; F[0] is None: F_1 = 1), in the first
    columns of `out`: up to a per-column constant, the weights of the geometric mean of models
    a and b (model a itself when a = b)."""
    tb = out[:, :at.stop - at.start]
    factors = [F[m][:, at] for m in (a, b) if m > 0]
    if not factors:
        tb[...] = e0[:, at]
        return tb
    np.multiply(e0[:, at], factors[0], out=tb)
    for f in factors[1:]:
        tb *= f
    return tb


def in_turn(work, count: int) -> None:
    """The default block runner: work(0, count), here."""
    work(0, count)


def _in_block_order(partials: np.ndarray, negate: bool = False) -> np.ndarray:
    """The blocks' partial sums (blocks first) added one after another from zero, in block
    order: the running sum of the one-pass loop, bit for bit."""
    total = np.zeros(partials.shape[1:])
    for part in partials:
        if negate:
            total -= part
        else:
            total += part
    return total


def columns_first(x: np.ndarray, dtype=np.float64) -> np.ndarray:
    """An n x k array of scores as k x n (`dtype`; None: its own) with contiguous rows: the transpose, copied
    only when its rows are not contiguous already (the subspace's products hand over n x k
    transposes of k x n arrays). Per-column constants then broadcast along rows of n numbers;
    over an n x k array with k >= 2 numpy's inner loop would run along k (measured: the fused
    pairs at k = 2 cost 2.5x those at k = 1, docs/maths.md §8.12)."""
    t = np.asarray(x, dtype=dtype).T
    return t if t.shape[1] <= 1 or t.strides[1] == t.itemsize else np.ascontiguousarray(t)


def fused_pairs(r: np.ndarray, deltas: list, pairs, keep_u: bool = True,
                block: int = BLOCK_ENTRIES, run_blocks=None):
    """A :class:`FusedPairs` for the scores r (n x k) and deltas (deltas[0] None, the others
    n x k in any float precision), or None when some column does not qualify (module
    docstring). keep_u: keep what :meth:`FusedPairs.combine` needs (the weights)."""
    found = qualified_rows(r, deltas, block)
    if found is None:
        return None
    r, deltas, m0, hi, rows = found
    return FusedPairs(r, deltas, pairs, m0, hi, rows, keep_u, run_blocks)


def qualified_rows(r: np.ndarray, deltas: list, block: int, delta_dtype=np.float64):
    """(r, deltas, max r, [None, max delta_2, ...], rows per block) with r and the deltas as
    k x n rows (columns_first; the deltas in `delta_dtype`, None: as given) and blocks of
    about `block` entries, or None when some column does not qualify for the fused form
    (:func:`qualifying_maxima`): what the fused pairs and the coefficient form start from."""
    r = columns_first(r)
    deltas = [None] + [columns_first(dk, delta_dtype) for dk in deltas[1:]]
    maxima = qualifying_maxima(r, deltas)
    if maxima is None:
        return None
    return (r, deltas, *maxima, max(16, block // max(r.shape[0], 1)))


def qualifying_maxima(r: np.ndarray, deltas: list):
    """(max r, [None, max delta_2, ...]) per column (r and deltas k x n) when every column
    qualifies for the fused form (module docstring: r finite, each delta_k spanning at most
    FUSED_SPREAD / 2), else None."""
    m0 = r.max(axis=1)
    if not np.isfinite(m0).all():
        return None
    tops = [None]
    for dk in deltas[1:]:
        top = dk.max(axis=1)
        with np.errstate(invalid="ignore"):
            if not (top - dk.min(axis=1) <= FUSED_SPREAD / 2).all():
                return None
        tops.append(top)
    return m0, tops
