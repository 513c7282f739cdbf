"""The bad-input fuzz corpus (``tests.fuzz.inputs``) in CI: a seeded sample of API calls and
command lines, every one refused with treeinner's own error or giving a right result."""

from __future__ import annotations

from tests.fuzz import _outcome, inputs

#: Cases per CI run: about 20 s on two busy cores (the API cases take milliseconds each, the
#: three command lines among them a Python start each). The long run takes all
#: (``benchmarks/bench_fuzz.py``).
N_CASES = 120


def test_bad_inputs_are_refused_or_right():
    cases = inputs.run(n=N_CASES, seed=0)
    counts = _outcome.counts(cases)
    print(counts)
    assert len(cases) == N_CASES
    assert counts["refused"] > N_CASES // 2 and counts["equal"] > 0
    assert any(c.name.startswith("cli:") for c in cases)
    found = _outcome.findings(cases)
    for case in found:
        print(case)
    assert found == []


def test_the_full_corpus_has_its_size():
    """At least 150 API cases and 50 command lines, each named once."""
    api, cli = inputs.api_cases(0), inputs.cli_cases()
    assert len(api) >= 150 and len(cli) >= 50
    names = [c.name for c in api] + [c.name for c in cli]
    assert len(set(names)) == len(names)
    assert sum(c.valid for c in api) >= 20 and sum(c.valid for c in cli) >= 5
