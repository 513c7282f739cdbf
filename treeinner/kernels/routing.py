"""Numba kernels that route rows through trees: the margin, leaf indices, structure checks.

Every kernel takes the ensemble's node arrays as one ``treeinner._format.Nodes`` named tuple,
``nodes`` (``TreeEnsemble._nodes()``), and reads its fields by name (``nodes.left``,
``nodes.value``, ...); the top layout comes as a ``treeinner._format.Layout``, ``layout``.
``left``/``right`` are global node indices (-1 at a leaf). ``bound`` is the float64 threshold
of the unified rule "go left iff x <= bound" (see ``treeinner._thresholds``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._format import CAT_SET_LEFT, MISSING_NONE, MISSING_ZERO, NUMERIC
from ._threads import n_chunks, run_chunks

ROW_BLOCK = 64
_ZERO_EPS = float(np.float32(1e-35))  # LightGBM's kZeroThreshold is the float 1e-35f
_MAX_CAT = 2147483647.0


@njit(cache=True, inline="always")
def _goes_left(v, n, nodes, f32):
    """Whether value ``v`` goes left at node ``n`` (its missing type, numeric bound or
    categorical set); ``f32``: categorical values are cast to float32 first."""
    mt = nodes.missing_type[n]
    if np.isnan(v):
        if mt == MISSING_NONE:
            v = 0.0
        else:
            return nodes.default_left[n] != 0
    elif mt == MISSING_ZERO and abs(v) <= _ZERO_EPS:
        return nodes.default_left[n] != 0
    st = nodes.split_type[n]
    if st == NUMERIC:
        return v <= nodes.bound[n]
    if f32:
        v = np.float64(np.float32(v))
    in_set = False
    # LightGBM truncates toward zero first, so (-1, 0) reads as category 0
    if (v > -1.0 if st == CAT_SET_LEFT else v >= 0.0) and v < _MAX_CAT:
        c = np.int64(v)
        w = c >> 5
        lo = nodes.cat_offsets[n]
        if lo + w < nodes.cat_offsets[n + 1]:
            in_set = (nodes.cat_words[lo + w] >> np.uint32(c & 31)) & np.uint32(1) != 0
    if st == CAT_SET_LEFT:
        return in_set
    return not in_set


@njit(cache=True)
def find_leaf(X, row, root, nodes, f32):
    """Global index of the leaf that row ``row`` of ``X`` reaches from ``root`` (a call, not
    inlined: only rows of trees deeper than the top layout take it, and every routing kernel
    shares its one compiled copy of ``_goes_left``)."""
    left = nodes.left
    n = root
    while left[n] >= 0:
        if _goes_left(X[row, nodes.feature[n]], n, nodes, f32):
            n = left[n]
        else:
            n = nodes.right[n]
    return n


# ---------------------------------------------------------------------- the top layout
# The first levels of every tree are also stored as a complete binary tree (heap order; leaves
# above the last level repeated as always-left pass-through slots), so a block of rows walks
# them level by level with no data-dependent branch: idx <- 2 idx + 1 + (goes right).
#
# Rows are first copied into a per-block buffer with two columns per feature the model uses:
# the raw value, and the value with NaN replaced by -inf. A numeric node whose missing values
# go left reads the second copy, one whose missing values go right the first, so that
# "buf[col, k] <= bound" decides every ordinary numeric node, NaN included (NaN <= b is false,
# -inf <= b is true); the buffer is column-major (``buf[col]`` holds the block's rows, and
# rows past the end of a short block are zeros). ``meta`` holds col | general << 33 |
# node << 34, where "general" marks a node this rule cannot decide (categorical, or
# missing_type Zero): it takes ``_goes_left`` on the raw value. ``bottom`` maps the slots below
# the last level to nodes; in trees deeper than the layout, rows continue from there with
# ``find_leaf``.
#
# Oblivious (symmetric) trees: a tree that is complete to its depth (no leaf above its last
# level, none deeper than the layout), with no general node, whose every level has one
# (column, bound), so one decision (feature, threshold, missing direction) per level shared
# by all the level's nodes (CatBoost's SymmetricTree models, and any other tree that happens
# to be so), is flagged ``TREE_OBLIVIOUS``. Its rows skip ``meta`` per row: level j compares
# one contiguous row of the buffer with one bound (``meta`` and ``tbound`` of the level's
# first slot), the d bits are the row's leaf position, most significant first (the heap slot
# below the last level), and ``bottom`` maps the position to the leaf. The decision is the
# same comparison as the general walk's, so both give the same leaf for every input.
TOP_DEPTH = 8
_COL_MASK = 0xFFFFFFFF
_GENERAL = np.int64(1) << 33
TREE_GENERAL = 1  # tree flag: has a general node in its top layout
TREE_DEEP = 2  # tree flag: deeper than its top layout
TREE_OBLIVIOUS = 4  # tree flag: oblivious (see above); routed level by level without meta


@njit(cache=True)
def build_top_layout(
    nodes,
    col_of,
    n_cols,
    top_depth,
    top_off,
    bot_off,
    meta,
    tbound,
    bottom,
    tree_flags,
    tree_depth,
    oblivious,
):
    """Fill the top layout arrays (allocated by the caller from ``top_off``/``bot_off``).

    ``col_of[f]`` is feature f's column in the block buffer (features the model uses only).
    With ``oblivious``, trees that qualify are flagged ``TREE_OBLIVIOUS`` (the fast path).
    """
    left, right, feature, bound = nodes.left, nodes.right, nodes.feature, nodes.bound
    missing_type = nodes.missing_type
    tree_offsets = nodes.tree_offsets
    n_trees = tree_offsets.shape[0] - 1
    width_max = 1 << TOP_DEPTH
    cur = np.empty(width_max, dtype=np.int64)
    nxt = np.empty(width_max, dtype=np.int64)
    for t in range(n_trees):
        d = top_depth[t]
        if tree_depth[t] > d:
            tree_flags[t] |= TREE_DEEP
        cur[0] = tree_offsets[t]
        for lev in range(d):
            width = 1 << lev
            for k in range(width):
                u = cur[k]
                i = top_off[t] + width - 1 + k
                if left[u] >= 0:
                    col = col_of[feature[u]]
                    nan_left = nodes.default_left[u] != 0
                    if missing_type[u] == MISSING_NONE:
                        nan_left = 0.0 <= bound[u]  # NaN is read as 0.0
                    if nan_left:
                        col += n_cols
                    flag = np.int64(0)
                    if nodes.split_type[u] != NUMERIC or missing_type[u] == MISSING_ZERO:
                        flag = _GENERAL
                        tree_flags[t] |= TREE_GENERAL
                    meta[i] = col | flag | (u << 34)
                    tbound[i] = bound[u]
                    nxt[2 * k] = left[u]
                    nxt[2 * k + 1] = right[u]
                else:
                    meta[i] = n_cols | (u << 34)  # the NaN-free copy <= inf: always left
                    tbound[i] = np.inf
                    nxt[2 * k] = u
                    nxt[2 * k + 1] = u
            for k in range(2 * width):
                cur[k] = nxt[k]
        for k in range(1 << d):
            bottom[bot_off[t] + k] = cur[k]
        if (
            oblivious
            and d > 0
            and tree_flags[t] == 0
            and _uniform_levels(t, d, top_off, meta, tbound, left)
        ):
            tree_flags[t] |= TREE_OBLIVIOUS


@njit(cache=True, inline="always")
def _uniform_levels(t, d, top_off, meta, tbound, left):
    """Whether every level of tree t's top layout (``d`` levels) holds inner nodes only, all
    with the column and bound of the level's first slot."""
    for lev in range(d):
        first = top_off[t] + (1 << lev) - 1
        col = meta[first] & _COL_MASK
        b = tbound[first]
        for i in range(first, first + (1 << lev)):
            if left[meta[i] >> 34] < 0 or (meta[i] & _COL_MASK) != col or tbound[i] != b:
                return False
    return True


@njit(cache=True, inline="always")
def n_blocks(n_rows):
    """The number of blocks of ``ROW_BLOCK`` rows ``n_rows`` rows make."""
    return (n_rows + ROW_BLOCK - 1) // ROW_BLOCK


@njit(cache=True, inline="always")
def _fill_buffer(X, r0, m, used, buf):
    """Copy rows ``r0:r0 + m`` of ``X`` into the routing buffer, column-major: ``buf[j, k]``
    is feature ``used[j]`` of row ``r0 + k`` and ``buf[n_cols + j, k]`` the same with NaN
    replaced by -inf (so that a level of an oblivious tree reads one contiguous row)."""
    n_cols = used.shape[0]
    for k in range(m):
        for j in range(n_cols):
            v = X[r0 + k, used[j]]
            buf[j, k] = v
            buf[n_cols + j, k] = -np.inf if v != v else v
    for j in range(2 * n_cols):
        for k in range(m, ROW_BLOCK):
            buf[j, k] = 0.0


@njit(cache=True, inline="always")
def block_buffers(used):
    """A chunk kernel's routing buffers, allocated once per chunk: the nodes a block's rows
    reach, and the block buffer of the columns ``used`` (see ``_fill_buffer``)."""
    return (
        np.empty(ROW_BLOCK, dtype=np.uint64),
        np.empty((2 * used.shape[0], ROW_BLOCK), dtype=np.float64),
    )


@njit(cache=True, inline="always")
def load_block(X, b, used, buf):
    """Fill ``buf`` with block ``b`` of ``ROW_BLOCK`` rows of ``X``; its first row and size."""
    r0 = b * ROW_BLOCK
    m = min(X.shape[0], r0 + ROW_BLOCK) - r0
    _fill_buffer(X, r0, m, used, buf)
    return r0, m


@njit(cache=True, inline="always")
def oblivious_slots(t, meta, tbound, top_depth, top_off, bot_off, buf, idx):
    """For an oblivious tree t (``TREE_OBLIVIOUS``), leave in ``idx[k]`` the slot of
    ``layout.bottom`` that row k of the buffer reaches (its leaf is ``bottom[idx[k]]``), for
    all ``ROW_BLOCK`` rows of the buffer (rows past the block's end read zeros)."""
    one = np.uint64(1)
    for k in range(ROW_BLOCK):
        idx[k] = 0
    for lev in range(top_depth[t]):
        i = top_off[t] + (1 << lev) - 1
        col = buf[meta[i] & _COL_MASK]
        b = tbound[i]
        for k in range(ROW_BLOCK):
            idx[k] = 2 * idx[k] + one - np.uint64(col[k] <= b)
    base = np.uint64(bot_off[t])
    for k in range(ROW_BLOCK):
        idx[k] += base


# ---------------------------------------------------------------------- routing a block
# The hot kernels unpack the layout's arrays once per chunk (``top_arrays``) and route each
# tree with ``route_top``, which takes them one by one: Numba increfs every array of a named
# tuple it binds to an inlined function's argument, and binding ``layout`` and ``nodes`` once
# per tree and block of rows measured 20-25% of a prediction. Trees ``route_top`` cannot
# route (general nodes in the top layout, or deeper than it) go to ``route``, compiled once
# and shared; a kernel reaches it through its argument ``general``, the node arrays or None
# (``general_nodes``): with None, Numba drops the call before typing, so a model of plain
# and oblivious trees (XGBoost's numeric trees, CatBoost's) compiles no general router.
@njit(cache=True, inline="always")
def top_arrays(layout):
    """The arrays of ``layout`` that ``route_top`` reads."""
    return (
        layout.meta,
        layout.tbound,
        layout.top_depth,
        layout.top_off,
        layout.bot_off,
        layout.bottom,
        layout.tree_flags,
    )


@njit(cache=True, inline="always")
def route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags, buf, idx):
    """Leave in ``idx[k]`` the leaf that row k (k < m) of the block buffer ``buf`` reaches in
    tree t if t is plain (``tree_flags[t] == 0``: numeric nodes only, all in the top layout)
    or oblivious, and return True; return False (``idx`` untouched) for any other tree."""
    flags = tree_flags[t]
    if flags & TREE_OBLIVIOUS:
        oblivious_slots(t, meta, tbound, top_depth, top_off, bot_off, buf, idx)
        for k in range(m):
            idx[k] = bottom[idx[k]]
        return True
    if flags != 0:
        return False
    d = top_depth[t]
    _numeric_levels(m, d, np.uint64(top_off[t]), meta, tbound, buf, idx)
    base = np.uint64(bot_off[t] - ((1 << d) - 1))
    for k in range(m):
        idx[k] = bottom[base + idx[k]]
    return True


@njit(cache=True, inline="always")
def _numeric_levels(m, d, o, meta, tbound, buf, idx):
    """Walk rows k < m of the buffer down ``d`` levels of numeric nodes of the top layout
    from offset ``o``: ``idx[k]`` the heap slot reached (counted from the root)."""
    for k in range(m):
        idx[k] = 0
    for _ in range(d):
        for k in range(m):
            i = o + idx[k]
            gl = buf[np.uint64(meta[i] & _COL_MASK), k] <= tbound[i]
            idx[k] = 2 * idx[k] + 2 - np.uint64(gl)


def general_nodes(nodes, layout):
    """``nodes`` if a tree of the model needs ``route`` (``TREE_GENERAL`` or ``TREE_DEEP``),
    else None: the ``general`` argument of the kernels that route with ``route_top``."""
    return nodes if np.any(layout.tree_flags & (TREE_GENERAL | TREE_DEEP)) else None


@njit(cache=True, nogil=True)
def route(X, r0, m, t, layout, nodes, f32, buf, idx):
    """Leave in ``idx[k]`` the leaf that row ``r0 + k`` (k < m; loaded into ``buf``) reaches in
    tree ``t``, any tree."""
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    if route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags, buf, idx):
        return
    d = top_depth[t]
    o = np.uint64(top_off[t])
    one = np.uint64(1)
    if tree_flags[t] & TREE_GENERAL:
        for k in range(m):
            idx[k] = 0
        for _ in range(d):
            for k in range(m):
                i = o + idx[k]
                mm = meta[i]
                if mm & _GENERAL:
                    n = mm >> 34
                    gl = _goes_left(X[r0 + k, nodes.feature[n]], n, nodes, f32)
                else:
                    gl = buf[np.uint64(mm & _COL_MASK), k] <= tbound[i]
                idx[k] = 2 * idx[k] + 2 - (one if gl else np.uint64(0))
    else:  # TREE_DEEP only: numeric nodes in the top layout
        _numeric_levels(m, d, o, meta, tbound, buf, idx)
    base = np.uint64(bot_off[t] - ((1 << d) - 1))
    left = nodes.left
    for k in range(m):
        n = bottom[base + idx[k]]
        if left[n] >= 0:  # TREE_DEEP: on below the top layout
            n = find_leaf(X, r0 + k, n, nodes, f32)
        idx[k] = n


@njit(cache=True, inline="always")
def _add_leaves(acc, idx, value, m, c, f32_sum):
    """Add each row's leaf value (``value[idx[k]]``) to output ``c`` of its margin ``acc[k]``;
    with ``f32_sum`` in float32, as XGBoost sums its trees (and the boosters' prediction
    caches hold margins)."""
    if f32_sum:
        for k in range(m):
            acc[k, c] = np.float32(acc[k, c]) + np.float32(value[idx[k]])
    else:
        for k in range(m):
            acc[k, c] += value[idx[k]]


@njit(cache=True, inline="always")
def chunk_range(ch, n_chunks, n_items):
    """The items ``lo:hi`` of chunk ``ch`` of ``n_chunks`` nearly equal chunks."""
    size = (n_items + n_chunks - 1) // n_chunks
    lo = min(n_items, ch * size)
    return lo, min(n_items, lo + size)


@njit(cache=True, nogil=True)
def _margin_chunk(X, nodes, general, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out,
                  ch, nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``predict_margin``."""
    n_out = out.shape[1]
    value = nodes.value
    tree_group = nodes.tree_group
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    idx, buf = block_buffers(layout.used)
    acc = np.empty((ROW_BLOCK, n_out), dtype=np.float64)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for k in range(m):
            for g in range(n_out):
                acc[k, g] = base_margin[g]
        for t in range(tree_lo, tree_hi):
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32_cat, buf, idx)
            _add_leaves(acc, idx, value, m, tree_group[t], f32_sum)
        for k in range(m):
            for g in range(n_out):
                out[r0 + k, g] = acc[k, g]


def predict_margin(X, nodes, layout, tree_lo, tree_hi, base_margin, f32_sum, f32_cat, out):
    """Set ``out`` (n, n_outputs) to the base margin plus trees ``tree_lo:tree_hi``.

    With ``f32_sum`` the sum is carried in float32 in tree order, as XGBoost does; with
    ``f32_cat`` categorical values are cast to float32 before they are read as integers.
    Spread over threads by blocks of ``ROW_BLOCK`` rows (``kernels._threads``); within a block
    trees are the outer loop, so a tree's nodes stay in cache while the block's rows go through
    it level by level.
    """
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(tree_hi - tree_lo, 1), nb)
    run_chunks(_margin_chunk, nch, X, nodes, general_nodes(nodes, layout), layout, tree_lo,
               tree_hi, base_margin, f32_sum, f32_cat, out)  # fmt: skip


@njit(cache=True, nogil=True)
def _leaf_index_chunk(X, nodes, general, layout, tree_lo, tree_hi, f32, out, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``leaf_index``."""
    leaf_id = nodes.leaf_id
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
            for k in range(m):
                out[r0 + k, t - tree_lo] = leaf_id[idx[k]]


def leaf_index(X, nodes, layout, tree_lo, tree_hi, f32, out):
    """Write the booster's leaf id of every row and tree ``tree_lo:tree_hi`` into ``out``
    (spread over threads like ``predict_margin``)."""
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(tree_hi - tree_lo, 1), nb)
    run_chunks(_leaf_index_chunk, nch, X, nodes, general_nodes(nodes, layout), layout, tree_lo,
               tree_hi, f32, out)  # fmt: skip


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
