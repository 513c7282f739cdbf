"""Recursive held-out elimination's pieces (``treeinner._elimination``): which features a step
drops, the held-out loss curve with paired standard errors, and the step it chooses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from treeinner._elimination import (
    check_step,
    choose,
    drop_mask,
    loss_curve,
    n_dropped,
    stop_early,
)


def _frame(score, se, p):
    names = [f"f{j}" for j in range(len(score))]
    return pd.DataFrame({"score": score, "se": se, "p_value": p}, index=names)


def test_step_sizes():
    assert n_dropped(0.2, 10) == 2 and n_dropped(0.2, 3) == 1 and n_dropped(0.25, 9) == 3
    assert n_dropped(3, 10) == 3
    assert check_step(0.5) == 0.5 and check_step(2) == 2
    for bad in (0, 0.0, 1.0, 1.5, -1, True, "0.2", None):
        with pytest.raises(ValueError, match="step must be"):
            check_step(bad)


def test_a_step_drops_the_useless_then_the_weakest():
    # f0..f2 strong, f3 weak (p 0.3), f4 noise around 0 (p 0.5), f5 confidently below zero,
    # f6 never used (0, 0): the useless ones (f5, f6) go first whatever the step
    frame = _frame(
        [10.0, 8.0, 6.0, 1.0, 0.0, -3.0, 0.0],
        [1.0, 1.0, 1.0, 1.9, 1.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 0.3, 0.5, 0.999, 1.0],
    )
    drop = drop_mask(frame, 1, min_features=1)
    assert list(frame.index[drop]) == ["f5", "f6"]  # two useless: more than the step of 1
    drop = drop_mask(frame, 3, min_features=1)
    assert list(frame.index[drop]) == ["f4", "f5", "f6"]  # then the weakest of the rest
    drop = drop_mask(frame, 0.5, min_features=1)  # ceil(3.5) = 4
    assert sorted(frame.index[drop]) == ["f3", "f4", "f5", "f6"]
    # never below min_features
    assert drop_mask(frame, 6, min_features=4).sum() == 3
    assert not drop_mask(frame, 1, min_features=7).any()
    # a NaN score is useless
    nan = _frame([5.0, np.nan, 2.0], [1.0, np.nan, 1.0], [0.0, np.nan, 0.02])
    assert list(nan.index[drop_mask(nan, 1, 1)]) == ["f1"]
    # methods without a standard error: the lowest scores
    plain = _frame([5.0, 0.5, 2.0], [np.nan] * 3, [np.nan] * 3)
    assert list(plain.index[drop_mask(plain, 1, 1)]) == ["f1"]


def test_loss_curve_pairs_the_rows():
    rng = np.random.default_rng(0)
    base = rng.exponential(size=400)
    # step 1 a little better on every row, step 2 much worse; paired, step 1's edge is sharp
    losses = [base, base - 0.01 + 0.001 * rng.normal(size=400), base + 0.5]
    curve = loss_curve(losses, None)
    assert list(curve["best"]) == [False, True, False]
    np.testing.assert_allclose(curve["loss"], [np.mean(v) for v in losses])
    np.testing.assert_allclose(
        curve["loss_se"], [np.std(v, ddof=1) / np.sqrt(400) for v in losses], rtol=1e-12
    )
    d = losses[0] - losses[1]
    np.testing.assert_allclose(curve["diff_se"][0], np.std(d, ddof=1) / np.sqrt(400))
    assert curve["diff_se"][1] == 0.0 and curve["diff_se"][0] < 0.1 * curve["loss_se"][0]
    # rows some step did not hold out are left out of every step; weights weigh the rows
    holes = [v.copy() for v in losses]
    holes[0][:10] = np.nan
    w = rng.uniform(0.5, 2.0, size=400)
    got = loss_curve(holes, w)
    keep = slice(10, None)
    np.testing.assert_allclose(got["loss"][2], np.average(losses[2][keep], weights=w[keep]))


def test_choose_and_stop():
    curve = pd.DataFrame(
        {"loss": [0.60, 0.55, 0.50, 0.505, 0.52, 0.70], "loss_se": [0.01] * 6,
         "diff_se": [0.02, 0.01, 0.0, 0.008, 0.01, 0.03],
         "best": [False, False, True, False, False, False]}
    )  # fmt: skip
    n = [20, 10, 6, 4, 3, 2]
    assert choose(curve, n, "best") == 2
    assert choose(curve, n, "one_se") == 3  # 0.505 <= 0.50 + 0.008; 0.52 > 0.51
    assert stop_early(curve)  # 0.70 > 0.50 + 3 * 0.03
    assert not stop_early(curve.iloc[:5])
