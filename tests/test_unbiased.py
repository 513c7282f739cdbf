"""Unbiased gain: a node-by-node pure-Python reference, draws, Theorem 2, API and errors."""

from __future__ import annotations

import json
import math
import warnings

import numba
import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import unbiased as U
from treeinner.kernels import unbiased as KU

xgb = pytest.importorskip("xgboost")


# ---------------------------------------------------------------------- the reference
def _trees(booster):
    """The trees of an XGBoost model's JSON, as plain lists."""
    model = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]
    return model["trees"], model["tree_info"]


def _leaf_of(booster, X):
    """XGBoost's own leaf of every row in every tree (node ids within the tree)."""
    return booster.predict(xgb.DMatrix(X, missing=np.nan), pred_leaf=True).reshape(X.shape[0], -1)


def _below(tree, u):
    """All leaves under node u of a JSON tree."""
    left, right = tree["left_children"], tree["right_children"]
    if left[u] < 0:
        return [u]
    return _below(tree, left[u]) + _below(tree, right[u])


def _dfs_leaves(tree):
    return _below(tree, 0)


def _staged_margins(booster, X, base, rounds):
    """Margins before every round: the base margin, then XGBoost's own predictions."""
    out = [np.tile(np.asarray(base, dtype=np.float64), (X.shape[0], 1))]
    for m in range(1, rounds):
        f = booster.inplace_predict(X, iteration_range=(0, m), predict_type="margin")
        out.append(np.asarray(f, dtype=np.float64).reshape(X.shape[0], -1))
    return out


def _grad(objective, y, F, c):
    """Gradient and hessian of one row (column c), as the objective defines them."""
    if objective == "reg:squarederror":
        return F[c] - y, 1.0
    if objective == "binary:logistic":
        p = 1.0 / (1.0 + math.exp(-F[c]))
        return p - y, max(p * (1.0 - p), 1e-16)
    # softmax
    mx = max(F)
    s = sum(math.exp(v - mx) for v in F)
    p = math.exp(F[c] - mx) / s
    return p - (1.0 if int(y) == c else 0.0), max(2.0 * p * (1.0 - p), 1e-16)


def reference(booster, objective, lam, eta, X, y, w=None, draws=None, n_draws=1, min_samples=1,
              training=None):  # fmt: skip
    """Per-split unbiased gain, node by node with explicit row sets.

    XGBoost keeps eta in float32, so leaves are float32(eta) times the leaf weight (divided by
    num_parallel_tree).
    ``draws[t_global][u][d]`` are the held-out rows of draw d (u = 0 node, 1 left, 2 right);
    without draws the exact expectation of squared error (the mean over the whole set).
    Returns a list of (tree, node, unbiased gain, k, n_node, n_left, n_right).
    """
    trees, tree_info = _trees(booster)
    n_class = max(tree_info) + 1
    config = json.loads(booster.save_config())["learner"]["gradient_booster"]
    parallel = int(config["gbtree_model_param"]["num_parallel_tree"])
    per_round = n_class * parallel
    # XGBoost shrinks each of the parallel trees by eta / num_parallel_tree, in float32
    lr = float(np.float32(np.float32(eta) / np.float32(parallel)))
    rounds = len(trees) // per_round
    base = treeinner.from_model(booster).base_margin
    w = np.ones(X.shape[0]) if w is None else w
    margins = _staged_margins(booster, X, base, rounds)
    leaf = _leaf_of(booster, X)
    if training is not None:
        Xt, yt = training
        tmargins = _staged_margins(booster, Xt, base, rounds)
        tleaf = _leaf_of(booster, Xt)
    out = []
    offset = 0
    for ti, tree in enumerate(trees):
        r, c = ti // per_round, tree_info[ti]
        left, right = tree["left_children"], tree["right_children"]
        n_nodes = len(left)

        def rows(u, lf=leaf, ti=ti, tree=tree):
            under = set(_below(tree, u))
            return [i for i in range(lf.shape[0]) if lf[i, ti] in under]

        # training sums: from the dump, or from the training rows
        G = {}
        for u in range(n_nodes):
            if training is not None:
                ru = rows(u, tleaf)
                G[u] = sum(_grad(objective, yt[i], tmargins[r][i], c)[0] for i in ru)
            elif left[u] < 0:
                v = float(np.float32(tree["split_conditions"][u]))  # JSON prints float32s
                h = float(np.float32(tree["sum_hessian"][u]))
                G[u] = -v * (h + lam) / lr
        if training is None:
            for u in reversed(range(n_nodes)):  # children have larger ids than parents
                if left[u] >= 0:
                    G[u] = G[left[u]] + G[right[u]]
        gh = {i: _grad(objective, y[i], margins[r][i], c) for i in range(X.shape[0])}
        for u in range(n_nodes):
            if left[u] < 0:
                continue
            sets = [rows(u), rows(left[u]), rows(right[u])]
            k = min(len(sets[1]), len(sets[2]))
            rho = [0.0, 0.0, 0.0]
            if k >= min_samples and k > 0:
                for q in range(3):
                    if draws is None:
                        gs = sum(w[i] * gh[i][0] for i in sets[q])
                        hs = sum(w[i] * gh[i][1] for i in sets[q])
                        rho[q] = gs / hs
                        continue
                    acc = 0.0
                    for d in range(n_draws):
                        drawn = draws[offset + u][q][d]
                        assert len(drawn) == k and len(set(drawn)) == k
                        assert set(drawn) <= set(sets[q])
                        gs = 0.0
                        hs = 0.0
                        for i in drawn:
                            gs += w[i] * gh[i][0]
                            hs += w[i] * gh[i][1]
                        acc += gs / hs if hs != 0.0 else 0.0
                    rho[q] = acc / n_draws
            ub = G[left[u]] * rho[1] + G[right[u]] * rho[2] - G[u] * rho[0]
            out.append((ti, u, ub if k >= min_samples else 0.0, k, *map(len, sets)))
        offset += n_nodes
    return out


def _recorded(ens, X, y, w, n_draws, min_samples, seed):
    """Our kernel's drawn rows, as draws[node][u][d] -> list of rows."""
    rho, kk, count, rec = U._drawn_ratios(ens, X, y, w, n_draws, min_samples, seed, record=True)
    draws = []
    for n in range(ens.n_nodes):
        k = kk[n]
        draws.append([[list(rec[n, q, d, :k]) for d in range(n_draws)] for q in range(3)])
    return draws


def _model(objective, seed, n=600, rounds=6, depth=3, lam=1.0, eta=0.3, n_class=3, parallel=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 3] = rng.integers(0, 4, size=2 * n)  # few distinct values: rows equal to thresholds
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if objective == "binary:logistic":
        y = (s + rng.logistic(size=2 * n) > 0).astype(float)
    elif objective == "multi:softprob":
        y = np.digitize(s + rng.normal(size=2 * n), [-0.7, 0.7]).astype(float)
    else:
        y = s + rng.normal(size=2 * n)
    params = {"objective": objective, "max_depth": depth, "eta": eta, "lambda": lam, "seed": 0,
              "base_score": 0.3 if objective != "multi:softprob" else 0.5}  # fmt: skip
    if objective == "multi:softprob":
        params["num_class"] = n_class
    if parallel > 1:
        params.update(num_parallel_tree=parallel, colsample_bynode=0.6)
    b = xgb.train(params, xgb.DMatrix(X[:n], y[:n]), rounds)
    return b, X[:n], y[:n], X[n:], y[n:]


def _per_split(res):
    return res[["tree", "node", "unbiased_gain", "k", "n_node", "n_left", "n_right"]]


@pytest.mark.parametrize("lam", [0.0, 1.0, 5.0])
@pytest.mark.parametrize("use_train", [False, True])
def test_reference_squared_error_exact(lam, use_train):
    b, Xt, yt, X, y = _model("reg:squarederror", seed=int(lam * 10) + use_train, lam=lam)
    train = (Xt, yt) if use_train else None
    ref = reference(b, "reg:squarederror", lam, 0.3, X, y, training=train)
    got = treeinner.unbiased_gain(b, X, y, per_split=True, reference=train)
    ref = np.array(ref)
    np.testing.assert_array_equal(got[["tree", "node", "k", "n_node", "n_left", "n_right"]],
                                  ref[:, [0, 1, 3, 4, 5, 6]].astype(np.int64))  # fmt: skip
    np.testing.assert_allclose(got["unbiased_gain"], ref[:, 2], rtol=1e-10, atol=1e-10)
    # the per-feature sums are the per-split sums
    series = treeinner.unbiased_gain(b, X, y, reference=train)
    by_feature = got.groupby("feature")["unbiased_gain"].sum()
    np.testing.assert_allclose(series[by_feature.index], by_feature, rtol=1e-12)


@pytest.mark.parametrize("n_draws", [1, 3])
@pytest.mark.parametrize("min_samples", [1, 20])
@pytest.mark.parametrize("weighted", [False, True])
def test_reference_logistic_same_draws(n_draws, min_samples, weighted):
    b, _, _, X, y = _model("binary:logistic", seed=7 + n_draws + min_samples)
    ens = treeinner.from_model(b)
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=X.shape[0]) if weighted else None
    seed = np.uint64(12345)
    draws = _recorded(ens, X, y, w, n_draws, min_samples, seed)
    ref = np.array(reference(b, "binary:logistic", 1.0, 0.3, X, y, w, draws, n_draws,
                             min_samples))  # fmt: skip
    got = treeinner.unbiased_gain(b, X, y, n_draws=n_draws, min_samples=min_samples,
                                  random_state=12345, sample_weight=w, per_split=True)  # fmt: skip
    np.testing.assert_array_equal(got[["k", "n_node", "n_left", "n_right"]],
                                  ref[:, 3:].astype(np.int64))  # fmt: skip
    # same draws, same arithmetic: identical to the last bit
    np.testing.assert_array_equal(got["unbiased_gain"].to_numpy(), ref[:, 2])
    assert (got["k"] < min_samples).sum() == 0 or (
        got.loc[got["k"] < min_samples, "unbiased_gain"] == 0
    ).all()


def test_reference_softmax_same_draws():
    b, _, _, X, y = _model("multi:softprob", seed=3, rounds=4)
    ens = treeinner.from_model(b)
    draws = _recorded(ens, X, y, None, 2, 1, np.uint64(9))
    ref = np.array(reference(b, "multi:softprob", 1.0, 0.3, X, y, None, draws, 2))
    got = treeinner.unbiased_gain(b, X, y, n_draws=2, random_state=9, per_split=True)
    np.testing.assert_array_equal(got["unbiased_gain"].to_numpy(), ref[:, 2])
    np.testing.assert_array_equal(got["class"], got["tree"] % 3)
    per_class = treeinner.unbiased_gain(b, X, y, n_draws=2, random_state=9)
    assert list(per_class.columns) == ["class_0", "class_1", "class_2", "total"]
    sums = got.groupby(["feature", "class"])["unbiased_gain"].sum().unstack(fill_value=0.0)
    for c in range(3):
        np.testing.assert_allclose(
            per_class.loc[sums.index, f"class_{c}"], sums[c], rtol=1e-12, atol=1e-12
        )
    np.testing.assert_allclose(per_class["total"], per_class.iloc[:, :3].sum(axis=1))


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_reference_parallel_trees_share_round_gradients(objective):
    b, _, _, X, y = _model(objective, seed=5, rounds=3, parallel=3)
    ens = treeinner.from_model(b)
    assert ens.n_trees == 3 * 3 * (3 if objective == "multi:softprob" else 1)
    draws = _recorded(ens, X, y, None, 1, 1, np.uint64(2))
    ref = np.array(reference(b, objective, 1.0, 0.3, X, y, None, draws, 1))
    got = treeinner.unbiased_gain(b, X, y, random_state=2, per_split=True)
    np.testing.assert_array_equal(got["unbiased_gain"].to_numpy(), ref[:, 2])


# ---------------------------------------------------------------------- the draws
def test_draw_positions_uniform():
    """Every position of a slice is drawn with probability k/m (chi-square, seeded)."""
    m, k, reps = 23, 7, 4000
    counts = np.zeros(m)
    pairs = np.zeros((m, m))
    for d in range(reps):
        pos = KU.draw_positions(np.uint64(5), 3, 1, d, m, k)
        assert len(set(pos.tolist())) == k and pos.min() >= 0 and pos.max() < m
        counts[pos] += 1
        pairs[np.ix_(pos, pos)] += 1
    expected = reps * k / m
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 50.0  # 22 degrees of freedom: P(chi2 > 50) < 1e-3
    # pairs are uniform too (a k-subset, not k independent picks)
    off = pairs[~np.eye(m, dtype=bool)]
    exp_pair = reps * k * (k - 1) / (m * (m - 1))
    assert abs(off.mean() - exp_pair) < 1e-9 * exp_pair + 1e-9
    assert np.abs(off - exp_pair).max() < 6 * np.sqrt(exp_pair)


@pytest.mark.parametrize("m,k", [(10, 10), (10, 9), (10, 5), (10, 1), (1, 1)])
def test_draw_positions_sizes(m, k):
    pos = KU.draw_positions(np.uint64(1), 0, 0, 0, m, k)
    assert sorted(pos.tolist()) == sorted(set(pos.tolist())) and len(pos) == k
    if k == m:
        np.testing.assert_array_equal(pos, np.arange(m))


def test_draws_depend_on_every_key_part():
    base = KU.draw_positions(np.uint64(1), 2, 0, 0, 1000, 10)
    for args in [(np.uint64(2), 2, 0, 0), (np.uint64(1), 3, 0, 0), (np.uint64(1), 2, 1, 0),
                 (np.uint64(1), 2, 0, 1)]:  # fmt: skip
        assert not np.array_equal(KU.draw_positions(*args, 1000, 10), base)


def test_reproducible_and_thread_independent():
    b, _, _, X, y = _model("binary:logistic", seed=11, rounds=12)
    a = treeinner.unbiased_gain(b, X, y, random_state=3, per_split=True)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = treeinner.unbiased_gain(b, X, y, random_state=3, per_split=True)
    finally:
        numba.set_num_threads(threads)
    pd.testing.assert_frame_equal(a, one)
    other = treeinner.unbiased_gain(b, X, y, random_state=4, per_split=True)
    assert not np.array_equal(a["unbiased_gain"], other["unbiased_gain"])
    g1 = treeinner.unbiased_gain(b, X, y, random_state=np.random.default_rng(8))
    g2 = treeinner.unbiased_gain(b, X, y, random_state=np.random.default_rng(8))
    pd.testing.assert_series_equal(g1, g2)


def test_rounds_in_chunks_give_the_same_result(monkeypatch):
    b, _, _, X, y = _model("binary:logistic", seed=12, rounds=9)
    whole = treeinner.unbiased_gain(b, X, y, random_state=1, per_split=True)
    monkeypatch.setattr(U, "_CHUNK_BYTES", 1)  # one round per chunk
    pd.testing.assert_frame_equal(
        whole, treeinner.unbiased_gain(b, X, y, random_state=1, per_split=True)
    )


def test_more_draws_approach_the_exact_expectation():
    """Squared error with unequal weights is drawn; many draws approach the weighted ratio of
    the whole set only in the limit, but with equal weights the exact mode applies."""
    b, _, _, X, y = _model("reg:squarederror", seed=13)
    exact = treeinner.unbiased_gain(b, X, y, per_split=True)
    equal = treeinner.unbiased_gain(b, X, y, sample_weight=np.full(len(y), 2.5), per_split=True)
    pd.testing.assert_frame_equal(exact, equal)
    w = np.ones(len(y))
    w[0] = 1.0 + 1e-9  # not uniform: drawn
    few = treeinner.unbiased_gain(b, X, y, sample_weight=w, random_state=0, per_split=True)
    many = treeinner.unbiased_gain(b, X, y, sample_weight=w, n_draws=400, random_state=0,
                                   per_split=True)  # fmt: skip
    err_few = np.abs(few["unbiased_gain"] - exact["unbiased_gain"]).sum()
    err_many = np.abs(many["unbiased_gain"] - exact["unbiased_gain"]).sum()
    assert err_many < 0.25 * err_few


# ---------------------------------------------------------------------- Theorem 2
def _single_tree_sets(objective, n_sets=500, n=300, seed=0):
    """Unbiased gain and total gain per feature of one-tree models on fresh data sets.

    x0 carries the signal; x1 (continuous), x2 (6 categories as codes) and x3 (binary) are
    independent of the target and of each other."""
    rng = np.random.default_rng(seed)
    ub = np.zeros((n_sets, 4))
    tg = np.zeros((n_sets, 4))
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, "lambda": 1.0,
              "min_child_weight": 0.0 if objective == "reg:squarederror" else 0.1,
              "tree_method": "exact", "nthread": 1}  # fmt: skip
    for s in range(n_sets):
        X = np.column_stack([
            rng.normal(size=2 * n),
            rng.normal(size=2 * n),
            rng.integers(0, 6, size=2 * n).astype(float),
            rng.integers(0, 2, size=2 * n).astype(float),
        ])  # fmt: skip
        z = 0.3 * X[:, 0]
        if objective == "binary:logistic":
            y = (z + rng.logistic(size=2 * n) > 0).astype(float)
        else:
            y = z + rng.normal(size=2 * n)
        b = xgb.train(params, xgb.DMatrix(X[:n], y[:n]), 1)
        ens = treeinner.from_model(b, learning_rate=0.3, reg_lambda=1.0)
        ub[s] = treeinner.unbiased_gain(ens, X[n:], y[n:], random_state=s).to_numpy()
        tg[s] = treeinner.total_gain(ens).to_numpy()
    return ub, tg


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_theorem_2_noise_features_score_zero_in_expectation(objective):
    ub, tg = _single_tree_sets(objective)
    mean = ub.mean(axis=0)
    se = ub.std(axis=0, ddof=1) / np.sqrt(ub.shape[0])
    for j in (1, 2, 3):  # noise: within 3 standard errors of 0, but gain clearly positive
        assert abs(mean[j]) <= 3 * se[j], (j, mean[j], se[j])
        tse = tg[:, j].std(ddof=1) / np.sqrt(tg.shape[0])
        assert tg[:, j].mean() > 5 * tse
    assert mean[0] > 5 * se[0]  # the signal feature


# ---------------------------------------------------------------------- API
def test_per_split_frame():
    b, _, _, X, y = _model("binary:logistic", seed=21)
    df = treeinner.unbiased_gain(b, X, y, random_state=0, per_split=True)
    assert list(df.columns) == ["tree", "node", "feature", "threshold", "gain", "unbiased_gain",
                                "se", "p_value", "k", "n_node", "n_left", "n_right"]  # fmt: skip
    ens = treeinner.from_model(b)
    inner = ens.left >= 0
    # the training gain from the rebuilt sums is XGBoost's recorded gain (float32 there)
    np.testing.assert_allclose(df["gain"], ens.gain[inner], rtol=2e-3, atol=1e-3)
    np.testing.assert_array_equal(df["k"], np.minimum(df["n_left"], df["n_right"]))
    np.testing.assert_array_equal(df["n_node"], df["n_left"] + df["n_right"])
    np.testing.assert_array_equal(df["threshold"], ens.threshold[inner])
    assert set(df["feature"]) <= set(ens.feature_names)
    assert (df.groupby("tree")["n_node"].first() == len(y)).all()  # roots see every row


def test_categorical_threshold_is_nan():
    rng = np.random.default_rng(0)
    n = 800
    X = pd.DataFrame({"a": pd.Categorical(rng.integers(0, 5, 2 * n)), "b": rng.normal(size=2 * n)})
    y = (X["a"].cat.codes.to_numpy() % 2 + rng.normal(size=2 * n) > 0.5).astype(float)
    dm = xgb.DMatrix(X[:n], y[:n], enable_categorical=True)
    b = xgb.train({"objective": "binary:logistic", "max_depth": 2, "max_cat_to_onehot": 1}, dm, 3)
    df = treeinner.unbiased_gain(b, X[n:], y[n:], random_state=0, per_split=True)
    cat = df["feature"] == "a"
    assert cat.any() and df.loc[cat, "threshold"].isna().all()
    assert df.loc[~cat, "threshold"].notna().all()
    s = treeinner.unbiased_gain(b, X[n:], y[n:], random_state=0)
    assert list(s.index) == ["a", "b"] and s.name == "unbiased_gain"
    assert s["a"] > 0


def test_min_samples_zeroes_small_splits():
    b, _, _, X, y = _model("binary:logistic", seed=22, depth=5)
    df = treeinner.unbiased_gain(b, X, y, random_state=0, min_samples=15, per_split=True)
    small = df["k"] < 15
    assert small.any() and (~small).any()
    assert (df.loc[small, "unbiased_gain"] == 0).all()
    assert (df.loc[~small, "unbiased_gain"] != 0).all()


def test_importance_has_unbiased_gain():
    b, _, _, X, y = _model("binary:logistic", seed=23)
    df = treeinner.importance(b, X, y, methods=["unbiased_gain", "total_gain"], random_state=5)
    np.testing.assert_allclose(
        df["unbiased_gain"], treeinner.unbiased_gain(b, X, y, random_state=5)
    )


def test_empty_held_out_set():
    """No rows to estimate from is refused (as the CLI does), not an all-zero score."""
    b, _, _, X, y = _model("binary:logistic", seed=24)
    for per_split in (False, True):
        with pytest.raises(treeinner.InputError, match="X has no rows"):
            treeinner.unbiased_gain(b, X[:0], y[:0], random_state=0, per_split=per_split)


def test_dart_warns_unless_trained_sums():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = X[:, 0] + rng.normal(size=400)
    b = xgb.train({"booster": "dart", "rate_drop": 0.3, "max_depth": 2}, xgb.DMatrix(X, y), 5)
    with pytest.warns(UserWarning, match="DART"):
        ens = treeinner.from_model(b)
    with pytest.warns(UserWarning, match="approximate"):
        treeinner.unbiased_gain(ens, X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        treeinner.unbiased_gain(ens, X, y, reference=(X, y))


def test_errors():
    b, Xt, yt, X, y = _model("binary:logistic", seed=25)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_draws"):
            treeinner.unbiased_gain(b, X, y, n_draws=bad)
        with pytest.raises(ValueError, match="min_samples"):
            treeinner.unbiased_gain(b, X, y, min_samples=bad)
    with pytest.raises(ValueError, match="random_state"):
        treeinner.unbiased_gain(b, X, y, random_state=-3)
    with pytest.raises(TypeError, match="random_state"):
        treeinner.unbiased_gain(b, X, y, random_state="seed")
    with pytest.raises(ValueError, match="rows"):
        treeinner.unbiased_gain(b, X, y[:-1])
    with pytest.raises(ValueError):
        treeinner.unbiased_gain(b, X, np.full(len(y), 2.0))  # not a binary label
    with pytest.raises(ValueError):
        treeinner.unbiased_gain(b, X, np.where(np.arange(len(y)) == 3, np.nan, y))
    with pytest.raises(ValueError, match="sample_weight"):
        treeinner.unbiased_gain(b, X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight"):
        treeinner.unbiased_gain(b, X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="feature"):
        treeinner.unbiased_gain(b, X[:, :3], y)
    with pytest.raises(ValueError, match="reference"):
        treeinner.unbiased_gain(b, X, y, reference=(Xt,))
    ens = treeinner.from_model(b)
    no_cover = ens.replace(cover=np.full(ens.n_nodes, np.nan))
    with pytest.raises(ValueError, match="reference="):
        treeinner.unbiased_gain(no_cover, X, y)
    # with the training data the sums come from it
    s = treeinner.unbiased_gain(no_cover, X, y, random_state=0, reference=(Xt, yt))
    np.testing.assert_allclose(
        s, treeinner.unbiased_gain(ens, X, y, random_state=0, reference=(Xt, yt))
    )


def test_squared_error_weights_validated_in_exact_mode():
    b, _, _, X, y = _model("reg:squarederror", seed=26)
    with pytest.raises(ValueError, match="sample_weight"):
        treeinner.unbiased_gain(b, X, y, sample_weight=np.ones(5))
    with pytest.raises(ValueError, match="sample_weight"):
        treeinner.unbiased_gain(b, X, y, sample_weight=np.full(len(y), np.nan))


# ---------------------------------------------------------------------- other boosters
def _other_booster_data(seed, n=800):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n, 4))
    X[rng.random(X.shape) < 0.03] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    yb = (s + rng.logistic(size=2 * n) > 0).astype(float)
    yr = s + rng.normal(size=2 * n)
    return X[:n], X[n:], yb[:n], yb[n:], yr[:n], yr[n:]


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_lightgbm_sums_from_the_model_equal_sums_from_training_data(task):
    """Without bagging, G rebuilt from LightGBM's leaves is the training gradient sum, so the
    unbiased gain from the model and from reference= agree (to LightGBM's float32 gradients)."""
    lgb = pytest.importorskip("lightgbm")
    Xt, Xv, ybt, ybv, yrt, yrv = _other_booster_data(31)
    yt, yv = (ybt, ybv) if task == "binary" else (yrt, yrv)
    params = {"objective": task, "learning_rate": 0.2, "num_leaves": 8, "lambda_l2": 2.0,
              "verbose": -1, "min_data_in_leaf": 5}  # fmt: skip
    b = lgb.train(params, lgb.Dataset(Xt, yt), 8)
    a = treeinner.unbiased_gain(b, Xv, yv, random_state=4, per_split=True)
    t = treeinner.unbiased_gain(b, Xv, yv, random_state=4, per_split=True, reference=(Xt, yt))
    np.testing.assert_array_equal(a["k"], t["k"])
    scale = np.abs(a["unbiased_gain"]).max()
    np.testing.assert_allclose(a["unbiased_gain"], t["unbiased_gain"], atol=1e-5 * scale)
    np.testing.assert_allclose(a["gain"], t["gain"], atol=1e-5 * np.abs(a["gain"]).max())
    assert treeinner.unbiased_gain(b, Xv, yv, random_state=4).idxmax() == "Column_0"


def test_catboost_needs_training_data_for_logloss():
    cb = pytest.importorskip("catboost")
    Xt, Xv, ybt, ybv, yrt, yrv = _other_booster_data(32)
    common = {"iterations": 8, "depth": 3, "learning_rate": 0.3, "verbose": False,
              "random_seed": 0, "leaf_estimation_iterations": 1,
              "allow_writing_files": False}  # fmt: skip
    clf = cb.CatBoostClassifier(loss_function="Logloss", **common).fit(Xt, ybt)
    # the error names the function the user called and its reference=, as PreDecomp's does
    need = "needs the training data for this CatBoost Logloss model (it stores no hessian covers)"
    with pytest.raises(treeinner.attribution.NeedsReference) as info:
        treeinner.unbiased_gain(clf, Xv, ybv, random_state=0)
    assert str(info.value) == (
        f"unbiased_gain {need}: unbiased_gain(model, X, y, reference=(X_train, y_train))"
    )
    with pytest.raises(treeinner.attribution.NeedsReference) as info:
        treeinner.importance(clf, Xv, ybv, methods=["unbiased_gain"], random_state=0)
    assert str(info.value) == (
        f"importance {need}: importance(model, X, y, reference=(X_train, y_train))"
    )
    s = treeinner.unbiased_gain(clf, Xv, ybv, random_state=0, reference=(Xt, ybt))
    assert s.idxmax() == s.index[0]
    # RMSE: the leaf weights are the hessian sums, so the model alone suffices and agrees
    reg = cb.CatBoostRegressor(loss_function="RMSE", **common).fit(Xt, yrt)
    a = treeinner.unbiased_gain(reg, Xv, yrv, per_split=True)
    t = treeinner.unbiased_gain(reg, Xv, yrv, per_split=True, reference=(Xt, yrt))
    scale = np.abs(a["unbiased_gain"]).max()
    np.testing.assert_allclose(a["unbiased_gain"], t["unbiased_gain"], atol=1e-6 * scale)
