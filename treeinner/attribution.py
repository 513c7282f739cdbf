"""Per-row attributions: PreDecomp (regularized node values) and Saabas (cover-weighted means)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import _api, _calls, _input, _stats
from ._api import public
from ._dask import is_dask, map_rows
from ._errors import InputError, InputTypeError
from ._staged import _staged, _weights
from .adapters import from_model
from .ensemble import TreeEnsemble
from .kernels import attribution as K

#: The attributions with node values (TreeSHAP has none).
PATH_ATTRIBUTIONS = ("predecomp", "saabas")


__all__ = ["Attribution", "node_values", "predecomp", "saabas"]


def _label_column(col: pd.Series, name: str) -> tuple[np.ndarray, list[str]]:
    """A categorical, string or object column as float codes (NaN missing) and the labels of
    the codes: a pandas categorical's own codes and categories; otherwise the distinct values
    as strings, sorted, coded in that order (as ``col.astype(str).astype("category")``)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.float64)
        codes[codes < 0] = np.nan
        return codes, [str(c) for c in col.cat.categories]
    scalar = (str, bytes, int, float, np.number, np.bool_)
    try:
        found, distinct = pd.factorize(col, use_na_sentinel=True)  # -1 where missing
        bad = {type(v).__name__ for v in distinct if not isinstance(v, scalar)}
    except TypeError:  # unhashable values
        bad = {type(v).__name__ for v in col.dropna() if not isinstance(v, scalar)}
    if bad:
        raise InputError(
            f"Column {name!r} of X is neither numeric, string nor categorical: it holds "
            f"{', '.join(sorted(bad))} values."
        )
    labels = np.array([str(v) for v in distinct] + [""])[:-1]  # str dtype even when empty
    categories, sorted_code = np.unique(labels, return_inverse=True)
    codes = np.full(found.shape[0], np.nan)
    present = found >= 0
    codes[present] = sorted_code.reshape(-1)[found[present]]
    return codes, [str(c) for c in categories]


def _feature_matrix(feature_names: Any, X: Any, n: int) -> tuple[np.ndarray, dict[int, list]]:
    """X as a float (n, p) matrix in the attribution's feature order (DataFrame columns matched
    by name, NaN missing), and the labels of its categorical columns by column index.

    Categorical columns (pandas categoricals, string and object columns that are not numbers,
    pyarrow dictionaries) become codes: a categorical's own codes, otherwise those of its
    distinct values sorted as strings; the labels are the category values as strings. A 2-D
    object array is read as a DataFrame with the attribution's feature names as columns."""
    names = [str(f) for f in feature_names]
    p = len(names)
    cats: dict[int, list] = {}
    X = _input.to_pandas(X)
    if not isinstance(X, pd.DataFrame) and not (hasattr(X, "tocoo") and hasattr(X, "nnz")):
        arr = np.asarray(X)
        if arr.dtype == object and arr.ndim == 2 and arr.shape[1] == p:
            X = pd.DataFrame(arr, columns=names)
    if isinstance(X, pd.DataFrame):
        cols = [str(c) for c in X.columns]
        missing = [f for f in names if f not in cols]
        if missing:
            raise InputError(
                f"X has no column for the features {missing[:10]}"
                f"{' ...' if len(missing) > 10 else ''}."
            )
        frame = X.set_axis(cols, axis=1)
        out = np.empty((X.shape[0], p))
        for j, name in enumerate(names):
            col = frame[name]
            if isinstance(col, pd.DataFrame):
                raise InputError(f"X has more than one column named {name!r}.")
            if not isinstance(col.dtype, pd.CategoricalDtype):
                try:
                    out[:, j] = pd.to_numeric(col).to_numpy(dtype=np.float64, na_value=np.nan)
                    continue
                except (TypeError, ValueError):
                    pass
            out[:, j], cats[j] = _label_column(col, name)
    elif hasattr(X, "tocoo") and hasattr(X, "nnz"):  # scipy sparse: absent entries missing
        coo = X.tocoo()
        out = np.full(coo.shape, np.nan)
        out[coo.row, coo.col] = coo.data
    else:
        try:
            out = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(
                "X must be numeric: a 2-D array, a DataFrame or a scipy sparse matrix."
            ) from None
    if out.shape != (n, p):
        raise InputError(
            f"X has shape {out.shape}, but the attribution explains {n} rows of {p} features."
        )
    return out, cats


def _output_index(output: Any, n_outputs: int) -> int:
    """``output``, checked to be an output (class) of an attribution with ``n_outputs``."""
    if (
        isinstance(output, bool)
        or not isinstance(output, (int, np.integer))
        or not 0 <= output < n_outputs
    ):
        raise InputError(
            f"output must be an int in [0, {n_outputs}) for this attribution with "
            f"{n_outputs} output(s), got {output!r}."
        )
    return int(output)


def _positive_int(name: str, v: Any) -> int:
    """``v`` as an int, checked to be a positive integer (the argument ``name``)."""
    return _api.check_count(name, v)


@dataclass(frozen=True)
class Attribution:
    """Per-row, per-feature attributions.

    Attributes
    ----------
    values : ndarray of shape (n_samples, n_features) or (n_samples, n_features, n_outputs)
        Contribution of each feature to each row's margin. For Dask input, a lazy Dask
        array with one chunk of rows per partition of the input (``.compute()`` it, or
        reduce it first: ``abs(values).mean(axis=0)``).
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

    @public
    def to_frame(self, *, output: int | None = None) -> pd.DataFrame:
        """The values as a DataFrame with one column per feature.

        Parameters
        ----------
        output : int, optional
            For multi-output attributions, which output (class) to return; required there.

        Returns
        -------
        pandas.DataFrame
            A lazy Dask DataFrame when the values are a Dask array (Dask input).
        """
        v = self.values
        if v.ndim == 3:
            if output is None:
                raise InputError(
                    f"This attribution has {v.shape[2]} outputs; pass output= to pick one."
                )
            v = v[:, :, _output_index(output, v.shape[2])]
        elif output is not None:
            _output_index(output, 1)
        if is_dask(v):
            import dask.dataframe as dd

            return dd.from_dask_array(v, columns=list(self.feature_names))
        return pd.DataFrame(v, columns=list(self.feature_names), index=self.index)

    @public
    def to_shap(self, X: Any = None, *, output: int | None = None) -> Any:
        """The attributions as a ``shap.Explanation``, so shap's own plots work on them.

        Parameters
        ----------
        X : array-like, DataFrame or scipy sparse matrix, optional
            The explained rows, stored as the explanation's ``data`` (shap colours its
            beeswarm by it), a float (n, p) array. DataFrame columns are matched by feature
            name. Categorical columns (pandas ``category``, ``object`` and string columns that
            are not numbers, pyarrow dictionaries) become codes in ``data``: a categorical's own
            category codes, otherwise the codes of its distinct values sorted as strings (as
            ``X[c].astype(str).astype("category")``); missing values NaN. Then
            ``display_data`` is an (n, p) object array of the same rows holding the category
            labels in those columns, which shap's waterfall, force and scatter plots show
            (slicing the explanation slices it with ``data``). Absent sparse entries become NaN
            (missing, as the models read them).
        output : int, optional
            For multi-output attributions, the output (class) to keep. By default all outputs
            are kept: ``values`` of shape (n, p, K), ``base_values`` (n, K) and
            ``output_names`` ``class_0 ..``, as shap's ``TreeExplainer`` returns them.

        Returns
        -------
        shap.Explanation
            ``values``, ``base_values`` (the bias of every row, so that ``values.sum(axis=1) +
            base_values`` is the margin), ``data``, ``display_data`` (None without categorical
            columns) and ``feature_names``.

        Raises
        ------
        ImportError
            If shap is not installed.
        ValueError
            If ``output`` is not an output of the attribution, or X does not hold the explained
            rows (shape, missing feature columns, a column neither numeric, string nor
            categorical).
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
                k = _output_index(output, v.shape[2])
                v, base = v[:, :, k], np.full(n, bias[k])
        else:
            if output is not None:
                _output_index(output, 1)
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

    @public
    def importance(self, *, sample_weight: Any = None, alpha: float = 0.05) -> pd.DataFrame:
        """Mean |attribution| of every feature over the rows (the SHAP bar plot's numbers),
        with its standard error over the rows and a ``1 - alpha`` interval.

        The score of feature k is the weighted mean ``S_k = sum_i w_i |v_ik| / sum_i w_i``
        (the ``abs_*`` methods of ``treeinner.importance`` on the same rows); its standard
        error is that of a mean over rows drawn independently from the same population,
        from the linearised per-row terms ``w_i (|v_ik| - S_k) / sum_i w_i``:
        ``sqrt(n/(n-1) sum_i (d_ik - mean d_k)^2)`` (``treeinner._stats``). The model is held
        fixed. No p-value: a mean of absolute values is not tested against 0 (for held-out
        evidence that a feature helps, use TreeInner in ``treeinner.significance``).

        Parameters
        ----------
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the rows (default: all 1).
        alpha : float, default 0.05
            The interval is ``score +- z_{1 - alpha/2} se``.

        Returns
        -------
        pandas.DataFrame
            One row per feature (for multi-output attributions per output and feature, the
            outputs being ``class_0`` .. and ``total``, the sum over the outputs), with columns
            ``feature`` (``output``), ``score``, ``se``, ``ci_low``, ``ci_high``: the layout of
            ``treeinner.significance``, so ``treeinner.plot.importance`` draws it.

        Examples
        --------
        >>> attr = treeinner.tree_shap(model, X_valid)  # doctest: +SKIP
        >>> attr.importance().sort_values("score", ascending=False)  # doctest: +SKIP
        """
        alpha = _api.check_alpha(alpha)
        v = np.asarray(self.values, dtype=np.float64)
        rows = np.abs(v if v.ndim == 3 else v[:, :, None])
        w = None if sample_weight is None else _weights(sample_weight, rows.shape[0])
        est = _stats.moments_from_rows(rows, w).estimate(mean=True)
        outputs = None if v.ndim == 2 else [f"class_{c}" for c in range(v.shape[2])]
        table = _stats.table({"abs": est}, {}, list(self.feature_names), outputs, alpha)
        return table.drop(columns=["method", "p_value", "q_value"])

    def _data(self, X: Any, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """X as a float (n, p) matrix in the attribution's feature order, and, where it has
        categorical columns, the same rows as an (n, p) object array to display: the category
        labels (str) in those columns, NaN where missing, the floats elsewhere."""
        out, cats = _feature_matrix(self.feature_names, X, n)
        if not cats:
            return out, None
        display = out.astype(object)
        for j, labels in cats.items():
            lab = np.array(labels + [np.nan], dtype=object)
            codes = out[:, j]
            display[:, j] = lab[np.where(np.isnan(codes), len(labels), codes).astype(np.int64)]
        return out, display


def _tree_range(ens: TreeEnsemble, iteration_range: Any) -> tuple[int, int]:
    """An ``iteration_range=(start, stop)`` of boosting rounds -> tree indices ``lo, hi``
    (``stop=0`` means all rounds, as ``TreeEnsemble.predict_margin``)."""
    if iteration_range is None:
        return 0, ens.n_trees
    if (
        isinstance(iteration_range, (str, bytes, slice))
        or not hasattr(iteration_range, "__len__")
        or len(iteration_range) != 2
        or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in iteration_range
        )
    ):
        raise InputTypeError(
            "iteration_range must be None or (start, stop): two ints, boosting rounds "
            f"start..stop-1 (stop=0 means all rounds), got {iteration_range!r}."
        )
    start, stop = (int(v) for v in iteration_range)
    return ens._tree_range((start, stop))


def _reference(reference: Any) -> tuple[Any, Any, Any]:
    """``(X, y)`` or ``(X, y, sample_weight)`` -> ``(X, y, sample_weight or None)``."""
    if not isinstance(reference, (tuple, list)) or len(reference) not in (2, 3):
        raise InputError(
            "reference must be (X_train, y_train) or (X_train, y_train, sample_weight), got "
            f"{type(reference).__name__}"
            f"{f' of length {len(reference)}' if isinstance(reference, (tuple, list)) else ''}."
        )
    _api.check_rows(reference[0], "reference's X_train")
    return reference[0], reference[1], reference[2] if len(reference) == 3 else None


def data_sums(ens: TreeEnsemble, reference: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """The training statistics of every node from ``reference``: G_t and H_t, the staged
    gradient and hessian sums over the reference rows reaching t (for every node, leaves
    included), and lambda as the booster applied it to these rows (CatBoost scales it by the
    mean sample weight)."""
    Xr, yr, wr = _reference(reference)
    G, H, _, _, _ = _staged(ens, Xr, yr, wr)
    Gs = np.empty(ens.n_nodes)
    Hs = np.empty(ens.n_nodes)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, G, Gs)
    K.subtree_sums(ens.left, ens.right, ens.tree_offsets, H, Hs)
    lam = float(ens.reg_lambda)
    if wr is not None and ens.l2_scaled_by_mean_weight:
        # the booster scaled l2 by its training set's mean sample weight (CatBoost)
        w = np.asarray(wr, dtype=np.float64)
        lam = lam * float(np.mean(w)) if w.size else lam
    return Gs, Hs, lam


def _data_values(ens: TreeEnsemble, reference: Any) -> np.ndarray:
    """PreDecomp's p(t) = -lr G_t / (H_t + lambda) with G_t, H_t summed over ``reference``."""
    Gs, Hs, lam = data_sums(ens, reference)
    lr = ens.learning_rate[ens._node_tree]
    den = Hs + lam
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, -lr * Gs / den, 0.0)


#: How the messages name the boosters (``TreeEnsemble.source``).
_BOOSTER_NAMES = {
    "catboost": "CatBoost",
    "xgboost": "XGBoost",
    "lightgbm": "LightGBM",
    "sklearn": "scikit-learn",
}


class NeedsReference(InputError):
    """A computation needs the training data (``reference=``) for a model that stores no
    hessian covers.

    ``str(e)`` is ``"{caller} needs the training data for {what}: {call}"``, naming the
    public function called and how to pass its ``reference=``; ``what`` (the model and why)
    lets a caller in another language (the command line) give its own spelling.
    """

    def __init__(self, caller: str, what: str, call: str) -> None:
        self.caller, self.what, self.call = caller, what, call
        super().__init__(f"{caller} needs the training data for {what}: {call}")


def _public_call() -> tuple[str, str]:
    """The public function the user called (the outermost public call in progress that takes
    ``reference=``) and how to call it with the training data; ``node_values`` outside any."""
    call = _calls.outermost("reference")
    if call is None:
        return "node_values", "node_values(model, reference=(X_train, y_train))"
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(call.fn).parameters
    data = [p for p, v in params.items() if v.kind in kinds and p != "self"]
    return (
        call.name.rsplit(".", 1)[-1],
        f"{call.name}({', '.join([*data, 'reference=(X_train, y_train)'])})",
    )


def _needs_reference(ens: TreeEnsemble) -> NeedsReference:
    """The error for PreDecomp node values of a model without stored covers, naming the
    public function called and its ``reference=``."""
    caller, call = _public_call()
    booster = _BOOSTER_NAMES.get(ens.source, ens.source)
    what = f"this {booster} {ens.objective} model (it stores no hessian covers)"
    return NeedsReference(caller, what, call)


@public
def node_values(model: Any, *, attribution: str = "predecomp", reference: Any = None) -> np.ndarray:
    """p(t) of every node, the node values a path attribution is built from (METHODS.md).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    attribution : {"predecomp", "saabas"}, default "predecomp"
        ``"predecomp"``: PreDecomp's p(t) = [(H_L + lambda) p(L) + (H_R + lambda) p(R)] /
        (H_t + lambda), from the leaves and the stored hessian covers; ``"saabas"``: Saabas'
        cover-weighted means (lambda = 0), weighted by the booster's leaf weights (the
        ensemble's ``count``, CatBoost's sample weight sums, as shap's ``TreeExplainer``
        weights CatBoost's splits) where the model stores no hessian covers. TreeSHAP has no
        node values.
    reference : tuple, optional
        ``(X_train, y_train)`` or ``(X_train, y_train, sample_weight)``, normally the training
        set: PreDecomp's p(t) = -lr G_t / (H_t + lambda) with G_t, H_t summed over these rows
        with the staged gradients (for every node, leaves included), instead of the stored
        covers. Needed for PreDecomp on models that store no covers (CatBoost beyond RMSE).
        Only with ``attribution="predecomp"``.

    Returns
    -------
    ndarray of float64, shape (n_nodes,)

    Raises
    ------
    ValueError
        For another attribution, ``reference`` with ``"saabas"``, or PreDecomp on a model
        without stored covers and no ``reference`` (``NeedsReference``, naming the function
        called and its ``reference=``).
    """
    _api.check_attribution(attribution, PATH_ATTRIBUTIONS)
    ens = from_model(model)
    if reference is not None:
        if attribution != "predecomp":
            raise InputError(
                "reference= recomputes PreDecomp node values from data; "
                f"attribution={attribution!r} does not take it (use attribution='predecomp')."
            )
        return _data_values(ens, reference)
    cover = ens.cover
    if np.any(~np.isfinite(cover)):
        if attribution == "predecomp":
            raise _needs_reference(ens)
        if not np.all(np.isfinite(ens.count)):
            raise InputError(
                f"The {ens.source} model stores neither hessian covers nor leaf weights, so "
                "Saabas has no node values; use attribution='predecomp' with the training "
                "data (reference=)."
            )
        # Saabas' means weighted by the booster's leaf weights (CatBoost's sample weight
        # sums, as shap's TreeExplainer weights them) where no hessian covers are stored
        cover = ens.count
    lam = ens.reg_lambda if attribution == "predecomp" else 0.0
    out = np.empty(ens.n_nodes)
    K.node_values(ens.left, ens.right, ens.tree_offsets, ens.value, cover, lam, out)
    return out


def path_attribution(
    ens: TreeEnsemble, X: Any, p: np.ndarray, iteration_range: Any = None
) -> Attribution:
    """The path attribution of node values ``p`` (PreDecomp's or Saabas'); for a Dask
    collection X, with lazy values (a Dask array, one chunk per partition)."""
    lo, hi = _tree_range(ens, iteration_range)
    if is_dask(X):
        n_out = len(ens.output_names)
        tail = (n_out,) if ens.n_outputs == 1 else (n_out, ens.n_outputs)
        values = map_rows(_path_rows, (ens, p, iteration_range), X, tail)
        return Attribution(
            values=values, bias=_path_bias(ens, p, lo, hi), feature_names=ens.output_names
        )
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
    out = ens._to_output(out, axis=1)
    values = out[:, :, 0] if ens.n_outputs == 1 else out
    index = X.index if isinstance(X, pd.DataFrame) else None
    bias = _path_bias(ens, p, lo, hi)
    return Attribution(values=values, bias=bias, feature_names=ens.output_names, index=index)


def _path_bias(ens: TreeEnsemble, p: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The margin no feature explains: the base margin plus the root values of trees lo:hi."""
    bias = ens.base_margin.copy()
    np.add.at(bias, ens.tree_group[lo:hi], p[ens.tree_offsets[lo:hi]])
    return bias


def _path_rows(shared: tuple, X: Any) -> np.ndarray:
    """``path_attribution``'s values on one partition of a Dask collection."""
    ens, p, iteration_range = shared
    return path_attribution(ens, X, p, iteration_range).values


@public
def predecomp(
    model: Any,
    X: Any,
    *,
    iteration_range: tuple[int, int] | None = None,
    reference: Any = None,
) -> Attribution:
    """PreDecomp: per-row feature attributions from regularized node values.

    Node values are p(t) = -lr G_t / (H_t + lambda), computed from the leaves and the stored
    hessian covers; a row's attribution to feature k in one tree is the sum of
    p(child) - p(parent) over the splits on feature k along its path (Sun 2022, Definition 1).

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
    iteration_range : tuple of (int, int), optional
        Explain only the trees of boosting rounds ``start .. stop - 1`` (every class's trees
        and parallel trees of a round), as ``TreeEnsemble.predict_margin(X,
        iteration_range=...)``; ``stop=0`` means all rounds. Default: every tree.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``: recompute the node values from this data with
        staged gradients (``node_values(model, reference=...)``) instead of the stored covers.
        Local accuracy then holds only where the data reproduce the model's leaves.

    Returns
    -------
    Attribution
        ``values.sum(axis=1) + bias`` equals the margin of the trees used.
    """
    ens = from_model(model)
    p = node_values(ens, attribution="predecomp", reference=reference)
    return path_attribution(ens, X, p, iteration_range)


@public
def saabas(model: Any, X: Any, *, iteration_range: tuple[int, int] | None = None) -> Attribution:
    """Saabas: per-row attributions from cover-weighted mean node values.

    The same path decomposition as ``predecomp`` with p(t) the hessian-weighted mean of
    its children, as XGBoost's ``approx_contribs`` and shap's ``approximate=True`` use. For
    models that store no hessian covers (CatBoost classifiers) the weights are the booster's
    leaf weights (``node_values(model, attribution="saabas")``): no training data is needed.

    Parameters
    ----------
    model, X, iteration_range
        As for ``predecomp``: the model, the rows to explain and the boosting rounds whose
        trees are explained (default: every tree).

    Returns
    -------
    Attribution
        As for ``predecomp``: ``values.sum(axis=1) + bias`` is the margin of the trees used.
    """
    ens = from_model(model)
    return path_attribution(ens, X, node_values(ens, attribution="saabas"), iteration_range)
