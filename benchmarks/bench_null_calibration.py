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
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import catboost as cb
import lightgbm as lgb
import numpy as np
import pandas as pd
import sklearn
import xgboost as xgb
from scipy.stats import binom
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

import treeinner

RESULTS = Path(__file__).resolve().parent / "results" / "null_calibration.json"
METHODS = (
    "forest_inner_initial",
    "forest_inner_initial_shap",
    "tree_inner",
    "tree_inner_shap",
    "unbiased_gain",
)
BOOSTERS = ("xgboost", "lightgbm", "catboost", "hgb")
TASKS = ("binary", "multiclass", "regression")
RELEVANT = ("plan", "region", "tenure", "spend")
IRRELEVANT = ("channel", "noise_cat", "noise_num")
CATEGORICAL = ("plan", "region", "channel", "noise_cat")
N_TRAIN, N_VALID = 2000, 1000


def make_data(seed: int, task: str, n: int = N_TRAIN + N_VALID) -> tuple[pd.DataFrame, np.ndarray]:
    """The table of docs/howto/categorical.md plus a normal noise column."""
    rng = np.random.default_rng(seed)
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
    if task == "binary":
        y = (rng.random(n) < 1 / (1 + np.exp(-signal))).astype(float)
    elif task == "multiclass":
        y = np.digitize(signal + rng.logistic(size=n), [-1.5, 0.0]).astype(float)
    else:
        y = signal + rng.normal(scale=1.5, size=n)
    return X.astype({c: "category" for c in CATEGORICAL}), y


#: model sizes: depth-4 trees, and trees of 31 leaves grown best-first (LightGBM's and
#: scikit-learn's HistGradientBoosting defaults), which overfit 2,000 rows much more
SIZES = ("depth 4", "31 leaves")


def fit(booster: str, task: str, size: str, X: pd.DataFrame, y: np.ndarray, seed: int) -> Any:
    common: dict[str, Any] = {"learning_rate": 0.1, "random_state": seed}
    deep = size != "depth 4"
    classify = task != "regression"
    if booster == "xgboost":
        cls = xgb.XGBClassifier if classify else xgb.XGBRegressor
        shape = (
            {"max_depth": 0, "max_leaves": 31, "grow_policy": "lossguide"}
            if deep
            else {"max_depth": 4}
        )
        return cls(**common, **shape, n_estimators=100, enable_categorical=True, n_jobs=1).fit(X, y)
    if booster == "lightgbm":
        cls = lgb.LGBMClassifier if classify else lgb.LGBMRegressor
        shape = {"num_leaves": 31} if deep else {"max_depth": 4}
        return cls(**common, **shape, n_estimators=100, n_jobs=1, verbose=-1).fit(X, y)
    if booster == "catboost":
        cls = cb.CatBoostClassifier if classify else cb.CatBoostRegressor
        # 32-leaf oblivious trees: TreeSHAP does not take Lossguide trees with categorical splits
        shape = {"depth": 5} if deep else {"depth": 4}
        return cls(
            **common, **shape, iterations=100, thread_count=1, verbose=False,
            cat_features=list(CATEGORICAL),
        ).fit(X, y)  # fmt: skip
    cls = HistGradientBoostingClassifier if classify else HistGradientBoostingRegressor
    shape = {"max_leaf_nodes": 31} if deep else {"max_depth": 4, "max_leaf_nodes": None}
    return cls(
        **common, **shape, max_iter=100, early_stopping=False, categorical_features="from_dtype"
    ).fit(X, y)


def _z_table(
    model: Any, X: pd.DataFrame, y: np.ndarray, seed: int, reference: Any, methods: tuple[str, ...]
) -> pd.DataFrame:
    """The significance table (the total over classes); ``reference``: the training data,
    for CatBoost models, which store no hessian covers (TreeInner's PreDecomp needs them; the
    centred initial form does not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LightGBM's cat_l2 note on PreDecomp
        table = treeinner.significance(
            model, X, y, methods=list(methods), random_state=seed, reference=reference
        )
    if "output" in table:
        table = table[table["output"] == "total"]
    return table


#: the methods of the population column: the TreeSHAP variants are left out (path-dependent
#: TreeSHAP of 300 trees of 31 leaves on 200,000 rows takes about 5 minutes a cell here)
POPULATION_METHODS = ("forest_inner_initial", "tree_inner", "unbiased_gain")


Rows = list[dict[str, Any]]


def _task(args: tuple[str, str, str, int, int, tuple[str, ...], int]) -> tuple[Rows, Rows]:
    """One repetition of one cell: its rows, and (for repetition 0) the population rows.

    ``draws`` validation sets of ``N_VALID`` fresh rows score the one model (the first is the
    rows after the training rows): given the model, their tests are independent, so more draws
    buy more tests of the model-conditional null for the price of scoring alone."""
    size, booster, task, rep, population, methods, draws = args
    X, y = make_data(rep, task)
    model = fit(booster, task, size, X[:N_TRAIN], y[:N_TRAIN], rep)
    # CatBoost stores no hessian covers: the training rows, for the methods that read them
    uses = any(treeinner._methods.get(m).uses_reference for m in methods)
    ref = (X[:N_TRAIN], y[:N_TRAIN]) if booster == "catboost" and uses else None
    key = {"size": size, "booster": booster, "task": task}
    rows = []
    for draw in range(draws):
        Xv, yv = (X[N_TRAIN:], y[N_TRAIN:]) if draw == 0 else make_data(
            (draw << 20) + rep, task, N_VALID
        )  # fmt: skip
        rows += [
            {
                **key,
                "rep": rep,
                "draw": draw,
                "method": r.method,
                "feature": r.feature,
                "z": round(float(r.score / r.se), 6) if r.se > 0 else 0.0,
                "p_value": round(float(r.p_value), 6),
            }
            for r in _z_table(model, Xv, yv, rep, ref, methods).itertuples()
        ]
    pop = []
    pop_methods = tuple(m for m in POPULATION_METHODS if m in methods)
    if rep == 0 and population > 0 and pop_methods:
        Xp, yp = make_data(10_000 + rep, task, population)
        scale = np.sqrt(N_VALID / population)
        pop_uses = any(treeinner._methods.get(m).uses_reference for m in pop_methods)
        pref = ref if pop_uses else None
        for r in _z_table(model, Xp, yp, rep, pref, pop_methods).itertuples():
            z = float(r.score / r.se) * scale if r.se > 0 else 0.0
            pop.append({**key, "method": r.method, "feature": r.feature, "z_per_1000": round(z, 4)})
    return rows, pop


def run(
    reps: int,
    population: int,
    jobs: int = 1,
    methods: tuple[str, ...] = METHODS,
    draws: int = 1,
    boosters: tuple[str, ...] = BOOSTERS,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tasks = [
        (size, booster, task, rep, population, methods, draws)
        for size, booster, task in itertools.product(SIZES, boosters, TASKS)
        for rep in range(reps)
    ]
    if jobs > 1:
        # one Numba thread a process: the processes are the parallelism
        os.environ["NUMBA_NUM_THREADS"] = "1"
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            parts = list(pool.map(_task, tasks, chunksize=4))
    else:
        parts = [_task(t) for t in tasks]
    rows = [r for part, _ in parts for r in part]
    pop = [r for _, part in parts for r in part]
    return rows, pop


def summarize(rows: list[dict[str, Any]], pop: list[dict[str, Any]]) -> pd.DataFrame:
    """Per cell and method: the irrelevant features' mean z and share of p < 0.05 (pooled
    over the three of them and the repetitions), the relevant ones' share (power), and the
    population z per sqrt(1,000) rows of the irrelevant ones (their mean and largest |z|)."""
    df = pd.DataFrame(rows)
    df["kind"] = np.where(df["feature"].isin(RELEVANT), "relevant", "irrelevant")
    keys = ["size", "booster", "task", "method"]
    irr = df[df["kind"] == "irrelevant"].groupby(keys)
    rel = df[df["kind"] == "relevant"].groupby(keys)
    out = pd.DataFrame(
        {
            "mean_z": irr["z"].mean(),
            "reject_5pct": irr["p_value"].apply(lambda p: float((p < 0.05).mean())),
            "n_tests": irr["z"].size(),
            "power_5pct": rel["p_value"].apply(lambda p: float((p < 0.05).mean())),
        }
    )
    # how surprising the cell's rejections are for a test that holds its level: P(X >= k)
    # for X ~ Binomial(n_tests, 0.05); with 120 tests a cell at the level is above 0.06 a
    # quarter of the time, so the cells are judged by this, pooled in ``pooled()``
    k = np.rint(out["reject_5pct"] * out["n_tests"])
    out["binom_p"] = binom.sf(k - 1, out["n_tests"], 0.05)
    if pop:
        pf = pd.DataFrame(pop)
        pf = pf[~pf["feature"].isin(RELEVANT)].groupby(keys)["z_per_1000"]
        out["population_z"] = pf.mean()
        out["population_max_abs_z"] = pf.apply(lambda z: float(np.abs(z).max()))
    return out.reset_index()


def pooled(summary: pd.DataFrame) -> pd.DataFrame:
    """Per method, over every cell: the irrelevant features' share of p < 0.05 with its
    binomial standard error, the largest cell share, the smallest cell binomial p-value (the
    Bonferroni-judged worst cell), the relevant features' power and the population z."""
    g = summary.assign(k=summary["reject_5pct"] * summary["n_tests"]).groupby("method")
    n = g["n_tests"].sum()
    share = g["k"].sum() / n
    out = pd.DataFrame(
        {
            "reject_5pct": share,
            "se": np.sqrt(share * (1 - share) / n),
            "n_tests": n,
            "max_cell_reject": g["reject_5pct"].max(),
            "min_cell_binom_p": g["binom_p"].min(),
            "power_5pct": g["power_5pct"].mean(),
        }
    )
    if "population_z" in summary:
        out["population_mean_abs_z"] = g["population_z"].apply(lambda z: float(np.abs(z).mean()))
        out["population_max_abs_z"] = g["population_max_abs_z"].max()
    return out.reset_index()


def markdown(summary: pd.DataFrame) -> str:
    """One row per cell and method."""
    pop = "population_z" in summary
    head = "| trees | booster | target | method | irrelevant: share p < 0.05 | P(at least) |"
    head += " mean z |" + (" population z (mean, max abs) |" if pop else "")
    head += " relevant: power |"
    lines = [head, "|---|---|---|---|---:|---:|---:|" + ("---:|" if pop else "") + "---:|"]
    for r in summary.itertuples():
        cells = f"| {r.size} | {r.booster} | {r.task} | `{r.method}` | {r.reject_5pct:.3f} | "
        cells += f"{r.binom_p:.3f} | {r.mean_z:+.2f} |"
        if pop:
            pz = r.population_z
            cells += " - |" if np.isnan(pz) else f" {pz:+.2f}, {r.population_max_abs_z:.2f} |"
        lines.append(cells + f" {r.power_5pct:.3f} |")
    return "\n".join(lines)


def markdown_pooled(table: pd.DataFrame) -> str:
    """One row per method, over every cell."""
    pop = "population_mean_abs_z" in table
    head = "| method | irrelevant: share p < 0.05 (s.e.) | largest cell | smallest P(at least) |"
    head += " relevant: power |" + (" population: mean abs z, max abs z |" if pop else "")
    lines = [head, "|---|---:|---:|---:|---:|" + ("---:|" if pop else "")]
    for r in table.itertuples():
        cells = f"| `{r.method}` | {r.reject_5pct:.3f} ({r.se:.3f}) | {r.max_cell_reject:.3f} | "
        cells += f"{r.min_cell_binom_p:.3f} | {r.power_5pct:.3f} |"
        if pop:
            m = r.population_mean_abs_z
            cells += " - |" if np.isnan(m) else f" {m:.2f}, {r.population_max_abs_z:.2f} |"
        lines.append(cells)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=40, help="repetitions per booster and task")
    p.add_argument("--population", type=int, default=200_000, help="fresh rows (0: none)")
    p.add_argument("--jobs", type=int, default=1, help="processes (one Numba thread each)")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    p.add_argument("--draws", type=int, default=1, help="validation sets scored per model")
    p.add_argument("--boosters", default=",".join(BOOSTERS), help="comma-separated boosters")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    methods = tuple(args.methods.split(","))
    boosters = tuple(args.boosters.split(","))
    if args.reps < 2:
        p.error("--reps must be at least 2")
    start = time.perf_counter()
    rows, pop = run(args.reps, args.population, args.jobs, methods, args.draws, boosters)
    summary = summarize(rows, pop)
    elapsed = time.perf_counter() - start
    table = markdown(summary)
    overall = pooled(summary)
    table_pooled = markdown_pooled(overall)
    doc = {
        "benchmark": "null_calibration",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/bench_null_calibration.py"
        + (f" --reps {args.reps}" if args.reps != 40 else "")
        + (f" --population {args.population}" if args.population != 200_000 else "")
        + (f" --jobs {args.jobs}" if args.jobs != 1 else "")
        + (f" --methods {args.methods}" if methods != METHODS else "")
        + (f" --draws {args.draws}" if args.draws != 1 else "")
        + (f" --boosters {args.boosters}" if boosters != BOOSTERS else "")
        + (f" --output {args.output}" if args.output != RESULTS else ""),
        "elapsed_s": elapsed,
        "cpu_count": os.cpu_count(),
        "versions": {
            "treeinner": treeinner.__version__,
            "xgboost": xgb.__version__,
            "lightgbm": lgb.__version__,
            "catboost": cb.__version__,
            "scikit-learn": sklearn.__version__,
            "python": sys.version.split()[0],
        },
        "reps": args.reps,
        "draws": args.draws,
        "cells": f"depth 4, 31 leaves x {', '.join(boosters)} x binary, multiclass, regression",
        "summary": summary.to_dict(orient="records"),
        "pooled": overall.to_dict(orient="records"),
        "markdown": table,
        "markdown_pooled": table_pooled,
        "rows": rows,
        "population": pop,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(table)
    print()
    print(table_pooled)
    print(f"\n{len(rows)} rows, {elapsed:.0f} s; written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
