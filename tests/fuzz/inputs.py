"""The bad-input fuzz corpus: public functions called with one argument made bad at a time,
and command lines with one option or file made bad.

``run(n, seed)`` builds small real models once (XGBoost regressor and binary classifier, an
XGBoost model with a categorical feature, LightGBM, CatBoost and treeinner's own booster:
a few trees on a few hundred rows), generates the corpus (over 150 API cases and 50 command
lines), and runs ``n`` of them (all with ``n=None``; a cap keeps both kinds, in a seeded
order) to ``_outcome.Case``s:

* API cases call ``treeinner.importance``, ``tree_inner`` (also with interventional TreeSHAP
  and its background), ``forest_inner``, ``tree_shap``, ``tree_shap_interactions``,
  ``tree_shap_interventional``, ``tree_inner_interactions``, ``predecomp``, ``saabas``,
  ``total_gain``, ``unbiased_gain``, ``significance``, ``select_features``, ``node_values``,
  ``TreeInnerSelector``, the native booster's feature-selection parameters, the multitask
  estimators' inputs and ``Attribution`` methods with
  a bad X (empty, wrong shape or dtype, strings, categories for a numeric feature, ...), y
  (wrong length, NaN, soft labels, ...), ``sample_weight``, count, level, flag, choice, or
  keyword. ``refused`` when a ``treeinner.TreeinnerError`` is raised, ``foreign`` for any
  other exception, ``silent`` when a bad input gives a result; the cases valid by design
  (NaN as missing, infinities, booleans, sparse, float32, SoftLabels, ...) are ``equal`` when
  the result is finite and of the right shape, ``silent`` otherwise; ``hang`` over
  ``_outcome.TIME_LIMIT``.
* CLI cases run ``python -m treeinner`` in a child process (timeout ``TIME_LIMIT``):
  ``refused`` for a nonzero exit status (1 or 2) with exactly one ``treeinner: error:`` line on
  stderr and no traceback, ``equal`` for exit status 0 on valid input, ``silent`` for status 0
  on bad input, ``foreign`` for anything else (status 3 is treeinner's "this is a bug").
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tests.fuzz._outcome import TIME_LIMIT, Case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_ROWS = 200
COLUMNS = ("a", "b", "c", "d")


# ---------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Ctx:
    """The models and data every case draws from (built once per process)."""

    models: dict[str, Any]  # name -> fitted model (Booster or wrapper)
    X: pd.DataFrame  # numeric evaluation rows
    Xcat: pd.DataFrame  # the same with column "c" categorical (for the categorical model)
    y: dict[str, np.ndarray]  # "reg", "bin", "multi"
    files: dict[str, str]  # saved model and data files for the CLI


def _data(seed: int) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(N_ROWS, len(COLUMNS))), columns=list(COLUMNS))
    X["c"] = rng.integers(0, 4, N_ROWS).astype(float)
    signal = X["a"] + 0.5 * X["c"] + 0.3 * rng.normal(size=N_ROWS)
    y = {
        "reg": signal.to_numpy(),
        "bin": (signal > signal.median()).astype(int).to_numpy(),
        "multi": np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])),
    }
    return X, y


def _fit_models(X: pd.DataFrame, Xcat: pd.DataFrame, y: dict) -> dict[str, Any]:
    import catboost
    import lightgbm
    import xgboost

    from treeinner.booster import GBMRegressor

    small = {"n_estimators": 4, "max_depth": 3}
    xgb = {**small, "n_jobs": 1, "tree_method": "hist"}
    return {
        "xgb_reg": xgboost.XGBRegressor(**xgb).fit(X, y["reg"]),
        "xgb_bin": xgboost.XGBClassifier(**xgb).fit(X, y["bin"]),
        "xgb_multi": xgboost.XGBClassifier(**xgb).fit(X, y["multi"]),
        "xgb_cat": xgboost.XGBRegressor(**xgb, enable_categorical=True).fit(Xcat, y["reg"]),
        "lgb_reg": lightgbm.LGBMRegressor(
            n_estimators=4, num_leaves=6, n_jobs=1, verbose=-1, min_child_samples=5
        ).fit(X, y["reg"]),
        "cb_reg": catboost.CatBoostRegressor(
            iterations=4, depth=3, verbose=0, thread_count=1, allow_writing_files=False
        ).fit(X, y["reg"]),
        "native_reg": GBMRegressor(n_estimators=4, max_depth=3).fit(X, y["reg"]),
    }


def _write_files(ctx_models: dict, X: pd.DataFrame, y: dict, folder: str) -> dict[str, str]:
    files = {}
    for name, ext in (("xgb_bin", "json"), ("lgb_reg", "txt"), ("cb_reg", "cbm")):
        path = os.path.join(folder, f"{name}.{ext}")
        model = ctx_models[name]
        booster = model.booster_ if name.startswith("lgb") else model
        booster.save_model(path)
        files[name] = path
    data = X.assign(label=y["bin"], target=y["reg"], w=1.0)
    files["data"] = os.path.join(folder, "data.csv")
    data.to_csv(files["data"], index=False)
    files["folder"] = folder
    return files


@functools.lru_cache(maxsize=1)
def context() -> Ctx:
    """The models, data and files of the corpus, built once per process."""
    X, y = _data(0)
    Xcat = X.assign(c=pd.Categorical(X["c"].astype(int)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = _fit_models(X, Xcat, y)
    folder = tempfile.mkdtemp(prefix="treeinner_fuzz_inputs_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Ctx(models, X, Xcat, y, _write_files(models, X, y, folder))


# ---------------------------------------------------------------------------- results
def _finite(values: Any, empty: bool = False) -> bool:
    """All finite (and, unless ``empty``, at least one value)."""
    arr = np.asarray(values, dtype=np.float64)
    return (empty or bool(arr.size)) and bool(np.all(np.isfinite(arr)))


def _right(result: Any, n_rows: int) -> bool:
    """Whether a valid call's result is right: finite numbers of the expected shape."""
    import treeinner

    if isinstance(result, treeinner.Attribution):
        shape = (n_rows, len(COLUMNS))
        return result.values.shape[:2] == shape and _finite(result.values, empty=True)
    if isinstance(result, treeinner.Interactions):
        shape = (n_rows, len(COLUMNS), len(COLUMNS))
        return result.values.shape[:3] == shape and _finite(result.values, empty=True)
    if isinstance(result, list):  # select_features
        return all(isinstance(f, str) and f in COLUMNS for f in result)
    if isinstance(result, pd.DataFrame) and "score" in result.columns:  # significance
        return _finite(result["score"])
    if isinstance(result, pd.DataFrame) and "tree" in result.columns:  # per split
        return _finite(result["tree_inner" if "tree_inner" in result else "unbiased_gain"])
    if isinstance(result, pd.DataFrame):  # standard errors may be NaN (permutation's)
        result = result.select_dtypes("number")
        result = result[[c for c in result.columns if not c.endswith("_se")]]
    if isinstance(result, (pd.Series, pd.DataFrame)):
        return len(result) == len(COLUMNS) and _finite(result)
    if hasattr(result, "support_"):  # TreeInnerSelector
        return len(result.support_) == len(COLUMNS)
    return isinstance(result, np.ndarray) and _finite(result)


# ---------------------------------------------------------------------------- API cases
@dataclass(frozen=True)
class ApiCase:
    """One call: ``call(ctx)`` runs it; ``valid`` says it is valid by design."""

    name: str
    call: Callable[[Ctx], Any]
    valid: bool = False
    n_rows: int = N_ROWS


def _api_outcome(case: ApiCase, ctx: Ctx, retry: bool = True) -> Case:
    """The case's outcome; a call over the time limit runs once more, and only a second slow
    run is a hang (the first call of a function in a fresh checkout compiles its Numba kernels,
    tens of seconds on a busy machine; issue 18)."""
    from treeinner import TreeinnerError

    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = case.call(ctx)
    except TreeinnerError as e:
        outcome, detail = "refused", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - every other exception is a finding
        outcome, detail = "foreign", f"{type(e).__name__}: {e}"
    else:
        ok = case.valid and _right(result, case.n_rows)
        outcome = "equal" if ok else "silent"
        detail = "" if ok else f"returned {type(result).__name__}: {str(result)[:200]}"
    if time.perf_counter() - start > TIME_LIMIT:
        if retry:
            return _api_outcome(case, ctx, retry=False)
        outcome, detail = "hang", f"{time.perf_counter() - start:.1f} s"
    return Case(f"api:{case.name}", outcome, " ".join(detail.split())[:300])


# Every function that takes (model, X, y), with the model it is called on by default.
def _xy_functions() -> dict[str, Callable[..., Any]]:
    import treeinner

    return {
        "importance": lambda m, X, y, **k: treeinner.importance(
            m, X, y, **{"methods": ["tree_inner", "permutation"], **k}
        ),
        "tree_inner": treeinner.tree_inner,
        "forest_inner": treeinner.forest_inner,
        "unbiased_gain": lambda m, X, y, **k: treeinner.unbiased_gain(
            m, X, y, **{"random_state": 0, **k}
        ),
        "significance": treeinner.significance,
        "select_features": treeinner.select_features,
        "tree_inner_interactions": treeinner.tree_inner_interactions,
        "tree_inner_interventional": lambda m, X, y, **k: treeinner.tree_inner(
            m, X, y, attribution="interventional", background=_background(m), **k
        ),
    }


def _background(model: Any) -> pd.DataFrame:
    """Valid background rows for ``model`` (the categorical model's frame for it)."""
    ctx = context()
    return (ctx.Xcat if model is ctx.models["xgb_cat"] else ctx.X).iloc[:20]


def _x_functions() -> dict[str, Callable[..., Any]]:
    import treeinner

    return {
        "tree_shap": treeinner.tree_shap,
        "predecomp": treeinner.predecomp,
        "saabas": treeinner.saabas,
        "tree_shap_interactions": treeinner.tree_shap_interactions,
        "tree_shap_interventional": lambda m, X, **k: treeinner.tree_shap_interventional(
            m, X, _background(m), **k
        ),
    }


_MODELS = ("xgb_reg", "xgb_bin", "lgb_reg", "cb_reg", "native_reg", "xgb_cat")


def _label(model: str) -> str:
    return {"xgb_bin": "bin", "xgb_multi": "multi"}.get(model, "reg")


def _frame(ctx: Ctx, model: str) -> pd.DataFrame:
    return ctx.Xcat if model == "xgb_cat" else ctx.X


def _bad_X(ctx: Ctx, model: str) -> dict[str, tuple[Any, bool]]:
    """Bad (False) and valid-by-design (True) evaluation data for ``model``."""
    import scipy.sparse

    X = _frame(ctx, model)
    num = ctx.X.to_numpy()
    nan_col, inf_col = ctx.X.copy(), ctx.X.copy()
    nan_col["a"] = np.nan
    inf_col.iloc[::3, 0], inf_col.iloc[1::3, 1] = np.inf, -np.inf
    strings = X.assign(a=X["a"].astype(str))
    return {
        "empty_rows": (X.iloc[:0], False),
        "no_columns": (X[[]], False),
        "missing_column": (X.drop(columns="b"), False),
        "extra_column": (X.assign(e=1.0), False),
        "duplicate_columns": (pd.concat([X, X[["a"]]], axis=1), False),
        "wrong_width": (num[:, :3], False),
        "one_d": (num[:, 0], False),
        "three_d": (num[None], False),
        "none": (None, False),
        "scalar": (3.0, False),
        "string": ("X.csv", False),
        "string_array": (num.astype(str), False),
        "object_array": (num.astype(object), False),
        "complex": (num.astype(complex), False),
        "ragged": ([[1.0, 2.0], [1.0]], False),
        "series": (X.iloc[0], False),
        "string_column": (strings, False),
        "datetime_column": (X.assign(a=pd.Timestamp("2020-01-01")), False),
        "categorical_numeric": (X.assign(a=pd.Categorical(X["a"].round())), False),
        "sparse_wrong_width": (scipy.sparse.random(N_ROWS, 3, density=0.5, format="csr"), False),
        "dict": (dict(X), False),
        "nan_column": (nan_col if model != "xgb_cat" else X.assign(a=np.nan), True),
        "inf_values": (inf_col if model != "xgb_cat" else X.assign(a=np.inf), True),
        "reordered": (X[list(reversed(X.columns))], True),
        "bool_column": (X.assign(b=X["b"] > 0), True),
        **_dask_X(X, num),
    }


def _dask_X(X: pd.DataFrame, num: np.ndarray) -> dict[str, tuple[Any, bool]]:
    """Dask collections (where Dask is installed): valid ones and bad ones; a method that does
    not take Dask input refuses it (``importance`` with ``permutation``)."""
    try:
        import dask.array as da
        import dask.dataframe as dd
    except ImportError:
        return {}
    return {
        "dask_frame": (dd.from_pandas(X, npartitions=3), True),
        "dask_array_uneven": (da.from_array(num, chunks=((0, 7, 150, 43), (2, 2))), True),
        "dask_wrong_width": (da.from_array(num[:, :3], chunks=(70, 3)), False),
        "dask_missing_column": (dd.from_pandas(X.drop(columns="b"), npartitions=2), False),
        "dask_three_d": (da.from_array(num[None], chunks=(1, 50, 4)), False),
        "dask_one_d": (da.from_array(num[:, 0], chunks=50), False),
    }


def _bad_y(ctx: Ctx, model: str) -> dict[str, tuple[Any, bool]]:
    import treeinner

    y = ctx.y[_label(model)].astype(np.float64)
    out = {
        "short": (y[:-1], False),
        "nan": (np.where(np.arange(N_ROWS) == 3, np.nan, y), False),
        "inf": (np.where(np.arange(N_ROWS) == 3, np.inf, y), False),
        "strings": (y.astype(str), False),
        "two_d": (np.c_[y, y], False),
        "scalar": (1.0, False),
        "none": (None, False),
        "list": (list(y), True),
        "column": (y[:, None], True),
    }
    if model == "xgb_bin":
        out["soft"] = (np.clip(y * 0.8 + 0.1, 0, 1), False)
        out["two"] = (y + 1, False)
        out["soft_labels"] = (treeinner.SoftLabels(np.clip(y * 0.8 + 0.1, 0, 1)), True)
    return out


def _bad_weights() -> dict[str, tuple[Any, bool]]:
    w = np.ones(N_ROWS)
    return {
        "negative": (np.where(np.arange(N_ROWS) == 5, -1.0, w), False),
        "nan": (np.where(np.arange(N_ROWS) == 5, np.nan, w), False),
        "inf": (np.where(np.arange(N_ROWS) == 5, np.inf, w), False),
        "all_zero": (np.zeros(N_ROWS), False),
        "short": (w[:-2], False),
        "strings": (np.array(["x"] * N_ROWS), False),
        "scalar": (2.0, False),
        "two_d": (np.c_[w, w], False),
        "some_zero": (np.where(np.arange(N_ROWS) < 50, 0.0, w), True),
    }


def _data_cases(ctx: Ctx, seed: int) -> list[ApiCase]:
    """Bad X for every function, bad y and sample_weight for every function taking them."""
    rng = np.random.default_rng(seed)
    cases = []
    fns = {**_xy_functions(), **_x_functions()}
    for i, (fname, fn) in enumerate(fns.items()):
        takes_y = fname in _xy_functions()
        model = _MODELS[(i + int(rng.integers(len(_MODELS)))) % len(_MODELS)]
        for xname, (Xb, valid) in _bad_X(ctx, model).items():
            args = (Xb, ctx.y[_label(model)]) if takes_y else (Xb,)
            call = functools.partial(_call_model, fn, model, args, {})
            # attributions of no rows are no rows of attributions; scores need rows
            empty = xname == "empty_rows" and not takes_y
            rows = 0 if empty else N_ROWS
            cases.append(ApiCase(f"{fname}/{model}/X={xname}", call, valid or empty, rows))
        if not takes_y:
            continue
        ymodel = "xgb_bin" if i % 2 else model
        for yname, (yb, valid) in _bad_y(ctx, ymodel).items():
            call = functools.partial(_call_model, fn, ymodel, (_frame(ctx, ymodel), yb), {})
            cases.append(ApiCase(f"{fname}/{ymodel}/y={yname}", call, valid))
        for wname, (wb, valid) in _bad_weights().items():
            args = (_frame(ctx, model), ctx.y[_label(model)])
            call = functools.partial(_call_model, fn, model, args, {"sample_weight": wb})
            cases.append(ApiCase(f"{fname}/{model}/sample_weight={wname}", call, valid))
    return cases


def _call_model(fn: Callable, model: str, args: tuple, kwargs: dict, ctx: Ctx) -> Any:
    """``fn(ctx.models[model], *args, **kwargs)``; lazy values (Dask input) computed, so that
    their errors belong to the call."""
    import dataclasses

    import treeinner

    result = fn(ctx.models[model], *args, **kwargs)
    if isinstance(result, treeinner.Attribution) and hasattr(result.values, "compute"):
        return dataclasses.replace(result, values=result.values.compute())
    return result


# (function, keyword, value, valid) for the options of every function
def _option_values() -> list[tuple[str, str, Any, bool]]:
    counts = [0, -1, 1.5, True, "5", None, np.nan]
    levels = [0, 1, -0.1, 1.5, np.nan, "0.05", True, None]
    out: list[tuple[str, str, Any, bool]] = []
    out += [("importance", "n_repeats", v, False) for v in counts]
    out += [("importance", "n_bootstrap", v, False) for v in [1, -1, 2.5, True, "3", None]]
    out += [("importance", "se", v, False) for v in ["yes", 1, None]]
    out += [("importance", "methods", v, False) for v in ["gini", [], [1], "", None]]
    out += [("importance", "random_state", v, False) for v in [-1, "seed", 1.5]]
    out += [("importance", "n_repeats", np.int64(2), True), ("importance", "se", True, True)]
    out += [("unbiased_gain", "n_draws", v, False) for v in counts]
    out += [("unbiased_gain", "min_samples", v, False) for v in counts]
    out += [("unbiased_gain", "per_split", v, False) for v in ["yes", 0, None]]
    out += [("unbiased_gain", "per_split", True, True), ("unbiased_gain", "n_draws", 3, True)]
    out += [("tree_inner", "per_split", v, False) for v in ["yes", None]]
    out += [("tree_inner", "attribution", v, False) for v in ["lime", None, 3, "tree_shap"]]
    out += [("tree_inner", "per_split", True, True), ("tree_inner", "attribution", "shap", True)]
    out += [("forest_inner", "attribution", v, False) for v in ["lime", ""]]
    out += [("forest_inner", "gradient", v, False) for v in ["label", None, 1, ["initial"]]]
    out += [("forest_inner", "gradient", "initial", True)]
    out += [("significance", "alpha", v, False) for v in levels]
    out += [("significance", "cv", v, False) for v in [1, 0, -2, 2.5, True, "5"]]
    out += [("significance", "methods", v, False) for v in ["gini", ["tree_inner", 3]]]
    out += [("select_features", "alpha", v, False) for v in [0, 0.5, 0.7, np.nan, "0.1"]]
    out += [("select_features", "top_k", v, False) for v in [0, -1, 1.5, True, "2"]]
    out += [("select_features", "threshold", v, False) for v in [np.nan, "0"]]
    out += [("select_features", "rule", v, False) for v in ["bonferroni", 1]]
    out += [("select_features", "method", v, False) for v in ["gini", None]]
    out += [("select_features", "top_k", 2, True), ("select_features", "rule", "fdr", True)]
    return out


def _option_cases(ctx: Ctx, seed: int) -> list[ApiCase]:
    rng = np.random.default_rng(seed + 1)
    fns = _xy_functions()
    cases = []
    for fname, key, value, valid in _option_values():
        model = ("xgb_reg", "xgb_bin", "lgb_reg", "native_reg")[int(rng.integers(4))]
        args = (_frame(ctx, model), ctx.y[_label(model)])
        call = functools.partial(_call_model, fns[fname], model, args, {key: value})
        cases.append(ApiCase(f"{fname}/{model}/{key}={value!r}", call, valid))
    return cases


def _keyword_cases(ctx: Ctx) -> list[ApiCase]:
    """Old or unknown keywords, positional options, missing arguments."""
    import treeinner

    X, y, m = ctx.X, ctx.y["reg"], ctx.models["xgb_reg"]
    calls: dict[str, Callable[[Ctx], Any]] = {
        "tree_inner/train=": lambda c: treeinner.tree_inner(m, X, y, train=(X, y)),
        "tree_inner/trees=": lambda c: treeinner.tree_inner(m, X, y, trees=(0, 2)),
        "predecomp/kind=": lambda c: treeinner.predecomp(m, X, kind="mean"),
        "tree_shap/weights=": lambda c: treeinner.tree_shap(m, X, weights="cover"),
        "importance/X_valid=": lambda c: treeinner.importance(m, X_valid=X, y=y),
        "tree_inner/unknown=": lambda c: treeinner.tree_inner(m, X, y, foo=1),
        "forest_inner/positional": lambda c: treeinner.forest_inner(m, X, y, "saabas"),
        "tree_inner/missing_y": lambda c: treeinner.tree_inner(m, X),
        "significance/missing_X": lambda c: treeinner.significance(m),
        "total_gain/unknown=": lambda c: treeinner.total_gain(m, X),
        "select_features/alpha_positional": lambda c: treeinner.select_features(m, X, y, 0.1),
    }
    return [ApiCase(name, call) for name, call in calls.items()]


def _model_cases(ctx: Ctx) -> list[ApiCase]:
    """Things that are not models, and models that are not fitted."""
    import xgboost

    import treeinner

    X, y = ctx.X, ctx.y["reg"]
    bad = {
        "none": None,
        "int": 3,
        "dict": {"trees": []},
        "array": np.zeros((3, 3)),
        "missing_file": os.path.join(ctx.files["folder"], "no_such_model.json"),
        "unfitted_xgb": xgboost.XGBRegressor(),
        "data_file": ctx.files["data"],
    }
    cases = []
    for name, model in bad.items():
        cases.append(
            ApiCase(f"tree_inner/model={name}", lambda c, m=model: treeinner.tree_inner(m, X, y))
        )
        cases.append(
            ApiCase(f"total_gain/model={name}", lambda c, m=model: treeinner.total_gain(m))
        )
    return cases


def _cases(calls: dict[str, tuple[Callable[[Ctx], Any], bool]]) -> list[ApiCase]:
    return [ApiCase(name, call, valid) for name, (call, valid) in calls.items()]


def _range_and_reference_cases(ctx: Ctx) -> list[ApiCase]:
    """Boosting-round ranges, training data (``reference=``), node values."""
    import treeinner as t

    X, y, m = ctx.X, ctx.y["reg"], ctx.models["xgb_reg"]
    Xt, yt = X.iloc[:100], y[:100]

    def rounds(r):
        return lambda c: t.predecomp(m, X, iteration_range=r)

    def ref(r):
        return lambda c: t.tree_inner(m, X, y, reference=r)

    def centred(v, **kw):  # the initial form, centred on X or (False) the paper's
        return lambda c: t.forest_inner(m, X, y, gradient="initial", centred=v, **kw)

    return _cases(
        {
            **{f"forest_inner/centred={v!r}": (centred(v), False) for v in ["yes", None, 1]},
            "forest_inner/centred=[True]": (centred([True]), False),
            "forest_inner/centred=True": (centred(True), True),
            "forest_inner/centred=False": (centred(False), True),
            "forest_inner/centred=np.True_": (centred(np.bool_(True)), True),
            "forest_inner/centred_reference": (centred(True, reference=(Xt, yt)), False),
            "forest_inner/uncentred_reference": (centred(False, reference=(Xt, yt)), True),
            "predecomp/iteration_range=(3,2)": (rounds((3, 2)), False),
            "predecomp/iteration_range=(0,99)": (rounds((0, 99)), False),
            "predecomp/iteration_range='0:2'": (rounds("0:2"), False),
            "predecomp/iteration_range=(1,)": (rounds((1,)), False),
            "predecomp/iteration_range=(0,2)": (rounds((0, 2)), True),
            "tree_inner/reference=X": (ref(X), False),
            "tree_inner/reference=(X,)": (ref((X,)), False),
            "tree_inner/reference_short_y": (ref((Xt, yt[:-1])), False),
            "tree_inner/reference_nan_y": (ref((Xt, yt * np.nan)), False),
            "tree_inner/reference_empty": (ref((Xt[:0], yt[:0])), False),
            "tree_inner/reference_ok": (ref((Xt, yt)), True),
            "total_gain/reference_strings": (
                lambda c: t.total_gain(m, reference=(Xt.astype(str), yt)),
                False,
            ),
            "node_values/attribution=lime": (lambda c: t.node_values(m, attribution="lime"), False),
            **_background_cases(ctx),
            "node_values/reference=3": (lambda c: t.node_values(m, reference=3), False),
        }
    )


def _background_cases(ctx: Ctx) -> dict[str, tuple[Callable[[Ctx], Any], bool]]:
    """Bad and valid backgrounds of interventional TreeSHAP and TreeInner."""
    import treeinner as t

    X, y, m = ctx.X, ctx.y["reg"], ctx.models["xgb_reg"]
    nan_bg = X.iloc[:20].copy()
    nan_bg["a"] = np.nan
    backgrounds = {
        "none": (None, False),
        "empty": (X.iloc[:0], False),
        "wrong_width": (X.to_numpy()[:20, :3], False),
        "missing_column": (X.iloc[:20].drop(columns="b"), False),
        "strings": (X.iloc[:20].astype(str), False),
        "scalar": (3.0, False),
        "nan_column": (nan_bg, True),
        "one_row": (X.iloc[:1], True),
    }
    out: dict[str, tuple[Callable[[Ctx], Any], bool]] = {}
    for name, (bg, valid) in backgrounds.items():
        out[f"tree_shap_interventional/background={name}"] = (
            lambda c, bg=bg: t.tree_shap_interventional(m, X, bg),
            valid,
        )
        out[f"tree_inner_interventional/background={name}"] = (
            lambda c, bg=bg: t.tree_inner(m, X, y, attribution="interventional", background=bg),
            valid,
        )
    out["tree_inner/background_without_interventional"] = (
        lambda c: t.tree_inner(m, X, y, background=X.iloc[:20]),
        False,
    )
    return out


def _booster_cases(ctx: Ctx) -> list[ApiCase]:
    """The native booster's feature-selection parameters and the multitask estimators'
    inputs."""
    from treeinner.booster import GBMRegressor, MultiTaskGBMRegressor

    X, y = ctx.X, ctx.y["reg"]
    small = {"n_estimators": 2, "max_depth": 2}

    def fit(**kw):
        return lambda c: GBMRegressor(**small, **kw).fit(X, y).predict(X)

    def multi(Xs, ys, **kw):
        est = GBMRegressor(**small)
        return lambda c: MultiTaskGBMRegressor(est, **kw).fit(Xs, ys).predict(X, task=0)

    tasks = X.assign(t=np.arange(N_ROWS) % 2)
    return _cases(
        {
            "booster/feature_penalty=-1": (fit(feature_penalty=-1.0), False),
            "booster/feature_penalty='0.1'": (fit(feature_penalty="0.1"), False),
            "booster/feature_penalty=nan": (fit(feature_penalty=np.nan), False),
            "booster/penalty_scaling=None": (fit(penalty_scaling=None), False),
            "booster/split_search='scan'": (fit(split_search="scan"), False),
            "booster/n_select=0": (fit(split_search="group_test", n_select=0), False),
            "booster/n_select=1.5": (fit(split_search="group_test", n_select=1.5), False),
            "booster/delta=1": (fit(split_search="group_test", delta=1.0), False),
            "booster/group_test_unbiased": (
                fit(split_search="group_test", split="unbiased"),
                False,
            ),
            "booster/group_test_ok": (fit(split_search="group_test", n_select=2), True),
            "booster/penalty_ok": (fit(feature_penalty=0.1, penalty_scaling="root"), True),
            "multitask/one_y": (multi([X, X], [y]), False),
            "multitask/not_lists": (multi(X, y), False),
            "multitask/width_mismatch": (multi([X, X[["a", "b"]]], [y, y]), False),
            "multitask/nan_y": (multi([X, X], [y, y * np.nan]), False),
            "multitask/group_penalty=-1": (multi([X, X], [y, y], group_penalty=-1.0), False),
            "multitask/task_column_missing": (
                lambda c: MultiTaskGBMRegressor(task_column="zz").fit(tasks, y),
                False,
            ),
            "multitask/task_column_nan": (
                lambda c: MultiTaskGBMRegressor(task_column="t").fit(
                    tasks.assign(t=np.where(np.arange(N_ROWS) < 5, np.nan, tasks["t"])), y
                ),
                False,
            ),
            "multitask/ok": (multi([X, X], [y, y], group_penalty=0.1), True),
        }
    )


def _selector_and_other_cases(ctx: Ctx) -> list[ApiCase]:
    """The selector's parameters, the Attribution's methods, labels of other objectives."""
    import treeinner as t

    X, y, m = ctx.X, ctx.y["reg"], ctx.models["xgb_reg"]
    native = type(ctx.models["native_reg"])

    def selector(**kw):
        return lambda c: t.TreeInnerSelector(native(n_estimators=2, max_depth=2), **kw).fit(X, y)

    def imp(model, yy, **kw):
        return lambda c: t.importance(c.models[model], X, yy, **kw)

    return _cases(
        {
            "selector/cv=1": (selector(cv=1), False),
            "selector/cv=2.5": (selector(cv=2.5), False),
            "selector/max_rounds=0": (selector(max_rounds=0), False),
            "selector/validation_fraction=1": (selector(cv=None, validation_fraction=1.0), False),
            "selector/refit=yes": (selector(refit="yes"), False),
            "selector/top_k=0": (selector(top_k=0), False),
            "selector/alpha=nan": (selector(alpha=np.nan), False),
            "selector/ok": (selector(cv=2), True),
            "attribution.to_frame/output=5": (lambda c: t.saabas(m, X).to_frame(output=5), False),
            "attribution.importance/alpha=2": (lambda c: t.saabas(m, X).importance(alpha=2), False),
            "attribution.importance/sample_weight=-1": (
                lambda c: t.saabas(m, X).importance(sample_weight=-np.ones(N_ROWS)),
                False,
            ),
            "significance/cv_on_booster": (
                lambda c: t.significance(m.get_booster(), X, y, cv=3),
                False,
            ),
            "importance/multi_labels_3": (imp("xgb_multi", np.full(N_ROWS, 3)), False),
            "importance/permutation_short_y": (
                imp("xgb_reg", y[:-1], methods="permutation"),
                False,
            ),
            "importance/cb_permutation_short_y": (
                imp("cb_reg", y[:-1], methods="permutation"),
                False,
            ),
            "importance/total_gain_no_y": (imp("xgb_reg", None, methods="total_gain"), True),
        }
    )


def api_cases(seed: int = 0) -> list[ApiCase]:
    """Every API case of the corpus."""
    ctx = context()
    return (
        _data_cases(ctx, seed)
        + _option_cases(ctx, seed)
        + _keyword_cases(ctx)
        + _model_cases(ctx)
        + _range_and_reference_cases(ctx)
        + _selector_and_other_cases(ctx)
        + _booster_cases(ctx)
    )


# ---------------------------------------------------------------------------- CLI cases
@dataclass(frozen=True)
class CliCase:
    """One command line: ``argv(files)`` its arguments; ``valid`` says it is valid input."""

    name: str
    argv: Callable[[dict[str, str]], list[str]]
    valid: bool = False


def _variant(files: dict[str, str], name: str, edit: Callable[[pd.DataFrame], Any]) -> str:
    """A copy of the data file changed by ``edit`` (a DataFrame, or text to write as is)."""
    path = os.path.join(files["folder"], name)
    if not os.path.exists(path):
        data = pd.read_csv(files["data"])
        out = edit(data)
        if isinstance(out, str):
            with open(path, "w") as f:
                f.write(out)
        else:
            out.to_csv(path, index=False)
    return path


def _nth(data: pd.DataFrame, col: str, value: Any) -> pd.DataFrame:
    data = data.copy()
    data[col] = data[col].astype(object)
    data.loc[3, col] = value
    return data


_DATA_VARIANTS: dict[str, Callable[[pd.DataFrame], Any]] = {
    "empty.csv": lambda d: "",
    "header.csv": lambda d: d.iloc[:0],
    "nan_label.csv": lambda d: _nth(d, "label", np.nan),
    "string_label.csv": lambda d: _nth(d, "label", "yes"),
    "soft_label.csv": lambda d: d.assign(label=0.3),
    "negative_weight.csv": lambda d: _nth(d, "w", -1.0),
    "zero_weight.csv": lambda d: d.assign(w=0.0),
    "missing_b.csv": lambda d: d.drop(columns="b"),
    "string_a.csv": lambda d: _nth(d, "a", "high"),
    "inf_a.csv": lambda d: _nth(d, "a", np.inf),
    "nan_a.csv": lambda d: _nth(d, "a", np.nan),
    "one_row.csv": lambda d: d.iloc[:1],
    "garbage.csv": lambda d: "a,b\n1,2,3,4\n\x00\x01\n",
    "data.xlsx": lambda d: "not a spreadsheet",
    "garbage_model.json": lambda d: '{"learner": 3',
    "empty_model.txt": lambda d: "",
}


def _explain(model: str = "xgb_bin", data: str | None = None, *extra: str) -> Callable:
    def argv(files: dict[str, str]) -> list[str]:
        d = files["data"] if data is None else _variant(files, data, _DATA_VARIANTS[data])
        m = files.get(model) or _variant(files, model, _DATA_VARIANTS[model])
        target = "label" if model == "xgb_bin" else "target"
        return ["explain", m, "--data", d, "--target", target, "--quiet", *extra]

    return argv


def _explain_dask(data: str | None, *extra: str) -> Callable:
    """``_explain`` with --data a glob pattern matching just the data file: read with Dask."""

    def argv(files: dict[str, str]) -> list[str]:
        args = _explain("xgb_bin", data, *extra)(files)
        args[3] = args[3][:-1] + f"[{args[3][-1]}]"  # x.csv -> x.cs[v]
        return args

    return argv


def _select(*extra: str, data: str | None = None) -> Callable:
    def argv(files: dict[str, str]) -> list[str]:
        return ["select", *_explain("xgb_bin", data)(files)[1:], *extra]

    return argv


#: data files explain refuses (read alone, or with Dask as a glob pattern), and those
#: refused for their weight column
_BAD_DATA = (
    "empty.csv",
    "header.csv",
    "nan_label.csv",
    "string_label.csv",
    "soft_label.csv",
    "missing_b.csv",
    "string_a.csv",
    "garbage.csv",
)
_BAD_WEIGHTS = ("negative_weight.csv", "zero_weight.csv")


def cli_cases() -> list[CliCase]:
    """Every command line of the corpus."""
    cases = [
        CliCase(f"explain/data={d}", _explain("xgb_bin", d)) for d in (*_BAD_DATA, "data.xlsx")
    ]
    cases += [
        CliCase(f"explain/weight={d}", _explain("xgb_bin", d, "--weight", "w"))
        for d in _BAD_WEIGHTS
    ]
    cases += [
        CliCase(f"explain/model={m}", _explain(m))
        for m in ("garbage_model.json", "empty_model.txt", "data.xlsx")
    ]
    options = [
        ("--n-repeats", "0"),
        ("--n-repeats", "-3"),
        ("--n-repeats", "1.5"),
        ("--bootstrap", "1"),
        ("--bootstrap", "-1"),
        ("--chunk-rows", "0"),
        ("--top", "0"),
        ("--top", "-2"),
        ("--alpha", "0"),
        ("--alpha", "1"),
        ("--alpha", "nan"),
        ("--alpha", "x"),
        ("--method", "gini"),
        ("--method", ","),
        ("--attribution", "lime"),
        ("--seed", "-1"),
        ("--seed", "x"),
        ("--out", "table.txt"),
        ("--plot", "plot.doc"),
        ("--reference", "no_such.csv"),
        ("--weight", "no_such_column"),
        ("--target", "no_such_column"),
        ("--no-such-option", "1"),
    ]
    cases += [CliCase(f"explain/{k}={v}", _explain("xgb_bin", None, k, v)) for k, v in options]
    cases += [
        CliCase(f"explain/lgb/{k}={v}", _explain("lgb_reg", None, k, v))
        for k, v in (("--n-repeats", "0"), ("--top", "0"), ("--method", "permutation,x"))
    ]
    select_options = [
        ("--top-k", "0"),
        ("--top-k", "1.5"),
        ("--alpha", "0.5"),
        ("--alpha", "-1"),
        ("--threshold", "nan"),
        ("--rule", "bonferroni"),
        ("--method", "tree_inner,abs_shap"),
        ("--method", "gini"),
    ]
    cases += [CliCase(f"select/{k}={v}", _select(k, v)) for k, v in select_options]
    cases += [CliCase(f"explain/dask/data={d}", _explain_dask(d)) for d in _BAD_DATA]
    cases += [
        CliCase(f"explain/dask/weight={d}", _explain_dask(d, "--weight", "w")) for d in _BAD_WEIGHTS
    ]
    cases += [
        CliCase(f"explain/dask/{k}={v}", _explain_dask(None, k, v))
        for k, v in (
            ("--bootstrap", "10"),
            ("--chunk-rows", "5"),
            ("--workers", "2"),
            ("--scheduler", "nope://x"),
            ("--weight", "label"),
        )
    ]
    cases += [CliCase("select/data=header.csv", _select(data="header.csv"))]
    cases += [CliCase("select/rule=fdr,threshold=0", _select("--rule", "fdr", "--threshold", "0"))]
    valid = [
        ("explain/data=inf_a.csv", _explain("xgb_bin", "inf_a.csv")),
        ("explain/data=nan_a.csv", _explain("xgb_bin", "nan_a.csv")),
        (
            "explain/data=soft_label.csv/--soft-labels",
            _explain("xgb_bin", "soft_label.csv", "--soft-labels"),
        ),
        ("explain/cb", _explain("cb_reg", None, "--method", "tree_inner_shap")),
        ("explain/lgb/--no-se", _explain("lgb_reg", None, "--no-se")),
        ("explain/dask", _explain_dask(None, "--method", "tree_inner", "permutation")),
        ("explain/dask/data=nan_a.csv", _explain_dask("nan_a.csv")),
        ("select/--top-k=2", _select("--top-k", "2")),
    ]
    return cases + [CliCase(name, argv, True) for name, argv in valid]


def _cli_outcome(case: CliCase, ctx: Ctx, retry: bool = True) -> Case:
    """The command line's outcome; one over the time limit runs once more (its first run may
    have compiled the kernels into the cache), and only a second timeout is a hang."""
    argv = [sys.executable, "-m", "treeinner", *case.argv(ctx.files)]
    env = {**os.environ, "TREEINNER_PROGRESS": "never"}
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT,
            cwd=ctx.files["folder"],
            env=env,
        )
    except subprocess.TimeoutExpired:
        if retry:
            return _cli_outcome(case, ctx, retry=False)
        return Case(f"cli:{case.name}", "hang", f"over {TIME_LIMIT:g} s")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("treeinner: error:")]
    clean = "Traceback" not in proc.stderr
    if proc.returncode == 0:
        good = case.valid and clean and proc.stdout.strip() != ""
        outcome = "equal" if good else "silent"
    elif proc.returncode in (1, 2) and len(errors) == 1 and clean and not case.valid:
        outcome = "refused"
    else:
        outcome = "foreign"
    detail = "" if outcome in ("equal", "refused") else f"exit {proc.returncode}: {proc.stderr}"
    if outcome == "refused":
        detail = errors[0]
    return Case(f"cli:{case.name}", outcome, " ".join(detail.split())[:300])


# ---------------------------------------------------------------------------- the run
def _chosen(n_api: int, n_cli: int, n: int | None, seed: int) -> tuple[list[int], list[int]]:
    """Which API and CLI cases a run of ``n`` cases takes: all for None; else a seeded
    sample keeping about one CLI case in forty (at least one; a command line costs a Python
    start, seconds, where an API case costs milliseconds)."""
    if n is None:
        return list(range(n_api)), list(range(n_cli))
    rng = np.random.default_rng(seed)
    k_cli = min(n_cli, max(1, n // 40)) if n > 1 else 0
    k_api = min(n_api, max(0, n - k_cli))
    api = sorted(rng.choice(n_api, size=k_api, replace=False).tolist())
    cli = sorted(rng.choice(n_cli, size=k_cli, replace=False).tolist())
    return api, cli


def _warm_up(apis: list[ApiCase], ctx: Ctx) -> None:
    """Run every valid call once, untimed: a fresh checkout's first call of each function
    compiles its Numba kernels (into the on-disk cache the command lines read too), which is
    issue 18's cost, not a hang."""
    for case in apis:
        if case.valid:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    case.call(ctx)
                except Exception:  # noqa: BLE001, S110 - judged when the case itself runs
                    pass


def run(n: int | None = None, seed: int = 0) -> list[Case]:
    """Run the bad-input corpus (``n`` cases of it; all with None) and return each case's
    outcome (``tests.fuzz._outcome``)."""
    ctx = context()
    apis, clis = api_cases(seed), cli_cases()
    pick_api, pick_cli = _chosen(len(apis), len(clis), n, seed)
    _warm_up(apis, ctx)
    cases = [_api_outcome(apis[i], ctx) for i in pick_api]
    return cases + [_cli_outcome(clis[i], ctx) for i in pick_cli]
