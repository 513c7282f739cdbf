"""Seeded random LightGBM models and adversarial data, shared by the LightGBM tests."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

lgb = __import__("pytest").importorskip("lightgbm")

OBJECTIVES = [
    "regression",
    "binary",
    "multiclass",
    "poisson",
    "gamma",
    "tweedie",
    "cross_entropy",
    "multiclassova",
    "regression_l1",
    "huber",
    "quantile",
    "lambdarank",
]
#: objectives with gradients in treeinner (the rest are prediction only)
GRADIENT_OBJECTIVES = OBJECTIVES[:8]
K_ZERO = float(np.float32(1e-35))


@dataclass
class Case:
    booster: object
    X: np.ndarray
    y: np.ndarray
    cat_cols: list
    params: dict
    n_rounds: int


def make_y(rng, objective, X, n_class):
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, -1])
    signal = np.clip(signal, -5, 5)
    n = X.shape[0]
    if objective.startswith("multiclass"):
        edges = np.quantile(signal, np.linspace(0, 1, n_class + 1)[1:-1])
        return np.digitize(signal + rng.normal(size=n), edges).astype(float)
    if objective == "binary":
        return (signal + rng.normal(size=n) > 0.3).astype(float)
    if objective == "lambdarank":
        return np.digitize(signal + rng.normal(size=n), [-0.5, 0.5, 1.5]).astype(float)
    if objective == "cross_entropy":
        return 1 / (1 + np.exp(-signal - rng.normal(size=n)))
    if objective in ("poisson", "tweedie"):
        return rng.poisson(np.exp(signal * 0.5)).astype(float)
    if objective == "gamma":
        return np.exp(signal * 0.3 + 0.1 * rng.normal(size=n))
    return signal * 3 + rng.normal(size=n) + 2.0


def make_case(seed: int, n: int = 240, objective: str | None = None, **extra) -> Case:
    rng = np.random.default_rng(seed)
    objective = objective or OBJECTIVES[seed % len(OBJECTIVES)]
    p = int(rng.integers(2, 6))
    n_cat = int(rng.integers(0, 3)) if seed % 3 else 0
    cols = []
    for _ in range(p):
        kind = rng.integers(0, 5)
        if kind == 0:
            v = rng.normal(size=n)
        elif kind == 1:  # ties and exact zeros
            v = rng.integers(-2, 4, size=n).astype(float)
        elif kind == 2:  # wide range
            v = rng.normal(size=n) * 10.0 ** rng.integers(-8, 9)
        elif kind == 3:  # values near LightGBM's zero threshold
            v = rng.choice([0.0, 1e-36, -1e-36, 1e-30, -1e-30, 1.0, -1.0], size=n)
        else:
            v = rng.normal(size=n) + rng.normal(size=n) * 1e-9
        cols.append(v)
    cat_cols = []
    for j in range(n_cat):
        k = int(rng.integers(2, 14))
        vals = np.arange(k) if j % 2 == 0 else np.arange(3, 3 + 4 * k, 4)  # codes past 32
        cols.append(rng.choice(vals, size=n).astype(float))
        cat_cols.append(p + j)
    X = np.column_stack(cols)
    miss = [0.0, 0.1, 0.3][seed % 3]
    if miss:
        X[rng.random(X.shape) < miss] = np.nan
    n_class = int(rng.integers(3, 5)) if objective.startswith("multiclass") else 1
    y = make_y(rng, objective, X, n_class)
    params = {
        "objective": objective,
        "num_leaves": int(rng.choice([2, 3, 4, 7, 15, 31, 63])),
        "max_depth": int(rng.choice([-1, -1, 1, 2, 3, 5, 8])),
        "learning_rate": float(
            rng.choice([0.01, 0.1, 0.3, 1.0, round(float(rng.uniform(0.02, 0.9)), 3)])
        ),
        "lambda_l2": float(rng.choice([0.0, 1.0, 10.0, round(float(rng.uniform(0.1, 5)), 2)])),
        "min_data_in_leaf": int(rng.choice([1, 3, 10, 20])),
        "min_sum_hessian_in_leaf": float(rng.choice([0.0, 1e-3])),
        "max_bin": int(rng.choice([7, 63, 255])),
        "max_cat_to_onehot": int(rng.choice([1, 4, 64])),
        "cat_smooth": float(rng.choice([1.0, 10.0])),
        "min_data_per_group": int(rng.choice([1, 5, 100])),
        "use_missing": bool(rng.random() < 0.85),
        "zero_as_missing": bool(rng.random() < 0.25),
        "seed": seed,
        "num_threads": 1,
        "deterministic": True,
        "verbose": -1,
    }
    if objective.startswith("multiclass"):
        params["num_class"] = n_class
    if objective == "binary" and rng.random() < 0.3:
        params["scale_pos_weight"] = float(rng.choice([0.5, 3.0]))
    if objective == "tweedie":
        params["tweedie_variance_power"] = float(rng.choice([1.2, 1.5, 1.8]))
    if objective == "poisson" and rng.random() < 0.5:
        params["poisson_max_delta_step"] = float(rng.choice([0.3, 1.5]))
    if objective == "binary" and rng.random() < 0.2:
        params["sigmoid"] = 2.0
    r = rng.random()
    if r < 0.06:
        params.update(boosting="rf", bagging_fraction=0.7, bagging_freq=1)
    elif r < 0.12:
        params.update(boosting="dart", drop_rate=0.3, skip_drop=0.0)
    elif r < 0.18:
        params.update(bagging_fraction=0.7, bagging_freq=1)
    elif r < 0.22:
        params["lambda_l1"] = 0.5
    elif r < 0.26:
        params["boost_from_average"] = False
    elif r < 0.30:
        params["extra_trees"] = True
    params.update(extra)
    group = None
    if objective == "lambdarank":
        group = [n // 3, n // 3, n - 2 * (n // 3)]
    n_rounds = int(rng.integers(1, 8))
    ds = lgb.Dataset(X, y, group=group, categorical_feature=cat_cols or "auto", free_raw_data=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            booster = lgb.train(params, ds, n_rounds)
        except lgb.basic.LightGBMError:  # LightGBM itself fails on a few draws (dart + l1)
            params.update(boosting="gbdt", min_data_in_leaf=20)
            booster = lgb.train(params, ds, n_rounds)
    return Case(booster, X, y, cat_cols, params, n_rounds)


def adversarial_rows(ens, case: Case, rng, n_base: int = 50) -> np.ndarray:
    """Rows at, one ulp around and far from every threshold; odd categories; specials."""
    X = case.X
    rows = [X[rng.integers(0, X.shape[0], size=n_base)].copy()]
    inner = (ens.left >= 0) & (ens.split_type == 0)
    feats, thr = ens.feature[inner], ens.threshold[inner]
    pick = rng.choice(feats.size, size=min(feats.size, 40), replace=False) if feats.size else []
    for i in pick:
        t = float(thr[i])
        vals = [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), -t, 0.0]
        block = np.repeat(X[rng.integers(0, X.shape[0], size=1)], len(vals), axis=0)
        block[:, feats[i]] = vals
        rows.append(block)
    specials = [np.nan, np.inf, -np.inf, 1e300, -1e300, 1e-40, -1e-40, K_ZERO, -K_ZERO, 0.0, 1e-35,
                np.nextafter(K_ZERO, 1), np.nextafter(-K_ZERO, -1), -0.0, -1e-35]  # fmt: skip
    for j in range(X.shape[1]):
        block = np.repeat(X[rng.integers(0, X.shape[0], size=1)], len(specials), axis=0)
        block[:, j] = specials
        rows.append(block)
    out = np.vstack(rows)
    weird = np.array(
        [-1, -0.5, -0.0, 0.5, 1.5, 0.9999999999, 2.0000001, 1e10, np.nan, 31, 32, 64, 63.5,
         2**31 - 1, 2**31, -(2**31), 1e-40, np.inf, -np.inf, 200]
    )  # fmt: skip
    for c in case.cat_cols:
        k = int(np.nanmax(X[:, c])) + 1
        vals = np.concatenate([weird, [k, k + 7]])
        block = np.repeat(X[rng.integers(0, X.shape[0], size=1)], vals.size, axis=0)
        block[:, c] = vals
        out = np.vstack([out, block])
    return out
