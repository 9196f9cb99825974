"""Model checkpoints as inputs: GGUF files and Hugging Face folders (docs/inputs.md).

    FILE.gguf            the output layer (output.weight, else the tied token_embd.weight)
    FILE.gguf:TENSOR     that tensor, dequantized
    DIR                  the head of a checkpoint folder (lm_head.weight, else the embedding)
    DIR:TENSOR           that tensor, from whichever shard holds it

`checkpoint_softcap` says which readout a checkpoint declares: Gemma-2's
`final_logit_softcapping` (config.json, or `<arch>.final_logit_softcapping` in GGUF metadata)
means softcap:C. The messages shared by both formats (an unknown tensor with its close names,
no head found, the note saying which tensor is the head) are in bhtcli.io.tensor_names.
"""
from __future__ import annotations

import os

from bhtcli.errors import InputError
from bhtcli.io.gguf_file import SUFFIX as GGUF_SUFFIX, split_gguf_name


def split_checkpoint(spec: str):
    """(kind, path, tensor) for a GGUF file or a checkpoint folder ("gguf" or "folder";
    tensor None when not named), else None (any other input)."""
    path, tensor = split_gguf_name(spec)
    if tensor is not None or spec.lower().endswith(GGUF_SUFFIX):
        return "gguf", path, tensor
    if os.path.isdir(spec):
        return "folder", spec, None
    at = spec.find(":")
    while at > 0:                      # DIR:TENSOR (tensor names may hold colons)
        if os.path.isdir(spec[:at]):
            return "folder", spec[:at], spec[at + 1:] or None
        at = spec.find(":", at + 1)
    return None


def read_checkpoint(kind: str, path: str, tensor: str | None, dtype=None):
    """The tensor (or the head) of a GGUF file or a checkpoint folder (see the module notes)."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file; check the path")
    if kind == "gguf":
        if os.path.isdir(path):
            raise InputError(f"{path} is a folder, expected a .gguf file")
        from bhtcli.io.gguf_file import read_gguf
        return read_gguf(path, tensor, dtype)
    from bhtcli.io.hf_folder import read_folder
    return read_folder(path, tensor)


def checkpoint_softcap(spec) -> float | None:
    """The cap C of the softcap:C readout a checkpoint declares for its head: a positive
    `final_logit_softcapping` in a GGUF file's metadata or a folder's config.json (also beside
    a .safetensors file), else None. Only when the spec names the head (no tensor, or the
    head's or the embedding's name). Anything that is not a readable checkpoint: None."""
    if not isinstance(spec, (str, os.PathLike)):
        return None
    spec = os.fspath(spec)
    cap = None
    try:
        found = split_checkpoint(spec)
        if found is not None and found[0] == "gguf":
            from bhtcli.io.gguf_file import open_gguf
            header, _ = open_gguf(found[1])
            head = header.head()[0]
            if found[2] in (None, head, "output.weight", "token_embd.weight"):
                cap = header.softcap
        elif found is not None:
            from bhtcli.io.hf_folder import HEADS, EMBEDDINGS, open_folder
            folder = open_folder(found[1])
            if found[2] is None or found[2] in HEADS + EMBEDDINGS:
                cap = folder.softcap
        else:
            from bhtcli.io.safetensors_file import split_tensor_name
            path, tensor = split_tensor_name(spec)
            config = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
            if path.lower().endswith(".safetensors") and os.path.isfile(config):
                from bhtcli.io.hf_folder import HEADS, EMBEDDINGS, Folder, read_json
                if tensor is None or tensor in HEADS + EMBEDDINGS:
                    cap = Folder(os.path.dirname(path), {}, read_json(config, path)).softcap
    except (InputError, OSError):
        return None                     # reading the matrix itself will say what is wrong
    return cap
