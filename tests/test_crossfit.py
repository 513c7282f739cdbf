"""Cross-fitting: ``treeinner.significance(..., cv=...)`` and the selector's pooled folds.

The expected values are computed by hand: each fold's model fitted here on its training rows,
``treeinner.significance`` of that model on its held-out rows, and the folds combined as
independent strata (score sums and variance sums; for a mean method the weighted mean and the
squared-weight sum of variances)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold, ShuffleSplit, StratifiedKFold

import treeinner
from treeinner import TreeInnerSelector, _crossfit
from treeinner._methods import RECOMMENDED_METHOD
from treeinner.booster import GBMClassifier, GBMRegressor

xgb = pytest.importorskip("xgboost")

COLS = ["s0", "s1", "s2", "n0", "n1", "n2", "n3", "n4"]


def _data(n=450, seed=0, kind="regression"):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, len(COLS))), columns=COLS)
    s = 1.5 * X.s0 + X.s1 - 0.5 * X.s2
    if kind == "regression":
        return X, (s + rng.normal(size=n)).to_numpy()
    if kind == "binary":  # imbalanced: about one row in five positive
        return X, (s + 0.5 * rng.normal(size=n) > 1.2).astype(int).to_numpy()
    return X, np.digitize(s + 0.5 * rng.normal(size=n), [-1.0, 1.0])


def _xgb(cls=None, **kw):
    cls = cls or xgb.XGBRegressor
    params = dict(n_estimators=20, max_depth=3, learning_rate=0.3, nthread=1)
    params.update(kw)
    return cls(**params)


def _by_hand(est, X, y, folds, methods, w=None, **kw):
    """Each fold's significance table (the fold's model on its held-out rows) and the row
    weight of its held-out rows."""
    out = []
    for train, test in folds:
        fit_kw = {} if w is None else {"sample_weight": w[train]}
        model = clone(est).fit(X.iloc[train], y[train], **fit_kw)
        table = treeinner.significance(
            model,
            X.iloc[test],
            y[test],
            methods=methods,
            sample_weight=None if w is None else w[test],
            **kw,
        )
        out.append((table, len(test) if w is None else float(w[test].sum())))
    return out


def _rows(table, method, output=None):
    t = table[table.method == method]
    if output is not None:
        t = t[t.output == output]
    return t.set_index("feature")


def test_significance_cv_pools_the_folds_of_each_method():
    X, y = _data()
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    est = _xgb()
    methods = ["tree_inner", "abs_shap", "permutation"]
    pooled = treeinner.significance(
        est, X, y, cv=3, methods=methods, sample_weight=w, random_state=4
    )
    seed = int(np.random.RandomState(4).randint(np.iinfo(np.int32).max))  # as the selector
    folds = list(KFold(3, shuffle=True, random_state=seed).split(X))
    parts = _by_hand(est, X, y, folds, methods, w=w, random_state=4)
    assert list(pooled.columns) == list(parts[0][0].columns)
    # a sum (TreeInner): scores add, variances add
    got = _rows(pooled, "tree_inner")
    score = sum(_rows(t, "tree_inner")["score"] for t, _ in parts)
    var = sum(_rows(t, "tree_inner")["se"] ** 2 for t, _ in parts)
    np.testing.assert_allclose(got["score"], score, rtol=1e-9)
    np.testing.assert_allclose(got["se"] ** 2, var, rtol=1e-9)
    # one score over all rows is not the average of the fold scores
    assert not np.allclose(got["score"], score / 3)
    # a mean (mean |SHAP|): the weighted mean of the fold means, variances by squared weights
    W = sum(wk for _, wk in parts)
    got = _rows(pooled, "abs_shap")
    score = sum(_rows(t, "abs_shap")["score"] * wk / W for t, wk in parts)
    var = sum(_rows(t, "abs_shap")["se"] ** 2 * (wk / W) ** 2 for t, wk in parts)
    np.testing.assert_allclose(got["score"], score, rtol=1e-9)
    np.testing.assert_allclose(got["se"] ** 2, var, rtol=1e-9)
    # no standard error: the weighted mean of the fold scores, NaN statistics
    got = _rows(pooled, "permutation")
    score = sum(_rows(t, "permutation")["score"] * wk / W for t, wk in parts)
    np.testing.assert_allclose(got["score"], score, rtol=1e-9)
    assert got["se"].isna().all() and got["p_value"].isna().all()
    # p-values, q-values and intervals follow from the pooled score and error
    t = _rows(pooled, "tree_inner")
    np.testing.assert_allclose(t["ci_high"] - t["score"], 1.959964 * t["se"], rtol=1e-6)
    assert (t.loc[["s0", "s1", "s2"], "q_value"] < 0.01).all()


def test_significance_cv_multiclass_totals_and_a_splitter():
    X, y = _data(kind="multiclass")
    est = _xgb(xgb.XGBClassifier, n_estimators=8)
    folds = KFold(2, shuffle=True, random_state=1)
    pooled = treeinner.significance(est, X, y, cv=folds, alpha=0.1, methods="tree_inner")
    parts = _by_hand(est, X, y, folds.split(X), ["tree_inner"], alpha=0.1)
    for output in ("class_0", "class_2", "total"):
        got = _rows(pooled, "tree_inner", output)
        np.testing.assert_allclose(
            got["score"], sum(_rows(t, "tree_inner", output)["score"] for t, _ in parts)
        )
        np.testing.assert_allclose(
            got["se"] ** 2, sum(_rows(t, "tree_inner", output)["se"] ** 2 for t, _ in parts)
        )
    # the total's error is that of each row's total over classes, not the classes' sum
    total = _rows(pooled, "tree_inner", "total")["se"]
    by_class = sum(_rows(pooled, "tree_inner", f"class_{c}")["se"] for c in range(3))
    assert not np.allclose(total, by_class)


def test_significance_cv_stratifies_classifiers():
    X, y = _data(kind="binary")
    est = _xgb(xgb.XGBClassifier, n_estimators=8)
    pooled = treeinner.significance(est, X, y, cv=4, random_state=2, methods="tree_inner")
    seed = int(np.random.RandomState(2).randint(np.iinfo(np.int32).max))  # as the selector
    strat = StratifiedKFold(4, shuffle=True, random_state=seed).split(X, y)
    score = sum(
        _rows(t, "tree_inner")["score"] for t, _ in _by_hand(est, X, y, strat, "tree_inner")
    )
    np.testing.assert_allclose(_rows(pooled, "tree_inner")["score"], score, rtol=1e-9)
    plain = KFold(4, shuffle=True, random_state=seed).split(X, y)
    other = sum(
        _rows(t, "tree_inner")["score"] for t, _ in _by_hand(est, X, y, plain, "tree_inner")
    )
    assert not np.allclose(score, other)
    # the splits themselves: every fold holds its share of each class
    splits = _crossfit.split_rows(X, y, 4, classifier=True, seed=2)
    counts = np.array([np.bincount(y[test], minlength=2) for _, test in splits])
    assert (counts.max(axis=0) - counts.min(axis=0) <= 1).all()
    regress = _crossfit.split_rows(X, y, 4, classifier=False, seed=2)
    want = list(KFold(4, shuffle=True, random_state=2).split(X))
    for (tr, te), (wtr, wte) in zip(regress, want):
        np.testing.assert_array_equal(te, wte)
        np.testing.assert_array_equal(tr, wtr)


def test_significance_cv_string_labels_and_native_booster():
    X, y = _data(n=300, kind="binary")
    labels = np.array(["no", "yes"])[y]
    folds = list(KFold(2, shuffle=True, random_state=0).split(X))
    est = GBMClassifier(n_estimators=10, max_depth=3, n_jobs=1)
    # labels are encoded by each fold model's classes_: the same as fitting on 0/1
    a = treeinner.significance(est, X, labels, cv=folds)
    b = treeinner.significance(est, X, y, cv=folds)
    pd.testing.assert_frame_equal(a, b)
    parts = _by_hand(est, X, y, folds, RECOMMENDED_METHOD)  # the default
    np.testing.assert_allclose(a["score"], sum(t["score"].to_numpy() for t, _ in parts))
    reg = GBMRegressor(n_estimators=10, max_depth=3, n_jobs=1)
    Xr, yr = _data(n=300)
    got = treeinner.significance(reg, Xr.to_numpy(), yr, cv=folds, methods="forest_inner")
    parts = [
        treeinner.significance(
            clone(reg).fit(Xr.to_numpy()[tr], yr[tr]),
            Xr.to_numpy()[te],
            yr[te],
            methods="forest_inner",
        )
        for tr, te in folds
    ]
    np.testing.assert_allclose(got["score"], sum(t["score"].to_numpy() for t in parts))
    assert list(got["feature"]) == list(parts[0]["feature"])  # the model's own names


def test_significance_cv_catboost_uses_each_folds_training_rows():
    cb = pytest.importorskip("catboost")
    X, y = _data(n=300, kind="binary")
    est = cb.CatBoostClassifier(
        iterations=15, depth=3, thread_count=1, verbose=0, allow_writing_files=False
    )
    folds = list(KFold(2, shuffle=True, random_state=0).split(X))
    methods = ["tree_inner", "unbiased_gain"]
    got = treeinner.significance(est, X, y, cv=folds, methods=methods, random_state=0)
    for method in ("tree_inner", "unbiased_gain"):
        parts = []
        for tr, te in folds:
            model = clone(est).fit(X.iloc[tr], y[tr])  # stores no hessian covers
            with pytest.raises(ValueError, match="reference"):
                treeinner.significance(model, X.iloc[te], y[te], methods=method)
            ref = (X.iloc[tr], y[tr])
            parts.append(
                treeinner.significance(
                    model, X.iloc[te], y[te], methods=method, reference=ref, random_state=0
                )
            )
        t = _rows(got, method)
        np.testing.assert_allclose(t["score"], sum(p["score"].to_numpy() for p in parts))
        np.testing.assert_allclose(t["se"] ** 2, sum(p["se"].to_numpy() ** 2 for p in parts))


def test_selector_pools_as_significance_does():
    X, y = _data()
    folds = KFold(3, shuffle=True, random_state=5)
    est = _xgb()
    table = treeinner.significance(est, X, y, cv=folds, alpha=0.2)
    sel = TreeInnerSelector(est, cv=folds, rule="fdr", refit=False).fit(X, y)
    np.testing.assert_allclose(sel.scores_, table["score"], rtol=1e-12)
    pd.testing.assert_frame_equal(sel.significance_, table)
    assert list(sel.get_feature_names_out()) == list(table.feature[table.q_value <= 0.1])
    # cv=int: the same shuffled folds as significance's for the same random_state
    # (the default fdr rule's alpha 0.1: the table's two-sided level is 1 - 2 alpha)
    sel = TreeInnerSelector(est, cv=3, refit=False, random_state=9).fit(X, y)
    again = treeinner.significance(
        est, X, y, cv=3, random_state=9, alpha=0.2
    )  # the one-sided 90% bound of the default fdr rule
    pd.testing.assert_frame_equal(sel.significance_, again)


def _spy_splits(monkeypatch):
    """The splits every ``_crossfit.split_rows`` call returns, in a list."""
    seen = []
    real = _crossfit.split_rows

    def spy(*args, **kw):
        out = real(*args, **kw)
        seen.append(out)
        return out

    monkeypatch.setattr(_crossfit, "split_rows", spy)
    return seen


def test_selector_default_cross_fits_five_folds(monkeypatch):
    seen = _spy_splits(monkeypatch)
    X, y = _data(n=300, kind="binary")
    est = _xgb(xgb.XGBClassifier, n_estimators=5)
    sel = TreeInnerSelector(est, refit=False, random_state=3).fit(X, y)
    (splits,) = seen
    assert len(splits) == 5
    # every row held out (scored) exactly once, never by a model that trained on it
    held = np.concatenate([test for _, test in splits])
    np.testing.assert_array_equal(np.sort(held), np.arange(300))
    for train, test in splits:
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(300))
        # stratified: each fold holds out a fifth of the positives (give or take one)
        assert abs(y[test].sum() - y.sum() / 5) <= 1
    # the pooled score is the sum over the five folds' held-out rows
    parts = _by_hand(est, X, y, splits, [RECOMMENDED_METHOD])  # the default method
    np.testing.assert_allclose(sel.scores_, sum(t["score"] for t, _ in parts), rtol=1e-9)
    # the same table as significance's with cv=5 and the same random_state
    again = treeinner.significance(
        est, X, y, cv=5, random_state=3, alpha=0.2
    )  # the one-sided 90% bound of the default fdr rule
    pd.testing.assert_frame_equal(sel.significance_, again)
    # shuffled folds seeded by random_state
    TreeInnerSelector(est, refit=False, random_state=4).fit(X, y)
    assert not np.array_equal(seen[-1][0][1], splits[0][1])


def test_selector_cv_none_holds_out_validation_fraction(monkeypatch):
    seen = _spy_splits(monkeypatch)
    X, y = _data(n=200)
    est = _xgb(n_estimators=5)
    sel = TreeInnerSelector(est, cv=None, validation_fraction=0.4, refit=False, random_state=0)
    sel.fit(X, y)
    ((train, test),) = seen[-1]
    assert len(test) == 80 and len(train) == 120
    assert len(np.intersect1d(train, test)) == 0
    model = clone(est).fit(X.iloc[train], y[train])
    expected = treeinner.significance(
        model, X.iloc[test], y[test], alpha=0.2
    )  # the one-sided 90% bound of the default fdr rule
    pd.testing.assert_frame_equal(sel.significance_, expected)
    # with cv given (the default 5), validation_fraction is not used, not even checked
    TreeInnerSelector(est, validation_fraction=2.0, refit=False).fit(X, y)
    assert len(seen[-1]) == 5
    with pytest.raises(ValueError, match="validation_fraction"):
        TreeInnerSelector(est, cv=None, validation_fraction=2.0).fit(X, y)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"cv": 1}, ValueError, "at least 2 folds"),
        ({"cv": True}, ValueError, "cv must be None, an int >= 2"),
        ({"cv": "kfold"}, ValueError, "cv must be None"),
        ({"cv": 3.0}, ValueError, "cv must be None"),
        ({"cv": object()}, ValueError, "cv must be None"),
        ({"cv": [(np.arange(10), np.arange(5, 15))]}, ValueError, "also trains on"),
        ({"cv": [(np.arange(10), np.array([], dtype=int))]}, ValueError, "both must be"),
        ({"cv": [(np.arange(10), np.arange(10, 20) + 1000)]}, ValueError, "outside"),
        ({"cv": [(np.arange(10), [0.5, 1.5])]}, ValueError, "row positions"),
        ({"cv": [np.arange(10)]}, ValueError, "not a \\(train, test\\) pair"),
        ({"cv": ShuffleSplit(3, random_state=0)}, ValueError, "held out by splits"),
        (
            {"cv": 2, "reference": "train", "methods": "tree_inner"},
            ValueError,
            "reference= is not taken with cv=",
        ),
        ({"cv": 2, "sample_weight": np.ones(3)}, ValueError, "sample_weight must have shape"),
    ],
)
def test_significance_cv_bad_arguments(kw, error, match):
    X, y = _data(n=120)
    with pytest.raises(error, match=match):
        treeinner.significance(_xgb(n_estimators=2), X, y, **kw)


def test_significance_cv_needs_an_estimator():
    X, y = _data(n=120)
    booster = _xgb(n_estimators=2).fit(X, y).get_booster()
    with pytest.raises(TypeError, match="scikit-learn-style estimator"):
        treeinner.significance(booster, X, y, cv=2)
    from sklearn.linear_model import LinearRegression

    with pytest.raises(TypeError, match="needs an XGBoost, LightGBM or CatBoost"):
        treeinner.significance(LinearRegression(), X, y, cv=2)
    with pytest.raises(ValueError, match="y is needed"):
        treeinner.significance(_xgb(), X, None, cv=2, methods="abs_shap")


def test_split_rows_holdout_and_leftover_rows():
    X, y = _data(n=200, kind="binary")
    ((train, test),) = _crossfit.split_rows(
        X, y, None, classifier=True, seed=0, validation_fraction=0.25
    )
    assert len(test) == 50 and len(np.intersect1d(train, test)) == 0
    assert abs(y[test].mean() - y.mean()) < 0.02  # stratified
    # rows held out by no split are simply not scored; splits may be given as boolean masks
    mask = np.zeros(200, dtype=bool)
    mask[:60] = True
    splits = _crossfit.split_rows(X, y, [(~mask, mask)], classifier=False, seed=None)
    np.testing.assert_array_equal(splits[0][1], np.arange(60))
    est = _xgb(n_estimators=5)
    got = treeinner.significance(est, X, y, cv=[(np.arange(60, 200), np.arange(60))])
    model = clone(est).fit(X.iloc[60:], y[60:])
    pd.testing.assert_frame_equal(got, treeinner.significance(model, X.iloc[:60], y[:60]))
