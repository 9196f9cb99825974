"""`bound`: the closed-form certificate, no optimisation (docs/maths.md §4)."""
from __future__ import annotations

from dataclasses import replace

from bhtcli.analysis.diameter import centred_difference
from bhtcli.analysis.facts import analyse_pair, certificate_record
from bhtcli.commands.tensors import same_heads_note
from bhtcli.models.spec import ModelSpec
from bhtcli.results import BoundResult


def bound(A, B, spec: ModelSpec, error: float = 0.05, certificate: str = "fast",
          progress=None) -> BoundResult:
    """Closed-form bounds for two models (docs/maths.md §4, §10.1 and §4.4).

    Parameters
    ----------
    A, B : array_like or path
        The two n x d models (paths are read with :func:`bhtcli.load_matrix`).
    spec : ModelSpec
        The softmax-family settings with the budget E on ||x||_2. With a poly link no
        certificate exists (fields None, `certificate.note` says why); taylor links get a valid
        but loose one.
    error : float
        Target error alpha for both error types, 0 < alpha < 0.5 (checked by the caller).
    certificate : {"fast", "exact"}
        "exact" adds the bilinear ceiling (docs/maths.md §4.14): an n x n matrix in memory and
        a Cholesky factorisation (minutes at n = 30,000; refused above 40,000 rows).

    Returns
    -------
    BoundResult
    """
    import time

    from bhtcli.io.load import load_pair

    t0 = time.perf_counter()
    energy = spec.energy
    sources = (A, B)
    A, B = load_pair(A, B, dtype=None)  # as stored: every use converts row blocks
    readout = spec.readout(A.shape[0])
    facts = analyse_pair(A, B, centred_difference(A, B), energy, readout)
    if not facts.distinguishable:          # two GGUF builds: say what else differs
        facts = replace(facts, reason=same_heads_note(*sources, facts.reason))
    if certificate == "exact":
        from bhtcli.analysis.bilinear import with_bilinear_ceiling
        facts = with_bilinear_ceiling(facts, A, B, energy, readout, log=progress)
    eps = facts.eps_2inf
    paper = (1.0 / (eps * energy) ** 2
             if readout.exp_links and facts.distinguishable and eps > 0 else None)
    return BoundResult("softmax", A.shape[0], A.shape[1], energy, error, facts.distinguishable,
                       facts.reason, eps, paper, certificate=certificate_record(facts, error),
                       readout=readout.description, seconds=time.perf_counter() - t0)
