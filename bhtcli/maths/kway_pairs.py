"""Every pair's Bhattacharyya distance and gradient weights among K softmax models, from each
model's exponentials once (docs/maths.md §8.11).

The scores at k queries are r = M_1 x and delta_k = (M_k - M_1) x (delta_1 = 0). The pair
(i, j) has midpoint logits c = r + (delta_i + delta_j)/2 and difference delta = delta_i -
delta_j; :func:`bhtcli.maths.divergences.bhattacharyya_weights` evaluates it with three
transcendental functions per entry (exp(c - m), exp(dbar/2), expm1(dbar/2)), so P = K(K-1)/2
pairs cost 3P per entry. Here, with per-column shifts m_0 = max r and s_k = max delta_k / 2,

    e_0 = exp(r - m_0),   F_k = exp(delta_k/2 - s_k),   G_k = exp(s_k - delta_k/2)   (F_1 = G_1 = 1),
    exp(c - m_0 - s_i - s_j) = e_0 F_i F_j,   exp(-dbar/2) = F_j G_i exp(h - s_i + s_j),

(h = E_pi[delta]/2), products of positive numbers (a few roundings, no cancellation), and only
u = expm1(dbar/2), which carries the cancellation-free difference, is taken per pair: 2K - 1 + P
transcendental functions per entry instead of 3P (13 against 18 at K = 4), and the divisions by
1 + u = exp(dbar/2) become multiplications by exp(-dbar/2). The sums are those
of bhattacharyya_weights, over row blocks that stay in cache, every pair's in turn while the
block's e_0 and F_k are loaded.

Columns qualify when every delta_k (k >= 2) spans at most FUSED_SPREAD/2 and r is finite: then
every pair's delta spans at most FUSED_SPREAD (bhattacharyya_weights' own condition), the
shift of a pair overshoots its true maximum by at most FUSED_SPREAD/2 (no weight underflows
that did not before beyond e^-20), and exp(+-dbar/2) lies in [e^-20, e^20]. When a column does
not qualify :func:`fused_pairs` returns None and the caller takes the per-pair form.
"""
from __future__ import annotations

import numpy as np

from bhtcli.maths.divergences import BLOCK_ENTRIES, FUSED_SPREAD, column_max


class FusedPairs:
    """D of every pair at every column (`D`, P x k) and, for any per-pair multipliers mu
    (P x k), the stacked gradient weights of sum_p mu_p D_p (:meth:`combine`)."""

    def __init__(self, r, deltas, pairs, m0, hi, rows: int, keep_u: bool):
        self.r, self.deltas, self.pairs, self.rows = r, deltas, pairs, rows
        n, k = r.shape
        K = len(deltas)
        self.shift = [np.zeros(k)] + [0.5 * hi[q] for q in range(1, K)]
        self.e0 = np.empty((n, k))
        self.F = [None] + [np.empty((n, k)) for _ in range(1, K)]
        self.G = [None] + [np.empty((n, k)) for _ in range(1, K)]      # 1 / F_k
        P = len(pairs)
        self.U = [np.empty((n, k)) for _ in range(P)] if keep_u else None
        S, M1 = np.zeros((P, k)), np.zeros((P, k))
        t, dl = np.empty((min(rows, n), k)), np.empty((min(rows, n), k))
        for s in range(0, n, rows):
            e = min(s + rows, n)
            np.subtract(r[s:e], m0, out=self.e0[s:e])
            np.exp(self.e0[s:e], out=self.e0[s:e])
            for q in range(1, K):
                Fq = self.F[q][s:e]
                np.multiply(deltas[q][s:e], 0.5, out=Fq)
                Fq -= self.shift[q]
                np.negative(Fq, out=self.G[q][s:e])
                np.exp(Fq, out=Fq)
                np.exp(self.G[q][s:e], out=self.G[q][s:e])
            o = np.ones(e - s)
            for p, (i, j) in enumerate(pairs):
                tb, db = self._weight(s, e, i, j, t), self._difference(s, e, i, j, dl)
                S[p] += o @ tb
                db *= tb
                M1[p] += o @ db
        self.S = S
        self.half_mean = 0.5 * (M1 / S)
        Yp, Ym, T = np.zeros((P, k)), np.zeros((P, k)), np.zeros((P, k))
        u_buf, v = np.empty((min(rows, n), k)), np.empty((min(rows, n), k))
        self.inverse_scale = np.empty((P, k))
        for p, (i, j) in enumerate(pairs):
            self.inverse_scale[p] = np.exp(self.half_mean[p] - self.shift[i] + self.shift[j])
        for s in range(0, n, rows):
            e = min(s + rows, n)
            o = np.ones(e - s)
            for p, (i, j) in enumerate(pairs):
                tb = self._weight(s, e, i, j, t)
                u = self.U[p][s:e] if keep_u else u_buf[:e - s]
                self._difference(s, e, i, j, u)
                u *= 0.5
                u -= self.half_mean[p]              # dbar/2
                np.expm1(u, out=u)                  # u = expm1(dbar/2)
                vb = self._inverse_ratio(s, e, p, i, j, v)  # exp(-dbar/2) = 1/(1 + u)
                db = dl[:e - s]
                np.multiply(tb, u, out=db)          # e u
                Yp[p] += o @ db
                db *= vb                            # e u/(1+u)
                Ym[p] -= o @ db
                db *= u                             # e u^2/(1+u) >= 0
                T[p] += o @ db
        Yp /= S
        Ym /= S
        T /= S
        self.D = 0.5 * np.log1p(T + Yp * Ym)
        self.kappa = 0.5 * (np.log1p(Yp) - np.log1p(Ym))

    def _weight(self, s, e, i, j, out):
        """e_0 F_i F_j on rows s:e (exp(c - shift) of the pair)."""
        tb = out[:e - s]
        if i == 0:
            np.multiply(self.e0[s:e], self.F[j][s:e], out=tb)
        else:
            np.multiply(self.e0[s:e], self.F[i][s:e], out=tb)
            tb *= self.F[j][s:e]
        return tb

    def _difference(self, s, e, i, j, out):
        """delta_i - delta_j on rows s:e (float64)."""
        db = out[:e - s]
        if i == 0:
            np.negative(self.deltas[j][s:e], out=db)
        else:
            np.subtract(self.deltas[i][s:e], self.deltas[j][s:e], out=db)
        return db

    def _inverse_ratio(self, s, e, p, i, j, out, scale=None):
        """exp(-dbar/2) = F_j G_i exp(h - s_i + s_j) on rows s:e (G = 1/F), times `scale`
        (per column) when given: multiplications only."""
        vb = out[:e - s]
        c = self.inverse_scale[p] if scale is None else self.inverse_scale[p] * scale
        np.multiply(self.F[j][s:e], c, out=vb)
        if i > 0:
            vb *= self.G[i][s:e]
        return vb

    def pair_weights(self, p: int):
        """(w_c, w_g) of pair p alone (docs/maths.md §2.4): :meth:`combine` with mu = 1 on
        pair p, read back; for tests."""
        n, k = self.r.shape
        w_c, w_g = np.zeros((n, k)), np.zeros((n, k))

        def put(s, e, wc, wg):
            w_c[s:e], w_g[s:e] = wc, wg
        self._accumulate(p, np.ones(k), put)
        return w_c, w_g

    def combine(self, mu: np.ndarray):
        """(w_r, w_delta) of sum_p mu_p D_p: grad = M_1^T w_r + sum_k Delta_k^T w_delta[k]
        (the layout of KModels.combine)."""
        n, k = self.r.shape
        K = len(self.deltas)
        w_r = np.zeros((n, k))
        w_delta = np.zeros(((K - 1) * n, k))
        for p, (i, j) in enumerate(self.pairs):
            def add(s, e, wc, wg, i=i, j=j):
                w_r[s:e] += wc
                wc *= 0.5
                if i > 0:
                    w_delta[(i - 1) * n + s:(i - 1) * n + e] += wc
                    w_delta[(i - 1) * n + s:(i - 1) * n + e] += wg
                w_delta[(j - 1) * n + s:(j - 1) * n + e] += wc
                w_delta[(j - 1) * n + s:(j - 1) * n + e] -= wg
            self._accumulate(p, mu[p], add)
        return w_r, w_delta

    def _accumulate(self, p: int, mu: np.ndarray, add):
        """Pair p's weights times mu, block by block, handed to add(s, e, mu w_c, mu w_g):
        with kappa = (g(1/2) - g(-1/2))/2, a = expm1(dbar/2 - kappa) = u e^-kappa +
        expm1(-kappa) and 1 + a = exp(dbar/2) e^-kappa,
        w_c = pi (e^-D a^2/(2(1+a)) + expm1(-D)), w_g = pi e^-D a (a+2) / (4(1+a))."""
        i, j = self.pairs[p]
        n, k = self.r.shape
        rows = self.rows
        D, S = self.D[p], self.S[p]
        E1, F1 = np.exp(-self.kappa[p]), np.expm1(-self.kappa[p])
        eD = np.exp(-D)
        al, be, ga = mu * 0.5 * eD / S, mu * np.expm1(-D) / S, mu * 0.25 * eD / S
        t, a, q, wc = (np.empty((min(rows, n), k)) for _ in range(4))
        for s in range(0, n, rows):
            e = min(s + rows, n)
            tb = self._weight(s, e, i, j, t)
            ab = a[:e - s]
            np.multiply(self.U[p][s:e], E1, out=ab)
            ab += F1                                # a
            qb = self._inverse_ratio(s, e, p, i, j, q, 1.0 / E1)   # 1/(1 + a)
            qb *= ab                                # a/(1+a)
            wcb = wc[:e - s]
            np.multiply(ab, qb, out=wcb)            # a^2/(1+a)
            wcb *= al
            wcb += be
            wcb *= tb                               # mu w_c
            ab += 2.0
            ab *= qb
            ab *= ga
            ab *= tb                                # mu w_g
            add(s, e, wcb, ab)


def fused_pairs(r: np.ndarray, deltas: list, pairs, keep_u: bool = True,
                block: int = BLOCK_ENTRIES):
    """A :class:`FusedPairs` for the scores r (n x k) and deltas (deltas[0] None, the others
    n x k in any float precision), or None when some column does not qualify (module
    docstring). keep_u: keep what :meth:`FusedPairs.combine` needs (the weights)."""
    r = np.asarray(r, dtype=np.float64)
    n, k = r.shape
    rows = max(16, block // max(k, 1))
    deltas = [None] + [np.asarray(dk, dtype=np.float64) for dk in deltas[1:]]
    m0 = column_max(r)
    if not np.isfinite(m0).all():
        return None
    hi = [None]
    for dk in deltas[1:]:
        top = column_max(dk)
        with np.errstate(invalid="ignore"):
            if not (top + column_max(-dk) <= FUSED_SPREAD / 2).all():
                return None
        hi.append(top)
    return FusedPairs(r, deltas, pairs, m0, hi, rows, keep_u)
