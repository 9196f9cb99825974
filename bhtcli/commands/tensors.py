"""`tensors`: what a checkpoint or archive holds (name, shape, stored type, bytes), which tensor
bht reads as the head, and the softcap the checkpoint declares. Only headers are read."""
from __future__ import annotations

import math
import os
import zipfile


from bhtcli.errors import InputError
from bhtcli.io.npy_file import ZIP_ERRORS
from bhtcli.results import TensorsResult


def list_tensors(path) -> TensorsResult:
    """The tensors of a .gguf or .safetensors file, a Hugging Face checkpoint folder, a .npz
    archive or a .npy file (headers only; nothing is read into memory).

    Raises
    ------
    InputError
        A missing, unreadable or damaged file, or one of another format.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file or folder; check the path")
    lower = path.lower()
    if os.path.isdir(path):
        return _folder(path)
    if lower.endswith(".gguf"):
        return _gguf(path)
    if lower.endswith(".safetensors"):
        return _safetensors(path)
    if lower.endswith(".npz"):
        return _npz(path)
    if lower.endswith(".npy"):
        return _npy(path)
    raise InputError(f"{path}: bht tensors lists .gguf, .safetensors, .npz and .npy files and "
                     "checkpoint folders")


def _result(path, fmt, rows, head=None, tied=None, softcap=None, arch=None) -> TensorsResult:
    shape = next((r["shape"] for r in rows if r["name"] == head), None)
    n, d = (shape if shape is not None and len(shape) == 2 else (None, None))
    return TensorsResult(path, fmt, rows, sum(r["bytes"] for r in rows), head,
                         tied if head is not None else None, softcap, arch, n=n, d=d)


def _row(name, shape, dtype, nbytes) -> dict:
    return {"name": name, "shape": [int(v) for v in shape], "dtype": dtype, "bytes": int(nbytes)}


def _gguf(path):
    from bhtcli.io.gguf_file import open_gguf
    header, _ = open_gguf(path)
    rows = [_row(t.name, t.shape, t.type_name, t.nbytes) for t in header.tensors.values()]
    head, tied = header.head()
    return _result(path, "gguf", rows, head, tied, header.softcap, header.architecture)


def _safetensor_rows(file, names=None) -> list:
    from bhtcli.io.safetensors_file import tensor_infos
    infos = tensor_infos(file)
    return [_row(k, v["shape"], v["dtype"], v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in infos.items() if names is None or names.get(k) == file]


def _folder(path):
    from bhtcli.io.hf_folder import open_folder
    folder = open_folder(path)
    rows = []
    for shard in dict.fromkeys(folder.weight_map.values()):
        rows += _safetensor_rows(shard, folder.weight_map)
    order = {name: k for k, name in enumerate(folder.weight_map)}
    rows.sort(key=lambda r: order.get(r["name"], len(order)))
    head, tied = folder.head()
    arch = folder.config.get("model_type")
    return _result(path, "folder", rows, head, tied, folder.softcap,
                   arch if isinstance(arch, str) else None)


def _safetensors(path):
    from bhtcli.io.checkpoint import checkpoint_softcap
    from bhtcli.io.hf_folder import Folder
    rows = _safetensor_rows(path)
    two_d = [r["name"] for r in rows if len(r["shape"]) == 2]
    head, tied = Folder(path, {r["name"]: path for r in rows}, {}).head()
    if head is None and (len(rows) == 1 or len(two_d) == 1):    # what FILE alone reads
        head, tied = (rows[0]["name"] if len(rows) == 1 else two_d[0]), False
    return _result(path, "safetensors", rows, head, tied, checkpoint_softcap(path))


def _npy_header(fh, label):
    from bhtcli.io.npy_file import read_header
    header = read_header(fh, label)
    return header.shape, header.dtype


def _npz(path):
    rows = []
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if not member.endswith(".npy"):
                    continue
                with archive.open(member) as fh:
                    shape, dtype = _npy_header(fh, f"{path}:{member[:-4]}")
                rows.append(_row(member[:-4], shape, dtype.name, dtype.itemsize * math.prod(shape)))
    except ZIP_ERRORS as exc:
        raise InputError(f"{path} is not a valid .npz file ({exc}); re-save it with numpy.savez") from None
    head = rows[0]["name"] if len(rows) == 1 else None
    return _result(path, "npz", rows, head, False)


def _npy(path):
    try:
        with open(path, "rb") as fh:
            shape, dtype = _npy_header(fh, path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a valid .npy file ({exc}); re-save it with numpy.save") from None
    name = os.path.basename(path)
    return _result(path, "npy", [_row(name, shape, dtype.name, dtype.itemsize * math.prod(shape))],
                   name, False)
