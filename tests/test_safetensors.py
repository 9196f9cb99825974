"""safetensors input, the dtype of loading, refused pickles, and what a memory map reads."""
import json
import pickle
import struct
import sys
import zipfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from bhtcli import InputError, load_matrix
from bhtcli.errors import parameter_names
from bhtcli.cli.main import main
from bhtcli.io.load import load_pair, load_vector, read_array


def hand_made(path, tensors):
    """Write a .safetensors file byte by byte (no safetensors code): {name: (code, shape, bytes)}."""
    header, offset, data = {}, 0, b""
    for name, (code, shape, raw) in tensors.items():
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return str(path)


def test_bfloat16_hand_made_bits(tmp_path):
    # bfloat16 is the top half of a float32: 0x3F80 = 1.0, 0xC000 = -2.0, 0x3F00 = 0.5,
    # 0x4049 = 3.140625, 0x0001 = 2^-133 (subnormal), 0x7F7F = (2 - 2^-7) * 2^127.
    bits = [0x3F80, 0xC000, 0x3F00, 0x4049, 0x0001, 0x7F7F]
    expected = np.array([[1.0, -2.0, 0.5], [3.140625, 2.0 ** -133, (2 - 2 ** -7) * 2.0 ** 127]])
    p = hand_made(tmp_path / "bf.safetensors", {"w": ("BF16", (2, 3), struct.pack("<6H", *bits))})
    np.testing.assert_array_equal(load_matrix(p), expected)
    np.testing.assert_array_equal(load_matrix(p, dtype="float32"), expected.astype(np.float32))


def test_float16_hand_made_bits(tmp_path):
    # 0x3C00 = 1.0, 0xC000 = -2.0, 0x7BFF = 65504 (largest float16), 0x0001 = 2^-24.
    bits = [0x3C00, 0xC000, 0x7BFF, 0x0001]
    p = hand_made(tmp_path / "h.safetensors", {"w": ("F16", (2, 2), struct.pack("<4H", *bits))})
    np.testing.assert_array_equal(load_matrix(p), [[1.0, -2.0], [65504.0, 2.0 ** -24]])


def test_bfloat16_random_bits_match_the_float32_top_half(tmp_path):
    rng = np.random.default_rng(0)
    u16 = rng.integers(0, 2 ** 16, size=(64, 7), dtype=np.uint16)
    u16[(u16 & 0x7F80) == 0x7F80] = 0x3F80               # drop Inf/NaN patterns (exponent all ones)
    decoded = (u16.astype(np.uint32) << 16).view(np.float32)  # independent of ml_dtypes
    p = hand_made(tmp_path / "bf.safetensors", {"w": ("BF16", u16.shape, u16.astype("<u2").tobytes())})
    np.testing.assert_array_equal(load_matrix(p), decoded.astype(np.float64))


@pytest.mark.parametrize("stored", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_round_trip_through_the_safetensors_package(tmp_path, stored, dtype):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((40, 6)).astype(stored)
    p = tmp_path / "m.safetensors"
    b = rng.standard_normal(40).astype(stored)
    save_file({"lm_head.weight": A, "lm_head.bias": b}, str(p))
    M = load_matrix(f"{p}:lm_head.weight", dtype=dtype)
    assert M.dtype == np.dtype(dtype) and M.shape == (40, 6)
    np.testing.assert_array_equal(M, A.astype(np.float64).astype(dtype))
    assert load_matrix(str(p), dtype=dtype).shape == (40, 6)  # the only 2-D tensor
    assert read_array(f"{p}:lm_head.bias").shape == (40,)
    bias = load_vector(f"{p}:lm_head.bias", 40, "--bias-a")    # biases come through read_array
    np.testing.assert_array_equal(bias, b.astype(np.float64))


def test_same_dtype_is_a_read_only_memory_map_other_dtypes_are_converted(tmp_path):
    A = np.random.default_rng(2).standard_normal((30, 5)).astype(np.float32)
    st_path, npy_path = tmp_path / "a.safetensors", tmp_path / "a.npy"
    save_file({"w": A}, str(st_path))
    np.save(npy_path, A)
    for path in (str(st_path), str(npy_path)):
        m32 = load_matrix(path, dtype="float32")
        assert isinstance(m32, np.memmap) and not m32.flags.writeable
        m64 = load_matrix(path, dtype="float64")
        assert not isinstance(m64, np.memmap) and m64.dtype == np.float64
        # float32 vs float64 loading agree exactly (float32 -> float64 is exact)
        np.testing.assert_array_equal(m64, np.asarray(m32, dtype=np.float64))
    A64 = A.astype(np.float64) / 3
    np.save(npy_path, A64)
    np.testing.assert_array_equal(load_matrix(str(npy_path), dtype="float32"), A64.astype(np.float32))
    a, b = load_pair(str(st_path), str(st_path), dtype=np.float32)
    assert a.dtype == b.dtype == np.float32


def test_dtype_none_keeps_float32_and_float64_as_stored(tmp_path):
    A = np.random.default_rng(4).standard_normal((9, 3))
    for stored, kept in [(np.float32, np.float32), (np.float64, np.float64),
                         (np.float16, np.float32), (ml_dtypes.bfloat16, np.float32), (np.int16, np.float64)]:
        p = tmp_path / "m.safetensors"
        save_file({"w": A.astype(stored)}, str(p))
        m = load_matrix(str(p), dtype=None)
        assert m.dtype == kept
        assert isinstance(m, np.memmap) == (stored in (np.float32, np.float64))
        np.testing.assert_array_equal(m, A.astype(stored).astype(np.float64))


def test_design_reads_a_float32_checkpoint_without_a_float64_copy_and_agrees(tmp_path):
    # design loads as stored and converts row blocks: same numbers as from float64 inputs
    from bhtcli import design
    rng = np.random.default_rng(5)
    A = rng.standard_normal((30, 4)).astype(np.float32)
    B = (A + 0.2 * rng.standard_normal((30, 4))).astype(np.float32)
    save_file({"A": A, "B": B}, str(tmp_path / "m.safetensors"))
    r32 = design(f"{tmp_path}/m.safetensors:A", f"{tmp_path}/m.safetensors:B", 2.0)
    r64 = design(A.astype(np.float64), B.astype(np.float64), 2.0)
    assert r32.hellinger_squared == r64.hellinger_squared and r32.query == r64.query


def test_float32_overflow_and_bad_dtype(tmp_path):
    p = tmp_path / "big.npy"
    np.save(p, np.array([[1.0, 1e300]]))
    with pytest.raises(InputError, match="beyond the float32 range.*use dtype float64"):
        load_matrix(str(p), dtype="float32")        # the library names its parameter
    with parameter_names(lambda name: "--" + name), pytest.raises(InputError, match="use --dtype float64"):
        load_matrix(str(p), dtype="float32")        # the CLI its flag
    assert load_matrix(str(p)).dtype == np.float64
    with pytest.raises(InputError, match="must be float64 or float32"):
        load_matrix(str(p), dtype="float16")


def test_tensor_choice_and_listing(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"emb": np.ones((5, 2), np.float32), "head": np.ones((7, 2), np.float32),
               "bias": np.ones(7, np.float32)}, str(p))
    with pytest.raises(InputError, match=r"no tensor 'nope'; its 2-D tensors: head \(7 x 2 F32\), "
                                         r"emb \(5 x 2 F32\)"):
        load_matrix(f"{p}:nope")
    with pytest.raises(InputError, match="holds 3 tensors; pick one with .*:TENSOR"):
        load_matrix(str(p))
    with pytest.raises(InputError, match=r"m.safetensors:bias has shape \(7,\), expected a 2-D"):
        load_matrix(f"{p}:bias")
    odd = tmp_path / "n.safetensors"
    save_file({"a:b.weight": np.ones((2, 3), np.float32), "c": np.ones((1, 1), np.float32)}, str(odd))
    assert load_matrix(f"{odd}:a:b.weight").shape == (2, 3)


def good_bytes(tmp_path):
    return open(hand_made(tmp_path / "g.safetensors", {"w": ("F32", (2, 2), b"\0" * 16)}), "rb").read()


@pytest.mark.parametrize("damage,match", [
    (lambda raw: raw[:-4], "not a valid .safetensors"),                   # truncated data
    (lambda raw: raw + b"\0" * 4, "not a valid .safetensors"),            # trailing bytes
    (lambda raw: struct.pack("<Q", 10 ** 9) + raw[8:], "not a valid .safetensors"),
    (lambda raw: raw[:5], "not a valid .safetensors"),
    (lambda raw: raw.replace(b'"F32"', b'"F99"'), "not a valid .safetensors"),
    (lambda raw: raw.replace(b'"F32"', b'"F16"'), "not a valid .safetensors"),  # sizes disagree
])
def test_corrupt_files_give_one_clear_error(tmp_path, damage, match):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(damage(good_bytes(tmp_path)))
    with pytest.raises(InputError, match=match):
        load_matrix(str(p))


def test_unsupported_dtypes_name_the_tensor(tmp_path):
    p = hand_made(tmp_path / "f8.safetensors", {"w": ("F8_E4M3", (4, 4), b"\0" * 16)})
    with pytest.raises(InputError, match="f8.safetensors:w is stored as F8_E4M3, which bht does not read"):
        load_matrix(p)
    p = hand_made(tmp_path / "b.safetensors", {"w": ("BOOL", (2, 2), b"\1" * 4)})
    with pytest.raises(InputError, match="stored as BOOL"):
        load_matrix(p)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_byte_damage_never_crashes(tmp_path, data):
    raw = bytearray(good_bytes(tmp_path))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    p = tmp_path / "fuzz.safetensors"
    p.write_bytes(bytes(raw))
    try:
        m = load_matrix(str(p))
    except InputError:
        return
    assert m.shape == (2, 2)


TORCH_HINT = "torch.load("


@pytest.mark.parametrize("suffix,hint", [(".pt", TORCH_HINT), (".pth", TORCH_HINT), (".bin", TORCH_HINT),
                                         (".ckpt", TORCH_HINT), (".pkl", "numpy.save"),
                                         (".pickle", "numpy.save")])
def test_pickles_and_checkpoints_are_refused_with_a_conversion_hint(tmp_path, suffix, hint):
    p = tmp_path / f"model{suffix}"
    p.write_bytes(pickle.dumps({"w": [[1.0]]}))
    with pytest.raises(InputError, match="pickled files are refused because loading one runs code") as exc:
        load_matrix(str(p))
    assert hint in str(exc.value) and "trust" in str(exc.value)


def test_pickle_and_zip_magic_are_refused_under_any_suffix(tmp_path):
    p = tmp_path / "weights.data"
    p.write_bytes(pickle.dumps([1.0], protocol=4))
    with pytest.raises(InputError, match="is a pickle; pickled files are refused"):
        load_matrix(str(p))
    z = tmp_path / "checkpoint.model"
    with zipfile.ZipFile(z, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps([1.0]))
    with pytest.raises(InputError, match="zip archive.*safetensors.torch") as exc:
        load_matrix(str(z))
    assert "checkpoint.safetensors:TENSOR" in str(exc.value)


@pytest.mark.parametrize("spec,message", [
    ("m.safetensors:nope", "has no tensor 'nope'"),
    ("m.pt", "pickled files are refused"),
    ("bad.safetensors", "not a valid .safetensors file"),
])
def test_cli_errors_are_one_line_exit_2(capsys, tmp_path, monkeypatch, spec, message):
    monkeypatch.chdir(tmp_path)
    save_file({"w": np.ones((3, 2), np.float32)}, "m.safetensors")
    (tmp_path / "m.pt").write_bytes(pickle.dumps(1))
    (tmp_path / "bad.safetensors").write_bytes(b"\x08" + b"\0" * 7 + b"{broken}")
    with pytest.raises(SystemExit) as exc:
        main(["design", spec, "m.safetensors", "--energy", "1"])
    out = capsys.readouterr()
    assert exc.value.code == 2 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


def test_cli_design_reads_safetensors_with_bfloat16(capsys, tmp_path):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((20, 3))
    B = A + 0.3 * rng.standard_normal((20, 3))
    save_file({"lm_head.weight": A.astype(np.float32), "other": np.ones((2, 2), np.float32)},
              str(tmp_path / "a.safetensors"))
    save_file({"w": B.astype(ml_dtypes.bfloat16)}, str(tmp_path / "b.safetensors"))
    np.save(tmp_path / "A.npy", A.astype(np.float32))
    np.save(tmp_path / "B.npy", B.astype(ml_dtypes.bfloat16).astype(np.float64))
    results = []
    for a, b in [("a.safetensors:lm_head.weight", "b.safetensors"), ("A.npy", "B.npy")]:
        with pytest.raises(SystemExit) as exc:
            main(["design", str(tmp_path / a), str(tmp_path / b), "--energy", "2", "--json"])
        out = capsys.readouterr()
        assert exc.value.code == 0, out.err
        results.append(json.loads(out.out))
    assert results[0]["hellinger_squared"] == results[1]["hellinger_squared"]


def _rss_kib(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_memory_map_reads_only_what_is_touched_and_check_copies_nothing(tmp_path):
    # 4096 x 4096 float32 = 64 MiB. Touching one row maps a few pages, not the file.
    # load_matrix's finiteness check does read every page once (it must see every number),
    # but into the page cache (RssFile), not into a copy (RssAnon stays well below 64 MiB;
    # a float64 copy would be 128 MiB).
    if _rss_kib("RssFile") is None:
        pytest.skip("no RssFile in /proc/self/status")
    p = tmp_path / "big.safetensors"
    save_file({"w": np.ones((4096, 4096), np.float32)}, str(p))
    file_before = _rss_kib("RssFile")
    arr = read_array(str(p))
    assert float(arr[0].sum()) == 4096.0
    assert _rss_kib("RssFile") - file_before < 4 * 1024
    del arr
    anon_before = _rss_kib("RssAnon")
    m = load_matrix(str(p), dtype="float32")
    assert isinstance(m, np.memmap)
    assert _rss_kib("RssAnon") - anon_before < 32 * 1024
