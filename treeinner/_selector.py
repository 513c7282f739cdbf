"""TreeInnerSelector: a scikit-learn meta-transformer that keeps the features a booster really
uses, judged on held-out rows."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import pandas as pd

try:
    from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
    from sklearn.feature_selection import SelectorMixin
    from sklearn.model_selection import KFold, StratifiedKFold, check_cv, train_test_split
    from sklearn.utils import _safe_indexing, check_random_state, get_tags
    from sklearn.utils.multiclass import type_of_target
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

from ._api import public
from ._methods import get
from .selection import (
    _check_threshold,
    _check_top_k,
    _feature_scores,
    _keep,
    _needs_reference,
    _resolve_method,
)

__all__ = ["TreeInnerSelector"]

# fit parameters that name features: their entries follow the features a round keeps
_FEATURE_PARAMS = ("cat_features", "categorical_feature")


def _is_frame(X: Any) -> bool:
    return isinstance(X, pd.DataFrame)


def _n_rows(X: Any) -> int:
    return int(X.shape[0])


def _take(X: Any, rows: np.ndarray | None = None, cols: np.ndarray | None = None) -> Any:
    """Rows and columns of an array, sparse matrix or DataFrame (by position)."""
    if rows is not None:
        X = _safe_indexing(X, rows, axis=0)
    if cols is not None:
        X = _safe_indexing(X, cols, axis=1)
    return X


def _remap_features(value: Any, cols: np.ndarray, names: np.ndarray) -> Any:
    """A list of feature positions or names restricted to the kept columns ``cols``, positions
    renumbered; anything else (``"auto"``, None) unchanged."""
    if isinstance(value, (str, bytes)) or value is None or not hasattr(value, "__iter__"):
        return value
    items = list(value)
    if not items:
        return value
    new_pos = {int(c): k for k, c in enumerate(cols)}
    kept_names = {str(names[c]) for c in cols}
    out = []
    for v in items:
        if isinstance(v, numbers.Integral) and not isinstance(v, bool):
            if int(v) in new_pos:
                out.append(new_pos[int(v)])
        elif str(v) in kept_names:
            out.append(v)
    return out


def _eval_set_columns(eval_set: Any, cols: np.ndarray) -> Any:
    """An ``eval_set`` (a list of (X, y) pairs, or CatBoost's single pair) with the X of each
    pair cut to ``cols``. Other objects (a CatBoost Pool) are passed unchanged."""

    def pair(p: Any) -> Any:
        if isinstance(p, (tuple, list)) and len(p) >= 2 and hasattr(p[0], "shape"):
            return (_take(p[0], None, cols), *tuple(p)[1:])
        return p

    if isinstance(eval_set, tuple) and len(eval_set) == 2 and hasattr(eval_set[0], "shape"):
        return pair(eval_set)
    if isinstance(eval_set, (list, tuple)):
        return [pair(p) for p in eval_set]
    return eval_set


class TreeInnerSelector(SelectorMixin, MetaEstimatorMixin, BaseEstimator):
    """Keep the features a gradient boosted model relies on, judged on held-out rows.

    ``fit`` clones ``estimator``, trains it on part of the rows and scores every feature on the
    other part with ``treeinner.select_features``' methods (TreeInner by default: on
    held-out rows a feature the model only overfit scores negative). Features scoring above
    ``threshold`` are kept (then the ``top_k`` best of them). With ``max_rounds > 1`` the
    dropped features are removed, the model is refit and the remaining features rescored,
    until a round drops nothing. With ``refit=True`` the estimator is finally fit on all rows
    with the kept features (``estimator_``). ``transform`` keeps the selected columns.

    Parameters
    ----------
    estimator : estimator
        An unfitted XGBoost (``XGBRegressor``, ``XGBClassifier``), LightGBM
        (``LGBMRegressor``, ``LGBMClassifier``), CatBoost (``CatBoostRegressor``,
        ``CatBoostClassifier``) scikit-learn wrapper or a
        ``treeinner.booster.GBMRegressor`` / ``GBMClassifier``; it is cloned, never
        fitted itself.
    method : str, default "tree_inner"
        The score: any method of ``treeinner.importance`` (``tree_inner``,
        ``forest_inner``, ``unbiased_gain``, ``permutation``, ``total_gain``, ``abs_shap``,
        ...), as for ``treeinner.select_features``. Multiclass models are scored by the
        total over classes.
    attribution : {"predecomp", "saabas", "shap"}, default "predecomp"
        The attribution of ``tree_inner`` / ``forest_inner`` (``method="tree_inner",
        attribution="shap"`` scores with ``tree_inner_shap``).
    validation_fraction : float, default 0.25
        Share of the rows held out for scoring (stratified by class for classifiers), when
        ``cv`` is None. The same split is used in every round.
    cv : int, cross-validation splitter, iterable of (train, test) or None, default None
        Score on the test part of each split instead and average the scores over the splits.
        An int gives shuffled ``StratifiedKFold`` (classifiers) or ``KFold`` (regressors),
        seeded by ``random_state``. Splitters that need ``groups`` can be passed as the list
        of their splits (``list(GroupKFold().split(X, y, groups))``).
    threshold : float, default 0.0
        Keep features whose score is strictly greater.
    top_k : int or None, default None
        Keep at most this many features (the highest scores above ``threshold``).
    refit : bool, default True
        Fit ``estimator_`` on all rows with the kept features. With False no final model is
        fitted (cheaper when a later pipeline step fits its own model) and ``estimator_`` is
        not set.
    max_rounds : int, default 1
        Rounds of (fit, score, drop). Rounds stop early once no remaining feature scores at
        or below ``threshold`` (and ``top_k`` drops none).
    random_state : int, numpy RandomState or None, default None
        Seed of the held-out split (or of the shuffled folds of ``cv=int``) and of the random
        draws of ``permutation`` / ``unbiased_gain``. The estimator's own seed is its own
        parameter (``estimator__random_state`` in a grid).

    Attributes
    ----------
    estimator_ : estimator
        The clone of ``estimator`` fit on all rows with the kept features (only with
        ``refit=True``).
    scores_ : pandas.Series
        The last round's held-out scores, indexed by feature name; NaN for features dropped
        in earlier rounds.
    history_ : list of pandas.Series
        The scores of every round, each indexed by every feature name (NaN where a feature was
        no longer in the model).
    support_ : ndarray of bool, shape (n_features_in_,)
        Mask of the kept features.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X was a DataFrame with string column names. Otherwise features are named
        ``x0, x1, ...`` in ``scores_``, ``history_`` and ``get_feature_names_out()``.

    Notes
    -----
    At least one feature is always kept: if every feature scores at or below ``threshold``
    (NaN counts as below), the single highest-scoring feature is kept and a ``UserWarning``
    says so. Selecting nothing would break every later step of a pipeline, and with small
    held-out sets an informative feature can score near zero. A method with no score at all
    (``total_gain`` of a CatBoost model is all NaN) raises ValueError.

    ``sample_weight`` weights both the estimator's fits and the scoring rows. Other keyword
    arguments of ``fit`` go to the estimator's ``fit``: arrays with one entry per row are cut
    to the fitted rows (``base_margin``, ``init_score``), the X of each ``eval_set`` pair and
    the entries of ``cat_features`` / ``categorical_feature`` (positions or names) follow the
    features kept in each round (a CatBoost ``Pool`` as ``eval_set`` cannot be cut: pass
    ``(X, y)`` instead). DataFrames are passed to the estimator as DataFrames (so
    categorical columns reach CatBoost / LightGBM / XGBoost unchanged); other inputs are
    validated by scikit-learn first (NaN allowed when the estimator allows it).

    scikit-learn's estimator checks (``sklearn.utils.estimator_checks``, scikit-learn 1.9) all
    pass wrapping a ``treeinner.booster.GBMRegressor`` or ``GBMClassifier``, none listed as
    expected to fail (the test suite runs them). Regressors' targets are validated as numbers
    (an object array of numbers is converted), classifiers' labels are kept as given.
    """

    @public
    def __init__(
        self,
        estimator: Any,
        *,
        method: str = "tree_inner",
        attribution: str = "predecomp",
        validation_fraction: float = 0.25,
        cv: Any = None,
        threshold: float = 0.0,
        top_k: int | None = None,
        refit: bool = True,
        max_rounds: int = 1,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.attribution = attribution
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.threshold = threshold
        self.top_k = top_k
        self.refit = refit
        self.max_rounds = max_rounds
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

    def _check_params(self) -> tuple[str, float, int | None, int]:
        if self.estimator is None or not hasattr(self.estimator, "fit"):
            raise ValueError(
                f"estimator must be an unfitted booster with a fit method, got {self.estimator!r}."
            )
        column = _resolve_method(self.method, self.attribution)
        threshold = _check_threshold(self.threshold)
        top_k = _check_top_k(self.top_k)
        mr = self.max_rounds
        if not isinstance(mr, numbers.Integral) or isinstance(mr, bool) or mr < 1:
            raise ValueError(f"max_rounds must be an integer >= 1, got {mr!r}.")
        if self.cv is None:
            vf = self.validation_fraction
            if (
                not isinstance(vf, numbers.Real)
                or isinstance(vf, bool)
                or not 0.0 < float(vf) < 1.0
            ):
                raise ValueError(
                    f"validation_fraction must be a number strictly between 0 and 1, got {vf!r}."
                )
        elif isinstance(self.cv, numbers.Integral) and not isinstance(self.cv, bool):
            if self.cv < 2:
                raise ValueError(f"cv must be at least 2 folds, got {self.cv!r}.")
        elif isinstance(self.cv, (bool, str, float)):
            raise ValueError(
                "cv must be None, an int >= 2, a cross-validation splitter or an iterable of "
                f"(train, test) index arrays, got {self.cv!r}."
            )
        if not isinstance(self.refit, (bool, np.bool_)):
            raise ValueError(f"refit must be True or False, got {self.refit!r}.")
        return column, threshold, top_k, int(mr)

    def _validate(self, X: Any, y: Any) -> tuple[Any, Any]:
        if y is None:
            raise ValueError(
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
                raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
            if X.shape[1] == 0:
                raise ValueError("Found array with 0 feature(s) while a minimum of 1 is required.")
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
        return X, y

    # ------------------------------------------------------------------ fitting
    def _splits(self, X: Any, y: np.ndarray, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
        n = _n_rows(X)
        classifier = is_classifier(self.estimator)
        if self.cv is None:
            idx = np.arange(n)
            stratify = y if classifier else None
            try:
                train, test = train_test_split(
                    idx, test_size=self.validation_fraction, random_state=seed, stratify=stratify
                )
            except ValueError:
                if stratify is None:
                    raise
                # a class too small to stratify: split without stratification
                train, test = train_test_split(
                    idx, test_size=self.validation_fraction, random_state=seed
                )
            splits = [(np.sort(train), np.sort(test))]
        else:
            cv = self.cv
            if isinstance(cv, numbers.Integral):
                strat = classifier and type_of_target(y) in ("binary", "multiclass")
                kind = StratifiedKFold if strat else KFold
                cv = kind(n_splits=int(cv), shuffle=True, random_state=seed)
            else:
                cv = check_cv(cv, y, classifier=classifier)
            splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y)]
        for k, (train, test) in enumerate(splits):
            if len(train) == 0 or len(test) == 0:
                raise ValueError(
                    f"Split {k} has {len(train)} training and {len(test)} held-out rows; "
                    "both must be non-empty."
                )
        return splits

    def _fit_params(
        self, fit_params: dict, n: int, rows: np.ndarray | None, cols: np.ndarray, names
    ) -> dict:
        """The estimator's fit parameters for these rows and columns."""
        full = len(cols) == self.n_features_in_
        out = {}
        for key, value in fit_params.items():
            if key == "eval_set" and value is not None and not full:
                value = _eval_set_columns(value, cols)
            elif key in _FEATURE_PARAMS and not full:
                value = _remap_features(value, cols, names)
            elif (
                rows is not None
                and key not in _FEATURE_PARAMS
                and key != "eval_set"
                and not isinstance(value, (str, bytes, dict))
                and hasattr(value, "__len__")
                and hasattr(value, "__getitem__")
                and len(value) == n
            ):
                value = _safe_indexing(value, rows)
            out[key] = value
        return out

    def _fit_one(self, X, y, sw, fit_params, rows, cols, names):
        est = clone(self.estimator)
        kw = self._fit_params(fit_params, _n_rows(X), rows, cols, names)
        if sw is not None:
            kw["sample_weight"] = sw if rows is None else sw[rows]
        Xs = _take(X, rows, None if len(cols) == self.n_features_in_ else cols)
        ys = y if rows is None else y[rows]
        return est.fit(Xs, ys, **kw)

    def _score_round(self, X, y, sw, fit_params, splits, cols, names, column, seed):
        per_split = []
        for train, test in splits:
            model = self._fit_one(X, y, sw, fit_params, train, cols, names)
            sub = None if len(cols) == self.n_features_in_ else cols
            Xt = _take(X, test, sub)
            try:
                reference = None
                if get(column).uses_reference and _needs_reference(model):
                    # no stored hessian covers (CatBoost beyond RMSE): node values and training
                    # sums from the rows the model was trained on
                    reference = (_take(X, train, sub), y[train])
                    if sw is not None:
                        reference += (sw[train],)
                s = _feature_scores(
                    model,
                    Xt,
                    y[test],
                    column,
                    sample_weight=None if sw is None else sw[test],
                    random_state=seed,
                    reference=reference,
                )
            except TypeError as e:
                if "Cannot explain" in str(e):
                    raise TypeError(
                        f"{type(self).__name__} needs an XGBoost, LightGBM or CatBoost "
                        "scikit-learn wrapper or a treeinner.booster estimator; got "
                        f"{type(self.estimator).__name__}."
                    ) from e
                raise
            if len(s) != len(cols):
                raise ValueError(
                    f"The fitted estimator reports {len(s)} features but was fit on "
                    f"{len(cols)}; cannot match its scores to the columns."
                )
            per_split.append(s.to_numpy(dtype=np.float64))
        return np.mean(per_split, axis=0)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
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
        column, threshold, top_k, max_rounds = self._check_params()
        X, y = self._validate(X, y)
        n, p = _n_rows(X), self.n_features_in_
        sw = None
        if sample_weight is not None:
            sw = np.asarray(sample_weight, dtype=np.float64)
            if sw.ndim != 1 or sw.shape[0] != n:
                raise ValueError(
                    f"sample_weight must have shape ({n},) like X's rows, got {sw.shape}."
                )
            if not np.all(np.isfinite(sw)):
                raise ValueError("sample_weight contains NaN or infinite values.")
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.array([f"x{j}" for j in range(p)], dtype=object)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        splits = self._splits(X, y, seed)

        cols = np.arange(p)
        history = []
        for _ in range(max_rounds):
            scores = self._score_round(X, y, sw, fit_params, splits, cols, names, column, seed)
            full = pd.Series(np.nan, index=pd.Index(names, dtype=object), name=column)
            full.iloc[cols] = scores
            history.append(full)
            if np.all(np.isnan(scores)):
                raise ValueError(f"method {column!r} gives no score for this model (all NaN).")
            keep = _keep(scores, threshold, top_k)
            if not keep.any():
                best = int(np.nanargmax(scores))
                keep[best] = True
                warnings.warn(
                    f"No feature scores above threshold={threshold:g} with {column!r}; "
                    f"keeping the best one, {names[cols[best]]!r} "
                    f"(score {scores[best]:.6g}).",
                    UserWarning,
                    stacklevel=2,
                )
            if keep.all():
                break
            cols = cols[keep]

        support = np.zeros(p, dtype=bool)
        support[cols] = True
        self.support_ = support
        self.history_ = history
        self.scores_ = history[-1]
        if self.refit:
            self.estimator_ = self._fit_one(X, y, sw, fit_params, None, cols, names)
        elif hasattr(self, "estimator_"):
            del self.estimator_
        return self

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "support_")
        return self.support_
