"""Every pair's Bhattacharyya distance among K softmax models from the pairs' Bhattacharyya
coefficients, with K exponentials per entry, and the gradient weights of sum_p mu_p D_p
(docs/maths.md §8.13).

With e_0 = exp(r - m_0) and F_k = exp(delta_k/2 - s_k) as in maths/kway_pairs.py (F_1 = 1),
S_ab = sum over rows of e_0 F_a F_b is, up to a constant, the mass of the geometric mean of
models a and b, and

    sum_rows sqrt(p_i p_j) = S_ij / sqrt(S_ii S_jj),   D_ij = -log S_ij + (log S_ii + log S_jj)/2.

Its gradient: grad log S_ab = E_ab[grad(r + delta_a/2 + delta_b/2)] under the law
omega_ab = e_0 F_a F_b / S_ab on the rows, so sum_p mu_p grad D_p = sum_{a <= b} c_ab
E_ab[...] with c_ij = -mu_ij for every pair and c_aa = (1/2) sum of mu_p over the pairs p
that hold model a: P + K weighted laws, no transcendental function beyond the K
exponentials.

Rounding: a coefficient near 1 carries an absolute error of a few 1e-16, so D is good to
about 1e-16 / D relative (1e-11 at D = 1e-5), and so is the weight on r (a sum of terms of
size 1 that cancel to one of size D). Enough to rank starting points and to climb with while
exploring; the reported values and the last polish take the cancellation-free fused pairs
(maths/kway_pairs.py). Below RANK_MIN_D, or where a column does not qualify for the fused
form, :func:`coefficient_pairs` returns None and the caller takes the fused pairs.
"""
from __future__ import annotations

import numpy as np

from bhtcli.maths.divergences import BLOCK_ENTRIES
from bhtcli.maths.kway_pairs import NEGLIGIBLE_MU, geometric_weight, qualified_rows

RANK_MIN_D = 1e-8   # below this D is left to the fused pairs (module docstring)


class CoefficientPairs:
    """D of every pair at every column (`D`, P x k) from the coefficients S_ab; with `keep`,
    also the stacked gradient weights of sum_p mu_p D_p (:meth:`combine`)."""

    def __init__(self, r, deltas, pairs, m0, tops, rows: int, keep: bool):
        # r and deltas[q] are k x n (maths/kway_pairs.py: columns_first)
        k, n = r.shape
        K = len(deltas)
        self.pairs, self.K, self.rows, self.n = pairs, K, rows, n
        self.keys = sorted(set(pairs) | {(q, q) for q in range(K)})
        width = n if keep else min(rows, n)
        self.e0 = np.empty((k, width))
        self.F = [None] + [np.empty((k, width)) for _ in range(1, K)]
        shift = [None] + [0.5 * np.asarray(top, dtype=np.float64)[:, None] for top in tops[1:]]
        self.S = {key: np.zeros(k) for key in self.keys}
        t = np.empty((k, min(rows, n)))
        for s in range(0, n, rows):
            e = min(s + rows, n)
            at = slice(s, e) if keep else slice(0, e - s)
            eb = self.e0[:, at]
            np.subtract(r[:, s:e], m0[:, None], out=eb)
            np.exp(eb, out=eb)
            for q in range(1, K):
                Fq = self.F[q][:, at]
                np.multiply(deltas[q][:, s:e], 0.5, out=Fq, dtype=np.float64, casting="unsafe")
                Fq -= shift[q]
                np.exp(Fq, out=Fq)
            o = np.ones(e - s)
            for key in self.keys:
                self.S[key] += geometric_weight(self.e0, self.F, *key, at, t) @ o
        self.D = np.empty((len(pairs), k))
        for p, (i, j) in enumerate(pairs):
            self.D[p] = -(np.log(self.S[(i, j)])
                          - 0.5 * (np.log(self.S[(i, i)]) + np.log(self.S[(j, j)])))

    def combine(self, mu: np.ndarray):
        """(w_r, w_delta) of sum_p mu_p D_p: grad = M_1^T w_r + sum_k Delta_k^T w_delta[k]
        (n x k and (K-1) n x k, transposes of contiguous k x n arrays, as FusedPairs.combine).
        A pair whose mu is below NEGLIGIBLE_MU times the largest of its column at every column
        is left out."""
        k, n, K = self.e0.shape[0], self.n, self.K
        largest = np.max(np.abs(mu), axis=0)
        coef = {}
        for p, (i, j) in enumerate(self.pairs):
            if not (np.abs(mu[p]) > NEGLIGIBLE_MU * largest).any():
                continue
            coef[(i, j)] = coef.get((i, j), 0.0) - mu[p]
            for a in (i, j):
                coef[(a, a)] = coef.get((a, a), 0.0) + 0.5 * mu[p]
        terms = [(key, (c / self.S[key])[:, None]) for key, c in sorted(coef.items())]
        w_r = np.zeros((k, n))
        w_delta = np.zeros((k, (K - 1) * n))
        t = np.empty((k, min(self.rows, n)))
        for s in range(0, n, self.rows):
            e = min(s + self.rows, n)
            for (a, b), c in terms:
                tb = geometric_weight(self.e0, self.F, a, b, slice(s, e), t)   # omega_ab S_ab
                tb *= c                          # c_ab omega_ab
                w_r[:, s:e] += tb
                if a != b:
                    tb *= 0.5                    # delta_a/2 + delta_b/2
                for model in {a, b}:
                    if model > 0:
                        w_delta[:, (model - 1) * n + s:(model - 1) * n + e] += tb
        return w_r.T, w_delta.T


def coefficient_pairs(r: np.ndarray, deltas: list, pairs, keep: bool = True,
                      block: int = BLOCK_ENTRIES):
    """A :class:`CoefficientPairs` for the scores r (n x k) and deltas (deltas[0] None, the
    others n x k in any float precision), or None when some column does not qualify for the
    fused form or some D is below RANK_MIN_D (then the caller takes maths/kway_pairs.py:
    fused_pairs). keep: keep what :meth:`CoefficientPairs.combine` needs."""
    found = qualified_rows(r, deltas, block, delta_dtype=None)
    if found is None:
        return None
    r, deltas, m0, tops, rows = found
    found = CoefficientPairs(r, deltas, pairs, m0, tops, rows, keep)
    return found if (found.D >= RANK_MIN_D).all() else None


def coefficient_distances(r: np.ndarray, deltas: list, pairs, block: int = BLOCK_ENTRIES):
    """Every pair's D at every column (P x k) from the coefficients, to rank columns by, or
    None (as :func:`coefficient_pairs`)."""
    found = coefficient_pairs(r, deltas, pairs, keep=False, block=block)
    return None if found is None else found.D
