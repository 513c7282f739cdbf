"""Categorical data as users have it: pandas category / object / string / Arrow dictionary
columns, pyarrow Tables and polars frames reach one conversion (narwhals) and give the
booster's own margins for XGBoost, LightGBM and CatBoost categorical models; unseen
categories, unused columns and the hint; the unnamed-NumPy warning; soft labels; the command
line on CSV and Parquet files with string columns."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import cli

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
catboost = pytest.importorskip("catboost")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")  # in the test extra: installed, never skipped there

N = 900
CATS = ["city", "color", "Const"]
CITY = ["paris", "oslo", "rome", "lima", "kyiv", "bern"]
COLOR = ["red", "green", "blue"]


def _data(seed: int, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """String columns (object dtype), a one-level column, numbers; binary labels."""
    rng = np.random.default_rng(seed)
    city = rng.choice(CITY, n)
    color = rng.choice(COLOR, n)
    a = rng.normal(size=n)
    b = rng.uniform(0, 100, size=n)
    X = pd.DataFrame({"a": a, "city": city, "b": b, "color": color, "Const": "same"})
    score = a + np.isin(city, ["paris", "rome", "kyiv"]) * 1.5 - (color == "blue") + b / 50
    y = (score + rng.logistic(size=n) > 1.5).astype(np.int64)
    return X, y


def _categorical(X: pd.DataFrame, cats=CATS) -> pd.DataFrame:
    return X.astype({c: "category" for c in cats if c in X.columns})


X_TRAIN, Y_TRAIN = _data(0, N)
X_EVAL, Y_EVAL = _data(1, 300)


def _with_missing(X: pd.DataFrame) -> pd.DataFrame:
    X = X.copy()
    X.loc[[3, 17, 40], "city"] = None
    X.loc[[5, 41], "color"] = None
    return X


def _kinds(X: pd.DataFrame, cats=CATS) -> dict:
    """Every input kind of the same table (string columns ``cats``)."""
    present = [c for c in cats if c in X.columns]
    Xc = _categorical(X, present)
    levels = {c: sorted({v for v in X[c] if isinstance(v, str)}) for c in present}
    return {
        "pandas-category": lambda: Xc,
        "pandas-object": lambda: X.astype({c: object for c in present}),
        "pandas-string": lambda: X.astype({c: "string" for c in present}),
        "pandas-arrow-dictionary": lambda: pa.Table.from_pandas(Xc, preserve_index=False).to_pandas(
            types_mapper=pd.ArrowDtype
        ),
        "pyarrow-dictionary": lambda: pa.Table.from_pandas(Xc, preserve_index=False),
        "pyarrow-string": lambda: pa.Table.from_pandas(X, preserve_index=False),
        "polars-categorical": lambda: pl.from_pandas(X).with_columns(
            [pl.col(c).cast(pl.Categorical) for c in present]
        ),
        "polars-enum": lambda: pl.from_pandas(X).with_columns(
            [pl.col(c).cast(pl.Enum(levels[c])) for c in present]
        ),
        "polars-string": lambda: pl.from_pandas(X),
    }


KINDS = list(_kinds(X_EVAL))


# ---------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def xgb_model():
    return xgb.XGBClassifier(
        n_estimators=15, max_depth=4, enable_categorical=True, n_jobs=1, max_cat_to_onehot=1
    ).fit(_categorical(X_TRAIN), Y_TRAIN)


@pytest.fixture(scope="module")
def lgb_model():
    """Trained on pandas categoricals (LightGBM stores their categories); ``color`` is never
    split on (its gain is multiplied by 0), but LightGBM keeps its categories."""
    X = _categorical(X_TRAIN.drop(columns="Const"))
    m = lgb.LGBMClassifier(
        n_estimators=15, num_leaves=8, verbose=-1, n_jobs=1, min_data_per_group=20,
        feature_contri=[1.0, 1.0, 1.0, 0.0],
    )  # fmt: skip
    return m.fit(X, Y_TRAIN)


@pytest.fixture(scope="module")
def cb_model():
    return catboost.CatBoostClassifier(
        iterations=15, depth=4, verbose=0, thread_count=1, allow_writing_files=False,
        cat_features=CATS, random_seed=0,
    ).fit(X_TRAIN, Y_TRAIN)  # fmt: skip


def _booster_margin(model, X: pd.DataFrame) -> np.ndarray:
    """The booster's own raw margin on the pandas table (categoricals for XGBoost and
    LightGBM, which refuse strings; the strings for CatBoost)."""
    if isinstance(model, catboost.CatBoost):
        pool = catboost.Pool(X, cat_features=[c for c in CATS if c in X.columns])
        return model.predict(pool, prediction_type="RawFormulaVal")
    Xc = _categorical(X)
    if isinstance(model, lgb.LGBMModel):
        return model.predict(Xc, raw_score=True)
    return model.predict(Xc, output_margin=True)


# ---------------------------------------------------------------------- every kind, margins
@pytest.mark.parametrize("kind", KINDS)
def test_xgboost_every_input_kind(xgb_model, kind):
    X = _with_missing(X_EVAL)
    ours = treeinner.from_model(xgb_model).predict_margin(_kinds(X)[kind]())
    np.testing.assert_array_equal(ours, _booster_margin(xgb_model, X))


@pytest.mark.parametrize("kind", KINDS)
def test_lightgbm_every_input_kind(lgb_model, kind):
    X = _with_missing(X_EVAL.drop(columns="Const"))
    ens = treeinner.from_model(lgb_model)
    assert set(ens.categories) == {1, 3}  # color too, though no split reads it
    ours = ens.predict_margin(_kinds(X)[kind]())
    np.testing.assert_array_equal(ours, _booster_margin(lgb_model, X))


@pytest.mark.parametrize("kind", KINDS)
def test_catboost_every_input_kind(cb_model, kind):
    ours = treeinner.from_model(cb_model).predict_margin(_kinds(X_EVAL)[kind]())
    np.testing.assert_array_equal(ours, _booster_margin(cb_model, X_EVAL))


@pytest.mark.parametrize("kind", ["pandas-object", "polars-categorical", "pyarrow-dictionary"])
def test_attributions_from_every_kind_equal_pandas_category(xgb_model, cb_model, kind):
    """Not only margins: TreeSHAP and TreeInner read the same converted rows."""
    for model in (xgb_model, cb_model):
        X = _kinds(X_EVAL)
        ref = X["pandas-category"]()
        got = X[kind]()
        np.testing.assert_array_equal(
            treeinner.tree_shap(model, got).values, treeinner.tree_shap(model, ref).values
        )
    ti = treeinner.tree_inner(xgb_model, X[kind](), Y_EVAL)
    pd.testing.assert_series_equal(ti, treeinner.tree_inner(xgb_model, ref, Y_EVAL))


def test_numeric_frames_bit_identical():
    """Numeric columns of every library, nullable and boolean ones too, as NumPy gives them."""
    rng = np.random.default_rng(3)
    n = 400
    X = pd.DataFrame(
        {
            "f64": rng.normal(size=n) * 1e6,
            "f32": rng.normal(size=n).astype(np.float32),
            "i64": rng.integers(-(2**40), 2**40, size=n),
            "u8": rng.integers(0, 255, size=n).astype(np.uint8),
            "flag": rng.random(n) < 0.5,
        }
    )
    X.loc[::7, "f64"] = np.nan
    y = (X["f64"].fillna(0) + X["f32"] + X["flag"] > 0).astype(int)
    booster = xgb.XGBClassifier(n_estimators=10, max_depth=5, n_jobs=1).fit(X, y)
    ens = treeinner.from_model(booster)
    ref = booster.predict(X, output_margin=True)
    Xn = X.to_numpy(dtype=np.float64)
    assert np.array_equal(ens.predict_margin(X), ref)
    for frame in (pl.from_pandas(X), pa.Table.from_pandas(X, preserve_index=False)):
        assert np.array_equal(ens.predict_margin(frame), ref)
    nullable = X.astype({"i64": "Int64", "flag": "boolean", "f64": "Float64"})
    nullable.loc[::7, "f64"] = pd.NA
    assert np.array_equal(ens.predict_margin(nullable), ref)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", treeinner.FeatureNamesWarning)
        assert np.array_equal(ens.predict_margin(Xn), ref)


# ---------------------------------------------------------------------- unseen, unused, hint
def _unseen(X: pd.DataFrame) -> pd.DataFrame:
    X = X.copy()
    X.loc[:9, "city"] = "atlantis"
    X.loc[10:14, "color"] = "mauve"
    return X


@pytest.mark.parametrize("kind", ["pandas-object", "polars-string", "pyarrow-string"])
def test_unseen_categories_as_the_booster(xgb_model, lgb_model, cb_model, kind):
    # LightGBM and CatBoost: the booster's own predictions on the same values
    X = _unseen(X_EVAL.drop(columns="Const"))
    with pytest.warns(UserWarning, match="not seen in training.*atlantis"):
        ours = treeinner.from_model(lgb_model).predict_margin(_kinds(X)[kind]())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(ours, _booster_margin(lgb_model, X))
    X = _unseen(X_EVAL)
    ours = treeinner.from_model(cb_model).predict_margin(_kinds(X)[kind]())
    np.testing.assert_array_equal(ours, _booster_margin(cb_model, X))
    # XGBoost refuses unseen categories in a DataFrame: its routing of a code past the
    # trained ones (no split's set contains it) is what we match
    with pytest.warns(UserWarning, match="not seen in training"):
        ours = treeinner.from_model(xgb_model).predict_margin(_kinds(X)[kind]())
    stored = treeinner.from_model(xgb_model).categories
    codes = X.copy()
    for j, c in enumerate(X.columns):
        if c in CATS:  # the booster's codes: positions in its stored categories
            lookup = {v: i for i, v in enumerate(stored[j])}
            codes[c] = [lookup.get(v, len(stored[j])) for v in X[c]]
    codes = codes.astype(np.float64)
    theirs = xgb_model.get_booster().inplace_predict(codes.to_numpy(), predict_type="margin")
    np.testing.assert_array_equal(ours, theirs)
    assert not np.array_equal(ours, _booster_margin(xgb_model, X_EVAL))  # they did matter


def test_unused_string_column_is_ignored(lgb_model, xgb_model):
    """``color`` (LightGBM) and ``Const`` (XGBoost) are never split on: any value works."""
    lgb_ens, xgb_ens = treeinner.from_model(lgb_model), treeinner.from_model(xgb_model)
    assert 3 not in set(lgb_ens.feature[lgb_ens.left >= 0].tolist())
    assert 4 not in set(xgb_ens.feature[xgb_ens.left >= 0].tolist())
    X = X_EVAL.drop(columns="Const")
    ref = lgb_ens.predict_margin(X)
    np.testing.assert_array_equal(ref, _booster_margin(lgb_model, X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(lgb_ens.predict_margin(X.assign(color="mauve")), ref)
    np.testing.assert_array_equal(
        xgb_ens.predict_margin(pl.from_pandas(X_EVAL)), _booster_margin(xgb_model, X_EVAL)
    )


def test_lightgbm_one_level_category_column():
    """The audit's case: a one-level categorical column (``Const``) that LightGBM found
    trivial and never splits on. LightGBM still stores its categories; string columns of
    every kind are mapped by them, in Python and on the command line."""
    X = _categorical(X_TRAIN)
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1, n_jobs=1).fit(X, Y_TRAIN)
    ens = treeinner.from_model(m)
    assert set(ens.categories) == {1, 3, 4}
    ref = _booster_margin(m, X_EVAL)
    for kind in ("pandas-object", "polars-categorical", "pyarrow-string"):
        np.testing.assert_array_equal(ens.predict_margin(_kinds(X_EVAL)[kind]()), ref)


def test_hint_when_strings_cannot_be_mapped():
    """A LightGBM model trained on integer codes stores no category names: strings are
    refused with the column named and the way out; numbers (the codes) work."""
    Xc = _categorical(X_TRAIN)
    codes = Xc.assign(**{c: Xc[c].cat.codes for c in CATS})
    m = lgb.LGBMClassifier(n_estimators=5, verbose=-1, n_jobs=1)
    m.fit(codes, Y_TRAIN, categorical_feature=["city", "color"])
    ens = treeinner.from_model(m)
    assert ens.categories == {}
    for X in (X_EVAL, pl.from_pandas(X_EVAL)):
        with pytest.raises(TypeError, match=r"'city' \(String\).*astype\(\"category\"\)"):
            ens.predict_margin(X)
    ev = _categorical(X_EVAL, CATS)
    ev = ev.assign(**{c: ev[c].cat.codes for c in CATS})
    np.testing.assert_array_equal(ens.predict_margin(ev), m.predict(ev, raw_score=True))
    # a model with stored categories names the numeric features instead
    xm = xgb.XGBClassifier(n_estimators=3, enable_categorical=True, n_jobs=1)
    xm.fit(_categorical(X_TRAIN, ["city", "color", "Const"]), Y_TRAIN)
    bad = X_EVAL.assign(a=X_EVAL["a"].astype(str))
    with pytest.raises(TypeError, match="'a' .*reads these features as numbers"):
        treeinner.from_model(xm).predict_margin(bad)


def test_series_and_duplicates_refused(xgb_model):
    ens = treeinner.from_model(xgb_model)
    with pytest.raises(ValueError, match="got a polars Series"):
        ens.predict_margin(pl.Series([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"do not match.*Missing: \['b'\]"):
        ens.predict_margin(pl.from_pandas(X_EVAL).rename({"b": "b2"}))


# ---------------------------------------------------------------------- column order
@pytest.fixture(scope="module")
def named_numeric():
    rng = np.random.default_rng(5)
    X = pd.DataFrame({"a": rng.normal(size=500), "b": rng.normal(size=500) * 100})
    y = (X["a"] + X["b"] / 100 + rng.logistic(size=500) > 0).astype(int)
    return X, y


def test_numpy_input_warns_once_for_named_models(named_numeric):
    X, y = named_numeric
    m = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X, y)
    arr = X.to_numpy()
    with pytest.warns(treeinner.FeatureNamesWarning, match=r"\(a, b\).*cannot be checked"):
        treeinner.from_model(m).predict_margin(arr)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        treeinner.tree_inner(m, arr, y)
        treeinner.importance(m, arr, y, methods="permutation", n_repeats=3)
    names = [w for w in got if issubclass(w.category, treeinner.FeatureNamesWarning)]
    assert len(names) == 2  # one per call, not per read of X
    assert all(w.filename == __file__ for w in names)  # pointing at the caller's line
    other = xgb.XGBClassifier(n_estimators=4, max_depth=2, n_jobs=1).fit(X, y)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for model in (m, other):  # one line, two models: two calls, two warnings
            treeinner.from_model(model).predict_margin(arr)
    assert sum(issubclass(w.category, treeinner.FeatureNamesWarning) for w in got) == 2
    # swapped columns: exactly what the warning is about
    swapped = arr[:, ::-1]
    with pytest.warns(treeinner.FeatureNamesWarning):
        wrong = treeinner.from_model(m).predict_margin(swapped)
    assert not np.allclose(wrong, m.predict(X, output_margin=True))
    # CatBoost (its own input map) warns the same way
    cbm = catboost.CatBoostClassifier(iterations=5, verbose=0, allow_writing_files=False)
    cbm.fit(X_TRAIN, Y_TRAIN, cat_features=CATS)
    with pytest.warns(treeinner.FeatureNamesWarning):
        treeinner.from_model(cbm).predict_margin(X_EVAL.to_numpy(dtype=object))


def test_no_warning_for_frames_or_unnamed_models(named_numeric, cb_model):
    X, y = named_numeric
    named = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X, y)
    unnamed = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X.to_numpy(), y)
    assert not treeinner.from_model(unnamed).named
    with warnings.catch_warnings():
        warnings.simplefilter("error", treeinner.FeatureNamesWarning)
        for frame in (X, X[["b", "a"]], pl.from_pandas(X), pa.Table.from_pandas(X)):
            treeinner.from_model(named).predict_margin(frame)
        treeinner.tree_inner(named, X, y)
        # permutation reads a converted array internally: still no warning
        treeinner.importance(named, X, y, methods="permutation", n_repeats=2)
        treeinner.unbiased_gain(named, X, y, random_state=0)
        treeinner.tree_inner(unnamed, X.to_numpy(), y)
        treeinner.from_model(cb_model).predict_margin(pl.from_pandas(X_EVAL))
    # a reordered frame is matched by name
    ens = treeinner.from_model(named)
    np.testing.assert_array_equal(ens.predict_margin(X[["b", "a"]]), ens.predict_margin(X))


# ---------------------------------------------------------------------- soft labels
SOFT = np.clip(np.random.default_rng(7).beta(2, 2, size=300), 0.01, 0.99)


@pytest.fixture(scope="module")
def binary_models(named_numeric):
    X, y = named_numeric
    return {
        "xgboost": xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X, y),
        "lightgbm": lgb.LGBMClassifier(n_estimators=8, verbose=-1, n_jobs=1).fit(X, y),
        "catboost": catboost.CatBoostClassifier(
            iterations=8, depth=3, verbose=0, allow_writing_files=False
        ).fit(X, y),
    }


@pytest.mark.parametrize("booster", ["xgboost", "lightgbm", "catboost"])
def test_soft_labels_refused_then_accepted(binary_models, named_numeric, booster):
    X, _ = named_numeric
    X = X.iloc[:300]
    m = binary_models[booster]
    with pytest.raises(ValueError, match=r"must be 0 or 1.*treeinner\.SoftLabels\(y\)"):
        treeinner.tree_inner(m, X, SOFT, attribution="shap")
    soft = treeinner.tree_inner(m, X, treeinner.SoftLabels(SOFT), attribution="shap")
    # TreeInner is affine in y (gradient p - y): the labels' mean with 0/1 labels y0 gives
    # the mean of the two results
    y0 = (np.random.default_rng(8).random(300) < 0.5).astype(float)
    mixed = treeinner.SoftLabels(0.5 * (SOFT + y0))
    got = treeinner.tree_inner(m, X, mixed, attribution="shap")
    hard = treeinner.tree_inner(m, X, y0, attribution="shap")
    np.testing.assert_allclose(
        got.to_numpy(), 0.5 * (soft.to_numpy() + hard.to_numpy()), rtol=1e-9, atol=1e-12
    )
    assert not np.allclose(soft.to_numpy(), hard.to_numpy())
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):  # the marker does not widen [0, 1]
        treeinner.tree_inner(m, X, treeinner.SoftLabels(SOFT * 2), attribution="shap")


def test_soft_labels_marker_reaches_every_path(binary_models, named_numeric):
    X, y = named_numeric
    X, y = X.iloc[:300], y.iloc[:300].to_numpy()
    m = binary_models["xgboost"]
    s = treeinner.SoftLabels(SOFT)
    for call in (
        lambda t: treeinner.importance(m, X, t, methods=["tree_inner", "permutation"]),
        lambda t: treeinner.importance(m, X, t, methods="tree_inner", se=True),
        lambda t: treeinner.significance(m, X, t, methods="tree_inner"),
        lambda t: treeinner.select_features(m, X, t),
        lambda t: treeinner.unbiased_gain(m, X, t, random_state=0),
        lambda t: treeinner.total_gain(m, reference=(X, t)),
        lambda t: treeinner.node_values(m, reference=(X, t)),
    ):
        call(s)  # accepted
        call(np.asarray(s)[:])  # a view of the marked labels keeps the marker
        with pytest.raises(ValueError, match="SoftLabels"):
            call(SOFT)
    # 0/1 labels need no marker, as before
    treeinner.tree_inner(m, X, y)
    # probability-label objectives take [0, 1] labels without it
    rl = xgb.XGBRegressor(objective="reg:logistic", n_estimators=5, n_jobs=1).fit(X, SOFT)
    treeinner.tree_inner(rl, X, SOFT)


# ---------------------------------------------------------------------- command line
def _write(df: pd.DataFrame, path) -> str:
    path = str(path)
    if path.endswith(".parquet"):
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
@pytest.mark.parametrize("booster", ["xgboost", "lightgbm", "catboost"])
def test_cli_reads_string_columns(tmp_path, xgb_model, lgb_model, cb_model, booster, ext):
    model = {"xgboost": xgb_model, "lightgbm": lgb_model, "catboost": cb_model}[booster]
    X = X_EVAL.drop(columns="Const") if booster == "lightgbm" else X_EVAL
    if booster == "xgboost":
        path = str(tmp_path / "m.json")
        model.save_model(path)
    elif booster == "lightgbm":
        path = str(tmp_path / "m.txt")
        model.booster_.save_model(path)
    else:
        path = str(tmp_path / "m.cbm")
        model.save_model(path)
    data = _write(X.assign(label=Y_EVAL), tmp_path / f"valid{ext}")
    out = str(tmp_path / "out.csv")
    argv = ["explain", path, "--data", data, "--target", "label", "--method", "abs_shap"]
    assert cli.main([*argv, "--no-se", "--out", out, "--quiet"]) == 0
    got = pd.read_csv(out, index_col=0)["abs_shap"]
    want = treeinner.importance(model, _categorical(X), Y_EVAL, methods="abs_shap")["abs_shap"]
    np.testing.assert_allclose(got.loc[want.index].to_numpy(), want.to_numpy(), rtol=1e-12)


def test_cli_unused_one_level_column_lightgbm(tmp_path):
    """The audit's r5c: a LightGBM model file whose one-level categorical ``Const`` is never
    split on, and a CSV with string columns."""
    X = _categorical(X_TRAIN)
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1, n_jobs=1).fit(X, Y_TRAIN)
    path = str(tmp_path / "m.txt")
    m.booster_.save_model(path)
    data = _write(X_EVAL.assign(label=Y_EVAL), tmp_path / "valid.csv")
    out = str(tmp_path / "out.csv")
    argv = ["explain", path, "--data", data, "--target", "label", "--method", "abs_shap"]
    assert cli.main([*argv, "--no-se", "--out", out, "--quiet"]) == 0
    got = pd.read_csv(out, index_col=0)["abs_shap"]
    want = treeinner.importance(m, _categorical(X_EVAL), Y_EVAL, methods="abs_shap")["abs_shap"]
    np.testing.assert_allclose(got.loc[want.index].to_numpy(), want.to_numpy(), rtol=1e-12)


def test_cli_text_in_a_numeric_feature(tmp_path, capsys, named_numeric):
    X, y = named_numeric
    m = xgb.XGBClassifier(n_estimators=3, n_jobs=1).fit(X, y)
    path = str(tmp_path / "m.json")
    m.save_model(path)
    data = _write(X.assign(a=X["a"].astype(str) + "x", label=y), tmp_path / "v.csv")
    code = cli.main(["explain", path, "--data", data, "--target", "label", "--no-se", "--quiet"])
    assert code == 1
    assert "column(s) a of" in capsys.readouterr().err


def test_marker_carried_through_copies_and_cli_split(tmp_path, named_numeric, binary_models):
    """``keep_soft`` re-marks labels that were copied (fancy indexing of a plain view), for
    the code paths that copy before the label check; the command line's ``split_data``
    marks the target column on request."""
    from treeinner.cli import _io
    from treeinner.objectives import keep_soft

    s = treeinner.SoftLabels(SOFT)
    copied = np.asarray(s)[np.arange(10)]
    assert not isinstance(copied, treeinner.SoftLabels)
    assert isinstance(keep_soft(s, copied), treeinner.SoftLabels)
    assert keep_soft(SOFT, SOFT[:5]) is not None and not isinstance(
        keep_soft(SOFT, SOFT[:5]), treeinner.SoftLabels
    )
    X, _ = named_numeric
    X = X.iloc[:300]
    ens = treeinner.from_model(binary_models["lightgbm"])
    df = X.assign(label=SOFT)
    for soft in (False, True):
        Xs, ys, _ = _io.split_data(ens, df, "v.csv", "label", None, soft_labels=soft)
        if soft:
            treeinner.tree_inner(ens, Xs, ys, attribution="shap")
        else:
            with pytest.raises(ValueError, match="SoftLabels"):
                treeinner.tree_inner(ens, Xs, ys, attribution="shap")


def test_unused_features_are_not_converted():
    """``as_rows(..., used=)``: a column of a feature no split reads is not looked at (NaN),
    whatever its type; the same column of a used feature is refused."""
    from treeinner import _input

    X = pl.DataFrame({"a": [1.0, 2.0], "s": ["x", "y"]})
    n, blocks = _input.as_rows(X, 2, ["a", "s"], True, None, used=np.array([True, False]))
    arr = _input.join_blocks(blocks, 2)
    assert n == 2 and np.array_equal(arr[:, 0], [1.0, 2.0]) and np.isnan(arr[:, 1]).all()
    with pytest.raises(TypeError, match="'s' \\(String\\)"):
        _input.as_rows(X, 2, ["a", "s"], True, None, used=np.array([True, True]))


def test_cli_soft_labels_flag(tmp_path, capsys, named_numeric, binary_models):
    """``--soft-labels`` on the command line: without it a binary classifier's probability
    target is refused with the command-line spelling of the opt-in; with it, the same scores as
    ``treeinner.SoftLabels`` in Python."""
    X, _ = named_numeric
    X = X.iloc[:300]
    m = binary_models["xgboost"]
    path = str(tmp_path / "m.json")
    m.save_model(path)
    data = _write(X.assign(label=SOFT), tmp_path / "v.csv")
    argv = ["explain", path, "--data", data, "--target", "label", "--no-se", "--quiet"]
    argv += ["--method", "tree_inner_shap"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "pass --soft-labels" in err and "SoftLabels" not in err
    out = str(tmp_path / "s.csv")
    assert cli.main([*argv, "--soft-labels", "--out", out]) == 0
    got = pd.read_csv(out, index_col=0)["tree_inner_shap"]
    want = treeinner.importance(m, X, treeinner.SoftLabels(SOFT), methods="tree_inner_shap")
    np.testing.assert_allclose(got.to_numpy(), want["tree_inner_shap"].to_numpy(), rtol=1e-9)
