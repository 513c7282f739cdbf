"""Path-dependent SHAP interaction values: agreement with XGBoost's pred_interactions and
shap's shap_interaction_values, brute-force Shapley interaction indices from the definition,
the sums identity, and TreeInner on interaction values against a per-tree reference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner.interactions import tree_inner_interactions, tree_shap_interactions
from treeinner.kernels.treeshap import _goes_left_call

xgb = pytest.importorskip("xgboost")
from tests._helpers import quiet, quiet_ensemble  # noqa: E402
from tests.test_treeshap import (  # noqa: E402
    _fit,
    _logistic_grad,
    _random_ensemble,
    _random_tree,
    _rows,
    _single_tree,
    _softmax_grad,
    _value,
)


def _xgb_interactions(booster, X, categorical=False):
    """XGBoost's interaction values as (n, p, p[, K]) float64."""
    dm = xgb.DMatrix(X, enable_categorical=categorical)
    ref = booster.predict(dm, pred_interactions=True).astype(np.float64)
    if ref.ndim == 4:  # (n, K, p + 1, p + 1)
        return np.transpose(ref[:, :, :-1, :-1], (0, 2, 3, 1))
    return ref[:, :-1, :-1]


def _assert_close(got, want, rtol):
    """Equal to ``rtol`` relative to the scale of ``want``."""
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------------- against XGBoost
XGB_MODELS = [
    (obj, depth, cat)
    for obj in ("reg:squarederror", "binary:logistic", "multi:softprob")
    for depth in (1, 3, 6)
    for cat in (False, True)
]


@pytest.mark.parametrize(
    "objective,depth,categorical",
    XGB_MODELS,
    ids=[f"{o}-d{d}-cat{int(c)}" for o, d, c in XGB_MODELS],
)
def test_matches_xgboost_pred_interactions(objective, depth, categorical):
    n_class = 3 if objective.startswith("multi") else 1
    booster, X = _fit(objective, depth, seed=depth + 10 * categorical, n_class=n_class,
                      categorical=categorical, rounds=8)  # fmt: skip
    got = tree_shap_interactions(booster, X)
    want = _xgb_interactions(booster, X, categorical)
    assert got.values.shape == want.shape
    _assert_close(got.values, want, 1e-5)
    assert got.feature_names == tuple(X.columns)
    assert got.index.equals(X.index)
    shap_values = treeinner.tree_shap(booster, X)
    np.testing.assert_allclose(got.bias, shap_values.bias)


@pytest.mark.parametrize("seed", [0, 3, 7, 11, 19, 26])
def test_matches_xgboost_random_cases(seed, xgb_case):
    """Random XGBoost cases of the shared suite (objectives, dart, parallel trees,
    categoricals, missing values)."""
    case = xgb_case(seed)
    got = quiet(tree_shap_interactions, case.booster, case.frame)
    want = _xgb_interactions(case.booster, case.frame, categorical=True)
    assert got.values.shape == want.shape
    _assert_close(got.values, want, 1e-5)


def test_iteration_range_matches_xgboost_model_slice():
    booster, X = _fit("multi:softprob", 4, seed=3, n_class=3, rounds=8)
    got = tree_shap_interactions(booster, X, iteration_range=(2, 5))
    _assert_close(got.values, _xgb_interactions(booster[2:5], X), 1e-5)


# ---------------------------------------------------------------------- against shap
shap = pytest.importorskip("shap")
lgb = pytest.importorskip("lightgbm")


def _lgb_model(seed, objective="regression", categorical=False, n=400, num_class=1):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=[f"x{j}" for j in range(5)])
    X.iloc[:, 1] = rng.integers(0, 4, size=n).astype(float)
    X = X.mask(rng.random(X.shape) < 0.12)
    s = X["x0"].fillna(0) + 0.8 * X["x1"].fillna(0) * X["x2"].fillna(0)
    if categorical:
        c = rng.integers(0, 6, size=n)
        s = s + np.select([c == 0, c == 3, c == 5], [1.5, -1.0, 0.7], 0.0)
        X["c"] = pd.Categorical(np.where(rng.random(n) < 0.1, -1, c))
        X["c"] = X["c"].cat.remove_categories([-1])
    if num_class > 1:
        y = np.digitize(s + 0.5 * rng.normal(size=n), [-0.5, 0.5])
    elif objective == "binary":
        y = (s + rng.normal(size=n) > 0).astype(int)
    else:
        y = 2 * s + rng.normal(size=n)
    params = dict(objective=objective, n_estimators=15, num_leaves=12, min_child_samples=5,
                  learning_rate=0.2, verbose=-1, n_jobs=1, random_state=seed,
                  min_data_per_group=5, cat_smooth=1.0)  # fmt: skip
    cls = lgb.LGBMRegressor if objective == "regression" else lgb.LGBMClassifier
    return cls(**params).fit(X, y), X


def _shap_interactions(model, X):
    v = shap.TreeExplainer(model).shap_interaction_values(X)
    if isinstance(v, list):  # older shap: one array per class
        v = np.stack(v, axis=-1)
    return np.asarray(v, dtype=np.float64)


@pytest.mark.parametrize(
    "objective,num_class", [("regression", 1), ("binary", 1), ("multiclass", 3)]
)
def test_matches_shap_lightgbm(objective, num_class):
    model, X = _lgb_model(4, objective, num_class=num_class)
    got = tree_shap_interactions(model, X)
    want = _shap_interactions(model, X)
    assert got.values.shape == want.shape
    _assert_close(got.values, want, 1e-9)


def test_matches_shap_xgboost():
    """shap reads XGBoost's models into float64 trees but asks XGBoost itself for interaction
    values (float32)."""
    booster, X = _fit("binary:logistic", 5, seed=8, rounds=10)
    got = tree_shap_interactions(booster, X)
    want = _shap_interactions(booster, X)
    _assert_close(got.values, want, 1e-5)


def test_lightgbm_categorical_splits():
    """LightGBM categorical splits, which shap's interaction values misread (their rows do not
    sum to shap's own ``shap_values`` there): brute force from the definition on every tree
    with a categorical split, and the sums identity against LightGBM's pred_contrib."""
    model, X = _lgb_model(5, "regression", categorical=True)
    ens = quiet_ensemble(model)
    got = quiet(tree_shap_interactions, model, X)
    phi = model.predict(X, pred_contrib=True)[:, :-1]
    np.testing.assert_allclose(got.values.sum(axis=2), phi, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(got.values, np.transpose(got.values, (0, 2, 1)))
    assert np.abs(got.values[:, -1, :-1]).max() > 0  # the category interacts
    Xn = next(iter(ens._blocks(X)[1]))[1]  # the rows as the kernels read them (codes)
    off = ens.tree_offsets
    cat_trees = [t for t in range(ens.n_trees) if np.any(ens.split_type[off[t] : off[t + 1]])]
    assert cat_trees
    for t in cat_trees[:3]:
        one = quiet(tree_shap_interactions, ens, X.iloc[:6], iteration_range=(t, t + 1))
        for r in range(6):
            want = _brute_interactions(ens, Xn[r], root=int(ens.tree_offsets[t]), weight=ens.count)
            np.testing.assert_allclose(one.values[r], want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- brute force
def _general_value(ens, n, x, S, weight):
    """``tests.test_treeshap._value`` for any split (categorical sets, every missing-value
    rule), routed by the kernels' own decision, with node weights ``weight``."""
    if ens.left[n] < 0:
        return ens.value[n]
    a, b = ens.left[n], ens.right[n]
    if ens.feature[n] in S:
        left = _goes_left_call(x[ens.feature[n]], n, ens._nodes(), False)
        return _general_value(ens, a if left else b, x, S, weight)
    c = weight[n]
    wa, wb = (weight[a] / c, weight[b] / c) if c > 0 else (0.5, 0.5)
    return wa * _general_value(ens, a, x, S, weight) + wb * _general_value(ens, b, x, S, weight)


def _brute_interactions(ens, x, root=0, weight=None):
    """Shapley interaction indices from the definition (shap's convention: the pair's index
    halved on both sides, main effects on the diagonal) of the tree at ``root``; ``weight``:
    node weights routed by the kernels' decision (None: covers, XGBoost's numeric rule)."""
    p = ens.n_features
    f = {}
    for size in range(p + 1):
        for S in itertools.combinations(range(p), size):
            if weight is None:
                f[S] = _value(ens, root, x, set(S))
            else:
                f[S] = _general_value(ens, root, x, set(S), weight)
    key = lambda S: tuple(sorted(S))  # noqa: E731
    phi = np.zeros(p)
    out = np.zeros((p, p))
    for i in range(p):
        others = [j for j in range(p) if j != i]
        for size in range(p):
            w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for S in itertools.combinations(others, size):
                phi[i] += w * (f[key(S + (i,))] - f[S])
    for i, j in itertools.combinations(range(p), 2):
        rest = [k for k in range(p) if k not in (i, j)]
        tot = 0.0
        for size in range(p - 1):
            w = math.factorial(size) * math.factorial(p - size - 2) / math.factorial(p - 1)
            for S in itertools.combinations(rest, size):
                tot += w * (f[key(S + (i, j))] - f[key(S + (i,))] - f[key(S + (j,))] + f[S])
        out[i, j] = out[j, i] = tot / 2
    for i in range(p):
        out[i, i] = phi[i] - out[i].sum()
    return out


@pytest.mark.parametrize("seed", range(12))
def test_brute_force_hand_built_trees(seed):
    """Random trees with repeated features on paths, zero covers, NaN rows."""
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 6))
    ens = _single_tree(_random_tree(rng, p, depth=int(rng.integers(1, 6))), p, base=0.1)
    X = _rows(rng, 6, p)
    got = tree_shap_interactions(ens, X)
    for r in range(X.shape[0]):
        np.testing.assert_allclose(got.values[r], _brute_interactions(ens, X[r]), rtol=1e-10,
                                   atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("depth", [2, 4])
def test_brute_force_one_tree_xgboost(depth):
    booster, X = _fit("binary:logistic", depth, seed=20 + depth, rounds=1, p=4)
    ens = quiet_ensemble(booster)
    got = tree_shap_interactions(booster, X.iloc[:8])
    for r in range(8):
        want = _brute_interactions(ens, X.to_numpy()[r])
        np.testing.assert_allclose(got.values[r], want, rtol=1e-10, atol=1e-12)


def test_brute_force_repeated_feature_chain():
    """A path that splits on feature 0 three times around a split on feature 1."""
    nodes = [
        (0, 0.0, 1, 2, 0.0, 10.0, 1),
        (1, 0.5, 3, 4, 0.0, 6.0, 0),
        (-1, np.nan, -1, -1, 2.0, 4.0, 1),
        (0, -1.0, 5, 6, 0.0, 4.0, 1),
        (-1, np.nan, -1, -1, -1.0, 2.0, 1),
        (0, -2.0, 7, 8, 0.0, 1.0, 0),
        (2, 0.0, 9, 10, 0.0, 3.0, 1),
        (-1, np.nan, -1, -1, 4.0, 0.0, 1),
        (-1, np.nan, -1, -1, -3.0, 1.0, 1),
        (-1, np.nan, -1, -1, 1.5, 1.0, 1),
        (-1, np.nan, -1, -1, -0.5, 2.0, 1),
    ]
    ens = _single_tree(nodes, 4)
    X = np.array([[-3.0, 0.0, 1.0, 0.0], [-1.5, 1.0, -1.0, 0.0], [0.7, 0.0, 0.0, 1.0],
                  [np.nan, np.nan, 2.0, 0.0]])  # fmt: skip
    got = tree_shap_interactions(ens, X)
    for r in range(X.shape[0]):
        np.testing.assert_allclose(got.values[r], _brute_interactions(ens, X[r]), rtol=1e-10,
                                   atol=1e-12)  # fmt: skip
    assert np.all(got.values[:, 3, :] == 0.0)  # feature 3 is never split on
    assert np.abs(got.values[:, 0, 1]).max() > 0


# ---------------------------------------------------------------------- identities
@pytest.mark.parametrize("depth", [3, 8, 12])
def test_sums_to_tree_shap_and_margin(depth):
    """Rows (and columns) sum to the TreeSHAP values; the matrix is symmetric; everything plus
    the bias is the margin. Deep random trees over few features (repeats on paths)."""
    rng = np.random.default_rng(200 + depth)
    p = int(rng.integers(3, 7))
    ens = _random_ensemble(rng, p, depth, n_trees=4, base=0.3)
    X = _rows(rng, 60, p)
    got = tree_shap_interactions(ens, X)
    phi = treeinner.tree_shap(ens, X).values
    scale = np.abs(phi).max()
    np.testing.assert_allclose(got.values.sum(axis=2), phi, atol=1e-11 * scale)
    np.testing.assert_allclose(got.values.sum(axis=1), phi, atol=1e-11 * scale)
    np.testing.assert_allclose(got.values, np.transpose(got.values, (0, 2, 1)), atol=1e-15)
    np.testing.assert_allclose(got.values.sum(axis=(1, 2)) + got.bias, ens.predict_margin(X),
                               atol=1e-10)  # fmt: skip
    off = got.values * (1 - np.eye(p))
    assert np.abs(off).max() > 1e-3 * scale  # there are interactions to check


def test_multiclass_shape_and_sums():
    booster, X = _fit("multi:softprob", 4, seed=9, n_class=3, rounds=6)
    got = tree_shap_interactions(booster, X)
    assert got.values.shape == (len(X), X.shape[1], X.shape[1], 3)
    phi = treeinner.tree_shap(booster, X).values
    np.testing.assert_allclose(got.values.sum(axis=2), phi, rtol=1e-9, atol=1e-12)
    frame = got.to_frame(4, output=2)
    assert list(frame.index) == list(frame.columns) == list(X.columns)
    np.testing.assert_array_equal(frame.to_numpy(), got.values[4, :, :, 2])
    with pytest.raises(ValueError, match="output"):
        got.to_frame(4)


def test_pandas_names_and_numpy_input():
    booster, X = _fit("reg:squarederror", 4, seed=2, categorical=False)
    a = tree_shap_interactions(booster, X)
    b = quiet(tree_shap_interactions, booster, X.to_numpy())
    np.testing.assert_array_equal(a.values, b.values)
    assert a.feature_names == tuple(X.columns)
    assert a.index.equals(X.index) and b.index is None
    frame = a.to_frame(0)
    assert list(frame.columns) == list(X.columns)


def test_wrong_feature_count_raises():
    booster, X = _fit("reg:squarederror", 3, seed=2)
    with pytest.raises(ValueError, match="feature"):
        tree_shap_interactions(booster, X.to_numpy()[:, :-1])
    with pytest.raises(ValueError, match="feature"):
        tree_inner_interactions(booster, X.to_numpy()[:, :-1], np.zeros(len(X)))
    with pytest.raises(ValueError, match="node_weight"):
        tree_shap_interactions(booster, X, node_weight="gain")


# ---------------------------------------------------------------------- TreeInner
def _staged_interaction_reference(booster, ens, X, y, w, link):
    """Per-tree TreeInner on interaction values from XGBoost's own staged margins."""
    rounds = ens.n_trees // ens.n_outputs
    out = np.zeros((ens.n_features, ens.n_features, ens.n_outputs))
    for m in range(rounds):
        if m == 0:
            F = np.tile(ens.base_margin, (len(X), 1))
        else:
            F = booster.inplace_predict(X, iteration_range=(0, m), predict_type="margin")
            F = np.asarray(F, dtype=np.float64).reshape(len(X), -1)
        neg_g = -w[:, None] * link(F, y)
        phi = tree_shap_interactions(ens, X, iteration_range=(m, m + 1)).values
        phi = phi if phi.ndim == 4 else phi[..., None]
        for t in range(m * ens.n_outputs, (m + 1) * ens.n_outputs):
            c = int(ens.tree_group[t])
            out[:, :, c] += np.einsum("ijk,i->jk", phi[..., c], neg_g[:, c]) / ens.learning_rate[t]
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_tree_inner_interactions_binary(weighted):
    booster, X = _fit("binary:logistic", 4, seed=3, rounds=8, n=400)
    ens = quiet_ensemble(booster)
    rng = np.random.default_rng(0)
    y = (np.nan_to_num(X.to_numpy()[:, 0]) + rng.normal(size=400) > 0).astype(float)
    w = np.random.default_rng(1).uniform(0.2, 3.0, 400) if weighted else np.ones(400)
    sw = w if weighted else None
    got = tree_inner_interactions(booster, X, y, sample_weight=sw)
    want = _staged_interaction_reference(booster, ens, X, y, w, _logistic_grad)[:, :, 0]
    assert list(got.index) == list(got.columns) == list(X.columns)
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-9, atol=1e-12)
    ti = treeinner.tree_inner(booster, X, y, attribution="shap", sample_weight=sw)
    np.testing.assert_allclose(got.sum(axis=1), ti, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.to_numpy(), got.to_numpy().T, atol=1e-12)


def test_tree_inner_interactions_multiclass():
    booster, X = _fit("multi:softmax", 3, seed=4, n_class=3, rounds=5, n=400)
    ens = quiet_ensemble(booster)
    y = np.random.default_rng(2).integers(0, 3, size=400).astype(np.float64)
    want = _staged_interaction_reference(booster, ens, X, y, np.ones(400), _softmax_grad)
    ti = treeinner.tree_inner(booster, X, y, attribution="shap")
    for c in range(3):
        got = tree_inner_interactions(booster, X, y, output=c)
        np.testing.assert_allclose(got.to_numpy(), want[:, :, c], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.sum(axis=1), ti[f"class_{c}"], rtol=1e-9, atol=1e-12)
    total = tree_inner_interactions(booster, X, y)
    np.testing.assert_allclose(total.to_numpy(), want.sum(axis=2), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="output"):
        tree_inner_interactions(booster, X, y, output=3)


def test_tree_inner_interactions_noise_pair_on_held_out_rows():
    """A pair the model only overfit scores below the real interaction on held-out rows."""
    rng = np.random.default_rng(5)
    n = 3000
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "noise1", "noise2"])
    y = X["a"] * X["b"] + 0.5 * rng.normal(size=n)
    model = xgb.XGBRegressor(n_estimators=80, max_depth=4, learning_rate=0.1, n_jobs=1)
    model.fit(X[:2000], y[:2000])
    ti = tree_inner_interactions(model, X[2000:], y[2000:])
    assert ti.loc["a", "b"] > 0
    assert ti.loc["a", "b"] > 10 * abs(ti.loc["noise1", "noise2"])


# ---------------------------------------------------------------------- CatBoost
@pytest.mark.parametrize("categorical", [False, True])
def test_matches_catboost_shap_interaction_values(categorical):
    """CatBoost's own ShapInteractionValues (float64; oblivious trees walked from the last
    level, CTR splits credited to their categorical feature)."""
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(11)
    n = 400
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    y = X["a"] * X["b"] + X["c"] + 0.1 * rng.normal(size=n)
    cats = []
    if categorical:
        X["k"] = rng.choice(list("pqrst"), size=n)
        y = y + 1.5 * (X["k"] == "p") - (X["k"] == "r")
        cats = ["k"]
    model = cb.CatBoostRegressor(iterations=12, depth=4, verbose=0, thread_count=1,
                                 cat_features=cats, random_seed=0).fit(X, y)  # fmt: skip
    got = quiet(tree_shap_interactions, model, X)
    want = model.get_feature_importance(cb.Pool(X, y, cat_features=cats),
                                        type="ShapInteractionValues")[:, :-1, :-1]  # fmt: skip
    assert got.values.shape == want.shape
    _assert_close(got.values, want, 1e-9)
    assert np.abs(got.values[:, 0, 1]).max() > 0.01


def test_dask_input_is_refused_with_advice():
    dd = pytest.importorskip("dask.dataframe")
    booster, X = _fit("reg:squarederror", 3, seed=2)
    lazy = dd.from_pandas(X, npartitions=2)
    with pytest.raises(ValueError, match="Dask"):
        tree_shap_interactions(booster, lazy)
    with pytest.raises(ValueError, match="Dask"):
        tree_inner_interactions(booster, lazy, np.zeros(len(X)))
