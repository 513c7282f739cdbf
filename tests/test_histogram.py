"""The native booster's Numba kernels (treeinner.kernels.histogram) against plain NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from treeinner.booster._train import bin_data
from treeinner.kernels import histogram as K


# ---------------------------------------------------------------------- binning
def _binning_data(rng: np.random.Generator) -> np.ndarray:
    n = 700
    X = np.empty((n, 6))
    X[:, 0] = rng.standard_normal(n)  # continuous: quantile bins
    X[:, 1] = rng.integers(0, 12, n)  # few values: one bin each
    X[:, 2] = np.where(rng.random(n) < 0.6, 3.0, rng.standard_normal(n))  # a heavy value
    X[:, 3] = 7.5  # constant
    X[:, 4] = np.nan  # all missing
    X[:, 5] = rng.standard_normal(n)
    X[rng.random(n) < 0.2, 5] = np.nan
    return X


@pytest.mark.parametrize("max_bins", [2, 3, 16, 256])
def test_bins_are_upper_bounds_of_training_values(max_bins):
    X = _binning_data(np.random.default_rng(0))
    b = bin_data(X, max_bins)
    assert b.bins.dtype == np.uint8
    np.testing.assert_array_equal(b.bins, b.bins_t.T)
    for f in range(X.shape[1]):
        x = X[:, f]
        ok = ~np.isnan(x)
        nb = b.n_bins[f]
        cuts = b.cuts[f, :nb]
        assert nb <= max_bins - 1
        assert np.all(b.bins[~ok, f] == nb)  # missing bin
        if not ok.any():
            assert nb == 0
            continue
        assert np.all(np.diff(cuts) > 0)
        assert np.all(np.isin(cuts, x[ok]))  # every bound is a training value
        assert cuts[-1] == x[ok].max()
        ref = np.searchsorted(cuts, x[ok], side="left")  # x <= cuts[bin], > cuts[bin - 1]
        np.testing.assert_array_equal(b.bins[ok, f], ref)
        distinct = np.unique(x[ok])
        if distinct.size <= max_bins - 1:
            np.testing.assert_array_equal(cuts, distinct)  # one bin per value
        else:
            assert nb >= 0.7 * (max_bins - 1)  # quantile bins use most of the budget
    # quantile bins hold similar numbers of rows
    b = bin_data(X, 16)
    counts = np.bincount(b.bins[:, 0], minlength=15)[:15]
    assert counts.min() >= 0.5 * counts.mean() and counts.max() <= 1.5 * counts.mean()
    # the heavy value of feature 2 gets one bin of its own
    assert 3.0 in b.cuts[2, : b.n_bins[2]]


def test_binning_chunks_agree():
    """Cuts and bins spread over several chunks (threads) equal those of one chunk."""
    X = _binning_data(np.random.default_rng(7))
    n, p = X.shape
    out = []
    for nch in (1, 4):
        cuts = np.zeros((p, 15))
        n_bins = np.zeros(p, dtype=np.int64)
        K.find_cuts(X, 15, cuts, n_bins, nch)
        bins = np.empty((n, p), dtype=np.uint8)
        bins_t = np.empty((p, n), dtype=np.uint8)
        K.apply_bins(X, cuts, n_bins, bins, bins_t, nch)
        out.append((cuts, n_bins, bins, bins_t))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_more_than_256_bins_use_uint16():
    x = np.arange(1000.0)[:, None]
    b = bin_data(x, 1000)
    assert b.bins.dtype == np.uint16 and b.n_bins[0] == 999
    assert np.all(np.isin(b.cuts[0, :999], x))


# ---------------------------------------------------------------------- histograms
def _layout(n_bins: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    nbp = n_bins + 1
    off = np.zeros(n_bins.shape[0], dtype=np.int64)
    off[1:] = np.cumsum(nbp)[:-1]
    return off, nbp.astype(np.int64), int(nbp.sum())


@pytest.mark.parametrize("S", [2, 3])
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("parallel", [True, False])
def test_histograms_equal_numpy(S, contiguous, parallel):
    rng = np.random.default_rng(1)
    n, p = 500, 7
    n_bins = rng.integers(1, 30, p).astype(np.int64)
    bins = np.stack([rng.integers(0, nb + 1, n) for nb in n_bins], axis=1).astype(np.uint8)
    gh = rng.standard_normal((n, 2))
    off, nbp, n_hbins = _layout(n_bins)
    idx = np.sort(rng.choice(n, 300, replace=False)).astype(np.int32)
    # two nodes: one with three parts, one inside it with an empty part
    bounds = np.array([[0, 120, 200, 300], [30, 90, 90, 150]], dtype=np.int64)
    feats = np.arange(p, dtype=np.int64) if contiguous else np.array([0, 2, 3, 6], np.int64)
    # two chunks of features (spread over threads), or one (on the calling thread)
    fblock = np.array([0, 2, feats.shape[0]] if parallel else [0, feats.shape[0]], dtype=np.int64)
    n_hparts = 3
    slot_size = n_hparts * n_hbins * S
    pool = np.full(4 * slot_size, np.nan)
    slots = np.array([2, 0], dtype=np.int64)
    K.build_histograms(
        bins, gh, idx, bounds, n_hparts, feats, fblock, off, nbp, pool, slots, n_hbins, S
    )
    for j in range(2):
        for r in range(n_hparts):
            rows = idx[bounds[j, r] : bounds[j, r + 1]]
            for f in feats:
                ref = np.zeros((n_bins[f] + 1, S))
                np.add.at(ref[:, 0], bins[rows, f], gh[rows, 0])
                np.add.at(ref[:, 1], bins[rows, f], gh[rows, 1])
                if S == 3:
                    np.add.at(ref[:, 2], bins[rows, f], 1.0)
                start = slots[j] * slot_size + (r * n_hbins + off[f]) * S
                got = pool[start : start + (n_bins[f] + 1) * S].reshape(-1, S)
                np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # subtraction: slot 2 (node 0) minus slot 0 (node 1), in slot 2
    before = pool.copy()
    K.subtract_histograms(pool, np.array([2]), np.array([0]), slot_size)
    a, b = 2 * slot_size, 0
    for f in feats:
        for r in range(n_hparts):
            o = (r * n_hbins + off[f]) * S
            sl = slice(o, o + (n_bins[f] + 1) * S)
            np.testing.assert_allclose(
                pool[a:][sl], before[a:][sl] - before[b:][sl], rtol=0, atol=1e-12
            )


@pytest.mark.parametrize("nblocks", [1, 2])
def test_histograms_with_subtraction(nblocks):
    """build_histograms(..., sub_parent, sub_small): the larger child's histogram (its
    parent's slot minus the smaller child's) for the features built, as subtract_histograms."""
    rng = np.random.default_rng(11)
    n, p, S, n_hparts = 300, 6, 3, 2
    n_bins = rng.integers(1, 20, p).astype(np.int64)
    bins = np.stack([rng.integers(0, nb + 1, n) for nb in n_bins], axis=1).astype(np.uint8)
    gh = rng.standard_normal((n, 2))
    off, nbp, n_hbins = _layout(n_bins)
    idx = rng.permutation(n).astype(np.int32)
    feats = np.array([0, 1, 3, 4], dtype=np.int64)
    fblock = np.round(np.linspace(0, feats.shape[0], nblocks + 1)).astype(np.int64)
    slot_size = n_hparts * n_hbins * S
    pool = np.zeros(3 * slot_size)
    parent = np.array([[0, 200, 300]], dtype=np.int64)
    small = np.array([[20, 90, 130]], dtype=np.int64)

    def build(pool, bounds, slot, *sub):
        K.build_histograms(
            bins, gh, idx, bounds, n_hparts, feats, fblock, off, nbp, pool, np.array([slot]),
            n_hbins, S, *sub,
        )  # fmt: skip

    build(pool, parent, 2)
    expected = pool.copy()
    build(expected, small, 0)
    K.subtract_histograms(expected, np.array([2]), np.array([0]), slot_size)
    build(pool, small, 0, np.array([2]), np.array([0]))
    for r in range(n_hparts):
        for f in feats:
            o = (r * n_hbins + off[f]) * S
            sl = slice(o, o + nbp[f] * S)
            np.testing.assert_array_equal(pool[2 * slot_size :][sl], expected[2 * slot_size :][sl])
            np.testing.assert_array_equal(pool[:slot_size][sl], expected[:slot_size][sl])


# ---------------------------------------------------------------------- partition
@pytest.mark.parametrize("parallel", [True, False])
def test_partition_is_stable_and_keeps_parts(parallel):
    rng = np.random.default_rng(2)
    n, p = 400, 3
    bins_t = rng.integers(0, 11, size=(p, n)).astype(np.uint8)  # bin 10: missing
    idx = rng.permutation(n).astype(np.int32)
    tmp = np.empty(n, dtype=np.int32)
    bounds = np.array([[0, 100, 150, 200], [200, 260, 300, 400]], dtype=np.int64)
    feature = np.array([1, 2])
    thr = np.array([4, 0])
    dl = np.array([1, 0])
    miss = np.array([10, 10])
    before = idx.copy()
    cb = np.empty((2, 2, 4), dtype=np.int64)
    K.partition(bins_t, idx, tmp, bounds, feature, thr, dl, miss, cb, 2 if parallel else 1)
    for j in range(2):
        exp_left, exp_right, lb, rb = [], [], [bounds[j, 0]], []
        for r in range(3):
            rows = before[bounds[j, r] : bounds[j, r + 1]]
            b = bins_t[feature[j], rows]
            go = np.where(b == miss[j], dl[j] == 1, b <= thr[j])
            exp_left.append(rows[go])
            exp_right.append(rows[~go])
        left = np.concatenate(exp_left)
        right = np.concatenate(exp_right)
        s = bounds[j, 0]
        np.testing.assert_array_equal(idx[s : s + left.size], left)
        np.testing.assert_array_equal(idx[s + left.size : bounds[j, 3]], right)
        lb = s + np.concatenate([[0], np.cumsum([a.size for a in exp_left])])
        rb = s + left.size + np.concatenate([[0], np.cumsum([a.size for a in exp_right])])
        np.testing.assert_array_equal(cb[j, 0], lb)
        np.testing.assert_array_equal(cb[j, 1], rb)


# ---------------------------------------------------------------------- split finding
def _reference_split(hist, tot, lam, mcw, msl, unbiased):
    """Brute force over one feature's per-part histograms ``hist[r, b, c]`` (last bin missing)
    with node totals ``tot[r, c]``: the candidates in the kernels' order, the first best by
    gain on part 0."""
    P, nbp, _ = hist.shape
    nb = nbp - 1
    prefix = np.cumsum(hist[:, :nb], axis=1)
    has_miss = bool(np.any(hist[:, nb, 2] > 0))
    nonempty = np.flatnonzero(np.any(hist[:, :nb, 2] > 0, axis=0))
    if nonempty.size == 0:
        return None
    last = int(nonempty[-1])
    cands = [(b, False) for b in range(last)]
    if has_miss:
        cands += [(last, False)] + [(b, True) for b in range(last)]
    best, arg = -np.inf, None
    for b, left_missing in cands:
        L = prefix[:, b] + (hist[:, nb] if left_missing else 0.0)
        R = tot - L
        parts = range(P) if unbiased else range(1)
        ok = all(
            L[r, 1] >= mcw
            and R[r, 1] >= mcw
            and L[r, 1] > 0
            and R[r, 1] > 0
            and L[r, 2] >= msl
            and R[r, 2] >= msl
            for r in parts
        )
        if not ok:
            continue
        g = L[0, 0] ** 2 / (L[0, 1] + lam) + R[0, 0] ** 2 / (R[0, 1] + lam)
        if g > best:
            best, arg = g, (b, left_missing, L, R)
    if arg is None:
        return None
    b, left_missing, L, R = arg
    gain = best - tot[0, 0] ** 2 / (tot[0, 1] + lam)
    if not has_miss:
        left_missing = L[0, 1] >= R[0, 1]
    out = {"bin": b, "default_left": left_missing, "gain": gain}
    if unbiased:

        def ub(train_L, train_R, train_t, q):
            rho = (L[q, 0] / L[q, 1], R[q, 0] / R[q, 1], tot[q, 0] / tot[q, 1])
            return train_L * rho[0] + train_R * rho[1] - train_t * rho[2]

        out["score2"] = ub(L[0, 0], R[0, 0], tot[0, 0], 1)
        if P == 3:
            out["score3"] = ub(L[0, 0] + L[1, 0], R[0, 0] + R[1, 0], tot[0, 0] + tot[1, 0], 2)
        else:
            out["score3"] = out["score2"]
    return out


@pytest.mark.parametrize("nch", [None, 4])
@pytest.mark.parametrize("unbiased,P", [(False, 1), (True, 3), (True, 2)])
def test_find_splits_equals_brute_force(unbiased, P, nch):
    rng = np.random.default_rng(3)
    lam, mcw, msl = 0.7, 0.2, 1.0
    n_feat = 6
    S = 3
    checked = 0
    for trial in range(30):
        n = int(rng.integers(6, 80))
        n_bins = rng.integers(1, 12, n_feat).astype(np.int64)
        off, nbp, n_hbins = _layout(n_bins)
        part = rng.integers(0, P, n)
        g = rng.normal(0.3, 1.0, n)
        h = rng.uniform(0.2, 1.5, n)
        pool = np.zeros(P * n_hbins * S)
        hists = []
        for f in range(n_feat):
            b = rng.integers(0, n_bins[f], n)
            if (trial + f) % 3:
                b[rng.random(n) < 0.15] = n_bins[f]  # missing values
            hist = np.zeros((P, n_bins[f] + 1, 3))
            np.add.at(hist, (part, b, 0), g)
            np.add.at(hist, (part, b, 1), h)
            np.add.at(hist, (part, b, 2), 1.0)
            hists.append(hist)
            for r in range(P):
                start = (r * n_hbins + off[f]) * S
                pool[start : start + nbp[f] * S] = hist[r].ravel()
        feats = np.arange(n_feat, dtype=np.int64)
        totals = np.empty((1, P, 3))
        res_i = np.empty((1, K.N_IRES), dtype=np.int64)
        res_f = np.empty((1, K.N_FRES))
        K.find_splits(
            pool,
            np.array([0]),
            totals,
            P,
            n_hbins,
            S,
            feats,
            off,
            n_bins,
            lam,
            mcw,
            msl,
            unbiased,
            res_i,
            res_f,
            nch,
        )
        np.testing.assert_allclose(totals[0], hists[0].sum(axis=1), rtol=1e-12)
        # the kernel sums the node totals from the first feature's histogram
        refs = {f: _reference_split(hists[f], totals[0], lam, mcw, msl, unbiased) for f in feats}
        key = "score2" if unbiased else "gain"
        valid = {f: r for f, r in refs.items() if r is not None}
        if not valid:
            assert res_i[0, K.R_FEATURE] == -1
            continue
        checked += 1
        best_f = max(valid, key=lambda f: (valid[f][key], -f))
        ref = valid[best_f]
        assert res_i[0, K.R_FEATURE] == best_f
        assert res_i[0, K.R_BIN] == ref["bin"]
        assert res_i[0, K.R_DEFAULT_LEFT] == int(ref["default_left"])
        np.testing.assert_allclose(res_f[0, K.R_GAIN], ref["gain"], rtol=1e-9, atol=1e-9)
        if unbiased:
            np.testing.assert_allclose(res_f[0, K.R_SCORE2], ref["score2"], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(res_f[0, K.R_SCORE3], ref["score3"], rtol=1e-9, atol=1e-9)
    assert checked >= 10


def test_gain_mode_without_counts_skips_empty_sides():
    """S = 2 (no count channel): candidates leaving a side empty are never taken."""
    n_bins = np.array([4], dtype=np.int64)
    off, nbp, n_hbins = _layout(n_bins)
    hist = np.zeros((5, 2))
    hist[1] = [-3.0, 2.0]
    hist[2] = [4.0, 1.0]  # bins 0, 3 and missing are empty
    pool = hist.ravel().copy()
    res_i = np.empty((1, K.N_IRES), dtype=np.int64)
    res_f = np.empty((1, K.N_FRES))
    K.find_splits(
        pool,
        np.array([0]),
        np.empty((1, 1, 3)),
        1,
        n_hbins,
        2,
        np.array([0]),
        off,
        n_bins,
        0.0,
        0.0,
        1.0,
        False,
        res_i,
        res_f,
    )
    assert res_i[0, K.R_BIN] == 1  # the only split with rows on both sides
    np.testing.assert_allclose(res_f[0, K.R_GAIN], 9 / 2 + 16 - 1 / 3)
    assert res_i[0, K.R_DEFAULT_LEFT] == 1  # no missing rows: the side with more hessian


@pytest.mark.parametrize("parallel", [True, False])
def test_finish_leaves(parallel):
    rng = np.random.default_rng(4)
    gh = rng.standard_normal((50, 2))
    gh[:, 1] = np.abs(gh[:, 1])
    idx = rng.permutation(50).astype(np.int32)
    starts = np.array([0, 10, 30])
    ends = np.array([10, 30, 50])
    sums = np.empty((3, 3))
    values = np.empty(3)
    F = np.ones((50, 2))
    K.finish_leaves(gh, idx, starts, ends, 0.3, 1.5, F, 1, sums, values, 3 if parallel else 1)
    for j in range(3):
        rows = idx[starts[j] : ends[j]]
        G, H = gh[rows, 0].sum(), gh[rows, 1].sum()
        np.testing.assert_allclose(sums[j], [G, H, rows.size], rtol=1e-12)
        np.testing.assert_allclose(values[j], -0.3 * G / (H + 1.5), rtol=1e-12)
        np.testing.assert_allclose(F[rows, 1], 1.0 + values[j], rtol=1e-12)
    assert np.all(F[:, 0] == 1.0)


@pytest.mark.parametrize("parallel", [True, False])
def test_gradients_and_eval_routing(parallel):
    rng = np.random.default_rng(6)
    F = rng.standard_normal((40, 3))
    y = rng.integers(0, 3, 40).astype(float)
    w = rng.uniform(0.5, 2.0, 40)
    gh = np.empty((3, 40, 2))
    prm = np.zeros(7)
    prm[0] = 2.0  # XGBoost's softmax hessian scale
    prm[5] = 1e-16
    K.round_gradients(2, prm, y, w, F, gh, 2 if parallel else 1)
    p = np.exp(F) / np.exp(F).sum(axis=1, keepdims=True)
    g = p - (np.arange(3)[None, :] == y[:, None])
    np.testing.assert_allclose(gh[:, :, 0].T, w[:, None] * g, rtol=1e-12)
    np.testing.assert_allclose(gh[:, :, 1].T, w[:, None] * 2 * p * (1 - p), rtol=1e-12)
    # a stump on feature 1 at 0.0, NaN to the left
    X = rng.standard_normal((40, 2))
    X[::5, 1] = np.nan
    left = np.array([1, -1, -1], dtype=np.int32)
    right = np.array([2, -1, -1], dtype=np.int32)
    out = np.zeros((40, 2))
    K.add_tree(
        X,
        left,
        right,
        np.array([1, -1, -1], np.int32),
        np.array([0.0, np.nan, np.nan]),
        np.array([1, 0, 0], np.uint8),
        np.array([0.0, -1.0, 2.0]),
        out,
        1,
        2 if parallel else 1,
    )
    expected = np.where(np.isnan(X[:, 1]) | (X[:, 1] <= 0.0), -1.0, 2.0)
    np.testing.assert_array_equal(out[:, 1], expected)
    assert np.all(out[:, 0] == 0)
