"""Refusing PyTorch checkpoints and pickles: loading one runs code stored in the file."""
from __future__ import annotations

from pathlib import Path

from bhtcli.errors import InputError

TORCH_SUFFIXES = {".pt", ".pth", ".bin", ".ckpt"}
PICKLE_SUFFIXES = {".pkl", ".pickle"}
ZIP_MAGIC = b"PK\x03\x04"                                # PyTorch's default checkpoint format
PICKLE_MAGICS = tuple(bytes([0x80, p]) for p in range(2, 6))  # pickle protocols 2-5


def refuse_pickles(path: str, suffix: str, known: set) -> None:
    """Raise InputError for a PyTorch checkpoint or a pickle (by suffix, or by magic bytes when
    the suffix is not one of `known`), saying why and how to convert it."""
    torch = suffix in TORCH_SUFFIXES
    if torch or suffix in PICKLE_SUFFIXES:
        what = f"a PyTorch checkpoint ({suffix}, a pickle)" if torch else "a Python pickle"
    elif suffix not in known:
        with open(path, "rb") as fh:
            magic = fh.read(4)
        torch = magic.startswith(ZIP_MAGIC)
        if torch:
            what = "a zip archive (the format of PyTorch checkpoints, which hold pickles)"
        elif magic[:2] in PICKLE_MAGICS:
            what = "a pickle"
        else:
            return
    else:
        return
    why = f"{path} is {what}; pickled files are refused because loading one runs code stored in it"
    if not torch:
        raise InputError(f"{why}. Convert it once, in an environment you trust: load it there "
                         "and save the matrix with numpy.save (.npy) or safetensors.numpy.save_file")
    out = Path(path).with_suffix(".safetensors").name
    raise InputError(
        f"{why}. Convert it once, in an environment you trust: python -c \"import torch, "
        f"safetensors.torch as st; sd = torch.load('{path}', weights_only=True); "
        f"st.save_file({{k: v.contiguous() for k, v in sd.items()}}, '{out}')\" "
        f"then pass {out}:TENSOR")
