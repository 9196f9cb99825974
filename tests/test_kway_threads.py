"""The K-way search's cheaper evaluations (issue 23, scale): the fused pairs' row blocks
shared out over threads give the numbers computed in turn, bit for bit, for any number of
chunks; pairs left out of `combine` change nothing; the coefficient form ranks as the fused
pairs; the report's per-pair values at a query are those of the per-pair divergences and
counts; the stacked copy and the per-row block Gram in two halves equal one loop."""
import itertools
import math

import numpy as np
import pytest

from bhtcli.maths.kway_pairs import fused_pairs


def over_chunks(work, count: int, chunks: int) -> None:
    """work(lo, hi) for `chunks` contiguous ranges of range(count), on two threads."""
    from concurrent.futures import ThreadPoolExecutor
    bounds = [round(c * count / chunks) for c in range(chunks + 1)]
    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(work, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]:
            f.result()


def _scores(seed, n=20011, k=9, K=4, scale=0.3):
    rng = np.random.default_rng(seed)
    r = 3.0 * rng.standard_normal((n, k))
    deltas = [None] + [(scale * rng.standard_normal((n, k))).astype(np.float32)
                       for _ in range(K - 1)]
    return r, deltas, list(itertools.combinations(range(K), 2)), rng


@pytest.mark.slow
@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 7, 64])
def test_fused_pairs_on_the_pool_equal_them_in_turn_bit_for_bit(chunks):
    """Each row block's sums are kept apart and added in block order: D, kappa and the
    combined weights do not depend on how the blocks are shared out (the same bits with
    1, 2, ... 64 chunks on two threads as in turn)."""
    r, deltas, pairs, rng = _scores(chunks)
    mu = rng.random((len(pairs), r.shape[1]))
    ref = fused_pairs(r, deltas, pairs, block=4096)
    got = fused_pairs(r, deltas, pairs, block=4096,
                      run_blocks=lambda work, count: over_chunks(work, count, chunks))
    assert len(ref.starts) > 10
    assert np.array_equal(got.D, ref.D) and np.array_equal(got.kappa, ref.kappa)
    for a, b in zip(got.combine(mu), ref.combine(mu)):
        assert np.array_equal(a, b)


def test_combine_leaves_out_negligible_pairs_without_changing_the_result():
    """A pair whose multipliers are 0 (an underflowed soft-minimum weight) is skipped and no
    bit changes; one whose multipliers are 1e-40 of the largest changes nothing beyond the
    sum's rounding."""
    r, deltas, pairs, rng = _scores(5, n=5000, k=3)
    fused = fused_pairs(r, deltas, pairs)
    mu = rng.random((len(pairs), 3)) + 0.5
    zero, tiny = mu.copy(), mu.copy()
    zero[[1, 4]] = 0.0
    tiny[[1, 4]] = 1e-40
    import bhtcli.maths.kway_pairs as kp
    saved = kp.NEGLIGIBLE_MU
    try:
        kp.NEGLIGIBLE_MU = -1.0                 # nothing left out, zeros included
        full_zero = fused.combine(zero)
        full_tiny = fused.combine(tiny)
    finally:
        kp.NEGLIGIBLE_MU = saved
    for a, b in zip(fused.combine(zero), full_zero):
        assert np.array_equal(a, b)
    for a, b in zip(fused.combine(tiny), full_tiny):
        assert np.max(np.abs(a - b)) <= 1e-15 * np.max(np.abs(b))


@pytest.mark.slow
def test_pairs_at_equals_the_per_pair_divergences_and_counts():
    """models/kway.pairs_at (D and H^2 from the tilt's g(+-1/2), no other divergence)
    prints the numbers of divergences_from_tilt and query_counts, bit for bit."""
    from bhtcli.maths.counts import query_counts
    from bhtcli.maths.divergences import divergences_from_tilt
    from bhtcli.maths.kway import KwayLaw
    from bhtcli.models.kway import kway_scores_at, pairs_at
    rng = np.random.default_rng(2)
    base = rng.standard_normal((400, 6))
    models = [base + 0.05 * rng.standard_normal((400, 6)) for _ in range(4)]
    x = rng.standard_normal(6)
    r, deltas = kway_scores_at(models, x)
    pairs = list(itertools.combinations(range(4), 2))
    got = pairs_at(KwayLaw.build([r], [deltas], [1.0]), pairs, 0.05)
    law = KwayLaw.build([r], [deltas], [1.0])
    for row, (i, j) in zip(got, pairs):
        tilt = law.tilts[(i, j)][0]
        div = divergences_from_tilt(tilt)
        counts = query_counts(tilt, div.bhattacharyya_distance, 0.05)
        assert row == {"i": i, "j": j, "hellinger_squared": div.hellinger_squared,
                       "bhattacharyya_distance": div.bhattacharyya_distance,
                       "predicted": counts.predicted}
        assert math.isfinite(row["bhattacharyya_distance"]) and row["predicted"] > 0


@pytest.mark.parametrize("scale", [1.0, 0.3, 0.01])
def test_coefficient_distances_rank_as_the_fused_pairs(scale):
    """The coefficient form (K exps per entry) gives every pair's D within ~1e-16 / D relative
    of the fused pairs (so the same ranking of columns), and declines (None) when some D is
    below RANK_MIN_D, where that error would matter."""
    from bhtcli.maths.kway_coefficients import RANK_MIN_D, coefficient_distances
    r, deltas, pairs, _ = _scores(11, n=8000, k=16, scale=scale)
    ref = fused_pairs(r, deltas, pairs, keep_u=False).D
    got = coefficient_distances(r, deltas, pairs)
    assert got is not None
    assert np.all(np.abs(got - ref) <= 1e-14 + 1e-12 * ref)      # ~1e-16 absolute in log BC
    assert np.array_equal(np.argsort(got.min(axis=0)), np.argsort(ref.min(axis=0)))
    near = [None] + [d * 1e-5 for d in deltas[1:]]       # D ~ 1e-12: below RANK_MIN_D
    assert fused_pairs(r, near, pairs, keep_u=False).D.min() < RANK_MIN_D
    assert coefficient_distances(r, near, pairs) is None


def test_stacked_copy_and_block_gram_in_two_halves_equal_one_loop(monkeypatch):
    """The K models' stacked copy (two halves on two threads from PLAIN_PAGES_BYTES up) and the
    screens' per-row Gram (always in two halves) equal one loop in turn, bit for bit: each
    half writes its own rows, with the same operations."""
    import bhtcli.models.kway as mk
    from bhtcli.models import threads
    rng = np.random.default_rng(8)
    mats = [rng.standard_normal((20000, 12)).astype(np.float32) for _ in range(3)]
    monkeypatch.setattr(mk, "PLAIN_PAGES_BYTES", 0)           # the threaded path here
    halves = mk.KModels(mats, dtype="float32")
    gram_halves = mk.block_gram(halves)
    monkeypatch.setattr(mk, "PLAIN_PAGES_BYTES", 1 << 62)     # one loop
    monkeypatch.setattr(mk, "in_two_halves", lambda work, count: work(0, count))
    in_turn = mk.KModels(mats, dtype="float32")
    assert np.array_equal(halves.S, in_turn.S)
    assert np.array_equal(gram_halves, mk.block_gram(in_turn))
    seen = []
    threads.in_two_halves(lambda lo, hi: seen.append((lo, hi)), 1)
    assert sorted(seen) == [(0, 0), (0, 1)]
