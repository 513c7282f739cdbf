"""Benchmark treeinner's SHAP interaction values against XGBoost's ``pred_interactions`` and
the shap package's ``shap_interaction_values``.

Two models on the same data (``make_data`` of ``bench_predict.py``: ``--train-rows`` training
rows x ``--features`` features), ``--trees`` rounds of depth ``--depth``:

* an XGBoost regressor (cached by ``bench_predict.train_or_load``):
  ``treeinner.tree_shap_interactions(ens, X)`` against
  ``booster.predict(DMatrix(X), pred_interactions=True)`` (the DMatrix built outside the timed
  call) with the same number of threads, and against
  ``shap.TreeExplainer(booster).shap_interaction_values(X)`` (which hands XGBoost models to
  XGBoost's own ``pred_interactions``, whose thread count is the booster's);
  treeinner's own ``tree_shap`` on the same rows is timed too (``over_tree_shap``: what the
  pairs cost on top of TreeSHAP);
* a LightGBM regressor (``max_depth=--depth``, ``num_leaves=2**depth``), for which shap runs
  its own C++ algorithm (one thread, whatever the thread count: reported as it is, since that
  is what its users get): ``tree_shap_interactions`` against
  ``shap.TreeExplainer(model).shap_interaction_values(X)``.

The explained rows are a fresh draw of ``--rows`` rows. Each time is the best of ``--repeats``
runs after a warm-up call (Numba compilation excluded; shap's C++ gets ``--shap-repeats``).
Inline checks: treeinner's values equal XGBoost's to 1e-5 of the largest value (float32) and
shap's LightGBM values to 1e-9 (both float64).

Run from the repository root::

    python benchmarks/bench_interactions.py                 # 2,000 x 20, 200 trees, depth 6
    python benchmarks/bench_interactions.py --trees 50      # quick run

Results are printed and written to ``benchmarks/results/interactions.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (data, model cache, timing helpers)

import treeinner  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "interactions.json"


def _max_rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


def bench_xgboost(args: argparse.Namespace, X: np.ndarray) -> dict[str, Any]:
    n = args.threads
    train = argparse.Namespace(
        rows=args.train_rows, features=args.features, trees=args.trees, depth=args.depth,
        nan_fraction=args.nan_fraction, seed=args.seed, threads=n, retrain=args.retrain,
    )  # fmt: skip
    booster, cached, train_s = bp.train_or_load(train)
    booster.set_param({"nthread": n})
    ens = treeinner.from_model(booster, learning_rate=bp.ETA)
    dm = xgb.DMatrix(X, nthread=n)
    treeinner.tree_shap_interactions(ens, X[:10])  # compile or load the Numba cache
    treeinner.tree_shap(ens, X[:10])
    fns = {
        "treeinner": lambda: treeinner.tree_shap_interactions(ens, X).values,
        "xgboost_pred_interactions": lambda: booster.predict(dm, pred_interactions=True),
    }
    best, out = bp.best_of(fns, args.repeats)
    # treeinner's own TreeSHAP on the same rows: what the pairs cost on top of it
    sbest, _ = bp.best_of({"tree_shap": lambda: treeinner.tree_shap(ens, X).values}, 3)
    row: dict[str, Any] = {
        "model": "xgboost",
        "n_nodes": ens.n_nodes,
        "model_cached": cached,
        "train_s": train_s,
        **{f"{k}_s": v for k, v in best.items()},
        "ratio_vs_xgboost": best["treeinner"] / best["xgboost_pred_interactions"],
        "tree_shap_s": sbest["tree_shap"],
        "over_tree_shap": best["treeinner"] / sbest["tree_shap"],
        "max_rel_diff_xgboost": _max_rel(
            out["treeinner"], out["xgboost_pred_interactions"][:, :-1, :-1]
        ),
    }
    if not args.no_shap:
        import shap

        explainer = shap.TreeExplainer(booster)
        sbest, sout = bp.best_of(
            {"shap": lambda: explainer.shap_interaction_values(X)}, args.repeats
        )
        row["shap_s"] = sbest["shap"]
        row["ratio_vs_shap"] = best["treeinner"] / sbest["shap"]
        row["max_rel_diff_shap"] = _max_rel(out["treeinner"], sout["shap"])
    return row


def bench_lightgbm(args: argparse.Namespace, X: np.ndarray) -> dict[str, Any]:
    import lightgbm as lgb
    import shap

    Xt, yt = bp.make_data(args.train_rows, args.features, args.nan_fraction, args.seed)
    t0 = time.perf_counter()
    model = lgb.LGBMRegressor(
        n_estimators=args.trees, max_depth=args.depth, num_leaves=2**args.depth,
        learning_rate=bp.ETA, min_child_samples=5, verbose=-1, n_jobs=args.threads,
        random_state=args.seed,
    ).fit(Xt, yt)  # fmt: skip
    train_s = time.perf_counter() - t0
    ens = treeinner.from_model(model)
    treeinner.tree_shap_interactions(ens, X[:10])
    best, out = bp.best_of(
        {"treeinner": lambda: treeinner.tree_shap_interactions(ens, X).values}, args.repeats
    )
    explainer = shap.TreeExplainer(model)
    sbest, sout = bp.best_of(
        {"shap": lambda: explainer.shap_interaction_values(X)}, args.shap_repeats
    )
    return {
        "model": "lightgbm",
        "n_nodes": ens.n_nodes,
        "train_s": train_s,
        "treeinner_s": best["treeinner"],
        "shap_s": sbest["shap"],
        "shap_version": shap.__version__,
        "ratio_vs_shap": best["treeinner"] / sbest["shap"],
        "max_rel_diff_shap": _max_rel(out["treeinner"], sout["shap"]),
    }


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.rows} rows x {args.features} features, {args.trees} trees of depth "
        f"{args.depth}, {args.threads} threads (best of {args.repeats})"
    )
    print(f"{'model':>9} {'treeinner':>10} {'xgboost':>9} {'ratio':>6} {'shap':>9} {'ratio':>6} "
          f"{'max rel diff':>12}")  # fmt: skip
    for r in rows:
        xs = r.get("xgboost_pred_interactions_s")
        x_s = f"{xs:9.3f}" if xs is not None else f"{'-':>9}"
        x_r = f"{r['ratio_vs_xgboost']:6.3f}" if xs is not None else f"{'-':>6}"
        s_s = f"{r['shap_s']:9.3f}" if "shap_s" in r else f"{'-':>9}"
        s_r = f"{r['ratio_vs_shap']:6.3f}" if "shap_s" in r else f"{'-':>6}"
        diff = r.get("max_rel_diff_xgboost", r.get("max_rel_diff_shap"))
        print(f"{r['model']:>9} {r['treeinner_s']:10.3f} {x_s} {x_r} {s_s} {s_r} {diff:12.1e}")
    print("ratio = treeinner / other (lower is better); times in seconds.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000, help="rows explained (default 2000)")
    p.add_argument("--train-rows", type=int, default=20_000, help="training rows (20000)")
    p.add_argument("--features", type=int, default=20, help="features (default 20)")
    p.add_argument("--trees", type=int, default=200, help="boosting rounds (default 200)")
    p.add_argument("--depth", type=int, default=6, help="max_depth (default 6)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (all)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs, best kept (default 3)")
    p.add_argument("--shap-repeats", type=int, default=1, help="timed shap C++ runs (1)")
    p.add_argument("--no-shap", action="store_true", help="skip the shap package")
    p.add_argument("--no-lightgbm", action="store_true", help="skip the LightGBM model")
    p.add_argument("--nan-fraction", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retrain", action="store_true", help="ignore the cached models")
    p.add_argument("--output", type=Path, default=RESULTS, help=f"JSON output ({RESULTS})")
    args = p.parse_args(argv)
    if not 1 <= args.threads <= numba.config.NUMBA_NUM_THREADS:
        p.error(f"--threads must be in [1, {numba.config.NUMBA_NUM_THREADS}]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numba.set_num_threads(args.threads)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    X, _ = bp.make_data(args.rows, args.features, args.nan_fraction, args.seed + 1)
    rows = [bench_xgboost(args, X)]
    if not args.no_shap and not args.no_lightgbm:
        rows.append(bench_lightgbm(args, X))
    print_table(rows, args)
    result = {
        "benchmark": "interactions",
        "git": bp.git_state(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "loadavg_start": load_start,
        "wall_s": time.perf_counter() - t0,
        "machine": bp.machine_info(args.threads),
        "results": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.output}")
    bad = [r for r in rows if r.get("max_rel_diff_xgboost", 0.0) > 1e-5]
    bad += [r for r in rows if r["model"] == "lightgbm" and r["max_rel_diff_shap"] > 1e-9]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
