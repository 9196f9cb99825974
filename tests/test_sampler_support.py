"""The sampler's support (maths/sampler.py) against the plain definition: sort each row by
logit (ties by token id), cut top-k, then top-p on the float32 cumulative sum, then min-p.
The library partitions instead of sorting whole rows; the two must agree bit for bit,
ties at every boundary included."""
import itertools

import numpy as np
import pytest

from bhtcli.maths.sampler import sampler_log_probs, support, top_k_columns


def sorted_support(logits, top_k=0, top_p=1.0, min_p=0.0, greedy=False):
    z = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    m, n = z.shape
    order = np.argsort(-z, axis=1, kind="stable")
    zs = np.take_along_axis(z, order, axis=1)
    keep = np.ones((m, n), dtype=bool)
    if greedy:
        keep[:, 1:] = False
    else:
        if 0 < top_k < n:
            keep[:, top_k:] = False
        if top_p < 1.0:
            cand = np.where(keep, zs, -np.inf)
            p = np.exp(cand - cand[:, :1]).astype(np.float32)
            p /= p.sum(axis=1, dtype=np.float32, keepdims=True)
            cum = np.cumsum(p, axis=1, dtype=np.float32)
            hit = cum >= np.float32(top_p)
            first = np.where(hit.any(axis=1), np.argmax(hit, axis=1), keep.sum(axis=1) - 1)
            keep &= np.arange(n)[None, :] <= first[:, None]
        if min_p > 0.0:
            keep &= zs >= zs[:, :1] + np.float32(np.log(np.float32(min_p)))
            keep[:, 0] = True
    out = np.zeros((m, n), dtype=bool)
    np.put_along_axis(out, order, keep, axis=1)
    return out


def logit_sets():
    rng = np.random.default_rng(5)
    yield rng.normal(size=(40, 300)) * 3                          # no ties
    yield rng.integers(-4, 3, size=(40, 300)).astype(float)       # ties everywhere
    yield np.zeros((3, 50))                                        # one big tie
    yield rng.normal(size=(5, 7)) * 1e6                            # huge logits
    z = rng.normal(size=(20, 1000)) * 2
    z[:, 500:520] = z.max(axis=1, keepdims=True)                   # a tie at the top
    yield z


@pytest.mark.parametrize("k, p, mp", list(itertools.product(
    [0, 1, 2, 5, 40, 299, 300, 5000], [1.0, 0.999, 0.95, 0.5, 0.01], [0.0, 0.05, 0.5])))
def test_support_equals_the_sorted_definition(k, p, mp):
    for z in logit_sets():
        got = support(z, k, p, mp)
        assert np.array_equal(got, sorted_support(z, k, p, mp))
        assert got.any(axis=1).all()


def test_greedy_keeps_the_first_largest():
    for z in logit_sets():
        assert np.array_equal(support(z, greedy=True), sorted_support(z, greedy=True))


def test_top_k_columns_keep_lower_ids_at_a_tie():
    z = np.array([[1.0, 3.0, 2.0, 2.0, 2.0, 0.0]], dtype=np.float32)
    assert top_k_columns(z, 3).tolist() == [[1, 2, 3]]
    assert top_k_columns(z, 1).tolist() == [[1]]


def test_raw_law_is_the_softmax():
    z = np.random.default_rng(1).normal(size=(4, 30)) * 5
    lp = sampler_log_probs(z)
    ref = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    np.testing.assert_allclose(lp, ref, atol=1e-12)
