"""Path-dependent SHAP interaction values and TreeInner on them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._errors import InputError
from ._staged import _inputs, stages
from .adapters import from_model
from .attribution import _output_index, _tree_range
from .ensemble import TreeEnsemble
from .kernels import interactions as K
from .treeshap import _expected_value, _setup, _ShapSetup, _simple

__all__ = ["Interactions", "tree_inner_interactions", "tree_shap_interactions"]

#: Why the interaction functions take in-memory rows only
_SQUARED = "its output has n_features**2 values per row"


@dataclasses.dataclass(frozen=True)
class Interactions:
    """Per-row SHAP interaction values.

    Attributes
    ----------
    values : ndarray of shape (n_samples, n_features, n_features[, n_outputs])
        ``values[i, j, k]`` (j != k) is half the interaction of features j and k in row i's
        margin (symmetric in j and k); ``values[i, j, j]`` is feature j's main effect. Every
        row of the (j, k) matrix sums to the TreeSHAP value of j (``tree_shap``).
    bias : ndarray of shape (n_outputs,)
        The expected value, as ``tree_shap``'s ``bias``: ``values.sum(axis=(1, 2)) + bias`` is
        the margin of the trees used.
    feature_names : tuple of str
    index : pandas.Index or None
        The row index of the input DataFrame, if it was one.
    """

    values: np.ndarray
    bias: np.ndarray
    feature_names: tuple[str, ...]
    index: Any = None

    @public
    def to_frame(self, row: int, *, output: int | None = None) -> pd.DataFrame:
        """The interaction matrix of one row as a DataFrame, features on both axes.

        Parameters
        ----------
        row : int
            Position of the row (0-based, as in ``values``).
        output : int, optional
            For multi-output models, which output (class); required there.

        Returns
        -------
        pandas.DataFrame
            Of shape (n_features, n_features).
        """
        v = self.values
        n = v.shape[0]
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not -n <= row < n:
            raise InputError(f"row must be an int in [0, {n}), got {row!r}.")
        m = v[row]
        if m.ndim == 3:
            if output is None:
                raise InputError(
                    f"These interactions have {m.shape[2]} outputs; pass output= to pick one."
                )
            m = m[:, :, _output_index(output, m.shape[2])]
        elif output is not None:
            _output_index(output, 1)
        names = list(self.feature_names)
        return pd.DataFrame(m, index=names, columns=names)


def _credit2(su: _ShapSetup, a: np.ndarray, first: int) -> np.ndarray:
    """Players -> output features on axes ``first`` and ``first + 1``."""
    return su.credit(su.credit(a, axis=first), axis=first + 1)


@public
def tree_shap_interactions(
    model: Any,
    X: Any,
    *,
    iteration_range: tuple[int, int] | None = None,
    node_weight: str = "auto",
) -> Interactions:
    """Path-dependent SHAP interaction values of every row's margin, per pair of features.

    The Shapley interaction index of shap's ``TreeExplainer.shap_interaction_values`` and
    XGBoost's ``predict(..., pred_interactions=True)``, on the game of ``tree_shap``: for
    features j != k,
    ``Phi_jk = sum_{S not containing j, k} |S|! (M - |S| - 2)! / (2 (M - 1)!) D_jk(S)`` with
    ``D_jk(S) = f(S + j + k) - f(S + j) - f(S + k) + f(S)``, split equally between (j, k) and
    (k, j); the diagonal ``Phi_jj = phi_j - sum_{k != j} Phi_jk`` (the main effect), so every
    row of a row's matrix sums to its TreeSHAP value. Computed per tree in O(N D Q) per row
    (N nodes, D depth, Q = ceil(D / 2) quadrature points; ``kernels.interactions``).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
        The model; it must store the node weights (hessian covers or row counts).
    X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        Rows to explain, as for ``TreeEnsemble.predict_margin``.
    iteration_range : tuple of (int, int), optional
        Explain only the trees of these boosting rounds, as for ``tree_shap``.
    node_weight : {"auto", "cover", "count"}, default "auto"
        The node weights, as for ``tree_shap``.

    Returns
    -------
    Interactions
        ``values`` of shape (n_samples, n_features, n_features), or (n_samples, n_features,
        n_features, n_outputs) for multi-output models (the convention of ``tree_shap``);
        ``bias`` the expected value per output. The values take n_samples * n_features**2 *
        n_outputs * 8 bytes: pass the rows in pieces if that is too much.

    Raises
    ------
    ValueError
        For an unknown ``node_weight``, a model with no such weights, rows with the wrong
        number of features, or a Dask collection.
    NotImplementedError
        Where ``tree_shap`` raises it (linear leaves, too deep trees).
    """
    _api.check_choice("node_weight", node_weight, _api.NODE_WEIGHTS)
    _api.check_in_memory(X, "tree_shap_interactions", _SQUARED)
    ens = from_model(model)
    lo, hi = _tree_range(ens, iteration_range)
    n, blocks = ens._blocks(X)
    su = _setup(ens, node_weight, lo, hi, 0)
    P = su.n_players
    out = np.zeros((n, P, P, ens.n_outputs), dtype=np.float64)
    nodes = su.ens._nodes()
    simple = _simple(su.simple[lo:hi], su.simple)
    for start, block in blocks:
        K.interaction_values(
            block, nodes, su.lay, su.tabs, simple, su.tree_nq, lo, hi, su.max_nodes,
            ens._float32_input, out[start : start + block.shape[0]],
        )  # fmt: skip
    out = _credit2(su, out, 1)
    values = out[..., 0] if ens.n_outputs == 1 else out
    index = X.index if isinstance(X, pd.DataFrame) else None
    bias = _expected_value(su.ens, su.weight, lo, hi)
    return Interactions(values=values, bias=bias, feature_names=ens.output_names, index=index)


def _interaction_inner(ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any) -> np.ndarray:
    """TreeInner on interaction values: (n_output_features, n_output_features, n_outputs)."""
    obj, n, blocks, yv, w = _inputs(ens, X, y, sample_weight)
    su = _setup(ens, "auto", 0, ens.n_trees, 0)
    P = su.n_players
    acc = np.zeros((K.inner_chunks(n, ens.n_trees), P, P, ens.n_outputs))
    args = (su.ens._nodes(), su.ens._layout, stages(su.ens, obj), su.lay, su.tabs,
            _simple(su.simple, su.simple), su.tree_nq, su.max_nodes,
            su.ens.learning_rate)  # fmt: skip
    for start, block in blocks:
        stop = start + block.shape[0]
        K.interaction_inner(block, yv[start:stop], w[start:stop], *args, acc)
    return _credit2(su, acc.sum(axis=0), 0)


@public
def tree_inner_interactions(
    model: Any,
    X: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    output: int | None = None,
) -> pd.DataFrame:
    """TreeInner on SHAP interaction values: a held-out importance of every pair of features.

    ``TI(j, k) = sum_m (1/lr_m) sum_i w_i Phi_{m,jk}(x_i) (-g_{i,m})``, with ``Phi_m`` tree
    m's path-dependent SHAP interaction values (``tree_shap_interactions``) and g the gradient
    at the margin before tree m's boosting round: TreeInner (Sun 2022, Definition 4) with the
    interaction values as the per-tree attribution. Each row sums to
    ``tree_inner(model, X, y, attribution="shap")``; the diagonal is the main effects' part,
    ``TI(j, k) + TI(k, j)`` the held-out value of the pair's interaction (negative: the model
    learnt an interaction that does not hold on these rows). Streamed tree by tree: no
    interaction value is stored.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (normally held-out data).
    y : array-like of shape (n_samples,)
        Labels, valid for the model's objective.
    sample_weight : array-like of shape (n_samples,), optional
    output : int, optional
        For multi-output models, the class whose trees to use; default: the sum over classes.

    Returns
    -------
    pandas.DataFrame
        Of shape (n_features, n_features), indexed by feature name on both axes; symmetric.

    Raises
    ------
    ValueError
        For invalid rows, labels or ``output``, or a Dask collection.
    """
    _api.check_rows(X)
    _api.check_in_memory(X, "tree_inner_interactions", _SQUARED)
    ens = from_model(model)
    if output is not None:
        _output_index(output, ens.n_outputs)
    a = _interaction_inner(ens, X, y, sample_weight)
    m = a.sum(axis=2) if output is None else a[:, :, output]
    names = list(ens.output_names)
    return pd.DataFrame(m, index=names, columns=names)
