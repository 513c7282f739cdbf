"""The public call in progress: which function the user called, for messages that name it and
for warnings given once per call; and the user's own line, where warnings point.
``_api.public`` enters a call; nothing here imports treeinner, so the lowest layers (input
checks, adapters) can read it."""

from __future__ import annotations

import contextvars
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any


@dataclass
class Call:
    """One public function called by the user (or by another public function)."""

    name: str  # as the user spells it: "tree_inner", "Attribution.to_shap"
    fn: Callable[..., Any]
    warned: set = field(default_factory=set)  # keys of the warnings already given

    def takes(self, parameter: str) -> bool:
        try:
            return parameter in inspect.signature(self.fn).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins
            return False


_STACK: contextvars.ContextVar[tuple[Call, ...]] = contextvars.ContextVar(
    "treeinner_calls", default=()
)


@contextmanager
def entered(name: str, fn: Callable[..., Any]) -> Iterator[None]:
    """Run the body as a call of the public function ``fn``."""
    token = _STACK.set((*_STACK.get(), Call(name, fn)))
    try:
        yield
    finally:
        _STACK.reset(token)


def outermost(parameter: str | None = None) -> Call | None:
    """The outermost public call in progress (that takes ``parameter``, if given), or None
    outside any."""
    for call in _STACK.get():
        if parameter is None or call.takes(parameter):
            return call
    return None


def first_time(key: Any) -> bool:
    """Whether the warning ``key`` is new in the outermost call in progress (then it is
    recorded); always True outside any public call."""
    call = outermost()
    if call is None:
        return True
    if key in call.warned:
        return False
    call.warned.add(key)
    return True


def user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning, issued by the function calling this one,
    to the first frame outside treeinner (the user's line)."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "treeinner":
        frame, level = frame.f_back, level + 1
    return level
