"""Global importances: TreeInner, ForestInner, total gain, magnitude baselines, permutation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import _input
from ._staged import _staged, _weights
from .adapters import from_model
from .attribution import _kind, node_values, predecomp, saabas
from .ensemble import TreeEnsemble
from .kernels import attribution as K
from .objectives import get_objective
from .treeshap import _shap_inner, tree_shap

__all__ = ["forest_inner", "importance", "total_gain", "tree_inner"]

METHODS = (
    "tree_inner",
    "tree_inner_shap",
    "forest_inner",
    "abs_predecomp",
    "abs_saabas",
    "total_gain",
    "permutation",
    "unbiased_gain",
    "abs_shap",
)


def _per_output(
    ens: TreeEnsemble, per_feature: np.ndarray, name: str, credited: bool = False
) -> pd.Series | pd.DataFrame:
    """(n_features, n_outputs) -> Series, or DataFrame with a column per class and 'total'.
    Values over the kernels' columns are credited to the output features unless
    ``credited``."""
    names = list(ens.output_names)
    if not credited:
        per_feature = ens._to_output(per_feature)
    if ens.n_outputs == 1:
        return pd.Series(per_feature[:, 0], index=names, name=name)
    df = pd.DataFrame(
        per_feature, index=names, columns=[f"class_{c}" for c in range(ens.n_outputs)]
    )
    df["total"] = per_feature.sum(axis=1)
    return df


def _tree_inner_from_sums(ens: TreeEnsemble, p: np.ndarray, leaf_neg_g: np.ndarray) -> np.ndarray:
    """sum_t (1/lr_t) sum over splits on k of [p(L) S(L) + p(R) S(R) - p(t) S(t)]."""
    S = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, leaf_neg_g, S)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    contrib = p[L] * S[L] + p[R] * S[R] - p[inner] * S[inner]
    tree = ens._node_tree[inner]
    contrib = contrib / ens.learning_rate[tree]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), contrib)
    return out


def _values(ens: TreeEnsemble, attribution: str, reference: Any) -> np.ndarray | None:
    """Node values of a path attribution; None for TreeSHAP."""
    if attribution == "shap":
        if reference is not None:
            raise ValueError("reference= recomputes PreDecomp node values; use 'predecomp'.")
        return None
    kind = _kind(attribution)
    if reference is not None:
        if kind != "regularized":
            raise ValueError("reference= recomputes PreDecomp node values; use 'predecomp'.")
        kind = "data"
    return node_values(ens, kind, reference)


def tree_inner(
    model: Any,
    X: Any,
    y: Any,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
) -> pd.Series | pd.DataFrame:
    """TreeInner: per tree, the inner product of an attribution with the negative gradient.

    TreeInner(k) = sum_m (1/lr_m) sum_i r_{m,k}(x_i) (-g_{i,m}) with g the gradient at the
    margin before tree m's boosting round (paper 003, Definition 4). On the training data with
    PreDecomp it equals the total split gain of feature k; on held-out data a feature the model
    only overfit gets a negative score.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (normally held-out data).
    y : array-like of shape (n_samples,)
        Labels, valid for the model's objective.
    attribution : {"predecomp", "saabas", "shap"}
        The per-tree attribution r. ``"shap"`` is path-dependent TreeSHAP (as
        ``tree_shap``), computed tree by tree and weighted on the fly: no SHAP value is
        stored.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values recomputed from this data
        (``node_values(kind="data")``) instead of the stored covers.

    Returns
    -------
    pandas.Series indexed by feature name, or for multi-output models a DataFrame with one
    column per class and a ``total`` column.
    """
    ens = from_model(model)
    p = _values(ens, attribution, reference)
    if p is None:
        return _per_output(ens, _shap_inner(ens, X, y, sample_weight, False), "tree_inner", True)
    G, _, _, _, _ = _staged(ens, X, y, sample_weight, need_hc=False)
    return _per_output(ens, _tree_inner_from_sums(ens, p, -G), "tree_inner")


def forest_inner(
    model: Any,
    X: Any,
    y: Any,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
) -> pd.Series | pd.DataFrame:
    """ForestInner: the forest-level inner product of attributions and negative gradients.

    ``ForestInner(k) = (1/lr) sum_i [sum_m r_{m,k}(x_i)] [sum_m (-g_{i,m})]``, with sums over
    the trees of each output (paper 003, Definition 5, as the authors' code computes it) and lr
    the mean learning rate.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
    y : array-like of shape (n_samples,)
    attribution : {"predecomp", "saabas", "shap"}
        As for ``tree_inner``.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        As for ``tree_inner``.

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    ens = from_model(model)
    p = _values(ens, attribution, reference)
    lr = float(np.mean(ens.learning_rate))
    if p is None:
        FI = _shap_inner(ens, X, y, sample_weight, True)
        return _per_output(ens, FI / lr, "forest_inner", True)
    _, _, _, FI, _ = _staged(ens, X, y, sample_weight, forest_p=p, need_hc=False)
    return _per_output(ens, FI / lr, "forest_inner")


def total_gain(model: Any) -> pd.Series | pd.DataFrame:
    """The booster's stored split gains summed per feature.

    For XGBoost this is ``get_score(importance_type="total_gain")`` (features never used
    score 0).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    ens = from_model(model)
    inner = np.flatnonzero(ens.left >= 0)
    tree = ens._node_tree[inner]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), ens.gain[inner])
    return _per_output(ens, out, "total_gain")


def _total(res: pd.Series | pd.DataFrame) -> pd.Series:
    return res["total"] if isinstance(res, pd.DataFrame) else res


def _permutation(ens, X, y, sample_weight, n_repeats, random_state):
    if ens.input_map is not None:
        raise NotImplementedError(
            "Permutation importance is not available for models routed through their booster "
            "(CatBoost categorical splits) yet."
        )
    obj = get_objective(ens)
    n, blocks = ens._blocks(X)
    Xd = _input.join_blocks(blocks, ens.n_features)
    yv = obj.check_labels(y)
    w = None if sample_weight is None else _weights(sample_weight, n)
    base = obj.loss(yv, ens.predict_margin(Xd), w)
    rng = np.random.default_rng(random_state)
    out = np.zeros(ens.n_features)
    used = np.unique(ens.feature[ens.left >= 0])
    for j in used:
        col = Xd[:, j].copy()
        for _ in range(n_repeats):
            Xd[:, j] = col[rng.permutation(n)]
            out[j] += obj.loss(yv, ens.predict_margin(Xd), w) - base
        Xd[:, j] = col
    return out / n_repeats


_INNER = {
    f"{name}{suffix}": (fn, a)
    for name, fn in (("tree_inner", tree_inner), ("forest_inner", forest_inner))
    for suffix, a in (("", "predecomp"), ("_saabas", "saabas"), ("_shap", "shap"))
}

#: Every method name ``importance`` accepts, in display order.
ALL_METHODS = (
    *_INNER,
    "abs_predecomp",
    "abs_saabas",
    "abs_shap",
    "total_gain",
    "permutation",
    "unbiased_gain",
)


def _abs_rows(ens: TreeEnsemble, X: Any, m: str, reference: Any = None) -> np.ndarray:
    """Per-row |attribution| of an ``abs_*`` method, summed over outputs: shape (n, p)."""
    if m == "abs_shap":
        attr = tree_shap(ens, X)
    elif m == "abs_predecomp":
        attr = predecomp(ens, X, reference=reference)
    else:
        attr = saabas(ens, X)
    v = np.abs(attr.values)
    return v.sum(axis=2) if v.ndim == 3 else v


def _check_bootstrap(n_bootstrap: Any) -> int:
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)):
        raise TypeError(f"n_bootstrap must be an int, got {type(n_bootstrap).__name__}.")
    if n_bootstrap < 0 or n_bootstrap == 1:
        raise ValueError(
            f"n_bootstrap must be 0 (no standard errors) or at least 2, got {n_bootstrap}."
        )
    return int(n_bootstrap)


def _bootstrap_rng(random_state: Any) -> np.random.Generator:
    """The generator of the bootstrap counts and of the replicates' seeds.

    An int seeds a child of its seed sequence, so the counts are not drawn from the same
    stream as the point estimates' permutations; a Generator is drawn from (after the point
    estimates used it); None means fresh entropy."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return np.random.default_rng(int(random_state.integers(0, 2**63)))
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}.")
        return np.random.default_rng(np.random.SeedSequence(int(random_state)).spawn(1)[0])
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator, got {type(random_state)}."
    )


def _n_rows(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def _unbiased_exact(ens: TreeEnsemble, X: Any, y: Any, counts: np.ndarray) -> np.ndarray:
    """``unbiased_gain``'s exact expectation (constant hessian, uniform weights) on the
    multiset in which row i appears ``counts[i]`` times, without copying rows: the ratios are
    sum c g / sum c h and k counts rows with multiplicity. Per feature, summed over outputs."""
    from .unbiased import _exact_ratios, _training_sums

    Gt, _ = _training_sums(ens, None)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    r, count = _exact_ratios(ens, X, y, inner, counts)
    k = np.minimum(count[L], count[R])
    ub = np.where(k >= 1, Gt[L] * r[:, 1] + Gt[R] * r[:, 2] - Gt[inner] * r[:, 0], 0.0)
    group = ens.tree_group[ens._node_tree[inner]]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], group), ub)
    return _total(_per_output(ens, out, "unbiased_gain")).to_numpy()


def _replicate(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    methods: Sequence[str],
    sample_weight: Any,
    counts: np.ndarray,
    n_repeats: int,
    seed: int,
    abs_rows: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Every method on one bootstrap resample: row i counted ``counts[i]`` times.

    ``abs_*`` reuse the per-row values in ``abs_rows`` (their point estimates are plain means
    over rows); the other data-dependent methods are recomputed with ``counts`` multiplied
    into the sample weights."""
    n = counts.shape[0]
    sw = counts.astype(np.float64)
    user_w = None if sample_weight is None else _weights(sample_weight, n)
    if user_w is not None:
        sw = sw * user_w
    out = {}
    for m in methods:
        if m in _INNER:
            inner, a = _INNER[m]
            out[m] = _total(inner(ens, X, y, a, sw)).to_numpy()
        elif m in abs_rows:
            out[m] = counts @ abs_rows[m] / n
        elif m == "total_gain":
            out[m] = _total(total_gain(ens)).to_numpy()
        elif m == "permutation":
            out[m] = _permutation(ens, X, y, sw, n_repeats, np.random.default_rng(seed))
        elif m == "unbiased_gain":
            from .unbiased import unbiased_gain

            uniform = user_w is None or (np.all(user_w == user_w[0]) and user_w[0] > 0)
            if get_objective(ens).constant_hessian and uniform:
                # the point estimate's exact expectation over draws, on the resample
                out[m] = _unbiased_exact(ens, X, y, counts)
            else:
                ug = unbiased_gain(ens, X, y, random_state=seed, sample_weight=sw)
                out[m] = _total(ug).to_numpy()
    return out


def importance(
    model: Any,
    X: Any,
    y: Any,
    methods: Sequence[str] = METHODS,
    sample_weight: Any = None,
    n_repeats: int = 5,
    random_state: Any = None,
    n_bootstrap: int = 0,
    reference: Any = None,
) -> pd.DataFrame:
    """Several global importances side by side, one column per method.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (held-out data to separate signal from overfitting).
    y : array-like of shape (n_samples,)
    methods : sequence of str
        Any of ``tree_inner`` (PreDecomp), ``tree_inner_saabas``, ``tree_inner_shap``,
        ``forest_inner``, ``forest_inner_saabas``, ``forest_inner_shap``, ``abs_predecomp``,
        ``abs_saabas``, ``abs_shap`` (mean |attribution|; ``abs_shap`` is mean |TreeSHAP|, the
        usual SHAP bar plot), ``total_gain`` and ``permutation`` (mean loss increase when the
        column is permuted, over ``n_repeats`` permutations) and ``unbiased_gain``
        (``unbiased_gain`` with one draw). For multi-output models the columns hold the
        totals over classes.
    sample_weight : array-like of shape (n_samples,), optional
    n_repeats : int
        Permutations per feature for ``permutation``.
    random_state : int or numpy Generator, optional
        Seed of the permutations, of the unbiased gain's draws and of the bootstrap.
    n_bootstrap : int
        Number of bootstrap resamples of the evaluation rows (0: none, otherwise at least 2).
        Each resample is a multinomial draw of n row counts (row i taken ``c_i`` times,
        sum c_i = n) applied as integer row weights multiplied into ``sample_weight``; X is
        never copied. For every method column ``m`` a column ``m_se`` is added: the standard
        deviation over the resamples (``ddof=1``), the bootstrap standard error of ``m``.
        ``abs_*`` reuse the attributions computed once (weighted means of per-row values);
        TreeInner, ForestInner and permutation importance are recomputed with the weights, so
        they cost ``n_bootstrap`` times their point estimate; ``total_gain`` does not depend on
        the data (its standard error is 0). ``unbiased_gain`` with a constant hessian and
        uniform weights is, as its point estimate, the exact expectation over draws on the
        resample; otherwise its draws pick among all rows and the rows the resample left out
        weigh 0, which makes its standard error somewhat conservative. Each resample's
        permutations and draws get their own seed.

    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values recomputed from this
        data for ``tree_inner``, ``forest_inner`` and ``abs_predecomp`` (as their own
        ``reference=``; the TreeInner and ForestInner variants with Saabas or TreeSHAP refuse
        it), and the training sums of ``unbiased_gain`` (its ``train=``). Needed for models
        that store no hessian covers (CatBoost with a loss other than RMSE). The other methods
        do not use it. Not combined with ``n_bootstrap``.

    Returns
    -------
    pandas.DataFrame indexed by feature name: the method columns in the order of ``methods``
    (identical to ``n_bootstrap=0``), then, with ``n_bootstrap``, the ``_se`` columns in the
    same order.
    """
    n_bootstrap = _check_bootstrap(n_bootstrap)
    if n_bootstrap and _n_rows(X) == 0:
        raise ValueError("n_bootstrap needs at least one evaluation row; X has none.")
    ens = from_model(model)
    if n_bootstrap and reference is not None:
        raise ValueError("n_bootstrap does not support reference= yet; pass one or the other.")
    cols = {}
    abs_rows: dict[str, np.ndarray] = {}
    for m in methods:
        if m in _INNER:
            inner, a = _INNER[m]
            cols[m] = _total(inner(ens, X, y, a, sample_weight, reference)).to_numpy()
        elif m in ("abs_predecomp", "abs_saabas", "abs_shap"):
            v = _abs_rows(ens, X, m, reference)
            if n_bootstrap:
                abs_rows[m] = v
            cols[m] = v.mean(axis=0) if v.shape[0] else np.zeros(len(ens.output_names))
        elif m == "total_gain":
            cols[m] = _total(total_gain(ens)).to_numpy()
        elif m == "permutation":
            cols[m] = _permutation(ens, X, y, sample_weight, n_repeats, random_state)
        elif m == "unbiased_gain":
            from .unbiased import unbiased_gain

            ug = unbiased_gain(
                ens, X, y, random_state=random_state, sample_weight=sample_weight, train=reference
            )
            cols[m] = _total(ug).to_numpy()
        else:
            raise ValueError(f"Unknown importance method {m!r}; choose from {list(ALL_METHODS)}.")
    if n_bootstrap:
        n = _n_rows(X)
        rng = _bootstrap_rng(random_state)
        pvals = np.full(n, 1.0 / n)
        reps: dict[str, list[np.ndarray]] = {m: [] for m in cols}
        for _ in range(n_bootstrap):
            counts = rng.multinomial(n, pvals)
            seed = int(rng.integers(0, 2**63))
            rep = _replicate(
                ens, X, y, list(cols), sample_weight, counts, n_repeats, seed, abs_rows
            )
            for m in cols:
                reps[m].append(rep[m])
        for m in list(cols):
            se = np.std(np.asarray(reps[m]), axis=0, ddof=1)
            if m == "total_gain":  # no data dependence; NaN stays NaN (CatBoost)
                se = np.where(np.isfinite(cols[m]), 0.0, np.nan)
            cols[f"{m}_se"] = se
    return pd.DataFrame(cols, index=list(ens.output_names))
