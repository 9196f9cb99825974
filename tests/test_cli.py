import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cli_run import run

DESIGN_KEYS = ["model", "n", "d", "energy", "target_error", "query", "query_norm", "hellinger",
               "hellinger_squared", "total_variation", "kl_ab", "kl_ba", "chernoff_information",
               "distinguishable", "samples", "certificate", "solver"]
BOUND_KEYS = ["model", "n", "d", "energy", "target_error", "row_norm_2inf", "distinguishable",
              "certificate", "seconds"]
# the certificate of bound has the keys of design's certificate
CERTIFICATE_KEYS = ["row_diameter", "row_diameter_exact", "hellinger_squared_max_bound",
                    "samples_lower_any_strategy", "mean_samples_lower_sequential", "note"]


def test_design_json(capsys, pair_files):
    a, b, A, B = pair_files
    code, out, err = run(capsys, "design", a, b, "--energy", "1.5", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert all(k in r for k in DESIGN_KEYS)
    assert r["model"] == "softmax" and (r["n"], r["d"]) == (12, 3)
    assert len(r["query"]) == 3 and r["query_norm"] <= 1.5 + 1e-12
    assert set(r["samples"]) >= {"lower", "upper", "predicted"}
    assert all(isinstance(r["samples"][k], int) for k in ("lower", "upper", "predicted"))
    assert set(r["certificate"]) >= {"hellinger_squared_max_bound", "samples_lower_any_strategy",
                                     "mean_samples_lower_sequential"}
    assert {"method", "starts", "iterations", "passes", "seconds"} <= set(r["solver"])
    assert r["target_error"] == 0.05 and r["solver"]["starts"] == 32


def test_design_table_and_no_progress_when_stderr_is_not_a_terminal(capsys, pair_files):
    a, b, _, _ = pair_files
    code, out, err = run(capsys, "design", a, b, "--energy", "1.5")
    assert code == 0
    assert "Hellinger" in out and "predicted" in out and "Certificate" in out
    assert err == ""


def test_design_out_writes_npy(capsys, pair_files, tmp_path):
    a, b, _, _ = pair_files
    out_file = tmp_path / "x.npy"
    code, out, _ = run(capsys, "design", a, b, "--energy", "1.5", "--out", str(out_file), "--json")
    assert code == 0
    np.testing.assert_allclose(np.load(out_file), json.loads(out)["query"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bht-")] == []


def test_same_model_exit_0_and_nulls(capsys, pair_files, tmp_path):
    a, _, A, _ = pair_files
    s = tmp_path / "S.npy"
    np.save(s, A + 2.0)
    code, out, _ = run(capsys, "design", a, str(s), "--energy", "1.5", "--json")
    r = json.loads(out)
    assert code == 0 and r["distinguishable"] is False and r["hellinger"] == 0
    assert r["samples"] == {"lower": None, "upper": None, "predicted": None, "method": "none"}
    assert r["certificate"]["samples_lower_any_strategy"] is None
    code, out, _ = run(capsys, "design", a, str(s), "--energy", "1.5")
    assert code == 0 and "same softmax model" in out


def test_bound_json_and_table(capsys, pair_files):
    a, b, _, _ = pair_files
    code, out, err = run(capsys, "bound", a, b, "--energy", "1.5", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert all(k in r for k in BOUND_KEYS)
    assert all(k in r["certificate"] for k in CERTIFICATE_KEYS)
    assert isinstance(r["certificate"]["samples_lower_any_strategy"], int)
    code, out, _ = run(capsys, "design", a, b, "--energy", "1.5", "--json")
    assert set(json.loads(out)["certificate"]) == set(r["certificate"])
    code, out, _ = run(capsys, "bound", a, b, "--energy", "1.5")
    assert code == 0 and "row diameter" in out


def test_stdin_input(capsys, pair_files, monkeypatch):
    import io
    a, b, A, _ = pair_files
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in A)
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(text.encode())})())
    code, out, _ = run(capsys, "bound", "-", b, "--energy", "1.5", "--json")
    assert code == 0 and json.loads(out)["n"] == 12


def bad_cases(tmp_path, a, b):
    def f(name, content):
        p = tmp_path / name
        if isinstance(content, np.ndarray):
            np.save(p, content, allow_pickle=True)
        else:
            p.write_text(content)
        return str(p)
    return {
        "missing file": ([str(tmp_path / "nope.npy"), b], "no such file"),
        "unknown extension": ([f("m.xlsx", "1"), b], "unknown extension"),
        "object npy": ([f("o.npy", np.array([{}, 1], dtype=object)), b], "pickled/object"),
        "non-numeric cell": ([f("n.csv", "1,2,3\n4,five,6\n"), b], "line 2: 'five' is not a number"),
        "ragged rows": ([f("r.csv", "1,2,3\n4,5\n"), b], "every row needs the same number"),
        "empty array": ([f("e.npy", np.zeros((0, 3))), b], "empty"),
        "1-D array": ([f("v.npy", np.ones(3)), b], "reshape(-1, 1)"),
        "3-D array": ([f("t.npy", np.ones((2, 2, 3))), b], "expected a 2-D matrix"),
        "NaN": ([f("nan.npy", np.full((12, 3), np.nan)), b], "NaN or Inf"),
        "Inf": ([f("inf.csv", "1,2,inf\n"), b], "NaN or Inf"),
        "shape mismatch": ([a, f("s.npy", np.ones((5, 3)))], "same number of rows"),
        "energy <= 0": ([a, b, "--energy", "0"], "--energy must be a finite number > 0"),
        "energy negative": ([a, b, "--energy", "-1"], "--energy must be a finite number > 0"),
        "energy inf": ([a, b, "--energy", "inf"], "--energy must be a finite number > 0"),
        "energy nan": ([a, b, "--energy", "nan"], "--energy must be a finite number > 0"),
        "energy text": ([a, b, "--energy", "lots"], "--energy must be a number, got 'lots'"),
        "error 0": ([a, b, "--error", "0"], "--error must lie strictly between 0 and 0.5"),
        "error 0.5": ([a, b, "--error", "0.5"], "--error must lie strictly between 0 and 0.5"),
        "starts 0": ([a, b, "--starts", "0"], "--starts must be a whole number >= 1"),
        "energy overflows logits": ([a, b, "--energy", "1e300"], "float64 softmax is meaningful up to 1e+12"),
        "energy underflows logits": ([a, b, "--energy", "1e-300"], "no query separates the models in float64"),
        "negative seed": ([a, b, "--seed", "-3"], "--seed must be a whole number >= 0"),
        "missing energy": ([a, b, "--no-energy"], "No such option"),
    }


@pytest.mark.parametrize("case", [
    "missing file", "unknown extension", "object npy", "non-numeric cell", "ragged rows",
    "empty array", "1-D array", "3-D array", "NaN", "Inf", "shape mismatch", "energy <= 0",
    "energy negative", "energy inf", "energy nan", "energy text", "error 0", "error 0.5",
    "starts 0", "missing energy", "energy overflows logits", "energy underflows logits", "negative seed"])
def test_bad_input_is_one_error_line_exit_2_and_no_output_file(capsys, pair_files, tmp_path, case):
    a, b, _, _ = pair_files
    args, message = bad_cases(tmp_path, a, b)[case]
    if "--energy" not in args:
        args = args + ["--energy", "1.0"]
    out_file = tmp_path / "x.npy"
    code, out, err = run(capsys, "design", *args, "--out", str(out_file))
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert message in lines[0]
    assert "Traceback" not in err
    assert not out_file.exists()


def test_out_folder_must_exist(capsys, pair_files, tmp_path):
    a, b, _, _ = pair_files
    code, _, err = run(capsys, "design", a, b, "--energy", "1", "--out", str(tmp_path / "no" / "x.npy"))
    assert code == 2 and err.startswith("Error: --out") and "does not exist" in err


@pytest.mark.slow
def test_ccp_refuses_large_models(capsys, tmp_path):
    rng = np.random.default_rng(0)
    a, b = tmp_path / "A.npy", tmp_path / "B.npy"
    np.save(a, rng.standard_normal((2000, 200)))
    np.save(b, rng.standard_normal((2000, 200)))
    code, _, err = run(capsys, "design", str(a), str(b), "--energy", "1", "--method", "ccp")
    assert code == 2 and "--method ccp" in err


@pytest.mark.slow
def test_console_script_and_module_entry_points(pair_files):
    a, b, _, _ = pair_files
    bht = os.path.join(os.path.dirname(sys.executable), "bht")
    for cmd in ([bht], [sys.executable, "-m", "bhtcli"]):
        p = subprocess.run(cmd + ["bound", a, b, "--energy", "1", "--json"], capture_output=True, text=True)
        assert p.returncode == 0 and json.loads(p.stdout)["n"] == 12
    p = subprocess.run([bht, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and "bht" in p.stdout
    p = subprocess.run([bht, "design", a, "nope.npy", "--energy", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("Error: ")
