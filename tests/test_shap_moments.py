"""One-pass moments of TreeInner / ForestInner with TreeSHAP attributions
(``treeshap._shap_inner_moments``).

The reference stores every per-row term: TreeSHAP values round by round
(``tree_shap(..., iteration_range=(m, m + 1))``, already credited to the output features),
staged margins from ``predict_margin(..., iteration_range=(0, m))`` and NumPy gradients; the
terms are then summed, squared and weighted in NumPy.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests._helpers import quiet_ensemble, task_data
from treeinner import _format as fmt
from treeinner import tree_shap
from treeinner.objectives import get_objective
from treeinner.treeshap import _shap_inner, _shap_inner_moments

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

N_TRAIN, N_EVAL, P = 300, 420, 5  # 420 rows: several blocks of 64 rows in every chunk


@functools.cache
def _model(booster: str, kind: str):
    """A small model and its held-out rows and labels."""
    seed = {"regression": 1, "binary": 2, "multiclass": 3}[kind] + (10 if booster == "lgb" else 0)
    X, y = task_data(seed, kind, N_TRAIN + N_EVAL, P, tie=2)
    Xt, yt, Xv, yv = X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]
    if booster == "xgb":
        obj = {"regression": "reg:squarederror", "binary": "binary:logistic"}.get(
            kind, "multi:softprob"
        )
        params = {"objective": obj, "max_depth": 4, "eta": 0.3, "nthread": 1, "seed": 0}
        if kind == "multiclass":
            params["num_class"] = 3
        model = xgb.train(params, xgb.DMatrix(Xt, yt), 8)
    else:
        obj = {"regression": "regression", "binary": "binary"}.get(kind, "multiclass")
        params = {"objective": obj, "num_leaves": 8, "learning_rate": 0.2, "min_data_in_leaf": 5,
                  "num_threads": 1, "verbose": -1, "seed": 0}  # fmt: skip
        if kind == "multiclass":
            params["num_class"] = 3
        model = lgb.train(params, lgb.Dataset(Xt, yt), 8)
    return quiet_ensemble(model), Xv, yv


def _neg_gradient(ens, F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-dLoss/dF of the model's objective at margins F (n, n_outputs), in NumPy."""
    obj = get_objective(ens)
    if obj.code == fmt.SQUARED:
        return y[:, None] - F
    if obj.code == fmt.LOGISTIC:
        assert obj.prm[fmt.P_SIGMOID] == 1.0
        return y[:, None] - 1.0 / (1.0 + np.exp(-F))
    assert obj.code == fmt.SOFTMAX
    E = np.exp(F - F.max(axis=1, keepdims=True))
    return (y[:, None] == np.arange(F.shape[1])) - E / E.sum(axis=1, keepdims=True)


def _reference_terms(ens, X, y, w, forest: bool) -> np.ndarray:
    """Every row's term u[i, j, c] (n_rows, n_output_features, n_outputs), round by round."""
    n, K = len(y), ens.n_outputs
    rounds = int(ens.tree_iteration.max()) + 1
    tree_u = np.zeros((n, len(ens.output_names), K))
    phi_sum = np.zeros_like(tree_u)
    gsum = np.zeros((n, K))
    for m in range(rounds):
        if m == 0:
            F = np.tile(ens.base_margin, (n, 1))
        else:
            F = np.asarray(ens.predict_margin(X, iteration_range=(0, m))).reshape(n, K)
        neg_g = w[:, None] * _neg_gradient(ens, F, y)
        phi = tree_shap(ens, X, iteration_range=(m, m + 1)).values
        phi = phi if phi.ndim == 3 else phi[:, :, None]
        trees = np.flatnonzero(ens.tree_iteration == m)
        lr = np.empty(K)
        for c in range(K):
            mine = trees[ens.tree_group[trees] == c]
            assert mine.size == 1  # one tree per output and round: its values are phi[..., c]
            lr[c] = ens.learning_rate[mine[0]]
        tree_u += phi * (neg_g / lr)[:, None, :]
        phi_sum += phi
        gsum += neg_g
    return phi_sum * gsum[:, None, :] if forest else tree_u


def _check(ens, X, y, sample_weight, forest: bool) -> None:
    n = len(y)
    w = np.ones(n) if sample_weight is None else sample_weight
    u = _reference_terms(ens, X, y, w, forest)
    got = _shap_inner_moments(ens, X, y, sample_weight, forest)
    tot = u.sum(axis=2)
    want = {
        "s1": u.sum(axis=0),
        "s2": (u**2).sum(axis=0),
        "s2_total": (tot**2).sum(axis=0),
        "swu": np.einsum("i,ijk->jk", w, u),
    }
    for name, ref in want.items():
        value = getattr(got, name)
        assert value.shape == ref.shape, name
        np.testing.assert_allclose(
            value, ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max(), err_msg=name
        )
    assert got.n == n
    assert got.sw == pytest.approx(w.sum(), rel=1e-12)
    assert got.sw2 == pytest.approx((w**2).sum(), rel=1e-12)
    # the sums are _shap_inner's, and the squares are not those of the sums
    sums = _shap_inner(ens, X, y, sample_weight, forest)
    np.testing.assert_allclose(got.s1, sums, rtol=1e-12, atol=1e-12 * np.abs(sums).max())
    assert np.all(got.s2 >= got.s1**2 / n - 1e-9 * np.abs(got.s2).max())
    assert np.any(got.s2 > 1.01 * got.s1**2 / n)


CASES = [(b, k) for b in ("xgb", "lgb") for k in ("regression", "binary", "multiclass")]


@pytest.mark.parametrize("booster,kind", CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_moments_match_stored_terms(booster, kind, weighted):
    ens, X, y = _model(booster, kind)
    assert ens.n_outputs == (3 if kind == "multiclass" else 1)
    sw = None
    if weighted:
        sw = np.random.default_rng(7).uniform(0.2, 3.0, len(y))
        sw[::17] = 0.0  # rows that count for nothing
    for forest in (False, True):
        _check(ens, X, y, sw, forest)


def test_moments_add_over_disjoint_rows():
    ens, X, y = _model("xgb", "multiclass")
    sw = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    whole = _shap_inner_moments(ens, X, y, sw, False)
    a = _shap_inner_moments(ens, X[:150], y[:150], sw[:150], False)
    b = _shap_inner_moments(ens, X[150:], y[150:], sw[150:], False)
    parts = a + b
    for name in ("s1", "s2", "s2_total", "swu"):
        np.testing.assert_allclose(getattr(parts, name), getattr(whole, name), rtol=1e-10)
    assert (parts.n, parts.sw) == (whole.n, pytest.approx(whole.sw))


def test_catboost_categorical_terms_are_credited_before_squaring():
    cb = pytest.importorskip("catboost")
    import pandas as pd

    rng = np.random.default_rng(5)

    def data(n):
        X = pd.DataFrame({
            "a": rng.normal(size=n),
            "c1": rng.choice([f"u{i}" for i in range(6)], n),
            "c2": rng.choice([f"k{i}" for i in range(8)], n),
            "b": rng.normal(size=n),
        })  # fmt: skip
        both = X["c1"].isin(["u1", "u2", "u3"]) == X["c2"].isin(["k1", "k2", "k3", "k4"])
        return X, (X["a"] + 2.0 * both + 0.5 * rng.normal(size=n)).to_numpy()

    X, y = data(600)
    Xv, yv = data(300)
    model = cb.CatBoost({
        "iterations": 10, "depth": 4, "learning_rate": 0.3, "loss_function": "RMSE",
        "one_hot_max_size": 2, "max_ctr_complexity": 2, "random_seed": 0, "verbose": False,
        "allow_writing_files": False, "thread_count": 1,
    }).fit(X, y, cat_features=["c1", "c2"])  # fmt: skip
    ens = quiet_ensemble(model)
    credit = ens.input_map.credit
    # some splits are on CTRs of both categorical features: one player shared by two features
    assert np.any(np.count_nonzero(credit, axis=1) > 1)
    sw = rng.uniform(0.5, 2.0, len(yv))
    for forest in (False, True):
        _check(ens, Xv, yv, sw, forest)
