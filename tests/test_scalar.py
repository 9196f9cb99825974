"""The plain-Python scalar tools (bhtcli/maths/scalar.py) against scipy's."""
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.fft import next_fast_len as scipy_next_fast_len
from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr as scipy_log_ndtr

from bhtcli.maths.scalar import log_ndtr, minimize_convex, next_fast_len, root_bracketed


def _log_phi_reference(x):
    with mpmath.workdps(400):
        return float(mpmath.log(mpmath.ncdf(x)))


@settings(max_examples=150, deadline=None)
@given(st.floats(-1e3, 37))
def test_log_ndtr_matches_400_digit_arithmetic_in_both_tails(x):
    # as accurate as scipy's: a few ulps on the left, ~1e-13 relative far right (erfc's accuracy)
    want = _log_phi_reference(x)
    assert log_ndtr(x) == pytest.approx(want, rel=3e-13, abs=1e-300)
    assert log_ndtr(x) == pytest.approx(float(scipy_log_ndtr(x)), rel=3e-13, abs=1e-300)


@pytest.mark.parametrize("x", [-1e6, -200.0, -38.5, -30.0, -29.999, -5.0, 0.0, 1e-300, 5.9, 6.0, 8.3, 37.0])
def test_log_ndtr_at_the_switch_points(x):
    assert log_ndtr(x) == pytest.approx(_log_phi_reference(x), rel=3e-13, abs=1e-300)


@settings(max_examples=100, deadline=None)
@given(st.floats(-5, 5), st.floats(0.1, 10), st.integers(1, 7))
def test_root_bracketed_finds_brentqs_root(shift, scale, power):
    f = lambda x: scale * (x - shift) ** (2 * power - 1) + 1e-3 * (x - shift)
    a, b = shift - 7.0, shift + 3.0
    assert root_bracketed(f, a, b, xtol=1e-12) == pytest.approx(brentq(f, a, b, xtol=1e-12), abs=1e-9)


def test_root_bracketed_refuses_an_interval_without_a_sign_change():
    with pytest.raises(ValueError):
        root_bracketed(lambda x: x * x + 1, -1.0, 1.0)
    assert root_bracketed(lambda x: x, 0.0, 1.0) == 0.0


@settings(max_examples=100, deadline=None)
@given(st.floats(-0.5, 1.5), st.floats(0.1, 5))
def test_minimize_convex_matches_scipys_bounded_minimum(centre, curvature):
    f = lambda t: curvature * (t - centre) ** 2 + math.exp(t) * 1e-2
    x, fx = minimize_convex(f, 0.0, 1.0, xtol=1e-10)
    ref = minimize_scalar(f, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-10})
    assert fx <= float(ref.fun) + 1e-9
    assert x == pytest.approx(float(ref.x), abs=1e-4)


@pytest.mark.parametrize("n", [1, 2, 7, 97, 1000, 4097, 123457, 10 ** 6 + 1])
def test_next_fast_len_matches_scipy(n):
    assert next_fast_len(n) == scipy_next_fast_len(n, real=True)


def test_lattice_counts_unchanged_by_numpy_fft():
    """The predicted count convolves with numpy's FFT: the same count as scipy's."""
    from bhtcli.maths.counts import query_counts
    from bhtcli.maths.divergences import Tilt, divergences_from_tilt
    rng = np.random.default_rng(3)
    for _ in range(5):
        c, delta = rng.standard_normal(30), 0.3 * rng.standard_normal(30)
        tilt = Tilt.from_logits(c, delta)
        d = divergences_from_tilt(tilt)
        counts = query_counts(tilt, d.bhattacharyya_distance, 0.05)
        assert counts.lower <= counts.predicted <= counts.upper


@settings(max_examples=100, deadline=None)
@given(st.floats(-5, 5), st.floats(0.1, 10), st.integers(1, 7), st.sampled_from([1e-12, 1e-9, 1e-7]))
def test_root_bracketed_is_brentq_step_for_step(shift, scale, power, xtol):
    # the same root bit for bit in as many evaluations (the counts' nested roots took 4x as
    # many with a regula falsi + bisection loop)
    calls = []

    def f(x):
        calls.append(x)
        return scale * (x - shift) ** (2 * power - 1) + 1e-3 * (x - shift)
    a, b = shift - 7.0, shift + 3.0
    got = root_bracketed(f, a, b, xtol=xtol)
    ours = len(calls)
    want, info = brentq(f, a, b, xtol=xtol, full_output=True)
    assert got == want and ours == info.function_calls


def test_first_passing_is_the_smallest_passing_integer():
    from bhtcli.maths.scalar import first_passing
    for target in (1, 2, 7, 64, 1000, 10 ** 17 + 3):
        calls = []
        ok = lambda N: calls.append(N) or N >= target
        assert first_passing(ok, target - 1, max(target, 2 ** 60) if target > 10 ** 6 else 1024) == target
        assert all(c > target - 1 for c in calls)          # never asks about the failing end
    assert first_passing(lambda N: True, 4, 5) == 5         # an empty range: hi, no call
