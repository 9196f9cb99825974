"""The one scalar checker (bhtcli.io.validation.check_scalar) behind every scalar parameter:
the type, the range, and one InputError naming the parameter (never a ValueError traceback)."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhtcli import api
from bhtcli.errors import InputError
from bhtcli.io.validation import check_error, check_queries, check_scalar, check_seed, check_starts


@pytest.mark.parametrize("check,value", [
    (check_starts, "abc"), (check_starts, 0), (check_starts, True), (check_starts, 2.5),
    (check_starts, None), (check_seed, -1), (check_seed, float("nan")), (check_queries, "x"),
    (check_error, 0.5), (check_error, 0.0), (check_error, "x"), (check_error, float("inf")),
])
def test_bad_scalars_are_one_input_error_naming_the_parameter(check, value):
    with pytest.raises(InputError) as info:
        check(value)
    name = check.__name__.removeprefix("check_")
    assert str(info.value).startswith(name + " must ") and repr(value) in str(info.value)


@given(st.integers(-10**6, 10**6), st.integers(-5, 5))
def test_whole_numbers_against_their_lower_end(value, low):
    if value >= low:
        assert check_scalar(value, "k", "whole", low=low) == value
        assert check_scalar(float(value), "k", "whole", low=low) == value
    else:
        with pytest.raises(InputError, match=f"k must be a whole number >= {low}"):
            check_scalar(value, "k", "whole", low=low)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_real_numbers_in_an_open_interval(value):
    inside = math.isfinite(value) and 0 < value < 0.5
    if inside:
        assert check_scalar(value, "a", "real", low=0, high=0.5, low_open=True, high_open=True) == value
    else:
        with pytest.raises(InputError, match="^a must"):
            check_scalar(value, "a", "real", low=0, high=0.5, low_open=True, high_open=True)


def test_the_api_refuses_a_word_for_starts_with_an_input_error():
    import numpy as np
    with pytest.raises(InputError, match="starts must be a whole number"):
        api.design(np.eye(3), np.zeros((3, 3)), 1.0, starts="many")
