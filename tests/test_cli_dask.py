"""``treeinner explain`` and ``select`` on data read with Dask (``--data`` a glob pattern or a
directory, ``--scheduler``): the same tables as the in-memory command on one file of the same
rows, a progress bar counting the partition tasks, and clear errors for what Dask input does
not take. The clusters are ``distributed.LocalCluster``s the tests start and close (one in a
fixture, one by ``--scheduler local``)."""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pandas as pd
import pytest

from treeinner import cli

dask = pytest.importorskip("dask")
pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
xgb = pytest.importorskip("xgboost")
pytest.importorskip("pyarrow")

FEATURES = ["a", "b", "c", "d"]
METHODS = ["tree_inner", "forest_inner", "abs_shap", "permutation", "unbiased_gain"]
SIZES = [700, 0, 130, 1170]  # uneven files, one of them without rows


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_dask")
    rng = np.random.default_rng(0)
    n = 1000 + sum(SIZES)
    X = pd.DataFrame(rng.normal(size=(n, len(FEATURES))), columns=FEATURES)
    X.loc[rng.random(n) < 0.05, "c"] = np.nan
    y = 2 * X["a"] + np.sin(2 * X["b"]) + rng.normal(size=n)
    paths = {"model": d / "m.json", "binary": d / "b.json"}
    train = {"max_depth": 3, "nthread": 1, "eta": 0.3}
    xgb.train(train, xgb.DMatrix(X[:1000], y[:1000]), 20).save_model(paths["model"])
    labels = (y[:1000] > 0).astype(int)
    binary = {**train, "objective": "binary:logistic"}
    xgb.train(binary, xgb.DMatrix(X[:1000], labels), 5).save_model(paths["binary"])
    held = X[1000:].assign(y=y[1000:], w=rng.uniform(0.5, 2.0, n - 1000))
    held["p"] = 1.0 / (1.0 + np.exp(-held["y"]))  # soft labels of the binary model
    held.to_parquet(d / "all.parquet")
    for kind in ("parquet", "csv"):
        (d / kind).mkdir()
    ends = np.cumsum(SIZES)
    for i, (a, b) in enumerate(zip(ends - SIZES, ends, strict=True)):
        held.iloc[a:b].to_parquet(d / "parquet" / f"part-{i}.parquet")
        held.iloc[a:b].to_csv(d / "csv" / f"part-{i}.csv", index=False)
    (d / "csv" / "notes.txt").write_text("not data")  # a directory's other files are left out
    (d / "mixed").mkdir()
    held.iloc[:10].to_parquet(d / "mixed" / "a.parquet")
    held.iloc[10:20].to_csv(d / "mixed" / "b.csv", index=False)
    (d / "broken").mkdir()
    held.iloc[:10].to_parquet(d / "broken" / "a.parquet")
    (d / "broken" / "b.parquet").write_bytes(b"PAR1 not really parquet")
    (d / "empty").mkdir()  # files with the columns and no rows
    held.iloc[:0].to_csv(d / "empty" / "a.csv", index=False)
    held.iloc[:0].to_csv(d / "empty" / "b.csv", index=False)
    paths.update({k: d / k for k in ("parquet", "csv", "mixed", "broken", "empty")})
    paths["all"] = d / "all.parquet"
    return paths


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    ) as c:
        yield c


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _table(capsys, tmp_path, model, data, *extra, name="out.json"):
    out = tmp_path / name
    code, _, err = _run(capsys, "explain", model, "--data", data, "--target", "y", *extra,
                        "--out", out)  # fmt: skip
    assert code == 0, err
    return json.loads(out.read_text())


def _close(got: dict, ref: dict, rel: float = 1e-10) -> None:
    a = pd.DataFrame(got["significance"]).set_index(["method", "feature"])
    b = pd.DataFrame(ref["significance"]).set_index(["method", "feature"])
    assert list(a.index) == list(b.index)
    a, b = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    scale = np.nanmax(np.abs(b))
    assert np.nanmax(np.abs(a - b)) <= rel * scale


@pytest.mark.parametrize("kind", ["glob", "directory", "csv"])
def test_many_files_equal_one_file_in_memory(files, tmp_path, capsys, kind):
    data = {
        "glob": f"{files['parquet']}/part-*.parquet",
        "directory": files["parquet"],
        "csv": files["csv"],
    }[kind]
    # weighted rows with the glob (the unbiased gain's exact mode takes uniform weights only)
    weighted = ("--weight", "w") if kind == "glob" else ()
    methods = [m for m in METHODS if not (weighted and m == "unbiased_gain")]
    common = ("--method", *methods, *weighted, "--seed", "3")
    ref = _table(capsys, tmp_path, files["model"], files["all"], *common, name="ref.json")
    got = _table(capsys, tmp_path, files["model"], data, *common)
    _close(got, ref)
    # the rows counted from the Parquet metadata (CSV files record none)
    assert got["n_rows"] == (None if kind == "csv" else sum(SIZES)) and got["data"] == str(data)


def test_scheduler_address_and_local_cluster(files, tmp_path, capsys, cluster):
    common = ("--method", "tree_inner", "permutation", "unbiased_gain", "--no-se")
    ref = _table(capsys, tmp_path, files["model"], files["all"], *common, name="ref.json")
    for how in (("--scheduler", cluster.scheduler_address), ("--scheduler", "local",
                                                              "--workers", "2")):  # fmt: skip
        # one file with --scheduler: read with Dask too, its partitions computed there
        for data in (files["all"], f"{files['parquet']}/*.parquet"):
            got = _table(capsys, tmp_path, files["model"], data, *common, *how)
            a = pd.DataFrame(got["importance"]).set_index("feature")
            b = pd.DataFrame(ref["importance"]).set_index("feature")
            np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-10, atol=1e-13)


def test_progress_bar_counts_partition_tasks(files, capsys):
    code, _, err = _run(capsys, "explain", files["model"], "--data", files["parquet"], "--target",
                        "y", "--method", "tree_inner", "--progress", "always")  # fmt: skip
    assert code == 0, err
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+)/(\d+) \[", err)]
    # one task per partition (one per file; the empty file's too), each advancing the bar
    assert counts[-1] == (len(SIZES), len(SIZES))
    done = [c for c, _ in counts]
    assert done == sorted(done) and set(range(1, len(SIZES) + 1)) <= set(done)
    assert "tasks/s, tree_inner]" in err


def test_select_and_soft_labels_on_many_files(files, capsys):
    glob = f"{files['parquet']}/*.parquet"
    args = ("--target", "y", "--method", "tree_inner")
    code, many, err = _run(capsys, "select", files["model"], "--data", glob, *args)
    assert code == 0, err
    code, one, err = _run(capsys, "select", files["model"], "--data", files["all"], *args)
    assert code == 0 and many == one and {"a", "b"} <= set(many.split())
    # probabilities as the labels of a binary classifier: refused, accepted as soft labels
    soft = ("--target", "p", "--method", "tree_inner", "--no-se", "--quiet")
    code, _, err = _run(capsys, "explain", files["binary"], "--data", glob, *soft)
    assert code == 1 and "labels must be 0 or 1" in err
    code, many, err = _run(capsys, "explain", files["binary"], "--data", glob, *soft,
                           "--soft-labels")  # fmt: skip
    assert code == 0, err
    code, one, _ = _run(capsys, "explain", files["binary"], "--data", files["all"], *soft,
                        "--soft-labels")  # fmt: skip
    assert many == one


@pytest.mark.parametrize(
    ("data", "extra", "message"),
    [
        ("nothing/*.parquet", (), "no data files match"),
        ("mixed", (), "files of different types"),
        ("broken", (), "cannot read data files"),
        ("empty", (), "have no rows"),
        ("parquet", ("--bootstrap", "5"), "--bootstrap resamples the rows in memory"),
        ("parquet", ("--chunk-rows", "10"), "Dask input goes by partition"),
        ("parquet", ("--workers", "2"), "--workers sets the size of --scheduler local"),
        ("parquet", ("--scheduler", "nope://x"), "cannot reach the Dask scheduler"),
        ("parquet", ("--weight", "y2"), "weight column 'y2' not found"),
        ("all", ("--scheduler", "local", "--workers", "0"), "--workers"),
    ],
)
def test_refused_with_a_clear_message(files, capsys, tmp_path, data, extra, message):
    path = files[data] if data in files else tmp_path / data
    code, _, err = _run(capsys, "explain", files["model"], "--data", path, "--target", "y",
                        "--quiet", *extra)  # fmt: skip
    assert code == 1 and err.startswith("treeinner: error:") and message in err, err
    # a refused scheduler leaves Dask as it was (a failed default Client stays the default
    # one: every later compute in the process would wait on it)
    assert dask.config.get("scheduler", None) is None
    assert da.ones(3).sum().compute() == 3


def test_labels_invalid_for_the_objective_on_a_worker(files, capsys, cluster):
    """Checked where each partition is read: the worker's error reaches the user as one line."""
    code, _, err = _run(capsys, "explain", files["binary"], "--data", files["parquet"],
                        "--target", "y", "--scheduler", cluster.scheduler_address,
                        "--quiet")  # fmt: skip
    assert code == 1 and "Invalid labels for the binary:logistic objective" in err, err
