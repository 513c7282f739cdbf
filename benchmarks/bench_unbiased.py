"""Benchmark treeinner's unbiased gain against XGBoost's own prediction.

``treeinner.unbiased_gain`` re-estimates every split's gain on held-out rows. Its cost is
measured against ``booster.inplace_predict(X, predict_type="margin")`` on the same rows, with
the same number of threads on both sides (targets of issue 18 on 100 000 held-out rows and 500
trees of depth 6: with ``n_draws=1`` at most 1.5x for the logistic model, at most 1.0x for the
squared-error one; the earlier target was 3x for both). Two models:

* (1) a ``binary:logistic`` classifier (label: target above the training median; 500 trees of
  depth 6, eta 0.1, hist), trained here once and then loaded from the model cache of
  ``bench_predict.py``. Its hessian is not constant, so the held-out rows are routed tree by
  tree and rows are drawn per split: ``unbiased_gain(n_draws=1, random_state=0)`` (the target),
  ``n_draws=5`` for information, and ``tree_inner`` and ``ens.predict_margin`` for context;
* (2) the cached squared-error regressor of ``bench_predict.py``: with a constant hessian and
  uniform weights ``unbiased_gain`` takes the exact expectation over draws (one staged pass,
  no draws).

Each time is the best of ``--repeats`` runs after an untimed warm-up (Numba compilation or
cache loading is excluded; the first call on 256 rows is reported separately). The calls are
timed in small groups that alternate within each repeat, each group with XGBoost (the target
call is paired with XGBoost alone); XGBoost's time is its best over all groups, so a quiet
spell during any group lowers the denominator (the conservative side). The median ratio over
all samples is reported too. Inline checks (the script fails if one does not hold):

* the same ``random_state`` gives identical results (the warm-up call against the last timed
  call, on all rows), and another seed gives different ones where rows are drawn; in exact
  mode the seed changes nothing;
* 1 thread gives the same per-split results as ``--threads`` (or 2) threads on a subsample
  (bit-identical where rows are drawn; exact mode sums per-thread partial sums, so there the
  gains agree to 1e-12 relative and the counts exactly);
* per split, ``k == min(n_left, n_right)``, ``n_node == n_left + n_right``, every tree's root
  sees all rows, and the per-split gains summed by feature equal the per-feature result.

Run from the repository root::

    python benchmarks/bench_unbiased.py                            # full size: 100k x 50, 500 trees
    python benchmarks/bench_unbiased.py --rows 10000 --trees 50    # quick run

Results are printed as a table and written to ``benchmarks/results/unbiased.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (model cache, data, timing helpers)

import treeinner  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "unbiased.json"
# target ratios to XGBoost's prediction (issue 18)
TARGETS = {"logistic": 1.5, "squared_error": 1.0}
SEED = 0  # random_state of the timed unbiased_gain calls
CHECK_ROWS = 5000


# ---------------------------------------------------------------------- data and models
def train_or_load_logistic(
    args: argparse.Namespace, X: np.ndarray, label: np.ndarray
) -> tuple[xgb.Booster, bool, float]:
    """The binary:logistic booster (trained on ``X``, ``label``) from the cache or trained."""
    key = {
        "objective": "binary:logistic",
        "label": "y > median(y)",
        "rows": args.rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "nan_fraction": args.nan_fraction,
        "seed": args.seed,
        "eta": bp.ETA,
        "xgboost": xgb.__version__,
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = (
        f"xgb_logistic_r{args.rows}_f{args.features}_t{args.trees}_d{args.depth}"
        f"_nan{args.nan_fraction:g}_s{args.seed}_{digest}.ubj"
    )
    path = bp.CACHE_DIR / name
    if path.exists() and not args.retrain:
        return xgb.Booster(model_file=str(path)), True, 0.0
    params = {
        "objective": "binary:logistic",
        "tree_method": "hist",
        "max_depth": args.depth,
        "eta": bp.ETA,
        "nthread": args.threads,
        "seed": args.seed,
    }
    print(f"training the binary:logistic model ({args.trees} trees) ...", flush=True)
    t0 = time.perf_counter()
    dtrain = xgb.DMatrix(X, label=label, nthread=args.threads)
    booster = xgb.train(params, dtrain, args.trees)
    elapsed = time.perf_counter() - t0
    bp.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.ubj")
    booster.save_model(str(tmp))
    os.replace(tmp, path)
    return booster, False, elapsed


def setup(args: argparse.Namespace) -> dict[str, Any]:
    """Both models (converted), the held-out rows and both label vectors."""
    Xtr, ytr = bp.make_data(args.rows, args.features, args.nan_fraction, args.seed)
    median = float(np.median(ytr))
    X64, y = bp.make_data(args.predict_rows, args.features, args.nan_fraction, args.seed + 1)
    X = np.ascontiguousarray(X64, dtype=np.dtype(args.dtype))
    models = {}
    for kind in ("logistic", "squared_error"):
        if kind == "logistic":
            booster, cached, train_s = train_or_load_logistic(
                args, Xtr, (ytr > median).astype(np.float64)
            )
            labels = (y > median).astype(np.float64)
        else:
            booster, cached, train_s = bp.train_or_load(args)
            labels = y
        booster.set_param({"nthread": args.threads})
        t0 = time.perf_counter()
        # a model loaded from a file has lost its training config: pass eta
        ens = treeinner.from_model(booster, learning_rate=bp.ETA)
        convert_s = time.perf_counter() - t0
        what = "loaded from cache" if cached else f"trained in {train_s:.1f} s"
        print(f"{kind} model: {args.trees} trees, depth {args.depth}, {what}", flush=True)
        models[kind] = {
            "booster": booster,
            "ens": ens,
            "y": labels,
            "cached": cached,
            "train_s": train_s,
            "from_model_s": convert_s,
        }
    return {"X": X, "median": median, "models": models}


# ---------------------------------------------------------------------- the timed calls
def make_calls(m: dict[str, Any], X: np.ndarray, y: np.ndarray, kind: str) -> dict[str, Any]:
    ens, booster = m["ens"], m["booster"]
    calls = {
        "unbiased_gain": lambda: treeinner.unbiased_gain(ens, X, y, n_draws=1, random_state=SEED),
        "xgb_margin": lambda: booster.inplace_predict(X, predict_type="margin"),
        "tree_inner": lambda: treeinner.tree_inner(ens, X, y, attribution="predecomp"),
        "predict_margin": lambda: ens.predict_margin(X),
    }
    if kind == "logistic":
        calls["unbiased_gain_d5"] = lambda: treeinner.unbiased_gain(
            ens, X, y, n_draws=5, random_state=SEED
        )
    return calls


CALL_TEXT = {
    "unbiased_gain": f"unbiased_gain(ens, X, y, n_draws=1, random_state={SEED})",
    "unbiased_gain_d5": f"unbiased_gain(ens, X, y, n_draws=5, random_state={SEED})",
    "tree_inner": 'tree_inner(ens, X, y, attribution="predecomp")',
    "predict_margin": "ens.predict_margin(X)",
    "xgb_margin": 'booster.inplace_predict(X, predict_type="margin")',
}

# (model, row label, treeinner call, target ratio or None for information)
COMPARISONS = [
    ("logistic", "unbiased_gain", "unbiased_gain", TARGETS["logistic"]),
    ("logistic", "unbiased_gain d5", "unbiased_gain_d5", None),
    ("logistic", "tree_inner", "tree_inner", None),
    ("logistic", "predict_margin", "predict_margin", None),
    ("squared_error", "unbiased_gain", "unbiased_gain", TARGETS["squared_error"]),
    ("squared_error", "tree_inner", "tree_inner", None),
    ("squared_error", "predict_margin", "predict_margin", None),
]
MODE = {"logistic": "drawn", "squared_error": "exact"}


# calls timed together (alternating within each repeat); the target call is paired with
# XGBoost alone, so that both get as many samples as close together as possible
GROUPS = {
    "logistic": [
        ("unbiased_gain", "xgb_margin"),
        ("unbiased_gain_d5", "xgb_margin"),
        ("tree_inner", "predict_margin", "xgb_margin"),
    ],
    "squared_error": [
        ("unbiased_gain", "xgb_margin"),
        ("tree_inner", "predict_margin", "xgb_margin"),
    ],
}


def _recorded(fn: Any, log: list[float]) -> Any:
    """``fn`` that also appends each call's wall time to ``log``."""

    def call():
        t0 = time.perf_counter()
        out = fn()
        log.append(time.perf_counter() - t0)
        return out

    return call


def time_model(m: dict[str, Any], X: np.ndarray, kind: str, repeats: int):
    """Per call: the best time over all groups (``bp.best_of`` per group, calls alternating),
    every sample, the last result and the full-size warm-up result; and the first-call times
    on 256 rows (the first treeinner call compiles the kernels or loads them from Numba's
    cache)."""
    y = m["y"]
    first = {}
    for name, fn in make_calls(m, X[:256], y[:256], kind).items():
        t0 = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t0
    calls = make_calls(m, X, y, kind)
    warm = {name: fn() for name, fn in calls.items()}  # untimed full-size warm-up
    samples: dict[str, list[float]] = {name: [] for name in calls}
    best: dict[str, float] = {}
    out: dict[str, Any] = {}
    for group in GROUPS[kind]:
        print(f"timing {kind}: {', '.join(group)} ...", flush=True)
        b, o = bp.best_of({n: _recorded(calls[n], samples[n]) for n in group}, repeats)
        for n in group:
            best[n] = min(best.get(n, float("inf")), b[n])
            out[n] = o[n]
    return best, samples, out, warm, first


# ---------------------------------------------------------------------- checks
def _frames_equal(a: pd.DataFrame, b: pd.DataFrame, rel: float) -> tuple[bool, float]:
    """Whether two per-split frames agree (integer columns exactly, gains to ``rel`` of the
    largest |gain|), and the largest relative gain difference."""
    for col in ("tree", "node", "k", "n_node", "n_left", "n_right"):
        if not np.array_equal(a[col].to_numpy(), b[col].to_numpy()):
            return False, float("inf")
    ua, ub = a["unbiased_gain"].to_numpy(), b["unbiased_gain"].to_numpy()
    scale = max(float(np.max(np.abs(ua), initial=0.0)), 1e-300)
    d = float(np.max(np.abs(ua - ub), initial=0.0)) / scale
    return d <= rel, d


def check_split_frame(frame: pd.DataFrame, series: pd.Series, n_rows: int, what: str) -> dict:
    k = frame["k"].to_numpy()
    nl, nr, nn = (frame[c].to_numpy() for c in ("n_left", "n_right", "n_node"))
    bad = int(np.sum(k != np.minimum(nl, nr)))
    assert bad == 0, f"[{what}] k != min(n_left, n_right) in {bad} of {k.size} splits"
    bad = int(np.sum(nn != nl + nr))
    assert bad == 0, f"[{what}] n_node != n_left + n_right in {bad} of {k.size} splits"
    roots = frame["node"].to_numpy() == 0
    assert np.all(nn[roots] == n_rows), f"[{what}] a tree's root does not see all {n_rows} rows"
    by_feature = frame.groupby("feature")["unbiased_gain"].sum()
    by_feature = by_feature.reindex(series.index, fill_value=0.0).to_numpy()
    want = series.to_numpy()
    rel = float(np.max(np.abs(by_feature - want)) / max(np.max(np.abs(want)), 1e-300))
    assert rel <= 1e-9, f"[{what}] per-split gains summed by feature != result (rel {rel:.3g})"
    return {
        "splits": int(k.size),
        "k_equals_min_children": True,
        "splits_below_min_samples": int(np.sum(k < 1)),
        "per_split_sum_vs_per_feature_rel": rel,
    }


def run_checks(state: dict[str, Any], res: dict, warm: dict, args) -> dict[str, Any]:
    X = state["X"]
    n = X.shape[0]
    checks: dict[str, Any] = {}
    for kind, m in state["models"].items():
        ens, y = m["ens"], m["y"]
        c: dict[str, Any] = {"mode": MODE[kind]}
        # the same random_state gives identical results (warm-up call vs last timed call)
        names = ["unbiased_gain"] + (["unbiased_gain_d5"] if kind == "logistic" else [])
        for name in names:
            same = np.array_equal(warm[kind][name].to_numpy(), res[kind][name].to_numpy())
            assert same, f"[{kind}] {name}: two calls with random_state={SEED} differ"
            c[f"{name}_same_seed_identical"] = True
        other = treeinner.unbiased_gain(ens, X, y, n_draws=1, random_state=SEED + 1)
        differs = not np.array_equal(other.to_numpy(), res[kind]["unbiased_gain"].to_numpy())
        if kind == "logistic":
            assert differs, f"[{kind}] random_state {SEED} and {SEED + 1} give the same result"
        else:
            assert not differs, f"[{kind}] exact mode depends on random_state"
        c["other_seed_differs"] = differs
        # per-split consistency on all rows
        frame = treeinner.unbiased_gain(ens, X, y, n_draws=1, random_state=SEED, per_split=True)
        c.update(check_split_frame(frame, res[kind]["unbiased_gain"], n, kind))
        # 1 thread against several on a subsample
        s = min(CHECK_ROWS, n)
        many = args.threads if args.threads > 1 else min(2, numba.config.NUMBA_NUM_THREADS)
        Xs, ys = X[:s], y[:s]
        out = {}
        for t in (1, many):
            numba.set_num_threads(t)
            out[t] = [
                treeinner.unbiased_gain(ens, Xs, ys, n_draws=d, random_state=SEED, per_split=True)
                for d in (1, 5)
            ]
        numba.set_num_threads(args.threads)
        rel = 0.0 if MODE[kind] == "drawn" else 1e-12
        for d, a, b in zip((1, 5), out[1], out[many]):
            ok, diff = _frames_equal(a, b, rel)
            assert ok, (
                f"[{kind}] n_draws={d}: per-split results with 1 and {many} threads differ "
                f"(max rel gain diff {diff:.3g}, allowed {rel:g}) on {s} rows"
            )
            c[f"threads_1_vs_{many}_n_draws{d}_max_rel"] = diff
        c["threads_check_rows"] = s
        checks[kind] = c
    return checks


# ---------------------------------------------------------------------- report
def print_table(config, machine, rows, checks) -> None:
    print(
        f"\ntreeinner unbiased-gain benchmark: {config['predict_rows']} held-out rows x "
        f"{config['features']} features ({config['dtype']}), {config['trees']} trees of depth "
        f"{config['depth']}, {config['threads']} threads on both sides, best of "
        f"{config['repeats']}"
    )
    print(
        f"machine: {machine['cpu_model']}, cpu_count {machine['cpu_count']} "
        f"(affinity {machine['cpu_affinity']}), numba threading layer "
        f"{machine['numba_threading_layer']}, load average start {config['loadavg_start']} "
        f"end {machine['loadavg_end']}"
    )
    print(
        f"versions: python {machine['python']}, numpy {machine['numpy']}, numba "
        f"{machine['numba']}, xgboost {machine['xgboost']}, treeinner {machine['treeinner']}"
    )
    header = (
        f"{'model':<14} {'operation':<17} {'treeinner [s]':>13} {'xgboost [s]':>12} "
        f"{'ratio':>6} {'median ratio':>12} {'target':>7}"
    )
    print("\n" + header)
    print("-" * len(header))
    for r in rows:
        tgt = f"<= {r['target']:g}" if r["target"] is not None else "info"
        line = (
            f"{r['model']:<14} {r['operation']:<17} {r['treeinner_s']:>13.4f} "
            f"{r['xgboost_s']:>12.4f} {r['ratio']:>6.2f} {r['median_ratio']:>12.2f} {tgt:>7}"
        )
        if r["target"] is not None:
            line += "  ok" if r["meets_target"] else "  MISSED"
        print(line)
    print(
        "\nratio = best treeinner / best xgboost, xgboost = "
        f"{CALL_TEXT['xgb_margin']} on the same model and rows (lower is better); median "
        "ratio = the same with the median of all samples (xgboost: all groups)."
    )
    print("unbiased_gain = " + CALL_TEXT["unbiased_gain"] + " (the targets);")
    print("unbiased_gain d5 = " + CALL_TEXT["unbiased_gain_d5"] + ".")
    print(
        "logistic: rows drawn per split; squared_error: exact expectation (no draws). "
        "The calls get the converted TreeEnsemble (from_model time not included)."
    )
    lg, sq = checks["logistic"], checks["squared_error"]
    thr = [k for k in lg if k.startswith("threads_1_vs_")]
    thr_sq = [k for k in sq if k.startswith("threads_1_vs_")]
    print(
        f"checks: same random_state identical (n_draws 1 and 5), another seed differs "
        f"(logistic) / changes nothing (exact); k == min(n_left, n_right) in all "
        f"{lg['splits']} + {sq['splits']} splits; per-split sums = per-feature result "
        f"(rel {lg['per_split_sum_vs_per_feature_rel']:.2g} / "
        f"{sq['per_split_sum_vs_per_feature_rel']:.2g}); 1 vs "
        f"{thr[0].split('_')[3]} threads on {lg['threads_check_rows']} rows: logistic max rel "
        f"diff {max(lg[k] for k in thr):.2g}, squared_error {max(sq[k] for k in thr_sq):.2g}"
    )


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="training rows (default 100000)")
    p.add_argument("--predict-rows", type=int, default=None, help="held-out rows (default: --rows)")
    p.add_argument("--features", type=int, default=50, help="features (default 50)")
    p.add_argument("--trees", type=int, default=500, help="boosting rounds (default 500)")
    p.add_argument("--depth", type=int, default=6, help="max_depth (default 6)")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="threads for both libraries (default os.cpu_count())",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs, best kept (default 5)")
    p.add_argument("--nan-fraction", type=float, default=0.0, help="fraction of entries set to NaN")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="input dtype")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retrain", action="store_true", help="ignore the cached models")
    p.add_argument("--output", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})")
    args = p.parse_args(argv)
    if args.predict_rows is None:
        args.predict_rows = args.rows
    if args.predict_rows < 256:
        p.error("--predict-rows must be at least 256")
    if not 1 <= args.threads <= numba.config.NUMBA_NUM_THREADS:
        p.error(f"--threads must be in [1, {numba.config.NUMBA_NUM_THREADS}] (NUMBA_NUM_THREADS)")
    if not 0.0 <= args.nan_fraction < 1.0:
        p.error("--nan-fraction must be in [0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numba.set_num_threads(args.threads)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    state = setup(args)
    X = state["X"]

    times, samples, res, warm, first = {}, {}, {}, {}, {}
    for kind, m in state["models"].items():
        times[kind], samples[kind], res[kind], warm[kind], first[kind] = time_model(
            m, X, kind, args.repeats
        )

    print("checking results ...", flush=True)
    checks = run_checks(state, res, warm, args)

    rows = []
    for kind, op, name, target in COMPARISONS:
        t_ti, t_xgb = times[kind][name], times[kind]["xgb_margin"]
        ratio = t_ti / t_xgb
        med_ti = float(np.median(samples[kind][name]))
        med_xgb = float(np.median(samples[kind]["xgb_margin"]))
        rows.append(
            {
                "model": kind,
                "objective": "binary:logistic" if kind == "logistic" else "reg:squarederror",
                "mode": MODE[kind] if name.startswith("unbiased") else None,
                "operation": op,
                "treeinner_call": CALL_TEXT[name],
                "xgboost_call": CALL_TEXT["xgb_margin"],
                "treeinner_s": t_ti,
                "xgboost_s": t_xgb,
                "ratio": ratio,
                "treeinner_median_s": med_ti,
                "xgboost_median_s": med_xgb,
                "median_ratio": med_ti / med_xgb,
                "treeinner_samples_s": samples[kind][name],
                "xgboost_samples_s": samples[kind]["xgb_margin"],
                "target": target,
                "meets_target": None if target is None else bool(ratio <= target),
                "treeinner_first_call_256_rows_s": first[kind][name],
            }
        )

    models = state["models"]
    config = {
        "rows": args.rows,
        "predict_rows": args.predict_rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "eta": bp.ETA,
        "n_nodes": {k: int(m["ens"].n_nodes) for k, m in models.items()},
        "nan_fraction": args.nan_fraction,
        "dtype": args.dtype,
        "threads": args.threads,
        "repeats": args.repeats,
        "seed": args.seed,
        "random_state": SEED,
        "logistic_label": f"y > {state['median']!r} (median of the training target)",
        "models_cached": {k: m["cached"] for k, m in models.items()},
        "train_s": {k: m["train_s"] for k, m in models.items()},
        "from_model_s": {k: m["from_model_s"] for k, m in models.items()},
        "model_cache": str(bp.CACHE_DIR),
        "timer": (
            "time.perf_counter; calls timed in groups (see GROUPS), alternating within each "
            "of --repeats rounds; XGBoost runs in every group and its best (and median) is over "
            "all its samples"
        ),
        "loadavg_start": load_start,
        "git": bp.git_state(),
    }
    machine = bp.machine_info(args.threads)
    print_table(config, machine, rows, checks)
    passed = all(r["meets_target"] for r in rows if r["target"] is not None)
    what = ", ".join(f"{k} <= {v:g}" for k, v in TARGETS.items())
    print(f"\ntargets (ratio {what}): {'hold' if passed else 'MISSED'}")

    args.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "unbiased",
        "config": config,
        "machine": machine,
        "results": rows,
        "target_ratio": TARGETS,
        "target_met": passed,
        "checks": checks,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    args.output.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
