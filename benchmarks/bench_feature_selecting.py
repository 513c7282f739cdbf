"""Feature-selecting boosting (Han et al. 2020): GT-GBM's recovery, time and score against d,
and multitask selection.

Part ``scaling`` (``feature_selecting_scaling.py``): training time and test score against the
number of features for GT-GBM, A-GBM, GBFS, the booster without penalty, and "fit all, keep the
top k by gain / by TreeInner on validation rows, refit" with XGBoost and LightGBM, each tuned on
a validation split. Part ``multitask`` (``feature_selecting_multitask.py``): single task with a
task feature, group-sparse multitask and full multitask on related tasks from real data. Both
are described in docs/feature_selecting_benchmark.md.

Part ``recovery``: Figure 1 of Han et al. (GT-GBM, Section 4.3). With ``s = 3``, ``delta =
0.1`` and ``y = 2 x1 - 3 * 2**x2 + log2(1 + x3) + N(0, 1)``, all ``d`` features i.i.d.
uniform on [0, 1], the root node's candidate set of ``treeinner.kernels.group_test.GroupTester``
(gradients ``g = mean(y) - y``, ``h = 1``, ``lambda = 1``, no child constraints but one row;
bins from the booster's ``bin_data(X, 256)``) succeeds when it contains x1, x2 and x3. The
success rate over ``--reps`` repetitions is measured on a grid of ``n`` (rows) and ``d``
(features), with the seconds each cell took (data and binning included) and the mean time of
the tester's construction and of its ``candidates`` call.

    python benchmarks/bench_feature_selecting.py                  # every part, full grid
    python benchmarks/bench_feature_selecting.py --part recovery  # one part
    python benchmarks/bench_feature_selecting.py --quick          # small grid, a few seconds

Writes ``benchmarks/results/feature_selecting_<part>.json`` (``..._quick.json`` with
``--quick``, or ``--output-dir``) and, for the full recovery grid, the heat map
``docs/img/gt_recovery.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:  # the shared benchmark helpers (bench_predict imports xgboost and numba)
    from bench_predict import git_state, machine_info
except ImportError as _exc:  # without XGBoost: the same keys, fewer facts
    _HELPERS_MISSING = f"{type(_exc).__name__}: {_exc}"

    def git_state() -> str | None:
        return None

    def machine_info(threads: int) -> dict[str, Any]:
        import platform

        return {
            "platform": platform.platform(),
            "cpu_model": platform.processor() or "unknown CPU",
            "cpu_count": os.cpu_count(),
            "threads": threads,
            "note": f"bench_predict helpers unavailable ({_HELPERS_MISSING})",
        }


from _common import package_version  # noqa: E402

from treeinner.booster._train import bin_data  # noqa: E402
from treeinner.kernels._threads import n_threads  # noqa: E402
from treeinner.kernels.group_test import GroupTester  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "docs" / "img" / "gt_recovery.png"

# recovery: the paper's Figure 1 setting
N_SELECT = 3
DELTA = 0.1
LAMBDA = 1.0
MIN_CHILD_WEIGHT = 0.0
MIN_SAMPLES_LEAF = 1
MAX_BINS = 256
RELEVANT = (0, 1, 2)
GRID_N = (250, 500, 1000, 2000, 4000, 8000)
GRID_D = (25, 50, 100, 200, 400, 800, 1600)
QUICK_N = (250, 1000)
QUICK_D = (25, 100)
REPS = 50
QUICK_REPS = 5


def synthetic(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The paper's data: ``d`` uniform features, ``y = 2 x1 - 3 * 2**x2 + log2(1 + x3) +
    N(0, 1)`` (x1, x2, x3 = columns 0, 1, 2)."""
    X = rng.random((n, d))
    y = 2 * X[:, 0] - 3 * 2 ** X[:, 1] + np.log2(1 + X[:, 2]) + rng.standard_normal(n)
    return X, y


def recovery_rep(n: int, d: int, seed: int) -> dict[str, Any]:
    """One repetition: data, bins, tester, the root's candidates; success and timings."""
    rng = np.random.default_rng(seed)
    X, y = synthetic(n, d, rng)
    b = bin_data(X, MAX_BINS)
    t0 = time.perf_counter()
    gt = GroupTester(b.bins_t, b.n_bins, np.arange(d, dtype=np.int64), N_SELECT, DELTA, rng)
    t1 = time.perf_counter()
    gh = np.column_stack([y.mean() - y, np.ones(n)])
    idx = np.arange(n, dtype=np.int32)
    cand = gt.candidates(idx, 0, n, gh, LAMBDA, MIN_CHILD_WEIGHT, MIN_SAMPLES_LEAF)
    t2 = time.perf_counter()
    found = set(cand.tolist())
    return {
        "success": set(RELEVANT) <= found,
        "found": [f in found for f in RELEVANT],
        "n_candidates": len(found),
        "init_s": t1 - t0,
        "candidates_s": t2 - t1,
        "block": gt.block,
        "n_groups": gt.n_groups,
        "group_size": gt.group_size,
    }


def run_recovery(args: argparse.Namespace) -> dict[str, Any]:
    """The recovery grid; returns the result document (without the common header)."""
    grid_n = QUICK_N if args.quick else GRID_N
    grid_d = QUICK_D if args.quick else GRID_D
    reps = args.reps or (QUICK_REPS if args.quick else REPS)
    recovery_rep(200, 10, 0)  # compile (or load) the kernels outside the timed cells
    cells = []
    for n in grid_n:
        for d in grid_d:
            start = time.perf_counter()
            rows = [recovery_rep(n, d, _seed(args.seed, n, d, r)) for r in range(reps)]
            cell = {
                "n": n,
                "d": d,
                "reps": reps,
                "success_rate": float(np.mean([r["success"] for r in rows])),
                "found_rate": [float(v) for v in np.mean([r["found"] for r in rows], axis=0)],
                "mean_candidates": float(np.mean([r["n_candidates"] for r in rows])),
                "n_groups": rows[0]["n_groups"],
                "group_size": rows[0]["group_size"],
                "block": rows[0]["block"],
                "init_ms": 1e3 * float(np.mean([r["init_s"] for r in rows])),
                "candidates_ms": 1e3 * float(np.mean([r["candidates_s"] for r in rows])),
                "cell_s": time.perf_counter() - start,
            }
            cells.append(cell)
            print(
                f"n {n:>5} d {d:>5}: success {cell['success_rate']:.2f} "
                f"(x1 {cell['found_rate'][0]:.2f}, x2 {cell['found_rate'][1]:.2f}, "
                f"x3 {cell['found_rate'][2]:.2f}), {cell['mean_candidates']:.1f} candidates, "
                f"candidates() {cell['candidates_ms']:.2f} ms, cell {cell['cell_s']:.1f} s",
                flush=True,
            )
    table = _recovery_markdown(cells, grid_n, grid_d)
    print(table)
    return {
        "config": {
            "quick": args.quick,
            "seed": args.seed,
            "reps": reps,
            "grid_n": list(grid_n),
            "grid_d": list(grid_d),
            "n_select": N_SELECT,
            "delta": DELTA,
            "lambda": LAMBDA,
            "min_child_weight": MIN_CHILD_WEIGHT,
            "min_samples_leaf": MIN_SAMPLES_LEAF,
            "max_bins": MAX_BINS,
            "model": "y = 2 x1 - 3 * 2**x2 + log2(1 + x3) + N(0, 1), x ~ U[0, 1]^d",
            "gradients": "g = mean(y) - y, h = 1; root node = all rows",
            "success": "candidates contain x1, x2 and x3",
            "seeds": "np.random.SeedSequence([seed, n, d, rep]); one Generator per rep draws "
            "the data, then the subsets",
        },
        "cells": cells,
        "markdown": table,
    }


def _seed(seed: int, n: int, d: int, rep: int) -> int:
    return int(np.random.SeedSequence([seed, n, d, rep]).generate_state(1)[0])


def _recovery_markdown(cells: list[dict[str, Any]], grid_n, grid_d) -> str:
    rate = {(c["n"], c["d"]): c["success_rate"] for c in cells}
    lines = [
        "| n \\ d | " + " | ".join(str(d) for d in grid_d) + " |",
        "|---:|" + "---:|" * len(grid_d),
    ]
    for n in grid_n:
        lines.append(f"| {n} | " + " | ".join(f"{rate[n, d]:.2f}" for d in grid_d) + " |")
    return "\n".join(lines)


def recovery_figure(doc: dict[str, Any], path: Path) -> None:
    """Heat maps of the success rate and of the ``candidates`` time over the grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid_n, grid_d = doc["config"]["grid_n"], doc["config"]["grid_d"]
    at = {(c["n"], c["d"]): c for c in doc["cells"]}
    rate = np.array([[at[n, d]["success_rate"] for d in grid_d] for n in grid_n])
    ms = np.array([[at[n, d]["candidates_ms"] for d in grid_d] for n in grid_n])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    panels = [
        (rate, "Greys", (0.0, 1.0), "success rate (x1, x2, x3 all candidates)", "{:.2f}"),
        (ms, "Blues", (0.0, float(ms.max())), "candidates() at the root, ms", "{:.1f}"),
    ]
    for ax, (val, cmap, (lo, hi), title, fmt) in zip(axes, panels):
        im = ax.imshow(val, origin="lower", cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(len(grid_d)), [str(d) for d in grid_d])
        ax.set_yticks(range(len(grid_n)), [str(n) for n in grid_n])
        ax.set_xlabel("d (features)")
        ax.set_ylabel("n (rows)")
        ax.set_title(title, fontsize=10)
        for i in range(len(grid_n)):
            for j in range(len(grid_d)):
                dark = (val[i, j] - lo) / ((hi - lo) or 1.0) > 0.55
                ax.text(j, i, fmt.format(val[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")  # fmt: skip
        fig.colorbar(im, ax=ax, shrink=0.85)
    c = doc["config"]
    fig.suptitle(
        f"GT-GBM group testing at the root (s = {c['n_select']}, delta = {c['delta']}, "
        f"{c['reps']} reps per cell; Figure 1 of the paper)",
        fontsize=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


import feature_selecting_multitask as _multitask  # noqa: E402 (benchmarks/ is on sys.path)
import feature_selecting_scaling as _scaling  # noqa: E402

#: part name -> runner; the parts that draw a figure, and where
PARTS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "recovery": run_recovery,
    "scaling": _scaling.run,
    "multitask": _multitask.run,
}
FIGURES: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "recovery": recovery_figure,
    "scaling": _scaling.figure,
}
FIGURE_PATHS: dict[str, Path] = {"recovery": FIGURE, "scaling": _scaling.FIGURE}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=["all", *PARTS], default="all", help="part to run")
    p.add_argument("--quick", action="store_true", help="small grid, few repetitions")
    p.add_argument("--reps", type=int, default=None, help="repetitions per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    p.add_argument(
        "--figure-dir", type=Path, default=None, help="where figures go (default docs/img)"
    )
    p.add_argument("--no-figure", action="store_true")
    _scaling.add_arguments(p)
    _multitask.add_arguments(p)
    args = p.parse_args(argv)
    parts = list(PARTS) if args.part == "all" else [args.part]
    for part in parts:
        start = time.perf_counter()
        body = PARTS[part](args)
        elapsed = time.perf_counter() - start
        machine = machine_info(n_threads())
        doc = {
            "benchmark": f"feature_selecting_{part}",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python benchmarks/bench_feature_selecting.py"
            + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            "git_state": git_state(),
            "elapsed_s": elapsed,
            "machine": {
                k: machine.get(k)
                for k in ("cpu_model", "cpu_count", "threads", "loadavg_end", "platform")
            },
            "versions": {
                name: package_version(dist)
                for name, dist in (
                    ("treeinner", "treeinner"),
                    ("NumPy", "numpy"),
                    ("Numba", "numba"),
                    ("matplotlib", "matplotlib"),
                )
            }
            | {"Python": sys.version.split()[0]},
        } | body
        suffix = "_quick" if args.quick else ""
        out = args.output_dir / f"feature_selecting_{part}{suffix}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{part}: {elapsed:.0f} s; written {out}")
        draw = not args.no_figure and (not args.quick or args.figure_dir is not None)
        if draw and part in FIGURES:
            path = FIGURE_PATHS[part]
            if args.figure_dir is not None:
                path = args.figure_dir / path.name
            FIGURES[part](doc, path)
            print(f"{part}: figure {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
