"""Sampling error of held-out importances: standard errors, intervals, p-values, q-values.

TreeInner, ForestInner and mean |attribution| are sums (or weighted means) over the held-out
rows of per-row terms, so their variance over the rows follows from the same pass: the
per-feature sums of the terms and of their squares (``Moments``). The unbiased gain is a
smooth function of per-node held-out sums; its variance comes from its per-row linearisation
(``Estimate`` directly). Estimates on disjoint, independently drawn row sets (the folds of a
cross-fit, each scored by its own model) combine as strata: scores and variances add.

Rows are taken as independent draws from the data's law; a score's standard error is that of
its value on a fresh held-out set of the same size. Intervals and p-values are normal
approximations (the scores are sums over hundreds of rows or more).
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
    "table",
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
    """

    score: np.ndarray
    var: np.ndarray
    var_total: np.ndarray
    weight: float

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(self.var)

    @property
    def se_total(self) -> np.ndarray:
        return np.sqrt(self.var_total)


def combine(parts: Sequence[Estimate], mean: bool) -> Estimate:
    """One estimate from independent strata (cross-fitting folds): sums and their variances
    add; a mean is the weight-weighted mean of the strata's means."""
    if len(parts) == 1:
        return parts[0]
    if not mean:
        return Estimate(
            np.sum([p.score for p in parts], axis=0),
            np.sum([p.var for p in parts], axis=0),
            np.sum([p.var_total for p in parts], axis=0),
            float(sum(p.weight for p in parts)),
        )
    W = float(sum(p.weight for p in parts)) or 1.0
    return Estimate(
        np.sum([p.score * (p.weight / W) for p in parts], axis=0),
        np.sum([p.var * (p.weight / W) ** 2 for p in parts], axis=0),
        np.sum([p.var_total * (p.weight / W) ** 2 for p in parts], axis=0),
        W,
    )


_NORMAL = NormalDist()


def p_values(score: np.ndarray, se: np.ndarray) -> np.ndarray:
    """One-sided p-values for "the score is <= 0" (no better than useless on new data):
    ``1 - Phi(score / se)``. A zero standard error gives 0 for a positive score and 1
    otherwise; NaN stays NaN."""
    score = np.asarray(score, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    out = np.full(score.shape, np.nan)
    ok = np.isfinite(score) & np.isfinite(se)
    pos = ok & (se > 0)
    z = score[pos] / se[pos]
    out[pos] = [0.5 * math.erfc(v / math.sqrt(2.0)) for v in z]
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
    q-values.
    """
    z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
    frames = []
    names = np.asarray(list(feature_names), dtype=object)
    for method, est in estimates.items():
        if est is None:
            s = np.asarray(scores[method], dtype=np.float64)
            pairs = [(s[:, c], np.full(s.shape[0], np.nan)) for c in range(s.shape[1])]
            total = (s.sum(axis=1), np.full(s.shape[0], np.nan))
        else:
            pairs = [(est.score[:, c], est.se[:, c]) for c in range(est.score.shape[1])]
            total = (est.score.sum(axis=1), est.se_total)
        blocks: list[tuple[str | None, tuple[np.ndarray, np.ndarray]]]
        if output_names is None:
            blocks = [(None, total)]
        else:
            blocks = [*zip(output_names, pairs), ("total", total)]
        for out_name, (score, se) in blocks:
            p = p_values(score, se)
            if method in unsigned:
                p = np.full(p.shape, np.nan)
            # features with no held-out evidence at all (score and error exactly 0: never
            # used, or reached by no row) are not tests
            tested = ~((score == 0) & (se == 0))
            cols = {"method": method, "feature": names}
            if out_name is not None:
                cols["output"] = out_name
            cols.update(
                score=score,
                se=se,
                ci_low=score - z * se,
                ci_high=score + z * se,
                p_value=p,
                q_value=bh_qvalues(p, tested),
            )
            frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)
