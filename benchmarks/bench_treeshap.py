"""Benchmark treeinner's TreeSHAP against XGBoost's ``pred_contribs`` and the shap package.

For each depth (default 6 and 8) an XGBoost regressor of ``--trees`` rounds is trained on
``make_data`` of ``bench_predict.py`` (cached in its model cache) and a fresh draw of
``--rows`` rows (default 10 000 x 50 features) is explained, with the same number of threads
for treeinner and XGBoost:

* ``treeinner.tree_shap(ens, X)`` against ``booster.predict(DMatrix(X), pred_contribs=True)``
  (the DMatrix built outside the timed call) and against
  ``shap.TreeExplainer(booster, feature_perturbation="tree_path_dependent").shap_values(X)``
  (the explainer built outside the timed call; shap's C++ TreeSHAP runs on one thread, whatever
  the thread count: reported as it is, since that is what its users get);
* ``treeinner.tree_inner(ens, X, y, attribution="shap")`` (TreeSHAP per tree, weighted by the
  staged negative gradients on the fly) against ``tree_shap``.

Each time is the best of ``--repeats`` runs after a warm-up call (Numba compilation
excluded; shap gets ``--shap-repeats`` runs). Inline checks: treeinner's values equal
XGBoost's and shap's to 1e-5 of the largest value (both work in float32).

Run from the repository root::

    python benchmarks/bench_treeshap.py                               # full size
    python benchmarks/bench_treeshap.py --trees 50 --depths 6 --no-shap   # quick run

Results are printed as a table and written to ``benchmarks/results/treeshap.json``.
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

RESULTS = Path(__file__).resolve().parent / "results" / "treeshap.json"


def _max_rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


def bench_depth(depth: int, args: argparse.Namespace) -> dict[str, Any]:
    n = args.threads
    train = argparse.Namespace(
        rows=args.train_rows, features=args.features, trees=args.trees, depth=depth,
        nan_fraction=args.nan_fraction, seed=args.seed, threads=n, retrain=args.retrain,
    )  # fmt: skip
    booster, cached, train_s = bp.train_or_load(train)
    booster.set_param({"nthread": n})
    ens = treeinner.from_model(booster, learning_rate=bp.ETA)
    X, y = bp.make_data(args.rows, args.features, args.nan_fraction, args.seed + 1)
    dm = xgb.DMatrix(X, nthread=n)
    treeinner.tree_shap(ens, X[:10])  # compile or load the Numba cache
    treeinner.tree_inner(ens, X[:300], y[:300], attribution="shap")
    fns = {
        "tree_shap": lambda: treeinner.tree_shap(ens, X).values,
        "xgboost_pred_contribs": lambda: booster.predict(dm, pred_contribs=True),
        "tree_inner_shap": lambda: treeinner.tree_inner(ens, X, y, attribution="shap"),
    }
    best, out = bp.best_of(fns, args.repeats)
    row: dict[str, Any] = {
        "depth": depth,
        "n_nodes": ens.n_nodes,
        "model_cached": cached,
        "train_s": train_s,
        **{f"{k}_s": v for k, v in best.items()},
        "ratio_vs_xgboost": best["tree_shap"] / best["xgboost_pred_contribs"],
        "tree_inner_over_tree_shap": best["tree_inner_shap"] / best["tree_shap"],
        "max_rel_diff_xgboost": _max_rel(out["tree_shap"], out["xgboost_pred_contribs"][:, :-1]),
    }
    if not args.no_shap:
        import shap

        explainer = shap.TreeExplainer(booster, feature_perturbation="tree_path_dependent")
        sbest, sout = bp.best_of({"shap": lambda: explainer.shap_values(X)}, args.shap_repeats)
        row["shap_s"] = sbest["shap"]
        row["shap_version"] = shap.__version__
        row["ratio_vs_shap"] = best["tree_shap"] / sbest["shap"]
        row["max_rel_diff_shap"] = _max_rel(out["tree_shap"], sout["shap"])
    return row


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.rows} rows x {args.features} features, {args.trees} trees, "
        f"{args.threads} threads (best of {args.repeats})"
    )
    head = (
        f"{'depth':>5} {'tree_shap':>10} {'xgb contribs':>13} {'ratio':>6} {'shap':>9} "
        f"{'ratio':>6} {'tree_inner':>11} {'/tree_shap':>10} {'max rel diff':>12}"
    )
    print(head)
    for r in rows:
        shap_s = f"{r['shap_s']:9.2f}" if "shap_s" in r else f"{'-':>9}"
        shap_r = f"{r['ratio_vs_shap']:6.2f}" if "shap_s" in r else f"{'-':>6}"
        print(
            f"{r['depth']:>5} {r['tree_shap_s']:10.3f} {r['xgboost_pred_contribs_s']:13.3f} "
            f"{r['ratio_vs_xgboost']:6.2f} {shap_s} {shap_r} {r['tree_inner_shap_s']:11.3f} "
            f"{r['tree_inner_over_tree_shap']:10.2f} {r['max_rel_diff_xgboost']:12.1e}"
        )
    print("ratio = treeinner / other (lower is better); times in seconds.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000, help="rows explained (default 10000)")
    p.add_argument("--train-rows", type=int, default=100_000, help="training rows (100000)")
    p.add_argument("--features", type=int, default=50, help="features (default 50)")
    p.add_argument("--trees", type=int, default=500, help="boosting rounds (default 500)")
    p.add_argument("--depths", default="6,8", help="max_depth values (default 6,8)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (all)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs, best kept (default 3)")
    p.add_argument("--shap-repeats", type=int, default=1, help="timed shap runs (default 1)")
    p.add_argument("--no-shap", action="store_true", help="skip the shap package")
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
    rows = [bench_depth(int(d), args) for d in args.depths.split(",")]
    print_table(rows, args)
    result = {
        "benchmark": "treeshap",
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
    bad = [r for r in rows if r["max_rel_diff_xgboost"] > 1e-5]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
