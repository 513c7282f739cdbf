"""Parallel kernels with a serial twin compiled from the same source.

Waking Numba's thread pool costs more than small inputs take to compute, so a kernel that
spreads rows or nodes over threads has a twin that runs on the calling thread; the caller picks
by the amount of work. Both are compiled from one Python function: with ``parallel=True`` its
``prange`` loops run on the thread pool, and without it Numba reads ``prange`` as ``range``.
"""

from __future__ import annotations

from types import FunctionType
from typing import Any

from numba import njit


def parallel_and_serial(fn: FunctionType, **options: Any) -> tuple[Any, Any]:
    """``fn`` compiled as a parallel kernel and as its serial twin ``<name>_serial``.

    Both are cached on disk (``cache=True``; ``options`` go to both ``njit`` calls). Numba names
    a function's cache files after its qualified name and keys their entries by signature and
    bytecode, not by ``parallel``, so the twin is a copy of ``fn`` under its own name: one file
    each, and a process loads, rather than compiles, whichever it calls.
    """
    name = f"{fn.__name__}_serial"
    twin = FunctionType(
        fn.__code__.replace(co_name=name), fn.__globals__, name, fn.__defaults__, fn.__closure__
    )
    twin.__qualname__ = name
    twin.__doc__ = f"``{fn.__name__}`` on the calling thread (no thread start-up)."
    return (
        njit(parallel=True, cache=True, **options)(fn),
        njit(cache=True, **options)(twin),
    )
