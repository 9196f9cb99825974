"""The laws the engine's sampler draws from: of one build, and of K builds with the engine floor.

Scoring runs one build after another, each on every engine thread. Builds side by side on one
thread each were measured slower (`bht prompts`, SmolLM2 Q4_1 and Q8_0, 1,000 prompts: 102 s
against 95 s of scoring): llama.cpp's two threads scale nearly perfectly at 16 prompts per
call, and the slower build (Q4_1) keeps one lane busy after the other has finished.
"""
from __future__ import annotations

import numpy as np

from bhtcli.engine.settings import Sampler
from bhtcli.maths.laws import setting_floors
from bhtcli.maths.sampler import sampler_log_probs


def sampler_laws(engine, prompts, sampler: Sampler, progress=None) -> np.ndarray:
    """log P(next token) after each prompt (lists of ids) under the sampler: (m, n_vocab) float64."""
    z = engine.next_logits(prompts, progress)
    return sampler_log_probs(z, sampler.temperature, sampler.top_k, sampler.top_p, sampler.min_p)


def floor_laws(singles, floor_engines, prompts, sampler: Sampler):
    """(L, floors): each build's laws from `singles` (one prompt per call: the reported laws)
    and the engine floor per build and prompt (K, m): the largest H^2 between a build's law and
    its laws under the other settings `floor_engines[k]` (maths.laws.setting_floors)."""
    L = [sampler_laws(e, prompts, sampler) for e in singles]
    return L, setting_floors(L, [[sampler_laws(f, prompts, sampler) for f in fs]
                                 for fs in floor_engines])
