"""``treeinner select`` with its selection rules (--rule, --alpha), in process, on a saved
XGBoost model: the printed features are those ``treeinner.select_features`` keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import cli
from treeinner.selection import DEFAULT_ALPHA, DEFAULT_RULE

xgb = pytest.importorskip("xgboost")

SIGNAL = ["s0", "s1", "s2"]
COLS = SIGNAL + ["n0", "n1", "n2", "n3", "n4"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("select")
    rng = np.random.default_rng(11)
    n = 1000
    X = pd.DataFrame(rng.normal(size=(n, len(COLS))), columns=COLS)
    y = 1.5 * X.s0 + X.s1 - 0.5 * X.s2 + rng.normal(size=n)
    model = xgb.XGBRegressor(n_estimators=40, max_depth=4, learning_rate=0.3, nthread=1)
    model.fit(X[:500], y[:500])
    path = d / "model.json"
    model.save_model(path)
    valid = d / "valid.csv"
    X[500:].assign(y=y[500:]).to_csv(valid, index=False)
    Xv = pd.read_csv(valid)
    yv = Xv.pop("y").to_numpy()
    return str(path), str(valid), treeinner.load(str(path)), Xv, yv, d


def _run(capsys, argv):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err.splitlines()


@pytest.mark.parametrize(
    "extra, kw",
    [
        # without --alpha: the rule's default level
        (["--rule", "fdr"], {"rule": "fdr", "alpha": 0.1}),
        (["--rule", "interval"], {"rule": "interval", "alpha": 0.2}),
        ([], {"rule": "fdr", "alpha": 0.1}),
        (
            ["--rule", "fdr", "--alpha", "0.01", "--top-k", "2"],
            {"rule": "fdr", "alpha": 0.01, "top_k": 2},
        ),
        (["--rule", "interval", "--alpha", "0.3"], {"rule": "interval", "alpha": 0.3}),
        (["--threshold", "5"], {"threshold": 5.0}),
        (["--rule", "threshold"], {"rule": "threshold"}),
        (["--method", "permutation"], {"method": "permutation", "random_state": 0}),
    ],
)
def test_select_rules_equal_select_features(saved, capsys, tmp_path, extra, kw):
    path, valid, ens, Xv, yv, _ = saved
    out = str(tmp_path / "kept.txt")
    code, lines, err = _run(
        capsys, ["select", path, "--data", valid, "--target", "y", "--out", out, *extra]
    )
    assert code == 0, err
    want = treeinner.select_features(ens, Xv, yv, **kw)
    assert lines == want
    assert open(out).read().splitlines() == want
    assert set(SIGNAL) <= set(want) or kw.get("top_k") == 2


def test_select_fdr_keeps_the_signal_and_the_default_rule(saved, capsys):
    path, valid, ens, Xv, yv, _ = saved
    table = treeinner.significance(ens, Xv, yv).set_index("feature")
    code, lines, _ = _run(
        capsys, ["select", path, "--data", valid, "--target", "y", "--rule", "fdr"]
    )
    assert code == 0
    assert lines == list(table.index[table.q_value <= 0.1])
    assert set(SIGNAL) <= set(lines)
    # the default rule is fdr at 0.1; the interval rule at its default alpha 0.2 keeps every
    # feature whose one-sided 80% bound is above 0
    assert DEFAULT_RULE == "fdr" and DEFAULT_ALPHA == {"fdr": 0.1, "interval": 0.2}
    code, default, _ = _run(capsys, ["select", path, "--data", valid, "--target", "y"])
    assert default == lines
    code, lines, _ = _run(
        capsys, ["select", path, "--data", valid, "--target", "y", "--rule", "interval"]
    )
    upper = table.score + 0.8416212335729143 * table.se
    assert lines == list(table.index[upper > 0])


def test_select_alpha_defaults_to_the_rules_own(capsys):
    parser = cli.build_parser()
    args = parser.parse_args(["select", "model.json", "--data", "d.csv", "--target", "y"])
    assert args.alpha is None  # resolved by select_features, per rule
    with pytest.raises(SystemExit):
        parser.parse_args(["select", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: the rule's, 0.1 for fdr, 0.2 for interval)" in text


@pytest.mark.parametrize(
    "extra, code, words",
    [
        (["--rule", "fdr", "--threshold", "0"], 1, "--threshold belongs to --rule threshold"),
        (["--rule", "interval", "--method", "total_gain"], 1, "needs standard errors"),
        (["--alpha", "0.5"], 1, "--alpha must be strictly between 0 and 0.5"),
        (["--alpha", "0"], 1, "--alpha"),
        (["--threshold", "nan"], 1, "NaN"),
        (["--rule", "bonferroni"], 2, "invalid choice: 'bonferroni'"),
    ],
)
def test_select_rule_errors(saved, capsys, extra, code, words):
    path, valid, *_ = saved
    got, lines, err = _run(capsys, ["select", path, "--data", valid, "--target", "y", *extra])
    assert got == code and lines == []
    (line,) = err
    assert line.startswith("treeinner: error: ") and words in line


# ---------------------------------------------------------------------- --strategy recursive
@pytest.fixture(scope="module")
def recursive_files(saved):
    """The saved XGBoost regressor's training rows as a file, and the same model saved by
    LightGBM (text) and CatBoost (.cbm), with the training parameters their files keep."""
    lgb = pytest.importorskip("lightgbm")
    cb = pytest.importorskip("catboost")
    _, valid, _, Xv, yv, d = saved
    rng = np.random.default_rng(11)
    X = pd.DataFrame(rng.normal(size=(1000, len(COLS))), columns=COLS)
    y = 1.5 * X.s0 + X.s1 - 0.5 * X.s2 + rng.normal(size=1000)
    train = d / "train.csv"
    X[:500].assign(y=y[:500]).to_csv(train, index=False)
    lgb_path = d / "model.txt"
    lgb.LGBMRegressor(n_estimators=40, num_leaves=8, learning_rate=0.2, verbose=-1).fit(
        X[:500], y[:500]
    ).booster_.save_model(lgb_path)
    cb_path = d / "model.cbm"
    cb.CatBoostRegressor(iterations=40, depth=3, verbose=0, allow_writing_files=False,
                         thread_count=1).fit(X[:500], y[:500]).save_model(cb_path)  # fmt: skip
    return str(train), str(valid), str(lgb_path), str(cb_path)


def test_select_recursive_refits_the_saved_models_booster(capsys, saved, recursive_files, tmp_path):
    """--strategy recursive rebuilds the booster from the parameters its file keeps (LightGBM,
    CatBoost; XGBoost's with --params) and runs TreeInnerSelector's recursive elimination on
    the training plus the validation rows: the relevant features, in the model's order."""
    from treeinner.adapters import training_estimator

    train, valid, lgb_path, cb_path = recursive_files
    xgb_path = saved[0]
    est = training_estimator(treeinner.load(lgb_path), lgb_path)
    assert est.get_params()["num_leaves"] == 8 and est.get_params()["learning_rate"] == 0.2
    assert est.get_params()["n_estimators"] == 40
    est = training_estimator(treeinner.load(cb_path), cb_path, {"thread_count": 1})
    assert est.get_params()["depth"] == 3 and est.get_params()["iterations"] == 40
    out = tmp_path / "kept.txt"
    for model, extra in (
        (lgb_path, []),
        (cb_path, []),
        (xgb_path, ["--params", '{"max_depth": 4}']),
    ):
        argv = ["select", model, "--data", valid, "--target", "y", "--reference", train,
                "--strategy", "recursive", "--quiet", "--out", str(out)] + extra  # fmt: skip
        code, lines, _ = _run(capsys, argv)
        assert code == 0 and lines == SIGNAL, (model, lines)
        assert out.read_text().splitlines() == SIGNAL


@pytest.mark.parametrize(
    "extra, match",
    [
        ([], "--params"),  # XGBoost keeps no tree parameters
        (["--params", "[1, 2]"], "JSON object"),
        (["--params", "{bad"], "not JSON"),
        (["--rule", "fdr", "--params", "{}"], "belongs to --strategy rule"),
    ],
)
def test_select_recursive_errors(capsys, saved, recursive_files, extra, match):
    train, valid, _, _ = recursive_files
    argv = ["select", saved[0], "--data", valid, "--target", "y", "--reference", train,
            "--strategy", "recursive", "--quiet"] + extra  # fmt: skip
    code, _, err = _run(capsys, argv)
    assert code != 0 and match in " ".join(err), err


def test_select_recursive_needs_the_training_rows(capsys, saved):
    code, _, err = _run(capsys, ["select", saved[0], "--data", saved[1], "--target", "y",
                                 "--strategy", "recursive"])  # fmt: skip
    assert code != 0 and "--reference FILE" in " ".join(err)


def test_select_recursive_refuses_a_model_file_without_training_parameters(capsys, tmp_path):
    """A treeinner .npz (here of the native booster) stores no training parameters to refit
    with: a clear error that points to the Python selector."""
    from treeinner.adapters import training_estimator
    from treeinner.booster import GBMRegressor

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = X.a + rng.normal(size=200)
    path = tmp_path / "model.npz"
    treeinner.from_model(GBMRegressor(n_estimators=5, max_depth=2).fit(X, y)).save(path)
    X.assign(y=y).to_csv(tmp_path / "data.csv", index=False)
    with pytest.raises(NotImplementedError, match="keeps no training parameters"):
        training_estimator(treeinner.load(str(path)), str(path))
    code, _, err = _run(capsys, ["select", str(path), "--data", str(tmp_path / "data.csv"),
                                 "--target", "y", "--reference", str(tmp_path / "data.csv"),
                                 "--strategy", "recursive", "--quiet"])  # fmt: skip
    assert code == 1 and "TreeInnerSelector(strategy='recursive')" in " ".join(err)
