"""How many answers name the true one of K models with every error <= alpha (docs/maths.md §8).

The answers come from a *schedule*: queries x_1 .. x_m used in proportions w_1 .. w_m (one
query repeated is the schedule m = 1). For N answers, N_l = w_l N of them to query l, the
pair (i, j) has the Bhattacharyya exponent N D_ij with D_ij = sum_l w_l D_ij(x_l).

- lower: any test that names the true model also tells the closest pair apart, so the pair
  bound of docs/maths.md §3.2 at min_ij D_ij is necessary;
- upper: the maximum-likelihood test errs under model k with probability at most
  sum_{j != k} exp(-N D_kj) (a union of pairwise Chernoff bounds at lambda = 1/2); the
  smallest N with max_k of it <= alpha suffices;
- predicted: the maximum-likelihood test errs under k when some L_j >= L_k. Each pairwise
  event {L_k - L_j <= 0} gets its Lugannani-Rice tail at the Chernoff point (the saddle of
  the exponent), and the events are joined by a Gaussian copula with the correlation of the
  per-answer log-likelihood ratios log p_k / p_j under model k:
  P_k(error) = 1 - Phi_R(-z), z_j = Phi^-1(P_k(L_k - L_j <= 0)). The smallest N with
  max_k P_k(error) <= alpha is the prediction (checked against Monte Carlo in the tests).

Everything here takes the models' scores at the queries, no matrices: pure numerics.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from bhtcli.maths.counts import ceil_count, lower_count
from bhtcli.maths.divergences import Tilt, logsumexp
from bhtcli.maths.orthant import orthant_probability
from bhtcli.maths.scalar import first_passing, lugannani_rice_log_lower, ndtri, root_bracketed


@dataclass(frozen=True)
class PairExponent:
    """The per-answer exponent of one pair under a schedule: kappa(lambda) = sum_l w_l
    log sum_a p_i^lambda p_j^(1-lambda), at the Chernoff point and at 1/2."""

    bhattacharyya: float      # D_ij = -kappa(1/2)
    chernoff_point: float     # lambda* = argmin kappa
    kappa: float              # kappa(lambda*) = -(Chernoff information)
    kappa2: float             # kappa''(lambda*): variance of the LLR under the tilted law


def pair_exponent(tilts, weights) -> PairExponent:
    """The exponent of one pair under the schedule: tilts[l] is the pair's
    :class:`bhtcli.maths.divergences.Tilt` at query l (first model a = c + delta/2), used with
    weight weights[l]. kappa(lambda) = g(lambda - 1/2) - lambda g(1/2) - (1 - lambda) g(-1/2)
    with g the tilt's cumulant generating function: no cancellation for nearly equal models."""
    weights = np.asarray(weights, dtype=np.float64)
    used = [(t, w, float(t.cgf(0.5)), float(t.cgf(-0.5))) for t, w in zip(tilts, weights) if w > 0]

    def k(lam, order):
        total = 0.0
        for t, w, gp, gm in used:
            if order == 0:
                v = t.log_alpha_power(lam, gp, gm)
            elif order == 1:
                v = t.cgf_prime(lam - 0.5) - gp + gm
            else:
                v = t.cgf_second(lam - 0.5)
            total += w * float(v)
        return total

    D = sum(w * 0.5 * (gp + gm) for _, w, gp, gm in used)
    lo, hi = 1e-9, 1.0 - 1e-9
    d_lo, d_hi = k(lo, 1), k(hi, 1)
    if d_lo >= 0:
        lam = lo
    elif d_hi <= 0:
        lam = hi
    else:
        lam = root_bracketed(lambda t: k(t, 1), lo, hi, xtol=1e-12)
    return PairExponent(max(D, 0.0), lam, min(k(lam, 0), -0.0), k(lam, 2))


def log_tail(exponent: PairExponent, N: float, under_first: bool) -> float:
    """log P(L_i - L_j <= 0) after N answers when model i is true (`under_first`), or
    log P(L_j - L_i <= 0) when j is (Lugannani-Rice at the Chernoff point)."""
    lam, kap, k2 = exponent.chernoff_point, exponent.kappa, exponent.kappa2
    if not kap < 0:
        return 0.0
    w = -math.sqrt(-2.0 * N * kap)
    theta = (lam - 1.0) if under_first else -lam
    u = theta * math.sqrt(max(N * k2, 0.0))
    return lugannani_rice_log_lower(w, u)


def llr_correlations(r_list, deltas_list, weights, k: int) -> np.ndarray:
    """Correlation matrix of the per-answer log-likelihood ratios log p_k / p_j (j != k)
    under model k, covariances averaged over the schedule with weights w_l. The ratio is
    (delta_k - delta_j) minus a constant, so it comes from the difference scores."""
    K = len(deltas_list[0])
    others = [j for j in range(K) if j != k]
    cov = np.zeros((len(others), len(others)))
    for r, deltas, w in zip(r_list, deltas_list, weights):
        if w <= 0:
            continue
        a = r + deltas[k]
        p = np.exp(a - logsumexp(a))
        R = np.stack([deltas[k] - deltas[j] for j in others])
        Rc = R - (R @ p)[:, None]
        cov += w * (Rc * p) @ Rc.T
    sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    corr = cov / np.outer(sd, sd)
    np.fill_diagonal(corr, 1.0)
    return np.clip(corr, -1.0, 1.0)


def _pair_logits(r, deltas, i: int, j: int, readouts):
    """(c, delta) of the pair (i, j): its midpoint and difference scores, through the pair's
    read-out when there is one."""
    m, D = r + 0.5 * (deltas[i] + deltas[j]), deltas[i] - deltas[j]
    return (m, D) if readouts is None else readouts.pair_logits(m, D, i, j)[:2]


@dataclass
class KwayLaw:
    """Everything the counts need about K models under one schedule."""

    K: int
    weights: np.ndarray        # per query, summing to 1
    exponents: dict            # (i, j), i < j -> PairExponent
    correlations: list         # per model k: correlation of log p_k / p_j, j != k
    tilts: dict | None = None  # (i, j) -> the pair's Tilt at each query (their cgf memoised)

    @classmethod
    def build(cls, r_list, deltas_list, weights, readouts=None) -> "KwayLaw":
        """r_list[l] = M_1 x_l, deltas_list[l][k] = (M_k - M_1) x_l (float64 scores);
        `readouts` (models/kway_readout.py: KReadouts, None for plain softmax) turn each
        pair's scores into its (c, delta) and each model's into its law."""
        weights = np.asarray(weights, dtype=np.float64)
        weights = weights / weights.sum()
        K = len(deltas_list[0])
        exps, tilts = {}, {}
        for i in range(K):
            for j in range(i + 1, K):
                tilts[(i, j)] = [Tilt.from_logits(*_pair_logits(r, dl, i, j, readouts))
                                 for r, dl in zip(r_list, deltas_list)]
                exps[(i, j)] = pair_exponent(tilts[(i, j)], weights)
        if readouts is not None:
            r_list, deltas_list = zip(*(readouts.laws(r, dl) for r, dl in zip(r_list, deltas_list)))
        corr = [llr_correlations(r_list, deltas_list, weights, k) for k in range(K)]
        return cls(K, weights, exps, corr, tilts)

    def distance_matrix(self) -> np.ndarray:
        """D_ij per answer (symmetric, zero diagonal)."""
        Dm = np.zeros((self.K, self.K))
        for (i, j), e in self.exponents.items():
            Dm[i, j] = Dm[j, i] = e.bhattacharyya
        return Dm

    def ml_errors(self, N: float) -> np.ndarray:
        """P_k(the maximum-likelihood test does not name k) after N answers, per model k
        (Lugannani-Rice marginals joined by a Gaussian copula)."""
        return np.array([self._ml_error(k, self._tails(k, N)) for k in range(self.K)])

    def ml_errors_at_most(self, N: float, alpha: float) -> bool:
        """max_k P_k(error) <= alpha, the same answer as ml_errors(N).max() <= alpha with the
        copula integrated only where it decides: P_k lies between the largest marginal and
        their sum, so a model whose sum is <= alpha passes, one whose largest marginal is
        > alpha fails, and the first failing model ends the check."""
        undecided = []
        for k in range(self.K):
            tails = self._tails(k, N)
            if not tails.max() <= alpha:
                return False
            if not tails.sum() <= alpha:
                undecided.append((k, tails))
        return all(self._ml_error(k, tails) <= alpha for k, tails in undecided)

    def _tails(self, k: int, N: float) -> np.ndarray:
        """P_k(L_k - L_j <= 0) for j != k (Lugannani-Rice), each at most 1/2."""
        tails = []
        for j in range(self.K):
            if j == k:
                continue
            e = self.exponents[(min(k, j), max(k, j))]
            tails.append(math.exp(log_tail(e, N, under_first=k < j)))
        return np.minimum(np.array(tails), 0.5)

    def _ml_error(self, k: int, tails: np.ndarray) -> float:
        """P_k(error) from the marginals `tails`: the Gaussian copula's complement, between
        the largest marginal and their sum."""
        if len(tails) == 1:
            return float(tails[0])
        union = float(tails.sum())
        if union < 1e-6:            # copula complement would cancel: Bonferroni is exact here
            return union
        joint = orthant_probability(-ndtri(tails), self.correlations[k])
        return min(max(1.0 - float(joint), float(tails.max())), union)

    def union_errors(self, N: float) -> np.ndarray:
        """sum_{j != k} exp(-N D_kj) per model k: the union of Chernoff bounds."""
        Dm = self.distance_matrix()
        E = np.exp(-N * Dm)
        np.fill_diagonal(E, 0.0)
        return E.sum(axis=1)


def union_upper(Dm: np.ndarray, alpha: float) -> int | None:
    """Smallest N with max_k sum_{j != k} exp(-N D_kj) <= alpha (None: some D is 0)."""
    off_diag = ~np.eye(Dm.shape[0], dtype=bool)
    off = Dm[off_diag]
    if not (off > 0).all():
        return None

    def f(N):          # log max_k sum_j exp(-N D_kj) - log alpha, decreasing in N
        terms = np.where(off_diag, -N * Dm, -np.inf)
        top = terms.max(axis=1, keepdims=True)
        return float(np.max(top[:, 0] + np.log(np.exp(terms - top).sum(axis=1))) - math.log(alpha))

    dmin = float(off.min())
    lo, hi = 0.0, (math.log(1.0 / alpha) + math.log(Dm.shape[0])) / dmin
    if f(hi) > 0:
        hi *= 2
    N = root_bracketed(f, lo, hi, xtol=1e-9 * hi) if f(lo) > 0 else 0.0
    n = ceil_count(N)
    if n is not None and f(n) > 1e-12:
        # brentq stops within xtol (~1e-9 N): find the smallest integer past it by doubling
        # then bisection, not one step at a time (N can be 1e17 when the models nearly agree)
        step = 1
        while f(n + step) > 1e-12:
            step *= 2
        # f(n + step // 2) > tol (n itself when step = 1), f(n + step) <= tol
        n = first_passing(lambda N: f(N) <= 1e-12, n + step // 2, n + step)
    return n


def kway_counts(law: KwayLaw, alpha: float) -> dict:
    """{lower, predicted, upper, method} of docs/maths.md §8 for the law's schedule."""
    Dm = law.distance_matrix()
    off = Dm[~np.eye(law.K, dtype=bool)]
    if not (off > 0).all():
        return {"lower": None, "predicted": None, "upper": None, "method": "none"}
    lower = lower_count(float(off.min()), alpha)
    upper = union_upper(Dm, alpha)
    ok = lambda N: law.ml_errors_at_most(N, alpha)
    lo, hi = max(lower, 1) - 1, upper
    if lo >= 1 and ok(lo):
        hi = lo
        lo = 0
    predicted = max(first_passing(ok, lo, hi), lower)     # lo fails (or 0), hi passes
    return {"lower": lower, "predicted": predicted, "upper": upper, "method": "saddlepoint-copula"}


def allocate(weights, total: int) -> list:
    """Answers per query for `total` answers in the proportions `weights` (largest remainder)."""
    w = np.asarray(weights, dtype=np.float64)
    raw = w / w.sum() * total
    counts = np.floor(raw).astype(np.int64)
    rest = total - int(counts.sum())
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[:rest]] += 1
    return [int(c) for c in counts]

