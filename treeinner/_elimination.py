"""Recursive held-out elimination: which features a step drops, and which step's set the
held-out loss curve chooses (``TreeInnerSelector(strategy="recursive")``).

Each step cross-fits the estimator on the features left, scores them on the held-out rows
(one pooled score and standard error per feature) and records every held-out row's loss. The
step then drops the confidently useless features (one-sided upper bound ``score + z_{0.8} se``
at or below 0, or no score) and, to make at least ``step`` of them, the features with the
weakest evidence (largest p-value; the lowest score for methods without one). The kept set
is chosen on the curve of held-out losses: the fewest features whose mean loss is within one
standard error of the best step's, the standard error of the paired per-row difference to
the best step (the same rows, each scored by a model that did not see it), or the best step
itself.
"""

from __future__ import annotations

import math
import numbers
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from ._errors import InputError

__all__ = ["CHOICES", "check_step", "choose", "drop_mask", "loss_curve", "n_dropped"]

CHOICES = ("one_se", "best")
#: a feature whose one-sided 80% upper bound is at or below 0 is confidently useless
USELESS_LEVEL = 0.2
#: elimination stops once a step's loss is this many paired standard errors above the best
STOP_SE = 3.0


def check_step(step: Any) -> float | int:
    """``step``: a fraction in (0, 1) of the features left, or a count >= 1."""
    if isinstance(step, bool) or not isinstance(step, numbers.Real):
        raise InputError(f"step must be a fraction in (0, 1) or a count >= 1, got {step!r}.")
    if isinstance(step, numbers.Integral):
        if step < 1:
            raise InputError(f"step must be a fraction in (0, 1) or a count >= 1, got {step}.")
        return int(step)
    value = float(step)
    if not 0.0 < value < 1.0:
        raise InputError(f"step must be a fraction in (0, 1) or a count >= 1, got {step!r}.")
    return value


def n_dropped(step: float | int, n: int) -> int:
    """How many of ``n`` features a step drops at least."""
    if isinstance(step, int):
        return step
    return max(1, math.ceil(step * n))


def drop_mask(frame: pd.DataFrame, step: float | int, min_features: int) -> np.ndarray:
    """The features (rows of ``frame``: ``score``, ``se``, ``p_value``) a step drops: the
    confidently useless ones, then the weakest until at least ``n_dropped`` are, keeping at
    least ``min_features``."""
    score = frame["score"].to_numpy(dtype=np.float64)
    se = frame["se"].to_numpy(dtype=np.float64)
    p = frame["p_value"].to_numpy(dtype=np.float64)
    n = score.shape[0]
    z = NormalDist().inv_cdf(1.0 - USELESS_LEVEL)
    with np.errstate(invalid="ignore"):
        useless = np.isnan(score) | ~(score + z * np.nan_to_num(se) > 0.0)
    # weakest first: no score, then the largest p-value (methods without one: lowest score)
    key = np.where(np.isnan(p), 2.0, p) if not np.all(np.isnan(p)) else -score
    key = np.where(np.isnan(score), np.inf, key)
    order = np.lexsort((score, -key))  # by key descending, ties by the lower score
    want = min(max(n_dropped(step, n), int(useless.sum())), n - min_features)
    drop = np.zeros(n, dtype=bool)
    if want <= 0:
        return drop
    # the useless first (in order of weakness), then the weakest of the rest
    ranked = np.concatenate([order[useless[order]], order[~useless[order]]])
    drop[ranked[:want]] = True
    return drop


def _weighted_mean_se(values: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    sw = float(w.sum())
    mean = float(w @ values / sw)
    resid = values - mean
    n = values.shape[0]
    var = float((w * w) @ (resid * resid)) / (sw * sw) * (n / max(n - 1, 1))
    return mean, math.sqrt(var)


def loss_curve(losses: list[np.ndarray], w: np.ndarray | None) -> pd.DataFrame:
    """Per step: the held-out rows' mean loss and its standard error, and the standard error
    of its paired difference to the best step's (``diff_se``; 0 for the best itself)."""
    rows = ~np.any(np.isnan(np.vstack(losses)), axis=0)  # the rows every step held out
    weight = np.ones(int(rows.sum())) if w is None else np.asarray(w, dtype=np.float64)[rows]
    stats = [_weighted_mean_se(v[rows], weight) for v in losses]
    mean = np.array([m for m, _ in stats])
    best = int(np.argmin(mean))
    diff_se = np.array([_weighted_mean_se(v[rows] - losses[best][rows], weight)[1]
                        for v in losses])  # fmt: skip
    return pd.DataFrame(
        {"loss": mean, "loss_se": [s for _, s in stats], "diff_se": diff_se, "best": False}
    ).assign(best=lambda d: d.index == best)


def choose(curve: pd.DataFrame, n_features: list[int], how: str) -> int:
    """The step whose set is kept: the best loss, or (``"one_se"``) the fewest features whose
    loss is within one paired standard error of the best (ties: the lower loss)."""
    best = int(np.flatnonzero(curve["best"].to_numpy())[0])
    if how == "best":
        return best
    loss = curve["loss"].to_numpy()
    close = np.flatnonzero(loss <= loss[best] + curve["diff_se"].to_numpy())
    return int(min(close, key=lambda k: (n_features[k], loss[k])))


def stop_early(curve: pd.DataFrame) -> bool:
    """Whether the last step's loss is ``STOP_SE`` paired standard errors above the best (the
    sets after it only get smaller)."""
    last = curve.iloc[-1]
    best = curve.loc[curve["best"]].iloc[0]
    return bool(last["loss"] > best["loss"] + STOP_SE * last["diff_se"] and not last["best"])
