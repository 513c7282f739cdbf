"""Seeded random XGBoost models and adversarial data, shared by the XGBoost tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

xgb = __import__("pytest").importorskip("xgboost")

OBJECTIVES = [
    "reg:squarederror",
    "reg:squaredlogerror",
    "reg:logistic",
    "reg:pseudohubererror",
    "binary:logistic",
    "binary:logitraw",
    "binary:hinge",
    "count:poisson",
    "reg:gamma",
    "reg:tweedie",
    "multi:softprob",
    "multi:softmax",
    "rank:ndcg",
    "rank:pairwise",
]


@dataclass
class Case:
    booster: object
    frame: pd.DataFrame  # training data, categoricals as pandas categories
    codes: np.ndarray  # the same as float codes (categoricals as their integer codes)
    cat_cols: list
    feature_types: list
    params: dict
    n_rounds: int


def make_y(rng, objective, X, n_class):
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, -1])
    n = X.shape[0]
    if objective.startswith("multi"):
        return np.digitize(
            signal + rng.normal(size=n), np.quantile(signal, np.linspace(0, 1, n_class + 1)[1:-1])
        ).astype(float)
    if objective.startswith("binary") or objective.startswith("rank"):
        return (signal + rng.normal(size=n) > 0).astype(float)
    if objective == "reg:logistic":
        return 1 / (1 + np.exp(-signal - rng.normal(size=n)))
    if objective in ("count:poisson", "reg:tweedie"):
        return rng.poisson(np.exp(np.clip(signal, -3, 3) * 0.5)).astype(float)
    if objective in ("reg:gamma", "reg:squaredlogerror"):
        return np.exp(np.clip(signal, -3, 3) * 0.3 + 0.1 * rng.normal(size=n))
    return signal * 3 + rng.normal(size=n)


def make_case(seed: int, n: int = 300) -> Case:
    rng = np.random.default_rng(seed)
    objective = OBJECTIVES[seed % len(OBJECTIVES)]
    p = int(rng.integers(2, 7))
    n_cat = int(rng.integers(0, 3)) if seed % 3 else 0
    cols = {}
    cat_cols = []
    for j in range(p):
        kind = rng.integers(0, 4)
        if kind == 0:
            v = rng.normal(size=n)
        elif kind == 1:  # many ties: thresholds land between integers
            v = rng.integers(0, 6, size=n).astype(float)
        elif kind == 2:  # wide range
            v = rng.normal(size=n) * 10.0 ** rng.integers(-8, 9)
        else:  # float64 values that do not survive float32 rounding
            v = rng.normal(size=n) + rng.normal(size=n) * 1e-9
        cols[f"x{j}"] = v
    for j in range(n_cat):
        k = int(rng.integers(2, 13))
        names = [f"c{i}" for i in range(k)] if j % 2 == 0 else list(range(10, 10 + 3 * k, 3))
        cols[f"cat{j}"] = pd.Categorical(rng.choice(names, size=n), categories=names)
        cat_cols.append(f"cat{j}")
    frame = pd.DataFrame(cols)
    miss = [0.0, 0.1, 0.3][seed % 3]
    if miss:
        for c in frame.columns:
            mask = rng.random(n) < miss
            if c in cat_cols:
                frame.loc[mask, c] = np.nan
            else:
                frame.loc[mask, c] = np.nan
    codes = np.column_stack(
        [
            np.where(frame[c].cat.codes < 0, np.nan, frame[c].cat.codes)
            if c in cat_cols
            else frame[c].to_numpy(float)
            for c in frame.columns
        ]
    )
    n_class = int(rng.integers(3, 6)) if objective.startswith("multi") else 1
    y = make_y(rng, objective, codes, n_class)
    params = {
        "objective": objective,
        "max_depth": int(rng.integers(1, 11)),
        "eta": float(rng.choice([0.01, 0.1, 0.3, 1.0, round(float(rng.uniform(0.02, 0.9)), 3)])),
        "lambda": float(rng.choice([0.0, 1.0, 10.0, round(float(rng.uniform(0.1, 5)), 2)])),
        "tree_method": "hist"
        if n_cat or rng.random() < 0.6
        else str(rng.choice(["exact", "approx"])),
        "max_cat_to_onehot": int(rng.choice([1, 4, 64])),
        "min_child_weight": float(rng.choice([0.0, 1.0])),
        "seed": seed,
        "nthread": 1,
    }
    if objective.startswith("multi"):
        params["num_class"] = n_class
    if rng.random() < 0.15:
        params.update(booster="dart", rate_drop=0.3, skip_drop=0.0)
    if rng.random() < 0.2:
        params["num_parallel_tree"] = int(rng.integers(2, 4))
        params["subsample"] = 0.8
        params["colsample_bytree"] = 0.8
    feature_types = ["c" if c in cat_cols else "q" for c in frame.columns]
    dtrain = xgb.DMatrix(frame, y, enable_categorical=True)
    if objective.startswith("rank"):
        dtrain.set_group([n // 3, n // 3, n - 2 * (n // 3)])
    n_rounds = int(rng.integers(2, 9))
    booster = xgb.train(params, dtrain, n_rounds)
    return Case(booster, frame, codes, cat_cols, feature_types, params, n_rounds)


def adversarial_rows(ens, case: Case, rng, n_base: int = 60) -> np.ndarray:
    """Rows of codes with values at, one float32 ulp around, and rounding across thresholds."""
    X = case.codes
    base = X[rng.integers(0, X.shape[0], size=n_base)].copy()
    rows = [base]
    inner = (ens.left >= 0) & (ens.split_type == 0)
    feats, thr = ens.feature[inner], ens.threshold[inner]
    pick = rng.choice(feats.size, size=min(feats.size, 40), replace=False) if feats.size else []
    for i in pick:
        t32 = np.float32(thr[i])
        up = np.nextafter(t32, np.float32(np.inf))
        down = np.nextafter(t32, np.float32(-np.inf))
        t64 = float(t32)
        vals = [
            t64,
            float(up),
            float(down),
            np.nextafter(t64, -np.inf),  # rounds back to t in float32: goes right
            np.nextafter(t64, np.inf),
            0.5 * (float(down) + t64),  # tie: rounds to the even neighbour
            np.nextafter(0.5 * (float(down) + t64), -np.inf),
            np.nextafter(0.5 * (float(down) + t64), np.inf),
            0.5 * (float(up) + t64),
        ]
        block = np.repeat(X[rng.integers(0, X.shape[0], size=1)], len(vals), axis=0)
        block[:, feats[i]] = vals
        rows.append(block)
    special = np.repeat(X[:1], 6, axis=0)
    j = rng.integers(0, X.shape[1], size=6)
    special[np.arange(6), j] = [np.nan, np.inf, -np.inf, 1e300, -1e300, 3.4028235e38]
    rows.append(special)
    out = np.vstack(rows)
    for c, name in enumerate(case.frame.columns):
        if name in case.cat_cols:
            k = len(case.frame[name].cat.categories)
            weird = np.array([k, k + 7, -1, 1.5, 0.9999999999, 2.0000001, 1e10, np.nan, 31, 32, 64])
            out[: weird.size, c] = weird
    return out
