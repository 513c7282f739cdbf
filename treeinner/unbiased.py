"""Unbiased gain (UnbiasedGBM, paper 000 Eq. 5): split gains re-estimated on held-out data."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from . import _api, _input
from ._api import per_output as _per_output
from ._api import public
from ._staged import _iter_ptr, _staged, _weights, stages
from .adapters import from_model
from .attribution import _positive_int, _reference
from .ensemble import TreeEnsemble
from .kernels import attribution as KA
from .kernels import unbiased as KU
from .objectives import get_objective

__all__ = ["unbiased_gain"]

# bytes of per-round gradients and leaves held at once (rounds are processed in chunks)
_CHUNK_BYTES = 64 << 20


def _subtree(ens: TreeEnsemble, leaf_values: np.ndarray) -> np.ndarray:
    out = np.empty(ens.n_nodes)
    KA.subtree_sums(ens.left, ens.right, ens.tree_offsets, leaf_values, out)
    return out


def _training_sums(ens: TreeEnsemble, reference: Any) -> tuple[np.ndarray, np.ndarray]:
    """Training gradient and hessian sums G, H of every node (inner nodes: sums over leaves),
    from ``reference=(X_train, y_train[, w])`` or, without it, from the leaves and covers."""
    if reference is not None:
        G, H, _, _, _ = _staged(ens, *_reference(reference))
        return _subtree(ens, G), _subtree(ens, H)
    if not np.all(np.isfinite(ens.cover)):
        raise ValueError(
            "The model does not store hessian covers, so its training gradient sums are "
            "unknown; pass reference=(X_train, y_train)."
        )
    if ens.inexact:
        warnings.warn(
            "Training gradient sums are rebuilt from leaf values as -G (H + lambda) / lr, "
            f"which is approximate for this model ({'; '.join(ens.inexact)}); pass "
            "reference=(X_train, y_train) to compute them from the training data.",
            stacklevel=3,
        )
    tree = ens._node_tree
    wt = ens.tree_weight[tree]
    p = np.divide(ens.value, wt, out=ens.value.copy(), where=wt != 0)
    leaf = ens.left < 0
    G = np.where(leaf, -p * (ens.cover + ens.reg_lambda) / ens.learning_rate[tree], 0.0)
    return _subtree(ens, G), _subtree(ens, np.where(leaf, ens.cover, 0.0))


def _exact_ratios(ens, X, y, inner, counts=None):
    """Constant hessian: the expectation over draws of sum g / sum h is the slice's
    sum g / sum h, for the node and both children alike. With ``counts`` (a bootstrap
    resample), row i counts ``counts[i]`` times in the sums and the row counts."""
    G, H, C, _, _ = _staged(ens, X, y, counts)
    G, H, C = _subtree(ens, G), _subtree(ens, H), _subtree(ens, C)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(H != 0, G / H, 0.0)
    L, R = ens.left[inner], ens.right[inner]
    return np.stack([r[inner], r[L], r[R]], axis=1), np.rint(C).astype(np.int64)


def _drawn_ratios(ens, X, y, w, n_draws, min_samples, seed, record=False):
    """Held-out ratios from draws: staged leaves and gradients a chunk of rounds at a time.

    With ``record`` (the reference mode of the tests), also the drawn rows: an array of shape
    (n_nodes, 3, n_draws, n_rows) whose ``[t, u, d, :k]`` are the rows of draw d from the node
    (u = 0), left child (1) or right child (2) of split t."""
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = _input.join_blocks(blocks, ens.n_features)
    yv = obj.check_labels(y)
    if yv.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {yv.shape[0]}.")
    w = _weights(w, n)
    K = ens.n_outputs
    rho = np.zeros((ens.n_nodes, 3))
    kk = np.zeros(ens.n_nodes, dtype=np.int64)
    count = np.zeros(ens.n_nodes, dtype=np.int64)
    shape = (ens.n_nodes, 3, n_draws, n) if record else (0, 0, 0, 0)
    rec = np.full(shape, -1, dtype=np.int64)
    if n == 0:
        return rho, kk, count, rec
    ptr = _iter_ptr(ens)
    n_rounds = ptr.shape[0] - 1
    per_round = n * (16 * K + 4 * int(np.max(np.diff(ptr))))
    step = int(max(1, min(n_rounds, _CHUNK_BYTES // per_round)))
    F = np.tile(ens.base_margin, (n, 1))
    single = K == 1 and n_rounds == ens.n_trees
    nodes, layout, st = ens._nodes(), ens._layout, stages(ens, obj)
    for it0 in range(0, n_rounds, step):
        it1 = min(n_rounds, it0 + step)
        t0, t1 = int(ptr[it0]), int(ptr[it1])
        gw = np.empty((it1 - it0, K, n))
        hw = np.empty_like(gw)
        leaves = np.empty((t1 - t0, n), dtype=np.int32)
        kernel = KU.staged_leaves_single if single else KU.staged_leaves
        kernel(Xd, yv, w, nodes, layout, st, it0, it1, F, gw, hw, leaves)
        tree_round = (np.searchsorted(ptr, np.arange(t0, t1), side="right") - 1 - it0).astype(
            np.int64
        )
        KU.split_draws(
            ens.left, ens.right, ens.tree_offsets, ens.tree_group, tree_round, t0, t1,
            leaves, gw, hw, seed, n_draws, min_samples, rho, kk, count, rec,
        )  # fmt: skip
    return rho, kk, count, rec


@public
def unbiased_gain(
    model: Any,
    X: Any,
    y: Any,
    *,
    n_draws: int = 1,
    min_samples: int = 1,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
    per_split: bool = False,
) -> pd.Series | pd.DataFrame:
    """Unbiased gain: every split's gain re-estimated on held-out data (UnbiasedGBM, Eq. 5).

    For a split of node t into L and R, with G_u the training gradient sums and S_u the
    held-out rows reaching u, k = min(|S_L|, |S_R|) rows are drawn without replacement from
    each of S_t, S_L and S_R; with rho_u = sum g / sum h over the draw (held-out gradients and
    hessians at the margin before the tree's boosting round), the split scores
    ``G_L rho_L + G_R rho_R - G_t rho_t``, credited to its feature. The scale is that of the
    booster's gain (the paper's 1/(2n) is dropped).

    A split on a feature independent of the held-out gradients within its node scores 0 in
    expectation (Theorem 2): for a noise feature, always so in the first boosting round. In
    later rounds the held-out gradients carry the earlier trees' fit to training noise, so
    splits that keep fitting it score negative, as the held-out loss they cause says (see
    ``docs/unbiased_gain.md``); ordinary gain ranks such features high instead.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Held-out rows (not used in training).
    y : array-like of shape (n_samples,)
        Their labels, valid for the model's objective.
    n_draws : int, default 1
        Independent draws averaged per node (each rho_u is the mean of ``n_draws`` ratios).
        Where the objective's hessian is constant (squared error) and the weights are uniform,
        the exact expectation over draws is used instead, so no draws are made.
    min_samples : int, default 1
        A split whose k is below this contributes 0.
    sample_weight : array-like of shape (n_samples,), optional
        Held-out row weights: draws pick rows uniformly and sum ``w g`` and ``w h``.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``, the training data: compute the training sums
        G_u from it with staged gradients instead of rebuilding them from the leaf values and
        covers as G_leaf = -p(leaf) (H_leaf + lambda) / lr (needed where the model stores no
        covers).
    random_state : int, numpy Generator or None, default None
        Seed of the draws (None: fresh entropy). The same seed gives the same result whatever
        the thread count.
    per_split : bool, default False
        Return one row per split instead of per-feature sums.

    Returns
    -------
    pandas.Series or pandas.DataFrame
        Per feature: a Series (multi-output models: a DataFrame with one column per class and
        ``total``). With ``per_split=True``, a DataFrame with columns ``tree``, ``node`` (index
        within the tree), ``class`` (multi-output models), ``feature``, ``threshold`` (NaN for
        categorical splits), ``gain`` (G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) -
        G_t^2/(H_t+lambda) from the training sums), ``unbiased_gain``, ``k``, ``n_node``,
        ``n_left`` and ``n_right`` (held-out rows reaching the node and its children).
    """
    ens = from_model(model)
    n_draws = _positive_int("n_draws", n_draws)
    min_samples = _positive_int("min_samples", min_samples)
    seed = _api.seed64(random_state)
    obj = get_objective(ens)
    G, H = _training_sums(ens, reference)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    uniform = sample_weight is None
    if not uniform:
        wv = np.asarray(sample_weight, dtype=np.float64)
        uniform = wv.ndim == 1 and wv.size > 0 and np.all(wv == wv[0]) and wv[0] > 0
    if obj.constant_hessian and uniform:
        if sample_weight is not None:  # uniform weights cancel; still check their count
            _weights(sample_weight, np.shape(y)[0])
        r, count = _exact_ratios(ens, X, y, inner)
        k = np.minimum(count[L], count[R])
    else:
        rho, kk, count, _ = _drawn_ratios(ens, X, y, sample_weight, n_draws, min_samples, seed)
        r, k = rho[inner], kk[inner]
    ub = G[L] * r[:, 1] + G[R] * r[:, 2] - G[inner] * r[:, 0]
    ub = np.where(k >= min_samples, ub, 0.0)
    tree = ens._node_tree[inner]
    group = ens.tree_group[tree]
    if per_split:
        return _split_frame(ens, inner, tree, group, G, H, ub, k, count)
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], group), ub)
    return _per_output(ens, out, "unbiased_gain")


def _split_frame(ens, inner, tree, group, G, H, ub, k, count) -> pd.DataFrame:
    L, R = ens.left[inner], ens.right[inner]
    lam = ens.reg_lambda

    def score(u):
        den = H[u] + lam
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, G[u] ** 2 / den, 0.0)

    cols: dict[str, Any] = {
        "tree": tree,
        "node": inner - ens.tree_offsets[tree],
    }
    if ens.n_outputs > 1:
        cols["class"] = group
    cols["feature"] = np.asarray(ens._column_names(), dtype=object)[ens.feature[inner]]
    numeric = ens.split_type[inner] == 0
    if ens.input_map is not None:  # splits the booster evaluates: no threshold to show
        numeric &= ens.feature[inner] < ens.input_map.n_raw
    cols["threshold"] = np.where(numeric, ens.threshold[inner], np.nan)
    cols["gain"] = score(L) + score(R) - score(inner)
    cols["unbiased_gain"] = ub
    cols["k"] = k
    cols["n_node"] = count[inner]
    cols["n_left"] = count[L]
    cols["n_right"] = count[R]
    return pd.DataFrame(cols)
