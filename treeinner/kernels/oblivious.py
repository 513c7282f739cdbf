"""Oblivious (symmetric) trees: the switch of their fast path and their TreeSHAP leaf tables.

A tree is oblivious when it is complete to its depth and every level's nodes share one
decision (feature, threshold, missing direction): CatBoost's SymmetricTree models, and any
XGBoost or LightGBM tree that happens to be so. ``kernels.routing.build_top_layout`` detects
them from the node arrays when the ensemble's layout is built and flags them
``TREE_OBLIVIOUS``; the routing kernels then read every level's split once per block of rows
and a row's leaf position as d bits (``kernels.routing.oblivious_slots``), which every kernel
that routes rows (prediction, leaf indices, the staged passes, the moments) shares.

Path-dependent attributions of an oblivious tree depend only on the leaf a row reaches (its
decision at level j is the same at every node of the level), so TreeSHAP is precomputed per
leaf: ``shap_leaf_tables`` runs the linear TreeSHAP algorithm of ``kernels.treeshap`` once per
leaf position of every oblivious tree, with the row's direction at each level given by the
position's bits, into per-leaf lists of (player, value), at most d entries per leaf (the
distinct players of the tree), CSR over the nodes like ``kernels.moments.leaf_lists``. A row's
TreeSHAP values of that tree are then its leaf's list.

``FAST_PATH`` (default True) turns the fast path on for layouts built and TreeSHAP setups made
while it is set; ``general_path()`` turns it off within a ``with`` block (the tests compare
the two paths with it; an ensemble caches its layout, so build a fresh one inside the block).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
from numba import njit

from .routing import TREE_OBLIVIOUS
from .treeshap import _tree_views, _work

FAST_PATH = True


@contextlib.contextmanager
def general_path() -> Iterator[None]:
    """Within the block, layouts and TreeSHAP setups are built without the oblivious fast path."""
    global FAST_PATH
    old = FAST_PATH
    FAST_PATH = False
    try:
        yield
    finally:
        FAST_PATH = old


@njit(cache=True)
def shap_list_size(tree_offsets, tree_flags, top_depth, max_depth):
    """The number of (player, value) entries the leaf tables of the oblivious trees of depth
    at most ``max_depth`` need at most: per such tree of depth d, 2^d leaves of at most d
    entries."""
    total = 0
    for t in range(tree_offsets.shape[0] - 1):
        if tree_flags[t] & TREE_OBLIVIOUS and top_depth[t] <= max_depth:
            d = top_depth[t]
            total += (1 << d) * d
    return total


@njit(cache=True)
def shap_leaf_tables(nodes, layout, lay, tabs, tree_nq, n_players, max_depth, ptr, col, val):
    """Fill the TreeSHAP leaf tables of every oblivious tree (``TREE_OBLIVIOUS`` in
    ``layout.tree_flags``) of depth at most ``max_depth``: leaf node n's entries are
    ``ptr[n]:ptr[n + 1]`` (none at inner nodes and in other trees), each a player ``col`` and
    the tree's TreeSHAP value ``val`` of that player for every row reaching n. ``lay``,
    ``tabs``, ``tree_nq`` are the TreeSHAP setup of ``kernels.treeshap`` (``edge_layout``,
    ``edge_tables``, quadrature counts); ``col``, ``val`` are allocated by the caller
    (``shap_list_size``). Returns the number of
    entries used.

    The arithmetic per edge is ``kernels.treeshap._linear_row``'s, with the row's direction at
    every node of level j read from bit ``d - 1 - j`` of the leaf position (1: right), so a
    row's values equal the general kernel's up to the order in which one player's edges are
    summed.
    """
    left, right, value = nodes.left, nodes.right, nodes.value
    order, ppos, eplayer, share, prev = lay
    tree_offsets = nodes.tree_offsets
    n_nodes = left.shape[0]
    max_nodes = 1
    for t in range(tree_offsets.shape[0] - 1):
        max_nodes = max(max_nodes, tree_offsets[t + 1] - tree_offsets[t])
    level = np.zeros(max_nodes, dtype=np.int64)
    work = _work(max_nodes, tabs)
    hot, Zs, Os = work[0], work[1], work[2]
    acc = np.zeros(n_players)
    slot = np.full(n_players, -1, dtype=np.int64)
    players = np.empty(max_nodes, dtype=np.int64)
    counts = np.zeros(n_nodes, dtype=np.int64)  # entries per node, before the prefix sum
    start = np.zeros(n_nodes, dtype=np.int64)
    end = 0
    for t in range(tree_offsets.shape[0] - 1):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        d = layout.top_depth[t]
        if not (layout.tree_flags[t] & TREE_OBLIVIOUS) or d > max_depth:
            continue
        nq = tree_nq[t]
        (FH, FC, CH, tq, wq, CC), R, C, S = _tree_views(tabs, work, t, hi - lo, nq)
        # the tree's players in a fixed order (first met in breadth-first order)
        n_pl = 0
        for i in range(lo + 1, hi):
            p = eplayer[i]
            if slot[p] < 0:
                slot[p] = n_pl
                players[n_pl] = p
                n_pl += 1
        level[0] = 0
        for i in range(lo + 1, hi):
            level[i - lo] = level[ppos[i] - lo] + 1
        for pos in range(1 << d):
            # every node's hot child from the position's bits
            for i in range(lo, hi):
                k = i - lo
                c = order[i]
                if left[c] >= 0:
                    bit = (pos >> (d - 1 - level[k])) & 1
                    hot[k] = right[c] if bit else left[c]
            leaf = lo
            while left[leaf] >= 0:
                leaf = hot[_position(order, lo, hi, leaf)]
            for q in range(nq):
                R[0, q] = 1.0
                S[0, q] = 0.0
            for i in range(lo + 1, hi):
                k = i - lo
                c = order[i]
                pk = ppos[i] - lo
                oc = 1.0 if c == hot[pk] else 0.0
                pv = prev[i] - lo
                if pv >= 0:
                    zp = Zs[pv]
                    op = Os[pv]
                    z = zp * share[i]
                    o = op * oc
                else:
                    zp = op = 0.0
                    z = share[i]
                    o = oc
                Zs[k] = z
                Os[k] = o
                if (z == 0.0 and o == 0.0) or R[pk, 0] == 0.0:
                    for q in range(nq):
                        R[k, q] = 0.0
                        C[k, q] = 0.0
                        S[k, q] = 0.0
                    continue
                if pv < 0:
                    if oc == 1.0:
                        for q in range(nq):
                            R[k, q] = R[pk, q] * FH[k, q]
                            C[k, q] = CH[k, q]
                            S[k, q] = 0.0
                    else:
                        for q in range(nq):
                            R[k, q] = R[pk, q] * FC[k, q]
                            C[k, q] = CC[q]
                            S[k, q] = 0.0
                    continue
                for q in range(nq):
                    u = tq[q]
                    s1 = 1.0 - u
                    fn = z * s1 + o * u
                    cn = (o - z) / fn
                    fo = zp * s1 + op * u
                    R[k, q] = R[pk, q] * fn / fo
                    C[k, q] = wq[q] * (cn - (op - zp) / fo)
                    S[k, q] = 0.0
            for i in range(hi - 1, lo, -1):
                k = i - lo
                c = order[i]
                pk = ppos[i] - lo
                if left[c] < 0:
                    v = value[c]
                    for q in range(nq):
                        S[k, q] = v * R[k, q]
                tot = 0.0
                for q in range(nq):
                    tot += C[k, q] * S[k, q]
                    S[pk, q] += S[k, q]
                acc[eplayer[i]] += tot
            start[leaf] = end
            counts[leaf] = n_pl
            for j in range(n_pl):
                p = players[j]
                col[end + j] = p
                val[end + j] = acc[p]
                acc[p] = 0.0
            end += n_pl
        for j in range(n_pl):
            slot[players[j]] = -1
    # CSR over the nodes: the entries were written leaf by leaf, in any node order
    total = 0
    col2 = col[:end].copy()
    val2 = val[:end].copy()
    for n in range(n_nodes):
        ptr[n] = total
        for j in range(counts[n]):
            col[total + j] = col2[start[n] + j]
            val[total + j] = val2[start[n] + j]
        total += counts[n]
    ptr[n_nodes] = total
    return total


@njit(cache=True, inline="always")
def _position(order, lo, hi, node):
    """The breadth-first position (``kernels.treeshap.edge_layout``) of ``node``, relative to
    its tree's first position ``lo``."""
    for i in range(lo, hi):
        if order[i] == node:
            return i - lo
    return -1
