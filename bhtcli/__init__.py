"""bht: design optimal queries under an energy budget to tell two softmax models apart.

The Python API (docs/api.md): one function per command, taking arrays or paths and the options
of the CLI command of the same name, returning the result object whose ``to_dict()`` is what
``bht COMMAND --json`` prints.

    >>> from bhtcli import design
    >>> r = design("examples/A.npy", "examples/B.npy", 1.0)      # doctest: +SKIP
    >>> r.samples["predicted"]                                     # doctest: +SKIP
    8
"""
__version__ = "0.1.0"

from bhtcli.api import bound, decide, design, sample, simulate  # noqa: E402
from bhtcli.commands.decide import DecideResult  # noqa: E402
from bhtcli.commands.design import BudgetCurveResult, DesignResult, NotReachable  # noqa: E402
from bhtcli.commands.leverage_design import LeverageBoundResult  # noqa: E402
from bhtcli.commands.candidates import RankResult, rank  # noqa: E402
from bhtcli.commands.shift import ShiftResult, shift  # noqa: E402
from bhtcli.commands.simulate import SimulateResult  # noqa: E402
from bhtcli.errors import BhtError, InputError, SolverError  # noqa: E402
from bhtcli.io.load import load_matrix  # noqa: E402
from bhtcli.maths.bounds import BoundResult  # noqa: E402
from bhtcli.models.spec import ModelSpec  # noqa: E402
from bhtcli.sweep.driver import SweepResult, sweep  # noqa: E402

__all__ = ["design", "bound", "sample", "decide", "simulate", "shift", "sweep", "rank", "load_matrix",
           "ModelSpec", "DesignResult", "BudgetCurveResult", "NotReachable", "BoundResult", "LeverageBoundResult", "DecideResult",
           "SimulateResult", "ShiftResult", "RankResult", "SweepResult", "BhtError", "InputError", "SolverError",
           "__version__"]
