"""The fuzz cases' child processes, and the parent's side: running cases and classifying them.

A worker is a persistent child process (``python -m tests.fuzz._worker <kind>``) reading one
JSON request per line on stdin and answering one JSON line on its own copy of stdout (the
process's file descriptor 1 goes to stderr, so nothing a booster prints can mix in). Two kinds:

* ``treeinner``: ``treeinner.load(path)``, then on the seed model's rows ``predict_margin``,
  ``leaf_index``, ``predecomp``, ``saabas``, ``tree_shap``, ``tree_inner`` and ``total_gain``;
* ``booster``: the booster itself on the same file (``xgboost.Booster(model_file=...)``,
  ``lightgbm.Booster(model_file=...)``, ``catboost.CatBoost().load_model``): its margins, leaf
  indices and SHAP values, or its error.

``Runner`` (the parent) keeps one worker of each kind, restarts a worker that died (``crash``)
or exceeded ``_outcome.TIME_LIMIT`` (killed: ``hang``), and ``classify`` turns the two
answers and the unmutated model's answer into an ``_outcome.Case``; ``run_cases`` runs a list
of mutated files over ``jobs`` runners.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from typing import Any

import numpy as np

from tests.fuzz._outcome import TIME_LIMIT, Case
from tests.fuzz.models import Mutant, Seed, load_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_LIMIT = 300.0  # seconds a fresh worker may take for its first request (imports, Numba)
#: relative tolerances (of the largest |value| of the row) per booster: margins, SHAP values
MARGIN_RTOL = {"xgboost": 0.0, "lightgbm": 1e-12, "catboost": 1e-12}
SHAP_RTOL = {"xgboost": 1e-5, "lightgbm": 1e-9, "catboost": 1e-9}
ADDITIVE_RTOL = 1e-6  # treeinner's attributions + bias against its margin

# ---------------------------------------------------------------------------------- child side


def _arr(x: Any) -> list:
    return np.asarray(x, dtype=np.float64).tolist()


def _attribution(att: Any) -> dict:
    return {"values": _arr(att.values), "bias": _arr(att.bias)}


def run_treeinner(path: str, rows_path: str) -> dict:
    """Load ``path`` with treeinner and compute every result on the rows: each result, or
    ``{"refused": message}`` for a ``TreeinnerError`` (other exceptions propagate)."""
    import treeinner

    ens = treeinner.load(path)
    rows = load_rows(rows_path)
    calls = {
        "margin": lambda: _arr(ens.predict_margin(rows.X)),
        "leaf": lambda: _arr(ens.leaf_index(rows.X)),
        "predecomp": lambda: _attribution(treeinner.predecomp(ens, rows.X)),
        "saabas": lambda: _attribution(treeinner.saabas(ens, rows.X)),
        "tree_shap": lambda: _attribution(treeinner.tree_shap(ens, rows.X)),
        "tree_inner": lambda: _arr(treeinner.tree_inner(ens, rows.X, rows.y)),
        "total_gain": lambda: _arr(treeinner.total_gain(ens)),
    }
    out: dict[str, Any] = {}
    for name, call in calls.items():
        try:
            out[name] = call()
        except treeinner.TreeinnerError as e:
            out[name] = {"refused": f"{type(e).__name__}: {e}"[:300]}
    return out


def run_booster(path: str, rows_path: str, booster: str, fmt: str) -> dict:
    """The booster's own margins, leaf indices and SHAP values on the rows for ``path`` (leaf
    indices and SHAP values None where the booster does not give them for this model)."""
    rows = load_rows(rows_path)
    if booster == "xgboost":
        import xgboost as xgb

        b = xgb.Booster(model_file=path)
        d = xgb.DMatrix(rows.X, enable_categorical=True)
        # DART: treeinner matches inplace_predict, which applies the tree weights in float32
        # (DMatrix predict differs from it in the last bits; the adapter tests compare the same)
        dart = json.loads(b.save_config())["learner"]["gradient_booster"]["name"] == "dart"
        calls = [
            (lambda: b.inplace_predict(rows.X, predict_type="margin"))
            if dart
            else (lambda: b.predict(d, output_margin=True)),
            lambda: b.predict(d, pred_leaf=True),
            lambda: b.predict(d, pred_contribs=True),
        ]
    elif booster == "lightgbm":
        import lightgbm as lgb

        b = lgb.Booster(model_file=path)
        calls = [
            lambda: b.predict(rows.X, raw_score=True),
            lambda: b.predict(rows.X, pred_leaf=True),
            lambda: b.predict(rows.X, pred_contrib=True),
        ]
    else:
        import catboost

        m = catboost.CatBoost()
        m.load_model(path, format=fmt)
        pool = catboost.Pool(rows.X, cat_features=rows.cat_features or None)
        calls = [
            lambda: m.predict(pool, prediction_type="RawFormulaVal"),
            lambda: m.calc_leaf_indexes(pool),
            lambda: m.get_feature_importance(pool, type="ShapValues"),
        ]
    out = {"margin": _arr(calls[0]())}
    for name, call in zip(("leaf", "shap"), calls[1:]):
        try:
            out[name] = _arr(call())
        except Exception:  # noqa: BLE001 - not given for this model (e.g. linear trees)
            out[name] = None
    return out


def _answer(request: dict) -> dict:
    try:
        if request["kind"] == "treeinner":
            return {"ok": run_treeinner(request["path"], request["rows"])}
        return {
            "ok": run_booster(request["path"], request["rows"], request["booster"], request["fmt"])
        }
    except Exception as e:  # noqa: BLE001 - the parent classifies every exception
        import treeinner

        tb = traceback.extract_tb(e.__traceback__)
        where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        return {
            "error": type(e).__name__,
            "ours": isinstance(e, treeinner.TreeinnerError),
            "message": str(e)[:400],
            "where": where,
        }


def main() -> None:
    """The worker's loop: one request per stdin line, one answer per line on the saved
    stdout."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what boosters print goes to stderr
    warnings.simplefilter("ignore")
    import treeinner  # noqa: F401 - imported before the first timed request

    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        out.write(json.dumps(_answer(json.loads(line))) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------- parent side


class Worker:
    """One child process of a kind; ``ask`` returns ("ok", answer), ("died", exit code) or
    ("timeout", seconds)."""

    def __init__(self, log: str | None = None) -> None:
        self.proc: subprocess.Popen | None = None
        self.fresh = True
        self.hung = False
        self.log = log

    def _start(self) -> None:
        err = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz._worker"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            start_new_session=True,  # its own process group: ended with its children
        )
        self.buf = b""
        self.fresh, self.hung = True, False
        if self._line(START_LIMIT) != b"ready":
            self.close()
            raise RuntimeError("fuzz worker did not start (python -m tests.fuzz._worker)")

    def _line(self, limit: float) -> bytes | None:
        """The next line the child writes, or None if it dies or ``limit`` seconds pass."""
        deadline = time.monotonic() + limit
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:  # the child closed its end: it is exiting
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def ask(self, request: dict, limit: float = TIME_LIMIT) -> tuple[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            for attempt in range(3):  # the checkout may be mid-edit: try again a little later
                try:
                    self._start()
                    break
                except RuntimeError:
                    if attempt == 2:
                        raise
                    time.sleep(10)
        limit = START_LIMIT if self.fresh else limit
        t0 = time.monotonic()
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._line(limit)
        if line is not None:
            self.fresh = False
            return "ok", json.loads(line)
        code = self.proc.poll()
        self.hung = code is None
        self.close()
        if code is not None:
            return "died", code
        return "timeout", round(time.monotonic() - t0, 1)

    def close(self) -> None:
        """End the child: its stdin closed (it exits), else killed with the processes it
        started (treeinner's CatBoost probe or .cbm export, a hung one included)."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5 if self.proc.poll() is None and not self.hung else 0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this child leads
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc.stdout.close()
        self.proc = None


class Runner:
    """A treeinner worker and a booster worker, and the unmutated models' answers."""

    def __init__(self, workdir: str, log: str | None = None) -> None:
        self.workdir = workdir
        self.ti, self.bo = Worker(log), Worker(log)
        self.base: dict[str, Any] = {}

    def warm(self, seed: Seed) -> None:
        """Run the unmutated seed once in each worker (imports and Numba's cache loaded)."""
        for worker, kind in ((self.ti, "treeinner"), (self.bo, "booster")):
            if worker.fresh and (kind == "treeinner" or seed.booster):
                worker.ask(_request(kind, seed, seed.path))

    def run(self, m: Mutant, base: dict) -> Case:
        """Write the mutated file, run it through both workers, classify (the seconds the
        case took are kept in ``self.seconds``)."""
        path = os.path.join(self.workdir, f"case{id(self)}.{m.seed.fmt}")
        with open(path, "wb") as fh:
            fh.write(m.data)
        self.warm(m.seed)
        t0 = time.monotonic()
        ti = self.ti.ask(_request("treeinner", m.seed, path))
        self.seconds = time.monotonic() - t0
        bo = None
        if m.seed.booster and ti[0] == "ok" and "ok" in ti[1]:
            self.warm(m.seed)
            bo = self.bo.ask(_request("booster", m.seed, path))
        return classify(m, ti, bo, base)

    def close(self) -> None:
        self.ti.close()
        self.bo.close()


def _request(kind: str, seed: Seed, path: str) -> dict:
    return {"kind": kind, "path": path, "rows": seed.rows, "booster": seed.booster, "fmt": seed.fmt}


class Pool:
    """``jobs`` runners (a treeinner and a booster worker each), kept between calls; use as a
    context manager (``with Pool(2) as pool``), which stops the workers at the end."""

    def __init__(self, jobs: int = 1) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="treeinner-fuzz-")
        log = os.environ.get("TREEINNER_FUZZ_LOG")  # the workers' stderr, for debugging
        self.runners = [Runner(self.tmp.name, log) for _ in range(max(jobs, 1))]

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        for r in self.runners:
            r.close()
        self.tmp.cleanup()

    def map(self, fn: Any, items: list) -> list:
        """``fn(runner, item)`` for every item, one thread per runner, in the items' order."""
        results: list = [None] * len(items)
        lock = threading.Lock()
        todo = iter(range(len(items)))
        errors: list[BaseException] = []

        def work(runner: Runner) -> None:
            try:
                while not errors:
                    with lock:
                        i = next(todo, None)
                    if i is None:
                        return
                    results[i] = fn(runner, items[i])
            except BaseException as e:  # noqa: BLE001 - raised again in the calling thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(r,)) for r in self.runners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


def baselines(seeds: list[Seed], pool: Pool) -> dict[str, dict]:
    """Each seed's unmutated answers, {seed name: {"treeinner": ..., "booster": ...}}."""

    def one(runner: Runner, s: Seed) -> dict:
        ti = runner.ti.ask(_request("treeinner", s, s.path), START_LIMIT)
        bo = runner.bo.ask(_request("booster", s, s.path), START_LIMIT) if s.booster else None
        return {"treeinner": ti, "booster": bo}

    return dict(zip((s.name for s in seeds), pool.map(one, seeds)))


def run_cases(
    mutants: list[Mutant], base: dict[str, dict], pool: Pool, seconds: list | None = None
) -> list[Case]:
    """Every mutated file's ``Case``, in the input order (with ``seconds``, a list:
    treeinner's time per case appended to it)."""

    def one(runner: Runner, m: Mutant) -> Case:
        case = runner.run(m, base[m.seed.name])
        if seconds is not None:
            seconds.append(runner.seconds)
        return case

    return pool.map(one, mutants)


def unmutated(seeds: list[Seed], base: dict[str, dict]) -> list[Case]:
    """The unmutated seed files as cases (``<seed>:none``): each must be ``equal``."""
    out = []
    for s in seeds:
        with open(s.path, "rb") as fh:
            m = Mutant(f"{s.name}:none", s, "none", False, fh.read())
        b = base[s.name]
        bo = b["booster"] if b["treeinner"][0] == "ok" and "ok" in b["treeinner"][1] else None
        case = classify(m, b["treeinner"], bo, b)
        if case.outcome == "refused":  # a valid model refused is not a good outcome
            case = Case(
                case.name, "silent", f"the valid (unmutated) model is refused: {case.detail}"
            )
        out.append(case)
    return out


def fuzz_models(
    cache_dir: str, n: int, seed: int = 0, jobs: int = 1, seconds: list | None = None
) -> list[Case]:
    """The model-file fuzz run: the seed models built (or read from ``cache_dir``), each
    unmutated file, the issue's examples (``models.targeted``), then ``n`` mutated files
    (``models.generate(seeds, n, seed)``)."""
    from tests.fuzz.models import build_seeds, generate, targeted

    seeds = build_seeds(cache_dir)
    mutants = targeted(seeds) + generate(seeds, n, seed)
    with Pool(jobs) as pool:
        base = baselines(seeds, pool)
        return unmutated(seeds, base) + run_cases(mutants, base, pool, seconds)


# ---------------------------------------------------------------------------------- classify


def classify(m: Mutant, ti: tuple, bo: tuple | None, base: dict) -> Case:
    """The outcome of one mutated file from treeinner's answer ``ti``, the booster's ``bo``
    (None when no booster reads the format or treeinner did not load the file) and the
    unmutated seed's answers ``base``."""
    status, answer = ti
    if status == "died":
        return Case(m.name, "crash", f"treeinner worker died (exit code {answer})")
    if status == "timeout":
        return Case(m.name, "hang", f"treeinner took over {TIME_LIMIT:.0f} s")
    if "error" in answer:
        detail = f"{answer['error']}: {answer['message']}"
        if answer["ours"]:
            return Case(m.name, "refused", detail)
        return Case(m.name, "foreign", f"{detail} (at {answer['where']})")
    got = answer["ok"]
    base_ti = base["treeinner"][1].get("ok", {})
    late = _late_refusal(got, base_ti)
    if late:
        return Case(m.name, "refused", f"late: {late}")
    problem = check_results(got, base_ti)
    if problem:
        return Case(m.name, "silent", problem)
    same = same_results(got, base_ti)
    if bo is None:  # no booster reads this format
        if same or not m.invalid:
            return Case(m.name, "equal", "" if same else "a valid value: results finite, additive")
        return Case(
            m.name, "silent", f"accepted an invalid value; results changed: {_diff(got, base_ti)}"
        )
    if bo[0] == "ok" and "ok" in bo[1]:
        diff = compare_booster(got, bo[1]["ok"], m.seed.booster)
        return Case(m.name, "silent", diff) if diff else Case(m.name, "equal")
    why = _first_line(bo[1].get("message", "")) if bo[0] == "ok" else f"{bo[0]} ({bo[1]})"
    if same:
        return Case(m.name, "equal", f"booster refuses ({why}); results unchanged")
    return Case(
        m.name,
        "silent",
        f"{m.seed.booster} refuses the file ({why}) but treeinner loads it; "
        f"results changed: {_diff(got, base_ti)}",
    )


def _first_line(message: str) -> str:
    """A booster's error message without its time stamp, source path and stack trace."""
    line = message.strip().split("\n", 1)[0]
    return re.sub(r"^\[[0-9:]+\] [^ ]*?:[0-9]+: ", "", line)[:160]


def _late_refusal(got: dict, base: dict) -> str:
    """The first result treeinner refused after loading that it gives for the seed."""
    for k, v in got.items():
        if isinstance(v, dict) and "refused" in v and not _refused(base.get(k)):
            return f"{k}: {v['refused']}"
    return ""


def _refused(v: Any) -> bool:
    return isinstance(v, dict) and "refused" in v


def _flat(v: Any) -> np.ndarray:
    if isinstance(v, dict):
        return np.concatenate([_flat(v["values"]), _flat(v["bias"])])
    return np.asarray(v, dtype=np.float64).reshape(-1)


def check_results(got: dict, base: dict) -> str:
    """What is wrong with treeinner's own results: non-finite numbers (where the unmutated
    model's same result is finite: CatBoost stores no gains, its total gain is NaN), or
    attributions whose sum and bias miss the margin."""
    margin = np.asarray(got["margin"], dtype=np.float64)
    for k, v in got.items():
        if _refused(v):
            continue
        a = _flat(v)
        ref = _flat(base[k]) if k in base and not _refused(base[k]) else None
        allowed = ~np.isfinite(ref) if ref is not None and ref.shape == a.shape else False
        bad = ~np.isfinite(a) & ~allowed
        if bad.any():
            return f"{k} has {int(bad.sum())} non-finite values"
        if isinstance(v, dict):
            values, bias = np.asarray(v["values"]), np.asarray(v["bias"])
            total = values.sum(axis=1) + bias
            err = np.abs(total - margin.reshape(total.shape)).max(initial=0.0)
            scale = max(1.0, float(np.abs(margin).max(initial=0.0)))
            if err > ADDITIVE_RTOL * scale:
                return f"{k} is not additive: values.sum(1) + bias misses the margin by {err:.3g}"
    return ""


def same_results(got: dict, base: dict) -> bool:
    """Whether every result equals the unmutated model's (NaN equal to NaN)."""
    if set(got) != set(base):
        return False
    for k, v in got.items():
        if _refused(v) or _refused(base[k]):
            if _refused(v) != _refused(base[k]):
                return False
            continue
        a, b = _flat(v), _flat(base[k])
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
            return False
    return True


def _diff(got: dict, base: dict) -> str:
    out = []
    for k, v in got.items():
        if _refused(v) or _refused(base.get(k)):
            continue
        a, b = _flat(v), _flat(base[k])
        if a.shape != b.shape:
            out.append(f"{k} shape {a.shape} != {b.shape}")
        elif not np.array_equal(a, b, equal_nan=True):
            with np.errstate(invalid="ignore"):  # inf - inf
                out.append(f"{k} off by {np.nanmax(np.abs(a - b)):.3g}")
    return "; ".join(out) or "none"


def _row_close(got: np.ndarray, want: np.ndarray, rtol: float) -> str:
    """'' when every row of ``got`` is within ``rtol`` of its largest |want|, else what is
    off."""
    if got.shape != want.shape:
        return f"shape {got.shape} != booster's {want.shape}"
    n = want.shape[0]
    g, w = got.reshape(n, -1), want.reshape(n, -1)
    if not np.array_equal(np.isfinite(g), np.isfinite(w)):
        return "non-finite where the booster's is finite or vice versa"
    finite = np.isfinite(w)
    scale = np.abs(np.where(finite, w, 0)).max(axis=1)
    err = np.abs(np.where(finite, g, 0) - np.where(finite, w, 0)).max(axis=1)
    err = err / np.where(scale > 0, scale, 1)
    r = int(np.argmax(err))
    return f"row {r} off by {err[r]:.3g} of its scale" if err[r] > rtol else ""


def compare_booster(got: dict, theirs: dict, booster: str) -> str:
    """What differs between treeinner's margins, leaf indices and TreeSHAP values and the
    booster's own ('' when nothing does)."""
    margin = np.asarray(got["margin"], dtype=np.float64)
    n = margin.shape[0]
    bad = _row_close(
        margin.reshape(n, -1), np.asarray(theirs["margin"]).reshape(n, -1), MARGIN_RTOL[booster]
    )
    if bad:
        return f"margin: {bad}"
    if not _refused(got["leaf"]) and theirs["leaf"] is not None:
        mine, leaf = np.asarray(got["leaf"]).reshape(n, -1), np.asarray(theirs["leaf"])
        leaf = leaf.reshape(n, -1)
        if mine.shape != leaf.shape and leaf.shape[1] and mine.shape[1] % leaf.shape[1] == 0:
            mine = mine[:, :: mine.shape[1] // leaf.shape[1]]  # CatBoost: one index per round
        if mine.shape != leaf.shape or not np.array_equal(mine, leaf):
            return "leaf_index differs from the booster's leaf indices"
    return _compare_shap(got["tree_shap"], theirs, margin, booster)


def _compare_shap(att: Any, theirs: dict, margin: np.ndarray, booster: str) -> str:
    if _refused(att) or theirs["shap"] is None:
        return ""
    values = np.asarray(att["values"])
    n, p = values.shape[:2]
    k = 1 if values.ndim == 2 else values.shape[2]
    full = np.concatenate(
        [values.reshape(n, p, k), np.asarray(att["bias"]).reshape(1, 1, k).repeat(n, 0)], axis=1
    )
    ref = np.asarray(theirs["shap"], dtype=np.float64)
    if ref.size != full.size:
        return f"tree_shap: {full.size} values, the booster gives {ref.size}"
    ref = np.transpose(ref.reshape(n, k, p + 1), (0, 2, 1))
    total = ref.sum(axis=1)
    if np.abs(total - margin.reshape(total.shape)).max() > ADDITIVE_RTOL * max(
        1.0, float(np.abs(margin).max())
    ):
        return ""  # the booster's own SHAP values are not additive here: nothing to compare
    bad = _row_close(full, ref, SHAP_RTOL[booster])
    return f"tree_shap: {bad}" if bad else ""


if __name__ == "__main__":
    main()
