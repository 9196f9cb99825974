"""The engine settings a provider chooses, and the sampler settings of its API, checked once."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from bhtcli.errors import InputError, parameter_name

KV_TYPES = ("f16", "f32")


@dataclass(frozen=True)
class EngineSettings:
    """How the engine runs: threads, the physical batch (ubatch: the kernels' row blocks), the
    KV cache's type, flash attention (off, as llama-cpp-python's `Llama` defaults; on, it rounds
    the queries to the KV type), the context of one prompt (0: the model's, at most 512 tokens)
    and the prompts scored per engine call (`sequences`, each in its own KV stream)."""

    threads: int = 2
    batch: int = 512
    kv_type: str = "f16"
    flash_attn: bool = False
    context: int = 0
    sequences: int = 16

    def __post_init__(self):
        if not (isinstance(self.threads, int) and 1 <= self.threads <= 256):
            raise InputError(f"{parameter_name('threads')} must be an integer from 1 to 256")
        if not (isinstance(self.batch, int) and 1 <= self.batch <= 65536):
            raise InputError(f"{parameter_name('batch')} must be an integer from 1 to 65536")
        if self.kv_type not in KV_TYPES:
            raise InputError(f"{parameter_name('kv_type')} must be one of {', '.join(KV_TYPES)}")
        if not (isinstance(self.sequences, int) and 1 <= self.sequences <= 256):
            raise InputError(f"{parameter_name('sequences')} must be an integer from 1 to 256")
        if not (isinstance(self.context, int) and 0 <= self.context <= 1 << 20):
            raise InputError(f"{parameter_name('context')} must be an integer >= 0 (0: the model's)")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Sampler:
    """llama.cpp's sampler chain as an API runs it: top-k, top-p, min-p, temperature, then a
    draw (common/sampling.cpp's default order). The default is the raw softmax: T = 1, no
    truncation (top_k 0, top_p 1, min_p 0). temperature 0 is greedy."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self):
        t, k, p, m = self.temperature, self.top_k, self.top_p, self.min_p
        if not (isinstance(t, (int, float)) and math.isfinite(t) and 0 <= t <= 100):
            raise InputError(f"{parameter_name('temperature')} must be a number from 0 to 100 "
                             "(0: greedy)")
        if not (isinstance(k, int) and k >= 0):
            raise InputError(f"{parameter_name('top_k')} must be an integer >= 0 (0: off)")
        if not (isinstance(p, (int, float)) and 0 < p <= 1):
            raise InputError(f"{parameter_name('top_p')} must be in (0, 1] (1: off)")
        if not (isinstance(m, (int, float)) and 0 <= m < 1):
            raise InputError(f"{parameter_name('min_p')} must be in [0, 1) (0: off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def raw(self) -> bool:
        """The untouched softmax of the logits."""
        return self.temperature == 1 and self.top_k == 0 and self.top_p >= 1 and self.min_p <= 0

    def to_dict(self) -> dict:
        return {"temperature": float(self.temperature), "top_k": int(self.top_k),
                "top_p": float(self.top_p), "min_p": float(self.min_p)}
