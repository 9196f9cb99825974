"""Tokens in and out of the engine: `sample --prompt` draws a build's answers to a prompt with
the engine's sampler (with --json, a SampleResult that carries the engine's record);
`decide --prompt` decides from answers (token ids, or token strings mapped through the
vocabulary) which build answered, with decide's SPRT and fixed-n test."""
from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np

from bhtcli.commands.decide import decide_laws, decide_steps
from bhtcli.commands.prompts import open_builds
from bhtcli.engine.laws import sampler_laws
from bhtcli.engine import EngineSettings, Sampler, open_engine
from bhtcli.errors import InputError, parameter_name
from bhtcli.maths.laws import floored_tilt, kway_law
from bhtcli.models.answers import answer_entries, as_index
from bhtcli.results import SampleResult


def prompt_ids(engine, prompt) -> list[int]:
    """The prompt's token ids (text is tokenized; a list of ids is taken as it is)."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError(f"{parameter_name('prompt')} is empty; give the prompt's text")
        ids = engine.tokenize(prompt)
    else:
        ids = [int(t) for t in prompt]
    engine.check_prompt(ids, parameter_name("prompt"))
    return ids


def draw_prompt(path, prompt, count: int, sampler: Sampler = Sampler(),
                settings: EngineSettings = EngineSettings(), seed: int = 0) -> SampleResult:
    """`count` tokens the engine's sampler draws after `prompt` (each the first token of an
    independent completion), with their pieces and vocabulary strings; the engine's record is
    in `run` (bhtcli.api completes it)."""
    if not (isinstance(count, int) and count >= 1):
        raise InputError(f"{parameter_name('count')} must be an integer >= 1")
    t0 = time.perf_counter()
    engine = open_engine(path, settings)
    ids = prompt_ids(engine, prompt)
    drawn = engine.draw(ids, sampler, count, seed)
    text = prompt if isinstance(prompt, str) else engine.detokenize(ids)
    return SampleResult(model="causal-lm", n=engine.n_vocab, d=None, energy=None,
                        target_error=None, build=os.fspath(path), prompt=text,
                        prompt_token_ids=ids, sampler=sampler.to_dict(), seed=int(seed),
                        count=count, token_ids=drawn, pieces=[engine.piece(t) for t in drawn],
                        tokens=[engine.token_text(t) for t in drawn],
                        seconds=time.perf_counter() - t0,
                        run={"engine": engine.record()})


def sample_prompt(path, prompt, count: int, sampler: Sampler = Sampler(),
                  settings: EngineSettings = EngineSettings(), seed: int = 0,
                  text: bool = False) -> np.ndarray:
    """`count` tokens the engine's sampler draws after `prompt` (each the first token of an
    independent completion): ids (int64), or with `text` the vocabulary's token strings."""
    result = draw_prompt(path, prompt, count, sampler, settings, seed)
    if text:
        return np.array(result.tokens, dtype=object)
    return np.array(result.token_ids, dtype=np.int64)


def read_token_answers(spec, vocab: list[str], stdin=None) -> np.ndarray:
    """Answers as token ids: every entry an integer id, or else every entry a token string of
    the vocabulary (as `sample --text` prints them)."""
    if isinstance(spec, str) or hasattr(spec, "__fspath__"):
        label, entries = answer_entries(spec, "the observed tokens, one per line (ids, or the "
                                        "vocabulary's token strings)", stdin)
    else:                                   # the API: a sequence of ids or token strings
        label = "answers"
        entries = [(f"item {k + 1}", v) for k, v in enumerate(np.asarray(spec).ravel().tolist())]
    if not entries:
        raise InputError(f"{label} holds no answers")
    ids = [as_index(v) for _, v in entries]
    if all(i is not None for i in ids):
        for (where, _), i in zip(entries, ids):
            if not 0 <= i < len(vocab):
                raise InputError(f"{label}, {where}: token id {i} is outside the vocabulary "
                                 f"(0 to {len(vocab) - 1})")
        return np.array(ids, dtype=np.int64)
    index = {s: k for k, s in reversed(list(enumerate(vocab)))}
    out = []
    for where, v in entries:
        if str(v) not in index:
            raise InputError(f"{label}, {where}: {str(v)!r} is not a token of the vocabulary; "
                             "give token ids or the vocabulary's token strings")
        out.append(index[str(v)])
    return np.array(out, dtype=np.int64)


def decide_prompt(builds, prompt, answers, sampler: Sampler = Sampler(),
                  settings: EngineSettings = EngineSettings(), error: float = 0.05, stdin=None):
    """Which build answered `prompt` with `answers`, on the engine's laws under the sampler:
    two builds as decide does (SPRT and fixed-n test, a DecideResult); K >= 3 builds as decide
    does for K models (the matrix SPRT, the maximum-likelihood verdict and its predicted error,
    a DecideResult with models)."""
    t0 = time.perf_counter()
    paths, engines = open_builds(builds, settings)
    ids = prompt_ids(engines[0], prompt)
    if isinstance(prompt, str) and any(e.tokenize(prompt) != ids for e in engines[1:]):
        raise InputError(f"{parameter_name('prompt')}: the builds tokenize it differently")
    obs = read_token_answers(answers, engines[0].vocabulary(), stdin)
    L = [sampler_laws(e, [ids], sampler)[0] for e in engines]
    possible = np.isfinite(np.stack(L))                      # K x n_vocab
    impossible = [int(t) for t in obs if not possible[:, t].any()]
    if impossible:
        raise InputError(f"token {impossible[0]} has probability 0 under every build with this "
                         "sampler: give the sampler settings the API runs")
    if len(L) == 2:
        la, lb = L
        result = decide_laws(la, lb, obs, error, floored_tilt(la, lb), "causal-lm",
                             engines[0].n_vocab, None, t0)
        return replace(result, run={"engine": engines[0].record()})  # bhtcli.api completes `run`
    if not possible[:, obs].all(axis=1).any():
        raise InputError("no build gives every answer a positive probability with this sampler: "
                         "the answers come from none of them (or give the sampler settings the "
                         "API runs)")
    steps = np.stack(L, axis=1)[obs]                          # answers x K
    K = len(L)
    result = decide_steps(steps, np.full(K, 1.0 / K), error, kway_law(L), paths, "causal-lm",
                          engines[0].n_vocab, None, 1, t0)
    return replace(result, run={"engine": engines[0].record()})
