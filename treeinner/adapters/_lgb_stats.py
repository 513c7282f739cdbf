"""LightGBM: rebuild the statistics its model text rounds or leaves out, from the leaves.

Hessian covers and counts are summed up from the leaves' ``leaf_weight`` and ``leaf_count``;
split gains are recomputed from G = -value (H + lambda) / lr; the ``boost_from_average``
intercept that the first tree of each output carries in every leaf is the score at which the
root's gradient sum is zero (or, with label weights, the solution of ``binary_init``).

Every tree here is a ``_common.Tree`` in LightGBM's layout: splits 0..n_in-1, then the leaves.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._lgb_records import bad
from ._records import Tree


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
