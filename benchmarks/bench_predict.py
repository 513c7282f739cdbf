"""Benchmark treeinner's routing kernels against XGBoost's own prediction.

Trains (or loads from a cache) an XGBoost regressor, converts it with ``treeinner.from_model``
and times, with the same number of threads on both sides:

* ``ens.predict_margin(X)`` against ``booster.inplace_predict(X, predict_type="margin")``;
* ``ens.leaf_index(X)`` against ``booster.predict(DMatrix(X), pred_leaf=True)`` (the DMatrix is
  built inside the timed call, as a user would; the time with a prebuilt DMatrix is reported
  too).

Each time is the best of ``--repeats`` runs after a warm-up call (the first treeinner call
compiles the Numba kernels or loads them from Numba's cache). Margins must be bit-identical to
XGBoost's float32 output; leaf indices must be identical as well.

Run from the repository root::

    python benchmarks/bench_predict.py                     # full size: 100k x 50, 500 trees
    python benchmarks/bench_predict.py --rows 10000 --trees 50   # quick run

Results are printed as a table and written to ``benchmarks/results/predict.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import xgboost as xgb

import treeinner

RESULTS = Path(__file__).resolve().parent / "results" / "predict.json"
ETA = 0.1
CACHE_DIR = Path(os.environ.get("TREEINNER_BENCH_CACHE", "/tmp/treeinner-bench"))


# ---------------------------------------------------------------------- data and model
def make_data(
    rows: int, features: int, nan_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 features and a nonlinear target with interactions (so trees grow full depth)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    k = min(features, 10)
    w = rng.standard_normal(features) / np.sqrt(features)
    y = X @ w + np.sin(X[:, :k]).sum(axis=1)
    if features >= 2:
        y += X[:, 0] * X[:, 1] + np.where(X[:, -1] > 0.5, 1.0, -0.5)
    y += 0.1 * rng.standard_normal(rows)
    if nan_fraction > 0:
        X[rng.random(X.shape) < nan_fraction] = np.nan
    return X, y


def train_or_load(args: argparse.Namespace) -> tuple[xgb.Booster, bool, float]:
    """The trained booster, whether it came from the cache, and the training time (s)."""
    key = {
        "rows": args.rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "nan_fraction": args.nan_fraction,
        "seed": args.seed,
        "eta": ETA,
        "xgboost": xgb.__version__,
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = (
        f"xgb_r{args.rows}_f{args.features}_t{args.trees}_d{args.depth}"
        f"_nan{args.nan_fraction:g}_s{args.seed}_{digest}.ubj"
    )
    path = CACHE_DIR / name
    if path.exists() and not args.retrain:
        booster = xgb.Booster(model_file=str(path))
        return booster, True, 0.0
    X, y = make_data(args.rows, args.features, args.nan_fraction, args.seed)
    params = {
        "objective": "reg:squarederror",
        "tree_method": "hist",
        "max_depth": args.depth,
        "eta": key["eta"],
        "nthread": args.threads,
        "seed": args.seed,
    }
    t0 = time.perf_counter()
    booster = xgb.train(params, xgb.DMatrix(X, label=y, nthread=args.threads), args.trees)
    elapsed = time.perf_counter() - t0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.ubj")
    booster.save_model(str(tmp))
    os.replace(tmp, path)
    return booster, False, elapsed


# ---------------------------------------------------------------------- timing
def best_of(fns: dict[str, Any], repeats: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Best wall time of ``repeats`` calls of each function, and each one's last result.

    The functions are called in turn within each repeat (a, b, a, b, ...) so that a burst of
    load from elsewhere on the machine slows both sides rather than one.
    """
    best = dict.fromkeys(fns, float("inf"))
    out: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            out[name] = fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best, out


def git_state() -> str | None:
    """The repository's commit, with "+dirty" if the working tree differs (None outside git)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine_info(threads: int) -> dict[str, Any]:
    cpu_model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = f"not yet chosen (config: {numba.config.THREADING_LAYER})"
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "threads": threads,
        "loadavg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "numba_threading_layer": layer,
        "numba_num_threads_max": numba.config.NUMBA_NUM_THREADS,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "numba": numba.__version__,
        "xgboost": xgb.__version__,
        "treeinner": treeinner.__version__,
    }


def bench_dtype(
    ens: treeinner.TreeEnsemble,
    booster: xgb.Booster,
    X: np.ndarray,
    threads: int,
    repeats: int,
) -> list[dict[str, Any]]:
    dtype = X.dtype.name
    rows: list[dict[str, Any]] = []

    # -- warm-up: the first treeinner call compiles (or loads) the kernels
    t0 = time.perf_counter()
    ens.predict_margin(X[:256])
    ens.leaf_index(X[:256])
    first_call = time.perf_counter() - t0
    ens.predict_margin(X)
    booster.inplace_predict(X, predict_type="margin")

    # -- predict_margin
    t, res = best_of(
        {
            "treeinner": lambda: ens.predict_margin(X),
            "xgboost": lambda: booster.inplace_predict(X, predict_type="margin"),
        },
        repeats,
    )
    t_ti, t_xgb, margin, xgb_margin = t["treeinner"], t["xgboost"], res["treeinner"], res["xgboost"]
    xgb_margin = np.asarray(xgb_margin).astype(np.float64)
    if not np.array_equal(margin, xgb_margin):
        bad = margin != xgb_margin
        raise AssertionError(
            f"[{dtype}] predict_margin differs from XGBoost in {int(bad.sum())} of "
            f"{bad.size} rows (max |diff| {np.nanmax(np.abs(margin - xgb_margin)):.3g})."
        )
    rows.append(
        {
            "dtype": dtype,
            "operation": "predict_margin",
            "xgboost_call": 'inplace_predict(X, predict_type="margin")',
            "treeinner_s": t_ti,
            "xgboost_s": t_xgb,
            "ratio": t_ti / t_xgb,
            "identical": True,
            "first_call_s": first_call,
        }
    )

    # -- leaf_index
    ens.leaf_index(X)

    def xgb_leaf():
        return booster.predict(xgb.DMatrix(X, nthread=threads), pred_leaf=True)

    xgb_leaf()
    dm = xgb.DMatrix(X, nthread=threads)
    booster.predict(dm, pred_leaf=True)
    t, res = best_of(
        {
            "treeinner": lambda: ens.leaf_index(X),
            "xgboost": xgb_leaf,
            "xgboost_prebuilt": lambda: booster.predict(dm, pred_leaf=True),
        },
        repeats,
    )
    t_ti, t_xgb, t_xgb_pre = t["treeinner"], t["xgboost"], t["xgboost_prebuilt"]
    leaves, xgb_leaves = res["treeinner"], res["xgboost"]
    same = np.array_equal(leaves, np.asarray(xgb_leaves).astype(np.int64))
    if not same:
        bad = leaves != xgb_leaves
        raise AssertionError(
            f"[{dtype}] leaf_index differs from XGBoost in {int(bad.sum())} of {bad.size} entries."
        )
    rows.append(
        {
            "dtype": dtype,
            "operation": "leaf_index",
            "xgboost_call": "predict(DMatrix(X), pred_leaf=True)",
            "treeinner_s": t_ti,
            "xgboost_s": t_xgb,
            "ratio": t_ti / t_xgb,
            "identical": True,
        }
    )
    rows.append(
        {
            "dtype": dtype,
            "operation": "leaf_index*",
            "xgboost_call": "predict(dm, pred_leaf=True), DMatrix prebuilt (not timed)",
            "treeinner_s": t_ti,
            "xgboost_s": t_xgb_pre,
            "ratio": t_ti / t_xgb_pre,
            "identical": True,
        }
    )
    return rows


def print_table(config: dict[str, Any], machine: dict[str, Any], rows: list[dict]) -> None:
    print(
        f"\ntreeinner predict benchmark: {config['predict_rows']} rows x {config['features']} "
        f"features, {config['trees']} trees of depth {config['depth']} "
        f"({config['n_nodes']} nodes), NaN fraction {config['nan_fraction']:g}, "
        f"{config['threads']} threads, best of {config['repeats']}"
    )
    print(
        f"machine: {machine['cpu_model']}, cpu_count {machine['cpu_count']} "
        f"(affinity {machine['cpu_affinity']}), numba threading layer "
        f"{machine['numba_threading_layer']}, load average at end {machine['loadavg_end']}"
    )
    print(
        f"versions: python {machine['python']}, numpy {machine['numpy']}, numba "
        f"{machine['numba']}, xgboost {machine['xgboost']}, treeinner {machine['treeinner']}"
    )
    header = (
        f"{'dtype':<8} {'operation':<15} {'treeinner [s]':>14} {'xgboost [s]':>12} {'ratio':>7}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        flag = ""
        if r["operation"] == "predict_margin":
            flag = "  ok (<= 1.0)" if r["ratio"] <= 1.0 else "  above target 1.0"
        print(
            f"{r['dtype']:<8} {r['operation']:<15} {r['treeinner_s']:>14.4f} "
            f"{r['xgboost_s']:>12.4f} {r['ratio']:>7.2f}{flag}"
        )
    print(
        "\nratio = treeinner / xgboost (lower is better). Margins and leaf indices are "
        "identical to XGBoost's.\nleaf_index* = XGBoost with the DMatrix built outside the "
        "timed call."
    )


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="training rows (default 100000)")
    p.add_argument(
        "--predict-rows", type=int, default=None, help="rows to predict (default: --rows)"
    )
    p.add_argument("--features", type=int, default=50, help="features (default 50)")
    p.add_argument("--trees", type=int, default=500, help="boosting rounds (default 500)")
    p.add_argument("--depth", type=int, default=6, help="max_depth (default 6)")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="threads for both libraries (default os.cpu_count())",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs, best kept (default 5)")
    p.add_argument("--nan-fraction", type=float, default=0.0, help="fraction of entries set to NaN")
    p.add_argument(
        "--dtypes", default="float32,float64", help="input dtypes (default float32,float64)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retrain", action="store_true", help="ignore the cached model")
    p.add_argument("--output", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})")
    args = p.parse_args(argv)
    if args.predict_rows is None:
        args.predict_rows = args.rows
    if not 1 <= args.threads <= numba.config.NUMBA_NUM_THREADS:
        p.error(f"--threads must be in [1, {numba.config.NUMBA_NUM_THREADS}] (NUMBA_NUM_THREADS)")
    if not 0.0 <= args.nan_fraction < 1.0:
        p.error("--nan-fraction must be in [0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.threads
    numba.set_num_threads(n)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None

    booster, cached, train_s = train_or_load(args)
    booster.set_param({"nthread": n})
    what = "loaded from cache" if cached else f"trained in {train_s:.1f} s"
    print(f"model: {args.trees} trees, depth {args.depth}, {what} ({CACHE_DIR})", flush=True)

    t0 = time.perf_counter()
    # A model loaded from a file has lost its training config; pass eta so the adapter need not
    # recover it (only importance depends on it, not predictions).
    ens = treeinner.from_model(booster, learning_rate=ETA)
    convert_s = time.perf_counter() - t0

    X64, _ = make_data(args.predict_rows, args.features, args.nan_fraction, args.seed + 1)
    rows: list[dict[str, Any]] = []
    for name in args.dtypes.split(","):
        X = np.ascontiguousarray(X64, dtype=np.dtype(name.strip()))
        rows.extend(bench_dtype(ens, booster, X, n, args.repeats))

    config = {
        "rows": args.rows,
        "predict_rows": args.predict_rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "n_nodes": ens.n_nodes,
        "nan_fraction": args.nan_fraction,
        "threads": n,
        "repeats": args.repeats,
        "seed": args.seed,
        "model_cached": cached,
        "train_s": train_s,
        "from_model_s": convert_s,
        "timer": "time.perf_counter, best of repeats",
        "loadavg_start": load_start,
    }
    machine = machine_info(n)
    print_table(config, machine, rows)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "predict", "config": config, "machine": machine, "results": rows}
    args.output.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwritten {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
