"""The command line's computation: every method through the registry (``treeinner._methods``),
row-additive ones in chunks of rows, advancing a tqdm progress bar on stderr; scores alone
(``compute_importance``) or with their sampling errors (``compute_significance``). Dask input
is computed by the library's partition path, each partition task advancing the bar."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from .. import _stats
from .._api import check_alpha, n_rows
from .._dask import is_dask, reporting
from .._errors import InputError
from .._methods import Method, Options, get, significance_table, total_weight

MODES = ("auto", "always", "never")
ENV_VAR = "TREEINNER_PROGRESS"
# automatic chunks of rows: the first has _FIRST_CHUNK rows, later ones are sized from the
# measured speed to take about _TARGET_SECONDS each (at least _MIN_CHUNK rows, at most four
# times the previous chunk), and the rest go in one call once they would take under two targets
_FIRST_CHUNK = 1024
_MIN_CHUNK = 1024
_TARGET_SECONDS = 1.0


def resolve_mode(mode: str | None) -> str:
    """The progress mode: ``mode`` if given, else ``$TREEINNER_PROGRESS``, else ``"auto"``.

    Raises
    ------
    ValueError
        If the mode (or the environment variable) is not one of ``MODES``.
    """
    if mode is None:
        mode = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
        if mode not in MODES:
            raise InputError(f"{ENV_VAR}={mode!r}; expected one of {', '.join(MODES)}.")
    if mode not in MODES:
        raise InputError(f"progress mode {mode!r}; expected one of {', '.join(MODES)}.")
    return mode


def progress_bar(desc: str, mode: str | None = None, total: int = 0, unit: str = "rows") -> tqdm:
    """A tqdm bar on stderr counting rows (or ``unit``).

    ``mode`` (see ``resolve_mode``): ``"auto"`` draws only when stderr is a terminal and the
    work has lasted two seconds; ``"always"`` draws every update from the start on any stream
    (for logs and tests); ``"never"`` draws nothing.
    """
    mode = resolve_mode(mode)
    auto = mode == "auto"
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=None if auto else mode == "never",  # None: only on a terminal
        delay=2.0 if auto else 0.0,
        mininterval=0.1 if auto else 0.0,
        miniters=None if auto else 1,
        **_screen(sys.stderr),
    )


def show_label(progress: tqdm, label: str) -> None:
    """Name what is being computed after the counts (drawn now unless the bar's appearance is
    still delayed)."""
    progress.set_postfix_str(label, refresh=False)
    if not progress.disable and progress.format_dict["elapsed"] >= progress.delay:
        progress.refresh()


def _screen(stream: Any) -> dict[str, Any]:
    """tqdm's size options: follow the terminal, or a fixed 80 x 24 where it reports no size
    (a pseudo-terminal of 0 x 0, on which tqdm would hide the bar)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return {"dynamic_ncols": True}
    if size.columns > 0 and size.lines > 0:
        return {"dynamic_ncols": True}
    return {"ncols": 80, "nrows": 24}


def work_rows(methods: Sequence[str], n: int) -> int:
    """The progress total of ``compute_importance``: one pass over the ``n`` rows per method
    that reads the data (at least 1)."""
    return max(1, n * sum(get(m).uses_data for m in methods))


def _rows(X: Any, a: int, b: int) -> Any:
    return X.iloc[a:b] if isinstance(X, pd.DataFrame) else X[a:b]


def _next_size(rows: int, elapsed: float, remaining: int, size: int) -> int:
    """The next automatic chunk size after ``rows`` rows took ``elapsed`` seconds."""
    rate = rows / max(elapsed, 1e-9)  # rows per second
    if remaining / rate < 2 * _TARGET_SECONDS:
        return remaining
    return int(min(max(_MIN_CHUNK, rate * _TARGET_SECONDS), 4 * size))


def _chunk_sums(
    ens: Any,
    part: Any,
    X: Any,
    y: Any,
    opts: Options,
    chunk_rows: int | None,
    progress: tqdm | None,
) -> Any:
    """The sum over chunks of rows of ``part(ens, X_chunk, y_chunk, opts_chunk)``: row-additive
    sums (arrays, or ``_stats.Moments``, which add over disjoint rows)."""
    n, w = n_rows(X), opts.sample_weight
    acc, start = None, 0
    size = chunk_rows if chunk_rows is not None else min(n, _FIRST_CHUNK)
    while start < n:
        stop = min(n, start + size)
        part_opts = dataclasses.replace(  # shares the cache (node values made once)
            opts, sample_weight=None if w is None else w[start:stop]
        )
        t0 = time.perf_counter()
        done = part(ens, _rows(X, start, stop), _slice(y, start, stop), part_opts)
        elapsed = time.perf_counter() - t0
        acc = done if acc is None else acc + done
        if progress is not None:
            progress.update(stop - start)
        if chunk_rows is None:
            size = _next_size(stop - start, elapsed, n - stop, size)
        start = stop
    return acc


def _chunked(
    ens: Any,
    method: Method,
    X: Any,
    y: Any,
    opts: Options,
    chunk_rows: int | None,
    progress: tqdm | None,
) -> np.ndarray:
    """A row-additive method's scores from one ``compute`` call per chunk of rows: the chunk
    sums are added and finished (divided by the total row weight for a mean)."""
    acc = _chunk_sums(ens, method.compute, X, y, opts, chunk_rows, progress)
    return method.finish(acc, total_weight(X, opts.sample_weight))


def _slice(y: Any, a: int, b: int) -> Any:
    return None if y is None else y[a:b]


def _setup(
    model: Any,
    y: Any,
    sample_weight: Any,
    n_repeats: int,
    random_state: Any,
    reference: Any,
    chunk_rows: Any,
    background: Any = None,
) -> tuple[Any, Any, Options, int | None]:
    """The ensemble, labels, shared ``Options`` and checked chunk size of one computation."""
    import treeinner

    ens = treeinner.from_model(model)
    chunk_rows = _check_chunk_rows(chunk_rows)
    if y is not None and not is_dask(y):
        y = np.asarray(y)
    w = sample_weight
    if w is not None and not is_dask(w):
        w = np.asarray(w, dtype=np.float64)
    opts = Options(
        sample_weight=w,
        reference=reference,
        random_state=random_state,
        n_repeats=n_repeats,
        background=background,
    )
    return ens, y, opts, chunk_rows


def _check_chunk_rows(chunk_rows: Any) -> int | None:
    if chunk_rows is None:
        return None
    if int(chunk_rows) < 1:
        raise InputError(f"chunk_rows must be a positive integer; got {chunk_rows}.")
    return int(chunk_rows)


def compute_importance(
    model: Any,
    X: Any,
    y: Any,
    methods: Sequence[str],
    *,
    sample_weight: Any = None,
    n_repeats: int = 5,
    random_state: Any = 0,
    reference: Any = None,
    chunk_rows: int | None = None,
    progress: tqdm | None = None,
    background: Any = None,
) -> pd.DataFrame:
    """``treeinner.importance`` computed through the method registry in chunks of rows.

    Each method is the registry's (``treeinner._methods``). A row-additive one is computed with
    one ``compute`` call per chunk of rows and combined exactly (the chunk sums are added, and
    divided by the total row weight for a mean), also with ``reference``: one ``Options``
    serves every chunk and method, so node values made from the reference are made once. The
    others are computed with one ``score`` call. Per-output scores are summed over the outputs.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like or DataFrame
        Evaluation rows.
    y : array-like of shape (n_samples,)
    methods : sequence of str
        Registry names (see ``treeinner._methods.resolve``).
    sample_weight : array-like of shape (n_samples,), optional
    n_repeats : int
        Permutations per feature of the methods that permute.
    random_state : int, optional
        Seed of the methods that draw random numbers.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: training data for the methods that use it.
    chunk_rows : int, optional
        Rows per chunk. By default the first chunk has 1024 rows and later ones are sized from
        the measured speed to take about a second each (the rest of the rows go in one call
        when they would take under two seconds).
    progress : tqdm, optional
        Bar to advance by the rows done (its ``total`` should be ``work_rows(methods,
        n_rows)``: every method that reads the data is one pass over the rows); its postfix
        names the method being computed.
    background : array-like, optional
        The background rows of the methods with interventional TreeSHAP.

    Returns
    -------
    pandas.DataFrame
        Indexed by the model's output feature names, one column per method (the total over
        the outputs of a multi-output model).
    """
    ens, y, opts, chunk_rows = _setup(
        model, y, sample_weight, n_repeats, random_state, reference, chunk_rows, background
    )
    specs = [get(m) for m in methods]
    if any(m.pairwise for m in specs):
        raise InputError("a pairwise method gives a matrix, not a column; compute it alone.")
    lazy = is_dask(X)
    n = 0 if lazy else n_rows(X)
    cols: dict[str, np.ndarray] = {}
    for m in specs:
        if progress is not None:
            show_label(progress, m.name)
        ym = y if m.needs_y else None
        if m.row_additive and n > 0:
            score = _chunked(ens, m, X, ym, opts, chunk_rows, progress)
        else:
            with dask_progress(progress, lazy):
                score = m.score(ens, X, ym, opts)
            if progress is not None and m.uses_data and not lazy:
                progress.update(n)
        cols[m.name] = np.asarray(score, dtype=np.float64).sum(axis=1)
    return pd.DataFrame(cols, index=list(ens.output_names))


def dask_progress(progress: tqdm | None, lazy: bool) -> Any:
    """Dask input: its partition tasks advance the bar (``_dask.reporting``)."""
    if progress is None or not lazy:
        return contextlib.nullcontext()
    return reporting(progress)


def compute_significance(
    model: Any,
    X: Any,
    y: Any,
    methods: Sequence[str],
    *,
    alpha: float = 0.05,
    sample_weight: Any = None,
    n_repeats: int = 5,
    random_state: Any = 0,
    reference: Any = None,
    chunk_rows: int | None = None,
    progress: tqdm | None = None,
    background: Any = None,
) -> pd.DataFrame:
    """``treeinner.significance`` computed through the method registry in chunks of rows.

    A row-additive method with per-row moments (``Method.moments``: TreeInner, ForestInner,
    mean |attribution|) is computed with one ``moments`` call per chunk of rows; the chunks'
    ``_stats.Moments`` add up (sums of the per-row terms and of their squares) and give the
    score and its sampling variance of all rows (``Moments.estimate``), exactly as one call
    on all rows. A method with its own estimate (the unbiased gain) is computed on all rows
    at once (``Method.estimate``); a row-additive method without moments in chunks of its
    scores, and the others with one ``score`` call: both with NaN statistics.

    Parameters
    ----------
    model, X, y, methods, sample_weight, n_repeats, random_state, reference, chunk_rows, background
        As for ``compute_importance``.
    alpha : float, default 0.05
        The intervals are ``1 - alpha`` two-sided normal intervals.
    progress : tqdm, optional
        As for ``compute_importance`` (the same total, ``work_rows(methods, n_rows)``).

    Returns
    -------
    pandas.DataFrame
        The significance table of ``treeinner.significance``: one row per method and
        feature (per method, output and feature for multi-output models, the outputs being
        each class and ``total``), with columns ``method``, ``feature`` (``output``),
        ``score``, ``se``, ``ci_low``, ``ci_high``, ``p_value``, ``q_value``; the methods in
        the order given, the features in the model's order.
    """
    alpha = check_alpha(alpha)
    ens, y, opts, chunk_rows = _setup(
        model, y, sample_weight, n_repeats, random_state, reference, chunk_rows, background
    )
    specs = [get(m) for m in methods]
    if any(m.pairwise for m in specs):
        raise InputError("a pairwise method has no significance table; compute it alone.")
    lazy = is_dask(X)
    n = 0 if lazy else n_rows(X)
    est: dict[str, _stats.Estimate | None] = {}
    plain: dict[str, np.ndarray] = {}
    for m in specs:
        if progress is not None:
            show_label(progress, m.name)
        ym = y if m.needs_y else None
        if m.row_additive and n > 0 and m.moments is not None:
            moments = _chunk_sums(ens, m.moments, X, ym, opts, chunk_rows, progress)
            est[m.name] = moments.estimate(m.mean)
            continue
        if m.row_additive and n > 0 and not m.has_se:
            est[m.name] = None
            plain[m.name] = _chunked(ens, m, X, ym, opts, chunk_rows, progress)
            continue
        with dask_progress(progress, lazy):
            est[m.name] = m.estimate(ens, X, ym, opts)
            if est[m.name] is None:
                plain[m.name] = m.score(ens, X, ym, opts)
        if progress is not None and m.uses_data and not lazy:
            progress.update(n)
    return significance_table(est, plain, list(ens.output_names), ens.n_outputs, alpha)
