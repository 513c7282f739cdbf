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


# ---------------------------------------------------------------------- Student's t
DFS = [1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 30.0, 49.9, 50.0, 50.1, 100.0, 1e3, 1e4, 1e5, 1e6]


@pytest.mark.parametrize("df", DFS)
def test_t_sf_matches_scipy(df):
    t = np.concatenate([
        -np.geomspace(1e-3, 1e3, 25), np.geomspace(1e-3, 1e6, 60), [0.0, 1.7, 1.73, 2.0]
    ])  # fmt: skip
    ours = _stats.t_sf(t, df)
    ref = scipy.stats.t.sf(t, df)
    keep = ref > 1e-300  # scipy underflows to 0 where we still have a value
    np.testing.assert_allclose(ours[keep], ref[keep], rtol=1e-11, atol=0)
    assert np.all(ours[~keep] < 1e-290)
    assert np.all(np.diff(_stats.t_sf(np.sort(t), df)) <= 0)  # a tail: decreasing in t


def test_t_sf_closed_forms():
    """Cauchy (df 1) and df 2 have closed forms; near t = 0 scipy's t.sf is off by 1e-9 for
    df 1 (not ours)."""
    t = np.concatenate([-np.geomspace(1e-12, 1e4, 30), np.geomspace(1e-12, 1e12, 50)])
    cauchy = np.where(t > 1, np.arctan(1.0 / np.maximum(t, 1)) / np.pi, 0.5 - np.arctan(t) / np.pi)
    np.testing.assert_allclose(_stats.t_sf(t, 1.0), cauchy, rtol=1e-13)
    # df 2: 1/2 - t / (2 sqrt(2 + t^2)), written without cancellation for t > 0
    two = np.where(t > 0, 1.0 / (np.sqrt(2.0 + t * t) * (np.sqrt(2.0 + t * t) + t)),
                   0.5 - t / (2.0 * np.sqrt(2.0 + t * t)))  # fmt: skip
    np.testing.assert_allclose(_stats.t_sf(t, 2.0), two, rtol=1e-12)
    huge = np.array([1e100, 1e200, 1e300])  # t^2 overflows: the tail 1 / (pi t) all the same
    np.testing.assert_allclose(_stats.t_sf(huge, 1.0), 1.0 / (np.pi * huge), rtol=1e-13)


@pytest.mark.parametrize("df", DFS)
def test_t_isf_matches_scipy(df):
    q = np.array([1e-12, 1e-8, 1e-5, 1e-3, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.4, 0.5,
                  0.6, 0.9, 0.975, 0.999])  # fmt: skip
    ours = _stats.t_isf(q, df)
    np.testing.assert_allclose(ours, scipy.stats.t.isf(q, df), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(_stats.t_sf(ours, df), q, rtol=1e-11)


def test_t_reduces_to_the_normal():
    t = np.linspace(-8.0, 8.0, 33)
    normal = scipy.stats.norm.sf(t)
    for df in (None, np.inf):
        np.testing.assert_allclose(_stats.t_sf(t, df), normal, rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(
            _stats.t_isf([0.025, 0.5, 0.9], df), scipy.stats.norm.isf([0.025, 0.5, 0.9]),
            rtol=1e-13, atol=1e-15,
        )  # fmt: skip
    # many degrees of freedom: the normal, up to the t's own O(t^4 / df) difference
    np.testing.assert_allclose(_stats.t_sf(t, 1e12), normal, rtol=1e-8)
    # a df array with inf entries is the normal exactly there
    mixed = _stats.t_sf(t, np.where(t > 0, np.inf, 5.0))
    np.testing.assert_array_equal(mixed[t > 0], _stats.t_sf(t[t > 0]))
    np.testing.assert_allclose(mixed[t <= 0], scipy.stats.t.sf(t[t <= 0], 5.0), rtol=1e-12)


def test_t_edge_values():
    assert _stats.t_sf([np.inf, -np.inf], 3.0).tolist() == [0.0, 1.0]
    assert np.isnan(_stats.t_sf([np.nan, 1.0, 1.0], [3.0, 0.0, np.nan])).all()
    assert _stats.t_isf([0.0, 1.0], 3.0).tolist() == [np.inf, -np.inf]
    assert np.isnan(_stats.t_isf([-0.1, 1.1, 0.5], [3.0, 3.0, -1.0])).all()
    # the heavy tail of one degree of freedom, far out
    np.testing.assert_allclose(_stats.t_isf(1e-250, 1.0), 1.0 / (np.pi * 1e-250), rtol=1e-10)


def test_p_values_with_degrees_of_freedom():
    score = np.array([2.0, 0.5, -1.0, 3.0, 2.0, 0.0])
    se = np.array([1.0, 0.5, 2.0, 0.0, 1.0, 0.0])
    df = np.array([3.0, 12.5, 1.0, 4.0, np.inf, 2.0])
    p = _stats.p_values(score, se, df)
    np.testing.assert_allclose(p[:3], scipy.stats.t.sf(score[:3] / se[:3], df[:3]), rtol=1e-12)
    assert p[3] == 0.0 and p[5] == 1.0  # zero errors as before
    assert p[4] == _stats.p_values(score[4:5], se[4:5])[0]  # inf: the normal
    np.testing.assert_array_equal(_stats.p_values(score, se, None), _stats.p_values(score, se))


def test_table_uses_the_degrees_of_freedom():
    rng = np.random.default_rng(7)
    est = _stats.moments_from_rows(_rows(rng, k=2), None).estimate(False)
    plain = _stats.table({"m": est}, {}, list("abcd"), ["c0", "c1"], 0.1)
    est.df = np.array([[2.0, np.inf], [5.0, 30.0], [np.inf, np.inf], [1.0, 4.0]])
    est.df_total = np.array([3.0, 40.0, np.inf, 1.5])
    t = _stats.table({"m": est}, {}, list("abcd"), ["c0", "c1"], 0.1)
    assert list(t.columns) == list(plain.columns)  # no new column
    for out, df in (("c0", est.df[:, 0]), ("c1", est.df[:, 1]), ("total", est.df_total)):
        b = t[t.output == out]
        z = b.score / b.se
        np.testing.assert_allclose(b.p_value, scipy.stats.t.sf(z, df), rtol=1e-11)
        np.testing.assert_allclose(b.ci_high - b.score, scipy.stats.t.isf(0.05, df) * b.se)
        np.testing.assert_allclose(b.score - b.ci_low, scipy.stats.t.isf(0.05, df) * b.se)
        np.testing.assert_allclose(b.q_value, _stats.bh_qvalues(b.p_value.to_numpy()))
    # normal entries equal the table without degrees of freedom; t entries are wider
    same = t.output.eq("c1").to_numpy() & np.isin(t.feature, ["a", "c"])
    pd.testing.assert_frame_equal(t[same], plain[same])
    wider = t.output.eq("c0").to_numpy() & t.feature.eq("a").to_numpy()
    assert (t.ci_high - t.ci_low)[wider].item() > (plain.ci_high - plain.ci_low)[wider].item()


def test_combine_welch_satterthwaite():
    rng = np.random.default_rng(8)
    parts = [_stats.moments_from_rows(_rows(rng, n=n), None).estimate(False) for n in (20, 45)]
    a, b = parts
    # no degrees of freedom anywhere: none combined
    assert _stats.combine(parts, mean=False).df is None
    a.df, a.df_total = np.full(a.var.shape, 4.0), np.full(a.var_total.shape, 6.0)
    b.df, b.df_total = np.full(b.var.shape, 9.0), np.full(b.var_total.shape, 12.0)
    c = _stats.combine(parts, mean=False)
    np.testing.assert_allclose(c.df, (a.var + b.var) ** 2 / (a.var**2 / 4 + b.var**2 / 9))
    np.testing.assert_allclose(
        c.df_total,
        (a.var_total + b.var_total) ** 2 / (a.var_total**2 / 6 + b.var_total**2 / 12),
    )
    assert np.all(c.df >= 4.0) and np.all(c.df <= 13.0)  # between the smallest and the sum
    # a mean: the strata's variances scaled by their weight shares
    m = _stats.combine(parts, mean=True)
    va, vb = a.var * (a.weight / 65) ** 2, b.var * (b.weight / 65) ** 2
    np.testing.assert_allclose(m.df, (va + vb) ** 2 / (va**2 / 4 + vb**2 / 9))
    # a stratum without degrees of freedom counts as normal (infinite)
    b.df = None
    c = _stats.combine(parts, mean=False)
    np.testing.assert_allclose(c.df, (a.var + b.var) ** 2 / (a.var**2 / 4))
    # no variance at all: the normal
    z = _stats.Estimate(np.zeros((2, 1)), np.zeros((2, 1)), np.zeros(2), 1.0,
                        np.full((2, 1), 3.0), np.full(2, 3.0))  # fmt: skip
    assert np.all(np.isinf(_stats.combine([z, z], mean=False).df))
