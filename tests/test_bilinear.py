"""The bilinear ceiling (docs/maths.md §4.14, §4.15): the Cholesky verifier of a top eigenvalue
accepts just above it and refuses just below; the ceiling is never below the best query found
by a grid (d = 1, 2) or many-start searches plus random points (d >= 3), heavy rows included."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bhtcli import bound, design
from bhtcli.analysis.bilinear import bilinear_variance, quartic_matrix
from bhtcli.errors import InputError
from bhtcli.maths.certificate import bennett_phi_upper
from bhtcli.maths.psd import top_eigenvalue_certified
from tests.test_certificate import ball_points, best_found


def _known_spectrum(n, top, rng):
    """a I + b J (J all ones): eigenvalues a + b n (once) and a, every entry exact in float64."""
    a, b = 0.25, (top - 0.25) / n
    return np.full((n, n), b) + a * np.eye(n), a + b * n


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_verifier_accepts_just_above_and_refuses_just_below(n):
    M, top = _known_spectrum(n, 3.0, None)
    assert top_eigenvalue_certified(M.copy(), top * (1 - 1e-9)) is None
    got = top_eigenvalue_certified(M.copy(), top * (1 + 1e-9))
    assert got is not None and top <= got <= top * (1 + 2e-9)
    assert top_eigenvalue_certified(M.copy(), top * (1 + 1e-9), error=0.5) >= top + 0.5


def test_verifier_on_a_dense_spectrum_and_bad_shifts():
    rng = np.random.default_rng(3)
    n = 200
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.sort(rng.uniform(0, 1, n))
    lam[-1] = 1.5                                  # a gap of ~0.5 above the rest
    M = (Q * lam) @ Q.T
    M = 0.5 * (M + M.T)                            # its eigenvalues are lam up to ~1e-14
    assert top_eigenvalue_certified(M.copy(), 1.5 - 1e-6) is None
    assert top_eigenvalue_certified(M.copy(), 1.499) is None
    got = top_eigenvalue_certified(M.copy(), 1.5 + 1e-6)
    assert got is not None and 1.5 < got < 1.5 + 2e-6
    for shift in (math.nan, math.inf, -1.0):
        assert top_eigenvalue_certified(M.copy(), shift) is None
    with pytest.raises(ValueError):
        top_eigenvalue_certified(M[:, :10], 2.0)


def test_quartic_matrix_is_the_gram_of_the_symmetric_rank_two_matrices():
    rng = np.random.default_rng(4)
    g, u, w = rng.standard_normal((9, 3)), rng.standard_normal((9, 3)), rng.uniform(0.1, 2, 9)
    T, err = quartic_matrix(g, u, w)
    M = [0.5 * (np.outer(gi, ui) + np.outer(ui, gi)) for gi, ui in zip(g, u)]
    ref = np.array([[math.sqrt(w[i] * w[j]) * float(np.sum(M[i] * M[j])) for j in range(9)] for i in range(9)])
    assert np.allclose(np.tril(T), np.tril(ref), rtol=1e-13, atol=1e-13) and 0 < err < 1e-12
    T = np.tril(T) + np.tril(T, -1).T
    # and its top eigenvalue bounds the quartic sum_i w_i (g_i x)^2 (u_i x)^2 on the unit sphere
    X = rng.standard_normal((3, 20000))
    X /= np.linalg.norm(X, axis=0)
    quartic = (w[:, None] * (g @ X) ** 2 * (u @ X) ** 2).sum(0)
    assert quartic.max() <= np.linalg.eigvalsh(T)[-1] * (1 + 1e-12)


def test_bennett_coefficient_is_above_the_exact_one():
    import mpmath
    mpmath.mp.dps = 40
    for R in (-3.0, -1.0, 0.0, 1e-12, 0.3, 0.999999, 1.0, 1.000001, 3.3, 20.0):
        exact = mpmath.mpf(1) / 2 if R == 0 else (mpmath.e ** R - 1 - R) / mpmath.mpf(R) ** 2
        got = float(bennett_phi_upper(np.array([R]))[0])
        assert exact <= got <= exact * (1 + 1e-12)
    y = np.linspace(-5, 2, 2001)                   # e^y <= 1 + y + phi(R) y^2 for y <= R = 2
    assert np.all(np.exp(y) <= 1 + y + bennett_phi_upper(np.array(2.0)) * y * y + 1e-15)


def _variance_sup(A, B, E, rng):
    """max over ball points (grid for d <= 2) and t in [-1/2, 1/2] of Var_{pi_t}(delta)."""
    X = ball_points(A.shape[1], E, rng).T
    best = 0.0
    for t in np.linspace(-0.5, 0.5, 5):
        Z = X @ ((0.5 + t) * A + (0.5 - t) * B).T
        Z -= Z.max(1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(1, keepdims=True)
        delta = X @ (A - B).T
        mean = (P * delta).sum(1, keepdims=True)
        best = max(best, float(((P * (delta - mean) ** 2).sum(1)).max()))
    return best


def check_bilinear(A, B, E, seed=0, starts=0):
    """The bilinear V against the variance at grid/random points and 8 D at a many-start design;
    bound --certificate exact reports it and stays above the best H^2 found."""
    result, why = bilinear_variance(A, B, E)
    assert result is not None, why
    rng = np.random.default_rng(seed)
    assert _variance_sup(A, B, E, rng) <= result.variance * (1 + 1e-12)
    b = bound(A, B, E, certificate="exact")
    c = b.certificate
    assert c["ceilings"]["bilinear"] is not None
    assert c["hellinger_squared_max_bound"] == min(v for v in c["ceilings"].values() if v is not None)
    from bhtcli.models.readout import Readout
    h2, kl = best_found(A, B, E, Readout(), rng)
    assert h2 <= c["ceilings"]["bilinear"] * (1 + 1e-12)
    assert kl <= c["kl_max_bound"] * (1 + 1e-12)
    if starts and A.shape[1] >= 3:
        r = design(A, B, E, starts=starts, seed=seed)
        assert 8 * r.bhattacharyya_distance <= result.variance * (1 + 1e-12)
    return result


@st.composite
def pairs(draw):
    n = draw(st.integers(3, 9))
    d = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    A = scale * rng.standard_normal((n, d))
    kind = draw(st.sampled_from(["random", "close", "heavy_row", "two_heavy", "shifted"]))
    if kind == "random":
        B = scale * rng.standard_normal((n, d))
    elif kind == "close":
        B = A + draw(st.sampled_from([1e-9, 1e-4, 0.02])) * rng.standard_normal((n, d))
    elif kind in ("heavy_row", "two_heavy"):        # small changes everywhere, large on 1 or 2 rows
        B = A + 0.01 * rng.standard_normal((n, d))
        for i in rng.choice(n, 1 if kind == "heavy_row" else 2, replace=False):
            B[i] += draw(st.sampled_from([0.3, 1.0, 3.0])) * rng.standard_normal(d)
    else:
        B = A + rng.standard_normal(d) + 0.05 * rng.standard_normal((n, d))
    E = float(np.exp(draw(st.floats(math.log(1e-3), math.log(10.0)))))
    return A, B, E


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_no_query_beats_the_bilinear_ceiling(case):
    A, B, E = case
    check_bilinear(A, B, E)


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 2, 5])
def test_heavy_rows_and_large_budgets(d):
    """A bulk of rows with small differences and one or two rows with large ones, from tiny to
    large budgets; d = 5 against a 64-start search."""
    rng = np.random.default_rng(40 + d)
    A = rng.standard_normal((40, d))
    B = A + 0.02 * rng.standard_normal((40, d))
    B[7] += rng.standard_normal(d)
    for E in (0.001, 0.3, 3.0, 10.0):
        check_bilinear(A, B, E, seed=d, starts=64)
    B[11] -= 0.5 * rng.standard_normal(d)
    check_bilinear(A, B, 1.0, seed=d)


@pytest.mark.slow
def test_bilinear_beats_the_caps_on_many_homogeneous_rows():
    """Where it is meant to help: many rows of similar norm, small isotropic differences."""
    rng = np.random.default_rng(12)
    n, d, E = 3000, 24, 3.0
    A = rng.standard_normal((n, d)) / math.sqrt(d)
    B = A + 0.01 * rng.standard_normal((n, d)) / math.sqrt(d)
    b = bound(A, B, E, certificate="exact").certificate
    assert b["ceiling_method"] == "bilinear"
    assert b["ceilings"]["bilinear"] < 0.5 * b["ceilings"]["per_row"]
    assert _variance_sup(A, B, E, rng) <= 8 * b["bhattacharyya_max_bound"]


def test_refusals_say_why():
    rng = np.random.default_rng(13)
    A, B = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    r, why = bilinear_variance(A, B, 1.0, max_rows=5)
    assert r is None and "refused above 5 rows" in why
    c = bound(A, B, 1.0, bias_a=rng.standard_normal(6), certificate="exact").certificate
    assert c["ceilings"]["bilinear"] is None and "without biases" in c["note"]
    assert "bilinear" not in bound(A, B, 1.0).certificate["ceilings"]       # fast: not computed
    with pytest.raises(InputError):
        bound(A, B, 1.0, certificate="nope")
    with pytest.raises(InputError):
        bound([A, B, A + 1], energy=1.0, certificate="exact")


def test_cli_option_and_bad_value(tmp_path):
    from click.testing import CliRunner

    from bhtcli.cli.main import cli
    rng = np.random.default_rng(14)
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.standard_normal((30, 3)))
    np.save(b, rng.standard_normal((30, 3)))
    out = CliRunner().invoke(cli, ["bound", str(a), str(b), "-E", "1", "--certificate", "exact"])
    assert out.exit_code == 0 and "bilinear bound" in out.output
    bad = CliRunner().invoke(cli, ["bound", str(a), str(b), "-E", "1", "--certificate", "maybe"])
    assert bad.exit_code == 2


def test_lower_triangle_blocks_and_their_product(monkeypatch):
    """K is formed (and multiplied) from its lower triangle by blocks; any block size gives the
    same symmetric matrix."""
    from bhtcli.analysis import bilinear
    monkeypatch.setattr(bilinear, "GRAM_BLOCK", 7)
    rng = np.random.default_rng(15)
    g, u, w = rng.standard_normal((40, 3)), rng.standard_normal((40, 3)), rng.uniform(0.1, 1, 40)
    T = np.full((40, 40), np.nan)
    bilinear.quartic_matrix(g, u, w, out=T)
    full = np.tril(T) + np.tril(T, -1).T
    M = [0.5 * (np.outer(gi, ui) + np.outer(ui, gi)) for gi, ui in zip(g, u)]
    ref = np.array([[math.sqrt(w[i] * w[j]) * float(np.sum(M[i] * M[j])) for j in range(40)] for i in range(40)])
    assert np.allclose(full, ref, rtol=1e-12, atol=1e-13)
    v = rng.standard_normal(40)
    assert np.allclose(bilinear.lower_matvec(T, v), ref @ v, rtol=1e-12, atol=1e-12)


def test_no_memory_is_a_note(monkeypatch):
    from bhtcli.analysis import bilinear

    def no_memory(*_args, **_kwargs):
        raise MemoryError
    monkeypatch.setattr(bilinear, "_certified_top", no_memory)
    rng = np.random.default_rng(16)
    A, B = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    c = bound(A, B, 1.0, certificate="exact").certificate
    assert c["ceilings"]["bilinear"] is None and "no memory" in c["note"]
    assert c["hellinger_squared_max_bound"] is not None


@pytest.mark.slow
def test_design_with_the_exact_certificate_has_the_bounds_ceiling():
    """design --certificate exact: the same bilinear ceiling as bound (same pair, same budget),
    binding where it is the smallest, and the design at most its ceiling; refused on the paths
    it does not serve."""
    rng = np.random.default_rng(12)
    n, d, E = 3000, 24, 3.0
    A = rng.standard_normal((n, d)) / math.sqrt(d)
    B = A + 0.01 * rng.standard_normal((n, d)) / math.sqrt(d)
    r = design(A, B, E, certificate="exact")
    b = bound(A, B, E, certificate="exact").certificate
    c = r.certificate
    assert c["ceilings"]["bilinear"] == b["ceilings"]["bilinear"]
    assert c["ceiling_method"] == "bilinear" and c["design_over_bound"] <= 1
    assert r.hellinger_squared <= c["hellinger_squared_max_bound"]
    assert "bilinear" not in design(A[:40], B[:40], E).certificate["ceilings"]
    for kwargs in (dict(energy="1,2"), dict(energy=2.0, queries=10),
                   dict(energy=2.0, candidates=A[:3, :])):
        with pytest.raises(InputError, match="one softmax pair at one budget"):
            design(A[:40], B[:40], certificate="exact", **kwargs)
    with pytest.raises(InputError, match="must be one of"):
        design(A[:40], B[:40], 1.0, certificate="maybe")


@pytest.mark.slow
def test_k_models_take_each_pairs_exact_ceiling():
    """--certificate exact with three models: each pair's ceiling is the pair's own exact
    bound (bit for bit), the bottleneck's is the smallest and says it is bilinear, the K-way
    design stays below it; a budget list is refused as for a pair."""
    rng = np.random.default_rng(12)
    n, d, E = 1500, 24, 3.0
    A = rng.standard_normal((n, d)) / math.sqrt(d)
    B = A + 0.01 * rng.standard_normal((n, d)) / math.sqrt(d)
    C = A + 0.012 * rng.standard_normal((n, d)) / math.sqrt(d)
    k = bound([A, B, C], E, certificate="exact")
    own = [bound(X, Y, E, certificate="exact").certificate for X, Y in ((A, B), (A, C), (B, C))]
    assert [p["bhattacharyya_max_bound"] for p in k.pairs] == [c["bhattacharyya_max_bound"] for c in own]
    assert [p["ceiling_method"] for p in k.pairs] == ["bilinear"] * 3
    c = k.certificate
    assert c["ceiling_method"] == "bilinear" and c["binding_pair"] == {"i": 0, "j": 1}
    assert c["bhattacharyya_max_bound"] == min(o["bhattacharyya_max_bound"] for o in own)
    assert bound([A, B, C], E).certificate["ceiling_method"] == "per_row"
    r = design([A, B, C], E, certificate="exact", starts=4)
    assert r.certificate["ceiling_method"] == "bilinear"
    assert r.bhattacharyya_distance <= r.certificate["bhattacharyya_max_bound"]
    with pytest.raises(InputError, match="one softmax pair at one budget"):
        design([A[:40], B[:40], C[:40]], energy="1,2", certificate="exact")


def test_k_models_say_which_pairs_have_no_exact_ceiling():
    """--certificate exact with a softcapped model: the bilinear ceiling covers exp links
    without biases only, so its two pairs keep their closed-form ceilings and a Note names
    each of them (a pair says so in certificate.note; the K models' certificate has no note);
    the plain pair gets its bilinear candidate and no note."""
    from bhtcli.errors import notes_to
    rng = np.random.default_rng(3)
    A, B, C = (rng.standard_normal((60, 4)) for _ in range(3))
    notes = []
    with notes_to(notes.append):
        k = bound([A, B, C], 1.0, certificate="exact", links=["softcap:3", "exp", "exp"])
    assert notes == [f"certificate exact, {p}: the bilinear ceiling covers exp links without "
                     "biases only" for p in ("M1 - M2", "M1 - M3")]
    with notes_to(notes.append):
        bound([A, B, C], 1.0, certificate="exact")
    assert len(notes) == 2


@pytest.mark.slow
@pytest.mark.parametrize("n", [100, 300])
def test_antipodal_pairs_have_a_zero_quartic_part(tmp_path, n):
    """B = -A exactly: every centred midpoint row g_i is 0, so K = 0 and Lanczos had no start
    (ARPACK 'starting vector is zero' at n > 64, a traceback and no JSON). The ceiling is the
    quadratic part, above the variance over a dense grid of the ball; the note says K = 0."""
    import json

    from click.testing import CliRunner

    from bhtcli.cli.main import cli
    rng = np.random.default_rng(17)
    A = rng.standard_normal((n, 2))
    for E in (0.01, 0.5, 2.0):
        r = check_bilinear(A, -A, E)
        assert r.quartic == 0 and r.attempts == 0 and r.eta == 1e-6
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, A)
    np.save(b, -A)
    for command in ("bound", "design"):
        out = CliRunner().invoke(cli, [command, str(a), str(b), "-E", "0.5", "--certificate", "exact", "--json"])
        assert out.exit_code == 0, out.output
        c = json.loads(out.stdout)["certificate"]
        assert c["ceilings"]["bilinear"] is not None and "K = 0" in c["note"]
