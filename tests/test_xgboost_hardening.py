"""The XGBoost adapter refuses every corrupt model when it is loaded, with a ModelFormatError
naming the field (and the tree and node), where XGBoost refuses it or would give other numbers;
eta and lambda are recovered for models of stumps; the UBJSON reader survives any bytes.

XGBoost (the oracle) is run in-process only on mutations it refuses with an exception; the ones
it crashes on are only loaded by treeinner, and the fuzzed .ubj files XGBoost reads in a child
process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import ModelFormatError

xgb = pytest.importorskip("xgboost")

N = 300


def _data(kind: str):
    rng = np.random.default_rng(1)
    if kind == "cat":
        df = pd.DataFrame(
            {
                "a": rng.normal(size=N),
                "c": pd.Categorical(rng.choice(["x", "y", "z", "w"], N)),
                "d": pd.Categorical(rng.choice([3, 1, 7], N)),
            }
        )
        return df, (df.a + 2 * (df.c == "y") + (df.d == 7)).to_numpy(float)
    X = rng.normal(size=(N, 4))
    X[rng.random(size=X.shape) < 0.05] = np.nan
    z = np.nan_to_num(X)
    if kind == "multi":
        return X, ((z[:, 0] > 0).astype(int) + (z[:, 1] > 0.5)).astype(float)
    y = z[:, 0] + 0.3 * rng.normal(size=N)
    return X, ((y > 0).astype(float) if kind == "bin" else y)


_PARAMS = {
    "reg": {"max_depth": 3},
    "bin": {"objective": "binary:logistic", "max_depth": 3},
    "multi": {"objective": "multi:softprob", "num_class": 3, "max_depth": 2},
    "dart": {"booster": "dart", "rate_drop": 0.3, "max_depth": 2, "seed": 3},
    "cat": {"max_depth": 3, "max_cat_to_onehot": 1},
}


@pytest.fixture(scope="module")
def boosters():
    out = {}
    for kind, params in _PARAMS.items():
        X, y = _data(kind)
        dm = xgb.DMatrix(X, y, enable_categorical=True)
        out[kind] = xgb.train({**params, "nthread": 1}, dm, 4)
    return out


def _doc(boosters, kind):
    return json.loads(bytes(boosters[kind].save_raw("json")))


def _model(doc):
    gb = doc["learner"]["gradient_booster"]
    return gb["model"] if "model" in gb else gb["gbtree"]["model"]


def _write(doc, tmp_path, name="m.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc, allow_nan=True))
    return p


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.load(path)


def _permuted(df):
    """The frame with each categorical's categories in reverse order (other pandas codes)."""
    df = df.copy()
    for c in ("c", "d"):
        df[c] = df[c].cat.set_categories(list(df[c].cat.categories)[::-1])
    return df


def _xgb_margin(path, kind):
    X, _ = _data(kind)
    if kind == "cat":
        X = _permuted(X)
    b = xgb.Booster(model_file=str(path))
    dm = xgb.DMatrix(X, enable_categorical=True)
    return np.asarray(b.predict(dm, output_margin=True), dtype=np.float64)


# ---------------------------------------------------------------------- mutations
def _tree0(key, i, value):
    def f(doc):
        _model(doc)["trees"][0][key][i] = value

    return f


def _at_leaf(key, value):
    def f(doc):
        t = _model(doc)["trees"][0]
        t[key][t["left_children"].index(-1)] = value

    return f


def _lmp(key, value):
    def f(doc):
        doc["learner"]["learner_model_param"][key] = value

    return f


def _gbp(key, value):
    def f(doc):
        _model(doc)["gbtree_model_param"][key] = value

    return f


def _cats(fn):
    def f(doc):
        fn(_model(doc)["cats"])

    return f


def _weight_drop(i, value):
    def f(doc):
        doc["learner"]["gradient_booster"]["weight_drop"][i] = value

    return f


def _set(key, value):
    def f(doc):
        _model(doc)[key] = value

    return f


def _cat_node_to(which):
    def f(doc):
        t = _model(doc)["trees"][0]
        numeric = [i for i, (lc, st) in enumerate(zip(t["left_children"], t["split_type"]))
                   if lc != -1 and st == 0]  # fmt: skip
        t["categories_nodes"][0] = numeric[0] if which == "numeric" else which

    return f


# name: (booster, mutation, words the message must hold, what XGBoost does with it)
# "refuses": XGBoost raises (loading it or predicting with it); "loads": it loads it and
# predicts (NaN, or other numbers than the file means); "crashes": it reads out of bounds and
# aborts the process (or, the memory it reads being undefined, raises).
# fmt: off
MUTATIONS = {
    # the cats block (pandas categories): a corrupt one was skipped and pandas' codes used
    "cats-values-unsorted": (_cats(lambda c: c["enc"][1].__setitem__("values", [120, 119, 121, 122])), ("cats.sorted_idx", "feature 1"), "loads"),  # noqa: E501
    "cats-numbers-unsorted": (_cats(lambda c: c["enc"][2].__setitem__("values", [3, 1, 7])), ("cats.sorted_idx", "feature 2"), "loads"),  # noqa: E501
    "cats-offsets-truncated": (_cats(lambda c: c["enc"][1]["offsets"].pop()), ("cats.enc[1]",), "refuses"),  # noqa: E501
    "cats-values-truncated": (_cats(lambda c: c["enc"][1]["values"].pop()), ("cats.enc[1].offsets",), "crashes"),  # noqa: E501
    "cats-offsets-past-values": (_cats(lambda c: c["enc"][1].__setitem__("offsets", [0, 1, 2, 3, 9])), ("cats.enc[1].offsets",), "crashes"),  # noqa: E501
    "cats-offsets-not-rising": (_cats(lambda c: c["enc"][1].__setitem__("offsets", [0, 2, 1, 3, 4])), ("cats.enc[1].offsets",), "loads"),  # noqa: E501
    "cats-enc-short": (_cats(lambda c: c["enc"].pop()), ("cats.enc", "one per feature"), "refuses"),
    "cats-enc-missing": (_cats(lambda c: c.pop("enc")), ("cats.enc",), "refuses"),
    "cats-segments-missing": (_cats(lambda c: c.pop("feature_segments")), ("cats.feature_segments",), "refuses"),  # noqa: E501
    "cats-segments-wrong": (_cats(lambda c: c.__setitem__("feature_segments", [0, 0, 3, 7])), ("feature 1", "cats.feature_segments"), "crashes"),  # noqa: E501
    "cats-sorted-idx-short": (_cats(lambda c: c["sorted_idx"].pop()), ("cats.feature_segments", "cats.sorted_idx"), "refuses"),  # noqa: E501
    "cats-sorted-idx-missing": (_cats(lambda c: c.pop("sorted_idx")), ("cats.sorted_idx",), "refuses"),  # noqa: E501
    "cats-type-unknown": (_cats(lambda c: c["enc"][2].__setitem__("type", 99)), ("cats.enc[2].type",), "refuses"),  # noqa: E501
    "cats-type-missing": (_cats(lambda c: c["enc"][2].pop("type")), ("cats.enc[2].type",), "refuses"),  # noqa: E501
    "cats-not-utf8": (_cats(lambda c: c["enc"][1].__setitem__("values", [119, 120, 121, 255])), ("cats.enc[1].values", "UTF-8"), "refuses"),  # noqa: E501
    "cats-duplicate": (_cats(lambda c: c["enc"][2].__setitem__("values", [1, 1, 7])), ("cats.sorted_idx",), "loads"),  # noqa: E501
    # categorical splits
    "cat-node-numeric": (_cat_node_to("numeric"), ("categories_nodes", "tree 0 node"), "crashes"),
    "cat-node-out-of-range": (_cat_node_to(99), ("categories_nodes", "tree 0"), "loads"),
    "cat-node-negative": (_cat_node_to(-1), ("categories_nodes", "tree 0"), "loads"),
    "cat-nodes-unsorted": (lambda d: _model(d)["trees"][0].__setitem__("categories_nodes", _model(d)["trees"][0]["categories_nodes"][::-1]), ("categories_nodes", "strictly increasing"), "crashes"),  # noqa: E501
    "cat-size-zero": (_tree0("categories_sizes", 0, 0), ("categories_sizes", "tree 0 node"), "refuses"),  # noqa: E501
    "cat-segment-past-end": (_tree0("categories_segments", 1, 5), ("categories_segments", "tree 0 node"), "crashes"),  # noqa: E501
    "cat-segments-short": (lambda d: _model(d)["trees"][0]["categories_segments"].pop(), ("categories_segments", "tree 0"), "crashes"),  # noqa: E501
    "cat-category-float": (_tree0("categories", 0, 1.5), ("categories", "tree 0"), "refuses"),
    "cat-split-type-numeric": (lambda d: _model(d)["trees"][0]["split_type"].__setitem__(_model(d)["trees"][0]["categories_nodes"][0], 0), ("categories_nodes", "split_type"), "loads"),  # noqa: E501
}
NUMERIC_MUTATIONS = {
    "num-parallel-tree-abc": ("reg", _gbp("num_parallel_tree", "abc"), ("gbtree_model_param.num_parallel_tree",), "refuses"),  # noqa: E501
    "num-parallel-tree-0": ("reg", _gbp("num_parallel_tree", "0"), ("num_parallel_tree", ">= 1"), "refuses"),  # noqa: E501
    "num-trees-abc": ("reg", _gbp("num_trees", "abc"), ("gbtree_model_param.num_trees",), "refuses"),  # noqa: E501
    "num-trees-wrong": ("reg", _gbp("num_trees", "3"), ("num_trees", "4 trees"), "refuses"),
    "num-feature-abc": ("reg", _lmp("num_feature", "abc"), ("learner_model_param.num_feature",), "refuses"),  # noqa: E501
    "num-feature-number": ("reg", _lmp("num_feature", 4), ("learner_model_param.num_feature",), "refuses"),  # noqa: E501
    "num-class-negative": ("reg", _lmp("num_class", "-3"), ("learner_model_param.num_class",), "refuses"),  # noqa: E501
    "num-target-zero": ("reg", _lmp("num_target", "0"), ("learner_model_param.num_target",), "refuses"),  # noqa: E501
    "boost-from-average-abc": ("reg", _lmp("boost_from_average", "abc"), ("boost_from_average",), "refuses"),  # noqa: E501
    "base-score-3-outputs": ("bin", _lmp("base_score", "[5E-1,5E-1,5E-1]"), ("base_score", "3 values for 1 outputs"), "refuses"),  # noqa: E501
    "num-class-binary": ("bin", _lmp("num_class", "3"), ("learner_model_param.num_class", "binary:logistic"), "loads"),  # noqa: E501
    "scale-pos-weight-text": ("bin", lambda d: d["learner"]["objective"]["reg_loss_param"].__setitem__("scale_pos_weight", "x"), ("reg_loss_param.scale_pos_weight",), "refuses"),  # noqa: E501
    "num-deleted-wrong": ("reg", lambda d: _model(d)["trees"][0]["tree_param"].__setitem__("num_deleted", "1"), ("tree 0", "num_deleted"), "refuses"),  # noqa: E501
    "parents-wrong": ("reg", _tree0("parents", 3, 4), ("tree 0 node 3", "parents"), "loads"),
    "base-score-number": ("reg", _lmp("base_score", 5), ("base_score",), "refuses"),
    "base-score-unclosed": ("reg", _lmp("base_score", "[1,"), ("base_score",), "refuses"),
    "base-score-leading-dot": ("reg", _lmp("base_score", ".5"), ("base_score",), "refuses"),
    "num-nodes-abc": ("reg", lambda d: _model(d)["trees"][0]["tree_param"].__setitem__("num_nodes", "abc"), ("tree 0", "tree_param.num_nodes"), "refuses"),  # noqa: E501
    "num-nodes-wrong": ("reg", lambda d: _model(d)["trees"][0]["tree_param"].__setitem__("num_nodes", "3"), ("tree 0", "wrong length"), "refuses"),  # noqa: E501
    "num-deleted-abc": ("reg", lambda d: _model(d)["trees"][0]["tree_param"].__setitem__("num_deleted", "abc"), ("tree_param.num_deleted",), "refuses"),  # noqa: E501
    "tree-info-short": ("reg", _set("tree_info", [0, 0, 0]), ("tree_info", "wrong length"), "refuses"),  # noqa: E501
    "tree-info-text": ("reg", _set("tree_info", ["a", 0, 0, 0]), ("tree_info", "not numeric"), "refuses"),  # noqa: E501
    "tree-info-float": ("reg", _set("tree_info", [0.5, 0, 0, 0]), ("tree_info", "integers"), "refuses"),  # noqa: E501
    "indptr-past-trees": ("reg", _set("iteration_indptr", [0, 1, 2, 3, 5]), ("iteration_indptr",), "refuses"),  # noqa: E501
    "indptr-text": ("reg", _set("iteration_indptr", ["a", 1, 2, 3, 4]), ("iteration_indptr",), "refuses"),  # noqa: E501
    "tree-id-wrong": ("reg", lambda d: _model(d)["trees"][0].__setitem__("id", 5), ("tree 0", "id"), "refuses"),  # noqa: E501
    "parents-missing": ("reg", lambda d: _model(d)["trees"][0].pop("parents"), ("tree 0", "parents"), "refuses"),  # noqa: E501
    "objective-missing": ("reg", lambda d: d["learner"].pop("objective"), ("learner.objective",), "refuses"),  # noqa: E501
    "version-text": ("reg", lambda d: d.__setitem__("version", ["a", 1, 0]), ("version",), "refuses"),  # noqa: E501
    "left-child-float": ("reg", _tree0("left_children", 0, 1.0), ("tree 0", "left_children", "integers"), "refuses"),  # noqa: E501
    "split-index-float": ("reg", _tree0("split_indices", 0, 1.5), ("tree 0", "split_indices"), "refuses"),  # noqa: E501
    "hessian-integer": ("reg", _tree0("sum_hessian", 0, 300), ("tree 0", "sum_hessian", "numbers"), "refuses"),  # noqa: E501
    # values XGBoost loads but that give NaN or other numbers
    "hessian-negative": ("reg", _tree0("sum_hessian", 0, -2.0), ("tree 0 node 0", "sum_hessian is -2.0"), "loads"),  # noqa: E501
    "hessian-nan": ("reg", _at_leaf("sum_hessian", float("nan")), ("tree 0 node 7", "sum_hessian is nan"), "loads"),  # noqa: E501
    "hessian-inf": ("reg", _tree0("sum_hessian", 1, float("inf")), ("tree 0 node 1", "sum_hessian is inf"), "loads"),  # noqa: E501
    "hessian-zero-split": ("reg", _tree0("sum_hessian", 1, 0.0), ("tree 0 node 1", "sum_hessian is 0.0"), "loads"),  # noqa: E501
    "gain-nan": ("reg", _tree0("loss_changes", 0, float("nan")), ("tree 0 node 0", "loss_changes"), "loads"),  # noqa: E501
    "gain-inf": ("reg", _tree0("loss_changes", 2, float("inf")), ("tree 0 node 2", "loss_changes"), "loads"),  # noqa: E501
    "base-weight-nan": ("reg", _tree0("base_weights", 0, float("nan")), ("tree 0 node 0", "base_weights"), "loads"),  # noqa: E501
    "base-weight-inf": ("reg", _at_leaf("base_weights", float("inf")), ("tree 0 node 7", "base_weights"), "loads"),  # noqa: E501
    "threshold-nan": ("reg", _tree0("split_conditions", 0, float("nan")), ("tree 0 node 0", "split_conditions", "non-finite threshold"), "loads"),  # noqa: E501
    "leaf-inf": ("reg", _at_leaf("split_conditions", float("inf")), ("tree 0 node 7", "split_conditions", "leaf value"), "loads"),  # noqa: E501
    "feature-out-of-range": ("reg", _tree0("split_indices", 0, 4), ("tree 0 node 0", "split_indices is 4"), "loads"),  # noqa: E501
    "default-left-2": ("reg", _tree0("default_left", 0, 2), ("tree 0 node 0", "default_left is 2"), "loads"),  # noqa: E501
    "default-left-negative": ("reg", _tree0("default_left", 2, -1), ("tree 0 node 2", "default_left"), "loads"),  # noqa: E501
    "split-type-2": ("reg", _tree0("split_type", 0, 2), ("tree 0 node 0", "split_type is 2"), "loads"),  # noqa: E501
    "split-type-1-no-categories": ("reg", _tree0("split_type", 0, 1), ("tree 0 node 0", "categories_nodes"), "loads"),  # noqa: E501
    "weight-drop-negative": ("dart", _weight_drop(0, -1.0), ("tree 0", "weight_drop is -1.0"), "loads"),  # noqa: E501
    "weight-drop-nan": ("dart", _weight_drop(1, float("nan")), ("tree 1", "weight_drop is nan"), "loads"),  # noqa: E501
    "weight-drop-text": ("dart", _weight_drop(0, "x"), ("weight_drop", "not numeric"), "refuses"),  # noqa: E501
    "weight-drop-short": ("dart", lambda d: d["learner"]["gradient_booster"]["weight_drop"].pop(), ("weight_drop", "wrong length"), "refuses"),  # noqa: E501
    "multi-tree-info-past-classes": ("multi", _set("tree_info", [0, 1, 3] * 4), ("tree 2", "tree_info is 3"), "loads"),  # noqa: E501
}
# fmt: on
ALL = {**{k: ("cat", *v) for k, v in MUTATIONS.items()}, **NUMERIC_MUTATIONS}


@pytest.fixture(scope="module")
def mutated(boosters, tmp_path_factory):
    """Every mutation written to a file, with XGBoost's outcome on it (one child process)."""
    where = tmp_path_factory.mktemp("mutated")
    paths = {}
    for name, (kind, mutate, _, _) in ALL.items():
        doc = _doc(boosters, kind)
        mutate(doc)
        paths[name] = _write(doc, where, f"{name}.json")
    oracle = _xgb_oracle([(p, ALL[n][0]) for n, p in paths.items()])
    return {n: (p, oracle[str(p)]) for n, p in paths.items()}


@pytest.mark.parametrize("name", sorted(ALL))
def test_corrupt_model_refused_at_load_naming_the_field(mutated, name):
    _, _, words, xgb_says = ALL[name]
    path, (outcome, _) = mutated[name]
    with pytest.raises(ModelFormatError) as err:
        _load(path)
    msg = str(err.value)
    assert msg.startswith("Corrupt XGBoost model:"), msg
    for w in words:
        assert w in msg, (w, msg)
    # the oracle: XGBoost refuses it too, or crashes on it, or loads it (and then gives NaN
    # or other numbers than the file means: refusing is the only way not to differ). Where
    # XGBoost reads past the end of an array ("crashes") its behaviour is undefined: it crashes
    # or returns numbers made of whatever memory follows, run by run (seen in CI)
    expected = {
        "refuses": {"error"},
        "crashes": {"crash", "error", "margin"},
        "loads": {"margin"},
    }
    assert outcome in expected[xgb_says]


def test_ubj_corrupt_model_refused_too(boosters, tmp_path):
    """The same checks on a .ubj document (typed arrays arrive as NumPy arrays)."""
    from treeinner.adapters import _ubjson

    doc = _ubjson.loads(bytes(boosters["reg"].save_raw("ubj")))
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["sum_hessian"][0] = -2.0
    with pytest.raises(ModelFormatError, match="tree 0 node 0: sum_hessian is -2.0"):
        treeinner.adapters.xgboost.from_dict(doc)
    doc = _ubjson.loads(bytes(boosters["reg"].save_raw("ubj")))
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"] = np.zeros(15)
    with pytest.raises(ModelFormatError, match="left_children"):
        treeinner.adapters.xgboost.from_dict(doc)


@pytest.mark.parametrize("kind", sorted(_PARAMS))
@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_valid_models_still_load_and_match_xgboost(boosters, tmp_path, kind, fmt):
    path = tmp_path / f"m.{fmt}"
    boosters[kind].save_model(str(path))
    ens = _load(path)
    X, _ = _data(kind)
    if kind == "cat":
        X = _permuted(X)  # other pandas codes: recoded by the model's cats block
    ours = ens.predict_margin(X).ravel()
    theirs = _xgb_margin(path, kind).ravel()
    # DART: inplace_predict's float32 order (what treeinner follows) differs from DMatrix's
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6 if kind == "dart" else 0)
    if kind == "cat":
        assert ens.categories == {1: ["w", "x", "y", "z"], 2: [1, 3, 7]}


def test_corrupt_cats_block_no_longer_silently_uses_pandas_codes(boosters, tmp_path):
    """The issue's example: an unsorted (corrupt) cats block was skipped, pandas' own codes
    were used, and margins were off by several units against XGBoost on the same file."""
    doc = _doc(boosters, "cat")
    path = _write(doc, tmp_path, "ok.json")
    X = _permuted(_data("cat")[0])
    assert np.array_equal(_load(path).predict_margin(X).ravel(), _xgb_margin(path, "cat"))
    _model(doc)["cats"]["enc"][1]["values"] = [120, 119, 121, 122]  # "x", "w": unsorted
    bad = _write(doc, tmp_path, "bad.json")
    assert _xgb_margin(bad, "cat").size == N  # XGBoost loads it (and looks categories up wrong)
    with pytest.raises(ModelFormatError, match=r"feature 1: cats\.sorted_idx"):
        _load(bad)


# ---------------------------------------------------------------------- stumps: eta and lambda
def _stumps(eta, lam, rounds, objective="binary:logistic"):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=400)
    if objective == "binary:logistic":
        y = (y > 0.3).astype(float)
    params = {"eta": eta, "lambda": lam, "max_depth": 1, "objective": objective, "nthread": 1}
    return xgb.train(params, xgb.DMatrix(X, y), rounds)


@pytest.mark.parametrize("eta", [0.05, 0.7])
@pytest.mark.parametrize("lam", [0.0, 1.0, 5.0])
def test_eta_lambda_recovered_for_stumps(tmp_path, eta, lam):
    b = _stumps(eta, lam, 8)
    path = tmp_path / "stumps.json"
    b.save_model(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recovered: nothing assumed, nothing to warn about
        ens = treeinner.load(path)
    assert abs(ens.reg_lambda - lam) <= 1e-6
    assert np.all(np.abs(np.asarray(ens.learning_rate) - eta) <= 1e-6)
    # PreDecomp's node values: the leaves' values, and at each root eta times XGBoost's own
    # (unscaled) base weight, which holds only with the right eta and lambda
    p = treeinner.node_values(ens)
    leaf = np.asarray(ens.left) < 0
    assert np.array_equal(p[leaf], np.asarray(ens.value)[leaf])
    doc = json.loads(path.read_text())
    w0 = np.array([t["base_weights"][0] for t in _model(doc)["trees"]], dtype=np.float32)
    roots = np.asarray(ens.tree_offsets)[:-1]
    np.testing.assert_allclose(p[roots], eta * w0.astype(np.float64), rtol=1e-5, atol=1e-7)


def test_one_stump_is_not_determined_and_says_so(tmp_path):
    path = tmp_path / "one.json"
    _stumps(0.7, 5.0, 1).save_model(str(path))
    with pytest.warns(UserWarning, match="two or more splits with two leaf children") as rec:
        ens = treeinner.load(path)
    assert any("Pass learning_rate=" in str(w.message) for w in rec)
    assert ens.reg_lambda == 1.0 and np.all(np.asarray(ens.learning_rate) == 0.3)  # defaults
    ens = treeinner.load(path, learning_rate=0.7, reg_lambda=5.0)
    assert ens.reg_lambda == 5.0


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_stumps_never_recover_a_wrong_value(tmp_path, lam):
    """Squared error from the mean: the roots' base weights are 0 (lambda 0) or nearly, so
    eta is not (or barely) in the file: recovered exactly, or refused with a warning."""
    path = tmp_path / "sq.json"
    _stumps(0.05, lam, 10, "reg:squarederror").save_model(str(path))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ens = treeinner.load(path)
    recovered = not rec
    if recovered:
        assert abs(ens.reg_lambda - lam) <= 1e-6
        assert np.all(np.abs(np.asarray(ens.learning_rate) - 0.05) <= 1e-6)
    else:
        assert any("Could not recover" in str(w.message) for w in rec)


@pytest.mark.parametrize("how", ["l1", "schedule"])
def test_stumps_with_l1_or_a_schedule_are_not_recovered(tmp_path, how):
    """No one eta and lambda fit: refused with the reason, never a wrong value."""
    params = {"eta": 0.3, "lambda": 2.0, "max_depth": 1, "nthread": 1,
              "objective": "binary:logistic"}  # fmt: skip
    callbacks = []
    if how == "l1":
        params["alpha"] = 0.5
    else:
        callbacks = [xgb.callback.LearningRateScheduler(lambda i: 0.1 + 0.05 * i)]
    b = xgb.train(params, xgb.DMatrix(*_stump_xy()), 10, callbacks=callbacks)
    path = tmp_path / f"{how}.json"
    b.save_model(str(path))
    with pytest.warns(UserWarning, match="no one eta and lambda fit all stumps"):
        ens = treeinner.load(path)
    assert ens.reg_lambda == 1.0  # XGBoost's default, with the warning


def _stump_xy():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 4))
    return X, (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(float)


# ---------------------------------------------------------------------- UBJSON fuzzing
_ORACLE = r"""
import sys, json, numpy as np, xgboost as xgb
sys.path.insert(0, sys.argv[1])
from tests.test_xgboost_hardening import _data, _permuted
for line in sys.stdin:
    path, kind = line.rstrip("\n").split("\t")
    try:
        b = xgb.Booster(model_file=path)
        X = _data(kind)[0]
        X = _permuted(X) if kind == "cat" else X
        m = b.inplace_predict(X, predict_type="margin")
        out = {"path": path, "margin": np.asarray(m, dtype=np.float64).ravel().tolist()}
    except Exception as e:
        out = {"path": path, "error": str(e)[:80]}
    print(json.dumps(out), flush=True)
"""


def _xgb_oracle(cases):
    """XGBoost's outcome on each ``(path, kind)``: ``("margin", margins)``, ``("error",
    message)`` or ``("crash", None)``, read in a child process restarted after a crash."""
    root = str(Path(__file__).resolve().parents[1])
    out, todo = {}, [(str(p), k) for p, k in cases]
    while todo:
        proc = subprocess.run(
            [sys.executable, "-c", _ORACLE, root],
            input="".join(f"{p}\t{k}\n" for p, k in todo), capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        for line in proc.stdout.splitlines():
            r = json.loads(line)
            out[r["path"]] = ("margin", np.array(r["margin"])) if "margin" in r else (
                "error", r["error"])  # fmt: skip
        todo = [c for c in todo if c[0] not in out]
        if todo:  # the child died on todo[0]: XGBoost crashed on that file
            out[todo.pop(0)[0]] = ("crash", None)
    return out


def _mutate(data: bytes, rng) -> bytes:
    b = bytearray(data)
    op = int(rng.integers(0, 6))
    i = int(rng.integers(0, len(b)))
    if op == 0:  # truncate
        return bytes(b[:i])
    if op == 1:  # flip a byte
        b[i] = int(rng.integers(0, 256))
    elif op == 2:  # a structural byte where another was
        b[i] = ord(rng.choice(list("[]{}$#iUIlLdDSZTFNHC")))
    elif op == 3:  # a huge count or length
        b[i : i + 9] = b"L" + int(rng.integers(2**40, 2**62)).to_bytes(8, "big")
    elif op == 4:  # delete a run
        del b[i : i + int(rng.integers(1, 9))]
    else:  # deep nesting
        b[i:i] = b"[" * int(rng.integers(50, 5000))
    return bytes(b)


def test_fuzzed_ubj_files_refused_or_equal_to_xgboost(boosters, tmp_path):
    X = _data("reg")[0]
    loaded, n_refused, n_cases = [], 0, 0
    for k, kind in enumerate(["reg", "bin", "multi", "dart"]):
        data = bytes(boosters[kind].save_raw("ubj"))
        rng = np.random.default_rng(100 + k)
        for j in range(80):
            path = tmp_path / f"{kind}{j}.ubj"
            path.write_bytes(_mutate(data, rng))
            try:
                ens = _load(path)
            except ModelFormatError:
                n_refused += 1
            else:
                loaded.append((path, ens.predict_margin(X).ravel()))
            n_cases += 1
    assert n_cases >= 300 and n_refused > n_cases // 2
    oracle = _xgb_oracle([(p, "reg") for p, _ in loaded])
    for path, ours in loaded:
        outcome, theirs = oracle[str(path)]
        assert outcome == "margin", f"{path.name}: treeinner loads what XGBoost refuses"
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6, err_msg=path.name)


def test_ubjson_reader_on_hand_made_bytes():
    from treeinner.adapters import _ubjson

    bad = [
        b"", b"{", b"[", b"[$d#L" + (2**62).to_bytes(8, "big"), b"[#L" + (2**40).to_bytes(8, "big"),
        b"[" * 100_000, b"{i\x01a", b"X", b"[$Z#i\x05", b"Hi\x03abc", b"Si\xff", b"[$i#i\x05\x01",
        b"{i\x01aSi\x02\xff\xfe}", b"[$q#i\x01\x00",
    ]  # fmt: skip
    for data in bad:
        with pytest.raises(ModelFormatError):
            _ubjson.loads(data)

    def n8(n):
        return b"L" + n.to_bytes(8, "big")

    assert _ubjson.loads(b"[$i#i\x02\x01\x02").tolist() == [1, 2]
    assert _ubjson.loads(b"{" + n8(1) + b"aH" + n8(3) + b"1.5}") == {"a": 1.5}
    with pytest.raises(ModelFormatError, match="int64"):  # XGBoost reads only L lengths
        _ubjson.loads(b"{i\x01aHi\x031.5}")
