"""Path-dependent TreeSHAP over the common tree format."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .adapters import from_model
from .attribution import Attribution, _tree_range
from .ensemble import TreeEnsemble
from .kernels import attribution as KA
from .kernels import treeshap as K

__all__ = ["tree_shap"]

_SERIAL_WORK = 5_000  # rows x trees below which the kernel runs on the calling thread


def _covers(ens: TreeEnsemble, lo: int, hi: int) -> np.ndarray:
    """The node weights of TreeSHAP (the hessian covers), checked for trees ``lo:hi``."""
    cover = ens.cover
    mine = cover[ens.tree_offsets[lo] : ens.tree_offsets[hi]]
    if not np.all(np.isfinite(mine)) or np.any(mine < 0):
        raise ValueError(
            f"The {ens.source} model stores no covers (hessian sums) for its nodes "
            f"(objective {ens.objective!r}), and path-dependent TreeSHAP weights every split "
            "by them."
        )
    return cover


def tree_shap(model: Any, X: Any, trees: Any = None) -> Attribution:
    """Path-dependent TreeSHAP: exact Shapley values of every row's margin, per feature.

    The value of a set S of features is the model's expected margin when the features in S
    take the row's values and every other split is averaged over its children, weighted by the
    node covers (Lundberg et al. 2018, Algorithm 2; XGBoost's ``pred_contribs`` and shap's
    ``feature_perturbation="tree_path_dependent"``). Rows follow each split exactly as in
    prediction (the booster's threshold rule, missing values and categorical sets).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        The model; it must store node covers (hessian sums).
    X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        Rows to explain, as for :meth:`TreeEnsemble.predict_margin`.
    trees : slice or tuple of int, optional
        A slice of trees, or an ``(start, stop)`` range of boosting rounds.

    Returns
    -------
    Attribution
        ``values`` of shape (n_samples, n_features), or (n_samples, n_features, n_outputs)
        for multi-output models; ``bias`` (n_outputs,) is the base margin plus every tree's
        cover-weighted mean leaf value (the expected value), so ``values.sum(axis=1) + bias``
        is the margin of the trees used.

    Raises
    ------
    ValueError
        If the model stores no covers.
    NotImplementedError
        For models with linear leaves.
    """
    ens = from_model(model)
    if ens._linear is not None:
        raise NotImplementedError(
            "TreeSHAP of models with linear leaves (LightGBM linear_tree) is not supported."
        )
    lo, hi = _tree_range(ens, trees)
    cover = _covers(ens, lo, hi)
    n, blocks = ens._blocks(X)
    out = np.zeros((n, ens.n_features, ens.n_outputs), dtype=np.float64)
    nodes = ens._nodes()
    depth = int(ens._tree_depth[lo:hi].max())
    for start, block in blocks:
        kernel = K.tree_shap
        if block.shape[0] * (hi - lo) < _SERIAL_WORK:
            kernel = K.tree_shap_serial
        kernel(
            block,
            nodes,
            cover,
            lo,
            hi,
            depth,
            ens._float32_input,
            out[start : start + block.shape[0]],
        )
    mean = np.empty(ens.n_nodes, dtype=np.float64)
    KA.node_values(ens.left, ens.right, ens.tree_offsets, ens.value, cover, 0.0, mean)
    bias = ens.base_margin.copy()
    np.add.at(bias, ens.tree_group[lo:hi], mean[ens.tree_offsets[lo:hi]])
    out = ens._to_output(out, axis=1)
    values = out[:, :, 0] if ens.n_outputs == 1 else out
    index = X.index if isinstance(X, pd.DataFrame) else None
    return Attribution(values=values, bias=bias, feature_names=ens.output_names, index=index)
