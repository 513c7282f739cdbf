"""Numba kernels: split criteria and their p-values under the permutation null (Dobra and
Gehrke 2001).

A split criterion prefers features with many distinct values even when no feature is related to
the target (Dobra and Gehrke 2001). Splitting on the p-value of the criterion
under the null "the feature is independent of the target in this node" instead of on its value
removes that bias. This module computes those p-values with Gamma approximations whose mean and
variance are exact (multiway splits) or account for the number of candidate splits (the best
threshold over ordered bins, the best binary partition of categories).

The null
--------
Conditional on the node: the rows' targets (class labels, or (g, h) pairs) are permuted at random
over the rows, the feature's values (their per-bin counts) held fixed. Under the paper's null
(labels drawn i.i.d. independently of X) this is the distribution given the margins, so a
p-value valid under it is valid under the paper's null too.

Exact moments of a multiway statistic
-------------------------------------
For rows ``r = 1..N`` with vectors ``x_r`` (a one-hot class minus the class shares, or a scalar
gradient minus its node mean; ``sum_r x_r = 0``) and groups ``i`` (the bins) of ``N_i`` rows with
weights ``a_i``, the statistic

    B = sum_i a_i ||D_i||^2,   D_i = sum of x over the rows of group i

is a quadratic form ``sum_{r,s} W_rs <x_pi(r), x_pi(s)>`` (``W`` block-diagonal, ``a_i`` on the
block of group i) of a uniformly random permutation ``pi``. Its first two moments are exact
functions of ``A_v = sum_i a_i N_i^v`` (v = 1, 2), ``C_v = sum_i a_i^2 N_i^v`` (v = 1, 2, 3) and
three sums of the data: ``S2 = sum_r ||x_r||^2``, ``S4 = sum_r ||x_r||^4`` and
``T = sum_{r,s} <x_r, x_s>^2`` (``T = S2^2`` for scalars). They are obtained by grouping the index
tuples of ``E[B^2] = sum W_rs W_tu E[<x_pi(r), x_pi(s)> <x_pi(t), x_pi(u)>]`` by their pattern of
equal indices (the 15 partitions of four positions): a tuple of ``b`` distinct values maps to a
uniformly random tuple of ``b`` distinct rows, so ``E[B^2] = sum_P w_P m_P / N_(b(P))`` with
``w_P``, ``m_P`` the sums over index tuples with exactly pattern P (Moebius inversion on the
partition lattice of the unrestricted sums, which factor over the connected components of the
two edges (r, s), (t, u)) and ``N_(b) = N (N - 1) ... (N - b + 1)``. The coefficients are
``_second_moment`` below; ``E[B] = S2 (A_1 / N - (A_2 - A_1) / (N (N - 1)))``. With ``a_i = 1/N_i``
(gini gain: ``B = N Delta g``) ``E[Delta g] = (n - 1)/(N - 1) (1 - sum_j q_j^2)`` with ``q_j`` the
observed class shares, the paper's ``(n - 1)/N (1 - sum p_j^2)`` given the margins.

The best of many candidate splits
---------------------------------
The gain of the best threshold (or binary partition) is a maximum of correlated statistics, whose
moments have no closed form. In the large-sample limit each candidate's statistic divided by its
null mean is ``Z_t^2`` for a standard normal ``Z_t``; over ordered thresholds the ``Z_t`` form a
Gaussian Markov chain (a standardized Brownian bridge at the cut points ``u_t``, correlation
``rho_t = sqrt(u_t (1 - u_{t+1}) / (u_{t+1} (1 - u_t)))`` between neighbours), whose maximum's
distribution is governed by the length ``Theta = sum_t arccos(rho_t)`` of its path on the unit
sphere (Hotelling's tube formula). ``_ORD_*`` tabulate the mean and variance of ``max_t Z_t^2``
(Monte Carlo, 4e5 trials for k <= 64 bins, 1e5 to k = 256, 4e4 beyond) for k equal bins against
their ``Theta``; a node's candidates are looked up by their own ``Theta`` (unequal bins, empty
bins dropped). ``_PART_*`` tabulate the same for the best binary partition of k equal categories
(categories sorted by their mean gradient, which is the optimal partition of a between-group sum
of squares, Breiman et al. 1984), looked up by the number of non-empty categories. Each
candidate's statistic is divided by its exact null mean, so the statistic of the best split is
``max_t Z_t^2`` itself, and its Gamma has mean ``m`` and variance ``v r`` from the table, with
``r`` a finite-sample correction (1 in the limit): ordered, ``r_bal``, the exact null variance
of the most balanced candidate's ``Z_t^2`` over 2; partition, the exact null variance of the
multiway sum of squares over ``2 (k - 1)`` (which carries the finite-population shrinkage of a
between-group sum of squares, Beta rather than chi-square). Where the targets are skewed (rare
classes) the extreme candidates, with small children, have ``r_t`` well above ``r_bal`` and
dominate the tail of the maximum: the p-value is then the larger of the Gamma tails with ``r``
and with ``r max_t r_t / r_bal`` (the first fits the bulk, the second keeps the tail valid). With
two bins (one candidate) the moments are exact. The Gamma of the best
partition is calibrated where the categories hold about 10 rows or more on average; with fewer
than 2 the kernel returns the conservative multiway bound instead (``gain_log_pvalue``).

Every function is ``@njit(cache=True, error_model="numpy")`` (a degenerate node gives NaN
moments and p = 1, never an exception) with float64 arrays; nothing allocates per row (a few
small arrays per call at most, listed in the docstrings).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

KIND_MULTIWAY = 0  # every non-empty bin its own child (fixed partition)
KIND_ORDERED = 1  # best threshold over the bins in their order
KIND_PARTITION = 2  # best binary partition of the bins (categories), sorted by mean gradient

_TINY = 1e-300
# KIND_PARTITION with fewer rows than this per non-empty category on average: the conservative
# multiway bound instead of the Gamma of the best partition (which is anti-conservative there)
_SPARSE_ROWS = 2.0

# Moments of max_t Z_t^2 (see the module docstring), Monte Carlo with standard normal bin sums.
# fmt: off
# ordered thresholds: k equal bins; x = log(1 + Theta(k)), mean and variance of max_t Z_t^2
_ORD_X = np.array(
    [
        0.000000, 0.716472, 1.068371, 1.298704, 1.468554, 1.602425, 1.712543, 1.886689,
        2.021467, 2.131082, 2.223274, 2.372436, 2.490412, 2.587814, 2.670653, 2.806288,
        2.914829, 3.082548, 3.210081, 3.312856, 3.472770, 3.595159, 3.694228, 3.849064,
        4.064680, 4.216122, 4.427795, 4.576927,
    ]
)
_ORD_MEAN = np.array(
    [
        1.00000, 1.55035, 1.91060, 2.17600, 2.38357, 2.55755, 2.69561, 2.91315, 3.09170,
        3.23180, 3.35347, 3.54259, 3.68792, 3.81048, 3.90181, 4.07387, 4.19503, 4.38367,
        4.52062, 4.63145, 4.79175, 4.91214, 5.01665, 5.16497, 5.33993, 5.45769, 5.63629,
        5.75467,
    ]
)
_ORD_VAR = np.array(
    [
        2.00000, 2.78497, 3.25253, 3.54831, 3.80443, 4.00657, 4.15014, 4.34106, 4.57361,
        4.71667, 4.84804, 5.04333, 5.16469, 5.26366, 5.36346, 5.58239, 5.66665, 5.83054,
        6.02253, 6.05228, 6.14118, 6.18915, 6.29920, 6.48321, 6.56680, 6.56013, 6.70326,
        6.90716,
    ]
)
# binary partitions of k equal categories; x = log k, mean and variance over (k - 1)
_PART_X = np.array(
    [
        0.693147, 1.098612, 1.386294, 1.609438, 1.791759, 1.945910, 2.079442, 2.302585,
        2.484907, 2.639057, 2.772589, 2.995732, 3.178054, 3.332205, 3.465736, 3.688879,
        3.871201, 4.158883, 4.382027, 4.564348, 4.852030, 5.075174, 5.257495, 5.545177,
        5.950643, 6.238325, 6.643790, 6.931472,
    ]
)
_PART_MEAN = np.array(
    [
        1.00000, 0.91275, 0.85811, 0.81998, 0.79445, 0.77621, 0.75759, 0.73468, 0.71846,
        0.70734, 0.69844, 0.68522, 0.67807, 0.67152, 0.66732, 0.66103, 0.65708, 0.65213,
        0.64860, 0.64692, 0.64354, 0.64258, 0.64201, 0.64066, 0.63935, 0.63895, 0.63789,
        0.63779,
    ]
)
_PART_VAR = np.array(
    [
        2.00000, 1.69339, 1.51180, 1.38874, 1.30984, 1.26154, 1.20259, 1.14806, 1.10364,
        1.07751, 1.05847, 1.03039, 1.01082, 0.99491, 0.99099, 0.97231, 0.96445, 0.95693,
        0.94515, 0.94355, 0.94012, 0.93316, 0.93543, 0.94136, 0.93232, 0.93095, 0.93083,
        0.92314,
    ]
)
_TABLE_K = np.array(  # k of each table entry
    [
        2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0,
        48.0, 64.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0,
    ]
)
# fmt: on


# ---------------------------------------------------------------------- Gamma tail
@njit(cache=True, error_model="numpy")
def log_gamma_sf(a: float, x: float) -> float:
    """log of the regularized upper incomplete gamma function Q(a, x) = P(Gamma(a, 1) > x).

    Series for P(a, x) where x < a + 1 (then Q = 1 - P), Lentz's continued fraction for Q
    itself otherwise, so that log Q stays finite far into the tail (no underflow)."""
    if not (x > 0.0):
        return 0.0
    if not (a > 0.0):
        return -np.inf
    log_pre = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = 1.0 / a
        total = term
        ap = a
        for _ in range(10000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        p = math.exp(log_pre) * total
        if p >= 1.0:
            return -np.inf
        return math.log1p(-p)
    b = x + 1.0 - a
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < 1e-300:
            d = 1e-300
        c = b + an / c
        if abs(c) < 1e-300:
            c = 1e-300
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return log_pre + math.log(h)


@njit(cache=True, error_model="numpy")
def gamma_log_pvalue(stat: float, mean: float, var: float) -> float:
    """log P(X >= stat) for X ~ Gamma with the given mean and variance (shape mean^2/var,
    scale var/mean): ``log Q(mean^2/var, stat mean/var)``. 0 where the null is degenerate
    (mean or variance not positive)."""
    if not (mean > 0.0) or not (var > 0.0):
        return 0.0
    return log_gamma_sf(mean * mean / var, stat * mean / var)


@njit(cache=True, error_model="numpy")
def chi2_log_pvalue(stat: float, df: float) -> float:
    """log P(chi^2_df >= stat) (= log Q(df/2, stat/2))."""
    if not (df > 0.0):
        return 0.0
    return log_gamma_sf(0.5 * df, 0.5 * stat)


# ---------------------------------------------------------------------- exact moments
@njit(cache=True, error_model="numpy")
def _second_moment(A1, A2, C1, C2, C3, N, S2, S4, T):
    """E[B^2] of the module docstring: sum over the number b of distinct indices of the
    pattern sums (coefficients from the Moebius inversion) over N (N - 1) ... (N - b + 1)."""
    AA = A1 * A1
    AB = A1 * A2
    BB = A2 * A2
    SS = S2 * S2
    m1 = C1 * S4
    m2 = AA * (SS - S4) - C1 * SS + 7.0 * C1 * S4 - 2.0 * C1 * T - 6.0 * C2 * S4 + 2.0 * C2 * T
    m3 = (
        AA * (2.0 * SS - 4.0 * S4)
        + AB * (-2.0 * SS + 4.0 * S4)
        + C1 * (-4.0 * SS + 24.0 * S4 - 8.0 * T)
        + C2 * (4.0 * SS - 32.0 * S4 + 12.0 * T)
        + C3 * (8.0 * S4 - 4.0 * T)
    )
    m4 = (
        (AA - 2.0 * AB + BB) * (SS - 6.0 * S4 + 2.0 * T)
        + C1 * (-6.0 * SS + 36.0 * S4 - 12.0 * T)
        + C2 * (10.0 * SS - 60.0 * S4 + 20.0 * T)
        + C3 * (-4.0 * SS + 24.0 * S4 - 8.0 * T)
    )
    out = m1 / N
    if N >= 2.0:
        out += m2 / (N * (N - 1.0))
    if N >= 3.0:
        out += m3 / (N * (N - 1.0) * (N - 2.0))
    if N >= 4.0:
        out += m4 / (N * (N - 1.0) * (N - 2.0) * (N - 3.0))
    return out


@njit(cache=True, error_model="numpy")
def perm_moments(
    cnt: np.ndarray, a: np.ndarray, k: int, N: float, S2: float, S4: float, T: float
) -> tuple[float, float]:
    """Exact mean and variance of ``B = sum_i a_i ||D_i||^2`` under a random permutation of the
    rows (module docstring), for the ``k`` groups of sizes ``cnt[:k]`` and weights ``a[:k]``
    (which must sum to ``N`` rows), and the data sums ``S2``, ``S4``, ``T`` of centered
    values."""
    A1 = 0.0
    A2 = 0.0
    C1 = 0.0
    C2 = 0.0
    C3 = 0.0
    for i in range(k):
        n = cnt[i]
        w = a[i]
        A1 += w * n
        A2 += w * n * n
        C1 += w * w * n
        C2 += w * w * n * n
        C3 += w * w * n * n * n
    if N < 2.0:
        return 0.0, 0.0
    mean = S2 * (A1 / N - (A2 - A1) / (N * (N - 1.0)))
    var = _second_moment(A1, A2, C1, C2, C3, N, S2, S4, T) - mean * mean
    return mean, max(var, 0.0)


# ---------------------------------------------------------------------- gini gain
@njit(cache=True, error_model="numpy")
def gini_gain(table: np.ndarray) -> float:
    """Gini gain of a multiway split, ``sum_i P[x_i] sum_j P[c_j | x_i]^2 - sum_j P[c_j]^2``,
    from the contingency table ``table[i, j]`` (value i, class j; counts, float64)."""
    n_val, n_cls = table.shape
    N = 0.0
    within = 0.0
    for i in range(n_val):
        ni = 0.0
        sq = 0.0
        for j in range(n_cls):
            ni += table[i, j]
            sq += table[i, j] * table[i, j]
        N += ni
        if ni > 0.0:
            within += sq / ni
    if N <= 0.0:
        return 0.0
    q2 = 0.0
    for j in range(n_cls):
        s = 0.0
        for i in range(n_val):
            s += table[i, j]
        q2 += s * s
    return within / N - q2 / (N * N)


@njit(cache=True, error_model="numpy")
def gini_moments(table: np.ndarray, scratch: np.ndarray) -> tuple[float, float]:
    """Exact mean and variance of the gini gain of a multiway split of the table's rows (its
    non-empty values) when the class labels are permuted over the rows. ``scratch``: (2, n_val)
    float64."""
    n_val, n_cls = table.shape
    k = 0
    N = 0.0
    for i in range(n_val):
        ni = 0.0
        for j in range(n_cls):
            ni += table[i, j]
        if ni > 0.0:
            scratch[0, k] = ni
            scratch[1, k] = 1.0 / ni
            k += 1
            N += ni
    if k < 2 or N < 2.0:
        return 0.0, 0.0
    # x_r = onehot(class) - q: S2 = N (1 - Q2), S4 = sum_j S_j ||e_j - q||^4,
    # T = N^2 ||diag(q) - q q'||^2
    q2 = 0.0
    q3 = 0.0
    for j in range(n_cls):
        s = 0.0
        for i in range(n_val):
            s += table[i, j]
        q = s / N
        q2 += q * q
        q3 += q * q * q
    S2 = N * (1.0 - q2)
    S4 = 0.0
    for j in range(n_cls):
        s = 0.0
        for i in range(n_val):
            s += table[i, j]
        d = 1.0 - 2.0 * s / N + q2
        S4 += s * d * d
    T = N * N * (q2 - 2.0 * q3 + q2 * q2)
    mean, var = perm_moments(scratch[0], scratch[1], k, N, S2, S4, T)
    return mean / N, var / (N * N)


@njit(cache=True, error_model="numpy")
def gini_log_pvalue(table: np.ndarray, scratch: np.ndarray) -> float:
    """log p-value of the gini gain of a multiway split (Gamma with the exact permutation
    moments of ``gini_moments``). ``scratch``: (2, n_val) float64."""
    mean, var = gini_moments(table, scratch)
    return gamma_log_pvalue(gini_gain(table), mean, var)


# ---------------------------------------------------------------------- best of many splits
@njit(cache=True, error_model="numpy")
def _interp(x: float, xs: np.ndarray, ys: np.ndarray, extrapolate: bool) -> float:
    """Piecewise-linear interpolation; beyond the last point linear through the last two points
    (``extrapolate``) or constant."""
    n = xs.shape[0]
    if n == 1 or x <= xs[0]:
        return ys[0]
    if x >= xs[n - 1] and not extrapolate:
        return ys[n - 1]
    j = n - 2
    for i in range(1, n):
        if x <= xs[i]:
            j = i - 1
            break
    t = (x - xs[j]) / (xs[j + 1] - xs[j])
    return ys[j] + t * (ys[j + 1] - ys[j])


@njit(cache=True, error_model="numpy")
def _binary_ratio(nl: float, N: float, S2: float, S4: float) -> float:
    """Exact null variance over twice the squared mean of the sum of squares of a fixed split
    of ``nl`` of the ``N`` rows (scalar data): weights 1/N_L, 1/N_R, so A_1 = 2, A_2 = N,
    C_1 = 1/N_L + 1/N_R, C_2 = 2, C_3 = N."""
    c1 = 1.0 / nl + 1.0 / (N - nl)
    mean = S2 * (2.0 / N - (N - 2.0) / (N * (N - 1.0)))
    var = _second_moment(2.0, N, c1, 2.0, N, N, S2, S4, S2 * S2) - mean * mean
    return max(var, 0.0) / (2.0 * mean * mean)


@njit(cache=True, error_model="numpy")
def gain_log_pvalue(
    G: np.ndarray,
    H: np.ndarray,
    C: np.ndarray,
    n_bins: int,
    g2: float,
    g3: float,
    g4: float,
    lam: float,
    kind: int,
    scratch: np.ndarray,
) -> float:
    """log p-value of the second-order split gain of one feature in one node under the null that
    the feature is independent of the gradients (the rows' (g, h) pairs permuted over the rows).

    Parameters
    ----------
    G, H, C : float64 arrays, at least ``n_bins`` entries
        Per bin of the feature in the node: the sums of g and of h, and the row count, bins in
        their order (for ``KIND_ORDERED`` the order of the thresholds; a missing-value bin
        placed where the split sends it, normally last). Empty bins (``C == 0``) are skipped.
        With sample weights pass the weighted ``w g``, ``w h`` (the null then permutes the
        weighted pairs) and the row counts.
    n_bins : int
        Number of bins to read.
    g2, g3, g4 : float
        Node-level sums of ``g^2``, ``g^3``, ``g^4`` over the node's rows (of the same ``w g``
        as ``G``). The node's count, sum of g and sum of h are the sums of ``C``, ``G``, ``H``.
    lam : float
        The l2 penalty lambda of the gain ``G_L^2/(H_L + lam) + G_R^2/(H_R + lam) - G^2/(H +
        lam)`` (no factor 1/2, as in METHODS.md).
    kind : int
        ``KIND_MULTIWAY`` (0): every non-empty bin its own child; ``KIND_ORDERED`` (1): the best
        threshold over the bins in order; ``KIND_PARTITION`` (2): the best binary partition of
        the bins (categories), categories sorted by their mean gradient.
    scratch : float64 array (4, >= n_bins)
        Work space.

    Returns
    -------
    float
        ``log p`` (<= 0); 0.0 (p = 1) where the node has fewer than two non-empty bins or
        constant gradients.

    Notes
    -----
    Multiway: the statistic is the gain without its null-mean offset, ``sum_i a_i D_i^2`` over
    the children with ``D_i = G_i - N_i g_bar`` and ``a_i = 1/(N_i h_bar + lam)`` (``h_bar``
    the node's mean hessian): the gain minus a constant where h is constant and lam = 0; the
    lam-dependent linear term ``2 g_bar sum_i a_i N_i D_i``, of relative order
    ``(lam/(N_i h_bar))^2`` in the variance, and the randomness of the children's hessian sums
    (replaced by ``N_i h_bar``) are left out. Its p-value is the Gamma tail with the exact
    permutation mean and variance.

    Ordered and partition: each candidate's statistic ``D_L^2 (a_L + a_R)`` is divided by its
    exact null mean (which makes it ``D_L^2 N (N - 1)/(N_L N_R S2)``, free of lam and h: the
    between-children sum of squares in units of the variance of g), the maximum is taken over
    the ``k - 1`` candidates of the bins' order (ordered) or of the categories sorted by mean
    gradient (partition), and the Gamma has the moments of the module docstring (exact for
    ``k = 2``). Where lam = 0 and h is constant the maximising candidate is the booster's best
    split by gain; otherwise (varying h, lam > 0) it can differ from it, mostly among
    candidates with small children: the p-value is that of the feature's best split in this
    standardized sense. Hessians enter only the multiway statistic. Partition is calibrated
    from about 10 rows per non-empty category (tests); below 2 rows per category on average it
    returns the multiway p-value of the same sum of squares, an upper bound (conservative,
    possibly very).

    Cost: O(n_bins) (plus a sort of the categories for ``KIND_PARTITION``); allocates only the
    sort's index array (``KIND_PARTITION``), nothing per row.

    Use in split finding: per node, compute ``g2, g3, g4`` once (a pass over the node's rows,
    or histogram channels of g^2, g^3, g^4 summed over one feature's bins); per feature, take
    the threshold/partition by gain as usual and ``lp = gain_log_pvalue(...)`` of its
    histogram; choose the feature with the smallest ``lp`` and split only if
    ``lp < log(min_split_pvalue)``. ``split_log_pvalue_rows`` is the same from per-row data.
    """
    N = 0.0
    g1 = 0.0
    hs = 0.0
    k = 0
    for b in range(n_bins):
        if C[b] > 0.0:
            N += C[b]
            g1 += G[b]
            hs += H[b]
            k += 1
    if k < 2 or N < 2.0:
        return 0.0
    gbar = g1 / N
    hbar = hs / N
    S2 = g2 - N * gbar * gbar
    S4 = g4 - 4.0 * gbar * g3 + 6.0 * gbar * gbar * g2 - 3.0 * N * gbar**4
    if not (S2 > 1e-14 * max(g2, _TINY)):
        return 0.0
    S4 = max(S4, S2 * S2 / N)  # sum e^4 >= (sum e^2)^2 / N: guard the rounding
    cnt = scratch[0]
    dev = scratch[1]
    w = scratch[2]
    j = 0
    for b in range(n_bins):
        if C[b] > 0.0:
            cnt[j] = C[b]
            dev[j] = G[b] - C[b] * gbar
            j += 1
    if kind == KIND_MULTIWAY:
        stat = 0.0
        for i in range(k):
            w[i] = 1.0 / (cnt[i] * hbar + lam)
            stat += w[i] * dev[i] * dev[i]
        mean, var = perm_moments(cnt, w, k, N, S2, S4, S2 * S2)
        return gamma_log_pvalue(stat, mean, var)
    if kind == KIND_PARTITION:
        for i in range(k):
            w[i] = dev[i] / cnt[i]
        order = np.argsort(w[:k])
        for i in range(k):  # reorder (cnt, dev) by mean gradient, through scratch[3]
            scratch[3, i] = cnt[order[i]]
        for i in range(k):
            cnt[i] = scratch[3, i]
            scratch[3, i] = dev[order[i]]
        for i in range(k):
            dev[i] = scratch[3, i]
    # scan the k - 1 candidates of the (sorted) order, each standardized by its exact null mean
    stat = 0.0
    cl = 0.0
    dl = 0.0
    theta = 0.0
    u_prev = 0.0
    nl_bal = 0.0
    nl_ext = 0.5 * N  # the candidate with the smallest child (the largest 1/N_L + 1/N_R)
    for t in range(k - 1):
        cl += cnt[t]
        dl += dev[t]
        cr = N - cl
        coef = 1.0 / (cl * hbar + lam) + 1.0 / (cr * hbar + lam)
        mu = coef * cl * cr * S2 / (N * (N - 1.0))
        stat = max(stat, dl * dl * coef / mu)
        u = cl / N
        if t > 0:
            rho = math.sqrt(u_prev * (1.0 - u) / (u * (1.0 - u_prev)))
            theta += math.acos(min(rho, 1.0))
        u_prev = u
        if abs(cl - 0.5 * N) < abs(nl_bal - 0.5 * N):
            nl_bal = cl
        if abs(cl - 0.5 * N) > abs(nl_ext - 0.5 * N):
            nl_ext = cl
    # a candidate's ratio depends on it only through 1/N_L + 1/N_R, and linearly (the exact
    # variance is linear in C_1 = 1/N_L + 1/N_R with A_1, A_2, C_2, C_3 fixed), so its largest
    # value over the candidates is at the most or the least balanced one
    r_bal = _binary_ratio(nl_bal, N, S2, S4)
    r_max = max(r_bal, _binary_ratio(nl_ext, N, S2, S4))
    if kind == KIND_ORDERED:
        mean1 = 1.0
        r = r_bal
        x = math.log1p(theta)
        m = _interp(x, _ORD_X, _ORD_MEAN, True)
        v = _interp(x, _ORD_X, _ORD_VAR, True)
    else:
        # finite-sample ratio from the exact moments of the multiway sum of squares (a_i = 1/N_i)
        for i in range(k):
            w[i] = 1.0 / cnt[i]
        mean1, var1 = perm_moments(cnt, w, k, N, S2, S4, S2 * S2)
        if N < _SPARSE_ROWS * k:
            # sparse categories: the partition's sum of squares (stat sigma^2) is at most the
            # multiway one, so the multiway p-value (exact moments) bounds it from above
            return gamma_log_pvalue(stat * S2 / (N - 1.0), mean1, var1)
        r = var1 * (k - 1.0) / (2.0 * mean1 * mean1)
        lk = math.log(k)
        m = (k - 1.0) * _interp(lk, _PART_X, _PART_MEAN, False)
        v = (k - 1.0) * _interp(lk, _PART_X, _PART_VAR, False)
    if not (mean1 > 0.0):
        return 0.0
    if k == 2:  # one candidate: Z^2 with mean 1 and variance 2 r, exactly
        m = 1.0
        v = 2.0
    # the bulk from the balanced candidates' ratio; the tail, where extreme candidates with
    # skewed (rare-class) children dominate, from the largest: the larger of the two p-values
    lp = gamma_log_pvalue(stat, m, v * r)
    if r_max > r_bal and r_bal > 0.0:
        lp = max(lp, gamma_log_pvalue(stat, m, v * r * r_max / r_bal))
    return lp


@njit(cache=True, error_model="numpy")
def gain_statistic(
    G: np.ndarray, H: np.ndarray, C: np.ndarray, n_bins: int, lam: float, kind: int
) -> float:
    """The regularised gain ``sum_children G_c^2/(H_c + lam) - G^2/(H + lam)`` of the best split
    of one feature in one node (the booster's criterion, for comparison with the p-value):
    ``KIND_MULTIWAY``: every non-empty bin a child; ``KIND_ORDERED``: the best threshold;
    ``KIND_PARTITION``: the best binary partition, categories sorted by ``G/(H + lam)``.
    Allocates one small index array for ``KIND_PARTITION``."""
    Gt = 0.0
    Ht = 0.0
    for b in range(n_bins):
        if C[b] > 0.0:
            Gt += G[b]
            Ht += H[b]
    parent = Gt * Gt / (Ht + lam)
    if kind == KIND_MULTIWAY:
        s = 0.0
        for b in range(n_bins):
            if C[b] > 0.0:
                s += G[b] * G[b] / (H[b] + lam)
        return s - parent
    idx = np.empty(n_bins, dtype=np.int64)
    k = 0
    for b in range(n_bins):
        if C[b] > 0.0:
            idx[k] = b
            k += 1
    if kind == KIND_PARTITION:
        key = np.empty(k)
        for i in range(k):
            key[i] = G[idx[i]] / (H[idx[i]] + lam)
        o = np.argsort(key)
        idx2 = idx[:k].copy()
        for i in range(k):
            idx[i] = idx2[o[i]]
    best = -np.inf
    gl = 0.0
    hl = 0.0
    for t in range(k - 1):
        gl += G[idx[t]]
        hl += H[idx[t]]
        v = gl * gl / (hl + lam) + (Gt - gl) ** 2 / (Ht - hl + lam) - parent
        best = max(best, v)
    return best


@njit(cache=True, error_model="numpy")
def max_z2_moments(k: int, partition: bool, trials: int, seed: int) -> tuple[float, float]:
    """Monte Carlo mean and variance of the standardized best split of ``k`` equal bins with
    standard normal bin sums (the large-sample null): ``max_t Z_t^2`` over the ``k - 1``
    thresholds in order, or over the prefixes of the bins sorted by their sum (``partition``).
    The tables ``_ORD_*`` and ``_PART_*`` were made with it (4e5 trials up to k = 64, 1e5 up to
    256, 4e4 beyond; seeds 1 + k and 1000 + k)."""
    np.random.seed(seed)  # noqa: NPY002 (Numba supports the legacy API only)
    b = np.empty(k)
    s1 = 0.0
    s2 = 0.0
    for _ in range(trials):
        tot = 0.0
        for i in range(k):
            b[i] = np.random.standard_normal()  # noqa: NPY002
            tot += b[i]
        for i in range(k):
            b[i] -= tot / k
        order = np.argsort(b) if partition else np.arange(k)
        best = 0.0
        c = 0.0
        for t in range(k - 1):
            c += b[order[t]]
            nl = t + 1.0
            best = max(best, c * c * k / (nl * (k - nl)))
        s1 += best
        s2 += best * best
    mean = s1 / trials
    return mean, s2 / trials - mean * mean


# ---------------------------------------------------------------------- Python-facing wrappers
# Plain Python (not compiled): per-row data in, the histogram built with NumPy, the kernels
# above called on it. For tests, benchmarks and exploration; the booster calls the kernels on
# its own histograms.
KINDS = {
    "multiway": KIND_MULTIWAY,
    "ordered": KIND_ORDERED,
    "partition": KIND_PARTITION,
}


def _codes(codes: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    c = np.asarray(codes)
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"codes must be one-dimensional with {n} entries, got shape {c.shape}.")
    if c.size and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0):
        raise ValueError("codes must be non-negative integers (bin or category codes).")
    return c.astype(np.int64), int(c.max()) + 1 if c.size else 0


def split_log_pvalue_rows(
    codes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray | None = None,
    *,
    kind: str = "ordered",
    reg_lambda: float = 1.0,
) -> float:
    """log p-value of the second-order gain of the best split of one feature in one node, under
    the null that the feature's codes are independent of the rows' (g, h) pairs.

    Parameters
    ----------
    codes : array of int, shape (n,)
        Bin codes (ordered) or category codes of the node's rows.
    g, h : arrays of float, shape (n,)
        Gradients and hessians of the rows (``h`` defaults to ones: squared error).
    kind : {"multiway", "ordered", "partition"}
        Every code its own child; the best threshold over the codes in order; the best binary
        partition of the categories.
    reg_lambda : float
        The l2 penalty of the gain.

    Returns
    -------
    float
        ``log p`` (0.0 for a node with fewer than two distinct codes or constant gradients).
    """
    g = np.asarray(g, dtype=np.float64)
    n = g.shape[0]
    h = np.ones(n) if h is None else np.asarray(h, dtype=np.float64)
    if h.shape != g.shape:
        raise ValueError(f"h must have the shape of g {g.shape}, got {h.shape}.")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}.")
    c, nb = _codes(codes, n)
    if nb == 0:
        return 0.0
    G = np.bincount(c, g, nb).astype(np.float64)
    H = np.bincount(c, h, nb).astype(np.float64)
    C = np.bincount(c, minlength=nb).astype(np.float64)
    scratch = np.zeros((4, nb))
    return float(
        gain_log_pvalue(
            G, H, C, nb, float(g @ g), float((g**2) @ g), float((g**2) @ (g**2)),
            float(reg_lambda), KINDS[kind], scratch,
        )
    )  # fmt: skip


def gini_log_pvalue_rows(codes: np.ndarray, labels: np.ndarray) -> float:
    """log p-value of the gini gain of the multiway split of the rows by ``codes`` (Gamma with
    the exact permutation mean and variance), ``labels`` the class codes (non-negative ints)."""
    lab = np.asarray(labels)
    c, nb = _codes(codes, lab.shape[0])
    lab, n_cls = _codes(lab, lab.shape[0])
    if nb == 0:
        return 0.0
    table = np.zeros((nb, n_cls))
    np.add.at(table, (c, lab), 1.0)
    return float(gini_log_pvalue(table, np.zeros((2, nb))))
