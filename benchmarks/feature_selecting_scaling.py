"""Feature-selecting boosting against the number of features d (issue 22, part (b)).

Han et al. (2020), Section 5.1, on data that ship offline. For every data set, d of
``--d-grid`` and repetition (a new random split and new probes each time):

* ``digits`` (Gisette-like): Gisette is handwritten 4 vs 9 with "probes", distractor features
  drawn to have the real features' marginal distributions. Here the real images are
  scikit-learn's 1,797 8x8 digits; to have a few thousand rows each image is also shifted by
  one pixel up, down, left and right (the pixels shifted in are 0), giving 8,985 rows, and the
  target is "the digit is odd" (a 10-class problem folded into two classes, so all rows are
  used). The real features are the pixels that are not constant (all 64 once shifted); the other
  ``d - r`` features are probes: copies of randomly chosen real columns, each permuted over the
  rows (same marginal distribution, independent of everything). Rows are split by source image
  (an image and its shifts are in the same part): 40% training, 20% validation, 40% test.
* ``synthetic`` (the paper's Section 4.3 design, regression): ``y = 2 x1 - 3 * 2**x2 +
  log2(1 + x3) + N(0, 1)``, all d features i.i.d. U[0, 1]; 40/20/40 split.

Methods (all with the same tree parameters, ``--threads`` threads each):

* ``booster``: ``treeinner.booster`` without penalty (no tuning);
* ``gbfs``: ``feature_penalty = c * R0, penalty_scaling="none"`` with R0 the Newton residual sum
  of squares of the first tree's root (``sum g^2/h - G^2/(H + lambda)`` at the base margin):
  GBFS's mu is in gain units, so its grid is the A-GBM grid in the first root's units (A-GBM
  rescales by every tree's own root; GBFS keeps the first one);
* ``agbm``: ``feature_penalty = c, penalty_scaling="root"``;
* ``gtgbm``: as ``agbm`` with ``split_search="group_test", n_select=s, delta=0.1``;
* ``{xgboost,lightgbm}_topk_{gain,treeinner}``: fit on all features, rank them by total gain
  (the booster's own importance) or by ``treeinner.tree_inner`` on the validation split, keep
  the top k and refit; k = the largest number of features of the three penalised methods in
  that repetition (the paper's GBDT-topK).

Tuning as the paper does: c over ``--mu-grid`` is chosen by the validation score (log loss,
or squared error), whatever the number of features; every fit (penalised ones, XGBoost,
LightGBM, their refits) stops early on the validation split (``--early-stopping`` rounds).
Reported per (data set, d, method): test AUC and log loss (or RMSE), number of features used,
the chosen fit's time, the whole tuning time (all grid fits; for top-k: fit all + rank + refit)
as mean and standard error over repetitions. Compilation is done before any timed fit.

Run from the repository root::

    python benchmarks/feature_selecting_scaling.py            # ~25 min (one thread per fit)
    python benchmarks/feature_selecting_scaling.py --quick    # ~1 min; not in docs/
    python benchmarks/feature_selecting_scaling.py --summarize-only  # tables, figure from JSON

Writes ``benchmarks/results/feature_selecting_scaling.json`` (``..._quick.json`` with
``--quick``) and ``docs/img/feature_selecting_scaling.png``. Also run by
``benchmarks/bench_feature_selecting.py --part scaling`` through ``add_arguments`` / ``run``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from _common import package_version  # benchmarks/ is on sys.path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "docs" / "img" / "feature_selecting_scaling.png"

D_GRID = (100, 500, 1000, 2000, 5000)
QUICK_D_GRID = (100, 400)
MU_GRID = (0.0005, 0.002, 0.01, 0.05)
QUICK_MU_GRID = (0.01, 0.05)
REPS = 3
QUICK_REPS = 1
N_SELECT = 3
DELTA = 0.1
N_ESTIMATORS = 100
QUICK_N_ESTIMATORS = 30
LEARNING_RATE = 0.1
DEPTH = 4
MIN_LEAF = 20
LAMBDA = 1.0
MAX_BINS = 256
EARLY_STOPPING = 10
SYNTHETIC_N = 3000
FRACTIONS = (0.4, 0.2, 0.4)  # training, validation, test

PENALISED = ("gbfs", "agbm", "gtgbm")
TOPK = tuple(
    f"{lib}_topk_{rank}" for lib in ("xgboost", "lightgbm") for rank in ("gain", "treeinner")
)
METHODS = ("booster", *PENALISED, *TOPK)
LABELS = {
    "booster": "booster, no penalty",
    "gbfs": "GBFS",
    "agbm": "A-GBM",
    "gtgbm": "GT-GBM",
    "xgboost_topk_gain": "XGBoost top-k (gain)",
    "xgboost_topk_treeinner": "XGBoost top-k (TreeInner)",
    "lightgbm_topk_gain": "LightGBM top-k (gain)",
    "lightgbm_topk_treeinner": "LightGBM top-k (TreeInner)",
}


# ---------------------------------------------------------------------- data
def _digit_images() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The digits and their four one-pixel shifts: pixels (8,985 x 64), odd-digit target,
    source image of each row."""
    from sklearn.datasets import load_digits

    X0, y0 = load_digits(return_X_y=True)
    imgs = X0.reshape(-1, 8, 8)
    parts = [imgs]
    for axis, step in ((1, 1), (1, -1), (2, 1), (2, -1)):
        s = np.roll(imgs, step, axis=axis)
        edge = 0 if step == 1 else -1
        if axis == 1:
            s[:, edge, :] = 0
        else:
            s[:, :, edge] = 0
        parts.append(s)
    X = np.concatenate(parts).reshape(-1, 64).astype(np.float64)
    y = np.tile((y0 % 2).astype(np.float64), len(parts))
    source = np.tile(np.arange(len(y0)), len(parts))
    return X, y, source


def _split(groups: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Training, validation and test rows; rows of one group stay together."""
    ids = rng.permutation(np.unique(groups))
    a = int(round(FRACTIONS[0] * len(ids)))
    b = a + int(round(FRACTIONS[1] * len(ids)))
    out = []
    for part in (ids[:a], ids[a:b], ids[b:]):
        out.append(np.flatnonzero(np.isin(groups, part)))
    return tuple(out)


def make_data(name: str, d: int, rep_seed: int) -> dict[str, Any]:
    """One repetition's matrix, target, split and the indices of the real features."""
    rng = np.random.default_rng(rep_seed)
    if name == "digits":
        pixels, y, source = _digit_images()
        pixels = pixels[:, pixels.std(axis=0) > 0]
        r = pixels.shape[1]
        if d < r:
            raise ValueError(f"d = {d} is below the {r} real pixel features")
        X = np.empty((pixels.shape[0], d))
        X[:, :r] = pixels
        for k, j in enumerate(rng.integers(0, r, size=d - r)):
            X[:, r + k] = rng.permutation(pixels[:, j])
        order = rng.permutation(d)  # real features not all first (GT's subsets are random anyway)
        X = np.ascontiguousarray(X[:, order])
        real = np.flatnonzero(order < r)
        tr, va, te = _split(source, rng)
        return {"X": X, "y": y, "split": (tr, va, te), "real": real, "task": "binary"}
    if name == "synthetic":
        n = SYNTHETIC_N
        X = rng.uniform(size=(n, d))
        y = 2 * X[:, 0] - 3 * 2 ** X[:, 1] + np.log2(1 + X[:, 2]) + rng.normal(size=n)
        tr, va, te = _split(np.arange(n), rng)
        return {"X": X, "y": y, "split": (tr, va, te), "real": np.arange(3), "task": "regression"}
    raise ValueError(f"unknown data set {name!r}")


# ---------------------------------------------------------------------- scoring
def _scores(task: str, y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Test scores; ``pred`` is P(y=1) (binary) or the prediction (regression)."""
    from sklearn.metrics import log_loss, roc_auc_score

    if task == "binary":
        p = np.clip(pred, 1e-15, 1 - 1e-15)
        return {"auc": float(roc_auc_score(y, p)), "log_loss": float(log_loss(y, p))}
    return {"rmse": float(np.sqrt(np.mean((y - pred) ** 2)))}


def _loss(task: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The validation loss that picks mu (lower is better)."""
    s = _scores(task, y, pred)
    return s["log_loss"] if task == "binary" else s["rmse"]


def _predict(model: Any, task: str, X: np.ndarray) -> np.ndarray:
    return model.predict_proba(X)[:, 1] if task == "binary" else model.predict(X)


def _root_scale(task: str, y: np.ndarray) -> float:
    """The Newton residual sum of squares of the first tree's root at the base margin
    (``sum g^2/h - G^2/(H + lambda)``): A-GBM's scale of the first tree, GBFS's unit of mu."""
    if task == "binary":
        p = float(np.mean(y))
        g, h = p - y, np.full_like(y, p * (1 - p))
    else:
        g, h = np.mean(y) - y, np.ones_like(y)
    return float(np.sum(g * g / h) - np.sum(g) ** 2 / (np.sum(h) + LAMBDA))


# ---------------------------------------------------------------------- models
def _native(task: str, threads: int, n_estimators: int, seed: int, **kw: Any) -> Any:
    from treeinner.booster import GBMClassifier, GBMRegressor

    cls = GBMClassifier if task == "binary" else GBMRegressor
    return cls(
        n_estimators=n_estimators,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        min_samples_leaf=MIN_LEAF,
        reg_lambda=LAMBDA,
        max_bins=MAX_BINS,
        early_stopping_rounds=EARLY_STOPPING,
        random_state=seed,
        n_jobs=threads,
        **kw,
    )


def _xgboost(task: str, threads: int, n_estimators: int, seed: int) -> Any:
    import xgboost as xgb

    cls = xgb.XGBClassifier if task == "binary" else xgb.XGBRegressor
    return cls(
        n_estimators=n_estimators,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        min_child_weight=1.0,
        reg_lambda=LAMBDA,
        max_bin=MAX_BINS,
        tree_method="hist",
        early_stopping_rounds=EARLY_STOPPING,
        n_jobs=threads,
        random_state=seed,
    )


def _lightgbm(task: str, threads: int, n_estimators: int, seed: int) -> Any:
    import lightgbm as lgb

    cls = lgb.LGBMClassifier if task == "binary" else lgb.LGBMRegressor
    return cls(
        n_estimators=n_estimators,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        num_leaves=2**DEPTH,
        min_child_samples=MIN_LEAF,
        reg_lambda=LAMBDA,
        max_bin=MAX_BINS - 1,
        n_jobs=threads,
        random_state=seed,
        verbose=-1,
    )


def _fit_external(lib: str, model: Any, Xtr, ytr, Xva, yva) -> Any:
    if lib == "xgboost":
        return model.fit(Xtr, ytr, eval_set=[(Xva, yva)], verbose=False)
    import lightgbm as lgb

    return model.fit(
        Xtr,
        ytr,
        eval_set=[(Xva, yva)],
        callbacks=[lgb.early_stopping(EARLY_STOPPING, verbose=False)],
    )


def _gain_importance(lib: str, model: Any, d: int) -> np.ndarray:
    if lib == "xgboost":
        score = model.get_booster().get_score(importance_type="total_gain")
        out = np.zeros(d)
        for name, v in score.items():
            out[int(name[1:])] = v
        return out
    return np.asarray(model.booster_.feature_importance(importance_type="gain"), dtype=float)


def _treeinner_importance(model: Any, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    import treeinner

    s = treeinner.tree_inner(model, X, y)
    if len(s) != X.shape[1]:
        raise RuntimeError(f"tree_inner returned {len(s)} scores for {X.shape[1]} features")
    return np.nan_to_num(np.asarray(s, dtype=float), nan=-np.inf)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """The k best features (ties by index)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return np.sort(order[:k])


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_cell(
    name: str, d: int, rep: int, args: argparse.Namespace, mu_grid, n_estimators: int
) -> dict[str, Any]:
    """Every method on one repetition of one (data set, d)."""
    seed = int(
        np.random.SeedSequence([args.seed, d, rep, sum(map(ord, name))]).generate_state(1)[0]
    )
    data = make_data(name, d, seed)
    X, y, task, real = data["X"], data["y"], data["task"], data["real"]
    tr, va, te = data["split"]
    Xtr, ytr, Xva, yva, Xte, yte = X[tr], y[tr], X[va], y[va], X[te], y[te]
    eval_set = [(Xva, yva)]
    threads = args.threads
    out: dict[str, Any] = {
        "dataset": name,
        "d": d,
        "rep": rep,
        "n_train": len(tr),
        "n_valid": len(va),
        "n_test": len(te),
        "n_real": len(real),
        "methods": {},
    }
    real_set = set(real.tolist())

    def record(method: str, model: Any, fit_s: float, tune_s: float, feats, extra=None) -> None:
        feats = np.asarray(feats, dtype=np.int64)
        row = {
            **_scores(task, yte, _predict(model, task, Xte)),
            "n_features": int(len(feats)),
            "n_real_features": int(sum(int(f) in real_set for f in feats)),
            "fit_s": fit_s,
            "tune_s": tune_s,
        }
        row.update(extra or {})
        out["methods"][method] = row

    # booster without penalty
    m, t = _timed(
        lambda: _native(task, threads, n_estimators, seed).fit(Xtr, ytr, eval_set=eval_set)
    )
    record("booster", m, t, t, m.selected_features_, {"n_histograms": m.n_histograms_})

    # penalised methods, tuned over the grid by validation loss
    r0 = _root_scale(task, ytr)
    out["root_scale"] = r0
    specs = {
        "gbfs": lambda c: {"feature_penalty": c * r0, "penalty_scaling": "none"},
        "agbm": lambda c: {"feature_penalty": c, "penalty_scaling": "root"},
        "gtgbm": lambda c: {
            "feature_penalty": c,
            "penalty_scaling": "root",
            "split_search": "group_test",
            "n_select": args.n_select,
            "delta": DELTA,
        },
    }
    for method in PENALISED:
        if method in args.skip:
            continue
        grid = []
        best = None
        for c in mu_grid:
            kw = specs[method](c)
            m, t = _timed(
                lambda kw=kw: _native(task, threads, n_estimators, seed, **kw).fit(
                    Xtr, ytr, eval_set=eval_set
                )
            )
            v = _loss(task, yva, _predict(m, task, Xva))
            grid.append(
                {"c": c, "valid_loss": v, "fit_s": t, "n_features": int(len(m.selected_features_))}
            )
            if best is None or v < best[0]:
                best = (v, c, m, t)
        _, c, m, t = best
        record(
            method,
            m,
            t,
            float(sum(g["fit_s"] for g in grid)),
            m.selected_features_,
            {"c": c, "mu": specs[method](c)["feature_penalty"], "grid": grid,
             "n_histograms": m.n_histograms_, "n_trees": int(m.best_iteration_) + 1},
        )  # fmt: skip

    # top-k baselines
    k = max([out["methods"][p]["n_features"] for p in PENALISED if p in out["methods"]] or [d])
    k = max(k, 1)
    out["k"] = k
    for lib, make in (("xgboost", _xgboost), ("lightgbm", _lightgbm)):
        if lib in args.skip:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full, t_full = _timed(
                lambda make=make, lib=lib: _fit_external(
                    lib, make(task, threads, n_estimators, seed), Xtr, ytr, Xva, yva
                )
            )
            for rank in ("gain", "treeinner"):
                if rank == "gain":
                    scores, t_rank = _timed(
                        lambda lib=lib, full=full: _gain_importance(lib, full, d)
                    )
                else:
                    scores, t_rank = _timed(lambda full=full: _treeinner_importance(full, Xva, yva))
                keep = _top(scores, k)
                refit, t_refit = _timed(
                    lambda make=make, lib=lib, keep=keep: _fit_external(
                        lib, make(task, threads, n_estimators, seed), Xtr[:, keep], ytr,
                        Xva[:, keep], yva,
                    )
                )  # fmt: skip
                row = {
                    **_scores(task, yte, _predict(refit, task, Xte[:, keep])),
                    "n_features": int(k),
                    "n_real_features": int(sum(int(f) in real_set for f in keep)),
                    "fit_s": t_refit,
                    "tune_s": t_full + t_rank + t_refit,
                    "fit_all_s": t_full,
                    "rank_s": t_rank,
                    "fit_all_scores": _scores(task, yte, _predict(full, task, Xte)),
                }
                out["methods"][f"{lib}_topk_{rank}"] = row
    return out


# ---------------------------------------------------------------------- summary
def _mean_se(v: list[float]) -> tuple[float, float]:
    a = np.asarray(v, dtype=float)
    if len(a) == 0:
        return float("nan"), float("nan")
    se = float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
    return float(a.mean()), se


def summarize(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    keys = sorted({(c["dataset"], c["d"]) for c in cells}, key=lambda t: (t[0], t[1]))
    for name, d in keys:
        group = [c for c in cells if c["dataset"] == name and c["d"] == d]
        for method in METHODS:
            got = [c["methods"][method] for c in group if method in c["methods"]]
            if not got:
                continue
            row: dict[str, Any] = {"dataset": name, "d": d, "method": method, "reps": len(got)}
            for key in (
                "auc",
                "log_loss",
                "rmse",
                "n_features",
                "n_real_features",
                "fit_s",
                "tune_s",
            ):
                if key in got[0]:
                    row[key], row[key + "_se"] = _mean_se([g[key] for g in got])
            if "fit_all_s" in got[0]:
                row["fit_all_s"], row["fit_all_s_se"] = _mean_se([g["fit_all_s"] for g in got])
            if "n_histograms" in got[0]:  # histograms built from rows: machine-independent cost
                for part in ("feature_histograms", "pseudo_feature_histograms"):
                    row[part], row[part + "_se"] = _mean_se([g["n_histograms"][part] for g in got])
            rows.append(row)
    return rows


def _fmt(m: float, se: float, digits: int) -> str:
    if np.isnan(se):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {se:.{digits}f}"


def markdown(summary: list[dict[str, Any]]) -> str:
    out = []
    for name in sorted({r["dataset"] for r in summary}):
        rows = [r for r in summary if r["dataset"] == name]
        binary = "auc" in rows[0]
        score_cols = ("AUC", "log loss") if binary else ("RMSE",)
        out.append(f"**{name}**\n")
        out.append(
            "| d | method | " + " | ".join(score_cols) + " | features (real) | fit s | tuning s |"
        )
        out.append("|---:|---|" + "---:|" * (len(score_cols) + 3))
        for r in rows:
            scores = (
                [_fmt(r["auc"], r["auc_se"], 4), _fmt(r["log_loss"], r["log_loss_se"], 4)]
                if binary
                else [_fmt(r["rmse"], r["rmse_se"], 4)]
            )
            out.append(
                f"| {r['d']} | {LABELS[r['method']]} | "
                + " | ".join(scores)
                + f" | {r['n_features']:.1f} ({r['n_real_features']:.1f}) | "
                f"{_fmt(r['fit_s'], r['fit_s_se'], 2)} | {_fmt(r['tune_s'], r['tune_s_se'], 1)} |"
            )
        out.append("")
    return "\n".join(out)


def verdicts(summary: list[dict[str, Any]], cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two claims, per data set: GT-GBM's time against d (log-log slope of the
    chosen fit's time and of the tuning time), and its score against A-GBM's (within 1 s.e.
    of the difference? with as many or fewer features?)."""
    out: dict[str, Any] = {}
    for name in sorted({r["dataset"] for r in summary}):
        rows = {(r["d"], r["method"]): r for r in summary if r["dataset"] == name}
        ds = sorted({r["d"] for r in summary if r["dataset"] == name})
        v: dict[str, Any] = {"slopes": {}, "per_d": []}
        for method in ("booster", *PENALISED):
            pts = [(d, rows[d, method]) for d in ds if (d, method) in rows]
            if len(pts) >= 2:
                x = np.log([d for d, _ in pts])
                v["slopes"][method] = {
                    "fit_s": float(np.polyfit(x, np.log([r["fit_s"] for _, r in pts]), 1)[0]),
                    "tune_s": float(np.polyfit(x, np.log([r["tune_s"] for _, r in pts]), 1)[0]),
                }
        key = "auc" if any("auc" in r for r in rows.values()) else "rmse"
        for d in ds:
            if (d, "gtgbm") not in rows or (d, "agbm") not in rows:
                continue
            g, a = rows[d, "gtgbm"], rows[d, "agbm"]
            diff = g[key] - a[key]
            paired = [
                c["methods"]["gtgbm"][key] - c["methods"]["agbm"][key]
                for c in cells
                if c["dataset"] == name and c["d"] == d and "gtgbm" in c["methods"]
            ]
            pm, pse = _mean_se(paired)
            v["per_d"].append(
                {
                    "d": d,
                    "metric": key,
                    "gtgbm_minus_agbm": diff,
                    "agbm_se": a[key + "_se"],
                    "within_1se_of_agbm": bool(abs(diff) <= a[key + "_se"]),
                    "paired_difference_se": pse,
                    "within_1se_paired": bool(abs(pm) <= pse),
                    "gtgbm_features": g["n_features"],
                    "agbm_features": a["n_features"],
                    "as_many_or_fewer_features": bool(g["n_features"] <= a["n_features"]),
                    "fit_speedup_over_agbm": a["fit_s"] / g["fit_s"],
                    "fit_speedup_over_gbfs": rows[d, "gbfs"]["fit_s"] / g["fit_s"]
                    if (d, "gbfs") in rows
                    else None,
                }
            )
        out[name] = v
    return out


def figure(doc: dict[str, Any], path: Path) -> None:
    """Fit time against d (log-log) and test score against d, per data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = doc["summary"]
    names = sorted({r["dataset"] for r in summary})
    fig, axes = plt.subplots(len(names), 4, figsize=(20, 4.4 * len(names)), squeeze=False)
    styles = {
        "booster": ("k", "o", "-"),
        "gbfs": ("tab:orange", "s", "-"),
        "agbm": ("tab:blue", "^", "-"),
        "gtgbm": ("tab:red", "D", "-"),
        "xgboost_topk_gain": ("tab:green", "v", "--"),
        "xgboost_topk_treeinner": ("tab:green", "P", ":"),
        "lightgbm_topk_gain": ("tab:purple", "v", "--"),
        "lightgbm_topk_treeinner": ("tab:purple", "P", ":"),
    }
    for i, name in enumerate(names):
        rows = [r for r in summary if r["dataset"] == name]
        key = "auc" if "auc" in rows[0] else "rmse"
        for method in METHODS:
            rs = sorted((r for r in rows if r["method"] == method), key=lambda r: r["d"])
            if not rs:
                continue
            c, mk, ls = styles[method]
            d = [r["d"] for r in rs]
            kw = {"color": c, "marker": mk, "linestyle": ls, "label": LABELS[method], "ms": 5}
            if method in ("booster", *PENALISED):
                axes[i, 0].errorbar(
                    d, [r["fit_s"] for r in rs], yerr=[r["fit_s_se"] for r in rs], **kw
                )
                hist = [r["feature_histograms"] + r["pseudo_feature_histograms"] for r in rs]
                axes[i, 3].plot(d, hist, **{k: v for k, v in kw.items()})
            elif method.endswith("_gain") and "fit_all_s" in rs[0]:
                lib = "XGBoost" if method.startswith("xgboost") else "LightGBM"
                axes[i, 0].errorbar(
                    d,
                    [r["fit_all_s"] for r in rs],
                    yerr=[r["fit_all_s_se"] for r in rs],
                    **(kw | {"label": f"{lib}, all features, no penalty", "marker": "x"}),
                )
            axes[i, 1].errorbar(
                d, [r["tune_s"] for r in rs], yerr=[r["tune_s_se"] for r in rs], **kw
            )
            axes[i, 2].errorbar(d, [r[key] for r in rs], yerr=[r[key + "_se"] for r in rs], **kw)
        for ax in axes[i, :2]:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("d (features)")
        axes[i, 0].set_ylabel("seconds")
        axes[i, 0].set_title(f"{name}: one fit's time (chosen mu)")
        axes[i, 0].legend(fontsize=7)
        axes[i, 3].set_xscale("log")
        axes[i, 3].set_yscale("log")
        axes[i, 3].set_xlabel("d (features)")
        axes[i, 3].set_title(f"{name}: histograms built (feature + pseudo-feature)")
        axes[i, 1].set_title(f"{name}: tuning time (all grid fits; top-k: fit+rank+refit)")
        axes[i, 2].set_xscale("log")
        axes[i, 2].set_xlabel("d (features)")
        axes[i, 2].set_title(f"{name}: test {key.upper()} (mean ± s.e.)")
        axes[i, 2].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------- driver
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This part's options (``--quick``, ``--reps``, ``--seed`` come from the caller)."""
    g = parser.add_argument_group("scaling")
    g.add_argument("--datasets", default=None, help="comma-separated: digits,synthetic")
    g.add_argument("--d-grid", default=None, help="comma-separated numbers of features")
    g.add_argument("--mu-grid", default=None, help="comma-separated penalties c")
    g.add_argument(
        "--threads", type=int, default=1, help="threads of every library (default 1, see docs)"
    )
    g.add_argument("--n-select", type=int, default=N_SELECT, help="s of GT-GBM")
    g.add_argument("--n-estimators", type=int, default=None)
    g.add_argument("--skip", default="", help="comma-separated methods or libraries to skip")


def _warm_up(threads: int) -> None:
    """Compile the booster's kernels (both split searches, both losses) before timing."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 40))
    y = X[:, 0] + rng.normal(size=300) * 0.1
    for task, yy in (("regression", y), ("binary", (y > np.median(y)).astype(float))):
        for kw in ({}, {"feature_penalty": 0.01, "penalty_scaling": "root"},
                   {"feature_penalty": 0.01, "penalty_scaling": "root",
                    "split_search": "group_test", "n_select": 3}):  # fmt: skip
            _native(task, threads, 5, 0, **kw).fit(X, yy, eval_set=[(X, yy)])
        for lib, make in (("xgboost", _xgboost), ("lightgbm", _lightgbm)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = _fit_external(lib, make(task, threads, 5, 0), X, yy, X, yy)
            _treeinner_importance(m, X, yy)


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    reps = getattr(args, "reps", None) or (QUICK_REPS if quick else REPS)
    args = argparse.Namespace(**vars(args))  # the caller's namespace is left as it was
    args.seed = getattr(args, "seed", 0)
    args.threads = getattr(args, "threads", 1)
    args.n_select = getattr(args, "n_select", N_SELECT)
    args.skip = set(filter(None, (getattr(args, "skip", "") or "").split(",")))
    names = (getattr(args, "datasets", None) or "digits,synthetic").split(",")
    dg = getattr(args, "d_grid", None)
    d_grid = [int(v) for v in dg.split(",")] if dg else list(QUICK_D_GRID if quick else D_GRID)
    mg = getattr(args, "mu_grid", None)
    mu_grid = [float(v) for v in mg.split(",")] if mg else list(QUICK_MU_GRID if quick else MU_GRID)
    n_est = getattr(args, "n_estimators", None) or (QUICK_N_ESTIMATORS if quick else N_ESTIMATORS)
    load_start = list(os.getloadavg())
    _warm_up(args.threads)
    cells = []
    part_s: dict[str, float] = {}
    for name in names:
        t0 = time.perf_counter()
        for d in d_grid:
            for rep in range(reps):
                t = time.perf_counter()
                cell = run_cell(name, d, rep, args, mu_grid, n_est)
                cell["cell_s"] = time.perf_counter() - t
                cell["loadavg_1min_end"] = os.getloadavg()[0]
                cells.append(cell)
                ms = cell["methods"]
                key = "auc" if "auc" in ms["booster"] else "rmse"
                print(
                    f"{name} d {d:>5} rep {rep}: "
                    + ", ".join(
                        f"{mth} {ms[mth][key]:.4f}/{ms[mth]['n_features']}f/{ms[mth]['fit_s']:.1f}s"
                        for mth in METHODS
                        if mth in ms
                    )
                    + f"  [cell {cell['cell_s']:.0f} s]",
                    flush=True,
                )
        part_s[name] = time.perf_counter() - t0
    summary = summarize(cells)
    table = markdown(summary)
    print(table)
    return {
        "config": {
            "quick": quick,
            "seed": args.seed,
            "reps": reps,
            "datasets": names,
            "d_grid": d_grid,
            "mu_grid": mu_grid,
            "n_select": args.n_select,
            "delta": DELTA,
            "threads": args.threads,
            "n_estimators": n_est,
            "learning_rate": LEARNING_RATE,
            "max_depth": DEPTH,
            "min_samples_leaf": MIN_LEAF,
            "reg_lambda": LAMBDA,
            "max_bins": MAX_BINS,
            "early_stopping_rounds": EARLY_STOPPING,
            "split_fractions": FRACTIONS,
            "synthetic_n": SYNTHETIC_N,
            "selection": "validation log loss (binary) / RMSE (regression); fit times are "
            "wall-clock seconds of fit() only",
            "gbfs_mu": "c * root_scale, root_scale = sum g^2/h - G^2/(H+lambda) at the base "
            "margin on the training rows",
            "xgboost": "hist, max_depth, min_child_weight=1 (no min rows per leaf)",
            "lightgbm": "max_depth, num_leaves=2**depth, min_child_samples=min_samples_leaf",
            "skip": sorted(args.skip),
            "loadavg_start": load_start,
            "loadavg_end": list(os.getloadavg()),
        },
        "part_seconds": part_s,
        "cells": cells,
        "summary": summary,
        "verdicts": verdicts(summary, cells),
        "markdown": table,
        "library_versions": {
            k: package_version(k)
            for k in (
                "treeinner",
                "numpy",
                "numba",
                "xgboost",
                "lightgbm",
                "scikit-learn",
                "matplotlib",
            )
        },  # fmt: skip
    }


def _header(argv: list[str] | None, elapsed: float, threads: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_predict import git_state, machine_info

    machine = machine_info(threads)
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"python benchmarks/{Path(__file__).name}"
        + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "git_state": git_state(),
        "elapsed_s": elapsed,
        "machine": machine,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small grid, one repetition")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--figure-dir", type=Path, default=None)
    p.add_argument("--no-figure", action="store_true")
    p.add_argument(
        "--summarize-only",
        action="store_true",
        help="recompute the summary, verdicts and figure of the existing results file",
    )
    add_arguments(p)
    args = p.parse_args(argv)
    name = "feature_selecting_scaling" + ("_quick" if args.quick else "") + ".json"
    out = args.output_dir / name
    if args.summarize_only:
        doc = json.loads(out.read_text())
        doc["summary"] = summarize(doc["cells"])
        doc["verdicts"] = verdicts(doc["summary"], doc["cells"])
        doc["markdown"] = markdown(doc["summary"])
        print(doc["markdown"])
    else:
        start = time.perf_counter()
        body = run(args)
        doc = (
            {"benchmark": "feature_selecting_scaling"}
            | _header(argv, time.perf_counter() - start, args.threads)
            | body
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=float) + "\n")
    print(f"written {out} ({doc['elapsed_s']:.0f} s)")
    if not args.no_figure and (not args.quick or args.figure_dir is not None):
        path = (args.figure_dir or FIGURE.parent) / FIGURE.name
        figure(doc, path)
        print(f"figure {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
