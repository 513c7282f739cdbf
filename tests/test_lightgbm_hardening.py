"""The LightGBM adapter refuses every corrupt model when it loads it, with a ModelFormatError
naming the field (and the tree and node), or reads it exactly as LightGBM does.

LightGBM itself is the oracle, run in a child process (its reader aborts the process on some
corrupt texts): a mutated model treeinner loads must give LightGBM's margins and leaves.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import ModelFormatError
from treeinner.adapters import lightgbm as lgb_adapter

lgb = pytest.importorskip("lightgbm")

N_ROWS = 300
KINDS = ("regression", "binary", "multiclass", "categorical", "linear")


# ---------------------------------------------------------------------- models and helpers
def _data(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    df = pd.DataFrame(X, columns=list("abcd"))
    df["e"] = rng.integers(0, 6, size=N_ROWS).astype(float)
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) + df["e"].to_numpy() % 2
    return df, signal


def _train(kind: str) -> str:
    """A small model of ``kind`` as LightGBM's model text."""
    df, s = _data()
    params = {"num_leaves": 6, "verbose": -1, "num_threads": 1, "min_data_in_leaf": 5}
    y, rounds = s, 3
    if kind == "binary":
        params["objective"], y = "binary", (s > 0.5).astype(float)
    elif kind == "multiclass":
        params.update(objective="multiclass", num_class=3)
        y, rounds = np.digitize(s, [0.0, 1.0]).astype(float), 2
    elif kind == "categorical":
        df = df.assign(e=pd.Categorical(df["e"].map(lambda v: "uvwxyz"[int(v)])))
        params.update(max_cat_to_onehot=2, min_data_per_group=5, cat_smooth=1.0)
    elif kind == "linear":
        params["linear_tree"] = True
    booster = lgb.train(params, lgb.Dataset(df, y), rounds)
    return booster.model_to_string()


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {kind: _train(kind) for kind in KINDS}


def _rows() -> np.ndarray:
    """Rows to compare margins on: the training rows and some at odd values."""
    df, _ = _data()
    X = df.to_numpy()
    odd = np.array(
        [
            [np.nan, 0.0, -0.0, 1e-40, -1.0],
            [1e30, -1e30, np.inf, -np.inf, 7.0],
            [0.5, np.nan, 0.0, 2.0, -1.0],
            [0.0, 0.0, 0.0, 0.0, np.nan],
        ]
    )
    return np.vstack([X, odd])


def _quiet_load(text: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lgb_adapter.from_string(text)


def _set(text: str, field: str, new: str, idx: int = 0, tree: int = 0) -> str:
    """``text`` with value ``idx`` of ``field`` in tree ``tree`` (the header: -1) replaced."""
    start = 0 if tree < 0 else text.index(f"\nTree={tree}\n")
    a = text.index(f"\n{field}=", start) + 1
    b = text.index("\n", a)
    key, value = text[a:b].split("=", 1)
    values = value.split(" ")
    values[idx] = new
    return text[:a] + key + "=" + " ".join(values) + text[b:]


def _fix_sizes(text: str) -> str:
    """``text`` with ``tree_sizes`` rewritten to match its tree blocks (so that LightGBM and
    treeinner read the blocks as they are)."""
    m = re.search(r"^tree_sizes=.*$", text, flags=re.M)
    end = re.search(r"^end of trees$", text, flags=re.M)
    if m is None or end is None:
        return text
    body = text[: end.start()]
    starts = [s.start() for s in re.finditer(r"^Tree=", body, flags=re.M)] + [len(body)]
    sizes = " ".join(str(len(body[a:b].encode())) for a, b in zip(starts[:-1], starts[1:]))
    return text[: m.start()] + "tree_sizes=" + sizes + text[m.end() :]


def _refused(text: str, *names: str) -> str:
    """Assert the text is refused with a ModelFormatError naming every one of ``names``."""
    with pytest.raises(ModelFormatError) as info:
        _quiet_load(text)
    msg = str(info.value)
    assert msg.startswith("Corrupt LightGBM model") or "LightGBM" in msg, msg
    for name in names:
        assert name in msg, (name, msg)
    return msg


# ---------------------------------------------------------------------- LightGBM as the oracle
_ORACLE = r"""
import json, os, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import lightgbm as lgb
X = np.load(sys.argv[1])
for path in json.loads(open(sys.argv[2]).read()):
    try:
        b = lgb.Booster(model_str=open(path).read())
        Xi = X[:, : b.num_feature()]
        np.savez(path + ".npz", m=b.predict(Xi, raw_score=True), leaf=b.predict(Xi, pred_leaf=True))
    except Exception as e:
        open(path + ".err", "w").write(f"{type(e).__name__}: {e}")
"""


def lightgbm_reads(paths: list[Path], X: np.ndarray, work: Path) -> dict[Path, object]:
    """LightGBM's (margins, leaves) of every model file, or its error text ("aborted" when the
    process died on it), from child processes restarted after each abort."""
    np.save(work / "X.npy", X)
    todo, out = list(paths), {}
    while todo:
        (work / "todo.json").write_text(json.dumps([str(p) for p in todo]))
        subprocess.run(
            [sys.executable, "-c", _ORACLE, str(work / "X.npy"), str(work / "todo.json")],
            capture_output=True,
            timeout=600,
            check=False,
        )
        while todo:
            p = todo[0]
            npz, err = Path(str(p) + ".npz"), Path(str(p) + ".err")
            if npz.exists():
                r = np.load(npz)
                out[p] = (r["m"], r["leaf"])
            elif err.exists():
                out[p] = err.read_text()
            else:  # the process died on this one: LightGBM refuses it the hard way
                out[p] = "aborted"
                todo.pop(0)
                break
            todo.pop(0)
    return out


def _same(ens, X: np.ndarray, theirs: tuple) -> str:
    """Empty if treeinner's margins and leaves equal LightGBM's, else what differs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = ens.predict_margin(X[:, : ens.n_features])
        leaves = ens.leaf_index(X[:, : ens.n_features])
    m, leaf = theirs
    if ours.size != m.size or leaves.size != leaf.size:
        return f"shapes {ours.shape} vs {m.shape}"
    ours, leaves = ours.reshape(m.shape), leaves.reshape(leaf.shape)
    # rounding: relative to each margin, and to the model's scale (moving the intercept out of
    # the first trees rounds at the size of their leaves, as in test_lightgbm_adapter)
    off = ens.tree_offsets
    scale = np.abs(ens.base_margin).sum() + sum(
        np.abs(ens.value[a:b]).max() for a, b in zip(off[:-1], off[1:])
    )
    with np.errstate(invalid="ignore"):
        close = (ours == m) | (np.abs(ours - m) <= 1e-9 * (1.0 + np.abs(m)) + 1e-14 * scale)
    if not np.all(close):
        return f"margins differ by {np.nanmax(np.abs(ours - m)):.3g}"
    if not np.array_equal(leaves, leaf):
        return f"{int(np.sum(leaves != leaf))} leaf indices differ"
    return ""


# ---------------------------------------------------------------------- objective parameters
@pytest.mark.parametrize(
    ("kind", "old", "new", "name"),
    [
        ("binary", "sigmoid:1", "sigmoid:-1", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:0", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:abc", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:nan", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:inf", "sigmoid"),
        ("binary", " sigmoid:1", "", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:1 sigmoid:2", "sigmoid"),
        ("binary", "sigmoid:1", "sigmoid:1 alpha:3", "alpha"),
        ("multiclass", "num_class:3", "num_class:1", "num_class"),
        ("multiclass", "num_class:3", "num_class:4", "num_class"),
        ("multiclass", "num_class:3", "num_class:x", "num_class"),
        ("multiclass", " num_class:3", "", "num_class"),
        ("regression", "objective=regression", "objective=regression sqrt sqrt", "sqrt"),
        ("regression", "objective=regression", "objective=mse sqrt", "regression"),
    ],
)
def test_objective_parameters_refused(texts, kind, old, new, name):
    """Every objective parameter is read by one helper with LightGBM's own ranges; LightGBM
    refuses these objective lines too (see test_lightgbm_refuses_the_same_objectives)."""
    text = texts[kind]
    assert old in text
    msg = _refused(text.replace(old, new, 1), name)
    assert "objective" in msg


@pytest.mark.parametrize(
    ("kind", "param", "value"),
    [
        ("regression", "tweedie_variance_power", "2"),
        ("regression", "tweedie_variance_power", "0.5"),
        ("regression", "alpha", "0"),
        ("regression", "fair_c", "-1"),
        ("regression", "poisson_max_delta_step", "0"),
        ("regression", "learning_rate", "-0.1"),
        ("regression", "learning_rate", "nan"),
        ("regression", "lambda_l2", "-1"),
        ("regression", "lambda_l2", "1_0"),
        ("regression", "bagging_fraction", "1.5"),
        ("regression", "scale_pos_weight", "0"),
        ("regression", "sigmoid", "-2"),
        ("regression", "num_class", "0"),
        ("regression", "max_cat_to_onehot", "2.5"),
        ("regression", "boost_from_average", "maybe"),
        ("regression", "is_unbalance", "2"),
    ],
)
def test_training_parameters_in_lightgbm_ranges(texts, kind, param, value):
    text = texts[kind]
    line = re.search(rf"^\[{param}: .*\]$", text, flags=re.M)
    assert line is not None, param
    bad = text[: line.start()] + f"[{param}: {value}]" + text[line.end() :]
    _refused(bad, param)


def test_quantile_alpha_below_one(texts):
    text = texts["regression"].replace("objective=regression", "objective=quantile", 1)
    assert _quiet_load(text).objective == "quantile"
    _refused(text.replace("[alpha: 0.9]", "[alpha: 1.5]"), "alpha", "quantile")


def test_lightgbm_refuses_the_same_objectives(texts, tmp_path):
    """The objective lines refused above are refused by LightGBM itself."""
    cases = [texts["binary"].replace("sigmoid:1", s, 1) for s in ("sigmoid:-1", "sigmoid:0", "")]
    cases.append(texts["multiclass"].replace(" num_class:3", "", 1))
    cases.append(texts["regression"].replace("objective=regression", "objective=mse sqrt", 1))
    paths = []
    for i, text in enumerate(cases):
        paths.append(tmp_path / f"m{i}.txt")
        paths[-1].write_text(text)
        with pytest.raises(ModelFormatError):
            _quiet_load(text)
    results = lightgbm_reads(paths, _rows(), tmp_path)
    assert all(isinstance(r, str) for r in results.values()), results


def test_custom_objective_is_not_taken_for_regression():
    """A model trained with a custom objective has no objective line: it is 'custom' (no
    gradient), not LightGBM's default regression."""
    df, s = _data()

    def l2(preds, data):
        return preds - data.get_label(), np.ones_like(preds)

    booster = lgb.train({"objective": l2, "verbose": -1, "num_leaves": 4}, lgb.Dataset(df, s), 3)
    assert "\nobjective=" not in booster.model_to_string()
    ens = _quiet_load(booster.model_to_string())
    assert ens.objective == "custom"
    with pytest.raises(NotImplementedError, match="custom"):
        treeinner.tree_inner(ens, df, s)


# ---------------------------------------------------------------------- numeric fields
FIELD_CASES = [
    # (kind, tree, field, index, new value, names in the message)
    ("regression", 0, "num_leaves", 0, "x", ("num_leaves", "tree 0")),
    ("regression", 1, "num_leaves", 0, "0", ("num_leaves", "tree 1")),
    ("regression", 1, "num_cat", 0, "-1", ("num_cat", "tree 1")),
    ("regression", 0, "split_feature", 1, "5", ("split_feature", "tree 0", "feature outside")),
    ("regression", 0, "split_feature", 1, "-1", ("split_feature", "tree 0")),
    ("regression", 2, "split_gain", 0, "nan", ("split_gain", "tree 2")),
    ("regression", 0, "threshold", 2, "abc", ("threshold", "tree 0", "not a number")),
    ("regression", 0, "threshold", 2, "1.5x", ("threshold", "tree 0")),
    ("regression", 0, "threshold", 2, "0x10", ("threshold", "tree 0")),
    ("regression", 1, "decision_type", 0, "16", ("decision_type", "tree 1 split 0")),
    ("regression", 1, "decision_type", 0, "12", ("decision_type", "tree 1 split 0")),
    ("regression", 1, "decision_type", 0, "-1", ("decision_type", "tree 1 split 0")),
    ("regression", 0, "left_child", 0, "9", ("left_child", "tree 0 split 0")),
    ("regression", 0, "right_child", 0, "-99", ("right_child", "tree 0 split 0")),
    ("regression", 0, "left_child", 0, "0", ("left_child", "tree 0 split 0")),
    ("regression", 0, "leaf_value", 3, "inf", ("leaf_value", "tree 0")),
    ("regression", 0, "leaf_value", 3, "nan", ("leaf_value", "tree 0")),
    ("regression", 0, "leaf_value", 3, "1e200", ("tree 0", "leaf values")),
    ("regression", 2, "leaf_weight", 1, "-1", ("leaf_weight", "tree 2 leaf 1")),
    ("regression", 2, "leaf_weight", 1, "inf", ("leaf_weight", "tree 2 leaf 1")),
    ("regression", 2, "leaf_count", 1, "-3", ("leaf_count", "tree 2")),
    ("regression", 2, "leaf_count", 1, "1.5", ("leaf_count", "tree 2")),
    ("regression", 2, "internal_value", 0, "nan", ("internal_value", "tree 2")),
    ("regression", 2, "internal_weight", 0, "-4", ("internal_weight", "tree 2")),
    ("regression", 2, "internal_count", 1, "7", ("internal_count", "tree 2 split 1")),
    ("regression", 2, "internal_count", 1, "2147483648", ("internal_count", "tree 2")),
    ("regression", 1, "shrinkage", 0, "abc", ("shrinkage", "tree 1")),
    ("regression", 1, "is_linear", 0, "2", ("is_linear", "tree 1")),
    ("categorical", 0, "cat_boundaries", 1, "5", ("cat_boundaries", "tree 0")),
    ("categorical", 0, "cat_threshold", 0, "4294967296", ("cat_threshold", "tree 0")),
    ("categorical", 0, "cat_threshold", 0, "-1", ("cat_threshold", "tree 0")),
    ("categorical", 0, "num_cat", 0, "0", ("num_cat", "tree 0")),
    ("categorical", 0, "num_cat", 0, "2", ("cat_boundaries", "tree 0")),
    ("linear", 1, "leaf_const", 0, "nan", ("leaf_const", "tree 1")),
    ("linear", 1, "leaf_value", 0, "1e20", ("leaf_value", "leaf_const", "tree 1 leaf 0")),
    ("linear", 1, "num_features", 0, "-1", ("num_features", "tree 1")),
    ("linear", 1, "num_features", 0, "9", ("leaf_features", "tree 1")),
    ("linear", 1, "leaf_features", 0, "7", ("leaf_features", "tree 1", "feature outside")),
    ("linear", 1, "leaf_coeff", 0, "inf", ("leaf_coeff", "tree 1")),
    ("regression", -1, "max_feature_idx", 0, "x", ("max_feature_idx",)),
    ("regression", -1, "max_feature_idx", 0, "-1", ("max_feature_idx",)),
    ("regression", -1, "num_class", 0, "2", ("num_class",)),
    ("regression", -1, "num_class", 0, "abc", ("num_class",)),
    ("regression", -1, "num_tree_per_iteration", 0, "3", ("num_tree_per_iteration",)),
    ("regression", -1, "label_index", 0, "a", ("label_index",)),
    ("regression", -1, "feature_names", 0, "", ("feature_names",)),
    ("regression", -1, "feature_infos", 0, "[1:x]", ("feature_infos[0]",)),
    ("regression", -1, "feature_infos", 0, "", ("feature_infos",)),
    ("regression", -1, "tree_sizes", 1, "7", ("tree_sizes", "tree 1")),
    ("regression", -1, "tree_sizes", 1, "x", ("tree_sizes",)),
]


@pytest.mark.parametrize("case", FIELD_CASES, ids=lambda c: f"{c[0]}-{c[2]}-{c[4]}")
def test_corrupt_field_named(texts, case):
    kind, tree, field, idx, new, names = case
    text = _set(texts[kind], field, new, idx, tree)
    if field != "tree_sizes":
        text = _fix_sizes(text)
    _refused(text, *names)


def test_linear_field_counts(texts):
    """leaf_const, leaf_features and leaf_coeff agree with num_leaves and num_features."""
    text = texts["linear"]
    line = re.search(r"^Tree=1$(?:\n.*)*?\n(leaf_coeff=.*)$", text, flags=re.M)
    assert line is not None
    _refused(_fix_sizes(_set(text, "leaf_const", "0.1 0.2", 0, 1)), "leaf_const", "tree 1")
    coeff = line.group(1)
    _refused(_fix_sizes(text.replace(coeff, coeff + " 0.5", 1)), "leaf_coeff", "tree 1")
    _refused(_fix_sizes(text.replace("\nleaf_coeff=", "\nleaf_coef=", 1)), "leaf_coef", "tree 0")


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (lambda t: t.replace("\nleaf_count=", "\nleaf_count=1 ", 1), ("leaf_count", "tree 0")),
        (lambda t: t.replace("\nleaf_weight=", "\nleaf_weight=\nleaf_weight=", 1), ("twice",)),
        (lambda t: t.replace("\nshrinkage=", "\nshrinkage=1\nshrinkage=", 1), ("shrinkage",)),
        (lambda t: t.replace("\nis_linear=0", "\nis_linear=0\nmystery=1", 1), ("mystery",)),
        (lambda t: t.replace("\nis_linear=0", "\nis_linear=0\nno equals sign", 1), ("tree 0",)),
        (lambda t: t.replace("\nnum_cat=0\n", "\n", 1), ("num_cat", "tree 0")),
        (lambda t: t.replace("\nleaf_count=", "\nleaf_cnt=", 1), ("leaf_cnt", "tree 0")),
        (lambda t: re.sub(r"\nleaf_count=.*", "", t, count=1), ("lacks leaf_count", "tree 0")),
        (
            lambda t: re.sub(r"\ninternal_count=.*", "", t, count=1),
            ("lacks internal_count", "tree 0"),
        ),
        (lambda t: t.replace("\nlabel_index=0\n", "\n", 1), ("label_index",)),
        (lambda t: t.replace("\nversion=v4\n", "\nversion=v4=5\n", 1), ("version",)),
        (lambda t: t.replace("\nnum_class=1\n", "\nnum_class=1\nnum_class=1\n", 1), ("twice",)),
        (
            lambda t: t.replace("end of trees", "end of trees\npandas_categorical:null", 1),
            ("pandas_categorical",),
        ),
        (lambda t: t.replace("[boosting: gbdt]", "boosting = gbdt", 1), ("parameter line",)),
        (lambda t: t.replace("\n", "\r\n"), ("line endings",)),
    ],
)
def test_corrupt_lines_named(texts, edit, names):
    text = _fix_sizes(edit(texts["regression"]))
    _refused(text, *names)


def test_zero_count_split_refused(texts):
    """A split whose leaves hold no rows: TreeSHAP would divide by its zero count."""
    text = texts["regression"]
    for field in ("leaf_count", "internal_count"):
        line = re.search(rf"^{field}=(.*)$", text, flags=re.M)
        zeros = " ".join("0" for _ in line.group(1).split())
        text = text[: line.start()] + f"{field}={zeros}" + text[line.end() :]
    _refused(_fix_sizes(text), "tree 0 split", "leaf_count", "sum to 0")


def test_cycle_and_shared_nodes_refused(texts):
    text = texts["regression"]
    left = re.search(r"^left_child=(.*)$", text, flags=re.M).group(1).split()
    shared = _set(text, "left_child", left[1], 0) if left[1] != left[0] else text
    _refused(_fix_sizes(_set(text, "right_child", "1", 1)), "tree 0")
    if shared is not text:
        _refused(_fix_sizes(shared), "tree 0")


def test_tree_sizes_disagreeing_with_the_trees(texts, tmp_path):
    """A tree edited in place (a value of another length) no longer sits where tree_sizes puts
    it: LightGBM aborts reading it; treeinner refuses it, naming tree_sizes."""
    text = _set(texts["regression"], "threshold", "0.5", 0, 1)
    _refused(text, "tree_sizes", "tree 1")
    moved, fixed = tmp_path / "moved.txt", tmp_path / "fixed.txt"
    moved.write_text(text)
    fixed.write_text(_fix_sizes(text))  # tree_sizes made to agree: both read it, identically
    theirs = lightgbm_reads([moved, fixed], _rows(), tmp_path)
    assert isinstance(theirs[moved], str)
    assert _same(_quiet_load(_fix_sizes(text)), _rows(), theirs[fixed]) == ""


# ---------------------------------------------------------------------- deep trees, dump JSON
def _chain_text(depth: int) -> str:
    """A valid model text of one chain tree ``depth`` splits deep (split i: x <= i + 0.5 goes
    to leaf i, else on down the chain)."""
    L = depth + 1
    counts = " ".join(str(L - i) for i in range(depth))
    fields = {
        "num_leaves": str(L),
        "num_cat": "0",
        "split_feature": " ".join("0" * depth),
        "split_gain": " ".join("1" * depth),
        "threshold": " ".join(f"{i}.5" for i in range(depth)),
        "decision_type": " ".join("2" * depth),
        "left_child": " ".join(str(-(i + 1)) for i in range(depth)),
        "right_child": " ".join(str(i + 1) for i in range(depth - 1)) + f" {-L}",
        "leaf_value": " ".join(f"{(i % 97) / 1000:.3f}" for i in range(L)),
        "leaf_weight": " ".join("1" * L),
        "leaf_count": " ".join("1" * L),
        "internal_value": " ".join("0" * depth),
        "internal_weight": counts,
        "internal_count": counts,
        "is_linear": "0",
        "shrinkage": "1",
    }
    block = "Tree=0\n" + "".join(f"{k}={v}\n" for k, v in fields.items()) + "\n\n"
    header = (
        "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\n"
        f"max_feature_idx=0\nobjective=regression\nfeature_names=x\n"
        f"feature_infos=[0:{L}]\ntree_sizes={len(block)}\n\n"
    )
    tail = "end of trees\n\nparameters:\n[boost_from_average: 0]\nend of parameters\n"
    return header + block + tail


def _lightgbm_dump(booster) -> str:
    """LightGBM's own dump_model() JSON text (its Python wrapper cannot decode deep ones)."""
    import ctypes

    size = 1 << 24
    out_len = ctypes.c_int64(0)
    buf = ctypes.create_string_buffer(size)
    lgb.basic._safe_call(
        lgb.basic._LIB.LGBM_BoosterDumpModel(
            booster._handle,
            ctypes.c_int(0),
            ctypes.c_int(-1),
            ctypes.c_int(0),
            ctypes.c_int64(size),
            ctypes.byref(out_len),
            ctypes.c_char_p(ctypes.addressof(buf)),
        )
    )
    assert out_len.value <= size
    return buf.value.decode("utf-8")


def test_deep_dump_json_read(tmp_path):
    """A valid dump of a chain tree 3000 deep (deeper than Python's JSON recursion limit) is
    read, with LightGBM's margins; the recursion limit and thread stack size are restored."""
    text = _chain_text(3000)
    booster = lgb.Booster(model_str=text)
    raw = _lightgbm_dump(booster)
    with pytest.raises(RecursionError):
        json.loads(raw)
    path = tmp_path / "deep.json"
    path.write_text(raw)
    limit, stack = sys.getrecursionlimit(), threading.stack_size()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.load(path)
    assert (sys.getrecursionlimit(), threading.stack_size()) == (limit, stack)
    assert ens.max_depth == 3000
    X = np.concatenate([np.arange(0, 3002, 7.0), [np.nan, -1.0, 2999.5, 3000.0]])[:, None]
    np.testing.assert_allclose(
        ens.predict_margin(X), booster.predict(X, raw_score=True), rtol=0, atol=1e-12
    )
    assert np.array_equal(ens.leaf_index(X).ravel(), booster.predict(X, pred_leaf=True).ravel())
    from_text = _quiet_load(text)
    # the dump records no boost_from_average: its intercept is moved out, rounding the last bit
    np.testing.assert_allclose(from_text.predict_margin(X), ens.predict_margin(X), atol=1e-15)


def test_too_deep_json_named(tmp_path, monkeypatch):
    """Beyond the depth treeinner reads, the error names the depth and the remedy."""
    import treeinner.adapters as adapters

    monkeypatch.setattr(adapters, "MAX_JSON_DEPTH", 2000)
    path = tmp_path / "deep.json"
    path.write_text(_lightgbm_dump(lgb.Booster(model_str=_chain_text(3000))))
    with pytest.raises(ModelFormatError, match=r"nests JSON 30\d\d levels deep.*model text"):
        treeinner.load(path)


@pytest.fixture(scope="module")
def dump(texts) -> dict:
    return lgb.Booster(model_str=texts["categorical"]).dump_model()


def _root(doc: dict, tree: int = 0) -> dict:
    return doc["tree_info"][tree]["tree_structure"]


def _first_leaf(node: dict) -> dict:
    while "leaf_value" not in node:
        node = node["left_child"]
    return node


def _first_numeric(node: dict) -> dict:
    stack = [node]
    while stack:
        nd = stack.pop()
        if nd.get("decision_type") == "<=":
            return nd
        stack += [nd[k] for k in ("left_child", "right_child") if k in nd]
    raise AssertionError("no numeric split")


DUMP_CASES = [
    (lambda d: _first_leaf(_root(d)).update(leaf_count=-2), ("leaf_count", "tree 0 leaf")),
    (lambda d: _first_leaf(_root(d)).update(leaf_count=1.5), ("leaf_count", "tree 0 leaf")),
    (lambda d: _first_leaf(_root(d)).update(leaf_count="3"), ("leaf_count", "tree 0 leaf")),
    (lambda d: _first_leaf(_root(d)).pop("leaf_count"), ("leaf_count", "tree 0 leaf")),
    (lambda d: _first_leaf(_root(d)).update(leaf_weight=-1.0), ("leaf_weight", "tree 0 leaf")),
    (lambda d: _first_leaf(_root(d)).update(leaf_value=float("nan")), ("leaf value", "tree 0")),
    (lambda d: _first_leaf(_root(d)).update(leaf_value=True), ("leaf_value", "tree 0 leaf")),
    (lambda d: _root(d).update(default_left="false"), ("default_left", "tree 0 split 0")),
    (lambda d: _root(d).pop("default_left"), ("lacks default_left", "tree 0 split 0")),
    (lambda d: _root(d, 1).pop("split_gain"), ("split_gain", "tree 1 split")),
    (lambda d: _root(d, 1).pop("internal_count"), ("internal_count", "tree 1 split")),
    (lambda d: _root(d, 1).update(internal_count=1), ("internal_count", "tree 1 split 0")),
    (lambda d: _root(d, 1).update(split_gain=float("inf")), ("split_gain", "tree 1")),
    (lambda d: _root(d, 1).update(split_feature=True), ("split_feature", "tree 1")),
    (lambda d: _root(d, 1).update(split_index=True), ("split_index", "tree 1")),
    (lambda d: _first_numeric(_root(d)).update(threshold="0.5"), ("threshold", "tree 0")),
    (lambda d: _root(d).update(threshold="1||x"), ("threshold", "tree 0")),
    (lambda d: _root(d).update(missing_type=["NaN"]), ("missing_type", "tree 0")),
    (lambda d: d["tree_info"][1].update(num_leaves=3), ("num_leaves", "tree 1")),
    (lambda d: d["tree_info"][1].update(tree_index=0), ("tree_index", "tree 1")),
    (lambda d: d["tree_info"][0].update(num_cat=0), ("num_cat", "tree 0")),
    (lambda d: d["tree_info"][0].update(shrinkage="x"), ("shrinkage", "tree 0")),
    (lambda d: d.update(max_feature_idx="4"), ()),  # a JSON string holding a number is read
    (lambda d: d.update(max_feature_idx=1.5), ("max_feature_idx",)),
    (lambda d: d.update(num_class=2), ("num_class",)),
    (lambda d: d.update(objective="binary"), ("sigmoid", "objective")),
    (lambda d: d.update(feature_names=["a", "b"]), ("feature_names",)),
    (lambda d: d.update(average_output="no"), ("average_output",)),
]


@pytest.mark.parametrize("case", range(len(DUMP_CASES)))
def test_corrupt_dump_named(dump, case):
    edit, names = DUMP_CASES[case]
    doc = json.loads(json.dumps(dump))
    edit(doc)
    if not names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lgb_adapter.from_dump(doc)
        return
    with pytest.raises(ModelFormatError) as info:
        lgb_adapter.from_dump(doc)
    for name in names:
        assert name in str(info.value), (name, str(info.value))


def test_linear_dump_checked(tmp_path):
    booster = lgb.Booster(model_str=_train("linear"))
    doc = booster.dump_model()
    leaf = _first_leaf(_root(doc, 1))
    assert leaf["leaf_features"], leaf
    for key, value, name in [
        ("leaf_features", [99] * len(leaf["leaf_features"]), "feature"),
        ("leaf_coeff", [], "leaf_coeff"),
        ("leaf_const", "x", "leaf_const"),
    ]:
        bad = json.loads(json.dumps(doc))
        _first_leaf(_root(bad, 1))[key] = value
        with pytest.raises(ModelFormatError, match=name):
            lgb_adapter.from_dump(bad)


# ---------------------------------------------------------------------- random mutations
N_MUTATIONS = 330
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_NUMBERS = (
    "0",
    "1",
    "-1",
    "2",
    "3",
    "5",
    "7",
    "16",
    "255",
    "100",
    "-0",
    "0.5",
    "1.5",
    "1e308",
    "1e-40",
    "2147483648",
    "4294967296",
)
_GARBAGE = (
    "abc",
    "nan",
    "inf",
    "-inf",
    "",
    " ",
    "1x",
    "--1",
    "1e",
    "1 2",
    "=",
    ":",
    "0x10",
    "1_0",
    "\t",
)


def _mutate(text: str, rng: np.random.Generator) -> tuple[str, str]:
    """One random corruption of ``text``, and its description."""
    kind = int(rng.integers(5))
    lines = text.split("\n")
    if kind < 2:
        found = list(_NUMBER.finditer(text))
        m = found[int(rng.integers(len(found)))]
        new = str(rng.choice(_NUMBERS if kind == 0 else _GARBAGE))
        if kind == 0 and rng.random() < 0.3:
            new = str(int(rng.integers(-10, 40)))
        return text[: m.start()] + new + text[m.end() :], f"{m.group()!r}->{new!r} at {m.start()}"
    i = int(rng.integers(len(lines)))
    if kind == 2:
        return "\n".join(lines[:i] + lines[i + 1 :]), f"delete line {i} {lines[i][:30]!r}"
    if kind == 3:
        return "\n".join(lines[: i + 1] + lines[i:]), f"duplicate line {i} {lines[i][:30]!r}"
    cut = int(rng.integers(1, len(text)))
    return text[:cut], f"truncate at {cut}"


def _trees_part(text: str) -> str:
    end = re.search(r"^end of trees$", text, flags=re.M)
    return text[: end.start()] if end else text


def test_random_mutations_refused_or_exact(texts, tmp_path):
    """Seeded random corruptions of every model's text (a number replaced by another or by
    garbage, a line deleted or duplicated, the file truncated; half with tree_sizes made to
    agree, so that LightGBM reads the corrupted trees): each is refused with a ModelFormatError
    (never another exception; a hang would be stopped by the suite's per-test timeout), or
    read with LightGBM's margins and leaves on the same text. Where
    LightGBM refuses a text treeinner reads, only the parameters section differs (LightGBM's
    reader parses every parameter; treeinner checks those it uses): the trees are the original
    ones, and treeinner's margins are LightGBM's on the original text."""
    rng = np.random.default_rng(17)
    X = _rows()
    originals = {}
    for kind in KINDS:
        originals[kind] = tmp_path / f"{kind}.txt"
        originals[kind].write_text(texts[kind])
    loaded, refused = [], 0
    for i in range(N_MUTATIONS):
        kind = KINDS[i % len(KINDS)]
        text, what = _mutate(texts[kind], rng)
        if i % 2:
            text, what = _fix_sizes(text), what + " (tree_sizes fixed)"
        try:
            ens = _quiet_load(text)
        except ModelFormatError:
            refused += 1
            ens = None
        if ens is not None:
            path = tmp_path / f"case{i}.txt"
            path.write_text(text)
            loaded.append((path, kind, what, text, ens))
    theirs = lightgbm_reads([c[0] for c in loaded] + list(originals.values()), X, tmp_path)
    failures = []
    for path, kind, what, text, ens in loaded:
        result = theirs[path]
        if isinstance(result, str):
            if _trees_part(text) != _trees_part(texts[kind]):
                failures.append(f"{kind} {what}: LightGBM refuses ({result[:80]}), treeinner reads")
                continue
            result = theirs[originals[kind]]
        diff = _same(ens, X, result)
        if diff:
            failures.append(f"{kind} {what}: {diff}")
    assert not failures, failures
    assert refused > N_MUTATIONS // 3 and len(loaded) > N_MUTATIONS // 10, (refused, len(loaded))


_JSON_VALUES = (None, True, False, -1, 0, 1, 2, 1.5, -0.0, 1e308, float("nan"), float("inf"),
                "x", "1", "<=", "==", "NaN", "Zero", "1||2", [], {}, [1, 2], 2**40)  # fmt: skip


def _json_paths(node, path=()):
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(
        node, list) else ()  # fmt: skip
    for key, value in items:
        yield from _json_paths(value, path + (key,))


def test_random_dump_mutations_refused_or_read(texts):
    """Seeded random corruptions of dump_model() documents (a value replaced by one of another
    type or range, a key removed) end in a ModelFormatError or a model:
    never another exception (nor a hang: the suite's per-test timeout stops one)."""
    rng = np.random.default_rng(5)
    docs = [lgb.Booster(model_str=texts[kind]).dump_model() for kind in KINDS]
    outcomes = {"refused": 0, "read": 0}
    for i in range(N_MUTATIONS):
        doc = json.loads(json.dumps(docs[i % len(docs)]))
        paths = [p for p in _json_paths(doc) if p]
        path = paths[int(rng.integers(len(paths)))]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and rng.random() < 0.3:
            del parent[path[-1]]
        else:
            parent[path[-1]] = _JSON_VALUES[int(rng.integers(len(_JSON_VALUES)))]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lgb_adapter.from_dump(doc)
            outcomes["read"] += 1
        except ModelFormatError:
            outcomes["refused"] += 1
    assert min(outcomes.values()) > N_MUTATIONS // 10, outcomes


@pytest.mark.parametrize(
    "doc",
    [
        {"learner": {"attributes": {}, "x": "[" * 3000 + "]" * 3000}},  # deep outside any tree
        {
            "tree_info": [
                {"tree_structure": {"left_child": {"default_left": "[" * 3000 + "]" * 3000}}}
            ]
        },
    ],
)
def test_deep_json_outside_child_links_refused(tmp_path, doc):
    """A document decoded past Python's recursion limit may nest deeply only through tree
    nodes' child links; a deep value anywhere else (which a message's repr or a copy would
    overflow the stack on) is refused by name, not a RecursionError."""
    import json

    text = json.dumps(doc).replace(json.dumps("[" * 3000 + "]" * 3000), "[" * 3000 + "]" * 3000)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match="levels deep at .* outside a tree's child links"):
        treeinner.load(path)


def test_outlying_first_leaf_keeps_the_other_rows_exact(texts):
    """A leaf value of 2**70 in a class's first tree pulls the boost_from_average intercept
    far out; moving that intercept out of the tree would round every other leaf (margins of
    rows that never reach the leaf were off by 0.6). It stays in the tree: LightGBM's margins."""
    text = _fix_sizes(_set(texts["multiclass"], "leaf_value", str(2**70), 1, tree=2))
    X = _rows()[:-4]
    theirs = lgb.Booster(model_str=text).predict(X, raw_score=True)
    ours = _quiet_load(text).predict_margin(X)
    far = np.abs(theirs) > 1e6  # the rows in the outlying leaf
    assert far.any() and (~far).any()
    np.testing.assert_allclose(ours[~far], theirs[~far], rtol=1e-14, atol=1e-14)
