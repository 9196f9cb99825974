"""Closing the loop among K models: decide from observed answers (maximum likelihood and the
matrix SPRT) and simulate both (docs/kway.md, docs/maths.md §8.5)."""
from __future__ import annotations

import math
import os
import time

import numpy as np

from bhtcli.commands.kway import design_kway, load_models
from bhtcli.commands.kway_adaptive import adaptive_phase, kl_queries, matrix_sprt_runs
from bhtcli.errors import InputError, note, parameter_name
from bhtcli.io.load import load_matrix, read_array
from bhtcli.io.validation import check_count, check_energy, check_error, check_seed
from bhtcli.maths.divergences import logsumexp
from bhtcli.maths.kway import KwayLaw, allocate, kway_counts
from bhtcli.models.answers import answer_entries, as_index, draw, model_log_probs, read_answers
from bhtcli.models.kway import kway_scores_at
from bhtcli.results import KwayDecideResult, KwaySimulateResult


def sprt_threshold(K: int, error: float) -> float:
    """log((K - 1) / alpha): the matrix SPRT names model k once L_k - L_j passes it for every
    j != k. Under model j, naming a given k != j has probability <= exp(-threshold) (change of
    measure on the stopping event), so every error is <= (K - 1) exp(-threshold) = alpha."""
    return math.log((K - 1) / error)


def log_probs_at(mats, queries) -> list:
    """Per query: the K x n matrix of log-probabilities (float64, from the difference scores)."""
    out = []
    for x in queries:
        r, deltas = kway_scores_at(mats, x)
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
            a = read_answers_list(spec, n)
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


def read_answers_list(values, n: int) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{parameter_name('answers')} must be a non-empty list of integer answers")
    if a.min() < 0 or a.max() >= n:
        raise InputError(f"{parameter_name('answers')}: answers must be 0 to {n - 1}")
    return a.astype(np.int64)


def decide_kway(models, query, answers, error: float = 0.05, prior=None,
                stdin=None) -> KwayDecideResult:
    """Which of K models produced `answers` (to one query, or to a schedule's queries).

    Parameters
    ----------
    models : sequence of array_like or path
    query : array_like or path
        One query (length d) or one query per row (a schedule).
    answers : path, "-" or sequence
        Observed answers; with a schedule, (query index, answer) pairs.
    error : float
        alpha: the matrix SPRT's threshold is log((K - 1) / alpha).
    prior : sequence of float, optional
        Prior probabilities of the models (default equal).
    """
    t0 = time.perf_counter()
    error = check_error(error)
    mats, names = load_models(models)
    K, (n, d) = len(mats), mats[0].shape
    Q = load_queries(query, d)
    priors = np.full(K, 1.0 / K) if prior is None else np.asarray(prior, dtype=np.float64)
    if priors.shape != (K,) or not np.isfinite(priors).all() or (priors < 0).any() or priors.sum() <= 0:
        raise InputError(f"{parameter_name('prior')} needs {K} non-negative numbers, one per model")
    priors = priors / priors.sum()
    qi, obs = read_scheduled_answers(answers, n, Q.shape[0], stdin=stdin)
    logp = log_probs_at(mats, Q)
    steps = np.stack([logp[q][:, a] for q, a in zip(qi, obs)])      # T x K
    # the maximum-likelihood test on these answers' queries and shares (§8.5): its largest
    # error as design predicts it, and the union bound max_k sum_j prod_t BC_kj on every error
    counts = np.bincount(qi, minlength=Q.shape[0])
    sent = np.flatnonzero(counts)
    scores = [kway_scores_at(mats, Q[q]) for q in sent]
    law = KwayLaw.build([s[0] for s in scores], [s[1] for s in scores], counts[sent])
    return decide_steps(steps, priors, error, law, names, "softmax", n, d, int(sent.size), t0)


def decide_steps(steps, priors, error: float, law: KwayLaw, names, family: str, n: int, d,
                 queries_used: int, t0: float) -> KwayDecideResult:
    """The K-way decision from the answers' log-probabilities (`steps`: T x K, log p_k of each
    answer in the order observed; -inf where an answer is impossible under model k, which then
    falls behind at once): the matrix SPRT, the maximum-likelihood verdict, the posterior, and
    the verdict's predicted error and union bound from `law` (the models' laws at the queries
    the answers came from, in their shares)."""
    path = np.cumsum(steps, axis=0)
    total = path[-1]
    K = steps.shape[1]
    with np.errstate(divide="ignore"):
        logpost = total + np.log(priors)
    post = np.exp(logpost - logsumexp(logpost))
    a = sprt_threshold(K, error)
    top2 = np.sort(path, axis=1)[:, -2:]
    with np.errstate(invalid="ignore"):
        crossed = np.flatnonzero(top2[:, 1] - top2[:, 0] >= a)
    if crossed.size:
        used = int(crossed[0]) + 1
        decision = int(np.argmax(path[crossed[0]]))
    else:
        used, decision = steps.shape[0], None
    best = np.flatnonzero(total == total.max())
    verdict = int(best[0]) if best.size == 1 else None
    T = steps.shape[0]
    bound = float(law.union_errors(T).max())
    predicted_error = float(law.ml_errors(T).max())
    label = lambda k, none: none if k is None else f"M{k + 1}"
    return KwayDecideResult(family, n, d, None, error, names, total.tolist(), post.tolist(),
                            priors.tolist(), label(verdict, "tie"), min(bound, 1.0),
                            label(decision, "undecided"), used, T, a, queries_used,
                            fixed_error=predicted_error, seconds=time.perf_counter() - t0,
                            decision_index=decision, fixed_verdict_index=verdict)


def check_shares(weights, m: int) -> np.ndarray:
    """The shares of m given queries: m finite numbers >= 0, not all 0 (normalised to sum 1)."""
    name = parameter_name("weights")
    try:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be numbers, one per query, got {weights!r}") from None
    if w.shape[0] != m:
        raise InputError(f"{name} has {w.shape[0]} entries for {m} queries; give one share per query")
    if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
        raise InputError(f"{name} must be finite shares >= 0, not all 0, got {w.tolist()}")
    return w / w.sum()


def _sequence(weights, length: int) -> np.ndarray:
    """Which query each answer uses: every prefix as close to the proportions as it can be
    (the query furthest behind its share goes next)."""
    w = np.asarray(weights, dtype=np.float64)
    used = np.zeros(len(w))
    out = np.empty(length, dtype=np.int64)
    for t in range(length):
        q = int(np.argmax(w * (t + 1) - used))
        out[t] = q
        used[q] += 1
    return out


def sample_schedule(A, schedule, count: int, seed: int = 0, spec=None) -> np.ndarray:
    """`count` answers of model A to a schedule file's queries, interleaved by weight as
    simulate interleaves them (every prefix keeps the proportions): a count x 2 array of
    (query index, answer), what `decide` reads with that schedule as --query."""
    from bhtcli.io.schedule_file import read_schedule
    count, seed = check_count(count), check_seed(seed)
    A = load_matrix(A, None if isinstance(A, (str, os.PathLike)) else "A")
    readout = None if spec is None else spec.readout(A.shape[0])      # links and bias of A
    Q, w = read_schedule(schedule, A.shape[1], parameter_name("schedule"))
    order = _sequence(w, count)
    rng = np.random.default_rng(seed)
    out = np.empty((count, 2), dtype=np.int64)
    out[:, 0] = order
    for q in range(Q.shape[0]):
        at = np.flatnonzero(order == q)
        if at.size:
            cdf = np.cumsum(np.exp(model_log_probs(A, Q[q], "softmax", readout)))
            out[at, 1] = draw(cdf / cdf[-1], at.size, rng)
    return out


DRAW_FRACTION = 16       # fewer answers than n / this: draw them, not a t x n table of counts
DRAW_CELLS = 4_000_000   # answers drawn at a time (trials x answers)


def _answer_sums(lp: np.ndarray, k: int, c: int, t: int, rng) -> np.ndarray:
    """t x K: the sums of lp[:, a] over c answers a drawn from model k's law (lp: K x n
    log-probabilities), for t trials. Few answers among many categories (a vocabulary) are
    drawn one by one by inverse CDF, t x c of them; otherwise their counts come from one
    multinomial table (t x n), whose cost does not grow with c."""
    K, n = lp.shape
    p = np.exp(lp[k])
    if c * DRAW_FRACTION >= n:
        return rng.multinomial(c, p / p.sum(), size=t) @ lp.T
    cdf = np.cumsum(p)
    out = np.zeros((t, K))
    rows = max(1, DRAW_CELLS // c)
    for s in range(0, t, rows):
        u = rng.uniform(size=(min(rows, t - s), c)) * cdf[-1]
        a = np.minimum(np.searchsorted(cdf, u, side="right"), n - 1)
        out[s:s + u.shape[0]] = lp.T[a].sum(axis=1)
    return out


def ml_errors_mc(logp, counts, trials: int, rng, chunk: int = 2000) -> np.ndarray:
    """Monte Carlo P_k(the maximum-likelihood test does not name k) with counts[l] answers to
    query l (ties split evenly), per model k."""
    K = logp[0].shape[0]
    errs = np.zeros(K)
    for k in range(K):
        wrong = 0.0
        for s in range(0, trials, chunk):
            t = min(chunk, trials - s)
            L = np.zeros((t, K))
            for lp, c in zip(logp, counts):
                if c:
                    L += _answer_sums(lp, k, int(c), t, rng)
            top = L.max(axis=1, keepdims=True)
            ties = L >= top - 1e-9 * np.maximum(1.0, np.abs(top))
            wrong += float(np.sum(1.0 - ties[:, k] / ties.sum(axis=1)))
        errs[k] = wrong / trials
    return errs


def simulate_kway(models, energy: float, error: float = 0.05, trials: int = 10_000,
                  seed: int = 0, schedule: bool = False, query=None, weights=None,
                  policy: str = "all", starts: int | None = None,
                  progress=None) -> KwaySimulateResult:
    """Monte Carlo of naming the true one of K models: the maximum-likelihood test at fixed n
    (the empirical n for every error <= alpha, against the predicted count), the matrix SPRT
    (mean answers) with the designed query, the designed schedule, or given queries, and
    Chernoff's adaptive rule (kway_adaptive.py) with the same stop."""
    t0 = time.perf_counter()
    energy, error, seed = check_energy(energy), check_error(error), check_seed(seed)
    if trials < 100:
        raise InputError(f"{parameter_name('trials')} must be at least 100, got {trials}")
    if policy not in ("all", "fixed", "sprt", "adaptive"):
        raise InputError(f"{parameter_name('policy')} must be one of fixed, sprt, adaptive, all; "
                         f"got {policy!r}")
    mats, names = load_models(models)
    K, (n, d) = len(mats), mats[0].shape
    if query is None:
        if progress:
            progress("designing the " + ("schedule" if schedule else "query"))
        t_design = time.perf_counter()
        r = design_kway(mats, energy, error, starts=starts, seed=seed, schedule=schedule)
        design_seconds = time.perf_counter() - t_design
        if schedule:
            Q, w = np.array(r.schedule["queries"]), np.array(r.schedule["weights"])
        else:
            Q, w = np.array([r.query]), np.ones(1)
    else:
        design_seconds = None
        Q = load_queries(query, d)
        w = np.full(Q.shape[0], 1.0 / Q.shape[0]) if weights is None else \
            check_shares(weights, Q.shape[0])
    scores = [kway_scores_at(mats, x) for x in Q]
    law = KwayLaw.build([s[0] for s in scores], [s[1] for s in scores], w)
    counts = kway_counts(law, error)
    Dm = law.distance_matrix()
    D = float(min(Dm[i, j] for i in range(K) for j in range(i + 1, K)))
    logp = log_probs_at(mats, Q)
    rng = np.random.default_rng(seed)
    fixed = sequential = None
    if policy in ("all", "fixed") and counts["predicted"] is not None:
        if progress:
            progress("fixed n: Monte Carlo of the maximum-likelihood test")
        cache = {}

        def worst(N):
            if N not in cache:
                cache[N] = ml_errors_mc(logp, allocate(w, N), trials, np.random.default_rng(seed + N))
            return cache[N]
        lo, hi = max(counts["lower"], 1) - 1, counts["upper"]
        while hi - lo > 1:                      # invariant: lo fails (or 0), hi passes
            mid = (lo + hi) // 2
            if float(worst(mid).max()) <= error:
                hi = mid
            else:
                lo = mid
        at_pred = worst(counts["predicted"])
        fixed = {"empirical": hi, "predicted": counts["predicted"], "lower": counts["lower"],
                 "upper": counts["upper"], "error_at_predicted": float(at_pred.max()),
                 "worst_model": int(np.argmax(at_pred)),
                 "errors_at_empirical": worst(hi).tolist()}
    adaptive = None
    if counts["upper"] is not None:
        cap = max(20 * counts["upper"], 100)
        if policy in ("all", "sprt", "adaptive"):
            if progress:
                progress("matrix SPRT")
            sequential = _simulate_sprt(logp, w, sprt_threshold(K, error), trials, rng, cap=cap)
        if policy in ("all", "adaptive"):
            searches = K * (K - 1)
            cost = "" if design_seconds is None else \
                f"; each costs about what the design's search did ({design_seconds:.1f} s)"
            note(f"the adaptive rule runs {searches} more searches of the ball, argmax "
                 f"KL(P_k || P_j) for each ordered pair of the {K} models{cost}")
            extra = np.array(kl_queries(mats, energy, starts, seed, progress=progress))
            adaptive = adaptive_phase(np.concatenate([Q, extra]), logp + log_probs_at(mats, extra),
                                      sprt_threshold(K, error), trials, rng, cap, sequential)
            if policy == "adaptive":
                sequential = None
    return KwaySimulateResult("softmax", n, d, energy, error, names, trials, seed, Q.tolist(),
                              w.tolist(), D, fixed, sequential, time.perf_counter() - t0,
                              adaptive=adaptive)


def _simulate_sprt(logp, weights, threshold: float, trials: int, rng, cap: int) -> dict:
    """The matrix SPRT with the queries in fixed proportions (interleaved by _sequence)."""
    order = _sequence(weights, cap)
    out = matrix_sprt_runs(logp, lambda t, L: np.full(L.shape[0], order[t]), threshold, trials,
                           rng, cap)
    return {"mean_samples": out["mean_samples"], "error": out["error"], "threshold": threshold,
            "undecided": out["undecided"], "cap": cap}
