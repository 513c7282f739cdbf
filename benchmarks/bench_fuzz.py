"""The long fuzz run: thousands of corrupt model files and the bad-input corpus.

Model files (``tests/fuzz/models.py``): small real models of every booster and format
(XGBoost ``.json``/``.ubj``, LightGBM model text and ``dump_model()`` JSON, CatBoost
``.json``/``.cbm``, treeinner ``.npz``), each unmutated file and then ``--n-cases`` mutated
ones (round robin over the seed files, seeded by ``--seed``), each loaded by
``treeinner.load`` in a child process and evaluated there, and loaded by its booster in
another (``tests/fuzz/_worker.py``). Bad API and command-line inputs: ``tests/fuzz/inputs.py``
(``run(n, seed)``), run in a child process of its own.

Each case ends in one of ``tests/fuzz/_outcome.OUTCOMES``: ``refused`` (a
``treeinner.TreeinnerError``) and ``equal`` (the booster's own result on the same file, or
for a file no booster reads, finite and additive results) are good; ``crash``, ``hang``
(over ``_outcome.TIME_LIMIT`` seconds), ``silent`` and ``foreign`` are findings.

Run from the repository root::

    python benchmarks/bench_fuzz.py                     # 2,000 mutated files + every input case
    python benchmarks/bench_fuzz.py --n-cases 300 --jobs 2 --inputs 0
    python benchmarks/bench_fuzz.py --case 'xgb_bin.json:nan@learner...#17@0' --keep /tmp/c

Prints the counts per outcome and per format and every finding (name and detail), and writes
them to ``benchmarks/results/fuzz.json`` (``--findings-md`` also writes the findings grouped
by likely cause as Markdown). A finding's name reproduces it: ``--case NAME`` runs that case
alone and ``--keep DIR`` saves its file.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz import _outcome, _worker, models  # noqa: E402

DEFAULT_CACHE = os.path.join(tempfile.gettempdir(), "treeinner-fuzz-seeds")
OUTPUT = ROOT / "benchmarks" / "results" / "fuzz.json"


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-cases", type=int, default=2000, help="mutated model files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel workers")
    ap.add_argument(
        "--inputs",
        type=int,
        default=-1,
        help="bad-input cases (tests/fuzz/inputs.py; -1: all, 0: none)",
    )
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="directory of the seed models")
    ap.add_argument("--case", action="append", default=[], help="run only this case (again)")
    ap.add_argument("--keep", help="write each finding's (or --case's) file into this directory")
    ap.add_argument("--output", default=str(OUTPUT))
    ap.add_argument("--findings-md", help="also write the findings as Markdown here")
    return ap.parse_args(argv)


def input_cases(n: int, seed: int) -> tuple[list[_outcome.Case], str]:
    """H6's bad-input corpus (``tests.fuzz.inputs.run``) in a child process: its cases, and
    a note when it could not run."""
    code = (
        "import json, sys\n"
        "from tests.fuzz import inputs\n"
        f"cases = inputs.run({None if n < 0 else n}, {seed})\n"
        "sys.stdout.write('\\nCASES ' + json.dumps([c.__dict__ for c in cases]))\n"
    )
    try:
        res = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=3600
        )
    except subprocess.TimeoutExpired:
        return [_outcome.Case("inputs:run", "hang", "the input corpus took over an hour")], ""
    if "No module named 'tests.fuzz.inputs'" in res.stderr:
        return [], "tests/fuzz/inputs.py does not exist yet: input cases skipped"
    marker = res.stdout.rfind("\nCASES ")
    if res.returncode != 0 or marker < 0:
        tail = res.stderr.strip().splitlines()[-1:] or [f"exit code {res.returncode}"]
        outcome = "crash" if res.returncode < 0 else "foreign"
        return [_outcome.Case("inputs:run", outcome, f"the input corpus failed: {tail[0]}")], ""
    cases = json.loads(res.stdout[marker + len("\nCASES ") :])
    return [_outcome.Case(**c) for c in cases], ""


def fmt_of(name: str) -> str:
    """The format a case name belongs to ("xgboost .json", "lightgbm dump", "inputs api")."""
    head = name.split(":", 1)[0]
    if "." not in head:
        return f"inputs {head}"
    model, fmt = head.rsplit(".", 1)
    lib = {"xgb": "xgboost", "lgb": "lightgbm", "cb": "catboost"}[model.split("_")[0]]
    return (
        "treeinner .npz" if fmt == "npz" else f"{lib} {'dump JSON' if fmt == 'dump' else '.' + fmt}"
    )


def table(cases: list[_outcome.Case]) -> tuple[dict, dict]:
    """Counts per outcome, and per format and outcome."""
    per: dict[str, list] = collections.defaultdict(list)
    for c in cases:
        per[fmt_of(c.name)].append(c)
    return _outcome.counts(cases), {k: _outcome.counts(v) for k, v in sorted(per.items())}


def cause(c: _outcome.Case) -> str:
    """A finding's likely cause: outcome, format and its detail with numbers and quoted
    names blanked."""
    detail = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", c.detail)
    detail = re.sub(r"-?\d[\d.e+-]*", "N", detail)[:90]
    return f"{c.outcome} | {fmt_of(c.name)} | {detail}"


def markdown(cases: list[_outcome.Case], counts: dict, per_format: dict, command: str) -> str:
    """Counts, then up to 40 findings grouped by likely cause, each with a reproducer."""
    lines = [
        f"# Fuzz findings ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `{command}`",
        "",
        "| format | " + " | ".join(_outcome.OUTCOMES) + " |",
        "|---" * (len(_outcome.OUTCOMES) + 1) + "|",
    ]
    for k, v in [*per_format.items(), ("**total**", counts)]:
        lines.append(f"| {k} | " + " | ".join(str(v[o]) for o in _outcome.OUTCOMES) + " |")
    groups: dict[str, list] = collections.defaultdict(list)
    for c in _outcome.findings(cases):
        groups[cause(c)].append(c)
    lines += [
        "",
        f"{sum(map(len, groups.values()))} findings in {len(groups)} groups; "
        "reproduce one with `python benchmarks/bench_fuzz.py --case NAME --keep DIR`.",
        "",
    ]
    shown = 0
    for key, group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"## {key} ({len(group)})")
        for c in group[: max(1, min(3, 40 - shown))]:
            lines.append(f"- `{c.name}`: {c.detail}")
            shown += 1
        lines.append("")
    return "\n".join(lines)


def _keep(cases: list[_outcome.Case], mutants: dict, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for c in cases:
        m = mutants.get(c.name)
        if m is not None:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", c.name)[:150]
            Path(folder, f"{safe}.{m.seed.fmt}").write_bytes(m.data)


def run_named(args: argparse.Namespace) -> list[_outcome.Case]:
    """The cases named by ``--case``, made again from their names."""
    seeds = models.build_seeds(args.cache)
    mutants = [models.mutant(seeds, name) for name in args.case]
    with _worker.Pool(1) as pool:
        base = _worker.baselines(sorted({m.seed for m in mutants}, key=lambda s: s.name), pool)
        cases = _worker.run_cases(mutants, base, pool)
    if args.keep:
        _keep(cases, {m.name: m for m in mutants}, args.keep)
    return cases


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    command = "python benchmarks/bench_fuzz.py " + " ".join(argv or sys.argv[1:])
    if args.case:
        for c in run_named(args):
            print(f"{c.outcome:8s} {c.name}\n         {c.detail}")
        return 0
    t0 = time.monotonic()
    seconds: list[float] = []
    cases = _worker.fuzz_models(args.cache, args.n_cases, args.seed, args.jobs, seconds)
    t_models = time.monotonic() - t0
    note = ""
    if args.inputs != 0:
        extra, note = input_cases(args.inputs, args.seed)
        cases += extra
    elapsed = time.monotonic() - t0
    counts, per_format = table(cases)
    report(cases, counts, per_format, note, seconds, elapsed)
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "seed": args.seed,
        "n_cases": args.n_cases,
        "jobs": args.jobs,
        "n_total": len(cases),
        "counts": counts,
        "per_format": per_format,
        "seconds": {
            "total": round(elapsed, 1),
            "model_files": round(t_models, 1),
            "slowest_case": round(max(seconds, default=0.0), 2),
        },
        "note": note,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "versions": models._versions(),
        "findings": [c.__dict__ for c in _outcome.findings(cases)],
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(summary, indent=1) + "\n")
    if args.findings_md:
        Path(args.findings_md).write_text(markdown(cases, counts, per_format, command) + "\n")
    if args.keep:
        seeds = models.build_seeds(args.cache)
        found = _outcome.findings(cases)
        _keep(
            found,
            {n: models.mutant(seeds, n) for n in (c.name for c in found) if "#" in n},
            args.keep,
        )
    return 0


def report(cases, counts, per_format, note, seconds, elapsed) -> None:
    """Print the counts per outcome and per format, then every finding."""
    width = max(map(len, per_format), default=10)
    print(f"{'format':{width}s} " + " ".join(f"{o:>8s}" for o in _outcome.OUTCOMES))
    for k, v in [*per_format.items(), ("total", counts)]:
        print(f"{k:{width}s} " + " ".join(f"{v[o]:8d}" for o in _outcome.OUTCOMES))
    print(
        f"\n{len(cases)} cases in {elapsed:.0f} s; slowest model case "
        f"{max(seconds, default=0.0):.2f} s (limit {_outcome.TIME_LIMIT:.0f} s)"
    )
    if note:
        print(note)
    found = _outcome.findings(cases)
    print(f"\n{len(found)} findings" + (":" if found else ""))
    for c in found:
        print(f"  {c.outcome:8s} {c.name}\n           {c.detail}")


if __name__ == "__main__":
    sys.exit(main())
