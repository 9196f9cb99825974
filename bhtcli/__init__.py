"""bht: design optimal queries under an energy budget to tell two softmax models apart.

The Python API (docs/api.md): one function per command, taking arrays or paths and the options
of the CLI command of the same name, returning the result object whose ``to_dict()`` is what
``bht COMMAND --json`` prints.

    >>> from bhtcli import design
    >>> r = design("examples/A.npy", "examples/B.npy", 1.0)      # doctest: +SKIP
    >>> r.samples["predicted"]                                     # doctest: +SKIP
    8

Every public name lives in :mod:`bhtcli.api`; importing the package loads nothing heavy until
a name is used (PEP 562).
"""
from bhtcli.settings import __version__  # one version, at the bottom layer

__all__ = ["design", "bound", "sample", "decide", "simulate", "shift", "sweep", "rank", "load_matrix",
           "ModelSpec", "DesignResult", "BudgetCurveResult", "NotReachable", "BoundResult",
           "LeverageBoundResult", "DecideResult", "SimulateResult", "ShiftResult", "RankResult",
           "SweepResult", "BhtError", "InputError", "SolverError", "__version__"]

# The subpackage bhtcli.sweep is loaded first, so that the name `sweep` stays the function
# (loading a subpackage later would set the package attribute to the module).
import bhtcli.sweep  # noqa: E402,F401
from bhtcli.api import bound, decide, design, sample, simulate, sweep  # noqa: E402,F401  (cheap: no numpy yet)


def __getattr__(name):
    if name in __all__:
        from bhtcli import api
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
