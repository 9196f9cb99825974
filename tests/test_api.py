"""The Python API: `from bhtcli import ...` gives every command, and each result's to_dict()
is what the CLI prints with --json (timings aside)."""
import json

import numpy as np
import pytest

import bhtcli
from bhtcli import bound, decide, design, load_matrix, sample, shift, simulate
from bhtcli.cli.main import main
from bhtcli.errors import InputError

A, B, X = "examples/A.npy", "examples/B.npy", "examples/x.npy"
LA, LB = "examples/leverage_A.npy", "examples/leverage_B.npy"
TIMINGS = {"seconds", "search_seconds", "pass_seconds"}


def untimed(obj):
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k not in TIMINGS}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def unrecorded(obj: dict) -> dict:
    """Without the run record, which says how the inputs were given (paths or arrays)."""
    return {k: v for k, v in obj.items() if k != "run"}


def cli(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert info.value.code == 0, err
    return out


def cli_json(capsys, *argv):
    return json.loads(cli(capsys, *argv, "--json"))


def test_the_whole_api_is_exported():
    for name in ("design", "bound", "sample", "decide", "simulate", "shift", "sweep", "load_matrix"):
        assert callable(getattr(bhtcli, name)) and name in bhtcli.__all__


@pytest.mark.parametrize("argv,call", [
    ([A, B, "--energy", "1"], lambda: design(A, B, 1.0)),
    ([A, B, "--energy", "0.5", "--error", "0.01", "--starts", "8", "--seed", "3", "--link-b", "taylor:4"],
     lambda: design(A, B, 0.5, error=0.01, starts=8, seed=3, link_b="taylor:4")),
    ([LA, LB, "--model", "leverage", "--energy", "4", "--floor", "1", "--starts", "2"],
     lambda: design(LA, LB, 4, model="leverage", floor=1, starts=2)),
])
def test_design_equals_the_cli(capsys, argv, call):
    assert untimed(call().to_dict()) == untimed(cli_json(capsys, "design", *argv))


def test_design_takes_arrays_as_well_as_paths():
    by_path = design(A, B, 1.0, starts=4).to_dict()
    by_array = design(load_matrix(A), np.load(B), 1.0, starts=4).to_dict()
    assert unrecorded(untimed(by_path)) == unrecorded(untimed(by_array))
    assert by_array["run"]["files"] == [] and by_path["run"]["files"][0]["path"] == A


@pytest.mark.parametrize("argv,call", [
    ([A, B, "--energy", "1"], lambda: bound(A, B, 1.0)),
    ([A, A, "--energy", "2", "--link-b", "taylor:4"], lambda: bound(A, A, 2.0, link_b="taylor:4")),
    ([LA, LB, "--model", "leverage", "--energy", "4", "--floor", "1"],
     lambda: bound(LA, LB, 4, model="leverage", floor=1)),
])
def test_bound_equals_the_cli(capsys, argv, call):
    assert untimed(call().to_dict()) == untimed(cli_json(capsys, "bound", *argv))


def test_sample_equals_the_cli(capsys):
    printed = cli(capsys, "sample", B, "--query", X, "--count", "25", "--seed", "7")
    assert sample(B, X, 25, seed=7).tolist() == [int(v) for v in printed.split()]


def test_decide_equals_the_cli(capsys):
    got = untimed(decide(A, B, X, "examples/answers.txt").to_dict())
    assert got == untimed(cli_json(capsys, "decide", A, B, "examples/answers.txt", "--query", X))
    by_array = decide(A, B, np.load(X), np.loadtxt("examples/answers.txt", dtype=int)).to_dict()
    assert unrecorded(untimed(by_array)) == unrecorded(got)


def test_simulate_equals_the_cli(capsys):
    got = simulate(A, B, 1.0, trials=400, seed=2).to_dict()
    assert untimed(got) == untimed(cli_json(capsys, "simulate", A, B, "--energy", "1", "--trials", "400",
                                            "--seed", "2"))


def test_shift_equals_the_cli(capsys, tmp_path):
    args = ("examples/shift_A.npy", "examples/shift_data.npz")
    got = shift(*args, 10, 3, out=str(tmp_path / "api.npy"), energy=1.0).to_dict()
    printed = cli_json(capsys, "shift", args[0], "--data", args[1], "--lr", "10", "--steps", "3", "--out", str(tmp_path / "cli.npy"),
                       "--energy", "1")
    assert untimed(dict(got, out=None)) == untimed(dict(printed, out=None))
    assert np.array_equal(np.load(tmp_path / "api.npy"), np.load(tmp_path / "cli.npy"))


@pytest.mark.parametrize("call,message", [
    (lambda: design(A, B, -1.0), "energy must be a finite number > 0"),
    (lambda: design(A, B, 1.0, error=0.7), "error must"),
    (lambda: design(A, B, 1.0, starts=0), "starts must be a whole number >= 1"),
    (lambda: design(A, B, 1.0, method="newton"), "method must be one of lbfgs, ccp"),
    (lambda: design(LA, LB, 4, model="leverage"), "floor is required"),
    (lambda: simulate(A, B, 1.0, trials=5), "trials must be a whole number >= 100"),
    (lambda: sample(A, X, 0), "count must be a whole number >= 1"),
    (lambda: shift("examples/shift_A.npy", "examples/shift_data.npz", -1.0), "lr must be a finite number > 0"),
])
def test_errors_name_the_parameters_not_the_flags(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert str(info.value).startswith(message) and "--" not in str(info.value), str(info.value)
