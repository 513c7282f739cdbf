"""Conversion cache: ``tree_inner(booster, X, y)`` called twice against ``tree_inner(ens, X, y)``.

``treeinner.from_model`` caches conversions keyed on the booster's own serialization (XGBoost:
``save_raw("ubj")`` and ``save_config()``, hashed with blake2b), so the second call on an
unchanged booster costs one serialization and a hash instead of a parse. This script times, on
the XGBoost model of ``bench_predict.py`` (default 100 000 x 50, 500 trees of depth 6):

* ``tree_inner(ens, X, y)`` with the ensemble converted beforehand;
* the first ``tree_inner(booster, X, y)`` (cache cleared before it: the conversion is parsed);
* the second ``tree_inner(booster, X, y)`` (served from the cache);
* ``booster.inplace_predict(X)``, for scale;
* ``treeinner.from_model(booster)`` alone, on a miss and on a hit;

``--repeats`` times each (in this order within a repeat, each call after a garbage
collection), and prints the medians and the ratios.
The target: second call / ``tree_inner(ens)`` <= 1.1.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (data and the cached model)

import treeinner  # noqa: E402
from treeinner import adapters  # noqa: E402

TARGET = 1.1
FIRST, SECOND, ENS = "tree_inner(booster), first", "tree_inner(booster), second", "tree_inner(ens)"


def timed(fn: Any) -> tuple[float, Any]:
    """Wall time of one call (time.perf_counter, after a garbage collection) and its result."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(booster: Any, ens: treeinner.TreeEnsemble, X: np.ndarray, y: np.ndarray, repeats: int):
    """Every timed call's times (seconds) over ``repeats``, and whether the results agree.

    Within a repeat: ``from_model`` on a miss and a hit, then (cache cleared) the first
    ``tree_inner(booster)``, then the second one and ``tree_inner(ens)`` in turn (which goes
    first alternates between repeats), then ``inplace_predict``.
    """
    times: dict[str, list[float]] = {}
    agree = True
    for r in range(repeats):
        row = {}
        adapters.clear_cache()
        row["from_model (miss)"], _ = timed(lambda: treeinner.from_model(booster))
        row["from_model (hit)"], _ = timed(lambda: treeinner.from_model(booster))
        adapters.clear_cache()
        row[FIRST], first = timed(lambda: treeinner.tree_inner(booster, X, y))
        pair = {
            SECOND: lambda: treeinner.tree_inner(booster, X, y),
            ENS: lambda: treeinner.tree_inner(ens, X, y),
        }
        for name in (SECOND, ENS) if r % 2 == 0 else (ENS, SECOND):
            row[name], out = timed(pair[name])
            agree &= bool(np.array_equal(out.values, first.values))
        row["inplace_predict"], _ = timed(lambda: booster.inplace_predict(X))
        for k, v in row.items():
            times.setdefault(k, []).append(v)
    return times, agree


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--trees", type=int, default=500)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3, help="timed runs, median kept (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retrain", action="store_true", help="ignore the cached model")
    args = p.parse_args(argv)
    args.nan_fraction = 0.0
    return args


def main(argv: list[str] | None = None) -> int:
    """Train or load the model, time, print."""
    args = parse_args(argv)
    numba.set_num_threads(args.threads)
    booster, cached, train_s = bp.train_or_load(args)
    booster.set_param({"nthread": args.threads})
    what = "loaded from cache" if cached else f"trained in {train_s:.1f} s"
    print(f"model: {args.trees} trees, depth {args.depth}, {what} ({bp.CACHE_DIR})")
    X, y = bp.make_data(args.rows, args.features, 0.0, args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ens = treeinner.from_model(booster)
        treeinner.tree_inner(ens, X, y)  # compiles the kernels (or loads them from Numba's cache)
    print(f"eta {ens.learning_rate[0]:g}, lambda {ens.reg_lambda:g}; {len(caught)} warnings")
    times, agree = run(booster, ens, X, y, args.repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{args.rows} x {args.features}, {args.threads} threads, median of {args.repeats}")
    for k, v in med.items():
        runs = " ".join(f"{t:.3f}" for t in times[k])
        print(f"  {k:<30} {v:8.3f} s   ({runs})")
    base = med[ENS]
    print("\nratios")
    for num, den, note in (
        (SECOND, ENS, "  (target <= 1.1)"),
        (FIRST, ENS, ""),
        (ENS, "inplace_predict", ""),
        (SECOND, "inplace_predict", ""),
        (FIRST, "inplace_predict", ""),
    ):
        print(f"  {num} / {den}".ljust(62) + f"{med[num] / med[den]:6.3f}{note}")
    print(f"\nresults identical to tree_inner(ens): {agree}")
    return 0 if agree and med[SECOND] / base <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
