import numpy as np
import pytest
from scipy.special import softmax


def plain_divergences(A, B, x):
    """Textbook formulas on plain probabilities (independent of bhtcli)."""
    p, q = softmax(A @ x), softmax(B @ x)
    bc = np.sum(np.sqrt(p * q))
    return {"h2": 1 - bc, "D": -np.log(bc), "tv": 0.5 * np.abs(p - q).sum(),
            "kl_ab": np.sum(p * np.log(p / q)), "kl_ba": np.sum(q * np.log(q / p)), "p": p, "q": q}


def disk_points(energy, d, m=401):
    """Columns x of a dense grid of the ball: 20,001 points of [-E, E] (d = 1) or a polar grid
    of m radii x 4m angles of the disk (d = 2)."""
    if d == 1:
        return np.linspace(-energy, energy, 20001)[None, :]
    r = np.linspace(0, energy, m)
    t = np.linspace(0, 2 * np.pi, 4 * m, endpoint=False)
    R, T = np.meshgrid(r, t)
    return np.stack([(R * np.cos(T)).ravel(), (R * np.sin(T)).ravel()])


def grid_max_h2(A, B, energy, m=401):
    """Brute force: H^2 on a dense polar grid of the disk (d = 2) or segment (d = 1)."""
    xs = disk_points(energy, A.shape[1], m)
    a, b = A @ xs, B @ xs
    p, q = softmax(a, axis=0), softmax(b, axis=0)
    h2 = 1 - np.sum(np.sqrt(p * q), axis=0)
    j = int(np.argmax(h2))
    return float(h2[j]), xs[:, j]


@pytest.fixture
def pair_files(tmp_path):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((12, 3))
    B = A + 0.3 * rng.standard_normal((12, 3))
    a, b = tmp_path / "A.npy", tmp_path / "B.npy"
    np.save(a, A)
    np.save(b, B)
    return str(a), str(b), A, B
