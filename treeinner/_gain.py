"""The baselines that need no attribution: the booster's stored split gain, and permutation
importance."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import _api, _input
from ._api import public
from ._staged import _weights
from .adapters import from_model
from .ensemble import TreeEnsemble
from .objectives import get_objective

__all__ = ["total_gain"]


def total_gain_scores(ens: TreeEnsemble) -> np.ndarray:
    """Stored split gains summed per output feature and output: (n_output_features,
    n_outputs)."""
    inner = np.flatnonzero(ens.left >= 0)
    tree = ens._node_tree[inner]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), ens.gain[inner])
    return ens._to_output(out)


@public
def total_gain(model: Any) -> pd.Series | pd.DataFrame:
    """The booster's stored split gains summed per feature.

    For XGBoost this is ``get_score(importance_type="total_gain")`` (features never used
    score 0).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    ens = from_model(model)
    return _api.per_output(ens, total_gain_scores(ens), "total_gain", credited=True)


def permutation_scores(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, n_repeats: int, random_state: Any
) -> np.ndarray:
    """Mean increase of the loss when a column is permuted, over ``n_repeats`` permutations:
    (n_features, 1) (the loss is over all outputs at once)."""
    if ens.input_map is not None:
        raise NotImplementedError(
            "Permutation importance is not available for models routed through their booster "
            "(CatBoost categorical splits) yet."
        )
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)):
        raise TypeError(f"n_repeats must be an int, got {type(n_repeats).__name__}.")
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be at least 1, got {n_repeats}.")
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = _input.join_blocks(blocks, ens.n_features)
    yv = obj.check_labels(y)
    w = None if sample_weight is None else _weights(sample_weight, n)
    base = obj.loss(yv, ens.predict_margin(Xd), w)
    rng = _api.generator(random_state)
    out = np.zeros((ens.n_features, 1))
    for j in np.unique(ens.feature[ens.left >= 0]):
        col = Xd[:, j].copy()
        for _ in range(n_repeats):
            Xd[:, j] = col[rng.permutation(n)]
            out[j, 0] += obj.loss(yv, ens.predict_margin(Xd), w) - base
        Xd[:, j] = col
    return out / n_repeats
