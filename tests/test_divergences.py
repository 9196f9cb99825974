import math

import mpmath
import numpy as np
import pytest

from bhtcli.maths.divergences import Tilt, divergences, log_abs_expm1, log_h
from conftest import plain_divergences

mpmath.mp.dps = 60


@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0, 30.0])
def test_divergences_match_textbook_formulas(scale):
    rng = np.random.default_rng(int(scale * 10))
    A = rng.standard_normal((9, 4)) * scale
    B = rng.standard_normal((9, 4)) * scale
    x = rng.standard_normal(4)
    ref = plain_divergences(A, B, x)
    a, b = A @ x, B @ x
    dv = divergences((a + b) / 2, a - b)
    assert dv.hellinger_squared == pytest.approx(ref["h2"], rel=1e-12, abs=1e-15)
    assert dv.bhattacharyya_distance == pytest.approx(ref["D"], rel=1e-12)
    assert dv.total_variation == pytest.approx(ref["tv"], rel=1e-12)
    assert dv.kl_ab == pytest.approx(ref["kl_ab"], rel=1e-10)
    assert dv.kl_ba == pytest.approx(ref["kl_ba"], rel=1e-10)
    # Chernoff information: brute force over a grid of lambda (a lower bound, fine grid)
    lam = np.linspace(0, 1, 100001)[:, None]
    brute = np.max(-np.log(np.sum(ref["p"] ** lam * ref["q"] ** (1 - lam), axis=1)))
    assert brute - 1e-12 <= dv.chernoff_information <= brute * (1 + 1e-7) + 1e-14
    # docs/maths.md §2.1: H^2 <= TV <= sqrt(1 - BC^2) <= sqrt(2) H and D <= C <= 2D
    bc = 1 - dv.hellinger_squared
    assert dv.hellinger_squared <= dv.total_variation + 1e-15
    assert dv.total_variation <= math.sqrt(1 - bc * bc) + 1e-15
    assert dv.bhattacharyya_distance <= dv.chernoff_information + 1e-15 <= 2 * dv.bhattacharyya_distance + 2e-15


def _mp_softmax(v):
    m = max(v)
    e = [mpmath.exp(t - m) for t in v]
    s = sum(e)
    return [t / s for t in e]


def test_nearly_equal_models_match_60_digit_reference():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(6)
    d = 1e-9 * rng.standard_normal(6)
    A = [mpmath.mpf(t) for t in a]
    B = [mpmath.mpf(s) - mpmath.mpf(t) for s, t in zip(a, d)]
    P, Q = _mp_softmax(A), _mp_softmax(B)
    h2 = 1 - sum(mpmath.sqrt(p * q) for p, q in zip(P, Q))
    kl_ab = sum(p * mpmath.log(p / q) for p, q in zip(P, Q))
    kl_ba = sum(q * mpmath.log(q / p) for p, q in zip(P, Q))
    tv = sum(abs(p - q) for p, q in zip(P, Q)) / 2
    chern = max(-mpmath.log(sum(p ** l * q ** (1 - l) for p, q in zip(P, Q)))
                for l in [mpmath.mpf(i) / 200 for i in range(201)])
    dv = divergences(a - d / 2, d)
    assert 0 < dv.hellinger_squared
    assert dv.hellinger_squared == pytest.approx(float(h2), rel=1e-12)
    assert dv.kl_ab == pytest.approx(float(kl_ab), rel=1e-10)
    assert dv.kl_ba == pytest.approx(float(kl_ba), rel=1e-10)
    assert dv.total_variation == pytest.approx(float(tv), rel=1e-10)
    assert dv.chernoff_information == pytest.approx(float(chern), rel=1e-6)


def test_common_shift_is_ignored_and_never_negative():
    a = np.array([0.3, -1.2, 2.0, 0.0])
    delta = np.full(4, 5.0) + np.array([1e-12, 0, 0, 0])   # B = A + 1w^T + tiny
    dv = divergences(a, delta)
    assert dv.hellinger_squared >= 0
    assert dv.hellinger_squared < 1e-20


def test_huge_logits_do_not_overflow():
    a = np.array([1e6, 1e6 - 1.0, 0.0, -1e6])
    b = np.array([1e6 - 0.5, 1e6, 3.0, 2e6 - 2e6])
    with np.errstate(over="raise", invalid="raise"):
        dv = divergences((a + b) / 2, a - b)
    vals = [dv.hellinger_squared, dv.kl_ab, dv.kl_ba, dv.total_variation, dv.chernoff_information]
    assert all(math.isfinite(v) for v in vals)
    # Only the top two answers matter: p = softmax([0, -1]), q = softmax([-0.5, 0])
    p = np.exp([0, -1]) / np.exp([0, -1]).sum()
    q = np.exp([-0.5, 0]) / np.exp([-0.5, 0]).sum()
    assert dv.hellinger_squared == pytest.approx(1 - np.sum(np.sqrt(p * q)), rel=1e-9)


@pytest.mark.parametrize("y", [1e-300, 1e-12, -1e-8, 0.3, -0.49, 0.5, 2.0, -3.0, 50.0, -800.0, 710.0, 1e4])
def test_log_h_against_mpmath(y):
    with mpmath.workdps(1000):
        ref = mpmath.log(mpmath.expm1(mpmath.mpf(y)) - mpmath.mpf(y))
    got = log_h(np.array([y]))[0]
    assert got == pytest.approx(float(ref), rel=1e-14, abs=1e-13)


@pytest.mark.parametrize("y", [1e-300, -1e-10, 0.7, -5.0, 40.0, 800.0])
def test_log_abs_expm1_against_mpmath(y):
    with mpmath.workdps(1000):
        ref = mpmath.log(abs(mpmath.expm1(mpmath.mpf(y))))
    assert log_abs_expm1(np.array([y]))[0] == pytest.approx(float(ref), rel=1e-14)


def test_cgf_and_derivatives_against_direct_sums():
    rng = np.random.default_rng(3)
    c, delta = rng.standard_normal(7), 2 * rng.standard_normal(7)
    tilt = Tilt.from_logits(c, delta)
    pi = np.exp(c - c.max()); pi /= pi.sum()
    dbar = delta - pi @ delta
    for t in [-0.5, 0.2, 0.5, 1.3]:
        g = np.log(pi @ np.exp(t * dbar))
        w = pi * np.exp(t * dbar); w /= w.sum()
        assert float(tilt.cgf(t)) == pytest.approx(g, rel=1e-13)
        assert float(tilt.cgf_prime(t)) == pytest.approx(w @ dbar, rel=1e-12)
        assert float(tilt.cgf_second(t)) == pytest.approx(w @ (dbar - w @ dbar) ** 2, rel=1e-12)
