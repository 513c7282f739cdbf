"""Standard errors, intervals, p-values and q-values (treeinner._stats), and the public
``significance`` / ``importance(se=True)`` built on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats

import treeinner
from treeinner import _stats


def _rows(rng, n=50, f=4, k=2):
    return rng.normal(size=(n, f, k))


@pytest.mark.parametrize("weighted", [False, True])
def test_sum_estimate_is_the_sample_variance_of_the_terms(weighted):
    rng = np.random.default_rng(0)
    rows = _rows(rng)
    w = rng.uniform(0.5, 2.0, size=rows.shape[0]) if weighted else None
    est = _stats.moments_from_rows(rows, w).estimate(mean=False)
    u = rows * (1.0 if w is None else w[:, None, None])
    n = rows.shape[0]
    np.testing.assert_allclose(est.score, u.sum(0))
    np.testing.assert_allclose(est.var, n * u.var(axis=0, ddof=1))
    np.testing.assert_allclose(est.var_total, n * u.sum(2).var(axis=0, ddof=1))


@pytest.mark.parametrize("weighted", [False, True])
def test_mean_estimate_is_the_linearised_ratio(weighted):
    rng = np.random.default_rng(1)
    rows = np.abs(_rows(rng))
    n = rows.shape[0]
    w = rng.uniform(0.5, 2.0, size=n) if weighted else np.ones(n)
    est = _stats.moments_from_rows(rows, None if not weighted else w).estimate(mean=True)
    W = w.sum()
    score = np.einsum("i,ijk->jk", w, rows) / W
    np.testing.assert_allclose(est.score, score)
    v = w[:, None, None] * (rows - score) / W  # influence of each row on the ratio
    np.testing.assert_allclose(est.var, n * v.var(axis=0, ddof=1), rtol=1e-9, atol=1e-15)
    vt = v.sum(2)
    np.testing.assert_allclose(est.var_total, n * vt.var(axis=0, ddof=1), rtol=1e-9, atol=1e-15)
    if not weighted:  # the plain mean: the usual s / sqrt(n)
        np.testing.assert_allclose(est.se, rows.std(axis=0, ddof=1) / np.sqrt(n))


def test_moments_add_over_disjoint_rows():
    rng = np.random.default_rng(2)
    rows = _rows(rng, n=30)
    w = rng.uniform(size=30)
    whole = _stats.moments_from_rows(rows, w)
    parts = _stats.moments_from_rows(rows[:11], w[:11]) + _stats.moments_from_rows(
        rows[11:], w[11:]
    )
    for name in ("s1", "s2", "s2_total", "swu"):
        np.testing.assert_allclose(getattr(parts, name), getattr(whole, name))
    assert (parts.n, parts.sw, parts.sw2) == pytest.approx((whole.n, whole.sw, whole.sw2))


def test_one_row_has_no_standard_error():
    est = _stats.moments_from_rows(np.ones((1, 2, 1)), None).estimate(mean=False)
    assert np.all(np.isnan(est.se))


def test_combine_strata():
    rng = np.random.default_rng(3)
    a = _stats.moments_from_rows(_rows(rng, n=20), None)
    b = _stats.moments_from_rows(_rows(rng, n=40), None)
    ea, eb = a.estimate(False), b.estimate(False)
    c = _stats.combine([ea, eb], mean=False)
    np.testing.assert_allclose(c.score, ea.score + eb.score)
    np.testing.assert_allclose(c.var, ea.var + eb.var)
    ma, mb = a.estimate(True), b.estimate(True)
    cm = _stats.combine([ma, mb], mean=True)
    np.testing.assert_allclose(cm.score, (20 * ma.score + 40 * mb.score) / 60)
    np.testing.assert_allclose(cm.var, (20 / 60) ** 2 * ma.var + (40 / 60) ** 2 * mb.var)


def test_p_values_one_sided():
    score = np.array([1.96, 0.0, -1.0, 2.0, 0.0, np.nan])
    se = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    p = _stats.p_values(score, se)
    np.testing.assert_allclose(p[:3], scipy.stats.norm.sf([1.96, 0.0, -1.0]))
    assert p[3] == 0.0 and p[4] == 1.0 and np.isnan(p[5])


def test_bh_qvalues_match_scipy():
    rng = np.random.default_rng(4)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.01, size=10)])
    np.testing.assert_allclose(_stats.bh_qvalues(p), scipy.stats.false_discovery_control(p))
    tested = np.ones(p.size, dtype=bool)
    tested[:5] = False
    q = _stats.bh_qvalues(p, tested)
    np.testing.assert_allclose(q[5:], scipy.stats.false_discovery_control(p[5:]))
    assert np.all(q[:5] == 1.0)


def test_table_columns_and_intervals():
    rng = np.random.default_rng(5)
    est = _stats.moments_from_rows(_rows(rng, k=1), None).estimate(False)
    t = _stats.table({"m": est, "g": None}, {"g": np.ones((4, 1))}, list("abcd"), None, 0.1)
    assert list(t.columns) == [
        "method", "feature", "score", "se", "ci_low", "ci_high", "p_value", "q_value"
    ]  # fmt: skip
    m = t[t.method == "m"]
    z = scipy.stats.norm.ppf(0.95)
    np.testing.assert_allclose(m.ci_high - m.score, z * m.se)
    assert t[t.method == "g"].se.isna().all()
    multi = _stats.moments_from_rows(_rows(rng, k=3), None).estimate(False)
    t = _stats.table({"m": multi}, {}, list("abcd"), ["c0", "c1", "c2"], 0.05)
    assert t.output.unique().tolist() == ["c0", "c1", "c2", "total"]
    np.testing.assert_allclose(t[t.output == "total"].se, multi.se_total)


@pytest.fixture(scope="module")
def small_model():
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(6)
    X = pd.DataFrame(rng.normal(size=(1200, 4)), columns=["a", "b", "c", "d"])
    y = X["a"] + 0.3 * X["b"] + rng.normal(size=1200)
    model = xgb.XGBRegressor(n_estimators=30, max_depth=3, learning_rate=0.2).fit(X[:600], y[:600])
    return model, X[600:], y[600:].to_numpy()


def test_significance_abs_shap_equals_numpy(small_model):
    model, X, y = small_model
    w = np.linspace(0.5, 1.5, X.shape[0])
    t = treeinner.significance(model, X, y, methods="abs_shap", sample_weight=w)
    a = np.abs(treeinner.tree_shap(model, X).values)
    mean = w @ a / w.sum()
    v = w[:, None] * (a - mean) / w.sum()
    se = np.sqrt(X.shape[0] * v.var(axis=0, ddof=1))
    assert t.feature.tolist() == ["a", "b", "c", "d"]
    np.testing.assert_allclose(t.score, mean)
    np.testing.assert_allclose(t.se, se, rtol=1e-9)
    # positive by construction: "score <= 0" is no question to test
    assert t.p_value.isna().all() and t.q_value.isna().all()


def test_importance_se_columns(small_model):
    model, X, y = small_model
    frame = treeinner.importance(
        model, X, y, methods=["abs_shap", "total_gain", "permutation"], se=True, random_state=0
    )
    assert list(frame.columns) == [
        "abs_shap", "total_gain", "permutation", "abs_shap_se", "total_gain_se",
        "permutation_se",
    ]  # fmt: skip
    t = treeinner.significance(model, X, y, methods="abs_shap")
    np.testing.assert_allclose(frame["abs_shap_se"], t.se)
    assert np.all(frame["total_gain_se"] == 0.0) and frame["permutation_se"].isna().all()
    plain = treeinner.importance(model, X, y, methods=["abs_shap", "total_gain"])
    pd.testing.assert_frame_equal(frame[plain.columns], plain)


def test_significance_bad_arguments(small_model):
    model, X, y = small_model
    with pytest.raises(ValueError, match="alpha"):
        treeinner.significance(model, X, y, alpha=1.5)
    with pytest.raises(ValueError, match="reference"):
        treeinner.significance(model, X, y, methods="abs_shap", reference=(X, y))
    with pytest.raises(ValueError, match="pass one of them"):
        treeinner.importance(model, X, y, methods="abs_shap", se=True, n_bootstrap=3)
