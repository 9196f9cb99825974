"""Regressions of the hostile-file campaign (issue 35): each class of damaged input that used to
end in a traceback, a MemoryError or a misleading message is now one `Error:` line and exit 2
(or, for valid files numpy's reader misjudged, a correct load). The files are written byte by
byte with tests/fuzz/build.py; the campaign itself is `make fuzz` (tests/fuzz/)."""
import io
import json
import struct
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from bhtcli import InputError, load_matrix
from cli_run import run
from fuzz import build

BAD_HEADER = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4, }"   # a ')' lost


def bht(capsys, monkeypatch, *args, stdin: bytes | None = None):
    """(exit status, stdout, stderr lines other than notes) of `bht ARGS` run in-process."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(stdin)})())
    code, out, err = run(capsys, *args)
    return code, out, [line for line in err.splitlines() if not line.startswith("Note:")]


def assert_refused(capsys, monkeypatch, *args, fragment: str, stdin: bytes | None = None):
    code, out, lines = bht(capsys, monkeypatch, *args, stdin=stdin)
    assert code == 2 and out == "" and len(lines) == 1, (code, out, lines)
    assert lines[0].startswith("Error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in lines[0]


@pytest.fixture
def partner(tmp_path):
    path = tmp_path / "B.npy"
    np.save(path, np.arange(12.0).reshape(3, 4) / 7)
    return str(path)


def write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ---- .npy and .npz ----------------------------------------------------------------------

def test_truncated_npy_is_one_error(tmp_path, capsys, monkeypatch, partner):
    """A partial download: numpy's ValueError used to escape from load.py's fallback."""
    good = build.npy_bytes(np.arange(12.0).reshape(3, 4))
    bad = write(tmp_path / "A.npy", good[:-10])
    assert_refused(capsys, monkeypatch, "bound", bad, partner, "--energy", "1",
                   fragment="96 bytes of data) but 86 bytes follow (truncated?)")


@pytest.mark.parametrize("where", ["bound", "design", "quantize", "tensors", "npz member", "stdin"])
def test_malformed_npy_header_is_one_error(tmp_path, capsys, monkeypatch, partner, where):
    """A header that is not a Python literal sent numpy's reader to tokenize (TokenError)."""
    data = build.npy_bytes(header=BAD_HEADER, data=bytes(96))
    path = write(tmp_path / "A.npy", data)
    out = tmp_path / "q.npy"
    fragment = "is not a valid .npy file"
    if where == "bound":
        args = ["bound", path, partner, "--energy", "1"]
    elif where == "design":
        args = ["design", path, partner, "-E", "1"]
    elif where == "quantize":
        args = ["quantize", path, "--to", "q8_0", "--out", str(out)]
    elif where == "tensors":
        args = ["tensors", path]
    elif where == "npz member":
        args = ["bound", write(tmp_path / "A.npz", build.zip_bytes([("a.npy", data)])), partner, "--energy", "1"]
        fragment = "A.npz is not a valid .npy file"
    else:
        args = ["bound", "-", partner, "--energy", "1"]
        fragment = "Error: - is not a valid .npy file"
    assert_refused(capsys, monkeypatch, *args, fragment=fragment,
                   stdin=data if where == "stdin" else None)
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".npy", ".npz", ""])
def test_small_file_declaring_80_gb_is_refused_before_allocating(tmp_path, capsys, monkeypatch,
                                                                  partner, suffix):
    """<= 300 bytes declaring 100,000 x 100,000 float64: numpy allocated 80 GB before reading."""
    data = build.npy_bytes(header="{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000), }",
                           data=bytes(64))
    if suffix == ".npz":
        data = build.zip_bytes([("a.npy", data)])
    assert len(data) <= 300
    path = write(tmp_path / f"A{suffix}", data)
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="(80,000,000,000 bytes of data) but 64 bytes follow")


def test_npz_member_beyond_the_memory_budget_is_refused(tmp_path, monkeypatch):
    """A member whose declared size fits the archive but not the memory budget (e.g. under
    ulimit -v) is refused before it is read."""
    import bhtcli.io.npy_file as npy_file
    monkeypatch.setattr("bhtcli.io.limits.memory_budget", lambda: 4096)
    path = tmp_path / "A.npz"
    np.savez(path, a=np.ones((32, 32)))
    with pytest.raises(InputError, match=r"its data would take 8.2 kB in memory, more than this machine allows"):
        load_matrix(str(path))
    assert npy_file.MAX_HEADER >= 1 << 16


def test_npy_header_over_10_kb_is_read_not_called_a_pickle(tmp_path, capsys, monkeypatch):
    """numpy refuses headers over 10 kB as if they were pickles; the file below is valid."""
    A = np.arange(12.0).reshape(3, 4)
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }" + " " * 20000
    path = write(tmp_path / "A.npy", build.npy_bytes(header=header, version=(2, 0), data=A.tobytes()))
    np.testing.assert_array_equal(load_matrix(path), A)
    code, out, lines = bht(capsys, monkeypatch, "tensors", path, "--json")
    assert code == 0 and json.loads(out)["tensors"][0]["shape"] == [3, 4], lines


@pytest.mark.parametrize("mode", ["crc", "stream"])
@pytest.mark.parametrize("name", ["A.npz", "A"])
def test_damaged_npz_is_one_error_with_or_without_extension(tmp_path, capsys, monkeypatch, partner,
                                                             mode, name):
    """A bad CRC or a corrupt deflate stream; without the extension (a pipe, <(...)) the bytes
    are sniffed, and zipfile.BadZipFile / zlib.error escaped."""
    member = build.npy_bytes(np.arange(400.0).reshape(20, 20))
    data = bytearray(build.zip_bytes([("a.npy", member)], compress=(mode == "stream")))
    start = 30 + len("a.npy")
    data[start + (200 if mode == "crc" else 20)] ^= 0xFF
    path = write(tmp_path / name, bytes(data))
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="is not a valid .npz file")


# ---- JSON -------------------------------------------------------------------------------

@pytest.mark.parametrize("digits, fragment", [(400, "not finite"), (5000, "not finite")])
def test_json_integers_beyond_float64(tmp_path, capsys, monkeypatch, partner, digits, fragment):
    """> 308 digits: OverflowError; > 4,300 digits: int()'s ValueError. Both are numbers too
    large for float64, read as inf and named by the matrix check."""
    path = write(tmp_path / "A.json", f"[[{'9' * digits}, 1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4]]".encode())
    code, out, lines = bht(capsys, monkeypatch, "bound", path, partner, "--energy", "1")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), lines
    assert "row 0" in lines[0] or "inf" in lines[0].lower() or "finite" in lines[0], lines


@pytest.mark.parametrize("where", ["file", "stdin", "config", "index"])
def test_json_nested_100000_deep_is_one_error(tmp_path, capsys, monkeypatch, partner, where):
    deep = b"[" * 100000 + b"]" * 100000
    if where == "file":
        args, stdin = ["bound", write(tmp_path / "A.json", deep), partner, "--energy", "1"], None
    elif where == "stdin":
        args, stdin = ["bound", "-", partner, "--energy", "1"], deep
    else:
        folder = tmp_path / "m"
        folder.mkdir()
        save_file({"lm_head.weight": np.ones((3, 4), np.float32)}, str(folder / "model.safetensors"))
        target = "config.json" if where == "config" else "model.safetensors.index.json"
        (folder / target).write_bytes(deep)
        args, stdin = ["bound", str(folder), partner, "--energy", "1"], None
    assert_refused(capsys, monkeypatch, *args, fragment="nested too deeply", stdin=stdin)


# ---- checkpoint folders -----------------------------------------------------------------

@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    save_file({"lm_head.weight": np.ones((3, 4), np.float32)}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize("text, kind", [("[]", "list"), ('"x"', "str"), ("null", "null"), ("3", "int")])
def test_config_json_that_is_not_an_object(folder, capsys, monkeypatch, partner, text, kind):
    (folder / "config.json").write_text(text)
    for args in (["bound", str(folder), partner, "--energy", "1"], ["tensors", str(folder)]):
        assert_refused(capsys, monkeypatch, *args, fragment=f"holds a JSON {kind}, not an object")


def test_index_naming_a_shard_that_does_not_hold_the_tensor(tmp_path, capsys, monkeypatch, partner):
    folder = tmp_path / "m"
    folder.mkdir()
    save_file({"lm_head.weight": np.ones((3, 4), np.float32)}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({"model.norm.weight": np.ones(4, np.float32)}, str(folder / "model-00002-of-00002.safetensors"))
    index = {"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors",
                            "model.norm.weight": "model-00001-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    for spec in (str(folder), f"{folder}:lm_head.weight"):
        assert_refused(capsys, monkeypatch, "bound", spec, partner, "--energy", "1",
                       fragment="puts lm_head.weight in model-00002-of-00002.safetensors, which does not hold it")


def test_config_softcap_integer_beyond_float64_is_no_cap(folder, capsys, monkeypatch, partner):
    (folder / "config.json").write_text('{"final_logit_softcapping": ' + "9" * 400 + "}")
    code, out, lines = bht(capsys, monkeypatch, "tensors", str(folder), "--json")
    assert code == 0 and json.loads(out)["softcap"] is None, lines


# ---- GGUF and safetensors ---------------------------------------------------------------

def gguf_file(tmp_path, kvs=(), tensors=None) -> str:
    if tensors is None:
        tensors = [("output.weight", [4, 3], build.GGML_F32, np.ones((3, 4), np.float32).tobytes())]
    return write(tmp_path / "m.gguf", build.gguf_bytes(list(kvs), tensors))


def test_gguf_metadata_nested_1000_deep(tmp_path, capsys, monkeypatch, partner):
    path = gguf_file(tmp_path, [("deep", build.ARRAY, build.gguf_nested(1000))])
    for args in (["bound", path, partner, "--energy", "1"], ["tensors", path]):
        assert_refused(capsys, monkeypatch, *args, fragment="metadata arrays nested more than")


def test_gguf_quantized_tensor_without_dimensions(tmp_path, capsys, monkeypatch, partner):
    block = build.q8_0_rows(np.ones((1, 32)))
    path = gguf_file(tmp_path, tensors=[("output.weight", [], build.GGML_Q8_0, block)])
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="is Q8_0 with no dimensions")


@pytest.mark.parametrize("dims", [[0, 2**63], [2**63, 0], [0, 2**64 - 1]])
def test_gguf_empty_shape_beside_a_huge_dimension(tmp_path, capsys, monkeypatch, partner, dims):
    path = gguf_file(tmp_path, tensors=[("output.weight", dims, build.GGML_F32, b"")])
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="larger than any array can be")


@pytest.mark.parametrize("name", ["A.safetensors", "A"])
def test_safetensors_empty_shape_beside_a_huge_dimension(tmp_path, capsys, monkeypatch, partner, name):
    data = build.safetensors_bytes([("w", "F32", [0, 2**63], b"")])
    path = write(tmp_path / name, data)
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="larger than any array can be")


@pytest.mark.parametrize("name", ["A.safetensors", "A"])
def test_f8_safetensors_is_refused_by_name_and_when_sniffed(tmp_path, capsys, monkeypatch, partner, name):
    data = build.safetensors_bytes([("w", "F8_E4M3", [3, 4], bytes(12))])
    path = write(tmp_path / name, data)
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="is stored as F8_E4M3, which bht does not read")


# ---- large text matrices ----------------------------------------------------------------

def test_large_text_matrix_says_what_is_happening(tmp_path, capsys, monkeypatch, partner):
    """400,000-row text matrices take tens of seconds: a note says why and what to do."""
    monkeypatch.setattr("bhtcli.io.load.SLOW_TEXT_CELLS", 10)
    path = tmp_path / "A.csv"
    np.savetxt(path, np.arange(12.0).reshape(3, 4), delimiter=",")
    code, out, err = run(capsys, "bound", str(path), partner, "--energy", "1")
    assert code == 0
    assert "Note: " in err and "rows of text" in err and "numpy.save" in err


TEXTS = ["1,2\n3,4\n", "1 2 3\n", "1;2\n3;4\n", " 1 ,\t2\n3, 4\n", "1_0,2\n3,4\n", "nan,inf\n-Infinity,+1e5\n",
         "1\t2\n3\t4", "\u0663,1\n2,3\n", "1e400,1\n2,3\n", "0x10,1\n2,3\n", "1,2\n3\n", "1,,2\n3,4,5\n",
         "1.5e-3  2\n-0  4e0\n", "1\n2\n3\n", "x,1\n2,3\n", "1,2,\n3,4,\n", "1\u00a02\n3\u00a04\n"]


@pytest.mark.parametrize("text", TEXTS)
def test_fast_text_reader_agrees_with_the_checked_one(text):
    """numpy's C reader, used first, accepts nothing float() would refuse and gives the same
    values; whatever it refuses is read again cell by cell (the same result or message)."""
    from bhtcli.io.load import _checked_rows, _fast_rows, _splitter
    lines = [(k, raw.strip()) for k, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
    sep, split = _splitter(lines[0][1])
    try:
        checked = _checked_rows(lines, split, "t")
    except InputError:
        checked = None
    fast = _fast_rows(lines, sep)
    if fast is not None:
        assert checked is not None
        np.testing.assert_array_equal(fast, checked)


def test_npz_member_with_an_empty_name(tmp_path, capsys, monkeypatch, partner):
    """zipfile's ZipInfo.is_dir raises IndexError on an empty member name (found by the
    campaign, seed 35, case 6823)."""
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(zipfile.ZipInfo(""), build.npy_bytes(np.ones((3, 4))))
    path = write(tmp_path / "A.npz", buf.getvalue())
    assert_refused(capsys, monkeypatch, "bound", path, partner, "--energy", "1",
                   fragment="a .npz member must be a .npy file")
