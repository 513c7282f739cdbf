"""How sure is a held-out importance? Scores with standard errors, intervals, p-values and
false-discovery-rate q-values, from the pass that computes the scores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import _api, _crossfit, _stats, objectives
from ._api import public
from ._errors import InputError, InputTypeError
from ._methods import (
    RECOMMENDED_METHOD,
    Method,
    Options,
    get,
    resolve,
    significance_table,
    warn_shared_credit,
)
from ._staged import _weights
from .adapters import from_model
from .ensemble import TreeEnsemble

__all__ = ["significance"]

#: What ``treeinner.significance`` tests when no method is named: the recommended method, the
#: same score that ranks. Centred on the held-out rows, its population value is zero for a
#: feature independent of the target, for every loss (docs/methods.md, "The centred initial
#: form"; ``benchmarks/bench_null_calibration.py``).
DEFAULT_SIGNIFICANCE_METHODS: tuple[str, ...] = (RECOMMENDED_METHOD,)


def estimates(
    ens: TreeEnsemble, X: Any, y: Any, methods: Sequence[Method], opts: Options
) -> tuple[dict[str, _stats.Estimate | None], dict[str, np.ndarray]]:
    """Each method's estimate (None for a method without a sampling error), and the plain
    scores of those without one."""
    est: dict[str, _stats.Estimate | None] = {}
    plain: dict[str, np.ndarray] = {}
    for m in methods:
        e = m.estimate(ens, X, y, opts)
        est[m.name] = e
        if e is None:
            plain[m.name] = m.score(ens, X, y, opts)
    return est, plain


@public
def significance(
    model: Any,
    X: Any,
    y: Any,
    *,
    methods: str | Sequence[str] = DEFAULT_SIGNIFICANCE_METHODS,
    attribution: str | None = None,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
    alpha: float = 0.05,
    cv: Any = None,
) -> pd.DataFrame:
    """Held-out importance with its sampling error: score, standard error, interval, p-value
    and q-value for every feature.

    TreeInner, ForestInner and mean |attribution| are sums (or means) over the held-out rows
    of per-row terms, so their standard error over rows comes from the same pass as the
    score: ``sqrt(n/(n-1) sum_i (c_i - mean c)^2)`` per feature, with ``c_i`` the weighted
    per-row terms. The unbiased gain's comes from its per-row linearisation (plus, where it
    draws rows, the variance of the draws). The model is held fixed: the standard error says
    how much the score would move on another held-out set of the same size from the same
    population.

    With ``cv``, ``model`` is an estimator to cross-fit instead: it is cloned and fitted on
    the training rows of each split of ``(X, y)``, each split's held-out rows are scored by
    that split's model only, and the per-row terms of all held-out rows are pooled into one
    score and one standard error (the folds are independent strata: their sums and variances
    add; a mean method is the weighted mean of the folds' means). Every row is then scored by
    a model that did not see it, and all rows count, not an average of K noisy fold scores.

    Parameters
    ----------
    model : TreeEnsemble, a supported booster, or (with ``cv``) an estimator
        With ``cv``: a scikit-learn-style estimator (XGBoost, LightGBM or CatBoost
        scikit-learn wrapper, ``treeinner.booster.GBMRegressor`` / ``GBMClassifier``),
        cloned for every split and never fitted itself.
    X : array-like, DataFrame or scipy sparse matrix
        Held-out rows (not used in training); with ``cv``, all rows.
    y : array-like of shape (n_samples,) or None
        Their labels (None only if no method needs them). With ``cv``, the targets the
        estimator is fitted on (for classifier wrappers, labels are then encoded as positions
        in each fold model's ``classes_``).
    methods : str or sequence of str, default "forest_inner_initial"
        Names of the method registry (``treeinner.METHODS``). The default is the recommended
        method, the score that ranks: ForestInner's initial
        form centred on the held-out rows, whose p-values for a feature independent of the
        target hold their level (docs/concepts.md, "Which method to use"). ``tree_inner``'s
        held-out score for a feature the model only overfit is below zero, so its p-values
        are conservative. The methods with a one-pass sampling error are ``tree_inner``,
        ``forest_inner``, ``forest_inner_initial`` (and their ``_saabas`` / ``_shap``
        variants), ``abs_predecomp``, ``abs_saabas``, ``abs_shap`` and ``unbiased_gain``; the
        others (``total_gain``, ``permutation``) appear with NaN statistics.
    attribution : {"predecomp", "saabas", "shap"}, optional
        The attribution of ``tree_inner`` and ``forest_inner``.
    sample_weight : array-like of shape (n_samples,), optional
        Weights of the held-out rows (with ``cv``: of all rows, in fitting and in scoring).
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: the training data, for the methods that use
        it (as in ``treeinner.importance``). Not with ``cv``: each split's training rows are
        its model's training data (given to these methods when the model stores no hessian
        covers).
    random_state : int, numpy Generator or None
        Seed of the unbiased gain's draws and of ``permutation``; with ``cv=int``, also of
        the shuffled folds.
    alpha : float, default 0.05
        The intervals are ``1 - alpha`` two-sided normal intervals, ``score +- z se``.
    cv : int, cross-validation splitter, iterable of (train, test) or None, default None
        Cross-fit ``model`` (see above). An int K gives K shuffled folds (stratified by class
        for classifiers) seeded by ``random_state``; a scikit-learn splitter's
        ``split(X, y)`` or the given (train, test) row positions are used as they are. Each
        row may be held out by at most one split; rows held out by none are not scored.

    Returns
    -------
    pandas.DataFrame
        One row per method and feature (for multi-output models, per method, output and
        feature, the outputs being each class and ``total``), with columns ``method``,
        ``feature`` (``output``), ``score``, ``se``, ``ci_low``, ``ci_high``, ``p_value``
        (one-sided, for "the score is <= 0 on new data": ``1 - Phi(score / se)``) and
        ``q_value`` (Benjamini-Hochberg over the features of one method and output; features
        with score and standard error both exactly 0, which no held-out row gives evidence
        on, are not counted as tests and get q = 1). With ``cv``, the methods without a
        sampling error (``total_gain``, ``permutation``) show the mean of their fold scores
        weighted by the folds' held-out row weights.

    Examples
    --------
    >>> table = treeinner.significance(model, X_valid, y_valid)  # doctest: +SKIP
    >>> table[table.q_value <= 0.1].feature.tolist()  # doctest: +SKIP
    >>> pooled = treeinner.significance(xgb.XGBRegressor(), X, y, cv=5)  # doctest: +SKIP
    """
    alpha = _api.check_alpha(alpha)
    _api._check_random_state(random_state)  # checked even where no method draws
    chosen = [get(name) for name in resolve(_api.check_names("methods", methods), attribution)]
    if cv is not None or any(m.uses_data for m in chosen):
        _api.check_rows(X)
    if y is None and any(m.needs_y for m in chosen):
        raise InputError(
            f"y is None, but {[m.name for m in chosen if m.needs_y]} need the labels of X."
        )
    if reference is not None and not any(m.uses_reference for m in chosen):
        raise InputError(
            f"reference= is not used by any of {[m.name for m in chosen]}; drop it or add a "
            "method that uses the training data."
        )
    if cv is not None:
        est, plain, names, n_outputs = _crossfit_estimates(
            model, X, y, chosen, cv, sample_weight, reference, random_state
        )
    else:
        ens = from_model(model)
        warn_shared_credit(ens, chosen)
        opts = Options(sample_weight=sample_weight, reference=reference, random_state=random_state)
        est, plain = estimates(ens, X, y, chosen, opts)
        names, n_outputs = list(ens.output_names), ens.n_outputs
    return significance_table(est, plain, names, n_outputs, alpha)


def _crossfit_estimates(
    estimator: Any,
    X: Any,
    y: Any,
    methods: Sequence[Method],
    cv: Any,
    sample_weight: Any,
    reference: Any,
    random_state: Any,
) -> tuple[dict[str, _stats.Estimate | None], dict[str, np.ndarray], list[str], int]:
    """``significance``'s estimates with ``cv``: the estimator cross-fitted and the folds
    pooled (``_crossfit``)."""
    from sklearn.base import is_classifier
    from sklearn.utils import check_random_state

    cv = _crossfit.check_cv(cv)
    if reference is not None:
        raise InputError(
            "reference= is not taken with cv=: each split's training rows are its model's "
            "training data."
        )
    if not hasattr(estimator, "fit") or not hasattr(estimator, "get_params"):
        raise InputTypeError(
            "With cv=, model must be a scikit-learn-style estimator to fit on each split (an "
            "XGBoost, LightGBM or CatBoost scikit-learn wrapper or a treeinner.booster "
            f"estimator), got {type(estimator).__name__}."
        )
    if y is None:
        raise InputError("With cv=, y is needed to fit the estimator on each split.")
    yv = np.asarray(y)
    if yv.ndim == 2 and yv.shape[1] == 1:
        yv = yv[:, 0]
    yv = objectives.keep_soft(y, yv)  # the folds' labels stay marked as soft
    n = _api.n_rows(X)
    if yv.ndim != 1 or yv.shape[0] != n:
        raise InputError(f"y must have shape ({n},) like X's rows, got {yv.shape}.")
    sw = None if sample_weight is None else _weights(sample_weight, n)
    rs = _api._check_random_state(random_state)
    if isinstance(rs, np.random.Generator):
        seed = int(rs.integers(0, 2**31 - 1))
    else:  # as TreeInnerSelector: the same random_state gives the same folds
        seed = int(check_random_state(rs).randint(np.iinfo(np.int32).max))
    splits = _crossfit.split_rows(X, yv, cv, classifier=is_classifier(estimator), seed=seed)
    fit = _crossfit.crossfit(
        estimator, X, yv, methods, splits, sample_weight=sw, random_state=random_state
    )
    return fit.estimates, fit.scores, fit.feature_names, fit.n_outputs
