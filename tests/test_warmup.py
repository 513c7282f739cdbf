"""Tests of ``treeinner warm-up`` (treeinner._warmup): after it, models of every booster run
without compiling a kernel."""

from __future__ import annotations

import numpy as np
import pytest
from numba.core import event

import treeinner
from treeinner import cli


class _Compiles(event.Listener):
    def __init__(self) -> None:
        self.kernels: list[str] = []

    def on_start(self, ev: event.Event) -> None:
        fn = ev.data["dispatcher"].py_func
        if fn.__module__.startswith("treeinner"):
            self.kernels.append(f"{fn.__module__}.{fn.__qualname__}{ev.data['args']}")

    def on_end(self, ev: event.Event) -> None:
        pass


def _models(X, y, yb, y3):
    xgb = pytest.importorskip("xgboost")
    yield "xgboost", xgb.XGBRegressor(n_estimators=5, max_depth=3).fit(X, y), y
    yield "xgboost", xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, yb), yb
    yield "xgboost", xgb.XGBClassifier(n_estimators=3, max_depth=3).fit(X, y3), y3
    lgb = pytest.importorskip("lightgbm")
    opts = {"n_estimators": 5, "num_leaves": 7, "verbose": -1, "min_child_samples": 5}
    yield "lightgbm", lgb.LGBMRegressor(**opts).fit(X, y), y
    yield "lightgbm", lgb.LGBMClassifier(**opts).fit(X, yb), yb
    cb = pytest.importorskip("catboost")
    opts = {"iterations": 5, "depth": 3, "verbose": 0, "allow_writing_files": False}
    yield "catboost", cb.CatBoostRegressor(**opts).fit(X, y), y


def test_warm_up_covers_every_booster(capsys):
    assert cli.main(["warm-up"]) == 0
    out = capsys.readouterr().out
    assert "every method" in out and "in total" in out
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + rng.normal(size=300)
    yb = (y > 0).astype(np.float64)
    y3 = np.digitize(y, [-0.5, 0.5]).astype(np.float64)
    listener = _Compiles()
    event.register("numba:compile", listener)
    try:
        for name, model, target in _models(X, y, yb, y3):
            treeinner.importance(model, X, target, random_state=0)
            treeinner.tree_shap(model, X)
            assert listener.kernels == [], (name, listener.kernels)
    finally:
        event.unregister("numba:compile", listener)


def test_warm_up_compiles_both_router_specialisations():
    """The routing kernels have two specialisations (``general``: None for models of plain and
    oblivious trees, the node arrays where a tree needs the general router); warm-up trains a
    model of each kind and so loads or compiles both."""
    from numba.core import types

    from treeinner import _warmup
    from treeinner.booster import GBMRegressor
    from treeinner.kernels import attribution, routing, treeshap, unbiased

    X, labels = _warmup._data()
    deep = treeinner.from_model(
        GBMRegressor(n_estimators=2, max_depth=routing.TOP_DEPTH + 1).fit(
            X, labels["squared_error"]
        )
    )
    assert np.all(deep._layout.tree_flags & routing.TREE_DEEP)
    assert routing.general_nodes(deep._nodes(), deep._layout) is not None
    shallow = treeinner.from_model(
        GBMRegressor(n_estimators=2, max_depth=3).fit(X, labels["squared_error"])
    )
    assert routing.general_nodes(shallow._nodes(), shallow._layout) is None

    _warmup.warm_up()
    kernels = [
        (routing._margin_chunk, 2),
        (routing._leaf_index_chunk, 2),
        (attribution._staged_fast_chunk, 4),
        (unbiased._staged_single_chunk, 4),
        (attribution._path_chunk, 2),
        (treeshap._inner_chunk, 4),
    ]
    for kernel, pos in kernels:
        general = {sig[pos] == types.none for sig in kernel.signatures}
        assert general == {True, False}, (kernel, kernel.signatures)


def test_warm_up_covers_native_categorical_features():
    """After ``treeinner warm-up``, fitting the native booster with a categorical feature
    (integer codes or a pandas category column) compiles no kernel."""
    import pandas as pd

    from treeinner.booster import GBMClassifier

    assert cli.main(["warm-up"]) == 0
    rng = np.random.default_rng(2)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=300),
            "city": pd.Categorical(rng.choice([f"c{j}" for j in range(12)], size=300)),
        }
    )
    y = (X["a"] + (X["city"].cat.codes % 3 == 0) + rng.normal(size=300) > 0.5).astype(int)
    listener = _Compiles()
    event.register("numba:compile", listener)
    try:
        GBMClassifier(n_estimators=3, max_depth=3, min_data_per_group=10).fit(X, y)
        assert listener.kernels == [], listener.kernels
    finally:
        event.unregister("numba:compile", listener)
