"""Every user value is checked once per call, in bhtcli.api (ModelSpec.build, DesignOptions.build
and the checkers of bhtcli.io.validation), never again by the command it is handed to."""
from collections import Counter

import numpy as np
import pytest

import bhtcli.io.validation as validation
from bhtcli import api

A = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5]])
B = np.array([[0.9, 0.1], [0.1, 1.1], [-1.0, 0.3]])


@pytest.fixture
def checked(monkeypatch):
    """The names check_scalar is called with (every scalar checker goes through it)."""
    seen = Counter()
    original = validation.check_scalar

    def counting(value, name, *args, **kwargs):
        seen[name] += 1
        return original(value, name, *args, **kwargs)

    monkeypatch.setattr(validation, "check_scalar", counting)
    return seen


@pytest.mark.parametrize("call, names", [
    (lambda: api.design(A, B, 1.0, starts=4, seed=1), {"energy", "error", "starts", "seed"}),
    (lambda: api.design(A, B, 1.0), {"energy", "error", "seed"}),
    (lambda: api.design(A, B, 1.0, queries=400), {"energy", "error", "seed", "queries"}),
    (lambda: api.design(A, B, 1.0, candidates=np.eye(2)), {"energy", "error", "seed"}),
    (lambda: api.design(A, B, 1.0, subspace=np.eye(2)[:, :1]), {"energy", "error", "seed"}),
    (lambda: api.bound(A, B, 1.0), {"energy", "error"}),
    (lambda: api.simulate(A, B, 1.0, trials=200, policy="fixed"), {"energy", "error", "seed"}),
    (lambda: api.rank(A, B, np.eye(2), 1.0), {"energy", "error"}),
])
def test_each_value_is_checked_once(checked, call, names):
    try:
        call()
    except api.NotReachable:
        pass
    assert set(checked) == names, checked
    assert all(count == 1 for count in checked.values()), checked


def test_a_budget_list_checks_each_budget_once(checked):
    api.design(A, B, [0.5, 1.0, 2.0], seed=1)
    assert checked == {"energy": 3, "error": 1, "seed": 1}, checked


def test_budget_lists_are_designs_alone():
    for call in (lambda: api.bound(A, B, [0.5, 1.0]), lambda: api.rank(A, B, np.eye(2), "0.5,1"),
                 lambda: api.simulate(A, B, [0.5, 1.0], trials=200)):
        with pytest.raises(api.InputError, match="takes one budget here"):
            call()


C = np.array([[0.5, 0.5], [0.2, 0.8], [-0.7, 0.1]])


@pytest.mark.parametrize("call, names", [
    (lambda: api.design([A, B, C], 1.0, starts=4, seed=1), {"energy", "error", "starts", "seed"}),
    (lambda: api.design([A, B, C], 1.0, starts=4, schedule=True), {"energy", "error", "starts",
                                                                     "seed"}),
    (lambda: api.design([A, B], 1.0, schedule=True), {"energy", "error", "seed"}),
    (lambda: api.design([A, B, C], 1.0, candidates=np.eye(2)), {"energy", "error", "seed"}),
    (lambda: api.bound([A, B, C], 1.0), {"energy", "error"}),
    (lambda: api.simulate([A, B, C], 1.0, starts=4, trials=200, policy="fixed"),
     {"energy", "error", "starts", "seed"}),
    (lambda: api.decide([A, B, C], np.ones(2), [0, 1, 2]), {"error"}),
    (lambda: api.rank([A, B, C], np.eye(2), 1.0), {"energy", "error"}),
])
def test_k_models_check_each_value_once(checked, call, names):
    call()
    assert set(checked) == names, checked
    assert all(count == 1 for count in checked.values()), checked


def test_k_models_budget_list_checks_each_budget_once(checked):
    api.design([A, B, C], [0.5, 1.0], starts=4)
    assert checked == {"energy": 2, "error": 1, "starts": 1, "seed": 1}, checked


@pytest.mark.parametrize("more", [[], ["C.npy"]])
def test_the_cli_checks_each_value_once(checked, tmp_path, monkeypatch, more):
    """`bht design` hands its values to the library unchecked: the library checks each once
    (the messages name the flags)."""
    from click.testing import CliRunner
    from bhtcli.cli.main import cli
    monkeypatch.chdir(tmp_path)
    for name, M in (("A.npy", A), ("B.npy", B), ("C.npy", C)):
        np.save(name, M)
    result = CliRunner().invoke(cli, ["design", "A.npy", "B.npy", *more, "-E", "1", "--starts",
                                      "4", "--json"])
    assert result.exit_code == 0, result.output
    assert set(checked) == {"--energy", "--error", "--starts", "--seed"}, checked
    assert all(count == 1 for count in checked.values()), checked
