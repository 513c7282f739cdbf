"""Interventional TreeSHAP against a background data set."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from ._api import check_in_memory, public
from ._errors import InputError, UnsupportedModelError
from ._staged import _inputs, stages
from ._stats import Moments
from .adapters import from_model
from .attribution import Attribution, _tree_range
from .ensemble import TreeEnsemble
from .kernels import interventional as K
from .treeshap import _players, chunked_moments

__all__ = ["tree_shap_interventional"]

#: What to do with a Dask collection instead, for the scores (sums over rows)
_SUMS_OVER_ROWS = "or map over its partitions and add the results: the scores are sums over rows"


def _weights() -> np.ndarray:
    """``wt[p, q] = p! q! / (p + q + 1)!``, the Shapley weight of a player joining p of one
    kind and q of another, for p, q up to ``MAX_PATH_PLAYERS``."""
    n = K.MAX_PATH_PLAYERS + 1
    wt = np.zeros((n, n), dtype=np.float64)
    for p in range(n):
        for q in range(n):
            wt[p, q] = 1.0 / ((p + q + 1) * math.comb(p + q, p))
    return wt


_WT = _weights()


def _check_model(ens: TreeEnsemble) -> None:
    if ens._linear is not None:
        raise UnsupportedModelError(
            "Interventional TreeSHAP of models with linear leaves (LightGBM linear_tree) is "
            "not supported."
        )
    if not getattr(ens.input_map, "routes_off_path", True):
        raise UnsupportedModelError(
            "Interventional TreeSHAP of CatBoost Depthwise/Lossguide trees with categorical "
            "splits is not supported: it routes rows at splits off their path, and CatBoost "
            "only tells which way a row goes at the splits it passes. Oblivious "
            "(SymmetricTree) models work."
        )


def _leaves(ens: TreeEnsemble, player: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every leaf's path (``kernels.interventional.leaf_paths``), with the per-tree leaf
    offsets first: ``(leaf_lo, leaf_node, leaf_d, cond_off, cond_node, cond_left, cond_bit,
    pl_off, pl)``."""
    inner = ens.left >= 0
    node_player = np.full(ens.n_nodes, -1, dtype=np.int64)
    node_player[inner] = player[ens.feature[inner]]
    n_leaves = int(np.count_nonzero(~inner))
    depth = max(int(ens._tree_depth.max()) if ens.n_trees else 0, 1)
    leaf_tree = np.empty(n_leaves, dtype=np.int64)
    leaf_node = np.empty(n_leaves, dtype=np.int64)
    leaf_d = np.empty(n_leaves, dtype=np.int64)
    cond_off = np.empty(n_leaves + 1, dtype=np.int64)
    pl_off = np.empty(n_leaves + 1, dtype=np.int64)
    cond_node = np.empty(n_leaves * depth, dtype=np.int64)
    cond_left = np.empty(n_leaves * depth, dtype=np.uint8)
    cond_bit = np.empty(n_leaves * depth, dtype=np.int64)
    pl = np.empty(n_leaves * depth, dtype=np.int64)
    nc, npl = K.leaf_paths(
        ens.left, ens.right, node_player, ens.tree_offsets, depth, leaf_tree, leaf_node,
        leaf_d, cond_off, cond_node, cond_left, cond_bit, pl_off, pl,
    )  # fmt: skip
    if nc < 0:
        raise UnsupportedModelError(
            f"Interventional TreeSHAP: a path of tree {npl} tests more than "
            f"{K.MAX_PATH_PLAYERS} distinct features."
        )
    leaf_lo = np.searchsorted(leaf_tree, np.arange(ens.n_trees + 1)).astype(np.int64)
    return (leaf_lo, leaf_node, leaf_d, cond_off, cond_node[:nc], cond_left[:nc],
            cond_bit[:nc], pl_off, pl[:npl])  # fmt: skip


def _rows(
    ens: TreeEnsemble, X: Any, name: str, what: str = "rows"
) -> tuple[int, list[tuple[int, np.ndarray]]]:
    """The kernel rows of ``X`` (validated as for prediction), in blocks."""
    check_in_memory(X, name, "or map this function over its partitions", what)
    n, blocks = ens._blocks(X)
    return n, [(s, np.ascontiguousarray(b, dtype=np.float64)) for s, b in blocks]


@dataclasses.dataclass(frozen=True)
class _Setup:
    """An ensemble's leaves and a background's tables, ready for the kernels."""

    n_bg: int
    player: np.ndarray
    pcredit: np.ndarray | None
    kinds: tuple[np.ndarray, np.ndarray]
    leaves: tuple[np.ndarray, ...]
    tables: tuple[np.ndarray, ...]

    @property
    def n_players(self) -> int:
        return self.player.shape[0] if self.pcredit is None else self.pcredit.shape[0]

    def credit(self, a: np.ndarray, axis: int) -> np.ndarray:
        """Players -> output features on ``axis``."""
        if self.pcredit is None:
            return a
        return np.moveaxis(np.moveaxis(a, axis, -1) @ self.pcredit, -1, axis)


def _setup(ens: TreeEnsemble, background: Any, name: str) -> _Setup:
    """Check the model and the background and summarise the background per leaf."""
    _check_model(ens)
    if background is None:
        raise InputError(
            f"{name}: interventional TreeSHAP needs a background data set: pass "
            "background= (rows with the model's features, e.g. a sample of the training data)."
        )
    n_bg, bg_blocks = _rows(ens, background, name, "background")
    if n_bg == 0:
        raise InputError(f"{name}: the background has no rows.")
    B = np.concatenate([b for _, b in bg_blocks], axis=0) if len(bg_blocks) > 1 else bg_blocks[0][1]
    player, pcredit = _players(ens)
    leaves = _leaves(ens, player)
    leaf_d = leaves[2]
    # a leaf's tables take 3 x 2^d floats, its background masks n_bg words: tabulate a leaf
    # unless its tables would be both over 2^MAX_TABLE_BITS and many times the masks' size
    small = np.left_shift(1, np.minimum(leaf_d, K.MAX_PATH_PLAYERS)) <= 8 * max(n_bg, 8)
    tab = (leaf_d <= K.MAX_TABLE_BITS) & small
    tab_off = np.concatenate([[0], np.cumsum(np.where(tab, 1 << np.minimum(leaf_d, 62), 0))])
    bg_off = np.concatenate([[0], np.cumsum(np.where(tab, 0, n_bg))])
    size = int(tab_off[-1])
    U, Y, Z = np.zeros(size), np.zeros(size), np.zeros(size)
    bmask = np.zeros(int(bg_off[-1]), dtype=np.uint64)
    nodes = ens._nodes()
    kinds = K.node_kinds(nodes)
    tables = (tab_off.astype(np.int64), bg_off.astype(np.int64), _WT, U, Y, Z, bmask)
    K.background_tables(B, nodes, ens._float32_input, kinds, ens.tree_offsets, leaves, tables)
    return _Setup(n_bg, player, pcredit, kinds, leaves, tables)


@public
def tree_shap_interventional(
    model: Any, X: Any, background: Any, *, iteration_range: tuple[int, int] | None = None
) -> Attribution:
    """Interventional TreeSHAP: exact Shapley values of every row's margin against a
    background data set.

    The value of a set S of features for row x is the model's margin averaged over the
    background rows b, each with the features in S replaced by x's (Janzing et al. 2020;
    shap's ``TreeExplainer(model, data=background, feature_perturbation="interventional")``
    for the raw margin). Unlike path-dependent TreeSHAP (``tree_shap``) it needs no node
    weights from the training data, and features the model does not use get zero even when
    correlated with the ones it does. Rows and background rows follow each split exactly as
    in prediction (the booster's threshold rule, missing values and categorical sets).

    The background is summarised once per leaf (which of the leaf's path features each
    background row satisfies, tabulated over the 2^d subsets of its d distinct path
    features), so explaining a row costs O(sum over trees of nodes + leaves x depth),
    independent of the background size (see ``treeinner.kernels.interventional``).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        The model.
    X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        Rows to explain, as for ``TreeEnsemble.predict_margin``.
    background : array-like of shape (n_background, n_features), DataFrame or sparse matrix
        The background rows (same features as ``X``); at least one, all used (shap keeps a
        random 100 of a larger raw background; pass it
        ``shap.maskers.Independent(background, max_samples=len(background))`` to compare).
    iteration_range : tuple of (int, int), optional
        Explain only the trees of these boosting rounds, as for ``tree_shap`` (``(start,
        stop)``, ``stop=0`` all rounds); the bias is then the background's mean margin of the
        base margin and those trees.

    Returns
    -------
    Attribution
        ``values`` of shape (n_samples, n_features), or (n_samples, n_features, n_outputs)
        for multi-output models; ``bias`` (n_outputs,) is the mean margin of the background
        rows, so ``values.sum(axis=1) + bias`` is each row's margin.

    Raises
    ------
    ValueError
        For rows or background rows with the wrong features, or an empty background.
    NotImplementedError
        For models with linear leaves, CatBoost non-oblivious trees with categorical splits,
        and paths testing more than 62 distinct features (``UnsupportedModelError``).
    """
    ens = from_model(model)
    lo, hi = _tree_range(ens, iteration_range)
    su = _setup(ens, background, "tree_shap_interventional")
    n, blocks = _rows(ens, X, "tree_shap_interventional")
    out = np.zeros((n, su.n_players, ens.n_outputs), dtype=np.float64)
    nodes = ens._nodes()
    for start, block in blocks:
        K.explain(
            block, nodes, ens._float32_input, su.kinds, ens.tree_offsets, ens.tree_group,
            su.leaves, su.tables, su.n_bg, out[start : start + block.shape[0]], lo, hi,
        )  # fmt: skip
    out = su.credit(out, 1)
    values = out[:, :, 0] if ens.n_outputs == 1 else out
    if iteration_range is None:
        margin = ens.predict_margin(background)
    else:
        margin = ens.predict_margin(background, iteration_range=iteration_range)
    bias = np.atleast_1d(np.asarray(margin, dtype=np.float64).reshape(su.n_bg, -1).mean(axis=0))
    index = X.index if isinstance(X, pd.DataFrame) else None
    return Attribution(values=values, bias=bias, feature_names=ens.output_names, index=index)


def _inner_pass(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any
) -> tuple[_Setup, int, list[tuple[int, np.ndarray]], np.ndarray, np.ndarray, tuple[Any, ...]]:
    """Set up a streamed interventional TreeInner/ForestInner pass: the background setup, row
    count, row blocks (float64), labels, weights and the kernel arguments after them."""
    name = "tree_inner(attribution='interventional')"
    su = _setup(ens, background, name)
    check_in_memory(X, name, _SUMS_OVER_ROWS)
    obj, n, blocks, yv, w = _inputs(ens, X, y, sample_weight)
    blocks = [(s, np.ascontiguousarray(b, dtype=np.float64)) for s, b in blocks]
    lr = np.ascontiguousarray(ens.learning_rate, dtype=np.float64)
    args: tuple[Any, ...] = (ens._nodes(), ens._layout, stages(ens, obj), su.kinds, su.leaves,
                             su.tables, su.n_bg, lr)  # fmt: skip
    return su, n, blocks, yv, w, args


def interventional_inner(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any, forest: bool
) -> np.ndarray:
    """TreeInner (or with ``forest`` the ForestInner sums before the division by the mean
    learning rate) with interventional TreeSHAP attributions against ``background``, per
    output feature and output: (n_output_features, n_outputs), a sum over the rows of X."""
    su, n, blocks, yv, w, args = _inner_pass(ens, X, y, background, sample_weight)
    acc = np.zeros((K.inner_chunks(n, ens.n_trees), su.n_players, ens.n_outputs))
    rest = (*args, bool(forest), acc)
    for start, block in blocks:
        stop = start + block.shape[0]
        K.inner(block, yv[start:stop], w[start:stop], *rest)
    return su.credit(acc.sum(axis=0), 0)


def interventional_inner_moments(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any, forest: bool
) -> Moments:
    """``interventional_inner`` with the sampling moments of its per-row terms (as
    ``treeshap._shap_inner_moments``: ``u[i, j, c] = w_i sum_t (-g_{i,t}) / lr_t
    phi_{t,j}(x_i)`` over the trees t of output c, phi_t tree t's interventional values;
    with ``forest``, ``w_i GS[i, c] sum_t phi_{t,j}(x_i)``), from the same pass."""
    su, n, blocks, yv, w, args = _inner_pass(ens, X, y, background, sample_weight)
    n_chunks = K.inner_chunks(n, ens.n_trees)
    return chunked_moments(
        K.inner_moments, su, n, n_chunks, ens.n_outputs, blocks, yv, w, args, forest
    )
