"""Numba kernels of the centred initial form of ForestInner (``treeinner._centred``).

The centred score needs two passes over the evaluation rows, each a sum over rows:

1. ``leaf_sums``: per leaf, the rows with positive weight that reach it, their weights, and
   their weights times the row's label term ``r`` of the leaf's output, from which the node
   means of the leaf values and of ``r`` follow;
2. ``centred_moments``: the per-row terms ``w_i sum_edges (a_e r_i + b_e)`` (the coefficients
   ``a``, ``b`` of the edges on the row's path, merged per leaf into lists by
   ``kernels.moments.leaf_lists``) folded into per-feature sums of the terms and of their
   squares.

``r`` is constant across the trees of one output (the negative gradient at the initial
margin), so neither pass carries margins through the boosting rounds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._threads import n_chunks, run_chunks
from .moments import MODE_GH, _add_list, _fold_rows, _touch
from .routing import (
    ROW_BLOCK,
    block_buffers,
    chunk_range,
    general_nodes,
    load_block,
    n_blocks,
    route,
    route_top,
    top_arrays,
)


@njit(cache=True, nogil=True)
def _leaf_sums_chunk(X, r, w, nodes, general, layout, f32, CNT, W, WR, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``leaf_sums`` into ``CNT[ch]`` etc."""
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    idx, buf = block_buffers(layout.used)
    cnt = CNT[ch]
    ws = W[ch]
    wr = WR[ch]
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for t in range(nodes.tree_group.shape[0]):
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32, buf, idx)
            c = nodes.tree_group[t]
            for k in range(m):
                wi = w[r0 + k]
                if wi > 0.0:
                    leaf = np.int64(idx[k])
                    cnt[leaf] += 1.0
                    ws[leaf] += wi
                    wr[leaf] += wi * r[r0 + k, c]


def leaf_sums(X, r, w, nodes, layout, f32, n_nodes):
    """Per leaf (0 at inner nodes): the count, the weight sum and the sum of ``w r`` of the
    rows of ``X`` with positive weight ``w`` that reach it; ``r`` (n_rows, n_outputs) is read
    at the leaf's output. Returns an array of shape (3, n_nodes). Spread over threads by
    blocks of rows."""
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(nodes.tree_group.shape[0], 1), nb)
    CNT = np.zeros((nch, n_nodes))
    W = np.zeros((nch, n_nodes))
    WR = np.zeros((nch, n_nodes))
    run_chunks(_leaf_sums_chunk, nch, X, r, w, nodes, general_nodes(nodes, layout), layout, f32,
               CNT, W, WR)  # fmt: skip
    return np.stack([CNT.sum(0), W.sum(0), WR.sum(0)])


@njit(cache=True, nogil=True)
def _moments_chunk(X, r, w, nodes, general, layout, f32, ptr, col, ca, cb, dense, S1, S2, S2T,
                   SWU, ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``centred_moments`` into ``S1[ch]`` etc."""
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    idx, buf = block_buffers(layout.used)
    K = r.shape[1]
    n_out = S1.shape[2]
    s1 = S1[ch]
    s2 = S2[ch]
    s2t = S2T[ch]
    swu = SWU[ch]
    U = np.zeros((ROW_BLOCK, K, n_out))
    nsp = 1 if dense else ROW_BLOCK
    touched = np.empty((nsp, n_out), dtype=np.int64)
    mark = np.zeros((nsp, n_out), dtype=np.uint8)
    nt = np.zeros(nsp, dtype=np.int64)
    tot = np.zeros(n_out)
    gsum = np.zeros((1, K))  # the fold's ForestInner factor, unused here
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for t in range(nodes.tree_group.shape[0]):
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32, buf, idx)
            c = nodes.tree_group[t]
            for k in range(m):
                leaf = np.int64(idx[k])
                p0 = ptr[leaf]
                p1 = ptr[leaf + 1]
                if not dense:
                    _touch(touched, nt, mark, k, p0, p1, col)
                _add_list(U[k, c], p0, p1, col, ca, cb, r[r0 + k, c], 1.0, MODE_GH)
        _fold_rows(U, touched, nt, mark, dense, gsum, w, r0, m, False, s1, s2, s2t, swu, tot)


def centred_moments(X, r, w, nodes, layout, f32, ptr, col, ca, cb, dense, S1, S2, S2T, SWU):
    """Sums over the rows of X of the terms ``u = w_i sum_t [tree t of output c] sum_(entries
    e of the list of i's leaf in t) (ca[e] r[i, c] + cb[e])`` and of their squares, per
    output feature o and output c, into ``S1[:, c, o]``, ``S2``, ``S2T`` (the total over the
    outputs, squared) and ``SWU`` (w u); one set of accumulators per chunk (the first axis).
    ``ptr``, ``col``, ``ca``, ``cb``: the leaf lists (``kernels.moments.leaf_lists``, features
    renumbered to the ones used); ``dense``: fold every used feature of a row after a block,
    else only the ones it touched."""
    run_chunks(_moments_chunk, S1.shape[0], X, r, w, nodes, general_nodes(nodes, layout), layout,
               f32, ptr, col, ca, cb, bool(dense), S1, S2, S2T, SWU)  # fmt: skip
