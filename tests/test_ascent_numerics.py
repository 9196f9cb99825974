"""The ascent's projections do not overflow: an L-BFGS step on a flat stretch (logits ~1e4,
curvature ~0) can have entries beyond 1e154, whose squares overflow float64."""
import warnings

import numpy as np

from bhtcli.api import design
from bhtcli.search.ascent import column_norms, project


def test_column_norms_of_huge_and_ordinary_columns():
    X = np.array([[3e200, 3.0, 0.0, -1e-300], [4e200, 4.0, 0.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = column_norms(X)
    assert np.allclose(n[:2], [5e200, 5.0], rtol=1e-15) and n[2] == 0.0
    # ordinary columns: np.linalg.norm bit for bit
    Y = np.random.default_rng(0).standard_normal((7, 5))
    assert np.array_equal(column_norms(Y), np.linalg.norm(Y, axis=0))


def test_project_keeps_the_direction_of_a_huge_step():
    X = np.array([[3e200], [-4e200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = project(X, 2.0)
    assert np.allclose(P[:, 0], [1.2, -1.6], rtol=1e-15)


def test_plateau_curve_without_overflow_warnings():
    """The pair hypothesis found (seed 9235, logits ~3e4): its budget curve overflowed in
    the projection; now no RuntimeWarning, and the curve is non-decreasing."""
    rng = np.random.default_rng(9235)
    A = 3e4 * rng.standard_normal((5, 3))
    B = A + 0.3 * 3e4 * rng.standard_normal((5, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = design(A, B, energy="0.438913,7.180806", starts=4)
    h2 = [d.hellinger_squared for d in r.designs]
    assert h2[0] <= h2[1]
