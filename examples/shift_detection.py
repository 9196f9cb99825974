"""How many queries reveal a gradient step? Learning rate x steps against the queries needed.

A student softmax-regression model A (n = 50 answers, d = 16) takes K full-batch gradient
steps of size lr on m = 200 points labelled by a teacher A* (soft targets softmax(A* q)),
which moves it to B = A + dA (`bhtcli.commands.shift`). For each (lr, K) and budget E the table gives
the designed query's H^2 and predicted count (`bhtcli.commands.design`) beside the paper's
small-perturbation estimate (docs/maths.md §10.2): nu = sup_{||x|| <= E} Var_{softmax(Ax)}(dA x),
H^2 ~ nu/8, predicted count 4 z^2 / nu (`bhtcli.analysis.perturbation`).

Run:  .venv/bin/python examples/shift_detection.py [--write-inputs]
Prints one Markdown table per energy (committed to docs/benchmarks.md). --write-inputs also saves the
student and the data set as examples/shift_A.npy and examples/shift_data.npz (the inputs of
the `bht shift` example of docs/shift.md).
"""
import argparse
import time
from pathlib import Path

import numpy as np
from scipy.special import softmax

from bhtcli import shift

N_ANSWERS, DIM, POINTS = 50, 16, 200
RATES = (0.1, 1.0, 10.0, 100.0)
STEPS = (1, 10, 100)
ENERGIES = (1.0, 4.0)


def problem(seed: int = 0):
    """(A, Q, Y): a random student, queries with ||q|| ~ 2, soft targets from a teacher."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((N_ANSWERS, DIM))
    Q = 2.0 * rng.standard_normal((POINTS, DIM)) / np.sqrt(DIM)
    Y = softmax(Q @ teacher.T, axis=1)
    A = 0.3 * rng.standard_normal((N_ANSWERS, DIM))
    return A, Q, Y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-inputs", action="store_true")
    args = ap.parse_args()
    A, Q, Y = problem()
    if args.write_inputs:
        here = Path(__file__).parent
        np.save(here / "shift_A.npy", A)
        np.savez(here / "shift_data.npz", Q=Q, Y=Y)
    t0 = time.perf_counter()
    rows = {E: [] for E in ENERGIES}
    for lr in RATES:
        for steps in STEPS:
            for E in ENERGIES:
                r = shift(A, {"Q": Q, "Y": Y}, lr, steps, energy=E)
                det = r.detection
                sp = det["small_perturbation"]
                rows[E].append(
                    f"| {lr:g} | {steps} | {lr * steps:g} | {r.loss_after:.4f} | {r.delta_frobenius:.3g} | "
                    f"{E * r.row_norm_2inf:.3g} | {det['hellinger_squared']:.3g} | {det['bhattacharyya_distance']:.3g} | "
                    f"{sp['bhattacharyya_distance_estimate']:.3g} | {det['estimate_over_design']:.3f} | "
                    f"{det['samples']['predicted']:,} | {sp['samples']['predicted']:,} |")
        loss_before = r.loss_before
    for E in ENERGIES:
        print(f"\nE = {E:g} (alpha = 0.05; student n = {N_ANSWERS}, d = {DIM}; m = {POINTS} teacher-labelled "
              f"points; loss before the steps {loss_before:.4f}):\n")
        print("| lr | steps | lr × steps | loss after | ‖ΔA‖_F | E·‖ΔA‖_{2→∞} | H² designed | D designed | ν/8 "
              "| ν/8 ÷ D | queries designed | queries from ν (4z²/ν) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows[E]))
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
