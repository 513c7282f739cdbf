"""Per-row attributions: PreDecomp (regularized node values) and Saabas (cover-weighted means)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._staged import _staged
from .adapters import from_model
from .ensemble import TreeEnsemble
from .kernels import attribution as K

_ATTRIBUTIONS = {"predecomp": "regularized", "saabas": "mean"}


def _kind(attribution: str) -> str:
    """Node-value kind of an attribution name."""
    try:
        return _ATTRIBUTIONS[attribution]
    except KeyError:
        raise ValueError(
            f"attribution must be one of {sorted(_ATTRIBUTIONS)}, got {attribution!r}."
        ) from None


__all__ = ["Attribution", "node_values", "predecomp", "saabas"]


def _feature_matrix(feature_names: Any, X: Any, n: int) -> tuple[np.ndarray, dict[int, list]]:
    """X as a float (n, p) matrix in the attribution's feature order (DataFrame columns matched
    by name, categorical columns as codes, NaN missing), and the category labels of the
    categorical columns."""
    names = [str(f) for f in feature_names]
    p = len(names)
    cats: dict[int, list] = {}
    if isinstance(X, pd.DataFrame):
        cols = [str(c) for c in X.columns]
        missing = [f for f in names if f not in cols]
        if missing:
            raise ValueError(
                f"X has no column for the features {missing[:10]}"
                f"{' ...' if len(missing) > 10 else ''}."
            )
        frame = X.set_axis(cols, axis=1)
        out = np.empty((X.shape[0], p))
        for j, name in enumerate(names):
            col = frame[name]
            if isinstance(col, pd.DataFrame):
                raise ValueError(f"X has more than one column named {name!r}.")
            if isinstance(col.dtype, pd.CategoricalDtype):
                codes = col.cat.codes.to_numpy().astype(np.float64)
                out[:, j] = np.where(codes < 0, np.nan, codes)
                cats[j] = [str(c) for c in col.cat.categories]
                continue
            try:
                out[:, j] = pd.to_numeric(col).to_numpy(dtype=np.float64, na_value=np.nan)
            except (TypeError, ValueError):
                raise ValueError(
                    f"Column {name!r} of X is neither numeric nor categorical."
                ) from None
    elif hasattr(X, "tocoo") and hasattr(X, "nnz"):  # scipy sparse: absent entries missing
        coo = X.tocoo()
        out = np.full(coo.shape, np.nan)
        out[coo.row, coo.col] = coo.data
    else:
        try:
            out = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                "X must be numeric: a 2-D array, a DataFrame or a scipy sparse matrix."
            ) from None
    if out.shape != (n, p):
        raise ValueError(
            f"X has shape {out.shape}, but the attribution explains {n} rows of {p} features."
        )
    return out, cats


@dataclass(frozen=True)
class Attribution:
    """Per-row, per-feature attributions.

    Attributes
    ----------
    values : ndarray of shape (n_samples, n_features) or (n_samples, n_features, n_outputs)
        Contribution of each feature to each row's margin.
    bias : ndarray of shape (n_outputs,)
        The part of the margin no feature explains (base margin plus the trees' root values),
        so that ``values.sum(axis=1) + bias`` is the margin of the trees used.
    feature_names : tuple of str
    index : pandas.Index or None
        The row index of the input DataFrame, if it was one.
    """

    values: np.ndarray
    bias: np.ndarray
    feature_names: tuple[str, ...]
    index: Any = None

    def to_frame(self, output: int | None = None) -> pd.DataFrame:
        """The values as a DataFrame with one column per feature.

        Parameters
        ----------
        output : int, optional
            For multi-output attributions, which output (class) to return; required there.

        Returns
        -------
        pandas.DataFrame
        """
        v = self.values
        if v.ndim == 3:
            if output is None:
                raise ValueError(
                    f"This attribution has {v.shape[2]} outputs; pass output= to pick one."
                )
            v = v[:, :, output]
        return pd.DataFrame(v, columns=list(self.feature_names), index=self.index)

    def to_shap(self, X: Any = None, output: int | None = None) -> Any:
        """The attributions as a ``shap.Explanation``, so shap's own plots work on them.

        Parameters
        ----------
        X : array-like, DataFrame or scipy sparse matrix, optional
            The explained rows, stored as the explanation's ``data`` (shap colours its
            beeswarm by it). DataFrame columns are matched by feature name; categorical columns
            become their category codes in ``data`` and the DataFrame is kept as
            ``display_data``; absent sparse entries become NaN (missing, as the models read
            them).
        output : int, optional
            For multi-output attributions, the output (class) to keep. By default all outputs
            are kept: ``values`` of shape (n, p, K), ``base_values`` (n, K) and
            ``output_names`` ``class_0 ..``, as shap's ``TreeExplainer`` returns them.

        Returns
        -------
        shap.Explanation
            ``values``, ``base_values`` (the bias of every row, so that ``values.sum(axis=1) +
            base_values`` is the margin), ``data`` and ``feature_names``.

        Raises
        ------
        ImportError
            If shap is not installed.
        """
        try:
            import shap
        except ImportError as e:
            raise ImportError(
                "Attribution.to_shap needs shap; install it with pip install 'treeinner[shap]'."
            ) from e
        v = np.asarray(self.values, dtype=np.float64)
        bias = np.asarray(self.bias, dtype=np.float64).reshape(-1)
        n = v.shape[0]
        output_names = None
        if v.ndim == 3:
            if output is None:
                base = np.tile(bias, (n, 1))
                output_names = [f"class_{k}" for k in range(v.shape[2])]
            else:
                k = self._output(output, v.shape[2])
                v, base = v[:, :, k], np.full(n, bias[k])
        else:
            if output is not None:
                self._output(output, 1)
            base = np.full(n, bias[0])
        data = display = None
        if X is not None:
            data, display = self._data(X, n)
        return shap.Explanation(
            values=v,
            base_values=base,
            data=data,
            display_data=display,
            feature_names=list(self.feature_names),
            output_names=output_names,
        )

    @staticmethod
    def _output(output: Any, n_outputs: int) -> int:
        if (
            isinstance(output, bool)
            or not isinstance(output, (int, np.integer))
            or not 0 <= output < n_outputs
        ):
            raise ValueError(
                f"output must be an int in [0, {n_outputs}) for this attribution with "
                f"{n_outputs} output(s), got {output!r}."
            )
        return int(output)

    def _data(self, X: Any, n: int) -> tuple[np.ndarray, Any]:
        """X as a float (n, p) matrix in the attribution's feature order, and the DataFrame to
        display where it has categorical columns."""
        out, cats = _feature_matrix(self.feature_names, X, n)
        display = None
        if cats:
            names = list(self.feature_names)
            display = X.set_axis([str(c) for c in X.columns], axis=1)[names]
        return out, display


def _tree_range(ens: TreeEnsemble, trees: Any) -> tuple[int, int]:
    """A ``slice`` of trees or an ``(start, stop)`` iteration range -> tree indices."""
    if trees is None:
        return 0, ens.n_trees
    if isinstance(trees, slice):
        lo, hi, step = trees.indices(ens.n_trees)
        if step != 1 or hi <= lo:
            raise ValueError(f"trees={trees} must be a non-empty slice with step 1.")
        return lo, hi
    return ens._tree_range(tuple(trees))


def node_values(model: Any, kind: str = "regularized", reference: Any = None) -> np.ndarray:
    """p(t) of every node, in one of the three variants of METHODS.md.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    kind : {"regularized", "mean", "data"}
        ``"regularized"``: PreDecomp's p(t) = [(H_L + lambda) p(L) + (H_R + lambda) p(R)] /
        (H_t + lambda) from the leaves and the stored covers; ``"mean"``: Saabas' cover-weighted
        means (lambda = 0); ``"data"``: p(t) = -lr G_t / (H_t + lambda) with G_t, H_t summed
        over ``reference`` with the staged gradients (for every node, leaves included).
    reference : tuple, optional
        ``(X, y)`` or ``(X, y, sample_weight)``: the data set of ``kind="data"`` (normally the
        training set).

    Returns
    -------
    ndarray of float64, shape (n_nodes,)
    """
    ens = from_model(model)
    if kind == "data":
        if reference is None or len(reference) not in (2, 3):
            raise ValueError('kind="data" needs reference=(X, y) or (X, y, sample_weight).')
        Xr, yr, *wr = reference
        G, H, _, _, _ = _staged(ens, Xr, yr, wr[0] if wr else None)
        Gs = np.empty(ens.n_nodes)
        Hs = np.empty(ens.n_nodes)
        K.subtree_sums(ens.left, ens.right, ens.tree_offsets, G, Gs)
        K.subtree_sums(ens.left, ens.right, ens.tree_offsets, H, Hs)
        lr = ens.learning_rate[ens._node_tree]
        lam = ens.reg_lambda
        if wr and ens.params.get("l2_scaled_by_mean_weight"):
            # CatBoost scales l2_leaf_reg by the mean sample weight of the training set
            w = np.asarray(wr[0], dtype=np.float64)
            lam = lam * float(np.mean(w)) if w.size else lam
        den = Hs + lam
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, -lr * Gs / den, 0.0)
    if kind not in ("regularized", "mean"):
        raise ValueError(f"kind must be 'regularized', 'mean' or 'data', got {kind!r}.")
    cover = ens.cover
    if np.any(~np.isfinite(cover)):
        raise ValueError(
            f"The {ens.source} model does not store hessian covers (objective "
            f"{ens.objective!r}), so node values need the training data: use "
            "kind='data' with reference=(X_train, y_train), or "
            "predecomp(model, X, reference=(X_train, y_train))."
        )
    lam = ens.reg_lambda if kind == "regularized" else 0.0
    out = np.empty(ens.n_nodes)
    K.node_values(ens.left, ens.right, ens.tree_offsets, ens.value, cover, lam, out)
    return out


def _path_attribution(
    model: Any, X: Any, trees: Any, kind: str, reference: Any = None
) -> Attribution:
    ens = from_model(model)
    lo, hi = _tree_range(ens, trees)
    p = node_values(ens, "data" if reference is not None else kind, reference)
    n, blocks = ens._blocks(X)
    out = np.zeros((n, ens.n_features, ens.n_outputs))
    parent = K.parents(ens.left, ens.right)
    for start, block in blocks:
        K.path_attribution(
            block,
            ens._nodes(),
            ens._layout,
            parent,
            p,
            lo,
            hi,
            ens._float32_input,
            out[start : start + block.shape[0]],
        )
    bias = ens.base_margin.copy()
    roots = ens.tree_offsets[lo:hi]
    np.add.at(bias, ens.tree_group[lo:hi], p[roots])
    out = ens._to_output(out, axis=1)
    values = out[:, :, 0] if ens.n_outputs == 1 else out
    index = X.index if isinstance(X, pd.DataFrame) else None
    return Attribution(values=values, bias=bias, feature_names=ens.output_names, index=index)


def predecomp(model: Any, X: Any, trees: Any = None, reference: Any = None) -> Attribution:
    """PreDecomp: per-row feature attributions from regularized node values.

    Node values are p(t) = -lr G_t / (H_t + lambda), computed from the leaves and the stored
    hessian covers; a row's attribution to feature k in one tree is the sum of
    p(child) - p(parent) over the splits on feature k along its path (paper 003, Definition 1).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
    trees : slice or tuple of int, optional
        A slice of trees, or an ``(start, stop)`` range of boosting rounds.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: recompute the node values from this data with
        staged gradients (``node_values(kind="data")``) instead of the stored covers. Local
        accuracy then holds only where the data reproduce the model's leaves.

    Returns
    -------
    Attribution
        ``values.sum(axis=1) + bias`` equals the margin of the trees used.
    """
    return _path_attribution(model, X, trees, "regularized", reference)


def saabas(model: Any, X: Any, trees: Any = None) -> Attribution:
    """Saabas: per-row attributions from cover-weighted mean node values.

    The same path decomposition as ``predecomp`` with p(t) the hessian-weighted mean of
    its children, as XGBoost's ``approx_contribs`` and shap's ``approximate=True`` use.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
    trees : slice or tuple of int, optional
        A slice of trees, or an ``(start, stop)`` range of boosting rounds.

    Returns
    -------
    Attribution
    """
    return _path_attribution(model, X, trees, "mean")
