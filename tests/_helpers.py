"""Helpers shared by the test modules (``tests/conftest.py`` also offers them as fixtures).

* ``quiet`` and ``quiet_ensemble``: a call, or ``treeinner.from_model``, with its warnings
  silenced (converting an inexact model, e.g. one trained with subsampling, warns that
  PreDecomp is approximate; most tests convert such models on purpose).
* ``xgb_case`` and ``lgb_case``: the random XGBoost and LightGBM cases of ``tests._xgb_cases``
  and ``tests._lgb_cases``, each trained once per test process however many modules ask.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import treeinner


def quiet(fn: Any, *args: Any, category: type[Warning] = Warning, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with warnings of ``category`` silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category)
        return fn(*args, **kwargs)


def quiet_ensemble(model: Any, **kwargs: Any) -> treeinner.TreeEnsemble:
    """``treeinner.from_model(model, **kwargs)`` without its warnings."""
    return quiet(treeinner.from_model, model, **kwargs)


@functools.cache
def xgb_case(seed: int, n: int = 300) -> Any:
    """``tests._xgb_cases.make_case(seed, n)``, trained once per process."""
    from tests._xgb_cases import make_case

    return make_case(seed, n)


@functools.cache
def lgb_case(seed: int, n: int = 240, objective: str | None = None) -> Any:
    """``tests._lgb_cases.make_case(seed, n, objective)``, trained once per process."""
    from tests._lgb_cases import make_case

    return make_case(seed, n, objective)
