"""CatBoost classifiers without training data where the model suffices, and one ``reference=``
where it does not (issue 16): Saabas from CatBoost's leaf weights, total gain from the
training data, the default importance with ``reference=`` (standard errors, bootstrap), the
messages in the caller's language (Python and the command line), permutation importance of
categorical models, cross-fitting estimators scikit-learn cannot clone. (Save/load of
categorical models: tests/test_ensemble.py.)"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import _crossfit, cli
from treeinner._methods import DEFAULT_CLI_METHODS, DEFAULT_METHODS, get

cb = pytest.importorskip("catboost")

CATS = ["c1", "c2"]
LOSSES = ["Logloss", "MultiClass"]


def _data(rng: np.random.Generator, n: int, classes: int, categorical: bool):
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c1": rng.choice(["x", "y", "z"], n),
            "c2": rng.choice([f"k{i}" for i in range(8)], n),
            "d": rng.normal(size=n),
        }
    )
    s = X["a"] + 0.5 * X["b"] + (X["c1"] == "x") + X["c2"].isin(["k1", "k2", "k3"])
    y = (s + rng.normal(size=n) > 0.7).astype(int)
    if classes > 2:
        y = y + (X["d"] + 0.3 * rng.normal(size=n) > 0.3)
    if not categorical:
        X = X.drop(columns=CATS)
    return X, y.to_numpy()


class Case:
    """A fitted CatBoostClassifier with its training and held-out rows."""

    def __init__(self, loss: str, categorical: bool, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        classes = 3 if loss == "MultiClass" else 2
        self.loss, self.categorical = loss, categorical
        self.X, self.y = _data(rng, 500, classes, categorical)
        self.Xv, self.yv = _data(rng, 200, classes, categorical)
        self.model = cb.CatBoostClassifier(
            loss_function=loss,
            iterations=12,
            depth=3,
            learning_rate=0.3,
            verbose=0,
            thread_count=1,
            random_seed=seed,
            allow_writing_files=False,
            cat_features=CATS if categorical else None,
        ).fit(self.X, self.y)
        self.ref = (self.X, self.y)

    def raw(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.model.predict(X, prediction_type="RawFormulaVal"))

    def __repr__(self) -> str:
        return f"{self.loss}{'-categorical' if self.categorical else ''}"


pytestmark = pytest.mark.filterwarnings("ignore:Node values from data")


@pytest.fixture(scope="module", params=[(loss, cat) for loss in LOSSES for cat in (False, True)])
def case(request) -> Case:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Case(*request.param)


@pytest.fixture(scope="module")
def logloss_cat() -> Case:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Case("Logloss", True, seed=1)


@contextlib.contextmanager
def _quiet():
    """The conversion's notes (PreDecomp from data is approximate for CTR models) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------ Saabas from leaf weights
def _count_weighted(ens) -> np.ndarray:
    """Saabas node values by the definition: a leaf's value, an inner node's the mean of its
    children weighted by their leaf weights (the plain mean where both weigh 0)."""
    p = np.array(ens.value, dtype=np.float64)
    w = np.asarray(ens.count, dtype=np.float64)

    def visit(n: int) -> None:
        a, b = ens.left[n], ens.right[n]
        if a < 0:
            return
        visit(a)
        visit(b)
        wt = w[a] + w[b]
        p[n] = (w[a] * p[a] + w[b] * p[b]) / wt if wt > 0 else 0.5 * (p[a] + p[b])

    for t in range(ens.n_trees):
        visit(int(ens.tree_offsets[t]))
    return p


def test_saabas_needs_no_training_data(case):
    """Saabas' node values are CatBoost's leaf-weighted means (no hessian covers needed), its
    attributions add up to CatBoost's own raw margin, and TreeInner with Saabas runs."""
    ens = treeinner.from_model(case.model)
    assert not np.isfinite(ens.cover).all()  # a classifier: no hessian covers
    inner = ens.left >= 0
    # leaf weights add up: an inner node weighs what its children weigh
    np.testing.assert_allclose(
        ens.count[inner], ens.count[ens.left[inner]] + ens.count[ens.right[inner]]
    )
    p = treeinner.node_values(case.model, attribution="saabas")
    np.testing.assert_allclose(p, _count_weighted(ens), rtol=1e-12, atol=1e-15)
    attr = treeinner.saabas(case.model, case.Xv)
    margin = attr.values.sum(axis=1) + attr.bias
    np.testing.assert_allclose(margin, case.raw(case.Xv), rtol=1e-12, atol=1e-12)
    assert np.abs(attr.values).max() > 0
    inner_saabas = treeinner.tree_inner(case.model, case.Xv, case.yv, attribution="saabas")
    assert np.isfinite(np.asarray(inner_saabas, dtype=float)).all()
    frame = treeinner.importance(
        case.model,
        case.Xv,
        case.yv,
        methods=["abs_saabas", "tree_inner_saabas", "abs_shap", "tree_inner_shap"],
        se=True,
    )
    assert np.isfinite(frame.to_numpy()).all()


def test_saabas_of_a_split_is_its_leaf_weighted_change(logloss_cat):
    """One tree by hand: the attribution of a row is p(child) - p(parent) along its path with
    p the leaf-weighted means, summed per feature (categorical splits credited to their
    column)."""
    case = logloss_cat
    ens = treeinner.from_model(case.model)
    p = _count_weighted(ens)
    attr = treeinner.saabas(case.model, case.Xv, iteration_range=(0, 1))
    leaves = ens.leaf_index(case.Xv, iteration_range=(0, 1))[:, 0]
    lo, hi = ens.tree_offsets[0], ens.tree_offsets[1]
    node_of_leaf = {int(ens.leaf_id[n]): n for n in range(lo, hi) if ens.left[n] < 0}
    parent = {
        int(c): n for n in range(lo, hi) if ens.left[n] >= 0 for c in (ens.left[n], ens.right[n])
    }
    want = np.zeros((len(case.Xv), ens.n_features))
    for i, leaf in enumerate(leaves):
        n = node_of_leaf[int(leaf)]
        while n in parent:
            q = parent[n]
            want[i, ens.feature[q]] += p[n] - p[q]
            n = q
    want = ens._to_output(want, axis=1)
    np.testing.assert_allclose(attr.values, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(attr.bias, ens.base_margin + p[lo], rtol=1e-12)


# ------------------------------------------------------------------ total gain from reference
def test_total_gain_from_reference_is_tree_inner_on_the_training_data(case):
    """Without data CatBoost's total gain is NaN (it stores no gains); from the training data
    it is every split's G_L^2/(H_L+l) + G_R^2/(H_R+l) - G^2/(H+l), which is TreeInner with
    PreDecomp from the same data evaluated on it (Prop. 3 of paper 003)."""
    with _quiet():
        stored = treeinner.total_gain(case.model)
        gain = treeinner.total_gain(case.model, reference=case.ref)
        inner = treeinner.tree_inner(case.model, case.X, case.y, reference=case.ref)
    assert np.isnan(np.asarray(stored, dtype=float)).all()
    g, t = np.asarray(gain, dtype=float), np.asarray(inner, dtype=float)
    assert np.isfinite(g).all() and g.max() > 0
    np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-10 * np.abs(t).max())
    # with sample weights (CatBoost scales lambda by their mean) the identity holds too
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(case.y))
    with _quiet():
        gw = treeinner.total_gain(case.model, reference=(*case.ref, w))
        tw = treeinner.tree_inner(
            case.model, case.X, case.y, sample_weight=w, reference=(*case.ref, w)
        )
    np.testing.assert_allclose(
        np.asarray(gw, dtype=float), np.asarray(tw, dtype=float), rtol=1e-10, atol=1e-9
    )


def test_total_gain_from_reference_reproduces_xgboost_gains():
    """The formula is the booster's: XGBoost's stored gains, recomputed from its training
    data, agree to float32 rounding."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=600) > 0).astype(float)
    m = xgb.XGBClassifier(n_estimators=15, max_depth=3, learning_rate=0.3).fit(X, y)
    stored = treeinner.total_gain(m).to_numpy()
    ours = treeinner.total_gain(m, reference=(X, y)).to_numpy()
    np.testing.assert_allclose(ours, stored, rtol=1e-6)


# ------------------------------------------------------------------ importance with reference
def test_default_importance_with_reference(case):
    """The default methods, their one-pass standard errors and the bootstrap all run with
    reference=; every column is finite (total gain from the reference included); the
    bootstrap's scores are the plain call's, its total gain error 0."""
    with _quiet():
        plain = treeinner.importance(
            case.model, case.Xv, case.yv, reference=case.ref, random_state=0, n_repeats=1
        )
        se = treeinner.importance(
            case.model, case.Xv, case.yv, reference=case.ref, random_state=0, n_repeats=1, se=True
        )
        boot = treeinner.importance(
            case.model,
            case.Xv,
            case.yv,
            reference=case.ref,
            random_state=0,
            n_repeats=1,
            n_bootstrap=2,
        )
        inner = treeinner.tree_inner(case.model, case.Xv, case.yv, reference=case.ref)
        gain = treeinner.total_gain(case.model, reference=case.ref)
    assert list(plain.columns) == list(DEFAULT_METHODS)
    assert np.isfinite(plain.to_numpy()).all()
    np.testing.assert_allclose(plain["tree_inner"], treeinner._api.total(inner), rtol=1e-12)
    np.testing.assert_allclose(plain["total_gain"], treeinner._api.total(gain), rtol=1e-12)
    for m in DEFAULT_METHODS:
        if m != "permutation":
            np.testing.assert_allclose(se[m], plain[m], rtol=1e-9, atol=1e-12)
        assert np.isfinite(se[f"{m}_se"]).all() or m == "permutation"
        np.testing.assert_allclose(boot[m], plain[m], rtol=1e-12, atol=1e-12)
        assert np.isfinite(boot[f"{m}_se"]).all()
    assert (boot["total_gain_se"] == 0).all()
    assert (boot["tree_inner_se"] > 0).any()


def test_bootstrap_keeps_the_reference_fixed(logloss_cat):
    """A bootstrap resample reweights the evaluation rows only: its standard error of
    TreeInner is that of the reweighted sums with node values from the whole reference."""
    case = logloss_cat
    with _quiet():
        boot = treeinner.importance(
            case.model,
            case.Xv,
            case.yv,
            methods="tree_inner",
            reference=case.ref,
            random_state=5,
            n_bootstrap=3,
        )
        rng = treeinner._api.child_generator(5)
        n = len(case.yv)
        reps = []
        for _ in range(3):
            counts = rng.multinomial(n, np.full(n, 1.0 / n))
            rng.integers(0, 2**63)
            w = counts.astype(float)
            r = treeinner.tree_inner(
                case.model, case.Xv, case.yv, sample_weight=w, reference=case.ref
            )
            reps.append(r.to_numpy())
    want = np.std(np.asarray(reps), axis=0, ddof=1)
    np.testing.assert_allclose(boot["tree_inner_se"], want, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ messages
@pytest.mark.parametrize(
    ("name", "call", "spelling"),
    [
        (
            "tree_inner",
            lambda c: treeinner.tree_inner(c.model, c.Xv, c.yv),
            "tree_inner(model, X, y, ",
        ),
        (
            "forest_inner",
            lambda c: treeinner.forest_inner(c.model, c.Xv, c.yv),
            "forest_inner(model, X, y, ",
        ),
        ("predecomp", lambda c: treeinner.predecomp(c.model, c.Xv), "predecomp(model, X, "),
        ("node_values", lambda c: treeinner.node_values(c.model), "node_values(model, "),
        (
            "importance",
            lambda c: treeinner.importance(c.model, c.Xv, c.yv),
            "importance(model, X, y, ",
        ),
        (
            "significance",
            lambda c: treeinner.significance(c.model, c.Xv, c.yv, methods="tree_inner"),
            "significance(model, X, y, ",
        ),
    ],
)
def test_message_names_the_function_called(logloss_cat, name, call, spelling):
    """Without training data, PreDecomp's error names the function the user called and how to
    pass its reference=."""
    with pytest.raises(ValueError) as info:
        call(logloss_cat)
    msg = str(info.value)
    assert msg == (
        f"{name} needs the training data for this CatBoost Logloss model (it stores no hessian "
        f"covers): {spelling}reference=(X_train, y_train))"
    )
    assert "kind=" not in msg


def test_message_names_the_multiclass_objective(case):
    with pytest.raises(ValueError, match=rf"this CatBoost {case.loss} model"):
        treeinner.tree_inner(case.model, case.Xv, case.yv)


def test_saabas_refuses_reference(logloss_cat):
    """Saabas needs no training data, and reference= is PreDecomp's: refused with the fix."""
    with pytest.raises(ValueError, match="attribution='predecomp'"):
        treeinner.node_values(logloss_cat.model, attribution="saabas", reference=logloss_cat.ref)


# ------------------------------------------------------------------ the command line
@pytest.fixture(scope="module")
def cli_files(logloss_cat, tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    case = logloss_cat
    model = str(d / "model.cbm")
    case.model.save_model(model)
    train, valid = str(d / "train.csv"), str(d / "valid.csv")
    case.X.assign(t=case.y).to_csv(train, index=False)
    case.Xv.assign(t=case.yv).to_csv(valid, index=False)
    return model, train, valid, d


def test_cli_message_is_in_the_command_line_spelling(cli_files, capsys):
    model, train, valid, _ = cli_files
    argv = ["explain", model, "--data", valid, "--target", "t", "--quiet"]
    # the default methods need no hessian covers (the centred initial form takes its node
    # values from the rows); TreeInner's PreDecomp does
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main([*argv, "--method", "tree_inner"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "treeinner: error: treeinner explain needs the training data for this CatBoost Logloss "
        "model (it stores no hessian covers): pass the training data with --reference FILE"
    )
    assert cli.main([*argv, "--method", "unbiased_gain", "--no-se"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(": pass the training data with --reference FILE")
    assert "reference=" not in line and "X_train" not in line


def test_cli_bootstrap_with_reference(cli_files, capsys):
    """--bootstrap with --reference: the library's bootstrap with the reference fixed; total
    gain (from the reference) is kept among the default methods."""
    model, train, valid, d = cli_files
    out = str(d / "boot.csv")
    argv = ["explain", model, "--data", valid, "--target", "t", "--reference", train]
    assert cli.main([*argv, "--bootstrap", "2", "--quiet", "--out", out]) == 0
    capsys.readouterr()
    got = pd.read_csv(out, index_col=0)
    Xt, Xv = pd.read_csv(train), pd.read_csv(valid)
    ref = (Xt, Xt.pop("t").to_numpy())
    yv = Xv.pop("t").to_numpy()
    with _quiet():
        want = treeinner.importance(
            treeinner.load(model),
            Xv,
            yv,
            methods=list(DEFAULT_CLI_METHODS),
            reference=ref,
            random_state=0,
            n_bootstrap=2,
        )
    assert list(got.columns) == list(want.columns)
    np.testing.assert_allclose(got.to_numpy(), want.loc[got.index].to_numpy(), rtol=1e-9)
    assert np.isfinite(got.to_numpy()).all()


# ------------------------------------------------------------------ permutation
def test_permutation_of_a_categorical_model(logloss_cat):
    """Permutation importance permutes the raw columns (strings included) and lets CatBoost
    route the rows again: equal to the loss increases computed with CatBoost's own margins."""
    case = logloss_cat
    got = treeinner.importance(
        case.model, case.Xv, case.yv, methods="permutation", n_repeats=2, random_state=3
    )["permutation"]
    ens = treeinner.from_model(case.model)
    obj = treeinner.objectives.get_objective(ens)
    base = obj.loss(case.yv.astype(float), case.raw(case.Xv))
    used = np.zeros((ens.n_features, 1))
    used[ens.feature[ens.left >= 0], 0] = 1
    credited = np.flatnonzero(ens._to_output(used)[:, 0] > 0)
    assert {"c1", "c2"} <= {ens.output_names[j] for j in credited}
    rng = np.random.default_rng(3)
    want = pd.Series(0.0, index=list(ens.output_names))
    for j in credited:
        name = ens.output_names[j]
        for _ in range(2):
            Xp = case.Xv.copy()
            Xp[name] = case.Xv[name].to_numpy()[rng.permutation(len(Xp))]
            want[name] += (obj.loss(case.yv.astype(float), case.raw(Xp)) - base) / 2
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-10, atol=1e-12)
    assert got["c1"] > 0


# ------------------------------------------------------------------ cross-fitting clones
def test_crossfit_clones_catboost_with_cat_features(logloss_cat):
    """scikit-learn cannot clone a CatBoostClassifier given cat_features (catboost 1.2.10,
    scikit-learn 1.9): the estimator is rebuilt from its parameters, its cat_features following
    the columns a fit keeps."""
    est = cb.CatBoostClassifier(
        iterations=5,
        depth=2,
        verbose=0,
        thread_count=1,
        allow_writing_files=False,
        cat_features=CATS,
    )
    copy = _crossfit.clone_estimator(est)
    assert copy is not est and copy.get_params() == est.get_params()
    assert not copy.is_fitted()
    names = np.array(["a", "b", "c1", "c2", "d"], dtype=object)
    kept = _crossfit.clone_estimator(est, np.array([0, 3, 4]), names)
    assert kept.get_params()["cat_features"] == ["c2"]
    by_pos = cb.CatBoostClassifier(iterations=5, cat_features=[2, 3], verbose=0)
    assert _crossfit.clone_estimator(by_pos, np.array([0, 3]), names).get_params()[
        "cat_features"
    ] == [1]
    case = logloss_cat
    with _quiet():
        table = treeinner.significance(
            est, case.X, case.y, cv=2, methods=["tree_inner", "total_gain"], random_state=0
        )
    scores = table.set_index(["method", "feature"])["score"]
    assert np.isfinite(scores.to_numpy()).all()  # total gain from each fold's training rows
    assert get("total_gain").uses_reference
