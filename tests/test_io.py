import io
import pickle

import numpy as np
import pytest

from bhtcli import InputError, load_matrix


def test_npy_is_memory_mapped_and_float64(tmp_path):
    p = tmp_path / "m.npy"
    np.save(p, np.arange(6, dtype=np.float64).reshape(3, 2))
    m = load_matrix(str(p))
    assert isinstance(m, np.memmap) and m.shape == (3, 2)
    np.save(p, np.arange(6, dtype=np.int32).reshape(3, 2))
    assert load_matrix(str(p)).dtype == np.float64


def test_npz_single_key_and_choice(tmp_path):
    p = tmp_path / "m.npz"
    np.savez(p, W=np.ones((2, 3)))
    assert load_matrix(str(p)).shape == (2, 3)
    np.savez(p, W=np.ones((2, 3)), V=np.zeros((4, 1)))
    assert load_matrix(f"{p}:V").shape == (4, 1)
    with pytest.raises(InputError, match="holds 2 arrays"):
        load_matrix(str(p))
    with pytest.raises(InputError, match="no array 'X'"):
        load_matrix(f"{p}:X")


def test_csv_and_whitespace_text(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("1,2,3\n4, 5 ,6\n")
    np.testing.assert_array_equal(load_matrix(str(p)), [[1, 2, 3], [4, 5, 6]])
    t = tmp_path / "m.txt"
    t.write_text("# comment\n1 2\n\n3\t4\n")
    np.testing.assert_array_equal(load_matrix(str(t)), [[1, 2], [3, 4]])
    one = tmp_path / "col.csv"
    one.write_text("1\n2\n3\n")
    assert load_matrix(str(one)).shape == (3, 1)


def test_stdin_text_and_npy_bytes():
    assert load_matrix("-", stdin=io.BytesIO(b"1,2\n3,4\n")).shape == (2, 2)
    buf = io.BytesIO()
    np.save(buf, np.ones((3, 2)))
    assert load_matrix("-", stdin=io.BytesIO(buf.getvalue())).shape == (3, 2)


@pytest.mark.parametrize("content,match", [
    ("1,2\n3,x\n", "line 2: 'x' is not a number"),
    ("1,2\n3\n", "line 2: 1 values but line 1 has 2"),
    ("", "empty"),
    ("1,nan\n", "NaN or Inf"),
    ("1,inf\n", "NaN or Inf"),
])
def test_bad_text(tmp_path, content, match):
    p = tmp_path / "m.csv"
    p.write_text(content)
    with pytest.raises(InputError, match=match):
        load_matrix(str(p))


def test_refuses_pickles_and_object_arrays(tmp_path):
    p = tmp_path / "obj.npy"
    np.save(p, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickled/object"):
        load_matrix(str(p))
    z = tmp_path / "obj.npz"
    np.savez(z, W=np.array([{"a": 1}], dtype=object))
    with pytest.raises(InputError, match="pickled/object"):
        load_matrix(str(z))
    k = tmp_path / "model.pkl"
    k.write_bytes(pickle.dumps(np.ones((2, 2))))
    with pytest.raises(InputError, match="pickled files are refused"):
        load_matrix(str(k))


@pytest.mark.parametrize("array,match", [
    (np.ones(5), r"shape \(5,\), expected a 2-D matrix; for a single column use x.reshape\(-1, 1\)"),
    (np.ones((2, 2, 2)), r"shape \(2, 2, 2\), expected a 2-D matrix"),
    (np.ones((0, 3)), "empty"),
    (np.array([[1.0, np.inf]]), "NaN or Inf"),
    (np.array([["a", "b"]]), "dtype"),
])
def test_shape_and_value_checks(tmp_path, array, match):
    p = tmp_path / "m.npy"
    np.save(p, array)
    with pytest.raises(InputError, match=match):
        load_matrix(str(p))


def test_missing_and_unknown(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_matrix(str(tmp_path / "nope.npy"))
    p = tmp_path / "m.xlsx"
    p.write_text("1")
    with pytest.raises(InputError, match="unknown extension"):
        load_matrix(str(p))
    bad = tmp_path / "broken.npy"
    bad.write_bytes(b"not a numpy file")
    with pytest.raises(InputError, match="not a valid .npy"):
        load_matrix(str(bad))
