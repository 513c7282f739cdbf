"""The package's layering, checked: import-linter's contracts in pyproject.toml, and what an
import graph cannot show (dynamic imports, code branching on the booster's name)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "treeinner"
#: The lower layers, from the adapters down, exactly (see pyproject.toml)
LOWER_LAYERS = [
    "adapters",
    "ensemble",
    "objectives | _input | _thresholds | _dask",
    "kernels",
    "_format | _calls | _errors",
]


def _sources(under: Path = PACKAGE):
    for path in sorted(under.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def _lint_imports(root: Path, package_parent: Path) -> subprocess.CompletedProcess:
    """Run import-linter with ``root``'s pyproject.toml on the package found in
    ``package_parent`` (no cache written to the checkout)."""
    pytest.importorskip("importlinter")
    exe = Path(sys.executable).parent / ("lint-imports" + (".exe" if os.name == "nt" else ""))
    if exe.exists():
        cmd = [str(exe)]
    else:  # the console script is not next to the interpreter: run its entry point
        entry = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
        cmd = [sys.executable, "-c", entry]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package_parent), str(root)])}
    return subprocess.run(
        [*cmd, "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=package_parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]["contracts"]


# ---------------------------------------------------------------------- import-linter
def test_import_contracts_hold():
    run = _lint_imports(ROOT, ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


def test_layers_contract_is_precise_below_the_adapters():
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    assert layers["containers"] == ["treeinner"]
    assert layers["layers"][-len(LOWER_LAYERS) :] == LOWER_LAYERS
    # every module of the package is in a layer (a new module has to be placed)
    named = {
        name.strip().strip("()") for layer in layers["layers"] for name in re.split(r"[|:]", layer)
    }
    children = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    unplaced = children - named - {"__init__", "__main__"}
    assert not unplaced, f"modules in no layer of pyproject.toml's contract: {sorted(unplaced)}"


def test_contract_catches_an_upward_import(tmp_path):
    """A copy of the package whose routing kernels import the ensemble breaks the contract."""
    copy = tmp_path / "treeinner"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.nb[ic]"))
    routing = copy / "kernels" / "routing.py"
    routing.write_text(
        routing.read_text(encoding="utf-8") + "\nfrom ..ensemble import TreeEnsemble  # noqa\n",
        encoding="utf-8",
    )
    run = _lint_imports(ROOT, tmp_path)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "treeinner.kernels is not allowed to import treeinner.ensemble" in run.stdout


# ---------------------------------------------------------------------- what imports cannot show
def test_format_imports_nothing_from_treeinner():
    tree = ast.parse((PACKAGE / "_format.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"_format.py imports from the package (line {node.lineno})"
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
    assert imported <= {"__future__", "typing", "collections", "numpy"}, imported


def test_no_branching_on_the_booster_name_outside_adapters():
    """Booster conventions are TreeEnsemble fields set by the adapters: nothing else compares
    ``.source``, and nothing but the command line (which may show them) reads ``.params``, an
    informational dict."""
    branch = re.compile(r"\.source\s*(==|!=|\bin\b|\bnot\s+in\b)|\bsource\s*==")
    params = re.compile(r"\.params\b")
    offenders = []
    for path, text in _sources():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "adapters":
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if branch.search(line) or (rel.parts[0] != "cli" and params.search(line)):
                offenders.append(f"treeinner/{rel.as_posix()}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_no_dynamic_imports_hidden_from_the_contract():
    """``importlib.import_module`` imports are invisible to import-linter; only the package's
    lazy attributes (``treeinner.booster``, ``treeinner.plot``, ...) use it."""
    offenders = [
        str(path.relative_to(ROOT))
        for path, text in _sources()
        if re.search(r"\bimport_module\(|__import__\(", text) and path != PACKAGE / "__init__.py"
    ]
    assert not offenders, offenders
