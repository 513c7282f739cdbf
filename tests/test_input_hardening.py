"""Bad arguments and data are refused with treeinner's own errors, naming what is wrong (issue
17): numeric features given as categoricals, counts and levels out of range, empty data, bad
labels and weights, columns the dataframe library cannot convert, unknown keywords."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import treeinner
from treeinner import InputError, InputTypeError, TreeinnerError, _api, _input

N = 240


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(17)
    X = pd.DataFrame(rng.normal(size=(N, 4)), columns=["a", "b", "c", "d"])
    X["c"] = rng.integers(0, 4, N).astype(float)
    y = (X["a"] + 0.5 * X["c"] + 0.3 * rng.normal(size=N)).to_numpy()
    return X, y


@pytest.fixture(scope="module")
def reg(data):
    X, y = data
    return xgb.XGBRegressor(n_estimators=4, max_depth=3, n_jobs=1).fit(X, y)


@pytest.fixture(scope="module")
def binary(data):
    X, y = data
    return xgb.XGBClassifier(n_estimators=4, max_depth=3, n_jobs=1).fit(X, (y > 0).astype(int))


@pytest.fixture(scope="module")
def cat_model(data):
    """An XGBoost model whose feature "c" is categorical (its categories stored)."""
    X, y = data
    Xc = X.assign(c=pd.Categorical(X["c"].astype(int)))
    model = xgb.XGBRegressor(
        n_estimators=4, max_depth=3, n_jobs=1, enable_categorical=True, tree_method="hist"
    ).fit(Xc, y)
    return model, Xc


# ------------------------------------------------------------------ categoricals of numbers
def test_numeric_feature_given_as_categorical_is_refused(cat_model):
    """XGBoost refuses a categorical column for a feature it reads as numbers; so does
    treeinner, naming the column, instead of reading the category codes as the values."""
    model, Xc = cat_model
    bad = Xc.assign(a=pd.Categorical(Xc["a"].round(1)))
    with pytest.raises(ValueError):  # the booster's own refusal
        model.predict(bad)
    ens = treeinner.from_model(model)
    assert treeinner.tree_inner(model, Xc, model.predict(Xc)).notna().all()
    for call in (
        lambda: ens.predict_margin(bad),
        lambda: treeinner.predecomp(model, bad),
        lambda: treeinner.tree_inner(model, bad, np.zeros(N)),
    ):
        with pytest.raises(InputError, match=r"'a'.*categorical.*numbers"):
            call()


def test_numeric_model_refuses_a_categorical_column(data, reg):
    """The issue's example: a model with no categorical feature at all (it stores no
    categories) given a pandas Categorical for a feature its splits compare with numbers.
    (Needs ``TreeEnsemble._blocks`` to pass ``numeric=``, the features read by numeric
    splits.)"""
    X, y = data
    bad = X.assign(a=pd.Categorical(X["a"].round(1)))
    for call in (
        lambda: treeinner.from_model(reg).predict_margin(bad),
        lambda: treeinner.tree_shap(reg, bad),
        lambda: treeinner.importance(reg, bad, y, methods=["tree_inner", "permutation"]),
    ):
        with pytest.raises(InputError, match=r"Column 'a' is categorical"):
            call()


def test_categorical_feature_given_as_codes_is_accepted(cat_model):
    """The categorical feature given as numbers (its codes) is what XGBoost accepts: the same
    margins as the categorical column."""
    model, Xc = cat_model
    codes = Xc.assign(c=Xc["c"].cat.codes.astype(float))
    ens = treeinner.from_model(model)
    np.testing.assert_array_equal(ens.predict_margin(codes), ens.predict_margin(Xc))


def test_categorical_column_refused_where_the_model_says_numeric(data):
    """``numeric`` (the features read by numeric splits) refuses a categorical column of such
    a feature also for a model that stores no categories at all; a string column of a numeric
    feature is a type error naming it."""
    X, _ = data
    bad = X.assign(b=pd.Categorical(X["b"].round()))
    names = list(X.columns)
    numeric = np.array([True, True, False, True])
    with pytest.raises(InputError, match="'b'"):
        _input.as_rows(bad, 4, names, True, None, None, numeric)
    n, blocks = _input.as_rows(bad, 4, names, True, None, None, ~numeric)  # codes: accepted
    assert n == N and np.isfinite(next(blocks)[1][:, 1]).all()
    with pytest.raises(InputTypeError, match=r"'a' \(String\)"):
        _input.as_rows(X.assign(a=X["a"].astype(str)), 4, names, True, None)


def test_column_the_library_cannot_convert_is_named(data, reg):
    X, y = data
    when = X.assign(a=pd.Timestamp("2021-01-01"))
    with pytest.raises(InputTypeError, match="'a'"):
        treeinner.tree_inner(reg, when, y)
    decimals = X.assign(a=pd.array(X["a"].round(2).astype(str), dtype="string[python]"))
    with pytest.raises(InputTypeError, match="'a'"):
        treeinner.predecomp(reg, decimals)


def test_failure_inside_the_dataframe_library_is_named(cat_model):
    """Values pandas cannot factorize (unhashable lists) in a categorical feature's column: an
    InputTypeError naming the column, not pandas' own TypeError."""
    model, Xc = cat_model
    bad = Xc.assign(c=pd.Series([[1, 2]] * N, dtype=object))
    with pytest.raises(InputTypeError, match=r"Column 'c' \(.*\) could not be read"):
        treeinner.predecomp(model, bad)


# ------------------------------------------------------------------ counts, levels, flags
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "5", None, np.nan])
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda m, X, y, v: treeinner.importance(m, X, y, methods="tree_inner", n_repeats=v),
         "n_repeats"),
        (lambda m, X, y, v: treeinner.importance(m, X, y, methods="permutation", n_repeats=v),
         "n_repeats"),
        (lambda m, X, y, v: treeinner.unbiased_gain(m, X, y, n_draws=v), "n_draws"),
        (lambda m, X, y, v: treeinner.unbiased_gain(m, X, y, min_samples=v), "min_samples"),
        (lambda m, X, y, v: treeinner.select_features(m, X, y, top_k=v), "top_k"),
    ],
)  # fmt: skip
def test_counts_are_integers_at_least_one(data, reg, call, name, bad):
    """``n_repeats=0`` gave an all-NaN permutation column; every count is an integer >= 1
    (a ValueError, and for a value that is no integer also a TypeError), named."""
    X, y = data
    if bad is None and name == "top_k":
        return  # top_k=None is "no limit"
    with pytest.raises(InputError, match=rf"{name} must be (None or )?an integer >= 1, got"):
        call(reg, X, y, bad)
    if not isinstance(bad, int) or isinstance(bad, bool):
        with pytest.raises(TypeError, match=name):
            call(reg, X, y, bad)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, np.nan, "0.05", True])
def test_levels_are_numbers_strictly_between_0_and_1(data, reg, bad):
    X, y = data
    with pytest.raises(InputError, match=r"alpha must be a number strictly between 0 and 1"):
        treeinner.significance(reg, X, y, alpha=bad)
    with pytest.raises(InputError, match="alpha"):
        treeinner.saabas(reg, X).importance(alpha=bad)


@pytest.mark.parametrize("bad", [1, 0, -2, 2.5, True, "5"])
def test_cv_is_an_integer_of_at_least_two_folds(data, reg, bad):
    X, y = data
    with pytest.raises(InputError, match="cv"):
        treeinner.significance(reg, X, y, cv=bad)


def test_flags_are_booleans(data, reg):
    X, y = data
    for call, name in (
        (lambda v: treeinner.tree_inner(reg, X, y, per_split=v), "per_split"),
        (lambda v: treeinner.unbiased_gain(reg, X, y, per_split=v), "per_split"),
        (lambda v: treeinner.importance(reg, X, y, methods="tree_inner", se=v), "se"),
    ):
        for bad in ("yes", 1, None):
            with pytest.raises(InputTypeError, match=rf"{name} must be True or False"):
                call(bad)


def test_the_validators_name_the_argument_and_range():
    assert _api.check_count("k", np.int64(3)) == 3
    assert _api.check_fraction("f", 0.25) == 0.25
    assert _api.check_real("t", -np.inf) == -np.inf
    for bad, kind in ((2.0, TypeError), (False, TypeError), (0, ValueError)):
        with pytest.raises(kind, match=r"k must be an integer >= 1, got"):
            _api.check_count("k", bad)
    with pytest.raises(InputError, match=r"cv must be an integer >= 2, got 1"):
        _api.check_count("cv", 1, minimum=2)
    with pytest.raises(InputError, match=r"t must be a real number \(not NaN\)"):
        _api.check_real("t", float("nan"))


def test_cli_refuses_n_repeats_zero_before_any_work(tmp_path, data, reg):
    """``--n-repeats 0`` exited 0 when permutation was not among the methods."""
    X, y = data
    reg.save_model(tmp_path / "m.json")
    X.assign(y=y).to_csv(tmp_path / "d.csv", index=False)
    argv = ["explain", "m.json", "--data", "d.csv", "--target", "y", "--n-repeats", "0"]
    proc = subprocess.run(
        [sys.executable, "-m", "treeinner", *argv], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "treeinner: error: --n-repeats must be an integer >= 1, got 0.\n"


# ------------------------------------------------------------------ empty data
@pytest.mark.parametrize(
    "call",
    [
        lambda m, X, y: treeinner.importance(m, X, y),
        lambda m, X, y: treeinner.tree_inner(m, X, y),
        lambda m, X, y: treeinner.tree_inner(m, X, y, per_split=True),
        lambda m, X, y: treeinner.forest_inner(m, X, y),
        lambda m, X, y: treeinner.unbiased_gain(m, X, y, random_state=0),
        lambda m, X, y: treeinner.significance(m, X, y),
        lambda m, X, y: treeinner.select_features(m, X, y),
    ],
)
def test_empty_data_is_refused(data, reg, call):
    """Empty X gave all-zero importances and ``select_features`` an empty list."""
    X, y = data
    with pytest.raises(InputError, match="X has no rows"):
        call(reg, X.iloc[:0], y[:0])
    with pytest.raises(InputError, match="features"):  # no columns
        call(reg, X[[]], y)


def test_attributions_of_no_rows_are_no_rows(data, reg):
    """Per-row results of no rows are empty, as before (nothing is summed over them)."""
    X, _ = data
    assert treeinner.predecomp(reg, X.iloc[:0]).values.shape == (0, 4)
    assert treeinner.tree_shap(reg, X.iloc[:0]).values.shape == (0, 4)


def test_empty_reference_is_refused(data, reg):
    X, y = data
    with pytest.raises(InputError, match="reference's X_train has no rows"):
        treeinner.tree_inner(reg, X, y, reference=(X.iloc[:0], y[:0]))


# ------------------------------------------------------------------ labels and weights
def test_bad_labels_are_refused(data, reg, binary):
    X, y = data
    for bad, match in (
        (y[:-1], "rows but y has"),
        (np.where(np.arange(N) == 3, np.nan, y), "NaN or infinite"),
        (np.where(np.arange(N) == 3, np.inf, y), "NaN or infinite"),
        (y.astype(str), "y must be numeric"),
        (np.c_[y, y], "y must be 1-D"),
    ):
        with pytest.raises(InputError, match=match):
            treeinner.tree_inner(reg, X, bad)
    with pytest.raises(InputError, match=r"labels must be in \[0, 1\]"):
        treeinner.tree_inner(binary, X, (y > 0) + 1.0)
    with pytest.raises(InputError, match="SoftLabels"):
        treeinner.tree_inner(binary, X, np.full(N, 0.3))
    soft = treeinner.tree_inner(binary, X, treeinner.SoftLabels(np.full(N, 0.3)))
    assert np.isfinite(soft).all()


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (np.where(np.arange(N) == 5, -1.0, 1.0), InputError, "non-negative"),
        (np.where(np.arange(N) == 5, np.nan, 1.0), InputError, "finite"),
        (np.zeros(N), InputError, "zero for every row"),
        (np.ones(N - 2), InputError, r"must have shape \(240,\) like X's rows, got \(238,\)"),
        (np.array(["x"] * N), InputTypeError, "array of 240 numbers"),
        (2.0, InputTypeError, "array of 240 numbers"),
    ],
)
def test_bad_sample_weight_is_refused(data, reg, bad, error, match):
    X, y = data
    for call in (
        lambda: treeinner.tree_inner(reg, X, y, sample_weight=bad),
        lambda: treeinner.unbiased_gain(reg, X, y, sample_weight=bad),
        lambda: treeinner.importance(reg, X, y, methods="abs_saabas", sample_weight=bad),
    ):
        with pytest.raises(error, match=f"sample_weight.*{match}"):
            call()


# ------------------------------------------------------------------ infinities
def test_infinite_values_are_values(data, reg):
    """XGBoost's inplace_predict, LightGBM and CatBoost route +-inf as values past every
    threshold (XGBoost's DMatrix alone refuses them): treeinner gives the same margins and
    finite scores."""
    X, y = data
    Xi = X.copy()
    Xi.iloc[::3, 0] = np.inf
    Xi.iloc[1::3, 0] = -np.inf
    ens = treeinner.from_model(reg)
    want = reg.get_booster().inplace_predict(Xi, predict_type="margin")
    np.testing.assert_allclose(ens.predict_margin(Xi), want, rtol=1e-6)
    assert np.isfinite(treeinner.tree_inner(reg, Xi, y)).all()


# ------------------------------------------------------------------ keywords and others
def test_unknown_keywords_and_missing_arguments_are_input_type_errors(data, reg):
    X, y = data
    with pytest.raises(InputTypeError, match=r"unexpected keyword argument 'foo'.*takes model"):
        treeinner.tree_inner(reg, X, y, foo=1)
    with pytest.raises(InputTypeError, match="missing a required argument: 'y'"):
        treeinner.tree_inner(reg, X)
    with pytest.raises(InputTypeError, match="methods must be a name or a list of names"):
        treeinner.importance(reg, X, y, methods=None)


def test_attribution_output_out_of_range(data, reg):
    X, _ = data
    with pytest.raises(InputError, match=r"output must be an int in \[0, 1\)"):
        treeinner.saabas(reg, X).to_frame(output=5)


def test_not_data_at_all(reg):
    for bad in (None, 3.0, "X.csv", {"a": [1.0]}):
        with pytest.raises(TreeinnerError):
            treeinner.tree_inner(reg, bad, np.zeros(1))
