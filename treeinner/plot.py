"""Plots of importances and attributions (matplotlib, imported only when a plot is drawn).

- ``importance``: several importance methods side by side on one normalized scale, with
  negative scores visible, ``1 - alpha`` intervals from standard errors
  (``treeinner.significance``, ``treeinner.importance(..., se=True)`` or ``n_bootstrap``)
  and the features whose q-value is at most alpha marked.
- ``summary``: a beeswarm of per-row attributions coloured by the feature's value.
- ``dependence``: a feature's value against its attribution (or its SHAP interaction with
  another feature), coloured by another feature, by default the one it interacts with most.
- ``interactions``: a heatmap of mean |SHAP interaction| (``tree_shap_interactions``) or of
  the signed held-out pair importance of ``tree_inner_interactions``.
- ``selection_path``: the held-out loss curve of a recursive selection (``TreeInnerSelector(
  strategy="recursive")``), with error bars, the chosen step and the features each step dropped.

Every function draws on ``ax`` if given (otherwise on a new figure) and returns the Axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from ._api import check_alpha, public
from ._errors import InputError, InputTypeError
from .attribution import Attribution, _feature_matrix, _output_index, _positive_int
from .interactions import Interactions, tree_shap_interactions

__all__ = ["dependence", "importance", "interactions", "selection_path", "summary"]

_MISSING_COLOR = "#8c8c8c"
_CMAP = "coolwarm"
_SIGNED_CMAP = "RdBu_r"
_ABS_CMAP = "viridis"
#: At most this many category labels on a dependence plot's x axis; more are thinned.
_MAX_CATEGORY_LABELS = 30


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "treeinner.plot needs matplotlib; install it with pip install 'treeinner[plot]'."
        ) from e
    return plt


def _axes(ax: Any, width: float, height: float) -> Any:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(width, height))
    return ax


# ---------------------------------------------------------------------- helpers
def _check_count0(name: str, v: Any) -> int:
    """``v`` as an int, checked to be a non-negative integer (the argument ``name``)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise InputError(f"{name} must be a non-negative int, got {v!r}.")
    return int(v)


def _top_bottom(order: np.ndarray, top: int, bottom: int) -> tuple[np.ndarray, int | None]:
    """The first ``top`` and the last ``bottom`` entries of a ranking (each once, in ranking
    order), and the position after which entries were left out (None if none were)."""
    if top + bottom >= order.shape[0]:
        return order, None
    if bottom == 0:
        return order[:top], None
    return np.concatenate([order[:top], order[-bottom:]]), top


# ---------------------------------------------------------------------- importance
_TABLE_COLUMNS = ("feature", "score", "se")


def _from_table(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """A long significance table (``treeinner.significance``; for multi-output models its
    ``total`` rows) as a score frame indexed by feature with ``m`` and ``m_se`` columns, and
    the q-values of the methods that have them."""
    if "output" in table.columns:
        if not (table["output"] == "total").any():
            raise InputError(
                "The table has an 'output' column but no 'total' rows; plot the table of "
                "treeinner.significance (or one output's rows without the 'output' column)."
            )
        table = table[table["output"] == "total"]
    table = table.assign(
        method=table["method"].astype(str) if "method" in table.columns else "score",
        feature=table["feature"].astype(str),
    )
    if table.duplicated(["method", "feature"]).any():
        raise InputError("The table has more than one row for some method and feature.")
    features = list(pd.unique(table["feature"]))
    methods = list(pd.unique(table["method"]))
    cols: dict[str, Any] = {}
    qvals: dict[str, np.ndarray] = {}
    for m in methods:
        rows = table[table["method"] == m].set_index("feature").reindex(features)
        cols[m] = rows["score"].to_numpy(dtype=np.float64)
        cols[f"{m}_se"] = rows["se"].to_numpy(dtype=np.float64)
        if "q_value" in rows.columns:
            q = rows["q_value"].to_numpy(dtype=np.float64)
            if np.any(np.isfinite(q)):
                qvals[m] = q
    return pd.DataFrame(cols, index=features), qvals


def _interval_factor(alpha: Any) -> float:
    """The half-width of the error bars in standard errors: ``z_{1 - alpha/2}``, or 1."""
    if alpha is None:
        return 1.0
    return NormalDist().inv_cdf(1.0 - check_alpha(alpha) / 2.0)


@public
def importance(
    frame: pd.DataFrame | pd.Series,
    *,
    methods: Sequence[str] | str | None = None,
    normalize: bool = True,
    ax: Any = None,
    top: int | None = None,
    bottom: int | None = None,
    alpha: float | None = 0.05,
) -> Any:
    """Compare importance methods side by side: horizontal grouped bars, one group per feature,
    with intervals where the scores have standard errors.

    Parameters
    ----------
    frame : pandas.DataFrame or pandas.Series
        Scores indexed by feature name with one column per method, as
        ``treeinner.importance`` returns them; a column ``m_se`` (``se=True`` or
        ``n_bootstrap``) gives method ``m`` its standard errors. Or the long table of
        ``treeinner.significance`` (columns ``method``, ``feature``, ``score``, ``se``,
        ``q_value``; of a multi-output model its ``total`` rows are drawn), or of
        ``Attribution.importance`` (no ``method``: one method named ``score``).
    methods : sequence of str, optional
        Methods to plot, in this order (bars top to bottom within a group, and the legend,
        which names each bar by its method). Default: every numeric column not ending in
        ``_se`` (every method of a long table).
    normalize : bool
        Divide each method's scores (and standard errors) by the sum of the absolute values of
        its scores over all features (including those ``top`` leaves out), so methods on
        different scales share one axis while signs are kept: a negative TreeInner (a feature
        the model only overfit) is drawn to the left of the zero line.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure otherwise.
    top : int, optional
        Show only the ``top`` features ranked highest by the first method.
    bottom : int, optional
        With ``top``, also show the ``bottom`` features ranked lowest by the first method
        (those ``top`` did not show; NaN scores rank lowest): the most negative held-out
        scores, the features the model only overfit. They are drawn below the top features,
        in the same order, after a dashed line where features were left out between the two.
    alpha : float or None, default 0.05
        Error bars are ``1 - alpha`` normal intervals, ``score +- z_{1 - alpha/2} se``, and
        where the table has q-values (``treeinner.significance``), the bars of features with
        ``q_value <= alpha`` are marked with a star (legend entry ``q <= alpha``). ``None``:
        bars of +- one standard error and no marks.

    Returns
    -------
    matplotlib.axes.Axes
        Features are sorted by the first method, highest at the top; NaN scores (e.g.
        CatBoost's total gain) are drawn as no bar and sorted last; NaN standard errors as no
        error bar.
    """
    if isinstance(frame, pd.Series):
        frame = frame.to_frame(name=frame.name if frame.name is not None else "score")
    if not isinstance(frame, pd.DataFrame):
        raise InputTypeError(
            f"frame must be a pandas DataFrame of scores (treeinner.importance), got "
            f"{type(frame).__name__}."
        )
    z = _interval_factor(alpha)
    qvals: dict[str, np.ndarray] = {}
    if all(c in frame.columns for c in _TABLE_COLUMNS):
        frame, qvals = _from_table(frame)
    numeric = [
        str(c)
        for c in frame.columns
        if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
    ]
    frame = frame.set_axis([str(c) for c in frame.columns], axis=1)
    candidates = [c for c in numeric if not c.endswith("_se")]
    if not candidates:
        raise InputError(
            "frame has no numeric score columns to plot (expected the output of "
            "treeinner.importance or treeinner.significance)."
        )
    if methods is None:
        methods = candidates
    elif isinstance(methods, str):
        methods = [methods]
    methods = list(methods)
    if not methods:
        raise InputError("methods is empty; name at least one column of frame.")
    unknown = [m for m in methods if m not in candidates]
    if unknown:
        from ._methods import REGISTRY

        missing = [m for m in unknown if m in REGISTRY and m not in frame.columns]
        hint = (
            f" Compute {missing} with treeinner.importance(model, X, y, methods={missing})."
            if missing
            else ""
        )
        raise InputError(
            f"Unknown or non-numeric method column(s) {unknown}; frame has {candidates}.{hint}"
        )
    if frame.shape[0] == 0:
        raise InputError("frame has no rows (features) to plot.")
    if top is not None:
        top = _positive_int("top", top)
    if bottom is not None:
        bottom = _check_count0("bottom", bottom)
        if top is None:
            raise InputError("bottom= needs top= (without top every feature is shown).")

    values, errors = {}, {}
    for m in methods:
        v = frame[m].to_numpy(dtype=np.float64)
        se = frame[f"{m}_se"].to_numpy(dtype=np.float64) if f"{m}_se" in numeric else None
        if se is not None and not np.any(np.isfinite(se)):
            se = None  # no standard error at all (total_gain, permutation): no error bars
        if normalize:
            scale = float(np.nansum(np.abs(v)))
            if scale > 0 and np.isfinite(scale):
                v = v / scale
                se = None if se is None else se / scale
        values[m], errors[m] = v, None if se is None else z * se

    first = values[methods[0]]
    order = np.argsort(-np.where(np.isnan(first), -np.inf, first), kind="stable")
    gap = None
    if top is not None:
        order, gap = _top_bottom(order, top, bottom or 0)
    names = [str(frame.index[i]) for i in order]
    n_feat, n_meth = len(order), len(methods)

    ax = _axes(ax, 7.0, 1.0 + 0.28 * n_feat * max(1.0, n_meth / 2))
    height = 0.8 / n_meth
    pos = np.arange(n_feat, dtype=np.float64)
    marks_x: list[float] = []
    marks_y: list[float] = []
    for j, m in enumerate(methods):
        err = errors[m]
        ys = pos + (j - (n_meth - 1) / 2) * height
        ax.barh(
            ys,
            values[m][order],
            height=height,
            xerr=None if err is None else err[order],
            label=m,
            error_kw={"ecolor": "black", "elinewidth": 0.8, "capsize": 2},
        )
        if alpha is not None and m in qvals:
            with np.errstate(invalid="ignore"):
                sig = qvals[m][order] <= alpha
            end = values[m][order] + (0.0 if err is None else np.nan_to_num(err[order]))
            marks_x.extend(end[sig])
            marks_y.extend(ys[sig])
    if marks_x:
        from matplotlib.transforms import offset_copy

        ax.scatter(
            marks_x,
            marks_y,
            marker="*",
            s=40,
            color="black",
            zorder=4,
            label=f"q <= {alpha:g}",
            transform=offset_copy(ax.transData, fig=ax.figure, x=6, units="points"),
        )
    ax.axvline(0.0, color="black", linewidth=0.8)
    if gap is not None:  # features left out between the top and the bottom ones
        ax.axhline(gap - 0.5, color="#555555", linewidth=0.8, linestyle="--")
    ax.set_yticks(pos)
    ax.set_yticklabels(names)
    ax.set_ylim(n_feat - 0.5, -0.5)  # first feature at the top
    ax.set_xlabel("score / sum of |scores| of the method" if normalize else "score")
    ax.set_ylabel("feature")
    with_errors = any(errors[m] is not None for m in methods)
    if not with_errors:
        ax.set_title("Feature importance")
    elif alpha is None:
        ax.set_title("Feature importance (+- 1 standard error)")
    else:
        ax.set_title(f"Feature importance ({100 * (1 - alpha):.10g}% intervals)")
    if n_meth > 1 or with_errors or marks_x:
        ax.legend(title="method", loc="best", fontsize="small")
    return ax


# ---------------------------------------------------------------------- attributions
def _attribution_values(attribution: Any, output: Any) -> tuple[np.ndarray, str]:
    """(n, p) values of one output, and a label suffix naming the output."""
    values = getattr(attribution, "values", None)
    names = getattr(attribution, "feature_names", None)
    if values is None or names is None:
        raise InputTypeError(
            "attribution must be a treeinner Attribution (from predecomp, saabas or tree_shap), "
            f"got {type(attribution).__name__}."
        )
    v = np.asarray(values, dtype=np.float64)
    if output is not None:
        output = _output_index(output, v.shape[2] if v.ndim == 3 else 1)
    if v.ndim == 3:
        if output is None:
            raise InputError(
                f"This attribution has {v.shape[2]} outputs (classes); pass output= to pick one."
            )
        return v[:, :, output], f" (output {output})"
    if v.ndim != 2:
        raise InputError(f"attribution values must be 2-D or 3-D, got shape {v.shape}.")
    return v, ""


def _feature_index(attribution: Any, feature: Any, what: str = "feature") -> int:
    names = [str(f) for f in attribution.feature_names]
    if isinstance(feature, (int, np.integer)) and not isinstance(feature, bool):
        if not -len(names) <= feature < len(names):
            raise InputError(f"{what} index {feature} is out of range for {len(names)} features.")
        return int(feature) % len(names)
    if isinstance(feature, str):
        if feature not in names:
            raise InputError(
                f"Unknown {what} {feature!r}; the attribution's features are "
                f"{names[:20]}{' ...' if len(names) > 20 else ''}."
            )
        return names.index(feature)
    raise InputTypeError(f"{what} must be a feature name or an int index, got {feature!r}.")


def _unit_colors(x: np.ndarray) -> np.ndarray:
    """Feature values mapped to [0, 1] by their 5th and 95th percentiles (min and max where
    those coincide; 0.5 for a constant feature); NaN stays NaN."""
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return np.full(x.shape, np.nan)
    lo, hi = np.percentile(finite, [5, 95])
    if hi <= lo:
        lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        return np.where(np.isfinite(x), 0.5, np.nan)
    with np.errstate(invalid="ignore"):
        return np.clip((x - lo) / (hi - lo), 0.0, 1.0)


def _swarm(v: np.ndarray, n_bins: int = 100) -> np.ndarray:
    """Vertical offsets in [-1, 1] stacking points of similar value (a beeswarm): values are
    binned and the points of a bin alternate above and below the axis."""
    n = v.shape[0]
    out = np.zeros(n)
    if n == 0:
        return out
    lo, hi = float(v.min()), float(v.max())
    bins = (
        np.minimum(((v - lo) / (hi - lo) * n_bins).astype(np.int64), n_bins - 1)
        if hi > lo
        else np.zeros(n, dtype=np.int64)
    )
    order = np.lexsort((v, bins))
    b = bins[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    layer = (rank + 1) // 2
    out[order] = np.where(rank % 2 == 1, layer, -layer)
    top = np.abs(out).max()
    return out / top if top > 0 else out


@public
def summary(
    attribution: Any,
    X: Any,
    *,
    max_display: int = 20,
    output: int | None = None,
    ax: Any = None,
) -> Any:
    """Beeswarm of per-row attributions, one row of points per feature.

    Features are ordered by mean |attribution| (largest at the top); each point is one row of
    ``X`` at its attribution, coloured by the feature's value: blue low to red high, with the
    colours spread between the feature's 5th and 95th percentiles; missing values are grey.

    Parameters
    ----------
    attribution : Attribution
        From ``treeinner.predecomp``, ``treeinner.saabas`` or
        ``treeinner.tree_shap``.
    X : array-like of shape (n_samples, n_features), DataFrame or scipy sparse matrix
        The explained rows (DataFrame columns matched by feature name). Categorical columns
        (pandas ``category``, ``object`` and string columns that are not numbers, pyarrow
        dictionaries) are coloured by category code: a categorical's own codes, otherwise
        those of its distinct values sorted as strings, as ``Attribution.to_shap`` codes them.
    max_display : int, default 20
        Number of features shown.
    output : int, optional
        Output (class) to plot; required for multi-output attributions.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure otherwise.

    Returns
    -------
    matplotlib.axes.Axes
        One scatter collection per feature (labelled with its name; a second one labelled
        ``"<name> (missing)"`` holds the rows where the feature is missing), and a colour bar
        "feature value" from low to high.
    """
    v, suffix = _attribution_values(attribution, output)
    max_display = _positive_int("max_display", max_display)
    n, _ = v.shape
    Xv, _ = _feature_matrix(attribution.feature_names, X, n)
    names = [str(f) for f in attribution.feature_names]
    mean_abs = np.abs(v).mean(axis=0) if n else np.zeros(v.shape[1])
    shown = np.argsort(-mean_abs, kind="stable")[:max_display]

    plt = _pyplot()
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    ax = _axes(ax, 7.5, 1.0 + 0.4 * len(shown))
    for rank, j in enumerate(shown):
        y = rank + 0.4 * _swarm(v[:, j])
        c = _unit_colors(Xv[:, j])
        has = np.isfinite(c)
        ax.scatter(
            v[has, j], y[has], c=c[has], cmap=_CMAP, vmin=0.0, vmax=1.0, s=12,
            linewidths=0, alpha=0.9, label=names[j], zorder=3,
        )  # fmt: skip
        if not np.all(has):
            ax.scatter(
                v[~has, j], y[~has], color=_MISSING_COLOR, s=12, linewidths=0, alpha=0.9,
                label=f"{names[j]} (missing)", zorder=2,
            )  # fmt: skip
    ax.axvline(0.0, color="#555555", linewidth=0.8, zorder=1)
    ax.set_yticks(np.arange(len(shown)))
    ax.set_yticklabels([names[j] for j in shown])
    ax.set_ylim(len(shown) - 0.5, -0.5)  # most important at the top
    ax.set_xlabel(f"attribution (contribution to the margin){suffix}")
    ax.set_title("Per-row attributions")
    cb = plt.colorbar(
        ScalarMappable(norm=Normalize(0.0, 1.0), cmap=_CMAP), ax=ax, ticks=[0.0, 1.0], aspect=40
    )
    cb.set_ticklabels(["low", "high"])
    cb.set_label("feature value")
    cb.outline.set_visible(False)
    return ax


def _category_ticks(axis: Any, labels: Sequence[Any], max_labels: int) -> None:
    """Label the category codes 0..m-1 of ``axis`` (an Axis) with ``labels``, thinned to every
    ``step``-th so that at most ``max_labels`` are shown and each has 0.18 inch of the axis
    (one line of 10 pt text); on the x axis rotated 90 degrees where more than 10 are shown,
    45 degrees where more than 5 or one is longer than 10 characters."""
    m = len(labels)
    if m == 0:
        return
    box = axis.axes.get_position()
    width, height = axis.axes.figure.get_size_inches()
    length = box.width * width if axis.axis_name == "x" else box.height * height
    limit = max(2, min(max_labels, int(length / 0.18)))
    step = -(-m // limit)
    pos = list(range(0, m, step))
    text = [str(labels[i]) for i in pos]
    axis.set_ticks(pos)
    if axis.axis_name != "x":
        axis.set_ticklabels(text)
    elif len(text) > 10:
        axis.set_ticklabels(text, rotation=90)
    elif len(text) > 5 or max(len(t) for t in text) > 10:
        axis.set_ticklabels(text, rotation=45, ha="right", rotation_mode="anchor")
    else:
        axis.set_ticklabels(text)


def _interaction_values(inter: Any, output: int | None) -> np.ndarray:
    """(n, p, p) interaction values of one output of an ``Interactions``."""
    v = np.asarray(inter.values, dtype=np.float64)
    if v.ndim == 4:
        if output is None:
            raise InputError(
                f"These interactions have {v.shape[3]} outputs (classes); pass output= to pick one."
            )
        return v[..., _output_index(output, v.shape[3])]
    if v.ndim != 3:
        raise InputError(f"interaction values must be 3-D or 4-D, got shape {v.shape}.")
    if output is not None:
        _output_index(output, 1)
    return v


def _strongest_partner(iv: np.ndarray, j: int) -> int:
    """The feature k != j with the largest mean |interaction value (j, k)| over the rows."""
    if iv.shape[1] < 2:
        raise InputError("There is no other feature to interact with: the model has one.")
    strength = np.abs(iv[:, j, :]).mean(axis=0) if iv.shape[0] else np.zeros(iv.shape[1])
    strength[j] = -np.inf
    return int(np.argmax(strength))


@public
def dependence(
    attribution: Any,
    X: Any,
    feature: str | int,
    *,
    color: str | int | None = None,
    output: int | None = None,
    ax: Any = None,
    interactions: Interactions | None = None,
    model: Any = None,
    interaction_values: bool = False,
) -> Any:
    """Scatter of a feature's value (x) against its attribution (y), one point per row.

    Parameters
    ----------
    attribution, X
        As for ``summary``: the attributions and the rows they explain. Rows where the feature
        is missing have no x position and are not drawn. A categorical feature is placed at its
        category codes, labelled with the categories on the x axis: every one while they fit
        (at most 30, 0.18 inch each), otherwise every second, third, ... one; rotated 90
        degrees when more than 10 are shown, 45 when more than 5 or a long one. A categorical
        colour feature gets its categories on the colour bar (at most 20, thinned likewise).
        ``attribution`` may also be the ``Interactions`` of
        ``treeinner.tree_shap_interactions``: the attributions are then its SHAP values (the
        sums of its rows), and it serves as ``interactions``.
    feature : str or int
        Feature name or index (in the attribution's feature order).
    color : str or int, optional
        Another feature whose value colours the points (colour bar between its 5th and 95th
        percentiles; grey where missing). ``"auto"``: the feature with the largest mean
        |SHAP interaction value| with ``feature`` over the rows (from ``interactions``, or
        computed from ``model``; named in the title). A feature actually named ``"auto"`` is
        chosen by its index.
    output, ax
        As for ``summary``: the output (class) to plot, required for multi-output
        attributions, and the Axes to draw on (a new figure otherwise).
    interactions : Interactions, optional
        ``treeinner.tree_shap_interactions`` of the same rows, for ``color="auto"`` and
        ``interaction_values``.
    model : TreeEnsemble or a supported booster, optional
        Where ``interactions`` is needed and not given: the model, whose interaction values on
        ``X`` are then computed (``tree_shap_interactions(model, X)``).
    interaction_values : bool, default False
        Plot SHAP interaction values instead of the attributions (as shap's
        ``dependence_plot`` does given interaction values): with a colour feature k other than
        ``feature`` (j), the pair's whole interaction ``2 * Phi_jk`` (``values[:, j, k] +
        values[:, k, j]``); without ``color`` (or with ``color=feature``), j's main effect
        ``Phi_jj``.

    Returns
    -------
    matplotlib.axes.Axes
        With ``color``, the rows where that feature is present are one scatter collection and
        those where it is missing a second, grey one (labelled ``"<name> missing"``).

    Raises
    ------
    ValueError
        For an unknown feature, ``color="auto"`` or ``interaction_values`` with neither
        ``interactions`` nor ``model`` (or both), interactions of other features or rows, or
        a model with a single feature.
    TypeError
        For an ``interactions`` that is not an ``Interactions``, or a non-bool
        ``interaction_values``.
    """
    if not isinstance(interaction_values, (bool, np.bool_)):
        raise InputTypeError(
            f"interaction_values must be True or False, got {interaction_values!r}."
        )
    if interactions is not None and not isinstance(interactions, Interactions):
        raise InputTypeError(
            "interactions must be the Interactions of treeinner.tree_shap_interactions, got "
            f"{type(interactions).__name__}."
        )
    if isinstance(attribution, Interactions):
        if interactions is None:
            interactions = attribution
        attribution = Attribution(
            values=np.asarray(attribution.values).sum(axis=2),
            bias=attribution.bias,
            feature_names=attribution.feature_names,
            index=attribution.index,
        )
    v, suffix = _attribution_values(attribution, output)
    j = _feature_index(attribution, feature)
    auto = isinstance(color, str) and color == "auto"
    k = None if color is None or auto else _feature_index(attribution, color, "color feature")
    n = v.shape[0]
    Xv, cats = _feature_matrix(attribution.feature_names, X, n)
    names = [str(f) for f in attribution.feature_names]

    iv = None
    if auto or interaction_values:
        if interactions is not None and model is not None:
            raise InputError("Pass interactions= or model=, not both.")
        if interactions is None:
            if model is None:
                why = 'color="auto"' if auto else "interaction_values=True"
                raise InputError(
                    f"{why} needs SHAP interaction values: pass "
                    "interactions=treeinner.tree_shap_interactions(model, X), or model=."
                )
            interactions = tree_shap_interactions(model, X)
        if [str(f) for f in interactions.feature_names] != names:
            raise InputError(
                "interactions are of other features than the attribution: "
                f"{list(interactions.feature_names)[:10]} vs {names[:10]}."
            )
        iv = _interaction_values(interactions, output)
        if iv.shape[0] != n:
            raise InputError(
                f"interactions have {iv.shape[0]} rows, the attribution {n}: explain the same rows."
            )
        if auto:
            k = _strongest_partner(iv, j)

    x, y = Xv[:, j], v[:, j]
    ylabel = f"attribution of {names[j]}{suffix}"
    if iv is not None and interaction_values:
        if k is None or k == j:
            y, ylabel = iv[:, j, j], f"main effect of {names[j]}{suffix}"
        else:
            y = 2.0 * iv[:, j, k]
            ylabel = f"SHAP interaction of {names[j]} and {names[k]}{suffix}"

    plt = _pyplot()
    ax = _axes(ax, 6.5 if k is not None else 5.5, 4.5)
    if k is None:
        ax.scatter(x, y, s=12, linewidths=0, alpha=0.8, label=names[j])
    else:
        c = Xv[:, k]
        has = np.isfinite(c)
        finite = c[has]
        lo, hi = np.percentile(finite, [5, 95]) if finite.size else (0.0, 1.0)
        if hi <= lo and finite.size:
            lo, hi = float(finite.min()), float(finite.max())
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        sc = ax.scatter(
            x[has], y[has], c=finite, cmap=_CMAP, vmin=lo, vmax=hi, s=12, linewidths=0,
            alpha=0.8, label=names[j], zorder=3,
        )  # fmt: skip
        if not np.all(has):
            ax.scatter(
                x[~has], y[~has], color=_MISSING_COLOR, s=12, linewidths=0, alpha=0.8,
                label=f"{names[k]} missing", zorder=2,
            )  # fmt: skip
        cb = plt.colorbar(sc, ax=ax)
        cb.set_label(names[k])
        if k in cats:
            _category_ticks(cb.ax.yaxis, cats[k], 20)
    if j in cats:
        _category_ticks(ax.xaxis, cats[j], _MAX_CATEGORY_LABELS)
    ax.axhline(0.0, color="#555555", linewidth=0.8, zorder=1)
    ax.set_xlabel(names[j])
    ax.set_ylabel(ylabel)
    title = f"Dependence on {names[j]}"
    if auto and k is not None:
        title += f"\n(colour: strongest interaction, {names[k]})"
    ax.set_title(title)
    return ax


# ---------------------------------------------------------------------- interactions
def _pair_matrix(values: Any, output: int | None) -> tuple[pd.DataFrame, bool, str]:
    """The p x p matrix to draw, whether it is signed, and its colour bar label."""
    if isinstance(values, Interactions):
        iv = _interaction_values(values, output)
        names = [str(f) for f in values.feature_names]
        m = np.abs(iv).mean(axis=0) if iv.shape[0] else np.zeros(iv.shape[1:])
        suffix = f" (output {output})" if np.ndim(values.values) == 4 else ""
        return (
            pd.DataFrame(m, index=names, columns=names),
            False,
            (f"mean |SHAP interaction value|{suffix}"),
        )
    if isinstance(values, pd.DataFrame):
        if output is not None:
            raise InputError(
                "output= applies to Interactions; for a DataFrame pick the class when computing "
                "it (tree_inner_interactions(..., output=))."
            )
        rows = [str(i) for i in values.index]
        cols = [str(c) for c in values.columns]
        if rows != cols:
            raise InputError(
                "The DataFrame must be square with the same features, in the same order, on "
                "both axes (as tree_inner_interactions returns it)."
            )
        if not all(pd.api.types.is_numeric_dtype(t) for t in values.dtypes) or any(
            pd.api.types.is_bool_dtype(t) for t in values.dtypes
        ):
            raise InputError("The DataFrame's columns must all be numeric.")
        m = values.to_numpy(dtype=np.float64)
        return pd.DataFrame(m, index=rows, columns=cols), True, "held-out pair importance"
    raise InputTypeError(
        "values must be the Interactions of treeinner.tree_shap_interactions or the DataFrame of "
        f"treeinner.tree_inner_interactions, got {type(values).__name__}."
    )


@public
def interactions(
    values: Any,
    *,
    top: int | None = 20,
    bottom: int | None = None,
    output: int | None = None,
    diagonal: bool = True,
    annotate: bool | None = None,
    ax: Any = None,
) -> Any:
    """Heatmap of pairwise interactions: mean |SHAP interaction value| over the rows, or the
    signed held-out pair importance of ``tree_inner_interactions``.

    Features are ranked by their total, the sum of their row of the matrix (the diagonal
    included): for ``tree_inner_interactions`` this is the feature's
    ``tree_inner(..., attribution="shap")``, for SHAP interaction values at least its mean
    |SHAP value|. The ``top`` ranked highest are drawn, followed by the ``bottom`` ranked
    lowest, both axes in ranking order (highest at the top left), with dashed lines between
    the two groups where features were left out.

    Parameters
    ----------
    values : Interactions or pandas.DataFrame
        The ``Interactions`` of ``treeinner.tree_shap_interactions`` (drawn: the mean over
        rows of |values|, with a sequential colour map from 0), or the p x p DataFrame of
        ``treeinner.tree_inner_interactions`` (drawn as it is, signed, with a diverging colour
        map centred at 0: red positive, blue negative, equally saturated at +- the largest
        |value| shown).
    top : int or None, default 20
        Number of features ranked highest shown; None: every feature (in ranking order).
    bottom : int, optional
        Number of features ranked lowest shown as well, among those ``top`` leaves out.
        Default: 0 for ``Interactions``; for a DataFrame the features with a negative total,
        at most 5 of them (negative held-out scores: what the model learnt that does not hold
        on these rows).
    output : int, optional
        For multi-output ``Interactions``, the output (class) to draw; required there.
    diagonal : bool, default True
        Draw the diagonal (main effects). False: leave it blank and scale the colours by the
        off-diagonal cells only (main effects are often much larger than interactions).
    annotate : bool, optional
        Write each cell's value in it; default: when at most 12 features are shown.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure otherwise.

    Returns
    -------
    matplotlib.axes.Axes
        One image (``ax.images[0]``) whose array is the drawn matrix (NaN, masked, on a blank
        diagonal), feature names as tick labels on both axes (x rotated 90 degrees; the font
        shrinks beyond 25 features), and a colour bar.

    Raises
    ------
    TypeError
        For values that are neither ``Interactions`` nor a DataFrame.
    ValueError
        For a DataFrame that is not square with the same features on both axes or not
        numeric, no features, a bad ``top``, ``bottom`` or ``output``.
    """
    frame, signed, label = _pair_matrix(values, output)
    p = frame.shape[0]
    if p == 0:
        raise InputError("There are no features to plot.")
    if top is not None:
        top = _positive_int("top", top)
    if bottom is not None:
        bottom = _check_count0("bottom", bottom)
        if top is None:
            raise InputError("bottom= needs top= (with top=None every feature is shown).")
    for name, flag in (("diagonal", diagonal), ("annotate", annotate)):
        if not (isinstance(flag, (bool, np.bool_)) or (name == "annotate" and flag is None)):
            raise InputTypeError(f"{name} must be True or False, got {flag!r}.")
    m = frame.to_numpy()
    total = np.nansum(m, axis=1)
    order = np.argsort(-total, kind="stable")
    gap = None
    if top is not None:
        if bottom is None:
            bottom = min(5, int(np.sum(total < 0))) if signed else 0
        order, gap = _top_bottom(order, top, bottom)
    shown = m[np.ix_(order, order)].copy()
    if not diagonal:
        np.fill_diagonal(shown, np.nan)
    names = [str(frame.index[i]) for i in order]
    k = len(order)

    plt = _pyplot()
    size = float(np.clip(2.5 + 0.3 * k, 4.5, 16.0))
    ax = _axes(ax, size + 1.2, size)
    finite = shown[np.isfinite(shown)]
    peak = float(np.abs(finite).max()) if finite.size else 0.0
    peak = peak if peak > 0 else 1.0
    from matplotlib import colormaps

    cmap = colormaps[_SIGNED_CMAP if signed else _ABS_CMAP].with_extremes(bad="white")
    im = ax.imshow(
        np.ma.masked_invalid(shown), cmap=cmap, vmin=-peak if signed else 0.0, vmax=peak,
        interpolation="nearest", aspect="equal",
    )  # fmt: skip
    fontsize = 10.0 if k <= 25 else max(4.0, 250.0 / k)
    ax.set_xticks(np.arange(k))
    ax.set_xticklabels(names, rotation=90, fontsize=fontsize)
    ax.set_yticks(np.arange(k))
    ax.set_yticklabels(names, fontsize=fontsize)
    if gap is not None:
        for line in (ax.axhline, ax.axvline):
            line(gap - 0.5, color="black", linewidth=1.0, linestyle="--")
    if annotate is None:
        annotate = k <= 12
    if annotate:
        for r in range(k):
            for c in range(k):
                cell = shown[r, c]
                if np.isfinite(cell):
                    # white on saturated red/blue and on viridis's dark low end
                    dark = abs(cell) > 0.6 * peak if signed else cell < 0.5 * peak
                    ax.text(
                        c, r, f"{cell:.2g}", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black",
                    )  # fmt: skip
    cb = plt.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    cb.set_label(label)
    what = "Held-out pair importance" if signed else "Mean |SHAP interaction value|"
    ax.set_title(what if k == p else f"{what} ({k} of {p} features)")
    return ax


@public
def selection_path(selector: Any, *, se: float = 1.0, annotate: bool = True, ax: Any = None) -> Any:
    """Held-out loss against the number of features kept, for a recursive selection.

    One point per step of ``TreeInnerSelector(strategy="recursive")``: the mean held-out loss
    of the models fit on that step's features, with error bars of ``se`` standard errors of
    its paired difference to the best step (every step scores the same rows, so these are
    the bars that say whether two steps differ), the best step and the chosen one marked,
    and beside each point the features dropped after it.

    Parameters
    ----------
    selector : TreeInnerSelector or pandas.DataFrame
        A selector fitted with ``strategy="recursive"``, or its ``path_``.
    se : float, default 1.0
        Half-width of the error bars in standard errors (1: the one-s.e. rule's band).
    annotate : bool, default True
        Write the features each step dropped beside its point (at most four names, then a
        count).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure otherwise.

    Returns
    -------
    matplotlib.axes.Axes
    """
    path = getattr(selector, "path_", selector)
    if not isinstance(path, pd.DataFrame) or not {"n_features", "loss", "diff_se"} <= set(
        path.columns
    ):
        raise InputTypeError(
            "selection_path needs a TreeInnerSelector fitted with strategy='recursive' (or its "
            f"path_), got {type(selector).__name__}."
        )
    if isinstance(se, bool) or not isinstance(se, (int, float)) or not se >= 0:
        raise InputError(f"se must be a number >= 0, got {se!r}.")
    ax = _axes(ax, 7.0, 4.0)
    n = path["n_features"].to_numpy()
    loss = path["loss"].to_numpy()
    err = float(se) * path["diff_se"].to_numpy()
    ax.errorbar(n, loss, yerr=err, fmt="o-", color="#1f77b4", ecolor="#9ecae1", capsize=3,
                lw=1.2, ms=4, label="held-out loss")  # fmt: skip
    best = path["best"].to_numpy()
    ax.axhline(loss[best][0], color="#969696", lw=0.8, ls=":")
    ax.plot(n[best], loss[best], "s", ms=9, mfc="none", mec="#2ca02c", mew=1.5, label="best")
    if "chosen" in path:
        chosen = path["chosen"].to_numpy()
        ax.plot(n[chosen], loss[chosen], "o", ms=11, mfc="none", mec="#d62728", mew=1.8,
                label=f"chosen ({int(n[chosen][0])} features)")  # fmt: skip
    if annotate and "dropped" in path:
        for x, yv, dropped in zip(n, loss, path["dropped"]):
            if not dropped:
                continue
            names = list(dropped)
            text = ", ".join(map(str, names[:4])) + (
                f" +{len(names) - 4}" if len(names) > 4 else ""
            )
            ax.annotate("- " + text, (x, yv), textcoords="offset points", xytext=(4, 6),
                        fontsize=7, color="#525252", rotation=20)  # fmt: skip
    ax.set_xlabel("features kept")
    ax.set_ylabel("mean held-out loss")
    ax.invert_xaxis()  # elimination runs left to right
    ax.legend(frameon=False, fontsize=8)
    return ax
