"""design --candidates, rank and design --subspace: against brute force and on bad input."""
import csv
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from bhtcli import design
from bhtcli.api import rank


def design_candidates(A, B, H, energy=None, **options):
    return design(A, B, energy, candidates=H, **options)
from bhtcli.errors import InputError
from conftest import disk_points

from test_cli import run


def brute_h2(A, B, H, bias_a=None, bias_b=None):
    """H^2 at every row of H from plain probabilities (independent of bhtcli)."""
    sa, sb = A @ H.T, B @ H.T
    if bias_a is not None:
        sa = sa + bias_a[:, None]
    if bias_b is not None:
        sb = sb + bias_b[:, None]
    p, q = softmax(sa, axis=0), softmax(sb, axis=0)
    return 1 - np.sum(np.sqrt(p * q), axis=0)


def brute_leverage_h2(A, B, S):
    """H^2 of the leverage-score laws p_i = diag(P)_i / rank, P the projection onto col(S^-1 A)."""
    out = []
    for s in S:
        if np.any(s == 0):
            out.append(np.nan)                    # not a weight vector
            continue
        laws = []
        for M in (A, B):
            X = M / s[:, None]
            U, sv, _ = np.linalg.svd(X, full_matrices=False)
            r = int(np.sum(sv > 1e-10 * sv[0]))
            h = np.sum(U[:, :r] ** 2, axis=1)
            laws.append(h / r)
        out.append(1 - np.sum(np.sqrt(laws[0] * laws[1])))
    return np.array(out)


def pair(seed, n=6, d=3, scale=0.5):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    return A, A + scale * rng.standard_normal((n, d)), rng


# ---------------------------------------------------------------- ranking vs brute force
@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7), d=st.integers(1, 4), m=st.integers(1, 30),
       top=st.integers(1, 12), with_energy=st.booleans())
def test_rank_matches_brute_force(seed, n, d, m, top, with_energy):
    A, B, rng = pair(seed, n, d)
    H = rng.standard_normal((m, d)) * rng.uniform(0.1, 2.0, (m, 1))
    E = float(np.median(np.linalg.norm(H, axis=1))) if with_energy else None
    r = rank(A, B, H, E, top=top, block_rows=int(rng.integers(1, 8)))
    h2 = brute_h2(A, B, H)
    ok = np.ones(m, bool) if E is None else np.linalg.norm(H, axis=1) <= E * (1 + 1e-9)
    assert r.count == m and r.eligible == int(ok.sum())
    want = np.flatnonzero(ok)[np.argsort(-h2[ok], kind="stable")][:top]
    got = [e["index"] for e in r.top]
    assert len(got) == len(want)
    # same values in the same order (indices may swap only between equal H^2)
    np.testing.assert_allclose([e["hellinger_squared"] for e in r.top], h2[want], rtol=1e-9, atol=1e-15)
    assert all(ok[i] for i in got)
    np.testing.assert_allclose(h2[got], h2[want], rtol=1e-9, atol=1e-15)
    assert r.best_index == got[0]
    for e in r.top:
        np.testing.assert_allclose(e["query_norm"], np.linalg.norm(H[e["index"]]), rtol=1e-12)


def test_streaming_across_block_boundaries(tmp_path):
    A, B, rng = pair(3, n=9, d=4)
    H = rng.standard_normal((1001, 4))            # 1001 = 15 * 64 + 41: the last block is partial
    np.save(tmp_path / "H.npy", H)
    whole = rank(A, B, H, 2.0, top=20, block_rows=1001, out=tmp_path / "a.jsonl")
    blocked = rank(A, B, str(tmp_path / "H.npy"), 2.0, top=20, block_rows=64, out=tmp_path / "b.jsonl")
    one = rank(A, B, H, 2.0, top=20, block_rows=1, out=tmp_path / "c.jsonl")
    assert [e["index"] for e in whole.top] == [e["index"] for e in blocked.top] == [e["index"] for e in one.top]
    rows = [[json.loads(line) for line in open(tmp_path / f"{k}.jsonl")] for k in "abc"]
    assert len(rows[0]) == len(rows[1]) == len(rows[2]) == 1001
    h2 = brute_h2(A, B, H)
    ok = np.linalg.norm(H, axis=1) <= 2.0
    for recs in rows:
        assert [rec["index"] for rec in recs] == list(range(1001))
        assert [rec["eligible"] for rec in recs] == ok.tolist()
        got = np.array([np.nan if rec["hellinger_squared"] is None else rec["hellinger_squared"] for rec in recs])
        np.testing.assert_allclose(got[ok], h2[ok], rtol=1e-9)
        assert np.isnan(got[~ok]).all()
    assert whole.top[0]["index"] == int(np.flatnonzero(ok)[np.argmax(h2[ok])])


def test_ineligible_rows_are_counted_and_never_chosen():
    A, B, rng = pair(5)
    H = rng.standard_normal((40, 3))
    h2 = brute_h2(A, B, H)
    norms = np.linalg.norm(H, axis=1)
    j = int(np.argmax(h2))                        # the best row overall, made ineligible
    E = 0.99 * norms[j]
    r = design_candidates(A, B, H, E, starts=8)
    c = r.candidates
    ok = norms <= E
    assert c["count"] == 40 and c["eligible"] == int(ok.sum()) > 0
    assert c["ineligible"] == 40 - c["eligible"] and "||x|| > E" in c["why_ineligible"]
    assert j not in [e["index"] for e in c["top"]]
    assert c["best_index"] == int(np.flatnonzero(ok)[np.argmax(h2[ok])])


def test_design_candidates_report_and_fraction():
    A, B, rng = pair(11, n=8, d=2, scale=0.8)
    E = 1.5
    opt = design(A, B, E, starts=16)
    H = rng.standard_normal((200, 2))
    H *= (E * rng.uniform(0.2, 1.0, (200, 1))) / np.linalg.norm(H, axis=1, keepdims=True)
    r = design_candidates(A, B, H, E, starts=16)
    c = r.candidates
    best = c["best_index"]
    np.testing.assert_allclose(r.query, H[best])
    np.testing.assert_allclose(r.hellinger_squared, brute_h2(A, B, H)[best], rtol=1e-9)
    assert r.samples["predicted"] == c["top"][0]["predicted"]
    np.testing.assert_allclose(c["optimum"]["hellinger_squared"], opt.hellinger_squared, rtol=1e-6)
    np.testing.assert_allclose(c["reachable_fraction"], r.hellinger_squared / opt.hellinger_squared, rtol=1e-6)
    assert 0 < c["reachable_fraction"] < 1 and c["radius"] == E and c["radius_from"] == "energy"
    # the optimum itself among the candidates: fraction 1
    H2 = np.vstack([H, np.asarray(opt.query)])
    r2 = design_candidates(A, B, H2, E, starts=16)
    assert r2.candidates["best_index"] == 200
    np.testing.assert_allclose(r2.candidates["reachable_fraction"], 1.0, rtol=1e-7)


def test_without_energy_the_radius_is_the_largest_norm():
    A, B, rng = pair(2)
    H = rng.standard_normal((30, 3))
    r = design_candidates(A, B, H, None, starts=8)
    c = r.candidates
    assert c["eligible"] == 30 and c["radius"] == pytest.approx(np.linalg.norm(H, axis=1).max())
    assert c["radius_from"] == "largest eligible candidate norm"
    assert c["optimum"]["hellinger_squared"] >= c["top"][0]["hellinger_squared"]


@pytest.mark.slow
def test_float32_products_report_float64_numbers():
    A, B, rng = pair(8, n=30, d=5, scale=0.05)
    H = rng.standard_normal((300, 5))
    r64 = rank(A, B, H, top=10)
    r32 = rank(A, B, H.astype(np.float32), top=10, dtype="float32")
    assert r32.dtype == "float32"
    h2 = brute_h2(A, B, H.astype(np.float32).astype(np.float64))
    want = np.argsort(-h2)[:10]
    np.testing.assert_allclose([e["hellinger_squared"] for e in r32.top], h2[want], rtol=1e-9)
    assert [e["index"] for e in r32.top] == [e["index"] for e in r64.top]


def test_biases_and_links_are_respected():
    A, B, rng = pair(4, n=6, d=2)
    ba, bb = rng.standard_normal(6), rng.standard_normal(6)
    H = rng.standard_normal((50, 2))
    r = rank(A, B, H, top=5, bias_a=ba, bias_b=bb)
    h2 = brute_h2(A, B, H, ba, bb)
    np.testing.assert_allclose([e["hellinger_squared"] for e in r.top], np.sort(h2)[::-1][:5], rtol=1e-9)
    # poly:2 link on both: p_i ∝ s_i^2
    r2 = rank(A, B, H, top=3, link_a="poly:2", link_b="poly:2")
    sa, sb = (A @ H.T) ** 2, (B @ H.T) ** 2
    p, q = sa / sa.sum(0), sb / sb.sum(0)
    h2p = 1 - np.sum(np.sqrt(p * q), axis=0)
    np.testing.assert_allclose([e["hellinger_squared"] for e in r2.top], np.sort(h2p)[::-1][:3], rtol=1e-7)


@pytest.mark.slow
def test_leverage_candidates_against_brute_force():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((7, 2))
    B = A + 0.3 * rng.standard_normal((7, 2))
    S = rng.uniform(1.0, 2.0, (25, 7)) * rng.choice([-1, 1], (25, 7))
    S[3, 2] = 0.0                               # a zero entry: not a weight vector
    S[4] *= 3.0                                  # outside the box
    r = design_candidates(A, B, S, 4.0, model="leverage", floor=1.0, starts=3, top=5)
    h2 = brute_leverage_h2(A, B, S)
    c = r.candidates
    assert c["eligible"] == 23 and c["ineligible"] == 2
    ok = np.ones(25, bool)
    ok[[3, 4]] = False
    want = np.flatnonzero(ok)[np.argsort(-h2[ok])][:5]
    assert [e["index"] for e in c["top"]] == want.tolist()
    np.testing.assert_allclose([e["hellinger_squared"] for e in c["top"]], h2[want], rtol=1e-8)
    assert r.model == "leverage" and r.floor == 1.0
    assert 0 < c["reachable_fraction"] <= 1


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(3, 7), m=st.integers(1, 12), top=st.integers(1, 6))
def test_leverage_rank_matches_brute_force(seed, n, m, top):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, 2))
    B = A + 0.4 * rng.standard_normal((n, 2))
    S = rng.uniform(0.5, 2.0, (m, n))
    r = rank(A, B, S, model="leverage", top=top)
    h2 = brute_leverage_h2(A, B, S)
    want = np.argsort(-h2, kind="stable")[:top]
    np.testing.assert_allclose([e["hellinger_squared"] for e in r.top], h2[want], rtol=1e-7, atol=1e-13)
    assert r.energy is None and r.floor is None and r.eligible == m


@pytest.mark.slow
def test_half_precision_safetensors_candidates(tmp_path):
    from safetensors.numpy import save_file
    A, B, rng = pair(12, n=10, d=4)
    H = rng.standard_normal((33, 4)).astype(np.float16)
    save_file({"hidden": H}, str(tmp_path / "H.safetensors"))
    r = rank(A, B, f"{tmp_path / 'H.safetensors'}:hidden", top=33)
    h2 = brute_h2(A, B, H.astype(np.float64))
    np.testing.assert_allclose([e["hellinger_squared"] for e in r.top], np.sort(h2)[::-1], rtol=1e-9)


def test_cli_design_candidates_out_writes_the_best_row(capsys, tmp_path):
    A, B, rng = pair(13)
    H = rng.standard_normal((20, 3))
    for k, v in (("A", A), ("B", B), ("H", H)):
        np.save(tmp_path / f"{k}.npy", v)
    code, out, _ = run(capsys, "design", str(tmp_path / "A.npy"), str(tmp_path / "B.npy"), "--candidates",
                       str(tmp_path / "H.npy"), "--out", str(tmp_path / "x.npy"), "--json", "--starts", "4")
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), H[json.loads(out)["candidates"]["best_index"]])


# ---------------------------------------------------------------- subspace
@pytest.mark.parametrize("r", [1, 2])
def test_subspace_against_a_grid(r):
    A, B, rng = pair(21 + r, n=8, d=4, scale=0.7)
    V = rng.standard_normal((4, r))
    E = 1.7
    res = design(A, B, E, subspace=V, starts=16)
    Q, _ = np.linalg.qr(V)
    Z = disk_points(E, r)                         # grid of the r-ball, mapped into R^4
    h2 = brute_h2(A, B, (Q @ Z).T)
    assert res.subspace_rank == r and res.d == 4 and len(res.query) == 4
    x = np.asarray(res.query)
    # x lies in the span of V and within the budget
    np.testing.assert_allclose(Q @ (Q.T @ x), x, atol=1e-10)
    assert np.linalg.norm(x) <= E * (1 + 1e-9)
    assert res.hellinger_squared >= h2.max() * (1 - 1e-4)
    assert res.hellinger_squared <= h2.max() * (1 + 1e-3) + 1e-12
    np.testing.assert_allclose(res.hellinger_squared, brute_h2(A, B, x[None])[0], rtol=1e-9)


def test_subspace_spanning_everything_is_the_full_design():
    A, B, rng = pair(31, n=10, d=3, scale=0.6)
    V = rng.standard_normal((3, 3))               # invertible: spans R^3
    full = design(A, B, 1.2, starts=24)
    sub = design(A, B, 1.2, subspace=V, starts=24)
    np.testing.assert_allclose(sub.hellinger_squared, full.hellinger_squared, rtol=1e-7)
    assert sub.samples["predicted"] == full.samples["predicted"]


def test_subspace_inside_which_the_models_agree():
    A, B, rng = pair(1, n=5, d=3)
    B = A.copy()
    B[:, 2] += rng.standard_normal(5)             # differ only along e_3
    res = design(A, B, 1.0, subspace=np.eye(3)[:, :2], starts=4)
    assert not res.distinguishable and "subspace" in res.note


# ---------------------------------------------------------------- the CLI
@pytest.fixture
def files(tmp_path):
    A, B, rng = pair(9, n=12, d=3)
    H = rng.standard_normal((57, 3))
    paths = {k: tmp_path / f"{k}.npy" for k in ("A", "B", "H")}
    np.save(paths["A"], A)
    np.save(paths["B"], B)
    np.save(paths["H"], H)
    names = tmp_path / "names.txt"
    names.write_text("".join(f"prompt number {i}\n" for i in range(57)))
    return {k: str(v) for k, v in paths.items()} | {"names": str(names), "dir": tmp_path,
                                                     "arrays": (A, B, H)}


def test_cli_design_candidates_json(capsys, files):
    code, out, err = run(capsys, "design", files["A"], files["B"], "--candidates", files["H"],
                         "--energy", "1.5", "--names", files["names"], "--top", "4", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    c = r["candidates"]
    assert set(c) >= {"count", "eligible", "best_index", "top", "reachable_fraction"}
    assert len(c["top"]) == 4 and c["count"] == 57
    assert all(set(e) >= {"index", "hellinger_squared", "predicted", "query_norm", "name"} for e in c["top"])
    assert c["best_name"] == f"prompt number {c['best_index']}"
    assert r["subspace_rank"] is None
    A, B, H = files["arrays"]
    np.testing.assert_allclose(r["query"], H[c["best_index"]])


def test_cli_design_candidates_table(capsys, files):
    code, out, _ = run(capsys, "design", files["A"], files["B"], "--candidates", files["H"],
                       "--names", files["names"])
    assert code == 0
    assert "of your 57 candidates reaches" in out and "Top 10 candidates" in out
    assert "prompt number" in out


def test_cli_rank_writes_every_row(capsys, files):
    out_csv = files["dir"] / "s.csv"
    code, out, _ = run(capsys, "rank", files["A"], files["B"], files["H"], "--energy", "1.2",
                       "--out", str(out_csv), "--names", files["names"], "--json")
    assert code == 0
    r = json.loads(out)
    rows = list(csv.DictReader(open(out_csv)))
    assert len(rows) == 57 and rows[5]["name"] == "prompt number 5"
    A, B, H = files["arrays"]
    h2 = brute_h2(A, B, H)
    for row in rows:
        i = int(row["index"])
        if row["eligible"] == "true":
            np.testing.assert_allclose(float(row["hellinger_squared"]), h2[i], rtol=1e-9)
        else:
            assert row["hellinger_squared"] == "" and np.linalg.norm(H[i]) > 1.2
    assert r["best_index"] == max((int(x["index"]) for x in rows if x["eligible"] == "true"),
                                  key=lambda i: h2[i])
    assert [x["predicted"] != "" for x in rows].count(True) == len(r["top"])


def test_cli_subspace(capsys, files, tmp_path):
    np.save(tmp_path / "V.npy", np.array([[1.0], [1.0], [0.0]]))
    code, out, _ = run(capsys, "design", files["A"], files["B"], "--subspace", str(tmp_path / "V.npy"),
                       "--energy", "1", "--json")
    r = json.loads(out)
    assert code == 0 and r["subspace_rank"] == 1
    assert abs(r["query"][0] - r["query"][1]) < 1e-9 and abs(r["query"][2]) < 1e-12


def _bad_inputs(tmp_path):
    rng = np.random.default_rng(0)
    saves = {"H4": rng.standard_normal((5, 4)), "H0": np.zeros((0, 3)), "Hbig": 10 + rng.random((6, 3)),
             "Vwide": rng.standard_normal((3, 4)), "Vdep": np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]]),
             "Vrows": rng.standard_normal((2, 1))}
    Hnan = rng.standard_normal((9, 3))
    Hnan[6, 1] = np.nan
    saves["Hnan"] = Hnan
    for k, v in saves.items():
        np.save(tmp_path / f"{k}.npy", v)
    (tmp_path / "short.txt").write_text("a\nb\n")
    return {k: str(tmp_path / f"{k}.npy") for k in saves} | {"short": str(tmp_path / "short.txt")}


BAD = [
    (["design", "{A}", "{B}", "--candidates", "{H4}"], "has 4 columns but each candidate must have 3"),
    (["design", "{A}", "{B}", "--candidates", "{H0}"], "is empty"),
    (["design", "{A}", "{B}", "--candidates", "{Hbig}", "--energy", "1"], "no row of --candidates"),
    (["design", "{A}", "{B}", "--candidates", "{Hnan}"], "row 6 (0-based) contains NaN"),
    (["rank", "{A}", "{B}", "{Hnan}"], "row 6 (0-based) contains NaN"),
    (["design", "{A}", "{B}", "--subspace", "{Vwide}", "--energy", "1"], "4 columns but only 3 rows"),
    (["design", "{A}", "{B}", "--subspace", "{Vdep}", "--energy", "1"], "has rank 1 but 2 columns"),
    (["design", "{A}", "{B}", "--subspace", "{Vrows}", "--energy", "1"], "has 2 rows but the models"),
    (["design", "{A}", "{B}", "--candidates", "{H}", "--subspace", "{Vdep}", "--energy", "1"],
     "do not go together"),
    (["design", "{A}", "{B}", "--candidates", "{H}", "--top", "0"], "--top must be a whole number >= 1"),
    (["rank", "{A}", "{B}", "{H}", "--top", "-2"], "--top must be a whole number >= 1"),
    (["design", "{A}", "{B}", "--candidates", "{H}", "--names", "{short}"], "has 2 lines but there are 57"),
    (["rank", "{A}", "{B}", "{H}", "--out", "{dir}/s.txt"], "*.jsonl"),
    (["design", "{A}", "{B}", "--names", "{short}", "--energy", "1"], "--names labels the rows"),
    (["design", "{A}", "{B}"], "Missing option '--energy'"),
    (["bound", "{A}", "{B}"], "Missing option '--energy'"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_cli_bad_input_is_one_error_line(capsys, files, tmp_path, args, message):
    paths = _bad_inputs(tmp_path) | {k: files[k] for k in ("A", "B", "H")} | {"dir": str(files["dir"])}
    code, out, err = run(capsys, *[a.format(**paths) for a in args])
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1 and message in err, err


def test_library_rejects_zero_candidates():
    A, B, _ = pair(0)
    with pytest.raises(InputError, match="zero vector"):
        design_candidates(A, B, np.zeros((3, 3)), None)
