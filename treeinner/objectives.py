"""Gradient, hessian, inverse link and loss of every objective the adapters support.

The gradient and hessian follow each booster's own convention where they differ (XGBoost's
softmax hessian is 2 p (1 - p); its Poisson hessian is exp(F + max_delta_step)); they are what
the booster summed into its node statistics, so the total-gain identity holds with them. Inside
the Numba kernels an objective is an integer ``code`` and a float64 parameter vector ``prm``
(the codes and slots of ``treeinner._format``); ``kernels.gradients.grad_hess_row`` evaluates
one row for all outputs at once. Which code and parameters a model's objective has is decided
by its adapter when the ensemble is built (``TreeEnsemble.grad_objective``, ``grad_params``);
``get_objective`` only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _format as fmt
from ._errors import InputError, UnsupportedModelError

__all__ = ["Objective", "SoftLabels", "get_objective", "keep_soft"]

# Logistic objectives whose labels are probabilities by definition (not binary classifiers)
_PROBABILITY_LABELS = frozenset({"reg:logistic", "cross_entropy", "xentropy", "CrossEntropy"})


class SoftLabels(np.ndarray):
    """Labels that are probabilities on purpose (soft labels), for a binary classifier.

    A binary classifier (a logistic objective such as XGBoost's ``binary:logistic``,
    LightGBM's ``binary``, CatBoost's ``Logloss``) refuses labels other than 0 and 1, which
    are usually a mistake (probabilities or scores passed as y). Wrap y to say they are
    intended: ``tree_inner(model, X, treeinner.SoftLabels(p))``; every function that takes
    labels (and ``reference=(X_train, SoftLabels(p_train))``) then accepts values in [0, 1].

    It is a float64 array (a copy of y): indexing it keeps the marker.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels in [0, 1].

    Examples
    --------
    >>> treeinner.tree_inner(model, X, treeinner.SoftLabels(p))  # doctest: +SKIP
    """

    def __init__(self, y: Any) -> None:
        """The data is copied by ``__new__``; documented here for the signature."""

    def __new__(cls, y: Any) -> SoftLabels:
        """A copy of ``y`` as float64 soft labels (owning its memory)."""
        data = np.asarray(y, dtype=np.float64)
        out = np.ndarray.__new__(cls, data.shape, np.float64)
        out[...] = data
        return out


def keep_soft(source: Any, y: Any) -> Any:
    """``y`` (labels derived from ``source``: converted, indexed, encoded) as ``SoftLabels``
    when ``source`` is: for code that copies labels (fancy indexing of a plain array) before
    they reach ``Objective.check_labels``."""
    return SoftLabels(y) if _soft(source) and not isinstance(y, SoftLabels) else y


def _soft(y: Any) -> bool:
    """Whether y is (a view of) ``SoftLabels``: np.asarray and slicing keep the owner."""
    seen = 0
    while isinstance(y, np.ndarray) and seen < 64:
        if isinstance(y, SoftLabels):
            return True
        y, seen = y.base, seen + 1
    return False


@dataclass(frozen=True)
class Objective:
    """An objective as the kernels see it.

    Attributes
    ----------
    name : str
        The source booster's name for it.
    code : int
        Kernel code (``SQUARED`` ... ``OVA`` of ``treeinner._format``).
    prm : ndarray of float64
        Kernel parameters (hessian scale, Poisson max_delta_step, tweedie power, huber slope,
        scale_pos_weight, hessian floor, sigmoid; the ``P_*`` slots of ``treeinner._format``).
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
        return self.code == fmt.SQUARED

    def check_labels(self, y: np.ndarray, n: int | None = None) -> np.ndarray:
        """Validate labels for this objective and return them as float64.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
        n : int, optional
            The number of rows of X the labels belong to, checked against their length.

        Returns
        -------
        ndarray of float64

        Raises
        ------
        ValueError
            If labels are missing, non-finite or outside the objective's domain; for a binary
            classifier (a logistic objective other than the probability-label ones), labels
            other than 0 and 1 unless y is ``SoftLabels``.
        """
        soft = _soft(y)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise InputError(f"y must be 1-D; got shape {y.shape}.")
        if n is not None and y.shape[0] != n:
            raise InputError(f"X has {n} rows but y has {y.shape[0]}.")
        if y.dtype.kind not in "biuf":
            raise InputError(f"y must be numeric for the {self.name} objective; got {y.dtype}.")
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinite labels.")
        c = self.code
        bad = None
        if c == fmt.LOGISTIC and np.any((y < 0) | (y > 1)):
            bad = "labels must be in [0, 1]"
        elif (
            c == fmt.LOGISTIC
            and not soft
            and self.name not in _PROBABILITY_LABELS
            and np.any((y != 0) & (y != 1))
        ):
            shown = ", ".join(f"{v:g}" for v in np.unique(y[(y != 0) & (y != 1)])[:3])
            raise InputError(
                f"Invalid labels for the {self.name} objective (a binary classifier): labels "
                f"must be 0 or 1; got {shown}. If these are soft labels (probabilities) on "
                "purpose, pass y as treeinner.SoftLabels(y)."
            )
        elif c == fmt.HINGE and np.any((y != 0) & (y != 1)):
            bad = "labels must be 0 or 1"
        elif c in (fmt.SOFTMAX, fmt.OVA) and (
            np.any(y != np.round(y)) or np.any(y < 0) or np.any(y >= self.n_outputs)
        ):
            bad = f"labels must be integer classes in [0, {self.n_outputs})"
        elif c in (fmt.POISSON, fmt.TWEEDIE) and np.any(y < 0):
            bad = "labels must be >= 0"
        elif c == fmt.GAMMA and np.any(y <= 0):
            bad = "labels must be > 0"
        elif c == fmt.SQUARED_LOG and np.any(y <= -1):
            bad = "labels must be > -1"
        if bad:
            raise InputError(f"Invalid labels for the {self.name} objective: {bad}.")
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
        if c == fmt.SOFTMAX:
            e = np.exp(F - F.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        if (c == fmt.LOGISTIC and self.name != "binary:logitraw") or c == fmt.OVA:
            return 1.0 / (1.0 + np.exp(-self.prm[fmt.P_SIGMOID] * F))
        if c in (fmt.POISSON, fmt.GAMMA, fmt.TWEEDIE):
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
        per = self.losses(y, margin)
        if weight is None:
            return float(np.mean(per))
        return float(np.sum(weight * per) / np.sum(weight))

    def losses(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The loss of every row at ``margin`` (``loss`` is their (weighted) mean).

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
        margin : ndarray of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        F = np.asarray(margin, dtype=np.float64)
        c = self.code
        if c == fmt.SOFTMAX:
            F = F - F.max(axis=1, keepdims=True)
            logp = F - np.log(np.exp(F).sum(axis=1, keepdims=True))
            per = -logp[np.arange(len(y)), y.astype(np.int64)]
        elif c == fmt.LOGISTIC:
            sF = self.prm[fmt.P_SIGMOID] * F
            per = np.logaddexp(0.0, sF) - y * sF
        elif c == fmt.OVA:
            sF = self.prm[fmt.P_SIGMOID] * F
            onehot = np.arange(F.shape[1])[None, :] == y.astype(np.int64)[:, None]
            per = (np.logaddexp(0.0, sF) - onehot * sF).sum(axis=1)
        elif c == fmt.POISSON:
            per = np.exp(F) - y * F
        elif c == fmt.GAMMA:
            per = y * np.exp(-F) + F
        elif c == fmt.TWEEDIE:
            rho = self.prm[fmt.P_TWEEDIE]
            per = -y * np.exp((1 - rho) * F) / (1 - rho) + np.exp((2 - rho) * F) / (2 - rho)
        elif c == fmt.PSEUDO_HUBER:
            d = self.prm[fmt.P_HUBER]
            per = d * d * (np.sqrt(1 + ((F - y) / d) ** 2) - 1)
        elif c == fmt.SQUARED_LOG:
            per = 0.5 * (np.log1p(np.maximum(F, -1 + 1e-6)) - np.log1p(y)) ** 2
        elif c == fmt.HINGE:
            per = np.maximum(0.0, 1 - (2 * y - 1) * F)
        else:
            per = 0.5 * (y - F) ** 2
        return per


def get_objective(ens: Any) -> Objective:
    """The ``Objective`` of a TreeEnsemble, as its adapter decided it.

    Parameters
    ----------
    ens : TreeEnsemble

    Returns
    -------
    Objective

    Raises
    ------
    NotImplementedError
        For objectives with no gradient here (ranking, survival, quantile, absolute error):
        ``ens.grad_objective`` is -1 and the message is ``ens.no_gradient``.
    """
    if ens.grad_objective < 0:
        raise UnsupportedModelError(ens.no_gradient)
    return Objective(
        name=ens.objective,
        code=int(ens.grad_objective),
        prm=np.array(ens.grad_params, dtype=np.float64),  # a writable copy for the kernels
        n_outputs=ens.n_outputs,
    )
