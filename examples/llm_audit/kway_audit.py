"""K models: which of A (the GGUF as shipped), B and C (every quantized tensor re-encoded as
Q8_0 and as Q5_0) answers, from sampled next tokens (docs/llm_audit.md, "Three models").

Naming the true one of K models with every error <= alpha needs every pair told apart, so a
prompt is as good as its bottleneck: the smallest Bhattacharyya distance D_ij among the pairs'
next-token laws there (docs/kway.md). A schedule sends prompts in fixed proportions w_l; the
pairs' exponents add, D_ij = sum_l w_l D_ij(p_l), and the best schedule over candidate
prompts is a linear programme in w.

The laws as models. For prompts p_1 .. p_m let L_k = [W_k h_k(p_1), ..., W_k h_k(p_m)]
(n x m, float64 logits of model k). The unit query e_l gives softmax(L_k e_l), model k's
next-token law at p_l, exactly: this is the block form (M_k = W_k in block k of an n x Kd
matrix, x = [h_A; h_B; h_C]) multiplied out once. bht's K-way code then runs on n x m
matrices instead of three n x 3d ones (1.1 GB each in float64 here): the pairs' D by bht's
cancellation-free formula (`bhtcli.maths.divergences.bhattacharyya_weights` of the pair's
midpoint and difference logits, as `bhtcli.models.kway.KModels.pair_distances` computes
them), the counts by `bhtcli.maths.kway` (KwayLaw, kway_counts), the schedule by
`bhtcli.search.kway.schedule_lp`, the Monte Carlo by `bhtcli.commands.kway_loop`
(simulate_kway at fixed n on the laws, ml_errors_mc for the interval).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

ALPHA = 0.05


def pairs_of(K: int) -> list:
    """The pairs (i, j), i < j, in bht's order (KModels.pairs)."""
    return list(itertools.combinations(range(K), 2))


def logits(heads, states) -> list:
    """L_k = W_k H_k^T in float64, n x m, for heads[k] (n x d, float64) and states[k] (m x d)."""
    return [W @ np.asarray(H, dtype=np.float64).T for W, H in zip(heads, states)]


def pair_distances(L) -> np.ndarray:
    """P x m: D_ij at every prompt (column) for every pair of the laws softmax(L_k[:, l]),
    in the order of pairs_of(K)."""
    from bhtcli.maths.divergences import bhattacharyya_weights
    pairs = pairs_of(len(L))
    out = np.empty((len(pairs), L[0].shape[1]))
    for p, (i, j) in enumerate(pairs):
        out[p] = np.maximum(bhattacharyya_weights(0.5 * (L[i] + L[j]), L[i] - L[j])[0], 0.0)
    return out


def kway_law(L, weights):
    """bht's KwayLaw of the K laws at the columns of L used in proportions `weights`."""
    from bhtcli.maths.kway import KwayLaw
    m = L[0].shape[1]
    r_list = [L[0][:, l] for l in range(m)]
    deltas_list = [[Lk[:, l] - L[0][:, l] for Lk in L] for l in range(m)]
    return KwayLaw.build(r_list, deltas_list, weights)


def counts(L, weights, alpha: float = ALPHA) -> dict:
    """{lower, predicted, upper, method}: answers that name the true model, every error <= alpha."""
    from bhtcli.maths.kway import kway_counts
    return kway_counts(kway_law(L, weights), alpha)


def schedule(D: np.ndarray) -> dict:
    """The best mix of the candidate prompts (columns of the P x m matrix D): bht's schedule
    programme max_w min_p sum_l w_l D[p, l] over the simplex."""
    from bhtcli.search.kway import schedule_lp
    value, w, lam = schedule_lp(D)
    used = np.flatnonzero(w > 1e-9)
    w_used = w[used] / w[used].sum()
    return {"columns": used.tolist(), "weights": w_used.tolist(),
            "bottleneck_d": float(np.min(D[:, used] @ w_used)), "lp_value": value,
            "pair_duals": lam.tolist()}


def first_below(grid, values, alpha: float):
    k = np.flatnonzero(np.asarray(values) <= alpha)
    return int(grid[k[0]]) if k.size else None


def simulate(L, weights, trials: int, seed: int, alpha: float = ALPHA, points: int = 60) -> dict:
    """bht's K-way Monte Carlo on the exact laws: simulate_kway at fixed n (the maximum-likelihood
    test, every error <= alpha) with the unit queries e_l in the proportions `weights`, and the
    95% interval of the empirical n: the first n on a grid where e(n) -+ 1.96 se(n) falls to
    alpha, e(n) the largest of the K errors (ml_errors_mc, seeded per n as simulate_kway is)."""
    from bhtcli.commands.kway_loop import log_probs_at, ml_errors_mc, simulate_kway
    from bhtcli.maths.kway import allocate
    m = L[0].shape[1]
    w = np.asarray(weights, dtype=np.float64)
    Q = np.eye(m)
    fixed = simulate_kway(L, 1.0, error=alpha, trials=trials, seed=seed, query=Q, weights=w,
                          policy="fixed").fixed
    if fixed is None:
        return {"empirical": None, "interval": [None, None]}
    logp = log_probs_at(L, Q)
    lo = max(1, fixed["lower"] // 2)
    hi = max(lo + 1, 2 * max(fixed["empirical"], fixed["predicted"]))
    grid = np.unique(np.rint(np.geomspace(lo, hi, points)).astype(np.int64))
    e = np.array([float(ml_errors_mc(logp, allocate(w, int(N)), trials,
                                     np.random.default_rng(seed + int(N))).max()) for N in grid])
    se = np.sqrt(e * (1 - e) / trials)
    return {"empirical": fixed["empirical"],
            "interval": [first_below(grid, e - 1.96 * se, alpha), first_below(grid, e + 1.96 * se, alpha)],
            "predicted": fixed["predicted"], "error_at_predicted": fixed["error_at_predicted"],
            "worst_model": fixed["worst_model"]}


class KwayScorer:
    """Scores prompts for K models by their bottleneck D and keeps every scored prompt (its ids,
    its pairs' D and its K hidden states) as a candidate column of the schedule."""

    def __init__(self, heads, states_of, top: int, chunk: int = 128):
        self.heads = heads            # K float64 heads, n x d
        self.states_of = states_of    # prompts -> list of K (m x d) hidden states
        self.top = top
        self.chunk = chunk
        self.ids: list = []
        self.D = np.zeros((len(pairs_of(len(heads))), 0))
        self.H: list = [np.zeros((0, heads[0].shape[1]), np.float32) for _ in heads]
        self.passes = 0               # prompts through all K models

    def add(self, prompts, states) -> np.ndarray:
        """Record prompts whose K hidden states are known; their P x m pair distances."""
        cols = []
        for s in range(0, len(prompts), self.chunk):
            cols.append(pair_distances(logits(self.heads, [H[s:s + self.chunk] for H in states])))
        D = np.concatenate(cols, axis=1)
        self.ids += [list(p) for p in prompts]
        self.D = np.concatenate([self.D, D], axis=1)
        self.H = [np.concatenate([a, np.asarray(b, np.float32)]) for a, b in zip(self.H, states)]
        return D

    def score(self, prompts):
        """beam_search's score: [(index in the batch, bottleneck D)], best first."""
        self.passes += len(prompts)
        b = self.add(prompts, self.states_of(prompts)).min(axis=0)
        order = np.argsort(-b, kind="stable")[:self.top]
        return [(int(i), float(b[i])) for i in order]

    def laws(self, columns) -> list:
        """L_k at the given candidate columns (n x len(columns) each)."""
        return logits(self.heads, [H[columns] for H in self.H])


def pair_table(D_col, names) -> list:
    """Per pair at one prompt (or schedule): D, H^2 = 1 - exp(-D)."""
    return [{"pair": f"{names[i]}-{names[j]}", "bhattacharyya_distance": float(d),
             "hellinger_squared": float(-math.expm1(-d))}
            for (i, j), d in zip(pairs_of(len(names)), D_col)]


def bottleneck_record(D_col, names) -> dict:
    p = int(np.argmin(D_col))
    i, j = pairs_of(len(names))[p]
    return {"bottleneck_pair": f"{names[i]}-{names[j]}", "bottleneck_d": float(D_col[p]),
            "bottleneck_hellinger_squared": float(-math.expm1(-D_col[p])),
            "pairs": pair_table(D_col, names)}


def record(D_col, ids, decode, cnt: dict, sim: dict | None, names) -> dict:
    out = {"text": decode(ids), "token_ids": [int(i) for i in ids]}
    out |= bottleneck_record(D_col, names)
    out |= {k: cnt[k] for k in ("lower", "predicted", "upper")}
    if sim is not None:
        out |= {"empirical": sim["empirical"], "interval": sim["interval"]}
    return out


def run_kway(pair, natural_ids, natural_ab, pair_beam, *, budget: int, beam: int, per_round: int,
             trials: int, seed: int, pool, energy: float, names=("A", "B", "C"),
             natural_d_ab=None, natural_top: int | None = None, check_ids=None,
             out_dir=None, progress=None) -> dict:
    """The K-way audit of `pair` (an audit.Pair with a third model C): the natural prompts
    scored by their bottleneck, a prompt search for the bottleneck from the best of them and
    the pair search's beam `pair_beam`, the best schedule over every scored prompt, the counts
    and the Monte Carlo at the best single prompts and the schedule, the head-only design.

    natural_ab = [H_A, H_B], the natural prompts' hidden states already computed. With
    natural_d_ab (D between A and B at every natural prompt, from the pair audit) and
    natural_top, only the natural_top prompts of largest D_AB go through C: the bottleneck is
    at most D_AB, so the best natural prompt is the best of all of them whenever its
    bottleneck exceeds D_AB of every prompt left out (`exact` says whether it does)."""
    import time

    from search import beam_search

    say = progress or (lambda msg: None)
    seconds = {}
    t0 = time.perf_counter()
    heads = [pair.A.head.astype(np.float64)]
    heads.append(heads[0] if pair.head_identical else pair.B.head.astype(np.float64))
    heads.append(pair.C.head.astype(np.float64))
    scorer = KwayScorer(heads, lambda ps: pair.hidden_of("ABC", ps), top=max(beam, 10))
    total_nat = len(natural_ids)
    left_out = 0.0
    if natural_d_ab is not None and natural_top is not None and natural_top < total_nat:
        order = np.argsort(-np.asarray(natural_d_ab), kind="stable")
        keep, rest = np.sort(order[:natural_top]), order[natural_top:]
        left_out = float(np.asarray(natural_d_ab)[rest].max())
        natural_ids = [natural_ids[i] for i in keep]
        natural_ab = [H[keep] for H in natural_ab]
    say(f"K = 3: forward passes of C over {len(natural_ids):,} of the {total_nat:,} natural prompts")
    hC = pair.hidden_of("C", natural_ids)[0]
    D_nat = scorer.add(natural_ids, [natural_ab[0], natural_ab[1], hC])
    m_nat = len(natural_ids)
    b_nat = D_nat.min(axis=0)
    seconds["natural"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    known = {tuple(p) for p in natural_ids}
    extra = [list(p) for p in pair_beam if tuple(p) not in known]
    if extra:
        scorer.score(extra)
    top_nat = np.argsort(-b_nat, kind="stable")[:beam]
    start = [(float(b_nat[i]), natural_ids[i]) for i in top_nat]
    start += [(float(scorer.D[:, m_nat + k].min()), ids) for k, ids in enumerate(extra)]
    res = beam_search(start, scorer.score, budget=budget, pool=pool, beam=beam,
                      per_round=per_round, next_tokens=pair.next_tokens, roundtrip=pair.roundtrip,
                      seed=seed, progress=lambda m: say("K = 3 " + m.replace("H^2", "bottleneck D")))
    seconds["search"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    b_all = scorer.D.min(axis=0)
    i_nat = int(np.argmax(b_nat))
    i_srch = m_nat + int(np.argmax(b_all[m_nat:])) if b_all.size > m_nat else i_nat
    sched = schedule(scorer.D)
    cols, w = sched["columns"], np.asarray(sched["weights"])
    D_sched = scorer.D[:, cols] @ w
    cnt_nat = counts(scorer.laws([i_nat]), [1.0])
    cnt_srch = counts(scorer.laws([i_srch]), [1.0])
    cnt_sched = counts(scorer.laws(cols), w)
    seconds["counts"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say("K = 3: Monte Carlo at the best natural prompt, the best searched prompt and the schedule")
    sim_nat = simulate(scorer.laws([i_nat]), [1.0], trials, seed)
    sim_srch = simulate(scorer.laws([i_srch]), [1.0], trials, seed)
    sim_sched = simulate(scorer.laws(cols), w, trials, seed)
    seconds["simulate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    head_only = head_only_design([pair.A.head, pair.B.head, pair.C.head], energy, names)
    seconds["head-only design"] = time.perf_counter() - t0

    decode = pair.tok.decode
    best_natural = record(D_nat[:, i_nat], natural_ids[i_nat], decode, cnt_nat, sim_nat, names)
    best_searched = record(scorer.D[:, i_srch], scorer.ids[i_srch], decode, cnt_srch, sim_srch, names)
    best_searched["source"] = ("the pair search's beam" if i_srch < m_nat + len(extra)
                               else "the K-way search")
    best_searched["retokenizes"] = pair.roundtrip(scorer.ids[i_srch])
    single = max(b_all[i_nat], b_all[i_srch])            # the best single prompt scored
    cnt_single = cnt_srch if b_all[i_srch] >= b_all[i_nat] else cnt_nat
    sched_rec = {"prompts": [{"text": decode(scorer.ids[c]), "token_ids": [int(t) for t in scorer.ids[c]],
                              "weight": float(wc), "bottleneck_d": float(b_all[c]),
                              "pairs": pair_table(scorer.D[:, c], names)}
                             for c, wc in zip(cols, w)]}
    sched_rec |= bottleneck_record(D_sched, names)
    sched_rec |= {k: cnt_sched[k] for k in ("lower", "predicted", "upper")}
    sched_rec |= {"empirical": sim_sched["empirical"], "interval": sim_sched["interval"],
                  "candidates": int(scorer.D.shape[1]), "pair_duals": sched["pair_duals"],
                  "gain_exponent": float(D_sched.min() / single) if single > 0 else None,
                  "gain_predicted": (cnt_single["predicted"] / cnt_sched["predicted"]
                                     if cnt_sched["predicted"] else None)}
    which = np.argmin(D_nat, axis=0)
    pair_names = [f"{names[i]}-{names[j]}" for i, j in pairs_of(len(names))]
    which_all = np.argmin(scorer.D, axis=0)
    others = np.sort(scorer.D, axis=0)
    candidates = {"count": int(scorer.D.shape[1]),
                  "bottleneck_pair_counts": {pn: int(np.sum(which_all == p))
                                             for p, pn in enumerate(pair_names)},
                  "second_over_bottleneck_min": float(np.min(others[1] / np.maximum(others[0], 1e-300)))}
    out = {
        "models": list(names),
        "natural": {"count": total_nat, "scored": m_nat,
                    "left_out_d_ab_max": left_out,
                    "exact": bool(b_nat.max() > left_out * 1.01),
                    "bottleneck_pair_counts": {pn: int(np.sum(which == p)) for p, pn in enumerate(pair_names)},
                    "bottleneck_d_median": float(np.median(b_nat)),
                    "bottleneck_d_max": float(b_nat.max()),
                    "d_median": {pn: float(np.median(D_nat[p])) for p, pn in enumerate(pair_names)}},
        "best_natural": best_natural,
        "best_searched": best_searched,
        "schedule": sched_rec,
        "candidates": candidates,
        "search": {"budget": budget, "scored": res.scored, "beam": beam, "per_round": per_round,
                   "started_from": {"natural": len(top_nat), "pair_beam": len(extra)},
                   "history": [[int(p), float(h)] for p, h in res.history]},
        "head_only": head_only,
        "forward_passes": {"C_natural": m_nat, "ABC": scorer.passes},
        "simulate": {"trials": trials, "policy": "fixed", "seed": seed, "error": ALPHA},
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
    if out_dir is not None:
        write_candidates(out_dir / "kway_candidates.csv", scorer, decode, pair_names, m_nat)
    if check_ids is not None:
        hs = pair.hidden_of("ABC", [check_ids])
        out["check"] = {"token_ids": [int(t) for t in check_ids]}
        out["check"] |= bottleneck_record(pair_distances(logits(heads, hs))[:, 0], names)
    return out


def write_candidates(path, scorer: KwayScorer, decode, pair_names, m_nat: int) -> None:
    """Every prompt scored three ways: its origin, each pair's D, the bottleneck (a scratch CSV)."""
    import csv
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["index", "origin", "text", "token_ids"] + [f"d_{p}" for p in pair_names]
                   + ["bottleneck_d"])
        for c, ids in enumerate(scorer.ids):
            w.writerow([c, "natural" if c < m_nat else "searched", decode(ids),
                        " ".join(map(str, ids))] + [repr(float(v)) for v in scorer.D[:, c]]
                       + [repr(float(scorer.D[:, c].min()))])


def head_only_design(heads, energy: float, names=("A", "B", "C")) -> dict:
    """bhtcli.design([W_A, W_B, W_C], energy): the best common hidden state for the three heads
    alone. bht refuses two heads that are the same softmax model (an InputError): then no
    common hidden state tells that pair apart and the bottleneck is 0 at every query; the
    pairs whose heads differ get their pair design (bhtcli.design(W_i, W_j, energy))."""
    import bhtcli
    from bhtcli.errors import InputError
    try:
        r = bhtcli.design(list(heads), energy, dtype="float32", starts=8)
    except InputError as e:
        out = {"energy": energy, "distinguishable": False, "bottleneck_d": 0.0,
               "message": str(e), "pairs": []}
        first = [next(k for k in range(i + 1) if np.array_equal(heads[k], heads[i]))
                 for i in range(len(heads))]          # equal heads share one design
        done = {}
        for i, j in pairs_of(len(heads)):
            key = (first[i], first[j])
            if key[0] == key[1]:
                out["pairs"].append({"pair": f"{names[i]}-{names[j]}", "identical_heads": True,
                                     "hellinger_squared": 0.0, "predicted": None})
                continue
            if key not in done:
                d = bhtcli.design(heads[key[0]], heads[key[1]], energy, dtype="float32", starts=8)
                done[key] = {"hellinger_squared": d.hellinger_squared,
                             "predicted": d.samples["predicted"]}
            out["pairs"].append({"pair": f"{names[i]}-{names[j]}", "identical_heads": False}
                                | done[key])
        return out
    return {"energy": energy, "distinguishable": True, "bottleneck_d": r.bhattacharyya_distance,
            "bottleneck_hellinger_squared": r.hellinger_squared,
            "predicted": r.samples["predicted"], "message": None, "pairs": r.pairs}
