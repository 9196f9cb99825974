"""A prompt search that raises H^2: beam search over token substitutions and extensions.

Each round proposes `per_round` new prompts from the current beam: replace one token by a
token of the pool, or append a token (one of the reference model's most likely next tokens at
that prompt, or a pool token). Proposals already scored, longer than `max_len`, or whose
decoded text does not tokenize back to the same ids (so that the text an auditor sends is
exactly the prompt scored) are dropped before scoring. The batch is scored in one call; the
new beam is the best `beam` of the old beam and the batch, so the best H^2 never goes down.
The budget is the number of prompts scored (each one forward pass of both models).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SearchResult:
    beam: list            # [(H^2, ids), ...] best first
    history: list = field(default_factory=list)   # [(prompts scored so far, best H^2), ...]
    scored: int = 0


def propose(ids, rng, pool: np.ndarray, next_tokens=None) -> list[int]:
    """One edit of the prompt `ids`: a substitution, or an extension by a likely or a pool token."""
    ids = list(ids)
    r = rng.random()
    if r < 0.5:
        ids[int(rng.integers(len(ids)))] = int(rng.choice(pool))
    elif r < 0.8 and next_tokens is not None and len(next_tokens):
        ids.append(int(rng.choice(next_tokens)))
    else:
        ids.append(int(rng.choice(pool)))
    return ids


def beam_search(start, score, *, budget: int, pool, beam: int = 8, per_round: int = 96,
                max_len: int = 48, next_tokens=None, roundtrip=None, seed: int = 0,
                progress=None) -> SearchResult:
    """Beam search under a budget of scored prompts.

    Parameters
    ----------
    start : list of (H^2, ids)
        Scored prompts to start from (the natural ones); the best `beam` form the first beam.
    score : callable
        score(list of id lists) -> list of (index into the batch, H^2) for (at least) the best
        `beam` of the batch, best first.
    budget : int
        Prompts to score in all (forward passes of both models).
    pool : array of token ids
        Tokens for substitutions and random extensions.
    next_tokens : callable, optional
        next_tokens(ids) -> token ids the reference model finds likely after `ids`.
    roundtrip : callable, optional
        roundtrip(ids) -> bool: the decoded text tokenizes back to `ids`.
    """
    rng = np.random.default_rng(seed)
    pool = np.asarray(pool)
    current = sorted(((float(h), tuple(ids)) for h, ids in start), reverse=True)[:beam]
    seen = {tuple(ids) for _, ids in start}
    seen.update(ids for _, ids in current)
    out = SearchResult([(h, list(ids)) for h, ids in current], [(0, current[0][0])], 0)
    likely = {}
    while out.scored < budget:
        want = min(per_round, budget - out.scored)
        batch, tries = [], 0
        while len(batch) < want and tries < 50 * want:
            tries += 1
            h, ids = current[int(rng.integers(len(current)))]
            if next_tokens is not None and ids not in likely:
                likely[ids] = np.asarray(next_tokens(list(ids)))
            cand = tuple(propose(ids, rng, pool, likely.get(ids)))
            if len(cand) > max_len or cand in seen:
                continue
            seen.add(cand)
            if roundtrip is not None and not roundtrip(list(cand)):
                continue
            batch.append(cand)
        if not batch:
            break
        ranked = score([list(c) for c in batch])
        out.scored += len(batch)
        merged = current + [(float(h), batch[i]) for i, h in ranked]
        current = sorted(merged, key=lambda t: -t[0])[:beam]
        out.history.append((out.scored, current[0][0]))
        if progress:
            progress(f"search: {out.scored:,} of {budget:,} prompts scored, best H^2 {current[0][0]:.4g}")
    out.beam = [(h, list(ids)) for h, ids in current]
    return out
