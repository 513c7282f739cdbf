"""LightGBM: a model's text file (``model_to_string()``, read by ``_lgb_text``) or
``dump_model()`` JSON (read by ``_lgb_dump``) into a TreeEnsemble.

Routing rule (float64): a numeric node sends ``x`` left iff ``x <= threshold``. Missing values
depend on the node's missing type: ``NaN`` sends NaN to the default side; ``Zero`` sends NaN and
``|x| <= 1e-35f`` there; ``None`` reads NaN as 0. A categorical node (``==``) sends the
categories of its set LEFT and NaN, negative, unseen or huge values right. LightGBM's predictor
reads every input with ``|x| <= 1e-35f`` as exactly 0; thresholds within that band are moved
so that the kernels' ``x <= bound`` rule reproduces it.

Values: leaf and internal values already include the shrinkage. The first tree of each output
also carries the ``boost_from_average`` intercept in every node (its ``shrinkage`` then reads 1
whatever the learning rate). The intercept is the score at which the root's gradient sum is zero
(the weighted mean label, mapped through the link), so it is recovered from the first tree's
leaves as the (H + lambda)-weighted mean of the leaf values, moved to ``base_margin`` and
subtracted from that tree; the tree's own values stay in ``booster_value``, which
``predict_margin`` sums as LightGBM does (bit for bit: ``init + (v - init)`` is not always
``v``). The text file rounds internal values, weights and split gains to
about six digits while leaf fields keep full precision, so all inner statistics (hessian covers,
counts, split gains) are rebuilt from the leaves (``_lgb_stats``).

Phases (``_build``): ``_read_header`` (counts, objective, names) -> ``_tree_arrays`` for every
tree -> ``_learning_rates`` and ``_reg_lambda`` -> ``_param_inexact`` and ``_cat_l2_inexact``
(the options' conventions) -> ``_statistics`` (covers, intercepts, gains) -> ``assemble``.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import numpy as np

from .. import _format as fmt
from .._errors import InputError, InputTypeError, ModelFormatError, UnsupportedModelError
from ..ensemble import TreeEnsemble
from . import _lgb_dump, _lgb_stats, _lgb_text
from ._common import assemble, cat_sets, emit, library_of, pick
from ._lgb_records import LgbModel, LgbTree, bad
from ._lgb_stats import TOKEN, header_int, number
from ._records import Booster, Conversion, Export, Objective, Overrides, Parts, Tree

__all__ = ["export", "from_booster", "from_document", "from_dump",
           "from_export", "from_file", "from_string", "kernel_objective",
           "matches", "matches_document", "sniff_file"]  # fmt: skip

#: LightGBM's kZeroThreshold (a float constant): inputs with |x| <= it are read as 0.
K_ZERO = float(np.float32(1e-35))
#: LightGBM's missing type codes (decision_type bits 2-3) -> ours
_MISSING = np.array([fmt.MISSING_NONE, fmt.MISSING_ZERO, fmt.MISSING_NAN], dtype=np.int8)

_ALIASES = {
    "regression": "regression",
    "regression_l2": "regression",
    "l2": "regression",
    "mean_squared_error": "regression",
    "mse": "regression",
    "l2_root": "regression",
    "root_mean_squared_error": "regression",
    "rmse": "regression",
    "binary": "binary",
    "multiclass": "multiclass",
    "softmax": "multiclass",
    "multiclassova": "multiclassova",
    "multiclass_ova": "multiclassova",
    "ova": "multiclassova",
    "ovr": "multiclassova",
    "poisson": "poisson",
    "gamma": "gamma",
    "tweedie": "tweedie",
    "cross_entropy": "cross_entropy",
    "xentropy": "cross_entropy",
    "regression_l1": "regression_l1",
    "l1": "regression_l1",
    "mean_absolute_error": "regression_l1",
    "mae": "regression_l1",
    "huber": "huber",
    "quantile": "quantile",
    "fair": "fair",
    "mape": "mape",
    "mean_absolute_percentage_error": "mape",
    "cross_entropy_lambda": "cross_entropy_lambda",
    "xentlambda": "cross_entropy_lambda",
    "lambdarank": "lambdarank",
    "rank_xendcg": "rank_xendcg",
    "xendcg": "rank_xendcg",
    "custom": "custom",
    "none": "custom",
    "null": "custom",
}
#: objectives whose boost_from_average intercept zeroes the root gradient sum
_ZERO_GRAD_INIT = {
    "regression",
    "binary",
    "multiclass",
    "multiclassova",
    "poisson",
    "gamma",
    "tweedie",
    "cross_entropy",
}
#: objectives with a boost_from_average intercept that is not a zero-gradient point
_OTHER_INIT = {"regression_l1", "huber", "quantile", "fair", "mape", "cross_entropy_lambda"}
#: objectives that refit or otherwise do not give leaves -lr G / (H + lambda)
_PREDICTION_ONLY = {
    "regression_l1": "leaves are refit to residual quantiles",
    "quantile": "leaves are refit to residual quantiles",
    "huber": "its gradients are clipped",
    "fair": "is not supported for attributions",
    "mape": "leaves are refit to weighted medians",
    "cross_entropy_lambda": "is not supported for attributions",
    "lambdarank": "ranking gradients depend on whole queries",
    "rank_xendcg": "ranking gradients depend on whole queries",
    "custom": "the gradient is unknown",
}
#: options that make leaf values other than -lr G / (H + lambda), when positive
_CLIPPING = (
    ("lambda_l1", "soft-thresholds leaf values"),
    ("max_delta_step", "clips leaf values"),
    ("path_smooth", "mixes parent values into the leaves"),
)
_INF = math.inf
#: LightGBM's ranges of the numeric parameters treeinner reads (its config checks):
#: (kind, low, low included, high, high included)
_RANGES = {
    "learning_rate": (float, 0.0, False, _INF, False),
    "lambda_l1": (float, 0.0, True, _INF, False),
    "lambda_l2": (float, 0.0, True, _INF, False),
    "max_delta_step": (float, -_INF, False, _INF, False),
    "path_smooth": (float, 0.0, True, _INF, False),
    "bagging_fraction": (float, 0.0, False, 1.0, True),
    "pos_bagging_fraction": (float, 0.0, False, 1.0, True),
    "neg_bagging_fraction": (float, 0.0, False, 1.0, True),
    "bagging_freq": (int, -_INF, False, _INF, False),
    "cat_l2": (float, 0.0, True, _INF, False),
    "max_cat_to_onehot": (int, 0, False, _INF, False),
    "scale_pos_weight": (float, 0.0, False, _INF, False),
    "sigmoid": (float, 0.0, False, _INF, False),
    "alpha": (float, 0.0, False, _INF, False),
    "fair_c": (float, 0.0, False, _INF, False),
    "poisson_max_delta_step": (float, 0.0, False, _INF, False),
    "tweedie_variance_power": (float, 1.0, True, 2.0, False),
    "num_class": (int, 1, True, _INF, False),
}
#: boolean training parameters treeinner reads
_FLAGS = ("boost_from_average", "is_unbalance", "reg_sqrt", "linear_tree", "use_quantized_grad")
#: the parameters an objective's line in the model carries (LightGBM's ToString), all required
_OBJ_PARAMS = {
    "binary": ("sigmoid",),
    "multiclass": ("num_class",),
    "multiclassova": ("num_class", "sigmoid"),
}
#: objectives whose line may carry ``sqrt`` (reg_sqrt)
_SQRT_OK = {
    "regression",
    "regression_l1",
    "huber",
    "fair",
    "poisson",
    "quantile",
    "mape",
    "gamma",
    "tweedie",
}
#: training parameters kept in ``TreeEnsemble.params``, for information
_KEPT = ("boosting", "learning_rate", "lambda_l2", "lambda_l1", "max_delta_step", "path_smooth",
         "bagging_fraction", "bagging_freq", "boost_from_average", "cat_l2",
         "max_cat_to_onehot", "scale_pos_weight", "is_unbalance")  # fmt: skip


# ---------------------------------------------------------------------- the adapter interface
def matches(obj: Any) -> bool:
    """Whether ``obj`` comes from the lightgbm package (a Booster or a scikit-learn wrapper)."""
    return library_of(obj) == "lightgbm"


def export(obj: Any) -> Export:
    """Serialize a ``lightgbm.Booster`` or fitted scikit-learn wrapper: ``model_to_string()``
    (UTF-8), which holds everything the conversion reads."""
    booster = obj
    if not hasattr(obj, "model_to_string"):
        if not hasattr(type(obj), "booster_"):
            raise InputTypeError(f"{type(obj).__name__} is not a LightGBM Booster or model.")
        try:
            booster = obj.booster_
        except Exception as e:  # LGBMNotFittedError / NotFittedError
            raise InputError(f"The {type(obj).__name__} is not fitted: {e}") from e
    return Export(booster.model_to_string().encode("utf-8"))


def from_export(exported: Export, given: Overrides) -> Conversion:
    """Convert what ``export`` serialized (warnings returned, not given)."""
    return _build(_lgb_text.read(exported.data.decode("utf-8")), given)


def from_booster(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """A LightGBM Booster or fitted scikit-learn wrapper as a TreeEnsemble (not cached)."""
    return emit(from_export(export(model), Overrides(learning_rate, reg_lambda)))


def sniff_file(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a LightGBM model text."""
    return head.startswith(b"tree\n") or head.startswith(b"tree\r\n")


def from_file(path: str, data: bytes, given: Overrides) -> Conversion:
    """Convert a model text file ``sniff_file`` recognised."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"{path!r} is not a valid LightGBM model file: {e}") from e
    return _build(_lgb_text.read(text), given)


matches_document = _lgb_dump.is_dump


def from_document(doc: Any, given: Overrides) -> Conversion:
    """Convert a decoded ``dump_model()`` document."""
    return _build(_lgb_dump.read(doc), given)


def from_string(
    text: str, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from a LightGBM model text (a saved model file or
    ``Booster.model_to_string()``).

    ``learning_rate`` and ``reg_lambda`` override the per-tree ``shrinkage`` and the
    ``lambda_l2`` read from the model. ValueError if the text is not a LightGBM model or is
    corrupt or truncated; NotImplementedError for options treeinner does not support.
    """
    return emit(_build(_lgb_text.read(text), Overrides(learning_rate, reg_lambda)))


def from_dump(
    doc: dict, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from LightGBM's ``Booster.dump_model()`` JSON document.

    The dump does not record ``lambda_l2`` (nor ``boost_from_average``): pass ``reg_lambda=``
    when it is not LightGBM's default 0, or read the model text file instead. Raises like
    ``from_string``.
    """
    return emit(from_document(doc, Overrides(learning_rate, reg_lambda)))


# ---------------------------------------------------------------------- header
class _Header(NamedTuple):
    """What the model says besides the trees, checked."""

    per_iter: int  # trees per boosting round (outputs)
    n_features: int
    objective: str
    obj_params: dict
    boosting: str
    names: list[str]
    named: bool


def _read_header(m: LgbModel) -> _Header:
    """The header phase: counts, objective (with its parameters), feature names and infos, and
    the training parameters' ranges."""
    header, params = m.header, m.params
    n_class = header_int(header, "num_class", lo=1)
    per_iter = header_int(header, "num_tree_per_iteration", n_class, lo=1)
    n_features = header_int(header, "max_feature_idx") + 1
    n_trees = len(m.trees)
    if n_trees == 0:
        raise ModelFormatError("The LightGBM model has no trees (was it trained for 0 rounds?).")
    if n_trees % per_iter:
        raise bad(f"{n_trees} trees is not a multiple of num_tree_per_iteration={per_iter}.")
    if per_iter != n_class:
        raise bad(f"num_tree_per_iteration={per_iter} differs from num_class={n_class}.")
    objective, obj_params = _objective(header.get("objective"), n_class)
    _check_params(params, objective)
    for key, default in (("poisson_max_delta_step", 0.7), ("tweedie_variance_power", 1.5)):
        if objective == key.split("_")[0]:
            obj_params[key] = _pfloat(params, key, default)
    names, named = _names(header.get("feature_names"), n_features)
    _check_feature_infos(header.get("feature_infos"), n_features)
    boosting = params.get("boosting", "gbdt")
    return _Header(per_iter, n_features, objective, obj_params, boosting, names, named)


def _objective(text: Any, n_class: int) -> tuple[str, dict[str, Any]]:
    """The objective's canonical name and its ``key:value`` parameters, checked as LightGBM
    checks them when it loads the model (no objective: a custom one)."""
    if text is None:
        return "custom", {}
    parts = [p for p in str(text).split(" ") if p]
    if not parts:
        raise bad("the objective is empty.")
    name = _ALIASES.get(parts[0])
    if name is None:
        raise UnsupportedModelError(f"LightGBM objective {parts[0]!r} is not supported.")
    if len(parts) > 1 and parts[0] != name:
        raise bad(f"objective {text!r}: LightGBM reads parameters only after {name!r}.")
    params: dict[str, Any] = {}
    for p in parts[1:]:
        key, colon, value = p.partition(":")
        if p == "sqrt" and name in _SQRT_OK and "sqrt" not in params:
            params["sqrt"] = True
        elif not colon or key not in _OBJ_PARAMS.get(name, ()) or key in params:
            raise bad(f"objective {name}: {p!r} is not one of its parameters (or is repeated).")
        else:
            params[key] = _pfloat({key: value}, key, None, f"the objective's {key}")
    for key in _OBJ_PARAMS.get(name, ()):
        if key not in params:
            raise bad(f"objective {name} lacks its {key} parameter (LightGBM refuses it).")
    if "num_class" in params:
        params["num_class"] = k = int(params["num_class"])
        if k < 2 or k != n_class:
            raise bad(
                f"the objective's num_class is {k}; the header's num_class={n_class}, "
                "and a multiclass model has at least two classes."
            )
    elif n_class != 1 and name != "custom":
        raise bad(f"num_class={n_class} for objective {name}, which has one output.")
    return name, params


def _names(names: Any, n_features: int) -> tuple[list[str], bool]:
    """The feature names (as LightGBM splits them), and whether they are the model's own (not
    ``Column_i``)."""
    if names is None:
        raise bad("the header lacks feature_names (truncated file?).")
    if isinstance(names, str):
        names = [v for v in names.split(" ") if v]
    if not isinstance(names, list) or not all(isinstance(v, str) for v in names):
        raise bad("feature_names is not a list of names.")
    if len(names) != n_features:
        raise bad(f"{len(names)} feature_names for max_feature_idx={n_features - 1}.")
    generated = [f"Column_{i}" for i in range(n_features)]
    return names, names != generated


def _check_feature_infos(infos: Any, n_features: int) -> None:
    """``feature_infos``: per feature ``none``, ``[min:max]`` or its categories ``a:b:c`` (text;
    LightGBM refuses a file without it or with a wrong count), or the dump's objects."""
    if isinstance(infos, dict):
        for name, info in infos.items():
            values = info.get("values", []) if isinstance(info, dict) else None
            if not isinstance(values, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in values
            ):
                raise bad(f"feature_infos of {name!r} is not an object with integer values.")
        return
    if infos is None and n_features:
        raise bad("the header lacks feature_infos (truncated file?).")
    tokens = [v for v in str(infos).split(" ") if v]
    if len(tokens) != n_features:
        raise bad(f"{len(tokens)} feature_infos for max_feature_idx={n_features - 1}.")
    for j, tok in enumerate(tokens):
        if tok == "none" or re.fullmatch(r"-?\d{1,10}(?::-?\d{1,10})*", tok):
            continue
        lo, _, hi = tok[1:-1].partition(":")
        pair = [TOKEN[float].fullmatch(v) for v in (lo, hi)]
        if not (tok[:1] == "[" and tok[-1:] == "]" and all(pair) and float(lo) <= float(hi)):
            raise bad(f"feature_infos[{j}] is {tok[:40]!r}, not none, [min:max] or categories.")


def _pfloat(params: dict, key: str, default: Any, what: str = "") -> Any:
    """A numeric training or objective parameter, checked strictly against LightGBM's range
    for it (``_RANGES``); ``default`` when absent or empty."""
    v = params.get(key, "")
    if v == "" and default is not None:
        return default
    kind, lo, lo_in, hi, hi_in = _RANGES.get(key, (float, -_INF, False, _INF, False))
    what = what or f"parameter {key}"
    x = number(v, kind, what)
    if not ((x > lo or (lo_in and x == lo)) and (x < hi or (hi_in and x == hi))):
        low = f"{key} {'>=' if lo_in else '>'} {lo:g}" if lo > -_INF else ""
        high = f"{key} {'<=' if hi_in else '<'} {hi:g}" if hi < _INF else ""
        need = " and ".join(t for t in (low, high) if t) or "a finite value"
        raise bad(f"{what} is {v!r}; LightGBM needs {need}.")
    return float(x) if kind is float else x


def _check_params(params: dict[str, str], objective: str) -> None:
    """Every training parameter treeinner reads or keeps, checked against LightGBM's ranges
    (and the flags as booleans)."""
    for key in _RANGES:
        _pfloat(params, key, 0.0)
    if objective == "quantile" and _pfloat(params, "alpha", 0.5) >= 1:
        raise bad(f"parameter alpha is {params['alpha']!r}; quantile needs 0 < alpha < 1.")
    for key in _FLAGS:
        if str(params.get(key, "0")).lower() not in ("0", "1", "true", "false"):
            raise bad(f"parameter {key} is {params[key]!r}, not a boolean (0 or 1).")


# ---------------------------------------------------------------------- trees
def _children(c: np.ndarray, n_in: int) -> np.ndarray:
    """LightGBM's child codes (a split's index, or ``~leaf``; checked by the readers) as node
    indices (leaves after the splits)."""
    c = np.asarray(c, dtype=np.int64)
    return np.where(c >= 0, c, n_in + ~c)


def _zero_band(thr: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    """Thresholds moved so that ``x <= bound`` reads ``|x| <= kZeroThreshold`` as 0, as
    LightGBM's predictor does."""
    band_neg = numeric & (thr >= -K_ZERO) & (thr < 0)
    band_pos = numeric & (thr >= 0) & (thr <= K_ZERO)
    thr = np.where(band_neg, np.nextafter(-K_ZERO, -np.inf), thr)
    return np.where(band_pos, K_ZERO, thr)


def _tree_arrays(t: LgbTree, index: int) -> Tree:
    """The trees phase, one tree in our layout: splits 0..L-2 (LightGBM's split indices), then
    the leaves. ``cover``/``count`` hold the leaf weights and counts (inner nodes 0) and
    ``gain`` the stored split gains, until ``_statistics`` rebuilds them."""
    L, n_in = t.num_leaves, t.num_leaves - 1
    n = n_in + L
    inner = np.arange(n) < n_in
    left, right, feat = (np.full(n, -1, dtype=np.int64) for _ in range(3))
    if n_in:
        left[:n_in] = _children(t.left_child, n_in)
        right[:n_in] = _children(t.right_child, n_in)
        feat[:n_in] = t.split_feature
    cat = np.zeros(n, dtype=bool)
    cat[:n_in] = t.categorical
    thr = np.concatenate([t.threshold, np.full(L, np.nan)])
    if np.any(inner & ~cat & np.isnan(thr)):
        raise bad(f"tree {index} has a numeric split with a NaN threshold.")
    if not np.all(np.isfinite(t.leaf_value)):
        raise bad(f"tree {index} has a non-finite leaf value.")
    # categorical nodes: NaN goes right whatever the missing type
    missing = np.full(n, fmt.MISSING_NAN, dtype=np.int8)
    missing[:n_in] = np.where(t.categorical, fmt.MISSING_NAN, _MISSING[t.missing])
    sizes, words = cat_sets(n, t.cat_words) if t.cat_words else (None, None)
    return Tree(
        left=left,
        right=right,
        feature=feat,
        threshold=_zero_band(thr, inner & ~cat),
        split_type=np.where(cat, fmt.CAT_SET_LEFT, fmt.NUMERIC).astype(np.int8),
        default_left=np.concatenate([t.default_left & ~t.categorical, np.zeros(L, bool)]),
        missing_type=missing,
        value=np.concatenate([np.zeros(n_in), t.leaf_value]),
        cover=np.concatenate([np.zeros(n_in), t.leaf_weight]),
        count=np.concatenate([np.zeros(n_in), t.leaf_count]),
        gain=np.concatenate([t.split_gain, np.zeros(L)]),
        leaf_id=np.where(inner, -1, np.arange(n) - n_in),
        cat_sizes=sizes,
        cat_words=words,
    )


def _linear_leaves(trees: list[LgbTree], spans: np.ndarray) -> fmt.LinearLeaves | None:
    """The linear leaf models of linear trees, as the ensemble's ``linear_leaves``:
    per leaf with a linear model, its tree, leaf number, ``delta`` = leaf_const - leaf_value
    (so that value + delta + sum coeff x is the leaf's output whatever intercept the adapter
    moves out of the value), and its features and coefficients (flat, with offsets).

    value + delta must give leaf_const to double precision at the scale of the leaf's outputs
    (``spans``: each feature's largest training magnitude): a leaf_value far larger than them
    would round leaf_const away."""
    if not any(t.is_linear for t in trees):
        return None
    out: dict[str, list] = {"tree": [], "leaf": [], "delta": [], "ptr": [0], "features": [],
                            "coeff": []}  # fmt: skip
    for i, t in enumerate(trees):
        if not t.is_linear or t.linear is None:
            continue
        for k in range(t.num_leaves):
            f = np.asarray(t.linear.features[k], dtype=np.int64)
            v, c = float(t.leaf_value[k]), float(t.linear.const[k])
            delta = c - v
            if not np.isfinite(delta) or not np.all(np.isfinite(t.linear.coeff[k])):
                raise bad(f"linear tree {i} leaf {k} has a non-finite linear model.")
            scale = abs(c) + float(np.abs(t.linear.coeff[k]) @ spans[f])
            if abs((v + delta) - c) > 1e-12 * scale:
                raise bad(
                    f"linear tree {i} leaf {k}: leaf_value {v:g} is too far from leaf_const "
                    f"{c:g} for double precision at the scale of the leaf's outputs ({scale:g})."
                )
            out["tree"].append(i)
            out["leaf"].append(k)
            out["delta"].append(delta)
            out["features"] += f.tolist()
            out["coeff"] += [float(c) for c in t.linear.coeff[k]]
            out["ptr"].append(len(out["features"]))
    return fmt.LinearLeaves(**{k: np.asarray(v) for k, v in out.items()})


# ---------------------------------------------------------------------- learning rate, lambda
def _shrinkage(trees: list[LgbTree], boosting: str, lr_param: float) -> np.ndarray:
    """Every tree's ``shrinkage``, checked (DART's non-positive ones replaced)."""
    shrink = np.array([t.shrinkage for t in trees], dtype=np.float64)
    if not np.all(np.isfinite(shrink)):
        raise bad("a tree's shrinkage is not finite.")
    if np.any(shrink <= 0):
        if boosting != "dart":
            raise bad("a tree's shrinkage is not positive in a model that is not DART.")
        # DART rescales dropped trees (the intercept tree even by a negative factor); the
        # leaves are what counts for prediction, the learning rate only for attributions
        fill = lr_param if np.isfinite(lr_param) and lr_param > 0 else 1.0
        shrink = np.where(shrink <= 0, fill, shrink)
    return shrink


def _learning_rates(
    h: _Header, m: LgbModel, learning_rate: Any
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The learning rate of every tree, which first trees carry the intercept, and notes.

    The intercept-carrying first trees read shrinkage 1: they take the recorded learning rate
    (or the next trees' shrinkage)."""
    per_iter, notes = h.per_iter, []
    lr_param = _pfloat(m.params, "learning_rate", float("nan"))
    shrink = _shrinkage(m.trees, h.boosting, lr_param)
    rf = h.boosting == "rf" or m.average_output
    later = shrink[per_iter:]
    lr_first = lr_param
    if not np.isfinite(lr_first):
        lr_first = float(later[0]) if later.size else float("nan")
    first_bias = np.zeros(shrink.size, dtype=bool)
    bfa = m.params.get("boost_from_average", "1") not in ("0", "false")
    if not rf and (h.objective in _ZERO_GRAD_INIT or h.objective in _OTHER_INIT) and bfa:
        if np.isfinite(lr_first) and lr_first != 1.0:
            first_bias[:per_iter] = shrink[:per_iter] == 1.0
        else:
            first_bias[:per_iter] = True
    lrs = shrink.copy()
    if np.isfinite(lr_first):
        lrs[:per_iter] = np.where(first_bias[:per_iter], lr_first, shrink[:per_iter])
    elif np.any(first_bias):
        notes.append(
            "The model does not record its learning rate and its only trees carry the "
            "intercept; assuming learning_rate=1. Pass learning_rate= to set it."
        )
    if rf:
        lrs[:] = 1.0
    if learning_rate is not None:
        lrs[:] = float(learning_rate)
    return lrs, first_bias, notes


def _reg_lambda(params: dict[str, str], reg_lambda: Any) -> tuple[float, list[str]]:
    """lambda_l2: explicit > recorded > LightGBM's default 0 (with a note for a dump that
    records no parameters)."""
    lam_param = _pfloat(params, "lambda_l2", float("nan"))
    note = ""
    if params == {}:
        note = (
            "The LightGBM dump does not record lambda_l2; assuming LightGBM's default "
            "lambda_l2=0. Pass reg_lambda= (or read the model text file) to set it."
        )
    found = lam_param if np.isfinite(lam_param) else None
    lam, notes = pick(reg_lambda, (found, ""), (0.0, note))
    return float(lam), notes


# ---------------------------------------------------------------------- conventions
def _param_inexact(h: _Header, m: LgbModel, linear: Any) -> list[str]:
    """Why leaf values are not exactly -lr G / (H + lambda): the objective and options."""
    params, out = m.params, []
    if h.objective in _PREDICTION_ONLY:
        out.append(f"objective {h.objective}: {_PREDICTION_ONLY[h.objective]}")
    for key, what in _CLIPPING:
        v = _pfloat(params, key, 0.0)
        if v > 0:
            out.append(f"{key}={v:g} > 0 {what}")
    fractions = [_pfloat(params, k, 1.0) for k in ("bagging_fraction", "pos_bagging_fraction",
                                                   "neg_bagging_fraction")]  # fmt: skip
    if _pfloat(params, "bagging_freq", 0.0) > 0 and min(fractions) < 1:
        out.append("bagging (bagging_freq > 0, bagging_fraction < 1): statistics in-bag only")
    if params.get("data_sample_strategy") == "goss" or h.boosting == "goss":
        out.append("GOSS sampling reweights the gradients")
    if h.boosting == "dart":
        out.append("DART rescales trees after they are grown (boosting='dart')")
    if h.boosting == "rf" or m.average_output:
        out.append(
            "random forest mode (boosting='rf'): every tree is fit at the intercept, not at "
            "the staged margin"
        )
    if params.get("use_quantized_grad", "0") not in ("0", ""):
        out.append("use_quantized_grad quantizes the gradients")
    mono = params.get("monotone_constraints", "").replace(",", " ").split()
    if any(c not in ("0", "") for c in mono):
        out.append("monotone constraints clamp leaf values")
    if params.get("reg_sqrt", "0") not in ("0", "") or h.obj_params.get("sqrt"):
        out.append("reg_sqrt fits sqrt(label)")
    if linear is not None:
        out.append(
            "linear trees (linear_tree=True): predictions add each leaf's linear model, while "
            "attributions and staged gradients use the leaves' constant values"
        )
    return out


def _cat_l2_inexact(m: LgbModel, n_features: int, trees: list[Tree]) -> list[str]:
    """Categorical many-vs-many splits regularize with lambda_l2 + cat_l2, not lambda_l2."""
    cat_l2 = _pfloat(m.params, "cat_l2", 10.0)
    max_onehot = _pfloat(m.params, "max_cat_to_onehot", 4.0)
    n_cats = _category_counts(m.header.get("feature_infos"), n_features)
    used = {int(t.feature[i]) for t in trees for i in np.flatnonzero(t.split_type)}
    if cat_l2 > 0 and any(n_cats.get(f, max_onehot + 1) > max_onehot for f in used):
        return [
            f"categorical splits on features with more than max_cat_to_onehot categories use "
            f"lambda_l2 + cat_l2 (cat_l2={cat_l2:g})"
        ]
    return []


def _label_weights(params: dict[str, str]) -> tuple[float, bool]:
    """``scale_pos_weight`` and whether ``is_unbalance`` is set."""
    unbalanced = params.get("is_unbalance", "0") not in ("0", "false", "")
    return _pfloat(params, "scale_pos_weight", 1.0), unbalanced


def _intercept(h: _Header, m: LgbModel, tree: Tree, lr: float, lam: float) -> float:
    """The boost_from_average intercept a first tree carries (NaN: none to move out)."""
    n_in = _lgb_stats.n_inner(tree)
    leaves, H = tree.value[n_in:], tree.cover[n_in:]
    spw, unbal = _label_weights(m.params)
    if h.objective in ("binary", "multiclassova") and (spw != 1.0 or unbal) and n_in:

        def w_pos(p: float) -> float:
            """Weight of positive labels at probability ``p``."""
            return (spw * ((1 - p) / p if unbal and p < 0.5 else 1.0)) if p > 0 else spw

        def w_neg(p: float) -> float:
            """Weight of negative labels at probability ``p``."""
            return p / (1 - p) if unbal and p > 0.5 else 1.0

        sigma = float(h.obj_params.get("sigmoid", 1.0))
        init = _lgb_stats.binary_init(leaves, H, lam, lr, sigma, w_pos, w_neg)
        p0 = 1.0 / (1.0 + math.exp(-sigma * init))
        h.obj_params["pos_weight"] = w_pos(p0)
        h.obj_params["neg_weight"] = w_neg(p0)
        return init
    if h.objective in _ZERO_GRAD_INIT or n_in == 0:
        return _lgb_stats.weighted_mean_init(leaves, H, lam)
    return float("nan")  # the intercept is no zero-gradient point: leave it in the tree


def _moves_exactly(tree: Tree, init: float) -> bool:
    """Whether moving ``init`` out of ``tree``'s leaves and back into the base margin keeps
    every leaf value to 1e-12 of the leaves' scale: an intercept far beyond it (pulled by an
    outlying leaf value) would round the other leaves' values, and is left in the tree."""
    leaves = tree.value[_lgb_stats.n_inner(tree) :]
    scale = 1.0 + float(np.median(np.abs(leaves)))
    return bool(np.all(np.abs((leaves - init) + init - leaves) <= 1e-12 * scale))


def _statistics(
    h: _Header,
    m: LgbModel,
    trees: list[Tree],
    lrs: np.ndarray,
    lam: float,
    first_bias: np.ndarray,
    inexact: list[str],
) -> tuple[list[Tree], np.ndarray, dict[int, np.ndarray]]:
    """The statistics phase: covers and counts summed from the leaves, the intercepts moved
    from the first trees to the base margin (label weights into the objective's parameters;
    the trees' own values returned by tree index, for the booster's sum), and gains
    recomputed where node values are exact (else LightGBM's stored ones kept)."""
    orders = []
    for i, t in enumerate(trees):
        cover, count, order = _lgb_stats.sums(t)
        trees[i] = t._replace(cover=cover, count=count)
        orders.append(order)
    base = np.zeros(h.per_iter)
    moved: dict[int, np.ndarray] = {}
    for k in np.flatnonzero(first_bias[: h.per_iter]):
        init = _intercept(h, m, trees[k], lrs[k], lam)
        if np.isfinite(init) and _moves_exactly(trees[k], init):
            base[k] = init
            moved[int(k)] = trees[k].value.copy()
            n_in = _lgb_stats.n_inner(trees[k])
            trees[k].value[n_in:] -= init
    spw, unbal = _label_weights(m.params)
    if (spw != 1.0 or unbal) and "pos_weight" not in h.obj_params:
        h.obj_params["pos_weight"] = spw
        if unbal:
            inexact.append("is_unbalance label weights could not be recovered")
    for i, t in enumerate(trees):
        if not inexact and np.all(np.isfinite(t.cover)):
            gain = _lgb_stats.recomputed_gain(t, orders[i], lrs[i], lam)
            if not np.all(np.isfinite(gain)):
                at = int(np.flatnonzero(~np.isfinite(gain))[0])
                raise bad(
                    f"tree {i} split {at}: the split gain rebuilt from the leaf values is "
                    f"{gain[at]:g} (leaf values up to {np.abs(t.value).max():g} overflow it)."
                )
            trees[i] = t._replace(gain=gain)
    return trees, base, moved


def _build(m: LgbModel, given: Overrides) -> Conversion:
    """Every phase, from the parsed model to the assembled ensemble."""
    h = _read_header(m)
    linear = _linear_leaves(m.trees, _spans(m.header.get("feature_infos"), h.n_features))
    lrs, first_bias, notes = _learning_rates(h, m, given.learning_rate)
    lam, more = _reg_lambda(m.params, given.reg_lambda)
    inexact = _param_inexact(h, m, linear)
    trees = [_tree_arrays(t, i) for i, t in enumerate(m.trees)]
    inexact += _cat_l2_inexact(m, h.n_features, trees)
    trees, base, moved = _statistics(h, m, trees, lrs, lam, first_bias, inexact)
    n_trees = len(trees)
    infos = m.header.get("feature_infos")
    return assemble(
        Parts(
            _BOOSTER,
            trees,
            np.arange(n_trees) % h.per_iter,
            np.arange(n_trees) // h.per_iter,
            learning_rate=lrs,
            base_margin=base,
            feature_names=h.names,
            named=h.named,
            reg_lambda=lam,
            objective=Objective(h.objective, h.obj_params, h.per_iter),
            source_version=str(m.header.get("version", "")),
            categories=_categories(m.pandas_categorical, infos, h.n_features, m.params),
            params={k: m.params[k] for k in _KEPT if k in m.params},
            inexact=inexact,
            notes=notes + more,
            linear_leaves=linear,
            booster_trees=moved,
            booster_base=np.zeros(h.per_iter),
        )
    )


# ---------------------------------------------------------------------- categories
def _feature_infos(infos: Any) -> list[Any]:
    """``feature_infos`` as a list (text: space-separated; dump: an object by feature)."""
    if isinstance(infos, str):
        return [v for v in infos.split(" ") if v]
    if isinstance(infos, dict):
        return list(infos.values())
    return []


def _spans(infos: Any, n_features: int) -> np.ndarray:
    """Each feature's largest training magnitude, max(|min|, |max|) from feature_infos (1 where
    it records none)."""
    out = np.ones(n_features)
    for j, info in enumerate(_feature_infos(infos)[:n_features]):
        if isinstance(info, dict):
            info = f"[{info.get('min_value')}:{info.get('max_value')}]"
        lo, _, hi = str(info)[1:-1].partition(":")
        if str(info).startswith("[") and TOKEN[float].fullmatch(lo) and TOKEN[float].fullmatch(hi):
            out[j] = max(abs(float(lo)), abs(float(hi)), 1e-300)
    return out


def _category_counts(infos: Any, n_features: int) -> dict[int, int]:
    """Number of categories of each categorical feature (from feature_infos)."""
    out = {}
    for j, info in enumerate(_feature_infos(infos)[:n_features]):
        if isinstance(info, str) and info != "none" and not info.startswith("["):
            out[j] = len(info.split(":"))
        elif isinstance(info, dict) and info.get("values"):
            out[j] = len(info["values"])
    return out


def _categories(
    pandas_categorical: Any, infos: Any, n_features: int, params: dict[str, str]
) -> dict[int, list]:
    """Training categories of pandas categorical columns, by feature index.

    LightGBM lists them in the order of its categorical features: the ``categorical_feature``
    parameter (which also names those it found trivial, e.g. one level: ``none`` in
    feature_infos), else the features feature_infos describes as categorical."""
    if not isinstance(pandas_categorical, list) or not pandas_categorical:
        return {}
    try:
        given = str(params.get("categorical_feature", "")).replace(" ", "")
        cat_feats = sorted(int(v) for v in given.split(",")) if given else []
    except ValueError:  # names, not indices
        cat_feats = []
    if len(cat_feats) != len(pandas_categorical) or not all(0 <= j < n_features for j in cat_feats):
        cat_feats = sorted(_category_counts(infos, n_features))
    if len(cat_feats) != len(pandas_categorical):  # e.g. ordered categoricals (read as codes)
        return {}
    out = {}
    for j, cats in zip(cat_feats, pandas_categorical):
        if isinstance(cats, list):
            out[j] = [int(c) if isinstance(c, float) and c.is_integer() else c for c in cats]
    return out


# ---------------------------------------------------------------------- objectives
def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """The ``KernelObjective`` of LightGBM's objectives (``_common.KernelObjective``): no
    hessian floor, ``sigmoid`` and label weights of the logistic ones, softmax hessian scaled
    by K / (K - 1); NotImplementedError for those supported for prediction only."""
    prm = prm.copy()
    prm[fmt.P_MIN_HESS] = 0.0
    prm[fmt.P_SIGMOID] = float(params.get("sigmoid", 1.0))
    prm[fmt.P_POS_WEIGHT] = float(params.get("pos_weight", 1.0))
    if name in ("binary", "multiclassova") and float(params.get("neg_weight", 1.0)) != 1.0:
        raise UnsupportedModelError(
            "LightGBM is_unbalance with a majority of positive labels weights the negative "
            "labels; that objective is supported for prediction only."
        )
    if name == "regression":
        if params.get("sqrt"):
            raise UnsupportedModelError(
                "LightGBM regression with reg_sqrt=True is supported for prediction only."
            )
        return fmt.SQUARED, prm
    if name == "binary":
        return fmt.LOGISTIC, prm
    if name == "cross_entropy":
        prm[fmt.P_SIGMOID] = 1.0
        prm[fmt.P_POS_WEIGHT] = 1.0
        return fmt.LOGISTIC, prm
    if name == "multiclass":
        if n_outputs < 2:
            raise ModelFormatError("A multiclass model needs at least two classes.")
        prm[fmt.P_HESS_SCALE] = n_outputs / (n_outputs - 1.0)
        return fmt.SOFTMAX, prm
    if name == "multiclassova":
        return fmt.OVA, prm
    if name == "poisson":
        prm[fmt.P_MAX_DELTA] = float(params.get("poisson_max_delta_step", 0.7))
        return fmt.POISSON, prm
    if name == "gamma":
        return fmt.GAMMA, prm
    if name == "tweedie":
        prm[fmt.P_TWEEDIE] = float(params.get("tweedie_variance_power", 1.5))
        return fmt.TWEEDIE, prm
    raise UnsupportedModelError(
        f"LightGBM objective {name!r} has no per-row gradient here; it is supported for "
        "prediction only."
    )


#: LightGBM's conventions: float64 thresholds and sums, TreeSHAP weighted by row counts
_BOOSTER = Booster("lightgbm", "float64 <=", False, "count", kernel_objective)
