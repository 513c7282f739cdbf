"""The common tree format: every booster's model as one validated set of flat arrays."""

from __future__ import annotations

import functools
import json
import os
import zipfile
import zlib
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from . import _input
from ._errors import InputError, ModelFormatError, UnsupportedModelError
from ._format import (
    DECISION_RULES,
    N_OBJECTIVES,
    N_PARAMS,
    NODE_WEIGHTS,
    NUMERIC,
    OBJECTIVE_NAMES,
    OVA,
    SOFTMAX,
    SQUARED,
    Layout,
    LinearLeaves,
    Nodes,
    default_grad_params,
)
from ._thresholds import float32_le_bound, float32_lt_bound
from .kernels import oblivious, routing

__all__ = ["DECISION_RULES", "TreeEnsemble"]

FORMAT_VERSION = 2
_SERIAL_WORK = 50_000  # rows x trees below which the kernels run on the calling thread
_MARGIN = (routing.predict_margin, routing.predict_margin_serial)
_LEAF_INDEX = (routing.leaf_index, routing.leaf_index_serial)

_NODE_ARRAYS = {
    "left": np.int32,
    "right": np.int32,
    "feature": np.int32,
    "threshold": np.float64,
    "split_type": np.int8,
    "default_left": np.uint8,
    "missing_type": np.int8,
    "value": np.float64,
    "cover": np.float64,
    "count": np.float64,
    "gain": np.float64,
    "leaf_id": np.int32,
}
_TREE_ARRAYS = {
    "tree_group": np.int32,
    "tree_iteration": np.int32,
    "learning_rate": np.float64,
    "tree_weight": np.float64,
}
_OTHER_ARRAYS = {
    "tree_offsets": np.int64,
    "cat_offsets": np.int64,
    "cat_words": np.uint32,
    "base_margin": np.float64,
}
_LINEAR_ARRAYS = {  # LinearLeaves fields, saved as linear_<name>
    "tree": np.int64,
    "leaf": np.int64,
    "delta": np.float64,
    "ptr": np.int64,
    "features": np.int64,
    "coeff": np.float64,
}


@dataclass(frozen=True, eq=False, repr=False)
class TreeEnsemble:
    """All trees of a boosted model as flat arrays, validated once when built.

    Nodes of all trees are concatenated; tree ``t`` owns nodes
    ``tree_offsets[t]:tree_offsets[t + 1]`` and its root is the first of them. Child indices are
    global (into the concatenated arrays), -1 at leaves.

    Parameters
    ----------
    tree_offsets : ndarray of int64, shape (n_trees + 1,)
        Start of each tree's nodes; the last entry is the total number of nodes.
    left, right : ndarray of int32, shape (n_nodes,)
        Global index of the left and right child, -1 at a leaf.
    feature : ndarray of int32
        Split feature (column index), -1 at a leaf.
    threshold : ndarray of float64
        Split threshold as stored by the booster (its own comparison rule, see
        ``decision_rule``); NaN at leaves and categorical nodes.
    split_type : ndarray of int8
        0 numeric, 1 categorical with the node's categories going right (XGBoost),
        2 categorical with the node's categories going left (LightGBM).
    default_left : ndarray of uint8
        Direction of missing values.
    missing_type : ndarray of int8
        0: NaN is missing; 1: NaN and zero are missing; 2: NaN is read as 0 (LightGBM).
    value : ndarray of float64
        Leaf output as added to the margin (shrinkage and tree weights applied); 0 at inner nodes.
    cover : ndarray of float64
        Training hessian sum of each node (NaN where the booster does not store it).
    count : ndarray of float64
        Training row count of each node (NaN where unknown). CatBoost stores sample-weight
        sums, which are the counts when training had no sample weights.
    gain : ndarray of float64
        Split gain as stored by the booster, 0 at leaves.
    leaf_id : ndarray of int32
        The booster's own number for each leaf (what its leaf-index prediction returns).
    cat_offsets : ndarray of int64, shape (n_nodes + 1,)
        Each node's words in ``cat_words``.
    cat_words : ndarray of uint32
        Categorical sets as bitsets (bit ``c % 32`` of word ``c // 32`` for category ``c``).
    tree_group : ndarray of int32, shape (n_trees,)
        Output (class) each tree adds to.
    tree_iteration : ndarray of int32
        Boosting round of each tree (non-decreasing).
    learning_rate : ndarray of float64
        Shrinkage applied to each tree.
    tree_weight : ndarray of float64
        Extra per-tree weight already folded into ``value`` (DART), 1 otherwise.
    base_margin : ndarray of float64, shape (n_outputs,)
        Intercept of each output in margin space.
    feature_names : tuple of str
        Names of the features (generated ``f0, f1, ...`` when the model has none).
    named : bool
        Whether the names come from the model (DataFrame columns are then matched by name).
    reg_lambda : float
        L2 penalty on leaf values.
    objective : str
        Objective in the source booster's spelling.
    objective_params : dict
        Objective parameters (tweedie power, huber slope, number of classes, ...).
    decision_rule : str
        One of ``DECISION_RULES``.
    float32_sum : bool
        Whether the booster adds leaf values in float32 (XGBoost).
    source, source_version : str
        The booster and version the model came from.
    categories : dict
        Training category values per feature index, for coding pandas categorical columns.
    params : dict
        Training hyperparameters read from the model, for information: nothing reads them to
        steer a computation (the booster conventions below do that).
    inexact : tuple of str
        Reasons why leaf values are not exactly ``-lr G / (H + lambda)``, if any.
    node_weight : {"cover", "count"}
        The node weights path-dependent TreeSHAP splits by when it follows the booster
        (``tree_shap``'s ``"auto"``), so that its values equal the booster's own: ``"cover"``
        (hessian sums; XGBoost and the native booster) or ``"count"`` (training row counts;
        LightGBM, CatBoost).
    reverse_levels : bool
        Whether TreeSHAP walks every oblivious tree's levels last split first (CatBoost's
        ``ShapValues`` on SymmetricTree models); prediction does not depend on it.
    grad_objective : int
        The kernel objective whose per-row gradient and hessian TreeInner, ForestInner, the
        unbiased gain and node values from data use (a code of ``treeinner._format``:
        ``SQUARED`` ... ``OVA``), or -1 when the objective has no gradient here.
        ``objective`` is only the booster's name for it.
    grad_params : ndarray of float64, shape (N_PARAMS,)
        The kernel objective's parameters in the booster's conventions (hessian scale,
        Poisson max_delta_step, tweedie power, huber slope, positive weight, hessian floor,
        sigmoid; slots ``P_*`` of ``treeinner._format``); by default
        ``treeinner._format.default_grad_params()``.
    no_gradient : str
        With ``grad_objective=-1``, the message of the NotImplementedError raised where a
        gradient is needed (it names the objective); empty otherwise.
    l2_scaled_by_mean_weight : bool
        Whether the booster scaled ``reg_lambda`` by the mean sample weight of the training
        set (CatBoost): node values from data then scale it by the reference data's mean
        weight.
    linear_leaves : LinearLeaves, optional
        The linear leaf models of LightGBM linear trees (``treeinner._format.LinearLeaves``:
        per entry its tree, leaf number and ``delta``, and the CSR ``ptr``, ``features``,
        ``coeff`` of its coefficients), or None.
    input_map : object, optional
        For models whose splits the kernels cannot evaluate from the raw columns (CatBoost
        categorical splits): ``transform(X)`` gives the kernels' input (the model's numeric
        columns plus one 0/1 column per such split, computed by the booster itself),
        ``output_names`` the user's feature names, ``credit`` (n_features x
        len(output_names)) how each kernel column's attributions are credited to them, and
        ``column_names`` a display name per kernel column. Not saved.
    """

    tree_offsets: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    split_type: np.ndarray
    default_left: np.ndarray
    missing_type: np.ndarray
    value: np.ndarray
    cover: np.ndarray
    count: np.ndarray
    gain: np.ndarray
    leaf_id: np.ndarray
    cat_offsets: np.ndarray
    cat_words: np.ndarray
    tree_group: np.ndarray
    tree_iteration: np.ndarray
    learning_rate: np.ndarray
    tree_weight: np.ndarray
    base_margin: np.ndarray
    feature_names: tuple[str, ...]
    named: bool = True
    reg_lambda: float = 1.0
    objective: str = "reg:squarederror"
    objective_params: dict = field(default_factory=dict)
    decision_rule: str = "float32 <"
    float32_sum: bool = True
    source: str = "unknown"
    source_version: str = ""
    categories: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    inexact: tuple[str, ...] = ()
    node_weight: str = "cover"
    reverse_levels: bool = False
    grad_objective: int = SQUARED
    grad_params: np.ndarray = field(default_factory=default_grad_params)
    no_gradient: str = ""
    l2_scaled_by_mean_weight: bool = False
    linear_leaves: LinearLeaves | None = None
    input_map: Any = field(default=None, compare=False, repr=False)

    # ------------------------------------------------------------------ construction
    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name, dtype in {**_NODE_ARRAYS, **_TREE_ARRAYS, **_OTHER_ARRAYS}.items():
            raw = np.asarray(getattr(self, name))
            if raw.ndim != 1:
                raise ModelFormatError(f"TreeEnsemble.{name} must be 1-D, got shape {raw.shape}.")
            if np.dtype(dtype).kind in "iu" and raw.size:
                if raw.dtype.kind not in "biuf" or (
                    raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw)))
                ):
                    raise ModelFormatError(f"Corrupt ensemble: {name} must hold integers.")
                info = np.iinfo(dtype)
                if raw.min() < info.min or raw.max() > info.max:
                    raise ModelFormatError(f"Corrupt ensemble: {name} has values outside {dtype}.")
            arr = np.array(raw, dtype=dtype, copy=True, order="C")  # owned, then frozen
            arr.setflags(write=False)
            set_(self, name, arr)
        set_(self, "feature_names", tuple(str(f) for f in self.feature_names))
        set_(self, "categories", {int(k): list(v) for k, v in dict(self.categories).items()})
        set_(self, "inexact", tuple(self.inexact))
        set_(self, "reg_lambda", float(self.reg_lambda))
        self._validate()
        self._validate_conventions()
        set_(self, "_linear", self._make_linear())
        set_(self, "_bound", self._make_bound())
        self._bound.setflags(write=False)

    def _max_leaf_id(self) -> np.ndarray:
        """The largest leaf number of every tree."""
        out = np.full(self.n_trees, -1, dtype=np.int64)
        np.maximum.at(out, self._node_tree, self.leaf_id)
        return out

    def _validate_conventions(self) -> None:
        """Check and normalise the booster conventions (the fields after ``inexact``)."""
        set_ = object.__setattr__
        if not isinstance(self.node_weight, str) or self.node_weight not in NODE_WEIGHTS:
            raise ModelFormatError(
                f"node_weight must be one of {NODE_WEIGHTS}, got {self.node_weight!r}."
            )
        for name in ("reverse_levels", "l2_scaled_by_mean_weight"):
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise ModelFormatError(f"{name} must be True or False, got {v!r}.")
            set_(self, name, bool(v))
        code = self.grad_objective
        codes = ", ".join(f"{c} ({n})" for c, n in OBJECTIVE_NAMES.items())
        if (
            isinstance(code, (bool, np.bool_))
            or not isinstance(code, (int, np.integer))
            or not -1 <= code < N_OBJECTIVES
        ):
            raise ModelFormatError(
                f"grad_objective must be -1 (no gradient) or one of {codes}; got {code!r}."
            )
        code = int(code)
        set_(self, "grad_objective", code)
        if code in (SOFTMAX, OVA) and self.n_outputs < 2:
            raise ModelFormatError(
                f"grad_objective {code} ({OBJECTIVE_NAMES[code]}) needs at least 2 outputs; "
                f"the ensemble has {self.n_outputs}."
            )
        try:
            prm = np.array(self.grad_params, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as e:
            raise ModelFormatError(f"grad_params must be {N_PARAMS} numbers ({e}).") from e
        if prm.shape != (N_PARAMS,) or not np.all(np.isfinite(prm)):
            raise ModelFormatError(
                f"grad_params must be {N_PARAMS} finite numbers, got shape {prm.shape}."
            )
        prm.setflags(write=False)
        set_(self, "grad_params", prm)
        if not isinstance(self.no_gradient, str):
            raise ModelFormatError(
                f"no_gradient must be a str, got {type(self.no_gradient).__name__}."
            )
        if code < 0 and not self.no_gradient:
            raise ModelFormatError(
                "no_gradient must give the reason when grad_objective is -1 (it is the "
                "message users get where a gradient is needed)."
            )
        if code >= 0 and self.no_gradient:
            raise ModelFormatError(
                f"no_gradient must be empty when grad_objective is {code} (has a gradient); "
                f"got {self.no_gradient!r}."
            )
        set_(self, "linear_leaves", self._check_linear(self.linear_leaves))

    def _check_linear(self, lin: Any) -> LinearLeaves | None:
        """``linear_leaves`` as validated, owned, read-only arrays (or None)."""
        if lin is None:
            return None
        try:
            if not isinstance(lin, LinearLeaves):
                lin = LinearLeaves(**{k: lin[k] for k in LinearLeaves._fields})
            arrays = {}
            for k, dtype in _LINEAR_ARRAYS.items():
                raw = np.asarray(getattr(lin, k))
                if raw.ndim != 1 or (raw.size and raw.dtype.kind not in "biuf"):
                    raise ModelFormatError(f"{k} is not a 1-D numeric array")
                if np.dtype(dtype).kind == "i" and raw.size and raw.dtype.kind == "f":
                    if not np.all(np.isfinite(raw) & (raw == np.round(raw))):
                        raise ModelFormatError(f"{k} holds non-integers")
                arr = np.array(raw, dtype=dtype, copy=True)
                arr.setflags(write=False)
                arrays[k] = arr
        except (KeyError, TypeError, ValueError) as e:
            raise ModelFormatError(f"Corrupt ensemble: linear_leaves ({e}).") from e
        tree, leaf, delta, ptr = arrays["tree"], arrays["leaf"], arrays["delta"], arrays["ptr"]
        flat_f, flat_c = arrays["features"], arrays["coeff"]
        m = tree.shape[0]
        if not (leaf.shape == delta.shape == (m,) and ptr.shape == (m + 1,)):
            raise ModelFormatError("Corrupt ensemble: linear_leaves arrays differ in length.")
        if m and (
            ptr[0] != 0
            or np.any(np.diff(ptr) < 0)
            or ptr[-1] != flat_f.shape[0]
            or flat_c.shape != flat_f.shape
            or np.any((tree < 0) | (tree >= self.n_trees))
            or np.any(leaf < 0)
            or np.any(leaf > self._max_leaf_id()[np.clip(tree, 0, self.n_trees - 1)])
            or np.any((flat_f < 0) | (flat_f >= len(self.feature_names)))
            or not np.all(np.isfinite(delta))
            or not np.all(np.isfinite(flat_c))
        ):
            raise ModelFormatError("Corrupt ensemble: linear_leaves out of range.")
        return LinearLeaves(**arrays)

    def _make_linear(self) -> tuple | None:
        """``linear_leaves`` as the prediction uses them: per entry its tree, leaf number and
        delta, and features/coefficients padded to one width."""
        lin = self.linear_leaves
        if lin is None:
            return None
        tree, leaf, delta, ptr = lin.tree, lin.leaf, lin.delta, lin.ptr
        m = tree.shape[0]
        width = int(np.max(np.diff(ptr))) if m else 0
        feats = np.full((m, max(width, 1)), -1, dtype=np.int64)
        coefs = np.zeros((m, max(width, 1)))
        for i in range(m):
            k = ptr[i + 1] - ptr[i]
            feats[i, :k] = lin.features[ptr[i] : ptr[i + 1]]
            coefs[i, :k] = lin.coeff[ptr[i] : ptr[i + 1]]
        return tree, leaf, delta, feats, coefs

    def _validate(self) -> None:
        n_nodes = self.left.shape[0]
        for name in _NODE_ARRAYS:
            if getattr(self, name).shape[0] != n_nodes:
                raise ModelFormatError(
                    f"Corrupt ensemble: node array {name!r} has "
                    f"{getattr(self, name).shape[0]} entries, expected {n_nodes}."
                )
        off = self.tree_offsets
        n_trees = off.shape[0] - 1
        if n_trees < 1:
            raise ModelFormatError("The model has no trees.")
        if off[0] != 0 or off[-1] != n_nodes or np.any(np.diff(off) < 1):
            raise ModelFormatError(
                "Corrupt ensemble: tree_offsets must rise from 0 to the node count."
            )
        for name in _TREE_ARRAYS:
            if getattr(self, name).shape[0] != n_trees:
                raise ModelFormatError(
                    f"Corrupt ensemble: {name!r} has {getattr(self, name).shape[0]} entries "
                    f"for {n_trees} trees."
                )
        n_out = self.base_margin.shape[0]
        if n_out < 1:
            raise ModelFormatError("Corrupt ensemble: base_margin is empty.")
        if not np.all(np.isfinite(self.base_margin)):
            raise ModelFormatError("Corrupt ensemble: base_margin is not finite.")
        if np.any(self.tree_group < 0) or np.any(self.tree_group >= n_out):
            raise ModelFormatError(f"Corrupt ensemble: tree_group outside [0, {n_out}).")
        if np.any(np.diff(self.tree_iteration) < 0) or self.tree_iteration[0] < 0:
            raise ModelFormatError(
                "Corrupt ensemble: tree_iteration must be non-decreasing from 0."
            )
        if not np.all(np.isfinite(self.learning_rate)) or np.any(self.learning_rate <= 0):
            raise ModelFormatError("learning_rate must be positive and finite for every tree.")
        if not np.isfinite(self.reg_lambda) or self.reg_lambda < 0:
            raise ModelFormatError(f"reg_lambda must be finite and >= 0, got {self.reg_lambda}.")
        if self.decision_rule not in DECISION_RULES:
            raise ModelFormatError(
                f"Unknown decision_rule {self.decision_rule!r}; expected one of "
                f"{sorted(DECISION_RULES)}."
            )
        p = len(self.feature_names)
        if p < 1:
            raise ModelFormatError("The model has no features.")
        depth = np.zeros(n_trees, dtype=np.int64)
        code, node = routing.check_structure(self.left, self.right, off, depth)
        if code:
            tree = int(np.searchsorted(off, node, side="right") - 1)
            what = {
                1: "has a child index outside its tree",
                2: "has only one child",
                3: "is reached twice from the root (a cycle or a shared child)",
                4: "is not reachable from its tree's root",
                5: "points back at its tree's root",
            }[code]
            raise ModelFormatError(f"Corrupt ensemble: node {node} (tree {tree}) {what}.")
        object.__setattr__(self, "max_depth", int(depth.max()))
        object.__setattr__(self, "_tree_depth", depth)
        if n_nodes >= 2**29:
            raise UnsupportedModelError(
                f"Models with {n_nodes} nodes (>= 2**29) are not supported."
            )
        inner = self.left >= 0
        f = self.feature[inner]
        if np.any(f < 0) or np.any(f >= p):
            raise ModelFormatError(f"Corrupt ensemble: split feature outside [0, {p}).")
        st = self.split_type[inner]
        if np.any((st < 0) | (st > 2)):
            raise ModelFormatError("Corrupt ensemble: unknown split_type.")
        if np.any((self.missing_type < 0) | (self.missing_type > 2)):
            raise ModelFormatError("Corrupt ensemble: unknown missing_type.")
        num = inner & (self.split_type == NUMERIC)
        thr = self.threshold[num]
        # LightGBM writes +-inf thresholds (x <= inf separates NaN from every number)
        if np.any(np.isnan(thr)) or (
            self.decision_rule != "float64 <=" and not np.all(np.isfinite(thr))
        ):
            raise ModelFormatError(
                "Corrupt ensemble: a numeric split has a non-finite threshold (only LightGBM "
                "writes +-inf; a split at NaN sends every value the same way)."
            )
        if not np.all(np.isfinite(self.value[~inner])):
            raise ModelFormatError("Corrupt ensemble: a leaf value is not finite.")
        co = self.cat_offsets
        if (
            co.shape[0] != n_nodes + 1
            or co[0] != 0
            or co[-1] != self.cat_words.shape[0]
            or np.any(np.diff(co) < 0)
        ):
            raise ModelFormatError("Corrupt ensemble: cat_offsets do not index cat_words.")
        for k in self.categories:
            if not 0 <= k < p:
                raise ModelFormatError(f"Corrupt ensemble: categories given for feature {k}.")

    def _make_bound(self) -> np.ndarray:
        thr = np.where(np.isnan(self.threshold), 0.0, self.threshold)
        if self.decision_rule == "float32 <":
            return float32_lt_bound(thr.astype(np.float32))
        if self.decision_rule == "float32 <=":
            return float32_le_bound(thr.astype(np.float32))
        return thr.copy()

    @property
    def _float32_input(self) -> bool:
        return self.decision_rule.startswith("float32")

    def _nodes(self) -> Nodes:
        """The node arrays as the kernels take them."""
        return Nodes(
            left=self.left,
            right=self.right,
            feature=self.feature,
            bound=self._bound,
            split_type=self.split_type,
            default_left=self.default_left,
            missing_type=self.missing_type,
            cat_offsets=self.cat_offsets,
            cat_words=self.cat_words,
            value=self.value,
            leaf_id=self.leaf_id,
            tree_offsets=self.tree_offsets,
            tree_group=self.tree_group,
        )

    @functools.cached_property
    def _layout(self) -> Layout:
        """The top levels of every tree as complete binary trees (see kernels.routing)."""
        top = np.minimum(self._tree_depth, routing.TOP_DEPTH)
        top_off = np.zeros(self.n_trees + 1, dtype=np.int64)
        top_off[1:] = np.cumsum((np.int64(1) << top) - 1)
        bot_off = np.zeros(self.n_trees + 1, dtype=np.int64)
        bot_off[1:] = np.cumsum(np.int64(1) << top)
        used = np.unique(self.feature[self.left >= 0]).astype(np.int64)
        if used.size == 0:
            used = np.zeros(1, dtype=np.int64)
        col_of = np.zeros(self.n_features, dtype=np.int64)
        col_of[used] = np.arange(used.size)
        meta = np.zeros(int(top_off[-1]) + 1, dtype=np.int64)
        tbound = np.zeros(int(top_off[-1]) + 1, dtype=np.float64)
        bottom = np.zeros(int(bot_off[-1]), dtype=np.int64)
        flags = np.zeros(self.n_trees, dtype=np.int64)
        routing.build_top_layout(
            self._nodes(),
            col_of,
            used.size,
            top,
            top_off,
            bot_off,
            meta,
            tbound,
            bottom,
            flags,
            self._tree_depth,
            oblivious.FAST_PATH,
        )
        return Layout(
            top_depth=top,
            top_off=top_off,
            bot_off=bot_off,
            meta=meta,
            tbound=tbound,
            bottom=bottom,
            tree_flags=flags,
            used=used,
        )

    @functools.cached_property
    def _node_tree(self) -> np.ndarray:
        """The tree of every node."""
        return np.repeat(np.arange(self.n_trees), np.diff(self.tree_offsets))

    # ------------------------------------------------------------------ sizes
    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return int(self.tree_offsets.shape[0] - 1)

    @property
    def n_nodes(self) -> int:
        """Number of nodes over all trees."""
        return int(self.left.shape[0])

    @property
    def n_features(self) -> int:
        """Number of input features."""
        return len(self.feature_names)

    @property
    def n_outputs(self) -> int:
        """Number of outputs (classes of a multiclass model, else 1)."""
        return int(self.base_margin.shape[0])

    @property
    def n_iterations(self) -> int:
        """Number of boosting rounds."""
        return int(self.tree_iteration[-1]) + 1

    def __repr__(self) -> str:
        # with an input map (CatBoost's categorical splits) the kernels read more columns than
        # the features results are reported for: name both counts
        mapped = "" if self.input_map is None else f", n_output_features={len(self.output_names)}"
        return (
            f"TreeEnsemble(source={self.source!r}, objective={self.objective!r}, "
            f"n_trees={self.n_trees}, n_features={self.n_features}{mapped}, "
            f"n_outputs={self.n_outputs}, max_depth={self.max_depth})"
        )

    # ------------------------------------------------------------------ prediction
    def _tree_range(self, iteration_range: tuple[int, int] | None) -> tuple[int, int]:
        if iteration_range is None:
            return 0, self.n_trees
        start, stop = (int(v) for v in iteration_range)
        if stop == 0:
            stop = self.n_iterations
        if not 0 <= start <= stop <= self.n_iterations:
            raise InputError(
                f"iteration_range {iteration_range} outside the model's "
                f"{self.n_iterations} iterations."
            )
        lo = int(np.searchsorted(self.tree_iteration, start, side="left"))
        hi = int(np.searchsorted(self.tree_iteration, stop, side="left"))
        return lo, hi

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the features that attributions and importances are reported for."""
        return self.feature_names if self.input_map is None else self.input_map.output_names

    def _to_output(self, per_feature: np.ndarray, axis: int = 0) -> np.ndarray:
        """Credit an array over the kernels' columns (on ``axis``) to the output features."""
        if self.input_map is None:
            return per_feature
        moved = np.moveaxis(per_feature, axis, -1) @ self.input_map.credit
        return np.moveaxis(moved, -1, axis)

    def _column_names(self) -> tuple[str, ...]:
        """A display name for every kernel column."""
        return self.feature_names if self.input_map is None else self.input_map.column_names

    def _blocks(self, X: Any) -> tuple[int, Any]:
        if self.input_map is not None:
            return _input.as_rows(
                self.input_map.transform(X), self.n_features, self.feature_names, False, None
            )
        used = np.zeros(self.n_features, dtype=bool)  # columns no split reads are not converted
        used[self.feature[self.left >= 0]] = True
        return _input.as_rows(
            X, self.n_features, self.feature_names, self.named, self.categories or None, used
        )

    def predict_margin(
        self, X: Any, *, iteration_range: tuple[int, int] | None = None
    ) -> np.ndarray:
        """Raw (margin) prediction, bit-exact with the source booster.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
            Rows to predict. DataFrame columns are matched by name; absent sparse entries and
            NaN are missing values.
        iteration_range : tuple of int, optional
            Boosting rounds ``[start, stop)`` to use, as in XGBoost (``stop=0`` means all);
            the base margin is always included.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        lo, hi = self._tree_range(iteration_range)
        n, blocks = self._blocks(X)
        out = np.empty((n, self.n_outputs), dtype=np.float64)
        for start, block in blocks:
            rows = out[start : start + block.shape[0]]
            f32 = self._float32_input
            self._route(_MARGIN, block, lo, hi, self.base_margin, self.float32_sum, f32, rows)
            if self._linear is not None:
                self._add_linear(block, lo, hi, rows)
        return out[:, 0] if self.n_outputs == 1 else out

    def _add_linear(self, block: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
        """Add the linear leaf models (LightGBM linear trees) of trees ``lo:hi`` to ``out``:
        per row, the reached leaf's const - value plus its coefficients times the features,
        or nothing if one of those features is NaN (the leaf value stands, as in LightGBM)."""
        tree, leaf, delta, feats, coefs = self._linear
        tables = {}  # per linear tree in range: leaf number -> entry (-1: a constant leaf)
        max_leaf = self._max_leaf_id()
        for t in np.unique(tree[(tree >= lo) & (tree < hi)]):
            mine = np.flatnonzero(tree == t)
            table = np.full(int(max_leaf[t]) + 1, -1, dtype=np.int64)
            table[leaf[mine]] = mine
            tables[int(t)] = table
        if not tables:
            return
        nodes = self._nodes()
        for c0 in range(0, block.shape[0], 4096):
            part = block[c0 : c0 + 4096]
            leaves = np.empty((part.shape[0], hi - lo), dtype=np.int32)
            routing.leaf_index_serial(
                part, nodes, self._layout, lo, hi, self._float32_input, leaves
            )
            X = part.astype(np.float64, copy=False)
            rows = np.arange(X.shape[0])
            for t, table in tables.items():
                e = table[leaves[:, t - lo]]
                ok = e >= 0
                f, c = feats[e[ok]], coefs[e[ok]]
                x = X[rows[ok, None], np.maximum(f, 0)]
                used = f >= 0
                terms = np.where(used, c * x, 0.0)
                nan = np.any(used & np.isnan(x), axis=1)
                add = delta[e[ok]] + terms.sum(axis=1)
                out[ok, self.tree_group[t]] += np.where(nan, 0.0, add)

    def leaf_index(self, X: Any, *, iteration_range: tuple[int, int] | None = None) -> np.ndarray:
        """The booster's leaf number reached by every row in every tree.

        Parameters
        ----------
        X : array-like, DataFrame or scipy sparse matrix
            Rows to route, as for ``predict_margin``.
        iteration_range : tuple of int, optional
            Boosting rounds ``[start, stop)`` to use.

        Returns
        -------
        ndarray of int32, shape (n_samples, n_trees)
        """
        lo, hi = self._tree_range(iteration_range)
        n, blocks = self._blocks(X)
        out = np.empty((n, hi - lo), dtype=np.int32)
        for start, block in blocks:
            rows = out[start : start + block.shape[0]]
            self._route(_LEAF_INDEX, block, lo, hi, self._float32_input, rows)
        return out

    def _route(self, kernels: tuple, block: np.ndarray, lo: int, hi: int, *args: Any) -> None:
        """Run a routing kernel on ``block`` and trees ``lo:hi``: ``kernels`` is the parallel
        kernel and its serial twin (see ``_pick``); ``args`` follow the kernel's node arrays,
        layout and tree range."""
        kernel = self._pick(*kernels, block, hi - lo)
        kernel(block, self._nodes(), self._layout, lo, hi, *args)

    @staticmethod
    def _pick(parallel, serial, block: np.ndarray, n_trees: int):
        """The serial kernel where waking the thread pool would cost more than the work."""
        return serial if block.shape[0] * max(n_trees, 1) < _SERIAL_WORK else parallel

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the ensemble to ``path`` as a NumPy ``.npz`` archive (no pickle).

        Parameters
        ----------
        path : str or path-like
            Destination; ``.npz`` is appended by NumPy when missing.

        Notes
        -----
        An ensemble that routes rows through its booster (an ``input_map``: CatBoost's
        categorical splits) is saved with the document its input map is rebuilt from (the
        input map's ``saved_state()``: a kind and a JSON document, the booster's JSON model),
        in format version 3, which treeinner before it refuses instead of reading it without
        the routing. ``load_npz`` rebuilds the input map through the rebuilder the adapter
        registered for that kind (``register_input_map``).

        Raises
        ------
        ValueError
            For an input map that cannot be saved (no ``saved_state``).
        """
        saved = None
        if self.input_map is not None:
            state = getattr(self.input_map, "saved_state", None)
            if state is None:
                raise InputError(
                    "This ensemble routes rows through its booster (CatBoost categorical "
                    "splits) with an input map that cannot be saved; save the booster's model "
                    "instead."
                )
            saved = state()
        arrays = {n: getattr(self, n) for n in {**_NODE_ARRAYS, **_TREE_ARRAYS, **_OTHER_ARRAYS}}
        arrays["grad_params"] = self.grad_params
        if self.linear_leaves is not None:
            for k in _LINEAR_ARRAYS:
                arrays[f"linear_{k}"] = getattr(self.linear_leaves, k)
        meta = {
            "format": "treeinner.TreeEnsemble",
            "format_version": FORMAT_VERSION,
            "feature_names": list(self.feature_names),
            "categories": {
                str(k): [_json_scalar(c) for c in v] for k, v in self.categories.items()
            },
        }
        for f in fields(self):
            if f.name not in arrays and f.name not in meta and f.name != "input_map":
                meta[f.name] = getattr(self, f.name)
        meta["linear_leaves"] = self.linear_leaves is not None
        meta["inexact"] = list(self.inexact)
        if saved is not None:
            kind, document = saved
            meta["format_version"] = _INPUT_MAP_FORMAT_VERSION
            meta["input_map"] = str(kind)
            doc = json.dumps(document, default=_json_scalar).encode()
            arrays["input_map_document"] = np.frombuffer(doc, dtype=np.uint8)
        blob = json.dumps(meta, default=_json_scalar).encode()
        np.savez_compressed(path, __meta__=np.frombuffer(blob, dtype=np.uint8), **arrays)

    @classmethod
    def load_npz(cls, path: str | os.PathLike) -> TreeEnsemble:
        """Read an ensemble written by ``save`` (never unpickling).

        An ensemble saved with an input map gets it rebuilt from the stored document by the
        rebuilder its adapter registered (``register_input_map``; CatBoost's reloads the
        model's JSON export into catboost, which it then needs).

        Parameters
        ----------
        path : str or path-like

        Returns
        -------
        TreeEnsemble

        Raises
        ------
        ValueError
            For a file that is not a saved ensemble, is corrupt, or was saved by another
            format version; or whose input map cannot be rebuilt.
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise ModelFormatError(f"{os.fspath(path)!r} is not a readable .npz file: {e}") from e
        if "__meta__" not in data:
            raise ModelFormatError(
                f"{os.fspath(path)!r} is an .npz file but not a saved TreeEnsemble."
            )
        try:
            meta = json.loads(data.pop("__meta__").tobytes().decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelFormatError(f"{os.fspath(path)!r}: corrupt metadata ({e}).") from e
        if meta.pop("format", None) != "treeinner.TreeEnsemble":
            raise ModelFormatError(f"{os.fspath(path)!r} is not a saved TreeEnsemble.")
        version = meta.pop("format_version", None)
        if version == 1:
            raise ModelFormatError(
                f"{os.fspath(path)!r} was saved by an earlier treeinner (TreeEnsemble format "
                f"version 1), which did not store the booster conventions this version reads "
                f"(format version {FORMAT_VERSION}). Re-save the ensemble from the booster: "
                "treeinner.from_model(booster).save(path)."
            )
        kind = meta.pop("input_map", None)
        document = data.pop("input_map_document", None)
        if version == _INPUT_MAP_FORMAT_VERSION and (kind is None or document is None):
            raise ModelFormatError(f"{os.fspath(path)!r} lacks its input map document.")
        if version not in (FORMAT_VERSION, _INPUT_MAP_FORMAT_VERSION):
            raise ModelFormatError(f"Unsupported TreeEnsemble format version {version}.")
        meta["categories"] = {int(k): v for k, v in meta.get("categories", {}).items()}
        meta["feature_names"] = tuple(meta["feature_names"])
        meta["inexact"] = tuple(meta.get("inexact", ()))
        if meta.get("linear_leaves"):
            try:
                meta["linear_leaves"] = {k: data.pop(f"linear_{k}") for k in _LINEAR_ARRAYS}
            except KeyError as e:
                raise ModelFormatError(f"{os.fspath(path)!r} lacks the linear leaves ({e}).") from e
        else:
            meta["linear_leaves"] = None
        known = {f.name for f in fields(cls)} - {"input_map"}
        missing = known - set(data) - set(meta)
        if missing:
            raise ModelFormatError(f"{os.fspath(path)!r} lacks {sorted(missing)}.")
        kwargs = {k: v for k, v in {**data, **meta}.items() if k in known}
        ens = cls(**kwargs)
        if kind is None:
            return ens
        rebuild = _INPUT_MAP_LOADERS.get(kind)
        if rebuild is None:
            raise ModelFormatError(
                f"{os.fspath(path)!r} routes rows through a {kind!r} input map, which no "
                "adapter has registered (import treeinner first)."
            )
        try:
            doc = json.loads(document.tobytes().decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelFormatError(f"{os.fspath(path)!r}: corrupt input map document ({e}).") from e
        return cls(**kwargs, input_map=rebuild(doc, ens))

    def replace(self, **changes: Any) -> TreeEnsemble:
        """A copy with some fields replaced (validated again).

        Parameters
        ----------
        **changes
            Field values to replace, e.g. ``reg_lambda=1.0``. Nothing else is derived again:
            the booster conventions (``grad_objective``, ``grad_params``, ``node_weight``, ...)
            stay as they are unless replaced too (changing ``objective`` renames it only).

        Returns
        -------
        TreeEnsemble
        """
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        kwargs.update(changes)
        return type(self)(**kwargs)


#: The format version of a saved ensemble with an input map (its document stored with it).
_INPUT_MAP_FORMAT_VERSION = 3

#: How saved input maps are rebuilt, by kind: ``rebuild(document, ensemble)`` returns the
#: input map of ``ensemble`` (loaded without it) from the document ``saved_state()`` gave.
_INPUT_MAP_LOADERS: dict[str, Any] = {}


def register_input_map(kind: str, rebuild: Any) -> None:
    """Register how an adapter's input map of ``kind`` is rebuilt when a saved ensemble is
    loaded: ``rebuild(document, ensemble) -> input_map``, raising ValueError when the
    document does not describe the ensemble's trees (the format layer never imports the
    adapters; they register themselves)."""
    _INPUT_MAP_LOADERS[kind] = rebuild


def _json_scalar(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    raise InputError(f"Cannot store {type(v).__name__} in a TreeEnsemble file.")
