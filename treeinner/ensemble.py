"""The common tree format: every booster's model as one validated set of flat arrays."""

from __future__ import annotations

import functools
import json
import lzma
import os
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from . import _input
from ._dask import is_dask, map_rows
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


_NO_DEFAULT_GRADIENT = (
    "This ensemble has {n} outputs and was built without a grad_objective (the default, "
    "squared error, has one output); build it with its objective's grad_objective for the "
    "methods that need gradients."
)
#: Leaf values and base margins beyond float32's range are corruption (no booster writes
#: them; margins and attributions of such values lose every digit).
MAX_VALUE = float(np.finfo(np.float32).max)
#: Node weights (hessian sums, row counts) beyond this are corruption.
MAX_WEIGHT = 1e200
_STR_FIELDS = ("objective", "decision_rule", "source", "source_version", "no_gradient")
_BOOL_FIELDS = ("named", "float32_sum", "reverse_levels", "l2_scaled_by_mean_weight")


def _owned_array(name: str, value: Any, dtype: Any) -> np.ndarray:
    """``value`` as an owned, read-only, 1-D array of ``dtype``; a ModelFormatError naming
    ``name`` for anything else (other dimensions, non-numbers, non-integers or values outside
    an integer dtype)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise ModelFormatError(f"Corrupt ensemble: {name} is not an array ({e}).") from e
    if raw.ndim != 1:
        raise ModelFormatError(f"TreeEnsemble.{name} must be 1-D, got shape {raw.shape}.")
    if raw.size and raw.dtype.kind not in "biuf":
        raise ModelFormatError(
            f"Corrupt ensemble: {name} must be an array of numbers, got dtype {raw.dtype}."
        )
    if np.dtype(dtype).kind in "iu" and raw.size:
        if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw))):
            raise ModelFormatError(f"Corrupt ensemble: {name} must hold integers.")
        info = np.iinfo(dtype)
        if raw.min() < info.min or raw.max() > info.max:
            raise ModelFormatError(f"Corrupt ensemble: {name} has values outside {dtype}.")
    arr = np.array(raw, dtype=dtype, copy=True, order="C")  # owned, then frozen
    arr.setflags(write=False)
    return arr


def _str_tuple(name: str, value: Any, numbers: bool) -> tuple[str, ...]:
    """``value`` (a list or tuple of str; with ``numbers``, numbers too, as column labels) as a
    tuple of str."""
    ok = (str, int, float, np.number) if numbers else (str,)
    if not isinstance(value, (list, tuple, np.ndarray)) or not all(
        isinstance(v, ok) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        kind = "str (or number)" if numbers else "str"
        raise ModelFormatError(f"{name} must be a list of {kind}, got {value!r}.")
    return tuple(str(v) for v in value)


def _feature_index(key: Any) -> int | None:
    """A category key as a feature index (an int, or its decimal str as JSON stores it)."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return int(key)
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    return None


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
        Training hessian sum of each node (NaN where the booster does not store it): finite
        and >= 0, or NaN for all nodes of a tree; 0 at an inner node only inside an empty
        subtree (its children weigh 0 too; never at a root).
    count : ndarray of float64
        Training row count of each node (NaN where unknown), under the same rules as
        ``cover``. CatBoost stores sample-weight sums, which are the counts when training had
        no sample weights.
    gain : ndarray of float64
        Split gain as stored by the booster (finite, negative allowed), 0 at leaves; NaN at
        every inner node of a booster that stores none (CatBoost).
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
        Extra per-tree weight already folded into ``value`` (DART; finite, >= 0), 1 otherwise.
    base_margin : ndarray of float64, shape (n_outputs,)
        Intercept of each output in margin space; one output for a single-output
        ``grad_objective``, at least 2 for softmax and one-vs-all.
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
        Training category values per feature index, for coding pandas categorical columns:
        a list of distinct strings or numbers per feature.
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
        ``ShapValues`` on SymmetricTree models); prediction does not depend on it. True claims
        that every tree is oblivious (complete, in level order, one split per level), which is
        checked.
    grad_objective : int, optional
        The kernel objective whose per-row gradient and hessian TreeInner, ForestInner, the
        unbiased gain and node values from data use (a code of ``treeinner._format``:
        ``SQUARED`` ... ``OVA``), or -1 when the objective has no gradient here.
        ``objective`` is only the booster's name for it. A single-output objective needs
        exactly one output (``base_margin``), softmax and one-vs-all at least two. By default
        ``SQUARED`` for an ensemble of one output and -1 (with a ``no_gradient`` saying so)
        for more, as squared error has one output.
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
    booster_value, booster_base : ndarray of float64, optional
        The node values (one per node) and base margin (one per output) the booster itself
        sums, where they differ from ``value`` and ``base_margin``: LightGBM's first trees
        carry the boost_from_average intercept, which ``value`` moves to ``base_margin`` so that
        node values are the l2 solution, while ``predict_margin`` must add the booster's own
        values in its order to be bit-exact (``init + (v - init)`` is not always ``v``). Both
        or neither (None: the booster sums ``base_margin`` and ``value``).
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
    grad_objective: int | None = None
    grad_params: np.ndarray = field(default_factory=default_grad_params)
    no_gradient: str = ""
    l2_scaled_by_mean_weight: bool = False
    linear_leaves: LinearLeaves | None = None
    booster_value: np.ndarray | None = None
    booster_base: np.ndarray | None = None
    input_map: Any = field(default=None, compare=False, repr=False)
    # derived in __post_init__ from the fields above (not arguments, not saved)
    max_depth: int = field(init=False, repr=False, compare=False)
    _tree_depth: np.ndarray = field(init=False, repr=False, compare=False)
    _linear: tuple | None = field(init=False, repr=False, compare=False)
    _bound: np.ndarray = field(init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ construction
    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name, dtype in {**_NODE_ARRAYS, **_TREE_ARRAYS, **_OTHER_ARRAYS}.items():
            set_(self, name, _owned_array(name, getattr(self, name), dtype))
        self._check_metadata()
        self._validate()
        self._validate_node_stats()
        self._validate_conventions()
        self._check_booster_values()
        if self.reverse_levels:
            self._check_oblivious_claim()
        set_(self, "_linear", self._make_linear())
        set_(self, "_bound", self._make_bound())
        self._bound.setflags(write=False)

    def _max_leaf_id(self) -> np.ndarray:
        """The largest leaf number of every tree."""
        out = np.full(self.n_trees, -1, dtype=np.int64)
        np.maximum.at(out, self._node_tree, self.leaf_id)
        return out

    # ------------------------------------------------------------------ validation
    def _check_metadata(self) -> None:
        """Check the types of the metadata fields and normalise them (plain bools, tuples,
        float ``reg_lambda``, int category keys)."""
        set_ = object.__setattr__
        for name in _STR_FIELDS:
            v = getattr(self, name)
            if not isinstance(v, str):
                raise ModelFormatError(f"{name} must be a str, got {type(v).__name__} {v!r}.")
        for name in _BOOL_FIELDS:
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise ModelFormatError(f"{name} must be True or False, got {v!r}.")
            set_(self, name, bool(v))
        for name in ("objective_params", "params"):
            v = getattr(self, name)
            if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
                raise ModelFormatError(f"{name} must be a dict with str keys, got {v!r}.")
        lam = self.reg_lambda
        if isinstance(lam, (bool, np.bool_)) or not isinstance(lam, (int, float, np.number)):
            raise ModelFormatError(f"reg_lambda must be a number, got {lam!r}.")
        set_(self, "reg_lambda", float(lam))
        for name in ("feature_names", "inexact"):
            set_(self, name, _str_tuple(name, getattr(self, name), name == "feature_names"))
        set_(self, "categories", self._checked_categories())

    def _checked_categories(self) -> dict[int, list]:
        """``categories`` with int keys (features of the model) and list values of distinct
        JSON scalars (strings, numbers, booleans; no NaN)."""
        cats, p = self.categories, len(self.feature_names)
        if not isinstance(cats, dict):
            raise ModelFormatError(f"categories must be a dict, got {type(cats).__name__}.")
        out: dict[int, list] = {}
        for k, v in cats.items():
            j = _feature_index(k)
            if j is None or not 0 <= j < p:
                raise ModelFormatError(f"Corrupt ensemble: categories given for feature {k!r}.")
            if not isinstance(v, (list, tuple, np.ndarray)) or getattr(v, "ndim", 1) != 1:
                raise ModelFormatError(
                    f"Corrupt ensemble: categories of feature {j} must be a list, got {v!r}."
                )
            vals = [x.item() if isinstance(x, np.generic) else x for x in v]
            for x in vals:
                if not isinstance(x, (str, int, float)) or x != x:
                    raise ModelFormatError(
                        f"Corrupt ensemble: categories of feature {j} hold {x!r}; a category "
                        "is a string or a number (not NaN)."
                    )
            if len(set(vals)) != len(vals):
                dup = next(x for x, c in Counter(vals).items() if c > 1)
                raise ModelFormatError(
                    f"Corrupt ensemble: categories of feature {j} list {dup!r} twice."
                )
            out[j] = vals
        return out

    def _check_leaf_values(self, name: str, inner: np.ndarray) -> None:
        """Node array ``name`` (``value``, ``booster_value``) is finite and within
        +-MAX_VALUE at every leaf (``~inner``); a ModelFormatError naming the node if not."""
        leaf_value = np.where(inner, 0.0, getattr(self, name))
        bad = np.flatnonzero(~(np.abs(leaf_value) <= MAX_VALUE))
        if bad.size:
            raise self._node_error(
                name,
                bad[0],
                f"leaf values are finite and within +-{MAX_VALUE:g} (no booster writes more; "
                "attributions of such values would lose every digit)",
            )

    def _node_error(self, name: str, node: int, rule: str) -> ModelFormatError:
        """The error for node ``node`` (global index) whose ``name`` breaks ``rule``."""
        off = self.tree_offsets
        t = int(np.searchsorted(off, node, side="right") - 1)
        v = getattr(self, name)[node]
        return ModelFormatError(
            f"Corrupt ensemble: tree {t} node {int(node - off[t])} (node {int(node)} of the "
            f"ensemble): {name} is {float(v)!r}; {rule}."
        )

    def _check_booster_values(self) -> None:
        """``booster_value`` and ``booster_base`` as owned float64 arrays of the node and
        output counts, finite and within +-MAX_VALUE (at the leaves; both or neither)."""
        bv, bb = self.booster_value, self.booster_base
        if bv is None and bb is None:
            return
        if bv is None or bb is None:
            raise ModelFormatError(
                "Corrupt ensemble: booster_value and booster_base come together (one is None)."
            )
        bv = _owned_array("booster_value", bv, np.float64)
        bb = _owned_array("booster_base", bb, np.float64)
        if bv.shape != self.value.shape or bb.shape != self.base_margin.shape:
            raise ModelFormatError(
                f"Corrupt ensemble: booster_value has {bv.shape[0]} entries for "
                f"{self.value.shape[0]} nodes, booster_base {bb.shape[0]} for "
                f"{self.base_margin.shape[0]} outputs."
            )
        if not np.all(np.abs(bb) <= MAX_VALUE):
            raise ModelFormatError(
                f"Corrupt ensemble: booster_base is not finite or beyond +-{MAX_VALUE:g}: "
                f"{bb.tolist()}."
            )
        object.__setattr__(self, "booster_value", bv)
        object.__setattr__(self, "booster_base", bb)
        self._check_leaf_values("booster_value", self.left >= 0)

    def _validate_node_stats(self) -> None:
        """Signs and finiteness of the node weights, split gains and tree weights."""
        inner = self.left >= 0
        for name in ("cover", "count"):
            self._check_weights(name, inner)
        gain = self.gain
        bad = np.flatnonzero(np.isinf(gain))
        if bad.size:
            raise self._node_error("gain", bad[0], "split gains are finite")
        nan = np.isnan(gain) & inner
        if nan.any() and np.any(inner & ~nan):
            raise self._node_error(
                "gain", np.flatnonzero(nan)[0], "NaN (no stored gain) must hold for every split"
            )
        tw = self.tree_weight
        bad = np.flatnonzero(~(np.isfinite(tw) & (tw >= 0)))
        if bad.size:
            raise ModelFormatError(
                f"Corrupt ensemble: tree {bad[0]}: tree_weight is {float(tw[bad[0]])!r}; tree "
                "weights (DART) are finite and >= 0."
            )

    def _check_leaf_ids(self, inner: np.ndarray) -> None:
        """Every leaf's number (``leaf_id``: what leaf-index prediction returns, and how linear
        leaves are found) is >= 0 and unique within its tree."""
        leaves = np.flatnonzero(~inner)
        ids = self.leaf_id[leaves]
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            raise self._node_error("leaf_id", leaves[bad[0]], "a leaf's number is >= 0")
        key = self._node_tree[leaves].astype(np.int64) * (1 << 32) + ids
        order = np.argsort(key, kind="stable")
        dup = np.flatnonzero(np.diff(key[order]) == 0)
        if dup.size:
            raise self._node_error(
                "leaf_id", leaves[order[dup[0] + 1]], "two leaves of a tree share this number"
            )

    def _check_weights(self, name: str, inner: np.ndarray) -> None:
        """``cover`` or ``count``: finite and >= 0, or NaN (not stored) for whole trees; 0 at
        an inner node only within an empty subtree (TreeSHAP divides by it)."""
        w = getattr(self, name)
        bad = np.flatnonzero(np.isinf(w) | (w < 0) | (w > MAX_WEIGHT))
        if bad.size:
            raise self._node_error(
                name, bad[0], f"node weights are finite, >= 0 and at most {MAX_WEIGHT:g}"
            )
        nan = np.isnan(w)
        if nan.any():
            starts = self.tree_offsets[:-1]
            part = np.logical_or.reduceat(nan, starts) & ~np.logical_and.reduceat(nan, starts)
            if part.any():
                t = int(np.argmax(part))
                node = starts[t] + int(np.argmax(nan[starts[t] : self.tree_offsets[t + 1]]))
                raise self._node_error(
                    name, node, "NaN (not stored) must hold for all of a tree's nodes or none"
                )
        # an empty subtree (CatBoost's oblivious trees have them) weighs 0 throughout; a split
        # weighing 0 above a child that does not (or at a root) makes TreeSHAP divide by 0
        zero = inner & (w == 0)
        if zero.any():
            full = (w[np.maximum(self.left, 0)] > 0) | (w[np.maximum(self.right, 0)] > 0)
            root = np.zeros(zero.shape[0], dtype=bool)
            root[self.tree_offsets[:-1]] = True
            bad = np.flatnonzero(zero & (full | root))
            if bad.size:
                raise self._node_error(
                    name,
                    bad[0],
                    "a split weighing 0 must be inside an empty subtree (its "
                    "children weigh 0 too, and it is not a root); TreeSHAP divides by it",
                )
        # a child outweighing its parent (beyond float32 rounding of the parent's sum) is no
        # training statistic: TreeSHAP's path fractions would leave [0, 1]
        child = np.concatenate([self.left[inner], self.right[inner]])
        parent = np.concatenate([np.flatnonzero(inner)] * 2)
        over = w[child] > w[parent] * (1.0 + 1e-6) + 1e-12
        if over.any():
            k = int(np.argmax(over))
            raise self._node_error(
                name,
                child[k],
                f"it exceeds its parent's ({float(w[parent[k]])!r}, node {int(parent[k])}); a "
                "node weighs at most what its parent does",
            )

    def _check_oblivious_claim(self) -> None:
        """With ``reverse_levels`` (CatBoost SymmetricTree), every tree must be oblivious:
        complete, in heap order, every level's nodes sharing one split."""
        off, depth = self.tree_offsets, self._tree_depth
        d = np.minimum(depth, 30)
        bad = np.flatnonzero((depth > 30) | (np.diff(off) != (np.int64(2) << d) - 1))
        n = np.flatnonzero(self.left >= 0)  # in a complete tree: heap positions 0 .. 2^d - 2
        tree = self._node_tree[n]
        local = n - off[tree]
        heap = (local >= (np.int64(1) << d)[tree] - 1) | (self.left[n] != n + local + 1)
        heap |= self.right[n] != n + local + 2
        if bad.size or heap.any():
            t = int(bad[0]) if bad.size else int(tree[np.argmax(heap)])
            raise ModelFormatError(
                f"Corrupt ensemble: reverse_levels (CatBoost SymmetricTree) claims every tree "
                f"is oblivious, but tree {t} (depth {depth[t]}, {off[t + 1] - off[t]} nodes) is "
                "not a complete tree in level order."
            )
        level = np.frexp((local + 1).astype(np.float64))[1] - 1
        f = n - local + (np.int64(1) << level) - 1  # the first node of each one's level
        for name in ("feature", "threshold", "split_type", "default_left", "missing_type"):
            a, b = getattr(self, name)[n], getattr(self, name)[f]
            diff = (a != b) & ~(np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a != b
            if not diff.any():
                continue
            k = int(np.argmax(diff))
            raise ModelFormatError(
                f"Corrupt ensemble: reverse_levels (CatBoost SymmetricTree) claims every tree "
                f"is oblivious, but tree {tree[k]} level {level[k]}: node {local[k]} has "
                f"{name} {a[k].item()!r} and node {f[k] - off[tree[k]]} (the level's first) "
                f"{b[k].item()!r}; an oblivious tree's levels share one split."
            )
        self._check_level_sets(n, f)

    def _check_level_sets(self, n: np.ndarray, f: np.ndarray) -> None:
        """The category sets of inner nodes ``n`` equal those of their levels' first ``f``."""
        co, words = self.cat_offsets, self.cat_words
        ln, lf = co[n + 1] - co[n], co[f + 1] - co[f]
        if not (np.any(ln) or np.any(lf)):
            return
        same = ln == lf
        m = np.flatnonzero(same & (ln > 0))
        total = ln[m]
        ramp = np.arange(int(total.sum())) - np.repeat(np.cumsum(total) - total, total)
        differs = (
            words[np.repeat(co[n[m]], total) + ramp] != words[np.repeat(co[f[m]], total) + ramp]
        )
        bad = ~same
        bad[m[np.unique(np.repeat(np.arange(m.size), total)[differs])]] = True
        if bad.any():
            k = int(np.argmax(bad))
            t = int(np.searchsorted(self.tree_offsets, n[k], side="right") - 1)
            raise ModelFormatError(
                f"Corrupt ensemble: reverse_levels (CatBoost SymmetricTree) claims every tree "
                f"is oblivious, but tree {t}: node {n[k] - self.tree_offsets[t]} has other "
                "categories (cat_words) than its level's first node; an oblivious tree's "
                "levels share one split."
            )

    def _validate_conventions(self) -> None:
        """Check and normalise the booster conventions (the fields after ``inexact``)."""
        set_ = object.__setattr__
        if not isinstance(self.node_weight, str) or self.node_weight not in NODE_WEIGHTS:
            raise ModelFormatError(
                f"node_weight must be one of {NODE_WEIGHTS}, got {self.node_weight!r}."
            )
        code = self.grad_objective
        if code is None:  # the default: squared error, which has one output
            code = SQUARED if self.n_outputs == 1 else -1
            if code < 0 and not self.no_gradient:
                set_(self, "no_gradient", _NO_DEFAULT_GRADIENT.format(n=self.n_outputs))
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
        if code in (SOFTMAX, OVA) and np.unique(self.tree_group).shape[0] != self.n_outputs:
            raise ModelFormatError(
                f"grad_objective {code} ({OBJECTIVE_NAMES[code]}): the ensemble has "
                f"{self.n_outputs} outputs (base_margin) but trees for only "
                f"{np.unique(self.tree_group).shape[0]} of them; every class has trees."
            )
        if code >= 0 and code not in (SOFTMAX, OVA) and self.n_outputs != 1:
            raise ModelFormatError(
                f"Corrupt ensemble: base_margin has {self.n_outputs} outputs, but grad_objective "
                f"{code} ({OBJECTIVE_NAMES[code]}) has one output."
            )
        prm = _owned_array("grad_params", self.grad_params, np.float64)
        if prm.shape != (N_PARAMS,) or not np.all(np.isfinite(prm)):
            raise ModelFormatError(
                f"grad_params must be {N_PARAMS} finite numbers, got shape {prm.shape}."
            )
        set_(self, "grad_params", prm)
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
            arrays = {
                k: _owned_array(f"linear_leaves.{k}", getattr(lin, k), dtype)
                for k, dtype in _LINEAR_ARRAYS.items()
            }
        except ModelFormatError:
            raise
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
        """Shapes, per-tree and per-output arrays, the structure of every tree, then the
        nodes (``_validate_nodes``)."""
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
        if not np.all(np.abs(self.base_margin) <= MAX_VALUE):
            raise ModelFormatError(
                f"Corrupt ensemble: base_margin is not finite or beyond +-{MAX_VALUE:g}: "
                f"{self.base_margin.tolist()}."
            )
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
        self._validate_nodes(p)

    def _validate_nodes(self, p: int) -> None:
        """The splits (features below ``p``, known kinds, directions, thresholds), the leaves
        (values, numbers) and the categorical sets' offsets, node by node."""
        n_nodes = self.left.shape[0]
        inner = self.left >= 0
        f = self.feature[inner]
        if np.any(f < 0) or np.any(f >= p):
            raise ModelFormatError(f"Corrupt ensemble: split feature outside [0, {p}).")
        st = self.split_type[inner]
        if np.any((st < 0) | (st > 2)):
            raise ModelFormatError("Corrupt ensemble: unknown split_type.")
        if np.any((self.missing_type < 0) | (self.missing_type > 2)):
            raise ModelFormatError("Corrupt ensemble: unknown missing_type.")
        bad = np.flatnonzero(self.default_left > 1)
        if bad.size:
            raise self._node_error("default_left", bad[0], "it is 0 (right) or 1 (left)")
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
        self._check_leaf_values("value", inner)
        self._check_leaf_ids(inner)
        co = self.cat_offsets
        if (
            co.shape[0] != n_nodes + 1
            or co[0] != 0
            or co[-1] != self.cat_words.shape[0]
            or np.any(np.diff(co) < 0)
        ):
            raise ModelFormatError("Corrupt ensemble: cat_offsets do not index cat_words.")

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

    def _combination_columns(self) -> dict[int, tuple[int, ...]]:
        """The kernel columns some split reads that combine several output features (a
        CatBoost CTR on a feature combination): column -> the features it is credited to."""
        if self.input_map is None:
            return {}
        credit = self.input_map.credit
        used = np.unique(self.feature[self.left >= 0])
        return {
            int(c): tuple(int(f) for f in np.flatnonzero(credit[c] > 0))
            for c in used
            if np.count_nonzero(credit[c]) > 1
        }

    def shared_credit(self) -> list[tuple[str, ...]]:
        """The groups of output features that one split's credit is shared among (a split
        on a combination of several features, credited to each equally), those split on."""
        names = self.output_names
        groups = {tuple(names[j] for j in f) for f in self._combination_columns().values()}
        return sorted(groups)

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
        inner = self.left >= 0
        used = np.zeros(self.n_features, dtype=bool)  # columns no split reads are not converted
        used[self.feature[inner]] = True
        categorical = np.zeros(self.n_features, dtype=bool)  # a category column of any other
        categorical[self.feature[inner & (self.split_type != NUMERIC)]] = True  # is refused
        return _input.as_rows(
            X,
            self.n_features,
            self.feature_names,
            self.named,
            self.categories or None,
            used,
            numeric=used & ~categorical,
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
            the booster's base margin is always included (LightGBM's intercept is in its
            first tree, as LightGBM has it: a range from round 1 leaves it out).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
            A lazy Dask array for a Dask array or DataFrame X, one chunk per partition.
        """
        lo, hi = self._tree_range(iteration_range)
        if is_dask(X):
            tail = () if self.n_outputs == 1 else (self.n_outputs,)
            return map_rows(_margin_rows, (self, iteration_range), X, tail)
        n, blocks = self._blocks(X)
        out = np.empty((n, self.n_outputs), dtype=np.float64)
        nodes, base = self._nodes(), self.base_margin
        if self.booster_value is not None and self.booster_base is not None:
            nodes, base = nodes._replace(value=self.booster_value), self.booster_base
        for start, block in blocks:
            rows = out[start : start + block.shape[0]]
            f32 = self._float32_input
            routing.predict_margin(
                block, nodes, self._layout, lo, hi, base, self.float32_sum, f32, rows
            )
            if self._linear is not None:
                self._add_linear(block, lo, hi, rows)
        return out[:, 0] if self.n_outputs == 1 else out

    def _add_linear(self, block: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
        """Add the linear leaf models (LightGBM linear trees) of trees ``lo:hi`` to ``out``:
        per row, the reached leaf's const - value plus its coefficients times the features,
        or nothing if one of those features is NaN (the leaf value stands, as in LightGBM)."""
        if self._linear is None:
            return
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
            routing.leaf_index(part, nodes, self._layout, lo, hi, self._float32_input, leaves)
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
            A lazy Dask array for a Dask array or DataFrame X, one chunk per partition.
        """
        lo, hi = self._tree_range(iteration_range)
        if is_dask(X):
            return map_rows(_leaf_rows, (self, iteration_range), X, (hi - lo,), np.int32)
        n, blocks = self._blocks(X)
        out = np.empty((n, hi - lo), dtype=np.int32)
        for start, block in blocks:
            rows = out[start : start + block.shape[0]]
            f32 = self._float32_input
            routing.leaf_index(block, self._nodes(), self._layout, lo, hi, f32, rows)
        return out

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
        if self.booster_value is not None:
            arrays["booster_value"] = self.booster_value
            arrays["booster_base"] = self.booster_base
        meta = {
            "format": "treeinner.TreeEnsemble",
            "format_version": FORMAT_VERSION,
            "feature_names": list(self.feature_names),
            "categories": {
                str(k): [_json_scalar(c) for c in v] for k, v in self.categories.items()
            },
        }
        skip = ("input_map", "booster_value", "booster_base")
        for f in fields(self):
            if not f.init:
                continue
            if f.name not in arrays and f.name not in meta and f.name not in skip:
                meta[f.name] = getattr(self, f.name)
        meta["booster_values"] = self.booster_value is not None
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

        The metadata is checked against a typed schema (``_META_SCHEMA``: every field present,
        of its JSON type, no other field) and every array for its name, dimension and dtype
        kind before the ensemble is built (and validated) from them. An ensemble saved with an
        input map gets it rebuilt from the stored document by the rebuilder its adapter
        registered (``register_input_map``; CatBoost's reloads the model's JSON export into
        catboost, which it then needs).

        Parameters
        ----------
        path : str or path-like

        Returns
        -------
        TreeEnsemble

        Raises
        ------
        ModelFormatError
            For a file that is not a saved ensemble, is corrupt, or was saved by another
            format version; or whose input map cannot be rebuilt.
        """
        where = repr(os.fspath(path))
        data: dict[str, Any] = _read_npz(path, where)
        meta = _read_meta(data.pop("__meta__"), where)
        _check_arrays(data, meta, where)
        del meta["format"], meta["format_version"]
        kind = meta.pop("input_map", None)
        document = data.pop("input_map_document", None)
        if meta["linear_leaves"]:
            meta["linear_leaves"] = {k: data.pop(f"linear_{k}") for k in _LINEAR_ARRAYS}
        else:
            meta["linear_leaves"] = None
        if meta.pop("booster_values"):
            meta["booster_value"] = data.pop("booster_value")
            meta["booster_base"] = data.pop("booster_base")
        try:
            ens = cls(**data, **meta)
            if kind is None:
                return ens
        except ModelFormatError as e:
            raise type(e)(f"{where}: {e}") from e
        rebuild = _INPUT_MAP_LOADERS.get(kind)
        if rebuild is None:
            raise ModelFormatError(
                f"{where} routes rows through a {kind!r} input map, which no adapter has "
                "registered (import treeinner first)."
            )
        if document is None:
            raise ModelFormatError(f"{where} names an input map but holds no input map document.")
        try:
            doc = json.loads(document.tobytes().decode())
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise ModelFormatError(f"{where}: corrupt input map document ({e}).") from e
        return cls(**data, **meta, input_map=rebuild(doc, ens))

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
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(changes)
        return type(self)(**kwargs)


#: The metadata of a saved ensemble: every field's JSON type(s) and, for arrays and objects,
#: the type of their items (``categories``: an array of category values per feature index).
#: ``input_map`` is in format version 3 only. Values are checked further when the ensemble is
#: built.
_META_SCHEMA: dict[str, tuple[tuple[str, ...], str | None]] = {
    "format": (("string",), None),
    "format_version": (("integer",), None),
    "feature_names": (("array",), "string"),
    "named": (("boolean",), None),
    "reg_lambda": (("number", "integer"), None),
    "objective": (("string",), None),
    "objective_params": (("object",), None),
    "decision_rule": (("string",), None),
    "float32_sum": (("boolean",), None),
    "source": (("string",), None),
    "source_version": (("string",), None),
    "categories": (("object",), "array"),
    "params": (("object",), None),
    "inexact": (("array",), "string"),
    "node_weight": (("string",), None),
    "reverse_levels": (("boolean",), None),
    "grad_objective": (("integer",), None),
    "no_gradient": (("string",), None),
    "l2_scaled_by_mean_weight": (("boolean",), None),
    "linear_leaves": (("boolean",), None),
    "booster_values": (("boolean",), None),
    "input_map": (("string",), None),
}
_JSON_KINDS = {
    "boolean": "True or False (a JSON boolean)",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def _json_kind(v: Any) -> str:
    """The JSON type of a value ``json.loads`` returned."""
    for kind, types in (
        ("boolean", bool),
        ("integer", int),
        ("number", float),
        ("string", str),
        ("array", list),
        ("object", dict),
    ):
        if isinstance(v, types):
            return kind
    return "null"


def _read_npz(path: str | os.PathLike, where: str) -> dict[str, np.ndarray]:
    """Every member of the ``.npz`` file (never unpickled) as an array."""
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):  # a bare .npy array
            raise ModelFormatError(f"{where} is a .npy array, not an .npz archive.")
        with z:
            data = {k: z[k] for k in z.files}
    # zipfile raises NotImplementedError for an unknown compression method, RuntimeError for
    # an encrypted member, lzma its own error; a corrupt header can ask for any size
    except (
        OSError,
        ValueError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        NotImplementedError,
        RuntimeError,
        MemoryError,
    ) as e:
        if isinstance(e, ModelFormatError):
            raise
        raise ModelFormatError(f"{where} is not a readable .npz file: {e}") from e
    if "__meta__" not in data:
        raise ModelFormatError(f"{where} is an .npz file but not a saved TreeEnsemble.")
    for k, v in data.items():
        if not isinstance(v, np.ndarray):
            raise ModelFormatError(f"{where}: member {k!r} is not a NumPy array.")
    return data


def _read_meta(blob: np.ndarray, where: str) -> dict[str, Any]:
    """The metadata of a saved ensemble, checked against ``_META_SCHEMA``."""
    try:
        meta = json.loads(blob.tobytes().decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelFormatError(f"{where}: corrupt metadata ({e}).") from e
    if not isinstance(meta, dict):
        raise ModelFormatError(f"{where} is not a saved TreeEnsemble (its metadata is no object).")
    if meta.get("format") != "treeinner.TreeEnsemble":
        raise ModelFormatError(
            f"{where} is not a saved TreeEnsemble (its metadata field format is "
            f"{meta.get('format')!r}, not 'treeinner.TreeEnsemble')."
        )
    version = meta.get("format_version")
    if _json_kind(version) != "integer":
        raise ModelFormatError(f"{where}: format_version must be an integer, got {version!r}.")
    if version == 1:
        raise ModelFormatError(
            f"{where} was saved by an earlier treeinner (TreeEnsemble format version 1), which "
            f"did not store the booster conventions this version reads (format version "
            f"{FORMAT_VERSION}). Re-save the ensemble from the booster: "
            "treeinner.from_model(booster).save(path)."
        )
    if version not in (FORMAT_VERSION, _INPUT_MAP_FORMAT_VERSION):
        raise ModelFormatError(f"Unsupported TreeEnsemble format version {version}.")
    expected = set(_META_SCHEMA) - ({"input_map"} if version == FORMAT_VERSION else set())
    _same_names(where, "metadata field", expected, set(meta))
    for name, (kinds, item) in _META_SCHEMA.items():
        if name not in meta:
            continue
        v = meta[name]
        items = v.values() if isinstance(v, dict) else v
        if _json_kind(v) not in kinds or (
            item is not None and any(_json_kind(x) != item for x in items)
        ):
            what = _JSON_KINDS[kinds[0]]
            if item is not None:
                what += f" of {_JSON_KINDS[item].split(' ', 1)[1]}s"
            raise ModelFormatError(f"{where}: {name} must be {what}, got {v!r}.")
    return meta


def _check_arrays(data: dict[str, np.ndarray], meta: dict[str, Any], where: str) -> None:
    """The arrays of a saved ensemble: exactly the expected names, each 1-D and numeric (the
    input map document: bytes)."""
    expected = {*_NODE_ARRAYS, *_TREE_ARRAYS, *_OTHER_ARRAYS, "grad_params"}
    if meta["linear_leaves"]:
        linear = {f"linear_{k}" for k in _LINEAR_ARRAYS}
        if not linear <= set(data):
            raise ModelFormatError(
                f"{where} lacks the linear leaves ({sorted(linear - set(data))})."
            )
        expected |= linear
    if meta["booster_values"]:
        expected |= {"booster_value", "booster_base"}
    if "input_map" in meta:
        expected.add("input_map_document")
    _same_names(where, "array", expected, set(data))
    for name, arr in data.items():
        if arr.ndim != 1:
            raise ModelFormatError(f"{where}: array {name} must be 1-D, got shape {arr.shape}.")
        ok = arr.dtype == np.uint8 if name == "input_map_document" else arr.dtype.kind in "biuf"
        if not ok:
            raise ModelFormatError(
                f"{where}: array {name} has dtype {arr.dtype}; it must hold "
                + ("bytes (uint8)." if name == "input_map_document" else "numbers.")
            )


def _same_names(where: str, what: str, expected: set[str], found: set[str]) -> None:
    """Refuse a file lacking an expected ``what`` (metadata field, array) or holding others."""
    if expected - found:
        raise ModelFormatError(f"{where} lacks {sorted(expected - found)} ({what}s).")
    if found - expected:
        raise ModelFormatError(f"{where} has unknown {what}s {sorted(found - expected)}.")


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


def _margin_rows(shared: tuple, X: Any) -> np.ndarray:
    """``predict_margin`` on one partition of a Dask collection."""
    ens, iteration_range = shared
    return ens.predict_margin(X, iteration_range=iteration_range)


def _leaf_rows(shared: tuple, X: Any) -> np.ndarray:
    """``leaf_index`` on one partition of a Dask collection."""
    ens, iteration_range = shared
    return ens.leaf_index(X, iteration_range=iteration_range)
