"""Seconds per method on the deep chain trees of ``tests/test_model_size_limits.py``: the
TreeSHAP set-up of a depth-1000 chain with a new feature at every split (500 quadrature
points), TreeSHAP on a depth-20,000 chain over 5 features, the refusal of a depth-20,000
chain over 20,000 features (its tables would hold 400 million entries), and every public
method on a depth-5,000 chain. The tests check these results are right and that the set-up
computes only the rules it needs; this script says how long they take.

    python benchmarks/bench_model_size_limits.py [--repeats 3]

Each call runs once untimed (Numba compiles or loads its kernels), then ``--repeats`` times;
the best time is printed and saved to ``benchmarks/results/model_size_limits.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import treeinner  # noqa: E402
from tests.test_model_size_limits import _chain, _methods, _rows  # noqa: E402
from treeinner import UnsupportedModelError  # noqa: E402
from treeinner import treeshap as TS  # noqa: E402


def _refuse(ens, X):
    try:
        treeinner.tree_shap(ens, X)
    except UnsupportedModelError:
        return
    raise AssertionError("the depth-20000 chain over 20000 features was not refused")


def cases() -> dict:
    """Name -> the call timed (models and rows built here, outside the clock)."""
    deep = _chain(1000, 1000)
    X1000 = _rows(1000, 1000, n=4)
    long = _chain(20_000, 5)
    X20k = _rows(20_000, 5)
    wide = _chain(20_000, 20_000, n_trees=2)
    Xwide = _rows(20_000, 20_000, n=2)
    out = {
        "depth 1000 TreeSHAP set-up": lambda: TS._setup(deep, "auto", 0, 1),
        "depth 1000 tree_shap": lambda: treeinner.tree_shap(deep, X1000),
        "depth 20000 x 5 features tree_shap": lambda: treeinner.tree_shap(long, X20k),
        "depth 20000 x 20000 features refused": lambda: _refuse(wide, Xwide),
    }
    ens = _chain(5000, 7, n_trees=2)
    X, y = _rows(5000, 7), np.linspace(-1.0, 1.0, 6)
    for name, f in _methods(ens, X, y).items():
        out[f"depth 5000 {name}"] = f
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--output", default=str(ROOT / "benchmarks/results/model_size_limits.json"))
    args = ap.parse_args()
    rows = []
    for name, f in cases().items():
        TS._rule.cache_clear()  # the set-up's rules computed afresh in each call
        f()
        best = np.inf
        for _ in range(args.repeats):
            TS._rule.cache_clear()
            t0 = time.perf_counter()
            f()
            best = min(best, time.perf_counter() - t0)
        rows.append({"case": name, "best_s": round(best, 4)})
        print(f"{name:48s} {best:8.3f} s")
    meta = {"cpu_count": os.cpu_count(), "repeats": args.repeats, "load": os.getloadavg()}
    Path(args.output).write_text(json.dumps({"machine": meta, "results": rows}, indent=1) + "\n")
    print("saved", args.output)


if __name__ == "__main__":
    main()
