"""UnbiasedGBM's Example 1 (Zhang et al. 2023, Section 4, Figure 1): gain vs unbiased gain.

Data, as Example 1 states it: X1 binary (Bernoulli 0.5), X2 categorical with 6 equally likely
categories, X3 ~ N(0, 1), all independent, and y = 0.1 X1 + eps with eps ~ N(0, 1); only X1 is
related to the target. Every repetition draws fresh data (seeded by ``--seed`` and the
repetition index): a training set and an independent held-out set of ``--n`` rows each
(default 1000 + 1000). X2 is a pandas categorical column, passed with
``enable_categorical=True`` (6 categories > XGBoost's ``max_cat_to_onehot`` of 4, so XGBoost
makes partition splits on it).

Model: XGBoost ``reg:squarederror``, ``tree_method="hist"``, ``max_depth`` 6, ``eta`` 0.1,
100 rounds, other parameters at XGBoost's defaults (``min_child_weight`` 1, ``reg_lambda`` 1,
``max_bin`` 256; ``--depth``, ``--eta``, ``--rounds`` change the first three).

Per feature and repetition:

* gain importance: ``treeinner.total_gain`` (checked against XGBoost's own
  ``get_score(importance_type="total_gain")``);
* unbiased gain on the held-out rows: ``treeinner.unbiased_gain(..., random_state=rep)``
  (squared error has a constant hessian, so the exact expectation over draws is used);
* the unbiased gain split by boosting round (``per_split=True``), to see which trees contribute.
  Its first round is Theorem 2's setting: the held-out gradients of tree 0 are taken at the
  constant base margin, so a feature independent of y scores 0 in expectation there.

Reports mean ± standard error, median and the fraction of repetitions in which each method
ranks X1 first, and draws two box-plot panels, (a) gain importance and (b) unbiased gain, to
``docs/img/example1_unbiased.png`` (matplotlib, Agg backend; ``pip install -e .[plot]``).

**Checks (exit status 1 if one fails):** gain importance ranks X3 first by mean and by median
over repetitions; unbiased gain ranks X1 first by mean and by median; in the first boosting
round the unbiased gain of X2 and of X3 is within 3 standard errors of 0 (Theorem 2);
``treeinner.total_gain`` agrees with XGBoost's ``total_gain`` to 1e-5 relative, and the
per-split unbiased gains sum to the per-feature result.

Run from the repository root::

    python benchmarks/example1_unbiased.py               # 100 repetitions (about a minute)
    python benchmarks/example1_unbiased.py --reps 1000   # as many as the paper's Figure 1

Writes ``benchmarks/results/example1_unbiased.json`` and ``docs/img/example1_unbiased.png``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
import xgboost as xgb

import treeinner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (shared benchmark helpers)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "example1_unbiased.json"
FIGURE = ROOT / "docs" / "img" / "example1_unbiased.png"

FEATURES = ["X1", "X2", "X3"]
N_CATEGORIES = 6
EFFECT = 0.1  # y = EFFECT * X1 + N(0, 1)
THEOREM2_SE = 3.0  # first-round unbiased gain of X2, X3 must be within this many s.e. of 0
GAIN_REL_TOL = 1e-5  # treeinner.total_gain vs XGBoost's float32 get_score


# ---------------------------------------------------------------------- data and model
def simulate(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """n rows of Example 1: X1 ~ Bernoulli(0.5), X2 uniform on 6 categories, X3 ~ N(0, 1)."""
    x1 = rng.binomial(1, 0.5, size=n).astype(np.float64)
    x2 = rng.integers(0, N_CATEGORIES, size=n)
    x3 = rng.standard_normal(n)
    y = EFFECT * x1 + rng.standard_normal(n)
    X = pd.DataFrame(
        {
            "X1": x1,
            "X2": pd.Categorical(x2, categories=range(N_CATEGORIES)),
            "X3": x3,
        }
    )
    return X, y


def xgb_params(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    return {
        "objective": "reg:squarederror",
        "tree_method": "hist",
        "max_depth": args.depth,
        "eta": args.eta,
        "seed": seed,
        "nthread": args.threads,
    }


# ---------------------------------------------------------------------- one repetition
def replicate(rep: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, rep])
    Xtr, ytr = simulate(rng, args.n)
    Xva, yva = simulate(rng, args.n)
    dtrain = xgb.DMatrix(Xtr, label=ytr, enable_categorical=True, nthread=args.threads)
    booster = xgb.train(xgb_params(args, rep), dtrain, args.rounds)
    ens = treeinner.from_model(booster)

    gain = treeinner.total_gain(ens).reindex(FEATURES, fill_value=0.0)
    xgb_gain = booster.get_score(importance_type="total_gain")
    xgb_gain = np.array([xgb_gain.get(f, 0.0) for f in FEATURES])
    scale = max(float(np.abs(gain).max()), 1e-300)
    gain_vs_xgb = float(np.abs(gain.to_numpy() - xgb_gain).max() / scale)

    ub = treeinner.unbiased_gain(ens, Xva, yva, random_state=rep).reindex(FEATURES, fill_value=0.0)
    splits = treeinner.unbiased_gain(ens, Xva, yva, random_state=rep, per_split=True)
    # one tree per round here (single output, no num_parallel_tree), so round = tree index
    per_round = np.zeros((args.rounds, len(FEATURES)))
    col = splits["feature"].map({f: j for j, f in enumerate(FEATURES)}).to_numpy()
    np.add.at(per_round, (splits["tree"].to_numpy(), col), splits["unbiased_gain"].to_numpy())
    split_sum_err = float(np.abs(per_round.sum(axis=0) - ub.to_numpy()).max())
    n_splits = splits["feature"].value_counts().reindex(FEATURES, fill_value=0)

    dvalid = xgb.DMatrix(Xva, enable_categorical=True, nthread=args.threads)
    pred_va = booster.predict(dvalid, output_margin=True).astype(np.float64)
    pred_tr = booster.predict(dtrain, output_margin=True).astype(np.float64)
    base = float(ens.base_margin[0])
    return {
        "rep": rep,
        "total_gain": gain.to_dict(),
        "unbiased_gain": ub.to_dict(),
        "unbiased_gain_round0": dict(zip(FEATURES, per_round[0].tolist(), strict=True)),
        "n_splits": {f: int(v) for f, v in n_splits.items()},
        "per_round": per_round.tolist(),
        "mse_train": float(np.mean((ytr - pred_tr) ** 2)),
        "mse_heldout": float(np.mean((yva - pred_va) ** 2)),
        "mse_heldout_base": float(np.mean((yva - base) ** 2)),
        "total_gain_vs_xgb_rel": gain_vs_xgb,
        "per_split_sum_abs_err": split_sum_err,
    }


# ---------------------------------------------------------------------- summary
def describe(values: np.ndarray) -> dict[str, Any]:
    """Per-feature statistics of a (reps, features) array."""
    n = values.shape[0]
    mean = values.mean(axis=0)
    se = values.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(values.shape[1], np.nan)
    median = np.median(values, axis=0)
    first = np.bincount(values.argmax(axis=1), minlength=values.shape[1]) / n
    return {
        "mean": dict(zip(FEATURES, mean.tolist(), strict=True)),
        "se": dict(zip(FEATURES, se.tolist(), strict=True)),
        "median": dict(zip(FEATURES, median.tolist(), strict=True)),
        "q25": dict(zip(FEATURES, np.quantile(values, 0.25, axis=0).tolist(), strict=True)),
        "q75": dict(zip(FEATURES, np.quantile(values, 0.75, axis=0).tolist(), strict=True)),
        "fraction_ranked_first": dict(zip(FEATURES, first.tolist(), strict=True)),
        "top_by_mean": FEATURES[int(np.argmax(mean))],
        "top_by_median": FEATURES[int(np.argmax(median))],
    }


def matrix(reps: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.array([[r[key][f] for f in FEATURES] for r in reps])


def cumulative_at(per_round_mean: np.ndarray, rounds: int) -> dict[str, dict[str, float]]:
    """Mean unbiased gain of the first m rounds (= that of the model truncated after m rounds,
    since the staged gradients of a tree depend only on the trees before it)."""
    cum = np.cumsum(per_round_mean, axis=0)
    marks = sorted({m for m in (1, 5, 10, 20, 50, 100, rounds) if m <= rounds})
    return {str(m): dict(zip(FEATURES, cum[m - 1].tolist(), strict=True)) for m in marks}


def summarize(reps: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    gain = describe(matrix(reps, "total_gain"))
    ub = describe(matrix(reps, "unbiased_gain"))
    ub0 = describe(matrix(reps, "unbiased_gain_round0"))
    per_round = np.array([r["per_round"] for r in reps])  # (reps, rounds, features)
    per_round_mean = per_round.mean(axis=0)
    mse = {
        k: {
            "mean": float(np.mean([r[k] for r in reps])),
            "se": float(np.std([r[k] for r in reps], ddof=1) / np.sqrt(len(reps))),
        }
        for k in ("mse_train", "mse_heldout", "mse_heldout_base")
    }
    theorem2 = {
        f: {
            "mean": ub0["mean"][f],
            "se": ub0["se"][f],
            "z": ub0["mean"][f] / ub0["se"][f] if ub0["se"][f] > 0 else 0.0,
        }
        for f in ("X2", "X3")
    }
    max_gain_err = max(r["total_gain_vs_xgb_rel"] for r in reps)
    max_split_err = max(r["per_split_sum_abs_err"] for r in reps)
    ub_scale = float(np.abs(matrix(reps, "unbiased_gain")).max())
    checks = {
        "gain_ranks_X3_first_by_mean": gain["top_by_mean"] == "X3",
        "gain_ranks_X3_first_by_median": gain["top_by_median"] == "X3",
        "unbiased_ranks_X1_first_by_mean": ub["top_by_mean"] == "X1",
        "unbiased_ranks_X1_first_by_median": ub["top_by_median"] == "X1",
        "round0_X2_X3_within_3se_of_0": all(abs(t["z"]) <= THEOREM2_SE for t in theorem2.values()),
        "total_gain_matches_xgboost": max_gain_err <= GAIN_REL_TOL,
        "per_split_sums_match": bool(max_split_err <= 1e-8 * max(1.0, ub_scale)),
    }
    return {
        "n_reps": len(reps),
        "total_gain": gain,
        "unbiased_gain": ub,
        "unbiased_gain_round0": ub0,
        "unbiased_gain_cumulative_mean": cumulative_at(per_round_mean, args.rounds),
        "unbiased_gain_per_round_mean": per_round_mean.tolist(),
        "mean_splits_per_model": dict(
            zip(FEATURES, matrix(reps, "n_splits").mean(axis=0).tolist(), strict=True)
        ),
        "mse": mse,
        "theorem2_round0": theorem2,
        "max_total_gain_vs_xgb_rel": max_gain_err,
        "max_per_split_sum_abs_err": max_split_err,
        "checks": checks,
        "all_checks_pass": all(checks.values()),
    }


# ---------------------------------------------------------------------- output
def _pm(s: dict[str, Any], f: str, digits: int = 1) -> str:
    return f"{s['mean'][f]:.{digits}f} ± {s['se'][f]:.{digits}f}"


def markdown_table(summary: dict[str, Any]) -> list[str]:
    rows = [
        ("Gain importance (`total_gain`)", summary["total_gain"]),
        ("Unbiased gain (held-out)", summary["unbiased_gain"]),
        ("Unbiased gain, first round only", summary["unbiased_gain_round0"]),
    ]
    lines = [
        "| method | X1 | X2 | X3 | top by mean / median | X1 ranked first |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for label, s in rows:
        d = 2 if s is summary["unbiased_gain_round0"] else 1
        lines.append(
            f"| {label} | {_pm(s, 'X1', d)} | {_pm(s, 'X2', d)} | {_pm(s, 'X3', d)} | "
            f"{s['top_by_mean']} / {s['top_by_median']} | "
            f"{100 * s['fraction_ranked_first']['X1']:.0f}% |"
        )
    lines += [
        "",
        "| method | median X1 | median X2 | median X3 |",
        "|---|---:|---:|---:|",
    ]
    for label, s in rows:
        d = 2 if s is summary["unbiased_gain_round0"] else 1
        lines.append(
            f"| {label} | " + " | ".join(f"{s['median'][f]:.{d}f}" for f in FEATURES) + " |"
        )
    return lines


def print_report(summary: dict[str, Any], config: dict[str, Any]) -> None:
    print(
        f"\nExample 1 (Zhang et al. 2023): {summary['n_reps']} repetitions, "
        f"{config['n']} training + "
        f"{config['n']} held-out rows, XGBoost depth {config['xgb_params']['max_depth']}, "
        f"eta {config['xgb_params']['eta']}, {config['num_boost_round']} rounds\n"
    )
    print("mean ± standard error over repetitions; medians below\n")
    for line in markdown_table(summary):
        print(line)
    print("\nmean unbiased gain of the first m rounds (the model truncated after m rounds):")
    for m, v in summary["unbiased_gain_cumulative_mean"].items():
        print(f"  m = {m:>4}: " + ", ".join(f"{f} {v[f]:9.2f}" for f in FEATURES))
    sp = summary["mean_splits_per_model"]
    print("mean number of splits per model: " + ", ".join(f"{f} {sp[f]:.1f}" for f in FEATURES))
    mse = summary["mse"]
    print(
        "MSE: training {:.4f}, held-out {:.4f} ± {:.4f}, held-out of the constant base margin "
        "{:.4f} ± {:.4f}".format(
            mse["mse_train"]["mean"],
            mse["mse_heldout"]["mean"],
            mse["mse_heldout"]["se"],
            mse["mse_heldout_base"]["mean"],
            mse["mse_heldout_base"]["se"],
        )
    )
    print(
        f"max |total_gain - XGBoost total_gain| / max gain = "
        f"{summary['max_total_gain_vs_xgb_rel']:.1e}; per-split sums vs per-feature: "
        f"{summary['max_per_split_sum_abs_err']:.1e}"
    )
    print("\nchecks:")
    for name, ok in summary["checks"].items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    t2 = summary["theorem2_round0"]
    print(
        "  (first-round z-scores: " + ", ".join(f"{f} {v['z']:+.2f}" for f, v in t2.items()) + ")"
    )


def plot(reps: list[dict[str, Any]], path: Path, config: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gain = matrix(reps, "total_gain")
    ub = matrix(reps, "unbiased_gain")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    panels = (
        (axes[0], gain, "(a) gain importance (training)"),
        (axes[1], ub, "(b) unbiased gain (held-out)"),
    )
    for ax, values, title in panels:
        ax.boxplot([values[:, j] for j in range(len(FEATURES))], widths=0.5)
        ax.set_xticks(range(1, len(FEATURES) + 1), FEATURES)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("importance (XGBoost gain scale)")
    axes[1].axhline(0.0, color="tab:red", linewidth=1.0, linestyle="--")
    fig.suptitle(
        f"Example 1: y = 0.1 X1 + N(0,1); {len(reps)} repetitions, {config['n']} + {config['n']} "
        f"rows, XGBoost depth {config['xgb_params']['max_depth']}, eta "
        f"{config['xgb_params']['eta']}, {config['num_boost_round']} rounds",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=100, help="repetitions (default 100)")
    p.add_argument("--n", type=int, default=1000, help="rows of each of training and held-out")
    p.add_argument("--depth", type=int, default=6, help="max_depth (default 6)")
    p.add_argument("--eta", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--rounds", type=int, default=100, help="boosting rounds (default 100)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the data")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="XGBoost and Numba threads (default 1: 1000-row models gain nothing from more)",
    )
    p.add_argument("--output", type=Path, default=RESULTS, help="JSON output")
    p.add_argument("--figure", type=Path, default=FIGURE, help="PNG output")
    p.add_argument("--no-plot", action="store_true", help="skip the figure")
    args = p.parse_args(argv)
    if args.reps < 2:
        p.error("--reps must be at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    t_start = time.perf_counter()
    reps = []
    for rep in range(args.reps):
        r = replicate(rep, args)
        reps.append(r)
        if (rep + 1) % 10 == 0 or rep + 1 == args.reps:
            print(
                f"rep {rep + 1:>4}/{args.reps}  gain X1/X2/X3 "
                + "/".join(f"{r['total_gain'][f]:.0f}" for f in FEATURES)
                + "  unbiased "
                + "/".join(f"{r['unbiased_gain'][f]:.0f}" for f in FEATURES),
                flush=True,
            )
    elapsed = time.perf_counter() - t_start
    summary = summarize(reps, args)
    cmd = "python benchmarks/example1_unbiased.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    config = {
        "command": cmd,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "reps": args.reps,
        "n": args.n,
        "seed": args.seed,
        "threads": args.threads,
        "xgb_params": {k: v for k, v in xgb_params(args, 0).items() if k not in ("seed",)},
        "num_boost_round": args.rounds,
        "data": "X1 ~ Bernoulli(0.5), X2 uniform on 6 categories (pandas categorical), "
        "X3 ~ N(0,1), y = 0.1 X1 + N(0,1); data seed [seed, rep], XGBoost seed rep, "
        "unbiased_gain random_state rep",
        "elapsed_s": elapsed,
        "git": bp.git_state(),
        "versions": {
            "treeinner": treeinner.__version__,
            "xgboost": xgb.__version__,
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "python": sys.version.split()[0],
        },
    }
    print_report(summary, config)
    print(f"\n{args.reps} repetitions in {elapsed:.1f} s")

    if not args.no_plot:
        plot(reps, args.figure, config)
        print(f"written {args.figure}")
    for r in reps:
        del r["per_round"]  # the per-round means are in the summary
    doc = {
        "benchmark": "example1_unbiased",
        "config": config,
        "summary": summary,
        "repetitions": reps,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written {args.output}")
    if not summary["all_checks_pass"]:
        failed = [k for k, ok in summary["checks"].items() if not ok]
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
