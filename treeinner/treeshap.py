"""Path-dependent TreeSHAP over the common tree format."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._dask import is_dask, map_rows
from ._errors import InputError, UnsupportedModelError
from ._format import MISSING_NAN, NUMERIC
from ._staged import _inputs, stages
from ._stats import Moments
from .adapters import from_model
from .attribution import Attribution, _tree_range
from .ensemble import TreeEnsemble
from .kernels import attribution as KA
from .kernels import oblivious as KO
from .kernels import treeshap as K

__all__ = ["tree_shap"]

_WEIGHTS = ("auto", "cover", "count")


def _split_weights(ens: TreeEnsemble, weights: str, lo: int, hi: int) -> np.ndarray:
    """The node weights TreeSHAP splits by, checked for trees ``lo:hi``."""
    if weights not in _WEIGHTS:
        raise InputError(f"weights must be one of {_WEIGHTS}, got {weights!r}.")
    if weights == "auto":
        weights = ens.node_weight  # the booster's own convention, decided by its adapter
    w = ens.cover if weights == "cover" else ens.count
    mine = w[ens.tree_offsets[lo] : ens.tree_offsets[hi]]
    if not np.all(np.isfinite(mine)) or np.any(mine < 0):
        what = "covers (hessian sums)" if weights == "cover" else "training row counts"
        raise InputError(
            f"The {ens.source} model stores no {what} for its nodes (objective "
            f"{ens.objective!r}), and path-dependent TreeSHAP with weights={weights!r} weights "
            "every split by them."
        )
    return w


def _reversed_level_order(ens: TreeEnsemble) -> TreeEnsemble:
    """The ensemble with every oblivious tree's levels reversed (last split at the root).

    An oblivious tree (complete, in heap order, one feature per level) computes the same
    function in any level order, but path-dependent TreeSHAP depends on the order; boosters
    whose adapters set ``reverse_levels`` (CatBoost's ``ShapValues``) walk the levels from the
    last split to the first. Other trees are kept as they are. Covers and counts of the inner
    nodes are re-summed from the leaves.
    """
    perm = np.arange(ens.n_nodes)
    inner_sum = []
    for t in range(ens.n_trees):
        o = int(ens.tree_offsets[t])
        d = int(ens._tree_depth[t])
        n = (1 << (d + 1)) - 1
        if d < 2 or ens.tree_offsets[t + 1] - o != n:
            continue
        heap = np.arange(n // 2)
        if np.any(ens.left[o + heap] != o + 2 * heap + 1):
            continue
        level = np.floor(np.log2(np.arange(n) + 1)).astype(np.int64)
        first = (1 << np.arange(d + 1)) - 1  # heap position of every level's first node
        for j in range(d):
            if not _one_decision(ens, o + first[j], o + first[j + 1]):
                break
        else:
            pos = np.arange(1 << d)
            rev = np.zeros_like(pos)
            for j in range(d):
                rev |= ((pos >> j) & 1) << (d - 1 - j)
            src = np.empty(n, dtype=np.int64)
            inner = np.arange(n // 2)
            src[inner] = first[d - 1 - level[inner]]  # the first node of the mirrored level
            src[n // 2 :] = n // 2 + rev
            perm[o : o + n] = o + src
            inner_sum.append((o, n))
    if not inner_sum:
        return ens
    node = {
        k: getattr(ens, k)[perm]
        for k in ("feature", "threshold", "split_type", "default_left", "missing_type",
                  "value", "cover", "count", "gain", "leaf_id")
    }  # fmt: skip
    if ens.booster_value is not None:
        node["booster_value"] = ens.booster_value[perm]
    for k in ("cover", "count"):
        a = node[k]
        for o, n in inner_sum:
            for i in range(n // 2 - 1, -1, -1):
                a[o + i] = a[o + 2 * i + 1] + a[o + 2 * i + 2]
    return dataclasses.replace(ens, **node)


def _one_decision(ens: TreeEnsemble, lo: int, hi: int) -> bool:
    """Whether nodes ``lo:hi`` (one level of a tree) all take the same decision: feature,
    threshold, split type, missing type and direction, and category set."""
    for a in (ens.feature, ens.threshold, ens.split_type, ens.missing_type, ens.default_left):
        if np.any(a[lo:hi] != a[lo]):
            return False
    if ens.split_type[lo] == NUMERIC:
        return True
    words = [ens.cat_words[ens.cat_offsets[n] : ens.cat_offsets[n + 1]] for n in range(lo, hi)]
    return all(np.array_equal(w, words[0]) for w in words)


def players_of(credit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Shapley player of every kernel column of an input map's ``credit``, and how the
    players are credited to features (``_players``)."""
    n_out = credit.shape[1]
    single = (np.count_nonzero(credit, axis=1) == 1) & np.isclose(credit.sum(axis=1), 1.0)
    player = np.empty(credit.shape[0], dtype=np.int64)
    player[single] = np.argmax(credit[single], axis=1)
    shared, code = np.unique(credit[~single], axis=0, return_inverse=True)
    player[~single] = n_out + code.ravel()
    return player, np.vstack([np.eye(n_out), shared])


def _players(ens: TreeEnsemble) -> tuple[np.ndarray, np.ndarray | None]:
    """The Shapley player of every kernel column, and how players are credited to features.

    Without an ``input_map`` every column is a feature of its own. With one, a column credited
    wholly to one feature (a CatBoost one-hot or CTR split on it) is that feature, so all splits
    on one categorical feature are one player; the columns credited to one set of several
    features (CTR splits on one combination) are one player, whose values are shared out as
    the credit says (CatBoost's ShapValues do the same). An input map with players of its own
    (``players()``, the copies of ``_shapley_credit``) gives them.
    """
    if ens.input_map is None:
        return np.arange(ens.n_features, dtype=np.int64), None
    own = getattr(ens.input_map, "players", None)
    if own is not None:
        return own()
    return players_of(np.asarray(ens.input_map.credit))


# The quadrature tables of one tree hold (nodes x points) float64 values, three times, and every
# thread works in three arrays of that size: beyond this many entries per tree (256 MiB per
# array) a tree is refused before anything is allocated. A chain tree (every right child a
# leaf) with a new feature at every split passes up to depth 5,792; trees whose paths repeat
# features need fewer points (one per two distinct features on a path) and go deeper.
MAX_TABLE_ENTRIES = 1 << 25
_LEGGAUSS_MAX = 100  # numpy's leggauss (eigenvalues, O(q^3)) up to here; Newton's method above


@functools.lru_cache(maxsize=256)
def _rule(q: int) -> tuple[np.ndarray, np.ndarray]:
    """The q-point Gauss-Legendre rule on [0, 1]: points and weights, computed once per q."""
    x, w = np.polynomial.legendre.leggauss(q) if q <= _LEGGAUSS_MAX else _legendre_newton(q)
    t, wt = (x + 1.0) / 2.0, w / 2.0
    t.flags.writeable = wt.flags.writeable = False
    return t, wt


def _legendre_newton(q: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] by Newton's method on the three-term
    recurrence from Tricomi's initial guesses, O(q^2); the weights, proportional to
    1 / (P_{q-1} P_q'), symmetrised and normalised as numpy's ``leggauss`` does."""
    x = np.cos(np.pi * (np.arange(q, 0, -1) - 0.25) / (q + 0.5))  # ascending
    for _ in range(20):  # quadratic convergence: 4 to 5 steps for every q tried up to 3000
        p, _, dp = _legendre(q, x)
        dx = p / dp
        x = x - dx
        if np.abs(dx).max() <= 1e-16:
            break
    _, pm, dp = _legendre(q, x)
    w = 1.0 / (pm * dp)
    x = (x - x[::-1]) / 2.0
    w = (w + w[::-1]) / 2.0
    return x, w * (2.0 / w.sum())


def _legendre(q: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Legendre polynomials of degrees q and q - 1 and the derivative of the first at
    ``x``, by the recurrences (P_k' = P_{k-2}' + (2k - 1) P_{k-1})."""
    p0, p1 = np.ones_like(x), x.copy()
    d0, d1 = np.zeros_like(x), np.ones_like(x)
    for k in range(2, q + 1):
        d0, d1 = d1, d0 + (2 * k - 1) * p1
        p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
    return p1, p0, d1


def _quadrature(ens: TreeEnsemble, lay: tuple) -> tuple[np.ndarray, ...]:
    """Per tree the number of Gauss-Legendre points (exact for the most distinct players on
    one of its paths), checked against ``MAX_TABLE_ENTRIES``, and the rules of the distinct
    counts, ragged: ``(tree_nq, rule_t, rule_w, roff)``, tree t's rule at ``roff[t]``."""
    players = K.path_players(lay[1], lay[4], ens.tree_offsets)
    tree_nq = np.maximum(1, (players + 1) // 2)
    _check_tables(ens, tree_nq, players)
    counts, which = np.unique(tree_nq, return_inverse=True)
    rules = [_rule(int(q)) for q in counts]
    start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    rule_t = np.concatenate([r[0] for r in rules]) if rules else np.zeros(0)
    rule_w = np.concatenate([r[1] for r in rules]) if rules else np.zeros(0)
    return tree_nq, rule_t, rule_w, start[which.ravel()] if rules else np.zeros(0, np.int64)


def _check_tables(ens: TreeEnsemble, tree_nq: np.ndarray, players: np.ndarray) -> None:
    """Refuse, before allocating, a tree whose quadrature tables exceed
    ``MAX_TABLE_ENTRIES``."""
    entries = np.diff(ens.tree_offsets) * tree_nq
    big = np.flatnonzero(entries > MAX_TABLE_ENTRIES)
    if big.size:
        t = int(big[0])
        raise UnsupportedModelError(
            f"TreeSHAP: tree {t} (depth {int(ens._tree_depth[t])}, "
            f"{int(ens.tree_offsets[t + 1] - ens.tree_offsets[t])} nodes, "
            f"{int(players[t])} distinct features on one path) needs {int(entries[t]):,} "
            f"quadrature table entries (nodes x {int(tree_nq[t])} points); the limit is "
            f"{MAX_TABLE_ENTRIES:,} per tree (treeinner.treeshap.MAX_TABLE_ENTRIES). Explain "
            "a shallower model, or use predecomp or saabas, which have no depth limit."
        )


@dataclasses.dataclass(frozen=True)
class _ShapSetup:
    """Everything the TreeSHAP kernels take besides the rows."""

    ens: TreeEnsemble  # in the order the values are computed in (levels reversed if asked)
    weight: np.ndarray
    player: np.ndarray
    pcredit: np.ndarray | None
    lay: tuple  # kernels.treeshap.edge_layout
    tabs: tuple  # kernels.treeshap.edge_tables
    simple: np.ndarray  # per tree: numeric splits, NaN the default way
    tree_nq: np.ndarray
    max_nodes: int
    otab: tuple  # oblivious trees' leaf tables: (has_tab, ptr, col, val), see _leaf_tables

    @property
    def n_players(self) -> int:
        return self.player.shape[0] if self.pcredit is None else self.pcredit.shape[0]

    def credit(self, per_player: np.ndarray, axis: int) -> np.ndarray:
        """Player values (on ``axis``) -> the model's output features."""
        if self.pcredit is None:
            return per_player
        moved = np.moveaxis(per_player, axis, -1) @ self.pcredit
        return np.moveaxis(moved, -1, axis)


def _setup(
    ens: TreeEnsemble, weights: str, lo: int, hi: int, n_rows: int | None = None
) -> _ShapSetup:
    """The TreeSHAP setup of trees ``lo:hi`` split by ``weights``; ``n_rows``: the number of
    rows it will explain (oblivious trees with more leaves than rows are not tabulated, their
    tables would cost more than the rows; None: no limit)."""
    if ens._linear is not None:
        raise UnsupportedModelError(
            "TreeSHAP of models with linear leaves (LightGBM linear_tree) is not supported."
        )
    if not getattr(ens.input_map, "routes_off_path", True):
        raise UnsupportedModelError(
            "TreeSHAP of CatBoost Depthwise/Lossguide trees with categorical splits is not "
            "supported: TreeSHAP reads splits off a row's path, and CatBoost only tells which "
            "way a row goes at the splits it passes. Oblivious (SymmetricTree) models work."
        )
    weight = _split_weights(ens, weights, lo, hi)
    if ens.reverse_levels:
        ens = _reversed_level_order(ens)
        weight = _split_weights(ens, weights, lo, hi)
    player, pcredit = _players(ens)
    lay = K.edge_layout(ens.left, ens.right, ens.feature, weight, player, ens.tree_offsets)
    plain = (ens.left < 0) | ((ens.split_type == NUMERIC) & (ens.missing_type == MISSING_NAN))
    simple = np.logical_and.reduceat(plain, ens.tree_offsets[:-1]) if ens.n_trees else plain
    tree_nq, rule_t, rule_w, roff = _quadrature(ens, lay)
    tabs = K.edge_tables(lay[3], ens.tree_offsets, tree_nq, rule_t, rule_w, roff)
    max_nodes = int(np.diff(ens.tree_offsets).max()) if ens.n_trees else 1
    n_players = player.shape[0] if pcredit is None else pcredit.shape[0]
    max_depth = _table_depth_cap(n_rows)
    otab = _leaf_tables(ens, lay, tabs, tree_nq, n_players, max_depth)
    return _ShapSetup(ens, weight, player, pcredit, lay, tabs, simple, tree_nq, max_nodes, otab)


def _table_depth_cap(n_rows: int | None) -> int:
    """The largest depth of an oblivious tree worth tabulating for ``n_rows`` rows: a tree of
    depth d costs 2^d TreeSHAP evaluations to tabulate, once per call."""
    if n_rows is None:
        return 64
    return int(np.floor(np.log2(max(int(n_rows), 1))))


def _leaf_tables(
    ens: TreeEnsemble, lay: tuple, tabs: tuple, tree_nq: np.ndarray, n_players: int, max_depth: int
):
    """The TreeSHAP values of every leaf of the oblivious trees of depth at most
    ``max_depth`` (``kernels.oblivious``), as ``(has_tab, ptr, col, val)``: ``has_tab[t]``
    marks the trees read from the tables, leaf n's (player, value) entries are
    ``ptr[n]:ptr[n + 1]``. No tables while the fast path is off
    (``kernels.oblivious.general_path``)."""
    has_tab = np.zeros(ens.n_trees, dtype=np.uint8)
    ptr = np.zeros(ens.n_nodes + 1, dtype=np.int64)
    if not KO.FAST_PATH or ens.n_trees == 0:
        return has_tab, ptr, np.zeros(0, dtype=np.int64), np.zeros(0)
    layout = ens._layout
    if not np.any(layout.tree_flags & KO.TREE_OBLIVIOUS):
        return has_tab, ptr, np.zeros(0, dtype=np.int64), np.zeros(0)
    flags, depth = layout.tree_flags, layout.top_depth
    size = KO.shap_list_size(ens.tree_offsets, flags, depth, max_depth)
    col = np.zeros(size, dtype=np.int64)
    val = np.zeros(size)
    nodes = ens._nodes()
    end = KO.shap_leaf_tables(
        nodes, layout, lay, tabs, tree_nq, n_players, max_depth, ptr, col, val
    )
    has_tab[:] = ((flags & KO.TREE_OBLIVIOUS) != 0) & (depth <= max_depth)
    return has_tab, ptr, col[:end], val[:end]


def _expected_value(ens: TreeEnsemble, weight: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Base margin plus the weight-averaged leaf value of trees ``lo:hi``, per output."""
    mean = np.empty(ens.n_nodes, dtype=np.float64)
    KA.node_values(ens.left, ens.right, ens.tree_offsets, ens.value, weight, 0.0, mean)
    bias = ens.base_margin.copy()
    np.add.at(bias, ens.tree_group[lo:hi], mean[ens.tree_offsets[lo:hi]])
    return bias


@public
def tree_shap(
    model: Any,
    X: Any,
    *,
    iteration_range: tuple[int, int] | None = None,
    node_weight: str = "auto",
) -> Attribution:
    """Path-dependent TreeSHAP: exact Shapley values of every row's margin, per feature.

    The value of a set S of features is the model's expected margin when the features in S
    take the row's values and every other split is averaged over its children, weighted by the
    training data that reached them (Lundberg et al. 2018; XGBoost's ``pred_contribs``,
    LightGBM's ``pred_contrib``, CatBoost's ``ShapValues`` and shap's
    ``feature_perturbation="tree_path_dependent"``). Rows follow each split exactly as in
    prediction (the booster's threshold rule, missing values and categorical sets).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        The model; it must store the node weights (hessian covers or row counts).
    X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        Rows to explain, as for ``TreeEnsemble.predict_margin``.
    iteration_range : tuple of (int, int), optional
        Explain only the trees of boosting rounds ``start .. stop - 1`` (every class's trees
        and parallel trees of a round), as ``TreeEnsemble.predict_margin(X,
        iteration_range=...)``; ``stop=0`` means all rounds. Default: every tree.
    node_weight : {"auto", "cover", "count"}, default "auto"
        What the training data that reached a node is measured by: hessian sums
        (``"cover"``, XGBoost's convention) or row counts (``"count"``; LightGBM's, and
        CatBoost's sample-weight sums). ``"auto"`` follows the model's booster, so the values
        equal the booster's own.

    Returns
    -------
    Attribution
        ``values`` of shape (n_samples, n_features), or (n_samples, n_features, n_outputs)
        for multi-output models; ``bias`` (n_outputs,) is the base margin plus every tree's
        weighted mean leaf value (the expected value), so ``values.sum(axis=1) + bias`` is the
        margin of the trees used.

    Raises
    ------
    ValueError
        For an unknown ``node_weight``, or if the model stores no such weights.
    NotImplementedError
        For models with linear leaves (``UnsupportedModelError``), and for a tree whose
        quadrature tables, its nodes times ceil(P / 2) points (P the most distinct features
        on one of its paths, at most its depth), would exceed ``MAX_TABLE_ENTRIES`` (2^25):
        e.g. a chain of depth 6,000 with a new feature at every split. Set-up time and
        memory scale with the sum over trees of those sizes; the check runs before anything
        is allocated.
    """
    _api.check_choice("node_weight", node_weight, _api.NODE_WEIGHTS)
    ens = from_model(model)
    lo, hi = _tree_range(ens, iteration_range)
    if is_dask(X):  # lazy values, one chunk per partition
        su = _setup(ens, node_weight, lo, hi, 0)
        n_out = len(ens.output_names)
        tail = (n_out,) if ens.n_outputs == 1 else (n_out, ens.n_outputs)
        values = map_rows(_shap_rows, (ens, iteration_range, node_weight), X, tail)
        bias = _expected_value(su.ens, su.weight, lo, hi)
        return Attribution(values=values, bias=bias, feature_names=ens.output_names)
    n, blocks = ens._blocks(X)
    su = _setup(ens, node_weight, lo, hi, n)
    out = np.zeros((n, su.n_players, ens.n_outputs), dtype=np.float64)
    nodes = su.ens._nodes()
    simple = _simple(su.simple[lo:hi], su.simple)
    for start, block in blocks:
        K.tree_shap(
            block, nodes, su.ens._layout, su.lay, su.tabs, simple, su.tree_nq, lo, hi,
            su.max_nodes, ens._float32_input, _tables(su.otab, lo, hi),
            out[start : start + block.shape[0]],
        )  # fmt: skip
    out = su.credit(out, axis=1)
    values = out[:, :, 0] if ens.n_outputs == 1 else out
    index = X.index if isinstance(X, pd.DataFrame) else None
    bias = _expected_value(su.ens, su.weight, lo, hi)
    return Attribution(values=values, bias=bias, feature_names=ens.output_names, index=index)


def _shap_rows(shared: tuple, X: Any) -> np.ndarray:
    """``tree_shap``'s values on one partition of a Dask collection."""
    ens, iteration_range, node_weight = shared
    return tree_shap(ens, X, iteration_range=iteration_range, node_weight=node_weight).values


def _simple(used: np.ndarray, simple: np.ndarray) -> np.ndarray | None:
    """The kernels' ``simple`` argument: None when every tree used is simple (numeric splits,
    NaN the default way), so the general split rule is not compiled in; else the flags."""
    return None if bool(np.all(used)) else simple


def _tables(otab: tuple, lo: int, hi: int) -> tuple | None:
    """The kernels' ``otab`` argument: None when none of trees ``lo:hi`` is read from a leaf
    table, so the table path is not compiled in; else the tables."""
    return otab if bool(np.any(otab[0][lo:hi])) else None


def _inner_pass(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any
) -> tuple[Any, int, Any, np.ndarray, np.ndarray, int, tuple[Any, ...]]:
    """Set up a streamed TreeSHAP TreeInner/ForestInner pass: the TreeSHAP setup, row count,
    row blocks, labels, weights, number of row chunks, and the kernel arguments that follow
    the rows, labels and weights."""
    obj, n, blocks, yv, w = _inputs(ens, X, y, sample_weight)
    su = _setup(ens, "auto", 0, ens.n_trees, n)
    n_chunks = K.inner_chunks(n, ens.n_trees)
    args: tuple[Any, ...] = (su.ens._nodes(), su.ens._layout, stages(su.ens, obj), su.lay, su.tabs,
            _simple(su.simple, su.simple),
            su.tree_nq, su.max_nodes, su.ens.learning_rate,
            _tables(su.otab, 0, ens.n_trees))  # fmt: skip
    return su, n, blocks, yv, w, n_chunks, args


def _shap_inner(ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, forest: bool) -> np.ndarray:
    """TreeInner (or with ``forest`` the unscaled ForestInner sums) with TreeSHAP
    attributions, per output feature and output: (n_output_features, n_outputs)."""
    su, n, blocks, yv, w, n_chunks, args = _inner_pass(ens, X, y, sample_weight)
    acc = np.zeros((n_chunks, su.n_players, ens.n_outputs))
    rest = (*args, forest, acc)
    for start, block in blocks:
        stop = start + block.shape[0]
        K.shap_inner(block, yv[start:stop], w[start:stop], *rest)
    return su.credit(acc.sum(axis=0), axis=0)


def _shap_inner_moments(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, forest: bool
) -> Moments:
    """``_shap_inner`` with the sampling moments of its per-row terms, from the same pass.

    The term of row i, output feature j and output c is ``u[i, j, c] = w_i sum_t (-g_{i,t}) /
    lr_t phi_{t,j}(x_i)`` over the trees t of output c (g the gradient at the staged margin
    before t's round, phi_t tree t's path-dependent TreeSHAP values credited to the output
    features); with ``forest``, ``u[i, j, c] = w_i GS[i, c] sum_t phi_{t,j}(x_i)``, GS the
    summed negative gradients of output c, not divided by the learning rate.

    Parameters
    ----------
    ens : TreeEnsemble
        The model.
    X : array-like of shape (n_samples, n_features)
        Held-out rows, as for ``TreeEnsemble.predict_margin``.
    y : array-like of shape (n_samples,)
        Their labels.
    sample_weight : array-like of shape (n_samples,) or None
        Row weights w (None: 1).
    forest : bool
        ForestInner's terms instead of TreeInner's.

    Returns
    -------
    Moments
        ``s1 = sum_i u`` (equal to ``_shap_inner`` up to rounding), ``s2 = sum_i u**2``,
        ``s2_total = sum_i (sum_c u[i, :, c])**2``, ``swu = sum_i w_i u``, all over the
        output features, and ``n``, ``sw = sum_i w_i``, ``sw2 = sum_i w_i**2``.
    """
    su, n, blocks, yv, w, n_chunks, args = _inner_pass(ens, X, y, sample_weight)
    return chunked_moments(
        K.shap_inner_moments, su, n, n_chunks, ens.n_outputs, blocks, yv, w, args, forest
    )


def chunked_moments(
    kernel: Any,
    su: Any,
    n: int,
    n_chunks: int,
    n_outputs: int,
    blocks: Any,
    yv: np.ndarray,
    w: np.ndarray,
    args: tuple[Any, ...],
    forest: bool,
) -> Moments:
    """Run a streamed ``*_inner_moments`` kernel, called as ``kernel(block, y, w, *args,
    forest, pcredit, s1, s2, s2_total, swu)``, over the row ``blocks`` with one set of
    accumulators per chunk (``n_chunks``), and return the Moments of its per-row terms over
    the output features of ``su`` (its ``pcredit`` credits players to output features)."""
    n_feat = su.n_players if su.pcredit is None else su.pcredit.shape[1]
    pcredit = np.empty((0, 0)) if su.pcredit is None else np.ascontiguousarray(su.pcredit, float)
    s1 = np.zeros((n_chunks, n_feat, n_outputs))
    s2 = np.zeros_like(s1)
    swu = np.zeros_like(s1)
    s2t = np.zeros((n_chunks, n_feat))
    rest = (*args, bool(forest), pcredit, s1, s2, s2t, swu)
    for start, block in blocks:
        stop = start + block.shape[0]
        kernel(block, yv[start:stop], w[start:stop], *rest)
    return Moments(
        s1=s1.sum(axis=0),
        s2=s2.sum(axis=0),
        s2_total=s2t.sum(axis=0),
        n=n,
        sw=float(w.sum()),
        sw2=float(w @ w),
        swu=swu.sum(axis=0),
    )
