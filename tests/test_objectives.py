"""Objectives: XGBoost's gradient/hessian conventions, label validation, loss vs gradient.

The central check: on the training data, the staged gradients and hessians that treeinner
sums over every node reproduce what XGBoost itself summed when it grew the trees, i.e.
- the hessian sum of the rows reaching a node equals the node's stored cover (``sum_hessian``),
- the gradient sum G gives XGBoost's inner ``base_weights`` -G/(H + lambda) and its leaf values
  -eta G/(H + lambda),
for every objective treeinner has gradients for. XGBoost computes gradients in float32 and sums
them in double; the errors are compared with the float32 rounding scale of each node (the sum of
|w g| over its rows, computed by an independent NumPy reference of the staged pass).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from scipy.optimize import minimize_scalar

import treeinner
from tests._helpers import quiet_ensemble
from treeinner._format import P_MAX_DELTA
from treeinner.adapters import xgboost as xgb_adapter
from treeinner.adapters._common import gradient_fields
from treeinner.ensemble import TreeEnsemble
from treeinner.kernels.attribution import subtree_sums
from treeinner.kernels.gradients import grad_hess_row
from treeinner.objectives import get_objective

try:  # the staged pass moved to its own module; importance re-exports it
    from treeinner._staged import _staged
except ImportError:  # pragma: no cover
    from treeinner.importance import _staged

FLT_EPS = float(np.finfo(np.float32).eps)


# ----------------------------------------------------------------------------- helpers
def _labels(objective: str, rng, X: np.ndarray, n_class: int = 1) -> np.ndarray:
    s = np.nan_to_num(X[:, 0]) + 0.5 * X[:, 1]
    n = X.shape[0]
    if objective.startswith("multi"):
        cuts = np.quantile(s, np.linspace(0, 1, n_class + 1)[1:-1])
        return np.digitize(s + 0.5 * rng.normal(size=n), cuts).astype(float)
    if objective.startswith("binary"):
        return (s + rng.normal(size=n) > 0).astype(float)
    if objective == "reg:logistic":  # probabilities, with exact 0s and 1s too
        p = 1 / (1 + np.exp(-s - rng.normal(size=n)))
        p[:10] = 0.0
        p[10:20] = 1.0
        return p
    if objective in ("count:poisson", "reg:tweedie"):
        return rng.poisson(np.exp(0.5 * s)).astype(float)
    if objective == "reg:gamma":
        return np.exp(0.3 * s + 0.2 * rng.normal(size=n))
    if objective == "reg:squaredlogerror":
        return np.exp(0.3 * s + 0.2 * rng.normal(size=n)) - 0.5  # some labels in (-1, 0)
    return 3 * s + rng.normal(size=n)


def _data(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.normal(size=n),
            rng.integers(0, 5, size=n).astype(float),  # ties
            rng.normal(size=n),
            rng.normal(size=n),
        ]
    )
    X[rng.random(n) < 0.1, 3] = np.nan  # missing values take the default direction
    return rng, X


def _leaf_nodes(ens: TreeEnsemble, X) -> np.ndarray:
    """Global node index of the leaf every row reaches in every tree."""
    L = ens.leaf_index(X).astype(np.int64)
    out = np.empty_like(L)
    off = ens.tree_offsets
    for t in range(ens.n_trees):
        nodes = np.arange(off[t], off[t + 1])
        leaves = nodes[ens.left[nodes] < 0]
        m = np.full(int(ens.leaf_id[leaves].max()) + 1, -1)
        m[ens.leaf_id[leaves]] = leaves
        out[:, t] = m[L[:, t]]
    return out


def _xgb_grad_hess(objective: str, prm: dict, y: np.ndarray, F: np.ndarray):
    """XGBoost's per-row gradient and hessian (src/objective/*.cu), written out in NumPy."""
    if objective.startswith("multi"):
        e = np.exp(F - F.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        g = p - np.eye(F.shape[1])[y.astype(int)]
        return g, np.maximum(2.0 * p * (1.0 - p), 1e-16)
    f = F[:, 0]
    if objective == "reg:squarederror":
        g, h = f - y, np.ones_like(f)
    elif objective == "reg:squaredlogerror":
        p = np.maximum(f, -1 + 1e-6)
        r = np.log1p(p) - np.log1p(y)
        g, h = r / (p + 1), np.maximum((1 - r) / (p + 1) ** 2, 1e-6)
    elif objective in ("reg:logistic", "binary:logistic", "binary:logitraw"):
        p = 1 / (1 + np.exp(-f))
        s = np.where(y == 1, prm.get("scale_pos_weight", 1.0), 1.0)
        g, h = (p - y) * s, np.maximum(p * (1 - p), 1e-16) * s
    elif objective == "reg:pseudohubererror":
        d = prm.get("huber_slope", 1.0)
        z = f - y
        sc = 1 + (z / d) ** 2
        g, h = z / np.sqrt(sc), 1 / (sc * np.sqrt(sc))
    elif objective == "binary:hinge":
        yy = 2 * y - 1
        act = f * yy < 1
        g, h = np.where(act, -yy, 0.0), np.where(act, 1.0, 1e-16)
    elif objective == "count:poisson":
        mds = prm.get("max_delta_step", 0.7)
        g, h = np.exp(f) - y, np.exp(f + mds)
    elif objective == "reg:gamma":
        e = y * np.exp(-f)
        g, h = 1 - e, e
    elif objective == "reg:tweedie":
        r = prm.get("tweedie_variance_power", 1.5)
        a, b = np.exp((1 - r) * f), np.exp((2 - r) * f)
        g, h = -y * a + b, -y * (1 - r) * a + (2 - r) * b
    else:
        raise AssertionError(objective)
    return g[:, None], h[:, None]


def _reference_sums(ens, objective, prm, X, y, w):
    """Per-leaf sums of w g, w h and w |g| from a plain NumPy staged pass (margins carried in
    float32 in tree order, like XGBoost's prediction cache)."""
    n = X.shape[0]
    ln = _leaf_nodes(ens, X)
    F = np.tile(ens.base_margin, (n, 1))
    G, H, A = (np.zeros(ens.n_nodes) for _ in range(3))
    for it in range(ens.n_iterations):
        g, h = _xgb_grad_hess(objective, prm, y, F)
        trees = np.flatnonzero(ens.tree_iteration == it)
        for t in trees:
            c = ens.tree_group[t]
            np.add.at(G, ln[:, t], w * g[:, c])
            np.add.at(H, ln[:, t], w * h[:, c])
            np.add.at(A, ln[:, t], w * np.abs(g[:, c]))
        for t in trees:
            c = ens.tree_group[t]
            F[:, c] = (F[:, c].astype(np.float32) + ens.value[ln[:, t]].astype(np.float32)).astype(
                np.float64
            )
    return G, H, A


def _up(ens, leaf_sums):
    out = np.empty(ens.n_nodes)
    subtree_sums(ens.left, ens.right, ens.tree_offsets, leaf_sums, out)
    return out


def _base_weights(booster) -> np.ndarray:
    doc = json.loads(bytes(booster.save_raw("json")))
    gb = doc["learner"]["gradient_booster"]
    trees = gb["model"]["trees"]
    return np.concatenate([np.asarray(t["base_weights"], dtype=np.float64) for t in trees])


def _train(objective, extra, tree_method, weighted, n_class=1, seed=0, eta=0.3, rounds=5):
    rng, X = _data(seed)
    y = _labels(objective, rng, X, n_class)
    w = rng.uniform(0.3, 3.0, size=X.shape[0]) if weighted else None
    params = {
        "objective": objective,
        "tree_method": tree_method,
        "max_depth": 3,
        "eta": eta,
        "lambda": 1.5,
        "subsample": 1.0,
        "seed": seed,
        "nthread": 1,
        **extra,
    }
    if tree_method == "hist":
        params["max_bin"] = 16  # so that hist and exact grow different trees
    if n_class > 1:
        params["num_class"] = n_class
    booster = xgb.train(params, xgb.DMatrix(X, y, weight=w), rounds)
    return booster, X, y, (np.ones(X.shape[0]) if w is None else w)


# (objective, extra params, weighted, n_class)
CASES = [
    ("reg:squarederror", {}, False, 1),
    ("reg:squarederror", {}, True, 1),
    ("reg:squaredlogerror", {}, False, 1),
    ("reg:squaredlogerror", {}, True, 1),
    ("reg:logistic", {}, False, 1),
    ("reg:logistic", {}, True, 1),
    ("reg:pseudohubererror", {}, False, 1),
    ("reg:pseudohubererror", {"huber_slope": 2.5}, True, 1),
    ("reg:pseudohubererror", {"huber_slope": 0.4}, False, 1),
    ("binary:logistic", {}, False, 1),
    ("binary:logistic", {}, True, 1),
    ("binary:logistic", {"scale_pos_weight": 3.0}, False, 1),
    ("binary:logistic", {"scale_pos_weight": 0.25}, True, 1),
    ("binary:logitraw", {}, False, 1),
    ("binary:logitraw", {}, True, 1),
    ("binary:hinge", {}, False, 1),
    ("binary:hinge", {}, True, 1),
    ("count:poisson", {}, False, 1),  # max_delta_step 0.7 by default
    ("count:poisson", {}, True, 1),
    ("count:poisson", {"max_delta_step": 2.0}, False, 1),
    ("count:poisson", {"max_delta_step": 0.3}, True, 1),
    ("reg:gamma", {}, False, 1),
    ("reg:gamma", {}, True, 1),
    ("reg:tweedie", {"tweedie_variance_power": 1.2}, False, 1),
    ("reg:tweedie", {"tweedie_variance_power": 1.7}, True, 1),
    ("reg:tweedie", {}, False, 1),
    ("multi:softprob", {}, False, 3),
    ("multi:softprob", {}, True, 4),
    ("multi:softmax", {}, False, 5),
    ("multi:softmax", {}, True, 3),
]


def _case_id(c):
    obj, extra, weighted, k = c
    parts = [obj] + [f"{a}={b}" for a, b in extra.items()]
    parts += ["w"] if weighted else []
    parts += [f"K={k}"] if k > 1 else []
    return "-".join(parts)


def _check_against_xgboost(booster, X, y, w, objective):
    """Cover, inner base_weights and leaf values from our staged sums; returns #clipped nodes."""
    ens = quiet_ensemble(booster)
    G, H, C, _, _ = _staged(ens, X, y, w)
    # the reference reads the parameters as the model stores them (decimal strings such as
    # "1.20000005" for a float32 1.2: ~2e-9 off, far below float32 gradient rounding)
    prm = {k: float(v) for k, v in ens.objective_params.items() if not isinstance(v, str)}
    Gr, Hr, Ar = _reference_sums(ens, objective, prm, X, y, w)
    G, H, C, Gr, Hr, A = (_up(ens, v) for v in (G, H, C, Gr, Hr, Ar))

    # 0. treeinner's staged pass agrees with an independent NumPy one (same float32 margins)
    np.testing.assert_array_less(np.abs(G - Gr), 1e-9 * A + 1e-300)
    np.testing.assert_allclose(H, Hr, rtol=1e-9)
    roots = ens.tree_offsets[:-1]
    np.testing.assert_allclose(C[roots], w.sum(), rtol=1e-12)

    # 1. hessian convention: the rows' hessian sums are the stored covers
    np.testing.assert_allclose(H, ens.cover, rtol=1e-5, err_msg="hessian sum != cover")

    # 2. gradient convention: -G/(H + lambda), clipped to +-max_delta_step where XGBoost clips
    lam = ens.reg_lambda
    tree = np.searchsorted(ens.tree_offsets, np.arange(ens.n_nodes), side="right") - 1
    eta = ens.learning_rate[tree]
    mds = float(ens.params.get("max_delta_step", 0.0))
    raw = -G / (H + lam)
    inner = ens.left >= 0
    bw = _base_weights(booster)
    # what XGBoost's node weight is, as a gradient sum: inner nodes store the unscaled weight,
    # leaves the weight times eta (leaf base_weights are scaled with hist, not with exact)
    w_x = np.where(inner, bw, ens.value / eta)
    clipped = np.zeros(ens.n_nodes, dtype=bool)
    if mds > 0:
        clipped = np.abs(raw) > mds * (1 + 1e-5)
        unclipped = np.abs(raw) < mds * (1 - 1e-5)
        assert np.all(clipped | unclipped), "a node weight sits on the clipping bound"
        # a clipped node stores exactly +-max_delta_step (times eta at a leaf)
        np.testing.assert_array_equal(
            np.float32(w_x[clipped & inner]), np.float32(np.sign(raw) * mds)[clipped & inner]
        )
        np.testing.assert_allclose(
            ens.value[clipped & ~inner],
            (eta * np.sign(raw) * mds)[clipped & ~inner],
            rtol=2 * FLT_EPS,
        )
        assert np.all(np.abs(w_x) <= mds * (1 + 1e-6)), "XGBoost clipped at another bound"
    ok = ~clipped
    G_x = -w_x * (ens.cover + lam)  # the gradient sum XGBoost's stored weight implies
    err = np.abs(G - G_x)[ok]
    bound = 1e-5 * A[ok] + 1e-5 * np.abs(G[ok])
    assert np.all(err <= bound), (
        f"gradient sums disagree with XGBoost's weights at {np.sum(err > bound)} nodes; "
        f"worst |dG|/sum|g| = {np.max(err / A[ok]):.2e}"
    )
    # and the plain relative check on nodes whose gradient sum does not cancel
    big = ok & (np.abs(G) > 0.2 * A)
    np.testing.assert_allclose(raw[big & inner], bw[big & inner], rtol=1e-4)
    np.testing.assert_allclose((eta * raw)[big & ~inner], ens.value[big & ~inner], rtol=1e-4)
    return int(clipped.sum())


@pytest.mark.parametrize("tree_method", ["hist", "exact"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_hessian_and_gradient_convention(case, tree_method):
    objective, extra, weighted, n_class = case
    booster, X, y, w = _train(objective, extra, tree_method, weighted, n_class)
    _check_against_xgboost(booster, X, y, w, objective)


def _clipping_data(seed=1, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    # zeros and large counts: -G/(H + lambda) far beyond max_delta_step in some nodes
    y = np.where(X[:, 0] > 1.2, rng.poisson(40, size=n), 0).astype(float)
    return X, y


@pytest.mark.parametrize("mds", [None, 1.5])
@pytest.mark.parametrize("tree_method", ["hist", "exact"])
def test_poisson_max_delta_step_clips_weights(mds, tree_method):
    """count:poisson trains with max_delta_step=0.7 (unless set): XGBoost clips every node
    weight -G/(H + lambda) to +-max_delta_step before scaling leaves by eta. The hessian it sums
    is exp(F + max_delta_step) all the same. Node values from the regularized recursion are then
    not -eta G/(H + lambda), and the adapter says so."""
    X, y = _clipping_data()
    extra = {} if mds is None else {"max_delta_step": mds}
    params = {"objective": "count:poisson", "tree_method": tree_method, "max_depth": 2}
    params.update(eta=0.5, seed=0, nthread=1, **extra)
    booster = xgb.train(params, xgb.DMatrix(X, y), 3)
    n_clipped = _check_against_xgboost(booster, X, y, np.ones(len(y)), "count:poisson")
    assert n_clipped > 0, "the data were meant to make XGBoost clip some node weights"
    with pytest.warns(UserWarning, match="max_delta_step"):
        ens = treeinner.from_model(booster)
    assert any("max_delta_step" in r for r in ens.inexact)
    expected = 0.7 if mds is None else mds
    assert float(ens.params["max_delta_step"]) == pytest.approx(expected, rel=1e-6)
    assert get_objective(ens).prm[P_MAX_DELTA] == pytest.approx(expected, rel=1e-6)


def test_poisson_without_max_delta_step_is_exact():
    X, y = _clipping_data()
    params = {"objective": "count:poisson", "max_depth": 2, "eta": 0.5, "max_delta_step": 0.0}
    booster = xgb.train({**params, "seed": 0, "nthread": 1}, xgb.DMatrix(X, y), 3)
    n_clipped = _check_against_xgboost(booster, X, y, np.ones(len(y)), "count:poisson")
    assert n_clipped == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no inexactness warning without clipping
        ens = treeinner.from_model(booster)
    assert ens.inexact == ()
    # the unclipped leaves here are far beyond 0.7: clipping would have been visible
    assert np.max(np.abs(ens.value)) > 0.5 * 0.7


def _hinge_kink_case():
    rng = np.random.default_rng(1)
    n = 300
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(float)
    params = {"objective": "binary:hinge", "tree_method": "hist", "max_depth": 3, "eta": 1.0}
    booster = xgb.train({**params, "seed": 0, "nthread": 1}, xgb.DMatrix(X, y), 5)
    return booster, X, y


def test_hinge_staged_margin_reaches_the_kink_in_float32():
    """The hinge gradient jumps at y F = 1. XGBoost's staged margin is a float32 sum; with
    eta=1 one row's float32 margin before tree 3 is exactly -1.0 (no gradient, hessian
    FLT_MIN) while the float64 sum of the same leaf values is -0.99999999 (gradient 1,
    hessian 1). This pins down the data the next test relies on."""
    booster, X, y = _hinge_kink_case()
    ens = quiet_ensemble(booster)
    f32 = ens.predict_margin(X, iteration_range=(0, 3))  # bit-exact float32 XGBoost margin
    ln = _leaf_nodes(ens, X)
    f64 = ens.base_margin[0] + ens.value[ln[:, :3]].sum(axis=1)
    yy = 2 * y - 1
    flip = np.flatnonzero((f32 * yy < 1) != (f64 * yy < 1))
    assert flip.size == 1
    assert f32[flip[0]] * yy[flip[0]] == 1.0 and f64[flip[0]] * yy[flip[0]] < 1.0


def test_hinge_cover_at_the_kink():
    booster, X, y = _hinge_kink_case()
    _check_against_xgboost(booster, X, y, np.ones(len(y)), "binary:hinge")


# ----------------------------------------------------------------------------- labels
_TRAIN_Y = {
    "reg:squarederror": [0.5, 1.5, -2.0, 3.0],
    "reg:squaredlogerror": [0.5, 1.5, 0.0, 3.0],
    "reg:logistic": [0.2, 0.9, 0.5, 0.1],
    "reg:pseudohubererror": [0.5, 1.5, -2.0, 3.0],
    "binary:logistic": [0, 1, 1, 0],
    "binary:logitraw": [0, 1, 1, 0],
    "binary:hinge": [0, 1, 1, 0],
    "count:poisson": [0, 1, 3, 2],
    "reg:gamma": [0.5, 1.5, 2.0, 3.0],
    "reg:tweedie": [0, 1.5, 2.0, 3.0],
    "multi:softprob": [0, 1, 2, 1],
    "multi:softmax": [0, 1, 2, 1],
}
_MODELS: dict = {}


def _tiny(objective):
    if objective not in _MODELS:
        rng = np.random.default_rng(0)
        n = 40
        X = rng.normal(size=(n, 2))
        y = np.tile(np.asarray(_TRAIN_Y[objective], dtype=float), n // 4)
        params = {"objective": objective, "max_depth": 2, "nthread": 1, "seed": 0}
        if objective.startswith("multi"):
            params["num_class"] = 3
        booster = xgb.train(params, xgb.DMatrix(X, y), 2)
        _MODELS[objective] = (quiet_ensemble(booster), X, y)
    return _MODELS[objective]


BAD_LABELS = [
    # (objective, bad labels for 4 rows, message regex)
    *[(o, [0.0, np.nan, 1.0, 0.0], "NaN") for o in _TRAIN_Y],
    ("reg:squarederror", [0.0, np.inf, 1.0, 0.0], "NaN or infinite"),
    ("reg:logistic", [0.2, 1.2, 0.5, 0.1], r"logistic.*\[0, 1\]"),
    ("reg:logistic", [0.2, -0.1, 0.5, 0.1], r"logistic.*\[0, 1\]"),
    ("binary:logistic", [0, 1, 2, 0], r"\[0, 1\]"),
    ("binary:logistic", [0, 1, -1, 0], r"\[0, 1\]"),
    ("binary:logitraw", [0, 1, 2, 0], r"\[0, 1\]"),
    ("binary:hinge", [0, 1, 0.5, 0], "0 or 1"),
    ("binary:hinge", [-1, 1, 1, -1], "0 or 1"),  # the SVM convention is not XGBoost's
    ("multi:softprob", [0, 1, 1.5, 2], r"integer classes in \[0, 3\)"),
    ("multi:softprob", [0, 1, 3, 2], r"integer classes in \[0, 3\)"),
    ("multi:softmax", [0, -1, 1, 2], r"integer classes in \[0, 3\)"),
    ("count:poisson", [0, 1, -1, 2], ">= 0"),
    ("reg:tweedie", [0, 1, -0.5, 2], ">= 0"),
    ("reg:gamma", [1, 2, 0.0, 3], "> 0"),
    ("reg:gamma", [1, 2, -1.0, 3], "> 0"),
    ("reg:squaredlogerror", [1, 2, -1.0, 3], "> -1"),
    ("reg:squaredlogerror", [1, 2, -3.0, 3], "> -1"),
]


@pytest.mark.parametrize(
    "objective, bad, match", BAD_LABELS, ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(BAD_LABELS)]
)
def test_invalid_labels_raise(objective, bad, match):
    ens, X, y = _tiny(objective)
    y_bad = y.copy()
    y_bad[:4] = bad
    with pytest.raises(ValueError, match=match):
        treeinner.tree_inner(ens, X, y_bad)


@pytest.mark.parametrize("objective", list(_TRAIN_Y))
def test_valid_labels_pass_and_bad_shapes_raise(objective):
    ens, X, y = _tiny(objective)
    res = treeinner.tree_inner(ens, X, y)
    assert np.all(np.isfinite(np.asarray(res, dtype=float)))
    # a column vector is accepted as 1-D
    for y_alt in (y[:, None], pd.Series(y), list(y)):  # column vector, Series, list
        res_alt = treeinner.tree_inner(ens, X, y_alt)
        np.testing.assert_allclose(np.asarray(res_alt), np.asarray(res), rtol=1e-12)
    with pytest.raises(ValueError, match="1-D"):
        treeinner.tree_inner(ens, X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="numeric"):
        treeinner.tree_inner(ens, X, y.astype(int).astype(str))
    with pytest.raises(ValueError, match="numeric"):
        treeinner.tree_inner(ens, X, np.array(["a"] * len(y), dtype=object))
    with pytest.raises(ValueError, match="rows"):
        treeinner.tree_inner(ens, X, y[:-1])


def test_label_errors_name_the_objective():
    ens, X, y = _tiny("count:poisson")
    y = y.copy()
    y[0] = -3
    with pytest.raises(ValueError, match="poisson"):
        treeinner.tree_inner(ens, X, y)


# ----------------------------------------------------------------------------- unsupported
def _unsupported(objective):
    rng = np.random.default_rng(3)
    n = 60
    X = rng.normal(size=(n, 3))
    X[rng.random(n) < 0.1, 1] = np.nan
    params = {"objective": objective, "max_depth": 3, "nthread": 1, "seed": 0}
    if objective.startswith("rank"):
        y = (X[:, 0] > 0).astype(float) + (X[:, 2] > 1)
        d = xgb.DMatrix(X, y, qid=np.repeat(np.arange(6), 10))
    else:
        y = 2 * X[:, 0] + rng.normal(size=n)
        d = xgb.DMatrix(X, y)
    if objective == "reg:quantileerror":
        params["quantile_alpha"] = 0.7
    return xgb.train(params, d, 3), X, y


@pytest.mark.parametrize(
    "objective",
    [
        "rank:ndcg",
        "reg:absoluteerror",
        "reg:quantileerror",
    ],
)
def test_unsupported_objectives(objective):
    """Objectives with no per-row gradient here: TreeInner refuses them with
    NotImplementedError, while prediction and attributions (which need no gradient) work."""
    booster, X, y = _unsupported(objective)
    ens = quiet_ensemble(booster)
    with pytest.raises(NotImplementedError, match=objective):
        treeinner.tree_inner(booster, X, y)
    with pytest.raises(NotImplementedError, match=objective):
        treeinner.tree_inner(ens, X, y)
    ours = ens.predict_margin(X)
    theirs = booster.predict(xgb.DMatrix(X), output_margin=True).reshape(ours.shape)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    # attributions need no gradient, so they work too (and add up)
    a = treeinner.predecomp(ens, X)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, ours, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("objective", ["reg:absoluteerror", "reg:quantileerror"])
def test_refit_objectives_keep_the_configured_learning_rate(objective):
    """Even where conversion succeeds, the learning rate must be the trained eta (0.3)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = 2 * X[:, 0] + rng.normal(size=60)
    params = {"objective": objective, "max_depth": 3, "nthread": 1, "seed": 0, "eta": 0.3}
    if objective == "reg:quantileerror":
        params["quantile_alpha"] = 0.7
    ens = quiet_ensemble(xgb.train(params, xgb.DMatrix(X, y), 3))
    np.testing.assert_allclose(ens.learning_rate, 0.3, rtol=1e-6)


# ----------------------------------------------------------------------------- loss vs gradient
def _objective(name, n_outputs=1, **params):
    """get_objective of an XGBoost TreeEnsemble of one-leaf trees (one per output) with that
    objective."""
    k = n_outputs
    ens = TreeEnsemble(
        tree_offsets=np.arange(k + 1),
        left=[-1] * k,
        right=[-1] * k,
        feature=[-1] * k,
        threshold=[np.nan] * k,
        split_type=[0] * k,
        default_left=[0] * k,
        missing_type=[0] * k,
        value=[0.0] * k,
        cover=[1.0] * k,
        count=[1.0] * k,
        gain=[0.0] * k,
        leaf_id=[0] * k,
        cat_offsets=np.zeros(k + 1, dtype=np.int64),
        cat_words=np.zeros(0, dtype=np.uint32),
        tree_group=np.arange(k),
        tree_iteration=[0] * k,
        learning_rate=[1.0] * k,
        tree_weight=[1.0] * k,
        base_margin=np.zeros(n_outputs),
        feature_names=("x",),
        objective=name,
        objective_params=params,
        source="xgboost",
        **gradient_fields(xgb_adapter.kernel_objective, name, params, n_outputs),
    )
    return get_objective(ens)


def _gh(obj, y, F):
    F = np.atleast_1d(np.asarray(F, dtype=np.float64)).copy()
    g = np.empty_like(F)
    h = np.empty_like(F)
    grad_hess_row(obj.code, obj.prm, float(y), F, g, h)
    return g, h


def _row_loss(obj, y, F):
    F = np.atleast_1d(np.asarray(F, dtype=np.float64))
    return obj.loss(np.array([float(y)]), F[None, :] if obj.n_outputs > 1 else F)


# (objective, params, hessian factor over the true d2 loss, rows (y, F))
SMOOTH = [
    ("reg:squarederror", {}, 1.0, [(0.3, -1.0), (2.0, 2.5), (-4.0, 1.0)]),
    ("reg:logistic", {}, 1.0, [(0.3, -1.0), (1.0, 2.5), (0.0, 0.7)]),
    ("binary:logistic", {}, 1.0, [(1.0, -1.0), (0.0, 2.5), (1.0, 0.2)]),
    ("binary:logitraw", {}, 1.0, [(1.0, -3.0), (0.0, 0.1)]),
    ("count:poisson", {"max_delta_step": 0.0}, 1.0, [(0.0, -1.0), (3.0, 0.5), (7.0, 2.2)]),
    ("count:poisson", {}, np.exp(0.7), [(0.0, -1.0), (3.0, 0.5), (7.0, 2.2)]),
    ("count:poisson", {"max_delta_step": 1.3}, np.exp(1.3), [(2.0, 0.4)]),
    ("reg:gamma", {}, 1.0, [(0.5, -1.0), (3.0, 0.5), (7.0, 2.2)]),
    ("reg:tweedie", {"tweedie_variance_power": 1.2}, 1.0, [(0.0, -0.5), (3.0, 0.5), (7.0, 2.2)]),
    ("reg:tweedie", {"tweedie_variance_power": 1.7}, 1.0, [(0.0, -0.5), (3.0, 0.5), (7.0, 2.2)]),
    ("reg:pseudohubererror", {}, 1.0, [(0.3, -1.0), (2.0, 2.5), (-4.0, 1.0)]),
    ("reg:pseudohubererror", {"huber_slope": 2.5}, 1.0, [(0.3, -1.0), (2.0, 9.5)]),
    ("reg:squaredlogerror", {}, 1.0, [(0.3, -0.5), (2.0, 2.5), (4.0, 1.0)]),
    ("binary:hinge", {}, None, [(1.0, 0.3), (0.0, -0.2), (1.0, -2.0), (1.0, 1.5), (0.0, -3.0)]),
]


@pytest.mark.parametrize("objective, params, hfac, rows", SMOOTH, ids=lambda v: str(v)[:30])
def test_gradient_is_the_derivative_of_the_loss(objective, params, hfac, rows):
    obj = _objective(objective, **params)
    for y, F in rows:
        g, h = _gh(obj, y, F)
        eps = 1e-5 * max(1.0, abs(F))
        fd = (_row_loss(obj, y, F + eps) - _row_loss(obj, y, F - eps)) / (2 * eps)
        np.testing.assert_allclose(g[0], fd, rtol=1e-6, atol=1e-8, err_msg=f"y={y}, F={F}")
        if hfac is None:
            continue
        e2 = 1e-4 * max(1.0, abs(F))
        fd2 = (_gh(obj, y, F + e2)[0][0] - _gh(obj, y, F - e2)[0][0]) / (2 * e2)
        np.testing.assert_allclose(h[0], hfac * fd2, rtol=1e-6, atol=1e-9)


def test_scale_pos_weight_scales_positive_rows_only():
    obj = _objective("binary:logistic", scale_pos_weight=3.0)
    plain = _objective("binary:logistic")
    for y, F in [(1.0, 0.3), (0.0, 0.3), (1.0, -2.0)]:
        g, h = _gh(obj, y, F)
        g0, h0 = _gh(plain, y, F)
        s = 3.0 if y == 1 else 1.0
        np.testing.assert_allclose([g[0], h[0]], [s * g0[0], s * h0[0]], rtol=1e-15)


@pytest.mark.parametrize("n_class", [3, 5])
def test_softmax_gradient_and_xgboost_hessian(n_class):
    obj = _objective("multi:softprob", n_outputs=n_class, num_class=n_class)
    rng = np.random.default_rng(n_class)
    for _ in range(4):
        F = rng.normal(size=n_class) * 2
        y = float(rng.integers(0, n_class))
        g, h = _gh(obj, y, F)
        assert g.sum() == pytest.approx(0.0, abs=1e-12)
        assert g[int(y)] < 0 and np.all(np.delete(g, int(y)) > 0)
        for c in range(n_class):
            e = np.zeros(n_class)
            e[c] = 1e-5
            fd = (_row_loss(obj, y, F + e) - _row_loss(obj, y, F - e)) / 2e-5
            assert g[c] == pytest.approx(fd, rel=1e-6, abs=1e-9)
            e[c] = 1e-4
            fd2 = (_gh(obj, y, F + e)[0][c] - _gh(obj, y, F - e)[0][c]) / 2e-4
            assert h[c] == pytest.approx(2.0 * fd2, rel=1e-6, abs=1e-9)  # XGBoost's factor 2


# (objective, params, labels, closed-form minimizer of the mean loss or None)
MINIMA = [
    ("reg:squarederror", {}, [0.5, 2.0, -1.0, 4.0], lambda y: y.mean()),
    ("reg:logistic", {}, [0.2, 0.9, 0.5, 0.1], lambda y: np.log(y.mean() / (1 - y.mean()))),
    ("binary:logistic", {}, [0, 1, 1, 1], lambda y: np.log(3.0)),
    ("count:poisson", {}, [0, 1, 5, 2], lambda y: np.log(y.mean())),
    ("reg:gamma", {}, [0.5, 1.5, 2.0, 3.0], lambda y: np.log(y.mean())),
    ("reg:tweedie", {"tweedie_variance_power": 1.2}, [0, 1.5, 2, 3], lambda y: np.log(y.mean())),
    ("reg:tweedie", {"tweedie_variance_power": 1.7}, [0, 1.5, 2, 3], lambda y: np.log(y.mean())),
    ("reg:pseudohubererror", {}, [0.5, 2.0, -1.0, 4.0], None),
    ("reg:pseudohubererror", {"huber_slope": 3.0}, [0.5, 2.0, -1.0, 9.0], None),
    ("reg:squaredlogerror", {}, [0.5, 2.0, 0.0, 4.0], lambda y: np.expm1(np.log1p(y).mean())),
]


@pytest.mark.parametrize(
    "objective, params, labels, closed",
    MINIMA,
    ids=[f"{m[0]}-{i}" for i, m in enumerate(MINIMA)],  # stable ids (no function addresses)
)
def test_loss_is_minimized_where_the_gradient_vanishes(objective, params, labels, closed):
    obj = _objective(objective, **params)
    y = np.asarray(labels, dtype=float)
    w = np.array([1.0, 2.0, 0.5, 1.5])
    res = minimize_scalar(
        lambda f: obj.loss(y, np.full(len(y), f)),
        bounds=(-8, 8),
        method="bounded",
        options={"xatol": 1e-10},
    )
    F = res.x
    if closed is not None:
        assert F == pytest.approx(closed(y), abs=1e-5)
    g = np.array([_gh(obj, yi, F)[0][0] for yi in y])
    assert abs(g.mean()) < 1e-6 * max(1.0, np.abs(g).max())
    # off the minimizer the loss is higher and the gradient points uphill
    for d in (-0.3, 0.3):
        assert obj.loss(y, np.full(len(y), F + d)) > obj.loss(y, np.full(len(y), F))
        gd = np.mean([_gh(obj, yi, F + d)[0][0] for yi in y])
        assert np.sign(gd) == np.sign(d)
    # weights: the weighted loss's minimizer zeroes the weighted gradient
    resw = minimize_scalar(
        lambda f: obj.loss(y, np.full(len(y), f), w),
        bounds=(-8, 8),
        method="bounded",
        options={"xatol": 1e-10},
    )
    gw = np.array([_gh(obj, yi, resw.x)[0][0] for yi in y])
    assert abs(np.sum(w * gw)) < 1e-6 * max(1.0, np.abs(gw).max()) * w.sum()


def test_softmax_loss_minimized_at_the_class_frequencies():
    obj = _objective("multi:softprob", n_outputs=3, num_class=3)
    y = np.array([0, 1, 1, 2, 2, 2], dtype=float)
    F = np.log(np.array([1, 2, 3]) / 6.0)
    G = np.zeros(3)
    for yi in y:
        G += _gh(obj, yi, F)[0]
    np.testing.assert_allclose(G, 0.0, atol=1e-12)
    base = obj.loss(y, np.tile(F, (len(y), 1)))
    rng = np.random.default_rng(0)
    for _ in range(5):
        d = rng.normal(size=3) * 0.2
        d -= d.mean()  # shifting all margins together changes nothing
        assert obj.loss(y, np.tile(F + d, (len(y), 1))) > base
    assert obj.loss(y, np.tile(F + 5.0, (len(y), 1))) == pytest.approx(base, rel=1e-12)


@pytest.mark.parametrize(
    ("objective", "extra"),
    [
        ("reg:squarederror", {}),
        ("binary:logistic", {}),
        ("binary:logitraw", {}),
        ("count:poisson", {}),
        ("reg:gamma", {}),
        ("reg:tweedie", {}),
        ("multi:softprob", {"num_class": 3}),
    ],
)
def test_link_inverse_matches_xgboost_predict(objective, extra):
    """Objective.link_inverse turns our margins into XGBoost's own predictions."""
    from treeinner.objectives import get_objective

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    if objective.startswith("multi"):
        y = rng.integers(0, 3, size=200).astype(float)
    elif objective.startswith("binary"):
        y = (X[:, 0] > 0).astype(float)
    else:
        y = np.exp(0.3 * X[:, 0]) + (objective == "reg:gamma") * 0.1
    b = xgb.train({"objective": objective, "max_depth": 2, **extra}, xgb.DMatrix(X, y), 3)
    ens = quiet_ensemble(b)
    pred = get_objective(ens).link_inverse(ens.predict_margin(X))
    np.testing.assert_allclose(pred, b.predict(xgb.DMatrix(X)), rtol=2e-6, atol=1e-7)
