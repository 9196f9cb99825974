"""Benchmark: the elementwise cost of the search's objective and of the final report,
former code against current, measured in the same run (ratios new/old).

Run:  .venv/bin/python benchmarks/bench_objective.py                  (50,000 x 1,024 float32)
      .venv/bin/python benchmarks/bench_objective.py --n 20000 --d 512 --repeats 3
      .venv/bin/python benchmarks/bench_objective.py --pair A.safetensors B.safetensors \
          --points points.npy                                          (a pair on disk)

The pair is bench_scale.py's (A rows of norm 0.6-1.6, B = A + 0.01 N(0, 1/d), float32),
generated in memory with a seed, unless --pair gives two files. Queries have norm E = 10:
"random" columns (the early climb: D ~ 1e-6) and "local" ones: from --points, a d x m array
(e.g. local maxima of the search: D ~ 3e-4 on the 50,000 x 1,024 pair), or else the normalised
running sums of the few rows of A - B of largest norm (on the generated pair these give
D ~ 2e-6 only, like the random ones: pass --points for the regime near a maximum). "reduced" is the same pair restricted to an orthonormal
d x 224 basis holding the local points (the sketched search's space: products n x 224,
elementwise work unchanged).

Rows (each the fastest of --repeats, in seconds, and in pass-times: one forward plus one
backward product of the stacked 2n x d matrix with a d x 32 block, timed here):
- weights k=K: the elementwise part of one evaluation, (D, w_c, w_g) from the logits:
  former three plain softmaxes + Tilt form on "fragile" columns vs bhattacharyya_weights;
- evaluate k=K: SoftmaxPair.evaluate (product + elementwise) and its former equivalent;
- softmax_cols k=K: the KL objective's softmax helper;
- report: float64 logits at the query (streamed over A and B) + Tilt + every divergence +
  query_counts, what design's _report computes (the certificate aside), and whether the
  numbers are identical.
The former code is the frozen copy in tests/objective_reference.py.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import objective_reference as ref  # noqa: E402  (the former formulas)
from bhtcli.maths.counts import query_counts  # noqa: E402
from bhtcli.maths.divergences import Tilt, bhattacharyya_weights, divergences_from_tilt  # noqa: E402
from bhtcli.models.softmax import SoftmaxPair, _softmax_cols, logits_at, pass_seconds  # noqa: E402

ENERGY = 10.0


def make_pair(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = np.empty((n, d), dtype=np.float32)
    B = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 8192):
        m = min(8192, n - s)
        scale = np.exp(0.25 * rng.standard_normal((m, 1))) / np.sqrt(d)
        A[s:s + m] = rng.standard_normal((m, d)) * scale
        B[s:s + m] = A[s:s + m] + 0.01 / np.sqrt(d) * rng.standard_normal((m, d))
    return A, B


def local_points(pair: SoftmaxPair, m: int = 5) -> np.ndarray:
    G = np.asarray(pair.G, dtype=np.float64)
    heavy = np.argsort(-np.einsum("ij,ij->i", G, G))[:m]
    X = np.cumsum(G[heavy].T, axis=1)
    return X * (ENERGY / np.linalg.norm(X, axis=0))


def columns(X0: np.ndarray, k: int, rng) -> np.ndarray:
    X = np.concatenate([X0] * (k // X0.shape[1] + 1), axis=1)[:, :k]
    X = X + 0.01 * rng.standard_normal(X.shape)
    return X * (ENERGY / np.linalg.norm(X, axis=0))


def best_of(repeats: int, f, *args):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - t)
    return best


def old_evaluate(pair: SoftmaxPair, X):
    c, delta, jac = pair.readout.forward(*pair.product(X))
    D, w_c, w_g = ref.old_weights(c, delta)
    return (D, *pair.readout.backward(w_c, w_g, jac))


def report_core(A, B, x, tilt_of):
    c, delta = logits_at(A, B, x, rows=rows_of(tilt_of))
    tilt = tilt_of(c, delta)
    div = divergences_from_tilt(tilt)
    counts = query_counts(tilt, div.bhattacharyya_distance, 0.05)
    return div, counts


def rows_of(tilt_of):
    return 8192 if tilt_of is ref.old_tilt else None    # the former block of logits_at


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--rank", type=int, default=224, help="reduced space dimension")
    ap.add_argument("--pair", nargs=2, metavar=("A", "B"))
    ap.add_argument("--points", help="d x m .npy of local maxima (the local regime)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--widths", default="32,128")
    args = ap.parse_args(argv)
    if args.pair:
        from bhtcli.io.load import load_pair
        A, B = load_pair(*args.pair, dtype=None)
    else:
        A, B = make_pair(args.n, args.d)
    n, d = A.shape
    pair = SoftmaxPair(A, B, dtype="float32")
    pt = pass_seconds(pair)
    rng = np.random.default_rng(1)
    X_local = np.load(args.points) if args.points else local_points(pair)
    # the reduced basis holds the local points (as the sketch's basis holds its best points)
    Q = np.linalg.qr(np.concatenate([X_local, rng.standard_normal((d, args.rank - X_local.shape[1]))],
                                    axis=1))[0]
    AQ = np.empty((n, args.rank))
    BQ = np.empty((n, args.rank))
    for s in range(0, n, 8192):
        AQ[s:s + 8192] = np.asarray(A[s:s + 8192], dtype=np.float64) @ Q
        BQ[s:s + 8192] = np.asarray(B[s:s + 8192], dtype=np.float64) @ Q
    reduced = SoftmaxPair(AQ, BQ, dtype="float32")
    print(f"pair {n} x {d} float32, reduced rank {args.rank}; pass-time {pt:.4f} s; "
          f"best of {args.repeats}", flush=True)
    rows = []

    def row(name, old, new, note=""):
        rows.append((name, old, new, note))
        print(f"{name:34s} old {old:8.4f} s ({old / pt:6.2f} pt)   new {new:8.4f} s "
              f"({new / pt:6.2f} pt)   new/old {new / old:5.3f}  {note}", flush=True)

    R = args.repeats
    for k in [int(v) for v in args.widths.split(",")]:
        X_rand = rng.standard_normal((d, k))
        X_rand *= ENERGY / np.linalg.norm(X_rand, axis=0)
        X_loc = columns(X_local, k, rng)
        for space, p, to in (("full", pair, lambda X: X), ("reduced", reduced, lambda X: Q.T @ X)):
            for regime, X in (("random", X_rand), ("local", X_loc)):
                Xs = to(X)
                if space == "reduced":      # keep the norm-E ball in the reduced space
                    Xs = Xs * (ENERGY / np.linalg.norm(Xs, axis=0))
                c, delta = p.logits(Xs)
                D0, wc0, wg0 = ref.old_weights(c, delta)
                D1, wc1, wg1 = bhattacharyya_weights(c, delta)
                err = np.max(np.abs(D1 - D0) / D0)
                fragile = np.mean(D0 < ref.PLAIN_OK * (1 + np.abs(delta).max(axis=0)))
                note = f"median D {np.median(D0):.2e}, fragile {fragile:.0%}, |dD|/D {err:.1e}"
                t_old = best_of(R, ref.old_weights, c, delta)
                t_new = best_of(R, bhattacharyya_weights, c, delta)
                row(f"weights k={k} {space} {regime}", t_old, t_new, note)
                t_old = best_of(R, old_evaluate, p, Xs)
                t_new = best_of(R, p.evaluate, Xs)
                row(f"evaluate k={k} {space} {regime}", t_old, t_new)
        c, _ = pair.logits(X_loc)
        row(f"softmax_cols k={k}", best_of(R, ref.softmax_cols, c), best_of(R, _softmax_cols, c))
    x = X_local[:, 0]
    old = report_core(A, B, x, ref.old_tilt)
    new = report_core(A, B, x, Tilt.from_logits)
    same = old == new
    row("report (logits+divergences+counts)", best_of(max(2, R // 2), report_core, A, B, x, ref.old_tilt),
        best_of(max(2, R // 2), report_core, A, B, x, Tilt.from_logits),
        f"identical numbers: {same}; H2 {new[0].hellinger_squared:.6e}, predicted {new[1].predicted}")
    if not same:
        print("old", old, "\nnew", new)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
