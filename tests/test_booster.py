"""treeinner.booster: exact node statistics, agreement with XGBoost, UnbiasedGBM, the API."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner.booster import GBMClassifier, GBMRegressor

LAM = 1.3
LR = 0.3


def _data(n=600, p=5, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3] + 0.2 * rng.standard_normal(n)
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _int_data(n=500, p=5, seed=0, levels=25):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, p)).astype(float)
    y = np.sin(X[:, 0] / 4) + (X[:, 1] > 12) * X[:, 2] / 10 + 0.3 * rng.standard_normal(n)
    return X, y


def _grad_hess(objective, y, F):
    """Gradients and hessians with XGBoost's conventions, one column per output."""
    if objective == "reg:squarederror":
        return (F - y[:, None]), np.ones_like(F)
    if objective == "binary:logistic":
        p = 1.0 / (1.0 + np.exp(-F))
        return p - y[:, None], np.maximum(p * (1 - p), 1e-16)
    e = np.exp(F - F.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    onehot = np.arange(F.shape[1])[None, :] == y[:, None]
    return p - onehot, np.maximum(2 * p * (1 - p), 1e-16)


def _recompute(ens, X, y, w=None):
    """G, H and row count of every node from the training rows: each tree's rows routed with
    leaf_index, gradients at the margins before its round, inner nodes summed over children."""
    n = X.shape[0]
    w = np.ones(n) if w is None else w
    leaves = ens.leaf_index(X)
    F = np.tile(ens.base_margin, (n, 1))
    G, H, C = (np.zeros(ens.n_nodes) for _ in range(3))
    for it in range(ens.n_iterations):
        trees = np.flatnonzero(ens.tree_iteration == it)
        g, h = _grad_hess(ens.objective, y, F)
        delta = np.zeros_like(F)
        for t in trees:
            c = ens.tree_group[t]
            node = ens.tree_offsets[t] + leaves[:, t]
            np.add.at(G, node, w * g[:, c])
            np.add.at(H, node, w * h[:, c])
            np.add.at(C, node, 1.0)
            delta[:, c] += ens.value[node]
        F += delta
    for t in range(ens.n_trees):  # children come after their parent
        for k in range(ens.tree_offsets[t + 1] - 1, ens.tree_offsets[t] - 1, -1):
            if ens.left[k] >= 0:
                for A in (G, H, C):
                    A[k] = A[ens.left[k]] + A[ens.right[k]]
    return G, H, C


def _check_statistics(est, X, y, w=None):
    ens = est.ensemble_
    G, H, C = _recompute(ens, X, y, w)
    leaf = ens.left < 0
    lr = ens.learning_rate[ens._node_tree]
    # the leaf values are -lr G / (H + lambda) of the stored statistics ...
    G_stored = -ens.value * (ens.cover + ens.reg_lambda) / lr
    np.testing.assert_allclose(
        ens.value[leaf], (-lr * G_stored / (ens.cover + ens.reg_lambda))[leaf], rtol=1e-14
    )
    # ... and the stored statistics are those of the training rows
    np.testing.assert_array_equal(ens.count, C)
    np.testing.assert_allclose(ens.cover, H, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        ens.value[leaf], (-lr * G / (H + ens.reg_lambda))[leaf], rtol=1e-9, atol=1e-12
    )
    # stored gains are the regularised gains of the stored statistics
    inner = np.flatnonzero(~leaf)
    L, R = ens.left[inner], ens.right[inner]
    lam = ens.reg_lambda
    gain = G[L] ** 2 / (H[L] + lam) + G[R] ** 2 / (H[R] + lam) - G[inner] ** 2 / (H[inner] + lam)
    np.testing.assert_allclose(ens.gain[inner], gain, rtol=1e-8, atol=1e-9)
    assert np.all(ens.value[~leaf] == 0) and np.all(ens.gain[leaf] == 0)


# ---------------------------------------------------------------------- exact statistics
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"num_leaves": 7, "max_depth": None, "min_samples_leaf": 5},
        {"subsample": 0.6, "colsample_bytree": 0.6},
        {"split": "unbiased", "num_leaves": 8},
        {"split": "unbiased", "unbiased_ratio": "1:1+1", "subsample": 0.8},
    ],
)
def test_regression_statistics_are_exact(params):
    X, y = _data()
    w = np.random.default_rng(5).uniform(0.2, 2.0, X.shape[0])
    kw = {"n_estimators": 8, "max_depth": 4, "learning_rate": LR, "reg_lambda": LAM}
    est = GBMRegressor(**{**kw, **params}, random_state=0).fit(X, y, sample_weight=w)
    ens = est.ensemble_
    assert ens.source == "treeinner" and ens.objective == "reg:squarederror"
    assert ens.decision_rule == "float64 <=" and ens.reg_lambda == LAM
    assert np.all(ens.learning_rate == LR) and ens.n_trees == 8
    np.testing.assert_allclose(ens.base_margin, [np.average(y, weights=w)])
    assert (ens.left >= 0).sum() > 8  # the trees did grow
    _check_statistics(est, X, y, w)
    if params.get("split") != "unbiased":
        gain = treeinner.total_gain(est).to_numpy()
        np.testing.assert_allclose(est.feature_importances_, gain, rtol=1e-12)


def test_classifier_statistics_are_exact():
    X, y = _data(seed=1)
    yb = (y > 0.3).astype(int)
    est = GBMClassifier(n_estimators=6, max_depth=3, learning_rate=LR, reg_lambda=LAM).fit(X, yb)
    ens = est.ensemble_
    assert ens.objective == "binary:logistic" and ens.n_outputs == 1
    np.testing.assert_allclose(ens.base_margin, [np.log(yb.mean() / (1 - yb.mean()))])
    _check_statistics(est, X, yb.astype(float))

    y3 = np.digitize(y, [-0.5, 0.8])
    labels = np.array(["low", "mid", "top"])[y3]
    est3 = GBMClassifier(n_estimators=4, max_depth=3, learning_rate=LR, reg_lambda=LAM)
    est3.fit(X, labels)
    ens3 = est3.ensemble_
    assert ens3.objective == "multi:softprob" and ens3.n_outputs == 3 and ens3.n_trees == 12
    np.testing.assert_array_equal(ens3.tree_group, np.tile([0, 1, 2], 4))
    np.testing.assert_array_equal(ens3.tree_iteration, np.repeat(np.arange(4), 3))
    np.testing.assert_allclose(ens3.base_margin, np.log(np.bincount(y3) / y3.size))
    _check_statistics(est3, X, y3.astype(float))
    proba = est3.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(est3.predict(X), est3.classes_[proba.argmax(axis=1)])
    assert list(est3.classes_) == ["low", "mid", "top"]
    assert (est3.predict(X) == labels).mean() > 0.7


@pytest.mark.parametrize("split", ["gain", "unbiased"])
@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_tree_inner_equals_total_gain(split, kind):
    """Prop. 3 of paper 003 holds exactly: TreeInner with PreDecomp on the training data is the
    summed gain of the stored statistics (the booster's own importance with split="gain")."""
    X, y = _data(seed=2)
    kw = {"n_estimators": 6, "max_depth": 4, "learning_rate": LR, "reg_lambda": LAM}
    if kind == "regression":
        est = GBMRegressor(**kw, split=split, random_state=0)
    else:
        y = (y > 0.3).astype(int) if kind == "binary" else np.digitize(y, [-0.5, 0.8])
        est = GBMClassifier(**kw, split=split, random_state=0)
    est.fit(X, y)
    ti = treeinner.tree_inner(est, X, y, attribution="predecomp")
    tg = treeinner.total_gain(est)
    if kind == "multiclass":
        ti, tg = ti["total"], tg["total"]
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-9, atol=1e-9)
    if split == "gain":
        np.testing.assert_allclose(ti.to_numpy(), est.feature_importances_, rtol=1e-9)
    assert tg.abs().max() > 1.0


# ---------------------------------------------------------------------- agreement with XGBoost
def _partition(ens, X, t):
    """Every leaf of tree t as (path of features and sides, training rows)."""
    out = []

    def walk(node, rows, path):
        if ens.left[node] < 0:
            out.append((path, tuple(rows.tolist())))
            return
        f = ens.feature[node]
        x = X[rows, f]
        if ens.decision_rule == "float32 <":
            go = x.astype(np.float32) < np.float32(ens.threshold[node])
        else:
            go = x <= ens.threshold[node]
        go = np.where(np.isnan(x), ens.default_left[node] == 1, go)
        walk(ens.left[node], rows[go], path + f" {f}L")
        walk(ens.right[node], rows[~go], path + f" {f}R")

    walk(ens.tree_offsets[t], np.arange(X.shape[0]), "")
    return sorted(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["regression", "binary"])
@pytest.mark.parametrize("growth", ["depthwise", "lossguide"])
@pytest.mark.parametrize("missing", [False, True])
def test_first_tree_matches_xgboost_hist(seed, kind, growth, missing):
    """Integer features with fewer distinct values than bins (both libraries bin one value per
    bin), the same lambda, min_child_weight and depth (or leaf budget, best-first against
    XGBoost's lossguide): the first tree splits the training rows the same way on the same
    features, with the same gains, and sends missing values the same way."""
    xgb = pytest.importorskip("xgboost")
    X, y = _int_data(seed=seed)
    if missing:
        X[np.random.default_rng(seed + 10).random(X.shape) < 0.1] = np.nan
    common = {"n_estimators": 1, "learning_rate": LR, "reg_lambda": LAM, "min_child_weight": 2.0}
    if growth == "depthwise":
        ours_kw, their_kw = {"max_depth": 4}, {"max_depth": 4}
    else:
        ours_kw = {"max_depth": None, "num_leaves": 10}
        their_kw = {"max_depth": 0, "max_leaves": 10, "grow_policy": "lossguide"}
    if kind == "binary":
        y = (y > np.median(y)).astype(int)
        ours = GBMClassifier(**common, **ours_kw).fit(X, y)
        base = 1.0 / (1.0 + np.exp(-ours.ensemble_.base_margin[0]))
        theirs = xgb.XGBClassifier(
            **common, **their_kw, tree_method="hist", base_score=base, n_jobs=1
        )
    else:
        ours = GBMRegressor(**common, **ours_kw).fit(X, y)
        theirs = xgb.XGBRegressor(
            **common, **their_kw, tree_method="hist", base_score=y.mean(), n_jobs=1
        )
    theirs.fit(X, y)
    a = ours.ensemble_
    b = treeinner.from_model(theirs)
    assert (a.left >= 0).sum() >= 7
    assert _partition(a, X, 0) == _partition(b, X, 0)  # the path names features and sides
    ga, gb = np.sort(a.gain[a.left >= 0]), np.sort(b.gain[b.left >= 0])
    np.testing.assert_allclose(ga, gb, rtol=1e-4, atol=1e-5 * gb.max())  # XGBoost: float32


# ---------------------------------------------------------------------- splits and missing values
def test_thresholds_are_training_values():
    X, y = _data(n=800, nan=0.05)
    est = GBMRegressor(n_estimators=5, max_depth=5, max_bins=16).fit(X, y)
    ens = est.ensemble_
    inner = np.flatnonzero(ens.left >= 0)
    for k in inner:
        assert ens.threshold[k] in set(X[:, ens.feature[k]][~np.isnan(X[:, ens.feature[k]])])
    # the kernels' partition (by bins) and the ensemble's rule (x <= threshold) agree: the
    # recomputed statistics are exact, and predictions on the training rows use the same leaves
    _check_statistics(est, X, y)


def test_wide_bins_and_input_types():
    """More than 256 bins (uint16 bins); float32, sparse (absent entries are missing) and
    list inputs give the same model as the float64 array they equal."""
    sp = pytest.importorskip("scipy.sparse")
    X, y = _data(n=700, nan=0.0)
    est = GBMRegressor(n_estimators=3, max_depth=4, max_bins=600).fit(X, y)
    ens = est.ensemble_
    inner = np.flatnonzero(ens.left >= 0)
    assert all(ens.threshold[k] in set(X[:, ens.feature[k]]) for k in inner)
    _check_statistics(est, X, y)
    Xs = np.where(np.abs(X) < 0.5, 0.0, X).astype(np.float32)
    ref = GBMRegressor(n_estimators=3).fit(np.where(Xs == 0, np.nan, Xs).astype(np.float64), y)
    for inp in (sp.csr_matrix(Xs), Xs):
        got = GBMRegressor(n_estimators=3).fit(inp, y)
        if sp.issparse(inp):
            assert _same(got.ensemble_, ref.ensemble_)
        else:  # float32 zeros are values, not missing
            np.testing.assert_array_equal(
                got.predict(Xs), GBMRegressor(n_estimators=3).fit(Xs.tolist(), y).predict(Xs)
            )


def test_missing_values_learn_their_direction():
    rng = np.random.default_rng(3)
    n = 1000
    X = rng.standard_normal((n, 2))
    y = np.where(X[:, 0] > 0.2, 3.0, 0.0) + np.where(X[:, 1] > -0.3, 0.0, 1.0)
    y += 0.05 * rng.standard_normal(n)
    miss0 = rng.random(n) < 0.2  # feature 0 missing where the target is high
    miss1 = rng.random(n) < 0.2  # feature 1 missing where the target is low
    y[miss0] = 3.0 + np.where(X[miss0, 1] > -0.3, 0.0, 1.0)
    y[miss1] = np.where(miss0[miss1] | (X[miss1, 0] > 0.2), 3.0, 0.0) + 1.0
    X[miss0, 0] = np.nan
    X[miss1, 1] = np.nan
    est = GBMRegressor(n_estimators=1, max_depth=2, learning_rate=1.0, reg_lambda=0.0).fit(X, y)
    ens = est.ensemble_
    root = 0
    assert ens.feature[root] == 0 and ens.default_left[root] == 0  # NaN goes with x0 > t
    kids = [ens.left[root], ens.right[root]]
    assert all(ens.feature[k] == 1 for k in kids)
    assert all(ens.default_left[k] == 1 for k in kids)  # NaN goes with x1 <= t
    _check_statistics(est, X, y)
    # without missing training values, NaN follows the child with the larger hessian sum
    Xc = rng.standard_normal((500, 3))
    yc = Xc[:, 0] + (Xc[:, 1] > 1.0)
    ens2 = GBMRegressor(n_estimators=2, max_depth=3).fit(Xc, yc).ensemble_
    inner = np.flatnonzero(ens2.left >= 0)
    larger_left = ens2.cover[ens2.left[inner]] >= ens2.cover[ens2.right[inner]]
    np.testing.assert_array_equal(ens2.default_left[inner] == 1, larger_left)
    Xn = Xc[:20].copy()
    Xn[:, :] = np.nan
    assert np.all(np.isfinite(GBMRegressor(n_estimators=2).fit(Xc, yc).predict(Xn)))


def test_growth_limits():
    X, y = _data(n=1000, nan=0.0)
    est = GBMRegressor(n_estimators=3, max_depth=None, num_leaves=6).fit(X, y)
    ens = est.ensemble_
    for t in range(ens.n_trees):
        sl = slice(ens.tree_offsets[t], ens.tree_offsets[t + 1])
        assert (ens.left[sl] < 0).sum() == 6
    est = GBMRegressor(n_estimators=2, max_depth=2, num_leaves=30).fit(X, y)
    assert est.ensemble_.max_depth == 2
    est = GBMRegressor(n_estimators=2, max_depth=3).fit(X, y)
    assert est.ensemble_.max_depth == 3 and est.ensemble_.n_nodes == 2 * 15
    # a large min_split_gain leaves single-leaf trees (the base margin only)
    est = GBMRegressor(n_estimators=2, min_split_gain=1e9).fit(X, y)
    assert est.ensemble_.n_nodes == 2
    np.testing.assert_allclose(est.predict(X[:5]), y.mean() + 2 * -0.1 * 0.0, atol=1e-12)
    # best-first with num_leaves=2 takes the depth-wise tree's root split
    a = GBMRegressor(n_estimators=1, num_leaves=2).fit(X, y).ensemble_
    b = GBMRegressor(n_estimators=1, max_depth=1).fit(X, y).ensemble_
    assert a.feature[0] == b.feature[0] and a.threshold[0] == b.threshold[0]


# ---------------------------------------------------------------------- UnbiasedGBM
def _noise_data(seed=0, n=2000):
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.integers(0, 4, n), rng.standard_normal(n), rng.integers(0, 2, n)]
    ).astype(float)  # feature 1: pure noise with as many values as rows
    y = X[:, 0] + 0.5 * X[:, 2] + rng.standard_normal(n)
    return X, y


def test_unbiased_splits_fewer_noise_features():
    X, y = _noise_data()
    kw = {"n_estimators": 20, "max_depth": 3, "random_state": 1}
    counts, imp = {}, {}
    for split in ("gain", "unbiased"):
        est = GBMRegressor(**kw, split=split).fit(X, y)
        ens = est.ensemble_
        counts[split] = np.bincount(ens.feature[ens.left >= 0], minlength=3)
        imp[split] = est.feature_importances_
    assert counts["unbiased"][1] < 0.5 * counts["gain"][1]
    assert imp["gain"][1] > 0.003 * imp["gain"][0]  # gain credits the noise feature ...
    assert imp["unbiased"][1] < 0.1 * imp["gain"][1]  # ... unbiased gain about 0 or less
    assert abs(imp["unbiased"][1]) < 0.005 * imp["unbiased"][0]
    assert imp["unbiased"][0] > imp["unbiased"][2] > 0


def test_unbiased_gain_of_noise_is_zero_in_expectation():
    """Theorem 2 of paper 000 for the booster's own split finding: in the first tree (where
    the gradients do not yet depend on earlier trees' in-sample leaf values) a feature
    independent of the target has unbiased importance 0 in expectation, at every depth
    (the D/D1'/D2' division is drawn once per tree); with split="gain" it is clearly positive.
    Over 80 independent data sets and divisions, the mean is within 4 standard errors of 0."""
    ub, gain = [], []
    for s in range(80):
        rng = np.random.default_rng(1000 + s)
        n = 400
        X = np.column_stack(
            [rng.integers(0, 4, n), rng.standard_normal(n), rng.integers(0, 2, n), rng.random(n)]
        )
        y = X[:, 0] + 0.5 * X[:, 2] + rng.standard_normal(n)
        kw = {"n_estimators": 1, "max_depth": 3, "random_state": s, "n_jobs": 1}
        ub.append(GBMRegressor(**kw, split="unbiased").fit(X, y).feature_importances_[[1, 3]])
        gain.append(GBMRegressor(**kw).fit(X, y).feature_importances_[[1, 3]])
    ub, gain = np.array(ub), np.array(gain)
    se = ub.std(axis=0, ddof=1) / np.sqrt(len(ub))
    assert np.all(np.abs(ub.mean(axis=0)) < 4 * se), (ub.mean(axis=0), se)
    gain_se = gain.std(axis=0, ddof=1) / np.sqrt(len(gain))
    assert np.all(gain.mean(axis=0) > 6 * gain_se)  # split gain: biased upwards
    assert np.all(ub.std(axis=0) > 0)  # the noise features were evaluated, not ignored


def test_unbiased_importance_counts_untaken_splits():
    """feature_importances_ sums score_3 over every evaluated node, split or not; a split
    is taken only above min_split_gain."""
    X, y = _noise_data(seed=4, n=900)
    for ratio in ("1:1:1", "1:1+1"):
        est = GBMRegressor(
            n_estimators=4,
            num_leaves=6,
            max_depth=None,
            split="unbiased",
            unbiased_ratio=ratio,
            min_split_gain=-0.5,
            random_state=3,
        ).fit(X, y)
        ens = est.ensemble_
        assert np.all(np.isfinite(est.feature_importances_))
        assert (ens.left >= 0).sum() >= 4
    est_hi = GBMRegressor(n_estimators=3, max_depth=3, split="unbiased", min_split_gain=1e9)
    est_hi.fit(X, y)
    assert est_hi.ensemble_.n_nodes == 3  # nothing split ...
    assert np.any(est_hi.feature_importances_ != 0)  # ... but the roots' scores count


# ---------------------------------------------------------------------- determinism
def _same(a, b):
    return (
        all(
            np.array_equal(getattr(a, k), getattr(b, k), equal_nan=True)
            for k in ("left", "feature", "threshold", "default_left", "value", "cover", "gain")
        )
        and a.n_nodes == b.n_nodes
    )


@pytest.mark.parametrize(
    "params",
    [
        {"subsample": 0.7, "colsample_bytree": 0.6},
        {"split": "unbiased", "num_leaves": 8, "subsample": 0.9},
    ],
)
def test_deterministic_per_random_state(params):
    X, y = _data(n=500)
    kw = {"n_estimators": 5, "max_depth": 4, **params}
    a = GBMRegressor(**kw, random_state=7, n_jobs=1).fit(X, y)
    b = GBMRegressor(**kw, random_state=7, n_jobs=2).fit(X, y)
    c = GBMRegressor(**kw, random_state=8).fit(X, y)
    assert _same(a.ensemble_, b.ensemble_)
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    assert not _same(a.ensemble_, c.ensemble_)


# ---------------------------------------------------------------------- early stopping
def test_early_stopping_keeps_the_best_round():
    X, y = _data(n=900, seed=6)
    Xt, yt, Xv, yv = X[:600], y[:600], X[600:], y[600:]
    est = GBMRegressor(
        n_estimators=300, learning_rate=0.5, max_depth=5, early_stopping_rounds=4
    ).fit(Xt, yt, eval_set=[(Xt, yt), (Xv, yv)])
    val = est.evals_result_["validation_1"]["loss"]
    train = est.evals_result_["validation_0"]["loss"]
    assert len(val) == len(train) < 300
    assert est.best_iteration_ == int(np.argmin(val)) and len(val) == est.best_iteration_ + 5
    assert est.ensemble_.n_iterations == est.best_iteration_ + 1
    assert train[-1] < train[0]
    # the recorded loss is the loss of the model's own predictions
    np.testing.assert_allclose(val[est.best_iteration_], 0.5 * np.mean((yv - est.predict(Xv)) ** 2))
    # without early stopping every round is kept
    est2 = GBMRegressor(n_estimators=7).fit(Xt, yt, eval_set=[(Xv, yv)])
    assert est2.ensemble_.n_iterations == 7 and len(est2.evals_result_["validation_0"]["loss"])
    clf = GBMClassifier(n_estimators=50, learning_rate=0.5, early_stopping_rounds=3)
    clf.fit(Xt, (yt > 0).astype(int), eval_set=[(Xv, (yv > 0).astype(int))])
    assert clf.ensemble_.n_iterations == clf.best_iteration_ + 1


# ---------------------------------------------------------------------- the API
def test_from_model_and_methods():
    X, y = _data(n=400)
    est = GBMRegressor(n_estimators=5, max_depth=3)
    with pytest.raises(ValueError, match="not fitted"):
        treeinner.from_model(est)
    with pytest.raises(ValueError, match="not fitted"):
        est.predict(X)
    est.fit(X, y)
    assert treeinner.from_model(est) is est.ensemble_
    margin = est.predict(X)
    pd_ = treeinner.predecomp(est, X)
    np.testing.assert_allclose(pd_.values.sum(axis=1) + pd_.bias[0], margin, rtol=1e-10)
    sh = treeinner.tree_shap(est, X[:50])
    np.testing.assert_allclose(sh.values.sum(axis=1) + sh.bias[0], margin[:50], rtol=1e-9)
    assert treeinner.total_gain(est).shape == (5,)


def test_gradient_methods_run():
    X, y = _data(n=600)
    est = GBMRegressor(n_estimators=5, max_depth=3).fit(X[:400], y[:400])
    ub = treeinner.unbiased_gain(est, X[400:], y[400:], random_state=0)
    assert ub.shape == (5,) and np.all(np.isfinite(ub))
    ti = treeinner.tree_inner(est, X[400:], y[400:])
    assert np.all(np.isfinite(ti))


def test_dataframes_and_feature_names():
    X, y = _data(n=300, nan=0.0)
    df = pd.DataFrame(X, columns=list("abcde"))
    est = GBMRegressor(n_estimators=3).fit(df, y)
    assert list(est.feature_names_in_) == list("abcde") and est.n_features_in_ == 5
    assert est.ensemble_.feature_names == tuple("abcde") and est.ensemble_.named
    np.testing.assert_array_equal(est.predict(df[list("edcba")]), est.predict(df))
    with pytest.raises(ValueError, match="Missing"):
        est.predict(df.drop(columns="a"))
    est_np = GBMRegressor(n_estimators=3).fit(X, y)
    assert not hasattr(est_np, "feature_names_in_")
    assert est_np.ensemble_.feature_names == ("f0", "f1", "f2", "f3", "f4")
    np.testing.assert_array_equal(est_np.predict(X), est.predict(X))


def test_sklearn_compatibility():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone, is_classifier, is_regressor
    from sklearn.model_selection import cross_val_score

    est = GBMRegressor(n_estimators=4, max_depth=2, split="unbiased", random_state=3)
    params = est.get_params()
    assert params["split"] == "unbiased" and params["n_estimators"] == 4
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    twin.set_params(max_depth=3)
    assert twin.max_depth == 3 and est.max_depth == 2
    assert is_regressor(est) and is_classifier(GBMClassifier())
    X, y = _data(n=300, nan=0.0)
    scores = cross_val_score(GBMRegressor(n_estimators=10), X, y, cv=2)
    assert np.all(scores > 0.3)
    clf = GBMClassifier(n_estimators=5).fit(X, y > 0)
    assert clf.score(X, y > 0) > 0.7 and list(clf.classes_) == [False, True]
    assert sklearn.__version__


@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_estimators": 0}, "n_estimators"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": np.nan}, "learning_rate"),
        ({"max_depth": 0}, "max_depth"),
        ({"max_depth": None}, "max_depth or num_leaves"),
        ({"num_leaves": 1}, "num_leaves"),
        ({"min_child_weight": -1.0}, "min_child_weight"),
        ({"min_samples_leaf": 0}, "min_samples_leaf"),
        ({"reg_lambda": -0.1}, "reg_lambda"),
        ({"min_split_gain": np.inf}, "min_split_gain"),
        ({"max_bins": 1}, "max_bins"),
        ({"max_bins": 70000}, "max_bins"),
        ({"subsample": 0.0}, "subsample"),
        ({"subsample": 1.5}, "subsample"),
        ({"colsample_bytree": 2.0}, "colsample_bytree"),
        ({"split": "best"}, "split"),
        ({"unbiased_ratio": "2:1:1"}, "unbiased_ratio"),
        ({"early_stopping_rounds": 0}, "early_stopping_rounds"),
        ({"random_state": -1}, "random_state"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"max_depth": 2.5}, "max_depth"),
    ],
)
def test_bad_parameters(params, match):
    X, y = _data(n=50)
    with pytest.raises(ValueError, match=match):
        GBMRegressor(**params).fit(X, y)


def test_bad_data():
    X, y = _data(n=60)
    reg = GBMRegressor(n_estimators=2)
    for bad in (np.nan, np.inf):
        yb = y.copy()
        yb[3] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            reg.fit(X, yb)
    with pytest.raises(ValueError, match="numeric"):
        reg.fit(X, np.array(["a"] * 60))
    with pytest.raises(ValueError, match="rows"):
        reg.fit(X, y[:-1])
    with pytest.raises(ValueError, match="no rows"):
        reg.fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="2-D"):
        reg.fit(X[:, 0], y)
    with pytest.raises(ValueError, match="non-negative"):
        reg.fit(X, y, sample_weight=-np.ones(60))
    with pytest.raises(ValueError, match="zero for every row"):
        reg.fit(X, y, sample_weight=np.zeros(60))
    with pytest.raises(ValueError, match="eval_set"):
        GBMRegressor(early_stopping_rounds=2).fit(X, y)
    with pytest.raises(ValueError, match="pairs"):
        reg.fit(X, y, eval_set=(X, y))
    with pytest.raises(ValueError, match="features"):
        reg.fit(X, y, eval_set=[(X[:, :3], y)])
    with pytest.raises(TypeError, match="Categorical"):
        GBMRegressor(n_estimators=2, categorical_features=None).fit(
            pd.DataFrame({"a": pd.Categorical(["x", "y"] * 30)}), y
        )
    reg.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        reg.predict(X[:, :4])
    clf = GBMClassifier(n_estimators=2)
    with pytest.raises(ValueError, match="at least 2"):
        clf.fit(X, np.zeros(60))
    with pytest.raises(ValueError, match="NaN or infinite"):
        clf.fit(X, np.where(y > 0, 1.0, np.nan))
    clf.fit(X, y > 0)
    with pytest.raises(ValueError, match="not seen in training"):
        clf.fit(X, y > 0, eval_set=[(X, np.where(y > 0, 2, 0))])
    with pytest.raises(ValueError, match="too few rows|Too few rows"):
        GBMRegressor(split="unbiased").fit(X[:2], y[:2])
