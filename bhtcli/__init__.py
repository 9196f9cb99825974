"""bht: design optimal queries under an energy budget to tell two softmax models apart.

    >>> from bhtcli import design, bound, load_matrix
    >>> result = design("A.npy", "B.npy", energy=1.0)       # doctest: +SKIP
    >>> result.samples["predicted"]                          # doctest: +SKIP
"""
from bhtcli.maths.bounds import BoundResult, bound
from bhtcli.commands.design import BudgetCurveResult, DesignResult, design, design_curve, design_for_queries
from bhtcli.errors import BhtError, InputError, SolverError
from bhtcli.io.load import load_matrix
from bhtcli.commands.shift import ShiftResult, shift

__version__ = "0.1.0"
__all__ = ["design", "design_curve", "design_for_queries", "bound", "shift", "load_matrix",
           "DesignResult", "BudgetCurveResult", "BoundResult", "ShiftResult",
           "BhtError", "InputError", "SolverError", "__version__"]
