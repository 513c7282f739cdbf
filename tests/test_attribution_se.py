"""``Attribution.importance``: mean |attribution| per feature with its standard error over the
rows and its interval, against an independent numpy reference, the registry's ``abs_*``
methods, and the spread of the mean over independent row sets."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

import treeinner

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

COLUMNS = ["score", "se", "ci_low", "ci_high"]


def _signal(X: np.ndarray) -> np.ndarray:
    return 2 * X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] * (X[:, 3] > 0)


@pytest.fixture(scope="module")
def models():
    """A regression booster (XGBoost) and a 3-class one (LightGBM), held-out rows."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(600, 5))
    s = _signal(X)
    y = s + rng.normal(size=600)
    reg = xgb.train({"max_depth": 3, "eta": 0.3, "nthread": 1}, xgb.DMatrix(X[:300], y[:300]), 15)
    cls = np.digitize(s + 0.5 * rng.normal(size=600), [-1.0, 1.0])
    mc = lgb.train(
        {
            "objective": "multiclass",
            "num_class": 3,
            "num_leaves": 6,
            "verbose": -1,
            "num_threads": 1,
            "min_data_in_leaf": 10,
        },
        lgb.Dataset(X[:300], cls[:300]),
        6,
    )
    return reg, mc, X[300:], y[300:], cls[300:]


def _reference(a: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean of |a| (n, p) and its delta-method standard error, written out."""
    n = a.shape[0]
    W = w.sum()
    score = (w[:, None] * a).sum(axis=0) / W
    d = w[:, None] * (a - score) / W  # linearised per-row terms of the ratio
    var = n / (n - 1) * ((d - d.mean(axis=0)) ** 2).sum(axis=0)
    return score, np.sqrt(var)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_single_output_equals_numpy_reference(models, weighted):
    reg, _, X, _, _ = models
    attr = treeinner.tree_shap(reg, X)
    w = np.random.default_rng(2).uniform(0.2, 3.0, len(X)) if weighted else None
    got = attr.importance(sample_weight=w)
    assert list(got.columns) == ["feature", *COLUMNS]
    assert list(got["feature"]) == list(attr.feature_names)
    score, se = _reference(np.abs(attr.values), np.ones(len(X)) if w is None else w)
    np.testing.assert_allclose(got["score"], score, rtol=1e-12)
    np.testing.assert_allclose(got["se"], se, rtol=1e-9)
    z = NormalDist().inv_cdf(0.975)
    np.testing.assert_allclose(got["ci_low"], score - z * se, rtol=1e-9)
    np.testing.assert_allclose(got["ci_high"], score + z * se, rtol=1e-9)
    assert np.all(se > 0)
    # alpha sets the interval only
    wide = attr.importance(sample_weight=w, alpha=0.5)
    z50 = NormalDist().inv_cdf(0.75)
    np.testing.assert_allclose(wide["ci_high"] - wide["score"], z50 * wide["se"], rtol=1e-9)
    pd.testing.assert_series_equal(wide["se"], got["se"])
    # the registry's mean |TreeSHAP| with its one-pass standard error: the same numbers
    table = treeinner.significance(reg, X, None, methods=["abs_shap"], sample_weight=w)
    np.testing.assert_allclose(got["score"], table["score"], rtol=1e-10)
    np.testing.assert_allclose(got["se"], table["se"], rtol=1e-8)


def test_multi_output_per_class_and_total(models):
    _, mc, X, _, _ = models
    attr = treeinner.predecomp(mc, X)
    n, p, k = attr.values.shape
    assert k == 3
    w = np.random.default_rng(5).uniform(0.5, 2.0, n)
    got = attr.importance(sample_weight=w)
    assert list(got.columns) == ["feature", "output", *COLUMNS]
    outputs = ["class_0", "class_1", "class_2", "total"]
    assert list(pd.unique(got["output"])) == outputs
    a = np.abs(attr.values)
    ds = []
    for c in range(k):
        rows = got[got["output"] == f"class_{c}"]
        assert list(rows["feature"]) == list(attr.feature_names)
        score, se = _reference(a[:, :, c], w)
        np.testing.assert_allclose(rows["score"], score, rtol=1e-12)
        np.testing.assert_allclose(rows["se"], se, rtol=1e-9)
        ds.append(w[:, None] * (a[:, :, c] - score) / w.sum())
    # the total over classes: its per-row terms are the sums of the classes' terms
    total = got[got["output"] == "total"]
    d = np.sum(ds, axis=0)
    se_total = np.sqrt(n / (n - 1) * ((d - d.mean(axis=0)) ** 2).sum(axis=0))
    np.testing.assert_allclose(total["score"], (w @ a.sum(axis=2)) / w.sum(), rtol=1e-12)
    np.testing.assert_allclose(total["se"], se_total, rtol=1e-9)
    # not the root of the summed class variances: the classes' terms are correlated
    per_class = got[got["output"] != "total"]["se"].to_numpy().reshape(k, p)
    assert not np.allclose(total["se"], np.sqrt((per_class**2).sum(axis=0)), rtol=1e-3)


def test_standard_error_is_the_spread_over_row_sets(models):
    """For the model held fixed, the standard error from one set of rows is the standard
    deviation of the score over independent row sets of the same size (within 20%)."""
    reg, _, _, _, _ = models
    rng = np.random.default_rng(7)
    n, reps = 150, 200
    X = rng.normal(size=(n * reps, 5))
    attr = treeinner.saabas(reg, X)
    a = np.abs(attr.values).reshape(reps, n, -1)
    spread = a.mean(axis=1).std(axis=0, ddof=1)
    se = np.mean(
        [
            treeinner.Attribution(attr.values[r * n : (r + 1) * n], attr.bias, attr.feature_names)
            .importance()["se"]
            .to_numpy()
            for r in range(20)
        ],
        axis=0,
    )
    np.testing.assert_allclose(se, spread, rtol=0.2)


def test_bad_inputs(models):
    reg, _, X, _, _ = models
    attr = treeinner.saabas(reg, X)
    for alpha in (0, 1.0, -0.1, "0.05", True, None):
        with pytest.raises(ValueError, match="alpha"):
            attr.importance(alpha=alpha)
    with pytest.raises(ValueError, match="shape"):
        attr.importance(sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        attr.importance(sample_weight=-np.ones(len(X)))
    with pytest.raises(TypeError, match="keyword"):
        attr.importance(None)
