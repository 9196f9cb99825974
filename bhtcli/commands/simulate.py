"""`simulate`: how many queries it really takes, for a fixed n, Wald's SPRT and Chernoff's
adaptive rule, by Monte Carlo vectorised over trials (docs/maths.md §3.6), for two models or K
(one driver; K models: _kway_setup, with the maximum-likelihood test at fixed n and the matrix
SPRT, docs/kway.md). For a pair:

- fixed: for each n, T trials under A and T under B give the log-likelihood-ratio sums S_n
  (paths of answers drawn by inverse CDF, cumulative sums, read at the n of a grid); the
  best threshold test (randomised at the threshold, the one minimising the larger error) has
  an empirical max error e(n); `empirical` is the smallest n with e(n) <= alpha and
  `interval` the n where e(n) -+ 1.96 se(n) first falls below alpha.
- sprt: thresholds +-ln((1-alpha)/alpha), one query; answers are drawn in blocks and the first
  crossing found per trial.
- adaptive: Chernoff (1959): while A is at least as likely, ask x_A = argmax KL(P_A||P_B),
  else x_B = argmax KL(P_B||P_A) (both designed by the same engine and budget); SPRT stopping.
"""
from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np

from bhtcli.models.answers import AnswerLaw, draw
from bhtcli.commands.design import design
from bhtcli.commands.report import report_for_query
from bhtcli.commands.sequential import kl_queries, sequential_runs
from bhtcli.results import SimulateResult
from bhtcli.errors import InputError, note, parameter_name
from bhtcli.io.load import load_pair, load_query
from bhtcli.search.entry import maximize
from bhtcli.maths.counts import LATTICE_MAX_N, LatticeTest, Saddlepoint
from bhtcli.models.kway_readout import KReadouts
from bhtcli.models.spec import DesignOptions, ModelSpec

POLICIES = ("fixed", "sprt", "adaptive")
MAX_SEQUENTIAL_STEPS = 10_000_000


def empirical_minimax(SA: np.ndarray, SB: np.ndarray):
    """(error, standard error) of the best randomised threshold test on samples SA (A true)
    and SB (B true) of the LLR sum: decide A iff S > tau, randomise at S = tau."""
    SA, SB = np.sort(np.round(SA, 10)), np.sort(np.round(SB, 10))
    taus = np.unique(np.concatenate([SA, SB]))
    ta, tb = len(SA), len(SB)
    lt_a = np.searchsorted(SA, taus, "left") / ta
    eq_a = np.searchsorted(SA, taus, "right") / ta - lt_a
    gt_b = 1.0 - np.searchsorted(SB, taus, "right") / tb
    eq_b = 1.0 - np.searchsorted(SB, taus, "left") / tb - gt_b
    denom = eq_a + eq_b
    g = np.clip((gt_b + eq_b - lt_a) / np.where(denom > 0, denom, 1.0), 0.0, 1.0)
    g = np.where(denom > 0, g, 0.0)
    e1, e2 = lt_a + g * eq_a, gt_b + (1 - g) * eq_b
    err = np.maximum(e1, e2)
    j = int(np.argmin(err))
    se = math.sqrt(max(e1[j] * (1 - e1[j]) / ta, e2[j] * (1 - e2[j]) / tb))
    return float(err[j]), se


def _llr_sums(law: AnswerLaw, model: str, grid: np.ndarray, trials: int, rng, chunk_cells=4_000_000):
    """S_n for every n in `grid` (sorted) and every trial, model `model` true."""
    cdf, llr = law.cdf(model), law.llr
    n_max = int(grid[-1])
    out = np.empty((trials, len(grid)))
    rows = max(1, chunk_cells // n_max)
    for s in range(0, trials, rows):
        k = min(rows, trials - s)
        steps = np.cumsum(llr[draw(cdf, (k, n_max), rng)], axis=1)
        out[s:s + k] = steps[:, grid - 1]
    return out


def _fixed_grid(lo: int, hi: int, points: int = 160) -> np.ndarray:
    if hi - lo + 1 <= points:
        return np.arange(lo, hi + 1)
    g = np.unique(np.rint(np.geomspace(lo, hi, points)).astype(np.int64))
    return g


PATH_DRAWS = 40_000_000     # above this many draws per model, fixed n uses multinomial counts


def simulate_fixed(law: AnswerLaw, alpha: float, counts: dict, trials: int, rng, progress=None):
    """Empirical smallest n for the best fixed-n test (see module docstring).

    Small n: answer paths (every n on a grid, refined to single n around the crossing).
    Large n (trials * n above PATH_DRAWS): multinomial answer counts, whose cost does not grow
    with n, at 12 values of n around the prediction; the crossing is interpolated in log error.
    """
    hi = int(max(counts["upper"], counts["predicted"]) * 1.3) + 2
    if trials * hi > PATH_DRAWS:
        return _fixed_by_counts(law, alpha, counts, trials, rng)
    grid = _fixed_grid(1, hi)
    errs, ses = _errors_on(law, grid, trials, rng)
    first = _first_below(errs, alpha)
    if first is None:
        return None, grid, errs, ses
    if first > 0 and grid[first] > grid[first - 1] + 1:       # refine the bracket
        fine = _fixed_grid(int(grid[first - 1]) + 1, int(grid[first]), points=400)
        e2, s2 = _errors_on(law, fine, trials, rng)
        grid = np.concatenate([grid[:first], fine, grid[first + 1:]])
        errs = np.concatenate([errs[:first], e2, errs[first + 1:]])
        ses = np.concatenate([ses[:first], s2, ses[first + 1:]])
    k = _first_below(errs, alpha)
    k_lo = _first_below(errs - 1.96 * ses, alpha)
    k_hi = _first_below(errs + 1.96 * ses, alpha)
    result = {"empirical": int(grid[k]),
              "interval": [int(grid[k_lo]), int(grid[k_hi]) if k_hi is not None else None],
              "predicted": counts["predicted"], "lower": counts["lower"], "upper": counts["upper"],
              "method": "paths"}
    return result, grid, errs, ses


def _fixed_by_counts(law: AnswerLaw, alpha: float, counts: dict, trials: int, rng, points: int = 12):
    pred = counts["predicted"]
    grid = np.unique(np.rint(np.geomspace(0.6 * pred, 1.6 * pred, points)).astype(np.int64))
    p_a, p_b = np.exp(law.log_pa), np.exp(law.log_pb)
    p_a, p_b = p_a / p_a.sum(), p_b / p_b.sum()
    llr = law.llr
    SA = np.zeros(trials)
    SB = np.zeros(trials)
    errs, ses, prev = [], [], 0
    for m in grid:                      # nested sums: S at the next n adds the answers between
        step = int(m - prev)
        SA = SA + rng.multinomial(step, p_a, size=trials).astype(np.float64) @ llr
        SB = SB + rng.multinomial(step, p_b, size=trials).astype(np.float64) @ llr
        e, se = empirical_minimax(SA, SB)
        errs.append(e)
        ses.append(se)
        prev = m
    errs, ses = np.array(errs), np.array(ses)

    def crossing(values):
        k = _first_below(values, alpha)
        if k is None:
            return None
        if k == 0:
            return int(grid[0])
        y0, y1 = math.log(max(values[k - 1], 1e-300)), math.log(max(values[k], 1e-300))
        t = (y0 - math.log(alpha)) / (y0 - y1) if y0 != y1 else 1.0
        return int(math.ceil(grid[k - 1] + t * (grid[k] - grid[k - 1])))

    result = {"empirical": crossing(errs),
              "interval": [crossing(errs - 1.96 * ses), crossing(errs + 1.96 * ses)],
              "predicted": pred, "lower": counts["lower"], "upper": counts["upper"],
              "method": "multinomial counts, interpolated"}
    return result, grid, errs, ses


def _errors_on(law, grid, trials, rng):
    SA = _llr_sums(law, "A", grid, trials, rng)
    SB = _llr_sums(law, "B", grid, trials, rng)
    pairs = [empirical_minimax(SA[:, j], SB[:, j]) for j in range(len(grid))]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _first_below(values, alpha):
    hit = np.flatnonzero(values <= alpha)
    return int(hit[0]) if hit.size else None


def _pair_runs(laws, alpha: float, trials: int, rng, **how) -> dict:
    """Wald's SPRT (thresholds +-ln((1 - alpha)/alpha)) with the queries of `laws` (one; or
    Chernoff's x_A while llr >= 0, x_B otherwise: `how` has its choose), per true model:
    samples used and errors (an undecided trial counts as an error under A)."""
    (ua, na), (ub, nb) = sequential_runs(
        [np.column_stack([law.llr, np.zeros(law.llr.size)]) for law in laws],
        [[law.cdf("A"), law.cdf("B")] for law in laws], math.log((1 - alpha) / alpha), trials,
        rng, MAX_SEQUENTIAL_STEPS, **how)
    return {"mean_samples_a": float(ua.mean()), "mean_samples_b": float(ub.mean()),
            "p95_samples_a": int(np.percentile(ua, 95, method="higher")),
            "p95_samples_b": int(np.percentile(ub, 95, method="higher")),
            "error_a": float(np.mean(na != 0)), "error_b": float(np.mean(nb == 0)),
            "undecided": int((na < 0).sum() + (nb < 0).sum())}


def simulate(models, spec: ModelSpec, options: DesignOptions = DesignOptions(), *, query=None,
             trials: int = 10_000, policy: tuple = POLICIES, predicted_points: int = 0,
             progress=None, schedule: bool = False, weights=None) -> SimulateResult:
    """Monte Carlo of the fixed-n test, the sequential test and Chernoff's adaptive rule, for
    `models` [A, B] (see the module docstring) or K models (K >= 3, or two with `schedule` or
    `weights`: _kway_setup).

    `spec`: the model family with its budget (leverage: the box c <= s_i^2 <= C and a query s
    of length n); `options`: the target error, and the starts and seed of the designed query.
    Without `query` the query (K models: or the schedule) is designed first (the search
    `design` runs); the adaptive rule's KL queries use the same search. `trials` and `policy`
    as check_trials and check_policy return them. predicted_points > 0 adds the predicted error
    curve at that many n to `curve` (for plots). `weights`: the shares of K models' given queries.
    """
    t0 = time.perf_counter()
    phases = ((query is None) + ("fixed" in policy) + ("sprt" in policy or "adaptive" in policy)
              + 2 * ("adaptive" in policy))
    done = [0]

    def say(message):                 # one step of the progress bar per phase
        if progress:
            progress(message, done[0], phases)
        done[0] += 1
    kway = len(models) > 2 or schedule or weights is not None
    if kway:
        header, run = _kway_setup(models, spec, options, query, say, trials, progress, schedule,
                                  weights, predicted_points)
    else:
        header, run = _pair_setup(*load_pair(*models), spec, options, query, say, trials,
                                  predicted_points)
    rng = np.random.default_rng(options.seed)
    fixed = sequential = adaptive = curve = None
    if run and "fixed" in policy:
        say(f"fixed n: {trials:,} trials per model")
        fixed, curve = run[0](rng)
    if run and ("sprt" in policy or "adaptive" in policy):
        say(f"sequential test: {trials:,} trials per model")
        sequential = run[1](rng)
    if run and "adaptive" in policy:
        adaptive = run[2](rng, sequential)
        sequential = sequential if "sprt" in policy else None
    say("done")
    return SimulateResult(spec.family, *header.pop("shape"), spec.energy, options.error, trials,
                          options.seed, seconds=time.perf_counter() - t0, fixed=fixed,
                          adaptive=adaptive, curve=curve,
                          **{"sequential" if kway else "sprt": sequential}, **header)


def _pair_setup(A, B, spec, options, query, say, trials, predicted_points):
    """A pair's result keys and its three phases, fixed(rng), sprt(rng) and adaptive(rng, sprt)
    (None when nothing can be simulated: the keys say why)."""
    setup = _leverage_setup if spec.leverage else _softmax_setup
    r, law, x, queries_for_kl = setup(A, B, spec, options, query, say)
    header = dict(shape=A.shape, query=x.tolist(), hellinger_squared=r.hellinger_squared,
                  floor=spec.floor)           # floor: leverage
    if not r.distinguishable or r.samples["predicted"] is None:
        why = (r.note or "H^2 = 0 at this query") + ": no number of queries tells them apart"
        return header | dict(distinguishable=False, note=why + ", so nothing is simulated"), None
    if r.samples["upper"] > 2_000_000:        # too many answers per trial
        raise InputError(f"this query needs up to {r.samples['upper']:,} answers per trial; "
                         f"simulating that is out of reach here (raise {parameter_name('energy')})")
    error = options.error

    def fixed(rng):                 # the fixed-n experiment and its error curve (maths.md §3.6)
        result, grid, errs, ses = simulate_fixed(law, error, r.samples, trials, rng)
        curve = {"n": grid.tolist(), "error": errs.tolist(), "standard_error": ses.tolist()}
        if predicted_points:
            ns = np.unique(np.linspace(1, grid[-1], predicted_points).astype(int))
            curve.update(predicted_n=ns.tolist(), predicted_error=predicted_curve(law, ns))
        return result, curve

    def sprt(rng):                  # Wald's SPRT with the query, and Wald's lower bounds (§3.5)
        a = math.log((1 - error) / error)
        wald = lambda kl: (1 - 2 * error) * a / kl if kl > 0 else None
        return _pair_runs([law], error, trials, rng, block=256) | dict(
            wald_lower_a=wald(r.kl_ab), wald_lower_b=wald(r.kl_ba),
            mean_samples_lower_sequential=r.certificate["mean_samples_lower_sequential"])

    def adaptive(rng, sprt):        # Chernoff's rule, against the SPRT with one query
        say("adaptive: designing argmax KL(P_A||P_B) and argmax KL(P_B||P_A)")
        x_a, x_b, law_a, law_b = queries_for_kl()
        say(f"adaptive: {trials:,} trials per model")
        out = _pair_runs([law_a, law_b], error, trials, rng,
                         choose=lambda t, L: (L[:, 0] < L[:, 1]).astype(np.int64))
        saving = 0.5 * ((1 - out["mean_samples_a"] / sprt["mean_samples_a"])
                        + (1 - out["mean_samples_b"] / sprt["mean_samples_b"]))
        return out | dict(saving_vs_sprt=saving, query_a=x_a.tolist(), query_b=x_b.tolist())
    return header, (fixed, sprt, adaptive)


def _kway_setup(models, spec, options, query, say, trials, progress, schedule, weights,
                predicted_points=0):
    """K models' result keys and phases (as _pair_setup's): the maximum-likelihood test at fixed
    n (the empirical n for every error <= alpha, against the predicted count), the matrix SPRT
    with the designed query, the designed schedule or given queries (interleaved by
    kway_loop's interleave), and Chernoff's adaptive rule (sequential.py) with the same stop."""
    from bhtcli.commands.decide import check_prior, load_queries, log_probs_at, sprt_threshold
    from bhtcli.commands.kway import design_kway, load_models, readout_of
    from bhtcli.commands.kway_loop import interleave
    from bhtcli.commands.sequential import adaptive_phase, matrix_sprt_runs
    from bhtcli.maths.kway import KwayLaw, allocate, kway_counts
    from bhtcli.maths.scalar import first_passing
    from bhtcli.models.kway import kway_scores_at
    error, seed, energy = options.error, options.seed, spec.energy
    mats, names = load_models(models)
    K, design_seconds = len(mats), None
    readouts = None if spec.links is None else spec.kway_readouts(mats[0].shape[0])
    if query is None:
        say("designing the " + ("schedule" if schedule else "query"))
        t_design = time.perf_counter()
        r = design_kway(mats, energy, options, dtype=spec.dtype, schedule=schedule,
                        spec=None if readouts is None else spec)
        design_seconds = time.perf_counter() - t_design
        Q, w = ((np.array(r.schedule["queries"]), np.array(r.schedule["weights"])) if schedule
                else (np.array([r.query]), np.ones(1)))
    else:
        Q = load_queries(query, mats[0].shape[1])
        w = check_prior(weights, Q.shape[0], "weights", "query")
    law = KwayLaw.build(*zip(*(kway_scores_at(mats, x) for x in Q)), w, readouts)
    counts, Dm = kway_counts(law, error), law.distance_matrix()
    logp = log_probs_at(mats, Q, readouts)
    header = dict(shape=mats[0].shape, models=names, queries=Q.tolist(), weights=w.tolist(),
                  bhattacharyya_distance=float(Dm[np.triu_indices(K, 1)].min()),
                  readout=readout_of(readouts))
    if counts["upper"] is None:               # all of the counts are None: D = 0
        return header, None
    cap, threshold = max(20 * counts["upper"], 100), sprt_threshold(K, error)

    def fixed(rng):                     # each N its own seed: the same draws however reached
        worst = lru_cache(None)(lambda N: ml_errors_mc(logp, allocate(w, N), trials,
                                                        np.random.default_rng(seed + N)))
        hi = first_passing(lambda N: float(worst(N).max()) <= error, max(counts["lower"], 1) - 1,
                           counts["upper"])
        at_pred = worst(counts["predicted"])
        return {"empirical": hi, "predicted": counts["predicted"], "lower": counts["lower"],
                "upper": counts["upper"], "error_at_predicted": float(at_pred.max()),
                "worst_model": int(np.argmax(at_pred)),
                "errors_at_empirical": worst(hi).tolist()}, \
            _kway_curve(worst, law, hi, counts, trials, predicted_points) if predicted_points else None

    def sprt(rng):
        order = interleave(w, cap)
        out = matrix_sprt_runs(logp, lambda t, L: np.full(L.shape[0], order[t]), threshold,
                               trials, rng, cap)
        return {"mean_samples": out["mean_samples"], "error": out["error"], "threshold": threshold,
                "undecided": out["undecided"], "cap": cap}

    def adaptive(rng, sequential):
        cost = "" if design_seconds is None else \
            f"; each costs about what the design's search did ({design_seconds:.1f} s)"
        note(f"the adaptive rule runs {K * (K - 1)} more searches of the ball, argmax "
             f"KL(P_k || P_j) for each ordered pair of the {K} models{cost}")
        say("adaptive: designing argmax KL(P_k||P_j) for each ordered pair")
        extra = np.array(kl_queries(mats, energy, options.starts, seed, progress=progress,
                                    readouts=readouts, dtype=spec.dtype))
        say(f"adaptive: {trials:,} trials per model")
        return adaptive_phase(np.concatenate([Q, extra]), logp + log_probs_at(mats, extra, readouts),
                              threshold, trials, rng, cap, sequential)
    return header, (fixed, sprt, adaptive)


def _kway_curve(worst, law, empirical: int, counts: dict, trials: int, points: int,
                grid_points: int = 24) -> dict:
    """The curve of K models for plots, as a pair's: the largest error over the models of the
    maximum-likelihood test at each n of a grid up to 1.3 x the largest of the empirical, the
    predicted and the upper count (Monte Carlo, `worst(n)`: each n its own seed), its standard error
    (the worst model's), and the predicted largest error (the saddlepoint-copula of
    docs/maths.md §8.5) at `points` n."""
    top = int(1.3 * max(empirical, counts["predicted"], counts["upper"])) + 2
    grid = np.unique(np.rint(np.geomspace(1, top, grid_points)).astype(np.int64))
    grid = np.union1d(grid, [empirical, counts["predicted"]])
    errs = np.array([float(worst(int(N)).max()) for N in grid])
    ns = np.unique(np.linspace(1, top, points).astype(int))
    return {"n": grid.tolist(), "error": errs.tolist(),
            "standard_error": np.sqrt(errs * (1 - errs) / trials).tolist(),
            "predicted_n": ns.tolist(),
            "predicted_error": [float(law.ml_errors(float(N)).max()) for N in ns]}


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


def check_trials(trials) -> int:
    if isinstance(trials, bool) or int(trials) != trials or trials < 100:
        raise InputError(f"{parameter_name('trials')} must be a whole number >= 100, got {trials!r}")
    return int(trials)


def check_policy(policy) -> tuple:
    if policy not in POLICIES + ("all",):
        raise InputError(f"{parameter_name('policy')} must be one of fixed, sprt, adaptive, all; got {policy!r}")
    return POLICIES if policy == "all" else (policy,)


def _softmax_setup(A, B, spec, options, query, say):
    energy, starts, seed, dtype = spec.energy, options.starts, options.seed, spec.dtype
    readout = spec.readout(A.shape[0])
    if query is None:
        say("designing the query")
        r = design(A, B, spec, options)
        x = np.array(r.query)
    else:
        x = load_query(query, A.shape[1])
        if np.linalg.norm(x) > energy * (1 + 1e-9):
            raise InputError(f"the query has norm {np.linalg.norm(x):.6g} > {parameter_name('energy')} {energy:g}; "
                             "give the budget it was designed for")
        r = report_for_query(A, B, x, spec, options.error)

    def queries_for_kl():
        x_a, x_b = kl_queries([A, B], energy, starts, seed, readouts=KReadouts.of_pair(readout),
                              dtype=dtype,
                              method="auto" if options.fixed_starts is None else "full",
                              max_starts=options.max_starts)
        return x_a, x_b, AnswerLaw.at(A, B, x_a, readout), AnswerLaw.at(A, B, x_b, readout)

    return r, AnswerLaw.at(A, B, x, readout), x, queries_for_kl


def _leverage_setup(A, B, spec, options, query, say):
    from bhtcli.models.answers import answer_law
    from bhtcli.models.leverage import LeveragePair
    from bhtcli.commands.leverage_design import design_leverage, leverage_report_for_query
    from bhtcli.search.box import default_starts
    ceiling, floor, error, seed = spec.energy, spec.floor, options.error, options.seed
    starts = default_starts(*A.shape) if options.starts is None else options.starts
    spec = ModelSpec.build("leverage", ceiling, floor)
    if query is None:
        say("designing the query")
        r = design_leverage(A, B, spec, DesignOptions(error, starts, seed))
    else:
        r = leverage_report_for_query(A, B, query, spec, error)
    s = np.array(r.query)
    lo, hi = -math.log(ceiling), -math.log(floor)

    def queries_for_kl():
        th_a = maximize(LeveragePair(A, B), hi, "box", box=(lo, hi), starts=starts, seed=seed, objective="kl").x
        th_b = maximize(LeveragePair(B, A), hi, "box", box=(lo, hi), starts=starts, seed=seed, objective="kl").x
        s_a, s_b = np.exp(-0.5 * th_a), np.exp(-0.5 * th_b)
        return s_a, s_b, answer_law(A, B, s_a, "leverage"), answer_law(A, B, s_b, "leverage")

    return r, answer_law(A, B, s, "leverage"), s, queries_for_kl


def predicted_curve(law: AnswerLaw, ns) -> list:
    """Minimax error of the randomised LR test at each n: exact lattice value up to
    LATTICE_MAX_N, saddlepoint beyond (what `predicted` is computed from)."""
    from bhtcli.models.leverage import tilt_of
    tilt = tilt_of(law.log_pa, law.log_pb)
    test = LatticeTest(law.llr, np.exp(law.log_pa), np.exp(law.log_pb))
    saddle = Saddlepoint(tilt)
    return [test.minimax_error(int(m)) if m <= LATTICE_MAX_N
            else math.exp(saddle.minimax_log_error(float(m))) for m in ns]
