"""PreDecomp, TreeInner and the total-gain identity on LightGBM models."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import treeinner
from tests._helpers import quiet_ensemble
from tests._lgb_cases import GRADIENT_OBJECTIVES, OBJECTIVES, lgb


@pytest.mark.parametrize("seed", range(48))
def test_predecomp_local_accuracy(seed, lgb_case):
    """values.sum(1) + bias == margin for every objective (prediction-only ones too)."""
    case = lgb_case(seed, objective=OBJECTIVES[seed % len(OBJECTIVES)])
    ens = quiet_ensemble(case.booster)
    att = treeinner.predecomp(ens, case.X)
    margin = ens.predict_margin(case.X)
    total = att.values.sum(axis=1) + att.bias
    tol = 1e-9 * max(1.0, np.abs(margin).max())
    assert np.allclose(total, margin, rtol=0, atol=tol)
    sa = treeinner.saabas(ens, case.X)
    assert np.allclose(sa.values.sum(axis=1) + sa.bias, margin, rtol=0, atol=tol)


def _data(objective, n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    s = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.5 * X[:, 2]
    if objective == "regression":
        y = s + rng.normal(size=n)
    elif objective == "binary":
        y = (s + rng.normal(size=n) > 0.5).astype(float)
    elif objective.startswith("multiclass"):
        y = np.digitize(s + rng.normal(size=n), [-1, 1]).astype(float)
    elif objective in ("poisson", "tweedie"):
        y = rng.poisson(np.exp(0.3 * s)).astype(float)
    elif objective == "gamma":
        y = np.exp(0.3 * s + 0.1 * rng.normal(size=n))
    else:
        y = 1 / (1 + np.exp(-s))
    return X, y


def _identity_gap(objective, lr, lam, rounds=12, **extra):
    X, y = _data(objective)
    params = {"objective": objective, "learning_rate": lr, "lambda_l2": lam, "num_leaves": 7,
              "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1, "deterministic": True,
              **extra}  # fmt: skip
    if objective.startswith("multiclass"):
        params["num_class"] = 3
    booster = lgb.train(params, lgb.Dataset(X, y), rounds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact model converts silently
        ens = treeinner.from_model(booster)
    assert ens.inexact == ()
    ti = treeinner.tree_inner(ens, X, y, attribution="predecomp")
    if ti.ndim == 2:
        ti = ti["total"]
    ti = ti.to_numpy(dtype=float)
    gain = booster.feature_importance("gain")
    assert np.all(gain >= 0) and gain.sum() > 0
    return np.abs(ti / ti.sum() - gain / gain.sum()).max(), ens, booster


@pytest.mark.parametrize("objective", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("lr", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("lam", [0.0, 1.0, 7.5])
def test_total_gain_identity(objective, lr, lam):
    """On the training data TreeInner(PreDecomp) equals LightGBM's gain importance."""
    gap, ens, booster = _identity_gap(objective, lr, lam)
    assert gap <= 1e-6
    # the rebuilt split gains match the stored (float32, 6-digit) ones
    stored = np.concatenate(
        [np.asarray(_split_gains(t["tree_structure"])) for t in booster.dump_model()["tree_info"]]
    )
    ours = ens.gain[ens.left >= 0]
    assert np.allclose(np.sort(ours), np.sort(stored), rtol=2e-5, atol=1e-6 * stored.max())


def _split_gains(node):
    out, stack = [], [node]
    while stack:
        nd = stack.pop()
        if "split_index" in nd:
            out.append(nd["split_gain"])
            stack += [nd["left_child"], nd["right_child"]]
    return out


@pytest.mark.parametrize(
    ("objective", "extra"),
    [
        ("poisson", {}),
        ("poisson", {"poisson_max_delta_step": 1.5}),
        ("gamma", {}),
        ("tweedie", {"tweedie_variance_power": 1.3}),
        ("cross_entropy", {}),
        ("multiclassova", {}),
        ("binary", {"scale_pos_weight": 3.0}),
        ("binary", {"is_unbalance": True}),
        ("binary", {"sigmoid": 2.0}),
        ("regression", {"boost_from_average": False}),
    ],
)
def test_total_gain_identity_other_objectives(objective, extra):
    """Each objective's gradient and hessian are LightGBM's (the identity would fail otherwise)."""
    gap, _, _ = _identity_gap(objective, 0.3, 1.0, **extra)
    assert gap <= 1e-6


def test_all_gradient_objectives_covered():
    tested = {"regression", "binary", "multiclass", "poisson", "gamma", "tweedie",
              "cross_entropy", "multiclassova"}  # fmt: skip
    assert tested == set(GRADIENT_OBJECTIVES)


def test_leaf_values_are_newton_steps_with_our_gradients():
    """A one-round model: every leaf equals init - lr G / (H + lambda) recomputed from data."""
    X, y = _data("binary")
    lr, lam = 0.4, 2.0
    booster = lgb.train(
        {"objective": "binary", "learning_rate": lr, "lambda_l2": lam, "num_leaves": 6,
         "verbose": -1},
        lgb.Dataset(X, y),
        1,
    )  # fmt: skip
    ens = treeinner.from_model(booster)
    p = 1 / (1 + np.exp(-ens.base_margin[0]))
    g, h = p - y, np.full_like(y, p * (1 - p))
    leaf = ens.leaf_index(X)[:, 0]
    for k in np.unique(leaf):
        node = np.flatnonzero(ens.leaf_id == k)[0]
        G, H = g[leaf == k].sum(), h[leaf == k].sum()
        assert ens.value[node] == pytest.approx(-lr * G / (H + lam), rel=1e-5, abs=1e-9)
        assert ens.cover[node] == pytest.approx(H, rel=1e-5)


def test_validation_tree_inner_runs_and_noise_scores_low():
    X, y = _data("regression", n=1200, seed=3)
    booster = lgb.train(
        {"num_leaves": 15, "learning_rate": 0.1, "verbose": -1, "min_data_in_leaf": 5},
        lgb.Dataset(X[:600], y[:600]),
        40,
    )
    ens = treeinner.from_model(booster)
    ti = treeinner.tree_inner(ens, X[600:], y[600:])
    assert ti.idxmax() == "Column_0"
    assert ti[["Column_3", "Column_4"]].max() < 0.05 * ti.max()
