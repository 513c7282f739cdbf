"""Dask collections as evaluation rows: a map over partitions and a tree reduction.

Every row-additive quantity treeinner computes (TreeInner, ForestInner, mean |attribution|,
their moments for standard errors) is a sum over rows, so on a Dask array or DataFrame it is
the same function applied to each partition and the partial sums added up. ``map_add`` does
that: the per-partition function runs where the partition lives, empty partitions contribute
nothing, and the small partial results (per-feature or per-node arrays, ``_stats.Moments``)
are added pairwise in a tree. The ensemble (and anything else every task needs) is put into
the graph once: with a ``distributed`` client it is scattered to the workers once; with the
local schedulers it is one key of the graph that every task reads.

``dask`` is imported only when a Dask collection is passed (``is_dask`` looks at the type's
module), so the core never depends on it.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ._errors import InputError, InputTypeError

__all__ = ["is_dask", "map_add", "map_rows", "partitions", "pieces", "reporting", "row_counts"]

# The progress bar of ``reporting``: told of every partition task of ``map_add`` when it is
# scheduled (its ``total`` grows) and when it is done (``update(1)``).
_PROGRESS: contextvars.ContextVar[Any] = contextvars.ContextVar("treeinner_dask_progress")


@contextlib.contextmanager
def reporting(bar: Any) -> Iterator[None]:
    """Within the block, ``map_add`` reports its partition tasks to ``bar`` (a tqdm bar, or
    anything with a ``total`` and ``update(k)``): ``total`` grows by their number when they
    are scheduled, ``update(1)`` as each finishes, whichever scheduler runs them."""
    token = _PROGRESS.set(bar)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def is_dask(obj: Any) -> bool:
    """Whether ``obj`` is a Dask collection (array, DataFrame or Series), without importing
    Dask."""
    return type(obj).__module__.partition(".")[0] in ("dask", "dask_expr")


def _is_frame(obj: Any) -> bool:
    return hasattr(obj, "npartitions") and hasattr(obj, "map_partitions")


def _whole_rows(X: Any) -> Any:
    """A Dask array with all its columns in every chunk (rechunked only where needed; the
    row chunks are kept, empty ones included), or a DataFrame as it is."""
    if _is_frame(X):
        return X
    if X.ndim not in (1, 2):
        raise InputError(f"X must be 2-D; got a Dask array with {X.ndim} dimensions.")
    if X.ndim == 2 and X.numblocks[1] != 1:
        X = X.rechunk((X.chunks[0], (X.shape[1],)))
    return X


def _row_chunks(X: Any) -> Sequence[float] | None:
    """The row counts of the partitions of ``X`` where Dask knows them (arrays), else None."""
    if _is_frame(X):
        return None
    chunks = X.chunks[0]
    return None if any(np.isnan(c) for c in chunks) else chunks


def partitions(X: Any, y: Any = None, sample_weight: Any = None) -> list[Any]:
    """The partitions of a Dask array (all columns in each) or DataFrame, as Delayed objects
    in row order: one per row chunk of ``X``, as ``pieces`` cuts them with ``y`` and
    ``sample_weight``."""
    return _cut(X, y, sample_weight)[0]


def _blocks_of(X: Any) -> list[Any]:
    if _is_frame(X):
        return list(X.to_delayed())
    blocks = X.to_delayed()
    return list(blocks[:, 0] if X.ndim == 2 else blocks)


def row_counts(X: Any, y: Any = None, sample_weight: Any = None) -> list[int]:
    """The row count of every partition of the Dask collection ``X`` (as ``pieces`` cuts it
    with ``y`` and ``sample_weight``): from its chunks where Dask knows them, else computed (a
    pass over the partitions)."""
    import dask

    X = _whole_rows(X)
    counts = _row_chunks(X)
    if counts is None:
        counts = dask.compute(*[_len(p) for p in partitions(X, y, sample_weight)])
    return [int(c) for c in counts]


# the columns a Dask DataFrame X carries for its labels and weights within ``pieces``
_JOINED = {"y": "__treeinner_y__", "sample_weight": "__treeinner_w__"}


def _co_aligned(X: Any, v: Any) -> bool:
    """Whether the Dask DataFrame X and Series v come from the same data by row-wise
    operations (a column of the same frame), so that joining them moves no rows."""
    try:
        from dask.dataframe.dask_expr._expr import are_co_aligned
    except ImportError:  # another Dask: only partition counts can be compared
        return False
    return bool(are_co_aligned(X.expr, v.expr))


def _columns_of(part: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    """One partition of a joined frame split back into X and its label/weight columns."""
    return (part.drop(columns=list(names)), *(part[n] for n in names))


def _cut(X: Any, y: Any, sample_weight: Any) -> tuple[list[Any], dict[str, list[Any]]]:
    """The partitions of X, and those of the labels and weights that are columns of the same
    Dask DataFrame but partitioned otherwise (read with X, as one frame), by name (``y``,
    ``sample_weight``)."""
    import dask

    X = _whole_rows(X)
    blocks = _blocks_of(X)
    joined = {  # as many partitions as X: the same ones, read apart (no copy of the frame)
        k: v
        for k, v in (("y", y), ("sample_weight", sample_weight))
        if _is_frame(X)
        and is_dask(v)
        and _is_frame(v)
        and v.ndim == 1
        and len(_blocks_of(v)) != len(blocks)
        and _co_aligned(X, v)
    }
    if not joined:
        return blocks, {}
    frame = X.assign(**{_JOINED[k]: v for k, v in joined.items()})
    names = tuple(_JOINED[k] for k in joined)
    split = dask.delayed(_columns_of, pure=True, nout=1 + len(names))
    cut = [split(p, names) for p in frame.to_delayed()]
    return [c[0] for c in cut], {k: [c[i] for c in cut] for i, k in enumerate(joined, start=1)}


def pieces(
    X: Any, y: Any = None, sample_weight: Any = None, counts: Sequence[int] | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """The partitions of the Dask collection ``X`` (Delayed, in row order) and ``y`` and
    ``sample_weight`` cut alike (None where not given).

    Labels and weights that are columns of the same Dask DataFrame as X (``frame[cols]``,
    ``frame["y"]``) are read with X, as one frame: Dask may partition a projection of few
    columns differently from one of many. Other Dask collections must be partitioned as X;
    in-memory arrays are cut by the partitions' row counts (``counts`` where the caller
    knows them)."""
    parts, joined = _cut(X, y, sample_weight)
    X = _whole_rows(X)
    cut = [
        joined[k] if k in joined else _split_like(v, X, parts, k, counts)
        for k, v in (("y", y), ("sample_weight", sample_weight))
    ]
    return parts, cut[0], cut[1]


def _split_like(
    v: Any, X: Any, parts_X: list[Any], name: str, counts: Sequence[int] | None = None
) -> list[Any]:
    """``v`` (labels or row weights) cut into pieces aligned with the partitions of ``X``,
    row i of v with row i of X as in memory: a Dask collection by its own partitions where it
    has as many as X (their lengths are checked inside each task), else cut again along X's
    partitions (their row counts computed); an in-memory array by the partitions' row counts
    (``counts`` where the caller knows them)."""
    import dask

    if v is None:
        return [None] * len(parts_X)
    if is_dask(v):
        if not _is_frame(v) and not _is_frame(X) and _row_chunks(X) is not None:
            v = v.rechunk((X.chunks[0],))  # arrays: align the chunks with X's
        parts = _blocks_of(_whole_rows(v))
        if len(parts) == len(parts_X):
            return parts
        if counts is None:
            counts = dask.compute(*[_len(p) for p in parts_X])
        arr = v.to_dask_array(lengths=True) if _is_frame(v) else v.compute_chunk_sizes()
        if arr.shape[0] != sum(counts):
            raise InputError(f"{name} has {arr.shape[0]} rows but X has {sum(counts)}.")
        return _blocks_of(arr.rechunk((tuple(int(c) for c in counts),)))
    arr = np.asarray(v)
    if counts is None:
        counts = dask.compute(*[_len(p) for p in parts_X])
    ends = np.cumsum(counts)
    if arr.shape[0] != (ends[-1] if len(ends) else 0):
        raise InputError(f"{name} has {arr.shape[0]} rows but X has {int(ends[-1])}.")
    starts = ends - np.asarray(counts)
    return [arr[int(a) : int(b)] for a, b in zip(starts, ends, strict=True)]


def _len(part: Any) -> Any:
    import dask

    return dask.delayed(len, pure=True)(part)


def _shared(obj: Any) -> Any:
    """``obj`` as one piece of data every task reads: scattered to all workers once when a
    ``distributed`` client is running, else one key of the graph."""
    import dask

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):  # no distributed, or no client running
        return dask.delayed(obj, pure=True, traverse=False)
    # in a list: one future for the whole object (a tuple would be scattered item by item)
    return client.scatter([obj], broadcast=True, hash=False)[0]


def _scattered(objs: list[Any]) -> list[Any]:
    """``objs`` sent to the workers ahead of the tasks that read them when a ``distributed``
    client is running (large arrays stay out of the graph), else as they are."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return objs
    return client.scatter(objs, hash=False)


def _check_pieces(n: int, pieces: tuple[Any, ...], names: tuple[str, ...]) -> None:
    for piece, name in zip(pieces, names):
        if piece is not None and len(piece) != n:
            raise InputError(
                f"{name} has {len(piece)} rows in a partition where X has {n}; pass {name} "
                "partitioned as X."
            )


def _task(fn: Callable[..., Any], shared: Any, part: Any, y: Any, w: Any, *extra: Any) -> Any:
    """``fn(shared, part, y, w, *extra)`` on one partition; None (nothing to add) for an
    empty one."""
    n = len(part)
    _check_pieces(n, (y, w), ("y", "sample_weight"))
    if n == 0:
        return None
    return fn(shared, part, y, w, *extra)


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, tuple):
        return tuple(map(operator.add, a, b))
    return a + b


def map_add(
    fn: Callable[..., Any],
    shared: Any,
    X: Any,
    y: Any = None,
    sample_weight: Any = None,
    *,
    counts: Sequence[int] | None = None,
    extra: Sequence[Sequence[Any]] | None = None,
) -> Any:
    """``fn(shared, X_part, y_part, w_part)`` summed over the partitions of the Dask
    collection ``X`` (``y`` and ``sample_weight`` cut alike; either may be None).

    ``fn`` returns something that adds with ``+`` (arrays, ``Moments``) or a tuple of such;
    ``shared`` is shipped to the workers once. ``counts``: the partitions' row counts, where
    the caller knows them (else computed when an in-memory ``y`` must be cut). ``extra``: for
    each partition a list of further arguments, one task each, ``fn(shared, X_part, y_part,
    w_part, e)``, all added together. An InputError when X has no rows (a score over no rows
    would be 0 for every feature, which no data supports).
    """
    import dask

    if not is_dask(X):
        raise InputTypeError(f"map_add takes a Dask collection, got {type(X).__name__}.")
    parts, ys, ws = pieces(X, y, sample_weight, counts)
    data = _shared(shared)
    task = dask.delayed(_task, pure=True)
    if extra is None:
        level = [task(fn, data, p, yp, wp) for p, yp, wp in zip(parts, ys, ws, strict=True)]
    else:
        level = [
            task(fn, data, p, yp, wp, e)
            for p, yp, wp, es in zip(parts, ys, ws, extra, strict=True)
            for e in _scattered(list(es))
        ]
    bar = _PROGRESS.get(None)
    if bar is not None:
        bar.total += len(level)
        bar.refresh()
        result = _reported(level, bar)
    else:
        (result,) = dask.compute(_tree(level))
    if result is None:
        raise InputError("X has no rows; scores need at least one.")
    return result


def _tree(level: list[Any]) -> Any:
    """The sum of the Delayed values ``level``, added pairwise: the partial sums meet in a
    tree, not all on one worker."""
    import dask

    add = dask.delayed(_add, pure=True)
    while len(level) > 1:
        nxt = [add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _reported(tasks: list[Any], bar: Any) -> Any:
    """The sum of the Delayed values ``tasks``, with ``bar.update(1)`` as each is done: as
    the futures of a ``distributed`` client complete (their small results added here), else
    from the local scheduler's callback after each task."""
    import dask

    try:
        from distributed import as_completed, default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is not None:
        total = None
        for future in as_completed(client.compute(tasks)):
            total = _add(total, future.result())
            bar.update(1)
        return total
    from dask.callbacks import Callback

    keys = {t.key for t in tasks}

    class _Done(Callback):
        def _posttask(self, key: Any, *_: Any) -> None:
            if key in keys:
                bar.update(1)

    with _Done():
        (result,) = dask.compute(_tree(tasks))
    return result


def _rows_task(
    fn: Callable[..., Any], shared: Any, part: Any, tail: tuple, dtype: Any
) -> np.ndarray:
    """``fn(shared, part)`` on one partition; an empty (0, *tail) array for an empty one."""
    if len(part) == 0:
        return np.zeros((0, *tail), dtype=dtype)
    return fn(shared, part)


def map_rows(
    fn: Callable[..., Any], shared: Any, X: Any, tail: tuple, dtype: Any = np.float64
) -> Any:
    """A lazy Dask array of ``fn(shared, X_part)`` (arrays of shape (rows, *tail))
    over the partitions of the Dask collection ``X``, in row order: one chunk per non-empty
    partition (row counts as X's, unknown (NaN) for a DataFrame until computed), ``shared``
    shipped to the workers once."""
    import dask
    import dask.array as da

    X = _whole_rows(X)
    parts = partitions(X)
    counts = _row_chunks(X) or [np.nan] * len(parts)
    data = _shared(shared)
    task = dask.delayed(_rows_task, pure=True)
    pieces = [
        da.from_delayed(task(fn, data, p, tail, dtype), shape=(n, *tail), dtype=dtype)
        for p, n in zip(parts, counts, strict=True)
    ]
    return da.concatenate(pieces, axis=0)
