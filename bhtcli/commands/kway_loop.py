"""Closing the loop among K models: simulate the maximum-likelihood test and the matrix SPRT
(docs/kway.md, docs/maths.md §8.5), and sample the answers to a schedule; deciding from
observed answers is commands/decide.py's, for any K."""
from __future__ import annotations

import os
import time

import numpy as np

from bhtcli.commands.decide import load_queries, log_probs_at, sprt_threshold
from bhtcli.commands.kway import design_kway, load_models
from bhtcli.commands.sequential import adaptive_phase, kl_queries, matrix_sprt_runs
from bhtcli.commands.simulate import simulate_result
from bhtcli.errors import InputError, note, parameter_name
from bhtcli.io.load import load_matrix
from bhtcli.io.validation import check_count, check_seed
from bhtcli.maths.kway import KwayLaw, allocate, kway_counts
from bhtcli.models.answers import draw, model_log_probs
from bhtcli.models.kway import kway_scores_at


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
    cdf, out = np.cumsum(p), np.zeros((t, K))
    rows = max(1, DRAW_CELLS // c)
    for s in range(0, t, rows):
        out[s:s + rows] = lp.T[draw(cdf, (min(rows, t - s), c), rng)].sum(axis=1)
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


def simulate_kway(models, energy: float, options, *, trials: int, policy: tuple,
                  schedule: bool = False, query=None, weights=None, dtype: str = "float64",
                  progress=None):
    """Monte Carlo of naming the true one of K models: the maximum-likelihood test at fixed n
    (the empirical n for every error <= alpha, against the predicted count), the matrix SPRT
    (mean answers) with the designed query, the designed schedule, or given queries, and
    Chernoff's adaptive rule (sequential.py) with the same stop."""
    t0 = time.perf_counter()
    error, seed, starts = options.error, options.seed, options.starts
    mats, names = load_models(models)
    K, (n, d) = len(mats), mats[0].shape
    if query is None:
        if progress:
            progress("designing the " + ("schedule" if schedule else "query"))
        t_design = time.perf_counter()
        r = design_kway(mats, energy, options, dtype=dtype, schedule=schedule)
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
    if "fixed" in policy and counts["predicted"] is not None:
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
        if "sprt" in policy or "adaptive" in policy:
            if progress:
                progress("matrix SPRT")
            sequential = _simulate_sprt(logp, w, sprt_threshold(K, error), trials, rng, cap=cap)
        if "adaptive" in policy:
            searches = K * (K - 1)
            cost = "" if design_seconds is None else \
                f"; each costs about what the design's search did ({design_seconds:.1f} s)"
            note(f"the adaptive rule runs {searches} more searches of the ball, argmax "
                 f"KL(P_k || P_j) for each ordered pair of the {K} models{cost}")
            extra = np.array(kl_queries(mats, energy, starts, seed, progress=progress))
            adaptive = adaptive_phase(np.concatenate([Q, extra]), logp + log_probs_at(mats, extra),
                                      sprt_threshold(K, error), trials, rng, cap, sequential)
            if "sprt" not in policy:
                sequential = None
    return simulate_result("softmax", (n, d), energy, options, trials, t0, fixed=fixed,
                           adaptive=adaptive, models=names, queries=Q.tolist(), weights=w.tolist(),
                           bhattacharyya_distance=D, sequential=sequential)


def _simulate_sprt(logp, weights, threshold: float, trials: int, rng, cap: int) -> dict:
    """The matrix SPRT with the queries in fixed proportions (interleaved by _sequence)."""
    order = _sequence(weights, cap)
    out = matrix_sprt_runs(logp, lambda t, L: np.full(L.shape[0], order[t]), threshold, trials,
                           rng, cap)
    return {"mean_samples": out["mean_samples"], "error": out["error"], "threshold": threshold,
            "undecided": out["undecided"], "cap": cap}
