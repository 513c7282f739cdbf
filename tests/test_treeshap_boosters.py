"""Path-dependent TreeSHAP against the boosters' own SHAP values and the shap package.

Seeded random XGBoost, LightGBM and CatBoost models of depth 1 to 12 (regression, binary and
3-class), trained and explained with NaN in ~10% of the numeric cells, with extra rows sitting
exactly on split thresholds, and with categorical splits, are explained by
``treeinner.tree_shap`` and by XGBoost's ``pred_contribs``, LightGBM's ``pred_contrib``,
CatBoost's ``ShapValues`` and ``shap.TreeExplainer(feature_perturbation="tree_path_dependent")``.

Comparisons are on the boosters' whole output block, values and bias column, per row:
``|treeinner - booster| <= rtol * max |booster|`` over the row's features, bias and classes.
XGBoost computes in float32 (shap's TreeExplainer calls XGBoost's own routine), so rtol is 1e-5
there; LightGBM and CatBoost compute in float64: 1e-9. Additivity, ``values.sum(1) + bias`` ==
the booster's raw margin, is checked to 1e-6 (XGBoost) / 1e-9 of the largest |margin|.

CatBoost's ShapValues of Depthwise / Lossguide trees are not additive when leaves sit above the
maximum depth (catboost issues #1125, #2136, #2556): those policies are compared on models
where CatBoost's values are additive (asserted), and
``test_catboost_not_additive_where_treeinner_is`` shows one-tree models where they are not
while treeinner's are, and equal Shapley values computed by brute force.
CatBoost Depthwise / Lossguide models with categorical splits are refused (TreeSHAP reads the
splits off a row's path, which CatBoost does not route for us).

``test_shap_tree_explainer_*`` use shap's public API, which for these boosters returns the
boosters' own SHAP values; ``test_shap_own_tree_shap`` runs shap's own C++ TreeSHAP.
"""

from __future__ import annotations

import functools
import types
import zlib

import numpy as np
import pandas as pd
import pytest

import treeinner

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
cb = pytest.importorskip("catboost")
from tests._helpers import quiet_ensemble  # noqa: E402
from tests.test_treeshap import _brute_shapley  # noqa: E402

pytestmark = [
    # treeinner's notes about training parameters the model files do not record
    pytest.mark.filterwarnings("ignore:The .* does not record:UserWarning"),
    pytest.mark.filterwarnings("ignore:Could not recover:UserWarning"),
    pytest.mark.filterwarnings("ignore:Regularized node values:UserWarning"),
    pytest.mark.filterwarnings("ignore:Node values from data:UserWarning"),
    pytest.mark.filterwarnings("ignore:LightGBM binary classifier with TreeExplainer"),
]

N = 300  # training rows
ROUNDS = 8
NAN_FRAC = 0.1
NUMERIC = ("x0", "x1", "x2", "x3")
LEVELS = ("red", "green", "blue", "cyan", "pink", "gold", "teal")
LEVEL_EFFECT = np.array([1.5, 0.0, -1.0, 0.3, 0.0, 0.7, -0.4])
CAT_AT = 2  # the categorical column is inserted here, between numeric ones
KINDS = ("regression", "binary", "multiclass")
DEPTHS = (1, 2, 3, 5, 8, 10, 12)
CB_DEPTHS = (1, 2, 3, 5, 8, 10)
XGB_RTOL = 1e-5  # float32 boosters
F64_RTOL = 1e-9  # float64 boosters
XGB_SUM_RTOL = 1e-6
F64_SUM_RTOL = 1e-9


# ---------------------------------------------------------------------- data and checks
def _data(seed, kind, categorical, n=N):
    """Numeric columns (n, 4) with ties and NaNs, category codes in 0..6 (or None), labels."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = rng.integers(0, 4, size=n)  # ties: thresholds between integers
    X[:, 3] = np.round(X[:, 3], 1)
    X[rng.random(X.shape) < NAN_FRAC] = np.nan
    Z = np.nan_to_num(X)
    s = Z[:, 0] + 0.5 * Z[:, 1] * Z[:, 2] + np.sin(2 * Z[:, 3])
    codes = None
    if categorical:
        codes = rng.integers(0, len(LEVELS), size=n)
        s = s + LEVEL_EFFECT[codes]
    noise = rng.normal(size=n)
    if kind == "multiclass":
        y = np.digitize(s + 0.5 * noise, np.quantile(s, [1 / 3, 2 / 3])).astype(float)
    elif kind == "binary":
        y = (s + noise > np.median(s)).astype(float)
    else:
        y = 3 * s + noise
    return X, codes, y, rng


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _max_depth(ens) -> int:
    """Largest number of splits from a root to a leaf."""
    depth = np.zeros(ens.n_nodes, dtype=np.int64)
    inner = np.flatnonzero(ens.left >= 0)
    for _ in range(64):
        new = depth.copy()
        new[ens.left[inner]] = depth[inner] + 1
        new[ens.right[inner]] = depth[inner] + 1
        if np.array_equal(new, depth):
            break
        depth = new
    return int(depth.max())


def _at_thresholds(ens, X, numeric_cols, rng, k=60):
    """``X`` plus copies of random rows of it with one numeric column set exactly to the
    threshold of a split on that column (``ens.threshold[ens.left >= 0]``)."""
    inner = (ens.left >= 0) & (ens.split_type == 0) & np.isin(ens.feature, numeric_cols)
    inner &= np.isfinite(ens.threshold)
    feat, thr = ens.feature[inner], ens.threshold[inner]
    assert feat.size > 0
    pick = rng.choice(feat.size, size=min(k, feat.size), replace=False)
    rows = rng.integers(0, len(X), size=pick.size)
    if isinstance(X, pd.DataFrame):
        extra = X.iloc[rows].copy()
        for i, j in enumerate(pick):
            extra.iloc[i, feat[j]] = thr[j]
        extra.index = pd.RangeIndex(len(X), len(X) + len(extra))
        return pd.concat([X, extra])
    extra = X[rows].copy()
    extra[np.arange(pick.size), feat[pick]] = thr[pick]
    return np.vstack([X, extra])


def _full(att) -> np.ndarray:
    """treeinner's values and bias as the boosters' (n, p + 1, n_outputs) block."""
    v = att.values if att.values.ndim == 3 else att.values[:, :, None]
    bias = np.broadcast_to(np.asarray(att.bias, dtype=np.float64), (v.shape[0], 1, v.shape[2]))
    return np.concatenate([v, bias], axis=1)


def _class_major(ref, n_outputs) -> np.ndarray:
    """(n, p + 1), (n, K, p + 1) or LightGBM's (n, K * (p + 1)) -> (n, p + 1, K)."""
    ref = np.asarray(ref, dtype=np.float64)
    return np.transpose(ref.reshape(ref.shape[0], n_outputs, -1), (0, 2, 1))


def _row_error(got, want) -> np.ndarray:
    """Per row: max |got - want| over the row's block / max |want| there."""
    n = want.shape[0]
    scale = np.abs(want).reshape(n, -1).max(axis=1)
    diff = np.abs(got - want).reshape(n, -1).max(axis=1)
    return diff / np.where(scale > 0, scale, 1.0)


def _assert_rows_close(got, want, rtol, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    err = _row_error(got, want)
    r = int(np.argmax(err))
    assert err[r] <= rtol, (
        f"{what}: row {r} differs by {err[r]:.3g} of its largest |value| "
        f"({np.abs(want[r]).max():.3g}); {int(np.sum(err > rtol))} of {err.size} rows over {rtol}"
    )


def _assert_additive(att, margin, rtol, what="treeinner"):
    total = att.values.sum(axis=1) + att.bias
    margin = np.asarray(margin, dtype=np.float64).reshape(total.shape)
    scale = float(np.abs(margin).max())
    err = float(np.abs(total - margin).max()) / scale
    assert err <= rtol, (
        f"{what}: values.sum(1) + bias misses the margin by {err:.3g} of max|margin|"
    )


def _check(att, ref, margin, rtol, sum_rtol, what):
    """treeinner's block equals the booster's ``ref`` (n, p + 1, K), and adds up to ``margin``."""
    _assert_rows_close(_full(att), ref, rtol, f"treeinner vs {what}")
    _assert_additive(att, margin, sum_rtol)


# ---------------------------------------------------------------------- models
@functools.cache
def _xgb_model(kind, depth, categorical):
    """An XGBoost booster and the rows to explain (its training frame plus threshold rows)."""
    X, codes, y, rng = _data(_seed("xgb", kind, depth, categorical), kind, categorical)
    frame = pd.DataFrame(X, columns=list(NUMERIC))
    params = {"objective": {"regression": "reg:squarederror", "binary": "binary:logistic",
                            "multiclass": "multi:softprob"}[kind],
              "max_depth": depth, "eta": 0.3, "min_child_weight": 0.0, "seed": depth,
              "nthread": 1}  # fmt: skip
    if kind == "multiclass":
        params["num_class"] = 3
    if categorical:
        colour = pd.Categorical.from_codes(codes, categories=list(LEVELS))
        colour[rng.random(len(colour)) < NAN_FRAC] = np.nan
        frame.insert(CAT_AT, "colour", colour)
        # partition splits on odd depths, one-hot splits on even ones
        params.update(tree_method="hist", max_cat_to_onehot=1 if depth % 2 else 8)
    dtrain = xgb.DMatrix(frame, y, enable_categorical=categorical)
    booster = xgb.train(params, dtrain, ROUNDS)
    ens = quiet_ensemble(booster)
    assert _max_depth(ens) == depth
    if categorical:
        assert np.any(ens.split_type[ens.left >= 0] != 0)
    numeric = [frame.columns.get_loc(c) for c in NUMERIC]
    return booster, _at_thresholds(ens, frame, numeric, rng)


def _xgb_reference(booster, rows, categorical, n_outputs):
    dm = xgb.DMatrix(rows, enable_categorical=categorical)
    ref = _class_major(booster.predict(dm, pred_contribs=True), n_outputs)
    return ref, booster.predict(dm, output_margin=True)


def _lgb_params(kind, depth, categorical, seed):
    params = {"objective": kind, "max_depth": depth, "num_leaves": min(2**depth, 128),
              "learning_rate": 0.3, "min_data_in_leaf": 2, "min_sum_hessian_in_leaf": 0.0,
              "seed": seed, "num_threads": 1, "deterministic": True, "verbose": -1}  # fmt: skip
    if kind == "multiclass":
        params["num_class"] = 3
    if categorical:  # one-hot splits on odd depths, many-vs-many on even ones
        params.update(max_cat_to_onehot=8 if depth % 2 else 4, min_data_per_group=5,
                      cat_smooth=1.0, cat_l2=1.0)  # fmt: skip
    return params


@functools.cache
def _lgb_model(kind, depth, categorical):
    """A LightGBM booster and the rows to explain (training rows plus threshold rows)."""
    seed = _seed("lgb", kind, depth, categorical)
    X, codes, y, rng = _data(seed, kind, categorical)
    cat_cols = []
    if categorical:
        c = codes.astype(float)
        c[rng.random(c.size) < NAN_FRAC] = np.nan
        X = np.column_stack([X[:, :CAT_AT], c, X[:, CAT_AT:]])
        cat_cols = [CAT_AT]
    ds = lgb.Dataset(X, y, categorical_feature=cat_cols or "auto")
    booster = lgb.train(_lgb_params(kind, depth, categorical, seed % 1000), ds, ROUNDS)
    ens = quiet_ensemble(booster)
    assert _max_depth(ens) == depth
    if categorical:
        assert np.any(ens.split_type[ens.left >= 0] != 0)
    numeric = [j for j in range(X.shape[1]) if j not in cat_cols]
    return booster, _at_thresholds(ens, X, numeric, rng)


def _lgb_reference(booster, rows, n_outputs):
    ref = _class_major(booster.predict(rows, pred_contrib=True), n_outputs)
    return ref, booster.predict(rows, raw_score=True)


CB_LOSS = {"regression": "RMSE", "binary": "Logloss", "multiclass": "MultiClass"}


@functools.cache
def _cb_model(kind, depth, categorical, grow, seed=0, n=N, iterations=ROUNDS, one_hot_max_size=255):
    """A CatBoost model, the rows to explain (training plus threshold rows), cat_features."""
    X, codes, y, rng = _data(_seed("cb", kind, depth, categorical, grow, seed), kind,
                             categorical, n)  # fmt: skip
    frame = pd.DataFrame(X, columns=list(NUMERIC))
    cat = []
    if categorical:  # CatBoost reads categories as strings (no missing values there)
        frame.insert(CAT_AT, "colour", np.array(LEVELS)[codes])
        cat = ["colour"]
    params = {"loss_function": CB_LOSS[kind], "depth": depth, "iterations": iterations,
              "learning_rate": 0.3, "grow_policy": grow, "random_seed": seed,
              "nan_mode": ("Min", "Max")[(depth + seed) % 2], "one_hot_max_size": one_hot_max_size,
              "thread_count": 1, "verbose": 0, "allow_writing_files": False}  # fmt: skip
    if cat:
        params["cat_features"] = cat
    if grow == "Lossguide":
        params["max_leaves"] = min(2**depth, 64)
    model = cb.CatBoost(params).fit(frame, y)
    ens = quiet_ensemble(model)
    numeric = [frame.columns.get_loc(c) for c in NUMERIC]
    return model, _at_thresholds(ens, frame, numeric, rng), tuple(cat)


def _cb_reference(model, rows, cat, n_outputs):
    pool = cb.Pool(rows, cat_features=list(cat))
    ref = _class_major(model.get_feature_importance(pool, type="ShapValues"), n_outputs)
    return ref, model.predict(rows, prediction_type="RawFormulaVal")


def _cb_additivity_error(ref, margin) -> float:
    """How far CatBoost's own values.sum + bias are from its raw margin (relative)."""
    margin = np.asarray(margin, dtype=np.float64).reshape(ref.shape[0], -1)
    return float(np.abs(ref.sum(axis=1) - margin).max() / np.abs(margin).max())


def _n_out(kind) -> int:
    return 3 if kind == "multiclass" else 1


def _ids(grid):
    return ["-".join(str(v) if not isinstance(v, bool) else f"cat{int(v)}" for v in g)
            for g in grid]  # fmt: skip


# ---------------------------------------------------------------------- XGBoost
XGB_GRID = [(k, d, c) for k in KINDS for d in DEPTHS for c in (False, True)]


@pytest.mark.parametrize("kind,depth,categorical", XGB_GRID, ids=_ids(XGB_GRID))
def test_xgboost_pred_contribs(kind, depth, categorical):
    booster, rows = _xgb_model(kind, depth, categorical)
    ref, margin = _xgb_reference(booster, rows, categorical, _n_out(kind))
    att = treeinner.tree_shap(booster, rows)
    assert att.feature_names == tuple(rows.columns)
    _check(att, ref, margin, XGB_RTOL, XGB_SUM_RTOL, "XGBoost pred_contribs")


# ---------------------------------------------------------------------- LightGBM
LGB_GRID = [(k, d, c) for k in KINDS for d in DEPTHS for c in (False, True)]


@pytest.mark.parametrize("kind,depth,categorical", LGB_GRID, ids=_ids(LGB_GRID))
def test_lightgbm_pred_contrib(kind, depth, categorical):
    booster, rows = _lgb_model(kind, depth, categorical)
    ref, margin = _lgb_reference(booster, rows, _n_out(kind))
    att = treeinner.tree_shap(booster, rows)
    _check(att, ref, margin, F64_RTOL, F64_SUM_RTOL, "LightGBM pred_contrib")


# ---------------------------------------------------------------------- CatBoost
CB_SYM_GRID = [(k, d, c) for k in KINDS for d in CB_DEPTHS for c in (False, True)]


@pytest.mark.parametrize("kind,depth,categorical", CB_SYM_GRID, ids=_ids(CB_SYM_GRID))
def test_catboost_symmetric_shap_values(kind, depth, categorical):
    """Oblivious trees: CatBoost walks each tree's levels last split first; so must we."""
    model, rows, cat = _cb_model(kind, depth, categorical, "SymmetricTree")
    ref, margin = _cb_reference(model, rows, cat, _n_out(kind))
    assert _cb_additivity_error(ref, margin) <= F64_SUM_RTOL
    att = treeinner.tree_shap(model, rows)
    assert att.feature_names == tuple(rows.columns)
    _check(att, ref, margin, F64_RTOL, F64_SUM_RTOL, "CatBoost ShapValues")


# Depthwise / Lossguide models on which CatBoost's own values are additive (asserted below):
# shallow trees on many rows, with every leaf at the maximum depth or close to it.
# (grow, kind, depth, categorical, training rows)
CB_TREE_GRID = [
    ("Depthwise", "regression", 1, False, 600),
    ("Depthwise", "regression", 2, False, 600),
    ("Depthwise", "binary", 3, False, 600),
    ("Depthwise", "multiclass", 3, False, 600),
    ("Depthwise", "multiclass", 4, False, 600),
    ("Lossguide", "regression", 2, False, 1000),
    ("Lossguide", "binary", 3, False, 600),
    ("Lossguide", "multiclass", 3, False, 1000),
    ("Lossguide", "multiclass", 4, False, 600),
]


@pytest.mark.parametrize("grow,kind,depth,categorical,n", CB_TREE_GRID, ids=_ids(CB_TREE_GRID))
def test_catboost_non_symmetric_shap_values(grow, kind, depth, categorical, n):
    model, rows, cat = _cb_model(kind, depth, categorical, grow, n=n)
    ref, margin = _cb_reference(model, rows, cat, _n_out(kind))
    err = _cb_additivity_error(ref, margin)
    assert err <= F64_SUM_RTOL, f"not a test case: CatBoost's values miss its margin by {err:.3g}"
    att = treeinner.tree_shap(model, rows)
    _check(att, ref, margin, F64_RTOL, F64_SUM_RTOL, "CatBoost ShapValues")


@pytest.mark.parametrize(
    "grow,depth,seed", [("Depthwise", 4, 2), ("Depthwise", 5, 0), ("Lossguide", 4, 3),
                        ("Lossguide", 5, 3)]
)  # fmt: skip
def test_catboost_not_additive_where_treeinner_is(grow, depth, seed):
    """One tree with leaves above the maximum depth: CatBoost's ShapValues do not add up to
    its prediction (catboost #1125, #2136, #2556); treeinner's do, and are the Shapley values
    computed from the definition."""
    model, rows, cat = _cb_model("regression", depth, False, grow, seed=seed, n=200, iterations=1)
    ens = quiet_ensemble(model)
    assert ens.n_trees == 1 and _max_depth(ens) == depth and np.sum(ens.left < 0) < 2**depth
    ref, margin = _cb_reference(model, rows, cat, 1)
    assert _cb_additivity_error(ref, margin) > 1e-3  # CatBoost is off
    att = treeinner.tree_shap(model, rows)
    _assert_additive(att, margin, F64_SUM_RTOL)
    # _brute_shapley routes by XGBoost's rule (left iff float32(x) < threshold) and weights by
    # .cover: give it CatBoost's rule (left iff float32(x) <= border) and the row counts. A
    # border at FLT_MAX (nan_mode Max) becomes +inf, which a TreeEnsemble would refuse.
    with np.errstate(over="ignore"):
        above = np.nextafter(ens.threshold.astype(np.float32), np.float32(np.inf))
    brute_ens = types.SimpleNamespace(
        n_features=ens.n_features, left=ens.left, right=ens.right, feature=ens.feature,
        threshold=above.astype(np.float64), default_left=ens.default_left, value=ens.value,
        cover=ens.count,
    )  # fmt: skip
    X = rows.to_numpy()
    pick = np.r_[0:20, len(rows) - 20 : len(rows)]  # training rows (with NaN), threshold rows
    for r in pick:
        phi, expected = _brute_shapley(brute_ens, X[r])
        np.testing.assert_allclose(att.values[r], phi, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(att.bias, ens.base_margin + expected, rtol=1e-12)


@pytest.mark.parametrize("grow", ["Depthwise", "Lossguide"])
def test_catboost_non_symmetric_categorical_refused(grow):
    """TreeSHAP reads splits off the row's path; CatBoost only tells how a row goes at the
    categorical splits it passes, so these models get a clear error, not wrong values."""
    model, rows, _ = _cb_model("regression", 3, True, grow, seed=1, n=600, iterations=2)
    ens = quiet_ensemble(model)
    assert np.any((ens.left >= 0) & (ens.feature >= rows.shape[1]))  # categorical splits
    with pytest.raises(NotImplementedError, match="Depthwise/Lossguide"):
        treeinner.tree_shap(model, rows)
    with pytest.raises(NotImplementedError, match="Depthwise/Lossguide"):
        treeinner.tree_inner(model, rows, np.zeros(len(rows)), attribution="shap")


@pytest.mark.parametrize("kind,depth", [("regression", 3), ("binary", 6), ("multiclass", 4)])
def test_catboost_symmetric_ctr_splits(kind, depth):
    """Oblivious trees with CTR splits on the categorical column (one_hot_max_size=1)."""
    model, rows, cat = _cb_model(kind, depth, True, "SymmetricTree", one_hot_max_size=1)
    ens = quiet_ensemble(model)
    assert ens.input_map is not None and ens.n_features > rows.shape[1]
    ref, margin = _cb_reference(model, rows, cat, _n_out(kind))
    assert _cb_additivity_error(ref, margin) <= F64_SUM_RTOL
    _check(treeinner.tree_shap(model, rows), ref, margin, F64_RTOL, F64_SUM_RTOL, "CatBoost")


def test_catboost_unused_categorical_feature():
    """A model declaring a categorical feature its trees never split on still takes the
    frame CatBoost takes (string categories) and explains it like CatBoost."""
    model, rows, cat = _cb_model("regression", 2, True, "Depthwise", seed=0, n=600, iterations=1)
    ref, margin = _cb_reference(model, rows, cat, 1)
    assert np.all(ref[:, rows.columns.get_loc("colour")] == 0)  # no split on it
    att = treeinner.tree_shap(model, rows)
    _check(att, ref, margin, F64_RTOL, F64_SUM_RTOL, "CatBoost ShapValues")


# ---------------------------------------------------------------------- shap
SHAP_GRID = [(k, d, c) for k in KINDS for d in (1, 3, 8, 12) for c in (False, True)]


def _shap_block(explainer, rows, n_outputs):
    """shap's values (n, p[, K]) and expected_value as an (n, p + 1, K) block."""
    sv = np.asarray(explainer.shap_values(rows), dtype=np.float64)
    sv = sv if sv.ndim == 3 else sv[:, :, None]
    ev = np.asarray(explainer.expected_value, dtype=np.float64).reshape(1, 1, n_outputs)
    assert sv.shape[2] == n_outputs
    return np.concatenate([sv, np.broadcast_to(ev, (sv.shape[0], 1, n_outputs))], axis=1)


@pytest.mark.parametrize("kind,depth,categorical", SHAP_GRID, ids=_ids(SHAP_GRID))
def test_shap_tree_explainer_xgboost(kind, depth, categorical):
    shap = pytest.importorskip("shap")
    booster, rows = _xgb_model(kind, depth, categorical)
    explainer = shap.TreeExplainer(booster, feature_perturbation="tree_path_dependent")
    # shap builds its DMatrix without enable_categorical: pass categorical frames as one
    data = xgb.DMatrix(rows, enable_categorical=True) if categorical else rows
    want = _shap_block(explainer, data, _n_out(kind))
    att = treeinner.tree_shap(booster, rows)
    _assert_rows_close(_full(att), want, XGB_RTOL, "treeinner vs shap (XGBoost)")


@pytest.mark.parametrize("kind,depth,categorical", SHAP_GRID, ids=_ids(SHAP_GRID))
def test_shap_tree_explainer_lightgbm(kind, depth, categorical):
    shap = pytest.importorskip("shap")
    booster, rows = _lgb_model(kind, depth, categorical)
    explainer = shap.TreeExplainer(booster, feature_perturbation="tree_path_dependent")
    want = _shap_block(explainer, rows, _n_out(kind))
    att = treeinner.tree_shap(booster, rows)
    _assert_rows_close(_full(att), want, F64_RTOL, "treeinner vs shap (LightGBM)")


SHAP_CEXT_GRID = [
    ("xgboost", "regression", 3),
    ("xgboost", "binary", 10),
    ("xgboost", "multiclass", 5),
    ("lightgbm", "regression", 10),
    ("lightgbm", "binary", 3),
    ("lightgbm", "regression", 12),
]


@pytest.mark.parametrize("booster,kind,depth", SHAP_CEXT_GRID, ids=_ids(SHAP_CEXT_GRID))
def test_shap_own_tree_shap(booster, kind, depth):
    """shap.TreeExplainer hands XGBoost and LightGBM models to the boosters' own SHAP; this
    runs shap's own C++ TreeSHAP on shap's parse of the trees instead (model_type
    "internal"), on numeric models: shap's own parse refuses XGBoost categorical splits,
    routes LightGBM's differently from LightGBM, and gives one output for LightGBM multiclass
    models. Only the values are compared: shap's own bias for XGBoost models is the intercept
    alone (its parse has no inner node values), so it does not add up to XGBoost's margin."""
    shap = pytest.importorskip("shap")
    if booster == "xgboost":
        model, rows = _xgb_model(kind, depth, False)
        rtol = XGB_RTOL
    else:
        model, rows = _lgb_model(kind, depth, False)
        rtol = F64_RTOL
    explainer = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    explainer.model.model_type = "internal"
    sv = np.asarray(explainer.shap_values(rows, check_additivity=False), dtype=np.float64)
    got = treeinner.tree_shap(model, rows).values
    _assert_rows_close(got, sv, rtol, f"treeinner vs shap's own TreeSHAP ({booster})")
