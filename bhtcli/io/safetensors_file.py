"""Reading one tensor of a ``.safetensors`` file as a read-only memory map (no copy).

The ``safetensors`` package opens and validates the file (header size, JSON, known dtypes,
offsets that tile the data section exactly); its numpy ``get_tensor`` then *copies* the
tensor into memory, which at vocabulary scale (150,000 x 4,096 float32 = 2.4 GB per matrix)
is the copy we want to avoid. The format stores every tensor as contiguous little-endian
bytes at ``8 + header_length + data_offsets[0]``, so after the package has validated the
header we re-read the same 8 + N header bytes for the offsets (the package does not expose
them), check them again, and map the bytes with ``numpy.memmap``. float16 and bfloat16
(``ml_dtypes.bfloat16``, a numpy dtype, which safetensors itself also needs for BF16) come
back as memory maps of that dtype; callers up-cast them block by block (see
:func:`bhtcli.io.validation.check_matrix`).
"""
from __future__ import annotations

import json
import math
import os
import struct

import numpy as np

from bhtcli.errors import InputError
from bhtcli.io import reads
from bhtcli.io.limits import check_dims

SUFFIX = ".safetensors"



class _Dtypes(dict):
    """safetensors dtype code -> numpy dtype (little-endian, as the format mandates). BF16's
    numpy dtype comes from ml_dtypes (0.4 s to import), loaded the first time it is asked for."""

    def __missing__(self, code):
        if code != "BF16":
            raise KeyError(code)
        import ml_dtypes
        self[code] = np.dtype(ml_dtypes.bfloat16)
        return self[code]

    def __contains__(self, code):
        return code == "BF16" or dict.__contains__(self, code)


DTYPES = _Dtypes({
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
})


def split_tensor_name(spec: str):
    """'model.safetensors:lm_head.weight' -> ('model.safetensors', 'lm_head.weight');
    a spec without a tensor name -> (spec, None). Tensor names may contain dots and colons."""
    at = spec.lower().find(SUFFIX + ":")
    if at < 0:
        return spec, None
    cut = at + len(SUFFIX)
    return spec[:cut], (spec[cut + 1:] or None)


def read_safetensors(path: str, tensor: str | None = None) -> np.ndarray:
    """One tensor of a .safetensors file, memory-mapped read-only in its stored dtype.

    Parameters
    ----------
    path : str
        The .safetensors file.
    tensor : str, optional
        The tensor's name. Without it the file must hold one tensor, or one 2-D tensor.

    Returns
    -------
    numpy.ndarray
        A read-only ``numpy.memmap`` (an in-memory array for an empty tensor) of dtype
        float64, float32, float16, ``ml_dtypes.bfloat16`` or an integer type.

    Raises
    ------
    InputError
        A corrupt file, an unknown tensor name (the message lists the 2-D tensors), or a
        dtype bht does not read (8-bit and smaller floats, bool, complex).
    """
    infos = _validated_infos(path)
    name = _choose(path, infos, tensor)
    info = infos[name]
    dtype, shape = _stored(path, name, info["dtype"], info["shape"])
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=dtype)
    offset = info["data_start"] + info["data_offsets"][0]
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _stored(label: str, name: str, code: str, shape) -> tuple:
    """(numpy dtype, shape) of a tensor bht reads; InputError for a dtype it does not read
    (8-bit floats, bool, complex) or a shape no array can have."""
    if code not in DTYPES:
        raise InputError(f"{label}:{name} is stored as {code}, which bht does not read; "
                         "store it as float32, float16 or bfloat16 (e.g. tensor.float())")
    dtype = DTYPES[code]
    shape = tuple(shape)
    check_dims(shape, dtype.itemsize, f"{label}:{name}")
    return dtype, shape


def tensor_infos(path: str) -> dict:
    """{name: {dtype, shape, data_offsets, data_start}} of a .safetensors file, validated (a
    corrupt file is an InputError); nothing is mapped or read beyond the header."""
    return _validated_infos(path)


def _validated_infos(path: str) -> dict:
    """{name: {dtype, shape, data_offsets, data_start}}, validated by the safetensors package
    and then cross-checked against the raw header this module maps the bytes from."""
    from safetensors import SafetensorError, safe_open

    fix = "re-save it with safetensors.numpy.save_file or safetensors.torch.save_file"
    reads.record(path)
    try:
        with safe_open(path, framework="np") as handle:
            checked = {k: (handle.get_slice(k).get_dtype(), list(handle.get_slice(k).get_shape()))
                       for k in handle.keys()}
    except SafetensorError as exc:
        raise InputError(f"{path} is not a valid .safetensors file ({_one_line(exc)}); {fix}") from None
    except OSError as exc:
        raise InputError(f"{path} could not be read as .safetensors ({exc.strerror or exc})") from None
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length).decode("utf-8"))
    header.pop("__metadata__", None)
    data_start = 8 + length
    for name, info in header.items():
        begin, end = info["data_offsets"]
        itemsize = DTYPES[info["dtype"]].itemsize if info["dtype"] in DTYPES else None
        consistent = (checked.get(name) == (info["dtype"], list(info["shape"]))
                      and 0 <= begin <= end and data_start + end <= size
                      and (itemsize is None or end - begin == itemsize * math.prod(info["shape"])))
        if not consistent:
            raise InputError(f"{path} is not a valid .safetensors file (tensor {name!r} has "
                             f"inconsistent offsets or shape); {fix}")
        info["data_start"] = data_start
    if set(header) != set(checked):
        raise InputError(f"{path} is not a valid .safetensors file (header names differ); {fix}")
    return header


def chosen_tensor(path: str, tensor: str | None = None) -> tuple:
    """(name, header entry) of the tensor :func:`read_safetensors` would read, from the
    header alone (nothing is mapped)."""
    infos = _validated_infos(path)
    name = _choose(path, infos, tensor)
    return name, infos[name]


LISTED = 10  # a real checkpoint has hundreds of 2-D tensors: name the largest few


def _choose(path: str, infos: dict, tensor: str | None) -> str:
    two_d = sorted((k for k, v in infos.items() if len(v["shape"]) == 2),
                   key=lambda k: (-math.prod(infos[k]["shape"]), k))
    listing = ", ".join(f"{k} ({' x '.join(map(str, infos[k]['shape']))} {infos[k]['dtype']})"
                        for k in two_d[:LISTED]) or "none"
    if len(two_d) > LISTED:
        listing += f" and {len(two_d) - LISTED} more"
    if tensor is not None:
        if tensor not in infos:
            raise InputError(f"{path} has no tensor {tensor!r}; its 2-D tensors: {listing}")
        return tensor
    if len(infos) == 1:
        return next(iter(infos))
    if len(two_d) == 1:
        return two_d[0]
    if not infos:
        raise InputError(f"{path} holds no tensors")
    raise InputError(f"{path} holds {len(infos)} tensors; pick one with {path}:TENSOR "
                     f"(its 2-D tensors: {listing})")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def read_safetensors_bytes(data: bytes, label: str, tensor: str | None = None) -> np.ndarray:
    """One tensor of safetensors bytes (a pipe or process substitution: no file to map),
    validated by the safetensors package; chosen as :func:`read_safetensors` does."""
    from safetensors import SafetensorError, deserialize

    try:
        entries = dict(deserialize(bytes(data)))
    except (SafetensorError, ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{label} is not a valid .safetensors stream ({_one_line(exc)}); re-save it "
                         "with safetensors.numpy.save_file") from None
    infos = {k: {"shape": list(v["shape"]), "dtype": v["dtype"]} for k, v in entries.items()}
    name = _choose(label, infos, tensor)
    dtype, shape = _stored(label, name, infos[name]["dtype"], infos[name]["shape"])
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(entries[name]["data"], dtype=dtype).reshape(shape)
