"""TreeInner and ForestInner: inner products of per-tree attributions with negative gradients."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._centred import centred_initial_sums
from ._dask import is_dask, map_add
from ._errors import InputError
from ._splits import split_columns, split_credit
from ._staged import _edge_pass, _staged, _weights, edge_moments, initial_gradients, split_sums
from ._stats import Moments, moments_from_rows, p_values
from .adapters import from_model
from .attribution import node_values, path_attribution
from .ensemble import TreeEnsemble
from .interventional import _SUMS_OVER_ROWS, interventional_inner, interventional_inner_moments
from .interventional import tree_shap_interventional as _interventional_values
from .kernels import attribution as K
from .treeshap import _shap_inner, _shap_inner_moments, tree_shap

__all__ = ["forest_inner", "tree_inner"]

#: ForestInner's two forms of Sun's (2022) Eq. 22: the summed negative gradients of all the
#: stages (the authors' code), or the negative gradient at the initial prediction only
GRADIENTS = ("staged", "initial")


def inner_values(ens: TreeEnsemble, attribution: str, reference: Any) -> np.ndarray | None:
    """Node values of a path attribution (PreDecomp from ``reference`` when given); None for
    TreeSHAP, which has no node values."""
    _api.check_attribution(attribution)
    return _values(ens, attribution, reference)


def _values(ens: TreeEnsemble, attribution: str, reference: Any) -> np.ndarray | None:
    """``inner_values`` for an attribution already checked (interventional: None)."""
    if reference is not None and attribution != "predecomp":
        raise InputError(
            f"reference= recomputes PreDecomp node values; attribution={attribution!r} does not "
            "use them (use attribution='predecomp')."
        )
    if attribution in ("shap", "interventional"):
        return None
    return node_values(ens, attribution=attribution, reference=reference)


def _by_partition(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A row-additive ``fn(ens, X, y, values, sample_weight)`` that, given a Dask collection
    X, is applied to its partitions and the results added (``_dask.map_add``)."""

    @functools.wraps(fn)
    def wrapper(
        ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
    ) -> Any:
        if is_dask(X):
            return map_add(_apply, (wrapper, ens, values), X, y, sample_weight)
        return fn(ens, X, y, values, sample_weight)

    return wrapper


def _apply(shared: tuple, X: Any, y: Any, sample_weight: Any) -> Any:
    fn, ens, values = shared
    return fn(ens, X, y, values, sample_weight)


@_by_partition
def tree_inner_sums(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> np.ndarray:
    """TreeInner per output feature and output, (n_output_features, n_outputs): a sum over the
    rows of X, so sums over disjoint rows add up. ``values``: node values, None for TreeSHAP."""
    if values is None:
        return _shap_inner(ens, X, y, sample_weight, False)
    G, _, _, _, _ = _staged(ens, X, y, sample_weight, need_hc=False)
    return split_credit(ens, -G, values, ens.learning_rate)


@_by_partition
def forest_inner_sums(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> np.ndarray:
    """ForestInner per output feature and output, (n_output_features, n_outputs); a sum over
    rows like ``tree_inner_sums``.

    With node values, ``sum_i w_i S_c(x_i) A_{j,c}(x_i)`` (S_c the summed negative gradient
    of the trees of output c, A their summed path attribution) is, per tree, the sum over
    nodes of ``(p(n) - p(parent))`` times the sum of ``w S`` over the rows reaching n,
    credited to the parent's feature: one staged pass collects ``w S`` per leaf."""
    lr = float(np.mean(ens.learning_rate))
    if values is None:
        return _shap_inner(ens, X, y, sample_weight, True) / lr
    _, _, _, LS, _ = _staged(ens, X, y, sample_weight, forest=True, need_hc=False)
    return split_credit(ens, LS, values, None) / lr


def _initial_rows(ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None) -> np.ndarray:
    """ForestInner's initial-form terms of every row, output feature and output before the
    row weights, (n, n_output_features, n_outputs): the forest's attribution (summed over the
    trees of each output; TreeSHAP for ``values`` None) times ``-g`` at the initial margin
    F_0, over the mean learning rate."""
    A = tree_shap(ens, X).values if values is None else path_attribution(ens, X, values).values
    if A.ndim == 2:
        A = A[:, :, None]
    neg_g = -initial_gradients(ens, y, A.shape[0]) / float(np.mean(ens.learning_rate))
    return A * neg_g[:, None, :]


@_by_partition
def forest_inner_initial_sums(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> np.ndarray:
    """ForestInner in its initial (label) form, ``(1/lr) sum_i w_i [sum_m r_m(x_i)]
    (-g_i(F_0))``, per output feature and output: a sum over rows like
    ``forest_inner_sums``."""
    rows = _initial_rows(ens, X, y, values)
    return np.einsum("i,ijk->jk", _weights(sample_weight, rows.shape[0]), rows)


@_by_partition
def forest_inner_initial_moments(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> Moments:
    """The initial form's per-row terms summed, squared and summed, over the rows of X."""
    rows = _initial_rows(ens, X, y, values)
    w = None if sample_weight is None else _weights(sample_weight, rows.shape[0])
    return moments_from_rows(rows, w)


def _edge_dg(ens: TreeEnsemble, values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per edge (indexed by its child node): ``(values[n] - values[parent(n)]) * scale[tree]``
    (0 at roots)."""
    parent = K.parents(ens.left, ens.right)
    has = parent >= 0
    dg = np.zeros(ens.n_nodes)
    dg[has] = (values[has] - values[parent[has]]) * scale[ens._node_tree[has]]
    return dg


@_by_partition
def tree_inner_moments(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> Moments:
    """TreeInner's per-row terms summed, squared and summed, over the rows of X.

    Terms ``u[i, j, c] = w_i sum_t (1/lr_t) r_{t,j}(x_i) (-g_{i,t})`` over the trees of output
    c, per output feature j; ``s1`` equals ``tree_inner_sums``. ``values``: node values of
    the path attribution, None for TreeSHAP.

    Returns
    -------
    Moments
        Of the terms (``treeinner._stats``): their standard errors come from
        ``Moments.estimate(mean=False)``.
    """
    if values is None:
        return _shap_inner_moments(ens, X, y, sample_weight, forest=False)
    values = np.asarray(values, dtype=np.float64)
    dg = _edge_dg(ens, values, -1.0 / ens.learning_rate)
    return edge_moments(ens, X, y, sample_weight, dg, np.zeros(ens.n_nodes))


@_by_partition
def forest_inner_moments(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray | None, sample_weight: Any = None
) -> Moments:
    """ForestInner's per-row terms summed, squared and summed, over the rows of X.

    Terms ``u[i, j, c] = w_i R[i, j, c] GS[i, c] / lr`` with R the path attribution summed
    over the trees of output c, GS the sum over those trees of ``-g`` and lr the mean
    learning rate; ``s1`` equals ``forest_inner_sums``. ``values``: node values, None for
    TreeSHAP.
    """
    lr = float(np.mean(ens.learning_rate))
    if values is None:
        return _shap_inner_moments(ens, X, y, sample_weight, forest=True).scaled(1.0 / lr)
    values = np.asarray(values, dtype=np.float64)
    dg = _edge_dg(ens, values, np.full(ens.n_trees, 1.0 / lr))
    return _edge_pass(ens, X, y, sample_weight, dg, np.zeros(ens.n_nodes), True)


def tree_inner_interventional_sums(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> np.ndarray:
    """TreeInner with interventional TreeSHAP against ``background``, per output feature and
    output: a sum over the rows of X, streamed tree by tree (no attribution stored)."""
    return interventional_inner(ens, X, y, background, sample_weight, False)


def tree_inner_interventional_moments(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> Moments:
    """``tree_inner_moments`` with interventional TreeSHAP against ``background``."""
    return interventional_inner_moments(ens, X, y, background, sample_weight, False)


def forest_inner_interventional_sums(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> np.ndarray:
    """``forest_inner_sums`` (staged form) with interventional TreeSHAP against
    ``background``."""
    lr = float(np.mean(ens.learning_rate))
    return interventional_inner(ens, X, y, background, sample_weight, True) / lr


def forest_inner_interventional_moments(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> Moments:
    """``forest_inner_moments`` with interventional TreeSHAP against ``background``."""
    lr = float(np.mean(ens.learning_rate))
    return interventional_inner_moments(ens, X, y, background, sample_weight, True).scaled(1.0 / lr)


def _initial_interventional_rows(ens: TreeEnsemble, X: Any, y: Any, background: Any) -> np.ndarray:
    """``_initial_rows`` with the forest's interventional TreeSHAP values against
    ``background``."""
    _api.check_in_memory(X, "attribution='interventional'", _SUMS_OVER_ROWS)
    A = _interventional_values(ens, X, background).values
    if A.ndim == 2:
        A = A[:, :, None]
    neg_g = -initial_gradients(ens, y, A.shape[0]) / float(np.mean(ens.learning_rate))
    return A * neg_g[:, None, :]


def forest_inner_initial_interventional_sums(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> np.ndarray:
    """``forest_inner_initial_sums`` with interventional TreeSHAP against ``background``."""
    rows = _initial_interventional_rows(ens, X, y, background)
    return np.einsum("i,ijk->jk", _weights(sample_weight, rows.shape[0]), rows)


def forest_inner_initial_interventional_moments(
    ens: TreeEnsemble, X: Any, y: Any, background: Any, sample_weight: Any = None
) -> Moments:
    """``forest_inner_initial_moments`` with interventional TreeSHAP against ``background``."""
    rows = _initial_interventional_rows(ens, X, y, background)
    w = None if sample_weight is None else _weights(sample_weight, rows.shape[0])
    return moments_from_rows(rows, w)


#: Per inner-product family, its sums and row moments with interventional TreeSHAP (they take
#: the background where the others take node values): the public functions and the registry.
INTERVENTIONAL = {
    "tree_inner": (tree_inner_interventional_sums, tree_inner_interventional_moments),
    "forest_inner": (forest_inner_interventional_sums, forest_inner_interventional_moments),
    "forest_inner_initial": (
        forest_inner_initial_interventional_sums,
        forest_inner_initial_interventional_moments,
    ),
}


def tree_inner_splits(
    ens: TreeEnsemble, X: Any, y: Any, values: np.ndarray, sample_weight: Any = None
) -> pd.DataFrame:
    """TreeInner per split with its standard error over rows (``tree_inner(per_split=True)``)."""
    n, G, SQ, N = split_sums(ens, X, y, sample_weight)
    S = np.empty(ens.n_nodes)  # sum of -w g over the rows reaching each node
    Q = np.empty(ens.n_nodes)  # sum of (w g)^2
    C = np.empty(ens.n_nodes)  # rows
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, -G, S)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, SQ, Q)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, N, C)
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    lr = ens.learning_rate[ens._node_tree[inner]]
    dL = values[L] - values[inner]
    dR = values[R] - values[inner]
    # per-row terms (p_child - p_t)(-w g)/lr for the rows reaching t, 0 for the others
    s1 = (dL * S[L] + dR * S[R]) / lr
    s2 = (dL**2 * Q[L] + dR**2 * Q[R]) / lr**2
    if n > 1:
        se = np.sqrt(n / (n - 1.0) * np.maximum(s2 - s1**2 / n, 0.0))
    else:
        se = np.full_like(s1, np.nan)
    cols = split_columns(ens, inner)
    cols["gain"] = ens.gain[inner]
    cols["tree_inner"] = s1
    cols["se"] = se
    cols["p_value"] = p_values(s1, se)
    cols["n_node"] = C[inner].astype(np.int64)
    return pd.DataFrame(cols)


def _check_background(attribution: str, background: Any) -> None:
    """``background=`` goes with ``attribution="interventional"``, which needs it."""
    if attribution == "interventional" and background is None:
        raise InputError(
            "attribution='interventional' needs a background data set: pass background= (rows "
            "with the model's features, e.g. a sample of the training data); the attribution "
            "of a tree is its interventional TreeSHAP against those rows."
        )
    if attribution != "interventional" and background is not None:
        raise InputError(
            f"background= is the data set of attribution='interventional'; attribution="
            f"{attribution!r} does not use it."
        )


def _result(sums, model, X, y, attribution, sample_weight, reference, background, centred=False):
    """A public TreeInner/ForestInner result: ``sums`` of the model's node values (or, for
    interventional TreeSHAP, of the background), per output; ``centred``: the centred initial
    form instead (``_centred``; not with interventional TreeSHAP, centred on its background
    already)."""
    _api.check_attribution(attribution, _api.INNER_ATTRIBUTIONS)
    _check_background(attribution, background)
    _api.check_rows(X)
    ens = from_model(model)
    name = sums.__name__.removesuffix("_sums")
    if attribution == "interventional":
        if reference is not None:
            _values(ens, attribution, reference)  # the error naming the attribution
        fn = INTERVENTIONAL[name][0]
        if is_dask(X):  # a sum over rows: per partition, added up
            result = map_add(_apply, (fn, ens, background), X, y, sample_weight)
        else:
            result = fn(ens, X, y, background, sample_weight)
        return _api.per_output(ens, result, name, credited=True)
    if centred:
        if reference is not None:
            raise InputError(
                "reference= recomputes PreDecomp's node values from training data; the "
                "centred initial form takes its node values from the evaluation rows (pass "
                "centred=False for the uncentred form with reference=)."
            )
        result = centred_initial_sums(ens, X, y, attribution == "shap", sample_weight)
        return _api.per_output(ens, result, name, credited=True)
    values = _values(ens, attribution, reference)
    return _api.per_output(ens, sums(ens, X, y, values, sample_weight), name, credited=True)


@public
def tree_inner(
    model: Any,
    X: Any,
    y: Any,
    *,
    attribution: str = "predecomp",
    sample_weight: Any = None,
    reference: Any = None,
    per_split: bool = False,
    background: Any = None,
) -> pd.Series | pd.DataFrame:
    """TreeInner: per tree, the inner product of an attribution with the negative gradient.

    TreeInner(k) = sum_m (1/lr_m) sum_i r_{m,k}(x_i) (-g_{i,m}) with g the gradient at the
    margin before tree m's boosting round (Sun 2022, Definition 4). On the training data with
    PreDecomp it equals the total split gain of feature k; on held-out data a feature the model
    only overfit gets a negative score.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (normally held-out data).
    y : array-like of shape (n_samples,)
        Labels, valid for the model's objective.
    attribution : {"predecomp", "saabas", "shap", "interventional"}
        The per-tree attribution r. ``"shap"`` is path-dependent TreeSHAP (as
        ``tree_shap``), computed tree by tree and weighted on the fly: no SHAP value is
        stored. ``"interventional"`` is interventional TreeSHAP against ``background`` (as
        ``tree_shap_interventional``), streamed the same way; it needs no node weights, and
        a feature the model does not use scores 0 even when it is correlated with one it
        does. Per tree, the values of a row sum to the tree's output minus its mean output
        over the background.
    sample_weight : array-like of shape (n_samples,), optional
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: PreDecomp node values recomputed from this data
        (``node_values(model, reference=...)``) instead of the stored covers. Only with
        ``attribution="predecomp"``.
    per_split : bool, default False
        Return one row per split instead of per-feature sums (``"predecomp"`` and
        ``"saabas"`` only: TreeSHAP has no per-split decomposition). A split of node t into L
        and R contributes ``(1/lr) [p_L S_L + p_R S_R - p_t S_t]``, with p the node values and
        S_u the sum of ``-w g`` over the rows reaching u; the splits of a feature sum to its
        TreeInner score (before any credit of CatBoost's categorical split columns to
        features).

    Returns
    -------
    pandas.Series or pandas.DataFrame
        A Series indexed by feature name, or for multi-output models a DataFrame with one
        column per class and a ``total`` column.

        With ``per_split=True``, a DataFrame with one row per split: ``tree``, ``node``
        (index within the tree), ``class`` (multi-output models), ``feature`` (the split
        column), ``threshold`` (NaN for categorical splits), ``gain`` (the booster's stored
        split gain), ``tree_inner`` (the split's held-out contribution), ``se`` (its standard
        error over the rows: the per-row terms are ``(p_child - p_t)(-w_i g_i)/lr`` for the
        rows reaching t, p_child the child the row goes to, and 0 for the other rows;
        ``se = sqrt(n/(n-1) (sum u^2 - (sum u)^2/n))`` over all n rows of X), ``p_value``
        (one-sided, for "the split's contribution is <= 0": no better than useless on new
        data) and ``n_node`` (rows of X reaching the node).
    background : array-like, DataFrame or sparse matrix, optional
        The background rows of ``attribution="interventional"`` (required there, refused
        with the other attributions); all rows are used, and the cost of a row does not grow
        with their number (``tree_shap_interventional``).

    Raises
    ------
    ValueError
        For invalid rows, labels or weights, an unknown attribution, a missing background
        with ``"interventional"`` or a background with another attribution, and ``per_split``
        with a TreeSHAP attribution.
    """
    if not _api.check_flag("per_split", per_split):
        return _result(
            tree_inner_sums, model, X, y, attribution, sample_weight, reference, background
        )
    _api.check_attribution(attribution, _api.INNER_ATTRIBUTIONS)
    _check_background(attribution, background)
    _api.check_rows(X)
    if attribution in ("shap", "interventional"):
        raise InputError(
            "per_split=True needs a path attribution ('predecomp' or 'saabas'): TreeSHAP has "
            "no per-split decomposition."
        )
    ens = from_model(model)
    values = _values(ens, attribution, reference)
    assert values is not None  # a path attribution (TreeSHAP refused above)
    return tree_inner_splits(ens, X, y, values, sample_weight)


@public
def forest_inner(
    model: Any,
    X: Any,
    y: Any,
    *,
    attribution: str = "predecomp",
    gradient: str = "staged",
    sample_weight: Any = None,
    reference: Any = None,
    background: Any = None,
    centred: bool = True,
) -> pd.Series | pd.DataFrame:
    """ForestInner: the forest-level inner product of attributions and negative gradients.

    Sun (2022) writes its Eq. 22 in two forms, which differ in general; ``gradient`` chooses:

    - ``"staged"`` (default): ``(1/lr) sum_i [sum_m r_{m,k}(x_i)] [sum_m (-g_{i,m})]``, the
      negative gradients at every stage's margin summed, as the authors' code computes it;
    - ``"initial"``: ``(1/lr) sum_i [sum_m r_{m,k}(x_i)] (-g_i(F_0))``, the negative gradient
      at the initial prediction F_0 (the base margin) only: "the inner product with the
      label" (for squared error, with ``y - F_0``).

    Sums run over the trees of each output, and lr is the mean learning rate.

    Parameters
    ----------
    model, X, y, attribution, sample_weight, reference, background
        As for ``tree_inner``: the model, the evaluation rows and their labels, the per-tree
        attribution (``"predecomp"``, ``"saabas"``, ``"shap"`` or ``"interventional"``), row
        weights, the data PreDecomp's node values are recomputed from, and the background
        rows of interventional TreeSHAP.
    gradient : {"staged", "initial"}
        The form of Eq. 22 (above). In ``importance()`` the initial form is the method
        ``forest_inner_initial`` (with ``_saabas``, ``_shap``), centred.
    centred : bool, default True
        The initial form only (ignored by the staged form): centre the attribution on the
        evaluation rows, so that a feature independent of the target scores zero in
        expectation on new data. The uncentred form (``False``, the paper's) multiplies
        hessian-weighted node values by ``-g(F_0)``, which is not a residual, and scores such
        a feature above zero whenever the loss's hessian is not constant (logistic, softmax,
        Poisson, ...). Centred, an inner node's value is the mean of its leaves' values over
        the rows of X that reach it (``sample_weight`` where given; no hessians, no lambda:
        PreDecomp and Saabas give the same score), and the score of feature k is ``(1/lr)
        sum over splits t on k of sum_{i in t} w_i (p_child(i) - pbar_t)(r_i - rbar_t)``,
        ``r = -g(F_0)`` and ``rbar_t`` its mean over t's rows. With ``"shap"``, TreeSHAP
        splits by the weights of the rows of X instead of the training covers and ``r`` is
        centred on its mean. Interventional TreeSHAP is centred on its background already
        and is not changed. docs/methods.md, "The centred initial form".

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.
    """
    if gradient not in GRADIENTS:
        raise InputError(
            f"gradient must be one of {', '.join(map(repr, GRADIENTS))}; got {gradient!r}."
        )
    _api.check_flag("centred", centred)
    sums = forest_inner_sums if gradient == "staged" else forest_inner_initial_sums
    centre = gradient == "initial" and bool(centred) and attribution != "interventional"
    return _result(sums, model, X, y, attribution, sample_weight, reference, background, centre)
