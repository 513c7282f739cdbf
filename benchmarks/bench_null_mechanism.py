"""Where does a held-out score's null lean? The z of independent noise features on 200,000
fresh rows, per method, on the overfit binary models of issue 35.

Four relevant features (a logistic signal with an interaction) and four independent N(0, 1)
noise features; 2,000 training rows; 100 trees of 31 leaves (XGBoost lossguide, lambda 1;
LightGBM, lambda 0); scored on fresh rows: ForestInner's initial form uncentred
(``forest_inner(..., gradient="initial", centred=False)``) and centred, with PreDecomp and
TreeSHAP, TreeInner and the staged form. A z near 0 for the noise features is an estimand of
zero; the uncentred initial form's is far above it.

    python benchmarks/bench_null_mechanism.py              # 200,000 rows, about 3 minutes
    python benchmarks/bench_null_mechanism.py --rows 20000

Prints a Markdown table and writes ``benchmarks/results/null_mechanism.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
import xgboost as xgb

import treeinner

RESULTS = Path(__file__).resolve().parent / "results" / "null_mechanism.json"
METHODS = ("forest_inner_initial", "forest_inner_initial_shap", "tree_inner", "forest_inner")


def data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, 8))
    s = X[:, 0] + 0.8 * X[:, 1] - 0.6 * X[:, 2] + 0.5 * X[:, 3] * X[:, 0]
    return X, (rng.random(n) < 1 / (1 + np.exp(-s))).astype(float)


def model(booster: str, X: np.ndarray, y: np.ndarray):
    if booster == "xgboost":
        return xgb.XGBClassifier(
            n_estimators=100, learning_rate=0.1, max_depth=0, max_leaves=31,
            grow_policy="lossguide", reg_lambda=1.0, n_jobs=1,
        ).fit(X, y)  # fmt: skip
    return lgb.LGBMClassifier(
        n_estimators=100, learning_rate=0.1, num_leaves=31, reg_lambda=0.0, verbose=-1, n_jobs=1
    ).fit(X, y)


def uncentred_z(m, X: np.ndarray, y: np.ndarray, attribution: str) -> np.ndarray:
    """z of the uncentred initial form: its per-row terms' moments (the registry's old path)."""
    from treeinner._inner import _initial_rows, inner_values
    from treeinner._stats import moments_from_rows

    ens = treeinner.from_model(m)
    rows = _initial_rows(ens, X, y, inner_values(ens, attribution, None))
    est = moments_from_rows(rows, None).estimate(False)
    return est.score[:, 0] / np.sqrt(est.var[:, 0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    start = time.perf_counter()
    out = {}
    for booster in ("xgboost", "lightgbm"):
        rng = np.random.default_rng(0)
        Xt, yt = data(2000, rng)
        m = model(booster, Xt, yt)
        Xv, yv = data(args.rows, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = treeinner.significance(m, Xv, yv, methods=list(METHODS))
            t["z"] = t.score / t.se
            z = t.pivot(index="feature", columns="method", values="z")[list(METHODS)]
            z.insert(0, "forest_inner_initial_shap uncentred", uncentred_z(m, Xv, yv, "shap"))
            z.insert(0, "forest_inner_initial uncentred", uncentred_z(m, Xv, yv, "predecomp"))
        out[booster] = z.round(2)
    elapsed = time.perf_counter() - start
    lines = []
    for booster, z in out.items():
        noise = z.iloc[4:]
        lines.append(f"{booster}, noise features (z): " + "; ".join(
            f"`{c}` {noise[c].min():+.1f} to {noise[c].max():+.1f}" for c in z.columns
        ))  # fmt: skip
        lines.append(f"{booster}, relevant features (min z): " + "; ".join(
            f"`{c}` {z[c].iloc[:4].min():+.1f}" for c in z.columns
        ))  # fmt: skip
    text = "\n".join(lines)
    doc = {
        "benchmark": "null_mechanism",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/bench_null_mechanism.py"
        + (f" --rows {args.rows}" if args.rows != 200_000 else ""),
        "elapsed_s": elapsed,
        "versions": {
            "treeinner": treeinner.__version__,
            "xgboost": xgb.__version__,
            "lightgbm": lgb.__version__,
        },  # fmt: skip
        "z": {b: z.to_dict() for b, z in out.items()},
        "summary": text,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    for booster, z in out.items():
        print(booster)
        print(z.to_string())
    print(text)
    print(f"{elapsed:.0f} s; written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
