"""The sketched K-way search (bhtcli/search/bottleneck.py) against the full K-way search on
seeded mid-size cases, its pieces against direct computations, the schedule priced in the
subspace, and the K-way Python API against the CLI."""
import json

import numpy as np
import pytest

import bhtcli
from bhtcli import api
from bhtcli.cli.main import main
from bhtcli.errors import InputError
from bhtcli.models.kway import KModels, PairView, ReducedKModels, block_gram
from bhtcli.search.bottleneck import Subspace, pair_directions, sketch_bottleneck, use_kway_sketch
from kway_cases import quality_case


case = quality_case


@pytest.mark.slow
@pytest.mark.parametrize("seed,n,d,K,kind,E", [(1, 800, 48, 3, "noise", 4.0),
                                               (2, 800, 48, 4, "rows", 4.0),
                                               (3, 1200, 64, 3, "rows", 8.0)])
def test_sketch_reaches_the_full_search(seed, n, d, K, kind, E):
    models = case(seed, n, d, K, kind)
    full = api.design(models, energy=E, search_space="full")
    sk = api.design(models, energy=E, search_space="sketch")
    assert sk.solver["search_space"] == "sketch" and full.solver["search_space"] == "full"
    # within 0.1% of the full search's bottleneck, or above it
    assert sk.bhattacharyya_distance >= full.bhattacharyya_distance * (1 - 1e-3)
    assert np.linalg.norm(sk.query) <= E * (1 + 1e-12)
    # the reported bottleneck is the smallest pair at the query, recomputed independently
    D = [p["bhattacharyya_distance"] for p in sk.pairs]
    assert sk.bhattacharyya_distance == min(D)


@pytest.mark.slow
def test_float32_sketch_and_schedule_in_the_subspace():
    models = case(4, 900, 64, 3, "rows")
    full = api.design(models, energy=4.0, search_space="full", schedule=True)
    sk = api.design(models, energy=4.0, search_space="sketch", dtype="float32", schedule=True)
    assert sk.bhattacharyya_distance >= full.bhattacharyya_distance * (1 - 1e-3)
    s, f = sk.schedule, full.schedule
    # a schedule is never worse than its best single query, and its dual bound holds
    assert s["bhattacharyya_distance"] >= sk.bhattacharyya_distance * (1 - 1e-6)
    assert s["bhattacharyya_distance"] >= f["bhattacharyya_distance"] * (1 - 1e-3)
    assert s["dual_bound"] >= s["bhattacharyya_distance"] * (1 - 1e-4)
    assert abs(sum(s["weights"]) - 1) < 1e-12


def test_pair_view_rows_and_norms_match_the_pair():
    rng = np.random.default_rng(0)
    models = [rng.standard_normal((50, 6)) for _ in range(4)]
    km = KModels(models)
    gram = block_gram(km)
    for i, j in km.pairs:
        v = PairView(km, i, j, gram)
        A, B = models[i] - models[i].mean(0), models[j] - models[j].mean(0)
        C, G = 0.5 * (A + B), A - B
        rows = np.array([3, 0, 49])
        assert np.allclose(v.C[rows], C[rows]) and np.allclose(v.G[rows], G[rows])
        assert np.allclose(v.cache["row_norms"][0], (C * C).sum(1)) and np.allclose(v.cache["row_norms"][1], (G * G).sum(1))
        assert np.allclose(v.cache["row_dots"], (C * G).sum(1))


def test_subspace_values_are_the_full_values_and_the_lift_counts_passes():
    models = case(5, 300, 40, 3, "noise")
    km = KModels(models)
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((40, 7)))[0]
    space = Subspace(km, Q)
    assert km.passes == 1 and isinstance(space.reduced, ReducedKModels)
    Y = np.random.default_rng(2).standard_normal((7, 5))
    assert np.allclose(space.reduced.pair_distances(Y), km.pair_distances(Q @ Y), rtol=1e-10)
    assert km.passes == 2           # the subspace's products are not passes; the full one is
    grown = space.grow(np.random.default_rng(3).standard_normal((40, 3)))
    assert grown.shape[1] == 3 and km.passes == 3       # one more wide product
    assert np.allclose(space.Q.T @ space.Q, np.eye(10), atol=1e-10)


def test_pairs_and_k_models_lift_under_one_set_of_rules():
    """One lift driver and one set of rules (docs/benchmarks.md, "One set of lift rules"): the
    float64 KKT target 1e-7, 100 climbing iterations after a growth, 200 polishing ones,
    every survivor's gradient. Only how a float32 lift ends is the family's: a pair stops at
    a residual of 1e-4 or where the rise left is below float32's resolution (growth_gain), the
    K models at 1e-3 after a float64 finish; each loses with the other's ending."""
    from bhtcli.search import bottleneck, sketch
    assert Subspace.lift is sketch.Subspace.lift
    assert (Subspace.finish, Subspace.float32_kkt) == (True, 1e-3)
    assert (sketch.Subspace.finish, sketch.Subspace.float32_kkt) == (False, 1e-4)
    assert (sketch.SKETCH_KKT[0], sketch.LIFT_CLIMB, sketch.LIFT_POLISH) == (1e-7, 100, 200)
    assert not any(hasattr(m, name) for m in (sketch, bottleneck)
                   for name in ("LiftRules", "PAIR_LIFT", "MODELS_LIFT", "LIFT_KKT"))


def test_the_size_rule():
    small = KModels([np.zeros((10, 4)), np.eye(10, 4)])
    assert not use_kway_sketch(small, "auto", None) and use_kway_sketch(small, "sketch", None)
    assert not use_kway_sketch(small, "full", None)
    with pytest.raises(InputError, match="search_space"):
        api.design([np.eye(6, 3), np.ones((6, 3)), np.arange(18.0).reshape(6, 3)], energy=1.0,
                   search_space="sketch", starts=8)


def test_models_with_readouts_are_searched_in_full_d():
    """The sketch's screens model plain softmax pairs: at the sketch's sizes "auto" keeps
    models with read-outs in full d (the rule is the search's, as a pair's use_sketch asks for
    exp links), "sketch" is refused by the search, and bhtcli.api names the option before it
    reads a model (the paths here do not exist)."""
    from types import SimpleNamespace
    plain = SimpleNamespace(n=50_000, d=1_024, readouts=None)
    linked = SimpleNamespace(n=50_000, d=1_024, readouts=object())
    assert use_kway_sketch(plain, "auto", None) and not use_kway_sketch(linked, "auto", None)
    with pytest.raises(ValueError, match="plain softmax"):
        use_kway_sketch(linked, "sketch", None)
    with pytest.raises(InputError, match="search_space sketch models plain softmax") as e:
        api.design(["no-such-1.npy", "no-such-2.npy", "no-such-3.npy"], energy=1.0,
                   links="exp,softcap:2,exp", search_space="sketch")
    assert "no-such" not in str(e.value)


@pytest.mark.slow
def test_sketch_result_is_a_kkt_point_of_the_bottleneck():
    models = case(6, 600, 48, 4, "noise")
    km = KModels(models)
    r, _ = sketch_bottleneck(km, 3.0, directions=pair_directions(km, 4, 0))
    assert r.kkt_residual < 1e-3 and r.search_space == "sketch"
    assert r.value == pytest.approx(km.pair_distances(r.x).min(), rel=1e-12)


@pytest.mark.slow
def test_python_api_equals_the_cli(capsys, tmp_path):
    rng = np.random.default_rng(8)
    paths = []
    for k in range(3):
        p = str(tmp_path / f"m{k}.npy")
        np.save(p, rng.standard_normal((30, 5)))
        paths.append(p)
    r = bhtcli.design(paths, energy=1.5)
    with pytest.raises(SystemExit) as exc:
        main(["design", *paths, "-E", "1.5", "--json", "-q"])
    assert exc.value.code == 0
    got = json.loads(capsys.readouterr().out)
    ref = r.to_dict()
    for d in (got, ref):        # timings differ from run to run; everything else is equal
        for k in ("seconds", "search_seconds", "pass_seconds"):
            d["solver"].pop(k)
    assert got == ref
    assert got["models"] == paths and {"i", "j"} == set(got["bottleneck"])


def test_leverage_models_k_way_is_one_clear_error(tmp_path):
    models = [np.abs(np.random.default_rng(k).standard_normal((8, 3))) + 0.1 for k in range(3)]
    for call in (lambda: api.design(models, energy=2.0, model="leverage", floor=0.5),
                 lambda: api.bound(models, energy=2.0, model="leverage", floor=0.5),
                 lambda: api.simulate(models, energy=2.0, model="leverage", floor=0.5)):
        with pytest.raises(InputError, match="leverage compares two models at a time"):
            call()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [1, 2, 16, 17, 32])
def test_subspace_products_keep_their_values_and_row_layout(dtype, k):
    """The subspace's forward products (either layout, models/kway.py FORWARD_ROWS_MAX_K)
    equal the float64 product to the stored precision, and hand over each column's scores
    as one contiguous row (the transpose of a C-ordered k x (K n) array)."""
    rng = np.random.default_rng(k)
    SQ = rng.standard_normal((3 * 500, 12)).astype(dtype)
    X = rng.standard_normal((12, k))
    Z = ReducedKModels(SQ, 3, 500).product(X, out_dtype=SQ.dtype)
    ref = SQ.astype(np.float64) @ X.astype(SQ.dtype).astype(np.float64)
    tol = 1e-5 if dtype == "float32" else 1e-13
    assert Z.shape == ref.shape and Z.dtype == SQ.dtype and Z.T.flags.c_contiguous
    assert np.max(np.abs(Z - ref)) <= tol * np.max(np.abs(ref))
