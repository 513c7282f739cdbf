"""Global importances: TreeInner, ForestInner, total gain, permutation (METHODS.md).

References here are written from the definitions in METHODS.md, slowly and independently of
the package's staged-pass kernel: per-tree attributions from ``predecomp``/``saabas`` with
``iteration_range=(m, m + 1)``, staged margins from ``predict_margin(iteration_range=(0, it))`` and
the gradients of each objective written out below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, log_softmax, softmax

import treeinner
from tests._helpers import quiet_ensemble
from tests._xgb_cases import xgb
from treeinner.importance import DEFAULT_METHODS as METHODS

N_CLASS = 3


# ---------------------------------------------------------------------- data and models
def _data(objective, n, p=6, seed=0, missing=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    s = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] - 0.3 * X[:, 3]
    if objective == "reg:squarederror":
        y = 2 * s + 0.5 * rng.normal(size=n)
    elif objective == "binary:logistic":
        y = (s + rng.normal(size=n) > 0).astype(float)
    else:
        y = np.digitize(s + 0.5 * rng.normal(size=n), [-0.5, 0.5]).astype(float)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    w = rng.uniform(0.2, 3.0, size=n)
    return X, y, w


def _train(objective, X, y, w=None, rounds=20, **params):
    prm = {
        "objective": objective,
        "tree_method": "hist",
        "max_depth": 3,
        "nthread": 1,
        "seed": 0,
        **params,
    }
    if objective.startswith("multi"):
        prm["num_class"] = N_CLASS
    return xgb.train(prm, xgb.DMatrix(X, y, weight=w), rounds)


def _normalized(v):
    v = np.asarray(v, dtype=np.float64)
    return v / v.sum()


def _xgb_total_gain(booster, p):
    score = booster.get_score(importance_type="total_gain")
    return np.array([score.get(f"f{j}", 0.0) for j in range(p)])


# ---------------------------------------------------------------------- Prop. 3
OBJECTIVES = ["reg:squarederror", "binary:logistic", "multi:softprob"]
ETAS = [0.01, 0.3, 1.0]
LAMBDAS = [0.0, 1.0, 10.0]


@pytest.fixture(scope="module")
def gain_models():
    """Every (objective, eta, lambda, weighted) model of the total-gain grid, trained once."""
    out = {}
    for obj in OBJECTIVES:
        X, y, w = _data(obj, 500)
        for eta in ETAS:
            for lam in LAMBDAS:
                for weighted in (False, True):
                    ww = w if weighted else None
                    b = _train(
                        obj,
                        X,
                        y,
                        ww,
                        max_depth=4 if obj == "multi:softprob" else 3,
                        eta=eta,
                        reg_lambda=lam,
                    )
                    out[obj, eta, lam, weighted] = (b, X, y, ww)
    return out


def _total(res):
    return res["total"] if isinstance(res, pd.DataFrame) else res


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_total_gain_identity_on_training_data(gain_models, objective, eta, lam, weighted):
    """Prop. 3: TreeInner-PreDecomp on the training data is XGBoost's total_gain."""
    booster, X, y, w = gain_models[objective, eta, lam, weighted]
    ref = _normalized(_xgb_total_gain(booster, X.shape[1]))
    ti = _total(treeinner.tree_inner(booster, X, y, attribution="predecomp", sample_weight=w))
    assert np.max(np.abs(_normalized(ti.to_numpy()) - ref)) <= 1e-6
    # the package's own total_gain reads the same numbers
    tg = _total(treeinner.total_gain(booster)).to_numpy()
    assert np.max(np.abs(_normalized(tg) - ref)) <= 1e-6


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("eta", ETAS)
def test_total_gain_identity_per_class(gain_models, eta, lam, weighted):
    booster, X, y, w = gain_models["multi:softprob", eta, lam, weighted]
    ti = treeinner.tree_inner(booster, X, y, attribution="predecomp", sample_weight=w)
    tg = treeinner.total_gain(booster)
    cols = [f"class_{c}" for c in range(N_CLASS)]
    assert list(ti.columns) == [*cols, "total"]
    assert list(tg.columns) == [*cols, "total"]
    for c in cols:
        assert tg[c].sum() > 0
        assert np.max(np.abs(_normalized(ti[c]) - _normalized(tg[c]))) <= 1e-6, c
    # per-class gains partition XGBoost's total gain
    np.testing.assert_allclose(
        tg[cols].sum(axis=1).to_numpy(), _xgb_total_gain(booster, X.shape[1]), rtol=1e-5
    )


@pytest.mark.parametrize(
    ("objective", "eta", "lam", "weighted"),
    [(o, e, la, wt) for o in OBJECTIVES for e in ETAS for la in LAMBDAS for wt in (False, True)],
)
def test_json_file_recovers_eta_and_lambda(gain_models, tmp_path, objective, eta, lam, weighted):
    """A model read from .json has no training config: eta and lambda come from the trees,
    and come back as the float32 values XGBoost trained with."""
    booster = gain_models[objective, eta, lam, weighted][0]
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    ens = treeinner.load(path)
    assert np.all(ens.learning_rate == float(np.float32(eta))), np.unique(ens.learning_rate)
    assert ens.reg_lambda == float(np.float32(lam))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_total_gain_identity_from_json_file(gain_models, tmp_path, objective, eta, lam, weighted):
    """Prop. 3 for a model read from .json with the recovered eta and lambda."""
    booster, X, y, w = gain_models[objective, eta, lam, weighted]
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    ens = treeinner.load(path)
    np.testing.assert_allclose(ens.learning_rate, np.float32(eta), rtol=1e-6)
    assert ens.reg_lambda == pytest.approx(lam, abs=1e-4)
    ref = _normalized(_xgb_total_gain(booster, X.shape[1]))
    ti = _total(treeinner.tree_inner(ens, X, y, attribution="predecomp", sample_weight=w))
    assert np.max(np.abs(_normalized(ti.to_numpy()) - ref)) <= 1e-6


# ---------------------------------------------------------------------- slow references
def _neg_gradient(objective, F, y):
    """-dl/dF per row and output, shape (n, K)."""
    if objective == "reg:squarederror":
        return (y - F[:, 0])[:, None]
    if objective == "binary:logistic":
        return (y - expit(F[:, 0]))[:, None]
    onehot = np.eye(F.shape[1])[y.astype(int)]
    return onehot - softmax(F, axis=1)


def _staged_margins(ens, X):
    """{round: margin before that round}, shape (n, K).

    The margin is the booster's own prediction, ``predict_margin(iteration_range=(0, it))``
    (summed in float32 as XGBoost's prediction cache is), and the base margin alone before the
    first round. As a check of the round bookkeeping it must agree, to float32 rounding, with
    the base margin plus the stored leaf values of the earlier rounds summed in float64.
    """
    n, K = X.shape[0], ens.n_outputs
    leaves = ens.leaf_index(X)
    F64 = np.tile(ens.base_margin, (n, 1))
    out = {}
    for m in range(ens.n_trees):
        it = int(ens.tree_iteration[m])
        if it not in out:
            if it == 0:
                out[it] = np.tile(ens.base_margin, (n, 1))
            else:
                out[it] = ens.predict_margin(X, iteration_range=(0, it)).reshape(n, K)
            np.testing.assert_allclose(out[it], F64, rtol=1e-6, atol=1e-5)
        lo, hi = ens.tree_offsets[m], ens.tree_offsets[m + 1]
        ids, vals = ens.leaf_id[lo:hi], ens.value[lo:hi]
        lut = np.full(ids.max() + 1, np.nan)
        lut[ids[ids >= 0]] = vals[ids >= 0]
        F64[:, ens.tree_group[m]] += lut[leaves[:, m]]
    return out


def _reference(ens, objective, X, y, w, attribution):
    """TreeInner, ForestInner and ForestInner's initial form from their definitions, tree by
    tree: (p, K) arrays each."""
    attr = treeinner.predecomp if attribution == "predecomp" else treeinner.saabas
    n, p, K = X.shape[0], ens.n_features, ens.n_outputs
    w = np.ones(n) if w is None else w
    margins = _staged_margins(ens, X)
    ti = np.zeros((p, K))
    r_sum = np.zeros((n, p, K))
    neg_g_sum = np.zeros((n, K))
    for it in range(ens.n_iterations):
        # trees of one round (classes, parallel trees) share the round start's gradients
        neg_g = _neg_gradient(objective, margins[it], y)
        trees = np.flatnonzero(ens.tree_iteration == it)
        lr = ens.learning_rate[trees]
        assert np.all(lr == lr[0])
        r = attr(ens, X, iteration_range=(it, it + 1)).values.reshape(n, p, K)
        for c in range(K):
            if not np.any(ens.tree_group[trees] == c):
                assert not np.any(r[:, :, c])  # a class without trees this round: no value
                continue
            ti[:, c] += (r[:, :, c] * (w * neg_g[:, c])[:, None]).sum(axis=0) / lr[0]
            r_sum[:, :, c] += r[:, :, c]
            neg_g_sum[:, c] += np.sum(ens.tree_group[trees] == c) * neg_g[:, c]  # per tree
    fi = np.einsum("npk,nk->pk", r_sum, w[:, None] * neg_g_sum) / np.mean(ens.learning_rate)
    # the initial form: the negative gradient at the margin before the first round only
    neg_g0 = _neg_gradient(objective, margins[0], y)
    fi0 = np.einsum("npk,nk->pk", r_sum, w[:, None] * neg_g0) / np.mean(ens.learning_rate)
    return ti, fi, fi0


REF_CASES = [
    # objective, num_parallel_tree, missing fraction, weights
    ("reg:squarederror", 1, 0.0, False),
    ("reg:squarederror", 2, 0.2, True),
    ("binary:logistic", 1, 0.2, False),
    ("binary:logistic", 2, 0.0, True),
    ("multi:softprob", 1, 0.0, True),
    ("multi:softprob", 2, 0.2, False),
]


@pytest.fixture(scope="module")
def ref_models():
    out = {}
    for obj, npt, miss, weighted in REF_CASES:
        X, y, w = _data(obj, 900, seed=1, missing=miss)
        Xt, yt, wt = X[:500], y[:500], w[:500]
        Xv, yv, wv = X[500:], y[500:], w[500:]
        extra = {"num_parallel_tree": npt, "subsample": 0.8} if npt > 1 else {}
        b = _train(
            obj, Xt, yt, wt if weighted else None, rounds=12, eta=0.2, reg_lambda=2.0, **extra
        )
        out[obj, npt, miss, weighted] = (b, Xv, yv, wv if weighted else None)
    return out


def _as_matrix(res):
    if isinstance(res, pd.Series):
        return res.to_numpy()[:, None]
    return res[[c for c in res.columns if c != "total"]].to_numpy()


@pytest.mark.parametrize("attribution", ["predecomp", "saabas"])
@pytest.mark.parametrize(
    "case", REF_CASES, ids=[f"{o}-npt{n}-miss{m}-w{int(w)}" for o, n, m, w in REF_CASES]
)
def test_tree_and_forest_inner_match_definitions(ref_models, case, attribution):
    booster, Xv, yv, wv = ref_models[case]
    objective, npt = case[0], case[1]
    ens = quiet_ensemble(booster)
    assert ens.n_trees == 12 * npt * (N_CLASS if objective.startswith("multi") else 1)
    if case[2]:
        assert np.isnan(Xv).any()
    ti_ref, fi_ref, fi0_ref = _reference(ens, objective, Xv, yv, wv, attribution)
    ti = treeinner.tree_inner(ens, Xv, yv, attribution=attribution, sample_weight=wv)
    fi = treeinner.forest_inner(ens, Xv, yv, attribution=attribution, sample_weight=wv)
    fi0 = treeinner.forest_inner(
        ens, Xv, yv, attribution=attribution, gradient="initial", sample_weight=wv, centred=False
    )
    assert np.abs(ti_ref).max() > 0 and np.abs(fi_ref).max() > 0
    assert not np.allclose(fi0_ref, fi_ref, rtol=1e-3)  # two different numbers
    for got, ref in ((ti, ti_ref), (fi, fi_ref), (fi0, fi0_ref)):
        np.testing.assert_allclose(_as_matrix(got), ref, rtol=1e-6, atol=1e-9)
        if ref.shape[1] > 1:
            np.testing.assert_allclose(got["total"], ref.sum(axis=1), rtol=1e-6, atol=1e-9)


def test_forest_inner_two_forms_by_hand_on_training_data():
    """Two stumps on x = 0, 1, 2, 3 with y = 0, 0, 1, 1, squared error, base score 0.5, eta
    0.5, lambda 0. Tree 1 splits at 1.5 with leaves -eta G/H = -/+0.25 (g = F0 - y = +/-0.5,
    root value 0); tree 2, at margins 0.25 and 0.75, has g = +/-0.25 and leaves -/+0.125. The
    forest's PreDecomp attribution is -/+0.375 per row, so ForestInner is (1/0.5) sum_i
    0.375 * 0.5 = 1.5 with the initial gradient (y - F0 = -/+0.5) and (1/0.5) sum_i 0.375 *
    0.75 = 2.25 with the staged sum (0.5 + 0.25); TreeInner is (1/0.5) (4 * 0.25 * 0.5 +
    4 * 0.125 * 0.25) = 1.25, the total gain 1 + 0.25."""
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    params = {"max_depth": 1, "eta": 0.5, "reg_lambda": 0.0, "min_child_weight": 0.0,
              "base_score": 0.5, "tree_method": "exact", "nthread": 1}  # fmt: skip
    booster = xgb.train(params, xgb.DMatrix(X, y), 2)
    ens = quiet_ensemble(booster)
    np.testing.assert_array_equal(np.unique(ens.value[ens.left < 0]), [-0.25, -0.125, 0.125, 0.25])
    initial = treeinner.forest_inner(booster, X, y, gradient="initial", centred=False).to_numpy()
    # centred on these rows: every root's mean leaf value is its stored 0, r's mean is 0
    centred = treeinner.forest_inner(booster, X, y, gradient="initial").to_numpy()
    np.testing.assert_allclose(centred, [1.5], rtol=1e-12)
    staged = treeinner.forest_inner(booster, X, y).to_numpy()
    np.testing.assert_allclose(initial, [1.5], rtol=1e-12)
    np.testing.assert_allclose(staged, [2.25], rtol=1e-12)
    np.testing.assert_allclose(treeinner.tree_inner(booster, X, y).to_numpy(), [1.25])
    np.testing.assert_allclose(treeinner.total_gain(booster).to_numpy(), [1.25])


@pytest.mark.parametrize("case", [REF_CASES[0], REF_CASES[3], REF_CASES[4]], ids=str)
def test_forest_inner_initial_form_with_treeshap(ref_models, case):
    """attribution='shap': every row's TreeSHAP values (the forest's, summed over the trees)
    times -g at the base margin, over the learning rate."""
    booster, Xv, yv, wv = ref_models[case]
    ens = quiet_ensemble(booster)
    K = ens.n_outputs
    shap = treeinner.tree_shap(ens, Xv).values.reshape(len(yv), -1, K)
    neg_g0 = _neg_gradient(case[0], np.tile(ens.base_margin, (len(yv), 1)), yv)
    w = np.ones(len(yv)) if wv is None else wv
    ref = np.einsum("npk,nk->pk", shap, w[:, None] * neg_g0) / np.mean(ens.learning_rate)
    got = treeinner.forest_inner(ens, Xv, yv, attribution="shap", gradient="initial",
                                 sample_weight=wv, centred=False)  # fmt: skip
    np.testing.assert_allclose(_as_matrix(got), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    with pytest.raises(ValueError, match="gradient must be one of 'staged', 'initial'"):
        treeinner.forest_inner(ens, Xv, yv, gradient="label")


def test_tree_inner_and_forest_inner_differ_after_the_first_round(ref_models):
    """Sanity of the references: the two definitions are genuinely different numbers."""
    booster, Xv, yv, wv = ref_models["reg:squarederror", 1, 0.0, False]
    ti = treeinner.tree_inner(booster, Xv, yv)
    fi = treeinner.forest_inner(booster, Xv, yv)
    assert not np.allclose(ti.to_numpy(), fi.to_numpy(), rtol=1e-3)


# ---------------------------------------------------------------------- noise features
def test_noise_features_negative_on_validation():
    rng = np.random.default_rng(42)
    n, n_valid, n_signal, n_noise = 1000, 2000, 3, 10
    X = rng.normal(size=(n + n_valid, n_signal + n_noise))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] ** 2 + rng.normal(size=n + n_valid)
    booster = _train("reg:squarederror", X[:n], y[:n], rounds=200, max_depth=6, eta=0.3)
    ti = treeinner.tree_inner(booster, X[n:], y[n:]).to_numpy()
    assert np.all(ti[:n_signal] > 0), ti[:n_signal]
    assert ti[n_signal:].mean() < 0, ti[n_signal:]
    gain = treeinner.total_gain(booster).to_numpy()
    assert np.all(gain[n_signal:] > 0), gain[n_signal:]
    # on the training data TreeInner is the (positive) total gain, noise included
    ti_train = treeinner.tree_inner(booster, X[:n], y[:n]).to_numpy()
    assert np.all(ti_train[n_signal:] > 0)


# ---------------------------------------------------------------------- shapes and errors
@pytest.fixture(scope="module")
def frame_models():
    rng = np.random.default_rng(7)
    names = ["alpha", "beta", "gamma", "delta"]
    X = pd.DataFrame(rng.normal(size=(400, 4)), columns=names)
    s = X["alpha"] + 0.5 * X["beta"] - 0.2 * X["gamma"]
    y_bin = (s + rng.normal(size=400) > 0).astype(float).to_numpy()
    y_mc = np.digitize(s + 0.5 * rng.normal(size=400), [-0.5, 0.5]).astype(float)
    params = {"tree_method": "hist", "max_depth": 3, "nthread": 1, "seed": 0}
    binary = xgb.train(
        {**params, "objective": "binary:logistic"}, xgb.DMatrix(X[:300], y_bin[:300]), 15
    )
    multi = xgb.train(
        {**params, "objective": "multi:softprob", "num_class": N_CLASS},
        xgb.DMatrix(X[:300], y_mc[:300]),
        15,
    )
    return names, X[300:], y_bin[300:], y_mc[300:], binary, multi


def test_series_indexed_by_dataframe_names(frame_models):
    names, X, y, _, binary, _ = frame_models
    # columns in another order are matched by name
    Xs = X[names[::-1]]
    for fn in (treeinner.tree_inner, treeinner.forest_inner):
        res = fn(binary, Xs, y)
        assert isinstance(res, pd.Series)
        assert list(res.index) == names
        assert res.dtype == np.float64
        np.testing.assert_allclose(res.to_numpy(), fn(binary, X.to_numpy(), y).to_numpy())
    tg = treeinner.total_gain(binary)
    assert isinstance(tg, pd.Series) and list(tg.index) == names


def test_multiclass_dataframe_columns(frame_models):
    names, X, _, y_mc, _, multi = frame_models
    cols = [f"class_{c}" for c in range(N_CLASS)] + ["total"]
    for fn in (treeinner.tree_inner, treeinner.forest_inner):
        res = fn(multi, X, y_mc)
        assert isinstance(res, pd.DataFrame)
        assert list(res.columns) == cols
        assert list(res.index) == names
        np.testing.assert_allclose(res["total"], res[cols[:-1]].sum(axis=1))


def test_importance_default_methods(frame_models):
    names, X, y, y_mc, binary, multi = frame_models
    df = treeinner.importance(binary, X, y, random_state=0)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(METHODS)
    assert list(df.index) == names
    assert np.all(np.isfinite(df.to_numpy()))
    np.testing.assert_allclose(df["tree_inner"], treeinner.tree_inner(binary, X, y))
    np.testing.assert_allclose(
        df["forest_inner_initial"], treeinner.forest_inner(binary, X, y, gradient="initial")
    )
    np.testing.assert_allclose(df["total_gain"], treeinner.total_gain(binary))
    abs_pd = np.abs(treeinner.predecomp(binary, X).values).mean(axis=0)
    np.testing.assert_allclose(df["abs_predecomp"], abs_pd)
    abs_shap = np.abs(treeinner.tree_shap(binary, X).values).mean(axis=0)
    np.testing.assert_allclose(df["abs_shap"], abs_shap)
    # the SHAP bar plot's numbers: XGBoost's own contributions agree
    contribs = binary.predict(xgb.DMatrix(X), pred_contribs=True)[:, :-1]
    np.testing.assert_allclose(df["abs_shap"], np.abs(contribs).mean(axis=0), rtol=1e-4)
    # multiclass columns hold totals over classes
    dm = treeinner.importance(multi, X, y_mc, methods=["tree_inner", "tree_inner_saabas"])
    np.testing.assert_allclose(dm["tree_inner"], treeinner.tree_inner(multi, X, y_mc)["total"])
    np.testing.assert_allclose(
        dm["tree_inner_saabas"], treeinner.tree_inner(multi, X, y_mc, attribution="saabas")["total"]
    )


def test_importance_unknown_method(frame_models):
    _, X, y, _, binary, _ = frame_models
    with pytest.raises(ValueError, match="nope"):
        treeinner.importance(binary, X, y, methods=["tree_inner", "nope"])


def test_permutation_reproducible_and_signal_positive(frame_models):
    names, X, y, _, binary, _ = frame_models
    a = treeinner.importance(binary, X, y, methods=["permutation"], random_state=3)
    b = treeinner.importance(binary, X, y, methods=["permutation"], random_state=3)
    c = treeinner.importance(binary, X, y, methods=["permutation"], random_state=4)
    assert a.equals(b)
    assert not a.equals(c)
    assert a.loc["alpha", "permutation"] > 0.05
    assert a.loc["alpha", "permutation"] == a["permutation"].max()


def _expected_permutation(ens, objective, X, y, j):
    """E over a uniform permutation of column j of the mean log-loss increase (exact)."""
    n = X.shape[0]

    def logloss(F, yy):
        if objective == "binary:logistic":
            return np.logaddexp(0.0, F) - yy * F
        return -log_softmax(F, axis=1)[np.arange(len(yy)), yy.astype(int)]

    base = logloss(ens.predict_margin(X), y).mean()
    # a uniform permutation sends every row's value j to every other row with prob. 1/n
    Xr = np.repeat(X, n, axis=0)
    Xr[:, j] = np.tile(X[:, j], n)
    return logloss(ens.predict_margin(Xr), np.repeat(y, n)).mean() - base


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_permutation_uses_the_models_loss(objective):
    """Mean over many permutations ~ the exact expectation under the model's log-loss."""
    X, y, _ = _data(objective, 400, p=4, seed=5)
    booster = _train(objective, X[:300], y[:300], rounds=15)
    Xv, yv = X[300:], y[300:]
    ens = quiet_ensemble(booster)
    got = treeinner.importance(
        booster, Xv, yv, methods=["permutation"], n_repeats=300, random_state=0
    )["permutation"].to_numpy()
    expected = np.array([_expected_permutation(ens, objective, Xv, yv, j) for j in range(4)])
    assert expected[0] > 0.1
    np.testing.assert_allclose(got, expected, rtol=0.05, atol=3e-3)


def test_error_handling(frame_models):
    _, X, y, _, binary, _ = frame_models
    n = len(y)
    fns = [
        treeinner.tree_inner,
        treeinner.forest_inner,
        lambda m, X, y, **kw: treeinner.importance(m, X, y, **kw),
    ]
    for fn in fns:
        with pytest.raises(ValueError, match="sample_weight"):
            fn(binary, X, y, sample_weight=np.ones(n - 1))
        with pytest.raises(ValueError, match="sample_weight"):
            fn(binary, X, y, sample_weight=np.ones((n, 1)))
        w = np.ones(n)
        w[3] = -1.0
        with pytest.raises(ValueError, match="sample_weight"):
            fn(binary, X, y, sample_weight=w)
        with pytest.raises(ValueError):
            fn(binary, X, y[:-1])
        with pytest.raises(ValueError):
            fn(binary, X, np.concatenate([y, y[:1]]))
    for fn in (treeinner.tree_inner, treeinner.forest_inner):
        with pytest.raises(ValueError, match="attribution"):
            fn(binary, X, y, attribution="shapley")
        with pytest.raises(ValueError, match="'predecomp', 'saabas', 'shap'"):
            fn(binary, X, y, attribution="PreDecomp")
        with pytest.raises(TypeError, match="keyword-only: pass attribution="):
            fn(binary, X, y, "predecomp")


# ---------------------------------------------------------------------- large inputs
def test_large_input_additive_over_rows():
    X, y, w = _data("binary:logistic", 20_000, seed=11, missing=0.05)
    booster = _train("binary:logistic", X[:2000], y[:2000], rounds=10, max_depth=4, eta=0.3)
    for fn in (treeinner.tree_inner, treeinner.forest_inner):
        whole = fn(booster, X, y, sample_weight=w).to_numpy()
        assert np.abs(whole).max() > 0
        # halves, and uneven parts whose chunk boundaries fall elsewhere
        for h in (10_000, 7_777):
            parts = (
                fn(booster, X[:h], y[:h], sample_weight=w[:h]).to_numpy()
                + fn(booster, X[h:], y[h:], sample_weight=w[h:]).to_numpy()
            )
            np.testing.assert_allclose(whole, parts, rtol=1e-9, atol=1e-9 * np.abs(whole).max())
    # and it is still the definition
    ens = quiet_ensemble(booster)
    ti_ref, fi_ref, _ = _reference(ens, "binary:logistic", X, y, w, "predecomp")
    np.testing.assert_allclose(
        treeinner.tree_inner(booster, X, y, sample_weight=w).to_numpy(), ti_ref[:, 0], rtol=1e-6
    )
    np.testing.assert_allclose(
        treeinner.forest_inner(booster, X, y, sample_weight=w).to_numpy(), fi_ref[:, 0], rtol=1e-6
    )


# ---------------------------------------------------------------------- bootstrap
def test_bootstrap_se_columns(frame_models):
    names, X, y, _, binary, _ = frame_models
    kw = {"n_repeats": 2, "random_state": 0}
    base = treeinner.importance(binary, X, y, **kw)
    df = treeinner.importance(binary, X, y, n_bootstrap=4, **kw)
    # the point estimates first, unchanged, then one _se column per method in the same order
    assert list(df.columns) == [*METHODS, *(f"{m}_se" for m in METHODS)]
    pd.testing.assert_frame_equal(df[list(METHODS)], base)
    assert list(base.columns) == list(METHODS)  # n_bootstrap=0: no se columns
    assert np.all(df["total_gain_se"] == 0.0)
    used = base["total_gain"] > 0
    assert used.sum() >= 3
    for m in METHODS:
        if m != "total_gain":
            assert np.all(df.loc[used, f"{m}_se"] > 0), m
        assert np.all(np.isfinite(df[f"{m}_se"])) and np.all(df[f"{m}_se"] >= 0)
    # features no split uses score 0 in every resample of the split-based methods
    for m in ("tree_inner", "forest_inner_initial", "abs_predecomp", "unbiased_gain"):
        assert np.all(df.loc[~used, f"{m}_se"] == 0)


def test_bootstrap_reproducible(frame_models):
    _, X, y, _, binary, _ = frame_models
    methods = ["tree_inner", "abs_shap", "permutation", "unbiased_gain"]

    def run(seed):
        return treeinner.importance(
            binary, X, y, methods=methods, n_repeats=2, random_state=seed, n_bootstrap=4
        )

    a, b, c = run(3), run(3), run(4)
    pd.testing.assert_frame_equal(a, b)
    se = [f"{m}_se" for m in methods]
    assert not np.allclose(a[se], c[se])
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    pd.testing.assert_frame_equal(
        treeinner.importance(binary, X, y, methods=methods, random_state=g1, n_bootstrap=3),
        treeinner.importance(binary, X, y, methods=methods, random_state=g2, n_bootstrap=3),
    )


def test_bootstrap_resample_is_the_estimate_on_the_resampled_rows():
    """A resample's weights give what the method computes on the copied rows (deterministic
    methods; unbiased gain through its exact expectation for squared error)."""
    from treeinner._methods import Options, get
    from treeinner.importance import _replicate

    X, y, w = _data("reg:squarederror", 400, p=5, seed=2)
    ens = quiet_ensemble(_train("reg:squarederror", X[:200], y[:200], rounds=12))
    Xv, yv, wv = X[200:], y[200:], w[200:]
    methods = [
        "tree_inner", "tree_inner_shap", "forest_inner", "forest_inner_saabas",
        "abs_predecomp", "abs_shap", "total_gain", "unbiased_gain",
    ]  # fmt: skip
    n = Xv.shape[0]
    counts = np.random.default_rng(0).multinomial(n, np.full(n, 1 / n))
    assert counts.max() >= 3 and np.sum(counts == 0) > n / 5
    rows = np.repeat(np.arange(n), counts)
    opts = Options(n_repeats=1)
    ref = treeinner.importance(ens, Xv[rows], yv[rows], methods=methods, random_state=0)
    for m in methods:
        rep = _replicate(ens, Xv, yv, get(m), opts, counts, 0)
        np.testing.assert_allclose(rep, ref[m], rtol=1e-9, atol=1e-9, err_msg=m)
    # with sample weights the counts multiply them (abs_* are weighted means)
    opts = Options(sample_weight=wv, n_repeats=1)
    ref = treeinner.importance(
        ens, Xv[rows], yv[rows], methods=methods[:-2], sample_weight=wv[rows]
    )
    for m in methods[:-2]:
        rep = _replicate(ens, Xv, yv, get(m), opts, counts, 0)
        np.testing.assert_allclose(rep, ref[m], rtol=1e-9, atol=1e-9, err_msg=m)


def test_bootstrap_se_of_a_mean_matches_its_formula():
    """abs_predecomp is a mean of per-row values: its bootstrap variance is var(v) / n."""
    X, y, _ = _data("reg:squarederror", 500, p=5, seed=4)
    booster = _train("reg:squarederror", X[:200], y[:200], rounds=15)
    Xv, yv = X[200:], y[200:]
    df = treeinner.importance(
        booster, Xv, yv, methods=["abs_predecomp"], n_bootstrap=400, random_state=1
    )
    v = np.abs(treeinner.predecomp(booster, Xv).values)
    expected = v.std(axis=0) / np.sqrt(v.shape[0])
    used = expected > 0
    np.testing.assert_allclose(df["abs_predecomp_se"][used], expected[used], rtol=0.2)


def test_bootstrap_se_shrinks_like_one_over_sqrt_n():
    """Four times the rows: half the standard error of a mean-type score (abs, permutation,
    unbiased gain), twice that of a sum over rows (TreeInner, ForestInner), i.e. half of it
    per row. A statistical check with a tolerant bound."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1100, 5))
    y = 2 * X[:, 0] + X[:, 1] + 0.5 * X[:, 2] + rng.normal(size=1100)
    ens = quiet_ensemble(_train("reg:squarederror", X[:300], y[:300], rounds=15))
    methods = ["tree_inner", "forest_inner", "abs_predecomp", "permutation", "unbiased_gain"]
    sums = {"tree_inner", "forest_inner"}
    se = {}
    for n in (200, 800):
        df = treeinner.importance(
            ens, X[300 : 300 + n], y[300 : 300 + n], methods=methods, n_repeats=1,
            random_state=1, n_bootstrap=30,
        )  # fmt: skip
        se[n] = np.array([df[f"{m}_se"].iloc[:3].sum() / (n if m in sums else 1) for m in methods])
    ratio = se[200] / se[800]
    assert np.all((ratio > 1.25) & (ratio < 3.2)), dict(zip(methods, ratio))
    assert 1.45 < np.exp(np.log(ratio).mean()) < 2.75, dict(zip(methods, ratio))


def test_bootstrap_multiclass_and_errors(frame_models):
    names, X, _, y_mc, _, multi = frame_models
    df = treeinner.importance(
        multi, X, y_mc, methods=["tree_inner", "abs_shap"], n_bootstrap=4, random_state=0
    )
    assert list(df.columns) == ["tree_inner", "abs_shap", "tree_inner_se", "abs_shap_se"]
    assert list(df.index) == names
    assert np.all(df[["tree_inner_se", "abs_shap_se"]] > 0)
    y = y_mc
    for bad in (1, -2):
        with pytest.raises(ValueError, match="n_bootstrap"):
            treeinner.importance(multi, X, y, methods=["tree_inner"], n_bootstrap=bad)
    for bad in (2.5, True, "10"):
        with pytest.raises(TypeError, match="n_bootstrap"):
            treeinner.importance(multi, X, y, methods=["tree_inner"], n_bootstrap=bad)
    with pytest.raises(ValueError, match="row"):
        treeinner.importance(multi, X.iloc[:0], y[:0], methods=["tree_inner"], n_bootstrap=2)
    with pytest.raises(ValueError, match="random_state"):
        treeinner.importance(multi, X, y, methods=["tree_inner"], n_bootstrap=2, random_state=-1)


def test_importance_reference_reaches_the_methods_that_use_it():
    """``reference=`` recomputes PreDecomp node values for tree_inner, forest_inner and
    abs_predecomp and gives unbiased_gain its training sums; other methods ignore it."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(11)
    X = rng.normal(size=(600, 4))
    y = X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=600)
    model = xgb.XGBRegressor(n_estimators=15, max_depth=3, n_jobs=1).fit(X[:400], y[:400])
    ref = (X[:150], y[:150])  # part of the training rows: node values unlike the stored ones
    Xv, yv = X[400:], y[400:]
    methods = ["tree_inner", "forest_inner", "abs_predecomp", "unbiased_gain", "total_gain"]
    got = treeinner.importance(model, Xv, yv, methods=methods, reference=ref, random_state=0)
    np.testing.assert_allclose(
        got["tree_inner"], treeinner.tree_inner(model, Xv, yv, reference=ref)
    )
    np.testing.assert_allclose(
        got["forest_inner"], treeinner.forest_inner(model, Xv, yv, reference=ref)
    )
    pre = np.abs(treeinner.predecomp(model, Xv, reference=ref).values).mean(axis=0)
    np.testing.assert_allclose(got["abs_predecomp"], pre)
    ug = treeinner.unbiased_gain(model, Xv, yv, random_state=0, reference=ref)
    np.testing.assert_allclose(got["unbiased_gain"], ug)
    np.testing.assert_array_equal(got["total_gain"], treeinner.total_gain(model))
    plain = treeinner.importance(model, Xv, yv, methods=["tree_inner"])
    assert not np.allclose(got["tree_inner"], plain["tree_inner"])  # the reference was used
    with pytest.raises(ValueError, match="reference"):
        treeinner.importance(model, Xv, yv, methods=["tree_inner_saabas"], reference=ref)
    # the bootstrap resamples the evaluation rows, the reference fixed
    boot = treeinner.importance(
        model, Xv, yv, methods=["tree_inner"], reference=ref, n_bootstrap=3, random_state=0
    )
    np.testing.assert_allclose(boot["tree_inner"], got["tree_inner"])
    assert (boot["tree_inner_se"] > 0).all()
