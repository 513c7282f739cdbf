"""treeinner.booster's multitask feature-selecting boosting (Han et al. 2020, Algorithm 1):
independent tasks without the group penalty, the shared penalty of a feature another task
uses, one common set without the task penalty, task-column and list inputs, prediction,
treeinner's methods on a task's model, and errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner._errors import InputError
from treeinner.booster import (
    GBMClassifier,
    GBMRegressor,
    MultiTaskGBMClassifier,
    MultiTaskGBMRegressor,
)


def _tasks(seed=0, n=600, d=12, T=3):
    """T related tasks: x0 and x1 matter to all (with task-specific strength), x(3 + t) most
    to task t and a little to the others."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for t in range(T):
        X = rng.uniform(size=(n, d))
        own = 2 * X[:, 3 + t] + 0.5 * sum(X[:, 3 + s] for s in range(T) if s != t)
        y = 2 * X[:, 0] + (t + 1) * X[:, 1] + own + 0.3 * rng.normal(size=n)
        Xs.append(X)
        ys.append(y)
    return Xs, ys


def _same_trees(a, b):
    for key in ("tree_offsets", "feature", "threshold", "value"):
        np.testing.assert_array_equal(getattr(a.ensemble_, key), getattr(b.ensemble_, key))


BASE = {"n_estimators": 20, "max_depth": 3, "penalty_scaling": "root"}


def test_without_group_penalty_the_tasks_are_independent_models():
    """mu_G = 0: every task's model is the single-task model with feature_penalty = mu_t on
    that task's data alone (identical trees), and picks its own features."""
    Xs, ys = _tasks()
    mt = MultiTaskGBMRegressor(GBMRegressor(**BASE), task_penalty=0.05).fit(Xs, ys)
    for t, (X, y) in enumerate(zip(Xs, ys)):
        single = GBMRegressor(**BASE, feature_penalty=0.05).fit(X, y)
        _same_trees(mt.task_model(t), single)
        assert set(mt.task_selected_features_[t].tolist()) == {0, 1, 3 + t}
    assert set(mt.selected_features_.tolist()) == {0, 1, 3, 4, 5}


def test_without_task_penalty_the_tasks_share_one_set():
    """mu_t = 0: a feature one task pays for is free for every other, so the tasks' weak
    features (each strong for one task) end up in every task: one common set. With mu_G = 0
    and the same penalty as mu_t each task keeps its own strong features only."""
    Xs, ys = _tasks(1)
    shared = MultiTaskGBMRegressor(GBMRegressor(**BASE), group_penalty=0.05).fit(Xs, ys)
    assert set(shared.selected_features_.tolist()) == {0, 1, 3, 4, 5}
    for s in shared.task_selected_features_:
        assert set(s.tolist()) == {0, 1, 3, 4, 5}
    indep = MultiTaskGBMRegressor(GBMRegressor(**BASE), task_penalty=0.05).fit(Xs, ys)
    for t, s in enumerate(indep.task_selected_features_):
        assert set(s.tolist()) == {0, 1, 3 + t}


def test_the_group_penalty_is_shared_between_tasks():
    """Stumps, one round: task A's strong x0 makes x0 free for task B, whose own best feature
    x1 beats x0 by less than mu_G, so B splits on x0; without the shared penalty B takes x1."""
    rng = np.random.default_rng(2)
    n = 2000
    XA = rng.uniform(size=(n, 3))
    yA = 3 * XA[:, 0] + 0.1 * rng.normal(size=n)
    XB = rng.uniform(size=(n, 3))
    yB = 1.0 * XB[:, 0] + 1.3 * XB[:, 1] + 0.1 * rng.normal(size=n)
    stump = {"n_estimators": 1, "max_depth": 1, "reg_lambda": 0.0, "penalty_scaling": "root"}
    gain = {}
    for f in (0, 1):  # the best stump gain of each feature alone, scaled by the root SSE
        est = GBMRegressor(**stump).fit(XB[:, [f]], yB)
        gain[f] = est.ensemble_.gain[0] / np.sum((yB - yB.mean()) ** 2)
    assert gain[1] > gain[0]
    mu = 1.5 * (gain[1] - gain[0])
    assert mu < gain[0]
    mt = MultiTaskGBMRegressor(GBMRegressor(**stump), group_penalty=mu).fit([XA, XB], [yA, yB])
    assert mt.task_model(0).ensemble_.feature[0] == 0
    assert mt.task_model(1).ensemble_.feature[0] == 0
    alone = MultiTaskGBMRegressor(GBMRegressor(**stump), task_penalty=mu).fit([XA, XB], [yA, yB])
    assert alone.task_model(1).ensemble_.feature[0] == 1


def test_task_column_input_equals_list_input():
    Xs, ys = _tasks(3, n=300)
    names = [f"x{j}" for j in range(Xs[0].shape[1])]
    frame = pd.concat(
        [pd.DataFrame(X, columns=names).assign(task=lab) for X, lab in zip(Xs, "abc")],
        ignore_index=True,
    )
    y = np.concatenate(ys)
    est = GBMRegressor(**BASE)
    by_col = MultiTaskGBMRegressor(est, 0.02, 0.02, task_column="task").fit(frame, y)
    by_list = MultiTaskGBMRegressor(est, 0.02, 0.02).fit(
        [pd.DataFrame(X, columns=names) for X in Xs], ys
    )
    assert by_col.tasks_.tolist() == ["a", "b", "c"]
    for k, lab in enumerate("abc"):
        _same_trees(by_col.task_model(lab), by_list.task_model(k))
    assert by_col.feature_names_in_[by_col.selected_features_].tolist() == [
        names[j] for j in by_list.selected_features_
    ]
    expected = [by_list.predict(pd.DataFrame(X, columns=names), task=k) for k, X in enumerate(Xs)]
    np.testing.assert_array_equal(by_col.predict(frame), np.concatenate(expected))
    arr = np.column_stack([np.repeat([0.0, 1.0, 2.0], 300), np.vstack(Xs)])
    by_index = MultiTaskGBMRegressor(est, 0.02, 0.02, task_column=0).fit(arr, y)
    for k in range(3):
        _same_trees(by_index.task_model(float(k)), by_list.task_model(k))


def test_classifier_tasks_and_treeinner_on_a_task_model():
    Xs, ys = _tasks(4, n=500)
    labels = [(y > np.median(y)).astype(int) for y in ys]
    mt = MultiTaskGBMClassifier(
        GBMClassifier(n_estimators=15, max_depth=3, penalty_scaling="root"),
        group_penalty=0.02, task_penalty=0.02,
    ).fit(Xs, labels)  # fmt: skip
    proba = mt.predict_proba(Xs[1], task=1)
    assert proba.shape == (500, 2)
    np.testing.assert_allclose(proba, mt.task_model(1).predict_proba(Xs[1]))
    model = mt.task_model(0)
    ti = treeinner.tree_inner(model, Xs[0], labels[0])
    np.testing.assert_allclose(ti.to_numpy(), model.feature_importances_, rtol=1e-7, atol=1e-9)
    with pytest.raises(InputError, match="task_model"):
        treeinner.tree_inner(mt, Xs[0], labels[0])


def test_errors():
    Xs, ys = _tasks(5, n=100, d=6)
    with pytest.raises(InputError, match="same features"):
        MultiTaskGBMRegressor().fit([Xs[0], Xs[1][:, :5]], ys[:2])
    with pytest.raises(InputError, match="feature_penalty"):
        MultiTaskGBMRegressor(GBMRegressor(feature_penalty=1.0)).fit(Xs, ys)
    with pytest.raises(InputError, match="one y per task"):
        MultiTaskGBMRegressor().fit(Xs, ys[:2])
    with pytest.raises(InputError, match="lists"):
        MultiTaskGBMRegressor().fit(Xs[0], ys[0])
    with pytest.raises(InputError, match="GBMRegressor"):
        MultiTaskGBMRegressor(GBMClassifier()).fit(Xs, ys)
    with pytest.raises(InputError, match="task 1"):
        MultiTaskGBMRegressor().fit(Xs, [ys[0], ys[1][:50], ys[2]])
    with pytest.raises(InputError, match="group_penalty"):
        MultiTaskGBMRegressor(group_penalty=-0.1).fit(Xs, ys)
    mt = MultiTaskGBMRegressor(GBMRegressor(n_estimators=2)).fit(Xs, ys)
    with pytest.raises(InputError, match="Unknown task"):
        mt.predict(Xs[0], task=7)
    with pytest.raises(InputError, match="task="):
        mt.predict(Xs[0])
    with pytest.raises(InputError, match="task_column"):
        MultiTaskGBMRegressor(task_column="t").fit(pd.DataFrame(Xs[0]), ys[0])
