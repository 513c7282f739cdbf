"""treeinner.booster's feature-selecting boosting (Han et al. 2020): the GBFS penalty
``feature_penalty``, A-GBM's ``penalty_scaling="root"``, the selection order, parameter
validation, and the identities of treeinner's methods on a penalised model."""

from __future__ import annotations

import numpy as np
import pytest

import treeinner
from treeinner._errors import InputError
from treeinner.booster import GBMClassifier, GBMRegressor, _train
from treeinner.booster._estimators import _objective

from .test_booster import _check_statistics


def _paper_data(seed: int, n: int = 800, d: int = 20):
    """The paper's synthetic design: y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + N(0, 1), every
    feature uniform on [0, 1] (the first three relevant)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = 2 * X[:, 0] - 3 * 2 ** X[:, 1] + np.log2(1 + X[:, 2]) + rng.normal(size=n)
    return X, y


def _same_trees(a, b) -> None:
    ea, eb = a.ensemble_, b.ensemble_
    np.testing.assert_array_equal(ea.tree_offsets, eb.tree_offsets)
    np.testing.assert_array_equal(ea.feature, eb.feature)
    np.testing.assert_array_equal(ea.threshold, eb.threshold)
    np.testing.assert_array_equal(ea.value, eb.value)


CASES = [
    (GBMRegressor, {}),
    (GBMRegressor, {"num_leaves": 6, "max_depth": None}),
    (GBMRegressor, {"subsample": 0.7, "colsample_bytree": 0.6}),
    (GBMClassifier, {}),
    (GBMClassifier, {"multiclass": True}),
]


def _fit(cls, extra, **params):
    extra = dict(extra)
    multiclass = extra.pop("multiclass", False)
    X, y = _paper_data(0, n=600)
    if cls is GBMClassifier:
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3] if multiclass else [0.5]))
    kw = {"n_estimators": 12, "max_depth": 3, "random_state": 3, **extra, **params}
    return cls(**kw).fit(X, y)


@pytest.mark.parametrize("cls,extra", CASES)
def test_zero_penalty_changes_nothing(cls, extra):
    """mu = 0 grows the very trees of the booster without penalty, and so does a penalty too
    small to change any comparison (the penalised code path, with every penalty 1e-300)."""
    plain = _fit(cls, extra)
    _same_trees(plain, _fit(cls, extra, feature_penalty=0.0))
    _same_trees(plain, _fit(cls, extra, feature_penalty=1e-300))
    _same_trees(plain, _fit(cls, extra, feature_penalty=1e-300, penalty_scaling="root"))
    np.testing.assert_array_equal(plain.selected_features_, _fit(cls, extra).selected_features_)


@pytest.mark.parametrize("cls,extra", CASES)
def test_a_large_penalty_stops_adding_features(cls, extra):
    """The number of features falls as mu grows, and a mu above every gain adds none: every
    tree is a single leaf, and the model predicts its base margin."""
    counts = [
        len(_fit(cls, extra, feature_penalty=mu).selected_features_) for mu in (0.0, 2.0, 20.0)
    ]
    assert counts[0] >= counts[1] > counts[2] and counts[0] > counts[2], counts
    big = _fit(cls, extra, feature_penalty=1e9)
    assert big.selected_features_.shape == (0,)
    assert np.all(big.ensemble_.left == -1)
    root = _fit(cls, extra, feature_penalty=2.0, penalty_scaling="root")
    assert root.selected_features_.shape == (0,)  # the scaled gain is at most 1


def _used_in_order(est) -> list[int]:
    """Features in the order of their first split, from the ensemble: trees in order, nodes by
    their split order (depth-wise growth numbers nodes in the order they are split)."""
    seen: dict[int, None] = {}
    ens = est.ensemble_
    for m in range(ens.n_trees):
        lo, hi = ens.tree_offsets[m], ens.tree_offsets[m + 1]
        for k in range(lo, hi):
            if ens.left[k] >= 0:
                seen.setdefault(int(ens.feature[k]), None)
    return list(seen)


@pytest.mark.parametrize("mu", [0.0, 3.0])
def test_selected_features_in_order_of_first_split(mu):
    est = _fit(GBMRegressor, {}, feature_penalty=mu)
    assert est.selected_features_.dtype == np.int64
    assert est.selected_features_.tolist() == _used_in_order(est)


def test_selected_features_after_early_stopping():
    """Early stopping drops the rounds after the best one, and their features with them."""
    X, y = _paper_data(1, n=600)
    est = GBMRegressor(
        n_estimators=200, learning_rate=0.5, max_depth=4, early_stopping_rounds=3,
        random_state=0,
    ).fit(X[:400], y[:400], eval_set=[(X[400:], y[400:])])  # fmt: skip
    assert est.ensemble_.n_trees < 200
    assert est.selected_features_.tolist() == _used_in_order(est)


def test_root_split_only_when_the_gain_pays_the_penalty():
    """A stump's root is split iff its best gain exceeds mu (every feature is new there): the
    threshold in gain units ("none") and in units of the root's residual sum of squares
    ("root")."""
    X, y = _paper_data(2)
    stump = {"n_estimators": 1, "max_depth": 1, "reg_lambda": 0.0}
    plain = GBMRegressor(**stump).fit(X, y)
    gain = plain.ensemble_.gain[0]
    r = y - y.mean()
    sse = float(np.sum(r**2))
    for mu, scaling, splits in [
        (gain * (1 - 1e-9), "none", True),
        (gain * (1 + 1e-9), "none", False),
        (gain / sse * (1 - 1e-9), "root", True),
        (gain / sse * (1 + 1e-9), "root", False),
    ]:
        est = GBMRegressor(**stump, feature_penalty=mu, penalty_scaling=scaling).fit(X, y)
        assert (est.ensemble_.left[0] >= 0) == splits, (mu, scaling)
        if splits:
            _same_trees(plain, est)


def _train_result(X, y, objective="reg:squarederror", n_out=1, **cfg):
    obj = _objective(objective, n_out)
    base = np.zeros(n_out)
    if objective == "reg:squarederror":
        base = np.array([y.mean()])
    params = dict(
        n_estimators=8, learning_rate=0.3, max_depth=3, num_leaves=None, min_child_weight=0.0,
        min_samples_leaf=1, reg_lambda=0.0, min_split_gain=0.0, max_bins=64, subsample=1.0,
        colsample_bytree=1.0, unbiased=False, same_heldout=False, early_stopping_rounds=None,
    )  # fmt: skip
    params.update(cfg)
    config = _train.Config(**params)
    w = np.ones(X.shape[0])
    return _train.train(X, y, w, obj, base, config, np.random.default_rng(0), [])


def test_root_scale_is_the_residual_sum_of_squares_and_bounds_every_gain():
    """A-GBM: with squared error, unit weights and lambda = 0, every tree's scale is the
    residual sum of squares of its root, and each split's criterion (SSE_L + SSE_R) / SSE_r =
    1 - gain / SSE_r is in [0, 1], computed from the rows themselves."""
    X, y = _paper_data(4, n=500, d=8)
    res = _train_result(X, y, feature_penalty=1e-12, penalty_scaling="root")
    F = np.full(X.shape[0], y.mean())
    for tree in res.trees:
        r = y - F
        assert tree.root_scale == pytest.approx(np.sum((r - r.mean()) ** 2), rel=1e-9)
        inner = np.flatnonzero(tree.left >= 0)
        assert inner.size
        for k in inner.tolist():  # the criterion from the rows of node k and its children
            rows = _node_rows(tree, X, k)
            lrows = _node_rows(tree, X, int(tree.left[k]))
            rrows = _node_rows(tree, X, int(tree.right[k]))
            sse = np.sum((r[lrows] - r[lrows].mean()) ** 2) + np.sum(
                (r[rrows] - r[rrows].mean()) ** 2
            )
            crit = sse / tree.root_scale
            assert 0.0 <= crit <= 1.0
            node_sse = np.sum((r[rows] - r[rows].mean()) ** 2)
            assert crit == pytest.approx(1 - (tree.gain[k] + tree.root_scale - node_sse)
                                         / tree.root_scale, abs=1e-9)  # fmt: skip
        F = F + _tree_values(tree, X)


def _node_rows(tree, X, k):
    """Rows of X reaching node k of a grown tree (numeric splits, no missing values)."""
    path = [k]
    parent = {int(c): j for j in range(tree.left.shape[0]) for c in (tree.left[j], tree.right[j])
              if c >= 0}  # fmt: skip
    while path[-1] in parent:
        path.append(parent[path[-1]])
    mask = np.ones(X.shape[0], dtype=bool)
    for child, j in zip(path[:-1], path[1:]):
        go_left = X[:, tree.feature[j]] <= tree.threshold[j]
        mask &= go_left if child == tree.left[j] else ~go_left
    return np.flatnonzero(mask)


def _tree_values(tree, X):
    out = np.zeros(X.shape[0])
    for k in np.flatnonzero(tree.left < 0).tolist():
        out[_node_rows(tree, X, k)] = tree.value[k]
    return out


@pytest.mark.parametrize("objective,n_out", [("binary:logistic", 1), ("multi:softprob", 3)])
def test_root_scale_bounds_the_gains_of_second_order_losses(objective, n_out):
    """For the logistic and softmax losses the scale, sum (wg)^2/(wh) - G^2/(H + lambda) of
    the root, bounds every split's gain in the tree, with lambda > 0 too."""
    X, y = _paper_data(5, n=500, d=8)
    y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_out + 2)[1:-1])).astype(float)
    for lam in (0.0, 1.0):
        res = _train_result(X, y, objective, n_out, feature_penalty=1e-12,
                            penalty_scaling="root", reg_lambda=lam)  # fmt: skip
        for tree in res.trees:
            inner = tree.left >= 0
            assert np.all(tree.gain[inner] <= tree.root_scale * (1 + 1e-12))
            assert np.all(tree.gain[inner] >= 0)


def test_penalised_models_keep_exact_statistics_and_identities():
    """A penalised model is an ordinary l2 booster: exact node statistics, TreeInner with
    PreDecomp on the training rows reproduces the total gain."""
    X, y = _paper_data(6, n=500)
    est = GBMRegressor(n_estimators=15, max_depth=3, feature_penalty=5.0, random_state=0)
    est.fit(X, y)
    _check_statistics(est, X, y)
    ti = treeinner.tree_inner(est, X, y)
    np.testing.assert_allclose(ti.to_numpy(), est.feature_importances_, rtol=1e-8, atol=1e-8)
    assert set(np.flatnonzero(est.feature_importances_ > 0)) == set(est.selected_features_)


def test_penalty_selects_the_relevant_features():
    """On the paper's design with 40 features the penalty keeps the three relevant ones and
    few others (the unpenalised model uses nearly every feature)."""
    X, y = _paper_data(7, n=2000, d=40)
    plain = GBMRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X, y)
    sel = GBMRegressor(
        n_estimators=40, max_depth=3, random_state=0, feature_penalty=0.02,
        penalty_scaling="root",
    ).fit(X, y)  # fmt: skip
    assert len(plain.selected_features_) > 30
    assert {0, 1, 2} <= set(sel.selected_features_.tolist())
    assert len(sel.selected_features_) <= 6


@pytest.mark.parametrize(
    "params,match",
    [
        ({"feature_penalty": -1.0}, "feature_penalty"),
        ({"feature_penalty": float("nan")}, "feature_penalty"),
        ({"penalty_scaling": "tree"}, "penalty_scaling"),
        ({"split_search": "random"}, "split_search"),
        ({"feature_penalty": 1.0, "split": "unbiased"}, "split='gain'"),
        ({"split_search": "group_test", "split": "pvalue"}, "split='gain'"),
        ({"split_search": "group_test", "n_select": 0}, "n_select"),
        ({"split_search": "group_test", "delta": 1.5}, "delta"),
        ({"split_search": "group_test", "delta": 0.0}, "delta"),
    ],
)
def test_bad_parameters(params, match):
    X, y = _paper_data(8, n=100, d=4)
    with pytest.raises(InputError, match=match):
        GBMRegressor(n_estimators=2, **params).fit(X, y)


def test_the_ensemble_records_the_selection_parameters():
    est = _fit(GBMRegressor, {}, feature_penalty=0.5, penalty_scaling="root")
    params = est.ensemble_.params
    assert params["feature_penalty"] == 0.5
    assert params["penalty_scaling"] == "root"
    assert params["split_search"] == "all"
    assert "feature_penalty" not in _fit(GBMRegressor, {}).ensemble_.params


def test_histogram_count():
    """Without group test every built histogram covers all features: the count is a
    multiple of the feature count, and the root of every tree is one of them."""
    est = _fit(GBMRegressor, {})
    counts = est.n_histograms_
    p = est.n_features_in_
    assert counts["pseudo_feature_histograms"] == 0
    assert counts["feature_histograms"] % p == 0
    assert counts["feature_histograms"] >= p * est.ensemble_.n_trees


# ---------------------------------------------------------------------- group test (GT-GBM)
GT = {"split_search": "group_test", "n_select": 3, "penalty_scaling": "root"}


def test_group_test_finds_the_relevant_features():
    """The paper's design at n = 2000, d = 60 (where the root's candidate set holds x1, x2, x3
    in 97 of 100 data sets, tests/test_group_test.py): GT-GBM with the A-GBM penalty selects
    exactly the three relevant features, as A-GBM scanning all features does."""
    hits = 0
    for seed in range(5):
        X, y = _paper_data(seed, n=2000, d=60)
        kw = {"n_estimators": 30, "max_depth": 3, "random_state": seed, "feature_penalty": 0.02}
        gt = GBMRegressor(**kw, **GT).fit(X, y)
        agbm = GBMRegressor(**kw, penalty_scaling="root").fit(X, y)
        assert set(agbm.selected_features_.tolist()) == {0, 1, 2}
        hits += set(gt.selected_features_.tolist()) == {0, 1, 2}
    assert hits >= 4, hits


def test_group_test_builds_fewer_histograms_when_d_is_much_larger_than_s():
    """Counted, not timed: at d = 2000 and s = 3 the group test's pseudo-feature and feature
    histograms together are fewer than the full scan's feature histograms (which already
    subtracts every larger child's histogram from its parent's)."""
    X, y = _paper_data(11, n=1000, d=2000)
    kw = {"n_estimators": 5, "max_depth": 3, "random_state": 0, "feature_penalty": 0.02}
    full = GBMRegressor(**kw, penalty_scaling="root").fit(X, y).n_histograms_
    gt = GBMRegressor(**kw, **GT).fit(X, y).n_histograms_
    assert full["pseudo_feature_histograms"] == 0
    gt_total = gt["feature_histograms"] + gt["pseudo_feature_histograms"]
    assert gt_total < 0.7 * full["feature_histograms"], (gt, full)
    assert gt["feature_histograms"] < 0.05 * full["feature_histograms"], (gt, full)


def test_group_test_is_deterministic_and_thread_independent():
    X, y = _paper_data(12, n=800, d=80)
    kw = {"n_estimators": 8, "max_depth": 3, "random_state": 5, "feature_penalty": 0.01, **GT}
    a = GBMRegressor(**kw, n_jobs=1).fit(X, y)
    b = GBMRegressor(**kw, n_jobs=2).fit(X, y)
    _same_trees(a, b)
    assert a.n_histograms_ == b.n_histograms_
    c = GBMRegressor(**{**kw, "random_state": 6}).fit(X, y)
    assert c.n_histograms_ != a.n_histograms_ or not np.array_equal(
        c.ensemble_.threshold, a.ensemble_.threshold, equal_nan=True
    )


@pytest.mark.parametrize("cls,classes", [(GBMRegressor, 0), (GBMClassifier, 2), (GBMClassifier, 3)])
def test_group_test_models_keep_exact_statistics(cls, classes):
    """Without a penalty (mu = 0) the group test only narrows each node's scan; the model is
    an ordinary booster with exact statistics, and categorical features are always scanned."""
    X, y = _paper_data(13, n=600, d=30)
    X[:, 5] = np.arange(600) % 6  # a categorical feature with its own strong effect
    y = y + 3.0 * np.array([1, -1, 0, 2, -2, 1])[X[:, 5].astype(int)]
    X[::7, 6] = np.nan
    if classes:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))
    est = cls(n_estimators=10, max_depth=3, categorical_features=[5], min_data_per_group=5,
              random_state=0, **GT).fit(X, y)  # fmt: skip
    _check_statistics(est, X, y)
    ti = treeinner.tree_inner(est, X, y).to_numpy()
    ti = ti[:, -1] if ti.ndim == 2 else ti  # per class, then the total
    np.testing.assert_allclose(ti, est.feature_importances_, rtol=1e-7, atol=1e-8)
    assert 5 in est.selected_features_.tolist()
    assert est.ensemble_.params["split_search"] == "group_test"
    assert est.ensemble_.params["n_select"] == 3


def test_group_test_memory_budget(monkeypatch):
    """The prefix sums get max(256 MiB, 2 bytes per value of X); a table that cannot fit even
    with its sparsest storage is an InputError naming the remedies."""
    X, y = _paper_data(14, n=500, d=40)
    est = GBMRegressor(n_estimators=1, **GT).fit(X, y)
    assert est.n_histograms_["pseudo_feature_histograms"] > 0
    monkeypatch.setattr(_train, "_GT_MIN_TABLE_BYTES", 64)  # 2 * 500 * 40 bytes is too small
    with pytest.raises(InputError, match="group_test.*memory"):
        GBMRegressor(n_estimators=2, **GT).fit(X, y)
