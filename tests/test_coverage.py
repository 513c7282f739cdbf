"""A small version of ``benchmarks/bench_coverage.py``: do the one-pass standard errors of
TreeInner (PreDecomp and TreeSHAP) and ForestInner mean what they say? (The unbiased gain's
Monte Carlo checks are in ``tests/test_unbiased_se.py``.)"""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.stats

import treeinner

xgb = pytest.importorskip("xgboost")

METHODS = ["tree_inner", "tree_inner_shap", "forest_inner"]


@pytest.fixture(name="one_thread")
def _one_thread():
    """Hundreds of calls on small data: one thread (starting the threads of every parallel
    kernel would cost more than the work)."""
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(threads)


def _law(rng, n):
    """Two signal features (one interacting), three noise features."""
    X = rng.normal(size=(n, 5))
    return X, X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + rng.normal(size=n)


def test_intervals_cover_the_population_value(one_thread):
    """A fixed model; the value a validation set of 300 rows estimates, from 100,000 fresh
    rows; 150 validation sets: the 95% intervals cover it in about 95% of the sets, and the
    mean standard error matches the spread of the scores."""
    rng = np.random.default_rng(0)
    Xt, yt = _law(rng, 600)
    params = {"max_depth": 3, "eta": 0.3, "min_child_weight": 5, "nthread": 1}
    ens = treeinner.from_model(xgb.train(params, xgb.DMatrix(Xt, yt), 15))
    n_valid, n_pop = 300, 100_000
    Xp, yp = _law(rng, n_pop)
    truth = treeinner.importance(ens, Xp, yp, methods=METHODS) * (n_valid / n_pop)
    scores = {m: [] for m in METHODS}
    ses = {m: [] for m in METHODS}
    for _ in range(150):
        X, y = _law(rng, n_valid)
        frame = treeinner.importance(ens, X, y, methods=METHODS, se=True)
        for m in METHODS:
            scores[m].append(frame[m].to_numpy())
            ses[m].append(frame[f"{m}_se"].to_numpy())
    for m in METHODS:
        S, E = np.array(scores[m]), np.array(ses[m])
        assert (E > 0).all()  # every feature is split on, the noise ones too
        covered = np.abs(S - truth[m].to_numpy()) <= 1.96 * E
        # 750 intervals: the share is within about 0.016 (one sd) of its expectation
        assert 0.91 <= covered.mean() <= 0.985, (m, covered.mean(0))
        np.testing.assert_allclose(E.mean(axis=0), S.std(axis=0, ddof=1), rtol=0.2)


def test_p_values_uniform_at_the_null_boundary(one_thread):
    """Labels independent of X with mean 0, one boosting round, base score 0: every
    feature's expected held-out score is exactly 0, so the one-sided p-values are uniform."""
    rng = np.random.default_rng(1)
    p = {m: [] for m in METHODS}
    params = {"max_depth": 3, "eta": 0.5, "base_score": 0.0, "nthread": 1}
    for _ in range(60):
        X, y = rng.normal(size=(600, 5)), rng.normal(size=600)
        ens = treeinner.from_model(xgb.train(params, xgb.DMatrix(X[:300], y[:300]), 1))
        table = treeinner.significance(ens, X[300:], y[300:], methods=METHODS)
        for m in METHODS:
            t = table[table.method == m]
            p[m].extend(t.p_value[t.se > 0])
    for m in METHODS:
        assert len(p[m]) > 150
        assert scipy.stats.kstest(p[m], "uniform").pvalue > 0.001, m
