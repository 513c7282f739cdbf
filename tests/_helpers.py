"""Helpers shared by the test modules (``tests/conftest.py`` also offers them as fixtures).

* ``quiet`` and ``quiet_ensemble``: a call, or ``treeinner.from_model``, with its warnings
  silenced (converting an inexact model, e.g. one trained with subsampling, warns that
  PreDecomp is approximate; most tests convert such models on purpose).
* ``xgb_case`` and ``lgb_case``: the random XGBoost and LightGBM cases of ``tests._xgb_cases``
  and ``tests._lgb_cases``, each trained once per test process however many modules ask.
* ``task_data``: features with ties and NaN and a regression, binary or 3-class target, for the
  tests that compare one-pass moments with a slow reference.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

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


def task_data(seed: int, kind: str, n: int, p: int, tie: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of ``p`` normal features (column ``tie`` integer-valued, 8% NaN) and a
    ``kind`` ("regression", "binary" or "multiclass") target of columns 0, 1 and ``tie``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, tie] = rng.integers(0, 4, size=n)  # ties
    X[rng.random(X.shape) < 0.08] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) - 0.3 * np.nan_to_num(X[:, tie])
    if kind == "regression":
        y = 2.0 * s + rng.normal(size=n)
    elif kind == "binary":
        y = (s + rng.normal(size=n) > 0).astype(float)
    else:
        y = np.digitize(s + rng.normal(size=n), [-0.5, 0.5]).astype(float)
    return X, y


def leaf_nodes(ens: treeinner.TreeEnsemble, X: Any) -> np.ndarray:
    """Global leaf node of every row and tree, from the booster's leaf ids."""
    ids = ens.leaf_index(X)
    out = np.empty(ids.shape, dtype=np.int64)
    for t in range(ens.n_trees):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        nodes = np.arange(lo, hi)
        leaves = nodes[ens.left[lo:hi] < 0]
        lut = np.full(int(ens.leaf_id[leaves].max()) + 1, -1)
        lut[ens.leaf_id[leaves]] = leaves
        out[:, t] = lut[ids[:, t]]
    return out
