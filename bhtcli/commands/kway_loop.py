"""Answers to a schedule's queries, interleaved by weight (every prefix keeps the proportions):
sampled for `decide` (sample_schedule) and asked in that order by simulate's matrix SPRT;
deciding from observed answers is commands/decide.py's, for any K."""
from __future__ import annotations

import os

import numpy as np

from bhtcli.errors import parameter_name
from bhtcli.io.load import load_matrix
from bhtcli.io.validation import check_count, check_seed
from bhtcli.models.answers import draw, model_log_probs


def interleave(weights, length: int) -> np.ndarray:
    """Which query each answer uses: every prefix as close to the proportions as it can be
    (the query furthest behind its share goes next)."""
    w = np.asarray(weights, dtype=np.float64)
    used = np.zeros(len(w))
    out = np.empty(length, dtype=np.int64)
    for t in range(length):
        q = int(np.argmax(w * (t + 1) - used))
        out[t] = q
        used[q] += 1
    return out


def sample_schedule(A, schedule, count: int, seed: int = 0, spec=None) -> np.ndarray:
    """`count` answers of model A to a schedule file's queries, interleaved by weight as
    simulate interleaves them (every prefix keeps the proportions): a count x 2 array of
    (query index, answer), what `decide` reads with that schedule as --query."""
    from bhtcli.io.schedule_file import read_schedule
    count, seed = check_count(count), check_seed(seed)
    A = load_matrix(A, None if isinstance(A, (str, os.PathLike)) else "A")
    readout = None if spec is None else spec.readout(A.shape[0])      # links and bias of A
    Q, w = read_schedule(schedule, A.shape[1], parameter_name("schedule"))
    order = interleave(w, count)
    rng = np.random.default_rng(seed)
    out = np.empty((count, 2), dtype=np.int64)
    out[:, 0] = order
    for q in range(Q.shape[0]):
        at = np.flatnonzero(order == q)
        if at.size:
            cdf = np.cumsum(np.exp(model_log_probs(A, Q[q], "softmax", readout)))
            out[at, 1] = draw(cdf / cdf[-1], at.size, rng)
    return out
