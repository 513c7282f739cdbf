"""The ``treeinner`` command line: explain a saved model file, select features, run the demo.

**treeinner explain** MODEL --data FILE --target COLUMN [--method M ...] [--attribution A]
[--out FILE.csv|FILE.json] [--plot FILE.png] [--quiet]: reads a model file (XGBoost
``.json``/``.ubj``, LightGBM ``.txt``, CatBoost ``.cbm``/``.json``, treeinner ``.npz``; the type
is recognised from the content) and a data set (``.csv``, optionally compressed, ``.tsv`` or
``.parquet``, by extension), splits off the target column (and ``--weight COLUMN``, if given)
and prints one importance column per method, rows sorted by the first method (``--top N``
prints and plots only N). The default methods are ``tree_inner`` (TreeInner with the
``--attribution``, PreDecomp by default), ``abs_shap`` (mean |TreeSHAP|, the usual SHAP bar
plot) and ``total_gain`` (the booster's split gains; left out for models that store none, such
as CatBoost's). ``--out`` writes the full table in the model's feature order (CSV, or JSON
with the run's settings; for multiclass models every column holds the total over the
classes, as in ``treeinner.importance``), ``--plot`` a bar chart of the methods side by side
(``treeinner.plot.importance``; ``--bootstrap B`` adds standard errors and error bars).
Data columns the model does not use are ignored with a warning; missing ones are an error.
Object (string) columns of categorical features become pandas categoricals. ``--reference
FILE`` gives the training data for models that store no hessian covers (CatBoost losses other
than RMSE). ``--seed`` (default 0) seeds permutation importance and the unbiased gain.

**treeinner select** MODEL --data FILE --target COLUMN [--method M] [--attribution A]
[--threshold T] [--top-k K] [--out FILE]: prints the names of the features
``treeinner.select_features`` keeps, one per line (and writes them to ``--out``).

**treeinner demo**: runs ``python -m treeinner.demo`` (needs XGBoost).

Errors: bad input (missing or unreadable files, an unknown target column or method, data that
does not match the model's features, labels invalid for the model's objective, empty data, an
unsupported file type, a missing optional dependency) prints one line ``treeinner: error:
...`` on stderr and exits with status 1; command-line usage errors exit with status 2.
Anything else is a bug: it is also reported on one line (exit status 3) unless ``--debug`` is
given, which shows the full traceback of any error. Library warnings are printed as
``treeinner: warning: ...`` lines.

Progress: row-additive methods (TreeInner and ForestInner with any attribution, and the mean
|attribution| baselines) are computed over chunks of rows, each chunk one call into the public
API, and combined exactly (sums; means weighted by the chunk sizes). A progress bar on stderr
advances per chunk; ``permutation`` and ``unbiased_gain`` advance it once, as does everything
with ``--bootstrap`` (one library call). The bar appears only when stderr is a terminal and the
work has lasted over two seconds; ``--progress always|never`` or the environment variable
``TREEINNER_PROGRESS`` overrides that, ``--quiet`` turns it off.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._progress import MODES, Progress, resolve_mode
from .importance import ALL_METHODS, _total

PROG = "treeinner"

#: Every method name ``explain`` and ``select`` accept (the columns of ``treeinner.importance``).
METHODS = ALL_METHODS
ATTRIBUTIONS = ("predecomp", "saabas", "shap")
DEFAULT_METHODS = ("tree_inner", "abs_shap", "total_gain")
_SUFFIX = {"predecomp": "", "saabas": "_saabas", "shap": "_shap"}
_ABS = {"abs_predecomp": "predecomp", "abs_saabas": "saabas", "abs_shap": "tree_shap"}
_CSV = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".csv.zip")
_TSV = (".tsv", ".tsv.gz", ".tab")
_PARQUET = (".parquet", ".pq")
# automatic chunks of rows: the first has _FIRST_CHUNK rows, later ones are sized from the
# measured speed to take about _TARGET_SECONDS each (at least _MIN_CHUNK rows, at most four
# times the previous chunk), and the rest go in one call once they would take under two targets
_FIRST_CHUNK = 1024
_MIN_CHUNK = 1024
_TARGET_SECONDS = 1.0


class CLIError(Exception):
    """A user error the command line reports on one line (exit status 1)."""


class _UsageError(Exception):
    """A command-line usage error (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------
# methods and the chunked computation


def canonical_methods(methods: Sequence[str], attribution: str = "predecomp") -> list[str]:
    """Resolve method names to ``treeinner.importance`` column names.

    ``tree_inner`` and ``forest_inner`` take the attribution (``tree_inner`` with ``"shap"`` is
    ``tree_inner_shap``); explicit names such as ``forest_inner_saabas`` are kept. Names may
    also be given comma-separated. Duplicates are dropped, the order is kept.

    Parameters
    ----------
    methods : sequence of str
    attribution : {"predecomp", "saabas", "shap"}

    Returns
    -------
    list of str

    Raises
    ------
    CLIError
        For an unknown method or attribution.
    """
    if attribution not in ATTRIBUTIONS:
        raise CLIError(
            f"unknown attribution {attribution!r}; choose from {', '.join(ATTRIBUTIONS)}"
        )
    out: list[str] = []
    for item in methods:
        for m in str(item).split(","):
            m = m.strip()
            if not m:
                continue
            if m not in METHODS:
                raise CLIError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
            if m in ("tree_inner", "forest_inner"):
                m += _SUFFIX[attribution]
            if m not in out:
                out.append(m)
    if not out:
        raise CLIError("no method given")
    return out


def _inner_parts(method: str) -> tuple[str, str]:
    base = "tree_inner" if method.startswith("tree_inner") else "forest_inner"
    rest = method[len(base) :].lstrip("_")
    return base, rest or "predecomp"


def _row_additive(method: str, reference: Any) -> bool:
    """Whether the method is a sum (or mean) over rows computed chunk by chunk here.

    With ``reference`` the PreDecomp node values are recomputed from the training data on every
    call, so the methods that use them run in one call instead.
    """
    if method.startswith(("tree_inner", "forest_inner")):
        return reference is None or _inner_parts(method)[1] != "predecomp"
    if method in _ABS:
        return reference is None or method != "abs_predecomp"
    return False


def _rows(X: Any, a: int, b: int) -> Any:
    return X.iloc[a:b] if isinstance(X, pd.DataFrame) else X[a:b]


def _chunk_sum(ens: Any, method: str, X: Any, y: Any, w: Any) -> np.ndarray:
    """The unnormalized per-feature sum of ``method`` over the rows of one chunk."""
    import treeinner

    if method in _ABS:
        attr = getattr(treeinner, _ABS[method])(ens, X)
        v = np.abs(attr.values)
        v = v.sum(axis=2) if v.ndim == 3 else v
        return v.sum(axis=0)
    base, a = _inner_parts(method)
    fn = getattr(treeinner, base)
    return _total(fn(ens, X, y, attribution=a, sample_weight=w)).to_numpy()


def _one_call(
    ens: Any,
    method: str,
    X: Any,
    y: Any,
    w: Any,
    n_repeats: int,
    random_state: Any,
    reference: Any,
) -> np.ndarray:
    import treeinner

    frame = treeinner.importance(
        ens,
        X,
        y,
        methods=[method],
        sample_weight=w,
        n_repeats=n_repeats,
        random_state=random_state,
        reference=reference,
    )
    return frame[method].to_numpy()


def compute_importance(
    model: Any,
    X: Any,
    y: Any,
    methods: Sequence[str],
    sample_weight: Any = None,
    n_repeats: int = 5,
    random_state: Any = 0,
    reference: Any = None,
    chunk_rows: int | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """``treeinner.importance`` computed in chunks of rows, advancing a progress bar.

    Row-additive methods (``tree_inner*``, ``forest_inner*``: sums over rows; ``abs_*``: means
    over rows) are computed with one public-API call per chunk of rows and combined exactly:
    chunk sums are added, and the ``abs_*`` sums divided by the total row count (the mean
    weighted by chunk size). The result equals ``treeinner.importance(model, X, y, methods,
    sample_weight, n_repeats, random_state)`` up to floating-point summation order.
    ``permutation``, ``unbiased_gain`` and ``total_gain`` are computed in one call.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like or DataFrame
        Evaluation rows.
    y : array-like of shape (n_samples,)
    methods : sequence of str
        Column names of ``treeinner.importance`` (see ``canonical_methods``).
    sample_weight : array-like of shape (n_samples,), optional
    n_repeats : int
        Permutations per feature for ``permutation``.
    random_state : int, optional
        Seed of ``permutation`` and ``unbiased_gain``.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values (and the unbiased gain's
        training sums) from the training data, for models that store no hessian covers. The
        methods using it run in one call.
    chunk_rows : int, optional
        Rows per chunk. By default the first chunk has 1024 rows and later ones are sized from
        the measured speed to take about a second each (the rest of the rows go in one call
        when they would take under two seconds).
    progress : Progress, optional
        Bar to advance; its ``total`` is set here, in rows (every one-call method except
        ``total_gain`` counts as one pass over the rows).

    Returns
    -------
    pandas.DataFrame
        Indexed by the model's output feature names, one column per method.
    """
    import treeinner

    ens = treeinner.from_model(model)
    n = len(X) if isinstance(X, pd.DataFrame) else np.shape(X)[0]
    yv = np.asarray(y)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if chunk_rows is not None and int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be a positive integer; got {chunk_rows}.")
    if progress is not None:
        progress.total = max(1, sum(n for m in methods if m != "total_gain"))
    cols: dict[str, np.ndarray] = {}
    for m in methods:
        if progress is not None:
            progress.set_label(m)
        if not _row_additive(m, reference) or n == 0:
            cols[m] = _one_call(ens, m, X, yv, w, n_repeats, random_state, reference)
            if progress is not None and m != "total_gain":
                progress.advance(n)
            continue
        acc = None
        start = 0
        size = int(chunk_rows) if chunk_rows is not None else min(n, _FIRST_CHUNK)
        while start < n:
            stop = min(n, start + size)
            t0 = time.perf_counter()
            part = _chunk_sum(
                ens, m, _rows(X, start, stop), yv[start:stop], None if w is None else w[start:stop]
            )
            elapsed = time.perf_counter() - t0
            acc = part if acc is None else acc + part
            if progress is not None:
                progress.advance(stop - start)
            if chunk_rows is None:
                rate = (stop - start) / max(elapsed, 1e-9)  # rows per second
                remaining = n - stop
                if remaining / rate < 2 * _TARGET_SECONDS:
                    size = remaining
                else:
                    size = int(min(max(_MIN_CHUNK, rate * _TARGET_SECONDS), 4 * size))
            start = stop
        cols[m] = acc / n if m in _ABS else acc
    return pd.DataFrame(cols, index=list(ens.output_names))


# --------------------------------------------------------------------------------------------
# files


def _lower(path: str) -> str:
    return os.fspath(path).lower()


def _check_exists(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise CLIError(f"{what} {path!r} not found")
    if os.path.isdir(path):
        raise CLIError(f"{what} {path!r} is a directory, not a file")


def read_table(path: str, what: str = "data file") -> pd.DataFrame:
    """Read a CSV (``.csv``, optionally compressed), TSV or Parquet file into a DataFrame.

    Parameters
    ----------
    path : str
        The file; its type is taken from the extension.
    what : str
        How error messages name the file.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    CLIError
        For a missing file, an unsupported extension or an unreadable file.
    ImportError
        For a Parquet file without pyarrow installed.
    """
    _check_exists(path, what)
    name = _lower(path)
    if name.endswith(_PARQUET):
        if importlib.util.find_spec("pyarrow") is None:
            raise ImportError("reading Parquet files needs pyarrow: pip install pyarrow")
        reader, kwargs = pd.read_parquet, {}
    elif name.endswith(_CSV):
        reader, kwargs = pd.read_csv, {}
    elif name.endswith(_TSV):
        reader, kwargs = pd.read_csv, {"sep": "\t"}
    else:
        ext = os.path.splitext(name)[1] or "(none)"
        raise CLIError(
            f"unsupported data file extension {ext!r} of {path!r}; use .csv (also .csv.gz, "
            ".csv.bz2, .csv.xz, .csv.zst, .csv.zip), .tsv or .parquet"
        )
    try:
        df = reader(path, **kwargs)
    except ImportError:
        raise
    except Exception as e:  # pandas/pyarrow parse errors come in many types
        raise CLIError(f"cannot read {what} {path!r}: {_one_line(e)}") from e
    df.columns = [str(c) for c in df.columns]
    return df


def _load_model(path: str) -> Any:
    import treeinner

    _check_exists(path, "model file")
    try:
        return treeinner.load(path)
    except ValueError as e:
        msg = _one_line(e)
        if os.path.basename(path) in msg:
            raise
        raise CLIError(f"cannot read model file {path!r}: {msg}") from e


def _categorical_features(ens: Any) -> set[int]:
    cats = set(getattr(ens, "categories", {}) or {})
    inner = np.asarray(ens.left) >= 0
    cat_split = inner & (np.asarray(ens.split_type) != 0)
    cats.update(int(f) for f in np.unique(np.asarray(ens.feature)[cat_split]))
    return cats


def _split_data(
    ens: Any, df: pd.DataFrame, path: str, target: str, weight: str | None
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
    """Split a data file's frame into the model's features, the labels and the weights."""
    for col, what in ((target, "target"), (weight, "weight")):
        if col is not None and col not in df.columns:
            shown = ", ".join(list(df.columns)[:10]) + (" ..." if df.shape[1] > 10 else "")
            raise CLIError(f"{what} column {col!r} not found in {path!r} (columns: {shown})")
    if weight is not None and weight == target:
        raise CLIError("--weight and --target name the same column")
    if len(df) == 0:
        raise CLIError(f"data file {path!r} has no rows")
    y = df[target].to_numpy()
    w = None
    if weight is not None:
        try:
            w = df[weight].to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise CLIError(f"weight column {weight!r} is not numeric") from e
    X = df.drop(columns=[c for c in (target, weight) if c is not None])
    if ens.named:
        names = list(ens.output_names)
        have = set(X.columns)
        missing = [f for f in names if f not in have]
        if missing:
            shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise CLIError(
                f"data {path!r} does not match the model: {len(missing)} of the model's "
                f"{len(names)} features missing: {shown}"
            )
        extra = [c for c in X.columns if c not in set(names)]
        if extra:
            shown = ", ".join(extra[:10]) + (" ..." if len(extra) > 10 else "")
            warnings.warn(
                f"ignoring {len(extra)} column(s) of {path!r} the model does not use: {shown}",
                UserWarning,
                stacklevel=2,
            )
            X = X[names]
    if getattr(ens, "input_map", None) is None:
        cats = _categorical_features(ens)
        for j in cats:
            col = X.columns[j] if not ens.named else ens.feature_names[j]
            if col in X.columns and (
                pd.api.types.is_object_dtype(X[col]) or pd.api.types.is_string_dtype(X[col])
            ):
                X[col] = X[col].astype("category")
    return X, y, w


def _check_out(path: str | None, exts: Sequence[str] | None, option: str) -> None:
    if path is None:
        return
    if exts is not None and not _lower(path).endswith(tuple(exts)):
        raise CLIError(f"{option} {path!r}: use a file name ending in {' or '.join(exts)}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CLIError(f"{option} {path!r}: directory {parent!r} does not exist")


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _json_value(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if isinstance(e, KeyError) and len(e.args) == 1:
        text = f"missing key {e.args[0]!r}"
    return text or type(e).__name__


# --------------------------------------------------------------------------------------------
# commands


def _progress_mode(args: argparse.Namespace) -> str:
    if getattr(args, "quiet", False):
        return "never"
    return resolve_mode(getattr(args, "progress", None))


def _read_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any, Any, Any]:
    """The model, the data's feature columns, target, weights and the reference data of a
    command's arguments."""
    _check_exists(args.model, "model file")
    _check_exists(args.data, "data file")
    ens = _load_model(args.model)
    df = read_table(args.data)
    X, y, w = _split_data(ens, df, args.data, args.target, args.weight)
    return ens, X, y, w, _reference(ens, args)


def _reference(ens: Any, args: argparse.Namespace) -> Any:
    if args.reference is None:
        return None
    df = read_table(args.reference, "reference file")
    X, y, w = _split_data(ens, df, args.reference, args.target, args.weight)
    return (X, y) if w is None else (X, y, w)


def _hint_reference(e: ValueError, reference: Any) -> None:
    """Re-raise a library error asking for ``reference=`` with the command-line spelling."""
    if reference is None and "reference=" in str(e):
        raise CLIError(
            f"{_one_line(e)} From the command line: pass the training data with --reference FILE."
        ) from e


def _format_table(frame: pd.DataFrame, top: int | None) -> str:
    first = frame.columns[0]
    table = frame.sort_values(first, ascending=False, na_position="last", kind="stable")
    if top is not None:
        table = table.head(top)
    table = table.rename_axis("feature")
    return table.to_string(float_format=lambda v: f"{v:.6g}")


def _cmd_explain(args: argparse.Namespace) -> int:
    import treeinner

    user_methods = args.method is not None
    methods = canonical_methods(args.method or DEFAULT_METHODS, args.attribution)
    if args.top is not None and args.top < 1:
        raise CLIError(f"--top must be a positive integer; got {args.top}")
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise CLIError(f"--chunk-rows must be a positive integer; got {args.chunk_rows}")
    if args.bootstrap < 0 or args.bootstrap == 1:
        raise CLIError(f"--bootstrap must be 0 or at least 2; got {args.bootstrap}")
    if args.bootstrap and args.reference is not None:
        raise CLIError("--bootstrap cannot be combined with --reference")
    _check_out(args.out, (".csv", ".json"), "--out")
    _check_out(args.plot, None, "--plot")
    mode = _progress_mode(args)
    if args.plot is not None:
        if importlib.util.find_spec("matplotlib") is None:
            raise ImportError("--plot needs matplotlib: pip install 'treeinner[plot]'")
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.backend_bases import FigureCanvasBase

        import treeinner.plot  # noqa: F401  (fail now, not after the computation)

        formats = FigureCanvasBase.get_supported_filetypes()
        ext = os.path.splitext(args.plot)[1].lower().lstrip(".")
        if ext not in formats:
            raise CLIError(
                f"--plot {args.plot!r}: use a file name ending in one of "
                f"{', '.join('.' + f for f in sorted(formats))}"
            )

    ens, X, y, w, reference = _read_inputs(args)
    if not user_methods and "total_gain" in methods:
        if np.all(np.isnan(_total(treeinner.total_gain(ens)).to_numpy())):
            methods.remove("total_gain")  # the booster keeps no split gains (CatBoost)

    try:
        with Progress(0, desc=f"{PROG} explain", mode=mode) as bar:
            if args.bootstrap:
                # standard errors need every method on every resample: one library call
                bar.set_label(f"{len(methods)} methods x {args.bootstrap + 1} resamples")
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
                bar.advance()
            else:
                frame = compute_importance(
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
    except ValueError as e:
        _hint_reference(e, reference)
        raise

    print(_format_table(frame, args.top))
    sys.stdout.flush()
    if args.out is not None:
        if _lower(args.out).endswith(".json"):
            doc = {
                "model": os.fspath(args.model),
                "data": os.fspath(args.data),
                "target": args.target,
                "weight": args.weight,
                "reference": args.reference,
                "n_rows": int(len(X)),
                "objective": ens.objective,
                "methods": list(frame.columns),
                "attribution": args.attribution,
                "random_state": args.seed,
                "n_repeats": args.n_repeats,
                "n_bootstrap": args.bootstrap,
                "importance": [
                    {"feature": str(name), **{m: _json_value(row[m]) for m in frame.columns}}
                    for name, row in frame.iterrows()
                ],
            }
            _write_text(args.out, json.dumps(doc, indent=2) + "\n")
        else:
            frame.rename_axis("feature").to_csv(args.out, float_format="%.17g")
    if args.plot is not None:
        import matplotlib.pyplot as plt

        ax = treeinner.plot.importance(frame, top=args.top)
        ax.figure.savefig(args.plot, dpi=120, bbox_inches="tight")
        plt.close(ax.figure)
    return 0


def _cmd_select(args: argparse.Namespace) -> int:
    import treeinner

    if args.method not in METHODS:
        raise CLIError(f"unknown method {args.method!r}; choose from {', '.join(METHODS)}")
    if args.attribution not in ATTRIBUTIONS:
        raise CLIError(
            f"unknown attribution {args.attribution!r}; choose from {', '.join(ATTRIBUTIONS)}"
        )
    if args.top_k is not None and args.top_k < 1:
        raise CLIError(f"--top-k must be a positive integer; got {args.top_k}")
    _check_out(args.out, None, "--out")
    mode = _progress_mode(args)
    ens, X, y, w, reference = _read_inputs(args)
    extra = {} if reference is None else {"reference": reference}
    try:
        with Progress(1, desc=f"{PROG} select", mode=mode) as bar:
            bar.set_label(args.method)
            kept = treeinner.select_features(
                ens,
                X,
                y,
                method=args.method,
                attribution=args.attribution,
                threshold=args.threshold,
                top_k=args.top_k,
                sample_weight=w,
                random_state=args.seed,
                **extra,
            )
            bar.advance()
    except ValueError as e:
        _hint_reference(e, reference)
        raise
    text = "".join(f"{name}\n" for name in kept)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.out is not None:
        _write_text(args.out, text)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("xgboost") is None:
        raise ImportError("the demo needs XGBoost: pip install 'treeinner[xgboost]'")
    from . import demo

    return int(demo.main([]) or 0)


# --------------------------------------------------------------------------------------------
# parser and entry point


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="model file (.json, .ubj, .txt, .cbm, .npz)")
    p.add_argument("--data", required=True, metavar="FILE", help="CSV, TSV or Parquet data")
    p.add_argument("--target", required=True, metavar="COLUMN", help="the label column")
    p.add_argument("--weight", metavar="COLUMN", help="a sample-weight column (optional)")
    p.add_argument(
        "--reference",
        metavar="FILE",
        help="training data (same columns) for PreDecomp node values and the unbiased gain's "
        "training sums, needed for models that store no hessian covers (CatBoost losses "
        "other than RMSE)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed of permutation importance and the unbiased gain (default 0)",
    )


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--progress",
        choices=MODES,
        default=None,
        help="progress bar on stderr: auto (a terminal, after 2 s; default, or "
        "$TREEINNER_PROGRESS), always, never",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of any error",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``treeinner`` argument parser (subcommands ``explain``, ``select``, ``demo``)."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Explain already-trained gradient boosted trees (XGBoost, LightGBM, "
        "CatBoost) and select the features they really use.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of any error",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    ex = sub.add_parser(
        "explain",
        help="importance of every feature of a saved model on a data set",
        description="Print one importance column per method for a saved model on a data set "
        "(normally held-out data: there a negative TreeInner marks a feature the model only "
        "overfit).",
    )
    _data_options(ex)
    ex.add_argument(
        "--method",
        action="extend",
        nargs="+",
        metavar="M",
        help=f"one or more of {', '.join(METHODS)} (also comma-separated; default: "
        "tree_inner abs_shap total_gain, total_gain left out for models without split gains)",
    )
    ex.add_argument(
        "--attribution",
        default="predecomp",
        metavar="A",
        help="attribution of tree_inner and forest_inner: predecomp (default), saabas or shap",
    )
    ex.add_argument("--out", metavar="FILE", help="write the table to FILE.csv or FILE.json")
    ex.add_argument("--plot", metavar="FILE", help="save a bar chart (FILE.png, .pdf, .svg)")
    ex.add_argument("--top", type=int, metavar="N", help="print and plot only the top N rows")
    ex.add_argument(
        "--n-repeats", type=int, default=5, metavar="N", help="permutations per feature (default 5)"
    )
    ex.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="B",
        help="add a standard-error column m_se per method from B bootstrap resamples of the "
        "rows (error bars in --plot; computed in one call, B+1 times the work)",
    )
    ex.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="rows per chunk of the row-additive methods (default: sized from the speed)",
    )
    _common_options(ex)
    ex.set_defaults(func=_cmd_explain)

    se = sub.add_parser(
        "select",
        help="print the features treeinner.select_features keeps",
        description="Print, one per line, the features whose importance on the data (normally "
        "held-out data) is above the threshold, in the model's feature order.",
    )
    _data_options(se)
    se.add_argument(
        "--method", default="tree_inner", metavar="M", help="importance method (default tree_inner)"
    )
    se.add_argument(
        "--attribution",
        default="predecomp",
        metavar="A",
        help="attribution of tree_inner and forest_inner: predecomp (default), saabas or shap",
    )
    se.add_argument("--threshold", type=float, default=0.0, help="keep scores above T (default 0)")
    se.add_argument("--top-k", type=int, metavar="K", help="then keep at most the K highest")
    se.add_argument("--out", metavar="FILE", help="also write the names to FILE")
    _common_options(se)
    se.set_defaults(func=_cmd_select)

    de = sub.add_parser("demo", help="run the demo (python -m treeinner.demo)")
    de.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of any error",
    )
    de.set_defaults(func=_cmd_demo)
    return parser


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(f"{PROG}: warning: {' '.join(str(message).split())}\n")
    sys.stderr.flush()


_EXPECTED = (CLIError, ValueError, TypeError, OSError, ImportError, NotImplementedError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``treeinner`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 1 for bad input (one ``treeinner: error:`` line on stderr),
        2 for a usage error, 3 for an unexpected error, 130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except _UsageError as e:
        _error(str(e))
        return 2
    debug = getattr(args, "debug", False)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except KeyboardInterrupt:
            if debug:
                raise
            _error("interrupted")
            return 130
        except _EXPECTED as e:
            if debug:
                raise
            _error(_one_line(e))
            return 1
        except Exception as e:
            if debug:
                raise
            _error(
                f"unexpected {type(e).__name__}: {_one_line(e)} (this is a bug: rerun with "
                "--debug for the traceback and please report it)"
            )
            return 3


if __name__ == "__main__":
    raise SystemExit(main())
