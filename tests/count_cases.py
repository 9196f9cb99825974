"""Seeded pairs whose counts the lattice computes, shared by tests/test_counts_lattice.py and
benchmarks/bench_counts.py: 2 to 2,000 answers, models close and far, alpha from 0.2 to 1e-9."""
import numpy as np

from bhtcli.maths import counts
from bhtcli.maths.counts import lower_count, upper_count
from bhtcli.maths.divergences import Tilt, divergences_from_tilt


def finest(N):
    """The grid every N used before the lattice was sized: min(4096, 2^18 / N) cells."""
    return int(min(4096, max(64, counts.LATTICE_CELLS // N)))


def draw_problem(rng):
    """(n, tilt, alpha, lower, upper) of one seeded pair, or None when the lattice does not
    compute its count (no lower count, or an upper count past LATTICE_MAX_N)."""
    n = int(rng.choice([2, 3, 4, 6, 12, 50, 300, 2000]))
    c = rng.standard_normal(n) * rng.choice([0.3, 1.0, 3.0])
    delta = rng.choice([0.05, 0.1, 0.2, 0.3, 0.6, 1.0]) * rng.standard_normal(n)
    alpha = float(rng.choice([0.2, 0.1, 0.05, 0.01, 1e-3, 1e-6, 1e-9]))
    tilt = Tilt.from_logits(c, delta)
    D = divergences_from_tilt(tilt).bhattacharyya_distance
    lo, up = lower_count(D, alpha), upper_count(D, alpha)
    if lo is not None and up <= counts.LATTICE_MAX_N:
        return n, tilt, alpha, lo, up
    return None
