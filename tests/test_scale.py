"""Vocabulary-scale search: the measured pass-time and the sketched-subspace path."""
import json

import numpy as np
import pytest

from bhtcli.cli.main import main
from bhtcli.models.softmax import SoftmaxPair, block_product, pass_seconds


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pass_seconds_is_a_positive_number_in_json(capsys, tmp_path, dtype):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((60, 5))
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", A + 0.1 * rng.standard_normal(A.shape))
    with pytest.raises(SystemExit) as exit_info:
        main(["design", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"), "--energy", "2",
              "--json", "--dtype", dtype])
    assert exit_info.value.code in (None, 0)
    solver = json.loads(capsys.readouterr().out)["solver"]
    assert isinstance(solver["pass_seconds"], float) and solver["pass_seconds"] > 0
    assert isinstance(solver["passes"], int)


def test_pass_seconds_is_cached_and_not_counted_as_passes():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 4))
    pair = SoftmaxPair(A, A + 0.1)
    t = pass_seconds(pair)
    assert pair.passes == 0 and pass_seconds(pair) == t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_product_keeps_the_matrix_precision_and_returns_float64(dtype):
    rng = np.random.default_rng(1)
    M = rng.standard_normal((7, 3)).astype(dtype)
    X = rng.standard_normal((3, 2))
    Z = block_product(M, X)
    assert Z.dtype == np.float64
    np.testing.assert_allclose(Z, M.astype(np.float64) @ X.astype(dtype), rtol=1e-6)
