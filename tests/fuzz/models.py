"""The model-file fuzz corpus: small real models of every booster and format, and seeded
mutators that corrupt them.

``build_seeds(cache_dir)`` trains the seed models once (fixed seeds, a few trees of depth <= 4
on a few hundred rows) and writes each in every format treeinner reads: XGBoost ``.json`` and
``.ubj``; LightGBM model text and ``dump_model()`` JSON; CatBoost ``.json`` and ``.cbm``; and
treeinner's own ``.npz`` (from an XGBoost, a LightGBM and a categorical CatBoost model, the
last in format version 3). Next to each model it writes the rows the worker evaluates on
(``<model>.rows.npz``: training rows, values at the model's thresholds and one float32 ulp
either side, NaN, +-inf, huge values, unseen categories) and their labels. A later call with
the same directory reuses the files (``manifest.json``, keyed on the booster versions).

``generate(seeds, n, seed)`` returns ``n`` mutated files (``Mutant``): round robin over the
seed files, each mutated by a mutator for its format drawn from
``numpy.random.default_rng([seed, i])``, so a case is reproduced from its name alone
(``mutant(seeds, name)``). The mutators: structure-aware for JSON (a number set to 0, -1, -x,
NaN, inf, 1e308, a huge int, a string or null; a key deleted; an array truncated, extended,
two entries swapped or one duplicated; a list turned into a dict and back; a value nested
deeply), line-aware for LightGBM model text, byte-level for binary files (flips, truncation,
insertion), and structure-aware for ``.npz`` (one array or one metadata field rewritten).
"""

from __future__ import annotations

import io
import json
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

CORPUS_VERSION = 4  # bump when the seed models or their rows change
N_ROWS = 300  # training rows
DEEP = 20_000  # nesting depth of the "nest deeply" JSON mutation

# ---------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Seed:
    """One unmutated model file: ``name`` ("xgb_bin.json"), the model it holds
    ("xgb_bin"), the booster that reads it ("xgboost", "lightgbm", "catboost"; "" for a file
    no booster reads: LightGBM dump JSON and treeinner .npz), its format, its path, and the
    rows file the worker evaluates on."""

    name: str
    model: str
    booster: str
    fmt: str
    path: str
    rows: str


@dataclass(frozen=True)
class Mutant:
    """A mutated model file: its readable name ``<seed>:<mutation>#<index>``, the seed it
    came from, the mutation, whether the mutation wrote a value no valid model holds (a type
    change, NaN, a deletion, ...; decides a file no booster reads), and the file's bytes."""

    name: str
    seed: Seed
    mutation: str
    invalid: bool
    data: bytes


# ---------------------------------------------------------------------------------- rows


@dataclass
class Rows:
    """The rows a model is evaluated on: ``X`` (an array or a DataFrame), labels ``y`` and
    the categorical columns CatBoost's ``Pool`` needs (``cat_features``)."""

    X: Any
    y: np.ndarray
    cat_features: list[str]


def save_rows(path: str, X: np.ndarray, y: np.ndarray, cats: dict, kind: str, cols) -> None:
    """Write rows: numeric ``X`` (categorical columns NaN), ``cats`` {column: (values,
    levels)} as strings ("" for missing), ``kind`` "array", "pandas" or "catboost"."""
    arrays = {"X": X, "y": y, "columns": np.asarray(cols, dtype=str), "kind": np.asarray(kind)}
    for c, (values, levels) in cats.items():
        arrays[f"values_{c}"] = np.asarray(values, dtype=str)
        arrays[f"levels_{c}"] = np.asarray(levels, dtype=str)
    np.savez(path, **arrays)


def load_rows(path: str) -> Rows:
    """The rows ``save_rows`` wrote, as the model's booster takes them."""
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    kind = str(data["kind"])
    if kind == "array":
        return Rows(data["X"], data["y"], [])
    import pandas as pd

    frame = pd.DataFrame(data["X"], columns=[str(c) for c in data["columns"]])
    cats = [str(c) for c in data["columns"] if f"values_{c}" in data]
    for c in cats:
        values = data[f"values_{c}"].astype(object)
        if kind == "pandas":
            values[values == ""] = None
            levels = [str(v) for v in data[f"levels_{c}"]]
            frame[c] = pd.Categorical(values, categories=levels)
        else:
            frame[c] = values
    return Rows(frame, data["y"], cats if kind == "catboost" else [])


# ---------------------------------------------------------------------------------- training


def _data(rng: np.random.Generator, p: int, nan: float = 0.05) -> np.ndarray:
    X = rng.normal(size=(N_ROWS, p))
    X[:, p - 1] = rng.integers(0, 5, size=N_ROWS)  # ties
    X[rng.random(X.shape) < nan] = np.nan
    return X


def _target(rng: np.random.Generator, X: np.ndarray, kind: str) -> np.ndarray:
    s = np.nan_to_num(X[:, 0]) + 0.7 * np.nan_to_num(X[:, 1]) - 0.4 * np.nan_to_num(X[:, -1])
    s = s + 0.5 * rng.normal(size=X.shape[0])
    if kind == "regression":
        return 2.0 * s
    if kind == "binary":
        return (s > 0).astype(float)
    return np.digitize(s, np.quantile(s, [1 / 3, 2 / 3])).astype(float)


LEVELS = ("red", "green", "blue", "cyan", "pink", "gold")


def _xgb(kind: str, seed: int) -> tuple[Any, Any, np.ndarray, dict]:
    import pandas as pd
    import xgboost as xgb

    rng = np.random.default_rng(seed)
    X = _data(rng, 5)
    y = _target(rng, X, "regression" if kind in ("reg", "dart", "cat") else kind)
    params = {"max_depth": 3, "eta": 0.4, "nthread": 1, "seed": seed}
    params["objective"] = {"binary": "binary:logistic", "multi": "multi:softprob"}.get(
        kind, "reg:squarederror"
    )
    if kind == "multi":
        params["num_class"] = 3
    if kind == "dart":
        params.update(booster="dart", rate_drop=0.3, skip_drop=0.0)
    data: Any = X
    cats: dict = {}
    if kind == "cat":
        code = rng.integers(0, len(LEVELS), size=N_ROWS)
        data = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)])
        data["c"] = pd.Categorical(np.asarray(LEVELS)[code], categories=LEVELS)
        y = y + np.array([1.5, 0, -1, 0.3, 0, 0.7])[code]
        params.update(max_cat_to_onehot=1, max_depth=4)
        cats = {"c": LEVELS}
    booster = xgb.train(params, xgb.DMatrix(data, y, enable_categorical=True), 4)
    return booster, data, y, cats


def _lgb(kind: str, seed: int) -> tuple[Any, Any, np.ndarray, dict]:
    import lightgbm as lgb

    rng = np.random.default_rng(seed)
    X = _data(rng, 5)
    y = _target(
        rng, X, {"multi": "multiclass"}.get(kind, kind if kind == "binary" else "regression")
    )
    params = {
        "num_leaves": 8,
        "max_depth": 4,
        "min_data_in_leaf": 10,
        "learning_rate": 0.3,
        "verbose": -1,
        "seed": seed,
        "num_threads": 1,
        "deterministic": True,
    }
    params["objective"] = {"binary": "binary", "multi": "multiclass"}.get(kind, "regression")
    if kind == "multi":
        params["num_class"] = 3
    if kind == "linear":
        params["linear_tree"] = True
    extra = {}
    if kind == "cat":
        X[:, 2] = rng.integers(0, 6, size=N_ROWS)
        y = y + np.array([1.5, 0, -1, 0.3, 0, 0.7])[X[:, 2].astype(int)]
        extra = {"categorical_feature": [2]}
        params.update(min_data_per_group=5, cat_smooth=1.0, max_cat_to_onehot=2)
    ds = lgb.Dataset(X, y, params={"verbose": -1}, **extra)
    return lgb.train(params, ds, 4), X, y, {}


def _cb(kind: str, seed: int) -> tuple[Any, Any, np.ndarray, dict]:
    import catboost
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = _data(rng, 4)
    loss = {"cat": "Logloss", "depthwise": "MultiClass"}.get(kind, "RMSE")
    y = _target(rng, X, {"Logloss": "binary", "MultiClass": "multi"}.get(loss, "regression"))
    params = {
        "iterations": 4,
        "depth": 3,
        "learning_rate": 0.3,
        "loss_function": loss,
        "random_seed": seed,
        "verbose": False,
        "thread_count": 1,
        "allow_writing_files": False,
    }
    data: Any = X
    cats: dict = {}
    if kind == "depthwise":
        params.update(grow_policy="Depthwise", min_data_in_leaf=5)
    if kind == "cat":
        data = pd.DataFrame(X, columns=[f"x{i}" for i in range(4)])
        for c in ("c0", "c1"):
            data[c] = np.asarray(LEVELS)[rng.integers(0, len(LEVELS), size=N_ROWS)]
            cats[c] = LEVELS
        y = ((data["c0"] == "red") | (data["c1"] == "blue") | (X[:, 0] > 0.5)).astype(float)
        params.update(one_hot_max_size=1, max_ctr_complexity=2)
    model = catboost.CatBoost(params)
    model.fit(catboost.Pool(data, y, cat_features=list(cats) or None))
    return model, data, y, cats


#: model name -> (trainer, its kind, the formats it is written in)
MODELS: dict[str, tuple[Callable, str, tuple[str, ...]]] = {
    "xgb_reg": (_xgb, "reg", ("json", "ubj")),
    "xgb_bin": (_xgb, "binary", ("json", "ubj")),
    "xgb_multi": (_xgb, "multi", ("json", "ubj", "npz")),
    "xgb_cat": (_xgb, "cat", ("json", "ubj", "npz")),
    "xgb_dart": (_xgb, "dart", ("json", "ubj")),
    "lgb_reg": (_lgb, "reg", ("txt", "dump")),
    "lgb_bin": (_lgb, "binary", ("txt", "dump", "npz")),
    "lgb_multi": (_lgb, "multi", ("txt", "dump")),
    "lgb_cat": (_lgb, "cat", ("txt", "dump")),
    "lgb_linear": (_lgb, "linear", ("txt", "dump", "npz")),
    "cb_num": (_cb, "num", ("json", "cbm")),
    "cb_cat": (_cb, "cat", ("json", "cbm", "npz")),
    "cb_depthwise": (_cb, "depthwise", ("json", "cbm")),
}
_BOOSTER = {"xgb": "xgboost", "lgb": "lightgbm", "cb": "catboost"}


def _write(model: Any, name: str, fmt: str, path: str) -> None:
    lib = _BOOSTER[name.split("_")[0]]
    if fmt == "npz":
        import treeinner

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            treeinner.from_model(model).save(path)
    elif lib == "xgboost":
        model.save_model(path)
    elif lib == "lightgbm" and fmt == "txt":
        model.save_model(path)
    elif lib == "lightgbm":
        with open(path, "w") as fh:
            json.dump(model.dump_model(), fh)
    else:
        model.save_model(path, format={"json": "json", "cbm": "cbm"}[fmt])


def _ext(fmt: str) -> str:
    return {"dump": "dump.json", "txt": "txt"}.get(fmt, fmt)


def _versions() -> dict[str, str]:
    import catboost
    import lightgbm
    import xgboost

    import treeinner

    return {
        "corpus": str(CORPUS_VERSION),
        "xgboost": xgboost.__version__,
        "lightgbm": lightgbm.__version__,
        "catboost": catboost.__version__,
        "treeinner": treeinner.__version__,
    }


def build_seeds(cache_dir: str | os.PathLike) -> list[Seed]:
    """Train the seed models (or reuse those ``cache_dir`` holds for the same corpus and
    booster versions) and return their files, one ``Seed`` per model and format."""
    cache = os.fspath(cache_dir)
    os.makedirs(cache, exist_ok=True)
    manifest = os.path.join(cache, "manifest.json")
    versions = _versions()
    seeds = [_seed(cache, m, f) for m, (_, _, fmts) in MODELS.items() for f in fmts]
    if os.path.exists(manifest):
        with open(manifest) as fh:
            if json.load(fh) == versions and all(os.path.exists(s.path) for s in seeds):
                return seeds
    complete = True
    for i, (model_name, (train, kind, fmts)) in enumerate(MODELS.items()):
        model, data, y, cats = train(kind, 100 + i)
        rows = os.path.join(cache, f"{model_name}.rows.npz")
        complete &= _rows(model, data, y, cats, model_name, rows)
        for fmt in fmts:
            path = os.path.join(cache, f"{model_name}.{_ext(fmt)}")
            try:
                _write(model, model_name, fmt, path)
            except Exception as e:  # noqa: BLE001 - treeinner refusing a seed (.npz)
                warnings.warn(f"fuzz seed {model_name}.{fmt} not written: {e}", stacklevel=2)
                complete = False
    if complete:  # else trained again next time (treeinner may accept them by then)
        with open(manifest, "w") as fh:
            json.dump(versions, fh)
    return [s for s in seeds if os.path.exists(s.path)]


def _seed(cache: str, model: str, fmt: str) -> Seed:
    booster = "" if fmt in ("npz", "dump") else _BOOSTER[model.split("_")[0]]
    return Seed(
        f"{model}.{fmt}",
        model,
        booster,
        fmt,
        os.path.join(cache, f"{model}.{_ext(fmt)}"),
        os.path.join(cache, f"{model}.rows.npz"),
    )


def _rows(model: Any, data: Any, y: np.ndarray, cats: dict, name: str, path: str) -> bool:
    """Write the adversarial rows of a trained model (``save_rows``); False when treeinner
    refused the model, so its thresholds are missing from the rows."""
    import treeinner

    rng = np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ens = treeinner.from_model(model)
        except treeinner.TreeinnerError as e:  # a finding: the unmutated model is refused
            warnings.warn(f"fuzz seed {name}: {e}; no threshold rows", stacklevel=2)
            ens = None
    p = np.shape(data)[1]
    cols = [str(c) for c in data.columns] if cats else [f"f{j}" for j in range(p)]
    if ens is not None and not cats:
        cols = list(ens.feature_names)
    numeric = [c for c in cols if c not in cats]
    X = np.full((N_ROWS, len(cols)), np.nan)
    for j, c in enumerate(cols):
        if c in numeric:
            X[:, j] = np.asarray(data[c] if cats else data[:, j], dtype=float)
    blocks = [X[rng.integers(0, N_ROWS, size=24)]]
    if ens is not None:
        blocks += list(_threshold_rows(ens, X, cols, numeric, rng))
    # XGBoost refuses infinite inputs; a linear leaf's margin is the input times a coefficient
    odd = [np.nan, -0.0, 1e-45, 3.4028235e38, -3.4028235e38]
    if name == "lgb_linear":
        odd = [np.nan, -0.0, 1e-45, 1e6, -1e6, np.nan]
    odd += [np.nan, 1e38, -1e38] if name.startswith("xgb") else [np.inf, -np.inf, 1e300, -1e300]
    special = np.repeat(X[:1], len(odd), axis=0)
    j = [cols.index(c) for c in numeric]
    special[np.arange(len(odd)), rng.choice(j, size=len(odd))] = odd
    blocks.append(special)
    if name == "lgb_cat":  # unseen, negative and fractional category codes
        weird = np.repeat(X[:1], 6, axis=0)
        weird[:, 2] = [6, 99, -1, 1.5, np.nan, 2**31]
        blocks.append(weird)
    rows = np.vstack(blocks)
    labels = _labels(rng, y, rows.shape[0])
    kind = "array" if not cats else ("pandas" if name.startswith("xgb") else "catboost")
    values = {c: _cat_values(rng, lv, rows.shape[0], kind) for c, lv in cats.items()}
    save_rows(path, rows, labels, {c: (values[c], cats[c]) for c in cats}, kind, cols)
    return ens is not None


def _threshold_rows(ens: Any, X, cols, numeric, rng) -> Iterator[np.ndarray]:
    """Rows with one feature at a split threshold, one float32 ulp either side, and float64
    values that round onto the threshold in float32."""
    inner = np.flatnonzero((ens.left >= 0) & (ens.split_type == 0))
    names = ens.feature_names
    for i in rng.permutation(inner)[:10]:
        name = names[ens.feature[i]] if ens.feature[i] < len(names) else None
        if name not in numeric:
            continue
        t32 = np.float32(ens.threshold[i])
        up, down = (float(np.nextafter(t32, np.float32(s))) for s in (np.inf, -np.inf))
        t = float(t32)
        vals = [
            t,
            up,
            down,
            np.nextafter(t, -np.inf),
            np.nextafter(t, np.inf),
            0.5 * (down + t),
            0.5 * (up + t),
        ]
        block = np.repeat(X[rng.integers(0, X.shape[0], size=1)], len(vals), axis=0)
        block[:, cols.index(name)] = vals
        yield block


def _labels(rng: np.random.Generator, y: np.ndarray, n: int) -> np.ndarray:
    levels = np.unique(y)
    if levels.size <= 3:
        return rng.choice(levels, size=n)
    return rng.normal(np.mean(y), np.std(y), size=n)


def _cat_values(rng: np.random.Generator, levels, n: int, kind: str) -> np.ndarray:
    values = np.asarray(levels)[rng.integers(0, len(levels), size=n)].astype(object)
    odd = ["", ""] if kind == "pandas" else ["zzz", "", "RED", "0"]  # missing; unseen
    values[: len(odd)] = odd
    return values.astype(str)


# ---------------------------------------------------------------------------------- mutators
_NUMBERS: tuple[tuple[str, Any], ...] = (
    ("zero", 0),
    ("minus_one", -1),
    ("neg", "neg"),
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("ninf", float("-inf")),
    ("1e308", 1e308),
    ("huge_int", 2**70),
    ("int32_max", 2**31 - 1),
    ("plus_one", "plus_one"),
    ("ulp", "ulp"),
    ("string", "abc"),
    ("null", None),
    ("bool", True),
)
#: mutations that write a value no valid model holds (+-inf is a valid LightGBM threshold)
_INVALID = {
    "nan",
    "string",
    "null",
    "bool",
    "delete",
    "to_dict",
    "to_list",
    "nest",
    "empty",
    "reshape",
    "no",
    "garbage",
}


def _number(x: Any, how: Any) -> Any:
    if how == "neg":
        return -x if isinstance(x, (int, float)) and not isinstance(x, bool) else -1
    if how == "plus_one":
        return x + 1 if isinstance(x, (int, float)) and not isinstance(x, bool) else 1
    if how == "ulp":
        return float(np.nextafter(np.float32(x), np.float32(np.inf))) if _is_num(x) else 0.5
    return how


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _paths(doc: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every path into a decoded JSON document (keys and list indices), the root excluded."""
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for k, v in items:
        yield (*path, k)
        yield from _paths(v, (*path, k))


def _pick_path(doc: Any, rng: np.random.Generator) -> tuple:
    """A path drawn field first: a key pattern (list indices as "*") uniformly, then one
    instance of it, so a long array does not drown the rest."""
    groups: dict[tuple, list[tuple]] = {}
    for p in _paths(doc):
        groups.setdefault(tuple("*" if isinstance(k, int) else k for k in p), []).append(p)
    keys = sorted(groups, key=repr)
    group = groups[keys[rng.integers(len(keys))]]
    return group[rng.integers(len(group))]


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _label(path: tuple) -> str:
    return ".".join(f"[{k}]" if isinstance(k, int) else str(k) for k in path).replace(".[", "[")


def mutate_json(doc: Any, rng: np.random.Generator) -> tuple[str, bool, str]:
    """One structure-aware mutation of a decoded JSON document, in place where possible:
    (mutation name, invalid, the document's new text)."""
    path = _pick_path(doc, rng)
    parent, key = _get(doc, path[:-1]), path[-1]
    value = parent[key]
    ops = ["number"] * 4 + ["delete", "to_dict", "to_list", "nest"]
    if isinstance(value, list):
        ops += ["truncate", "extend", "swap", "duplicate", "empty"] * 2
    if isinstance(value, str) and _numeric_string(value) is not None:
        ops += ["number_string"] * 4
    op = ops[rng.integers(len(ops))]
    label = _label(path)
    if op == "nest":
        parent[key] = "\x00NEST\x00"
        text = json.dumps(doc).replace('"\\u0000NEST\\u0000"', "[" * DEEP + "1" + "]" * DEEP)
        return f"nest@{label}", True, text
    name, invalid = _apply_json(parent, key, value, op, rng)
    return f"{name}@{label}", invalid, json.dumps(doc)


def _numeric_string(s: str) -> float | None:
    """The number in an XGBoost-style string field ("0.5", "[5E-1]"), else None."""
    m = re.fullmatch(r"\[?(-?[0-9.Ee+-]+)\]?", s.strip())
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def _apply_json(parent: Any, key: Any, value: Any, op: str, rng) -> tuple[str, bool]:
    if op in ("number", "number_string"):
        how, to = _NUMBERS[rng.integers(len(_NUMBERS))]
        if op == "number_string":
            x = _numeric_string(value)
            new = _number(x, to)
            parent[key] = value.replace(value.strip("[]"), repr(new)) if _is_num(new) else new
        else:
            parent[key] = _number(value, to)
        if how == "bool" and isinstance(value, bool):  # a flag set to true: still a flag
            return how, False
        return how, how in _INVALID
    if op == "delete":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return "delete", True
    if op in ("to_dict", "to_list"):
        parent[key] = (
            {str(i): v for i, v in enumerate(value)}
            if isinstance(value, list)
            else list(value.values())
            if isinstance(value, dict)
            else [value]
        )
        return op, True
    return _list_op(value, op, rng), op == "empty"


def _list_op(value: list, op: str, rng: np.random.Generator) -> str:
    n = len(value)
    if op == "truncate" and n:
        del value[int(rng.integers(0, n)) :]
    elif op == "extend":
        value.extend(value[-1:] * int(rng.integers(1, 4)) if n else [0])
    elif op == "swap" and n >= 2:
        i, j = rng.choice(n, size=2, replace=False)
        value[i], value[j] = value[j], value[i]
    elif op == "duplicate" and n:
        i = int(rng.integers(n))
        value.insert(i, value[i])
    elif op == "empty":
        value.clear()
    return op


def fix_tree_sizes(text: str) -> str:
    """The text with its ``tree_sizes`` header set to the trees' byte lengths (LightGBM
    refuses a file whose sizes disagree), so a mutation tests the one value it changed."""
    m = re.search(r"^tree_sizes=.*$", text, re.M)
    starts = [t.start() for t in re.finditer(r"^Tree=", text, re.M)]
    end = text.find("end of trees")
    if m is None or not starts or end < starts[-1]:
        return text
    bounds = [*starts, end]
    sizes = [len(text[a:b].encode()) for a, b in zip(bounds, bounds[1:])]
    return text[: m.start()] + "tree_sizes=" + " ".join(map(str, sizes)) + text[m.end() :]


def mutate_text(text: str, rng: np.random.Generator) -> tuple[str, bool, str]:
    """One mutation of a LightGBM model text: ``mutate_lines``, then (nine times in ten) the
    ``tree_sizes`` header made to agree with the trees again (``fix_tree_sizes``)."""
    name, invalid, out = mutate_lines(text, rng)
    if rng.random() < 0.9 and not name.startswith(("truncate", "tree_sizes")):
        return name, invalid, fix_tree_sizes(out)
    return f"{name}+stale_tree_sizes" if out != text else name, invalid, out


def mutate_lines(text: str, rng: np.random.Generator) -> tuple[str, bool, str]:
    """One mutation of a LightGBM model text, line by line: a number in a ``key=value`` line
    changed, or a line dropped, duplicated or turned into garbage, or the text truncated."""
    lines = text.split("\n")
    keyed = [i for i, line in enumerate(lines) if "=" in line]
    i = keyed[rng.integers(len(keyed))]
    key, _, value = lines[i].partition("=")
    op = ["number"] * 6 + ["drop", "duplicate", "garbage", "truncate"]
    op = op[rng.integers(len(op))]
    if op == "number":
        items = value.split(" ")
        j = int(rng.integers(len(items)))
        how, to = _NUMBERS[rng.integers(len(_NUMBERS))]
        x = _numeric_string(items[j])
        new = _number(x if x is not None else 0.0, to)
        items[j] = {None: "", True: "true"}.get(new, str(new)) if not _is_num(new) else repr(new)
        lines[i] = f"{key}={' '.join(items)}"
        return f"{how}@{key}[{j}]", how in _INVALID, "\n".join(lines)
    if op == "drop":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "garbage":
        lines[i] = f"{key}=" + "".join(chr(c) for c in rng.integers(33, 127, size=12))
    else:
        return "truncate", True, text[: int(rng.integers(0, len(text)))]
    return f"{op}@{key}", True, "\n".join(lines)


def mutate_bytes(data: bytes, rng: np.random.Generator) -> tuple[str, bool, bytes]:
    """One byte-level mutation: bytes flipped, the file truncated, bytes inserted or a range
    zeroed."""
    buf = bytearray(data)
    op = ("flip", "flip", "truncate", "insert", "zero")[rng.integers(5)]
    at = int(rng.integers(0, len(buf)))
    if op == "flip":
        k = int(rng.integers(1, 9))
        for pos in rng.integers(0, len(buf), size=k):
            buf[pos] ^= int(rng.integers(1, 256))
        return f"flip{k}", True, bytes(buf)
    if op == "truncate":
        return f"truncate@{at}", True, bytes(buf[:at])
    if op == "insert":
        return (
            f"insert@{at}",
            True,
            bytes(buf[:at] + rng.bytes(int(rng.integers(1, 16))) + buf[at:]),
        )
    buf[at : at + 16] = bytes(len(buf[at : at + 16]))
    return f"zero@{at}", True, bytes(buf)


# ---------------------------------------------------------------------------------- .npz
_META_VALUES: tuple[tuple[str, Any], ...] = (
    ("no", "no"),
    ("null", None),
    ("one", 1),
    ("minus_one", -1),
    ("list", []),
    ("dict", {}),
    ("true", True),
    ("false", False),
    ("nan", float("nan")),
    ("string", "abc"),
)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue()


def mutate_npz(data: bytes, rng: np.random.Generator) -> tuple[str, bool, bytes]:
    """One mutation of a saved TreeEnsemble: byte level (a third of the time), one metadata
    field, the input-map document (format version 3), or one array rewritten."""
    if rng.random() < 0.3:
        return mutate_bytes(data, rng)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["__meta__"].tobytes().decode())
    r = rng.random()
    if r < 0.35:
        key = sorted(meta)[rng.integers(len(meta))]
        name, invalid = _mutate_meta(meta, key, rng)
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    elif r < 0.45 and "input_map_document" in arrays:
        doc = json.loads(arrays["input_map_document"].tobytes().decode())
        name, invalid, text = mutate_json(doc, rng)
        arrays["input_map_document"] = np.frombuffer(text.encode(), dtype=np.uint8)
        name = f"input_map_document.{name}"
    else:
        key = sorted(k for k in arrays if not k.startswith(("__", "input_map")))
        key = key[rng.integers(len(key))]
        name, invalid = _mutate_array(arrays, key, rng)
    return name, invalid, _npz_bytes(arrays)


def _mutate_meta(meta: dict, key: str, rng: np.random.Generator) -> tuple[str, bool]:
    value = meta[key]
    if isinstance(value, (dict, list)) and value and rng.random() < 0.5:
        name, invalid, _ = mutate_json(value, rng)
        return f"meta.{key}.{name}", invalid
    if rng.random() < 0.15:
        del meta[key]
        return f"meta.{key}:delete", True
    how, new = _META_VALUES[rng.integers(len(_META_VALUES))]
    if isinstance(value, bool) and isinstance(new, bool):  # a flipped flag is a valid value
        meta[key] = not value
        return f"meta.{key}:flip", False
    meta[key] = new
    return f"meta.{key}:{how}", True


def _mutate_array(arrays: dict, key: str, rng: np.random.Generator) -> tuple[str, bool]:
    a = arrays[key].copy()
    ops = ["set"] * 5 + ["truncate", "extend", "swap", "dtype", "reshape", "empty", "delete"]
    op = ops[rng.integers(len(ops))]
    if op == "set" and a.size:
        i = int(rng.integers(a.size))
        how, value = _array_value(a, i, rng)
        a.reshape(-1)[i] = value
        arrays[key] = a
        return f"{key}[{i}]:{how}", _invalid_entry(key, how)
    if op == "delete":
        del arrays[key]
        return f"{key}:delete", True
    arrays[key] = _reshaped(a, op, rng)
    return f"{key}:{op}", op in _INVALID or op in ("truncate", "extend")


#: .npz arrays whose entries are >= 0 (node weights, rates, indices, offsets, codes)
_NONNEGATIVE = {"cover", "count", "learning_rate", "tree_weight", "leaf_id", "tree_group",
                "tree_iteration", "tree_offsets", "cat_offsets", "split_type", "default_left",
                "missing_type"}  # fmt: skip


def _invalid_entry(key: str, how: str) -> bool:
    """Whether an array entry set by ``how`` is one no valid ensemble holds (NaN; +-inf but in
    a threshold, where LightGBM writes them; a negative weight or index; an integer field at
    its dtype's limit)."""
    if how in ("nan", "inf", "ninf"):
        return how == "nan" or key != "threshold"
    if how in ("minus_one", "neg", "min"):
        return key in _NONNEGATIVE
    return how == "max" and key != "cat_words"


def _array_value(a: np.ndarray, i: int, rng: np.random.Generator) -> tuple[str, Any]:
    x = a.reshape(-1)[i]
    if a.dtype.kind == "f":
        choices = [
            ("zero", 0.0),
            ("minus_one", -1.0),
            ("neg", -x),
            ("nan", np.nan),
            ("inf", np.inf),
            ("ninf", -np.inf),
            ("1e308", 1e308 if a.itemsize == 8 else 3e38),
            ("plus_one", x + 1),
        ]
    elif a.dtype.kind in "iu":
        top = np.iinfo(a.dtype).max
        choices = [("zero", 0), ("plus_one", min(int(x) + 1, top)), ("max", top)]
        if a.dtype.kind == "i":
            choices += [("minus_one", -1), ("min", np.iinfo(a.dtype).min)]
    else:
        choices = [("flip", not x)] if a.dtype.kind == "b" else [("zero", 0)]
    return choices[rng.integers(len(choices))]


def _reshaped(a: np.ndarray, op: str, rng: np.random.Generator) -> np.ndarray:
    flat = a.reshape(-1)
    if op == "truncate":
        return flat[: int(rng.integers(0, max(flat.size, 1)))]
    if op == "extend":
        return np.concatenate([flat, flat[-1:] if flat.size else np.zeros(1, a.dtype)])
    if op == "swap" and flat.size >= 2:
        i, j = rng.choice(flat.size, size=2, replace=False)
        flat = flat.copy()
        flat[[i, j]] = flat[[j, i]]
        return flat.reshape(a.shape)
    if op == "dtype":
        return a.astype(
            {"f": np.float32, "i": np.int8, "u": np.int16, "b": np.int64}.get(
                a.dtype.kind, np.float64
            )
        )
    if op == "reshape":
        return flat.reshape(1, -1) if a.ndim == 1 else flat
    return a[:0]


# ---------------------------------------------------------------------------------- cases


def _mutate(seed: Seed, data: bytes, rng: np.random.Generator) -> tuple[str, bool, bytes]:
    if seed.fmt == "npz":
        return mutate_npz(data, rng)
    if seed.fmt in ("ubj", "cbm") or rng.random() < 0.1:
        return mutate_bytes(data, rng)
    text = data.decode()
    if seed.fmt == "txt":
        name, invalid, text = mutate_text(text, rng)
    else:
        name, invalid, text = mutate_json(json.loads(text), rng)
    return name, invalid, text.encode()


# ---------------------------------------------------------------------------------- targeted
def _xgb_model(doc: dict) -> dict:
    gb = doc["learner"]["gradient_booster"]
    return gb["model"] if "model" in gb else gb["gbtree"]["model"]


def _xgb_tree(doc: dict, field: str, node: int, value: Any) -> None:
    _xgb_model(doc)["trees"][0][field][node] = value


def _numeric_inner(doc: dict) -> int:
    tree = _xgb_model(doc)["trees"][0]
    return next(i for i, (c, t) in enumerate(zip(tree["left_children"], tree["split_type"]))
                if c >= 0 and t == 0)  # fmt: skip


def _ctr_tables(doc: dict) -> dict:
    return next(iter(doc["ctr_data"].values()))


def _set(mapping: dict, key: str, value: Any) -> None:
    mapping[key] = value


#: The issue's reproduced examples as fixed mutations: (seed file, label, edit). An edit takes
#: the decoded JSON document, the model text, or the ``.npz`` members {name: array} and
#: metadata; each is a case named ``<seed>:<label>`` in every run.
TARGETED: tuple[tuple[str, str, Callable], ...] = (
    ("xgb_bin.json", "sum_hessian=-2@tree0.node1", lambda d: _xgb_tree(d, "sum_hessian", 1, -2.0)),
    ("xgb_bin.json", "sum_hessian=0@tree0.root", lambda d: _xgb_tree(d, "sum_hessian", 0, 0.0)),
    ("xgb_reg.json", "num_parallel_tree=abc",
     lambda d: _set(_xgb_model(d)["gbtree_model_param"], "num_parallel_tree", "abc")),
    ("xgb_bin.json", "base_score=5_outputs",
     lambda d: _set(d["learner"]["learner_model_param"], "base_score", "[5E-1,5E-1,5E-1,5E-1]")),
    ("xgb_cat.json", "cats.enc.offsets_truncated",
     lambda d: _xgb_model(d)["cats"]["enc"][5]["offsets"].pop()),
    ("xgb_cat.json", "cats.sorted_idx_reversed",
     lambda d: _xgb_model(d)["cats"]["sorted_idx"].reverse()),
    ("xgb_cat.json", "categories_nodes=numeric_node",
     lambda d: _set(_xgb_model(d)["trees"][0], "categories_nodes", [_numeric_inner(d)])),
    ("lgb_bin.txt", "sigmoid=-1", lambda t: t.replace("sigmoid:1", "sigmoid:-1")),
    ("lgb_bin.txt", "sigmoid=abc", lambda t: t.replace("sigmoid:1", "sigmoid:abc")),
    ("lgb_reg.txt", "internal_count=0@tree0",
     lambda t: re.sub(r"^internal_count=.*$", lambda m: "internal_count=" + " ".join(
         "0" for _ in m.group(0).split()), t, count=1, flags=re.M)),
    ("cb_cat.json", "ctr_data_deleted", lambda d: d.pop("ctr_data")),
    ("cb_cat.json", "ctr_data_truncated", lambda d: _set(_ctr_tables(d), "hash_map",
                                                         _ctr_tables(d)["hash_map"][:7])),
    ("cb_num.json", "leaf_weights=-1@tree0",
     lambda d: _set(d["oblivious_trees"][0]["leaf_weights"], 0, -1.0)),
    ("cb_num.json", "split_border_not_a_feature_border",
     lambda d: _set(d["oblivious_trees"][0]["splits"][0], "border",
                    d["oblivious_trees"][0]["splits"][0]["border"] + 0.01)),
    ("xgb_multi.npz", "meta.float32_sum=no", lambda a, m: _set(m, "float32_sum", "no")),
    ("xgb_multi.npz", "meta.reverse_levels=true", lambda a, m: _set(m, "reverse_levels", True)),
    ("xgb_multi.npz", "gain[0]=nan", lambda a, m: _set(a, "gain", _replaced(a["gain"], 0, np.nan))),
    ("xgb_multi.npz", "tree_weight[0]=nan",
     lambda a, m: _set(a, "tree_weight", _replaced(a["tree_weight"], 0, np.nan))),
    ("xgb_multi.npz", "base_margin=4_outputs",
     lambda a, m: _set(a, "base_margin", np.append(a["base_margin"], 0.0))),
    ("lgb_bin.npz", "cover[0]=0", lambda a, m: _set(a, "cover", _replaced(a["cover"], 0, 0.0))),
    ("cb_cat.npz", "input_map_document.ctr_data_deleted",
     lambda a, m: _set(a, "input_map_document", _doc_without(a["input_map_document"], "ctr_data"))),
)  # fmt: skip


def _replaced(a: np.ndarray, i: int, value: Any) -> np.ndarray:
    out = a.copy()
    out[i] = value
    return out


def _doc_without(raw: np.ndarray, key: str) -> np.ndarray:
    doc = json.loads(raw.tobytes().decode())
    doc.pop(key, None)
    return np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)


def _targeted(seed: Seed, label: str, edit: Callable) -> Mutant:
    with open(seed.path, "rb") as fh:
        data = fh.read()
    if seed.fmt == "npz":
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays["__meta__"].tobytes().decode())
        edit(arrays, meta)
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        out = _npz_bytes(arrays)
    elif seed.fmt == "txt":
        out = fix_tree_sizes(edit(data.decode())).encode()
    else:
        doc = json.loads(data)
        edit(doc)
        out = json.dumps(doc).encode()
    if out == data:  # pragma: no cover - a seed no longer has what the edit changes
        raise RuntimeError(f"targeted case {seed.name}:{label} changes nothing")
    return Mutant(f"{seed.name}:{label}", seed, label, True, out)


def targeted(seeds: list[Seed]) -> list[Mutant]:
    """The issue's examples (``TARGETED``) on the seed files."""
    by_name = {s.name: s for s in seeds}
    return [_targeted(by_name[s], label, edit) for s, label, edit in TARGETED if s in by_name]


def mutant(seeds: list[Seed], name: str) -> Mutant:
    """The case called ``name`` (``<seed>:<mutation>#<i>@<corpus seed>``, or a targeted
    case's ``<seed>:<label>``) made again."""
    if "#" not in name:
        return next(m for m in targeted(seeds) if m.name == name)
    i, corpus_seed = (int(x) for x in name.rsplit("#", 1)[1].split("@"))
    by_name = {s.name: s for s in seeds}
    return _make(by_name[name.split(":", 1)[0]], i, corpus_seed)


def _make(seed: Seed, i: int, corpus_seed: int) -> Mutant:
    with open(seed.path, "rb") as fh:
        data = fh.read()
    rng = np.random.default_rng([corpus_seed, i])
    try:
        mutation, invalid, out = _mutate(seed, data, rng)
    except (zipfile.BadZipFile, ValueError) as e:  # pragma: no cover - a mutator bug
        raise RuntimeError(f"mutating {seed.name} (case {i}) failed: {e}") from e
    return Mutant(f"{seed.name}:{mutation}#{i}@{corpus_seed}", seed, mutation, invalid, out)


def generate(seeds: list[Seed], n: int, seed: int = 0) -> list[Mutant]:
    """``n`` mutated files, round robin over ``seeds`` (so every format gets its share)."""
    return [_make(seeds[i % len(seeds)], i, seed) for i in range(n)]
