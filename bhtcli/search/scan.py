"""The whole-ball scan for d <= 2: starting points that make the search global up to a grid.

In one or two dimensions the ball ||x|| <= E can be covered by a grid of radii times directions.
Every search on such a problem -- a pair under any links and biases, K models' bottleneck, any
method and any number of starts -- carries the best distinct grid points among its starts, so
an interior maximum or a narrow one near 0 under huge logits is climbed from a point already
in its basin, whatever the random starts do (docs/search.md §6).

The radii are log-spaced from where the logits spread by 10^-3 (the nearly quadratic regime)
up to E, plus a linear spacing; the directions are both signs (d = 1) or SCAN_ANGLES angles
(d = 2). The grid is the same for every seed, so runs at E1 < E2 see the same maxima inside the
smaller ball.
"""
from __future__ import annotations

import numpy as np

SCAN_MAX_D = 2               # d <= this: the whole ball is scanned on a grid for starts
SCAN_RADII = 400             # radii of the scan (at most)
SCAN_ANGLES = 96             # directions (d = 2); d = 1 takes both signs
SCAN_ENTRIES = 20_000_000    # the scan reads at most ~this many scores (rows x points)
SCAN_KEEP = 8                # best distinct scan points carried into the search
SCAN_BLOCK = 4096            # points per evaluation
ZOOM_SIDE = 9                # points per side of the zoom's local grid
ZOOM_STEPS = 120             # steps of the zoom at most
ZOOM_RTOL = 1e-10            # the zoom stops when its grid's half-width is below this times E


def scan_applies(d: int) -> bool:
    return 1 <= d <= SCAN_MAX_D


def ball_grid(d: int, energy: float, rows: int, spread: float) -> np.ndarray:
    """(d, m) grid points covering the ball. `rows`: the score rows one point costs (sizes the
    grid); `spread`: a bound on how fast the logits move per unit of ||x|| (sets the smallest
    radius, 10^-3 / spread)."""
    low = min(energy, 1e-3 / spread) if spread > 0 and np.isfinite(spread) else energy
    points = max(SCAN_ENTRIES // max(rows, 1), 1)
    per = int(np.clip(points // (4 if d == 1 else 2 * SCAN_ANGLES), 8, SCAN_RADII))
    radii = np.unique(np.concatenate([np.geomspace(low, energy, per),
                                      np.linspace(energy / per, energy, per)]))
    if d == 1:
        return np.concatenate([radii, -radii])[None, :]
    angles = np.linspace(0.0, 2.0 * np.pi, SCAN_ANGLES, endpoint=False)
    U = np.stack([np.cos(angles), np.sin(angles)])
    return (U[:, :, None] * radii[None, None, :]).reshape(2, -1)


def scan_ball(value, d: int, energy: float, rows: int, spread: float) -> np.ndarray:
    """The best SCAN_KEEP distinct points of the grid by `value` ((d, m) -> (m,)), best first."""
    from bhtcli.search.ascent import distinct
    X = ball_grid(d, energy, rows, spread)
    f = np.concatenate([np.asarray(value(X[:, s:s + SCAN_BLOCK]), dtype=np.float64)
                        for s in range(0, X.shape[1], SCAN_BLOCK)])
    f = np.where(np.isfinite(f), f, -np.inf)
    best = np.argsort(-f, kind="stable")[:32 * SCAN_KEEP]      # distinct() is quadratic
    keep = distinct(X[:, best], f[best], energy, tol=1e-3)[:SCAN_KEEP]
    return X[:, best[keep]]


def pair_scan(pair, energy: float) -> np.ndarray:
    """The scan's starts for a softmax pair (any links and biases): the logits of both models
    move at most 2 max ||c_i|| + max ||g_i|| per unit of ||x||."""
    from bhtcli.search.starts import row_norms
    cn, gn = row_norms(pair)
    spread = 2.0 * float(np.sqrt(cn.max(initial=0.0))) + float(np.sqrt(gn.max(initial=0.0)))
    return scan_ball(pair.value, pair.d, energy, pair.n, spread)


def bottleneck_scan(models, energy: float) -> np.ndarray:
    """The scan's starts for K models' bottleneck min_p D_p (models: KModels): each model's
    logits move at most 2 max ||row of S|| per unit of ||x|| (M_k = M_1 + Delta_k)."""
    norms = np.sqrt(np.einsum("ij,ij->i", models.S, models.S, dtype=np.float64))
    spread = 2.0 * float(norms.max(initial=0.0))
    return scan_ball(lambda X: models.pair_distances(X).min(axis=0), models.d, energy,
                     models.K * models.n, spread)


def zoom(value, X: np.ndarray, energy: float, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Each column of X (d x m, d <= 2) moved uphill on `value` ((d, k) -> (k,)) by a local
    grid that follows the best point and halves when the centre is best: a derivative-free
    climb for a maximum on a kink of a non-smooth objective (K models' bottleneck, where two
    pairs' D are equal), which a smoothed climb approaches only as its sharpness grows. Grid
    points outside the ball are projected onto it, so on the sphere the grid is a 1-D search
    along it. Starts at the scan's angular spacing; every column runs ZOOM_STEPS steps at most
    and stops below ZOOM_RTOL E. `rows`: the score rows one point costs (caps the columns).
    Returns (X, values), no column below its start."""
    from bhtcli.search.ascent import project
    d = X.shape[0]
    X = project(np.asarray(X, dtype=np.float64), energy)
    cap = max(1, SCAN_ENTRIES // (16 * max(rows, 1) * ZOOM_SIDE ** d))
    X = X[:, :cap]
    steps = np.linspace(-1.0, 1.0, ZOOM_SIDE)
    offsets = (steps[None, :] if d == 1 else
               np.stack(np.meshgrid(steps, steps, indexing="ij")).reshape(2, -1))
    centre = int(np.argmin(np.abs(offsets).sum(axis=0)))
    f = np.asarray(value(X), dtype=np.float64)
    width = np.full(X.shape[1], 2.0 * np.pi * energy / SCAN_ANGLES)
    for _ in range(ZOOM_STEPS):
        live = np.flatnonzero(width > ZOOM_RTOL * energy)
        if live.size == 0:
            break
        P = project((X[:, live, None] + width[None, live, None] * offsets[:, None, :])
                    .reshape(d, -1), energy)
        v = np.asarray(value(P), dtype=np.float64).reshape(live.size, -1)
        v = np.where(np.isfinite(v), v, -np.inf)
        v[:, centre] = np.maximum(v[:, centre], f[live])     # the centre as it stands
        j = np.argmax(v, axis=1)
        up = (j != centre) & (v[np.arange(live.size), j] > f[live])
        moved = live[up]
        X[:, moved] = P.reshape(d, live.size, -1)[:, np.flatnonzero(up), j[up]]
        f[moved] = v[np.flatnonzero(up), j[up]]
        width[live[~up]] *= 0.5
    return X, f


def with_scan(points, scanned: np.ndarray) -> np.ndarray:
    """`points` (d, m) or None, followed by the scan's."""
    return scanned if points is None else np.concatenate([points, scanned], axis=1)
