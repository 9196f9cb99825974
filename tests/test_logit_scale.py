"""The logit-scale check decides its lower limit on what the softmax sees (each row minus the
first: a column common to every row is invisible), and says so when the stored rows are too
large only because of such a common part (docs/maths.md, "The logit-scale check, on what the
softmax sees")."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bhtcli import api
from bhtcli.errors import InputError
from bhtcli.io.validation import MAX_LOGIT, MIN_LOGIT, check_logit_scale


def _pair(visible, column, seed=0, n=6, d=3):
    rng = np.random.default_rng(seed)
    A = np.hstack([rng.normal(size=(n, d)) * visible, np.full((n, 1), column)])
    B = A.copy()
    B[:, :d] += rng.normal(size=(n, d)) * visible * 0.1
    return A, B


def test_tiny_visible_rows_behind_a_large_column_are_refused_with_the_visible_scale():
    A, B = _pair(1e-112, 1e8)
    with pytest.raises(InputError, match="what the softmax sees"):
        api.design(A, B, energy=1.0)
    with pytest.raises(InputError, match="what the softmax sees"):
        api.bound(A, B, energy=1.0)


def test_the_same_rows_without_the_column_are_refused_alike():
    A, B = _pair(1e-112, 0.0)
    with pytest.raises(InputError, match="below 1e-100"):
        api.design(A, B, energy=1.0)


def test_a_large_common_column_with_visible_rows_in_range_is_designed():
    A, B = _pair(1.0, 1e8)
    r = api.design(A, B, energy=1e3)
    assert r.hellinger_squared > 0


def test_stored_rows_beyond_the_limit_name_the_common_part():
    A, B = _pair(1.0, 1e8)
    with pytest.raises(InputError, match="common to every row") as err:
        api.design(A, B, energy=1e5)
    assert "--" not in str(err.value)
    # after subtracting the mean row the same budget is accepted, and the design is the same model's
    r = api.design(A - A.mean(axis=0), B - B.mean(axis=0), energy=1e5)
    assert r.hellinger_squared > 0


def test_raw_rows_beyond_the_limit_without_a_common_part_keep_the_plain_message():
    A, B = _pair(1e8, 0.0)
    with pytest.raises(InputError) as err:
        api.design(A, B, energy=1e5)
    assert "common to every row" not in str(err.value)


@settings(max_examples=40, deadline=None)
@given(raw=st.floats(1e-120, 1e20), visible=st.floats(1e-130, 1e20), energy=st.floats(1e-6, 1e6))
def test_check_matches_its_rule(raw, visible, energy):
    visible = min(visible, 2 * raw)            # each row minus the first is at most twice the largest row
    refused = energy * raw > MAX_LOGIT or 0 < energy * visible < MIN_LOGIT
    try:
        check_logit_scale(energy, raw, visible)
        assert not refused
    except InputError:
        assert refused


def test_rows_all_alike_are_not_refused_but_called_the_same():
    A = np.tile([[1.0, 2.0, 1e8]], (5, 1))
    b = api.bound(A, A * 1.0, energy=1.0)
    assert not b.distinguishable
    check_logit_scale(1.0, 1e8, 0.0)
