"""CatBoost models with categorical features: rows routed through CatBoost's own leaves."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner

cb = pytest.importorskip("catboost")

CATS = ["c1", "c2"]


def _data(rng, n, n_classes=2):
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "c1": rng.choice(["x", "y", "z"], n),
            "c2": rng.choice([f"k{i}" for i in range(12)], n),
            "b": rng.normal(size=n),
        }
    )
    X.loc[rng.random(n) < 0.05, "a"] = np.nan
    s = X["a"].fillna(0) + (X["c1"] == "x") + 2 * X["c2"].isin(["k1", "k2", "k3"])
    y = (s + rng.normal(size=n) > 0.5).astype(int)
    if n_classes > 2:
        y = y + (X["b"] > 0)
    return X, y.to_numpy()


def _fit(seed, loss, grow="SymmetricTree", n=1500, **extra):
    rng = np.random.default_rng(seed)
    X, y = _data(rng, n, 3 if loss == "MultiClass" else 2)
    Xv, yv = _data(rng, 500, 3 if loss == "MultiClass" else 2)
    Xv.loc[:4, "c2"] = "never-seen"
    Xv.loc[5:9, "c1"] = "also-new"
    params = dict(
        iterations=int(rng.integers(5, 25)),
        depth=int(rng.integers(2, 6)),
        learning_rate=float(rng.choice([0.1, 0.3])),
        one_hot_max_size=int(rng.choice([2, 4])),
        loss_function=loss,
        grow_policy=grow,
        leaf_estimation_iterations=1,
        random_seed=seed,
        verbose=False,
        allow_writing_files=False,
        cat_features=CATS,
        **extra,
    )
    model = cb.CatBoost(params).fit(X, y)
    return model, X, y, Xv, yv


def _convert(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(model)


def _check_exact(ens, model, X):
    raw = np.asarray(model.predict(X, prediction_type="RawFormulaVal"), dtype=np.float64)
    got = ens.predict_margin(X)
    np.testing.assert_allclose(got, raw, rtol=1e-12, atol=1e-12 * (1 + np.abs(raw).max()))
    leaves = model.calc_leaf_indexes(cb.Pool(X, cat_features=CATS))
    np.testing.assert_array_equal(ens.leaf_index(X)[:, :: ens.n_outputs], leaves)


GROWS = ("SymmetricTree", "Depthwise")
KINDS = [(lo, g) for lo in ("RMSE", "Logloss", "MultiClass") for g in GROWS]
CASES = [(seed, loss, grow) for seed, (loss, grow) in enumerate(KINDS * 4)]


@pytest.mark.parametrize("seed,loss,grow", CASES)
def test_margins_and_leaves_equal_catboost(seed, loss, grow):
    model, X, y, Xv, yv = _fit(seed, loss, grow)
    ens = _convert(model)
    assert ens.input_map is not None and ens.n_features > 4
    _check_exact(ens, model, Xv)
    _check_exact(ens, model, X.iloc[:300])


def test_attributions_credit_the_categorical_features():
    model, X, y, Xv, yv = _fit(100, "RMSE", n=3000)
    ens = _convert(model)
    attr = treeinner.predecomp(ens, Xv)
    assert attr.feature_names == ("a", "c1", "c2", "b") and attr.values.shape == (len(Xv), 4)
    # local accuracy from the stored hessian sums (RMSE)
    np.testing.assert_allclose(
        attr.values.sum(axis=1) + attr.bias[0], ens.predict_margin(Xv), rtol=0, atol=1e-9
    )
    ti = treeinner.tree_inner(ens, Xv, yv)
    assert list(ti.index) == ["a", "c1", "c2", "b"]
    assert ti["c2"] > 0 and ti["c1"] > 0 and ti["b"] < ti["c1"]
    # the per-split frame names the categorical features and shows no threshold for them
    splits = treeinner.unbiased_gain(ens, Xv, yv, per_split=True)
    cat = splits["feature"].isin(["c1", "c2"])
    assert cat.any() and splits.loc[cat, "threshold"].isna().all()
    per_feature = treeinner.unbiased_gain(ens, Xv, yv)
    assert list(per_feature.index) == ["a", "c1", "c2", "b"]
    np.testing.assert_allclose(
        per_feature.sum(), splits["unbiased_gain"].sum(), rtol=1e-10, atol=1e-10
    )


def test_logloss_with_reference_data_and_importance():
    model, X, y, Xv, yv = _fit(101, "Logloss", n=3000)
    with pytest.warns(UserWarning, match="CTR"):
        ens = treeinner.from_model(model)
    with pytest.raises(ValueError, match="reference"):
        treeinner.predecomp(ens, Xv)
    ti = treeinner.tree_inner(ens, Xv, yv, reference=(X, y))
    assert ti.idxmax() in ("a", "c2")
    ug = treeinner.unbiased_gain(ens, Xv, yv, random_state=0, reference=(X, y))
    assert list(ug.index) == ["a", "c1", "c2", "b"]
    # permutation importance permutes the raw columns and routes them through CatBoost
    perm = treeinner.importance(ens, Xv, yv, methods=["permutation"], n_repeats=1, random_state=0)
    assert list(perm.index) == ["a", "c1", "c2", "b"] and perm.loc["c2", "permutation"] > 0


def test_multiclass_credits_per_class():
    model, X, y, Xv, yv = _fit(102, "MultiClass", n=2000)
    ens = _convert(model)
    attr = treeinner.predecomp(ens, Xv, reference=(X, y))
    assert attr.values.shape == (len(Xv), 4, 3) and attr.feature_names == ("a", "c1", "c2", "b")
    ti = treeinner.tree_inner(ens, Xv, yv, reference=(X, y))
    assert list(ti.index) == ["a", "c1", "c2", "b"]
    assert list(ti.columns) == ["class_0", "class_1", "class_2", "total"]
    np.testing.assert_allclose(ti["total"], ti.iloc[:, :3].sum(axis=1))


@pytest.mark.parametrize("fmt", ["json", "cbm"])
def test_model_files(tmp_path, fmt):
    model, X, y, Xv, yv = _fit(103, "RMSE")
    path = tmp_path / f"model.{fmt}"
    model.save_model(str(path), format=fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.load(path)
    _check_exact(ens, model, Xv)


def test_errors():
    model, X, y, Xv, yv = _fit(104, "RMSE")
    ens = _convert(model)  # saving: tests/test_ensemble.py (categorical CatBoost round trip)
    with pytest.raises(ValueError, match="features"):
        ens.predict_margin(Xv.iloc[:, :3])
    bad = Xv.copy()
    bad["a"] = "text"
    with pytest.raises(ValueError, match="non-number"):
        ens.predict_margin(bad)
    # columns matched by name, whatever their order
    np.testing.assert_array_equal(
        ens.predict_margin(Xv[["b", "c2", "a", "c1"]]), ens.predict_margin(Xv)
    )
    assert ens.predict_margin(Xv.iloc[:0]).shape == (0,)


def test_clear_error_without_catboost(monkeypatch, tmp_path):
    import importlib.util
    import json

    model, X, y, Xv, yv = _fit(105, "RMSE")
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "catboost" else real(name)
    )
    from treeinner.adapters import catboost as cb_adapter

    with pytest.raises(ImportError, match="pip install catboost"):
        cb_adapter.from_json(doc)
