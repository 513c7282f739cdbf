"""One vocabulary across the public functions: the data positionally, everything after it by
keyword; an old spelling or a positional option is a TypeError naming the keyword to use; an
invalid choice is a ValueError listing every valid one."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import treeinner
import treeinner.plot as tplot
from treeinner import _api
from treeinner._methods import REGISTRY

NAMES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=NAMES)
    y = 2 * X["a"].to_numpy() + X["b"].to_numpy() ** 2 + rng.normal(size=300)
    prm = {"max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0, "tree_method": "hist"}
    booster = xgb.train(prm, xgb.DMatrix(X[:200], y[:200]), 6)
    ens = treeinner.from_model(booster)
    return ens, X[200:].reset_index(drop=True), y[200:], X[:200], y[:200]


# ---------------------------------------------------------------------- signatures
#: Every public callable and the names of its data arguments (taken positionally).
PUBLIC = {
    "predecomp": (treeinner.predecomp, ["model", "X"]),
    "saabas": (treeinner.saabas, ["model", "X"]),
    "tree_shap": (treeinner.tree_shap, ["model", "X"]),
    "node_values": (treeinner.node_values, ["model"]),
    "tree_inner": (treeinner.tree_inner, ["model", "X", "y"]),
    "forest_inner": (treeinner.forest_inner, ["model", "X", "y"]),
    "unbiased_gain": (treeinner.unbiased_gain, ["model", "X", "y"]),
    "importance": (treeinner.importance, ["model", "X", "y"]),
    "total_gain": (treeinner.total_gain, ["model"]),
    "select_features": (treeinner.select_features, ["model", "X", "y"]),
    "TreeInnerSelector": (treeinner.TreeInnerSelector.__init__, ["self", "estimator"]),
    "Attribution.to_frame": (treeinner.Attribution.to_frame, ["self"]),
    "Attribution.to_shap": (treeinner.Attribution.to_shap, ["self", "X"]),
    "plot.importance": (tplot.importance, ["frame"]),
    "plot.summary": (tplot.summary, ["attribution", "X"]),
    # the feature to plot is what the plot is of, not an option
    "plot.dependence": (tplot.dependence, ["attribution", "X", "feature"]),
}

#: The arguments every function that takes them must call by these names.
SHARED = ("reference", "sample_weight", "random_state", "attribution", "iteration_range")


@pytest.mark.parametrize("name", list(PUBLIC))
def test_everything_after_the_data_is_keyword_only(name):
    fn, data = PUBLIC[name]
    params = inspect.signature(fn).parameters
    positional = [
        p.name
        for p in params.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    assert positional == data
    for old in _api.RENAMED:
        assert old not in params, f"{name} still takes {old}="


def test_shared_names_mean_one_thing():
    """No function spells a shared concept another way (train=, trees=, weights=, kind=)."""
    for name, (fn, data) in PUBLIC.items():
        params = set(inspect.signature(fn).parameters) - set(data)
        assert not params & {"train", "trees", "weights", "kind", "X_valid", "y_valid"}, name
    # and they come in one order where several functions take them
    for group in (["sample_weight", "reference", "random_state"],):
        for name, (fn, _) in PUBLIC.items():
            params = [p for p in inspect.signature(fn).parameters if p in group]
            assert params == [p for p in group if p in params], name


# ---------------------------------------------------------------------- old spellings
def _old_calls(ens, X, y, Xt, yt):
    """(call, the keyword its TypeError must name) for every old spelling."""
    return [
        (lambda: treeinner.predecomp(ens, X, trees=(0, 2)), "iteration_range="),
        (lambda: treeinner.predecomp(ens, X, trees=slice(0, 2)), "iteration_range="),
        (lambda: treeinner.saabas(ens, X, trees=(0, 2)), "iteration_range="),
        (lambda: treeinner.tree_shap(ens, X, trees=(0, 2)), "iteration_range="),
        (lambda: treeinner.tree_shap(ens, X, weights="cover"), "node_weight="),
        (lambda: treeinner.node_values(ens, kind="regularized"), "attribution="),
        (lambda: treeinner.node_values(ens, kind="mean"), "attribution="),
        (lambda: treeinner.node_values(ens, kind="data", reference=(Xt, yt)), "attribution="),
        (lambda: treeinner.unbiased_gain(ens, X, y, train=(Xt, yt)), "reference="),
        (lambda: treeinner.select_features(ens, X_valid=X, y_valid=y), "X (the held-out rows"),
        (lambda: treeinner.select_features(ens, X, y_valid=y), "y."),
        (lambda: treeinner.tree_inner(ens, X, y, train=(Xt, yt)), "reference="),
        (lambda: treeinner.importance(ens, X, y, train=(Xt, yt)), "reference="),
    ]


def test_every_old_spelling_names_the_new_one(data):
    ens, X, y, Xt, yt = data
    for call, new in _old_calls(ens, X, y, Xt, yt):
        with pytest.raises(TypeError, match=r"no longer takes \w+=; use " + re.escape(new)):
            call()


def test_kind_message_maps_every_old_value(data):
    ens = data[0]
    with pytest.raises(TypeError) as info:
        treeinner.node_values(ens, kind="data")
    for part in ('"regularized" is "predecomp"', '"mean" is "saabas"', "reference="):
        assert part in str(info.value)


# ---------------------------------------------------------------------- positional options
def test_positional_options_name_the_keyword(data):
    ens, X, y, Xt, yt = data
    attr = treeinner.predecomp(ens, X)
    frame = pd.DataFrame({"tree_inner": [1.0, 2.0]}, index=["a", "b"])
    calls = [
        (lambda: treeinner.predecomp(ens, X, (0, 2)), "iteration_range=..."),
        (lambda: treeinner.predecomp(ens, X, None, (Xt, yt)), "iteration_range=..., reference="),
        (lambda: treeinner.saabas(ens, X, (0, 2)), "iteration_range=..."),
        (lambda: treeinner.tree_shap(ens, X, None, "cover"), "iteration_range=..., node_weight="),
        (lambda: treeinner.node_values(ens, "predecomp"), "attribution=..."),
        (lambda: treeinner.unbiased_gain(ens, X, y, 4), "n_draws=..."),
        (lambda: treeinner.tree_inner(ens, X, y, "saabas"), "attribution=..."),
        (lambda: treeinner.forest_inner(ens, X, y, "saabas"), "attribution=..."),
        (lambda: treeinner.importance(ens, X, y, ["tree_inner"]), "methods=..."),
        (lambda: treeinner.total_gain(ens, "x"), "takes model positionally"),
        (lambda: treeinner.select_features(ens, X, y, "unbiased_gain"), "method=..."),
        (lambda: treeinner.TreeInnerSelector(None, "tree_inner"), "method=..."),
        (lambda: attr.to_frame(0), "output=..."),
        (lambda: attr.to_shap(X, 0), "output=..."),
        (lambda: tplot.importance(frame, ["tree_inner"]), "methods=..."),
        (lambda: tplot.summary(attr, X, 3), "max_display=..."),
        (lambda: tplot.dependence(attr, X, "a", "b"), "color=..."),
    ]
    for call, keyword in calls:
        with pytest.raises(TypeError, match="keyword-only|positionally") as info:
            call()
        assert keyword in str(info.value), (keyword, str(info.value))


def test_methods_are_named_with_their_class(data):
    ens, X, _, _, _ = data
    with pytest.raises(TypeError, match=r"^Attribution\.to_frame\(\) takes no arguments"):
        treeinner.predecomp(ens, X).to_frame(0)
    with pytest.raises(TypeError, match=r"^TreeInnerSelector\.__init__\(\) takes estimator"):
        treeinner.TreeInnerSelector(None, "tree_inner")


def test_keywords_still_work(data):
    ens, X, y, Xt, yt = data
    a = treeinner.tree_shap(ens, X, iteration_range=(0, 3), node_weight="cover")
    margin = ens.predict_margin(X, iteration_range=(0, 3))
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, margin, rtol=1e-5, atol=1e-5)
    # "auto" follows the booster: XGBoost weighs by covers
    np.testing.assert_array_equal(treeinner.tree_shap(ens, X).values, treeinner.tree_shap(
        ens, X, node_weight="cover").values)  # fmt: skip
    with pytest.raises(ValueError, match="count"):  # XGBoost stores no row counts
        treeinner.tree_shap(ens, X, node_weight="count")
    np.testing.assert_array_equal(
        treeinner.node_values(ens), treeinner.node_values(ens, attribution="predecomp")
    )
    ub = treeinner.unbiased_gain(
        ens, X, y, n_draws=2, min_samples=1, sample_weight=None, reference=(Xt, yt),
        random_state=0, per_split=False,
    )  # fmt: skip
    assert list(ub.index) == NAMES
    assert treeinner.predecomp(ens, X).to_frame(output=None).shape == X.shape


# ---------------------------------------------------------------------- choices
def _choices_listed(info, choices):
    msg = str(info.value)
    return all(repr(c) in msg for c in choices)


def test_attribution_errors_list_every_choice(data):
    ens, X, y, Xt, yt = data
    every = _api.ATTRIBUTIONS
    calls = [
        lambda: treeinner.tree_inner(ens, X, y, attribution="tree_shap"),
        lambda: treeinner.forest_inner(ens, X, y, attribution="tree_shap"),
        lambda: treeinner.importance(ens, X, y, methods=["tree_inner"], attribution="tree_shap"),
        lambda: treeinner.select_features(ens, X, y, attribution="tree_shap"),
        lambda: treeinner.TreeInnerSelector(
            treeinner.booster.GBMRegressor(n_estimators=2), attribution="tree_shap"
        ).fit(X, y),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="attribution must be one of") as info:
            call()
        assert _choices_listed(info, every), str(info.value)
        assert "did you mean 'shap'" in str(info.value)
    # node values exist for the path attributions only, and the message lists both
    for bad in ("shap", "tree_shap", "regularized", None):
        with pytest.raises(ValueError, match="attribution must be one of") as info:
            treeinner.node_values(ens, attribution=bad)
        assert _choices_listed(info, ("predecomp", "saabas")), str(info.value)


def test_method_errors_list_every_method(data):
    ens, X, y, _, _ = data
    for call in (
        lambda: treeinner.select_features(ens, X, y, method="gain"),
        lambda: treeinner.select_features(ens, X, y, method=["tree_inner", "abs_shap"]),
        lambda: treeinner.TreeInnerSelector(
            treeinner.booster.GBMRegressor(n_estimators=2), method="gini"
        ).fit(X, y),
    ):
        with pytest.raises(ValueError, match="method must be one of") as info:
            call()
        assert _choices_listed(info, REGISTRY), str(info.value)


def test_node_weight_errors_list_every_choice(data):
    ens, X, _, _, _ = data
    for bad in ("hessian", "Cover", None):
        with pytest.raises(ValueError, match="node_weight must be one of") as info:
            treeinner.tree_shap(ens, X, node_weight=bad)
        assert _choices_listed(info, ("auto", "cover", "count")), str(info.value)


def test_reference_only_with_predecomp_node_values(data):
    ens, X, y, Xt, yt = data
    with pytest.raises(ValueError, match="attribution='saabas' does not take it"):
        treeinner.node_values(ens, attribution="saabas", reference=(Xt, yt))
    with pytest.raises(ValueError, match="reference must be"):
        treeinner.node_values(ens, reference=(Xt,))
    with pytest.raises(ValueError, match="reference must be"):
        treeinner.unbiased_gain(ens, X, y, reference=(Xt,))
    # PreDecomp from the training data: the leaves are the model's (squared error, no
    # subsampling), the inner nodes -lr G / (H + lambda) of the same rows
    p = treeinner.node_values(ens, reference=(Xt, yt))
    leaf = ens.left < 0
    np.testing.assert_allclose(p[leaf], ens.value[leaf], rtol=1e-5, atol=1e-6)


def test_random_state_is_normalised_once(data):
    ens, X, y, _, _ = data
    w = np.linspace(0.5, 2.0, len(y))  # non-uniform weights: the draws are random
    a = treeinner.unbiased_gain(ens, X, y, sample_weight=w, random_state=3)
    b = treeinner.unbiased_gain(ens, X, y, sample_weight=w, random_state=np.int64(3))
    np.testing.assert_array_equal(a, b)
    c = treeinner.unbiased_gain(ens, X, y, sample_weight=w, random_state=np.random.default_rng(1))
    d = treeinner.unbiased_gain(
        ens, X, y, sample_weight=w, random_state=_api.seed64(np.random.default_rng(1))
    )
    np.testing.assert_array_equal(c, d)
    with pytest.raises(ValueError, match="non-negative"):
        treeinner.unbiased_gain(ens, X, y, random_state=-1)
    with pytest.raises(TypeError, match="random_state"):
        treeinner.unbiased_gain(ens, X, y, random_state=1.5)
