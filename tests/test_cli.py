"""The ``treeinner`` command line, end to end through subprocesses, plus the chunked
computation, every registry method and the (tqdm) progress bar in process.

Every subprocess of the module is started at once by the ``runs`` fixture (a thread pool), so
the module's wall time is about the CPU time of all of them divided by the cores.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import _methods, cli
from treeinner._methods import REGISTRY
from treeinner.cli import _compute
from treeinner.cli._compute import ENV_VAR, progress_bar, resolve_mode, show_label

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
catboost = pytest.importorskip("catboost")
pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")

FEATURES = ["a", "b", "c", "d", "e"]
METHODS_A = [
    "tree_inner",
    "forest_inner_shap",
    "abs_shap",
    "abs_predecomp",
    "total_gain",
    "permutation",
    "unbiased_gain",
]
# the command line's defaults with --attribution shap
METHODS_B = ["forest_inner_initial_shap", "abs_shap", "total_gain"]
PNG = b"\x89PNG\r\n\x1a\n"


def _data(seed: int, n: int = 300) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, len(FEATURES))), columns=FEATURES)
    X.loc[rng.random(n) < 0.05, "d"] = np.nan
    y = 2 * X["a"].to_numpy() + np.sin(2 * X["b"].to_numpy()) + rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    X, y = _data(0)
    Xv, yv = _data(1)
    p = {}
    p["x"] = d / "x.json"
    xgb.train({"max_depth": 3, "nthread": 1, "eta": 0.3}, xgb.DMatrix(X, y), 20).save_model(p["x"])
    p["xb"] = d / "xb.json"  # binary: the regression labels are invalid for it
    xgb.train(
        {"objective": "binary:logistic", "max_depth": 2, "nthread": 1},
        xgb.DMatrix(X, (y > 0).astype(int)),
        5,
    ).save_model(p["xb"])
    p["l"] = d / "l.txt"
    params = {"num_leaves": 8, "num_threads": 1, "verbose": -1, "min_data_in_leaf": 10}
    lgb.train(params, lgb.Dataset(X, y), 20).save_model(str(p["l"]))
    p["c"] = d / "c.cbm"
    catboost.CatBoostRegressor(
        iterations=20, depth=3, verbose=0, thread_count=1, allow_writing_files=False
    ).fit(X, y).save_model(str(p["c"]))

    valid = Xv.assign(y=yv)
    p["csv"] = d / "v.csv"
    valid.to_csv(p["csv"], index=False)
    p["parquet"] = d / "v.parquet"
    valid.to_parquet(p["parquet"])
    p["missing_col"] = d / "missing.csv"
    valid.drop(columns=["c"]).to_csv(p["missing_col"], index=False)
    p["empty_rows"] = d / "empty.csv"
    valid.iloc[:0].to_csv(p["empty_rows"], index=False)
    p["empty_file"] = d / "zero.csv"
    p["empty_file"].write_bytes(b"")
    p["xlsx"] = d / "v.xlsx"
    p["xlsx"].write_bytes(p["csv"].read_bytes())
    p["garbage"] = d / "garbage.json"
    p["garbage"].write_bytes(b'{"learner": {"gradient_booster": ')
    p["trunc"] = d / "trunc.txt"
    p["trunc"].write_text(p["l"].read_text()[:300])
    # weighted held-out rows and the training rows, for --weight and --reference
    p["csv_w"] = d / "vw.csv"
    valid.assign(w=np.random.default_rng(4).uniform(0.5, 2.0, len(yv))).to_csv(
        p["csv_w"], index=False
    )
    p["train"] = d / "train.csv"
    X.assign(y=y, w=np.random.default_rng(5).uniform(0.5, 2.0, len(y))).to_csv(
        p["train"], index=False
    )
    return d, {k: str(v) for k, v in p.items()}


def _commands(d, p):
    names = ("a.csv", "a.png", "b.json", "c.json", "c.png", "s.txt", "n.csv", "n.png")
    out = {k: str(d / k) for k in names}
    explain = ["explain", "--target", "y"]
    ok = {
        "xgb_csv": [
            *explain,
            p["x"],
            "--data",
            p["csv"],
            "--method",
            *METHODS_A[:3],
            "--method",
            ",".join(METHODS_A[3:]),
            "--out",
            out["a.csv"],
            "--plot",
            out["a.png"],
            "--chunk-rows",
            "64",
            "--progress",
            "always",
        ],
        "xgb_nose": [
            *explain,
            p["x"],
            "--data",
            p["csv"],
            "--method",
            ",".join(METHODS_A),
            "--no-se",
            "--out",
            out["n.csv"],
            "--plot",
            out["n.png"],
        ],
        "lgb_parquet": [
            *explain,
            p["l"],
            "--data",
            p["parquet"],
            "--attribution",
            "shap",
            "--bootstrap",
            "3",
            "--out",
            out["b.json"],
        ],
        "cb_csv": [
            *explain,
            p["c"],
            "--data",
            p["csv"],
            "--out",
            out["c.json"],
            "--plot",
            out["c.png"],
            "--chunk-rows",
            "100",
        ],
        "select_x": ["select", p["x"], "--data", p["csv"], "--target", "y", "--out", out["s.txt"]],
        "select_l": [
            "select",
            p["l"],
            "--data",
            p["parquet"],
            "--target",
            "y",
            "--method",
            "abs_shap",
            "--top-k",
            "2",
        ],
    }
    bad = {
        "missing_model": [*explain, str(d / "nope.json"), "--data", p["csv"]],
        "missing_data": [*explain, p["x"], "--data", str(d / "nope.csv")],
        "unknown_target": ["explain", p["x"], "--data", p["csv"], "--target", "label"],
        "feature_mismatch": [*explain, p["x"], "--data", p["missing_col"]],
        "corrupt_model": [*explain, p["garbage"], "--data", p["csv"]],
        "truncated_model": [*explain, p["trunc"], "--data", p["csv"]],
        "unknown_method": [*explain, p["x"], "--data", p["csv"], "--method", "gain"],
        "invalid_labels": [*explain, p["xb"], "--data", p["csv"]],
        "empty_rows": [*explain, p["x"], "--data", p["empty_rows"]],
        "empty_file": [*explain, p["x"], "--data", p["empty_file"]],
        "unsupported_ext": [*explain, p["x"], "--data", p["xlsx"]],
        "usage": ["explain", p["x"], "--target", "y"],  # no --data
    }
    return ok, bad, out


def _run(args, env=None, prefix=("-m", "treeinner")):
    # bytes, decoded here: text=True would turn the progress bar's carriage returns into "\n"
    res = subprocess.run(
        [sys.executable, *prefix, *args], capture_output=True, timeout=300, env=env
    )
    res.stdout, res.stderr = res.stdout.decode(), res.stderr.decode()
    return res


@pytest.fixture(scope="module")
def expected(files):
    """The library's own results for what the subprocesses compute. Computed first: this also
    compiles (or loads) the Numba kernels once, writing their cache before the subprocesses
    start, so they do not all compile them at the same time."""
    d, p = files
    X, y = _valid(p)
    Xp, yp = _valid(p, "parquet")
    x, lg = treeinner.load(p["x"]), treeinner.load(p["l"])
    return {
        "xgb_csv": treeinner.significance(x, X, y, methods=METHODS_A, random_state=0),
        "xgb_nose": treeinner.importance(x, X, y, methods=METHODS_A, random_state=0),
        "lgb_parquet": treeinner.importance(
            lg, Xp, yp, methods=METHODS_B, random_state=0, n_bootstrap=3
        ),
        "cb_csv": treeinner.significance(
            treeinner.load(p["c"]), X, y, methods=["forest_inner_initial", "abs_shap"]
        ),
        "select_x": treeinner.select_features(x, X, y, random_state=0),
        "select_l": treeinner.select_features(
            lg, Xp, yp, method="abs_shap", top_k=2, random_state=0
        ),
    }


@pytest.fixture(scope="module")
def runs(files, expected):
    d, p = files
    ok, bad, out = _commands(d, p)
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    jobs = {name: (args, env, ("-m", "treeinner")) for name, args in {**ok, **bad}.items()}
    # Parquet without pyarrow: the same CLI in a process where importing pyarrow fails
    code = (
        "import sys; sys.modules['pyarrow'] = None; from treeinner.cli import main; "
        "raise SystemExit(main(sys.argv[1:]))"
    )
    jobs["no_pyarrow"] = (["explain", p["x"], "--data", p["parquet"], "--target", "y"], env)
    jobs["no_pyarrow"] += (("-c", code),)
    workers = max(2, (os.cpu_count() or 2) + 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(_run, *job) for name, job in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    return results, out, set(bad) | {"no_pyarrow"}


def _valid(p, key="csv"):
    frame = pd.read_csv(p["csv"]) if key == "csv" else pd.read_parquet(p["parquet"])
    y = frame.pop("y").to_numpy()
    return frame, y


def _close(got, want):
    """Equal to 1e-10 relative to the column's largest magnitude (NaN where NaN)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(want)) if np.any(np.isfinite(want)) else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * scale)


KEYS = ["method", "feature", "output"]
STATS = ["score", "se", "ci_low", "ci_high", "p_value", "q_value"]


def _table_close(got, want):
    """Two significance tables: the same rows in the same order, every statistic equal to
    1e-10 relative to its column's largest magnitude within a method (and output)."""
    keys = [k for k in KEYS if k in want.columns]
    assert list(got.columns) == keys + STATS
    assert list(want.columns) == keys + STATS
    for k in keys:
        assert [str(v) for v in got[k]] == [str(v) for v in want[k]], k
    groups = ["method", "output"] if "output" in keys else "method"
    for idx in want.groupby(groups, sort=False).groups.values():
        for c in STATS:
            _close(got.loc[idx, c], want.loc[idx, c])


_STATE = re.compile(r"(\d+)/(\d+) \[")


def _counts(text):
    """The row counts of every state a tqdm bar drew (states are separated by CR)."""
    states = [s for s in text.split("\r") if _STATE.search(s)]
    return states, [int(_STATE.search(s).group(1)) for s in states]


def _ok(res):
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr


# --------------------------------------------------------------------------------------------
# end to end


def test_console_script_declared():
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "treeinner"]
    assert ep.value == "treeinner.cli:main"


def _blocks(stdout):
    """The printed significance table: method -> (header words, rows as word lists), and the
    closing note."""
    *blocks, note = stdout.strip().split("\n\n")
    out = {}
    for block in blocks:
        title, header, index_name, *rows = block.splitlines()
        assert index_name.split() == ["feature"]
        out[title.split(":")[0]] = (header.split(), [r.split() for r in rows])
    return out, note


def test_explain_xgboost_csv_out_equals_significance(runs, expected):
    """The chunked (64 rows) table of the command line is treeinner.significance's."""
    results, out, _ = runs
    res = results["xgb_csv"]
    _ok(res)
    want = expected["xgb_csv"]
    got = pd.read_csv(out["a.csv"])
    _table_close(got, want)
    assert list(pd.unique(got["method"])) == METHODS_A
    assert list(got["feature"][: len(FEATURES)]) == FEATURES  # the model's order
    # the methods without a one-pass standard error: scores and NaN statistics
    plain = got[got["method"].isin(["total_gain", "permutation"])]
    assert plain["score"].notna().all() and plain[STATS[1:]].isna().all().all()
    assert got.loc[~got.index.isin(plain.index), "se"].gt(0).any()
    # stdout: a block per method, features sorted by score, the printed numbers the table's
    blocks, note = _blocks(res.stdout)
    assert list(blocks) == METHODS_A
    for m, (header, rows) in blocks.items():
        assert header == STATS
        w = want[want["method"] == m].sort_values("score", ascending=False, kind="stable")
        assert [r[0] for r in rows] == list(w["feature"])
        np.testing.assert_allclose([float(r[1]) for r in rows], w["score"], rtol=1e-5)
        printed_se = np.array([float(r[2]) for r in rows])
        np.testing.assert_allclose(printed_se, w["se"], rtol=1e-5)
    assert "95% interval" in note and "Benjamini-Hochberg" in note
    assert open(out["a.png"], "rb").read(8) == PNG


def test_explain_no_se_keeps_the_score_table(runs, expected):
    """--no-se: the score table of before (print, CSV) for scripts that read its columns."""
    results, out, _ = runs
    res = results["xgb_nose"]
    _ok(res)
    want = expected["xgb_nose"]
    got = pd.read_csv(out["n.csv"], index_col="feature")
    assert list(got.columns) == METHODS_A
    assert list(got.index) == FEATURES
    for m in METHODS_A:
        _close(got[m], want[m])
    # stdout: the table sorted by the first method, every feature once
    lines = res.stdout.strip().splitlines()
    assert lines[0].split() == METHODS_A
    rows = [ln.split()[0] for ln in lines[2:]]
    assert rows == list(want["tree_inner"].sort_values(ascending=False).index)
    assert open(out["n.png"], "rb").read(8) == PNG


def test_explain_progress_advances_per_chunk(runs):
    res = runs[0]["xgb_csv"]
    _ok(res)
    # 300 rows in chunks of 64 for each of the 4 row-additive methods, one step of 300 rows
    # for permutation and unbiased gain, none for total gain (it reads no data): 6 x 300 rows
    states, counts = _counts(res.stderr)
    assert counts == sorted(counts)
    chunked = [0, 64, 128, 192, 256, 300]
    for k in range(4):
        assert all(300 * k + c in counts for c in chunked[1:])
    assert {1500, 1800} <= set(counts)
    assert states[-1].startswith("treeinner explain: 100%") and "1800/1800 [" in states[-1]
    # the postfix names the method being computed, in order
    labels = [s.strip().rstrip(" ]").rsplit(", ", 1)[-1] for s in states if "rows/s, " in s]
    assert list(dict.fromkeys(labels)) == METHODS_A
    assert res.stderr.endswith("\n") and res.stderr.count("\n") == 1


def test_explain_lightgbm_parquet_json_with_bootstrap(runs, expected):
    results, out, _ = runs
    res = results["lgb_parquet"]
    _ok(res)
    assert res.stderr == ""  # stderr is no terminal: no progress bar
    want = expected["lgb_parquet"]
    doc = json.load(open(out["b.json"]))
    assert doc["methods"] == list(want.columns)
    assert doc["methods"] == METHODS_B + [f"{m}_se" for m in METHODS_B]
    assert doc["n_rows"] == 300 and doc["target"] == "y" and doc["n_bootstrap"] == 3
    got = pd.DataFrame(doc["importance"]).set_index("feature")
    assert list(got.index) == FEATURES
    for m in want.columns:
        _close(got[m], want[m])


def test_explain_catboost_defaults(runs, expected):
    results, out, _ = runs
    res = results["cb_csv"]
    _ok(res)
    doc = json.load(open(out["c.json"]))
    # CatBoost keeps no split gains: total_gain is dropped from the default methods
    assert doc["methods"] == ["forest_inner_initial", "abs_shap"]
    assert doc["alpha"] == 0.05
    want = expected["cb_csv"]
    _table_close(pd.DataFrame(doc["significance"]).astype({"feature": str}), want)
    # the scores as before, under "importance"
    got = pd.DataFrame(doc["importance"]).set_index("feature")
    assert list(got.index) == FEATURES
    for m in doc["methods"]:
        _close(got[m], want.loc[want["method"] == m, "score"])
    assert open(out["c.png"], "rb").read(8) == PNG


def test_select_equals_select_features(runs, expected):
    results, out, _ = runs
    _ok(results["select_x"])
    want = expected["select_x"]
    assert results["select_x"].stdout.splitlines() == want
    assert open(out["s.txt"]).read().splitlines() == want
    assert 0 < len(want) < len(FEATURES)  # the noise features score <= 0 on held-out data
    _ok(results["select_l"])
    want = expected["select_l"]
    assert results["select_l"].stdout.splitlines() == want and len(want) == 2


EXPECTED_WORDS = {
    "missing_model": ["nope.json", "not found"],
    "missing_data": ["nope.csv", "not found"],
    "unknown_target": ["'label'", "not found", "columns: a, b, c, d, e, y"],
    "feature_mismatch": ["missing", "c"],
    "corrupt_model": ["garbage.json"],
    "truncated_model": ["trunc.txt"],
    "unknown_method": ["method 'gain'", "choose from", "tree_inner_shap", "unbiased_gain"],
    "invalid_labels": ["labels", "binary:logistic"],
    "empty_rows": ["no rows"],
    "empty_file": ["zero.csv"],
    "unsupported_ext": ["'.xlsx'"],
    "usage": ["--data", "--help"],
    "no_pyarrow": ["pyarrow"],
}


@pytest.mark.parametrize("case", sorted(EXPECTED_WORDS))
def test_bad_input_one_line(runs, case):
    results, _, bad = runs
    assert case in bad
    res = results[case]
    assert res.returncode == (2 if case == "usage" else 1)
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("treeinner: error: ")
    for word in EXPECTED_WORDS[case]:
        assert word in lines[0]
    assert res.stdout == ""


# --------------------------------------------------------------------------------------------
# in process: chunked computation, errors, progress bar


@pytest.fixture(scope="module")
def multiclass(files):
    X, y = _data(2)
    cls = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    b = xgb.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "nthread": 1},
        xgb.DMatrix(X, cls),
        8,
    )
    return treeinner.from_model(b), X, cls


ADDITIVE = [name for name, m in REGISTRY.items() if m.row_additive]


@pytest.mark.parametrize("model", ["x", "l", "multiclass"])
def test_chunked_equals_one_call(files, multiclass, model, capsys):
    d, p = files
    if model == "multiclass":
        ens, X, y = multiclass
    else:
        ens = treeinner.load(p[model])
        X, y = _valid(p)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    want = treeinner.importance(ens, X, y, methods=ADDITIVE, sample_weight=w)
    capsys.readouterr()
    with progress_bar("test", "always", _compute.work_rows(ADDITIVE, len(y))) as bar:
        got = _compute.compute_importance(
            ens, X, y, ADDITIVE, sample_weight=w, chunk_rows=37, progress=bar
        )
        assert bar.n == bar.total == len(ADDITIVE) * 300
    for m in ADDITIVE:
        _close(got[m], want[m])
    # 9 methods over 300 rows in chunks of 37: the bar advanced per chunk
    _, counts = _counts(capsys.readouterr().err)
    steps = [300 * k + min(37 * j, 300) for k in range(len(ADDITIVE)) for j in range(1, 10)]
    assert sorted(set(counts) - {0}) == steps


@pytest.mark.parametrize("model", ["x", "multiclass"])
def test_chunked_significance_equals_library(files, multiclass, model, capsys):
    """compute_significance in chunks of 37 rows (Moments added over chunks) is
    treeinner.significance on all rows at once: scores, standard errors, intervals, p and q."""
    d, p = files
    if model == "multiclass":
        ens, X, y = multiclass
    else:
        ens = treeinner.load(p[model])
        X, y = _valid(p)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    methods = [*ADDITIVE, "unbiased_gain", "total_gain"]
    want = treeinner.significance(ens, X, y, methods=methods, sample_weight=w, random_state=0)
    capsys.readouterr()
    total = _compute.work_rows(methods, len(y))
    with progress_bar("test", "always", total) as bar:
        got = _compute.compute_significance(
            ens, X, y, methods, sample_weight=w, chunk_rows=37, progress=bar
        )
        assert bar.n == bar.total == (len(ADDITIVE) + 1) * 300
    _table_close(got, want)
    assert (got["se"] > 0).groupby(got["method"]).any()[[*ADDITIVE, "unbiased_gain"]].all()
    # the bar advanced per chunk of the row-additive methods
    _, counts = _counts(capsys.readouterr().err)
    steps = {300 * k + min(37 * j, 300) for k in range(len(ADDITIVE)) for j in range(1, 10)}
    assert steps <= set(counts)
    if model == "multiclass":
        assert list(pd.unique(got["output"])) == ["class_0", "class_1", "class_2", "total"]


def test_explain_multiclass_per_class_in_out_totals_printed(tmp_path, capsys):
    X, y = _data(2)
    cls = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    path = str(tmp_path / "mc.json")
    xgb.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "nthread": 1},
        xgb.DMatrix(X, cls),
        8,
    ).save_model(path)
    Xv, yv = _data(3)
    yv = np.digitize(yv, np.quantile(y, [1 / 3, 2 / 3]))
    data = str(tmp_path / "mc.csv")
    Xv.assign(t=yv).to_csv(data, index=False)
    out = str(tmp_path / "mc_out.csv")
    argv = ["explain", path, "--data", data, "--target", "t", "--out", out, "--top", "2"]
    assert cli.main([*argv, "--method", "tree_inner,abs_saabas", "--chunk-rows", "50"]) == 0
    printed = capsys.readouterr().out
    want = treeinner.significance(
        treeinner.load(path), Xv, yv, methods=["tree_inner", "abs_saabas"]
    )
    _table_close(pd.read_csv(out), want)
    blocks, note = _blocks(printed)
    assert list(blocks) == ["tree_inner", "abs_saabas"]
    assert "per class in --out" in " ".join(note.split())
    for m, (_, rows) in blocks.items():
        total = want[(want["method"] == m) & (want["output"] == "total")]
        top2 = total.sort_values("score", ascending=False)[:2]
        assert [r[0] for r in rows] == list(top2["feature"])
        np.testing.assert_allclose([float(r[2]) for r in rows], top2["se"], rtol=1e-5)


def test_explain_alpha(files, tmp_path, capsys):
    from statistics import NormalDist

    d, p = files
    code, t05, err = _explain_out(p, tmp_path, capsys, "--method", "tree_inner,abs_shap")
    assert code == 0, err
    code, t20, err = _explain_out(
        p, tmp_path, capsys, "--method", "tree_inner,abs_shap", "--alpha", "0.2"
    )
    assert code == 0, err
    z = NormalDist().inv_cdf(0.9)
    np.testing.assert_allclose(t20["ci_high"] - t20["score"], z * t20["se"], rtol=1e-9)
    np.testing.assert_allclose(t20["score"] - t20["ci_low"], z * t20["se"], rtol=1e-9)
    z05 = NormalDist().inv_cdf(0.975)
    np.testing.assert_allclose(t05["ci_high"] - t05["score"], z05 * t05["se"], rtol=1e-9)
    # the intervals change with alpha, the p- and q-values do not
    pd.testing.assert_frame_equal(
        t05[["score", "se", "p_value", "q_value"]], t20[["score", "se", "p_value", "q_value"]]
    )
    out = str(tmp_path / "alpha.json")
    argv = ["explain", p["x"], "--data", p["csv"], "--target", "y", "--alpha", "0.2"]
    assert cli.main([*argv, "--method", "abs_shap", "--out", out, "--quiet"]) == 0
    assert "80% interval" in capsys.readouterr().out
    doc = json.load(open(out))
    assert doc["alpha"] == 0.2 and doc["methods"] == ["abs_shap"]
    assert [r["feature"] for r in doc["significance"]] == FEATURES


def test_automatic_chunks(files, monkeypatch):
    d, p = files
    ens = treeinner.load(p["x"])
    X, y = _valid(p)
    # pretend rows are slow: small first chunk, chunks sized for 1 microsecond each
    monkeypatch.setattr(_compute, "_FIRST_CHUNK", 16)
    monkeypatch.setattr(_compute, "_MIN_CHUNK", 16)
    monkeypatch.setattr(_compute, "_TARGET_SECONDS", 1e-6)
    calls = []
    real = _compute._rows

    def spy(X, a, b):
        calls.append(b - a)
        return real(X, a, b)

    monkeypatch.setattr(_compute, "_rows", spy)
    got = _compute.compute_importance(ens, X, y, ["tree_inner", "abs_saabas"])
    want = treeinner.importance(ens, X, y, methods=["tree_inner", "abs_saabas"])
    for m in got.columns:
        _close(got[m], want[m])
    assert sum(calls) == 600 and calls[0] == 16 and len(calls) >= 4


def test_reference_chunked_node_values_once(files, monkeypatch):
    d, p = files
    ens = treeinner.load(p["x"])
    X, y = _valid(p)
    Xt, yt = _data(0)
    ref = (Xt, yt)
    made = []
    real = _methods.inner_values

    def spy(ens, attribution, reference):
        made.append(attribution)
        return real(ens, attribution, reference)

    monkeypatch.setattr(_methods, "inner_values", spy)
    methods = ["tree_inner", "forest_inner", "abs_predecomp", "unbiased_gain"]
    got = _compute.compute_importance(ens, X, y, methods, reference=ref, chunk_rows=50)
    # 6 chunks of each of tree_inner and forest_inner: one set of node values for both
    assert made == ["predecomp"]
    _close(got["tree_inner"], treeinner.tree_inner(ens, X, y, reference=ref))
    _close(got["forest_inner"], treeinner.forest_inner(ens, X, y, reference=ref))
    pre = treeinner.predecomp(ens, X, reference=ref).values
    _close(got["abs_predecomp"], np.abs(pre).mean(axis=0))
    want = treeinner.unbiased_gain(ens, X, y, random_state=0, reference=ref)
    _close(got["unbiased_gain"], want)


def _explain_out(p, tmp_path, capsys, *args):
    """Run ``explain`` in process on the weighted held-out rows: status, table, stderr."""
    out = str(tmp_path / f"o{len(list(tmp_path.iterdir()))}.csv")
    argv = ["explain", p["x"], "--data", p["csv_w"], "--target", "y", "--weight", "w"]
    code = cli.main([*argv, "--out", out, "--quiet", *args])
    err = capsys.readouterr().err
    return code, (pd.read_csv(out) if code == 0 else None), err


def _weighted(p):
    frame = pd.read_csv(p["csv_w"])
    return frame, frame.pop("y").to_numpy(), frame.pop("w").to_numpy()


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registry_method_through_explain(files, tmp_path, capsys, name):
    d, p = files
    code, table, err = _explain_out(p, tmp_path, capsys, "--method", name)
    if code != 0:  # a method needing what the model lacks: one clean line
        assert code == 1 and err.count("\n") == 1, err
        assert err.startswith("treeinner: error: ") and "Traceback" not in err
        return
    assert list(table["feature"]) == FEATURES and set(table["method"]) == {name}
    frame, y, w = _weighted(p)
    ens = treeinner.load(p["x"])
    want = treeinner.significance(ens, frame, y, methods=[name], sample_weight=w, random_state=0)
    _table_close(table, want)
    assert table["se"].notna().all() == REGISTRY[name].has_se


@pytest.mark.parametrize("reference", [False, True], ids=["plain", "reference"])
@pytest.mark.parametrize("name", ADDITIVE)
def test_explain_chunked_equals_one_call(files, tmp_path, capsys, name, reference):
    d, p = files
    extra = ["--method", name] + (["--reference", p["train"]] if reference else [])
    code, whole, err = _explain_out(p, tmp_path, capsys, *extra)  # 300 rows: one chunk
    assert code == 0, err
    code, chunked, err = _explain_out(p, tmp_path, capsys, *extra, "--chunk-rows", "7")
    assert code == 0, err
    _table_close(chunked, whole)  # scores and standard errors
    assert whole["se"].gt(0).all()


def test_library_names_as_options(files, tmp_path, capsys):
    """--sample-weight and --random-state (the library's names) are --weight and --seed."""
    d, p = files
    base = ["explain", p["x"], "--data", p["csv_w"], "--target", "y", "--quiet"]
    tables = []
    for names in (
        ["--weight", "w", "--seed", "3"],
        ["--sample-weight", "w", "--random-state", "3"],
    ):
        out = str(tmp_path / f"lib{len(tables)}.csv")
        argv = [*base, *names, "--method", "tree_inner,unbiased_gain", "--out", out]
        assert cli.main(argv) == 0, capsys.readouterr().err
        tables.append(pd.read_csv(out))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    frame, y, w = _weighted(p)
    want = treeinner.significance(
        treeinner.load(p["x"]), frame, y, methods=["tree_inner", "unbiased_gain"],
        sample_weight=w, random_state=3,
    )  # fmt: skip
    _table_close(tables[1], want)


def test_unexpected_error_one_line_or_traceback_with_debug(files, monkeypatch, capsys):
    d, p = files

    def broken(path):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(treeinner, "load", broken)
    argv = ["explain", p["x"], "--data", p["csv"], "--target", "y"]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("treeinner: error: unexpected RuntimeError: boom second line")
    assert "--debug" in err
    with pytest.raises(RuntimeError, match="boom"):
        cli.main([*argv, "--debug"])
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["--debug", *argv])


@pytest.mark.parametrize(
    "argv, words",
    [
        (["explain", "{x}", "--data", "{csv}", "--target", "y", "--out", "o.txt"], ".csv or .json"),
        (["select", "{l}", "--data", "{csv}", "--target", "y", "--method", "shap"], "'shap'"),
        (["explain", "{x}", "--data", "{csv}", "--target", "y", "--bootstrap", "1"], "at least 2"),
        (["select", "{x}", "--data", "{csv}", "--target", "y", "--top-k", "0"], "--top-k"),
        (["explain", "{x}", "--data", "{csv}", "--target", "y", "--attribution", "lime"], "saabas"),
        (["select", "{x}", "--data", "{csv}", "--target", "y", "--method", "a,b"], "'a"),
        (["explain", "{x}", "--data", "{csv}", "--target", "y", "--alpha", "0"], "--alpha"),
        (["explain", "{x}", "--data", "{csv}", "--target", "y", "--alpha", "1.5"], "--alpha"),
        (
            ["explain", "{x}", "--data", "{csv}", "--target", "y", "--no-se", "--bootstrap", "3"],
            "--no-se",
        ),
    ],
)
def test_more_bad_input_in_process(files, capsys, argv, words):
    d, p = files
    assert cli.main([a.format(**p) for a in argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("treeinner: error: ") and words in line


def test_catboost_logloss_needs_reference(files, tmp_path, capsys):
    d, p = files
    X, y = _data(0)
    Xv, yv = _data(1)
    model = catboost.CatBoostClassifier(
        iterations=10, depth=3, verbose=0, thread_count=1, allow_writing_files=False
    ).fit(X, y > 0)
    path = str(tmp_path / "cb.json")
    model.save_model(path, format="json")
    train, valid = str(tmp_path / "train.csv"), str(tmp_path / "valid.csv")
    X.assign(t=(y > 0).astype(int)).to_csv(train, index=False)
    Xv.assign(t=(yv > 0).astype(int)).to_csv(valid, index=False)
    argv = ["explain", path, "--data", valid, "--target", "t", "--method", "tree_inner"]
    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("treeinner: error: ") and "--reference FILE" in line
    out = str(tmp_path / "o.csv")
    assert cli.main([*argv, "--reference", train, "--out", out, "--chunk-rows", "50"]) == 0
    Xv, Xt = pd.read_csv(valid), pd.read_csv(train)
    yv, ref = Xv.pop("t").to_numpy(), (Xt, Xt.pop("t").to_numpy())
    want = treeinner.significance(treeinner.load(path), Xv, yv, methods="tree_inner", reference=ref)
    _table_close(pd.read_csv(out), want)
    _close(want["score"], treeinner.tree_inner(treeinner.load(path), Xv, yv, reference=ref))


def test_extra_columns_warned_and_ignored(files, tmp_path, capsys):
    d, p = files
    X, y = _valid(p)
    path = tmp_path / "extra.csv"
    X.assign(y=y, row_id=np.arange(len(y))).to_csv(path, index=False)
    argv = ["explain", p["x"], "--data", str(path), "--target", "y", "--method", "total_gain"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert err.startswith("treeinner: warning: ignoring 1 column(s)") and "row_id" in err


def test_demo_dispatch(monkeypatch):
    from treeinner import demo

    seen = []
    monkeypatch.setattr(demo, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["demo"]) == 0
    assert seen == [[]]


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_mode_flag_env_and_terminal(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_mode(None) == "auto"
    monkeypatch.setenv(ENV_VAR, "always")
    assert resolve_mode(None) == "always"
    assert resolve_mode("never") == "never"  # the flag wins over the environment
    monkeypatch.setenv(ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="TREEINNER_PROGRESS"):
        resolve_mode(None)
    monkeypatch.delenv(ENV_VAR)
    for stream, mode, shown in [
        (io.StringIO(), None, False),  # auto: stderr is no terminal
        (_Tty(), None, True),  # auto on a terminal: enabled (drawn after 2 s)
        (_Tty(), "never", False),
        (io.StringIO(), "always", True),
    ]:
        monkeypatch.setattr(sys, "stderr", stream)
        with progress_bar("x", mode, 4) as bar:
            assert bool(bar.disable) == (not shown)
            show_label(bar, "m")
            bar.update(2)
            bar.update(2)
        text = stream.getvalue()
        # quick work draws nothing in auto mode, even on a terminal
        assert bool(text) == (mode == "always"), (mode, text)
        if text:
            assert text.endswith("\n") and "100%" in text and "4/4 [" in text and ", m]" in text
    monkeypatch.setattr(sys, "stderr", _Tty())
    with progress_bar("x", None, 4) as bar:
        assert bar.delay == 2


def test_progress_env_and_quiet_in_process(files, monkeypatch, capsys):
    d, p = files
    argv = ["explain", p["x"], "--data", p["csv"], "--target", "y", "--method", "tree_inner"]
    monkeypatch.setenv(ENV_VAR, "always")
    assert cli.main([*argv, "--chunk-rows", "100"]) == 0
    states, counts = _counts(capsys.readouterr().err)
    assert sorted(set(counts)) == [0, 100, 200, 300]  # advanced per chunk
    assert "tree_inner" in states[-1]
    assert cli.main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(ENV_VAR, "never")
    assert cli.main([*argv, "--progress", "always"]) == 0  # the flag wins
    assert "300/300 [" in capsys.readouterr().err
    monkeypatch.setenv(ENV_VAR, "sometimes")
    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("treeinner: error: TREEINNER_PROGRESS='sometimes'")


def test_demo_runs_clean(capsys):
    """The README's demo: bit-identical margins, the total-gain identity, and no warning about
    unnamed columns (it passes DataFrames, as users are told to)."""
    import warnings

    from treeinner import demo

    with warnings.catch_warnings():
        warnings.simplefilter("error", treeinner.FeatureNamesWarning)
        assert demo.main(["--rows", "600", "--trees", "20"]) == 0
    out = capsys.readouterr().out
    assert "identical to XGBoost bit for bit: True" in out
    assert "TreeInner on the training data reproduces total gain" in out


def test_version_comes_from_the_package_metadata(capsys):
    """One version: the distribution's metadata (pyproject.toml), as ``treeinner.__version__``
    and ``treeinner --version``."""
    from importlib.metadata import version

    assert treeinner.__version__ == version("treeinner")
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"treeinner {version('treeinner')}"


# ---------------------------------------------------------------------- optional methods
def test_explain_interventional_with_background(files, tmp_path, capsys):
    """--attribution interventional with --background: the significance table of the
    interventional methods, scores and standard errors as importance(se=True) gives them
    (the background file's target and weight columns ignored)."""
    d, p = files
    code, table, err = _explain_out(
        p, tmp_path, capsys, "--attribution", "interventional", "--background", p["train"],
        "--method", "tree_inner,forest_inner_initial,abs_shap",
    )  # fmt: skip
    assert code == 0, err
    names = ["tree_inner_interventional", "forest_inner_initial_interventional", "abs_shap"]
    assert list(pd.unique(table["method"])) == names
    frame, y, w = _weighted(p)
    bg = pd.read_csv(p["train"]).drop(columns=["y", "w"])
    want = treeinner.importance(
        treeinner.load(p["x"]), frame, y, methods=names, sample_weight=w, background=bg, se=True
    )
    for m in names:
        got = table[table["method"] == m].set_index("feature")
        np.testing.assert_allclose(got["score"], want[m], rtol=1e-9)
        np.testing.assert_allclose(got["se"], want[f"{m}_se"], rtol=1e-9)
    # chunks of rows add up to the same table
    code, chunked, err = _explain_out(
        p, tmp_path, capsys, "--method", "tree_inner_interventional", "--background",
        p["train"], "--chunk-rows", "37",
    )  # fmt: skip
    assert code == 0, err
    _table_close(
        chunked, table[table["method"] == "tree_inner_interventional"].reset_index(drop=True)
    )
    # a JSON --out records the background file
    out = str(tmp_path / "iv.json")
    argv = ["explain", p["x"], "--data", p["csv"], "--target", "y", "--quiet", "--no-se"]
    argv += ["--method", "tree_inner_interventional", "--background", p["train"], "--out", out]
    assert cli.main(argv) == 0
    doc = json.load(open(out))
    assert doc["background"] == p["train"] and doc["methods"] == ["tree_inner_interventional"]


def test_explain_pairwise(files, tmp_path, capsys):
    """--method tree_inner_interactions: the feature x feature matrix, printed and written
    (CSV with the features on both axes, JSON with the settings)."""
    d, p = files
    frame, y, w = _weighted(p)
    want = treeinner.tree_inner_interactions(treeinner.load(p["x"]), frame, y, sample_weight=w)
    base = ["explain", p["x"], "--data", p["csv_w"], "--target", "y", "--weight", "w", "--quiet"]
    out = str(tmp_path / "pair.csv")
    assert cli.main([*base, "--method", "tree_inner_interactions", "--out", out]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("tree_inner_interactions: ") and "main effect" in printed
    got = pd.read_csv(out, index_col="feature")
    pd.testing.assert_frame_equal(got, want, check_names=False, rtol=1e-12)
    out = str(tmp_path / "pair.json")
    argv = [*base, "--method", "tree_inner_interactions", "--out", out, "--top", "2"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    top2 = want.sum(axis=1).sort_values(ascending=False).index[:2]
    header = printed.splitlines()[1].split()
    assert header == list(top2)
    doc = json.load(open(out))
    assert doc["features"] == FEATURES and doc["methods"] == ["tree_inner_interactions"]
    np.testing.assert_allclose(np.array(doc["matrix"]), want.to_numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--method", "tree_inner_interventional"], "--background FILE"),
        (["--attribution", "interventional"], "--background FILE"),
        (["--method", "tree_inner", "--background", "{train}"], "none of the methods uses it"),
        (["--method", "tree_inner_interactions,tree_inner"], "pass it alone"),
        (["--method", "tree_inner_interactions", "--bootstrap", "3"], "leave out --bootstrap"),
        (["--method", "tree_inner_interactions", "--plot", "{d}/x.png"], "leave out --plot"),
    ],
)
def test_explain_optional_method_errors(files, capsys, extra, message):
    d, p = files
    extra = [e.format(train=p["train"], d=d) for e in extra]
    argv = ["explain", p["x"], "--data", p["csv"], "--target", "y", "--quiet", *extra]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_select_refuses_optional_methods(files, capsys):
    d, p = files
    for name in _methods.OPTIONAL:
        argv = ["select", p["x"], "--data", p["csv"], "--target", "y", "--method", name]
        assert cli.main([*argv, "--quiet"]) == 1
        err = capsys.readouterr().err
        assert "treeinner.importance" in err and "Traceback" not in err
