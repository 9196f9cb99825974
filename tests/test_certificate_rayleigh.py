"""The Rayleigh floor of the per-row ceiling (docs/maths.md §4.16): always below the per-row
value, close to it where the trace floor sees only the mean eigenvalue, and it skips the
Gram where the trace floor could not; the same numbers for a budget alone or in a curve."""
import math

import numpy as np
from hypothesis import HealthCheck, given, settings

import bhtcli.analysis.ceilings as ceilings
import bhtcli.analysis.floors as floors
from bhtcli.analysis.ceilings import Readout, pair_stats, per_row_variance, variance_ceiling
from bhtcli.analysis.facts import analyse_budgets, analyse_pair
from tests.test_certificate import pairs


def _floors(A, B, E, readout, monkeypatch):
    """(trace, Rayleigh) floors as per_row_variance computes them, the Rayleigh one forced."""
    seen = {}
    real = ceilings.per_row_floors

    def spy(*args, **kw):
        out = real(*args, **kw)
        seen["floor"] = out[0]
        return out
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    monkeypatch.setattr(floors, "RAYLEIGH_TRY", math.inf)
    monkeypatch.setattr(ceilings, "per_row_floors", spy)
    per_row_variance(A, B, E, readout, above=1e300, heavy_rows=0)
    monkeypatch.undo()
    return seen["floor"].trace, seen["floor"].rayleigh


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_the_rayleigh_floor_is_below_the_per_row_value(case):
    """Every kind of pair of the certificate's soundness test (biases, taylor links, nearly
    equal, one row changed, shifted), the floor forced: never above what it stands in for."""
    import pytest
    A, B, E, readout, _ = case
    V, _ = per_row_variance(A, B, E, readout, heavy_rows=0)
    if V is None:
        return
    with pytest.MonkeyPatch.context() as mp:
        trace, rayleigh = _floors(A, B, E, readout, mp)
    if rayleigh is None:                # trace 0: not tried (nothing to reach)
        assert trace == 0.0
        return
    assert trace <= V and rayleigh <= V, (trace, rayleigh, V)


def test_rank_one_differences_are_found_exactly(monkeypatch):
    """h_i = s_i w: the per-row value is E^2 lambda_max exactly (no other direction); the
    Rayleigh floor finds it to rounding, the trace floor only a d-th of it."""
    rng = np.random.default_rng(8)
    n, d, E = 400, 40, 3.0
    A = rng.standard_normal((n, d)) * np.exp(0.5 * rng.standard_normal((n, 1))) / math.sqrt(d)
    w = rng.standard_normal(d)
    B = A + 0.01 * rng.standard_normal((n, 1)) * w / np.linalg.norm(w)
    V, _ = per_row_variance(A, B, E, Readout(), heavy_rows=0)
    trace, rayleigh = _floors(A, B, E, Readout(), monkeypatch)
    assert V * (1 - 1e-9) <= rayleigh <= V
    assert trace <= 1.01 * V / d


def _isotropic(n=3000, d=64, seed=3):
    """The small version of the vocabulary benchmark's pair (B = A + isotropic noise)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * rng.uniform(0.6, 1.6, (n, 1)) / math.sqrt(d)
    return A, A + 0.01 * rng.standard_normal((n, d)) / math.sqrt(d)


def test_the_rayleigh_floor_skips_where_the_trace_floor_cannot(monkeypatch):
    """At E = 3.5 the range ceiling binds, the trace floor is just below it and the Rayleigh
    floor above: the Gram is skipped, and every certified number is the full computation's."""
    A, B = _isotropic()
    E = 3.5
    monkeypatch.setattr(ceilings, "HEAVY_SPLIT_MAX_D", 0)        # the floor needs no split
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", math.inf)
    full = analyse_pair(A, B, A - B, E).ceiling
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    monkeypatch.setattr(floors, "RAYLEIGH_TRY", 0.0)              # the trace floor alone
    trace_only = analyse_pair(A, B, A - B, E).ceiling
    monkeypatch.setattr(floors, "RAYLEIGH_TRY", 16.0)
    fast = analyse_pair(A, B, A - B, E).ceiling
    assert full.method == "range" and full.candidates["per_row"] is not None
    assert trace_only == full                                    # no skip from the trace
    assert fast.candidates["per_row"] is None and "cannot bind" in fast.note
    assert (fast.variance, fast.method, fast.candidates["range"]) == \
        (full.variance, full.method, full.candidates["range"])


def test_several_budgets_with_the_rayleigh_floor_equal_one_at_a_time(monkeypatch):
    """A curve's budgets share the floor passes: each budget's ceiling (note included, with
    the floor's value) is the one it gets alone, bit for bit."""
    A, B = _isotropic(n=1500, d=48, seed=5)
    A, B = A.astype(np.float32), B.astype(np.float32)
    monkeypatch.setattr(ceilings, "HEAVY_SPLIT_MAX_D", 0)
    monkeypatch.setattr(ceilings, "PER_ROW_SKIP_MIN_WORK", 0.0)
    monkeypatch.setattr(floors, "RAYLEIGH_TRY", math.inf)
    energies = [1.0, 3.0, 3.5, 6.0, 12.0]
    base_facts = [analyse_pair(A, B, A - B, e) for e in energies]
    assert base_facts == analyse_budgets(A, B, A - B, energies)
    spreads = [f.spread for f in base_facts]
    stats = pair_stats(A, B)
    together = ceilings.variance_ceilings(A, B, energies, spreads, Readout(), stats, 700)
    alone = [variance_ceiling(A, B, e, s, Readout(), stats, 700) for e, s in zip(energies, spreads)]
    assert together == alone
    assert any(c.candidates["per_row"] is None for c in alone)
    assert any(c.candidates["per_row"] is not None for c in alone)
