"""Shapes from headers: models of different shapes are refused before any is read or
dequantized (bhtcli/io/shapes.py), and the headers' shape is the loaded matrix's shape."""
import os

import gguf.quants
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import save_file

from bhtcli import InputError, load_matrix
from bhtcli.io.load import load_models, load_pair
from bhtcli.io.shapes import check_same_shape, describe, header_shape
from cli_run import run
from test_checkpoints import hf_folder
from test_gguf import write_gguf

RNG = np.random.default_rng(3)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture
def no_dequantizing(monkeypatch):
    """Dequantizing (or mapping a tensor) is an error: what these tests refuse must be
    refused from the headers alone."""
    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was dequantized before the shapes were compared")
    monkeypatch.setattr(gguf.quants, "dequantize", refuse)


@pytest.fixture
def files(tmp_path):
    """One input of each headed format: {label: (spec, shape)}."""
    out = {}
    out["gguf"] = (write_gguf(tmp_path / "a.gguf", {"output.weight": (normal(64, 32), Q.Q8_0),
                                                    "token_embd.weight": (normal(64, 32), Q.Q8_0)}),
                   (64, 32))
    out["gguf_tied"] = (write_gguf(tmp_path / "tied.gguf", {"token_embd.weight": (normal(48, 32), Q.Q4_0)}),
                        (48, 32))
    out["gguf_named"] = (write_gguf(tmp_path / "n.gguf", {"output.weight": (normal(64, 32), Q.Q8_0),
                                                          "blk.0.ffn_up.weight": (normal(96, 32), Q.Q8_0)})
                         + ":blk.0.ffn_up.weight", (96, 32))
    np.save(tmp_path / "a.npy", normal(40, 8))
    out["npy"] = (str(tmp_path / "a.npy"), (40, 8))
    np.savez(tmp_path / "one.npz", m=normal(7, 3))
    out["npz"] = (str(tmp_path / "one.npz"), (7, 3))
    np.savez(tmp_path / "two.npz", m=normal(7, 3), w=normal(5, 2))
    out["npz_key"] = (str(tmp_path / "two.npz") + ":w", (5, 2))
    save_file({"lm_head.weight": normal(30, 6), "norm": normal(6)}, str(tmp_path / "h.safetensors"))
    out["safetensors"] = (str(tmp_path / "h.safetensors"), (30, 6))
    out["safetensors_named"] = (str(tmp_path / "h.safetensors") + ":lm_head.weight", (30, 6))
    tensors = {"model.embed_tokens.weight": normal(20, 6), "lm_head.weight": normal(20, 6),
               "model.layers.0.mlp.up_proj.weight": normal(12, 6)}
    folder = hf_folder(tmp_path / "f", tensors, {"tie_word_embeddings": False}, shards=2)
    out["folder"] = (folder, (20, 6))
    out["folder_named"] = (folder + ":model.layers.0.mlp.up_proj.weight", (12, 6))
    return out


def test_header_shapes_are_the_loaded_shapes(files):
    for label, (spec, shape) in files.items():
        assert header_shape(spec) == shape, label
        assert load_matrix(spec).shape == shape, label


def test_inputs_without_headers_have_no_shape(tmp_path):
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)                       # never opened: opening it would block
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY\x01\x00")   # damaged: loading says what is wrong
    for spec in (str(tmp_path / "a.csv"), "-", str(fifo), str(bad), str(tmp_path / "missing.npy")):
        assert header_shape(spec) is None, spec
    assert describe(str(fifo)).kind == "stream" and describe("-").kind == "stream"
    assert header_shape(np.zeros((3, 2))) == (3, 2) and header_shape(np.zeros(3)) is None


@pytest.mark.parametrize("a,b", [("gguf", "gguf_tied"), ("gguf", "npy"), ("gguf_named", "folder"),
                                 ("safetensors", "npz"), ("folder_named", "npz_key"),
                                 ("gguf_tied", "safetensors_named")])
def test_a_pair_of_different_shapes_is_refused_before_dequantizing(files, capsys, no_dequantizing,
                                                                   a, b, tmp_path):
    (spec_a, shape_a), (spec_b, shape_b) = files[a], files[b]
    out = tmp_path / "x.npy"
    code, stdout, err = run(capsys, "design", spec_a, spec_b, "-E", "1", "--out", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert err == (f"Error: {spec_a} has shape {shape_a} but {spec_b} has shape {shape_b}; both "
                   "models need the same number of rows (answers) and columns (query size)\n")
    with pytest.raises(InputError, match="has shape"):
        load_pair(spec_a, spec_b)


def test_k_models_of_different_shapes_are_refused_before_dequantizing(files, no_dequantizing):
    specs = [files["npy"][0], files["gguf"][0], files["gguf_tied"][0]]
    with pytest.raises(InputError) as err:
        load_models(specs, ["M1", "M2", "M3"])
    assert str(err.value) == ("model 2 (M2) has shape (64, 32) but model 1 (M1) has shape (40, 8); "
                              "all models need the same number of rows (answers) and columns "
                              "(query size)")
    with pytest.raises(InputError, match=r"model 3 \(c\) has shape \(48, 32\) but model 1 \(a\)"):
        check_same_shape([files["gguf"][0], "-", files["gguf_tied"][0]], ["a", "-", "c"], numbered=True)


def test_same_shapes_still_load_and_text_is_compared_once_read(files, tmp_path):
    A, B = load_pair(files["gguf"][0], files["gguf"][0] + ":token_embd.weight")
    assert A.shape == B.shape == (64, 32)
    np.savetxt(tmp_path / "b.csv", normal(40, 9), delimiter=",")
    with pytest.raises(InputError, match=r"has shape \(40, 8\) but .*b.csv has shape \(40, 9\)"):
        load_pair(files["npy"][0], str(tmp_path / "b.csv"))
    mats = load_models([files["npy"][0], files["npy"][0]], ["a", "b"])
    assert [m.shape for m in mats] == [(40, 8), (40, 8)]
    with pytest.raises(InputError, match=r"model 2 \(b\) has shape \(40, 9\)"):
        load_models([files["npy"][0], str(tmp_path / "b.csv")], ["a", "b"])
    with pytest.raises(InputError, match="at most one model can be read from standard input"):
        load_models(["-", "-", files["npy"][0]], ["a", "b", "c"])
