"""The method registry: every entry runs through every consumer, row-additive entries add up
over rows, and a new entry is one registration away from every consumer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner._methods import OPTIONAL, REGISTRY, Method, Options, get, resolve

xgb = pytest.importorskip("xgboost")

NAMES = list(REGISTRY)
INTERVENTIONAL = [n for n, m in OPTIONAL.items() if m.needs_background]


@pytest.fixture(scope="module")
def model_data():
    rng = np.random.default_rng(0)
    n, p = 600, 4
    X = pd.DataFrame(rng.normal(size=(n, p)), columns=["a", "b", "c", "noise"])
    y = (X["a"] + 0.5 * X["b"] - 0.25 * X["c"] + rng.normal(size=n) > 0).astype(float)
    w = rng.uniform(0.5, 2.0, size=n)
    model = xgb.XGBClassifier(n_estimators=12, max_depth=3, n_jobs=1, random_state=0)
    model.fit(X[:400], y[:400])
    return model, X[400:], y[400:].to_numpy(), w[400:], (X[:400], y[:400].to_numpy())


def test_registry_entries_are_consistent():
    assert NAMES == list(treeinner.METHODS)
    for name, m in REGISTRY.items():
        assert isinstance(m, Method) and m.name == name and m.summary
        assert not (m.mean and not m.row_additive), name
        assert m.attribution in (None, *treeinner._api.ATTRIBUTIONS), name
        assert not (m.needs_background or m.pairwise), name
    with pytest.raises(TypeError):
        treeinner.METHODS["x"] = REGISTRY["tree_inner"]  # read-only to the public
    # the optional methods: a background or a pairwise result, never in the default lists
    assert (
        list(treeinner.OPTIONAL_METHODS)
        == list(OPTIONAL)
        == [*INTERVENTIONAL, "tree_inner_interactions"]
    )
    assert not set(OPTIONAL) & set(REGISTRY)
    for name, m in OPTIONAL.items():
        assert m.name == name and m.summary and m.row_additive, name
        assert m.needs_background != m.pairwise, name
        assert m.attribution in treeinner._api.INNER_ATTRIBUTIONS, name
        assert not (m.pairwise and m.has_se), name
    from treeinner._methods import DEFAULT_CLI_METHODS, DEFAULT_METHODS

    assert not set(OPTIONAL) & {*DEFAULT_METHODS, *DEFAULT_CLI_METHODS}
    with pytest.raises(TypeError):
        treeinner.OPTIONAL_METHODS["x"] = OPTIONAL["tree_inner_interactions"]


@pytest.mark.parametrize("name", NAMES)
def test_every_method_through_importance(model_data, name):
    model, X, y, w, _ = model_data
    df = treeinner.importance(model, X, y, methods=[name], sample_weight=w, random_state=0)
    assert list(df.columns) == [name] and list(df.index) == list(X.columns)
    assert np.all(np.isfinite(df[name]))
    assert np.any(df[name] != 0), name


@pytest.mark.parametrize("name", [n for n, m in REGISTRY.items() if m.row_additive])
def test_row_additive_methods_add_up_over_rows(model_data, name):
    """compute on disjoint chunks adds up to compute on all rows; finish gives the score."""
    model, X, y, w, _ = model_data
    ens = treeinner.from_model(model)
    m = get(name)
    opts = Options(sample_weight=w)
    whole = m.compute(ens, X, y, opts)
    parts = [(0, 57), (57, 58), (58, 200)]
    sums = sum(m.compute(ens, X.iloc[a:b], y[a:b], Options(sample_weight=w[a:b])) for a, b in parts)
    np.testing.assert_allclose(sums, whole, rtol=1e-10, atol=1e-12)
    score = m.finish(whole, float(w.sum()))
    np.testing.assert_allclose(score, m.score(ens, X, y, opts), rtol=1e-12)
    col = treeinner.importance(model, X, y, methods=[name], sample_weight=w)[name]
    np.testing.assert_allclose(score.sum(axis=1), col, rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_every_method_through_select_features(model_data, name):
    model, X, y, w, _ = model_data
    kept = treeinner.select_features(
        model, X, y, method=name, threshold=-np.inf, top_k=2, random_state=0
    )
    assert len(kept) == 2 and set(kept) <= set(X.columns)


@pytest.mark.parametrize("name", NAMES)
def test_every_method_through_the_selector(model_data, name):
    model, X, y, _, _ = model_data
    sel = treeinner.TreeInnerSelector(
        xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1),
        method=name,
        threshold=-np.inf,
        top_k=3,
        refit=False,
        random_state=0,
    ).fit(X, y)
    assert sel.get_support().sum() == 3
    assert list(sel.scores_.index) == list(X.columns)


def test_every_method_through_the_plot(model_data):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model, X, y, _, _ = model_data
    df = treeinner.importance(model, X, y, methods=NAMES, random_state=0)
    ax = treeinner.plot.importance(df)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == NAMES
    plt.close(ax.figure)


def test_reference_reaches_only_the_methods_that_use_it(model_data):
    model, X, y, _, ref = model_data
    users = [n for n, m in REGISTRY.items() if m.uses_reference]
    others = [n for n, m in REGISTRY.items() if not m.uses_reference]
    assert set(users) == {
        "tree_inner",
        "forest_inner",
        "abs_predecomp",
        "unbiased_gain",
        "total_gain",
    }
    small = (ref[0][:100], ref[1][:100])  # node values unlike the stored covers
    a = treeinner.importance(model, X, y, methods=NAMES, reference=small, random_state=0)
    b = treeinner.importance(model, X, y, methods=NAMES, random_state=0)
    for n in users:
        if n != "total_gain":
            assert not np.allclose(a[n], b[n]), n
    # the split gains come from the reference only for models that store none
    pd.testing.assert_frame_equal(a[[*others, "total_gain"]], b[[*others, "total_gain"]])
    with pytest.raises(ValueError, match="none of"):
        treeinner.importance(model, X, y, methods=others, reference=small)


def test_y_is_needed_only_by_the_methods_that_use_it(model_data):
    model, X, _, _, _ = model_data
    free = [n for n, m in REGISTRY.items() if not m.needs_y]
    assert set(free) == {"abs_predecomp", "abs_saabas", "abs_shap", "total_gain"}
    df = treeinner.importance(model, X, None, methods=free)
    assert list(df.columns) == free
    with pytest.raises(ValueError, match="y is None"):
        treeinner.importance(model, X, None, methods=["tree_inner"])


def test_resolve_and_its_errors_list_every_choice():
    assert resolve("tree_inner", "shap") == ["tree_inner_shap"]
    assert resolve(["tree_inner, abs_shap", "tree_inner"], "saabas") == [
        "tree_inner_saabas",
        "abs_shap",
    ]
    assert resolve(["forest_inner"]) == ["forest_inner"]
    with pytest.raises(ValueError) as e:
        resolve("gain")
    for name in NAMES:
        assert name in str(e.value)
    with pytest.raises(ValueError, match="'predecomp', 'saabas', 'shap'.*did you mean 'shap'"):
        resolve("tree_inner", "tree_shap")
    with pytest.raises(ValueError, match="contradicts"):
        resolve("tree_inner_saabas", "shap")
    with pytest.raises(ValueError, match="No method"):
        resolve(" , ")


def test_a_new_method_is_one_entry(model_data, monkeypatch):
    """Registering a method makes it available to importance, select_features and the plot."""
    model, X, y, w, _ = model_data

    def compute(ens, X, y, opts):
        return np.arange(ens.n_features, dtype=float)[:, None] * len(y)

    monkeypatch.setitem(
        REGISTRY,
        "rank_by_position",
        Method(name="rank_by_position", summary="feature position", compute=compute),
    )
    df = treeinner.importance(model, X, y, methods=["tree_inner", "rank_by_position"])
    np.testing.assert_array_equal(df["rank_by_position"], np.arange(4) * len(y))
    kept = treeinner.select_features(model, X, y, method="rank_by_position", top_k=1)
    assert kept == ["noise"]


def test_the_defaults_follow_the_benchmark_evidence():
    """The recommended method (``importance()``'s first default column and the command line's
    default) is the best average rank on held-out rows over the cells
    of the real-data benchmark and the simulation study, and the default columns are in the
    order of that rank (``benchmarks/results/real_data.json``, written by
    ``benchmarks/bench_real_data.py`` from both studies)."""
    import json
    from pathlib import Path

    from treeinner._methods import DEFAULT_CLI_METHODS, DEFAULT_METHODS, RECOMMENDED_METHOD
    from treeinner._significance import DEFAULT_SIGNIFICANCE_METHODS

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "real_data.json"
    combined = json.loads(path.read_text())["combined"]["valid"]
    assert RECOMMENDED_METHOD == combined["best"] == DEFAULT_METHODS[0]
    assert DEFAULT_CLI_METHODS[0] == RECOMMENDED_METHOD
    assert DEFAULT_SIGNIFICANCE_METHODS == (RECOMMENDED_METHOD,)  # one method for both
    ranks = [combined["pooled"][m] for m in DEFAULT_METHODS]
    assert ranks == sorted(ranks), dict(zip(DEFAULT_METHODS, ranks))
    assert min(combined["pooled"], key=combined["pooled"].get) == RECOMMENDED_METHOD


# ---------------------------------------------------------------------- optional methods
@pytest.mark.parametrize("name", INTERVENTIONAL)
def test_interventional_methods_through_importance(model_data, name):
    """The registry's interventional methods equal the public functions, add up over rows,
    and give one-pass standard errors from their moments."""
    model, X, y, w, (Xt, _) = model_data
    bg = Xt[:30]
    df = treeinner.importance(
        model, X, y, methods=[name, "tree_inner"], sample_weight=w, background=bg
    )
    assert list(df.columns) == [name, "tree_inner"] and list(df.index) == list(X.columns)
    fn = treeinner.tree_inner if name == "tree_inner_interventional" else treeinner.forest_inner
    kw = {"gradient": "initial"} if name.startswith("forest_inner_initial") else {}
    want = fn(model, X, y, attribution="interventional", background=bg, sample_weight=w, **kw)
    np.testing.assert_allclose(df[name], want, rtol=1e-12)
    assert np.any(df[name] != 0)
    # row-additive, through the Options' background
    ens = treeinner.from_model(model)
    m = get(name)
    whole = m.compute(ens, X, y, Options(sample_weight=w, background=bg))
    parts = [(0, 57), (57, 58), (58, 200)]
    sums = sum(
        m.compute(ens, X.iloc[a:b], y[a:b], Options(sample_weight=w[a:b], background=bg))
        for a, b in parts
    )
    np.testing.assert_allclose(sums, whole, rtol=1e-10, atol=1e-12)
    # standard errors from the moments: the sums of squares of the per-row terms
    se = treeinner.importance(model, X, y, methods=[name], background=bg, se=True)
    assert np.all(se[f"{name}_se"] > 0)
    mom = m.moments(ens, X, y, Options(background=bg))
    np.testing.assert_allclose(se[name], mom.s1.sum(axis=1), rtol=1e-10)
    # the attribution spelling resolves to the same column
    family = name.removesuffix("_interventional")
    df2 = treeinner.importance(
        model, X, y, methods=[family], attribution="interventional", sample_weight=w,
        background=bg,
    )  # fmt: skip
    np.testing.assert_allclose(df2[name], df[name], rtol=1e-12)
    # bootstrap resamples carry the background
    boot = treeinner.importance(
        model, X, y, methods=[name], background=bg, n_bootstrap=2, random_state=0
    )
    assert np.all(np.isfinite(boot[f"{name}_se"]))


def test_optional_methods_need_what_they_need(model_data):
    model, X, y, _, (Xt, _) = model_data
    with pytest.raises(ValueError, match="needs a background"):
        treeinner.importance(model, X, y, methods=["tree_inner_interventional"])
    with pytest.raises(ValueError, match="needs a background"):
        get("tree_inner_interventional").compute(treeinner.from_model(model), X, y, Options())
    with pytest.raises(ValueError, match="none of"):
        treeinner.importance(model, X, y, methods=["tree_inner"], background=Xt[:10])
    with pytest.raises(ValueError, match="alone"):
        treeinner.importance(model, X, y, methods=["tree_inner_interactions", "tree_inner"])
    for kw in ({"se": True}, {"n_bootstrap": 3}):
        with pytest.raises(ValueError, match="no standard errors"):
            treeinner.importance(model, X, y, methods="tree_inner_interactions", **kw)
    with pytest.raises(ValueError, match="contradicts"):
        resolve("tree_inner_interventional", "shap", optional=True)
    # refused, with the reason, where only per-feature methods on (X, y) go
    for name in OPTIONAL:
        with pytest.raises(ValueError, match="treeinner.importance"):
            treeinner.significance(model, X, y, methods=[name])
        with pytest.raises(ValueError, match="method must be one of"):
            treeinner.select_features(model, X, y, method=name)
    with pytest.raises(ValueError, match="attribution must be one of"):
        treeinner.significance(model, X, y, methods="tree_inner", attribution="interventional")


def test_pairwise_method_through_importance(model_data):
    """The pairwise method: the feature x feature matrix of tree_inner_interactions, whose
    rows sum to tree_inner_shap; row-additive."""
    model, X, y, w, _ = model_data
    df = treeinner.importance(model, X, y, methods="tree_inner_interactions", sample_weight=w)
    want = treeinner.tree_inner_interactions(model, X, y, sample_weight=w)
    pd.testing.assert_frame_equal(df, want, rtol=1e-12)
    assert list(df.index) == list(df.columns) == list(X.columns)
    np.testing.assert_allclose(df.to_numpy(), df.to_numpy().T, atol=1e-12)
    shap_inner = treeinner.importance(model, X, y, methods="tree_inner_shap", sample_weight=w)
    np.testing.assert_allclose(df.sum(axis=1), shap_inner["tree_inner_shap"], rtol=1e-9)
    ens = treeinner.from_model(model)
    m = get("tree_inner_interactions")
    whole = m.compute(ens, X, y, Options(sample_weight=w))
    assert whole.shape == (4, 4, 1)
    parts = sum(
        m.compute(ens, X.iloc[a:b], y[a:b], Options(sample_weight=w[a:b]))
        for a, b in ((0, 57), (57, 200))
    )
    np.testing.assert_allclose(parts, whole, rtol=1e-10, atol=1e-12)
