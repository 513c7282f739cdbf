"""Global importances: TreeInner, ForestInner, total gain, magnitude baselines, permutation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._staged import _staged, _weights
from .adapters import from_model
from .attribution import _kind, node_values, predecomp, saabas
from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .objectives import get_objective
from .treeshap import _shap_inner, tree_shap

__all__ = ["forest_inner", "importance", "total_gain", "tree_inner"]

METHODS = (
    "tree_inner",
    "tree_inner_shap",
    "forest_inner",
    "abs_predecomp",
    "abs_saabas",
    "total_gain",
    "permutation",
    "unbiased_gain",
    "abs_shap",
)


def _per_output(
    ens: TreeEnsemble, per_feature: np.ndarray, name: str, credited: bool = False
) -> pd.Series | pd.DataFrame:
    """(n_features, n_outputs) -> Series, or DataFrame with a column per class and 'total'.
    Values over the kernels' columns are credited to the output features unless
    ``credited``."""
    names = list(ens.output_names)
    if not credited:
        per_feature = ens._to_output(per_feature)
    if ens.n_outputs == 1:
        return pd.Series(per_feature[:, 0], index=names, name=name)
    df = pd.DataFrame(
        per_feature, index=names, columns=[f"class_{c}" for c in range(ens.n_outputs)]
    )
    df["total"] = per_feature.sum(axis=1)
    return df


def _tree_inner_from_sums(ens: TreeEnsemble, p: np.ndarray, leaf_neg_g: np.ndarray) -> np.ndarray:
    """sum_t (1/lr_t) sum over splits on k of [p(L) S(L) + p(R) S(R) - p(t) S(t)]."""
    S = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, leaf_neg_g, S)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    contrib = p[L] * S[L] + p[R] * S[R] - p[inner] * S[inner]
    tree = ens._node_tree[inner]
    contrib = contrib / ens.learning_rate[tree]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), contrib)
    return out


def _values(ens: TreeEnsemble, attribution: str, reference: Any) -> np.ndarray | None:
    """Node values of a path attribution; None for TreeSHAP."""
    if attribution == "shap":
        if reference is not None:
            raise ValueError("reference= recomputes PreDecomp node values; use 'predecomp'.")
        return None
    kind = _kind(attribution)
    if reference is not None:
        if kind != "regularized":
            raise ValueError("reference= recomputes PreDecomp node values; use 'predecomp'.")
        kind = "data"
    return node_values(ens, kind, reference)


def tree_inner(
    model: Any,
    X: Any,
    y: Any,
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
        :func:`tree_shap`), computed tree by tree and weighted on the fly: no SHAP value is
        stored.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values recomputed from this data
        (``node_values(kind="data")``) instead of the stored covers.

    Returns
    -------
    pandas.Series indexed by feature name, or for multi-output models a DataFrame with one
    column per class and a ``total`` column.
    """
    ens = from_model(model)
    p = _values(ens, attribution, reference)
    if p is None:
        return _per_output(ens, _shap_inner(ens, X, y, sample_weight, False), "tree_inner", True)
    G, _, _, _, _ = _staged(ens, X, y, sample_weight, need_hc=False)
    return _per_output(ens, _tree_inner_from_sums(ens, p, -G), "tree_inner")


def forest_inner(
    model: Any,
    X: Any,
    y: Any,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
) -> pd.Series | pd.DataFrame:
    """ForestInner: the forest-level inner product of attributions and negative gradients.

    ForestInner(k) = (1/lr) sum_i [sum_m r_{m,k}(x_i)] [sum_m (-g_{i,m})], with sums over the
    trees of each output (paper 003, Definition 5, as the authors' code computes it) and lr
    the mean learning rate.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
    y : array-like of shape (n_samples,)
    attribution : {"predecomp", "saabas", "shap"}
        As for :func:`tree_inner`.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        As for :func:`tree_inner`.

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    ens = from_model(model)
    p = _values(ens, attribution, reference)
    lr = float(np.mean(ens.learning_rate))
    if p is None:
        FI = _shap_inner(ens, X, y, sample_weight, True)
        return _per_output(ens, FI / lr, "forest_inner", True)
    _, _, _, FI, _ = _staged(ens, X, y, sample_weight, forest_p=p, need_hc=False)
    return _per_output(ens, FI / lr, "forest_inner")


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
    inner = np.flatnonzero(ens.left >= 0)
    tree = ens._node_tree[inner]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), ens.gain[inner])
    return _per_output(ens, out, "total_gain")


def _total(res: pd.Series | pd.DataFrame) -> pd.Series:
    return res["total"] if isinstance(res, pd.DataFrame) else res


def _permutation(ens, X, y, sample_weight, n_repeats, random_state):
    if ens.input_map is not None:
        raise NotImplementedError(
            "Permutation importance is not available for models routed through their booster "
            "(CatBoost categorical splits) yet."
        )
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = np.concatenate([b for _, b in blocks]) if n else np.zeros((0, ens.n_features))
    yv = obj.check_labels(y)
    w = None if sample_weight is None else _weights(sample_weight, n)
    base = obj.loss(yv, ens.predict_margin(Xd), w)
    rng = np.random.default_rng(random_state)
    out = np.zeros(ens.n_features)
    used = np.unique(ens.feature[ens.left >= 0])
    for j in used:
        col = Xd[:, j].copy()
        for _ in range(n_repeats):
            Xd[:, j] = col[rng.permutation(n)]
            out[j] += obj.loss(yv, ens.predict_margin(Xd), w) - base
        Xd[:, j] = col
    return out / n_repeats


_INNER = {
    f"{name}{suffix}": (fn, a)
    for name, fn in (("tree_inner", tree_inner), ("forest_inner", forest_inner))
    for suffix, a in (("", "predecomp"), ("_saabas", "saabas"), ("_shap", "shap"))
}


def importance(
    model: Any,
    X: Any,
    y: Any,
    methods: Sequence[str] = METHODS,
    sample_weight: Any = None,
    n_repeats: int = 5,
    random_state: Any = None,
) -> pd.DataFrame:
    """Several global importances side by side, one column per method.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (held-out data to separate signal from overfitting).
    y : array-like of shape (n_samples,)
    methods : sequence of str
        Any of ``tree_inner`` (PreDecomp), ``tree_inner_saabas``, ``tree_inner_shap``,
        ``forest_inner``, ``forest_inner_saabas``, ``forest_inner_shap``, ``abs_predecomp``,
        ``abs_saabas``, ``abs_shap`` (mean |attribution|; ``abs_shap`` is mean |TreeSHAP|, the
        usual SHAP bar plot), ``total_gain`` and ``permutation`` (mean loss increase when the
        column is permuted, over ``n_repeats`` permutations) and ``unbiased_gain``
        (:func:`unbiased_gain` with one draw). For multi-output models the columns hold the
        totals over classes.
    sample_weight : array-like of shape (n_samples,), optional
    n_repeats : int
        Permutations per feature for ``permutation``.
    random_state : int or numpy Generator, optional
        Seed of the permutations and of the unbiased gain's draws.

    Returns
    -------
    pandas.DataFrame indexed by feature name.
    """
    ens = from_model(model)
    cols = {}
    for m in methods:
        if m in _INNER:
            inner, a = _INNER[m]
            cols[m] = _total(inner(ens, X, y, a, sample_weight)).to_numpy()
        elif m in ("abs_predecomp", "abs_saabas", "abs_shap"):
            if m == "abs_shap":
                attr = tree_shap(ens, X)
            else:
                attr = (predecomp if m == "abs_predecomp" else saabas)(ens, X)
            v = np.abs(attr.values)
            v = v.sum(axis=2) if v.ndim == 3 else v
            cols[m] = v.mean(axis=0) if v.shape[0] else np.zeros(len(ens.output_names))
        elif m == "total_gain":
            cols[m] = _total(total_gain(ens)).to_numpy()
        elif m == "permutation":
            cols[m] = _permutation(ens, X, y, sample_weight, n_repeats, random_state)
        elif m == "unbiased_gain":
            from .unbiased import unbiased_gain

            ug = unbiased_gain(ens, X, y, random_state=random_state, sample_weight=sample_weight)
            cols[m] = _total(ug).to_numpy()
        else:
            raise ValueError(
                f"Unknown importance method {m!r}; choose from {sorted({*METHODS, *_INNER})}."
            )
    return pd.DataFrame(cols, index=list(ens.output_names))
