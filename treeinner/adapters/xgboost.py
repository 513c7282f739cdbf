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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
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
    """Whether ``obj`` comes from the xgboost package (a Booster or a scikit-learn wrapper)."""
    return library_of(obj) == "xgboost"


def export(obj: Any) -> Export:
    """Serialize an ``xgboost.Booster`` or fitted scikit-learn wrapper: ``save_raw("ubj")``, and
    ``save_config()`` (eta, lambda and the options that make node values inexact) as ``extra``."""
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
            _parse_tree(t, float(w) if h.booster == "dart" else None, float(h.base[g]))
            for t, w, g in zip(h.trees, h.weights, h.tree_group)
        ]
        trees = [t for t, _ in parsed]
        names, named = _feature_names(doc["learner"], h.n_features, trees)
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
        raise _bad(f"{type(e).__name__}: {e}") from e


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
    version = ".".join(str(int(v)) for v in np.asarray(doc.get("version", [])).tolist())
    booster, model, trees, weights = _booster_section(learner["gradient_booster"])
    mp = learner["learner_model_param"]
    num_class = _int(mp, "num_class", 0)
    n_outputs = max(num_class, _int(mp, "num_target", 1), 1)
    n_features = _int(mp, "num_feature", 0)
    objective = learner.get("objective", {}).get("name", "reg:squarederror")
    if objective not in _BASE_LINK:
        raise UnsupportedModelError(f"XGBoost objective {objective!r} is not supported.")
    cfg = _config_params(config)
    if cfg.get("multi_strategy", "one_output_per_tree") != "one_output_per_tree":
        raise UnsupportedModelError(
            f"XGBoost multi_strategy={cfg['multi_strategy']!r} (vector leaves) is not supported."
        )
    group, iteration = _tree_layout(model, len(trees), n_outputs)
    obj_params = _objective_params(learner.get("objective", {}))
    if n_outputs > 1 and num_class > 1:
        obj_params["num_class"] = num_class
    score = _parse_base_score(mp.get("base_score", "0.5"))
    base = _base_margin(score, _BASE_LINK[objective], n_outputs)
    return _Header(version, booster, model, trees, weights, n_outputs, n_features, objective,
                   obj_params, cfg, group, iteration, base)  # fmt: skip


def _booster_section(gb: dict) -> tuple[str, dict, list, np.ndarray]:
    """The booster kind, the section holding the trees, the trees and their DART weights."""
    name = gb.get("name", "gbtree")
    if name == "gblinear":
        raise UnsupportedModelError("XGBoost booster='gblinear' has no trees to explain.")
    if name not in ("gbtree", "dart"):
        raise UnsupportedModelError(f"XGBoost booster={name!r} is not supported.")
    model = gb["gbtree"]["model"] if name == "dart" else gb["model"]
    trees = model["trees"]
    n_trees = len(trees)
    if n_trees == 0:
        raise ModelFormatError("The XGBoost model has no trees (was it trained for 0 rounds?).")
    weights = np.ones(n_trees)
    if name == "dart":
        # XGBoost keeps the weights in float32; a JSON file prints them in decimal
        weights = np.asarray(gb.get("weight_drop", weights), dtype=np.float32).astype(np.float64)
        if weights.shape != (n_trees,):
            raise _bad("weight_drop does not match the trees.")
    return name, model, trees, weights


def _tree_layout(model: dict, n_trees: int, n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """The output and the boosting round of every tree."""
    tree_info = np.asarray(model.get("tree_info", np.zeros(n_trees)), dtype=np.int64)
    if tree_info.shape != (n_trees,):
        raise _bad("tree_info does not match the trees.")
    if np.any(tree_info < 0) or np.any(tree_info >= n_outputs):
        raise _bad("tree_info names an output that does not exist.")
    indptr = model.get("iteration_indptr")
    if indptr is not None and len(indptr) >= 2:
        indptr = np.asarray(indptr, dtype=np.int64)
        if indptr[0] != 0 or indptr[-1] != n_trees or np.any(np.diff(indptr) < 0):
            raise _bad("iteration_indptr does not match the trees.")
        return tree_info, np.searchsorted(indptr, np.arange(n_trees), side="right") - 1
    npt = int(model.get("gbtree_model_param", {}).get("num_parallel_tree", 1))
    return tree_info, np.arange(n_trees) // max(1, npt * n_outputs)


def _int(d: dict, key: str, default: int) -> int:
    """An integer field of ``learner_model_param``."""
    try:
        return int(d.get(key, default))
    except (TypeError, ValueError) as e:
        raise _bad(f"{key}={d.get(key)!r} is not an integer.") from e


def _objective_params(obj: dict) -> dict[str, Any]:
    """The objective's parameters (numbers where they parse as numbers)."""
    out: dict[str, Any] = {}
    for sub in obj.values():
        if isinstance(sub, dict):
            for k, v in sub.items():
                try:
                    out[k] = float(v)
                except (TypeError, ValueError):
                    out[k] = v
    return out


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
        raise ModelFormatError(f"XGBoost base_score {base_score} gives a non-finite base margin.")
    return out


def _parse_base_score(s: Any) -> list[float]:
    """``base_score`` as stored: a number, or a string of one or a bracketed list."""
    if isinstance(s, (int, float)):
        return [float(s)]
    s = str(s).strip()
    if s.startswith("["):
        s = s[1:-1]
    try:
        return [float(v) for v in s.split(",") if v.strip()]
    except ValueError as e:
        raise _bad(f"base_score {s!r}.") from e


# ---------------------------------------------------------------------- categories
def _parse_categories(model: dict, n_features: int) -> dict[int, list]:
    """The training categories of each categorical feature (XGBoost >= 3 stores them)."""
    cats = model.get("cats")
    if not isinstance(cats, dict):
        return {}
    out: dict[int, list] = {}
    for j, enc in enumerate(cats.get("enc", [])[:n_features]):
        if not isinstance(enc, dict):
            continue
        values = np.asarray(enc.get("values", []))
        if "offsets" in enc:
            offsets = np.asarray(enc["offsets"], dtype=np.int64)
            if offsets.size > 1:
                raw = bytes(values.astype(np.uint8).tolist())
                out[j] = [raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
        elif values.size:
            out[j] = [v.item() if hasattr(v, "item") else v for v in values]
            out[j] = [int(v) if isinstance(v, float) and v.is_integer() else v for v in out[j]]
    return out


# ---------------------------------------------------------------------- trees
def _arr(tree: dict, key: str, dtype: Any, n: int | None = None) -> np.ndarray:
    """A tree field as a 1-D array of ``dtype`` (of length ``n`` when given)."""
    if key not in tree:
        raise _bad(f"a tree lacks {key!r}.")
    a = np.asarray(tree[key])
    try:
        a = a.astype(dtype)
    except (TypeError, ValueError) as e:
        raise _bad(f"tree field {key!r} is not numeric.") from e
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise _bad(f"tree field {key!r} has the wrong length.")
    return a


def _reachable(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Node ids reachable from the root, in id order (deleted nodes dropped); level by level."""
    n = left.shape[0]
    seen = np.zeros(n, dtype=bool)
    level = np.zeros(1, dtype=np.int64)
    while level.size:
        bad = (level < 0) | (level >= n)
        if np.any(bad):
            raise _bad(f"child index {int(level[bad][0])} outside the tree.")
        if np.any(seen[level]) or np.unique(level).size != level.size:
            raise _bad("a tree has a cycle or a shared node.")
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


def _split_types(tree: dict, n: int, keep: np.ndarray, is_leaf: np.ndarray) -> np.ndarray:
    """0 (numeric) or 1 (categorical) per kept node, 0 at leaves."""
    stype = _arr(tree, "split_type", np.int8, n)[keep] if "split_type" in tree else None
    if stype is None:
        stype = np.zeros(keep.size, dtype=np.int8)
    stype = np.where(is_leaf, 0, stype)
    if np.any((stype != 0) & (stype != 1)):
        raise _bad("unknown split_type.")
    return stype


def _categorical_words(tree: dict, n: int, remap: np.ndarray) -> dict[int, np.ndarray]:
    """The category set of every categorical split, as bitsets by (renumbered) node."""
    cats = _arr(tree, "categories", np.int64)
    nodes = _arr(tree, "categories_nodes", np.int64)
    segs = _arr(tree, "categories_segments", np.int64, nodes.shape[0])
    sizes = _arr(tree, "categories_sizes", np.int64, nodes.shape[0])
    out = {}
    for node, seg, size in zip(nodes, segs, sizes):
        if not 0 <= node < n or seg < 0 or size < 0 or seg + size > cats.shape[0]:
            raise _bad("categorical split out of range.")
        members = cats[seg : seg + size]
        if np.any(members < 0) or np.any(members >= 2**24):
            raise _bad("invalid category in a split.")
        if remap[node] >= 0:
            out[int(remap[node])] = bitset(members)
    return out


def _parse_tree(tree: dict, weight: float | None, base: float) -> tuple[Tree, Stats]:
    """The trees phase, one tree: its reachable nodes renumbered in id order, and the
    statistics recovery reads. ``weight``: DART's weight of the tree (None: not DART)."""
    if str(tree.get("tree_param", {}).get("size_leaf_vector", "1")) not in ("0", "1"):
        raise UnsupportedModelError(
            "XGBoost models with vector leaves (multi_strategy='multi_output_tree') are not "
            "supported; train with multi_strategy='one_output_per_tree'."
        )
    left = _arr(tree, "left_children", np.int64)
    n = left.shape[0]
    if n == 0:
        raise _bad("a tree has no nodes.")
    right = _arr(tree, "right_children", np.int64, n)
    keep = _reachable(left, right)
    remap = np.full(n, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    is_leaf = left[keep] == -1
    if np.any((right[keep] == -1) != is_leaf):
        raise _bad("a node has only one child.")
    cond = _arr(tree, "split_conditions", np.float32, n)[keep]
    stype = _split_types(tree, n, keep, is_leaf)
    leaf = cond if weight is None else _dart_leaf(cond, weight, base)
    words = _categorical_words(tree, n, remap) if np.any(stype == 1) else {}
    sizes, flat = cat_sets(keep.size, words) if words else (None, None)
    t = Tree(
        left=np.where(is_leaf, -1, remap[left[keep].clip(0)]),
        right=np.where(is_leaf, -1, remap[right[keep].clip(0)]),
        feature=np.where(is_leaf, -1, _arr(tree, "split_indices", np.int64, n)[keep]),
        threshold=np.where(is_leaf | (stype == 1), np.nan, cond.astype(np.float64)),
        split_type=np.where(stype == 1, fmt.CAT_SET_RIGHT, fmt.NUMERIC).astype(np.int8),
        default_left=_arr(tree, "default_left", np.int64, n)[keep] != 0,
        missing_type=np.full(keep.size, fmt.MISSING_NAN, dtype=np.int8),
        value=np.where(is_leaf, np.asarray(leaf, dtype=np.float64), 0.0),
        cover=_arr(tree, "sum_hessian", np.float32, n).astype(np.float64)[keep],
        count=np.full(keep.size, np.nan),
        gain=np.where(is_leaf, 0.0, _arr(tree, "loss_changes", np.float32, n).astype(float)[keep]),
        leaf_id=np.where(is_leaf, keep, -1),
        cat_sizes=sizes,
        cat_words=flat,
    )
    base_weight = _arr(tree, "base_weights", np.float32, n).astype(np.float64)[keep]
    raw = np.where(is_leaf, cond.astype(np.float64), 0.0)
    return t, Stats(t.left, t.right, t.cover, base_weight, raw)


def _feature_names(learner: dict, n_features: int, trees: list[Tree]) -> tuple[list[str], bool]:
    """The feature names (generated ``f0, f1, ...`` when the model has none) and whether the
    model has them; checks that every split's feature exists."""
    max_feat = max((int(t.feature.max()) for t in trees), default=-1)
    if n_features <= max_feat:
        raise _bad(f"a split uses feature {max_feat} but the model has {n_features} features.")
    names = list(learner.get("feature_names", []) or [])
    if names and len(names) != n_features:
        raise _bad("feature_names does not match num_feature.")
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
