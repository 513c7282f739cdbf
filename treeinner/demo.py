"""A runnable tour: ``python -m treeinner.demo``.

Trains a small XGBoost model on generated data, saves it to a JSON file (which loses the
learning rate and lambda), reads it back with treeinner, and shows what the library recovers
and computes: the training parameters from the tree statistics, margins bit-identical to
XGBoost's, the total-gain identity of TreeInner on the training data, and TreeInner on held-out
data next to total gain and mean |PreDecomp|.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import pandas as pd


def make_data(n: int = 5000, n_noise: int = 5, seed: int = 0):
    """Three informative features and ``n_noise`` pure-noise ones, with missing values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3 + n_noise))
    X[rng.random(X.shape) < 0.05] = np.nan
    x = np.nan_to_num(X)
    y = 2.0 * x[:, 0] + np.sin(3 * x[:, 1]) + (x[:, 2] > 0.5) + rng.normal(scale=0.5, size=n)
    names = ["signal_linear", "signal_sine", "signal_step"] + [f"noise_{i}" for i in range(n_noise)]
    return X, y, names


def main(argv: list[str] | None = None) -> int:
    """Run the demo and print its results."""
    parser = argparse.ArgumentParser(prog="python -m treeinner.demo", description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--trees", type=int, default=200)
    args = parser.parse_args(argv)

    import xgboost as xgb

    import treeinner

    X, y, names = make_data(args.rows)
    X = pd.DataFrame(X, columns=names)  # columns matched to the model's features by name
    params = {"eta": 0.05, "lambda": 3.0, "max_depth": 4, "tree_method": "hist", "nthread": 1}
    booster = xgb.train(params, xgb.DMatrix(X, y, feature_names=names), args.trees)
    print(f"Trained XGBoost {xgb.__version__}: {args.trees} trees, eta=0.05, lambda=3.0")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        booster.save_model(path)
        ens = treeinner.load(path)  # the file does not keep eta or lambda
    print(f"Loaded from JSON: {ens}")
    print(
        f"  recovered from the tree statistics: eta={ens.learning_rate[0]:.6g}, "
        f"lambda={ens.reg_lambda:.6g}"
    )

    ours = ens.predict_margin(X)  # first call compiles (cached afterwards)
    t0 = time.perf_counter()
    ours = ens.predict_margin(X)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = booster.inplace_predict(X, predict_type="margin")
    t_theirs = time.perf_counter() - t0
    same = np.array_equal(ours, theirs.astype(np.float64))
    print(
        f"predict_margin on {len(X)} rows: identical to XGBoost bit for bit: {same} "
        f"({t_ours * 1e3:.1f} ms vs XGBoost {t_theirs * 1e3:.1f} ms)"
    )
    # The identity: TreeInner(PreDecomp) on the training data is the model's total gain.
    train_ti = treeinner.tree_inner(ens, X, y)
    gain = treeinner.total_gain(ens)
    gap = np.abs(train_ti / train_ti.sum() - gain / gain.sum()).max()
    print(f"TreeInner on the training data reproduces total gain (max gap {gap:.1e}, normalized)")

    # On held-out data TreeInner separates what the model learned from what it overfit.
    Xv, yv, _ = make_data(args.rows, seed=1)
    Xv = pd.DataFrame(Xv, columns=names)
    table = treeinner.importance(
        ens,
        Xv,
        yv,
        methods=["total_gain", "abs_predecomp", "tree_inner", "unbiased_gain"],
        random_state=0,
    )
    table = table / table.abs().sum()
    print("\nImportance on held-out data (each column normalized by its sum of |scores|):")
    print(table.sort_values("tree_inner", ascending=False).round(4).to_string())
    noise = [n for n in names if n.startswith("noise")]
    print(
        f"\nnoise features: total gain gives them {table.loc[noise, 'total_gain'].sum():.1%} "
        f"of the importance; TreeInner on held-out data scores "
        f"{(table.loc[noise, 'tree_inner'] < 0).sum()} of {len(noise)} of them negative "
        "(the model only overfit them);\nunbiased gain (UnbiasedGBM) gives them "
        f"{table.loc[noise, 'unbiased_gain'].sum():+.1%} in total "
        "(at most 0 in expectation for features the model only overfit)."
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
