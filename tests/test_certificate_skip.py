"""The fast certificate: skipping the per-row Gram when it cannot bind (docs/maths.md §4.11),
and the sub-blocked streamed passes, which must give the same bits as whole blocks."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import bhtcli.analysis.ceilings as bounds
import bhtcli.analysis.facts as pair_facts
from bhtcli import bound
from bhtcli.analysis.ceilings import Readout, pair_stats, per_row_variance, variance_ceiling
from bhtcli.analysis.diameter import DifferenceRows, row_diameter
from bhtcli.models.readout import make_readout
from tests.test_certificate import pairs


def _ceilings(A, B, E, readout, skip):
    """variance_ceiling with the skip always tried (skip=True) or never."""
    old = bounds.PER_ROW_SKIP_MIN_WORK
    bounds.PER_ROW_SKIP_MIN_WORK = 0.0 if skip else math.inf
    try:
        facts = pair_facts.analyse_pair(A, B, A - B, E, readout)
    finally:
        bounds.PER_ROW_SKIP_MIN_WORK = old
    return facts


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_skip_only_when_the_range_ceiling_binds_anyway(case):
    """Forced on every pair: the floor is below the full per-row value, the skip fires only
    where the full computation picks the range ceiling, and the certificate is the same."""
    A, B, E, readout, _ = case
    full = _ceilings(A, B, E, readout, skip=False)
    fast = _ceilings(A, B, E, readout, skip=True)
    assert fast.distinguishable == full.distinguishable
    if not full.distinguishable:
        return
    cf, cs = full.ceiling, fast.ceiling
    assert cs.variance == cf.variance and cs.method == cf.method
    assert cs.candidates["range"] == cf.candidates["range"]
    if cs.candidates["per_row"] is None and cf.candidates["per_row"] is not None:
        assert cf.method == "range" and "cannot bind" in cs.note
    else:
        assert cs.candidates == cf.candidates and cs.note == cf.note
    # the floor itself, wherever the per-row value exists
    V, _ = per_row_variance(A, B, E, readout)
    if V is not None:
        spread = full.spread
        forced = _floor(A, B, E, readout, above=spread ** 2 / 4.0)
        assert forced <= V
        skipped = cs.candidates["per_row"] is None
        assert skipped == (forced > spread ** 2 / 4.0)


def _floor(A, B, E, readout, above=math.inf):
    """The floor per_row_variance compares with `above` (the trace floor, and the Rayleigh
    floor where it is tried), from the arguments per_row_variance gives per_row_floors."""
    seen = {}
    real = bounds.per_row_floors

    def spy(*args, **kw):
        floors = real(*args, **kw)
        seen["v"] = floors[0].value
        return floors
    old = bounds.PER_ROW_SKIP_MIN_WORK
    bounds.PER_ROW_SKIP_MIN_WORK, bounds.per_row_floors = 0.0, spy
    try:
        per_row_variance(A, B, E, readout, above=above)
    finally:
        bounds.PER_ROW_SKIP_MIN_WORK, bounds.per_row_floors = old, real
    return seen["v"]


def test_floor_is_close_for_isotropic_differences_and_fires_at_large_budgets():
    """B = A + isotropic noise (the vocabulary benchmark's pair, small): the floor is within
    a small factor of the full value (lambda_max vs trace / d), the skip fires at E = 10
    and not at E = 0.3 (where the per-row ceiling binds: same bits either way)."""
    rng = np.random.default_rng(3)
    n, d = 3000, 64
    A = rng.standard_normal((n, d)) * rng.uniform(0.6, 1.6, (n, 1)) / math.sqrt(d)
    B = A + 0.01 * rng.standard_normal((n, d)) / math.sqrt(d)
    ro = Readout()
    V, _ = per_row_variance(A, B, 10.0, ro)
    low = _floor(A, B, 10.0, ro)
    assert 0.3 * V < low <= V
    big = _ceilings(A, B, 10.0, ro, skip=True).ceiling
    assert big.method == "range" and big.candidates["per_row"] is None
    for E in (0.3, 1.0):
        a, b = _ceilings(A, B, E, ro, skip=True).ceiling, _ceilings(A, B, E, ro, skip=False).ceiling
        assert a.method == b.method == "per_row" and a == b


def test_bound_reports_the_skip_in_its_note(monkeypatch):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((500, 8))
    B = A + 0.01 * rng.standard_normal((500, 8))
    full = bound(A, B, 20.0)
    monkeypatch.setattr(bounds, "PER_ROW_SKIP_MIN_WORK", 0.0)
    fast = bound(A, B, 20.0)
    assert full.certificate["ceiling_method"] == fast.certificate["ceiling_method"] == "range"
    assert full.certificate["ceilings"]["per_row"] is not None and fast.certificate["ceilings"]["per_row"] is None
    assert fast.certificate["hellinger_squared_max_bound"] == full.certificate["hellinger_squared_max_bound"]
    assert fast.certificate["samples_lower_any_strategy"] == full.certificate["samples_lower_any_strategy"]
    assert "cannot bind" in fast.certificate["note"] and full.certificate["note"] is None


def test_the_size_rule():
    """The default threshold: small pairs keep the per-row value (nothing skipped)."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((200, 8))
    B = A + 0.01 * rng.standard_normal((200, 8))
    assert 200 * 8 * 8 < bounds.PER_ROW_SKIP_MIN_WORK
    c = variance_ceiling(A, B, 20.0, 1e-3, Readout())
    assert c.method == "range" and c.candidates["per_row"] is not None


# --- the sub-blocked passes give the bits of whole blocks -------------------------------------

def _stats_whole_blocks(A, B, rows=8192):
    """pair_stats as it was (whole blocks of `rows` rows converted at once)."""
    n, d = A.shape
    sa, sb, sabs, sg = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d)
    na = nb = ng = 0.0
    for s in range(0, n, rows):
        a = np.asarray(A[s:s + rows], dtype=np.float64)
        b = np.asarray(B[s:s + rows], dtype=np.float64)
        g = a - b
        sa += a.sum(axis=0)
        sb += b.sum(axis=0)
        sg += g.sum(axis=0)
        sabs += (np.abs(a) + np.abs(b) + np.abs(g)).sum(axis=0)
        na = max(na, float(np.einsum("ij,ij->i", a, a).max()))
        nb = max(nb, float(np.einsum("ij,ij->i", b, b).max()))
        ng = max(ng, float(np.einsum("ij,ij->i", g, g).max()))
    return sa / n, sb / n, sabs / n, math.sqrt(na), math.sqrt(nb), math.sqrt(ng), sg / n


@pytest.mark.parametrize("n,d,dtype", [(9000, 1, np.float64), (20000, 17, np.float32),
                                       (9000, 300, np.float32), (8500, 64, np.float64),
                                       (100, 2000, np.float32)])
def test_stats_are_bit_identical_to_whole_blocks(n, d, dtype):
    rng = np.random.default_rng(n + d)
    A = (rng.standard_normal((n, d)) * rng.exponential(1, (n, 1)) + 3).astype(dtype)
    B = (A + 0.01 * rng.standard_normal((n, d))).astype(dtype)
    got = pair_stats(A, B)
    ref = _stats_whole_blocks(A, B)
    fields = (got.abar, got.bbar, got.mean_abs, got.norm_a, got.norm_b, got.eps_2inf, got.gmean)
    for x, y in zip(fields, ref):
        assert np.array_equal(x, y)
    assert np.array_equal(got.gmean, DifferenceRows(A, B).mean(axis=0))


def test_diameter_fallback_and_pruning_unchanged():
    """The inexact fallback (2 max ||g_i - mean||) from the pruning pass's norms equals the
    direct computation, bit for bit; the pruned exact value equals all pairs."""
    rng = np.random.default_rng(6)
    A = rng.standard_normal((12000, 40)).astype(np.float32)
    B = (A + 0.01 * rng.standard_normal((12000, 40))).astype(np.float32)
    G = DifferenceRows(A, B)
    got = row_diameter(G, max_pair_work=0.0)
    assert not got.exact
    exact = A.astype(np.float64) - B.astype(np.float64)
    c = exact - G.mean(axis=0)
    far = float(np.einsum("ij,ij->i", c, c).max())
    assert got.value == 2.0 * math.sqrt(far) * (1 + 4 * 40 * bounds.EPS)
    B2 = A.copy()
    B2[[3, 7000, 11000]] += 0.4                      # a few rows stick out: prunable
    got = row_diameter(DifferenceRows(A, B2))
    ex = A.astype(np.float64) - B2.astype(np.float64)
    ref = max(np.linalg.norm(ex - ex[i], axis=1).max() for i in (3, 7000, 11000))
    assert got.exact and ref <= got.value <= ref * (1 + 1e-12)


def _far_from_float64(G, i):
    """far_from as it was: float64 distances from row i to every row, first maximum."""
    gi = np.asarray(G[i:i + 1], dtype=np.float64)[0]
    blk = np.asarray(G[:], dtype=np.float64) - gi
    dist = np.einsum("ij,ij->i", blk, blk)
    j = int(np.argmax(dist))
    return math.sqrt(float(dist[j])), j


@pytest.mark.parametrize("seed", range(6))
def test_float32_screened_farthest_point_is_the_float64_one(seed):
    """Same distance and row, bit for bit, on isotropic, heavy-tailed and tied rows."""
    from bhtcli.analysis.diameter import _far_from_screened, sub_rows
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(50, 3000)), int(rng.integers(2, 300))
    A = (rng.standard_normal((n, d)) * rng.exponential(1, (n, 1)) ** (seed % 3)).astype(np.float32)
    B = (A + 0.01 * rng.standard_normal((n, d)) * rng.exponential(1, (n, 1))).astype(np.float32)
    B[n // 3] = A[n // 3] - (A[5] - B[5])         # a tie at distance from row 5
    B[n // 2] = A[n // 2] - 7.0
    G = DifferenceRows(A, B)
    raw = float(np.linalg.norm(A.astype(np.float64) - B, axis=1).max())
    for i in (0, 5, n // 2, int(rng.integers(n))):
        gi = np.asarray(G[i:i + 1], dtype=np.float64)[0]
        assert _far_from_screened(G, gi, i, raw, sub_rows(d, 8192)) == _far_from_float64(G, i)
