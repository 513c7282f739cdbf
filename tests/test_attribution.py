"""PreDecomp and Saabas attributions: local accuracy, agreement with XGBoost's approx_contribs,
the lambda = 0 limit, tree ranges, the paper's Example 1, and the Attribution API."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import treeinner
from tests._helpers import quiet, quiet_ensemble
from treeinner.ensemble import TreeEnsemble
from treeinner.kernels.attribution import subtree_sums

try:  # the staged pass moved to its own module; importance re-exports it
    from treeinner._staged import _staged
except ImportError:  # pragma: no cover
    from treeinner.importance import _staged


def _labels(objective: str, rng, s: np.ndarray, n_class: int) -> np.ndarray:
    n = s.shape[0]
    if objective.startswith("multi"):
        cuts = np.quantile(s, np.linspace(0, 1, n_class + 1)[1:-1])
        return np.digitize(s + 0.5 * rng.normal(size=n), cuts).astype(float)
    if objective.startswith("binary"):
        return (s + rng.normal(size=n) > 0).astype(float)
    if objective == "reg:logistic":
        return 1 / (1 + np.exp(-s - rng.normal(size=n)))
    if objective in ("count:poisson", "reg:tweedie"):
        return rng.poisson(np.exp(0.5 * np.clip(s, -3, 3))).astype(float)
    if objective in ("reg:gamma", "reg:squaredlogerror"):
        return np.exp(0.3 * np.clip(s, -3, 3) + 0.2 * rng.normal(size=n))
    return 3 * s + rng.normal(size=n)


def _fit(
    objective="reg:squarederror",
    n_class=1,
    categorical=False,
    missing=0.15,
    rounds=5,
    seed=0,
    n=300,
    **params,
):
    """A small XGBoost model and its training X (DataFrame when categorical)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 2] = rng.integers(0, 4, size=n)  # ties
    if missing:
        X[rng.random((n, 4)) < missing] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if categorical:
        X = pd.DataFrame(X, columns=["a", "b", "c", "d"], index=np.arange(1000, 1000 + n))
        levels = ["red", "green", "blue", "cyan", "pink", "gold"]
        cat = rng.choice(levels, size=n)
        s = s + np.select([cat == "red", cat == "blue", cat == "gold"], [1.5, -1.0, 0.7], 0.0)
        cat = pd.Categorical(cat, categories=levels)
        if missing:
            cat[rng.random(n) < missing] = np.nan
        X["colour"] = cat
        params.setdefault("tree_method", "hist")
    y = _labels(objective, rng, s, n_class)
    p = {"objective": objective, "max_depth": 3, "eta": 0.3, "seed": seed, "nthread": 1}
    p.update(params)
    if n_class > 1:
        p["num_class"] = n_class
    d = xgb.DMatrix(X, y, enable_categorical=categorical)
    return xgb.train(p, d, rounds), X, y


OBJECTIVES = [
    ("reg:squarederror", {}),
    ("reg:squaredlogerror", {}),
    ("reg:logistic", {}),
    ("reg:pseudohubererror", {}),
    ("reg:pseudohubererror", {"huber_slope": 2.5}),
    ("binary:logistic", {}),
    ("binary:logistic", {"scale_pos_weight": 3.0}),
    ("binary:logitraw", {}),
    ("binary:hinge", {}),
    ("count:poisson", {}),
    ("count:poisson", {"max_delta_step": 2.0}),
    ("reg:gamma", {}),
    ("reg:tweedie", {"tweedie_variance_power": 1.2}),
    ("reg:tweedie", {"tweedie_variance_power": 1.7}),
]

# (id, kwargs of _fit)
MODELS = [
    *[
        ("-".join([o, *(f"{k}={v}" for k, v in e.items())]), {"objective": o, **e})
        for o, e in OBJECTIVES
    ],
    ("softprob-K3", {"objective": "multi:softprob", "n_class": 3}),
    ("softmax-K4", {"objective": "multi:softmax", "n_class": 4}),
    ("softprob-K5-exact", {"objective": "multi:softprob", "n_class": 5, "tree_method": "exact"}),
    ("parallel2", {"objective": "binary:logistic", "num_parallel_tree": 2, "subsample": 0.8}),
    (
        "parallel2-K3",
        {
            "objective": "multi:softprob",
            "n_class": 3,
            "num_parallel_tree": 2,
            "colsample_bytree": 0.7,
        },
    ),
    ("dart", {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0, "rounds": 6}),
    (
        "dart-K3",
        {
            "objective": "multi:softmax",
            "n_class": 3,
            "booster": "dart",
            "rate_drop": 0.4,
            "skip_drop": 0.0,
        },
    ),
    ("categorical-partition", {"categorical": True, "max_cat_to_onehot": 1}),
    ("categorical-onehot", {"categorical": True, "max_cat_to_onehot": 8}),
    ("categorical-logistic-K3", {"categorical": True, "objective": "multi:softprob", "n_class": 3}),
    ("no-missing-exact", {"missing": 0.0, "tree_method": "exact"}),
    ("heavy-missing-approx", {"missing": 0.5, "tree_method": "approx"}),
    ("lambda0-eta1-deep", {"lambda": 0.0, "eta": 1.0, "max_depth": 8}),
    ("lambda10-alpha", {"lambda": 10.0, "alpha": 0.5}),
]
_CACHE: dict = {}


def _model(key):
    if key not in _CACHE:
        kwargs = dict(MODELS)[key]
        booster, X, y = _fit(**kwargs)
        _CACHE[key] = (booster, quiet_ensemble(booster), X, y)
    return _CACHE[key]


def _check_local_accuracy(a, ens, X, margin=None):
    n = X.shape[0]
    p, K = ens.n_features, ens.n_outputs
    assert a.values.shape == ((n, p) if K == 1 else (n, p, K))
    assert a.bias.shape == (K,)
    if margin is None:
        margin = ens.predict_margin(X)
    total = a.values.sum(axis=1) + a.bias
    assert total.shape == margin.shape
    scale = np.max(np.abs(margin))
    np.testing.assert_allclose(total, margin, rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("key", [k for k, _ in MODELS])
def test_local_accuracy(key):
    """Prop. 1: the attributions plus the bias are the margin, for any node values."""
    booster, ens, X, _ = _model(key)
    for fn in (treeinner.predecomp, treeinner.saabas):
        a = fn(ens, X)
        _check_local_accuracy(a, ens, X)
        assert np.all(np.isfinite(a.values))
    # the bias is the base margin plus the root values of the trees of each output
    pre = treeinner.predecomp(ens, X)
    p = treeinner.node_values(ens, attribution="predecomp")
    expected = ens.base_margin.copy()
    np.add.at(expected, ens.tree_group, p[ens.tree_offsets[:-1]])
    np.testing.assert_allclose(pre.bias, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("key", ["binary:logistic", "softprob-K3", "categorical-partition"])
def test_booster_input_equals_ensemble_input(key):
    booster, ens, X, _ = _model(key)
    a = quiet(treeinner.predecomp, booster, X)
    b = quiet(treeinner.saabas, booster, X)
    np.testing.assert_array_equal(a.values, treeinner.predecomp(ens, X).values)
    np.testing.assert_array_equal(b.values, treeinner.saabas(ens, X).values)


def _xgb_approx(booster, X, categorical):
    d = xgb.DMatrix(X, enable_categorical=categorical)
    return booster.predict(d, pred_contribs=True, approx_contribs=True)


@pytest.mark.parametrize(
    "key",
    [
        "reg:squarederror",
        "binary:logistic",
        "count:poisson",
        "reg:gamma",
        "softprob-K3",
        "softmax-K4",
        "softprob-K5-exact",
        "parallel2",
        "parallel2-K3",
        "dart",
        "dart-K3",
        "categorical-partition",
        "categorical-onehot",
        "heavy-missing-approx",
        "lambda0-eta1-deep",
    ],
)
def test_saabas_equals_xgboost_approx_contribs(key):
    booster, ens, X, _ = _model(key)
    cat = isinstance(X, pd.DataFrame)
    ref = _xgb_approx(booster, X, cat)
    a = treeinner.saabas(ens, X)
    n, p, K = X.shape[0], ens.n_features, ens.n_outputs
    if K == 1:
        assert ref.shape == (n, p + 1)
        ours = np.column_stack([a.values, np.full(n, a.bias[0])])
    else:
        assert ref.shape == (n, K, p + 1)
        bias = np.broadcast_to(a.bias[None, :, None], (n, K, 1))
        ours = np.concatenate([np.moveaxis(a.values, 2, 1), bias], axis=2)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    # and PreDecomp differs from it where lambda > 0 (a test that could not tell them apart
    # would be worthless)
    if ens.reg_lambda > 0:
        pre = treeinner.predecomp(ens, X)
        assert np.max(np.abs(pre.values - a.values)) > 1e-4 * np.max(np.abs(a.values))


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "multi:softprob"])
def test_lambda_zero_predecomp_is_saabas(objective):
    booster, X, _ = _fit(
        objective, n_class=3 if objective.startswith("multi") else 1, reg_lambda=0.0
    )
    ens = quiet_ensemble(booster)
    assert ens.reg_lambda == 0.0
    pre = treeinner.predecomp(ens, X)
    sab = treeinner.saabas(ens, X)
    scale = np.max(np.abs(sab.values))
    np.testing.assert_allclose(pre.values, sab.values, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(pre.bias, sab.bias, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        treeinner.node_values(ens, attribution="predecomp"),
        treeinner.node_values(ens, attribution="saabas"),
        rtol=1e-10,
    )
    # the same model read with lambda = 1 (a wrong lambda) is no longer Saabas
    ens1 = treeinner.from_model(ens, reg_lambda=1.0)
    assert np.max(np.abs(treeinner.predecomp(ens1, X).values - sab.values)) > 1e-4 * scale


@pytest.mark.parametrize("key", ["reg:squarederror", "binary:logistic", "softprob-K3", "dart"])
def test_regularized_inner_values_are_eta_times_base_weights(key):
    """METHODS: the recursion from the leaves reproduces eta * base_weight at inner nodes
    (XGBoost's inner base_weights are -G/(H + lambda), unscaled), and never base_weight itself."""
    booster, ens, X, _ = _model(key)
    if key == "dart":  # DART rescales leaves after growing: the identity must break
        p = treeinner.node_values(ens, attribution="predecomp")
        bw = _base_weights(booster)
        inner = ens.left >= 0
        eta = np.repeat(ens.learning_rate, np.diff(ens.tree_offsets))
        assert not np.allclose(p[inner], (eta * bw)[inner], rtol=1e-4)
        return
    p = treeinner.node_values(ens, attribution="predecomp")
    bw = _base_weights(booster)
    inner = ens.left >= 0
    eta = np.repeat(ens.learning_rate, np.diff(ens.tree_offsets))
    tree = np.repeat(np.arange(ens.n_trees), np.diff(ens.tree_offsets))
    scale = np.array([np.max(np.abs(p[tree == t])) for t in range(ens.n_trees)])[tree]
    err = np.abs(p - eta * bw)[inner]
    assert np.all(err <= 1e-5 * np.abs(eta * bw)[inner] + 1e-5 * scale[inner]), err.max()
    assert not np.allclose(p[inner], bw[inner], rtol=1e-3)


def _base_weights(booster):
    doc = json.loads(bytes(booster.save_raw("json")))
    gb = doc["learner"]["gradient_booster"]
    model = gb["gbtree"]["model"] if gb["name"] == "dart" else gb["model"]
    return np.concatenate([np.asarray(t["base_weights"], float) for t in model["trees"]])


# ----------------------------------------------------------------------------- iteration_range=
def _leaf_values(ens, X):
    """(n, n_trees) value of the leaf each row reaches in each tree."""
    L = ens.leaf_index(X).astype(np.int64)
    out = np.empty(L.shape)
    off = ens.tree_offsets
    for t in range(ens.n_trees):
        nodes = np.arange(off[t], off[t + 1])
        leaves = nodes[ens.left[nodes] < 0]
        m = np.full(int(ens.leaf_id[leaves].max()) + 1, -1)
        m[ens.leaf_id[leaves]] = leaves
        out[:, t] = ens.value[m[L[:, t]]]
    return out


def _margin_of_trees(ens, X, lo, hi):
    """Base margin plus the leaf values of trees lo:hi, per output."""
    lv = _leaf_values(ens, X)
    out = np.tile(ens.base_margin, (X.shape[0], 1))
    for t in range(lo, hi):
        out[:, ens.tree_group[t]] += lv[:, t]
    return out[:, 0] if ens.n_outputs == 1 else out


def _round_trees(ens, start, stop):
    """Tree indices lo, hi of boosting rounds start..stop-1 (every class, parallel trees)."""
    trees = np.flatnonzero((ens.tree_iteration >= start) & (ens.tree_iteration < stop))
    return int(trees[0]), int(trees[-1]) + 1


@pytest.mark.parametrize("key", ["reg:squarederror", "softprob-K3", "parallel2-K3", "dart"])
def test_iteration_ranges(key):
    booster, ens, X, _ = _model(key)
    n_iter = ens.n_iterations
    # every range of rounds: the trees of those rounds (all classes and parallel trees), for
    # both path attributions; single rounds at the start, middle and end included
    ranges = ((0, 1), (2, 5), (1, n_iter), (n_iter - 1, n_iter), (1, 3), (2, n_iter), (0, n_iter))
    for start, stop in ranges:
        lo, hi = _round_trees(ens, start, stop)
        margin = ens.predict_margin(X, iteration_range=(start, stop))  # base margin included
        np.testing.assert_allclose(margin, _margin_of_trees(ens, X, lo, hi), rtol=1e-6, atol=1e-6)
        for fn in (treeinner.predecomp, treeinner.saabas):
            a = fn(ens, X, iteration_range=(start, stop))
            _check_local_accuracy(a, ens, X, margin)
    # the pieces add up: rounds [0, 2) plus rounds [2, n) is the whole model
    full = treeinner.predecomp(ens, X)
    first = treeinner.predecomp(ens, X, iteration_range=(0, 2))
    rest = treeinner.predecomp(ens, X, iteration_range=(2, n_iter))
    np.testing.assert_allclose(first.values + rest.values, full.values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        first.bias + rest.bias - ens.base_margin, full.bias, rtol=1e-12, atol=1e-12
    )
    # (0, 0) means all rounds, as in XGBoost; a list and numpy ints work as a tuple does
    np.testing.assert_array_equal(
        treeinner.predecomp(ens, X, iteration_range=(0, 0)).values, full.values
    )
    np.testing.assert_array_equal(
        treeinner.saabas(ens, X, iteration_range=[np.int64(1), 3]).values,
        treeinner.saabas(ens, X, iteration_range=(1, 3)).values,
    )
    # a single round of the same model differs from the whole (the option is not ignored)
    assert not np.allclose(treeinner.predecomp(ens, X, iteration_range=(1, 2)).values, full.values)


@pytest.mark.parametrize("iteration_range", [(3, 2), (0, 99), (-1, 2)])
def test_bad_iteration_ranges(iteration_range):
    _, ens, X, _ = _model("reg:squarederror")
    for fn in (treeinner.predecomp, treeinner.saabas):
        with pytest.raises(ValueError, match="iteration_range"):
            fn(ens, X, iteration_range=iteration_range)


@pytest.mark.parametrize("iteration_range", [slice(0, 4), (1,), (0, 1, 2), "0:4", (0.0, 2.0)])
def test_iteration_range_must_be_two_ints(iteration_range):
    _, ens, X, _ = _model("reg:squarederror")
    for fn in (treeinner.predecomp, treeinner.saabas):
        with pytest.raises(TypeError, match=r"iteration_range must be None or \(start, stop\)"):
            fn(ens, X, iteration_range=iteration_range)


# ----------------------------------------------------------------------------- Example 1
# Paper 003, supplementary Example 1 (Table 2): A=(0, 0, y=0), B=(0, 1, y=1), C=(1, 0, y=-1),
# squared error, lambda=1, depth 1, F_0 = 0, eta = 1. The paper's figure labels each node with
# "G" = sum of y, which at F = 0 is the NEGATIVE gradient sum: with METHODS' g = F - y,
# G_ours = -G_paper. Structure I splits on X1: {A, B} (G = -1, H = 2) and {C} (G = 1, H = 1);
# structure II on X2: {A, C} (G = 1, H = 2) and {B} (G = -1, H = 1). Leaves -G/(H + lambda):
# I: 1/3 and -1/2; II: -1/3 and 1/2. Root, regularized: (3 * 1/3 + 2 * (-1/2)) / 4 = 0 and
# (3 * (-1/3) + 2 * 1/2) / 4 = 0 (= -G_root / (H_root + lambda) with G_root = 0);
# mean: (2 * 1/3 - 1/2) / 3 = 1/18 and (-2/3 + 1/2) / 3 = -1/18 (Table 3).
EX_X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
EX_Y = np.array([0.0, 1.0, -1.0])
TABLE3 = {  # structure: (regularized root, left, right), (mean root, left, right)
    "I": ((0.0, 1 / 3, -1 / 2), (1 / 18, 1 / 3, -1 / 2)),
    "II": ((0.0, -1 / 3, 1 / 2), (-1 / 18, -1 / 3, 1 / 2)),
}


def _example_tree(structure: str) -> TreeEnsemble:
    split = 0 if structure == "I" else 1
    left_value, right_value = TABLE3[structure][0][1:]
    return TreeEnsemble(
        tree_offsets=[0, 3],
        left=[1, -1, -1],
        right=[2, -1, -1],
        feature=[split, -1, -1],
        threshold=[0.5, np.nan, np.nan],  # left iff x < 0.5, i.e. x <= 0
        split_type=[0, 0, 0],
        default_left=[1, 0, 0],
        missing_type=[0, 0, 0],
        value=[0.0, left_value, right_value],
        cover=[3.0, 2.0, 1.0],  # squared error: H = one per row
        count=[3.0, 2.0, 1.0],
        gain=[5 / 6, 0.0, 0.0],
        leaf_id=[-1, 1, 2],
        cat_offsets=[0, 0, 0, 0],
        cat_words=np.zeros(0, dtype=np.uint32),
        tree_group=[0],
        tree_iteration=[0],
        learning_rate=[1.0],
        tree_weight=[1.0],
        base_margin=[0.0],
        feature_names=("X1", "X2"),
        reg_lambda=1.0,
        objective="reg:squarederror",
        source="xgboost",
    )


@pytest.mark.parametrize("structure", ["I", "II"])
def test_example_1_hand_built(structure):
    ens = _example_tree(structure)
    reg, mean = TABLE3[structure]
    np.testing.assert_allclose(treeinner.node_values(ens, attribution="predecomp"), reg, atol=1e-15)
    np.testing.assert_allclose(treeinner.node_values(ens, attribution="saabas"), mean, atol=1e-15)
    # the leaves are -eta G/(H + lambda) of the staged gradients g = F - y at F = 0, and the
    # regularized root is -eta G_root/(H_root + lambda) = 0 whatever the structure
    G, H, C, _, _ = _staged(ens, EX_X, EX_Y, None)
    Gs, Hs = np.empty(3), np.empty(3)
    subtree_sums(ens.left, ens.right, ens.tree_offsets, G, Gs)
    subtree_sums(ens.left, ens.right, ens.tree_offsets, H, Hs)
    paper_G = {"I": (0.0, 1.0, -1.0), "II": (0.0, -1.0, 1.0)}[structure]  # sum of y
    np.testing.assert_allclose(Gs, -np.asarray(paper_G), atol=1e-15)
    np.testing.assert_allclose(Hs, [3.0, 2.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(-Gs / (Hs + 1.0), reg, atol=1e-15)
    # attributions: PreDecomp's bias is 0 for both structures, Saabas' is +-1/18
    pre = treeinner.predecomp(ens, EX_X)
    sab = treeinner.saabas(ens, EX_X)
    np.testing.assert_allclose(pre.bias, [0.0], atol=1e-15)
    np.testing.assert_allclose(sab.bias, [mean[0]], atol=1e-15)
    k = 0 if structure == "I" else 1
    leaf_of_row = np.array([1, 1, 2]) if structure == "I" else np.array([1, 2, 1])
    for a, node_vals in ((pre, reg), (sab, mean)):
        vals = np.asarray(node_vals)
        # the one split on feature k contributes p(leaf) - p(root); the other feature nothing
        np.testing.assert_allclose(a.values[:, k], vals[leaf_of_row] - vals[0], atol=1e-15)
        np.testing.assert_allclose(a.values[:, 1 - k], 0.0, atol=0)
        np.testing.assert_allclose(a.values.sum(1) + a.bias, vals[leaf_of_row], atol=1e-15)


def test_example_1_with_xgboost():
    """XGBoost breaks the tie between X1 and X2 by column order: training on (X1, X2) and on
    (X2, X1) gives both structures, and treeinner reads Table 3 off the real models."""
    seen = set()
    for order in ([0, 1], [1, 0]):
        names = [["X1", "X2"][c] for c in order]
        params = {
            "objective": "reg:squarederror",
            "base_score": 0.0,
            "eta": 1.0,
            "lambda": 1.0,
            "max_depth": 1,
            "tree_method": "exact",
            "nthread": 1,
        }
        d = xgb.DMatrix(EX_X[:, order], EX_Y, feature_names=names)
        booster = xgb.train(params, d, 1)
        ens = quiet_ensemble(booster)
        assert ens.n_nodes == 3 and ens.reg_lambda == 1.0 and ens.learning_rate[0] == 1.0
        np.testing.assert_array_equal(ens.base_margin, [0.0])
        np.testing.assert_allclose(ens.cover, [3.0, 2.0, 1.0])
        structure = {"X1": "I", "X2": "II"}[ens.feature_names[ens.feature[0]]]
        seen.add(structure)
        reg, mean = TABLE3[structure]
        # float32 leaves: 1/3 is 0.333333343
        np.testing.assert_allclose(
            treeinner.node_values(booster, attribution="predecomp"), reg, atol=2e-8
        )
        np.testing.assert_allclose(
            treeinner.node_values(booster, attribution="saabas"), mean, atol=2e-8
        )
        frame = pd.DataFrame(EX_X[:, order], columns=names, index=["A", "B", "C"])
        sab = treeinner.saabas(booster, frame)
        np.testing.assert_allclose(sab.bias, [mean[0]], atol=2e-8)
        np.testing.assert_allclose(treeinner.predecomp(booster, frame).bias, [0.0], atol=2e-8)
        ref = booster.predict(xgb.DMatrix(frame), pred_contribs=True, approx_contribs=True)
        np.testing.assert_allclose(ref[:, -1], mean[0], atol=1e-7)  # XGBoost agrees: +-1/18
        np.testing.assert_allclose(sab.to_frame().to_numpy(), ref[:, :-1], atol=1e-7)
    assert seen == {"I", "II"}


# ----------------------------------------------------------------------------- API
def test_to_frame_single_output_dataframe():
    booster, ens, X, _ = _model("categorical-partition")
    a = treeinner.predecomp(ens, X)
    df = a.to_frame()
    assert list(df.columns) == ["a", "b", "c", "d", "colour"] == list(a.feature_names)
    pd.testing.assert_index_equal(df.index, X.index)
    np.testing.assert_array_equal(df.to_numpy(), a.values)
    # a column permutation of the DataFrame is matched by name
    b = treeinner.predecomp(ens, X[["colour", "d", "c", "b", "a"]])
    pd.testing.assert_frame_equal(b.to_frame(), df)


def test_to_frame_numpy_input():
    _, ens, X, _ = _model("reg:squarederror")
    a = treeinner.saabas(ens, X)
    assert a.index is None
    df = a.to_frame()
    assert list(df.columns) == [f"f{i}" for i in range(X.shape[1])]
    pd.testing.assert_index_equal(df.index, pd.RangeIndex(X.shape[0]))
    np.testing.assert_array_equal(df.to_numpy(), a.values)


def test_to_frame_multiclass():
    _, ens, X, _ = _model("categorical-logistic-K3")
    a = treeinner.predecomp(ens, X)
    assert a.values.shape == (X.shape[0], X.shape[1], 3)
    for c in range(3):
        df = a.to_frame(output=c)
        assert list(df.columns) == list(X.columns)
        pd.testing.assert_index_equal(df.index, X.index)
        np.testing.assert_array_equal(df.to_numpy(), a.values[:, :, c])
    with pytest.raises(ValueError, match="output"):
        a.to_frame()


def test_attribution_of_rows_not_seen_in_training():
    """Attributions work on any rows (here new rows with unseen values and all-missing rows)."""
    _, ens, X, _ = _model("softmax-K4")
    rng = np.random.default_rng(5)
    Xn = rng.normal(size=(50, X.shape[1])) * 10
    Xn[:5] = np.nan
    for fn in (treeinner.predecomp, treeinner.saabas):
        _check_local_accuracy(fn(ens, Xn), ens, Xn)
    # an all-missing row follows the default directions: its attribution is the same in every
    # row of the first five
    a = treeinner.predecomp(ens, Xn)
    np.testing.assert_array_equal(a.values[:5], np.broadcast_to(a.values[:1], a.values[:5].shape))


def test_sparse_and_float32_input():
    """Absent sparse entries are missing values (as in XGBoost); float32 input routes as the
    float64 values it came from."""
    import scipy.sparse as sp

    booster, ens, X, _ = _model("softprob-K3")
    dense = np.nan_to_num(X)  # explicit zeros ...
    S = sp.csr_matrix(dense)  # ... are dropped here, so they become missing
    as_missing = np.where(dense == 0, np.nan, dense)
    for fn in (treeinner.predecomp, treeinner.saabas):
        np.testing.assert_array_equal(fn(ens, S).values, fn(ens, as_missing).values)
        np.testing.assert_array_equal(fn(ens, X.astype(np.float32)).values, fn(ens, X).values)
    ref = booster.predict(xgb.DMatrix(S), pred_contribs=True, approx_contribs=True)
    ours = np.moveaxis(treeinner.saabas(ens, S).values, 2, 1)
    np.testing.assert_allclose(ours, ref[:, :, :-1], rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    # and the zeros being missing matters for this model
    assert not np.allclose(treeinner.saabas(ens, dense).values, treeinner.saabas(ens, S).values)


def test_empty_input():
    _, ens, X, _ = _model("categorical-partition")
    a = treeinner.predecomp(ens, X.iloc[:0])
    assert a.values.shape == (0, X.shape[1])
    assert list(a.to_frame().columns) == list(X.columns)


# ----------------------------------------------------------------------------- to_shap
def test_to_shap_single_output():
    import shap

    _, ens, X, _ = _model("reg:squarederror")
    a = treeinner.tree_shap(ens, X)
    e = a.to_shap(X)
    assert isinstance(e, shap.Explanation)
    np.testing.assert_array_equal(e.values, a.values)
    np.testing.assert_array_equal(e.base_values, np.full(X.shape[0], a.bias[0]))
    np.testing.assert_array_equal(e.data, X)  # NaN where missing
    assert list(e.feature_names) == list(a.feature_names)
    # additive to the margin, as shap's own explanations are
    np.testing.assert_allclose(
        e.values.sum(axis=1) + e.base_values, ens.predict_margin(X), rtol=1e-6, atol=1e-6
    )
    # shap's own TreeExplainer gives the same explanation
    ref = shap.TreeExplainer(_model("reg:squarederror")[0])(X)
    np.testing.assert_allclose(e.values, ref.values, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(e.base_values, ref.base_values, rtol=1e-5, atol=1e-5)
    # without X: no data; slicing by row and feature works as in shap
    e0 = a.to_shap()
    assert e0.data is None
    assert e0[3, 1].values == a.values[3, 1]
    assert e0[:, "f1"].values.tolist() == a.values[:, 1].tolist()


def test_to_shap_multiclass_and_categorical_frame():
    _, ens, X, _ = _model("categorical-logistic-K3")
    a = treeinner.predecomp(ens, X)
    e = a.to_shap(X)
    n, p = X.shape
    assert e.values.shape == (n, p, 3) and e.base_values.shape == (n, 3)
    assert list(e.output_names) == ["class_0", "class_1", "class_2"]
    np.testing.assert_allclose(
        e.values.sum(axis=1) + e.base_values, ens.predict_margin(X), rtol=1e-6, atol=1e-6
    )
    # categorical column: its codes as data, the DataFrame kept for display
    codes = X["colour"].cat.codes.to_numpy().astype(float)
    codes[codes < 0] = np.nan
    np.testing.assert_array_equal(e.data[:, 4], codes)
    np.testing.assert_array_equal(e.data[:, :4], X[["a", "b", "c", "d"]].to_numpy())
    # ... and its labels (NaN where missing) per row in display_data, the floats elsewhere
    labels = X["colour"].astype(object).to_numpy()
    assert e.display_data.dtype == object and e.display_data.shape == (n, p)
    assert all(
        (pd.isna(u) and pd.isna(v)) or u == v
        for u, v in zip(e.display_data[:, 4], labels, strict=True)
    )
    np.testing.assert_array_equal(e.display_data[:, :4].astype(np.float64), e.data[:, :4])
    i = int(np.flatnonzero(pd.notna(labels))[0])
    assert e[i].display_data[4] == labels[i] and e[i].data[4] == e.data[i, 4]
    for k in range(3):
        ek = a.to_shap(X[X.columns[::-1]], output=k)  # columns matched by name
        np.testing.assert_array_equal(ek.values, a.values[:, :, k])
        np.testing.assert_array_equal(ek.base_values, np.full(n, a.bias[k]))
        np.testing.assert_array_equal(ek.data, e.data)
        np.testing.assert_array_equal(e[:, :, k].values, ek.values)


def test_to_shap_errors(monkeypatch):
    import sys

    _, ens, X, _ = _model("softprob-K3")
    a = treeinner.predecomp(ens, X)
    for bad in (3, -1, 1.0, "class_0", True):
        with pytest.raises(ValueError, match="output"):
            a.to_shap(output=bad)
    with pytest.raises(ValueError, match="shape"):
        a.to_shap(X[:-1])
    with pytest.raises(ValueError, match="shape"):
        a.to_shap(X[:, :3])
    with pytest.raises(ValueError, match="f3"):
        a.to_shap(pd.DataFrame(X[:, :3], columns=["f0", "f1", "f2"]))
    with pytest.raises(ValueError, match="'f1'.*neither numeric, string nor categorical"):
        a.to_shap(pd.DataFrame(X, columns=["f0", "f1", "f2", "f3"]).assign(f1=[(1,)] * len(X)))
    single = treeinner.predecomp(_model("reg:squarederror")[1], X)
    assert single.to_shap(output=0).values.shape == X.shape
    with pytest.raises(ValueError, match="output"):
        single.to_shap(output=1)
    monkeypatch.setitem(sys.modules, "shap", None)
    with pytest.raises(ImportError, match=r"treeinner\[shap\]"):
        a.to_shap(X)
