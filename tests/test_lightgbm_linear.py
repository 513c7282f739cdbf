"""LightGBM linear trees: leaves that are linear models, predicted exactly."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import treeinner

lgb = pytest.importorskip("lightgbm")


def _model(seed, objective="regression", rounds=8, **extra):
    rng = np.random.default_rng(seed)
    n, p = 600, 5
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.1] = np.nan
    s = 2 * np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) - 0.5 * np.nan_to_num(X[:, 2])
    if objective == "binary":
        y = (s + rng.logistic(size=n) > 0).astype(float)
    elif objective == "multiclass":
        y = np.digitize(s + rng.normal(size=n), [-1.0, 1.0]).astype(float)
        extra["num_class"] = 3
    else:
        y = s + rng.normal(size=n)
    params = {
        "objective": objective,
        "linear_tree": True,
        "verbose": -1,
        "num_leaves": int(rng.integers(2, 16)),
        "learning_rate": float(rng.choice([0.05, 0.3, 1.0])),
        "linear_lambda": float(rng.choice([0.0, 1.0])),
        "min_data_in_leaf": 10,
        "seed": seed,
        **extra,
    }
    booster = lgb.train(params, lgb.Dataset(X, y), rounds)
    Xt = rng.normal(size=(400, p)) * rng.choice([1.0, 100.0])
    Xt[rng.random(Xt.shape) < 0.2] = np.nan
    return booster, X, y, Xt


def _convert(booster):
    with pytest.warns(UserWarning, match="linear trees"):
        return treeinner.from_model(booster)


def _check(ens, booster, X):
    raw = np.asarray(booster.predict(X, raw_score=True), dtype=np.float64)
    got = ens.predict_margin(X)
    # LightGBM adds const + sum coeff x per tree in a different order; the rounding is
    # relative to the size of the products, not of their (possibly cancelling) sum
    size = (1 + np.nanmax(np.abs(X))) * (1 + np.abs(raw).max())
    np.testing.assert_allclose(got, raw, rtol=1e-12, atol=1e-13 * size)
    np.testing.assert_array_equal(ens.leaf_index(X), booster.predict(X, pred_leaf=True))


@pytest.mark.parametrize("seed", range(24))
def test_linear_trees_predict_exactly(seed):
    objective = ("regression", "binary", "multiclass")[seed % 3]
    booster, X, y, Xt = _model(seed, objective)
    ens = _convert(booster)
    _check(ens, booster, Xt)
    _check(ens, booster, X)
    # a range of rounds predicts what LightGBM predicts with those rounds: the range (2, 5)
    # leaves the first tree, and the intercept it carries in LightGBM, out
    r = booster.predict(Xt, raw_score=True, start_iteration=2, num_iteration=3)
    size = (1 + np.nanmax(np.abs(Xt))) * (1 + np.abs(r).max())
    np.testing.assert_allclose(
        ens.predict_margin(Xt, iteration_range=(2, 5)), r, rtol=1e-12, atol=1e-13 * size
    )


@pytest.mark.parametrize("kind", ["text", "json", "npz"])
def test_files(tmp_path, kind):
    booster, X, y, Xt = _model(100, "regression")
    if kind == "text":
        path = tmp_path / "m.txt"
        booster.save_model(str(path))
    elif kind == "json":
        path = tmp_path / "m.json"
        path.write_text(json.dumps(booster.dump_model()))
    else:
        path = tmp_path / "m.npz"
        _convert(booster).save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.load(path)
    _check(ens, booster, Xt)


def test_methods_run_and_are_flagged():
    booster, X, y, Xt = _model(101, "regression", rounds=20)
    ens = _convert(booster)
    assert any("linear trees" in r for r in ens.inexact)
    ti = treeinner.tree_inner(ens, X, y)
    assert ti.idxmax() == "Column_0"
    attr = treeinner.predecomp(ens, Xt)
    assert attr.values.shape == (Xt.shape[0], 5)


def test_corrupt_linear_fields(tmp_path):
    booster, X, y, Xt = _model(102, "regression")
    text = booster.model_to_string()
    bad = text.replace("leaf_coeff=", "leaf_coeff=nan ", 1)
    with pytest.raises(ValueError):
        treeinner.adapters.lightgbm.from_string(bad)
    # a linear leaf reading a feature that does not exist
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("leaf_features=") and ln.split("=", 1)[1].strip():
            lines[i] = "leaf_features=" + " ".join("99" for _ in ln.split("=", 1)[1].split())
            break
    with pytest.raises(ValueError, match="feature"):
        treeinner.adapters.lightgbm.from_string("\n".join(lines) + "\n")


def test_linear_leaves_validated_when_built():
    booster, X, y, Xt = _model(103, "regression")
    ens = _convert(booster)
    leaf = np.array(ens.linear_leaves.leaf)
    leaf[0] = 10_000  # no such leaf in its tree
    with pytest.raises(ValueError, match="linear_leaves"):
        ens.replace(linear_leaves=ens.linear_leaves._replace(leaf=leaf))
