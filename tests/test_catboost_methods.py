"""PreDecomp, TreeInner and node values from data on CatBoost models, against references
computed here directly from the training data and CatBoost's own staged predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest

import treeinner

pytest.importorskip("catboost")

from tests._cb_cases import fit, make_X, make_y
from tests._helpers import quiet_ensemble

LOSSES = ["RMSE", "Logloss"]
GROW = ["SymmetricTree", "Depthwise", "Lossguide"]


@pytest.fixture(scope="module", params=[(loss, g) for loss in LOSSES for g in GROW])
def trained(request):
    loss, grow = request.param
    rng = np.random.default_rng(LOSSES.index(loss) * 10 + GROW.index(grow))
    X = make_X(rng, 400, 4, 0.1)
    y = make_y(rng, loss, X)
    params = {
        "loss_function": loss,
        "iterations": 6,
        "depth": 4,
        "learning_rate": 0.3,
        "l2_leaf_reg": 2.0,
        "grow_policy": grow,
        "random_seed": 3,
    }
    m = fit(params, X, y)
    ens = quiet_ensemble(m)
    return m, ens, X, y


def _staged_before(model, X, ens):
    """Margin before every tree, from CatBoost's own staged predictions."""
    stages = [ens.base_margin[0] + np.zeros(X.shape[0])]
    for s in model.staged_predict(X, prediction_type="RawFormulaVal"):
        stages.append(np.asarray(s, dtype=np.float64))
    return stages[: ens.n_trees]


def _grad_hess(loss, y, F):
    if loss == "RMSE":
        return F - y, np.ones_like(F)
    p = 1 / (1 + np.exp(-F))
    return p - y, p * (1 - p)


def _paths(ens, X, t):
    """For tree t: (n_rows, n_nodes_of_tree) membership of every row in every node, by a plain
    Python walk with CatBoost's rule (right iff float32(x) > border; NaN per default_left)."""
    lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
    member = np.zeros((X.shape[0], hi - lo), dtype=bool)
    for i in range(X.shape[0]):
        n = lo
        member[i, n - lo] = True
        while ens.left[n] >= 0:
            v = X[i, ens.feature[n]]
            if np.isnan(v):
                go_left = bool(ens.default_left[n])
            else:
                go_left = not (np.float32(v) > np.float32(ens.threshold[n]))
            n = ens.left[n] if go_left else ens.right[n]
            member[i, n - lo] = True
    return member


def _paths_leaf(ens, X, t):
    """Local node index (within tree t) of the leaf each row reaches."""
    member = _paths(ens, X, t)
    is_leaf = ens.left[ens.tree_offsets[t] : ens.tree_offsets[t + 1]] < 0
    return np.argmax(member & is_leaf[None, :], axis=1)


def test_leaves_rebuilt_from_data(trained):
    """node_values(reference=...) at the leaves equals the model's leaf values (1e-6 relative)."""
    m, ens, X, y = trained
    p = treeinner.node_values(ens, reference=(X, y))
    leaf = ens.left < 0
    # Leaves no training row reaches are 0 in both. CatBoost's sums carry ~1e-8 absolute
    # rounding, so a leaf near 0 is compared at 1e-6 of the largest leaf.
    scale = np.abs(ens.value[leaf]).max()
    np.testing.assert_allclose(p[leaf], ens.value[leaf], rtol=1e-6, atol=1e-6 * scale)


def test_tree_inner_equals_gain_from_training_data(trained):
    m, ens, X, y = trained
    loss = ens.objective
    lam = ens.reg_lambda
    ref = np.zeros(ens.n_features)
    for t, F in enumerate(_staged_before(m, X, ens)):
        g, h = _grad_hess(loss, y, F)
        member = _paths(ens, X, t)
        G, H = g @ member, h @ member
        lo = ens.tree_offsets[t]
        for j in range(member.shape[1]):
            n = lo + j
            if ens.left[n] < 0:
                continue
            a, b = ens.left[n] - lo, ens.right[n] - lo
            gain = G[a] ** 2 / (H[a] + lam) + G[b] ** 2 / (H[b] + lam) - G[j] ** 2 / (H[j] + lam)
            ref[ens.feature[n]] += gain
    ti = treeinner.tree_inner(ens, X, y, reference=(X, y))
    np.testing.assert_allclose(ti.to_numpy(), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def test_predecomp_local_accuracy(trained):
    m, ens, X, y = trained
    margin = ens.predict_margin(X)
    att = treeinner.predecomp(ens, X, reference=(X, y))
    # the data reproduce the leaves (previous test), so the attribution adds up to the margin
    tol = 1e-6 * np.abs(ens.value).max() * ens.n_trees
    np.testing.assert_allclose(att.values.sum(1) + att.bias, margin, rtol=1e-6, atol=tol)
    # and exactly to the node values it was built from
    p = treeinner.node_values(ens, reference=(X, y))
    rebuilt = ens.base_margin[0] + sum(
        p[ens.tree_offsets[t] + _paths_leaf(ens, X, t)] for t in range(ens.n_trees)
    )
    np.testing.assert_allclose(att.values.sum(1) + att.bias, rebuilt, rtol=1e-12, atol=1e-12)
    if ens.objective == "RMSE":  # covers are the hessian sums: no data needed
        att2 = treeinner.predecomp(ens, X)
        np.testing.assert_allclose(att2.values.sum(1) + att2.bias, margin, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(att2.values, att.values, rtol=1e-6, atol=tol)
    else:
        with pytest.raises(ValueError, match="training data"):
            treeinner.predecomp(ens, X)


def test_weighted_l2_scaled_by_mean_weight():
    """CatBoost scales l2_leaf_reg by the mean sample weight; node values from weighted data
    reproduce the leaves."""
    rng = np.random.default_rng(11)
    X = make_X(rng, 400, 3, 0.0)
    for loss in LOSSES:
        y = make_y(rng, loss, X)
        w = rng.uniform(0.2, 5.0, size=400)
        params = {"loss_function": loss, "iterations": 4, "depth": 3, "learning_rate": 0.5}
        m = fit({**params, "l2_leaf_reg": 3.0, "random_seed": 0}, X, y, sample_weight=w)
        ens = treeinner.from_model(m)
        p = treeinner.node_values(ens, reference=(X, y, w))
        leaf = ens.left < 0
        scale = np.abs(ens.value[leaf]).max()
        np.testing.assert_allclose(p[leaf], ens.value[leaf], rtol=1e-6, atol=1e-6 * scale)


def test_multiclass_node_values_marked_inexact():
    rng = np.random.default_rng(12)
    X = make_X(rng, 300, 3, 0.0)
    y = make_y(rng, "MultiClass", X)
    m = fit({"loss_function": "MultiClass", "iterations": 3, "depth": 2}, X, y)
    with pytest.warns(UserWarning, match="full K x K"):
        ens = treeinner.from_model(m)
    assert ens.n_outputs == 3 and ens.inexact
    att = treeinner.predecomp(ens, X, reference=(X, y))
    assert att.values.shape == (300, 3, 3)
    ti = treeinner.tree_inner(ens, X, y, reference=(X, y))
    assert np.all(np.isfinite(ti.to_numpy()))


def test_json_params_drive_lr_and_lambda():
    rng = np.random.default_rng(13)
    X = make_X(rng, 200, 3, 0.0)
    y = make_y(rng, "RMSE", X)
    m = fit({"loss_function": "RMSE", "iterations": 2, "depth": 2, "learning_rate": 0.3}, X, y)
    ens = treeinner.from_model(m, learning_rate=0.5, reg_lambda=7.0)
    assert np.all(ens.learning_rate == 0.5) and ens.reg_lambda == 7.0
    assert json.dumps(ens.params)
