"""Numba kernels for path-dependent TreeSHAP.

Node arrays come as the ``nodes`` named tuple of ``kernels.routing`` (``_format.Nodes``);
``weight`` holds the node weights (float64): a child's share of its parent is
``weight[child] / weight[parent]`` (one half each where the parent's weight is not positive, as
in ``kernels.attribution``).
``player[j]`` is the player (the feature credited) of column j: splits on columns with the same
player are one feature in the Shapley game.

Two algorithms:

* ``tree_shap_classic``: Lundberg et al. (2018), Algorithm 2, as a depth-first walk with an
  explicit stack; O(L D^2) per row and tree and (D + 2)^2 work arrays. The reference the
  tests check the other against on trees up to depth ~12 (its unwinding divisions overflow
  on deep paths: at depth 300 values reach 1e65); not used by any public function.
* The linear algorithm used everywhere else (``tree_shap``, ``shap_inner``,
  ``shap_inner_moments``). With
  ``z_j`` the cover fraction and ``o_j`` in {0, 1} the indicator of feature j's splits on the
  path to a leaf of value v (repeated splits on one feature merged by products),

      phi_i += v (o_i - z_i) * integral_0^1 prod_{j != i} (z_j (1 - t) + o_j t) dt,

  because the Shapley weight |S|! (d - |S| - 1)! / d! is the Beta integral of
  t^|S| (1 - t)^(d - 1 - |S|) (the polynomial view of Linear TreeShap, Yu et al. 2022). The
  integrand is a polynomial of degree < d, d the distinct players on the path, so
  Gauss-Legendre quadrature with ceil(P / 2) points is exact for a tree whose paths have at
  most P distinct players (``path_players``; P <= the depth). Per row and tree, a forward pass
  over the nodes in breadth-first order (parents first; ``edge_layout``) gives every node, per
  quadrature point, the product R of its path's factors; a backward pass sums S(c) = sum over
  the leaves below c of v R, and the edge into c adds
  w_q (o - z) / (z (1 - t_q) + o t_q) S_q(c) to the edge's player (for a player met again on
  the path, the difference of its merged and previous terms, which telescopes). O(N Q) per row
  and tree, N nodes, Q points, in two branch-poor loops: all products of numbers in [0, 1], no
  unwinding divisions. The row-independent tables (``edge_tables``) are ragged: N_t x Q_t
  values per tree t, each tree with its own Q_t, so one deep tree does not inflate the others'
  tables; set-up and memory scale with sum_t N_t Q_t (``treeinner.treeshap.MAX_TABLE_ENTRIES``
  bounds each tree's). No kernel recurses: every walk uses an explicit stack or breadth-first
  order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._threads import n_chunks, run_chunks
from .attribution import _block_buffers, _copy_rows, _round_gradients, _start_block
from .routing import (
    ROW_BLOCK,
    _add_leaves,
    _fill_buffer,
    _goes_left,
    chunk_range,
    general_nodes,
    oblivious_slots,
    route,
    route_top,
    top_arrays,
)


@njit(cache=True, inline="always")
def _share(weight, child, parent):
    """The fraction of ``parent``'s weight that flows to ``child``."""
    w = weight[parent]
    if w > 0.0:
        return weight[child] / w
    return 0.5


@njit(cache=True, inline="always")
def _extend(pf, pz, po, pw, lev, length, z, o, f):
    """Append (f, z, o) to the path in row ``lev`` (``length`` elements) and update the
    weights of the subset sizes; the path then has ``length + 1`` elements."""
    pf[lev, length] = f
    pz[lev, length] = z
    po[lev, length] = o
    pw[lev, length] = 1.0 if length == 0 else 0.0
    inv = 1.0 / (length + 1)
    for i in range(length - 1, -1, -1):
        pw[lev, i + 1] += o * pw[lev, i] * (i + 1) * inv
        pw[lev, i] = z * pw[lev, i] * (length - i) * inv


@njit(cache=True, inline="always")
def _unwind(pf, pz, po, pw, lev, length, k):
    """Remove element ``k`` from the path in row ``lev`` (undoing its extension); the path
    then has ``length - 1`` elements. Needs ``po[lev, k] != 0`` or ``pz[lev, k] != 0``."""
    top = length - 1
    o = po[lev, k]
    z = pz[lev, k]
    nxt = pw[lev, top]
    for j in range(top - 1, -1, -1):
        if o != 0.0:
            old = pw[lev, j]
            pw[lev, j] = nxt * (top + 1) / ((j + 1) * o)
            nxt = old - pw[lev, j] * z * (top - j) / (top + 1)
        else:
            pw[lev, j] = pw[lev, j] * (top + 1) / (z * (top - j))
    for j in range(k, top):
        pf[lev, j] = pf[lev, j + 1]
        pz[lev, j] = pz[lev, j + 1]
        po[lev, j] = po[lev, j + 1]


@njit(cache=True, inline="always")
def _unwound_sum(pz, po, pw, lev, length, k):
    """Sum of the weights the path in row ``lev`` would have without element ``k`` (the path
    itself is left unchanged)."""
    top = length - 1
    o = po[lev, k]
    z = pz[lev, k]
    total = 0.0
    if o != 0.0:
        nxt = pw[lev, top]
        for j in range(top - 1, -1, -1):
            t = nxt * (top + 1) / ((j + 1) * o)
            total += t
            nxt = pw[lev, j] - t * z * (top - j) / (top + 1)
    else:
        for j in range(top - 1, -1, -1):
            total += pw[lev, j] * (top + 1) / (z * (top - j))
    return total


@njit(cache=True)
def _tree_row(
    X, row, root, nodes, weight, player, f32, g, out, pf, pz, po, pw, plen, sn, sl, sz, so, sf
):
    """Add the TreeSHAP values of one tree (root ``root``, output ``g``) for row ``row`` of
    ``X`` to ``out[row, :, g]`` (Algorithm 2). The other arguments are work arrays."""
    left, right, value = nodes.left, nodes.right, nodes.value
    sp = 1
    sn[0] = root
    sl[0] = 0
    sz[0] = 1.0
    so[0] = 1.0
    sf[0] = -1
    while sp > 0:
        sp -= 1
        u = sn[sp]
        lev = sl[sp]
        length = 0
        if lev > 0:
            length = plen[lev - 1]
            for i in range(length):
                pf[lev, i] = pf[lev - 1, i]
                pz[lev, i] = pz[lev - 1, i]
                po[lev, i] = po[lev - 1, i]
                pw[lev, i] = pw[lev - 1, i]
        _extend(pf, pz, po, pw, lev, length, sz[sp], so[sp], sf[sp])
        length += 1
        if left[u] < 0:
            v = value[u]
            for i in range(1, length):
                d = po[lev, i] - pz[lev, i]
                if d != 0.0:
                    s = _unwound_sum(pz, po, pw, lev, length, i)
                    out[row, pf[lev, i], g] += s * d * v
            continue
        col = nodes.feature[u]
        f = player[col]
        iz = 1.0
        io = 1.0
        for i in range(1, length):
            if pf[lev, i] == f:
                iz = pz[lev, i]
                io = po[lev, i]
                _unwind(pf, pz, po, pw, lev, length, i)
                length -= 1
                break
        plen[lev] = length
        if _goes_left(X[row, col], u, nodes, f32):
            hot = left[u]
            cold = right[u]
        else:
            hot = right[u]
            cold = left[u]
        # cold child first on the stack, so the hot one is walked first; a child whose
        # element would be (0, 0) adds nothing below it and is skipped
        zc = iz * _share(weight, cold, u)
        if zc != 0.0:
            sn[sp] = cold
            sl[sp] = lev + 1
            sz[sp] = zc
            so[sp] = 0.0
            sf[sp] = f
            sp += 1
        zh = iz * _share(weight, hot, u)
        if zh != 0.0 or io != 0.0:
            sn[sp] = hot
            sl[sp] = lev + 1
            sz[sp] = zh
            so[sp] = io
            sf[sp] = f
            sp += 1


@njit(cache=True)
def edge_layout(left, right, feature, weight, player, tree_offsets):
    """The static part of the linear algorithm, per tree in breadth-first order.

    Position i (within the tree's own range of ``tree_offsets``) holds node ``order[i]``;
    ``ppos[i]`` is its parent's position (-1 at the root), ``eplayer[i]`` the player of the
    split above it, ``share[i]`` its fraction of the parent's weight and ``prev[i]`` the
    position of the nearest ancestor reached through a split on the same player (-1: none).
    Parents come before their children, so one forward pass fills the path products and one
    backward pass sums the leaves up. O(nodes), whatever the depth.
    """
    n = left.shape[0]
    order = np.empty(n, dtype=np.int64)
    ppos = np.full(n, -1, dtype=np.int64)
    eplayer = np.full(n, -1, dtype=np.int64)
    share = np.ones(n)
    prev = np.full(n, -1, dtype=np.int64)
    for t in range(tree_offsets.shape[0] - 1):
        lo = tree_offsets[t]
        order[lo] = lo
        head = lo
        tail = lo + 1
        while head < tail:
            u = order[head]
            if left[u] >= 0:
                pl = player[feature[u]]
                for c in (left[u], right[u]):
                    order[tail] = c
                    ppos[tail] = head
                    eplayer[tail] = pl
                    share[tail] = _share(weight, c, u)
                    tail += 1
            head += 1
    _same_player_ancestors(left, order, ppos, eplayer, tree_offsets, prev)
    return order, ppos, eplayer, share, prev


@njit(cache=True)
def _same_player_ancestors(left, order, ppos, eplayer, tree_offsets, prev):
    """Fill ``prev`` (see ``edge_layout``) by a depth-first walk with an explicit stack:
    ``last[p]`` is the deepest position on the current path entered through a split on
    player p, restored when the walk leaves the position, so the cost is linear in the
    nodes (no walk up the ancestors)."""
    n = order.shape[0]
    n_players = 1
    for i in range(n):
        n_players = max(n_players, eplayer[i] + 1)
    last = np.full(n_players, -1, dtype=np.int64)
    saved = np.empty(n, dtype=np.int64)
    kids = np.full(n, -1, dtype=np.int64)  # position of every position's first child
    for i in range(n - 1, -1, -1):
        if ppos[i] >= 0:
            kids[ppos[i]] = i  # children are adjacent, the left one first
    stack = np.empty(n + 1, dtype=np.int64)
    for t in range(tree_offsets.shape[0] - 1):
        lo = tree_offsets[t]
        sp = 0
        if left[order[lo]] >= 0:
            stack[0] = kids[lo]
            stack[1] = kids[lo] + 1
            sp = 2
        while sp > 0:
            sp -= 1
            i = stack[sp]
            if i < 0:  # leaving position ~i
                i = ~i
                last[eplayer[i]] = saved[i]
                continue
            pl = eplayer[i]
            prev[i] = last[pl]
            saved[i] = last[pl]
            last[pl] = i
            stack[sp] = ~i
            sp += 1
            if left[order[i]] >= 0:
                stack[sp] = kids[i]
                stack[sp + 1] = kids[i] + 1
                sp += 2


@njit(cache=True)
def path_players(ppos, prev, tree_offsets):
    """Per tree, the most distinct players on one path from its root (edges into positions
    with no same-player ancestor, ``prev < 0``): the degree of the TreeSHAP integrand of
    every leaf is below it."""
    n_trees = tree_offsets.shape[0] - 1
    nd = np.zeros(ppos.shape[0], dtype=np.int64)
    out = np.zeros(n_trees, dtype=np.int64)
    for t in range(n_trees):
        best = 0
        for i in range(tree_offsets[t] + 1, tree_offsets[t + 1]):
            nd[i] = nd[ppos[i]] + (1 if prev[i] < 0 else 0)
            best = max(best, nd[i])
        out[t] = best
    return out


@njit(cache=True)
def edge_tables(share, tree_offsets, tree_nq, rule_t, rule_w, roff):
    """Row-independent factors of the edges into nodes at their feature's first split on the
    path: (FH, FC, CH, tq, wq, CC, toff, roff, tree_nq), stored ragged, tree by tree.

    Tree t uses ``tree_nq[t]`` quadrature points, ``rule_t[roff[t]:]`` and
    ``rule_w[roff[t]:]`` (the Gauss-Legendre points and weights on [0, 1] of that count),
    passed through as ``tq``, ``wq``. Its tables are ``FH[toff[t]:toff[t + 1]]`` (and FC, CH),
    one row of ``tree_nq[t]`` values per position i of the tree: with z = share[i] and point
    q, FH = z (1 - t) + t and CH = w (1 - z) / FH (the row goes that way), FC = z (1 - t)
    (it does not; its coefficient CC = -w / (1 - t), indexed like ``tq``, is the same for
    every edge). The size is the sum over trees of nodes times points (``_tree_views``
    views one tree's).
    """
    n_trees = tree_offsets.shape[0] - 1
    toff = np.zeros(n_trees + 1, dtype=np.int64)
    for t in range(n_trees):
        toff[t + 1] = toff[t] + (tree_offsets[t + 1] - tree_offsets[t]) * tree_nq[t]
    FH = np.empty(toff[n_trees])
    FC = np.empty(toff[n_trees])
    CH = np.empty(toff[n_trees])
    for t in range(n_trees):
        nq = tree_nq[t]
        r = roff[t]
        lo = tree_offsets[t]
        for i in range(lo, tree_offsets[t + 1]):
            z = share[i]
            e = toff[t] + (i - lo) * nq
            for q in range(nq):
                u = rule_t[r + q]
                FH[e + q] = z * (1.0 - u) + u
                FC[e + q] = z * (1.0 - u)
                CH[e + q] = rule_w[r + q] * (1.0 - z) / FH[e + q]
    CC = np.empty(rule_t.shape[0])
    for j in range(rule_t.shape[0]):
        CC[j] = -rule_w[j] / (1.0 - rule_t[j])
    return FH, FC, CH, rule_t, rule_w, CC, toff, roff, tree_nq


@njit(cache=True, inline="always")
def max_table(tabs):
    """The largest table of one tree (``edge_tables``): the size of the work arrays."""
    toff = tabs[6]
    m = 1
    for t in range(toff.shape[0] - 1):
        m = max(m, toff[t + 1] - toff[t])
    return m


@njit(cache=True)
def _goes_left_call(v, n, nodes, f32):
    """``kernels.routing._goes_left`` as a call: categorical sets and the missing-value
    rules, which ``_linear_row`` reads rarely, are compiled once, not inlined into it."""
    return _goes_left(v, n, nodes, f32)


@njit(cache=True, error_model="numpy")
def _linear_row(
    X, row, t, lo, hi, nodes, lay, tt, f32, simple, nq, scale, acc, ar, g, hot, Zs, Os, R, C, S
):
    """Add ``scale`` times the TreeSHAP values of tree t, at positions ``lo:hi`` (output
    ``g``), for row ``row`` of ``X`` to ``acc[ar, player, g]``. ``lay`` is
    ``edge_layout``, ``tt`` the tree's tables (``_tree_views``; the tree uses ``nq``
    quadrature points); ``simple[t]``: the tree's splits are numeric with NaN going the default
    way (read without branches; ``simple`` None: every tree's are, and the general rule is
    not compiled in); ``hot``, ``Zs``, ``Os`` (merged z, o) are work arrays of at
    least the tree's size, ``R``, ``C``, ``S`` (positions, nq) views (``_tree_views``)."""
    left, right, feature, value = nodes.left, nodes.right, nodes.feature, nodes.value
    order, ppos, eplayer, share, prev = lay
    FH, FC, CH, tq, wq, CC = tt
    if left[lo] < 0:
        return
    u = order[lo]
    v = X[row, feature[u]]
    if simple is None:
        gl = (v <= nodes.bound[u]) | ((v != v) & (nodes.default_left[u] != 0))
    else:
        gl = _goes_left_call(v, u, nodes, f32)
    hot[0] = left[u] if gl else right[u]
    for q in range(nq):
        R[0, q] = 1.0
        S[0, q] = 0.0
    # parents first: every edge's merged (z, o), path product R and coefficient C
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
        if left[c] >= 0:  # the child this row goes to (inline: a call costs more than this)
            v = X[row, feature[c]]
            if simple is None:
                gl = (v <= nodes.bound[c]) | ((v != v) & (nodes.default_left[c] != 0))
            elif simple[t]:
                gl = (v <= nodes.bound[c]) | ((v != v) & (nodes.default_left[c] != 0))
            else:
                gl = _goes_left_call(v, c, nodes, f32)
            hot[k] = left[c] if gl else right[c]
        if (z == 0.0 and o == 0.0) or R[pk, 0] == 0.0:
            for q in range(nq):  # no leaf below counts in any coalition
                R[k, q] = 0.0
                C[k, q] = 0.0
                S[k, q] = 0.0
            continue
        if pv < 0:  # the feature's first split on the path: factors from the tables
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
            tv = tq[q]
            s1 = 1.0 - tv
            fn = z * s1 + o * tv
            cn = (o - z) / fn
            fo = zp * s1 + op * tv
            R[k, q] = R[pk, q] * fn / fo
            C[k, q] = wq[q] * (cn - (op - zp) / fo)
            S[k, q] = 0.0
    # children first: leaf sums up the tree, each edge credited to its player
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
        acc[ar, eplayer[i], g] += scale * tot


@njit(cache=True)
def _work(max_nodes, tabs):
    """Per-thread work arrays of ``_linear_row``: hot, Zs, Os (one per node) and flat
    buffers for R, C, S sized for the largest tree's tables (``_tree_views``)."""
    m = max_table(tabs)
    return (
        np.empty(max_nodes, dtype=np.int64),
        np.empty(max_nodes),
        np.empty(max_nodes),
        np.empty(m),
        np.empty(m),
        np.empty(m),
    )


@njit(cache=True)
def _rows2d(a, start, n, s):
    """``a[start:start + n * s]`` as an (n, s) array (one function for every such view: a
    reshape costs more to compile than a call costs at run time)."""
    return a[start : start + n * s].reshape((n, s))


@njit(cache=True, inline="always")
def _tree_views(tabs, work, t, n, nq):
    """Tree t's tables (``edge_tables``; ``n`` nodes) as (n, points) arrays and the first
    ``nq`` points of its rule, (FH, FC, CH, tq, wq, CC), and the work buffers R, C, S of
    ``_work`` as (n, nq) arrays."""
    FH, FC, CH, rule_t, rule_w, CC, toff, roff, tnq = tabs
    s = tnq[t]
    a = toff[t]
    r = roff[t]
    tt = (_rows2d(FH, a, n, s), _rows2d(FC, a, n, s), _rows2d(CH, a, n, s),
          rule_t[r : r + nq], rule_w[r : r + nq], CC[r : r + nq])  # fmt: skip
    z = a - a  # 0, typed like ``a``: one _rows2d for every view
    return tt, _rows2d(work[3], z, n, nq), _rows2d(work[4], z, n, nq), _rows2d(work[5], z, n, nq)


@njit(cache=True, inline="always")
def _add_table(acc, a, leaf, g, scale, otab):
    """Add ``scale`` times the leaf table of ``leaf`` (``otab``) to ``acc[a, :, g]``."""
    _, tptr, tcol, tval = otab
    for e in range(tptr[leaf], tptr[leaf + 1]):
        acc[a, tcol[e], g] += scale * tval[e]


@njit(cache=True, nogil=True, error_model="numpy")
def _shap_chunk(X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32,
                otab, out, ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``tree_shap``."""
    tree_group = nodes.tree_group
    work = _work(max_nodes, tabs)
    tabulated = False
    if otab is not None:
        for t in range(tree_lo, tree_hi):
            tabulated = tabulated or otab[0][t] != 0
    idx = np.empty(ROW_BLOCK, dtype=np.uint64)
    # the routing buffer only where a tree is read from its table
    buf = np.empty((2 * layout.used.shape[0] if tabulated else 0, ROW_BLOCK))
    n_rows = X.shape[0]
    b0, b1 = chunk_range(ch, nch, (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)
    scale = np.ones(ROW_BLOCK)
    per_row = ch >= 0  # True, typed as a plain bool: one _tree_terms for every caller
    for b in range(b0, b1):
        r0 = b * ROW_BLOCK
        m = min(n_rows, r0 + ROW_BLOCK) - r0
        if tabulated:
            _fill_buffer(X, r0, m, layout.used, buf)
        for t in range(tree_lo, tree_hi):
            _tree_terms(X, r0, m, t, nodes, layout, lay, tabs, f32, simple, tree_nq, otab, buf,
                        idx, scale, out, r0, per_row, tree_group[t], work)  # fmt: skip


@njit(cache=True, inline="always")
def _table_leaves(t, layout, buf, idx):
    """The leaves the rows of the routing buffer reach in the oblivious tree t (one with a
    leaf table: ``TREE_OBLIVIOUS``), into ``idx``."""
    oblivious_slots(t, layout.meta, layout.tbound, layout.top_depth, layout.top_off,
                    layout.bot_off, buf, idx)  # fmt: skip
    bottom = layout.bottom
    for k in range(ROW_BLOCK):
        idx[k] = bottom[idx[k]]


def _spread(n_rows, n_trees):
    """Chunks of row blocks for a TreeSHAP pass over ``n_rows`` rows and ``n_trees`` trees
    (a row and tree of TreeSHAP costs about ten of a predict)."""
    return n_chunks(10 * n_rows * max(n_trees, 1), (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)


def tree_shap(X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32,
              otab, out):  # fmt: skip
    """Add the path-dependent TreeSHAP values of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_players, n_outputs), float64, zeroed by the caller. ``lay``
    is ``edge_layout``, ``tabs`` ``edge_tables``; ``simple[t]`` flags trees whose
    splits are all numeric with NaN going the default way; tree t uses ``tree_nq[t]``
    quadrature points; ``max_nodes`` bounds the size of every tree; ``f32`` as in the routing
    kernels. ``otab`` = (has_tab, ptr, col, val): the rows of a tree with ``has_tab[t]`` (an
    oblivious tree) are routed with ``layout`` and add their leaf's entries
    (``kernels.oblivious.shap_leaf_tables``); ``otab`` None: no tree has a table (and the
    table path is not compiled in). Spread over threads by blocks of ``ROW_BLOCK`` rows
    (``kernels._threads``), trees outermost within a block.
    """
    nch = _spread(X.shape[0], tree_hi - tree_lo)
    run_chunks(_shap_chunk, nch, X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi,
               max_nodes, f32, otab, out)  # fmt: skip


@njit(cache=True)
def tree_shap_classic(X, nodes, weight, player, max_depth, f32, out):
    """Algorithm 2 of Lundberg et al. (2018), serial, every tree: the reference of the tests.
    Same arguments and output as ``tree_shap``."""
    tree_offsets = nodes.tree_offsets
    tree_group = nodes.tree_group
    d = max_depth + 2
    pf = np.empty((d, d), dtype=np.int64)
    pz = np.empty((d, d), dtype=np.float64)
    po = np.empty((d, d), dtype=np.float64)
    pw = np.empty((d, d), dtype=np.float64)
    plen = np.empty(d, dtype=np.int64)
    sn = np.empty(d, dtype=np.int64)
    sl = np.empty(d, dtype=np.int64)
    sz = np.empty(d, dtype=np.float64)
    so = np.empty(d, dtype=np.float64)
    sf = np.empty(d, dtype=np.int64)
    for t in range(tree_offsets.shape[0] - 1):
        for row in range(X.shape[0]):
            _tree_row(
                X, row, tree_offsets[t], nodes, weight, player, f32, tree_group[t], out,
                pf, pz, po, pw, plen, sn, sl, sz, so, sf,
            )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _fold_rows(rows, m, w, r0, pcredit, cu, s1, s2, s2t, swu):
    """Fold the per-row terms ``rows[:m]`` (player, output) of rows ``r0:r0 + m`` into the
    moment sums and zero them.

    Each row's terms are first credited to the output features (``pcredit`` (n_players,
    n_output_features); empty: players are the features), into ``cu``; then ``s1 += cu``,
    ``s2 += cu**2``, ``s2t += (sum over outputs of cu)**2`` and ``swu += w[row] cu``.
    """
    n_players = rows.shape[1]
    K = rows.shape[2]
    F = s1.shape[0]
    credit = pcredit.shape[0] > 0
    for k in range(m):
        if credit:
            for f in range(F):
                for c in range(K):
                    cu[f, c] = 0.0
            for p in range(n_players):
                for c in range(K):
                    v = rows[k, p, c]
                    if v != 0.0:
                        for f in range(F):
                            cu[f, c] += v * pcredit[p, f]
                        rows[k, p, c] = 0.0
        else:
            for p in range(n_players):
                for c in range(K):
                    cu[p, c] = rows[k, p, c]
                    rows[k, p, c] = 0.0
        wk = w[r0 + k]
        for f in range(F):
            tot = 0.0
            for c in range(K):
                v = cu[f, c]
                s1[f, c] += v
                s2[f, c] += v * v
                swu[f, c] += wk * v
                tot += v
            s2t[f] += tot * tot


@njit(cache=True, error_model="numpy")
def _gradients(code, prm, y, r0, m, F, g, h):
    """``kernels.attribution._round_gradients`` compiled once as a function of its own
    (called once per boosting round and block of rows)."""
    _round_gradients(code, prm, y, r0, m, F, g, h)


@njit(cache=True, nogil=True, error_model="numpy")
def _inner_chunk(X, y, w, nodes, general, layout, stages, lay, tabs, simple, tree_nq, max_nodes,
                 lr, otab, forest, acc, pcredit, s1, s2, s2t, swu, ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``shap_inner`` (``s1`` empty: the rows' terms
    go to ``acc[ch]``) or of ``shap_inner_moments`` (the terms go to a (ROW_BLOCK, n_players,
    n_outputs) buffer of zeros, one slot per row of a block, folded into ``s1[ch]``,
    ``s2[ch]``, ``s2t[ch]``, ``swu[ch]`` by ``_fold_rows`` at the end of every block;
    ``acc`` has no rows and gives the buffer's shape). Routed as ``kernels.routing`` describes
    (``general``: see ``general_nodes``)."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    tree_group = nodes.tree_group
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    K = base_margin.shape[0]
    moments = s1.shape[0] > 0
    if moments:
        rows = np.zeros((ROW_BLOCK, acc.shape[1], acc.shape[2]))
        a0 = 0
    else:
        rows = acc
        a0 = ch
    work = _work(max_nodes, tabs)
    scale = np.empty(ROW_BLOCK)
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
                    scale[k] = -w[r0 + k] * g[k, c] / lr[t]
                _tree_terms(X, r0, m, t, nodes, layout, lay, tabs, f32, simple, tree_nq, otab,
                            buf, idx, scale, rows, a0, moments, c, work)  # fmt: skip
            _copy_rows(delta, F, m)
        if forest:
            for t in range(nodes.tree_offsets.shape[0] - 1):
                c = tree_group[t]
                for k in range(m):
                    scale[k] = gsum[k, c]
                _tree_terms(X, r0, m, t, nodes, layout, lay, tabs, f32, simple, tree_nq, otab,
                            buf, idx, scale, rows, a0, moments, c, work)  # fmt: skip
        if moments:
            _fold_rows(rows, m, w, r0, pcredit, cu, s1[ch], s2[ch], s2t[ch], swu[ch])


@njit(cache=True, error_model="numpy")
def _tree_terms(X, r0, m, t, nodes, layout, lay, tabs, f32, simple, tree_nq, otab, buf, idx,
                scale, acc, a0, per_row, g, work):  # fmt: skip
    """Add ``scale[k]`` times tree t's TreeSHAP values of row ``r0 + k`` (k < m) to
    ``acc[a0 + k]`` (``per_row``) or ``acc[a0]``: from its leaf table if it has one (the
    rows routed from the routing buffer ``buf`` into ``idx``), else by ``_linear_row``;
    ``work`` from ``_work``."""
    if otab is None:
        pass
    elif otab[0][t]:
        _table_leaves(t, layout, buf, idx)
        for k in range(m):
            _add_table(acc, a0 + k if per_row else a0, np.int64(idx[k]), g, scale[k], otab)
        return
    nq = tree_nq[t]
    lo = nodes.tree_offsets[t]
    hi = nodes.tree_offsets[t + 1]
    tt, R, C, S = _tree_views(tabs, work, t, hi - lo, nq)
    hot, Zs, Os = work[0], work[1], work[2]
    for k in range(m):
        if scale[k] != 0.0:
            a = a0 + k if per_row else a0
            _linear_row(
                X, r0 + k, t, lo, hi, nodes, lay, tt, f32, simple, nq, scale[k], acc, a, g,
                hot, Zs, Os, R, C, S,
            )  # fmt: skip


def shap_inner(X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab,
               forest, acc):  # fmt: skip
    """TreeInner or ForestInner with TreeSHAP attributions, streamed: no SHAP value is stored.

    One pass over the rows in boosting order with staged margins (``stages``, the model's
    ``kernels.attribution.Stages``), as ``kernels.attribution.staged_pass``: for TreeInner
    every tree's SHAP values of a row are added to ``acc[chunk, player, output]`` scaled by
    ``w (-g) / lr[t]`` (g the gradient at the margin before the tree's round); for ForestInner
    (``forest``) the rows' summed negative gradients are collected first, then every tree's
    values are added scaled by ``w`` times them. ``acc`` has shape (n_chunks, n_players,
    n_outputs): one accumulator per chunk of row blocks (``inner_chunks``), spread over threads
    (``kernels._threads``). The TreeSHAP arguments (and ``otab``, the oblivious trees' leaf
    tables) are those of ``tree_shap``.
    """
    none3 = np.zeros((0, 0, 0))
    run_chunks(_inner_chunk, acc.shape[0], X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab, forest, acc,
               np.zeros((0, 0)), none3, none3, np.zeros((0, 0)), none3)  # fmt: skip


def shap_inner_moments(X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes,
                       lr, otab, forest, pcredit, s1, s2, s2t, swu):  # fmt: skip
    """``shap_inner``'s per-row terms and the sums of their squares, per chunk of rows.

    A row's term of output feature f and output c is what ``shap_inner`` adds for the row
    (``w (-g) / lr[t]`` times tree t's SHAP values, summed over trees; for ``forest`` the
    summed ``w (-g)`` times the summed SHAP values), credited to the output features by
    ``pcredit`` (n_players, n_output_features; empty: players are the features). Every
    chunk keeps its rows' terms in a (ROW_BLOCK, n_players, n_outputs) buffer and, at the end
    of each block of rows, adds to ``s1[chunk, f, c]`` the terms, to ``s2`` their squares,
    to ``s2t[chunk, f]`` the squares of their sums over outputs and to ``swu`` the terms times
    ``w``. ``s1``, ``s2``, ``swu`` have shape (n_chunks, n_output_features, n_outputs),
    ``s2t`` (n_chunks, n_output_features), all zeroed by the caller (n_chunks from
    ``inner_chunks``); other arguments as ``shap_inner``.
    """
    n_players = pcredit.shape[0] if pcredit.shape[0] > 0 else s1.shape[1]
    shape = np.zeros((0, n_players, s1.shape[2]))
    run_chunks(_inner_chunk, s1.shape[0], X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab, forest, shape, pcredit,
               s1, s2, s2t, swu)  # fmt: skip


def inner_chunks(n_rows, n_trees):
    """The number of chunks (accumulators) of a ``shap_inner`` pass over ``n_rows`` rows."""
    return _spread(n_rows, n_trees)
