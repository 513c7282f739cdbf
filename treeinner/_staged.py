"""The staged pass over a data set: per-node gradient sums at the boosting-round margins."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .objectives import Objective, get_objective


def _weights(sample_weight: Any, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight has shape {w.shape}; expected ({n},).")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and non-negative.")
    return w


def _iter_ptr(ens: TreeEnsemble) -> np.ndarray:
    """Start of every boosting round's trees (trees of one round share gradients)."""
    starts = np.flatnonzero(np.diff(ens.tree_iteration)) + 1
    return np.concatenate([[0], starts, [ens.n_trees]]).astype(np.int64)


def stages(ens: TreeEnsemble, obj: Objective) -> K.Stages:
    """How the staged-pass kernels carry the model's margins, with the kernel objective ``obj``."""
    return K.Stages(
        _iter_ptr(ens), ens.base_margin, obj.code, obj.prm, ens._float32_input, ens.float32_sum
    )


def _inputs(ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any):
    """Objective, row count, row blocks, checked labels and weights, and the number of row
    chunks (one per thread) of a staged pass."""
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    yv = obj.check_labels(y)
    if yv.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {yv.shape[0]}.")
    w = _weights(sample_weight, n)
    n_chunks = max(1, min(numba.get_num_threads(), (n + 255) // 256))
    return obj, n, blocks, yv, w, n_chunks


def _staged(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, forest_p=None, need_hc: bool = True
):
    """Run the staged pass: per-leaf sums of w g (and, with ``need_hc``, of w h and w), and
    the ForestInner sums when ``forest_p`` (node values) is given."""
    obj, n, blocks, yv, w, n_chunks = _inputs(ens, X, y, sample_weight)
    G = np.zeros((n_chunks, ens.n_nodes))
    H = np.zeros_like(G)
    C = np.zeros_like(G)
    forest = forest_p is not None
    FI = np.zeros((n_chunks, ens.n_features if forest else 1, ens.n_outputs))
    GS = np.zeros((n_chunks, ens.n_outputs))
    parent = K.parents(ens.left, ens.right)
    p = forest_p if forest else np.zeros(ens.n_nodes)
    nodes, layout, st = ens._nodes(), ens._layout, stages(ens, obj)
    for start, block in blocks:
        rows = slice(start, start + block.shape[0])
        K.staged_pass(
            block, yv[rows], w[rows], nodes, layout, st, parent, p, forest, need_hc, G, H, C, FI, GS
        )
    return G.sum(0), H.sum(0), C.sum(0), FI.sum(0), GS.sum(0)
