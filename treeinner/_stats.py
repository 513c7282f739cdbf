"""Sampling error of held-out importances: standard errors, intervals, p-values, q-values.

TreeInner, ForestInner and mean |attribution| are sums (or weighted means) over the held-out
rows of per-row terms, so their variance over the rows follows from the same pass: the
per-feature sums of the terms and of their squares (``Moments``). The unbiased gain is a
smooth function of per-node held-out sums; its variance comes from its per-row linearisation
(``Estimate`` directly). Estimates on disjoint, independently drawn row sets (the folds of a
cross-fit, each scored by its own model) combine as strata: scores and variances add.

Rows are taken as independent draws from the data's law; a score's standard error is that of
its value on a fresh held-out set of the same size. Intervals and p-values are normal
approximations (the scores are sums over hundreds of rows or more), except where an estimate
carries degrees of freedom (``Estimate.df``: the unbiased gain, whose variance can rest on
children of a few held-out rows): there they use Student's t with those degrees of freedom
(``t_sf``, ``t_isf``, written here from the regularized incomplete beta function, as scipy
is not a dependency).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

__all__ = [
    "Estimate",
    "Moments",
    "bh_qvalues",
    "combine",
    "moments_from_rows",
    "p_values",
    "t_isf",
    "t_sf",
    "table",
    "welch_df",
]


@dataclass
class Moments:
    """Row-additive sums of one method's per-row terms ``u[i, j, c]`` over a set of rows.

    ``u`` already carries the row weight: for a sum method (TreeInner) the score is
    ``sum_i u``; for a mean method (mean |attribution|) it is ``sum_i u / sum_i w``.

    Attributes
    ----------
    s1, s2 : ndarray of shape (n_features, n_outputs)
        ``sum_i u`` and ``sum_i u**2``.
    s2_total : ndarray of shape (n_features,)
        ``sum_i (sum_c u[i, :, c])**2``, for the total over outputs.
    n : int
        Number of rows.
    sw, sw2 : float
        ``sum_i w`` and ``sum_i w**2`` (mean methods).
    swu : ndarray of shape (n_features, n_outputs) or None
        ``sum_i w u`` (mean methods).
    """

    s1: np.ndarray
    s2: np.ndarray
    s2_total: np.ndarray
    n: int
    sw: float = 0.0
    sw2: float = 0.0
    swu: np.ndarray | None = None

    def __add__(self, other: Moments) -> Moments:
        """The moments of the union of two disjoint row sets."""
        swu = None if self.swu is None or other.swu is None else self.swu + other.swu
        return Moments(
            self.s1 + other.s1,
            self.s2 + other.s2,
            self.s2_total + other.s2_total,
            self.n + other.n,
            self.sw + other.sw,
            self.sw2 + other.sw2,
            swu,
        )

    def scaled(self, c: float) -> Moments:
        """The moments of the terms ``c * u`` (the weights unchanged)."""
        swu = None if self.swu is None else self.swu * c
        return Moments(
            self.s1 * c, self.s2 * c**2, self.s2_total * c**2, self.n, self.sw, self.sw2, swu
        )

    def estimate(self, mean: bool) -> Estimate:
        """Score and sampling variance, the rows an i.i.d. sample.

        A sum ``S = sum_i u`` has variance ``n/(n-1) sum_i (u_i - mean u)^2``; a weighted mean
        ``S / W`` that of the linearised terms ``(u_i - (S/W) w_i) / W``. Fewer than two rows:
        NaN.
        """
        n = self.n
        f = n / (n - 1.0) if n > 1 else np.nan
        if not mean:
            var = f * np.maximum(self.s2 - self.s1**2 / max(n, 1), 0.0)
            tot = self.s1.sum(axis=1)
            var_t = f * np.maximum(self.s2_total - tot**2 / max(n, 1), 0.0)
            return Estimate(self.s1.copy(), var, var_t, float(n))
        W = self.sw if self.sw > 0 else 1.0
        score = self.s1 / W
        swu = self.swu if self.swu is not None else np.zeros_like(self.s1)
        # sum_i ((u_i - S w_i) / W)^2, minus n times the squared mean of the terms
        ss = self.s2 - 2.0 * score * swu + score**2 * self.sw2
        mean_v = (self.s1 - score * self.sw) / W  # 0 up to rounding
        var = f * np.maximum(ss / W**2 - mean_v**2 / max(n, 1), 0.0)
        score_t = score.sum(axis=1)
        ss_t = self.s2_total - 2.0 * score_t * swu.sum(axis=1) + score_t**2 * self.sw2
        var_t = f * np.maximum(ss_t / W**2, 0.0)
        return Estimate(score, var, var_t, W)


def moments_from_rows(rows: np.ndarray, w: np.ndarray | None) -> Moments:
    """``Moments`` of stored per-row values ``rows`` (n, n_features, n_outputs), weighted by
    ``w`` (None: 1) into the terms ``u = w * rows``."""
    n = rows.shape[0]
    wv = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    u = rows * wv[:, None, None]
    tot = u.sum(axis=2)
    return Moments(
        s1=u.sum(axis=0),
        s2=np.einsum("ijk,ijk->jk", u, u),
        s2_total=np.einsum("ij,ij->j", tot, tot),
        n=n,
        sw=float(wv.sum()),
        sw2=float(wv @ wv),
        swu=np.einsum("i,ijk->jk", wv, u),
    )


@dataclass
class Estimate:
    """A score with its sampling variance, per feature and output and for the total over
    outputs.

    Attributes
    ----------
    score, var : ndarray of shape (n_features, n_outputs)
    var_total : ndarray of shape (n_features,)
        Variance of ``score.sum(axis=1)``.
    weight : float
        Total row weight behind the score (strata of a mean combine weighted by it).
    df, df_total : ndarray of shape (n_features, n_outputs) and (n_features,), or None
        Degrees of freedom of the Student t reference of ``score / se`` (``inf`` where the
        reference is the normal); None: the normal throughout (every estimate from
        ``Moments``).
    """

    score: np.ndarray
    var: np.ndarray
    var_total: np.ndarray
    weight: float
    df: np.ndarray | None = None
    df_total: np.ndarray | None = None

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(self.var)

    @property
    def se_total(self) -> np.ndarray:
        return np.sqrt(self.var_total)


def combine(parts: Sequence[Estimate], mean: bool) -> Estimate:
    """One estimate from independent strata (cross-fitting folds): sums and their variances
    add; a mean is the weight-weighted mean of the strata's means. Degrees of freedom, where
    a stratum has them, combine by Welch-Satterthwaite over the strata's variances
    (``welch_df``; a stratum without them counts as normal, infinite degrees of freedom)."""
    if len(parts) == 1:
        return parts[0]
    W = float(sum(p.weight for p in parts))
    scale = [1.0] * len(parts) if not mean else [p.weight / (W or 1.0) for p in parts]
    var = [p.var * c**2 for p, c in zip(parts, scale)]
    var_t = [p.var_total * c**2 for p, c in zip(parts, scale)]
    df = df_t = None
    if any(p.df is not None for p in parts):
        df = welch_df(var, [p.df for p in parts])
    if any(p.df_total is not None for p in parts):
        df_t = welch_df(var_t, [p.df_total for p in parts])
    return Estimate(
        np.sum([p.score * c for p, c in zip(parts, scale)], axis=0),
        np.sum(var, axis=0),
        np.sum(var_t, axis=0),
        W if not mean else (W or 1.0),
        df,
        df_t,
    )


def welch_df(variances: Sequence[np.ndarray], dfs: Sequence[np.ndarray | None]) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of a sum of independent components:
    ``(sum_s V_s)^2 / sum_s (V_s^2 / df_s)``.

    Parameters
    ----------
    variances : sequence of ndarray
        The components' variances ``V_s`` (all of one shape).
    dfs : sequence of ndarray or None
        Their degrees of freedom (None or ``inf``: a normal component, which adds nothing to
        the denominator).

    Returns
    -------
    ndarray
        The degrees of freedom, ``inf`` where the denominator is 0 (no variance, or normal
        components only) or not a number.
    """
    num = np.zeros(np.shape(variances[0]))
    den = np.zeros_like(num)
    for v, d in zip(variances, dfs):
        v = np.asarray(v, dtype=np.float64)
        num = num + v
        if d is not None:
            d = np.asarray(d, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                den = den + np.where(np.isfinite(d) & (v != 0), v**2 / d, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num**2 / den, np.inf)


_NORMAL = NormalDist()
_TINY = 1e-300
_EPS = 1e-15
_CF_ITERATIONS = 2000  # far more than needed: under 100 for every df and t tried


def _log_beta_half(a: np.ndarray) -> np.ndarray:
    """``log B(a, 1/2)`` for ``a > 0``.

    ``lgamma(a) - lgamma(a + 1/2)`` loses digits for large a (both are near a log a: at
    a = 5e5 about 1e-9 of the result), so from a >= 50 the difference comes from Stirling's
    series of the two, differenced term by term: ``log G(a + 1/2) - log G(a) =
    a log1p(1/(2a)) - 1/2 + (1/2) log a + [1/(12 z)] - [1/(360 z^3)] + [1/(1260 z^5)] -
    [1/(1680 z^7)]``, ``[f(z)]`` meaning ``f(a + 1/2) - f(a)`` (the next term's difference
    is under 1e-19 at a = 50)."""
    a = np.asarray(a, dtype=np.float64)
    out = np.empty(a.shape)
    small = a < 50.0
    lg = np.vectorize(math.lgamma, otypes=[np.float64])
    half = math.lgamma(0.5)
    if small.any():
        v = a[small]
        out[small] = lg(v) + half - lg(v + 0.5)
    big = ~small
    if big.any():
        v = a[big]
        w = v + 0.5
        # Stirling: log G(z) = (z - 1/2) log z - z + log(2 pi)/2 + 1/(12z) - 1/(360z^3)
        # + 1/(1260 z^5) - 1/(1680 z^7); the difference of the two series, term by term
        corr = (
            (1.0 / w - 1.0 / v) / 12.0
            - (1.0 / w**3 - 1.0 / v**3) / 360.0
            + (1.0 / w**5 - 1.0 / v**5) / 1260.0
            - (1.0 / w**7 - 1.0 / v**7) / 1680.0
        )
        diff = v * np.log1p(0.5 / v) - 0.5 + 0.5 * np.log(v) + corr
        out[big] = half - diff
    return out


def _beta_fraction(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The continued fraction of the regularized incomplete beta function,
    ``I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) * 1 / (1 + d_1 / (1 + d_2 / (1 + ...)))`` with
    ``d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))`` and
    ``d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))``, ``y = 1 - x`` given apart (to full
    precision where x is near 1).

    Evaluated forwards (Lentz's method) until every entry's last two factors are within 1e-15
    of 1. Both of Lentz's ratios follow ``X_j = 1 + d_j / X_{j-1}``; each is carried with
    ``X_j - 1 = d_j / X_{j-1}`` so that ``X_j = (1 + d_j) - d_j (X_{j-1} - 1) / X_{j-1}``,
    and for x > 1/2 the odd ``1 + d_{2m+1}`` is formed as
    ``(a (2m + 1 - b) + 3m^2 + m (2 - b) + (a + m)(a + b + m) y) / ((a + 2m)(a + 2m + 1))``:
    near x = 1 (a t tail with many degrees of freedom) ``1 + d`` is of the order of y, and
    ``1 - (...) x`` would keep only the digits of y that x holds. The fraction converges fast
    for ``x < (a + 1) / (a + b + 2)``; the callers use the symmetry
    ``I_x(a, b) = 1 - I_{1-x}(b, a)`` beyond."""
    f = np.ones(x.shape)  # the first convergent, 1 / (1 + 0)
    C, Cm1 = np.full(x.shape, 1.0 / _TINY), np.full(x.shape, 1.0 / _TINY)
    Q, Qm1 = np.ones(x.shape), np.zeros(x.shape)
    near_one = x > 0.5
    live = np.ones(x.shape, dtype=bool)
    settled = np.zeros(x.shape, dtype=bool)  # the previous factor was within 1e-15 of 1
    for j in range(2, _CF_ITERATIONS):
        m = (j - 1) // 2
        if (j - 1) % 2:
            den = (a + 2 * m) * (a + 2 * m + 1)
            d = -(a + m) * (a + b + m) * x / den
            exact = (
                a * (2 * m + 1 - b) + 3 * m * m + m * (2 - b) + (a + m) * (a + b + m) * y
            ) / den
            opd = np.where(near_one, exact, 1.0 + d)
        else:
            d = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
            opd = 1.0 + d
        C, Cm1 = opd - d * (Cm1 / C), d / C
        Q, Qm1 = opd - d * (Qm1 / Q), d / Q
        C = np.where(np.abs(C) < _TINY, _TINY, C)
        Q = np.where(np.abs(Q) < _TINY, _TINY, Q)
        step = C / Q
        f = np.where(live, f * step, f)
        # an odd factor can be 1 to 1e-15 while the even ones still move: stop after two
        small = np.abs(step - 1.0) <= _EPS
        live &= ~(small & settled)
        settled = small
        if not live.any():
            break
    return f


def _t_parts(t: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, ...]:
    """For ``t >= 0``: ``log1p(t^2/df)``, ``x = df / (df + t^2)``, ``1 - x`` and
    ``log(1 - x)``, each without overflow (t up to 1e308) or loss of digits."""
    r = t / np.sqrt(df)
    big = r > 1.0
    rb = np.where(big, r, 1.0)
    rs = np.where(big, 0.0, r)
    inv2 = np.where(big, (1.0 / rb) ** 2, 0.0)
    r2 = rs * rs
    with np.errstate(divide="ignore"):
        log1p_r2 = np.where(big, 2.0 * np.log(rb) + np.log1p(inv2), np.log1p(r2))
        x = np.where(big, inv2 / (1.0 + inv2), 1.0 / (1.0 + r2))
        one_mx = np.where(big, 1.0 / (1.0 + inv2), r2 / (1.0 + r2))
        # log(1 - x): -inf at t = 0, where the prefactor of the fraction is 0
        log_1mx = np.where(big, -np.log1p(inv2), np.log(r2) - np.log1p(r2))
    return log1p_r2, x, one_mx, log_1mx


def _t_upper(t: np.ndarray, df: np.ndarray, log_beta: np.ndarray | None = None) -> np.ndarray:
    """``P(T > t)`` for ``t >= 0`` (finite) and finite ``df > 0``: half of
    ``I_x(df/2, 1/2)``, ``x = df / (df + t^2)`` (``log_beta``: ``_log_beta_half(df/2)``,
    if known)."""
    a = 0.5 * df
    if log_beta is None:
        log_beta = _log_beta_half(a)
    log1p_r2, x, one_mx, log_1mx = _t_parts(t, df)
    log_pre = -a * log1p_r2 + 0.5 * log_1mx - log_beta
    direct = x < (a + 1.0) / (a + 2.5)
    out = np.empty(t.shape)
    if direct.any():
        i = direct
        half = np.full(i.sum(), 0.5)
        cf = _beta_fraction(a[i], half, x[i], one_mx[i])
        out[i] = np.exp(log_pre[i]) * cf / a[i]
    rest = ~direct
    if rest.any():
        i = rest
        cf = _beta_fraction(np.full(i.sum(), 0.5), a[i], one_mx[i], x[i])
        out[i] = 1.0 - np.exp(log_pre[i]) * cf / 0.5
    return 0.5 * out


def _normal_sf(z: np.ndarray) -> np.ndarray:
    return np.array([0.5 * math.erfc(v / math.sqrt(2.0)) for v in np.ravel(z)]).reshape(np.shape(z))


def t_sf(t: np.ndarray, df: np.ndarray | float | None = None) -> np.ndarray:
    """Upper tail ``P(T > t)`` of Student's t with ``df`` degrees of freedom.

    Parameters
    ----------
    t : array-like
    df : array-like or float, optional
        Degrees of freedom (> 0), broadcast against ``t``; ``inf`` or None: the standard
        normal's tail ``1 - Phi(t)``.

    Returns
    -------
    ndarray
        The tail probabilities (NaN where ``t`` or ``df`` is NaN or ``df <= 0``), accurate to
        about 1e-13 relative in both tails.
    """
    t = np.asarray(t, dtype=np.float64)
    d = np.full(t.shape, np.inf) if df is None else np.asarray(df, dtype=np.float64)
    t, d = np.broadcast_arrays(t, d)
    out = np.full(t.shape, np.nan)
    normal = np.isinf(d) & (d > 0) & ~np.isnan(t)
    out[normal] = _normal_sf(t[normal])
    ok = np.isfinite(d) & (d > 0) & ~np.isnan(t)
    fin = ok & np.isfinite(t)
    out[ok & (t == np.inf)] = 0.0
    out[ok & (t == -np.inf)] = 1.0
    if fin.any():
        tv, dv = t[fin], d[fin]
        up = _t_upper(np.abs(tv), dv)
        out[fin] = np.where(tv >= 0, up, 1.0 - up)
    return out


def _t_log_pdf(t: np.ndarray, df: np.ndarray, log_beta: np.ndarray) -> np.ndarray:
    """Log density of Student's t at ``t >= 0``, ``log_beta`` being
    ``_log_beta_half(df/2)``."""
    return -log_beta - 0.5 * np.log(df) - 0.5 * (df + 1.0) * _t_parts(t, df)[0]


def t_isf(q: np.ndarray | float, df: np.ndarray | float | None = None) -> np.ndarray:
    """Inverse of ``t_sf``: the ``t`` with ``P(T > t) = q``.

    Newton's method on ``log t_sf`` as a function of ``log t`` (a straight line in a heavy
    tail, so a far quantile takes a few steps), kept inside the bracket of the iterates seen
    so far (bisection when a step leaves it), from the normal quantile, to 1e-14 relative.

    Parameters
    ----------
    q : array-like
        Upper-tail probabilities in (0, 1).
    df : array-like or float, optional
        Degrees of freedom (> 0), broadcast against ``q``; ``inf`` or None: the normal.

    Returns
    -------
    ndarray
        The quantiles (NaN for q outside [0, 1] or a bad df; ``+inf``/``-inf`` at q = 0 / 1).
    """
    q = np.asarray(q, dtype=np.float64)
    d = np.full(q.shape, np.inf) if df is None else np.asarray(df, dtype=np.float64)
    q, d = np.broadcast_arrays(q, d)
    out = np.full(q.shape, np.nan)
    good = (d > 0) & ~np.isnan(d)
    out[good & (q == 0.0)] = np.inf
    out[good & (q == 1.0)] = -np.inf
    inner = good & (q > 0.0) & (q < 1.0)
    qi, di = q[inner], d[inner]
    res = np.array([-_NORMAL.inv_cdf(v) for v in qi])
    fin = np.isfinite(di) & (qi != 0.5)
    if fin.any():
        qq = qi[fin]
        upper = np.minimum(qq, 1.0 - qq)  # solve in the upper half, reflect back
        res[fin] = np.sign(0.5 - qq) * _t_isf_upper(upper, di[fin], np.abs(res[fin]))
    res[qi == 0.5] = 0.0
    out[inner] = res
    return out


def _t_isf_upper(q: np.ndarray, df: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``t > 0`` with ``t_sf(t, df) = q`` for ``0 < q < 1/2``, from ``start`` (> 0): Newton
    in ``u = log t`` on ``log t_sf(e^u) - log q``, whose slope is ``-t pdf(t) / t_sf(t)``."""
    u = np.log(start)
    lo = np.full(q.shape, -np.inf)  # log t_sf(e^lo) > log q
    hi = np.full(q.shape, np.inf)
    log_q = np.log(q)
    log_beta = _log_beta_half(0.5 * df)
    live = np.flatnonzero(np.ones(q.shape, dtype=bool))
    for _ in range(200):
        uu, dd, lb = u[live], df[live], log_beta[live]
        t = np.exp(uu)
        s = _t_upper(t, dd, lb)
        with np.errstate(divide="ignore"):
            log_s = np.log(s)
        g = log_s - log_q[live]
        lo[live] = np.where(g > 0, uu, lo[live])
        hi[live] = np.where(g < 0, uu, hi[live])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slope = -np.exp(uu + _t_log_pdf(t, dd, lb) - log_s)
            new = uu - g / slope
        a, b = lo[live], hi[live]
        bad = (~np.isfinite(new) | (new <= a) | (new >= b)) & (g != 0)
        wide = np.clip(new, uu - 8.0, uu + 8.0)  # no bracket yet on one side: at most e^8
        mid = np.where(np.isfinite(a) & np.isfinite(b), 0.5 * (a + b), wide)
        new = np.where(bad, mid, new)
        done = (np.abs(new - uu) <= 1e-14) | (g == 0)
        u[live] = new
        live = live[~done]
        if live.size == 0:
            break
    return np.exp(u)


def p_values(score: np.ndarray, se: np.ndarray, df: np.ndarray | None = None) -> np.ndarray:
    """One-sided p-values for "the score is <= 0" (no better than useless on new data):
    ``1 - Phi(score / se)``, or with degrees of freedom ``df`` (broadcast against
    ``score``; ``inf`` entries normal) Student t's tail ``t_sf(score / se, df)``. A zero
    standard error gives 0 for a positive score and 1 otherwise; NaN stays NaN."""
    score = np.asarray(score, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    out = np.full(score.shape, np.nan)
    ok = np.isfinite(score) & np.isfinite(se)
    pos = ok & (se > 0)
    z = score[pos] / se[pos]
    if df is None:
        out[pos] = _normal_sf(z)
    else:
        out[pos] = t_sf(z, np.broadcast_to(np.asarray(df, dtype=np.float64), score.shape)[pos])
    zero = ok & (se == 0)
    out[zero] = np.where(score[zero] > 0, 0.0, 1.0)
    return out


def bh_qvalues(p: np.ndarray, tested: np.ndarray | None = None) -> np.ndarray:
    """Benjamini-Hochberg q-values of the p-values ``p`` (NaN and untested entries: NaN and
    1 respectively, neither counted among the tests)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    use = np.isfinite(p) if tested is None else np.isfinite(p) & tested
    q[np.isfinite(p) & ~use] = 1.0
    idx = np.flatnonzero(use)
    m = idx.size
    if m == 0:
        return q
    order = idx[np.argsort(p[idx], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q


def table(
    estimates: dict[str, Estimate | None],
    scores: dict[str, np.ndarray],
    feature_names: Sequence[str],
    output_names: Sequence[str] | None,
    alpha: float,
    unsigned: Collection[str] = (),
) -> pd.DataFrame:
    """The significance table: one row per method and feature (and output, for multi-output
    models: each class and ``total``), with score, standard error, ``1 - alpha`` interval,
    one-sided p-value and Benjamini-Hochberg q-value (over the features of one method and
    output). A method with no estimate (``scores`` only) gets NaN statistics.

    ``scores[name]`` is (n_features, n_outputs) for methods without an estimate. The
    methods in ``unsigned`` (positive by construction, e.g. mean |attribution|) get no p- and
    q-values. An estimate with degrees of freedom (``Estimate.df``, ``df_total``) gets
    Student t intervals and p-values with them (``t_isf``, ``t_sf``); the others normal ones.
    """
    z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
    frames = []
    names = np.asarray(list(feature_names), dtype=object)
    Block = tuple[np.ndarray, np.ndarray, np.ndarray | None]  # score, se, df (None: normal)
    for method, est in estimates.items():
        if est is None:
            s = np.asarray(scores[method], dtype=np.float64)
            nan = np.full(s.shape[0], np.nan)
            pairs: list[Block] = [(s[:, c], nan, None) for c in range(s.shape[1])]
            total: Block = (s.sum(axis=1), nan, None)
        else:
            df = est.df
            pairs = [
                (est.score[:, c], est.se[:, c], None if df is None else df[:, c])
                for c in range(est.score.shape[1])
            ]
            total = (est.score.sum(axis=1), est.se_total, est.df_total)
        blocks: list[tuple[str | None, Block]]
        if output_names is None:
            blocks = [(None, total)]
        else:
            blocks = [*zip(output_names, pairs), ("total", total)]
        for out_name, (score, se, dof) in blocks:
            p = p_values(score, se, dof)
            if method in unsigned:
                p = np.full(p.shape, np.nan)
            half = z * se if dof is None else t_isf(alpha / 2.0, dof) * se
            # features with no held-out evidence at all (score and error exactly 0: never
            # used, or reached by no row) are not tests
            tested = ~((score == 0) & (se == 0))
            cols = {"method": method, "feature": names}
            if out_name is not None:
                cols["output"] = out_name
            cols.update(
                score=score,
                se=se,
                ci_low=score - half,
                ci_high=score + half,
                p_value=p,
                q_value=bh_qvalues(p, tested),
            )
            frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)
