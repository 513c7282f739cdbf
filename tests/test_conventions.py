"""Booster conventions as typed TreeEnsemble fields: set by each adapter, saved and loaded,
validated, and followed by TreeSHAP, the objectives and node values whatever ``source`` says."""

from __future__ import annotations

import json

import numpy as np
import pytest

import treeinner
from tests._helpers import quiet_ensemble
from treeinner import _format as F
from treeinner.ensemble import TreeEnsemble
from treeinner.objectives import get_objective
from treeinner.treeshap import tree_shap

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _data(seed=0, n=400, p=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, y


def _xgb(objective="reg:squarederror", **extra):
    X, y = _data()
    if objective.startswith("binary"):
        y = (y > 0).astype(float)
    elif objective.startswith("multi"):
        y = np.digitize(y, [-0.5, 0.5]).astype(float)
        extra.setdefault("num_class", 3)
    elif objective in ("rank:ndcg", "count:poisson"):
        y = np.digitize(y, [-0.5, 0.5]).astype(float)
    dm = xgb.DMatrix(X, y)
    if objective == "rank:ndcg":
        dm.set_group([100] * 4)
    params = {"objective": objective, "max_depth": 3, "nthread": 1, "seed": 0, **extra}
    booster = xgb.train(params, dm, 4)
    return quiet_ensemble(booster), X, y


def _lgb(objective="regression", **extra):
    X, y = _data(1)
    if objective == "multiclass":
        y = np.digitize(y, [-0.5, 0.5])
        extra.setdefault("num_class", 3)
    params = {"objective": objective, "num_leaves": 7, "verbose": -1, "seed": 0, **extra}
    booster = lgb.train(params, lgb.Dataset(X, y), 4)
    return quiet_ensemble(booster), X, y


def _cb(loss="RMSE", grow_policy="SymmetricTree"):
    cb = pytest.importorskip("catboost")
    X, y = _data(2)
    if loss == "Logloss":
        y = (y > 0).astype(float)
    model = cb.CatBoost(
        {"loss_function": loss, "iterations": 4, "depth": 3, "grow_policy": grow_policy,
         "random_seed": 0, "verbose": False, "thread_count": 1, "allow_writing_files": False}
    ).fit(X, y)  # fmt: skip
    return quiet_ensemble(model), X, y


def _expect(ens, *, node_weight, reverse_levels, grad_objective, l2_scaled=False):
    assert ens.node_weight == node_weight
    assert ens.reverse_levels is reverse_levels
    assert ens.grad_objective == grad_objective
    assert ens.l2_scaled_by_mean_weight is l2_scaled
    assert ens.grad_params.dtype == np.float64 and ens.grad_params.shape == (F.N_PARAMS,)
    assert not ens.grad_params.flags.writeable
    if grad_objective >= 0:
        assert ens.no_gradient == ""
        obj = get_objective(ens)
        assert obj.code == grad_objective and obj.name == ens.objective
        np.testing.assert_array_equal(obj.prm, ens.grad_params)
        assert obj.prm.flags.writeable  # the kernels get a copy of their own
    else:
        assert ens.no_gradient
        with pytest.raises(NotImplementedError) as err:
            get_objective(ens)
        assert str(err.value) == ens.no_gradient


# ---------------------------------------------------------------------- each adapter
def test_xgboost_conventions():
    ens, _, _ = _xgb("reg:squarederror")
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.SQUARED)
    assert ens.linear_leaves is None
    ens, _, _ = _xgb("binary:logistic", scale_pos_weight=2.5)
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.LOGISTIC)
    assert ens.grad_params[F.P_POS_WEIGHT] == 2.5
    assert ens.grad_params[F.P_MIN_HESS] == 1e-16
    ens, _, _ = _xgb("multi:softprob")
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.SOFTMAX)
    assert ens.grad_params[F.P_HESS_SCALE] == 2.0
    ens, _, _ = _xgb("count:poisson", max_delta_step=0.3)
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.POISSON)
    assert ens.grad_params[F.P_MAX_DELTA] == pytest.approx(0.3)


def test_xgboost_objective_without_gradient():
    ens, _, _ = _xgb("rank:ndcg")
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=-1)
    assert "rank:ndcg" in ens.no_gradient and "prediction only" in ens.no_gradient


def test_lightgbm_conventions():
    ens, _, _ = _lgb("regression")
    _expect(ens, node_weight="count", reverse_levels=False, grad_objective=F.SQUARED)
    assert ens.linear_leaves is None
    ens, _, _ = _lgb("multiclass")
    _expect(ens, node_weight="count", reverse_levels=False, grad_objective=F.SOFTMAX)
    assert ens.grad_params[F.P_HESS_SCALE] == pytest.approx(3 / 2)
    ens, _, _ = _lgb("binary", sigmoid=0.7)
    _expect(ens, node_weight="count", reverse_levels=False, grad_objective=F.LOGISTIC)
    assert ens.grad_params[F.P_SIGMOID] == pytest.approx(0.7)
    ens, _, _ = _lgb("quantile", alpha=0.3)
    _expect(ens, node_weight="count", reverse_levels=False, grad_objective=-1)
    assert "quantile" in ens.no_gradient


def test_lightgbm_linear_leaves_field():
    ens, X, _ = _lgb("regression", linear_tree=True)
    lin = ens.linear_leaves
    assert isinstance(lin, F.LinearLeaves) and lin.tree.size > 0
    assert lin.ptr.shape == (lin.tree.size + 1,) and lin.ptr[-1] == lin.features.size
    for name, dtype in zip(lin._fields, ("i8", "i8", "f8", "i8", "i8", "f8")):
        arr = getattr(lin, name)
        assert arr.dtype == np.dtype(dtype) and not arr.flags.writeable, name
    assert "linear_leaves" not in ens.params
    # the linear models are what the prediction adds: without them it changes
    assert not np.allclose(ens.replace(linear_leaves=None).predict_margin(X), ens.predict_margin(X))


@pytest.mark.parametrize("loss", ["RMSE", "Logloss"])
def test_catboost_symmetric_conventions(loss):
    ens, _, _ = _cb(loss)
    code = {"RMSE": F.SQUARED, "Logloss": F.LOGISTIC}[loss]
    _expect(ens, node_weight="count", reverse_levels=True, grad_objective=code, l2_scaled=True)
    assert "l2_scaled_by_mean_weight" not in ens.params


def test_catboost_depthwise_conventions():
    ens, _, _ = _cb("RMSE", "Depthwise")
    _expect(
        ens, node_weight="count", reverse_levels=False, grad_objective=F.SQUARED, l2_scaled=True
    )


def test_catboost_loss_without_gradient():
    ens, _, _ = _cb("MAE")
    _expect(ens, node_weight="count", reverse_levels=True, grad_objective=-1, l2_scaled=True)
    assert "MAE" in ens.no_gradient


def test_native_booster_conventions():
    from treeinner.booster import GBMClassifier, GBMRegressor

    X, y = _data(3)
    reg = GBMRegressor(n_estimators=3, max_depth=3).fit(X, y)
    _expect(
        treeinner.from_model(reg), node_weight="cover", reverse_levels=False,
        grad_objective=F.SQUARED,
    )  # fmt: skip
    clf = GBMClassifier(n_estimators=3, max_depth=3).fit(X, y > 0)
    ens = treeinner.from_model(clf)
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.LOGISTIC)
    assert ens.grad_params[F.P_MIN_HESS] == 1e-16  # XGBoost's conventions
    multi = GBMClassifier(n_estimators=2, max_depth=2).fit(X, np.digitize(y, [-0.5, 0.5]))
    ens = treeinner.from_model(multi)
    _expect(ens, node_weight="cover", reverse_levels=False, grad_objective=F.SOFTMAX)
    assert ens.grad_params[F.P_HESS_SCALE] == 2.0


# ---------------------------------------------------------------------- nothing reads source
def test_source_and_params_steer_nothing():
    ens, X, y = _cb("RMSE")
    other = ens.replace(source="xgboost", params={})
    np.testing.assert_array_equal(tree_shap(other, X).values, tree_shap(ens, X).values)
    np.testing.assert_array_equal(
        treeinner.tree_inner(other, X, y).to_numpy(), treeinner.tree_inner(ens, X, y).to_numpy()
    )
    ref = (X, y, np.linspace(0.5, 2.0, len(y)))
    a = treeinner.node_values(ens, reference=ref)
    np.testing.assert_array_equal(treeinner.node_values(other, reference=ref), a)
    # the typed field does steer: without the l2 scaling the node values from data change
    b = treeinner.node_values(ens.replace(l2_scaled_by_mean_weight=False), reference=ref)
    assert not np.allclose(a, b)


# ---------------------------------------------------------------------- TreeSHAP follows them
def test_tree_shap_auto_follows_node_weight():
    from treeinner.booster import GBMClassifier

    X, y = _data(4)
    ens = treeinner.from_model(GBMClassifier(n_estimators=3, max_depth=3).fit(X, y > 0))
    assert ens.node_weight == "cover"
    cover = tree_shap(ens, X, node_weight="cover").values
    count = tree_shap(ens, X, node_weight="count").values
    assert not np.allclose(cover, count)  # hessian sums are not row counts here
    np.testing.assert_array_equal(tree_shap(ens, X).values, cover)
    switched = ens.replace(node_weight="count")
    np.testing.assert_array_equal(tree_shap(switched, X).values, count)
    # LightGBM the other way round
    ens, X, _ = _lgb("binary")
    np.testing.assert_array_equal(
        tree_shap(ens, X).values, tree_shap(ens, X, node_weight="count").values
    )
    np.testing.assert_array_equal(
        tree_shap(ens.replace(node_weight="cover"), X).values,
        tree_shap(ens, X, node_weight="cover").values,
    )


def test_tree_shap_follows_reverse_levels():
    ens, X, _ = _cb("RMSE")
    forward = ens.replace(reverse_levels=False)
    a, b = tree_shap(ens, X), tree_shap(forward, X)
    assert not np.allclose(a.values, b.values)  # the level order matters to TreeSHAP ...
    margin = ens.predict_margin(X)
    for att in (a, b):  # ... but both add up to the margin
        np.testing.assert_allclose(att.values.sum(axis=1) + att.bias, margin, atol=1e-9)
    # and prediction does not depend on it
    np.testing.assert_array_equal(forward.predict_margin(X), margin)


# ---------------------------------------------------------------------- save / load
def test_conventions_round_trip(tmp_path):
    cases = [_xgb("rank:ndcg")[0], _lgb("regression", linear_tree=True)[0], _cb("Logloss")[0]]
    for i, ens in enumerate(cases):
        path = tmp_path / f"e{i}.npz"
        ens.save(path)
        back = treeinner.load(path)
        for name in ("node_weight", "reverse_levels", "grad_objective", "no_gradient",
                     "l2_scaled_by_mean_weight"):  # fmt: skip
            assert getattr(back, name) == getattr(ens, name), name
            assert type(getattr(back, name)) is type(getattr(ens, name)), name
        assert back.grad_params.tobytes() == ens.grad_params.tobytes()
        if ens.linear_leaves is None:
            assert back.linear_leaves is None
        else:
            for name in F.LinearLeaves._fields:
                a, b = getattr(ens.linear_leaves, name), getattr(back.linear_leaves, name)
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def _rewrite(path, tmp_path, edit_meta=None, drop=()):
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    if edit_meta is not None:
        meta = edit_meta(json.loads(members["__meta__"].tobytes().decode()))
        members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    for k in drop:
        del members[k]
    out = tmp_path / "edited.npz"
    np.savez(out, **members)
    return out


def test_version_1_file_is_refused_with_advice(tmp_path):
    ens, _, _ = _xgb()
    ens.save(tmp_path / "e.npz")
    old = _rewrite(tmp_path / "e.npz", tmp_path, lambda m: {**m, "format_version": 1})
    with pytest.raises(ValueError, match=r"format version 1.*Re-save the ensemble from the"):
        treeinner.load(old)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: {**m, "node_weight": "hessian"}, "node_weight must be one of"),
        (lambda m: {**m, "reverse_levels": "yes"}, "reverse_levels must be True or False"),
        (lambda m: {**m, "grad_objective": 42}, "grad_objective must be -1"),
        (lambda m: {**m, "grad_objective": -1}, "no_gradient must give the reason"),
        (lambda m: {**m, "no_gradient": "nope"}, "no_gradient must be empty"),
        (lambda m: {**m, "linear_leaves": True}, "lacks the linear leaves"),
    ],
)
def test_corrupt_conventions_in_file_are_refused(tmp_path, edit, match):
    ens, _, _ = _xgb()
    ens.save(tmp_path / "e.npz")
    with pytest.raises(ValueError, match=match):
        treeinner.load(_rewrite(tmp_path / "e.npz", tmp_path, edit))


def test_file_without_grad_params_is_refused(tmp_path):
    ens, _, _ = _xgb()
    ens.save(tmp_path / "e.npz")
    with pytest.raises(ValueError, match=r"lacks \['grad_params'\]"):
        treeinner.load(_rewrite(tmp_path / "e.npz", tmp_path, drop=["grad_params"]))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"node_weight": "auto"}, r"node_weight must be one of \('cover', 'count'\)"),
        ({"node_weight": None}, "node_weight must be one of"),
        ({"reverse_levels": 1}, "reverse_levels must be True or False"),
        ({"l2_scaled_by_mean_weight": "true"}, "l2_scaled_by_mean_weight must be True or False"),
        ({"grad_objective": F.N_OBJECTIVES}, r"grad_objective must be -1 \(no gradient\) or one"),
        ({"grad_objective": -2}, "grad_objective must be -1"),
        ({"grad_objective": True}, "grad_objective must be -1"),
        ({"grad_objective": 1.0}, "grad_objective must be -1"),
        ({"grad_objective": F.SOFTMAX}, "needs at least 2 outputs"),
        ({"grad_objective": F.OVA}, "needs at least 2 outputs"),
        ({"grad_params": np.ones(F.N_PARAMS - 1)}, f"grad_params must be {F.N_PARAMS} finite"),
        ({"grad_params": np.ones((1, F.N_PARAMS))}, "grad_params must be"),
        ({"grad_params": np.full(F.N_PARAMS, np.nan)}, "grad_params must be"),
        ({"grad_params": ["a"] * F.N_PARAMS}, "grad_params must be"),
        ({"grad_objective": -1}, "no_gradient must give the reason"),
        ({"grad_objective": -1, "no_gradient": 3}, "no_gradient must be a str"),
        ({"no_gradient": "no gradient"}, "no_gradient must be empty"),
        ({"linear_leaves": {"tree": [0]}}, "Corrupt ensemble: linear_leaves"),
        (
            {"linear_leaves": F.LinearLeaves([0], [0], [0.5], [0, 1], [99], [1.0])},
            "linear_leaves out of range",
        ),
    ],
)
def test_corrupt_conventions_are_refused(changes, match):
    ens, _, _ = _xgb()
    with pytest.raises(ValueError, match=match):
        ens.replace(**changes)


def test_defaults_of_a_hand_built_ensemble():
    """The defaults describe XGBoost-style squared error (as ``objective``'s default does)."""
    ens, _, _ = _xgb()
    kw = {f: getattr(ens, f) for f in ("tree_offsets", "left", "right", "feature", "threshold",
          "split_type", "default_left", "missing_type", "value", "cover", "count", "gain",
          "leaf_id", "cat_offsets", "cat_words", "tree_group", "tree_iteration",
          "learning_rate", "tree_weight", "base_margin", "feature_names")}  # fmt: skip
    bare = TreeEnsemble(**kw)
    assert bare.node_weight == "cover" and bare.reverse_levels is False
    assert bare.grad_objective == F.SQUARED and bare.no_gradient == ""
    np.testing.assert_array_equal(bare.grad_params, F.default_grad_params())
    assert bare.l2_scaled_by_mean_weight is False and bare.linear_leaves is None
