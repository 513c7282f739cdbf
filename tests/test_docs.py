"""The documentation: every code block in docs/**/*.md and README.md runs, and the site builds.

Rules for fenced code blocks (a block is a fence of three or more backticks or tildes):

* ``python``: executed, in page order, in one fresh namespace per page, with a temporary
  directory as the working directory (a page builds its own data and model files in an earlier
  block).
* ``bash`` and ``console`` (in ``console`` blocks only the lines starting with ``$ `` are
  commands, the rest is output): every command, split at ``&&``, is classified by
  :func:`classify` and executed in the same temporary directory when it runs treeinner
  (``treeinner ...``, ``python -m treeinner...``); it must exit with status 0. Installation
  and virtual-environment commands are not executed, the test suite is not started from inside
  itself, and a benchmark script (``python benchmarks/NAME.py``) is checked (the script exists
  and accepts every ``--option`` shown) but not run: benchmarks take minutes. Any other command
  fails the test.
* ``text``: not code (formulas, output).
* Any other language, or none, fails the test.

Two HTML-comment markers change this:

* ``<!-- docs-test: skip -->`` on the line before a fence: the block is not executed (for
  illustrative snippets that use undefined names). Every skipped block is listed in
  ``SKIPPED`` below, so the list cannot grow silently.
* ``<!-- docs-test: setup`` ... ``-->`` around a ``python`` fence: the block is hidden from
  readers but executed like any other python block, in its place in the page (for example to
  write the model file that a README command reads).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

LANGUAGES = {"python", "bash", "console", "text"}
SKIP_MARKER = "<!-- docs-test: skip -->"
SETUP_OPEN = "<!-- docs-test: setup"

# Blocks that are not executed, per file (path relative to the repository root): keep short.
SKIPPED = {
    "README.md": 1,  # "What works today": an overview of calls on an undefined `booster`
}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass
class Block:
    path: Path
    where: str  # "file:line" of the opening fence, for messages
    language: str
    code: str
    skip: bool = False
    setup: bool = False


def _language(info: str) -> str:
    """The first word of a fence's info string, without pandoc-style braces or a dot."""
    words = info.strip().strip("{}").split()
    return words[0].lstrip(".").lower() if words else ""


def parse_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The fenced code blocks of a Markdown file, with their markers."""
    name = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    prev = ""  # the last non-blank line outside a fence
    in_setup = False
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if not m:
            stripped = line.strip()
            if stripped == SETUP_OPEN:
                in_setup = True
            elif stripped == "-->" and in_setup:
                in_setup = False
            if stripped:
                prev = stripped
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        start = i
        body = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and close.strip(fence[0]) == "":
                break
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        else:
            raise AssertionError(f"{name}:{start + 1}: unclosed code fence")
        blocks.append(
            Block(
                path=path,
                where=f"{name}:{start + 1}",
                language=_language(m["info"]),
                code="\n".join(body) + "\n",
                skip=prev == SKIP_MARKER,
                setup=in_setup,
            )
        )
        prev = ""
        i += 1
    return blocks


def markdown_files() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


# ---------------------------------------------------------------------- shell commands
@dataclass(frozen=True)
class Command:
    kind: str  # "run", "install", "suite" or "benchmark"
    argv: tuple[str, ...]


_PYTHONS = {"python", "python3"}
_OPERATORS = {"|", "||", ";", "&", ">", ">>", "<", "2>", "2>&1"}


def _program(word: str) -> str:
    """``.venv/bin/python`` -> ``python``; ``python3.11`` -> ``python3``."""
    name = word.rsplit("/", 1)[-1]
    return re.sub(r"^(python3)\.\d+$", r"\1", name)


def classify(argv: list[str]) -> Command:
    """Decide what the docs test does with one shell command (already split into words).

    * ``treeinner ...`` and ``python -m treeinner[.module] ...``: run.
    * ``pip ...``, ``python -m pip ...``, ``python -m venv ...``, ``source .../activate``:
      installation, not run.
    * ``pytest ...``, ``python -m pytest ...``: the test suite, not run from inside itself.
    * ``python benchmarks/NAME.py ...``: a benchmark, checked but not run.

    Raises
    ------
    ValueError
        For any other command, or for shell operators (pipes, redirections, ``;``).
    """
    if not argv:
        raise ValueError("empty command")
    bad = [w for w in argv if w in _OPERATORS]
    if bad:
        raise ValueError(f"shell operator {bad[0]!r} in {shlex.join(argv)!r}: keep commands plain")
    prog = _program(argv[0])
    rest = tuple(argv[1:])
    if prog == "treeinner":
        return Command("run", ("treeinner", *rest))
    if prog in ("pip", "pip3") or (
        prog in ("source", ".") and rest and rest[0].endswith("activate")
    ):
        return Command("install", tuple(argv))
    if prog == "pytest":
        return Command("suite", tuple(argv))
    if prog in _PYTHONS and len(rest) >= 2 and rest[0] == "-m":
        module = rest[1]
        if module in ("pip", "venv"):
            return Command("install", tuple(argv))
        if module == "pytest":
            return Command("suite", tuple(argv))
        if module == "treeinner" or module.startswith("treeinner."):
            return Command("run", ("python", *rest))
    if prog in _PYTHONS and rest and re.fullmatch(r"benchmarks/\w+\.py", rest[0]):
        return Command("benchmark", rest)
    raise ValueError(f"no rule for the command {shlex.join(argv)!r}")


def shell_commands(block: Block) -> list[list[str]]:
    """The commands of a ``bash`` or ``console`` block, each split into words at ``&&``."""
    lines = block.code.splitlines()
    if block.language == "console":
        lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
    joined, acc = [], ""
    for ln in lines:
        if ln.rstrip().endswith("\\"):
            acc += ln.rstrip()[:-1] + " "
            continue
        joined.append(acc + ln)
        acc = ""
    if acc:
        joined.append(acc)
    commands = []
    for ln in joined:
        words = shlex.split(ln, comments=True)
        cur: list[str] = []
        for w in words:
            if w == "&&":
                commands.append(cur)
                cur = []
            else:
                cur.append(w)
        if cur:
            commands.append(cur)
    return commands


def _check_benchmark(cmd: Command, where: str) -> None:
    script = ROOT / cmd.argv[0]
    assert script.is_file(), f"{where}: {cmd.argv[0]} does not exist"
    source = script.read_text(encoding="utf-8")
    for word in cmd.argv[1:]:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            assert f'"{option}"' in source, f"{where}: {cmd.argv[0]} has no option {option}"


def _run_command(cmd: Command, cwd: Path, where: str) -> None:
    if cmd.argv[0] == "treeinner":
        script = shutil.which("treeinner", path=str(Path(sys.executable).parent))
        if script is not None:
            argv = [script, *cmd.argv[1:]]
        else:  # not installed as a script next to this interpreter: call its entry point
            code = "import sys; from treeinner.cli import main; sys.exit(main())"
            argv = [sys.executable, "-c", code, *cmd.argv[1:]]
    else:
        argv = [sys.executable, *cmd.argv[1:]]
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 0, (
        f"{where}: {shlex.join(cmd.argv)} exited with {res.returncode}\n"
        f"stdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-2000:]}"
    )


# ---------------------------------------------------------------------- tests
ALL_BLOCKS = [b for f in markdown_files() for b in parse_blocks(f)]


def _executable(path: Path) -> bool:
    return any(
        b.path == path and not b.skip and b.language in ("python", "bash", "console")
        for b in ALL_BLOCKS
    )


PAGES = [f for f in markdown_files() if _executable(f)]


def test_every_fence_has_a_known_language():
    unknown = [
        f"{b.where} ({b.language or 'no language'})"
        for b in ALL_BLOCKS
        if b.language not in LANGUAGES
    ]
    assert not unknown, (
        "Code fences must be python, bash or console (executed) or text (not code): "
        + ", ".join(unknown)
    )
    bad_setup = [b.where for b in ALL_BLOCKS if b.setup and b.language != "python"]
    assert not bad_setup, f"setup blocks must be python: {bad_setup}"


def test_skipped_blocks_are_the_listed_ones():
    found: dict[str, int] = {}
    for b in ALL_BLOCKS:
        if b.skip:
            key = str(b.path.relative_to(ROOT))
            found[key] = found.get(key, 0) + 1
    assert found == SKIPPED


def test_docs_have_runnable_examples():
    # the how-to pages and the quickstart are there to be run
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    pages = ["quickstart", "concepts"] + [
        f"howto/{name}"
        for name in (
            "explain_saved_model",
            "select_features",
            "compare_with_shap",
            "categorical",
            "command_line",
        )
    ]
    missing = [page for page in pages if f"docs/{page}.md" not in names]
    assert not missing, f"pages without executed examples: {missing}"


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ("treeinner explain model.json --data valid.csv --target y", "run"),
        ("python -m treeinner.demo --rows 500", "run"),
        (".venv/bin/python -m treeinner.demo", "run"),
        ("pip install -e .[xgboost]", "install"),
        (".venv/bin/pip install -q -e .[test]", "install"),
        ("python3 -m venv .venv", "install"),
        ("python -m pip install treeinner", "install"),
        ("source .venv/bin/activate", "install"),
        (".venv/bin/python -m pytest -q", "suite"),
        ("pytest tests", "suite"),
        ("python benchmarks/simulation.py --booster lightgbm", "benchmark"),
    ],
)
def test_classify_rules(argv, kind):
    assert classify(shlex.split(argv)).kind == kind


@pytest.mark.parametrize(
    "argv",
    [
        "rm -rf /",
        "python script.py",
        "python -m somethingelse",
        "python benchmarks/../evil.py",
        "treeinner explain m.json | tee out",
        "curl https://example.com",
    ],
)
def test_classify_refuses_other_commands(argv):
    with pytest.raises(ValueError):
        classify(shlex.split(argv, posix=True))


def test_benchmark_commands_are_checked():
    _check_benchmark(Command("benchmark", ("benchmarks/simulation.py",)), "here")
    with pytest.raises(AssertionError, match="no option --no-such-option"):
        _check_benchmark(
            Command("benchmark", ("benchmarks/simulation.py", "--no-such-option")), "here"
        )
    with pytest.raises(AssertionError, match="does not exist"):
        _check_benchmark(Command("benchmark", ("benchmarks/no_such_script.py",)), "here")


def test_parser_markers_and_shell_splitting(tmp_path):
    text = f"""text

{SKIP_MARKER}
```python
undefined_name
```

{SETUP_OPEN}
```python
x = 1
```
-->

- item

    ```bash
    python3 -m venv .venv && \\
      .venv/bin/pip install -e .  # comment
    treeinner demo
    ```

~~~console
$ treeinner demo
output line
~~~
````
```
````
"""
    page = tmp_path / "page.md"
    page.write_text(text)
    blocks = parse_blocks(page, root=tmp_path)
    assert [(b.language, b.skip, b.setup) for b in blocks] == [
        ("python", True, False),
        ("python", False, True),
        ("bash", False, False),
        ("console", False, False),
        ("", False, False),
    ]
    assert blocks[4].code == "```\n"
    cmds = shell_commands(blocks[2])
    assert cmds == [
        ["python3", "-m", "venv", ".venv"],
        [".venv/bin/pip", "install", "-e", "."],
        ["treeinner", "demo"],
    ]
    assert shell_commands(blocks[3]) == [["treeinner", "demo"]]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page, tmp_path, monkeypatch):
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
    except ImportError:  # pages that plot fail with a clear ImportError instead
        pass
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    try:
        for b in (b for b in ALL_BLOCKS if b.path == page and not b.skip):
            if b.language == "python":
                exec(compile(b.code, b.where, "exec"), namespace)  # noqa: S102
                ran += 1
            elif b.language in ("bash", "console"):
                for words in shell_commands(b):
                    try:
                        cmd = classify(words)
                    except ValueError as e:
                        raise AssertionError(f"{b.where}: {e}") from None
                    if cmd.kind == "run":
                        _run_command(cmd, tmp_path, b.where)
                        ran += 1
                    elif cmd.kind == "benchmark":
                        _check_benchmark(cmd, b.where)
                        ran += 1
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    assert ran, f"{page.name}: nothing was executed or checked"


def test_api_reference_lists_every_public_name():
    import treeinner
    import treeinner.booster
    import treeinner.plot

    api = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)", api, flags=re.M))
    # top-level names may be documented at their defining module (treeinner.selection....)
    short = {d.rsplit(".", 1)[-1] for d in documented}
    missing = [n for n in treeinner.__all__ if n not in short]
    plots = [
        f"treeinner.plot.{name}"
        for name, obj in vars(treeinner.plot).items()
        if not name.startswith("_")
        and callable(obj)
        and getattr(obj, "__module__", None) == "treeinner.plot"
    ]
    assert {"treeinner.plot.importance", "treeinner.plot.summary"} <= set(plots)
    expected = plots + [f"treeinner.booster.{n}" for n in treeinner.booster.__all__]
    missing += [name for name in expected if name not in documented]
    assert not missing, f"docs/api.md lacks {missing}"


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("index.html", "api/index.html", "howto/select_features/index.html"):
        assert (site / page).is_file()
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "tree_inner" in api and "TreeInnerSelector" in api and "GBMClassifier" in api
