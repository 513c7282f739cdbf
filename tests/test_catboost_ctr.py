"""CatBoost CTR combinations (``max_ctr_complexity`` 1-4) against CatBoost itself.

The data make CatBoost grow tree CTRs whose projections mix categorical values with float
borders and one-hot values: the effect of the string category ``s`` flips with the sign of
``x1``, the int-coded category ``k`` acts only where the one-hot category ``h`` is ``"p"``,
and ``s`` and ``k`` interact. Every model is checked for margins (``RawFormulaVal``), leaf
indices (``calc_leaf_indexes``), TreeSHAP (``ShapValues``), PreDecomp and TreeInner on the
training data (the total split gain from the training rows), on rows with categories never
seen in training. The references are computed here from CatBoost's own outputs and the
model's JSON (which split uses which CTR, and which categorical features a CTR counts):
a CTR split is credited to its projection's categorical features only, equally, as CatBoost's
ShapValues do.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner

cb = pytest.importorskip("catboost")

CATS = ["s", "k", "h", "g"]
COLUMNS = ["x1", "s", "k", "h", "x2", "g"]
LOSSES = ["Logloss", "MultiClass", "RMSE"]
COMPLEXITY = [1, 2, 3, 4]


def _data(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Features (strings, int codes, floats with NaN) and the signal the labels come from."""
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n)
    x2[rng.random(n) < 0.05] = np.nan
    s_code = rng.integers(0, 8, n)
    k = rng.integers(0, 10, n)  # int-coded, CTR
    h = rng.choice(["p", "q", "r"], n)  # one-hot
    g = rng.integers(0, 2, n)  # int-coded, one-hot
    eff_s = s_code / 4.0 - 0.875
    eff_k = (k % 3 - 1).astype(float)
    signal = (
        eff_s * np.sign(x1)
        + 1.5 * eff_k * (h == "p")
        + eff_s * eff_k
        + 0.5 * np.nan_to_num(x2)
        + 0.3 * g
    )
    X = pd.DataFrame({"x1": x1, "s": [f"s{c}" for c in s_code], "k": k, "h": h, "x2": x2, "g": g})
    return X, signal


def _labels(rng: np.random.Generator, loss: str, signal: np.ndarray) -> np.ndarray:
    noisy = signal + rng.normal(size=signal.size)
    if loss == "Logloss":
        return (noisy > 0).astype(int)
    if loss == "MultiClass":
        return np.digitize(noisy, [-0.7, 0.7])
    return noisy


class Case:
    """A trained model, its JSON, training rows and held-out rows with unseen categories."""

    def __init__(self, loss: str, mcc: int) -> None:
        seed = 10 * LOSSES.index(loss) + mcc
        rng = np.random.default_rng(seed)
        self.loss, self.mcc = loss, mcc
        self.X, signal = _data(rng, 1500)
        self.y = _labels(rng, loss, signal)
        self.Xv, _ = _data(rng, 300)
        self.Xv.loc[:9, "s"] = "never-seen"
        self.Xv.loc[5:14, "k"] = 99
        self.Xv.loc[10:19, "h"] = "zz"
        self.Xv.loc[15:24, "g"] = 7
        params = dict(
            loss_function=loss,
            iterations=30,
            depth=4,
            learning_rate=0.3,
            max_ctr_complexity=mcc,
            one_hot_max_size=3,
            random_seed=seed,
            thread_count=1,
            verbose=False,
            allow_writing_files=False,
            cat_features=CATS,
        )
        self.model = cb.CatBoost(params).fit(self.X, self.y)
        self.doc = _json(self.model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CTR / MultiClass node values: flagged inexact
            self.ens = treeinner.from_model(self.model)

    def pool(self, X: pd.DataFrame) -> cb.Pool:
        return cb.Pool(X, cat_features=CATS)


def _json(model) -> dict:
    """The model's JSON export."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        model.save_model(path, format="json")
        with open(path) as f:
            return json.load(f)


@functools.cache
def _case(loss: str, mcc: int) -> Case:
    return Case(loss, mcc)


@pytest.fixture(
    scope="module",
    params=[(lo, c) for lo in LOSSES for c in COMPLEXITY],
    ids=[f"{lo}-mcc{c}" for lo in LOSSES for c in COMPLEXITY],
)
def case(request) -> Case:
    return _case(*request.param)


# ------------------------------------------------------------ reading the model's JSON
def _used_ctrs(doc: dict) -> list[dict]:
    """The CTR description of every CTR split of the model, in tree and level order.

    ``split_index`` numbers the float borders, then the one-hot values, then the CTR borders
    in the order of ``features_info.ctrs``.
    """
    fi = doc["features_info"]
    first = sum(len(f.get("borders") or []) for f in fi.get("float_features") or [])
    first += sum(len(f.get("values") or []) for f in fi.get("categorical_features") or [])
    by_border = [c for c in fi.get("ctrs") or [] for _ in c["borders"]]
    return [
        by_border[s["split_index"] - first]
        for tree in doc["oblivious_trees"]
        for s in tree.get("splits") or []  # a tree without splits has none
        if s["split_type"] == "OnlineCtr"
    ]


def _kinds(ctr: dict) -> list[str]:
    return [e["combination_element"] for e in ctr["elements"]]


def _split_credit(doc: dict) -> list[list[np.ndarray]]:
    """Per tree, per level: the split's credit to the model's columns (a vector summing to 1).

    A float split is its column; a one-hot split its categorical column; a CTR split is shared
    equally among the categorical features whose values the CTR counts (its float-border and
    one-hot elements are not credited)."""
    fi = doc["features_info"]
    float_col = {f["feature_index"]: f["flat_feature_index"] for f in fi["float_features"]}
    cat_col = {f["feature_index"]: f["flat_feature_index"] for f in fi["categorical_features"]}
    ctrs = iter(_used_ctrs(doc))
    out = []
    for tree in doc["oblivious_trees"]:
        levels = []
        for s in tree.get("splits") or []:
            w = np.zeros(len(COLUMNS))
            if s["split_type"] == "FloatFeature":
                w[float_col[s["float_feature_index"]]] = 1.0
            elif s["split_type"] == "OneHotFeature":
                w[cat_col[s["cat_feature_index"]]] = 1.0
            else:
                ctr = next(ctrs)
                cols = {
                    cat_col[e["cat_feature_index"]]
                    for e in ctr["elements"]
                    if e["combination_element"] == "cat_feature_value"
                }
                w[sorted(cols)] = 1.0 / len(cols)
            levels.append(w)
        out.append(levels)
    return out


# ------------------------------------------------------------ references from CatBoost
def _raw(case: Case, X: pd.DataFrame) -> np.ndarray:
    """CatBoost's margins, (n, k)."""
    raw = np.asarray(case.model.predict(case.pool(X), prediction_type="RawFormulaVal"), float)
    return raw.reshape(len(X), -1)


def _staged(case: Case, X: pd.DataFrame) -> list[np.ndarray]:
    """CatBoost's margin before each tree, (n, k) each."""
    k = 3 if case.loss == "MultiClass" else 1
    bias = np.broadcast_to(np.asarray(case.model.get_scale_and_bias()[1], float), (k,))
    out = [np.tile(bias, (len(X), 1))]
    for s in case.model.staged_predict(case.pool(X), prediction_type="RawFormulaVal"):
        out.append(np.asarray(s, float).reshape(len(X), k))
    return out[: case.model.tree_count_]


def _grad_hess(loss: str, y: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and (diagonal) hessian per row and output, (n, k) each."""
    if loss == "RMSE":
        return F - y[:, None], np.ones_like(F)
    if loss == "Logloss":
        p = 1 / (1 + np.exp(-F))
        return p - y[:, None], p * (1 - p)
    e = np.exp(F - F.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    onehot = np.eye(F.shape[1])[y.astype(int)]
    return p - onehot, p * (1 - p)


def _node_values(case: Case, leaves: np.ndarray, G: list, H: list) -> list[list[np.ndarray]]:
    """Per tree and level j: the node of every row at level j (its leaf's low j bits, the
    splits above it) and PreDecomp's -lr G / (H + lambda) of every (node, output)."""
    lam = float(case.model.get_all_params()["l2_leaf_reg"])
    lr = float(case.model.get_all_params()["learning_rate"])
    out = []
    for t, levels in enumerate(_split_credit(case.doc)):
        d = len(levels)
        per_level = []
        for j in range(d + 1):
            node = leaves[:, t] & ((1 << j) - 1)
            g = np.stack([np.bincount(node, G[t][:, c], 1 << j) for c in range(G[t].shape[1])])
            h = np.stack([np.bincount(node, H[t][:, c], 1 << j) for c in range(H[t].shape[1])])
            per_level.append((g.T, h.T, -lr * g.T / (h.T + lam)))
        out.append(per_level)
    return out


def _train_stats(case: Case):
    leaves = case.model.calc_leaf_indexes(case.pool(case.X)).astype(np.int64)
    G, H = [], []
    for F in _staged(case, case.X):
        g, h = _grad_hess(case.loss, np.asarray(case.y, float), F)
        G.append(g)
        H.append(h)
    return leaves, G, H


# ------------------------------------------------------------ tests
def test_projections_mix_categorical_float_and_one_hot(case):
    """The models really grew the combinations under test (the checks are not vacuous)."""
    used = _used_ctrs(case.doc)
    assert used, "no CTR split"
    kinds = [_kinds(c) for c in used]
    assert all(1 <= k.count("cat_feature_value") <= case.mcc for k in kinds)
    if case.mcc == 1:
        assert all(k == ["cat_feature_value"] for k in kinds)
        return
    assert any("float_feature" in k for k in kinds), kinds
    assert any("cat_feature_exact_value" in k for k in kinds), kinds


@pytest.mark.parametrize("loss", LOSSES)
def test_projections_combine_categorical_features(loss):
    """Some CTR of each loss counts two categorical features at once (a shared player)."""
    kinds = [_kinds(c) for mcc in COMPLEXITY[1:] for c in _used_ctrs(_case(loss, mcc).doc)]
    assert any(k.count("cat_feature_value") >= 2 for k in kinds)


def test_margins_and_leaves_equal_catboost(case):
    for X in (case.Xv, case.X.iloc[:300]):
        raw = _raw(case, X)
        got = case.ens.predict_margin(X).reshape(raw.shape)
        np.testing.assert_allclose(got, raw, rtol=1e-9, atol=1e-9 * np.abs(raw).max())
        leaves = case.model.calc_leaf_indexes(case.pool(X))
        np.testing.assert_array_equal(case.ens.leaf_index(X)[:, :: case.ens.n_outputs], leaves)


def test_tree_shap_equals_shap_values(case):
    sv = case.model.get_feature_importance(case.pool(case.Xv), type="ShapValues")
    got = treeinner.tree_shap(case.ens, case.Xv)
    if sv.ndim == 3:  # (rows, classes, features + 1)
        want, want_bias = sv[:, :, :-1].transpose(0, 2, 1), sv[:, :, -1]
    else:
        want, want_bias = sv[:, :-1], sv[:, -1:]
    assert got.feature_names == tuple(COLUMNS)
    np.testing.assert_allclose(got.values, want, rtol=1e-9, atol=1e-9)
    margin = _raw(case, case.Xv)
    np.testing.assert_allclose(got.values.sum(axis=1).reshape(margin.shape) + got.bias, margin)
    if case.loss != "MultiClass":  # CatBoost centres MultiClass expected values over classes
        np.testing.assert_allclose(np.broadcast_to(got.bias, want_bias.shape), want_bias)


def test_predecomp_credits_ctrs_to_their_categorical_features(case):
    """PreDecomp from the training data's node values, credited per split from the JSON."""
    leaves, G, H = _train_stats(case)
    nodes = _node_values(case, leaves, G, H)
    credit = _split_credit(case.doc)
    lv = case.model.calc_leaf_indexes(case.pool(case.Xv)).astype(np.int64)
    k = case.ens.n_outputs
    want = np.zeros((len(case.Xv), len(COLUMNS), k))
    for t, levels in enumerate(credit):
        for j, w in enumerate(levels):
            parent = nodes[t][j][2][lv[:, t] & ((1 << j) - 1)]
            child = nodes[t][j + 1][2][lv[:, t] & ((1 << (j + 1)) - 1)]
            want += w[None, :, None] * (child - parent)[:, None, :]
    got = treeinner.predecomp(case.ens, case.Xv, reference=(case.X, case.y))
    values = got.values.reshape(want.shape)
    np.testing.assert_allclose(values, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def test_tree_inner_on_training_data_equals_total_gain(case):
    """TreeInner(training rows, reference = training rows) is the total split gain computed
    from the training rows' staged gradients, credited per split from the JSON."""
    leaves, G, H = _train_stats(case)
    nodes = _node_values(case, leaves, G, H)
    lam = float(case.model.get_all_params()["l2_leaf_reg"])
    k = case.ens.n_outputs
    gain = np.zeros((len(COLUMNS), k))
    for t, levels in enumerate(_split_credit(case.doc)):
        for j, w in enumerate(levels):
            g, h, _ = nodes[t][j]
            gc, hc, _ = nodes[t][j + 1]  # the children of node m are m + b 2^j, b = 0, 1
            per = (gc**2 / (hc + lam)).reshape(2, 1 << j, k).sum(axis=0) - g**2 / (h + lam)
            gain += w[:, None] * per.sum(axis=0)[None, :]
    ti = treeinner.tree_inner(case.ens, case.X, case.y, reference=(case.X, case.y))
    got = ti.to_numpy()
    if k > 1:
        assert list(ti.columns) == ["class_0", "class_1", "class_2", "total"]
        np.testing.assert_allclose(got[:, -1], gain.sum(axis=1), rtol=1e-9)
        got = got[:, :k]
    else:
        assert list(ti.index) == COLUMNS
        got = got.reshape(-1, 1)
    np.testing.assert_allclose(got, gain, rtol=1e-9, atol=1e-9 * np.abs(gain).max())
    assert (gain[[COLUMNS.index("s"), COLUMNS.index("k")]] > 0).all()


def test_projection_without_categorical_value_is_refused():
    """A CTR counts a categorical feature; a projection of float borders alone is corrupt."""
    from treeinner.adapters import catboost as cb_adapter

    case = _case("RMSE", 2)
    doc = json.loads(json.dumps(case.doc))
    ctr = next(c for c in doc["features_info"]["ctrs"] if "float_feature" in _kinds(c))
    ctr["elements"] = [e for e in ctr["elements"] if e["combination_element"] == "float_feature"]
    with pytest.raises(ValueError, match="counts no categorical feature"):
        cb_adapter.from_json(doc, model=case.model)
    ctr["elements"] = [{"combination_element": "text_feature", "text_feature_index": 0}]
    with pytest.raises(NotImplementedError, match="text_feature"):
        cb_adapter.from_json(doc, model=case.model)
