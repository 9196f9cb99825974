"""The fixed-n test on laws with zeros (maths/laws.py: law_decisions), the test whose count
law_counts predicts: row by row it is `decide`'s fixed_test; by Monte Carlo its errors at the
predicted count are <= alpha; an answer outside one law's support rules that law out."""
import numpy as np
import pytest

from bhtcli.maths.counts import fixed_test
from bhtcli.maths.laws import bhattacharyya, floored_tilt, hellinger_squared, law_counts, law_decisions


def laws(seed, n=60, cut=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n) * 2
    la = z - np.log(np.exp(z).sum())
    zb = z + 0.35 * rng.standard_normal(n)
    lb = zb - np.log(np.exp(zb).sum())
    if cut:                                    # truncated supports, as top-k leaves them
        la[np.argsort(-la)[cut:]] = -np.inf
        lb[np.argsort(-lb)[cut:]] = -np.inf
        la -= np.log(np.exp(la).sum())
        lb -= np.log(np.exp(lb).sum())
    return la, lb


def draw(lp, N, trials, rng):
    return rng.choice(len(lp), size=(trials, N), p=np.exp(lp))


@pytest.mark.slow
def test_rows_are_fixed_test():
    la, lb = laws(0)
    rng = np.random.default_rng(1)
    n = law_counts(la, lb, 0.05).predicted
    rows = draw(la, n, 30, rng)
    decide_b, error, method = law_decisions(la, lb, 0.05, rows)
    tilt, D = floored_tilt(la, lb), bhattacharyya(hellinger_squared(la, lb))
    for r, b in zip(rows, decide_b):
        f = fixed_test(tilt, D, 0.05, r)
        assert f.verdict == ("A" if b == 0 else "B" if b == 1 else "tie")
        assert f.error == error and f.method == method


@pytest.mark.slow
def test_errors_at_the_predicted_count_by_monte_carlo():
    for cut in (0, 20):
        la, lb = laws(2, cut=cut)
        n = law_counts(la, lb, 0.05).predicted
        rng = np.random.default_rng(3)
        trials = 4000
        ea = law_decisions(la, lb, 0.05, draw(la, n, trials, rng))[0].mean()
        eb = 1 - law_decisions(la, lb, 0.05, draw(lb, n, trials, rng))[0].mean()
        se = np.sqrt(0.05 * 0.95 / trials)
        assert ea <= 0.05 + 3 * se and eb <= 0.05 + 3 * se, (cut, n, ea, eb)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_an_answer_outside_a_support_decides():
    la = np.log(np.array([0.5, 0.5, 0.0, 0.0]))
    lb = np.log(np.array([0.0, 0.4, 0.3, 0.3]))
    decide_b = law_decisions(la, lb, 0.05, np.array([[0, 1, 1], [2, 1, 1], [1, 1, 3]]))[0]
    assert list(decide_b) == [0.0, 1.0, 1.0]
    disjoint = np.log(np.array([0.0, 0.0, 0.5, 0.5]))
    assert list(law_decisions(la, disjoint, 0.05, np.array([[0], [3]]))[0]) == [0.0, 1.0]
