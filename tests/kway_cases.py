"""Seeded K-model cases shared by tests/test_kway_sketch.py and benchmarks/bench_kway.py."""
import numpy as np


def quality_case(seed, n, d, K, kind):
    """K seeded models: "noise" (B = A + 10% noise each), "rows" (8 changed rows each, plus
    small noise)."""
    rng = np.random.default_rng(seed)
    A = 3.0 * rng.standard_normal((n, d)) / np.sqrt(d)
    if kind == "noise":
        return [A] + [A + 0.3 * rng.standard_normal((n, d)) / np.sqrt(d) for _ in range(K - 1)]
    out = [A]
    for _ in range(K - 1):
        B = A.copy()
        rows = rng.choice(n, 8, replace=False)
        B[rows] += 2.0 * rng.standard_normal((8, d)) / np.sqrt(d)
        out.append(B + 0.05 * rng.standard_normal((n, d)) / np.sqrt(d))
    return out
