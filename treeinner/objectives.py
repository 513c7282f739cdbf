"""Gradient, hessian, inverse link and loss of every objective the adapters support.

The gradient and hessian follow each booster's own convention where they differ (XGBoost's
softmax hessian is 2 p (1 - p); its Poisson hessian is exp(F + max_delta_step)); they are what
the booster summed into its node statistics, so the total-gain identity holds with them. Inside
the Numba kernels an objective is an integer ``code`` and a float64 parameter vector ``prm``
(see ``Objective``); ``grad_hess_row`` evaluates one row for all outputs at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = ["Objective", "get_objective"]

SQUARED = 0
LOGISTIC = 1
SOFTMAX = 2
POISSON = 3
GAMMA = 4
TWEEDIE = 5
PSEUDO_HUBER = 6
SQUARED_LOG = 7
HINGE = 8
OVA = 9  # one-vs-all: an independent logistic per class (LightGBM multiclassova)

# prm layout
P_HESS_SCALE = 0  # multiplies the hessian (softmax: XGBoost 2, LightGBM K / (K - 1))
P_MAX_DELTA = 1  # Poisson: hessian exp(F + max_delta_step)
P_TWEEDIE = 2  # tweedie variance power
P_HUBER = 3  # pseudo-Huber slope
P_POS_WEIGHT = 4  # logistic: weight of positive rows (scale_pos_weight)
P_MIN_HESS = 5  # floor of the hessian
P_SIGMOID = 6  # logistic and one-vs-all: p = sigmoid(sigmoid * F) (LightGBM's "sigmoid")
N_PARAMS = 7

_XGB_CODES = {
    "reg:squarederror": SQUARED,
    "reg:linear": SQUARED,
    "reg:logistic": LOGISTIC,
    "binary:logistic": LOGISTIC,
    "binary:logitraw": LOGISTIC,
    "multi:softprob": SOFTMAX,
    "multi:softmax": SOFTMAX,
    "count:poisson": POISSON,
    "reg:gamma": GAMMA,
    "reg:tweedie": TWEEDIE,
    "reg:pseudohubererror": PSEUDO_HUBER,
    "reg:squaredlogerror": SQUARED_LOG,
    "binary:hinge": HINGE,
}
_NAMES = {
    SQUARED: "squared error",
    LOGISTIC: "logistic",
    SOFTMAX: "softmax",
    POISSON: "poisson",
    GAMMA: "gamma",
    TWEEDIE: "tweedie",
    PSEUDO_HUBER: "pseudo-Huber",
    SQUARED_LOG: "squared log error",
    HINGE: "hinge",
    OVA: "one-vs-all logistic",
}


@dataclass(frozen=True)
class Objective:
    """An objective as the kernels see it.

    Attributes
    ----------
    name : str
        The source booster's name for it.
    code : int
        Kernel code (module constants ``SQUARED`` ... ``HINGE``).
    prm : ndarray of float64
        Kernel parameters (hessian scale, Poisson max_delta_step, tweedie power, huber slope,
        scale_pos_weight, hessian floor).
    n_outputs : int
        Number of outputs (classes for softmax).
    """

    name: str
    code: int
    prm: np.ndarray
    n_outputs: int

    @property
    def constant_hessian(self) -> bool:
        """Whether every row's hessian is the same constant (squared error: h = 1)."""
        return self.code == SQUARED

    def check_labels(self, y: np.ndarray) -> np.ndarray:
        """Validate labels for this objective and return them as float64.

        Parameters
        ----------
        y : array-like of shape (n_samples,)

        Returns
        -------
        ndarray of float64

        Raises
        ------
        ValueError
            If labels are missing, non-finite or outside the objective's domain.
        """
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D; got shape {y.shape}.")
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y must be numeric for the {self.name} objective; got {y.dtype}.")
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite labels.")
        c = self.code
        bad = None
        if c == LOGISTIC and np.any((y < 0) | (y > 1)):
            bad = "labels must be in [0, 1]"
        elif c == HINGE and np.any((y != 0) & (y != 1)):
            bad = "labels must be 0 or 1"
        elif c in (SOFTMAX, OVA) and (
            np.any(y != np.round(y)) or np.any(y < 0) or np.any(y >= self.n_outputs)
        ):
            bad = f"labels must be integer classes in [0, {self.n_outputs})"
        elif c in (POISSON, TWEEDIE) and np.any(y < 0):
            bad = "labels must be >= 0"
        elif c == GAMMA and np.any(y <= 0):
            bad = "labels must be > 0"
        elif c == SQUARED_LOG and np.any(y <= -1):
            bad = "labels must be > -1"
        if bad:
            raise ValueError(f"Invalid labels for the {self.name} objective: {bad}.")
        return y

    def link_inverse(self, margin: np.ndarray) -> np.ndarray:
        """The prediction in output space for a margin (the inverse link).

        Parameters
        ----------
        margin : ndarray of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        ndarray
            Probabilities for logistic and softmax, means for poisson, gamma and tweedie (exp),
            the margin itself otherwise.
        """
        F = np.asarray(margin, dtype=np.float64)
        c = self.code
        if c == SOFTMAX:
            e = np.exp(F - F.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        if (c == LOGISTIC and self.name != "binary:logitraw") or c == OVA:
            return 1.0 / (1.0 + np.exp(-self.prm[P_SIGMOID] * F))
        if c in (POISSON, GAMMA, TWEEDIE):
            return np.exp(F)
        return F

    def loss(self, y: np.ndarray, margin: np.ndarray, weight: np.ndarray | None = None) -> float:
        """Mean loss (negative log-likelihood or deviance up to constants) at ``margin``.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
        margin : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        weight : ndarray of shape (n_samples,), optional

        Returns
        -------
        float
        """
        F = np.asarray(margin, dtype=np.float64)
        c = self.code
        if c == SOFTMAX:
            F = F - F.max(axis=1, keepdims=True)
            logp = F - np.log(np.exp(F).sum(axis=1, keepdims=True))
            per = -logp[np.arange(len(y)), y.astype(np.int64)]
        elif c == LOGISTIC:
            sF = self.prm[P_SIGMOID] * F
            per = np.logaddexp(0.0, sF) - y * sF
        elif c == OVA:
            sF = self.prm[P_SIGMOID] * F
            onehot = np.arange(F.shape[1])[None, :] == y.astype(np.int64)[:, None]
            per = (np.logaddexp(0.0, sF) - onehot * sF).sum(axis=1)
        elif c == POISSON:
            per = np.exp(F) - y * F
        elif c == GAMMA:
            per = y * np.exp(-F) + F
        elif c == TWEEDIE:
            rho = self.prm[P_TWEEDIE]
            per = -y * np.exp((1 - rho) * F) / (1 - rho) + np.exp((2 - rho) * F) / (2 - rho)
        elif c == PSEUDO_HUBER:
            d = self.prm[P_HUBER]
            per = d * d * (np.sqrt(1 + ((F - y) / d) ** 2) - 1)
        elif c == SQUARED_LOG:
            per = 0.5 * (np.log1p(np.maximum(F, -1 + 1e-6)) - np.log1p(y)) ** 2
        elif c == HINGE:
            per = np.maximum(0.0, 1 - (2 * y - 1) * F)
        else:
            per = 0.5 * (y - F) ** 2
        if weight is None:
            return float(np.mean(per))
        return float(np.sum(weight * per) / np.sum(weight))


def get_objective(ens) -> Objective:
    """The ``Objective`` of a TreeEnsemble.

    Parameters
    ----------
    ens : TreeEnsemble

    Returns
    -------
    Objective

    Raises
    ------
    NotImplementedError
        For objectives with no gradient here (ranking, survival, quantile, absolute error).
    """
    name = ens.objective
    p = ens.objective_params
    prm = np.zeros(N_PARAMS)
    prm[P_HESS_SCALE] = 1.0
    prm[P_POS_WEIGHT] = float(p.get("scale_pos_weight", 1.0))
    prm[P_MIN_HESS] = 0.0
    prm[P_SIGMOID] = 1.0
    if ens.source in ("lightgbm", "catboost"):
        # each adapter module knows its booster's objective names and conventions
        from importlib import import_module

        adapter = import_module(f".adapters.{ens.source}", __package__)
        code, prm = adapter.kernel_objective(name, p, ens.n_outputs, prm)
        return Objective(name=name, code=code, prm=prm, n_outputs=ens.n_outputs)
    if ens.source in ("xgboost", "treeinner"):  # the native booster uses XGBoost's names
        if name not in _XGB_CODES:
            raise NotImplementedError(
                f"Objective {name!r} has no per-row gradient here (ranking and refit objectives "
                "are supported for prediction only)."
            )
        code = _XGB_CODES[name]
        if code == SOFTMAX:
            prm[P_HESS_SCALE] = 2.0
        if code in (LOGISTIC, SOFTMAX, HINGE):
            prm[P_MIN_HESS] = 1e-16
        if code == SQUARED_LOG:
            prm[P_MIN_HESS] = 1e-6
        prm[P_MAX_DELTA] = float(p.get("max_delta_step", 0.7)) if code == POISSON else 0.0
        prm[P_TWEEDIE] = float(p.get("tweedie_variance_power", 1.5))
        prm[P_HUBER] = float(p.get("huber_slope", 1.0))
    else:
        raise NotImplementedError(f"Objectives of {ens.source} models are not supported yet.")
    return Objective(name=name, code=code, prm=prm, n_outputs=ens.n_outputs)


@njit(cache=True, inline="always")
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@njit(cache=True, inline="always")
def grad_hess(code, prm, y, f):
    """Gradient and hessian of one single-output row at margin ``f``."""
    if code == SQUARED:
        return f - y, 1.0
    if code == LOGISTIC:
        s = prm[P_SIGMOID]
        w = prm[P_POS_WEIGHT] if y == 1.0 else 1.0
        if s == 1.0:
            p = _sigmoid(f)
            return (p - y) * w, max(p * (1.0 - p), prm[P_MIN_HESS]) * w
        p = _sigmoid(s * f)
        return s * (p - y) * w, max(s * s * p * (1.0 - p), prm[P_MIN_HESS]) * w
    if code == POISSON:
        return np.exp(f) - y, np.exp(f + prm[P_MAX_DELTA])
    if code == GAMMA:
        e = y * np.exp(-f)
        return 1.0 - e, e
    if code == TWEEDIE:
        rho = prm[P_TWEEDIE]
        a = np.exp((1.0 - rho) * f)
        b = np.exp((2.0 - rho) * f)
        return -y * a + b, -y * (1.0 - rho) * a + (2.0 - rho) * b
    if code == PSEUDO_HUBER:
        d = prm[P_HUBER]
        z = f - y
        scale = 1.0 + (z / d) ** 2
        sq = np.sqrt(scale)
        return z / sq, 1.0 / (scale * sq)
    if code == SQUARED_LOG:
        p = max(f, -1.0 + 1e-6)
        r = np.log1p(p) - np.log1p(y)
        return r / (p + 1.0), max((1.0 - r) / ((p + 1.0) * (p + 1.0)), prm[P_MIN_HESS])
    if code == HINGE:
        yy = 2.0 * y - 1.0
        if f * yy < 1.0:
            return -yy, 1.0
        return 0.0, prm[P_MIN_HESS]
    return f - y, 1.0


@njit(cache=True)
def grad_hess_row(code, prm, y, F, g, h):
    """Gradient and hessian of one row at margins ``F`` (one per output) into ``g``, ``h``."""
    K = F.shape[0]
    if code == SOFTMAX:
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
            h[c] = max(prm[P_HESS_SCALE] * p * (1.0 - p), prm[P_MIN_HESS])
        return
    if code == OVA:
        label = np.int64(y)
        for c in range(K):
            g[c], h[c] = grad_hess(LOGISTIC, prm, 1.0 if c == label else 0.0, F[c])
        return
    g[0], h[0] = grad_hess(code, prm, y, F[0])
