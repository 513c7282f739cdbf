"""ForestInner through the staged pass's per-leaf sums (``kernels.attribution.staged_pass``
with ``forest``) against the slow per-row reference of ``tests/test_inner_moments.py``
(every row's path attribution summed over trees, times its summed negative gradient).

The staged pass records every row's leaf per tree for a block of rows, adds ``w S`` (S the
row's summed negative gradient) to those leaves once the block's S is final, and the per-node
subtree sums give the per-feature scores. Covered here beyond the small models of
``test_inner_moments``: squared error, logistic and softmax with weights, parallel trees,
trees deeper than the top layout, oblivious (CatBoost) trees on the slot path, several chunks
of rows over threads, and the fast single-output kernel and the general one on one model.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytest

from tests._helpers import quiet_ensemble, task_data
from tests.test_inner_moments import _reference
from treeinner._inner import forest_inner_sums, inner_values, tree_inner_sums
from treeinner._stats import moments_from_rows
from treeinner.kernels._threads import SERIAL_WORK
from treeinner.kernels.attribution import parents
from treeinner.kernels.routing import TREE_DEEP, TREE_OBLIVIOUS

xgb = pytest.importorskip("xgboost")


def _xgb(kind: str, depth: int = 4, rounds: int = 12, parallel: int = 1, n: int = 900):
    seed = {"regression": 21, "binary": 22, "multiclass": 23}[kind]
    X, y = task_data(seed, kind, n, 6, tie=3)
    obj = {"regression": "reg:squarederror", "binary": "binary:logistic"}.get(
        kind, "multi:softprob"
    )
    params = {"objective": obj, "max_depth": depth, "eta": 0.3, "seed": seed, "nthread": 1}
    params["num_parallel_tree"] = parallel
    if parallel > 1:
        params["subsample"] = 0.8
    if kind == "multiclass":
        params["num_class"] = 3
    n_train = n // 3
    model = xgb.train(params, xgb.DMatrix(X[:n_train], y[:n_train]), rounds)
    w = np.random.default_rng(seed).uniform(0.2, 3.0, size=n - n_train)
    return quiet_ensemble(model), X[n_train:], y[n_train:], w


@functools.cache
def _model(name: str):
    if name == "deep":  # trees deeper than the top layout (TOP_DEPTH levels)
        return _xgb("regression", depth=11, rounds=6, n=6000)
    if name == "parallel":
        return _xgb("binary", parallel=2)
    if name == "many_rows":  # rows x trees above SERIAL_WORK: several chunks
        return _xgb("regression", rounds=30, n=6000)
    if name.startswith("cb_"):
        cb = pytest.importorskip("catboost")
        kind = name[3:]
        X, y = task_data(31, kind, 1500, 5, tie=3)
        loss = {"regression": "RMSE", "binary": "Logloss"}.get(kind, "MultiClass")
        model = cb.CatBoostRegressor if kind == "regression" else cb.CatBoostClassifier
        m = model(iterations=15, depth=4, loss_function=loss, verbose=False, random_seed=0,
                  thread_count=1)  # fmt: skip
        m.fit(X[:500], y[:500])
        w = np.random.default_rng(5).uniform(0.2, 3.0, size=1000)
        return quiet_ensemble(m), X[500:], y[500:], w
    return _xgb(name)


def _expected(ens, X, y, values, w):
    lr = float(np.mean(ens.learning_rate))
    parent = parents(ens.left, ens.right)
    dg = np.where(parent >= 0, values - values[np.maximum(parent, 0)], 0.0) / lr
    return moments_from_rows(_reference(ens, X, y, dg, np.zeros_like(dg), forest=True), w).s1


def _close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


NAMES = ["regression", "binary", "multiclass", "deep", "parallel", "many_rows"]
NAMES += ["cb_regression", "cb_binary", "cb_multiclass"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("weighted", [False, True])
def test_forest_inner_matches_the_per_row_reference(name, weighted):
    ens, X, y, w = _model(name)
    sw = w if weighted else None
    attribution = "saabas" if name.startswith("cb_") else "predecomp"
    values = inner_values(ens, attribution, None)
    ref = _expected(ens, X, y, values, sw)
    assert np.abs(ref).max() > 0
    _close(forest_inner_sums(ens, X, y, values, sw), ref)


@functools.cache
def _other_booster(name: str):
    """LightGBM and the native booster, squared error, logistic and softmax."""
    kind = name.split("_", 1)[1]
    X, y = task_data(41, kind, 1200, 5, tie=3)
    w = np.random.default_rng(6).uniform(0.2, 3.0, size=700)
    if name.startswith("lgb_"):
        lgb = pytest.importorskip("lightgbm")
        objective = {"regression": "regression", "binary": "binary"}.get(kind, "multiclass")
        params = {"objective": objective, "num_leaves": 8, "learning_rate": 0.2, "verbose": -1,
                  "num_threads": 1, "min_data_in_leaf": 5}  # fmt: skip
        if kind == "multiclass":
            params["num_class"] = 3
        model = lgb.train(params, lgb.Dataset(X[:500], y[:500]), 10)
    else:
        from treeinner.booster import GBMClassifier, GBMRegressor

        est = GBMRegressor if kind == "regression" else GBMClassifier
        model = est(n_estimators=8, max_depth=3, learning_rate=0.3).fit(X[:500], y[:500])
    return quiet_ensemble(model), X[500:], y[500:], w


INITIAL_NAMES = ["regression", "binary", "multiclass", "parallel", "many_rows", "cb_regression",
                 "cb_binary", "cb_multiclass", "lgb_regression", "lgb_binary",
                 "lgb_multiclass", "gbm_regression", "gbm_binary", "gbm_multiclass"]  # fmt: skip


@pytest.mark.parametrize("name", INITIAL_NAMES)
def test_forest_inner_initial_form_matches_the_per_row_reference(name):
    """ForestInner's initial form, ``(1/lr) sum_i w_i R_i (-g_i(F_0))``, against the per-row
    reference from its definition (NumPy gradients at the base margin) for XGBoost,
    CatBoost, LightGBM and the native booster, squared error, logistic and softmax; with
    PreDecomp and Saabas, and its per-row moments too."""
    from treeinner._inner import forest_inner_initial_moments, forest_inner_initial_sums

    ens, X, y, w = (_other_booster if name[:4] in ("lgb_", "gbm_") else _model)(name)
    lr = float(np.mean(ens.learning_rate))
    parent = parents(ens.left, ens.right)
    for attribution in ("predecomp", "saabas"):
        if name.startswith("cb_") and attribution == "predecomp":
            continue  # CatBoost's losses other than RMSE store no hessians
        values = inner_values(ens, attribution, None)
        dg = np.where(parent >= 0, values - values[np.maximum(parent, 0)], 0.0) / lr
        rows = _reference(ens, X, y, dg, np.zeros_like(dg), forest=True, initial=True)
        ref = moments_from_rows(rows, w)
        assert np.abs(ref.s1).max() > 0
        _close(forest_inner_initial_sums(ens, X, y, values, w), ref.s1)
        got = forest_inner_initial_moments(ens, X, y, values, w)
        _close(got.s1, ref.s1)
        _close(got.s2, ref.s2)
        staged = forest_inner_sums(ens, X, y, values, w)
        assert not np.allclose(staged, ref.s1, rtol=1e-3)  # the two forms differ


def test_the_models_cover_the_paths():
    """The cases reach what they are meant to: deep trees, oblivious trees, several chunks."""
    assert np.any(_model("deep")[0]._layout.tree_flags & TREE_DEEP)
    pytest.importorskip("catboost")
    for kind in ("regression", "binary", "multiclass"):
        flags = _model("cb_" + kind)[0]._layout.tree_flags
        assert np.all(flags & TREE_OBLIVIOUS)
    ens, X, _, _ = _model("many_rows")
    assert X.shape[0] * ens.n_trees >= SERIAL_WORK


@pytest.mark.parametrize("name", ["many_rows", "multiclass", "cb_regression"])
def test_threads_and_split_rows_agree(name):
    """One thread or two, whole or in two parts: the same sums (to rounding)."""
    ens, X, y, w = _model(name)
    values = inner_values(ens, "saabas", None)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = forest_inner_sums(ens, X, y, values, w), tree_inner_sums(ens, X, y, values, w)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = forest_inner_sums(ens, X, y, values, w), tree_inner_sums(ens, X, y, values, w)
    finally:
        numba.set_num_threads(before)
    cut = X.shape[0] // 3
    parts = [
        fn(ens, X[:cut], y[:cut], values, w[:cut]) + fn(ens, X[cut:], y[cut:], values, w[cut:])
        for fn in (forest_inner_sums, tree_inner_sums)
    ]
    for a, b, c in zip(one, two, parts):
        _close(b, a)
        _close(c, a)


@pytest.mark.parametrize("name", ["regression", "binary", "deep", "cb_regression", "cb_binary"])
def test_fast_kernel_sums_equal_the_general_kernels(name):
    """Single-output models run the fast kernel for the leaf sums of w g (TreeInner), for
    those of w g, w h and w (``_staged`` with ``need_hc``, as unbiased gain and
    ``node_values(reference=...)`` ask) the fast kernel with counts under squared error (h = 1,
    so the sums of w h are those of w) and another kernel otherwise, and the general kernel
    when the split sums are asked too: the same additions in the same order."""
    from treeinner._staged import _run_staged

    ens, X, y, w = _model(name)
    assert ens.n_outputs == 1
    _, G0, _, _, _, _, _, _ = _run_staged(ens, X, y, w, False, False, False)
    _, G, H, C, _, _, _, _ = _run_staged(ens, X, y, w, False, True, False)
    _, G2, H2, C2, _, N2, _, _ = _run_staged(ens, X, y, w, False, True, True)
    np.testing.assert_array_equal(G0, G2)
    np.testing.assert_array_equal(G, G2)
    np.testing.assert_array_equal(H, H2)
    np.testing.assert_array_equal(C, C2)
    leaf = ens.left < 0
    assert np.all(N2[leaf] >= 0) and N2[leaf].sum() == X.shape[0] * ens.n_trees
    np.testing.assert_allclose(C[leaf].sum(), w.sum() * ens.n_trees, rtol=1e-12)
