"""Minimal stand-ins for scikit-learn's base classes when scikit-learn is not installed: the
estimators keep ``get_params``/``set_params`` (so tools that clone estimators work), ``score``
and the NotFittedError type."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from .._errors import InputError


class NotFittedError(InputError, AttributeError):
    """Raised when a model is used before it is fitted."""


class BaseEstimator:
    """``get_params`` / ``set_params`` from the ``__init__`` signature, as in scikit-learn."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params: Any) -> BaseEstimator:
        valid = set(self._param_names())
        for k, v in params.items():
            if k not in valid:
                raise InputError(f"Invalid parameter {k!r} for {type(self).__name__}.")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RegressorMixin:
    """``score``: the coefficient of determination R^2."""

    _estimator_type = "regressor"
    predict: Any  # the estimator's

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        y = np.asarray(y, dtype=np.float64)
        pred = self.predict(X)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
        mean = np.average(y, weights=w)
        return 1.0 - np.sum(w * (y - pred) ** 2) / np.sum(w * (y - mean) ** 2)


class ClassifierMixin:
    """``score``: the (weighted) accuracy."""

    _estimator_type = "classifier"
    predict: Any  # the estimator's

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        return float(np.average(self.predict(X) == np.asarray(y), weights=sample_weight))
