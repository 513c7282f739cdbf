"""Compile and cache the Numba kernels before the first real call (``treeinner warm-up``).

treeinner's kernels are compiled on first use and cached on disk (Numba's ``cache=True``: next
to the installed sources when that directory is writable, else in the user's cache directory
or ``NUMBA_CACHE_DIR``). A container image, a CI cache or a shared environment can pay that
once, at build time, by running ``treeinner warm-up``: it trains small native models (squared
error, logistic, softmax) on generated data and runs every registered method on them, with
and without standard errors, so that every later process, whatever booster its model came
from, loads the kernels instead of compiling them. The kernels' types do not depend on the
booster (every adapter builds the same ``TreeEnsemble`` arrays), so the native models stand in
for all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

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
    from . import importance, predecomp, saabas, tree_shap
    from ._methods import REGISTRY
    from .booster import GBMClassifier, GBMRegressor

    start = time.perf_counter()
    X, labels = _data()
    methods = list(REGISTRY)

    def step(name: str, fn: Callable[[], object]) -> None:
        t = time.perf_counter()
        fn()
        if report is not None:
            report(name, time.perf_counter() - t)

    for objective, y in labels.items():
        if objective == "squared_error":
            est = GBMRegressor(n_estimators=6, max_depth=3)
        else:
            est = GBMClassifier(n_estimators=6, max_depth=3)
        step(f"{objective}: native booster", lambda e=est, y=y: e.fit(X, y))
        step(
            f"{objective}: every method",
            lambda m=est, y=y: importance(m, X, y, methods=methods, random_state=0),
        )
        step(
            f"{objective}: standard errors",
            lambda m=est, y=y: importance(m, X, y, methods=methods, random_state=0, se=True),
        )
        step(
            f"{objective}: attributions",
            lambda m=est: (predecomp(m, X), saabas(m, X), tree_shap(m, X)),
        )
    y = labels["squared_error"]
    step(
        "native booster, split='unbiased'",
        lambda: GBMRegressor(n_estimators=4, max_depth=3, split="unbiased", random_state=0).fit(
            X, y
        ),
    )
    return time.perf_counter() - start
