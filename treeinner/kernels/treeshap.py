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
from numba import njit, prange

from ._twins import parallel_and_serial
from .attribution import _block_buffers, _chunk_rows, _copy_rows, _round_gradients, _start_block
from .routing import ROW_BLOCK, _add_leaves, _goes_left, _load_block, _route_block, n_blocks


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
    every edge). The size is the sum over trees of nodes times points (``_tree_tables``
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
def _tree_tables(tabs, t, n, nq):
    """Tree t's tables (``edge_tables``; ``n`` its nodes) as (n, points) views, and the
    first ``nq`` points of its rule: (FH, FC, CH, tq, wq, CC)."""
    FH, FC, CH, rule_t, rule_w, CC, toff, roff, tnq = tabs
    s = tnq[t]
    a = toff[t]
    b = a + n * s
    r = roff[t]
    return (FH[a:b].reshape((n, s)), FC[a:b].reshape((n, s)), CH[a:b].reshape((n, s)),
            rule_t[r : r + nq], rule_w[r : r + nq], CC[r : r + nq])  # fmt: skip


@njit(cache=True)
def max_table(tabs):
    """The largest table of one tree (``edge_tables``): the size of the work arrays."""
    toff = tabs[6]
    m = 1
    for t in range(toff.shape[0] - 1):
        m = max(m, toff[t + 1] - toff[t])
    return m


@njit(cache=True)
def _linear_row(
    X, row, lo, hi, nodes, lay, tt, f32, simple, nq, scale, acc, ar, g, hot, Zs, Os, R, C, S
):
    """Add ``scale`` times the TreeSHAP values of the tree at positions ``lo:hi`` (output
    ``g``) for row ``row`` of ``X`` to ``acc[ar, player, g]``. ``lay`` is
    ``edge_layout``, ``tt`` the tree's tables (``_tree_tables``; the tree uses ``nq``
    quadrature points); ``simple``: the tree's splits are numeric with NaN going the default
    way (read without branches); ``hot``, ``Zs``, ``Os`` (merged z, o) are work arrays of at
    least the tree's size, ``R``, ``C``, ``S`` (positions, nq) views (``_tree_views``)."""
    left, right, feature, value = nodes.left, nodes.right, nodes.feature, nodes.value
    order, ppos, eplayer, share, prev = lay
    FH, FC, CH, tq, wq, CC = tt
    if left[lo] < 0:
        return
    u = order[lo]
    v = X[row, feature[u]]
    if _goes_left(v, u, nodes, f32):
        hot[0] = left[u]
    else:
        hot[0] = right[u]
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
            if simple:
                gl = (v <= nodes.bound[c]) | ((v != v) & (nodes.default_left[c] != 0))
            else:
                gl = _goes_left(v, c, nodes, f32)
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
            t = tq[q]
            s1 = 1.0 - t
            fn = z * s1 + o * t
            cn = (o - z) / fn
            fo = zp * s1 + op * t
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


@njit(cache=True, inline="always")
def _tree_views(tabs, work, t, n, nq):
    """Tree t's tables (``_tree_tables``; ``n`` nodes, ``nq`` points) and the work buffers
    R, C, S of ``_work`` as (n, nq) arrays."""
    m = n * nq
    R = work[3][:m].reshape((n, nq))
    C = work[4][:m].reshape((n, nq))
    S = work[5][:m].reshape((n, nq))
    return _tree_tables(tabs, t, n, nq), R, C, S


@njit(cache=True, inline="always")
def _add_table(acc, ar, k, leaf, g, scale, otab):
    """Add ``scale`` times the leaf table of ``leaf`` (``otab``) to ``acc[ar, :, g]``
    (``ar < 0``: ``acc[k]``)."""
    _, tptr, tcol, tval = otab
    a = k if ar < 0 else ar
    for e in range(tptr[leaf], tptr[leaf + 1]):
        acc[a, tcol[e], g] += scale * tval[e]


@njit(cache=True)
def _shap_rows(X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32, out,
               r0, r1):  # fmt: skip
    tree_offsets = nodes.tree_offsets
    tree_group = nodes.tree_group
    work = _work(max_nodes, tabs)
    hot, Zs, Os = work[0], work[1], work[2]
    for t in range(tree_lo, tree_hi):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        g = tree_group[t]
        nq = tree_nq[t]
        st = simple[t]
        tt, R, C, S = _tree_views(tabs, work, t, hi - lo, nq)
        for row in range(r0, r1):
            _linear_row(
                X, row, lo, hi, nodes, lay, tt, f32, st, nq, 1.0, out, row, g,
                hot, Zs, Os, R, C, S,
            )  # fmt: skip


def tree_shap(X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32, out):
    """Add the path-dependent TreeSHAP values of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_players, n_outputs), float64, zeroed by the caller. ``lay``
    is ``edge_layout``, ``tabs`` ``edge_tables``; ``simple[t]`` flags trees whose
    splits are all numeric with NaN going the default way; tree t uses ``tree_nq[t]``
    quadrature points; ``max_nodes`` bounds the size of every tree; ``f32`` as in the routing
    kernels. Parallel over blocks of
    ``ROW_BLOCK`` rows, trees outermost within a block.
    """
    n_rows = X.shape[0]
    for b in prange(n_blocks(n_rows)):
        r0 = b * ROW_BLOCK
        r1 = min(n_rows, r0 + ROW_BLOCK)
        _shap_rows(X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32,
                   out, r0, r1)  # fmt: skip


tree_shap, tree_shap_serial = parallel_and_serial(tree_shap)


@njit(cache=True)
def _shap_rows_tab(X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes,
                   f32, otab, out, b):  # fmt: skip
    """Block ``b`` of ``tree_shap_tab``."""
    tree_offsets = nodes.tree_offsets
    tree_group = nodes.tree_group
    work = _work(max_nodes, tabs)
    hot, Zs, Os = work[0], work[1], work[2]
    has_tab = otab[0]
    tabulated = False
    for t in range(tree_lo, tree_hi):
        tabulated = tabulated or has_tab[t] != 0
    if tabulated:  # the routing buffer only where a tree is read from its table
        r0, m, idx, buf = _load_block(X, b, layout.used)
    else:
        r0 = b * ROW_BLOCK
        m = min(X.shape[0], r0 + ROW_BLOCK) - r0
        idx = np.empty(0, dtype=np.uint64)
        buf = np.empty((0, 0), dtype=np.float64)
    for t in range(tree_lo, tree_hi):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        g = tree_group[t]
        if has_tab[t]:  # an oblivious tree: the row's values are its leaf's table
            _route_block(X, r0, m, t, layout, nodes, f32, buf, idx)
            for k in range(m):
                _add_table(out, r0 + k, k, np.int64(idx[k]), g, 1.0, otab)
            continue
        nq = tree_nq[t]
        st = simple[t]
        tt, R, C, S = _tree_views(tabs, work, t, hi - lo, nq)
        for row in range(r0, r0 + m):
            _linear_row(
                X, row, lo, hi, nodes, lay, tt, f32, st, nq, 1.0, out, row, g,
                hot, Zs, Os, R, C, S,
            )  # fmt: skip


def tree_shap_tab(X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes,
                  f32, otab, out):  # fmt: skip
    """``tree_shap`` reading the oblivious trees from their leaf tables.

    ``otab`` = (has_tab, ptr, col, val): the rows of a tree with ``has_tab[t]`` are routed
    with ``layout`` and add their leaf's entries (``kernels.oblivious.shap_leaf_tables``);
    the other trees and arguments are as in ``tree_shap``.
    """
    for b in prange(n_blocks(X.shape[0])):
        _shap_rows_tab(X, nodes, layout, lay, tabs, simple, tree_nq, tree_lo, tree_hi,
                       max_nodes, f32, otab, out, b)  # fmt: skip


tree_shap_tab, tree_shap_tab_serial = parallel_and_serial(tree_shap_tab)


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


@njit(cache=True, inline="always")
def _scaled_rows(X, r0, m, t, nodes, lay, tabs, f32, simple, nq, scale, acc, ar, g, work):
    """Add ``scale[k]`` times tree t's TreeSHAP values of row ``r0 + k`` to ``acc[ar]``
    (``ar < 0``: to ``acc[k]``, one slot per row of the block); ``work`` from ``_work``."""
    lo = nodes.tree_offsets[t]
    hi = nodes.tree_offsets[t + 1]
    tt, R, C, S = _tree_views(tabs, work, t, hi - lo, nq)
    for k in range(m):
        if scale[k] != 0.0:
            _linear_row(
                X, r0 + k, lo, hi, nodes, lay, tt, f32, simple, nq, scale[k], acc,
                k if ar < 0 else ar, g, work[0], work[1], work[2], R, C, S,
            )  # fmt: skip


@njit(cache=True)
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


@njit(cache=True)
def _inner_chunk(X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr,
                 otab, forest, lo, hi, acc, ar, pcredit, s1, s2, s2t, swu):  # fmt: skip
    """Rows ``lo:hi`` of ``shap_inner`` (``ar >= 0``: into ``acc[ar]``) or of
    ``shap_inner_moments`` (``ar < 0``: ``acc`` is a (ROW_BLOCK, n_players, n_outputs) buffer
    of zeros, one slot per row of a block, folded into ``s1``, ``s2``, ``s2t``, ``swu`` by
    ``_fold_rows`` at the end of every block)."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    tree_group = nodes.tree_group
    has_tab = otab[0]
    K = base_margin.shape[0]
    work = _work(max_nodes, tabs)
    scale = np.empty(ROW_BLOCK)
    cu = np.empty((s1.shape[0], K))
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    for r0 in range(lo, hi, ROW_BLOCK):
        m = _start_block(X, r0, hi, layout.used, buf, base_margin, F, gsum)
        for it in range(iter_ptr.shape[0] - 1):
            _round_gradients(code, prm, y, r0, m, F, g, h)
            _copy_rows(F, delta, m)
            if forest:
                for k in range(m):
                    for c in range(K):
                        gsum[k, c] -= w[r0 + k] * g[k, c]
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                _route_block(X, r0, m, t, layout, nodes, f32, buf, idx)
                c = tree_group[t]
                _add_leaves(delta, idx, nodes.value, m, c, f32_sum)
                if forest:
                    continue
                for k in range(m):
                    scale[k] = -w[r0 + k] * g[k, c] / lr[t]
                if has_tab[t]:
                    for k in range(m):
                        _add_table(acc, ar, k, np.int64(idx[k]), c, scale[k], otab)
                    continue
                _scaled_rows(X, r0, m, t, nodes, lay, tabs, f32, simple[t], tree_nq[t],
                             scale, acc, ar, c, work)  # fmt: skip
            _copy_rows(delta, F, m)
        if forest:
            for t in range(nodes.tree_offsets.shape[0] - 1):
                c = tree_group[t]
                for k in range(m):
                    scale[k] = gsum[k, c]
                if has_tab[t]:
                    _route_block(X, r0, m, t, layout, nodes, f32, buf, idx)
                    for k in range(m):
                        _add_table(acc, ar, k, np.int64(idx[k]), c, scale[k], otab)
                    continue
                _scaled_rows(X, r0, m, t, nodes, lay, tabs, f32, simple[t], tree_nq[t],
                             scale, acc, ar, c, work)  # fmt: skip
        if ar < 0:
            _fold_rows(acc, m, w, r0, pcredit, cu, s1, s2, s2t, swu)


@njit(parallel=True, cache=True)
def shap_inner(X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab,
               forest, acc):  # fmt: skip
    """TreeInner or ForestInner with TreeSHAP attributions, streamed: no SHAP value is stored.

    One pass over the rows in boosting order with staged margins (``stages``, the model's
    ``kernels.attribution.Stages``), as ``kernels.attribution.staged_pass``: for TreeInner
    every tree's SHAP values of a row are added to ``acc[chunk, player, output]`` scaled by
    ``w (-g) / lr[t]`` (g the gradient at the margin before the tree's round); for ForestInner
    (``forest``) the rows' summed negative gradients are collected first, then every tree's
    values are added scaled by ``w`` times them. ``acc`` has shape (n_chunks, n_players,
    n_outputs): one accumulator per chunk of rows (the caller may use more chunks than threads
    and schedule them dynamically). The TreeSHAP arguments (and ``otab``, the oblivious
    trees' leaf tables) are those of ``tree_shap``.
    """
    n_chunks = acc.shape[0]
    none2 = np.empty((0, 0))
    none1 = np.empty(0)
    for ch in prange(n_chunks):
        lo, hi = _chunk_rows(ch, n_chunks, X.shape[0])
        _inner_chunk(
            X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab,
            forest, lo, hi, acc, np.int64(ch), none2, none2, none2, none1, none2,
        )  # fmt: skip


@njit(parallel=True, cache=True)
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
    ``s2t`` (n_chunks, n_output_features), all zeroed by the caller; other arguments as
    ``shap_inner``.
    """
    n_chunks = s1.shape[0]
    n_players = pcredit.shape[0] if pcredit.shape[0] > 0 else s1.shape[1]
    K = s1.shape[2]
    for ch in prange(n_chunks):
        lo, hi = _chunk_rows(ch, n_chunks, X.shape[0])
        rows = np.zeros((ROW_BLOCK, n_players, K))
        _inner_chunk(
            X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr, otab,
            forest, lo, hi, rows, -1, pcredit, s1[ch], s2[ch], s2t[ch], swu[ch],
        )  # fmt: skip
