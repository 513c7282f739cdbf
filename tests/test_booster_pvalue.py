"""treeinner.booster with ``split="pvalue"`` (paper 004's correction of the split-selection
bias): the feature by the p-value of its best split, the ``min_split_pvalue`` stopping rule,
the p-values against the kernel on per-row data, uniform feature choice under the null, exact
node statistics and the identities of treeinner's methods, parameter validation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import treeinner
from treeinner._errors import InputError
from treeinner._format import CAT_SET_LEFT
from treeinner.booster import GBMClassifier, GBMRegressor
from treeinner.kernels import histogram as K
from treeinner.kernels.pvalue import split_log_pvalue_rows

from .test_booster import _check_statistics

CAT = {"min_data_per_group": 10, "cat_smooth": 5.0, "cat_l2": 1.0}


def _null_data(seed, n=1000, classes=False):
    """Four features independent of the target: numeric with 2, 10 and 100 distinct values,
    and a 50-level categorical (column 3)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.integers(0, 2, n), rng.integers(0, 10, n), rng.integers(0, 100, n),
         rng.integers(0, 50, n)]
    ).astype(float)  # fmt: skip
    y = rng.integers(0, 2, n).astype(float) if classes else rng.normal(size=n)
    return X, y


def _root_features(split, classes, seeds):
    counts = np.zeros(4, dtype=np.int64)
    cls = GBMClassifier if classes else GBMRegressor
    for s in seeds:
        X, y = _null_data(s, classes=classes)
        est = cls(
            n_estimators=1, max_depth=1, split=split, categorical_features=[3],
            min_data_per_group=20, random_state=0,
        ).fit(X, y)  # fmt: skip
        f = est.ensemble_.feature[0]
        assert f >= 0  # min_split_pvalue=1.0: the root always splits
        counts[f] += 1
    return counts


@pytest.mark.parametrize("classes", [False, True])
def test_root_feature_uniform_under_the_null(classes):
    """Under the null the p-value criterion picks each of the four features about equally
    often (chi-square test of uniformity), whereas split gain picks the high-cardinality ones
    (the 50-level categorical, then the 100-valued numeric) almost always."""
    seeds = range(400)
    pv = _root_features("pvalue", classes, seeds)
    gain = _root_features("gain", classes, seeds)
    assert stats.chisquare(pv).pvalue > 0.001, pv
    assert pv.min() >= 70, pv  # 100 expected per feature
    assert gain[2] + gain[3] >= 0.95 * len(seeds), gain
    assert gain[0] + gain[1] <= 5, gain


def test_root_feature_uniform_under_the_null_numeric_only():
    """Without the categorical feature: gain prefers the 100-valued feature, the p-value
    criterion does not prefer any (binomial test of the 100-valued feature's share)."""
    n_seeds = 300
    counts = {"pvalue": np.zeros(3, dtype=np.int64), "gain": np.zeros(3, dtype=np.int64)}
    for s in range(n_seeds):
        X, y = _null_data(1000 + s)
        for split, c in counts.items():
            est = GBMRegressor(n_estimators=1, max_depth=1, split=split).fit(X[:, :3], y)
            c[est.ensemble_.feature[0]] += 1
    assert stats.binomtest(int(counts["pvalue"][2]), n_seeds, 1 / 3).pvalue > 0.001, counts
    assert stats.chisquare(counts["pvalue"]).pvalue > 0.001, counts
    assert counts["gain"][2] >= 0.6 * n_seeds, counts  # 205 of 300 (16 for two values)
    assert counts["gain"][0] <= 0.1 * n_seeds, counts


def _hand_log_pvalues(X, g, h, cat):
    """log p-value of every feature at the root from the per-row data (bins = sorted distinct
    values; missing values last, no feature here has any)."""
    out = []
    for f in range(X.shape[1]):
        _, codes = np.unique(X[:, f], return_inverse=True)
        kind = "partition" if f in cat else "ordered"
        out.append(split_log_pvalue_rows(codes, g, h, kind=kind, reg_lambda=1.0))
    return np.array(out)


@pytest.mark.parametrize("weighted", [False, True])
def test_root_choice_and_stopping_match_the_kernel_on_rows(weighted):
    """The root's feature is the one with the smallest p-value computed from the per-row
    weighted gradients (``split_log_pvalue_rows``), and ``min_split_pvalue`` just above /
    below that p-value splits / does not split the root."""
    rng = np.random.default_rng(7)
    n = 600
    X = np.column_stack(
        [rng.integers(0, 3, n), rng.integers(0, 30, n), rng.integers(0, 12, n),
         rng.normal(size=n).round(1)]
    ).astype(float)  # fmt: skip
    eff = rng.normal(0, 0.25, 12)
    y = 0.15 * X[:, 0] + eff[X[:, 2].astype(int)] + rng.normal(size=n)
    w = rng.uniform(0.3, 2.0, n) if weighted else np.ones(n)
    base = np.average(y, weights=w)
    g = w * (base - y)
    lps = _hand_log_pvalues(X, g, w, cat={2})
    best = int(np.argmin(lps))
    assert lps[best] < np.log(0.05) and lps[best] > np.log(1e-12)  # a useful test case
    assert np.sort(lps)[1] - lps[best] > 1e-3  # a clear winner
    kw = {"n_estimators": 1, "max_depth": 1, "split": "pvalue", "categorical_features": [2]}
    kw |= {"min_data_per_group": 5, "cat_smooth": 1.0, "cat_l2": 0.0}
    est = GBMRegressor(**kw).fit(X, y, sample_weight=w)
    assert est.ensemble_.feature[0] == best
    p = float(np.exp(lps[best]))
    est = GBMRegressor(**kw, min_split_pvalue=p * 1.0001).fit(X, y, sample_weight=w)
    assert est.ensemble_.feature[0] == best
    est = GBMRegressor(**kw, min_split_pvalue=p * 0.9999).fit(X, y, sample_weight=w)
    assert est.ensemble_.n_nodes == 1 and est.ensemble_.left[0] < 0


def test_missing_bin_on_the_side_the_split_sends_it():
    """A numeric feature with missing values: its p-value is the kernel's with the missing
    bin first where the split sends missing values left, else last."""
    rng = np.random.default_rng(3)
    n = 500
    x = rng.integers(0, 20, n).astype(float)
    miss = rng.random(n) < 0.15
    y = 0.03 * x + 0.6 * miss + rng.normal(size=n)  # missing rows look like high values
    x[miss] = np.nan
    X = x[:, None]
    est = GBMRegressor(n_estimators=1, max_depth=1, split="pvalue").fit(X, y)
    ens = est.ensemble_
    assert ens.feature[0] == 0
    _, codes = np.unique(x[~miss], return_inverse=True)
    full = np.empty(n, dtype=np.int64)
    if ens.default_left[0]:
        full[~miss], full[miss] = codes + 1, 0
    else:
        full[~miss], full[miss] = codes, codes.max() + 1
    g = y.mean() - y
    lp = split_log_pvalue_rows(full, g, np.ones(n), kind="ordered", reg_lambda=1.0)
    assert np.log(1e-10) < lp < np.log(0.5)
    p = float(np.exp(lp))
    kw = {"n_estimators": 1, "max_depth": 1, "split": "pvalue"}
    assert GBMRegressor(**kw, min_split_pvalue=p * 1.0001).fit(X, y).ensemble_.n_nodes == 3
    assert GBMRegressor(**kw, min_split_pvalue=p * 0.9999).fit(X, y).ensemble_.n_nodes == 1


def test_node_power_sums():
    rng = np.random.default_rng(0)
    gh = rng.normal(size=(50, 2))
    idx = rng.permutation(50).astype(np.int32)
    starts = np.array([0, 10, 10, 30], dtype=np.int64)
    ends = np.array([10, 30, 10, 50], dtype=np.int64)
    out = np.empty((4, 3))
    for nch in (1, 3):
        K.node_power_sums(gh, idx, starts, ends, out, nch)
        for j in range(4):
            g = gh[idx[starts[j] : ends[j]], 0]
            np.testing.assert_allclose(out[j], [g @ g, g**2 @ g, g**2 @ g**2], rtol=1e-13)


# ---------------------------------------------------------------------- (b) stopping rule
def test_min_split_pvalue_stops_on_noise_and_splits_on_signal():
    """With ``min_split_pvalue=0.01`` pure noise gives (almost) no splits, while a signal
    feature is split on, among noise features of many more values (split gain, or no limit,
    splits everywhere)."""
    rng = np.random.default_rng(11)
    n = 1500
    X = np.column_stack(
        [rng.integers(0, 2, n), rng.integers(0, 10, n), rng.normal(size=n),
         rng.integers(0, 50, n)]
    ).astype(float)  # fmt: skip
    kw = {"n_estimators": 20, "max_depth": 3, "categorical_features": [3], **CAT}
    y_noise = rng.normal(size=n)
    stopped = GBMRegressor(split="pvalue", min_split_pvalue=0.01, **kw).fit(X, y_noise)
    free = GBMRegressor(split="pvalue", **kw).fit(X, y_noise)
    n_split = int((stopped.ensemble_.left >= 0).sum())
    assert n_split <= 3, n_split  # of 140 possible; a root has p < 0.01 w.p. ~4%
    assert int((free.ensemble_.left >= 0).sum()) >= 100
    y_sig = 0.4 * X[:, 0] + rng.normal(size=n)  # the two-valued feature carries the signal
    sig = GBMRegressor(split="pvalue", min_split_pvalue=0.01, **kw).fit(X, y_sig)
    ens = sig.ensemble_
    inner = ens.left >= 0
    assert inner.sum() >= 5  # at least the roots of the early rounds (9-12 over seeds)
    assert np.mean(ens.feature[inner] == 0) >= 0.9
    roots = ens.tree_offsets[:-1]
    assert np.all(ens.feature[roots[:5]] == 0)
    gain = GBMRegressor(split="gain", min_split_gain=0.0, **kw).fit(X, y_sig)
    g_inner = gain.ensemble_.left >= 0
    assert np.mean(gain.ensemble_.feature[g_inner] == 0) < 0.5  # gain splits on the noise


# ---------------------------------------------------------------------- (c) identities
def _mixed(n=1200, seed=2):
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(n)
    x1 = rng.standard_normal(n)
    c2 = rng.integers(0, 12, n).astype(float)
    c3 = rng.integers(0, 40, n).astype(float)
    eff = rng.normal(0, 1.5, 12)
    y = x0 + eff[c2.astype(int)] + 0.3 * rng.standard_normal(n)
    X = np.column_stack([x0, x1, c2, c3])
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_identities_hold_for_pvalue_models(kind):
    """Exact statistics, Prop. 3 (TreeInner with PreDecomp on the training rows = total gain,
    the stored gains being those of the splits made) and local accuracy of PreDecomp and
    TreeSHAP, for squared error, logistic and softmax with categorical features."""
    X, y = _mixed()
    kw = {"n_estimators": 5, "max_depth": 4, "learning_rate": 0.3, "reg_lambda": 1.5, **CAT}
    kw |= {"split": "pvalue", "categorical_features": [2, 3], "min_split_pvalue": 0.5}
    if kind == "regression":
        est = GBMRegressor(**kw)
    else:
        y = (y > 0.3).astype(int) if kind == "binary" else np.digitize(y, [-0.8, 0.8])
        est = GBMClassifier(**kw)
    w = np.random.default_rng(1).uniform(0.5, 1.5, X.shape[0])
    est.fit(X, y, sample_weight=w)
    ens = est.ensemble_
    assert ens.params["split"] == "pvalue" and ens.params["min_split_pvalue"] == 0.5
    cat_nodes = (ens.left >= 0) & (ens.split_type == CAT_SET_LEFT)
    assert cat_nodes.sum() >= 3 and set(ens.feature[cat_nodes].tolist()) <= {2, 3}
    _check_statistics(est, X, y.astype(float), w)
    ti = treeinner.tree_inner(est, X, y, attribution="predecomp", sample_weight=w)
    tg = treeinner.total_gain(est)
    if kind == "multiclass":
        ti, tg = ti["total"], tg["total"]
    np.testing.assert_allclose(est.feature_importances_, tg.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-9, atol=1e-9)
    assert tg.iloc[2] > 0.1 * tg.abs().max()  # the categorical signal is used
    margin = ens.predict_margin(X)
    pdc = treeinner.predecomp(est, X)
    sh = treeinner.tree_shap(est, X[:120])
    bias = pdc.bias if kind == "multiclass" else pdc.bias[0]
    np.testing.assert_allclose(pdc.values.sum(axis=1) + bias, margin, rtol=1e-10)
    bias = sh.bias if kind == "multiclass" else sh.bias[0]
    np.testing.assert_allclose(sh.values.sum(axis=1) + bias, margin[:120], rtol=1e-9, atol=1e-12)


def test_subsample_and_best_first():
    X, y = _mixed(seed=4)
    est = GBMRegressor(
        n_estimators=6, num_leaves=9, max_depth=None, subsample=0.7, colsample_bytree=0.75,
        split="pvalue", min_split_pvalue=0.2, categorical_features=[2, 3], random_state=3,
        **CAT,
    ).fit(X, y)  # fmt: skip
    ens = est.ensemble_
    assert (ens.left >= 0).sum() >= 10
    _check_statistics(est, X, y)
    np.testing.assert_allclose(
        est.feature_importances_, treeinner.total_gain(est).to_numpy(), rtol=1e-12
    )
    # the fit does not depend on the number of threads
    other = GBMRegressor(**{**est.get_params(), "n_jobs": 1}).fit(X, y)
    np.testing.assert_array_equal(other.ensemble_.feature, ens.feature)
    np.testing.assert_array_equal(other.ensemble_.value, ens.value)


# ---------------------------------------------------------------------- (d) validation
@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, np.nan, np.inf, "0.1", True])
def test_bad_min_split_pvalue(bad):
    X, y = _null_data(0, n=50)
    with pytest.raises(InputError, match="min_split_pvalue"):
        GBMRegressor(split="pvalue", min_split_pvalue=bad).fit(X, y)


def test_bad_split():
    X, y = _null_data(0, n=50)
    with pytest.raises(InputError, match="split must be one of.*pvalue"):
        GBMRegressor(split="p-value").fit(X, y)
