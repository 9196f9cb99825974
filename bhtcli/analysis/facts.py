"""What design and bound establish about a pair before any optimisation: the paper's eps, the
row diameter, whether the models are the same (docs/maths.md §1.2), and the variance ceiling
behind the certificate (ceilings.py), for one budget or, through PairBase, for many."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from bhtcli.analysis.ceilings import Ceiling, abs_max, PairStats, pair_stats, variance_ceilings
from bhtcli.maths.certificate import h2_from_variance
from bhtcli.analysis.diameter import DifferenceRows, Diameter, row_diameter, row_norm_2inf
from bhtcli.maths.certificate import EPS
from bhtcli.maths.differences import two_difference
from bhtcli.models.links import softcap_spread
from bhtcli.models.readout import Readout
from bhtcli.io.validation import MAX_LOGIT, MIN_LOGIT, check_logit_scale


@dataclass(frozen=True)
class PairFacts:
    """What design and bound establish about a pair before any optimisation."""

    eps_2inf: float                 # the paper's eps = ||A - B||_{2->inf}
    diameter: Diameter              # of the rows of A - B
    distinguishable: bool
    reason: str | None              # why not, when the models are the same
    spread: float                   # L >= max_ij (delta_i - delta_j) over the ball (inf: none)
    certificate_note: str | None    # why there is no certificate, or how it was obtained
    ceiling: Ceiling | None = None  # the variance ceiling behind the certificate


@dataclass(frozen=True)
class PairBase:
    """What the certificate needs that does not depend on the budget: one computation serves
    every budget of a ladder, a budget curve or a --queries bisection."""

    stats: "PairStats"
    diameter: Diameter
    bias_range: float
    same: str | None                # why A and B are the same model (None: they differ)
    same_exact: bool = True         # same in exact arithmetic (else: up to float64 rounding of
                                    # the rows the softmax sees; the ceiling is then reported)
    rounding: float = 0.0           # max_i ||e_i - e_0||: the rounding errors of the computed
                                    # rows of A - B (biases too) that diameter does not see
    visible: float | None = None    # max_i max(||a_i - a_0||, ||b_i - b_0||) when computed: the
                                    # size of the rows the softmax sees (exp links)


def pair_base(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray,
              readout: Readout | None = None, *, stats: PairStats | None = None,
              norms=None, farthest: float | None = None) -> PairBase:
    """Row statistics (one streamed pass over A and B), the row diameter and the same-model
    rule (docs/maths.md §1.2, §4.2). pair_G: A - B (centred or not). stats (pair_stats(A, B))
    and norms (the diameter's centred norms of DifferenceRows(A, B) about stats.gmean) and
    farthest (its farthest-point bound): when passes shared by several pairs computed them
    (analysis/kway_facts.py)."""
    readout = Readout() if readout is None else readout
    stats = pair_stats(A, B) if stats is None else stats
    if np.asarray(pair_G[:1]).dtype != np.float64:    # a float32 search's G is rounded
        pair_G = DifferenceRows(A, B)                   # float64 rows, streamed
    mean = stats.gmean if isinstance(pair_G, DifferenceRows) else None   # saves a pass
    shared = mean is not None                   # the shared parts are those of DifferenceRows
    diam = row_diameter(pair_G, mean=mean, norms=norms if shared else None,
                        farthest=farthest if shared else None)
    _, dbias = readout.bias_offsets(A.shape[0])
    bias_range = float(dbias.max() - dbias.min())
    bias_scale = max(abs_max(readout.bias_a), abs_max(readout.bias_b))
    if readout.exp_links:
        same, exact, rounding, visible = _same_softmax(A, B, readout, diam.value, bias_range, stats)
        return PairBase(stats, diam, bias_range, same, exact, rounding, visible)
    tiny = 32.0 * EPS * max(stats.norm_a, stats.norm_b, bias_scale)    # docs/maths.md §1.2
    return PairBase(stats, diam, bias_range, _same_model(A, B, readout, diam.value, bias_range, tiny))


def analyse_pair(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray, energy: float,
                 readout: Readout | None = None, base: PairBase | None = None) -> PairFacts:
    """The same-model rule, the spread bound and the variance ceiling behind the certificate
    (also checks that the budget keeps the logits in float64's useful range; docs/maths.md
    §1.2, §4.3, §4.4). pair_G: A - B (centred or not). `base` (:func:`pair_base`) reuses the
    budget-independent part; then one streamed pass over A and B (the per-row ceiling's
    accumulator) is all a further budget costs."""
    return analyse_budgets(A, B, pair_G, [energy], readout, base)[0]


def analyse_budgets(A: np.ndarray, B: np.ndarray, pair_G: np.ndarray, energies,
                    readout: Readout | None = None, base: PairBase | None = None, *,
                    floors=None) -> list:
    """:func:`analyse_pair` at each budget of `energies` (every budget checked before any
    work), the per-row ceilings of all of them in one streamed pass over A and B
    (:func:`bhtcli.analysis.ceilings.variance_ceilings`; floors: as there): the same
    PairFacts, bit for bit, as one call per budget."""
    readout = Readout() if readout is None else readout
    base = pair_base(A, B, pair_G, readout) if base is None else base
    stats = base.stats
    for energy in energies:
        check_logit_scale(energy, max(stats.norm_a, stats.norm_b),
                          _visible_scale(A, B, energy, base, readout))
    facts = [_facts_before_ceiling(A, energy, readout, base) for energy in energies]
    open_ = [k for k, f in enumerate(facts) if f.distinguishable]
    ceilings = variance_ceilings(A, B, [energies[k] for k in open_], [facts[k].spread for k in open_],
                                 readout, stats, floors=floors)
    for k, ceiling in zip(open_, ceilings):
        facts[k] = replace(facts[k], ceiling=ceiling)
    return facts


def _facts_before_ceiling(A, energy: float, readout: Readout, base: PairBase) -> PairFacts:
    """analyse_pair's facts at one budget, the variance ceiling still to come when the models
    differ (when they are the same the facts are final)."""
    stats, diam = base.stats, base.diameter
    norm_a, norm_b = stats.norm_a, stats.norm_b
    if base.same:
        if base.same_exact:
            return PairFacts(stats.eps_2inf, diam, False, base.same, 0.0, None)
        # equal up to rounding: no count, but the ceiling stays sound (range bound, §4.1) for
        # the exact rows d_i = s_i + e_i: max_ij ||d_i - d_j|| <= diam(s) + 2 max_i ||e_i - e_0||
        spread = energy * diam.value + base.bias_range + 2.0 * base.rounding * max(energy, 1.0)
        variance = spread * spread / 4.0
        ceiling = Ceiling(variance, "range", {"per_row": None, "range": h2_from_variance(variance)})
        return PairFacts(stats.eps_2inf, diam, False, base.same, spread, None, ceiling)
    spread = energy * diam.value + base.bias_range
    note = None
    if not readout.exp_links:
        ba, bb = abs_max(readout.bias_a), abs_max(readout.bias_b)
        wobble = (readout.link_a.psi_oscillation(energy * norm_a + ba)
                  + readout.link_b.psi_oscillation(energy * norm_b + bb))
        spread += wobble
        if math.isinf(spread):
            note = ("no certificate: a poly:K link's log-weight K log|s| is unbounded near s = 0, "
                    "so no closed-form bound on the separation holds")
        else:
            note = ("certificate for taylor links: log-weights are the scores plus psi = log T_K(s) - s, "
                    f"whose oscillation over the ball ({wobble:.3g}) widens both the range and the "
                    "per-row bounds; valid but looser than for exp links")
        capped = softcap_spread(readout.link_a, readout.link_b, energy, energy * norm_a + ba,
                                energy * norm_b + bb, stats.eps_2inf, diam.value, base.bias_range,
                                abs_max(readout.bias_offsets(A.shape[0])[1]))
        if "softcap" in (readout.link_a.kind, readout.link_b.kind):
            note = ("certificate for softcap links: log-weights are the scores plus psi = C tanh(s/C) - s "
                    f"(oscillation over the ball {wobble:.3g})"
                    + ("; both capped, so the range bound uses |phi| < C and 0 < phi' <= 1 "
                       "(docs/maths.md §7.2)" if capped < math.inf else "")
                    + "; valid but looser than for exp links")
        spread = min(spread, capped)
    return PairFacts(stats.eps_2inf, diam, True, None, spread, note)


def _visible_scale(A, B, energy: float, base: PairBase, readout: Readout) -> float | None:
    """max_i max(||a_i - a_0||, ||b_i - b_0||) for exp links when the logit-scale check needs
    it (None otherwise): the lower limit of the check is decided on what the softmax sees, and
    the message of the upper one says when the excess is invisible to it (docs/maths.md §1.4). The same-model pass computes it whenever the
    visible rows could be below the limit while the stored ones are not (then the row diameter
    of A - B, at most 4 times it, is below the rule's threshold); otherwise one more streamed pass,
    only for budgets near either limit."""
    if not readout.exp_links:
        return None
    if base.visible is not None:
        return base.visible
    raw = energy * max(base.stats.norm_a, base.stats.norm_b)
    if raw > MAX_LOGIT or raw < MIN_LOGIT / (16 * EPS):
        return _centred_scales_and_exact(A, B, None, None)[4]
    return None


def _same_softmax(A, B, readout: Readout, diam: float, bias_range: float,
                  stats: PairStats) -> tuple[str | None, bool, float]:
    """(reason, exact) for exp links (docs/maths.md §1.2, §1.3): the models are the same when
    every row of A - B is the same vector and the biases differ by a constant. An exact test
    (error-free differences) says whether that holds for the stored values; otherwise they are
    the same up to rounding when B = A + 1 w^T up to the rounding of each stored entry (an
    entrywise test, so a change of a small entry under large rows is never mistaken for it).
    (None, True, 0, visible) when they differ; the third item bounds the rounding errors of the
    computed rows of A - B (docs/maths.md §1.3); the fourth is the size of the rows the softmax
    sees, max_i max(||a_i - a_0||, ||b_i - b_0||), when this pass ran (else None)."""
    if diam > 64.0 * EPS * max(stats.norm_a, stats.norm_b, abs_max(readout.bias_a),
                                abs_max(readout.bias_b)):
        return None, True, 0.0, None                # not even within the raw scale's rounding
    spread_a, spread_b, exact, rounding, visible, entrywise = _centred_scales_and_exact(
        A, B, readout.bias_a, readout.bias_b)
    plain = readout.plain
    if exact:
        return _exactly_same(A, B, readout), True, 0.0, visible
    if entrywise:
        return ("A and B are the same softmax model up to float64 rounding: B = A + 1 w^T up to "
                "the rounding of the stored entries (|a_ij - b_ij - w_j| <= eps max(|a_ij|, |b_ij|) "
                "for one row w" + (", biases as one more column" if not plain else "")
                + f"); the rows of A - B differ from one another by at most {diam:.3g}"
                + (f" (biases by {bias_range:.3g})" if not plain else "")
                + f", against rows of size {max(spread_a, spread_b):.3g} as the softmax sees them "
                "(each row minus the first); the ceiling bounds what exact arithmetic would give"), \
            False, rounding, visible
    return None, True, 0.0, visible


def _centred_scales_and_exact(A, B, bias_a, bias_b, rows: int = 8192):
    """(max_i ||[a_i, alpha_i] - [a_0, alpha_0]||, the same for B, whether every row of
    [A - B, alpha - beta] equals the first exactly) in one streamed pass. Differences are
    error-free (TwoSum: a - b = s + e exactly, and (s, e) is unique for a given real value),
    so the equality test is exact for the stored values. Fourth: max_i ||e_i - e_0||. Fifth:
    max_i max(||a_i - a_0||, ||b_i - b_0||) (the rows without the biases). Sixth: whether some
    row w has |a_ij - b_ij - w_j| <= eps max(|a_ij|, |b_ij|) at every entry (biases as a column):
    the difference is what rounding B = A + 1 w^T entry by entry leaves (docs/maths.md §1.3)."""
    sa = sb = rounding = va = vb = 0.0
    exact = True
    ref = lo = hi = None
    for ta, tb in _augmented_blocks(A, B, bias_a, bias_b, rows):
        if ref is None:
            ref = (ta[0].copy(), tb[0].copy(), *two_difference(ta[:1], tb[:1]))
            lo, hi = np.full(ta.shape[1], -np.inf), np.full(ta.shape[1], np.inf)
        a0, b0, s0, e0 = ref
        sa = max(sa, float(np.sqrt(np.max(np.einsum("ij,ij->i", ta - a0, ta - a0)))))
        sb = max(sb, float(np.sqrt(np.max(np.einsum("ij,ij->i", tb - b0, tb - b0)))))
        ra, rb = ta[:, :-1] - a0[:-1], tb[:, :-1] - b0[:-1]         # the rows alone
        va = max(va, float(np.sqrt(np.max(np.einsum("ij,ij->i", ra, ra)))))
        vb = max(vb, float(np.sqrt(np.max(np.einsum("ij,ij->i", rb, rb)))))
        s, e = two_difference(ta, tb)
        rounding = max(rounding, float(np.sqrt(np.max(np.einsum("ij,ij->i", e - e0, e - e0)))))
        if exact:
            exact = bool(np.all(s == s0) and np.all(e == e0))
        # t = (a_i - b_i) - (a_0 - b_0) to a few ulps of itself (s - s0 is exact where the rows
        # agree to a factor 2, Sterbenz); the entries admit a common w_j iff the intervals
        # [t_ij - tol_ij, t_ij + tol_ij] meet, i.e. max over rows of the lower ends <= min of the upper
        t = (s - s0) + (e - e0)
        tol = EPS * np.maximum(np.abs(ta), np.abs(tb))
        lo = np.maximum(lo, np.max(t - tol, axis=0))
        hi = np.minimum(hi, np.min(t + tol, axis=0))
    return sa, sb, exact, rounding, max(va, vb), bool(np.all(lo <= hi))


def _same_model(A, B, readout: Readout, diam: float, bias_range: float, tiny: float) -> str | None:
    """A reason when P_A(x) = P_B(x) for every x, else None."""
    la, lb = readout.link_a, readout.link_b
    if readout.exp_links:
        return _exactly_same(A, B, readout) if diam <= tiny and bias_range <= tiny else None
    blocks = lambda: _augmented_blocks(A, B, readout.bias_a, readout.bias_b)
    if la == lb and la.kind in ("taylor", "softcap"):
        if max(row_norm_2inf(ta - tb) for ta, tb in blocks()) <= tiny:
            return f"A and B are equal (rows and biases), with the same link {la.name}"
        if la.kind == "taylor":
            return None
    if la == lb and la.kind == "poly":
        sa = sb = 0.0
        for ta, tb in blocks():                 # one pass for both norms
            sa, sb = sa + float(np.sum(ta * ta)), sb + float(np.sum(tb * tb))
        t = math.sqrt(sb / max(sa, 1e-300))
        worst = max(float(np.max(np.minimum(np.linalg.norm(tb - t * ta, axis=1),
                                            np.linalg.norm(tb + t * ta, axis=1))))
                    for ta, tb in blocks())
        if worst <= tiny * max(t, 1.0):
            return (f"B = +-{t:.6g} A row by row (biases included): with the link {la.name}, "
                    "(b_i x)^K is proportional to (a_i x)^K for every query")
        return None
    first = next(blocks())
    a0, b0 = first[0][0], first[1][0]
    if max(max(row_norm_2inf(ta - a0), row_norm_2inf(tb - b0)) for ta, tb in blocks()) <= tiny:
        return ("every row of A is the same (and so is every row of B, biases included): both "
                "models answer uniformly for every query")
    return None


def _exactly_same(A, B, readout: Readout) -> str:
    """The reason of two exp-link models that are the same exactly: "identical" when every
    value (rows and biases) is equal, else the common shift B = A + 1 w^T."""
    if all(np.array_equal(ta, tb) for ta, tb in _augmented_blocks(A, B, readout.bias_a,
                                                                  readout.bias_b)):
        return ("A and B are identical (every value equal" + (", biases too" if not readout.plain
                                                              else "")
                + "), so softmax(Ax) = softmax(Bx) for every query")
    return ("A and B are the same softmax model: every row of A - B is the same vector "
            "(B = A + 1 w^T" + (", biases differing by a constant" if not readout.plain else "")
            + "), so softmax(Ax) = softmax(Bx) for every query")


def _augmented_blocks(A, B, bias_a, bias_b, rows: int = 8192):
    """Row blocks of [A, bias_a] and [B, bias_b] in float64 (a bias is one more column:
    s = [A, b] [x; 1]; zero when absent)."""
    for s in range(0, A.shape[0], rows):
        out = []
        for M, bias in ((A, bias_a), (B, bias_b)):
            blk = np.asarray(M[s:s + rows], dtype=np.float64)
            col = np.zeros((blk.shape[0], 1)) if bias is None else np.asarray(bias[s:s + rows], dtype=np.float64)[:, None]
            out.append(np.hstack([blk, col]))
        yield out[0], out[1]


# --- the variance ceiling (docs/maths.md §4.4) -------------------------
#
# Every ceiling here bounds V >= sup over ||x|| <= E and |t| <= 1/2 of Var_{pi_t}(delta),
# pi_t = softmax(c + t delta) (c, delta the midpoint log-weights and their difference). Then
#     D(x) <= V / 8   and   KL(P_A || P_B), KL(P_B || P_A) <= V / 2   for every query.
# "range":   V = L^2 / 4 with L >= range(delta) over the ball (Popoviciu).
# "per_row": pi_{t,i} <= cap_i (Jensen on the log-partition function) and
#            V = sup_{||x|| <= E} sum_i cap_i (h_i x + e_i)^2 (second moment about the uniform
#            mean; h, e the row-centred A - B and bias difference), a trust-region problem
#            solved through a d x d eigendecomposition.


def join_notes(*notes):
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def guarded_variance(variance: float | None, printed_d=(), printed_kl=()):
    """(V, raised): the one guarded rounding of a certificate (docs/maths.md §4.10). V is a
    rigorous bound on the exact supremum, but a printed D or KL is a float64 evaluation that
    can sit a few ulps above its exact value; when 8 D or 2 KL of one printed value is above V
    the design is within rounding of the supremum and V is raised to it (never lowered).
    None or an infinite V is returned as it is."""
    if variance is None or not math.isfinite(variance):
        return variance, False
    floor = max([8.0 * v for v in printed_d] + [2.0 * v for v in printed_kl], default=-math.inf)
    return (floor, True) if floor > variance else (variance, False)


def certificate_record(facts: PairFacts, error: float, h2: float | None = None, *,
                       div=None, other_h2=()) -> dict:
    """The `certificate` object of design and bound (the same keys for both): the ceiling on
    H^2 and D over the ball and what follows for any strategy, where it comes from, and, with
    the H^2 of a design, the design's share of the ceiling.

    The guarded rounding (:func:`guarded_variance`) of `div` (the divergences at the design)
    and `other_h2` (further printed H^2, the search's local maxima): every printed ceiling >=
    every printed H^2, design_over_bound <= 1."""
    from bhtcli.maths.certificate import certificate_from_variance
    ceiling = facts.ceiling
    variance = ceiling.variance if ceiling else None
    candidates = ceiling.candidates if ceiling else None
    note = join_notes(facts.certificate_note, ceiling.note if ceiling else None)
    h2_floor = None
    if div is not None:
        variance, raised = guarded_variance(
            variance, [div.bhattacharyya_distance]
            + [-math.log1p(-v) for v in other_h2 if v is not None and v < 1.0],
            [div.kl_ab, div.kl_ba])
        if raised:
            h2_floor = max([div.hellinger_squared] + [v for v in other_h2 if v is not None])
            candidates = {m: (None if v is None else max(v, h2_floor, -math.expm1(-variance / 8.0)))
                          for m, v in candidates.items()}
            note = join_notes(note, "the design is within float64 rounding of the ceiling: the "
                              "ceiling printed is raised to the design's value (docs/maths.md §4.10)")
    cert = certificate_from_variance(variance, error, facts.distinguishable)
    bound = cert.hellinger_squared_max_bound
    if h2_floor is not None:
        bound = max(bound, h2_floor)
    return {"hellinger_squared_max_bound": bound,
            "bhattacharyya_max_bound": cert.bhattacharyya_max_bound,
            "kl_max_bound": cert.kl_max_bound,
            "samples_lower_any_strategy": cert.samples_lower_any_strategy,
            "mean_samples_lower_sequential": cert.mean_samples_lower_sequential,
            "ceiling_method": ceiling.method if ceiling else None,
            "ceilings": candidates,
            "row_diameter": facts.diameter.value, "row_diameter_exact": facts.diameter.exact,
            "score_spread_bound": facts.spread if np.isfinite(facts.spread) else None,
            "design_over_bound": h2 / bound if (h2 is not None and bound) else None,
            "note": note}


def bottleneck_certificate(facts: list, pairs: list, error: float, bottleneck_d: float | None,
                           printed=()) -> dict:
    """The `certificate` of K models: no query (and no schedule) reaches a bottleneck above
    min over pairs of each pair's ceiling, min_p D_p(x) <= D_q(x) <= sup D_q for every pair q
    (docs/maths.md §8.4). `facts`: each pair's PairFacts in the order of `pairs`; `printed`:
    lists of the per-pair D printed in the same result (at the query, under a schedule), each
    pair's ceiling guarded by them (:func:`guarded_variance`)."""
    from bhtcli.maths.certificate import certificate_from_variance
    bounds = []
    for p, f in enumerate(facts):
        v, _ = guarded_variance(f.ceiling.variance if f.ceiling else None,
                                [float(ds[p]) for ds in printed])
        bounds.append(None if v is None or not math.isfinite(v) else v / 8.0)
    known = [(b, p) for b, p in zip(bounds, range(len(pairs))) if b is not None]
    if not known:
        return {"bhattacharyya_max_bound": None, "hellinger_squared_max_bound": None,
                "binding_pair": None, "ceiling_method": None, "samples_lower_any_strategy": None,
                "design_over_bound": None, "pair_bounds": bounds}
    b, p = min(known)
    cert = certificate_from_variance(8.0 * b, error, True)
    return {"bhattacharyya_max_bound": b, "hellinger_squared_max_bound": -math.expm1(-b),
            "binding_pair": {"i": pairs[p][0], "j": pairs[p][1]},
            "ceiling_method": facts[p].ceiling.method,
            "samples_lower_any_strategy": cert.samples_lower_any_strategy,
            "design_over_bound": (None if bottleneck_d is None or b <= 0 else bottleneck_d / b),
            "pair_bounds": bounds}
