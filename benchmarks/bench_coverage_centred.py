"""Coverage and null calibration of the recommended score, ForestInner's centred initial form.

``bench_coverage.py``'s designs (Sun 2022, Section 4.1: 50 independent discrete features,
5 relevant; a classification and a regression task), for ``forest_inner_initial`` and
``forest_inner_initial_shap``, the methods ``significance()`` tests by default:

1. **Coverage.** The model of the paper's Table 1 (400 rounds), trained once on 1,000 rows
   and held fixed; the value a validation set of 1,000 rows estimates from 1,000,000 fresh
   rows (the score scaled to 1,000 rows); 500 validation sets of 1,000 fresh rows, each with
   its 95% interval. Reported: the share of intervals covering the population value (mean
   over the features the model uses, and the smallest per feature) and the ratio of the mean
   standard error to the scores' standard deviation over the validation sets.
2. **Null, overfit.** The same 400-round model fitted to labels independent of every
   feature, 200 data sets: the centred score's expected value is exactly 0 for every feature
   (its part of the predictions is unrelated to new labels), so the one-sided p-values of
   the features the model uses must be uniform (two-sided Kolmogorov-Smirnov test), and the
   Benjamini-Hochberg rule at 0.1, all of whose discoveries are false, must have a mean false
   discovery proportion at most 0.1.
3. **Null, boundary.** One boosting round from the labels' population value, 2,000 data
   sets: the same checks.

    python benchmarks/bench_coverage_centred.py           # full, the two tasks in parallel
    python benchmarks/bench_coverage_centred.py --quick   # 40 validation sets, 100,000 rows

Writes ``benchmarks/results/coverage_centred.json`` (``--quick``: the temporary directory) and
prints a Markdown table; a full run writes ``docs/coverage.md`` anew with its section.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numba
import numpy as np
import scipy.stats

import treeinner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_coverage as bc  # noqa: E402  (the training and simulation of the coverage study)
import bench_predict as bp  # noqa: E402  (shared benchmark helpers)
import simulation as sim  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "coverage_centred.json"
METHODS = ("forest_inner_initial", "forest_inner_initial_shap")
ALPHA_FDR = 0.1


def _table(ens: Any, X: np.ndarray, y: np.ndarray) -> Any:
    return treeinner.significance(ens, X, y, methods=list(METHODS))


def coverage_study(task: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, 0])
    X, y, relevant, _ = sim.simulate(rng, task, "variance", n=sim.N_TRAIN)
    ens = treeinner.from_model(bc.train(X, y, task, args.seed, sim.NUM_BOOST_ROUND, 0.5))
    t0 = time.perf_counter()
    Xp, yp, _, _ = sim.simulate(
        np.random.default_rng([args.seed, 1]), task, "variance", args.n_pop, relevant
    )
    pop = _table(ens, Xp, yp)
    truth = {m: pop[pop.method == m].score.to_numpy() * (args.n_valid / args.n_pop)
             for m in METHODS}  # fmt: skip
    scores: dict[str, list] = {m: [] for m in METHODS}
    ses: dict[str, list] = {m: [] for m in METHODS}
    z = scipy.stats.norm.ppf(0.975)
    for rep in range(args.reps):
        Xv, yv, _, _ = sim.simulate(
            np.random.default_rng([args.seed, 2, rep]), task, "variance", args.n_valid, relevant
        )
        t = _table(ens, Xv, yv)
        for m in METHODS:
            scores[m].append(t[t.method == m].score.to_numpy())
            ses[m].append(t[t.method == m].se.to_numpy())
    out: dict[str, Any] = {"relevant": relevant.tolist(), "seconds": time.perf_counter() - t0}
    for m in METHODS:
        S, E = np.array(scores[m]), np.array(ses[m])
        used = np.flatnonzero(np.any(E > 0, axis=0))
        covered = np.abs(S - truth[m]) <= z * E
        cov = covered[:, used].mean(axis=0)
        ratio = E[:, used].mean(axis=0) / S[:, used].std(axis=0, ddof=1)
        c = float(cov.mean())
        out[m] = {
            "features": [int(j) for j in used],
            "coverage": cov.tolist(),
            "coverage_mean": c,
            "coverage_pooled_se": float(np.sqrt(c * (1 - c) / covered[:, used].size)),
            "coverage_min": float(cov.min()),
            "se_over_sd": ratio.tolist(),
            "se_over_sd_median": float(np.median(ratio)),
            "population_irrelevant_z": [
                float(truth[m][j] / np.mean(E[:, j])) for j in used if j not in set(relevant)
            ],
        }
    return out


def null_study(task: str, rounds: int, n_sets: int, args: argparse.Namespace) -> dict[str, Any]:
    """p-values of the used features over data sets with labels independent of X."""
    pvals: dict[str, list[float]] = {m: [] for m in METHODS}
    fdp: dict[str, list[float]] = {m: [] for m in METHODS}
    t0 = time.perf_counter()
    for rep in range(n_sets):
        table = _table(*bc.null_data(task, rounds, rep, args))
        for m in METHODS:
            t = table[table.method == m]
            used = ~((t.score == 0) & (t.se == 0))
            pvals[m].extend(t.p_value[used].tolist())
            fdp[m].append(1.0 if (t.q_value <= ALPHA_FDR).any() else 0.0)  # all are null
    out: dict[str, Any] = {"n_sets": n_sets, "seconds": time.perf_counter() - t0}
    for m in METHODS:
        p = np.array(pvals[m])
        ks = scipy.stats.kstest(p, "uniform")
        out[m] = {
            "n_pvalues": int(p.size),
            "ks_pvalue": float(ks.pvalue),
            "share_below_0.01": float(np.mean(p <= 0.01)),
            "share_below_0.05": float(np.mean(p <= 0.05)),
            "share_below_0.1": float(np.mean(p <= 0.1)),
            "mean_fdp": float(np.mean(fdp[m])),
            "mean_fdp_se": float(np.std(fdp[m], ddof=1) / np.sqrt(len(fdp[m]))),
        }
    return out


def run_task(task: str, args: argparse.Namespace) -> dict[str, Any]:
    numba.set_num_threads(1)  # one task per core
    return {
        "coverage": coverage_study(task, args),
        "null_overfit": null_study(task, sim.NUM_BOOST_ROUND, args.null_sets, args),
        "null_boundary": null_study(task, 1, args.boundary_sets, args),
    }


def markdown(results: dict[str, Any]) -> str:
    head = (
        "| task | method | coverage of 95% intervals (min per feature) | se / sd | "
        "overfit null: P(p <= 0.05), KS p, FDP at 0.1 | boundary null: P(p <= 0.05), KS p, "
        "FDP at 0.1 |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|"]
    for task, r in results["tasks"].items():
        for m in METHODS:
            c, o, b = r["coverage"][m], r["null_overfit"][m], r["null_boundary"][m]
            lines.append(
                f"| {task} | `{m}` | {c['coverage_mean']:.3f} ± {c['coverage_pooled_se']:.3f} "
                f"({c['coverage_min']:.3f}) | {c['se_over_sd_median']:.2f} | "
                f"{o['share_below_0.05']:.3f}, {o['ks_pvalue']:.2f}, "
                f"{o['mean_fdp']:.3f} ± {o['mean_fdp_se']:.3f} | "
                f"{b['share_below_0.05']:.3f}, {b['ks_pvalue']:.2f}, "
                f"{b['mean_fdp']:.3f} ± {b['mean_fdp_se']:.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run, to the temporary dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default=",".join(sim.TASKS))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (1: in this one)")
    args = ap.parse_args(argv)
    args.reps = 40 if args.quick else 500
    args.n_pop = 100_000 if args.quick else 1_000_000
    args.n_valid = sim.N_VALID
    args.null_sets = 20 if args.quick else 200
    args.boundary_sets = 100 if args.quick else 2000
    tasks = args.tasks.split(",")
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "command": "python benchmarks/bench_coverage_centred.py"
        + (" --quick" if args.quick else ""),
        "config": vars(args),
        "machine": bp.machine_info(1),
        "git": bp.git_state(),
        "tasks": {},
    }
    if args.jobs == 1:
        for task in tasks:
            results["tasks"][task] = run_task(task, args)
    else:
        with ProcessPoolExecutor(min(args.jobs, len(tasks))) as pool:
            futures = {task: pool.submit(run_task, task, args) for task in tasks}
            for task in tasks:
                results["tasks"][task] = futures[task].result()
    results["seconds"] = time.perf_counter() - t0
    results["markdown"] = markdown(results)
    path = Path(tempfile.gettempdir()) / "coverage_centred_quick.json" if args.quick else RESULTS
    path.write_text(json.dumps(results, indent=1))
    print(results["markdown"])
    print(f"\nwrote {path} ({results['seconds']:.0f} s)")
    if not args.quick:  # docs/coverage.md quotes this file: written anew with it
        bc.write_docs(json.loads(bc.RESULTS.read_text()))
        print(f"wrote {bc.DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
