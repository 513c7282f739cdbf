"""TreeEnsemble basics: persistence, immutability, re-validation, sizes, iteration ranges,
``from_model`` pass-through and overrides, and the float32 threshold helpers."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import treeinner
from tests._helpers import quiet, quiet_ensemble
from treeinner import TreeEnsemble
from treeinner._thresholds import float32_le_bound, float32_lt_bound

xgb = pytest.importorskip("xgboost")

ARRAY_FIELDS = [
    f.name
    for f in dataclasses.fields(TreeEnsemble)
    if f.init and f.type in ("np.ndarray", np.ndarray)
]
META_FIELDS = [
    f.name for f in dataclasses.fields(TreeEnsemble) if f.init and f.name not in ARRAY_FIELDS
]

EXPECTED_DTYPES = {
    "tree_offsets": np.int64,
    "left": np.int32,
    "right": np.int32,
    "feature": np.int32,
    "threshold": np.float64,
    "split_type": np.int8,
    "default_left": np.uint8,
    "missing_type": np.int8,
    "value": np.float64,
    "cover": np.float64,
    "count": np.float64,
    "gain": np.float64,
    "leaf_id": np.int32,
    "cat_offsets": np.int64,
    "cat_words": np.uint32,
    "tree_group": np.int32,
    "tree_iteration": np.int32,
    "learning_rate": np.float64,
    "tree_weight": np.float64,
    "base_margin": np.float64,
    "grad_params": np.float64,
}


# ---------------------------------------------------------------------- models
class Case:
    """A trained booster, the data to predict on and its TreeEnsemble."""

    def __init__(self, booster, X, params, n_rounds):
        self.booster = booster
        self.X = X
        self.params = params
        self.n_rounds = n_rounds
        self.ens = quiet_ensemble(booster)


@pytest.fixture(scope="module")
def reg_case():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] - 2 * X[:, 1] * (X[:, 2] > 0) + rng.normal(scale=0.1, size=300)
    X[rng.random(X.shape) < 0.1] = np.nan
    params = {"max_depth": 4, "eta": 0.2, "lambda": 2.0, "seed": 0, "nthread": 1}
    b = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=6)
    return Case(b, X, params, 6)


@pytest.fixture(scope="module")
def named_case():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=["age", "income", "height", "score"])
    y = (X["age"] + X["income"] > 0).astype(int)
    params = {"objective": "binary:logistic", "max_depth": 3, "seed": 0, "nthread": 1}
    b = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=5)
    return Case(b, X, params, 5)


@pytest.fixture(scope="module")
def multi_case():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, 3, size=300)
    params = {
        "objective": "multi:softprob",
        "num_class": 3,
        "max_depth": 3,
        "num_parallel_tree": 2,
        "subsample": 0.8,
        "seed": 0,
        "nthread": 1,
    }
    b = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=4)
    return Case(b, X, params, 4)


@pytest.fixture(scope="module")
def cat_case():
    rng = np.random.default_rng(3)
    n = 300
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "color": pd.Categorical(rng.choice(["red", "green", "blue", "teal"], n)),
            "size": pd.Categorical(rng.choice([3, 7, 11], n)),
            "b": rng.normal(size=n),
        }
    )
    y = X["a"] + 2.0 * (X["color"] == "green") - (X["size"] == 7) + rng.normal(scale=0.1, size=n)
    params = {"max_depth": 3, "tree_method": "hist", "seed": 0, "nthread": 1}
    b = xgb.train(params, xgb.DMatrix(X, label=y, enable_categorical=True), num_boost_round=4)
    return Case(b, X, params, 4)


CASES = ["reg_case", "named_case", "multi_case", "cat_case"]


@pytest.fixture(params=CASES)
def case(request):
    return request.getfixturevalue(request.param)


def _xgb_margin(case, iteration_range=(0, 0)):
    X = case.X
    if isinstance(X, pd.DataFrame):
        dm = xgb.DMatrix(X, enable_categorical=True)
        return case.booster.predict(dm, output_margin=True, iteration_range=iteration_range)
    return case.booster.inplace_predict(X, predict_type="margin", iteration_range=iteration_range)


def _assert_same_ensemble(a: TreeEnsemble, b: TreeEnsemble) -> None:
    for name in ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name  # bit-identical, NaN payloads included
    for name in META_FIELDS:
        assert getattr(a, name) == getattr(b, name), name
        assert type(getattr(a, name)) is type(getattr(b, name)), name
    assert a.max_depth == b.max_depth


# ---------------------------------------------------------------------- sanity of the fixtures
def test_fixtures_match_xgboost(case):
    """Everything below relies on the ensembles reproducing XGBoost's margins bit for bit."""
    got = case.ens.predict_margin(case.X)
    ref = _xgb_margin(case)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


def test_array_dtypes(case):
    for name, dtype in EXPECTED_DTYPES.items():
        arr = getattr(case.ens, name)
        assert arr.dtype == dtype, name
        assert arr.ndim == 1, name
        assert arr.flags.c_contiguous, name
    assert set(EXPECTED_DTYPES) == set(ARRAY_FIELDS)


# ---------------------------------------------------------------------- save / load


@pytest.mark.parametrize(
    "name",
    [
        "reg_case",
        "named_case",
        "multi_case",
        "cat_case",
    ],
)
def test_save_load_round_trip(name, request, tmp_path):
    case = request.getfixturevalue(name)
    ens = case.ens
    path = tmp_path / "model.npz"
    ens.save(path)
    for loaded in (
        treeinner.load(path),
        TreeEnsemble.load_npz(path),
        quiet(treeinner.load, str(path)),
    ):
        _assert_same_ensemble(ens, loaded)
        np.testing.assert_array_equal(loaded.predict_margin(case.X), ens.predict_margin(case.X))
        np.testing.assert_array_equal(loaded.leaf_index(case.X), ens.leaf_index(case.X))


def test_round_trip_keeps_metadata(named_case, multi_case, tmp_path):
    named_case.ens.save(tmp_path / "named.npz")
    loaded = treeinner.load(tmp_path / "named.npz")
    assert loaded.feature_names == ("age", "income", "height", "score")
    assert loaded.named is True
    assert loaded.objective == "binary:logistic"
    assert loaded.source == "xgboost"
    assert loaded.source_version == named_case.ens.source_version != ""
    # columns are still matched by name after loading
    shuffled = named_case.X[["score", "age", "height", "income"]]
    np.testing.assert_array_equal(
        loaded.predict_margin(shuffled), named_case.ens.predict_margin(named_case.X)
    )

    multi_case.ens.save(tmp_path / "multi.npz")
    loaded = treeinner.load(tmp_path / "multi.npz")
    assert loaded.n_outputs == 3
    assert loaded.objective_params.get("num_class") == 3
    assert loaded.named is False
    assert loaded.feature_names == tuple(f"f{i}" for i in range(5))
    assert loaded.inexact == multi_case.ens.inexact
    assert any("subsample" in s for s in loaded.inexact)


def test_categorical_metadata(cat_case):
    ens = cat_case.ens
    assert ens.categories == {1: ["blue", "green", "red", "teal"], 2: [3, 7, 11]}
    # categorical columns are coded by value, not by pandas' category order
    X = cat_case.X.copy()
    X["color"] = X["color"].cat.reorder_categories(["teal", "red", "green", "blue"])
    np.testing.assert_array_equal(ens.predict_margin(X), ens.predict_margin(cat_case.X))
    assert not np.array_equal(
        X["color"].cat.codes.to_numpy(), cat_case.X["color"].cat.codes.to_numpy()
    )


def test_round_trip_categorical_metadata(cat_case, tmp_path):
    """Category values (strings and integers) survive save/load and keep coding pandas input."""
    ens = cat_case.ens
    path = tmp_path / "cat.npz"
    ens.save(path)
    loaded = treeinner.load(path)
    assert loaded.categories == ens.categories
    X = cat_case.X.copy()
    X["color"] = X["color"].cat.reorder_categories(["teal", "red", "green", "blue"])
    np.testing.assert_array_equal(loaded.predict_margin(X), ens.predict_margin(cat_case.X))


def test_saved_file_needs_no_pickle(reg_case, tmp_path):
    path = tmp_path / "model.npz"
    reg_case.ens.save(path)
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    assert "__meta__" in members
    assert set(ARRAY_FIELDS) <= set(members)
    for k, v in members.items():
        assert v.dtype != object, k
        assert not v.dtype.hasobject, k
    meta = json.loads(members.pop("__meta__").tobytes().decode())
    assert meta["format"] == "treeinner.TreeEnsemble"
    assert meta["format_version"] == 2
    assert meta["feature_names"] == list(reg_case.ens.feature_names)
    for name in ARRAY_FIELDS:
        np.testing.assert_array_equal(members[name], getattr(reg_case.ens, name))
        assert members[name].dtype == EXPECTED_DTYPES[name]


def test_save_appends_npz_suffix(reg_case, tmp_path):
    reg_case.ens.save(tmp_path / "model")
    assert (tmp_path / "model.npz").exists()
    _assert_same_ensemble(reg_case.ens, treeinner.load(tmp_path / "model.npz"))


def _load_both_formats(case, tmp_path):
    out = {}
    for ext in ("json", "ubj"):
        path = tmp_path / f"model.{ext}"
        case.booster.save_model(str(path))
        out[ext] = quiet(treeinner.load, path)
    return out


def test_load_xgboost_files_equals_from_model(named_case, tmp_path):
    loaded = _load_both_formats(named_case, tmp_path)
    for ens in loaded.values():
        for name in ARRAY_FIELDS:
            if name == "learning_rate":
                continue  # see test_learning_rate_same_from_booster_and_file
            a, b = getattr(ens, name), getattr(named_case.ens, name)
            assert a.tobytes() == b.tobytes(), name
        assert ens.feature_names == named_case.ens.feature_names
        assert ens.named and ens.objective == "binary:logistic"
        np.testing.assert_allclose(ens.learning_rate, named_case.ens.learning_rate, rtol=1e-6)
        np.testing.assert_array_equal(
            ens.predict_margin(named_case.X), named_case.ens.predict_margin(named_case.X)
        )


def test_json_and_ubj_give_identical_statistics(named_case, tmp_path):
    """The same model gives the same float32 node statistics whatever the file format."""
    loaded = _load_both_formats(named_case, tmp_path)
    for name in ("cover", "gain"):
        arr = getattr(loaded["json"], name)
        assert arr.tobytes() == getattr(loaded["ubj"], name).tobytes()
        # XGBoost keeps these statistics in float32
        np.testing.assert_array_equal(arr, arr.astype(np.float32).astype(np.float64))


def test_learning_rate_same_from_booster_and_file(named_case, tmp_path):
    loaded = _load_both_formats(named_case, tmp_path)
    np.testing.assert_array_equal(loaded["json"].learning_rate, named_case.ens.learning_rate)


# ---------------------------------------------------------------------- immutability
def test_arrays_are_read_only(cat_case):
    ens = cat_case.ens
    assert ens.cat_words.size > 0
    for name in ARRAY_FIELDS:
        arr = getattr(ens, name)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = arr[0]
    assert not ens._bound.flags.writeable
    with pytest.raises(dataclasses.FrozenInstanceError):
        ens.reg_lambda = 5.0


def test_construction_copies_writable_input(reg_case):
    ens = reg_case.ens
    left = np.array(ens.left)  # writable copy
    value = np.array(ens.value)
    e2 = ens.replace(left=left, value=value)
    assert not np.shares_memory(e2.left, left)
    left[0] = 10**6  # would be an out-of-range child had it been kept
    value[:] = np.nan
    assert e2.left[0] == ens.left[0]
    assert np.all(np.isfinite(e2.value))
    np.testing.assert_array_equal(e2.predict_margin(reg_case.X), ens.predict_margin(reg_case.X))


def test_read_only_view_of_writable_buffer_is_not_aliased(reg_case):
    ens = reg_case.ens
    buf = np.array(ens.left)
    view = buf.view()
    view.setflags(write=False)
    e2 = ens.replace(left=view)
    buf[0] = 10**6
    assert e2.left[0] == ens.left[0]


# ---------------------------------------------------------------------- replace
def test_replace_returns_validated_copy(reg_case):
    ens = reg_case.ens
    e2 = ens.replace(reg_lambda=3.0, objective="reg:pseudohubererror")
    assert e2 is not ens
    assert e2.reg_lambda == 3.0 and ens.reg_lambda != 3.0
    assert e2.objective == "reg:pseudohubererror"
    assert ens.objective == "reg:squarederror"
    for name in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(e2, name), getattr(ens, name))
    assert e2.max_depth == ens.max_depth


def test_replace_revalidates(reg_case):
    ens = reg_case.ens
    with pytest.raises(ValueError, match="reg_lambda"):
        ens.replace(reg_lambda=-1.0)
    left = np.array(ens.left)
    left[0] = ens.n_nodes + 3
    with pytest.raises(ValueError, match="Corrupt"):
        ens.replace(left=left)
    with pytest.raises(ValueError, match="decision_rule"):
        ens.replace(decision_rule="float16 <")
    # fewer feature names than the splits use
    with pytest.raises(ValueError, match="split feature"):
        ens.replace(feature_names=("f0",))
    with pytest.raises(TypeError):
        ens.replace(no_such_field=1)
    # the original is untouched by the failed attempts
    np.testing.assert_array_equal(ens.predict_margin(reg_case.X), _xgb_margin(reg_case))


def test_replace_structure_recomputes_max_depth():
    e1 = _stump_ensemble(n_trees=2)
    assert e1.max_depth == 1
    # two single-leaf trees
    e0 = e1.replace(
        tree_offsets=[0, 1, 2],
        left=[-1, -1],
        right=[-1, -1],
        feature=[-1, -1],
        threshold=[np.nan, np.nan],
        split_type=[0, 0],
        default_left=[0, 0],
        missing_type=[0, 0],
        value=[0.5, -0.25],
        cover=[1.0, 1.0],
        count=[np.nan, np.nan],
        gain=[0.0, 0.0],
        leaf_id=[0, 0],
        cat_offsets=[0, 0, 0],
    )
    assert e0.max_depth == 0
    assert e0.n_nodes == 2
    np.testing.assert_array_equal(e0.predict_margin(np.zeros((3, 2))), [0.5, 0.5, 0.5])


def _stump_ensemble(n_trees: int) -> TreeEnsemble:
    """n_trees stumps on feature 0 (threshold 0.5), leaf values +-(t + 1)."""
    left, right, feat, thr, val = [], [], [], [], []
    for t in range(n_trees):
        o = 3 * t
        left += [o + 1, -1, -1]
        right += [o + 2, -1, -1]
        feat += [0, -1, -1]
        thr += [0.5, np.nan, np.nan]
        val += [0.0, -(t + 1.0), t + 1.0]
    n = 3 * n_trees
    return TreeEnsemble(
        tree_offsets=np.arange(0, n + 1, 3),
        left=left,
        right=right,
        feature=feat,
        threshold=thr,
        split_type=np.zeros(n),
        default_left=np.ones(n),
        missing_type=np.zeros(n),
        value=val,
        cover=np.ones(n),
        count=np.full(n, np.nan),
        gain=np.zeros(n),
        leaf_id=np.tile([-1, 1, 2], n_trees),
        cat_offsets=np.zeros(n + 1),
        cat_words=np.zeros(0),
        tree_group=np.zeros(n_trees),
        tree_iteration=np.arange(n_trees),
        learning_rate=np.full(n_trees, 0.1),
        tree_weight=np.ones(n_trees),
        base_margin=[0.25],
        feature_names=("x", "y"),
        named=False,
    )


def test_hand_built_ensemble_routes_by_float32_rule():
    ens = _stump_ensemble(n_trees=2)
    f32_half = float(np.float32(0.5))
    below = np.nextafter(f32_half, -np.inf)
    # XGBoost's rule: left iff float32(x) < 0.5; a float64 just below 0.5 rounds up to 0.5
    X = np.array([[0.0, 0.0], [below, 0.0], [0.5, 0.0], [0.7, 0.0], [np.nan, 1.0]])
    got = ens.predict_margin(X)
    left_sum, right_sum = 0.25 - 1 - 2, 0.25 + 1 + 2
    np.testing.assert_array_equal(got, [left_sum, right_sum, right_sum, right_sum, left_sum])
    np.testing.assert_array_equal(ens.leaf_index(X), [[1, 1], [2, 2], [2, 2], [2, 2], [1, 1]])
    assert ens.n_trees == 2 and ens.n_nodes == 6 and ens.n_iterations == 2
    assert ens.n_outputs == 1 and ens.n_features == 2


# ---------------------------------------------------------------------- sizes
def _dump_stats(booster):
    """(n_trees, n_nodes, max_depth) from XGBoost's own JSON dump."""
    n_nodes = 0
    max_depth = 0

    def walk(node, depth):
        nonlocal n_nodes, max_depth
        n_nodes += 1
        max_depth = max(max_depth, depth)
        for child in node.get("children", []):
            walk(child, depth + 1)

    dump = booster.get_dump(dump_format="json")
    for tree in dump:
        walk(json.loads(tree), 0)
    return len(dump), n_nodes, max_depth


@pytest.mark.parametrize(
    "name, n_outputs, trees_per_round",
    [("reg_case", 1, 1), ("named_case", 1, 1), ("multi_case", 3, 6), ("cat_case", 1, 1)],
)
def test_sizes(name, n_outputs, trees_per_round, request):
    case = request.getfixturevalue(name)
    ens = case.ens
    n_trees, n_nodes, max_depth = _dump_stats(case.booster)
    assert ens.n_trees == n_trees == case.n_rounds * trees_per_round
    assert ens.n_nodes == n_nodes
    assert ens.max_depth == max_depth
    assert 1 <= ens.max_depth <= case.params["max_depth"]
    assert ens.n_outputs == n_outputs
    assert ens.n_iterations == case.n_rounds == case.booster.num_boosted_rounds()
    assert ens.n_features == case.booster.num_features()
    assert ens.tree_offsets.shape == (n_trees + 1,)
    assert ens.base_margin.shape == (n_outputs,)
    np.testing.assert_array_equal(
        ens.tree_iteration, np.repeat(np.arange(case.n_rounds), trees_per_round)
    )
    assert f"n_trees={n_trees}" in repr(ens)
    out = ens.predict_margin(case.X)
    assert out.shape == ((len(case.X),) if n_outputs == 1 else (len(case.X), n_outputs))
    assert ens.leaf_index(case.X).shape == (len(case.X), n_trees)


def test_multiclass_tree_groups(multi_case):
    ens = multi_case.ens
    # two parallel trees per class per round, classes in order
    np.testing.assert_array_equal(ens.tree_group, np.tile(np.repeat(np.arange(3), 2), 4))


# ---------------------------------------------------------------------- iteration_range
RANGES = [(0, 0), (0, 1), (0, 2), (1, 3), (2, 0), (3, 4), (1, 2), (0, 4)]


@pytest.mark.parametrize("name", CASES)
def test_iteration_range_matches_xgboost(name, request):
    case = request.getfixturevalue(name)
    for r in RANGES:
        if max(r) > case.n_rounds:
            continue
        got = case.ens.predict_margin(case.X, iteration_range=r)
        ref = _xgb_margin(case, iteration_range=r)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, ref, err_msg=f"iteration_range={r}")
    # the ranges really select different trees
    a = case.ens.predict_margin(case.X, iteration_range=(0, 1))
    b = case.ens.predict_margin(case.X, iteration_range=(1, 2))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(
        case.ens.predict_margin(case.X, iteration_range=(0, 0)), case.ens.predict_margin(case.X)
    )


def test_iteration_range_leaf_index(multi_case):
    ens = multi_case.ens
    full = multi_case.booster.predict(xgb.DMatrix(multi_case.X), pred_leaf=True)
    np.testing.assert_array_equal(ens.leaf_index(multi_case.X), full)
    # XGBoost only slices pred_leaf from iteration 0; 6 trees per round
    np.testing.assert_array_equal(
        ens.leaf_index(multi_case.X, iteration_range=(1, 3)), full[:, 6:18]
    )
    np.testing.assert_array_equal(
        ens.leaf_index(multi_case.X, iteration_range=(0, 2)),
        multi_case.booster.predict(
            xgb.DMatrix(multi_case.X), pred_leaf=True, iteration_range=(0, 2)
        ),
    )


@pytest.mark.parametrize("r", [(0, 7), (9, 0), (3, 1), (-1, 2), (2, 8)])
def test_iteration_range_out_of_bounds(reg_case, r):
    with pytest.raises(ValueError, match="iteration_range"):
        reg_case.ens.predict_margin(reg_case.X, iteration_range=r)
    with pytest.raises(ValueError, match="iteration_range"):
        reg_case.ens.leaf_index(reg_case.X, iteration_range=r)


@pytest.mark.parametrize("r", [(2, 2), (6, 0)])
def test_empty_iteration_range_like_xgboost(reg_case, r):
    ref = _xgb_margin(reg_case, iteration_range=r)
    np.testing.assert_array_equal(ref, np.full(len(reg_case.X), reg_case.ens.base_margin[0]))
    np.testing.assert_array_equal(reg_case.ens.predict_margin(reg_case.X, iteration_range=r), ref)


# ---------------------------------------------------------------------- from_model
def test_from_model_returns_same_object(reg_case):
    ens = reg_case.ens
    assert treeinner.from_model(ens) is ens
    assert treeinner.from_model(ens, learning_rate=None, reg_lambda=None) is ens


def test_from_model_overrides(reg_case):
    ens = reg_case.ens
    lr_before = np.array(ens.learning_rate)
    e2 = treeinner.from_model(ens, learning_rate=0.05, reg_lambda=7.5)
    assert e2 is not ens
    assert isinstance(e2, TreeEnsemble)
    np.testing.assert_array_equal(e2.learning_rate, np.full(ens.n_trees, 0.05))
    assert e2.reg_lambda == 7.5
    assert not e2.learning_rate.flags.writeable
    # the original is untouched and predictions do not change (values are already shrunk)
    np.testing.assert_array_equal(ens.learning_rate, lr_before)
    assert ens.reg_lambda != 7.5
    np.testing.assert_array_equal(e2.value, ens.value)
    np.testing.assert_array_equal(e2.predict_margin(reg_case.X), ens.predict_margin(reg_case.X))

    e3 = treeinner.from_model(ens, reg_lambda=0.0)
    assert e3.reg_lambda == 0.0
    np.testing.assert_array_equal(e3.learning_rate, ens.learning_rate)
    e4 = treeinner.from_model(ens, learning_rate=0.5)
    assert e4.reg_lambda == ens.reg_lambda
    np.testing.assert_array_equal(e4.learning_rate, np.full(ens.n_trees, 0.5))


def test_from_model_bad_overrides(reg_case):
    with pytest.raises(ValueError, match="learning_rate"):
        treeinner.from_model(reg_case.ens, learning_rate=0.0)
    with pytest.raises(ValueError, match="learning_rate"):
        treeinner.from_model(reg_case.ens, learning_rate=float("nan"))
    with pytest.raises(ValueError, match="reg_lambda"):
        treeinner.from_model(reg_case.ens, reg_lambda=-0.5)
    with pytest.raises(ValueError, match="reg_lambda"):
        treeinner.from_model(reg_case.ens, reg_lambda=float("inf"))


def test_from_booster_reads_training_parameters(reg_case):
    ens = reg_case.ens
    np.testing.assert_allclose(ens.learning_rate, 0.2, rtol=1e-6)
    assert ens.reg_lambda == pytest.approx(2.0, rel=1e-6)
    e2 = quiet_ensemble(reg_case.booster, learning_rate=0.01, reg_lambda=9.0)
    np.testing.assert_array_equal(e2.learning_rate, 0.01)
    assert e2.reg_lambda == 9.0
    np.testing.assert_array_equal(e2.value, ens.value)


def test_load_overrides(reg_case, tmp_path):
    reg_case.ens.save(tmp_path / "m.npz")
    loaded = treeinner.load(tmp_path / "m.npz", learning_rate=0.125, reg_lambda=4.0)
    np.testing.assert_array_equal(loaded.learning_rate, 0.125)
    assert loaded.reg_lambda == 4.0


# ---------------------------------------------------------------------- float32 threshold bounds
F32 = np.finfo(np.float32)


def _threshold_sample(n: int = 100_000) -> np.ndarray:
    rng = np.random.default_rng(12345)
    parts = []
    # random bit patterns (all exponents), finite only
    bits = rng.integers(0, 2**32, size=3 * n // 10, dtype=np.uint64).astype(np.uint32)
    parts.append(bits.view(np.float32))
    # subnormals of both signs
    sub = rng.integers(1, 2**23, size=n // 10, dtype=np.uint32)
    sub |= rng.integers(0, 2, size=sub.size, dtype=np.uint32) << np.uint32(31)
    parts.append(sub.view(np.float32))
    # powers of two and their float32 neighbours
    p2 = np.ldexp(np.float32(1.0), np.arange(-149, 128)).astype(np.float32)
    p2 = np.concatenate([p2, -p2])
    parts += [p2, np.nextafter(p2, np.float32(np.inf)), np.nextafter(p2, np.float32(-np.inf))]
    # the top of the float32 range (the last 2000 ulps), both signs
    top = (np.uint32(F32.max.view(np.uint32)) - np.arange(2000, dtype=np.uint32)).view(np.float32)
    parts += [top, -top]
    # special values
    parts.append(
        np.array(
            [
                0.0,
                -0.0,
                F32.smallest_subnormal,
                -F32.smallest_subnormal,
                F32.tiny,
                -F32.tiny,
                np.nextafter(F32.tiny, np.float32(0)),
                F32.max,
                -F32.max,
                1.0,
                -1.0,
                0.5,
                0.1,
            ],
            dtype=np.float32,
        )
    )
    # ordinary thresholds a booster would produce
    normal = rng.normal(scale=10.0, size=n // 10).astype(np.float32)
    parts += [normal, (rng.standard_cauchy(size=n // 10) * 1e3).astype(np.float32)]
    t = np.concatenate(parts).astype(np.float32)
    t = t[np.isfinite(t)]
    fill = rng.uniform(-1e6, 1e6, size=max(0, n - t.size)).astype(np.float32)
    t = np.concatenate([t, fill])
    assert t.size >= n
    return t


def _f32(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def test_threshold_sample_covers_edge_cases():
    t = _threshold_sample()
    assert t.dtype == np.float32 and t.size >= 100_000
    assert np.all(np.isfinite(t))
    assert np.any((t != 0) & (np.abs(t) < F32.tiny))  # subnormals
    assert np.any(np.signbit(t) & (t == 0)) and np.any(~np.signbit(t) & (t == 0))
    assert np.any(t == F32.max) and np.any(t == -F32.max)


_OVERFLOW_WARNING = "ignore:overflow encountered in nextafter:RuntimeWarning"


@pytest.mark.filterwarnings(_OVERFLOW_WARNING)
def test_float32_lt_bound():
    t = _threshold_sample()
    b = float32_lt_bound(t)
    assert b.dtype == np.float64 and b.shape == t.shape
    assert np.all(_f32(b) < t)
    assert not np.any(_f32(np.nextafter(b, np.inf)) < t)
    # and therefore x <= b iff float32(x) < t for any float64 x, e.g. around b and t
    rng = np.random.default_rng(7)
    t64 = t.astype(np.float64)
    for x in (b, np.nextafter(b, -np.inf), t64, np.nextafter(t64, -np.inf), rng.permutation(b)):
        np.testing.assert_array_equal(x <= b, _f32(x) < t)


@pytest.mark.filterwarnings(_OVERFLOW_WARNING)
def test_float32_le_bound():
    t = _threshold_sample()
    b = float32_le_bound(t)
    assert b.dtype == np.float64 and b.shape == t.shape
    assert np.all(_f32(b) <= t)
    assert not np.any(_f32(np.nextafter(b, np.inf)) <= t)
    rng = np.random.default_rng(8)
    t64 = t.astype(np.float64)
    for x in (b, np.nextafter(b, np.inf), t64, np.nextafter(t64, np.inf), rng.permutation(b)):
        np.testing.assert_array_equal(x <= b, _f32(x) <= t)


@pytest.mark.filterwarnings(_OVERFLOW_WARNING)
def test_float32_bounds_at_infinity():
    inf = np.float32(np.inf)
    # float32(x) <= +inf for every non-NaN x; float32(x) < +inf unless x rounds to +inf
    assert float32_le_bound(np.array([inf]))[0] == np.inf
    b = float32_lt_bound(np.array([inf]))[0]
    assert _f32(np.array([b]))[0] == F32.max
    assert _f32(np.array([np.nextafter(b, np.inf)]))[0] == np.inf
    # float32(x) <= -inf iff x rounds to -inf
    b = float32_le_bound(np.array([-inf]))[0]
    assert _f32(np.array([b]))[0] == -np.inf
    assert _f32(np.array([np.nextafter(b, np.inf)]))[0] == -F32.max


def test_float32_bounds_scalar_and_dtype_input():
    # float64 input is first rounded to float32 (the booster stores float32 thresholds)
    b32 = float32_lt_bound(np.array([0.1], dtype=np.float32))
    b64 = float32_lt_bound(np.array([0.1]))
    np.testing.assert_array_equal(b32, b64)
    assert float(np.asarray(float32_le_bound(np.float32(1.0)))) > 1.0
    assert float(np.asarray(float32_lt_bound(np.float32(1.0)))) < 1.0


# ------------------------------------------------------------------ input maps (issue 16)
class _ScaledInput:
    """A toy input map: the kernels read the columns of X multiplied by ``scale``; saved as
    the document ``{"scale": ...}``."""

    routes_off_path = True

    def __init__(self, scale: float, names: tuple[str, ...]) -> None:
        self.scale = scale
        self.output_names = self.column_names = names
        self.credit = np.eye(len(names))

    def transform(self, X):
        return np.asarray(X, dtype=np.float64) * self.scale

    def saved_state(self):
        return "test-scaled", {"scale": self.scale}


def test_input_map_saved_and_rebuilt_by_its_registered_kind(reg_case, tmp_path):
    """An ensemble with an input map is saved with its document (format version 3) and loaded
    through the rebuilder registered for its kind; without one, or for a map that cannot be
    saved, a clear error."""
    from treeinner import ensemble as E

    names = reg_case.ens.feature_names
    ens = reg_case.ens.replace(input_map=_ScaledInput(0.5, names))
    want = ens.predict_margin(reg_case.X)
    assert not np.array_equal(want, reg_case.ens.predict_margin(reg_case.X))
    path = tmp_path / "mapped.npz"
    ens.save(path)
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["__meta__"].tobytes().decode())
        doc = json.loads(z["input_map_document"].tobytes().decode())
    assert meta["format_version"] == 3 and meta["input_map"] == "test-scaled"
    assert doc == {"scale": 0.5}
    with pytest.raises(ValueError, match="no adapter has registered"):
        treeinner.load(path)
    seen = []

    def rebuild(document, loaded):
        seen.append(loaded.input_map)
        return _ScaledInput(document["scale"], loaded.feature_names)

    E.register_input_map("test-scaled", rebuild)
    try:
        back = treeinner.load(path)
    finally:
        del E._INPUT_MAP_LOADERS["test-scaled"]
    assert seen == [None]
    _assert_same_ensemble(reg_case.ens, back.replace(input_map=None))
    assert back.input_map.scale == 0.5
    np.testing.assert_array_equal(back.predict_margin(reg_case.X), want)

    class Unsaveable(_ScaledInput):
        saved_state = None

    with pytest.raises(ValueError, match="cannot be saved"):
        reg_case.ens.replace(input_map=Unsaveable(1.0, names)).save(tmp_path / "never.npz")


@pytest.mark.parametrize("loss", ["Logloss", "MultiClass"])
def test_categorical_catboost_saved_and_reloaded_predicts_identically(loss, tmp_path):
    """A CatBoost model with categorical (CTR and one-hot) splits routes rows through CatBoost:
    saved with its JSON export, reloaded (never unpickled) it routes and predicts identically,
    unseen categories included."""
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(7)
    n = 600

    def data(n):
        X = pd.DataFrame(
            {
                "a": rng.normal(size=n),
                "c1": rng.choice(["x", "y", "z"], n),
                "c2": rng.choice([f"k{i}" for i in range(8)], n),
                "b": rng.normal(size=n),
            }
        )
        s = X["a"] + (X["c1"] == "x") + X["c2"].isin(["k1", "k2", "k3"])
        y = (s + rng.normal(size=n) > 0.7).astype(int) + (loss == "MultiClass") * (X["b"] > 0)
        return X, y.to_numpy()

    X, y = data(n)
    Xv, _ = data(200)
    Xv.loc[:3, "c2"] = "never-seen"
    model = cb.CatBoostClassifier(
        loss_function=loss,
        iterations=12,
        depth=3,
        verbose=0,
        thread_count=1,
        random_seed=0,
        allow_writing_files=False,
        cat_features=["c1", "c2"],
        one_hot_max_size=3,
    ).fit(X, y)
    ens = quiet_ensemble(model)
    assert ens.input_map is not None
    # the repr names the table's features next to the kernels' columns (one per split here)
    assert ens.n_features > 4 and ", n_output_features=4, " in repr(ens)
    assert "n_output_features" not in repr(ens.replace(input_map=None))
    path = tmp_path / "cat.npz"
    ens.save(path)
    with np.load(path, allow_pickle=False) as z:
        assert all(not z[k].dtype.hasobject for k in z.files)
    back = quiet(treeinner.load, path)
    assert back.input_map is not None and back.output_names == ens.output_names
    raw = np.asarray(model.predict(Xv, prediction_type="RawFormulaVal"))
    margin = back.predict_margin(Xv)
    np.testing.assert_array_equal(margin, ens.predict_margin(Xv))
    np.testing.assert_allclose(np.squeeze(margin), raw, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(back.leaf_index(Xv), ens.leaf_index(Xv))
    np.testing.assert_array_equal(
        treeinner.tree_shap(back, Xv).values, treeinner.tree_shap(ens, Xv).values
    )
    # a file whose stored model does not describe its trees is refused
    other = cb.CatBoostClassifier(
        loss_function=loss,
        iterations=5,
        depth=2,
        verbose=0,
        thread_count=1,
        random_seed=1,
        allow_writing_files=False,
        cat_features=["c1", "c2"],
    ).fit(X, y)
    other_path = tmp_path / "other.npz"
    quiet_ensemble(other).save(other_path)
    bad = tmp_path / "bad.npz"
    with np.load(path, allow_pickle=False) as a, np.load(other_path, allow_pickle=False) as b:
        members = {k: a[k] for k in a.files}
        members["input_map_document"] = b["input_map_document"]
    np.savez_compressed(bad, **members)
    with pytest.raises(ValueError, match="does not describe"):
        quiet(treeinner.load, bad)
