"""H^2, D and the query counts of two laws given as log-probabilities over the same answers,
when either may give an answer probability 0 (a truncating sampler; docs/maths.md §13).

H^2 = (1/2) sum (sqrt p - sqrt q)^2 (no cancellation for close laws), D = -log(1 - H^2). An
answer outside one law's support has log-likelihood ratio +-inf: one such answer decides at
once, and the fixed-n test can only gain from it, so the counts are computed on the laws with
every zero raised to SUPPORT_FLOOR (renormalised): the total variation this moves is at most
n_answers * SUPPORT_FLOOR, far below any error target. Disjoint supports (H^2 = 1) need one
answer.
"""
from __future__ import annotations

import math

import numpy as np

from bhtcli.maths.counts import QueryCounts, fixed_tests, query_counts
from bhtcli.maths.divergences import Tilt, logsumexp
from bhtcli.maths.kway import KwayLaw

SUPPORT_FLOOR = 1e-30


def hellinger_squared(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """H^2 between the laws exp(la) and exp(lb) along the last axis (zeros allowed)."""
    d = np.exp(0.5 * np.asarray(la, dtype=np.float64)) - np.exp(0.5 * np.asarray(lb, dtype=np.float64))
    return np.minimum(0.5 * np.sum(d * d, axis=-1), 1.0)


def pair_list(K: int) -> list[tuple[int, int]]:
    """The pairs (i < j) of K laws, in itertools.combinations order."""
    return [(i, j) for i in range(K) for j in range(i + 1, K)]


def pair_h2(L) -> np.ndarray:
    """H^2 of every pair (i < j) of K laws (each (m, n) log-probabilities), per row: (pairs, m)."""
    return np.stack([hellinger_squared(L[i], L[j]) for i, j in pair_list(len(L))])


def bhattacharyya(h2) -> float:
    """D = -log(1 - H^2) (inf for disjoint supports)."""
    h2 = float(h2)
    return math.inf if h2 >= 1.0 else -math.log1p(-h2)


def floored_tilt(la: np.ndarray, lb: np.ndarray) -> Tilt:
    """The tilt of the two laws with zeros raised to SUPPORT_FLOOR and renormalised."""
    a, b = floored(la), floored(lb)
    return Tilt.from_logits(0.5 * (a + b), a - b)


def floored(la: np.ndarray) -> np.ndarray:
    """A law's log-probabilities with zeros raised to SUPPORT_FLOOR and renormalised."""
    a = np.maximum(np.asarray(la, dtype=np.float64), math.log(SUPPORT_FLOOR))
    return a - logsumexp(a)


def kway_law(laws) -> KwayLaw:
    """The K-law record of docs/maths.md §8 (pair exponents, the copula's correlations) for
    K laws over the same answers, one query: each law floored as for two laws, so that its
    counts and the maximum-likelihood test's predicted error stay finite under truncation."""
    F = [floored(la) for la in laws]
    return KwayLaw.build([F[0]], [[f - F[0] for f in F]], [1.0])


def law_counts(la: np.ndarray, lb: np.ndarray, alpha: float) -> QueryCounts:
    """lower, predicted and upper answers to tell the two laws apart with both errors <= alpha
    (docs/maths.md §3 on the floored laws; lower and upper from the exact D)."""
    keep = np.isfinite(la) | np.isfinite(lb)
    la, lb = np.asarray(la)[keep], np.asarray(lb)[keep]
    h2 = float(hellinger_squared(la, lb))
    if h2 >= 1.0 - 1e-15:
        return QueryCounts(1, 1, 1, "support")
    return query_counts(floored_tilt(la, lb), bhattacharyya(h2), alpha)


def build_counts(laws, alpha: float) -> dict:
    """{lower, predicted, upper, method}: the answers the fixed-n verdict needs at one prompt,
    for K laws (the builds' log-probabilities). Two laws: :func:`law_counts` (the likelihood
    ratio test, both errors <= alpha). K >= 3: the maximum-likelihood verdict among all K, as
    `design` counts K models and `decide --prompt` predicts its error (maths/kway.py
    kway_counts on :func:`kway_law`): every build's error <= alpha, which the closest pair's
    count alone does not give."""
    if len(laws) == 2:
        c = law_counts(laws[0], laws[1], alpha)
        return {"lower": c.lower, "predicted": c.predicted, "upper": c.upper, "method": c.method}
    from bhtcli.maths.kway import kway_counts
    return kway_counts(kway_law(laws), alpha)


def law_decisions(la: np.ndarray, lb: np.ndarray, alpha: float, answers: np.ndarray):
    """The fixed-n test whose count :func:`law_counts` predicts, on each row of `answers`
    (trials x N answers, indices into the laws' last axis): (the probability that it decides B
    on each row -- 0, 1, or its randomisation at the threshold --, its error, its method).
    An answer outside one law's support rules that law out at once."""
    la, lb = np.asarray(la, dtype=np.float64), np.asarray(lb, dtype=np.float64)
    answers = np.atleast_2d(np.asarray(answers, dtype=np.int64))
    keep = np.isfinite(la) | np.isfinite(lb)
    if not keep[answers].all():
        raise ValueError("an answer has probability 0 under both laws")
    index = np.cumsum(keep) - 1                 # token -> position among the kept answers
    la, lb = la[keep], lb[keep]
    h2 = float(hellinger_squared(la, lb))
    if h2 >= 1.0 - 1e-15:                       # disjoint supports: one answer decides
        only_b = ~np.isfinite(la[index[answers]])
        return only_b[:, 0].astype(np.float64), 0.0, "support"
    tilt = floored_tilt(la, lb)
    return fixed_tests(tilt, bhattacharyya(h2), alpha, index[answers])


def setting_floors(base, others) -> np.ndarray:
    """The engine floor of each build (docs/llm_audit.md, "The engine floor"): (K, m), row k the
    largest H^2 between build k's laws under the settings used, base[k] (m, n), and under each
    other setting, others[k] (a list of (m, n) arrays). A row with no other setting is 0."""
    out = np.zeros((len(base), np.shape(base[0])[0]))
    for k, (b, alts) in enumerate(zip(base, others)):
        for o in alts:
            out[k] = np.maximum(out[k], hellinger_squared(b, o))
    return out


def clears_floor(h2: float, floor: float, margin: float) -> bool:
    """Whether H^2 stands at least `margin` times above its engine floor. Equal laws (H^2 = 0)
    never do, even on a zero floor: such a prompt cannot tell the builds apart."""
    return h2 > 0 and h2 >= margin * floor


def error_shift(floor: float, n) -> float | None:
    """Le Cam's bound on how far any test's error on n answers moves when each answer's law
    moves by `floor` in H^2: TV(P^n, Q^n) <= sqrt(1 - (1 - H^2)^(2n)) (docs/llm_audit.md,
    "The engine floor"). None when n is None."""
    if n is None:
        return None
    if floor >= 1.0:                            # disjoint laws: any error can move by 1
        return 1.0
    return math.sqrt(max(0.0, -math.expm1(2 * int(n) * math.log1p(-float(floor)))))
