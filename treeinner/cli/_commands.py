"""The subcommands ``explain``, ``select`` and ``demo``: check the arguments, read the files,
compute (through the method registry), print and write the results."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
from typing import Any

import numpy as np
import pandas as pd

from .._methods import DEFAULT_CLI_METHODS, Options, get, resolve
from . import _io
from ._compute import compute_importance, progress_bar, show_label, work_rows
from ._errors import PROG, CLIError, one_line

#: The method that reports the booster's stored split gains: left out of the default methods
#: for models that store none (CatBoost's).
STORED_GAINS = "total_gain"


def select_default_method() -> str:
    """The method ``treeinner select`` uses by default: ``select_features``'s default."""
    import treeinner

    return inspect.signature(treeinner.select_features).parameters["method"].default


def _bar(args: argparse.Namespace, desc: str, total: int) -> Any:
    return progress_bar(desc, "never" if args.quiet else args.progress, total)


def _read_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any, Any, Any]:
    """The model, the data's feature columns, target, weights and the reference data of a
    command's arguments."""
    _io.check_exists(args.model, "model file")
    _io.check_exists(args.data, "data file")
    ens = _io.load_model(args.model)
    X, y, w = _io.split_data(ens, _io.read_table(args.data), args.data, args.target, args.weight)
    reference = None
    if args.reference is not None:
        df = _io.read_table(args.reference, "reference file")
        Xr, yr, wr = _io.split_data(ens, df, args.reference, args.target, args.weight)
        reference = (Xr, yr) if wr is None else (Xr, yr, wr)
    return ens, X, y, w, reference


def _hint_reference(e: ValueError, reference: Any) -> None:
    """Re-raise a library error asking for ``reference=`` with the command-line spelling."""
    if reference is None and "reference=" in str(e):
        raise CLIError(
            f"{one_line(e)} From the command line: pass the training data with --reference FILE."
        ) from e


def _format_table(frame: pd.DataFrame, top: int | None) -> str:
    first = frame.columns[0]
    table = frame.sort_values(first, ascending=False, na_position="last", kind="stable")
    if top is not None:
        table = table.head(top)
    table = table.rename_axis("feature")
    return table.to_string(float_format=lambda v: f"{v:.6g}")


def _check_explain(args: argparse.Namespace) -> list[str]:
    """The methods to compute, after checking every option that can fail before any work."""
    methods = resolve(args.method or DEFAULT_CLI_METHODS, args.attribution)
    if args.top is not None and args.top < 1:
        raise CLIError(f"--top must be a positive integer; got {args.top}")
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise CLIError(f"--chunk-rows must be a positive integer; got {args.chunk_rows}")
    if args.bootstrap < 0 or args.bootstrap == 1:
        raise CLIError(f"--bootstrap must be 0 or at least 2; got {args.bootstrap}")
    if args.bootstrap and args.reference is not None:
        raise CLIError("--bootstrap cannot be combined with --reference")
    _io.check_out(args.out, (".csv", ".json"), "--out")
    _io.check_plot(args.plot)
    return methods


def _drop_missing_gains(ens: Any, X: Any, methods: list[str]) -> None:
    """Leave the stored split gains out of the default methods when the model keeps none."""
    if STORED_GAINS in methods:
        gains = get(STORED_GAINS).score(ens, X, None, Options())
        if np.all(np.isnan(gains)):
            methods.remove(STORED_GAINS)


def _explain_frame(
    args: argparse.Namespace, ens: Any, data: tuple[Any, Any, Any, Any], methods: list[str]
) -> pd.DataFrame:
    """The importance table of ``explain``: chunked, or one library call with --bootstrap."""
    import treeinner

    X, y, w, reference = data
    total = len(X) if args.bootstrap else work_rows(methods, len(X))
    with _bar(args, f"{PROG} explain", total) as bar:
        if not args.bootstrap:
            return compute_importance(
                ens,
                X,
                y,
                methods,
                sample_weight=w,
                n_repeats=args.n_repeats,
                random_state=args.seed,
                reference=reference,
                chunk_rows=args.chunk_rows,
                progress=bar,
            )
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
            n_bootstrap=args.bootstrap,
        )
        bar.update(len(X))
        return frame


def _settings(args: argparse.Namespace, ens: Any, frame: pd.DataFrame, n_rows: int) -> dict:
    """The run's settings recorded in a JSON ``--out`` file."""
    return {
        "model": os.fspath(args.model),
        "data": os.fspath(args.data),
        "target": args.target,
        "weight": args.weight,
        "reference": args.reference,
        "n_rows": int(n_rows),
        "objective": ens.objective,
        "methods": list(frame.columns),
        "attribution": args.attribution,
        "random_state": args.seed,
        "n_repeats": args.n_repeats,
        "n_bootstrap": args.bootstrap,
    }


def explain(args: argparse.Namespace) -> int:
    """``treeinner explain``: print (and write, and plot) the importance table."""
    methods = _check_explain(args)
    ens, X, y, w, reference = _read_inputs(args)
    if args.method is None:
        _drop_missing_gains(ens, X, methods)
    try:
        frame = _explain_frame(args, ens, (X, y, w, reference), methods)
    except ValueError as e:
        _hint_reference(e, reference)
        raise
    print(_format_table(frame, args.top))
    sys.stdout.flush()
    if args.out is not None:
        _io.write_table(args.out, frame, _settings(args, ens, frame, len(X)))
    if args.plot is not None:
        _io.write_plot(args.plot, frame, args.top)
    return 0


def select(args: argparse.Namespace) -> int:
    """``treeinner select``: print (and write) the features ``select_features`` keeps."""
    import treeinner

    methods = resolve(args.method, args.attribution)  # fail before reading any file
    if len(methods) != 1:
        raise CLIError(f"select takes one --method; got {args.method!r}")
    method = methods[0]
    if args.top_k is not None and args.top_k < 1:
        raise CLIError(f"--top-k must be a positive integer; got {args.top_k}")
    _io.check_out(args.out, None, "--out")
    ens, X, y, w, reference = _read_inputs(args)
    try:
        with _bar(args, f"{PROG} select", len(X)) as bar:
            show_label(bar, method)
            kept = treeinner.select_features(
                ens,
                X,
                y,
                method=args.method,
                attribution=args.attribution,
                threshold=args.threshold,
                top_k=args.top_k,
                sample_weight=w,
                reference=reference,
                random_state=args.seed,
            )
            bar.update(len(X))
    except ValueError as e:
        _hint_reference(e, reference)
        raise
    text = "".join(f"{name}\n" for name in kept)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.out is not None:
        _io.write_text(args.out, text)
    return 0


def demo(args: argparse.Namespace) -> int:
    """``treeinner demo``: run ``python -m treeinner.demo``."""
    if importlib.util.find_spec("xgboost") is None:
        raise ImportError("the demo needs XGBoost: pip install 'treeinner[xgboost]'")
    from .. import demo as demo_module

    return int(demo_module.main([]) or 0)
