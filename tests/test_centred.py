"""The centred initial form of ForestInner (``treeinner._centred``): exact against a NumPy
reference written from its definition, the same on Dask input and in cross-fitting, and a
null of zero on large fresh samples for every loss with a non-constant hessian.

The reference walks every row's path in every tree from the booster's own leaf ids: node
means of the leaf values and of ``r = -g(F_0) / lr`` over the (weighted) evaluation rows, the
per-row terms ``sum over the row's splits of (pbar_child - pbar_t)(r - rbar_t)``, their
weighted sum (the score) and, with the factor ``n_t / (n_t - 1)``, their squares.
"""

from __future__ import annotations

import functools
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest

import treeinner
from tests._helpers import leaf_nodes, quiet_ensemble
from treeinner._centred import _shap_setup, centred_initial_moments, centring
from treeinner._staged import initial_gradients
from treeinner._stats import moments_from_rows
from treeinner.kernels.attribution import parents

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _signal(X: np.ndarray) -> np.ndarray:
    return X[:, 0] + 0.8 * X[:, 1] - 0.6 * X[:, 2] + 0.5 * X[:, 3] * X[:, 0]


def _labels(kind: str, s: np.ndarray, rng) -> np.ndarray:
    n = s.shape[0]
    if kind == "binary":
        return (rng.random(n) < 1 / (1 + np.exp(-s))).astype(float)
    if kind == "multiclass":
        return np.digitize(s + rng.normal(size=n), [-0.7, 0.7]).astype(float)
    if kind in ("poisson", "tweedie"):
        return rng.poisson(np.exp(0.4 * s)).astype(float)
    if kind == "gamma":
        return rng.gamma(2.0, np.exp(0.3 * s) / 2.0)
    return s + rng.normal(size=n)


def _data(kind: str, n: int, seed: int, p: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Four relevant features and ``p - 4`` independent N(0, 1) noise features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, _labels(kind, _signal(X), rng)


XGB_OBJECTIVE = {
    "regression": "reg:squarederror",
    "binary": "binary:logistic",
    "multiclass": "multi:softprob",
    "poisson": "count:poisson",
    "tweedie": "reg:tweedie",
    "gamma": "reg:gamma",
}
LGB_OBJECTIVE = {"binary": "binary", "multiclass": "multiclass", "poisson": "poisson"}


@functools.cache
def _model(booster: str, kind: str, rounds: int = 20, leaves: int = 8):
    X, y = _data(kind, 1500, seed=zlib.crc32(f"{booster}-{kind}".encode()) % 1000)
    if booster == "xgb":
        params = {"objective": XGB_OBJECTIVE[kind], "max_leaves": leaves, "max_depth": 0,
                  "grow_policy": "lossguide", "eta": 0.1, "lambda": 1.0, "nthread": 1,
                  "seed": 0}  # fmt: skip
        if kind == "multiclass":
            params["num_class"] = 3
        return xgb.train(params, xgb.DMatrix(X, y), rounds)
    params = {"objective": LGB_OBJECTIVE[kind], "num_leaves": leaves, "learning_rate": 0.1,
              "lambda_l2": 0.0, "verbose": -1, "num_threads": 1, "seed": 0}  # fmt: skip
    if kind == "multiclass":
        params["num_class"] = 3
    return lgb.train(params, lgb.Dataset(X, y), rounds)


def _reference(ens, X, y, w):
    """Score (n_features, K) and per-row terms with the small-node factor (n, n_features, K)."""
    leaves = leaf_nodes(ens, X)
    parent = parents(ens.left, ens.right)
    n, K = X.shape[0], ens.n_outputs
    r = -initial_gradients(ens, y, n) / np.mean(ens.learning_rate)
    score = np.zeros((ens.n_features, K))
    terms = np.zeros((n, ens.n_features, K))
    pos = w > 0
    for t in range(ens.n_trees):
        c = ens.tree_group[t]
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        member = np.zeros((n, hi - lo), dtype=bool)  # row i reaches node lo + j
        for i in range(n):
            node = leaves[i, t]
            while node >= 0:
                member[i, node - lo] = True
                node = parent[node]
        W = (w[:, None] * member).sum(0)
        cnt = (pos[:, None] & member).sum(0)
        leafval = ens.value[leaves[:, t]]
        pbar = np.where(W > 0, (w * leafval) @ member / np.where(W > 0, W, 1), 0)
        rbar = np.where(W > 0, (w * r[:, c]) @ member / np.where(W > 0, W, 1), 0)
        pbar = np.where(ens.left[lo:hi] < 0, ens.value[lo:hi], pbar)
        for i in range(n):
            node = leaves[i, t]
            while parent[node] >= 0:
                q = parent[node]
                d = (pbar[node - lo] - pbar[q - lo]) * (r[i, c] - rbar[q - lo])
                f = ens.feature[q]
                score[f, c] += w[i] * d
                ct = cnt[q - lo] / (cnt[q - lo] - 1) if cnt[q - lo] > 1 else 1.0
                terms[i, f, c] += ct * d
                node = q
    return score, terms


@pytest.mark.parametrize(
    "booster,kind",
    [
        ("xgb", "regression"),
        ("xgb", "binary"),
        ("xgb", "multiclass"),
        ("lgb", "binary"),
        ("lgb", "multiclass"),
        ("xgb", "poisson"),
    ],  # fmt: skip
)
def test_centred_scores_and_moments_match_the_definition(booster, kind):
    ens = quiet_ensemble(_model(booster, kind))
    X, y = _data(kind, 400, seed=7)
    X[::17, 2] = np.nan  # the default directions
    w = np.random.default_rng(3).uniform(0.0, 2.0, size=400)
    w[::11] = 0.0  # rows that count for nothing, in the node counts too
    score, terms = _reference(ens, X, y, w)
    mom = centred_initial_moments(ens, X, y, False, w)
    np.testing.assert_allclose(mom.s1, score, rtol=1e-9, atol=1e-9 * np.abs(score).max())
    ref = moments_from_rows(terms, w)
    np.testing.assert_allclose(mom.s2, ref.s2, rtol=1e-9, atol=1e-12 * np.abs(ref.s2).max())
    np.testing.assert_allclose(mom.s2_total, ref.s2_total, rtol=1e-9, atol=1e-12)
    assert mom.n == 400 and mom.sw == pytest.approx(w.sum())
    # the public function and the registry say the same, per output and in total
    got = treeinner.forest_inner(ens, X, y, gradient="initial", sample_weight=w)
    matrix = got.to_numpy()[:, None] if isinstance(got, pd.Series) else got.iloc[:, :-1].to_numpy()
    np.testing.assert_allclose(matrix, score, rtol=1e-9, atol=1e-9 * np.abs(score).max())
    saabas = treeinner.forest_inner(ens, X, y, gradient="initial", attribution="saabas",
                                    sample_weight=w)  # fmt: skip
    np.testing.assert_allclose(np.asarray(saabas), np.asarray(got))  # no hessians, no lambda
    table = treeinner.significance(ens, X, y, methods="forest_inner_initial", sample_weight=w)
    top = table if ens.n_outputs == 1 else table[table.output == "total"]
    np.testing.assert_allclose(top.score, score.sum(axis=1), rtol=1e-9, atol=1e-9)
    est = mom.estimate(False)
    var = est.var_total if ens.n_outputs > 1 else est.var[:, 0]
    np.testing.assert_allclose(top.se, np.sqrt(var))


def test_centred_splits_sum_to_zero_over_their_nodes():
    """Every centred split's attribution sums to zero over its node's evaluation rows: the
    score is unchanged when r is shifted by a constant (here: the labels' mean moved)."""
    ens = quiet_ensemble(_model("xgb", "regression"))
    X, y = _data("regression", 500, seed=11)
    a = treeinner.forest_inner(ens, X, y, gradient="initial").to_numpy()
    b = treeinner.forest_inner(ens, X, y + 3.0, gradient="initial").to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(a).max())
    unc = treeinner.forest_inner(ens, X, y + 3.0, gradient="initial", centred=False)
    assert not np.allclose(unc.to_numpy(), b, rtol=1e-3)


def test_centred_treeshap_splits_by_the_evaluation_weights():
    """TreeSHAP of the model reweighted by the evaluation rows: its expected value is the
    rows' weighted mean margin, so every tree's values sum to zero over the rows (with their
    weights); the score is the TreeSHAP values times ``r - rbar``."""
    ens = quiet_ensemble(_model("lgb", "binary"))
    X, y = _data("binary", 600, seed=5)
    w = np.random.default_rng(1).uniform(0.5, 1.5, size=600)
    ens_w, rbar = _shap_setup(ens, centring(ens, X, y, w))
    phi = treeinner.tree_shap(ens_w, X)
    np.testing.assert_allclose(w @ phi.values.sum(axis=1), 0.0, atol=1e-8 * w.sum())
    r = -initial_gradients(ens, y, 600)[:, 0] / np.mean(ens.learning_rate)
    np.testing.assert_allclose(rbar, [np.average(r, weights=w)])
    ref = (w * (r - rbar[0])) @ phi.values
    got = treeinner.forest_inner(ens, X, y, gradient="initial", attribution="shap", sample_weight=w)
    np.testing.assert_allclose(got.to_numpy(), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("method", ["forest_inner_initial", "forest_inner_initial_shap"])
def test_a_feature_no_evaluation_row_splits_on_scores_exactly_zero(method):
    """A feature whose every split sends all evaluation rows one way (here: feature 0 held at
    a constant below every threshold; CatBoost's CTR splits often do this on new rows) has
    score and standard error exactly 0 and p-value 1, not rounding noise whose ratio to its
    equally tiny standard error could be any z (it was -10 to +7 on CatBoost models)."""
    ens = quiet_ensemble(_model("xgb", "binary"))
    X, y = _data("binary", 4000, seed=21)
    X[:, 0] = -50.0
    w = np.random.default_rng(3).uniform(0.5, 1.5, size=4000)
    table = treeinner.significance(ens, X, y, methods=method, sample_weight=w)
    row = table.iloc[0]
    assert row["score"] == 0.0 and row["se"] == 0.0 and row["p_value"] == 1.0
    assert np.isnan(row["q_value"]) or row["q_value"] == 1.0
    # the other features still score: the relevant ones far from zero
    assert (table["score"].iloc[1:3].abs() > 3 * table["se"].iloc[1:3]).all()


def test_centred_refuses_reference_and_keeps_interventional():
    ens = quiet_ensemble(_model("xgb", "binary"))
    X, y = _data("binary", 300, seed=2)
    with pytest.raises(ValueError, match="centred=False"):
        treeinner.forest_inner(ens, X, y, gradient="initial", reference=(X, y))
    unc = treeinner.forest_inner(ens, X, y, gradient="initial", centred=False, reference=(X, y))
    assert np.isfinite(unc.to_numpy()).all()
    with pytest.raises(ValueError, match="centred must be True or False"):
        treeinner.forest_inner(ens, X, y, gradient="initial", centred="yes")
    # interventional TreeSHAP is centred on its background already: centred changes nothing
    a = treeinner.forest_inner(ens, X, y, gradient="initial", attribution="interventional",
                               background=X[:50])  # fmt: skip
    b = treeinner.forest_inner(ens, X, y, gradient="initial", attribution="interventional",
                               background=X[:50], centred=False)  # fmt: skip
    pd.testing.assert_series_equal(a, b)


def test_centred_on_dask_input_equals_in_memory():
    dd = pytest.importorskip("dask.dataframe")
    ens = quiet_ensemble(_model("xgb", "multiclass"))
    X, y = _data("multiclass", 900, seed=4)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=900)
    frame = pd.DataFrame(X, columns=ens.feature_names).assign(label=y, weight=w)
    ddf = dd.from_pandas(frame, npartitions=3)
    Xd = ddf[list(ens.feature_names)]
    for method in ("forest_inner_initial", "forest_inner_initial_shap"):
        mem = treeinner.significance(ens, X, y, methods=method, sample_weight=w)
        lazy = treeinner.significance(ens, Xd, ddf["label"], methods=method,
                                      sample_weight=ddf["weight"])  # fmt: skip
        np.testing.assert_allclose(lazy.score, mem.score, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(lazy.se, mem.se, rtol=1e-9, atol=1e-9)


def test_centred_cross_fitted_pools_the_folds():
    """With cv, each fold's rows are centred by the fold's own model: the pooled score is the
    sum of the folds' scores and their variances add."""
    from sklearn.model_selection import KFold

    X, y = _data("binary", 900, seed=8)
    est = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1, random_state=0)
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    pooled = treeinner.significance(est, X, y, methods="forest_inner_initial", cv=folds)
    score = np.zeros(X.shape[1])
    var = np.zeros(X.shape[1])
    for train, test in folds:
        m = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1, random_state=0)
        part = treeinner.significance(m.fit(X[train], y[train]), X[test], y[test],
                                      methods="forest_inner_initial")  # fmt: skip
        score += part.score.to_numpy()
        var += part.se.to_numpy() ** 2
    np.testing.assert_allclose(pooled.score, score, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pooled.se, np.sqrt(var), rtol=1e-9)


# ------------------------------------------------------------------------------ the null
def _overfit(booster: str, kind: str, seed: int):
    """100 rounds of 31 leaves on 2,000 rows (XGBoost lossguide lambda 1, LightGBM lambda 0):
    the overfit binary models of issue 35."""
    X, y = _data(kind, 2000, seed)
    if booster == "xgb":
        params = {"objective": XGB_OBJECTIVE[kind], "max_leaves": 31, "max_depth": 0,
                  "grow_policy": "lossguide", "eta": 0.1, "lambda": 1.0, "nthread": 1,
                  "seed": 0}  # fmt: skip
        if kind == "multiclass":
            params["num_class"] = 3
        return xgb.train(params, xgb.DMatrix(X, y), 100)
    params = {"objective": LGB_OBJECTIVE[kind], "num_leaves": 31, "learning_rate": 0.1,
              "lambda_l2": 0.0, "verbose": -1, "num_threads": 1, "seed": 0}  # fmt: skip
    if kind == "multiclass":
        params["num_class"] = 3
    return lgb.train(params, lgb.Dataset(X, y), 100)


def _fresh_z(model, kind: str, method: str, n: int = 20_000, seed: int = 99) -> np.ndarray:
    X, y = _data(kind, n, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = treeinner.significance(model, X, y, methods=method)
    if "output" in t:
        t = t[t.output == "total"]
    return (t.score / t.se).to_numpy()


@pytest.mark.parametrize("booster", ["xgb", "lgb"])
@pytest.mark.parametrize("method", ["forest_inner_initial", "forest_inner_initial_shap"])
def test_noise_features_score_zero_on_fresh_rows(booster, method):
    """Issue 35's check: on an overfit binary model, four independent noise features scored
    on 20,000 fresh rows have mean |z| < 1.5 under the recommended method (uncentred they sit
    at z ~ +2.5 to +3 here), and the four relevant ones z > 5."""
    model = _overfit(booster, "binary", seed=1)
    z = _fresh_z(model, "binary", method)
    assert np.all(z[:4] > 5), z
    assert np.mean(np.abs(z[4:])) < 1.5, z
    if method == "forest_inner_initial":  # the uncentred form fails the same check
        X, y = _data("binary", 20_000, 99)
        t = treeinner.forest_inner(model, X, y, gradient="initial", centred=False)
        assert np.all(t.to_numpy()[4:] > 0), t


@pytest.mark.parametrize(
    "booster,kind",
    [
        ("xgb", "multiclass"),
        ("lgb", "multiclass"),
        ("xgb", "poisson"),
        ("lgb", "poisson"),
        ("xgb", "tweedie"),
        ("xgb", "gamma"),
    ],  # fmt: skip
)
def test_noise_features_score_zero_for_every_loss(booster, kind):
    """Every other loss with a non-constant hessian: softmax (the total over classes), Poisson,
    Tweedie, gamma."""
    z = _fresh_z(_overfit(booster, kind, seed=2), kind, "forest_inner_initial")
    assert np.all(z[:2] > 5), z
    assert np.mean(np.abs(z[4:])) < 1.5, z


def test_significance_warns_when_splits_share_their_credit():
    """CatBoost's CTR feature combinations credit each of their features equally under every
    method but the recommended one (which credits them by Shapley values,
    ``tests/test_shapley_credit.py``), so a feature the target does not depend on can pass a
    test through its partner: ``significance`` says so for those methods, naming them; for
    the recommended method, and without combinations, it is silent."""
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(0)
    n = 1500
    X = pd.DataFrame(
        {
            "plan": rng.choice(["a", "b", "c"], n),
            "region": rng.choice(["n", "s", "e", "w"], n),
            "noise": rng.choice([f"l{j}" for j in range(12)], n),
        }
    )
    s = X["plan"].map({"a": -1.0, "b": 0.0, "c": 1.0}) + X["region"].map({"n": 0.8}).fillna(0.0)
    y = (rng.random(n) < 1 / (1 + np.exp(-s.to_numpy()))).astype(float)
    kw = dict(iterations=200, depth=6, verbose=False, thread_count=1, cat_features=[0, 1, 2])
    combined = cb.CatBoostClassifier(**kw).fit(X[:1000], y[:1000])
    groups = treeinner.from_model(combined).shared_credit()
    assert groups and all(len(g) > 1 for g in groups)

    def shared_warnings(model, **kw):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            treeinner.significance(model, X[1000:], y[1000:], **kw)
        return [str(w.message) for w in seen if "feature combination" in str(w.message)]

    (message,) = shared_warnings(combined, methods=["forest_inner_initial", "tree_inner_shap"])
    assert "['tree_inner_shap']" in message and "Shapley" in message
    assert shared_warnings(combined) == []  # the recommended method credits by Shapley values
    single = cb.CatBoostClassifier(**kw, max_ctr_complexity=1).fit(X[:1000], y[:1000])
    assert treeinner.from_model(single).shared_credit() == []
    assert shared_warnings(single, methods="tree_inner_shap") == []
    # a model without an input map has no shared splits
    assert quiet_ensemble(_model("xgb", "binary")).shared_credit() == []
