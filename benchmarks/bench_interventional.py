"""Benchmark treeinner's interventional TreeSHAP against shap's
``TreeExplainer(model, data=background, feature_perturbation="interventional")``.

An XGBoost regressor (``--trees`` rounds of depth ``--depth``, trained on ``--train-rows`` rows
of ``--features`` normal features with 5% missing values) explained on ``--rows`` fresh rows
against ``--background`` background rows (drawn from the training rows):
``treeinner.tree_shap_interventional(ens, X, background)`` against
``explainer.shap_values(X)`` (the explainer, which summarises nothing ahead, built outside
the timed call; the background passed as ``shap.maskers.Independent(bg, max_samples=len(bg))``,
since shap silently keeps a random 100 rows of a larger raw background). shap's interventional
algorithm is its own C++ (one thread); treeinner uses the threads it is given (``--threads``,
default all). Each time is the best of ``--repeats``
runs after a warm-up call (Numba compilation excluded); shap runs ``--shap-repeats`` times.
Inline check: the values agree to 1e-6 (the largest absolute difference is reported).

Run from the repository root::

    python benchmarks/bench_interventional.py                  # 500 x 20, 100 bg, 200 x d6
    python benchmarks/bench_interventional.py --trees 50       # quick run

Results are printed and written to ``benchmarks/results/interventional.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np


def _best(fn, repeats):
    best = np.inf
    out = None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--background", type=int, default=100)
    ap.add_argument("--trees", type=int, default=200)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--train-rows", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shap-repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/interventional.json")
    args = ap.parse_args()
    if args.threads:
        import numba

        numba.set_num_threads(args.threads)

    import shap
    import xgboost as xgb

    import treeinner

    rng = np.random.default_rng(args.seed)
    p = args.features
    Xt = rng.normal(size=(args.train_rows, p))
    y = Xt[:, 0] + np.sin(2 * Xt[:, 1]) * Xt[:, 2] + 0.5 * (Xt[:, 3] > 0) + Xt[:, 4:].sum(1) / p
    y = y + 0.1 * rng.normal(size=args.train_rows)
    Xt[rng.random(Xt.shape) < 0.05] = np.nan
    model = xgb.XGBRegressor(
        n_estimators=args.trees,
        max_depth=args.depth,
        learning_rate=0.1,
        n_jobs=args.threads or None,
    )
    model.fit(Xt, y)
    ens = treeinner.from_model(model)
    X = rng.normal(size=(args.rows, p))
    X[rng.random(X.shape) < 0.05] = np.nan
    bg = Xt[rng.choice(args.train_rows, args.background, replace=False)]

    treeinner.tree_shap_interventional(ens, X[:5], bg)  # compile
    t_ti, att = _best(lambda: treeinner.tree_shap_interventional(ens, X, bg), args.repeats)
    # raw data would be wrapped in an Independent masker keeping a random 100 rows
    data = shap.maskers.Independent(bg, max_samples=len(bg))
    explainer = shap.TreeExplainer(model, data=data, feature_perturbation="interventional")
    t_shap, ref = _best(lambda: explainer.shap_values(X, check_additivity=False),
                        args.shap_repeats)  # fmt: skip
    diff = float(np.abs(att.values - np.asarray(ref)).max())
    result = {
        "rows": args.rows,
        "features": p,
        "background": args.background,
        "trees": args.trees,
        "depth": args.depth,
        "leaves": int(np.count_nonzero(ens.left < 0)),
        "threads": args.threads or os.cpu_count(),
        "treeinner_s": t_ti,
        "shap_s": t_shap,
        "ratio": t_ti / t_shap,
        "max_abs_diff": diff,
        "shap_version": shap.__version__,
        "xgboost_version": xgb.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    print(
        f"interventional TreeSHAP, {args.rows} rows x {p} features, {args.background} background "
        f"rows, {args.trees} trees depth {args.depth}:\n"
        f"  treeinner {t_ti:.3f} s   shap {t_shap:.3f} s   ratio {t_ti / t_shap:.4f}   "
        f"max |diff| {diff:.2e}"
    )
    assert diff <= 1e-6, diff
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
