"""Cross-fitting: every row scored by a model that did not train on it, all rows pooled.

A scikit-learn-style estimator is cloned and fitted on the training rows of each split; the
split's held-out rows are scored by that fold's model through the method registry
(``Method.estimate``), and the folds are pooled as independent strata
(``_stats.combine``): the sums of the per-row terms and their variances add, giving one score
and one standard error over all held-out rows, not an average of K noisy fold scores.

Used by ``treeinner.significance(..., cv=...)`` and ``TreeInnerSelector``. scikit-learn is
imported inside the functions that need it, so importing this module does not need it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _api, _stats
from ._errors import InputError, InputTypeError
from ._methods import Method, Options, total_weight, warn_shared_credit
from .adapters import from_model
from .ensemble import TreeEnsemble
from .objectives import get_objective

__all__ = [
    "FEATURE_PARAMS",
    "CrossFit",
    "check_cv",
    "clone_estimator",
    "crossfit",
    "encode_labels",
    "fit_clone",
    "needs_reference",
    "split_rows",
    "take",
]

#: Fit parameters that name features: their entries follow the columns a fit keeps.
FEATURE_PARAMS = ("cat_features", "categorical_feature")

_CV_CHOICES = (
    "cv must be None, an int >= 2, a cross-validation splitter or an iterable of (train, test) "
    "index arrays"
)


# ------------------------------------------------------------------------------ labels, covers
def encode_labels(model: Any, y: Any) -> Any:
    """Labels of a scikit-learn classifier wrapper as positions in its ``classes_``.

    The objectives check labels in the booster's own coding (0, 1, ..., K-1); a classifier
    wrapper fitted on other labels (strings, ``{3, 7}``) keeps them in ``classes_``. Anything
    that is not such a wrapper, or labels already in its coding, are returned unchanged.

    Raises
    ------
    ValueError
        For labels the classifier was not trained on.
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
        raise InputError(
            f"y has labels the classifier was not trained on: {np.unique(yv[~known])[:5]}; "
            f"its classes are {classes[:10]}."
        )
    return pos.astype(np.float64)


def needs_reference(ens: TreeEnsemble) -> bool:
    """Whether the ensemble keeps no hessian covers (CatBoost beyond RMSE), so that the
    methods the registry marks ``uses_reference`` need the training data."""
    return not bool(np.all(np.isfinite(ens.cover)))


# ------------------------------------------------------------------------------ rows, columns
def take(X: Any, rows: np.ndarray | None = None, cols: np.ndarray | None = None) -> Any:
    """Rows and columns (by position) of an array, scipy sparse matrix or DataFrame; None
    keeps all of them."""
    from sklearn.utils import _safe_indexing

    if rows is not None:
        X = _safe_indexing(X, rows, axis=0)
    if cols is not None:
        X = _safe_indexing(X, cols, axis=1)
    return X


def check_cv(cv: Any) -> Any:
    """``cv`` if it is None, an int >= 2 (returned as int), an object with a ``split``
    method or an iterable of (train, test) pairs; a ValueError otherwise."""
    if cv is None:
        return None
    if isinstance(cv, (bool, np.bool_, str, bytes)):
        raise InputError(f"{_CV_CHOICES}, got {cv!r}.")
    if isinstance(cv, numbers.Integral):
        if cv < 2:
            raise InputError(f"cv must be at least 2 folds, got {cv!r}.")
        return int(cv)
    if isinstance(cv, numbers.Real) or not (hasattr(cv, "split") or hasattr(cv, "__iter__")):
        raise InputError(f"{_CV_CHOICES}, got {cv!r}.")
    return cv


def _index_array(idx: Any, n: int, what: str) -> np.ndarray:
    a = np.asarray(idx)
    if a.dtype == bool:
        if a.shape != (n,):
            raise InputError(f"{what}: a boolean mask must have one entry per row ({n}).")
        return np.flatnonzero(a)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise InputError(f"{what} must be a 1-d array of row positions, got dtype {a.dtype}.")
    a = a.astype(np.intp)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise InputError(f"{what} has row positions outside 0..{n - 1}.")
    return a


def split_rows(
    X: Any,
    y: Any,
    cv: Any,
    *,
    classifier: bool,
    seed: int | None,
    validation_fraction: float | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, held-out) row positions of every split.

    Parameters
    ----------
    X, y
        The rows and their targets.
    cv : None, int, splitter or iterable of (train, test)
        An int K gives shuffled K folds, stratified by class for classifiers (binary or
        multiclass targets), seeded by ``seed``; a splitter's ``split(X, y)`` or the given
        pairs are used as they are. None: one split holding out ``validation_fraction`` of the
        rows (stratified for classifiers where every class is large enough).
    classifier : bool
        Whether the estimator is a classifier.
    seed : int or None
        Seed of the shuffles.
    validation_fraction : float, optional
        Share of held-out rows when ``cv`` is None.

    Returns
    -------
    list of (ndarray, ndarray)

    Raises
    ------
    ValueError
        For a split with no training or no held-out rows, a held-out row that is also a
        training row of its split, or a row held out by more than one split (the held-out
        rows of the splits are pooled: each may be scored once).
    """
    from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
    from sklearn.utils.multiclass import type_of_target

    n = _api.n_rows(X)
    cv = check_cv(cv)
    if cv is None:
        if validation_fraction is None:
            raise InputError("cv is None and no validation_fraction is given.")
        idx = np.arange(n)
        stratify = y if classifier else None
        try:
            train, test = train_test_split(
                idx, test_size=validation_fraction, random_state=seed, stratify=stratify
            )
        except ValueError:
            if stratify is None:
                raise
            # a class too small to stratify: split without stratification
            train, test = train_test_split(idx, test_size=validation_fraction, random_state=seed)
        pairs = [(np.sort(train), np.sort(test))]
    else:
        if isinstance(cv, int):
            strat = classifier and type_of_target(y) in ("binary", "multiclass")
            kind = StratifiedKFold if strat else KFold
            cv = kind(n_splits=cv, shuffle=True, random_state=seed)
        pairs = list(cv.split(X, y)) if hasattr(cv, "split") else list(cv)
    out = []
    seen = np.full(n, -1, dtype=np.intp)
    for k, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InputError(f"{_CV_CHOICES}; split {k} is not a (train, test) pair.")
        train = _index_array(pair[0], n, f"split {k}'s training rows")
        test = _index_array(pair[1], n, f"split {k}'s held-out rows")
        if train.size == 0 or test.size == 0:
            raise InputError(
                f"Split {k} has {train.size} training and {test.size} held-out rows; both "
                "must be non-empty."
            )
        if np.intersect1d(train, test).size:
            raise InputError(
                f"Split {k} holds out rows it also trains on; a held-out row must not be a "
                "training row of its split."
            )
        again = seen[test] >= 0
        if again.any():
            i = int(test[np.argmax(again)])
            raise InputError(
                f"Row {i} is held out by splits {int(seen[i])} and {k}: the held-out rows of "
                "all splits are pooled, so each row may be held out at most once (use K-fold "
                "splits, not repeated or shuffled ones)."
            )
        seen[test] = k
        out.append((train, test))
    if not out:
        raise InputError(f"{_CV_CHOICES}; it gave no split.")
    return out


# ------------------------------------------------------------------------------ fitting
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
            return (take(p[0], None, cols), *tuple(p)[1:])
        return p

    if isinstance(eval_set, tuple) and len(eval_set) == 2 and hasattr(eval_set[0], "shape"):
        return pair(eval_set)
    if isinstance(eval_set, (list, tuple)):
        return [pair(p) for p in eval_set]
    return eval_set


def _fit_params(
    fit_params: dict, n: int, rows: np.ndarray | None, cols: np.ndarray | None, names: Any
) -> dict:
    """The estimator's fit parameters for these rows and columns (None: all): arrays with one
    entry per row are cut to ``rows``; ``eval_set`` X and feature lists follow ``cols``."""
    out = {}
    for key, value in fit_params.items():
        if key == "eval_set" and value is not None and cols is not None:
            value = _eval_set_columns(value, cols)
        elif key in FEATURE_PARAMS and cols is not None:
            value = _remap_features(value, cols, names)
        elif (
            rows is not None
            and key not in FEATURE_PARAMS
            and key != "eval_set"
            and not isinstance(value, (str, bytes, dict))
            and hasattr(value, "__len__")
            and hasattr(value, "__getitem__")
            and len(value) == n
        ):
            from sklearn.utils import _safe_indexing

            value = _safe_indexing(value, rows)
        out[key] = value
    return out


def clone_estimator(estimator: Any, cols: np.ndarray | None = None, names: Any = None) -> Any:
    """An unfitted copy of ``estimator`` with the same parameters, to fit on the columns
    ``cols`` (None: all).

    ``sklearn.base.clone``, or, where it refuses an estimator whose constructor stores a
    parameter differently from how it was given (CatBoost's ``cat_features`` with
    scikit-learn 1.9), ``type(estimator)(**estimator.get_params(deep=False))``. Feature lists
    among the constructor's parameters (``FEATURE_PARAMS``: ``cat_features``) follow ``cols``
    as in ``fit_params``: positions renumbered, dropped features left out (by name with
    ``names``, the names of all columns).
    """
    from sklearn.base import clone

    try:
        est = clone(estimator)
    except RuntimeError as e:
        get_params = getattr(estimator, "get_params", None)
        if get_params is None:
            raise
        try:
            est = type(estimator)(**get_params(deep=False))
        except Exception:
            raise e from None
    if cols is not None and hasattr(est, "get_params") and hasattr(est, "set_params"):
        params = est.get_params(deep=False)
        changes = {}
        for key in FEATURE_PARAMS:
            value = params.get(key)
            if value is None or isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                continue
            by_name = any(not isinstance(v, numbers.Integral) for v in value)
            if by_name and names is None:
                continue  # names unknown: a list by name is left as it is
            known = names if names is not None else np.arange(int(np.max(cols, initial=-1)) + 1)
            changes[key] = _remap_features(value, cols, known)
        if changes:
            est.set_params(**changes)
    return est


def fit_clone(
    estimator: Any,
    X: Any,
    y: np.ndarray,
    *,
    rows: np.ndarray | None = None,
    cols: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
    fit_params: dict | None = None,
    names: Any = None,
) -> Any:
    """A clone of ``estimator`` fitted on ``rows`` and ``cols`` of X (None: all), with those
    rows' ``sample_weight`` and the matching ``fit_params``.

    Parameters
    ----------
    estimator : scikit-learn-style estimator
    X : array-like, DataFrame or scipy sparse matrix
    y : ndarray of shape (n_samples,)
    rows, cols : ndarray of int, optional
        Row and column positions to fit on.
    sample_weight : ndarray of shape (n_samples,), optional
    fit_params : dict, optional
        Other arguments of the estimator's ``fit`` (see ``TreeInnerSelector``).
    names : array of str, optional
        The names of all columns, for feature lists given by name in ``fit_params``.

    Returns
    -------
    The fitted clone.
    """
    est = clone_estimator(estimator, cols, names)
    kw = _fit_params(fit_params or {}, _api.n_rows(X), rows, cols, names)
    if sample_weight is not None:
        kw["sample_weight"] = sample_weight if rows is None else sample_weight[rows]
    Xs = take(X, rows, cols)
    ys = y if rows is None else y[rows]
    return est.fit(Xs, ys, **kw)


# ------------------------------------------------------------------------------ scoring
@dataclass
class CrossFit:
    """Pooled held-out estimates of a cross-fit.

    Attributes
    ----------
    estimates : dict of str to Estimate or None
        Per method, the folds pooled (None for a method without a sampling error).
    scores : dict of str to ndarray
        Per method without a sampling error, its scores (n_features, n_outputs): the mean of
        the folds' scores weighted by their held-out row weight.
    feature_names : list of str
    n_outputs : int
    n_splits : int
    losses : ndarray of shape (n_samples,) or None
        With ``losses=True``: every held-out row's loss under its fold's model (the model's
        objective at its margin; NaN for rows no split holds out).
    """

    estimates: dict[str, _stats.Estimate | None]
    scores: dict[str, np.ndarray]
    feature_names: list[str]
    n_outputs: int
    n_splits: int
    losses: np.ndarray | None = None


def _fold_part(m: Method, ens: Any, X: Any, y: Any, opts: Options) -> _stats.Estimate:
    """The method's estimate on one fold; for a method without one, its scores as an estimate
    of unknown variance weighted by the fold's row weight."""
    est = m.estimate(ens, X, y, opts)
    if est is not None:
        return est
    score = np.asarray(m.score(ens, X, y, opts), dtype=np.float64)
    nan = np.full(score.shape, np.nan)
    return _stats.Estimate(score, nan, nan[:, 0].copy(), total_weight(X, opts.sample_weight))


def _ensemble(estimator: Any, fitted: Any, who: str, methods: Sequence[Method]) -> Any:
    """The fitted fold model's ensemble, with a clear error for an estimator that is not a
    supported booster."""
    try:
        ens = from_model(fitted)
    except TypeError as e:
        if "Cannot explain" in str(e):
            raise InputTypeError(
                f"{who} needs an XGBoost, LightGBM or CatBoost scikit-learn wrapper or a "
                f"treeinner.booster estimator; got {type(estimator).__name__}."
            ) from e
        raise
    warn_shared_credit(ens, methods)
    return ens


def crossfit(
    estimator: Any,
    X: Any,
    y: np.ndarray,
    methods: Sequence[Method],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    sample_weight: np.ndarray | None = None,
    random_state: Any = None,
    fit_params: dict | None = None,
    cols: np.ndarray | None = None,
    names: Any = None,
    who: str = "cross-fitting",
    losses: bool = False,
    n_jobs: int | None = None,
) -> CrossFit:
    """Fit a clone of ``estimator`` on each split's training rows, score its held-out rows
    with ``methods`` and pool the splits.

    Each fold's model scores only its own held-out rows. Methods that use training data
    (``uses_reference``) get the fold's training rows as ``reference`` when the model stores
    no hessian covers. Labels of classifier wrappers are encoded by the fold model's
    ``classes_``. The folds are pooled with ``_stats.combine(parts, mean=method.mean)``;
    methods without a sampling error (``total_gain``, ``permutation``) get the mean of the
    fold scores weighted by the folds' held-out row weights.

    Parameters
    ----------
    estimator : scikit-learn-style estimator
        An XGBoost, LightGBM or CatBoost scikit-learn wrapper or a ``treeinner.booster``
        estimator (cloned; never fitted itself).
    X : array-like, DataFrame or scipy sparse matrix
        All rows.
    y : ndarray of shape (n_samples,)
        Their targets (as the estimator's ``fit`` takes them).
    methods : sequence of Method
    splits : sequence of (train, test) row positions
        As ``split_rows`` gives them: held-out rows disjoint across splits.
    sample_weight : ndarray of shape (n_samples,), optional
        Weights of the rows, in fitting and in scoring.
    random_state : int, numpy Generator or None
        Seed of the methods' draws (each fold's scoring gets it).
    fit_params : dict, optional
        Other arguments of the estimator's ``fit``.
    cols : ndarray of int, optional
        Column positions of X to fit and score on (None: all).
    names : array of str, optional
        Names of all columns of X: the features are then ``names[cols]``; None takes the
        first fold model's feature names.
    who : str
        Who is asking, for error messages.
    losses : bool
        Also record every held-out row's loss under its fold's model (``CrossFit.losses``).
    n_jobs : int or None
        Splits fit and scored at once, in threads (joblib's convention: None or 1 one at a
        time, -1 as many as there are cores).

    Returns
    -------
    CrossFit
    """
    n_cols = int(X.shape[1]) if cols is None else len(cols)
    uses_reference = any(m.uses_reference for m in methods)

    def fold(train: np.ndarray, test: np.ndarray) -> tuple:
        """One split: the fold model's ensemble, its methods' estimates on the held-out rows
        and (with ``losses``) their losses."""
        model = fit_clone(
            estimator,
            X,
            y,
            rows=train,
            cols=cols,
            sample_weight=sample_weight,
            fit_params=fit_params,
            names=names,
        )
        ens = _ensemble(estimator, model, who, methods)
        reference: tuple | None = None
        if uses_reference and needs_reference(ens):
            # no stored hessian covers (CatBoost beyond RMSE): node values and training sums
            # from the rows the fold's model was trained on
            reference = (take(X, train, cols), encode_labels(model, y[train]))
            if sample_weight is not None:
                reference += (sample_weight[train],)
        opts = Options(
            sample_weight=None if sample_weight is None else sample_weight[test],
            reference=reference,
            random_state=random_state,
        )
        Xt, yt = take(X, test, cols), encode_labels(model, y[test])
        found = {m.name: _fold_part(m, ens, Xt, yt, opts) for m in methods}
        fold_loss = None
        if losses:
            fold_loss = get_objective(ens).losses(
                np.asarray(yt, dtype=np.float64), ens.predict_margin(Xt)
            )
        return ens, found, fold_loss

    if n_jobs is None or n_jobs == 1 or len(splits) < 2:
        folds = [fold(train, test) for train, test in splits]
    else:
        from joblib import Parallel, delayed

        # threads: the boosters' fits and treeinner's kernels release the GIL
        folds = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(fold)(train, test) for train, test in splits
        )
    parts: dict[str, list[_stats.Estimate]] = {m.name: [] for m in methods}
    feature_names: list[str] | None = None
    n_outputs = None
    row_loss = np.full(X.shape[0], np.nan) if losses else None
    for k, ((_, test), (ens, found, fold_loss)) in enumerate(zip(splits, folds)):
        fold_names = [str(v) for v in ens.output_names]
        if len(fold_names) != n_cols:
            raise InputError(
                f"The fitted estimator reports {len(fold_names)} features but was fit on "
                f"{n_cols}; cannot match its scores to the columns."
            )
        if feature_names is None:
            feature_names = fold_names
            n_outputs = ens.n_outputs
        elif ens.n_outputs != n_outputs:
            raise InputError(
                f"The model of split {k} has {ens.n_outputs} outputs, that of split 0 "
                f"{n_outputs} (a class missing from a split's training rows?); cannot pool them."
            )
        for m in methods:
            parts[m.name].append(found[m.name])
        if row_loss is not None:
            row_loss[test] = fold_loss
    estimates: dict[str, _stats.Estimate | None] = {}
    scores: dict[str, np.ndarray] = {}
    for m in methods:
        if m.has_se:
            estimates[m.name] = _stats.combine(parts[m.name], mean=m.mean)
        else:
            estimates[m.name] = None
            scores[m.name] = _stats.combine(parts[m.name], mean=True).score
    if names is not None:
        sel = np.asarray(names, dtype=object)
        feature_names = [str(v) for v in (sel if cols is None else sel[cols])]
    return CrossFit(
        estimates, scores, list(feature_names or []), int(n_outputs or 1), len(splits), row_loss
    )
