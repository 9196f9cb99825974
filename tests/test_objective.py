"""The optimiser's objective (SoftmaxPair.evaluate -> divergences.bhattacharyya_weights):
D and its gradient weights against 60-digit references, the log-space Tilt form, the former
plain/tilt split, finite differences, and across block sizes, shapes and precisions."""
import mpmath
import numpy as np
import pytest

from bhtcli.maths.divergences import FUSED_SPREAD, Tilt, bhattacharyya_weights, column_max
from bhtcli.models.softmax import SoftmaxPair, _softmax_cols
from objective_reference import old_weights, softmax_cols, tilt_weights

mpmath.mp.dps = 60


def mp_reference(c, delta):
    """(D, w_c, w_g) of every column in 400-digit arithmetic from the float64 inputs (enough
    for D down to 1e-300 even though 1 - BC cancels)."""
    with mpmath.workdps(400):
        return _mp_reference(c, delta)


def _mp_reference(c, delta):
    n, k = c.shape
    D, wc, wg = np.empty(k), np.empty((n, k)), np.empty((n, k))
    for j in range(k):
        cj = [mpmath.mpf(float(v)) for v in c[:, j]]
        dj = [mpmath.mpf(float(v)) for v in delta[:, j]]
        a = [ci + di / 2 for ci, di in zip(cj, dj)]
        b = [ci - di / 2 for ci, di in zip(cj, dj)]

        def soft(z):
            m = max(z)
            e = [mpmath.exp(zi - m) for zi in z]
            s = mpmath.fsum(e)
            return [ei / s for ei in e]
        pa, pb, pc = soft(a), soft(b), soft(cj)
        D[j] = float(-mpmath.log(mpmath.fsum(mpmath.sqrt(p * q) for p, q in zip(pa, pb))))
        wc[:, j] = [float((p + q) / 2 - r) for p, q, r in zip(pa, pb, pc)]
        wg[:, j] = [float((p - q) / 4) for p, q in zip(pa, pb)]
    return D, wc, wg


def columnwise(w, ref):
    """max |w - ref| over a column relative to max |ref| there (the gradient's scale)."""
    scale = np.abs(ref).max(axis=0)
    err = np.abs(w - ref).max(axis=0)
    return np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), err)


def case(seed, n, k, c_scale, d_scale, shift=0.0):
    rng = np.random.default_rng(seed)
    c = c_scale * rng.standard_normal((n, k)) + shift
    delta = d_scale * rng.standard_normal((n, k))
    return c, delta


CASES = [  # (c scale, delta scale): ordinary, nearly equal models, large logits, far apart
    (1.0, 1e-2), (3.0, 0.1), (10.0, 1e-6), (1.0, 1e-9), (30.0, 1.0), (1e4, 1e-3),
    (1e6, 1e-4), (2.0, 8.0), (0.5, 18.0),
]


@pytest.mark.parametrize("c_scale,d_scale", CASES)
def test_matches_60_digit_reference(c_scale, d_scale):
    c, delta = case(int(c_scale * 7 + d_scale * 3) % 1000, 40, 4, c_scale, d_scale, shift=123.0)
    D, wc, wg = bhattacharyya_weights(c, delta)
    rD, rwc, rwg = mp_reference(c, delta)
    pos = rD > 1e-300
    assert np.all(np.abs(D - rD) <= 1e-12 * rD + 1e-300), (D, rD)
    assert np.all(D[~pos] == 0.0) if (~pos).any() else True
    assert np.all(columnwise(wc, rwc) <= 1e-12)
    assert np.all(columnwise(wg, rwg) <= 1e-12)


@pytest.mark.parametrize("c_scale,d_scale", CASES + [(1.0, 30.0), (3.0, 100.0)])
def test_agrees_with_the_log_space_tilt_form(c_scale, d_scale):
    """Larger n (several row blocks, a ragged last block) against Tilt.gradient_weights,
    including columns wide enough to be routed to it. The Tilt form itself is good to ~1e-11
    in the weights (its sinh z of a z computed from log-sums), and in nearly saturated columns
    it drops the top row's weight (its dbar there rounds to 0 when the other rows' mass is
    below eps): D is compared everywhere, the weights where D > 1e-12 (the 400-digit test
    covers the saturated ones)."""
    c, delta = case(5, 3001, 6, c_scale, d_scale)
    D, wc, wg = bhattacharyya_weights(c, delta, block=600)
    rD, rwc, rwg = Tilt.from_logits(c, delta).gradient_weights()
    assert np.allclose(D, rD, rtol=1e-12, atol=1e-300)
    live = rD > 1e-12
    assert np.all(columnwise(wc, rwc)[live] <= 1e-10)
    assert np.all(columnwise(wg, rwg)[live] <= 1e-10)


@pytest.mark.slow
def test_full_column_against_60_digits_where_the_tilt_form_is_rougher():
    """A 3001-row column with logits ~30 and delta ~1 (spread ~7): the fused weights are
    within 1e-14 of the 400-digit reference (the Tilt form's w_g is ~3e-11 off here)."""
    c, delta = case(5, 3001, 6, 30.0, 1.0)
    c, delta = c[:, [5]], delta[:, [5]]
    rD, rwc, rwg = mp_reference(c, delta)
    D, wc, wg = bhattacharyya_weights(c, delta, block=600)
    assert D[0] == pytest.approx(rD[0], rel=1e-13)
    assert columnwise(wc, rwc)[0] <= 1e-14 and columnwise(wg, rwg)[0] <= 1e-14


def test_saturated_columns_and_single_rows():
    """One-hot midpoint softmax (logits 1e4 apart): D and the weights are exactly 0, as in
    the Tilt form; a one-row model has D = 0; a two-row one matches the reference."""
    c = np.array([[1e4, 0.0], [0.0, 1e4], [-1e4, 0.0]])
    delta = np.array([[0.3, -0.2], [0.1, 0.4], [2.0, 0.0]])
    D, wc, wg = bhattacharyya_weights(c, delta)
    rD, rwc, rwg = Tilt.from_logits(c, delta).gradient_weights()
    assert np.array_equal(D, rD) and np.all(D == 0.0)
    assert np.all(wc == 0.0) and np.all(wg == 0.0)
    D1, wc1, wg1 = bhattacharyya_weights(np.array([[5.0]]), np.array([[0.7]]))
    assert D1[0] == 0.0 and wc1[0, 0] == 0.0 and wg1[0, 0] == 0.0
    c2, d2 = np.array([[0.3], [-0.1]]), np.array([[0.5], [-0.25]])
    rD2, rwc2, rwg2 = mp_reference(c2, d2)
    D2, wc2, wg2 = bhattacharyya_weights(c2, d2)
    assert D2[0] == pytest.approx(rD2[0], rel=1e-13)
    assert np.allclose(wc2, rwc2, rtol=1e-12, atol=1e-17) and np.allclose(wg2, rwg2, rtol=1e-12)


def test_vectors_blocks_and_column_order():
    """(n,) input gives the (n, 1) column; the block size and the column order change nothing
    beyond rounding; a column's result does not depend on its neighbours (wide or not)."""
    c, delta = case(3, 2500, 5, 2.0, 0.05)
    delta[:, 2] *= 1000.0                       # wide: routed to the Tilt form
    D, wc, wg = bhattacharyya_weights(c, delta)
    for block in (16, 1000, 10**9):
        Db, wcb, wgb = bhattacharyya_weights(c, delta, block=block)
        assert np.allclose(Db, D, rtol=1e-13) and np.all(columnwise(wcb, wc) <= 1e-13)
        assert np.all(columnwise(wgb, wg) <= 1e-13)
    for j in range(5):
        Dj, wcj, wgj = bhattacharyya_weights(c[:, j], delta[:, j])
        assert Dj.shape == () and wcj.shape == (2500,)
        assert Dj == pytest.approx(D[j], rel=1e-13)
        assert np.max(np.abs(wcj - wc[:, j])) <= 1e-13 * np.abs(wc[:, j]).max()
    perm = [4, 2, 0, 3, 1]
    Dp, _, wgp = bhattacharyya_weights(c[:, perm], delta[:, perm])
    assert np.allclose(Dp, D[perm], rtol=1e-13) and np.all(columnwise(wgp, wg[:, perm]) <= 1e-13)


def test_spread_rule_and_routing():
    """Spread just below FUSED_SPREAD stays in the fused form and is still accurate; a column
    with a NaN gives NaN (as the Tilt form does), never a silent number."""
    rng = np.random.default_rng(11)
    c = rng.standard_normal((200, 2))
    delta = rng.uniform(0.0, 1.0, (200, 2))
    delta[:, 0] *= (FUSED_SPREAD - 1e-9) / np.ptp(delta[:, 0])
    delta[:, 1] *= 2.0 * FUSED_SPREAD / np.ptp(delta[:, 1])
    D, wc, wg = bhattacharyya_weights(c, delta)
    rD, rwc, rwg = mp_reference(c[:40], delta[:40])      # a sub-model checks the formulas
    D40, wc40, wg40 = bhattacharyya_weights(c[:40], delta[:40])
    assert np.allclose(D40, rD, rtol=1e-12) and np.all(columnwise(wg40, rwg) <= 1e-12)
    assert np.all(columnwise(wc40, rwc) <= 1e-12)
    tD, twc, twg = Tilt.from_logits(c, delta).gradient_weights()
    assert np.allclose(D, tD, rtol=1e-12)
    bad = delta.copy()
    bad[7, 1] = np.nan
    with np.errstate(invalid="ignore"):
        Dbad = bhattacharyya_weights(c, bad)[0]
    assert np.isnan(Dbad[1]) and np.isfinite(Dbad[0])


def test_the_former_plain_form_was_less_accurate_and_the_new_one_is_not():
    """Where the old optimiser used three plain softmaxes (D >= 4.5e-5 (1 + max|delta|)),
    its error grows with the size of the log-sum-exps (max|c| + log n), not max|delta|
    (docs/maths.md §2.5): ~1e-9 relative at logits ~3000; the fused form keeps ~1e-16."""
    c, delta = case(2, 40, 3, 1.0, 0.05, shift=3000.0)
    rD = mp_reference(c, delta)[0]
    oD = old_weights(c, delta)[0]
    nD = bhattacharyya_weights(c, delta)[0]
    assert np.all(rD >= 4.5e-5 * (1.0 + np.abs(delta).max(axis=0)))   # the plain branch
    assert np.max(np.abs(nD - rD) / rD) <= 1e-14
    assert 1e-11 <= np.max(np.abs(oD - rD) / rD) <= 1e-7


def test_evaluate_gradient_against_finite_differences():
    """grad = C^T w_c + G^T w_g from evaluate matches central differences of the value."""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((300, 5))
    B = A + 0.05 * rng.standard_normal((300, 5))
    pair = SoftmaxPair(A, B)
    x = 2.0 * rng.standard_normal(5)
    D, g = pair.value_and_grad(x[:, None])
    h = 1e-5
    fd = np.array([(pair.value((x + h * e)[:, None])[0] - pair.value((x - h * e)[:, None])[0]) / (2 * h)
                   for e in np.eye(5)])
    assert np.allclose(g[:, 0], fd, rtol=1e-6, atol=1e-9 * np.abs(fd).max())


def test_float32_pair_agrees_to_the_products_precision():
    """A float32 pair: the elementwise work adds nothing to the products' own error (its D and
    weights equal the float64 Tilt form's on its own float32-product logits to 1e-12), and
    those agree with the float64 pair's to the float32 products' precision."""
    rng = np.random.default_rng(9)
    A = rng.standard_normal((2000, 16)) / 4.0
    B = A + 1e-2 * rng.standard_normal((2000, 16)) / 4.0
    X = rng.standard_normal((16, 6))
    X *= 10.0 / np.linalg.norm(X, axis=0)
    p64, p32 = SoftmaxPair(A, B), SoftmaxPair(A, B, dtype="float32")
    D32, wc32, wg32 = p32.evaluate(X)
    tD, twc, twg = tilt_weights(*p32.logits(X))
    assert np.allclose(D32, tD, rtol=1e-12)
    assert np.all(columnwise(wc32, twc) <= 1e-10) and np.all(columnwise(wg32, twg) <= 1e-10)
    D64, wc64, wg64 = p64.evaluate(X)
    assert np.allclose(D32, D64, rtol=1e-4)
    assert np.all(columnwise(wg32, wg64) <= 1e-4)


def test_kl_objective_and_softmax_helpers_unchanged():
    """_softmax_cols (fold-based max, BLAS column sums) equals the plain formula, and the KL
    objective still matches direct sums."""
    c, delta = case(8, 3000, 7, 4.0, 0.3)
    lse, p = _softmax_cols(c)
    rlse, rp = softmax_cols(c)
    assert np.allclose(lse, rlse, rtol=1e-14) and np.allclose(p, rp, rtol=1e-13, atol=1e-300)
    l1, p1 = _softmax_cols(c[:, 0])
    assert l1 == pytest.approx(rlse[0], rel=1e-14) and np.allclose(p1, rp[:, 0], rtol=1e-13)
    assert np.array_equal(column_max(c), c.max(axis=0))
    rng = np.random.default_rng(1)
    A = rng.standard_normal((50, 3))
    B = A + 0.2 * rng.standard_normal((50, 3))
    X = rng.standard_normal((3, 4))
    kl = SoftmaxPair(A, B, objective="kl").evaluate(X)[0]
    a, b = A @ X, B @ X
    pa = np.exp(a - a.max(0)) / np.exp(a - a.max(0)).sum(0)
    pb = np.exp(b - b.max(0)) / np.exp(b - b.max(0)).sum(0)
    assert np.allclose(kl, np.sum(pa * np.log(pa / pb), axis=0), rtol=1e-9)


@pytest.mark.parametrize("c_scale,d_scale", [(1.0, 1e-2), (10.0, 1e-6), (1e6, 1e-4)])
def test_agrees_with_the_former_evaluate(c_scale, d_scale):
    """The former evaluate (plain softmaxes where D was large, Tilt elsewhere) and the new one
    agree to the former's own accuracy."""
    c, delta = case(6, 1500, 5, c_scale, d_scale)
    D, wc, wg = bhattacharyya_weights(c, delta)
    oD, owc, owg = old_weights(c, delta)
    tD = tilt_weights(c, delta)[0]
    assert np.allclose(D, tD, rtol=1e-12, atol=1e-300)
    assert np.allclose(D, oD, rtol=1e-9, atol=1e-300)
    assert np.all(columnwise(wg, owg) <= 1e-9)
