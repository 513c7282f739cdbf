"""Are held-out p-values calibrated for the features a model only overfit?

``significance()`` tests "score <= 0" per feature with a one-pass standard error. For a feature
independent of the target and of the other features, the test is calibrated when its one-sided
p-value rejects at most ``alpha`` of the time. This trains XGBoost and LightGBM models (depth-4
trees, and 31-leaf trees grown best-first, which overfit more) on a table with four relevant
features (two categorical, two numeric) and three irrelevant ones (a 4-level and a 30-level
categorical column, a normal column), for a binary and a continuous target, in ``--reps``
repetitions, and reports per method and irrelevant feature the mean of ``z = score / se`` over
repetitions (0 for a score centred at zero, below 0 for one that turns negative) and the share
of p-values below 0.05; for the relevant features the share below 0.05 (power).

    python benchmarks/bench_null_calibration.py            # 40 repetitions, a few minutes
    python benchmarks/bench_null_calibration.py --reps 5   # a quick look

Writes ``benchmarks/results/null_calibration.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb

import treeinner

RESULTS = Path(__file__).resolve().parent / "results" / "null_calibration.json"
METHODS = ("forest_inner_initial", "tree_inner", "tree_inner_shap", "unbiased_gain")
RELEVANT = ("plan", "region", "tenure", "spend")
IRRELEVANT = ("channel", "noise_cat", "noise_num")
CATEGORICAL = ("plan", "region", "channel", "noise_cat")
N_TRAIN, N_VALID = 2000, 1000


def make_data(seed: int, task: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The table of docs/howto/categorical.md plus a normal noise column."""
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_VALID
    X = pd.DataFrame(
        {
            "plan": rng.choice(["basic", "plus", "pro"], size=n),
            "region": rng.choice(["north", "south", "east", "west", "centre"], size=n),
            "channel": rng.choice(["web", "store", "phone", "partner"], size=n),
            "tenure": rng.gamma(2.0, 12.0, size=n).round(),
            "spend": rng.lognormal(3.0, 0.6, size=n).round(2),
            "noise_cat": rng.choice([f"level_{j:02d}" for j in range(30)], size=n),
            "noise_num": rng.normal(size=n),
        }
    )
    signal = (
        X["plan"].map({"basic": -1.0, "plus": 0.0, "pro": 1.0})
        + X["region"].map({"north": 0.6, "south": -0.6}).fillna(0.0)
        - 0.04 * (X["tenure"] - 24)
        + 0.3 * np.log(X["spend"])
        - 0.9
    ).to_numpy()
    if task == "classification":
        y = (rng.random(n) < 1 / (1 + np.exp(-signal))).astype(float)
    else:
        y = signal + rng.normal(scale=1.5, size=n)
    return X.astype({c: "category" for c in CATEGORICAL}), y


#: model sizes: depth-4 trees, and trees of 31 leaves grown best-first (LightGBM's and
#: scikit-learn's HistGradientBoosting defaults), which overfit 2,000 rows much more
SIZES = ("depth 4", "31 leaves")


def fit(booster: str, task: str, size: str, X: pd.DataFrame, y: np.ndarray, seed: int) -> Any:
    common: dict[str, Any] = {"n_estimators": 100, "learning_rate": 0.1, "random_state": seed}
    if booster == "xgboost":
        cls = xgb.XGBClassifier if task == "classification" else xgb.XGBRegressor
        shape = (
            {"max_depth": 4}
            if size == "depth 4"
            else {"max_depth": 0, "max_leaves": 31, "grow_policy": "lossguide"}
        )
        return cls(**common, **shape, enable_categorical=True, n_jobs=1).fit(X, y)
    cls = lgb.LGBMClassifier if task == "classification" else lgb.LGBMRegressor
    shape = {"max_depth": 4} if size == "depth 4" else {"num_leaves": 31}
    return cls(**common, **shape, n_jobs=1, verbose=-1).fit(X, y)


def run(reps: int) -> list[dict[str, Any]]:
    rows = []
    cells = itertools.product(SIZES, ("xgboost", "lightgbm"), ("classification", "regression"))
    for size, booster, task in cells:
        for rep in range(reps):
            X, y = make_data(rep, task)
            model = fit(booster, task, size, X[:N_TRAIN], y[:N_TRAIN], rep)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # LightGBM's cat_l2 note on PreDecomp
                table = treeinner.significance(
                    model, X[N_TRAIN:], y[N_TRAIN:], methods=list(METHODS), random_state=rep
                )
            for r in table.itertuples():
                rows.append(
                    {
                        "size": size,
                        "booster": booster,
                        "task": task,
                        "rep": rep,
                        "method": r.method,
                        "feature": r.feature,
                        "z": round(float(r.score / r.se), 6) if r.se > 0 else 0.0,
                        "p_value": round(float(r.p_value), 6),
                    }
                )
    return rows


def summarize(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["kind"] = np.where(df["feature"].isin(RELEVANT), "relevant", df["feature"])
    g = df.groupby(["size", "task", "method", "kind"])
    out = pd.DataFrame(
        {
            "mean_z": g["z"].mean(),
            "se_mean_z": g["z"].std(ddof=1) / np.sqrt(g["z"].size()),
            "reject_5pct": g["p_value"].apply(lambda p: float((p < 0.05).mean())),
            "n": g["z"].size(),
        }
    )
    return out.reset_index()


def markdown(summary: pd.DataFrame) -> str:
    """One row per model size, target and method: the irrelevant columns' mean z (± its s.e.
    over repetitions and boosters) and share of p < 0.05, and the relevant ones' share."""
    kinds = [*IRRELEVANT, "relevant"]
    head = "| trees | target | method | " + " | ".join(
        f"{k}: mean z, share p < 0.05" if k != "relevant" else "relevant: share p < 0.05"
        for k in kinds
    )
    lines = [head + " |", "|---|---|---|" + "---|" * len(kinds)]
    for size, task, m in itertools.product(SIZES, ("classification", "regression"), METHODS):
        sel = summary[
            (summary["size"] == size) & (summary["task"] == task) & (summary["method"] == m)
        ]
        cells = []
        for k in kinds:
            r = sel[sel["kind"] == k].iloc[0]
            if k == "relevant":
                cells.append(f"{r.reject_5pct:.3f}")
            else:
                cells.append(f"{r.mean_z:+.2f} ± {r.se_mean_z:.2f}, {r.reject_5pct:.3f}")
        lines.append(f"| {size} | {task} | `{m}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=40, help="repetitions per booster and task")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.reps < 2:
        p.error("--reps must be at least 2")
    start = time.perf_counter()
    rows = run(args.reps)
    summary = summarize(rows)
    elapsed = time.perf_counter() - start
    table = markdown(summary)
    doc = {
        "benchmark": "null_calibration",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/bench_null_calibration.py"
        + (f" --reps {args.reps}" if args.reps != 40 else ""),
        "elapsed_s": elapsed,
        "cpu_count": os.cpu_count(),
        "versions": {
            "treeinner": treeinner.__version__,
            "xgboost": xgb.__version__,
            "lightgbm": lgb.__version__,
            "python": sys.version.split()[0],
        },
        "reps": args.reps,
        "cells": "depth 4, 31 leaves x xgboost, lightgbm x classification, regression",
        "summary": summary.to_dict(orient="records"),
        "markdown": table,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(table)
    print(f"\n{len(rows)} rows, {elapsed:.0f} s; written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
