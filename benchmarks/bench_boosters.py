"""Benchmark treeinner on LightGBM and CatBoost models against the boosters' own prediction.

The same data as ``bench_predict.py`` (``make_data``: 100 000 rows x 50 features by default)
trains a LightGBM and a CatBoost regressor (500 trees of depth 6, learning rate 0.1; LightGBM
with ``max_depth`` 6 and 64 leaves, CatBoost's default oblivious trees), cached in the model
cache of ``bench_predict.py``. On a fresh draw of rows, with the same number of threads on both
sides, it times

* ``ens.predict_margin(X)`` against ``booster.predict(X, raw_score=True)`` (LightGBM) and
  ``model.predict(X, prediction_type="RawFormulaVal", thread_count=threads)`` (CatBoost);
* ``treeinner.tree_inner(ens, X, y, attribution="predecomp")`` against the same booster call;
* for CatBoost, ``treeinner.tree_shap(ens, X)`` against
  ``model.get_feature_importance(Pool(X), type="ShapValues", thread_count=threads)`` on the
  first ``--shap-rows`` rows (Pool built outside the timed call).

Each time is the best of ``--repeats`` runs after a warm-up call (Numba compilation
excluded); the calls of one comparison alternate within each repeat. Inline checks: the margins
equal the booster's (LightGBM to 1e-12 relative, CatBoost to 1e-6 relative, its float32
sums), CatBoost's TreeSHAP values equal its ``ShapValues`` (to 1e-9 of the largest), and
TreeInner on the training rows equals the boosters' total gain where they report it (LightGBM
``feature_importance("gain")``, normalized, to 1e-6).

Run from the repository root::

    python benchmarks/bench_boosters.py                          # full size
    python benchmarks/bench_boosters.py --rows 10000 --trees 50   # quick run

Results are printed as a table and written to ``benchmarks/results/boosters.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (data, model cache, timing helpers)

import treeinner  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "boosters.json"
ETA = 0.1


def _cache_path(booster: str, args: argparse.Namespace, version: str, ext: str) -> Path:
    key = {
        "booster": booster,
        "rows": args.rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "seed": args.seed,
        "eta": ETA,
        "version": version,
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = f"{booster}_r{args.rows}_f{args.features}_t{args.trees}_d{args.depth}_{digest}.{ext}"
    return bp.CACHE_DIR / name


def _lightgbm(args: argparse.Namespace, X: np.ndarray, y: np.ndarray):
    import lightgbm as lgb

    path = _cache_path("lightgbm", args, lgb.__version__, "txt")
    if path.exists() and not args.retrain:
        return lgb.Booster(model_file=str(path)), True
    params = {
        "objective": "regression",
        "learning_rate": ETA,
        "max_depth": args.depth,
        "num_leaves": 2**args.depth,
        "num_threads": args.threads,
        "seed": args.seed,
        "verbose": -1,
    }
    booster = lgb.train(params, lgb.Dataset(X, y), args.trees)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    booster.save_model(str(tmp))
    os.replace(tmp, path)
    return booster, False


def _catboost(args: argparse.Namespace, X: np.ndarray, y: np.ndarray):
    import catboost as cb

    path = _cache_path("catboost", args, cb.__version__, "cbm")
    model = cb.CatBoostRegressor()
    if path.exists() and not args.retrain:
        model.load_model(str(path))
        return model, True
    model = cb.CatBoostRegressor(
        iterations=args.trees,
        depth=args.depth,
        learning_rate=ETA,
        loss_function="RMSE",
        thread_count=args.threads,
        random_seed=args.seed,
        verbose=False,
        allow_writing_files=False,
    )
    model.fit(X, y)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    model.save_model(str(tmp))
    os.replace(tmp, path)
    return model, False


def bench_booster(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    X, y = bp.make_data(args.rows, args.features, 0.0, args.seed)
    rows = args.predict_rows or args.rows
    Xp, yp = bp.make_data(rows, args.features, 0.0, args.seed + 1)
    if name == "lightgbm":
        model, cached = _lightgbm(args, X, y)

        def own():
            return model.predict(Xp, raw_score=True, num_threads=args.threads)

        rtol = 1e-12
    else:
        model, cached = _catboost(args, X, y)

        def own():
            return model.predict(Xp, prediction_type="RawFormulaVal", thread_count=args.threads)

        rtol = 1e-6
    ens = treeinner.from_model(model)
    # warm-up (compilation) and checks
    margin = ens.predict_margin(Xp)
    ref = np.asarray(own(), dtype=np.float64)
    err = float(np.max(np.abs(margin - ref) / np.maximum(1.0, np.abs(ref))))
    if err > rtol:
        raise SystemExit(f"{name}: margins differ from the booster's by {err:.2e} (> {rtol})")
    treeinner.tree_inner(ens, Xp[:1000], yp[:1000])
    checks = {"margin_max_rel_err": err, "model_cached": cached}
    if name == "lightgbm":
        ti = treeinner.tree_inner(ens, X, y).to_numpy()
        gain = model.feature_importance("gain")
        gap = float(np.max(np.abs(ti / np.abs(ti).sum() - gain / np.abs(gain).sum())))
        checks["total_gain_identity_max_abs"] = gap
        if gap > 1e-6:
            raise SystemExit(f"lightgbm: TreeInner on the training rows is off by {gap:.2e}")
    ops = [
        ("predict_margin", lambda: ens.predict_margin(Xp), own),
        ("tree_inner", lambda: treeinner.tree_inner(ens, Xp, yp), own),
    ]
    if name == "catboost" and args.shap_rows:
        import catboost as cb

        Xs = Xp[: args.shap_rows]
        pool = cb.Pool(Xs)

        def own_shap():
            return model.get_feature_importance(pool, type="ShapValues", thread_count=args.threads)

        ours = treeinner.tree_shap(ens, Xs).values
        theirs = np.asarray(own_shap())[:, :-1]
        gap = float(np.max(np.abs(ours - theirs)) / max(1.0, np.max(np.abs(theirs))))
        checks["shap_max_rel_err"] = gap
        if gap > 1e-9:
            raise SystemExit(f"catboost: TreeSHAP differs from ShapValues by {gap:.2e}")
        ops.append(("tree_shap", lambda: treeinner.tree_shap(ens, Xs), own_shap))
    out = []
    for op, fn, theirs_fn in ops:
        best, _ = bp.best_of({"treeinner": fn, "booster": theirs_fn}, args.repeats)
        out.append(
            {
                "booster": name,
                "operation": op,
                "treeinner_s": best["treeinner"],
                "booster_s": best["booster"],
                "ratio": best["treeinner"] / best["booster"],
                **checks,
            }
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="training rows (default 100000)")
    p.add_argument("--predict-rows", type=int, default=None, help="rows timed (default --rows)")
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--trees", type=int, default=500)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--shap-rows",
        type=int,
        default=10_000,
        help="rows of the CatBoost TreeSHAP comparison (0: skip it; default 10000)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--boosters", default="lightgbm,catboost")
    p.add_argument("--retrain", action="store_true", help="ignore the cached models")
    p.add_argument("--output", type=Path, default=RESULTS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numba.set_num_threads(args.threads)
    t0 = time.time()
    rows = []
    for name in args.boosters.split(","):
        rows += bench_booster(name, args)
    machine = bp.machine_info(args.threads)
    for lib in ("lightgbm", "catboost"):
        try:
            machine[lib] = __import__(lib).__version__
        except ImportError:
            machine[lib] = None
    print(
        f"\ntreeinner on LightGBM / CatBoost: {args.predict_rows or args.rows} rows x "
        f"{args.features} features, {args.trees} trees of depth {args.depth}, "
        f"{args.threads} threads, best of {args.repeats}"
    )
    print(f"machine: {machine['cpu_model']}, load average at end {machine['loadavg_end']}")
    header = (
        f"{'booster':<9} {'operation':<15} {'treeinner [s]':>14} {'booster [s]':>12} {'ratio':>7}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        print(
            f"{r['booster']:<9} {r['operation']:<15} {r['treeinner_s']:>14.4f} "
            f"{r['booster_s']:>12.4f} {r['ratio']:>7.2f}"
        )
    print(
        "\nratio = treeinner / the booster's own call on the same rows and threads (raw "
        "prediction; for tree_shap CatBoost's ShapValues; lower is better); margins and SHAP "
        "values checked against the booster's."
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine,
        "git": bp.git_state(),
        "elapsed_s": time.time() - t0,
        "results": rows,
    }
    args.output.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"written {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
