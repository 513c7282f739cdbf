"""Attribution.to_shap() and treeinner.plot on tables with categorical columns (pandas
``category``, ``object`` and ``string``, pyarrow dictionaries): the Explanation's arrays and
their slices, every shap plot, for XGBoost, LightGBM and CatBoost categorical models."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import treeinner  # noqa: E402
import treeinner.plot as tplot  # noqa: E402
from tests._helpers import quiet_ensemble  # noqa: E402

shap = pytest.importorskip("shap")

CATS = ["city", "colour", "size"]
CITIES = ["Bergen", "Lyon", "Oslo", "Porto", "Riga"]  # sorted: their codes are 0..4


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _table(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Two numeric columns (one with NaN) and three string columns (city with missing
    values), a binary and a 3-class label that depend on both."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "city": rng.choice(CITIES, size=n).astype(object),
            "colour": rng.choice(["red", "green", "blue"], size=n).astype(object),
            "age": rng.integers(18, 80, size=n).astype(np.float64),
            "size": rng.choice(["S", "M", "L", "XL"], size=n).astype(object),
        }
    )
    X.loc[rng.random(n) < 0.1, "age"] = np.nan
    X.loc[rng.random(n) < 0.1, "city"] = None
    effect = X["city"].map({"Bergen": 1.5, "Lyon": -1.0, "Oslo": 0.5, "Porto": -0.5})
    s = X["x"] + effect.fillna(0.0).to_numpy() + (X["colour"] == "red") * 1.0
    y = (s + 0.5 * rng.normal(size=n) > 0.3).astype(int).to_numpy()
    yk = np.digitize(s + 0.5 * rng.normal(size=n), [-0.5, 1.0])
    return X, y, yk


def _as(X: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The string columns of X as pandas category, object, string dtype, or mixed (one each)."""
    kinds = {"mixed": ["category", object, "string"]}.get(kind, [kind] * 3)
    return X.astype(dict(zip(CATS, kinds, strict=True)))


def _for_catboost(X: pd.DataFrame) -> pd.DataFrame:
    return X.fillna({"city": "NA"})  # CatBoost refuses missing categorical values


def _model(booster: str, multiclass: bool = False):
    """A small categorical model of ``booster`` (its ensemble, converted without the
    conversion's warnings) and the frame it explains (120 rows)."""
    X, y, yk = _table(600, 0)
    label = yk if multiclass else y
    Xv = _table(120, 1)[0]
    if booster == "xgboost":
        import xgboost as xgb

        cls = xgb.XGBClassifier(
            n_estimators=12, max_depth=3, enable_categorical=True, tree_method="hist",
            n_jobs=1, random_state=0,
        )  # fmt: skip
        return quiet_ensemble(cls.fit(_as(X, "category"), label)), _as(Xv, "category")
    if booster == "lightgbm":
        import lightgbm as lgb

        cls = lgb.LGBMClassifier(
            n_estimators=12, num_leaves=8, min_child_samples=5, verbose=-1, n_jobs=1,
            random_state=0,
        )  # fmt: skip
        return quiet_ensemble(cls.fit(_as(X, "category"), label)), _as(Xv, "category")
    import catboost as cb

    cls = cb.CatBoostClassifier(
        iterations=12, depth=3, cat_features=CATS, thread_count=1, verbose=0,
        allow_writing_files=False, random_seed=0,
        loss_function="MultiClass" if multiclass else "Logloss",
    )  # fmt: skip
    return quiet_ensemble(cls.fit(_for_catboost(X), label)), _for_catboost(Xv)


@pytest.fixture(scope="module", params=["xgboost", "lightgbm", "catboost"])
def case(request):
    """(booster, its attribution (TreeSHAP) of the explained rows, those rows with string
    columns as ``object``)."""
    model, Xv = _model(request.param)
    attr = treeinner.tree_shap(model, Xv)
    margin = model.predict_margin(Xv)
    return request.param, attr, _as(Xv, object), margin


def _expected(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``data`` and ``display_data`` to_shap should give for X: numeric columns as floats,
    string columns as the codes of their sorted values and as the labels (NaN missing)."""
    n = X.shape[0]
    data = np.empty(X.shape)
    display = np.empty(X.shape, dtype=object)
    for j, c in enumerate(X.columns):
        col = X[c]
        if c in CATS:
            labels = sorted(col.dropna().astype(str).unique())
            present = col.notna().to_numpy()
            codes = np.full(n, np.nan)
            codes[present] = [labels.index(str(v)) for v in col[present]]
            data[:, j] = codes
            display[:, j] = np.where(present, col.to_numpy(dtype=object), np.nan)
        else:
            data[:, j] = col.to_numpy(dtype=np.float64)
            display[:, j] = data[:, j]
    return data, display


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Object arrays equal, NaN equal to NaN."""
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    return a.shape == b.shape and all(
        (pd.isna(u) and pd.isna(v)) or u == v for u, v in zip(a.ravel(), b.ravel(), strict=True)
    )


# ---------------------------------------------------------------------- the Explanation
def test_explanation_arrays_and_slices(case):
    booster, attr, X, margin = case
    e = attr.to_shap(X)
    n, p = X.shape
    assert e.values.shape == (n, p) and e.base_values.shape == (n,)
    np.testing.assert_array_equal(e.values, attr.values)
    # additive to the margin (XGBoost sums its trees in float32)
    np.testing.assert_allclose(e.values.sum(axis=1) + e.base_values, margin, atol=1e-6)
    assert list(e.feature_names) == list(X.columns)
    data, display = _expected(X)
    assert e.data.dtype == np.float64 and e.data.shape == (n, p)
    np.testing.assert_array_equal(e.data, data)
    assert e.display_data.dtype == object and e.display_data.shape == (n, p)
    assert _same(e.display_data, display)
    if booster != "catboost":
        assert np.isnan(e.data[:, 1]).any()  # missing cities stay missing
    # slices keep values, data and display_data aligned
    j = list(X.columns).index("city")
    for i in (0, 7, n - 1):
        r = e[i]
        assert r.values.shape == (p,) and r.base_values == e.base_values[i]
        np.testing.assert_array_equal(r.values, attr.values[i])
        np.testing.assert_array_equal(r.data, data[i])
        assert _same(r.display_data, display[i])
    col = e[:, "city"]
    np.testing.assert_array_equal(col.values, attr.values[:, j])
    np.testing.assert_array_equal(col.data, data[:, j])
    assert _same(col.display_data, display[:, j])
    part = e[10:30]
    assert part.values.shape == (20, p) and part.display_data.shape == (20, p)
    assert _same(part.display_data, display[10:30])
    rows = np.array([5, 2, 40])
    assert _same(e[rows].display_data, display[rows])
    assert _same(e[3, "colour"].display_data, X["colour"].iloc[3])
    assert e[3, "colour"].data == data[3, 2]


def test_all_column_kinds_give_one_explanation(case):
    import pyarrow as pa

    _, attr, X, _ = case
    ref = attr.to_shap(X)
    frames = {kind: _as(X, kind) for kind in ("category", "string", "mixed")} | {
        "reversed columns": X[X.columns[::-1]],
        "object ndarray": X.to_numpy(dtype=object),
        "pyarrow table (dictionary columns)": pa.Table.from_pandas(
            _as(X, "category"), preserve_index=False
        ),
        "arrow-backed strings": X.astype({c: pd.ArrowDtype(pa.string()) for c in CATS}),
    }
    for kind, frame in frames.items():
        e = attr.to_shap(frame)
        np.testing.assert_array_equal(e.data, ref.data, err_msg=kind)
        assert _same(e.display_data, ref.display_data), kind


def test_category_codes_are_the_frames_own():
    """A pandas categorical keeps its own codes and category order (not sorted labels)."""
    model, Xv = _model("xgboost")
    attr = treeinner.tree_shap(model, Xv)
    X = Xv.copy()
    X["city"] = X["city"].cat.reorder_categories(CITIES[::-1])
    e = attr.to_shap(X)
    codes = X["city"].cat.codes.to_numpy().astype(np.float64)
    codes[codes < 0] = np.nan
    np.testing.assert_array_equal(e.data[:, 1], codes)
    assert _same(e.display_data[:, 1], X["city"].astype(object).to_numpy())


def test_multiclass_slices():
    model, Xv = _model("catboost", multiclass=True)
    attr = treeinner.tree_shap(model, Xv)
    X = _as(Xv, "string")
    e = attr.to_shap(X)
    n, p = X.shape
    assert e.values.shape == (n, p, 3) and e.base_values.shape == (n, 3)
    assert e.display_data.shape == (n, p)
    _, display = _expected(X)
    ek = e[:, :, 2]
    np.testing.assert_array_equal(ek.values, attr.values[:, :, 2])
    assert _same(ek.display_data, display)
    assert _same(e[4, :, 1].display_data, display[4])
    ax = shap.plots.waterfall(e[4, :, 1], max_display=p + 1, show=False)
    assert f"{display[4, 1]} = city" in [t.get_text() for t in ax.get_yticklabels()]
    plt.close("all")
    shap.plots.beeswarm(ek, show=False)
    plt.close("all")
    shap.plots.scatter(e[:, "colour", 0], show=False)
    k1 = attr.to_shap(X, output=1)
    assert k1.values.shape == (n, p) and _same(k1.display_data, display)


def test_numeric_data_has_no_display_data():
    import xgboost as xgb

    X, y, _ = _table(300, 2)
    num = X[["x", "age"]]
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(num, y)
    e = treeinner.tree_shap(model, num).to_shap(num)
    assert e.display_data is None
    np.testing.assert_array_equal(e.data, num.to_numpy())


def test_unusable_column_is_named():
    model, Xv = _model("lightgbm")
    attr = treeinner.tree_shap(model, Xv)
    bad = _as(Xv, object).assign(colour=[(1, 2)] * Xv.shape[0])
    with pytest.raises(ValueError, match="'colour'.*neither numeric, string nor categorical"):
        attr.to_shap(bad)


# ---------------------------------------------------------------------- shap's plots
def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def test_every_shap_plot(case):
    _, attr, X, _ = case
    X = _as(X, "mixed")  # a category, an object and a string column
    e = attr.to_shap(X)
    n, p = e.values.shape
    names = list(X.columns)
    _, display = _expected(X)
    i = int(np.flatnonzero(X["city"].notna().to_numpy())[0])
    row = display[i]

    ax = shap.plots.waterfall(e[i], max_display=p + 1, show=False)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for c in CATS:
        assert f"{row[names.index(c)]} = {c}" in labels
    plt.close("all")

    fig = shap.plots.force(e[i], matplotlib=True, show=False)
    shown = [t for t in _texts(fig) if " = " in t]
    assert shown and all(t.split(" = ")[0] in names for t in shown)
    for t in shown:
        c, v = t.split(" = ", 1)
        if c in CATS:
            assert v == row[names.index(c)]
    plt.close("all")
    vis = shap.plots.force(e[i])  # the JavaScript one
    for j, f in vis.data["features"].items():
        if names[j] in CATS:
            assert f["value"] == row[j]
    assert type(shap.plots.force(e[:20])).__name__ == "AdditiveForceArrayVisualizer"

    ax = shap.plots.scatter(e[:, "colour"], show=False)
    assert sorted(t.get_text() for t in ax.get_xticklabels()) == ["blue", "green", "red"]
    offsets = np.vstack([c.get_offsets() for c in ax.collections if c.get_offsets().size])
    assert set(np.unique(np.round(offsets[:, 0]))) <= {0.0, 1.0, 2.0}  # codes (jittered)
    plt.close("all")
    shap.plots.scatter(e[:, "city"], color=e, show=False)  # a column with missing values
    plt.close("all")

    ax = shap.plots.beeswarm(e, max_display=p, show=False)
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == sorted(names)
    assert sum(c.get_offsets().shape[0] for c in ax.collections) == n * p
    plt.close("all")

    ax = shap.plots.bar(e, max_display=p, show=False)
    widths = sorted((r.get_width() for r in ax.patches if r.get_width() > 0), reverse=True)
    mean_abs = np.sort(np.abs(attr.values).mean(axis=0))[::-1]
    np.testing.assert_allclose(widths, mean_abs[mean_abs > 0])
    plt.close("all")

    ax = shap.plots.heatmap(e[:60], max_display=p + 1, show=False)
    assert set(names) <= {t.get_text() for t in ax.get_yticklabels()}
    plt.close("all")

    shap.decision_plot(
        e.base_values[i], e.values[i], features=e.display_data[i], feature_names=names,
        show=False,
    )  # fmt: skip
    texts = _texts(plt.gcf())
    for c in CATS:
        assert f"({row[names.index(c)]})" in {t.strip() for t in texts}
    plt.close("all")
    shap.decision_plot(
        e.base_values[0], e.values[:20], features=e.display_data[:20], feature_names=names,
        show=False,
    )  # fmt: skip
    plt.close("all")

    shap.summary_plot(e, show=False)
    assert sorted(t.get_text() for t in plt.gca().get_yticklabels()) == sorted(names)
    plt.close("all")
    shap.summary_plot(e.values, e.display_data, feature_names=names, show=False)
    plt.close("all")

    shap.dependence_plot(
        "colour", e.values, e.data, display_features=e.display_data, feature_names=names,
        interaction_index="city", show=False,
    )  # fmt: skip
    assert sorted(t.get_text() for t in plt.gca().get_xticklabels()) == ["blue", "green", "red"]
    plt.close("all")


# ---------------------------------------------------------------------- treeinner's plots
def test_treeinner_plots_on_string_columns(case):
    _, attr, X, _ = case
    X = _as(X, "string")
    data, _ = _expected(X)
    ax = tplot.summary(attr, X)
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == sorted(X.columns)
    drawn = {c.get_label(): c for c in ax.collections if c.get_label()}
    assert ("city (missing)" in drawn) == bool(np.isnan(data[:, 1]).any())
    assert drawn["size"].get_offsets().shape[0] == X.shape[0]
    plt.close("all")

    ax = tplot.dependence(attr, X, "city", color="colour")
    sc = next(c for c in ax.collections if c.get_label() == "city")
    xy = np.ma.filled(sc.get_offsets().astype(np.float64), np.nan)
    np.testing.assert_array_equal(xy[:, 0], data[:, 1])  # placed by code (NaN: missing)
    has = ~np.isnan(data[:, 1])
    np.testing.assert_array_equal(xy[has, 1], attr.values[has, 1])
    np.testing.assert_array_equal(sc.get_array(), data[:, 2])  # coloured by colour's code
    cities = sorted(X["city"].dropna().unique())
    assert [t.get_text() for t in ax.get_xticklabels()] == cities
    cbar = ax.figure.axes[-1]
    assert [t.get_text() for t in cbar.get_yticklabels()] == ["blue", "green", "red"]
    plt.close("all")

    ax = tplot.dependence(attr, X, "size")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["L", "M", "S", "XL"]
