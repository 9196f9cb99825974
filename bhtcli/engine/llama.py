"""llama.cpp through llama-cpp-python's low-level API (`llama_cpp.llama_cpp`, ctypes).

Scoring packs many prompts into one `llama_decode` call: each prompt is its own sequence
(seq_id = its slot, positions from 0, the logits asked for at its last token only) with its
one KV cache shared by the batch (kv_unified; separate streams measured far slower), which
is cleared before the next batch. A prompt's logits do not depend on its neighbours -- up to the
kernels' summation order, which the batch composition can change (part of the engine floor
that `bht prompts` measures).

llama.cpp's own log goes nowhere unless BHT_ENGINE_LOG=1 is set.
"""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import numpy as np

from bhtcli.engine.settings import EngineSettings, Sampler
from bhtcli.errors import InputError

MAX_CONTEXT = 512           # tokens of one prompt unless the settings ask for more
_INIT = threading.Lock()
_STATE: dict = {}


def _lib():
    """The binding, with the backend initialised once and its log silenced (or let through)."""
    with _INIT:
        if "lib" not in _STATE:
            import llama_cpp
            from llama_cpp import llama_cpp as lib

            @lib.llama_log_callback
            def _log(level, text, user_data):       # noqa: ARG001
                if os.environ.get("BHT_ENGINE_LOG") == "1":
                    os.write(2, text)
            _STATE["log"] = _log                    # the callback must outlive every call
            lib.llama_log_set(_log, ctypes.c_void_p(0))
            lib.llama_backend_init()
            _STATE["lib"], _STATE["version"] = lib, llama_cpp.__version__
        return _STATE["lib"]


def check_gguf_file(path) -> Path:
    """The path of a readable GGUF file, or an InputError naming it."""
    p = Path(os.fspath(path))
    if not p.is_file():
        raise InputError(f"{p}: no such file; give the path of a GGUF model")
    with open(p, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise InputError(f"{p} is not a GGUF file (it does not start with 'GGUF'); "
                         "give a llama.cpp model file (.gguf)")
    return p


def _library_versions(lib) -> dict:
    """Which llama.cpp the binding carries: libllama's version and ggml's version and source
    commit (ggml_commit: the llama.cpp tree it was built from; "-dirty" when that tree had
    local changes). None where the library does not export them."""
    def text(library, name):
        fn = getattr(library, name, None)
        if fn is None:
            return None
        fn.restype, fn.argtypes = ctypes.c_char_p, []
        raw = fn()
        return raw.decode("utf-8", errors="replace") if raw else None

    try:
        from llama_cpp import _ggml
        ggml = _ggml.libggml
    except (ImportError, AttributeError, OSError):
        ggml = None
    return {"llama_version": text(lib._lib, "llama_version") if hasattr(lib, "_lib") else None,
            "ggml_version": text(ggml, "ggml_version") if ggml is not None else None,
            "ggml_commit": text(ggml, "ggml_commit") if ggml is not None else None}


class LlamaEngine:
    """One GGUF model loaded in llama.cpp, with a context for scoring and sampling."""

    def __init__(self, path, settings: EngineSettings):
        self.path = check_gguf_file(path)
        self.settings = settings
        lib = self.lib = _lib()
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = lib.llama_model_load_from_file(str(self.path).encode(), mp)
        if not self.model:
            raise InputError(f"{self.path}: llama.cpp could not load this GGUF file (unknown "
                             "architecture, a missing tensor or tokenizer); run with "
                             "BHT_ENGINE_LOG=1 to see why")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        train = int(lib.llama_model_n_ctx_train(self.model))
        self.context = settings.context or max(1, min(train, MAX_CONTEXT))
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self.vocab))
        cp = lib.llama_context_default_params()
        self.sequences = settings.sequences
        cp.n_ctx = self.context * self.sequences
        cp.n_batch = self.context * self.sequences
        cp.n_ubatch = self.ubatch = min(settings.batch, cp.n_batch)
        cp.n_seq_max = self.sequences
        cp.n_threads = cp.n_threads_batch = settings.threads
        kv = lib.GGML_TYPE_F32 if settings.kv_type == "f32" else lib.GGML_TYPE_F16
        cp.type_k = cp.type_v = kv
        cp.kv_unified = True
        cp.flash_attn_type = 1 if settings.flash_attn else 0
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        if not self.ctx:
            lib.llama_model_free(self.model)
            raise InputError(f"{self.path}: llama.cpp could not create a context "
                             f"({self.context} tokens); run with BHT_ENGINE_LOG=1 to see why")
        self.memory = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(self.context * self.sequences, 0, 1)
        self.calls = 0

    def close(self):
        lib = self.lib
        if getattr(self, "batch", None) is not None:
            lib.llama_batch_free(self.batch)
            self.batch = None
        if getattr(self, "ctx", None):
            lib.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            lib.llama_model_free(self.model)
            self.model = None

    def __del__(self):
        try:
            self.close()
        except Exception:       # interpreter shutdown: the library may be gone
            pass

    # ------------------------------------------------------------------ vocabulary
    def tokenize(self, text: str) -> list[int]:
        """The ids llama.cpp gives `text` (with the BOS token when the model adds one;
        special-token text is not parsed)."""
        raw = text.encode("utf-8")
        n_max = len(raw) + 8
        buf = (self.lib.llama_token * n_max)()
        n = self.lib.llama_tokenize(self.vocab, raw, len(raw), buf, n_max, self.add_bos, False)
        if n < 0:
            buf = (self.lib.llama_token * -n)()
            n = self.lib.llama_tokenize(self.vocab, raw, len(raw), buf, -n, self.add_bos, False)
        return list(buf[:n])

    def piece_bytes(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = self.lib.llama_token_to_piece(self.vocab, int(token), buf, 256, 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lib.llama_token_to_piece(self.vocab, int(token), buf, -n, 0, True)
        return buf.raw[:n]

    def piece(self, token: int) -> str:
        """The text of one token as the engine renders it."""
        return self.piece_bytes(token).decode("utf-8", errors="replace")

    def detokenize(self, ids) -> str:
        return b"".join(self.piece_bytes(t) for t in ids).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """One token's string as stored in the file (an entry of `vocabulary()`)."""
        text = self.lib.llama_vocab_get_text(self.vocab, int(token))
        return text.decode("utf-8", errors="replace")

    def vocabulary(self) -> list[str]:
        """The token strings as stored in the file (tokenizer.ggml.tokens)."""
        return [self.token_text(i) for i in range(self.n_vocab)]

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1024)
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, 1024)
        return None if n < 0 else buf.value.decode("utf-8", errors="replace")

    def check_prompt(self, ids, where: str) -> None:
        if len(ids) == 0:
            raise InputError(f"{where} is empty; give at least one token")
        if len(ids) > self.context:
            raise InputError(f"{where} has {len(ids)} tokens, more than the engine's context of "
                             f"{self.context}; shorten it")
        bad = [t for t in ids if not 0 <= int(t) < self.n_vocab]
        if bad:
            raise InputError(f"{where}: token id {bad[0]} is outside the vocabulary "
                             f"(0 to {self.n_vocab - 1})")

    # ------------------------------------------------------------------ logits
    def _decode(self, group) -> list[int]:
        """One llama_decode of the prompts in `group` (a list of id lists) on a cleared cache;
        returns the batch index of each prompt's last token."""
        lib, b = self.lib, self.batch
        lib.llama_memory_clear(self.memory, True)
        n, last = 0, []
        for s, ids in enumerate(group):
            for pos, tok in enumerate(ids):
                b.token[n] = int(tok)
                b.pos[n] = pos
                b.n_seq_id[n] = 1
                b.seq_id[n][0] = s
                b.logits[n] = pos == len(ids) - 1
                n += 1
            last.append(n - 1)
        b.n_tokens = n
        rc = lib.llama_decode(self.ctx, b)
        self.calls += 1
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} on a batch of {len(group)} prompts, "
                               f"{n} tokens")
        return last

    def _row(self, i: int) -> np.ndarray:
        ptr = self.lib.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def next_logits(self, prompts, progress=None) -> np.ndarray:
        """The logits of the next token after each prompt (lists of ids): (m, n_vocab) float32.

        Prompts are packed in their given order, `settings.sequences` per engine call;
        `progress(done, total)` is called after each call."""
        m = len(prompts)
        out = np.empty((m, self.n_vocab), dtype=np.float32)
        for k, ids in enumerate(prompts):
            self.check_prompt(ids, f"prompt {k + 1}")
        i = 0
        while i < m:
            j = min(i + self.sequences, m)
            last = self._decode(prompts[i:j])
            for r, idx in enumerate(last):
                out[i + r] = self._row(idx)
            i = j
            if progress is not None:
                progress(i, m)
        return out

    # ------------------------------------------------------------------ sampling
    def _chain(self, sampler: Sampler, seed: int):
        lib = self.lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        add = lambda s: lib.llama_sampler_chain_add(chain, s)
        if sampler.greedy:
            add(lib.llama_sampler_init_greedy())
            return chain
        if sampler.top_k > 0:
            add(lib.llama_sampler_init_top_k(sampler.top_k))
        if sampler.top_p < 1:
            add(lib.llama_sampler_init_top_p(float(sampler.top_p), 1))
        if sampler.min_p > 0:
            add(lib.llama_sampler_init_min_p(float(sampler.min_p), 1))
        add(lib.llama_sampler_init_temp(float(sampler.temperature)))
        add(lib.llama_sampler_init_dist(int(seed) & 0xFFFFFFFF))
        return chain

    def draw(self, ids, sampler: Sampler, count: int, seed: int = 0) -> list[int]:
        """`count` first tokens of independent completions of `ids`, drawn by llama.cpp's
        sampler chain (top-k, top-p, min-p, temperature, dist; greedy at temperature 0)."""
        self.check_prompt(ids, "the prompt")
        last = self._decode([list(ids)])[0]
        chain = self._chain(sampler, seed)
        try:
            return [int(self.lib.llama_sampler_sample(chain, self.ctx, last)) for _ in range(count)]
        finally:
            self.lib.llama_sampler_free(chain)

    # ------------------------------------------------------------------ the record
    def record(self) -> dict:
        """What computed the laws: binding, llama.cpp build, CPU features and the settings."""
        lib = self.lib
        info = lib.llama_print_system_info().decode("utf-8", errors="replace")
        features = sorted(part.split("=")[0].split(":")[-1].strip() for part in info.split("|")
                          if part.strip().endswith("= 1"))
        build = None
        try:
            import llama_cpp.llama_cpp as raw
            build = getattr(raw, "LLAMA_BUILD_NUMBER", None)
        except ImportError:
            pass
        return {"engine": "llama.cpp", "binding": "llama-cpp-python",
                "binding_version": _STATE["version"], "llama_cpp_build": build,
                **_library_versions(lib),
                "system_info": info.strip(), "cpu_features": features,
                "threads": self.settings.threads, "batch": self.ubatch,
                "kv_type": self.settings.kv_type, "flash_attn": self.settings.flash_attn,
                "context": self.context,
                "sequences": self.sequences}
