"""A budget curve on the sketched path (vocabulary scale, scaled down): every budget's search
and report are the ones `design` alone runs there, bit for bit, with the budget-free work
(spectral directions, row norms, the floors' pass, the reports' pass) shared."""
import numpy as np
import pytest

from bhtcli import design
from bhtcli.search import sketch

pytestmark = pytest.mark.slow     # seconds of CPU each (docs/testing.md, "The fast loop")


def _pair(seed, n=1500, d=400):
    """bench_scale.py's structure: row norms 0.6-1.6, B = A + 0.01 N(0, 1/d)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * np.exp(0.25 * rng.standard_normal((n, 1))) / np.sqrt(d)
    return A, A + 0.01 / np.sqrt(d) * rng.standard_normal((n, d))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_curve_points_are_design_alone_bit_for_bit_on_the_sketch_path(monkeypatch, dtype):
    monkeypatch.setattr(sketch, "SKETCH_MIN_SIZE", 1)     # "auto" takes the sketch at this size
    monkeypatch.setattr(sketch, "SKETCH_MIN_D", 1)
    A, B = _pair(2)
    energies = [2.5, 5.0, 7.5, 10.0]
    curve = design(A, B, energies, dtype=dtype, seed=3).designs
    for e, point in zip(energies, curve):
        alone = design(A, B, e, dtype=dtype, seed=3)
        assert alone.solver["search_space"] == point.solver["search_space"] == "sketch"
        assert point.query == alone.query, e              # the same x, every bit
        assert point.hellinger_squared == alone.hellinger_squared
        assert point.samples == alone.samples
        assert point.certificate == alone.certificate
    h2 = [p.hellinger_squared for p in curve]
    assert h2 == sorted(h2)
