"""`simulate --plot` (max error against n) and `design --plot` (the budget curve)."""
from __future__ import annotations

import numpy as np

from bhtcli.api import atomic_file


def plot_fixed(result, path: str) -> None:
    """Write a PNG (atomically) of the fixed-n experiment in `result` (a SimulateResult run
    with predicted_points > 0)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = result.to_dict()
    curve, fixed = r["curve"], r["fixed"]
    K = len(r["models"]) if r.get("models") else 2
    n = np.array(curve["n"])
    err = np.array(curve["error"])
    se = np.array(curve["standard_error"])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.fill_between(n, np.clip(err - 1.96 * se, 1e-6, 1), np.clip(err + 1.96 * se, 1e-6, 1),
                    color="tab:blue", alpha=0.2, label="Monte Carlo 95% band")
    ax.plot(n, np.clip(err, 1e-6, 1), color="tab:blue", lw=1.5,
            label=f"empirical max error ({r['trials']:,} trials per model)")
    ax.plot(curve["predicted_n"], curve["predicted_error"], "k--", lw=1.2,
            label="predicted (exact minimax LR test)" if K == 2 else
            "predicted (maximum likelihood, saddlepoint-copula)")
    ax.axhline(r["target_error"], color="tab:red", lw=1, label=f"target alpha = {r['target_error']:g}")
    if fixed:
        ax.axvline(fixed["lower"], color="tab:gray", ls=":", lw=1.2, label=f"lower bound {fixed['lower']:,}")
        ax.axvline(fixed["upper"], color="tab:gray", ls="-.", lw=1.2, label=f"upper bound {fixed['upper']:,}")
    ax.set_yscale("log")
    if K == 2:
        ax.set_xlabel("n (repetitions of the designed query)")
        ax.set_ylabel("max(type I, type II) error")
        ax.set_title(f"softmax n={r['n']}, d={r['d']}, E={r['energy']:g}: H^2 = {r['hellinger_squared']:.3g}")
    else:
        ax.set_xlabel("n (answers" + (" to the designed query)" if len(r["queries"]) == 1 else
                                      ", split among the queries by their weights)"))
        ax.set_ylabel(f"largest error over the {K} models")
        ax.set_title(f"{K} softmax models n={r['n']}, d={r['d']}, E={r['energy']:g}: "
                     f"bottleneck D = {r['bhattacharyya_distance']:.3g}")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    _save(fig, path, plt)


def plot_budget_curve(result, path: str) -> None:
    """Write a PNG (atomically): designed H^2 and predicted queries against the budget E, for a
    BudgetCurveResult (`design --energy E1,E2,... --plot`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result.to_dict()["designs"]
    E = [r["energy"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(E, [r["hellinger_squared"] for r in rows], "o-", color="tab:blue", label="designed H^2")
    ax.set_xlabel("budget E (||x||_2 <= E)" if rows[0]["model"] == "softmax" else "budget C (s_i^2 <= C)")
    ax.set_ylabel("H^2", color="tab:blue")
    ax.set_xscale("log")
    ax.grid(alpha=0.3, which="both")
    right = ax.twinx()
    pred = [(e, r["samples"]["predicted"]) for e, r in zip(E, rows) if r["samples"]["predicted"]]
    if pred:
        right.plot(*zip(*pred), "s--", color="tab:red", label="predicted queries")
        right.set_yscale("log")
    right.set_ylabel(f"predicted queries (alpha = {rows[0]['target_error']:g})", color="tab:red")
    ax.set_title(f"{rows[0]['model']} n={rows[0]['n']}, d={rows[0]['d']}: budget curve")
    fig.tight_layout()
    _save(fig, path, plt)


def _save(fig, path, plt) -> None:
    """fig as a PNG at path, atomically, in the umask's mode (bhtcli.io.write.atomic_file)."""
    try:
        with atomic_file(path, "wb", option="--plot") as fh:
            fig.savefig(fh, format="png")
    finally:
        plt.close(fig)
