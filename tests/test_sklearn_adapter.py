"""scikit-learn's HistGradientBoosting* and GradientBoosting* estimators: margins and leaf
indices identical to the estimators' own on adversarial inputs, categorical features, missing
values, early stopping and multiclass; TreeSHAP adding up to the margin and equal to shap's;
hessian covers recovered exactly (HistGradientBoosting); the total-gain identity where the
stored statistics allow it; every importance method; clear errors."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

sklearn_ensemble = pytest.importorskip("sklearn.ensemble")

import treeinner  # noqa: E402
from treeinner._methods import REGISTRY  # noqa: E402
from treeinner.adapters import _sk_hgb  # noqa: E402
from treeinner.attribution import NeedsReference  # noqa: E402

HGBR = sklearn_ensemble.HistGradientBoostingRegressor
HGBC = sklearn_ensemble.HistGradientBoostingClassifier
GBR = sklearn_ensemble.GradientBoostingRegressor
GBC = sklearn_ensemble.GradientBoostingClassifier


def _ens(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(est)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@functools.cache
def _data(n: int = 1200, seed: int = 0, nan: bool = True):
    """Features with ties and NaN, and a target of every kind."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 3] = np.round(X[:, 3], 1)  # ties
    clean = X.copy()
    if nan:
        X[rng.random(X.shape) < 0.08] = np.nan
    f = 2 * clean[:, 0] + clean[:, 1] ** 2 + 0.5 * clean[:, 3]
    y = f + 0.3 * rng.normal(size=n)
    return {
        "X": X,
        "reg": y,
        "bin": (y > np.median(y)).astype(int),
        "multi": np.digitize(y, np.quantile(y, [0.3, 0.65])),
        "poisson": rng.poisson(np.exp(f / 4)).astype(float),
        "gamma": rng.gamma(2.0, np.exp(f / 5) / 2.0),
    }


HGB_CASES = {
    "squared_error": (HGBR, "reg", {"l2_regularization": 1.0}),
    "squared_error_weighted": (HGBR, "reg", {"l2_regularization": 0.5}),
    "log_loss_binary": (HGBC, "bin", {"l2_regularization": 0.3}),
    "log_loss_multiclass": (HGBC, "multi", {}),
    "poisson": (HGBR, "poisson", {"loss": "poisson"}),
    "gamma": (HGBR, "gamma", {"loss": "gamma", "l2_regularization": 2.0}),
    "early_stopping": (
        HGBC,
        "multi",
        {
            "early_stopping": True,
            "validation_fraction": None,
            "n_iter_no_change": 2,
            "tol": 1e-3,
            "max_iter": 300,
        },
    ),
    "early_stopping_validation": (
        HGBR,
        "reg",
        {
            "early_stopping": True,
            "validation_fraction": 0.2,
            "n_iter_no_change": 3,
            "max_iter": 300,
            "random_state": 0,
        },
    ),
}


@functools.cache
def hgb(case: str):
    """A fitted HistGradientBoosting case, its training X, y and sample weights."""
    cls, target, kw = HGB_CASES[case]
    d = _data()
    params = {"max_iter": 25, "max_leaf_nodes": 15, "learning_rate": 0.2, **kw}
    sw = None
    if case == "squared_error_weighted":
        sw = np.random.default_rng(3).uniform(0.2, 3.0, size=d["X"].shape[0])
    return cls(**params).fit(d["X"], d[target], sample_weight=sw), d["X"], d[target], sw


GB_CASES = {
    "squared_error": (GBR, "reg", {}),
    "log_loss_binary": (GBC, "bin", {}),
    "log_loss_multiclass": (GBC, "multi", {}),
    "huber": (GBR, "reg", {"loss": "huber"}),
    "quantile": (GBR, "reg", {"loss": "quantile", "alpha": 0.7}),
    "absolute_error": (GBR, "reg", {"loss": "absolute_error"}),
    "exponential": (GBC, "bin", {"loss": "exponential"}),
    "zero_init": (GBR, "reg", {"init": "zero"}),
    "early_stopping": (
        GBC,
        "bin",
        {"n_iter_no_change": 2, "n_estimators": 300, "validation_fraction": 0.2, "tol": 1e-2},
    ),
    "subsample": (GBR, "reg", {"subsample": 0.7}),
}


@functools.cache
def gb(case: str):
    """A fitted GradientBoosting case and its training X, y (no NaN: it refuses them)."""
    cls, target, kw = GB_CASES[case]
    d = _data(nan=False)
    params = {"n_estimators": 20, "max_depth": 3, "learning_rate": 0.3, "random_state": 0, **kw}
    return cls(**params).fit(d["X"], d[target]), d["X"], d[target]


def _hgb_thresholds(est):
    """Every numeric split's feature (the estimator's column) and threshold."""
    out = []
    for it in est._predictors:
        for p in it:
            nd = p.nodes[(p.nodes["is_leaf"] == 0) & (p.nodes["is_categorical"] == 0)]
            out += list(zip(nd["feature_idx"].tolist(), nd["num_threshold"].tolist()))
    return out


def _adversarial(X: np.ndarray, splits, seed: int = 1, inf: bool = True) -> np.ndarray:
    """Rows holding every split's threshold, its float64 and float32 neighbours, NaN and
    +-inf (where allowed) in the split's column."""
    rng = np.random.default_rng(seed)
    vals = []
    for f, t in splits:
        if not np.isfinite(t):
            continue
        t32 = float(np.float32(t))
        for v in (
            t,
            np.nextafter(t, np.inf),
            np.nextafter(t, -np.inf),
            t32,
            float(np.nextafter(np.float32(t), np.float32(np.inf))),
        ):
            vals.append((f, v))
    rows = X[rng.integers(0, X.shape[0], size=len(vals))].copy()
    for i, (f, v) in enumerate(vals):
        rows[i, f] = v
    extra = X[:40].copy()
    extra[rng.random(extra.shape) < 0.3] = np.nan
    if inf:
        extra[rng.random(extra.shape) < 0.1] = np.inf
        extra[rng.random(extra.shape) < 0.1] = -np.inf
    return np.vstack([rows, extra, X[:200]])


# ---------------------------------------------------------------------- HistGradientBoosting
@pytest.mark.parametrize("case", list(HGB_CASES))
def test_hgb_margins_are_bit_identical(case):
    est, X, _, _ = hgb(case)
    ens = _ens(est)
    Xa = _adversarial(X, _hgb_thresholds(est))
    raw = est._raw_predict(Xa)
    assert np.array_equal(ens.predict_margin(Xa).reshape(raw.shape), raw)
    # float32 input: sklearn reads it as float64, so does treeinner
    X32 = Xa.astype(np.float32)
    raw32 = est._raw_predict(X32)
    assert np.array_equal(ens.predict_margin(X32).reshape(raw32.shape), raw32)
    assert ens.n_trees == est.n_iter_ * est.n_trees_per_iteration_


def test_hgb_early_stopping_keeps_the_trees_it_predicts_with():
    for case in ("early_stopping", "early_stopping_validation"):
        est = hgb(case)[0]
        assert est.n_iter_ < est.max_iter
        assert _ens(est).n_trees == len(est._predictors) * est.n_trees_per_iteration_


@pytest.mark.parametrize("case", ["squared_error", "log_loss_binary", "log_loss_multiclass"])
def test_hgb_tree_shap_adds_up_and_equals_shap(case):
    est, X, _, _ = hgb(case)
    Xa = _adversarial(X, _hgb_thresholds(est), inf=False)[:300]
    att = treeinner.tree_shap(est, Xa)
    raw = est._raw_predict(Xa)
    total = att.values.sum(axis=1) + att.bias
    np.testing.assert_allclose(total.reshape(raw.shape), raw, rtol=0, atol=1e-9)
    shap = pytest.importorskip("shap")
    sv = np.asarray(_quiet(shap.TreeExplainer(est).shap_values, Xa, check_additivity=False))
    if sv.ndim == 3 and sv.shape[0] == est.n_trees_per_iteration_ and sv.shape[1] == len(Xa):
        sv = np.moveaxis(sv, 0, -1)
    np.testing.assert_allclose(sv.reshape(att.values.shape), att.values, rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", [c for c in HGB_CASES if c != "early_stopping_validation"])
def test_hgb_covers_are_recovered_exactly(case):
    """PreDecomp node values from the recovered covers equal scikit-learn's stored inner
    values (times the learning rate) and the node values from the training data."""
    est, X, y, sw = hgb(case)
    ens = _ens(est)
    assert np.all(np.isfinite(ens.cover)), "every tree's covers recovered"
    p = treeinner.node_values(ens)
    stored = np.concatenate([q.nodes["value"] for it in est._predictors for q in it])
    lr = est.learning_rate
    inner = ens.left >= 0
    not_root = np.ones(ens.n_nodes, bool)
    not_root[ens.tree_offsets[:-1]] = False
    sel = inner & not_root
    np.testing.assert_allclose(p[sel], lr * stored[sel], rtol=1e-7, atol=1e-12)
    ref = (X, y) if sw is None else (X, y, sw)
    from_data = treeinner.node_values(ens, reference=ref)
    scale = np.abs(p).max()
    # scikit-learn sums float32 gradients; treeinner's are float64
    np.testing.assert_allclose(from_data, p, rtol=0, atol=2e-5 * scale)


@pytest.mark.parametrize("case", [c for c in HGB_CASES if c != "early_stopping_validation"])
def test_hgb_total_gain_identity(case):
    """On the training rows, TreeInner (PreDecomp) equals the summed second-order split
    gains; below the root those are scikit-learn's own stored gains."""
    est, X, y, sw = hgb(case)
    ens = _ens(est)
    stored = np.concatenate([q.nodes["gain"] for it in est._predictors for q in it])
    inner = ens.left >= 0
    not_root = np.ones(ens.n_nodes, bool)
    not_root[ens.tree_offsets[:-1]] = False
    sel = inner & not_root
    np.testing.assert_allclose(ens.gain[sel], stored[sel], rtol=1e-6, atol=1e-9 * stored.max())
    ti = treeinner.tree_inner(est, X, y, sample_weight=sw)
    tg = treeinner.total_gain(est)
    ti = ti["total"] if isinstance(ti, pd.DataFrame) else ti
    tg = tg["total"] if isinstance(tg, pd.DataFrame) else tg
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-5, atol=1e-6 * tg.max())


def test_hgb_stump_has_no_covers_and_needs_the_training_data():
    d = _data()
    est = HGBC(max_depth=1, max_iter=5).fit(d["X"], d["bin"])
    with pytest.warns(UserWarning, match="do not determine their hessian sums"):
        ens = treeinner.from_model(est)
    assert np.all(np.isnan(ens.cover))
    with pytest.raises(NeedsReference, match="reference=\\(X_train, y_train\\)"):
        treeinner.predecomp(est, d["X"])
    p = treeinner.node_values(est, reference=(d["X"], d["bin"]))
    leaves = ens.left < 0
    np.testing.assert_allclose(p[leaves], ens.value[leaves], rtol=1e-5)
    # squared error without weights: the covers are the counts, even for stumps
    reg = HGBR(max_depth=1, max_iter=5).fit(d["X"], d["reg"])
    ens = _ens(reg)
    np.testing.assert_array_equal(ens.cover, ens.count)


def test_hgb_recovery_refuses_values_it_cannot_reproduce():
    """A tree whose stored inner value disagrees with its leaves (as monotonic constraints
    make it) is not given covers."""
    est = hgb("log_loss_binary")[0]
    nodes = est._predictors[3][0].nodes.copy()
    inner = np.flatnonzero(nodes["is_leaf"] == 0)[1:]
    nodes["value"][inner[0]] *= 1.01
    tree, u = _sk_hgb._tree(
        {k: nodes[k] for k in _sk_hgb._FIELDS},
        0,
        nodes.shape[0],
        np.zeros((0, 8), np.uint32),
        {},
        {"columns": list(range(5)), "learning_rate": est.learning_rate},
        {},
    )
    lam = est.l2_regularization + 1e-15
    assert _sk_hgb.recover(tree, u, lam, False) is None
    nodes["value"][inner[0]] /= 1.01
    tree, u = _sk_hgb._tree(
        {k: nodes[k] for k in _sk_hgb._FIELDS},
        0,
        nodes.shape[0],
        np.zeros((0, 8), np.uint32),
        {},
        {"columns": list(range(5)), "learning_rate": est.learning_rate},
        {},
    )
    assert _sk_hgb.recover(tree, u, lam, False) is not None


def test_hgb_class_weight_and_monotonic_constraints():
    """Class weights are sample weights: the identity holds with them passed as
    ``sample_weight``. Monotonic constraints clip node values: warned, margins still exact."""
    d = _data()
    X, yb = d["X"], d["bin"]
    est = HGBC(max_iter=15, class_weight={0: 1.0, 1: 3.0}).fit(X, yb)
    ens = _ens(est)
    assert np.all(np.isfinite(ens.cover))
    ti = treeinner.tree_inner(est, X, yb, sample_weight=np.where(yb == 1, 3.0, 1.0))
    tg = treeinner.total_gain(est)
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-5, atol=1e-6 * tg.max())
    mono = HGBR(max_iter=15, monotonic_cst=[1, 0, 0, 0, 0]).fit(X, d["reg"])
    with pytest.warns(UserWarning, match="monotonic_cst clips node values"):
        ens = treeinner.from_model(mono)
    np.testing.assert_array_equal(ens.cover, ens.count)  # squared error: the counts
    raw = mono._raw_predict(X)
    assert np.array_equal(ens.predict_margin(X).reshape(raw.shape), raw)


def _cat_frame(n: int, seed: int, levels: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "color": pd.Categorical(rng.choice(levels, size=n), categories=sorted(set(levels))),
            "code": rng.choice([3, 7, 11, 20, 40], size=n),
            "num2": rng.normal(size=n),
        }
    )
    df.loc[rng.random(n) < 0.05, "color"] = np.nan
    df.loc[rng.random(n) < 0.05, "num"] = np.nan
    return df


@functools.cache
def hgb_categorical(kind: str):
    """HistGradientBoosting on a string categorical column and an integer-coded one."""
    levels = ["red", "green", "blue", "cyan", "magenta", "black"]
    df = _cat_frame(1500, 0, levels)
    eff = {"red": 2.0, "green": -1.0, "blue": 0.5, "cyan": 1.5, "magenta": -2.0, "black": 0.0}
    code_eff = {3: 1.0, 7: -1.0, 11: 2.0, 20: 0.0, 40: -0.5}
    rng = np.random.default_rng(1)
    y = (
        df["color"].map(eff).astype(float).fillna(0.3)
        + df["code"].map(code_eff)
        + np.nan_to_num(df["num"])
        + 0.2 * rng.normal(size=len(df))
    )
    params = {"max_iter": 30, "categorical_features": ["color", "code"], "max_leaf_nodes": 12}
    if kind == "reg":
        return HGBR(**params).fit(df, y), df, y.to_numpy()
    yc = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    return HGBC(**params).fit(df, yc), df, yc


@pytest.mark.parametrize("kind", ["reg", "multi"])
def test_hgb_categorical_margins_with_unseen_categories(kind):
    est, df, y = hgb_categorical(kind)
    ens = _ens(est)
    assert ens.categories == {1: ["black", "blue", "cyan", "green", "magenta", "red"]}
    assert any(ens.split_type[ens.left >= 0] != 0), "the model splits on categories"
    test = _cat_frame(400, 5, ["red", "green", "blue", "cyan", "magenta", "black", "white"])
    test["code"] = np.random.default_rng(7).choice([3, 7, 11, 20, 40, 5, 0, -3], size=400)
    test.loc[::17, "code"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn and treeinner both warn of 'white'
        raw = est._raw_predict(test)
        got = ens.predict_margin(test)
    assert np.array_equal(got.reshape(raw.shape), raw)
    assert (test["color"] == "white").any() and (~test["code"].isin([3, 7, 11, 20, 40])).any()
    att = treeinner.tree_shap(est, df.iloc[:200])
    total = att.values.sum(axis=1) + att.bias
    raw = est._raw_predict(df.iloc[:200])
    np.testing.assert_allclose(total.reshape(raw.shape), raw, atol=1e-9)


def test_hgb_categorical_total_gain_identity():
    est, df, y = hgb_categorical("reg")
    ti = treeinner.tree_inner(est, df, y)
    tg = treeinner.total_gain(est)
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-5, atol=1e-6 * tg.max())
    assert tg["color"] > 0 and tg["code"] > 0


def test_hgb_numpy_categorical_reads_the_values():
    """With X a NumPy array, integer categories are read as their values (sklearn encodes
    them against the sorted training values: 3 -> 0, 7 -> 1, ...)."""
    rng = np.random.default_rng(2)
    codes = rng.choice([3, 7, 11, 20], size=800).astype(float)
    X = np.c_[codes, rng.normal(size=800)]
    y = np.where(codes == 7, 2.0, 0.0) + np.where(codes == 20, -1.0, 0.0) + X[:, 1]
    est = HGBR(max_iter=10, categorical_features=[0]).fit(X, y)
    ens = _ens(est)
    T = np.c_[np.array([3, 7, 11, 20, 0, 1, 2, 5, 21, 255, 256, -1, np.nan]), np.zeros(13)]
    raw = est._raw_predict(T)
    assert np.array_equal(ens.predict_margin(T).reshape(raw.shape), raw)


def test_hgb_non_integer_numeric_categories_are_refused():
    rng = np.random.default_rng(2)
    X = np.c_[rng.choice([0.5, 1.5, 2.5], size=300), rng.normal(size=300)]
    est = HGBR(max_iter=3, categorical_features=[0]).fit(X, X[:, 0] + X[:, 1])
    with pytest.raises(treeinner.UnsupportedModelError, match="not non-negative integers"):
        treeinner.from_model(est)


@pytest.mark.parametrize("loss", ["quantile", "absolute_error"])
def test_hgb_prediction_only_losses(loss):
    d = _data()
    kw = {"quantile": 0.8} if loss == "quantile" else {}
    est = HGBR(loss=loss, max_iter=10, **kw).fit(d["X"], d["reg"])
    with pytest.warns(UserWarning, match="refit to residual"):
        ens = treeinner.from_model(est)
    raw = est._raw_predict(d["X"])
    assert np.array_equal(ens.predict_margin(d["X"]).reshape(raw.shape), raw)
    att = treeinner.tree_shap(est, d["X"][:50])
    np.testing.assert_allclose(att.values.sum(axis=1) + att.bias, raw[:50, 0], atol=1e-9)
    with pytest.raises(NotImplementedError, match="no per-row gradient"):
        treeinner.tree_inner(est, d["X"], d["reg"])


# ---------------------------------------------------------------------- GradientBoosting
def _gb_splits(est):
    out = []
    for e in np.asarray(est.estimators_).ravel():
        t = e.tree_
        inner = t.children_left >= 0
        out += list(zip(t.feature[inner].tolist(), t.threshold[inner].tolist()))
    return out


@pytest.mark.parametrize("case", list(GB_CASES))
def test_gb_margins_and_leaves_are_identical(case):
    est, X, _ = gb(case)
    ens = _ens(est)
    Xa = _adversarial(X, _gb_splits(est), inf=False)
    Xa = np.nan_to_num(Xa)  # GradientBoosting refuses NaN and infinities
    raw = est._raw_predict(Xa.astype(np.float32))
    got = ens.predict_margin(Xa)
    assert np.array_equal(got.reshape(raw.shape), raw)
    leaves = ens.leaf_index(Xa)
    assert np.array_equal(leaves.reshape(est.apply(Xa).shape), est.apply(Xa))
    if hasattr(est, "decision_function"):
        dec = est.decision_function(Xa)
        assert np.array_equal(got.reshape(dec.shape), dec)
    else:
        assert np.array_equal(got.ravel(), est.predict(Xa))
    assert ens.n_trees == est.n_estimators_ * est.n_trees_per_iteration_


def test_gb_float32_rounding_routes_as_sklearn():
    """Values that round to a threshold in float32 go where sklearn sends them (left iff
    float32(x) <= threshold) although in float64 they are above it."""
    est, X, _ = gb("squared_error")
    ens = _ens(est)
    f, t = _gb_splits(est)[0]
    t32 = np.float32(t)
    above = np.nextafter(t, np.inf)
    rows = np.repeat(X[:1], 4, axis=0)
    rows[:, f] = [above, float(t32), float(np.nextafter(t32, np.float32(np.inf))), t]
    raw = est._raw_predict(rows.astype(np.float32)).ravel()
    assert np.array_equal(ens.predict_margin(rows), raw)
    assert np.array_equal(ens.leaf_index(rows)[:, 0], est.apply(rows)[:, 0])


@pytest.mark.parametrize(
    "case", ["squared_error", "log_loss_binary", "log_loss_multiclass", "huber"]
)
def test_gb_tree_shap_adds_up_and_equals_shap(case):
    est, X, _ = gb(case)
    att = treeinner.tree_shap(est, X[:200])
    raw = est._raw_predict(X[:200].astype(np.float32))
    total = att.values.sum(axis=1) + att.bias
    np.testing.assert_allclose(total.reshape(raw.shape), raw, atol=1e-9)
    if est.n_trees_per_iteration_ > 1:
        return  # shap explains GradientBoostingClassifier for two classes only
    shap = pytest.importorskip("shap")
    sv = np.asarray(_quiet(shap.TreeExplainer(est).shap_values, X[:200], check_additivity=False))
    if sv.ndim == 3 and sv.shape[0] == est.n_trees_per_iteration_ and sv.shape[1] == 200:
        sv = np.moveaxis(sv, 0, -1)
    np.testing.assert_allclose(sv.reshape(att.values.shape), att.values, atol=1e-9)


def test_gb_squared_error_total_gain_identity_and_feature_importances():
    est, X, y = gb("squared_error")
    ens = _ens(est)
    assert ens.reg_lambda == 0.0 and np.all(np.isfinite(ens.cover))
    # PreDecomp node values are the trees' own (mean residual) values times the learning rate
    stored = np.concatenate([e.tree_.value[:, 0, 0] for e in est.estimators_.ravel()])
    np.testing.assert_allclose(
        treeinner.node_values(ens), est.learning_rate * stored, rtol=1e-12, atol=1e-14
    )
    ti = treeinner.tree_inner(est, X, y)
    tg = treeinner.total_gain(est)
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-9, atol=1e-9 * tg.max())
    np.testing.assert_allclose(tg / tg.sum(), est.feature_importances_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", ["log_loss_binary", "log_loss_multiclass"])
def test_gb_log_loss_node_values_from_the_training_data(case):
    """log_loss leaves are Newton steps (multiclass: times (K - 1) / K): node values from
    the training data reproduce every leaf; without the data PreDecomp asks for it."""
    est, X, y = gb(case)
    ens = _ens(est)
    assert np.all(np.isnan(ens.cover))
    with pytest.raises(NeedsReference):
        treeinner.predecomp(est, X)
    p = treeinner.node_values(est, reference=(X, y))
    leaves = ens.left < 0
    np.testing.assert_allclose(p[leaves], ens.value[leaves], rtol=1e-9, atol=1e-12)
    tg = treeinner.total_gain(est)
    fi = tg["total"] if isinstance(tg, pd.DataFrame) else tg
    np.testing.assert_allclose(fi / fi.sum(), est.feature_importances_, rtol=1e-9, atol=1e-12)
    sa = treeinner.saabas(est, X[:50])
    raw = est._raw_predict(X[:50].astype(np.float32))
    np.testing.assert_allclose((sa.values.sum(axis=1) + sa.bias).reshape(raw.shape), raw, atol=1e-9)


def test_gb_subsample_warns_and_unsupported_init_is_refused():
    est = gb("subsample")[0]
    with pytest.warns(UserWarning, match="subsample=0.7"):
        treeinner.from_model(est)
    d = _data(nan=False)
    lin = pytest.importorskip("sklearn.linear_model")
    odd = GBR(n_estimators=3, init=lin.LinearRegression()).fit(d["X"], d["reg"])
    with pytest.raises(treeinner.UnsupportedModelError, match="init=LinearRegression"):
        treeinner.from_model(odd)


# ---------------------------------------------------------------------- every method
@pytest.mark.parametrize(
    "which",
    [
        "hgb:squared_error",
        "hgb:log_loss_multiclass",
        "hgb:poisson",
        "gb:squared_error",
        "gb:log_loss_binary",
        "gb:log_loss_multiclass",
    ],
)
def test_every_importance_method_runs(which):
    kind, case = which.split(":")
    if kind == "hgb":
        est, X, y, _ = hgb(case)
    else:
        est, X, y = gb(case)
    ref = (X, y) if kind == "gb" and "log_loss" in case else None
    out = _quiet(
        treeinner.importance,
        est,
        X[:400],
        y[:400],
        methods=list(REGISTRY),
        reference=ref,
        random_state=0,
        n_repeats=2,
    )
    assert list(out.columns)[: len(REGISTRY)] == list(REGISTRY) or set(REGISTRY) <= set(out.columns)
    assert np.all(np.isfinite(out[list(REGISTRY)].to_numpy()))
    assert out.loc["f0", "tree_inner"] > 0 and out.loc["f0", "total_gain"] > 0


# ---------------------------------------------------------------------- errors, cache
@pytest.mark.parametrize("cls", [HGBR, HGBC, GBR, GBC])
def test_unfitted_estimators_are_refused(cls):
    with pytest.raises(treeinner.InputError, match="not fitted"):
        treeinner.from_model(cls())


def test_other_sklearn_estimators_are_not_models():
    forest = pytest.importorskip("sklearn.ensemble").RandomForestRegressor(n_estimators=2)
    d = _data(nan=False)
    forest.fit(d["X"], d["reg"])
    with pytest.raises(TypeError, match="scikit-learn \\(Hist\\)GradientBoosting"):
        treeinner.from_model(forest)


def test_conversions_are_cached_and_refits_are_not_stale():
    d = _data()
    est = HGBR(max_iter=5).fit(d["X"], d["reg"])
    e1 = treeinner.from_model(est)
    assert treeinner.from_model(est) is e1
    est.set_params(max_iter=8).fit(d["X"], d["reg"])
    e2 = treeinner.from_model(est)
    assert e2 is not e1 and e2.n_trees == 8
    raw = est._raw_predict(d["X"])
    assert np.array_equal(e2.predict_margin(d["X"]).reshape(raw.shape), raw)


def test_saved_ensemble_round_trips(tmp_path):
    est, df, _ = hgb_categorical("reg")
    ens = _ens(est)
    ens.save(tmp_path / "m.npz")
    back = treeinner.load(tmp_path / "m.npz")
    raw = est._raw_predict(df)
    assert np.array_equal(back.predict_margin(df).reshape(raw.shape), raw)
