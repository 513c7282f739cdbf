"""LightGBM: the records its two readers (``_lgb_text``: model text; ``_lgb_dump``:
``dump_model()`` JSON) produce alike, and which ``lightgbm`` turns into an ensemble."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._common import Corrupt, corrupt


def bad(msg: str) -> Corrupt:
    """A corrupt-model error of the LightGBM readers."""
    return corrupt("LightGBM", msg)


class LinearModel(NamedTuple):
    """The linear models of a linear tree's leaves: per leaf, its constant, features and
    coefficients."""

    const: np.ndarray
    features: list[np.ndarray]
    coeff: list[np.ndarray]


class LgbTree(NamedTuple):
    """One tree in LightGBM's numbering: splits 0..L-2 with their children (a split's index,
    or ``~leaf``), leaves 0..L-1. ``missing`` is LightGBM's missing type of every split (0
    None, 1 Zero, 2 NaN), ``threshold`` NaN at a categorical split, whose category set is in
    ``cat_words`` (split -> uint32 bitset). ``linear``: the leaves' linear models, if any."""

    num_leaves: int
    leaf_value: np.ndarray
    leaf_weight: np.ndarray
    leaf_count: np.ndarray
    shrinkage: float
    split_feature: np.ndarray
    split_gain: np.ndarray
    threshold: np.ndarray
    left_child: np.ndarray
    right_child: np.ndarray
    categorical: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    cat_words: dict[int, np.ndarray]
    is_linear: bool = False
    linear: LinearModel | None = None


class LgbModel(NamedTuple):
    """A whole model as read: the header fields (strings from the text, JSON values from a
    dump; ``feature_names``, ``feature_infos``, ``objective``, counts), the trees, the training
    parameters (strings; empty for a dump that has none), the pandas categories and whether
    the trees' outputs are averaged (random forest)."""

    header: dict[str, Any]
    trees: list[LgbTree]
    params: dict[str, str]
    pandas_categorical: Any
    average_output: bool
