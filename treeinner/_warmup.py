"""Compile and cache the Numba kernels before the first real call (``treeinner warm-up``).

treeinner's kernels are compiled on first use and cached on disk (Numba's ``cache=True``: next
to the installed sources when that directory is writable, else in the user's cache directory
or ``NUMBA_CACHE_DIR``). A container image, a CI cache or a shared environment can pay that
once, at build time, by running ``treeinner warm-up``: it trains small native models (squared
error, logistic, softmax) on generated data and runs every registered method on them, with
and without standard errors, so that every later process, whatever booster its model came
from, loads the kernels instead of compiling them. The kernels' types do not depend on the
booster (every adapter builds the same ``TreeEnsemble`` arrays), so the native models stand in
for all of them: shallow trees, and trees deeper than the top layout, which take the general
router (the kernels' two specialisations, see ``kernels.routing.general_nodes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np


def _data(n: int = 400, d: int = 5) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X[::23, 1] = np.nan
    signal = X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    labels = {
        "squared_error": signal + rng.normal(size=n),
        "logistic": (signal + rng.normal(size=n) > 0.5).astype(np.float64),
        "softmax": np.digitize(signal + rng.normal(size=n), [0.0, 1.0]).astype(np.float64),
    }
    return X, labels


def _attributions(model: Any, X: np.ndarray, y: np.ndarray) -> None:
    """Every per-row attribution and the leaf indices of ``model`` on ``X``."""
    from . import (
        from_model,
        predecomp,
        saabas,
        tree_inner,
        tree_inner_interactions,
        tree_shap,
        tree_shap_interactions,
        tree_shap_interventional,
    )

    predecomp(model, X)
    saabas(model, X)
    tree_shap(model, X)
    tree_shap_interactions(model, X)
    tree_shap_interventional(model, X, X[:20])
    tree_inner(model, X, y, attribution="interventional", background=X[:20])
    tree_inner_interactions(model, X, y)
    from_model(model).leaf_index(X)


def warm_up(report: Callable[[str, float], None] | None = None) -> float:
    """Compile (or load from the cache) the kernels of every method and of the native booster.

    Parameters
    ----------
    report : callable, optional
        Called as ``report(step, seconds)`` after each step.

    Returns
    -------
    float
        Seconds taken in total.
    """
    from . import importance
    from ._methods import REGISTRY
    from .booster import GBMClassifier, GBMRegressor
    from .kernels.routing import TOP_DEPTH

    start = time.perf_counter()
    X, labels = _data()
    methods = list(REGISTRY)

    def step(name: str, fn: Callable[[], object]) -> None:
        t = time.perf_counter()
        fn()
        if report is not None:
            report(name, time.perf_counter() - t)

    # stumps (oblivious trees, whose TreeSHAP values come from leaf tables, as CatBoost's),
    # shallow trees, and trees deeper than the top layout (the routing kernels' other
    # specialisation, ``kernels.routing.general_nodes``: deep trees and categorical splits, as
    # LightGBM's, take the general router)
    for objective, y in labels.items():
        for depth in (1, 3, TOP_DEPTH + 1):
            cls = GBMRegressor if objective == "squared_error" else GBMClassifier
            est = cls(n_estimators=6 if depth == 3 else 2, max_depth=depth)
            what = f"{objective}, depth {depth}"
            step(f"{what}: native booster", partial(est.fit, X, y))
            step(
                f"{what}: every method",
                partial(importance, est, X, y, methods=methods, random_state=0),
            )
            step(
                f"{what}: standard errors",
                partial(importance, est, X, y, methods=methods, random_state=0, se=True),
            )
            step(f"{what}: attributions", partial(_attributions, est, X, y))
    y = labels["squared_error"]
    step(
        "native booster, split='unbiased'",
        lambda: GBMRegressor(n_estimators=4, max_depth=3, split="unbiased", random_state=0).fit(
            X, y
        ),
    )
    # categorical features of the native booster (codes declared categorical): its category
    # binning and partition search
    codes = X.copy()
    codes[:, 2] = np.arange(len(codes)) % 7
    step(
        "native booster, categorical features",
        lambda: GBMRegressor(
            n_estimators=2, max_depth=3, categorical_features=[2], min_data_per_group=5
        ).fit(codes, y),
    )
    # split="pvalue": the p-values of numeric and categorical splits, the stopping rule
    step(
        "native booster, split='pvalue'",
        lambda: GBMRegressor(
            n_estimators=2, max_depth=3, categorical_features=[2], min_data_per_group=5,
            split="pvalue", min_split_pvalue=0.5,
        ).fit(codes, y),
    )  # fmt: skip
    # feature-selecting boosting: the penalised split pick and the group test's kernels
    step(
        "native booster, feature_penalty and split_search='group_test'",
        lambda: GBMRegressor(
            n_estimators=2, max_depth=3, feature_penalty=0.01, penalty_scaling="root",
            split_search="group_test", n_select=2, categorical_features=[2],
            min_data_per_group=5,
        ).fit(codes, y),
    )  # fmt: skip
    return time.perf_counter() - start
