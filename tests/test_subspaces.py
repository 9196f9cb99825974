"""The Gram-route bases (bhtcli/maths/subspaces.py) against numpy's SVD and QR, and the BLAS
thread switch (bhtcli/models/threads.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bhtcli.maths.subspaces import orthonormal_span, orthonormalise, top_right_singular_vectors


def _projector(U):
    return U @ U.T


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(0, 4), st.floats(-200, 200))
def test_orthonormal_span_is_the_svds_span_with_small_directions_dropped(seed, rank, extra, log_scale):
    rng = np.random.default_rng(seed)
    d = 40
    M = rng.standard_normal((d, rank)) @ rng.standard_normal((rank, rank + extra))
    M *= 2.0 ** (log_scale / 4)           # no overflow at 1e+-15 scales
    U = orthonormal_span(M, rtol=1e-6)
    Us, s, _ = np.linalg.svd(M, full_matrices=False)
    ref = Us[:, s > 1e-6 * s[0]]
    assert U.shape[1] == ref.shape[1] == rank
    assert np.allclose(U.T @ U, np.eye(rank), atol=1e-12)
    assert np.allclose(_projector(U), _projector(ref), atol=1e-8)


def test_orthonormal_span_drops_a_direction_below_the_tolerance():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((30, 3))
    M[:, 2] = M[:, 0] + 1e-9 * rng.standard_normal(30)      # singular value ~1e-9 of ~1
    assert orthonormal_span(M, rtol=1e-6).shape[1] == 2
    M[:, 2] = M[:, 0] + 1e-5 * rng.standard_normal(30)      # ~1e-5: kept, and orthonormal
    U = orthonormal_span(M, rtol=1e-6)
    assert U.shape[1] == 3 and np.allclose(U.T @ U, np.eye(3), atol=1e-12)
    assert orthonormal_span(np.zeros((5, 2))).shape == (5, 0)


@pytest.mark.parametrize("cond", [1.0, 1e3, 1e6])    # 1e6: the Householder fallback
def test_orthonormalise_spans_the_columns_at_any_conditioning(cond):
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.standard_normal((50, 6)))
    M = Q @ np.diag(np.geomspace(1.0, 1.0 / cond, 6)) @ np.linalg.qr(rng.standard_normal((6, 6)))[0]
    U = orthonormalise(M)
    assert np.allclose(U.T @ U, np.eye(6), atol=1e-12)
    assert np.allclose(_projector(U), _projector(Q), atol=1e-8)


def test_top_right_singular_vectors_match_the_svd_up_to_sign():
    rng = np.random.default_rng(3)
    U, _ = np.linalg.qr(rng.standard_normal((500, 8)))
    V, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    M = U @ np.diag([9.0, 7.0, 5.0, 3.0, 2.0, 1.0, 0.5, 0.25]) @ V.T
    got = top_right_singular_vectors(M * 1e200, 3)          # scaled: the Gram must not overflow
    want = np.linalg.svd(M, full_matrices=False)[2][:3].T
    assert np.allclose(np.abs(got.T @ want), np.eye(3), atol=1e-10)


def test_top_right_singular_vectors_are_orthonormal_beyond_the_rank():
    rng = np.random.default_rng(4)
    M = np.outer(rng.standard_normal(100), rng.standard_normal(10))     # rank 1
    V = top_right_singular_vectors(M, 5)
    assert np.allclose(V.T @ V, np.eye(5), atol=1e-12)
    top = np.linalg.svd(M)[2][0]
    assert abs(abs(V[:, 0] @ top) - 1.0) < 1e-12


def test_single_threaded_sets_and_restores_the_blas_threads():
    from bhtcli.models import threads
    controls = threads._controls()
    if controls is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS that can be reached")
    get = controls[0]
    before = get()
    with threads.single_threaded():
        assert get() == 1
        with threads.all_threads():
            assert get() == controls[2]
        assert get() == 1
    assert get() == before


def test_a_search_gives_the_same_answer_with_and_without_the_thread_switch():
    from bhtcli.models import threads
    from bhtcli.models.softmax import SoftmaxPair
    from bhtcli.search.entry import maximize
    rng = np.random.default_rng(5)
    A = rng.standard_normal((300, 24))
    B = A + 0.3 * rng.standard_normal((300, 24))
    one = maximize(SoftmaxPair(A, B), 3.0, "sketch")
    saved = threads._STATE.get("controls")
    threads._STATE["controls"] = None                       # the switch off: a no-op
    try:
        two = maximize(SoftmaxPair(A, B), 3.0, "sketch")
    finally:
        threads._STATE["controls"] = saved
    assert one.value == pytest.approx(two.value, rel=1e-9)
