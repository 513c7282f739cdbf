"""Several global importances side by side, computed through the method registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import _api
from ._api import public
from ._dask import is_dask
from ._errors import InputError
from ._methods import DEFAULT_METHODS, OPTIONAL, REGISTRY, Method, Options, get, resolve
from ._staged import _weights
from .adapters import from_model
from .ensemble import TreeEnsemble

__all__ = ["DEFAULT_METHODS", "importance"]


def _check_bootstrap(n_bootstrap: Any) -> int:
    n_bootstrap = _api.check_count("n_bootstrap", n_bootstrap, minimum=0)
    if n_bootstrap == 1:
        raise InputError(
            f"n_bootstrap must be 0 (no standard errors) or at least 2, got {n_bootstrap}."
        )
    return n_bootstrap


def _totals(scores: np.ndarray) -> np.ndarray:
    """Per-feature totals over outputs of a method's scores."""
    return scores.sum(axis=1)


def _replicate(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    method: Method,
    opts: Options,
    counts: np.ndarray,
    seed: int,
) -> np.ndarray:
    """One method on one bootstrap resample (row i counted ``counts[i]`` times): the counts
    multiplied into the row weights, the method's own resampling where it has one."""
    if method.resample is not None:
        return _totals(method.resample(ens, X, y, opts, counts, seed))
    n = counts.shape[0]
    sw = counts.astype(np.float64)
    if opts.sample_weight is not None:
        sw = sw * _weights(opts.sample_weight, n)
    rep = Options(
        sample_weight=sw,
        reference=opts.reference,
        random_state=seed,
        n_repeats=opts.n_repeats,
        background=opts.background,
        _cache=opts._cache,  # node values do not depend on the evaluation rows
    )
    return _totals(method.score(ens, X, y, rep))


def _bootstrap(
    ens: TreeEnsemble,
    X: Any,
    y: Any,
    methods: Sequence[Method],
    opts: Options,
    cols: dict[str, np.ndarray],
    n_bootstrap: int,
) -> dict[str, np.ndarray]:
    """The ``_se`` columns: standard deviations over ``n_bootstrap`` multinomial resamples."""
    n = _api.n_rows(X)
    rng = _api.child_generator(opts.random_state)
    pvals = np.full(n, 1.0 / n)
    reps: dict[str, list[np.ndarray]] = {m.name: [] for m in methods}
    for _ in range(n_bootstrap):
        counts = rng.multinomial(n, pvals)
        seed = int(rng.integers(0, 2**63))
        for m in methods:
            reps[m.name].append(_replicate(ens, X, y, m, opts, counts, seed))
    out = {}
    for m in methods:
        se = np.std(np.asarray(reps[m.name]), axis=0, ddof=1)
        if not m.uses_data:  # no data dependence; NaN stays NaN (CatBoost's total gain)
            se = np.where(np.isfinite(cols[m.name]), 0.0, np.nan)
        out[f"{m.name}_se"] = se
    return out


def _with_se(
    ens: TreeEnsemble, X: Any, y: Any, methods: Sequence[Method], opts: Options
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Method totals and their one-pass standard errors (``_se`` columns)."""
    cols, errors = {}, {}
    for m in methods:
        est = m.estimate(ens, X, y, opts)
        if est is not None:
            cols[m.name] = _totals(est.score)
            errors[f"{m.name}_se"] = est.se_total
            continue
        cols[m.name] = _totals(m.score(ens, X, y, opts))
        fixed = not m.uses_data and np.isfinite(cols[m.name])
        errors[f"{m.name}_se"] = np.where(fixed, 0.0, np.nan)
    return cols, errors


def _check_optional(chosen: Sequence[Method], background: Any, se: bool, n_bootstrap: int) -> None:
    """The methods of ``_methods.OPTIONAL``: a background for those that need one (and only
    for them), a pairwise method alone and without standard errors."""
    needs = [m.name for m in chosen if m.needs_background]
    if needs and background is None:
        raise InputError(
            f"{', '.join(needs)} {'needs' if len(needs) == 1 else 'need'} a background data set "
            "(interventional TreeSHAP): pass "
            "background= (rows with the model's features, e.g. a sample of the training data)."
        )
    if background is not None and not needs:
        users = [name for name, m in OPTIONAL.items() if m.needs_background]
        raise InputError(
            f"background= is used by {', '.join(users)}; none of {[m.name for m in chosen]} "
            "uses it."
        )
    pairwise = [m.name for m in chosen if m.pairwise]
    if pairwise and len(chosen) > 1:
        raise InputError(
            f"{pairwise[0]} gives a matrix over pairs of features, not a column of per-feature "
            f"scores: ask for it alone (methods={pairwise[0]!r}), and for "
            f"{[m.name for m in chosen if not m.pairwise]} in another call."
        )
    if pairwise and (se or n_bootstrap):
        raise InputError(
            f"{pairwise[0]} gives no standard errors: leave out se=True and n_bootstrap."
        )


@public
def importance(
    model: Any,
    X: Any,
    y: Any,
    *,
    methods: str | Sequence[str] = DEFAULT_METHODS,
    attribution: str | None = None,
    sample_weight: Any = None,
    reference: Any = None,
    random_state: Any = None,
    n_repeats: int = 5,
    n_bootstrap: int = 0,
    se: bool = False,
    background: Any = None,
) -> pd.DataFrame:
    """Several global importances side by side, one column per method.

    Parameters
    ----------
    model : TreeEnsemble or a supported booster
    X : array-like, DataFrame or scipy sparse matrix
        Evaluation rows (held-out data to separate signal from overfitting).
    y : array-like of shape (n_samples,) or None
        Labels; may be None when no method needs them (``total_gain``, ``abs_*``).
    methods : str or sequence of str, default ``DEFAULT_METHODS``
        The default: nine methods, the recommended one first and the others in the order of
        their average rank on the real-data benchmark and the simulation study
        (``forest_inner_initial``, ``permutation``, ``tree_inner``, ``tree_inner_shap``,
        ``abs_shap``, ``unbiased_gain``, ``abs_predecomp``, ``abs_saabas``, ``total_gain``;
        docs/concepts.md, "Which method to use"). Names from the method registry
        (``treeinner.METHODS`` maps each to its summary and properties):
        ``tree_inner`` (PreDecomp), ``tree_inner_saabas``, ``tree_inner_shap``,
        ``forest_inner``, ``forest_inner_saabas``, ``forest_inner_shap``,
        ``forest_inner_initial`` (ForestInner's initial form, ``forest_inner(...,
        gradient="initial")``), ``forest_inner_initial_saabas``,
        ``forest_inner_initial_shap``, ``abs_predecomp``,
        ``abs_saabas``, ``abs_shap`` (weighted mean |attribution|; ``abs_shap`` is mean
        |TreeSHAP|, the usual SHAP bar plot), ``total_gain``, ``permutation`` (mean loss
        increase when the column is permuted, over ``n_repeats`` permutations) and
        ``unbiased_gain`` (``unbiased_gain`` with one draw). For multi-output models the
        columns hold the totals over classes.

        Computed only when named (``treeinner.OPTIONAL_METHODS``; not taken by
        ``significance``, ``select_features`` or ``TreeInnerSelector``):
        ``tree_inner_interventional``, ``forest_inner_interventional`` and
        ``forest_inner_initial_interventional`` (the inner products with interventional
        TreeSHAP against ``background``, as ``tree_inner(..., attribution="interventional",
        background=...)``; they combine with every other method), and
        ``tree_inner_interactions``, pairwise: TreeInner with SHAP interaction values
        (``tree_inner_interactions``), one score per pair of features. A pairwise method is
        asked for alone (its result is a matrix, not a column) and takes neither ``se`` nor
        ``n_bootstrap``.
    attribution : {"predecomp", "saabas", "shap", "interventional"}, optional
        The attribution of the names ``tree_inner``, ``forest_inner`` and
        ``forest_inner_initial`` (``"shap"`` makes ``tree_inner`` the column
        ``tree_inner_shap``, ``"interventional"`` the column ``tree_inner_interventional``);
        default PreDecomp.
    sample_weight : array-like of shape (n_samples,), optional
        Weights of the evaluation rows.
    reference : tuple, optional
        ``(X_train, y_train[, sample_weight])``, the training data: PreDecomp node values
        recomputed from it for ``tree_inner``, ``forest_inner``, ``forest_inner_initial`` and
        ``abs_predecomp``, the
        training sums of ``unbiased_gain``, and the split gains of ``total_gain`` for models
        that store none (``treeinner.total_gain(model, reference=...)``). Needed for models
        that store no hessian covers (CatBoost with a loss other than RMSE); Saabas and
        TreeSHAP need no training data. The other methods ignore it; a ValueError is raised
        when none of ``methods`` uses it. With ``n_bootstrap`` the reference stays fixed: only
        the evaluation rows are resampled.
    random_state : int or numpy Generator, optional
        Seed of the permutations, of the unbiased gain's draws and of the bootstrap.
    n_repeats : int
        Permutations per feature for ``permutation``.
    n_bootstrap : int
        Number of bootstrap resamples of the evaluation rows (0: none, otherwise at least 2).
        Each resample is a multinomial draw of n row counts (row i taken ``c_i`` times,
        sum c_i = n) applied as integer row weights multiplied into ``sample_weight``; X is
        never copied. For every method column ``m`` a column ``m_se`` is added: the standard
        deviation over the resamples (``ddof=1``), the bootstrap standard error of ``m``.
        Methods are recomputed with the weights, so each costs ``n_bootstrap`` times its
        point estimate, except ``abs_*`` (the attributions are computed once and reweighted)
        and ``total_gain`` (no data dependence: its standard error is 0).
        ``unbiased_gain`` with a constant hessian and uniform weights is, as its point
        estimate, the exact expectation over draws on the resample; otherwise its draws pick
        among all rows and the rows the resample left out weigh 0, which makes its standard
        error somewhat conservative. Each resample's permutations and draws get their own seed.

    se : bool, default False
        Add for every method column ``m`` a column ``m_se``, its standard error over the
        evaluation rows from the same pass (as ``treeinner.significance``, which adds
        intervals, p-values and q-values): for ``tree_inner``, ``forest_inner``, ``abs_*``
        and ``unbiased_gain``. ``total_gain`` depends on no evaluation row (0);
        ``permutation`` has none (NaN: use ``n_bootstrap``). Not combined with
        ``n_bootstrap``.
    background : array-like, DataFrame or sparse matrix, optional
        The background rows of the interventional methods (required by them, refused when
        no method uses it), as for ``tree_shap_interventional``.

    Returns
    -------
    pandas.DataFrame indexed by feature name: the method columns in the order of ``methods``
    (identical to ``n_bootstrap=0``), then, with ``n_bootstrap`` or ``se``, the ``_se``
    columns in the same order. For a pairwise method, the (n_features, n_features) matrix of
    its scores (totals over classes), indexed by feature name on both axes, symmetric, its
    diagonal the main effects' part.
    """
    n_bootstrap = _check_bootstrap(n_bootstrap)
    n_repeats = _api.check_count("n_repeats", n_repeats)
    _api._check_random_state(random_state)  # checked even where no method draws
    se = _api.check_flag("se", se)
    if se and n_bootstrap:
        raise InputError("se=True and n_bootstrap give two standard errors; pass one of them.")
    names = resolve(_api.check_names("methods", methods), attribution, optional=True)
    chosen = [get(name) for name in names]
    _check_optional(chosen, background, se, n_bootstrap)
    if any(m.uses_data for m in chosen):
        _api.check_rows(X)
    if reference is not None and not any(m.uses_reference for m in chosen):
        raise InputError(
            f"reference= is used by {', '.join(m for m in REGISTRY if get(m).uses_reference)}"
            f"; none of {[m.name for m in chosen]} uses it."
        )
    if y is None and any(m.needs_y for m in chosen):
        raise InputError(
            f"y is None, but {[m.name for m in chosen if m.needs_y]} need the labels of X."
        )
    if is_dask(X) and n_bootstrap:
        raise InputError(
            "n_bootstrap resamples rows in memory; with Dask input use se=True (one-pass "
            "standard errors)."
        )
    ens = from_model(model)
    opts = Options(
        sample_weight=sample_weight,
        reference=reference,
        random_state=random_state,
        n_repeats=n_repeats,
        background=background,
    )
    if chosen[0].pairwise:
        scores = chosen[0].score(ens, X, y, opts).sum(axis=2)
        names = list(ens.output_names)
        return pd.DataFrame(scores, index=names, columns=names)
    if se:
        cols, errors = _with_se(ens, X, y, chosen, opts)
        return pd.DataFrame({**cols, **errors}, index=list(ens.output_names))
    cols = {m.name: _totals(m.score(ens, X, y, opts)) for m in chosen}
    if n_bootstrap:
        cols.update(_bootstrap(ens, X, y, chosen, opts, cols, n_bootstrap))
    return pd.DataFrame(cols, index=list(ens.output_names))
