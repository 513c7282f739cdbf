"""treeinner._input: every input reaches the kernels as float64 rows; float32 input in
bounded blocks, with the same results as the float64 array it equals."""

from __future__ import annotations

import numpy as np
import pytest

import treeinner
from treeinner import _input


def test_float32_blocks_are_bounded_and_exact(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 7)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    monkeypatch.setattr(_input, "BLOCK_ELEMENTS", 7 * 64)
    n, blocks = _input.as_rows(X, 7, [f"f{j}" for j in range(7)], False)
    blocks = list(blocks)
    assert n == 1000 and len(blocks) == 16
    assert all(b.dtype == np.float64 and b.flags.c_contiguous for _, b in blocks)
    assert all(b.shape[0] <= 64 for _, b in blocks)
    assert [s for s, _ in blocks] == list(range(0, 1000, 64))
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), X.astype(np.float64))
    n0, empty = _input.as_rows(X[:0], 7, [f"f{j}" for j in range(7)], False)
    assert n0 == 0 and [b.shape for _, b in empty] == [(0, 7)]


def test_float32_input_in_many_blocks_gives_the_float64_results(monkeypatch):
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 5)).astype(np.float32)
    y = X[:, 0] - X[:, 1] + rng.normal(size=700)
    booster = xgb.train({"max_depth": 4, "nthread": 1}, xgb.DMatrix(X, y), 20)
    ens = treeinner.from_model(booster)
    X64 = X.astype(np.float64)
    ref = (
        ens.predict_margin(X64),
        ens.leaf_index(X64),
        treeinner.predecomp(ens, X64).values,
        treeinner.tree_inner(ens, X64, y).to_numpy(),
        treeinner.tree_shap(ens, X64).values,
    )
    monkeypatch.setattr(_input, "BLOCK_ELEMENTS", 5 * 100)  # 7 blocks
    got = (
        ens.predict_margin(X),
        ens.leaf_index(X),
        treeinner.predecomp(ens, X).values,
        treeinner.tree_inner(ens, X, y).to_numpy(),
        treeinner.tree_shap(ens, X).values,
    )
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[0], booster.inplace_predict(X, predict_type="margin"))


def test_dataframe_columns_copied_in_blocks_of_rows(monkeypatch):
    """A DataFrame's columns are copied into the float64 rows a block of rows at a time:
    every kind of column (float32, int64, bool, nullable with NA, category codes, an unused
    text column as NaN) lands in its place for any block size, the last block partial."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 1003
    X = pd.DataFrame(
        {
            "f32": rng.normal(size=n).astype(np.float32),
            "i64": rng.integers(-(2**40), 2**40, size=n),
            "flag": rng.random(n) < 0.5,
            "nullable": pd.array(
                np.where(rng.random(n) < 0.2, None, rng.integers(0, 9, n)), dtype="Int64"
            ),  # fmt: skip
            "city": pd.Categorical(rng.choice(["a", "b", "c"], size=n)),
            "note": rng.choice(["x", "y"], size=n),
        }
    )
    names = list(X.columns)
    used = np.array([True, True, True, True, True, False])
    categories = {4: ["c", "a", "b"]}
    expected = np.column_stack(
        [
            X["f32"].to_numpy(np.float64),
            X["i64"].to_numpy(np.float64),
            X["flag"].to_numpy(np.float64),
            X["nullable"].to_numpy(np.float64, na_value=np.nan),
            X["city"].map({"c": 0.0, "a": 1.0, "b": 2.0}).to_numpy(np.float64),
            np.full(n, np.nan),
        ]
    )
    for elements in (6, 6 * 64, 1 << 18):  # one row a block, 64 rows, all rows at once
        monkeypatch.setattr(_input, "CACHE_ELEMENTS", elements)
        got = _input.frame_to_array(X, names, True, categories, used=used)
        assert got.dtype == np.float64 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
