"""Numba kernels for path-dependent SHAP interaction values.

The polynomial form of ``kernels.treeshap`` extended by one factor. For a leaf of value v
whose path has d distinct players with merged cover fractions ``z_k`` and row indicators
``o_k``, and ``F_k(t) = z_k (1 - t) + o_k t``, ``a_k(t) = (o_k - z_k) / F_k(t)``:

    phi_i    = integral_0^1 v a_i(t) prod_k F_k(t) dt
    Phi_ij   = 1/2 integral_0^1 v a_i(t) a_j(t) prod_k F_k(t) dt         (i != j)
    Phi_ii   = phi_i - sum_{j != i} Phi_ij

because the interaction weight |S|! (d - 2 - |S|)! / (2 (d - 1)!) of shap's definition is half
the Beta integral of t^|S| (1 - t)^(d - 2 - |S|): conditioning the TreeSHAP polynomial on a
second path feature divides out its factor and multiplies by its difference, one factor per
pair. The integrand has degree d - 2, so the ceil(P / 2) Gauss-Legendre points of the
TreeSHAP tables (``edge_tables``) are exact.

Per row and tree, the forward pass of ``kernels.treeshap._linear_row`` gives every edge e its
weighted coefficient C_e(t_q) = w_q delta_e(t_q) (delta_e = a at e minus a at the previous
split on the same player: the telescoping differences, which sum to a_i at every leaf) and the
backward pass the leaf sums S_e(t_q) = sum of v prod F over the leaves below e. The pair of an
edge e and an ancestor edge a on a different player adds
``1/2 sum_q C_e(t_q) S_e(t_q) delta_a(t_q)`` to (player a, player e) and (player e, player a)
and subtracts it from both diagonal entries, whose TreeSHAP value ``sum_q C_e S_e`` is added
once per edge. O(N D Q) per row and tree (N nodes, D depth, Q points): every edge paired with
its ancestors, which is the number of (edge, ancestor edge) terms the values are made of; no
per-feature TreeSHAP pass (shap and XGBoost condition TreeSHAP on every feature, on and off:
O(p L D^2) per row and tree).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._threads import n_chunks, run_chunks
from .attribution import _block_buffers, _copy_rows, _start_block
from .routing import (
    ROW_BLOCK,
    _add_leaves,
    chunk_range,
    general_nodes,
    route,
    route_top,
    top_arrays,
)
from .treeshap import _goes_left_call, _gradients, _rows2d, max_table


@njit(cache=True, error_model="numpy")
def _pair_row(
    X, row, t, lo, hi, nodes, lay, tt, f32, simple, nq, scale, acc, ar, g, hot, Zs, Os, R, C, S,
    Dl, B,
):  # fmt: skip
    """Add ``scale`` times the SHAP interaction values of tree t (positions ``lo:hi``,
    output ``g``) for row ``row`` of ``X`` to ``acc[ar, :, :, g]``. Arguments as
    ``kernels.treeshap._linear_row``, plus ``Dl`` (positions, nq): the unweighted
    coefficients delta, and ``B`` (nq,): work."""
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
        Dl[0, q] = 0.0
    # parents first: merged (z, o), path products R, coefficients C = w delta and delta
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
        if left[c] >= 0:
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
                Dl[k, q] = 0.0
            continue
        if pv < 0:  # the player's first split on the path: factors from the tables
            if oc == 1.0:
                for q in range(nq):
                    R[k, q] = R[pk, q] * FH[k, q]
                    C[k, q] = CH[k, q]
                    Dl[k, q] = (1.0 - z) / FH[k, q]
                    S[k, q] = 0.0
            else:
                for q in range(nq):
                    R[k, q] = R[pk, q] * FC[k, q]
                    C[k, q] = CC[q]
                    Dl[k, q] = -1.0 / (1.0 - tq[q])
                    S[k, q] = 0.0
            continue
        for q in range(nq):
            tv = tq[q]
            s1 = 1.0 - tv
            fn = z * s1 + o * tv
            cn = (o - z) / fn
            fo = zp * s1 + op * tv
            R[k, q] = R[pk, q] * fn / fo
            d = cn - (op - zp) / fo
            Dl[k, q] = d
            C[k, q] = wq[q] * d
            S[k, q] = 0.0
    # children first: leaf sums up the tree; each edge with itself and with its ancestors
    for i in range(hi - 1, lo, -1):
        k = i - lo
        c = order[i]
        pk = ppos[i] - lo
        if left[c] < 0:
            v = value[c]
            for q in range(nq):
                S[k, q] = v * R[k, q]
        pe = eplayer[i]
        tot = 0.0
        nz = False
        for q in range(nq):
            b = C[k, q] * S[k, q]
            B[q] = b
            tot += b
            nz = nz or b != 0.0
            S[pk, q] += S[k, q]
        if not nz:
            continue  # every term of this edge is 0
        acc[ar, pe, pe, g] += scale * tot
        a = pk
        while a > 0:
            pa = eplayer[a + lo]
            if pa != pe:
                h = 0.0
                for q in range(nq):
                    h += B[q] * Dl[a, q]
                h *= 0.5 * scale
                acc[ar, pa, pe, g] += h
                acc[ar, pe, pa, g] += h
                acc[ar, pa, pa, g] -= h
                acc[ar, pe, pe, g] -= h
            a = ppos[a + lo] - lo


@njit(cache=True)
def _work(max_nodes, tabs):
    """Per-thread work arrays of ``_pair_row``: hot, Zs, Os (one per node), flat buffers for
    R, C, S, Dl sized for the largest tree's tables, and B (one per point)."""
    m = max_table(tabs)
    nqmax = 1
    tnq = tabs[8]
    for t in range(tnq.shape[0]):
        nqmax = max(nqmax, tnq[t])
    return (
        np.empty(max_nodes, dtype=np.int64),
        np.empty(max_nodes),
        np.empty(max_nodes),
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(nqmax),
    )


@njit(cache=True, inline="always")
def _views(tabs, work, t, n, nq):
    """Tree t's tables as in ``kernels.treeshap._tree_views`` and the work buffers R, C, S,
    Dl as (n, nq) arrays."""
    FH, FC, CH, rule_t, rule_w, CC, toff, roff, tnq = tabs
    s = tnq[t]
    a = toff[t]
    r = roff[t]
    tt = (_rows2d(FH, a, n, s), _rows2d(FC, a, n, s), _rows2d(CH, a, n, s),
          rule_t[r : r + nq], rule_w[r : r + nq], CC[r : r + nq])  # fmt: skip
    z = a - a
    return (tt, _rows2d(work[3], z, n, nq), _rows2d(work[4], z, n, nq),
            _rows2d(work[5], z, n, nq), _rows2d(work[6], z, n, nq))  # fmt: skip


@njit(cache=True, error_model="numpy")
def _tree_pairs(X, r0, m, t, nodes, lay, tabs, f32, simple, tree_nq, scale, acc, a0, per_row, g,
                work):  # fmt: skip
    """Add ``scale[k]`` times tree t's interaction values of row ``r0 + k`` (k < m) to
    ``acc[a0 + k]`` (``per_row``) or ``acc[a0]``."""
    nq = tree_nq[t]
    lo = nodes.tree_offsets[t]
    hi = nodes.tree_offsets[t + 1]
    tt, R, C, S, Dl = _views(tabs, work, t, hi - lo, nq)
    hot, Zs, Os, B = work[0], work[1], work[2], work[7]
    for k in range(m):
        if scale[k] != 0.0:
            a = a0 + k if per_row else a0
            _pair_row(X, r0 + k, t, lo, hi, nodes, lay, tt, f32, simple, nq, scale[k], acc, a,
                      g, hot, Zs, Os, R, C, S, Dl, B)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def _values_chunk(X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32, out,
                  ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``interaction_values``."""
    tree_group = nodes.tree_group
    work = _work(max_nodes, tabs)
    n_rows = X.shape[0]
    b0, b1 = chunk_range(ch, nch, (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)
    scale = np.ones(ROW_BLOCK)
    per_row = ch >= 0
    for b in range(b0, b1):
        r0 = b * ROW_BLOCK
        m = min(n_rows, r0 + ROW_BLOCK) - r0
        for t in range(tree_lo, tree_hi):
            _tree_pairs(X, r0, m, t, nodes, lay, tabs, f32, simple, tree_nq, scale, out, r0,
                        per_row, tree_group[t], work)  # fmt: skip


def _spread(n_rows, n_trees):
    """Chunks of row blocks for an interaction pass (a row and tree costs about thirty of a
    predict)."""
    return n_chunks(30 * n_rows * max(n_trees, 1), (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)


def interaction_values(X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi, max_nodes, f32,
                       out):  # fmt: skip
    """Add the path-dependent SHAP interaction values of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_players, n_players, n_outputs), float64, zeroed by the caller;
    the other arguments are those of ``kernels.treeshap.tree_shap`` (no leaf tables). Spread
    over threads by blocks of ``ROW_BLOCK`` rows, each block's rows written by one thread.
    """
    nch = _spread(X.shape[0], tree_hi - tree_lo)
    run_chunks(_values_chunk, nch, X, nodes, lay, tabs, simple, tree_nq, tree_lo, tree_hi,
               max_nodes, f32, out)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def _inner_chunk(X, y, w, nodes, general, layout, stages, lay, tabs, simple, tree_nq, max_nodes,
                 lr, acc, ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``interaction_inner``."""
    iter_ptr, base_margin, code, prm, f32, f32_sum = stages
    tree_group = nodes.tree_group
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    K = base_margin.shape[0]
    work = _work(max_nodes, tabs)
    scale = np.empty(ROW_BLOCK)
    idx, buf, F, delta, g, h, gsum = _block_buffers(layout.used, K)
    n_rows = X.shape[0]
    b0, b1 = chunk_range(ch, nch, (n_rows + ROW_BLOCK - 1) // ROW_BLOCK)
    per_row = ch < 0  # False, typed as a plain bool
    for r0 in range(b0 * ROW_BLOCK, min(n_rows, b1 * ROW_BLOCK), ROW_BLOCK):
        m = _start_block(X, r0, n_rows, layout.used, buf, base_margin, F, gsum)
        for it in range(iter_ptr.shape[0] - 1):
            _gradients(code, prm, y, r0, m, F, g, h)
            _copy_rows(F, delta, m)
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                                 tree_flags, buf, idx):  # fmt: skip
                    if general is not None:
                        route(X, r0, m, t, layout, general, f32, buf, idx)
                c = tree_group[t]
                _add_leaves(delta, idx, nodes.value, m, c, f32_sum)
                for k in range(m):
                    scale[k] = -w[r0 + k] * g[k, c] / lr[t]
                _tree_pairs(X, r0, m, t, nodes, lay, tabs, f32, simple, tree_nq, scale, acc, ch,
                            per_row, c, work)  # fmt: skip
            _copy_rows(delta, F, m)


def interaction_inner(X, y, w, nodes, layout, stages, lay, tabs, simple, tree_nq, max_nodes, lr,
                      acc):  # fmt: skip
    """TreeInner on SHAP interaction values, streamed: no interaction value is stored.

    One pass over the rows in boosting order with staged margins (``stages``, as
    ``kernels.treeshap.shap_inner``): every tree's interaction values of a row are added to
    ``acc[chunk, player, player, output]`` scaled by ``w (-g) / lr[t]`` (g the gradient at the
    margin before the tree's round). ``acc`` has shape (n_chunks, n_players, n_players,
    n_outputs), one accumulator per chunk of row blocks (``inner_chunks``).
    """
    run_chunks(_inner_chunk, acc.shape[0], X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, lay, tabs, simple, tree_nq, max_nodes, lr, acc)  # fmt: skip


def inner_chunks(n_rows, n_trees):
    """The number of chunks (accumulators) of an ``interaction_inner`` pass."""
    return _spread(n_rows, n_trees)
