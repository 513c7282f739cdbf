"""ForestInner's initial form centred on the evaluation rows: a held-out score whose value
for a feature independent of the target is zero.

The initial form multiplies a row's attribution by ``r_i = -g_i(F_0) / lr``, the negative
gradient at the initial margin, which is not a residual of the model. With hessian-weighted
node values (PreDecomp, Saabas) a split's attribution ``p_child - p_t`` has a non-zero mean
over new rows inside its node wherever the loss's hessian is not constant (the training
hessians, taken at staged margins fitted to the same rows' labels, follow the labels), and
these node terms add up, so an independent feature scores above zero. Centred, an internal
node's value is the mean of its leaves' values over the evaluation rows (weights where given)
that reach it, so every split's attribution sums to zero over its node's evaluation rows, and

    score_j = sum over splits t on j of sum_{i in t} w_i (pbar_child(i) - pbar_t)(r_i - rbar_t)

(docs/methods.md, "The centred initial form"). The per-row terms of its standard error carry
``c_t = n_t / (n_t - 1)`` (n_t the evaluation rows reaching t) and the node mean ``rbar_t``.
Centred node values use neither hessians nor lambda, so PreDecomp and Saabas give the same
score. With TreeSHAP, the node weights TreeSHAP splits by are the evaluation rows' weights
instead of the training covers, and ``r`` is centred on its mean over the evaluation rows.

A split on a combination of features (CatBoost's CTR combinations) is credited to them by
Shapley values over permutations of the evaluation rows (``_shapley_credit``), so a feature
independent of the target scores zero there too.

Both are two passes over the rows (``kernels.centred``): node sums, then the scores and the
sums of the squared per-row terms. Each pass is a sum over rows, so a Dask collection is
mapped over its partitions twice; the score itself is not a sum over rows (its node means
come from all of them).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._dask import is_dask, map_add
from ._shapley_credit import shapley_credit_ensemble
from ._splits import split_credit
from ._staged import _leaf_lists, _weights, initial_gradients, list_moments
from ._stats import Moments, moments_from_rows
from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .kernels import centred as KC
from .treeshap import tree_shap

__all__ = ["Centring", "centred_initial_moments", "centred_initial_sums", "centring"]


def _label_terms(ens: TreeEnsemble, y: Any, n: int) -> np.ndarray:
    """``r = -g(F_0) / lr`` of every row and output, (n, n_outputs), lr the mean learning
    rate."""
    return np.ascontiguousarray(
        -initial_gradients(ens, y, n) / float(np.mean(ens.learning_rate)), dtype=np.float64
    )


def _leaf_sums_part(ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any) -> np.ndarray:
    """Per leaf, over the rows of X (in memory): count of rows with positive weight, their
    weight and their ``w r``: (3, n_nodes)."""
    n, blocks = ens._blocks(X)
    r = _label_terms(ens, y, n)
    w = _weights(sample_weight, n)
    out = np.zeros((3, ens.n_nodes))
    nodes, layout = ens._nodes(), ens._layout
    for start, block in blocks:
        rows = slice(start, start + block.shape[0])
        out += KC.leaf_sums(block, r[rows], w[rows], nodes, layout, ens._float32_input, ens.n_nodes)
    return out


def _leaf_sums_task(shared: tuple, X: Any, y: Any, sample_weight: Any) -> np.ndarray:
    (ens,) = shared
    return _leaf_sums_part(ens, X, y, sample_weight)


class Centring(NamedTuple):
    """The evaluation rows' node statistics of a model, every node (leaves included).

    Attributes
    ----------
    rows : ndarray
        Rows with positive weight reaching the node.
    weight : ndarray
        Their weight.
    wr_leaf : ndarray
        Per leaf (0 at inner nodes) the sum of ``w r`` of its rows, r at its tree's output.
    values : ndarray
        Centred node values: the weighted mean of the leaf values over the node's rows (a
        leaf's value up to rounding; exactly its child's where every row goes one way); a
        leaf no row reaches keeps its value, an inner node 0.
    rbar : ndarray
        The weighted mean of ``r`` over the node's rows (0 where none).
    """

    rows: np.ndarray
    weight: np.ndarray
    wr_leaf: np.ndarray
    values: np.ndarray
    rbar: np.ndarray


def centring(ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any = None) -> Centring:
    """The first pass: node counts, weights and means over the rows of X (a Dask collection
    too, added over its partitions)."""
    if is_dask(X):
        leaf = map_add(_leaf_sums_task, (ens,), X, y, sample_weight)
    else:
        leaf = _leaf_sums_part(ens, X, y, sample_weight)
    is_leaf = ens.left < 0
    sub = np.empty((3, ens.n_nodes))
    wv = np.where(is_leaf, leaf[1] * ens.value, 0.0)
    for a, src in enumerate((leaf[0], leaf[1], leaf[2])):
        K.subtree_sums(ens.left, ens.right, ens.tree_offsets, src, sub[a])
    WV = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, wv, WV)
    count, weight, WR = sub
    some = weight > 0
    safe = np.where(some, weight, 1.0)
    # WV / W at leaves too (the leaf value up to rounding), so that a node all of whose rows
    # go one way has exactly its child's value: such a split's terms are then exactly zero,
    # not rounding noise whose ratio to its (as tiny) standard error could be any z
    values = np.where(some, WV / safe, np.where(is_leaf, ens.value, 0.0))
    rbar = np.where(some, WR / safe, 0.0)
    return Centring(count, weight, np.where(is_leaf, leaf[2], 0.0), values, rbar)


def _split_scores(ens: TreeEnsemble, cen: Centring) -> np.ndarray:
    """The centred scores from the node sums alone, (n_output_features, n_outputs): per split
    t, ``sum over t's children u of (pbar_u - pbar_t) WR_u`` (the ``- rbar_t`` term sums to 0
    over the node's rows), credited to t's feature and its tree's output."""
    return split_credit(ens, cen.wr_leaf, cen.values, None)


def _edge_coefficients(ens: TreeEnsemble, cen: Centring) -> tuple[np.ndarray, np.ndarray]:
    """Per edge (child n of node t, indexed by n): ``a = c_t (pbar_n - pbar_t)`` and
    ``b = -a rbar_t``, so that a row's term on the edge is ``a r_i + b``; ``c_t =
    n_t / (n_t - 1)`` (1 for a node reached by at most one row)."""
    parent = K.parents(ens.left, ens.right)
    has = parent >= 0
    q = parent[has]
    nq = cen.rows[q]
    c = np.where(nq > 1, nq / np.maximum(nq - 1.0, 1.0), 1.0)
    a = np.zeros(ens.n_nodes)
    a[has] = c * (cen.values[has] - cen.values[q])
    b = np.zeros(ens.n_nodes)
    b[has] = -a[has] * cen.rbar[q]
    return a, b


def _path_moments_part(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, a: np.ndarray, b: np.ndarray
) -> Moments:
    """The second pass over the rows of X (in memory): sums of the per-row terms ``w_i
    sum_edges (a r_i + b)`` and of their squares."""
    ptr, col, ca, cb, used, n_out = _leaf_lists(ens, a, b)
    n, blocks = ens._blocks(X)
    r = _label_terms(ens, y, n)
    w = _weights(sample_weight, n)
    nodes, layout, f32 = ens._nodes(), ens._layout, ens._float32_input

    def run(rows: slice, block: np.ndarray, dense: bool, acc: tuple) -> None:
        KC.centred_moments(block, r[rows], w[rows], nodes, layout, f32, ptr, col, ca, cb, dense,
                           *acc)  # fmt: skip

    return list_moments(ens, n, w, blocks, col, used, n_out, run)


def _path_moments_task(shared: tuple, X: Any, y: Any, sample_weight: Any) -> Moments:
    ens, a, b = shared
    return _path_moments_part(ens, X, y, sample_weight, a, b)


def _shap_setup(ens: TreeEnsemble, cen: Centring) -> tuple[TreeEnsemble, np.ndarray]:
    """The model whose TreeSHAP node weights are the evaluation rows' weights, and the
    evaluation rows' mean ``r`` per output. A child no row reaches weighs exactly 0, so a
    split that sends every row one way has no TreeSHAP credit at all (the kernels skip a
    branch of zero weight that the row does not take, and split a weightless node's weight
    half and half)."""
    cover = cen.weight.copy()
    roots = ens.tree_offsets[:-1]
    rbar = np.zeros(ens.n_outputs)
    rbar[ens.tree_group] = cen.rbar[roots]  # every tree's root: all rows, its output's mean
    return ens.replace(cover=cover, node_weight="cover"), rbar


def _shap_rows(ens: TreeEnsemble, X: Any, y: Any, rbar: np.ndarray) -> np.ndarray:
    """TreeSHAP (split by the evaluation weights of ``ens``) times ``r - rbar`` per row,
    feature and output: (n, n_output_features, n_outputs)."""
    A = tree_shap(ens, X).values
    if A.ndim == 2:
        A = A[:, :, None]
    r = _label_terms(ens, y, A.shape[0]) - rbar[None, :]
    return A * r[:, None, :]


def _shap_moments_task(shared: tuple, X: Any, y: Any, sample_weight: Any) -> Moments:
    ens, rbar = shared
    rows = _shap_rows(ens, X, y, rbar)
    w = None if sample_weight is None else _weights(sample_weight, rows.shape[0])
    return moments_from_rows(rows, w)


def centred_initial_moments(
    ens: TreeEnsemble, X: Any, y: Any, shap: bool, sample_weight: Any = None
) -> Moments:
    """The centred initial form's score (``s1``) and the sums of its squared per-row terms.

    Parameters
    ----------
    ens : TreeEnsemble
    X : array-like, DataFrame, scipy sparse matrix or Dask collection
        The evaluation rows.
    y : array-like of shape (n_samples,)
        Their labels.
    shap : bool
        TreeSHAP (split by the evaluation weights) instead of the centred path attribution.
    sample_weight : array-like of shape (n_samples,), optional

    Returns
    -------
    Moments
        ``s1`` the scores (n_output_features, n_outputs); ``s2``, ``s2_total``, ``swu`` of
        the per-row terms, so that ``estimate(mean=False)`` gives the score and its sampling
        variance.
    """
    ens = shapley_credit_ensemble(ens)
    cen = centring(ens, X, y, sample_weight)
    if shap:
        ens_w, rbar = _shap_setup(ens, cen)
        if is_dask(X):
            return map_add(_shap_moments_task, (ens_w, rbar), X, y, sample_weight)
        return _shap_moments_task((ens_w, rbar), X, y, sample_weight)
    a, b = _edge_coefficients(ens, cen)
    if is_dask(X):
        mom = map_add(_path_moments_task, (ens, a, b), X, y, sample_weight)
    else:
        mom = _path_moments_part(ens, X, y, sample_weight, a, b)
    # the score without the small-node factor c_t; the squares keep it
    return Moments(_split_scores(ens, cen), mom.s2, mom.s2_total, mom.n, mom.sw, mom.sw2, mom.swu)


def centred_initial_sums(
    ens: TreeEnsemble, X: Any, y: Any, shap: bool, sample_weight: Any = None
) -> np.ndarray:
    """The centred initial form's scores, (n_output_features, n_outputs); with the path
    attribution from the first pass alone."""
    if shap:
        return centred_initial_moments(ens, X, y, True, sample_weight).s1
    ens = shapley_credit_ensemble(ens)
    return _split_scores(ens, centring(ens, X, y, sample_weight))
