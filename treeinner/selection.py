"""Feature selection on held-out data: keep the features a trained model really relies on."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._methods import REGISTRY, get, resolve

__all__ = ["select_features"]


def _resolve_method(method: Any, attribution: Any) -> str:
    """The registry name (the ``treeinner.importance`` column) of one ``method`` with
    ``attribution``: ``"tree_inner"`` with ``"shap"`` is ``tree_inner_shap``; a name that
    carries its attribution must not contradict a non-default ``attribution``."""
    _api.check_attribution(attribution)
    _api.check_choice("method", method, tuple(REGISTRY))
    (name,) = resolve(method, attribution)
    return name


def _check_threshold(threshold: Any) -> float:
    if (
        not isinstance(threshold, numbers.Real)
        or isinstance(threshold, bool)
        or np.isnan(float(threshold))
    ):
        raise ValueError(f"threshold must be a real number (not NaN), got {threshold!r}.")
    return float(threshold)


def _check_top_k(top_k: Any) -> int | None:
    if top_k is None:
        return None
    if not isinstance(top_k, numbers.Integral) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}.")
    return int(top_k)


def _encode_labels(model: Any, y: Any) -> Any:
    """Labels of a scikit-learn classifier wrapper as positions in its ``classes_``.

    The objectives check labels in the booster's own coding (0, 1, ..., K-1); a classifier
    wrapper fitted on other labels (strings, {3, 7}) keeps them in ``classes_``.
    """
    classes = getattr(model, "classes_", None)
    if classes is None or not hasattr(model, "predict_proba"):
        return y
    try:
        classes = np.asarray(classes)
        yv = np.asarray(y)
        if yv.ndim == 2 and yv.shape[1] == 1:
            yv = yv[:, 0]
        if classes.ndim != 1 or yv.ndim != 1 or classes.size == 0:
            return y
        if classes.dtype.kind in "iuf" and yv.dtype.kind in "iuf":
            if np.array_equal(classes, np.arange(classes.size)):
                return y  # already the booster's coding
        order = np.argsort(classes, kind="stable")
        pos = np.searchsorted(classes, yv, sorter=order)
        pos = order[np.clip(pos, 0, classes.size - 1)]
        known = classes[pos] == yv
    except TypeError:  # labels that do not compare with the classes: let the objective say so
        return y
    if not np.all(known):
        raise ValueError(
            f"y has labels the classifier was not trained on: {np.unique(yv[~known])[:5]}; "
            f"its classes are {classes[:10]}."
        )
    return pos.astype(np.float64)


def _needs_reference(model: Any) -> bool:
    """Whether the model keeps no hessian covers (CatBoost beyond RMSE), so that the methods
    the registry marks ``uses_reference`` need the training data."""
    from .adapters import from_model

    return not bool(np.all(np.isfinite(from_model(model).cover)))


def _feature_scores(
    model: Any,
    X: Any,
    y: Any,
    column: str,
    *,
    sample_weight: Any = None,
    random_state: Any = None,
    reference: Any = None,
) -> pd.Series:
    """Scores of one registry method (totals over classes), indexed by the model's feature
    names in the model's feature order. ``reference=(X_train, y_train[, w])`` goes to the
    methods that use training data (``uses_reference``) and is dropped for the others."""
    from .importance import importance

    method = get(column)
    y = _encode_labels(model, y)
    if reference is not None:
        if not isinstance(reference, (tuple, list)) or len(reference) not in (2, 3):
            raise ValueError(
                "reference must be (X_train, y_train) or (X_train, y_train, sample_weight)."
            )
        reference = (reference[0], _encode_labels(model, reference[1]), *reference[2:])
        if not method.uses_reference:
            reference = None
    try:
        frame = importance(
            model,
            X,
            y,
            methods=[column],
            sample_weight=sample_weight,
            random_state=random_state,
            reference=reference,
        )
    except ValueError as e:
        if reference is None and "reference=" in str(e) and method.uses_reference:
            raise ValueError(f"{e} select_features: pass reference=(X_train, y_train).") from e
        raise
    return frame[column].astype(np.float64)


def _keep(scores: np.ndarray, threshold: float, top_k: int | None) -> np.ndarray:
    """Boolean mask: score > threshold (NaN never passes), then the top_k highest of those
    (ties broken by feature order)."""
    keep = np.zeros(scores.shape[0], dtype=bool)
    passing = np.flatnonzero(~np.isnan(scores) & (scores > threshold))
    if top_k is not None and passing.size > top_k:
        order = np.argsort(-scores[passing], kind="stable")
        passing = passing[order[:top_k]]
    keep[passing] = True
    return keep


@public
def select_features(
    model: Any,
    X: Any,
    y: Any,
    *,
    method: str = "tree_inner",
    attribution: str = "predecomp",
    threshold: float = 0.0,
    top_k: int | None = None,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
) -> list[str]:
    """The features a trained model relies on, judged on held-out data.

    Scores every feature with one method of ``treeinner.importance`` on the held-out rows
    ``(X, y)``, keeps the features whose score is above ``threshold`` and then, if ``top_k`` is
    given, the ``top_k`` highest of those. On validation data TreeInner (the default) is
    negative for a feature the model only overfit, so ``threshold=0`` drops it.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        An XGBoost, LightGBM or CatBoost model (Booster or scikit-learn wrapper), a
        ``treeinner.booster.GBMRegressor`` / ``GBMClassifier``, or a TreeEnsemble.
    X : array-like, DataFrame or scipy sparse matrix
        Held-out rows (not the training data: on the training rows TreeInner is the total
        gain, which is positive for every feature used).
    y : array-like of shape (n_samples,)
        Their labels. For a scikit-learn classifier wrapper fitted on other labels (strings,
        ``{3, 7}``), labels are encoded as positions in its ``classes_`` first.
    method : str, default "tree_inner"
        One method of ``treeinner.importance`` (any name of its registry): ``tree_inner``,
        ``forest_inner`` (their ``_saabas`` / ``_shap`` variants), ``unbiased_gain``,
        ``permutation``, ``total_gain``, ``abs_predecomp``, ``abs_saabas``, ``abs_shap``.
        For multiclass models the score is the total over classes.
    attribution : {"predecomp", "saabas", "shap"}, default "predecomp"
        The per-tree attribution of ``tree_inner`` and ``forest_inner``
        (``method="tree_inner", attribution="shap"`` is ``tree_inner_shap``); ignored by the
        other methods. A method that names its attribution (``tree_inner_shap``) must not be
        contradicted by a non-default ``attribution``.
    threshold : float, default 0.0
        Keep features whose score is strictly greater. ``-inf`` keeps every feature with a
        score (use it with ``top_k`` to rank by the score alone).
    top_k : int or None, default None
        Keep at most this many features, the highest scores among those above ``threshold``
        (ties go to the earlier feature).
    sample_weight : array-like of shape (n_samples,), optional
        Row weights of the evaluation rows.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``, the training data: PreDecomp node values
        (``tree_inner``, ``forest_inner``, ``abs_predecomp``) and the unbiased gain's training
        sums are computed from it instead of the model's stored statistics. Needed for models
        that store no hessian covers (CatBoost with losses other than RMSE); ignored by the
        methods that do not use training data.
    random_state : int, numpy Generator or None, default None
        Seed of ``permutation`` and ``unbiased_gain`` (the other methods are deterministic).

    Returns
    -------
    list of str
        The kept feature names, in the model's feature order. Empty (with a warning) when no
        feature scores above ``threshold``. A feature whose score is NaN (``total_gain`` of a
        CatBoost model, which stores no gains) is never kept.

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``attribution`` (the message lists every choice), a NaN
        or non-numeric ``threshold``, a ``top_k`` that is not a positive integer, labels
        invalid for the model's objective, or a method that gives no score at all for this
        model.

    Examples
    --------
    >>> kept = treeinner.select_features(model, X_valid, y_valid)  # doctest: +SKIP
    >>> kept = treeinner.select_features(model, X_valid, y_valid, method="unbiased_gain",
    ...                                  top_k=10, random_state=0)  # doctest: +SKIP
    >>> kept = treeinner.select_features(model, X_valid, y_valid, method="tree_inner",
    ...                                  attribution="shap")  # doctest: +SKIP
    """
    column = _resolve_method(method, attribution)
    threshold = _check_threshold(threshold)
    top_k = _check_top_k(top_k)
    scores = _feature_scores(
        model,
        X,
        y,
        column,
        sample_weight=sample_weight,
        random_state=random_state,
        reference=reference,
    )
    values = scores.to_numpy()
    if values.size and np.all(np.isnan(values)):
        raise ValueError(f"method {column!r} gives no score for this model (all NaN).")
    keep = _keep(values, threshold, top_k)
    if not keep.any():
        warnings.warn(
            f"No feature scores above threshold={threshold:g} with {column!r} (highest: "
            f"{np.nanmax(values) if values.size else float('nan'):.6g}); returning an empty list.",
            UserWarning,
            stacklevel=2,
        )
    return [str(name) for name, k in zip(scores.index, keep) if k]
