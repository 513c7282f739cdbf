"""LightGBM's model text (a saved model file, ``Booster.model_to_string()``) read into an
``LgbModel``: the header's ``key=value`` lines, one ``Tree=i`` block per tree, and after
``end of trees`` the training parameters and the pandas categories.

Every field is read strictly, as LightGBM writes it (space-separated numbers, one line per
field), through one helper (``_field``) whose errors name the field and the tree: LightGBM's own
reader skips over garbage in many fields, reads past short ones and aborts the process on
others, so a file that deviates from what LightGBM writes is refused. ``tree_sizes`` (the byte
length of every tree block, by which LightGBM locates the trees) must match the blocks.

The text rounds internal values, weights and split gains to about six digits while leaf fields
keep full precision; ``lightgbm`` rebuilds the inner statistics from the leaves.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .._errors import InputTypeError, ModelFormatError
from ._lgb_records import LgbModel, LgbTree, LinearModel, bad
from ._lgb_stats import INT32, TOKEN, check_counts, check_features, header_int, number

#: every field LightGBM writes in a tree block (its reader reads at most 22 lines)
_TREE_FIELDS = frozenset(
    (
        "num_leaves",
        "num_cat",
        "split_feature",
        "split_gain",
        "threshold",
        "decision_type",
        "left_child",
        "right_child",
        "leaf_value",
        "leaf_weight",
        "leaf_count",
        "internal_value",
        "internal_weight",
        "internal_count",
        "cat_boundaries",
        "cat_threshold",
        "is_linear",
        "shrinkage",
        "leaf_const",
        "num_features",
        "leaf_features",
        "leaf_coeff",
    )
)
#: header keys whose value may hold '=' (LightGBM refuses any other header line with two)
_FREE_TEXT = ("feature_names", "monotone_constraints")
_PANDAS = "pandas_categorical:"


def read(text: str) -> LgbModel:
    """Parse a model text (checks its structure and every field's syntax, counts and ranges;
    ``lightgbm`` checks what the values mean together)."""
    header_lines, blocks, tail = _split_text(text)
    header = _header(header_lines)
    n_features = header_int(header, "max_feature_idx") + 1
    header_int(header, "label_index")  # LightGBM refuses a model text without it
    sizes = _tree_sizes(header, len(blocks))
    trees = [_tree(_block(lines, i), i, n_features) for i, (lines, _) in enumerate(blocks)]
    if sizes is not None:
        for i, (size, (_, nbytes)) in enumerate(zip(sizes, blocks)):
            if size != nbytes:
                raise bad(
                    f"tree_sizes: tree {i} is {nbytes} bytes but the header says {size} "
                    "(LightGBM finds the trees at those offsets; edited or corrupt file?)."
                )
    params = _parse_params(tail)
    average = "average_output" in header
    return LgbModel(header, trees, params, _parse_pandas_categorical(tail), average)


# ---------------------------------------------------------------------- sections
def _split_text(text: str) -> tuple[list[str], list[tuple[list[str], int]], str]:
    """Header lines, every tree block (its lines, after the ``Tree=i`` label checked, and its
    length in bytes) and the text after the trees."""
    if not isinstance(text, str):
        raise InputTypeError(f"Expected the model text as str, got {type(text).__name__}.")
    if not text.startswith("tree"):
        raise ModelFormatError("Not a LightGBM model text (it does not start with 'tree').")
    if "\r" in text:
        raise bad(
            "the text has Windows line endings (\\r\\n); LightGBM finds its trees by byte "
            "offsets (tree_sizes) and writes '\\n' only: save the model with save_model()."
        )
    end = re.search(r"^end of trees$", text, flags=re.M)
    if end is None:
        raise bad("no 'end of trees' line (truncated file?).")
    body, tail = text[: end.start()], text[end.end() :]
    starts = [m.start() for m in re.finditer(r"^Tree=", body, flags=re.M)] + [len(body)]
    blocks = []
    for i, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        lines = body[a:b].split("\n")
        if lines[0] != f"Tree={i}":
            raise bad(f"tree block {i} is labelled {lines[0]!r}.")
        blocks.append((lines[1:], len(body[a:b].encode("utf-8"))))
    return body[: starts[0]].split("\n"), blocks, tail


def _header(lines: list[str]) -> dict[str, Any]:
    """The header's ``key=value`` lines (``average_output`` stands alone)."""
    out: dict[str, Any] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        key, _, value = line.partition("=")
        if not key or (value.count("=") and key not in _FREE_TEXT):
            raise bad(f"the header line {line[:80]!r} is not key=value.")
        if key in out:
            raise bad(f"the header gives {key!r} twice.")
        out[key] = value
    return out


def _tree_sizes(header: dict[str, Any], n_trees: int) -> list[int] | None:
    """``tree_sizes`` (None when absent: LightGBM then reads the trees one after another)."""
    if "tree_sizes" not in header:
        return None
    sizes = _field(header, "tree_sizes", "the header", None, int).tolist()
    if len(sizes) != n_trees:
        raise bad(
            f"the header lists {len(sizes)} trees but the file holds {n_trees} (truncated file?)."
        )
    return sizes


def _parse_params(tail: str) -> dict[str, str]:
    """The ``parameters:`` section (``[key: value]`` lines)."""
    lines = tail.split("\n")
    if "parameters:" not in lines:
        if tail.strip():  # LightGBM writes the parameters after the feature importances
            raise bad("no complete 'parameters:' section after the trees (truncated file?).")
        return {}
    start = lines.index("parameters:")
    if "end of parameters" not in lines[start:]:
        raise bad("the parameters section has no 'end of parameters' line (truncated file?).")
    out: dict[str, str] = {}
    for line in lines[start + 1 : lines.index("end of parameters", start)]:
        m = re.fullmatch(r"\[([^\[\]:]+):(?: (.*))?\]", line.strip())
        if line.strip() and m is None:
            raise bad(f"the parameter line {line[:80]!r} is not '[key: value]'.")
        if m is not None:
            if m.group(1) in out:
                raise bad(f"the parameters give {m.group(1)!r} twice.")
            out[m.group(1)] = (m.group(2) or "").strip()
    return out


def _parse_pandas_categorical(tail: str) -> Any:
    """The ``pandas_categorical:`` JSON of the last line (where LightGBM reads it), or None."""
    lines = [ln.strip() for ln in tail.strip().split("\n")]
    if not lines[-1].startswith(_PANDAS):
        if any(ln.startswith(_PANDAS) for ln in lines):
            raise bad("pandas_categorical is not the last line (LightGBM would not read it).")
        return None
    if any(ln.startswith(_PANDAS) for ln in lines[:-1]):
        raise bad("pandas_categorical is given twice.")
    try:
        cats = json.loads(lines[-1][len(_PANDAS) :])
    except (json.JSONDecodeError, RecursionError) as e:
        raise bad(f"pandas_categorical is not valid JSON ({e}).") from None
    if cats is not None and not (
        isinstance(cats, list)
        and all(isinstance(c, list) and len({json.dumps(v) for v in c}) == len(c) for c in cats)
    ):
        raise bad("pandas_categorical is not a list of lists of distinct categories.")
    return cats


# ---------------------------------------------------------------------- fields
def _field(kv: dict[str, str], key: str, where: str, n: int | None, kind: type) -> np.ndarray:
    """The space-separated numbers of field ``key`` of ``where`` (``"tree 3"``), checked: each a
    number of ``kind`` (int: within int32), ``n`` of them (None: any number)."""
    s = kv.get(key, "")
    toks = [t for t in s.split(" ") if t]
    try:  # Python's int/float read more than LightGBM writes: underscores, other digits
        if not s.isascii() or "_" in s:
            raise ValueError(s)
        vals = list(map(kind, toks))
    except ValueError:
        tok = next((t for t in toks if not TOKEN[kind].fullmatch(t)), s)
        noun = "an integer" if kind is int else "a number"
        raise bad(f"{where}: field {key!r} holds {tok[:40]!r}, which is not {noun}.") from None
    if n is not None and len(vals) != n:
        raise bad(f"{where}: field {key!r} has {len(vals)} values, expected {n}.")
    if kind is float:
        return np.array(vals, dtype=np.float64)
    lo, hi = (0, 2**32 - 1) if key == "cat_threshold" else INT32
    if vals and not (lo <= min(vals) and max(vals) <= hi):
        k = next(k for k, v in enumerate(vals) if not lo <= v <= hi)
        raise bad(f"{where}: {key}[{k}] is {vals[k]}, outside [{lo}, {hi}].")
    return np.array(vals, dtype=np.int64)


def _scalar(kv: dict[str, str], key: str, where: str, kind: type, default: Any = None) -> Any:
    """A one-number field (``default`` when absent)."""
    if key not in kv:
        if default is None:
            raise bad(f"{where} lacks {key} (truncated file?).")
        return default
    return number(kv[key], kind, f"{where}: field {key!r}")


def _optional(kv: dict[str, str], key: str, where: str, n: int, default: float) -> np.ndarray:
    """A float field LightGBM does not require (``default`` everywhere when absent)."""
    return _field(kv, key, where, n, float) if key in kv else np.full(n, default)


def _finite(values: np.ndarray, key: str, where: str, lo: float = -np.inf) -> np.ndarray:
    """``values`` of field ``key``, checked finite and >= ``lo``."""
    wrong = ~(np.isfinite(values) & (values >= lo))
    if np.any(wrong):
        k = int(np.flatnonzero(wrong)[0])
        rule = "finite" if lo == -np.inf else f"finite and >= {lo:g}"
        raise bad(f"{where}: {key}[{k}] is {float(values[k])!r}; it must be {rule}.")
    return values


# ---------------------------------------------------------------------- one tree
def _block(lines: list[str], index: int) -> dict[str, str]:
    """A tree block's ``key=value`` lines, up to the blank line that ends it."""
    kv: dict[str, str] = {}
    for j, line in enumerate(lines):
        if not line:
            extra = next((ln for ln in lines[j:] if ln.strip()), None)
            if extra is not None:
                raise bad(f"tree {index}: {extra[:60]!r} after the blank line ending the tree.")
            break
        key, eq, value = line.partition("=")
        if not eq:
            raise bad(f"tree {index}: the line {line[:60]!r} is not key=value.")
        if key in kv:
            raise bad(f"tree {index}: field {key!r} is given twice.")
        kv[key] = value
    return kv


def _tree(kv: dict[str, str], index: int, n_features: int) -> LgbTree:
    """One ``Tree=`` block."""
    where = f"tree {index}"
    for key in ("num_leaves", "num_cat", "leaf_value"):
        if key not in kv:
            raise bad(f"{where} lacks {key} (truncated file?).")
    unknown = sorted(set(kv) - _TREE_FIELDS)
    if unknown:
        raise bad(f"{where} has an unknown field {unknown[0]!r}.")
    L = _scalar(kv, "num_leaves", where, int)
    if L < 1:
        raise bad(f"{where} has num_leaves={L}; a tree has at least one leaf.")
    is_linear = _scalar(kv, "is_linear", where, int, 0)
    if is_linear not in (0, 1):
        raise bad(f"{where} has is_linear={is_linear}; it is 0 or 1.")
    leaf_value = _finite(_field(kv, "leaf_value", where, L, float), "leaf_value", where)
    shrinkage = _scalar(kv, "shrinkage", where, float, 1.0)
    # LightGBM writes an empty leaf_weight for a one-leaf tree (and reads nothing else there)
    empty_weight = L == 1 and not kv.get("leaf_weight", "").strip()
    leaf_weight = (
        np.full(1, np.nan) if empty_weight else _optional(kv, "leaf_weight", where, L, np.nan)
    )
    for key in ("leaf_count", "internal_count"):  # LightGBM writes both; TreeSHAP weighs by them
        if key not in kv and L > 1:
            raise bad(f"{where} lacks {key} (TreeSHAP weighs by it).")
    leaf_count = _optional(kv, "leaf_count", where, L, np.nan)
    splits = _splits(kv, where, L - 1, n_features, bool(is_linear))
    inner_count = (
        _field(kv, "internal_count", where, L - 1, int) if "internal_count" in kv else None
    )
    check_counts(index, splits[3], splits[4], leaf_count, leaf_weight, inner_count)
    linear = _linear(kv, where, L, n_features) if is_linear else None
    return LgbTree._make(
        (L, leaf_value, leaf_weight, leaf_count, shrinkage, *splits, bool(is_linear), linear)
    )


def _splits(kv: dict[str, str], where: str, n_in: int, n_features: int, linear: bool) -> tuple:
    """The split fields of ``LgbTree``, from ``split_feature`` to ``cat_words``."""
    for key in ("split_feature", "threshold", "left_child", "right_child"):
        if (n_in or linear) and key not in kv:
            raise bad(f"{where} lacks {key} (truncated file?).")
    feature = _field(kv, "split_feature", where, n_in, int)
    check_features(feature, n_features, where, "split_feature")
    gain = _finite(_optional(kv, "split_gain", where, n_in, 0.0), "split_gain", where)
    _finite(_optional(kv, "internal_value", where, n_in, 0.0), "internal_value", where)
    _finite(_optional(kv, "internal_weight", where, n_in, 0.0), "internal_weight", where, 0.0)
    thr = _field(kv, "threshold", where, n_in, float)
    dt = (
        _field(kv, "decision_type", where, n_in, int)
        if "decision_type" in kv
        else np.zeros(n_in, np.int64)
    )
    wrong = np.flatnonzero((dt < 0) | (dt > 15) | ((dt >> 2) & 3 == 3))
    if wrong.size:
        k = int(wrong[0])
        raise bad(
            f"{where} split {k}: decision_type {int(dt[k])} is not a valid decision type "
            "(bit 0 categorical, bit 1 default left, bits 2-3 missing type 0-2)."
        )
    left, right = (
        _field(kv, "left_child", where, n_in, int),
        _field(kv, "right_child", where, n_in, int),
    )
    categorical, default_left, missing = (dt & 1) != 0, (dt & 2) != 0, (dt >> 2) & 3
    words = _category_sets(kv, where, thr, categorical)
    thr = np.where(categorical, np.nan, thr)
    return feature, gain, thr, left, right, categorical, default_left, missing, words


def _category_sets(
    kv: dict[str, str], where: str, thr: np.ndarray, categorical: np.ndarray
) -> dict[int, np.ndarray]:
    """The bitset of every categorical split (its threshold numbers the set)."""
    num_cat = _scalar(kv, "num_cat", where, int)
    if num_cat < 0:
        raise bad(f"{where} has num_cat={num_cat}.")
    if num_cat == 0:
        if "cat_boundaries" in kv or "cat_threshold" in kv or np.any(categorical):
            raise bad(f"{where} has num_cat=0 but categorical splits or their fields.")
        return {}
    for key in ("cat_boundaries", "cat_threshold"):
        if key not in kv:
            raise bad(f"{where} lacks {key} (num_cat={num_cat}).")
    bounds = _field(kv, "cat_boundaries", where, num_cat + 1, int)
    cat_thr = _field(kv, "cat_threshold", where, None, int)
    if bounds[0] != 0 or bounds[-1] != cat_thr.size or np.any(np.diff(bounds) < 0):
        raise bad(
            f"{where}: cat_boundaries {bounds.tolist()[:8]} do not index the "
            f"{cat_thr.size} words of cat_threshold (from 0, non-decreasing, to the end)."
        )
    words = {}
    for i in np.flatnonzero(categorical):
        c = thr[i]
        if not (np.isfinite(c) and c == int(c) and 0 <= c < num_cat):
            raise bad(
                f"{where} split {i}: threshold {float(c)!r} names no bitset (num_cat={num_cat})."
            )
        c = int(c)
        words[int(i)] = cat_thr[bounds[c] : bounds[c + 1]].astype(np.uint32)
    return words


def _linear(kv: dict[str, str], where: str, L: int, n_features: int) -> LinearModel:
    """The linear models of a linear tree's leaves."""
    for key in ("leaf_const", "num_features", "leaf_features", "leaf_coeff"):
        if key not in kv:
            raise bad(f"linear {where} lacks {key} (truncated file?).")
    n_feat = _field(kv, "num_features", where, L, int)
    if np.any(n_feat < 0):
        raise bad(f"linear {where} has a negative num_features.")
    total = int(n_feat.sum())
    feats = _field(kv, "leaf_features", where, total, int)
    check_features(feats, n_features, f"linear {where}", "leaf_features")
    coefs = _finite(_field(kv, "leaf_coeff", where, total, float), "leaf_coeff", where)
    ptr = np.concatenate([[0], np.cumsum(n_feat)])
    return LinearModel(
        const=_finite(_field(kv, "leaf_const", where, L, float), "leaf_const", where),
        features=[feats[ptr[k] : ptr[k + 1]] for k in range(L)],
        coeff=[coefs[ptr[k] : ptr[k + 1]] for k in range(L)],
    )
