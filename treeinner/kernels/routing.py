"""Numba kernels that route rows through trees: the margin, leaf indices, structure checks.

Every kernel takes the ensemble's node arrays as one tuple, ``nodes``, in the order of
``TreeEnsemble._nodes()``:

    (left, right, feature, bound, split_type, default_left, missing_type,
     cat_offsets, cat_words, value, leaf_id, tree_offsets, tree_group)

``left``/``right`` are global node indices (-1 at a leaf). ``bound`` is the float64 threshold
of the unified rule "go left iff x <= bound" (see ``treeinner._thresholds``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# split_type codes
NUMERIC = 0
CAT_SET_RIGHT = 1  # categorical: members of the node's set go right (XGBoost)
CAT_SET_LEFT = 2  # categorical: members of the node's set go left (LightGBM)

# missing_type codes
MISSING_NAN = 0  # NaN takes the default direction
MISSING_ZERO = 1  # NaN and |x| <= 1e-35 take the default direction (LightGBM "Zero")
MISSING_NONE = 2  # NaN is read as 0.0 (LightGBM "None")

ROW_BLOCK = 64
_ZERO_EPS = 1e-35
_MAX_CAT = 2147483647.0


@njit(cache=True, inline="always")
def _goes_left(v, n, split_type, default_left, missing_type, bound, cat_offsets, cat_words, f32):
    mt = missing_type[n]
    if np.isnan(v):
        if mt == MISSING_NONE:
            v = 0.0
        else:
            return default_left[n] != 0
    elif mt == MISSING_ZERO and abs(v) <= _ZERO_EPS:
        return default_left[n] != 0
    st = split_type[n]
    if st == NUMERIC:
        return v <= bound[n]
    if f32:
        v = np.float64(np.float32(v))
    in_set = False
    if v >= 0.0 and v < _MAX_CAT:
        c = np.int64(v)
        w = c >> 5
        lo = cat_offsets[n]
        if lo + w < cat_offsets[n + 1]:
            in_set = (cat_words[lo + w] >> np.uint32(c & 31)) & np.uint32(1) != 0
    if st == CAT_SET_LEFT:
        return in_set
    return not in_set


@njit(cache=True, inline="always")
def find_leaf(X, row, root, nodes, f32):
    """Global index of the leaf that row ``row`` of ``X`` reaches from ``root``."""
    left, right, feature, bound, split_type, default_left, missing_type = nodes[:7]
    cat_offsets, cat_words = nodes[7], nodes[8]
    n = root
    while left[n] >= 0:
        v = X[row, feature[n]]
        if _goes_left(
            v, n, split_type, default_left, missing_type, bound, cat_offsets, cat_words, f32
        ):
            n = left[n]
        else:
            n = right[n]
    return n


# ---------------------------------------------------------------------- the top layout
# The first levels of every tree are also stored as a complete binary tree (heap order, leaves
# above the last level repeated as pass-through nodes), so a block of rows walks them level by
# level with no data-dependent branch: idx <- 2 idx + 1 + (goes right). Each slot holds two
# words: ``meta`` (feature | default_left << 32 | general << 33 | node << 34) and the bound as
# float64 bits. "general" marks a node the branch-free rule cannot decide (categorical, or
# missing_type Zero), which takes ``_goes_left``. ``bottom`` maps the slots below the last level
# to nodes, from where rows that are not at a leaf yet continue with ``find_leaf``.
TOP_DEPTH = 8
_FEATURE_MASK = 0xFFFFFFFF


@njit(cache=True)
def build_top_layout(nodes, tree_depth, top_depth, top_off, bot_off, pair, pairf, bottom):
    """Fill the top layout arrays (allocated by the caller from ``top_off``/``bot_off``)."""
    left, right, feature, bound, split_type, default_left, missing_type = nodes[:7]
    tree_offsets = nodes[11]
    n_trees = tree_offsets.shape[0] - 1
    width_max = 1 << TOP_DEPTH
    cur = np.empty(width_max, dtype=np.int64)
    nxt = np.empty(width_max, dtype=np.int64)
    for t in range(n_trees):
        d = top_depth[t]
        cur[0] = tree_offsets[t]
        for lev in range(d):
            width = 1 << lev
            for k in range(width):
                u = cur[k]
                i = 2 * (top_off[t] + width - 1 + k)
                if left[u] >= 0:
                    dl = np.int64(default_left[u] != 0)
                    general = np.int64(0)
                    if split_type[u] != NUMERIC or missing_type[u] == MISSING_ZERO:
                        general = 1
                    elif missing_type[u] == MISSING_NONE:
                        dl = np.int64(0.0 <= bound[u])  # NaN is read as 0.0
                    pair[i] = np.int64(feature[u]) | (dl << 32) | (general << 33) | (u << 34)
                    pairf[i + 1] = bound[u]
                    nxt[2 * k] = left[u]
                    nxt[2 * k + 1] = right[u]
                else:
                    pair[i] = (np.int64(1) << 32) | (u << 34)  # always left
                    pairf[i + 1] = np.inf
                    nxt[2 * k] = u
                    nxt[2 * k + 1] = u
            for k in range(2 * width):
                cur[k] = nxt[k]
        for k in range(1 << d):
            bottom[bot_off[t] + k] = cur[k]


@njit(cache=True, inline="always")
def _route_block(X, r0, m, t, layout, nodes, f32, idx):
    """Leave in ``idx[k]`` the node reached by row ``r0 + k`` (k < m) in tree ``t``."""
    top_depth, top_off, bot_off, pair, pairf, bottom = layout
    left, right, feature, bound, split_type, default_left, missing_type = nodes[:7]
    cat_offsets, cat_words = nodes[7], nodes[8]
    d = top_depth[t]
    o = top_off[t]
    for k in range(m):
        idx[k] = 0
    for _ in range(d):
        for k in range(m):
            i = 2 * (o + idx[k])
            mm = pair[i]
            v = X[r0 + k, mm & _FEATURE_MASK]
            if (mm >> 33) & 1:
                gl = np.int64(
                    _goes_left(
                        v,
                        mm >> 34,
                        split_type,
                        default_left,
                        missing_type,
                        bound,
                        cat_offsets,
                        cat_words,
                        f32,
                    )
                )
            else:
                gl = np.int64(v <= pairf[i + 1]) | (np.int64(v != v) & ((mm >> 32) & 1))
            idx[k] = 2 * idx[k] + 2 - gl
    base = bot_off[t] - ((1 << d) - 1)
    for k in range(m):
        n = bottom[base + idx[k]]
        if left[n] >= 0:
            n = find_leaf(X, r0 + k, n, nodes, f32)
        idx[k] = n


@njit(cache=True, inline="always")
def _margin_block(X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out, r0, r1):
    value = nodes[9]
    tree_group = nodes[12]
    m = r1 - r0
    idx = np.empty(ROW_BLOCK, dtype=np.int64)
    for r in range(r0, r1):
        for g in range(out.shape[1]):
            out[r, g] = base_margin[g]
    for t in range(tree_lo, tree_hi):
        _route_block(X, r0, m, t, layout, nodes, f32_cat, idx)
        g = tree_group[t]
        if f32_sum:
            for k in range(m):
                out[r0 + k, g] = np.float32(out[r0 + k, g]) + np.float32(value[idx[k]])
        else:
            for k in range(m):
                out[r0 + k, g] += value[idx[k]]


@njit(parallel=True, cache=True)
def predict_margin(X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out):
    """Set ``out`` (n, n_outputs) to the base margin plus trees ``tree_lo:tree_hi``.

    With ``f32_sum`` the sum is carried in float32 in tree order, as XGBoost does; with
    ``f32_cat`` categorical values are cast to float32 before they are read as integers.
    Parallel over blocks of ``ROW_BLOCK`` rows; within a block trees are the outer loop, so a
    tree's nodes stay in cache while the block's rows go through it level by level.
    """
    n_rows = X.shape[0]
    n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        r1 = min(n_rows, r0 + ROW_BLOCK)
        _margin_block(
            X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out, r0, r1
        )


@njit(cache=True)
def predict_margin_serial(X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out):
    """:func:`predict_margin` on the calling thread (small inputs: no thread start-up)."""
    n_rows = X.shape[0]
    for r0 in range(0, n_rows, ROW_BLOCK):
        r1 = min(n_rows, r0 + ROW_BLOCK)
        _margin_block(
            X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out, r0, r1
        )


@njit(cache=True, inline="always")
def _leaf_block(X, nodes, layout, tree_lo, tree_hi, f32, out, r0, r1):
    leaf_id = nodes[10]
    m = r1 - r0
    idx = np.empty(ROW_BLOCK, dtype=np.int64)
    for t in range(tree_lo, tree_hi):
        _route_block(X, r0, m, t, layout, nodes, f32, idx)
        for k in range(m):
            out[r0 + k, t - tree_lo] = leaf_id[idx[k]]


@njit(parallel=True, cache=True)
def leaf_index(X, nodes, layout, tree_lo, tree_hi, f32, out):
    """Write the booster's leaf id of every row and tree ``tree_lo:tree_hi`` into ``out``."""
    n_rows = X.shape[0]
    n_blocks = (n_rows + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        _leaf_block(X, nodes, layout, tree_lo, tree_hi, f32, out, r0, min(n_rows, r0 + ROW_BLOCK))


@njit(cache=True)
def leaf_index_serial(X, nodes, layout, tree_lo, tree_hi, f32, out):
    """:func:`leaf_index` on the calling thread."""
    n_rows = X.shape[0]
    for r0 in range(0, n_rows, ROW_BLOCK):
        _leaf_block(X, nodes, layout, tree_lo, tree_hi, f32, out, r0, min(n_rows, r0 + ROW_BLOCK))


@njit(cache=True)
def check_structure(left, right, tree_offsets, depth_out):
    """Check that every tree is a proper binary tree whose nodes are all reachable from its root.

    Returns ``(code, node)``: code 0 when valid; otherwise 1 (a child outside its tree),
    2 (only one child set), 3 (a node reached twice: a cycle or shared child),
    4 (a node not reachable from the root), 5 (a child pointing at its own tree's root).
    ``depth_out[t]`` receives the depth of tree t.
    """
    n_nodes = left.shape[0]
    seen = np.zeros(n_nodes, dtype=np.uint8)
    stack = np.empty(n_nodes, dtype=np.int64)
    depth = np.empty(n_nodes, dtype=np.int64)
    for t in range(tree_offsets.shape[0] - 1):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        for n in range(lo, hi):
            a = left[n]
            c = right[n]
            if (a < 0) != (c < 0):
                return 2, n
            if a >= 0 and (a < lo or a >= hi or c < lo or c >= hi):
                return 1, n
            if a == lo or c == lo:
                return 5, n
        top = 0
        stack[0] = lo
        depth[lo] = 0
        seen[lo] = 1
        max_depth = 0
        visited = 1
        while top >= 0:
            n = stack[top]
            top -= 1
            if depth[n] > max_depth:
                max_depth = depth[n]
            if left[n] < 0:
                continue
            for child in (left[n], right[n]):
                if seen[child]:
                    return 3, child
                seen[child] = 1
                visited += 1
                depth[child] = depth[n] + 1
                top += 1
                stack[top] = child
        if visited != hi - lo:
            for n in range(lo, hi):
                if not seen[n]:
                    return 4, n
        depth_out[t] = max_depth
    return 0, -1
