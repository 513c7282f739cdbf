"""Per-split tables: the columns that say which split a row of a per-split result is."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ensemble import TreeEnsemble


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
