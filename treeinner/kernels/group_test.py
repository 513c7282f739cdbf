"""Group-testing split search of GT-GBM (Han et al., "Scalable feature selection for
(multitask) gradient boosted trees", Section 4 and Algorithm 2): candidate features of a node
without a histogram of every feature.

A node's scan of all ``d`` features is replaced by group testing. ``ceil(e * s * log(s /
delta))`` random subsets of ``m = d / s`` features are drawn once (``s = n_select``; with ``s ==
1`` a single subset of all the features). For each subset, repeatedly: cut the current range of
the subset into two contiguous halves, sum each half's standardised features into a
"pseudo-feature", find each pseudo-feature's best split, and keep the half whose best split is
better; the last feature left is a candidate. The caller then scans the candidates (with the
features it always scans) as ordinary features.

Layout and definitions (every one of them is part of the contract, and the reference
implementation of the tests follows them):

* Standardisation. Feature ``f`` of ``bins_t`` (its ``n_bins[f]`` ordered value bins, then the
  missing bin ``n_bins[f]``) becomes the uint8 ``v = round(255 * b / (n_bins[f] - 1))`` on its
  value bin ``b`` (half up; 0 if ``n_bins[f] <= 1``) and 128 on the missing bin: a monotone
  [0, 1] standardisation (times 255) through the bins, robust to outliers, instead of the
  paper's ``(x - min) / max``.
* Subsets. Subset ``g`` is ``m`` distinct eligible features in random order ``f_0 .. f_{m-1}``
  (``rng.permutation`` of the eligible features, first ``m``), ``m = round(d / s)`` rounded half
  up, at least 1 (``d`` = number of eligible features). The halves of the range ``[a, b)`` are
  ``[a, mid)`` (left) and ``[mid, b)`` (right), ``mid = a + (b - a) // 2``: the left half is the
  smaller one when ``b - a`` is odd.
* Prefix sums. ``C_g(k) = sum_{j < k} v[f_j, i]`` per row ``i``, exact uint32 integers, stored
  at ``k = B, 2B, ...`` and ``k = m`` in ``table[g, k // B - 1, i]`` (the last entry holds
  ``C_g(m)``; ``C_g(0) = 0`` is not stored), a (n_groups, ceil(m / B), n) array: a node's reads
  of one prefix are one row of it. ``B`` is the smallest power of two in 1..64 for which the
  table fits in ``max_table_bytes``. ``C_g(k)`` elsewhere is the stored ``C_g(B * (k // B))``
  plus the ``k % B`` values after it, read from the standardised matrix (kept only when ``B >
  1``), or, when fewer reads, ``C_g`` at the start ``a`` of the current range plus the values
  from ``a``.
  Every way gives the same integer, so the candidates do not depend on ``B``.
* A halving step on ``[a, b)`` builds the pseudo-features ``Z_L = C(mid) - C(a)`` and ``Z_R =
  C(b) - C(mid)`` of every node row. Each gets a histogram of (sum w g, sum w h, row count)
  over 256 equal-width bins of its integer range ``[zmin, zmax]`` on the node's rows: row ``i``
  goes to bin ``((Z_i - zmin) * 256) // (zmax - zmin + 1)`` (so a range of at most 256
  values keeps every value apart; ``zmin == zmax`` puts all rows in bin 0: no valid split).
  Its best split is that of the booster (``histogram._scan_gain`` without missing values):
  thresholds below the last non-empty bin, left = bins ``<= t``, gain ``G_L^2/(H_L+lambda) +
  G_R^2/(H_R+lambda) - G^2/(H+lambda)``, each child needing hessian ``>= min_child_weight``
  (and ``> 0``, ``+ lambda > 0``) and ``>= min_samples_leaf`` rows; the node totals ``G, H``
  are summed over the node's rows in order. The half with the larger best gain is kept; on a
  tie (both invalid included) the left half.

Each subset's search runs on one thread, in a fixed order, so the candidates do not depend on
the number of threads (``run_chunks`` over subsets; every chunk allocates its scratch once).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._threads import n_chunks, run_chunks
from .routing import chunk_range

N_PSEUDO_BINS = 256  # bins of a pseudo-feature's histogram
MISSING_VALUE = 128  # standardised value of the missing bin
MAX_BLOCK = 64  # largest spacing B of the stored prefix sums
_NEG_INF = -np.inf


# ---------------------------------------------------------------------- precompute
@njit(cache=True, nogil=True, error_model="numpy")
def _standardise_chunk(bins_t, n_bins, eligible, vals, ch, nch):
    """Chunk ``ch`` of ``nch`` (eligible features) of the standardised matrix: row ``e`` of
    ``vals`` is feature ``eligible[e]`` of ``bins_t`` mapped to uint8 (module docstring)."""
    n = bins_t.shape[1]
    e0, e1 = chunk_range(ch, nch, eligible.shape[0])
    lut = np.empty(65537, dtype=np.uint8)
    for e in range(e0, e1):
        f = eligible[e]
        nb = n_bins[f]
        top = nb - 1
        for b in range(nb):
            lut[b] = 0 if top <= 0 else (2 * 255 * b + top) // (2 * top)
        lut[nb] = MISSING_VALUE
        row = bins_t[f]
        out = vals[e]
        for i in range(n):
            out[i] = lut[np.int64(row[i])]


@njit(cache=True, nogil=True, error_model="numpy")
def _table_chunk(vals, grp_pos, block, table, ch, nch):
    """Chunk ``ch`` of ``nch`` (subsets) of the prefix-sum table (module docstring)."""
    n = vals.shape[1]
    n_groups, m = grp_pos.shape
    last = table.shape[1] - 1
    g0, g1 = chunk_range(ch, nch, n_groups)
    acc = np.empty(n, dtype=np.uint32)
    for g in range(g0, g1):
        for i in range(n):
            acc[i] = 0
        for j in range(m):
            row = vals[grp_pos[g, j]]
            for i in range(n):
                acc[i] += np.uint32(row[i])
            if (j + 1) % block == 0:
                table[g, (j + 1) // block - 1, :] = acc
        table[g, last, :] = acc


# ---------------------------------------------------------------------- search
@njit(cache=True, inline="always", error_model="numpy")
def _prefix_at(table, vals, grp_pos, g, block, k, a, ca, out, idx, start, cnt):
    """``C_g(k)`` of the node's rows into ``out[:cnt]``, ``a < k``, ``ca`` holding ``C_g(a)``:
    the stored prefix at or below ``k`` plus the ``k % B`` values after it, or ``C_g(a)`` plus
    the ``k - a`` values from ``a`` when that reads fewer (the same integers either way). The
    other end ``b`` of the range is never nearer: ``k = a + (b - a) // 2``."""
    kb = k // block
    r = k - kb * block
    if r + 1 <= k - a or r == 0:
        j0 = kb * block
        if kb == 0:
            for q in range(cnt):
                out[q] = 0
        else:
            tab = table[g, kb - 1]
            for q in range(cnt):
                out[q] = np.int32(tab[idx[start + q]])
    else:
        j0 = a
        for q in range(cnt):
            out[q] = ca[q]
    for j in range(j0, k):
        row = vals[grp_pos[g, j]]
        for q in range(cnt):
            out[q] += np.int32(row[idx[start + q]])


@njit(cache=True, inline="always", error_model="numpy")
def _bin_of(z, zmin, inv):
    """Bin ``((z - zmin) * N_PSEUDO_BINS) // width`` of a pseudo-feature value, ``inv = 1 /
    width`` (float64), without an integer division.

    Exact for ``width < 2**32``: with ``t = (z - zmin) * N_PSEUDO_BINS < N_PSEUDO_BINS * width``,
    ``(t + 1/2) / width`` lies at least ``1 / (2 width) > 1e-10`` away from every integer, and
    the float product ``(t + 1/2) * inv`` is within ``N_PSEUDO_BINS * 2**-51 < 1e-13`` of it,
    so its floor is the integer quotient."""
    return np.int64((np.float64((z - zmin) * N_PSEUDO_BINS) + 0.5) * inv)


@njit(cache=True, inline="always", error_model="numpy")
def _pseudo_best(hist, Gt, Ht, Ct, lam, mcw, msl):
    """Best gain of a pseudo-feature's histogram ``hist`` (N_PSEUDO_BINS, 3): thresholds below
    its last non-empty bin, left = bins ``<= t``; ``-inf`` if no split is valid. Empty bins
    are skipped: their threshold splits the rows as the one before (or leaves the left side
    empty, never valid)."""
    last = -1
    for b in range(N_PSEUDO_BINS - 1, -1, -1):
        if hist[b, 2] > 0.0:
            last = b
            break
    best = _NEG_INF
    gl = 0.0
    hl = 0.0
    cl = 0.0
    for b in range(last):
        if hist[b, 2] == 0.0:  # the previous threshold's split again (or an empty left side)
            continue
        gl += hist[b, 0]
        hl += hist[b, 1]
        cl += hist[b, 2]
        gr = Gt - gl
        hr = Ht - hl
        ok = (hl >= mcw) & (hr >= mcw) & (hl > 0.0) & (hr > 0.0) & (hl + lam > 0.0)
        ok = ok & (hr + lam > 0.0) & (cl >= msl) & (Ct - cl >= msl)
        if ok:
            v = gl * gl / (hl + lam) + gr * gr / (hr + lam)
            if v > best:
                best = v
    if best == _NEG_INF:
        return best
    return best - Gt * Gt / (Ht + lam)


@njit(cache=True, nogil=True, error_model="numpy")
def _search_chunk(
    table, vals, grp_pos, block, idx, start, end, ghn, tot, lam, mcw, msl, picks, steps, ch, nch
):
    """Chunk ``ch`` of ``nch`` (subsets) of ``GroupTester.candidates``: the position in its
    subset of every subset's last feature into ``picks``, its halving steps into ``steps``.

    ``ghn`` (end - start, 2) holds the node rows' (w g, w h) in node order, ``tot`` their
    sums (G, H)."""
    n_groups, m = grp_pos.shape
    g0, g1 = chunk_range(ch, nch, n_groups)
    cnt = end - start
    last_kb = table.shape[1] - 1
    buf = np.empty((3, max(cnt, 1)), dtype=np.int32)
    hist = np.empty((2, N_PSEUDO_BINS, 3), dtype=np.float64)
    Gt = tot[0]
    Ht = tot[1]
    Ct = np.float64(cnt)
    for g in range(g0, g1):
        ia = 0  # buf[ia] = C(a), buf[ib] = C(b), buf[im] = C(mid)
        ib = 1
        im = 2
        top = table[g, last_kb]
        for q in range(cnt):
            buf[0, q] = 0
            buf[1, q] = np.int32(top[idx[start + q]])
        a = 0
        b = m
        n_steps = 0
        while b - a > 1:
            mid = a + (b - a) // 2
            ca = buf[ia]
            cb = buf[ib]
            cm = buf[im]
            _prefix_at(table, vals, grp_pos, g, block, mid, a, ca, cm, idx, start, cnt)
            lmin = np.int64(1) << 62
            lmax = -lmin
            rmin = lmin
            rmax = lmax
            for q in range(cnt):
                zl = np.int64(cm[q] - ca[q])
                zr = np.int64(cb[q] - cm[q])
                lmin = min(lmin, zl)
                lmax = max(lmax, zl)
                rmin = min(rmin, zr)
                rmax = max(rmax, zr)
            linv = 1.0 / np.float64(lmax - lmin + 1)
            rinv = 1.0 / np.float64(rmax - rmin + 1)
            hist[:] = 0.0
            for q in range(cnt):
                g_ = ghn[q, 0]
                h_ = ghn[q, 1]
                bl = _bin_of(np.int64(cm[q] - ca[q]), lmin, linv)
                br = _bin_of(np.int64(cb[q] - cm[q]), rmin, rinv)
                hist[0, bl, 0] += g_
                hist[0, bl, 1] += h_
                hist[0, bl, 2] += 1.0
                hist[1, br, 0] += g_
                hist[1, br, 1] += h_
                hist[1, br, 2] += 1.0
            left = _pseudo_best(hist[0], Gt, Ht, Ct, lam, mcw, msl)
            right = _pseudo_best(hist[1], Gt, Ht, Ct, lam, mcw, msl)
            if right > left:
                a = mid
                ia, im = im, ia
            else:
                b = mid
                ib, im = im, ib
            n_steps += 1
        picks[g] = a
        steps[g] = n_steps


@njit(cache=True, error_model="numpy")
def _node_gh(gh, idx, start, end, ghn, tot):
    """The node rows' (w g, w h) into ``ghn`` in node order, and their sums (in that order)
    into ``tot``."""
    G = 0.0
    H = 0.0
    for q in range(end - start):
        i = idx[start + q]
        ghn[q, 0] = gh[i, 0]
        ghn[q, 1] = gh[i, 1]
        G += gh[i, 0]
        H += gh[i, 1]
    tot[0] = G
    tot[1] = H


# ---------------------------------------------------------------------- public
def n_subsets(n_select: int, delta: float) -> int:
    """Number of random subsets: ``ceil(e * s * log(s / delta))`` (Theorem 4.1), 1 if ``s ==
    1``."""
    if n_select == 1:
        return 1
    return int(math.ceil(math.e * n_select * math.log(n_select / delta)))


def subset_size(n_eligible: int, n_select: int) -> int:
    """Features per subset: ``n_eligible / n_select`` rounded half up, within 1..n_eligible
    (``n_eligible`` itself if ``n_select == 1``)."""
    if n_select == 1:
        return n_eligible
    return max(1, min(n_eligible, (2 * n_eligible + n_select) // (2 * n_select)))


def table_block(n_groups: int, group_size: int, n_rows: int, max_table_bytes: int) -> int:
    """Spacing ``B`` of the stored prefix sums: the smallest power of two in 1..MAX_BLOCK for
    which ``table_bytes`` fits in ``max_table_bytes``; ValueError if none does."""
    block = 1
    while block <= MAX_BLOCK:
        if table_bytes(n_groups, group_size, n_rows, block) <= max_table_bytes:
            return block
        block *= 2
    need = table_bytes(n_groups, group_size, n_rows, MAX_BLOCK)
    raise ValueError(
        f"the group-testing prefix-sum table of {n_groups} subsets of {group_size} features "
        f"over {n_rows} rows needs {need} bytes even with block {MAX_BLOCK}, more than "
        f"max_table_bytes={max_table_bytes}"
    )


def table_bytes(n_groups: int, group_size: int, n_rows: int, block: int) -> int:
    """Bytes of the uint32 table ``(n_groups, n_bounds, n_rows)`` with ``n_bounds = ceil(m /
    B)`` (prefix sums at ``k = B, 2B, ...`` and at ``m``)."""
    n_bounds = -(-group_size // block)
    return 4 * n_groups * n_bounds * n_rows


class GroupTester:
    """GT-GBM's group testing over the features ``eligible`` of one binned training matrix.

    The subsets and the prefix-sum table are built here, once; ``candidates`` then runs the
    halving search on the rows of any node (see the module docstring for every definition).
    ``candidates`` spreads its subsets over threads itself and updates ``n_pseudo_histograms``
    and ``last_picks``: call it from one thread at a time.

    Parameters
    ----------
    bins_t : numpy.ndarray
        (p, n) uint8 or uint16, the booster's binned data, feature-major: bin ``b < n_bins[f]``
        is a value bin (ordered), ``n_bins[f]`` the missing bin.
    n_bins : numpy.ndarray
        (p,) int64, value bins per feature.
    eligible : numpy.ndarray
        int64 indices of the features the subsets are drawn from (the numeric ones), distinct.
    n_select : int
        ``s``, the number of features to select (>= 1).
    delta : float
        Failure probability of Theorem 4.1, in (0, 1).
    rng : numpy.random.Generator
        Draws the subsets (``n_groups`` calls of ``rng.permutation(len(eligible))``, in order).
    max_table_bytes : int, default 256 MiB
        Bound on the prefix-sum table; its spacing ``B`` is the smallest power of two in 1..64
        that fits. The standardised matrix (``len(eligible) * n`` bytes) is kept besides
        when ``B > 1``.

    Attributes
    ----------
    n_groups : int
        Number of subsets: ``ceil(e * s * log(s / delta))``, 1 if ``s == 1``, 0 without
        eligible features.
    group_size : int
        ``m``: ``len(eligible) / s`` rounded half up, within ``1..len(eligible)``.
    groups : numpy.ndarray
        (n_groups, m) int64, the subsets' features in their random order.
    block : int
        ``B``, the spacing of the stored prefix sums.
    n_pseudo_histograms : int
        Pseudo-feature histograms built so far (2 per halving step).
    last_picks : numpy.ndarray
        (n_groups,) int64, every subset's candidate at the last ``candidates`` call.

    Raises
    ------
    ValueError
        On invalid ``n_select``/``delta``/``eligible``, or if the table does not fit in
        ``max_table_bytes`` even with ``B = 64``.
    """

    n_groups: int
    group_size: int
    groups: np.ndarray
    block: int
    n_pseudo_histograms: int
    last_picks: np.ndarray

    def __init__(
        self,
        bins_t: np.ndarray,
        n_bins: np.ndarray,
        eligible: np.ndarray,
        n_select: int,
        delta: float,
        rng: np.random.Generator,
        max_table_bytes: int = 256 << 20,
    ) -> None:
        if bins_t.ndim != 2 or bins_t.dtype not in (np.uint8, np.uint16):
            raise ValueError("bins_t must be a (p, n) uint8 or uint16 array")
        p, n = bins_t.shape
        if int(n_select) != n_select or n_select < 1:
            raise ValueError(f"n_select must be a positive integer, got {n_select!r}")
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        eligible = np.asarray(eligible, dtype=np.int64).ravel()
        if eligible.size and (eligible.min() < 0 or eligible.max() >= p):
            raise ValueError(f"eligible features must be in 0..{p - 1}")
        if np.unique(eligible).size != eligible.size:
            raise ValueError("eligible features must be distinct")
        n_select = int(n_select)
        d = eligible.size
        self.n_pseudo_histograms = 0
        self.last_picks = np.empty(0, dtype=np.int64)
        self.n_groups = n_subsets(n_select, delta) if d else 0
        self.group_size = subset_size(d, n_select) if d else 0
        m = self.group_size
        grp_pos = np.empty((self.n_groups, m), dtype=np.int64)
        for g in range(self.n_groups):
            grp_pos[g] = rng.permutation(d)[:m]
        self._grp_pos = grp_pos
        self.groups = eligible[grp_pos] if d else grp_pos
        self.block = table_block(self.n_groups, m, n, max_table_bytes) if d else 1
        n_bounds = -(-m // self.block)
        self._table = np.empty((self.n_groups, n_bounds, n), dtype=np.uint32)
        self._vals = np.empty((0, 0), dtype=np.uint8)
        if not d:
            return
        if m * 255 >= 2**31:  # prefix sums in int32 scratch; exact bins (``_bin_of``)
            raise ValueError(f"subsets of {m} features overflow the int32 prefix sums")
        bins_t = np.ascontiguousarray(bins_t)
        n_bins = np.ascontiguousarray(n_bins, dtype=np.int64)
        vals = np.empty((d, n), dtype=np.uint8)
        run_chunks(_standardise_chunk, n_chunks(d * n, d, 1), bins_t, n_bins, eligible, vals)
        run_chunks(
            _table_chunk, n_chunks(self.n_groups * m * n, self.n_groups, 1), vals, grp_pos,
            self.block, self._table,
        )  # fmt: skip
        if self.block > 1:
            self._vals = vals

    def candidates(
        self,
        idx: np.ndarray,
        start: int,
        end: int,
        gh: np.ndarray,
        lam: float,
        mcw: float,
        msl: float,
        nch: int | None = None,
    ) -> np.ndarray:
        """Candidate features of the node whose rows are ``idx[start:end]``.

        Parameters
        ----------
        idx : numpy.ndarray
            int32 row indices; the node's rows are ``idx[start:end]``.
        start, end : int
            The node's slice of ``idx``.
        gh : numpy.ndarray
            (n, 2) float64, ``(w g, w h)`` of every row.
        lam : float
            L2 regularisation ``lambda`` of the gain.
        mcw : float
            ``min_child_weight``: least hessian sum of each child of a valid split.
        msl : float
            ``min_samples_leaf``: least rows of each child of a valid split.
        nch : int, optional
            Chunks (of subsets) for ``run_chunks``; by default from the work.

        Returns
        -------
        numpy.ndarray
            The sorted distinct candidate features (int64): the one feature left of each
            subset's halving search.
        """
        if self.n_groups == 0:
            return np.empty(0, dtype=np.int64)
        start = int(start)
        end = int(end)
        if not 0 <= start <= end <= idx.shape[0]:
            raise ValueError(f"node slice {start}:{end} outside idx of {idx.shape[0]} rows")
        cnt = end - start
        idx = np.ascontiguousarray(idx, dtype=np.int32)
        gh = np.ascontiguousarray(gh, dtype=np.float64)
        ghn = np.empty((cnt, 2), dtype=np.float64)
        tot = np.zeros(2, dtype=np.float64)
        _node_gh(gh, idx, start, end, ghn, tot)
        picks = np.zeros(self.n_groups, dtype=np.int64)
        steps = np.zeros(self.n_groups, dtype=np.int64)
        if nch is None:
            work = cnt * self.n_groups * max(1, int(math.log2(max(2, self.group_size))))
            nch = n_chunks(work, self.n_groups)
        run_chunks(
            _search_chunk, nch, self._table, self._vals, self._grp_pos, self.block, idx, start,
            end, ghn, tot, float(lam), float(mcw), float(msl), picks, steps,
        )  # fmt: skip
        self.n_pseudo_histograms += 2 * int(steps.sum())
        self.last_picks = self.groups[np.arange(self.n_groups), picks]
        return np.unique(self.last_picks)
