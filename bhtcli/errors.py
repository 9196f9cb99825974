"""Domain errors. Only the CLI turns them into messages and exit codes."""


class BhtError(Exception):
    """Base class for every error bht raises on purpose."""


class InputError(BhtError):
    """A matrix file or an option is unusable; the message names it and the fix (exit 2)."""


class SolverError(BhtError):
    """A numerical method failed at run time (exit 1)."""


class OutputError(BhtError):
    """An output file or stream could not be written (disk full, permission denied): exit 1."""
