"""scikit-learn's ``HistGradientBoostingRegressor`` and ``HistGradientBoostingClassifier``:
the fitted predictors (``_predictors``, one ``TreePredictor`` per iteration and output) into
the ensemble's records.

Routing rule (float64, ``_predict_from_raw_data``): a numeric node sends ``x`` left iff
``x <= num_threshold`` (``+inf`` for a split that separates NaN from every number); NaN goes
to ``missing_go_to_left``. A categorical node sends the categories of its left bitset left,
the other categories seen in training right, and NaN, negative and unseen values to the
missing side. Since scikit-learn 1.4 every categorical feature is ordinally encoded first
(``_preprocessor``, an ``OrdinalEncoder`` over the sorted training categories, unseen values
NaN) and the encoded columns are moved to the front: nodes index the encoded columns, which
the conversion maps back to the estimator's own columns. Integer categories become sets of
their raw values (X gives the numbers); string categories become sets of codes into the
training categories the ensemble stores (X gives the strings or a pandas categorical
column). Every unseen value then matches no set: a node whose missing side is left keeps
the *right* categories as a right-going set, one whose missing side is right the left ones.

Values: a leaf's ``value`` is ``learning_rate * -G / (H + l2 + 1e-15)``; an inner node's is
its unshrunk ``-G / (H + l2 + 1e-15)``, except the root's, which is 0. ``count`` is the
training row count; ``gain`` is the second-order gain, except at the root, whose gain is
computed against value 0 (``G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2)``). No hessian sums are
stored. Where the hessian is constant (squared error, no sample weights) they are the
counts. Otherwise they are recovered from the stored values and gains (u: the unshrunk
values, a = H + l2): a child of the root from its own split, whose children's a solve the
linear equations ``G_t = G_L + G_R`` and ``gain_t = u_L^2 a_L + u_R^2 a_R - u_t^2 a_t``, or,
for a leaf child, from the root's gain; then top down, every split's children from
``G_t = G_L + G_R`` and ``H_t = H_L + H_R`` (well conditioned wherever the children's values
differ; else the split's gain equations, else the row counts, which leave equal values
unchanged). A stump (a root with two leaf children) has one equation for two unknowns: its
tree keeps NaN covers (PreDecomp then needs ``reference=``). Recovered covers are checked
against every stored split gain and inner value (so values clipped by ``monotonic_cst`` are
refused too); the split gains are recomputed from them (so the root's too).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _format as fmt
from .._errors import InputError, UnsupportedModelError
from . import _sk_dump
from ._common import assemble, bitset, cat_sets, corrupt
from ._records import INEXACT, Booster, Conversion, Objective, Overrides, Parts, Tree

__all__ = ["dump", "convert", "kernel_objective"]

#: the denominator's constant of scikit-learn's ``compute_node_value``
_EPS = 1e-15
#: relative agreement required between recovered covers and the stored inner values
_RTOL = 1e-6
_CODES = {
    "HalfSquaredError": fmt.SQUARED,
    "HalfBinomialLoss": fmt.LOGISTIC,
    "HalfMultinomialLoss": fmt.SOFTMAX,
    "HalfPoissonLoss": fmt.POISSON,
    "HalfGammaLoss": fmt.GAMMA,
}
_PREDICTION_ONLY = {
    "AbsoluteError": "absolute_error leaves are refit to residual medians",
    "PinballLoss": "quantile leaves are refit to residual quantiles",
}
_FIELDS = (
    "value",
    "count",
    "feature_idx",
    "num_threshold",
    "missing_go_to_left",
    "left",
    "right",
    "gain",
    "is_leaf",
    "is_categorical",
    "bitset_idx",
)


# ---------------------------------------------------------------------- dump
def dump(est: Any) -> bytes:
    """Everything the conversion reads from a fitted HistGradientBoosting estimator."""
    preds = getattr(est, "_predictors", None)
    if preds is None or not hasattr(est, "_baseline_prediction"):
        raise InputError(f"The {type(est).__name__} is not fitted; call fit() first.")
    if len(preds) == 0:
        raise InputError(f"The {type(est).__name__} has no trees (max_iter=0?).")
    loss = type(est._loss).__name__
    if loss not in _CODES and loss not in _PREDICTION_ONLY:
        raise UnsupportedModelError(
            f"HistGradientBoosting loss {est.loss!r} ({loss}) is not supported (supported: "
            "squared_error, absolute_error, quantile, poisson, gamma, log_loss)."
        )
    arrays, n_nodes, n_sets = _tree_arrays(preds)
    n_features = int(est.n_features_in_)
    columns, categories, known = _categorical(est, n_features)
    arrays.update(known)
    names, named = _sk_dump.feature_names(est, n_features)
    meta = {
        "kind": "hgb",
        "loss": loss,
        "loss_param": str(est.loss),
        "n_iter": len(preds),
        "per_iter": len(preds[0]),
        "learning_rate": float(est.learning_rate),
        "l2": float(est.l2_regularization),
        "constant_hessian": bool(getattr(est._loss, "constant_hessian", False)),
        "monotonic": est.monotonic_cst is not None,
        "class_weight": getattr(est, "class_weight", None) is not None,
        "names": names,
        "named": named,
        "columns": columns,
        "categories": categories,
        "version": _version(),
    }
    arrays.update(
        n_nodes=np.asarray(n_nodes, np.int64),
        n_sets=np.asarray(n_sets, np.int64),
        baseline=np.asarray(est._baseline_prediction, np.float64).ravel(),
    )
    return _sk_dump.write(meta, arrays)


def _version() -> str:
    """The installed scikit-learn's version."""
    import sklearn

    return str(sklearn.__version__)


def _tree_arrays(preds: Any) -> tuple[dict[str, np.ndarray], list[int], list[int]]:
    """The predictors' node fields and left bitsets, concatenated in boosting order."""
    nodes = [p.nodes for it in preds for p in it]
    sets = [
        np.asarray(p.raw_left_cat_bitsets, np.uint32).reshape(-1, 8) for it in preds for p in it
    ]
    cat = np.concatenate(nodes)
    out = {f"node_{k}": np.asarray(cat[k]) for k in _FIELDS}
    out["bitsets"] = np.concatenate(sets) if sets else np.zeros((0, 8), np.uint32)
    return out, [n.shape[0] for n in nodes], [s.shape[0] for s in sets]


def _categorical(est: Any, n_features: int) -> tuple[list[int], list, dict[str, np.ndarray]]:
    """The estimator's column of every predictor column (the encoded categorical columns come
    first since scikit-learn 1.4), the training categories of every predictor column (None
    for numeric ones), and the known categories' codes."""
    pre = getattr(est, "_preprocessor", None)
    is_cat = getattr(est, "is_categorical_", None)
    if pre is None or is_cat is None:
        columns = list(range(n_features))
        cats: list = [None] * n_features
        if is_cat is not None and np.any(is_cat):
            raise UnsupportedModelError(
                "HistGradientBoosting models with categorical features from scikit-learn "
                "before 1.4 (no ordinal encoder) are not supported."
            )
    else:
        is_cat = np.asarray(is_cat, dtype=bool)
        columns = [int(j) for j in np.flatnonzero(is_cat)] + [
            int(j) for j in np.flatnonzero(~is_cat)
        ]
        enc = pre.named_transformers_["encoder"]
        cats = [None] * n_features
        for pos, values in enumerate(enc.categories_):
            vals = list(values)
            if vals and isinstance(vals[-1], float) and np.isnan(vals[-1]):
                vals = vals[:-1]
            cats[pos] = [_sk_dump.plain(v) for v in vals]
    known = {}
    bm = est._bin_mapper
    for pos in range(n_features):
        if cats[pos] is not None:
            known[f"known_{pos}"] = np.asarray(bm.bin_thresholds_[pos], np.float64)
    return columns, cats, known


# ---------------------------------------------------------------------- conversion
class _Cats(NamedTuple):
    """How one predictor column's categories are written into sets: ``values`` (the number
    a set holds for each code) and whether X gives strings (``coded``: the codes are read)."""

    values: np.ndarray
    coded: bool


def _category_plan(meta: dict, arrays: dict) -> tuple[dict[int, _Cats], dict[int, list]]:
    """Per categorical predictor column its ``_Cats``, and the ensemble's ``categories``
    (training categories of the string-valued features, by the estimator's column)."""
    plan, stored = {}, {}
    for pos, cats in enumerate(meta["categories"]):
        if cats is None:
            continue
        col = meta["columns"][pos]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cats)
        if numeric:
            v = np.asarray(cats, dtype=np.float64)
            if np.any(v < 0) or np.any(v != np.round(v)) or np.any(v >= 2**31):
                raise UnsupportedModelError(
                    f"HistGradientBoosting categorical feature {meta['names'][col]!r} has "
                    "categories that are not non-negative integers; treeinner reads numeric "
                    "categories as their values. Encode them as integers or strings."
                )
            plan[pos] = _Cats(v, False)
        else:
            plan[pos] = _Cats(np.arange(len(cats), dtype=np.float64), True)
            stored[col] = [str(c) for c in cats]
    return plan, stored


def _split_sets(
    nd: dict, lo: int, n: int, sets: np.ndarray, arrays: dict, plan: dict
) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """Split types, default directions and categorical sets of one tree: a node whose
    missing side is left sends its right categories right (``CAT_SET_RIGHT``), else its left
    categories left (``CAT_SET_LEFT``), so that every unseen value goes to the missing side."""
    st = np.zeros(n, dtype=np.int8)
    words: dict[int, np.ndarray] = {}
    miss_left = nd["missing_go_to_left"][lo : lo + n].astype(bool)
    for i in np.flatnonzero(nd["is_categorical"][lo : lo + n] & ~nd["is_leaf"][lo : lo + n]):
        pos = int(nd["feature_idx"][lo + i])
        bits = np.unpackbits(sets[int(nd["bitset_idx"][lo + i])].view(np.uint8), bitorder="little")
        left = np.flatnonzero(bits)
        known = arrays[f"known_{pos}"].astype(np.int64)
        cats = plan[pos]
        if miss_left[i]:
            members, st[i] = np.setdiff1d(known, left), fmt.CAT_SET_RIGHT
        else:
            members, st[i] = left, fmt.CAT_SET_LEFT
        members = members[members < cats.values.shape[0]]
        words[int(i)] = bitset(cats.values[members].astype(np.int64))
    return st, miss_left.astype(np.uint8), words


def _tree(
    nd: dict, lo: int, n: int, sets: np.ndarray, arrays: dict, meta: dict, plan: dict
) -> tuple[Tree, np.ndarray]:
    """One predictor as a ``Tree`` (scikit-learn's node order and numbers) and its unshrunk
    stored values (NaN at the root)."""
    leaf = nd["is_leaf"][lo : lo + n].astype(bool)
    left = np.where(leaf, -1, nd["left"][lo : lo + n].astype(np.int64))
    right = np.where(leaf, -1, nd["right"][lo : lo + n].astype(np.int64))
    if np.any(~leaf & ((left <= 0) | (left >= n) | (right <= 0) | (right >= n))):
        raise corrupt("scikit-learn", "a predictor's child index is outside its tree.")
    cols = np.asarray(meta["columns"], dtype=np.int64)
    fidx = nd["feature_idx"][lo : lo + n].astype(np.int64)
    if np.any(~leaf & ((fidx < 0) | (fidx >= cols.shape[0]))):
        raise corrupt("scikit-learn", "a split's feature is outside the model's features.")
    feature = np.where(leaf, -1, cols[np.clip(fidx, 0, cols.shape[0] - 1)])
    st, default_left, words = _split_sets(nd, lo, n, sets, arrays, plan)
    thr = np.where(leaf | (st != fmt.NUMERIC), np.nan, nd["num_threshold"][lo : lo + n])
    value = nd["value"][lo : lo + n].astype(np.float64)
    sizes, cat_words = cat_sets(n, words) if words else (None, None)
    tree = Tree(
        left=left,
        right=right,
        feature=feature,
        threshold=thr,
        split_type=st,
        default_left=np.where(leaf, 0, default_left).astype(np.uint8),
        missing_type=np.full(n, fmt.MISSING_NAN, dtype=np.int8),
        value=np.where(leaf, value, 0.0),
        cover=np.full(n, np.nan),
        count=nd["count"][lo : lo + n].astype(np.float64),
        gain=np.where(leaf, 0.0, nd["gain"][lo : lo + n]),
        leaf_id=np.where(leaf, np.arange(n), -1),
        cat_sizes=sizes,
        cat_words=cat_words,
    )
    u = np.where(leaf, value / meta["learning_rate"], value)
    u[0] = np.nan if n > 1 else u[0]
    return tree, u


def recover(tree: Tree, u: np.ndarray, lam: float, constant: bool) -> Tree | None:
    """The tree with its hessian covers and second-order split gains, recovered from the
    unshrunk stored values ``u`` (NaN at the root) and the stored gains (see the module
    docstring); None when they are underdetermined (a stump) or disagree with the stored
    values (monotonic constraints clip them)."""
    n = tree.left.shape[0]
    if n == 1:
        return tree._replace(cover=tree.count.copy())
    inner = np.flatnonzero(tree.left >= 0)
    H: np.ndarray | None
    if constant:
        H = _sum_up(tree, np.where(tree.left < 0, tree.count, np.nan), inner)
    else:
        H = _solve_covers(tree, u, lam, inner)
    if H is None or not np.all(np.isfinite(H)) or np.any(H < -_RTOL * np.abs(H).max()):
        return None
    H = np.maximum(H, 0.0)
    G = _gradients(tree, u, H, lam, inner)
    scale = np.abs(u[tree.left < 0]).max()
    a = H + lam
    L, R = tree.left[inner], tree.right[inner]
    terms = G[L] ** 2 / a[L] + G[R] ** 2 / a[R]
    gain = np.zeros(n)
    gain[inner] = terms - G[inner] ** 2 / a[inner]
    stored = np.where(inner == 0, terms, gain[inner])  # the root's is against value 0
    ok = np.all(np.abs(stored - tree.gain[inner]) <= _RTOL * (terms + G[inner] ** 2 / a[inner]))
    for t in inner[1:]:  # the recovered sums reproduce every stored inner value
        ok = ok and abs(-G[t] / a[t] - u[t]) <= _RTOL * (abs(u[t]) + scale)
    if not ok:
        # constant hessians: the counts are the covers whatever the leaves (refit ones)
        return tree._replace(cover=H) if constant else None
    return tree._replace(cover=H, gain=gain)


def _split_equations(tree: Tree, u: np.ndarray, lam: float, t: int) -> np.ndarray | None:
    """The children's hessian sums at split t (below the root) from ``G_t = G_L + G_R`` and
    its gain; None when the equations are (nearly) singular: children of (nearly) equal
    values, whose split of the covers leaves every node value unchanged."""
    L, R = tree.left[t], tree.right[t]
    m = np.array([[u[t] - u[L], u[t] - u[R]], [u[L] ** 2 - u[t] ** 2, u[R] ** 2 - u[t] ** 2]])
    scale = max(abs(u[t]), abs(u[L]), abs(u[R]))
    if scale == 0 or abs(np.linalg.det(m)) <= 1e-7 * scale**3:
        return None
    b = np.array([u[t] * lam, tree.gain[t] - u[t] ** 2 * lam])
    return np.linalg.solve(m, b) - lam


def _solve_covers(tree: Tree, u: np.ndarray, lam: float, inner: np.ndarray) -> np.ndarray | None:
    """Hessian sums of every node: the root's children from the split equations of their own
    children (``_split_equations``) or, for a leaf child, the root's gain; then top down,
    each split's children from ``G_t = G_L + G_R`` and ``H_t = H_L + H_R`` (well
    conditioned wherever the children's values differ), else from the split's own equations,
    else (children of equal values, whose division leaves every value unchanged) in
    proportion to the row counts. None for a stump."""
    H = np.full(tree.left.shape[0], np.nan)
    for c in (tree.left[0], tree.right[0]):
        if tree.left[c] >= 0:
            sol = _split_equations(tree, u, lam, c)
            if sol is None:
                return None
            H[c] = sol.sum()
    if np.isnan(H[tree.left[0]]) or np.isnan(H[tree.right[0]]):
        if not _root_leaf(tree, u, H, lam):
            return None
    H[0] = H[tree.left[0]] + H[tree.right[0]]
    for t in inner[1:]:
        L, R = tree.left[t], tree.right[t]
        spread = np.abs(u[[t, L, R]]).max()
        if abs(u[L] - u[R]) > 1e-6 * spread:
            H[L] = ((u[t] - u[R]) * H[t] + lam * (u[t] - u[L] - u[R])) / (u[L] - u[R])
        else:
            sol = _split_equations(tree, u, lam, t)
            share = tree.count[L] / max(tree.count[t], 1.0)
            H[L] = H[t] * share if sol is None else H[t] * sol[0] / max(sol.sum(), 1e-300)
        H[R] = H[t] - H[L]
    return H


def _sum_up(tree: Tree, H: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Inner covers as the sums of their children's (children come after their parent)."""
    H = H.copy()
    for t in inner[::-1]:
        H[t] = H[tree.left[t]] + H[tree.right[t]]
    return H


def _root_leaf(tree: Tree, u: np.ndarray, H: np.ndarray, lam: float) -> bool:
    """Complete ``H`` at a child of the root from the root's stored gain (computed against
    value 0: ``u_L^2 a_L + u_R^2 a_R``) when its sibling is known; False when it is not."""
    L, R = tree.left[0], tree.right[0]
    if np.isnan(H[L]) == np.isnan(H[R]) or tree.left[L if np.isnan(H[L]) else R] >= 0:
        return False
    x, o = (L, R) if np.isnan(H[L]) else (R, L)
    if u[x] == 0:
        return False
    H[x] = (tree.gain[0] - u[o] ** 2 * (H[o] + lam)) / u[x] ** 2 - lam
    return True


def _gradients(tree: Tree, u: np.ndarray, H: np.ndarray, lam: float, inner: np.ndarray):
    """Gradient sums: a leaf's from its value, an inner node's the sum of its children's."""
    G = np.where(tree.left < 0, -u * (H + lam), np.nan)
    for t in inner[::-1]:
        G[t] = G[tree.left[t]] + G[tree.right[t]]
    return G


def convert(data: bytes, given: Overrides) -> Conversion:
    """The dump of ``dump`` as an ensemble (warnings returned, not given)."""
    meta, arrays = _sk_dump.read(data)
    nd = {k[5:]: v for k, v in arrays.items() if k.startswith("node_")}
    plan, stored = _category_plan(meta, arrays)
    lam = float(meta["l2"]) if given.reg_lambda is None else float(given.reg_lambda)
    lr = float(meta["learning_rate"]) if given.learning_rate is None else float(given.learning_rate)
    k, n_iter = int(meta["per_iter"]), int(meta["n_iter"])
    inexact, trees, stumps = _inexact(meta), [], 0
    lo, so = 0, 0
    for n, s in zip(arrays["n_nodes"], arrays["n_sets"]):
        tree, u = _tree(nd, lo, int(n), arrays["bitsets"][so : so + s], arrays, meta, plan)
        done = recover(tree, u, float(meta["l2"]) + _EPS, meta["constant_hessian"])
        if done is None:
            stumps += 1
            done = tree
        trees.append(done)
        lo, so = lo + int(n), so + int(s)
    if stumps:
        inexact.append(
            f"{stumps} of {len(trees)} trees do not determine their hessian sums (a root "
            "with two leaves, or values clipped by constraints): their covers are unknown "
            "and their stored root gains are computed against value 0"
        )
    return assemble(
        Parts(
            booster=_BOOSTER,
            trees=trees,
            tree_group=np.arange(len(trees)) % k,
            tree_iteration=np.arange(len(trees)) // k,
            learning_rate=np.full(len(trees), lr),
            base_margin=arrays["baseline"],
            feature_names=meta["names"],
            named=meta["named"],
            reg_lambda=lam,
            objective=Objective(meta["loss_param"], {"loss": meta["loss"]}, k),
            source_version=meta["version"],
            categories=stored,
            params={
                "learning_rate": meta["learning_rate"],
                "l2_regularization": meta["l2"],
                "n_iter_": n_iter,
                "estimator": "HistGradientBoosting",
                "class_weight": meta["class_weight"],
            },
            inexact=inexact,
        )
    )


def _inexact(meta: dict) -> list[str]:
    """Why leaf values are not exactly -lr G / (H + l2) with the booster's own gradients."""
    out = []
    if meta["loss"] in _PREDICTION_ONLY:
        out.append(_PREDICTION_ONLY[meta["loss"]])
    if meta["monotonic"]:
        out.append("monotonic_cst clips node values to bounds")
    return out


def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """The ``KernelObjective`` of scikit-learn's losses (``_common.KernelObjective``): the
    half losses' plain derivatives (softmax hessian p (1 - p), Poisson hessian exp(F))."""
    loss = params.get("loss", "")
    if loss not in _CODES:
        raise UnsupportedModelError(
            f"scikit-learn loss {name!r} has no per-row gradient here (its leaves are not "
            "Newton steps); such models are supported for prediction, Saabas and TreeSHAP only."
        )
    prm = prm.copy()
    prm[fmt.P_HESS_SCALE] = float(params.get("hess_scale", 1.0))
    prm[fmt.P_MIN_HESS] = 0.0
    prm[fmt.P_MAX_DELTA] = 0.0
    return _CODES[loss], prm


#: HistGradientBoosting's conventions: float64 thresholds and sums, TreeSHAP weighted by
#: training row counts (as shap's TreeExplainer weights these trees)
_BOOSTER = Booster("sklearn", "float64 <=", False, "count", kernel_objective, INEXACT)
