"""Benchmark the one-pass standard errors of TreeInner / ForestInner against the scores alone.

For each feature count (default 50 and 500) an XGBoost regressor (``--trees`` rounds of depth
``--depth``, trained on ``make_data`` of ``bench_predict.py`` and cached in its model cache)
is converted, and a fresh draw of ``--rows`` rows (default 100 000) is scored by every
registry method of ``--methods`` twice: ``Method.score`` (the score alone, as
``treeinner.importance`` computes it) against ``Method.estimate`` (the score with its
standard error, as ``treeinner.significance`` computes it: for the row-additive methods the
per-feature sums of the per-row terms and of their squares).

Each time is the best of ``--repeats`` runs after a warm-up call (Numba compilation excluded),
the two functions of a pair alternating. Inline check: the estimate's score equals the score
to 1e-9 of its largest entry. The target (issue 15): scores with standard errors within 1.2x
of the scores alone.

Run from the repository root::

    python benchmarks/bench_moments.py                         # full size
    python benchmarks/bench_moments.py --rows 20000 --trees 50 --features 50   # quick run

Results are printed as a table (and written as JSON with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (data, model cache, timing helpers)

import treeinner  # noqa: E402
from treeinner._methods import REGISTRY, Options  # noqa: E402

#: the registry methods with a one-pass standard error
WITH_SE = [name for name, m in REGISTRY.items() if m.has_se]
DEFAULT = ["tree_inner", "tree_inner_shap", "forest_inner", "abs_shap", "unbiased_gain"]


def bench_features(features: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    train = argparse.Namespace(
        rows=args.train_rows, features=features, trees=args.trees, depth=args.depth,
        nan_fraction=args.nan_fraction, seed=args.seed, threads=args.threads,
        retrain=False,
    )  # fmt: skip
    booster, cached, train_s = bp.train_or_load(train)
    ens = treeinner.from_model(booster)
    X, y = bp.make_data(args.rows, features, args.nan_fraction, args.seed + 1)
    opts = Options(random_state=0)  # node values computed once, shared by both calls
    out = []
    for name in args.methods:
        m = REGISTRY[name]
        fns = {
            "score": lambda m=m: m.score(ens, X, y, opts),
            "with_se": lambda m=m: m.estimate(ens, X, y, opts),
        }
        for fn in fns.values():  # warm-up: compilation, layout, node values
            fn()
        best, res = bp.best_of(fns, args.repeats)
        score, est = res["score"], res["with_se"]
        err = float(np.abs(est.score - score).max() / max(np.abs(score).max(), 1e-300))
        assert err < 1e-9, f"{name}: the estimate's score differs from the score by {err:.2e}"
        out.append(
            {
                "method": name,
                "features": features,
                "rows": args.rows,
                "trees": ens.n_trees,
                "depth": args.depth,
                "score_s": best["score"],
                "with_se_s": best["with_se"],
                "ratio": best["with_se"] / best["score"],
                "score_max_rel_err": err,
                "median_se": float(np.median(est.se_total)),
                "model_cached": cached,
                "train_s": train_s,
            }
        )
        print(
            f"{name:>16} {features:>5} feat: score {best['score']:.3f}s, "
            f"with se {best['with_se']:.3f}s, ratio {best['with_se'] / best['score']:.2f}",
            flush=True,
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="held-out rows scored")
    p.add_argument("--train-rows", type=int, default=50_000)
    p.add_argument("--features", type=int, nargs="+", default=[50, 500])
    p.add_argument("--trees", type=int, default=300)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--nan-fraction", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", nargs="+", default=DEFAULT, choices=WITH_SE)
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    rows = []
    for f in args.features:
        rows += bench_features(f, args)
    machine = bp.machine_info(args.threads)
    print()
    print(f"{'method':>16} {'feat':>5} {'score s':>9} {'with se s':>10} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['method']:>16} {r['features']:>5} {r['score_s']:>9.3f} "
            f"{r['with_se_s']:>10.3f} {r['ratio']:>6.2f}"
        )
    print(
        f"threads {args.threads}, load average at end {machine['loadavg_end']}, "
        f"{machine['cpu_model']}"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"config": vars(args) | {"out": str(args.out)}, "machine": machine, "rows": rows}
        args.out.write_text(json.dumps(doc, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
