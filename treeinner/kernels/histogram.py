"""Numba kernels of the native booster (``treeinner.booster``): binning, histograms, split
finding, row partition, and the per-tree bookkeeping around them.

Layout
------
* ``bins``: the binned training matrix, (n_rows, n_features) uint8 (or uint16 for more than 256
  bins per feature), row-major. Feature ``f`` has ``n_bins[f]`` value bins; bin ``b`` holds the
  values ``v`` with ``cuts[f, b - 1] < v <= cuts[f, b]``, so ``cuts[f, b]`` (the bin's upper
  bound) is the largest training value in it. NaN goes to the missing bin ``n_bins[f]``.
* Rows are referred to through ``idx`` (int32): every tree node owns the contiguous slice
  ``idx[bounds[0]:bounds[P]]`` of it, itself cut into ``P`` parts (the row sets of the split
  rule: all rows; or D, D1', D2' of UnbiasedGBM; plus, with row subsampling, the rows left out
  of the tree, always last). Partitions are stable, so every node's slice stays sorted by part.
* Histograms live in one flat float64 ``pool`` of slots; a slot holds ``n_hparts`` parts of
  ``n_hbins`` bins of ``S`` channels (w g, w h, and with ``S == 3`` the row count). Feature ``f``
  starts at bin ``off[f]`` and has ``n_bins[f] + 1`` bins (the last is the missing bin).
* ``gh``: (n_rows, 2) float64, the weighted gradient and hessian of every row for the tree.

A numeric split sends a row left iff its bin is ``<= thr_bin`` (value ``<= cuts[f, thr_bin]``),
and missing values to the default side. A categorical feature (``is_cat[f]``) has a bin per
category (``apply_cat_bins``; its cuts are unused) and its split sends a set of bins left, the
missing bin included or not (``_scan_cat``, ``cat_left_bins``, ``partition``'s masks); its
histograms need the count channel (``S == 3``).

Every kernel's result is independent of the number of threads: each histogram entry, node sum
and split is computed by one thread in a fixed order. Kernels that do real work on many rows
are chunk kernels (``_..._chunk(..., ch, nch)``, compiled ``nogil``) spread over threads by
``kernels._threads.run_chunks`` from a plain Python function of the public name; the caller
picks the number of chunks by the amount of work (one chunk runs on the calling thread). All
use NumPy's floating-point error model: a candidate split's score may divide by zero before
the candidate is masked out as invalid.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._threads import n_chunks, run_chunks
from .gradients import grad_hess, grad_hess_row
from .pvalue import KIND_ORDERED, KIND_PARTITION, gain_log_pvalue
from .routing import chunk_range

ROW_BLOCK = 4096  # rows per parallel task where rows are independent
PREFETCH_ROWS = 8  # rows ahead whose data the histogram loop prefetches
_NEG_INF = -np.inf


@intrinsic
def _prefetch(typingctx, arr, i, j):
    """Hint the CPU to load ``arr[i, j]`` into cache (LLVM's prefetch; no effect on results).

    Rows of a deep node are scattered over the training matrix, so without it the histogram
    loop waits on a cache miss for every row."""
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ii = context.cast(builder, args[1], signature.args[1], types.intp)
        jj = context.cast(builder, args[2], signature.args[2], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [ii, jj], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


# ---------------------------------------------------------------------- binning
@njit(cache=True, error_model="numpy")
def _greedy_bins(s, distinct, max_bins, out):
    """Quantile bins of the sorted values ``s`` (``distinct`` distinct ones) into at most
    ``max_bins`` bins; their upper bounds (values of ``s``) into ``out``, their number returned.

    As LightGBM's greedy binning: a value holding at least 1/max_bins of the rows gets a bin of
    its own; the other values fill bins of about equal counts, each bin's target being the rows
    not yet binned over the bins still available for them."""
    m = s.shape[0]
    u = np.empty(distinct)
    c = np.empty(distinct)
    d = 0
    for i in range(m):
        if i == 0 or s[i] != s[i - 1]:
            u[d] = s[i]
            c[d] = 0.0
            d += 1
        c[d - 1] += 1.0
    mean_all = m / max_bins
    big_left = 0
    rest_left = 0.0
    for i in range(distinct):
        if c[i] >= mean_all:
            big_left += 1
        else:
            rest_left += c[i]
    k = 0
    cur = 0.0
    for i in range(distinct):
        if k == max_bins - 1:  # the last bin takes everything left
            out[k] = u[distinct - 1]
            return k + 1
        if c[i] >= mean_all:
            big_left -= 1
            if cur > 0.0 and k + 2 + big_left <= max_bins:  # close the open bin first
                out[k] = u[i - 1]
                k += 1
                if k == max_bins - 1:
                    out[k] = u[distinct - 1]
                    return k + 1
            out[k] = u[i]
            k += 1
            cur = 0.0
            continue
        cur += c[i]
        rest_left -= c[i]
        room = max_bins - k - big_left  # bins for the other values, the open one included
        if room > 1 and cur >= (cur + rest_left) / room:
            out[k] = u[i]
            k += 1
            cur = 0.0
    if cur > 0.0:
        out[k] = u[distinct - 1]
        k += 1
    return k


@njit(cache=True, nogil=True, error_model="numpy")
def _cuts_chunk(X, max_value_bins, cuts, n_bins, skip, ch, nch):
    """Chunk ``ch`` of ``nch`` (features) of ``find_cuts``."""
    n, p = X.shape
    f0, f1 = chunk_range(ch, nch, p)
    col = np.empty(n, dtype=np.float64)
    for f in range(f0, f1):
        if skip[f] != 0:
            continue
        m = 0
        for i in range(n):
            v = X[i, f]
            if not np.isnan(v):
                col[m] = v
                m += 1
        if m == 0:
            n_bins[f] = 0
            continue
        s = np.sort(col[:m])
        distinct = m - m + 1  # an int64, not the literal 1 (one _greedy_bins compile)
        for i in range(1, m):
            if s[i] != s[i - 1]:
                distinct += 1
        k = 0
        if distinct <= max_value_bins:
            for i in range(m):
                if i == m - 1 or s[i + 1] != s[i]:
                    cuts[f, k] = s[i]
                    k += 1
        else:
            k = _greedy_bins(s, distinct, max_value_bins, cuts[f])
        n_bins[f] = k


def find_cuts(X, max_value_bins, cuts, n_bins, nch=None, skip=None):
    """Bin upper bounds of every feature (column ``f`` of ``X``; NaN ignored) into
    ``cuts[f, :n_bins[f]]`` (``nch`` chunks of features; by default from the work).

    With at most ``max_value_bins`` distinct values, one bin per value; otherwise quantile bins
    (see ``_greedy_bins``). Features with ``skip[f] != 0`` (uint8; categorical features, binned
    by the caller) are left untouched.
    """
    n, p = X.shape
    if nch is None:
        nch = n_chunks(p * n, p, 1)
    if skip is None:
        skip = np.zeros(p, dtype=np.uint8)
    run_chunks(_cuts_chunk, nch, X, max_value_bins, cuts, n_bins, skip)


BIN_ROWS = 256  # rows per block of apply_bins (their values of every feature stay in cache)


@njit(cache=True, nogil=True, error_model="numpy")
def _bins_chunk(X, cuts, n_bins, bins, bins_t, skip, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``apply_bins``."""
    n, p = X.shape
    k0, k1 = chunk_range(ch, nch, (n + BIN_ROWS - 1) // BIN_ROWS)
    for blk in range(k0, k1):
        i0 = blk * BIN_ROWS
        i1 = min(n, i0 + BIN_ROWS)
        for f in range(p):
            if skip[f] != 0:
                continue
            nb = n_bins[f]
            c = cuts[f]
            steps = 0
            while (1 << steps) < nb:
                steps += 1
            for i in range(i0, i1):
                v = X[i, f]
                if np.isnan(v) or nb == 0:
                    b = nb
                else:
                    lo = 0  # branch-free lower bound: the first b with c[b] >= v, or nb - 1
                    half = 1 << steps
                    for _ in range(steps):
                        half >>= 1
                        probe = min(lo + half, nb) - 1
                        lo = probe + 1 if c[probe] < v else lo
                    b = min(lo, nb - 1)
                bins[i, f] = b
                bins_t[f, i] = b


def apply_bins(X, cuts, n_bins, bins, bins_t, nch=None, skip=None):
    """Bin of every entry of ``X`` (rows x features) into ``bins`` (same layout) and
    ``bins_t`` (features x rows): the first bin whose upper bound is ``>= x`` (clamped to the
    last value bin), ``n_bins[f]`` for NaN. ``nch`` chunks of row blocks (by default from the
    work). Features with ``skip[f] != 0`` are left untouched (see ``apply_cat_bins``)."""
    n, p = X.shape
    if nch is None:
        nch = n_chunks(p * n, (n + BIN_ROWS - 1) // BIN_ROWS)
    if skip is None:
        skip = np.zeros(p, dtype=np.uint8)
    run_chunks(_bins_chunk, nch, X, cuts, n_bins, bins, bins_t, skip)


@njit(cache=True, error_model="numpy")
def apply_cat_bins(X, f, codes, bin_of_code, n_bins_f, bins, bins_t):
    """Bins of the categorical feature ``f``: a row whose value is the code ``codes[k]``
    (sorted, distinct) goes to bin ``bin_of_code[k]``; NaN to the missing bin ``n_bins_f``.
    Every value of ``X[:, f]`` must be NaN or one of ``codes`` (the caller checked)."""
    n = X.shape[0]
    m = codes.shape[0]
    for i in range(n):
        v = X[i, f]
        if np.isnan(v):
            b = n_bins_f
        else:
            lo = 0
            hi = m
            while lo < hi:  # first k with codes[k] >= v
                mid = (lo + hi) >> 1
                if codes[mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            b = bin_of_code[lo]
        bins[i, f] = b
        bins_t[f, i] = b


# ---------------------------------------------------------------------- gradients
@njit(cache=True, nogil=True, error_model="numpy")
def _gradients_chunk(code, prm, y, w, F, gh, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``round_gradients`` with one output."""
    n = F.shape[0]
    b0, b1 = chunk_range(ch, nch, (n + ROW_BLOCK - 1) // ROW_BLOCK)
    for i in range(b0 * ROW_BLOCK, min(n, b1 * ROW_BLOCK)):
        gi, hi = grad_hess(code, prm, y[i], F[i, 0])
        gh[0, i, 0] = w[i] * gi
        gh[0, i, 1] = w[i] * hi


@njit(cache=True, nogil=True, error_model="numpy")
def _gradients_rows_chunk(code, prm, y, w, F, gh, ch, nch):
    """Chunk ``ch`` of ``nch`` (row blocks) of ``round_gradients`` with several outputs."""
    n, K = F.shape
    b0, b1 = chunk_range(ch, nch, (n + ROW_BLOCK - 1) // ROW_BLOCK)
    g = np.empty(K)
    h = np.empty(K)
    for i in range(b0 * ROW_BLOCK, min(n, b1 * ROW_BLOCK)):
        grad_hess_row(code, prm, y[i], F[i], g, h)
        for c in range(K):
            gh[c, i, 0] = w[i] * g[c]
            gh[c, i, 1] = w[i] * h[c]


def round_gradients(code, prm, y, w, F, gh, nch=None):
    """Weighted gradients and hessians of every row and output at margins ``F`` (n, K):
    ``gh[c, i] = (w_i g_ic, w_i h_ic)`` (``nch`` chunks of row blocks; by default from the
    work)."""
    n, K = F.shape
    if nch is None:
        nch = n_chunks(n * K, (n + ROW_BLOCK - 1) // ROW_BLOCK)
    kernel = _gradients_chunk if K == 1 else _gradients_rows_chunk
    run_chunks(kernel, nch, code, prm, y, w, F, gh)


@njit(cache=True, error_model="numpy")
def group_rows(role, n_parts, idx, bounds):
    """Rows sorted by part (``role``), ascending within each part, into ``idx``; part ``r`` is
    ``idx[bounds[r]:bounds[r + 1]]``."""
    n = role.shape[0]
    counts = np.zeros(n_parts + 1, dtype=np.int64)
    for i in range(n):
        counts[role[i] + 1] += 1
    for r in range(n_parts):
        counts[r + 1] += counts[r]
    for r in range(n_parts + 1):
        bounds[r] = counts[r]
    for i in range(n):
        r = role[i]
        idx[counts[r]] = i
        counts[r] += 1


# ---------------------------------------------------------------------- histograms
@njit(cache=True, inline="always", error_model="numpy")
def _prefetch_row(bins, gh, i, f0, width):
    """Prefetch row ``i``'s bins ``f0:f0 + width`` (both ends: they may span two cache lines)
    and gradient."""
    _prefetch(bins, i, f0)
    _prefetch(bins, i, f0 + width - 1)
    _prefetch(gh, i, 0)


def _hist_rows(count, contiguous):
    """The loop that adds rows ``idx[k0:k1]`` to the bins ``PS[fo[q] + bin]`` of the features
    ``feats[q0 + q]`` (channels w g, w h, and with ``count`` the row count), for features
    that are a contiguous range from ``f0`` or (not ``contiguous``) any increasing ones.

    One source, four compiled loops: ``count`` and ``contiguous`` are constants of each, so
    the innermost loop has no branch on them."""

    @njit(inline="always", error_model="numpy")
    def rows(bins, gh, idx, k0, k1, f0, nq, feats, q0, fo, PS):
        width = nq if contiguous else feats[q0 + nq - 1] - f0 + 1
        for k in range(k0, k1):
            if k + PREFETCH_ROWS < k1:
                _prefetch_row(bins, gh, idx[k + PREFETCH_ROWS], f0, width)
            i = idx[k]
            g = gh[i, 0]
            h = gh[i, 1]
            row = bins[i, f0 : f0 + nq] if contiguous else bins[i]
            for q in range(nq):
                j = fo[q] + np.int64(row[q] if contiguous else row[feats[q0 + q]])
                PS[j, 0] += g
                PS[j, 1] += h
                if count:
                    PS[j, 2] += 1.0

    return rows


_rows_gh = _hist_rows(count=False, contiguous=False)
_rows_gh_contiguous = _hist_rows(count=False, contiguous=True)
_rows_ghc = _hist_rows(count=True, contiguous=False)
_rows_ghc_contiguous = _hist_rows(count=True, contiguous=True)


@njit(cache=True, inline="always", error_model="numpy")
def _hist_block(bins, gh, idx, bounds, n_hparts, feats, q0, q1, off, nbp, pool, base, n_hbins, S):
    """Zero, then fill, the bins of features ``feats[q0:q1]`` of one node (its rows by part
    from ``bounds``) in the slot starting at ``pool[base]``."""
    nq = q1 - q0
    if nq <= 0:
        return
    f0 = feats[q0]
    contiguous = feats[q1 - 1] - f0 == nq - 1
    fo = np.empty(nq, dtype=np.int64)
    PS = pool.reshape((-1, S))
    for r in range(n_hparts):
        pb = (base + r * n_hbins * S) // S
        for q in range(nq):
            f = feats[q0 + q]
            fo[q] = pb + off[f]
            for j in range(fo[q], fo[q] + nbp[f]):
                for c in range(S):
                    PS[j, c] = 0.0
        k0, k1 = bounds[r], bounds[r + 1]
        if S == 3:
            if contiguous:
                _rows_ghc_contiguous(bins, gh, idx, k0, k1, f0, nq, feats, q0, fo, PS)
            else:
                _rows_ghc(bins, gh, idx, k0, k1, f0, nq, feats, q0, fo, PS)
        elif contiguous:
            _rows_gh_contiguous(bins, gh, idx, k0, k1, f0, nq, feats, q0, fo, PS)
        else:
            _rows_gh(bins, gh, idx, k0, k1, f0, nq, feats, q0, fo, PS)


@njit(cache=True, nogil=True, error_model="numpy")
def _hist_chunk(
    bins, gh, idx, bounds, n_hparts, feats, fblock, off, nbp, pool, slots, n_hbins, S, sub_parent,
    sub_small, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` (features ``feats[fblock[ch]:fblock[ch + 1]]``) of ``build_histograms``."""
    slot_size = n_hparts * n_hbins * S
    q0 = fblock[ch]
    q1 = fblock[ch + 1]
    for j in range(slots.shape[0]):
        _hist_block(
            bins,
            gh,
            idx,
            bounds[j],
            n_hparts,
            feats,
            q0,
            q1,
            off,
            nbp,
            pool,
            slots[j] * slot_size,
            n_hbins,
            S,
        )
    for j in range(sub_parent.shape[0]):  # the same features of larger children: parent - small
        a = sub_parent[j] * slot_size
        b = sub_small[j] * slot_size
        for r in range(n_hparts):
            for q in range(q0, q1):
                f = feats[q]
                k0 = (r * n_hbins + off[f]) * S
                for k in range(k0, k0 + nbp[f] * S):
                    pool[a + k] -= pool[b + k]


_NO_SLOTS = np.empty(0, dtype=np.int64)


def build_histograms(
    bins, gh, idx, bounds, n_hparts, feats, fblock, off, nbp, pool, slots, n_hbins, S,
    sub_parent=_NO_SLOTS, sub_small=_NO_SLOTS,
):  # fmt: skip
    """Histograms of the nodes ``j`` (rows ``bounds[j]``) into slots ``slots[j]`` of ``pool``,
    for the features in ``feats``; chunk ``t`` fills features ``feats[fblock[t]:fblock[t +
    1]]`` of every node, so threads never share an entry and need no reduction (one chunk,
    ``fblock = [0, len(feats)]``, runs on the calling thread: one pass over each node's
    rows). Then, for the same features, slot ``sub_parent[k]`` minus slot ``sub_small[k]``
    in place (the larger child's histogram from its parent's and its sibling's, as
    ``subtract_histograms``; every ``sub_small`` slot among ``slots``)."""
    run_chunks(
        _hist_chunk, fblock.shape[0] - 1, bins, gh, idx, bounds, n_hparts, feats, fblock, off,
        nbp, pool, slots, n_hbins, S, sub_parent, sub_small,
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def subtract_histograms(pool, parent_slots, small_slots, slot_size):
    """The larger child's histogram in place of its parent's: parent - smaller child."""
    for j in range(parent_slots.shape[0]):
        a = parent_slots[j] * slot_size
        b = small_slots[j] * slot_size
        for k in range(slot_size):
            pool[a + k] -= pool[b + k]


# ---------------------------------------------------------------------- split finding
# Result columns of find_splits (per node): feature, threshold bin, default left, and the
# three scores (gain on the split rows; UnbiasedGBM's score_2 and score_3).
R_FEATURE = 0
R_BIN = 1
R_DEFAULT_LEFT = 2
R_CAT = 3  # the kind of split: one of the CAT_* codes below
N_IRES = 4
R_GAIN = 0
R_SCORE2 = 1
R_SCORE3 = 2
N_FRES = 3

# R_CAT codes. A categorical split sends a set of the feature's bins (categories, the pooled
# rare categories' bin, the missing bin) left. One-hot: the bin R_BIN alone. Sorted: the node's
# candidate bins sorted by G / (H + cat_smooth) (see ``_cat_candidates``), the first R_BIN of
# them (low end) or the last R_BIN (high end).
CAT_NONE = 0
CAT_ONEHOT = 1
CAT_LOW = 2
CAT_HIGH = 3

# Slots of the categorical parameter vector ``catp`` (float64) of find_splits.
C_MAX_ONEHOT = 0  # max_cat_to_onehot: one-hot search up to this many non-empty bins at a node
C_MAX_THRESHOLD = 1  # max_cat_threshold: most categories scanned from each end
C_SMOOTH = 2  # cat_smooth: G / (H + cat_smooth) sort key; bins with fewer rows are not sorted
C_L2 = 3  # cat_l2: extra l2 of the sorted search's child scores
C_MIN_GROUP = 4  # min_data_per_group: rows per group of categories added before a candidate
N_CATP = 5


@njit(cache=True, inline="always", error_model="numpy")
def _side_ok(h, c, lam, mcw, msl, S):
    if h < mcw or h + lam <= 0.0 or h <= 0.0:
        return False
    return S < 3 or c >= msl


@njit(cache=True, error_model="numpy")
def _best_of(GL, HL, CL, n, Gt, Ht, Ct, lam, mcw, msl, S, gain):
    """Split scores ``G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda)`` of the candidates with left
    sums ``GL[b], HL[b], CL[b]`` (-inf where a side is invalid) into ``gain``; returns the
    first best candidate (-1 if none). The score loop has no branches, so it vectorises."""
    for b in range(n):
        gl = GL[b]
        hl = HL[b]
        gr = Gt - gl
        hr = Ht - hl
        v = gl * gl / (hl + lam) + gr * gr / (hr + lam)
        ok = (hl >= mcw) & (hr >= mcw) & (hl > 0.0) & (hr > 0.0) & (hl + lam > 0.0)
        ok = ok & (hr + lam > 0.0)
        if S == 3:
            ok = ok & (CL[b] >= msl) & (Ct - CL[b] >= msl)
        gain[b] = v if ok else _NEG_INF
    best = -1
    top = _NEG_INF
    for b in range(n):
        if gain[b] > top:
            top = gain[b]
            best = b
    return best


@njit(cache=True, inline="always", error_model="numpy")
def _scan_gain(pool, base, f, off, n_bins, tot, lam, mcw, msl, S, scratch, out_i, out_f):
    """Best split of feature ``f`` of one node by the regularised gain (histogram at
    ``pool[base]``, node totals ``tot``); writes (bin, default left) and the gain.

    Candidates: threshold bins below the last non-empty one with missing values right, and
    (if the node has missing values) left; and all values left, missing right. Empty bins give
    exact copies of the previous candidate, so the first best is the lowest threshold of its
    partition. ``scratch`` holds 4 arrays of at least ``n_bins[f]`` entries."""
    nb = n_bins[f]
    b0 = base + off[f] * S
    m = b0 + nb * S
    Gt = tot[0]
    Ht = tot[1]
    Ct = tot[2]
    GM = pool[m]
    HM = pool[m + 1]
    CM = pool[m + 2] if S == 3 else 0.0
    has_miss = CM > 0.0 if S == 3 else (GM != 0.0 or HM != 0.0)
    last = -1  # last non-empty value bin
    for b in range(nb - 1, -1, -1):
        j = b0 + b * S
        if (pool[j + 2] > 0.0) if S == 3 else (pool[j] != 0.0 or pool[j + 1] != 0.0):
            last = b
            break
    GL = scratch[0]
    HL = scratch[1]
    CL = scratch[2]
    gain = scratch[3]
    g = 0.0
    h = 0.0
    c = 0.0
    for b in range(last + 1):
        j = b0 + b * S
        g += pool[j]
        h += pool[j + 1]
        GL[b] = g
        HL[b] = h
        if S == 3:
            c += pool[j + 2]
            CL[b] = c
    parent = Gt * Gt / (Ht + lam)
    best_b = -1
    best_dl = False
    best = _NEG_INF
    hl_best = 0.0
    n_last = np.int64(last)  # int64s, never literals: one compile of _best_of
    one = np.int64(1)
    if last >= 1:  # missing right, thresholds below the last non-empty bin
        k = _best_of(GL, HL, CL, n_last, Gt, Ht, Ct, lam, mcw, msl, S, gain)
        if k >= 0:
            best, best_b, best_dl, hl_best = gain[k], k, False, HL[k]
    if has_miss and last >= 0:
        # every value left, missing right: the threshold is the largest value
        k = _best_of(GL[n_last:], HL[n_last:], CL[n_last:], one, Gt, Ht, Ct, lam, mcw, msl, S, gain)
        if k >= 0 and gain[0] > best:
            best, best_b, best_dl, hl_best = gain[0], last, False, HL[last]
        if last >= 1:  # missing left
            for b in range(last):
                GL[b] += GM
                HL[b] += HM
                if S == 3:
                    CL[b] += CM
            k = _best_of(GL, HL, CL, n_last, Gt, Ht, Ct, lam, mcw, msl, S, gain)
            if k >= 0 and gain[k] > best:
                best, best_b, best_dl, hl_best = gain[k], k, True, HL[k]
    if best_b >= 0 and not has_miss:
        best_dl = hl_best >= Ht - hl_best  # no missing rows: NaN follows the larger side
    out_i[R_BIN] = best_b
    out_i[R_DEFAULT_LEFT] = 1 if best_dl else 0
    g = best - parent if best_b >= 0 else _NEG_INF
    out_f[R_GAIN] = g
    out_f[R_SCORE2] = g
    out_f[R_SCORE3] = g


@njit(cache=True, inline="always", error_model="numpy")
def _part_ok(pre, r, b, Hr, Cr, mcw, msl):
    """Whether candidate ``b`` leaves both children of part ``r`` at least ``msl`` rows and
    ``mcw`` (> 0) hessian."""
    hl = pre[3 * r + 1, b]
    cl = pre[3 * r + 2, b]
    hr = Hr - hl
    ok = (hl >= mcw) & (hr >= mcw) & (hl > 0.0) & (hr > 0.0)
    return ok & (cl >= msl) & (Cr - cl >= msl)


@njit(cache=True, inline="always", error_model="numpy")
def _best_unbiased(pre, P, lo, n, tot, lam, mcw, msl, gain):
    """Gains on part 0 (D) of the candidates ``lo:lo + n`` with left sums ``pre[3 r + c, b]``
    (part r, channel c), -inf unless every part leaves both children at least ``msl`` rows and
    ``mcw`` (> 0) hessian; returns the first best candidate (-1 if none). One branch-free pass
    over the candidates (the parts unrolled: ``P`` is 2 or 3), then the first maximum."""
    Gt = tot[0, 0]
    Ht = tot[0, 1]
    r1 = min(1, P - 1)
    r2 = min(2, P - 1)
    H0, C0 = tot[0, 1], tot[0, 2]
    H1, C1 = tot[r1, 1], tot[r1, 2]
    H2, C2 = tot[r2, 1], tot[r2, 2]
    for b in range(lo, lo + n):
        gl = pre[0, b]
        hl = pre[1, b]
        gr = Gt - gl
        hr = Ht - hl
        v = gl * gl / (hl + lam) + gr * gr / (hr + lam)
        ok = (hl + lam > 0.0) & (hr + lam > 0.0) & _part_ok(pre, 0, b, H0, C0, mcw, msl)
        if P >= 2:
            ok = ok & _part_ok(pre, r1, b, H1, C1, mcw, msl)
        if P >= 3:
            ok = ok & _part_ok(pre, r2, b, H2, C2, mcw, msl)
        gain[b] = v if ok else _NEG_INF
    for r in range(3, P):  # more than three parts (not used by the booster)
        Hr = tot[r, 1]
        Cr = tot[r, 2]
        for b in range(lo, lo + n):
            ok = _part_ok(pre, r, b, Hr, Cr, mcw, msl)
            gain[b] = gain[b] if ok else _NEG_INF
    best = -1
    top = _NEG_INF
    for b in range(lo, lo + n):
        if gain[b] > top:
            top = gain[b]
            best = b
    return best


@njit(cache=True, inline="always", error_model="numpy")
def _prefix_parts(pool, b0, part_size, P, n, pre):
    """Prefix sums over the bins ``0:n`` of every part's three channels (bin ``b`` of part
    ``r`` at ``pool[b0 + r part_size + 3 b]``) into ``pre[3 r + c]``: all parts in one pass,
    so that the 3 P sums run side by side (each sums its bins in order, as any pass would)."""
    if P == 3:
        q1 = b0 + part_size
        q2 = b0 + 2 * part_size
        g0 = h0 = c0 = g1 = h1 = c1 = g2 = h2 = c2 = 0.0
        for b in range(n):
            j = 3 * b
            g0 += pool[b0 + j]
            h0 += pool[b0 + j + 1]
            c0 += pool[b0 + j + 2]
            g1 += pool[q1 + j]
            h1 += pool[q1 + j + 1]
            c1 += pool[q1 + j + 2]
            g2 += pool[q2 + j]
            h2 += pool[q2 + j + 1]
            c2 += pool[q2 + j + 2]
            pre[0, b] = g0
            pre[1, b] = h0
            pre[2, b] = c0
            pre[3, b] = g1
            pre[4, b] = h1
            pre[5, b] = c1
            pre[6, b] = g2
            pre[7, b] = h2
            pre[8, b] = c2
        return
    if P == 2:
        q1 = b0 + part_size
        g0 = h0 = c0 = g1 = h1 = c1 = 0.0
        for b in range(n):
            j = 3 * b
            g0 += pool[b0 + j]
            h0 += pool[b0 + j + 1]
            c0 += pool[b0 + j + 2]
            g1 += pool[q1 + j]
            h1 += pool[q1 + j + 1]
            c1 += pool[q1 + j + 2]
            pre[0, b] = g0
            pre[1, b] = h0
            pre[2, b] = c0
            pre[3, b] = g1
            pre[4, b] = h1
            pre[5, b] = c1
        return
    for r in range(P):
        q = b0 + r * part_size
        g = h = c = 0.0
        for b in range(n):
            j = q + 3 * b
            g += pool[j]
            h += pool[j + 1]
            c += pool[j + 2]
            pre[3 * r, b] = g
            pre[3 * r + 1, b] = h
            pre[3 * r + 2, b] = c


@njit(cache=True, inline="always", error_model="numpy")
def _scan_unbiased(
    pool, base, part_size, P, f, off, n_bins, tot, lam, mcw, msl, scratch, out_i, out_f
):
    """UnbiasedGBM (Zhang et al. 2023, Algorithm 2) for feature ``f`` of one node with ``P``
    histogram parts (D, D1'[, D2']) of three channels (w g, w h, count): the threshold (and missing
    direction) maximising the regularised gain on D among the splits that leave every child at
    least ``msl`` rows and ``mcw`` (> 0) hessian of every part; then score_2 = sum_u G_u^D
    rho_u^(1) and score_3 = sum_u G_u^(D + D1') rho_u^(2) over u in (L, R, -node), with rho = G
    / H of a held-out part (with two parts, D1' = D2' and score_3 = score_2). ``scratch`` holds
    3 P + 2 arrays of at least ``n_bins[f] + 1`` entries."""
    nb = n_bins[f]
    pre = scratch
    gain = scratch[3 * P]
    miss = scratch[3 * P + 1]  # the missing bin of every part, channel by channel
    has_miss = False
    last = -1
    for r in range(P):
        b0 = base + r * part_size + off[f] * 3
        for c in range(3):
            miss[3 * r + c] = pool[b0 + nb * 3 + c]
        if miss[3 * r + 2] > 0.0:
            has_miss = True
        for b in range(nb - 1, last, -1):
            if pool[b0 + b * 3 + 2] > 0.0:
                last = b
                break
    _prefix_parts(pool, base + off[f] * 3, part_size, P, last + 1, pre)
    best = _NEG_INF
    best_b = -1
    best_dl = False
    if last >= 1:  # missing right, thresholds below the last non-empty bin
        k = _best_unbiased(pre, P, 0, last, tot, lam, mcw, msl, gain)
        if k >= 0:
            best, best_b = gain[k], k
    if has_miss and last >= 0:
        # every value left, missing right
        k = _best_unbiased(pre, P, last, 1, tot, lam, mcw, msl, gain)
        if k >= 0 and gain[last] > best:
            best, best_b = gain[last], last
        if last >= 1:  # missing left
            for r in range(P):
                for c in range(3):
                    row = pre[3 * r + c]
                    mv = miss[3 * r + c]
                    for b in range(last):
                        row[b] += mv
            k = _best_unbiased(pre, P, 0, last, tot, lam, mcw, msl, gain)
            if k >= 0 and gain[k] > best:
                best, best_b, best_dl = gain[k], k, True
    out_i[R_BIN] = best_b
    if best_b < 0:
        out_i[R_DEFAULT_LEFT] = 0
        out_f[R_GAIN] = _NEG_INF
        out_f[R_SCORE2] = _NEG_INF
        out_f[R_SCORE3] = _NEG_INF
        return
    out_f[R_GAIN] = best - tot[0, 0] * tot[0, 0] / (tot[0, 1] + lam)
    # left sums of the best split, per part (pre holds missing-left sums below ``last``)
    GL0 = pre[0, best_b]
    GL1 = pre[3, best_b]
    HL1 = pre[4, best_b]
    if best_b < last and not best_dl and has_miss:  # undo the missing-left shift
        GL0 -= miss[0]
        GL1 -= miss[3]
        HL1 -= miss[4]
    if not has_miss:
        hl = pre[1, best_b]
        best_dl = hl >= tot[0, 1] - hl  # no missing rows here: missing values follow the majority
    out_i[R_DEFAULT_LEFT] = 1 if best_dl else 0
    # score_2: training side D, ratios from D1'
    rl = GL1 / HL1
    rr = (tot[1, 0] - GL1) / (tot[1, 1] - HL1)
    rt = tot[1, 0] / tot[1, 1]
    s2 = GL0 * rl + (tot[0, 0] - GL0) * rr - tot[0, 0] * rt
    out_f[R_SCORE2] = s2
    if P == 2:
        out_f[R_SCORE3] = s2
        return
    # score_3: training side D + D1', ratios from D2'
    GL2 = pre[6, best_b]
    HL2 = pre[7, best_b]
    if best_b < last and not best_dl and has_miss:
        GL2 -= miss[6]
        HL2 -= miss[7]
    Tt = tot[0, 0] + tot[1, 0]
    TL = GL0 + GL1
    rl = GL2 / HL2
    rr = (tot[2, 0] - GL2) / (tot[2, 1] - HL2)
    rt = tot[2, 0] / tot[2, 1]
    out_f[R_SCORE3] = TL * rl + (Tt - TL) * rr - Tt * rt


@njit(cache=True, inline="always", error_model="numpy")
def _cat_candidates(pool, b0, nbin, catp, cand, key):
    """The candidate bins of a categorical feature's sorted search (part 0 of its histogram at
    ``pool[b0]``, three channels, ``nbin`` bins with the missing one): the bins with at least
    one row and at least ``cat_smooth`` rows, into ``cand`` (bin order), their sort keys G / (H
    + cat_smooth) into ``key``; returns their number (LightGBM's rule)."""
    smooth = catp[C_SMOOTH]
    m = 0
    for b in range(nbin):
        j = b0 + 3 * b
        c = pool[j + 2]
        if c > 0.0 and c >= smooth:
            cand[m] = b
            key[m] = pool[j] / (pool[j + 1] + smooth)
            m += 1
    return m


@njit(cache=True, inline="always", error_model="numpy")
def _cat_valid(run, tot, P, lam_c, mcw, msl):
    """Whether left sums ``run[3 r + c]`` (part r, channel c) leave both children at least
    ``msl`` rows and ``mcw`` (> 0) hessian in every part (``lam_c`` keeps the part-0 scores
    finite)."""
    ok = True
    for r in range(P):
        hl = run[3 * r + 1]
        cl = run[3 * r + 2]
        hr = tot[r, 1] - hl
        cr = tot[r, 2] - cl
        ok = ok & (hl >= mcw) & (hr >= mcw) & (hl > 0.0) & (hr > 0.0)
        ok = ok & (cl >= msl) & (cr >= msl)
    hl0 = run[1]
    return ok & (hl0 + lam_c > 0.0) & (tot[0, 1] - hl0 + lam_c > 0.0)


@njit(cache=True, inline="always", error_model="numpy")
def _cat_add(pool, b0, part_size, P, b, run):
    """Add bin ``b`` of every part (parts ``part_size`` apart from ``pool[b0]``) to ``run``."""
    for r in range(P):
        j = b0 + r * part_size + 3 * b
        run[3 * r] += pool[j]
        run[3 * r + 1] += pool[j + 1]
        run[3 * r + 2] += pool[j + 2]


@njit(cache=True, error_model="numpy")
def _scan_cat(
    pool, base, part_size, P, f, off, n_bins, tot, lam, mcw, msl, catp, unbiased, scratch, cand,
    out_i, out_f,
):  # fmt: skip
    """Best partition of the categorical feature ``f`` of one node (histogram of ``P`` parts of
    three channels at ``pool[base]``, node totals ``tot[r]`` per part): the set of bins that
    goes left, chosen by the gain on part 0 (all rows, or D of UnbiasedGBM) among the sets
    whose children keep at least ``msl`` rows and ``mcw`` hessian in every part.

    Every bin of the feature is a category here, the missing bin included (so missing values
    go to the side the search puts them on). With at most ``max_cat_to_onehot`` non-empty bins
    at the node, one-hot: each bin alone against the rest, scored with ``lam``. Otherwise
    LightGBM's sorted search: the bins with at least ``cat_smooth`` rows sorted by G / (H +
    cat_smooth), prefixes of up to ``min(max_cat_threshold, (m + 1) // 2)`` bins from either
    end (bins not sorted always go right), a candidate evaluated once its group of newly added
    bins holds ``min_data_per_group`` rows and only while the right side keeps that many, scored
    with ``lam + cat_l2``. The gain is the children's score minus the parent's with ``lam``.
    Unbiased: score_2 and score_3 of the chosen partition as in ``_scan_unbiased``.

    Writes (R_BIN, R_DEFAULT_LEFT, R_CAT) and the scores; R_BIN -1 if no valid partition.
    ``scratch`` holds 3 float64 arrays and ``cand`` one int64 array of at least
    ``max(n_bins[f] + 1, 3 P)`` entries."""
    nb = n_bins[f]
    nbin = nb + 1
    b0 = base + off[f] * 3
    run = scratch[0]
    best_run = scratch[1]
    key = scratch[2]
    Gt = tot[0, 0]
    Ht = tot[0, 1]
    Ct = tot[0, 2]
    n_ne = 0
    for b in range(nbin):
        if pool[b0 + 3 * b + 2] > 0.0:
            n_ne += 1
    best = _NEG_INF
    best_k = -1
    best_kind = CAT_NONE
    best_miss = False
    lam_c = lam
    if n_ne <= catp[C_MAX_ONEHOT]:
        for b in range(nbin):
            if pool[b0 + 3 * b + 2] <= 0.0:
                continue
            for k in range(3 * P):
                run[k] = 0.0
            _cat_add(pool, b0, part_size, P, b, run)
            if not _cat_valid(run, tot, P, lam, mcw, msl):
                continue
            gl = run[0]
            hl = run[1]
            v = gl * gl / (hl + lam) + (Gt - gl) * (Gt - gl) / (Ht - hl + lam)
            if v > best:
                best, best_k, best_kind, best_miss = v, b, CAT_ONEHOT, b == nb
                for k in range(3 * P):
                    best_run[k] = run[k]
    else:
        lam_c = lam + catp[C_L2]
        m = _cat_candidates(pool, b0, nbin, catp, cand, key)
        order = np.argsort(key[:m], kind="mergesort")  # stable: ties keep bin order
        max_num = min(np.int64(catp[C_MAX_THRESHOLD]), (m + 1) // 2)
        mdpg = catp[C_MIN_GROUP]
        for side in range(2):
            for k in range(3 * P):
                run[k] = 0.0
            group = 0.0
            miss = False
            for i in range(min(m, max_num)):
                b = cand[order[i]] if side == 0 else cand[order[m - 1 - i]]
                _cat_add(pool, b0, part_size, P, b, run)
                group += pool[b0 + 3 * b + 2]
                miss = miss or b == nb
                cl = run[2]
                hl = run[1]
                if cl < msl or hl < mcw:
                    continue
                if Ct - cl < msl or Ct - cl < mdpg or Ht - hl < mcw:
                    break
                if group < mdpg:
                    continue
                group = 0.0
                if not _cat_valid(run, tot, P, lam_c, mcw, msl):
                    continue
                gl = run[0]
                v = gl * gl / (hl + lam_c) + (Gt - gl) * (Gt - gl) / (Ht - hl + lam_c)
                if v > best:
                    best, best_k, best_miss = v, i + 1, miss
                    best_kind = CAT_LOW if side == 0 else CAT_HIGH
                    for k in range(3 * P):
                        best_run[k] = run[k]
    out_i[R_BIN] = best_k
    out_i[R_CAT] = best_kind
    out_i[R_DEFAULT_LEFT] = 1 if best_miss else 0
    if best_k < 0:
        out_i[R_CAT] = CAT_NONE
        out_i[R_DEFAULT_LEFT] = 0
        out_f[R_GAIN] = _NEG_INF
        out_f[R_SCORE2] = _NEG_INF
        out_f[R_SCORE3] = _NEG_INF
        return
    g = best - Gt * Gt / (Ht + lam)
    out_f[R_GAIN] = g
    if not unbiased:
        out_f[R_SCORE2] = g
        out_f[R_SCORE3] = g
        return
    # score_2: training side D, ratios from D1'
    GL0 = best_run[0]
    GL1 = best_run[3]
    HL1 = best_run[4]
    rl = GL1 / HL1
    rr = (tot[1, 0] - GL1) / (tot[1, 1] - HL1)
    rt = tot[1, 0] / tot[1, 1]
    s2 = GL0 * rl + (Gt - GL0) * rr - Gt * rt
    out_f[R_SCORE2] = s2
    if P == 2:
        out_f[R_SCORE3] = s2
        return
    # score_3: training side D + D1', ratios from D2'
    GL2 = best_run[6]
    HL2 = best_run[7]
    Tt = Gt + tot[1, 0]
    TL = GL0 + GL1
    rl = GL2 / HL2
    rr = (tot[2, 0] - GL2) / (tot[2, 1] - HL2)
    rt = tot[2, 0] / tot[2, 1]
    out_f[R_SCORE3] = TL * rl + (Tt - TL) * rr - Tt * rt


@njit(cache=True, error_model="numpy")
def cat_left_bins(pool, slots, n_hparts, n_hbins, feature, off, n_bins, catp, kind, k, masks):
    """The left set of the categorical split of every node ``j`` (histogram in slot
    ``slots[j]``, three channels; feature ``feature[j]``; ``kind[j]`` and ``k[j]``, the R_CAT
    and R_BIN results of ``find_splits``): ``masks[j, b] = 1`` for the bins ``b`` that go left,
    0 for the others (rows of nodes without a categorical split untouched). The candidates and
    their order are recomputed exactly as the search found them (``_cat_candidates``)."""
    slot_size = n_hparts * n_hbins * 3
    for j in range(slots.shape[0]):
        if kind[j] == CAT_NONE:
            continue
        f = feature[j]
        nbin = n_bins[f] + 1
        for b in range(nbin):
            masks[j, b] = 0
        if kind[j] == CAT_ONEHOT:
            masks[j, k[j]] = 1
            continue
        b0 = slots[j] * slot_size + off[f] * 3
        cand = np.empty(nbin, dtype=np.int64)
        key = np.empty(nbin, dtype=np.float64)
        m = _cat_candidates(pool, b0, nbin, catp, cand, key)
        order = np.argsort(key[:m], kind="mergesort")
        for i in range(k[j]):
            b = cand[order[i]] if kind[j] == CAT_LOW else cand[order[m - 1 - i]]
            masks[j, b] = 1


@njit(cache=True, error_model="numpy")
def _split_prepare(pool, slots, totals, n_hparts, n_hbins, S, feats, off, n_bins):
    """Node totals of (w g, w h, count) per part, summed over all bins of the first feature
    (so that every candidate's right side, total - left, is consistent); the result buffers
    and the widest feature's bin count."""
    m = slots.shape[0]
    nf = feats.shape[0]
    part_size = n_hbins * S
    slot_size = n_hparts * part_size
    f0 = feats[0]
    for j in range(m):
        for r in range(n_hparts):
            b0 = slots[j] * slot_size + r * part_size + off[f0] * S
            g = 0.0
            h = 0.0
            c = 0.0
            for b in range(n_bins[f0] + 1):
                g += pool[b0 + b * S]
                h += pool[b0 + b * S + 1]
                if S == 3:
                    c += pool[b0 + b * S + 2]
            totals[j, r, 0] = g
            totals[j, r, 1] = h
            totals[j, r, 2] = c
    max_nb = 1
    for q in range(nf):
        max_nb = max(max_nb, n_bins[feats[q]])
    pi = np.empty((m * nf, N_IRES), dtype=np.int64)
    pf = np.empty((m * nf, N_FRES), dtype=np.float64)
    return pi, pf, max_nb


@njit(cache=True, inline="always", error_model="numpy")
def _write_pick(feats, pi, j, best, res_i, res_f):
    """Node ``j``'s chosen split: candidate ``best`` of the per-(node, feature) results ``pi``
    (feature ``feats[best % len(feats)]``), or none (``best`` < 0: no feature, every score
    -inf). The caller writes the found split's scores to ``res_f``."""
    if best < 0:
        res_i[j, R_FEATURE] = -1
        res_i[j, R_BIN] = -1
        res_i[j, R_DEFAULT_LEFT] = 0
        res_i[j, R_CAT] = CAT_NONE
        for c in range(N_FRES):
            res_f[j, c] = _NEG_INF
    else:
        res_i[j, R_FEATURE] = feats[best % feats.shape[0]]
        res_i[j, R_BIN] = pi[best, R_BIN]
        res_i[j, R_DEFAULT_LEFT] = pi[best, R_DEFAULT_LEFT]
        res_i[j, R_CAT] = pi[best, R_CAT]


@njit(cache=True, error_model="numpy")
def _split_pick(feats, unbiased, pi, pf, pen, res_i, res_f):
    """Per node, the feature whose best split scores highest (gain, or score_2 unbiased),
    less the feature's penalty ``pen[f]`` (float64 per feature; zeros for none). The chosen
    split's scores go to ``res_f`` with the penalty subtracted from that score."""
    nf = feats.shape[0]
    m = res_i.shape[0]
    key = R_SCORE2 if unbiased else R_GAIN
    for j in range(m):
        best = -1
        best_score = _NEG_INF
        for q in range(nf):
            t = j * nf + q
            if pi[t, R_BIN] < 0:
                continue
            score = pf[t, key] - pen[feats[q]]
            if best < 0 or score > best_score:
                best = t
                best_score = score
        _write_pick(feats, pi, j, best, res_i, res_f)
        if best >= 0:
            for c in range(N_FRES):
                res_f[j, c] = pf[best, c]
            res_f[j, key] = best_score


@njit(cache=True, nogil=True, error_model="numpy")
def _gain_splits_chunk(
    pool, slots, totals, n_hparts, n_hbins, S, feats, off, n_bins, lam, mcw, msl, max_nb, is_cat,
    catp, pi, pf, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` of ``nch`` ((node, feature) pairs) of ``find_splits`` in gain mode."""
    nf = feats.shape[0]
    slot_size = n_hparts * n_hbins * S
    lo, hi = chunk_range(ch, nch, slots.shape[0] * nf)
    scratch = np.empty((4, max_nb))
    cscratch = np.empty((3, max_nb + 4))
    cand = np.empty(max_nb + 4, dtype=np.int64)
    for task in range(lo, hi):
        j = task // nf
        f = feats[task % nf]
        if is_cat[f] != 0:
            _scan_cat(
                pool, slots[j] * slot_size, n_hbins * S, 1, f, off, n_bins, totals[j], lam, mcw,
                msl, catp, False, cscratch, cand, pi[task], pf[task],
            )  # fmt: skip
            continue
        _scan_gain(
            pool, slots[j] * slot_size, f, off, n_bins, totals[j, 0], lam, mcw, msl, S, scratch,
            pi[task], pf[task],
        )  # fmt: skip
        pi[task, R_CAT] = CAT_NONE


@njit(cache=True, nogil=True, error_model="numpy")
def _unbiased_splits_chunk(
    pool, slots, totals, n_hparts, n_hbins, feats, off, n_bins, lam, mcw, msl, max_nb, is_cat, catp,
    pi, pf, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` of ``nch`` ((node, feature) pairs) of ``find_splits`` in unbiased mode
    (three channels)."""
    nf = feats.shape[0]
    part_size = n_hbins * 3
    lo, hi = chunk_range(ch, nch, slots.shape[0] * nf)
    width = max(max_nb + 1, 3 * n_hparts)
    scratch = np.empty((3 * n_hparts + 2, width))
    cscratch = np.empty((3, width + 2))
    cand = np.empty(width + 2, dtype=np.int64)
    for task in range(lo, hi):
        j = task // nf
        f = feats[task % nf]
        if is_cat[f] != 0:
            _scan_cat(
                pool, slots[j] * n_hparts * part_size, part_size, n_hparts, f, off, n_bins,
                totals[j], lam, mcw, msl, catp, True, cscratch, cand, pi[task], pf[task],
            )  # fmt: skip
            continue
        _scan_unbiased(
            pool, slots[j] * n_hparts * part_size, part_size, n_hparts, f, off, n_bins, totals[j],
            lam, mcw, msl, scratch, pi[task], pf[task],
        )  # fmt: skip
        pi[task, R_CAT] = CAT_NONE


@njit(cache=True, nogil=True, error_model="numpy")
def _power_sums_chunk(gh, idx, starts, ends, out, ch, nch):
    """Chunk ``ch`` of ``nch`` (nodes) of ``node_power_sums``."""
    j0, j1 = chunk_range(ch, nch, starts.shape[0])
    for j in range(j0, j1):
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        for k in range(starts[j], ends[j]):
            g = gh[idx[k], 0]
            g2 = g * g
            s2 += g2
            s3 += g2 * g
            s4 += g2 * g2
        out[j, 0] = s2
        out[j, 1] = s3
        out[j, 2] = s4


def node_power_sums(gh, idx, starts, ends, out, nch=1):
    """Sums of ``g^2``, ``g^3``, ``g^4`` (``g = gh[i, 0]``, the weighted gradient ``w g``) over
    the rows ``idx[starts[j]:ends[j]]`` of every node ``j`` into ``out[j]`` (float64, (m, 3)):
    the node-level moments ``gain_log_pvalue`` needs. One pass over each node's rows (its
    split rows; the histogram pass reads every feature of them), ``nch`` chunks of nodes."""
    run_chunks(_power_sums_chunk, nch, gh, idx, starts, ends, out)


@njit(cache=True, nogil=True, error_model="numpy")
def _pvalue_chunk(
    pool, slots, slot_size, feats, off, n_bins, is_cat, powers, lam, max_nb, pi, lp, ch, nch
):
    """Chunk ``ch`` of ``nch`` ((node, feature) pairs) of ``split_log_pvalues``."""
    nf = feats.shape[0]
    lo, hi = chunk_range(ch, nch, slots.shape[0] * nf)
    G = np.empty(max_nb + 1)
    H = np.empty(max_nb + 1)
    C = np.empty(max_nb + 1)
    scratch = np.empty((4, max_nb + 1))
    for task in range(lo, hi):
        if pi[task, R_BIN] < 0:
            lp[task] = 0.0
            continue
        j = task // nf
        f = feats[task % nf]
        nb = n_bins[f]
        b0 = slots[j] * slot_size + off[f] * 3
        m = b0 + nb * 3
        kind = KIND_PARTITION
        first = 0  # where the missing bin goes: 0 (before the values) or nb (after them)
        if is_cat[f] == 0:
            kind = KIND_ORDERED
            if pi[task, R_DEFAULT_LEFT] != 0 and pool[m + 2] > 0.0:
                first = 1
        q = 0
        if first == 1:
            G[0] = pool[m]
            H[0] = pool[m + 1]
            C[0] = pool[m + 2]
            q = 1
        for b in range(nb):
            jb = b0 + 3 * b
            G[q] = pool[jb]
            H[q] = pool[jb + 1]
            C[q] = pool[jb + 2]
            q += 1
        if first == 0:
            G[q] = pool[m]
            H[q] = pool[m + 1]
            C[q] = pool[m + 2]
        lp[task] = gain_log_pvalue(
            G, H, C, nb + 1, powers[j, 0], powers[j, 1], powers[j, 2], lam, kind, scratch
        )


def split_log_pvalues(pool, slots, slot_size, feats, off, n_bins, is_cat, powers, lam, pi, lp, nch):
    """log p-value (``kernels.pvalue.gain_log_pvalue``) of every (node, feature) pair's best
    split (``pi``, from ``find_splits``; part 0 of the histogram in slot ``slots[j]``, three
    channels) into ``lp[j * len(feats) + q]``; 0 (p = 1) for pairs without a valid split.

    Numeric features: ``KIND_ORDERED``, the bins in their order with the missing bin on the
    side the best split sends it (first if left, else last). Categorical features:
    ``KIND_PARTITION`` over all their non-empty bins (missing included), the best binary
    partition of the categories, whatever search (one-hot or sorted) chose the split.
    ``powers[j]``: the node's sums of ``g^2, g^3, g^4`` (``node_power_sums``)."""
    max_nb = int(n_bins[feats].max()) if feats.shape[0] else 1
    run_chunks(
        _pvalue_chunk, nch, pool, slots, slot_size, feats, off, n_bins, is_cat, powers,
        float(lam), max_nb, pi, lp,
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _split_pick_pvalue(feats, pi, pf, lp, log_alpha, res_i, res_f):
    """Per node, the feature whose best split has the smallest log p-value (ties: the larger
    gain, then the lower feature); no split (feature -1) unless that log p-value is below
    ``log_alpha`` (any, for ``log_alpha >= 0``). ``res_f``: (gain, log p, gain)."""
    nf = feats.shape[0]
    m = res_i.shape[0]
    for j in range(m):
        best = -1
        for q in range(nf):
            t = j * nf + q
            if pi[t, R_BIN] < 0:
                continue
            if (
                best < 0
                or lp[t] < lp[best]
                or (lp[t] == lp[best] and pf[t, R_GAIN] > pf[best, R_GAIN])
            ):
                best = t
        if best >= 0 and log_alpha < 0.0 and not (lp[best] < log_alpha):
            best = -1
        _write_pick(feats, pi, j, best, res_i, res_f)
        if best >= 0:
            res_f[j, R_GAIN] = pf[best, R_GAIN]
            res_f[j, R_SCORE2] = lp[best]
            res_f[j, R_SCORE3] = pf[best, R_GAIN]


def find_splits(
    pool, slots, totals, n_hparts, n_hbins, S, feats, off, n_bins, lam, mcw, msl, unbiased, res_i,
    res_f, nch=None, is_cat=None, catp=None, per_feature=None, pvalue=None, penalty=None,
):  # fmt: skip
    """Best split of every node ``j`` (histogram in slot ``slots[j]``) over the features
    ``feats``; its per-part totals of (w g, w h, count) go to ``totals[j]``.

    Gain mode: the feature and threshold with the largest gain. Unbiased mode: per feature the
    threshold by gain on D, then the feature by score_2 (see ``_scan_unbiased``). Ties go to
    the lower bin and the lower feature. ``res_i[j] = (feature, bin, default_left, kind)``
    (feature -1: no valid split; kind an R_CAT code), ``res_f[j] = (gain, score_2, score_3)``.
    ``nch`` chunks of (node, feature) pairs (by default from the number of candidates).

    Features with ``is_cat[f] != 0`` (uint8 per feature) are categorical: their best partition
    is searched by ``_scan_cat`` with the parameters ``catp`` (``N_CATP`` float64, slots
    ``C_*``); they need the count channel (S = 3). With ``per_feature`` a pair of arrays
    ``(pi, pf)`` of shapes (nodes x len(feats), N_IRES) and (..., N_FRES), every (node,
    feature) pair's best split is also written there (row ``j * len(feats) + q``), for a
    caller that chooses among features by another criterion.

    P-value mode (``pvalue`` a pair ``(powers, log_alpha)``, gain scans, three channels, one
    histogram part): per feature the split by gain as in gain mode, then the feature whose
    best split has the smallest log p-value under the permutation null
    (``split_log_pvalues``; ``powers[j]`` the node's sums of ``g^2, g^3, g^4``); no split
    unless it is below ``log_alpha`` (no limit for ``log_alpha >= 0``). ``res_f[j] = (gain,
    log p, gain)``.

    ``penalty`` (float64 per feature, gain and unbiased modes): subtracted from each
    feature's score when the feature is chosen (the feature-selecting penalties of Han et al.
    2020, ``Config.feature_penalty``); the chosen score in ``res_f`` is the penalised one.
    """
    pi, pf, max_nb = _split_prepare(pool, slots, totals, n_hparts, n_hbins, S, feats, off, n_bins)
    if per_feature is not None:
        pi, pf = per_feature
    n_tasks = slots.shape[0] * feats.shape[0]
    if nch is None:
        nch = n_chunks(n_tasks * max_nb, n_tasks)
    lam, mcw, msl = float(lam), float(mcw), float(msl)
    if is_cat is None:
        is_cat = np.zeros(off.shape[0], dtype=np.uint8)
    if catp is None:
        catp = np.zeros(N_CATP, dtype=np.float64)
    if S != 3 and np.any(is_cat[feats] != 0):
        raise ValueError("find_splits: categorical features need the count channel (S = 3).")
    if unbiased:  # its own kernel: a fit compiles only the scan it uses
        if S != 3:
            raise ValueError("find_splits: the unbiased mode needs the count channel (S = 3).")
        run_chunks(
            _unbiased_splits_chunk, nch, pool, slots, totals, n_hparts, n_hbins, feats, off,
            n_bins, lam, mcw, msl, max_nb, is_cat, catp, pi, pf,
        )  # fmt: skip
    else:
        run_chunks(
            _gain_splits_chunk, nch, pool, slots, totals, n_hparts, n_hbins, S, feats, off,
            n_bins, lam, mcw, msl, max_nb, is_cat, catp, pi, pf,
        )  # fmt: skip
    if pvalue is not None:
        if unbiased or S != 3 or n_hparts != 1:
            raise ValueError("find_splits: the p-value mode needs gain scans, S = 3, one part.")
        powers, log_alpha = pvalue
        lp = np.empty(pi.shape[0], dtype=np.float64)
        split_log_pvalues(
            pool, slots, n_hparts * n_hbins * S, feats, off, n_bins, is_cat, powers, lam, pi, lp,
            nch,
        )  # fmt: skip
        _split_pick_pvalue(feats, pi, pf, lp, float(log_alpha), res_i, res_f)
        return
    if penalty is None:
        penalty = np.zeros(off.shape[0], dtype=np.float64)
    elif pvalue is not None:
        raise ValueError("find_splits: feature penalties are not defined for the p-value mode.")
    _split_pick(feats, unbiased, pi, pf, penalty, res_i, res_f)


# ---------------------------------------------------------------------- partition
@njit(cache=True, nogil=True, error_model="numpy")
def _partition_chunk(
    bins_t, idx, tmp, bounds, feature, thr_bin, default_left, miss_bin, child_bounds, is_cat,
    masks, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (nodes) of ``partition``."""
    j0, j1 = chunk_range(ch, nch, bounds.shape[0])
    for j in range(j0, j1):
        bnd = bounds[j]
        cb = child_bounds[j]
        tb = thr_bin[j]
        mb = miss_bin[j]
        P = bnd.shape[0] - 1
        s = bnd[0]
        w = s
        t = 0
        d = np.int64(1) if default_left[j] != 0 else np.int64(0)
        col = bins_t[feature[j]]
        cat = is_cat[j] != 0
        mask = masks[j]
        cb[0, 0] = s
        for r in range(P):
            t0 = t
            if cat:
                for k in range(bnd[r], bnd[r + 1]):
                    i = idx[k]
                    go = np.int64(mask[np.int64(col[i])])
                    idx[w] = i
                    tmp[s + t] = i
                    w += go
                    t += 1 - go
            else:
                for k in range(bnd[r], bnd[r + 1]):
                    i = idx[k]
                    b = np.int64(col[i])
                    go = d if b == mb else np.int64(b <= tb)
                    idx[w] = i
                    tmp[s + t] = i
                    w += go
                    t += 1 - go
            cb[0, r + 1] = w
            cb[1, r + 1] = t - t0  # right rows of part r; made a bound below
        for k in range(t):
            idx[w + k] = tmp[s + k]
        cb[1, 0] = w
        for r in range(P):
            cb[1, r + 1] += cb[1, r]


def partition(
    bins_t, idx, tmp, bounds, feature, thr_bin, default_left, miss_bin, child_bounds, nch=1,
    is_cat=None, masks=None,
):  # fmt: skip
    """Stable partition of the rows of every node ``j`` of a batch (parts ``bounds[j]``) by
    "bin <= thr_bin[j]" of feature ``feature[j]`` (its missing bin ``miss_bin[j]`` to the
    default side), reading the feature's column of ``bins_t`` (features x rows); the
    children's part bounds into ``child_bounds[j, 0]`` and ``child_bounds[j, 1]``. ``nch``
    chunks of nodes. A node with ``is_cat[j] != 0`` (uint8) sends left the rows whose bin
    ``b`` has ``masks[j, b] == 1`` (uint8; ``cat_left_bins``) instead.

    Branch-free: every row is written to both outputs and only one cursor advances."""
    if is_cat is None:
        is_cat = np.zeros(bounds.shape[0], dtype=np.uint8)
        masks = np.zeros((bounds.shape[0], 1), dtype=np.uint8)
    run_chunks(
        _partition_chunk, nch, bins_t, idx, tmp, bounds, feature, thr_bin, default_left, miss_bin,
        child_bounds, is_cat, masks,
    )  # fmt: skip


# ---------------------------------------------------------------------- leaves
@njit(cache=True, nogil=True, error_model="numpy")
def _leaves_chunk(gh, idx, starts, ends, lr, lam, F, c, sums, values, ch, nch):
    """Chunk ``ch`` of ``nch`` (leaves) of ``finish_leaves``."""
    j0, j1 = chunk_range(ch, nch, starts.shape[0])
    for j in range(j0, j1):
        g = 0.0
        h = 0.0
        for k in range(starts[j], ends[j]):
            i = idx[k]
            g += gh[i, 0]
            h += gh[i, 1]
        sums[j, 0] = g
        sums[j, 1] = h
        sums[j, 2] = ends[j] - starts[j]
        v = -lr * g / (h + lam)
        values[j] = v
        for k in range(starts[j], ends[j]):
            F[idx[k], c] += v


def finish_leaves(gh, idx, starts, ends, lr, lam, F, c, sums, values, nch=1):
    """For every leaf (rows ``idx[starts[j]:ends[j]]``, all parts): its (w g, w h, row count)
    into ``sums[j]``, its value ``-lr G / (H + lam)`` into ``values[j]``, added to output ``c``
    of its rows' margins ``F``. ``nch`` chunks of leaves."""
    run_chunks(_leaves_chunk, nch, gh, idx, starts, ends, float(lr), float(lam), F, c, sums, values)


MAX_CAT_CODE = 2147483647.0  # category codes at or above this are in no set (as kernels.routing)


@njit(cache=True, inline="always", error_model="numpy")
def _in_cat_set(v, lo, hi, cat_words):
    """Whether value ``v`` (not NaN) is a category of the bitset ``cat_words[lo:hi]``: the
    rule of ``kernels.routing`` for sets that go left (truncated toward zero, so (-1, 0) reads
    as category 0; below -1 or from 2**31 - 1 on, no category)."""
    if not (v > -1.0 and v < MAX_CAT_CODE):
        return False
    cc = np.int64(v)
    w = lo + (cc >> 5)
    if w >= hi:
        return False
    return (cat_words[w] >> np.uint32(cc & 31)) & np.uint32(1) != 0


@njit(cache=True, nogil=True, error_model="numpy")
def _add_tree_chunk(
    X, left, right, feature, threshold, default_left, value, F, c, split_type, cat_offsets,
    cat_words, ch, nch,
):  # fmt: skip
    """Chunk ``ch`` of ``nch`` (row blocks) of ``add_tree``."""
    n = X.shape[0]
    b0, b1 = chunk_range(ch, nch, (n + ROW_BLOCK - 1) // ROW_BLOCK)
    for i in range(b0 * ROW_BLOCK, min(n, b1 * ROW_BLOCK)):
        u = 0
        while left[u] >= 0:
            v = X[i, feature[u]]
            if np.isnan(v):
                u = left[u] if default_left[u] != 0 else right[u]
            elif split_type[u] != 0:
                inside = _in_cat_set(v, cat_offsets[u], cat_offsets[u + 1], cat_words)
                u = left[u] if inside else right[u]
            elif v <= threshold[u]:
                u = left[u]
            else:
                u = right[u]
        F[i, c] += value[u]


def add_tree(
    X, left, right, feature, threshold, default_left, value, F, c, nch=None, split_type=None,
    cat_offsets=None, cat_words=None,
):  # fmt: skip
    """Route the rows of raw ``X`` through one tree ("x <= threshold", NaN to the default
    side) and add the leaf values to output ``c`` of ``F`` (``nch`` chunks of row blocks; by
    default from the number of rows). Nodes with ``split_type[u] != 0`` (int8) are categorical
    splits whose set goes left: categories of the bitset ``cat_words[cat_offsets[u]:
    cat_offsets[u + 1]]`` left, every other value right, NaN to the default side (the rule of
    ``kernels.routing`` for ``CAT_SET_LEFT`` nodes with missing type NaN)."""
    n = X.shape[0]
    if nch is None:
        nch = n_chunks(n * 8, (n + ROW_BLOCK - 1) // ROW_BLOCK)
    if split_type is None:
        split_type = np.zeros(left.shape[0], dtype=np.int8)
        cat_offsets = np.zeros(left.shape[0] + 1, dtype=np.int64)
        cat_words = np.zeros(0, dtype=np.uint32)
    run_chunks(
        _add_tree_chunk, nch, X, left, right, feature, threshold, default_left, value, F, c,
        split_type, cat_offsets, cat_words,
    )  # fmt: skip
