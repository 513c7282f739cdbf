"""One-pass moments of TreeInner / ForestInner with path attributions, the generic edge kernel
the unbiased-gain helper reuses, and the per-split TreeInner table with standard errors.

The reference is a slow NumPy loop over the trees: the booster's leaf of every row (through
its own leaf ids), staged margins summed tree by tree in the booster's float precision, NumPy
gradients, and every row's path walked up edge by edge; per-row terms are stored, credited to
the output features, then summed and squared (``_stats.moments_from_rows``).
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import pandas as pd
import pytest

import treeinner
from tests._helpers import leaf_nodes, quiet_ensemble, task_data
from treeinner import _format as fmt
from treeinner._inner import (
    forest_inner_moments,
    forest_inner_sums,
    inner_values,
    tree_inner_moments,
    tree_inner_sums,
)
from treeinner._staged import _edge_pass, edge_moments
from treeinner._stats import Moments, moments_from_rows
from treeinner.kernels.attribution import parents

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

N_TRAIN, N_EVAL, P = 400, 600, 5


# ------------------------------------------------------------------------------ models
@functools.cache
def _model(booster: str, kind: str):
    """A small model, its held-out rows, labels and weights."""
    seed = {"regression": 1, "binary": 2, "multiclass": 3}[kind] + (10 if booster == "lgb" else 0)
    X, y = task_data(seed, kind, N_TRAIN + N_EVAL, P, tie=3)
    Xt, yt, Xv, yv = X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]
    w = np.random.default_rng(seed + 100).uniform(0.2, 3.0, size=N_EVAL)
    if booster == "xgb":
        obj = {"regression": "reg:squarederror", "binary": "binary:logistic"}.get(
            kind, "multi:softprob"
        )
        params = {
            "objective": obj,
            "max_depth": 4,
            "eta": 0.3,
            "lambda": 1.0,
            "seed": seed,
            "nthread": 1,
        }
        if kind == "multiclass":
            params["num_class"] = 3
        model = xgb.train(params, xgb.DMatrix(Xt, yt), 12)
    else:
        obj = {"regression": "regression", "binary": "binary"}.get(kind, "multiclass")
        params = {
            "objective": obj,
            "num_leaves": 9,
            "learning_rate": 0.2,
            "min_data_in_leaf": 5,
            "verbose": -1,
            "seed": seed,
            "num_threads": 1,
        }
        if kind == "multiclass":
            params["num_class"] = 3
        model = lgb.train(params, lgb.Dataset(Xt, yt), 12)
    return quiet_ensemble(model), Xv, yv, w


MODELS = [(b, k) for b in ("xgb", "lgb") for k in ("regression", "binary", "multiclass")]


# ------------------------------------------------------------------------------ reference
def _grad_hess(ens, y: np.ndarray, F: np.ndarray):
    """Gradients and hessians (n, K) of the kernel objectives these models use, in NumPy."""
    prm = ens.grad_params
    code = ens.grad_objective
    if code == fmt.SQUARED:
        return F - y[:, None], np.ones_like(F)
    if code == fmt.LOGISTIC:
        s = prm[fmt.P_SIGMOID]
        pw = np.where(y == 1.0, prm[fmt.P_POS_WEIGHT], 1.0)[:, None]
        p = 1.0 / (1.0 + np.exp(-s * F))
        return s * (p - y[:, None]) * pw, np.maximum(s * s * p * (1 - p), prm[fmt.P_MIN_HESS]) * pw
    assert code == fmt.SOFTMAX
    e = np.exp(F - F.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    onehot = np.arange(F.shape[1])[None, :] == y[:, None].astype(np.int64)
    h = np.maximum(prm[fmt.P_HESS_SCALE] * p * (1 - p), prm[fmt.P_MIN_HESS])
    return p - onehot, h


def _reference(ens, X, y, dg, dh, forest=False, split_terms=None, initial=False):
    """Per-row terms (n, n_output_features, K), unweighted: sum over trees and path edges of
    ``dg g + dh h`` (``forest``: ``R GS``; with ``initial`` too: ``R (-g(F_0))``, the forest form's
    initial-gradient variant), credited to the output features. With ``split_terms``
    (n, n_nodes), also adds ``dg[child] * g`` to the split's own column."""
    leaves = leaf_nodes(ens, X)
    parent = parents(ens.left, ens.right)
    n, K = leaves.shape[0], ens.n_outputs
    F = np.tile(ens.base_margin, (n, 1))
    A = np.zeros((n, ens.n_features, K))
    GS = np.zeros((n, K))
    rows = np.arange(n)
    starts = np.flatnonzero(np.diff(np.r_[-1, ens.tree_iteration]))
    bounds = np.r_[starts, ens.n_trees]
    for r in range(len(starts)):
        g, h = _grad_hess(ens, y, F)
        if r == 0:
            g0 = g
        Fn = F.copy()
        for t in range(bounds[r], bounds[r + 1]):
            c = ens.tree_group[t]
            leaf = leaves[:, t]
            node = leaf.copy()
            while True:
                q = parent[node]
                on = q >= 0
                if not on.any():
                    break
                i, nd, qq = rows[on], node[on], q[on]
                f = ens.feature[qq]
                if forest:
                    np.add.at(A, (i, f, c), dg[nd])
                else:
                    np.add.at(A, (i, f, c), dg[nd] * g[i, c] + dh[nd] * h[i, c])
                if split_terms is not None:
                    split_terms[i, qq] += dg[nd] * g[i, c]
                node = np.where(on, q, node)
            GS[:, c] -= g[:, c]
            if ens.float32_sum:
                Fn[:, c] = (
                    Fn[:, c].astype(np.float32) + ens.value[leaf].astype(np.float32)
                ).astype(np.float64)
            else:
                Fn[:, c] += ens.value[leaf]
        F = Fn
    if forest:
        A = A * (-g0 if initial else GS)[:, None, :]
    if ens.input_map is not None:
        A = np.einsum("ifc,fo->ioc", A, ens.input_map.credit)
    return A


def _assert_moments(got: Moments, ref: Moments, rtol=1e-9):
    for name in ("s1", "s2", "s2_total", "swu"):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max(), err_msg=name)
    assert got.n == ref.n
    np.testing.assert_allclose([got.sw, got.sw2], [ref.sw, ref.sw2], rtol=1e-12)


def _tree_dg(ens, values):
    parent = parents(ens.left, ens.right)
    dg = np.zeros(ens.n_nodes)
    has = parent >= 0
    dg[has] = -(values[has] - values[parent[has]]) / ens.learning_rate[ens._node_tree[has]]
    return dg


# ------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("booster,kind", MODELS)
def test_edge_moments_match_a_per_row_loop(booster, kind):
    """Arbitrary edge coefficients of the gradient and of the hessian, weighted rows."""
    ens, X, y, w = _model(booster, kind)
    rng = np.random.default_rng(7)
    dg, dh = rng.normal(size=ens.n_nodes), rng.normal(size=ens.n_nodes)
    got = edge_moments(ens, X, y, w, dg, dh)
    ref = moments_from_rows(_reference(ens, X, y, dg, dh), w)
    _assert_moments(got, ref)


@pytest.mark.parametrize("booster,kind", MODELS)
@pytest.mark.parametrize("attribution", ["predecomp", "saabas"])
@pytest.mark.parametrize("weighted", [False, True])
def test_tree_inner_moments(booster, kind, attribution, weighted):
    ens, X, y, w = _model(booster, kind)
    sw = w if weighted else None
    values = inner_values(ens, attribution, None)
    got = tree_inner_moments(ens, X, y, values, sw)
    dg = _tree_dg(ens, values)
    ref = moments_from_rows(_reference(ens, X, y, dg, np.zeros_like(dg)), sw)
    _assert_moments(got, ref)
    sums = tree_inner_sums(ens, X, y, values, sw)
    np.testing.assert_allclose(got.s1, sums, rtol=1e-10, atol=1e-10 * np.abs(sums).max())
    # the reference agrees with PreDecomp's per-round attributions (rounds share gradients)
    if attribution == "predecomp" and booster == "xgb":
        n = len(y)
        wv = np.ones(n) if sw is None else sw
        total = np.zeros_like(sums)
        for r in range(ens.n_iterations):
            if r == 0:
                F = np.tile(ens.base_margin, (n, 1))
            else:
                F = ens.predict_margin(X, iteration_range=(0, r)).reshape(n, -1)
            g, _ = _grad_hess(ens, y, F)
            a = treeinner.predecomp(ens, X, iteration_range=(r, r + 1)).values
            a = a if a.ndim == 3 else a[:, :, None]
            lr = ens.learning_rate[np.flatnonzero(ens.tree_iteration == r)[0]]
            total += np.einsum("i,ijc,ic->jc", wv, a, -g) / lr
        np.testing.assert_allclose(got.s1, total, rtol=1e-8, atol=1e-8 * np.abs(total).max())


@pytest.mark.parametrize("booster,kind", MODELS)
@pytest.mark.parametrize("weighted", [False, True])
def test_forest_inner_moments(booster, kind, weighted):
    ens, X, y, w = _model(booster, kind)
    sw = w if weighted else None
    values = inner_values(ens, "predecomp", None)
    got = forest_inner_moments(ens, X, y, values, sw)
    lr = float(np.mean(ens.learning_rate))
    parent = parents(ens.left, ens.right)
    dg = np.where(parent >= 0, values - values[np.maximum(parent, 0)], 0.0) / lr
    ref = moments_from_rows(_reference(ens, X, y, dg, np.zeros_like(dg), forest=True), sw)
    _assert_moments(got, ref)
    sums = forest_inner_sums(ens, X, y, values, sw)
    np.testing.assert_allclose(got.s1, sums, rtol=1e-10, atol=1e-10 * np.abs(sums).max())


@pytest.mark.parametrize("booster,kind", [("xgb", "multiclass"), ("lgb", "binary")])
def test_moments_add_over_disjoint_rows(booster, kind):
    ens, X, y, w = _model(booster, kind)
    values = inner_values(ens, "predecomp", None)
    cut = 217
    for fn in (tree_inner_moments, forest_inner_moments):
        whole = fn(ens, X, y, values, w)
        parts = fn(ens, X[:cut], y[:cut], values, w[:cut]) + fn(
            ens, X[cut:], y[cut:], values, w[cut:]
        )
        _assert_moments(parts, whole, rtol=1e-11)
    # float32 input (converted in blocks of rows) gives the moments of its float64 copy
    X32 = X.astype(np.float32)
    for fn in (tree_inner_moments, forest_inner_moments):
        _assert_moments(
            fn(ens, X32, y, values, w), fn(ens, X32.astype(np.float64), y, values, w), rtol=1e-12
        )
    # the standard error is that of the per-row terms: a non-trivial positive number
    est = whole.estimate(mean=False)
    assert np.all(est.var[np.abs(est.score) > 0] > 0)


@pytest.mark.parametrize("booster,kind", [("xgb", "multiclass"), ("lgb", "regression")])
def test_thread_count_does_not_change_results(booster, kind):
    ens, X, y, w = _model(booster, kind)
    values = inner_values(ens, "saabas", None)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = [fn(ens, X, y, values, w) for fn in (tree_inner_moments, forest_inner_moments)]
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = [fn(ens, X, y, values, w) for fn in (tree_inner_moments, forest_inner_moments)]
    finally:
        numba.set_num_threads(before)
    for a, b in zip(one, two):
        _assert_moments(a, b, rtol=1e-12)


@pytest.mark.parametrize("booster,kind", [("xgb", "multiclass"), ("lgb", "binary")])
@pytest.mark.parametrize("forest", [False, True])
def test_touched_and_dense_folds_agree(booster, kind, forest):
    """Both ways of folding a row's buffer (every used feature, or the ones the row touched)
    give the reference's moments."""
    ens, X, y, w = _model(booster, kind)
    rng = np.random.default_rng(3)
    dg, dh = rng.normal(size=ens.n_nodes), rng.normal(size=ens.n_nodes)
    if forest:
        dh[:] = 0.0
    ref = moments_from_rows(_reference(ens, X, y, dg, dh, forest=forest), w)
    for dense in (False, True):
        _assert_moments(_edge_pass(ens, X, y, w, dg, dh, forest, dense=dense), ref)


def test_edge_moments_checks_its_coefficients():
    ens, X, y, w = _model("xgb", "regression")
    with pytest.raises(ValueError, match="dg and dh"):
        edge_moments(ens, X, y, None, np.zeros(3), np.zeros(ens.n_nodes))


def _staged_grads(ens, X, y):
    """Per round r: the staged margins' gradients (n, K) (rounds share them)."""
    n = len(y)
    out = []
    for r in range(ens.n_iterations):
        if r == 0:
            F = np.tile(ens.base_margin, (n, 1))
        else:
            F = ens.predict_margin(X, iteration_range=(0, r)).reshape(n, -1)
        out.append(_grad_hess(ens, y, F)[0])
    return out


@pytest.mark.parametrize("booster,kind", [("xgb", "multiclass"), ("lgb", "binary")])
def test_shap_branch(booster, kind):
    """values=None: TreeSHAP's moments (``treeshap._shap_inner_moments``), ForestInner's
    divided by the mean learning rate; against per-round ``tree_shap`` values."""
    ens, X, y, w = _model(booster, kind)
    n = len(y)
    lr = float(np.mean(ens.learning_rate))
    rows_t = np.zeros((n, ens.n_features, ens.n_outputs))
    R = np.zeros_like(rows_t)
    GS = np.zeros((n, ens.n_outputs))
    for r, g in enumerate(_staged_grads(ens, X, y)):
        phi = treeinner.tree_shap(ens, X, iteration_range=(r, r + 1)).values
        phi = phi if phi.ndim == 3 else phi[:, :, None]
        lr_r = ens.learning_rate[np.flatnonzero(ens.tree_iteration == r)[0]]
        rows_t += phi * (-g / lr_r)[:, None, :]
        R += phi
        GS -= g
    for fn, sums, rows in (
        (tree_inner_moments, tree_inner_sums, rows_t),
        (forest_inner_moments, forest_inner_sums, R * GS[:, None, :] / lr),
    ):
        got = fn(ens, X, y, None, w)
        _assert_moments(got, moments_from_rows(rows, w), rtol=1e-7)
        ref = sums(ens, X, y, None, w)
        np.testing.assert_allclose(got.s1, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


# ------------------------------------------------------------------------------ per split
def _split_reference(ens, X, y, values, sw):
    n = X.shape[0]
    terms = np.zeros((n, ens.n_nodes))
    dg = _tree_dg(ens, values)
    _reference(ens, X, y, dg, np.zeros_like(dg), split_terms=terms)
    wv = np.ones(n) if sw is None else sw
    u = terms * wv[:, None]
    s1 = u.sum(axis=0)
    se = np.sqrt(n / (n - 1) * np.maximum((u * u).sum(axis=0) - s1**2 / n, 0.0))
    reach = np.zeros(ens.n_nodes)
    parent = parents(ens.left, ens.right)
    for leaf in leaf_nodes(ens, X).T:
        node = leaf
        np.add.at(reach, node, 1)
        while (parent[node] >= 0).any():
            node = parent[node][parent[node] >= 0]
            np.add.at(reach, node, 1)
    return s1, se, reach


@pytest.mark.parametrize("booster,kind", MODELS)
@pytest.mark.parametrize("attribution", ["predecomp", "saabas"])
def test_per_split_table(booster, kind, attribution):
    ens, X, y, w = _model(booster, kind)
    sw = w if kind != "regression" else None
    df = treeinner.tree_inner(ens, X, y, attribution=attribution, sample_weight=sw, per_split=True)
    inner = np.flatnonzero(ens.left >= 0)
    assert len(df) == inner.size
    cols = ["tree", "node"] + (["class"] if ens.n_outputs > 1 else [])
    cols += ["feature", "threshold", "gain", "tree_inner", "se", "p_value", "n_node"]
    assert list(df.columns) == cols
    np.testing.assert_array_equal(df["gain"], ens.gain[inner])
    # per feature (and class) the splits add up to TreeInner
    full = treeinner.tree_inner(ens, X, y, attribution=attribution, sample_weight=sw)
    if ens.n_outputs == 1:
        by = df.groupby("feature")["tree_inner"].sum().reindex(full.index, fill_value=0.0)
        np.testing.assert_allclose(by, full, rtol=1e-9, atol=1e-9 * full.abs().max())
    else:
        by = df.pivot_table("tree_inner", "feature", "class", aggfunc="sum").reindex(full.index)
        by = by.fillna(0.0).to_numpy()
        ref = full.drop(columns="total").to_numpy()
        np.testing.assert_allclose(by, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    s1, se, reach = _split_reference(ens, X, y, inner_values(ens, attribution, None), sw)
    scale = np.abs(s1[inner]).max()
    np.testing.assert_allclose(df["tree_inner"], s1[inner], rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(df["se"], se[inner], rtol=1e-9, atol=1e-9 * se.max())
    np.testing.assert_array_equal(df["n_node"], reach[inner])
    p = df["p_value"].to_numpy()
    assert np.all((p >= 0) & (p <= 1))
    z = df["tree_inner"] / df["se"]
    assert np.all(p[z > 2] < 0.03) and np.all(p[z < -2] > 0.97)


def test_per_split_refuses_shap():
    ens, X, y, _ = _model("xgb", "regression")
    with pytest.raises(ValueError, match="TreeSHAP has no per-split decomposition"):
        treeinner.tree_inner(ens, X, y, attribution="shap", per_split=True)


# ------------------------------------------------------------------------------ CatBoost
def test_catboost_categorical_credit():
    """Kernel columns of CatBoost's categorical splits are credited before squaring."""
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(5)

    def data(n):
        X = pd.DataFrame(
            {
                "a": rng.normal(size=n),
                "c1": rng.choice(["x", "y", "z"], n),
                "c2": rng.choice([f"k{i}" for i in range(8)], n),
                "b": rng.normal(size=n),
            }
        )
        X.loc[rng.random(n) < 0.05, "a"] = np.nan
        s = X["a"].fillna(0) + (X["c1"] == "x") + 2 * X["c2"].isin(["k1", "k2"])
        return X, (s + rng.normal(size=n) > 0.5).astype(float).to_numpy()

    X, y = data(800)
    Xv, yv = data(400)
    model = cb.CatBoost(
        dict(
            iterations=8,
            depth=3,
            learning_rate=0.3,
            one_hot_max_size=2,
            loss_function="Logloss",
            random_seed=0,
            verbose=False,
            allow_writing_files=False,
            thread_count=1,
            cat_features=["c1", "c2"],
        )
    ).fit(X, y)
    ens = quiet_ensemble(model)
    assert ens.input_map is not None
    credit = ens.input_map.credit
    assert credit.shape[0] > credit.shape[1]
    w = rng.uniform(0.5, 2.0, size=len(yv))
    values = inner_values(ens, "predecomp", (X, y))  # CatBoost stores no hessian covers
    got = tree_inner_moments(ens, Xv, yv, values, w)
    assert got.s1.shape == (4, 1)
    dg = _tree_dg(ens, values)
    ref = moments_from_rows(_reference(ens, Xv, yv, dg, np.zeros_like(dg)), w)
    _assert_moments(got, ref)
    np.testing.assert_allclose(got.s1, tree_inner_sums(ens, Xv, yv, values, w), rtol=1e-10)
    got = forest_inner_moments(ens, Xv, yv, values, w)
    np.testing.assert_allclose(got.s1, forest_inner_sums(ens, Xv, yv, values, w), rtol=1e-10)
