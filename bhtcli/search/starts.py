"""Starting points of the full search for the query x (||x|| <= E) that maximises D(x).

The landscape is multimodal and the maximiser can be inside the ball (docs/maths.md §5), so
the starts mix: the top right singular vectors of the row-centred A - B (the small-budget
answer) with both signs at radius E and E/2; a quarter screened from row-based directions (one
dominant row, x ~ c_i +- t g_i, or two, x ~ g_i - g_j; one forward pass scores them); two-row
swaps pre-scored against the bulk of the rows; the rest seeded random points on the sphere and
inside the ball. The climb itself is in ascent.py.
"""
from __future__ import annotations

import math

import numpy as np

from bhtcli.maths.subspaces import orthonormalise, top_right_singular_vectors
from bhtcli.models.softmax import SoftmaxPair, block_product

from bhtcli.settings import DEFAULT_STARTS  # noqa: E402,F401  (the first round's size)


def spectral_directions(pair: SoftmaxPair, r: int, seed: int, power: int = 3) -> np.ndarray:
    """Top-r right singular vectors of the row-centred A - B (columns, unit norm); with
    non-exp links, of the stacked [(A+B)/2; A-B], since the scores themselves matter there
    (A against A with a different link has A - B = 0)."""
    cache = pair.cache.get_or_build("spectral", dict)
    G = pair.G if pair.readout.exp_links else pair.K
    if G.shape[0] * G.shape[1] <= 4_000_000:
        # exact: one decomposition serves every r (up to EXACT_SPECTRAL), seed and power
        if "exact" not in cache:
            cache["exact"] = _exact_spectral(G)
        return cache["exact"][:, :min(r, G.shape[1], G.shape[0])].copy()
    key = (r, seed, power)
    if key not in cache:          # every search on the pair asks again: computed once
        cache[key] = _spectral(pair, r, seed, power)
    return cache[key].copy()


EXACT_SPECTRAL = 32    # directions kept by the exact decomposition (callers ask for <= 8)


def _exact_spectral(G: np.ndarray) -> np.ndarray:
    """The top EXACT_SPECTRAL right singular vectors of G (columns): from the d x d Gram matrix
    where d <= n (one product and a small eigendecomposition; an SVD of the tall G makes O(d)
    calls into the threaded BLAS, each slow on a loaded machine: bhtcli.maths.subspaces)."""
    n, d = G.shape
    if d <= n:
        return top_right_singular_vectors(G, min(EXACT_SPECTRAL, d))
    vt = np.linalg.svd(np.asarray(G, dtype=np.float64), full_matrices=False)[2]
    return vt[:EXACT_SPECTRAL].T.copy()


def _spectral(pair: SoftmaxPair, r: int, seed: int, power: int) -> np.ndarray:
    G = pair.G if pair.readout.exp_links else pair.K
    n, d = G.shape
    r = min(r, d, n)
    Q, Y = range_finder(G, r + 6, seed, power)
    pair.passes += 2 * power + 1
    return Q @ top_right_singular_vectors(Y, r)


def range_finder(M: np.ndarray, width: int, seed: int, power: int):
    """(Q, M Q): an orthonormal d x `width` basis Q of M's dominant right singular subspace by
    randomised subspace iteration (seed + 7919; `power` rounds of two block products with M),
    and the product M Q (one more): 2 power + 1 passes over M, for pairs and K models alike."""
    rng = np.random.default_rng(seed + 7919)
    Q = orthonormalise(rng.standard_normal((M.shape[1], width)))
    for _ in range(power):
        Q = orthonormalise(_matmul(M.T, _matmul(M, Q)))
    return Q, _matmul(M, Q)


def _matmul(M: np.ndarray, X: np.ndarray) -> np.ndarray:
    """M @ X in M's precision (a float32 M is never up-cast as a whole), float64 result."""
    return block_product(M, X)


def row_directions(pair: SoftmaxPair, pool: int) -> np.ndarray:
    """Candidate unit directions built from single rows and pairs of rows.

    Typical optima of D are of two kinds: one row dominates both models with different
    weights (x ~ c_i +- t g_i, for rows with a large midpoint c_i), or one row dominates P_A
    and another P_B (x ~ g_i - g_j tilted towards c_i + c_j). About `pool` candidates in all.
    """
    n = pair.n
    if n < 2:
        return np.zeros((pair.d, 0))
    C, G = pair.C, pair.G
    def unit(M):
        M = np.asarray(M, dtype=np.float64)
        return M / np.maximum(np.linalg.norm(M, axis=0), 1e-300)
    # single rows: the pool // 2 directions c_i + t g_i, t in {-1, -1/2, 1/2, 1}
    m1 = int(min(n, max(1, pool // 8)))
    top_c = np.argsort(-np.einsum("ij,ij->i", C, C), kind="stable")[:m1]
    cu, gu = unit(C[top_c].T), unit(G[top_c].T)
    singles = [unit(cu + t * gu) for t in (-1.0, -0.5, 0.5, 1.0)]
    # pairs of rows with a large ||g_i||
    m2 = int(min(n, max(2, math.isqrt(pool // 4) + 1)))
    top_g = np.argsort(-np.einsum("ij,ij->i", G, G), kind="stable")[:m2]
    I, J = np.meshgrid(top_g, top_g, indexing="ij")
    off = I != J
    I, J = I[off], J[off]
    diff, mid = unit((G[I] - G[J]).T), unit((C[I] + C[J]).T)
    return np.concatenate(singles + [diff, unit(diff + 0.5 * mid)], axis=1)


def row_norms(pair: SoftmaxPair):
    """(||c_i||^2, ||g_i||^2) for every row, computed once per pair (one read of K)."""
    return pair.cache.get_or_build("row_norms", lambda: (
        np.einsum("ij,ij->i", pair.C, pair.C, dtype=np.float64),
        np.einsum("ij,ij->i", pair.G, pair.G, dtype=np.float64)))


SWAP_TOP = 4          # rows of largest ||g_i||, and twice as many of largest ||c_i||, paired
                      # with every other row
SWAP_PARTNERS = 4096  # at most this many partners (by ||g_j||) for each of them
SWAP_MIXES = (0.5, 1.0, 2.0)  # with the bulk counted: weights of the difference part against the midpoint part
SWAP_ROWS = 192       # rows (largest ||c_i||) the cheap pre-score looks at, besides i and j
SWAP_RESCORE = 16     # with the bulk: candidates per one kept rescored with the rows R counted


def swap_directions(pair: SoftmaxPair, energy: float, keep: int, bulk: bool = False,
                    exact: bool = True, anchors=None) -> np.ndarray:
    """The best `keep` two-row-swap directions (unit columns), screened cheaply.

    A swap maximum puts most of P_A's mass on row i and most of P_B's on row j. For every
    pair (i, j) with i among the SWAP_TOP rows of largest ||g_i|| (g = a - b) or the
    2 SWAP_TOP of largest ||c_i|| (c = (a + b)/2), and j any other row (at most SWAP_PARTNERS of them, half by
    ||g_j||, half by ||c_j||), both orientations of
    u = +-unit(g_i - g_j) + unit(c_i + c_j), made orthogonal to c_i - c_j (rows i and j get
    equal midpoint scores, the difference decides), are pre-scored by D at x = E u restricted
    to rows i, j and the SWAP_ROWS rows of largest ||c||; the best 4 * keep are scored
    exactly (one product per block) and the best `keep` returned. With `bulk`, the pre-score
    also counts the other rows, as a bulk at logit 0 (the scores are centred) holding their
    mass; at vocabulary scale that mass is what a swap competes with (docs/maths.md §5.2).
    With exact=False the best `keep` by the pre-score are returned without the exact scoring
    (the sketched search ranks them itself, in its subspace, for no pass over A and B).

    `anchors`: more rows to pair with every partner, besides the rows of largest norms -- the
    screens pass the rows that the single-row screen ranks best against the bulk (a row that
    can carry most of one model's mass alone is the likeliest to carry it in a swap; a row can
    rank there with an unremarkable ||c_i|| or ||g_i||). With `bulk`, the candidates kept are
    distinct pairs of rows: the best mix and orientation of each pair {i, j}, so that one
    strong pair does not fill the list with its variants.
    """
    n, d = pair.n, pair.d
    if n < 3 or keep <= 0:
        return np.zeros((d, 0))
    cn, gn = row_norms(pair)
    by_c, by_g = norm_order(pair)
    top = np.unique(np.concatenate([by_g[:SWAP_TOP], by_c[:2 * SWAP_TOP],
                                    np.asarray([] if anchors is None else anchors, dtype=int)]))
    J, CJ, GJ, R, CR, GR, gc_j = _partners(pair, bulk)
    f64 = np.float64
    CT, GT = np.asarray(pair.C[top], f64).T, np.asarray(pair.G[top], f64).T  # d x t
    # Every score at x = E u is linear in (g_i, g_j, c_i, c_j): one set of products serves
    # all candidates (rows R against the partners and the top rows; partners against tops).
    if not bulk:       # with the bulk the rows R are counted in a second stage (below)
        RJ = {(a, b): Ra @ Mb.T for a, Ra in (("c", CR), ("g", GR)) for b, Mb in (("c", CJ), ("g", GJ))}
        RT = {(a, b): Ra @ Mb for a, Ra in (("c", CR), ("g", GR)) for b, Mb in (("c", CT), ("g", GT))}
    JT = {(a, b): Ma @ Mb for a, Ma in (("c", CJ), ("g", GJ)) for b, Mb in (("c", CT), ("g", GT))}
    cc_j, gg_j = cn[J], gn[J]
    in_r = R[:, None] == J[None, :]
    scores, dirs = [], []
    for t, i in enumerate(top):
        cc_i, gg_i, gc_i = cn[i], gn[i], float(CT[:, t] @ GT[:, t])
        cc_ij, gg_ij = JT["c", "c"][:, t], JT["g", "g"][:, t]        # c_j.c_i, g_j.g_i
        cj_gi, gj_ci = JT["c", "g"][:, t], JT["g", "c"][:, t]        # c_j.g_i, g_j.c_i
        with np.errstate(divide="ignore", invalid="ignore"):
            n_gd = np.sqrt(np.maximum(gg_i - 2 * gg_ij + gg_j, 0.0))
            n_cs = np.sqrt(np.maximum(cc_i + 2 * cc_ij + cc_j, 0.0))
            n_cd = np.sqrt(np.maximum(cc_i - 2 * cc_ij + cc_j, 0.0))
            gd_cd = gc_i - cj_gi - gj_ci + gc_j            # (g_i - g_j).(c_i - c_j)
            gd_cs = gc_i + cj_gi - gj_ci - gc_j            # (g_i - g_j).(c_i + c_j)
            cs_cd = cc_i - cc_j                            # (c_i + c_j).(c_i - c_j)
            for sign, mix in ((s_, w_) for s_ in (1.0, -1.0) for w_ in (SWAP_MIXES if bulk else (1.0,))):
                # u0 = sign mix (g_i - g_j)/n_gd + (c_i + c_j)/n_cs, minus its part along c_i - c_j
                tt = np.where(n_cd > 0, (sign * mix * gd_cd / n_gd + cs_cd / n_cs) / n_cd, 0.0)
                n1 = np.sqrt(np.maximum(1.0 + mix * mix + 2 * sign * mix * gd_cs / (n_gd * n_cs)
                                        - tt ** 2, 0.0))
                k = energy / n1
                a_gi, a_gj = k * sign * mix / n_gd, -k * sign * mix / n_gd
                a_ci = k * (1.0 / n_cs - np.where(n_cd > 0, tt / n_cd, 0.0))
                a_cj = k * (1.0 / n_cs + np.where(n_cd > 0, tt / n_cd, 0.0))
                ok = np.isfinite(a_gi) & np.isfinite(a_ci) & np.isfinite(a_cj) & (J != i)
                a_gi, a_gj, a_ci, a_cj = (np.where(ok, v, 0.0) for v in (a_gi, a_gj, a_ci, a_cj))

                c_i = a_gi * gc_i + a_gj * gj_ci + a_ci * cc_i + a_cj * cc_ij
                g_i = a_gi * gg_i + a_gj * gg_ij + a_ci * gc_i + a_cj * cj_gi
                c_j = a_gi * cj_gi + a_gj * gc_j + a_ci * cc_ij + a_cj * cc_j
                g_j = a_gi * gg_ij + a_gj * gg_j + a_ci * gj_ci + a_cj * gc_j
                if bulk:       # first stage: rows i, j and the other n - 2 as the bulk
                    cs = [c_i, c_j, np.full_like(c_i, math.log(max(n - 2, 1)))]
                    gs = [g_i, g_j, np.zeros_like(g_i)]
                else:
                    def at_rows(r):        # scores r.x of rows R (r = "c" or "g")
                        return (RT[r, "g"][:, [t]] * a_gi + RJ[r, "g"] * a_gj
                                + RT[r, "c"][:, [t]] * a_ci + RJ[r, "c"] * a_cj)
                    c_r = np.where(in_r | (R[:, None] == i), -np.inf, at_rows("c"))
                    g_r = np.where(in_r | (R[:, None] == i), 0.0, at_rows("g"))
                    cs, gs = [c_r, c_i, c_j], [g_r, g_i, g_j]
                score = _restricted_d(np.vstack(cs), np.vstack(gs))
                score[~ok] = -np.inf
                scores.append(score)
                dirs.append((i, sign, a_gi, a_gj, a_ci, a_cj))
    flat = np.concatenate(scores)
    m = len(J)
    wanted = SWAP_RESCORE * keep if bulk else 4 * keep if exact else keep
    # a pair of rows appears at most 2 x 2 x len(SWAP_MIXES) times: the best `wanted` distinct
    # pairs are among the best 12 * wanted entries (a partial sort, then a full one of those)
    if flat.size > 12 * wanted:
        top_q = np.argpartition(-flat, 12 * wanted)[:12 * wanted]
        order = top_q[np.lexsort((top_q, -flat[top_q]))]       # stable: ties by position
    else:
        order = np.argsort(-flat, kind="stable")
    order = order[np.isfinite(flat[order])]
    if bulk:
        # one candidate per pair of rows {i, j}: its best mix and orientation
        i_of = np.repeat([entry[0] for entry in dirs], m)[order]
        j_of = J[order % m]
        pairs = np.minimum(i_of, j_of) * n + np.maximum(i_of, j_of)
        _, first = np.unique(pairs, return_index=True)
        order = order[np.sort(first)]
    pick = order[:wanted]
    cols = []
    for q in pick:
        i, _, a_gi, a_gj, a_ci, a_cj = dirs[q // m]
        r = q % m
        cols.append(a_gi[r] * np.asarray(pair.G[i], f64) + a_gj[r] * GJ[r]
                    + a_ci[r] * np.asarray(pair.C[i], f64) + a_cj[r] * CJ[r])
    if not cols:
        return np.zeros((d, 0))
    cand = np.stack(cols, axis=1)
    if bulk:
        # second stage: the best candidates again with the rows R of largest ||c|| counted
        # (their scores from two small products), the bulk the rest; the best 4 * keep go on
        i_of = np.array([dirs[q // m][0] for q in pick])
        j_of = J[pick % m]
        own = np.concatenate([i_of, j_of])
        xc = np.einsum("ij,ji->i", np.asarray(pair.C[own], f64), np.concatenate([cand, cand], axis=1))
        xg = np.einsum("ij,ji->i", np.asarray(pair.G[own], f64), np.concatenate([cand, cand], axis=1))
        k = len(pick)
        mine = (R[:, None] == i_of[None, :]) | (R[:, None] == j_of[None, :])
        cs = [np.where(mine, -np.inf, CR @ cand), xc[:k][None], xc[k:][None]]
        gs = [np.where(mine, 0.0, GR @ cand), xg[:k][None], xg[k:][None]]
        if n > len(R) + 2:
            cs.append(np.full((1, k), math.log(n - len(R) - 2)))
            gs.append(np.zeros((1, k)))
        second = _restricted_d(np.vstack(cs), np.vstack(gs))
        cand = cand[:, np.argsort(-second, kind="stable")[:4 * keep if exact else keep]]
    if not exact:
        return cand / np.maximum(np.linalg.norm(cand, axis=0), 1e-300)
    scores = np.concatenate([pair.value(cand[:, s:s + 64]) for s in range(0, cand.shape[1], 64)])
    order = np.argsort(-scores, kind="stable")[:keep]
    return cand[:, order] / np.maximum(np.linalg.norm(cand[:, order], axis=0), 1e-300)


def norm_order(pair: SoftmaxPair):
    """(rows by decreasing ||c_i||, rows by decreasing ||g_i||) (stable: ties by row), computed
    once per pair: every budget's screens start from them."""
    def build():
        cn, gn = row_norms(pair)
        orders = (np.argsort(-cn, kind="stable"), np.argsort(-gn, kind="stable"))
        for order in orders:
            order.flags.writeable = False
        return orders
    return pair.cache.get_or_build("norm_order", build)


def _partners(pair: SoftmaxPair, bulk: bool):
    """The budget-free part of swap_directions, computed once per pair and mode: the partner
    rows J (by ||g_j|| and ||c_j||) and the rows R of largest ||c||, in float64, and
    c_j . g_j (read only: every budget's screen shares them, and gets the same bits)."""
    cache = pair.cache.get_or_build("swap_partners", dict)
    if bulk not in cache:
        n = pair.n
        by_c, by_g = norm_order(pair)
        partners = SWAP_PARTNERS // 2 if bulk else SWAP_PARTNERS   # three mixes: half the partners
        half = partners // 2
        J = np.arange(n) if n <= partners else \
            np.unique(np.concatenate([by_g[:half], by_c[:half]]))
        R = by_c[:SWAP_ROWS // 4 if bulk else SWAP_ROWS]     # with the bulk counted, fewer suffice
        f64 = np.float64
        CJ, GJ = np.asarray(pair.C[J], f64), np.asarray(pair.G[J], f64)       # m x d
        CR, GR = np.asarray(pair.C[R], f64), np.asarray(pair.G[R], f64)
        entry = (J, CJ, GJ, R, CR, GR, np.einsum("ij,ij->i", CJ, GJ))
        for M in entry:
            M.flags.writeable = False
        cache[bulk] = entry
    return cache[bulk]


def _restricted_d(c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Plain-form D per column from midpoint scores c (-inf = row absent) and differences g."""
    def lse(z):
        m = z.max(axis=0)
        return m + np.log(np.exp(z - m).sum(axis=0))
    return 0.5 * (lse(c + 0.5 * g) + lse(c - 0.5 * g)) - lse(c)


def starting_points(pair: SoftmaxPair, energy: float, starts: int, seed: int) -> np.ndarray:
    """`starts` columns: spectral directions (both signs, radius E and E/2), the best quarter
    of screened row-based directions, then seeded random points on the sphere and inside."""
    d = pair.d
    V = spectral_directions(pair, 3, seed)
    cols = []
    for j in range(V.shape[1]):
        cols += [energy * V[:, j], -energy * V[:, j]]
    cols += [0.5 * energy * V[:, 0], -0.5 * energy * V[:, 0]]
    n_rows = starts // 4
    if n_rows > 0 and len(cols) < starts and starts >= 8:
        cols += list((energy * swap_directions(pair, energy, n_rows)).T)
    if n_rows > 0 and len(cols) < starts:
        cand = energy * row_directions(pair, pool=8 * starts)
        if cand.shape[1]:
            # scored `starts` columns at a time: screening needs no more memory than the climb
            # (the n x 8*starts blocks of one product cost ~5 GB at n = 150,000)
            score = np.concatenate([pair.value(cand[:, s:s + starts])
                                    for s in range(0, cand.shape[1], starts)])
            best = np.argsort(-score, kind="stable")[:n_rows]
            cols += list(cand[:, best].T)
    return random_fill(cols, starts, d, energy, seed)


def random_fill(cols: list, starts: int, d: int, energy: float, seed: int) -> np.ndarray:
    """The columns `cols` and, up to `starts`, seeded random points: uniform on the sphere of
    radius E and, every other one, uniform in the ball (pairs and K models alike)."""
    rng = np.random.default_rng(seed)
    while len(cols) < starts:
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        inside = len(cols) % 2 == 1
        radius = energy * rng.uniform() ** (1.0 / d) if inside else energy
        cols.append(radius * u)
    return np.stack(cols[:starts], axis=1)


