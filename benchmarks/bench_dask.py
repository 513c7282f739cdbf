"""Dask: ``treeinner.tree_inner`` on a Parquet dataset larger than the memory it may use.

Writes (once; reused while its manifest matches) a seeded Parquet dataset, by default
20,000,000 rows x 50 float32 features and a label ``y`` in 80 files of 250,000 rows
(``FILE_ROWS``), one file at a time so that generating it never holds the data in memory.
Trains (or loads from the model cache) an XGBoost regressor on a 100,000-row sample of the
same generator, then runs

    frame = dask.dataframe.read_parquet(directory)
    treeinner.tree_inner(ens, frame[features], frame["y"])

for each Dask configuration, in a child process whose peak memory (the RSS summed over the
child and all its descendants, Dask's worker processes included, sampled every 0.2 s) is
checked against ``--memory-limit``, well below the size of the data:

* ``threads``: Dask's local threaded scheduler, no cluster, one thread per core;
* ``local1``: ``distributed.LocalCluster``, 1 worker process with one thread per core;
* ``local2``: ``distributed.LocalCluster``, 2 worker processes of 1 thread each.

Under Dask, treeinner's kernels run on one Numba thread per Dask thread (``NUMBA_NUM_THREADS``
in the child, inherited by the workers): the cores are used by Dask's threads, and a Parquet
read overlaps another partition's kernels; in memory the kernels use all cores.

The call is timed with ``time.perf_counter`` after a warm-up (the same call on the first two
files; cluster start-up and warm-up are reported separately). On a subset that fits in
memory (``--subset-rows``, default 2,000,000: the first files) the same call is timed in
memory (the files read with pyarrow into pandas, not timed) against the Dask path on those
files (the Parquet read included, as it is part of the Dask path's cost) and on the same frame
persisted first (the Dask path's own overhead); target: Dask / in memory <= 1.3. The scores
must agree with the in-memory ones to 1e-10 (relative to the largest score) and across the
configurations on the full data.

Run from the repository root::

    python benchmarks/bench_dask.py                  # full size: 20M x 50 (the first run writes
                                                     # about 4 GB of Parquet to /tmp)
    python benchmarks/bench_dask.py --skip-full      # only the in-memory comparison
    python benchmarks/bench_dask.py --rows 400000 --files 8 --subset-rows 200000 --trees 20

Results are printed as a table and written to ``benchmarks/results/dask.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "dask.json"
CACHE_DIR = Path(os.environ.get("TREEINNER_BENCH_CACHE", "/tmp/treeinner-bench"))
ETA = 0.1
GENERATOR = 1  # bump when make_chunk changes: datasets and cached models are rebuilt
TRAIN_STREAM = 2**31 - 1  # the training sample's stream (files use 0 .. files - 1)
RTOL = 1e-10
TARGET_RATIO = 1.3
POLL_S = 0.2
WARM_ROWS = 50_000
#: rows per Parquet file (and Dask partition) by default: 51 MB of float32. With 500,000 rows a
#: worker of ``local2`` peaked at about 1.2 GB and the process tree at 2.8 GB (limit 3 GB)
FILE_ROWS = 250_000
GB = 1e9

#: name -> (what it is, Dask worker processes (0: no cluster), threads per worker (None: one
#: per core))
CONFIGS = {
    "threads": ("Dask threaded scheduler, no cluster, one thread per core", 0, None),
    "local1": ("LocalCluster, 1 worker process, one thread per core", 1, None),
    "local2": ("LocalCluster, 2 worker processes x 1 thread", 2, 1),
}


def dask_threads(config: str, cores: int) -> int:
    """Dask threads per process (the threaded scheduler's, or each worker's)."""
    return CONFIGS[config][2] or cores


def numba_threads(config: str, cores: int) -> int:
    """Numba threads per process: all cores in memory; under Dask the cores divided among the
    Dask threads of all processes (one each with a thread per core), so that Dask's threads,
    not the kernels', use the cores, and a Parquet read overlaps another partition's kernels.
    treeinner spreads a kernel over ``numba.get_num_threads()`` threads; the child sets it
    through ``NUMBA_NUM_THREADS``, which Dask's threads and worker processes inherit."""
    if config == "memory":
        return cores
    processes = max(1, CONFIGS[config][1])
    return max(1, cores // (processes * dask_threads(config, cores)))


# ---------------------------------------------------------------------- data and model
def feature_names(features: int) -> list[str]:
    width = len(str(features - 1))
    return [f"x{j:0{width}d}" for j in range(features)]


def make_chunk(seed: int, stream: int, rows: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` rows of stream ``stream``: float32 features of shape (features, rows) (one
    contiguous array per column), standard normal, and a float32 label from five of them,
    nonlinear, plus noise."""
    rng = np.random.default_rng([seed, stream])
    X = rng.standard_normal((features, rows), dtype=np.float32)
    x = X[:5].astype(np.float64)
    y = x[0] + 0.5 * x[1] ** 2 + np.sin(2.0 * x[2]) + x[3] * x[4]
    y += 0.5 * rng.standard_normal(rows)
    return X, y.astype(np.float32)


def file_rows(rows: int, files: int) -> list[int]:
    base, extra = divmod(rows, files)
    return [base + (i < extra) for i in range(files)]


def ensure_dataset(args: argparse.Namespace) -> tuple[Path, dict[str, Any], float]:
    """The dataset's directory and manifest (written unless a matching one is there), and
    the seconds spent writing it (0 when reused)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = args.data_dir or CACHE_DIR / f"parquet-{args.rows}x{args.features}"
    sizes = file_rows(args.rows, args.files)
    names = [f"part-{i:04d}.parquet" for i in range(args.files)]
    want = {
        "rows": args.rows,
        "features": args.features,
        "files": args.files,
        "seed": args.seed,
        "generator": GENERATOR,
        "dtype": "float32",
        "columns": [*feature_names(args.features), "y"],
        "file_rows": sizes,
        "file_names": names,
    }
    manifest = directory / "manifest.json"
    if manifest.exists():
        try:
            have = json.loads(manifest.read_text())
        except ValueError:
            have = None
        if have == want and all((directory / n).exists() for n in names):
            return directory, want, 0.0
    print(
        f"writing {args.rows:,} x {args.features} to {directory} ({args.files} files) ...",
        flush=True,
    )
    if directory.exists():
        manifest.unlink(missing_ok=True)
        for old in directory.glob("part-*.parquet"):
            old.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    cols = feature_names(args.features)
    t0 = time.perf_counter()
    for i, (name, n) in enumerate(zip(names, sizes)):
        X, y = make_chunk(args.seed, i, n, args.features)
        table = pa.table({**{c: X[j] for j, c in enumerate(cols)}, "y": y})
        del X, y
        tmp = directory / f".{name}.{os.getpid()}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, directory / name)
        del table
    manifest.write_text(json.dumps(want, indent=1) + "\n")
    return directory, want, time.perf_counter() - t0


def train_or_load(args: argparse.Namespace) -> tuple[Any, bool, float]:
    """The trained booster (cached under ``CACHE_DIR`` like the other benchmarks' models),
    whether it came from the cache, and the training time (s)."""
    import xgboost as xgb

    key = {
        "rows": args.train_rows,
        "features": args.features,
        "trees": args.trees,
        "depth": args.depth,
        "seed": args.seed,
        "generator": GENERATOR,
        "eta": ETA,
        "xgboost": xgb.__version__,
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = (
        f"xgb_dask_r{args.train_rows}_f{args.features}_t{args.trees}_d{args.depth}"
        f"_s{args.seed}_{digest}.ubj"
    )
    path = CACHE_DIR / name
    if path.exists() and not args.retrain:
        return xgb.Booster(model_file=str(path)), True, 0.0
    Xt, y = make_chunk(args.seed, TRAIN_STREAM, args.train_rows, args.features)
    dtrain = xgb.DMatrix(Xt.T, label=y, feature_names=feature_names(args.features))
    params = {
        "objective": "reg:squarederror",
        "tree_method": "hist",
        "max_depth": args.depth,
        "eta": ETA,
        "nthread": args.threads,
        "seed": args.seed,
    }
    t0 = time.perf_counter()
    booster = xgb.train(params, dtrain, args.trees)
    elapsed = time.perf_counter() - t0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.ubj")
    booster.save_model(str(tmp))
    os.replace(tmp, path)
    return booster, False, elapsed


def dir_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("part-*.parquet"))


# ---------------------------------------------------------------------- the child process
def _phase(name: str) -> None:
    print(f"@phase {name}", flush=True)


def _warm(ens_path: str) -> float:
    """Load treeinner's kernels in this process (from Numba's cache, or compile them) and
    start its threads: one in-memory call on ``WARM_ROWS`` rows (enough for the kernels'
    threaded path). Returns the seconds it took."""
    import pandas as pd

    import treeinner

    t0 = time.perf_counter()
    ens = treeinner.load(ens_path)
    X, y = make_chunk(12345, 0, WARM_ROWS, ens.n_features)
    frame = pd.DataFrame(X.T, columns=list(ens.feature_names))
    treeinner.tree_inner(ens, frame, pd.Series(y))
    return time.perf_counter() - t0


def _scores(s: Any) -> list[float]:
    return [float(v) for v in np.asarray(s, dtype=np.float64)]


def _best(fn: Any, repeats: int) -> tuple[float, list[float], Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, out


def child_memory(spec: dict[str, Any], ens: Any) -> dict[str, Any]:
    """In memory: the subset's files read into one pandas frame (not timed), then the call."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import treeinner

    _phase("load")
    t0 = time.perf_counter()
    table = pa.concat_tables([pq.read_table(f) for f in spec["files"]])
    df = table.to_pandas()
    del table
    X, y = df[spec["columns"]], df["y"]
    del df
    load_s = time.perf_counter() - t0
    _phase("warmup")
    warm_s = _warm(spec["ens_path"])
    _phase("call")
    best, times, s = _best(lambda: treeinner.tree_inner(ens, X, y), spec["repeats"])
    return {
        "rows": len(X),
        "load_s": load_s,
        "warmup_s": warm_s,
        "call_s": best,
        "call_times_s": times,
        "scores": _scores(s),
    }


def _frame(paths: Any, columns: list[str]) -> tuple[Any, Any]:
    import dask.dataframe as dd

    frame = dd.read_parquet(paths)
    return frame[columns], frame["y"]


def _first_call(spec: dict[str, Any], ens: Any) -> None:
    """The Dask path once on the first two files (untimed: a warm-up)."""
    import treeinner

    treeinner.tree_inner(ens, *_frame(spec["first_files"], spec["columns"]))


def child_dask(spec: dict[str, Any], ens: Any) -> dict[str, Any]:
    """One Dask configuration: start it, warm it up, then the timed calls of the job."""
    import dask
    import dask.dataframe as dd

    import treeinner

    out: dict[str, Any] = {}
    workers = CONFIGS[spec["config"]][1]
    per_worker = dask_threads(spec["config"], spec["cores"])
    _phase("startup")
    t0 = time.perf_counter()
    client = cluster = None
    if workers == 0:
        dask.config.set(scheduler="threads", num_workers=per_worker)
    else:
        import logging

        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=per_worker,
            processes=True,
            memory_limit=spec["memory_limit"] // workers,
            dashboard_address=None,
            silence_logs=logging.WARNING,  # the workers' pauses, counted by run_child
        )
        client = Client(cluster)
    out["startup_s"] = time.perf_counter() - t0

    _phase("warmup")
    t0 = time.perf_counter()
    if client is not None:
        out["worker_warmup_s"] = list(client.run(_warm, spec["ens_path"]).values())
    _warm(spec["ens_path"])
    _first_call(spec, ens)
    out["warmup_s"] = time.perf_counter() - t0
    out["partitions"] = _frame(spec["paths"], spec["columns"])[0].npartitions

    def read_and_call() -> Any:
        X, y = _frame(spec["paths"], spec["columns"])
        return treeinner.tree_inner(ens, X, y)

    _phase("call")
    best, times, s = _best(read_and_call, spec["repeats"])
    out.update(call_s=best, call_times_s=times, scores=_scores(s))

    if spec["persisted"]:
        _phase("persist")
        t0 = time.perf_counter()
        frame = dd.read_parquet(spec["paths"]).persist()
        if client is not None:
            from distributed import wait

            wait(frame)
        out["persist_s"] = time.perf_counter() - t0
        _phase("persisted")
        best, times, s = _best(
            lambda: treeinner.tree_inner(ens, frame[spec["columns"]], frame["y"]),
            spec["repeats"],
        )
        out.update(persisted_s=best, persisted_times_s=times, persisted_scores=_scores(s))
        del frame
    _phase("shutdown")
    if client is not None:
        client.close()
        cluster.close()
    return out


def child_main(spec_path: str) -> int:
    import warnings

    warnings.simplefilter("ignore")
    import treeinner

    spec = json.loads(Path(spec_path).read_text())
    ens = treeinner.load(spec["ens_path"])
    if spec["config"] == "memory":
        res = child_memory(spec, ens)
    else:
        res = child_dask(spec, ens)
    print("@result " + json.dumps(res), flush=True)
    return 0


# ---------------------------------------------------------------------- running a child
class TreeRss:
    """The RSS summed over a process and all its descendants, sampled every ``POLL_S``
    seconds in a thread; the maximum per phase (the child announces its phases). The PSS
    (shared pages divided among the processes sharing them) likewise: the RSS sum counts a
    shared library once per process, so it is the upper bound, and the one checked."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.phase = "start"
        self.peak: dict[str, float] = {}
        self.peak_pss: dict[str, float] = {}
        self.peak_procs = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        import psutil

        rss, pss, n = 0, 0, 0
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                m = p.memory_full_info()
            except psutil.Error:
                continue
            rss += m.rss
            pss += getattr(m, "pss", m.rss)
            n += 1
        phase = self.phase
        self.peak[phase] = max(self.peak.get(phase, 0), rss)
        self.peak_pss[phase] = max(self.peak_pss.get(phase, 0), pss)
        self.peak_procs = max(self.peak_procs, n)

    def _run(self) -> None:
        while not self.stop.wait(POLL_S):
            self.sample()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def run_child(spec: dict[str, Any], env_threads: int, workdir: Path) -> dict[str, Any]:
    """Run one job in a child process (``--child``); its result, with the peak RSS of its
    process tree per phase and overall."""
    spec_path = workdir / f"spec-{spec['config']}-{spec['job']}.json"
    spec_path.write_text(json.dumps(spec))
    log_path = workdir / f"stderr-{spec['config']}-{spec['job']}.txt"
    env = {
        **os.environ,
        "NUMBA_NUM_THREADS": str(env_threads),
        "TREEINNER_PROGRESS": "never",
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
    }
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)]
    t0 = time.perf_counter()
    with open(log_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        rss = TreeRss(proc.pid)
        result = None
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("@phase "):
                rss.sample()  # the end of the previous phase
                rss.phase = line.split(None, 1)[1].strip()
                rss.sample()
            elif line.startswith("@result "):
                result = json.loads(line.split(None, 1)[1])
        code = proc.wait()
        rss.close()
    if code != 0 or result is None:
        tail = log_path.read_text()[-3000:]
        raise RuntimeError(f"child {spec['config']}/{spec['job']} failed ({code}):\n{tail}")
    log = log_path.read_text()
    result["worker_pauses"] = log.count("Pausing worker")
    result["worker_restarts"] = log.count("Restarting worker") + log.count("exceeded 95%")
    result["wall_s"] = time.perf_counter() - t0
    result["peak_rss_by_phase"] = rss.peak
    result["peak_rss"] = max(rss.peak.values())
    result["peak_pss_by_phase"] = rss.peak_pss
    result["peak_pss"] = max(rss.peak_pss.values())
    result["peak_processes"] = rss.peak_procs
    result["numba_threads"] = env_threads
    return result


# ---------------------------------------------------------------------- report
def rel_diff(a: list[float], b: list[float]) -> float:
    """max |a - b| relative to max |b| (scores near zero compare on the vector's scale)."""
    a_, b_ = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a_ - b_)) / max(np.max(np.abs(b_)), 1e-300))


def machine_info() -> dict[str, Any]:
    import dask
    import distributed
    import numba
    import pandas
    import psutil
    import pyarrow
    import xgboost

    import treeinner

    cpu_model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "memory_total_gb": psutil.virtual_memory().total / GB,
        "memory_available_gb_end": psutil.virtual_memory().available / GB,
        "loadavg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "numba": numba.__version__,
        "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
        "psutil": psutil.__version__,
        "xgboost": xgboost.__version__,
        "treeinner": treeinner.__version__,
    }


def _load(avg: list[float] | None) -> str:
    return "?" if avg is None else "/".join(f"{v:.1f}" for v in avg)


def print_report(doc: dict[str, Any]) -> None:
    c, m, d = doc["config"], doc["machine"], doc["dataset"]
    print(
        f"\ntreeinner Dask benchmark: tree_inner, {c['trees']} trees of depth {c['depth']} "
        f"({c['n_nodes']} nodes), memory limit {c['memory_limit'] / GB:.2f} GB"
    )
    print(
        f"dataset: {d['rows']:,} rows x {d['features']} features in {d['files']} files "
        f"({d['directory']}): {d['disk_bytes'] / GB:.2f} GB on disk; X in memory "
        f"{d['memory_bytes_float32'] / GB:.2f} GB as float32, "
        f"{d['memory_bytes_float64'] / GB:.2f} GB as float64 (the kernels' input)"
    )
    print(
        f"machine: {m['cpu_model']}, cpu_count {m['cpu_count']}, "
        f"{m['memory_total_gb']:.1f} GB RAM, load average {_load(c['loadavg_start'])} at "
        f"start, {_load(m['loadavg_end'])} at end; dask {m['dask']}, distributed "
        f"{m['distributed']}, numba {m['numba']}, pyarrow {m['pyarrow']}"
    )
    for name, k in c["configs"].items():
        print(
            f"  {name:<8} {k['description']}: {k['dask_threads_per_process']} Dask thread(s) "
            f"and {k['numba_threads']} Numba thread(s) per process"
        )
    full = doc["full"]
    if full:
        print(f"\nfull data ({d['rows']:,} rows), one timed call each:")
        head = (
            f"{'config':<8} {'procs':>5} {'startup [s]':>11} {'call [s]':>9} {'Mrows/s':>8} "
            f"{'peak RSS [GB]':>13} {'PSS [GB]':>8} {'limit':>6} {'pauses':>6}  diff"
        )
        print(head)
        print("-" * len(head))
        for r in full:
            print(
                f"{r['config']:<8} {r['peak_processes']:>5} {r['startup_s']:>11.2f} "
                f"{r['call_s']:>9.2f} {d['rows'] / r['call_s'] / 1e6:>8.2f} "
                f"{r['peak_rss'] / GB:>13.2f} {r['peak_pss'] / GB:>8.2f} "
                f"{'ok' if r['within_limit'] else 'OVER':>6} {r['worker_pauses']:>6}  "
                f"{r['rel_diff']:.1e}"
            )
        print(
            "peak RSS (PSS): summed over the child's process tree (the client with the "
            "scheduler and nannies, the workers), the maximum over its whole run; limit: peak "
            "RSS <= --memory-limit; pauses: LocalCluster workers paused at 80% of their "
            "memory_limit (--memory-limit / workers); diff: max |score difference| / max "
            "|score| against the first config."
        )
    sub = doc["subset"]
    if sub:
        mem = sub["memory"]
        print(
            f"\nsubset ({sub['rows']:,} rows, {sub['files']} files): in memory "
            f"{mem['call_s']:.3f} s (best of {c['repeats']}; pandas read {mem['load_s']:.2f} s "
            f"not timed), peak RSS {mem['peak_rss'] / GB:.2f} GB"
        )
        head = (
            f"{'config':<8} {'read+call [s]':>13} {'ratio':>6} {'persisted [s]':>13} "
            f"{'ratio':>6} {'peak RSS [GB]':>13}  diff"
        )
        print(head)
        print("-" * len(head))
        for r in sub["dask"]:
            flag = "ok" if r["ratio"] <= TARGET_RATIO else "above"
            print(
                f"{r['config']:<8} {r['call_s']:>13.3f} {r['ratio']:>6.2f} "
                f"{r['persisted_s']:>13.3f} {r['persisted_ratio']:>6.2f} "
                f"{r['peak_rss_by_phase'].get('call', 0) / GB:>13.2f}  "
                f"{max(r['rel_diff'], r['persisted_rel_diff']):.1e}  {flag}"
            )
        print(
            f"ratio: Dask / in memory (target <= {TARGET_RATIO}); read+call includes "
            "dd.read_parquet and the Parquet read; persisted: the frame persisted first. "
            "peak RSS of the read+call phase."
        )


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from dask.utils import parse_bytes

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20_000_000, help="rows (default 20000000)")
    p.add_argument("--features", type=int, default=50, help="features (default 50, at least 5)")
    p.add_argument(
        "--files",
        type=int,
        default=None,
        help=f"Parquet files, one partition each (default: {FILE_ROWS} rows each)",
    )
    p.add_argument("--trees", type=int, default=200, help="boosting rounds (default 200)")
    p.add_argument("--depth", type=int, default=6, help="max_depth (default 6)")
    p.add_argument(
        "--train-rows", type=int, default=100_000, help="training sample (default 100000)"
    )
    p.add_argument(
        "--subset-rows",
        type=int,
        default=2_000_000,
        help="rows of the in-memory comparison: the first files holding about as many "
        "(default 2000000)",
    )
    p.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"comma-separated, of {', '.join(CONFIGS)} (default all)",
    )
    p.add_argument(
        "--memory-limit",
        default="3GB",
        help="peak RSS allowed to a full-data run, its whole process tree; also the "
        "LocalCluster's memory_limit, split among its workers (default 3GB)",
    )
    p.add_argument("--skip-full", action="store_true", help="only the subset comparison")
    p.add_argument("--skip-subset", action="store_true", help="only the full-data runs")
    p.add_argument(
        "--repeats", type=int, default=3, help="timed calls on the subset, best kept (default 3)"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="cores to use (default os.cpu_count()); see numba_threads() for the split",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", type=Path, default=None, help="default: under the cache dir")
    p.add_argument("--retrain", action="store_true", help="ignore the cached model")
    p.add_argument("--output", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})")
    args = p.parse_args(argv)
    if args.files is None:
        args.files = max(1, math.ceil(args.rows / FILE_ROWS))
    if args.features < 5:
        p.error("--features must be at least 5 (the label reads five)")
    if not 1 <= args.files <= args.rows:
        p.error("--files must be in [1, --rows]")
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad or not args.configs:
        p.error(f"--configs: unknown {bad}; choose from {', '.join(CONFIGS)}")
    args.memory_limit_bytes = int(parse_bytes(args.memory_limit))
    if args.skip_full and args.skip_subset:
        p.error("--skip-full and --skip-subset leave nothing to run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_predict as bp

    import treeinner

    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    directory, manifest, write_s = ensure_dataset(args)
    files = [str(directory / n) for n in manifest["file_names"]]
    disk = dir_size(directory)
    what = "reused" if write_s == 0 else f"written in {write_s:.1f} s"
    print(f"dataset: {directory}, {disk / GB:.2f} GB on disk ({what})", flush=True)
    booster, cached, train_s = train_or_load(args)
    what = "loaded from cache" if cached else f"trained in {train_s:.1f} s"
    print(f"model: {args.trees} trees, depth {args.depth}, {what} ({CACHE_DIR})", flush=True)
    ens = treeinner.from_model(booster, learning_rate=ETA)
    columns = feature_names(args.features)

    itemsize = 4
    dataset = {
        "directory": str(directory),
        "rows": args.rows,
        "features": args.features,
        "files": args.files,
        "seed": args.seed,
        "dtype": "float32",
        "disk_bytes": disk,
        "memory_bytes_float32": args.rows * args.features * itemsize,
        "memory_bytes_float64": args.rows * args.features * 8,
        "label_bytes": args.rows * itemsize,
        "write_s": write_s,
    }
    cores = args.threads
    base = {
        "columns": columns,
        "memory_limit": args.memory_limit_bytes,
        "cores": cores,
        "first_files": files[:2],
    }
    full: list[dict[str, Any]] = []
    subset: dict[str, Any] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="treeinner-bench-dask-") as tmp:
        work = Path(tmp)
        ens_path = work / "ensemble.npz"
        ens.save(ens_path)
        base["ens_path"] = str(ens_path)

        if not args.skip_subset:
            k = 0
            while k < len(files) and sum(manifest["file_rows"][:k]) < args.subset_rows:
                k += 1
            k = max(1, k)
            sub_files = files[:k]
            sub_rows = sum(manifest["file_rows"][:k])
            print(f"\nsubset: {sub_rows:,} rows in {k} files", flush=True)
            spec = {
                **base,
                "config": "memory",
                "job": "subset",
                "files": sub_files,
                "repeats": args.repeats,
            }
            mem = run_child(spec, numba_threads("memory", cores), work)
            print(f"  in memory: {mem['call_s']:.3f} s", flush=True)
            rows = []
            for name in args.configs:
                spec = {
                    **base,
                    "config": name,
                    "job": "subset",
                    "paths": sub_files,
                    "repeats": args.repeats,
                    "persisted": True,
                }
                r = run_child(spec, numba_threads(name, cores), work)
                r["config"] = name
                r["ratio"] = r["call_s"] / mem["call_s"]
                r["persisted_ratio"] = r["persisted_s"] / mem["call_s"]
                r["rel_diff"] = rel_diff(r["scores"], mem["scores"])
                r["persisted_rel_diff"] = rel_diff(r["persisted_scores"], mem["scores"])
                for key in ("rel_diff", "persisted_rel_diff"):
                    if not r[key] <= RTOL:
                        failures.append(f"subset {name}: {key} {r[key]:.2e} > {RTOL}")
                print(
                    f"  {name}: read+call {r['call_s']:.3f} s (x{r['ratio']:.2f}), persisted "
                    f"{r['persisted_s']:.3f} s (x{r['persisted_ratio']:.2f}), "
                    f"diff {r['rel_diff']:.1e}",
                    flush=True,
                )
                rows.append(r)
            subset = {"rows": sub_rows, "files": k, "memory": mem, "dask": rows}

        if not args.skip_full:
            print(f"\nfull data: {args.rows:,} rows", flush=True)
            for name in args.configs:
                spec = {
                    **base,
                    "config": name,
                    "job": "full",
                    "paths": str(directory),
                    "repeats": 1,
                    "persisted": False,
                }
                r = run_child(spec, numba_threads(name, cores), work)
                r["config"] = name
                r["within_limit"] = r["peak_rss"] <= args.memory_limit_bytes
                r["rel_diff"] = rel_diff(r["scores"], (full[0] if full else r)["scores"])
                if not r["within_limit"]:
                    failures.append(
                        f"full {name}: peak RSS {r['peak_rss'] / GB:.2f} GB above the limit "
                        f"{args.memory_limit_bytes / GB:.2f} GB"
                    )
                if not r["rel_diff"] <= RTOL:
                    failures.append(f"full {name}: scores differ by {r['rel_diff']:.2e}")
                print(
                    f"  {name}: {r['call_s']:.2f} s, peak RSS {r['peak_rss'] / GB:.2f} GB",
                    flush=True,
                )
                full.append(r)

    config = {
        "command": "python benchmarks/bench_dask.py " + " ".join(sys.argv[1:]),
        "git": bp.git_state(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "trees": args.trees,
        "depth": args.depth,
        "eta": ETA,
        "n_nodes": ens.n_nodes,
        "train_rows": args.train_rows,
        "model_cached": cached,
        "train_s": train_s,
        "model_passed": "TreeEnsemble from treeinner.from_model(booster, learning_rate=eta)",
        "memory_limit": args.memory_limit_bytes,
        "threads": cores,
        "configs": {
            name: {
                "description": CONFIGS[name][0],
                "worker_processes": CONFIGS[name][1],
                "dask_threads_per_process": dask_threads(name, cores),
                "numba_threads": numba_threads(name, cores),
            }
            for name in args.configs
        },
        "repeats": args.repeats,
        "rtol": RTOL,
        "target_ratio": TARGET_RATIO,
        "rss": f"psutil RSS summed over the child's process tree every {POLL_S} s",
        "timer": "time.perf_counter; subset: best of repeats; full: one call",
        "loadavg_start": load_start,
    }
    doc = {
        "benchmark": "dask",
        "config": config,
        "machine": machine_info(),
        "dataset": dataset,
        "subset": subset,
        "full": full,
        "failures": failures,
    }
    print_report(doc)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwritten {args.output}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2]))
    sys.exit(main())
