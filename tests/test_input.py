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
