"""Do treeinner's one-pass standard errors mean what they say? (issue 15)

Four studies, each on the simulated data of Sun (2022) (Section 4.1; ``simulation.simulate``):
50 independent discrete features, feature j uniform on {0, ..., j}, 5 relevant ones, a
classification and a regression task.

1. **Coverage.** A model is trained once on 1,000 rows (the paper's Table 1 parameters, as
   ``simulation.train``) and held fixed. The value each method estimates is computed on
   1,000,000 fresh rows from the same law: for the sums over rows (TreeInner, ForestInner) the
   sum scaled to 1,000 rows, for the unbiased gain (ratios of held-out sums) the value itself.
   Then, 500 times, a validation set of 1,000 fresh rows gives a score and a 95% interval
   (``treeinner.significance``); reported is the share of repetitions whose interval covers
   the population value, per feature (the features the model uses), and the ratio of the mean
   standard error to the standard deviation of the scores over repetitions.
2. **Against the bootstrap.** On the first validation sets, the one-pass standard error
   against a 1,000-replicate bootstrap of the validation rows
   (``treeinner.importance(..., n_bootstrap=1000)``).
3. **Under the null.** Labels independent of every feature. (a) The boundary of the null: a
   model of one boosting round whose base margin is the labels' population value (regression
   y ~ N(0, 1) with base score 0; classification y ~ Bernoulli(1/2) with base score 1/2), so
   every feature's expected held-out score is exactly 0: the one-sided p-values must be
   uniform (two-sided Kolmogorov-Smirnov test, pooled over data sets and used features;
   10,000 data sets, as they are cheap, the KS test also over the first 200 alone).
   (b) The model of Table 1 (400 rounds) fitted to the independent labels: the expected
   held-out scores are <= 0 (an overfit feature hurts), so the p-values must not be smaller
   than uniform (one-sided KS test). In both, the false discovery proportion of the
   Benjamini-Hochberg rule at alpha = 0.1 (every discovery is false) averaged over data sets
   must be at most alpha. The unbiased gain's p-values are taken under the shipped Student t
   reference (Welch-Satterthwaite degrees of freedom per feature) and, from the same scores
   and standard errors, under the normal reference (and the normal with at least 5 held-out
   rows per child, ``min_samples=5``), side by side: the shares of p <= 0.05, 0.01 and 0.001
   and the false discovery proportion with its Monte Carlo standard error.
4. **Power of the unbiased gain's references.** The boundary design with a signal (5 of the
   50 features relevant; one boosting round; 2,000 data sets per task, ``power_study``): the
   share of relevant features the Benjamini-Hochberg rule at 0.1 discovers under the Welch t
   and under the normal (run with the null studies).

Run from the repository root::

    python benchmarks/bench_coverage.py            # full: 500 repetitions, 1,000,000 rows
                                                   # (the two tasks in parallel, ~1 h)
    python benchmarks/bench_coverage.py --quick    # 60 repetitions, 100,000 rows, 40 null sets
    python benchmarks/bench_coverage.py --null-only   # the null studies anew (~10 min), the
                                                      # coverage study kept from the results
    python benchmarks/bench_coverage.py --null-only --jobs 1   # the same in one process (~20 min)
    python benchmarks/bench_coverage.py --null-only --boundary-sets 20000  # more boundary sets
    python benchmarks/bench_coverage.py --replot benchmarks/results/coverage.json  # page only

Writes ``benchmarks/results/coverage.json`` and ``docs/coverage.md`` (``--quick``: its JSON to
the temporary directory only).
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
import xgboost as xgb

import treeinner
from treeinner import _stats
from treeinner.unbiased import _unbiased_estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (shared benchmark helpers)
import simulation as sim  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "coverage.json"
DOCS = ROOT / "docs" / "coverage.md"
RESULTS_CENTRED = ROOT / "benchmarks" / "results" / "coverage_centred.json"
METHODS = ("tree_inner", "tree_inner_shap", "forest_inner", "unbiased_gain")
SUMS = {"tree_inner", "tree_inner_shap", "forest_inner"}  # scale with the number of rows
LABELS = {
    "tree_inner": "TreeInner (PreDecomp)",
    "tree_inner_shap": "TreeInner (TreeSHAP)",
    "forest_inner": "ForestInner (PreDecomp)",
    "unbiased_gain": "unbiased gain",
}
# the unbiased gain's p-values under references other than the shipped one (null studies only)
ALTERNATIVES = ("unbiased_gain_normal", "unbiased_gain_min5_normal")
NULL_METHODS = (*METHODS, *ALTERNATIVES)
NULL_LABELS = {
    **LABELS,
    "unbiased_gain": "unbiased gain (Welch t, shipped)",
    "unbiased_gain_normal": "unbiased gain, normal reference",
    "unbiased_gain_min5_normal": "unbiased gain, normal, min 5 rows per child",
}
ALPHA_FDR = 0.1
LEVELS = (0.05, 0.01, 0.001)
#: the reference distribution of the unbiased gain's p-values and intervals in treeinner
REFERENCE = "Welch-Satterthwaite t"


def train(X: np.ndarray, y: np.ndarray, task: str, seed: int, rounds: int, base: float):
    params = {
        "objective": "binary:logistic" if task == "classification" else "reg:squarederror",
        **sim.PARAMS,
        **sim.LEGACY,
        "base_score": base,
        "seed": seed,
        "nthread": 1,
    }
    return xgb.train(params, xgb.DMatrix(X, label=y, nthread=1), rounds)


def totals(ens: treeinner.TreeEnsemble, X, y, seed: int) -> dict[str, np.ndarray]:
    frame = treeinner.importance(ens, X, y, methods=list(METHODS), random_state=seed)
    return {m: frame[m].to_numpy() for m in METHODS}


def population(ens, task, relevant, n_pop, n_valid, seed) -> dict[str, np.ndarray]:
    """The values a validation set of ``n_valid`` rows estimates, from ``n_pop`` fresh rows."""
    rng = np.random.default_rng([seed, 1])
    X, y, _, _ = sim.simulate(rng, task, "variance", n=n_pop, relevant=relevant)
    values = totals(ens, X, y, seed)
    return {m: v * (n_valid / n_pop) if m in SUMS else v for m, v in values.items()}


def coverage_study(task: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, 0])
    X, y, relevant, _ = sim.simulate(rng, task, "variance", n=sim.N_TRAIN)
    ens = treeinner.from_model(train(X, y, task, args.seed, sim.NUM_BOOST_ROUND, 0.5))
    t0 = time.perf_counter()
    truth = population(ens, task, relevant, args.n_pop, args.n_valid, args.seed)
    t_pop = time.perf_counter() - t0
    scores = {m: [] for m in METHODS}
    ses = {m: [] for m in METHODS}
    boot = {m: [] for m in METHODS}
    onepass = {m: [] for m in METHODS}
    z = scipy.stats.norm.ppf(0.975)
    t0 = time.perf_counter()
    for rep in range(args.reps):
        Xv, yv, _, _ = sim.simulate(
            np.random.default_rng([args.seed, 2, rep]), task, "variance", args.n_valid, relevant
        )
        frame = treeinner.importance(ens, Xv, yv, methods=list(METHODS), se=True, random_state=rep)
        for m in METHODS:
            scores[m].append(frame[m].to_numpy())
            ses[m].append(frame[f"{m}_se"].to_numpy())
        if rep < args.boot_sets:
            b = treeinner.importance(
                ens, Xv, yv, methods=list(METHODS), n_bootstrap=args.boot, random_state=rep
            )
            for m in METHODS:
                boot[m].append(b[f"{m}_se"].to_numpy())
                onepass[m].append(frame[f"{m}_se"].to_numpy())
    t_reps = time.perf_counter() - t0
    out: dict[str, Any] = {"relevant": relevant.tolist(), "seconds_population": t_pop,
                           "seconds_repetitions": t_reps, "methods": {}}  # fmt: skip
    for m in METHODS:
        S, E = np.array(scores[m]), np.array(ses[m])
        used = np.flatnonzero(np.any(E > 0, axis=0))
        covered = np.abs(S - truth[m]) <= z * E
        cov = covered[:, used].mean(axis=0)
        sd = S[:, used].std(axis=0, ddof=1)
        ratio = E[:, used].mean(axis=0) / sd
        boot_se, one_se = np.array(boot[m]), np.array(onepass[m])
        keep = boot_se > 0.05 * np.nanmax(boot_se)  # standard errors worth comparing
        rel = one_se[keep] / boot_se[keep] if keep.any() else np.array([np.nan])
        c = float(cov.mean())
        out["methods"][m] = {
            "features": [int(j) for j in used],
            "coverage": cov.tolist(),
            "coverage_mean": c,
            "coverage_pooled_se": float(np.sqrt(c * (1 - c) / covered[:, used].size)),
            "se_over_sd": ratio.tolist(),
            "se_over_sd_median": float(np.median(ratio)),
            "onepass_over_bootstrap": rel.tolist(),
            "onepass_over_bootstrap_median": float(np.median(rel)),
            "onepass_over_bootstrap_max_dev": float(np.max(np.abs(rel - 1.0))),
        }  # fmt: skip
    return out


def _alternatives(ens, X, y, t, rep: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The unbiased gain's p-values and the features tested under the other references:
    the normal from the table's own scores and standard errors, and the normal with
    ``min_samples=5`` (a split whose smaller child has fewer than 5 held-out rows scores 0)."""
    u = t[t.method == "unbiased_gain"]
    score, se = u.score.to_numpy(), u.se.to_numpy()
    out = {"unbiased_gain_normal": (_stats.p_values(score, se), ~((score == 0) & (se == 0)))}
    est = _unbiased_estimate(ens, X, y, min_samples=5, random_state=rep)
    s5, e5 = est.score.sum(axis=1), est.se_total
    out["unbiased_gain_min5_normal"] = (_stats.p_values(s5, e5), ~((s5 == 0) & (e5 == 0)))
    return out


def null_data(
    task: str, rounds: int, rep: int, args: argparse.Namespace
) -> tuple[treeinner.TreeEnsemble, np.ndarray, np.ndarray]:
    """Data set ``rep`` of the null studies: the model of ``rounds`` rounds trained on 1,000
    rows with labels independent of every feature, and its ``args.n_valid`` held-out rows."""
    rng = np.random.default_rng([args.seed, 3, rounds, rep])
    n = sim.N_TRAIN + args.n_valid
    X = rng.integers(0, np.arange(2, sim.N_FEATURES + 2), size=(n, sim.N_FEATURES))
    X = X.astype(np.float64)
    y = (rng.random(n) < 0.5).astype(np.float64) if task == "classification" else (
        rng.normal(size=n))  # fmt: skip
    base = 0.5 if task == "classification" else 0.0
    ens = treeinner.from_model(train(X[: sim.N_TRAIN], y[: sim.N_TRAIN], task, rep, rounds, base))
    return ens, X[sim.N_TRAIN :], y[sim.N_TRAIN :]


def null_study(task: str, rounds: int, args: argparse.Namespace) -> dict[str, Any]:
    """p-values of used features over data sets with labels independent of X."""
    pvals: dict[str, list[float]] = {m: [] for m in NULL_METHODS}
    fdp: dict[str, list[float]] = {m: [] for m in NULL_METHODS}
    n_sets = args.boundary_sets if rounds == 1 else args.null_sets
    n_first: dict[str, int] = {}  # p-values of the first args.null_sets data sets
    t0 = time.perf_counter()
    for rep in range(n_sets):
        ens, Xv, yv = null_data(task, rounds, rep, args)
        table = treeinner.significance(ens, Xv, yv, methods=list(METHODS), random_state=rep)
        for m in METHODS:
            t = table[table.method == m]
            used = ~((t.score == 0) & (t.se == 0))
            pvals[m].extend(t.p_value[used].tolist())
            kept = t.q_value <= ALPHA_FDR
            fdp[m].append(1.0 if kept.any() else 0.0)  # every feature is null
        for m, (p, used) in _alternatives(ens, Xv, yv, table, rep).items():
            pvals[m].extend(p[used].tolist())
            fdp[m].append(1.0 if (_stats.bh_qvalues(p, used) <= ALPHA_FDR).any() else 0.0)
        if rep + 1 == args.null_sets:
            n_first = {m: len(pvals[m]) for m in NULL_METHODS}
    seconds = time.perf_counter() - t0
    out: dict[str, Any] = {}
    alternative = "two-sided" if rounds == 1 else "greater"  # greater: p below uniform
    for m in NULL_METHODS:
        p = np.array(pvals[m])
        ks = scipy.stats.kstest(p, "uniform", alternative=alternative)
        first = p[: n_first[m]] if n_first else p
        ks_first = scipy.stats.kstest(first, "uniform", alternative=alternative)
        out[m] = {
            "n_sets": n_sets,
            "n_pvalues": int(p.size),
            "ks_statistic": float(ks.statistic),
            "ks_pvalue": float(ks.pvalue),
            "ks_first_sets": min(n_sets, args.null_sets),
            "ks_first_pvalue": float(ks_first.pvalue),
            "ks_alternative": alternative,
            "share_below_0.001": float(np.mean(p <= 0.001)),
            "share_below_0.01": float(np.mean(p <= 0.01)),
            "share_below_0.05": float(np.mean(p <= 0.05)),
            "share_below_0.1": float(np.mean(p <= 0.1)),
            "mean_fdp": float(np.mean(fdp[m])),
            "mean_fdp_se": float(np.std(fdp[m], ddof=1) / np.sqrt(len(fdp[m]))),
        }
    out["seconds"] = seconds
    return out


def power_study(task: str, args: argparse.Namespace) -> dict[str, Any]:
    """What the unbiased gain's t reference costs in power, in the boundary study's design
    with a signal: per data set, the 50 features of the null studies, 5 relevant ones drawn
    from the first 10, s = sum_{j relevant} X_j / j; regression y = s + N(0, (2 sd(s))^2),
    classification P(y = 1) = logistic(2 (s - 5/2)); one boosting round (base score the
    training labels' mean) on 1,000 rows, scored on 1,000 fresh ones. Reported: the share of
    (data set, relevant feature) pairs the Benjamini-Hochberg rule at ``ALPHA_FDR`` discovers,
    and the mean false discovery proportion (discoveries among the 45 others), per
    reference. (The coverage study's 400-round model has no power to show: its unbiased gain
    is below 0 for the relevant features too, ``docs/unbiased_gain.md``.)"""
    found: dict[str, list[float]] = {m: [] for m in ("unbiased_gain", "unbiased_gain_normal")}
    fdp: dict[str, list[float]] = {m: [] for m in found}
    j = np.arange(1, sim.N_FEATURES + 1)
    n = sim.N_TRAIN + args.n_valid
    t0 = time.perf_counter()
    for rep in range(args.power_sets):
        rng = np.random.default_rng([args.seed, 5, rep])
        X = rng.integers(0, j + 1, size=(n, sim.N_FEATURES)).astype(np.float64)
        relevant = np.sort(rng.choice(sim.RELEVANT_FROM, size=sim.N_RELEVANT, replace=False))
        signal = (X[:, relevant] / j[relevant]).sum(axis=1)
        if task == "classification":
            y = (rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * (signal - 2.5)))).astype(float)
        else:
            sd = np.sqrt(np.sum((j[relevant] + 2) / (12.0 * j[relevant])))  # sd of s
            y = signal + rng.normal(0.0, 2.0 * sd, size=n)
        tr = slice(0, sim.N_TRAIN)
        ens = treeinner.from_model(train(X[tr], y[tr], task, rep, 1, float(y[tr].mean())))
        Xv, yv = X[sim.N_TRAIN :], y[sim.N_TRAIN :]
        est = _unbiased_estimate(ens, Xv, yv, random_state=rep)
        score, se = est.score.sum(axis=1), est.se_total
        tested = ~((score == 0) & (se == 0))
        for m, df in (("unbiased_gain", est.df_total), ("unbiased_gain_normal", None)):
            kept = _stats.bh_qvalues(_stats.p_values(score, se, df), tested) <= ALPHA_FDR
            found[m].extend(kept[relevant].tolist())
            fdp[m].append(np.delete(kept, relevant).sum() / max(1, kept.sum()))
    return {
        "n_sets": args.power_sets,
        "seconds": time.perf_counter() - t0,
        **{
            m: {
                "power": float(np.mean(found[m])),
                "power_se": float(np.std(found[m], ddof=1) / np.sqrt(len(found[m]))),
                "mean_fdp": float(np.mean(fdp[m])),
                "mean_fdp_se": float(np.std(fdp[m], ddof=1) / np.sqrt(len(fdp[m]))),
            }
            for m in found
        },
    }


def run_nulls(task: str, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "null_boundary": null_study(task, 1, args),
        "null_overfit": null_study(task, sim.NUM_BOOST_ROUND, args),
        "power": power_study(task, args),
    }


def run_task(task: str, args: argparse.Namespace) -> dict[str, Any]:
    return {"coverage": coverage_study(task, args), **run_nulls(task, args)}


def _one_thread() -> None:
    numba.set_num_threads(1)  # one task per core


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run, not written to docs/")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default=",".join(sim.TASKS))
    ap.add_argument("--replot", metavar="JSON", help="rewrite docs/coverage.md from a results file")
    ap.add_argument(
        "--null-only",
        action="store_true",
        help="rerun the two null studies only, into the coverage study of the results file",
    )
    ap.add_argument(
        "--boundary-sets",
        type=int,
        default=None,
        help="data sets of the boundary null study per task (default 10,000; --quick 200)",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes (default one per task; 1: the tasks one after the other, in "
        "this process)",
    )
    args = ap.parse_args(argv)
    args.reps = 60 if args.quick else 500
    args.n_pop = 100_000 if args.quick else 1_000_000
    args.n_valid = sim.N_VALID
    args.boot_sets = 1 if args.quick else 2
    args.boot = 200 if args.quick else 1000
    args.null_sets = 40 if args.quick else 200
    if args.boundary_sets is None:
        args.boundary_sets = 200 if args.quick else 10_000  # one round each: cheap
    args.power_sets = 40 if args.quick else 2000
    return args


def report(results: dict[str, Any]) -> list[str]:
    lines = []
    for task, r in results["tasks"].items():
        lines.append(f"\n{task}")
        for m in METHODS:
            c = r["coverage"]["methods"][m]
            lines.append(
                f"  {m:16s} coverage {c['coverage_mean']:.3f} "
                f"(per feature {min(c['coverage']):.3f}-{max(c['coverage']):.3f}), "
                f"se/sd {c['se_over_sd_median']:.3f}, one-pass/bootstrap "
                f"{c['onepass_over_bootstrap_median']:.3f} "
                f"(max dev {c['onepass_over_bootstrap_max_dev']:.3f})"
            )
        for kind in ("null_boundary", "null_overfit"):
            for m in NULL_METHODS:
                if m not in r[kind]:
                    continue
                n = r[kind][m]
                lines.append(
                    f"  {kind:14s} {m:26s} KS p {_ks_first(n):.3f} (first "
                    f"{n.get('ks_first_sets', n.get('n_sets', '?'))} sets), "
                    f"{n['ks_pvalue']:.3f} (all, {n['ks_alternative']}), "
                    f"P(p<=.05) {n['share_below_0.05']:.4f}, "
                    f"P(p<=.01) {n.get('share_below_0.01', float('nan')):.4f}, "
                    f"P(p<=.001) {n.get('share_below_0.001', float('nan')):.5f}, "
                    f"mean FDP {n['mean_fdp']:.4f}"
                    f" ± {n.get('mean_fdp_se', float('nan')):.4f} over {n['n_pvalues']} p-values"
                )
        if "power" in r:
            pw = r["power"]
            lines.append(
                f"  power (unbiased gain, BH {ALPHA_FDR}, {pw['n_sets']} sets): Welch t "
                f"{pw['unbiased_gain']['power']:.3f}, "
                f"normal {pw['unbiased_gain_normal']['power']:.3f}"
            )
    return lines


def _ks_first(n: dict[str, Any]) -> float:
    """The KS p-value over the p-values of the first ``null_sets`` data sets."""
    return n.get("ks_first_pvalue", n["ks_pvalue"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        write_docs(json.loads(Path(args.replot).read_text()))
        return 0
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "command": "python benchmarks/bench_coverage.py" + (" --quick" if args.quick else ""),
        "config": {k: v for k, v in vars(args).items()},
        "machine": bp.machine_info(1),
        "git": bp.git_state(),
        "unbiased_reference": REFERENCE,
        "tasks": {},
    }
    tasks = args.tasks.split(",")
    if args.null_only:  # the coverage study of the last full run, the null studies anew
        earlier = json.loads(RESULTS.read_text())
        results["tasks"] = earlier["tasks"]
        # the provenance of the coverage study kept: an earlier null-only run holds its source's
        source = earlier.get("coverage_run", earlier)
        results["coverage_run"] = {k: source[k] for k in ("git", "seconds")}
        # the reference of the unbiased gain's intervals in the coverage study kept
        results["coverage_run"]["unbiased_reference"] = source.get("unbiased_reference", "normal")
        results["command"] = earlier["command"]
        argv_used = sys.argv[1:] if argv is None else argv
        results["null_command"] = " ".join(["python benchmarks/bench_coverage.py", *argv_used])
    run = run_nulls if args.null_only else run_task
    jobs = len(tasks) if args.jobs is None else max(1, args.jobs)
    if jobs == 1:  # one process: the tasks one after the other
        _one_thread()
        for task in tasks:
            results["tasks"].setdefault(task, {}).update(run(task, args))
            print("\n".join(report({"tasks": {task: results["tasks"][task]}})), flush=True)
    else:
        with ProcessPoolExecutor(min(jobs, len(tasks)), initializer=_one_thread) as pool:
            futures = {task: pool.submit(run, task, args) for task in tasks}
            for task in tasks:
                results["tasks"].setdefault(task, {}).update(futures[task].result())
                print("\n".join(report({"tasks": {task: results["tasks"][task]}})), flush=True)
    results["seconds"] = time.perf_counter() - t0
    path = Path(tempfile.gettempdir()) / "treeinner_coverage_quick.json" if args.quick else RESULTS
    path.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {path} ({results['seconds']:.0f} s)")
    if not args.quick:
        write_docs(results)
    return 0


def reading(results: dict[str, Any]) -> list[str]:
    """Issue 15's checks, each said as met or not from the numbers."""
    out = []
    for task, r in results["tasks"].items():
        cov = r["coverage"]["methods"]
        low = [m for m in METHODS if not 0.93 <= cov[m]["coverage_mean"] <= 0.97]
        far = [LABELS[m] for m in METHODS if abs(cov[m]["onepass_over_bootstrap_median"] - 1) > 0.1]
        wide = [LABELS[m] for m in METHODS if cov[m]["onepass_over_bootstrap_max_dev"] > 0.1]
        ks = [
            f"{k}/{m}"
            for k in ("null_boundary", "null_overfit")
            for m in METHODS
            if _ks_first(r[k][m]) < 0.05
        ]
        fdp = [
            f"{LABELS[m]} ({k.removeprefix('null_')}: {r[k][m]['mean_fdp']:.3f})"
            for k in ("null_boundary", "null_overfit")
            for m in METHODS
            if r[k][m]["mean_fdp"] - 2 * r[k][m].get("mean_fdp_se", 0.0) > ALPHA_FDR
        ]
        ratio = {m: cov[m]["se_over_sd"] for m in METHODS}
        ks_all = [
            LABELS[m]
            for m in METHODS
            if m != "unbiased_gain" and r["null_boundary"][m]["ks_pvalue"] < 0.05
        ]
        ub = r["null_boundary"]["unbiased_gain"]
        out.append(
            f"* {task}: mean coverage in [0.93, 0.97] for "
            + ("every method" if not low else f"all but {', '.join(low)}")
            + "; one-pass standard error within 10% of the bootstrap's (median over features) for "
            + ("every method" if not far else f"all but {', '.join(far)}")
            + (
                f" (feature by feature within 10% too, except for {', '.join(wide)}, where the "
                "ratio of the one-pass standard error to the standard deviation over the "
                "repetitions, the yardstick a standard error must match, is "
                + ", ".join(
                    f"{min(ratio[m]):.2f}-{max(ratio[m]):.2f} ({LABELS[m]})"
                    for m in METHODS
                    if LABELS[m] in wide
                )
                + " for every feature: there the bootstrap of a ratio of small held-out node "
                "sums is off, not the one-pass error)"
                if wide
                else " (and feature by feature)"
            )
            + f"; Kolmogorov-Smirnov over the first {results['config']['null_sets']} data sets "
            + ("rejects nowhere" if not ks else f"rejects for {', '.join(ks)}")
            + " (5%; over all boundary sets it "
            + (
                "rejects nowhere"
                if not ks_all
                else f"rejects for {', '.join(ks_all)}: the normal approximation's error on "
                "1,000 rows, visible with that many p-values"
            )
            + (
                "; for the unbiased gain, whose t reference is conservative at the boundary "
                f"(share p <= 0.05 {ub['share_below_0.05']:.3f}), "
                + ("it rejects" if ub["ks_pvalue"] < 0.05 else "it does not reject")
                if "share_below_0.001" in ub
                else ""
            )
            + "); mean false discovery proportion at most 0.1 (within 2 s.e. of its "
            "Monte Carlo error) " + ("everywhere." if not fdp else f"except {', '.join(fdp)}.")
        )
        out.append(_reading_reference(task, r))
    return [line for line in out if line]


def _reading_reference(task: str, r: dict[str, Any]) -> str:
    """The unbiased gain's references compared at the boundary, where the null holds
    exactly."""
    n = r["null_boundary"]
    if not all(m in n for m in ALTERNATIVES):
        return ""

    def fdp(m: str) -> str:
        return f"{n[m]['mean_fdp']:.3f} ± {n[m]['mean_fdp_se']:.3f}"

    def ok(m: str) -> str:
        if n[m]["mean_fdp"] - 2 * n[m]["mean_fdp_se"] <= ALPHA_FDR:
            return f"at most {ALPHA_FDR} within 2 s.e."
        return f"above {ALPHA_FDR} by more than 2 s.e."

    t, z = n["unbiased_gain"], n["unbiased_gain_normal"]
    return (
        f"* {task}, the unbiased gain's reference at the boundary ({t['n_sets']:,} data sets): "
        f"Benjamini-Hochberg FDP at {ALPHA_FDR} {fdp('unbiased_gain')} with the shipped "
        f"Welch t ({ok('unbiased_gain')}), {fdp('unbiased_gain_normal')} with the normal "
        f"({ok('unbiased_gain_normal')}), "
        f"{fdp('unbiased_gain_min5_normal')} with the normal and at least 5 held-out rows per "
        f"child; share of p <= 0.001 {t['share_below_0.001']:.5f} (t) against "
        f"{z['share_below_0.001']:.5f} (normal), nominal 0.001."
    )


def _provenance(results: dict[str, Any], m: dict[str, Any]) -> list[str]:
    cpu = m.get("cpu_model") or "this machine"
    cov = results.get("coverage_run", results)
    line = (
        f"Generated by `{results['command']}` (commit {cov['git']}), "
        f"{cov['seconds'] / 60:.1f} min on {cpu} (the two tasks in parallel, one thread each)"
    )
    if "coverage_run" in results:
        jobs = results["config"].get("jobs")
        line += (
            f"; the null studies by `{results['null_command']}` (commit {results['git']}), "
            f"{results['seconds'] / 60:.1f} min" + (" in one process" if jobs == 1 else "")
        )
    line += "."
    ref = results.get("coverage_run", results).get("unbiased_reference", "normal")
    if ref != results.get("unbiased_reference", "normal"):
        line += (
            f" The coverage study was run when the unbiased gain's intervals were {ref} "
            f"ones; they are {results['unbiased_reference']} intervals now (somewhat wider)."
        )
    return [line]


def _reference_section(results: dict[str, Any]) -> list[str]:
    """The unbiased gain's references side by side at the null boundary."""
    rows = []
    for task, r in results["tasks"].items():
        n = r["null_boundary"]
        if not all(m in n for m in ALTERNATIVES):
            continue
        for meth in ("unbiased_gain", *ALTERNATIVES):
            v = n[meth]
            rates = " | ".join(
                f"{v[f'share_below_{a}']:.{4 if a <= 0.01 else 3}f} "
                f"± {np.sqrt(a * (1 - a) / v['n_pvalues']):.{4 if a <= 0.01 else 3}f}"
                for a in LEVELS
            )
            rows.append(
                f"| {task} | {NULL_LABELS[meth]} | {v['n_sets']:,} | {v['n_pvalues']:,} "
                f"| {v['mean_fdp']:.3f} ± {v['mean_fdp_se']:.3f} | {rates} |"
            )
    if not rows:
        return []
    power = []
    for task, r in results["tasks"].items():
        if "power" not in r:
            continue
        pw = r["power"]
        power.append(
            f"| {task} | {pw['n_sets']} | "
            + " | ".join(
                f"{pw[m]['power']:.3f} ± {pw[m]['power_se']:.3f} "
                f"| {pw[m]['mean_fdp']:.3f} ± {pw[m]['mean_fdp_se']:.3f}"
                for m in ("unbiased_gain", "unbiased_gain_normal")
            )
            + " |"
        )
    if power:
        power = [
            "",
            "What the t costs in power: the boundary design with a signal (per data set 5 of "
            "the 50 features relevant, s = sum of X_j / j over them; regression "
            "y = s + N(0, (2 sd(s))^2), classification P(y = 1) = logistic(2 (s - 5/2)); "
            "one boosting round on 1,000 rows, scored on 1,000 fresh ones). Power: the share "
            f"of (data set, relevant feature) pairs Benjamini-Hochberg at {ALPHA_FDR} "
            "discovers (a tree of depth 4 does not split on every relevant feature, so it "
            "stays below 1); FDP: the mean false discovery proportion among the other "
            "features.",
            "",
            "| task | data sets | power (Welch t) | FDP (Welch t) | power (normal) "
            "| FDP (normal) |",
            "|---|---:|---:|---:|---:|---:|",
            *power,
        ]
    return [
        "",
        "## The unbiased gain's reference distribution",
        "",
        "At the boundary of the null every expected score is 0, so a reference that holds its "
        "level rejects at rate alpha at every level, and Benjamini-Hochberg's false discovery "
        f"proportion at {ALPHA_FDR} (here the chance of any discovery) is at most {ALPHA_FDR}. "
        "The unbiased gain's variance is dominated by the splits with few held-out rows in a "
        "child, where a ratio of held-out sums is far from normal; the normal reference is "
        "anti-conservative in the far tail. treeinner uses Student's t with, per feature, the "
        "Welch-Satterthwaite degrees of freedom "
        "`(sum_s V_s)^2 / sum_s [V_s^2 / max(k_s - 1, 1)]` over the feature's splits s "
        "(V_s the split's sampling variance, k_s its smaller child's held-out rows). The "
        "shares of p-values are pooled over data sets and used features; ± is the binomial "
        "standard error at the nominal rate, as if the p-values were independent (features of "
        "one data set are not quite).",
        "",
        "| task | reference | data sets | p-values | mean FDP | share p <= 0.05 "
        "| share p <= 0.01 | share p <= 0.001 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        *power,
    ]


def _centred_section() -> list[str]:
    """The default method's section, from ``bench_coverage_centred.py``'s results file (none
    if it has not been run)."""
    if not RESULTS_CENTRED.exists():
        return []
    res = json.loads(RESULTS_CENTRED.read_text())
    cfg = res["config"]
    return [
        "",
        "## The default method: the centred initial form",
        "",
        "`forest_inner_initial` (and its TreeSHAP variant), what `significance()` tests by "
        "default, in the same designs (`benchmarks/bench_coverage_centred.py`; "
        f"`{res['command']}`, commit {res['git']}, {res['seconds'] / 60:.1f} min, the two tasks "
        f"in parallel): coverage of 95% intervals over {cfg['reps']} validation sets of the "
        f"400-round model against the value on {cfg['n_pop']:,} fresh rows (mean over the "
        "features the model uses, ± its binomial s.e., and the smallest per feature); the "
        f"overfit null ({cfg['null_sets']} data sets) and the boundary null "
        f"({cfg['boundary_sets']}). The centred score of a feature the labels do not depend "
        "on has expected value exactly 0 in both nulls, overfit or not, so its p-values must "
        "be uniform in both (two-sided KS test) and the mean FDP of Benjamini-Hochberg at 0.1 "
        "at most 0.1.",
        "",
        res["markdown"],
    ]


def write_docs(results: dict[str, Any]) -> None:
    """docs/coverage.md: every number from the results."""
    cfg = results["config"]
    m = results["machine"]
    lines = [
        "# Coverage of the standard errors",
        "",
        "Do the one-pass standard errors of `treeinner.significance` mean what they say? "
        "Four studies on the simulated data of Sun (2022) (Section 4.1): 50 independent "
        "discrete features, 5 of them relevant, a classification and a regression task. "
        "What each study does is in the docstring of `benchmarks/bench_coverage.py`.",
        "",
        *_provenance(results, m),
        "",
        "## Coverage and the bootstrap",
        "",
        f"One model per task (the paper's Table 1 parameters, 1,000 training rows) held "
        f"fixed; the population value from {cfg['n_pop']:,} fresh rows; {cfg['reps']} "
        f"validation sets of {cfg['n_valid']:,} rows, each giving a 95% interval. Coverage: "
        "the share of repetitions whose interval holds the population value, averaged over "
        "the features the model uses (and its range over those features). se / sd: the mean "
        "standard error over the standard deviation of the scores across repetitions (median "
        f"over features). One-pass / bootstrap: against a {cfg['boot']}-replicate bootstrap "
        f"of the rows, on {cfg['boot_sets']} validation sets (median, and the largest "
        "deviation, over features whose bootstrap error is at least 5% of the largest).",
        "",
        "| task | method | coverage | per feature | se / sd | one-pass / bootstrap | "
        "largest deviation |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for task, r in results["tasks"].items():
        for meth in METHODS:
            c = r["coverage"]["methods"][meth]
            lines.append(
                f"| {task} | {LABELS[meth]} | {c['coverage_mean']:.3f} "
                f"| {min(c['coverage']):.2f}-{max(c['coverage']):.2f} "
                f"| {c['se_over_sd_median']:.3f} | {c['onepass_over_bootstrap_median']:.3f} "
                f"| {c['onepass_over_bootstrap_max_dev']:.1%} |"
            )
    lines += [
        "",
        "## Under the null",
        "",
        "Data sets with labels independent of every feature. *Boundary* "
        f"({cfg.get('boundary_sets', cfg['null_sets'])} data sets per task): one boosting "
        "round with the base margin at the labels' population value, so every expected "
        "held-out score is exactly 0 and the one-sided p-values must be uniform (two-sided "
        "Kolmogorov-Smirnov test over the p-values of the used features, pooled). *Overfit* "
        f"({cfg['null_sets']} data sets per task): the 400 rounds of Table 1 fitted to the "
        "independent labels; the expected held-out scores are at most 0, so the p-values must "
        "not be smaller than uniform (one-sided KS test). KS p: over the p-values of the first "
        f"{cfg['null_sets']} data sets, and over all of them (tens of thousands of p-values: "
        "enough to see how far from normal a sum of 1,000 rows still is, in the last digit of "
        "a tail rate). Mean FDP: the average over data sets of the share of false discoveries "
        f"among the features kept at q <= {ALPHA_FDR} (all are false here, so it is the "
        "chance of keeping any), ± its Monte Carlo standard error; Benjamini-Hochberg bounds "
        f"it by {ALPHA_FDR} for independent or positively dependent p-values.",
        "",
        "The unbiased gain is listed under its shipped reference, Student's t with "
        "Welch-Satterthwaite degrees of freedom per feature (`docs/unbiased_gain.md`), and, "
        "from the same scores and standard errors, under the normal reference, and the normal "
        "with splits whose smaller child has under 5 held-out rows scored 0 (`min_samples=5`).",
        "",
        "| task | null | method | data sets | p-values | KS p (first) | KS p (all) "
        "| share p <= 0.001 | share p <= 0.01 | share p <= 0.05 | mean FDP |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for task, r in results["tasks"].items():
        for kind, label in (("null_boundary", "boundary"), ("null_overfit", "overfit")):
            for meth in NULL_METHODS:
                if meth not in r[kind]:
                    continue
                n = r[kind][meth]
                lines.append(
                    f"| {task} | {label} | {NULL_LABELS[meth]} "
                    f"| {n.get('n_sets', cfg['null_sets'])} "
                    f"| {n['n_pvalues']} | {_ks_first(n):.3f} | {n['ks_pvalue']:.3f} "
                    f"| {n.get('share_below_0.001', float('nan')):.5f} "
                    f"| {n.get('share_below_0.01', float('nan')):.4f} "
                    f"| {n['share_below_0.05']:.3f} "
                    f"| {n['mean_fdp']:.3f} ± {n.get('mean_fdp_se', float('nan')):.3f} |"
                )
    lines += _reference_section(results)
    lines += _centred_section()
    lines += ["", "## Reading", ""]
    lines += reading(results)
    lines += ["", "## Raw report", "", "```text", *report(results), "```", ""]
    DOCS.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
