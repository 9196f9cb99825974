"""`design` and `bound` for leverage-score models (`--model leverage`).

The query is s with c <= s_i^2 <= C; the search runs over theta = log w = -log s^2 in the box
[-log C, -log c]^n with L-BFGS-B (analytic gradients, O(n d^2) per evaluation) from several
starts: uniform weights, the two "bang-bang" corners that up-weight the rows where P_A or
P_B is larger at uniform weights, and seeded random corners and interior points (optima of
such box problems often sit at corners).

Certificate (docs/maths.md §6.2): with delta = max(lambda_min(A^T A), lambda_min(B^T B))
and eps = sum_i ||b_i b_i^T - a_i a_i^T||_op, every admissible s has
    TV(P_A(s), P_B(s)) <= tau = (C/c) (eps/delta) (d + 2) / (2 d),
and the same argument with spectral constants (spectral_tv_bound) gives a tau that is never
larger; bht reports the smaller. So H^2 <= tau and any strategy with N queries (adaptive or not) needs
    N >= max((1 - 2 alpha) / tau, ln(1/(4 alpha (1-alpha))) / (2 ln(1/(1 - tau)))).
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from bhtcli.search.box import default_starts
from bhtcli.search.entry import maximize
from bhtcli.search.result import solver_dict, solver_from
from bhtcli.results import BudgetCurveResult, DesignResult, LeverageBoundResult
from bhtcli.maths.divergences import divergences_from_tilt
from bhtcli.errors import InputError, parameter_name
from bhtcli.io.load import load_pair
from bhtcli.models.leverage import LeveragePair
from bhtcli.models.spec import DesignOptions, ModelSpec
from bhtcli.maths.counts import ceil_count, query_counts


def thm42_quantities(A: np.ndarray, B: np.ndarray):
    """(delta, eps): max of lambda_min(A^T A), lambda_min(B^T B); sum_i ||b b^T - a a^T||_op
    (docs/maths.md §6.2)."""
    lam = max(float(np.linalg.eigvalsh(A.T @ A)[0]), float(np.linalg.eigvalsh(B.T @ B)[0]))
    na, nb = np.einsum("ij,ij->i", A, A), np.einsum("ij,ij->i", B, B)
    ab = np.einsum("ij,ij->i", A, B)
    # eigenvalues of b b^T - a a^T: (nb - na)/2 +- sqrt(((na + nb)/2)^2 - (a.b)^2)
    rad = np.sqrt(np.maximum(((na + nb) / 2) ** 2 - ab ** 2, 0.0))
    op = np.abs((nb - na) / 2) + rad
    return max(lam, 0.0), float(op.sum())


def tv_bound(ceiling: float, floor: float, delta: float, eps: float, d: int) -> float:
    if delta <= 0:
        return 1.0
    return min(1.0, (ceiling / floor) * (eps / delta) * (d + 2) / (2 * d))


def spectral_tv_bound(A: np.ndarray, B: np.ndarray, C: float, c: float) -> float:
    """Theorem 4.2's argument with spectral constants (docs/maths.md §6.2 and
    §6.3): with P_i = (rho_i u_i u_i^T + v_i v_i^T / rho_i) / 2 (u = b - a, v = b + a,
    rho = |v|/|u|), so that -P_i <= b_i b_i^T - a_i a_i^T <= P_i, S = sum_i P_i and G = A^T A,
        TV <= (C/c) (tr(G^-1 S) / d + lambda_max(G^-1/2 S G^-1/2)) / 2,
    and the same with B^T B; the smaller of the two (1 when both Gram matrices are singular).
    Never above tv_bound: tr(G^-1 S) <= 2 eps / lambda and lambda_max(...) <= eps / lambda."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    d = A.shape[1]
    u, v = B - A, B + A
    nu, nv = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
    ok = (nu > 0) & (nv > 0)                      # otherwise b b^T - a a^T = 0: P_i = 0
    rho = np.where(ok, nv / np.where(ok, nu, 1.0), 0.0)
    irho = np.where(ok, nu / np.where(ok, nv, 1.0), 0.0)
    S = 0.5 * ((u * rho[:, None]).T @ u + (v * irho[:, None]).T @ v)
    best = 1.0
    for M in (A, B):
        lam, Q = np.linalg.eigh(M.T @ M)
        if lam[0] <= 1e-12 * max(lam[-1], 0.0):  # (nearly) singular: no bound from this side
            continue
        R = Q / np.sqrt(lam)                      # R R^T = G^-1
        T = R.T @ S @ R
        tau = 0.5 * (C / c) * (float(np.trace(T)) / d + float(np.linalg.eigvalsh(T)[-1]))
        best = min(best, tau * (1 + 64 * (d + 1) * np.finfo(np.float64).eps))
    return best


def leverage_tv(A, B, C: float, c: float):
    """(tau, method, delta, eps): the smaller of tv_bound ("thm42") and spectral_tv_bound
    ("spectral"), with Theorem 4.2's delta and eps."""
    delta, eps = thm42_quantities(np.asarray(A), np.asarray(B))
    old = tv_bound(C, c, delta, eps, np.asarray(A).shape[1])
    new = spectral_tv_bound(A, B, C, c)
    return (new, "spectral", delta, eps) if new < old else (old, "thm42", delta, eps)


def lower_from_tv(tau: float, alpha: float) -> int | None:
    if tau <= 0:
        return None
    by_tv = (1 - 2 * alpha) / tau
    by_h = math.log(1 / (4 * alpha * (1 - alpha))) / (2 * -math.log1p(-tau)) if tau < 1 else 0.0
    return ceil_count(max(by_tv, by_h))


def same_leverage_model(pair: LeveragePair, lo: float, hi: float, seed: int = 0) -> bool:
    """Equal probabilities at uniform and four random weight vectors (docs/maths.md §6.1)."""
    if pair.a.rank != pair.b.rank:
        return False
    rng = np.random.default_rng(seed + 31337)
    if hi - lo < 1e-12:        # C = c: sameness is a property of the models, not of the box
        lo, hi = -1.0, 1.0
    thetas = [np.zeros(pair.n)] + [rng.uniform(lo, hi, pair.n) for _ in range(4)]
    for th in thetas:
        sa, sb = pair.states(th)
        if 0.5 * np.abs(sa.h / sa.rank - sb.h / sb.rank).sum() > 1e-10:
            return False
    return True


def design_leverage(A, B, spec: ModelSpec, options: DesignOptions = DesignOptions(),
                    progress=None) -> DesignResult:
    """The best leverage query s (c <= s_i^2 <= C, the box of the leverage `spec`) and the same
    report as `design`.

    options.starts defaults to 6 (3 when n d^2 > 1e7, with at most 150 evaluations per start
    instead of 400, so that n = 20,000, d = 64 fits in about a minute on two cores).
    """
    return _design_in_box(A, B, *spec.box, options.error, options.starts, options.seed, progress)


def _design_in_box(A, B, ceiling, floor, error, starts, seed, progress=None) -> DesignResult:
    A, B = load_pair(A, B)
    starts = default_starts(*A.shape) if starts is None else starts
    t0 = time.perf_counter()
    n, d = A.shape
    pair = LeveragePair(A, B)
    lo, hi = -math.log(ceiling), -math.log(floor)
    warnings = []
    for name, m in (("A", pair.a), ("B", pair.b)):
        if not m.full_rank:
            warnings.append(f"{name} has rank {m.rank} < d = {d}: leverage scores use the "
                            f"pseudo-inverse and are divided by the rank {m.rank}")
    note = None
    if pair.a.rank != pair.b.rank:
        note = (f"A has rank {pair.a.rank} and B rank {pair.b.rank}: their column spaces differ in "
                "dimension, so they are different models, told apart by that alone")
    tau, method, delta, eps = leverage_tv(A, B, ceiling, floor)
    same = same_leverage_model(pair, lo, hi, seed)
    cert = {"hellinger_squared_max_bound": 0.0 if same else tau,
            "samples_lower_any_strategy": None if same else lower_from_tv(tau, error),
            "mean_samples_lower_sequential": None,
            "tv_max_bound": 0.0 if same else tau, "tv_method": None if same else method,
            "lambda_min_larger": delta, "sum_op_norm_diff": eps}
    base = dict(model="leverage", n=n, d=d, energy=ceiling, target_error=error)
    if same:
        zero = dict(bhattacharyya_distance=0.0, hellinger=0.0, hellinger_squared=0.0,
                    total_variation=0.0, kl_ab=0.0, kl_ba=0.0, chernoff_information=0.0)
        s = np.full(n, math.sqrt(ceiling))
        return DesignResult(**base, query=s.tolist(), query_norm=float(np.linalg.norm(s)),
                            on_boundary=True, **zero, distinguishable=False,
                            note=("A and B are the same leverage-score model (equal probabilities "
                                  "at every weight tested: B = D A R)"),
                            samples={"lower": None, "upper": None, "predicted": None, "method": "none"},
                            certificate=cert, solver=solver_dict(
                                "lbfgs", 0, 0, pair.evaluations, 0, [], None, None,
                                seconds=time.perf_counter() - t0),
                            floor=floor, warnings=warnings)
    if progress:
        progress(f"climbing from {starts} starts (L-BFGS-B over {n:,} log-weights)")
    found = maximize(pair, hi, "box", box=(lo, hi), starts=starts, seed=seed)
    return _report(pair, found.x, base, cert, lo, hi, note, warnings, solver_from(found), floor, t0)


def check_leverage_query(s, ceiling: float, floor: float, n: int) -> np.ndarray:
    """theta = -log s^2 for a leverage query s of length n inside the box (1e-9 slack)."""
    s = np.asarray(s, dtype=np.float64)
    if np.any(s == 0):
        raise InputError("the leverage query s has a zero entry; every s_i must be non-zero")
    s2 = s * s
    if s2.min() < floor * (1 - 1e-9) or s2.max() > ceiling * (1 + 1e-9):
        raise InputError(f"the leverage query has s_i^2 in [{s2.min():.6g}, {s2.max():.6g}], outside "
                         f"the box [{parameter_name('floor')} {floor:g}, {parameter_name('energy')} {ceiling:g}]")
    return np.clip(-np.log(s2), -math.log(ceiling), -math.log(floor))


def leverage_report_for_query(A, B, s, spec: ModelSpec, error: float = 0.05) -> DesignResult:
    """`design`'s report for a given leverage query s in the box of `spec` (no optimisation)."""
    ceiling, floor = spec.box
    A, B = load_pair(A, B)
    t0 = time.perf_counter()
    from bhtcli.io.load import load_query
    s = load_query(s, A.shape[0], what="the leverage query s (one entry per row)") \
        if isinstance(s, str) else np.asarray(s, dtype=np.float64)
    theta = check_leverage_query(s, ceiling, floor, A.shape[0])
    pair = LeveragePair(A, B)
    tau, method, delta, eps = leverage_tv(A, B, ceiling, floor)
    cert = {"hellinger_squared_max_bound": tau, "samples_lower_any_strategy": lower_from_tv(tau, error),
            "mean_samples_lower_sequential": None, "tv_max_bound": tau, "tv_method": method,
            "lambda_min_larger": delta, "sum_op_norm_diff": eps}
    base = dict(model="leverage", n=A.shape[0], d=A.shape[1], energy=ceiling, target_error=error)
    solver = solver_dict("given", 0, 0, None, 0, [], None, None)
    return _report(pair, theta, base, cert, -math.log(ceiling), -math.log(floor), None, [], solver, floor, t0)


def query_in_box(s: np.ndarray, ceiling: float, floor: float) -> np.ndarray:
    """s with every s_i^2 (as float64 computes it) inside [floor, ceiling]: exp(-theta/2) of a
    theta on a face of the box can square to a few ulps outside it; those entries are moved
    by ulps until they are inside, so that the printed query is feasible."""
    s = np.array(s, dtype=np.float64)
    for _ in range(8):
        high, low = s * s > ceiling, s * s < floor
        if not (high.any() or low.any()):
            break
        s[high] = np.nextafter(s[high], 0.0)
        s[low] = np.nextafter(s[low], np.inf)
    return s


def _report(pair, theta, base, cert, lo, hi, note, warnings, solver, floor, t0):
    tilt = pair.tilt(theta)
    div = divergences_from_tilt(tilt)
    counts = query_counts(tilt, div.bhattacharyya_distance, base["target_error"])
    s = query_in_box(np.exp(-0.5 * theta), base["energy"], floor)
    at_face = float(np.mean((theta <= lo + 1e-9) | (theta >= hi - 1e-9)))
    solver = dict(solver, passes=pair.evaluations, fraction_at_box_faces=at_face,
                  seconds=time.perf_counter() - t0)
    return DesignResult(**base, query=s.tolist(), query_norm=float(np.linalg.norm(s)),
                        on_boundary=at_face == 1.0, hellinger=div.hellinger,
                        hellinger_squared=div.hellinger_squared,
                        bhattacharyya_distance=div.bhattacharyya_distance,
                        total_variation=div.total_variation, kl_ab=div.kl_ab, kl_ba=div.kl_ba,
                        chernoff_information=div.chernoff_information,
                        distinguishable=div.bhattacharyya_distance > 0, note=note,
                        samples={"lower": counts.lower, "upper": counts.upper,
                                 "predicted": counts.predicted, "method": counts.method},
                        certificate=cert, solver=solver, floor=floor, warnings=warnings)


def bound_leverage(A, B, spec: ModelSpec, error: float = 0.05) -> LeverageBoundResult:
    """Theorem 4.2 quantities and the explicit-constant lower bound in the box of `spec` (no
    optimisation)."""
    t0 = time.perf_counter()
    ceiling, floor = spec.box
    A, B = load_pair(A, B)
    pair = LeveragePair(A, B)
    tau, method, delta, eps = leverage_tv(A, B, ceiling, floor)
    same = same_leverage_model(pair, -math.log(ceiling), -math.log(floor))
    cert = {"hellinger_squared_max_bound": 0.0 if same else tau,
            "samples_lower_any_strategy": None if same else lower_from_tv(tau, error),
            "mean_samples_lower_sequential": None, "tv_max_bound": 0.0 if same else tau,
            "tv_method": None if same else method, "lambda_min_larger": delta,
            "sum_op_norm_diff": eps}
    return LeverageBoundResult("leverage", A.shape[0], A.shape[1], ceiling, floor, error, pair.a.rank,
                               pair.b.rank, not same,
                               note=("A and B are the same leverage-score model (equal probabilities "
                                     "at every weight tested: B = D A R)") if same else None,
                               certificate=cert, seconds=time.perf_counter() - t0)


def design_leverage_curve(A, B, energies, spec: ModelSpec, options: DesignOptions = DesignOptions(),
                          progress=None):
    """One leverage design per upper bound C in `energies` (increasing, each >= the floor of
    `spec`), floor fixed.

    The boxes nest as C grows, so a design is never reported worse than the previous one's
    query (which is feasible in the larger box)."""
    floor, error = spec.floor, options.error
    designs = []
    for C in energies:
        r = _design_in_box(A, B, C, floor, error, options.starts, options.seed, progress)
        if designs and r.hellinger_squared < designs[-1].hellinger_squared:
            prev = designs[-1]
            r = leverage_report_for_query(A, B, np.asarray(prev.query),
                                          replace(spec, energy=C), error=error)
            r = replace(r, note="the query of the smaller box: it does better here than this box's own search")
        designs.append(r)
    return BudgetCurveResult(designs)


def design_leverage_for_queries(A, B, queries: int, spec: ModelSpec,
                                options: DesignOptions = DesignOptions(), progress=None):
    """The smallest upper bound C <= energy_max = spec.energy (floor fixed) whose designed leverage query
    needs at most `queries` queries, to 0.5% relative, by bisection; the design there with
    ``energy_search`` (see :func:`bhtcli.commands.design.design_for_queries`)."""
    from bhtcli.commands.budgets import QUERIES_TOLERANCE
    from bhtcli.errors import NotReachable
    C_max, c = spec.box
    error, starts, seed = options.error, options.starts, options.seed
    tried = []

    def run(C):
        if progress:
            progress(f"{parameter_name('queries')} {queries}: trying C = {C:.6g}")
        r = _design_in_box(A, B, C, c, error, starts, seed)
        tried.append({"energy": C, "hellinger_squared": r.hellinger_squared,
                      "predicted": r.samples["predicted"]})
        return r

    def enough(r):
        return r.samples["predicted"] is not None and r.samples["predicted"] <= queries

    hi_r = run(C_max)
    if not enough(hi_r):
        n = hi_r.samples["predicted"]
        count = "no finite number of" if n is None else f"{n:,}"
        raise NotReachable(f"{parameter_name('queries')} {queries:,}: even {parameter_name('energy')} "
                           f"{C_max:g} needs {count} queries for the designed query; raise "
                           f"{parameter_name('energy')}")
    lo, hi = c, C_max
    lo_r = run(c) if c < C_max else hi_r
    if enough(lo_r):
        hi, hi_r = c, lo_r
    while hi - lo > QUERIES_TOLERANCE * hi:
        mid = 0.5 * (lo + hi)
        r = run(mid)
        if enough(r):
            hi, hi_r = mid, r
        else:
            lo = mid
    search = {"queries": queries, "energy_max": C_max,
              "rungs": sorted(tried, key=lambda t: t["energy"]),
              "relative_tolerance": QUERIES_TOLERANCE}
    return replace(hi_r, energy_search=search)
