"""Tests of kernels._threads: chunk kernels spread over the thread pool."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import numba
import numpy as np
import pytest
from numba import njit

from treeinner.kernels import _threads
from treeinner.kernels.routing import chunk_range


@njit(cache=True, nogil=True)
def _fill(out, items, ch, nch):
    lo, hi = chunk_range(ch, nch, items.shape[0])
    for i in range(lo, hi):
        out[i] += items[i] * 2.0


@njit(cache=True, nogil=True)
def _fail_at(out, bad, ch, nch):
    if ch == bad:
        raise ValueError("chunk failed")
    out[ch] = 1.0


@pytest.mark.parametrize("n_items", [0, 1, 7, 64, 1001])
@pytest.mark.parametrize("nch", [1, 2, 3, 8, 40])
def test_every_item_once(n_items, nch):
    items = np.arange(n_items, dtype=np.float64)
    out = np.zeros(n_items)
    _threads.run_chunks(_fill, nch, out, items)
    np.testing.assert_array_equal(out, 2.0 * items)


def test_chunk_range_partitions():
    for n_items in (0, 1, 5, 17, 100):
        for nch in (1, 2, 3, 7, 16, 150):
            ranges = [chunk_range(ch, nch, n_items) for ch in range(nch)]
            covered = [i for lo, hi in ranges for i in range(lo, hi)]
            assert covered == list(range(n_items))


def test_exception_reaches_the_caller():
    for bad in (0, 5):
        out = np.zeros(8)
        with pytest.raises(ValueError, match="chunk failed"):
            _threads.run_chunks(_fail_at, 8, out, bad)
    # the pool still works afterwards
    out = np.zeros(8)
    _threads.run_chunks(_fail_at, 8, out, -1)
    assert out.sum() == 8


def test_threads_used_and_nested_calls_stay_on_their_worker():
    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: nothing is spread")
    seen: dict[int, set[int]] = {}
    inner_threads: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=20)

    def outer(ch, nch):
        if ch < 2:
            barrier.wait()  # two chunks at once: they must be on two threads
        inner_threads.append(_threads.n_threads())
        idents: set[int] = set()

        def inner(k, n):
            with lock:
                idents.add(threading.get_ident())

        _threads.run_chunks(inner, 4)
        with lock:
            seen[ch] = idents

    _threads.run_chunks(outer, 4)
    assert sorted(seen) == [0, 1, 2, 3]
    me = threading.get_ident()
    assert all(len(i) == 1 for i in seen.values())  # a nested call runs on one thread
    others = {next(iter(i)) for i in seen.values()}
    assert me in others and len(others) >= 2
    assert 1 in inner_threads  # inside a worker, n_threads() is 1


def test_numba_thread_count_is_respected():
    before = numba.get_num_threads()
    idents: set[int] = set()
    try:
        numba.set_num_threads(1)
        assert _threads.n_threads() == 1
        assert _threads.n_chunks(10**9, 100) == 4
        _threads.run_chunks(lambda ch, n: idents.add(threading.get_ident()), 16)
    finally:
        numba.set_num_threads(before)
    assert idents == {threading.get_ident()}


def test_n_chunks():
    assert _threads.n_chunks(_threads.SERIAL_WORK - 1, 1000) == 1
    big = _threads.n_chunks(_threads.SERIAL_WORK, 1000)
    assert big == min(1000, 4 * _threads.n_threads())
    assert _threads.n_chunks(10**9, 3) <= 3


def _child_runs_chunks(queue):
    out = np.zeros(100)
    _threads.run_chunks(_fill, 8, out, np.ones(100))
    queue.put(float(out.sum()))


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork")
def test_pool_works_after_fork():
    out = np.zeros(100)
    _threads.run_chunks(_fill, 8, out, np.ones(100))  # the parent's pool is running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child_runs_chunks, args=(queue,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0, "the forked child hung or failed"
    assert queue.get(timeout=5) == 200.0
