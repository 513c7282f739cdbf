"""What a fuzz case can end in, shared by the fuzz modules and the long run
(``benchmarks/bench_fuzz.py``).

A case is good when treeinner refused it with one of its own error types (``refused``) or
gave the result the booster itself gives on the same file, or the documented result for a
valid input (``equal``). Everything else is a finding: ``crash`` (the process died),
``hang`` (over the time limit), ``silent`` (a result that differs from the booster's, or a
non-finite / non-additive one), ``foreign`` (an exception outside ``treeinner.TreeinnerError``).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

OUTCOMES = ("refused", "equal", "crash", "hang", "silent", "foreign")
GOOD = frozenset({"refused", "equal"})
TIME_LIMIT = 10.0  # seconds a case may take


@dataclass(frozen=True)
class Case:
    """One fuzz case's end: its name (which generator, which mutation), outcome, detail."""

    name: str
    outcome: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}")


def counts(cases: Iterable[Case]) -> dict[str, int]:
    """Cases per outcome, every outcome listed (0 where none)."""
    c = collections.Counter(case.outcome for case in cases)
    return {k: c.get(k, 0) for k in OUTCOMES}


def findings(cases: Iterable[Case]) -> list[Case]:
    """The cases that are not good."""
    return [case for case in cases if case.outcome not in GOOD]
