"""treeinner.booster with categorical features: partitions as LightGBM finds them, exact node
statistics and every method's identities, missing and unseen categories, pandas input, many
levels, UnbiasedGBM, bad codes."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner._format import CAT_SET_LEFT, NUMERIC
from treeinner.booster import GBMClassifier, GBMRegressor, _train
from treeinner.booster import _estimators as E
from treeinner.kernels import histogram as K

from .test_booster import _check_statistics

LAM = 1.5
LR = 0.3
# categorical settings that let small data sets split (LightGBM's defaults need 100 rows per
# group and 200 per node)
CAT = {"min_data_per_group": 10, "cat_smooth": 5.0, "cat_l2": 1.0}


def _left_set(ens, node):
    """The categories of node ``node``'s bitset."""
    w = ens.cat_words[ens.cat_offsets[node] : ens.cat_offsets[node + 1]]
    bits = np.unpackbits(w.view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def _right_at_every_split_on(ens, leaves, feature):
    """Check that every path to the leaves ``leaves`` (rows x trees) goes right at the splits
    on ``feature``; returns how many such splits the paths pass."""
    parent = np.full(ens.n_nodes, -1)
    inner = np.flatnonzero(ens.left >= 0)
    parent[ens.left[inner]] = inner
    parent[ens.right[inner]] = inner
    seen = 0
    for t in range(ens.n_trees):
        for leaf in np.unique(leaves[:, t]):
            node = ens.tree_offsets[t] + leaf  # the native booster's leaf ids are local nodes
            while parent[node] >= 0:
                up = parent[node]
                if ens.feature[up] == feature:
                    assert ens.right[up] == node
                    seen += 1
                node = up
    return seen


def _leaf_groups(ens, X):
    """Per tree, the training rows grouped by the leaf they reach (a partition of the rows,
    whatever the node order), with the leaf's value."""
    leaves = ens.leaf_index(X)
    out = []
    for t in range(ens.n_trees):
        nodes = np.arange(ens.tree_offsets[t], ens.tree_offsets[t + 1])
        node_of = {ens.leaf_id[k]: k for k in nodes[ens.left[nodes] < 0]}
        groups = {}
        for leaf in np.unique(leaves[:, t]):
            rows = tuple(np.flatnonzero(leaves[:, t] == leaf).tolist())
            groups[rows] = ens.value[node_of[leaf]]
        out.append(groups)
    return out


def _cat_data(n=1600, seed=1):
    rng = np.random.default_rng(seed)
    c0 = rng.integers(0, 8, n)
    c1 = rng.integers(0, 6, n)
    eff0 = np.array([0.0, 2, -1, 3, 0.5, -2, 1, 4])
    eff1 = np.array([1.0, -1, 0.3, 2, -2, 0])
    y = eff0[c0] + eff1[c1] * (c0 % 2) + 0.1 * rng.standard_normal(n)
    return np.column_stack([c0, c1]).astype(float), y


# ---------------------------------------------------------------------- (a) LightGBM
@pytest.mark.parametrize("leaves, rounds", [(2, 1), (2, 4), (4, 3)])
def test_partitions_match_lightgbm(leaves, rounds):
    """On two categorical features with distinct effects per level, the native booster and
    LightGBM (sorted search on both sides: max_cat_to_onehot 1; cat_l2 0 so that LightGBM's
    leaf values are -lr G / (H + lambda_l2); cat_smooth, min_data_per_group, max_cat_threshold
    equal) find the same partitions and leaf values, tree by tree."""
    lgb = pytest.importorskip("lightgbm")
    X, y = _cat_data()
    sm, mdg = 5.0, 20
    params = {
        "objective": "regression",
        "num_leaves": leaves,
        "max_depth": 2,
        "learning_rate": LR,
        "lambda_l2": LAM,
        "cat_l2": 0.0,
        "cat_smooth": sm,
        "max_cat_to_onehot": 1,
        "min_data_per_group": mdg,
        "max_cat_threshold": 32,
        "min_data_in_leaf": 1,
        "min_sum_hessian_in_leaf": 0.0,
        "min_data_in_bin": 1,
        "verbose": -1,
        "num_threads": 1,
    }
    bst = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[0, 1]), rounds)
    ref = treeinner.from_model(bst)
    est = GBMRegressor(
        n_estimators=rounds,
        learning_rate=LR,
        num_leaves=leaves,
        max_depth=2,
        reg_lambda=LAM,
        cat_l2=0.0,
        cat_smooth=sm,
        max_cat_to_onehot=1,
        min_data_per_group=mdg,
        max_cat_threshold=32,
        min_child_weight=0.0,
        categorical_features=[0, 1],
    ).fit(X, y)
    ens = est.ensemble_
    assert ens.n_trees == ref.n_trees == rounds and ens.n_nodes == ref.n_nodes
    inner = ens.left >= 0
    assert np.all(ens.split_type[inner] == CAT_SET_LEFT)
    # the root's left set is LightGBM's (both scan the sorted categories from the same end)
    assert _left_set(ens, 0) == _left_set(ref, 0) and len(_left_set(ens, 0)) > 1
    # every tree cuts the training rows into the same leaves with the same values (a child's
    # set may be stored as its complement: the two scans' equal-gain candidates)
    for mine, theirs in zip(_leaf_groups(ens, X), _leaf_groups(ref, X)):
        assert mine.keys() == theirs.keys()
        for rows, v in mine.items():
            assert v == pytest.approx(theirs[rows], rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(ens.predict_margin(X), bst.predict(X), rtol=1e-6, atol=1e-7)


def test_one_hot_matches_lightgbm():
    """Three levels and max_cat_to_onehot 4 on both: one level against the rest."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(3)
    c = rng.integers(0, 3, 900)
    y = np.array([0.0, 3.0, 1.0])[c] + 0.2 * rng.standard_normal(900)
    X = c[:, None].astype(float)
    params = {
        "objective": "regression",
        "num_leaves": 2,
        "learning_rate": LR,
        "lambda_l2": LAM,
        "max_cat_to_onehot": 4,
        "min_data_in_leaf": 1,
        "min_sum_hessian_in_leaf": 0.0,
        "min_data_in_bin": 1,
        "verbose": -1,
        "num_threads": 1,
    }
    bst = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[0]), 2)
    ref = treeinner.from_model(bst)
    est = GBMRegressor(
        n_estimators=2,
        learning_rate=LR,
        max_depth=1,
        reg_lambda=LAM,
        max_cat_to_onehot=4,
        min_child_weight=0.0,
        categorical_features=[0],
    ).fit(X, y)
    ens = est.ensemble_
    for t in range(2):
        root = ens.tree_offsets[t]
        assert len(_left_set(ens, root)) == 1
        assert _left_set(ens, root) == _left_set(ref, ref.tree_offsets[t])
    np.testing.assert_allclose(ens.predict_margin(X), bst.predict(X), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- (b) identities
def _mixed(n=900, seed=0, nan=0.05):
    """A numeric signal, a numeric noise column, a 12-level categorical signal and a 40-level
    categorical noise column, with missing values in every column."""
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(n)
    x1 = rng.standard_normal(n)
    c2 = rng.integers(0, 12, n).astype(float)
    c3 = rng.integers(0, 40, n).astype(float)
    eff = rng.normal(0, 1.5, 12)
    y = x0 + eff[c2.astype(int)] + 0.3 * rng.standard_normal(n)
    X = np.column_stack([x0, x1, c2, c3])
    X[rng.random(X.shape) < nan] = np.nan
    return X, y


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("split", ["gain", "unbiased"])
def test_identities_hold_with_categorical_splits(kind, split):
    """Exact statistics (recomputed by routing the training rows through the common format),
    Prop. 3 (TreeInner with PreDecomp on the training rows = total gain) and local accuracy
    of PreDecomp and TreeSHAP, for squared error, logistic and softmax."""
    X, y = _mixed(seed=2)
    kw = {"n_estimators": 5, "max_depth": 4, "learning_rate": LR, "reg_lambda": LAM, **CAT}
    kw |= {"split": split, "categorical_features": [2, 3], "random_state": 0}
    if kind == "regression":
        est = GBMRegressor(**kw)
    else:
        y = (y > 0.3).astype(int) if kind == "binary" else np.digitize(y, [-0.8, 0.8])
        est = GBMClassifier(**kw)
    est.fit(X, y)
    ens = est.ensemble_
    cat_nodes = (ens.left >= 0) & (ens.split_type == CAT_SET_LEFT)
    assert cat_nodes.sum() >= 3 and set(ens.feature[cat_nodes].tolist()) <= {2, 3}
    assert np.all(ens.split_type[(ens.left >= 0) & np.isin(ens.feature, [0, 1])] == NUMERIC)
    assert np.all(np.isnan(ens.threshold[cat_nodes]))
    _check_statistics(est, X, y.astype(float))
    ti = treeinner.tree_inner(est, X, y, attribution="predecomp")
    tg = treeinner.total_gain(est)
    if kind == "multiclass":
        ti, tg = ti["total"], tg["total"]
    np.testing.assert_allclose(ti.to_numpy(), tg.to_numpy(), rtol=1e-9, atol=1e-9)
    assert tg.iloc[2] > 0.1 * tg.abs().max()  # the categorical signal is used
    margin = ens.predict_margin(X)
    pdc = treeinner.predecomp(est, X)
    sh = treeinner.tree_shap(est, X[:120])
    if kind == "multiclass":
        np.testing.assert_allclose(pdc.values.sum(axis=1) + pdc.bias, margin, rtol=1e-10)
        np.testing.assert_allclose(
            sh.values.sum(axis=1) + sh.bias, margin[:120], rtol=1e-9, atol=1e-12
        )
    else:
        np.testing.assert_allclose(pdc.values.sum(axis=1) + pdc.bias[0], margin, rtol=1e-10)
        np.testing.assert_allclose(
            sh.values.sum(axis=1) + sh.bias[0], margin[:120], rtol=1e-9, atol=1e-12
        )
    # the other methods run on the categorical model
    ug = treeinner.unbiased_gain(est, X, y, random_state=0)
    assert np.all(np.isfinite(ug.to_numpy(dtype=float)))


def test_sample_weights_subsample_and_best_first():
    X, y = _mixed(seed=4)
    w = np.random.default_rng(1).uniform(0.2, 2.0, X.shape[0])
    est = GBMRegressor(
        n_estimators=6,
        num_leaves=9,
        max_depth=None,
        subsample=0.7,
        colsample_bytree=0.75,
        learning_rate=LR,
        reg_lambda=LAM,
        categorical_features=[2, 3],
        random_state=3,
        **CAT,
    ).fit(X, y, sample_weight=w)
    assert (est.ensemble_.split_type == CAT_SET_LEFT).sum() >= 2
    _check_statistics(est, X, y, w)
    np.testing.assert_allclose(
        est.feature_importances_, treeinner.total_gain(est).to_numpy(), rtol=1e-12
    )


# ---------------------------------------------------------------------- (c) NaN and unseen
def _objective(name, n_out=1):
    return E._objective(name, n_out)


def _train_direct(X, y, cat, evals=(), **kw):
    """Train through ``_train.train`` (its result holds the training margins, rows routed by
    their bins)."""
    cfg = E._GBMBase(**{**CAT, **kw})._config()
    obj = _objective("reg:squarederror")
    base = np.array([y.mean()])
    res = _train.train(
        X, y, np.ones(X.shape[0]), obj, base, cfg, np.random.default_rng(0), list(evals), cat
    )
    return res, base


def _route_trees(res, Xe, base):
    """Margins of ``Xe`` by the booster's own eval-set router (``add_tree``)."""
    F = np.tile(base, (Xe.shape[0], 1))
    for t in res.trees:
        K.add_tree(
            Xe, t.left, t.right, t.feature, t.threshold, t.default_left, t.value, F, 0, 1,
            t.split_type, t.cat_offsets, t.cat_words,
        )  # fmt: skip
    return F[:, 0]


def test_missing_and_unseen_categories_route_consistently():
    """Missing values are a category of the search: they go left where the partition puts the
    missing bin left (default_left 1), else right; codes never seen in training (and codes of
    categories with no rows at a node) go right. The booster's training-time routing (bins),
    its eval-set router (``add_tree``) and ``predict_margin`` of the common format agree."""
    rng = np.random.default_rng(5)
    n = 1500
    c = rng.integers(0, 10, n).astype(float)
    x = rng.standard_normal(n)
    eff = np.array([0.0, 1, -1, 2, 0.5, -2, 1.5, 3, -0.5, 0.2])
    y = np.where(np.isnan(c), 0, eff[np.nan_to_num(c).astype(int)]) + 0.5 * x
    miss = rng.random(n) < 0.15
    c[miss] = np.nan
    y[miss] = 4.0 + 0.5 * x[miss]  # missing: the largest effect, so it joins a side
    X = np.column_stack([c, x])
    Xe = X.copy()
    Xe[:200, 0] = rng.choice([10.0, 11.0, 37.0, 1000.0], 200)  # unseen codes
    Xe[200:300, 0] = np.nan
    res, base = _train_direct(
        X, y, [0], evals=[(Xe, y)], n_estimators=6, max_depth=3, learning_rate=LR
    )
    est = GBMRegressor(
        n_estimators=6, max_depth=3, learning_rate=LR, categorical_features=[0], **CAT
    ).fit(X, y, eval_set=[(Xe, y)])
    ens = est.ensemble_
    np.testing.assert_allclose(res.margin[:, 0], ens.predict_margin(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(_route_trees(res, Xe, base), ens.predict_margin(Xe), atol=1e-12)
    np.testing.assert_allclose(_route_trees(res, X, base), res.margin[:, 0], atol=1e-12)
    cat_nodes = np.flatnonzero((ens.left >= 0) & (ens.split_type == CAT_SET_LEFT))
    assert ens.default_left[cat_nodes].any()  # missing values went left somewhere
    assert not ens.default_left[cat_nodes].all()
    # unseen codes go right at every categorical node: the same leaves as a code no set holds
    other = Xe[:200].copy()
    other[:, 0] = 10.0
    np.testing.assert_array_equal(ens.leaf_index(Xe[:200]), ens.leaf_index(other))
    for node in cat_nodes:
        assert max(_left_set(ens, node), default=-1) <= 9
    # the loss recorded on the eval set is the loss of predict_margin
    expected = 0.5 * np.mean((ens.predict_margin(Xe) - y) ** 2)
    assert est.evals_result_["validation_0"]["loss"][-1] == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------- (d) pandas
def test_pandas_categorical_with_string_levels(tmp_path):
    rng = np.random.default_rng(7)
    n = 1200
    cities = np.array(["Oslo", "Lima", "Pune", "Kyiv", "Baku", "Doha", "Riga"])
    eff = dict(zip(cities, [0.0, 2.0, -1.0, 1.0, 3.0, -2.0, 0.5]))
    city = rng.choice(cities, n)
    x = rng.standard_normal(n)
    y = np.array([eff[c] for c in city]) + x + 0.3 * rng.standard_normal(n)
    plan = rng.choice(["basic", "pro"], n)
    X = pd.DataFrame(
        {
            "x": x,
            "city": pd.Categorical(city),
            "plan": plan,  # strings, declared categorical by name
        }
    )
    X.loc[rng.random(n) < 0.05, "city"] = np.nan
    est = GBMRegressor(
        n_estimators=8, max_depth=3, learning_rate=LR, categorical_features=["city", "plan"], **CAT
    )
    with pytest.raises(
        TypeError, match=r"Categorical \(pandas category\) columns \['city'\] are not in"
    ):
        GBMRegressor(categorical_features=["plan"]).fit(X, y)
    est.fit(X, y)
    ens = est.ensemble_
    assert ens.feature_names == ("x", "city", "plan") and ens.named
    assert list(est.feature_names_in_) == ["x", "city", "plan"]
    assert ens.categories[1] == sorted(cities.tolist())  # pandas' own categories, sorted
    assert ens.categories[2] == ["basic", "pro"]
    assert (ens.split_type[ens.feature == 1] == CAT_SET_LEFT).all()
    assert (ens.feature == 1).sum() >= 2
    ti = treeinner.tree_inner(est, X, y)
    assert list(ti.index) == ["x", "city", "plan"]
    np.testing.assert_allclose(ti.to_numpy(), treeinner.total_gain(est).to_numpy(), rtol=1e-9)
    margin = est.predict(X)
    # "auto" (the default) finds the pandas categorical column; plan is then a string column,
    # which must be declared
    with pytest.raises(TypeError, match="plan"):
        GBMRegressor(n_estimators=2).fit(X, y)
    auto = GBMRegressor(n_estimators=8, max_depth=3, learning_rate=LR, **CAT)
    auto.fit(X.assign(plan=(plan == "pro").astype(float)), y)
    assert auto.ensemble_.categories.keys() == {1}
    # values are matched by value, not by the frame's codes: columns reordered, categories
    # listed in another order, the category dtype dropped
    shuffled = X[["plan", "city", "x"]].copy()
    shuffled["city"] = shuffled["city"].cat.reorder_categories(list(cities))
    np.testing.assert_allclose(est.predict(shuffled), margin, rtol=0, atol=0)
    as_strings = X.assign(city=X["city"].astype(object))
    np.testing.assert_allclose(est.predict(as_strings), margin, rtol=0, atol=0)
    # an unseen city is warned about and goes right at every split on city, as NaN need not
    new = X.iloc[:40].copy()
    new["city"] = pd.Categorical(["Quito"] * 40)
    with pytest.warns(UserWarning, match="Quito"):
        leaves = ens.leaf_index(new)
    assert _right_at_every_split_on(ens, leaves, 1) > 0
    # saved and loaded with its categorical splits and categories
    path = tmp_path / "model.npz"
    ens.save(path)
    back = treeinner.load(path)
    assert back.categories == ens.categories
    np.testing.assert_array_equal(back.cat_words, ens.cat_words)
    np.testing.assert_allclose(back.predict_margin(shuffled), margin, rtol=0, atol=0)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(shuffled), margin)
    # the eval set is coded with the training categories
    est.set_params(n_estimators=3).fit(X, y, eval_set=[(shuffled, y)])
    loss = 0.5 * np.mean((est.predict(shuffled) - y) ** 2)
    assert est.evals_result_["validation_0"]["loss"][-1] == pytest.approx(loss, rel=1e-12)


# ---------------------------------------------------------------------- (e) many levels
def test_many_levels_and_a_high_cardinality_noise_column():
    """500 levels with effects, a 2000-level noise column: with max_bins 256 the 254 most
    frequent levels of each get a bin and the rest share one; with max_bins 1024, every level of
    the 500 its own bin (uint16 bins). Routing agrees with training, Prop. 3 holds, and on
    held-out rows TreeInner scores the noise column at most a small fraction of the signal."""
    rng = np.random.default_rng(11)
    n = 12000
    sig = rng.zipf(1.3, n) % 500  # skewed: some levels frequent, many rare
    noise = rng.integers(0, 2000, n)
    eff = rng.normal(0, 1.0, 500)
    y = eff[sig] + 0.5 * rng.standard_normal(n)
    X = np.column_stack([sig, noise, rng.standard_normal(n)]).astype(float)
    tr, va = slice(0, 8000), slice(8000, None)
    for max_bins in (256, 1024):
        res, base = _train_direct(
            X[tr], y[tr], [0, 1], n_estimators=10, max_depth=4, learning_rate=LR,
            max_bins=max_bins,
        )  # fmt: skip
        est = GBMRegressor(
            n_estimators=10,
            max_depth=4,
            learning_rate=LR,
            max_bins=max_bins,
            categorical_features=[0, 1],
            **CAT,
        ).fit(X[tr], y[tr])
        ens = est.ensemble_
        np.testing.assert_allclose(res.margin[:, 0], ens.predict_margin(X[tr]), atol=1e-12)
        np.testing.assert_allclose(_route_trees(res, X[va], base), ens.predict_margin(X[va]))
        on_sig = np.flatnonzero((ens.split_type != 0) & (ens.feature == 0))
        left_sizes = [len(_left_set(ens, k)) for k in on_sig]
        if max_bins == 256:  # the shared bin of rare levels goes left as a whole somewhere
            assert max(left_sizes) > 32
        else:  # a bin per level: at most max_cat_threshold levels left
            assert 1 < max(left_sizes) <= 32
        ti = treeinner.tree_inner(est, X[tr], y[tr])
        np.testing.assert_allclose(
            ti.to_numpy(), treeinner.total_gain(est).to_numpy(), rtol=1e-9, atol=1e-9
        )
        held = treeinner.tree_inner(est, X[va], y[va]).to_numpy()
        assert held[0] > 0 and held[1] < 0.05 * held[0]
        assert est.score(X[va], y[va]) > 0.5


def test_binning_of_categories():
    """One bin per category in code order up to max_bins - 1 codes; beyond, the max_bins - 2
    most frequent codes (ties: the smaller code) in code order and one shared bin."""
    X = np.array([[5.0], [5], [9], [np.nan], [2], [9], [9], [7], [5], [2]])
    b = _train.bin_data(X, 256, np.array([1], np.uint8))
    np.testing.assert_array_equal(b.cat_codes[0], [2, 5, 7, 9])
    np.testing.assert_array_equal(b.bins[:, 0], [1, 1, 3, 4, 0, 3, 3, 2, 1, 0])
    assert b.n_bins[0] == 4
    b = _train.bin_data(X, 4, np.array([1], np.uint8))  # 3 value bins: 2 codes keep theirs
    # counts: 5 -> 3, 9 -> 3, 2 -> 2, 7 -> 1: 5 and 9 kept (bins 0, 1), 2 and 7 share bin 2
    np.testing.assert_array_equal(b.bins[:, 0], [0, 0, 1, 3, 2, 1, 1, 2, 0, 2])
    np.testing.assert_array_equal(b.bins, b.bins_t.T)


# ---------------------------------------------------------------------- (f) unbiased
def test_unbiased_gain_of_categorical_noise_is_zero_in_expectation():
    """A 30-level categorical feature independent of the target: its split gain at the root is
    always positive (the bias UnbiasedGBM corrects); with split="unbiased" its score_3 (the
    feature importance, counted split or not) averages 0 over data sets (Theorem 2)."""
    gains, unbiased = [], []
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        n = 600
        X = np.column_stack([rng.integers(0, 30, n), rng.standard_normal(n)]).astype(float)
        X[:, 1] = 0.0  # a constant: never split
        y = rng.standard_normal(n)
        kw = {"n_estimators": 1, "max_depth": 1, "categorical_features": [0], "random_state": 0}
        kw |= {"min_data_per_group": 5, "cat_smooth": 1.0, "cat_l2": 0.0}
        gains.append(GBMRegressor(**kw).fit(X, y).feature_importances_[0])
        est = GBMRegressor(split="unbiased", min_split_gain=-1e300, **kw).fit(X, y)
        unbiased.append(est.feature_importances_[0])
        assert est.ensemble_.split_type[0] == CAT_SET_LEFT
    gains, unbiased = np.array(gains), np.array(unbiased)
    assert gains.min() > 0
    se = unbiased.std(ddof=1) / np.sqrt(unbiased.size)
    assert abs(unbiased.mean()) < 3 * se
    assert gains.mean() > 5 * se


def test_unbiased_mode_prefers_signal_categories():
    X, y = _mixed(n=1500, seed=6)
    est = GBMRegressor(
        n_estimators=10,
        num_leaves=8,
        max_depth=None,
        learning_rate=LR,
        split="unbiased",
        categorical_features=[2, 3],
        random_state=1,
        **CAT,
    ).fit(X, y)
    imp = est.feature_importances_
    assert imp[2] > 0 and imp[0] > 0
    assert imp[3] < 0.05 * imp[2] and imp[1] < 0.05 * imp[0]
    ens = est.ensemble_
    assert np.all(ens.feature[(ens.left >= 0) & (ens.split_type == CAT_SET_LEFT)] == 2)


# ---------------------------------------------------------------------- (g) bad input
@pytest.mark.parametrize("bad", [-1.0, 2.5, np.inf, 2.0**31])
def test_bad_category_codes(bad):
    X, y = _cat_data(n=200)
    Xb = X.copy()
    Xb[7, 1] = bad
    with pytest.raises(ValueError, match="Categorical feature 1 .*not category codes"):
        GBMRegressor(n_estimators=2, categorical_features=[0, 1]).fit(Xb, y)
    with pytest.raises(ValueError, match=r"eval_set\[0\]: Categorical feature"):
        GBMRegressor(n_estimators=2, categorical_features=[0, 1]).fit(X, y, eval_set=[(Xb, y)])
    frame = pd.DataFrame(Xb, columns=["a", "b"])
    with pytest.raises(ValueError, match="Categorical feature 'b'"):
        GBMRegressor(n_estimators=2, categorical_features=["b"]).fit(frame, y)
    # the same column is fine as a numeric feature
    GBMRegressor(n_estimators=2, categorical_features=[0]).fit(Xb, y)


def test_bad_categorical_features_argument():
    X, y = _cat_data(n=200)
    with pytest.raises(ValueError, match="outside"):
        GBMRegressor(categorical_features=[2]).fit(X, y)
    with pytest.raises(ValueError, match="no column names"):
        GBMRegressor(categorical_features=["a"]).fit(X, y)
    with pytest.raises(ValueError, match="not in X"):
        GBMRegressor(categorical_features=["z"]).fit(pd.DataFrame(X, columns=["a", "b"]), y)
    with pytest.raises(ValueError, match="categorical_features must be"):
        GBMRegressor(categorical_features="all").fit(X, y)
    with pytest.raises(ValueError, match="cat_smooth"):
        GBMRegressor(cat_smooth=-1.0, categorical_features=[0]).fit(X, y)
    with pytest.raises(ValueError, match="max_cat_threshold"):
        GBMRegressor(max_cat_threshold=0, categorical_features=[0]).fit(X, y)
    # a boolean mask and negative indices name the same features
    a = GBMRegressor(n_estimators=3, categorical_features=[True, False], **CAT).fit(X, y)
    b = GBMRegressor(n_estimators=3, categorical_features=[-2], **CAT).fit(X, y)
    np.testing.assert_array_equal(a.ensemble_.cat_words, b.ensemble_.cat_words)
    assert a.ensemble_.params["categorical_features"] == [0]


def test_missing_alone_against_every_category():
    """One-hot search that sends the missing bin alone left (the feature's bins all in use,
    max_bins 4): an empty set of codes with default_left 1."""
    rng = np.random.default_rng(8)
    c = rng.integers(0, 3, 600).astype(float)
    y = 0.1 * c + 0.1 * rng.standard_normal(600)
    c[:100] = np.nan
    y[:100] = 5.0
    X = c[:, None]
    est = GBMRegressor(
        n_estimators=2, max_depth=1, max_bins=4, categorical_features=[0], **CAT
    ).fit(X, y)
    ens = est.ensemble_
    assert ens.split_type[0] == CAT_SET_LEFT and ens.default_left[0] == 1
    assert _left_set(ens, 0) == set()
    leaves = ens.leaf_index(np.array([[np.nan], [0.0], [1.0], [2.0], [7.0]]))
    assert leaves[0, 0] == ens.left[0] and np.all(leaves[1:, 0] == ens.right[0])
    _check_statistics(est, X, y)


@pytest.mark.parametrize("seed", range(5))
def test_sorted_search_finds_the_best_partition(seed):
    """With lambda = cat_l2 = cat_smooth = 0, no group or size limits and every prefix
    scanned, the best of G_L^2/H_L + G_R^2/H_R over all 2^8 - 1 partitions of 9 categories (8
    codes and missing) is a prefix of the order by G/H (Fisher), so the kernel's gain is the
    brute-force maximum; ``per_feature`` returns it for the categorical feature, and
    ``cat_left_bins`` the set that scores it."""
    rng = np.random.default_rng(seed)
    nbin = 9
    pool = np.zeros(nbin * 3)
    pool[0::3] = rng.normal(0, 5, nbin)  # g
    pool[1::3] = rng.uniform(1, 10, nbin)  # h
    pool[2::3] = rng.integers(1, 20, nbin)  # count
    g, h = pool[0::3], pool[1::3]
    best = -np.inf
    for bits in range(1, 2 ** (nbin - 1)):  # bin 8 always right: each partition once
        left = np.array([(bits >> b) & 1 for b in range(nbin)], dtype=bool)
        gl, hl = g[left].sum(), h[left].sum()
        best = max(best, gl**2 / hl + (g.sum() - gl) ** 2 / (h.sum() - hl))
    catp = np.zeros(K.N_CATP)
    catp[K.C_MAX_ONEHOT] = 0
    catp[K.C_MAX_THRESHOLD] = 100
    catp[K.C_MIN_GROUP] = 1
    res_i = np.empty((1, K.N_IRES), dtype=np.int64)
    res_f = np.empty((1, K.N_FRES))
    pi = np.empty((1, K.N_IRES), dtype=np.int64)
    pf = np.empty((1, K.N_FRES))
    slots = np.array([0])
    args = (pool, slots, np.empty((1, 1, 3)), 1, nbin, 3, np.array([0]), np.array([0]))
    K.find_splits(
        *args, np.array([nbin - 1]), 0.0, 0.0, 1.0, False, res_i, res_f, 1,
        np.array([1], np.uint8), catp, (pi, pf),
    )  # fmt: skip
    parent = g.sum() ** 2 / h.sum()
    assert res_i[0, K.R_CAT] in (K.CAT_LOW, K.CAT_HIGH)
    assert res_f[0, K.R_GAIN] == pytest.approx(best - parent, rel=1e-12)
    assert pf[0, K.R_GAIN] == res_f[0, K.R_GAIN]
    masks = np.zeros((1, nbin), dtype=np.uint8)
    K.cat_left_bins(
        pool, slots, 1, nbin, np.array([0]), np.array([0]), np.array([nbin - 1]), catp,
        res_i[:, K.R_CAT].copy(), res_i[:, K.R_BIN].copy(), masks,
    )  # fmt: skip
    left = masks[0] == 1
    assert res_i[0, K.R_DEFAULT_LEFT] == masks[0, nbin - 1]
    gl, hl = g[left].sum(), h[left].sum()
    got = gl**2 / hl + (g.sum() - gl) ** 2 / (h.sum() - hl)
    assert got == pytest.approx(best, rel=1e-12)
