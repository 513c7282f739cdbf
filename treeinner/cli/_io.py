"""Files of the command line: data tables and model files in, tables, JSON and plots out."""

from __future__ import annotations

import glob
import importlib.util
import json
import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._dask import is_dask
from ._errors import CLIError, one_line

_CSV = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".csv.zip")
_TSV = (".tsv", ".tsv.gz", ".tab")
_PARQUET = (".parquet", ".pq")


def lower(path: str) -> str:
    """The path as a lower-case string (for matching extensions)."""
    return os.fspath(path).lower()


def check_exists(path: str, what: str) -> None:
    """Raise a CLIError naming ``what`` unless ``path`` is an existing file."""
    if not os.path.exists(path):
        raise CLIError(f"{what} {path!r} not found")
    if os.path.isdir(path):
        raise CLIError(f"{what} {path!r} is a directory, not a file")


def check_out(path: str | None, exts: Sequence[str] | None, option: str) -> None:
    """Check an output file name (its extension, if ``exts``, and that its directory exists)."""
    if path is None:
        return
    if exts is not None and not lower(path).endswith(tuple(exts)):
        raise CLIError(f"{option} {path!r}: use a file name ending in {' or '.join(exts)}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CLIError(f"{option} {path!r}: directory {parent!r} does not exist")


def _reader(path: str) -> tuple[Any, dict[str, Any]]:
    name = lower(path)
    if name.endswith(_PARQUET):
        if importlib.util.find_spec("pyarrow") is None:
            raise ImportError(
                "reading Parquet files needs pyarrow: pip install 'treeinner[parquet]'"
            )
        return pd.read_parquet, {}
    if name.endswith(_CSV):
        return pd.read_csv, {}
    if name.endswith(_TSV):
        return pd.read_csv, {"sep": "\t"}
    ext = os.path.splitext(name)[1] or "(none)"
    raise CLIError(
        f"unsupported data file extension {ext!r} of {path!r}; use .csv (also .csv.gz, "
        ".csv.bz2, .csv.xz, .csv.zst, .csv.zip), .tsv or .parquet"
    )


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
    check_exists(path, what)
    reader, kwargs = _reader(path)
    try:
        df = reader(path, **kwargs)
    except ImportError:
        raise
    except Exception as e:  # pandas/pyarrow parse errors come in many types
        raise CLIError(f"cannot read {what} {path!r}: {one_line(e)}") from e
    df.columns = [str(c) for c in df.columns]
    return df


def is_many(path: str) -> bool:
    """Whether ``--data`` names several files for Dask: a glob pattern or a directory."""
    return any(c in os.fspath(path) for c in "*?[") or os.path.isdir(path)


def _files(path: str) -> list[str]:
    """The data files a pattern or directory names, sorted."""
    if os.path.isdir(path):
        names = [os.path.join(path, f) for f in os.listdir(path)]
        found = [f for f in names if lower(f).endswith(_PARQUET + _CSV + _TSV)]
    else:
        found = [f for f in glob.glob(path) if os.path.isfile(f)]
    if not found:
        raise CLIError(f"no data files match {path!r}")
    return sorted(found)


def read_dask_table(path: str) -> tuple[Any, int | None]:
    """The files ``path`` names (a glob pattern, a directory or one file) as a Dask DataFrame
    read lazily, a partition at a time, and their row count where the files record it
    (Parquet metadata; None for CSV and TSV).

    Raises
    ------
    CLIError
        For no matching file, files of mixed or unsupported types, or unreadable files.
    ImportError
        Without Dask (or pyarrow for Parquet).
    """
    if importlib.util.find_spec("dask") is None:
        raise ImportError("--data with several files needs Dask: pip install 'treeinner[dask]'")
    files = [path] if os.path.isfile(path) else _files(path)
    kinds = {_kind(f) for f in files}
    if len(kinds) != 1:
        raise CLIError(f"{path!r} names files of different types ({', '.join(sorted(kinds))})")
    import dask.dataframe as dd

    kind = kinds.pop()
    try:
        if kind == "parquet":
            df = dd.read_parquet(files)
            n = _parquet_rows(files)
        else:
            plain = all(lower(f).endswith((".csv", ".tsv", ".tab")) for f in files)
            sep = "\t" if kind == "tsv" else ","  # compressed files: one partition each
            df = dd.read_csv(files, sep=sep, blocksize="64MB" if plain else None)
            n = None
        # no rows: column types inferred from nothing (text), so say it before they mislead
        empty = n == 0 if n is not None else len(df.head(1, npartitions=-1)) == 0
    except ImportError:
        raise
    except Exception as e:
        raise CLIError(f"cannot read data files {path!r}: {one_line(e)}") from e
    if empty:
        raise CLIError(f"data files {path!r} have no rows")
    df.columns = [str(c) for c in df.columns]
    return df, n


def _kind(path: str) -> str:
    _reader(path)  # a CLIError for an unsupported extension
    name = lower(path)
    return "parquet" if name.endswith(_PARQUET) else "csv" if name.endswith(_CSV) else "tsv"


def _parquet_rows(files: Sequence[str]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def load_model(path: str) -> Any:
    """The ``TreeEnsemble`` of a model file (``treeinner.load``), with one-line errors."""
    import treeinner

    check_exists(path, "model file")
    try:
        return treeinner.load(path)
    except ValueError as e:
        msg = one_line(e)
        if os.path.basename(path) in msg:
            raise
        raise CLIError(f"cannot read model file {path!r}: {msg}") from e


def _shown(names: Sequence[str]) -> str:
    return ", ".join(list(names)[:10]) + (" ..." if len(names) > 10 else "")


def _labels_and_weights(df: Any, path: str, target: str, weight: str | None) -> tuple[Any, Any]:
    for col, what in ((target, "target"), (weight, "weight")):
        if col is not None and col not in df.columns:
            shown = _shown(list(df.columns))
            raise CLIError(f"{what} column {col!r} not found in {path!r} (columns: {shown})")
    if weight is not None and weight == target:
        raise CLIError("--weight and --target name the same column")
    if is_dask(df):  # lazy: the columns as Dask Series (no rows: an error when computed)
        if weight is not None and not _readable(df[weight]):
            raise CLIError(f"weight column {weight!r} is not numeric")
        return df[target], None if weight is None else df[weight].astype(np.float64)
    if len(df) == 0:
        raise CLIError(f"data file {path!r} has no rows")
    w = None
    if weight is not None:
        try:
            w = df[weight].to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise CLIError(f"weight column {weight!r} is not numeric") from e
    return df[target].to_numpy(), w


def _match_features(ens: Any, X: pd.DataFrame, path: str) -> pd.DataFrame:
    """The model's named features of ``X`` in the model's order (extra columns warned)."""
    names = list(ens.output_names)
    have = set(X.columns)
    missing = [f for f in names if f not in have]
    if missing:
        raise CLIError(
            f"data {path!r} does not match the model: {len(missing)} of the model's "
            f"{len(names)} features missing: {_shown(missing)}"
        )
    extra = [c for c in X.columns if c not in set(names)]
    if not extra:
        return X
    warnings.warn(
        f"ignoring {len(extra)} column(s) of {path!r} the model does not use: {_shown(extra)}",
        UserWarning,
        stacklevel=3,
    )
    return X[names]


def _unused_features(ens: Any) -> set[int]:
    """The model's features that no split reads."""
    used = np.zeros(len(ens.feature_names), dtype=bool)
    used[np.asarray(ens.feature)[np.asarray(ens.left) >= 0]] = True
    return set(np.flatnonzero(~used).tolist())


def _as_categoricals(ens: Any, X: pd.DataFrame, path: str) -> pd.DataFrame:
    """X with the non-numeric columns of features that no split reads ignored (NaN).

    Every other column goes to treeinner as read, which converts string columns of the
    model's categorical features by value against its training categories, as for a
    DataFrame in Python. A model that routes through its booster (CatBoost categorical
    features) gets X unchanged: the booster reads its string columns itself."""
    if getattr(ens, "input_map", None) is not None:
        return X
    unused = _unused_features(ens)
    stored = getattr(ens, "categories", {}) or {}
    bad = []
    for j in range(min(len(ens.feature_names), X.shape[1])):
        col = X.columns[j] if not ens.named else ens.feature_names[j]
        if col not in X.columns or _readable(X[col]):
            continue
        if j in unused:
            X = X.assign(**{col: np.nan})
        elif j not in stored and not isinstance(X[col].dtype, pd.CategoricalDtype):
            bad.append(str(col))
    if bad:
        raise CLIError(
            f"column(s) {_shown(bad)} of {path!r} hold text, but the model reads these "
            "features as numbers or stores no category names for them (it was trained on "
            "codes): give the numbers it was trained on"
        )
    return X


def _readable(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)


def split_data(
    ens: Any,
    df: pd.DataFrame,
    path: str,
    target: str,
    weight: str | None,
    soft_labels: bool = False,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
    """Split a data file's frame into the model's features, the labels and the weights
    (``treeinner.SoftLabels`` with ``soft_labels``: probabilities as labels on purpose); a
    Dask DataFrame into Dask columns."""
    y, w = _labels_and_weights(df, path, target, weight)
    if soft_labels:
        from treeinner.objectives import SoftLabels

        if is_dask(y):  # every partition's labels marked, where it is read
            if not _readable(y):
                raise CLIError(f"target column {target!r} of {path!r} is not numeric")
            y = y.to_dask_array().map_blocks(SoftLabels, dtype=np.float64, meta=np.empty(0))
        else:
            try:
                y = SoftLabels(y)
            except (TypeError, ValueError) as e:
                raise CLIError(f"target column {target!r} of {path!r} is not numeric") from e
    X = df.drop(columns=[c for c in (target, weight) if c is not None])
    if ens.named:
        X = _match_features(ens, X, path)
    return _as_categoricals(ens, X, path), y, w


def background_rows(ens: Any, path: str, target: str, weight: str | None) -> pd.DataFrame:
    """The model's features of a ``--background`` file (its target and weight columns, if
    it has them, left out)."""
    df = read_table(path, "background file")
    X = df.drop(columns=[c for c in (target, weight) if c is not None and c in df.columns])
    if ens.named:
        X = _match_features(ens, X, path)
    return _as_categoricals(ens, X, path)


def write_pairwise(path: str, frame: pd.DataFrame, settings: dict[str, Any]) -> None:
    """Write a pairwise method's feature x feature matrix to ``path``: CSV (the features on
    both axes, the first column named ``feature``), or JSON with the run's ``settings``, the
    ``features`` and the ``matrix`` (a list of rows; NaN as null)."""
    if not lower(path).endswith(".json"):
        frame.rename_axis("feature").to_csv(path, float_format="%.17g")
        return
    doc = {
        **settings,
        "features": [str(f) for f in frame.index],
        "matrix": [[_json_value(v) for v in row] for row in frame.to_numpy()],
    }
    write_text(path, json.dumps(doc, indent=2) + "\n")


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _json_value(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


def write_table(path: str, frame: pd.DataFrame, settings: dict[str, Any]) -> None:
    """Write the importance table to ``path``: CSV, or JSON with the run's ``settings``."""
    if not lower(path).endswith(".json"):
        frame.rename_axis("feature").to_csv(path, float_format="%.17g")
        return
    doc = {
        **settings,
        "importance": [
            {"feature": str(name), **{m: _json_value(row[m]) for m in frame.columns}}
            for name, row in frame.iterrows()
        ],
    }
    write_text(path, json.dumps(doc, indent=2) + "\n")


def scores(table: pd.DataFrame) -> pd.DataFrame:
    """The score table of a significance table: indexed by feature (in the table's order), one
    column per method (for multi-output models the totals over the outputs), as
    ``treeinner.importance`` and ``explain --no-se`` give it."""
    if "output" in table.columns:
        table = table[table["output"] == "total"]
    wide = table.pivot(index="feature", columns="method", values="score")
    wide = wide.loc[pd.unique(table["feature"]), list(pd.unique(table["method"]))]
    wide.columns.name = None
    return wide


def write_significance(path: str, table: pd.DataFrame, settings: dict[str, Any]) -> None:
    """Write the significance table to ``path``: CSV with the table's columns, or JSON with the
    run's ``settings``, the scores as ``write_table`` writes them (``importance``) and the
    table's rows (``significance``; NaN as null)."""
    if not lower(path).endswith(".json"):
        table.to_csv(path, index=False, float_format="%.17g")
        return
    wide = scores(table)
    numeric = [c for c in table.columns if c not in ("method", "feature", "output")]
    rows = [
        {k: (_json_value(v) if k in numeric else str(v)) for k, v in row.items()}
        for row in table.to_dict(orient="records")
    ]
    doc = {
        **settings,
        "importance": [
            {"feature": str(name), **{m: _json_value(row[m]) for m in wide.columns}}
            for name, row in wide.iterrows()
        ],
        "significance": rows,
    }
    write_text(path, json.dumps(doc, indent=2) + "\n")


def check_plot(path: str | None) -> None:
    """Fail before the computation if ``--plot`` cannot be written (matplotlib, file type)."""
    check_out(path, None, "--plot")
    if path is None:
        return
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError("--plot needs matplotlib: pip install 'treeinner[plot]'")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    import treeinner.plot  # noqa: F401  (fail now, not after the computation)

    formats = FigureCanvasBase.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise CLIError(
            f"--plot {path!r}: use a file name ending in one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )


def write_plot(path: str, frame: pd.DataFrame, top: int | None, alpha: float = 0.05) -> None:
    """Save ``treeinner.plot.importance`` of the table (a score table, or a significance
    table: ``1 - alpha`` intervals) to ``path``."""
    import matplotlib.pyplot as plt

    import treeinner.plot

    ax = treeinner.plot.importance(frame, top=top, alpha=alpha)
    ax.figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(ax.figure)
