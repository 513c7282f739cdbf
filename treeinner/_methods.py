"""The method registry: every global importance treeinner computes, with what it needs and how
it adds up over rows.

``importance()``, ``select_features``, ``TreeInnerSelector``, the command line and the plots
read this table; none of them knows a method by name. Adding a method is one ``_register``
call: a function ``compute(ens, X, y, opts)`` returning scores of shape (n_output_features,
n_outputs) (or one column where the method has no per-output breakdown), and its flags.

``REGISTRY`` (``treeinner.METHODS``) holds the methods every consumer takes: per-feature
scores from the model, the rows and their labels (and optionally the training data). The
methods that need more, or give something else, are in ``OPTIONAL``
(``treeinner.OPTIONAL_METHODS``), computed by ``importance()`` and ``treeinner explain``
when named and refused by the other consumers with the reason: those that need a background
data set (``Method.needs_background``: TreeInner and ForestInner with interventional TreeSHAP,
``Options.background``) and the pairwise ones (``Method.pairwise``: scores of shape
(n_output_features, n_output_features, n_outputs), one per pair of features).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from . import _api, _calls, _stats
from ._centred import centred_initial_moments, centred_initial_sums
from ._dask import is_dask, map_add
from ._errors import InputError
from ._gain import permutation_scores, total_gain_scores
from ._inner import (
    INTERVENTIONAL,
    forest_inner_initial_moments,
    forest_inner_initial_sums,
    forest_inner_moments,
    forest_inner_sums,
    inner_values,
    tree_inner_moments,
    tree_inner_sums,
)
from ._staged import _weights
from ._stats import Estimate, Moments, moments_from_rows
from .attribution import path_attribution
from .ensemble import TreeEnsemble
from .interactions import _interaction_inner
from .objectives import get_objective
from .treeshap import tree_shap
from .unbiased import _exact_ratios, _training_sums, _unbiased_estimate, unbiased_gain

__all__ = [
    "DEFAULT_CLI_METHODS",
    "DEFAULT_METHODS",
    "RECOMMENDED_METHOD",
    "METHODS",
    "OPTIONAL",
    "OPTIONAL_METHODS",
    "REGISTRY",
    "Method",
    "Options",
    "get",
    "resolve",
    "significance_table",
]


@dataclass
class Options:
    """The settings of one call, shared by every method it computes.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), optional
        Weights of the evaluation rows.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``, for the methods that use training data.
    random_state : int, numpy Generator or None
        Seed of the methods that draw random numbers.
    n_repeats : int
        Permutations per feature of ``permutation``.
    background : array-like, optional
        The background rows of the methods with interventional TreeSHAP
        (``Method.needs_background``).
    """

    sample_weight: Any = None
    reference: Any = None
    random_state: Any = None
    n_repeats: int = 5
    background: Any = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def once(self, key: tuple, keep: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per Options and ``key``, so that chunks of rows and bootstrap
        resamples reuse it; ``keep`` holds the objects whose ids are in the key (so the ids
        stay theirs)."""
        if key not in self._cache:
            self._cache[key] = (keep, compute())
        return self._cache[key][1]

    def node_values(self, ens: TreeEnsemble, attribution: str) -> np.ndarray | None:
        """Node values of ``attribution`` (PreDecomp from ``reference`` when given), computed
        once per Options and ensemble."""
        reference = self.reference if attribution == "predecomp" else None
        return self.once(
            ("values", id(ens), attribution),
            (ens,),
            lambda: inner_values(ens, attribution, reference),
        )


@dataclass(frozen=True)
class Method:
    """One global importance method.

    Attributes
    ----------
    name : str
        Its name: the column of ``treeinner.importance``.
    summary : str
        One line saying what it is.
    compute : callable
        ``compute(ens, X, y, opts)`` -> ndarray of shape (n_output_features, n_outputs), or
        (n_output_features, 1) for methods with no per-output breakdown. For a row-additive
        method: the (weighted) sum over the rows of X of per-row terms.
    needs_y : bool
        Whether it needs labels.
    row_additive : bool
        Whether ``compute`` on disjoint sets of rows adds up to ``compute`` on their union,
        so it can be computed in chunks, resampled by row weights and distributed.
    mean : bool
        Whether the score is the row-additive sum divided by the total row weight.
    uses_reference : bool
        Whether ``Options.reference`` (training data) changes the result.
    uses_random_state : bool
        Whether it draws random numbers.
    uses_data : bool
        Whether it depends on the evaluation rows at all (``total_gain`` does not).
    signed : bool
        Whether a score <= 0 means "no better than useless" (TreeInner, ForestInner, unbiased
        gain, permutation), so that a p-value for it means something; mean |attribution| is
        positive for every feature the model uses, and gets no p-value.
    resample : callable, optional
        ``resample(ens, X, y, opts, counts, seed)``: the scores on the bootstrap resample in
        which row i counts ``counts[i]`` times, where the method has a better way than the
        default (``opts.sample_weight`` multiplied by the counts, ``random_state=seed``).
    moments : callable, optional
        ``moments(ens, X, y, opts)`` -> ``_stats.Moments``: the sums of the per-row terms of
        a row-additive method and of their squares, from which its sampling error follows
        (``compute`` is ``moments(...).s1``, faster where the squares are not needed).
    estimator : callable, optional
        ``estimator(ens, X, y, opts)`` -> ``_stats.Estimate``: score and sampling variance of
        a method that is not a plain sum over rows (the unbiased gain).
    takes_dask : bool
        Whether ``compute`` and ``estimator`` take a Dask collection X themselves (a method
        that is not row-additive; row-additive ones are mapped over the partitions, and every
        method on data is one or the other).
    family : str
        ``tree_inner``, ``forest_inner``, ``abs``, ``total_gain``, ``permutation`` or
        ``unbiased_gain``.
    attribution : str or None
        The per-tree attribution it is built on, if any.
    needs_background : bool
        Whether it needs ``Options.background`` (interventional TreeSHAP); such a method is in
        ``OPTIONAL``.
    pairwise : bool
        Whether its scores are per pair of output features: ``compute`` returns (and ``score``
        gives) shape (n_output_features, n_output_features, n_outputs); such a method is in
        ``OPTIONAL``, has no standard error and is computed alone.
    combinations_by_shapley : bool
        Whether it credits a split on a combination of features (CatBoost's CTR
        combinations) to them by Shapley values over permutations (``_shapley_credit``),
        rather than equally.
    """

    name: str
    summary: str
    compute: Callable[[TreeEnsemble, Any, Any, Options], np.ndarray]
    needs_y: bool = True
    row_additive: bool = False
    mean: bool = False
    uses_reference: bool = False
    uses_random_state: bool = False
    uses_data: bool = True
    signed: bool = True
    resample: Callable[..., np.ndarray] | None = None
    moments: Callable[[TreeEnsemble, Any, Any, Options], Moments] | None = None
    estimator: Callable[[TreeEnsemble, Any, Any, Options], Estimate] | None = None
    takes_dask: bool = False
    family: str = ""
    attribution: str | None = None
    needs_background: bool = False
    pairwise: bool = False
    combinations_by_shapley: bool = False

    def score(self, ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
        """The finished scores on all rows of X: (n_output_features, n_outputs) (or one
        column). X may be a Dask collection."""
        if self.uses_data and is_dask(X) and not self.takes_dask:
            sums, weight = self._by_partition(_partition_score, ens, X, y, opts)
            return self.finish(sums, weight if weight > 0 else 1.0)
        sums = self.compute(ens, X, y, opts)
        return self.finish(sums, total_weight(X, opts.sample_weight) if self.mean else 1.0)

    def _by_partition(
        self, fn: Callable[..., Any], ens: TreeEnsemble, X: Any, y: Any, opts: Options
    ) -> Any:
        """``fn`` of this method on every partition of the Dask collection X, added up
        (``_dask.map_add``); the node values the method needs are computed once, here."""
        values = None
        if self.attribution in ("predecomp", "saabas"):
            values = opts.node_values(ens, self.attribution)
        base = replace(opts, sample_weight=None, _cache={})
        return map_add(fn, (self.name, ens, base, values), X, y, opts.sample_weight)

    def finish(self, sums: np.ndarray, weight: float) -> np.ndarray:
        """Scores from row-additive ``compute`` sums over rows of total weight ``weight``."""
        return sums / weight if self.mean else sums

    @property
    def has_se(self) -> bool:
        """Whether the method gives a sampling error from one pass (``estimate``)."""
        return self.moments is not None or self.estimator is not None

    def estimate(self, ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Estimate | None:
        """Score and sampling variance on the rows of X (None for a method without one)."""
        if self.estimator is not None:
            return self.estimator(ens, X, y, opts)
        if self.moments is not None:
            if is_dask(X):
                return self._by_partition(_partition_moments, ens, X, y, opts).estimate(self.mean)
            return self.moments(ens, X, y, opts).estimate(self.mean)
        return None


def _partition_opts(shared: tuple, X: Any, sample_weight: Any) -> tuple:
    """The method, ensemble and Options of one partition of a ``Method._by_partition`` pass,
    with the node values computed before it."""
    name, ens, base, values = shared
    method = get(name)
    opts = replace(base, sample_weight=sample_weight, _cache={})
    if values is not None:
        opts.once(("values", id(ens), method.attribution), (ens,), lambda: values)
    return method, ens, opts


def _partition_score(shared: tuple, X: Any, y: Any, sample_weight: Any) -> tuple:
    """A row-additive method's sums on one partition, and the partition's total weight."""
    method, ens, opts = _partition_opts(shared, X, sample_weight)
    return method.compute(ens, X, y, opts), _row_weight(X, sample_weight)


def _partition_moments(shared: tuple, X: Any, y: Any, sample_weight: Any) -> Moments:
    method, ens, opts = _partition_opts(shared, X, sample_weight)
    return method.moments(ens, X, y, opts)


def significance_table(
    estimates: dict[str, Estimate | None],
    scores: dict[str, np.ndarray],
    feature_names: Sequence[str],
    n_outputs: int,
    alpha: float,
) -> pd.DataFrame:
    """``_stats.table`` of registry methods: outputs named ``class_c`` for multi-output
    models, no p- or q-values for the unsigned methods (mean |attribution|)."""
    outputs = None if n_outputs == 1 else [f"class_{c}" for c in range(n_outputs)]
    unsigned = [name for name in estimates if not get(name).signed]
    return _stats.table(estimates, scores, feature_names, outputs, alpha, unsigned)


def total_weight(X: Any, sample_weight: Any) -> float:
    """Total weight of the rows of X: the sum of ``sample_weight``, or the row count; 1 for no
    rows (a mean over nothing is 0)."""
    w = _row_weight(X, sample_weight)
    return w if w > 0 else 1.0


def _row_weight(X: Any, sample_weight: Any) -> float:
    """The sum of ``sample_weight`` over the rows of X, or their count."""
    n = _api.n_rows(X)
    return float(n) if sample_weight is None else float(np.sum(_weights(sample_weight, n)))


def _per_output_array(result: Any) -> np.ndarray:
    """A public function's per-output Series/DataFrame as (n_output_features, n_outputs)."""
    if isinstance(result, pd.DataFrame):
        return result.drop(columns="total").to_numpy(dtype=np.float64)
    return result.to_numpy(dtype=np.float64)[:, None]


def _unbiased_scores(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
    return _per_output_array(
        unbiased_gain(
            ens,
            X,
            y,
            sample_weight=opts.sample_weight,
            reference=opts.reference,
            random_state=opts.random_state,
        )
    )


def _unbiased_estimate_opts(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Estimate:
    return _unbiased_estimate(
        ens,
        X,
        y,
        sample_weight=opts.sample_weight,
        reference=opts.reference,
        random_state=opts.random_state,
    )


def _unbiased_resample(ens, X, y, opts, counts, seed) -> np.ndarray:
    """With a constant hessian and uniform weights, as the point estimate: the exact
    expectation over draws, on the multiset in which row i appears ``counts[i]`` times
    (ratios sum c g / sum c h, k counting rows with multiplicity); otherwise draws with the
    counts as row weights."""
    user_w = None if opts.sample_weight is None else _weights(opts.sample_weight, counts.size)
    uniform = user_w is None or (np.all(user_w == user_w[0]) and user_w[0] > 0)
    if not (get_objective(ens).constant_hessian and uniform):
        w = counts * (1.0 if user_w is None else user_w)
        rep = Options(sample_weight=w, reference=opts.reference, random_state=seed)
        return _unbiased_scores(ens, X, y, rep)
    # the same training sums on every resample
    Gt = opts.once(
        ("training_sums", id(ens)), (ens,), lambda: _training_sums(ens, opts.reference)[0]
    )
    inner = np.flatnonzero(ens.left >= 0)
    L, R = ens.left[inner], ens.right[inner]
    r, count = _exact_ratios(ens, X, y, inner, counts)
    k = np.minimum(count[L], count[R])
    ub = np.where(k >= 1, Gt[L] * r[:, 1] + Gt[R] * r[:, 2] - Gt[inner] * r[:, 0], 0.0)
    out = np.zeros((ens.n_features, ens.n_outputs))
    np.add.at(out, (ens.feature[inner], ens.tree_group[ens._node_tree[inner]]), ub)
    return ens._to_output(out)


#: Every method every consumer takes (per-feature scores from the model, rows and labels), by
#: name, in display order; the others are in ``OPTIONAL``.
REGISTRY: dict[str, Method] = {}


#: The methods computed only when named, by ``importance()`` and ``treeinner explain``: those
#: that need a background data set, and the pairwise ones (see the module's docstring).
OPTIONAL: dict[str, Method] = {}


def _register(method: Method) -> None:
    # every method computes on Dask input: mapped over the partitions, or by itself
    if method.uses_data and not (method.row_additive or method.takes_dask):
        raise TypeError(f"{method.name}: a method on data is row-additive or takes Dask input.")
    if method.pairwise and (method.has_se or method.resample is not None):
        raise TypeError(f"{method.name}: a pairwise method has no standard error.")
    table = OPTIONAL if method.needs_background or method.pairwise else REGISTRY
    table[method.name] = method


def _suffix(attribution: str) -> str:
    return "" if attribution == "predecomp" else f"_{attribution}"


_LONG = {
    "predecomp": "PreDecomp",
    "saabas": "Saabas",
    "shap": "TreeSHAP",
    "interventional": "interventional TreeSHAP",
}


#: The inner-product families: their per-feature sums and per-row moments, and their names.
_INNER = {
    "tree_inner": (tree_inner_sums, tree_inner_moments, "TreeInner"),
    "forest_inner": (forest_inner_sums, forest_inner_moments, "ForestInner"),
    "forest_inner_initial": (
        forest_inner_initial_sums,
        forest_inner_initial_moments,
        "ForestInner (initial form: -gradients at the initial prediction)",
    ),
}


def _inner_method(family: str, attribution: str) -> Method:
    sums, row_moments, what = _INNER[family]

    def compute(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
        return sums(ens, X, y, opts.node_values(ens, attribution), opts.sample_weight)

    def moments(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Moments:
        return row_moments(ens, X, y, opts.node_values(ens, attribution), opts.sample_weight)

    return Method(
        name=family + _suffix(attribution),
        summary=f"{what} with {_LONG[attribution]}: held-out inner product with -gradients",
        compute=compute,
        row_additive=True,
        uses_reference=attribution == "predecomp",
        moments=moments,
        family=family,
        attribution=attribution,
    )


def _abs_rows(ens: TreeEnsemble, X: Any, opts: Options, attribution: str) -> np.ndarray:
    """|attribution| of every row, feature and output: (n, n_output_features, n_outputs)."""
    if attribution == "shap":
        values = tree_shap(ens, X).values
    else:
        node_values = opts.node_values(ens, attribution)
        assert node_values is not None  # a path attribution has node values
        values = path_attribution(ens, X, node_values).values
    return np.abs(values if values.ndim == 3 else values[:, :, None])


def _weighted_row_sum(rows: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    return rows.sum(axis=0) if w is None else np.einsum("i,ijk->jk", w, rows)


def _abs_method(attribution: str) -> Method:
    def compute(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
        rows = _abs_rows(ens, X, opts, attribution)
        w = None if opts.sample_weight is None else _weights(opts.sample_weight, rows.shape[0])
        return _weighted_row_sum(rows, w)

    def resample(ens, X, y, opts, counts, seed) -> np.ndarray:
        # the attributions do not depend on the row weights: computed once, reweighted
        rows = opts.once(
            ("abs_rows", id(ens), id(X), attribution),
            (ens, X),
            lambda: _abs_rows(ens, X, opts, attribution),
        )
        w = counts.astype(np.float64)
        if opts.sample_weight is not None:
            w = w * _weights(opts.sample_weight, rows.shape[0])
        return _weighted_row_sum(rows, w) / (float(w.sum()) or 1.0)

    def moments(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Moments:
        rows = _abs_rows(ens, X, opts, attribution)
        w = None if opts.sample_weight is None else _weights(opts.sample_weight, rows.shape[0])
        return moments_from_rows(rows, w)

    return Method(
        name=f"abs_{attribution}",
        summary=f"mean |{_LONG[attribution]}| over rows"
        + (" (the usual SHAP bar plot)" if attribution == "shap" else ""),
        compute=compute,
        needs_y=False,
        row_additive=True,
        mean=True,
        signed=False,
        uses_reference=attribution == "predecomp",
        resample=resample,
        moments=moments,
        family="abs",
        attribution=attribution,
    )


def _centred_method(attribution: str) -> Method:
    """ForestInner's initial form, centred on the evaluation rows (``_centred``): not a sum
    over rows (its node means come from all of them), two passes that are."""
    shap = attribution == "shap"

    def compute(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
        return centred_initial_sums(ens, X, y, shap, opts.sample_weight)

    def estimator(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Estimate:
        return centred_initial_moments(ens, X, y, shap, opts.sample_weight).estimate(False)

    what = "TreeSHAP split by the held-out rows' weights" if shap else "centred path attribution"
    return Method(
        name="forest_inner_initial" + _suffix(attribution),
        summary=f"ForestInner's initial form with {what}, centred on the held-out rows: "
        "inner product with -gradients at the initial prediction, zero for a feature "
        "independent of the target",
        compute=compute,
        estimator=estimator,
        takes_dask=True,
        family="forest_inner_initial",
        attribution=attribution,
        # TreeSHAP shares a combination player's interactions with its features' own splits,
        # which the Shapley credit of the combinations leaves as they are
        combinations_by_shapley=not shap,
    )


for _family in _INNER:
    for _attribution in _api.ATTRIBUTIONS:
        if _family == "forest_inner_initial":
            _register(_centred_method(_attribution))
        else:
            _register(_inner_method(_family, _attribution))
for _attribution in _api.ATTRIBUTIONS:
    _register(_abs_method(_attribution))


def _background(opts: Options, name: str) -> Any:
    if opts.background is None:
        raise InputError(
            f"{name} needs a background data set (interventional TreeSHAP): pass background= "
            "to treeinner.importance (--background FILE on the command line)."
        )
    return opts.background


def _interventional_method(family: str) -> Method:
    sums, row_moments = INTERVENTIONAL[family]  # from the background (Options.background)
    name = f"{family}_interventional"

    def compute(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
        return sums(ens, X, y, _background(opts, name), opts.sample_weight)

    def moments(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> Moments:
        return row_moments(ens, X, y, _background(opts, name), opts.sample_weight)

    return Method(
        name=name,
        summary=f"{_INNER[family][2]} with interventional TreeSHAP against a background: "
        "held-out inner product with -gradients",
        compute=compute,
        row_additive=True,
        moments=moments,
        family=family,
        attribution="interventional",
        needs_background=True,
    )


for _family in _INNER:
    _register(_interventional_method(_family))


def _interactions(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
    return _interaction_inner(ens, X, y, opts.sample_weight)


_register(
    Method(
        name="tree_inner_interactions",
        summary="TreeInner with TreeSHAP interaction values: held-out inner product with "
        "-gradients, per pair of features (diagonal: main effects)",
        compute=_interactions,
        row_additive=True,
        family="tree_inner_interactions",
        attribution="shap",
        pairwise=True,
    )
)


def _total_gain(ens: TreeEnsemble, X: Any, y: Any, opts: Options) -> np.ndarray:
    """The stored split gains; for a model that stores none (CatBoost), with
    ``opts.reference``, the gains computed from the training data (``_gain.total_gain``),
    once per Options and ensemble."""
    if opts.reference is None or np.all(np.isfinite(ens.gain[ens.left >= 0])):
        return total_gain_scores(ens)
    return opts.once(
        ("total_gain", id(ens)), (ens,), lambda: total_gain_scores(ens, opts.reference)
    )


_register(
    Method(
        name="total_gain",
        summary="the booster's split gains (training data)",
        compute=_total_gain,
        needs_y=False,
        uses_data=False,
        uses_reference=True,
        family="total_gain",
    )
)
_register(
    Method(
        name="permutation",
        summary="mean loss increase when the column is permuted",
        compute=lambda ens, X, y, opts: permutation_scores(
            ens, X, y, opts.sample_weight, opts.n_repeats, opts.random_state
        ),
        uses_random_state=True,
        takes_dask=True,
        family="permutation",
    )
)
_register(
    Method(
        name="unbiased_gain",
        summary="split gains re-estimated on held-out rows (UnbiasedGBM)",
        compute=_unbiased_scores,
        uses_reference=True,
        uses_random_state=True,
        resample=_unbiased_resample,
        estimator=_unbiased_estimate_opts,
        takes_dask=True,
        family="unbiased_gain",
    )
)

#: The registry as the public sees it (``treeinner.METHODS``): name -> Method, read-only.
METHODS = MappingProxyType(REGISTRY)
#: The optional methods as the public sees them (``treeinner.OPTIONAL_METHODS``), read-only.
OPTIONAL_METHODS = MappingProxyType(OPTIONAL)

#: What ``treeinner.importance`` computes when no method is named, best first: ordered by the
#: average rank of each method's AUC of telling relevant from irrelevant features on held-out
#: rows, over every cell of the real-data benchmark and the simulation study
#: (``benchmarks/bench_real_data.py``, docs/real_data_benchmark.md). ``tests/test_methods.py``
#: checks this order against ``benchmarks/results/real_data.json``.
DEFAULT_METHODS: tuple[str, ...] = (
    "forest_inner_initial",
    "permutation",
    "tree_inner",
    "tree_inner_shap",
    "abs_shap",
    "unbiased_gain",
    "abs_predecomp",
    "abs_saabas",
    "total_gain",
)
#: The recommended method: the first of ``DEFAULT_METHODS``.
RECOMMENDED_METHOD: str = DEFAULT_METHODS[0]
#: What ``treeinner explain`` shows when no method is named: the recommended method next to the
#: two scores people usually look at (the SHAP bar plot and the booster's gain).
DEFAULT_CLI_METHODS: tuple[str, ...] = (RECOMMENDED_METHOD, "abs_shap", "total_gain")

_FAMILIES = tuple(_INNER)


def get(name: Any) -> Method:
    """The registered method ``name`` (of ``REGISTRY`` or ``OPTIONAL``).

    Raises
    ------
    ValueError
        For an unknown name, listing every method.
    """
    if isinstance(name, str) and name in REGISTRY:
        return REGISTRY[name]
    if isinstance(name, str) and name in OPTIONAL:
        return OPTIONAL[name]
    raise InputError(
        f"Unknown importance method {name!r}; choose from {', '.join(REGISTRY)} (and, with "
        f"importance() or treeinner explain, {', '.join(OPTIONAL)})."
    )


def why_optional(method: Method) -> str:
    """What makes ``method`` optional, as a phrase."""
    if method.pairwise:
        return "gives a matrix over pairs of features, not a score per feature"
    return "needs a background data set (interventional TreeSHAP)"


def resolve(
    methods: str | Sequence[str], attribution: str | None = None, optional: bool = False
) -> list[str]:
    """Method names from what a user wrote: ``tree_inner`` and ``forest_inner`` take
    ``attribution`` (``"tree_inner"`` with ``"shap"`` is ``tree_inner_shap``); names may be
    comma-separated; duplicates are dropped, the order is kept.

    A name that carries its attribution (``tree_inner_saabas``) may not be combined with a
    different ``attribution`` other than the default. With ``optional`` (``importance()``
    and ``treeinner explain``), the methods of ``OPTIONAL`` are allowed too, and
    ``attribution`` may be ``"interventional"``.

    Raises
    ------
    ValueError
        For an unknown method or attribution (listing every choice), no method at all, or
        without ``optional`` a method of ``OPTIONAL`` (saying why it is refused).
    """
    if attribution is not None:
        _api.check_attribution(
            attribution, _api.INNER_ATTRIBUTIONS if optional else _api.ATTRIBUTIONS
        )
    if isinstance(methods, str):
        methods = [methods]
    out: list[str] = []
    for item in methods:
        if not isinstance(item, str):
            raise InputError(
                f"Method names must be strings; got {item!r}. Choose from {', '.join(REGISTRY)}."
            )
        for name in (m.strip() for m in item.split(",")):
            if not name:
                continue
            if name in _FAMILIES:
                name += _suffix(attribution or "predecomp")
            method = get(name)
            if name in OPTIONAL and not optional:
                raise InputError(
                    f"method {name!r} {why_optional(method)}: compute it with "
                    "treeinner.importance() (or treeinner explain); choose here from "
                    f"{', '.join(REGISTRY)}."
                )
            if (
                attribution not in (None, "predecomp")
                and method.family in _FAMILIES
                and method.attribution != attribution
            ):
                raise InputError(
                    f"method {name!r} already names its attribution; it contradicts "
                    f"attribution={attribution!r}. Pass method={method.family!r} with the "
                    "attribution you want."
                )
            if name not in out:
                out.append(name)
    if not out:
        raise InputError(f"No method given; choose from {', '.join(REGISTRY)}.")
    return out


def warn_shared_credit(ens: TreeEnsemble, methods: Sequence[Method]) -> None:
    """Warn that a held-out score's null of zero does not hold per feature for a model whose
    splits combine several features (CatBoost's CTR feature combinations), under the methods
    that do not credit such splits by Shapley values (``Method.combinations_by_shapley``):
    a feature the target does not depend on gets part of what its partner gives."""
    equal = [m.name for m in methods if not m.combinations_by_shapley]
    groups = ens.shared_credit() if equal else []
    if not groups:
        return
    shown = ", ".join("+".join(g) for g in groups[:4]) + (", ..." if len(groups) > 4 else "")
    warnings.warn(
        f"This model splits on {len(groups)} feature combination(s) ({shown}). Under "
        f"{equal}, a feature the target does not depend on can score above zero, and pass a "
        "test, through a combination with one it does (a combination's splits are credited "
        "equally to its features; TreeSHAP also shares their interactions with the "
        f"features' own splits). {RECOMMENDED_METHOD!r} credits combinations by Shapley "
        "values over permutations; or retrain without combinations (CatBoost: "
        "max_ctr_complexity=1).",
        UserWarning,
        stacklevel=_calls.user_stacklevel(),
    )
