"""Fit time of treeinner's native booster against XGBoost ``tree_method="hist"``.

Both sides fit the same seeded regression data (``make_data`` of ``bench_predict.py``: default
100 000 x 50, a nonlinear target with interactions) with the same number of threads, rounds,
depth, learning rate, L2 penalty, min_child_weight and bins:

* ``GBMRegressor(split="gain")`` and ``GBMRegressor(split="unbiased")`` (depth-wise to
  ``max_depth``, like XGBoost's default growth);
* ``xgboost.XGBRegressor(tree_method="hist", max_bin=..., ...)`` with the data passed as a
  NumPy array (its quantile sketch is inside the timed ``fit``, like our binning).

Each time is the best of ``--repeats`` fits after one untimed warm-up fit of each on a small
slice (the first call compiles the Numba kernels or loads them from Numba's cache). Fits
alternate within each repeat. The script prints the times, the ratios treeinner / XGBoost
(targets: <= 1.0 for split="gain", <= 1.5 for split="unbiased") and the R^2 of each model on a
held-out set drawn from the same distribution (a sanity check, not a quality benchmark), and
writes the same to ``benchmarks/results/booster_speed.json``.

Run from the repository root::

    python benchmarks/bench_booster_speed.py                         # 100k x 50, 500 rounds
    python benchmarks/bench_booster_speed.py --rows 20000 --rounds 50 --repeats 1   # quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_predict import best_of, git_state, machine_info, make_data  # noqa: E402

from treeinner.booster import GBMRegressor  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "booster_speed.json"
TARGETS = {"gain": 1.0, "unbiased": 1.5}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--max-bin", type=int, default=256)
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--reg-lambda", type=float, default=1.0)
    ap.add_argument("--min-child-weight", type=float, default=1.0)
    ap.add_argument("--nan-fraction", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="gain,unbiased", help="comma-separated split rules to time")
    ap.add_argument("--out", type=Path, default=RESULTS)
    return ap.parse_args(argv)


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    return float(1.0 - np.mean((y - pred) ** 2) / np.var(y))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    splits = [s for s in args.splits.split(",") if s]
    X, y = make_data(args.rows, args.features, args.nan_fraction, args.seed)
    Xt, yt = make_data(20_000, args.features, args.nan_fraction, args.seed + 1)
    numba.set_num_threads(args.threads)
    common = dict(
        n_estimators=args.rounds,
        learning_rate=args.eta,
        max_depth=args.depth,
        reg_lambda=args.reg_lambda,
        min_child_weight=args.min_child_weight,
        n_jobs=args.threads,
    )

    def ours(split: str, n_rounds: int = args.rounds) -> Any:
        return GBMRegressor(
            **{**common, "n_estimators": n_rounds},
            max_bins=args.max_bin,
            split=split,
            random_state=args.seed,
        )

    def theirs(n_rounds: int = args.rounds) -> Any:
        return xgb.XGBRegressor(
            **{**common, "n_estimators": n_rounds},
            tree_method="hist",
            max_bin=args.max_bin,
            random_state=args.seed,
        )

    # warm-up: compile or load the Numba kernels, start XGBoost's thread pool
    first_call = {}
    for split in splits:
        t0 = time.perf_counter()
        ours(split, 3).fit(X[:2000], y[:2000])
        first_call[split] = time.perf_counter() - t0
    theirs(3).fit(X[:2000], y[:2000])

    fns = {f"treeinner_{s}": (lambda s=s: ours(s).fit(X, y)) for s in splits}
    fns["xgboost_hist"] = lambda: theirs().fit(X, y)
    best, models = best_of(fns, args.repeats)
    rows = []
    for s in splits:
        ratio = best[f"treeinner_{s}"] / best["xgboost_hist"]
        rows.append(
            {
                "split": s,
                "treeinner_s": best[f"treeinner_{s}"],
                "xgboost_s": best["xgboost_hist"],
                "ratio": ratio,
                "target": TARGETS.get(s),
                "meets_target": bool(ratio <= TARGETS.get(s, np.inf)),
                "r2_test_treeinner": r2(yt, models[f"treeinner_{s}"].predict(Xt)),
                "first_call_s": first_call[s],
            }
        )
    r2_xgb = r2(yt, models["xgboost_hist"].predict(Xt))
    config = {
        k: getattr(args, k)
        for k in (
            "rows",
            "features",
            "rounds",
            "depth",
            "max_bin",
            "eta",
            "reg_lambda",
            "min_child_weight",
            "nan_fraction",
            "threads",
            "repeats",
            "seed",
        )
    }
    machine = machine_info(args.threads)
    print(
        f"{args.rows} x {args.features}, {args.rounds} rounds, depth {args.depth}, "
        f"max_bin {args.max_bin}, {args.threads} threads, best of {args.repeats}"
    )
    print(f"{'split':<10}{'treeinner s':>13}{'xgboost s':>11}{'ratio':>8}{'target':>8}{'R2':>8}")
    for r in rows:
        print(
            f"{r['split']:<10}{r['treeinner_s']:>13.2f}{r['xgboost_s']:>11.2f}"
            f"{r['ratio']:>8.2f}{r['target']:>8.1f}{r['r2_test_treeinner']:>8.3f}"
        )
    print(f"xgboost hist test R2: {r2_xgb:.3f}")
    print(f"machine: {machine['cpu_model']}, load average at end {machine['loadavg_end']}")
    out = {
        "benchmark": "booster_speed",
        "command": "python benchmarks/bench_booster_speed.py " + " ".join(argv or sys.argv[1:]),
        "git": git_state(),
        "config": config,
        "results": rows,
        "r2_test_xgboost": r2_xgb,
        "machine": machine,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
