"""Small text inputs (answers, names, manifests) read through one reader: a missing file, a
folder, bytes that are not UTF-8 or a broken JSON list are one `Error:` line and exit 2 for
every command that reads them (K-way `decide` used to raise a traceback on all but the first).
"""
import numpy as np
import pytest

from cli_run import run
from bhtcli.commands.decide import read_scheduled_answers
from bhtcli.errors import InputError
from bhtcli.io.text import read_text


@pytest.fixture
def inputs(tmp_path):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 3))
    paths = {}
    for k, M in enumerate((A, A + 0.5 * rng.standard_normal((6, 3)), A - 0.5 * rng.standard_normal((6, 3)))):
        paths[f"M{k}"] = str(tmp_path / f"M{k}.npy")
        np.save(paths[f"M{k}"], M)
    paths["x"] = str(tmp_path / "x.npy")
    np.save(paths["x"], np.array([0.3, -0.2, 0.1]))
    paths["Q"] = str(tmp_path / "Q.npy")
    np.save(paths["Q"], np.array([[0.3, -0.2, 0.1], [0.0, 0.4, -0.1]]))
    paths["H"] = str(tmp_path / "H.npy")
    np.save(paths["H"], rng.standard_normal((4, 3)))
    (tmp_path / "folder").mkdir()
    paths["folder"] = str(tmp_path / "folder")
    paths["missing"] = str(tmp_path / "missing.txt")
    paths["latin1"] = str(tmp_path / "latin1.txt")
    with open(paths["latin1"], "wb") as fh:
        fh.write(b"\xff\xfe 1\n")
    paths["broken_json"] = str(tmp_path / "broken.json")
    with open(paths["broken_json"], "w") as fh:
        fh.write("[[0, 1], [1")
    return paths


def commands(p, bad):
    return {
        "decide, two models": ["decide", p["M0"], p["M1"], "--query", p["x"], bad],
        "decide, three models": ["decide", p["M0"], p["M1"], p["M2"], "--query", p["x"], bad],
        "decide, a schedule": ["decide", p["M0"], p["M1"], p["M2"], "--query", p["Q"], bad],
        "rank --names": ["rank", p["M0"], p["M1"], p["H"], "--names", bad],
    }


BAD_FILES = [("missing", "no such file"), ("folder", "is a folder"), ("latin1", "is not UTF-8 text"),
             ("broken_json", "not a valid JSON list")]
CASES = [(command, bad, message) for command in ("decide, two models", "decide, three models",
                                                 "decide, a schedule", "rank --names")
         for bad, message in BAD_FILES
         if not (command == "rank --names" and bad == "broken_json")]   # names are plain lines


@pytest.mark.parametrize("command,bad,message", CASES)
def test_unreadable_text_inputs_are_one_error_line(capsys, inputs, command, bad, message):
    code, out, err = run(capsys, *commands(inputs, inputs[bad])[command])
    assert code == 2 and out == "", err
    assert err.startswith("Error: ") and err.count("\n") == 1 and message in err, err
    assert inputs[bad] in err


def test_scheduled_answers_from_the_api_take_numpy_pairs_and_refuse_floats_and_booleans():
    q, a = read_scheduled_answers(np.array([[0, 2], [1, 5]]), n=6, m=2)
    assert q.tolist() == [0, 1] and a.tolist() == [2, 5]
    for bad in ([[0, 1.5]], [[True, 1]], [[0, 1, 2]], [3]):
        with pytest.raises(InputError, match="is not 'query answer'"):
            read_scheduled_answers(bad, n=6, m=2)


def test_read_text_drops_a_byte_order_mark_and_names_the_option(tmp_path):
    path = tmp_path / "names.txt"
    path.write_bytes("\ufeffa\r\nb\n".encode("utf-8"))
    assert read_text(str(path), "names") == (str(path), "a\r\nb\n")
    with pytest.raises(InputError, match=r"^--names .*missing.txt: no such file; give names$"):
        read_text(str(tmp_path / "missing.txt"), "names", label=f"--names {tmp_path / 'missing.txt'}")
