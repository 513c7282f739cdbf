"""Turn user data (numpy, scipy sparse, any dataframe) into the rows the kernels read.

Kernels read C-contiguous float64 arrays, the one specialisation they are compiled for:
float64 input is passed as it is (no copy when C-contiguous); float32 input is converted in
blocks of rows, so its float64 copy never exceeds ``BLOCK_ELEMENTS`` values; every other dtype
is converted to float64, which holds all of them exactly.

Dataframes (pandas, polars, pyarrow Tables and whatever else narwhals reads eagerly) take one
path, through narwhals: numeric and boolean columns become float64 as they are; categorical,
dictionary and string columns become the category codes the booster reads, by value against
the training categories the model stores (values never seen in training get a code past them,
which no split's set contains; missing values NaN).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd

from . import _calls
from ._errors import InputError, InputTypeError

__all__ = [
    "FeatureNamesWarning",
    "as_frame",
    "as_rows",
    "frame_to_array",
    "join_blocks",
    "numeric_column",
    "to_pandas",
    "warn_unnamed",
]

SPARSE_CHUNK = 8192
BLOCK_ELEMENTS = 1 << 22  # values per float64 block converted from float32 input (32 MiB)
CACHE_ELEMENTS = 1 << 18  # values per block of rows a dataframe's columns are copied into (2 MiB)


class FeatureNamesWarning(UserWarning):
    """X has no column names, but the model stores feature names: its columns are taken in the
    model's order, which cannot be checked.

    Pass a DataFrame (matched by name) to avoid it, or silence it with
    ``warnings.filterwarnings("ignore", category=treeinner.FeatureNamesWarning)``.
    """


# Arrays made here from dataframes (already in the model's order): passed back in (permutation,
# the unbiased gain's joined rows), they are not the user's unnamed input.
_ORDERED: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


def warn_unnamed(feature_names: Sequence[str]) -> None:
    """``FeatureNamesWarning`` for X without column names given to a model with feature names,
    once per public call: a call that reads X several times (the same model's names) warns
    once."""
    if not _calls.first_time(("unnamed", id(feature_names))):
        return
    names = ", ".join(list(feature_names)[:5]) + (" ..." if len(feature_names) > 5 else "")
    warnings.warn(
        f"X has no column names, but the model was trained on named features ({names}): "
        "its columns are taken in the model's order, which cannot be checked. Pass a "
        "DataFrame to match columns by name (treeinner.FeatureNamesWarning).",
        FeatureNamesWarning,
        stacklevel=_calls.user_stacklevel(),
    )


def _is_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def as_frame(X: Any) -> Any:
    """X as a narwhals DataFrame when it is a dataframe narwhals reads eagerly (pandas,
    polars, pyarrow Table, ...), else None."""
    if isinstance(X, (np.ndarray, list, tuple)) or _is_sparse(X):
        return None
    try:
        frame = nw.from_native(X, eager_only=True, pass_through=True)
    except nw.exceptions.DuplicateError:
        raise InputError("DataFrame has duplicate column names.") from None
    return frame if isinstance(frame, nw.DataFrame) else None


def to_pandas(X: Any) -> Any:
    """X as a pandas DataFrame when it is another dataframe narwhals reads (polars, pyarrow,
    ...; dictionary columns become categoricals), else X unchanged: for code that works on
    pandas columns (the raw columns a booster routes, the data an explanation displays)."""
    if isinstance(X, pd.DataFrame):
        return X
    frame = as_frame(X)
    return X if frame is None else frame.to_pandas()


def _is_series(X: Any) -> bool:
    if isinstance(X, (np.ndarray, list, tuple)) or _is_sparse(X):
        return False
    return isinstance(nw.from_native(X, series_only=True, pass_through=True), nw.Series)


def _plain(v: Any) -> Any:
    """A category value as a plain Python scalar, comparable with values read from JSON."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _is_categorical(dtype: Any) -> bool:
    return isinstance(dtype, (nw.Categorical, nw.Enum))


def _is_text(dtype: Any) -> bool:
    return isinstance(dtype, (nw.String, nw.Object)) or _is_categorical(dtype)


def numeric_column(s: Any) -> np.ndarray:
    """A numeric or boolean column as float64 (missing values NaN: every backend gives
    nulls of numeric columns as NaN once they are floats)."""
    return np.asarray(_numbers(s), dtype=np.float64)


def _numbers(s: Any) -> np.ndarray:
    """A numeric or boolean column as a numpy array of numbers or booleans (the backend's
    own array where it has one: float32 stays float32, no copy)."""
    arr = s.to_numpy()
    if arr.dtype.kind not in "biuf":  # nullable booleans, decimals: objects with nulls
        arr = s.cast(nw.Float64()).to_numpy()
    return arr


def _own_categories(s: Any) -> list:
    """A categorical column's own categories, in the order of its codes (pandas categories,
    an Enum's, an Arrow dictionary's)."""
    if isinstance(s.dtype, nw.Enum):
        return [_plain(v) for v in s.dtype.categories]
    try:
        return [_plain(v) for v in s.cat.get_categories().to_list()]
    except (AttributeError, TypeError, NotImplementedError):  # pandas ArrowDtype dictionary
        arr = s.to_arrow()
        arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
        return [_plain(v) for v in arr.dictionary.to_pylist()]


def _codes(s: Any, trained: list | None, name: str) -> np.ndarray:
    """A categorical or string column as the category codes the booster reads (NaN missing).

    With the training categories known, values are matched by value: unseen values get codes
    past the training ones, which no split's set contains (warned). Without them, a
    categorical column's codes are positions in its own categories (pandas' codes)."""
    null = s.is_null().to_numpy()
    native = s.to_native()  # pandas factorizes its own columns from their codes, fast
    source = native if isinstance(native, pd.Series) else s.to_numpy()
    codes, uniques = pd.factorize(source, use_na_sentinel=True)
    if trained is None:
        lookup = {v: i for i, v in enumerate(_own_categories(s))}
    else:
        lookup = {_plain(v): i for i, v in enumerate(trained)}
    plain = [_plain(u) for u in uniques]
    mapping = np.array([lookup.get(u, -1) for u in plain], dtype=np.float64)
    unseen = np.flatnonzero(mapping < 0)
    if unseen.size:
        base = len(lookup)
        mapping[unseen] = base + np.arange(unseen.size)
        used = np.zeros(len(uniques), dtype=bool)
        used[codes[(codes >= 0) & ~null]] = True
        shown = sorted({str(plain[i]) for i in unseen if used[i]})
        if shown:
            warnings.warn(
                f"Column {name!r} has categories not seen in training "
                f"({', '.join(shown[:5])}{' ...' if len(shown) > 5 else ''}); they are routed "
                "as an unseen category code (matching no split's set).",
                UserWarning,
                stacklevel=_calls.user_stacklevel(),
            )
    out = np.full(codes.shape[0], np.nan)
    ok = (codes >= 0) & ~null
    out[ok] = mapping[codes[ok]]
    return out


def _hint(bad: list[str], stored: bool) -> str:
    if stored:  # the model stores categories for its categorical features, not these
        return (
            "The model reads these features as numbers: convert the columns to the numbers "
            "it was trained on."
        )
    return (
        "The model stores no categories for these features, so strings cannot be matched to "
        "its category codes: if it was trained on categorical columns, pass them as such "
        f'(e.g. X[{bad[0].split(" ")[0]}] = X[{bad[0].split(" ")[0]}].astype("category") '
        "with the training categories), else as the numbers it was trained on."
    )


def _numeric_features(
    n: int, categories: dict[int, list] | None, numeric: np.ndarray | None
) -> np.ndarray:
    """Which features the model reads as numbers: ``numeric`` where given, else, for a
    model that stores the categories of its categorical features, every other feature (a
    model that stores none may read any feature as codes)."""
    if numeric is not None:
        return np.asarray(numeric, dtype=bool)
    out = np.zeros(n, dtype=bool)
    if categories is not None:
        out[:] = True
        out[[k for k in categories if 0 <= k < n]] = False
    return out


def _convert(s: Any, dtype: Any, trained: list | None, name: str) -> np.ndarray:
    """One numeric, boolean or categorical column as numbers (``_numbers``; category codes as
    float64), any failure of the dataframe library reported as an InputTypeError naming the
    column."""
    try:
        if dtype.is_numeric() or isinstance(dtype, nw.Boolean):
            return _numbers(s)
        return _codes(s, trained, name)
    except (TypeError, ValueError, ArithmeticError, NotImplementedError) as e:
        raise InputTypeError(
            f"Column {name!r} ({dtype}) could not be read as numbers or categories: "
            f"{' '.join(str(e).split())[:200]}"
        ) from e


def _categorical_numeric(names: list[str]) -> InputError:
    shown = ", ".join(repr(c) for c in names[:10]) + (" ..." if len(names) > 10 else "")
    many = len(names) > 1
    return InputError(
        f"Column{'s' if many else ''} {shown} {'are' if many else 'is'} categorical, but the "
        f"model reads {'these features' if many else 'this feature'} as numbers (no "
        "categorical split reads it): category codes are not the values. Pass the numbers "
        f"the model was trained on (e.g. X[{names[0]!r}].astype(float) for numeric "
        "categories)."
    )


def _column_order(cols: list[str], feature_names: Sequence[str], named: bool) -> list[int]:
    """The position among ``cols`` of every model feature: by name when ``named``, else by
    position (then the counts must agree)."""
    if not named:
        if len(cols) != len(feature_names):
            raise InputError(
                f"X has {len(cols)} features, but the model was trained with "
                f"{len(feature_names)} features."
            )
        return list(range(len(cols)))
    missing = [f for f in feature_names if f not in set(cols)]
    extra = [c for c in cols if c not in set(feature_names)]
    if missing or extra:
        msg = "DataFrame columns do not match the model's features."
        if missing:
            msg += f" Missing: {missing[:10]}{' ...' if len(missing) > 10 else ''}."
        if extra:
            msg += f" Not in the model: {extra[:10]}{' ...' if len(extra) > 10 else ''}."
        raise InputError(msg)
    if len(set(cols)) != len(cols):
        raise InputError("DataFrame has duplicate column names.")
    return [cols.index(f) for f in feature_names]


def frame_to_array(
    X: Any,
    feature_names: Sequence[str],
    named: bool,
    categories: dict[int, list] | None,
    used: np.ndarray | None = None,
    numeric: np.ndarray | None = None,
) -> np.ndarray:
    """Reorder a dataframe's columns to the model's features and convert to float64.

    Parameters
    ----------
    X : pandas, polars or pyarrow dataframe (anything narwhals reads eagerly)
    feature_names : sequence of str
        The model's features; columns are matched to them by name when ``named``, else by
        position.
    named : bool
    categories : dict of int to list, optional
        The training categories of categorical features, by feature index.
    used : ndarray of bool, optional
        Which features a split reads; a column of an unused feature is not converted (NaN),
        whatever its type. By default every feature counts as used.
    numeric : ndarray of bool, optional
        Which features the model reads as numbers (a numeric split and no categorical split
        reads them): a categorical column of such a feature is refused (its codes are not its
        values; XGBoost refuses it too). By default, for a model with ``categories``, the
        features without categories.

    Returns
    -------
    ndarray of float64, shape (n_rows, n_features)
    """
    frame = X if isinstance(X, nw.DataFrame) else as_frame(X)
    if frame is None:
        raise InputTypeError(f"X is not a dataframe: {type(X).__name__}.")
    native = list(frame.columns)
    cols = [str(c) for c in native]
    order = _column_order(cols, feature_names, named)
    as_numbers = _numeric_features(len(order), categories, numeric)
    bad, coded = [], []
    values: list[Any] = []  # per feature: its numbers (views where the backend has them), or NaN
    for j, k in enumerate(order):
        s = frame.get_column(native[k])
        dtype = s.dtype
        trained = None if categories is None else categories.get(j)
        if dtype.is_numeric() or isinstance(dtype, nw.Boolean):
            values.append(_convert(s, dtype, None, cols[k]))
        elif used is not None and not used[j]:
            values.append(np.nan)  # a feature no split reads: its values are never looked at
        elif _is_categorical(dtype) and trained is None and as_numbers[j]:
            coded.append(cols[k])
        elif _is_text(dtype) and (trained is not None or _is_categorical(dtype)):
            values.append(_convert(s, dtype, trained, cols[k]))
        else:
            bad.append(f"{cols[k]!r} ({dtype})")
    if bad:
        raise InputTypeError(
            "Columns must be numeric, boolean, categorical, or strings of a categorical "
            f"feature; got {', '.join(bad)}. {_hint(bad, bool(categories))}"
        )
    if coded:
        raise _categorical_numeric(coded)
    out = np.empty((len(frame), len(order)), dtype=np.float64)
    # in blocks of rows that stay in cache: a column at a time over all rows would fetch
    # every row's cache lines once per column (4x slower for 500,000 x 50 float32 values)
    step = max(1, CACHE_ELEMENTS // max(1, len(order)))
    for a in range(0, len(frame), step):
        block = out[a : a + step]
        for j, v in enumerate(values):
            block[:, j] = v if np.isscalar(v) else v[a : a + step]
    _ORDERED[id(out)] = out
    return out


def as_rows(
    X: Any,
    n_features: int,
    feature_names: Sequence[str],
    named: bool,
    categories: dict[int, list] | None = None,
    used: np.ndarray | None = None,
    numeric: np.ndarray | None = None,
) -> tuple[int, Iterator[tuple[int, np.ndarray]]]:
    """Validate X and return ``(n_rows, blocks)``.

    ``blocks`` yields ``(first_row, block)`` pairs of C-contiguous float64 arrays covering all
    rows. Dataframes (pandas, polars, pyarrow, ...) come as one converted block, their columns
    matched by name when ``named`` (``frame_to_array``); float64 arrays as one block (no copy
    where already C-contiguous), other dense inputs as one converted block, except float32,
    which is converted in blocks of rows of at most ``BLOCK_ELEMENTS`` values (the conversion
    is exact); scipy sparse inputs in chunks with absent entries as NaN (missing). Input
    without column names given to a model with feature names (``named``) gets a
    ``FeatureNamesWarning``. ``used`` and ``numeric``: as for ``frame_to_array``.
    """
    if _is_sparse(X):
        csr = X.tocsr()
        if csr.ndim != 2:
            raise InputError("X must be 2-D.")
        if csr.dtype.kind not in "biuf":
            raise InputTypeError(f"X must be numeric; got dtype {csr.dtype}.")
        _check_width(csr.shape[1], n_features)
        if named:
            warn_unnamed(feature_names)
        return csr.shape[0], _sparse_blocks(csr)
    frame = as_frame(X)
    if frame is not None:
        arr = frame_to_array(frame, feature_names, named, categories, used, numeric)
        return arr.shape[0], iter([(0, arr)])
    if _is_series(X):
        lib = type(X).__module__.split(".")[0]
        raise InputError(
            f"X must be 2-D; got a {lib} Series. Use X.to_frame().T for one row "
            "or X.to_frame() for one feature."
        )
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"X could not be read as a numeric array: {e}") from e
    if arr.ndim != 2:
        raise InputError(
            f"X must be 2-D (rows x features); got an array of shape {arr.shape}. "
            "Use X.reshape(1, -1) for a single row."
        )
    if arr.dtype.kind not in "biuf":
        raise InputTypeError(f"X must be numeric; got dtype {arr.dtype}.")
    _check_width(arr.shape[1], n_features)
    if named and _ORDERED.get(id(arr)) is not arr:
        warn_unnamed(feature_names)
    if arr.dtype == np.float32:
        return arr.shape[0], _float32_blocks(arr)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    return arr.shape[0], iter([(0, arr)])


def join_blocks(blocks: Iterator[tuple[int, np.ndarray]], n_features: int) -> np.ndarray:
    """The blocks of ``as_rows`` as one C-contiguous float64 (n, n_features) array."""
    parts = [b for _, b in blocks]
    if not parts:  # sparse input without rows
        return np.zeros((0, n_features))
    out = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if len(parts) > 1 or _ORDERED.get(id(parts[0])) is parts[0]:
        _ORDERED[id(out)] = out
    return out


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
        raise InputError(
            f"X has {width} features, but the model was trained with {n_features} features."
        )
