"""The model pair and its budget, built and validated once: which options go with which model.

Every entry point (the Python API, the CLI, sweep manifests, simulate) builds a `ModelSpec`
from the same settings -- model family, energy, floor, links, biases, dtype -- so the rules
below exist in one place:

- softmax family (``model="softmax"``): the budget is ||x||_2 <= energy (finite, > 0); a link
  and an optional bias per model (docs/maths.md §7.1); the search's dtype float64 or float32;
  no floor;
- leverage (``model="leverage"``): the box floor <= s_i^2 <= energy (docs/maths.md §6.1) with
  0 < floor <= energy; no links, no biases, float64 only.

Messages name parameters by their library names ("floor", "link_a"); the CLI shows its flags
instead (bhtcli.errors.parameter_names).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from bhtcli.errors import InputError, parameter_name
from bhtcli.models.links import EXP, Link, parse_link

FAMILIES = ("softmax", "leverage")
READOUT_OPTIONS = ("link_a", "link_b", "bias_a", "bias_b")


@dataclass(frozen=True)
class ModelSpec:
    """A validated model family with its budget and read-out settings.

    Attributes
    ----------
    family : {"softmax", "leverage"}
    energy : float or None
        softmax: the budget E on ||x||_2; leverage: the upper end C of c <= s_i^2 <= C. None
        for commands that take no budget (sample, decide).
    floor : float or None
        leverage only: the lower end c of the box.
    link_a, link_b : Link
        softmax family only: how each model turns scores into probabilities.
    bias_a, bias_b : array_like, path or None
        softmax family only: length-n biases, loaded against the models by :meth:`readout`.
    dtype : {"float64", "float32"}
        Precision of the search's products (softmax family only).
    energies : tuple of float or None
        A budget curve: the increasing budgets (`energy` is the largest); None for one budget.
    links, biases : tuple or None
        K >= 3 softmax models: each model's Link and bias (array or path, None: no bias), in
        the models' order (:func:`per_model`); None: every model plain softmax.
    """

    family: str = "softmax"
    energy: float | None = None
    floor: float | None = None
    link_a: Link = EXP
    link_b: Link = EXP
    bias_a: object = None
    bias_b: object = None
    dtype: str = "float64"
    energies: tuple | None = None
    links: tuple | None = None
    biases: tuple | None = None

    @classmethod
    def build(cls, model="softmax", energy=None, floor=None, *, link_a="exp", link_b="exp",
              bias_a=None, bias_b=None, dtype="float64", need_energy: bool = True,
              inputs=None, budget_list: bool = False) -> "ModelSpec":
        """Check the settings together and return the spec.

        Parameters
        ----------
        model : {"softmax", "leverage"} or ModelSpec
            The model family (a ModelSpec is returned as it is).
        energy, floor : float
            The budget (see the class docstring); `floor` only with leverage. `energy` may be
            an increasing list of budgets (or "0.5,1,2,4"): a budget curve, kept in `energies`.
        link_a, link_b : str, Link or None
            "exp" (default), "poly:K" or "taylor:K" with K even, "softcap:C"; None: the link
            the model's checkpoint declares (softcap:C for a `final_logit_softcapping`, see
            :func:`bhtcli.io.checkpoint.checkpoint_softcap`), else exp.
        bias_a, bias_b : array_like or path, optional
        dtype : {"float64", "float32"}
        need_energy : bool
            False for commands without a budget (sample, decide): energy may be None.
        inputs : sequence, optional
            The models (A, B) or (A,) as given (paths or arrays): where a link left as None
            is looked up.
        budget_list : bool
            True where a list of budgets is accepted (design); elsewhere a list is refused.

        Raises
        ------
        InputError
            An unknown family, an invalid number, or options that do not go with the family.
        """
        if isinstance(model, ModelSpec):
            return model
        if not (str(model).strip().lower() == "leverage"):
            link_a, link_b = checkpoint_links((link_a, link_b), inputs or ())
        from bhtcli.io.validation import check_dtype, check_energy
        family = str(model).strip().lower() if model is not None else "softmax"
        if family not in FAMILIES:
            raise InputError(f"{parameter_name('model')} must be one of {', '.join(FAMILIES)}, "
                             f"got {model!r}")
        energies, listed = None, _is_budget_list(energy)
        if listed and not budget_list:
            raise InputError(f"{parameter_name('energy')} takes one budget here, got {energy!r}; a list "
                             "of budgets (a budget curve) is for design")
        if listed:
            from bhtcli.io.validation import energies_of
            values = energies_of(energy, parameter_name("energy"))     # each checked once, here
            energy, energies = values[-1], (tuple(values) if len(values) > 1 else None)
        settings = dict(link_a=link_a, link_b=link_b, bias_a=bias_a, bias_b=bias_b)
        if family == "leverage":
            given = [name for name, v in settings.items() if not _is_default(v)]
            if given:
                raise InputError("links and biases apply to softmax models; leverage models "
                                 f"take neither (drop {', '.join(map(parameter_name, given))})")
            if check_dtype(dtype, parameter_name("dtype")) != "float64":
                raise InputError(f"{parameter_name('dtype')} float32 is for softmax-family models; "
                                 "leverage models run in float64")
            if energy is None and floor is None and not need_energy:
                return cls("leverage")
            C, c = check_box(energy, floor)
            if energies:
                check_box(energies[0], floor)         # the smallest box holds the floor too
            return cls("leverage", C, c, energies=energies)
        if floor is not None:
            raise InputError(f"{parameter_name('floor')} applies to {parameter_name('model')} leverage "
                             f"only; softmax queries are bounded by {parameter_name('energy')} on ||x||_2")
        if not listed and (energy is not None or need_energy):
            energy = check_energy(energy, parameter_name("energy"))
        return cls("softmax", energy, None,
                   parse_link(link_a, parameter_name("link_a")), parse_link(link_b, parameter_name("link_b")),
                   bias_a, bias_b, check_dtype(dtype, parameter_name("dtype")), energies)

    @property
    def leverage(self) -> bool:
        return self.family == "leverage"

    @property
    def box(self) -> tuple[float, float]:
        """(C, c) of a leverage spec."""
        return self.energy, self.floor

    def readout(self, n: int):
        """The links with the biases loaded and checked against n rows (softmax family)."""
        from bhtcli.models.readout import make_readout
        return make_readout(n, self.link_a, self.link_b, self.bias_a, self.bias_b)

    def kway_readouts(self, n: int):
        """K models' read-outs (models/kway_readout.py: KReadouts) with the biases loaded and
        checked against n rows."""
        from bhtcli.models.kway_readout import make_kreadouts
        return make_kreadouts(n, self.links, self.biases)

    def with_models(self, links, biases, inputs=None) -> "ModelSpec":
        """This spec with K models' links and biases (checked by :func:`per_model`); links
        None: each model's checkpoint among `inputs` (the models as given) declares its link
        (softcap:C, with a note), else exp, as for a pair (:func:`checkpoint_links`). All
        plain: the spec as it is."""
        from dataclasses import replace
        if links is None and inputs and not self.leverage:
            links = tuple(checkpoint_links((None,) * len(inputs), inputs, pair=False))
        if links is None and biases is None:
            return self
        if self.leverage:
            raise InputError(f"{parameter_name('model')} leverage compares two models at a time "
                             f"and takes no {parameter_name('links')} or {parameter_name('biases')}")
        K = len(links if links is not None else biases)
        links = tuple(EXP for _ in range(K)) if links is None else links
        biases = (None,) * K if biases is None else biases
        if all(link.is_exp for link in links) and all(b is None for b in biases):
            return self
        return replace(self, links=tuple(links), biases=tuple(biases))

    def readout_options(self) -> dict:
        """link_a, link_b, bias_a, bias_b as keyword arguments (empty for leverage)."""
        if self.leverage:
            return {}
        return dict(link_a=self.link_a, link_b=self.link_b, bias_a=self.bias_a, bias_b=self.bias_b)


def per_model(values, K: int, option: str, link: bool) -> tuple | None:
    """A value per model, in the models' order: a list or tuple, or a comma list (the CLI's
    "exp,softcap:30,exp"; an empty entry or "none" is no bias). Links are parsed; biases stay
    as given (loaded against the models' rows later). InputError naming `option` when the
    count is not K."""
    if values is None:
        return None
    items = [v.strip() for v in values.split(",")] if isinstance(values, str) else list(values)
    name = parameter_name(option)
    if len(items) != K:
        raise InputError(f"{name} gives {len(items)} value{'s' * (len(items) != 1)} for {K} "
                         f"models: one per model, in their order (e.g. "
                         f"{'exp,softcap:30,exp' if link else 'b1.npy,,b3.npy'}"
                         f"{'' if link else '; an empty entry: no bias'})")
    if link:
        return tuple(parse_link(v if v != "" else "exp", f"{name} (model {k + 1})")
                     for k, v in enumerate(items))
    empty = lambda v: v is None or (isinstance(v, str) and v.strip().lower() in ("", "none"))
    return tuple(None if empty(v) else v for v in items)


def readout_lists(models, links, biases, link_a, link_b, bias_a, bias_b, split: bool = True):
    """(link_a, link_b, bias_a, bias_b, links, biases): `links` and `biases` checked, one
    per model (:func:`per_model`). Two models that the command runs as a pair
    (`split`): they become link_a .. bias_b, so a pair is the pair design whichever way it
    is spelt; else they stay per model, and the pair's options are refused (they name model
    A and model B)."""
    if links is None and biases is None:
        return link_a, link_b, bias_a, bias_b, None, None
    pair = [k for k, v in (("link_a", link_a), ("link_b", link_b), ("bias_a", bias_a),
                           ("bias_b", bias_b)) if v is not None]
    given = [k for k, v in (("links", links), ("biases", biases)) if v is not None]
    if pair:
        raise InputError(f"{', '.join(map(parameter_name, given))} and "
                         f"{', '.join(map(parameter_name, pair))} both set read-outs: give the "
                         "per-model list alone")
    if models is None:
        raise InputError(f"{', '.join(map(parameter_name, given))} gives one value per model "
                         "of a list of models; for A and B use "
                         f"{parameter_name('link_a')}, {parameter_name('bias_a')} ...")
    K = len(models)
    links, biases = per_model(links, K, "links", True), per_model(biases, K, "biases", False)
    if K == 2 and split:
        return (*(links or (None, None)), *(biases or (None, None)), None, None)
    return None, None, None, None, links, biases


def checkpoint_links(links, inputs, pair: bool = True, softcap=None) -> list:
    """Each link given as None: softcap:C when its model (the same place in `inputs`) is a
    checkpoint declaring final_logit_softcapping C, with a note naming the file and the option
    that sets the link; else exp. The rule of pairs (link_a, link_b: model A, model B) and of K
    models and sweep manifests (`pair` False: model k, the option links). `softcap`: the
    look-up (default :func:`bhtcli.io.checkpoint.checkpoint_softcap`; a manifest caches it)."""
    out = []
    for k, (link, spec) in enumerate(zip(links, (*inputs, *(None,) * len(links)))):
        if link is None:
            if softcap is None:
                from bhtcli.io.checkpoint import checkpoint_softcap as softcap
            cap = softcap(spec)
            link = EXP if cap is None else Link("softcap", cap=cap)
            if not link.is_exp:
                from bhtcli.errors import note
                model, option = ((f"model {'AB'[k]}", "link_" + "ab"[k]) if pair
                                 else (f"model {k + 1}", "links"))
                note(f"{spec} declares final_logit_softcapping {link.cap:g}: {model} reads out "
                     f"with {link.name} (set {parameter_name(option)} to change it)")
        out.append(link)
    return out


def _is_budget_list(energy) -> bool:
    """A list of budgets ([0.5, 1], an array, "0.5,1"), rather than one number."""
    if isinstance(energy, str):
        return "," in energy
    return isinstance(energy, (list, tuple)) or getattr(energy, "ndim", 0) == 1


def _is_default(value) -> bool:
    if value is None:
        return True
    if isinstance(value, Link):
        return value.is_exp
    return isinstance(value, str) and value.strip().lower() == "exp"


def check_box(energy, floor) -> tuple[float, float]:
    """(C, c) for the leverage box c <= s_i^2 <= C (floor = c, energy = C)."""
    e, f = parameter_name("energy"), parameter_name("floor")
    if floor is None:
        example = f"{e} 4 {f} 1" if f.startswith("-") else f"{e}=4, {f}=1"
        raise InputError(f"{f} is required: model leverage needs a floor (the box is "
                         f"{f.lstrip('-').upper()} <= s_i^2 <= {e.lstrip('-').upper()}, e.g. {example})")
    try:
        C, c = float(energy), float(floor)
    except (TypeError, ValueError):
        raise InputError(f"{e} and {f} must be numbers") from None
    if not (math.isfinite(c) and c > 0):
        raise InputError(f"{f} must be a finite number > 0, got {floor!r}")
    if not (math.isfinite(C) and C >= c):
        raise InputError(f"{e} must be a finite number >= {f} ({c:g}), got {energy!r}")
    return C, c


@dataclass(frozen=True)
class DesignOptions:
    """How a design searches and what it targets, checked once (by :meth:`build`) for every
    command that designs: design at one budget or many, `queries`, candidates, a subspace,
    simulate's designed query, sweep tasks.

    Attributes
    ----------
    error : float
        Target alpha for both error probabilities, 0 < alpha < 0.5.
    starts : int or None
        Exactly this many starting points (None: the default search; leverage: 6, or 3 when
        n d^2 > 1e7).
    seed : int
        Seed of the random starting points.
    max_starts : int or None
        Budget of the full search's adaptive rounds (None: the default, 128).
    method : {"lbfgs", "ccp"}
        softmax: batched projected L-BFGS, or the cvxpy cross-check.
    search_space : {"auto", "full", "sketch"}
        softmax: where the search climbs ("auto": the default pipeline).
    """

    error: float = 0.05
    starts: int | None = None
    seed: int = 0
    max_starts: int | None = None
    method: str = "lbfgs"
    search_space: str = "auto"

    @classmethod
    def build(cls, error=0.05, starts=None, seed=0, max_starts=None, method="lbfgs",
              search_space=None) -> "DesignOptions":
        """Check the settings together and return them.

        Raises
        ------
        InputError
            A value out of range, an unknown method or search space, or a sketched search
            given a number of starts (the sketch picks its own from its screens).
        """
        from bhtcli.io.validation import check_error, check_seed, check_starts
        from bhtcli.settings import DEFAULT_SEARCH_SPACE, DESIGN_METHODS, SEARCH_SPACES
        p = parameter_name
        if method not in DESIGN_METHODS:
            raise InputError(f"{p('method')} must be one of {', '.join(DESIGN_METHODS)}, got {method!r}")
        space = DEFAULT_SEARCH_SPACE if search_space is None else search_space
        if space not in SEARCH_SPACES:
            raise InputError(f"{p('search_space')} must be one of {', '.join(SEARCH_SPACES)}, "
                             f"got {search_space!r}")
        if space == "sketch" and (starts is not None or max_starts is not None):
            raise InputError(f"{p('search_space')} sketch picks its starts from its screens; "
                             f"{p('starts')} and {p('max_starts')} set those of the full search: "
                             "give one or the other")
        return cls(check_error(error), None if starts is None else check_starts(starts),
                   check_seed(seed), None if max_starts is None else check_starts(max_starts, p("max_starts")),
                   method, space)

    @property
    def rounds(self) -> int:
        """The adaptive rounds' budget of starts."""
        from bhtcli.settings import DEFAULT_MAX_STARTS
        return DEFAULT_MAX_STARTS if self.max_starts is None else self.max_starts

    @property
    def fixed_starts(self) -> int | None:
        """A number of starts the caller fixed (starts, else max_starts), or None: a fixed
        number asks for the full multistart search, so the size rule steps back."""
        return self.starts if self.max_starts is None else (self.starts or self.max_starts)
