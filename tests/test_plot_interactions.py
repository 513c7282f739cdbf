"""treeinner.plot for SHAP interactions: the heatmap's image holds the drawn matrix, the
dependence plot's colours the strongest interacting feature's values, many categories and many
features stay legible, and the top and bottom features of a ranking can both be shown."""

from __future__ import annotations

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


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    """A regression model with a strong a*b interaction, overfit on 150 rows (the noise
    features d, e score negative held out), a 3-class model, held-out rows and labels."""
    rng = np.random.default_rng(5)
    n = 400
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=NAMES)
    X.loc[rng.random(n) < 0.1, "c"] = np.nan
    s = 2 * X["a"] * X["b"] + X["c"].fillna(0)
    y = (s + 0.5 * rng.normal(size=n)).to_numpy()
    prm = {"max_depth": 4, "eta": 0.3, "nthread": 1, "seed": 0, "tree_method": "hist"}
    reg = xgb.train(prm, xgb.DMatrix(X[:150], y[:150]), 30)
    yc = np.digitize(s + 0.3 * rng.normal(size=n), [-0.5, 0.5]).astype(float)
    mc = xgb.train(
        {**prm, "max_depth": 3, "objective": "multi:softprob", "num_class": 3},
        xgb.DMatrix(X[:150], yc[:150]),
        6,
    )
    Xh = X[150:].reset_index(drop=True)
    return reg, mc, Xh, y[150:], treeinner.tree_shap_interactions(reg, Xh)


def _scatters(ax):
    return {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}


def _labels(ticklabels):
    return [t.get_text() for t in ticklabels]


def _dashed(ax):
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]


# ---------------------------------------------------------------------- heatmap
def test_heatmap_of_mean_abs_interactions(data):
    _, _, X, _, ia = data
    ax = tplot.interactions(ia)
    mean_abs = np.abs(ia.values).mean(axis=0)
    order = np.argsort(-mean_abs.sum(axis=1), kind="stable")
    names = [NAMES[i] for i in order]
    assert _labels(ax.get_yticklabels()) == names
    assert _labels(ax.get_xticklabels()) == names
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    (im,) = ax.get_images()
    np.testing.assert_allclose(np.asarray(im.get_array()), mean_abs[np.ix_(order, order)])
    assert im.norm.vmin == 0.0 and im.norm.vmax == pytest.approx(mean_abs.max())
    # the a*b interaction is the strongest off-diagonal cell
    off = mean_abs - np.diag(np.diag(mean_abs))
    assert {NAMES[i] for i in np.unravel_index(np.argmax(off), off.shape)} == {"a", "b"}
    (cbar,) = [a for a in ax.figure.axes if a is not ax]
    assert cbar.get_ylabel() == "mean |SHAP interaction value|"
    # 5 features: every cell annotated with its value
    texts = [t for t in ax.texts]
    assert len(texts) == 25
    assert {t.get_text() for t in texts} == {f"{v:.2g}" for v in mean_abs.ravel()}
    # top 2, no diagonal: the diagonal is masked and the colours scale with the rest
    fig, ax0 = plt.subplots()
    ax = tplot.interactions(ia, top=2, diagonal=False, annotate=False, ax=ax0)
    assert ax is ax0 and not ax.texts
    assert _labels(ax.get_yticklabels()) == names[:2]
    arr = ax.get_images()[0].get_array()
    assert np.ma.getmaskarray(arr).tolist() == [[True, False], [False, True]]
    sub = mean_abs[np.ix_(order[:2], order[:2])]
    assert arr[0, 1] == pytest.approx(sub[0, 1]) and arr[1, 0] == pytest.approx(sub[1, 0])
    assert ax.get_images()[0].norm.vmax == pytest.approx(sub[0, 1])
    assert "(2 of 5 features)" in ax.get_title()
    assert not _dashed(ax)  # nothing drawn below the top features: no separator


def test_heatmap_of_signed_held_out_pairs(data):
    reg, _, X, y, _ = data
    ti = treeinner.tree_inner_interactions(reg, X, y)
    total = ti.sum(axis=1)
    assert (total < 0).any()  # the overfit model: noise features score negative held out
    ranked = list(total.sort_values(ascending=False, kind="stable").index)
    ax = tplot.interactions(ti)
    assert _labels(ax.get_yticklabels()) == ranked
    (im,) = ax.get_images()
    np.testing.assert_allclose(np.asarray(im.get_array()), ti.loc[ranked, ranked].to_numpy())
    # diverging, centred at 0, with negative values in blue
    peak = np.abs(ti.to_numpy()).max()
    assert im.norm.vmin == pytest.approx(-peak) and im.norm.vmax == pytest.approx(peak)
    assert im.get_cmap().name.startswith("RdBu_r")
    assert im.get_cmap()(im.norm(-peak))[2] > im.get_cmap()(im.norm(-peak))[0]
    (cbar,) = [a for a in ax.figure.axes if a is not ax]
    assert cbar.get_ylabel() == "held-out pair importance"
    # top 2 and, by default, the features with a negative total (at most 5) after a gap
    n_neg = int((total < 0).sum())
    ax = tplot.interactions(ti, top=2)
    want = ranked[:2] + ranked[len(ranked) - min(5, n_neg) :]
    assert _labels(ax.get_yticklabels()) == want
    np.testing.assert_allclose(np.asarray(ax.get_images()[0].get_array()), ti.loc[want, want])
    if len(want) < len(ranked):
        dashed = _dashed(ax)
        assert len(dashed) == 2  # one horizontal, one vertical line between the groups
        assert {float(np.ravel(ln.get_ydata())[0]) for ln in dashed} >= {1.5}
    # explicit bottom: the lowest ranked features, even with bottom=0 none
    ax = tplot.interactions(ti, top=1, bottom=1)
    assert _labels(ax.get_yticklabels()) == [ranked[0], ranked[-1]]
    ax = tplot.interactions(ti, top=1, bottom=0)
    assert _labels(ax.get_yticklabels()) == [ranked[0]]


def test_heatmap_many_features_stay_legible():
    rng = np.random.default_rng(0)
    p = 60
    names = [f"feature_{i:02d}" for i in range(p)]
    a = rng.normal(size=(p, p))
    frame = pd.DataFrame(a + a.T, index=names, columns=names)
    total = frame.sum(axis=1)
    ranked = list(total.sort_values(ascending=False, kind="stable").index)
    ax = tplot.interactions(frame, top=10, bottom=3)
    assert _labels(ax.get_yticklabels()) == ranked[:10] + ranked[-3:]
    assert not ax.texts  # 13 features: too many to annotate
    assert ax.get_yticklabels()[0].get_fontsize() == 10.0
    # every feature: each labelled, in a smaller font
    ax = tplot.interactions(frame, top=None)
    assert _labels(ax.get_xticklabels()) == ranked
    size = ax.get_xticklabels()[0].get_fontsize()
    assert 4.0 <= size < 10.0
    assert ax.get_images()[0].get_array().shape == (p, p)


def test_heatmap_multiclass_and_bad_inputs(data):
    _, mc, X, _, ia = data
    im = treeinner.tree_shap_interactions(mc, X)
    assert im.values.ndim == 4
    with pytest.raises(ValueError, match="output="):
        tplot.interactions(im)
    ax = tplot.interactions(im, output=2, top=None)
    names = _labels(ax.get_yticklabels())
    idx = [NAMES.index(f) for f in names]
    want = np.abs(im.values[..., 2]).mean(axis=0)[np.ix_(idx, idx)]
    np.testing.assert_allclose(np.asarray(ax.get_images()[0].get_array()), want)
    assert "output 2" in [a for a in ax.figure.axes if a is not ax][0].get_ylabel()
    with pytest.raises(ValueError, match="output"):
        tplot.interactions(im, output=3)
    with pytest.raises(ValueError, match="output"):
        tplot.interactions(ia, output=1)
    with pytest.raises(TypeError, match="Interactions"):
        tplot.interactions(ia.values)
    sq = pd.DataFrame(np.eye(3), index=list("abc"), columns=list("abc"))
    with pytest.raises(ValueError, match="square"):
        tplot.interactions(sq.iloc[:, :2])
    with pytest.raises(ValueError, match="square"):
        tplot.interactions(sq.set_axis(list("acb"), axis=1))
    with pytest.raises(ValueError, match="numeric"):
        tplot.interactions(sq.astype(str))
    with pytest.raises(ValueError, match="output"):
        tplot.interactions(sq, output=0)
    with pytest.raises(ValueError, match="no features"):
        tplot.interactions(sq.iloc[:0, :0])
    with pytest.raises(ValueError, match="top"):
        tplot.interactions(sq, top=0)
    with pytest.raises(ValueError, match="bottom"):
        tplot.interactions(sq, top=1, bottom=-1)
    with pytest.raises(ValueError, match="bottom= needs top="):
        tplot.interactions(sq, top=None, bottom=1)
    with pytest.raises(TypeError, match="diagonal"):
        tplot.interactions(sq, diagonal="no")
    with pytest.raises(TypeError, match="keyword"):
        tplot.interactions(sq, 3)


# ---------------------------------------------------------------------- dependence
def test_dependence_coloured_by_strongest_interaction(data):
    reg, _, X, _, ia = data
    strength = np.abs(ia.values[:, 0, :]).mean(axis=0)
    strength[0] = -np.inf
    k = int(np.argmax(strength))
    assert NAMES[k] == "b"  # the model's a*b interaction
    shap_values = ia.values.sum(axis=2)
    attr = treeinner.tree_shap(reg, X)
    np.testing.assert_allclose(shap_values, attr.values, atol=1e-9)
    for ax in (
        tplot.dependence(ia, X, "a", color="auto"),  # Interactions as the attribution
        tplot.dependence(attr, X, "a", color="auto", interactions=ia),
        tplot.dependence(attr, X, 0, color="auto", model=reg),  # computed from the model
    ):
        (sc,) = _scatters(ax).values()
        np.testing.assert_array_equal(np.asarray(sc.get_array()), X["b"].to_numpy())
        np.testing.assert_array_equal(sc.get_offsets()[:, 0], X["a"].to_numpy())
        np.testing.assert_allclose(sc.get_offsets()[:, 1], attr.values[:, 0], atol=1e-9)
        assert "strongest interaction, b" in ax.get_title()
        assert [a.get_ylabel() for a in ax.figure.axes if a is not ax] == ["b"]
        assert ax.get_ylabel() == "attribution of a"
    # the colour feature with missing values: those rows grey, as with color="c"
    strength = np.abs(ia.values[:, 2, :]).mean(axis=0)
    strength[2] = -np.inf
    kc = NAMES[int(np.argmax(strength))]
    assert kc != "c"
    ax = tplot.dependence(ia, X, "c", color="auto")
    assert f"strongest interaction, {kc}" in ax.get_title()
    # interaction values coloured by a feature with missing values: those rows grey
    ax = tplot.dependence(ia, X, "a", color="c", interaction_values=True)
    sc = _scatters(ax)
    has = X["c"].notna().to_numpy()
    assert sc["c missing"].get_offsets().shape[0] == (~has).sum() > 0
    np.testing.assert_array_equal(sc["a"].get_offsets()[:, 1], 2 * ia.values[has, 0, 2])


def test_dependence_of_interaction_values(data):
    reg, mc, X, _, ia = data
    # the pair's whole interaction, 2 * Phi_ab, coloured by b
    ax = tplot.dependence(ia, X, "a", color="b", interaction_values=True)
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], 2 * ia.values[:, 0, 1])
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], ia.values[:, 0, 1] + ia.values[:, 1, 0])
    assert ax.get_ylabel() == "SHAP interaction of a and b"
    assert np.abs(sc.get_offsets()[:, 1]).max() > 0.1  # a real interaction is drawn
    # color="auto" picks b and draws the same values
    ax = tplot.dependence(ia, X, "a", color="auto", interaction_values=True)
    np.testing.assert_array_equal(_scatters(ax)["a"].get_offsets()[:, 1], 2 * ia.values[:, 0, 1])
    # no colour: the main effect
    ax = tplot.dependence(ia, X, "a", interaction_values=True)
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], ia.values[:, 0, 0])
    assert ax.get_ylabel() == "main effect of a"
    # multiclass: one output's interactions
    im = treeinner.tree_shap_interactions(mc, X)
    ax = tplot.dependence(im, X, "b", color="auto", output=1, interaction_values=True)
    strength = np.abs(im.values[:, 1, :, 1]).mean(axis=0)
    strength[1] = -np.inf
    k = int(np.argmax(strength))
    sc = _scatters(ax)["b"]
    has = X[NAMES[k]].notna().to_numpy()
    np.testing.assert_array_equal(np.asarray(sc.get_array()), X[NAMES[k]].to_numpy()[has])
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], 2 * im.values[has, 1, k, 1])
    assert "(output 1)" in ax.get_ylabel()
    with pytest.raises(ValueError, match="output="):
        tplot.dependence(im, X, "b", color="auto")


def test_dependence_interaction_bad_inputs(data):
    reg, mc, X, _, ia = data
    attr = treeinner.tree_shap(reg, X)
    with pytest.raises(ValueError, match=r'color="auto" needs.*tree_shap_interactions'):
        tplot.dependence(attr, X, "a", color="auto")
    with pytest.raises(ValueError, match="interaction_values=True needs"):
        tplot.dependence(attr, X, "a", interaction_values=True)
    with pytest.raises(ValueError, match="not both"):
        tplot.dependence(attr, X, "a", color="auto", interactions=ia, model=reg)
    with pytest.raises(TypeError, match="Interactions"):
        tplot.dependence(attr, X, "a", color="auto", interactions=ia.values)
    with pytest.raises(TypeError, match="interaction_values"):
        tplot.dependence(ia, X, "a", interaction_values="yes")
    few = treeinner.tree_shap_interactions(reg, X[:10])
    with pytest.raises(ValueError, match="same rows"):
        tplot.dependence(attr, X, "a", color="auto", interactions=few)
    other = treeinner.tree_shap_interactions(mc, X)
    with pytest.raises(ValueError, match="outputs"):
        tplot.dependence(attr, X, "a", color="auto", interactions=other)
    renamed = treeinner.Interactions(
        values=ia.values, bias=ia.bias, feature_names=("v", "w", "x", "y", "z")
    )
    with pytest.raises(ValueError, match="other features"):
        tplot.dependence(attr, X, "a", color="auto", interactions=renamed)
    with pytest.raises(ValueError, match="Unknown color feature 'autox'"):
        tplot.dependence(ia, X, "a", color="autox")
    # one feature: nothing to interact with
    X1 = X[["a"]]
    m1 = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X1, X1["a"] ** 2), 3)
    with pytest.raises(ValueError, match="no other feature"):
        tplot.dependence(treeinner.tree_shap_interactions(m1, X1), X1, "a", color="auto")


def test_dependence_many_string_categories_thinned_and_rotated():
    rng = np.random.default_rng(2)
    n = 600
    levels = [f"level_{i:02d}" for i in range(45)]
    X = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "cat": pd.Categorical(rng.choice(levels, size=n), categories=levels),
            "shop": pd.Categorical(rng.choice(levels[:8], size=n), categories=levels[:8]),
        }
    )
    y = X["x"] + X["cat"].cat.codes / 10 + (X["shop"].cat.codes % 2) + 0.1 * rng.normal(size=n)
    model = xgb.train(
        {"max_depth": 3, "nthread": 1, "tree_method": "hist", "max_cat_to_onehot": 1},
        xgb.DMatrix(X, y, enable_categorical=True),
        10,
    )
    attr = treeinner.predecomp(model, X)
    # 45 categories: thinned to every step-th (at most 30 labels), rotated 90 degrees, and the
    # rendered labels do not overlap
    ax = tplot.dependence(attr, X, "cat")
    (sc,) = _scatters(ax).values()
    np.testing.assert_array_equal(sc.get_offsets()[:, 0], X["cat"].cat.codes.to_numpy())
    ticks = ax.get_xticks()
    step = int(ticks[1] - ticks[0])
    assert step >= 2 and len(ticks) <= 30
    np.testing.assert_array_equal(ticks, np.arange(0, 45, step))
    assert _labels(ax.get_xticklabels()) == levels[::step]
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    _assert_apart(ax, ax.get_xticklabels(), 0)
    # on a narrower figure fewer of them fit
    fig, narrow = plt.subplots(figsize=(3, 3))
    tplot.dependence(attr, X, "cat", ax=narrow)
    assert narrow.get_xticks()[1] - narrow.get_xticks()[0] > step
    _assert_apart(narrow, narrow.get_xticklabels(), 0)
    # 8 categories: every one labelled, rotated 45 degrees; as a colour: on the colour bar
    ax = tplot.dependence(attr, X, "shop")
    assert _labels(ax.get_xticklabels()) == levels[:8]
    assert all(t.get_rotation() == 45 and t.get_ha() == "right" for t in ax.get_xticklabels())
    ax = tplot.dependence(attr, X, "x", color="shop")
    assert _labels(ax.figure.axes[-1].get_yticklabels()) == levels[:8]
    # 45 categories as a colour: thinned to at most 20 labels on the colour bar, apart
    ax = tplot.dependence(attr, X, "x", color="cat")
    cbar = ax.figure.axes[-1]
    labels = _labels(cbar.get_yticklabels())
    assert 2 <= len(labels) <= 20 and labels == levels[:: -(-45 // len(labels))]
    _assert_apart(cbar, cbar.get_yticklabels(), 1)
    # object (string) columns are categories too, coded in sorted order
    Xs = X.assign(cat=X["cat"].astype(str))
    ax = tplot.dependence(attr, Xs, "cat")
    assert _labels(ax.get_xticklabels()) == sorted(levels)[::step]


def _assert_apart(ax, ticklabels, dim):
    """Rendered tick labels do not overlap along dimension ``dim`` (0: x, 1: y)."""
    ax.figure.canvas.draw()
    r = ax.figure.canvas.get_renderer()
    ext = sorted((e.get_points()[:, dim] for e in (t.get_window_extent(r) for t in ticklabels)),
                 key=lambda p: p[0])  # fmt: skip
    assert len(ext) >= 2
    assert all(a[1] <= b[0] for a, b in zip(ext, ext[1:]))


# ---------------------------------------------------------------------- importance
def test_importance_top_and_bottom():
    rng = np.random.default_rng(1)
    names = [f"f{i}" for i in range(40)]
    frame = pd.DataFrame({"tree_inner": rng.normal(size=40)}, index=names)
    ranked = list(frame["tree_inner"].sort_values(ascending=False).index)
    ax = tplot.importance(frame, top=5, bottom=3)
    assert _labels(ax.get_yticklabels()) == ranked[:5] + ranked[-3:]
    bars = [r.get_width() for r in ax.containers[0].patches]
    scale = np.abs(frame["tree_inner"]).sum()
    np.testing.assert_allclose(bars, frame["tree_inner"][ranked[:5] + ranked[-3:]] / scale)
    assert sum(w < 0 for w in bars) == 3  # the most negative scores are shown
    (dashed,) = _dashed(ax)
    assert np.ravel(dashed.get_ydata())[0] == pytest.approx(4.5)
    # top + bottom covering everything: all features, no separator
    ax = tplot.importance(frame, top=30, bottom=10)
    assert _labels(ax.get_yticklabels()) == ranked and not _dashed(ax)
    ax = tplot.importance(frame, top=5, bottom=0)
    assert _labels(ax.get_yticklabels()) == ranked[:5]
    with pytest.raises(ValueError, match="bottom= needs top="):
        tplot.importance(frame, bottom=3)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="bottom"):
            tplot.importance(frame, top=3, bottom=bad)


def test_heatmap_without_matplotlib_names_the_extra(monkeypatch, data):
    ia = data[4]
    for mod in ("matplotlib", "matplotlib.pyplot", "matplotlib.cm", "matplotlib.colors"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ImportError, match=r"treeinner\[plot\]"):
        tplot.interactions(ia)
    with pytest.raises(ImportError, match=r"treeinner\[plot\]"):
        tplot.dependence(ia, np.zeros((ia.values.shape[0], 5)), "a", color="auto")
