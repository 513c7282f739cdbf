"""The baselines that need no attribution: the booster's stored split gain, and permutation
importance."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import _api, _input
from ._api import public
from ._dask import is_dask, map_add, partitions, row_counts
from ._staged import _weights
from .adapters import from_model
from .attribution import data_sums
from .ensemble import TreeEnsemble
from .objectives import Objective, get_objective

__all__ = ["total_gain"]


def reference_gains(ens: TreeEnsemble, reference: Any) -> np.ndarray:
    """The split gain of every node from the training data ``reference``:
    ``G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G_t^2 / (H_t + lambda)`` with G, H
    the staged gradient and hessian sums over the reference rows (``attribution.data_sums``,
    the statistics PreDecomp's node values from ``reference`` use); a term whose
    ``H + lambda`` is not positive is 0. NaN at the leaves."""
    G, H, lam = data_sums(ens, reference)
    den = H + lam
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(den > 0, G * G / den, 0.0)
    inner = np.flatnonzero(ens.left >= 0)
    gain = np.full(ens.n_nodes, np.nan)
    gain[inner] = score[ens.left[inner]] + score[ens.right[inner]] - score[inner]
    return gain


def total_gain_scores(ens: TreeEnsemble, reference: Any = None) -> np.ndarray:
    """Split gains summed per output feature and output: (n_output_features, n_outputs); the
    stored gains, or with ``reference`` those computed from the training data
    (``reference_gains``)."""
    gain = ens.gain if reference is None else reference_gains(ens, reference)
    inner = np.flatnonzero(ens.left >= 0)
    tree = ens._node_tree[inner]
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[tree]), gain[inner])
    return ens._to_output(out)


@public
def total_gain(model: Any, *, reference: Any = None) -> pd.Series | pd.DataFrame:
    """The booster's split gains summed per feature.

    For XGBoost this is ``get_score(importance_type="total_gain")`` (features never used
    score 0). Models that store no split gains (CatBoost) give NaN, unless ``reference``
    is given.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    reference : tuple, optional
        ``(X_train, y_train)`` or ``(X_train, y_train, sample_weight)``, the training data:
        the gains are computed from it instead of read from the model, every split's
        ``G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G^2 / (H + lambda)`` with G, H
        the sums of the staged gradients and hessians over the rows reaching each node (the
        statistics of ``node_values(model, reference=...)``). This equals TreeInner with
        PreDecomp evaluated on the same data, ``tree_inner(model, X_train, y_train,
        reference=(X_train, y_train))``, and, for a booster that stores its gains and was
        trained on exactly these rows without row subsampling, the stored gains (XGBoost's
        to float32 rounding).

    Returns
    -------
    pandas.Series, or a DataFrame per class plus ``total`` for multi-output models.

    Examples
    --------
    >>> treeinner.total_gain(catboost_classifier, reference=(X_train, y_train))  # doctest: +SKIP
    """
    ens = from_model(model)
    scores = total_gain_scores(ens, reference)
    return _api.per_output(ens, scores, "total_gain", credited=True)


#: Bytes of permuted column values drawn at once: the (feature, repeat) pairs of permutation
#: importance are taken in batches of this many values, each one pass over the rows.
PERMUTED_BYTES = 1 << 28


def permutation_scores(
    ens: TreeEnsemble, X: Any, y: Any, sample_weight: Any, n_repeats: int, random_state: Any
) -> np.ndarray:
    """Mean increase of the loss when a column is permuted, over ``n_repeats`` permutations:
    (n_output_features, 1) (the loss is over all outputs at once; output features no split
    uses score 0).

    Every (feature, repeat) pair draws ``rng.permutation(n)`` over all n rows, in the order
    features ascending, repeats within, so a Dask collection X gives the in-memory result
    for the same ``random_state`` whatever its partitioning: the permuted column is drawn
    where the random numbers are, cut along X's partitions and sent to them, and the loss
    sums come back to be added. Models that route rows through their booster (an
    ``input_map``: CatBoost's categorical splits) get the columns of the raw X permuted
    (DataFrame columns matched by name like the input map does, else by position), each
    then routed again."""
    n_repeats = _api.check_count("n_repeats", n_repeats)
    obj = get_objective(ens)
    used = np.zeros((ens.n_features, 1))
    used[ens.feature[ens.left >= 0], 0] = 1.0
    credited = np.flatnonzero(ens._to_output(used)[:, 0] > 0)
    unit_feature = np.repeat(credited, n_repeats)  # the (feature, repeat) pairs, in draw order
    rng = _api.generator(random_state)
    run = _dask_permutation if is_dask(X) else _memory_permutation
    base, weight, sums = run(ens, obj, X, y, sample_weight, unit_feature, rng)
    out = np.zeros((len(ens.output_names), 1))
    np.add.at(out[:, 0], unit_feature, (sums - base) / weight)
    return out / n_repeats


def _batches(n_units: int, n: int) -> list[slice]:
    """The (feature, repeat) pairs cut into batches of at most ``PERMUTED_BYTES`` values."""
    step = max(1, PERMUTED_BYTES // (8 * max(n, 1)))
    return [slice(a, min(a + step, n_units)) for a in range(0, n_units, step)]


def _draw(columns: dict[int, np.ndarray], features: np.ndarray, rng: Any) -> list[np.ndarray]:
    """Each feature's column permuted by a fresh ``rng.permutation(n)``, in order."""
    return [columns[j][rng.permutation(len(columns[j]))] for j in features]


class _Rows:
    """Rows whose columns permutation importance replaces, one at a time, to predict again:
    the model's float columns, or the raw X of a model with an ``input_map``."""

    def __init__(self, ens: TreeEnsemble, X: Any) -> None:
        self.ens = ens
        self.frame = False
        self.data: Any  # float rows, or (input map) the raw rows: a DataFrame or objects
        if ens.input_map is None:
            self.n, blocks = ens._blocks(X)
            self.data = _input.join_blocks(blocks, ens.n_features)
            if self.data is X or self.data.base is not None:  # the caller's rows, or a view
                self.data = self.data.copy()  # of them: changed here, never in place
            self.pos = list(range(ens.n_features))
            return
        X = _input.to_pandas(X)  # polars, pyarrow: matched by name too
        self.n = _api.n_rows(X)
        names = list(ens.output_names)
        self.pos = list(range(len(names)))
        if isinstance(X, pd.DataFrame):
            self.frame = True
            by_name = [str(c) for c in X.columns]
            if set(names) <= set(by_name) and len(set(by_name)) == len(by_name):
                self.pos = [by_name.index(f) for f in names]
            self.data = X.copy()
        else:
            self.data = np.array(X, dtype=object)

    def column(self, j: int) -> np.ndarray:
        """The values of output feature ``j``'s column."""
        if self.frame:
            return self.data.iloc[:, self.pos[j]].to_numpy()
        return self.data[:, self.pos[j]].copy()

    def loss_sum(self, obj: Objective, y: np.ndarray, w: np.ndarray | None) -> float:
        per = obj.losses(y, self.ens.predict_margin(self.data))
        return float(per.sum() if w is None else w @ per)

    def loss_sums(
        self,
        obj: Objective,
        y: np.ndarray,
        w: np.ndarray | None,
        features: np.ndarray,
        values: list[np.ndarray],
    ) -> np.ndarray:
        """The loss sums with column ``features[k]`` replaced by ``values[k]``, each in turn
        (the rows are left as they were)."""
        out = np.empty(len(features))
        for k, (j, v) in enumerate(zip(features, values, strict=True)):
            p = self.pos[j]
            if self.frame:
                col = self.data.iloc[:, p]
                self.data.isetitem(p, pd.Series(v, index=self.data.index, dtype=col.dtype))
            else:
                col = self.data[:, p].copy()
                self.data[:, p] = v
            try:
                out[k] = self.loss_sum(obj, y, w)
            finally:
                if self.frame:
                    self.data.isetitem(p, col)
                else:
                    self.data[:, p] = col
        return out


def _checked(obj: Objective, y: Any, sample_weight: Any, n: int) -> tuple:
    """The labels and row weights (None: all 1) of n rows, checked, and their total weight."""
    yv = obj.check_labels(y, n)
    w = None if sample_weight is None else _weights(sample_weight, n)
    return yv, w, float(n if w is None else w.sum())


def _memory_permutation(
    ens: TreeEnsemble,
    obj: Objective,
    X: Any,
    y: Any,
    sample_weight: Any,
    unit_feature: np.ndarray,
    rng: Any,
) -> tuple[float, float, np.ndarray]:
    """The base loss sum, total weight and loss sum of every (feature, repeat) pair on an
    in-memory X."""
    rows = _Rows(ens, X)
    yv, w, weight = _checked(obj, y, sample_weight, rows.n)
    base = rows.loss_sum(obj, yv, w)
    sums = np.empty(len(unit_feature))
    for batch in _batches(len(unit_feature), rows.n):
        feats = unit_feature[batch]
        columns = {j: rows.column(j) for j in np.unique(feats)}
        sums[batch] = rows.loss_sums(obj, yv, w, feats, _draw(columns, feats, rng))
    return base, weight, sums


def _dask_permutation(
    ens: TreeEnsemble,
    obj: Objective,
    X: Any,
    y: Any,
    sample_weight: Any,
    unit_feature: np.ndarray,
    rng: Any,
) -> tuple[float, float, np.ndarray]:
    """``_memory_permutation`` on a Dask collection X. Per batch of (feature, repeat) pairs
    the batch's columns are gathered and permuted here, over all rows, then cut along the
    partitions; one task per partition and feature computes its loss sums, and the sums are
    added in a tree (``_dask.map_add``)."""
    import dask

    parts = partitions(X, y, sample_weight)
    counts = row_counts(X, y, sample_weight)
    args = (ens, obj)
    base, weight = map_add(_partition_base, args, X, y, sample_weight, counts=counts)
    ends = np.cumsum(counts)
    starts = ends - np.asarray(counts)
    gather = dask.delayed(_partition_columns, pure=True)
    sums = np.empty(len(unit_feature))
    for batch in _batches(len(unit_feature), int(ends[-1])):
        feats = unit_feature[batch]
        js = np.unique(feats)
        gathered = dask.compute(*[gather(args, p, js) for p in parts])
        columns = {j: np.concatenate([c[k] for c in gathered]) for k, j in enumerate(js)}
        values = _draw(columns, feats, rng)
        by_feature = [np.flatnonzero(feats == j) for j in js]
        extra = [
            [(feats, units, [values[u][a:b] for u in units]) for units in by_feature]
            for a, b in zip(starts, ends, strict=True)
        ]
        sums[batch] = map_add(
            _partition_units, args, X, y, sample_weight, counts=counts, extra=extra
        )
    return base, weight, sums


def _partition_base(args: tuple, X: Any, y: Any, sample_weight: Any) -> np.ndarray:
    """The loss sum and the total weight of one partition."""
    ens, obj = args
    rows = _Rows(ens, X)
    yv, w, weight = _checked(obj, y, sample_weight, rows.n)
    return np.array([rows.loss_sum(obj, yv, w), weight])


def _partition_columns(args: tuple, X: Any, features: np.ndarray) -> list[np.ndarray]:
    rows = _Rows(args[0], X)
    return [rows.column(j) for j in features]


def _partition_units(args: tuple, X: Any, y: Any, sample_weight: Any, units: tuple) -> np.ndarray:
    """One partition's loss sums of some (feature, repeat) pairs of a batch (0 for the
    others): ``units`` is the batch's features, the pairs' positions in it and their
    permuted values on this partition's rows."""
    ens, obj = args
    feats, which, values = units
    rows = _Rows(ens, X)
    yv, w, _ = _checked(obj, y, sample_weight, rows.n)
    out = np.zeros(len(feats))
    out[which] = rows.loss_sums(obj, yv, w, feats[which], values)
    return out
