"""Per-split tables: the columns that say which split a row of a per-split result is."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ensemble import TreeEnsemble
from .kernels import attribution as K


def split_columns(ens: TreeEnsemble, inner: np.ndarray) -> dict[str, Any]:
    """``tree``, ``node`` (index within the tree), ``class`` (multi-output models only),
    ``feature`` (display name) and ``threshold`` (NaN for categorical splits and splits the
    booster evaluates itself) of the inner nodes ``inner`` (global node indices)."""
    tree = ens._node_tree[inner]
    cols: dict[str, Any] = {"tree": tree, "node": inner - ens.tree_offsets[tree]}
    if ens.n_outputs > 1:
        cols["class"] = ens.tree_group[tree]
    cols["feature"] = np.asarray(ens._column_names(), dtype=object)[ens.feature[inner]]
    numeric = ens.split_type[inner] == 0
    if ens.input_map is not None:  # splits the booster evaluates: no threshold to show
        numeric &= ens.feature[inner] < ens.input_map.n_raw
    cols["threshold"] = np.where(numeric, ens.threshold[inner], np.nan)
    return cols


def split_credit(
    ens: TreeEnsemble, leaf_sums: np.ndarray, values: np.ndarray, lr: np.ndarray | None
) -> np.ndarray:
    """Per output feature and output: the sum over splits t (children L, R) of
    ``(p_L S_L + p_R S_R - p_t S_t) / lr[tree]``, S the subtree sums of ``leaf_sums`` and p
    the node values ``values``, credited to t's feature and its tree's output (the inner
    product of the path attribution with per-row weights whose sums over the rows reaching
    each leaf are ``leaf_sums``); ``lr`` None: 1."""
    S = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, leaf_sums, S)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    contrib = values[L] * S[L] + values[R] * S[R] - values[inner] * S[inner]
    tree = ens._node_tree[inner]
    if lr is not None:
        contrib = contrib / lr[tree]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), contrib)
    return ens._to_output(out)
