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
