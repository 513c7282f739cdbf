"""Feature selection on held-out data: keep the features a trained model really relies on."""

from __future__ import annotations

import warnings
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._crossfit import encode_labels as _encode_labels
from ._errors import InputError
from ._methods import RECOMMENDED_METHOD, REGISTRY, Method, get, resolve
from ._significance import significance
from .attribution import NeedsReference

__all__ = ["DEFAULT_ALPHA", "DEFAULT_RULE", "RULES", "select_features"]

#: The selection rules: keep by false discovery rate, drop only the confidently useless, or
#: keep the scores above a threshold.
RULES: tuple[str, ...] = ("fdr", "interval", "threshold")

#: The rule ``select_features``, ``TreeInnerSelector`` and ``treeinner select`` apply to a
#: method with standard errors when neither a rule nor a threshold is given: keep the features
#: shown to help on new data at a false discovery rate. The default method's score has a
#: population value of zero for a feature independent of the target, so ``"interval"`` (drop
#: only the confidently useless) would keep such a feature whenever its estimate is not
#: clearly negative: 80% of the time at its level 0.2.
DEFAULT_RULE = "fdr"

#: The level of each rule when ``alpha`` is None (the default of ``select_features``,
#: ``TreeInnerSelector`` and ``treeinner select``): the false discovery rate 0.1 for ``"fdr"``;
#: for ``"interval"`` 0.2, so a feature is dropped when its one-sided 80% upper bound is at or
#: below 0 (the level tuned when TreeInner, which turns negative for what a model overfit, was
#: the default score; ``docs/selection_benchmark.md`` reruns the sweep). The threshold rule
#: keeps by its threshold and has no level.
DEFAULT_ALPHA: dict[str, float] = {"fdr": 0.1, "interval": 0.2}

#: The level of the reported significance table under the threshold rule with ``alpha=None``
#: (its intervals are then two-sided 80%, ``ci_high`` the one-sided 90% bound).
_THRESHOLD_TABLE_ALPHA = 0.1

_NORMAL = NormalDist()


def _resolve_method(method: Any, attribution: Any) -> str:
    """The registry name (the ``treeinner.importance`` column) of one ``method`` with
    ``attribution``: ``"tree_inner"`` with ``"shap"`` is ``tree_inner_shap``; a name that
    carries its attribution must not contradict a non-default ``attribution``."""
    _api.check_attribution(attribution)
    _api.check_choice("method", method, tuple(REGISTRY))
    (name,) = resolve(method, attribution)
    return name


def _check_top_k(top_k: Any) -> int | None:
    return _api.check_count("top_k", top_k, optional=True)


def _check_rule(rule: Any, threshold: Any, method: Method) -> tuple[str, float]:
    """The rule to apply and its threshold, from what the caller gave.

    ``rule=None`` is the threshold rule when a ``threshold`` is given or the method has no
    standard error, ``"interval"`` for a mean |attribution| (positive by construction: no
    p-value to control a false discovery rate with), ``DEFAULT_RULE`` otherwise. The
    threshold defaults to 0 and belongs to the threshold rule only.
    """
    if rule is None:
        if threshold is not None or not method.has_se:
            rule = "threshold"
        else:
            rule = DEFAULT_RULE if method.signed else "interval"
    _api.check_choice("rule", rule, RULES)
    if rule != "threshold":
        if threshold is not None:
            raise InputError(
                f"threshold={threshold!r} is the threshold rule's; rule={rule!r} keeps features "
                "by their standard errors at level alpha. Pass rule='threshold' to use a "
                "threshold."
            )
        if not method.has_se:
            with_se = [name for name, m in REGISTRY.items() if m.has_se]
            raise InputError(
                f"rule={rule!r} needs standard errors, which method {method.name!r} does not "
                f"give; use rule='threshold' with it, or a method with standard errors: "
                f"{', '.join(with_se)}."
            )
    return rule, _api.check_real("threshold", 0.0 if threshold is None else threshold)


def _check_alpha(alpha: Any, rule: str) -> float:
    """The selection rules' alpha for ``rule`` (already resolved): None is the rule's
    ``DEFAULT_ALPHA`` (for the threshold rule, which has no level, the level of the table it
    reports: 0.1); otherwise below 0.5, so that the one-sided bound of ``interval`` lies above
    the score."""
    if alpha is None:
        return DEFAULT_ALPHA.get(rule, _THRESHOLD_TABLE_ALPHA)
    return _api.check_alpha(alpha, upper=0.5)


def _keep_by_rule(
    frame: pd.DataFrame, rule: str, *, alpha: float, threshold: float, top_k: int | None
) -> np.ndarray:
    """Boolean mask of the features (rows of ``frame``, with columns ``score``, ``se`` and
    ``q_value``) that ``rule`` keeps, then the ``top_k`` highest scores of those (ties go to
    the earlier feature).

    ``"fdr"``: ``q_value <= alpha``. ``"interval"``: the one-sided upper bound
    ``score + z_{1-alpha} se`` is above 0 (a feature never used, score and se both 0, is
    dropped). ``"threshold"``: ``score > threshold``. NaN never passes.
    """
    score = frame["score"].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if rule == "threshold":
            passing = score > threshold
        elif rule == "fdr":
            passing = frame["q_value"].to_numpy(dtype=np.float64) <= alpha
        elif rule == "interval":
            se = frame["se"].to_numpy(dtype=np.float64)
            passing = score + _NORMAL.inv_cdf(1.0 - alpha) * se > 0.0
        else:  # pragma: no cover - checked by _check_rule
            raise InputError(f"unknown rule {rule!r}")
    idx = np.flatnonzero(passing & ~np.isnan(score))
    if top_k is not None and idx.size > top_k:
        idx = idx[np.argsort(-score[idx], kind="stable")[:top_k]]
    keep = np.zeros(score.shape[0], dtype=bool)
    keep[idx] = True
    return keep


def _totals(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a one-method significance table that selection reads, indexed by feature:
    for multi-output models the totals over the outputs."""
    if "output" in table.columns:
        table = table[table["output"] == "total"]
    return table.set_index("feature")


def _table_level(alpha: float) -> float:
    """The level of the significance table selection reports: its two-sided ``1 - 2 alpha``
    intervals end at the one-sided ``1 - alpha`` bounds of the interval rule."""
    return 2.0 * alpha


def _selection_table(
    model: Any,
    X: Any,
    y: Any,
    column: str,
    alpha: float,
    *,
    sample_weight: Any = None,
    random_state: Any = None,
    reference: Any = None,
) -> pd.DataFrame:
    """The significance table of one registry method (``treeinner.significance`` at the
    level of ``_table_level(alpha)``), after encoding classifier labels and dropping a
    ``reference`` the method does not use."""
    method = get(column)
    y = _encode_labels(model, y)
    if reference is not None:
        if not isinstance(reference, (tuple, list)) or len(reference) not in (2, 3):
            raise InputError(
                "reference must be (X_train, y_train) or (X_train, y_train, sample_weight)."
            )
        reference = (reference[0], _encode_labels(model, reference[1]), *reference[2:])
        if not method.uses_reference:
            reference = None
    try:
        return significance(
            model,
            X,
            y,
            methods=[column],
            sample_weight=sample_weight,
            random_state=random_state,
            reference=reference,
            alpha=_table_level(alpha),
        )
    except ValueError as e:
        named = isinstance(e, NeedsReference)  # already names select_features' reference=
        if reference is None and "reference=" in str(e) and method.uses_reference and not named:
            raise InputError(f"{e} select_features: pass reference=(X_train, y_train).") from e
        raise


def _nothing_kept(rule: str, alpha: float, threshold: float) -> str:
    """The start of the warning when no feature passes."""
    if rule == "threshold":
        return f"No feature scores above threshold={threshold:g}"
    return f"No feature passes rule={rule!r} at alpha={alpha:g}"


@public
def select_features(
    model: Any,
    X: Any,
    y: Any,
    *,
    method: str = RECOMMENDED_METHOD,
    attribution: str = "predecomp",
    rule: str | None = None,
    alpha: float | None = None,
    threshold: float | None = None,
    top_k: int | None = None,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
) -> list[str]:
    """The features a trained model relies on, judged on held-out data.

    Scores every feature with one method of ``treeinner.importance`` on the held-out rows
    ``(X, y)``, with its standard error over those rows (``treeinner.significance``), keeps
    the features that ``rule`` passes and then, if ``top_k`` is given, the ``top_k`` highest
    scores of those. The default, the recommended method ``forest_inner_initial`` (ForestInner's
    initial form, centred on the held-out rows), has a population value of zero for a feature
    the model only overfit, and its standard error says how far from zero a score must be to
    mean something.

    One model and one held-out set cannot refit: this keeps what that model, scored on those
    rows, shows to help. On ``benchmarks/bench_selection.py``'s data sets its default (the
    ``"fdr"`` rule at 0.1) dropped 98% of the added noise columns, with 16% noise among the
    kept features, against 52% and 48% for the sign rule (``rule="threshold"``: score > 0),
    but it also drops weak real features, and the model refit on what it keeps tested 2.5%
    worse than all features on average (``docs/selection_benchmark.md``). When the model can
    be retrained, use ``treeinner.TreeInnerSelector(strategy="recursive")`` instead: it
    cross-fits on all rows, drops the useless features by steps with refits, and chooses the
    set by held-out loss.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        An XGBoost, LightGBM or CatBoost model (Booster or scikit-learn wrapper), a
        scikit-learn ``HistGradientBoosting*`` / ``GradientBoosting*`` estimator, a
        ``treeinner.booster.GBMRegressor`` / ``GBMClassifier``, or a TreeEnsemble.
    X : array-like, DataFrame or scipy sparse matrix
        Held-out rows (not the training data: on the training rows TreeInner is the total
        gain, which is positive for every feature used).
    y : array-like of shape (n_samples,)
        Their labels. For a scikit-learn classifier wrapper fitted on other labels (strings,
        ``{3, 7}``), labels are encoded as positions in its ``classes_`` first.
    method : str, default "forest_inner_initial"
        One method of ``treeinner.importance`` (any name of its registry): the recommended
        ``forest_inner_initial``, ``tree_inner``,
        ``forest_inner`` (their ``_saabas`` / ``_shap`` variants), ``unbiased_gain``,
        ``permutation``, ``total_gain``, ``abs_predecomp``, ``abs_saabas``, ``abs_shap``.
        For multiclass models the score (and its standard error) is the total over classes.
    attribution : {"predecomp", "saabas", "shap"}, default "predecomp"
        The per-tree attribution of ``tree_inner`` and ``forest_inner``
        (``method="tree_inner", attribution="shap"`` is ``tree_inner_shap``); ignored by the
        other methods. A method that names its attribution (``tree_inner_shap``) must not be
        contradicted by a non-default ``attribution``.
    rule : {"fdr", "interval", "threshold"} or None, default None
        Which features to keep:

        * ``"fdr"``: those whose Benjamini-Hochberg q-value is at most ``alpha`` (the
          expected share of useless features among the kept ones is at most ``alpha``): only
          features shown to help on new data.
        * ``"interval"``: drop only the features confidently useless: keep those whose
          one-sided upper confidence bound ``score + z_{1-alpha} se`` is above 0. A feature
          the model never uses (score and standard error both 0) is dropped.
        * ``"threshold"``: those whose score is above ``threshold``, the standard error
          ignored.

        None: ``"threshold"`` if a ``threshold`` is given or the method has no standard error
        (``total_gain``, ``permutation``), ``"interval"`` for a mean |attribution|
        (``abs_shap``, ...: positive by construction, no p-values), else
        ``treeinner.selection.DEFAULT_RULE`` (``"fdr"``: the default method scores a feature
        independent of the target zero in expectation, so only a test of "better than zero"
        tells it apart; ``"interval"`` suits TreeInner, which turns negative for what the
        model overfit). ``"fdr"`` and ``"interval"`` need a method with a standard error.
    alpha : float or None, default None
        Level of ``"fdr"`` (the false discovery rate) and ``"interval"`` (the one-sided
        confidence bound is at level ``1 - alpha``); strictly between 0 and 0.5. None: the
        rule's default, ``treeinner.selection.DEFAULT_ALPHA``: 0.1 for ``"fdr"``, 0.2 for
        ``"interval"`` (drop a feature when its one-sided 80% upper bound is at or below 0).
        The threshold rule keeps by its threshold, not by a level.
    threshold : float or None, default None
        The threshold rule's cut: keep features whose score is strictly greater (None: 0).
        ``-inf`` keeps every feature with a score (use it with ``top_k`` to rank by the score
        alone). Giving it with ``rule="fdr"`` or ``"interval"`` is an error.
    top_k : int or None, default None
        Keep at most this many features, the highest scores among those the rule keeps (ties
        go to the earlier feature).
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
        feature passes the rule. A feature whose score is NaN (``total_gain`` of a CatBoost
        model, which stores no gains) is never kept.

    Raises
    ------
    ValueError
        For an unknown ``method``, ``attribution`` or ``rule`` (the message lists every
        choice), ``rule="fdr"`` or ``"interval"`` with a method without standard errors or
        with a ``threshold``, an ``alpha`` outside (0, 0.5), a NaN or non-numeric
        ``threshold``, a ``top_k`` that is not a positive integer, labels invalid for the
        model's objective, or a method that gives no score at all for this model.

    See Also
    --------
    treeinner.significance : the scores, standard errors, p-values and q-values the rules read.
    treeinner.TreeInnerSelector : the same rules, fitting the model on each split itself.

    Examples
    --------
    >>> kept = treeinner.select_features(model, X_valid, y_valid)  # doctest: +SKIP
    >>> kept = treeinner.select_features(model, X_valid, y_valid, rule="fdr", alpha=0.05)
    ... # doctest: +SKIP
    >>> kept = treeinner.select_features(model, X_valid, y_valid, method="unbiased_gain",
    ...                                  top_k=10, random_state=0)  # doctest: +SKIP
    >>> kept = treeinner.select_features(model, X_valid, y_valid, method="permutation",
    ...                                  threshold=0.001)  # doctest: +SKIP
    """
    column = _resolve_method(method, attribution)
    rule, threshold = _check_rule(rule, threshold, get(column))
    alpha = _check_alpha(alpha, rule)
    top_k = _check_top_k(top_k)
    frame = _totals(
        _selection_table(
            model,
            X,
            y,
            column,
            alpha,
            sample_weight=sample_weight,
            random_state=random_state,
            reference=reference,
        )
    )
    values = frame["score"].to_numpy(dtype=np.float64)
    if values.size and np.all(np.isnan(values)):
        raise InputError(f"method {column!r} gives no score for this model (all NaN).")
    keep = _keep_by_rule(frame, rule, alpha=alpha, threshold=threshold, top_k=top_k)
    if not keep.any():
        warnings.warn(
            f"{_nothing_kept(rule, alpha, threshold)} with {column!r} (highest score: "
            f"{np.nanmax(values) if values.size else float('nan'):.6g}); returning an empty list.",
            UserWarning,
            stacklevel=2,
        )
    return [str(name) for name, k in zip(frame.index, keep) if k]
