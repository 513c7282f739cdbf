"""XGBoost: read a model's JSON or UBJSON document (a ``.json``/``.ubj`` file, or a Booster's
``save_raw("ubj")``) into a TreeEnsemble.

Routing rule: left iff float32(x) < threshold; NaN takes ``default_left``; a categorical node's
categories go right. Leaf values are in ``split_conditions`` (already scaled by eta); inner
``base_weights`` are the unscaled -G/(H + lambda), which lets us recover eta and lambda from a
model file that lost its training parameters (``_xgb_recover``).

Phases: ``_read_header`` (booster kind, outputs, objective, base margin, tree layout) ->
``_parse_tree`` for every tree -> ``_feature_names`` -> ``_eta_lambda`` (recovered, read from
the configuration or assumed) and ``_inexact`` (the objective's and options' conventions) ->
``assemble``.

Validation: the document is refused when it is loaded (``Corrupt``, naming the field, the tree
and the node) wherever XGBoost refuses it, crashes on it, or would give other numbers than
treeinner: parameters are integers in strings (``_param_int``), arrays have the element types
XGBoost's reader takes (``_field``; typed UBJSON arrays their exact types), node statistics are
finite (hessian sums >= 0, > 0 at splits), flags are 0/1, children, parents and deleted-node
counts agree, categorical splits and the ``cats`` block are consistent, and tree counts agree
with ``num_trees``, ``tree_info`` and ``iteration_indptr``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import re
from typing import Any, NamedTuple

import numpy as np

from .. import _format as fmt
from .._errors import InputError, InputTypeError, ModelFormatError, UnsupportedModelError
from ..ensemble import TreeEnsemble
from . import _ubjson
from ._common import assemble, bitset, cat_sets, corrupt, emit, library_of, pick
from ._records import Booster, Conversion, Export, Objective, Overrides, Parts, Tree
from ._xgb_recover import Stats, recover

__all__ = ["export", "from_booster", "from_dict", "from_document",
           "from_export", "from_file", "is_xgboost_model", "kernel_objective",
           "matches", "matches_document", "sniff_file"]  # fmt: skip

#: objective -> kernel objective code (the native booster uses these names too)
_CODES = {
    "reg:squarederror": fmt.SQUARED,
    "reg:linear": fmt.SQUARED,
    "reg:logistic": fmt.LOGISTIC,
    "binary:logistic": fmt.LOGISTIC,
    "binary:logitraw": fmt.LOGISTIC,
    "multi:softprob": fmt.SOFTMAX,
    "multi:softmax": fmt.SOFTMAX,
    "count:poisson": fmt.POISSON,
    "reg:gamma": fmt.GAMMA,
    "reg:tweedie": fmt.TWEEDIE,
    "reg:pseudohubererror": fmt.PSEUDO_HUBER,
    "reg:squaredlogerror": fmt.SQUARED_LOG,
    "binary:hinge": fmt.HINGE,
}

#: objective -> how base_score (output space) becomes the base margin
_BASE_LINK = {
    "reg:squarederror": "identity",
    "reg:squaredlogerror": "identity",
    "reg:pseudohubererror": "identity",
    "reg:absoluteerror": "identity",
    "reg:quantileerror": "identity",
    "reg:linear": "identity",
    "reg:logistic": "logit",
    "binary:logistic": "logit",
    "binary:logitraw": "identity",
    "binary:hinge": "identity",
    "count:poisson": "log",
    "reg:gamma": "log",
    "reg:tweedie": "log",
    "multi:softprob": "identity",
    "multi:softmax": "identity",
    "rank:pairwise": "identity",
    "rank:ndcg": "identity",
    "rank:map": "identity",
}
#: objectives whose leaves are not -eta G / (H + lambda) (refit after the tree is grown)
_REFIT_OBJECTIVES = {"reg:absoluteerror", "reg:quantileerror"}
_XGB_DEFAULTS = {"eta": 0.3, "lambda": 1.0}
_CORRUPT_ERRORS = (KeyError, TypeError, IndexError, AttributeError)


def _bad(msg: str) -> ValueError:
    """A corrupt-model error of this adapter."""
    return corrupt("XGBoost", msg)


# ---------------------------------------------------------------------- the adapter interface
def matches(obj: Any) -> bool:
    """Whether ``obj`` comes from the xgboost package (a Booster or a scikit-learn wrapper,
    the ``xgboost.dask`` ones included) or is what ``xgboost.dask.train`` returns."""
    return library_of(obj) == "xgboost" or _dask_train_output(obj)


def _dask_train_output(obj: Any) -> bool:
    """Whether ``obj`` is ``xgboost.dask.train``'s result: ``{"booster": Booster, "history":
    ...}``."""
    return (
        isinstance(obj, dict)
        and set(obj) <= {"booster", "history"}
        and library_of(obj.get("booster")) == "xgboost"
    )


def export(obj: Any) -> Export:
    """Serialize an ``xgboost.Booster`` or fitted scikit-learn wrapper: ``save_raw("ubj")``, and
    ``save_config()`` (eta, lambda and the options that make node values inexact) as ``extra``."""
    if _dask_train_output(obj):
        obj = obj["booster"]
    if not (hasattr(obj, "save_raw") or hasattr(obj, "get_booster")):
        raise InputTypeError(f"{type(obj).__name__} is not an XGBoost booster or model.")
    booster = obj
    if hasattr(obj, "get_booster"):
        try:
            booster = obj.get_booster()
        except Exception as e:  # NotFittedError and the like
            raise InputError(f"The {type(obj).__name__} is not fitted: {e}") from e
    try:
        raw = booster.save_raw(raw_format="ubj")
        config = booster.save_config()
    except Exception as e:  # XGBoostError for an empty Booster()
        raise ModelFormatError(
            "The XGBoost booster is not trained (it holds no model): "
            + str(e).split("\n")[0][-120:]
        ) from e
    return Export(bytes(raw), config.encode("utf-8"))


def from_export(exported: Export, given: Overrides) -> Conversion:
    """Convert what ``export`` serialized (warnings returned, not given)."""
    try:
        doc = _ubjson.loads(exported.data)
    except ValueError as e:
        raise _bad(str(e)) from e
    return _convert(doc, json.loads(exported.extra), given)


def from_booster(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """An XGBoost Booster or fitted scikit-learn wrapper as a TreeEnsemble (not cached)."""
    return emit(from_export(export(model), Overrides(learning_rate, reg_lambda)))


def sniff_file(head: bytes) -> bool:
    """Whether a file starting with ``head`` is in XGBoost's deprecated binary format."""
    return head.lstrip().startswith(b"binf") or head[:4] == b"\x00\x00\x00?"


def from_file(path: str, data: bytes, given: Overrides) -> Conversion:
    """A file ``sniff_file`` recognised: refused, with what to do instead."""
    raise ModelFormatError(
        f"{path!r} is an XGBoost model in the deprecated binary format; load it with "
        "xgboost and save it as .json or .ubj."
    )


def is_xgboost_model(d: Any) -> bool:
    """Whether a decoded JSON document is an XGBoost model."""
    return isinstance(d, dict) and isinstance(d.get("learner"), dict) and "version" in d


matches_document = is_xgboost_model


def from_document(doc: Any, given: Overrides) -> Conversion:
    """Convert a decoded model document (a ``.json`` or ``.ubj`` file; no configuration)."""
    return _convert(doc, None, given)


def from_dict(
    doc: dict,
    *,
    config: dict | None = None,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
) -> TreeEnsemble:
    """Build a TreeEnsemble from a decoded XGBoost model document (``save_raw("json")``).

    Parameters
    ----------
    doc : dict
        The model as JSON/UBJSON decodes it.
    config : dict, optional
        ``json.loads(booster.save_config())``, when the booster is at hand.
    learning_rate, reg_lambda : float, optional
        Override the values read from the config or recovered from the trees.

    Returns
    -------
    TreeEnsemble
    """
    return emit(_convert(doc, config, Overrides(learning_rate, reg_lambda)))


def _convert(doc: Any, config: dict | None, given: Overrides) -> Conversion:
    """Every phase, from the document to the assembled ensemble."""
    if not is_xgboost_model(doc):
        raise ModelFormatError("Not an XGBoost model document (no 'learner').")
    try:
        h = _read_header(doc, config)
        parsed = [
            _parse_tree(t, i, h.n_features, float(w) if h.booster == "dart" else None,
                        float(h.base[g]))
            for i, (t, w, g) in enumerate(zip(h.trees, h.weights, h.tree_group))
        ]  # fmt: skip
        trees = [t for t, _ in parsed]
        names, named = _feature_names(doc["learner"], h.n_features)
        etas, lam, notes = _eta_lambda(h, [s for _, s in parsed], given)
        return assemble(
            Parts(
                _BOOSTER,
                trees,
                h.tree_group,
                h.tree_iteration,
                learning_rate=etas,
                base_margin=h.base,
                feature_names=names,
                named=named,
                reg_lambda=lam,
                objective=Objective(h.objective, h.obj_params, h.n_outputs),
                source_version=h.version,
                tree_weight=h.weights,
                categories=_parse_categories(h.model, h.n_features),
                params={k: v for k, v in h.cfg.items() if k != "multi_strategy"},
                inexact=_inexact(h),
                notes=notes,
            )
        )
    except _CORRUPT_ERRORS as e:
        raise _bad(f"a field is missing or of the wrong kind ({type(e).__name__}: {e}).") from e


# ---------------------------------------------------------------------- header
class _Header(NamedTuple):
    """What the model document says besides the trees themselves."""

    version: str
    booster: str  # "gbtree" or "dart"
    model: dict  # the section holding the trees
    trees: list
    weights: np.ndarray  # DART's weight_drop (float32 values), ones otherwise
    n_outputs: int
    n_features: int
    objective: str
    obj_params: dict
    cfg: dict  # training parameters from save_config()
    tree_group: np.ndarray
    tree_iteration: np.ndarray
    base: np.ndarray  # base margin per output


def _read_header(doc: dict, config: dict | None) -> _Header:
    """The header phase: booster kind, outputs, objective, configuration, tree layout and base
    margin (checked against each other)."""
    learner = doc["learner"]
    version = ".".join(str(v) for v in _version(doc.get("version")))
    gb = _section(learner, "gradient_booster", "learner")
    booster, model, trees, weights = _booster_section(gb)
    mp = _section(learner, "learner_model_param", "learner")
    _section(learner, "attributes", "learner")  # XGBoost requires it
    num_class = _param_int(mp, "num_class", "learner_model_param", None, 0)
    num_target = _param_int(mp, "num_target", "learner_model_param", 1, 1)
    _param_int(mp, "boost_from_average", "learner_model_param", 1, 0)
    n_outputs = max(num_class, num_target, 1)
    n_features = _param_int(mp, "num_feature", "learner_model_param", None, 0)
    objective = _objective_name(learner)
    cfg = _config_params(config)
    if cfg.get("multi_strategy", "one_output_per_tree") != "one_output_per_tree":
        raise UnsupportedModelError(
            f"XGBoost multi_strategy={cfg['multi_strategy']!r} (vector leaves) is not supported."
        )
    group, iteration = _tree_layout(model, len(trees), n_outputs)
    obj_params = _objective_params(learner["objective"])
    if (num_class > 1) != objective.startswith("multi:"):
        raise _bad(
            f"learner_model_param.num_class is {num_class}, but objective {objective} "
            f"{'needs num_class >= 2' if num_class <= 1 else 'has no classes'} (the outputs "
            "do not match the objective)."
        )
    if objective.startswith("multi:"):
        sm = _section(learner["objective"], "softmax_multiclass_param", "learner.objective")
        where = "learner.objective.softmax_multiclass_param"
        if _param_int(sm, "num_class", where, None, 1) != num_class:
            raise _bad(f"{where}.num_class is {sm['num_class']!r}, not num_class {num_class}.")
    if n_outputs > 1 and num_class > 1:
        obj_params["num_class"] = num_class
    if "base_score" not in mp:
        raise _bad("learner_model_param.base_score is missing.")
    score = _parse_base_score(mp["base_score"])
    base = _base_margin(score, _BASE_LINK[objective], n_outputs)
    return _Header(version, booster, model, trees, weights, n_outputs, n_features, objective,
                   obj_params, cfg, group, iteration, base)  # fmt: skip


def _version(v: Any) -> list[int]:
    """The model's ``version`` (three non-negative integers, as XGBoost requires)."""
    ver = _field(v, "version", "int")
    if ver.shape != (3,) or np.any(ver < 0):
        raise _bad(f"version {ver.tolist()} is not [major, minor, patch].")
    return ver.tolist()


def _section(parent: dict, key: str, where: str) -> dict:
    """A required object-valued field."""
    sec = parent.get(key)
    if not isinstance(sec, dict):
        what = "missing" if sec is None else f"a {type(sec).__name__}, not an object"
        raise _bad(f"{where}.{key} is {what}.")
    return sec


def _objective_name(learner: dict) -> str:
    """The objective's name (required, as XGBoost requires it), refused when unsupported."""
    name = _section(learner, "objective", "learner").get("name")
    if not isinstance(name, str):
        raise _bad(f"learner.objective.name is {name!r}, not a string.")
    if name not in _BASE_LINK:
        raise UnsupportedModelError(f"XGBoost objective {name!r} is not supported.")
    return name


def _booster_section(gb: dict) -> tuple[str, dict, list, np.ndarray]:
    """The booster kind, the section holding the trees, the trees and their DART weights."""
    name = gb.get("name")
    if not isinstance(name, str):
        raise _bad(f"learner.gradient_booster.name is {name!r}, not a string.")
    if name == "gblinear":
        raise UnsupportedModelError("XGBoost booster='gblinear' has no trees to explain.")
    if name not in ("gbtree", "dart"):
        raise UnsupportedModelError(f"XGBoost booster={name!r} is not supported.")
    where, holder = "gradient_booster", gb
    if name == "dart":  # DART wraps a gbtree booster
        holder, where = _section(gb, "gbtree", where), "gradient_booster.gbtree"
        if holder.get("name") != "gbtree":
            raise _bad(f"{where}.name is {holder.get('name')!r}, not 'gbtree'.")
    model = _section(holder, "model", where)
    trees = model["trees"]
    if not isinstance(trees, list):
        raise _bad(f"trees is a {type(trees).__name__}, not an array.")
    n_trees = len(trees)
    if n_trees == 0:
        raise ModelFormatError("The XGBoost model has no trees (was it trained for 0 rounds?).")
    weights = np.ones(n_trees)
    if name == "dart":
        # XGBoost keeps the weights in float32; a JSON file prints them in decimal
        weights = _field(gb.get("weight_drop"), "weight_drop", "float", n_trees)
        bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
        if bad.size:
            raise _bad(
                f"tree {bad[0]}: weight_drop is {float(weights[bad[0]])!r}; DART tree weights "
                "are finite and >= 0."
            )
        weights = weights.astype(np.float64)
    return name, model, trees, weights


def _tree_layout(model: dict, n_trees: int, n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """The output and the boosting round of every tree; ``num_trees``, ``tree_info`` and
    ``iteration_indptr`` checked against the trees."""
    gp = _section(model, "gbtree_model_param", "model")
    declared = _param_int(gp, "num_trees", "gbtree_model_param", None, 0)
    if declared != n_trees:
        raise _bad(f"gbtree_model_param.num_trees is {declared} but the model has {n_trees} trees.")
    npt = _param_int(gp, "num_parallel_tree", "gbtree_model_param", 1, 1)
    tree_info = _field(model.get("tree_info"), "tree_info", "int", n_trees)
    bad = np.flatnonzero((tree_info < 0) | (tree_info >= n_outputs))
    if bad.size:
        raise _bad(
            f"tree {bad[0]}: tree_info is {tree_info[bad[0]]}; tree_info names an output that "
            f"does not exist (the model has {n_outputs})."
        )
    indptr = model.get("iteration_indptr")
    if indptr is not None:
        indptr = _field(indptr, "iteration_indptr", "int")
    if indptr is not None and len(indptr) >= 2:
        if indptr[0] != 0 or indptr[-1] != n_trees or np.any(np.diff(indptr) < 0):
            raise _bad(
                f"iteration_indptr does not match the trees (it must rise from 0 to {n_trees})."
            )
        return tree_info, np.searchsorted(indptr, np.arange(n_trees), side="right") - 1
    return tree_info, np.arange(n_trees) // (npt * n_outputs)


_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def _param_int(d: dict, key: str, where: str, default: int | None, minimum: int) -> int:
    """An integer parameter, stored as a string as XGBoost writes (and requires) it; refused,
    naming ``where.key``, when missing (``default`` None), not an integer or below ``minimum``."""
    if key not in d:
        if default is None:
            raise _bad(f"{where}.{key} is missing.")
        return default
    v = d[key]
    if not isinstance(v, str) or not _INT_TEXT.fullmatch(v):
        raise _bad(f"{where}.{key} is {v!r}, not an integer (in a string, as XGBoost writes it).")
    out = int(v)
    if out < minimum:
        raise _bad(f"{where}.{key} is {out}; it must be >= {minimum}.")
    return out


#: JSON element types as XGBoost's reader requires them: (Python types, NumPy kinds)
_ELEMENT = {
    "int": ((int, np.integer), "iu"),
    "int64": ((int, np.integer), "iu"),  # not limited to int32: numeric categories
    "float": ((float, np.floating), "f"),
    "flag": ((int, np.integer, bool, np.bool_), "iub"),  # default_left: integers or booleans
}
_INT_LIMIT = 2**31  # XGBoost's integer arrays are int32


def _field(value: Any, name: str, kind: str, n: int | None = None) -> np.ndarray:
    """An array field as a 1-D array (int64 for ``kind`` "int"/"flag", float32 for "float"),
    refused, naming ``name``, when it is missing, not an array, of another element type than
    XGBoost's reader takes (it refuses 1 in a float array and 1.0 in an integer one), out of
    the int32 range, or not of length ``n``."""
    if value is None:
        raise _bad(f"{name} is missing.")
    types, kinds = _ELEMENT[kind]
    limit = 2.0**63 if kind == "int64" else _INT_LIMIT
    a: np.ndarray | None
    if isinstance(value, np.ndarray):
        ok = value.ndim == 1 and value.dtype.kind in kinds
        a = value
    elif isinstance(value, list):
        found = set(map(type, value))
        ok = all(issubclass(t, types) for t in found)
        if kind != "flag" and found & {bool, np.bool_}:
            ok = False
        a = np.asarray(value) if ok else None
        if not ok and not all(issubclass(t, (int, float, np.number)) for t in found):
            raise _bad(f"{name} is not numeric (it holds {sorted(t.__name__ for t in found)}).")
    else:
        raise _bad(f"{name} is a {type(value).__name__}, not an array.")
    if not ok or a is None:
        raise _bad(f"{name} does not hold {'numbers' if kind == 'float' else 'integers'} only.")
    if kind == "float":
        with np.errstate(over="ignore"):
            out = a.astype(np.float32)
    elif a.size and (a.dtype == object or np.max(np.abs(a.astype(np.float64))) >= limit):
        raise _bad(f"{name} holds an integer outside the {kind} range.")
    else:
        out = a.astype(np.int64)
    if n is not None and out.shape[0] != n:
        raise _bad(f"{name} has the wrong length ({out.shape[0]} values for {n}).")
    return out


def _objective_params(obj: dict) -> dict[str, Any]:
    """The objective's parameters (numbers where they parse as numbers)."""
    out: dict[str, Any] = {}
    for key, sub in obj.items():
        if key != "name" and not (
            isinstance(sub, dict) and all(isinstance(v, str) for v in sub.values())
        ):
            raise _bad(f"learner.objective.{key} is {sub!r}, not an object of string parameters.")
        if isinstance(sub, dict):
            for k, v in sub.items():
                try:
                    out[k] = float(v)
                except (TypeError, ValueError):
                    out[k] = v
                lo, hi = _NUMERIC_PARAMS.get(k, (None, None))
                x = out[k]
                if lo is not None and not (isinstance(x, float) and math.isfinite(x)):
                    raise _bad(f"learner.objective.{key}.{k} is {v!r}, not a finite number.")
                if lo is not None and not lo <= x <= hi:
                    raise _bad(f"learner.objective.{key}.{k} is {v!r}; XGBoost takes [{lo}, {hi}].")
    return out


#: objective parameters the gradients read, and the ranges XGBoost accepts
_NUMERIC_PARAMS = {
    "scale_pos_weight": (0.0, math.inf),
    "tweedie_variance_power": (1.0, 2.0),
    "huber_slope": (-math.inf, math.inf),
    "max_delta_step": (0.0, math.inf),
}  # fmt: skip


def _config_params(config: dict | None) -> dict[str, Any]:
    """The training parameters of ``save_config()`` that the conversion reads."""
    if not config:
        return {}
    gb = config.get("learner", {}).get("gradient_booster", {})
    tp = gb.get("tree_train_param") or gb.get("gbtree", {}).get("tree_train_param") or {}
    out: dict[str, Any] = {}
    for k in ("eta", "lambda", "alpha", "max_delta_step", "subsample", "colsample_bytree"):
        if k in tp:
            try:
                out[k] = float(np.float32(tp[k]))  # XGBoost keeps its parameters in float32
            except (TypeError, ValueError):
                pass
    lp = config.get("learner", {}).get("learner_train_param", {})
    if "multi_strategy" in lp:
        out["multi_strategy"] = lp["multi_strategy"]
    return out


# ---------------------------------------------------------------------- base margin
def _libm_f32(name: str):
    """A float32 function of the C library, or None where it cannot be loaded."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        fn = getattr(lib, name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float]
    return fn


_LOGF = _libm_f32("logf")


def _logf(x: np.float32) -> np.float32:
    """``logf`` as XGBoost's C++ calls it (the C library's, where it can be loaded)."""
    if _LOGF is not None:
        return np.float32(_LOGF(float(x)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float32(math.log(float(x)) if x > 0 else (-np.inf if x == 0 else np.nan))


def _base_margin(base_score: list[float], link: str, n_outputs: int) -> np.ndarray:
    """``base_score`` (output space, float32) through the objective's link, per output."""
    vals = np.asarray(base_score, dtype=np.float32)
    if vals.size == 1 and n_outputs > 1:
        vals = np.repeat(vals, n_outputs)
    if vals.size != n_outputs:
        raise _bad(f"base_score has {vals.size} values for {n_outputs} outputs.")
    out = np.empty(n_outputs, dtype=np.float64)
    one = np.float32(1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i, p in enumerate(vals):
            if link == "logit":
                m = -_logf(np.float32(one / p - one))
            elif link == "log":
                m = _logf(p)
            else:
                m = p
            out[i] = float(m)
    if not np.all(np.isfinite(out)):
        raise _bad(
            f"learner_model_param.base_score {base_score} gives a non-finite base margin "
            f"through the objective's {link} link."
        )
    return out


def _parse_base_score(s: Any) -> list[float]:
    """``base_score`` as XGBoost writes it: a string holding a JSON number or an array of them
    (XGBoost refuses anything else, e.g. a bare number, ``.5``, ``nan``)."""

    def refuse(_: str) -> None:
        """``NaN`` and ``Infinity``: XGBoost's JSON has no such numbers."""
        raise ValueError("not a number")

    try:
        if not isinstance(s, str):
            raise ValueError("not a string")
        v = json.loads(s, parse_constant=refuse)
        vals = v if isinstance(v, list) else [v]
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            raise ValueError("not a number")
    except ValueError as e:  # json.JSONDecodeError too
        raise _bad(
            f"learner_model_param.base_score is {s!r}, not a number or an array of numbers "
            "in a string."
        ) from e
    return [float(x) for x in vals]


# ---------------------------------------------------------------------- categories
_CAT_KEYS = ("enc", "feature_segments", "sorted_idx")


def _parse_categories(model: dict, n_features: int) -> dict[int, list]:
    """The training categories of each categorical feature (XGBoost >= 3 stores them in
    ``cats``; pandas input is recoded by them). The block is checked whole: one encoding per
    feature, ``feature_segments`` counting their categories, ``sorted_idx`` sorting each
    feature's categories (XGBoost looks categories up by it)."""
    if "cats" not in model:
        return {}
    cats = _section(model, "cats", "model")
    enc = cats.get("enc")
    for key in _CAT_KEYS:
        if key not in cats:
            raise _bad(f"cats.{key} is missing.")
    if (
        isinstance(enc, list)
        and not enc
        and not any(_field(cats[k], f"cats.{k}", "int").size for k in _CAT_KEYS[1:])
    ):
        return {}  # no categorical features: XGBoost writes an empty block
    if not isinstance(enc, list) or len(enc) != n_features:
        got = f"{len(enc)} entries" if isinstance(enc, list) else repr(type(enc).__name__)
        raise _bad(f"cats.enc has {got}; it needs one per feature ({n_features}).")
    segs = _field(cats.get("feature_segments"), "cats.feature_segments", "int", n_features + 1)
    order = _field(cats.get("sorted_idx"), "cats.sorted_idx", "int")
    if segs[0] != 0 or np.any(np.diff(segs) < 0) or segs[-1] != order.shape[0]:
        raise _bad(
            f"cats.feature_segments {segs.tolist()} does not rise from 0 to the length of "
            f"cats.sorted_idx ({order.shape[0]})."
        )
    out: dict[int, list] = {}
    for j, e in enumerate(enc):
        values, keys = _encoding(e, f"cats.enc[{j}]")
        if segs[j + 1] - segs[j] != len(values):
            raise _bad(
                f"feature {j}: cats.enc[{j}] has {len(values)} categories but "
                f"cats.feature_segments gives it {segs[j + 1] - segs[j]}."
            )
        idx = order[segs[j] : segs[j + 1]]
        if not np.array_equal(np.sort(idx), np.arange(idx.size)) or any(
            keys[a] >= keys[b] for a, b in zip(idx[:-1], idx[1:])
        ):
            raise _bad(
                f"feature {j}: cats.sorted_idx {idx.tolist()} does not sort the categories of "
                f"cats.enc[{j}] (they must be distinct; XGBoost looks them up by this order)."
            )
        if values:
            out[j] = values
    return out


#: ``cats.enc[j].type`` codes of integer categories (XGBoost also knows 7 and 8, floating
#: point, which pandas input cannot have: refused)
_CAT_TYPES = range(9, 17)


def _encoding(e: Any, name: str) -> tuple[list, list]:
    """One feature's categories (strings, or numbers) and their sort keys in XGBoost's order
    (strings by signed bytes, as XGBoost compares them); none for a numeric feature."""
    if not isinstance(e, dict):
        raise _bad(f"{name} is a {type(e).__name__}, not an object.")
    if "offsets" not in e:
        if type(e.get("type")) is not int or e["type"] not in _CAT_TYPES:
            raise _bad(
                f"{name}.type is {e.get('type')!r}; integer categories have types "
                f"{_CAT_TYPES.start} to {_CAT_TYPES.stop - 1}."
            )
        out = _field(e.get("values"), f"{name}.values", "int64").tolist()
        return out, out
    offsets = _field(e.get("offsets"), f"{name}.offsets", "int")
    raw = _field(e.get("values"), f"{name}.values", "int")
    if offsets.size == 0 and raw.size == 0:
        return [], []
    if (
        offsets.size < 2 or offsets[0] != 0 or np.any(np.diff(offsets) < 0)
        or offsets[-1] != raw.size or np.any((raw < -128) | (raw > 255))
    ):  # fmt: skip
        raise _bad(
            f"{name}.offsets {offsets.tolist()[:8]} do not split {name}.values ({raw.size} "
            "bytes) into strings."
        )
    data = bytes((raw & 0xFF).tolist())
    words = [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    try:
        values = [w.decode("utf-8") for w in words]
    except UnicodeDecodeError as err:
        raise _bad(f"{name}.values is not valid UTF-8 ({err}).") from err
    if any(b"\x00" in w for w in words):  # XGBoost's C strings end there
        raise _bad(f"{name}.values holds a NUL byte in a category.")
    return values, [bytes(b ^ 0x80 for b in w) for w in words]  # signed-byte order


# ---------------------------------------------------------------------- trees
#: a tree's node arrays and their JSON element types, as XGBoost's reader requires them
_TREE_FIELDS = {
    "left_children": "int", "right_children": "int", "parents": "int", "split_indices": "int",
    "split_conditions": "float", "default_left": "flag", "loss_changes": "float",
    "sum_hessian": "float", "base_weights": "float", "split_type": "int",
}  # fmt: skip
_CAT_FIELDS = ("categories", "categories_nodes", "categories_segments", "categories_sizes")


def _tree_fields(tree: Any, t: int) -> dict[str, np.ndarray]:
    """Tree ``t``'s node arrays, typed and of ``tree_param.num_nodes`` entries each, and its
    categorical arrays (present in XGBoost >= 1.6; required where a split is categorical)."""
    if not isinstance(tree, dict):
        raise _bad(f"tree {t} is a {type(tree).__name__}, not an object.")
    tp = _section(tree, "tree_param", f"tree {t}")
    where = f"tree {t}: tree_param"
    if _param_int(tp, "size_leaf_vector", where, None, 0) > 1:
        raise UnsupportedModelError(
            "XGBoost models with vector leaves (multi_strategy='multi_output_tree') are not "
            "supported; train with multi_strategy='one_output_per_tree'."
        )
    n = _param_int(tp, "num_nodes", where, None, 1)
    a_deleted = _param_int(tp, "num_deleted", where, None, 0)
    _param_int(tp, "num_feature", where, None, 0)
    if type(tree.get("id")) is not int or tree["id"] != t:
        raise _bad(f"tree {t}: id is {tree.get('id')!r}; XGBoost places a tree by its id.")
    a = {}
    for key, kind in _TREE_FIELDS.items():
        if key not in tree and key != "split_type":
            raise _bad(f"tree {t} lacks '{key}'.")
        a[key] = _field(tree.get(key, [0] * n), f"tree {t}: '{key}'", kind, n)
    if any(k in tree for k in _CAT_FIELDS) or np.any(a["split_type"] == 1):
        for key in _CAT_FIELDS:
            a[key] = _field(tree.get(key), f"tree {t}: '{key}'", "int")
    if isinstance(tree["parents"], np.ndarray):
        _check_typed(tree, t)
    a["num_deleted"] = np.array([a_deleted])
    return a


#: the typed arrays of a UBJSON tree (XGBoost reads a tree whose ``parents`` is typed with
#: these exact types, and refuses any other)
_TYPED = {
    "left_children": ("i4",), "right_children": ("i4",), "parents": ("i4",),
    "split_indices": ("i4", "i8"), "split_conditions": ("f4",), "default_left": ("u1",),
    "loss_changes": ("f4",), "sum_hessian": ("f4",), "base_weights": ("f4",),
    "split_type": ("u1",), "categories": ("i4",), "categories_nodes": ("i4",),
    "categories_segments": ("i8",), "categories_sizes": ("i8",),
}  # fmt: skip


def _check_typed(tree: dict, t: int) -> None:
    """Refuse a UBJSON tree mixing typed arrays with untyped ones or other element types."""
    for key, types in _TYPED.items():
        v = tree.get(key)
        if v is None:
            continue
        got = f"{v.dtype.kind}{v.dtype.itemsize}" if isinstance(v, np.ndarray) else "untyped"
        if got not in types:
            raise _bad(
                f"tree {t}: '{key}' is an array of {got}; in a UBJSON model it is a typed "
                f"array of {' or '.join(types)}."
            )


def _reachable(left: np.ndarray, right: np.ndarray, t: int) -> np.ndarray:
    """Tree ``t``'s node ids reachable from the root, in id order (deleted nodes dropped);
    level by level."""
    n = left.shape[0]
    seen = np.zeros(n, dtype=bool)
    level = np.zeros(1, dtype=np.int64)
    while level.size:
        bad = (level < 0) | (level >= n)
        if np.any(bad):
            raise _bad(f"tree {t}: child index {int(level[bad][0])} outside the tree.")
        if np.any(seen[level]) or np.unique(level).size != level.size:
            raise _bad(f"tree {t} has a cycle or a shared node (left_children/right_children).")
        seen[level] = True
        inner = level[left[level] != -1]
        level = np.concatenate([left[inner], right[inner]])
    return np.flatnonzero(seen)


def _dart_leaf(leaf: np.ndarray, weight: float, base: float) -> np.ndarray:
    """A DART leaf as ``inplace_predict`` adds it: ((base + v) - base) * w, all in float32.

    (``predict(DMatrix)`` adds ``v * w`` instead; the two differ in the last bit. We follow
    ``inplace_predict``.)
    """
    b = np.float32(base)
    shifted = (b + leaf.astype(np.float32)).astype(np.float32) - b
    return (shifted.astype(np.float32) * np.float32(weight)).astype(np.float32)


def _check_nodes(a: dict[str, np.ndarray], keep: np.ndarray, t: int, n_features: int) -> None:
    """Refuse a value XGBoost's results would not survive at a reachable node (node ids as in
    the file): non-finite statistics, thresholds and leaf values, negative hessian sums, a
    split of zero hessian, features outside the model, flags that are not 0 or 1."""
    inner = keep[a["left_children"][keep] != -1]
    # (field, nodes, which values are bad, the rule)
    rules = [
        ("sum_hessian", keep, lambda v: ~np.isfinite(v) | (v < 0),
         "hessian sums are finite and >= 0"),
        ("sum_hessian", inner, lambda v: v == 0, "a split's hessian sum is > 0"),
        ("split_conditions", inner, lambda v: ~np.isfinite(v),
         "a non-finite threshold (XGBoost's thresholds are finite)"),
        ("split_conditions", keep, lambda v: ~np.isfinite(v), "a non-finite leaf value"),
        ("loss_changes", inner, lambda v: ~np.isfinite(v), "split gains are finite"),
        ("base_weights", keep, lambda v: ~np.isfinite(v), "node weights are finite"),
        ("split_indices", inner, lambda v: (v < 0) | (v >= n_features),
         f"a split uses feature {{v}} but the model has {n_features} features (the split "
         f"feature must be in [0, {n_features}))"),
        ("default_left", keep, lambda v: (v != 0) & (v != 1), "it is 0 or 1"),
        ("split_type", keep, lambda v: (v != 0) & (v != 1),
         "unknown split_type (0: numeric, 1: categorical)"),
    ]  # fmt: skip
    for field, nodes, is_bad, rule in rules:
        hit = nodes[is_bad(a[field][nodes])]
        if hit.size:
            v = a[field][hit[0]].item()
            raise _bad(f"tree {t} node {hit[0]}: {field} is {v!r}; " + rule.format(v=v) + ".")


def _check_deleted(a: dict[str, np.ndarray], keep: np.ndarray, t: int) -> None:
    """XGBoost marks a deleted node by split index -1 (all 32 bits set, with the default-left
    bit) and checks their count against ``num_deleted``; none is in the tree."""
    si, dl = a["split_indices"], a["default_left"]
    deleted = (si == -1) | ((si == 2**31 - 1) & (dl == 1))
    if int(deleted.sum()) != a["num_deleted"][0]:
        raise _bad(
            f"tree {t}: tree_param.num_deleted is {a['num_deleted'][0]}, but "
            f"{int(deleted.sum())} nodes are marked deleted (split_indices -1)."
        )
    if np.any(deleted[keep]):
        k = keep[deleted[keep]][0]
        raise _bad(f"tree {t} node {k}: split_indices marks it deleted, but it is in the tree.")


_ROOT_PARENT = (-1, 2**31 - 1)  # XGBoost writes 2147483647 (and reads -1 alike)


def _check_parents(a: dict[str, np.ndarray], inner: np.ndarray, t: int) -> None:
    """``parents`` agrees with the children at every reachable node (XGBoost walks it: a wrong
    one crashes or misleads it)."""
    par = a["parents"]
    if int(par[0]) not in _ROOT_PARENT:
        raise _bad(f"tree {t} node 0: parents is {int(par[0])}; the root has no parent.")
    for kids in (a["left_children"][inner], a["right_children"][inner]):
        bad = np.flatnonzero(par[kids] != inner)
        if bad.size:
            k = kids[bad[0]]
            raise _bad(
                f"tree {t} node {k}: parents is {int(par[k])}, but node {inner[bad[0]]} is its "
                "parent."
            )


def _categorical_words(a: dict[str, np.ndarray], t: int, remap: np.ndarray) -> dict:
    """The category set of every categorical split, as bitsets by (renumbered) node, after
    checking that ``categories_nodes`` lists exactly the categorical splits (in order) and that
    each names a non-empty run of ``categories``."""
    cats, nodes = a["categories"], a["categories_nodes"]
    segs = _field(a["categories_segments"], f"tree {t}: 'categories_segments'", "int",
                  nodes.shape[0])  # fmt: skip
    sizes = _field(a["categories_sizes"], f"tree {t}: 'categories_sizes'", "int", nodes.shape[0])
    n = remap.shape[0]
    if np.any((nodes < 0) | (nodes >= n)):
        raise _bad(f"tree {t}: categories_nodes names node {nodes[(nodes < 0) | (nodes >= n)][0]}"
                   f", outside the tree's {n} nodes (categorical split out of range).")  # fmt: skip
    if np.any(np.diff(nodes) <= 0):
        raise _bad(f"tree {t}: categories_nodes {nodes.tolist()[:8]} is not strictly increasing.")
    is_cat = (a["split_type"] == 1) & (a["left_children"] != -1)
    listed = np.zeros(n, dtype=bool)
    listed[nodes] = True
    if np.any(listed != is_cat):
        k = int(np.flatnonzero(listed != is_cat)[0])
        raise _bad(
            f"tree {t} node {k}: categories_nodes {'lists' if listed[k] else 'omits'} it, but "
            f"its split_type is {a['split_type'][k]} and it is "
            f"{'a split' if a['left_children'][k] != -1 else 'a leaf'} (categories_nodes must "
            "list exactly the categorical splits)."
        )
    out = {}
    for node, seg, size in zip(nodes, segs, sizes):
        if seg < 0 or size <= 0 or seg + size > cats.shape[0]:
            raise _bad(
                f"tree {t} node {node}: categories_segments {seg} and categories_sizes {size} "
                f"do not name a non-empty run of the {cats.shape[0]} categories (categorical "
                "split out of range)."
            )
        members = cats[seg : seg + size]
        if np.any(members < 0) or np.any(members >= 2**24):
            raise _bad(f"tree {t} node {node}: categories hold {members.tolist()[:8]}; invalid "
                       "category in a split (codes are in [0, 2**24)).")  # fmt: skip
        if remap[node] >= 0:
            out[int(remap[node])] = bitset(members)
    return out


def _parse_tree(
    tree: dict, t: int, n_features: int, weight: float | None, base: float
) -> tuple[Tree, Stats]:
    """The trees phase, tree ``t``: its fields checked, its reachable nodes renumbered in id
    order, and the statistics recovery reads. ``weight``: DART's weight (None: not DART)."""
    a = _tree_fields(tree, t)
    left, right = a["left_children"], a["right_children"]
    keep = _reachable(left, right, t)
    _check_deleted(a, keep, t)
    remap = np.full(left.shape[0], -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    is_leaf = left[keep] == -1
    if np.any((right[keep] == -1) != is_leaf):
        k = keep[(right[keep] == -1) != is_leaf][0]
        raise _bad(f"tree {t} node {k}: a node has only one child.")
    _check_nodes(a, keep, t, n_features)
    _check_parents(a, keep[~is_leaf], t)
    cond = a["split_conditions"][keep]
    stype = np.where(is_leaf, 0, a["split_type"][keep])
    leaf = cond if weight is None else _dart_leaf(cond, weight, base)
    words = _categorical_words(a, t, remap) if "categories_nodes" in a else {}
    sizes, flat = cat_sets(keep.size, words) if words else (None, None)
    tr = Tree(
        left=np.where(is_leaf, -1, remap[left[keep].clip(0)]),
        right=np.where(is_leaf, -1, remap[right[keep].clip(0)]),
        feature=np.where(is_leaf, -1, a["split_indices"][keep]),
        threshold=np.where(is_leaf | (stype == 1), np.nan, cond.astype(np.float64)),
        split_type=np.where(stype == 1, fmt.CAT_SET_RIGHT, fmt.NUMERIC).astype(np.int8),
        default_left=a["default_left"][keep] != 0,
        missing_type=np.full(keep.size, fmt.MISSING_NAN, dtype=np.int8),
        value=np.where(is_leaf, np.asarray(leaf, dtype=np.float64), 0.0),
        cover=a["sum_hessian"].astype(np.float64)[keep],
        count=np.full(keep.size, np.nan),
        gain=np.where(is_leaf, 0.0, a["loss_changes"].astype(np.float64)[keep]),
        leaf_id=np.where(is_leaf, keep, -1),
        cat_sizes=sizes,
        cat_words=flat,
    )
    base_weight = a["base_weights"].astype(np.float64)[keep]
    raw = np.where(is_leaf, cond.astype(np.float64), 0.0)
    return tr, Stats(tr.left, tr.right, tr.cover, base_weight, raw)


def _feature_names(learner: dict, n_features: int) -> tuple[list[str], bool]:
    """The feature names (generated ``f0, f1, ...`` when the model has none) and whether the
    model has them."""
    names = learner.get("feature_names", []) or []
    for key in ("feature_names", "feature_types"):
        v = learner.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _bad(f"learner.{key} is not an array of strings.")
    if names and len(names) != n_features:
        raise _bad(
            f"feature_names does not match num_feature ({len(names)} names, {n_features} features)."
        )
    return (names or [f"f{i}" for i in range(n_features)]), bool(names)


# ---------------------------------------------------------------------- conventions
def _inexact(h: _Header) -> list[str]:
    """Why leaf values are not exactly -eta G / (H + lambda) of the stored statistics."""
    cfg, out = h.cfg, []
    if h.objective in _REFIT_OBJECTIVES:
        out.append(f"objective {h.objective} refits leaf values after the tree is grown")
    if h.booster == "dart":
        out.append("DART rescales trees after they are grown (booster='dart')")
    if cfg.get("alpha", 0) > 0:
        out.append(f"reg_alpha={cfg['alpha']:g} > 0 soft-thresholds leaf values")
    if cfg.get("max_delta_step", 0) > 0:
        out.append(f"max_delta_step={cfg['max_delta_step']:g} > 0 clips leaf values")
    if cfg.get("subsample", 1) < 1:
        out.append(f"subsample={cfg['subsample']:g} < 1: node statistics are in-bag only")
    return out


def _eta_lambda(
    h: _Header, stats: list[Stats], given: Overrides
) -> tuple[np.ndarray, float, list[str]]:
    """The statistics phase: eta per tree and lambda, explicit > recovered from the trees >
    configuration > XGBoost's defaults, and notes on what was assumed.

    The trees win over the config, which for a Booster loaded from a file holds only defaults.
    Where the recovered value agrees with the config, the config's exact value is used.
    """
    learning_rate, reg_lambda = given
    lam_r, eta_r, why = (None, None, "")
    if learning_rate is None or reg_lambda is None:
        lam_r, eta_r, why = recover(stats)
    if h.objective in _REFIT_OBJECTIVES:  # leaves are refit: they do not tell eta
        eta_r, why = None, f"objective {h.objective} refits the leaves"
    n = len(h.trees)
    lam, notes = pick(_full(n, reg_lambda), *_sources(h.cfg, lam_r, why, "lambda", n))
    etas, more = pick(_full(n, learning_rate), *_sources(h.cfg, eta_r, why, "eta", n))
    return etas, float(lam[0]), notes + more


def _full(n: int, value: Any) -> np.ndarray | None:
    """An explicit value for every tree (None stays None)."""
    return None if value is None else np.full(n, float(value))


def _sources(cfg: dict, recovered: Any, why: str, key: str, n: int) -> list[tuple[Any, str]]:
    """Where ``key`` (eta or lambda) can come from, best first, each with the note it gives:
    the trees (the config's exact value where they agree), the config, XGBoost's default."""
    arg = {"eta": "learning_rate", "lambda": "reg_lambda"}[key]
    rec = conf = None
    if recovered is not None:
        rec = np.broadcast_to(np.asarray(recovered, dtype=np.float64), (n,)).copy()
        if key in cfg and np.allclose(rec, cfg[key], rtol=1e-4, atol=1e-7):
            rec = np.full(n, cfg[key])
    conf_note = ""
    if key in cfg:
        conf = np.full(n, cfg[key])
        if _looks_default(cfg):
            conf_note = (
                f"Could not recover {key} from the trees ({why}); using {key}={cfg[key]:g} "
                "from the booster's config, which holds only XGBoost's defaults for a model "
                f"loaded from a file. Pass {arg}= if that is wrong."
            )
    default_note = (
        f"Could not recover {key} from the trees ({why}); assuming XGBoost's default "
        f"{key}={_XGB_DEFAULTS[key]:g}. Pass {arg}= to set it."
    )
    return [(rec, ""), (conf, conf_note), (np.full(n, _XGB_DEFAULTS[key]), default_note)]


def _looks_default(cfg: dict) -> bool:
    """Whether the configuration holds XGBoost's default eta and lambda."""
    return math.isclose(cfg.get("eta", 0.3), 0.3, rel_tol=1e-6) and cfg.get("lambda", 1) == 1


def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """The ``KernelObjective`` of XGBoost's objectives (``_common.KernelObjective``), which the
    native booster shares: softmax hessian 2 p (1 - p), Poisson hessian
    exp(F + max_delta_step), hessian floors; NotImplementedError for ranking and refit ones."""
    if name not in _CODES:
        raise UnsupportedModelError(
            f"Objective {name!r} has no per-row gradient here (ranking and refit objectives "
            "are supported for prediction only)."
        )
    code = _CODES[name]
    prm = np.array(prm, dtype=np.float64, copy=True)
    if code == fmt.SOFTMAX:
        prm[fmt.P_HESS_SCALE] = 2.0
    if code in (fmt.LOGISTIC, fmt.SOFTMAX, fmt.HINGE):
        prm[fmt.P_MIN_HESS] = 1e-16
    if code == fmt.SQUARED_LOG:
        prm[fmt.P_MIN_HESS] = 1e-6
    prm[fmt.P_MAX_DELTA] = float(params.get("max_delta_step", 0.7)) if code == fmt.POISSON else 0.0
    prm[fmt.P_TWEEDIE] = float(params.get("tweedie_variance_power", 1.5))
    prm[fmt.P_HUBER] = float(params.get("huber_slope", 1.0))
    return code, prm


#: XGBoost's conventions: float32 thresholds and sums, TreeSHAP weighted by hessian covers
_BOOSTER = Booster("xgboost", "float32 <", True, "cover", kernel_objective)
