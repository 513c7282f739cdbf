"""The CatBoost adapter refuses every corrupt model; CatBoost never crashes treeinner.

CatBoost reads a corrupt JSON model out of bounds instead of raising: without ``ctr_data``, with
a ``hash_stride`` of 0 or too large, or with categorical features out of order, loading or
routing rows dies with SIGSEGV / SIGFPE. treeinner validates what CatBoost reads (every CTR a
split uses has a well formed table) and, before it loads a document into CatBoost in its own
process, probes it in a worker process (``_cb_categorical.probe``). Everything that could
crash runs in subprocesses here, so a regression fails a test instead of killing pytest.

``test_seeded_mutations_refused_or_equal`` mutates real small models (numeric and categorical,
oblivious and not) at random with a fixed seed: each case must be refused with
ModelFormatError or give CatBoost's own margins on the same file (CatBoost, the oracle, runs
every case in a forked process of its own).
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner.adapters import _cb_categorical as cbc
from treeinner.adapters import catboost as cba

cb = pytest.importorskip("catboost")

CAT = ["c1", "c2"]


# ---------------------------------------------------------------------- models
def _fit(params, X, y):
    m = cb.CatBoost(
        {
            "iterations": 4,
            "depth": 3,
            "verbose": 0,
            "random_seed": 0,
            "thread_count": 1,
            "allow_writing_files": False,
            **params,
        }  # fmt: skip
    )
    m.fit(X, y)
    return m


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Small real models (numeric / categorical, oblivious / not), their JSON files and data."""
    d = tmp_path_factory.mktemp("cb_hardening")
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({"a": rng.normal(size=n), "c1": rng.choice(list("abcdef"), n),
                      "b": rng.normal(size=n), "c2": rng.choice(list("xyz"), n)})  # fmt: skip
    y = X.a + X.c1.isin(["a", "b"]) + 0.3 * rng.normal(size=n)
    num = X[["a", "b"]]
    specs = {
        "num_sym": ({"loss_function": "RMSE"}, num, y),
        "num_lossguide": ({"grow_policy": "Lossguide", "max_leaves": 6}, num, y),
        "cat_sym": ({"loss_function": "Logloss", "one_hot_max_size": 3, "cat_features": CAT},
                    X, (y > 0.5).astype(int)),
        "cat_depthwise": ({"grow_policy": "Depthwise", "cat_features": CAT}, X, y),
        "cat_multi": ({"loss_function": "MultiClass", "one_hot_max_size": 4,
                       "max_ctr_complexity": 2, "cat_features": CAT},
                      X, np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))),
    }  # fmt: skip
    out = {"dir": d, "X": X, "models": {}, "docs": {}, "paths": {}}
    for name, (params, Xs, ys) in specs.items():
        m = _fit(params, Xs, ys)
        path = str(d / f"{name}.json")
        m.save_model(path, format="json")
        out["models"][name], out["paths"][name] = m, path
        with open(path) as fh:
            out["docs"][name] = json.load(fh)
    out["csv"] = str(d / "X.csv")
    X.assign(y=y).to_csv(out["csv"], index=False)
    return out


def _doc(models, name):
    return copy.deepcopy(models["docs"][name])


def _refused(doc, *fields, cls=treeinner.ModelFormatError):
    """from_json refuses ``doc`` with ``cls``, naming every one of ``fields``."""
    with pytest.raises(cls) as e:
        cba.from_json(doc)
    for f in fields:
        assert f in str(e.value), (f, str(e.value))
    return str(e.value)


def _tables(doc):
    return list(doc["ctr_data"].values())


# ---------------------------------------------------------------------- crashes
#: Mutations of ctr_data / features_info that crash CatBoost itself (found by experiment:
#: SIGSEGV without ctr_data, with a huge stride or with categorical features out of order,
#: SIGFPE with a stride of 0 or none), each with a field the refusal must name.
CRASHERS = {
    "no_ctr_data": (lambda d: d.pop("ctr_data"), "ctr_data"),
    "stride_0": (lambda d: _tables(d)[0].update(hash_stride=0), "hash_stride"),
    "stride_missing": (lambda d: _tables(d)[0].pop("hash_stride"), "hash_stride"),
    "stride_huge": (lambda d: _tables(d)[0].update(hash_stride=1000), "hash_stride"),
    "cats_swapped": (
        lambda d: (lambda c: c.__setitem__(slice(None), [
            {**c[0], "flat_feature_index": c[1]["flat_feature_index"]},
            {**c[1], "flat_feature_index": c[0]["flat_feature_index"]}]))(
            d["features_info"]["categorical_features"]),
        "flat_feature_index",
    ),
}  # fmt: skip

#: Mutations CatBoost does not crash on but reads wrongly or refuses at apply time.
CORRUPT_CTR = {
    "empty_ctr_data": (lambda d: d.update(ctr_data={}), "ctr_data has no table"),
    "table_truncated": (lambda d: _tables(d)[0].update(hash_map=_tables(d)[0]["hash_map"][:-1]),
                        "hash_map"),
    "hash_not_string": (lambda d: _tables(d)[0]["hash_map"].__setitem__(0, 12345), "hash_map[0]"),
    "count_not_int": (lambda d: _tables(d)[0]["hash_map"].__setitem__(1, "7"), "hash_map[1]"),
    "count_negative": (lambda d: _tables(d)[0]["hash_map"].__setitem__(1, -7), "hash_map[1]"),
    "hash_twice": (lambda d: _tables(d)[0]["hash_map"].__setitem__(
        _tables(d)[0]["hash_stride"], _tables(d)[0]["hash_map"][0]), "twice"),
    "key_garbage": (lambda d: d.update(ctr_data={"xyz": _tables(d)[0]}), "CTR identifier"),
    "target_border_idx": (lambda d: [c.update(target_border_idx=5)
                                     for c in d["features_info"]["ctrs"]], "target_border_idx"),
    "prior_not_number": (lambda d: d["features_info"]["ctrs"][0].update(prior_numerator="x"),
                         "prior_numerator"),
    "ctr_border_nan": (lambda d: d["features_info"]["ctrs"][0].update(borders=[float("nan")]),
                       "borders"),
}  # fmt: skip

#: Runs in a subprocess: every way a document reaches CatBoost in-process (from_json, the
#: routing's loader without validation, a v3 .npz, the CLI), each case reported as one line.
_CHILD = r"""
import contextlib, io, json, sys, warnings
warnings.simplefilter("ignore")
import pandas as pd
import treeinner
from treeinner import cli
from treeinner.adapters import _cb_categorical as cbc
from treeinner.adapters import catboost as cba
X = pd.read_csv(sys.argv[1]).drop(columns="y")
for line in sys.stdin:
    kind, path = json.loads(line)
    try:
        if kind == "json":
            with open(path) as fh:
                cba.from_json(json.load(fh)).predict_margin(X)
        elif kind == "load":  # the loader itself, past validation: the probe must refuse
            with open(path) as fh:
                cbc._load(json.load(fh))
        elif kind == "npz":
            treeinner.TreeEnsemble.load_npz(path).predict_margin(X)
        else:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(["explain", path, "--data", sys.argv[1], "--target", "y"])
            raise treeinner.ModelFormatError(f"exit {code}: {err.getvalue()}") if code else 0
        out = ["accepted", ""]
    except treeinner.ModelFormatError as e:
        out = ["refused", str(e)]
    except Exception as e:
        out = ["other", f"{type(e).__name__}: {e}"]
    print(json.dumps([kind, path, *out]), flush=True)
"""


def _in_child(models, jobs):
    """Run ``jobs`` ((kind, path) pairs) in one subprocess; its outcomes by (kind, path)."""
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, models["csv"]],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, f"the child died ({res.returncode}): {res.stderr[-2000:]}"
    lines = [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == len(jobs), res.stderr[-2000:]
    return {(k, p): (status, msg) for k, p, status, msg in lines}


def _corrupt_npz(models, tmp_path, name, mutate):
    """A v3 .npz of a categorical model whose stored document is mutated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.from_model(models["models"][name])
    good = tmp_path / f"{name}.npz"
    ens.save(good)
    with np.load(good, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    doc = json.loads(arrays["input_map_document"].tobytes().decode())
    mutate(doc)
    arrays["input_map_document"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    path = tmp_path / f"{name}_bad.npz"
    np.savez(path, **arrays)
    return str(path)


def test_crashing_documents_are_refused_everywhere(models, tmp_path):
    """Every mutation that crashes CatBoost is refused, naming the field, by from_json, the
    CLI and a v3 .npz; and the loader refuses it even past validation (the probe)."""
    jobs, want = [], {}
    for name in ("cat_sym", "cat_depthwise", "cat_multi"):
        for mut, (fn, field) in {**CRASHERS, **CORRUPT_CTR}.items():
            doc = _doc(models, name)
            fn(doc)
            path = str(tmp_path / f"{name}_{mut}.json")
            with open(path, "w") as fh:
                json.dump(doc, fh)
            kinds = ["json"]
            if mut in CRASHERS:
                kinds += ["npz", "cli"] if name == "cat_sym" else []
            if name == "cat_sym" and mut in ("no_ctr_data", "stride_0"):  # SIGSEGV, SIGFPE
                kinds.append("load")
            for kind in kinds:
                p = _corrupt_npz(models, tmp_path, name, fn) if kind == "npz" else path
                jobs.append((kind, p))
                want[(kind, p)] = "CatBoost crashed" if kind == "load" else field
    got = _in_child(models, jobs)
    for job, field in want.items():
        status, msg = got[job]
        assert status == "refused", (job, status, msg)
        assert field in msg, (job, field, msg)


def test_probe_verdict_cached_and_worker_reused(models, monkeypatch):
    """The probe refuses a crashing document once per process (its verdict cached: asking
    again runs no probe) and passes real models, each further one in the same worker process
    (catboost imported once)."""
    monkeypatch.setattr(cbc, "_verdicts", {})  # nothing probed yet in this process
    bad = _doc(models, "cat_sym")
    bad.pop("ctr_data")
    with pytest.raises(treeinner.ModelFormatError, match="CatBoost crashed"):
        cbc.probe(bad)
    with monkeypatch.context() as m:

        def fail(text, timeout):
            raise AssertionError("a cached verdict was probed again")

        m.setattr(cbc, "_run_probe", fail)
        with pytest.raises(treeinner.ModelFormatError, match="CatBoost crashed"):
            cbc.probe(bad)
    pids = []
    for name in ("cat_depthwise", "cat_multi"):
        cbc.probe(models["docs"][name])
        assert cbc._worker and cbc._worker[0].poll() is None
        pids.append(cbc._worker[0].pid)
    assert pids[0] == pids[1]


def test_in_memory_models_are_not_probed(models, monkeypatch):
    """A fitted model came from catboost itself: routing it never probes."""

    def fail(doc, timeout=None):
        raise AssertionError("probed an in-memory model")

    monkeypatch.setattr(cbc, "probe", fail)
    for name in ("cat_sym", "cat_depthwise", "cat_multi"):
        model = models["models"][name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = treeinner.from_model(model).predict_margin(models["X"])
        want = model.predict(models["X"], prediction_type="RawFormulaVal")
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=name)
    with pytest.raises(AssertionError, match="probed"):  # a document alone is probed
        cba.from_json(models["docs"]["cat_sym"])


def test_corrupt_ctr_data_refused_naming_the_field(models):
    """Validation refuses corrupt CTR tables before CatBoost sees them (in-process: nothing
    here reaches CatBoost, the probe would refuse it otherwise)."""
    for name in ("cat_sym", "cat_multi"):
        for fn, field in {**CRASHERS, **CORRUPT_CTR}.values():
            doc = _doc(models, name)
            fn(doc)
            _refused(doc, field)


# ---------------------------------------------------------------------- leaf weights
def test_negative_and_non_finite_leaf_weights_refused(models):
    doc = _doc(models, "num_sym")
    doc["oblivious_trees"][1]["leaf_weights"][3] = -2.0
    _refused(doc, "tree 1", "leaf_weights[3]", "-2")
    doc = _doc(models, "num_sym")
    doc["oblivious_trees"][0]["leaf_weights"][0] = float("inf")
    _refused(doc, "leaf_weights[0]")
    doc = _doc(models, "num_lossguide")
    node = doc["trees"][2]
    while "split" in node:
        node = node["left"]
    node["weight"] = -1
    _refused(doc, "tree 2 node", "weight is -1")


def test_leaf_weights_in_every_tree_or_none(models):
    doc = _doc(models, "num_sym")
    del doc["oblivious_trees"][2]["leaf_weights"]
    _refused(doc, "tree 2", "leaf_weights")
    doc = _doc(models, "num_sym")
    doc["oblivious_trees"][1]["leaf_weights"].pop()
    _refused(doc, "tree 1", "leaf_weights")


def test_zero_leaf_weights_real_and_exact():
    """Leaves no training row reached weigh 0 in real symmetric models (value 0 too), and
    inner nodes can weigh 0: TreeSHAP equals CatBoost's ShapValues there. A zero-weight leaf
    with a non-zero value is not something CatBoost writes: refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = X[:, 0] + 2 * (X[:, 1] > 0.5) + 0.1 * rng.normal(size=60)
    m = _fit({"depth": 6, "iterations": 6, "min_data_in_leaf": 1}, X, y)
    ens = treeinner.from_model(m)
    inner = ens.left >= 0
    assert (ens.count[inner] == 0).sum() > 10 and (ens.count[~inner] == 0).sum() > 10
    Xa = 2 * rng.normal(size=(40, 4))
    sv = np.asarray(m.get_feature_importance(cb.Pool(Xa), type="ShapValues"))
    np.testing.assert_allclose(treeinner.tree_shap(ens, Xa).values, sv[:, :-1], atol=1e-12)
    doc = _json(m)
    t = next(i for i, t in enumerate(doc["oblivious_trees"]) if 0 in t["leaf_weights"])
    leaf = doc["oblivious_trees"][t]["leaf_weights"].index(0)
    assert doc["oblivious_trees"][t]["leaf_values"][leaf] == 0
    doc["oblivious_trees"][t]["leaf_values"][leaf] = 0.25
    _refused(doc, f"tree {t}: leaf {leaf}", "weight 0", "0.25")


def _json(model):
    return json.loads(cba._json_export(model).decode())


# ---------------------------------------------------------------------- split borders
_PREDICT = r"""
import json, sys
import numpy as np
from catboost import CatBoost
X = np.array(json.loads(sys.argv[1]))
out = []
for path in sys.argv[2:]:
    m = CatBoost()
    m.load_model(path, format="json")
    out.append(m.predict(X, prediction_type="RawFormulaVal").tolist())
print(json.dumps(out))
"""


def test_split_border_must_be_the_features_border(models, tmp_path):
    """CatBoost routes by split_index (the feature's border), not by the split's own border:
    on the mutated file CatBoost's margins are the original's, so a split whose border is not
    the border split_index names is refused."""
    doc = _doc(models, "num_sym")
    split = doc["oblivious_trees"][0]["splits"][0]
    split["border"] += 0.5
    path = str(tmp_path / "moved.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    X = models["X"][["a", "b"]].to_numpy()[:50]
    res = subprocess.run(
        [sys.executable, "-c", _PREDICT, json.dumps(X.tolist()), models["paths"]["num_sym"], path],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    orig, moved = json.loads(res.stdout)
    assert orig == moved
    _refused(doc, "tree 0: splits[0].border", "split_index")
    for fn, field in [
        (lambda s: s.update(split_index=s["split_index"] + 1), "split_index"),
        (lambda s: s.update(split_index=10**6), "split_index"),
        (lambda s: s.update(float_feature_index=1 - s["float_feature_index"]), "float_feature"),
        (lambda s: s.update(split_type="OnlineCtr"), "split_type"),
    ]:
        doc = _doc(models, "num_sym")
        fn(doc["oblivious_trees"][0]["splits"][0])
        _refused(doc, field)
    doc = _doc(models, "num_sym")
    borders = doc["features_info"]["float_features"][0]["borders"]
    borders[0], borders[1] = borders[1], borders[0]
    _refused(doc, "features_info.float_features[0].borders", "not increasing")


def test_categorical_split_fields_checked(models):
    doc = _doc(models, "cat_multi")
    splits = [s for t in doc["oblivious_trees"] for s in t["splits"]]
    one_hot = next(s for s in splits if s["split_type"] == "OneHotFeature")
    one_hot["value"] += 1
    _refused(doc, "value", "split_index")
    doc = _doc(models, "cat_multi")
    splits = [s for t in doc["oblivious_trees"] for s in t["splits"]]
    ctr = next(s for s in splits if s["split_type"] == "OnlineCtr")
    ctr["ctr_target_border_idx"] = ctr.get("ctr_target_border_idx", 0) + 1
    _refused(doc, "ctr_target_border_idx", "split_index")


# ---------------------------------------------------------------------- tree counts
def test_tree_count_fields_agree(models):
    """What fixes CatBoost's tree count and outputs (trees, leaf_values per depth, the biases
    of scale_and_bias, leaf weights) must agree, each refusal naming its field."""
    doc = _doc(models, "num_sym")
    doc["oblivious_trees"][1]["leaf_values"].append(0.0)
    _refused(doc, "tree 1", "leaf_values")
    doc = _doc(models, "cat_multi")
    doc["scale_and_bias"][1].pop()
    _refused(doc, "leaf_values", "scale_and_bias")
    doc = _doc(models, "num_sym")
    doc["scale_and_bias"][1] = 0.5
    _refused(doc, "scale_and_bias[1]")
    doc = _doc(models, "num_sym")
    doc["trees"] = [{"value": 1.0}]
    _refused(doc, "oblivious_trees and trees")
    doc = _doc(models, "num_lossguide")
    doc["trees"][0]["value"] = 1.0  # a split that is also a leaf: CatBoost reads a leaf
    _refused(doc, "tree 0 node 0", "both a split and a value")
    doc = _doc(models, "cat_multi")
    doc["oblivious_trees"][0]["splits"].pop()
    _refused(doc, "tree 0", "leaf_values")


# ---------------------------------------------------------------------- numeric fields
NUMERIC = [
    (lambda d: d["features_info"]["float_features"][0].update(flat_feature_index="0"),
     "float_features[0].flat_feature_index"),
    (lambda d: d["features_info"]["float_features"][1].update(feature_index=0),
     "float_features[1].feature_index"),
    (lambda d: d["features_info"]["float_features"][0]["borders"].__setitem__(0, "x"),
     "float_features[0].borders[0]"),
    (lambda d: d["features_info"]["float_features"][0]["borders"].__setitem__(0, 1e300),
     "float32"),
    (lambda d: d["features_info"]["float_features"][0].update(nan_value_treatment=3),
     "nan_value_treatment"),
    (lambda d: d["features_info"]["float_features"][0].update(has_nans="no"), "has_nans"),
    (lambda d: d["oblivious_trees"][0]["splits"][0].update(float_feature_index=0.0),
     "float_feature_index"),
    (lambda d: d["oblivious_trees"][0]["splits"][0].update(border=None), "border"),
    (lambda d: d["oblivious_trees"][0]["splits"][0].update(split_index=True), "split_index"),
    (lambda d: d["oblivious_trees"][0]["leaf_values"].__setitem__(0, float("nan")),
     "oblivious_trees[0].leaf_values[0]"),
    (lambda d: d["oblivious_trees"][0]["leaf_values"].__setitem__(0, "1"), "leaf_values[0]"),
    (lambda d: d.update(scale_and_bias=[float("inf"), [0.0]]), "scale_and_bias[0]"),
    (lambda d: d.update(scale_and_bias=[1.0, ["0"]]), "scale_and_bias[1][0]"),
    (lambda d: d["model_info"]["params"]["boosting_options"].update(learning_rate=-0.1),
     "learning_rate"),
    (lambda d: d["model_info"]["params"]["boosting_options"].update(learning_rate="abc"),
     "learning_rate"),
    (lambda d: d["model_info"]["params"]["tree_learner_options"].update(l2_leaf_reg=-1),
     "l2_leaf_reg"),
    (lambda d: d["model_info"]["params"].update(tree_learner_options=3), "tree_learner_options"),
    (lambda d: d["model_info"]["params"]["boosting_options"].update(permutation_count=float("nan")),
     "permutation_count"),
]  # fmt: skip

NUMERIC_CAT = [
    (lambda d: d["features_info"]["categorical_features"][0].update(feature_index="0"),
     "categorical_features[0].feature_index"),
    (lambda d: d["features_info"]["categorical_features"][1].update(values=[1.5]),
     "values[0]"),
    (lambda d: next(s for t in d["oblivious_trees"] for s in t["splits"]
                    if s["split_type"] == "OneHotFeature").update(cat_feature_index="1"),
     "cat_feature_index"),
    (lambda d: next(s for t in d["oblivious_trees"] for s in t["splits"]
                    if s["split_type"] == "OnlineCtr").update(ctr_target_border_idx=-1),
     "ctr_target_border_idx"),
    (lambda d: d["features_info"]["ctrs"][0]["elements"][0].update(cat_feature_index=7),
     "cat_feature_index 7"),
    (lambda d: d["features_info"]["ctrs"][0].update(target_border_idx=0.5), "target_border_idx"),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(NUMERIC)))
def test_numeric_fields_named(models, case):
    fn, field = NUMERIC[case]
    doc = _doc(models, "num_sym")
    fn(doc)
    _refused(doc, field)


@pytest.mark.parametrize("case", range(len(NUMERIC_CAT)))
def test_categorical_numeric_fields_named(models, case):
    fn, field = NUMERIC_CAT[case]
    doc = _doc(models, "cat_multi")
    fn(doc)
    _refused(doc, field)


# ---------------------------------------------------------------------- the fuzz
_VALUES = (None, "abc", True, -1, 0, 1, 2**40, -0.5, 1e308, float("nan"), float("inf"), [], {})


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*path, i))


def mutate(doc: dict, rng: random.Random) -> dict:
    """One random mutation of a model document: a field deleted, replaced by a value of
    another type, nudged, truncated, reordered or duplicated."""
    d = copy.deepcopy(doc)
    paths = [p for p in _paths(d) if p and (p[0] != "model_info" or p[1:3] == ("params",
             "boosting_options"))]  # fmt: skip
    path = paths[rng.randrange(len(paths))]
    parent = d
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    v = parent[key]
    op = rng.randrange(6)
    if op == 0:
        del parent[key]
    elif op == 2 and isinstance(v, (int, float)) and not isinstance(v, bool):
        parent[key] = rng.choice([v + 1, v - 1, -v, v * 2, v + 1e-3, v * (1 + 1e-6)])
    elif op == 3 and isinstance(v, list) and v:
        parent[key] = v[: rng.randrange(len(v))]
    elif op == 4 and isinstance(v, list) and len(v) > 1:
        i, j = rng.sample(range(len(v)), 2)
        v[i], v[j] = v[j], v[i]
    elif op == 5 and isinstance(v, list) and v:
        v.append(copy.deepcopy(v[rng.randrange(len(v))]))
    elif isinstance(v, str) and v.isdigit() and op != 1:
        parent[key] = str(int(v) + 1)
    else:
        parent[key] = _VALUES[rng.randrange(len(_VALUES))]
    return d


#: The oracle: CatBoost loads each case and predicts raw margins, in a forked process per case
#: (a crash or a hang ends that process only).
_ORACLE = r"""
import json, os, signal, sys
import pandas as pd
from catboost import CatBoost, Pool
X = pd.read_csv(sys.argv[1]).drop(columns="y")

def run(path):
    m = CatBoost()
    m.load_model(path, format="json")
    cats = list(m.get_cat_feature_indices())
    Xm = X if cats else X[["a", "b"]]
    raw = m.predict(Pool(Xm, cat_features=cats), prediction_type="RawFormulaVal", thread_count=1)
    return {"status": "ok", "raw": raw.tolist()}

for path in sys.argv[2:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        signal.alarm(30)
        try:
            res = run(path)
        except Exception as e:
            res = {"status": "error", "msg": str(e)[:200]}
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    ok = data and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    print(json.dumps({"case": path, **(json.loads(data) if ok else {"status": "crash"})}))
"""

#: treeinner on each case, in a subprocess (categorical models are routed by CatBoost).
_OURS = r"""
import json, sys, warnings
import pandas as pd
import treeinner
from treeinner.adapters import catboost as cba
warnings.simplefilter("ignore")
X = pd.read_csv(sys.argv[1]).drop(columns="y")
for path in sys.argv[2:]:
    try:
        with open(path) as fh:
            ens = cba.from_json(json.load(fh))
        Xm = X if ens.n_features > 2 else X[["a", "b"]]
        try:
            res = {"status": "ok", "raw": ens.predict_margin(Xm).tolist()}
        except treeinner.InputError as e:  # e.g. the feature names changed: the data is wrong
            res = {"status": "input", "msg": str(e)[:200]}
    except treeinner.ModelFormatError as e:
        res = {"status": "refused", "msg": str(e)[:200]}
    except Exception as e:
        res = {"status": "other", "msg": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps({"case": path, **res}), flush=True)
"""

N_FUZZ = 41  # per model: 205 cases


def _results(script, csv, paths):
    res = subprocess.run(
        [sys.executable, "-c", script, csv, *paths], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, f"died ({res.returncode}): {res.stderr[-2000:]}"
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r["case"]] = r
    assert len(out) == len(paths), res.stderr[-2000:]
    return out


def test_seeded_mutations_refused_or_equal(models, tmp_path):
    """205 seeded random mutations of five real models: each is refused with ModelFormatError
    or gives CatBoost's margins on the same file; never a crash or another exception."""
    rng = random.Random(17)
    paths = []
    for name, doc in models["docs"].items():
        for i in range(N_FUZZ):
            path = str(tmp_path / f"{name}_{i}.json")
            with open(path, "w") as fh:
                json.dump(mutate(doc, rng), fh)
            paths.append(path)
    theirs = _results(_ORACLE, models["csv"], paths)
    ours = _results(_OURS, models["csv"], paths)
    outcomes = {"refused": 0, "equal": 0}
    for p in paths:
        o, t = ours[p], theirs[p]
        assert o["status"] in ("ok", "refused", "input"), (p, o)
        if o["status"] == "refused":
            outcomes["refused"] += 1
            continue
        if o["status"] == "input":  # the data does not fit the model: CatBoost agrees
            assert t["status"] != "ok", (p, o, t)
            continue
        assert t["status"] == "ok", (p, "treeinner accepted what CatBoost cannot read", t)
        a, b = np.asarray(o["raw"], dtype=float), np.asarray(t["raw"], dtype=float)
        assert a.size == b.size, (p, a.shape, b.shape)
        b = b.reshape(a.shape)
        tol = 1e-9 * max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=p)
        outcomes["equal"] += 1
    # both kinds of outcome occur: the mutations are not all refused
    assert outcomes["equal"] >= 40 and outcomes["refused"] >= 80, outcomes


# ---------------------------------------------------------------------- leaf numbering
def test_nonsymmetric_categorical_model_from_file_routes_like_catboost(models, tmp_path):
    """CatBoost numbers the leaves of a non-symmetric tree it read from JSON depth first, not
    as the model it trained: a Depthwise model with CTR splits read from a file (JSON, .cbm,
    a saved ensemble) or given as a model CatBoost loaded from JSON gives CatBoost's margins
    (it gave wrong ones: the routing looked the leaves up in the training numbering)."""
    trained = models["models"]["cat_depthwise"]
    X = models["X"]
    want = trained.predict(X, prediction_type="RawFormulaVal")
    reloaded = cb.CatBoost()
    reloaded.load_model(models["paths"]["cat_depthwise"], format="json")
    pool = cb.Pool(X, cat_features=[1, 3])
    assert not np.array_equal(trained.calc_leaf_indexes(pool), reloaded.calc_leaf_indexes(pool))
    cbm = str(tmp_path / "m.cbm")
    trained.save_model(cbm)
    npz = str(tmp_path / "m.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        treeinner.from_model(trained).save(npz)
        got = {
            "json": treeinner.load(models["paths"]["cat_depthwise"]),
            "cbm": treeinner.load(cbm),
            "npz": treeinner.TreeEnsemble.load_npz(npz),
            "trained": treeinner.from_model(trained),
            "reloaded": treeinner.from_model(reloaded),
        }
    for how, ens in got.items():
        np.testing.assert_allclose(ens.predict_margin(X), want, rtol=0, atol=1e-12, err_msg=how)
