"""Numba kernels for node values, PreDecomp/Saabas attributions and staged gradient passes.

Node arrays come as the ``nodes`` named tuple of ``kernels.routing`` (``_format.Nodes``);
``layout`` is the ensemble's top layout (``_format.Layout``). ``parent[n]`` is the parent of
node n (-1 at roots). The kernels that carry rows' margins through the boosting rounds (here,
``kernels.treeshap.shap_inner`` and ``kernels.unbiased``) take them as ``Stages``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._format import SQUARED
from .gradients import grad_hess, grad_hess_row
from .routing import (
    ROW_BLOCK,
    TREE_OBLIVIOUS,
    _add_leaves,
    _fill_buffer,
    _load_block,
    _route_block,
    n_blocks,
    oblivious_slots,
)


class Stages(NamedTuple):
    """How the staged passes carry a model's margins through its boosting rounds
    (``treeinner._staged.stages``).

    ``iter_ptr``: the first tree of every boosting round and the number of trees last (int64;
    trees of one round share the gradients of its start); the base margin (float64, one per
    output); the kernel objective, ``code`` and parameter vector ``prm``
    (``kernels.gradients``); and the booster's float32 conventions: ``f32``, categorical
    values read as float32, and ``f32_sum``, margins carried in float32 like its prediction
    cache. (The node arrays and layout stay arguments of their own: Numba hands a named tuple
    to the threads of a parallel loop only if it is an argument of the kernel.)
    """

    iter_ptr: np.ndarray
    base_margin: np.ndarray
    code: int
    prm: np.ndarray
    f32: bool
    f32_sum: bool


@njit(cache=True)
def parents(left, right):
    """Parent of every node (-1 at roots)."""
    out = np.full(left.shape[0], -1, dtype=np.int64)
    for n in range(left.shape[0]):
        if left[n] >= 0:
            out[left[n]] = n
            out[right[n]] = n
    return out


@njit(cache=True)
def children_first(left, right, tree_offsets):
    """All nodes, tree by tree, each tree in reversed breadth-first order (children first)."""
    order = np.empty(left.shape[0], dtype=np.int64)
    for t in range(tree_offsets.shape[0] - 1):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        # breadth-first from the root into order[lo:hi], then reverse that slice
        order[lo] = lo
        head = lo
        tail = lo + 1
        while head < tail:
            n = order[head]
            head += 1
            if left[n] >= 0:
                order[tail] = left[n]
                order[tail + 1] = right[n]
                tail += 2
        order[lo:hi] = order[lo:hi][::-1].copy()
    return order


@njit(cache=True)
def node_values(left, right, tree_offsets, value, cover, lam, out):
    """Fill ``out`` with p(t) for every node from the leaf values, bottom-up.

    p(t) = [(H_L + lam) p(L) + (H_R + lam) p(R)] / (H_t + lam): the regularized values of
    PreDecomp with ``lam`` = lambda, Saabas' cover-weighted means with ``lam`` = 0. A node whose
    weight is zero takes the plain mean of its children.
    """
    for n in children_first(left, right, tree_offsets):
        if left[n] < 0:
            out[n] = value[n]
        else:
            a = left[n]
            b = right[n]
            wa = cover[a] + lam
            wb = cover[b] + lam
            wt = cover[n] + lam
            if wt > 0.0:
                out[n] = (wa * out[a] + wb * out[b]) / wt
            else:
                out[n] = 0.5 * (out[a] + out[b])


@njit(cache=True, inline="always")
def _add_path(r, leaf, parent, feature, p, group, out):
    n = leaf
    q = parent[n]
    while q >= 0:
        out[r, feature[q], group] += p[n] - p[q]
        n = q
        q = parent[n]


@njit(parallel=True, cache=True)
def path_attribution(X, nodes, layout, parent, p, tree_lo, tree_hi, f32, out):
    """Add every row's per-feature path contributions of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_features, n_outputs) and is zeroed by the caller.
    """
    for b in prange(n_blocks(X.shape[0])):
        r0, m, idx, buf = _load_block(X, b, layout.used)
        for t in range(tree_lo, tree_hi):
            _route_block(X, r0, m, t, layout, nodes, f32, buf, idx)
            g = nodes.tree_group[t]
            for k in range(m):
                _add_path(r0 + k, np.int64(idx[k]), parent, nodes.feature, p, g, out)


@njit(cache=True, inline="always")
def _chunk_rows(ch, n_chunks, n_rows):
    """The rows ``lo:hi`` of chunk ``ch`` of ``n_chunks`` nearly equal chunks."""
    size = (n_rows + n_chunks - 1) // n_chunks
    lo = ch * size
    return lo, min(n_rows, lo + size)


@njit(cache=True, inline="always")
def _block_buffers(used, K):
    """Per-thread buffers of a staged pass over blocks of ``ROW_BLOCK`` rows: leaf indices,
    routing buffer, staged margins, their next values, gradients, hessians, gradient sums."""
    return (
        np.empty(ROW_BLOCK, dtype=np.uint64),
        np.empty((2 * used.shape[0], ROW_BLOCK), dtype=np.float64),
        np.empty((ROW_BLOCK, K)),
        np.empty((ROW_BLOCK, K)),
        np.empty((ROW_BLOCK, K)),
        np.empty((ROW_BLOCK, K)),
        np.zeros((ROW_BLOCK, K)),
    )


@njit(cache=True, inline="always")
def _start_block(X, r0, hi, used, buf, base_margin, F, gsum):
    """Load the rows from ``r0`` (at most ``ROW_BLOCK``, up to ``hi``) for routing and reset
    their margins and gradient sums; returns their number."""
    m = min(hi, r0 + ROW_BLOCK) - r0
    _fill_buffer(X, r0, m, used, buf)
    for k in range(m):
        for c in range(base_margin.shape[0]):
            F[k, c] = base_margin[c]
            gsum[k, c] = 0.0
    return m


@njit(cache=True, inline="always")
def _round_gradients(code, prm, y, r0, m, F, g, h):
    """Gradients and hessians of rows ``r0:r0 + m`` at their staged margins ``F``."""
    if F.shape[1] > 1:
        for k in range(m):
            grad_hess_row(code, prm, y[r0 + k], F[k], g[k], h[k])
    else:
        for k in range(m):
            gk, hk = grad_hess(code, prm, y[r0 + k], F[k, 0])
            g[k, 0] = gk
            h[k, 0] = hk


@njit(cache=True, inline="always")
def _copy_rows(src, dst, m):
    """``dst[:m] = src[:m]`` (margins of a block's rows)."""
    for k in range(m):
        for c in range(src.shape[1]):
            dst[k, c] = src[k, c]


@njit(parallel=True, cache=True)
def staged_pass(
    X, y, w, nodes, layout, stages, parent, p, forest, need_hc, need_split, G, H, C, SQ, N, FI, GS
):
    """One pass over the rows in boosting order with staged margins and gradients.

    For every tree, rows are routed to their leaf, and ``w * g``, ``w * h`` and ``w`` (g, h the
    gradient and hessian at the margin before the tree's boosting round) are added to the
    leaf's entries of ``G``, ``H``, ``C`` (shape (n_chunks, n_nodes): one row per chunk of
    rows, so threads never share an accumulator; ``H`` and ``C`` only with ``need_hc``).
    With ``need_split``, ``(w * g)**2`` and 1 (the row count) go to ``SQ`` and ``N`` (same
    shape; otherwise they may be (n_chunks, 1) and are not touched): the per-split standard
    errors of TreeInner.
    Trees of one round (classes, parallel trees) share the gradients of the round's start, as
    the booster computed them (``stages``, the ``Stages`` of the model).

    With ``forest``, ForestInner is accumulated too: per row, the attribution summed over trees
    (path contributions with node values ``p``) times the summed negative gradient, into
    ``FI[chunk, feature, output]``; ``GS[chunk, output]`` receives the summed w * (-g).
    """
    n_chunks = G.shape[0]
    slot_value = nodes.value[layout.bottom]  # oblivious trees: the leaf value of every slot
    for ch in prange(n_chunks):
        lo, hi = _chunk_rows(ch, n_chunks, X.shape[0])
        _staged_chunk(
            X, y, w, nodes, layout, stages, parent, p, forest, need_hc, need_split, lo, hi,
            slot_value, G[ch], H[ch], C[ch], SQ[ch], N[ch], FI[ch], GS[ch],
        )  # fmt: skip


@njit(cache=True, inline="always")
def _slot_sums(code, prm, y, w, r0, m, idx, F, Gs):
    """Add ``w g`` of rows ``r0:r0 + m`` (one output, margins ``F``) to the slots ``idx``."""
    if code == SQUARED:  # the common case without the objective's branches
        for k in range(m):
            Gs[idx[k]] += w[r0 + k] * (F[k, 0] - y[r0 + k])
        return
    for k in range(m):
        gk, _ = grad_hess(code, prm, y[r0 + k], F[k, 0])
        Gs[idx[k]] += w[r0 + k] * gk


@njit(cache=True)
def _staged_chunk(
    X, y, w, nodes, layout, stages, parent, p, forest, need_hc, need_split, lo, hi, slot_value,
    Gc, Hc, Cc, SQc, Nc, FIc, GSc,
):  # fmt: skip
    """Rows ``lo:hi`` of ``staged_pass``, into one chunk's accumulators (a function of its
    own: Numba optimises the loops of a parallel kernel's body less well)."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    value = nodes.value
    K = base_margin.shape[0]
    n_feat = FIc.shape[0]
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    A = np.zeros((ROW_BLOCK, n_feat, K)) if forest else np.zeros((1, 1, 1))
    # one output, one tree per round, only G: gradient, leaf sum and margin in one loop; the
    # oblivious trees' sums go to their slots of the layout (no leaf look-up per row) and are
    # moved to the leaves at the end
    fast = K == 1 and not forest and not need_hc and not need_split
    Gs = np.zeros(layout.bottom.shape[0] if fast else 0)
    for r0 in range(lo, hi, ROW_BLOCK):
        m = _start_block(X, r0, hi, layout.used, buf, base_margin, F, gsum)
        if forest:
            A[:m] = 0.0
        for it in range(iter_ptr.shape[0] - 1):
            t0 = iter_ptr[it]
            if fast and iter_ptr[it + 1] == t0 + 1:
                if layout.tree_flags[t0] & TREE_OBLIVIOUS:
                    oblivious_slots(t0, layout, buf, idx)
                    _slot_sums(code, prm, y, w, r0, m, idx, F, Gs)
                    _add_leaves(F, idx, slot_value, m, 0, f32_sum)
                    continue
                _route_block(X, r0, m, t0, layout, nodes, f32, buf, idx)
                for k in range(m):
                    leaf = np.int64(idx[k])
                    gk, _ = grad_hess(code, prm, y[r0 + k], F[k, 0])
                    Gc[leaf] += w[r0 + k] * gk
                    if f32_sum:
                        F[k, 0] = np.float32(F[k, 0]) + np.float32(value[leaf])
                    else:
                        F[k, 0] += value[leaf]
                continue
            _round_gradients(code, prm, y, r0, m, F, g, h)
            _copy_rows(F, delta, m)
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                _route_block(X, r0, m, t, layout, nodes, f32, buf, idx)
                c = nodes.tree_group[t]
                for k in range(m):
                    Gc[np.int64(idx[k])] += w[r0 + k] * g[k, c]
                _add_leaves(delta, idx, value, m, c, f32_sum)
                if need_hc:
                    for k in range(m):
                        leaf = np.int64(idx[k])
                        wk = w[r0 + k]
                        Hc[leaf] += wk * h[k, c]
                        Cc[leaf] += wk
                if need_split:
                    for k in range(m):
                        leaf = np.int64(idx[k])
                        v = w[r0 + k] * g[k, c]
                        SQc[leaf] += v * v
                        Nc[leaf] += 1.0
                if forest:
                    for k in range(m):
                        gsum[k, c] -= g[k, c]
                        _add_path(k, np.int64(idx[k]), parent, nodes.feature, p, c, A)
            _copy_rows(delta, F, m)
        if forest:
            for k in range(m):
                wk = w[r0 + k]
                for c in range(K):
                    s = wk * gsum[k, c]
                    GSc[c] += s
                    for j in range(n_feat):
                        FIc[j, c] += A[k, j, c] * s
    for s in range(Gs.shape[0]):
        if Gs[s] != 0.0:
            Gc[layout.bottom[s]] += Gs[s]


@njit(cache=True)
def subtree_sums(left, right, tree_offsets, leaf_sums, out):
    """``out[n]`` = sum of ``leaf_sums`` over the leaves below n (n itself at a leaf)."""
    for n in children_first(left, right, tree_offsets):
        if left[n] < 0:
            out[n] = leaf_sums[n]
        else:
            out[n] = out[left[n]] + out[right[n]]
