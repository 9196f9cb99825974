"""Reading tensors of a Hugging Face checkpoint folder: config.json, and the safetensors
weights as one `model.safetensors` or as shards listed by `model.safetensors.index.json`
(its `weight_map`: tensor name -> shard file).

The head (the n_vocab x d output layer) is `lm_head.weight` (or `embed_out.weight`, GPT-NeoX's
name); models with tied embeddings store no head at all (SmolLM2, Gemma, Llama-3.2-1B,
Qwen2.5-0.5B): their head is the input embedding, found under the common architectures' names
(EMBEDDINGS). Each tensor is read by :func:`bhtcli.io.safetensors_file.read_safetensors`
(a memory map of its shard).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from bhtcli.errors import InputError
from bhtcli.io import reads

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
CONFIG = "config.json"
HEADS = ("lm_head.weight", "embed_out.weight", "model.lm_head.weight", "output.weight")
EMBEDDINGS = (
    "model.embed_tokens.weight",                    # Llama, Mistral, Qwen2, Gemma, Phi-3, SmolLM
    "transformer.wte.weight",                       # GPT-2, GPT-J, StarCoder
    "gpt_neox.embed_in.weight",                     # GPT-NeoX, Pythia
    "model.decoder.embed_tokens.weight",            # OPT, BART decoders
    "embeddings.word_embeddings.weight",            # BERT-style encoders
    "transformer.word_embeddings.weight",           # BLOOM, Falcon
    "model.language_model.embed_tokens.weight",     # Gemma 3 (multimodal checkpoints)
    "language_model.model.embed_tokens.weight",     # LLaVA-style checkpoints
    "transformer.embedding.word_embeddings.weight", # ChatGLM
    "model.tok_embeddings.weight",                  # InternLM
    "tok_embeddings.weight",                        # original Llama
    "wte.weight",                                   # GPT-2 as saved by its authors
    "embed_tokens.weight",
    "word_embeddings.weight",
)
EMBEDDING_ENDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")


@dataclass(frozen=True)
class Folder:
    """A checkpoint folder: where each tensor is, and its config.json (or {})."""

    path: str
    weight_map: dict           # tensor name -> shard path
    config: dict
    has_config: bool = True    # False: the folder has no config.json (config is {})

    @property
    def softcap(self) -> float | None:
        """config.json's `final_logit_softcapping` (also under `text_config`), when > 0."""
        for cfg in (self.config, self.config.get("text_config") or {}):
            value = cfg.get("final_logit_softcapping") if isinstance(cfg, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    value = float(value)
                except OverflowError:   # a JSON integer beyond float64: no cap at all
                    continue
                if math.isfinite(value) and value > 0:
                    return value
        return None

    def head(self) -> tuple[str | None, bool]:
        """(the head tensor's name, tied): a stored head, else the input embedding."""
        for name in HEADS:
            if name in self.weight_map:
                return name, False
        for name in EMBEDDINGS:
            if name in self.weight_map:
                return name, True
        ends = [k for k in self.weight_map if k.endswith(EMBEDDING_ENDINGS)]
        return (ends[0], True) if len(ends) == 1 else (None, False)

    @property
    def tied(self) -> bool | None:
        """config.json's tie_word_embeddings (None when it does not say)."""
        value = self.config.get("tie_word_embeddings")
        return value if isinstance(value, bool) else None


def open_folder(path: str) -> Folder:
    """Read config.json and the weight map of a checkpoint folder.

    Raises
    ------
    InputError
        No safetensors weights (PyTorch .bin files are refused), an unreadable index or
        config, an index naming a shard that is missing.
    """
    has_config = os.path.isfile(os.path.join(path, CONFIG))
    config = read_json(os.path.join(path, CONFIG), path) if has_config else {}
    index = os.path.join(path, INDEX)
    if os.path.isfile(index):
        data = read_json(index, path)
        wmap = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
            raise InputError(f"{index} has no weight_map of tensor names to shard files; download it again")
        shards = {v: _shard(path, v, index) for v in wmap.values()}
        missing = sorted(v for v, file in shards.items() if not os.path.isfile(file))
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise InputError(f"{index} names the shard {missing[0]}{more}, missing from {path}; "
                             "download every shard of the checkpoint")
        for file in shards.values():
            reads.record(file)              # every shard is an input, read or not
        return Folder(path, {k: shards[v] for k, v in wmap.items()}, config, has_config)
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if SINGLE in files:
        files = [SINGLE]
    if not files:
        pickled = [f for f in os.listdir(path) if f.endswith((".bin", ".pt", ".pth", ".ckpt"))]
        hint = (f" ({pickled[0]} is a PyTorch pickle, which bht refuses: convert it to safetensors "
                "as docs/inputs.md shows)" if pickled else "")
        raise InputError(f"{path} is a folder without {SINGLE} or {INDEX}{hint}; give a matrix "
                         "file, a .gguf file or a Hugging Face checkpoint folder")
    from bhtcli.io.safetensors_file import tensor_infos
    wmap = {}
    for f in files:
        for name in tensor_infos(os.path.join(path, f)):
            wmap.setdefault(name, os.path.join(path, f))
    return Folder(path, wmap, config, has_config)


def _shard(path: str, name: str, index: str) -> str:
    """The file of a shard the index names: inside the folder (a relative path without '..';
    a shard may still be a symlink, as in the Hugging Face cache)."""
    parts = name.replace("\\", "/").split("/")
    if not name or os.path.isabs(name) or ".." in parts:
        raise InputError(f"{index} names the shard {name!r}, outside the folder {path}; shards are "
                         "files of the checkpoint folder: download the checkpoint again")
    return os.path.join(path, name)


def read_json(file: str, folder: str) -> dict:
    """The JSON object in `file` (config.json, the index); anything else is one InputError."""
    from bhtcli.io.text import parse_json
    reads.record(file)
    try:
        with open(file, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"{file} could not be read ({exc.strerror or exc}); download the "
                         "checkpoint folder again") from None
    value = parse_json(data, file, "a JSON object; download the checkpoint folder again")
    if not isinstance(value, dict):
        raise InputError(f"{file} holds a JSON {type(value).__name__.replace('NoneType', 'null')}, "
                         "not an object; download the checkpoint folder again")
    return value


def read_folder(path: str, tensor: str | None = None):
    """One tensor of a checkpoint folder (memory-mapped from its shard), or the head."""
    from bhtcli.io.safetensors_file import read_safetensors
    folder = open_folder(path)
    name = choose_tensor(folder, tensor)
    shard_info(folder, name)
    return read_safetensors(folder.weight_map[name], name)


def shard_info(folder: Folder, name: str) -> dict:
    """The header entry of tensor `name` in the shard the weight map names; InputError when that
    shard does not hold it (an index out of step with its shards)."""
    from bhtcli.io.safetensors_file import tensor_infos
    shard = folder.weight_map[name]
    infos = tensor_infos(shard)
    if name not in infos:
        raise InputError(f"{os.path.join(folder.path, INDEX)} puts {name} in "
                         f"{os.path.basename(shard)}, which does not hold it; download the "
                         "checkpoint folder again (index and shards together)")
    return infos[name]


def choose_tensor(folder: Folder, tensor: str | None, quiet: bool = False) -> str:
    """The requested tensor's name, or the head's; InputError naming close names."""
    from bhtcli.io.tensor_names import missing_tensor, no_head, note_head
    if tensor is not None:
        if tensor not in folder.weight_map:
            raise missing_tensor(folder.path, tensor, folder_shapes(folder))
        return tensor
    name, tied = folder.head()
    if name is None:
        raise no_head(folder.path, HEADS + EMBEDDINGS[:3], folder_shapes(folder))
    if tied and folder.tied is False:
        raise InputError(f"{folder.path}: config.json says the head is not tied to the input "
                         f"embedding, but the folder holds no {' or '.join(HEADS[:2])}; name the "
                         f"head with {folder.path}:TENSOR")
    if tied and not folder.has_config:
        # without config.json nothing says the embedding is the head: an untied model whose
        # head shard is missing would be audited on its input embedding, silently
        raise InputError(f"{folder.path} has no config.json to say whether the head is tied to the "
                         f"input embedding, and holds no {' or '.join(HEADS[:2])}; if the model "
                         f"ties them, name the head: {folder.path}:{name} (else download its "
                         "config.json and every shard)")
    if not quiet:
        from bhtcli.io.safetensors_file import tensor_infos
        info = shard_info(folder, name)
        note_head(folder.path, name, tuple(info["shape"]), info["dtype"], tied, "no lm_head.weight")
    return name


def folder_shapes(folder: Folder) -> dict:
    """name -> (shape, dtype) of every tensor (the shards' headers only)."""
    from bhtcli.io.safetensors_file import tensor_infos
    out = {}
    for shard in dict.fromkeys(folder.weight_map.values()):
        for name, info in tensor_infos(shard).items():
            if folder.weight_map.get(name) == shard:
                out[name] = (tuple(info["shape"]), info["dtype"])
    return out
