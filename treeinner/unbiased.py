"""Unbiased gain (UnbiasedGBM, Zhang et al. 2023, Eq. 5): split gains re-estimated on held-out
data."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import _api, _input
from . import _staged as _staged_pass
from ._api import per_output as _per_output
from ._api import public
from ._dask import is_dask, map_add
from ._errors import InputError
from ._splits import split_columns
from ._staged import _iter_ptr, _staged, _weights, stages
from ._stats import Estimate, p_values
from .adapters import from_model
from .attribution import _needs_reference, _positive_int, _reference
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
        # the training gradient sums are unknown: the error names the function called
        raise _needs_reference(ens)
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


def _exact_sums(ens, X, y, counts=None):
    """Held-out sums of g, h and the row count of every node (inner nodes: over their
    leaves), unweighted, or with row i counted ``counts[i]`` times. For a Dask collection X
    (no ``counts``), added up over its partitions."""
    if is_dask(X):
        return map_add(_exact_sums_part, ens, X, y)
    G, H, C, _, _ = _staged(ens, X, y, counts)
    return _subtree(ens, G), _subtree(ens, H), _subtree(ens, C)


def _exact_sums_part(ens, X, y, sample_weight):
    return _exact_sums(ens, X, y)


def _node_moments(ens, X, y, seed):
    """The held-out per-node sums of ``_held_out_pass`` (``mom``) without draws; for a Dask
    collection X, added up over its partitions."""
    if is_dask(X):
        return map_add(_node_moments_part, (ens, seed), X, y)
    return _held_out_pass(ens, X, y, None, 1, 1, seed, draws=False, moments=True)[4]


def _node_moments_part(shared, X, y, sample_weight):
    ens, seed = shared
    return _node_moments(ens, X, y, seed)


def _check_dask(ens: TreeEnsemble, sample_weight: Any, exact: bool) -> None:
    """What ``unbiased_gain`` computes on a Dask collection X: its exact mode only."""
    if is_dask(sample_weight):
        raise InputError(
            "unbiased_gain on Dask input takes no Dask sample_weight: its exact mode ignores "
            "uniform weights, and its draws need all rows in memory."
        )
    if not exact:
        raise InputError(
            "unbiased_gain draws k rows from all the held-out rows that reach each node, which a "
            "map over partitions cannot do whatever the partitioning; on Dask input it computes "
            "only its exact mode (a constant hessian, as squared error, and uniform weights). "
            f"This model's objective ({get_objective(ens).name}) needs draws: compute it on an "
            "in-memory sample of the rows."
        )


def _exact_ratios(ens, X, y, inner, counts=None):
    """Constant hessian: the expectation over draws of sum g / sum h is the slice's
    sum g / sum h, for the node and both children alike. With ``counts`` (a bootstrap
    resample), row i counts ``counts[i]`` times in the sums and the row counts."""
    G, H, C = _exact_sums(ens, X, y, counts)
    return _ratios_of(ens, G, H, inner), np.rint(C).astype(np.int64)


def _ratios_of(ens, G, H, inner):
    """``G / H`` (0 where H is 0) of every split of ``inner``, its left and right child."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(H != 0, G / H, 0.0)
    L, R = ens.left[inner], ens.right[inner]
    return np.stack([r[inner], r[L], r[R]], axis=1)


def _held_out_pass(
    ens, X, y, w, n_draws, min_samples, seed, *, draws=True, moments=False, record=False
):
    """Staged leaves and gradients a chunk of rounds at a time: the held-out draws of every
    split (with ``draws``) and the per-node held-out sums (with ``moments``).

    Returns ``rho`` (n_nodes, 3), ``kk``, ``count``, ``rec`` as ``_drawn_ratios`` and ``mom``
    (n_nodes, 6): the sums of w g, w h, (w g)**2, (w g)(w h), (w h)**2 and the row count over
    the held-out rows reaching every node (shape (0, 6) without ``moments``)."""
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = _input.join_blocks(blocks, ens.n_features)
    yv = obj.check_labels(y, n)
    w = _weights(w, n)
    K = ens.n_outputs
    rho = np.zeros((ens.n_nodes, 3))
    kk = np.zeros(ens.n_nodes, dtype=np.int64)
    count = np.zeros(ens.n_nodes, dtype=np.int64)
    shape = (ens.n_nodes, 3, n_draws, n) if record else (0, 0, 0, 0)
    rec = np.full(shape, -1, dtype=np.int64)
    mom = np.zeros((ens.n_nodes if moments else 0, 6))
    if n == 0:
        return rho, kk, count, rec, mom
    ptr = _iter_ptr(ens)
    n_rounds = ptr.shape[0] - 1
    per_round = n * (16 * K + 4 * int(np.max(np.diff(ptr))))
    step = int(max(1, min(n_rounds, _CHUNK_BYTES // per_round)))
    F = np.tile(ens.base_margin, (n, 1))
    single = K == 1 and n_rounds == ens.n_trees
    nodes, layout, st = ens._nodes(), ens._layout, stages(ens, obj)
    starts = range(0, n_rounds, step)
    # one buffer for every chunk of rounds: fresh pages for each would cost a fault per 4 KiB
    gw_all = np.empty((step, K, n))
    hw_all = np.empty_like(gw_all)
    lv_all = np.empty(
        (max(int(ptr[min(n_rounds, i + step)] - ptr[i]) for i in starts), n), dtype=np.int32
    )
    for it0 in starts:
        it1 = min(n_rounds, it0 + step)
        t0, t1 = int(ptr[it0]), int(ptr[it1])
        gw = gw_all[: it1 - it0]
        hw = hw_all[: it1 - it0]
        leaves = lv_all[: t1 - t0]
        kernel = KU.staged_leaves_single if single else KU.staged_leaves
        kernel(Xd, yv, w, nodes, layout, st, it0, it1, F, gw, hw, leaves)
        tree_round = (np.searchsorted(ptr, np.arange(t0, t1), side="right") - 1 - it0).astype(
            np.int64
        )
        if moments:
            KU.leaf_moments(ens.tree_group, tree_round, t0, t1, leaves, gw, hw, mom)
        if draws:
            KU.split_draws(
                ens.left, ens.right, ens.tree_offsets, ens.tree_group, tree_round, t0, t1,
                leaves, gw, hw, seed, n_draws, min_samples, rho, kk, count, rec,
            )  # fmt: skip
    if moments:
        for c in range(mom.shape[1]):
            mom[:, c] = _subtree(ens, mom[:, c].copy())
        if not draws:
            count = np.rint(mom[:, 5]).astype(np.int64)
    return rho, kk, count, rec, mom


def _drawn_ratios(ens, X, y, w, n_draws, min_samples, seed, record=False):
    """Held-out ratios from draws: staged leaves and gradients a chunk of rounds at a time.

    With ``record`` (the reference mode of the tests), also the drawn rows: an array of shape
    (n_nodes, 3, n_draws, n_rows) whose ``[t, u, d, :k]`` are the rows of draw d from the node
    (u = 0), left child (1) or right child (2) of split t."""
    return _held_out_pass(ens, X, y, w, n_draws, min_samples, seed, record=record)[:4]


@dataclass
class _Gain:
    """One computation of the unbiased gain and what its standard error needs.

    ``inner`` are the split nodes, ``G``/``H`` the training sums of every node, ``ub`` and
    ``k`` per split, ``count`` the held-out rows of every node. ``exact``: the constant-hessian
    mode (no draws; the held-out rows unweighted, ``w`` None). ``hg``/``hh``: held-out sums of
    w g and w h of every node (``None`` unless asked for); ``mom``: all of ``leaf_moments``'
    per-node sums (``None`` unless asked for)."""

    inner: np.ndarray
    G: np.ndarray
    H: np.ndarray
    ub: np.ndarray
    k: np.ndarray
    count: np.ndarray
    exact: bool
    w: Any
    n_rows: int
    n_draws: int
    min_samples: int
    hg: np.ndarray | None = None
    hh: np.ndarray | None = None
    mom: np.ndarray | None = None


def _compute(
    ens, X, y, n_draws, min_samples, sample_weight, reference, random_state, need="score"
) -> _Gain:
    """The unbiased gain of every split, shared by ``unbiased_gain`` and
    ``_unbiased_estimate``. ``need``: ``"score"``, ``"sums"`` (also the held-out node sums
    ``hg``, ``hh``) or ``"moments"`` (also ``mom``)."""
    n_draws = _positive_int("n_draws", n_draws)
    min_samples = _positive_int("min_samples", min_samples)
    seed = _api.seed64(random_state)
    G, H = _training_sums(ens, reference)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    hg = hh = mom = None
    dask = is_dask(X)
    exact = _exact_mode(ens, sample_weight)
    if dask:
        _check_dask(ens, sample_weight, exact)
    if exact:
        if sample_weight is not None and not dask:  # uniform weights cancel; check the count
            _weights(sample_weight, np.shape(y)[0])
        hg, hh, C = _exact_sums(ens, X, y)
        r, count = _ratios_of(ens, hg, hh, inner), np.rint(C).astype(np.int64)
        k = np.minimum(count[L], count[R])
        if need == "moments":
            mom = _node_moments(ens, X, y, seed)
        w = None
    else:
        rho, kk, count, _, mom = _held_out_pass(
            ens, X, y, sample_weight, n_draws, min_samples, seed, moments=need != "score"
        )
        r, k = rho[inner], kk[inner]
        if need != "score":
            hg, hh = mom[:, 0], mom[:, 1]
        else:
            mom = None
        w = sample_weight
    ub = G[L] * r[:, 1] + G[R] * r[:, 2] - G[inner] * r[:, 0]
    ub = np.where(k >= min_samples, ub, 0.0)
    # the held-out rows (every row reaches the first tree's root)
    n = int(count[ens.tree_offsets[0]]) if dask else int(np.shape(y)[0])
    return _Gain(inner, G, H, ub, k, count, exact, w, n, n_draws, min_samples, hg, hh, mom)


def _per_feature(ens, gain: _Gain, values: np.ndarray) -> np.ndarray:
    """Per-split values added up per kernel column and output (n_features, n_outputs)."""
    out = np.zeros((ens.n_features, ens.n_outputs))
    group = ens.tree_group[ens._node_tree[gain.inner]]
    np.add.at(out, (ens.feature[gain.inner], group), values)
    return out


def _influence(ens, gain: _Gain) -> tuple[np.ndarray, np.ndarray]:
    """Per-edge coefficients of the delta-method influences: ``dg[n]``, ``dh[n]`` for every
    node n with parent t, such that a held-out row reaching n adds
    ``w g dg[n] + w h dh[n]`` to the linearised unbiased gain of split t.

    With a_u = j_u G_u / H_u and r_u = sum_u w g / H_u (H_u = sum_u w h over the N_u
    held-out rows of u; a_u = r_u = 0 where H_u = 0; j_u = N_u / (N_u - 1), the jackknife's
    small-sample factor, and r_u = 0 where N_u = 1), ``dg[n] = a_n - a_t`` and
    ``dh[n] = -(a_n r_n - a_t r_t)``: the row's influence
    ``j_n G_n (w g - r_n w h) / H_n - j_t G_t (w g - r_t w h) / H_t``. Zero below splits
    whose k is under ``min_samples`` (they score 0)."""
    hh, hg = gain.hh, gain.hg
    assert hh is not None and hg is not None  # set by every pass that computes dg, dh
    nz = hh != 0
    # the jackknife's small-sample factor N/(N-1) on a node of N >= 2 held-out rows (removing
    # a row moves its ratio by (w g - r w h) / (H - w h), not / H); a node of one row has no
    # spread to centre on: its row's term stays uncentred (w g / H)
    N = gain.count.astype(np.float64)
    jack = np.where(N >= 2, N / np.maximum(N - 1.0, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(nz, jack * gain.G / hh, 0.0)
        r = np.where(nz & (N >= 2), hg / hh, 0.0)
    b = a * r
    parent = KA.parents(ens.left, ens.right)
    live = np.zeros(ens.n_nodes, dtype=bool)
    live[gain.inner] = gain.k >= gain.min_samples
    child = np.flatnonzero(parent >= 0)
    t = parent[child]
    dg = np.zeros(ens.n_nodes)
    dh = np.zeros(ens.n_nodes)
    dg[child] = np.where(live[t], a[child] - a[t], 0.0)
    dh[child] = np.where(live[t], -(b[child] - b[t]), 0.0)
    return dg, dh


def _split_sampling_var(ens, gain: _Gain, dg: np.ndarray, dh: np.ndarray) -> np.ndarray:
    """Sampling variance of every split's unbiased gain alone: ``n/(n-1)`` times the sum over
    the held-out rows of the squared (centred) influences, from the per-node sums ``mom``."""
    mom = gain.mom
    assert mom is not None  # set by every pass that computes dg, dh
    n = gain.n_rows
    s1 = np.zeros(gain.inner.size)
    s2 = np.zeros(gain.inner.size)
    for c in (ens.left[gain.inner], ens.right[gain.inner]):
        a, b = dg[c], dh[c]
        s1 += a * mom[c, 0] + b * mom[c, 1]
        s2 += a * a * mom[c, 2] + 2.0 * a * b * mom[c, 3] + b * b * mom[c, 4]
    if n < 2:
        return np.full(gain.inner.size, np.nan)
    return n / (n - 1.0) * np.maximum(s2 - s1**2 / n, 0.0)


def _split_draw_var(ens, gain: _Gain) -> np.ndarray:
    """Variance over the draws of every split's unbiased gain given the held-out rows (0 in
    the exact mode).

    rho_u, the mean of ``n_draws`` ratios over k of the N_u rows of u drawn without
    replacement, has variance ~ (1/n_draws)(1/k)(N_u - k)/(N_u - 1) S_u^2 / hbar_u^2, with
    S_u^2 the population variance of z = w g - r_u w h over u and hbar_u the mean of w h;
    the draws of t, L and R are independent, so the split's is
    G_L^2 V_L + G_R^2 V_R + G_t^2 V_t."""
    out = np.zeros(gain.inner.size)
    if gain.exact:
        return out
    mom, k = gain.mom, gain.k.astype(np.float64)
    assert mom is not None  # set by every pass that computes draws
    live = (gain.k >= gain.min_samples) & (gain.k > 0)
    for u in (gain.inner, ens.left[gain.inner], ens.right[gain.inner]):
        N = mom[u, 5]
        hs = mom[u, 1]
        ok = live & (N > 1) & (hs != 0) & (N > k)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(ok, mom[u, 0] / hs, 0.0)
            ss = mom[u, 2] - 2.0 * r * mom[u, 3] + r * r * mom[u, 4]  # sum of z^2 (mean 0)
            v = ss / N / (hs / N) ** 2 * (N - k) / (N - 1.0) / k / gain.n_draws
            out += np.where(ok, gain.G[u] ** 2 * np.maximum(v, 0.0), 0.0)
    return out


def _unbiased_estimate(
    ens: Any,
    X: Any,
    y: Any,
    *,
    n_draws: int = 1,
    min_samples: int = 1,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
) -> Estimate:
    """Per-feature unbiased gain with its sampling variance (and, with draws, the draw
    variance).

    ``score`` (n_output_features, n_outputs) is what ``unbiased_gain`` returns for the same
    arguments. The sampling variance is that of the delta-method linearisation: every split's
    ratios r_u = sum_u w g / sum_u w h are linearised around the held-out rows' own values, so
    a row reaching child c of split t has influence
    ``j_c G_c (w g - r_c w h) / H_c - j_t G_t (w g - r_t w h) / H_t`` with the jackknife's
    small-sample factor j_u = N_u / (N_u - 1) (``_influence``, which also says how a node of
    one row is treated); a row's
    influences are summed over all splits of its paths per feature and output
    (``_staged.edge_moments``), and the variance is ``n/(n-1)`` times their sum of squares
    about the mean. With draws (not a constant hessian with uniform weights), the draws'
    own variance (``_split_draw_var``), independent across splits, is added.

    The estimate carries Welch-Satterthwaite degrees of freedom per feature and output
    (``_welch_df``): the p-values and intervals of ``significance`` use Student's t with them
    (the normal reference is anti-conservative in the far tail where a feature's variance
    rests on splits with few held-out rows in a child; ``docs/unbiased_gain.md``).

    The held-out node sums and moments (one pass over the rows with draws, two in the exact
    mode) fix the influences' coefficients and every split's own variance before a last pass
    adds up the influences' squares.

    Parameters
    ----------
    ens : TreeEnsemble or a supported booster
    X, y, n_draws, min_samples, sample_weight, reference, random_state
        As for ``unbiased_gain``.

    Returns
    -------
    treeinner._stats.Estimate
        ``score`` and ``var`` (n_output_features, n_outputs), ``var_total``
        (n_output_features,) for the total over outputs, ``weight`` the row count, ``df``
        and ``df_total`` the degrees of freedom of their t references.
    """
    ens = from_model(ens)
    # the per-node moments also in the exact mode: the splits' own variances give the df
    gain = _compute(
        ens, X, y, n_draws, min_samples, sample_weight, reference, random_state, "moments"
    )
    score = ens._to_output(_per_feature(ens, gain, gain.ub))
    dg, dh = _influence(ens, gain)
    est = _staged_pass.edge_moments(ens, X, y, gain.w, dg, dh).estimate(False)
    var, var_total = est.var, est.var_total
    draw = _split_draw_var(ens, gain)
    if not gain.exact:
        dv = _credit_squared(ens, _per_feature(ens, gain, draw))
        var = var + dv
        var_total = var_total + dv.sum(axis=1)
    df, df_total = _welch_df(ens, gain, _split_sampling_var(ens, gain, dg, dh) + draw)
    return Estimate(score, var, var_total, est.weight, df, df_total)


def _credit_squared(ens: TreeEnsemble, per_feature: np.ndarray) -> np.ndarray:
    """Per-kernel-column variances of independent parts credited to the output features
    (``input_map.credit`` squared; the identity without an input map)."""
    if ens.input_map is None:
        return per_feature
    return np.moveaxis(np.moveaxis(per_feature, 0, -1) @ ens.input_map.credit**2, -1, 0)


def _split_df(gain: _Gain) -> np.ndarray:
    """Degrees of freedom of every split's own t reference: ``max(k - 1, 1)``, k the held-out
    rows of its smaller child."""
    return np.maximum(gain.k - 1, 1).astype(np.float64)


def _welch_df(
    ens: TreeEnsemble, gain: _Gain, split_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Welch-Satterthwaite degrees of freedom of every feature's (and output's) unbiased
    gain from its splits' variances ``V_s`` and degrees of freedom ``max(k_s - 1, 1)``:
    ``(sum_s V_s)^2 / sum_s (V_s^2 / max(k_s - 1, 1))`` over the feature's splits (in one
    output, and over all outputs for the total); ``inf`` (the normal) for a feature without
    a split of positive variance.

    The variance of a sum over splits is dominated by the splits whose smaller child holds
    few held-out rows, and a ratio over k rows is far from normal: a t reference with these
    degrees of freedom keeps the p-values' level in the tail (``docs/unbiased_gain.md``)."""
    V = np.where(np.isfinite(split_var), split_var, 0.0)
    num = _credit_squared(ens, _per_feature(ens, gain, V))
    den = _per_feature(ens, gain, V**2 / _split_df(gain))
    if ens.input_map is not None:  # a split credited c to an output feature adds c^2 V to it
        den = np.moveaxis(np.moveaxis(den, 0, -1) @ ens.input_map.credit**4, -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, num**2 / den, np.inf)
        tot_den = den.sum(axis=1)
        df_total = np.where(tot_den > 0, num.sum(axis=1) ** 2 / tot_den, np.inf)
    return df, df_total


def _exact_mode(ens: TreeEnsemble, sample_weight: Any) -> bool:
    """Whether ``unbiased_gain`` takes the exact expectation over draws (constant hessian,
    uniform weights) for these weights."""
    if not get_objective(ens).constant_hessian:
        return False
    if sample_weight is None:
        return True
    try:
        wv = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):  # not numbers: _weights says so
        return False
    return bool(wv.ndim == 1 and wv.size > 0 and np.all(wv == wv[0]) and wv[0] > 0)


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
        G_t^2/(H_t+lambda) from the training sums), ``unbiased_gain``, ``se``, ``p_value``,
        ``k``, ``n_node``, ``n_left`` and ``n_right`` (held-out rows reaching the node and its
        children).

        ``se`` is the split's standard error over fresh held-out sets of the same size: the
        sampling error of its delta-method linearisation (each ratio r_u = sum w g / sum w h
        linearised, so a row reaching child c of t has influence
        G_c (w g - r_c w h) / H_c - G_t (w g - r_t w h) / H_t, H_u the held-out sum of w h),
        plus, where draws are made, the variance of the draws themselves. ``p_value`` is the
        one-sided p-value of "the split is no better than useless on new data"
        (unbiased gain <= 0): Student t's upper tail at ``unbiased_gain / se`` with
        ``max(k - 1, 1)`` degrees of freedom (the split's ratios rest on its smaller child's
        k held-out rows). Splits scored 0 for k below ``min_samples`` have ``se`` 0 and
        ``p_value`` 1.
    """
    need = "moments" if _api.check_flag("per_split", per_split) else "score"
    _api.check_rows(X)
    ens = from_model(model)
    gain = _compute(ens, X, y, n_draws, min_samples, sample_weight, reference, random_state, need)
    if per_split:
        return _split_frame(ens, gain)
    return _per_output(ens, _per_feature(ens, gain, gain.ub), "unbiased_gain")


def _split_frame(ens, gain: _Gain) -> pd.DataFrame:
    inner, G, H, count = gain.inner, gain.G, gain.H, gain.count
    L, R = ens.left[inner], ens.right[inner]
    lam = ens.reg_lambda

    def score(u):
        den = H[u] + lam
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, G[u] ** 2 / den, 0.0)

    dg, dh = _influence(ens, gain)
    se = np.sqrt(_split_sampling_var(ens, gain, dg, dh) + _split_draw_var(ens, gain))
    cols = split_columns(ens, inner)
    cols["gain"] = score(L) + score(R) - score(inner)
    cols["unbiased_gain"] = gain.ub
    cols["se"] = se
    cols["p_value"] = p_values(gain.ub, se, _split_df(gain))
    cols["k"] = gain.k
    cols["n_node"] = count[inner]
    cols["n_left"] = count[L]
    cols["n_right"] = count[R]
    return pd.DataFrame(cols)
