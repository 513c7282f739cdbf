"""CatBoost: read a model's JSON export (``save_model(path, format="json")``) into a TreeEnsemble.

Routing rule: bit j of an oblivious tree's leaf index is split j, set when ``float32(x) >
border``; a non-symmetric tree (grow_policy Depthwise or Lossguide) goes right when
``float32(x) > border``. Both are the ``"float32 <="`` decision rule (left iff ``float32(x) <=
border``). NaN follows the feature's ``nan_value_treatment``: ``AsFalse`` (nan_mode Min) and
``AsIs`` (nan_mode Forbidden: NaN compares false) go left, ``AsTrue`` (nan_mode Max) goes right.

An oblivious tree of depth d becomes a complete binary tree whose level j splits on split j, so a
leaf's ``leaf_id`` (bit j = the side taken at level j) is CatBoost's own leaf index, as
``calc_leaf_indexes`` returns it. Non-symmetric trees number their leaves left to right (depth
first, left child first), which is again CatBoost's numbering. A MultiClass tree holds K values
per leaf; it becomes K trees of the same structure, one per class, in the same boosting round.

CatBoost's raw prediction is ``scale * (sum of leaves) + bias`` (``scale_and_bias``). The scale
is folded into every leaf value and into the learning rate of every tree (a leaf is then still
``-learning_rate * G / (H + lambda)``), the bias becomes the base margin. CatBoost sums the leaf
values in float64 in tree order and adds the bias last; treeinner starts from the bias, so the
two agree to float64 rounding (about 1e-16 of the summed magnitudes), not bit for bit.

``leaf_weights`` are sums of sample weights, not hessians. They are used as covers only for
RMSE, whose hessian is the sample weight; for every other loss the covers are NaN and node
values come from the training data (PreDecomp, ``reference=``) or from ``count`` (Saabas).
CatBoost scales ``l2_leaf_reg`` by the mean sample weight of the training set; ``reg_lambda``
is ``l2_leaf_reg`` and ``l2_scaled_by_mean_weight`` tells ``node_values`` to scale it by the
mean weight of the reference data. The leaf weights are the ensemble's ``count`` for every
loss: TreeSHAP weights splits by them (``node_weight="count"``), as CatBoost's ``ShapValues``
do, and walks an oblivious tree's levels last split first as they do (``reverse_levels``).

Phases (``_convert``): ``_read_header`` (features, scale and bias, loss) -> ``parse_trees``
(``_cb_trees``) -> ``_eta_l2`` and ``_inexact`` (the options' conventions) -> ``_per_output``
(one ensemble tree per tree and output) -> ``assemble``, with the categorical routing of
``_cb_categorical`` as the input map.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, NamedTuple

import numpy as np

from .. import _format as fmt
from .._errors import InputError, InputTypeError, ModelFormatError, UnsupportedModelError
from ..ensemble import TreeEnsemble, register_input_map
from ._cb_categorical import CategoricalRouting, check_ctr_data, require_catboost
from ._cb_trees import FeatureMap, array, bad, features, num, parse_trees
from ._common import assemble, emit, library_of, pick
from ._records import Booster, Conversion, Export, Objective, Overrides, Parts, Tree

__all__ = ["export", "from_booster", "from_cbm", "from_document",
           "from_export", "from_file", "from_json", "kernel_objective",
           "matches", "matches_document", "sniff_file"]  # fmt: skip

_CODES = {
    "RMSE": fmt.SQUARED,
    "Logloss": fmt.LOGISTIC,
    "CrossEntropy": fmt.LOGISTIC,
    "MultiClass": fmt.SOFTMAX,
    "Poisson": fmt.POISSON,
    "Tweedie": fmt.TWEEDIE,
}
_CB_DEFAULTS = {"learning_rate": 0.03, "l2_leaf_reg": 3.0}
_MULTI_TARGET = ("MultiRMSE", "MultiLogloss", "MultiCrossEntropy", "RMSEWithUncertainty")
_INEXACT = (
    "Node values from data (PreDecomp) will not reproduce this CatBoost model's leaves exactly"
)
_CORRUPT_ERRORS = (KeyError, TypeError, IndexError, AttributeError, OverflowError)


# ---------------------------------------------------------------------- the adapter interface
def matches(obj: Any) -> bool:
    """Whether ``obj`` comes from the catboost package."""
    return library_of(obj) == "catboost"


def export(obj: Any) -> Export:
    """Serialize a fitted ``CatBoost``, ``CatBoostRegressor`` or ``CatBoostClassifier``: its
    binary model (``_serialize_model()``; the JSON export where that is missing). A model with
    categorical features is kept by the ensemble to route rows, so its identity is ``extra``."""
    if not hasattr(obj, "save_model") or not hasattr(obj, "is_fitted"):
        raise InputTypeError(f"{type(obj).__name__} is not a CatBoost model.")
    if not obj.is_fitted():
        raise InputError(f"The {type(obj).__name__} is not fitted; call fit() first.")
    # CatBoost's JSON export silently leaves text and embedding features out
    for kind in ("text", "embedding"):
        getter = getattr(obj, f"get_{kind}_feature_indices", None)
        if getter is not None and len(getter()) > 0:
            raise UnsupportedModelError(f"CatBoost models with {kind} features are not supported.")
    serialize = getattr(obj, "_serialize_model", None)
    data = bytes(serialize()) if serialize is not None else _json_export(obj)
    cats = getattr(obj, "get_cat_feature_indices", lambda: [1])()
    return Export(data, str(id(obj)).encode() if len(cats) else b"", model=obj)


def _json_export(model: Any) -> bytes:
    """``save_model(..., format="json")`` through a temporary file (no pickle)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        try:
            model.save_model(path, format="json")
        except Exception as e:  # CatBoostError, e.g. a model JSON cannot describe
            raise ModelFormatError(f"CatBoost could not export the model as JSON: {e}") from e
        with open(path, "rb") as fh:
            return fh.read()


def from_export(exported: Export, given: Overrides) -> Conversion:
    """Convert what ``export`` serialized (warnings returned, not given)."""
    data = exported.data if exported.data[:1] == b"{" else _json_export(exported.model)
    return _convert(json.loads(data.decode("utf-8")), given, exported.model, own_export=True)


def from_booster(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """A fitted CatBoost model as a TreeEnsemble (not cached)."""
    return emit(from_export(export(model), Overrides(learning_rate, reg_lambda)))


def sniff_file(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a CatBoost binary model (``.cbm``)."""
    return head.startswith(b"CBM1")


def from_file(path: str, data: bytes, given: Overrides) -> Conversion:
    """Convert a ``.cbm`` file ``sniff_file`` recognised (through catboost, see ``from_cbm``)."""
    return _convert(_cbm_document(path), given, None)


def matches_document(doc: Any) -> bool:
    """Whether a decoded JSON document is a CatBoost model."""
    return isinstance(doc, dict) and ("oblivious_trees" in doc or "features_info" in doc)


def from_document(doc: Any, given: Overrides) -> Conversion:
    """Convert a decoded JSON export."""
    return _convert(doc, given, None)


def from_json(
    doc: dict,
    *,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
    model: Any = None,
) -> TreeEnsemble:
    """Build a TreeEnsemble from a decoded CatBoost JSON model.

    Categorical splits (one-hot and CTR) are evaluated by CatBoost itself: the ensemble then
    carries an ``input_map`` that asks ``calc_leaf_indexes`` which way every row goes at
    those splits (this needs the catboost package), and its attributions and importances are
    credited to the categorical features the splits use.

    Parameters
    ----------
    doc : dict
        ``json.load`` of a file written by ``model.save_model(path, format="json")``.
    learning_rate : float, optional
        Overrides the learning rate read from ``model_info.params``.
    reg_lambda : float, optional
        Overrides ``l2_leaf_reg`` read from ``model_info.params``.
    model : catboost.CatBoost, optional
        The model the document was exported from (routes the rows at the categorical splits
        of oblivious trees; loaded from the document when absent, after a worker process has
        checked that CatBoost can load it without crashing). Non-symmetric trees are always
        routed by a model loaded from the document, whose leaf numbering is known.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If the document is not a CatBoost model or is corrupt.
    ImportError
        If the model has categorical features and catboost is not installed.
    NotImplementedError
        If the model uses an option treeinner does not support (named in the message).
    """
    return emit(_convert(doc, Overrides(learning_rate, reg_lambda), model))


_EXPORT = """
import sys
from catboost import CatBoost
m = CatBoost()
m.load_model(sys.argv[1], format="cbm")
for kind in ("text", "embedding"):
    if len(getattr(m, f"get_{kind}_feature_indices")()):
        sys.stderr.write(f"UNSUPPORTED: CatBoost models with {kind} features")
        sys.exit(3)
m.save_model(sys.argv[2], format="json")
# a corrupt leaf map (leaf counts, node-to-leaf ids) routes rows past the tree's leaves
import json
import numpy as np
with open(sys.argv[2], encoding="utf-8") as fh:
    doc = json.load(fh)
def n_leaves(node):
    n, stack = 0, [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict) and "split" in x:
            stack += [x.get("left"), x.get("right")]
        else:
            n += 1
    return n
if "trees" in doc:
    want = [n_leaves(t) for t in doc["trees"]]
else:
    want = [2 ** len(t.get("splits") or []) for t in doc.get("oblivious_trees") or []]
counts = [int(c) for c in m.get_tree_leaf_counts()]
if counts != want:
    t = next((k for k, (a, b) in enumerate(zip(counts, want)) if a != b), len(want))
    sys.stderr.write(f"tree {t}: CatBoost counts {counts[t:t + 1]} leaves, its JSON export "
                     f"{want[t:t + 1]}")
    sys.exit(4)
if not len(m.get_cat_feature_indices()):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, len(m.feature_names_))) * 3
    X[rng.random(X.shape) < 0.1] = np.nan
    leaves = np.asarray(m.calc_leaf_indexes(X)).reshape(X.shape[0], -1)
    bad = np.argwhere(leaves >= np.asarray(want)[None, :])
    if bad.size:
        r, t = bad[0]
        sys.stderr.write(f"tree {t}: CatBoost routes rows to leaf {leaves[r, t]} of {want[t]}")
        sys.exit(4)
"""


def from_cbm(
    path: str | os.PathLike,
    *,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
    timeout: float = 300.0,
) -> TreeEnsemble:
    """Read a CatBoost binary model (``.cbm``) through catboost itself.

    CatBoost loads the file and exports it as JSON in a separate process: a corrupt ``.cbm``
    can crash CatBoost's loader, which then cannot take the calling process with it.
    ``timeout``: seconds to wait for CatBoost before giving up. ImportError if catboost is not
    installed, ValueError if it cannot read the file (corrupt or truncated).
    """
    doc = _cbm_document(os.fspath(path), timeout)
    return emit(_convert(doc, Overrides(learning_rate, reg_lambda), None))


def _cbm_document(path: str, timeout: float = 300.0) -> dict:
    """A ``.cbm`` file exported as JSON by catboost in a separate process, decoded."""
    require_catboost(f"the CatBoost binary model {path!r}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model.json")
        try:
            res = subprocess.run(
                [sys.executable, "-c", _EXPORT, path, out],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise ModelFormatError(f"CatBoost did not read {path!r} within {timeout:g} s.") from e
        if res.returncode == 3 and "UNSUPPORTED: " in (res.stderr or ""):
            what = res.stderr.split("UNSUPPORTED: ", 1)[1].strip()
            raise UnsupportedModelError(f"{what} are not supported.")
        if res.returncode != 0 or not os.path.exists(out):
            lines = [ln for ln in (res.stderr or "").strip().splitlines() if ln.strip()]
            why = lines[-1][-200:] if lines else f"the loader died (exit code {res.returncode})"
            raise ModelFormatError(f"{path!r} is not a readable CatBoost model (corrupt?): {why}")
        try:
            with open(out, encoding="utf-8") as fh:
                return json.load(fh)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ModelFormatError(f"CatBoost exported {path!r} as invalid JSON: {e}") from e


# ---------------------------------------------------------------------- phases
def _check_classes(doc: dict, k: int) -> None:
    """``model_info.class_params``: the class lists of a classifier name one class per output
    (``k`` leaf values per leaf; two classes for one output), as CatBoost predicts that many
    columns from them."""
    params = (
        doc.get("model_info", {}).get("class_params")
        if isinstance(doc.get("model_info"), dict)
        else None
    )
    if params is None:
        return
    if not isinstance(params, dict):
        raise bad("model_info.class_params is not an object.")
    want = k if k > 1 else 2
    for key in ("class_names", "class_to_label"):
        v = params.get(key)
        if v is not None and (not isinstance(v, list) or len(v) not in (0, want)):
            got = len(v) if isinstance(v, list) else type(v).__name__
            raise bad(
                f"model_info.class_params.{key} has {got} entries; the leaves hold {k} "
                f"value(s) per leaf, so {want} classes."
            )


def _convert(doc: Any, given: Overrides, model: Any, own_export: bool = False) -> Conversion:
    """Every phase, from the document to the assembled ensemble (``own_export``: the document
    is CatBoost's own export of ``model``, in memory, not read from a file)."""
    if not isinstance(doc, dict) or not ("oblivious_trees" in doc or "trees" in doc):
        raise ModelFormatError("Not a CatBoost JSON model (no 'oblivious_trees' or 'trees').")
    try:
        _all_finite(doc)
        h = _read_header(doc)
        parsed, symmetric = parse_trees(doc, h.k, h.fmap)
        _check_classes(doc, h.k)
        if h.fmap.ctrs or "ctr_data" in doc:
            check_ctr_data(doc.get("ctr_data"), h.fmap)
        lr, lam, notes = _eta_l2(h.params, given)
        trees, groups, iterations = _per_output(parsed, h)
        tl = _section(h.params, "tree_learner_options")
        grow = "SymmetricTree" if symmetric else tl.get("grow_policy", "Depthwise")
        routing = None
        if h.fmap.cat_cols:  # even if no split uses them, X carries their (string) values
            routing = _routing_factory(doc, model, h, symmetric, own_export)
        info = {"scale": h.scale, "l2_leaf_reg": float(lam), "grow_policy": grow}
        return assemble(
            Parts(
                _BOOSTER,
                trees,
                groups,
                iterations,
                learning_rate=np.full(len(trees), float(lr) * h.scale),
                base_margin=h.bias,
                feature_names=h.names,
                named=h.named,
                reg_lambda=float(lam),
                objective=Objective(h.objective, h.obj_params, h.k),
                source_version=_version(doc),
                params={**info, "leaf_weights": "sample weight sums"},
                inexact=_inexact(h),
                notes=notes,
                reverse_levels=symmetric,
                input_map=routing,
            )
        )
    except _CORRUPT_ERRORS as e:
        raise ModelFormatError(f"Corrupt CatBoost model: {type(e).__name__}: {e}") from e


def _all_finite(doc: dict) -> None:
    """Refuse NaN and infinities anywhere in the document (Python's JSON reader accepts them;
    CatBoost's misreads them, and the fields around them)."""
    stack: list[tuple[Any, tuple]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not np.isfinite(node):
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)[1:]
            raise bad(f"{where} is {node!r}; CatBoost writes finite numbers only.")
        if isinstance(node, dict):
            stack.extend((v, (*path, str(key))) for key, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))


class _Header(NamedTuple):
    """What the model document says besides the trees, checked."""

    names: list[str]
    named: bool
    fmap: FeatureMap
    scale: float
    bias: np.ndarray  # per output
    k: int  # outputs
    params: dict  # model_info.params
    objective: str
    obj_params: dict


def _read_header(doc: dict) -> _Header:
    """The header phase: features, ``scale_and_bias``, training parameters and loss."""
    names, named, fmap = features(doc)
    sb = doc.get("scale_and_bias", [1.0, [0.0]])
    if not isinstance(sb, list) or len(sb) != 2:
        raise bad("scale_and_bias is not [scale, [bias, ...]].")
    scale = num(sb[0], "scale_and_bias[0] (the scale)")
    biases = array(sb[1], "scale_and_bias[1] (the biases)")
    bias = np.array([num(b, f"scale_and_bias[1][{i}] (a bias)") for i, b in enumerate(biases)])
    if not np.isfinite(scale) or scale <= 0:
        raise UnsupportedModelError(
            f"CatBoost models with scale {scale} (scale_and_bias) are not supported: only a "
            "positive finite scale can be folded into the learning rate."
        )
    k = bias.shape[0]
    if k < 1:
        raise bad("scale_and_bias has no bias.")
    params = _params(doc)
    objective, obj_params = _loss(params)
    if objective in _MULTI_TARGET:
        raise UnsupportedModelError(
            f"CatBoost loss_function {objective!r} (multi-target) is not supported."
        )
    if k > 1 and objective not in ("MultiClass", "MultiClassOneVsAll"):
        raise UnsupportedModelError(
            f"CatBoost models with {k} outputs and loss_function {objective!r} are not supported."
        )
    if objective == "MultiClass":
        obj_params["num_class"] = k
    return _Header(names, named, fmap, scale, bias, k, params, objective, obj_params)


def _params(doc: dict) -> dict:
    """``model_info.params`` (an object, or a JSON string in some versions)."""
    info = doc.get("model_info", {})
    if not isinstance(info, dict):
        raise bad("model_info is not an object.")
    p = info.get("params", {})
    if isinstance(p, str):  # some versions store the params as a JSON string
        try:
            p = json.loads(p)
        except json.JSONDecodeError as e:
            raise bad(f"model_info.params is not valid JSON ({e}).") from e
    if not isinstance(p, dict):
        raise bad("model_info.params is not an object.")
    return p


def _section(params: dict, name: str) -> dict:
    """A section of ``model_info.params`` (an object; empty when absent)."""
    sec = params.get(name, {})
    if not isinstance(sec, dict):
        raise bad(f"model_info.params.{name} is not an object.")
    return sec


def _loss(params: dict) -> tuple[str, dict]:
    """The loss function's name and parameters (numbers where they parse as numbers)."""
    lf = params.get("loss_function", {})
    if isinstance(lf, str):
        name, _, rest = lf.partition(":")
        opts = dict(kv.split("=", 1) for kv in rest.split(";") if "=" in kv)
        lf = {"type": name, "params": opts}
    if not isinstance(lf, dict):
        raise bad("model_info.params.loss_function is not an object.")
    out: dict[str, Any] = {}
    for key, v in (lf.get("params") or {}).items():
        try:
            out[key] = float(v)
        except (TypeError, ValueError):
            out[key] = v
        if isinstance(out[key], float) and not np.isfinite(out[key]):
            raise bad(f"model_info.params.loss_function parameter {key} is {v!r}.")
    name = lf.get("type", "RMSE")
    if not isinstance(name, str):
        raise bad(f"model_info.params.loss_function.type is not a string ({name!r}).")
    return name, out


def _version(doc: dict) -> str:
    """The CatBoost version that wrote the model ('' when it does not say)."""
    info = doc.get("model_info", {})
    version = ""
    if isinstance(info.get("catboost_version_info"), str):
        for line in info["catboost_version_info"].splitlines():
            if "Branch:" in line and "v" in line:
                version = line.split("v")[-1].strip()
    return version


def _eta_l2(params: dict, given: Overrides) -> tuple[float, float, list[str]]:
    """The learning rate and l2_leaf_reg: explicit > recorded > CatBoost's defaults (noted)."""
    out, notes = [], []
    for key, section, arg, explicit in (
        ("learning_rate", "boosting_options", "learning_rate", given.learning_rate),
        ("l2_leaf_reg", "tree_learner_options", "reg_lambda", given.reg_lambda),
    ):
        opts, recorded = _section(params, section), None
        if explicit is None and key in opts:
            what = f"model_info.params.{section}.{key}"
            recorded = num(opts[key], what)
            if recorded < 0 or (recorded == 0 and key == "learning_rate"):
                raise bad(f"{what} is {recorded:g}; it must be positive.")
        note = (
            f"The CatBoost model does not record its {key}; assuming {_CB_DEFAULTS[key]:g}. "
            f"Pass {arg}= to set it."
        )
        value, more = pick(explicit, (recorded, ""), (_CB_DEFAULTS[key], note))
        out.append(value)
        notes += more
    return out[0], out[1], notes


def _inexact(h: _Header) -> list[str]:
    """Why node values from data will not reproduce the leaves exactly."""
    bo = _section(h.params, "boosting_options")
    tl = _section(h.params, "tree_learner_options")
    out = []
    method = tl.get("leaf_estimation_method", "Newton")
    iters = tl.get("leaf_estimation_iterations", 1)
    if h.objective == "MultiClass":
        out.append(
            "MultiClass leaves are a Newton step with the full K x K softmax hessian, node "
            "values from data use its diagonal"
        )
    if method not in ("Newton",) and h.objective != "RMSE":
        out.append(f"leaf_estimation_method={method!r} is not a Newton step")
    if isinstance(iters, (int, float)) and iters > 1:
        out.append(f"leaf_estimation_iterations={iters:g} > 1 refines the leaves")
    shrink = bo.get("model_shrink_rate") or 0
    if shrink and num(shrink, "model_info.params.boosting_options.model_shrink_rate"):
        out.append(f"model_shrink_rate={shrink:g} shrinks earlier trees")
    if bo.get("posterior_sampling") or bo.get("langevin"):
        out.append("posterior sampling / Langevin boosting adds noise to the leaves")
    if tl.get("monotone_constraints"):
        out.append("monotone_constraints adjust the leaves")
    dpo = _section(h.params, "data_processing_options")
    if dpo.get("class_weights") or dpo.get("auto_class_weights", "None") != "None":
        out.append("class weights are sample weights the reference data must carry")
    if h.objective not in _CODES:
        out.append(f"loss_function {h.objective!r} has no gradient here")
    if h.fmap.n_ctr and h.objective != "RMSE":
        out.append(
            "CTR splits: CatBoost grew the trees with ordered target statistics, so the "
            "training rows do not reach the same leaves under the final model's statistics"
        )
    return out


def _per_output(parsed: list[dict], h: _Header) -> tuple[list[Tree], np.ndarray, np.ndarray]:
    """One ensemble tree per CatBoost tree and output (the scale folded into the leaves): the
    trees, their outputs and their boosting rounds. The leaf weights are every tree's counts,
    and its covers for RMSE (whose hessian is the sample weight)."""
    trees, groups, iterations = [], [], []
    for it, p in enumerate(parsed):
        n = p["left"].shape[0]
        leaf = p["left"] < 0
        for c in range(h.k):
            trees.append(
                Tree(
                    left=p["left"],
                    right=p["right"],
                    feature=p["feature"],
                    threshold=p["threshold"],
                    split_type=np.full(n, fmt.NUMERIC, dtype=np.int8),
                    default_left=p["nan_left"],
                    missing_type=np.full(n, fmt.MISSING_NAN, dtype=np.int8),
                    value=np.where(leaf, p["value"][:, c] * h.scale, 0.0),
                    cover=p["weight"] if h.objective == "RMSE" else np.full(n, np.nan),
                    count=p["weight"],
                    gain=np.where(leaf, 0.0, np.nan),
                    leaf_id=p["leaf_id"],
                )
            )
            groups.append(c)
            iterations.append(it)
    return trees, np.array(groups, dtype=np.int64), np.array(iterations, dtype=np.int64)


def _routing_factory(doc: dict, model: Any, h: _Header, symmetric: bool, own_export: bool):
    """The input map factory (``_common.InputMapFactory``) of a model with categorical
    features: the routing, and the feature names with one column per categorical split."""

    def build(joined: dict[str, np.ndarray]) -> tuple[Any, list[str]]:
        """The routing built on the joined node arrays, and the names."""
        routing = CategoricalRouting(
            doc, model, h.fmap, h.names, h.k, joined, symmetric, own_export
        )
        extra = [f"{routing.column_names[h.fmap.n_raw + j]}#{j}" for j in range(len(h.fmap.synth))]
        return routing, list(h.names) + extra

    return build


def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """The ``KernelObjective`` of CatBoost's losses (``_common.KernelObjective``): the plain
    derivatives, no hessian floor; NotImplementedError for losses with no gradient here."""
    if name not in _CODES:
        raise UnsupportedModelError(
            f"CatBoost loss_function {name!r} has no per-row gradient in treeinner (supported: "
            f"{', '.join(_CODES)}); such models are supported for prediction only."
        )
    code = _CODES[name]
    prm = np.array(prm, dtype=np.float64, copy=True)
    # CatBoost's derivatives are the plain ones: the softmax hessian diagonal is p (1 - p)
    # (its Newton step for MultiClass uses the full K x K hessian, see ``inexact``), the
    # Poisson hessian exp(F), and no loss floors its hessian.
    prm[fmt.P_HESS_SCALE] = 1.0
    prm[fmt.P_MIN_HESS] = 0.0
    prm[fmt.P_MAX_DELTA] = 0.0
    if code == fmt.TWEEDIE:
        prm[fmt.P_TWEEDIE] = float(params.get("variance_power", 1.5))
    if code == fmt.SOFTMAX and n_outputs < 2:
        raise ModelFormatError("Corrupt CatBoost model: MultiClass with fewer than 2 outputs.")
    return code, prm


#: CatBoost's conventions: float32 borders, float64 sums, TreeSHAP weighted by the leaf weights
#: (sample weight sums), l2_leaf_reg scaled by the mean sample weight
_BOOSTER = Booster("catboost", "float32 <=", False, "count", kernel_objective, _INEXACT, True)


def _rebuild_routing(doc: Any, ens: TreeEnsemble) -> Any:
    """The categorical routing of a saved ensemble (``TreeEnsemble.load_npz``), rebuilt from
    the model's JSON export saved with it; ValueError if the export does not describe the
    saved trees."""
    new = _convert(doc, Overrides(None, None), None).ensemble
    same = new.n_nodes == ens.n_nodes and all(
        np.array_equal(getattr(new, k), getattr(ens, k), equal_nan=k == "threshold")
        for k in ("tree_offsets", "left", "right", "feature", "threshold", "leaf_id", "value")
    )
    if not same or new.input_map is None:
        raise ModelFormatError(
            "The saved CatBoost model document does not describe the saved trees (corrupt file?)."
        )
    return new.input_map


register_input_map("catboost", _rebuild_routing)
