"""Path-dependent TreeSHAP: agreement with XGBoost's pred_contribs, local accuracy, and
Shapley values computed by brute force from the definition on single trees.

``python3 -m tests.test_treeshap`` prints a timing against XGBoost (not a test)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner.ensemble import TreeEnsemble
from treeinner.treeshap import tree_shap

xgb = pytest.importorskip("xgboost")
from tests._helpers import quiet_ensemble  # noqa: E402


def _xgb_contribs(booster, X, categorical=False):
    """XGBoost's TreeSHAP as (values (n, p[, K]), bias (K,))."""
    dm = xgb.DMatrix(X, enable_categorical=categorical)
    ref = booster.predict(dm, pred_contribs=True).astype(np.float64)
    if ref.ndim == 3:  # (n, K, p + 1)
        return np.transpose(ref[:, :, :-1], (0, 2, 1)), ref[0, :, -1]
    return ref[:, :-1], ref[:1, -1]


def _assert_close(got, want, rtol=1e-5):
    """Equal to ``rtol`` relative to the scale of ``want`` (XGBoost works in float32)."""
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def _fit(objective, depth, seed, n_class=1, categorical=False, rounds=6, n=300, p=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, 1] = rng.integers(0, 4, size=n)  # ties
    X[rng.random((n, p)) < 0.15] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(p)], index=np.arange(7, 7 + n))
    if categorical:
        levels = ["red", "green", "blue", "cyan", "pink", "gold", "teal"]
        cat = rng.choice(levels, size=n)
        s = s + np.select([cat == "red", cat == "blue", cat == "gold"], [1.5, -1.0, 0.7], 0.0)
        cat = pd.Categorical(cat, categories=levels)
        cat[rng.random(n) < 0.1] = np.nan
        frame["colour"] = cat
    if n_class > 1:
        cuts = np.quantile(s, np.linspace(0, 1, n_class + 1)[1:-1])
        y = np.digitize(s + 0.5 * rng.normal(size=n), cuts).astype(float)
    elif objective.startswith("binary"):
        y = (s + rng.normal(size=n) > 0).astype(float)
    else:
        y = 3 * s + rng.normal(size=n)
    params = {"objective": objective, "max_depth": depth, "eta": 0.3, "seed": seed, "nthread": 1}
    if n_class > 1:
        params["num_class"] = n_class
    if categorical:
        params.update(tree_method="hist", max_cat_to_onehot=1)
    booster = xgb.train(params, xgb.DMatrix(frame, y, enable_categorical=categorical), rounds)
    return booster, frame


# ---------------------------------------------------------------------- against XGBoost
XGB_MODELS = [
    (obj, depth, cat)
    for obj in ("reg:squarederror", "binary:logistic", "multi:softprob")
    for depth in (1, 3, 6, 10)
    for cat in (False, True)
]


@pytest.mark.parametrize(
    "objective,depth,categorical",
    XGB_MODELS,
    ids=[f"{o}-d{d}-cat{int(c)}" for o, d, c in XGB_MODELS],
)
def test_matches_xgboost_pred_contribs(objective, depth, categorical):
    n_class = 3 if objective.startswith("multi") else 1
    booster, X = _fit(objective, depth, seed=depth + 10 * categorical, n_class=n_class,
                      categorical=categorical)  # fmt: skip
    got = tree_shap(booster, X)
    want, want_bias = _xgb_contribs(booster, X, categorical)
    assert got.values.shape == want.shape
    _assert_close(got.values, want)
    _assert_close(got.bias, want_bias)
    assert got.feature_names == tuple(X.columns)
    assert got.index.equals(X.index)


@pytest.mark.parametrize("seed", range(28))
def test_matches_xgboost_random_cases(seed, xgb_case):
    """The shared random XGBoost cases: every objective, dart, parallel trees, categoricals."""
    case = xgb_case(seed)
    got = tree_shap(case.booster, case.frame)
    want, want_bias = _xgb_contribs(case.booster, case.frame, categorical=True)
    assert got.values.shape == want.shape
    _assert_close(got.values, want)
    _assert_close(got.bias, want_bias)


def test_iteration_range_matches_xgboost_model_slice():
    booster, X = _fit("multi:softprob", 4, seed=3, n_class=3, rounds=8)
    got = tree_shap(booster, X, iteration_range=(2, 5))  # boosting rounds 2, 3, 4
    want, want_bias = _xgb_contribs(booster[2:5], X)
    _assert_close(got.values, want)
    _assert_close(got.bias, want_bias)


# ---------------------------------------------------------------------- local accuracy
@pytest.mark.parametrize(
    "objective,n_class,categorical",
    [("reg:squarederror", 1, False), ("binary:logistic", 1, True), ("multi:softprob", 3, True)],
)
def test_local_accuracy(objective, n_class, categorical):
    booster, X = _fit(objective, 7, seed=5, n_class=n_class, categorical=categorical, rounds=20)
    a = tree_shap(booster, X)
    margin = quiet_ensemble(booster).predict_margin(X)
    _assert_close(a.values.sum(axis=1) + a.bias, margin, rtol=1e-6)


def test_numpy_input_and_float32_rows():
    booster, X = _fit("reg:squarederror", 5, seed=2)
    a = tree_shap(booster, X)
    b = tree_shap(booster, X.to_numpy())
    c = tree_shap(booster, X.to_numpy(np.float32))
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.values, c.values)  # the rows are float32 already
    assert b.index is None


# ---------------------------------------------------------------------- brute force
def _single_tree(nodes, p, base=0.0, offsets=None) -> TreeEnsemble:
    """Trees from ``(feature, threshold, left, right, value, cover, default_left)`` rows
    (global child indices, -1 at leaves); one tree rooted at node 0 unless ``offsets``."""
    n = len(nodes)
    f, thr, lf, rt, val, cov, dl = (np.array(c) for c in zip(*nodes, strict=True))
    offsets = np.array([0, n] if offsets is None else offsets)
    m = offsets.shape[0] - 1
    return TreeEnsemble(
        tree_offsets=offsets,
        left=lf,
        right=rt,
        feature=f,
        threshold=thr,
        split_type=np.zeros(n),
        default_left=dl,
        missing_type=np.zeros(n),
        value=val,
        cover=cov,
        count=np.full(n, np.nan),
        gain=np.zeros(n),
        leaf_id=np.arange(n),
        cat_offsets=np.zeros(n + 1),
        cat_words=np.zeros(0),
        tree_group=np.zeros(m),
        tree_iteration=np.arange(m),
        learning_rate=np.full(m, 0.3),
        tree_weight=np.ones(m),
        base_margin=[base],
        feature_names=tuple(f"f{j}" for j in range(p)),
        named=False,
        float32_sum=False,
    )


def _random_tree(rng, p, depth):
    """A random tree of at most ``depth`` levels over ``p`` features (features repeat on
    paths), with arbitrary covers: some leaves' zero, a split's at least its heavier child's
    but not always the sum of the children's (the ensemble refuses a child outweighing its
    parent, and a split weighing 0 above weighted children, where XGBoost's TreeSHAP gives
    NaN)."""
    nodes = []

    def grow(d):
        i = len(nodes)
        nodes.append(None)
        cover = float(rng.choice([0.0, rng.uniform(0.1, 5.0), rng.uniform(0.1, 5.0)]))
        if d == depth or (d > 0 and rng.random() < 0.25):
            nodes[i] = (-1, np.nan, -1, -1, float(rng.normal()), cover, 1)
            return i
        feat = int(rng.integers(0, p))
        thr = float(np.float32(rng.normal() * 0.8))
        a = grow(d + 1)
        b = grow(d + 1)
        heavier = max(nodes[a][5], nodes[b][5])
        cover = heavier + (cover or float(rng.uniform(0.1, 5.0)))
        nodes[i] = (feat, thr, a, b, 0.0, cover, int(rng.integers(0, 2)))
        return i

    grow(0)
    return nodes


def _goes_left(ens, n, x):
    """XGBoost's rule, written out: NaN takes the default; else left iff float32(x) < thr."""
    v = x[ens.feature[n]]
    if np.isnan(v):
        return bool(ens.default_left[n])
    return bool(np.float32(v) < np.float32(ens.threshold[n]))


def _value(ens, n, x, S):
    """Expected output below node ``n`` with the features in ``S`` fixed at ``x`` and all
    other splits averaged over their children by cover."""
    if ens.left[n] < 0:
        return ens.value[n]
    a, b = ens.left[n], ens.right[n]
    if ens.feature[n] in S:
        return _value(ens, a if _goes_left(ens, n, x) else b, x, S)
    c = ens.cover[n]
    wa, wb = (ens.cover[a] / c, ens.cover[b] / c) if c > 0 else (0.5, 0.5)
    return wa * _value(ens, a, x, S) + wb * _value(ens, b, x, S)


def _brute_shapley(ens, x):
    p = ens.n_features
    phi = np.zeros(p)
    for i in range(p):
        others = [j for j in range(p) if j != i]
        for size in range(p):
            w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for S in itertools.combinations(others, size):
                S = set(S)
                phi[i] += w * (_value(ens, 0, x, S | {i}) - _value(ens, 0, x, S))
    return phi, _value(ens, 0, x, set())


def _rows(rng, n, p):
    X = rng.normal(size=(n, p)) * 0.8
    X[rng.random((n, p)) < 0.15] = np.nan
    return X


@pytest.mark.parametrize("seed", range(12))
def test_brute_force_hand_built_trees(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 6))
    ens = _single_tree(_random_tree(rng, p, depth=int(rng.integers(1, 5))), p, base=0.1)
    X = _rows(rng, 6, p)
    a = tree_shap(ens, X)
    for r in range(X.shape[0]):
        phi, expected = _brute_shapley(ens, X[r])
        np.testing.assert_allclose(a.values[r], phi, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.bias, [0.1 + expected], rtol=1e-12)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_brute_force_one_tree_xgboost(depth):
    booster, X = _fit("binary:logistic", depth, seed=20 + depth, rounds=1, p=4)
    ens = quiet_ensemble(booster)
    assert ens.n_trees == 1
    a = tree_shap(booster, X.iloc[:8])
    for r in range(8):
        phi, expected = _brute_shapley(ens, X.to_numpy()[r])
        np.testing.assert_allclose(a.values[r], phi, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.bias, ens.base_margin + expected, rtol=1e-12)


def test_brute_force_repeated_feature_chain():
    """A path that splits on the same feature three times, with a zero-cover leaf."""
    nodes = [
        (0, 0.0, 1, 2, 0.0, 10.0, 1),
        (1, 0.5, 3, 4, 0.0, 6.0, 0),
        (-1, np.nan, -1, -1, 2.0, 4.0, 1),
        (0, -1.0, 5, 6, 0.0, 4.0, 1),
        (-1, np.nan, -1, -1, -1.0, 2.0, 1),
        (0, -2.0, 7, 8, 0.0, 1.0, 0),
        (-1, np.nan, -1, -1, 0.5, 3.0, 1),
        (-1, np.nan, -1, -1, 4.0, 0.0, 1),
        (-1, np.nan, -1, -1, -3.0, 1.0, 1),
    ]
    ens = _single_tree(nodes, 3)
    X = np.array([[-3.0, 0.0, 1.0], [-1.5, 1.0, 0.0], [0.7, 0.0, 0.0], [np.nan, np.nan, 2.0]])
    a = tree_shap(ens, X)
    for r in range(X.shape[0]):
        phi, expected = _brute_shapley(ens, X[r])
        np.testing.assert_allclose(a.values[r], phi, rtol=1e-10, atol=1e-12)
    assert np.all(a.values[:, 2] == 0.0)  # feature 2 is never split on


def test_additivity_random_multi_tree_ensemble():
    rng = np.random.default_rng(1)
    p, trees = 4, [_random_tree(rng, 4, 4) for _ in range(5)]
    offs = np.cumsum([0] + [len(t) for t in trees])
    rows = []
    for t, o in zip(trees, offs, strict=False):
        rows += [(f, h, a + o if a >= 0 else -1, b + o if b >= 0 else -1, v, c, d)
                 for f, h, a, b, v, c, d in t]  # fmt: skip
    ens = _single_tree(rows, p, base=-0.2, offsets=offs)
    X = _rows(rng, 50, p)
    a = tree_shap(ens, X)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, ens.predict_margin(X), atol=1e-12)


# ---------------------------------------------------------------------- linear vs classic
def _random_ensemble(rng, p, depth, n_trees, base=0.0):
    trees = [_random_tree(rng, p, depth) for _ in range(n_trees)]
    offs = np.cumsum([0] + [len(t) for t in trees])
    rows = []
    for t, o in zip(trees, offs, strict=False):
        rows += [(f, h, a + o if a >= 0 else -1, b + o if b >= 0 else -1, v, c, d)
                 for f, h, a, b, v, c, d in t]  # fmt: skip
    return _single_tree(rows, p, base=base, offsets=offs)


def _classic(ens, X):
    """Algorithm 2 of Lundberg et al. (the reference kernel) on every tree."""
    from treeinner.kernels import treeshap as K

    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.zeros((X.shape[0], ens.n_features, ens.n_outputs))
    player = np.arange(ens.n_features, dtype=np.int64)
    depth = int(ens._tree_depth.max())
    K.tree_shap_classic(X, ens._nodes(), ens.cover, player, depth, False, out)
    return out[:, :, 0]


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 8, 10, 12])
def test_linear_algorithm_equals_classic(depth):
    """Random trees up to depth 12 over few features (so features repeat on paths), zero
    covers and covers that are not the children's sums: the quadrature form equals
    Algorithm 2."""
    rng = np.random.default_rng(100 + depth)
    p = int(rng.integers(2, 7))
    ens = _random_ensemble(rng, p, depth, n_trees=4, base=0.3)
    X = _rows(rng, 40, p)
    a = tree_shap(ens, X)
    want = _classic(ens, X)
    np.testing.assert_allclose(a.values, want, rtol=1e-9, atol=1e-11 * np.abs(want).max())
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, ens.predict_margin(X), atol=1e-10)


def test_quadrature_needs_its_points():
    """With one quadrature point fewer than ceil(depth / 2) the values are wrong: the number
    of points is a requirement, not a tuning knob."""
    from treeinner.kernels import treeshap as K
    from treeinner.treeshap import _setup

    rng = np.random.default_rng(5)
    depth = 10  # a complete tree splitting on feature j at level j: 10 features on every path
    nodes = []
    for i in range(2 ** (depth + 1) - 1):
        level = int(np.log2(i + 1))
        cover = float(rng.uniform(0.5, 3.0)) * 8.0 ** (depth - level)  # <= the parent's
        if level == depth:
            nodes.append((-1, np.nan, -1, -1, float(rng.normal()), cover, 1))
        else:
            thr = float(np.float32(rng.normal() * 0.5))
            nodes.append((level, thr, 2 * i + 1, 2 * i + 2, 0.0, cover, int(i % 2)))
    ens = _single_tree(nodes, depth)
    X = _rows(rng, 30, depth)
    su = _setup(ens, "cover", 0, 1)
    assert su.tree_nq[0] == 5
    out = np.zeros((30, depth, 1))
    K.tree_shap(X, ens._nodes(), ens._layout, su.lay, su.tabs, su.simple, su.tree_nq - 1, 0, 1,
                su.max_nodes, False, su.otab, out)  # fmt: skip
    want = _classic(ens, X)
    assert np.abs(out[:, :, 0] - want).max() > 1e-6 * np.abs(want).max()
    np.testing.assert_allclose(tree_shap(ens, X).values, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("depth", [10, 12])
def test_deep_xgboost_models(depth):
    booster, X = _fit("reg:squarederror", depth, seed=depth, rounds=4, n=2000, p=6)
    ens = quiet_ensemble(booster)
    assert ens._tree_depth.max() >= depth - 1
    got = tree_shap(booster, X)
    want, bias = _xgb_contribs(booster, X)
    _assert_close(got.values, want)
    np.testing.assert_allclose(got.bias, bias, rtol=1e-6)
    margin = ens.predict_margin(X)  # float32 sums, like XGBoost's
    scale = np.abs(margin).max()
    np.testing.assert_allclose(got.values.sum(axis=1) + got.bias, margin, atol=1e-6 * scale)


# ---------------------------------------------------------------------- TreeInner with SHAP
def _staged_reference(booster, ens, X, y, w, link):
    """Per-tree TreeSHAP values and negative gradients from XGBoost's own staged margins."""
    rounds = ens.n_trees // ens.n_outputs
    assert np.array_equal(ens.tree_iteration, np.repeat(np.arange(rounds), ens.n_outputs))
    per_tree = []
    gsum = np.zeros((len(X), ens.n_outputs))
    for m in range(rounds):
        if m == 0:
            F = np.tile(ens.base_margin, (len(X), 1))
        else:
            F = booster.inplace_predict(X, iteration_range=(0, m), predict_type="margin")
            F = np.asarray(F, dtype=np.float64).reshape(len(X), -1)
        neg_g = -w[:, None] * link(F, y)
        gsum += neg_g
        # round m has one tree per output: output c's values are those of its tree alone
        phi = tree_shap(ens, X, iteration_range=(m, m + 1)).values
        phi = phi if phi.ndim == 3 else phi[:, :, None]
        for t in range(m * ens.n_outputs, (m + 1) * ens.n_outputs):
            c = int(ens.tree_group[t])
            per_tree.append((phi[:, :, c] * neg_g[:, [c]]).sum(axis=0) / ens.learning_rate[t])
    return np.array(per_tree), gsum


def _logistic_grad(F, y):
    return 1.0 / (1.0 + np.exp(-F)) - y[:, None]


def _softmax_grad(F, y):
    P = np.exp(F - F.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    return P - (y[:, None] == np.arange(F.shape[1]))


@pytest.mark.parametrize("weighted", [False, True])
def test_tree_inner_and_forest_inner_shap_binary(weighted):
    booster, X = _fit("binary:logistic", 4, seed=3, rounds=8, n=400)
    ens = quiet_ensemble(booster)
    Xn = X.to_numpy()
    y = (np.nan_to_num(Xn[:, 0]) + np.random.default_rng(0).normal(size=400) > 0).astype(float)
    w = np.random.default_rng(1).uniform(0.2, 3.0, 400) if weighted else np.ones(400)
    per_tree, gsum = _staged_reference(booster, ens, X, y, w, _logistic_grad)
    sw = w if weighted else None
    got = treeinner.tree_inner(booster, X, y, attribution="shap", sample_weight=sw)
    assert list(got.index) == list(X.columns)
    np.testing.assert_allclose(got.to_numpy(), per_tree.sum(axis=0), rtol=1e-9, atol=1e-12)
    fi = treeinner.forest_inner(booster, X, y, attribution="shap", sample_weight=sw)
    phi = tree_shap(ens, X).values
    want = (phi * gsum).sum(axis=0) / ens.learning_rate.mean()
    np.testing.assert_allclose(fi.to_numpy(), want, rtol=1e-9, atol=1e-12)


def test_tree_inner_shap_multiclass_and_importance():
    booster, X = _fit("multi:softmax", 3, seed=4, n_class=3, rounds=5, n=400)
    ens = quiet_ensemble(booster)
    Xn = X.to_numpy()
    y = np.random.default_rng(2).integers(0, 3, size=400).astype(np.float64)
    per_tree, gsum = _staged_reference(booster, ens, X, y, np.ones(400), _softmax_grad)
    got = treeinner.tree_inner(booster, Xn, y, attribution="shap")
    for c in range(3):
        want = per_tree[ens.tree_group == c].sum(axis=0)
        np.testing.assert_allclose(got[f"class_{c}"], want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["total"], per_tree.sum(axis=0), rtol=1e-9, atol=1e-12)
    fi = treeinner.forest_inner(booster, Xn, y, attribution="shap")
    phi = tree_shap(ens, Xn).values
    want = np.einsum("npk,nk->pk", phi, gsum) / ens.learning_rate.mean()
    np.testing.assert_allclose(fi.iloc[:, :3].to_numpy(), want, rtol=1e-9, atol=1e-12)
    imp = treeinner.importance(booster, Xn, y, methods=["tree_inner_shap", "forest_inner_shap"])
    np.testing.assert_allclose(imp["tree_inner_shap"], got["total"])
    np.testing.assert_allclose(imp["forest_inner_shap"], fi["total"])


def test_tree_inner_shap_refuses_reference():
    booster, X = _fit("binary:logistic", 2, seed=6, rounds=2)
    y = np.zeros(len(X))
    with pytest.raises(ValueError, match="reference"):
        treeinner.tree_inner(booster, X, y, attribution="shap", reference=(X, y))


# ---------------------------------------------------------------------- errors
def test_no_covers_raises():
    booster, X = _fit("reg:squarederror", 3, seed=0)
    ens = quiet_ensemble(booster)
    bad = ens.replace(cover=np.full(ens.n_nodes, np.nan))
    with pytest.raises(ValueError, match="stores no covers"):
        tree_shap(bad, X)


# ---------------------------------------------------------------------- timing (not a test)
def _benchmark(n=10_000, p=50, rounds=200, depth=6, threads=2):
    import os
    import time

    import numba

    numba.set_num_threads(min(threads, os.cpu_count() or 1))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, p))
    y = X[:, :5].sum(axis=1) + np.sin(3 * X[:, 5]) + rng.normal(size=n)
    params = {"max_depth": depth, "eta": 0.1, "nthread": threads, "seed": 0}
    booster = xgb.train(params, xgb.DMatrix(X, y), rounds)
    tree_shap(booster, X[:100])  # compile / load the cache
    ens = quiet_ensemble(booster)
    dm = xgb.DMatrix(X)
    booster.predict(dm, pred_contribs=True)
    best = {}
    for name, fn in [
        ("treeinner.tree_shap", lambda: tree_shap(ens, X)),
        ("xgboost pred_contribs", lambda: booster.predict(dm, pred_contribs=True)),
    ]:
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        best[name] = min(ts)
        print(f"{name:24s} best of 3: {best[name]:.3f} s")
    got = tree_shap(ens, X).values
    want = booster.predict(dm, pred_contribs=True)[:, :-1]
    print(
        "max |diff|:", float(np.abs(got - want).max()), " max |value|:", float(np.abs(want).max())
    )


if __name__ == "__main__":
    _benchmark()
