"""The model-file fuzzer, a fixed-seed sample (the long run is ``benchmarks/bench_fuzz.py``).

Every seed model of ``tests/fuzz/models.py`` (XGBoost .json/.ubj, LightGBM text and dump
JSON, CatBoost .json/.cbm, treeinner .npz; built once per session in a temporary directory)
unmutated, the issue's examples, then two mutated files per seed file (one per ``.cbm``),
each loaded by treeinner and by its booster in child processes (``tests/fuzz/_worker.py``).
Each must end ``refused`` (a ``treeinner.TreeinnerError``) or ``equal`` (the booster's own
results on the same file); the whole module stays under 90 s on two cores, the seed models'
training included.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("catboost")

from tests.fuzz import _outcome, _worker, models  # noqa: E402

SEED = 17

#: Findings of earlier long runs (``benchmarks/bench_fuzz.py``), kept as regression cases: a
#: .cbm whose corrupt leaf map CatBoost routes past the leaves (its leaf indices were not the
#: booster's), an outlying first-tree leaf whose moved-out intercept rounded the other leaves,
#: a byte-flipped hessian sum 1.2e37 above its children (TreeSHAP missed the margin by 3e18),
#: a CatBoost class list longer than the leaves' outputs (CatBoost then predicts 6 columns).
FOUND = (
    "cb_depthwise.cbm:zero@6790#495@0",
    "cb_depthwise.json:extend@model_info.class_params.class_names#742@1",
    "lgb_multi.txt:huge_int@leaf_value[1]#1412@0",
    "xgb_cat.ubj:flip1#1087@0",
)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[models.Seed]:
    return models.build_seeds(tmp_path_factory.mktemp("fuzz-seeds"))


def test_every_format_has_a_seed(seeds):
    """The corpus covers every booster and format the issue names, and every seed model was
    written in each of its formats (treeinner converts the ``.npz`` ones: a valid model it
    refuses is missing here)."""
    got = {(s.booster or s.model.split("_")[0], s.fmt) for s in seeds}
    want = {("xgboost", "json"), ("xgboost", "ubj"), ("lightgbm", "txt"), ("lgb", "dump"),
            ("catboost", "json"), ("catboost", "cbm"), ("xgb", "npz"), ("lgb", "npz"),
            ("cb", "npz")}  # fmt: skip
    assert want <= got, f"seed files missing: {sorted(want - got)}"
    names = {f"{m}.{f}" for m, (_, _, fmts) in models.MODELS.items() for f in fmts}
    assert names == {s.name for s in seeds}, (
        f"not written: {sorted(names - {s.name for s in seeds})}"
    )


def test_mutants_reproducible(seeds):
    """A case's name makes the same file again, and the mutators do change the files."""
    cases = models.generate(seeds, 2 * len(seeds), SEED) + models.targeted(seeds)
    for m in (cases[-1], cases[len(seeds)]):
        assert models.mutant(seeds, m.name).data == m.data
    changed = [m for m in cases if m.data != Path(m.seed.path).read_bytes()]
    assert len(changed) >= 0.9 * len(cases)


def test_classify_flags_a_wrong_margin(seeds):
    """The classifier is not vacuous: a margin off by 1e-3 against the booster is ``silent``,
    one a booster-refused file changes is ``silent``, a TreeinnerError is ``refused``."""
    s = next(x for x in seeds if x.name == "lgb_reg.txt")
    m = models.Mutant("lgb_reg.txt:test", s, "test", False, b"")
    ti = {"margin": [1.0, 2.0], "leaf": [[0], [1]], "tree_shap": {"refused": "x"}}
    base = {"treeinner": ("ok", {"ok": ti}), "booster": None}
    wrong = {"ok": {**ti, "margin": [1.0, 2.001]}}
    assert (
        _worker.classify(m, ("ok", wrong), ("ok", {"ok": {**ti, "shap": None}}), base).outcome
        == "silent"
    )
    refused = ("ok", {"error": "x"})
    assert _worker.classify(m, ("ok", wrong), refused, base).outcome == "silent"
    assert _worker.classify(m, ("ok", {"ok": ti}), refused, base).outcome == "equal"
    error = {"error": "ModelFormatError", "ours": True, "message": "tree 1", "where": ""}
    assert _worker.classify(m, ("ok", error), None, base).outcome == "refused"
    assert _worker.classify(m, ("died", -11), None, base).outcome == "crash"
    nan = {"ok": {**ti, "margin": [np.nan, 2.0]}}
    assert _worker.classify(m, ("ok", nan), None, base).outcome == "silent"
    bug = {**error, "error": "KeyError", "ours": False}
    assert _worker.classify(m, ("ok", bug), None, base).outcome == "foreign"
    assert _worker.classify(m, ("timeout", 10.0), None, base).outcome == "hang"


def test_fuzz_model_files(seeds):
    """Every unmutated seed (each must be ``equal``), the issue's examples
    (``models.TARGETED``) and two mutated files per seed file (one per ``.cbm``, which
    treeinner converts through CatBoost in a child process, the slow case): no crash, hang,
    silently wrong result or exception outside treeinner's error types."""
    fast = [s for s in seeds if s.fmt != "cbm"]
    mutants = models.targeted(seeds) + [models.mutant(seeds, name) for name in FOUND]
    mutants += models.generate(seeds, len(seeds), SEED)
    mutants += models.generate(fast, len(fast), SEED + 1)
    with _worker.Pool(2) as pool:
        base = _worker.baselines(seeds, pool)
        cases = _worker.unmutated(seeds, base) + _worker.run_cases(mutants, base, pool)
    assert len(cases) == len(seeds) + len(mutants) >= 2 * len(seeds) + len(models.TARGETED)
    outcome = {c.name: c.outcome for c in cases}
    assert outcome[FOUND[0]] == outcome[FOUND[1]] == "refused", outcome
    found = _outcome.findings(cases)
    report = "\n".join(f"{c.outcome} {c.name}: {c.detail}" for c in found)
    assert found == [], f"{len(found)} findings ({_outcome.counts(cases)}):\n{report}"
