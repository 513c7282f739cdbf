"""Numba kernels for node values, PreDecomp/Saabas attributions and staged gradient passes.

Node arrays come as the ``nodes`` named tuple of ``kernels.routing`` (``_format.Nodes``);
``layout`` is the ensemble's top layout (``_format.Layout``). ``parent[n]`` is the parent of
node n (-1 at roots). The kernels that carry rows' margins through the boosting rounds (here,
``kernels.treeshap.shap_inner`` and ``kernels.unbiased``) take them as ``Stages``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .._format import SQUARED
from ._threads import n_chunks, run_chunks
from .gradients import grad_hess, grad_hess_row
from .routing import (
    ROW_BLOCK,
    _add_leaves,
    _fill_buffer,
    block_buffers,
    chunk_range,
    general_nodes,
    load_block,
    n_blocks,
    route,
    route_top,
    top_arrays,
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


# The node-level passes below are NumPy, level by level: they cost microseconds per call on
# any model, and as Numba kernels they cost a fresh install a second of compilation.
def parents(left, right):
    """Parent of every node (-1 at roots)."""
    out = np.full(left.shape[0], -1, dtype=np.int64)
    inner = np.flatnonzero(left >= 0)
    out[left[inner]] = inner
    out[right[inner]] = inner
    return out


def _inner_levels(left, right, tree_offsets):
    """The inner nodes of every tree grouped by depth (one int64 array per depth, all trees
    together), deepest first: an order in which every node comes after its children."""
    frontier = np.asarray(tree_offsets[:-1], dtype=np.int64)
    levels = []
    while frontier.size:
        inner = frontier[left[frontier] >= 0]
        if not inner.size:
            break
        levels.append(inner)
        frontier = np.concatenate((left[inner], right[inner])).astype(np.int64)
    return levels[::-1]


def node_values(left, right, tree_offsets, value, cover, lam, out):
    """Fill ``out`` with p(t) for every node from the leaf values, bottom-up.

    p(t) = [(H_L + lam) p(L) + (H_R + lam) p(R)] / (H_t + lam): the regularized values of
    PreDecomp with ``lam`` = lambda, Saabas' cover-weighted means with ``lam`` = 0. A node whose
    weight is zero takes the plain mean of its children.
    """
    leaf = left < 0
    out[leaf] = value[leaf]
    for n in _inner_levels(left, right, tree_offsets):
        a = left[n]
        b = right[n]
        wt = cover[n] + lam
        v = 0.5 * (out[a] + out[b])
        pos = wt > 0.0
        a, b = a[pos], b[pos]
        v[pos] = ((cover[a] + lam) * out[a] + (cover[b] + lam) * out[b]) / wt[pos]
        out[n] = v


@njit(cache=True, inline="always")
def _add_path(r, leaf, parent, feature, p, group, out):
    n = leaf
    q = parent[n]
    while q >= 0:
        out[r, feature[q], group] += p[n] - p[q]
        n = q
        q = parent[n]


@njit(cache=True, nogil=True)
def _path_chunk(X, nodes, general, layout, parent, p, tree_lo, tree_hi, f32, out, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``path_attribution``."""
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    idx, buf = block_buffers(layout.used)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for t in range(tree_lo, tree_hi):
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32, buf, idx)
            g = nodes.tree_group[t]
            for k in range(m):
                _add_path(r0 + k, np.int64(idx[k]), parent, nodes.feature, p, g, out)


def path_attribution(X, nodes, layout, parent, p, tree_lo, tree_hi, f32, out):
    """Add every row's per-feature path contributions of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_features, n_outputs) and is zeroed by the caller. Spread over
    threads by blocks of rows (``kernels._threads``).
    """
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(tree_hi - tree_lo, 1), nb)
    run_chunks(_path_chunk, nch, X, nodes, general_nodes(nodes, layout), layout, parent, p,
               tree_lo, tree_hi, f32, out)  # fmt: skip


@njit(cache=True, inline="always")
def _block_buffers(used, K):
    """Per-thread buffers of a staged pass over blocks of ``ROW_BLOCK`` rows: leaf indices,
    routing buffer, staged margins, their next values, gradients, hessians, gradient sums."""
    idx, buf = block_buffers(used)
    return (
        idx,
        buf,
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
def round_start(code, prm, y, r0, m, F, delta, g, h, n_round_trees):
    """Gradients and hessians of a boosting round at the margins ``F`` of a block's rows, and
    the margins its trees add to: ``F`` itself for a round of one tree, else ``delta``, a copy
    (so that every tree of the round sees the round's gradients; copy it back after)."""
    _round_gradients(code, prm, y, r0, m, F, g, h)
    if n_round_trees > 1:
        _copy_rows(F, delta, m)
        return delta
    return F


@njit(cache=True, inline="always")
def _copy_rows(src, dst, m):
    """``dst[:m] = src[:m]`` (margins of a block's rows)."""
    for k in range(m):
        for c in range(src.shape[1]):
            dst[k, c] = src[k, c]


def staged_pass(
    X, y, w, nodes, layout, stages, forest, need_hc, need_split, G, H, C, SQ, N, LS, GS
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

    With ``forest``, the sums ForestInner needs: ``w * S`` is added to the entry of ``LS``
    (shape (n_chunks, n_nodes)) of every leaf the row reaches, S the row's summed negative
    gradient over the trees of the leaf's output (all rounds), and ``GS[chunk, output]``
    receives the summed ``w * S``. (ForestInner is then, per output, the sum over nodes n of
    ``(p(n) - p(parent(n)))`` times the subtree sum of ``LS`` at n, credited to the feature of
    the parent's split.) Otherwise ``LS`` may be (n_chunks, 1). With ``forest``, ``G`` is
    filled only where the general kernel runs: ForestInner does not need it.

    The rows are cut into ``n_chunks`` chunks of row blocks spread over threads
    (``kernels._threads``). The common case (one output, one tree per round, only ``G`` or
    the ForestInner sums) runs a kernel of its own, and so do the sums of ``G``, ``H``, ``C``
    of such models (unbiased gain, PreDecomp values from a reference): each compiles only
    when first used.
    """
    nch = G.shape[0]
    single = (
        stages.base_margin.shape[0] == 1
        and stages.iter_ptr.shape[0] - 1 == nodes.tree_group.shape[0]
        and not need_split
    )
    # squared error: the hessian is 1, so the sums of w h are the sums of w (same order, so
    # bit for bit) and the fast kernel's counts give both
    counts = need_hc and stages.code == SQUARED and not forest
    if single and (counts or not need_hc) and nodes.left.shape[0] < 2**32:  # uint32 leaves
        run_chunks(_staged_fast_chunk, nch, X, y, w, nodes, general_nodes(nodes, layout), layout,
                   stages, forest, counts, G, C, LS, GS)  # fmt: skip
        if counts:
            H[...] = C
    elif single and not forest:
        run_chunks(_staged_hc_chunk, nch, X, y, w, nodes, layout, stages, G, H, C)
    else:
        run_chunks(_staged_chunk, nch, X, y, w, nodes, layout, stages, forest, need_hc,
                   need_split, G, H, C, SQ, N, LS, GS)  # fmt: skip


@njit(cache=True, nogil=True)
def _staged_fast_chunk(X, y, w, nodes, general, layout, stages, forest, counts, G, C, LS, GS,
                       ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``staged_pass`` in its common case: one output,
    one tree per round, only the leaf sums of ``w g`` (with ``counts`` also of ``w``, into
    ``C``), or, with ``forest``, those of ``w S``.

    Gradient, leaf sum and margin in one loop per tree. With ``forest`` every row's leaf in
    every tree is recorded for the block (n_trees x ``ROW_BLOCK``) and, once the block's S is
    final, ``w S`` is added to those leaves.
    """
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    n_trees = nodes.tree_group.shape[0]
    value = nodes.value
    Gc = G[ch]
    Cc = C[ch]
    LSc = LS[ch]
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    rec = np.empty((n_trees if forest else 0, ROW_BLOCK), dtype=np.uint32)
    idx, buf = block_buffers(layout.used)
    F = np.empty(ROW_BLOCK)
    S = np.empty(ROW_BLOCK)
    gs = 0.0
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for k in range(m):
            F[k] = base_margin[0]
            S[k] = 0.0
        for t in range(n_trees):
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32, buf, idx)
            # gradient, sum and margin in one loop per tree (a branch inside it, or the sums
            # in a loop of their own, measured 8-20% slower): ForestInner's S, or the leaf sums
            # of w g; grad_hess without a squared-error shortcut (the branch costs ~8%)
            if forest:
                for k in range(m):
                    leaf = np.int64(idx[k])
                    gk, _ = grad_hess(code, prm, y[r0 + k], F[k])
                    S[k] -= gk
                    rec[t, k] = np.uint32(leaf)
                    if f32_sum:
                        F[k] = np.float32(F[k]) + np.float32(value[leaf])
                    else:
                        F[k] += value[leaf]
            else:
                for k in range(m):
                    leaf = np.int64(idx[k])
                    gk, _ = grad_hess(code, prm, y[r0 + k], F[k])
                    Gc[leaf] += w[r0 + k] * gk
                    if f32_sum:
                        F[k] = np.float32(F[k]) + np.float32(value[leaf])
                    else:
                        F[k] += value[leaf]
            if counts:  # (never with forest)
                for k in range(m):
                    Cc[idx[k]] += w[r0 + k]
        if forest:
            for k in range(m):
                S[k] *= w[r0 + k]
                gs += S[k]
            for t in range(n_trees):
                for k in range(m):
                    LSc[rec[t, k]] += S[k]
    if forest:
        GS[ch, 0] += gs


@njit(cache=True, nogil=True)
def _staged_hc_chunk(X, y, w, nodes, layout, stages, G, H, C, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``staged_pass`` for one output and one tree per
    round with the sums of ``w g``, ``w h`` and ``w`` (the general kernel's additions, in
    its order; routed by the shared ``routing.route``)."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    value = nodes.value
    Gc = G[ch]
    Hc = H[ch]
    Cc = C[ch]
    idx, buf = block_buffers(layout.used)
    F = np.empty(ROW_BLOCK)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for k in range(m):
            F[k] = base_margin[0]
        for t in range(nodes.tree_group.shape[0]):
            route(X, r0, m, t, layout, nodes, f32, buf, idx)
            for k in range(m):
                i = idx[k]
                gk, hk = grad_hess(code, prm, y[r0 + k], F[k])
                wk = w[r0 + k]
                Gc[i] += wk * gk
                Hc[i] += wk * hk
                Cc[i] += wk
                if f32_sum:
                    F[k] = np.float32(F[k]) + np.float32(value[i])
                else:
                    F[k] += value[i]


@njit(cache=True, nogil=True)
def _staged_chunk(X, y, w, nodes, layout, stages, forest, need_hc, need_split, G, H, C, SQ, N,
                  LS, GS, ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``staged_pass``: any model (several outputs,
    several trees per round), with the hessian and count sums or the split sums as asked."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    value = nodes.value
    tree_group = nodes.tree_group
    K = base_margin.shape[0]
    n_trees = tree_group.shape[0]
    Gc = G[ch]
    Hc = H[ch]
    Cc = C[ch]
    SQc = SQ[ch]
    Nc = N[ch]
    LSc = LS[ch]
    GSc = GS[ch]
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    rec = np.empty((n_trees if forest else 0, ROW_BLOCK), dtype=np.uint64)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0 = b * ROW_BLOCK
        m = _start_block(X, r0, X.shape[0], layout.used, buf, base_margin, F, gsum)
        for it in range(iter_ptr.shape[0] - 1):
            t0 = iter_ptr[it]
            t1 = iter_ptr[it + 1]
            D = round_start(code, prm, y, r0, m, F, delta, g, h, t1 - t0)
            for t in range(t0, t1):
                route(X, r0, m, t, layout, nodes, f32, buf, idx)
                c = tree_group[t]
                for k in range(m):
                    Gc[np.int64(idx[k])] += w[r0 + k] * g[k, c]
                _add_leaves(D, idx, value, m, c, f32_sum)
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
                        rec[t, k] = idx[k]
            if t1 - t0 > 1:
                _copy_rows(delta, F, m)
        if forest:
            for k in range(m):
                wk = w[r0 + k]
                for c in range(K):
                    gsum[k, c] *= wk
                    GSc[c] += gsum[k, c]
            for t in range(n_trees):
                c = tree_group[t]
                for k in range(m):
                    LSc[rec[t, k]] += gsum[k, c]


def subtree_sums(left, right, tree_offsets, leaf_sums, out):
    """``out[n]`` = sum of ``leaf_sums`` over the leaves below n (n itself at a leaf)."""
    leaf = left < 0
    out[leaf] = leaf_sums[leaf]
    for n in _inner_levels(left, right, tree_offsets):
        out[n] = out[left[n]] + out[right[n]]
