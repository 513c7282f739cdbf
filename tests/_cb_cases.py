"""Seeded random CatBoost models and adversarial data, shared by the CatBoost tests."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

cb = __import__("pytest").importorskip("catboost")

LOSSES = ["RMSE", "Logloss", "CrossEntropy", "MultiClass", "Poisson", "Tweedie:variance_power=1.5"]
GROW = ["SymmetricTree", "Depthwise", "Lossguide"]
NAN_MODES = ["Min", "Max"]


@dataclass
class Case:
    model: object
    X: np.ndarray  # training features
    y: np.ndarray  # training labels (0/1 for Logloss, class codes for MultiClass)
    params: dict


def make_y(rng, loss, X):
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, -1])
    n = X.shape[0]
    if loss == "MultiClass":
        cut = np.quantile(signal, [1 / 3, 2 / 3])
        return np.digitize(signal + 0.5 * rng.normal(size=n), cut).astype(float)
    if loss == "Logloss":
        return (signal + rng.normal(size=n) > 0).astype(float)
    if loss == "CrossEntropy":
        return 1 / (1 + np.exp(-np.clip(signal, -30, 30) - rng.normal(size=n)))
    if loss.startswith("Poisson") or loss.startswith("Tweedie"):
        return rng.poisson(np.exp(np.clip(signal, -3, 3) * 0.5)).astype(float)
    return signal * 3 + rng.normal(size=n) + 2.0


def make_X(rng, n, p, nan_frac):
    cols = []
    for _ in range(p):
        kind = rng.integers(0, 4)
        if kind == 0:
            v = rng.normal(size=n)
        elif kind == 1:  # ties
            v = rng.integers(0, 6, size=n).astype(float)
        elif kind == 2:  # wide range
            v = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7)
        else:  # float64 values that do not survive float32 rounding
            v = rng.normal(size=n) + rng.normal(size=n) * 1e-9
        v[rng.random(n) < nan_frac] = np.nan
        cols.append(v)
    return np.column_stack(cols)


def fit(params, X, y, sample_weight=None):
    m = cb.CatBoost({"verbose": 0, "allow_writing_files": False, "thread_count": 1, **params})
    m.fit(X, y, sample_weight=sample_weight)
    return m


def make_case(seed: int, n: int = 200) -> Case:
    rng = np.random.default_rng(seed)
    loss = LOSSES[seed % len(LOSSES)]
    grow = GROW[(seed // len(LOSSES)) % len(GROW)]
    p = int(rng.integers(2, 6))
    X = make_X(rng, n, p, nan_frac=float(rng.choice([0.0, 0.05, 0.2])))
    y = make_y(rng, loss, X)
    params = {
        "loss_function": loss,
        "iterations": int(rng.integers(1, 6)),
        "depth": int(rng.integers(1, 9)),
        "learning_rate": float(rng.choice([0.03, 0.1, 0.3, 0.5, 1.0])),
        "l2_leaf_reg": float(rng.choice([0.0, 0.5, 1.0, 3.0, 10.0])),
        "grow_policy": grow,
        "nan_mode": NAN_MODES[seed % 2],
        "random_seed": seed,
        "border_count": int(rng.choice([4, 32, 254])),
    }
    if grow == "Lossguide":
        params["max_leaves"] = int(rng.integers(2, 20))
    return Case(fit(params, X, y), X, y, params)


def model_doc(model) -> dict:
    """The model's JSON export, decoded."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)


def borders(doc: dict) -> dict[int, np.ndarray]:
    """Column -> float32 borders of every numeric feature."""
    out = {}
    for f in doc["features_info"].get("float_features", []):
        out[f["flat_feature_index"]] = np.asarray(f.get("borders") or [], dtype=np.float32)
    return out


def adversarial_rows(doc: dict, X: np.ndarray, rng, n_rows: int = 300) -> np.ndarray:
    """Rows with values at borders, one float32 ulp either side, float64 values rounding onto a
    border, NaN, +-inf and huge values, mixed with training rows."""
    p = X.shape[1]
    rows = X[rng.integers(0, X.shape[0], size=n_rows)].copy()
    bd = borders(doc)
    special = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, 3.4e38, -3.4e38, 0.0, -0.0])
    for j in range(p):
        b = bd.get(j, np.zeros(0, dtype=np.float32))
        cand = [special]
        if b.size:
            with np.errstate(over="ignore"):  # a border at -FLT_MAX (nan_mode Min)
                up = np.nextafter(b, np.float32(np.inf))
                down = np.nextafter(b, np.float32(-np.inf))
            b64 = b.astype(np.float64)
            up, down = np.where(np.isfinite(up), up, b), np.where(np.isfinite(down), down, b)
            half_up = (up.astype(np.float64) - b64) / 2
            half_dn = (b64 - down.astype(np.float64)) / 2
            cand += [
                b64,
                up.astype(np.float64),
                down.astype(np.float64),
                b64 + half_up * 0.999,  # rounds to b in float32
                b64 - half_dn * 0.999,
                b64 + half_up,  # exactly half way: ties to even
                b64 - half_dn,
            ]
        pool = np.concatenate(cand)
        pick = rng.random(n_rows) < 0.5
        rows[pick, j] = rng.choice(pool, size=int(pick.sum()))
    return rows
