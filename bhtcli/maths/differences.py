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


COMMON_RATIO = 1024.0       # a column's common part beyond which fl(a - b) is refined (below:
                            # its rounding is at most 512 eps of the column's spread)


def reference_differences(a, b, ref=None, out=None):
    """(rows, ref): the rows of a - b minus the reference row's, each within a few ulps of
    g_i - g_0 *relative to the column's spread*. fl(a - b) - s_0 is kept in the columns of
    this block whose entries are at most COMMON_RATIO times their spread here (its rounding,
    eps/2 |s|, is then at most 512 eps of the spread, which the block's spread only
    underestimates); the others -- a common part that dwarfs the differences between rows, as
    in B = A + 1 w^T with |w| >> |A| -- are formed exactly, (s_i - s_0) + (e_i - e_0) from
    :func:`two_difference` (s_i - s_0 exact where the rows agree to a factor 2, Sterbenz).
    ref: the (s_0, e_0) of an earlier block's first row; None takes this block's first row.
    out: where to write the rows (as np.subtract's). A common row changes no softmax
    probability."""
    s = np.subtract(a, b, out=out)
    hi, lo = s.max(axis=0), s.min(axis=0)
    cols = np.flatnonzero(np.maximum(np.abs(hi), np.abs(lo)) > COMMON_RATIO * (hi - lo))
    if ref is None:
        ref = two_difference(a[:1], b[:1])
        ref = (ref[0][0].copy(), ref[1][0].copy())
    s -= ref[0]
    if cols.size:
        sc, ec = two_difference(a[:, cols], b[:, cols])
        s[:, cols] = (sc - ref[0][cols]) + (ec - ref[1][cols])
    return s, ref
