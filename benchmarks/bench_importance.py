"""Benchmark treeinner's attributions and importances against XGBoost's own prediction.

Loads (or trains) the same cached XGBoost regressor as ``bench_predict.py``, converts it with
``treeinner.from_model`` and times, with the same number of threads on both sides:

* (a) ``treeinner.tree_inner(ens, X, y, attribution="predecomp")`` against
  ``booster.inplace_predict(X, predict_type="margin")`` (target: ratio <= 1.0; TreeInner is one
  staged prediction pass plus per-leaf gradient sums);
* (b) ``treeinner.predecomp(ens, X)`` (dense per-row attributions) against
  ``booster.predict(dm, pred_contribs=True, approx_contribs=True)`` with the DMatrix built
  outside the timed call (target: ratio <= 0.5), and with ``DMatrix(X)`` inside it;
* (c) ``forest_inner`` against the same ``inplace_predict`` (target: ratio <= 1.0; one staged
  pass, like TreeInner, with per-leaf sums of each row's summed gradient);
* (d) for information: ``saabas`` (the same quantity as XGBoost's ``approx_contribs``) and
  ``ens.predict_margin(X)``, the routing-only lower bound of (a).

Each time is the best of ``--repeats`` runs after a warm-up call; the calls of one comparison
alternate within each repeat. Peak memory of every call is measured in a fresh subprocess per
call (peak RSS above the RSS before the call, and the tracemalloc peak; ``--no-memory`` skips
it), and the results are checked inline:

* PreDecomp local accuracy: ``values.sum(1) + bias`` against XGBoost's margin on all rows
  (float32 tolerance), and against a float64 margin from the model dump on a subsample;
* Saabas against ``approx_contribs`` to 1e-5;
* the sums over features of TreeInner and ForestInner against a NumPy reference built from
  XGBoost's ``pred_leaf`` and the JSON dump (staged squared-error gradients) on a subsample
  (squared-error models only: the benchmark's model is one);
* the total-gain identity (TreeInner on the training rows = ``total_gain``).

Run from the repository root::

    python benchmarks/bench_importance.py                          # full size: 100k x 50, 500 trees
    python benchmarks/bench_importance.py --rows 10000 --trees 50   # quick run

Results are printed as a table and written to ``benchmarks/results/importance.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numba
import numpy as np
import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (model cache, data, timing helpers)

import treeinner  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "importance.json"
TARGETS = {"tree_inner": 1.0, "forest_inner": 1.0, "predecomp": 0.5}
CHECK_ROWS = 2000
# glibc: serve every allocation of 64 KiB or more with mmap and unmap it on free, so that the
# RSS rises and falls with the arrays a call allocates (no dynamic threshold, no heap slack)
MEMORY_ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


# ---------------------------------------------------------------------- the timed calls
def make_calls(
    ens: treeinner.TreeEnsemble,
    booster: xgb.Booster,
    X: np.ndarray,
    y: np.ndarray,
    dm: xgb.DMatrix,
    threads: int,
) -> dict[str, Any]:
    """Every call the benchmark times or measures, by name (shared with the memory child)."""
    return {
        "tree_inner": lambda: treeinner.tree_inner(ens, X, y, attribution="predecomp"),
        "forest_inner": lambda: treeinner.forest_inner(ens, X, y, attribution="predecomp"),
        "predecomp": lambda: treeinner.predecomp(ens, X),
        "saabas": lambda: treeinner.saabas(ens, X),
        "predict_margin": lambda: ens.predict_margin(X),
        "xgb_margin": lambda: booster.inplace_predict(X, predict_type="margin"),
        "xgb_approx_prebuilt": lambda: booster.predict(
            dm, pred_contribs=True, approx_contribs=True
        ),
        "xgb_approx": lambda: booster.predict(
            xgb.DMatrix(X, nthread=threads), pred_contribs=True, approx_contribs=True
        ),
    }


CALL_TEXT = {
    "tree_inner": 'tree_inner(ens, X, y, attribution="predecomp")',
    "forest_inner": 'forest_inner(ens, X, y, attribution="predecomp")',
    "predecomp": "predecomp(ens, X)",
    "saabas": "saabas(ens, X)",
    "predict_margin": "ens.predict_margin(X)",
    "xgb_margin": 'inplace_predict(X, predict_type="margin")',
    "xgb_approx_prebuilt": "predict(dm, pred_contribs=True, approx_contribs=True)",
    "xgb_approx": "predict(DMatrix(X), pred_contribs=True, approx_contribs=True)",
}

# (operation, treeinner call, xgboost call, target ratio or None for information)
COMPARISONS = [
    ("tree_inner", "tree_inner", "xgb_margin", TARGETS["tree_inner"]),
    ("predecomp*", "predecomp", "xgb_approx_prebuilt", TARGETS["predecomp"]),
    ("predecomp", "predecomp", "xgb_approx", None),
    ("saabas*", "saabas", "xgb_approx_prebuilt", None),
    ("forest_inner", "forest_inner", "xgb_margin", TARGETS["forest_inner"]),
    ("predict_margin", "predict_margin", "xgb_margin", None),
]
# calls timed together (alternating within each repeat)
GROUPS = [
    ("tree_inner", "xgb_margin", "predict_margin"),
    ("predecomp", "xgb_approx_prebuilt", "saabas", "xgb_approx"),
    ("forest_inner", "xgb_margin"),
]


def setup(args: argparse.Namespace):
    """Model, ensemble, data and prebuilt DMatrix, with ``args.threads`` threads everywhere."""
    numba.set_num_threads(args.threads)
    booster, cached, train_s = bp.train_or_load(args)
    booster.set_param({"nthread": args.threads})
    t0 = time.perf_counter()
    # a model loaded from a file has lost its training config: pass eta (importance needs it)
    ens = treeinner.from_model(booster, learning_rate=bp.ETA)
    convert_s = time.perf_counter() - t0
    X64, y = bp.make_data(args.predict_rows, args.features, args.nan_fraction, args.seed + 1)
    X = np.ascontiguousarray(X64, dtype=np.dtype(args.dtype))
    dm = xgb.DMatrix(X, nthread=args.threads)
    return booster, cached, train_s, ens, convert_s, X, y, dm


def warm_up(calls_small: dict[str, Any]) -> dict[str, float]:
    """Call everything once on a few rows; the treeinner times include Numba's first load."""
    first = {}
    for name, fn in calls_small.items():
        t0 = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t0
    return first


# ---------------------------------------------------------------------- memory
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    """Reset the peak RSS (VmHWM) of this process (Linux >= 4.0, /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _malloc_trim() -> None:
    """Return the heap's free pages to the OS (glibc), so the baseline RSS holds no slack."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def memory_child(args: argparse.Namespace) -> int:
    """In a fresh process: set up, warm up on a few rows, then measure one call's peak memory."""
    name = args.measure
    booster, _, _, ens, _, X, y, dm = setup(args)
    small = make_calls(ens, booster, X[:256], y[:256], dm.slice(np.arange(256)), args.threads)
    small[name]()
    full = make_calls(ens, booster, X, y, dm, args.threads)[name]
    gc.collect()
    _malloc_trim()
    rss0 = _status_kb("VmRSS")
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm_reset = _reset_hwm()
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = full()
    _, tm_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    hwm = _status_kb("VmHWM")
    maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if hwm_reset and hwm is not None and rss0 is not None:
        rss_peak, method = (hwm - rss0) * 1024, "VmHWM reset via /proc/self/clear_refs"
    elif maxrss1 > maxrss0 and rss0 is not None:
        rss_peak, method = (maxrss1 - rss0) * 1024, "ru_maxrss - VmRSS before"
    else:
        rss_peak, method = None, "ru_maxrss did not rise above the set-up peak"
    result_bytes = int(getattr(getattr(out, "values", out), "nbytes", 0))
    print(
        json.dumps(
            {
                "call": name,
                "rss_peak_delta_bytes": rss_peak,
                "rss_method": method,
                "tracemalloc_peak_bytes": tm_peak,
                "result_bytes": result_bytes,
                "rss_before_bytes": None if rss0 is None else rss0 * 1024,
            }
        )
    )
    return 0


def measure_memory(args: argparse.Namespace, names: list[str]) -> dict[str, dict]:
    """Peak memory of each call, each in a fresh subprocess (the model is cached by now)."""
    base = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--rows",
        str(args.rows),
        "--predict-rows",
        str(args.predict_rows),
        "--features",
        str(args.features),
        "--trees",
        str(args.trees),
        "--depth",
        str(args.depth),
        "--threads",
        str(args.threads),
        "--nan-fraction",
        str(args.nan_fraction),
        "--dtype",
        args.dtype,
        "--seed",
        str(args.seed),
    ]
    out = {}
    for name in names:
        print(f"  memory: {name} ...", end="", flush=True)
        proc = subprocess.run(
            base + ["--measure", name], capture_output=True, text=True, env=MEMORY_ENV
        )
        if proc.returncode != 0:
            raise RuntimeError(f"memory child for {name} failed:\n{proc.stderr}")
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        mb = out[name]["rss_peak_delta_bytes"]
        print(f" {mb / 2**20:.1f} MB" if mb is not None else " n/a", flush=True)
    return out


# ---------------------------------------------------------------------- checks
def _dump_leaf_values(booster: xgb.Booster) -> list[dict[int, float]]:
    """Leaf id -> leaf value (the stored float32, as float64) of every tree, from the dump."""
    trees = []
    for text in booster.get_dump(dump_format="json"):
        leaves: dict[int, float] = {}
        stack = [json.loads(text)]
        while stack:
            node = stack.pop()
            if "leaf" in node:
                # the dump prints float32 leaves in decimal: round back to the stored float32
                leaves[node["nodeid"]] = float(np.float32(node["leaf"]))
            else:
                stack.extend(node["children"])
        trees.append(leaves)
    return trees


def reference_sums(ens, booster, X, y, threads) -> dict[str, float]:
    """Sums over features of TreeInner and ForestInner (PreDecomp) from XGBoost's own routing.

    Per tree m, sum_k r_{m,k}(x) = f_m(x) - p_m(root) (local accuracy), so
    sum_k TreeInner(k) = sum_m (1/lr) sum_i (f_m(x_i) - p_m(root)) (y_i - F_{m-1}(x_i)) and
    sum_k ForestInner(k) = (1/lr) sum_i [sum_m (f_m(x_i) - p_m(root))] [sum_m (y_i - F_{m-1})]
    for squared error, with f_m from pred_leaf and the dump. The staged margins F_{m-1} are
    carried in float32 in tree order where the ensemble says XGBoost does (``float32_sum``: its
    prediction cache is float32), as treeinner does; otherwise in float64.
    """
    leaves = booster.predict(xgb.DMatrix(X, nthread=threads), pred_leaf=True).astype(np.int64)
    values = _dump_leaf_values(booster)
    f = np.empty(leaves.shape, dtype=np.float64)
    for m, table in enumerate(values):
        ids = np.array(sorted(table))
        vals = np.array([table[i] for i in ids])
        f[:, m] = vals[np.searchsorted(ids, leaves[:, m])]
    base = float(ens.base_margin[0])
    if ens.float32_sum:
        F_before = np.empty_like(f)
        acc = np.full(f.shape[0], base, dtype=np.float32)
        for m in range(f.shape[1]):
            F_before[:, m] = acc
            acc = acc + f[:, m].astype(np.float32)
    else:
        F_before = base + np.cumsum(f, axis=1) - f  # margin before tree m
    neg_g = y[:, None] - F_before
    root = treeinner.node_values(ens)[ens.tree_offsets[:-1]]
    r = f - root[None, :]
    lr = ens.learning_rate
    return {
        "margin64": base + f.sum(axis=1),  # local accuracy check: float64 sum
        "tree_inner_sum": float(((r * neg_g).sum(axis=0) / lr).sum()),
        "forest_inner_sum": float((r.sum(axis=1) * neg_g.sum(axis=1)).sum() / lr.mean()),
    }


def run_checks(ens, booster, X, y, res: dict[str, Any], args) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    # PreDecomp local accuracy on all rows against XGBoost's float32 margin
    attr = res["predecomp"]
    total = attr.values.sum(axis=1) + attr.bias[0]
    margin = np.asarray(res["xgb_margin"], dtype=np.float64)
    d = float(np.max(np.abs(total - margin)))
    checks["predecomp_vs_xgb_margin_max_abs"] = d
    assert d <= 1e-4, f"PreDecomp local accuracy: max |sum + bias - margin| = {d:.3g} > 1e-4"
    # Saabas against approx_contribs
    contrib = np.asarray(res["xgb_approx_prebuilt"], dtype=np.float64)
    sa = res["saabas"]
    dv = float(np.max(np.abs(sa.values - contrib[:, :-1])))
    db = float(np.max(np.abs(sa.bias[0] - contrib[:, -1])))
    checks["saabas_vs_approx_contribs_max_abs"] = dv
    checks["saabas_bias_vs_approx_contribs_max_abs"] = db
    assert max(dv, db) <= 1e-5, f"Saabas vs approx_contribs: max |diff| {max(dv, db):.3g} > 1e-5"
    same = np.array_equal(contrib, np.asarray(res["xgb_approx"], dtype=np.float64))
    assert same, "approx_contribs differs between a prebuilt DMatrix and one built in the call"
    # float64 references on a subsample
    n = min(CHECK_ROWS, X.shape[0])
    Xs, ys = X[:n], y[:n]
    ref = reference_sums(ens, booster, Xs, ys, args.threads)
    a = treeinner.predecomp(ens, Xs)
    d64 = float(np.max(np.abs(a.values.sum(axis=1) + a.bias[0] - ref["margin64"])))
    checks["predecomp_vs_float64_margin_max_abs"] = d64
    assert d64 <= 1e-9, f"PreDecomp local accuracy (float64, {n} rows): {d64:.3g} > 1e-9"
    for name, fn in (
        ("tree_inner", treeinner.tree_inner),
        ("forest_inner", treeinner.forest_inner),
    ):
        got = float(fn(ens, Xs, ys, attribution="predecomp").sum())
        want = ref[f"{name}_sum"]
        rel = abs(got - want) / max(abs(want), 1e-300)
        checks[f"{name}_sum_rel_err"] = rel
        assert rel <= 1e-9, f"sum_k {name}(k) = {got!r}, reference {want!r} (rel {rel:.3g})"
    # total-gain identity on the training rows
    Xtr, ytr = bp.make_data(args.rows, args.features, args.nan_fraction, args.seed)
    ti = treeinner.tree_inner(ens, Xtr, ytr, attribution="predecomp").to_numpy()
    tg = treeinner.total_gain(ens).to_numpy()
    rel = float(np.max(np.abs(ti - tg)) / np.max(np.abs(tg)))
    checks["total_gain_identity_rel_err"] = rel
    assert rel <= 1e-4, f"TreeInner on the training rows != total gain (rel {rel:.3g})"
    checks["check_rows"] = n
    return checks


# ---------------------------------------------------------------------- report
def print_table(config, machine, rows, checks) -> None:
    print(
        f"\ntreeinner importance benchmark: {config['predict_rows']} rows x "
        f"{config['features']} features ({config['dtype']}), {config['trees']} trees of depth "
        f"{config['depth']} ({config['n_nodes']} nodes), {config['threads']} threads, best of "
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
    mem = any(r.get("treeinner_peak_mb") is not None for r in rows)
    header = (
        f"{'operation':<15} {'treeinner [s]':>13} {'xgboost [s]':>12} {'ratio':>6} {'target':>7}"
    )
    if mem:
        header += f" {'ti RSS MB':>9} {'(tm MB)':>8} {'xgb RSS MB':>10} {'(tm MB)':>8}"
    print("\n" + header)
    print("-" * len(header))
    for r in rows:
        tgt = f"<= {r['target']:g}" if r["target"] is not None else "info"
        line = (
            f"{r['operation']:<15} {r['treeinner_s']:>13.4f} {r['xgboost_s']:>12.4f} "
            f"{r['ratio']:>6.2f} {tgt:>7}"
        )
        if mem:
            line += (
                f" {_mb(r['treeinner_peak_mb']):>9} {_mb(r['treeinner_tracemalloc_mb']):>8}"
                f" {_mb(r['xgboost_peak_mb']):>10} {_mb(r['xgboost_tracemalloc_mb']):>8}"
            )
        if r["target"] is not None:
            line += "  ok" if r["meets_target"] else "  MISSED"
        print(line)
    print("\nratio = treeinner / xgboost (lower is better); calls:")
    for r in rows:
        print(f"  {r['operation']:<15} {r['treeinner_call']}  vs  {r['xgboost_call']}")
    print(
        "* = DMatrix built outside the timed call. predict_margin is compared "
        "with inplace_predict for scale only."
    )
    if mem:
        print(
            "RSS MB = peak RSS above the RSS before the call (VmHWM reset through "
            "/proc/self/clear_refs), in a fresh process per call after a warm-up on 256 rows, "
            "with glibc mmap threshold 64 KiB;\ntm MB = tracemalloc peak (NumPy/Python "
            "allocations only: misses XGBoost's C++ buffers and Numba's in-kernel arrays)."
        )
    print(
        "checks: PreDecomp sum + bias vs XGBoost margin max |diff| "
        f"{checks['predecomp_vs_xgb_margin_max_abs']:.2g} (float32 margin), "
        f"{checks['predecomp_vs_float64_margin_max_abs']:.2g} vs float64 dump margin; Saabas vs "
        f"approx_contribs {checks['saabas_vs_approx_contribs_max_abs']:.2g}; sum_k TreeInner "
        f"rel err {checks['tree_inner_sum_rel_err']:.2g}, ForestInner "
        f"{checks['forest_inner_sum_rel_err']:.2g} ({checks['check_rows']} rows); total-gain "
        f"identity rel err {checks['total_gain_identity_rel_err']:.2g}"
    )


def _mb(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="training rows (default 100000)")
    p.add_argument(
        "--predict-rows", type=int, default=None, help="rows to explain (default: --rows)"
    )
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
    p.add_argument("--retrain", action="store_true", help="ignore the cached model")
    p.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the peak memory of every call, each in a fresh subprocess (default on)",
    )
    p.add_argument("--output", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})")
    p.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # memory child
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
    if args.measure is not None:
        return memory_child(args)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None

    booster, cached, train_s, ens, convert_s, X, y, dm = setup(args)
    what = "loaded from cache" if cached else f"trained in {train_s:.1f} s"
    print(f"model: {args.trees} trees, depth {args.depth}, {what} ({bp.CACHE_DIR})", flush=True)

    small = make_calls(ens, booster, X[:256], y[:256], dm.slice(np.arange(256)), args.threads)
    first_call = warm_up(small)
    calls = make_calls(ens, booster, X, y, dm, args.threads)
    times: dict[str, float] = {}
    res: dict[str, Any] = {}
    for group in GROUPS:
        print(f"timing {', '.join(group)} ...", flush=True)
        for name in group:  # untimed full-size warm-up
            calls[name]()
        best, out = bp.best_of({name: calls[name] for name in group}, args.repeats)
        for name in group:
            times[name] = min(times.get(name, float("inf")), best[name])
            res[name] = out[name]

    print("checking results ...", flush=True)
    checks = run_checks(ens, booster, X, y, res, args)
    del res
    gc.collect()

    memory: dict[str, dict] = {}
    if args.memory:
        print("measuring peak memory (one fresh process per call) ...", flush=True)
        memory = measure_memory(args, list(CALL_TEXT))

    def peak(name: str, key: str = "rss_peak_delta_bytes") -> float | None:
        b = memory.get(name, {}).get(key)
        return None if b is None else b / 2**20

    rows = []
    for op, ti, xg, target in COMPARISONS:
        ratio = times[ti] / times[xg]
        rows.append(
            {
                "operation": op,
                "treeinner_call": CALL_TEXT[ti],
                "xgboost_call": CALL_TEXT[xg]
                + (", DMatrix prebuilt (not timed)" if xg == "xgb_approx_prebuilt" else ""),
                "treeinner_s": times[ti],
                "xgboost_s": times[xg],
                "ratio": ratio,
                "target": target,
                "meets_target": None if target is None else bool(ratio <= target),
                "treeinner_peak_mb": peak(ti),
                "xgboost_peak_mb": peak(xg),
                "treeinner_tracemalloc_mb": peak(ti, "tracemalloc_peak_bytes"),
                "xgboost_tracemalloc_mb": peak(xg, "tracemalloc_peak_bytes"),
                "treeinner_first_call_256_rows_s": first_call[ti],
            }
        )

    config = {
        "rows": args.rows,
        "predict_rows": args.predict_rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "n_nodes": ens.n_nodes,
        "nan_fraction": args.nan_fraction,
        "dtype": args.dtype,
        "threads": args.threads,
        "repeats": args.repeats,
        "seed": args.seed,
        "model_cached": cached,
        "train_s": train_s,
        "from_model_s": convert_s,
        "timer": "time.perf_counter, best of repeats, calls of a comparison alternating",
        "memory_method": (
            "fresh subprocess per call (MALLOC_MMAP_THRESHOLD_=65536), warm-up on 256 rows, "
            "malloc_trim, then peak RSS above the RSS before the call (VmHWM reset through "
            "/proc/self/clear_refs; ru_maxrss fallback) and the "
            "tracemalloc peak (NumPy/Python allocations only: misses XGBoost's C++ buffers and "
            "Numba's kernel-internal allocations)"
            if args.memory
            else None
        ),
        "loadavg_start": load_start,
        "git": bp.git_state(),
    }
    machine = bp.machine_info(args.threads)
    print_table(config, machine, rows, checks)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "importance",
        "config": config,
        "machine": machine,
        "results": rows,
        "memory": memory,
        "checks": checks,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    args.output.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwritten {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
