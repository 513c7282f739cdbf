"""Numba kernels of the unbiased gain: staged leaves and gradients, per-split held-out draws.

A data set is processed a chunk of boosting rounds at a time. ``staged_leaves`` (spread over
blocks of rows) carries every row's staged margin through the chunk, storing the weighted
gradient and hessian of each round and the leaf each row reaches in each tree. ``split_draws``
(spread over the chunk's trees) then orders a tree's rows by leaf in depth-first order, so
every node's rows are one slice, and draws rows from those slices by partial in-place
shuffles. ``leaf_moments`` adds up, per leaf, the held-out sums the standard error of the
unbiased gain needs (w g, w h and their squares and product).

Draws come from a counter-based generator keyed by (seed, node, which, draw), so they do not
depend on the thread count or on the order the trees are processed in. ``draw_positions``
gives the same draws to Python, for reference implementations.

Each public kernel is a Python function spreading a ``nogil`` chunk kernel over threads
(``kernels._threads``). The common staged kernel (one output, one tree per round) routes with
``routing.route_top`` and, for trees that need it, ``routing.route`` (see ``kernels.routing``);
the general one calls ``route`` only.
Where the time goes (100k rows, 500 trees of depth 6, logistic, one thread): the staged pass
about 2.5 predictions (routing, the objective's exp, the stores, and the routing buffer filled
again for every chunk of rounds), the draws about 1.7 (3.4 random swaps and 6.5 summed pairs
per row and tree: k swaps for the node's draw, min(k, m - k) for the larger child's).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._threads import n_chunks, run_chunks
from .gradients import grad_hess, grad_hess_row
from .routing import (
    ROW_BLOCK,
    block_buffers,
    chunk_range,
    general_nodes,
    load_block,
    n_blocks,
    route,
    route_top,
    top_arrays,
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _mix(z):
    """The splitmix64 finalizer: a bijection of uint64 with good avalanche."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _key(seed, node, which, draw):
    """Generator state of one draw: a hash of (seed, node, which, draw)."""
    s = _mix(seed + _GOLDEN)
    s = _mix(s ^ (np.uint64(node) * np.uint64(4) + np.uint64(which)))
    return _mix(s ^ np.uint64(draw))


@njit(cache=True, inline="always")
def _swap(gh, rows, a, b, record):
    tg = gh[a, 0]
    th = gh[a, 1]
    gh[a, 0] = gh[b, 0]
    gh[a, 1] = gh[b, 1]
    gh[b, 0] = tg
    gh[b, 1] = th
    if record:
        tr = rows[a]
        rows[a] = rows[b]
        rows[b] = tr


@njit(cache=True, inline="always")
def _draw(gh, rows, lo, m, k, state, record, rec):
    """sum g / sum h over k of the m entries ``gh[lo:lo + m]``, drawn uniformly without
    replacement (0 where the hessians sum to 0); the drawn rows go to ``rec[:k]`` if
    ``record``. The slice is permuted in place (a partial Fisher-Yates shuffle): for k <= m/2
    the drawn entries are brought to its front, for k > m/2 the m - k left out are, so a draw
    costs min(k, m - k) random swaps plus a k-term sum; with k == m all entries are taken.

    Swap j takes an integer uniform on [0, m - j) by Lemire's method with rejection (so
    exactly uniform) from the upper 32 bits of the splitmix64 output of a state advanced by
    the golden gamma per attempt."""
    e = min(k, m - k)
    mm = np.uint64(m)
    for j in range(e):
        state += _GOLDEN
        prod = (_mix(state) >> np.uint64(32)) * mm
        if (prod & _LOW32) < mm:
            # low < m: reject the few values that would make some results likelier
            thresh = ((_LOW32 + np.uint64(1)) - mm) % mm
            while (prod & _LOW32) < thresh:
                state += _GOLDEN
                prod = (_mix(state) >> np.uint64(32)) * mm
        a = lo + j
        _swap(gh, rows, a, a + np.int64(prod >> np.uint64(32)), record)
        mm -= np.uint64(1)
    a = lo if e == k else lo + e
    sg = 0.0
    sh = 0.0
    for q in range(k):
        sg += gh[a + q, 0]
        sh += gh[a + q, 1]
        if record:
            rec[q] = rows[a + q]
    return sg / sh if sh != 0.0 else 0.0


@njit(cache=True)
def draw_positions(seed, node, which, draw, m, k):
    """The positions, into a slice of ``m`` entries in the order found, that ``split_draws``
    draws for (seed, node, which, draw): a uniform k-subset, in summation order."""
    gh = np.zeros((m, 2))
    rows = np.arange(m)
    rec = np.empty(k, dtype=np.int64)
    _draw(gh, rows, 0, m, k, _key(np.uint64(seed), node, which, draw), True, rec)
    return rec


def _max_nodes(tree_offsets, t0, t1):
    """The largest node count of trees ``t0:t1``."""
    return int(np.max(np.diff(tree_offsets[t0 : t1 + 1]))) if t1 > t0 else 0


@njit(cache=True, nogil=True)
def _staged_leaves_chunk(X, y, w, nodes, layout, stages, it0, it1, F, gw, hw, leaves, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``staged_leaves``."""
    iter_ptr, _, code, prm, f32, f32_sum = stages
    K = F.shape[1]
    t_base = iter_ptr[it0]
    idx, buf = block_buffers(layout.used)
    Fb = np.empty((ROW_BLOCK, K))
    g = np.empty(K)
    h = np.empty(K)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for k in range(m):
            for c in range(K):
                Fb[k, c] = F[r0 + k, c]
        for it in range(it0, it1):
            r = it - it0
            for k in range(m):
                row = r0 + k
                if K > 1:
                    grad_hess_row(code, prm, y[row], Fb[k], g, h)
                else:
                    g[0], h[0] = grad_hess(code, prm, y[row], Fb[k, 0])
                for c in range(K):
                    gw[r, c, row] = w[row] * g[c]
                    hw[r, c, row] = w[row] * h[c]
            # the round's trees all see the margins of the round's start
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                route(X, r0, m, t, layout, nodes, f32, buf, idx)
                for k in range(m):
                    leaves[t - t_base, r0 + k] = np.int32(idx[k])
            for t in range(iter_ptr[it], iter_ptr[it + 1]):
                c = nodes.tree_group[t]
                for k in range(m):
                    v = nodes.value[np.int64(leaves[t - t_base, r0 + k])]
                    if f32_sum:
                        Fb[k, c] = np.float32(Fb[k, c]) + np.float32(v)
                    else:
                        Fb[k, c] += v
        for k in range(m):
            for c in range(K):
                F[r0 + k, c] = Fb[k, c]


def staged_leaves(X, y, w, nodes, layout, stages, it0, it1, F, gw, hw, leaves):
    """Carry the staged margins ``F`` (n_rows, n_outputs) through rounds ``it0:it1`` (of the
    model's ``kernels.attribution.Stages``).

    For round ``it0 + r`` the weighted gradient and hessian at the round's start go to
    ``gw[r, c, row]`` and ``hw[r, c, row]``; the leaf (global node index) each row reaches in
    tree ``iter_ptr[it0] + j`` goes to ``leaves[j, row]``. Spread over threads by blocks of
    ``ROW_BLOCK`` rows.
    """
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(1, leaves.shape[0]), nb)
    run_chunks(_staged_leaves_chunk, nch, X, y, w, nodes, layout, stages, it0, it1, F, gw, hw,
               leaves)  # fmt: skip


@njit(cache=True, nogil=True)
def _staged_single_chunk(X, y, w, nodes, general, layout, stages, it0, it1, F, gw, hw, leaves, ch,
                         nch):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``staged_leaves_single``."""
    _, _, code, prm, f32, f32_sum = stages
    value = nodes.value
    meta, tbound, top_depth, top_off, bot_off, bottom, tree_flags = top_arrays(layout)
    idx, buf = block_buffers(layout.used)
    Fb = np.empty(ROW_BLOCK)
    b0, b1 = chunk_range(ch, nch, n_blocks(X.shape[0]))
    for b in range(b0, b1):
        r0, m = load_block(X, b, layout.used, buf)
        for k in range(m):
            Fb[k] = F[r0 + k, 0]
        for t in range(it0, it1):
            r = t - it0
            gr = gw[r, 0]
            hr = hw[r, 0]
            lr = leaves[r]
            for k in range(m):
                row = r0 + k
                gk, hk = grad_hess(code, prm, y[row], Fb[k])
                gr[row] = w[row] * gk
                hr[row] = w[row] * hk
            if not route_top(m, t, meta, tbound, top_depth, top_off, bot_off, bottom,
                             tree_flags, buf, idx):  # fmt: skip
                if general is not None:
                    route(X, r0, m, t, layout, general, f32, buf, idx)
            if f32_sum:
                for k in range(m):
                    leaf = np.int64(idx[k])
                    lr[r0 + k] = np.int32(leaf)
                    Fb[k] = np.float32(Fb[k]) + np.float32(value[leaf])
            else:
                for k in range(m):
                    leaf = np.int64(idx[k])
                    lr[r0 + k] = np.int32(leaf)
                    Fb[k] += value[leaf]
        for k in range(m):
            F[r0 + k, 0] = Fb[k]


def staged_leaves_single(X, y, w, nodes, layout, stages, it0, it1, F, gw, hw, leaves):
    """``staged_leaves`` for one output and one tree per round (tree ``it`` is round ``it``):
    gradient, leaf and margin update in one loop over each block's rows."""
    nb = n_blocks(X.shape[0])
    nch = n_chunks(X.shape[0] * max(1, it1 - it0), nb)
    run_chunks(_staged_single_chunk, nch, X, y, w, nodes, general_nodes(nodes, layout), layout,
               stages, it0, it1, F, gw, hw, leaves)  # fmt: skip


@njit(cache=True, nogil=True)
def _split_draws_chunk(
    left, right, tree_offsets, tree_group, tree_round, t0, t1, leaves, gw, hw, seed, n_draws,
    min_samples, rho, kk, count, rec, nmax, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (trees) of ``split_draws``; ``nmax``: the most nodes a tree
    has."""
    n_rows = leaves.shape[1]
    record = rec.shape[0] > 0
    cnt = np.empty(nmax, dtype=np.int64)
    start = np.empty(nmax, dtype=np.int64)
    visit = np.empty(nmax, dtype=np.int64)
    stack = np.empty(nmax + 1, dtype=np.int64)
    j0, j1 = chunk_range(ch, nch, t1 - t0)
    gh = np.empty((n_rows if j1 > j0 else 0, 2))
    rows = np.empty(n_rows if record else 0, dtype=np.int64)
    scratch = np.empty(0, dtype=np.int64)
    for j in range(j0, j1):
        t = t0 + j
        lo = tree_offsets[t]
        nn = tree_offsets[t + 1] - lo
        gv = gw[tree_round[j], tree_group[t]]
        hv = hw[tree_round[j], tree_group[t]]
        lv = leaves[j]
        for u in range(nn):
            cnt[u] = 0
        for i in range(n_rows):
            cnt[lv[i] - lo] += 1
        # depth-first order, left first; leaves get consecutive slices in that order
        pos = 0
        nv = 0
        top = 1
        stack[0] = lo
        while top > 0:
            top -= 1
            n = stack[top]
            visit[nv] = n
            nv += 1
            if left[n] >= 0:
                stack[top] = right[n]
                stack[top + 1] = left[n]
                top += 2
            else:
                start[n - lo] = pos
                pos += cnt[n - lo]
        for i in range(n_rows):
            u = lv[i] - lo
            p = start[u]
            gh[p, 0] = gv[i]
            gh[p, 1] = hv[i]
            if record:
                rows[p] = i
            start[u] = p + 1
        # reversed depth-first order visits children before their parent
        for q in range(nv - 1, -1, -1):
            n = visit[q]
            u = n - lo
            if left[n] >= 0:
                start[u] = start[left[n] - lo]
                cnt[u] = cnt[left[n] - lo] + cnt[right[n] - lo]
            else:
                start[u] -= cnt[u]
        for q in range(nv - 1, -1, -1):
            n = visit[q]
            u = n - lo
            count[n] = cnt[u]
            if left[n] < 0:
                continue
            a = left[n] - lo
            b = right[n] - lo
            k = min(cnt[a], cnt[b])
            kk[n] = k
            rho[n, 0] = 0.0
            rho[n, 1] = 0.0
            rho[n, 2] = 0.0
            if k < min_samples or k == 0:
                continue
            for c in (1, 2, 0):
                v = a if c == 1 else b if c == 2 else u
                acc = 0.0
                for d in range(n_draws):
                    out = rec[n, c, d] if record else scratch
                    acc += _draw(gh, rows, start[v], cnt[v], k, _key(seed, n, c, d), record, out)
                rho[n, c] = acc / n_draws


def split_draws(
    left,
    right,
    tree_offsets,
    tree_group,
    tree_round,
    t0,
    t1,
    leaves,
    gw,
    hw,
    seed,
    n_draws,
    min_samples,
    rho,
    kk,
    count,
    rec,
):
    """Held-out ratios of every split of trees ``t0:t1`` (rows of ``leaves[t - t0]``).

    For a split node t with children L and R and k = min(|S_L|, |S_R|) >= ``min_samples``,
    ``rho[t, u]`` (u = 0 node, 1 left, 2 right) is sum g / sum h over k rows drawn without
    replacement from S_u, averaged over ``n_draws`` draws; ``kk[t]`` = k; ``count[n]`` = |S_n|
    for every node. ``gw[tree_round[t - t0], tree_group[t]]`` are the tree's gradients. If
    ``rec`` is not empty (shape (n_nodes, 3, n_draws, n_rows)), the rows of every draw are
    recorded in ``rec[t, u, d, :k]``: the reference mode of the tests.

    A tree's rows are ordered by leaf, leaves in depth-first order (left first), so every
    node's rows are one slice of a copy of the (g, h) pairs. Splits are processed children
    first and, within a split, the children's draws before the node's, so the in-place partial
    shuffles of the draws never move a row out of a slice still to be drawn from. Spread over
    threads by trees; a tree's draws depend on its keys only, not on the chunking.
    """
    nt = t1 - t0
    nmax = _max_nodes(tree_offsets, t0, t1)
    nch = n_chunks(leaves.shape[1] * nt, nt)
    run_chunks(_split_draws_chunk, nch, left, right, tree_offsets, tree_group, tree_round, t0,
               t1, leaves, gw, hw, seed, n_draws, min_samples, rho, kk, count, rec,
               nmax)  # fmt: skip


@njit(cache=True, nogil=True)
def _leaf_moments_chunk(tree_group, tree_round, t0, t1, leaves, gw, hw, mom, ch, nch):
    """Chunk ``ch`` of ``nch`` (trees) of ``leaf_moments``."""
    n_rows = leaves.shape[1]
    j0, j1 = chunk_range(ch, nch, t1 - t0)
    for j in range(j0, j1):
        t = t0 + j
        gv = gw[tree_round[j], tree_group[t]]
        hv = hw[tree_round[j], tree_group[t]]
        lv = leaves[j]
        for i in range(n_rows):
            n = np.int64(lv[i])
            a = gv[i]
            b = hv[i]
            mom[n, 0] += a
            mom[n, 1] += b
            mom[n, 2] += a * a
            mom[n, 3] += a * b
            mom[n, 4] += b * b
            mom[n, 5] += 1.0


def leaf_moments(tree_group, tree_round, t0, t1, leaves, gw, hw, mom):
    """Add every held-out row's terms to the sums of the leaf it reaches in trees ``t0:t1``.

    With a = w g and b = w h the row's weighted gradient and hessian of the tree's round and
    group (``gw[tree_round[t - t0], tree_group[t]]``, as in ``split_draws``), ``mom[leaf]``
    (global node index) gains a, b, a**2, a b, b**2 and 1 (columns 0 to 5). Spread over
    threads by trees, each of which owns its nodes' rows of ``mom``.
    """
    nt = t1 - t0
    nch = n_chunks(leaves.shape[1] * nt, nt)
    run_chunks(_leaf_moments_chunk, nch, tree_group, tree_round, t0, t1, leaves, gw, hw, mom)
