"""The same-model rule decides on what the softmax sees (docs/maths.md §1.2, §1.3), and every
printed ceiling is >= every printed H^2 of the same report (§4.10).

References are independent of bht: exact rational arithmetic (fractions) for whether a query
separates the stored models at all, 60-digit mpmath for H^2 at a query.
"""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bhtcli import bound, design


def h2_mp(A, B, x, dps=60):
    """1 - sum sqrt(p q) at x from the stored float values, in dps-digit arithmetic."""
    with mpmath.workdps(dps):
        a = [mpmath.fsum(mpmath.mpf(float(v)) * mpmath.mpf(float(w)) for v, w in zip(row, x)) for row in A]
        b = [mpmath.fsum(mpmath.mpf(float(v)) * mpmath.mpf(float(w)) for v, w in zip(row, x)) for row in B]
        ma, mb = max(a), max(b)
        ea = [mpmath.exp(v - ma) for v in a]
        eb = [mpmath.exp(v - mb) for v in b]
        bc = mpmath.fsum(mpmath.sqrt(u * v) for u, v in zip(ea, eb)) / mpmath.sqrt(mpmath.fsum(ea) * mpmath.fsum(eb))
        return float(1 - bc)


def column_varies_exactly(A, B, k):
    """Whether column k of A - B (the stored values, exactly) is not constant."""
    g = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip(A[:, k], B[:, k])]
    return len(set(g)) > 1


@pytest.mark.slow
def test_issue_pairs_are_told_apart():
    A = np.array([[1e5, 0.0], [1e5, 0.0]])
    B = np.array([[1e5, 6e-10], [1e5, 0.0]])
    ref = h2_mp(A, B, [0.0, 1e6])                              # 1.125e-8
    for r in (bound(A, B, 1e6), design(A, B, 1e6)):
        assert r.distinguishable and "same" not in (r.note or "")
    r = design(A, B, 1e6)
    assert r.hellinger_squared == pytest.approx(ref, rel=1e-9)
    assert ref <= bound(A, B, 1e6).certificate["hellinger_squared_max_bound"]
    rng = np.random.default_rng(0)
    A = rng.normal(size=(20, 4))
    A[:, 3] = 1e8
    B = A.copy()
    B[:, :3] += 8e-8 * rng.normal(size=(20, 3))
    b, r = bound(A, B, 1e3), design(A, B, 1e3, seed=1)
    assert b.distinguishable and r.distinguishable
    x = np.asarray(r.query)
    ref = h2_mp(A, B, x)
    assert ref > 1e-10 and r.hellinger_squared == pytest.approx(ref, rel=1e-6)
    assert r.hellinger_squared <= b.certificate["hellinger_squared_max_bound"]


@st.composite
def large_pairs(draw):
    """Rows of size ~scale on top of a large part the softmax cannot see (a constant column, or
    a common vector added to every row of both models), B = A plus a small change or a common
    shift (exact, on a dyadic grid, or rounded)."""
    n, d = draw(st.integers(2, 6)), draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    big = 10.0 ** draw(st.integers(2, 12))
    A = np.round(scale * rng.normal(size=(n, d)) * 64) / 64       # dyadic: shifts can be exact
    hide = draw(st.sampled_from(["column", "row"]))
    if hide == "column":
        A[:, -1] = big
    else:
        A = A + big * rng.normal(size=d)
    kind = draw(st.sampled_from(["change", "change", "exact_shift", "rounded_shift"]))
    if kind == "change":
        B = A.copy()
        cols = d - 1 if hide == "column" else d
        rel = 10.0 ** draw(st.integers(-10, -4))
        B[:, :cols] += rel * scale * rng.normal(size=(n, cols))
    elif kind == "exact_shift":
        B = A + np.ldexp(1.0, int(rng.integers(-3, 3))) * np.ones(d)
        if not np.all((B - A) == (B - A)[0]):
            B = A.copy()
    else:
        B = A + rng.normal(size=d)
    E = 10.0 ** draw(st.floats(-1, 3))
    E = min(E, 1e11 / np.abs(A).sum(axis=1).max())    # bht refuses logits beyond 1e12
    return A, B, E


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(large_pairs())
def test_never_same_when_a_query_separates_them(case):
    A, B, E = case
    b = bound(A, B, E)
    separates = [k for k in range(A.shape[1]) if column_varies_exactly(A, B, k)]
    if not b.distinguishable:
        # "same" exactly, or equal up to rounding of the rows the softmax sees: then the ceiling
        # still bounds what exact arithmetic gives, at every query
        exact = "up to float64 rounding" not in b.note
        assert (not separates) == exact
        for k in separates:
            x = np.zeros(A.shape[1])
            x[k] = E
            assert h2_mp(A, B, x) <= b.certificate["hellinger_squared_max_bound"]
        return
    r = design(A, B, E, starts=8)
    assert r.distinguishable
    # a query along a column that separates them: bht's design does at least as well, and
    # the ceiling is above it (60-digit reference)
    best = 0.0
    for k in separates:
        x = np.zeros(A.shape[1])
        x[k] = E
        best = max(best, h2_mp(A, B, x))
    assert best <= b.certificate["hellinger_squared_max_bound"]
    assert r.hellinger_squared <= r.certificate["hellinger_squared_max_bound"]
    visible = max(np.ptp(A - A[0], axis=0).max(), np.ptp(B - B[0], axis=0).max())
    if best > 1e-280 and np.ptp(A - B, axis=0).max() > 1e-9 * visible:
        assert r.hellinger_squared >= 0.5 * best          # a difference 1e-9 relative is found


def test_same_models_stay_same():
    rng = np.random.default_rng(4)
    A = np.round(rng.normal(size=(6, 3)) * 64) / 64
    A[:, 2] = 1e8
    b = bound(A, A + 0.25, 2.0)                           # exact: the message says so
    assert not b.distinguishable and b.certificate["hellinger_squared_max_bound"] == 0
    assert "every row of A - B is the same vector" in b.note
    B = A + rng.normal(size=3)                            # rounded shift
    for k in range(2):
        assert not column_varies_exactly(A, B, k) or bound(A, B, 2.0).certificate["hellinger_squared_max_bound"] > 0


# --- one guarded rounding: design_over_bound <= 1 ----------------------------------------------
def check_report(r):
    c = r.certificate
    assert c["design_over_bound"] is None or c["design_over_bound"] <= 1.0
    top = c["hellinger_squared_max_bound"]
    printed = [r.hellinger_squared] + list(r.solver.get("local_maxima_values") or [])
    for ceiling in [top] + [v for v in (c["ceilings"] or {}).values() if v is not None]:
        assert all(h <= ceiling for h in printed)
    assert max(r.kl_ab, r.kl_ba) <= c["kl_max_bound"]


@pytest.mark.slow
def test_n2_antipodal_pairs_at_tiny_budgets():
    # B = -A, n = 2, d = 1: the range bound is tight to ~1e-16 relative and the design's float64
    # H^2 used to print above it (24 of these 200 before, e.g. ratio 1.0000000000000013)
    rng = np.random.default_rng(1)
    for _ in range(60):
        A = rng.normal(size=(2, 1))
        E = 10 ** rng.uniform(-9, -6)
        r = design(A, -A, E, starts=4, seed=0)
        check_report(r)
        # and the ceiling is sound against the 60-digit supremum (at x = +-E for n = 2)
        sup = max(h2_mp(A, -A, [E]), h2_mp(A, -A, [-E]))
        assert sup <= r.certificate["hellinger_squared_max_bound"]
        assert sup <= bound(A, -A, E).certificate["hellinger_squared_max_bound"]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 5), st.integers(1, 3), st.integers(0, 2 ** 31), st.floats(-9, 1),
       st.sampled_from(["antipodal", "random", "close"]))
def test_design_over_bound_is_at_most_one(n, d, seed, log_e, kind):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, d))
    B = {"antipodal": -A, "random": rng.normal(size=(n, d)),
         "close": A + 1e-6 * rng.normal(size=(n, d))}[kind]
    check_report(design(A, B, 10.0 ** log_e, starts=4, seed=seed))


def test_rounding_only_difference_keeps_a_positive_sound_ceiling():
    """B = A + 4 stored in float64: the computed rows of A - B are all (4, 4), but the stored
    values differ from an exact shift by their rounding, which a query can see (H^2 ~ 7e-34 in
    60-digit arithmetic); the ceiling must cover it, not print 0."""
    A = np.array([[0.14859291, -143.94271797], [2.08609291, -141.16146797]])
    B = A + 4.0
    b = bound(A, B, 1.0)
    assert not b.distinguishable and "up to float64 rounding" in b.note
    x = np.array([1.0, 0.0])
    assert 0 < h2_mp(A, B, x) <= b.certificate["hellinger_squared_max_bound"]


def test_a_change_in_a_small_entry_is_not_rounding():
    """A 5e-10 change where A's entry is 0, under rows of size 1e5 (16 eps of what the softmax
    sees): no rounding of B = A + 1 w^T makes it (row 0 pins w_2 = 0), and x = (0, -1e6) moves
    logit 1 by 5e-4, 16 ulps of the logits. bht used to call the pair the same up to rounding;
    the design reaches the range ceiling (E diam)^2 / 32 (60-digit reference)."""
    A = np.array([[1e5, 0.0], [1e5, 0.0], [0.0, 1e5]])
    B = A.copy()
    B[1, 1] = 5e-10
    E = 1e6
    b, r = bound(A, B, E), design(A, B, E)
    assert b.distinguishable and r.distinguishable and r.samples["predicted"] is not None
    ceiling = b.certificate["hellinger_squared_max_bound"]
    assert h2_mp(A, B, [707106.7812289739, 707106.7811441211]) == pytest.approx(3.906e-9, rel=1e-3)
    ref = h2_mp(A, B, r.query)
    assert r.hellinger_squared == pytest.approx(ref, rel=1e-5)
    assert ref >= 0.999 * h2_mp(A, B, [0.0, -E]) and ref <= ceiling
    assert h2_mp(A, B, [0.0, -E]) == pytest.approx((E * 5e-10) ** 2 / 32, rel=1e-6)


@pytest.mark.parametrize("ulps", [2.0, 8.0, 30.0])
def test_rounded_shifts_stay_same_and_planted_changes_do_not(ulps):
    """Rows of size ~1e5 plus a column of zeros: B = A + 1 w^T in float64 is the same up to
    rounding; a change of `ulps` x eps x 1e5 planted where A's entry is 0 is not."""
    rng = np.random.default_rng(int(ulps))
    A = np.hstack([1e5 * rng.normal(size=(5, 2)), np.zeros((5, 1))])
    B = A + np.array([3.7, -1.3, 0.0])
    assert np.any((A - B) != (A - B)[0])                  # rounded: not an exact shift
    same = bound(A, B, 1.0)
    assert not same.distinguishable and "up to float64 rounding" in same.note
    B[2, 2] = ulps * 2.2e-16 * 1e5
    x = np.array([0.0, 0.0, 1.0])
    assert h2_mp(A, B, x) > 0
    b = bound(A, B, 1.0)
    assert b.distinguishable and h2_mp(A, B, x) <= b.certificate["hellinger_squared_max_bound"]


@pytest.mark.parametrize("k", [5, 7, 9])
def test_differences_at_the_rounding_level_of_a_minus_b_are_evaluated_exactly(k):
    """a = 500 (+ k ulps), b = -500: a - b = 1000 + k ulp(500) is not a float (ulp(1000) is 2
    ulp(500)), so fl(A - B) rounds the only difference the softmax sees by up to half an ulp of
    1000. The pair is no rounded shift (k ulps > the two entries' eps max(|a|, |b|)), so it is
    designed; bht printed H^2 0.64x (k = 5) and 1.31x (k = 7) the 60-digit value at its own query,
    and a ceiling below it. The rows relative to the first, from exact differences, fix both."""
    u = np.spacing(500.0)
    A, B = np.array([[500.0], [500.0 + k * u]]), np.array([[-500.0], [-500.0]])
    r, b = design(A, B, 1.0), bound(A, B, 1.0)
    assert r.distinguishable and b.distinguishable
    ref = h2_mp(A, B, r.query)
    assert ref == pytest.approx((k * u) ** 2 / 32, rel=1e-9)          # p = (1/2, 1/2) at x = +-1
    assert r.hellinger_squared == pytest.approx(ref, rel=1e-12)
    assert ref <= b.certificate["hellinger_squared_max_bound"]
    assert ref <= r.certificate["hellinger_squared_max_bound"]
    # the same with a column of 1e8 and a shift of 1e3 in it, and after a float32 search (its
    # report is one streamed float64 pass, logits_at_each)
    A2 = np.array([[500.0, 1e8], [500.0 + k * u, 1e8], [500.0, 1e8]])
    B2 = np.array([[-500.0, 1e8 + 1e3], [-500.0, 1e8 + 1e3], [-500.0 + 2 * u, 1e8 + 1e3]])
    for dtype in ("float64", "float32"):
        r = design(A2, B2, 1.0, dtype=dtype)
        assert r.hellinger_squared == pytest.approx(h2_mp(A2, B2, r.query), rel=1e-9)


def test_reference_differences_are_exact_where_a_common_part_dwarfs_the_rows():
    """maths/differences.py against exact rational arithmetic: with a common part 1e8 times the
    differences between rows every entry is within 4 ulps of g_i - g_0 (fl(a - b) alone is off
    by up to half an ulp of the common part); elsewhere within 600 eps of the column's spread;
    any block size gives the same rows."""
    from bhtcli.maths.differences import reference_differences
    rng = np.random.default_rng(5)
    a = rng.normal(size=(40, 3))
    b = a + np.array([1e3, -3e2, 0.0])          # columns 0, 1: rounded shifts; 2: exact
    b[:, 2] += 1e-3 * rng.normal(size=40)
    exact = np.array([[float((Fraction(a[i, k]) - Fraction(b[i, k])) - (Fraction(a[0, k]) - Fraction(b[0, k])))
                       for k in range(3)] for i in range(40)])
    got, _ = reference_differences(a, b)
    assert np.all(np.abs(got[:, :2] - exact[:, :2]) <= 4 * np.spacing(np.abs(exact[:, :2]) + 1e-300))
    assert np.max(np.abs(got[:, 2] - exact[:, 2])) <= 600 * 2.2e-16 * np.ptp(exact[:, 2])
    plain = (a - b) - (a[0] - b[0])
    assert np.max(np.abs(plain[:, :2] - exact[:, :2])) > 1e3 * np.max(np.abs(got[:, :2] - exact[:, :2]))
    ref, parts = None, []
    for s in range(0, 40, 7):
        blk, ref = reference_differences(a[s:s + 7], b[s:s + 7], ref)
        parts.append(blk)
    assert np.allclose(np.vstack(parts), got, rtol=0, atol=4 * np.spacing(1.0) * np.abs(exact).max())


def test_identical_models_are_called_identical():
    """Bit-identical A and B: the reason says "identical", not the common shift B = A + 1 w^T
    (which stays the reason of a shift that is exact)."""
    from bhtcli import api
    rng = np.random.default_rng(8)
    A = np.round(rng.normal(size=(6, 3)) * 64) / 64
    same = bound(A, A.copy(), 1.0)
    assert not same.distinguishable and "A and B are identical (every value equal)" in same.note
    assert "1 w^T" not in same.note
    assert "every row of A - B is the same vector" in bound(A, A + 0.25, 1.0).note
    assert "identical (every value equal" in api.design(A, A.copy(), 1.0).note
