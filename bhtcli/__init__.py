"""bht: design optimal queries under an energy budget to tell two softmax models apart.

    >>> from bhtcli import design, bound, load_matrix
    >>> result = design("A.npy", "B.npy", energy=1.0)       # doctest: +SKIP
    >>> result.samples["predicted"]                          # doctest: +SKIP
"""
from bhtcli.maths.bounds import BoundResult, bound
from bhtcli.commands.candidates import RankResult, rank
from bhtcli.commands.design import DesignResult, design
from bhtcli.errors import BhtError, InputError, SolverError
from bhtcli.io.load import load_matrix
from bhtcli.commands.shift import ShiftResult, shift

__version__ = "0.1.0"
__all__ = ["design", "bound", "shift", "rank", "load_matrix", "DesignResult", "BoundResult", "ShiftResult",
           "RankResult",
           "BhtError", "InputError", "SolverError", "__version__"]
