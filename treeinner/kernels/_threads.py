"""Spread a Numba kernel's chunks over threads, instead of compiling it with ``parallel=True``.

A ``parallel=True`` kernel costs seconds of compilation (Numba's parfor passes and the
gufunc it builds around the loop body), paid again on every machine with an empty cache. A
kernel compiled with ``nogil=True`` that does one chunk of the work, called here once per chunk
from a few threads, runs just as fast and compiles like any serial function. The calling thread
does chunks too; the others come from one lazily started pool of ``numba.get_num_threads()``
workers (so ``NUMBA_NUM_THREADS`` and ``numba.set_num_threads`` apply as before).

A call from inside a worker (a kernel run while another is spread) runs its chunks on that
worker, in order, so that workers never wait for each other; after ``fork`` a child starts a
pool of its own.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba

_state = threading.local()  # .worker: this thread is one of the pool's
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0

#: work (rows x trees, or the like) below which a kernel runs on the calling thread alone
SERIAL_WORK = 50_000


def _mark_worker() -> None:
    _state.worker = True


def _reset_after_fork() -> None:
    global _pool, _pool_size, _lock
    _pool, _pool_size, _lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def n_threads() -> int:
    """Threads a spread kernel may use from this thread (1 inside a pool worker)."""
    if getattr(_state, "worker", False):
        return 1
    return max(1, int(numba.get_num_threads()))


def _get_pool(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < size:
            old = _pool
            _pool = ThreadPoolExecutor(
                size, thread_name_prefix="treeinner", initializer=_mark_worker
            )
            _pool_size = size
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def run_chunks(kernel: Callable[..., Any], n_chunks: int, *args: Any) -> None:
    """Call ``kernel(*args, ch, n_chunks)`` for every chunk ``ch`` in ``range(n_chunks)``.

    Chunks run on up to ``n_threads()`` threads (the caller's included), each taking the next
    chunk not yet taken, so more chunks than threads balance uneven work; ``kernel`` must be a
    ``nogil`` Numba function whose chunks write to disjoint outputs. The first exception a chunk
    raises is raised here, after the other threads have stopped.
    """
    threads = min(n_threads(), n_chunks)
    if threads <= 1:
        for ch in range(n_chunks):
            kernel(*args, ch, n_chunks)
        return
    taken = itertools.count()  # next() on a count is atomic under the GIL
    failed: list[BaseException] = []

    def drain() -> None:
        for ch in taken:
            if ch >= n_chunks or failed:
                return
            try:
                kernel(*args, ch, n_chunks)
            except BaseException as exc:  # re-raised by the caller
                failed.append(exc)
                return

    futures = [_get_pool(threads - 1).submit(drain) for _ in range(threads - 1)]
    drain()
    for f in futures:
        f.result()
    if failed:
        raise failed[0]


def n_chunks(work: int, n_items: int, per_thread: int = 4) -> int:
    """Chunks to cut ``n_items`` items (row blocks, ...) into for ``run_chunks``: one (the
    calling thread only) when ``work`` (e.g. rows x trees) is below ``SERIAL_WORK``, where
    waking the threads costs more than they save; else ``per_thread`` per thread, at most one
    per item."""
    if work < SERIAL_WORK:
        return 1
    return max(1, min(n_items, per_thread * n_threads()))
