"""Numba kernels for path-dependent TreeSHAP (Lundberg et al. 2018, Algorithm 2).

Node arrays come as the ``nodes`` tuple of ``kernels.routing``. ``weight`` holds the node
weights (float64, the covers): a child's share of its parent is ``weight[child] /
weight[parent]`` (one half each where the parent's weight is not positive, as in
``kernels.attribution.node_values``), so the expected value the attributions start from is
``node_values(..., lam=0)`` at the root.

Per row and tree the recursion of Algorithm 2 runs as a depth-first walk with an explicit
stack. The path of unique features at depth ``l`` lives in row ``l`` of four per-block arrays
(feature, zero fraction, one fraction, permutation weight): a node copies its parent's row,
extends it, and (when its split feature is already on the path) unwinds that feature before
its children copy the row in turn. Siblings only ever read their parent's row, which the walk
of the first sibling's subtree (deeper rows only) leaves intact.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .routing import ROW_BLOCK, _goes_left


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


@njit(cache=True, inline="always")
def _tree_row(X, row, root, nodes, weight, f32, g, out, pf, pz, po, pw, plen, sn, sl, sz, so, sf):
    """Add the TreeSHAP values of one tree (root ``root``, output ``g``) for row ``row`` of
    ``X`` to ``out[row, :, g]``. The other arguments are the per-block work arrays."""
    left, right, feature, bound, split_type, default_left, missing_type = nodes[:7]
    cat_offsets, cat_words, value = nodes[7], nodes[8], nodes[9]
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
        f = feature[u]
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
        if _goes_left(
            X[row, f], u, split_type, default_left, missing_type, bound, cat_offsets, cat_words, f32
        ):
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


@njit(cache=True, inline="always")
def _shap_block(X, nodes, weight, tree_lo, tree_hi, max_depth, f32, out, r0, r1):
    tree_offsets = nodes[11]
    tree_group = nodes[12]
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
    for t in range(tree_lo, tree_hi):
        root = tree_offsets[t]
        g = tree_group[t]
        for row in range(r0, r1):
            _tree_row(
                X, row, root, nodes, weight, f32, g, out, pf, pz, po, pw, plen, sn, sl, sz, so, sf
            )


@njit(parallel=True, cache=True)
def tree_shap(X, nodes, weight, tree_lo, tree_hi, max_depth, f32, out):
    """Add the path-dependent TreeSHAP values of trees ``tree_lo:tree_hi`` to ``out``.

    ``out`` has shape (n_rows, n_features, n_outputs), float64, zeroed by the caller;
    ``weight`` (float64, per node) are the node weights; ``max_depth`` bounds the depth of
    every tree; with ``f32`` categorical values are cast to float32 before they are read as
    integers (as in the routing kernels). Parallel over blocks of ``ROW_BLOCK`` rows, trees
    outermost within a block.
    """
    n_rows = X.shape[0]
    n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        r1 = min(n_rows, r0 + ROW_BLOCK)
        _shap_block(X, nodes, weight, tree_lo, tree_hi, max_depth, f32, out, r0, r1)


@njit(cache=True)
def tree_shap_serial(X, nodes, weight, tree_lo, tree_hi, max_depth, f32, out):
    """:func:`tree_shap` on the calling thread (small inputs: no thread start-up)."""
    n_rows = X.shape[0]
    for r0 in range(0, n_rows, ROW_BLOCK):
        r1 = min(n_rows, r0 + ROW_BLOCK)
        _shap_block(X, nodes, weight, tree_lo, tree_hi, max_depth, f32, out, r0, r1)
