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
from .attribution import data_sums
from .ensemble import TreeEnsemble
from .objectives import get_objective

__all__ = ["total_gain"]


def reference_gains(ens: TreeEnsemble, reference: Any) -> np.ndarray:
    """The split gain of every node from the training data ``reference``:
    ``G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G_t^2 / (H_t + lambda)`` with G, H
    the staged gradient and hessian sums over the reference rows (``attribution.data_sums``,
    the statistics PreDecomp's node values from ``reference`` use); a term whose
    ``H + lambda`` is not positive is 0. NaN at the leaves."""
    G, H, lam = data_sums(ens, reference)
    den = H + lam
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(den > 0, G * G / den, 0.0)
    inner = np.flatnonzero(ens.left >= 0)
    gain = np.full(ens.n_nodes, np.nan)
    gain[inner] = score[ens.left[inner]] + score[ens.right[inner]] - score[inner]
    return gain


def total_gain_scores(ens: TreeEnsemble, reference: Any = None) -> np.ndarray:
    """Split gains summed per output feature and output: (n_output_features, n_outputs); the
    stored gains, or with ``reference`` those computed from the training data
    (``reference_gains``)."""
    gain = ens.gain if reference is None else reference_gains(ens, reference)
    inner = np.flatnonzero(ens.left >= 0)
    tree = ens._node_tree[inner]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), gain[inner])
    return ens._to_output(out)


@public
def total_gain(model: Any, *, reference: Any = None) -> pd.Series | pd.DataFrame:
    """The booster's split gains summed per feature.

    For XGBoost this is ``get_score(importance_type="total_gain")`` (features never used
    score 0). Models that store no split gains (CatBoost) give NaN, unless ``reference``
    is given.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    reference : tuple, optional
        ``(X_train, y_train)`` or ``(X_train, y_train, sample_weight)``, the training data:
        the gains are computed from it instead of read from the model, every split's
        ``G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G^2 / (H + lambda)`` with G, H
        the sums of the staged gradients and hessians over the rows reaching each node (the
        statistics of ``node_values(model, reference=...)``). This equals TreeInner with
        PreDecomp evaluated on the same data, ``tree_inner(model, X_train, y_train,
        reference=(X_train, y_train))``, and, for a booster that stores its gains and was
        trained on exactly these rows without row subsampling, the stored gains (XGBoost's
        to float32 rounding).

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.

    Examples
    --------
    >>> treeinner.total_gain(catboost_classifier, reference=(X_train, y_train))  # doctest: +SKIP
    """
    ens = from_model(model)
    scores = total_gain_scores(ens, reference)
    return _api.per_output(ens, scores, "total_gain", credited=True)


def permutation_scores(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, n_repeats: int, random_state: Any
) -> np.ndarray:
    """Mean increase of the loss when a column is permuted, over ``n_repeats`` permutations:
    (n_output_features, 1) (the loss is over all outputs at once).

    Models that route rows through their booster (an ``input_map``: CatBoost's categorical
    splits) get the columns of the raw X permuted, each then routed again."""
    n_repeats = _api.check_count("n_repeats", n_repeats)
    if ens.input_map is not None:
        return _raw_permutation_scores(ens, X, y, sample_weight, n_repeats, random_state)
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = _input.join_blocks(blocks, ens.n_features)
    yv = obj.check_labels(y, n)
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


def _raw_permutation_scores(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, n_repeats: int, random_state: Any
) -> np.ndarray:
    """``permutation_scores`` of a model with an ``input_map``: the columns of the raw X (a
    DataFrame matched by name like the input map does, else by position) are permuted, one
    output feature at a time, and the rows routed again through ``predict_margin``. Output
    features no split uses score 0."""
    obj = get_objective(ens)
    names = list(ens.output_names)
    X = _input.to_pandas(X)  # polars, pyarrow: matched by name too
    n = _api.n_rows(X)
    yv = obj.check_labels(y, n)
    w = None if sample_weight is None else _weights(sample_weight, n)
    base = obj.loss(yv, ens.predict_margin(X), w)
    used = np.zeros((ens.n_features, 1))
    used[ens.feature[ens.left >= 0], 0] = 1.0
    credited = np.flatnonzero(ens._to_output(used)[:, 0] > 0)
    rng = _api.generator(random_state)
    out = np.zeros((len(names), 1))
    if isinstance(X, pd.DataFrame):
        by_name = [str(c) for c in X.columns]
        pos = (
            [by_name.index(f) for f in names]
            if set(names) <= set(by_name) and len(set(by_name)) == len(by_name)
            else list(range(len(names)))
        )
        Xp = X.copy()
        for j in credited:
            col = X.iloc[:, pos[j]]
            for _ in range(n_repeats):
                Xp.isetitem(pos[j], col.iloc[rng.permutation(n)].set_axis(X.index))
                out[j, 0] += obj.loss(yv, ens.predict_margin(Xp), w) - base
            Xp.isetitem(pos[j], col)
    else:
        arr = np.array(X, dtype=object)
        for j in credited:
            col = arr[:, j].copy()
            for _ in range(n_repeats):
                arr[:, j] = col[rng.permutation(n)]
                out[j, 0] += obj.loss(yv, ens.predict_margin(arr), w) - base
            arr[:, j] = col
    return out / n_repeats
