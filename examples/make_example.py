"""Regenerate the bundled example models examples/A.npy and examples/B.npy.

Two "checkpoints" of a 40-token output layer on an 8-dimensional hidden state: B is A after a
small update everywhere (0.15 noise) plus a larger change on tokens 3, 17 and 29.
"""
from pathlib import Path

import numpy as np

here = Path(__file__).parent
rng = np.random.default_rng(2024)
A = rng.standard_normal((40, 8))
B = A + 0.15 * rng.standard_normal((40, 8))
B[[3, 17, 29]] += 0.8 * rng.standard_normal((3, 8))
np.save(here / "A.npy", A)
np.save(here / "B.npy", B)

# Leverage-score example: 30 rows in 3 dimensions, B a small perturbation of A.
rng = np.random.default_rng(7)
LA = rng.standard_normal((30, 3))
np.save(here / "leverage_A.npy", LA)
np.save(here / "leverage_B.npy", LA + 0.03 * rng.standard_normal((30, 3)))

# Candidate queries for `bht rank` / `design --candidates`: 200 directions with norms 0.2-1.1
# (stand-ins for the hidden states of prompts an auditor can send).
rng = np.random.default_rng(2026)
H = rng.standard_normal((200, 8))
H *= rng.uniform(0.2, 1.1, size=(200, 1)) / np.linalg.norm(H, axis=1, keepdims=True)
np.save(here / "candidates.npy", H)

# A third checkpoint for the K-way examples (docs/kway.md): A after another small update
# (0.15 noise) and a larger change on tokens 5, 17 and 33.
rng = np.random.default_rng(2027)
C = A + 0.15 * rng.standard_normal((40, 8))
C[[5, 17, 33]] += 0.8 * rng.standard_normal((3, 8))
np.save(here / "C.npy", C)
