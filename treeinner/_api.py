"""What every public function shares: one vocabulary of arguments, checks that name every valid
choice, old spellings refused with the new name, random states, results shaped per output."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from . import _calls, _format
from ._dask import is_dask
from ._errors import InputError, InputTypeError
from .ensemble import TreeEnsemble

#: The per-tree attributions, by the names every function, the CLI and the selector use.
ATTRIBUTIONS = ("predecomp", "saabas", "shap")

#: TreeInner's and ForestInner's attributions: also interventional TreeSHAP, which needs a
#: background data set (``tree_inner(..., attribution="interventional", background=...)``).
INNER_ATTRIBUTIONS = (*ATTRIBUTIONS, "interventional")

#: What path-dependent TreeSHAP weights a split's children by ("auto": the model's own).
NODE_WEIGHTS = ("auto", *_format.NODE_WEIGHTS)

#: Old argument names and what replaced them (same meaning, one name across the library).
RENAMED = {
    "train": "reference= (the training data, as everywhere else)",
    "trees": "iteration_range=(start, stop) (boosting rounds, as TreeEnsemble.predict_margin)",
    "kind": (
        'attribution="predecomp" | "saabas" (kind="regularized" is "predecomp", "mean" is '
        '"saabas", "data" is "predecomp" with reference=(X_train, y_train))'
    ),
    "weights": 'node_weight="auto" | "cover" | "count"',
    "X_valid": "X (the held-out rows, as every function calls them)",
    "y_valid": "y",
}

F = TypeVar("F", bound=Callable[..., Any])


def public(fn: F) -> F:
    """Give a public function clear TypeErrors for the calls its signature refuses.

    Arguments after the data are keyword-only: passing one positionally names the keywords to
    use; an old spelling (``train=``, ``trees=``, ``kind=``, ``weights=``, ``X_valid=``) names
    its replacement.
    """
    sig = inspect.signature(fn)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p.name for p in sig.parameters.values() if p.kind in kinds]
    keywords = [p.name for p in sig.parameters.values() if p.kind == inspect.Parameter.KEYWORD_ONLY]

    # methods are named with their class (Attribution.to_shap), functions by their name
    name = fn.__qualname__ if positional[:1] == ["self"] else fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(positional):
            extra = keywords[: len(args) - len(positional)]
            data = [a for a in positional if a != "self"]
            raise InputTypeError(
                f"{name}() takes {', '.join(data) or 'no arguments'} positionally; everything "
                f"after is keyword-only: pass {', '.join(f'{k}=...' for k in extra) or 'them'} "
                "by name."
            )
        for old in kwargs:
            if old in RENAMED and old not in sig.parameters:
                raise InputTypeError(f"{name}() no longer takes {old}=; use {RENAMED[old]}.")
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:  # an unknown keyword, a missing argument
            takes = ", ".join(p for p in sig.parameters if p != "self")
            raise InputTypeError(f"{e}; {name}() takes {takes}.") from None
        with _calls.entered(name, fn):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError listing every choice."""
    if not isinstance(value, str) or value not in choices:
        hint = ""
        if isinstance(value, str) and value.replace("tree_", "") in choices:
            hint = f" (did you mean {value.replace('tree_', '')!r}?)"
        raise InputError(
            f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}{hint}."
        )
    return value


def check_attribution(attribution: Any, allowed: Sequence[str] = ATTRIBUTIONS) -> str:
    """An attribution name, checked against the ones a function takes."""
    return check_choice("attribution", attribution, allowed)


# ------------------------------------------------------------------------------ arguments
class ParameterError(InputError, InputTypeError):
    """An argument of the wrong type for a count, a level or a flag: both a ``ValueError``
    and a ``TypeError`` (as scikit-learn's ``InvalidParameterError``), so callers catching
    either see it."""


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_count(name: str, value: Any, minimum: int = 1, *, optional: bool = False) -> Any:
    """``value`` as an int, checked to be an integer (not a bool, not a float) of at least
    ``minimum``: every count argument (``n_repeats``, ``n_draws``, ``top_k``, ``cv``, ...).
    With ``optional``, None is allowed (and returned).

    Raises
    ------
    ParameterError
        For a value that is not an integer (a ``ValueError`` and a ``TypeError``).
    InputError
        For an integer below ``minimum``.
    """
    if optional and value is None:
        return None
    what = f"{name} must be {'None or ' if optional else ''}an integer >= {minimum}"
    if not _is_integer(value):
        raise ParameterError(f"{what}, got {value!r}.")
    if value < minimum:
        raise InputError(f"{what}, got {value!r}.")
    return int(value)


def check_fraction(name: str, value: Any, upper: float = 1.0) -> float:
    """``value`` as a float strictly between 0 and ``upper``: every level and fraction
    argument (``alpha``, ``validation_fraction``)."""
    if not _is_real(value):
        raise ParameterError(
            f"{name} must be a number strictly between 0 and {upper:g}, got {value!r}."
        )
    if not 0.0 < float(value) < upper:  # NaN fails too
        raise InputError(
            f"{name} must be a number strictly between 0 and {upper:g}, got {value!r}."
        )
    return float(value)


def check_real(name: str, value: Any) -> float:
    """``value`` as a float: a real number, not NaN (infinities allowed: thresholds)."""
    if not _is_real(value):
        raise ParameterError(f"{name} must be a real number (not NaN), got {value!r}.")
    if np.isnan(float(value)):
        raise InputError(f"{name} must be a real number (not NaN), got {value!r}.")
    return float(value)


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool: True or False only (not a string, not a number)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_names(name: str, value: Any) -> Any:
    """``value`` if it is a name or an iterable of names (their spelling is checked where
    they are looked up)."""
    if not isinstance(value, str):
        try:
            iter(value)
        except TypeError:
            raise ParameterError(
                f"{name} must be a name or a list of names, got {value!r}."
            ) from None
    return value


def check_alpha(alpha: Any, upper: float = 1.0) -> float:
    """``alpha`` (an error rate: of intervals, tests, selection rules) as a float strictly
    between 0 and ``upper``."""
    return check_fraction("alpha", alpha, upper)


def check_in_memory(X: Any, name: str, hint: str, what: str = "rows") -> None:
    """An InputError naming ``name`` when ``X`` is a Dask collection, for the functions that
    take in-memory ``what`` only (``hint``: what to do instead, or why)."""
    if is_dask(X):
        raise InputError(
            f"{name} takes in-memory {what}; compute the Dask collection first ({hint})."
        )


def check_rows(X: Any, name: str = "X") -> int:
    """The number of rows of ``X``; an InputError when it has none (a score over no rows
    would be 0 for every feature, which no data supports). -1 for a Dask collection, whose
    partitions are checked where they are computed."""
    if is_dask(X):  # its row count is known only after a pass; the pass checks it
        return -1
    n = n_rows(X, name)
    if n == 0:
        raise InputError(f"{name} has no rows; scores need at least one.")
    return n


# ------------------------------------------------------------------------------ random states


def _check_random_state(random_state: Any) -> Any:
    if random_state is None or isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise InputError(f"random_state must be non-negative, got {random_state}.")
        return int(random_state)
    raise InputTypeError(
        f"random_state must be None, an int or a numpy Generator, got {type(random_state)}."
    )


def generator(random_state: Any) -> np.random.Generator:
    """The numpy Generator of ``random_state``: a Generator is used as it is, an int seeds a
    new one, None draws fresh entropy."""
    rs = _check_random_state(random_state)
    return rs if isinstance(rs, np.random.Generator) else np.random.default_rng(rs)


def seed64(random_state: Any) -> np.uint64:
    """A 64-bit seed for the kernels' own generators: an int as it is, a Generator's next draw,
    fresh entropy for None."""
    rs = _check_random_state(random_state)
    if isinstance(rs, int):
        return np.uint64(rs % 2**64)
    return np.uint64(generator(rs).integers(0, 2**64, dtype=np.uint64))


def child_generator(random_state: Any) -> np.random.Generator:
    """A Generator independent of the streams ``generator(random_state)`` and
    ``seed64(random_state)`` give (an int seeds a child of its seed sequence; a Generator is
    drawn from), for resampling on top of the estimates that used those."""
    rs = _check_random_state(random_state)
    if rs is None:
        return np.random.default_rng()
    if isinstance(rs, np.random.Generator):
        return np.random.default_rng(int(rs.integers(0, 2**63)))
    return np.random.default_rng(np.random.SeedSequence(rs).spawn(1)[0])


# ------------------------------------------------------------------------------ results
def n_rows(X: Any, name: str = "X") -> int:
    """Number of rows of an array, DataFrame, sparse matrix or sequence (``name`` is the
    argument's name in the error for anything else)."""
    shape = getattr(X, "shape", None)
    if isinstance(shape, tuple) and len(shape) >= 1:
        return int(shape[0])
    if shape is not None or X is None or isinstance(X, (str, bytes)) or not hasattr(X, "__len__"):
        raise InputTypeError(
            f"{name} must be a 2-D array, DataFrame or sparse matrix, got {type(X).__name__}."
        )
    return len(X)


def per_output(
    ens: TreeEnsemble, per_feature: np.ndarray, name: str, credited: bool = False
) -> pd.Series | pd.DataFrame:
    """(n_features, n_outputs) scores -> a Series, or for multi-output models a DataFrame with a
    column per class and ``total``. Scores over the kernels' columns are credited to the output
    features unless ``credited``."""
    names = list(ens.output_names)
    if not credited:
        per_feature = ens._to_output(per_feature)
    if ens.n_outputs == 1:
        return pd.Series(per_feature[:, 0], index=names, name=name)
    df = pd.DataFrame(
        per_feature, index=names, columns=[f"class_{c}" for c in range(ens.n_outputs)]
    )
    df["total"] = per_feature.sum(axis=1)
    return df


def total(result: pd.Series | pd.DataFrame) -> pd.Series:
    """The per-feature total over classes of a ``per_output`` result."""
    return result["total"] if isinstance(result, pd.DataFrame) else result
