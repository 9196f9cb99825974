"""A - B row by row without losing what rounding its entries would lose (docs/maths.md §1.3,
§2.3): Knuth's TwoSum gives the exact difference of two floats as a pair (s, e), and the rows
taken relative to one reference row keep the part that distinguishes rows (the only part a
softmax sees) to a few ulps of itself, where fl(a - b) can lose all of it (B = A + 1 w^T with
|w| >> |A|: every fl(a_i - b_i) is -w)."""
from __future__ import annotations

import numpy as np


def two_difference(a, b):
    """(s, e) with s = fl(a - b) and a - b = s + e exactly (Knuth's TwoSum; round to nearest,
    no overflow). The pair is unique for a given real value a - b."""
    s = a - b
    bv = s - a
    av = s - bv
    e = (a - av) + (-b - bv)
    return s, e


def reference_differences(a, b, ref=None):
    """(rows, ref): the rows of a - b minus the reference row's, ((s_i - s_0) + (e_i - e_0)),
    each within a few ulps of its exact value (s_i - s_0 is exact where the rows agree to a
    factor 2, by Sterbenz). ref: the (s_0, e_0) of :func:`two_difference` of an earlier block's
    first row; None takes this block's first row. A common row changes no softmax probability."""
    s, e = two_difference(a, b)
    if ref is None:
        ref = (s[0].copy(), e[0].copy())
    return (s - ref[0]) + (e - ref[1]), ref
