"""`bht shift`: softmax-regression gradient steps, their validation and the CLI."""
import importlib
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from bhtcli import InputError, shift
from cli_run import run
from bhtcli.commands.shift import (load_data, softmax_regression_grad, softmax_regression_loss,
                          softmax_regression_loss_and_grad)

shift_module = importlib.import_module("bhtcli.commands.shift")   # the package's `shift` is the function
SHIFT_KEYS = {"n", "d", "m", "lr", "steps", "loss_before", "loss_after", "loss_history", "grad_norm",
              "delta_frobenius", "row_norm_2inf", "out", "detection", "seconds", "warnings",
              "model", "energy", "target_error", "run"}


def plain_loss(A, Q, Y):
    """Textbook loss, one query at a time (independent of bhtcli)."""
    return sum(0.5 * np.sum((softmax(A @ q) - y) ** 2) for q, y in zip(Q, Y)) / len(Q)


def problem(seed, n=7, d=3, m=11, onehot=False, scale=1.0):
    rng = np.random.default_rng(seed)
    A = scale * rng.standard_normal((n, d))
    Q = rng.standard_normal((m, d))
    if onehot:
        Y = np.eye(n)[rng.integers(0, n, m)]
    else:
        Y = softmax(rng.standard_normal((m, n)) * 2, axis=1)
    return A, Q, Y


def fd_grad(f, A, h=1e-4):
    """Five-point central differences, entry by entry."""
    G = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        E = np.zeros_like(A)
        E[idx] = h
        G[idx] = (-f(A + 2 * E) + 8 * f(A + E) - 8 * f(A - E) + f(A - 2 * E)) / (12 * h)
    return G


@pytest.fixture
def files(tmp_path):
    A, Q, Y = problem(3, n=9, d=4, m=25)
    a, data = tmp_path / "A.npy", tmp_path / "D.npz"
    np.save(a, A)
    np.savez(data, Q=Q, Y=Y)
    return str(a), str(data), A, Q, Y


# ---------------------------------------------------------------- loss and gradient
@pytest.mark.parametrize("seed,onehot,scale", [(0, False, 1.0), (1, True, 1.0), (2, False, 3.0),
                                               (3, True, 0.1)])
def test_gradient_matches_finite_differences(seed, onehot, scale):
    A, Q, Y = problem(seed, onehot=onehot, scale=scale)
    g = softmax_regression_grad(A, Q, Y)
    g_fd = fd_grad(lambda M: plain_loss(M, Q, Y), A)
    assert np.linalg.norm(g - g_fd) <= 1e-7 * np.linalg.norm(g)


def test_loss_and_gradient_by_hand():
    # n = 2, d = 1, one query q = 1, target (1, 0): p1 = e/(e+1), L = (1 - p1)^2 = 1/(e+1)^2,
    # dL/dz1 = -2 p1 (1 - p1)^2 = -2e/(e+1)^3 = -dL/dz2, and dL/dA = (dL/dz) q^T.
    A, Q, Y = np.array([[1.0], [0.0]]), np.array([[1.0]]), np.array([[1.0, 0.0]])
    e = math.e
    loss, grad = softmax_regression_loss_and_grad(A, Q, Y)
    assert loss == pytest.approx(1 / (e + 1) ** 2, rel=1e-15)
    np.testing.assert_allclose(grad, [[-2 * e / (e + 1) ** 3], [2 * e / (e + 1) ** 3]], rtol=1e-14)
    # a perfect fit has zero loss and gradient; m = 2 averages the two queries
    Q2, Y2 = np.array([[1.0], [-1.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    assert softmax_regression_loss(A, Q2, Y2) == pytest.approx(1 / (e + 1) ** 2, rel=1e-15)


def test_blocks_give_the_same_answer(monkeypatch):
    A, Q, Y = problem(5, n=6, d=3, m=50)
    loss, grad = softmax_regression_loss_and_grad(A, Q, Y)
    monkeypatch.setattr(shift_module, "BLOCK_ENTRIES", 13)     # blocks of 2 queries
    loss_b, grad_b = softmax_regression_loss_and_grad(A, Q, Y)
    assert loss_b == pytest.approx(loss, rel=1e-13)
    np.testing.assert_allclose(grad_b, grad, rtol=1e-12, atol=1e-17)


def test_huge_logits_do_not_overflow():
    A, Q, Y = problem(6)
    loss, grad = softmax_regression_loss_and_grad(1e6 * A, Q, Y)
    assert np.isfinite(loss) and np.isfinite(grad).all()


@st.composite
def regressions(draw):
    seed = draw(st.integers(0, 10_000))
    n, d, m = draw(st.integers(2, 8)), draw(st.integers(1, 5)), draw(st.integers(1, 12))
    return problem(seed, n, d, m, onehot=draw(st.booleans()), scale=draw(st.floats(0.05, 5)))


@settings(max_examples=60, deadline=None)
@given(regressions(), st.floats(-3, 3))
def test_gradient_rows_are_centred_and_shift_invariant(prob, c):
    # Adding a vector to every row of A changes no softmax: same loss, same gradient; every
    # gradient has rows summing to zero (so dA never carries such a common shift).
    A, Q, Y = prob
    w = c * np.arange(1, A.shape[1] + 1)
    loss, grad = softmax_regression_loss_and_grad(A, Q, Y)
    loss_w, grad_w = softmax_regression_loss_and_grad(A + w, Q, Y)
    assert loss_w == pytest.approx(loss, rel=1e-9, abs=1e-15)
    np.testing.assert_allclose(grad_w, grad, atol=1e-9 * (np.abs(grad).max() + 1e-12))
    # rounding: each entry sums m terms of size <= max|q| (the factor p (r - <p, r>) is <= 2)
    assert np.abs(grad.sum(axis=0)).max() <= 1e-14 * A.shape[0] * np.abs(Q).max()


@settings(max_examples=60, deadline=None)
@given(regressions())
def test_a_small_step_decreases_the_loss(prob):
    # In the logits z the Hessian of 1/2 ||p - y||^2 is J^T J + sum_i r_i Hess(p_i), with
    # ||J|| <= 1 and Hess(p_i) = p_i [(e_i - p)(e_i - p)^T - J] of norm <= 3 p_i, |r_i| <= 1:
    # at most 4. In A it is at most L = 4 mean ||q||^2, and a step eta = 1/L decreases the
    # loss by at least eta ||g||^2 / 2 (descent lemma).
    A, Q, Y = prob
    loss, g = softmax_regression_loss_and_grad(A, Q, Y)
    eta = 1.0 / (4.0 * np.mean(np.sum(Q * Q, axis=1)))
    new = plain_loss(A - eta * g, Q, Y)
    assert new <= loss - 0.5 * eta * np.sum(g * g) + 1e-14


# ---------------------------------------------------------------- shift()
def test_one_step_is_a_minus_lr_grad(tmp_path):
    A, Q, Y = problem(8, n=6, d=3, m=20)
    out = tmp_path / "B.npy"
    r = shift(A, {"Q": Q, "Y": Y}, lr=2.5, steps=1, out=str(out))
    B = np.load(out)
    np.testing.assert_allclose(B, A - 2.5 * fd_grad(lambda M: plain_loss(M, Q, Y), A), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(B, r.updated)
    assert r.loss_before == pytest.approx(plain_loss(A, Q, Y), rel=1e-13)
    assert r.loss_after == pytest.approx(plain_loss(B, Q, Y), rel=1e-13)
    assert r.delta_frobenius == pytest.approx(np.linalg.norm(B - A), rel=1e-13)
    assert r.row_norm_2inf == pytest.approx(np.linalg.norm(B - A, axis=1).max(), rel=1e-13)
    assert r.grad_norm == pytest.approx(np.linalg.norm(B - A) / 2.5, rel=1e-13)
    assert (r.n, r.d, r.m, r.steps, r.out) == (6, 3, 20, 1, str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["B.npy"]


def test_k_steps_repeat_the_step():
    A, Q, Y = problem(9, n=5, d=2, m=15)
    r = shift(A, (Q, Y), lr=3.0, steps=4)
    B = A.copy()
    losses = []
    for _ in range(4):
        losses.append(plain_loss(B, Q, Y))
        B = B - 3.0 * softmax_regression_grad(B, Q, Y)
    losses.append(plain_loss(B, Q, Y))
    np.testing.assert_allclose(r.updated, B, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(r.loss_history, losses, rtol=1e-12)
    assert r.loss_after < r.loss_before and r.detection is None and r.out is None


def test_integer_labels_are_one_hot():
    A, Q, _ = problem(10, n=5, d=2, m=8)
    labels = np.array([0, 4, 2, 2, 1, 3, 0, 4])
    r1 = shift(A, {"Q": Q, "Y": labels}, lr=1.0)
    r2 = shift(A, {"Q": Q, "Y": np.eye(5)[labels]}, lr=1.0)
    np.testing.assert_array_equal(r1.updated, r2.updated)


def test_detection_with_energy():
    A, Q, Y = problem(11, n=12, d=3, m=30)
    r = shift(A, (Q, Y), lr=5.0, steps=2, energy=1.0)
    det = r.detection
    assert det["distinguishable"] and r.energy == 1.0 and r.to_dict()["energy"] == 1.0
    sp = det["small_perturbation"]
    assert sp["bhattacharyya_distance_estimate"] == pytest.approx(sp["nu"] / 8, rel=1e-15)
    assert 0.8 < det["estimate_over_design"] < 1.2          # a small update: the estimate holds
    assert sp["samples"]["lower"] <= sp["samples"]["predicted"] <= sp["samples"]["upper"]
    assert det["samples"]["lower"] <= det["samples"]["predicted"] <= det["samples"]["upper"]
    json.dumps(r.to_dict(), allow_nan=False)


def test_detection_of_an_invisible_update():
    # Y uniform and A = 0: every gradient is 0, B = A, no query detects anything
    A = np.zeros((4, 2))
    r = shift(A, (np.ones((3, 2)), np.full((3, 4), 0.25)), lr=1.0, energy=1.0)
    assert r.delta_frobenius == 0.0
    assert r.detection["distinguishable"] is False
    assert r.detection["samples"]["predicted"] is None
    assert r.detection["small_perturbation"]["samples"]["predicted"] is None


# ---------------------------------------------------------------- validation
def test_load_data_accepts_float32_rounding():
    Y = softmax(np.random.default_rng(0).standard_normal((5, 300)), axis=1).astype(np.float32)
    Q, Y2 = load_data((np.zeros((5, 2)), Y), 300, 2)
    assert Y2.dtype == np.float64 and Q.shape == (5, 2)


@pytest.mark.parametrize("data,message", [
    ({"Q": np.zeros((3, 2))}, "data has no Y"),
    ((np.zeros((3, 5)), np.full((3, 4), 0.25)), "data: Q has 5 columns but A has d = 2"),
    ((np.zeros((3, 2)), np.full((3, 5), 0.2)), "data: Y has 5 columns but A has n = 4 rows"),
    ((np.zeros((3, 2)), np.full((2, 4), 0.25)), "data: Y has 2 rows but Q has 3"),
    ((np.zeros((3, 2)), np.array([[0.25] * 4, [0.5, 0.6, -0.1, 0.0], [0.25] * 4])),
     "data: Y row 1 has a negative entry (-0.1 in column 2)"),
    ((np.zeros((3, 2)), np.array([[0.25] * 4, [0.25] * 4, [0.3] * 4])), "data: Y row 2 sums to 1.2, not 1"),
    ((np.zeros((3, 2)), np.array([0, 1, 4])), "data: Y label 4 in row 2 is outside 0..3"),
    ((np.zeros((3, 2)), np.array([0, 1])), "data: Y has 2 labels but Q has 3 rows"),
    ((np.full((3, 2), np.nan), np.full((3, 4), 0.25)), "data: Q contains NaN or Inf"),
])
def test_bad_data_is_named(data, message):
    with pytest.raises(InputError) as exc:
        load_data(data, 4, 2)
    assert message in str(exc.value)


@pytest.mark.parametrize("lr,steps,message", [
    (0.0, 1, "lr must be a finite number > 0, got 0.0"),
    (-1.0, 1, "lr must be a finite number > 0"),
    (float("nan"), 1, "lr must be a finite number > 0"),
    (float("inf"), 1, "lr must be a finite number > 0"),
    (1.0, 0, "steps must be a whole number >= 1, got 0"),
    (1.0, 1.5, "steps must be a whole number >= 1, got 1.5"),
    (1e308, 3, "lr 1e+308: the update left the float64 range within"),
    (1e305, 1, "lr 1e+305: the update left the float64 range within 1 step(s)"),
])
def test_bad_lr_and_steps(lr, steps, message):
    A, Q, Y = problem(0)
    with pytest.raises(InputError) as exc:
        shift(A, (100 * Q, Y), lr=lr, steps=steps)
    assert message in str(exc.value) and "--" not in str(exc.value)    # library terms


# ---------------------------------------------------------------- CLI
def test_cli_json_and_written_model(capsys, files, tmp_path):
    a, data, A, Q, Y = files
    out = tmp_path / "B.npy"
    code, stdout, err = run(capsys, "shift", a, "--data", data, "--lr", "4", "--out", str(out), "--json")
    assert code == 0 and err == ""
    r = json.loads(stdout)
    assert set(r) == SHIFT_KEYS
    assert r["steps"] == 1 and r["lr"] == 4.0 and r["detection"] is None and len(r["loss_history"]) == 2
    np.testing.assert_allclose(np.load(out), A - 4 * softmax_regression_grad(A, Q, Y), rtol=1e-15, atol=0)


def test_cli_table_with_detection(capsys, files, tmp_path):
    a, data, _, _, _ = files
    code, stdout, err = run(capsys, "shift", a, "--data", data, "--lr", "20", "--steps", "3",
                            "--out", str(tmp_path / "B.npy"), "--energy", "1")
    assert code == 0
    for text in ("loss before", "||B - A||_F", "designed query", "small-perturbation estimate", "nu = sup",
                 "predicted"):
        assert text in stdout
    assert err == "" and "gradient steps" not in stdout   # progress: terminals only


def test_cli_json_detection_keys(capsys, files, tmp_path):
    a, data, _, _, _ = files
    code, stdout, err = run(capsys, "shift", a, "--data", data, "--lr", "20", "--out", str(tmp_path / "B.npy"),
                            "--energy", "2", "--error", "0.01", "--json")
    assert code == 0 and err == ""
    det = json.loads(stdout)["detection"]
    assert {"distinguishable", "hellinger_squared", "samples", "query_norm",
            "small_perturbation", "estimate_over_design"} <= set(det)
    assert {"nu", "bhattacharyya_distance_estimate", "hellinger_squared_estimate", "samples", "paper_order",
            "query_norm"} <= set(det["small_perturbation"])
    assert json.loads(stdout)["target_error"] == 0.01 and isinstance(det["samples"]["predicted"], int)


def _error_case(tmp_path, kind):
    """(arguments after `shift A`, expected error line) for one kind of bad input."""
    A, Q, Y = problem(3, n=9, d=4, m=25)
    d = tmp_path / "D.npz"
    out = str(tmp_path / "B.npy")
    if kind == "missing keys":
        np.savez(d, X=Q, Y=Y)
        return ["--data", str(d), "--lr", "1", "--out", out], \
            f"Error: {d} has no array Q; it holds: X, Y; write it with numpy.savez('D.npz', Q=Q, Y=Y)"
    if kind == "shape":
        np.savez(d, Q=Q[:, :3], Y=Y)
        return ["--data", str(d), "--lr", "1", "--out", out], \
            f"Error: {d}: Q has 3 columns but A has d = 4; each row of Q is one query x (a vector of d numbers)"
    if kind == "bad Y":
        Y = Y.copy()
        Y[7] *= 2
        np.savez(d, Q=Q, Y=Y)
        return ["--data", str(d), "--lr", "1", "--out", out], \
            f"Error: {d}: Y row 7 sums to 2, not 1 (tolerance 1e-06); normalise the rows: Y / Y.sum(axis=1, keepdims=True)"
    np.savez(d, Q=Q, Y=Y)
    if kind == "lr":
        return ["--data", str(d), "--lr", "-2", "--out", out], "Error: --lr must be a finite number > 0, got -2.0"
    if kind == "steps":
        return ["--data", str(d), "--lr", "1", "--steps", "0", "--out", out], \
            "Error: --steps must be a whole number >= 1, got 0"
    if kind == "not npz":
        c = tmp_path / "D.csv"
        c.write_text("1,2\n")
        return ["--data", str(c), "--lr", "1", "--out", out], \
            f"Error: --data {c}: expected a .npz archive holding Q (m x d queries) and Y (m x n targets); " \
            "write it with numpy.savez('D.npz', Q=Q, Y=Y)"
    if kind == "pickle":
        np.savez(d, Q=Q, Y=np.array([{"a": 1}] * 25, dtype=object))
        return ["--data", str(d), "--lr", "1", "--out", out], \
            f"Error: {d} holds a pickled/object array, which bht refuses to load; save float arrays with numpy.savez"
    if kind == "out folder":
        bad = str(tmp_path / "nope" / "B.npy")
        return ["--data", str(d), "--lr", "1", "--out", bad], \
            f"Error: --out {bad}: folder {tmp_path / 'nope'} does not exist; create it first"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["missing keys", "shape", "bad Y", "lr", "steps", "not npz", "pickle",
                                  "out folder"])
def test_cli_bad_input_is_one_error_line(capsys, tmp_path, kind):
    a = tmp_path / "A.npy"
    np.save(a, problem(3, n=9, d=4, m=25)[0])
    args, expected = _error_case(tmp_path, kind)
    code, stdout, err = run(capsys, "shift", str(a), *args)
    assert code == 2 and stdout == ""
    assert err.strip() == expected
    assert not (tmp_path / "B.npy").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bht-")] == []


def test_cli_missing_out_and_lr(capsys, files):
    a, data, _, _, _ = files
    code, _, err = run(capsys, "shift", a, "--data", data, "--lr", "1")
    assert code == 2 and err.startswith("Error: Missing option '--out'") and err.count("\n") == 1
    code, _, err = run(capsys, "shift", a, "--data", data, "--out", "B.npy")
    assert code == 2 and err.startswith("Error: Missing option '--lr'")
