"""scikit-learn's ``GradientBoostingRegressor`` and ``GradientBoostingClassifier``: the
fitted ``estimators_`` (one ``DecisionTreeRegressor`` per stage and output) into the
ensemble's records.

Routing rule: the trees read X as float32 and send a row left iff ``float32(x) <=
threshold`` (a float64 threshold). Since float32(x) is a float32, that is ``float32(x) <=
s`` with s the threshold rounded down to float32: the ``"float32 <="`` rule with s. NaN
takes the tree's ``missing_go_to_left`` (scikit-learn itself refuses NaN and infinities in
these models' input). Leaf ids are the trees' node numbers, as ``apply`` returns them.

Values: the margin is ``init + learning_rate * sum of leaf values`` (``predict_stages``), so
every leaf's value times the learning rate is the ensemble's leaf value, and the init
estimator's constant prediction (a ``DummyRegressor``/``DummyClassifier``, or ``"zero"``)
in margin space is the base margin. The trees are fit to the negative gradient by least
squares (``friedman_mse``); then each leaf is replaced by a line search: unchanged (the
mean residual, -G/H with H the weight sum) for squared error, a Newton step -G/H for binary
log_loss, ``(K - 1) / K`` times it for multiclass log_loss (a softmax hessian scaled by
K / (K - 1)), a quantile or median of the residuals for absolute_error, huber and quantile.
Inner nodes keep the mean residual of the tree fit. So: ``weighted_n_node_samples`` is
the hessian cover for squared error (PreDecomp exact from the stored values, lambda = 0);
for log_loss the hessian sums are not stored (covers NaN: PreDecomp is exact with the
training data, ``reference=``; Saabas and TreeSHAP weigh by ``weighted_n_node_samples``);
the other losses have no gradient here (prediction, Saabas and TreeSHAP only). ``gain`` is
each split's weighted impurity decrease, what ``feature_importances_`` sums: for squared
error that is exactly the second-order gain of the total-gain identity.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import _format as fmt
from .._errors import InputError, UnsupportedModelError
from . import _sk_dump
from ._common import assemble, corrupt
from ._records import INEXACT, Booster, Conversion, Objective, Overrides, Parts, Tree
from ._sk_hgb import kernel_objective

__all__ = ["convert", "dump"]

_NEWTON = {"HalfBinomialLoss", "HalfMultinomialLoss"}
_LOSSES = {
    "HalfSquaredError",
    "AbsoluteError",
    "HuberLoss",
    "PinballLoss",
    "ExponentialLoss",
    *_NEWTON,
}
_FIELDS = (
    "children_left",
    "children_right",
    "feature",
    "threshold",
    "missing_go_to_left",
    "weighted_n_node_samples",
    "n_node_samples",
    "impurity",
)


def dump(est: Any) -> bytes:
    """Everything the conversion reads from a fitted GradientBoosting estimator."""
    trees = getattr(est, "estimators_", None)
    if trees is None or not hasattr(est, "init_"):
        raise InputError(f"The {type(est).__name__} is not fitted; call fit() first.")
    loss = type(est._loss).__name__
    if loss not in _LOSSES:
        raise UnsupportedModelError(f"GradientBoosting loss {est.loss!r} is not supported.")
    init = est.init_
    if not (isinstance(init, str) and init == "zero") and type(init).__name__ not in (
        "DummyRegressor",
        "DummyClassifier",
    ):
        raise UnsupportedModelError(
            f"GradientBoosting with init={type(init).__name__} is not supported: only the "
            "default init (a constant prediction) and init='zero' give a constant base margin."
        )
    n_features = int(est.n_features_in_)
    with warnings.catch_warnings():  # a row without the estimator's feature names
        warnings.simplefilter("ignore", UserWarning)
        base = est._raw_predict_init(np.zeros((1, n_features), dtype=np.float32))[0]
    flat = [e.tree_ for e in np.asarray(trees).ravel()]
    arrays = {
        k: np.concatenate([np.asarray(getattr(t, k)).astype(np.float64) for t in flat])
        for k in _FIELDS
        if k != "missing_go_to_left" or hasattr(flat[0], k)
    }
    arrays["value"] = np.concatenate([np.asarray(t.value, np.float64)[:, 0, 0] for t in flat])
    arrays["n_nodes"] = np.array([t.node_count for t in flat], dtype=np.int64)
    arrays["base"] = np.asarray(base, np.float64)
    names, named = _sk_dump.feature_names(est, n_features)
    meta = {
        "kind": "gb",
        "loss": loss,
        "loss_param": str(est.loss),
        "per_iter": int(np.asarray(trees).shape[1]),
        "learning_rate": float(est.learning_rate),
        "subsample": float(est.subsample),
        "init": "zero" if isinstance(init, str) else type(init).__name__,
        "names": names,
        "named": named,
        "version": _version(),
    }
    return _sk_dump.write(meta, arrays)


def _version() -> str:
    """The installed scikit-learn's version."""
    import sklearn

    return str(sklearn.__version__)


def _tree(a: dict, lo: int, n: int, lr: float, squared: bool) -> Tree:
    """One stage's tree as a ``Tree`` (scikit-learn's node numbers)."""
    sl = slice(lo, lo + n)
    left = a["children_left"][sl].astype(np.int64)
    right = a["children_right"][sl].astype(np.int64)
    leaf = left < 0
    if np.any(~leaf & ((left <= 0) | (left >= n) | (right <= 0) | (right >= n))):
        raise corrupt("scikit-learn", "a tree's child index is outside its tree.")
    thr = a["threshold"][sl]
    # float32(x) <= t  iff  float32(x) <= (t rounded down to float32)
    t32 = thr.astype(np.float32)
    t32 = np.where(t32.astype(np.float64) > thr, np.nextafter(t32, np.float32(-np.inf)), t32)
    w, imp = a["weighted_n_node_samples"][sl], a["impurity"][sl]
    gain = np.zeros(n)
    inner = np.flatnonzero(~leaf)
    gain[inner] = (
        w[inner] * imp[inner]
        - w[left[inner]] * imp[left[inner]]
        - (w[right[inner]] * imp[right[inner]])
    )
    mgl = a.get("missing_go_to_left")
    return Tree(
        left=np.where(leaf, -1, left),
        right=np.where(leaf, -1, right),
        feature=np.where(leaf, -1, a["feature"][sl].astype(np.int64)),
        threshold=np.where(leaf, np.nan, t32.astype(np.float64)),
        split_type=np.zeros(n, dtype=np.int8),
        default_left=np.zeros(n, np.uint8) if mgl is None else (mgl[sl] * ~leaf).astype(np.uint8),
        missing_type=np.full(n, fmt.MISSING_NAN, dtype=np.int8),
        value=np.where(leaf, lr * a["value"][sl], 0.0),
        cover=w.copy() if squared else np.full(n, np.nan),
        count=w.copy(),
        gain=gain,
        leaf_id=np.where(leaf, np.arange(n), -1),
    )


def convert(data: bytes, given: Overrides) -> Conversion:
    """The dump of ``dump`` as an ensemble (warnings returned, not given)."""
    meta, a = _sk_dump.read(data)
    lr_stored = float(meta["learning_rate"])
    lr = lr_stored if given.learning_rate is None else float(given.learning_rate)
    loss, k = meta["loss"], int(meta["per_iter"])
    squared = loss == "HalfSquaredError"
    trees, lo = [], 0
    for n in a["n_nodes"]:
        trees.append(_tree(a, lo, int(n), lr_stored, squared))
        lo += int(n)
    params: dict[str, Any] = {"loss": loss}
    if loss == "HalfMultinomialLoss":
        params["hess_scale"] = k / (k - 1.0)
    return assemble(
        Parts(
            booster=_BOOSTER,
            trees=trees,
            tree_group=np.arange(len(trees)) % k,
            tree_iteration=np.arange(len(trees)) // k,
            learning_rate=np.full(len(trees), lr),
            base_margin=a["base"],
            feature_names=meta["names"],
            named=meta["named"],
            reg_lambda=0.0 if given.reg_lambda is None else float(given.reg_lambda),
            objective=Objective(meta["loss_param"], params, k),
            source_version=meta["version"],
            params={
                "learning_rate": lr_stored,
                "subsample": meta["subsample"],
                "init": meta["init"],
                "estimator": "GradientBoosting",
            },
            inexact=_inexact(meta),
        )
    )


def _inexact(meta: dict) -> list[str]:
    """Why leaf values are not -lr G / H with the booster's gradients over the training set."""
    out = []
    loss = meta["loss"]
    if loss not in _NEWTON and loss != "HalfSquaredError":
        out.append(f"loss {meta['loss_param']!r}: leaves are refit to residual quantiles")
    if meta["subsample"] < 1.0:
        out.append(f"subsample={meta['subsample']:g} < 1: leaves from in-bag rows only")
    return out


#: GradientBoosting's conventions: float32 inputs against float64 thresholds, float64 sums,
#: TreeSHAP weighted by the trees' weighted_n_node_samples (as shap weighs them)
_BOOSTER = Booster("sklearn", "float32 <=", False, "count", kernel_objective, INEXACT)
