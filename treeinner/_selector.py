"""TreeInnerSelector: a scikit-learn meta-transformer that keeps the features a booster really
uses, judged on held-out rows."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ._errors import InputError, InputTypeError, TreeinnerError

try:
    from sklearn.base import BaseEstimator, MetaEstimatorMixin, is_classifier
    from sklearn.feature_selection import SelectorMixin
    from sklearn.utils import check_random_state, get_tags
    from sklearn.utils.validation import (
        check_consistent_length,
        check_is_fitted,
        column_or_1d,
        validate_data,
    )
except ImportError as e:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "treeinner.TreeInnerSelector needs scikit-learn: pip install scikit-learn "
        "(or pip install 'treeinner[test]')."
    ) from e

from . import _api, _crossfit, _elimination, objectives
from ._api import public
from ._methods import RECOMMENDED_METHOD, get, significance_table
from ._staged import _weights
from .selection import (
    _check_alpha,
    _check_rule,
    _check_top_k,
    _keep_by_rule,
    _nothing_kept,
    _resolve_method,
    _table_level,
    _totals,
)

__all__ = ["TreeInnerSelector"]

#: ``"rule"``: keep what the rule passes (in ``max_rounds`` rounds); ``"recursive"``: drop by
#: steps, refit, and choose the set on the held-out loss curve (``_elimination``)
STRATEGIES = ("rule", "recursive")


def _is_frame(X: Any) -> bool:
    return isinstance(X, pd.DataFrame)


class TreeInnerSelector(SelectorMixin, MetaEstimatorMixin, BaseEstimator):
    """Keep the features a gradient boosted model relies on, judged on held-out rows.

    ``fit`` cross-fits: for each of ``cv`` splits (5 shuffled folds by default) it clones
    ``estimator``, trains the clone on the split's training rows and scores every feature on
    its held-out rows with ``treeinner.select_features``' methods (by default the recommended
    ``forest_inner_initial``, centred on the held-out rows: a feature the model only overfit
    scores zero in expectation). Every row is held out
    once and scored by the model that did not see it; the per-row terms of all held-out rows
    are pooled into one score and one standard error per feature (not an average of noisy
    fold scores). With ``cv=None`` one clone is trained on part of the rows and scored on the
    other part (``validation_fraction``). The features that ``rule`` passes are kept (then
    the ``top_k`` best of them); by default the ``"fdr"`` rule at ``alpha=0.1``. With
    ``max_rounds > 1`` the dropped features are removed, the model is refit and the remaining
    features rescored, until a round drops nothing. With ``refit=True`` the estimator is
    finally fit on all rows with the kept features (``estimator_``). ``transform`` keeps the
    selected columns.

    Parameters
    ----------
    estimator : estimator
        An unfitted XGBoost (``XGBRegressor``, ``XGBClassifier``), LightGBM
        (``LGBMRegressor``, ``LGBMClassifier``), CatBoost (``CatBoostRegressor``,
        ``CatBoostClassifier``) scikit-learn wrapper or a
        ``treeinner.booster.GBMRegressor`` / ``GBMClassifier``; it is cloned, never
        fitted itself.
    method : str, default "forest_inner_initial"
        The score: any method of ``treeinner.importance`` (the recommended
        ``forest_inner_initial``, ``tree_inner``,
        ``forest_inner``, ``unbiased_gain``, ``permutation``, ``total_gain``, ``abs_shap``,
        ...), as for ``treeinner.select_features``. Multiclass models are scored by the
        total over classes.
    attribution : {"predecomp", "saabas", "shap"}, default "predecomp"
        The attribution of ``tree_inner`` / ``forest_inner`` (``method="tree_inner",
        attribution="shap"`` scores with ``tree_inner_shap``).
    validation_fraction : float, default 0.25
        Share of the rows held out for scoring (stratified by class for classifiers), used
        only with ``cv=None``; ignored otherwise. The same split is used in every round.
    cv : int, cross-validation splitter, iterable of (train, test) or None, default 5
        The splits: score the held-out rows of every split, each with the model fit on that
        split's training rows, and pool them (scores and variances of the splits add; for a
        mean method such as ``abs_shap`` the pooled score is the weighted mean over all
        held-out rows). An int K (the default 5) gives K shuffled ``StratifiedKFold``
        (classifiers) or ``KFold`` (regressors) folds, seeded by ``random_state``: K fits,
        every row scored once. Splitters that need ``groups`` can be passed as the list of
        their splits (``list(GroupKFold().split(X, y, groups))``). Each row may be held out by
        at most one split (no repeated or shuffle splits). Methods without a standard error
        (``total_gain``, ``permutation``) get the mean of their split scores weighted by the
        held-out row weights. None: one split holding out ``validation_fraction`` of the rows
        (one fit instead of K, but every score rests on that fraction of the rows only). 5
        folds are the default because scoring every row gives every test the most rows
        (``docs/selection_benchmark.md``).
    rule : {"fdr", "interval", "threshold"} or None, default None
        Which features to keep, as in ``treeinner.select_features``: ``"fdr"`` keeps those
        whose Benjamini-Hochberg q-value is at most ``alpha``; ``"interval"`` drops only the
        confidently useless ones, keeping those whose one-sided upper bound
        ``score + z_{1-alpha} se`` is above 0 (a feature never used, score and standard
        error both 0, is dropped); ``"threshold"`` keeps scores above ``threshold``. None:
        ``"threshold"`` if a ``threshold`` is given or the method has no standard error
        (``total_gain``, ``permutation``), ``"interval"`` for a mean |attribution|
        (``abs_shap``, ...: no p-values), else ``treeinner.selection.DEFAULT_RULE``
        (``"fdr"``).
    alpha : float or None, default None
        Level of the ``"fdr"`` and ``"interval"`` rules, strictly between 0 and 0.5. None:
        the rule's default, ``treeinner.selection.DEFAULT_ALPHA``: 0.1 for ``"fdr"``, 0.2
        for ``"interval"`` (a feature is dropped when its one-sided 80% upper bound is at or
        below 0). The threshold rule
        keeps by its threshold, not by a level (with ``alpha=None`` its significance table
        is reported at ``alpha=0.1``).
    threshold : float or None, default None
        The threshold rule's cut: keep features whose score is strictly greater (None: 0).
        Only with ``rule="threshold"`` (or ``rule=None``).
    top_k : int or None, default None
        Keep at most this many features (the highest scores among those the rule keeps).
    refit : bool, default True
        Fit ``estimator_`` on all rows with the kept features. With False no final model is
        fitted (cheaper when a later pipeline step fits its own model) and ``estimator_`` is
        not set.
    max_rounds : int, default 1
        Rounds of (fit, score, drop). Rounds stop early once the rule keeps every remaining
        feature (and ``top_k`` drops none). Only with ``strategy="rule"``.
    strategy : {"rule", "recursive"}, default "rule"
        ``"rule"``: keep what ``rule`` passes (in ``max_rounds`` rounds). ``"recursive"``:
        recursive held-out elimination. Each step cross-fits on the features left, scores
        them, records every held-out row's loss, then drops the confidently useless features
        (one-sided 80% upper bound at or below 0) and, to make at least ``step``, those
        with the largest p-values; down to ``min_features`` (or until a step's loss is 3
        paired standard errors above the best). The kept set is the step that ``choose``
        picks on the held-out loss curve (``path_``); ``rule``, ``alpha``, ``threshold``,
        ``top_k`` and ``max_rounds`` are not used.
    step : float or int, default 0.2
        With ``strategy="recursive"``: the features a step drops at least, as a fraction
        of those left (rounded up) or a count.
    choose : {"one_se", "best"}, default "one_se"
        With ``strategy="recursive"``: ``"one_se"`` keeps the fewest features whose mean
        held-out loss is within one standard error of the best step's (the standard error
        of the paired per-row difference: every step scores the same rows); ``"best"`` the
        best step's.
    min_features : int, default 1
        With ``strategy="recursive"``: the fewest features a step keeps.
    n_jobs : int or None, default None
        Cross-fitting splits fit and scored at once, in threads (None or 1: one at a time;
        -1: one per core). Give the estimator one thread of its own then.
    verbose : bool, default False
        With ``strategy="recursive"``: a progress bar over the steps (tqdm).
    random_state : int, numpy RandomState or None, default None
        Seed of the shuffled folds of ``cv=int`` (or of the held-out split of ``cv=None``)
        and of the random draws of ``permutation`` / ``unbiased_gain``. The estimator's own
        seed is its own parameter (``estimator__random_state`` in a grid).

    Attributes
    ----------
    estimator_ : estimator
        The clone of ``estimator`` fit on all rows with the kept features (only with
        ``refit=True``).
    scores_ : pandas.Series
        The last round's held-out scores (pooled over the splits; with
        ``strategy="recursive"`` the chosen step's), indexed by feature name; NaN for
        features dropped in earlier rounds. For multiclass models, the totals over
        the classes.
    significance_ : pandas.DataFrame
        The last round's significance table, as ``treeinner.significance`` gives it, for the
        features of that round: columns ``method``, ``feature`` (``output`` for multi-output
        models), ``score``, ``se``, ``ci_low``, ``ci_high``, ``p_value``, ``q_value``. Its
        intervals are two-sided at level ``1 - 2 alpha`` (alpha as resolved: 0.1 for the
        default fdr rule, so 80% intervals; 0.2 for the interval rule, 60%), so ``ci_high``
        is the one-sided ``1 - alpha`` upper bound the ``"interval"`` rule reads. NaN
        statistics for methods without a standard error.
    history_ : list of pandas.Series
        The scores of every round (step), each indexed by every feature name (NaN where a
        feature was no longer in the model).
    path_ : pandas.DataFrame
        Only with ``strategy="recursive"``: one row per step, with ``n_features``, the mean
        held-out ``loss`` (the model's objective: log loss, squared error / 2, ...) and its
        ``loss_se``, ``diff_se`` (standard error of the paired difference to the best
        step), ``best``, ``chosen``, ``features`` (kept in that step) and ``dropped`` (after
        it). ``scores_`` and ``significance_`` are then the chosen step's.
    support_ : ndarray of bool, shape (n_features_in_,)
        Mask of the kept features.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X was a DataFrame with string column names. Otherwise features are named
        ``x0, x1, ...`` in ``scores_``, ``significance_``, ``history_`` and
        ``get_feature_names_out()``.

    Notes
    -----
    At least one feature is always kept: if the rule keeps none (NaN scores never pass), the
    single highest-scoring feature is kept and a ``UserWarning`` says so. Selecting nothing
    would break every later step of a pipeline, and with small held-out sets an informative
    feature can score near zero. A method with no score at all (``total_gain`` of a CatBoost
    model is all NaN) raises ValueError.

    ``sample_weight`` weights both the estimator's fits and the scoring rows. Other keyword
    arguments of ``fit`` go to the estimator's ``fit``: arrays with one entry per row are cut
    to the fitted rows (``base_margin``, ``init_score``), the X of each ``eval_set`` pair and
    the entries of ``cat_features`` / ``categorical_feature`` (positions or names) follow the
    features kept in each round (a CatBoost ``Pool`` as ``eval_set`` cannot be cut: pass
    ``(X, y)`` instead). DataFrames are passed to the estimator as DataFrames (so
    categorical columns reach CatBoost / LightGBM / XGBoost unchanged); other inputs are
    validated by scikit-learn first (NaN allowed when the estimator allows it). Models that
    store no hessian covers (CatBoost beyond RMSE) get each split's training rows as the
    ``reference`` of the methods that use training data.

    scikit-learn's estimator checks (``sklearn.utils.estimator_checks``, scikit-learn 1.9)
    pass wrapping a ``treeinner.booster.GBMRegressor`` or ``GBMClassifier`` (the test suite
    runs them), but for ``check_sample_weight_equivalence_*``: a row of weight 2 lies in one
    cross-fitting fold, its two copies may fall in two, so the folds' models differ
    (scikit-learn expects this check to fail for estimators that split their rows). The
    standard errors also treat weights as sampling weights (a row of weight 2 is one draw
    counted twice), not as repetitions. Regressors' targets are validated as numbers
    (an object array of numbers is converted), classifiers' labels are kept as given.
    """

    @public
    def __init__(
        self,
        estimator: Any,
        *,
        method: str = RECOMMENDED_METHOD,
        attribution: str = "predecomp",
        validation_fraction: float = 0.25,
        cv: Any = 5,
        rule: str | None = None,
        alpha: float | None = None,
        threshold: float | None = None,
        top_k: int | None = None,
        refit: bool = True,
        max_rounds: int = 1,
        strategy: str = "rule",
        step: float | int = 0.2,
        choose: str = "one_se",
        min_features: int = 1,
        n_jobs: int | None = None,
        verbose: bool = False,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.attribution = attribution
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.rule = rule
        self.alpha = alpha
        self.threshold = threshold
        self.top_k = top_k
        self.refit = refit
        self.max_rounds = max_rounds
        self.strategy = strategy
        self.step = step
        self.choose = choose
        self.min_features = min_features
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    # ------------------------------------------------------------------ tags and checks
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        try:
            inner = get_tags(self.estimator).input_tags
            allow_nan, sparse = inner.allow_nan, inner.sparse
        except Exception:  # estimators without scikit-learn tags: the boosters handle both
            allow_nan, sparse = True, True
        # treeinner's own booster reads scipy sparse input without declaring it
        if type(self.estimator).__module__.startswith("treeinner."):
            sparse = True
        tags.input_tags.allow_nan = allow_nan
        tags.input_tags.sparse = sparse
        return tags

    def _check_params(self) -> tuple[str, str, float, float, int | None, int]:
        if self.estimator is None or not hasattr(self.estimator, "fit"):
            raise InputError(
                f"estimator must be an unfitted booster with a fit method, got {self.estimator!r}."
            )
        column = _resolve_method(self.method, self.attribution)
        rule, threshold = _check_rule(self.rule, self.threshold, get(column))
        alpha = _check_alpha(self.alpha, rule)
        top_k = _check_top_k(self.top_k)
        max_rounds = _api.check_count("max_rounds", self.max_rounds)
        if self.cv is None:
            _api.check_fraction("validation_fraction", self.validation_fraction)
        else:
            _crossfit.check_cv(self.cv)
        _api.check_flag("refit", self.refit)
        _api.check_flag("verbose", self.verbose)
        if self.strategy not in STRATEGIES:
            raise InputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.")
        if self.strategy == "recursive":
            _elimination.check_step(self.step)
            if self.choose not in _elimination.CHOICES:
                raise InputError(
                    f"choose must be one of {_elimination.CHOICES}, got {self.choose!r}."
                )
            _api.check_count("min_features", self.min_features)
        if self.n_jobs is not None and (
            isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, int) or self.n_jobs == 0
        ):
            raise InputError(f"n_jobs must be None or a non-zero int, got {self.n_jobs!r}.")
        return column, rule, threshold, alpha, top_k, max_rounds

    def _validate(self, X: Any, y: Any) -> tuple[Any, Any]:
        """``_checked_data`` with scikit-learn's own errors as treeinner's (same messages:
        an ``InputError`` is a ``ValueError``, an ``InputTypeError`` a ``TypeError``)."""
        try:
            return self._checked_data(X, y)
        except TreeinnerError:
            raise
        except ValueError as e:
            raise InputError(str(e)) from e
        except TypeError as e:
            raise InputTypeError(str(e)) from e

    def _checked_data(self, X: Any, y: Any) -> tuple[Any, Any]:
        y_in = y
        if y is None:
            raise InputError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if _is_frame(X):
            # kept as a DataFrame: categorical and string columns reach the estimator as is
            X, y = validate_data(self, X, y, skip_check_array=True, reset=True)
            y = column_or_1d(y, warn=True)
            if not is_classifier(self.estimator) and y.dtype.kind == "O":
                y = y.astype(np.float64)
            check_consistent_length(X, y)
            if X.shape[0] == 0:
                raise InputError("Found array with 0 sample(s) while a minimum of 1 is required.")
            if X.shape[1] == 0:
                raise InputError("Found array with 0 feature(s) while a minimum of 1 is required.")
        else:
            allow_nan = self.__sklearn_tags__().input_tags.allow_nan
            X, y = validate_data(
                self,
                X,
                y,
                accept_sparse=("csr", "csc"),
                ensure_all_finite="allow-nan" if allow_nan else True,
                y_numeric=not is_classifier(self.estimator),
                reset=True,
            )
        return X, objectives.keep_soft(y_in, y)

    # ------------------------------------------------------------------ fitting
    def _score_round(
        self, X, y, sw, fit_params, splits, cols, names, column, alpha, seed, losses=False
    ) -> Any:
        """The significance table of one round: the estimator cross-fit on ``splits`` with
        the columns ``cols``, scored by ``column``, the splits pooled; with ``losses`` also
        every held-out row's loss."""
        p = self.n_features_in_
        fit = _crossfit.crossfit(
            self.estimator,
            X,
            y,
            [get(column)],
            splits,
            sample_weight=sw,
            random_state=seed,
            fit_params=fit_params,
            cols=None if len(cols) == p else cols,
            names=names,
            who=type(self).__name__,
            losses=losses,
            n_jobs=self.n_jobs,
        )
        table = significance_table(
            fit.estimates, fit.scores, fit.feature_names, fit.n_outputs, _table_level(alpha)
        )
        return (table, fit.losses) if losses else table

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any
    ) -> TreeInnerSelector:
        """Fit the estimator on held-out splits, score the features and select them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        y : array-like of shape (n_samples,)
            Targets or class labels.
        sample_weight : array-like of shape (n_samples,), optional
            Row weights, passed to the estimator's fit and used when scoring held-out rows.
        **fit_params
            Passed to the estimator's ``fit`` (see Notes of the class).

        Returns
        -------
        self
        """
        column, rule, threshold, alpha, top_k, max_rounds = self._check_params()
        X, y = self._validate(X, y)
        n, p = X.shape[0], self.n_features_in_
        sw = None if sample_weight is None else _weights(sample_weight, n)
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.array([f"x{j}" for j in range(p)], dtype=object)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        splits = _crossfit.split_rows(
            X,
            y,
            self.cv,
            classifier=is_classifier(self.estimator),
            seed=seed,
            validation_fraction=self.validation_fraction if self.cv is None else None,
        )

        if self.strategy == "recursive":
            cols, table, history, scores = self._eliminate(
                X, y, sw, fit_params, splits, names, column, alpha, seed
            )
            return self._finish(X, y, sw, fit_params, names, cols, table, history, scores)
        cols = np.arange(p)
        history = []
        for _ in range(max_rounds):
            table = self._score_round(
                X, y, sw, fit_params, splits, cols, names, column, alpha, seed
            )
            frame = _totals(table)
            scores = frame["score"].to_numpy(dtype=np.float64)
            full = pd.Series(np.nan, index=pd.Index(names, dtype=object), name=column)
            full.iloc[cols] = scores
            history.append(full)
            if np.all(np.isnan(scores)):
                raise InputError(f"method {column!r} gives no score for this model (all NaN).")
            keep = _keep_by_rule(frame, rule, alpha=alpha, threshold=threshold, top_k=top_k)
            if not keep.any():
                best = int(np.nanargmax(scores))
                keep[best] = True
                warnings.warn(
                    f"{_nothing_kept(rule, alpha, threshold)} with {column!r}; keeping the best "
                    f"one, {names[cols[best]]!r} (score {scores[best]:.6g}).",
                    UserWarning,
                    stacklevel=2,
                )
            if keep.all():
                break
            cols = cols[keep]
        if hasattr(self, "path_"):
            del self.path_
        return self._finish(X, y, sw, fit_params, names, cols, table, history, history[-1])

    def _eliminate(self, X, y, sw, fit_params, splits, names, column, alpha, seed) -> tuple:
        """``strategy="recursive"``: steps of (cross-fit, score, drop) down to
        ``min_features`` (or until the held-out loss is far above the best), then the set the
        loss curve chooses; sets ``path_``. Returns the kept columns, their step's table,
        every step's scores and the chosen step's."""
        from tqdm.auto import tqdm

        p = self.n_features_in_
        step = _elimination.check_step(self.step)
        min_features = min(int(self.min_features), p)
        cols = np.arange(p)
        steps: list[dict[str, Any]] = []
        losses: list[np.ndarray] = []
        history: list[pd.Series] = []
        bar = tqdm(total=None, desc="recursive elimination", unit="step",
                   disable=not self.verbose)  # fmt: skip
        with bar:
            while True:
                table, row_loss = self._score_round(
                    X, y, sw, fit_params, splits, cols, names, column, alpha, seed, losses=True
                )
                frame = _totals(table)
                scores = frame["score"].to_numpy(dtype=np.float64)
                if np.all(np.isnan(scores)):
                    raise InputError(f"method {column!r} gives no score for this model (all NaN).")
                full = pd.Series(np.nan, index=pd.Index(names, dtype=object), name=column)
                full.iloc[cols] = scores
                history.append(full)
                losses.append(row_loss)
                steps.append({"cols": cols, "table": table})
                curve = _elimination.loss_curve(losses, sw)
                bar.update(1)
                bar.set_postfix(features=len(cols), loss=f"{curve['loss'].iloc[-1]:.5g}")
                if len(cols) <= min_features or _elimination.stop_early(curve):
                    break
                drop = _elimination.drop_mask(frame, step, min_features)
                steps[-1]["dropped"] = [str(names[c]) for c in cols[drop]]
                cols = cols[~drop]
        chosen = _elimination.choose(curve, [len(s["cols"]) for s in steps], self.choose)
        self.path_ = curve.assign(
            n_features=[len(s["cols"]) for s in steps],
            chosen=[k == chosen for k in range(len(steps))],
            features=[[str(names[c]) for c in s["cols"]] for s in steps],
            dropped=[s.get("dropped", []) for s in steps],
        )[["n_features", "loss", "loss_se", "diff_se", "best", "chosen", "features", "dropped"]]
        return steps[chosen]["cols"], steps[chosen]["table"], history, history[chosen]

    def _finish(
        self, X, y, sw, fit_params, names, cols, table, history, scores
    ) -> TreeInnerSelector:
        """Set the fitted attributes of the kept columns ``cols`` (and refit)."""
        p = self.n_features_in_
        support = np.zeros(p, dtype=bool)
        support[cols] = True
        self.support_ = support
        self.history_ = history
        self.scores_ = scores
        self.significance_ = table
        if self.refit:
            self.estimator_ = _crossfit.fit_clone(
                self.estimator,
                X,
                y,
                cols=None if len(cols) == p else cols,
                sample_weight=sw,
                fit_params=fit_params,
                names=names,
            )
        elif hasattr(self, "estimator_"):
            del self.estimator_
        return self

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "support_")
        return self.support_
