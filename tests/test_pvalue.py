"""Split-criterion p-values (``treeinner.kernels.pvalue``): exact permutation moments, the Gamma
tail, and calibration of the p-values against simulated permutation nulls.

Calibration: for a fixed node (the feature's bins and the multiset of targets held fixed), the
targets are permuted over the rows ``R`` times and the p-value of each permuted node computed;
under the null these p-values should be uniform. The assertion allows a Kolmogorov-Smirnov
distance from uniform of ``atom + APPROX + 1.63 / sqrt(R)``: ``1.63 / sqrt(R)`` is the 1%
critical value of the KS distance of ``R`` exact uniform draws (sampling error of the check);
``atom`` is the largest probability of a single value of the p-value among the draws (a discrete
statistic, e.g. 0/1 labels in a small node, has atoms, and the CDF of any p-value of it jumps by
that much, so no p-value can be closer to uniform); ``APPROX`` = 0.03 is the approximation error
we accept (a Gamma with the right two moments, or with table moments of a maximum, is not the
exact null). The tail is checked too: P(p <= 0.05) at most 0.05 + atom + 0.02 + 3 s.e.
"""

from __future__ import annotations

import itertools
import math

import numba
import numpy as np
import pytest
from scipy import special

from treeinner.kernels import pvalue as KP

R = 2000  # permutation draws per case
APPROX = 0.03
KS_CRIT = 1.63 / math.sqrt(R)
CARDINALITIES = (2, 5, 10, 50)
NODE_SIZES = (50, 200, 2000)


# ---------------------------------------------------------------------- simulation of the null
# Not cached on disk: Numba's cache of a function is not invalidated when a function it calls in
# another module changes, and these must always test the current kernels.
@numba.njit(cache=False)
def _gain_null(bins, g, h, nb, lam, kind, reps, seed):
    """p-values of the permuted nodes: the (g, h) pairs permuted over the rows."""
    np.random.seed(seed)  # noqa: NPY002 (Numba supports the legacy API only)
    n = g.shape[0]
    out = np.empty(reps)
    G = np.zeros(nb)
    H = np.zeros(nb)
    C = np.zeros(nb)
    scratch = np.zeros((4, nb))
    g2 = 0.0
    g3 = 0.0
    g4 = 0.0
    for i in range(n):
        g2 += g[i] ** 2
        g3 += g[i] ** 3
        g4 += g[i] ** 4
    perm = np.arange(n)
    for r in range(reps):
        np.random.shuffle(perm)  # noqa: NPY002 (Numba supports the legacy API only)
        G[:] = 0.0
        H[:] = 0.0
        C[:] = 0.0
        for i in range(n):
            b = bins[i]
            G[b] += g[perm[i]]
            H[b] += h[perm[i]]
            C[b] += 1.0
        out[r] = math.exp(KP.gain_log_pvalue(G, H, C, nb, g2, g3, g4, lam, kind, scratch))
    return out


@numba.njit(cache=False)
def _gini_null(bins, labels, nb, n_cls, reps, seed):
    """Gini gain p-values of multiway splits with the class labels permuted over the rows."""
    np.random.seed(seed)  # noqa: NPY002 (Numba supports the legacy API only)
    n = labels.shape[0]
    out = np.empty(reps)
    tab = np.zeros((nb, n_cls))
    scratch = np.zeros((2, nb))
    perm = np.arange(n)
    for r in range(reps):
        np.random.shuffle(perm)  # noqa: NPY002 (Numba supports the legacy API only)
        tab[:, :] = 0.0
        for i in range(n):
            tab[bins[i], labels[perm[i]]] += 1.0
        out[r] = math.exp(KP.gini_log_pvalue(tab, scratch))
    return out


def _ks_uniform(p: np.ndarray) -> float:
    x = np.sort(p)
    n = x.size
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - x), np.max(x - (i - 1) / n)))


def _check_uniform(p: np.ndarray, what: str) -> None:
    _, counts = np.unique(np.round(p, 12), return_counts=True)
    atom = counts.max() / p.size
    ks = _ks_uniform(p)
    tol = atom + APPROX + KS_CRIT
    tail = float(np.mean(p <= 0.05))
    tail_tol = 0.05 + atom + 0.02 + 3 * math.sqrt(0.05 * 0.95 / p.size)
    msg = (
        f"{what}: KS distance from uniform {ks:.4f} (tolerance {tol:.4f} = atom {atom:.4f} + "
        f"{APPROX} + {KS_CRIT:.4f}); P(p <= 0.05) = {tail:.4f} (at most {tail_tol:.4f})"
    )
    assert ks <= tol, msg
    assert tail <= tail_tol, msg


def _bins(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Bin codes of ``n`` rows, uniform over ``k`` bins (with n = k = 50, about 32 non-empty
    bins, most of one or two rows); bins 0 and 1 are always non-empty."""
    bins = rng.integers(0, k, n).astype(np.int64)
    bins[:2] = (0, 1)
    return bins


def _node(kind_loss: str, k: int, n: int, rng: np.random.Generator):
    """A node of ``n`` rows over ``k`` bins and its (g, h) pairs."""
    bins = _bins(k, n, rng)
    if kind_loss == "squared":
        y = rng.normal(size=n)
        g = np.full(n, y.mean()) - y  # at the initial prediction (the mean)
        h = np.ones(n)
    else:  # logistic, predictions varying over the rows (a later boosting round)
        F = rng.normal(-0.5, 0.5, size=n)
        p = 1.0 / (1.0 + np.exp(-F))
        y = (rng.random(n) < p).astype(np.float64)
        g = p - y
        h = p * (1.0 - p)
    return bins, g, h


# ---------------------------------------------------------------------- exact pieces
def test_permutation_moments_match_enumeration():
    """perm_moments and gini_moments equal the mean and variance over all 7! permutations."""
    rng = np.random.default_rng(3)
    groups = np.array([0, 0, 1, 1, 1, 2, 2])
    cnt = np.array([2.0, 3.0, 2.0])
    a = np.array([0.3, 0.7, 1.3])
    x = rng.normal(size=7) ** 3  # skewed
    x -= x.mean()
    labels = np.array([0, 0, 1, 2, 2, 2, 1])
    quad = []
    gini = []
    for p in itertools.permutations(range(7)):
        xp = x[list(p)]
        D = np.array([xp[groups == i].sum() for i in range(3)])
        quad.append(float((a * D * D).sum()))
        tab = np.zeros((3, 3))
        np.add.at(tab, (groups, labels[list(p)]), 1.0)
        gini.append(KP.gini_gain(tab))
    S2 = float((x**2).sum())
    m, v = KP.perm_moments(cnt, a, 3, 7.0, S2, float((x**4).sum()), S2 * S2)
    assert m == pytest.approx(np.mean(quad), rel=1e-10)
    assert v == pytest.approx(np.var(quad), rel=1e-9)
    tab = np.zeros((3, 3))
    np.add.at(tab, (groups, labels), 1.0)
    m, v = KP.gini_moments(tab, np.zeros((2, 3)))
    assert m == pytest.approx(np.mean(gini), rel=1e-10)
    assert v == pytest.approx(np.var(gini), rel=1e-9)
    # the paper's mean given the margins: (n - 1)/(N - 1) (1 - sum q_j^2)
    q = tab.sum(axis=0) / 7.0
    assert m == pytest.approx(2.0 / 6.0 * (1.0 - (q**2).sum()), rel=1e-12)


def test_log_gamma_sf_against_scipy():
    for a in (0.05, 0.5, 1.0, 4.5, 40.0, 900.0):
        for x in (1e-3, 0.3, 1.0, 5.0, 40.0, 1000.0):
            ref = special.gammaincc(a, x)
            got = KP.log_gamma_sf(a, x)
            if ref > 1e-300:
                assert got == pytest.approx(math.log(ref), rel=1e-9, abs=1e-12), (a, x)
    # far in the tail, where Q underflows, log Q is finite and keeps decreasing
    assert -1.01e5 < KP.log_gamma_sf(0.5, 1e5) < KP.log_gamma_sf(0.5, 9e4) < -8e4
    assert KP.chi2_log_pvalue(3.841458820694124, 1.0) == pytest.approx(math.log(0.05), rel=1e-9)


def test_two_bins_are_exact_and_kinds_agree():
    """With two bins there is one candidate: every kind gives the same p-value."""
    G = np.array([3.0, -3.0])
    H = np.array([10.0, 12.0])
    C = np.array([10.0, 12.0])
    s = np.zeros((4, 2))
    vals = [KP.gain_log_pvalue(G, H, C, 2, 30.0, 0.5, 80.0, 0.0, kd, s) for kd in range(3)]
    assert vals[0] == pytest.approx(vals[1], rel=1e-12)
    assert vals[0] == pytest.approx(vals[2], rel=1e-12)
    assert vals[0] < 0.0


def test_gain_statistic_matches_definition():
    rng = np.random.default_rng(5)
    G = rng.normal(size=6)
    H = rng.uniform(1, 3, size=6)
    C = np.array([3.0, 0.0, 4.0, 2.0, 5.0, 1.0])
    G[1] = H[1] = 0.0
    lam = 1.0
    Gt, Ht = G.sum(), H.sum()
    par = Gt**2 / (Ht + lam)
    nz = C > 0
    multi = (G[nz] ** 2 / (H[nz] + lam)).sum() - par
    assert KP.gain_statistic(G, H, C, 6, lam, KP.KIND_MULTIWAY) == pytest.approx(multi)
    idx = np.flatnonzero(nz)
    best_ord = max(
        (G[idx[: t + 1]].sum() ** 2 / (H[idx[: t + 1]].sum() + lam))
        + (G[idx[t + 1 :]].sum() ** 2 / (H[idx[t + 1 :]].sum() + lam))
        - par
        for t in range(len(idx) - 1)
    )
    assert KP.gain_statistic(G, H, C, 6, lam, KP.KIND_ORDERED) == pytest.approx(best_ord)
    best_part = -np.inf  # every binary partition of the non-empty categories
    for mask in range(1, 2 ** len(idx) - 1):
        L = [idx[j] for j in range(len(idx)) if mask >> j & 1]
        Rr = [i for i in idx if i not in L]
        v = G[L].sum() ** 2 / (H[L].sum() + lam) + G[Rr].sum() ** 2 / (H[Rr].sum() + lam)
        best_part = max(best_part, v - par)
    got = KP.gain_statistic(G, H, C, 6, lam, KP.KIND_PARTITION)
    assert got <= best_part + 1e-12
    assert got >= best_ord - 1e-12


# ---------------------------------------------------------------------- calibration
@pytest.mark.parametrize("n", NODE_SIZES)
@pytest.mark.parametrize("k", CARDINALITIES)
def test_gini_pvalue_uniform_under_permutation_null(k, n):
    rng = np.random.default_rng(100 * k + n)
    bins = _bins(k, n, rng)
    for n_cls, probs in ((2, [0.5, 0.5]), (3, [0.2, 0.3, 0.5])):
        labels = rng.choice(n_cls, size=n, p=probs).astype(np.int64)
        p = _gini_null(bins, labels, k, n_cls, R, k + n)
        _check_uniform(p, f"gini gain multiway, {k} values, {n} rows, {n_cls} classes")


CASES = [
    (kind, k, n, loss)
    for kind in (KP.KIND_MULTIWAY, KP.KIND_ORDERED, KP.KIND_PARTITION)
    for k in CARDINALITIES
    for n in NODE_SIZES
    for loss in ("squared", "logistic")
    # the best partition's Gamma is calibrated from ~10 rows per category (module docstring)
    if not (kind == KP.KIND_PARTITION and n < 10 * k)
]
KIND_NAMES = {0: "multiway", 1: "ordered", 2: "partition"}


@pytest.mark.parametrize(("kind", "k", "n", "loss"), CASES)
def test_gain_pvalue_uniform_under_permutation_null(kind, k, n, loss):
    rng = np.random.default_rng(7 * k + n + 1000 * kind + (loss == "logistic"))
    bins, g, h = _node(loss, k, n, rng)
    p = _gain_null(bins, g, h, k, 1.0, kind, R, k + n)
    _check_uniform(p, f"second-order gain, {KIND_NAMES[kind]}, {k} bins, {n} rows, {loss}")


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_sparse_partition_is_conservative(loss):
    """Categories of one or two rows (50 categories, 50 rows): the multiway bound is used, which
    may be conservative but never anti-conservative."""
    rng = np.random.default_rng(11)
    bins, g, h = _node(loss, 50, 50, rng)
    p = _gain_null(bins, g, h, 50, 1.0, KP.KIND_PARTITION, R, 3)
    for alpha in (0.01, 0.05, 0.2):
        frac = float(np.mean(p <= alpha))
        assert frac <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / R), (loss, alpha, frac)


def test_pvalue_detects_signal():
    """A feature related to the gradients gets a small p-value; best-of-many is penalised."""
    rng = np.random.default_rng(2)
    n, k = 400, 10
    bins = rng.integers(0, k, n)
    g = rng.normal(size=n) + 0.6 * (bins >= 5)
    g -= g.mean()
    G = np.bincount(bins, g, k)
    C = np.bincount(bins, minlength=k).astype(float)
    s = np.zeros((4, k))
    sums = ((g**2).sum(), (g**3).sum(), (g**4).sum())
    lp_ord = KP.gain_log_pvalue(G, C, C, k, *sums, 0.0, KP.KIND_ORDERED, s)
    assert lp_ord < math.log(1e-6)
    # the same best split offered as the only candidate (two bins) has a smaller p-value
    G2 = np.array([G[:5].sum(), G[5:].sum()])
    C2 = np.array([C[:5].sum(), C[5:].sum()])
    lp_one = KP.gain_log_pvalue(G2, C2, C2, 2, *sums, 0.0, KP.KIND_ORDERED, s)
    assert lp_one < lp_ord


@pytest.mark.parametrize(("k", "partition"), [(10, False), (10, True), (48, False)])
def test_max_tables_reproduce(k, partition):
    """The tabulated moments of the best split equal a fresh Monte Carlo run (another seed)."""
    m, v = KP.max_z2_moments(k, partition, 20000, 12345)
    i = int(np.flatnonzero(KP._TABLE_K == k)[0])
    if partition:
        tm, tv = (k - 1) * KP._PART_MEAN[i], (k - 1) * KP._PART_VAR[i]
    else:
        tm, tv = KP._ORD_MEAN[i], KP._ORD_VAR[i]
    se = math.sqrt(v / 20000)
    assert abs(m - tm) <= 4 * se, (m, tm, se)
    assert v == pytest.approx(tv, rel=0.08)


def test_python_wrappers():
    rng = np.random.default_rng(9)
    codes = rng.integers(0, 6, 300)
    g = rng.normal(size=300) + 0.8 * (codes == 2)
    lp = KP.split_log_pvalue_rows(codes, g, kind="partition", reg_lambda=0.0)
    G = np.bincount(codes, g, 6)
    C = np.bincount(codes, minlength=6).astype(float)
    sums = ((g**2).sum(), (g**3).sum(), (g**4).sum())
    ref = KP.gain_log_pvalue(G, C, C, 6, *sums, 0.0, KP.KIND_PARTITION, np.zeros((4, 6)))
    assert lp == pytest.approx(ref, rel=1e-12)
    assert lp < math.log(0.01)
    labels = (rng.random(300) < 0.3 + 0.2 * (codes == 2)).astype(int)
    tab = np.zeros((6, 2))
    np.add.at(tab, (codes, labels), 1.0)
    assert KP.gini_log_pvalue_rows(codes, labels) == KP.gini_log_pvalue(tab, np.zeros((2, 6)))
    with pytest.raises(ValueError, match="kind must be one of"):
        KP.split_log_pvalue_rows(codes, g, kind="best")
    with pytest.raises(ValueError, match="non-negative integers"):
        KP.split_log_pvalue_rows(codes - 1, g)


@pytest.mark.parametrize("kind", [KP.KIND_ORDERED, KP.KIND_PARTITION])
@pytest.mark.parametrize(("n", "n_pos"), [(200, 10), (2000, 20)])
def test_rare_class_tail_is_valid(kind, n, n_pos):
    """Logistic gradients at the initial prediction with 5% or 1% positives: the children of
    extreme candidates are far from Gaussian; the variance inflation keeps the tail valid
    (possibly conservative, so only the tail is asserted; the KS distance is reported)."""
    rng = np.random.default_rng(n + n_pos + kind)
    bins = _bins(10, n, rng)
    y = np.zeros(n)
    y[rng.choice(n, n_pos, replace=False)] = 1.0
    p = y.mean()
    g = p - y
    h = np.full(n, p * (1.0 - p))
    pv = _gain_null(bins, g, h, 10, 1.0, kind, R, 17)
    ks = _ks_uniform(pv)
    for alpha in (0.01, 0.05):
        frac = float(np.mean(pv <= alpha))
        tol = alpha + 0.01 + 3 * math.sqrt(alpha * (1 - alpha) / R)
        assert frac <= tol, f"P(p <= {alpha}) = {frac:.4f} > {tol:.4f} (KS {ks:.3f})"


def test_degenerate_nodes_give_p_one_or_a_valid_log_p():
    """Constant gradients, a single non-empty bin, and a 10-row node with one positive (whose
    balanced candidates have a null variance of 0) return a log p-value in [-inf, 0], no
    exception (the kernels use NumPy's floating-point error model)."""
    s = np.zeros((4, 5))
    G = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    C = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    for kd in range(3):  # constant g: p = 1
        assert KP.gain_log_pvalue(G, C, C, 5, 2.0, 2.0, 2.0, 1.0, kd, s) == 0.0
    one = np.array([0.0, 0.0, 3.0, 0.0, 0.0])
    for kd in range(3):  # one non-empty bin: no split, p = 1
        assert KP.gain_log_pvalue(one, one, one, 5, 3.0, 3.0, 3.0, 1.0, kd, s) == 0.0
    # 10 rows, one positive (g = 0.1 - y), bins of 2 rows; the positive in bin 0
    cnt = np.full(5, 2.0)
    y1 = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    G = 0.1 * cnt - y1
    H = np.full(5, 0.18)
    g = np.r_[-0.9, np.full(9, 0.1)]
    sums = ((g**2).sum(), (g**3).sum(), (g**4).sum())
    for kd in range(3):
        lp = KP.gain_log_pvalue(G, H, cnt, 5, *sums, 1.0, kd, s)
        assert lp <= 0.0 and not math.isnan(lp), (kd, lp)
