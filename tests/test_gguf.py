"""GGUF input: every type the gguf package writes or dequantizes, real K-quant blocks, the head,
the shape convention, the dtype, memory, softcapping metadata and bad files."""
import hashlib
import json
import os
import tracemalloc

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from bhtcli import InputError, load_matrix
from cli_run import run
from bhtcli.io.checkpoint import checkpoint_softcap
from bhtcli.io.gguf_file import open_gguf
from bhtcli.io.load import read_array

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FIXTURE = os.path.join(DATA, "real_blocks.gguf")


def write_gguf(path, tensors, arch="llama", metadata=None):
    """tensors: {name: (array, qtype or None)}; a qtype stores quantize(array, qtype)'s bytes."""
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in (metadata or {}).items():
        writer.add_float32(key, value)
    for name, (array, qtype) in tensors.items():
        if qtype is None:
            writer.add_tensor(name, array)
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def quantizable():
    """Every type the installed package can quantize a float32 matrix to."""
    out, probe = [], np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)
    for qtype in Q:
        try:
            gguf.quants.quantize(probe, qtype)
        except (NotImplementedError, gguf.quants.QuantError, KeyError, ValueError):
            continue
        out.append(qtype)
    return out


@pytest.mark.parametrize("qtype", quantizable(), ids=lambda q: q.name)
def test_every_type_the_package_writes(tmp_path, qtype):
    assert {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0} <= set(quantizable())
    rng = np.random.default_rng(int(qtype))
    W = rng.standard_normal((48, 512)).astype(np.float32)        # n_vocab x d
    path = write_gguf(tmp_path / "m.gguf", {"output.weight": (W, None if qtype == Q.F32 else qtype)})
    stored = W if qtype == Q.F32 else gguf.quants.quantize(W, qtype)
    expected = gguf.quants.dequantize(stored, qtype) if qtype != Q.F32 else W
    assert expected.shape == (48, 512)
    for dtype in ("float64", "float32"):
        M = load_matrix(path, dtype=dtype)
        assert M.dtype == np.dtype(dtype) and M.shape == (48, 512)
        np.testing.assert_array_equal(M, expected.astype(dtype))


@pytest.mark.parametrize("qtype", [q for q in Q if q not in (Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64)
                                   and q in gguf.quants._type_traits], ids=lambda q: q.name)
def test_every_type_the_package_dequantizes(tmp_path, qtype):
    # random block bytes (the K-quants and IQ types have no quantizer): bht's reading must
    # equal gguf's dequantize of the same bytes, NaN for NaN
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, width = 6, 2 * max(block, 256)
    raw = np.random.default_rng(int(qtype)).integers(0, 256, (rows, width // block * size), dtype=np.uint8)
    writer = gguf.GGUFWriter(str(tmp_path / "r.gguf"), "llama")
    writer.add_tensor("t", raw, raw_dtype=qtype)
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file()
    writer.close()
    got = read_array(f"{tmp_path / 'r.gguf'}:t")
    assert got.shape == (rows, width) and got.dtype == np.float32
    with np.errstate(all="ignore"):       # random scales: NaN and inf are expected
        expected = gguf.quants.dequantize(raw, qtype)
    np.testing.assert_array_equal(got, expected)


def test_real_k_quant_blocks_match_the_originals():
    """tests/data/real_blocks.gguf holds rows cut from SmolLM2-135M (Q4_1) and gemma-3-270m
    Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0); real_blocks.json what gguf dequantized from the originals."""
    expected = json.load(open(os.path.join(DATA, "real_blocks.json")))["tensors"]
    reader = gguf.GGUFReader(FIXTURE)
    assert {v["type"] for v in expected.values()} >= {"Q4_K", "Q5_0", "Q6_K", "Q8_0", "Q4_1", "F32"}
    for t in reader.tensors:
        want = expected[t.name]
        got = read_array(f"{FIXTURE}:{t.name}")
        assert list(got.shape) == want["shape"]
        assert hashlib.sha256(np.ascontiguousarray(got, dtype="<f4").tobytes()).hexdigest() == want["sha256_float32"]
        np.testing.assert_array_equal(np.asarray(got).ravel()[:8], want["first"])
        np.testing.assert_array_equal(got, gguf.quants.dequantize(t.data, t.tensor_type))
        if got.ndim == 2:
            np.testing.assert_array_equal(load_matrix(f"{FIXTURE}:{t.name}"), got.astype(np.float64))


def test_header_parser_agrees_with_gguf_reader():
    header, _ = open_gguf(FIXTURE)
    reader = gguf.GGUFReader(FIXTURE)
    assert list(header.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        mine = header.tensors[t.name]
        assert (mine.type_name, mine.offset, mine.nbytes) == (t.tensor_type.name, t.data_offset, t.n_bytes)
        assert mine.shape == tuple(reversed(t.shape.tolist()))
    assert header.architecture == "gemma3"


@pytest.mark.skipif(not os.environ.get("BHT_GGUF_ORIGINALS"), reason="set BHT_GGUF_ORIGINALS to the folder "
                    "holding the two original GGUF files (tests/data/make_real_blocks.py says how to get them)")
def test_fixture_rows_against_the_original_files():
    meta = json.load(open(os.path.join(DATA, "real_blocks.json")))
    paths = [os.path.join(os.environ["BHT_GGUF_ORIGINALS"], f) for f in meta["sources"]]
    for name, want in meta["tensors"].items():
        src = paths[int(name[1])]
        whole = read_array(f"{src}:{want['source']}")
        rows = whole if want["rows"] is None else whole[want["rows"][0]:want["rows"][1]]
        np.testing.assert_array_equal(read_array(f"{FIXTURE}:{name}"), rows)


def test_head_output_else_tied_embedding_and_the_shape_convention(tmp_path, capsys):
    rng = np.random.default_rng(1)
    emb, out = rng.standard_normal((50, 8)).astype(np.float32), rng.standard_normal((50, 8)).astype(np.float32)
    norm = np.ones(8, dtype=np.float32)
    both = write_gguf(tmp_path / "both.gguf", {"token_embd.weight": (emb, None), "output.weight": (out, None),
                                               "output_norm.weight": (norm, None)})
    tied = write_gguf(tmp_path / "tied.gguf", {"token_embd.weight": (emb, None), "output_norm.weight": (norm, None)})
    np.testing.assert_array_equal(load_matrix(both), out.astype(np.float64))    # 50 x 8, not 8 x 50
    np.testing.assert_array_equal(load_matrix(tied), emb.astype(np.float64))
    np.testing.assert_array_equal(load_matrix(f"{both}:token_embd.weight"), emb.astype(np.float64))
    code, stdout, err = run(capsys, "bound", tied, both, "-E", "1", "--json")
    assert code == 0 and json.loads(stdout)["n"] == 50
    assert f"Note: {tied}: the head is token_embd.weight, 50 x 8 F32 (tied to the input embedding" in err
    assert f"Note: {both}: the head is output.weight, 50 x 8 F32\n" in err


@pytest.mark.slow
def test_dtype_is_honoured_and_memory_stays_below_twice_the_result(tmp_path):
    W = np.random.default_rng(2).standard_normal((16384, 256)).astype(np.float32)
    path = write_gguf(tmp_path / "q.gguf", {"output.weight": (W, Q.Q8_0)})
    for dtype, itemsize in (("float64", 8), ("float32", 4)):
        tracemalloc.start()
        M = load_matrix(path, dtype=dtype)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        result = 16384 * 256 * itemsize
        assert M.dtype == np.dtype(dtype) and peak <= 2 * result, (dtype, peak / result)


def test_softcapping_metadata_selects_the_softcap_readout(tmp_path, capsys):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 32)).astype(np.float32)
    B = A + 0.1 * rng.standard_normal((30, 32)).astype(np.float32)
    meta = {"gemma2.final_logit_softcapping": 30.0}
    a = write_gguf(tmp_path / "a.gguf", {"token_embd.weight": (A, Q.Q8_0)}, "gemma2", meta)
    b = write_gguf(tmp_path / "b.gguf", {"token_embd.weight": (B, Q.Q8_0)}, "gemma2", meta)
    assert checkpoint_softcap(a) == 30.0 and checkpoint_softcap(f"{a}:token_embd.weight") == 30.0
    assert checkpoint_softcap(f"{a}:output_norm.weight") is None
    code, out, err = run(capsys, "bound", a, b, "-E", "1", "--json")
    assert code == 0 and json.loads(out)["readout"]["link_a"] == "softcap:30"
    assert "declares final_logit_softcapping 30: model A reads out with softcap:30 (set --link-a" in err
    code, out, _ = run(capsys, "bound", a, b, "-E", "1", "--link-a", "exp", "--link-b", "exp", "--json")
    assert json.loads(out)["readout"]["link_a"] == "exp"


def test_gguf_bytes_without_a_suffix(tmp_path):
    W = np.random.default_rng(4).standard_normal((10, 32)).astype(np.float32)
    path = write_gguf(tmp_path / "m.gguf", {"output.weight": (W, Q.Q4_0)})
    bare = tmp_path / "m"
    bare.write_bytes(open(path, "rb").read())
    np.testing.assert_array_equal(load_matrix(str(bare)), load_matrix(path))


# --- bad files: one Error: line, exit 2, nothing written --------------------------------------
def bad_files(tmp_path):
    W = np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)
    good = write_gguf(tmp_path / "good.gguf", {"output.weight": (W, Q.Q8_0), "output_norm.weight": (W[0], None)})
    data = open(good, "rb").read()
    cases = {}
    for name, content in (("truncated_data", data[:-100]), ("truncated_header", data[:40]),
                          ("magic", b"GGUX" + data[4:]), ("empty", b"")):
        (tmp_path / f"{name}.gguf").write_bytes(content)
        cases[name] = str(tmp_path / f"{name}.gguf")
    cases["one_d"] = f"{good}:output_norm.weight"
    cases["unknown"] = f"{good}:output.weigth"
    return good, cases


@pytest.mark.parametrize("case,message", [
    ("truncated_data", "is not a valid GGUF file (tensor 'output_norm.weight' runs past the end of the file"),
    ("truncated_header", "is not a valid GGUF file (it ends inside its header"),
    ("magic", "is not a GGUF file (it does not start with the magic 'GGUF')"),
    ("empty", "is empty, not a GGUF file"),
    ("one_d", "has shape (64,), expected a 2-D matrix"),
    ("unknown", "has no tensor 'output.weigth'; close names: output.weight"),
])
def test_bad_gguf_input(tmp_path, capsys, case, message):
    good, cases = bad_files(tmp_path)
    out = tmp_path / "x.npy"
    code, stdout, err = run(capsys, "design", cases[case], good, "-E", "1", "--out", str(out))
    lines = [line for line in err.splitlines() if not line.startswith("Note:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert "Traceback" not in err and stdout == "" and not out.exists()
    with pytest.raises(InputError):
        load_matrix(cases[case])
