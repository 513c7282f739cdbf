"""Turn user data (numpy, pandas, scipy sparse) into the rows the kernels read.

Kernels read C-contiguous float64 arrays, the one specialisation they are compiled for:
float64 input is passed as it is (no copy when C-contiguous); float32 input is converted in
blocks of rows, so its float64 copy never exceeds ``BLOCK_ELEMENTS`` values; every other dtype
is converted to float64, which holds all of them exactly.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

SPARSE_CHUNK = 8192
BLOCK_ELEMENTS = 1 << 22  # values per float64 block converted from float32 input (32 MiB)


def _is_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _category_codes(col: pd.Series, trained: list | None) -> np.ndarray:
    """Codes of a pandas categorical column as the booster reads them (NaN where missing).

    With the training categories known, values are matched by value (unseen values get a
    code past the training ones, which no split contains); otherwise pandas' own codes are used.
    """
    codes = col.cat.codes.to_numpy().astype(np.float64)
    codes[codes < 0] = np.nan
    if trained is None:
        return codes
    lookup = {v: i for i, v in enumerate(trained)}
    cats = col.cat.categories
    mapping = np.array(
        [lookup.get(_plain(c), len(trained) + j) for j, c in enumerate(cats)], dtype=np.float64
    )
    out = np.full(codes.shape, np.nan)
    ok = ~np.isnan(codes)
    out[ok] = mapping[codes[ok].astype(np.int64)]
    unseen = out >= len(trained)
    if np.any(unseen):
        values = sorted({str(cats[int(i)]) for i in codes[unseen]})[:5]
        warnings.warn(
            f"Column {col.name!r} has categories not seen in training ({', '.join(values)}); "
            "they are routed as an unseen category code (matching no split's set).",
            UserWarning,
            stacklevel=5,
        )
    return out


def _plain(v: Any) -> Any:
    """A category value as a plain Python scalar, comparable with values read from JSON."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def frame_to_array(
    X: pd.DataFrame,
    feature_names: Sequence[str],
    named: bool,
    categories: dict[int, list] | None,
) -> np.ndarray:
    """Reorder a DataFrame's columns to the model's features and convert to float64."""
    cols = [str(c) for c in X.columns]
    if named:
        missing = [f for f in feature_names if f not in set(cols)]
        extra = [c for c in cols if c not in set(feature_names)]
        if missing or extra:
            msg = "DataFrame columns do not match the model's features."
            if missing:
                msg += f" Missing: {missing[:10]}{' ...' if len(missing) > 10 else ''}."
            if extra:
                msg += f" Not in the model: {extra[:10]}{' ...' if len(extra) > 10 else ''}."
            raise ValueError(msg)
        if len(set(cols)) != len(cols):
            raise ValueError("DataFrame has duplicate column names.")
        order = [cols.index(f) for f in feature_names]
    else:
        if len(cols) != len(feature_names):
            raise ValueError(
                f"X has {len(cols)} features, but the model was trained with "
                f"{len(feature_names)} features."
            )
        order = list(range(len(cols)))
    out = np.empty((len(X), len(order)), dtype=np.float64)
    bad = []
    for j, k in enumerate(order):
        col = X.iloc[:, k]
        dtype = col.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            trained = None if categories is None else categories.get(j)
            out[:, j] = _category_codes(col, trained)
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            bad.append(f"{cols[k]!r} ({dtype})")
    if bad:
        raise TypeError(
            "Columns must be numeric, boolean or pandas categorical; got " + ", ".join(bad)
        )
    return out


def as_rows(
    X: Any,
    n_features: int,
    feature_names: Sequence[str],
    named: bool,
    categories: dict[int, list] | None = None,
) -> tuple[int, Iterator[tuple[int, np.ndarray]]]:
    """Validate X and return ``(n_rows, blocks)``.

    ``blocks`` yields ``(first_row, block)`` pairs of C-contiguous float64 arrays covering all
    rows. float64 inputs come as one block (no copy where already C-contiguous), other dense
    inputs as one converted block, except float32, which is converted in blocks of rows of at
    most ``BLOCK_ELEMENTS`` values (the conversion is exact); scipy sparse inputs in chunks
    with absent entries as NaN (missing).
    """
    if _is_sparse(X):
        csr = X.tocsr()
        if csr.ndim != 2:
            raise ValueError("X must be 2-D.")
        if csr.dtype.kind not in "biuf":
            raise TypeError(f"X must be numeric; got dtype {csr.dtype}.")
        _check_width(csr.shape[1], n_features)
        return csr.shape[0], _sparse_blocks(csr)
    if isinstance(X, pd.DataFrame):
        arr = frame_to_array(X, feature_names, named, categories)
        return arr.shape[0], iter([(0, arr)])
    if isinstance(X, pd.Series):
        raise ValueError(
            "X must be 2-D; got a pandas Series. Use X.to_frame().T for one row "
            "or X.to_frame() for one feature."
        )
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as e:
        raise TypeError(f"X could not be read as a numeric array: {e}") from e
    if arr.ndim != 2:
        raise ValueError(
            f"X must be 2-D (rows x features); got an array of shape {arr.shape}. "
            "Use X.reshape(1, -1) for a single row."
        )
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"X must be numeric; got dtype {arr.dtype}.")
    _check_width(arr.shape[1], n_features)
    if arr.dtype == np.float32:
        return arr.shape[0], _float32_blocks(arr)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    return arr.shape[0], iter([(0, arr)])


def join_blocks(blocks: Iterator[tuple[int, np.ndarray]], n_features: int) -> np.ndarray:
    """The blocks of ``as_rows`` as one C-contiguous float64 (n, n_features) array."""
    parts = [b for _, b in blocks]
    if not parts:  # sparse input without rows
        return np.zeros((0, n_features))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _float32_blocks(arr: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    n = arr.shape[0]
    step = max(1, BLOCK_ELEMENTS // max(1, arr.shape[1]))
    for start in range(0, n, step):
        yield start, np.ascontiguousarray(arr[start : start + step], dtype=np.float64)
    if n == 0:
        yield 0, np.zeros((0, arr.shape[1]))


def _sparse_blocks(csr: Any) -> Iterator[tuple[int, np.ndarray]]:
    n = csr.shape[0]
    for start in range(0, n, SPARSE_CHUNK):
        sub = csr[start : start + SPARSE_CHUNK]
        block = np.full(sub.shape, np.nan)
        rows = np.repeat(np.arange(sub.shape[0]), np.diff(sub.indptr))
        block[rows, sub.indices] = sub.data
        yield start, block


def _check_width(width: int, n_features: int) -> None:
    if width != n_features:
        raise ValueError(
            f"X has {width} features, but the model was trained with {n_features} features."
        )
