"""Hugging Face checkpoint folders (shards, tied heads, softcapping), `bht tensors` and
`bht quantize` (bit for bit against the gguf package's quantize and dequantize)."""
import json
import os

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from bhtcli import InputError, load_matrix
from cli_run import run
from bhtcli.commands.quantize import TYPES


def hf_folder(path, tensors, config=None, shards=2):
    """A checkpoint folder: `tensors` split over `shards` files with an index (shards=1: a
    single model.safetensors without index)."""
    os.makedirs(path, exist_ok=True)
    names = list(tensors)
    if shards == 1:
        save_file(tensors, os.path.join(path, "model.safetensors"))
    else:
        weight_map = {}
        for k in range(shards):
            part = {n: tensors[n] for n in names[k::shards]}
            file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            save_file(part, os.path.join(path, file))
            weight_map.update({n: file for n in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, fh)
    if config is not None:
        with open(os.path.join(path, "config.json"), "w") as fh:
            json.dump(config, fh)
    return str(path)


@pytest.fixture
def model():
    rng = np.random.default_rng(0)
    return {"model.embed_tokens.weight": rng.standard_normal((40, 6)).astype(np.float32),
            "model.layers.0.mlp.up_proj.weight": rng.standard_normal((12, 6)).astype(np.float32),
            "model.norm.weight": np.ones(6, dtype=np.float32),
            "lm_head.weight": rng.standard_normal((40, 6)).astype(np.float32)}


# --- folders ----------------------------------------------------------------------------------
def test_sharded_folder_head_and_named_tensors(tmp_path, model, capsys):
    folder = hf_folder(tmp_path / "m", model, {"model_type": "llama", "tie_word_embeddings": False}, shards=3)
    np.testing.assert_array_equal(load_matrix(folder), model["lm_head.weight"].astype(np.float64))
    for name in ("model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"):
        np.testing.assert_array_equal(load_matrix(f"{folder}:{name}"), model[name].astype(np.float64))
    code, out, err = run(capsys, "bound", folder, f"{folder}:model.embed_tokens.weight", "-E", "1", "--json")
    assert code == 0 and json.loads(out)["n"] == 40
    assert err == f"Note: {folder}: the head is lm_head.weight, 40 x 6 F32\n"


@pytest.mark.parametrize("embedding", ["model.embed_tokens.weight", "transformer.wte.weight",
                                       "gpt_neox.embed_in.weight", "model.decoder.embed_tokens.weight",
                                       "embeddings.word_embeddings.weight", "wte.weight"])
def test_tied_heads_are_the_input_embedding(tmp_path, model, capsys, embedding):
    tensors = {embedding: model["model.embed_tokens.weight"], "norm.weight": model["model.norm.weight"]}
    folder = hf_folder(tmp_path / "m", tensors, {"tie_word_embeddings": True}, shards=1)
    code, out, err = run(capsys, "tensors", folder, "--json")
    listing = json.loads(out)
    assert code == 0 and listing["head"] == embedding and listing["head_tied"] is True
    assert (listing["n"], listing["d"]) == (40, 6)
    np.testing.assert_array_equal(load_matrix(folder), tensors[embedding].astype(np.float64))
    code, _, err = run(capsys, "bound", folder, folder, "-E", "1")
    assert f"the head is {embedding}, 40 x 6 F32 (tied to the input embedding; no lm_head.weight)" in err


def test_a_folder_without_config_reads_a_stored_head_or_a_named_embedding(tmp_path, model, capsys):
    """Without config.json nothing says the embedding is the head (an untied model missing its
    head shard would be audited on its embedding): a stored head is read, a tied one must be
    named; a config.json that does not mention tying means tied (transformers' default)."""
    stored = hf_folder(tmp_path / "stored", model)
    np.testing.assert_array_equal(load_matrix(stored), model["lm_head.weight"].astype(np.float64))
    tied = {k: v for k, v in model.items() if k != "lm_head.weight"}
    bare = hf_folder(tmp_path / "bare", tied)
    with pytest.raises(InputError, match=f"name the head: {bare}:model.embed_tokens.weight "):
        load_matrix(bare)
    np.testing.assert_array_equal(load_matrix(f"{bare}:model.embed_tokens.weight"),
                                  tied["model.embed_tokens.weight"].astype(np.float64))
    silent = hf_folder(tmp_path / "silent", tied, {"model_type": "llama"})
    np.testing.assert_array_equal(load_matrix(silent), tied["model.embed_tokens.weight"].astype(np.float64))
    # bht tensors lists what FILE alone reads: nothing for the bare folder, the embedding
    # (tied) once a config.json says so, the stored head otherwise
    listed = {}
    for folder in (bare, silent, stored):
        code, out, _ = run(capsys, "tensors", folder, "--json")
        assert code == 0
        listed[folder] = (json.loads(out)["head"], json.loads(out)["head_tied"])
    assert listed[bare] == (None, None)
    assert listed[silent] == ("model.embed_tokens.weight", True)
    assert listed[stored] == ("lm_head.weight", False)
    code, out, _ = run(capsys, "tensors", bare)
    assert "none found: name a tensor with FILE:TENSOR" in out


def test_softcapping_in_config_selects_softcap(tmp_path, model, capsys):
    config = {"model_type": "gemma2", "final_logit_softcapping": 30.0}
    tied = {k: v for k, v in model.items() if k != "lm_head.weight"}
    a = hf_folder(tmp_path / "a", tied, config)
    b_tensors = dict(tied, **{"model.embed_tokens.weight": tied["model.embed_tokens.weight"] + np.float32(0.05)})
    b = hf_folder(tmp_path / "b", b_tensors, config)
    code, out, err = run(capsys, "design", a, b, "-E", "1", "--json")
    r = json.loads(out)
    assert code == 0 and r["readout"]["link_a"] == r["readout"]["link_b"] == "softcap:30"
    code, out, _ = run(capsys, "tensors", a, "--json")
    assert json.loads(out)["softcap"] == 30.0 and json.loads(out)["architecture"] == "gemma2"
    code, out, _ = run(capsys, "bound", a, b, "-E", "1", "--link-a", "exp", "--json")
    assert json.loads(out)["readout"]["link_a"] == "exp" and json.loads(out)["readout"]["link_b"] == "softcap:30"


@pytest.mark.parametrize("case,message", [
    ("missing_shard", "names the shard model-00002-of-00002.safetensors, missing from"),
    ("unknown", "has no tensor 'lm_head.weigth'; close names: lm_head.weight"),
    ("one_d", "has shape (6,), expected a 2-D matrix"),
    ("untied_no_head", "config.json says the head is not tied to the input embedding"),
    ("tied_without_config", "has no config.json to say whether the head is tied to the input "
                            "embedding, and holds no lm_head.weight or embed_out.weight; if the "
                            "model ties them, name the head: "),
    ("pickle_only", "is a folder without model.safetensors or model.safetensors.index.json "
                    "(pytorch_model.bin is a PyTorch pickle"),
    ("bad_index", "could not be read as JSON"),
])
def test_bad_folders(tmp_path, model, capsys, case, message):
    if case == "missing_shard":
        spec = hf_folder(tmp_path / "m", model)
        os.remove(tmp_path / "m" / "model-00002-of-00002.safetensors")
    elif case == "unknown":
        spec = hf_folder(tmp_path / "m", model) + ":lm_head.weigth"
    elif case == "one_d":
        spec = hf_folder(tmp_path / "m", model) + ":model.norm.weight"
    elif case == "untied_no_head":
        spec = hf_folder(tmp_path / "m", {k: v for k, v in model.items() if k != "lm_head.weight"},
                         {"tie_word_embeddings": False})
    elif case == "tied_without_config":
        spec = hf_folder(tmp_path / "m", {k: v for k, v in model.items() if k != "lm_head.weight"})
    elif case == "pickle_only":
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "pytorch_model.bin").write_bytes(b"PK\x03\x04")
        spec = str(tmp_path / "m")
    else:
        spec = hf_folder(tmp_path / "m", model)
        (tmp_path / "m" / "model.safetensors.index.json").write_text("{not json")
    out = tmp_path / "x.npy"
    good = str(tmp_path / "good.npy")
    np.save(good, model["lm_head.weight"])
    code, stdout, err = run(capsys, "design", spec, good, "-E", "1", "--out", str(out))
    lines = [line for line in err.splitlines() if not line.startswith("Note:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert "Traceback" not in err and stdout == "" and not out.exists()


# --- bht tensors --------------------------------------------------------------------------------
def test_tensors_of_each_format(tmp_path, model, capsys):
    folder = hf_folder(tmp_path / "m", model, {"model_type": "llama"})
    code, out, err = run(capsys, "tensors", folder, "--json")
    listing = json.loads(out)
    assert code == 0 and err == "" and listing["format"] == "folder" and listing["head"] == "lm_head.weight"
    rows = {r["name"]: r for r in listing["tensors"]}
    assert rows["model.layers.0.mlp.up_proj.weight"] == {
        "name": "model.layers.0.mlp.up_proj.weight", "shape": [12, 6], "dtype": "F32", "bytes": 12 * 6 * 4}
    assert listing["total_bytes"] == sum(v.nbytes for v in model.values())
    single = str(tmp_path / "one.safetensors")
    save_file({"w": model["lm_head.weight"].astype(np.float16)}, single)
    listing = json.loads(run(capsys, "tensors", single, "--json")[1])
    assert listing["tensors"] == [{"name": "w", "shape": [40, 6], "dtype": "F16", "bytes": 480}]
    assert listing["head"] == "w"
    npz = str(tmp_path / "m.npz")
    np.savez(npz, A=np.zeros((3, 2)), b=np.zeros(3, dtype=np.float32))
    listing = json.loads(run(capsys, "tensors", npz, "--json")[1])
    assert listing["tensors"] == [{"name": "A", "shape": [3, 2], "dtype": "float64", "bytes": 48},
                                  {"name": "b", "shape": [3], "dtype": "float32", "bytes": 12}]
    g = str(tmp_path / "m.gguf")
    writer = gguf.GGUFWriter(g, "llama")
    writer.add_tensor("token_embd.weight", gguf.quants.quantize(np.ones((40, 64), np.float32), gguf.GGMLQuantizationType.Q4_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file()
    writer.close()
    listing = json.loads(run(capsys, "tensors", g, "--json")[1])
    assert listing["tensors"] == [{"name": "token_embd.weight", "shape": [40, 64], "dtype": "Q4_0", "bytes": 40 * 2 * 18}]
    code, table, _ = run(capsys, "tensors", g)
    assert code == 0 and "token_embd.weight  (tied: the input embedding)" in table and "40 x 64" in table


def test_tensors_errors(tmp_path, capsys):
    code, _, err = run(capsys, "tensors", str(tmp_path / "nope.gguf"))
    assert code == 2 and err.startswith("Error: ") and err.count("\n") == 1
    (tmp_path / "bad.gguf").write_bytes(b"NOPE" * 10)
    code, _, err = run(capsys, "tensors", str(tmp_path / "bad.gguf"))
    assert code == 2 and "is not a GGUF file" in err


# --- bht quantize -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [t for t in TYPES if t != "int8-row"])
@pytest.mark.parametrize("stored", [np.float32, np.float64])
def test_quantize_is_the_package_round_trip_bit_for_bit(tmp_path, capsys, kind, stored):
    rng = np.random.default_rng(1)
    A = (rng.standard_normal((300, 96)) * np.exp(rng.standard_normal((300, 1)))).astype(stored)
    src, dst = str(tmp_path / "A.npy"), str(tmp_path / "B.npy")
    np.save(src, A)
    code, out, err = run(capsys, "quantize", src, "--to", kind, "--out", dst, "--json")
    assert code == 0 and err == ""
    qtype = gguf.GGMLQuantizationType[kind.upper()]
    expected = gguf.quants.dequantize(gguf.quants.quantize(A, qtype), qtype)
    got = np.load(dst)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    r = json.loads(out)
    diff = expected.astype(np.float64) - A.astype(np.float64)
    assert r["max_abs_error"] == pytest.approx(np.abs(diff).max(), rel=1e-12)
    assert r["row_norm_2inf"] == pytest.approx(np.linalg.norm(diff, axis=1).max(), rel=1e-12)
    assert r["relative_frobenius_error"] == pytest.approx(np.linalg.norm(diff) / np.linalg.norm(A.astype(np.float64)), rel=1e-10)


def test_int8_row_by_hand(tmp_path, capsys):
    A = np.array([[0.5, -1.27, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, -0.5, 0.011]], dtype=np.float32)
    src, dst = str(tmp_path / "A.npy"), str(tmp_path / "B.npy")
    np.save(src, A)
    assert run(capsys, "quantize", src, "--to", "int8-row", "--out", dst)[0] == 0
    expected = np.empty_like(A)
    for i, row in enumerate(A):          # scale = max|row| / 127 (1 for a zero row), round half even
        scale = np.float32(max(abs(v) for v in row)) / np.float32(127.0) if np.any(row) else np.float32(1.0)
        for j, v in enumerate(row):
            q = max(-127, min(127, round(float(v / scale))))
            expected[i, j] = np.float32(q) * scale
    np.testing.assert_array_equal(np.load(dst), expected)
    assert np.load(dst)[0, 1] == np.float32(-1.27)     # the largest entry is kept exactly (x 127/127)


def test_quantize_refusals(tmp_path, capsys):
    A = np.random.default_rng(2).standard_normal((10, 50)).astype(np.float32)
    src, dst = str(tmp_path / "A.npy"), str(tmp_path / "B.npy")
    np.save(src, A)
    code, _, err = run(capsys, "quantize", src, "--to", "q8_0", "--out", dst)
    assert code == 2 and err == (f"Error: {src} has rows of 50 values; q8_0 quantizes blocks of 32 values, so the "
                                 "row length must be a multiple of 32 (f16, bf16, f32 and int8-row take any)\n")
    assert not os.path.exists(dst)
    before = open(src, "rb").read()
    code, _, err = run(capsys, "quantize", src, "--to", "f16", "--out", src)
    assert code == 2 and "is also an input of this command" in err and open(src, "rb").read() == before
    code, _, err = run(capsys, "quantize", src, "--to", "q3_k", "--out", dst)
    assert code == 2 and err.startswith("Error: Invalid value for '--to'")
    with pytest.raises(InputError, match="to 'q2'"):
        from bhtcli.commands.quantize import quantize
        quantize(src, "q2", dst)
    assert os.listdir(tmp_path) == ["A.npy"]
