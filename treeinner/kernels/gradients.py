"""Numba gradient and hessian of every kernel objective, one row at a time.

An objective is an integer ``code`` and a float64 parameter vector ``prm`` (the codes and slots
of ``treeinner._format``; ``treeinner.objectives.Objective`` holds both). The gradient and
hessian follow each booster's own convention where they differ, through ``prm``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _format as fmt


@njit(cache=True, inline="always")
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@njit(cache=True, inline="always")
def grad_hess(code, prm, y, f):
    """Gradient and hessian of one single-output row at margin ``f``."""
    if code == fmt.SQUARED:
        return f - y, 1.0
    if code == fmt.LOGISTIC:
        s = prm[fmt.P_SIGMOID]
        w = prm[fmt.P_POS_WEIGHT] if y == 1.0 else 1.0
        if s == 1.0:
            p = _sigmoid(f)
            return (p - y) * w, max(p * (1.0 - p), prm[fmt.P_MIN_HESS]) * w
        p = _sigmoid(s * f)
        return s * (p - y) * w, max(s * s * p * (1.0 - p), prm[fmt.P_MIN_HESS]) * w
    if code == fmt.POISSON:
        return np.exp(f) - y, np.exp(f + prm[fmt.P_MAX_DELTA])
    if code == fmt.GAMMA:
        e = y * np.exp(-f)
        return 1.0 - e, e
    if code == fmt.TWEEDIE:
        rho = prm[fmt.P_TWEEDIE]
        a = np.exp((1.0 - rho) * f)
        b = np.exp((2.0 - rho) * f)
        return -y * a + b, -y * (1.0 - rho) * a + (2.0 - rho) * b
    if code == fmt.PSEUDO_HUBER:
        d = prm[fmt.P_HUBER]
        z = f - y
        scale = 1.0 + (z / d) ** 2
        sq = np.sqrt(scale)
        return z / sq, 1.0 / (scale * sq)
    if code == fmt.SQUARED_LOG:
        p = max(f, -1.0 + 1e-6)
        r = np.log1p(p) - np.log1p(y)
        return r / (p + 1.0), max((1.0 - r) / ((p + 1.0) * (p + 1.0)), prm[fmt.P_MIN_HESS])
    if code == fmt.HINGE:
        yy = 2.0 * y - 1.0
        if f * yy < 1.0:
            return -yy, 1.0
        return 0.0, prm[fmt.P_MIN_HESS]
    return f - y, 1.0


@njit(cache=True)
def grad_hess_row(code, prm, y, F, g, h):
    """Gradient and hessian of one row at margins ``F`` (one per output) into ``g``, ``h``."""
    K = F.shape[0]
    if code == fmt.SOFTMAX:
        mx = F[0]
        for c in range(1, K):
            mx = max(mx, F[c])
        s = 0.0
        for c in range(K):
            s += np.exp(F[c] - mx)
        label = np.int64(y)
        for c in range(K):
            p = np.exp(F[c] - mx) / s
            g[c] = p - (1.0 if c == label else 0.0)
            h[c] = max(prm[fmt.P_HESS_SCALE] * p * (1.0 - p), prm[fmt.P_MIN_HESS])
        return
    # one-vs-all: each output is a logistic of its own 0/1 label (one inlined grad_hess only)
    ova = code == fmt.OVA
    one = fmt.LOGISTIC if ova else code
    label = np.int64(y) if ova else -1
    for c in range(K if ova else 1):
        yc = (1.0 if c == label else 0.0) if ova else y
        g[c], h[c] = grad_hess(one, prm, yc, F[c])
