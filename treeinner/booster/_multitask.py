"""Multitask feature-selecting boosting (Han et al. 2020, Section 3, Algorithm 1): one model per
task, boosted round by round together, each split paying a shared penalty for a feature no task
uses yet and a per-task penalty for a feature its own task does not use yet."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._errors import InputError
from . import _train
from ._estimators import (
    BaseEstimator,
    GBMClassifier,
    GBMRegressor,
    NotFittedError,
    _float_param,
    _GBMBase,
    _threads,
)


def _split_by_task(X: Any, y: Any, task_column: Any) -> tuple[list, list, list, list]:
    """The rows of each task of a matrix or DataFrame with a task column: the task labels
    (sorted), each task's X (the task column dropped) and y, and each task's row indices."""
    if isinstance(X, pd.DataFrame):
        if task_column not in X.columns:
            raise InputError(f"task_column {task_column!r} is not a column of X.")
        labels_all = X[task_column].to_numpy()
        rest: Any = X.drop(columns=[task_column])
    else:
        Xa = np.asarray(X)
        if Xa.ndim != 2:
            raise InputError(f"X must be 2-D, got shape {Xa.shape}.")
        if not isinstance(task_column, (int, np.integer)) or not (
            -Xa.shape[1] <= task_column < Xa.shape[1]
        ):
            raise InputError(
                f"task_column must be a column index of X (it has {Xa.shape[1]} columns) when X "
                f"is not a DataFrame, got {task_column!r}."
            )
        labels_all = Xa[:, task_column]
        rest = np.delete(Xa, task_column, axis=1)
    if pd.isna(labels_all).any():
        raise InputError("The task column has missing values; every row needs a task.")
    yv = np.asarray(y)
    if yv.shape[0] != labels_all.shape[0]:
        raise InputError(f"X has {labels_all.shape[0]} rows but y has {yv.shape[0]}.")
    tasks = np.unique(labels_all)
    rows = [np.flatnonzero(labels_all == t) for t in tasks]
    if isinstance(rest, pd.DataFrame):
        Xs = [rest.iloc[r] for r in rows]
    else:
        Xs = [rest[r] for r in rows]
    return list(tasks), Xs, [yv[r] for r in rows], rows


class _MultiTaskBase(BaseEstimator):
    """Shared fitting of the multitask estimators."""

    _default: type[_GBMBase] = GBMRegressor

    def __init__(
        self,
        estimator: _GBMBase | None = None,
        group_penalty: float = 0.0,
        task_penalty: float = 0.0,
        task_column: Any = None,
    ) -> None:
        self.estimator = estimator
        self.group_penalty = group_penalty
        self.task_penalty = task_penalty
        self.task_column = task_column

    def _base_estimator(self) -> _GBMBase:
        if self.estimator is None:
            return self._default(penalty_scaling="root")
        if not isinstance(self.estimator, self._default):
            raise InputError(
                f"estimator must be a {self._default.__name__}, got "
                f"{type(self.estimator).__name__}."
            )
        if self.estimator.feature_penalty:
            raise InputError(
                "Set the multitask penalties with group_penalty and task_penalty; the "
                "estimator's feature_penalty must be 0."
            )
        return self.estimator

    def _tasks(
        self, X: Any, y: Any, sample_weight: Any, eval_set: Any
    ) -> tuple[list, list, list, list, list]:
        """Tasks, and per task X, y, sample weights and eval sets."""
        if self.task_column is not None:
            if isinstance(X, (list, tuple)):
                raise InputError("With task_column, X is one matrix holding every task's rows.")
            tasks, Xs, ys, rows = _split_by_task(X, y, self.task_column)
            ws: list = [None] * len(tasks)
            if sample_weight is not None:
                sw = np.asarray(sample_weight, dtype=np.float64)
                if sw.shape != (sum(r.shape[0] for r in rows),):
                    raise InputError("sample_weight must have one entry per row of X.")
                ws = [sw[r] for r in rows]
            evs: list = [None] * len(tasks)
            if eval_set is not None:
                evs = [[] for _ in tasks]
                for Xe, ye in eval_set:
                    te, Xes, yes, _ = _split_by_task(Xe, ye, self.task_column)
                    for t, Xt, yt in zip(te, Xes, yes):
                        if t not in tasks:
                            raise InputError(f"eval_set has task {t!r}, not a task of X.")
                        evs[tasks.index(t)].append((Xt, yt))
            return tasks, Xs, ys, ws, evs
        if not isinstance(X, (list, tuple)) or not isinstance(y, (list, tuple)):
            raise InputError(
                "X and y must be lists with one data set per task (or pass task_column and one "
                "X holding every task's rows)."
            )
        T = len(X)
        if T < 1 or len(y) != T:
            raise InputError(f"X has {T} tasks but y has {len(y)}; give one y per task.")
        ws = [None] * T if sample_weight is None else list(sample_weight)
        evs = [None] * T if eval_set is None else list(eval_set)
        if len(ws) != T or len(evs) != T:
            raise InputError("sample_weight and eval_set need one entry (or None) per task.")
        return list(range(T)), list(X), list(y), ws, evs

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Any = None,
    ) -> _MultiTaskBase:
        """Fit one model per task, boosting the tasks' rounds together.

        Parameters
        ----------
        X : list of array-like or DataFrame, or one array-like or DataFrame
            One data set per task, all with the same features (the same columns); or, with
            ``task_column``, one matrix whose column ``task_column`` says each row's task.
        y : list of array-like, or array-like
            The targets of each task (or of every row, with ``task_column``).
        sample_weight : list of array-like (or None), or array-like, optional
            Row weights per task (or per row, with ``task_column``).
        eval_set : list, optional
            Per task, a list of (X, y) pairs or None (or, with ``task_column``, a list of (X,
            y) pairs holding the task column); each task's early stopping watches its own.

        Returns
        -------
        self
        """
        base = self._base_estimator()
        mu_g = _float_param("group_penalty", self.group_penalty, 0.0, False)
        mu_t = _float_param("task_penalty", self.task_penalty, 0.0, False)
        tasks, Xs, ys, ws, evs = self._tasks(X, y, sample_weight, eval_set)
        seeds = base._rng().integers(0, 2**63 - 1, size=len(tasks))
        estimators: list[_GBMBase] = []
        preps = []
        for k, (Xt, yt, wt, et) in enumerate(zip(Xs, ys, ws, evs)):
            est = type(base)(**{**base.get_params(deep=False), "random_state": int(seeds[k])})
            try:
                preps.append(est._prepare(Xt, yt, wt, et))
            except InputError as e:
                raise InputError(f"task {tasks[k]!r}: {e}") from None
            estimators.append(est)
        p = preps[0].X.shape[1]
        for k, prep in enumerate(preps):
            if prep.X.shape[1] != p or prep.feature_names != preps[0].feature_names:
                raise InputError(
                    f"task {tasks[k]!r} has features {prep.feature_names[:5]}... but task "
                    f"{tasks[0]!r} has {preps[0].feature_names[:5]}...: every task needs the "
                    "same features in the same order."
                )
        used_group = np.zeros(p, dtype=np.uint8)
        trainers = []
        with _threads(base.n_jobs):
            for prep in preps:
                tr = _train.Trainer(
                    prep.X, prep.y, prep.w, prep.obj, prep.base, prep.cfg, prep.rng, prep.evals,
                    prep.is_cat, prep.names,
                )  # fmt: skip
                tr.grower.masks = [used_group, np.zeros(p, dtype=np.uint8)]
                tr.grower.mus = [mu_g, mu_t]
                trainers.append(tr)
            going = True
            while going:  # Algorithm 1: round k grows every task's tree in turn
                going = False
                for tr in trainers:
                    going |= tr.step()
            results = [tr.result() for tr in trainers]
        for est, res, prep in zip(estimators, results, preps):
            est._fitted(res, prep)
        self.tasks_ = np.asarray(tasks)
        self.estimators_ = estimators
        self.n_features_in_ = p
        if preps[0].names is not None:
            self.feature_names_in_ = np.array(preps[0].names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.task_selected_features_ = [est.selected_features_ for est in estimators]
        first: dict[int, tuple[int, int]] = {}
        for k, res in enumerate(results):  # the common set: by round of first use, then task
            per_round = len(res.trees) // max(res.n_rounds, 1)  # the objective's outputs
            for m, tree in enumerate(res.trees):
                for node in tree.split_order.tolist():
                    f = int(tree.feature[node])
                    key = (m // per_round, k)
                    if f not in first or key < first[f]:
                        first[f] = key
        self.selected_features_ = np.array(
            sorted(first, key=lambda f: (first[f], f)), dtype=np.int64
        )
        return self

    def _treeinner_ensemble(self) -> Any:
        """A multitask model is one model per task: treeinner explains one task at a time."""
        raise InputError(
            f"A {type(self).__name__} holds one model per task; explain one task's model, "
            "e.g. treeinner.tree_inner(model.task_model(task), X_task, y_task)."
        )

    # ------------------------------------------------------------------ prediction
    def _task_index(self, task: Any) -> int:
        if not hasattr(self, "estimators_"):
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet; call fit before using it."
            )
        hits = [k for k, t in enumerate(self.tasks_.tolist()) if t == task]
        if not hits:
            raise InputError(f"Unknown task {task!r}; the tasks are {self.tasks_.tolist()}.")
        return hits[0]

    def task_model(self, task: Any) -> _GBMBase:
        """The fitted model of one task (a ``GBMRegressor`` or ``GBMClassifier``; every
        treeinner method explains it).

        Parameters
        ----------
        task : object
            A task label of ``tasks_`` (the task's position when ``fit`` took lists).

        Returns
        -------
        GBMRegressor or GBMClassifier
        """
        return self.estimators_[self._task_index(task)]

    def predict(self, X: Any, task: Any = None) -> np.ndarray:
        """Predictions of one task's model, or of each row's task with ``task_column``.

        Parameters
        ----------
        X : array-like or DataFrame
            Rows with the training features (and the task column, with ``task_column`` and
            ``task`` None).
        task : object, optional
            The task whose model predicts every row; required unless ``task_column`` is set.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._by_task(X, task, "predict")

    def _by_task(self, X: Any, task: Any, method: str) -> np.ndarray:
        if task is not None:
            return getattr(self.task_model(task), method)(X)
        if self.task_column is None:
            raise InputError("Say which task's model predicts: pass task=.")
        tasks, Xs, _, rows = _split_by_task(X, np.zeros(len(X)), self.task_column)
        parts = [getattr(self.task_model(t), method)(Xt) for t, Xt in zip(tasks, Xs)]
        out = np.empty((len(X),) + parts[0].shape[1:], dtype=parts[0].dtype)
        for r, part in zip(rows, parts):
            out[r] = part
        return out


class MultiTaskGBMRegressor(_MultiTaskBase):
    """Multitask feature-selecting boosting for regression (Han et al. 2020, Algorithm 1).

    One ``GBMRegressor`` per task, boosted together: in round k every task grows one tree on its
    own data, in task order. A split on feature j pays ``group_penalty`` (mu_G) if no task's
    model uses j yet and ``task_penalty`` (mu_t) if this task's model does not, both in the
    units of the estimator's ``penalty_scaling`` (by default "root", the A-GBM scaling, so that
    penalties in [0, 1] mean the same in every round and task; Algorithm 1 asks mu_G + mu_t <
    1). ``task_penalty=0`` makes the tasks share one set of features (group sparsity only);
    ``group_penalty=0`` selects each task's features independently.

    Parameters
    ----------
    estimator : GBMRegressor, optional
        The booster parameters of every task's model (cloned per task; its
        ``feature_penalty`` must be 0; ``split_search="group_test"`` is honoured). Default
        ``GBMRegressor(penalty_scaling="root")``.
    group_penalty : float, default 0.0
        mu_G: the penalty of a feature no task uses yet.
    task_penalty : float, default 0.0
        mu_t: the penalty of a feature the task itself does not use yet.
    task_column : str or int, optional
        ``fit`` takes one X whose column ``task_column`` (a DataFrame column name, or a column
        index of an array) labels each row's task; the other columns are the features.
        Otherwise ``fit`` takes lists, one data set per task.

    Attributes
    ----------
    tasks_ : ndarray
        The task labels (sorted values of the task column, or 0..T-1 for lists).
    estimators_ : list of GBMRegressor
        Each task's fitted model (``task_model(task)`` picks one).
    selected_features_ : ndarray of int
        The features any task uses, in the order of first use (by round, then task).
    task_selected_features_ : list of ndarray of int
        Per task, the features its model uses, in the order of first use.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when the tasks' X were DataFrames with string column names.
    """

    _default = GBMRegressor


class MultiTaskGBMClassifier(_MultiTaskBase):
    """Multitask feature-selecting boosting for classification (Han et al. 2020, Algorithm 1).

    As ``MultiTaskGBMRegressor``, with a ``GBMClassifier`` per task (each task its own
    classes).

    Parameters
    ----------
    estimator : GBMClassifier, optional
        Default ``GBMClassifier(penalty_scaling="root")``.
    group_penalty, task_penalty, task_column
        See ``MultiTaskGBMRegressor``.

    Attributes
    ----------
    tasks_, estimators_, selected_features_, task_selected_features_, n_features_in_, \
feature_names_in_
        See ``MultiTaskGBMRegressor``.
    """

    _default = GBMClassifier

    def predict_proba(self, X: Any, task: Any = None) -> np.ndarray:
        """Class probabilities of one task's model (see ``predict``).

        Parameters
        ----------
        X : array-like or DataFrame
        task : object, optional

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._by_task(X, task, "predict_proba")
