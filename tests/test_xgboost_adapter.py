"""The XGBoost adapter reproduces XGBoost's margins and leaves bit for bit."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import treeinner
from tests._xgb_cases import adversarial_rows, make_case, xgb

N_CASES = 210


def _convert(booster):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(booster)


def _xgb_margin(booster, X):
    out = booster.inplace_predict(X, predict_type="margin")
    return np.asarray(out, dtype=np.float64)


def _xgb_leaves(booster, X, case):
    d = xgb.DMatrix(
        X,
        feature_names=list(case.frame.columns),
        feature_types=case.feature_types,
        enable_categorical=True,
    )
    return booster.predict(d, pred_leaf=True).astype(np.int64)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_margin_and_leaves_exact(seed):
    case = make_case(seed)
    ens = _convert(case.booster)
    rng = np.random.default_rng(10_000 + seed)
    X = adversarial_rows(ens, case, rng)
    ours = ens.predict_margin(X)
    theirs = _xgb_margin(case.booster, X).reshape(ours.shape)
    assert np.array_equal(ours, theirs), (
        f"{case.params}: {np.sum(ours != theirs)} of {ours.size} margins differ"
    )
    # DMatrix refuses infinities (inplace_predict takes them), so leaves are compared without.
    finite = X[~(np.abs(X) > 3.4e38).any(axis=1)]
    leaves = ens.leaf_index(finite)
    ref = _xgb_leaves(case.booster, finite, case).reshape(leaves.shape)
    assert np.array_equal(leaves, ref)


@pytest.mark.parametrize("seed", range(0, N_CASES, 7))
def test_dataframe_input_exact(seed):
    """pandas input: categoricals are coded by value, as XGBoost recodes them."""
    case = make_case(seed)
    ens = _convert(case.booster)
    frame = case.frame.copy()
    for c in case.cat_cols:
        cats = list(frame[c].cat.categories)
        frame[c] = frame[c].cat.set_categories(cats[::-1])  # same values, other codes
    frame = frame[list(frame.columns[::-1])]  # columns are matched by name
    ours = ens.predict_margin(frame)
    theirs = _xgb_margin(case.booster, frame[case.frame.columns]).reshape(ours.shape)
    assert np.array_equal(ours, theirs)


def _has_categoricals(seed):
    """Whether make_case(seed) draws categorical columns (its first two draws decide)."""
    rng = np.random.default_rng(seed)
    rng.integers(2, 7)
    return bool(seed % 3) and int(rng.integers(0, 3)) > 0


@pytest.mark.parametrize("seed", [s for s in range(N_CASES) if _has_categoricals(s)][:12])
def test_unseen_pandas_category_routed_like_an_unseen_code(seed):
    """XGBoost refuses a DataFrame with a category it never saw; we route it as XGBoost routes
    an unseen category code (to the side of no set), and say so."""
    case = make_case(seed)
    assert case.cat_cols
    ens = _convert(case.booster)
    frame = case.frame.copy()
    codes = case.codes.copy()
    for c in case.cat_cols:
        cats = list(frame[c].cat.categories)
        newcat = "zz_unseen" if isinstance(cats[0], str) else 999
        values = np.array(frame[c].astype(object), dtype=object)
        values[:5] = newcat
        frame[c] = pd.Categorical(values, categories=[newcat, *cats])
        codes[:5, list(case.frame.columns).index(c)] = len(cats)  # a code past the trained ones
    with pytest.warns(UserWarning, match="not seen in training"):
        ours = ens.predict_margin(frame)
    theirs = _xgb_margin(case.booster, codes).reshape(ours.shape)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("seed", range(1, N_CASES, 11))
def test_input_layouts_agree(seed):
    """float32/float64, C/Fortran order and CSR give the same margins as XGBoost."""
    case = make_case(seed)
    ens = _convert(case.booster)
    X = case.codes
    ref = _xgb_margin(case.booster, X).reshape(ens.predict_margin(X).shape)
    assert np.array_equal(ens.predict_margin(np.asfortranarray(X)), ref)
    X32 = X.astype(np.float32)
    assert np.array_equal(
        ens.predict_margin(X32), _xgb_margin(case.booster, X32).reshape(ref.shape)
    )
    # CSR: absent entries are missing; a stored zero is a zero.
    Xs = np.where(np.random.default_rng(seed).random(X.shape) < 0.3, 0.0, X)
    csr = sp.csr_matrix(np.nan_to_num(Xs, nan=0.0))
    csr.eliminate_zeros()
    csr[0, 0] = 0.0  # an explicitly stored zero
    theirs = case.booster.inplace_predict(csr, predict_type="margin")
    assert np.array_equal(ens.predict_margin(csr), np.asarray(theirs, float).reshape(ref.shape))


@pytest.mark.parametrize("seed", range(2, N_CASES, 13))
def test_json_and_ubj_files_give_the_same_ensemble(seed, tmp_path):
    case = make_case(seed)
    ens = _convert(case.booster)
    for ext in ("json", "ubj"):
        path = tmp_path / f"model.{ext}"
        case.booster.save_model(str(path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = treeinner.load(path)
        for name in ("left", "right", "feature", "value", "cover", "gain", "leaf_id"):
            assert np.array_equal(getattr(loaded, name), getattr(ens, name), equal_nan=True)
        assert np.array_equal(loaded.predict_margin(case.codes), ens.predict_margin(case.codes))


def _fit(params, rounds=20, n=600, seed=0, weights=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + rng.normal(size=n) * 0.3
    if params.get("objective", "").startswith("binary"):
        y = (y > 0).astype(float)
    w = rng.uniform(0.5, 2, size=n) if weights else None
    return xgb.train(params, xgb.DMatrix(X, y, weight=w), rounds), X


@pytest.mark.parametrize("eta", [0.01, 0.3, 1.0, 0.0731])
@pytest.mark.parametrize("lam", [0.0, 1.0, 10.0, 2.37])
@pytest.mark.parametrize("method", ["hist", "exact"])
def test_eta_lambda_recovered_from_file(eta, lam, method, tmp_path):
    booster, X = _fit(
        {
            "eta": eta,
            "lambda": lam,
            "max_depth": 4,
            "tree_method": method,
            "objective": "binary:logistic",
        }
    )
    inmem = treeinner.from_model(booster)
    assert inmem.learning_rate[0] == pytest.approx(eta, rel=1e-7)
    assert inmem.reg_lambda == pytest.approx(lam, rel=1e-7, abs=1e-9)
    path = tmp_path / "m.json"
    booster.save_model(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recovery must succeed silently
        loaded = treeinner.load(path)
    assert np.allclose(loaded.learning_rate, eta, rtol=1e-6)
    assert loaded.reg_lambda == pytest.approx(lam, rel=1e-6, abs=1e-9)
    # the reloaded Booster's config holds defaults; the trees win
    reloaded = xgb.Booster(model_file=str(path))
    assert json.loads(reloaded.save_config())["learner"]["gradient_booster"]["tree_train_param"][
        "eta"
    ].startswith("0.3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = treeinner.from_model(reloaded)
    assert np.allclose(again.learning_rate, eta, rtol=1e-6)
    assert again.reg_lambda == pytest.approx(lam, rel=1e-6, abs=1e-9)


def test_learning_rate_schedule_recovered_per_tree(tmp_path):
    rates = [0.3, 0.25, 0.2, 0.1, 0.1, 0.05]
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 4))
    y = X[:, 0] + rng.normal(size=500) * 0.1
    booster = xgb.train(
        {"max_depth": 3, "lambda": 2.0, "tree_method": "exact"},
        xgb.DMatrix(X, y),
        len(rates),
        callbacks=[xgb.callback.LearningRateScheduler(rates)],
    )
    path = tmp_path / "m.json"
    booster.save_model(str(path))
    ens = treeinner.load(path)
    # Ground truth from the dump: with the exact updater, leaf base_weights are unscaled, so
    # leaf value / leaf base_weight is the eta each tree was built with.
    doc = json.loads(booster.save_raw("json"))
    truth = []
    for tree in doc["learner"]["gradient_booster"]["model"]["trees"]:
        leaf = np.asarray(tree["left_children"]) == -1
        v = np.asarray(tree["split_conditions"], float)[leaf]
        w = np.asarray(tree["base_weights"], float)[leaf]
        truth.append(np.median(v[w != 0] / w[w != 0]))
    assert len(set(np.round(truth, 6))) > 2  # the schedule really varied eta
    assert np.allclose(ens.learning_rate, truth, rtol=1e-6)
    assert ens.reg_lambda == pytest.approx(2.0)


def test_explicit_values_override():
    booster, _ = _fit({"eta": 0.1, "lambda": 2.0, "max_depth": 3})
    ens = treeinner.from_model(booster, learning_rate=0.5, reg_lambda=7.0)
    assert np.all(ens.learning_rate == 0.5) and ens.reg_lambda == 7.0


def test_unrecoverable_warns(tmp_path):
    """Stumps with L1: nothing to recover from; a warning names what was assumed."""
    booster, _ = _fit({"eta": 0.1, "alpha": 1.0, "max_depth": 1})
    path = tmp_path / "m.json"
    booster.save_model(str(path))
    with pytest.warns(UserWarning, match="assuming XGBoost's default"):
        treeinner.load(path)


@pytest.mark.parametrize(
    ("param", "match"),
    [
        ({"alpha": 0.5}, "reg_alpha"),
        ({"max_delta_step": 0.7}, "max_delta_step"),
        ({"subsample": 0.5}, "subsample"),
    ],
)
def test_inexact_options_warn(param, match):
    booster, _ = _fit({"eta": 0.1, "max_depth": 3, **param})
    with pytest.warns(UserWarning, match=match):
        ens = treeinner.from_model(booster)
    assert any(match in r for r in ens.inexact)


def test_sklearn_wrappers_and_names():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["age", "income", "noise"])
    y = X["age"] + rng.normal(size=300)
    reg = xgb.XGBRegressor(n_estimators=5, learning_rate=0.2, reg_lambda=3.0, max_depth=3)
    reg.fit(X, y)
    ens = treeinner.from_model(reg)
    assert ens.feature_names == ("age", "income", "noise")
    assert ens.learning_rate[0] == pytest.approx(0.2) and ens.reg_lambda == 3.0
    shuffled = X[["noise", "age", "income"]]
    assert np.array_equal(
        ens.predict_margin(shuffled), reg.predict(X, output_margin=True).astype(float)
    )
    clf = xgb.XGBClassifier(n_estimators=4, max_depth=2).fit(X, (y > 0).astype(int))
    assert treeinner.from_model(clf).objective == "binary:logistic"
    clf3 = xgb.XGBClassifier(n_estimators=4, max_depth=2).fit(X, np.digitize(y, [-1, 1]))
    e3 = treeinner.from_model(clf3)
    assert e3.n_outputs == 3
    assert np.array_equal(e3.predict_margin(X), clf3.predict(X, output_margin=True).astype(float))
    rk = xgb.XGBRanker(n_estimators=3, max_depth=2).fit(
        X, (y > 0).astype(int), qid=np.repeat(np.arange(30), 10)
    )
    er = treeinner.from_model(rk)
    assert np.array_equal(er.predict_margin(X), rk.predict(X, output_margin=True).astype(float))


def test_multiclass_structure():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = rng.integers(0, 3, size=X.shape[0])
    booster = xgb.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 2, "num_parallel_tree": 2},
        xgb.DMatrix(X, y),
        4,
    )
    ens = treeinner.from_model(booster)
    assert ens.n_outputs == 3 and ens.n_trees == 4 * 3 * 2 and ens.n_iterations == 4
    assert list(ens.tree_group[:6]) == [0, 0, 1, 1, 2, 2]
    doc = json.loads(booster.save_raw("json"))
    assert ens.source_version == ".".join(map(str, doc["version"]))


def test_recovery_never_silently_wrong_on_small_symmetric_trees():
    """One-tree models on balanced data: a nearly symmetric split makes the node statistics
    determine lambda only up to float32 rounding. Recovery must then give up (and warn), not
    return a lambda fitted to rounding noise (data set 34 below once gave 1.0002)."""
    rng = np.random.default_rng(0)
    n = 300
    params = {"max_depth": 3, "eta": 0.3, "lambda": 1.0, "min_child_weight": 0.0,
              "tree_method": "exact", "nthread": 1}  # fmt: skip
    outcomes = {"recovered": 0, "warned": 0}
    for _ in range(40):
        X = np.column_stack(
            [rng.normal(size=2 * n), rng.normal(size=2 * n),
             rng.integers(0, 6, size=2 * n).astype(float),
             rng.integers(0, 2, size=2 * n).astype(float)]
        )  # fmt: skip
        y = 0.3 * X[:, 0] + rng.normal(size=2 * n)
        booster = xgb.train(params, xgb.DMatrix(X[:n], y[:n]), 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ens = treeinner.from_model(booster)
        if any("lambda" in str(w.message) for w in caught):
            outcomes["warned"] += 1
            continue
        outcomes["recovered"] += 1
        assert ens.reg_lambda == pytest.approx(1.0, rel=1e-6)
        assert np.allclose(ens.learning_rate, 0.3, rtol=1e-6)
    assert outcomes["warned"] >= 1 and outcomes["recovered"] >= 35
