"""Numba kernels for interventional TreeSHAP against a background data set.

The interventional value of a set S of features for row x is the mean over background rows b
of the model's margin at the hybrid row (x on S, b elsewhere). For one leaf of value v whose
path tests the distinct players F (d = |F|; repeated splits on one player merged), write
``a`` for the players whose every condition on the path x satisfies and ``m_b`` for b's. The
hybrid reaches the leaf iff every player of F is satisfied by the row it is taken from, so
the leaf's game for (x, b) is non-zero only when ``a | m_b == F``; then the players
``S_x = F \\ m_b`` (x satisfies, b does not) and ``S_b = F \\ a`` (b satisfies, x does not)
are the only ones that matter, and their Shapley values are

    phi_i = +v w(|S_x| - 1, |S_b|)  for i in S_x,     phi_i = -v w(|S_x|, |S_b| - 1)  for i in S_b,

with w(p, q) = p! q! / (p + q + 1)!. Given x, ``S_b`` is fixed, and b enters only through
``c = F \\ m_b``, which must be a subset of ``a``. So per leaf the background is summarised
by the histogram N[c] (2^d counts) and its subset sums by size, P[a][k] = sum of N[c] over
c subset of a with |c| = k (a ranked zeta transform, O(2^d d^2)); three tables per leaf,

    U[a] = sum_k P[a][k] w(k, d - |a| - 1),
    Y[a] = sum_{k >= 1} P[a][k] w(k - 1, d - |a|),
    Z[a] = sum_{k >= 1} P[a][k] w(k - 1, d - |a| - 1),

give x's values: players outside ``a`` get -v U[a], a player i in ``a`` gets
v (Y[a] - Z[a without i]) (the b with i in c are the subsets of a minus those of a \\ {i}).
Explaining a row then costs O(N + L (D + d)) per tree (N nodes, L leaves, D depth), whatever
the background size; the background costs O(B (N + L D) + sum over leaves 2^d d^2) once.
Leaves with more than ``MAX_TABLE_BITS`` distinct players, or whose 2^d table entries exceed
8 times the background size (``treeinner.interventional``), keep every background row's mask
instead and are summed over the background directly (O(B d) per row and leaf), so memory
stays O(leaves x min(2^d, 8 B)).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._format import MISSING_NONE, MISSING_ZERO, NUMERIC
from ._threads import n_chunks, run_chunks
from .attribution import _block_buffers, _copy_rows, _start_block
from .routing import (
    ROW_BLOCK,
    _add_leaves,
    _goes_left,
    chunk_range,
    general_nodes,
    route,
    route_top,
    top_arrays,
)
from .treeshap import _fold_rows, _gradients

#: Leaves with more distinct players on their path than this are never tabulated.
MAX_TABLE_BITS = 12
#: Paths with more distinct players than this are refused (masks are 64-bit words).
MAX_PATH_PLAYERS = 62


@njit(cache=True)
def leaf_paths(left, right, node_player, tree_offsets, max_depth, leaf_tree, leaf_node,
               leaf_d, cond_off, cond_node, cond_left, cond_bit, pl_off, pl):  # fmt: skip
    """Fill the leaf arrays (sized by the caller: one entry per leaf, conditions and
    players at most depth per leaf) with every leaf's path: its tree, node, number of
    distinct players d, its conditions (node, whether the path goes left there, the bit of
    the node's player among the leaf's players) and its players in bit order. Returns the
    number of conditions and of players written, or (-1, tree) for a path with more than
    ``MAX_PATH_PLAYERS`` distinct players."""
    stack = np.empty(max_depth + 2, dtype=np.int64)
    sdepth = np.empty(max_depth + 2, dtype=np.int64)
    path = np.empty(max_depth + 1, dtype=np.int64)
    pdir = np.empty(max_depth + 1, dtype=np.uint8)
    nl = 0
    nc = 0
    npl = 0
    cond_off[0] = 0
    pl_off[0] = 0
    for t in range(tree_offsets.shape[0] - 1):
        sp = 1
        stack[0] = tree_offsets[t]
        sdepth[0] = 0
        while sp > 0:
            sp -= 1
            n = stack[sp]
            dep = sdepth[sp]
            if dep > 0:
                parent = path[dep - 1]
                pdir[dep - 1] = np.uint8(1 if left[parent] == n else 0)
            if left[n] >= 0:
                path[dep] = n
                stack[sp] = right[n]
                sdepth[sp] = dep + 1
                stack[sp + 1] = left[n]
                sdepth[sp + 1] = dep + 1
                sp += 2
                continue
            d = 0
            for k in range(dep):
                p = node_player[path[k]]
                bit = -1
                for j in range(d):
                    if pl[npl + j] == p:
                        bit = j
                        break
                if bit < 0:
                    if d >= MAX_PATH_PLAYERS:
                        return -1, t
                    pl[npl + d] = p
                    bit = d
                    d += 1
                cond_node[nc] = path[k]
                cond_left[nc] = pdir[k]
                cond_bit[nc] = bit
                nc += 1
            npl += d
            leaf_tree[nl] = t
            leaf_node[nl] = n
            leaf_d[nl] = d
            nl += 1
            cond_off[nl] = nc
            pl_off[nl] = npl
    return nc, npl


@njit(cache=True, inline="always")
def _node_dirs(X, row, lo, hi, nodes, f32, kind, nan_left, feature, bound, dirs):
    """``dirs[n - lo]`` = whether row ``row`` of ``X`` goes left at node n, for the inner
    nodes n of ``lo:hi``. ``kind[n]``: 0 a leaf, 1 a numeric split whose NaN goes
    ``nan_left[n]`` and whose other values go left at ``<= bound[n]``, 2 any other split
    (``routing._goes_left``)."""
    for n in range(lo, hi):
        k = kind[n]
        if k == 1:
            v = X[row, feature[n]]
            if v != v:
                dirs[n - lo] = nan_left[n]
            else:
                dirs[n - lo] = np.uint8(v <= bound[n])
        elif k == 2:
            gl = _goes_left(X[row, feature[n]], n, nodes, f32)
            dirs[n - lo] = np.uint8(1 if gl else 0)


def node_kinds(nodes):
    """``(kind, nan_left)`` of ``_node_dirs`` for every node (uint8 arrays)."""
    inner = nodes.left >= 0
    simple = inner & (nodes.split_type == NUMERIC) & (nodes.missing_type != MISSING_ZERO)
    kind = np.where(simple, 1, np.where(inner, 2, 0)).astype(np.uint8)
    nan_left = np.where(
        nodes.missing_type == MISSING_NONE, 0.0 <= nodes.bound, nodes.default_left != 0
    ).astype(np.uint8)
    return kind, nan_left


@njit(cache=True, inline="always")
def _leaf_mask(lf, lo, d, cond_off, cond_node, cond_left, cond_bit, dirs):
    """The players of leaf ``lf`` (``d`` of them) whose every path condition the row with
    directions ``dirs`` (tree starting at node ``lo``) satisfies, as a bit mask."""
    full = (np.uint64(1) << np.uint64(d)) - np.uint64(1)
    m = full
    for c in range(cond_off[lf], cond_off[lf + 1]):
        if dirs[cond_node[c] - lo] != cond_left[c]:
            m &= ~(np.uint64(1) << np.uint64(cond_bit[c]))
    return m


@njit(cache=True)
def _background_tables(B, nodes, f32, kind, nan_left, tree_offsets, leaf_lo, leaf_d, cond_off,
                      cond_node, cond_left, cond_bit, tab_off, bg_off, wt, U, Y, Z,
                      bmask):  # fmt: skip
    """Summarise the background rows ``B`` per leaf: the tables U, Y, Z of the tabulated
    leaves (at ``tab_off[leaf]``, 2^d entries each, counts divided by the number of
    background rows) and the masks of the others (``bmask[bg_off[leaf] + b]``)."""
    nb = B.shape[0]
    feature = nodes.feature
    bound = nodes.bound
    n_trees = tree_offsets.shape[0] - 1
    max_nodes = 0
    for t in range(n_trees):
        max_nodes = max(max_nodes, tree_offsets[t + 1] - tree_offsets[t])
    dirs = np.zeros(max_nodes, dtype=np.uint8)
    max_d = 0
    for lf in range(leaf_d.shape[0]):
        if tab_off[lf + 1] > tab_off[lf]:
            max_d = max(max_d, leaf_d[lf])
    P = np.zeros(((1 << max_d), max_d + 1), dtype=np.float64)
    inv = 1.0 / nb
    for t in range(n_trees):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        for b in range(nb):
            _node_dirs(B, b, lo, hi, nodes, f32, kind, nan_left, feature, bound, dirs)
            for lf in range(leaf_lo[t], leaf_lo[t + 1]):
                d = leaf_d[lf]
                m = _leaf_mask(lf, lo, d, cond_off, cond_node, cond_left, cond_bit, dirs)
                if tab_off[lf + 1] > tab_off[lf]:
                    full = (np.uint64(1) << np.uint64(d)) - np.uint64(1)
                    U[tab_off[lf] + np.int64(full & ~m)] += inv  # the histogram of c, for now
                elif bg_off[lf + 1] > bg_off[lf]:
                    bmask[bg_off[lf] + b] = m
        for lf in range(leaf_lo[t], leaf_lo[t + 1]):
            if tab_off[lf + 1] == tab_off[lf]:
                continue
            d = leaf_d[lf]
            o = tab_off[lf]
            size = 1 << d
            for a in range(size):
                for k in range(d + 1):
                    P[a, k] = 0.0
                P[a, _popcount(np.uint64(a))] = U[o + a]
            for i in range(d):
                bit = 1 << i
                for a in range(size):
                    if a & bit:
                        for k in range(d + 1):
                            P[a, k] += P[a ^ bit, k]
            for a in range(size):
                sb = d - _popcount(np.uint64(a))
                u = 0.0
                y = 0.0
                z = 0.0
                for k in range(d + 1):
                    p = P[a, k]
                    if p == 0.0:
                        continue
                    if sb >= 1:
                        u += p * wt[k, sb - 1]
                    if k >= 1:
                        y += p * wt[k - 1, sb]
                        if sb >= 1:
                            z += p * wt[k - 1, sb - 1]
                U[o + a] = u
                Y[o + a] = y
                Z[o + a] = z


def background_tables(B, nodes, f32, kinds, tree_offsets, leaves, tables):
    """Fill the ``tables`` (``(tab_off, bg_off, wt, U, Y, Z, bmask)``) from the background rows
    ``B``; ``kinds``: ``node_kinds(nodes)``; ``leaves`` as for ``explain``."""
    leaf_lo, _, leaf_d, cond_off, cond_node, cond_left, cond_bit, _, _ = leaves
    _background_tables(B, nodes, f32, *kinds, tree_offsets, leaf_lo, leaf_d, cond_off, cond_node,
                       cond_left, cond_bit, *tables)  # fmt: skip


@njit(cache=True, inline="always")
def _popcount(x):
    """The number of bits set in ``x``."""
    c = 0
    while x:
        x &= x - np.uint64(1)
        c += 1
    return c


@njit(cache=True, error_model="numpy")
def _tree_row(X, r, t, lo, hi, nodes, f32, kind, nan_left, leaf_lo, leaf_node, leaf_d, cond_off,
              cond_node, cond_left, cond_bit, pl_off, pl, tab_off, bg_off, wt, U, Y, Z, bmask,
              n_bg, scale, out, a0, g, dirs):  # fmt: skip
    """Add ``scale`` times tree t's (nodes ``lo:hi``) interventional values of row ``r`` of
    ``X`` to ``out[a0, :, g]``; ``dirs``: work, one entry per node of the largest tree."""
    value = nodes.value
    one = np.uint64(1)
    _node_dirs(X, r, lo, hi, nodes, f32, kind, nan_left, nodes.feature, nodes.bound, dirs)
    inv = 1.0 / n_bg
    for lf in range(leaf_lo[t], leaf_lo[t + 1]):
        d = leaf_d[lf]
        if d == 0:
            continue
        v = value[leaf_node[lf]] * scale
        a = _leaf_mask(lf, lo, d, cond_off, cond_node, cond_left, cond_bit, dirs)
        p0 = pl_off[lf]
        o = tab_off[lf]
        if tab_off[lf + 1] > o:
            u = v * U[o + np.int64(a)]
            y = Y[o + np.int64(a)]
            for i in range(d):
                bit = one << np.uint64(i)
                if a & bit:
                    out[a0, pl[p0 + i], g] += v * (y - Z[o + np.int64(a ^ bit)])
                elif u != 0.0:
                    out[a0, pl[p0 + i], g] -= u
            continue
        full = (one << np.uint64(d)) - one
        sb = d - _popcount(a)
        for b in range(n_bg):
            m = bmask[bg_off[lf] + b]
            if (m | a) != full:
                continue
            c = full & ~m
            sx = _popcount(c)
            gain = v * inv * wt[sx - 1, sb] if sx >= 1 else 0.0
            loss = v * inv * wt[sx, sb - 1] if sb >= 1 else 0.0
            for i in range(d):
                bit = one << np.uint64(i)
                if c & bit:
                    out[a0, pl[p0 + i], g] += gain
                elif not (a & bit):
                    out[a0, pl[p0 + i], g] -= loss


@njit(cache=True)
def _max_nodes(tree_offsets):
    """The number of nodes of the largest tree."""
    m = 0
    for t in range(tree_offsets.shape[0] - 1):
        m = max(m, tree_offsets[t + 1] - tree_offsets[t])
    return m


@njit(cache=True, nogil=True)
def _explain_chunk(X, nodes, f32, kind, nan_left, tree_offsets, tree_group, tree_lo, tree_hi,
                   leaf_lo, leaf_node, leaf_d, cond_off, cond_node, cond_left, cond_bit, pl_off,
                   pl, tab_off, bg_off, wt, U, Y, Z, bmask, n_bg, out, ch, nch):  # fmt: skip
    """Rows of chunk ``ch`` of ``nch``: add the interventional values of trees
    ``tree_lo:tree_hi`` to ``out``."""
    dirs = np.zeros(_max_nodes(tree_offsets), dtype=np.uint8)
    r0, r1 = chunk_range(ch, nch, X.shape[0])
    for r in range(r0, r1):
        for t in range(tree_lo, tree_hi):
            _tree_row(X, r, t, tree_offsets[t], tree_offsets[t + 1], nodes, f32, kind, nan_left,
                      leaf_lo, leaf_node, leaf_d, cond_off, cond_node, cond_left, cond_bit,
                      pl_off, pl, tab_off, bg_off, wt, U, Y, Z, bmask, n_bg, 1.0, out, r,
                      tree_group[t], dirs)  # fmt: skip


def explain(X, nodes, f32, kinds, tree_offsets, tree_group, leaves, tables, n_bg, out,
            tree_lo=0, tree_hi=-1):  # fmt: skip
    """Add the interventional values of rows ``X`` to ``out`` (n, n_players, n_outputs).

    ``kinds``: ``node_kinds(nodes)``; ``leaves``: ``(leaf_lo, leaf_node, leaf_d, cond_off,
    cond_node, cond_left, cond_bit, pl_off, pl)``; ``tables``: ``(tab_off, bg_off, wt, U, Y,
    Z, bmask)``; trees ``tree_lo:tree_hi`` (-1: to the last). Spread over threads by rows."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    tree_hi = n_trees if tree_hi < 0 else tree_hi
    nch = n_chunks(n * max(tree_hi - tree_lo, 1), n)
    run_chunks(_explain_chunk, nch, X, nodes, f32, *kinds, tree_offsets, tree_group,
               np.int64(tree_lo), np.int64(tree_hi), *leaves, *tables, n_bg, out)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def _inner_chunk(X, y, w, nodes, general, layout, stages, kind, nan_left, leaf_lo, leaf_node,
                 leaf_d, cond_off, cond_node, cond_left, cond_bit, pl_off, pl, tab_off, bg_off,
                 wt, U, Y, Z, bmask, n_bg, lr, forest, acc, pcredit, s1, s2, s2t, swu, ch,
                 nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``inner`` (``s1`` empty: the rows' terms go
    to ``acc[ch]``) or of ``inner_moments`` (the terms go to a (ROW_BLOCK, n_players,
    n_outputs) buffer, folded into ``s1[ch]``, ``s2[ch]``, ``s2t[ch]``, ``swu[ch]`` at the
    end of every block; ``acc`` has no rows and gives the buffer's shape): the staged pass of
    ``kernels.treeshap._inner_chunk`` with ``_tree_row`` as the per-tree attribution."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    tree_offsets = nodes.tree_offsets
    tree_group = nodes.tree_group
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    K = base_margin.shape[0]
    moments = s1.shape[0] > 0
    if moments:
        rows = np.zeros((ROW_BLOCK, acc.shape[1], acc.shape[2]))
    else:
        rows = acc
    dirs = np.zeros(_max_nodes(tree_offsets), dtype=np.uint8)
    cu = np.empty((s1.shape[1], K))
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    n_rows = X.shape[0]
    b0, b1 = chunk_range(ch, nch, (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)
    for r0 in range(b0 * ROW_BLOCK, min(n_rows, b1 * ROW_BLOCK), ROW_BLOCK):
        m = _start_block(X, r0, n_rows, layout.used, buf, base_margin, F, gsum)
        for it in range(iter_ptr.shape[0] - 1):
            _gradients(code, prm, y, r0, m, F, g, h)
            _copy_rows(F, delta, m)
            if forest:
                for k in range(m):
                    for c in range(K):
                        gsum[k, c] -= w[r0 + k] * g[k, c]
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                                 tree_flags, buf, idx):  # fmt: skip
                    if general is not None:
                        route(X, r0, m, t, layout, general, f32, buf, idx)
                c = tree_group[t]
                _add_leaves(delta, idx, nodes.value, m, c, f32_sum)
                if forest:
                    continue
                for k in range(m):
                    s = -w[r0 + k] * g[k, c] / lr[t]
                    a0 = k if moments else ch
                    if s != 0.0:
                        _tree_row(X, r0 + k, t, tree_offsets[t], tree_offsets[t + 1], nodes, f32,
                                  kind, nan_left, leaf_lo, leaf_node, leaf_d, cond_off, cond_node,
                                  cond_left, cond_bit, pl_off, pl, tab_off, bg_off, wt, U, Y, Z,
                                  bmask, n_bg, s, rows, a0, c,
                                  dirs)  # fmt: skip
            _copy_rows(delta, F, m)
        if forest:
            for t in range(tree_offsets.shape[0] - 1):
                c = tree_group[t]
                for k in range(m):
                    s = gsum[k, c]
                    a0 = k if moments else ch
                    if s != 0.0:
                        _tree_row(X, r0 + k, t, tree_offsets[t], tree_offsets[t + 1], nodes, f32,
                                  kind, nan_left, leaf_lo, leaf_node, leaf_d, cond_off, cond_node,
                                  cond_left, cond_bit, pl_off, pl, tab_off, bg_off, wt, U, Y, Z,
                                  bmask, n_bg, s, rows, a0, c,
                                  dirs)  # fmt: skip
        if moments:
            _fold_rows(rows, m, w, r0, pcredit, cu, s1[ch], s2[ch], s2t[ch], swu[ch])


def inner_chunks(n_rows, n_trees):
    """The number of chunks (accumulators) of an ``inner`` pass over ``n_rows`` rows (a row
    and tree cost about ten of a predict)."""
    return n_chunks(10 * n_rows * max(n_trees, 1), (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)


def inner(X, y, w, nodes, layout, stages, kinds, leaves, tables, n_bg, lr, forest, acc):
    """TreeInner or ForestInner with interventional TreeSHAP attributions, streamed: no
    attribution is stored.

    As ``kernels.treeshap.shap_inner``: one pass over the rows in boosting order with staged
    margins (``stages``); for TreeInner every tree's interventional values of a row (against
    the background summarised in ``tables``, as ``explain``) are added to ``acc[chunk,
    player, output]`` scaled by ``w (-g) / lr[t]`` (g the gradient at the margin before the
    tree's round); for ForestInner (``forest``) scaled by the row's summed ``w (-g)`` over the
    trees of the output. ``acc`` has shape (n_chunks, n_players, n_outputs), n_chunks from
    ``inner_chunks``.
    """
    none3 = np.zeros((0, 0, 0))
    run_chunks(_inner_chunk, acc.shape[0], X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, *kinds, *leaves, *tables, n_bg, lr, forest, acc, np.zeros((0, 0)), none3,
               none3, np.zeros((0, 0)), none3)  # fmt: skip


def inner_moments(X, y, w, nodes, layout, stages, kinds, leaves, tables, n_bg, lr, forest,
                  pcredit, s1, s2, s2t, swu):  # fmt: skip
    """``inner``'s per-row terms and the sums of their squares, per chunk of rows, as
    ``kernels.treeshap.shap_inner_moments`` (``pcredit`` (n_players, n_output_features),
    empty: players are the features; ``s1``, ``s2``, ``swu`` (n_chunks, n_output_features,
    n_outputs) and ``s2t`` (n_chunks, n_output_features) zeroed by the caller)."""
    n_players = pcredit.shape[0] if pcredit.shape[0] > 0 else s1.shape[1]
    shape = np.zeros((0, n_players, s1.shape[2]))
    run_chunks(_inner_chunk, s1.shape[0], X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, *kinds, *leaves, *tables, n_bg, lr, forest, shape, pcredit, s1, s2, s2t,
               swu)  # fmt: skip
