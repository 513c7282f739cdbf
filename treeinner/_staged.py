"""The staged pass over a data set: per-node gradient sums at the boosting-round margins."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._dask import is_dask, map_add
from ._errors import InputError, InputTypeError
from ._stats import Moments
from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .kernels import histogram as KH
from .kernels import moments as KM
from .kernels._threads import n_chunks
from .kernels.routing import n_blocks
from .objectives import Objective, get_objective


def _weights(sample_weight: Any, n: int) -> np.ndarray:
    """The row weights as a writable float64 array of shape (n,), checked: numbers, finite,
    non-negative, not all 0 (where there are rows); all 1 for None."""
    if sample_weight is None:
        return np.ones(n)
    try:  # a copy: writable, one kernel signature
        w = np.array(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"sample_weight must be an array of {n} numbers: {e}") from None
    if w.ndim == 0:
        raise InputTypeError(
            f"sample_weight must be an array of {n} numbers, got {type(sample_weight).__name__}."
        )
    if w.shape != (n,):
        raise InputError(f"sample_weight must have shape ({n},) like X's rows, got {w.shape}.")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("sample_weight must be finite and non-negative.")
    if n and not np.any(w > 0):
        raise InputError("sample_weight is zero for every row: no row counts.")
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
    """Objective, row count, row blocks, checked labels and weights of a staged pass."""
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    yv = obj.check_labels(y, n)
    w = _weights(sample_weight, n)
    return obj, n, blocks, yv, w


def initial_gradients(ens: TreeEnsemble, y: Any, n: int) -> np.ndarray:
    """The gradient g of every row and output at the initial margin F_0 (the base margin, the
    prediction before the first tree), for the n labels ``y``: (n, n_outputs)."""
    obj = get_objective(ens)
    yv = np.asarray(obj.check_labels(y, n), dtype=np.float64)
    F0 = np.ascontiguousarray(np.tile(ens.base_margin, (n, 1)), dtype=np.float64)
    gh = np.empty((ens.n_outputs, n, 2))
    KH.round_gradients(obj.code, obj.prm, yv, np.ones(n), F0, gh)
    return np.ascontiguousarray(gh[:, :, 0].T)


def _run_staged(ens, X, y, sample_weight, forest, need_hc, need_split):
    """The staged pass behind ``_staged`` and ``split_sums``."""
    obj, n, blocks, yv, w = _inputs(ens, X, y, sample_weight)
    nch = n_chunks(n * max(ens.n_trees, 1), n_blocks(n))
    G = np.zeros((nch, ens.n_nodes))
    H = np.zeros((nch, ens.n_nodes if need_hc else 1))
    C = np.zeros_like(H)
    SQ = np.zeros((nch, ens.n_nodes if need_split else 1))
    N = np.zeros_like(SQ)
    LS = np.zeros((nch, ens.n_nodes if forest else 1))
    GS = np.zeros((nch, ens.n_outputs))
    nodes, layout, st = ens._nodes(), ens._layout, stages(ens, obj)
    for start, block in blocks:
        rows = slice(start, start + block.shape[0])
        K.staged_pass(
            block, yv[rows], w[rows], nodes, layout, st, bool(forest), bool(need_hc),
            bool(need_split), G, H, C, SQ, N, LS, GS,
        )  # fmt: skip
    return n, G.sum(0), H.sum(0), C.sum(0), SQ.sum(0), N.sum(0), LS.sum(0), GS.sum(0)


def _staged(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    sample_weight: Any,
    forest: bool = False,
    need_hc: bool = True,
):
    """Run the staged pass: per-leaf sums of w g (and, with ``need_hc``, of w h and w), and
    with ``forest`` the ForestInner sums: per leaf the sum of ``w S`` over the rows reaching
    it (S a row's summed negative gradient over the trees of the leaf's output), and per
    output the sum of ``w S`` (``kernels.attribution.staged_pass``). Returns
    ``G, H, C, LS, GS`` (``H``, ``C`` of shape (1,) without ``need_hc``, ``LS`` without
    ``forest``)."""
    _, G, H, C, _, _, LS, GS = _run_staged(ens, X, y, sample_weight, forest, need_hc, False)
    return G, H, C, LS, GS


def split_sums(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Per-leaf sums for per-split held-out statistics, from one staged pass.

    Returns
    -------
    n : int
        Number of rows.
    G, SQ, N : ndarray of shape (n_nodes,)
        Per leaf (0 at inner nodes): the sums over the rows reaching it of ``w g``, of
        ``(w g)**2`` and of 1 (g the staged gradient of the leaf's tree, as in ``_staged``).
    """
    n, G, _, _, SQ, N, _, _ = _run_staged(ens, X, y, sample_weight, False, False, True)
    return n, G, SQ, N


def _credit_csr(ens: TreeEnsemble) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The credit of kernel columns to output features in CSR form (identity without an
    input map): row pointers, output features, weights, and the number of output features."""
    if ens.input_map is None:
        f = ens.n_features
        return np.arange(f + 1, dtype=np.int64), np.arange(f, dtype=np.int64), np.ones(f), f
    credit = np.asarray(ens.input_map.credit, dtype=np.float64)
    rows, cols = np.nonzero(credit)  # row-major order: CSR by construction
    ptr = np.zeros(credit.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=credit.shape[0]), out=ptr[1:])
    return ptr, cols.astype(np.int64), credit[rows, cols].copy(), credit.shape[1]


def _leaf_lists(ens: TreeEnsemble, dg: np.ndarray, dh: np.ndarray):
    """Every leaf's path as a merged list of (feature, dg, dh) coefficients
    (``kernels.moments.leaf_lists``), over the output features the lists use, renumbered
    ``0..len(used) - 1``; returns ``ptr, col, cg, ch, used, n_output_features``."""
    dg = np.ascontiguousarray(dg, dtype=np.float64)
    dh = np.ascontiguousarray(dh, dtype=np.float64)
    if dg.shape != (ens.n_nodes,) or dh.shape != (ens.n_nodes,):
        raise InputError(
            f"dg and dh must have shape ({ens.n_nodes},); got {dg.shape} and {dh.shape}."
        )
    cptr, cidx, cval, n_out = _credit_csr(ens)
    parent = K.parents(ens.left, ens.right)
    ptr = np.empty(ens.n_nodes + 1, dtype=np.int64)
    size = KM.leaf_list_ptr(ens.left, ens.feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr)
    col = np.empty(size, dtype=np.int32)
    cg = np.empty(size)
    ch = np.empty(size)
    KM.leaf_lists(ens.left, ens.feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr, col, cg, ch)
    used, col = np.unique(col, return_inverse=True)
    return ptr, col.astype(np.int32), cg, ch, used, n_out


def _edge_pass(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    sample_weight: Any,
    dg: np.ndarray,
    dh: np.ndarray,
    forest: bool,
    dense: bool | None = None,
) -> Moments:
    """``edge_moments``; with ``forest`` the ForestInner terms ``w R GS`` instead (R the
    credited sum over trees of ``dg`` along the row's paths, GS the sum of ``-g``).
    ``dense``: fold every used feature of a row (True) or the ones it touched (False); None
    chooses by the expected number of list entries per row."""
    ptr, col, cg, ch, used, n_out = _leaf_lists(ens, dg, dh)
    # the hessian term only where some leaf list has one
    mode = KM.MODE_FOREST if forest else KM.MODE_GH if np.any(ch != 0.0) else KM.MODE_G
    obj, n, blocks, yv, w = _inputs(ens, X, y, sample_weight)
    nodes, layout, st = ens._nodes(), ens._layout, stages(ens, obj)

    def run(rows: slice, block: np.ndarray, dense: bool, acc: tuple) -> None:
        KM.edge_moments(
            block, yv[rows], w[rows], nodes, layout, st, ptr, col, cg, ch, mode, dense, *acc
        )

    return list_moments(ens, n, w, blocks, col, used, n_out, run, dense)


def list_moments(
    ens: TreeEnsemble,
    n: int,
    w: np.ndarray,
    blocks: Any,
    col: np.ndarray,
    used: np.ndarray,
    n_out: int,
    run: Any,
    dense: bool | None = None,
) -> Moments:
    """The Moments of per-row terms built from per-leaf lists (``_leaf_lists``), from a
    kernel that folds them into per-chunk sums: ``run(rows, block, dense, (S1, S2, S2T,
    SWU))`` for every block of rows. ``dense``: fold every used feature of a row (True) or
    the ones it touched (False); None chooses by the expected number of list entries per
    row."""
    Kout = ens.n_outputs
    n_used = max(1, used.size)
    # a row's list entries over all trees: fold all used features after a block when a row
    # touches most of them anyway, else only the ones each row touched
    n_leaves = int(np.sum(ens.left < 0))
    per_row = col.size / max(n_leaves, 1) * ens.n_trees
    if dense is None:
        dense = n_used * Kout <= 2.0 * per_row
    nch = n_chunks(n * max(ens.n_trees, 1), n_blocks(n), per_thread=8)
    S1 = np.zeros((nch, Kout, n_used))
    S2 = np.zeros_like(S1)
    SWU = np.zeros_like(S1)
    S2T = np.zeros((nch, n_used))
    for start, block in blocks:
        run(slice(start, start + block.shape[0]), block, bool(dense), (S1, S2, S2T, SWU))

    def full(a: np.ndarray) -> np.ndarray:  # (K, n_used) or (n_used,) -> output features first
        out = np.zeros((n_out,) + a.shape[:-1])
        out[used] = a[..., : used.size].T
        return out

    s2 = S2.sum(0)
    return Moments(
        s1=full(S1.sum(0)),
        s2=full(s2),
        s2_total=full(S2T.sum(0) if Kout > 1 else s2[0]),
        n=int(n),
        sw=float(w.sum()),
        sw2=float(w @ w),
        swu=full(SWU.sum(0)),
    )


def edge_moments(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    sample_weight: Any,
    dg: np.ndarray,
    dh: np.ndarray,
) -> Moments:
    """Row-additive moments of per-row terms that are sums over the edges of the rows' paths.

    For row i, output feature j and output c the term is ::

        u[i, j, c] = w_i * sum_{t: tree_group[t] == c} sum_{edges (q -> n) of i's path in t}
                     credit(feature[q] -> j) * (dg[n] * g_{i,t} + dh[n] * h_{i,t})

    with g, h the gradient and hessian at the staged margin before tree t's boosting round,
    exactly as the staged pass computes them (trees of one round share them; the booster's
    float32 conventions), and credit the identity, or ``ens.input_map.credit`` (kernel column
    -> output features) where the model has one. One pass over the rows; memory beyond the
    input is O(threads x ROW_BLOCK x features x outputs).

    Parameters
    ----------
    ens : TreeEnsemble
    X : array-like, DataFrame or scipy sparse matrix
        The rows (held-out data).
    y : array-like of shape (n_samples,)
        Their labels, valid for the model's objective.
    sample_weight : array-like of shape (n_samples,) or None
        Row weights w (None: 1).
    dg, dh : ndarray of float64, shape (n_nodes,)
        Coefficients of the gradient and of the hessian of every edge, indexed by the edge's
        child node (entries at roots are ignored).

    Returns
    -------
    Moments
        ``s1``, ``s2``, ``swu`` (n_output_features, n_outputs), ``s2_total``
        (n_output_features,), ``n``, ``sw``, ``sw2`` of the terms (``treeinner._stats``).
        For a Dask collection X, added up over its partitions (``_dask.map_add``).
    """
    if is_dask(X):
        return map_add(_edge_moments_part, (ens, dg, dh), X, y, sample_weight)
    return _edge_pass(ens, X, y, sample_weight, dg, dh, False)


def _edge_moments_part(shared: tuple, X: Any, y: Any, sample_weight: Any) -> Moments:
    ens, dg, dh = shared
    return _edge_pass(ens, X, y, sample_weight, dg, dh, False)
