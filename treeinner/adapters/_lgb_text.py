"""LightGBM's model text (a saved model file, ``Booster.model_to_string()``) read into an
``LgbModel``: the header's ``key=value`` lines, one ``Tree=i`` block per tree, and after
``end of trees`` the training parameters and the pandas categories.

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


def read(text: str) -> LgbModel:
    """Parse a model text (checks its structure, not yet what the values mean)."""
    header, tree_kvs, tail = _split_text(text)
    sizes = header.get("tree_sizes")
    if sizes is not None and sizes.strip() and len(sizes.split()) != len(tree_kvs):
        raise bad(
            f"the header lists {len(sizes.split())} trees but the file holds {len(tree_kvs)} "
            "(truncated file?)."
        )
    trees = [_tree(kv, i) for i, kv in enumerate(tree_kvs)]
    params = _parse_params(tail)
    average = bool(header.get("average_output"))
    return LgbModel(header, trees, params, _parse_pandas_categorical(tail), average)


# ---------------------------------------------------------------------- sections
def _key_values(lines: list[str]) -> dict[str, str]:
    """``key=value`` lines as a dict (other lines ignored)."""
    out: dict[str, str] = {}
    for line in lines:
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v
    return out


def _split_text(text: str) -> tuple[dict[str, Any], list[dict[str, str]], str]:
    """Header key-values, per-tree key-values and the text after the trees."""
    if not isinstance(text, str):
        raise InputTypeError(f"Expected the model text as str, got {type(text).__name__}.")
    if not text.startswith("tree"):
        raise ModelFormatError("Not a LightGBM model text (it does not start with 'tree').")
    end = text.find("end of trees")
    if end < 0:
        raise bad("no 'end of trees' line (truncated file?).")
    body, tail = text[:end], text[end + len("end of trees") :]
    blocks = re.split(r"^Tree=", body, flags=re.M)
    header: dict[str, Any] = _key_values(blocks[0].splitlines())
    header["average_output"] = any(ln.strip() == "average_output" for ln in blocks[0].splitlines())
    trees = []
    for i, blk in enumerate(blocks[1:]):
        lines = blk.splitlines()
        if not lines or lines[0].strip() != str(i):
            raise bad(f"tree block {i} is labelled {lines[0] if lines else ''!r}.")
        trees.append(_key_values(lines[1:]))
    return header, trees, tail


def _parse_params(tail: str) -> dict[str, str]:
    """The ``parameters:`` section (``[key: value]`` lines)."""
    out: dict[str, str] = {}
    start = tail.find("\nparameters:")
    if start < 0:
        if tail.strip():  # LightGBM writes the parameters after the feature importances
            raise bad("no complete 'parameters:' section after the trees (truncated file?).")
        return out
    stop = tail.find("end of parameters", start)
    if stop < 0:
        raise bad("the parameters section has no 'end of parameters' line (truncated file?).")
    for line in tail[start:stop].splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]") and ": " in line:
            k, v = line[1:-1].split(": ", 1)
            out[k.strip()] = v.strip()
        elif line.startswith("[") and line.endswith(":]"):
            out[line[1:-2].strip()] = ""
    return out


def _parse_pandas_categorical(tail: str) -> Any:
    """The ``pandas_categorical:`` JSON line, or None."""
    m = re.search(r"^pandas_categorical:(.*)$", tail, flags=re.M)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except json.JSONDecodeError as e:
        raise bad(f"pandas_categorical is not valid JSON ({e}).") from None


# ---------------------------------------------------------------------- one tree
def _numbers(s: str, key: str, n: int | None, kind: type, what: str) -> np.ndarray:
    """The space-separated values of a model-text field, checked for type and count."""
    s = s.strip()
    try:
        out = np.array([kind(v) for v in s.split(" ")] if s else [], dtype=kind)
    except ValueError as e:
        raise bad(f"field {key!r} holds a value that is not {what} ({e}).") from None
    if n is not None and out.shape[0] != n:
        raise bad(f"field {key!r} has {out.shape[0]} values, expected {n}.")
    return out


def _floats(kv: dict[str, str], key: str, n: int | None, default: float | None = None):
    """A float field (``default`` everywhere when it is absent or empty and a default is
    given)."""
    s = kv.get(key, "")
    if default is not None and not s.strip():
        return np.full(n, default)
    return _numbers(s, key, n, float, "a number").astype(np.float64)


def _ints(kv: dict[str, str], key: str, n: int | None) -> np.ndarray:
    """An integer field."""
    return _numbers(kv.get(key, ""), key, n, int, "an integer").astype(np.int64)


def _tree(kv: dict[str, str], index: int) -> LgbTree:
    """One ``Tree=`` block."""
    try:
        L = int(kv["num_leaves"])
    except KeyError:
        raise bad(f"tree {index} lacks num_leaves (truncated file?).") from None
    except ValueError:
        raise bad(f"tree {index} has num_leaves={kv['num_leaves']!r}.") from None
    if L < 1:
        raise bad(f"tree {index} has num_leaves={L}.")
    if "leaf_value" not in kv:
        raise bad(f"tree {index} lacks leaf_value (truncated file?).")
    leaf_value = _floats(kv, "leaf_value", L)
    leaf_weight = _floats(kv, "leaf_weight", L, np.nan)
    leaf_count = _floats(kv, "leaf_count", L, np.nan)
    shrinkage = float(kv.get("shrinkage", "1") or 1)
    is_linear = kv.get("is_linear", "0").strip() not in ("", "0")
    splits = _splits(kv, index, L - 1)
    linear = _linear(kv, index, L) if is_linear else None
    return LgbTree(L, leaf_value, leaf_weight, leaf_count, shrinkage, *splits, is_linear, linear)


def _splits(kv: dict[str, str], index: int, n_in: int) -> tuple:
    """The split fields of ``LgbTree``, from ``split_feature`` to ``cat_words``."""
    for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if n_in and key not in kv:
            raise bad(f"tree {index} lacks {key!r} (truncated file?).")
    feature = _ints(kv, "split_feature", n_in)
    gain = _floats(kv, "split_gain", n_in, 0.0)
    thr = _floats(kv, "threshold", n_in)
    dt = _ints(kv, "decision_type", n_in)
    if np.any((dt < 0) | (dt > 255)):
        raise bad(f"tree {index} has an invalid decision_type.")
    left, right = _ints(kv, "left_child", n_in), _ints(kv, "right_child", n_in)
    categorical, default_left, missing = (dt & 1) != 0, (dt & 2) != 0, (dt >> 2) & 3
    if np.any(missing == 3):
        raise bad(f"tree {index} has an unknown missing type in decision_type.")
    words: dict[int, np.ndarray] = {}
    if np.any(categorical):
        words = _category_sets(kv, index, thr, categorical)
        thr = np.where(categorical, np.nan, thr)
    return feature, gain, thr, left, right, categorical, default_left, missing, words


def _category_sets(
    kv: dict[str, str], index: int, thr: np.ndarray, categorical: np.ndarray
) -> dict[int, np.ndarray]:
    """The bitset of every categorical split (its threshold numbers the set)."""
    num_cat = int(kv.get("num_cat", "0") or 0)
    bounds = _ints(kv, "cat_boundaries", num_cat + 1)
    cat_thr = _ints(kv, "cat_threshold", None)
    if (
        bounds.size == 0
        or bounds[0] != 0
        or bounds[-1] != cat_thr.size
        or np.any(np.diff(bounds) < 0)
    ):
        raise bad(f"tree {index}: cat_boundaries do not index cat_threshold.")
    if np.any((cat_thr < 0) | (cat_thr >= 2**32)):
        raise bad(f"tree {index}: cat_threshold words are not uint32.")
    words = {}
    for i in np.flatnonzero(categorical):
        c = thr[i]
        if not (c == int(c) and 0 <= c < num_cat):
            raise bad(f"tree {index}: categorical split {i} names bitset {c}.")
        c = int(c)
        words[int(i)] = cat_thr[bounds[c] : bounds[c + 1]].astype(np.uint32)
    return words


def _linear(kv: dict[str, str], index: int, L: int) -> LinearModel:
    """The linear models of a linear tree's leaves."""
    for key in ("leaf_const", "num_features", "leaf_features", "leaf_coeff"):
        if key not in kv:
            raise bad(f"linear tree {index} lacks {key!r} (truncated file?).")
    n_feat = _ints(kv, "num_features", L)
    if np.any(n_feat < 0):
        raise bad(f"linear tree {index} has a negative num_features.")
    total = int(n_feat.sum())
    flat = {k: " ".join(kv[k].split()) for k in ("leaf_features", "leaf_coeff")}
    feats = _ints(flat, "leaf_features", total)
    coefs = _floats(flat, "leaf_coeff", total)
    ptr = np.concatenate([[0], np.cumsum(n_feat)])
    return LinearModel(
        const=_floats(kv, "leaf_const", L),
        features=[feats[ptr[k] : ptr[k + 1]] for k in range(L)],
        coeff=[coefs[ptr[k] : ptr[k + 1]] for k in range(L)],
    )
