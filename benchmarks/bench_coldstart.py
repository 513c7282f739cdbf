"""First-call times: each entry point in a fresh process with an empty Numba cache (cold), then
the same call again in a second process reusing that cache (warm).

A new user's first calls compile treeinner's Numba kernels; every fresh container, CI job or
notebook on a new machine pays that again. This measures it per entry point, on an XGBoost
model of 50 trees (depth 4) and 2,000 rows x 10 features, the situation of issue 18.

    python benchmarks/bench_coldstart.py [--calls tree_inner,tree_shap,importance]

Each call runs in its own ``python -c`` child with ``NUMBA_CACHE_DIR`` pointed at a new
directory (cold), then in another child with the same directory (warm: only the cache is read).
The model is trained and the data generated in the child before the clock starts, so only the
treeinner call is timed. Results go to ``benchmarks/results/coldstart.json``.
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
t = time.perf_counter()
{stmt}
print(time.perf_counter() - t)
"""


def _time(stmt: str, cache: str, setup: bool) -> float:
    """Seconds ``stmt`` takes in a fresh child process using the Numba cache ``cache``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "TREEINNER_PROGRESS": "never"}
    code = _CHILD.format(setup=setup, stmt=stmt)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if res.returncode != 0:
        raise RuntimeError(f"{stmt!r} failed:\n{res.stderr[-2000:]}")
    return float(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default=",".join(CALLS), help="comma-separated entry points")
    parser.add_argument(
        "--output", default=str(Path(__file__).parent / "results" / "coldstart.json")
    )
    args = parser.parse_args()
    rows = []
    print(f"{'entry point':18s} {'cold (s)':>9s} {'warm (s)':>9s}", flush=True)
    for name in args.calls.split(","):
        stmt = CALLS[name]
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
            setup = name != "import treeinner"
            cold = _time(stmt, cache, setup)
            warm = _time(stmt, cache, setup)
        rows.append({"call": name, "statement": stmt, "cold_s": cold, "warm_s": warm})
        print(f"{name:18s} {cold:9.2f} {warm:9.2f}", flush=True)
    out = {
        "command": "python benchmarks/bench_coldstart.py",
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "model": "XGBRegressor, 50 trees, depth 4; 2,000 rows x 10 features",
        "rows": rows,
    }
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
