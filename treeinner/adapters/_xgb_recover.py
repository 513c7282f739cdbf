"""XGBoost: recover lambda and the learning rate of every tree from the node statistics.

An XGBoost model file keeps no training parameters, but its trees keep enough: inner nodes store
``base_weights`` = -G / (H + lambda) (unscaled), every node its hessian sum ``sum_hessian``, and
leaves ``-eta G / (H + lambda)``. G adds up over children, which gives one linear equation in
lambda per node with two inner children, then one in eta per split with a leaf child. Where no
node has two inner children (models of stumps), every split whose children are both leaves
gives one equation in both, ``eta w (H + lambda) = v_l (H_l + lambda) + v_r (H_r + lambda)``,
solved jointly for one eta and lambda over all such splits (two or more, with different
statistics). Valid without L1 and ``max_delta_step``; a recovered value is snapped to the
shortest decimal within its error (XGBoost keeps its parameters in float32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class Stats(NamedTuple):
    """What recovery reads of one tree: tree-local children (-1 at leaves), hessian sums,
    ``base_weights`` and leaf values as stored (before any DART weight)."""

    left: np.ndarray
    right: np.ndarray
    cover: np.ndarray
    base_weight: np.ndarray
    leaf_raw: np.ndarray


_NO_INNER_PAIR = "no node has two inner children (all trees are stumps)"
_F32 = 1.2e-7  # float32's relative rounding error, a little over half an ulp


def snap(x: float, tol: float) -> float:
    """The shortest decimal within ``tol`` of ``x``, as float32 (how XGBoost stores it)."""
    if abs(x) <= tol:
        return 0.0
    for digits in range(1, 8):
        c = float(f"{x:.{digits}g}")
        if abs(c - x) <= tol:
            return float(np.float32(c))
    return x


def recover(trees: Sequence[Stats]) -> tuple[float | None, np.ndarray | None, str]:
    """Recover lambda and per-tree eta from node statistics (alpha = max_delta_step = 0).

    Returns ``(lambda, eta_per_tree, reason)``; ``None`` where a value could not be recovered,
    and then ``reason`` says why.
    """
    lam, why = _recover_lambda(trees)
    if lam is None and why == _NO_INNER_PAIR:
        return _recover_from_stumps(trees)
    if lam is None:
        return None, None, why
    etas, errs = _tree_etas(trees, lam)
    good = np.isfinite(etas)
    if not np.any(good):
        return lam, None, "no tree has a split with a leaf child"
    if np.any(etas[good] <= 0):
        return None, None, "recovered a non-positive learning rate"
    eta, why = _eta_per_tree(etas, errs, good)
    return lam, eta, why


def _lambda_equations(trees: Sequence[Stats]) -> tuple[np.ndarray, ...] | None:
    """``lambda * d = n`` for every node with two inner children, with the magnitudes of the
    terms that cancel in ``n`` (``m``) and of the weights (``s``), for error bounds; None when
    no node has two inner children."""
    num, den, mag, wmag = [], [], [], []
    for t in trees:
        L, R = t.left, t.right
        inner = np.flatnonzero(L >= 0)
        both = inner[(L[L[inner]] >= 0) & (L[R[inner]] >= 0)] if inner.size else inner
        if both.size == 0:
            continue
        w, H = t.base_weight, t.cover
        lw, rw, lh, rh = w[L[both]], w[R[both]], H[L[both]], H[R[both]]
        num.append(lw * lh + rw * rh - w[both] * H[both])
        den.append(w[both] - lw - rw)
        mag.append(np.abs(lw * lh) + np.abs(rw * rh) + np.abs(w[both] * H[both]))
        wmag.append(np.abs(w[both]) + np.abs(lw) + np.abs(rw))
    if not num:
        return None
    n_, d_, m_, s_ = (np.concatenate(v) for v in (num, den, mag, wmag))
    ok = np.isfinite(n_) & np.isfinite(d_) & np.isfinite(m_) & np.isfinite(s_)
    return n_[ok], d_[ok], m_[ok], s_[ok]


def _recover_lambda(trees: Sequence[Stats]) -> tuple[float | None, str]:
    """Lambda by least squares over all trees' equations, or None and the reason."""
    eqs = _lambda_equations(trees)
    if eqs is None:
        return None, _NO_INNER_PAIR
    n_, d_, m_, s_ = eqs
    if n_.size == 0 or not np.any(d_ != 0):
        return None, "the node statistics are degenerate"
    lam = float(np.dot(d_, n_) / np.dot(d_, d_))
    # Each equation d lam = n holds up to the float32 rounding of the stored weights and
    # covers. Where d cancels (a node whose children's weights nearly cancel its own, as in a
    # symmetric split) that rounding decides lam, and one such equation fits "exactly".
    sig = 1.2e-7 * (m_ + abs(lam) * s_)
    lam_err = float(np.sqrt(np.sum((d_ * sig) ** 2)) / np.dot(d_, d_))
    if lam_err > 1e-3 * max(1.0, abs(lam)):
        return None, "the node statistics do not determine lambda (near-symmetric splits)"
    resid = n_ - lam * d_
    # float32 statistics leave residuals near 1e-7 of the cancelling terms; L1 or clipping
    # leaves far more.
    if np.sqrt(np.mean(resid**2)) > 1e-5 * np.sqrt(np.mean(m_**2)):
        return None, "lambda is not consistent across nodes (L1 or max_delta_step?)"
    se = float(np.sqrt(np.sum(resid**2) / max(1, resid.size - 1) / np.dot(d_, d_)))
    # float32 rounding of the stored statistics is not random noise, so the standard error
    # alone can be too tight; a lambda within 1e-6 of the covers it is added to is
    # indistinguishable at their precision anyway.
    h_scale = float(np.median(np.concatenate([t.cover[t.left >= 0] for t in trees])))
    lam = snap(lam, max(6 * se, 1e-7 * abs(lam), 1e-6 * h_scale))
    if lam < 0:
        return None, f"recovered lambda {lam:g} < 0"
    return lam, ""


def _tree_etas(trees: Sequence[Stats], lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Each tree's eta and its standard error (NaN and inf where no split has a leaf child)."""
    etas = np.full(len(trees), np.nan)
    errs = np.full(len(trees), np.inf)
    for i, t in enumerate(trees):
        L, R = t.left, t.right
        inner = np.flatnonzero(L >= 0)
        if inner.size == 0:
            continue
        w, H, v = t.base_weight, t.cover, t.leaf_raw
        lleaf, rleaf = L[L[inner]] < 0, L[R[inner]] < 0
        # G of each child: leaf -> -v (H + lam) / eta ; inner -> -w (H + lam)
        a = w[inner] * (H[inner] + lam)  # = -G_p
        lv = v[L[inner]] * (H[L[inner]] + lam)
        rv = v[R[inner]] * (H[R[inner]] + lam)
        li = w[L[inner]] * (H[L[inner]] + lam)
        ri = w[R[inner]] * (H[R[inner]] + lam)
        # eta * (a - inner children) = leaf children
        A = a - np.where(lleaf, 0.0, li) - np.where(rleaf, 0.0, ri)
        B = np.where(lleaf, lv, 0.0) + np.where(rleaf, rv, 0.0)
        sel = (lleaf | rleaf) & np.isfinite(A) & np.isfinite(B)
        A, B = A[sel], B[sel]
        if A.size == 0 or np.dot(A, A) == 0:
            continue
        etas[i] = np.dot(A, B) / np.dot(A, A)
        r = B - etas[i] * A
        errs[i] = np.sqrt(np.sum(r**2) / max(1, r.size) / np.dot(A, A))
    return etas, errs


def _eta_per_tree(etas: np.ndarray, errs: np.ndarray, good: np.ndarray) -> tuple[Any, str]:
    """One eta for all trees when they agree, else a schedule (one eta per tree, a tree with no
    usable split taking the previous one); None and the reason when a value is not positive."""
    rel = np.abs(etas[good] - np.median(etas[good])) / np.median(etas[good])
    if np.all(rel < 1e-4):
        # a tree with one usable split fits exactly: floor its error at float32 precision
        w8 = 1.0 / np.maximum(errs[good], 6e-8 * etas[good]) ** 2
        eta = float(np.sum(w8 * etas[good]) / np.sum(w8))
        eta_se = float(1.0 / np.sqrt(np.sum(w8)))
        return np.full(etas.size, snap(eta, max(6 * eta_se, 1e-7 * eta))), ""
    snapped = np.array(
        [snap(e, max(6 * s, 1e-6 * e)) if np.isfinite(e) else np.nan for e, s in zip(etas, errs)]
    )
    if np.any(snapped[good] <= 0):
        return None, "recovered a non-positive learning rate"
    last = float(snapped[good][0])
    for i in range(snapped.size):
        if np.isfinite(snapped[i]):
            last = snapped[i]
        else:
            snapped[i] = last
    return snapped, ""


# ---------------------------------------------------------------------- models of stumps
def _stump_equations(trees: Sequence[Stats]) -> tuple[np.ndarray, ...]:
    """``eta (a0 + a1 lam) = b0 + b1 lam`` for every split whose children are both leaves
    (``a = w (H + lam)``, ``b = v_l (H_l + lam) + v_r (H_r + lam)``), and the magnitude
    ``m0 + m1 lam`` of the terms whose float32 rounding each equation carries."""
    rows = []
    for t in trees:
        L, R = t.left, t.right
        inner = np.flatnonzero(L >= 0)
        p = inner[(L[L[inner]] < 0) & (L[R[inner]] < 0)] if inner.size else inner
        w, H, v = t.base_weight[p], t.cover[p], t.leaf_raw
        vl, vr, hl, hr = v[L[p]], v[R[p]], t.cover[L[p]], t.cover[R[p]]
        m0 = np.abs(w) * H + np.abs(vl) * hl + np.abs(vr) * hr
        m1 = np.abs(w) + np.abs(vl) + np.abs(vr)
        rows.append(np.stack([w * H, w, vl * hl + vr * hr, vl + vr, m0, m1]))
    eq = np.concatenate(rows, axis=1) if rows else np.zeros((6, 0))
    return tuple(eq[:, np.all(np.isfinite(eq), axis=0) & (eq[4] + eq[5] > 0)])


def _stump_candidates(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Lambdas >= 0 where the equations (scaled to unit noise) fit one eta best: 0 and the
    stationary points of sum over pairs (A_i B_j - A_j B_i)^2, a quartic in lambda."""
    P = np.polynomial.polynomial
    saa = P.polyadd(P.polyadd([np.dot(a0, a0)], [0, 2 * np.dot(a0, a1)]), [0, 0, np.dot(a1, a1)])
    sbb = P.polyadd(P.polyadd([np.dot(b0, b0)], [0, 2 * np.dot(b0, b1)]), [0, 0, np.dot(b1, b1)])
    sab = [np.dot(a0, b0), np.dot(a0, b1) + np.dot(a1, b0), np.dot(a1, b1)]
    g: np.ndarray = P.polysub(P.polymul(saa, sbb), P.polymul(sab, sab))
    roots = P.polyroots(P.polyder(g)) if np.any(P.polyder(g)) else np.zeros(0)
    real = roots[np.abs(roots.imag) <= 1e-9 * np.maximum(1.0, np.abs(roots))].real
    return np.concatenate([[0.0], real[real > 0]])


def _stump_fit(eq: tuple[np.ndarray, ...], lam: float) -> tuple[float, float, np.ndarray]:
    """At ``lam``: the best eta, the weighted residual norm, and the equations' noise."""
    a0, a1, b0, b1, m0, m1 = eq
    sig = _F32 * (m0 + m1 * lam)
    A, B = (a0 + a1 * lam) / sig, (b0 + b1 * lam) / sig
    eta = float(np.dot(A, B) / np.dot(A, A)) if np.dot(A, A) > 0 else np.nan
    return eta, float(np.sqrt(np.sum((eta * A - B) ** 2))), sig


def _recover_from_stumps(trees: Sequence[Stats]) -> tuple[float | None, Any, str]:
    """One eta and lambda fitted jointly over every split with two leaf children; None and
    the reason when they are not determined (fewer than two such splits, an error too large,
    two equally good solutions, or residuals beyond float32 rounding: a schedule, L1).

    A tree whose root weight is 0 (the first tree, boosted from the mean) fits any eta: its
    eta is taken to be the others' (the one-eta assumption of this fit)."""

    def fail(reason: str) -> tuple[None, None, str]:
        """Not recovered, and why."""
        return None, None, f"{_NO_INNER_PAIR}; {reason}"

    eq = _stump_equations(trees)
    a0, a1, b0, b1, m0, m1 = eq
    if a0.size < 2:
        return fail(f"eta and lambda need two or more splits with two leaf children, not {a0.size}")
    s = _F32 * (m0 + m1)
    lams = _stump_candidates(a0 / s, a1 / s, b0 / s, b1 / s)
    cands = [c for c in ((lam, *_stump_fit(eq, lam)) for lam in lams) if c[1] > 0]
    if not cands:
        return fail("no positive eta fits the stumps")
    lam, eta, cost, sig = min(cands, key=lambda c: c[2])
    noise = 100 * np.sqrt(a0.size)  # far above the cost of rounding errors alone
    if cost > noise:
        return fail("no one eta and lambda fit all stumps (a learning-rate schedule? L1?)")
    J = np.stack([(a0 + a1 * lam) / sig, (eta * a1 - b1) / sig], axis=1)
    cov = np.linalg.pinv(J.T @ J)  # unit-noise residuals: the parameters' covariance
    eta_se, lam_se = np.sqrt(np.abs(np.diag(cov)))
    if np.linalg.matrix_rank(J) < 2 or lam_se > 1e-3 * max(1.0, lam) or eta_se > 1e-3 * eta:
        return fail("the stumps do not determine eta and lambda")
    apart = 10 * lam_se + 1e-6 * (1.0 + lam)  # another minimum, not this one found twice
    rivals = [c[0] for c in cands if c[2] <= noise and abs(c[0] - lam) > apart]
    if rivals:
        return fail(f"the stumps fit two lambdas equally well ({lam:g}, {rivals[0]:g})")
    lam = snap(lam, max(6 * lam_se, 1e-7 * lam))
    eta = snap(eta, max(6 * eta_se, 1e-7 * eta))
    return lam, np.full(len(trees), eta), ""
