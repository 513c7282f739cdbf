"""The LightGBM adapter reproduces LightGBM's raw scores and leaf indices."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
from tests._lgb_cases import adversarial_rows, lgb, make_case
from treeinner.adapters import lightgbm as lgb_adapter

N_CASES = 210


def _convert(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(model, **kw)


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.load(path, **kw)


def _check_exact(ens, booster, X):
    ours = ens.predict_margin(X)
    theirs = booster.predict(X, raw_score=True).reshape(ours.shape)
    # bit-exact: the first trees' own values (booster_value) are summed, in LightGBM's order
    np.testing.assert_array_equal(ours, theirs)
    leaves = ens.leaf_index(X)
    ref = booster.predict(X, pred_leaf=True).reshape(leaves.shape)
    assert np.array_equal(leaves, ref), f"{np.sum(leaves != ref)} leaf indices differ"


@pytest.mark.parametrize("seed", range(N_CASES))
def test_margin_and_leaves_exact(seed):
    case = make_case(seed)
    ens = _convert(case.booster)
    assert ens.source == "lightgbm" and ens.decision_rule == "float64 <="
    X = adversarial_rows(ens, case, np.random.default_rng(10_000 + seed))
    _check_exact(ens, case.booster, X)


@pytest.mark.parametrize("seed", range(0, N_CASES, 5))
def test_text_and_json_files(seed, tmp_path):
    """treeinner.load of the saved text file and of the dump_model JSON gives the same
    margins and leaves; the text file gives the very same ensemble."""
    case = make_case(seed)
    ens = _convert(case.booster)
    X = adversarial_rows(ens, case, np.random.default_rng(seed))
    txt, js = tmp_path / "model.txt", tmp_path / "model.json"
    case.booster.save_model(str(txt))
    js.write_text(json.dumps(case.booster.dump_model()))
    from_txt = _load(txt)
    for name in ("left", "right", "threshold", "value", "cover", "count", "gain", "leaf_id",
                 "base_margin", "learning_rate", "cat_words"):  # fmt: skip
        assert np.array_equal(getattr(from_txt, name), getattr(ens, name), equal_nan=True), name
    assert from_txt.reg_lambda == ens.reg_lambda
    _check_exact(from_txt, case.booster, X)
    from_js = _load(js, reg_lambda=ens.reg_lambda)
    for name in ("left", "right", "feature", "threshold", "cover", "count", "leaf_id"):
        assert np.array_equal(getattr(from_js, name), getattr(ens, name), equal_nan=True), name
    _check_exact(from_js, case.booster, X)


def test_booster_values_saved_and_checked(tmp_path):
    """The first tree's own values survive a save and load (margins stay bit-exact), and a
    booster_value of the wrong length is refused at construction."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))
    y = 1000.0 + X[:, 0] + 0.1 * rng.normal(size=400)  # intercept far beyond the leaf values
    model = lgb.train({"verbose": -1, "num_leaves": 7}, lgb.Dataset(X, y), 5)
    ens = _convert(model)
    assert ens.booster_value is not None and ens.base_margin[0] != 0.0
    path = tmp_path / "m.npz"
    ens.save(path)
    back = treeinner.load(path)
    np.testing.assert_array_equal(back.predict_margin(X), model.predict(X, raw_score=True))
    with pytest.raises(treeinner.ModelFormatError, match="booster_value"):
        ens.replace(booster_value=ens.booster_value[:-1])


def test_learning_rate_lambda_and_intercept():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] * 2 + 7.0 + rng.normal(size=300)
    booster = lgb.train(
        {"learning_rate": 0.17, "lambda_l2": 2.5, "num_leaves": 5, "verbose": -1},
        lgb.Dataset(X, y),
        6,
    )
    ens = treeinner.from_model(booster)
    # the first tree's shrinkage field reads 1; its leaves are scaled by 0.17 all the same
    assert np.all(ens.learning_rate == 0.17)
    assert ens.reg_lambda == 2.5
    assert ens.base_margin[0] == pytest.approx(y.mean(), rel=1e-7)
    assert ens.inexact == () and ens.named is False
    assert ens.feature_names == ("Column_0", "Column_1", "Column_2", "Column_3")
    over = treeinner.from_model(booster, learning_rate=0.5, reg_lambda=1.0)
    assert np.all(over.learning_rate == 0.5) and over.reg_lambda == 1.0
    # covers are rebuilt from the leaves: internal weights are the sums of leaf weights
    doc = booster.dump_model()
    root = doc["tree_info"][1]["tree_structure"]
    assert ens.cover[ens.tree_offsets[1]] == pytest.approx(root["internal_weight"], rel=1e-6)
    assert ens.count[ens.tree_offsets[1]] == root["internal_count"] == 300


def test_binary_intercept_with_label_weights():
    """scale_pos_weight: the root gradient sum at the intercept is not zero; the intercept is
    still recovered (it is log(p / (1 - p)) of the unweighted positive rate)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + rng.normal(size=400) > 0.7).astype(float)
    for extra in ({"scale_pos_weight": 3.0}, {"is_unbalance": True}, {}):
        booster = lgb.train(
            {"objective": "binary", "num_leaves": 6, "verbose": -1, "lambda_l2": 1.0, **extra},
            lgb.Dataset(X, y),
            3,
        )
        ens = treeinner.from_model(booster)
        p = y.mean()
        assert ens.base_margin[0] == pytest.approx(np.log(p / (1 - p)), rel=1e-6), extra


def test_pandas_categorical_and_names():
    rng = np.random.default_rng(2)
    n = 400
    frame = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "city": pd.Categorical(rng.choice(["a", "b", "c", "d", "e", "f"], size=n)),
            "size": pd.Categorical(rng.choice([10, 20, 30], size=n)),
        }
    )
    y = frame["age"] + (frame["city"].isin(["a", "c", "f"])).astype(float) * 2
    y = y + rng.normal(size=n) * 0.1
    booster = lgb.train(
        {"num_leaves": 8, "verbose": -1, "max_cat_to_onehot": 2, "min_data_per_group": 5,
         "cat_smooth": 1.0},
        lgb.Dataset(frame, y),
        5,
    )  # fmt: skip
    ens = treeinner.from_model(booster)
    assert ens.named and ens.feature_names == ("age", "city", "size")
    assert ens.categories[1] == ["a", "b", "c", "d", "e", "f"]
    assert np.any(ens.split_type == 2)
    test = frame.copy()
    test["city"] = test["city"].cat.set_categories(["f", "e", "d", "c", "b", "a"])  # other codes
    ref = booster.predict(test, raw_score=True)
    assert np.allclose(ens.predict_margin(test[["size", "city", "age"]]), ref, rtol=1e-12)
    unseen = frame.copy()
    unseen["city"] = pd.Categorical(
        np.where(np.arange(n) < 5, "zz", frame["city"].astype(str)),
        categories=["zz", "a", "b", "c", "d", "e", "f"],
    )
    unseen.loc[5:9, "city"] = np.nan
    with pytest.warns(UserWarning, match="not seen in training"):
        ours = ens.predict_margin(unseen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = booster.predict(unseen, raw_score=True)
    assert np.allclose(ours, theirs, rtol=1e-12)
    with pytest.raises(ValueError, match="features"):
        ens.predict_margin(frame[["age", "city"]])
    with pytest.raises(ValueError, match="features"):
        ens.predict_margin(np.zeros((3, 4)))


def test_sklearn_wrappers():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = X["a"] + rng.normal(size=300)
    kw = {"n_estimators": 5, "num_leaves": 5, "verbose": -1}
    reg = lgb.LGBMRegressor(learning_rate=0.2, reg_lambda=3.0, **kw).fit(X, y)
    ens = treeinner.from_model(reg)
    assert ens.feature_names == ("a", "b", "c") and ens.reg_lambda == 3.0
    assert np.all(ens.learning_rate == 0.2)
    assert np.allclose(ens.predict_margin(X), reg.predict(X, raw_score=True), rtol=1e-12)
    clf = lgb.LGBMClassifier(**kw).fit(X, (y > 0).astype(int))
    assert treeinner.from_model(clf).objective == "binary"
    clf3 = lgb.LGBMClassifier(**kw).fit(X, np.digitize(y, [-1, 1]))
    e3 = treeinner.from_model(clf3)
    assert e3.n_outputs == 3 and list(e3.tree_group[:6]) == [0, 1, 2, 0, 1, 2]
    assert np.allclose(e3.predict_margin(X), clf3.predict(X, raw_score=True), rtol=1e-12)
    rk = lgb.LGBMRanker(**kw).fit(X, (y > 0).astype(int), group=[100, 100, 100])
    er = _convert(rk)
    assert np.allclose(er.predict_margin(X), rk.predict(X, raw_score=True), rtol=1e-12)
    for unfitted in (lgb.LGBMRegressor(), lgb.LGBMClassifier(), lgb.LGBMRanker()):
        with pytest.raises(ValueError, match="not fitted"):
            treeinner.from_model(unfitted)


def _small(params, n=300, rounds=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] + rng.normal(size=n)
    if params.get("objective") == "binary":
        y = (y > 0).astype(float)
    base = {"num_leaves": 5, "verbose": -1, "num_threads": 1}
    return lgb.train({**base, **params}, lgb.Dataset(X, y), rounds), X, y


@pytest.mark.parametrize(
    ("param", "match"),
    [
        ({"lambda_l1": 0.5}, "lambda_l1"),
        ({"max_delta_step": 0.3}, "max_delta_step"),
        ({"path_smooth": 1.0}, "path_smooth"),
        ({"bagging_fraction": 0.5, "bagging_freq": 1}, "bagging"),
        ({"data_sample_strategy": "goss"}, "GOSS"),
        ({"boosting": "dart"}, "DART"),
        ({"boosting": "rf", "bagging_fraction": 0.5, "bagging_freq": 1}, "random forest"),
        ({"monotone_constraints": [1, 0, 0, 0]}, "monotone"),
        ({"objective": "huber"}, "huber"),
    ],
)
def test_inexact_options_warn_and_predict_exactly(param, match):
    booster, X, _ = _small(param)
    with pytest.warns(UserWarning, match=match):
        ens = treeinner.from_model(booster)
    assert any(match in r for r in ens.inexact)
    _check_exact(ens, booster, X)


@pytest.mark.parametrize("objective", ["regression_l1", "huber", "quantile", "lambdarank"])
def test_prediction_only_objectives(objective):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(size=300)
    group = None
    if objective == "lambdarank":
        y, group = np.digitize(y, [-0.5, 0.5]), [100, 100, 100]
    booster = lgb.train(
        {"objective": objective, "verbose": -1, "num_leaves": 5}, lgb.Dataset(X, y, group=group), 3
    )
    ens = _convert(booster)
    assert ens.inexact
    _check_exact(ens, booster, X)
    att = treeinner.predecomp(ens, X)  # attributions need no gradient
    assert np.allclose(att.values.sum(1) + att.bias, ens.predict_margin(X), rtol=0, atol=1e-9)
    with pytest.raises(NotImplementedError, match=objective):
        treeinner.tree_inner(ens, X, y)


def test_unsupported_objective_named():
    booster, _, _ = _small({})
    text = booster.model_to_string().replace("objective=regression", "objective=weird_loss", 1)
    with pytest.raises(NotImplementedError, match="weird_loss"):
        lgb_adapter.from_string(text)


def test_constant_first_tree():
    """A first tree with no split (min_data_in_leaf too large) holds the intercept alone."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(100, 2))
    y = X[:, 0] + 3
    booster = lgb.train({"verbose": -1, "min_data_in_leaf": 1000}, lgb.Dataset(X, y), 2)
    ens = _convert(booster)
    assert ens.base_margin[0] == pytest.approx(y.mean(), rel=1e-7)  # labels are float32
    _check_exact(ens, booster, X)
    att = treeinner.predecomp(ens, X)
    assert np.allclose(att.values.sum(1) + att.bias, ens.predict_margin(X), atol=1e-12)


# ---------------------------------------------------------------------- corrupt files
@pytest.fixture(scope="module")
def model_text():
    case = make_case(4, objective="multiclass")
    return case.booster.model_to_string()


def test_truncated_text_raises_value_error(model_text, tmp_path):
    end = model_text.index("end of parameters") + len("end of parameters")
    cuts = sorted(set(np.linspace(1, end - 1, 120).astype(int)) | {5, end - 1})
    for cut in cuts:
        path = tmp_path / "cut.txt"
        path.write_text(model_text[:cut])
        if model_text[:cut].startswith("tree\n"):
            with pytest.raises(ValueError, match="LightGBM"):
                treeinner.load(path)
        else:
            with pytest.raises(ValueError):
                treeinner.load(path)


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("leaf_value=", "leaf_valu=", "lacks leaf_value"),
        ("num_leaves=", "num_leaves=x", "num_leaves"),
        ("left_child=", "left_child=99 ", "left_child|child index"),
        ("right_child=", "right_child=-999 ", "right_child|child index"),
        ("split_feature=", "split_feature=9999 ", "split_feature|feature outside"),
        ("threshold=", "threshold=abc ", "not a number"),
        ("decision_type=", "decision_type=14 ", "decision_type|missing type"),
        ("Tree=1\n", "Tree=7\n", "labelled"),
        ("tree_sizes=", "tree_sizes=1 ", "header lists"),
        ("max_feature_idx=", "max_feature_idx=x", "not an integer"),
        ("num_tree_per_iteration=", "num_tree_per_iteration=5", "multiple"),
        ("end of parameters", "end of paramet", "end of parameters"),
        ("pandas_categorical:null", "pandas_categorical:[nul", "pandas_categorical"),
    ],
)
def test_corrupt_text_named(model_text, old, new, match):
    assert old in model_text
    with pytest.raises(ValueError, match=match):
        lgb_adapter.from_string(model_text.replace(old, new, 1))


def test_random_corruption_never_crashes(model_text):
    rng = np.random.default_rng(6)
    body = model_text[: model_text.index("end of trees")]
    for _ in range(300):
        chars = list(body)
        for pos in rng.integers(5, len(chars), size=int(rng.integers(1, 4))):
            chars[pos] = str(rng.choice(list("0123456789-=. \nx")))
        text = "".join(chars) + model_text[len(body) :]
        try:
            lgb_adapter.from_string(text)
        except (ValueError, NotImplementedError):
            pass


def test_corrupt_json(tmp_path, model_text):
    booster = lgb.Booster(model_str=model_text)
    doc = booster.dump_model()
    raw = json.dumps(doc)
    for cut in np.linspace(2, len(raw) - 2, 40).astype(int):
        path = tmp_path / "cut.json"
        path.write_text(raw[:cut])
        with pytest.raises(ValueError):
            treeinner.load(path)

    def broken(fn):
        d = json.loads(raw)
        fn(d)
        return d

    t0 = ("tree_info", 0, "tree_structure")

    def at(d, path):
        for k in path:
            d = d[k]
        return d

    cases = [
        (lambda d: at(d, t0[:2]).pop("tree_structure"), "no tree_structure"),
        (lambda d: at(d, t0).pop("left_child"), "lacks a child"),
        (lambda d: at(d, t0).update(split_feature="a"), "non-numeric"),
        (lambda d: at(d, t0).update(split_feature=999), "feature outside"),
        (lambda d: at(d, t0).update(decision_type="<"), "decision_type"),
        (lambda d: at(d, t0).update(missing_type="Maybe"), "missing_type"),
        (lambda d: at(d, t0).update(threshold="x"), "threshold"),
        (lambda d: at(d, t0)["left_child"].update(split_index=0), "split_index"),
        (lambda d: d.update(num_tree_per_iteration=7), "multiple"),
        (lambda d: d.update(tree_info=[]), "no trees"),
        (lambda d: d.update(objective="mystery"), "mystery"),
    ]
    for fn, match in cases:
        err = NotImplementedError if match == "mystery" else ValueError
        with pytest.raises(err, match=match):
            lgb_adapter.from_dump(broken(fn))
    with pytest.raises(ValueError, match="tree_info"):
        lgb_adapter.from_dump({"trees": []})
