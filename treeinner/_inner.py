"""TreeInner and ForestInner: inner products of per-tree attributions with negative gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._staged import _staged
from .adapters import from_model
from .attribution import node_values
from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .treeshap import _shap_inner

__all__ = ["forest_inner", "tree_inner"]


def inner_values(ens: TreeEnsemble, attribution: str, reference: Any) -> np.ndarray | None:
    """Node values of a path attribution (PreDecomp from ``reference`` when given); None for
    TreeSHAP, which has no node values."""
    _api.check_attribution(attribution)
    if reference is not None and attribution != "predecomp":
        raise ValueError(
            f"reference= recomputes PreDecomp node values; attribution={attribution!r} does not "
            "use them (use attribution='predecomp')."
        )
    if attribution == "shap":
        return None
    return node_values(ens, attribution=attribution, reference=reference)


def tree_inner_sums(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> np.ndarray:
    """TreeInner per output feature and output, (n_output_features, n_outputs): a sum over the
    rows of X, so sums over disjoint rows add up. ``values``: node values, None for TreeSHAP."""
    if values is None:
        return _shap_inner(ens, X, y, sample_weight, False)
    G, _, _, _, _ = _staged(ens, X, y, sample_weight, need_hc=False)
    S = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, -G, S)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    contrib = values[L] * S[L] + values[R] * S[R] - values[inner] * S[inner]
    tree = ens._node_tree[inner]
    contrib = contrib / ens.learning_rate[tree]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), contrib)
    return ens._to_output(out)


def forest_inner_sums(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> np.ndarray:
    """ForestInner per output feature and output, (n_output_features, n_outputs); a sum over
    rows like ``tree_inner_sums``."""
    lr = float(np.mean(ens.learning_rate))
    if values is None:
        return _shap_inner(ens, X, y, sample_weight, True) / lr
    _, _, _, FI, _ = _staged(ens, X, y, sample_weight, forest_p=values, need_hc=False)
    return ens._to_output(FI / lr)


def _result(sums, model, X, y, attribution, sample_weight, reference):
    """A public TreeInner/ForestInner result: ``sums`` of the model's node values, per output."""
    ens = from_model(model)
    values = inner_values(ens, attribution, reference)
    name = sums.__name__.removesuffix("_sums")
    return _api.per_output(ens, sums(ens, X, y, values, sample_weight), name, credited=True)


@public
def tree_inner(
    model: Any,
    X: Any,
    y: Any,
    *,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
) -> pd.Series | pd.DataFrame:
    """TreeInner: per tree, the inner product of an attribution with the negative gradient.

    TreeInner(k) = sum_m (1/lr_m) sum_i r_{m,k}(x_i) (-g_{i,m}) with g the gradient at the
    margin before tree m's boosting round (paper 003, Definition 4). On the training data with
    PreDecomp it equals the total split gain of feature k; on held-out data a feature the model
    only overfit gets a negative score.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (normally held-out data).
    y : array-like of shape (n_samples,)
        Labels, valid for the model's objective.
    attribution : {"predecomp", "saabas", "shap"}
        The per-tree attribution r. ``"shap"`` is path-dependent TreeSHAP (as
        ``tree_shap``), computed tree by tree and weighted on the fly: no SHAP value is
        stored.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values recomputed from this data
        (``node_values(model, reference=...)``) instead of the stored covers. Only with
        ``attribution="predecomp"``.

    Returns
    -------
    pandas.Series indexed by feature name, or for multi-output models a DataFrame with one
    column per class and a ``total`` column.
    """
    return _result(tree_inner_sums, model, X, y, attribution, sample_weight, reference)


@public
def forest_inner(
    model: Any,
    X: Any,
    y: Any,
    *,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
) -> pd.Series | pd.DataFrame:
    """ForestInner: the forest-level inner product of attributions and negative gradients.

    ``ForestInner(k) = (1/lr) sum_i [sum_m r_{m,k}(x_i)] [sum_m (-g_{i,m})]``, with sums over
    the trees of each output (paper 003, Definition 5, as the authors' code computes it) and lr
    the mean learning rate.

    Parameters
    ----------
    model, X, y, attribution, sample_weight, reference
        As for ``tree_inner``: the model, the evaluation rows and their labels, the per-tree
        attribution (``"predecomp"``, ``"saabas"`` or ``"shap"``), row weights, and the data
        PreDecomp's node values are recomputed from.

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    return _result(forest_inner_sums, model, X, y, attribution, sample_weight, reference)
