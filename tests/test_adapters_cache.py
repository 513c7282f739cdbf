"""The adapters' interface and conversion cache: a booster converted twice unchanged is parsed
once; a booster trained further or changed in any way is converted anew (never a stale
ensemble); and the adapters stay small named phases."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

import treeinner
from treeinner import adapters
from treeinner.adapters import _cache
from treeinner.adapters._records import INTERFACE

xgb = pytest.importorskip("xgboost")

ADAPTERS_DIR = Path(adapters.__file__).parent


@pytest.fixture(autouse=True)
def _fresh_cache():
    adapters.clear_cache()
    yield
    adapters.clear_cache()


@pytest.fixture
def count_parses(monkeypatch):
    """Counts the parses (``from_export`` calls) of each adapter from now on."""
    counts: dict[str, int] = {}
    for module in adapters.ADAPTERS:
        name = module.__name__.rsplit(".", 1)[1]
        counts[name] = 0

        def counted(exported, given, *, _orig=module.from_export, _name=name):
            counts[_name] += 1
            return _orig(exported, given)

        monkeypatch.setattr(module, "from_export", counted)
    return counts


def _quiet(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(model, **kw)


def _data(n=400, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


# ---------------------------------------------------------------------- XGBoost
def _xgb(rounds=5, **params):
    X, y = _data()
    d = xgb.DMatrix(X, y)
    return xgb.train({"max_depth": 3, "eta": 0.3, **params}, d, rounds), d, X


def _same_as_booster(ens, booster, X):
    ours = ens.predict_margin(X)
    theirs = np.asarray(booster.inplace_predict(X, predict_type="margin"), dtype=np.float64)
    return np.array_equal(ours, theirs.reshape(ours.shape))


def test_second_conversion_is_the_same_object_without_parsing(count_parses):
    b, _, X = _xgb()
    first = treeinner.from_model(b)
    second = treeinner.from_model(b)
    assert second is first
    assert count_parses["xgboost"] == 1
    assert _same_as_booster(second, b, X)


def test_xgboost_trained_further_or_changed_is_converted_anew(count_parses):
    b, d, X = _xgb()
    ens = treeinner.from_model(b)
    more = xgb.train({"max_depth": 3, "eta": 0.3}, d, 3, xgb_model=b)  # continues a copy
    assert treeinner.from_model(more).n_trees == ens.n_trees + 3
    assert treeinner.from_model(b) is ens  # b itself is unchanged
    b.update(d, ens.n_trees)  # trained further in place
    grown = treeinner.from_model(b)
    assert grown.n_trees == ens.n_trees + 1 and _same_as_booster(grown, b, X)
    b.set_param({"base_score": 3.0})
    moved = treeinner.from_model(b)
    assert moved is not grown and _same_as_booster(moved, b, X)
    b.feature_names = ["a", "b", "c", "d"]
    assert treeinner.from_model(b).feature_names == ("a", "b", "c", "d")
    other, _, _ = _xgb(rounds=7, max_depth=2)
    b.load_model(other.save_raw("ubj"))  # another model into the same object
    loaded = treeinner.from_model(b)
    assert loaded.n_trees == 7 and _same_as_booster(loaded, b, X)
    assert count_parses["xgboost"] == 6


def test_xgboost_config_is_part_of_the_key(count_parses):
    """eta and lambda live in the configuration, not in the model bytes."""
    b, _, _ = _xgb()
    treeinner.from_model(b)
    b.set_param({"eta": 0.05})  # does not change save_raw's bytes
    treeinner.from_model(b)
    assert count_parses["xgboost"] == 2


def test_arguments_are_part_of_the_key(count_parses):
    b, _, _ = _xgb()
    e1 = treeinner.from_model(b, learning_rate=0.1)
    e2 = treeinner.from_model(b, learning_rate=0.2)
    assert e1 is not e2 and e1.learning_rate[0] == 0.1 and e2.learning_rate[0] == 0.2
    assert treeinner.from_model(b, learning_rate=0.1) is e1
    e3 = treeinner.from_model(b, reg_lambda=5.0)
    assert e3.reg_lambda == 5.0 and treeinner.from_model(b, reg_lambda=5) is e3
    assert count_parses["xgboost"] == 3


def test_wrapper_type_and_refit(count_parses):
    X, y = _data()
    reg = xgb.XGBRegressor(n_estimators=4, max_depth=2).fit(X, y)
    e1 = treeinner.from_model(reg)
    assert treeinner.from_model(reg.get_booster()) is not e1  # another type, another entry
    assert treeinner.from_model(reg) is e1
    reg.set_params(n_estimators=6).fit(X, y)
    assert treeinner.from_model(reg).n_trees == 6
    assert count_parses["xgboost"] == 3


def test_a_cached_conversion_warns_again():
    b, _, _ = _xgb(alpha=0.5)
    given = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            treeinner.from_model(b)
        given.append([str(w.message) for w in caught])
    assert given[0] == given[1] and any("reg_alpha" in m for m in given[0])


def test_least_recently_used_entries_are_dropped(count_parses):
    boosters = [_xgb(rounds=2 + i)[0] for i in range(_cache.MAXSIZE + 1)]
    ensembles = [treeinner.from_model(b) for b in boosters]
    assert len(adapters._CACHE) == _cache.MAXSIZE
    assert treeinner.from_model(boosters[-1]) is ensembles[-1]
    treeinner.from_model(boosters[0])  # dropped: parsed again
    assert count_parses["xgboost"] == _cache.MAXSIZE + 2


def test_errors_are_not_cached():
    with pytest.raises(ValueError, match="not trained"):
        treeinner.from_model(xgb.Booster())
    with pytest.raises(ValueError, match="not fitted"):
        treeinner.from_model(xgb.XGBRegressor())
    assert len(adapters._CACHE) == 0


# ---------------------------------------------------------------------- LightGBM
def test_lightgbm_changes_are_converted_anew(count_parses):
    lgb = pytest.importorskip("lightgbm")
    X, y = _data()
    train = lgb.Dataset(X, y, free_raw_data=False)
    params = {"num_leaves": 7, "learning_rate": 0.2, "verbose": -1, "min_data_in_leaf": 5}
    b = lgb.train(params, train, 4, keep_training_booster=True)

    def check(ens):
        assert np.allclose(ens.predict_margin(X), b.predict(X, raw_score=True), rtol=0, atol=1e-12)
        return ens

    ens = check(treeinner.from_model(b))
    assert treeinner.from_model(b) is ens and count_parses["lightgbm"] == 1
    b.update()
    grown = check(treeinner.from_model(b))
    assert grown.n_trees == ens.n_trees + 1
    b.set_leaf_output(1, 0, 5.0)
    changed = check(treeinner.from_model(b))
    assert changed is not grown
    b.rollback_one_iter()
    assert check(treeinner.from_model(b)).n_trees == ens.n_trees
    assert count_parses["lightgbm"] == 4


# ---------------------------------------------------------------------- CatBoost
def _cb_raw(model, X):
    return np.asarray(model.predict(X, prediction_type="RawFormulaVal"), dtype=np.float64)


def test_catboost_changes_are_converted_anew(count_parses):
    cb = pytest.importorskip("catboost")
    X, y = _data()
    m = cb.CatBoostRegressor(iterations=6, depth=3, verbose=0, thread_count=1).fit(X, y)
    ens = treeinner.from_model(m)
    assert treeinner.from_model(m) is ens and count_parses["catboost"] == 1
    m.shrink(4)
    shrunk = treeinner.from_model(m)
    assert shrunk.n_trees == 4
    assert np.allclose(shrunk.predict_margin(X), _cb_raw(m, X), rtol=1e-12, atol=1e-12)
    m.set_scale_and_bias(2.0, [0.5])
    scaled = treeinner.from_model(m)
    assert scaled is not shrunk
    assert np.allclose(scaled.predict_margin(X), _cb_raw(m, X), rtol=1e-12, atol=1e-12)
    m.set_feature_names(["a", "b", "c", "d"])
    assert treeinner.from_model(m).feature_names == ("a", "b", "c", "d")
    assert count_parses["catboost"] == 4


def test_catboost_categorical_models_are_keyed_on_identity(count_parses):
    """The ensemble of a model with categorical features keeps the model to route rows, so two
    equal models get ensembles of their own."""
    cb = pytest.importorskip("catboost")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=300), "c": rng.choice(list("xyz"), size=300)})
    y = X["a"] + (X["c"] == "y") + 0.1 * rng.normal(size=300)
    fit = dict(cat_features=["c"])
    kw = dict(iterations=5, depth=3, verbose=0, thread_count=1, random_seed=0)
    m1 = cb.CatBoostRegressor(**kw).fit(X, y, **fit)
    m2 = cb.CatBoostRegressor(**kw).fit(X, y, **fit)
    e1, e2 = _quiet(m1), _quiet(m2)
    assert e1 is not e2
    assert e1.input_map.model is m1 and e2.input_map.model is m2
    assert _quiet(m1) is e1 and count_parses["catboost"] == 2


# ---------------------------------------------------------------------- the interface
def test_every_adapter_has_the_interface():
    for module in adapters.ADAPTERS:
        missing = [f for f in INTERFACE if not callable(getattr(module, f, None))]
        assert not missing, f"{module.__name__} lacks {missing}"
        assert set(INTERFACE) <= set(module.__all__)


def test_adapters_are_small_documented_functions():
    too_long, undocumented = [], []
    for path in sorted(ADAPTERS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{path.name}:{node.lineno} {node.name}"
                if node.end_lineno - node.lineno + 1 > 80:
                    too_long.append(where)
                if ast.get_docstring(node) is None:
                    undocumented.append(where)
    assert not too_long, too_long
    assert not undocumented, undocumented
