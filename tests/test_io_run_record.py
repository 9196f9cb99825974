"""The run record (bhtcli/io/run_record.py): inputs as given, the tensor chosen, each file's
size and SHA-256 (against hashlib), a skipped hash as null, symlinks and pipes, the version."""
import hashlib
import json
import os
from importlib.metadata import version as installed

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import save_file

from bhtcli import settings
from bhtcli.io import reads
from bhtcli.io.load import load_matrix, load_pair
from bhtcli.io.run_record import CHUNK, file_record, run_record, sha256, version
from test_checkpoints import hf_folder
from test_gguf import write_gguf

RNG = np.random.default_rng(5)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_sha256_is_hashlib_of_the_bytes_over_several_chunks(tmp_path):
    data = RNG.integers(0, 256, size=3 * CHUNK + 1234, dtype=np.uint8).tobytes()
    (tmp_path / "big.bin").write_bytes(data)
    (tmp_path / "empty.bin").write_bytes(b"")
    assert sha256(str(tmp_path / "big.bin")) == hashlib.sha256(data).hexdigest()
    assert sha256(str(tmp_path / "empty.bin")) == hashlib.sha256(b"").hexdigest()
    entry = file_record(str(tmp_path / "big.bin"))
    assert entry == {"path": str(tmp_path / "big.bin"), "size": len(data),
                     "sha256": hashlib.sha256(data).hexdigest(), "symlink_to": None}
    assert file_record(str(tmp_path / "big.bin"), hashes=False)["sha256"] is None


def test_inputs_tensor_chosen_and_files_of_a_command(tmp_path):
    gguf_file = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (normal(64, 32), Q.Q8_0)})
    save_file({"lm_head.weight": normal(64, 32), "norm": normal(32)}, str(tmp_path / "h.safetensors"))
    folder = hf_folder(tmp_path / "f", {"lm_head.weight": normal(64, 32), "w": normal(3, 32)},
                       {"tie_word_embeddings": False}, shards=2)
    np.save(tmp_path / "a.npy", normal(64, 32))
    specs = [gguf_file, str(tmp_path / "h.safetensors"), folder, str(tmp_path / "a.npy")]
    with reads.input_session():
        for spec in specs:
            load_matrix(spec)
        record = run_record(specs)
    json.dumps(record, allow_nan=False)                      # JSON-safe as it is
    assert record["hashed"] is True and record["bht_version"] == version()
    assert [(i["given"], i["format"], i["tensor"], i["shape"], i["stored"]) for i in record["inputs"]] == [
        (gguf_file, "gguf", "token_embd.weight", [64, 32], "Q8_0"),
        (str(tmp_path / "h.safetensors"), "safetensors", "lm_head.weight", [64, 32], "F32"),
        (folder, "folder", "lm_head.weight", [64, 32], "F32"),
        (str(tmp_path / "a.npy"), "npy", None, [64, 32], "float32")]
    paths = [f["path"] for f in record["files"]]
    shards = sorted(str(p) for p in (tmp_path / "f").glob("*.safetensors"))
    assert paths[:2] == [gguf_file, str(tmp_path / "h.safetensors")]
    assert sorted(paths[2:]) == sorted([os.path.join(folder, "config.json"),
                                        os.path.join(folder, "model.safetensors.index.json"),
                                        *shards, str(tmp_path / "a.npy")])
    for entry in record["files"]:
        with open(entry["path"], "rb") as fh:
            data = fh.read()
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    # outside a session: the files the inputs' headers open, the same ones
    assert sorted(f["path"] for f in run_record(specs, hashes=False)["files"]) == sorted(paths)


def test_skipped_hashes_are_null_and_symlinks_are_hashed_through(tmp_path):
    np.save(tmp_path / "a.npy", normal(4, 3))
    os.symlink(tmp_path / "a.npy", tmp_path / "link.npy")
    np.save(tmp_path / "b.npy", normal(4, 3))
    with reads.input_session():
        load_pair(str(tmp_path / "link.npy"), str(tmp_path / "b.npy"))
        skipped = run_record([str(tmp_path / "link.npy"), str(tmp_path / "b.npy")], hashes=False)
        hashed = run_record([str(tmp_path / "link.npy"), str(tmp_path / "b.npy")])
    assert skipped["hashed"] is False and all(f["sha256"] is None for f in skipped["files"])
    assert json.loads(json.dumps(skipped))["files"][0]["sha256"] is None      # null in JSON
    link = hashed["files"][0]
    assert link["path"] == str(tmp_path / "link.npy")
    assert link["symlink_to"] == os.path.realpath(tmp_path / "a.npy")
    assert link["sha256"] == hashlib.sha256((tmp_path / "a.npy").read_bytes()).hexdigest()
    assert hashed["files"][1]["symlink_to"] is None


def test_pipes_and_standard_input_are_inputs_without_files(tmp_path):
    """A pipe's bytes are read once and not kept: it is listed as a `stream` input, with no
    size or hash (no entry in files)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    np.save(tmp_path / "a.npy", normal(4, 3))
    record = run_record([str(fifo), "-", str(tmp_path / "a.npy"), np.zeros((4, 3))])
    assert [(i["given"], i["format"], i["shape"]) for i in record["inputs"]] == [
        (str(fifo), "stream", None), ("-", "stream", None), (str(tmp_path / "a.npy"), "npy", [4, 3]),
        (None, "array", [4, 3])]
    assert [f["path"] for f in record["files"]] == [str(tmp_path / "a.npy")]


def test_version_from_settings_else_the_installed_package(monkeypatch):
    if not hasattr(settings, "__version__"):
        assert version() == installed("bht")
    monkeypatch.setattr(settings, "__version__", "9.9.9", raising=False)
    assert version() == "9.9.9" and run_record([])["bht_version"] == "9.9.9"
    assert run_record([], engine={"name": "llama.cpp"})["engine"] == {"name": "llama.cpp"}
