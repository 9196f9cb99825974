"""One entry per command that dispatches on the model family, so the CLI (and any caller)
never has to: which options go with which family is decided here, in library terms."""
from __future__ import annotations

from bhtcli.errors import InputError


def _no_floor(floor) -> None:
    if floor is not None:
        raise InputError("--floor applies to --model leverage only; softmax queries are bounded by "
                         "--energy on ||x||_2")


def _readout(model: str, link_a, link_b, bias_a, bias_b) -> dict:
    """The link/bias keyword arguments (refused for leverage models)."""
    settings = dict(link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b)
    if model == "leverage":
        from bhtcli.models.answers import check_no_readout
        check_no_readout(*settings.values())
        return {}
    return settings


def design_model(A, B, energy, *, model: str = "softmax", floor=None, error: float = 0.05,
                 seed: int = 0, starts=None, method: str = "lbfgs", dtype: str = "float64",
                 progress=None, link_a="exp", link_b="exp", bias_a=None, bias_b=None):
    """`design` for either model family (softmax family: :func:`bhtcli.commands.design.design`;
    leverage: :func:`bhtcli.commands.leverage_design.design_leverage`)."""
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    if model == "leverage":
        from bhtcli.commands.leverage_design import design_leverage
        if method != "lbfgs":
            raise InputError("--method ccp is for softmax models; leverage models use L-BFGS-B")
        if dtype != "float64":
            raise InputError("--dtype float32 is for softmax-family models; leverage models run in float64")
        return design_leverage(A, B, energy, floor, error=error, seed=seed, progress=progress,
                               starts=starts)
    from bhtcli.commands.design import design
    from bhtcli.search.optimize import DEFAULT_STARTS
    _no_floor(floor)
    return design(A, B, energy, error=error, seed=seed, method=method, progress=progress,
                  starts=DEFAULT_STARTS if starts is None else starts, dtype=dtype, **settings)


def bound_model(A, B, energy, *, model: str = "softmax", floor=None, error: float = 0.05,
                link_a="exp", link_b="exp", bias_a=None, bias_b=None):
    """`bound` for either model family."""
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    if model == "leverage":
        from bhtcli.commands.leverage_design import bound_leverage
        return bound_leverage(A, B, energy, floor, error=error)
    from bhtcli.maths.bounds import bound
    _no_floor(floor)
    return bound(A, B, energy, error=error, **settings)


def simulate_model(A, B, energy, *, model: str = "softmax", floor=None, dtype: str = "float64",
                   link_a="exp", link_b="exp", bias_a=None, bias_b=None, **options):
    """`simulate` for either model family (options as :func:`bhtcli.commands.simulate.simulate`)."""
    from bhtcli.commands.simulate import simulate
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    if model != "leverage":
        _no_floor(floor)
        settings["dtype"] = dtype
    elif dtype != "float64":
        raise InputError("--dtype float32 is for softmax-family models; leverage models run in float64")
    return simulate(A, B, energy, model=model, floor=floor, **options, **settings)


def decide_model(A, B, query, answers, *, model: str = "softmax", error: float = 0.05,
                 link_a="exp", link_b="exp", bias_a=None, bias_b=None):
    """`decide` for either model family; A and B must be files or arrays (stdin is the answers)."""
    from bhtcli.commands.decide import decide
    if (isinstance(A, str) and A == "-") or (isinstance(B, str) and B == "-"):
        raise InputError("A and B must be files for decide (standard input carries the answers)")
    settings = _readout(model, link_a, link_b, bias_a, bias_b)
    return decide(A, B, query, answers, error=error, model=model, **settings)
