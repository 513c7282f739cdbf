"""Standard errors of the unbiased gain: delta-method influences against a numpy reference,
the draw variance, per-split standard errors, and Monte Carlo coverage on simulated data."""

from __future__ import annotations

import functools
import json

import numba
import numpy as np
import pytest

import treeinner
from treeinner import _staged
from treeinner import unbiased as U

xgb = pytest.importorskip("xgboost")


@pytest.fixture(name="one_thread")
def _one_thread():
    """Numba on one thread: the Monte Carlo tests make hundreds of calls on small data, where
    starting the threads of every parallel kernel would cost more than the work."""
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(threads)


# ---------------------------------------------------------------------- the reference
def _grad(objective, y, F, c):
    """Gradient and hessian of every row for output c (XGBoost's conventions), from the
    margins F (n, n_outputs)."""
    if objective == "reg:squarederror":
        return F[:, c] - y, np.ones_like(y)
    if objective == "binary:logistic":
        p = 1.0 / (1.0 + np.exp(-F[:, c]))
        return p - y, np.maximum(p * (1.0 - p), 1e-16)
    e = np.exp(F - F.max(axis=1, keepdims=True))
    p = e[:, c] / e.sum(axis=1)
    return p - (y == c), np.maximum(2.0 * p * (1.0 - p), 1e-16)


def _below(left, right, u):
    if left[u] < 0:
        return [u]
    return _below(left, right, left[u]) + _below(left, right, right[u])


def reference(b, objective, X, y, w=None, min_samples=1, n_draws=1, exact=True):
    """Per-row jackknife-scaled influences of every split, node by node with explicit row
    sets.

    Returns ``phi`` (n_rows, n_features, n_outputs): every row's influences summed over the
    splits of its paths, ``splits``: a list of (global node, per-row influence of that split
    alone, its draw variance), and ``dv`` (n_features, n_outputs): the draw variances summed
    per feature (0 where ``exact``). Margins are XGBoost's own staged predictions, node
    memberships XGBoost's leaf indices; the training sums G come from the model's covers."""
    ens = treeinner.from_model(b)
    model = json.loads(b.save_raw("json"))["learner"]["gradient_booster"]["model"]
    trees, info = model["trees"], model["tree_info"]
    K = max(info) + 1
    n = X.shape[0]
    w = np.ones(n) if w is None else w
    margins = [np.tile(ens.base_margin, (n, 1))]
    for m in range(1, len(trees) // K):
        f = b.inplace_predict(X, iteration_range=(0, m), predict_type="margin")
        margins.append(np.asarray(f, dtype=np.float64).reshape(n, -1))
    leaf = b.predict(xgb.DMatrix(X, missing=np.nan), pred_leaf=True).reshape(n, -1)
    G, _ = U._training_sums(ens, None)
    phi = np.zeros((n, ens.n_features, K))
    dv = np.zeros((ens.n_features, K))
    splits = []
    for ti, tree in enumerate(trees):
        c = info[ti]
        g, h = _grad(objective, y, margins[ti // K], c)
        a, bb = w * g, w * h
        left, right = tree["left_children"], tree["right_children"]
        off = ens.tree_offsets[ti]
        for u in range(len(left)):
            if left[u] < 0:
                continue
            sets = [np.isin(leaf[:, ti], _below(left, right, v)) for v in (u, left[u], right[u])]
            k = min(sets[1].sum(), sets[2].sum())
            p = np.zeros(n)
            var_d = 0.0
            if k >= min_samples:
                for m, sign, v in zip(sets, (-1.0, 1.0, 1.0), (u, left[u], right[u])):
                    Hs = bb[m].sum()
                    if Hs == 0:
                        continue
                    r = a[m].sum() / Hs
                    Gv = G[off + v]
                    N = m.sum()
                    if N >= 2:  # the jackknife's N/(N-1); one row: uncentred
                        p[m] += sign * Gv * N / (N - 1) * (a[m] - r * bb[m]) / Hs
                    else:
                        p[m] += sign * Gv * a[m] / Hs
                    if not exact and N > k:
                        z = a[m] - r * bb[m]
                        var_d += Gv**2 * z.var() / bb[m].mean() ** 2 * (N - k) / (N - 1) / k
            var_d /= n_draws
            f = tree["split_indices"][u]
            phi[:, f, c] += p
            dv[f, c] += var_d
            splits.append((off + u, p, var_d))
    return phi, splits, dv


def _var(terms):
    """n/(n-1) times the centred sum of squares over rows (axis 0)."""
    n = terms.shape[0]
    return n / (n - 1) * ((terms - terms.mean(axis=0)) ** 2).sum(axis=0)


def _data(objective, seed, n, p=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 3] = rng.integers(0, 4, size=n)
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if objective == "binary:logistic":
        y = (s + rng.logistic(size=n) > 0).astype(float)
    elif objective == "multi:softprob":
        y = np.digitize(s + rng.normal(size=n), [-0.7, 0.7]).astype(float)
    else:
        y = s + rng.normal(size=n)
    return X, y


@functools.cache
def _model(objective, seed, n=500, rounds=5, depth=3):
    """A small XGBoost model (trained on one thread: the machine may be busy) and held-out
    rows from the same law."""
    X, y = _data(objective, seed, 2 * n)
    params = {"objective": objective, "max_depth": depth, "eta": 0.3, "seed": 0, "nthread": 1}
    if objective == "multi:softprob":
        params["num_class"] = 3
    b = xgb.train(params, xgb.DMatrix(X[:n], y[:n]), rounds)
    return b, X[n:], y[n:]


CASES = {
    # objective, weighted, n_draws, min_samples
    "squared_exact": ("reg:squarederror", False, 1, 1),
    "squared_weighted": ("reg:squarederror", True, 2, 1),
    "logistic": ("binary:logistic", False, 1, 1),
    "logistic_weighted": ("binary:logistic", True, 3, 10),
    "softmax": ("multi:softprob", False, 2, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_variance_matches_reference(case):
    objective, weighted, n_draws, min_samples = CASES[case]
    b, X, y = _model(objective, seed=len(case))
    ens = treeinner.from_model(b)
    w = np.random.default_rng(4).uniform(0.2, 3.0, X.shape[0]) if weighted else None
    exact = objective == "reg:squarederror" and not weighted
    kw = dict(n_draws=n_draws, min_samples=min_samples, sample_weight=w, random_state=7)
    est = U._unbiased_estimate(ens, X, y, **kw)
    phi, splits, dv = reference(b, objective, X, y, w, min_samples, n_draws, exact)
    assert (dv == 0).all() == exact

    # the score is unbiased_gain's, bit for bit (the same computation and random stream)
    ug = treeinner.unbiased_gain(b, X, y, **kw)
    expect = ug.to_numpy()[:, None] if ens.n_outputs == 1 else ug.drop(columns="total").to_numpy()
    np.testing.assert_array_equal(est.score, expect)

    # per feature and output, and for the total over outputs
    var = _var(phi) + dv
    var_total = _var(phi.sum(axis=2)) + dv.sum(axis=1)
    assert var.max() > 0
    np.testing.assert_allclose(est.var, var, rtol=1e-6, atol=1e-9 * var.max())
    np.testing.assert_allclose(est.var_total, var_total, rtol=1e-6, atol=1e-9 * var.max())
    if ens.n_outputs > 1:  # the total is not the sum of the per-class variances
        assert not np.allclose(est.var_total, est.var.sum(axis=1), rtol=1e-3)

    # per split: se^2 = the split's own sampling variance plus its draw variance
    frame = treeinner.unbiased_gain(b, X, y, per_split=True, **kw)
    inner = np.flatnonzero(ens.left >= 0)
    assert [s[0] for s in splits] == list(inner)
    ref_se = np.sqrt([_var(p) + d for _, p, d in splits])
    np.testing.assert_allclose(frame["se"], ref_se, rtol=1e-6, atol=1e-9 * ref_se.max())
    np.testing.assert_array_equal(
        frame["p_value"], treeinner._stats.p_values(frame["unbiased_gain"], frame["se"])
    )
    masked = frame["k"] < min_samples
    assert (frame.loc[masked, "se"] == 0).all() and (frame.loc[masked, "p_value"] == 1).all()
    assert (frame.loc[~masked, "se"] > 0).all()
    # the per-split frame's scores are the per-feature ones, split by split
    by_feature = np.zeros_like(est.score)
    np.add.at(by_feature, (ens.feature[inner], ens.tree_group[ens._node_tree[inner]]),
              frame["unbiased_gain"])  # fmt: skip
    np.testing.assert_allclose(est.score, by_feature, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["squared_exact", "logistic_weighted", "softmax"])
def test_per_row_influences(case, one_thread):
    """Row by row, the terms the edge pass adds up are the reference influences; over all
    rows, every split's influences sum to 0 (each node's terms are centred on its ratio)
    unless one of its nodes holds a single held-out row."""
    objective, weighted, n_draws, min_samples = CASES[case]
    b, X, y = _model(objective, seed=len(case))
    ens = treeinner.from_model(b)
    w = np.random.default_rng(4).uniform(0.2, 3.0, X.shape[0]) if weighted else None
    need = "sums" if U._exact_mode(ens, w) else "moments"
    gain = U._compute(ens, X, y, n_draws, min_samples, w, None, 7, need)
    dg, dh = U._influence(ens, gain)
    phi, splits, _ = reference(b, objective, X, y, w, min_samples, n_draws)
    scale = np.abs(phi).max()
    for i in range(0, X.shape[0], 25):
        wi = None if gain.w is None else w[i : i + 1]
        one = _staged.edge_moments(ens, X[i : i + 1], y[i : i + 1], wi, dg, dh)
        np.testing.assert_allclose(one.s1, phi[i], rtol=1e-6, atol=1e-9 * scale)
    # a node of one held-out row keeps its row's term uncentred; every other split's
    # influences sum to 0 over the rows
    count = gain.count
    single = [s for s, _, _ in splits if min(count[[s, ens.left[s], ens.right[s]]]) < 2]
    centred = [p for s, p, _ in splits if s not in single]
    assert len(centred) > len(splits) // 2
    for p in centred:
        assert abs(p.sum()) <= 1e-9 * np.abs(p).sum() + 1e-300
    if not single:
        np.testing.assert_allclose(phi.sum(axis=0), 0.0, atol=1e-9 * scale)
        # the library's own sums over rows: 0 too
        m = _staged.edge_moments(ens, X, y, gain.w, dg, dh)
        np.testing.assert_allclose(m.s1, 0.0, atol=1e-9 * np.sqrt(m.s2.max()))


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_disjoint_splits_add_up(objective):
    """A feature whose splits no row crosses twice (one tree, no split of it above another):
    its per-row term is that of the one split the row crosses, and each split's terms sum to
    0 over the rows, so its variance is the sum of its splits' se^2 (both parts)."""
    b, X, y = _model(objective, seed=3, rounds=1, depth=4)
    ens = treeinner.from_model(b)
    est = U._unbiased_estimate(ens, X, y, random_state=1)
    frame = treeinner.unbiased_gain(b, X, y, random_state=1, per_split=True)
    inner = np.flatnonzero(ens.left >= 0)
    parent = treeinner.kernels.attribution.parents(ens.left, ens.right)
    checked = 0
    for j, name in enumerate(ens.feature_names):
        nodes = set(inner[ens.feature[inner] == j].tolist())
        if not nodes:
            continue
        crossed = False
        for u in nodes:
            q = parent[u]
            while q >= 0:
                crossed |= q in nodes
                q = parent[q]
        if crossed:
            continue
        se2 = (frame.loc[frame["feature"] == name, "se"] ** 2).sum()
        np.testing.assert_allclose(est.var[j, 0], se2, rtol=1e-9)
        checked += 1
    assert checked >= 2


def test_draw_variance_monte_carlo(one_thread):
    """Data fixed, draws varied: the spread of unbiased_gain over random_state is the draw
    variance, per split and per feature."""
    b, X, y = _model("binary:logistic", seed=5, n=1000, rounds=5, depth=3)
    ens = treeinner.from_model(b)
    gain = U._compute(ens, X, y, 3, 1, None, None, 0, "moments")
    dv_split = U._split_draw_var(ens, gain)
    dv = U._per_feature(ens, gain, dv_split)[:, 0]
    assert (dv_split > 0).all() and (dv > 0).all()
    runs = np.array([
        treeinner.unbiased_gain(ens, X, y, n_draws=3, random_state=s, per_split=True)[
            "unbiased_gain"
        ].to_numpy()
        for s in range(400)
    ])  # fmt: skip
    per_feature = np.zeros((runs.shape[0], ens.n_features))
    for j in range(ens.n_features):
        per_feature[:, j] = runs[:, ens.feature[gain.inner] == j].sum(axis=1)
    # 400 runs: a sample sd is within ~7% of its truth (2 sd); the formula is first order
    ratio = per_feature.std(axis=0, ddof=1) / np.sqrt(dv)
    np.testing.assert_allclose(ratio, 1.0, atol=0.12)
    ratio = runs.std(axis=0, ddof=1) / np.sqrt(dv_split)
    assert np.all(np.abs(ratio - 1.0) < 0.2) and abs(np.median(ratio) - 1.0) < 0.04


# ---------------------------------------------------------------------- coverage
def _law(objective, rng, n):
    """The simulated law: two signal features, three noise features."""
    X = rng.normal(size=(n, 5))
    s = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0)
    if objective == "binary:logistic":
        return X, (rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * s))).astype(float)
    return X, s + rng.normal(size=n)


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_monte_carlo_standard_error(objective, one_thread):
    """A fixed model, 200 validation sets of 500 rows from the law: the mean estimated
    standard error is within 15% of the spread of the scores across sets."""
    rng = np.random.default_rng(11)
    Xt, yt = _law(objective, rng, 600)
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, "min_child_weight": 10,
              "nthread": 1}  # fmt: skip
    b = xgb.train(params, xgb.DMatrix(Xt, yt), 10)
    ens = treeinner.from_model(b)
    scores, ses = [], []
    for rep in range(200):
        X, y = _law(objective, rng, 500)
        est = U._unbiased_estimate(ens, X, y, random_state=rep)
        scores.append(est.score[:, 0])
        ses.append(est.se[:, 0])
    sd = np.array(scores).std(axis=0, ddof=1)
    mean_se = np.array(ses).mean(axis=0)
    assert (sd > 0).all()  # every feature is split on, the noise ones too
    np.testing.assert_allclose(mean_se, sd, rtol=0.15)
