"""Where the per-row ceiling loses on the real int8 audit (all-MiniLM-L6-v2 against its per-row
int8 round trip): the chain of inequalities from the designed query's variance to the ceiling,
each link's ratio measured at the design (docs/benchmarks.md, "Journals moved from docs/maths.md",
§4.12).

Usage: .venv/bin/python examples/quantization_audit/certificate_slack.py [--energies 1,3]
       [--bilinear]
(after examples/quantization_audit/setup.sh). One table (Markdown) on stdout.

--bilinear adds a quick estimate of the Bennett expansion with the bilinear relaxation
(docs/benchmarks.md, the §4.13 journal, route 3) with a Lanczos value (scipy eigsh, a lower estimate) for the top
eigenvalue and without the tilt's t-part, so the column is NOT a certificate; the certified
version is `bht bound --certificate exact` (docs/maths.md §4.14). A few minutes per energy.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit import TENSOR, int8_round_trip, model_file  # noqa: E402

from bhtcli import design, load_matrix  # noqa: E402
from bhtcli.analysis.ceilings import per_row_variance  # noqa: E402
from bhtcli.maths.certificate import weight_cap  # noqa: E402


def lse(z):
    m = z.max()
    return m + math.log(float(np.exp(z - m).sum()))


def chain(A, B, x, E):
    """The links at x: Var at t = 0, sup over t in {-1/2, 0, 1/2}, the direction-dependent
    Jensen bound, the caps at x, their supremum over the ball, and the ceiling (split)."""
    n = A.shape[0]
    al, be = A - A.mean(0), B - B.mean(0)
    g, h = 0.5 * (al + be), al - be
    delta, c = h @ x, g @ x
    var = []
    for t in (-0.5, 0.0, 0.5):
        z = c + t * delta
        p = np.exp(z - lse(z))
        var.append(float(p @ (delta - p @ delta) ** 2))
    p = np.exp(c - lse(c))
    log_n1 = math.log(n - 1)
    jensen = float(weight_cap(c - c.mean(), n, log_n1) @ (delta - p @ delta) ** 2)
    rho = E * np.maximum(np.linalg.norm(al, axis=1), np.linalg.norm(be, axis=1))
    cap = weight_cap(rho, n, log_n1)
    m = cap @ h / cap.sum()
    at_x = float(cap @ ((h - m) @ x) ** 2)
    S = (h - m).T @ ((h - m) * cap[:, None])
    sup_caps = E * E * float(np.linalg.eigvalsh(S)[-1])
    ceiling, _ = per_row_variance(A, B, E)
    uniform = E * E * float(np.linalg.eigvalsh(h.T @ h / n)[-1])
    return var, jensen, at_x, sup_caps, ceiling, uniform, float(cap.sum())


def bilinear_estimate(A, B, E, heavy: int):
    """Route 3 for the rows other than `heavy` (Var units): e^y <= (1 + eta/2) + (phi_i + 1/(2 eta)) y^2
    for y <= R_i (Bennett, and y <= eta/2 + y^2/(2 eta)), so the bulk's sum_i (e^{y_i}/n) q_i is at
    most (1 + eta/2) U2 + (E^4/n)(lambda_phi + lambda_1/(2 eta)), lambda_w the top eigenvalue of
    Z -> sum_i w_i <sym(g_i u_i^T), Z> sym(g_i u_i^T) on symmetric Z (Lanczos estimates here)."""
    from bhtcli.analysis.bilinear import operator_top_estimate
    n, d = A.shape
    al, be = A - A.mean(0), B - B.mean(0)
    keep = np.ones(n, bool)
    keep[heavy] = False
    g = 0.5 * (al + be)[keep]
    h = (al - be)[keep]
    u = h - h.mean(0)
    R = E * np.maximum(np.linalg.norm(al, axis=1), np.linalg.norm(be, axis=1))[keep]
    phi = (np.expm1(R) - R) / R ** 2
    U2 = E * E * float(np.linalg.eigvalsh(u.T @ u / n)[-1])

    def top(w):
        return operator_top_estimate(g, u, w, tol=1e-4) * E ** 4 / n

    p_phi, p_one = top(phi), top(np.ones(len(phi)))
    eta = math.sqrt(p_one / U2)
    return (1 + eta / 2) * U2 + p_phi + p_one / (2 * eta)


def heavy_row_bound(A, B, E):
    """(row, f*): the split's heavy row and its own bound (docs/maths.md §4.9)."""
    from bhtcli.analysis import ceilings
    seen = []
    original = ceilings.heavy_row_bound

    def record(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]
    ceilings.heavy_row_bound = record
    try:
        ceilings.per_row_variance(A, B, E, heavy_rows=1)
    finally:
        ceilings.heavy_row_bound = original
    n = A.shape[0]
    al, be = A - A.mean(0), B - B.mean(0)
    rho = E * np.maximum(np.linalg.norm(al, axis=1), np.linalg.norm(be, axis=1))
    cap = weight_cap(rho, n, math.log(n - 1))
    row = int(np.argmax(cap * np.einsum("ij,ij->i", al - be, al - be)))
    return row, seen[-1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--energies", default="1,3", help="comma-separated energies")
    parser.add_argument("--starts", type=int, default=32)
    parser.add_argument("--bilinear", action="store_true",
                        help="add route 3's value with a Lanczos (uncertified) eigenvalue")
    args = parser.parse_args(argv)
    A = np.asarray(load_matrix(f"{model_file()}:{TENSOR}", dtype="float32"))
    B = int8_round_trip(A)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    print("| E | Var at x (t = 0) | sup over t | Jensen at x | caps at x | caps, sup over x | "
          "ceiling (split) | uniform weights, sup | sum of caps |" + (" route 3 (estimate) |" if args.bilinear else ""))
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.bilinear else ""))
    for E in (float(e) for e in args.energies.split(",")):
        r = design(A, B, E, starts=args.starts, seed=0, dtype="float32")
        x = np.asarray(r.query, dtype=np.float64)
        var, jensen, at_x, sup_caps, ceiling, uniform, caps = chain(A64, B64, x, E)
        v0 = var[1]
        print(f"| {E:g} | {v0:.4g} | {max(var):.4g} ({max(var) / v0:.3f}×) | {jensen:.4g} "
              f"({jensen / v0:.3f}×) | {at_x:.4g} ({at_x / jensen:.2f}×) | {sup_caps:.4g} "
              f"({sup_caps / at_x:.2f}×) | {ceiling:.4g} ({ceiling / (8 * r.bhattacharyya_distance):.2f}× 8D) | "
              f"{uniform:.4g} | {caps:.3g} |", end="", flush=True)
        if args.bilinear:
            row, fstar = heavy_row_bound(A64, B64, E)
            est = fstar + bilinear_estimate(A64, B64, E, row)
            print(f" {est:.4g} ({est / (8 * r.bhattacharyya_distance):.2f}× 8D) |", end="")
        print(flush=True)


if __name__ == "__main__":
    main()
