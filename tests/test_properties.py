import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bhtcli import design
from bhtcli.analysis.diameter import row_diameter
from bhtcli.maths.certificate import certificate
from bhtcli.models.softmax import SoftmaxPair

pytestmark = pytest.mark.slow     # seconds of CPU each (docs/testing.md, "The fast loop")

# Entries are 0 or of modest size: matrices of 1e-155 are refused by design (their logits are
# below float64's useful range, see check_logit_scale), not a property failure.
finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False).map(lambda v: 0.0 if abs(v) < 1e-6 else v)


@st.composite
def models(draw):
    n = draw(st.integers(2, 8))
    d = draw(st.integers(1, 4))
    A = draw(arrays(np.float64, (n, d), elements=finite))
    B = draw(arrays(np.float64, (n, d), elements=finite))
    x = draw(arrays(np.float64, (d,), elements=finite))
    w = draw(arrays(np.float64, (d,), elements=finite))
    return A, B, x, w


def h2(A, B, x):
    return float(-np.expm1(-SoftmaxPair(A, B).value(x[:, None])[0]))


@settings(max_examples=150, deadline=None)
@given(models())
def test_adding_a_vector_to_every_row_leaves_h2_unchanged(m):
    A, B, x, w = m
    assert abs(h2(A + w, B, x) - h2(A, B, x)) <= 1e-9 * (1 + abs(w @ x))


@settings(max_examples=150, deadline=None)
@given(models())
def test_swapping_models_leaves_h2_unchanged(m):
    A, B, x, _ = m
    assert abs(h2(A, B, x) - h2(B, A, x)) <= 1e-12


@settings(max_examples=150, deadline=None)
@given(models(), st.floats(0.01, 10))
def test_h2_never_exceeds_the_certificate(m, energy):
    A, B, x, _ = m
    nx = np.linalg.norm(x)
    if nx > energy:
        x = x * energy / nx
    G = A - B
    bound = certificate(energy, row_diameter(G - G.mean(0)).value, 0.05, True).hellinger_squared_max_bound
    assert 0.0 <= h2(A, B, x) <= bound + 1e-15


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), st.floats(0.1, 3))
def test_design_invariant_under_common_shift_and_swap(m, energy):
    A, B, _, w = m
    r = design(A, B, energy, starts=8)
    assume(r.distinguishable)
    shifted = design(A + w, B, energy, starts=8)
    swapped = design(B, A, energy, starts=8)
    tol = 1e-6 * r.hellinger_squared + 1e-12
    assert abs(shifted.hellinger_squared - r.hellinger_squared) <= tol
    assert abs(swapped.hellinger_squared - r.hellinger_squared) <= tol
    assert r.hellinger_squared <= r.certificate["hellinger_squared_max_bound"] + 1e-15
