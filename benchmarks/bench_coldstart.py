"""First-call times: each entry point in a fresh process with an empty Numba cache (cold), then
the same call again in a second process reusing that cache (warm).

A new user's first calls compile treeinner's Numba kernels; every fresh container, CI job or
notebook on a new machine pays that again. This measures it per entry point, on an XGBoost
model of 50 trees (depth 4) and 2,000 rows x 10 features, the situation of issue 18.

    python benchmarks/bench_coldstart.py [--calls tree_inner,tree_shap,importance] [--top 8]

Each call runs in its own ``python -c`` child with ``NUMBA_CACHE_DIR`` pointed at a new
directory (cold), then in another child with the same directory (warm: only the cache is read).
The model is trained and the data generated in the child before the clock starts, so only the
treeinner call is timed. The cold child also records where the compile time goes: every Numba
compilation (``numba.core.event``), its own seconds without the compilations it triggers, per
kernel and specialisation; the ``--top`` largest are printed and all are saved. ``demo`` is the
README's first command, ``python -m treeinner.demo``, timed as a whole process (imports and the
XGBoost training included). Results go to ``benchmarks/results/coldstart.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: entry point -> the statement timed (``m`` the XGBoost model, ``X``, ``y`` the data)
CALLS = {
    "import treeinner": "import treeinner",
    "predict_margin": "treeinner.from_model(m).predict_margin(X)",
    "tree_inner": "treeinner.tree_inner(m, X, y)",
    "tree_shap": "treeinner.tree_shap(m, X)",
    "forest_inner": "treeinner.forest_inner(m, X, y)",
    "unbiased_gain": "treeinner.unbiased_gain(m, X, y, random_state=0)",
    "importance": "treeinner.importance(m, X, y, random_state=0)",
    "significance": "treeinner.significance(m, X, y)",
    "select_features": "treeinner.select_features(m, X, y)",
    "demo": "python -m treeinner.demo",
}

_CHILD = """
import time, warnings
warnings.simplefilter("ignore")
import numpy as np, xgboost as xgb
rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 10)); y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=2000)
m = xgb.XGBRegressor(n_estimators=50, max_depth=4, n_jobs=2).fit(X, y)
setup = {setup!r}
if setup:
    import treeinner
import json
from numba.core import event as _ev
_stack, _compiles = [], []
class _Compiles(_ev.Listener):
    def on_start(self, e):
        f = e.data["dispatcher"].py_func
        name = f.__module__ + "." + f.__qualname__
        _stack.append([name, str(e.data["args"]), time.perf_counter(), 0.0])
    def on_end(self, e):
        name, args, t0, inner = _stack.pop()
        dt = time.perf_counter() - t0
        if _stack:
            _stack[-1][3] += dt
        _compiles.append({{"kernel": name, "args": args, "self_s": dt - inner, "total_s": dt}})
_ev.register("numba:compile", _Compiles())
t = time.perf_counter()
{stmt}
elapsed = time.perf_counter() - t
print(json.dumps({{"elapsed": elapsed, "compiles": _compiles}}))
"""


def _run(stmt: str, cache: str, setup: bool) -> dict:
    """Seconds ``stmt`` takes in a fresh child process using the Numba cache ``cache``, and the
    Numba compilations it made."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "TREEINNER_PROGRESS": "never"}
    if stmt.startswith("python -m "):  # a whole process
        t = time.perf_counter()
        cmd = [sys.executable, "-m", *stmt.split()[2:]]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        out = {"elapsed": time.perf_counter() - t, "compiles": None}
    else:
        code = _CHILD.format(setup=setup, stmt=stmt)
        cmd = [sys.executable, "-c", code]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        out = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {}
    if res.returncode != 0:
        raise RuntimeError(f"{stmt!r} failed:\n{res.stderr[-2000:]}")
    return out


def _by_kernel(compiles: list[dict]) -> list[dict]:
    """Compile seconds per kernel (own time, every specialisation), largest first."""
    per: dict[str, dict] = {}
    for c in compiles:
        k = per.setdefault(c["kernel"], {"kernel": c["kernel"], "self_s": 0.0, "n": 0})
        k["self_s"] += c["self_s"]
        k["n"] += 1
    return sorted(per.values(), key=lambda k: -k["self_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default=",".join(CALLS), help="comma-separated entry points")
    parser.add_argument(
        "--output", default=str(Path(__file__).parent / "results" / "coldstart.json")
    )
    parser.add_argument("--top", type=int, default=8, help="kernels listed per entry point")
    args = parser.parse_args()
    load = os.getloadavg()
    rows = []
    print(f"{'entry point':18s} {'cold (s)':>9s} {'warm (s)':>9s}  compiles", flush=True)
    for name in args.calls.split(","):
        stmt = CALLS[name]
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
            setup = name != "import treeinner"
            cold = _run(stmt, cache, setup)
            warm = _run(stmt, cache, setup)
        kernels = _by_kernel(cold["compiles"]) if cold["compiles"] is not None else []
        rows.append(
            {
                "call": name,
                "statement": stmt,
                "cold_s": cold["elapsed"],
                "warm_s": warm["elapsed"],
                "compilations": len(cold["compiles"] or []),
                "compile_s": sum(k["self_s"] for k in kernels),
                "kernels": kernels,
            }
        )
        n = len(cold["compiles"]) if cold["compiles"] is not None else "-"
        print(f"{name:18s} {cold['elapsed']:9.2f} {warm['elapsed']:9.2f}  {n}", flush=True)
        for k in kernels[: args.top]:
            print(f"{'':20s}{k['self_s']:6.2f} s  {k['kernel']} (x{k['n']})", flush=True)
    out = {
        "command": "python benchmarks/bench_coldstart.py",
        "load_average_start": load,
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "model": "XGBRegressor, 50 trees, depth 4; 2,000 rows x 10 features",
        "rows": rows,
    }
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
