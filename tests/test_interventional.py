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


# ---------------------------------------------------------------------- iteration_range
def test_iteration_range_adds_up_and_matches_the_trees_alone():
    X, y = _data(11, nan=0.1)
    model = xgb.XGBRegressor(n_estimators=12, max_depth=3, learning_rate=0.3).fit(X, y)
    ens = treeinner.from_model(model)
    bg, Xe = X[:30], X[100:120]
    whole = treeinner.tree_shap_interventional(ens, Xe, bg)
    parts = [treeinner.tree_shap_interventional(ens, Xe, bg, iteration_range=r)
             for r in ((0, 5), (5, 12))]  # fmt: skip
    np.testing.assert_allclose(parts[0].values + parts[1].values, whole.values, atol=1e-12)
    for r, part in zip(((0, 5), (5, 12)), parts):
        margin = _margin_range(ens, Xe, r)
        np.testing.assert_allclose(part.bias, _margin_range(ens, bg, r).mean(), atol=1e-12)
        np.testing.assert_allclose(part.values.sum(axis=1) + part.bias, margin, atol=1e-5)
    # (0, 0) means every round, as for predict_margin
    same = treeinner.tree_shap_interventional(ens, Xe, bg, iteration_range=(0, 0))
    np.testing.assert_array_equal(same.values, whole.values)
    with pytest.raises(TypeError, match="iteration_range"):
        treeinner.tree_shap_interventional(ens, Xe, bg, iteration_range=(0.5, 2))


def _margin_range(ens, X, r):
    return np.asarray(ens.predict_margin(X, iteration_range=r), dtype=np.float64)


# ---------------------------------------------------------------------- TreeInner
def _tree_outputs(ens, H):
    """Every tree's output at the rows H (single-output models, one tree per round):
    (n_trees, n), from margins of one round minus the base margin."""
    base = ens.base_margin[0]
    return np.stack(
        [_margin_range(ens, H, (t, t + 1)) - base for t in range(ens.n_trees)]
    )  # fmt: skip


def _brute_trees(ens, X, B):
    """Every tree's interventional Shapley values from the definition, (n_trees, n, p):
    v_t(S) = mean over the background rows b of tree t's output at (x_S, b_notS)."""
    X = np.asarray(X, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    n, p = X.shape
    subsets = [S for size in range(p + 1) for S in itertools.combinations(range(p), size)]
    H = np.repeat(B[None, None], n, axis=0).repeat(len(subsets), axis=1)  # (n, S, b, p)
    for s, S in enumerate(subsets):
        H[:, s][:, :, list(S)] = X[:, None, list(S)]
    out = _tree_outputs(ens, H.reshape(-1, p)).reshape(ens.n_trees, n, len(subsets), len(B))
    v = dict(zip(subsets, np.moveaxis(out.mean(axis=3), 2, 0)))  # S -> (n_trees, n)
    phi = np.zeros((ens.n_trees, n, p))
    for i in range(p):
        rest = [j for j in range(p) if j != i]
        for size in range(p):
            w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for S in itertools.combinations(rest, size):
                phi[:, :, i] += w * (v[tuple(sorted((*S, i)))] - v[S])
    return phi


def _staged_neg_gradients(ens, X, y, logistic):
    """-g of every tree at the margin before its round, (n_trees, n)."""
    out = []
    for t in range(ens.n_trees):
        F = _margin_range(ens, X, (0, t)) if t else np.full(len(y), ens.base_margin[0])
        out.append(y - (1.0 / (1.0 + np.exp(-F)) if logistic else F))
    return np.asarray(out)


def _models():
    X, y = _data(12, n=300, p=4, nan=0.15)
    yb = (y > np.median(y)).astype(float)
    return {
        "xgboost": (xgb.XGBRegressor(n_estimators=8, max_depth=3, learning_rate=0.3), X, y),
        "xgboost_logistic": (
            xgb.XGBClassifier(n_estimators=8, max_depth=3, learning_rate=0.3),
            X,
            yb,
        ),
        "lightgbm": (
            lgb.LGBMRegressor(
                n_estimators=8,
                num_leaves=10,
                min_child_samples=5,
                learning_rate=0.2,
                verbose=-1,
            ),
            X,
            y,
        ),  # fmt: skip
    }


@pytest.mark.parametrize("case", ["xgboost", "xgboost_logistic", "lightgbm"])
def test_tree_inner_interventional_equals_brute_force(case):
    """TreeInner with interventional TreeSHAP: every tree's Shapley values from the definition
    weighted by -w g at the staged margin over the learning rate, summed; the same for both
    ForestInner forms; per-row moments add up to it."""
    model, X, y = _models()[case]
    model.fit(X[:200], y[:200])
    ens = treeinner.from_model(model)
    Xe, ye, bg = X[200:230], y[200:230], X[:15]
    assert np.isnan(Xe).any() and np.isnan(bg).any()
    w = np.linspace(0.5, 2.0, len(ye))
    phi = _brute_trees(ens, Xe, bg)  # (trees, rows, features)
    ng = _staged_neg_gradients(ens, Xe, ye, case.endswith("logistic"))
    lr = ens.learning_rate[:, None]
    want = np.einsum("tif,ti->f", phi, w * ng / lr)
    got = treeinner.tree_inner(
        model, Xe, ye, attribution="interventional", background=bg, sample_weight=w
    )
    scale = np.abs(want).max()
    assert scale > 0.1
    np.testing.assert_allclose(got.to_numpy(), want, rtol=0, atol=1e-6 * scale)
    # local accuracy per tree: the scores sum to the inner product of (tree output - mean
    # background tree output) with -w g / lr
    out = _tree_outputs(ens, Xe) - _tree_outputs(ens, bg).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(got.sum(), np.sum(out * w * ng / lr), rtol=1e-6)
    # ForestInner, staged and initial forms
    A = phi.sum(axis=0)
    mean_lr = float(np.mean(ens.learning_rate))
    staged = treeinner.forest_inner(
        model, Xe, ye, attribution="interventional", background=bg, sample_weight=w
    )
    np.testing.assert_allclose(
        staged.to_numpy(), A.T @ (w * ng.sum(axis=0)) / mean_lr, rtol=0, atol=1e-6 * scale
    )
    initial = treeinner.forest_inner(
        model, Xe, ye, attribution="interventional", background=bg, sample_weight=w,
        gradient="initial",
    )  # fmt: skip
    np.testing.assert_allclose(
        initial.to_numpy(), A.T @ (w * ng[0]) / mean_lr, rtol=0, atol=1e-6 * scale
    )
    # the streamed moments: s1 is the score, s2 the squares of the per-row terms
    from treeinner._inner import tree_inner_interventional_moments

    mom = tree_inner_interventional_moments(ens, Xe, ye, bg, w)
    rows = np.einsum("tif,ti->if", phi, w * ng / lr)
    np.testing.assert_allclose(mom.s1[:, 0], want, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(mom.s2[:, 0], (rows**2).sum(axis=0), rtol=1e-6, atol=1e-9)


def test_tree_inner_interventional_multiclass_and_names():
    X, _ = _data(13, nan=0.1)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5).astype(int)
    cols = [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3).fit(df[:200], y[:200])
    got = treeinner.tree_inner(
        model, df[200:260], y[200:260], attribution="interventional", background=df[:20]
    )
    assert list(got.columns) == ["class_0", "class_1", "class_2", "total"]
    assert list(got.index) == cols
    # per class: the inner product summed over that class's trees, from per-tree values
    ens = treeinner.from_model(model)
    Xe, ye = df[200:260], y[200:260]
    P = np.eye(3)[ye]
    want = np.zeros((len(cols), 3))
    for rnd in range(ens.n_trees // 3):
        F = _margin_range(ens, Xe, (0, rnd)) if rnd else np.tile(ens.base_margin, (60, 1))
        prob = np.exp(F - F.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        vals = treeinner.tree_shap_interventional(
            ens, Xe, df[:20], iteration_range=(rnd, rnd + 1)
        ).values  # (n, p, 3)
        for c in range(3):
            want[:, c] += vals[:, :, c].T @ (P[:, c] - prob[:, c]) / ens.learning_rate[3 * rnd + c]
    np.testing.assert_allclose(got[["class_0", "class_1", "class_2"]].to_numpy(), want,
                               atol=1e-6 * np.abs(want).max())  # fmt: skip
    np.testing.assert_allclose(got["total"], want.sum(axis=1), atol=1e-6 * np.abs(want).max())


def test_tree_inner_interventional_argument_errors():
    X, y = _data(14)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3).fit(X, y)
    with pytest.raises(InputError, match="needs a background"):
        treeinner.tree_inner(model, X[:20], y[:20], attribution="interventional")
    with pytest.raises(InputError, match="needs a background"):
        treeinner.forest_inner(model, X[:20], y[:20], attribution="interventional")
    with pytest.raises(InputError, match="does not use it"):
        treeinner.tree_inner(model, X[:20], y[:20], background=X[:5])
    with pytest.raises(InputError, match="per_split"):
        treeinner.tree_inner(
            model, X[:20], y[:20], attribution="interventional", background=X[:5],
            per_split=True,
        )  # fmt: skip
    with pytest.raises(InputError, match="reference="):
        treeinner.tree_inner(
            model, X[:20], y[:20], attribution="interventional", background=X[:5],
            reference=(X, y),
        )  # fmt: skip
    with pytest.raises(InputError, match="no rows"):
        treeinner.tree_inner(model, X[:20], y[:20], attribution="interventional",
                             background=X[:0])  # fmt: skip
    with pytest.raises(ValueError, match="'interventional'"):
        treeinner.tree_inner(model, X[:20], y[:20], attribution="lime")


def test_tree_inner_interventional_untabulated_leaves_and_dask(monkeypatch):
    """Leaves summed over the background rows directly give the tabulated result; Dask input
    is a sum over its partitions."""
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data(15, n=300, p=5, nan=0.1)
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=12, min_child_samples=5, verbose=-1)
    model.fit(X[:200], y[:200])
    Xe, ye, bg = X[200:], y[200:], X[:25]
    kw = {"attribution": "interventional", "background": bg}
    tab = treeinner.tree_inner(model, Xe, ye, **kw)
    monkeypatch.setattr(KI, "MAX_TABLE_BITS", 0)
    direct = treeinner.tree_inner(model, Xe, ye, **kw)
    np.testing.assert_allclose(direct, tab, rtol=1e-10, atol=1e-10)
    monkeypatch.undo()
    df = pd.DataFrame(Xe, columns=[f"Column_{j}" for j in range(5)]).assign(y=ye)
    D = dd.from_pandas(df, npartitions=3)
    lazy = treeinner.tree_inner(model, D.drop(columns="y"), D["y"], **kw)
    np.testing.assert_allclose(lazy, tab, rtol=1e-10, atol=1e-10)
