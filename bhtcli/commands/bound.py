"""`bound`: the closed-form certificate, no optimisation (docs/maths.md §4)."""
from __future__ import annotations

from bhtcli.analysis.diameter import centred_difference
from bhtcli.analysis.facts import analyse_pair, certificate_record
from bhtcli.results import BoundResult


def bound(A, B, energy: float, error: float = 0.05, *, link_a="exp", link_b="exp",
          bias_a=None, bias_b=None) -> BoundResult:
    """Closed-form bounds for two models (docs/maths.md §4, §10.1 and §4.4).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    energy : float
        The budget E on ||x||_2.
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5.
    link_a, link_b, bias_a, bias_b
        As for :func:`bhtcli.commands.design`. With a poly link no certificate exists (fields None,
        `certificate.note` says why); taylor links get a valid but loose one.

    Returns
    -------
    BoundResult
    """
    import time

    from bhtcli.io.load import load_pair
    from bhtcli.io.validation import check_energy, check_error
    from bhtcli.models.readout import make_readout

    t0 = time.perf_counter()
    energy, error = check_energy(energy), check_error(error)
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = make_readout(A.shape[0], link_a, link_b, bias_a, bias_b)
    facts = analyse_pair(A, B, centred_difference(A, B), energy, readout)
    eps = facts.eps_2inf
    paper = (1.0 / (eps * energy) ** 2
             if readout.exp_links and facts.distinguishable and eps > 0 else None)
    return BoundResult("softmax", A.shape[0], A.shape[1], energy, error, facts.distinguishable,
                       facts.reason, eps, paper, certificate=certificate_record(facts, error),
                       readout=readout.description, seconds=time.perf_counter() - t0)
