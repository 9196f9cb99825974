"""The K-way design's cost-saving paths against the direct computations they replace: the
stacked matrix built in the stored precision, the objectives' values and gradients formed in
shared buffers against each pair's own (a SoftmaxPair per pair), and the pass-time taken from
the search's own products."""
import numpy as np
import pytest

from bhtcli.models.kway import KModels, SoftBottleneck, WeightedSum, soft_minimum
from bhtcli.models.softmax import SoftmaxPair


def _stacked_reference(models, dtype):
    """[M_1; M_2 - M_1; ...] from float64 differences rounded once to `dtype`, row-centred
    as KModels centres them."""
    n = models[0].shape[0]
    first = np.asarray(models[0], np.float64)
    diffs = [np.asarray(m, np.float64) - first for m in models[1:]]
    S = np.concatenate([first] + diffs).astype(dtype)
    for k in range(len(models)):
        block = S[k * n:(k + 1) * n]
        block -= block.mean(axis=0, dtype=np.float64).astype(dtype)
    return S


@pytest.mark.parametrize("stored,given", [(np.float32, np.float32), (np.float32, np.float64),
                                          (np.float64, np.float32), (np.float64, np.float64)])
def test_stacked_matrix_is_the_float64_difference_rounded_once(stored, given):
    rng = np.random.default_rng(11)
    # several scales, and rows that nearly cancel: a float32 difference must equal the
    # float64 one rounded to float32 bit for bit (double rounding is exact here)
    A = rng.standard_normal((9000, 24)) * 10.0 ** rng.integers(-3, 4, size=(9000, 1))
    models = [A] + [A * (1 + 10.0 ** -rng.integers(3, 8)) + 1e-4 * rng.standard_normal(A.shape)
                    for _ in range(3)]
    models = [m.astype(given) for m in models]
    km = KModels(models, dtype=np.dtype(stored).name)
    assert km.S.dtype == stored
    assert np.array_equal(km.S, _stacked_reference(models, stored))


def _pair_gradients(models, X):
    """(D, grad D) of every pair from its own SoftmaxPair (float64): P x k and P x d x k."""
    K = len(models)
    Ds, Gs = [], []
    for i in range(K):
        for j in range(i + 1, K):
            D, g = SoftmaxPair(models[i], models[j]).value_and_grad(X)
            Ds.append(D)
            Gs.append(g)
    return np.array(Ds), np.array(Gs)


@pytest.mark.parametrize("K,scale", [(3, 0.3), (4, 1e-3), (5, 1e-6)])
def test_objectives_equal_the_pairs_own_values_and_gradients(K, scale):
    rng = np.random.default_rng(K)
    n, d = 400, 10
    A = rng.standard_normal((n, d))
    models = [A] + [A + scale * rng.standard_normal((n, d)) for _ in range(K - 1)]
    X = 2.0 * rng.standard_normal((d, 5))
    km = KModels(models)
    D, G = _pair_gradients(models, X)
    assert np.allclose(km.pair_distances(X), D, rtol=1e-10, atol=0)
    lam = rng.random(len(km.pairs))
    f, g = WeightedSum(km, lam).value_and_grad(X)
    assert np.allclose(f, lam @ D, rtol=1e-10, atol=0)
    ref = np.einsum("p,pdk->dk", lam, G)
    assert np.max(np.abs(g - ref)) <= 1e-9 * np.max(np.abs(ref))
    for s in (4.0, 1024.0):
        f, g = SoftBottleneck(km, s).value_and_grad(X)
        fs, w = soft_minimum(D, s)
        ref = np.einsum("pk,pdk->dk", fs * w / D, G)
        assert np.allclose(f, fs, rtol=1e-10, atol=0)
        assert np.max(np.abs(g - ref)) <= 1e-9 * np.max(np.abs(ref))


def test_pass_seconds_times_the_search_own_products():
    rng = np.random.default_rng(2)
    models = [rng.standard_normal((300, 8)) for _ in range(3)]
    km = KModels(models)
    ps = km.pass_seconds()                 # nothing ran yet: one product each way, not counted
    assert ps > 0 and km.passes == 0
    f, g = SoftBottleneck(km, 16.0).value_and_grad(rng.standard_normal((8, 4)))
    assert km.passes == 2
    ps = km.pass_seconds()
    assert km.passes == 2 and ps == km._first_seconds["forward"] + km._first_seconds["backward"] > 0
    SoftBottleneck(km, 16.0).value_and_grad(rng.standard_normal((8, 2)))
    assert km.passes == 4 and km.pass_seconds() == ps        # the first ones, kept


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_block_gram_is_the_row_dot_products_of_the_blocks(dtype):
    from bhtcli.models.kway import block_gram
    rng = np.random.default_rng(4)
    models = [rng.standard_normal((700, 33)) * 10.0 ** k for k in range(-1, 3)]
    km = KModels(models, dtype=dtype)
    gram = block_gram(km, rows=64)
    n = km.n
    for k in range(km.K):
        for l in range(km.K):
            ref = np.einsum("ij,ij->i", km.S[k * n:(k + 1) * n], km.S[l * n:(l + 1) * n],
                            dtype=np.float64)
            assert np.array_equal(gram[:, k, l], ref)


def test_combine_is_the_direct_expression_bit_for_bit():
    """The in-place combination gives the bits of the direct expressions (so the search takes
    the same path as before it was made in place)."""
    rng = np.random.default_rng(9)
    models = [rng.standard_normal((200, 6)) for _ in range(4)]
    km = KModels(models)
    X = rng.standard_normal((6, 3))
    D, ws = km.pair_distances(X, weights=True)
    mu = rng.random(D.shape)
    n = km.n
    w_r, w_delta = np.zeros((n, 3)), np.zeros((3 * n, 3))
    for p, (i, j) in enumerate(km.pairs):
        w_c, w_g = ws[p]
        w_r += mu[p] * w_c
        for model, sign in ((i, 1.0), (j, -1.0)):
            if model > 0:
                w_delta[(model - 1) * n:model * n] += mu[p] * (0.5 * w_c + sign * w_g)
    got = km.combine(mu, ws)
    assert np.array_equal(got[0], w_r) and np.array_equal(got[1], w_delta)


def test_residual_inside_is_the_subspace_part_of_the_kkt_residual():
    """At x = Q y on the sphere, the KKT residual splits into the part in span(Q) and the
    part outside it (Pythagoras): residual_inside is the first, checked against both."""
    from bhtcli.search.kkt import kkt_residuals
    from bhtcli.search.sketch import residual_inside
    rng = np.random.default_rng(6)
    d, E = 30, 2.0
    Q = np.linalg.qr(rng.standard_normal((d, 5)))[0]
    y = rng.standard_normal(5)
    x = E * Q @ (y / np.linalg.norm(y))
    g = 3.0 * x + rng.standard_normal(d)
    f = 0.7
    total = kkt_residuals(x[:, None], np.array([f]), g[:, None], E)[0]
    inside = residual_inside(Q, x, g, f, E)
    gl = g - (g @ x) / (x @ x) * x
    outside = np.linalg.norm(gl - Q @ (Q.T @ gl)) / max(np.linalg.norm(g), f / E)
    assert inside == pytest.approx(np.linalg.norm(Q.T @ gl) / np.linalg.norm(g), rel=1e-12)
    assert inside ** 2 + outside ** 2 == pytest.approx(total ** 2, rel=1e-10)
    g_in = Q @ (Q.T @ gl) + (g @ x) / (x @ x) * x        # a gradient with nothing outside
    assert residual_inside(Q, x, g_in, f, E) == pytest.approx(
        kkt_residuals(x[:, None], np.array([f]), g_in[:, None], E)[0], rel=1e-12)


@pytest.mark.slow
def test_float32_sketch_ends_at_the_lift_target():
    """float32: the lifted winner's residual inside the subspace is climbed away in float64
    (no pass), so the sketch ends below the float32 target instead of stalling above it."""
    from bhtcli.search.bottleneck import pair_directions
    from bhtcli.search.bottleneck import sketch_bottleneck
    from bhtcli.search.sketch import SKETCH_KKT
    from kway_cases import quality_case
    models = quality_case(6, 600, 48, 4, "noise")
    km = KModels(models, dtype="float32")
    r, _ = sketch_bottleneck(km, 3.0, directions=pair_directions(km, 4, 0))
    assert r.kkt_residual <= SKETCH_KKT[1]
    full = KModels(models)                          # float64: the value is the bottleneck there
    assert r.value == pytest.approx(full.pair_distances(r.x).min(), rel=1e-5)


@pytest.mark.slow
def test_float32_lift_in_a_subspace_that_spans_everything_does_not_polish():
    """When the basis already holds the Lagrangian gradient (here it is all of R^d), the
    float64 finish in the subspace is the better climb of the same problem: no float32
    polish in full d follows (main polished: 17-20 passes on these cases)."""
    from bhtcli.search.bottleneck import pair_directions
    from bhtcli.search.bottleneck import sketch_bottleneck
    from kway_cases import quality_case
    models = quality_case(13, 600, 32, 4, "noise")
    km = KModels(models, dtype="float32")
    r, space = sketch_bottleneck(km, 6.0, directions=pair_directions(km, 4, 0))
    assert space.Q.shape[1] == 32 and km.passes <= 6
    assert r.value == pytest.approx(KModels(models).pair_distances(r.x).min(), rel=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_fused_pairs_equal_the_per_pair_kernel(seed):
    """maths/kway_pairs.py (each model's exponentials once, the pairs read off them) gives
    every pair's D and gradient weights, and their combination, as bhattacharyya_weights pair
    by pair (KModels.pair_distances(weights=True), combine) to 1e-12, for models far apart
    and nearly equal (1e-3, 1e-6)."""
    from bhtcli.maths.kway_pairs import fused_pairs
    rng = np.random.default_rng(seed)
    K, n, d, k = 3 + seed % 4, 3000 + 17 * seed, 8, 1 + seed % 5
    scale = (1.0, 1e-3, 1e-6)[seed % 3]
    base = rng.standard_normal((n, d))
    km = KModels([base + scale * rng.standard_normal((n, d)) for _ in range(K)])
    X = (0.5 if scale == 1.0 else 3.0) * rng.standard_normal((d, k))
    D, ws = km.pair_distances(X, weights=True)
    Z = km.S @ X
    fused = fused_pairs(Z[:n], [None] + [Z[q * n:(q + 1) * n] for q in range(1, K)], km.pairs)
    assert fused is not None
    assert np.allclose(fused.D, D, rtol=1e-12, atol=0)
    for p in range(len(km.pairs)):
        for got, ref in zip(fused.pair_weights(p), ws[p]):
            assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref))
    mu = rng.random(D.shape)
    for got, ref in zip(fused.combine(mu), km.combine(mu, ws)):
        assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref))
    # the objectives take the fused form, the same numbers
    D2, combine = km.pair_terms(X)
    assert np.allclose(D2, D, rtol=1e-12, atol=0)


def test_fused_pairs_decline_wide_columns():
    """A column where some delta_k spans more than FUSED_SPREAD / 2 is left to the per-pair
    form (pair_terms falls back and gives its numbers)."""
    from bhtcli.maths.kway_pairs import fused_pairs
    rng = np.random.default_rng(3)
    km = KModels([rng.standard_normal((300, 5)) for _ in range(3)])
    X = 40.0 * rng.standard_normal((5, 2))
    Z = km.S @ X
    assert fused_pairs(Z[:300], [None, Z[300:600], Z[600:]], km.pairs) is None
    D, ws = km.pair_distances(X, weights=True)
    D2, combine = km.pair_terms(X)
    mu = rng.random(D.shape)
    assert np.array_equal(D2, D)
    assert all(np.array_equal(a, b) for a, b in zip(combine(mu), km.combine(mu, ws)))
