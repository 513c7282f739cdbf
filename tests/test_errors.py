"""Bad input gets a clear Python exception: wrong data, corrupt or foreign model files,
unsupported models, and hand-corrupted ensembles. Nothing may crash or hang."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import TreeEnsemble

xgb = pytest.importorskip("xgboost")


def _quiet(fn, *args, **kwargs):
    """Call fn with treeinner's informational UserWarnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = X[:, 0] + X[:, 1] * (X[:, 2] > 0) + rng.normal(scale=0.1, size=200)
    return X, y


@pytest.fixture(scope="module")
def booster(data):
    X, y = data
    return xgb.train(
        {"max_depth": 3, "seed": 0, "nthread": 1}, xgb.DMatrix(X, label=y), num_boost_round=3
    )


@pytest.fixture(scope="module")
def ens(booster):
    """A valid 3-tree, depth-3 ensemble on 4 unnamed features."""
    e = _quiet(treeinner.from_model, booster)
    assert e.max_depth == 3 and e.n_trees == 3 and not e.named
    return e


@pytest.fixture(scope="module")
def named_ens(data):
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    b = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(df, label=y), num_boost_round=2)
    e = _quiet(treeinner.from_model, b)
    assert e.named and e.feature_names == ("a", "b", "c", "d")
    return e, df


@pytest.fixture(scope="module")
def model_files(booster, tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    booster.save_model(str(d / "model.json"))
    booster.save_model(str(d / "model.ubj"))
    return d


# ---------------------------------------------------------------------- input data
def test_valid_inputs_control(ens, data, named_ens):
    """Control: the inputs the error tests distort are accepted when well-formed."""
    X, _ = data
    ref = ens.predict_margin(X)
    assert ref.shape == (200,) and np.all(np.isfinite(ref))
    np.testing.assert_array_equal(ens.predict_margin(pd.DataFrame(X)), ref)
    np.testing.assert_array_equal(
        ens.predict_margin(X.astype(np.float32)),
        ens.predict_margin(X.astype(np.float32).astype(np.float64)),
    )
    e, df = named_ens
    np.testing.assert_array_equal(e.predict_margin(df[["d", "c", "b", "a"]]), e.predict_margin(df))


@pytest.mark.parametrize("width", [0, 3, 5])
def test_wrong_number_of_features_numpy(ens, width):
    X = np.zeros((5, width))
    msg = f"X has {width} features, but the model was trained with 4 features"
    with pytest.raises(ValueError, match=msg):
        ens.predict_margin(X)
    with pytest.raises(ValueError, match=msg):
        ens.leaf_index(X)


@pytest.mark.parametrize("width", [3, 5])
def test_wrong_number_of_features_dataframe(ens, width):
    df = pd.DataFrame(np.zeros((5, width)))
    with pytest.raises(ValueError, match=f"X has {width} features.*trained with 4 features"):
        ens.predict_margin(df)


def test_wrong_number_of_features_sparse(ens):
    sp = pytest.importorskip("scipy.sparse")
    with pytest.raises(ValueError, match="X has 5 features"):
        ens.predict_margin(sp.random(10, 5, density=0.3, format="csr", random_state=0))


def test_dataframe_wrong_column_names(named_ens):
    e, df = named_ens
    bad = df.rename(columns={"b": "B"})
    with pytest.raises(
        ValueError, match=r"do not match.*Missing: \['b'\].*Not in the model: \['B'\]"
    ):
        e.predict_margin(bad)


def test_dataframe_missing_column(named_ens):
    e, df = named_ens
    with pytest.raises(ValueError, match=r"Missing: \['c'\]") as info:
        e.predict_margin(df.drop(columns="c"))
    assert "Not in the model" not in str(info.value)


def test_dataframe_extra_column(named_ens):
    e, df = named_ens
    with pytest.raises(ValueError, match=r"Not in the model: \['e'\]") as info:
        e.predict_margin(df.assign(e=1.0))
    assert "Missing" not in str(info.value)


def test_dataframe_duplicate_column(named_ens):
    e, df = named_ens
    dup = pd.concat([df, df[["a"]]], axis=1)
    with pytest.raises(ValueError, match="duplicate column"):
        e.predict_margin(dup)


@pytest.mark.parametrize("X", [np.zeros(4), np.zeros((2, 2, 4))], ids=["1d", "3d"])
def test_not_2d_array(ens, X):
    with pytest.raises(ValueError, match="X must be 2-D"):
        ens.predict_margin(X)
    with pytest.raises(ValueError, match="X must be 2-D"):
        ens.leaf_index(X)


@pytest.mark.parametrize(
    "X", [[1.0, 2.0, 3.0, 4.0], np.array(1.5), 2.0], ids=["1d-list", "0d-array", "scalar"]
)
def test_not_2d_other_inputs(ens, X):
    with pytest.raises(ValueError, match="X must be 2-D"):
        ens.predict_margin(X)


def test_list_of_rows_is_array_like(ens, data):
    X, _ = data
    np.testing.assert_array_equal(ens.predict_margin(X[:3].tolist()), ens.predict_margin(X[:3]))


def test_pandas_series(ens, named_ens):
    with pytest.raises(ValueError, match="got a pandas Series"):
        ens.predict_margin(pd.Series([1.0, 2.0, 3.0, 4.0]))
    e, df = named_ens
    with pytest.raises(ValueError, match="got a pandas Series"):
        e.predict_margin(df.iloc[0])


@pytest.mark.parametrize(
    "column",
    [
        pd.Series(["x", "y"] * 5, dtype=object),
        pd.Series(["x", "y"] * 5, dtype="string"),
        pd.Series([1.0, 2.0] * 5, dtype=object),  # numbers in an object column
        pd.Series(pd.date_range("2020-01-01", periods=10)),
    ],
    ids=["object-str", "string", "object-float", "datetime"],
)
def test_non_numeric_dataframe_column(named_ens, column):
    e, df = named_ens
    used = e.feature_names[int(e.feature[e.left >= 0][0])]  # a column some split reads
    bad = df.iloc[:10].copy()
    bad[used] = column.to_numpy() if column.dtype != "string" else column.array
    with pytest.raises(TypeError, match=rf"Columns must be numeric.*'{used}'"):
        e.predict_margin(bad)


@pytest.mark.parametrize(
    "X",
    [
        np.zeros((3, 4), dtype=object),
        np.array([["1", "2", "3", "4"]]),
        np.zeros((3, 4), dtype=complex),
    ],
    ids=["object", "unicode", "complex"],
)
def test_non_numeric_numpy(ens, X):
    with pytest.raises(TypeError, match="X must be numeric"):
        ens.predict_margin(X)


# ---------------------------------------------------------------------- model files
def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        treeinner.load(tmp_path / "nope.json")


def test_random_bytes(tmp_path):
    p = tmp_path / "model.bin"
    rng = np.random.default_rng(0)
    raw = rng.bytes(4096)
    while raw[:1] in (b"{", b"\x80", b"P", b"t", b"C", b"b", b" ", b"\n", b"\t", b"\r"):
        raw = rng.bytes(4096)
    p.write_bytes(raw)
    with pytest.raises(ValueError, match="not a model file treeinner can read"):
        treeinner.load(p)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="not a model file"):
        treeinner.load(p)


@pytest.mark.parametrize(
    "text",
    ['{"learner": garbage ]]', '{"learner": {"version": [3, 2', '{"a": "\xff\xfe'],
    ids=["garbage", "unterminated", "bad-utf8"],
)
def test_json_with_garbage(tmp_path, text):
    p = tmp_path / "model.json"
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(ValueError, match="not valid JSON"):
        treeinner.load(p)


def test_ubjson_with_garbage(tmp_path):
    p = tmp_path / "model.ubj"
    p.write_bytes(b"{i\x07learner\x99\x98\x97")
    with pytest.raises(ValueError, match="not valid UBJSON"):
        treeinner.load(p)


@pytest.mark.parametrize("ext", ["json", "ubj"])
@pytest.mark.parametrize("fraction", [0.5, 0.1, 0.99])
def test_truncated_model_file(model_files, tmp_path, ext, fraction):
    raw = (model_files / f"model.{ext}").read_bytes()
    p = tmp_path / f"cut.{ext}"
    p.write_bytes(raw[: int(len(raw) * fraction)])
    kind = "JSON" if ext == "json" else "UBJSON"
    with pytest.raises(ValueError, match=rf"not valid {kind} \(truncated or corrupt\?\)"):
        treeinner.load(p)


def test_untruncated_model_files_load(model_files, ens):
    """Control for the truncation tests."""
    for ext in ("json", "ubj"):
        loaded = _quiet(treeinner.load, model_files / f"model.{ext}")
        np.testing.assert_array_equal(loaded.left, ens.left)


class _Marker:
    """Unpickling this creates the file at ``path``."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_marker_pickle_works(tmp_path):
    """Control: unpickling the payload really would create the marker file."""
    marker = tmp_path / "control_marker"
    pickle.loads(pickle.dumps({"model": _Marker(str(marker))}))["model"].close()
    assert marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_refused_without_unpickling(tmp_path, protocol):
    marker = tmp_path / "unpickled_marker"
    p = tmp_path / "model.pkl"
    p.write_bytes(pickle.dumps({"model": _Marker(str(marker)), "n": 1}, protocol=protocol))
    match = "is a Python pickle; treeinner never unpickles" if protocol >= 2 else "not a model"
    with pytest.raises(ValueError, match=match):
        treeinner.load(p)
    assert not marker.exists()


def test_plain_dict_pickle_refused(tmp_path):
    p = tmp_path / "model.pkl"
    p.write_bytes(pickle.dumps({"learner": {}, "version": [3, 2, 0]}))
    with pytest.raises(ValueError, match="pickle"):
        treeinner.load(p)


@pytest.mark.parametrize(
    "doc",
    [
        {"a": [1, 2, 3]},
        {},
        {"learner": {}},  # no "version"
        {"version": [3, 2, 0], "learner": "gbtree"},
    ],
    ids=["dict", "empty", "no-version", "learner-not-dict"],
)
def test_json_that_is_not_a_model(tmp_path, doc):
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="JSON but not a model"):
        treeinner.load(p)


@pytest.mark.parametrize("text", ["[1, 2, 3]", '"model"', "3.5", "null"])
def test_json_scalar_or_list_is_not_a_model(tmp_path, text):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(ValueError, match="not a model"):
        treeinner.load(p)


def test_deeply_nested_json(tmp_path):
    p = tmp_path / "deep.json"
    p.write_bytes(b'{"learner": ' + b"[" * 100_000 + b"]" * 100_000 + b', "version": [1]}')
    with pytest.raises(ValueError, match="JSON"):
        treeinner.load(p)


def test_deeply_nested_ubjson(tmp_path):
    p = tmp_path / "deep.ubj"
    p.write_bytes(b"{i\x01a" + b"[" * 1000 + b"]" * 1000 + b"}")
    with pytest.raises(ValueError, match="nested too deeply"):
        treeinner.load(p)


def _run_isolated(code: str, timeout: float, cwd: Path) -> subprocess.CompletedProcess:
    """Run python code in a child with a memory cap, so a hang or crash fails only the test."""

    def limit():  # pragma: no cover - runs in the child
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        preexec_fn=limit if sys.platform.startswith("linux") else None,
    )


def test_ubjson_huge_count_of_empty_values_does_not_hang(tmp_path):
    p = tmp_path / "bomb.ubj"
    p.write_bytes(b"{i\x01a[$Z#L" + struct.pack(">q", 10**12) + b"}")
    # refused from the count, not by reading 10**12 values: the subprocess timeout stops a
    # hang (reading them would take hours)
    code = textwrap.dedent(
        f"""
        import treeinner
        try:
            treeinner.load({str(p)!r})
        except ValueError as e:
            print("ValueError:", e)
        """
    )
    r = _run_isolated(code, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ValueError" in r.stdout


# ---------------------------------------------------------------------- unsupported models
def test_zero_rounds(data, tmp_path):
    X, y = data
    b = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, label=y), num_boost_round=0)
    assert b.num_boosted_rounds() == 0
    for ext in ("json", "ubj"):
        b.save_model(str(tmp_path / f"empty.{ext}"))
        with pytest.raises(ValueError, match="no trees"):
            treeinner.load(tmp_path / f"empty.{ext}")
    with pytest.raises(ValueError, match="no trees"):
        treeinner.from_model(b)


def test_gblinear(data, tmp_path):
    X, y = data
    b = xgb.train({"booster": "gblinear", "nthread": 1}, xgb.DMatrix(X, label=y), num_boost_round=2)
    for ext in ("json", "ubj"):
        b.save_model(str(tmp_path / f"lin.{ext}"))
        with pytest.raises(NotImplementedError, match="gblinear"):
            treeinner.load(tmp_path / f"lin.{ext}")
    with pytest.raises(NotImplementedError, match="gblinear"):
        treeinner.from_model(b)
    reg = xgb.XGBRegressor(booster="gblinear", n_estimators=2, n_jobs=1).fit(X, y)
    with pytest.raises(NotImplementedError, match="gblinear"):
        treeinner.from_model(reg)


def test_multi_output_tree(data, tmp_path):
    X, y = data
    params = {
        "tree_method": "hist",
        "multi_strategy": "multi_output_tree",
        "max_depth": 2,
        "nthread": 1,
    }
    b = xgb.train(params, xgb.DMatrix(X, label=np.c_[y, -y]), num_boost_round=2)
    for ext in ("json", "ubj"):
        b.save_model(str(tmp_path / f"mo.{ext}"))
        with pytest.raises(NotImplementedError, match="multi_output_tree"):
            treeinner.load(tmp_path / f"mo.{ext}")
    with pytest.raises(NotImplementedError, match="multi_output_tree"):
        treeinner.from_model(b)


def test_multi_target_one_output_per_tree_is_supported(data):
    """Control for the multi_output_tree test: the default strategy converts."""
    X, y = data
    b = xgb.train(
        {"tree_method": "hist", "max_depth": 2, "nthread": 1},
        xgb.DMatrix(X, label=np.c_[y, -y]),
        2,
    )
    e = _quiet(treeinner.from_model, b)
    assert e.n_outputs == 2
    np.testing.assert_array_equal(e.predict_margin(X), b.inplace_predict(X, predict_type="margin"))


@pytest.mark.parametrize("cls", [xgb.XGBRegressor, xgb.XGBClassifier, xgb.XGBRanker])
def test_unfitted_sklearn_wrapper(cls):
    with pytest.raises(ValueError, match=rf"The {cls.__name__} is not fitted"):
        treeinner.from_model(cls(n_estimators=3))


def test_untrained_raw_booster():
    with pytest.raises(ValueError, match="(?i)not (fitted|trained)|no trees") as info:
        treeinner.from_model(xgb.Booster())
    assert "Stack trace" not in str(info.value)


def _unsupported_objects():
    objs = [{"learner": {}}, [1, 2], "model.json", None, 3.0, np.zeros(3)]
    ids = ["dict", "list", "str", "None", "float", "ndarray"]
    try:
        from sklearn.linear_model import LinearRegression

        objs.append(LinearRegression().fit(np.eye(3), np.arange(3.0)))
        ids.append("LinearRegression")
    except ImportError:  # pragma: no cover
        pass
    return pytest.mark.parametrize("obj", objs, ids=ids)


@_unsupported_objects()
def test_unsupported_object_type(obj):
    with pytest.raises(TypeError, match=rf"Cannot explain a .*{type(obj).__name__}"):
        treeinner.from_model(obj)


def test_xgboost_object_that_is_not_a_model():
    with pytest.raises(TypeError, match="not an XGBoost booster"):
        treeinner.from_model(xgb.DMatrix(np.zeros((2, 2))))


# ---------------------------------------------------------------------- corrupt XGBoost documents
def _trees(doc):
    return doc["learner"]["gradient_booster"]["model"]["trees"]


def _set(key, idx, val):
    def f(doc):
        _trees(doc)[0][key][idx] = val

    return f


def _mp(key, val):
    def f(doc):
        doc["learner"]["learner_model_param"][key] = val

    return f


CORRUPT_DOCS = {
    "child-out-of-range": (_set("left_children", 0, 999), "child index 999 outside the tree"),
    "child-negative": (_set("right_children", 0, -5), "outside the tree"),
    "cycle": (_set("left_children", 1, 0), "cycle"),
    "feature-too-large": (_set("split_indices", 0, 99), "split uses feature 99"),
    "feature-negative": (_set("split_indices", 0, -3), "split feature"),
    "nan-threshold": (_set("split_conditions", 0, float("nan")), "non-finite threshold"),
    "inf-threshold": (_set("split_conditions", 0, float("-inf")), "non-finite threshold"),
    "missing-field": (lambda d: _trees(d)[0].pop("split_conditions"), "lacks 'split_conditions'"),
    "wrong-length": (lambda d: _trees(d)[0]["sum_hessian"].pop(), "'sum_hessian' has the wrong"),
    "text-field": (
        lambda d: _trees(d)[0].__setitem__("default_left", ["x"] * 15),
        "'default_left' is not numeric",
    ),
    "tree-not-dict": (lambda d: _trees(d).__setitem__(1, "tree"), "Corrupt XGBoost model"),
    "no-model": (lambda d: d["learner"]["gradient_booster"].pop("model"), "Corrupt XGBoost"),
    "base-score": (_mp("base_score", "abc"), "base_score"),
    "base-score-count": (_mp("base_score", "[0.5,0.5]"), "base_score has 2 values"),
    "tree-info": (
        lambda d: d["learner"]["gradient_booster"]["model"].__setitem__("tree_info", [0, 5, 0]),
        "tree_info",
    ),
    "feature-names": (
        lambda d: d["learner"].__setitem__("feature_names", ["a", "b"]),
        "feature_names does not match num_feature",
    ),
}


@pytest.mark.parametrize("name", sorted(CORRUPT_DOCS))
def test_hand_corrupted_xgboost_json(booster, tmp_path, name):
    mutate, match = CORRUPT_DOCS[name]
    doc = json.loads(bytes(booster.save_raw("json")))
    assert len(_trees(doc)[0]["left_children"]) == 15  # a full depth-3 tree
    mutate(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc, allow_nan=True))
    with pytest.raises(ValueError, match=match):
        _quiet(treeinner.load, p)


def test_unknown_objective_and_booster(booster, tmp_path):
    doc = json.loads(bytes(booster.save_raw("json")))
    doc["learner"]["objective"]["name"] = "reg:made_up"
    p = tmp_path / "obj.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(NotImplementedError, match="reg:made_up"):
        _quiet(treeinner.load, p)
    doc = json.loads(bytes(booster.save_raw("json")))
    doc["learner"]["gradient_booster"]["name"] = "gbforest"
    p.write_text(json.dumps(doc))
    with pytest.raises(NotImplementedError, match="gbforest"):
        _quiet(treeinner.load, p)


def test_non_numeric_num_feature(booster, tmp_path):
    doc = json.loads(bytes(booster.save_raw("json")))
    doc["learner"]["learner_model_param"]["num_feature"] = "x"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="Corrupt XGBoost model|num_feature"):
        _quiet(treeinner.load, p)


# ---------------------------------------------------------------------- corrupt ensembles
def _shape(ens):
    """Node ids in tree 0: root, an inner child c of the root, an inner child g of c, and an
    inner node k whose children are both leaves."""
    L, R = np.asarray(ens.left), np.asarray(ens.right)
    root = 0
    c = next(x for x in (L[root], R[root]) if L[x] >= 0)
    g = next(x for x in (L[c], R[c]) if L[x] >= 0)
    k = next(
        n
        for n in range(ens.tree_offsets[0], ens.tree_offsets[1])
        if L[n] >= 0 and L[L[n]] < 0 and L[R[n]] < 0
    )
    leaf = int(np.flatnonzero(L < 0)[0])
    return int(root), int(c), int(g), int(k), leaf


def _node(name, idx_fn, value):
    """A change setting node array ``name`` at the node chosen by idx_fn to value."""

    def change(ens):
        arr = np.array(getattr(ens, name))
        arr[idx_fn(_shape(ens))] = value(ens) if callable(value) else value
        return {name: arr}

    return change


ROOT, C, G, K, LEAF = (lambda s, i=i: s[i] for i in range(5))


def _tree(name, index, value):
    def change(ens):
        arr = np.array(getattr(ens, name))
        arr[index] = value
        return {name: arr}

    return change


CORRUPT_ENSEMBLES = {
    # structure
    "child-beyond-all-nodes": (
        _node("left", ROOT, lambda e: e.n_nodes + 10),
        r"Corrupt ensemble: node 0 \(tree 0\) has a child index outside its tree",
    ),
    "child-in-next-tree": (
        _node("right", ROOT, lambda e: int(e.tree_offsets[1]) + 1),
        "child index outside its tree",
    ),
    "child-int32-max": (_node("left", C, 2**31 - 1), "child index outside its tree"),
    "child-negative-one-side": (_node("left", C, -7), "has only one child"),
    "one-child": (_node("right", C, -1), r"\(tree 0\) has only one child"),
    "cycle-to-ancestor": (
        lambda e: {"left": _replace_at(e.left, _shape(e)[2], _shape(e)[1])},
        "reached twice from the root",
    ),
    "self-loop": (
        lambda e: {"right": _replace_at(e.right, _shape(e)[1], _shape(e)[1])},
        "reached twice",
    ),
    "cycle-to-root": (_node("left", C, 0), "points back at its tree's root"),
    "shared-child": (
        lambda e: {"right": _replace_at(e.right, 0, e.left[0])},
        "reached twice",
    ),
    "unreachable": (
        lambda e: {
            "left": _replace_at(e.left, _shape(e)[3], -1),
            "right": _replace_at(e.right, _shape(e)[3], -1),
        },
        "is not reachable from its tree's root",
    ),
    # splits
    "feature-too-large": (_node("feature", ROOT, 4), r"split feature outside \[0, 4\)"),
    "feature-negative": (_node("feature", G, -1), "split feature outside"),
    "nan-threshold": (_node("threshold", C, np.nan), "numeric split has a non-finite threshold"),
    "inf-threshold": (_node("threshold", C, np.inf), "numeric split has a non-finite threshold"),
    "split-type": (_node("split_type", ROOT, 9), "unknown split_type"),
    "missing-type": (_node("missing_type", LEAF, -1), "unknown missing_type"),
    # values
    "inf-leaf": (_node("value", LEAF, np.inf), "value is inf; leaf values are finite"),
    "nan-leaf": (_node("value", LEAF, np.nan), "value is nan; leaf values are finite"),
    "nan-base-margin": (lambda e: {"base_margin": [np.nan]}, "base_margin is not finite"),
    "empty-base-margin": (lambda e: {"base_margin": []}, "base_margin is empty"),
    # per-tree arrays
    "tree-group-high": (_tree("tree_group", 1, 1), r"tree_group outside \[0, 1\)"),
    "tree-group-negative": (_tree("tree_group", 2, -1), "tree_group outside"),
    "negative-learning-rate": (_tree("learning_rate", 0, -0.3), "learning_rate must be positive"),
    "zero-learning-rate": (_tree("learning_rate", 1, 0.0), "learning_rate must be positive"),
    "nan-learning-rate": (_tree("learning_rate", 2, np.nan), "learning_rate must be positive"),
    "decreasing-iteration": (_tree("tree_iteration", 2, 0), "tree_iteration must be non-decr"),
    "negative-iteration": (
        lambda e: {"tree_iteration": [-1, 0, 1]},
        "tree_iteration must be non-decreasing from 0",
    ),
    # lengths
    "short-node-array": (
        lambda e: {"value": e.value[:-1]},
        r"node array 'value' has \d+ entries, expected",
    ),
    "long-node-array": (
        lambda e: {"feature": np.append(e.feature, 0)},
        "node array 'feature' has",
    ),
    "short-tree-array": (
        lambda e: {"learning_rate": e.learning_rate[:-1]},
        "'learning_rate' has 2 entries for 3 trees",
    ),
    "long-tree-array": (
        lambda e: {"tree_group": np.zeros(4)},
        "'tree_group' has 4 entries for 3 trees",
    ),
    "offsets-past-end": (
        _tree("tree_offsets", -1, 10**6),
        "tree_offsets must rise from 0 to the node count",
    ),
    "offsets-not-rising": (
        lambda e: {"tree_offsets": _replace_at(e.tree_offsets, 2, e.tree_offsets[1])},
        "tree_offsets must rise",
    ),
    "offsets-not-from-zero": (_tree("tree_offsets", 0, 1), "tree_offsets must rise"),
    "no-trees": (lambda e: {"tree_offsets": [0]}, "no trees"),
    "2d-array": (lambda e: {"gain": np.atleast_2d(e.gain)}, "gain must be 1-D"),
    # categorical storage
    "cat-offsets-short": (lambda e: {"cat_offsets": e.cat_offsets[:-1]}, "cat_offsets"),
    "cat-offsets-end": (
        lambda e: {"cat_words": np.zeros(2, dtype=np.uint32)},
        "cat_offsets do not index cat_words",
    ),
    "cat-offsets-decreasing": (
        lambda e: {"cat_offsets": _replace_at(e.cat_offsets, 3, -1)},
        "cat_offsets do not index cat_words",
    ),
    "cat-offsets-start": (
        lambda e: {"cat_offsets": np.ones_like(e.cat_offsets), "cat_words": [0]},
        "cat_offsets",
    ),
    "categories-feature": (lambda e: {"categories": {7: ["a"]}}, "categories given for feature 7"),
    # scalars
    "negative-lambda": (lambda e: {"reg_lambda": -1.0}, "reg_lambda must be finite and >= 0"),
    "nan-lambda": (lambda e: {"reg_lambda": np.nan}, "reg_lambda"),
    "decision-rule": (lambda e: {"decision_rule": "float32 >"}, "Unknown decision_rule"),
    "no-features": (lambda e: {"feature_names": ()}, "no features"),
}


def _replace_at(arr, i, v):
    a = np.array(arr)
    a[i] = v
    return a


def test_corruption_helpers_find_a_deep_tree(ens):
    root, c, g, k, leaf = _shape(ens)
    L = ens.left
    assert L[root] >= 0 and L[c] >= 0 and L[g] >= 0 and L[k] >= 0 and L[leaf] < 0
    assert c in (L[root], ens.right[root]) and g in (L[c], ens.right[c])


@pytest.mark.parametrize("name", list(CORRUPT_ENSEMBLES))
def test_corrupt_ensemble(ens, data, name):
    change, match = CORRUPT_ENSEMBLES[name]
    changes = change(ens)
    with pytest.raises(ValueError, match=match):
        ens.replace(**changes)
    # the original is unaffected
    assert ens.predict_margin(data[0][:5]).shape == (5,)


def test_corrupt_ensemble_error_names_node(ens):
    root, c, g, k, leaf = _shape(ens)
    with pytest.raises(ValueError, match=rf"node {c} \(tree 0\) has only one child"):
        ens.replace(right=_replace_at(ens.right, c, -1))
    off1 = int(ens.tree_offsets[1])
    # a bad child in the second tree names that tree
    with pytest.raises(ValueError, match=rf"node {off1} \(tree 1\) has a child index outside"):
        ens.replace(left=_replace_at(ens.left, off1, 0))


def test_child_index_overflowing_int32_is_rejected(ens):
    left = np.asarray(ens.left, dtype=np.int64)
    left = np.where(left >= 0, left + 2**32, left)
    with pytest.raises(ValueError, match="child|int32|range"):
        ens.replace(left=left)


def test_swapped_children_still_valid(ens, data):
    """Control: a structure change that keeps a proper tree is accepted and predicts finitely."""
    left, right = np.array(ens.left), np.array(ens.right)
    e2 = ens.replace(left=right, right=left)
    out = e2.predict_margin(data[0])
    assert np.all(np.isfinite(out))
    assert not np.array_equal(out, ens.predict_margin(data[0]))


# ---------------------------------------------------------------------- corrupt .npz
@pytest.fixture
def saved(ens, tmp_path):
    p = tmp_path / "ens.npz"
    ens.save(p)
    return p


def _npz_members(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_npz_without_meta(saved, tmp_path):
    members = _npz_members(saved)
    del members["__meta__"]
    p = tmp_path / "nometa.npz"
    np.savez(p, **members)
    with pytest.raises(ValueError, match="an .npz file but not a saved TreeEnsemble"):
        treeinner.load(p)
    with pytest.raises(ValueError, match="not a saved TreeEnsemble"):
        TreeEnsemble.load_npz(p)


def test_npz_unrelated_arrays(tmp_path):
    p = tmp_path / "other.npz"
    np.savez(p, a=np.arange(3))
    with pytest.raises(ValueError, match="not a saved TreeEnsemble"):
        treeinner.load(p)


def _rewrite_meta(saved, tmp_path, fn):
    members = _npz_members(saved)
    meta = json.loads(members["__meta__"].tobytes().decode())
    blob = fn(meta)
    if not isinstance(blob, bytes):
        blob = json.dumps(blob).encode()
    members["__meta__"] = np.frombuffer(blob, dtype=np.uint8)
    p = tmp_path / "edited.npz"
    np.savez(p, **members)
    return p


def test_npz_meta_not_json(saved, tmp_path):
    p = _rewrite_meta(saved, tmp_path, lambda m: b"\xff{not json")
    with pytest.raises(ValueError, match="corrupt metadata"):
        treeinner.load(p)


def test_npz_meta_wrong_format(saved, tmp_path):
    p = _rewrite_meta(saved, tmp_path, lambda m: {**m, "format": "something.else"})
    with pytest.raises(ValueError, match="is not a saved TreeEnsemble"):
        treeinner.load(p)


def test_npz_meta_future_version(saved, tmp_path):
    p = _rewrite_meta(saved, tmp_path, lambda m: {**m, "format_version": 99})
    with pytest.raises(ValueError, match="Unsupported TreeEnsemble format version 99"):
        treeinner.load(p)


def test_npz_missing_array(saved, tmp_path):
    members = _npz_members(saved)
    del members["threshold"]
    p = tmp_path / "noarr.npz"
    np.savez(p, **members)
    with pytest.raises(ValueError, match=r"lacks \['threshold'\]"):
        treeinner.load(p)


def test_npz_with_corrupt_arrays_is_validated(saved, tmp_path):
    members = _npz_members(saved)
    members["left"] = members["left"].copy()
    members["left"][0] = 10**6
    p = tmp_path / "badleft.npz"
    np.savez(p, **members)
    with pytest.raises(ValueError, match="Corrupt ensemble"):
        treeinner.load(p)


def test_npz_object_array_not_unpickled(saved, tmp_path):
    marker = tmp_path / "npz_marker"
    members = _npz_members(saved)
    obj = np.empty(1, dtype=object)
    obj[0] = _Marker(str(marker))
    members["cat_words"] = obj
    p = tmp_path / "obj.npz"
    np.savez(p, **members)  # np.savez pickles object arrays
    with pytest.raises(ValueError, match="not a readable .npz file"):
        treeinner.load(p)
    assert not marker.exists()


@pytest.mark.parametrize("fraction", [0.5, 0.9])
def test_truncated_npz(saved, tmp_path, fraction):
    raw = saved.read_bytes()
    p = tmp_path / "cut.npz"
    p.write_bytes(raw[: int(len(raw) * fraction)])
    with pytest.raises(ValueError, match="not a readable .npz file"):
        treeinner.load(p)


def test_npz_with_damaged_member(saved, tmp_path):
    """A zip whose central directory is intact but whose member data is damaged."""
    buf = io.BytesIO(saved.read_bytes())
    with zipfile.ZipFile(buf) as zf:
        info = zf.getinfo("left.npy")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    raw = bytearray(buf.getvalue())
    for i in range(start + 5, start + 25):
        raw[i] ^= 0xFF
    p = tmp_path / "damaged.npz"
    p.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="not a readable .npz file"):
        treeinner.load(p)


# ---------------------------------------------------------------------- fuzzing (isolated)
_FUZZ = r"""
import sys, warnings
import numpy as np
import treeinner

warnings.simplefilter("ignore")
ens = treeinner.load(sys.argv[1])
rng = np.random.default_rng(int(sys.argv[2]))
n_trials = int(sys.argv[3])
n = ens.n_nodes
X = rng.normal(size=(100, ens.n_features))
X[rng.random(X.shape) < 0.2] = np.nan
X[:5] = np.inf
X[5:10] = -np.inf
leaf_ids = set(ens.leaf_id[ens.left < 0].tolist())
accepted = refused = 0
for trial in range(n_trials):
    left = np.array(ens.left, dtype=np.int64)
    right = np.array(ens.right, dtype=np.int64)
    feature = np.array(ens.feature, dtype=np.int64)
    for _ in range(int(rng.integers(1, 4))):
        arr = left if rng.random() < 0.5 else right
        j = int(rng.integers(n))
        mode = int(rng.integers(7))
        if mode == 0:
            arr[j] = rng.integers(-3, n + 3)
        elif mode == 1:
            arr[j] = -1
        elif mode == 2:
            left[j], right[j] = right[j], left[j]
        elif mode == 3:
            arr[j] = rng.choice([2**31 - 1, -2**31, n, n + 1, 2**32 + j])
        elif mode == 4:
            arr[j] = left[int(rng.integers(n))]
        elif mode == 5:
            feature[j] = rng.integers(-2, ens.n_features + 2)
        else:
            k = int(rng.integers(n))
            left[j], left[k] = left[k], left[j]
    try:
        e = ens.replace(left=left, right=right, feature=feature)
    except ValueError:
        refused += 1
        continue
    accepted += 1
    out = e.predict_margin(X)
    assert out.shape == (X.shape[0],), out.shape
    assert np.all(np.isfinite(out)), trial
    li = e.leaf_index(X)
    assert set(np.unique(li).tolist()) <= leaf_ids, trial
print("accepted", accepted, "refused", refused)
"""


def test_fuzzed_ensembles_raise_or_predict_finite(model_files, tmp_path):
    script = tmp_path / "fuzz.py"
    script.write_text(_FUZZ)
    # one numba thread keeps the child quick on a busy machine; the kernels' memory accesses
    # are the same with any thread count
    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(script), str(model_files / "model.json"), "12345", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, f"fuzz child failed (rc={r.returncode}):\n{r.stderr[-3000:]}"
    words = r.stdout.split()
    accepted, refused = int(words[1]), int(words[3])
    assert accepted + refused == 300
    # both outcomes must actually be exercised
    assert accepted >= 10 and refused >= 100, r.stdout
