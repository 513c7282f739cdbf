"""Standard errors of the unbiased gain: delta-method influences against a numpy reference,
the draw variance, per-split standard errors, and Monte Carlo coverage on simulated data."""

from __future__ import annotations

import functools
import json

import numba
import numpy as np
import pytest
import scipy.stats

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
    alone, its draw variance), ``dv`` (n_features, n_outputs): the draw variances summed
    per feature (0 where ``exact``), and ``meta``: per split, (k, feature, output), k the
    held-out rows of its smaller child. Margins are XGBoost's own staged predictions, node
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
    meta = []
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
            meta.append((int(k), f, c))
    return phi, splits, dv, meta


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
    phi, splits, dv, meta = reference(b, objective, X, y, w, min_samples, n_draws, exact)
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
    # its p-value: Student's t with max(k - 1, 1) degrees of freedom
    k = np.array([m[0] for m in meta])
    np.testing.assert_array_equal(frame["k"], k)
    df = np.maximum(k - 1, 1)
    live = frame["se"] > 0
    np.testing.assert_allclose(
        frame.loc[live, "p_value"],
        scipy.stats.t.sf(frame.loc[live, "unbiased_gain"] / frame.loc[live, "se"], df[live]),
        rtol=1e-9,
    )
    if (df[live] < 30).any():  # the t is not the normal where children are small
        normal = treeinner._stats.p_values(frame["unbiased_gain"], frame["se"])
        assert not np.allclose(frame["p_value"], normal, rtol=1e-3)

    # per feature (and the total over outputs): Welch-Satterthwaite over the splits'
    # own variances V_s, (sum V)^2 / sum V^2 / max(k - 1, 1)
    V = np.array([_var(p) + d for _, p, d in splits])
    num = np.zeros_like(est.score)
    den = np.zeros_like(est.score)
    for v, (ks, f, c) in zip(V, meta):
        num[f, c] += v
        den[f, c] += v * v / max(ks - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df_ref = np.where(den > 0, num**2 / den, np.inf)
        df_tot = np.where(den.sum(1) > 0, num.sum(1) ** 2 / den.sum(1), np.inf)
    fin = np.isfinite(df_ref)
    assert fin.any() and np.array_equal(np.isfinite(est.df), fin)
    np.testing.assert_allclose(est.df[fin], df_ref[fin], rtol=1e-6)
    np.testing.assert_allclose(est.df_total[np.isfinite(df_tot)], df_tot[np.isfinite(df_tot)],
                               rtol=1e-6)  # fmt: skip
    assert np.all(est.df[fin] >= 1.0)
    if ens.n_outputs > 1:
        assert not np.allclose(est.df_total, est.df.sum(axis=1))
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
    phi, splits, _, _ = reference(b, objective, X, y, w, min_samples, n_draws)
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


# ---------------------------------------------------------------------- the null's level
def _boundary_pvalues(n_models=20, n_sets=100, n_train=1000, n_valid=300, p=50):
    """p-values of the used features at the boundary of the null (bench_coverage's null study
    (a), smaller): one round of squared-error XGBoost (the Table 1 parameters of Sun 2022)
    with base_score 0, the labels' population mean, on labels N(0, 1) independent of the
    discrete features (feature j uniform on {0, ..., j+1}), so every split's expected
    held-out unbiased gain is exactly 0. Each model is scored on ``n_sets`` fresh held-out
    sets; returns the Welch-t and the normal p-values, pooled."""
    welch, normal = [], []
    for m in range(n_models):
        rng = np.random.default_rng([17, m])
        high = np.arange(2, p + 2)
        X = rng.integers(0, high, size=(n_train, p)).astype(float)
        params = {"objective": "reg:squarederror", "eta": 0.01, "max_depth": 4,
                  "min_child_weight": 1, "reg_lambda": 1, "base_score": 0.0,
                  "tree_method": "exact", "nthread": 1, "seed": m}  # fmt: skip
        b = xgb.train(params, xgb.DMatrix(X, rng.normal(size=n_train), nthread=1), 1)
        ens = treeinner.from_model(b)
        for _ in range(n_sets):
            Xv = rng.integers(0, high, size=(n_valid, p)).astype(float)
            est = U._unbiased_estimate(ens, Xv, rng.normal(size=n_valid))
            s, se = est.score[:, 0], est.se[:, 0]
            used = ~((s == 0) & (se == 0))
            welch.append(treeinner._stats.p_values(s, se, est.df[:, 0])[used])
            normal.append(treeinner._stats.p_values(s, se)[used])
    return np.concatenate(welch), np.concatenate(normal)


def test_welch_t_holds_its_level_at_the_null_boundary(one_thread):
    """Where the null holds exactly, the Welch-t p-values reject no more often than nominal
    (up to 3 binomial standard errors) at p <= 0.05, 0.01 and 0.001, while the normal
    reference, on the same scores and errors, rejects far too often in the tail (children of
    a few held-out rows). The t is conservative here (about half the nominal rate at 0.01),
    not useless: it still rejects at more than a third of the nominal rate at 0.05."""
    welch, normal = _boundary_pvalues()
    n = welch.size
    assert n > 15_000 and np.all((welch >= 0) & (welch <= 1))
    for a in (0.05, 0.01, 0.001):
        bound = a + 3.0 * np.sqrt(a * (1 - a) / n)
        assert np.mean(welch <= a) <= bound, a
    a = 0.001
    assert np.mean(normal <= a) > 2.0 * a + 3.0 * np.sqrt(a * (1 - a) / n)
    assert np.mean(welch <= 0.05) > 0.05 / 3
    # the t's tail is heavier: for every positive score its p-value is the larger
    assert np.all(welch[normal < 0.5] >= normal[normal < 0.5])


def test_significance_uses_the_welch_t(one_thread):
    """``significance`` reports the estimate's t p-values and t intervals (the table's
    columns unchanged), and so does a cross-fit: its pooled p-values are above the normal's
    for positive scores."""
    b, X, y = _model("reg:squarederror", seed=2, rounds=3, depth=4)
    est = U._unbiased_estimate(b, X, y, random_state=0)
    t = treeinner.significance(b, X, y, methods="unbiased_gain", random_state=0, alpha=0.1)
    assert list(t.columns) == ["method", "feature", "score", "se", "ci_low", "ci_high",
                               "p_value", "q_value"]  # fmt: skip
    df = est.df_total
    assert np.isfinite(df).any() and np.nanmin(df) < 200  # a t far from the normal somewhere
    np.testing.assert_allclose(t.p_value, treeinner._stats.p_values(t.score, t.se, df))
    half = np.where(t.se > 0, (t.ci_high - t.score) / np.where(t.se > 0, t.se, 1), np.nan)
    fin = np.isfinite(df) & (t.se > 0)
    np.testing.assert_allclose(half[fin], scipy.stats.t.isf(0.05, df[fin]), rtol=1e-9)

    model = xgb.XGBRegressor(n_estimators=3, max_depth=4, learning_rate=0.3, n_jobs=1)
    cv = treeinner.significance(model, X, y, methods="unbiased_gain", cv=2, random_state=0)
    pos = (cv.score > 0) & (cv.se > 0)
    assert pos.sum() >= 2
    normal = treeinner._stats.p_values(cv.score, cv.se)
    assert np.all(cv.p_value[pos] > normal[pos])


def test_welch_df_credits_an_input_map():
    """A CatBoost model with categorical features (kernel columns credited to the user's
    features through ``input_map.credit``): a split credited c to a feature adds c^2 V_s to
    its variance and (c^2 V_s)^2 / max(k_s - 1, 1) to the Welch denominator, split by split
    and whichever kernel column the split is on."""
    cb = pytest.importorskip("catboost")
    import pandas as pd

    rng = np.random.default_rng(3)

    def data(n):
        X = pd.DataFrame({"a": rng.normal(size=n), "c1": rng.choice(["x", "y", "z"], n),
                          "c2": rng.choice([f"k{i}" for i in range(8)], n)})  # fmt: skip
        y = X["a"] + (X["c1"] == "x") + X["c2"].isin(["k1", "k2"]) + rng.normal(size=n)
        return X, y.to_numpy()

    X, y = data(1500)
    Xv, yv = data(600)
    model = cb.CatBoost(dict(iterations=8, depth=3, loss_function="RMSE", verbose=False,
                             allow_writing_files=False, cat_features=["c1", "c2"],
                             one_hot_max_size=2, random_seed=0)).fit(X, y)  # fmt: skip
    ens = treeinner.from_model(model)
    assert ens.input_map is not None
    est = U._unbiased_estimate(ens, Xv, yv, random_state=0)
    assert est.df.shape == (3, 1) and est.df_total.shape == (3,)
    gain = U._compute(ens, Xv, yv, 1, 1, None, None, 0, "moments")
    dg, dh = U._influence(ens, gain)
    V = U._split_sampling_var(ens, gain, dg, dh) + U._split_draw_var(ens, gain)
    credit = ens.input_map.credit
    num, den = np.zeros(3), np.zeros(3)
    for s, node in enumerate(gain.inner):
        c = credit[ens.feature[node]]
        num += c**2 * V[s]
        den += (c**2 * V[s]) ** 2 / max(gain.k[s] - 1, 1)
    # several kernel columns (CTRs, one-hot values) credited to one feature
    assert (den > 0).all() and (credit.sum(axis=0) > 1).any()
    np.testing.assert_allclose(est.df[:, 0], num**2 / den, rtol=1e-10)
    np.testing.assert_allclose(est.df_total, num**2 / den, rtol=1e-10)
