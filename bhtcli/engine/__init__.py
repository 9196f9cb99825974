"""The serving engine: the next-token laws a provider's engine computes for a whole model.

One small interface, so that another backend (transformers for Hugging Face folders, a GPU
build) can be added beside the first: `open_engine(path, settings)` returns an object with

- `tokenize(text) -> list[int]` and `piece(token) -> str`, `vocabulary() -> list[str]`,
  `token_text(token) -> str` (one entry of the vocabulary);
- `next_logits(prompts) -> (m, n_vocab) float32`: the logits at the end of each prompt (lists
  of token ids), many prompts per engine call;
- `draw(ids, sampler, count, seed) -> list[int]`: tokens the engine's own sampler draws;
- `record() -> dict`: binding, engine version and build, CPU features, threads, batch, KV type.

Backend: llama.cpp through llama-cpp-python (`engine/llama.py`) for GGUF files.
"""
from __future__ import annotations

from bhtcli.engine.settings import EngineSettings, Sampler


def open_engine(path, settings: EngineSettings | None = None):
    """The engine for the model file at `path` (a GGUF file: llama.cpp)."""
    from bhtcli.engine.llama import LlamaEngine
    return LlamaEngine(path, settings or EngineSettings())


__all__ = ["EngineSettings", "Sampler", "open_engine"]
