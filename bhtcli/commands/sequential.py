"""The sequential tests by Monte Carlo, vectorised over trials, for any number of models: one
stop rule (Wald's SPRT for two, the matrix SPRT for K; decide.py's sequential_stop) and
Chernoff's adaptive rule (docs/maths.md §3.6, §8.5).

Chernoff's rule for K models: after each answer the leader k (the model with the largest
log-likelihood so far) asks its next query from the mix λ^k over candidate queries that
maximises min_{j != k} Σ_q λ_q KL(P_k(x_q) || P_j(x_q)), a linear programme per model; the
first answer uses the simulated query. The candidates are the simulated queries (the design,
its schedule or the given ones) and, for every ordered pair (k, j), the query of the ball that
maximises KL(P_k || P_j) (the search `design` runs; kl_queries, which serves a pair's rule
too). The matrix SPRT stops: its error guarantee holds for adaptively chosen queries too.
"""
from __future__ import annotations

import time

import numpy as np

from bhtcli.models.answers import draw
from bhtcli.models.softmax import SoftmaxPair
from bhtcli.search.entry import maximize
from bhtcli.search.schedule import schedule_lp


def sequential_runs(steps: list, cdfs: list, threshold: float, trials: int, rng, cap: int,
                    choose=None, block: int = 1) -> list:
    """Monte Carlo of the sequential test under each true model k, vectorised over trials: it
    stops once the leader's log-likelihood leads every other model's by `threshold` (decide's
    sequential_stop: Wald's SPRT for two models, the matrix SPRT for K). steps[q] (n x K): what
    each answer to query q adds to the K log-likelihoods (a pair: [llr, 0]); cdfs[q][k]: model
    k's answer CDF there. choose(t, L): the query of answer t for the live trials (L, their
    log-likelihoods); None: query 0, answers drawn `block` at a time. Per true model: (answers
    used, the model named, -1 for a trial still running after `cap` answers)."""
    K = steps[0].shape[1]
    out = []
    for k in range(K):
        L = np.zeros((trials, K))
        stop, named = np.zeros(trials, dtype=np.int64), np.full(trials, -1)
        live, t = np.arange(trials), 0
        while live.size and t < cap:
            if choose is None:
                path = L[live, None] + np.cumsum(steps[0][draw(cdfs[0][k], (live.size, block), rng)],
                                                 axis=1)
            else:
                q, step = choose(t, L[live]), np.empty((live.size, K))
                for query in np.unique(q):
                    at = q == query
                    step[at] = steps[query][draw(cdfs[query][k], int(at.sum()), rng)]
                path = (L[live] + step)[:, None]
            top2 = np.sort(path, axis=2)[..., -2:]       # two models: |llr|, exactly
            margin = top2[..., 1] - top2[..., 0]
            hit = margin >= threshold
            done, first = hit.any(axis=1), np.argmax(hit, axis=1)
            stop[live[done]] = t + first[done] + 1
            named[live[done]] = np.argmax(path[done, first[done]], axis=1)
            L[live[~done]] = path[~done, -1]
            live, t = live[~done], t + path.shape[1]
        stop[live] = t
        out.append((stop, named))
    return out


def kl_matrices(logp: list) -> np.ndarray:
    """KL(P_k || P_j) at each query: an m x K x K array from the K x n log-probabilities of
    each query (P_k = exp of row k)."""
    out = []
    for L in logp:
        P = np.exp(L)
        out.append((P * L).sum(axis=1)[:, None] - P @ L.T)
    return np.maximum(np.array(out), 0.0)


def kl_queries(mats, energy: float, starts: int | None, seed: int, progress=None, *,
               readouts=None, dtype: str = "float64", method: str = "auto",
               max_starts: int | None = None) -> list:
    """For every ordered pair (k, j), the query of the ball that maximises KL(P_k || P_j);
    `progress` hears each search's number and an estimate of the time left. `readouts`: each
    model's link and bias (models/kway_readout.py KReadouts; a pair's: KReadouts.of_pair), the
    search of (k, j) under the read-out of that ordered pair, model k as A; the rest as for
    maximize."""
    K = len(mats)
    pairs = [(k, j) for k in range(K) for j in range(K) if j != k]
    out, t0 = [], time.perf_counter()
    for i, (k, j) in enumerate(pairs):
        if progress:
            left = "" if i == 0 else \
                f", ~{(time.perf_counter() - t0) / i * (len(pairs) - i):.0f} s left"
            progress(f"adaptive rule: search {i + 1} of {len(pairs)}, argmax KL(M{k + 1} || "
                     f"M{j + 1}){left}", i, len(pairs))
        ro = None if readouts is None else readouts.pair(k, j)
        out.append(maximize(SoftmaxPair(mats[k], mats[j], objective="kl", readout=ro, dtype=dtype),
                            energy, method, starts=starts, seed=seed, max_starts=max_starts).x)
    return out


def leader_mixes(kl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mixes, exponents): row k of mixes is the λ^k over the m queries that maximises
    min_{j != k} Σ_q λ_q KL_q(k || j); exponents[k] is that maximum."""
    m, K, _ = kl.shape
    mixes, exponents = np.zeros((K, m)), np.zeros(K)
    for k in range(K):
        others = [j for j in range(K) if j != k]
        value, w, _ = schedule_lp(kl[:, k, others].T)
        mixes[k], exponents[k] = w, value
    return mixes, exponents


def matrix_sprt_runs(logp: list, choose, threshold: float, trials: int, rng, cap: int) -> dict:
    """The matrix SPRT's Monte Carlo (sequential_runs) from each query's K x n
    log-probabilities, the query of every answer given by choose(t, L): mean answers, errors of
    the decided trials, undecided (still running after `cap`)."""
    runs = sequential_runs([lp.T for lp in logp], [np.cumsum(np.exp(lp), axis=1) for lp in logp],
                           threshold, trials, rng, cap, choose)
    decided = [named[named >= 0] for _, named in runs]
    return {"mean_samples": [float(stop.mean()) for stop, _ in runs],
            "error": [float(np.mean(d != k)) if d.size else 0.0 for k, d in enumerate(decided)],
            "undecided": sum(int((named < 0).sum()) for _, named in runs), "cap": cap}


def simulate_chernoff(logp: list, mixes: np.ndarray, first: int, threshold: float, trials: int,
                      rng, cap: int) -> dict:
    """The adaptive rule: answer 0 to query `first`, then each to a query drawn from row k of
    `mixes` (K x m) while model k leads."""
    cum_mix = np.cumsum(mixes, axis=1)
    cum_mix[:, -1] = np.inf

    def choose(t, L):
        if t == 0:
            return np.full(L.shape[0], first)
        leader = np.argmax(L, axis=1)
        return np.argmax(rng.uniform(size=L.shape[0])[:, None] < cum_mix[leader], axis=1)
    return matrix_sprt_runs(logp, choose, threshold, trials, rng, cap)


def adaptive_phase(candidates: np.ndarray, logp: list, threshold: float, trials: int, rng,
                   cap: int, sequential: dict | None) -> dict:
    """Each leader's mix over the candidate queries (the simulated ones first, then those of
    kl_queries; `logp` their K x n log-probabilities) and the Monte Carlo; `sequential` (the
    matrix SPRT with the simulated queries, if run) gives `saving_vs_sprt`."""
    mixes, exponents = leader_mixes(kl_matrices(logp))
    used = np.flatnonzero(mixes.max(axis=0) > 0)
    if 0 not in used:                   # the first answer's query stays a candidate
        used = np.concatenate([[0], used])
    mixes = mixes[:, used] / mixes[:, used].sum(axis=1, keepdims=True)
    out = simulate_chernoff([logp[q] for q in used], mixes, 0, threshold, trials, rng, cap)
    out.update(threshold=threshold, queries=candidates[used].tolist(), mixes=mixes.tolist(),
               exponents=exponents.tolist(),
               mean_samples_predicted=[threshold / e if e > 0 else None for e in exponents])
    if sequential is not None:
        out["saving_vs_sprt"] = float(np.mean([1 - a / s for a, s in
                                              zip(out["mean_samples"], sequential["mean_samples"])]))
    return out
