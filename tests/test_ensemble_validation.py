"""Build-time validation of the common tree format (``TreeEnsemble``) and the typed ``.npz``
schema (issue 17).

Every check is exercised on an ensemble converted from a real small booster model (XGBoost,
LightGBM, CatBoost SymmetricTree) with one field corrupted through ``replace`` or by editing a
saved file; each must raise ``treeinner.ModelFormatError`` naming the field (and the tree and
node where there is one), and the untouched models must load.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile

import numpy as np
import pytest

import treeinner
from treeinner import ModelFormatError, TreeEnsemble
from treeinner.ensemble import _META_SCHEMA

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
cb = pytest.importorskip("catboost")


# ---------------------------------------------------------------------- models
def _data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n) * 0.3
    return X, y


@pytest.fixture(scope="module")
def xgb_ens() -> TreeEnsemble:
    X, y = _data()
    params = {"max_depth": 3, "tree_method": "hist", "nthread": 1, "base_score": 0.5}
    return treeinner.from_model(xgb.train(params, xgb.DMatrix(X, label=y), 4))


@pytest.fixture(scope="module")
def lgb_ens() -> TreeEnsemble:
    X, y = _data()
    params = {"num_leaves": 6, "min_data_in_leaf": 10, "verbose": -1, "num_threads": 1}
    return treeinner.from_model(lgb.train(params, lgb.Dataset(X, y), 4))


@pytest.fixture(scope="module")
def cb_ens() -> TreeEnsemble:
    X, y = _data()
    model = cb.CatBoostRegressor(
        iterations=4, depth=3, verbose=0, thread_count=1, random_seed=0, allow_writing_files=False
    ).fit(X, y)
    ens = treeinner.from_model(model)
    assert ens.reverse_levels and ens.max_depth == 3
    return ens


def _inner(ens: TreeEnsemble, tree: int) -> int:
    """The global index of the first inner node of ``tree`` that is not its root."""
    lo, hi = ens.tree_offsets[tree], ens.tree_offsets[tree + 1]
    return int(lo + 1 + np.flatnonzero(ens.left[lo + 1 : hi] >= 0)[0])


def _leaf(ens: TreeEnsemble, tree: int) -> int:
    lo, hi = ens.tree_offsets[tree], ens.tree_offsets[tree + 1]
    return int(lo + np.flatnonzero(ens.left[lo:hi] < 0)[0])


def _with(ens: TreeEnsemble, name: str, node: int, value: float) -> TreeEnsemble:
    """``ens`` with ``name[node] = value`` (validated again)."""
    arr = np.array(getattr(ens, name))
    arr[node] = value
    return ens.replace(**{name: arr})


def _refused(make, *words: str) -> str:
    """Assert ``make()`` raises ModelFormatError whose message holds every word; return it."""
    with pytest.raises(ModelFormatError) as info:
        make()
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)
    return msg


def _where(ens: TreeEnsemble, node: int) -> tuple[str, str]:
    """The "tree t" and "node i" (index within the tree) the error must name."""
    t = int(np.searchsorted(ens.tree_offsets, node, side="right") - 1)
    return f"tree {t} ", f"node {node - ens.tree_offsets[t]} "


def assert_same(a: TreeEnsemble, b: TreeEnsemble) -> None:
    """Every field equal (arrays bit for bit, NaN equal to NaN)."""
    for f in dataclasses.fields(TreeEnsemble):
        if f.name == "input_map":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f.name
        else:
            assert x == y and type(x) is type(y), f.name


# ---------------------------------------------------------------------- covers and counts
@pytest.mark.parametrize("value", [-2.0, -1e-300, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["inner", "leaf"])
def test_negative_or_infinite_cover_is_refused(xgb_ens, value, where):
    node = _inner(xgb_ens, 2) if where == "inner" else _leaf(xgb_ens, 2)
    _refused(lambda: _with(xgb_ens, "cover", node, value), "cover is", *_where(xgb_ens, node))


@pytest.mark.parametrize("value", [-1.0, np.inf])
def test_negative_count_is_refused(lgb_ens, value):
    node = _leaf(lgb_ens, 1)
    _refused(lambda: _with(lgb_ens, "count", node, value), "count is", *_where(lgb_ens, node))


def test_negative_catboost_leaf_weight_is_refused(cb_ens):
    node = _leaf(cb_ens, 3)
    _refused(lambda: _with(cb_ens, "count", node, -5.0), "count is -5.0", *_where(cb_ens, node))


@pytest.mark.parametrize("name", ["cover", "count"])
def test_zero_weight_at_a_split_with_weighted_children_is_refused(lgb_ens, name):
    for node in (_inner(lgb_ens, 0), int(lgb_ens.tree_offsets[3])):  # an inner node, a root
        msg = _refused(lambda n=node: _with(lgb_ens, name, n, 0.0), f"{name} is 0.0")
        assert all(w in msg for w in _where(lgb_ens, node)), msg
        assert "TreeSHAP" in msg


def test_zero_weight_leaf_and_empty_subtree_are_accepted(xgb_ens):
    """A leaf weighing 0 and a subtree weighing 0 throughout (CatBoost's oblivious trees have
    them) are valid; TreeSHAP never divides by their weights."""
    assert _with(xgb_ens, "cover", _leaf(xgb_ens, 1), 0.0).n_trees == xgb_ens.n_trees
    cover = np.array(xgb_ens.cover)
    lo, hi = xgb_ens.tree_offsets[1], xgb_ens.tree_offsets[2]
    L, R = xgb_ens.left, xgb_ens.right
    node = next(n for n in range(lo, hi) if L[n] >= 0 and L[L[n]] < 0 and L[R[n]] < 0)
    cover[[node, xgb_ens.left[node], xgb_ens.right[node]]] = 0.0
    shap = treeinner.tree_shap(xgb_ens.replace(cover=cover), _data(20)[0]).values
    assert np.all(np.isfinite(shap))


def test_partly_missing_weights_in_a_tree_are_refused(xgb_ens):
    node = _inner(xgb_ens, 1)
    _refused(lambda: _with(xgb_ens, "cover", node, np.nan), "cover is nan", *_where(xgb_ens, node))
    # NaN (not stored) for a whole tree, or every tree, is valid
    cover = np.array(xgb_ens.cover)
    cover[xgb_ens.tree_offsets[1] : xgb_ens.tree_offsets[2]] = np.nan
    assert np.isnan(xgb_ens.replace(cover=cover).cover).sum() == np.diff(xgb_ens.tree_offsets)[1]
    assert np.all(np.isnan(xgb_ens.count))  # XGBoost stores no counts


# ---------------------------------------------------------------------- gains, tree weights
def test_non_finite_gain_is_refused(xgb_ens):
    node = _inner(xgb_ens, 3)
    _refused(lambda: _with(xgb_ens, "gain", node, np.nan), "gain is nan", *_where(xgb_ens, node))
    _refused(lambda: _with(xgb_ens, "gain", node, np.inf), "gain is inf", *_where(xgb_ens, node))
    leaf = _leaf(xgb_ens, 3)
    _refused(lambda: _with(xgb_ens, "gain", leaf, -np.inf), "gain is -inf", *_where(xgb_ens, leaf))


def test_negative_gain_and_unstored_gains_are_accepted(xgb_ens, cb_ens):
    assert _with(xgb_ens, "gain", _inner(xgb_ens, 0), -3.5).gain[_inner(xgb_ens, 0)] == -3.5
    inner = cb_ens.left >= 0
    assert np.all(np.isnan(cb_ens.gain[inner]))  # CatBoost stores no split gains
    nan_gain = np.where(xgb_ens.left >= 0, np.nan, 0.0)
    assert np.all(np.isnan(xgb_ens.replace(gain=nan_gain).gain[xgb_ens.left >= 0]))


@pytest.mark.parametrize("value", [np.nan, np.inf, -0.5])
def test_bad_tree_weight_is_refused(xgb_ens, value):
    tw = np.ones(xgb_ens.n_trees)
    tw[2] = value
    _refused(lambda: xgb_ens.replace(tree_weight=tw), "tree 2", "tree_weight is")
    tw[2] = 0.0  # a DART tree dropped for good
    assert xgb_ens.replace(tree_weight=tw).tree_weight[2] == 0.0


# ---------------------------------------------------------------------- outputs
def test_base_margin_with_more_outputs_than_the_objective(xgb_ens):
    _refused(lambda: xgb_ens.replace(base_margin=[0.5, 0.5]), "base_margin", "2 outputs")
    # without a gradient the objective says nothing about the outputs
    ok = xgb_ens.replace(base_margin=[0.5, 0.5], grad_objective=-1, no_gradient="none here")
    assert ok.n_outputs == 2


def test_hand_built_ensemble_of_several_outputs_has_no_default_gradient(xgb_ens):
    """Without a grad_objective, an ensemble of several outputs gets none (the default,
    squared error, has one output); an output without trees is not refused."""
    fields = {f.name: getattr(xgb_ens, f.name) for f in dataclasses.fields(TreeEnsemble) if f.init}
    for k in ("grad_objective", "grad_params", "no_gradient", "objective", "input_map"):
        del fields[k]
    two = TreeEnsemble(**{**fields, "base_margin": [0.5, 0.0]})
    assert two.grad_objective == -1 and "2 outputs" in two.no_gradient
    np.testing.assert_array_equal(two.predict_margin(_data(5)[0])[:, 1], 0.0)
    assert TreeEnsemble(**fields).grad_objective == 0
    X, y = _data(40)
    with pytest.raises(NotImplementedError, match="2 outputs"):
        treeinner.tree_inner(two, X, y)


# ---------------------------------------------------------------------- symmetric trees
def test_catboost_symmetric_claim_holds(cb_ens):
    assert cb_ens.replace().reverse_levels


@pytest.mark.parametrize(
    ("name", "value"),
    [("threshold", 1e6), ("feature", None), ("default_left", None), ("missing_type", 2)],
)
def test_symmetric_claim_with_a_level_not_shared_is_refused(cb_ens, name, value):
    """The issue's example: levels sharing a feature and not a threshold."""
    o = int(cb_ens.tree_offsets[2])
    node = o + 5  # level 2 of tree 2 (heap positions 3..6)
    arr = np.array(getattr(cb_ens, name))
    if value is None:
        value = (arr[node] + 1) % (cb_ens.n_features if name == "feature" else 2)
    arr[node] = value
    msg = _refused(
        lambda: cb_ens.replace(**{name: arr}), "reverse_levels", "tree 2 level 2", f"has {name}"
    )
    assert "node 5 " in msg and "node 3 " in msg


def test_symmetric_claim_on_trees_that_are_not_oblivious_is_refused(xgb_ens, cb_ens):
    _refused(lambda: xgb_ens.replace(reverse_levels=True), "reverse_levels", "is oblivious")
    # one level of one tree with categorical splits: the same set passes, another one not
    o, n = int(cb_ens.tree_offsets[1]), cb_ens.n_nodes
    split_type = np.array(cb_ens.split_type)
    split_type[[o + 1, o + 2]] = 1
    for words, ok in (([1, 1], True), ([1, 2], False)):
        co = np.zeros(n + 1, dtype=np.int64)
        co[o + 2 :] = 1
        co[o + 3 :] = 2

        def make(co=co, words=words):
            return cb_ens.replace(split_type=split_type, cat_offsets=co, cat_words=words)

        if ok:
            assert make().split_type[o + 2] == 1
        else:
            _refused(make, "reverse_levels", "tree 1", "node 2 ", "categories")


def test_symmetric_claim_in_a_file_is_refused(cb_ens, tmp_path):
    path = tmp_path / "sym.npz"
    cb_ens.save(path)
    members = _members(path)
    thr = members["threshold"].copy()
    thr[int(cb_ens.tree_offsets[1]) + 2] += 0.25  # level 1 of tree 1: same feature, other border
    members["threshold"] = thr
    _refused(lambda: _load(_write(tmp_path, members)), "edited.npz", "tree 1 level 1", "threshold")


# ---------------------------------------------------------------------- categories, metadata
def test_categories_are_checked(xgb_ens):
    assert xgb_ens.replace(categories={1: ["a", "b", 3]}).categories == {1: ["a", "b", 3]}
    assert xgb_ens.replace(categories={"2": np.array([4, 5])}).categories == {2: [4, 5]}
    for cats, word in [
        ({1: ["a", "b", "a"]}, "'a' twice"),
        ({1: [1, 2, 1.0]}, "twice"),
        ({1: "abc"}, "must be a list"),
        ({1: [None]}, "hold None"),
        ({1: [float("nan")]}, "hold nan"),
        ({1: [{"x": 1}]}, "hold {'x': 1}"),
        ({1: [["a"], "b"]}, "hold ['a']"),
        ({1: np.zeros((2, 2))}, "must be a list"),
        ({7: ["a"]}, "feature 7"),
        ({"x": ["a"]}, "feature 'x'"),
        ([1, 2], "categories must be a dict"),
    ]:
        _refused(lambda c=cats: xgb_ens.replace(categories=c), "categories", word)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("float32_sum", "no"),
        ("named", 1),
        ("reverse_levels", "yes"),
        ("l2_scaled_by_mean_weight", None),
        ("objective", 3),
        ("source", None),
        ("decision_rule", b"float32 <"),
        ("no_gradient", 0),
        ("objective_params", [("num_class", 3)]),
        ("params", {1: 2}),
        ("reg_lambda", "1"),
        ("reg_lambda", True),
        ("feature_names", "abcd"),
        ("feature_names", ["a", None, "c", "d"]),
        ("inexact", "approximate"),
        ("inexact", [3]),
    ],
)
def test_metadata_of_the_wrong_type_is_refused(xgb_ens, name, value):
    _refused(lambda: xgb_ens.replace(**{name: value}), name)


def test_numpy_booleans_and_numbers_are_accepted(xgb_ens):
    e = xgb_ens.replace(float32_sum=np.bool_(True), reg_lambda=np.float32(2.0), named=False)
    assert e.float32_sum is True and e.reg_lambda == 2.0 and e.named is False


# ---------------------------------------------------------------------- .npz files
def _members(path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _write(tmp_path, members: dict, meta: dict | None = None):
    members = dict(members)
    if meta is not None:
        members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    out = tmp_path / "edited.npz"
    np.savez(out, **members)
    return out


def _load(path) -> TreeEnsemble:
    return TreeEnsemble.load_npz(path)


def _meta(members: dict) -> dict:
    return json.loads(members["__meta__"].tobytes().decode())


@pytest.fixture(scope="module")
def saved(xgb_ens, tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "xgb.npz"
    xgb_ens.replace(categories={2: ["lo", "hi", 7]}, inexact=("why not",)).save(path)
    return path


def test_issue_examples_in_a_file(xgb_ens, saved, tmp_path):
    members = _members(saved)
    meta = _meta(members)
    node = _inner(xgb_ens, 1)
    t, i = _where(xgb_ens, node)
    for name, value in (("gain", np.nan), ("cover", -1.0), ("cover", 0.0)):
        arr = members[name].copy()
        arr[node] = value
        path = _write(tmp_path, {**members, name: arr})
        _refused(lambda p=path: _load(p), "edited.npz", name, t, i)
    tw = members["tree_weight"].copy()
    tw[3] = np.nan
    _refused(
        lambda: _load(_write(tmp_path, {**members, "tree_weight": tw})), "tree 3", "tree_weight"
    )
    more = {**members, "base_margin": np.array([0.5, 0.5, 0.5])}
    _refused(lambda: _load(_write(tmp_path, more)), "base_margin has 3 outputs")
    no = {**meta, "float32_sum": "no"}
    _refused(lambda: _load(_write(tmp_path, members, no)), "float32_sum must be True or False")
    assert treeinner.load(_write(tmp_path, members, meta)).float32_sum is True


def _candidates(original) -> dict:
    """One value of every JSON type; the field's own type gets the original value."""
    kind = {bool: "bool", int: "number", float: "number", str: "string", list: "list"}
    own = kind.get(type(original), "dict")
    out = {"None": None, "bool": True, "string": "no", "number": 1.5, "list": ["no"],
           "dict": {"no": 1}}  # fmt: skip
    out[own] = original
    return out


def test_every_metadata_field_is_typed(saved, tmp_path):
    """Every metadata field set to each JSON type (and removed): the original type loads an
    equal ensemble, every other value is a ModelFormatError naming the field."""
    members = _members(saved)
    meta = _meta(members)
    original = _load(saved)
    assert set(meta) == set(_META_SCHEMA) - {"input_map"}
    n_refused = 0
    for name, value in meta.items():
        for kind, candidate in [("missing", None), *_candidates(value).items()]:
            edited = {k: v for k, v in meta.items() if k != name}
            if kind != "missing":
                edited[name] = candidate
            path = _write(tmp_path, members, edited)
            if kind != "missing" and candidate is value:
                assert_same(_load(path), original)
                continue
            msg = _refused(lambda p=path: _load(p))
            assert name in msg, (name, kind, msg)
            n_refused += 1
    assert n_refused == 6 * len(meta)
    for extra in ({"input_map": "x"}, {"new_field": 1}):
        key = next(iter(extra))
        _refused(lambda e=extra: _load(_write(tmp_path, members, {**meta, **e})), key)


def test_input_map_field_typed_in_version_3(saved, tmp_path):
    members = _members(saved)
    meta = {**_meta(members), "format_version": 3}
    doc = np.frombuffer(b"{}", dtype=np.uint8)
    for kind, words in [(None, "lacks ['input_map']"), (3, "input_map must be a string")]:
        m = {**meta} if kind is None else {**meta, "input_map": kind}
        _refused(
            lambda m=m: _load(_write(tmp_path, {**members, "input_map_document": doc}, m)), words
        )
    good = {**meta, "input_map": "never-registered"}
    _refused(lambda: _load(_write(tmp_path, members, good)), "lacks ['input_map_document']")
    bad_doc = {**members, "input_map_document": np.zeros((2, 2), dtype=np.uint8)}
    _refused(lambda: _load(_write(tmp_path, bad_doc, good)), "input_map_document must be 1-D")
    text = {**members, "input_map_document": np.array(["{}"])}
    _refused(lambda: _load(_write(tmp_path, text, good)), "input_map_document", "bytes")
    ok = {**members, "input_map_document": doc}
    _refused(lambda: _load(_write(tmp_path, ok, good)), "no adapter has registered")


@pytest.mark.parametrize("name", ["left", "feature", "threshold", "tree_group", "grad_params"])
def test_arrays_of_the_wrong_kind_are_refused(saved, tmp_path, name):
    members = _members(saved)
    arr = members[name]
    for bad, words in [
        (arr.astype(str), "must hold numbers"),
        (arr[:, None], "must be 1-D"),
        (arr.astype(np.complex128), "must hold numbers"),
    ]:
        _refused(lambda b=bad: _load(_write(tmp_path, {**members, name: b})), name, *words.split())
    if arr.dtype.kind in "iu":
        frac = arr.astype(np.float64) + 0.5
        _refused(lambda: _load(_write(tmp_path, {**members, name: frac})), name, "integers")
        whole = arr.astype(np.float64)  # integers stored as floats are read as integers
        assert_same(_load(_write(tmp_path, {**members, name: whole})), _load(saved))
    rest = {k: v for k, v in members.items() if k != name}
    _refused(lambda: _load(_write(tmp_path, rest)), f"lacks ['{name}']")


def test_unknown_and_misplaced_arrays_are_refused(saved, tmp_path):
    members = _members(saved)
    _refused(lambda: _load(_write(tmp_path, {**members, "extra": np.zeros(2)})), "'extra'")
    linear = {**members, "linear_tree": np.zeros(0, dtype=np.int64)}
    _refused(lambda: _load(_write(tmp_path, linear)), "linear_tree")
    meta = {**_meta(members), "linear_leaves": True}
    _refused(lambda: _load(_write(tmp_path, members, meta)), "lacks the linear leaves")


@pytest.mark.parametrize(
    "blob",
    [b"[1, 2]", b"3", b"null", b'"treeinner.TreeEnsemble"', b"[" * 100_000, b"\xff\xfe"],
)
def test_metadata_that_is_not_an_object_is_refused(saved, tmp_path, blob):
    members = {**_members(saved), "__meta__": np.frombuffer(blob, dtype=np.uint8)}
    _refused(lambda: _load(_write(tmp_path, members)), "edited.npz")


def test_members_that_are_not_arrays_are_refused(saved, tmp_path):
    """A zip member without the .npy format (np.load gives its raw bytes) and a bare .npy."""
    members = _members(saved)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, v in members.items():
            if k == "__meta__":
                zf.writestr("__meta__", v.tobytes())  # raw bytes, no .npy header
            else:
                arr = io.BytesIO()
                np.save(arr, v)
                zf.writestr(f"{k}.npy", arr.getvalue())
    path = tmp_path / "raw.npz"
    path.write_bytes(buf.getvalue())
    _refused(lambda: _load(path), "'__meta__' is not a NumPy array")
    npy = tmp_path / "bare.npy"
    np.save(npy, np.arange(3))
    _refused(lambda: _load(npy), "not an .npz archive")


def test_error_names_the_file_and_field_once(saved, tmp_path):
    members = _members(saved)
    left = members["left"].copy()
    left[0] = 10**6
    msg = _refused(lambda: treeinner.load(_write(tmp_path, {**members, "left": left})), "Corrupt")
    assert len(re.findall("edited.npz", msg)) == 1


# ---------------------------------------------------------------------- found by the fuzzer
def test_weights_bounded_and_below_the_parent(xgb_ens, lgb_ens):
    """A node outweighing its parent (a byte flip made one XGBoost sum_hessian 1.2e37: TreeSHAP
    then missed the margin by 3e18) or beyond any training statistic is refused by node."""
    for ens, name in ((xgb_ens, "cover"), (lgb_ens, "count")):
        node, root = _inner(ens, 1), int(ens.tree_offsets[1])
        _refused(lambda e=ens, n=name, k=node: _with(e, n, k, 1e37), name, *_where(ens, node))
        _refused(lambda e=ens, n=name, k=root: _with(e, n, k, 1e201), name, "at most 1e+200")


def test_leaf_values_and_numbers(xgb_ens, lgb_ens):
    """Leaf values beyond float32's range (a flipped .cbm gave 1.7e259, whose attributions
    cancel to noise) and leaf numbers below 0 or shared in a tree (linear leaves and leaf
    indices are looked up by them) are refused by node."""
    leaf = _leaf(xgb_ens, 2)
    _refused(lambda: _with(xgb_ens, "value", leaf, 1.7e259), "value", *_where(xgb_ens, leaf))
    _refused(lambda: _with(lgb_ens, "leaf_id", _leaf(lgb_ens, 1), -1), "leaf_id", "is >= 0")
    lo, hi = lgb_ens.tree_offsets[1], lgb_ens.tree_offsets[2]
    a, b = lo + np.flatnonzero(lgb_ens.left[lo:hi] < 0)[:2]
    twice = lambda: _with(lgb_ens, "leaf_id", int(b), int(lgb_ens.leaf_id[a]))  # noqa: E731
    _refused(twice, "leaf_id", "share this number")
    _refused(lambda: xgb_ens.replace(base_margin=[1e300]), "base_margin")


def test_default_left_is_a_direction(xgb_ens):
    node = _inner(xgb_ens, 0)
    _refused(lambda: _with(xgb_ens, "default_left", node, 255), "default_left", "0 (right)")


def test_every_class_has_trees():
    """A multiclass ensemble with a base margin for a class no tree adds to (an .npz with 4
    base margins for a 3-class model) is refused."""
    X, _ = _data()
    y = np.arange(X.shape[0]) % 3
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 2, "nthread": 1}
    ens = treeinner.from_model(xgb.train(params, xgb.DMatrix(X, label=y), 2))
    _refused(lambda: ens.replace(base_margin=np.zeros(4)), "4 outputs", "only 3")


def test_unreadable_zip_members_refused(xgb_ens, tmp_path):
    """An .npz whose member names an unknown compression method (zipfile raises
    NotImplementedError) is a ModelFormatError."""
    path = tmp_path / "m.npz"
    xgb_ens.save(path)
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x03\x04")
    raw[at + 8 : at + 10] = (99).to_bytes(2, "little")  # compression method 99
    cd = raw.find(b"PK\x01\x02")
    while cd >= 0:
        raw[cd + 10 : cd + 12] = (99).to_bytes(2, "little")
        cd = raw.find(b"PK\x01\x02", cd + 4)
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="not a readable .npz"):
        TreeEnsemble.load_npz(path)
