"""Chernoff's adaptive rule of K >= 3 models with read-outs (a link and a bias each: docs/kway.md,
"Links, biases and softcaps"), against references written here with plain numpy from the
definition p_k = softmax(phi_k(M_k x + b_k)), phi = s (exp) or C tanh(s / C) (softcap:C):
each KL query against a brute-force polar grid of the disc, the adaptive block's exponents
against KL of those laws at its queries, and exp links without biases against the plain run."""
import json

import numpy as np
import pytest

from bhtcli.commands.sequential import kl_queries
from bhtcli.models.kway_readout import make_kreadouts
from cli_run import run

LINKS = ["softcap:1.5", "exp", "softcap:3"]


def _phi(link: str, s):
    if link == "exp":
        return s
    C = float(link.split(":")[1])
    return C * np.tanh(s / C)


def _log_laws(Ms, links, biases, X):
    """Each model's log-probabilities at every column of X (n x k): numpy log-softmax of
    phi_k(M_k x + b_k)."""
    out = []
    for M, link, b in zip(Ms, links, biases):
        u = _phi(link, M @ X + (0.0 if b is None else b[:, None]))
        u = u - u.max(axis=0)
        out.append(u - np.log(np.exp(u).sum(axis=0)))
    return out


def _kl(L, k, j):
    """KL(P_k || P_j) at every column, from the log-probabilities L."""
    return np.sum(np.exp(L[k]) * (L[k] - L[j]), axis=0)


def _case(seed=4, n=6, d=2):
    rng = np.random.default_rng(seed)
    Ms = [1.5 * rng.standard_normal((n, d)) for _ in range(3)]
    return Ms, [None, rng.standard_normal(n), 0.7 * rng.standard_normal(n)]


def _disc(E, radii=500, angles=2000):
    r = np.linspace(0.0, E, radii)
    t = np.linspace(0.0, 2 * np.pi, angles, endpoint=False)
    R, T = np.meshgrid(r, t)
    return np.stack([(R * np.cos(T)).ravel(), (R * np.sin(T)).ravel()])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [4, 7])
def test_each_kl_query_is_the_grid_maximum_of_its_ordered_pair(seed):
    """kl_queries gives, for each ordered pair (k, j) in the order (0,1), (0,2), (1,0), ...,
    a query of the disc ||x|| <= E at which KL(P_k || P_j) under the two models' own links and
    biases reaches the maximum over a 500 x 2000 polar grid (a pair k > j read out as if it
    were (j, k) misses it)."""
    Ms, biases = _case(seed)
    E = 2.5
    readouts = make_kreadouts(6, LINKS, biases)
    X = _disc(E)
    grid = _log_laws(Ms, LINKS, biases, X)
    found = kl_queries(Ms, E, None, 0, readouts=readouts)
    pairs = [(k, j) for k in range(3) for j in range(3) if j != k]
    assert len(found) == len(pairs)
    for x, (k, j) in zip(found, pairs):
        x = np.asarray(x)
        assert np.linalg.norm(x) <= E * (1 + 1e-9)
        at = _kl(_log_laws(Ms, LINKS, biases, x[:, None]), k, j)[0]
        best = _kl(grid, k, j).max()
        assert at >= best * (1 - 1e-6), (k, j, at, best)
        assert at <= best * (1 + 1e-3), (k, j, at, best)      # the grid's resolution


def _files(tmp_path, Ms, biases):
    paths = []
    for k, M in enumerate(Ms):
        paths.append(str(tmp_path / f"M{k + 1}.npy"))
        np.save(paths[-1], M)
    bias_args = []
    for k, b in enumerate(biases):
        if b is None:
            bias_args.append("")
        else:
            bias_args.append(str(tmp_path / f"b{k + 1}.npy"))
            np.save(bias_args[-1], b)
    return paths, ",".join(bias_args)


def _strip(d):
    d.pop("run", None), d.pop("seconds", None)
    return d


@pytest.mark.slow
def test_cli_adaptive_of_three_models_with_links_uses_the_readout_laws(tmp_path, capsys):
    """bht simulate M1 M2 M3 --links --biases --policy adaptive: the adaptive block is there, its
    exponents are those of its mixes under KL of numpy's read-out laws at its queries (so the
    queries' log-probabilities are the read-outs'), each query after the designed one maximises
    KL(P_k || P_j) of some ordered pair on a polar grid of the disc, and its errors meet alpha as the matrix
    SPRT guarantees; the text table names the links and shows the adaptive rule."""
    Ms, biases = _case()
    paths, bias_arg = _files(tmp_path, Ms, biases)
    args = ("simulate", *paths, "-E", "2.5", "--links", ",".join(LINKS), "--biases", bias_arg,
            "--trials", "3000", "--seed", "5")
    code, out, err = run(capsys, *args, "--policy", "adaptive", "--json", "-q")
    assert code == 0, err
    r = json.loads(out)
    a = r["adaptive"]
    assert r["readout"] == {"links": LINKS, "biases": [False, True, True]}
    Q = np.array(a["queries"])
    assert np.all(np.linalg.norm(Q, axis=1) <= 2.5 * (1 + 1e-9))
    L = _log_laws(Ms, LINKS, biases, Q.T)                       # per model: n x queries
    mixes = np.array(a["mixes"])
    for k in range(3):
        value = min(float(mixes[k] @ _kl(L, k, j)) for j in range(3) if j != k)
        assert value == pytest.approx(a["exponents"][k], rel=1e-7, abs=1e-12), k
    grid = _log_laws(Ms, LINKS, biases, _disc(2.5, 300, 1200))
    best = {(k, j): _kl(grid, k, j).max() for k in range(3) for j in range(3) if j != k}
    for q in range(1, len(Q)):            # the KL queries: each a maximiser under the read-outs
        assert max(_kl(L, k, j)[q] / top for (k, j), top in best.items()) >= 1 - 1e-6, q
    assert max(a["error"]) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 3000)
    assert a["undecided"] == 0
    code, out, err = run(capsys, *args, "--policy", "all", "--trials", "500")
    assert code == 0, err
    assert "links" in out and "1: softcap:1.5" in out and "Chernoff's adaptive rule" in out
    assert "saving vs the SPRT" in out


@pytest.mark.slow
def test_exp_links_without_biases_are_the_plain_run_bit_for_bit(tmp_path, capsys):
    Ms, _ = _case(seed=9)
    paths, _ = _files(tmp_path, Ms, [None] * 3)
    args = ("simulate", *paths, "-E", "2", "--trials", "1000", "--seed", "3", "--json", "-q")
    code, plain, err = run(capsys, *args)
    assert code == 0, err
    code, same, err = run(capsys, *args, "--links", "exp,exp,exp", "--biases", ",,")
    assert code == 0, err
    plain, same = _strip(json.loads(plain)), _strip(json.loads(same))
    assert plain["adaptive"] is not None and "readout" not in same
    assert plain == same
