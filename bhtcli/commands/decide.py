"""`decide`: Wald's SPRT on observed answers, plus the verdict and the exact errors of the best
fixed-n test on that many answers, the test whose count design predicts (docs/maths.md §3, §3.6)."""
from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import expit

from bhtcli.models.answers import answer_law, read_answers
from bhtcli.models.spec import ModelSpec
from bhtcli.results import DecideResult
from bhtcli.maths.counts import fixed_test
from bhtcli.maths.divergences import divergences_from_tilt
from bhtcli.io.load import load_pair


def decide(A, B, query, answers, spec: ModelSpec = ModelSpec(), error: float = 0.05,
           stdin=None) -> DecideResult:
    """Decide which model produced `answers` (0-based indices, in the order observed).

    Parameters
    ----------
    A, B : array_like or path
    query : array_like or path
        The query the answers respond to: x (length d) for softmax, s (length n) for leverage.
    answers : array_like of int, or path, or "-"
        The observed answers.
    spec : ModelSpec
        The model family and, for softmax models, the links and biases (no budget needed).
    error : float
        Target error alpha for Wald's thresholds +-ln((1 - alpha)/alpha) (checked by the caller).
    """
    t0 = time.perf_counter()
    A, B = load_pair(A, B)
    readout = None if spec.leverage else spec.readout(A.shape[0])
    law = answer_law(A, B, query, spec.family, readout)
    if isinstance(answers, (str,)) or hasattr(answers, "__fspath__"):
        obs = read_answers(answers, A.shape[0], stdin=stdin)
    else:
        obs = read_answers_array(answers, A.shape[0])
    from bhtcli.models.leverage import tilt_of
    return decide_laws(law.log_pa, law.log_pb, obs, error, tilt_of(law.log_pa, law.log_pb),
                       spec.family, A.shape[0], A.shape[1], t0)


def decide_laws(log_pa, log_pb, obs, error: float, tilt, family: str, n: int, d, t0: float):
    """The SPRT and the fixed-n test on answers `obs` (indices) to one query whose laws are
    log_pa and log_pb; `tilt` is the pair's tilt the fixed-n test and the divergences use. An
    answer impossible under one model (log-likelihood ratio +-inf) decides at once."""
    div = divergences_from_tilt(tilt)
    with np.errstate(invalid="ignore"):
        llr = log_pa - log_pb
    path = np.cumsum(llr[obs])
    a = math.log((1 - error) / error)
    crossed = np.flatnonzero(np.abs(path) >= a)
    total = float(path[-1])
    if crossed.size:
        k = int(crossed[0])
        decision, used, at = ("A" if path[k] > 0 else "B"), k + 1, float(path[k])
    else:
        decision, used, at = "undecided", len(obs), total
    favoured = "A" if total >= 0 else "B"
    expected = None
    if decision == "undecided":
        kl = div.kl_ab if favoured == "A" else div.kl_ba
        more = (a - abs(total)) / kl if kl > 0 else math.inf
        expected = max(1, math.ceil(more)) if math.isfinite(more) else None
    fixed = fixed_test(tilt, max(div.bhattacharyya_distance, 0.0), error, obs)
    return DecideResult(decision, used, len(obs), a, total, at, float(expit(total)), fixed.verdict,
                        math.exp(-len(obs) * div.bhattacharyya_distance), favoured, expected,
                        error, div.kl_ab, div.kl_ba, family, n, d,
                        fixed_error=fixed.error, seconds=time.perf_counter() - t0)


def read_answers_array(values, n: int) -> np.ndarray:
    from bhtcli.errors import InputError
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise InputError("answers must be a non-empty 1-D sequence of integers")
    if arr.min() < 0 or arr.max() >= n:
        raise InputError(f"answers must lie in 0..{n - 1}")
    return arr.astype(np.int64)
