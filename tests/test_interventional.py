"""Interventional TreeSHAP: agreement with shap's interventional TreeExplainer on XGBoost,
LightGBM and CatBoost models, the sums identity, brute-force Shapley values from the
definition (including categorical splits and the untabulated path), multiclass, pandas names
and input checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import treeinner
from tests._helpers import quiet_ensemble
from treeinner._errors import InputError
from treeinner.kernels import interventional as KI

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
shap = pytest.importorskip("shap")


def _data(seed, n=300, p=6, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] + np.sin(2 * X[:, 1]) * X[:, 2] + 0.5 * (X[:, 3] > 0) + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _shap_values(model, X, background):
    """shap's interventional values of the raw margin as (n, p) or (n, p, K), with every
    background row (passed as raw data, shap keeps a random 100 of a larger background)."""
    data = shap.maskers.Independent(background, max_samples=len(background))
    e = shap.TreeExplainer(model, data=data, feature_perturbation="interventional")
    s = e.shap_values(X)
    if isinstance(s, list):
        s = np.stack(s, axis=-1)
    return np.asarray(s, dtype=np.float64), np.atleast_1d(e.expected_value)


def _brute(ens, X, background):
    """Shapley values from the definition: v(S) = mean over b of the margin at (x_S, b_notS)."""
    p = X.shape[1]
    B = np.asarray(background, dtype=np.float64)
    out = np.zeros((X.shape[0], p, ens.n_outputs))
    for r, x in enumerate(np.asarray(X, dtype=np.float64)):
        v = {}
        for size in range(p + 1):
            for S in itertools.combinations(range(p), size):
                H = B.copy()
                H[:, list(S)] = x[list(S)]
                v[S] = ens.predict_margin(H).reshape(B.shape[0], -1).mean(axis=0)
        for i in range(p):
            rest = [j for j in range(p) if j != i]
            for size in range(p):
                w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
                for S in itertools.combinations(rest, size):
                    out[r, i] += w * (v[tuple(sorted((*S, i)))] - v[S])
    return out[:, :, 0] if ens.n_outputs == 1 else out


def _margin(ens, X):
    return np.asarray(ens.predict_margin(X), dtype=np.float64)


def test_xgboost_equals_shap_with_missing_values():
    X, y = _data(0)
    model = xgb.XGBRegressor(n_estimators=40, max_depth=5, learning_rate=0.2).fit(X, y)
    bg, Xe = X[:150], X[200:260]
    got = treeinner.tree_shap_interventional(model, Xe, bg)
    ref, ev = _shap_values(model, Xe, bg)
    assert np.isnan(bg).any() and np.isnan(Xe).any()
    np.testing.assert_allclose(got.values, ref, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.bias, ev, atol=1e-6)
    assert np.abs(got.values).max() > 0.05  # not trivially zero


def test_lightgbm_equals_shap_with_missing_values():
    X, y = _data(1)
    model = lgb.LGBMRegressor(n_estimators=40, num_leaves=15, min_child_samples=5, verbose=-1)
    model.fit(X, y)
    bg, Xe = X[:50], X[100:150]
    got = treeinner.tree_shap_interventional(model, Xe, bg)
    ref, ev = _shap_values(model, Xe, bg)
    np.testing.assert_allclose(got.values, ref, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.bias, ev, atol=1e-6)


def test_catboost_equals_shap():
    cb = pytest.importorskip("catboost")
    X, y = _data(2, nan=0.0)
    X[::7, 2] = np.nan
    model = cb.CatBoostRegressor(iterations=30, depth=4, verbose=False, random_seed=0)
    model.fit(X, y)
    bg, Xe = X[:40], X[100:140]
    got = treeinner.tree_shap_interventional(model, Xe, bg)
    ref, _ = _shap_values(model, Xe, bg)
    np.testing.assert_allclose(got.values, ref, atol=1e-6, rtol=0)
    margin = model.predict(Xe, prediction_type="RawFormulaVal")
    np.testing.assert_allclose(got.values.sum(axis=1) + got.bias[0], margin, atol=1e-6)


def test_multiclass_equals_shap_and_sums():
    X, _ = _data(3)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5).astype(int)
    model = xgb.XGBClassifier(n_estimators=15, max_depth=4).fit(X, y)
    bg, Xe = X[:40], X[200:230]
    got = treeinner.tree_shap_interventional(model, Xe, bg)
    assert got.values.shape == (30, 6, 3)
    ref, ev = _shap_values(model, Xe, bg)
    np.testing.assert_allclose(got.values, ref, atol=1e-6, rtol=0)
    ens = treeinner.from_model(model)
    np.testing.assert_allclose(got.values.sum(axis=1) + got.bias, _margin(ens, Xe), atol=1e-5)
    np.testing.assert_allclose(got.bias, _margin(ens, bg).mean(axis=0), atol=1e-12)


def test_sums_to_margin_minus_mean_background_margin():
    X, y = _data(4)
    model = lgb.LGBMRegressor(n_estimators=30, num_leaves=31, verbose=-1).fit(X, y)
    ens = treeinner.from_model(model)
    bg, Xe = X[:80], X[150:250]
    got = treeinner.tree_shap_interventional(ens, Xe, bg)
    lhs = got.values.sum(axis=1)
    np.testing.assert_allclose(lhs, _margin(ens, Xe) - _margin(ens, bg).mean(), atol=1e-9)


@pytest.mark.parametrize("table_bits", [12, 2, 0])
def test_brute_force_small_trees(table_bits, monkeypatch):
    """From the definition, with every leaf tabulated, some, and none (summed per background
    row)."""
    monkeypatch.setattr(KI, "MAX_TABLE_BITS", table_bits)
    X, y = _data(5, n=200, p=4, nan=0.15)
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=12, min_child_samples=5, verbose=-1)
    ens = treeinner.from_model(model.fit(X, y))  # margins summed in float64
    assert ens._tree_depth.max() >= 4
    bg, Xe = X[:12], X[50:58]
    got = treeinner.tree_shap_interventional(ens, Xe, bg)
    np.testing.assert_allclose(got.values, _brute(ens, Xe, bg), atol=1e-9)


def test_brute_force_categorical_lightgbm():
    rng = np.random.default_rng(6)
    n = 400
    c = rng.integers(0, 8, size=n).astype(float)
    X = np.column_stack([c, rng.normal(size=n), rng.normal(size=n)])
    y = np.isin(c, [1, 4, 6]) * 2.0 + X[:, 1] + 0.1 * rng.normal(size=n)
    X[rng.random(n) < 0.1, 0] = np.nan
    X[rng.random(n) < 0.1, 1] = np.nan
    model = lgb.LGBMRegressor(
        n_estimators=8, num_leaves=8, min_child_samples=5, min_data_per_group=5,
        cat_smooth=1, verbose=-1,
    )  # fmt: skip
    model.fit(X, y, categorical_feature=[0])
    ens = quiet_ensemble(model)
    assert np.any(ens.split_type != 0)  # categorical splits present
    bg, Xe = X[:15], X[100:108]
    got = treeinner.tree_shap_interventional(ens, Xe, bg)
    np.testing.assert_allclose(got.values, _brute(ens, Xe, bg), atol=1e-9)


def test_unused_feature_gets_zero_and_single_background_row():
    X, y = _data(7, nan=0.0)
    y = X[:, 0] * 2.0  # only feature 0 matters
    model = xgb.XGBRegressor(n_estimators=10, max_depth=3).fit(X, y)
    got = treeinner.tree_shap_interventional(model, X[:20], X[50:51])
    assert np.all(got.values[:, 1:] == 0.0)
    ens = treeinner.from_model(model)
    # one background row: the value of feature 0 is the whole margin difference
    np.testing.assert_allclose(
        got.values[:, 0], _margin(ens, X[:20]) - _margin(ens, X[50:51])[0], atol=1e-6
    )


def test_pandas_names_and_index():
    X, y = _data(8)
    cols = [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols, index=np.arange(1000, 1000 + X.shape[0]))
    model = xgb.XGBRegressor(n_estimators=10, max_depth=3).fit(df, y)
    got = treeinner.tree_shap_interventional(model, df.iloc[:25], df.iloc[100:140])
    assert got.feature_names == tuple(cols)
    frame = got.to_frame()
    assert list(frame.columns) == cols
    assert list(frame.index) == list(range(1000, 1025))


def test_wrong_feature_count_and_empty_background_raise():
    X, y = _data(9)
    model = xgb.XGBRegressor(n_estimators=5, max_depth=3).fit(X, y)
    with pytest.raises(ValueError):
        treeinner.tree_shap_interventional(model, X[:5, :4], X[:10])
    with pytest.raises(ValueError):
        treeinner.tree_shap_interventional(model, X[:5], X[:10, :5])
    with pytest.raises(InputError):
        treeinner.tree_shap_interventional(model, X[:5], X[:0])


def test_catboost_categorical_brute_force():
    """CatBoost with a string categorical column (CTR and one-hot splits credited to it)."""
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(10)
    n = 300
    df = pd.DataFrame(
        {"c": rng.choice(list("abcdef"), n), "x": rng.normal(size=n), "z": rng.normal(size=n)}
    )
    y = df["c"].isin(["a", "d"]) * 4.0 + df["x"] + 0.1 * rng.normal(size=n)
    model = cb.CatBoostRegressor(
        iterations=30, depth=3, verbose=False, cat_features=["c"], random_seed=0
    )
    model.fit(df, y)
    ens = quiet_ensemble(model)
    bg, Xe = df.iloc[100:110], df.iloc[:6]
    got = treeinner.tree_shap_interventional(ens, Xe, bg)
    assert got.feature_names == ("c", "x", "z")
    ref = np.zeros((len(Xe), 3))
    for r in range(len(Xe)):
        v = {}
        for size in range(4):
            for S in itertools.combinations(range(3), size):
                H = bg.copy()
                for j in S:
                    H.iloc[:, j] = Xe.iloc[r, j]
                v[S] = np.mean(model.predict(H, prediction_type="RawFormulaVal"))
        for i in range(3):
            rest = [j for j in range(3) if j != i]
            for size in range(3):
                w = math.factorial(size) * math.factorial(2 - size) / 6
                for S in itertools.combinations(rest, size):
                    ref[r, i] += w * (v[tuple(sorted((*S, i)))] - v[S])
    np.testing.assert_allclose(got.values, ref, atol=1e-9)
    assert np.abs(got.values[:, 0]).max() > 0.01  # the categorical feature is used
