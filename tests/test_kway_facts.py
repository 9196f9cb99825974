"""The K-way certificate facts from passes shared by the K models (analysis/kway_facts.py,
docs/maths.md §4.17): every pair's PairFacts is the one analyse_pair gives on that pair, bit
for bit, whichever path its ceiling takes (the per-row Gram, the trace floor's skip, the
Rayleigh floor), for float64 and float32 models, block boundaries that cut sub-blocks, and
pairs of the same model (exactly or up to rounding)."""
import dataclasses
import math
from itertools import combinations

import numpy as np
import pytest

import bhtcli.analysis.ceilings as ceilings
import bhtcli.analysis.diameter as diameter
import bhtcli.analysis.facts as facts
import bhtcli.analysis.floors as floors
from bhtcli.analysis.diameter import DifferenceRows
from bhtcli.analysis.facts import analyse_pair
from bhtcli.analysis.kway_facts import analyse_pairs, iter_pair_facts, shared_farthest, shared_passes


def assert_same_bits(x, y, where="facts"):
    """x and y equal, every float to the bit (nan and the sign of zero included)."""
    if dataclasses.is_dataclass(x):
        assert type(x) is type(y), where
        for f in dataclasses.fields(x):
            assert_same_bits(getattr(x, f.name), getattr(y, f.name), f"{where}.{f.name}")
    elif isinstance(x, dict):
        assert x.keys() == y.keys(), where
        for key in x:
            assert_same_bits(x[key], y[key], f"{where}[{key}]")
    elif isinstance(x, np.ndarray):
        assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, where
        assert x.tobytes() == y.tobytes(), where
    elif isinstance(x, (list, tuple)):
        assert type(x) is type(y) and len(x) == len(y), where
        for k, (u, v) in enumerate(zip(x, y)):
            assert_same_bits(u, v, f"{where}[{k}]")
    elif isinstance(x, (float, np.floating)):
        assert isinstance(y, (float, np.floating)), (where, x, y)
        assert np.float64(x).tobytes() == np.float64(y).tobytes(), (where, x, y)
    else:
        assert x == y, (where, x, y)


def per_pair(mats, energy):
    return [analyse_pair(mats[i], mats[j], DifferenceRows(mats[i], mats[j]), energy)
            for i, j in combinations(range(len(mats)), 2)]


def check(mats, energy):
    want = per_pair(mats, energy)
    got = analyse_pairs(mats, energy)
    assert len(got) == len(want) == len(mats) * (len(mats) - 1) // 2
    for p, (a, b) in enumerate(zip(want, got)):
        assert_same_bits(a, b, f"pair {p}")
    return got


def models(n, d, K, dtype, seed, spread=0.01):
    """A (rows ~ N(0, 1/d), scaled row by row) and K - 1 perturbations of it."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * rng.uniform(0.6, 1.6, (n, 1)) / math.sqrt(d)
    mats = [A] + [A + spread * rng.standard_normal((n, d)) / math.sqrt(d) for _ in range(K - 1)]
    return [M.astype(dtype) for M in mats]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [3, 4])
def test_the_per_row_gram_path_is_each_pairs_own(dtype, K):
    """Small n d^2: every pair computes its per-row ceiling (the d x d Gram) after the shared
    passes; n = 9,000 crosses a block of 8,192 rows inside a sub-block of the first pass."""
    mats = models(9000, 24, K, dtype, seed=K)
    got = check(mats, 2.0)
    assert {f.ceiling.method for f in got} == {"per_row"}
    assert all(f.ceiling.candidates["per_row"] is not None for f in got)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_models_exactly_and_up_to_rounding(dtype):
    """Model 3 is model 1 (exactly the same), model 4 is model 0 plus a rounded constant row
    shift (float64: the same softmax up to rounding; float32: the shift is rounded into the
    stored values, and the pair may differ): each pair says what analyse_pair says."""
    rng = np.random.default_rng(5)
    mats = models(700, 12, 3, np.float64, seed=11)
    mats = [M.astype(dtype) for M in mats + [mats[1].copy(), mats[0] + rng.normal(size=12)]]
    got = check(mats, 1.5)
    same = [(i, j) for (i, j), f in zip(combinations(range(5), 2), got) if not f.distinguishable]
    assert (1, 3) in same
    if dtype == np.float64:
        assert (0, 4) in same
        assert "up to float64 rounding" in got[list(combinations(range(5), 2)).index((0, 4))].reason


@pytest.mark.slow
@pytest.mark.parametrize("energy", [0.3, 1.0, 3.5, 30.0])
@pytest.mark.parametrize("split", [True, False])
def test_the_floor_paths_are_each_pairs_own(monkeypatch, energy, split):
    """The floor tested on every pair (as at vocabulary scale), with and without the heavy-row
    split: from the range ceiling binding (the Gram skipped) to the per-row one (the Rayleigh
    floor tried, then the Gram); the shared trace floor is handed over (no pair runs its own
    trace pass, its own statistics or its own centred norms)."""
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    if not split:
        monkeypatch.setattr(ceilings, "HEAVY_SPLIT_MAX_D", 0)
    mats = models(3000, 40, 4, np.float32, seed=7)
    want = per_pair(mats, energy)
    calls = []
    for module, name in ((floors, "trace_floors"), (facts, "pair_stats"),
                         (diameter, "_centred_norms")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real, name=name, **k:
                            calls.append(name) or real(*a, **k))
    got = analyse_pairs(mats, energy)
    assert calls == []
    for p, (a, b) in enumerate(zip(want, got)):
        assert_same_bits(a, b, f"pair {p}")


@pytest.mark.slow
def test_the_floor_cases_cover_skip_and_gram(monkeypatch):
    """The budgets above reach both outcomes of the floor (else that test proves less)."""
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    monkeypatch.setattr(ceilings, "HEAVY_SPLIT_MAX_D", 0)
    mats = models(3000, 40, 4, np.float32, seed=7)
    notes = [f.ceiling.candidates["per_row"] is None for E in (0.3, 30.0)
             for f in analyse_pairs(mats, E)]
    assert any(notes) and not all(notes)


@pytest.mark.slow
def test_models_of_mixed_precision():
    """A float64 model among float32 ones: its pairs take the float64 steps, the others the
    float32 screen, each as analyse_pair does."""
    mats = models(3000, 40, 4, np.float32, seed=12)
    mats[2] = mats[2].astype(np.float64)
    check(mats, 3.0)


@pytest.mark.slow
@pytest.mark.parametrize("n, d", [(20, 3), (2, 30), (9000, 1000 // 40)])
def test_small_and_odd_shapes(n, d):
    """d <= 16 (no sub-blocks), n = 2 (no pruned search) and a width whose sub-blocks do not
    divide a block."""
    check(models(n, d, 3, np.float64, seed=n), 1.0)


def test_the_pairs_come_one_at_a_time():
    """iter_pair_facts gives the first pair before the later ones are finished, so a caller
    stopping at a pair of the same model raises what a loop of analyse_pair raised."""
    mats = models(500, 20, 3, np.float64, seed=2)
    mats = [mats[0], mats[0].copy(), mats[2]]
    it = iter_pair_facts(mats, 1.0)
    first = next(it)
    assert not first.distinguishable and "identical (every value equal)" in first.reason
    assert_same_bits(first, per_pair(mats, 1.0)[0])


SHAPES = [(9000, 24, 4, np.float32), (9000, 24, 3, np.float64), (700, 1000 // 7, 4, np.float32),
          (300, 12, 3, np.float64)]


@pytest.mark.parametrize("n, d, K, dtype", SHAPES)
@pytest.mark.parametrize("heavy", [0, 4])
def test_the_shared_passes_are_each_pairs(monkeypatch, n, d, K, dtype, heavy):
    """The statistics (pair_stats: every array and norm; the PairFacts hide most bits of the
    mean-rounding term), the diameter's centred norms and the trace floor (caps, sums,
    heaviest rows, value) against the pair's own passes, to the bit."""
    monkeypatch.setattr(ceilings, "HEAVY_SPLIT_MAX_D", 10 ** 6 if heavy else 0)
    mats = models(n, d, K, dtype, seed=n + d + 1)
    pairs = list(combinations(range(K), 2))
    stats, norms, hands = shared_passes(mats, pairs, 1.7)
    zero = np.zeros(n)
    for (i, j), st, norm, hand in zip(pairs, stats, norms, hands):
        A, B = mats[i], mats[j]
        assert_same_bits(ceilings.pair_stats(A, B), st, f"pair {i}, {j}")
        assert_same_bits(diameter._centred_norms(DifferenceRows(A, B), st.gmean), norm)
        sh = floors.floor_context(A, st, zero, zero, zero, ceilings.mean_rounding(st, n),
                                  ceilings.CEILING_ROWS, heavy if n > 1 else 0)
        own = [floors.FloorBudget(1.7, 0.0, 0.0, None)]
        floors.trace_floors(A, B, own, sh)
        assert_same_bits(own[0], hand.budget, f"pair {i}, {j}")
        assert_same_bits(sh.hh, hand.sh.hh)


@pytest.mark.parametrize("offset", [0.0, 0.3, 30.0])
def test_the_largest_row_norm_is_found_whatever_the_mean(offset):
    """The screened largest row norms against pair_stats when the mean row is large (offset:
    a common row added to every model), so that the screen keeps many rows or all."""
    rng = np.random.default_rng(4)
    mats = [M + offset * rng.standard_normal(30) for M in models(2000, 30, 3, np.float64, seed=9)]
    mats[2][1234] *= 1.5            # one row clearly largest in one model
    pairs = list(combinations(range(3), 2))
    for (i, j), st in zip(pairs, shared_passes(mats, pairs, None)[0]):
        want = ceilings.pair_stats(mats[i], mats[j])
        assert (want.norm_a, want.norm_b, want.eps_2inf) == (st.norm_a, st.norm_b, st.eps_2inf)


@pytest.mark.parametrize("n, d, K, dtype", SHAPES + [(2, 5, 3, np.float32)])
def test_the_farthest_point_steps_in_lockstep_are_each_pairs(n, d, K, dtype):
    """shared_farthest (the float32 screens of all pairs in one pass per step, in the expanded
    form) against diameter.farthest_point on each pair, to the bit; a pair of the same model
    included, and rows repeated so that the farthest row ties (the first must be found)."""
    mats = models(n, d, K, dtype, seed=n + d + 2)
    mats[-1] = mats[0].copy()
    for M in mats[1:-1]:
        M[n // 2:2 * (n // 2)] = M[:n // 2]        # every difference row twice: tied farthest rows
    pairs = list(combinations(range(K), 2))
    stats, norms, _ = shared_passes(mats, pairs, None)
    got = shared_farthest(mats, pairs, norms)
    for (i, j), norm, bound in zip(pairs, norms, got):
        if n < 3:
            assert bound is None
            continue
        G = DifferenceRows(mats[i], mats[j])
        want = diameter.farthest_point(G, np.sqrt(norm[0]), norm[1], diameter.sub_rows(d, 8192))
        assert np.float64(want).tobytes() == np.float64(bound).tobytes(), (i, j, want, bound)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e3])
def test_the_expanded_screen_is_within_the_direct_forms_bound(scale):
    """The lockstep screen's ||x_j||^2 - 2 x_j . g_i + ||g_i||^2 against the float64 distances
    ||g_j - g_i||^2: within the tolerance the float64 check allows for (the direct form's
    bound, docs/maths.md §4.17), on rows of very different sizes."""
    from bhtcli.analysis.kway_facts import _Screens
    rng = np.random.default_rng(6)
    n, d = 3000, 300
    mats = [(M * scale * np.exp(rng.standard_normal((n, 1)))).astype(np.float32)
            for M in models(n, d, 3, np.float64, seed=6, spread=0.3)]
    pairs = list(combinations(range(3), 2))
    diffs = [DifferenceRows(mats[i], mats[j]) for i, j in pairs]
    rows = {p: int(rng.integers(n)) for p in range(3)}
    dist = _Screens(mats, pairs, 128).distances(rows, diffs)
    for p, i in rows.items():
        G = diffs[p][:]
        exact = np.einsum("ij,ij->i", G - G[i], G - G[i])
        raw = float(np.sqrt(np.einsum("ij,ij->i", G, G).max()))
        worst = float(np.max(np.abs(dist[p] - exact)))
        assert worst <= diameter.screen_tolerance(raw, d) / 2, (worst, diameter.screen_tolerance(raw, d))
