"""treeinner.plot: content of the rendered figures (Agg backend), shap's plots on to_shap(),
lazy import of matplotlib and input errors."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xgboost as xgb  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

import treeinner  # noqa: E402
import treeinner.plot as tplot  # noqa: E402

NAMES = ["a", "b", "c", "d", "e"]
Z95 = 1.959963984540054  # z_{0.975}: half-width of a 95% interval in standard errors


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def models():
    """A regression model overfit on 150 rows (noise features d, e score negative TreeInner on
    held-out rows) and a 3-class model, with held-out DataFrames."""
    rng = np.random.default_rng(3)
    n = 450
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=NAMES)
    X.loc[rng.random(n) < 0.15, "c"] = np.nan
    s = 2 * X["a"] + X["b"] ** 2 + 0.5 * X["c"].fillna(0)
    y = (s + rng.normal(size=n)).to_numpy()
    prm = {"max_depth": 5, "eta": 0.3, "nthread": 1, "seed": 0, "tree_method": "hist"}
    reg = xgb.train({**prm, "objective": "reg:squarederror"}, xgb.DMatrix(X[:150], y[:150]), 40)
    yc = np.digitize(s + 0.5 * rng.normal(size=n), [0.0, 2.0]).astype(float)
    mc = xgb.train(
        {**prm, "max_depth": 3, "objective": "multi:softprob", "num_class": 3},
        xgb.DMatrix(X[:150], yc[:150]),
        8,
    )
    return reg, mc, X[150:].reset_index(drop=True), y[150:], yc[150:]


def _frame():
    """Scores of two methods on different scales, one with standard errors."""
    return pd.DataFrame(
        {
            "tree_inner": [3.0, -1.0, 0.5, 2.0, -0.5],
            "abs_shap": [0.1, 0.4, 0.05, 0.3, 0.15],
            "tree_inner_se": [0.3, 0.2, 0.1, 0.4, 0.05],
        },
        index=NAMES,
    )


def _bars(ax):
    """method label -> (y centres, widths, container) of its horizontal bars."""
    out = {}
    for cont in ax.containers:
        if hasattr(cont, "patches"):
            ys = np.array([r.get_y() + r.get_height() / 2 for r in cont.patches])
            ws = np.array([r.get_width() for r in cont.patches])
            out[cont.get_label()] = (ys, ws, cont)
    return out


def _ticks(ax):
    return [t.get_text() for t in ax.get_yticklabels()]


def _scatters(ax):
    return {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}


def _halves(cont):
    """Half-lengths and centres of a bar container's horizontal error bars."""
    segs = cont.errorbar.lines[2][0].get_segments()
    half = np.array([(s[1][0] - s[0][0]) / 2 for s in segs])
    centre = np.array([(s[1][0] + s[0][0]) / 2 for s in segs])
    return half, centre


# ---------------------------------------------------------------------- import
def test_import_does_not_load_matplotlib():
    code = (
        "import sys, treeinner, treeinner.plot; "
        "assert treeinner.plot.summary; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_matplotlib_names_the_extra(monkeypatch, models):
    reg, _, X, _, _ = models
    attr = treeinner.predecomp(reg, X)
    for mod in ("matplotlib", "matplotlib.pyplot", "matplotlib.cm", "matplotlib.colors"):
        monkeypatch.setitem(sys.modules, mod, None)
    for call in (
        lambda: tplot.importance(_frame()),
        lambda: tplot.summary(attr, X),
        lambda: tplot.dependence(attr, X, "a"),
    ):
        with pytest.raises(ImportError, match=r"treeinner\[plot\]"):
            call()


# ---------------------------------------------------------------------- importance
def test_importance_bars_order_signs_and_normalization():
    frame = _frame()
    ax = tplot.importance(frame)
    ti, ab = frame["tree_inner"].to_numpy(), frame["abs_shap"].to_numpy()
    order = np.argsort(-ti)  # a, d, c, e, b
    assert _ticks(ax) == [NAMES[i] for i in order]
    lo, hi = ax.get_ylim()
    assert lo > hi  # first feature drawn at the top
    bars = _bars(ax)
    assert list(bars) == ["tree_inner", "abs_shap"]  # no bars for the _se column
    y_ti, w_ti, c_ti = bars["tree_inner"]
    y_ab, w_ab, c_ab = bars["abs_shap"]
    assert len(w_ti) == len(w_ab) == 5
    # each method divided by its sum of |scores|: signs kept, both on one scale
    np.testing.assert_allclose(w_ti, ti[order] / np.abs(ti).sum())
    np.testing.assert_allclose(w_ab, ab[order] / ab.sum())
    assert np.abs(w_ti).sum() == pytest.approx(1.0) and w_ab.sum() == pytest.approx(1.0)
    assert w_ti[_ticks(ax).index("b")] < 0 and w_ti[_ticks(ax).index("e")] < 0
    assert np.sum(w_ti < 0) == 2 and np.all(w_ab > 0)
    # grouped: both bars of a feature around its tick, tree_inner above abs_shap
    np.testing.assert_allclose((y_ti + y_ab) / 2, np.arange(5))
    assert np.all(y_ti < y_ab)
    # 95% intervals from tree_inner_se, scaled like the scores; none for abs_shap
    assert c_ab.errorbar is None
    half, centre = _halves(c_ti)
    se = frame["tree_inner_se"].to_numpy()[order] / np.abs(ti).sum()
    np.testing.assert_allclose(half, Z95 * se)
    np.testing.assert_allclose(centre, w_ti)
    assert "95% intervals" in ax.get_title()
    # alpha=None: +- one standard error, as before; another alpha: its z
    half, _ = _halves(_bars(tplot.importance(frame, alpha=None))["tree_inner"][2])
    np.testing.assert_allclose(half, se)
    ax = tplot.importance(frame, alpha=0.2)
    half, _ = _halves(_bars(ax)["tree_inner"][2])
    np.testing.assert_allclose(half, 1.2815515655446004 * se)
    assert "80% intervals" in ax.get_title()
    ax = tplot.importance(frame)
    # zero line, labels, legend
    assert any(
        np.allclose(line.get_xdata(), 0.0) and line.get_ydata()[0] != line.get_ydata()[1]
        for line in ax.get_lines()
    )
    assert "sum of |scores|" in ax.get_xlabel()
    assert ax.get_ylabel() == "feature"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["tree_inner", "abs_shap"]


def test_importance_options():
    frame = _frame()
    fig, ax0 = plt.subplots()
    ax = tplot.importance(frame, methods=["abs_shap"], normalize=False, ax=ax0, top=3)
    assert ax is ax0
    (ys, ws, cont), *rest = _bars(ax).values()
    assert not rest
    ab = frame["abs_shap"]
    top3 = ab.sort_values(ascending=False).index[:3]
    assert _ticks(ax) == list(top3)
    np.testing.assert_allclose(ws, ab[top3])  # raw scores
    assert ax.get_xlabel() == "score"
    # methods in the given order: sorted by the first one named
    ax = tplot.importance(frame, methods=["abs_shap", "tree_inner"])
    assert _ticks(ax) == list(ab.sort_values(ascending=False).index)
    assert list(_bars(ax)) == ["abs_shap", "tree_inner"]
    # a Series, and NaN scores: no bar length, sorted last
    s = frame["tree_inner"].copy()
    s["a"] = np.nan
    ax = tplot.importance(s)
    assert _ticks(ax)[-1] == "a" and _ticks(ax)[0] == "d"
    ((_, ws, _),) = _bars(ax).values()
    assert np.isnan(ws[-1]) and np.nansum(np.abs(ws)) == pytest.approx(1.0)


def test_importance_from_bootstrap_frame(models):
    reg, _, X, y, _ = models
    frame = treeinner.importance(
        reg, X, y, methods=["tree_inner", "abs_predecomp"], n_bootstrap=8, random_state=0
    )
    ti = frame["tree_inner"]
    assert (ti < 0).any()  # the overfit model: some feature scores negative held out
    ax = tplot.importance(frame)
    bars = _bars(ax)
    ticks = _ticks(ax)
    assert ticks == list(ti.sort_values(ascending=False).index)
    _, w, cont = bars["tree_inner"]
    np.testing.assert_array_equal(np.sign(w), np.sign(ti[ticks].to_numpy()))
    for m in ("tree_inner", "abs_predecomp"):
        assert bars[m][2].errorbar is not None
        half, _ = _halves(bars[m][2])
        scale = np.abs(frame[m]).sum()
        np.testing.assert_allclose(half, Z95 * frame[f"{m}_se"][ticks].to_numpy() / scale)
        assert np.all(half > 0)
    assert not _scatters(ax)  # no q-values: no marks


def _marks(ax):
    return [c for c in ax.collections if c.get_label().startswith("q <= ")]


def test_importance_from_significance_table(models):
    """The long table of treeinner.significance: bars are its scores, error bars its 95%
    intervals after normalization, stars at the bars with q <= alpha; the frame of
    importance(se=True) draws the same intervals."""
    reg, _, X, y, _ = models
    methods = ["tree_inner", "abs_predecomp", "total_gain"]
    table = treeinner.significance(reg, X, y, methods=methods)
    ax = tplot.importance(table)
    ticks = _ticks(ax)
    ti = table[table["method"] == "tree_inner"].set_index("feature")
    assert ticks == list(ti["score"].sort_values(ascending=False).index)
    bars = _bars(ax)
    assert list(bars) == methods
    marks = _marks(ax)
    assert len(marks) == 1 and marks[0].get_label() == "q <= 0.05"
    star_xy = {tuple(np.round(xy, 12)) for xy in marks[0].get_offsets()}
    expected_stars = set()
    for m in methods:
        rows = table[table["method"] == m].set_index("feature").loc[ticks]
        scale = np.abs(rows["score"]).sum()
        ys, widths, cont = bars[m]
        np.testing.assert_allclose(widths, rows["score"] / scale)
        if m == "total_gain":  # no standard error: no error bars, no stars
            assert cont.errorbar is None
            continue
        half, centre = _halves(cont)
        np.testing.assert_allclose(half, Z95 * rows["se"].to_numpy() / scale)
        np.testing.assert_allclose(centre, widths)
        sig = (rows["q_value"] <= 0.05).to_numpy()
        ends = widths + half
        expected_stars |= {tuple(np.round(xy, 12)) for xy in zip(ends[sig], ys[sig])}
    assert star_xy == expected_stars
    assert star_xy  # something is marked
    # tree_inner: the noise features are not marked, the strong ones are
    sig_ti = set(ti.index[ti["q_value"] <= 0.05])
    assert "a" in sig_ti and not {"d", "e"} & sig_ti
    # importance(se=True): the same intervals from its m_se columns, no stars (no q-values)
    wide = treeinner.importance(reg, X, y, methods=methods[:2], se=True)
    ax2 = tplot.importance(wide)
    for m in methods[:2]:
        np.testing.assert_allclose(_halves(_bars(ax2)[m][2])[0], _halves(bars[m][2])[0])
    assert not _marks(ax2)
    # alpha=None: +- 1 se and no stars
    ax3 = tplot.importance(table, alpha=None)
    assert not _marks(ax3)
    rows = ti.loc[ticks]
    half, _ = _halves(_bars(ax3)["tree_inner"][2])
    np.testing.assert_allclose(half, rows["se"].to_numpy() / np.abs(rows["score"]).sum())


def test_importance_multiclass_table_and_attribution(models):
    """A multi-output table draws its totals; Attribution.importance draws as one method."""
    _, mc, X, _, yc = models
    table = treeinner.significance(mc, X, yc, methods=["tree_inner", "abs_saabas"])
    ax = tplot.importance(table, normalize=False)
    total = table[table["output"] == "total"]
    for m in ("tree_inner", "abs_saabas"):
        rows = total[total["method"] == m].set_index("feature").loc[_ticks(ax)]
        _, widths, cont = _bars(ax)[m]
        np.testing.assert_allclose(widths, rows["score"])
        np.testing.assert_allclose(_halves(cont)[0], Z95 * rows["se"])
    with pytest.raises(ValueError, match="total"):
        tplot.importance(table[table["output"] == "class_0"])
    attr = treeinner.saabas(mc, X).importance()
    ax = tplot.importance(attr, normalize=False)
    ((_, widths, cont),) = _bars(ax).values()
    rows = attr[attr["output"] == "total"].set_index("feature").loc[_ticks(ax)]
    np.testing.assert_allclose(widths, rows["score"])
    np.testing.assert_allclose(_halves(cont)[0], Z95 * rows["se"])
    # the totals of Attribution.importance are abs_saabas's of the significance table
    want = total[total["method"] == "abs_saabas"].set_index("feature")
    got = attr[attr["output"] == "total"].set_index("feature")
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-12)
    np.testing.assert_allclose(got["se"], want["se"], rtol=1e-10)


def test_importance_bad_inputs():
    with pytest.raises(ValueError, match="numeric"):
        tplot.importance(pd.DataFrame({"method": ["x", "y"]}, index=["a", "b"]))
    with pytest.raises(ValueError, match="numeric"):
        tplot.importance(pd.DataFrame({"tree_inner_se": [0.1, 0.2]}, index=["a", "b"]))
    with pytest.raises(ValueError, match="nope") as info:
        tplot.importance(_frame(), methods=["tree_inner", "nope"])
    assert "Compute" not in str(info.value)
    # a method of the registry that the frame lacks: how to compute it
    with pytest.raises(ValueError, match=r"methods=\['unbiased_gain'\]"):
        tplot.importance(_frame(), methods=["tree_inner", "unbiased_gain"])
    with pytest.raises(ValueError, match="tree_inner_se"):
        tplot.importance(_frame(), methods=["tree_inner_se"])
    with pytest.raises(TypeError, match="DataFrame"):
        tplot.importance(np.ones((3, 2)))
    with pytest.raises(ValueError, match="top"):
        tplot.importance(_frame(), top=0)
    with pytest.raises(ValueError, match="no rows"):
        tplot.importance(_frame().iloc[:0])
    for alpha in (0.0, 1.0, "0.05", True):
        with pytest.raises(ValueError, match="alpha"):
            tplot.importance(_frame(), alpha=alpha)
    table = pd.DataFrame({"method": "m", "feature": ["a", "a"], "score": 1.0, "se": 0.1})
    with pytest.raises(ValueError, match="more than one row"):
        tplot.importance(table)


# ---------------------------------------------------------------------- summary
def test_summary_beeswarm_content(models):
    reg, _, X, _, _ = models
    attr = treeinner.tree_shap(reg, X)
    v = attr.values
    ax = tplot.summary(attr, X)
    order = np.argsort(-np.abs(v).mean(axis=0))
    assert _ticks(ax) == [NAMES[j] for j in order]
    lo, hi = ax.get_ylim()
    assert lo > hi
    sc = _scatters(ax)
    n = X.shape[0]
    assert sum(c.get_offsets().shape[0] for c in sc.values()) == n * 5
    n_nan = int(X["c"].isna().sum())
    assert n_nan > 0 and sc["c (missing)"].get_offsets().shape[0] == n_nan
    assert sc["c"].get_offsets().shape[0] == n - n_nan
    ax.figure.canvas.draw()
    grey = sc["c (missing)"].get_facecolors()
    np.testing.assert_allclose(grey[:, :3], grey[:1, :3].repeat(len(grey), 0))
    assert np.ptp(grey[0, :3]) < 0.05  # grey: r = g = b
    for rank, j in enumerate(order):
        name = NAMES[j]
        off = sc[name].get_offsets()
        has = X[name].notna().to_numpy()
        # x = the attributions, y = the feature's row (within +-0.4)
        np.testing.assert_allclose(np.sort(off[:, 0]), np.sort(v[has, j]))
        assert np.all(np.abs(off[:, 1] - rank) <= 0.4 + 1e-12)
        assert np.ptp(off[:, 1]) > 0.1  # points spread into a swarm
        # colour: increasing in the feature value, spanning [0, 1] (clipped at quantiles)
        col = np.asarray(sc[name].get_array())
        xv = X[name].to_numpy()[has]
        assert col.min() == 0.0 and col.max() == 1.0
        srt = col[np.argsort(xv, kind="stable")]
        assert np.all(np.diff(srt) >= 0)
        # the scatter keeps row order, so offsets pair with the feature values
        np.testing.assert_allclose(off[:, 0], v[has, j])
        fc = sc[name].get_facecolors()
        hi_row, lo_row = np.argmax(xv), np.argmin(xv)
        assert fc[hi_row, 0] > fc[hi_row, 2]  # high values red
        assert fc[lo_row, 2] > fc[lo_row, 0]  # low values blue
    cbar = [a for a in ax.figure.axes if a.get_ylabel() == "feature value"]
    assert len(cbar) == 1
    assert [t.get_text() for t in cbar[0].get_yticklabels()] == ["low", "high"]
    assert "attribution" in ax.get_xlabel()


def test_summary_options_and_array_input(models):
    reg, mc, X, _, _ = models
    attr = treeinner.predecomp(reg, X)
    fig, ax0 = plt.subplots()
    ax = tplot.summary(attr, X.to_numpy(), max_display=2, ax=ax0)
    assert ax is ax0
    top2 = [NAMES[j] for j in np.argsort(-np.abs(attr.values).mean(axis=0))[:2]]
    assert _ticks(ax) == top2
    assert {k.replace(" (missing)", "") for k in _scatters(ax)} == set(top2)
    # columns in another order are matched by name
    ax = tplot.summary(attr, X[NAMES[::-1]])
    np.testing.assert_allclose(_scatters(ax)["a"].get_offsets()[:, 0], attr.values[:, 0])
    # multiclass: one output at a time
    am = treeinner.predecomp(mc, X)
    with pytest.raises(ValueError, match="output="):
        tplot.summary(am, X)
    ax = tplot.summary(am, X, output=2)
    np.testing.assert_allclose(_scatters(ax)["b"].get_offsets()[:, 0], am.values[:, 1, 2])
    assert "output 2" in ax.get_xlabel()
    with pytest.raises(ValueError, match="output"):
        tplot.summary(am, X, output=3)


def test_summary_bad_inputs(models):
    reg, _, X, _, _ = models
    attr = treeinner.predecomp(reg, X)
    with pytest.raises(ValueError, match="shape"):
        tplot.summary(attr, X.to_numpy()[:, :4])
    with pytest.raises(ValueError, match="shape"):
        tplot.summary(attr, X.to_numpy()[:-1])
    with pytest.raises(ValueError, match="'e'"):
        tplot.summary(attr, X.drop(columns="e"))
    bad = X.assign(d=[{"x": 1}] * len(X))
    with pytest.raises(ValueError, match="'d'.*neither numeric, string nor categorical"):
        tplot.summary(attr, bad)
    with pytest.raises(ValueError, match="max_display"):
        tplot.summary(attr, X, max_display=0)
    with pytest.raises(TypeError, match="Attribution"):
        tplot.summary(attr.values, X)
    with pytest.raises(ValueError, match="output"):
        tplot.summary(attr, X, output=1)


# ---------------------------------------------------------------------- dependence
def test_dependence_data_equal_inputs(models):
    reg, mc, X, _, _ = models
    attr = treeinner.saabas(reg, X)
    ax = tplot.dependence(attr, X, "b")
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 0], X["b"].to_numpy())
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], attr.values[:, 1])
    assert ax.get_xlabel() == "b" and ax.get_ylabel() == "attribution of b"
    # by index, on an array
    ax = tplot.dependence(attr, X.to_numpy(), 1)
    (sc2,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc2.get_offsets(), sc.get_offsets())
    # coloured by another feature with missing values: present rows coloured by value,
    # missing ones grey, together every row
    ax = tplot.dependence(attr, X, "a", color="c")
    sc = _scatters(ax)
    has = X["c"].notna().to_numpy()
    np.testing.assert_array_equal(sc["a"].get_offsets()[:, 0], X["a"].to_numpy()[has])
    np.testing.assert_array_equal(sc["a"].get_offsets()[:, 1], attr.values[has, 0])
    np.testing.assert_array_equal(np.asarray(sc["a"].get_array()), X["c"].to_numpy()[has])
    assert sc["c missing"].get_offsets().shape[0] == (~has).sum()
    cbar = [a for a in ax.figure.axes if a.get_ylabel() == "c"]
    assert len(cbar) == 1
    # multiclass
    am = treeinner.predecomp(mc, X)
    ax = tplot.dependence(am, X, "a", output=1)
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], am.values[:, 0, 1])
    with pytest.raises(ValueError, match="output="):
        tplot.dependence(am, X, "a")


def test_dependence_categorical_feature():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=300),
            "cat": pd.Categorical(rng.choice(["lo", "mid", "hi"], size=300)),
        }
    )
    y = X["x"] + (X["cat"] == "hi") * 2.0 + 0.1 * rng.normal(size=300)
    model = xgb.train(
        {"max_depth": 3, "nthread": 1, "tree_method": "hist"},
        xgb.DMatrix(X, y, enable_categorical=True),
        10,
    )
    attr = treeinner.predecomp(model, X)
    ax = tplot.dependence(attr, X, "cat")
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 0], X["cat"].cat.codes.to_numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list(X["cat"].cat.categories)
    hi = X["cat"].cat.categories.get_loc("hi")
    assert attr.values[X["cat"].cat.codes == hi, 1].min() > attr.values[:, 1].mean()


def test_dependence_bad_inputs(models):
    reg, _, X, _, _ = models
    attr = treeinner.predecomp(reg, X)
    with pytest.raises(ValueError, match="Unknown feature 'zz'"):
        tplot.dependence(attr, X, "zz")
    with pytest.raises(ValueError, match="Unknown color feature"):
        tplot.dependence(attr, X, "a", color="zz")
    with pytest.raises(ValueError, match="out of range"):
        tplot.dependence(attr, X, 5)
    with pytest.raises(TypeError, match="feature"):
        tplot.dependence(attr, X, 1.5)
    with pytest.raises(ValueError, match="shape"):
        tplot.dependence(attr, X.to_numpy().T, "a")
    with pytest.raises(ValueError, match="shape"):
        tplot.dependence(attr, X.to_numpy()[:, 0], "a")


# ---------------------------------------------------------------------- shap's own plots
def test_shap_plots_on_predecomp(models):
    import shap

    reg, mc, X, _, _ = models
    attr = treeinner.predecomp(reg, X)
    expl = attr.to_shap(X)
    by_mean_abs = [NAMES[j] for j in np.argsort(-np.abs(attr.values).mean(axis=0))]
    ax = shap.plots.bar(expl, show=False)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[: len(NAMES)] == by_mean_abs
    widths = sorted(
        (r.get_width() for r in ax.patches if r.get_height() > 0 and r.get_width() > 0),
        reverse=True,
    )
    np.testing.assert_allclose(widths, np.sort(np.abs(attr.values).mean(axis=0))[::-1])
    plt.close("all")
    ax = shap.plots.beeswarm(expl, show=False)
    # beeswarm lists the most important feature last (top of the axis)
    assert [t.get_text() for t in ax.get_yticklabels()][::-1] == by_mean_abs
    n_points = sum(c.get_offsets().shape[0] for c in ax.collections if c.get_offsets().size)
    assert n_points == X.shape[0] * len(NAMES)
    plt.close("all")
    # multiclass: one class at a time, as with shap's own TreeExplainer output
    em = treeinner.predecomp(mc, X).to_shap(X)
    ax = shap.plots.beeswarm(em[:, :, 1], show=False)
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == sorted(NAMES)


def test_selection_path_draws_the_loss_curve():
    """The loss curve of a recursive selection: one point per step at (features kept, mean
    held-out loss), error bars of the paired standard error, the chosen step circled and
    each step's dropped features written beside it; a rule fit or another object is refused."""
    from treeinner.booster import GBMRegressor

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(600, 7)), columns=[f"f{j}" for j in range(7)])
    y = 2 * X.f0 - X.f1 + 0.5 * rng.normal(size=600)
    est = GBMRegressor(n_estimators=20, max_depth=3, learning_rate=0.3, n_jobs=1)
    sel = treeinner.TreeInnerSelector(est, strategy="recursive", step=2, refit=False,
                                      random_state=0).fit(X, y)  # fmt: skip
    path = sel.path_
    ax = tplot.selection_path(sel, se=2.0)
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), path["n_features"])
    np.testing.assert_allclose(line.get_ydata(), path["loss"])
    # the error bars: 2 paired standard errors each side
    bars = [c for c in ax.collections if c.get_segments()][0].get_segments()
    half = np.array([abs(s[1][1] - s[0][1]) / 2 for s in bars])
    np.testing.assert_allclose(half, 2.0 * path["diff_se"].to_numpy(), rtol=1e-9, atol=1e-15)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    chosen = int(path.loc[path["chosen"], "n_features"].iloc[0])
    assert f"chosen ({chosen} features)" in labels and "best" in labels
    notes = [t.get_text() for t in ax.texts]
    assert len(notes) == sum(bool(d) for d in path["dropped"])
    assert notes[0].startswith("- ") and all(f in notes[0] for f in path["dropped"].iloc[0])
    assert ax.xaxis_inverted()
    # the path_ frame itself draws the same
    ax2 = tplot.selection_path(path, annotate=False)
    assert not ax2.texts
    with pytest.raises(TypeError, match="strategy='recursive'"):
        tplot.selection_path(treeinner.TreeInnerSelector(est).fit(X, y))
    with pytest.raises(ValueError, match="se must be"):
        tplot.selection_path(sel, se=-1)
