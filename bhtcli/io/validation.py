"""The one place where inputs are checked (scikit-learn's check_array habit)."""
from __future__ import annotations

import math

import numpy as np

from bhtcli.errors import InputError, parameter_name


BLOCK_ROWS = 4096  # memory maps are checked and converted this many rows at a time


def check_matrix(array, name: str, dtype="float64", max_entry: float = math.inf) -> np.ndarray:
    """Return `array` as a finite 2-D matrix of `dtype`, or raise InputError naming `name`.

    Parameters
    ----------
    array : array_like
        The candidate matrix. A memory map already of `dtype` is returned as it is (no copy);
        any other dtype (float16, bfloat16, integers, the other float) is converted into one
        new array, block by block, so a memory map is streamed rather than copied twice.
    name : str
        How the user knows this input (a file name), used in messages.
    max_entry : float
        Refuse larger magnitudes, naming `name` (models: MAX_ENTRY, beyond which row norms
        overflow).
    dtype : {"float64", "float32", None}
        Float type of the result (default float64). None keeps float32 and float64 as they
        are (a memory map stays one: for code that converts row blocks itself), up-casts
        float16 and bfloat16 to float32 (exact) and anything else to float64.

    Returns
    -------
    numpy.ndarray
        A 2-D float array (n rows, d columns), n >= 1 and d >= 1.

    Raises
    ------
    InputError
        Object, string, complex or boolean dtype; not 2-D; empty; NaN or Inf (also when a
        finite value overflows float32).
    """
    arr = np.asarray(array) if not isinstance(array, np.ndarray) else array
    if arr.dtype == object:
        raise InputError(f"{name} holds Python objects; bht reads numeric arrays only "
                         "(save it with numpy.save of a float array)")
    if arr.dtype.kind not in "iuf" and arr.dtype.name != "bfloat16":
        raise InputError(f"{name} has dtype {arr.dtype}, expected real numbers (float or int)")
    if arr.ndim == 1:
        raise InputError(f"{name} has shape {arr.shape}, expected a 2-D matrix; "
                         "for a single column use x.reshape(-1, 1), for a single row x.reshape(1, -1)")
    if arr.ndim != 2:
        raise InputError(f"{name} has shape {arr.shape}, expected a 2-D matrix (n rows, d columns); "
                         "select one slice or reshape it to (n, d)")
    if arr.size == 0:
        raise InputError(f"{name} is empty (shape {arr.shape}); it needs at least one row and one column")
    dtype = _stored_float(arr.dtype) if dtype is None else np.dtype(check_dtype(dtype, "dtype"))
    out = arr if arr.dtype == dtype else np.empty(arr.shape, dtype=dtype)
    for start in range(0, arr.shape[0], BLOCK_ROWS):
        block = arr[start:start + BLOCK_ROWS]
        if out is not arr:
            with np.errstate(over="ignore"):  # float64 -> float32 overflow is reported below
                out[start:start + BLOCK_ROWS] = block
            block = out[start:start + BLOCK_ROWS]
        largest = float(np.abs(block).max())        # NaN when the block holds one
        if not (largest <= max_entry and math.isfinite(largest)):
            if math.isfinite(largest):
                raise InputError(f"{name} has values up to {largest:.3g}; beyond {max_entry:g} its row "
                                 f"norms overflow float64 (and logits beyond {MAX_LOGIT:g} mean "
                                 "nothing in float64 softmax): rescale the matrix")
            raise InputError(_not_finite(arr[start:start + BLOCK_ROWS], name, dtype))
    return out


MAX_ENTRY = 1e150       # squares of larger entries overflow float64's row norms


def _stored_float(stored: np.dtype) -> np.dtype:
    if stored in (np.float32, np.float64):
        return stored
    if stored == np.float16 or stored.name == "bfloat16":
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _not_finite(source_block: np.ndarray, name: str, dtype: np.dtype) -> str:
    if np.isfinite(source_block.astype(np.float64)).all():
        return (f"{name} has values beyond the {dtype.name} range (largest magnitude "
                f"{float(np.abs(source_block.astype(np.float64)).max()):.3g}); use {parameter_name('dtype')} float64")
    return f"{name} contains NaN or Inf; replace them with finite numbers"


def check_pair(A: np.ndarray, B: np.ndarray, name_a: str = "A", name_b: str = "B") -> None:
    """Raise InputError unless A and B have the same shape (same n answers, same query size d)."""
    if A.shape != B.shape:
        raise InputError(f"{name_a} has shape {A.shape} but {name_b} has shape {B.shape}; "
                         "both models need the same number of rows (answers) and columns (query size)")


def check_scalar(value, name: str, kind: str, *, low: float | None = None,
                 high: float | None = None, low_open: bool = False, high_open: bool = False,
                 what: str = "", example: str = ""):
    """One scalar parameter checked against its type and range (as scikit-learn's
    check_scalar); every scalar checker of bht is written with it.

    Parameters
    ----------
    value : object
        What the caller gave.
    name : str
        How messages name it (a library parameter name, or the CLI's flag).
    kind : {"whole", "real"}
        A whole number (bools refused; 3.0 accepted as 3) or a finite real number.
    low, high : float, optional
        The range; `low_open`/`high_open` exclude the ends.
    what, example : str
        Added to the message: what the number counts, an example value.

    Returns
    -------
    int or float

    Raises
    ------
    InputError
        One message naming `name`, the requirement and the value given.
    """
    if kind == "whole":
        try:
            ok = not isinstance(value, bool) and float(value) == int(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
        v = int(value) if ok else None
        number = "a whole number"
    else:
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a number, got {value!r}") from None
        ok = math.isfinite(v)
        number = "a finite number"
    if ok and low is not None:
        ok = v > low if low_open else v >= low
    if ok and high is not None:
        ok = v < high if high_open else v <= high
    if ok:
        return v
    if low is not None and high is not None:
        bounds = (f"lie strictly between {low:g} and {high:g}" if low_open and high_open else
                  f"lie between {low:g} and {high:g}")
        requirement = f"must {bounds}"
    elif low is not None:
        requirement = f"must be {number} {'>' if low_open else '>='} {low:g}"
    else:
        requirement = f"must be {number}"
    extra = f" ({what})" if what else ""
    hint = f" (e.g. {example})" if example else ""
    raise InputError(f"{name} {requirement}{extra}, got {value!r}{hint}")


def check_energy(energy: float, option: str | None = None) -> float:
    """Return the energy budget E as float; it must be finite and > 0."""
    option = parameter_name("energy") if option is None else option
    return check_positive(energy, option)


def check_positive(value, option: str) -> float:
    """`value` as a float that is finite and > 0 (an energy, a learning rate)."""
    if value is None:
        raise InputError(f"{option} is required here (a finite number > 0, e.g. {option} 1.0)")
    return check_scalar(value, option, "real", low=0.0, low_open=True)


def check_error(error: float, option: str | None = None) -> float:
    """Return the target error probability alpha; it must lie strictly between 0 and 0.5."""
    option = parameter_name("error") if option is None else option
    return check_scalar(error, option, "real", low=0.0, high=0.5, low_open=True, high_open=True,
                        example="0.05")


def check_starts(starts: int, option: str | None = None) -> int:
    """Return the number of starting points; at least 1."""
    option = parameter_name("starts") if option is None else option
    return check_scalar(starts, option, "whole", low=1)


def check_query(array, name: str, length: int, what: str = "the query x") -> np.ndarray:
    """Return a query as a finite float64 vector of `length` entries.

    (d,), (d, 1) and (1, d) arrays are accepted: a query saved by `--out` is (d,).
    """
    arr = np.asarray(array)
    if arr.dtype == object or (arr.dtype.kind not in "iuf" and arr.dtype.name != "bfloat16"):
        raise InputError(f"{name} has dtype {arr.dtype}, expected real numbers")
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InputError(f"{name} has shape {arr.shape}, expected {what} as a vector of {length} numbers")
    if arr.shape[0] != length:
        per = "one per row of A" if "row" in what else "one per column of A"
        raise InputError(f"{name} has {arr.shape[0]} entries but the models need {length} "
                         f"({per}); use the query designed for these models")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise InputError(f"{name} contains NaN or Inf")
    return arr


def check_seed(seed, option: str | None = None) -> int:
    """A random seed: a whole number >= 0."""
    option = parameter_name("seed") if option is None else option
    return check_scalar(seed, option, "whole", low=0)


MAX_LOGIT = 1e12     # beyond this float64 logits are spaced > 1e-4 apart: softmax is meaningless
MIN_LOGIT = 1e-100   # below this every H^2 underflows far past float64 resolution


def check_logit_scale(energy: float, max_row_norm: float, visible_norm: float | None = None) -> None:
    """The largest possible logit E * max_i ||row_i|| must stay in [1e-100, 1e12].

    visible_norm (exp links): max_i ||row_i - row_0||, the size of what the softmax sees (a
    vector common to every row, e.g. a constant column, only shifts all logits alike). The
    lower limit is decided on it. The upper one stays on the stored rows: bht's float64
    scores are computed from them, so their size sets the resolution; the message then says
    when the excess is a common part the softmax ignores."""
    scale = energy * max_row_norm
    seen = scale if visible_norm is None else energy * visible_norm
    if max_row_norm > 0 and scale > MAX_LOGIT:
        common = ""
        if visible_norm is not None and seen <= MAX_LOGIT:
            common = (f"; the softmax sees only {seen:.3g} (each row minus the first): the rest is a part "
                      "common to every row, which it ignores, so subtract it (e.g. the mean row) from both "
                      "matrices")
        raise InputError(f"{parameter_name('energy')} {energy:g} allows logits up to {scale:.3g} (E times the largest row "
                         f"norm {max_row_norm:.3g}); float64 softmax is meaningful up to {MAX_LOGIT:g}: "
                         f"lower {parameter_name('energy')} or rescale the matrices" + common)
    if max_row_norm > 0 and 0 < seen < MIN_LOGIT:      # 0: every row alike, both answer uniformly
        what = ("logits of at most" if visible_norm is None else
                "logit differences (what the softmax sees: each row minus the first) of at most")
        raise InputError(f"{parameter_name('energy')} {energy:g} allows {what} {seen:.3g}; below {MIN_LOGIT:g} "
                         f"no query separates the models in float64: raise {parameter_name('energy')}")


def check_count(count, option: str | None = None) -> int:
    """A number of answers: a whole number >= 1."""
    option = parameter_name("count") if option is None else option
    if isinstance(count, bool) or int(count) != count or count < 1:
        raise InputError(f"{option} must be a whole number >= 1, got {count!r}")
    return int(count)


DTYPES = ("float64", "float32")


def check_dtype(dtype, option: str | None = None) -> str:
    """The precision of the large products: "float64" (default) or "float32" (or numpy's types)."""
    option = parameter_name("dtype") if option is None else option
    if dtype is None or isinstance(dtype, str):
        name = str(dtype).lower() if dtype is not None else "float64"
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    if name not in DTYPES:
        raise InputError(f"{option} must be float64 or float32, got {dtype!r}")
    return name


def check_top(top, option: str | None = None) -> int:
    """How many of the best candidates to list: a whole number >= 1."""
    option = parameter_name("top") if option is None else option
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError(f"{option} must be a whole number >= 1, got {top!r}")
    return int(top)


def check_energies(energies, option: str | None = None) -> list:
    """A list of budgets, each finite and > 0, strictly increasing."""
    option = parameter_name("energy") if option is None else option
    values = [check_energy(e, option) for e in energies]
    if not values:
        raise InputError(f"{option} needs at least one budget")
    for a, b in zip(values, values[1:]):
        if b <= a:
            raise InputError(f"{option} lists budgets in increasing order without repeats; "
                             f"got {b:g} after {a:g}")
    return values


def energies_of(value, option: str | None = None) -> list:
    """The budgets in `value`: a number, a sequence, or a comma list ("0.5,1,2,4"), checked by
    :func:`check_energies` (each finite and > 0, strictly increasing)."""
    option = parameter_name("energy") if option is None else option
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if any(p == "" for p in parts):
            raise InputError(f"{option} {value}: give a number or an increasing comma list (0.5,1,2,4)")
        return check_energies(parts, option)
    if isinstance(value, (list, tuple, np.ndarray)):
        return check_energies(list(value), option)
    return check_energies([value], option)


def check_queries(queries, option: str | None = None) -> int:
    """A number of queries: a whole number >= 1."""
    option = parameter_name("queries") if option is None else option
    return check_scalar(queries, option, "whole", low=1, what="a number of queries")
