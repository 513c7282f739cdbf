"""LightGBM: check a tree's structure and counts as both readers give them, and rebuild the
statistics its model text rounds or leaves out, from the leaves.

``structure`` and ``check_counts`` work in LightGBM's numbering (a split's index, or ``~leaf``
for a child), before the tree is laid out; the rest on a laid-out ``_common.Tree``.

Hessian covers and counts are summed up from the leaves' ``leaf_weight`` and ``leaf_count``;
split gains are recomputed from G = -value (H + lambda) / lr; the ``boost_from_average``
intercept that the first tree of each output carries in every leaf is the score at which the
root's gradient sum is zero (or, with label weights, the solution of ``binary_init``).

Every tree here is a ``_common.Tree`` in LightGBM's layout: splits 0..n_in-1, then the leaves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ._lgb_records import bad
from ._records import Tree

# ---------------------------------------------------------------------- numbers
_INT = r"[-+]?\d{1,19}"
_FLOAT = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|(?i:inf|infinity|nan))"
#: one number of each kind, as LightGBM writes it
TOKEN = {int: re.compile(_INT, re.ASCII), float: re.compile(_FLOAT, re.ASCII)}
INT32 = (-(2**31), 2**31 - 1)


def number(value: Any, kind: type, what: str) -> Any:
    """``value`` (a model-text string, or a JSON number) as a Python ``kind`` (int or float),
    strictly: no trailing text, no underscores, no bool for a number; ``what`` names it in the
    error (e.g. ``"the header's num_class"``)."""
    out = None
    if isinstance(value, str) and TOKEN[kind].fullmatch(value.strip(" ")):
        out = kind(value.strip(" "))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if kind is float or isinstance(value, int) or float(value).is_integer():
            out = kind(value)
    if out is not None and (kind is float or abs(out) < 2**63):
        return out
    noun = "an integer" if kind is int else "a number"
    raise bad(f"{what} is {value!r}, not {noun} (a non-numeric or malformed value).")


def header_int(header: dict, key: str, default: int | None = None, lo: int = 0) -> int:
    """An integer of the header (``default`` when absent; none: it must be there), >= ``lo``."""
    if key not in header:
        if default is None:
            raise bad(f"the header lacks {key!r} (truncated file?).")
        return default
    v = number(header[key], int, f"the header's {key}")
    if not lo <= v <= INT32[1]:
        raise bad(f"the header's {key} is {v}; it must be in [{lo}, {INT32[1]}].")
    return v


# ---------------------------------------------------------------------- LightGBM's numbering
def structure(left: np.ndarray, right: np.ndarray, index: int) -> list[int]:
    """The splits of tree ``index`` parents first, checking that the child codes are in range
    and reach every split and every leaf exactly once from the root (no cycle, no shared or
    unreachable node: LightGBM would loop forever or read out of bounds)."""
    n_in = left.shape[0]
    for name, c in (("left_child", left), ("right_child", right)):
        bad_at = np.flatnonzero((c >= n_in) | (c < -(n_in + 1)) | (c == 0))
        if bad_at.size:
            k = int(bad_at[0])
            raise bad(
                f"tree {index} split {k}: {name} is {int(c[k])}, a child index outside "
                f"the tree (splits 1..{n_in - 1}, leaves -1..{-(n_in + 1)})."
            )
    kids = list(zip(left.tolist(), right.tolist()))
    seen_split = [False] * n_in
    seen_leaf = [False] * (n_in + 1)
    order: list[int] = []
    stack = [0] if n_in else []
    while stack:
        k = stack.pop()
        if seen_split[k]:
            raise bad(f"tree {index} split {k}: reached twice (a cycle or a shared node).")
        seen_split[k] = True
        order.append(k)
        for c in kids[k]:
            if c >= 0:
                stack.append(c)
            elif seen_leaf[~c]:
                raise bad(f"tree {index} leaf {~c}: reached twice (a shared leaf).")
            else:
                seen_leaf[~c] = True
    if n_in and not (all(seen_split) and all(seen_leaf)):
        what, seen = ("split", seen_split) if not all(seen_split) else ("leaf", seen_leaf)
        raise bad(f"tree {index} {what} {seen.index(False)}: not reachable from the root.")
    return order


def check_counts(
    index: int,
    left: np.ndarray,
    right: np.ndarray,
    leaf_count: np.ndarray,
    leaf_weight: np.ndarray,
    internal_count: np.ndarray | None,
) -> None:
    """Counts and hessian weights of tree ``index`` (``structure`` checked): leaf counts
    non-negative integers, leaf weights non-negative and finite (NaN: not recorded), every
    split's count (the sum of its leaves') positive (TreeSHAP divides by it) and equal to the
    recorded ``internal_count`` (which LightGBM's own TreeSHAP reads)."""
    with np.errstate(invalid="ignore"):
        wrong_c = ~(np.isfinite(leaf_count) & (leaf_count >= 0) & (leaf_count % 1 == 0))
        wrong_c &= ~(np.isnan(leaf_count) & (left.shape[0] == 0))  # a stump's count: unused
        wrong_w = ~(np.isnan(leaf_weight) | (np.isfinite(leaf_weight) & (leaf_weight >= 0)))
    for name, wrong, vals, rule in (
        ("leaf_count", wrong_c, leaf_count, "integers >= 0"),
        ("leaf_weight", wrong_w, leaf_weight, ">= 0 and finite"),
    ):
        if np.any(wrong):
            k = int(np.flatnonzero(wrong)[0])
            raise bad(f"tree {index} leaf {k}: {name} is {float(vals[k])!r}; it must be {rule}.")
    n_in = left.shape[0]
    if n_in == 0:
        return
    sums, leaves = [0.0] * n_in, leaf_count.tolist()
    kids = list(zip(left.tolist(), right.tolist()))
    for k in reversed(structure(left, right, index)):
        a, b = kids[k]
        sums[k] = (sums[a] if a >= 0 else leaves[~a]) + (sums[b] if b >= 0 else leaves[~b])
    counts = np.array(sums)
    zero = np.flatnonzero(counts <= 0)
    if zero.size:
        raise bad(
            f"tree {index} split {int(zero[0])}: its leaves' leaf_count sum to 0; a split "
            "holds rows (TreeSHAP divides by its count)."
        )
    if internal_count is not None:
        off = np.flatnonzero(internal_count != counts)
        if off.size:
            k = int(off[0])
            raise bad(
                f"tree {index} split {k}: internal_count is {int(internal_count[k])} but its "
                f"leaves' leaf_count sum to {counts[k]:.0f}."
            )


def check_features(features: np.ndarray, n_features: int, where: str, field: str) -> None:
    """Feature indices of ``field`` (``where``: e.g. ``"tree 3"``) within [0, n_features)."""
    out = np.flatnonzero((features < 0) | (features >= n_features))
    if out.size:
        k = int(out[0])
        raise bad(
            f"{where}: {field}[{k}] is {int(features[k])}, a feature outside "
            f"[0, {n_features}) (max_feature_idx={n_features - 1})."
        )


# ---------------------------------------------------------------------- laid-out trees
def n_inner(tree: Tree) -> int:
    """Number of splits of a tree (a full binary tree of 2 n_in + 1 nodes)."""
    return (tree.left.shape[0] - 1) // 2


def postorder(left: np.ndarray, right: np.ndarray) -> list[int]:
    """Inner nodes children-first (the tree was checked to be proper by its indices)."""
    order: list[int] = []
    stack = [0]
    seen = np.zeros(left.shape[0], dtype=bool)
    while stack:
        i = stack.pop()
        if seen[i]:
            raise bad("a tree has a cycle or a shared node.")
        seen[i] = True
        if left[i] >= 0:
            order.append(i)
            stack.append(int(left[i]))
            stack.append(int(right[i]))
    if not np.all(seen):
        raise bad("a tree has nodes not reachable from its root.")
    return order[::-1]


def sums(tree: Tree) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Hessian covers and counts of every node, summed from the leaves' (``tree.cover`` and
    ``tree.count`` at the leaves), and the split order (children first) that summed them."""
    n_in = n_inner(tree)
    n = tree.left.shape[0]
    cover = np.zeros(n)
    count = np.zeros(n)
    cover[n_in:] = tree.cover[n_in:]
    count[n_in:] = tree.count[n_in:]
    if n_in == 0 and np.isnan(cover[0]):
        cover[0] = 0.0  # LightGBM writes no weight for a one-leaf tree; no split reads it
    L, R = tree.left, tree.right
    order = postorder(L, R)
    for i in order:
        cover[i] = cover[L[i]] + cover[R[i]]
        count[i] = count[L[i]] + count[R[i]]
    return cover, count, order


def recomputed_gain(tree: Tree, order: list[int], lr: float, lam: float) -> np.ndarray:
    """S(L) + S(R) - S(P), S = G^2 / (H + lambda), with G rebuilt from the leaf values."""
    n_in = n_inner(tree)
    L, R, cover = tree.left, tree.right, tree.cover
    G = np.zeros(cover.shape[0])
    G[n_in:] = -tree.value[n_in:] * (cover[n_in:] + lam) / lr
    gain = np.zeros(cover.shape[0])
    for i in order:
        G[i] = G[L[i]] + G[R[i]]
    with np.errstate(divide="ignore", invalid="ignore"):
        S = np.where(cover + lam > 0, G * G / (cover + lam), 0.0)
    for i in order:
        gain[i] = S[L[i]] + S[R[i]] - S[i]
    return gain


def weighted_mean_init(value: np.ndarray, cover: np.ndarray, lam: float) -> float:
    """The intercept of leaves that share it, at a zero root gradient sum: the (H + lambda)-
    weighted mean of the leaf values (NaN when the weights do not allow it)."""
    w = cover + lam
    if value.shape[0] == 1 or not np.all(np.isfinite(w)) or np.sum(w) <= 0:
        return float(np.mean(value)) if value.shape[0] == 1 else float("nan")
    return float(np.dot(w, value) / np.sum(w))


def binary_init(
    value: np.ndarray,
    cover: np.ndarray,
    lam: float,
    lr: float,
    sigma: float,
    w_pos: Callable[[float], float],
    w_neg: Callable[[float], float],
) -> float:
    """The intercept of a binary tree whose rows carry label weights (scale_pos_weight,
    is_unbalance): the root gradient sum at the intercept is then not zero but
    H (w_neg - w_pos) / (sigma (p w_pos + (1 - p) w_neg)), p = sigmoid(sigma init)."""
    H = float(np.sum(cover))
    c = cover + lam
    m = weighted_mean_init(value, cover, lam)

    def f(init: float) -> float:
        """The root's (H + lambda)-weighted residual plus lr times its gradient sum."""
        p = 1.0 / (1.0 + math.exp(-sigma * init))
        wp, wn = w_pos(p), w_neg(p)
        g_root = H * (wn - wp) / (sigma * (p * wp + (1 - p) * wn))
        return float(np.dot(c, value - init)) + lr * g_root

    lo, hi = m - 1.0, m + 1.0
    for _ in range(200):
        if f(lo) > 0:
            break
        lo -= 2 * (hi - lo)
    for _ in range(200):
        if f(hi) < 0:
            break
        hi += 2 * (hi - lo)
    if not (f(lo) > 0 > f(hi)):
        return m
    for _ in range(200):  # bisection to the last bit
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
