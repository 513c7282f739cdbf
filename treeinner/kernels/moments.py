"""Numba kernels for the sampling moments of held-out importances built from path edges.

TreeInner and ForestInner with path attributions (PreDecomp, Saabas), and the linearised
unbiased gain, are sums over rows of per-row terms that are, per tree, sums over the edges
(q -> n) of the row's path of a coefficient of node n times the row's staged gradient or
hessian, credited to the split column of q. Their standard errors need the per-row terms
themselves: ``edge_moments`` computes them in one staged pass (as
``kernels.attribution.staged_pass``) into a per-thread buffer of ``ROW_BLOCK`` rows and folds
them into per-feature sums of the terms and of their squares.

Every leaf's path is first flattened into a list of (output feature, coefficient of g,
coefficient of h) with the column credit applied and repeated features merged
(``leaf_lists``), so that a row adds one short contiguous list per tree. After a block of
rows, each row's buffer is folded over every feature the lists use, or, where a row touches
few of them (many features, few trees), over the list of features it touched, so that its
cost does not grow with the number of features.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._threads import run_chunks
from .attribution import _block_buffers, _copy_rows, _start_block, round_start
from .gradients import grad_hess
from .routing import ROW_BLOCK, _add_leaves, chunk_range, n_blocks, route


@njit(cache=True)
def _children_of(left, parent):
    """The right child of every inner node, from ``left`` and ``parent``."""
    right = np.full(left.shape[0], -1, dtype=np.int64)
    for n in range(left.shape[0]):
        q = parent[n]
        if q >= 0 and left[q] != n:
            right[q] = n
    return right


@njit(cache=True)
def leaf_list_ptr(left, feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr):
    """The offsets of the flattened per-leaf lists of ``leaf_lists``: node n's entries will be
    ``ptr[n]:ptr[n + 1]`` (none at inner nodes), one per output feature credited on its path;
    returns the total length, for the caller to allocate ``col``, ``cg``, ``ch`` exactly."""
    n = left.shape[0]
    right = _children_of(left, parent)
    counts = np.zeros(n, dtype=np.int64)
    none_i = np.empty(0, dtype=np.int32)
    none_f = np.empty(0)
    _path_walk(left, right, feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr, counts,
               none_i, none_f, none_f, False)  # fmt: skip
    end = 0
    for m in range(n):
        ptr[m] = end
        end += counts[m]
    ptr[n] = end
    return end


@njit(cache=True)
def leaf_lists(left, feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr, col, cg, ch):
    """Fill the flattened per-leaf lists at the offsets ``ptr`` from ``leaf_list_ptr``: node
    n's entries ``ptr[n]:ptr[n + 1]`` are each an output feature ``col`` and its coefficients
    ``cg`` of the gradient and ``ch`` of the hessian, summed over the path's edges (q -> m) as
    ``credit(feature[q], o) * dg[m]`` (``dh[m]``). The column credit is given in CSR form
    (``cptr``, ``cidx``, ``cval``).

    One depth-first walk per tree with an explicit stack keeps the running sums of the
    current path per output feature, restoring them (saved values, no subtraction) when it
    leaves a node, so the cost is the nodes times their credits plus the lists' length, not
    the sum of the leaves' depths (a chain tree of depth d would cost d^2)."""
    right = _children_of(left, parent)
    counts = np.zeros(left.shape[0], dtype=np.int64)
    _path_walk(left, right, feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr, counts,
               col, cg, ch, True)  # fmt: skip


@njit(cache=True)
def _path_walk(left, right, feature, parent, dg, dh, cptr, cidx, cval, n_out, ptr, counts,
               col, cg, ch, fill):  # fmt: skip
    """The walk of ``leaf_lists``: ``counts[leaf]`` (the outputs credited on the leaf's path)
    or, with ``fill``, the lists themselves from ``ptr[leaf]``."""
    n = left.shape[0]
    acc_g = np.zeros(n_out)
    acc_h = np.zeros(n_out)
    refs = np.zeros(n_out, dtype=np.int64)  # credited edges on the current path, per output
    active = np.empty(n_out, dtype=np.int64)  # outputs with refs > 0, and where each one is
    where = np.full(n_out, -1, dtype=np.int64)
    n_active = 0
    log_size = 1
    for m in range(n):
        if left[m] >= 0:
            log_size += 2 * (cptr[feature[m] + 1] - cptr[feature[m]])
    old_g = np.empty(log_size)
    old_h = np.empty(log_size)
    top = 0
    stack = np.empty(2 * n + 1, dtype=np.int64)
    for root in range(n):
        if parent[root] >= 0:
            continue
        stack[0] = root
        sp = 1
        while sp > 0:
            sp -= 1
            m = stack[sp]
            leaving = m < 0
            if leaving:
                m = ~m
            q = parent[m]
            lo, hi = (cptr[feature[q]], cptr[feature[q] + 1]) if q >= 0 else (0, 0)
            if leaving:  # undo m's edge, last credit first
                for e in range(hi - 1, lo - 1, -1):
                    o = cidx[e]
                    top -= 1
                    acc_g[o] = old_g[top]
                    acc_h[o] = old_h[top]
                    refs[o] -= 1
                    if refs[o] == 0:  # swap o out of the active list
                        n_active -= 1
                        last = active[n_active]
                        active[where[o]] = last
                        where[last] = where[o]
                        where[o] = -1
                continue
            for e in range(lo, hi):
                o = cidx[e]
                old_g[top] = acc_g[o]
                old_h[top] = acc_h[o]
                top += 1
                if refs[o] == 0:
                    acc_g[o] = 0.0
                    acc_h[o] = 0.0
                    where[o] = n_active
                    active[n_active] = o
                    n_active += 1
                refs[o] += 1
                acc_g[o] += cval[e] * dg[m]
                acc_h[o] += cval[e] * dh[m]
            stack[sp] = ~m
            sp += 1
            if left[m] >= 0:
                stack[sp] = right[m]
                stack[sp + 1] = left[m]
                sp += 2
            elif fill:
                for j in range(n_active):
                    o = active[j]
                    col[ptr[m] + j] = o
                    cg[ptr[m] + j] = acc_g[o]
                    ch[ptr[m] + j] = acc_h[o]
            else:
                counts[m] = n_active


# what a row adds per tree (``edge_moments``'s ``mode``)
MODE_G = 0  # coef_g * g
MODE_GH = 1  # coef_g * g + coef_h * h
MODE_FOREST = 2  # coef_g (ForestInner's attribution; the gradients are summed apart)


@njit(cache=True, inline="always")
def _add_list(Uk, lo, hi, col, cg, ch, a, b, mode):
    """Add leaf list ``lo:hi`` to one row's buffer ``Uk`` (of its output), per ``mode``."""
    if mode == MODE_G:
        for e in range(lo, hi):
            Uk[col[e]] += cg[e] * a
    elif mode == MODE_GH:
        for e in range(lo, hi):
            Uk[col[e]] += cg[e] * a + ch[e] * b
    else:
        for e in range(lo, hi):
            Uk[col[e]] += cg[e]


@njit(cache=True, inline="always")
def _touch(touched, nt, mark, k, lo, hi, col):
    """Record the output features of leaf list ``lo:hi`` that row k touches for the first
    time."""
    for e in range(lo, hi):
        o = col[e]
        if mark[k, o] == 0:
            mark[k, o] = 1
            touched[k, nt[k]] = o
            nt[k] += 1


@njit(cache=True, inline="always")
def _fold_one(U, k, o, wk, gsum, forest, s1, s2, s2t, swu):
    """Fold row k's terms of output feature o (``w U``, with ``forest`` times ``gsum``) into
    the sums and reset them."""
    tot = 0.0
    for c in range(U.shape[1]):
        v = wk * U[k, c, o]
        if forest:
            v *= gsum[k, c]
        U[k, c, o] = 0.0
        s1[c, o] += v
        s2[c, o] += v * v
        swu[c, o] += wk * v
        tot += v
    s2t[o] += tot * tot


@njit(cache=True, inline="always")
def _fold_dense(U, k, wk, gsum, forest, s1, s2, s2t, swu, tot):
    """Fold row k's terms of every feature (contiguous loops over the features)."""
    K = U.shape[1]
    for c in range(K):
        f = wk * gsum[k, c] if forest else wk
        Ukc = U[k, c]
        s1c = s1[c]
        s2c = s2[c]
        swc = swu[c]
        for o in range(Ukc.shape[0]):
            v = f * Ukc[o]
            Ukc[o] = 0.0
            s1c[o] += v
            s2c[o] += v * v
            swc[o] += wk * v
            if K > 1:
                tot[o] += v
    if K > 1:
        for o in range(tot.shape[0]):
            s2t[o] += tot[o] * tot[o]
            tot[o] = 0.0


@njit(cache=True, inline="always")
def _fold_rows(U, touched, nt, mark, dense, gsum, w, r0, m, forest, s1, s2, s2t, swu, tot):
    """Fold the block's per-row terms into the chunk's sums of u, u^2, (sum over outputs of
    u)^2 (only for several outputs: for one it is ``s2``) and w u, and reset the row buffers:
    every feature (``dense``) or the ones each row touched."""
    for k in range(m):
        wk = w[r0 + k]
        if dense:
            _fold_dense(U, k, wk, gsum, forest, s1, s2, s2t, swu, tot)
        else:
            for i in range(nt[k]):
                o = touched[k, i]
                _fold_one(U, k, o, wk, gsum, forest, s1, s2, s2t, swu)
                mark[k, o] = 0
            nt[k] = 0


@njit(cache=True, nogil=True)
def _edge_chunk(X, y, w, nodes, layout, stages, ptr, col, cg, ch, mode, dense, S1, S2, S2T, SWU,
                ch_, nch):  # fmt: skip
    """Chunk ``ch_`` of ``nch`` (row blocks) of ``edge_moments``, into ``S1[ch_]`` etc."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    value = nodes.value
    tree_group = nodes.tree_group
    K = base_margin.shape[0]
    n_out = S1.shape[2]
    forest = mode == MODE_FOREST
    s1 = S1[ch_]
    s2 = S2[ch_]
    s2t = S2T[ch_]
    swu = SWU[ch_]
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    U = np.zeros((ROW_BLOCK, K, n_out))
    nsp = 1 if dense else ROW_BLOCK
    touched = np.empty((nsp, n_out), dtype=np.int64)
    mark = np.zeros((nsp, n_out), dtype=np.uint8)
    nt = np.zeros(nsp, dtype=np.int64)
    tot = np.zeros(n_out)
    single = K == 1 and iter_ptr.shape[0] - 1 == tree_group.shape[0]
    b0, b1 = chunk_range(ch_, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0 = b * ROW_BLOCK
        m = _start_block(X, r0, X.shape[0], layout.used, buf, base_margin, F, gsum)
        if single:
            # one output, one tree per round: gradient, row terms and margin in one loop
            for t in range(tree_group.shape[0]):
                route(X, r0, m, t, layout, nodes, f32, buf, idx)
                for k in range(m):
                    leaf = np.int64(idx[k])
                    a, b_ = grad_hess(code, prm, y[r0 + k], F[k, 0])
                    p0 = ptr[leaf]
                    p1 = ptr[leaf + 1]
                    if not dense:
                        _touch(touched, nt, mark, k, p0, p1, col)
                    _add_list(U[k, 0], p0, p1, col, cg, ch, a, b_, mode)
                    if forest:
                        gsum[k, 0] -= a
                    if f32_sum:
                        F[k, 0] = np.float32(F[k, 0]) + np.float32(value[leaf])
                    else:
                        F[k, 0] += value[leaf]
            _fold_rows(U, touched, nt, mark, dense, gsum, w, r0, m, forest, s1, s2, s2t, swu, tot)
            continue
        for it in range(iter_ptr.shape[0] - 1):
            t0 = iter_ptr[it]
            t1 = iter_ptr[it + 1]
            D = round_start(code, prm, y, r0, m, F, delta, g, h, t1 - t0)
            for t in range(t0, t1):
                route(X, r0, m, t, layout, nodes, f32, buf, idx)
                c = tree_group[t]
                for k in range(m):
                    leaf = np.int64(idx[k])
                    p0 = ptr[leaf]
                    p1 = ptr[leaf + 1]
                    if not dense:
                        _touch(touched, nt, mark, k, p0, p1, col)
                    _add_list(U[k, c], p0, p1, col, cg, ch, g[k, c], h[k, c], mode)
                    if forest:
                        gsum[k, c] -= g[k, c]
                _add_leaves(D, idx, value, m, c, f32_sum)
            if t1 - t0 > 1:
                _copy_rows(delta, F, m)
        _fold_rows(U, touched, nt, mark, dense, gsum, w, r0, m, forest, s1, s2, s2t, swu, tot)


def edge_moments(X, y, w, nodes, layout, stages, ptr, col, cg, ch, mode, dense, S1, S2, S2T, SWU):
    """Sums of per-row terms built from the per-leaf lists, over rows, per output feature.

    For every row i the term of output feature o and output c is
    ``u = w_i sum_t [tree t of output c] sum_(entries e of the list of i's leaf in t)
    (cg[e] g_{i,t} + ch[e] h_{i,t})`` (``mode`` ``MODE_GH``; ``MODE_G``: without the hessian
    term), with g, h the gradient and hessian at the margin before tree t's boosting round
    exactly as ``kernels.attribution.staged_pass`` computes them (``stages``); with
    ``MODE_FOREST``, ``u = w_i R[i, o, c] GS[i, c]``, R the sum of ``cg[e]`` over the row's
    lists of the trees of output c and GS the sum over those trees of ``-g`` (ForestInner's
    factors). ``ptr``, ``col`` (int32), ``cg``, ``ch`` are ``leaf_lists``' output, its
    features possibly renumbered to the ones used (the caller maps them back).

    Each chunk keeps a buffer of ``ROW_BLOCK`` rows x features x outputs and folds a block's
    rows into its sums after the block: every feature with ``dense``, otherwise only the
    features each row touched (recorded per row), so that a row's cost does not grow with the
    number of features.

    Adds ``sum_i u``, ``sum_i u^2``, ``sum_i (sum_c u)^2`` and ``sum_i w_i u`` to ``S1[chunk]``
    (K, n_out), ``S2[chunk]``, ``S2T[chunk]`` (n_out; with one output it is left to the caller:
    ``S2``) and ``SWU[chunk]``: one accumulator per chunk of row blocks, the chunks spread
    over threads (``kernels._threads``; more chunks than threads balance uneven work).
    """
    run_chunks(_edge_chunk, S1.shape[0], X, y, w, nodes, layout, stages, ptr, col, cg, ch, mode,
               dense, S1, S2, S2T, SWU)  # fmt: skip
