"""`prompts`: which prompts best tell K GGUF builds of one model apart, through the engine.

Every prompt's next-token law is computed by the serving engine (`bhtcli.engine`) for each
build and passed through the sampler's law (`maths/sampler.py`); prompts are ranked by H^2
(K builds: the closest pair, the bottleneck). For the top prompts the report gives the counts
of `design` (maths/counts.py through maths/laws.py) and the engine floor: the largest H^2,
over the builds, between a build's laws under the engine settings used and under other
settings a provider might run (an F32 KV cache, flash attention, batching); a prompt whose H^2
is not 10 times its floor is flagged, and left out of the ranking when it is not `min_margin`
times its floor (docs/maths.md §13, docs/llm_audit.md "The engine floor").
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np

from bhtcli.analysis.prompt_search import SearchSettings, search_prompts
from bhtcli.engine import EngineSettings, Sampler, open_engine
from bhtcli.engine.laws import floor_laws, sampler_laws
from bhtcli.errors import InputError, note, parameter_name
from bhtcli.maths.laws import (bhattacharyya, build_counts, clears_floor, error_shift, pair_h2,
                              pair_list)
from bhtcli.results import PromptsResult

MAX_BUILDS = 8
CHUNK = 64                  # prompts whose logits are held at once (K x CHUNK x n_vocab float32)
FLAG_MARGIN = 10.0          # a prompt's H^2 should be >= 10x its engine floor
SAMPLER_NOTE = ("laws are the engine's raw softmax (temperature 1, no truncation); APIs usually "
                "sample otherwise: give the API's temperature, top-k, top-p and min-p")
SUPPORT_NOTE = ("the sampler truncates: an answer outside one build's support has probability 0 "
                "under it and decides at once")


def floor_variants(settings: EngineSettings) -> list[EngineSettings]:
    """Other settings a provider might run, each scoring one prompt per call: the other KV
    type, flash attention toggled. (Batching is the third: the batched scores against the
    one-per-call ones, in `prompts`.)"""
    single = replace(settings, sequences=1)
    other_kv = "f32" if settings.kv_type == "f16" else "f16"
    return [replace(single, kv_type=other_kv), replace(single, flash_attn=not single.flash_attn)]


def open_builds(builds, settings: EngineSettings):
    """The engines of K builds, checked to share one vocabulary and tokenizer."""
    paths = [os.fspath(b) for b in builds]
    if not 2 <= len(paths) <= MAX_BUILDS:
        raise InputError(f"give 2 to {MAX_BUILDS} GGUF builds (got {len(paths)})")
    engines = [open_engine(p, settings) for p in paths]
    a = engines[0]
    vocab_a, model_a = a.vocabulary(), a.meta("tokenizer.ggml.model")
    for p, e in zip(paths[1:], engines[1:]):
        if e.n_vocab != a.n_vocab:
            raise InputError(f"{p} has {e.n_vocab} tokens, {paths[0]} {a.n_vocab}: the builds "
                             "must share one vocabulary (builds of one model)")
        if e.meta("tokenizer.ggml.model") != model_a or e.vocabulary() != vocab_a:
            raise InputError(f"{p} has another tokenizer than {paths[0]} (its tokens or "
                             "tokenizer model differ): give builds of one model")
    return paths, engines


def token_prompts(engines, prompts) -> tuple[list[str], list[list[int]]]:
    """(text, ids) per prompt; text prompts tokenized by every build (they must agree)."""
    texts, ids = [], []
    for k, (text, tokens) in enumerate(prompts):
        where = f"prompt {k + 1}"
        if tokens is None:
            if not text.strip():
                raise InputError(f"{parameter_name('prompts')}: {where} is empty")
            tokens = engines[0].tokenize(text)
            for e in engines[1:]:
                if e.tokenize(text) != tokens:
                    raise InputError(f"{where}: the builds tokenize it differently; give builds "
                                     "of one model (or token_ids)")
        else:
            text = engines[0].detokenize(tokens)
        engines[0].check_prompt(tokens, f"{parameter_name('prompts')}: {where}")
        texts.append(text)
        ids.append(list(tokens))
    return texts, ids


def prompts(builds, prompt_list, *, source: str, sampler: Sampler = Sampler(),
            settings: EngineSettings = EngineSettings(), error: float = 0.05, top: int = 10,
            min_margin: float | None = None, search: SearchSettings | None = None,
            progress=None) -> PromptsResult:
    """Rank `prompt_list` ((text, ids) pairs, one of them None) by how well each tells the
    builds apart under the engine and the sampler; see the module docstring."""
    t0 = time.perf_counter()
    say = progress or (lambda *a, **k: None)
    say("loading the builds")
    paths, engines = open_builds(builds, settings)
    texts, ids = token_prompts(engines, prompt_list)
    m, K = len(ids), len(engines)
    pairs = pair_list(K)
    h2 = np.empty((len(pairs), m))
    tops = np.empty((K, m), dtype=np.int64)
    done = 0
    for s in range(0, m, CHUNK):
        chunk = ids[s:s + CHUNK]
        L = [sampler_laws(e, chunk, sampler) for e in engines]
        done += len(chunk) * K
        say(f"scoring {len(chunk) * K} laws per chunk", done, m * K)
        h2[:, s:s + len(chunk)] = pair_h2(L)
        for k in range(K):
            tops[k, s:s + len(chunk)] = np.argmax(L[k], axis=1)
    scored_seconds = time.perf_counter() - t0
    bottleneck = np.argmin(h2, axis=0)
    score = h2[bottleneck, np.arange(m)]
    order = np.argsort(-score, kind="stable")
    entries, excluded, walked = [], 0, 0
    # The reported numbers come from one prompt per engine call: a prompt's logits depend on
    # the prompts decoded beside it (the kernels' summation order), so the batched scores only
    # choose which prompts to report. How far batching moves each build's law joins the floor.
    variants = floor_variants(settings)
    singles = engines if settings.sequences == 1 else \
        [open_engine(p, replace(settings, sequences=1)) for p in paths]
    floor_engines = [[open_engine(p, v) for v in variants] + ([] if singles is engines else [e])
                     for p, e in zip(paths, engines)]
    s = 0
    while s < m and len(entries) < top:
        # as many prompts as the report still needs (with --min-margin, at least 16: some
        # will be left out); each costs K + K * (V + b) passes
        wanted = top - len(entries)
        size = min(CHUNK, wanted if min_margin is None else max(wanted, 16))
        idx = order[s:s + size]
        say("the engine floor", min(s, m), m)
        s += size
        chunk = [ids[i] for i in idx]
        L, per_build = floor_laws(singles, floor_engines, chunk, sampler)  # floors: (K, chunk)
        single_h2 = pair_h2(L)                                    # (pairs, len(chunk))
        for r, i in enumerate(idx):
            walked += 1
            bottleneck[i] = int(np.argmin(single_h2[:, r]))
            value = float(single_h2[bottleneck[i], r])
            fb = int(np.argmax(per_build[:, r]))
            floor = float(per_build[fb, r])
            margin = None if floor == 0 else value / floor
            ok = clears_floor(value, floor, FLAG_MARGIN)
            if min_margin is not None and not clears_floor(value, floor, min_margin):
                excluded += 1
                continue
            if len(entries) >= top:
                break
            bi, bj = pairs[int(bottleneck[i])]
            counts = build_counts([l[r] for l in L], error)
            entries.append({
                "rank": len(entries) + 1, "index": int(i), "text": texts[i],
                "token_ids": ids[i], "hellinger_squared": value,
                "bhattacharyya_distance": bhattacharyya(value),
                "samples": counts,
                "bottleneck": {"i": bi, "j": bj},
                "floor_hellinger_squared": floor, "floor_build": fb,
                "floors": [float(x) for x in per_build[:, r]], "margin": margin,
                "flagged": not ok, "error_shift": error_shift(floor, counts["predicted"]),
                "top_tokens": [{"id": t, "piece": engines[0].piece(t),
                                "probability": float(np.exp(L[k][r][t]))}
                               for k, t in ((k, int(np.argmax(L[k][r]))) for k in range(K))]})
    entries.sort(key=lambda e: -e["hellinger_squared"])           # by the one-per-call H^2
    for k, e in enumerate(entries, start=1):
        e["rank"] = k
    notes = []
    if sampler.raw:
        notes.append(SAMPLER_NOTE)
    elif not sampler.greedy and (sampler.top_k or sampler.top_p < 1 or sampler.min_p > 0):
        notes.append(SUPPORT_NOTE)
    border = None
    if sampler.greedy:
        border = int(np.sum(np.any(tops != tops[:1], axis=0)))
        notes.append(f"temperature 0 (greedy): {border} border prompts, whose top token differs "
                     "between builds; one answer decides there, up to the engine's own "
                     "nondeterminism (the floor)")
    searched = None
    if search is not None and entries:             # from the best natural prompts, best first
        searched = search_prompts(
            engines, singles, floor_engines, [(e["text"], e["token_ids"]) for e in entries],
            sampler, search, error, FLAG_MARGIN, min_margin, progress)
    elif search is not None:
        notes.append(f"{parameter_name('search')}: no prompt of the ranking to start from (every "
                     f"one left out by {parameter_name('min_margin')})")
    flagged = sum(e["flagged"] for e in entries)
    if flagged:
        notes.append(f"{flagged} of the top prompts have H^2 below {FLAG_MARGIN:g}x their engine "
                     "floor: the engine's own settings move their laws nearly as much as the "
                     f"builds do ({parameter_name('min_margin')} leaves such prompts out)")
    for message in notes:
        note(message)
    seconds = time.perf_counter() - t0
    return PromptsResult(
        model="causal-lm", n=engines[0].n_vocab, d=None, energy=None, target_error=error,
        builds=paths, source=source, prompts_scored=m, sampler=sampler.to_dict(),
        engine=engines[0].record(), floor_settings=[v.to_dict() for v in variants],
        min_margin=min_margin, excluded=excluded, border_prompts=border,
        median_hellinger_squared=float(np.median(score)), top=entries,
        scoring_seconds=scored_seconds, prompts_per_second=m / scored_seconds if scored_seconds else None,
        seconds=seconds, search=searched, notes=notes)
