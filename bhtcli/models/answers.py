"""The black box's answers: the law of one answer to a query, drawing answers, reading them."""
from __future__ import annotations

import json
import numbers
import os
from dataclasses import dataclass

import numpy as np

from bhtcli.maths.divergences import Tilt
from bhtcli.errors import InputError
from bhtcli.io.text import read_text
from bhtcli.models.softmax import logits_at


@dataclass(frozen=True)
class AnswerLaw:
    """Both models' answer distributions at one query, and the LLR of each answer."""

    log_pa: np.ndarray
    log_pb: np.ndarray

    @classmethod
    def at(cls, A: np.ndarray, B: np.ndarray, x: np.ndarray, readout=None) -> "AnswerLaw":
        """Softmax-family models at query x (stable for nearly equal models)."""
        c, delta = logits_at(A, B, np.asarray(x, dtype=np.float64), readout)
        return cls(*Tilt.from_logits(c, delta).log_probs())

    @property
    def llr(self) -> np.ndarray:
        """log P_A(i) - log P_B(i) for every answer i."""
        return self.log_pa - self.log_pb

    def cdf(self, model: str) -> np.ndarray:
        p = np.exp(self.log_pa if model == "A" else self.log_pb)
        c = np.cumsum(p)
        return c / c[-1]


def draw(cdf: np.ndarray, size, rng: np.random.Generator) -> np.ndarray:
    """Answers drawn by inverse CDF (vectorised; `size` may be a shape; `cdf` need not end at 1)."""
    idx = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
    return np.minimum(idx, len(cdf) - 1)


def log_softmax(z: np.ndarray) -> np.ndarray:
    m = z.max()
    return z - (m + np.log(np.sum(np.exp(z - m))))


def read_answers(spec, n: int, stdin=None) -> np.ndarray:
    """Observed 0-based answers from a file or '-': one per line, or a JSON list.

    Raises InputError naming the line (or list position) of any entry that is not an integer
    in [0, n).
    """
    label, entries = answer_entries(spec, "the observed answers, one per line or a JSON list "
                                    "(or - for standard input)", stdin)
    out = np.empty(len(entries), dtype=np.int64)
    for k, (where, v) in enumerate(entries):
        value = as_index(v)
        if value is None:
            raise InputError(f"{label}, {where}: {v!r} is not an integer answer index")
        if not 0 <= value < n:
            raise InputError(f"{label}, {where}: answer {value} is out of range; the models have "
                             f"{n} answers, numbered 0 to {n - 1}")
        out[k] = value
    if out.size == 0:
        raise InputError(f"{label} holds no answers")
    return out


def answer_entries(spec, what: str, stdin=None) -> tuple[str, list]:
    """(label, [(where, value), ...]) of an answers file or '-': the items of a JSON list
    ("item k"), or the lines that are neither blank nor '#' comments ("line k", stripped)."""
    label, text = read_text(spec, what, stdin)
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{label}: not a valid JSON list ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(items, list):
            raise InputError(f"{label}: expected a JSON list of answers")
        return label, [(f"item {i + 1}", v) for i, v in enumerate(items)]
    return label, [(f"line {i + 1}", v.strip()) for i, v in enumerate(text.splitlines())
                   if v.strip() and not v.strip().startswith("#")]


def as_index(v) -> int | None:
    """An answer index from a JSON integer or a decimal string; None for anything else."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, str):
        try:
            return int(v, 10)
        except ValueError:
            return None
    return None


def sample(A, query, count: int, seed: int = 0, model: str = "softmax", link: str = "exp",
           bias=None) -> np.ndarray:
    """`count` answers of model A to `query`, as 0-based indices (seeded).

    model="softmax": query x of length d, p ∝ f(A x + bias) for the link f ("exp", "poly:K",
    "taylor:K"); model="leverage": query s of length n (s_i != 0).
    """
    from bhtcli.io.load import load_matrix
    from bhtcli.io.validation import check_count, check_seed
    from bhtcli.models.spec import ModelSpec
    spec = ModelSpec.build(model, link_a=link, bias_a=bias, need_energy=False, inputs=(A,))
    count, seed = check_count(count), check_seed(seed)
    A = load_matrix(A, None if isinstance(A, (str, os.PathLike)) else "A")
    readout = None if spec.leverage else spec.readout(A.shape[0])
    logp = model_log_probs(A, query, spec.family, readout)
    cdf = np.cumsum(np.exp(logp))
    return draw(cdf / cdf[-1], count, np.random.default_rng(seed))


def leverage_theta(s: np.ndarray) -> np.ndarray:
    """theta = log w = -log s^2 for a leverage query (every s_i must be non-zero)."""
    if np.any(s == 0):
        raise InputError("the leverage query s has a zero entry; every s_i must be non-zero")
    return -np.log(s * s)


def model_log_probs(A: np.ndarray, query, model: str, readout=None) -> np.ndarray:
    """log P_A(query) for either model kind (query loaded and checked here)."""
    from bhtcli.io.load import load_query
    if model == "leverage":
        from bhtcli.models.leverage import LeverageModel
        s = load_query(query, A.shape[0], what="the leverage query s (one entry per row)")
        state = LeverageModel(A).at(np.exp(leverage_theta(s)))
        return state.log_p
    from bhtcli.models.readout import Readout
    from bhtcli.models.softmax import scores_at
    x = load_query(query, A.shape[1])
    readout = Readout() if readout is None else readout
    return log_softmax(readout.log_weights(scores_at(A, x), "A"))


def answer_law(A: np.ndarray, B: np.ndarray, query, model: str, readout=None) -> AnswerLaw:
    """Both models' answer laws at one query (stable tilt form), for either model kind."""
    from bhtcli.io.load import load_query
    if model == "leverage":
        from bhtcli.models.leverage import LeveragePair
        s = load_query(query, A.shape[0], what="the leverage query s (one entry per row)")
        tilt = LeveragePair(A, B).tilt(leverage_theta(s))
        return AnswerLaw(*tilt.log_probs())
    return AnswerLaw.at(A, B, load_query(query, A.shape[1]), readout)
