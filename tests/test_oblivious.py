"""The oblivious-tree fast path (kernels.oblivious, kernels.routing.TREE_OBLIVIOUS) against the
general path it replaces, on CatBoost SymmetricTree models and hand-built oblivious ensembles.

The general path is the one ``tests/test_routing.py`` checks against a reference router written
from the rules; here every public computation that routes rows (margins, leaf indices,
PreDecomp, Saabas, TreeSHAP, TreeInner, ForestInner, their standard errors) must give the same
numbers with the fast path on and off (``kernels.oblivious.general_path``), exactly where only
the routing changes and to 1e-12 (relative) where sums are taken in another order (TreeSHAP's
leaf tables), on inputs at the thresholds, at their float32 and float64 neighbours, NaN and
+-inf. The detector is checked against a structural definition written here, and trees that
are not oblivious (CatBoost Depthwise, XGBoost, one perturbed node) stay on the general path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import treeinner
from treeinner import TreeEnsemble
from treeinner.kernels import oblivious
from treeinner.kernels.routing import TOP_DEPTH, TREE_OBLIVIOUS
from treeinner.treeshap import _setup

cb = pytest.importorskip("catboost")

F32 = np.float32


# ---------------------------------------------------------------------- helpers
def fresh(ens: TreeEnsemble) -> TreeEnsemble:
    """A copy with nothing cached (its layout is built under the current switch)."""
    out = ens.replace()
    out._layout  # noqa: B018  (build it now)
    return out


def general(ens: TreeEnsemble) -> TreeEnsemble:
    with oblivious.general_path():
        return fresh(ens)


def flagged(ens: TreeEnsemble) -> np.ndarray:
    return (ens._layout.tree_flags & TREE_OBLIVIOUS) != 0


def _decision(ens: TreeEnsemble, n: int):
    """What decides node n, or None where the fast path cannot (categorical, missing Zero)."""
    if ens.split_type[n] != 0 or ens.missing_type[n] == 1:
        return None
    b = float(ens._bound[n])
    nan_left = bool(ens.default_left[n]) if ens.missing_type[n] == 0 else 0.0 <= b
    return int(ens.feature[n]), b, nan_left


def structurally_oblivious(ens: TreeEnsemble, t: int) -> bool:
    """Complete to its depth (1..TOP_DEPTH), one decision per level: the definition."""
    level = [int(ens.tree_offsets[t])]
    depth = 0
    while True:
        inner = [n for n in level if ens.left[n] >= 0]
        if not inner:
            return 1 <= depth <= TOP_DEPTH
        if len(inner) != len(level):
            return False
        decisions = {_decision(ens, n) for n in level}
        if len(decisions) != 1 or None in decisions:
            return False
        level = [int(c) for n in level for c in (ens.left[n], ens.right[n])]
        depth += 1


def adversarial(rng, ens: TreeEnsemble, X: np.ndarray) -> np.ndarray:
    """Rows of X with values replaced by the model's thresholds, their float32 and float64
    neighbours, float32 rounding ties, NaN and +-inf."""
    X = np.array(X, dtype=np.float64)
    n, p = X.shape
    inner = ens.left >= 0
    for f in range(p):
        t = np.unique(ens.threshold[inner & (ens.feature == f) & (ens.split_type == 0)])
        if t.size == 0:
            continue
        t32 = t.astype(F32)
        with np.errstate(over="ignore"):
            up32 = np.nextafter(t32, F32(np.inf)).astype(np.float64)
            down32 = np.nextafter(t32, F32(-np.inf)).astype(np.float64)
        near = np.concatenate(
            [
                t,
                np.nextafter(t, np.inf),
                np.nextafter(t, -np.inf),
                up32,
                down32,
                (t + up32) / 2,  # a float32 rounding tie
                np.nextafter((t + up32) / 2, np.inf),
                np.nextafter((t + up32) / 2, -np.inf),
            ]
        )
        rows = rng.random(n) < 0.5
        X[rows, f] = rng.choice(near, size=int(rows.sum()))
    special = rng.random((n, p))
    X[special < 0.05] = np.nan
    X[(special >= 0.05) & (special < 0.07)] = np.inf
    X[(special >= 0.07) & (special < 0.09)] = -np.inf
    return X


def close(a, b, rtol=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    scale = max(1.0, float(np.nanmax(np.abs(b)))) if b.size else 1.0
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


# ---------------------------------------------------------------------- CatBoost models
def _data(seed, n=700, p=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, 3] = np.round(X[:, 3] * 2)  # many ties at the borders
    X[rng.random((n, p)) < 0.05] = np.nan
    z = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) * 2 + np.nan_to_num(X[:, 3])
    return rng, X, z


def _catboost(loss, grow="SymmetricTree", nan_mode="Min", seed=0):
    rng, X, z = _data(seed)
    if loss == "RMSE":
        y = z + rng.normal(size=z.shape)
        model = cb.CatBoostRegressor
    elif loss == "Logloss":
        y = (z + rng.normal(size=z.shape) > 0.5).astype(float)
        model = cb.CatBoostClassifier
    else:
        y = np.digitize(z + rng.normal(size=z.shape), [-0.5, 1.0]).astype(float)
        model = cb.CatBoostClassifier
    m = model(
        iterations=40,
        depth=5,
        learning_rate=0.3,
        loss_function=loss,
        grow_policy=grow,
        nan_mode=nan_mode,
        random_seed=seed,
        verbose=False,
        allow_writing_files=False,
        thread_count=1,
    )
    m.fit(X, y)
    return m, X, y, rng


CASES = [("RMSE", "Min"), ("RMSE", "Max"), ("Logloss", "Min"), ("MultiClass", "Max")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{b}" for a, b in CASES])
def symmetric(request):
    loss, nan_mode = request.param
    m, X, y, rng = _catboost(loss, nan_mode=nan_mode, seed=len(loss))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = fresh(treeinner.from_model(m))
    Xa = adversarial(rng, ens, X[:300])
    ya = y[:300]
    return m, ens, general(ens), X, y, Xa, ya


def test_symmetric_trees_take_the_fast_path(symmetric):
    _, ens, gen, *_ = symmetric
    assert flagged(ens).all()
    assert not flagged(gen).any()
    assert all(structurally_oblivious(ens, t) for t in range(ens.n_trees))


def test_margins_and_leaves_are_identical(symmetric):
    m, ens, gen, _, _, Xa, _ = symmetric
    fast = ens.predict_margin(Xa)
    np.testing.assert_array_equal(fast, gen.predict_margin(Xa))
    np.testing.assert_array_equal(ens.leaf_index(Xa), gen.leaf_index(Xa))
    # CatBoost's own leaf numbers (a multiclass tree is one tree per class here)
    first = ens.tree_group == 0
    np.testing.assert_array_equal(ens.leaf_index(Xa)[:, first], m.calc_leaf_indexes(cb.Pool(Xa)))
    raw = np.asarray(m.predict(Xa, prediction_type="RawFormulaVal"))
    close(fast, raw.reshape(fast.shape), rtol=1e-9)
    # the parallel kernels (rows x trees above the serial threshold) as well
    big = np.tile(Xa, (20, 1))
    np.testing.assert_array_equal(ens.predict_margin(big), gen.predict_margin(big))
    np.testing.assert_array_equal(ens.leaf_index(big), gen.leaf_index(big))


def test_path_attributions_are_identical(symmetric):
    _, ens, gen, X, y, Xa, _ = symmetric
    ref = (X, y)
    a = treeinner.predecomp(ens, Xa, reference=ref).values
    with oblivious.general_path():
        b = treeinner.predecomp(gen, Xa, reference=ref).values
    np.testing.assert_array_equal(a, b)
    if np.all(np.isfinite(ens.cover)):
        np.testing.assert_array_equal(
            treeinner.saabas(ens, Xa).values, treeinner.saabas(gen, Xa).values
        )


def test_tree_shap_from_leaf_tables(symmetric):
    m, ens, gen, _, _, Xa, _ = symmetric
    # every tree is read from its leaf table for these rows, none on the general path
    assert _setup(ens, "auto", 0, ens.n_trees, Xa.shape[0]).otab[0].all()
    with oblivious.general_path():
        assert not _setup(gen, "auto", 0, ens.n_trees, Xa.shape[0]).otab[0].any()
    # fewer rows than a tree has leaves: not tabulated (the general kernel), same values
    few = _setup(ens, "auto", 0, ens.n_trees, 3).otab[0]
    assert not few[ens._tree_depth > 1].any()
    close(treeinner.tree_shap(ens, Xa[:3]).values, treeinner.tree_shap(gen, Xa[:3]).values)
    fast = treeinner.tree_shap(ens, Xa)
    with oblivious.general_path():
        slow = treeinner.tree_shap(gen, Xa)
    close(fast.values, slow.values)
    close(fast.bias, slow.bias)
    sv = np.asarray(m.get_feature_importance(cb.Pool(Xa), type="ShapValues"))
    want = sv[:, :-1] if sv.ndim == 2 else np.moveaxis(sv[:, :, :-1], 1, 2)
    close(fast.values, want, rtol=1e-9)
    # the parallel kernel
    big = np.tile(Xa, (12, 1))
    close(
        treeinner.tree_shap(ens, big).values,
        np.tile(fast.values, (12,) + (1,) * (fast.values.ndim - 1)),
    )


@pytest.mark.parametrize("attribution", ["predecomp", "shap"])
def test_tree_and_forest_inner(symmetric, attribution):
    _, ens, gen, X, y, Xa, ya = symmetric
    ref = (X, y) if attribution == "predecomp" else None
    kw = {"attribution": attribution, "reference": ref}
    ti = treeinner.tree_inner(ens, Xa, ya, **kw)
    fi = treeinner.forest_inner(ens, Xa, ya, **kw)
    with oblivious.general_path():
        ti_g = treeinner.tree_inner(gen, Xa, ya, **kw)
        fi_g = treeinner.forest_inner(gen, Xa, ya, **kw)
    close(ti.to_numpy(), ti_g.to_numpy())
    close(fi.to_numpy(), fi_g.to_numpy())
    if attribution == "predecomp" and ens.n_outputs == 1:
        # the staged pass's slot sums are exactly the general leaf sums
        np.testing.assert_array_equal(ti.to_numpy(), ti_g.to_numpy())


def test_standard_errors(symmetric):
    _, ens, gen, X, y, Xa, ya = symmetric
    a = treeinner.significance(ens, Xa, ya, methods="tree_inner", reference=(X, y))
    b_shap = treeinner.significance(ens, Xa, ya, methods="tree_inner_shap")
    with oblivious.general_path():
        b = treeinner.significance(gen, Xa, ya, methods="tree_inner", reference=(X, y))
        a_shap = treeinner.significance(gen, Xa, ya, methods="tree_inner_shap")
    for fast, slow in ((a, b), (b_shap, a_shap)):
        num = fast.select_dtypes("number").columns
        assert "se" in num
        close(fast[num].to_numpy(), slow[num].to_numpy(), rtol=1e-10)


def test_unbiased_gain_identical(symmetric):
    _, ens, gen, X, y, Xa, ya = symmetric
    a = treeinner.unbiased_gain(ens, Xa, ya, reference=(X, y), random_state=0)
    with oblivious.general_path():
        b = treeinner.unbiased_gain(gen, Xa, ya, reference=(X, y), random_state=0)
    close(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------- other trees
def test_depthwise_catboost_and_xgboost_stay_general():
    m, X, _, _ = _catboost("RMSE", grow="Depthwise", seed=3)
    ens = treeinner.from_model(m)
    models = [ens]
    xgb = pytest.importorskip("xgboost")
    rng, X2, z = _data(4)
    b = xgb.XGBRegressor(n_estimators=30, max_depth=4, learning_rate=0.3, random_state=0)
    b.fit(X2, z + rng.normal(size=z.shape))
    models.append(treeinner.from_model(b))
    for e in models:
        want = np.array([structurally_oblivious(e, t) for t in range(e.n_trees)])
        np.testing.assert_array_equal(flagged(e), want)
        assert not want[e._tree_depth >= 2].any()  # real trees of depth >= 2 are not oblivious
        Xa = adversarial(rng, e, X2[:200])
        np.testing.assert_array_equal(e.predict_margin(Xa), general(e).predict_margin(Xa))


def _hand_built(rng, rule, n_trees=6, p=4, perturb=False):
    """Complete oblivious trees (depth 1..5) with nodes in shuffled order, one decision per
    level (NaN and None missing types, both NaN directions), positive covers and counts."""
    cols = {k: [] for k in ("left", "right", "feature", "threshold", "default_left")}
    cols.update({k: [] for k in ("missing_type", "value", "cover", "count", "leaf_id")})
    offsets = [0]
    pools = [np.unique(F32(rng.normal(size=3)).astype(np.float64)) for _ in range(p)]
    for t in range(n_trees):
        d = int(rng.integers(1, 6))
        n = 2 ** (d + 1) - 1
        order = np.concatenate([[0], 1 + rng.permutation(n - 1)])  # heap index -> slot
        slot = np.empty(n, dtype=np.int64)
        slot[order] = np.arange(n)
        lev = np.floor(np.log2(np.arange(n) + 1)).astype(np.int64)
        f = rng.integers(0, p, d)
        thr = np.array([rng.choice(pools[j]) for j in f])
        dl = rng.integers(0, 2, d)
        mt = rng.choice([0, 2], d)
        heap_inner = np.arange(n) < n // 2
        a = np.full(n, -1)
        a[heap_inner] = 2 * np.arange(n // 2) + 1
        cover = np.zeros(n)
        cover[~heap_inner] = rng.uniform(0.5, 5.0, (~heap_inner).sum())
        for i in range(n // 2 - 1, -1, -1):
            cover[i] = cover[2 * i + 1] + cover[2 * i + 2]
        feat = np.where(heap_inner, f[np.minimum(lev, d - 1)], -1)
        th = np.where(heap_inner, thr[np.minimum(lev, d - 1)], np.nan)
        if perturb and t == 0 and d >= 2:
            th[2] = th[2] + 1.0  # the second node of level 1 differs: not oblivious
        base = offsets[-1]
        left = np.where(heap_inner, base + slot[np.maximum(a, 0)], -1)
        right = np.where(heap_inner, base + slot[np.maximum(a + 1, 0)], -1)
        for k, v in (
            ("left", left),
            ("right", right),
            ("feature", feat),
            ("threshold", th),
            ("default_left", np.where(heap_inner, dl[np.minimum(lev, d - 1)], 0)),
            ("missing_type", np.where(heap_inner, mt[np.minimum(lev, d - 1)], 0)),
            ("value", np.where(heap_inner, 0.0, rng.normal(size=n))),
            ("cover", cover),
            ("count", np.round(cover * 10)),
            ("leaf_id", np.where(heap_inner, -1, np.arange(n) - n // 2)),
        ):
            cols[k].append(v[order])
        offsets.append(base + n)
    cols = {k: np.concatenate(v) for k, v in cols.items()}
    n_nodes = offsets[-1]
    return TreeEnsemble(
        tree_offsets=np.array(offsets),
        **cols,
        split_type=np.zeros(n_nodes),
        gain=np.zeros(n_nodes),
        cat_offsets=np.zeros(n_nodes + 1),
        cat_words=np.zeros(0),
        tree_group=np.zeros(n_trees),
        tree_iteration=np.arange(n_trees),
        learning_rate=np.full(n_trees, 0.3),
        tree_weight=np.ones(n_trees),
        base_margin=[0.25],
        feature_names=tuple(f"f{j}" for j in range(p)),
        named=False,
        decision_rule=rule,
        float32_sum=False,
    )


@pytest.mark.parametrize("rule", ["float64 <=", "float32 <", "float32 <="])
@pytest.mark.parametrize("seed", range(4))
def test_hand_built_oblivious_ensemble(rule, seed):
    rng = np.random.default_rng(seed)
    ens = fresh(_hand_built(rng, rule, perturb=seed % 2 == 1))
    gen = general(ens)
    want = np.array([structurally_oblivious(ens, t) for t in range(ens.n_trees)])
    np.testing.assert_array_equal(flagged(ens), want)
    perturbed = seed % 2 == 1 and ens._tree_depth[0] >= 2
    np.testing.assert_array_equal(want, np.arange(ens.n_trees) != (0 if perturbed else -1))
    X = adversarial(rng, ens, rng.normal(size=(400, ens.n_features)))
    X[:8] = [[0.0] * ens.n_features, [-0.0] * ens.n_features] * 4  # MISSING_NONE reads NaN as 0
    X[8:12, :] = np.nan
    np.testing.assert_array_equal(ens.predict_margin(X), gen.predict_margin(X))
    np.testing.assert_array_equal(ens.leaf_index(X), gen.leaf_index(X))
    np.testing.assert_array_equal(
        treeinner.predecomp(ens, X).values, treeinner.predecomp(gen, X).values
    )
    y = rng.normal(size=X.shape[0])
    np.testing.assert_array_equal(
        treeinner.tree_inner(ens, X, y).to_numpy(), treeinner.tree_inner(gen, X, y).to_numpy()
    )
    for weights in ("cover", "count"):
        a = treeinner.tree_shap(ens, X, node_weight=weights)
        with oblivious.general_path():
            b = treeinner.tree_shap(gen, X, node_weight=weights)
        close(a.values, b.values)
        # exact Shapley values: they add up to the margin
        close(a.values.sum(axis=1) + a.bias[0], ens.predict_margin(X))
    close(
        treeinner.tree_inner(ens, X, y, attribution="shap").to_numpy(),
        treeinner.tree_inner(gen, X, y, attribution="shap").to_numpy(),
    )


def test_switch_restores_and_scopes():
    assert oblivious.FAST_PATH
    with oblivious.general_path():
        assert not oblivious.FAST_PATH
        with pytest.raises(RuntimeError):
            with oblivious.general_path():
                raise RuntimeError
        assert not oblivious.FAST_PATH
    assert oblivious.FAST_PATH


def test_xgboost_trees_that_happen_to_be_oblivious():
    """Depth-1 trees (stumps) are oblivious whatever the booster: XGBoost's take the fast path,
    with its cover weights in the TreeSHAP tables."""
    xgb = pytest.importorskip("xgboost")
    rng, X, z = _data(5, n=1500)
    y = z + rng.normal(size=z.shape)
    b = xgb.XGBRegressor(n_estimators=40, max_depth=1, learning_rate=0.3, random_state=0)
    b.fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eta and lambda cannot be recovered from stumps
        ens = fresh(treeinner.from_model(b))
    gen = general(ens)
    assert flagged(ens).all() and ens.node_weight == "cover"
    Xa = adversarial(rng, ens, X[:400])
    np.testing.assert_array_equal(ens.predict_margin(Xa), gen.predict_margin(Xa))
    fast = treeinner.tree_shap(ens, Xa).values
    with oblivious.general_path():
        slow = treeinner.tree_shap(gen, Xa).values
        ti_slow = treeinner.tree_inner(gen, Xa, y[:400], attribution="shap").to_numpy()
    close(fast, slow)
    close(treeinner.tree_inner(ens, Xa, y[:400], attribution="shap").to_numpy(), ti_slow)
    ok = ~np.isinf(Xa).any(axis=1)  # a DMatrix refuses infinities
    contribs = b.get_booster().predict(xgb.DMatrix(Xa[ok]), pred_contribs=True)[:, :-1]
    close(fast[ok], contribs, rtol=1e-5)  # XGBoost sums in float32
