"""The subcommands ``explain``, ``select``, ``demo`` and ``warm-up``: check the arguments, read
the files, compute (through the method registry), print and write the results."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import json
import logging
import os
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from .._api import check_count
from .._methods import DEFAULT_CLI_METHODS, Options, get, resolve
from ..attribution import NeedsReference
from . import _io
from ._compute import (
    compute_importance,
    compute_significance,
    dask_progress,
    progress_bar,
    show_label,
    work_rows,
)
from ._errors import PROG, CLIError, one_line

#: The method that reports the booster's stored split gains: left out of the default methods
#: for models that store none (CatBoost's).
STORED_GAINS = "total_gain"


def select_default(name: str) -> Any:
    """The default of ``select_features``' parameter ``name``, which ``treeinner select``
    uses too."""
    import treeinner

    return inspect.signature(treeinner.select_features).parameters[name].default


def select_default_method() -> str:
    """The method ``treeinner select`` uses by default: ``select_features``'s default."""
    return select_default("method")


def _bar(args: argparse.Namespace, desc: str, total: int, unit: str = "rows") -> Any:
    return progress_bar(desc, "never" if args.quiet else args.progress, total, unit)


def _lazy(args: argparse.Namespace) -> bool:
    """Whether --data is read with Dask: several files, or a Dask cluster to compute on."""
    return _io.is_many(args.data) or args.scheduler is not None


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[None]:
    """The Dask cluster of --scheduler for the block: a running one (an address) or a
    ``distributed.LocalCluster`` of --workers processes started and closed here ('local');
    without --scheduler, nothing (Dask input then runs on Dask's threads)."""
    if args.workers is not None and args.scheduler != "local":
        raise CLIError("--workers sets the size of --scheduler local; pass both")
    if args.scheduler is None:
        yield
        return
    if importlib.util.find_spec("distributed") is None:
        raise ImportError("--scheduler needs Dask's distributed: pip install 'treeinner[dask]'")
    from distributed import Client, LocalCluster

    if args.scheduler == "local":
        if args.workers is not None:
            check_count("--workers", args.workers)
        with (
            LocalCluster(
                n_workers=args.workers, dashboard_address=":0", silence_logs=logging.ERROR
            ) as cluster,
            Client(cluster),
        ):
            yield
        return
    import dask

    # not set as default: a Client that fails to connect would stay Dask's default one (every
    # later compute in the process would wait on it); once connected, the block's computes go
    # to it through Dask's config
    try:
        client = Client(args.scheduler, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise CLIError(f"cannot reach the Dask scheduler {args.scheduler!r}: {one_line(e)}") from e
    with client, dask.config.set(scheduler=client.get):
        yield


def _read_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any, Any, Any, int | None]:
    """The model, the data's feature columns, target, weights, the reference data and the
    number of rows (None where Dask input does not record it) of a command's arguments."""
    check_count("--seed", args.seed, minimum=0)
    _io.check_exists(args.model, "model file")
    if _lazy(args):
        df, n = _io.read_dask_table(args.data)
    else:
        _io.check_exists(args.data, "data file")
        df = _io.read_table(args.data)
        n = len(df)
    ens = _io.load_model(args.model)
    soft = args.soft_labels
    X, y, w = _io.split_data(ens, df, args.data, args.target, args.weight, soft_labels=soft)
    reference = None
    if args.reference is not None:
        df = _io.read_table(args.reference, "reference file")
        Xr, yr, wr = _io.split_data(
            ens, df, args.reference, args.target, args.weight, soft_labels=soft
        )
        reference = (Xr, yr) if wr is None else (Xr, yr, wr)
    return ens, X, y, w, reference, n


_REFERENCE_HINT = "pass the training data with --reference FILE"


def _hint_reference(e: ValueError, reference: Any, command: str | None = None) -> None:
    """Re-raise a library error asking for ``reference=`` in the command-line spelling only
    (``--reference FILE``; the Python call it names is left out). ``command``: the
    subcommand, named as the one that needs the data."""
    if reference is not None:
        return
    need: BaseException | None = e
    while need is not None and not isinstance(need, NeedsReference):
        need = need.__cause__ or need.__context__
    if need is not None:
        who = f"{PROG} {command}" if command else "This command"
        raise CLIError(f"{who} needs the training data for {need.what}: {_REFERENCE_HINT}") from e
    text = one_line(e)
    if "reference=" in text:
        # another library message: keep its sentences that do not spell the Python call
        parts = [p for p in text.replace("; ", ". ").split(". ") if "reference=" not in p]
        reason = ". ".join(parts).rstrip(" .;:,") or "This command needs the training data"
        raise CLIError(f"{reason}: {_REFERENCE_HINT}") from e


def _format_table(frame: pd.DataFrame, top: int | None) -> str:
    first = frame.columns[0]
    table = frame.sort_values(first, ascending=False, na_position="last", kind="stable")
    if top is not None:
        table = table.head(top)
    table = table.rename_axis("feature")
    return table.to_string(float_format=lambda v: f"{v:.6g}")


def _format_significance(table: pd.DataFrame, top: int | None, alpha: float) -> str:
    """The significance table as text: one block per method, headed by its name and what it
    is, features sorted by score (for multi-output models the totals over the outputs), and a
    line saying what the columns are."""
    blocks = []
    multi = "output" in table.columns
    for method, block in table.groupby("method", sort=False):
        if multi:
            block = block[block["output"] == "total"]
        block = block.sort_values("score", ascending=False, na_position="last", kind="stable")
        if top is not None:
            block = block.head(top)
        block = block.drop(columns=["method", "output"], errors="ignore").set_index("feature")
        text = block.to_string(
            float_format=lambda v: f"{v:.6g}",
            formatters={c: (lambda v: f"{v:.3g}") for c in ("p_value", "q_value")},
        )
        blocks.append(f"{method}: {get(str(method)).summary}\n{text}")
    level = f"{100 * (1 - alpha):.10g}%"
    note = (
        f"se: standard error over the rows; ci: {level} interval; p_value: one-sided, for "
        "score <= 0 on new data; q_value: Benjamini-Hochberg over the features of a method"
        + ("; totals over the classes (per class in --out)" if multi else "")
        + "; NaN: the method has no one-pass standard error (se), or its score is positive "
        "by construction (p_value, q_value of mean |attribution|)."
    )
    return "\n\n".join(blocks) + "\n\n" + textwrap.fill(note, width=100)


def _check_optional(args: argparse.Namespace, methods: list[str]) -> None:
    """The optional methods' needs: --background for the interventional ones (and only for
    them); a pairwise method alone, without standard errors or a plot."""
    needs = [m for m in methods if get(m).needs_background]
    if needs and args.background is None:
        raise CLIError(
            f"{', '.join(needs)} {'needs' if len(needs) == 1 else 'need'} background rows for "
            "interventional TreeSHAP: pass --background FILE (e.g. a sample of the training data)"
        )
    if args.background is not None and not needs:
        raise CLIError(
            "--background is the data of the interventional methods (--attribution "
            "interventional, or tree_inner_interventional ...); none of the methods uses it"
        )
    pairwise = [m for m in methods if get(m).pairwise]
    if not pairwise:
        return
    if len(methods) > 1:
        raise CLIError(
            f"{pairwise[0]} gives a feature x feature matrix: pass it alone as --method (the "
            "per-feature methods in another run)"
        )
    for option, given in (("--bootstrap", args.bootstrap), ("--plot", args.plot is not None)):
        if given:
            raise CLIError(
                f"{pairwise[0]} gives a matrix without standard errors: leave out {option}"
            )


def _check_explain(args: argparse.Namespace) -> list[str]:
    """The methods to compute, after checking every option that can fail before any work."""
    methods = resolve(args.method or DEFAULT_CLI_METHODS, args.attribution, optional=True)
    _check_optional(args, methods)
    for option in ("--top", "--chunk-rows", "--n-repeats"):
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            check_count(option, value)
    if args.bootstrap < 0 or args.bootstrap == 1:
        raise CLIError(f"--bootstrap must be 0 or at least 2; got {args.bootstrap}")
    if args.bootstrap and args.no_se:
        raise CLIError("--bootstrap adds standard errors and --no-se leaves them out; pass one")
    if _lazy(args) and args.bootstrap:
        raise CLIError(
            "--bootstrap resamples the rows in memory; with data read by Dask (several files, "
            "--scheduler) the standard errors are the one-pass ones (leave out --bootstrap)"
        )
    if _lazy(args) and args.chunk_rows is not None:
        raise CLIError("--chunk-rows sizes in-memory chunks; Dask input goes by partition")
    if not 0.0 < args.alpha < 1.0:
        raise CLIError(f"--alpha must be strictly between 0 and 1; got {args.alpha}")
    _io.check_out(args.out, (".csv", ".json"), "--out")
    _io.check_plot(args.plot)
    return methods


def _drop_missing_gains(ens: Any, X: Any, methods: list[str], reference: Any = None) -> None:
    """Leave the split gains out of the default methods when the model keeps none and no
    --reference gives the training data to compute them from."""
    if STORED_GAINS in methods and reference is None:
        gains = get(STORED_GAINS).score(ens, X, None, Options())
        if np.all(np.isnan(gains)):
            methods.remove(STORED_GAINS)


def _explain_frame(
    args: argparse.Namespace, ens: Any, data: tuple[Any, Any, Any, Any, Any], methods: list[str]
) -> pd.DataFrame:
    """The table of ``explain``: the significance table (chunked; ``compute_significance``),
    the score table with --no-se (chunked; ``compute_importance``), or the score table with
    bootstrap standard errors (one library call) with --bootstrap."""
    import treeinner

    X, y, w, reference, background = data
    if _lazy(args):  # the bar counts the partition tasks as the library schedules them
        bar = _bar(args, f"{PROG} explain", 0, "tasks")
    else:
        total = len(X) if args.bootstrap else work_rows(methods, len(X))
        bar = _bar(args, f"{PROG} explain", total)
    with bar:
        common = {
            "sample_weight": w,
            "n_repeats": args.n_repeats,
            "random_state": args.seed,
            "reference": reference,
            "chunk_rows": args.chunk_rows,
            "progress": bar,
            "background": background,
        }
        if not args.bootstrap and not args.no_se:
            return compute_significance(ens, X, y, methods, alpha=args.alpha, **common)
        if not args.bootstrap:
            return compute_importance(ens, X, y, methods, **common)
        # standard errors need every method on every resample: one library call
        show_label(bar, f"{len(methods)} methods x {args.bootstrap + 1} resamples")
        frame = treeinner.importance(
            ens,
            X,
            y,
            methods=methods,
            sample_weight=w,
            n_repeats=args.n_repeats,
            random_state=args.seed,
            # the reference stays fixed, the rows of --data are resampled
            reference=reference if any(get(m).uses_reference for m in methods) else None,
            n_bootstrap=args.bootstrap,
            background=background,
        )
        bar.update(len(X))
        return frame


def _settings(args: argparse.Namespace, ens: Any, methods: list[str], n_rows: int | None) -> dict:
    """The run's settings recorded in a JSON ``--out`` file."""
    return {
        "model": os.fspath(args.model),
        "data": os.fspath(args.data),
        "target": args.target,
        "weight": args.weight,
        "reference": args.reference,
        "background": args.background,
        "n_rows": None if n_rows is None else int(n_rows),
        "objective": ens.objective,
        "methods": methods,
        "attribution": args.attribution,
        "random_state": args.seed,
        "n_repeats": args.n_repeats,
        "n_bootstrap": args.bootstrap,
        "alpha": args.alpha,
    }


def _pairwise_frame(
    args: argparse.Namespace, ens: Any, data: tuple[Any, Any, Any], method: str
) -> pd.DataFrame:
    """The feature x feature matrix of a pairwise method (one library call)."""
    import treeinner

    X, y, w = data
    lazy = _lazy(args)
    with _bar(args, f"{PROG} explain", 0 if lazy else len(X), "tasks" if lazy else "rows") as bar:
        show_label(bar, method)
        with dask_progress(bar, lazy):
            frame = treeinner.importance(ens, X, y, methods=[method], sample_weight=w)
        if not lazy:
            bar.update(len(X))
    return frame


def _format_pairwise(frame: pd.DataFrame, method: str, top: int | None) -> str:
    """A pairwise matrix as text, headed by the method's name and what it is: with ``top``,
    the rows and columns of the ``top`` features of largest row sum (their per-feature
    score)."""
    if top is not None:
        keep = frame.sum(axis=1).sort_values(ascending=False, kind="stable").index[:top]
        frame = frame.loc[keep, keep]
    text = frame.rename_axis("feature").to_string(float_format=lambda v: f"{v:.6g}")
    note = (
        "rows and columns: features; off the diagonal half the held-out value of the pair's "
        "interaction (the entry (j, k) plus (k, j) is the pair's), on it the main effect's; a "
        "row sums to the feature's tree_inner_shap."
    )
    return f"{method}: {get(method).summary}\n{text}\n\n" + textwrap.fill(note, width=100)


def explain(args: argparse.Namespace) -> int:
    """``treeinner explain``: print (and write, and plot) the significance table (the
    importance table with --no-se or --bootstrap; the matrix of a pairwise method)."""
    methods = _check_explain(args)
    with _cluster(args):
        ens, X, y, w, reference, n = _read_inputs(args)
        background = None
        if args.background is not None:
            background = _io.background_rows(ens, args.background, args.target, args.weight)
        if args.method is None:
            _drop_missing_gains(ens, X, methods, reference)
        try:
            if get(methods[0]).pairwise:
                frame = _pairwise_frame(args, ens, (X, y, w), methods[0])
            else:
                frame = _explain_frame(args, ens, (X, y, w, reference, background), methods)
        except ValueError as e:
            _hint_reference(e, reference, "explain")
            raise
    if get(methods[0]).pairwise:
        print(_format_pairwise(frame, methods[0], args.top))
        sys.stdout.flush()
        if args.out is not None:
            _io.write_pairwise(args.out, frame, _settings(args, ens, methods, n))
        return 0
    long = "method" in frame.columns  # the significance table
    if long:
        print(_format_significance(frame, args.top, args.alpha))
    else:
        print(_format_table(frame, args.top))
    sys.stdout.flush()
    if args.out is not None:
        # wide tables: every column (with --bootstrap also the m_se columns) is a "method"
        names = methods if long else list(frame.columns)
        settings = _settings(args, ens, names, n)
        if long:
            _io.write_significance(args.out, frame, settings)
        else:
            _io.write_table(args.out, frame, settings)
    if args.plot is not None:
        _io.write_plot(args.plot, frame, args.top, args.alpha)
    return 0


def _check_rule(args: argparse.Namespace, method: str) -> None:
    """``select``'s --rule, --alpha and --threshold, checked before any file is read."""
    if args.rule not in (None, "threshold"):
        if args.threshold is not None:
            raise CLIError(
                f"--threshold belongs to --rule threshold; --rule {args.rule} keeps features by "
                "their standard errors (drop --threshold, or pass --rule threshold)"
            )
        if not get(method).has_se:
            raise CLIError(
                f"--rule {args.rule} needs standard errors, which {method} does not give; use "
                "--rule threshold with it"
            )
    if args.alpha is not None and not 0.0 < args.alpha < 0.5:
        raise CLIError(f"--alpha must be strictly between 0 and 0.5; got {args.alpha}")
    if args.threshold is not None and np.isnan(args.threshold):
        raise CLIError("--threshold must be a number, not NaN")


def select(args: argparse.Namespace) -> int:
    """``treeinner select``: print (and write) the features ``select_features`` keeps (with
    --rule and --alpha, the rule and level of its choice; without --alpha, the rule's default
    level, ``treeinner.selection.DEFAULT_ALPHA``)."""
    methods = resolve(args.method, args.attribution)  # fail before reading any file
    if len(methods) != 1:
        raise CLIError(f"select takes one --method; got {args.method!r}")
    method = methods[0]
    if args.top_k is not None:
        check_count("--top-k", args.top_k)
    _check_rule(args, method)
    _io.check_out(args.out, None, "--out")
    if args.strategy == "recursive":
        kept = _select_recursive(args, method)
    else:
        with _cluster(args):
            kept = _select(args, method)
    text = "".join(f"{name}\n" for name in kept)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.out is not None:
        _io.write_text(args.out, text)
    return 0


def _select(args: argparse.Namespace, method: str) -> list[str]:
    """The features ``select_features`` keeps, with a progress bar (rows, or the partition
    tasks of Dask input)."""
    import treeinner

    ens, X, y, w, reference, _ = _read_inputs(args)
    lazy = _lazy(args)
    try:
        with _bar(
            args, f"{PROG} select", 0 if lazy else len(X), "tasks" if lazy else "rows"
        ) as bar:
            show_label(bar, method)
            with dask_progress(bar, lazy):
                kept = treeinner.select_features(
                    ens,
                    X,
                    y,
                    method=args.method,
                    attribution=args.attribution,
                    rule=args.rule,
                    alpha=args.alpha,
                    threshold=args.threshold,
                    top_k=args.top_k,
                    sample_weight=w,
                    reference=reference,
                    random_state=args.seed,
                )
            if not lazy:
                bar.update(len(X))
    except ValueError as e:
        _hint_reference(e, reference, "select")
        raise
    return list(kept)


def _recursive_params(args: argparse.Namespace) -> tuple[dict, float | int]:
    """``--params`` (a JSON object) and ``--step`` (a count when a whole number >= 1)."""
    params: dict = {}
    if args.params is not None:
        try:
            params = json.loads(args.params)
        except json.JSONDecodeError as e:
            raise CLIError(f"--params is not JSON: {e}") from e
        if not isinstance(params, dict):
            raise CLIError(f"--params must be a JSON object, got {args.params!r}")
    step: float | int = args.step
    if step >= 1 and float(step).is_integer():
        step = int(step)
    return params, step


def _select_recursive(args: argparse.Namespace, method: str) -> list[str]:
    """``--strategy recursive``: TreeInnerSelector's recursive elimination of the model's
    booster, rebuilt from the parameters its file stores, on the --reference (training) rows
    and the --data rows."""
    import pandas as pd

    import treeinner
    from treeinner.adapters import training_estimator

    if args.reference is None:
        raise CLIError(
            f"{PROG} select --strategy recursive refits the model: pass its training data with "
            "--reference FILE (the rows of --data are added to them)"
        )
    if _lazy(args):
        raise CLIError("--strategy recursive reads its files into memory: drop --dask")
    for flag in ("rule", "threshold", "top_k"):
        if getattr(args, flag) is not None:
            raise CLIError(f"--{flag.replace('_', '-')} belongs to --strategy rule")
    params, step = _recursive_params(args)
    ens, X, y, w, reference, _ = _read_inputs(args)
    estimator = training_estimator(ens, args.model, params)
    Xr, yr = reference[0], reference[1]
    wr = reference[2] if len(reference) > 2 else None
    if (w is None) != (wr is None):
        raise CLIError("--weight must name a column of both --data and --reference")
    Xall = pd.concat([Xr, X], ignore_index=True)
    yall = np.concatenate([np.asarray(yr), np.asarray(y)])
    wall = None if w is None else np.concatenate([np.asarray(wr), np.asarray(w)])
    selector = treeinner.TreeInnerSelector(
        estimator,
        method=args.method,
        attribution=args.attribution,
        strategy="recursive",
        step=step,
        alpha=args.alpha,
        refit=False,
        verbose=not args.quiet,
        random_state=args.seed,
    )
    selector.fit(Xall, yall, sample_weight=wall)
    return [str(c) for c in selector.get_feature_names_out()]


def demo(args: argparse.Namespace) -> int:
    """``treeinner demo``: run ``python -m treeinner.demo``."""
    if importlib.util.find_spec("xgboost") is None:
        raise ImportError("the demo needs XGBoost: pip install 'treeinner[xgboost]'")
    from .. import demo as demo_module

    return int(demo_module.main([]) or 0)


def warm_up(args: argparse.Namespace) -> int:
    """``treeinner warm-up``: compile and cache every kernel (``treeinner._warmup``)."""
    from .._warmup import warm_up as run

    def report(step: str, seconds: float) -> None:
        sys.stdout.write(f"{seconds:7.1f} s  {step}\n")
        sys.stdout.flush()

    total = run(report)
    sys.stdout.write(f"{total:7.1f} s  in total; the kernels are cached for later processes\n")
    return 0
