"""`decide` for any K: which model produced the observed answers, sequentially (one stop rule:
Wald's SPRT for two models, the matrix SPRT for K) and by the fixed-n test on all of them, with
its errors computed as design predicts its count (docs/maths.md §3, §3.6, §8.5)."""
from __future__ import annotations

import math
import os
import time

import numpy as np
from scipy.special import expit

from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_pair, read_array
from bhtcli.maths.counts import fixed_test
from bhtcli.maths.divergences import divergences_from_tilt, logsumexp
from bhtcli.models.answers import answer_entries, answer_law, as_index, read_answers
from bhtcli.models.spec import ModelSpec
from bhtcli.results import DecideResult


def decide(A, B, query, answers, spec: ModelSpec = ModelSpec(), error: float = 0.05,
           stdin=None) -> DecideResult:
    """Decide which model produced `answers` (0-based indices, in the order observed).

    Parameters
    ----------
    A, B : array_like or path
    query : array_like or path
        The query the answers respond to: x (length d) for softmax, s (length n) for leverage.
    answers : array_like of int, or path, or "-"
        The observed answers.
    spec : ModelSpec
        The model family and, for softmax models, the links and biases (no budget needed).
    error : float
        Target error alpha for Wald's thresholds +-ln((1 - alpha)/alpha) (checked by the caller).
    """
    t0 = time.perf_counter()
    A, B = load_pair(A, B)
    readout = None if spec.leverage else spec.readout(A.shape[0])
    law = answer_law(A, B, query, spec.family, readout)
    if isinstance(answers, (str,)) or hasattr(answers, "__fspath__"):
        obs = read_answers(answers, A.shape[0], stdin=stdin)
    else:
        obs = read_answers_array(answers, A.shape[0])
    from bhtcli.models.leverage import tilt_of
    return decide_laws(law.log_pa, law.log_pb, obs, error, tilt_of(law.log_pa, law.log_pb),
                       spec.family, A.shape[0], A.shape[1], t0)


def decide_laws(log_pa, log_pb, obs, error: float, tilt, family: str, n: int, d, t0: float):
    """The SPRT and the fixed-n test on answers `obs` (indices) to one query whose laws are
    log_pa and log_pb; `tilt` is the pair's tilt the fixed-n test and the divergences use. An
    answer impossible under one model (log-likelihood ratio +-inf) decides at once."""
    div = divergences_from_tilt(tilt)
    with np.errstate(invalid="ignore"):
        llr = log_pa - log_pb
    path = np.cumsum(llr[obs])
    a = math.log((1 - error) / error)
    used, named = sequential_stop(np.where(path > 0, 0, 1), np.abs(path), a)
    total = float(path[-1])
    decision = "undecided" if named is None else "AB"[named]
    at = total if named is None else float(path[used - 1])
    favoured = "A" if total >= 0 else "B"
    expected = None
    if decision == "undecided":
        kl = div.kl_ab if favoured == "A" else div.kl_ba
        more = (a - abs(total)) / kl if kl > 0 else math.inf
        expected = max(1, math.ceil(more)) if math.isfinite(more) else None
    fixed = fixed_test(tilt, max(div.bhattacharyya_distance, 0.0), error, obs)
    return DecideResult(decision, used, len(obs), a, total, at, float(expit(total)), fixed.verdict,
                        math.exp(-len(obs) * div.bhattacharyya_distance), favoured, expected,
                        error, div.kl_ab, div.kl_ba, family, n, d,
                        fixed_error=fixed.error, seconds=time.perf_counter() - t0)


def sequential_stop(leader: np.ndarray, margin: np.ndarray, threshold: float):
    """(answers used, index of the model named, or None): the first answer after which the
    leader's log-likelihood ratio against every other model (`margin`, per answer; `leader`,
    its index) reaches `threshold`. Wald's SPRT for two models (the margin |llr|), the matrix
    SPRT for K (docs/maths.md §3.6, §8.5); every answer and None when it never does."""
    crossed = np.flatnonzero(margin >= threshold)
    if crossed.size == 0:
        return len(margin), None
    return int(crossed[0]) + 1, int(leader[crossed[0]])


def sprt_threshold(K: int, error: float) -> float:
    """log((K - 1) / alpha): the matrix SPRT names model k once L_k - L_j passes it for every
    j != k. Under model j, naming a given k != j has probability <= exp(-threshold) (change of
    measure on the stopping event), so every error is <= (K - 1) exp(-threshold) = alpha."""
    return math.log((K - 1) / error)


def log_probs_at(mats, queries, readouts=None) -> list:
    """Per query: the K x n matrix of log-probabilities (float64, from the difference scores;
    `readouts`: each model's link and bias, models/kway_readout.py)."""
    from bhtcli.models.kway import kway_scores_at
    out = []
    for x in queries:
        r, deltas = kway_scores_at(mats, x)
        if readouts is not None:
            r, deltas = readouts.laws(r, deltas)
        L = np.stack([r + dk for dk in deltas])
        out.append(L - logsumexp(L, axis=1)[:, None])
    return out


def load_queries(query, d: int) -> np.ndarray:
    """One query (length d), a schedule's queries (rows of an m x d matrix) or a schedule file
    (design --schedule --out: io/schedule_file.py), as m x d."""
    from bhtcli.io.schedule_file import is_schedule_file, read_schedule
    if is_schedule_file(query):
        return read_schedule(query, d, parameter_name("query"))[0]
    Q = np.asarray(read_array(os.fspath(query)) if isinstance(query, (str, os.PathLike))
                   else query, dtype=np.float64)
    if Q.ndim == 1 or (Q.ndim == 2 and 1 in Q.shape and d not in Q.shape[:1]):
        Q = Q.reshape(1, -1)
    if Q.ndim != 2 or Q.shape[1] != d:
        raise InputError(f"{parameter_name('query')} has shape {Q.shape}: give one query of length "
                         f"{d} or one query per row (m x {d})")
    if not np.isfinite(Q).all():
        raise InputError(f"{parameter_name('query')} holds a value that is not finite")
    return Q


def read_scheduled_answers(spec, n: int, m: int, stdin=None):
    """(query index, answer) per observed answer. With one query: answers as `decide` reads
    them. With m queries: a line "q a" per answer (q the 0-based row of the queries), or a
    JSON list of [q, a] pairs."""
    if m == 1:
        if isinstance(spec, (str, os.PathLike)):
            a = read_answers(os.fspath(spec), n, stdin=stdin)
        else:
            a = read_answers_array(spec, n)
        return np.zeros(len(a), dtype=np.int64), a
    if isinstance(spec, (str, os.PathLike)):
        label, entries = answer_entries(os.fspath(spec), "the observed answers, a line 'query "
                                        "answer' each (or a JSON list of [query, answer] pairs)",
                                        stdin)
    else:
        label = parameter_name("answers")
        entries = [(f"entry {k + 1}", v) for k, v in enumerate(spec)]
    qs, ans = [], []
    for where, item in entries:
        parts = item.split() if isinstance(item, str) else item
        pair = [as_index(v) for v in parts] if np.ndim(parts) == 1 else []
        if len(pair) != 2 or None in pair:
            raise InputError(f"{label}, {where}: {item!r} is not 'query answer' (two integers): "
                             "with a schedule each answer says which query it came from")
        q, a = pair
        if not 0 <= q < m:
            raise InputError(f"{label}, {where}: query {q} is out of range (0 to {m - 1})")
        if not 0 <= a < n:
            raise InputError(f"{label}, {where}: answer {a} is out of range (0 to {n - 1})")
        qs.append(q)
        ans.append(a)
    if not ans:
        raise InputError(f"{label} holds no answers")
    return np.array(qs, dtype=np.int64), np.array(ans, dtype=np.int64)


def read_answers_array(values, n: int) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{parameter_name('answers')} must be a non-empty list of integer answers")
    if a.min() < 0 or a.max() >= n:
        raise InputError(f"{parameter_name('answers')}: answers must be 0 to {n - 1}")
    return a.astype(np.int64)


def check_prior(prior, K: int, option: str = "prior", each: str = "model"):
    """Shares of K models (a prior) or of K queries (option "weights", each "query"): K finite
    numbers >= 0, not all 0, normalised (None: equal shares)."""
    if prior is None:
        return np.full(K, 1.0 / K)
    try:
        priors = np.asarray(prior, dtype=np.float64)
    except (TypeError, ValueError):
        priors = np.full(0, np.nan)
    if priors.shape != (K,) or not np.isfinite(priors).all() or (priors < 0).any() or priors.sum() <= 0:
        raise InputError(f"{parameter_name(option)} needs {K} numbers >= 0, not all 0, one per {each}")
    return priors / priors.sum()


def decide_models(models, query, answers, error: float, priors,
                  stdin=None, spec=None) -> DecideResult:
    """Which of K models produced `answers` (to one query, or to a schedule's queries): the
    matrix SPRT and the maximum-likelihood verdict (two models with priors: the same).

    Parameters
    ----------
    models : sequence of array_like or path
    query : array_like or path
        One query (length d) or one query per row (a schedule).
    answers : path, "-" or sequence
        Observed answers; with a schedule, (query index, answer) pairs.
    error : float
        alpha: the matrix SPRT's threshold is log((K - 1) / alpha) (checked by bhtcli.api).
    priors : numpy.ndarray
        Prior probabilities of the models (:func:`check_prior`).
    spec : ModelSpec, optional
        Its `links` and `biases`: each model's read-out (None: plain softmax).
    """
    # the K-model loader and laws, imported here: a pair's decide loads no search modules
    from bhtcli.commands.kway import load_models
    from bhtcli.maths.kway import KwayLaw
    from bhtcli.models.kway import kway_scores_at
    t0 = time.perf_counter()
    mats, names = load_models(models)
    K, (n, d) = len(mats), mats[0].shape
    readouts = None if spec is None or spec.links is None else spec.kway_readouts(n)
    Q = load_queries(query, d)
    qi, obs = read_scheduled_answers(answers, n, Q.shape[0], stdin=stdin)
    logp = log_probs_at(mats, Q, readouts)
    steps = np.stack([logp[q][:, a] for q, a in zip(qi, obs)])      # T x K
    # the maximum-likelihood test on these answers' queries and shares (§8.5): its largest
    # error as design predicts it, and the union bound max_k sum_j prod_t BC_kj on every error
    counts = np.bincount(qi, minlength=Q.shape[0])
    sent = np.flatnonzero(counts)
    scores = [kway_scores_at(mats, Q[q]) for q in sent]
    law = KwayLaw.build([s[0] for s in scores], [s[1] for s in scores], counts[sent], readouts)
    return decide_steps(steps, priors, error, law, names, "softmax", n, d, int(sent.size), t0)


def decide_steps(steps, priors, error: float, law, names, family: str, n: int, d,
                 queries_used: int, t0: float) -> DecideResult:
    """The K-model decision from the answers' log-probabilities (`steps`: T x K, log p_k of
    each answer in the order observed; -inf where an answer is impossible under model k, which
    then falls behind at once): the matrix SPRT, the maximum-likelihood verdict, the
    posterior, and the verdict's predicted error and union bound from `law` (a KwayLaw: the
    models' laws at the queries the answers came from, in their shares)."""
    path = np.cumsum(steps, axis=0)
    total = path[-1]
    K, T = steps.shape[1], steps.shape[0]
    with np.errstate(divide="ignore"):
        logpost = total + np.log(priors)
    post = np.exp(logpost - logsumexp(logpost))
    a = sprt_threshold(K, error)
    top2 = np.sort(path, axis=1)[:, -2:]
    with np.errstate(invalid="ignore"):         # -inf - -inf: two builds ruled out, no margin
        margin = top2[:, 1] - top2[:, 0]
    used, decision = sequential_stop(np.argmax(path, axis=1), margin, a)
    best = np.flatnonzero(total == total.max())
    verdict = int(best[0]) if best.size == 1 else None
    bound = float(law.union_errors(T).max())
    predicted_error = float(law.ml_errors(T).max())
    label = lambda k, none: none if k is None else f"M{k + 1}"
    return DecideResult(label(decision, "undecided"), used, T, a, None, None, None,
                        label(verdict, "tie"), min(bound, 1.0), None, None, error, None, None,
                        family, n, d, fixed_error=predicted_error,
                        seconds=time.perf_counter() - t0, models=names,
                        log_likelihoods=total.tolist(), posterior=post.tolist(),
                        priors=priors.tolist(), queries_used=queries_used)


