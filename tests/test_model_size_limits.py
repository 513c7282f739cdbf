"""Every algorithm's cost bounded in model size: TreeSHAP's quadrature set-up (rules for the
distinct point counts only, ragged per-tree tables), deep trees (chains thousands of splits
deep) handled or refused up front, and the oblivious-tree detector requiring one decision per
level (feature, threshold, missing direction), not only one feature."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import treeinner
from treeinner import TreeEnsemble, UnsupportedModelError
from treeinner import treeshap as TS
from treeinner.kernels import oblivious
from treeinner.kernels import treeshap as K
from treeinner.kernels.routing import TREE_OBLIVIOUS


def _chain(depth: int, p: int, n_trees: int = 1, offset: int = 0) -> TreeEnsemble:
    """Chain trees: inner node k (index 2k) splits on feature (k + offset) % p at depth - k
    (rows with x <= depth - k go on down, left), its right child 2k + 1 is a leaf."""
    n = 2 * depth + 1
    k = np.arange(depth)
    left = np.full(n, -1)
    right = np.full(n, -1)
    left[2 * k], right[2 * k] = 2 * k + 2, 2 * k + 1
    feat = np.zeros(n, dtype=np.int64)
    feat[2 * k] = (k + offset) % p
    thr = np.zeros(n)
    thr[2 * k] = depth - k + 0.5
    val = np.zeros(n)
    val[2 * k + 1] = np.sin(k + offset)
    val[n - 1] = 0.5
    cover = np.ones(n)
    cover[2 * k] = depth - k + 1.0
    gain = np.zeros(n)
    gain[2 * k] = 1.0 + k % 3
    leaf_id = np.full(n, -1)
    leaf_id[left < 0] = np.arange(depth + 1)
    return _trees([(left, right, feat, thr, val, cover, gain, leaf_id)] * n_trees, p)


def _trees(trees: list, p: int) -> TreeEnsemble:
    """An ensemble of one output from per-tree (left, right, feature, threshold, value,
    cover, gain, leaf_id) arrays with tree-local child indices."""
    sizes = [len(t[0]) for t in trees]
    offs = np.concatenate([[0], np.cumsum(sizes)])
    cols = [np.concatenate(c) for c in zip(*trees, strict=True)]
    shift = np.repeat(offs[:-1], sizes)
    left, right = (np.where(a >= 0, a + shift, -1) for a in cols[:2])
    n, m = int(offs[-1]), len(trees)
    return TreeEnsemble(
        tree_offsets=offs, left=left, right=right, feature=cols[2], threshold=cols[3],
        split_type=np.zeros(n), default_left=np.ones(n), missing_type=np.zeros(n),
        value=cols[4], cover=cols[5], count=cols[5], gain=cols[6], leaf_id=cols[7],
        cat_offsets=np.zeros(n + 1), cat_words=np.zeros(0), tree_group=np.zeros(m),
        tree_iteration=np.arange(m), learning_rate=np.full(m, 0.1), tree_weight=np.ones(m),
        base_margin=[0.25], feature_names=tuple(f"x{j}" for j in range(p)), named=False,
        float32_sum=False,
    )  # fmt: skip


def _rows(depth: int, p: int, n: int = 6) -> np.ndarray:
    """Rows leaving the chain at every depth, the first one all the way down."""
    X = np.random.default_rng(depth + p).uniform(0.0, depth, size=(n, p)).round()
    X[0] = -1.0
    X[1] = depth / 2.0
    return X


def _chain_margin(ens: TreeEnsemble, X: np.ndarray) -> np.ndarray:
    """The margin of chain trees, walked here in numpy (the rule: float32 x < float32 thr)."""
    out = np.full(X.shape[0], float(ens.base_margin[0]))
    for t in range(ens.n_trees):
        o = int(ens.tree_offsets[t])
        for r in range(X.shape[0]):
            n = o
            while ens.left[n] >= 0:
                go = np.float32(X[r, ens.feature[n]]) < np.float32(ens.threshold[n])
                n = int(ens.left[n] if go else ens.right[n])
            out[r] += ens.value[n]
    return out


def _methods(ens: TreeEnsemble, X: np.ndarray, y: np.ndarray) -> dict:
    return {
        "predict_margin": lambda: ens.predict_margin(X),
        "leaf_index": lambda: ens.leaf_index(X),
        "predecomp": lambda: treeinner.predecomp(ens, X),
        "saabas": lambda: treeinner.saabas(ens, X),
        "tree_shap": lambda: treeinner.tree_shap(ens, X),
        "tree_inner": lambda: treeinner.tree_inner(ens, X, y),
        "tree_inner_shap": lambda: treeinner.tree_inner(ens, X, y, attribution="shap"),
        "forest_inner": lambda: treeinner.forest_inner(ens, X, y),
        "forest_inner_shap": lambda: treeinner.forest_inner(ens, X, y, attribution="shap"),
        "total_gain": lambda: treeinner.total_gain(ens),
        "unbiased_gain": lambda: treeinner.unbiased_gain(ens, X, y),
        "importance_se": lambda: treeinner.importance(
            ens, X, y, methods=("tree_inner", "forest_inner", "unbiased_gain"), se=True
        ),
    }


# ---------------------------------------------------------------------- TreeSHAP set-up
def test_depth_1000_setup_computes_one_rule_and_is_exact(monkeypatch):
    """A chain of depth 1000 with a new feature at every split (500 quadrature points, the
    worst case for its depth): the set-up computes the one rule it needs (computing every
    rule up to 500 points took 21-44 s; timings in benchmarks/bench_model_size_limits.py),
    and the values add up to the margin."""
    ens = _chain(1000, 1000)
    asked = []
    rule = TS._rule

    def counted(q):
        asked.append(q)
        return rule(q)

    monkeypatch.setattr(TS, "_rule", counted)
    su = TS._setup(ens, "auto", 0, 1)
    assert su.tree_nq[0] == 500 and asked == [500]
    X = _rows(1000, 1000, n=4)
    a = treeinner.tree_shap(ens, X)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, _chain_margin(ens, X), atol=1e-9)


def _shap_with_rule(ens: TreeEnsemble, X: np.ndarray, q: int) -> np.ndarray:
    """Tree 0's TreeSHAP values with numpy's q-point ``leggauss`` rule."""
    su = TS._setup(ens, "auto", 0, 1)
    x, w = np.polynomial.legendre.leggauss(q)
    nq = np.array([q])
    tabs = K.edge_tables(su.lay[3], ens.tree_offsets, nq, (x + 1) / 2, w / 2, np.zeros(1, int))
    out = np.zeros((X.shape[0], ens.n_features, 1))
    K.tree_shap(X, ens._nodes(), ens._layout, su.lay, tabs, su.simple, nq, 0, 1, su.max_nodes,
                False, su.otab, out)  # fmt: skip
    return out[:, :, 0]


def test_deep_rule_is_exact():
    """A chain of depth 300 over 300 features takes a 150-point rule (Newton's method, past
    numpy's leggauss; Algorithm 2 overflows at this depth): its values equal those of numpy's
    150- and 190-point rules (both exact here) and add up to the margin."""
    ens = _chain(300, 300)
    assert TS._setup(ens, "auto", 0, 1).tree_nq[0] == 150 > TS._LEGGAUSS_MAX
    X = _rows(300, 300, n=5)
    a = treeinner.tree_shap(ens, X)
    scale = np.abs(a.values).max()
    for q in (150, 190):
        np.testing.assert_allclose(a.values, _shap_with_rule(ens, X, q), atol=1e-12 * scale)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, _chain_margin(ens, X), atol=1e-9)
    with pytest.raises(AssertionError):  # too few points: not exact, so the check can fail
        np.testing.assert_allclose(a.values, _shap_with_rule(ens, X, 10), atol=1e-9 * scale)


@pytest.mark.parametrize("q", [1, 2, 7, 100, 101, 160, 700])
def test_rules_integrate_polynomials_exactly(q):
    """Every rule integrates t^k over [0, 1] exactly for k < 2q (both ways of computing it)."""
    t, w = TS._rule(q)
    assert t.shape == w.shape == (q,) and np.all(np.diff(t) > 0) and np.all(w > 0)
    for k in (0, 1, q - 1, 2 * q - 1):
        np.testing.assert_allclose(w @ t**k, 1.0 / (k + 1), rtol=1e-10)


def test_tables_are_ragged_per_tree():
    """One deep tree does not inflate the tables of the others: the tables hold exactly
    sum_t nodes_t x points_t entries, points_t = ceil(most distinct features on a path / 2),
    and rules are stored once per distinct count."""
    deep = _chain(400, 400)
    trees = [_chain(d, p, offset=d) for d, p in [(3, 9), (6, 9), (400, 400), (50, 2), (6, 9)]]
    parts = [(e.left, e.right, e.feature, e.threshold, e.value, e.cover, e.gain, e.leaf_id)
             for e in trees]  # fmt: skip
    ens = _trees(parts, 400)
    su = TS._setup(ens, "auto", 0, ens.n_trees)
    sizes = np.diff(ens.tree_offsets)
    np.testing.assert_array_equal(su.tree_nq, [2, 3, 200, 1, 3])
    FH, FC, CH, rule_t, rule_w, CC, toff, roff, tnq = su.tabs
    assert FH.size == FC.size == CH.size == int(sizes @ su.tree_nq) == toff[-1]
    assert rule_t.size == rule_w.size == CC.size == 2 + 3 + 200 + 1  # distinct counts only
    np.testing.assert_array_equal(rule_t[roff[2] : roff[2] + 200], TS._rule(200)[0])
    assert deep.n_nodes * 200 == int(np.diff(toff)[2])
    X = _rows(400, 400, n=5)
    a = treeinner.tree_shap(ens, X)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, _chain_margin(ens, X), atol=1e-9)


def test_chain_of_20000_few_features_is_handled():
    """A valid chain of depth 20,000 over 5 features: 3 quadrature points (tables of
    3 x 40,001 entries), values adding up to the margin."""
    ens = _chain(20_000, 5)
    X = _rows(20_000, 5)
    su = TS._setup(ens, "auto", 0, 1)
    assert su.tree_nq[0] == 3 and su.tabs[0].size == 3 * ens.n_nodes
    a = treeinner.tree_shap(ens, X)
    np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, _chain_margin(ens, X), atol=1e-9)


def test_chain_of_20000_distinct_features_is_refused_at_once():
    """Depth 20,000 with a new feature on every split would need 10,000 points and 400
    million table entries (3.2 GB): refused before anything is allocated (the refusal's
    peak allocation is under 64 MB), naming tree, depth, limit."""
    ens = _chain(20_000, 20_000, n_trees=2)
    X = _rows(20_000, 20_000, n=2)
    tracemalloc.start()
    try:
        with pytest.raises(UnsupportedModelError) as err:
            treeinner.tree_shap(ens, X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MB allocated before refusing"
    msg = str(err.value)
    assert "tree 0" in msg and "depth 20000" in msg and f"{TS.MAX_TABLE_ENTRIES:,}" in msg
    with pytest.raises(UnsupportedModelError, match="depth 20000"):
        treeinner.tree_inner(ens, X, np.zeros(2), attribution="shap")
    # the methods without quadrature tables still work on it
    np.testing.assert_allclose(ens.predict_margin(X), _chain_margin(ens, X))


# ---------------------------------------------------------------------- every method, depth 5000
def test_every_method_on_a_depth_5000_chain():
    """Every public method on a chain of depth 5,000 (7 features, two trees) gives a correct
    result (timings in benchmarks/bench_model_size_limits.py)."""
    ens = _chain(5000, 7, n_trees=2)
    X, y = _rows(5000, 7), np.linspace(-1.0, 1.0, 6)
    margin = _chain_margin(ens, X)
    out = {}
    for name, f in _methods(ens, X, y).items():
        out[name] = f()
    np.testing.assert_allclose(out["predict_margin"], margin, atol=1e-12)
    assert (
        out["leaf_index"][0, 0] == 5000 and out["leaf_index"][1, 0] == 2501
    )  # leaves at 2500 < 2499.5
    for name in ("predecomp", "saabas", "tree_shap"):
        a = out[name]
        np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, margin, atol=1e-9)
    gain = np.bincount(ens.feature[ens.left >= 0], ens.gain[ens.left >= 0], minlength=7)
    np.testing.assert_allclose(np.asarray(out["total_gain"]), gain)
    for name in ("tree_inner", "tree_inner_shap", "forest_inner", "forest_inner_shap",
                 "unbiased_gain"):  # fmt: skip
        assert np.all(np.isfinite(np.asarray(out[name]))), name
    assert np.all(np.isfinite(out["importance_se"].to_numpy(dtype=float)))


# ---------------------------------------------------------------------- oblivious detection
def _complete(depth: int, feature, threshold, default_left=None) -> TreeEnsemble:
    """One complete tree; node i of level j (heap order) splits on ``feature[j]`` at
    ``threshold[j][i - first]`` (a scalar: the same for the whole level)."""
    n = 2 ** (depth + 1) - 1
    inner = np.arange(n // 2)
    level = np.floor(np.log2(inner + 1)).astype(int)
    left, right = np.full(n, -1), np.full(n, -1)
    left[inner], right[inner] = 2 * inner + 1, 2 * inner + 2
    feat = np.zeros(n, dtype=np.int64)
    feat[inner] = np.asarray(feature)[level]
    thr = np.zeros(n)
    for i in inner:
        t = np.broadcast_to(threshold[level[i]], (2 ** level[i],))
        thr[i] = t[i - (2 ** level[i] - 1)]
    rng = np.random.default_rng(depth)
    val = np.where(left < 0, rng.normal(size=n), 0.0)
    cover = np.ones(n)
    for i in inner[::-1]:
        cover[i] = cover[2 * i + 1] + cover[2 * i + 2] + (i % 3 == 0)
    leaf_id = np.where(left < 0, np.arange(n), -1)
    ens = _trees([(left, right, feat, thr, val, cover, np.ones(n), leaf_id)], 3)
    if default_left is not None:
        ens = ens.replace(default_left=np.asarray(default_left, dtype=np.int64))
    return ens


def _flag(ens: TreeEnsemble) -> bool:
    return bool(ens.replace()._layout.tree_flags[0] & TREE_OBLIVIOUS)


def test_oblivious_needs_one_threshold_per_level():
    """A complete tree whose levels share a feature but not a threshold is not flagged
    oblivious, and its TreeSHAP values add up and equal the general path's; the same tree
    with one threshold per level is flagged, and one whose level disagrees on where missing
    values go is not."""
    feats = [0, 1, 2]
    same = _complete(3, feats, [0.0, 0.5, -0.5])
    assert _flag(same)
    mixed = _complete(3, feats, [0.0, [0.5, -0.25], [-0.5, -0.5, 0.3, -0.5]])
    assert not _flag(mixed)
    dl = np.ones(same.n_nodes, dtype=np.int64)
    dl[4] = 0  # level 2, one node sends NaN right
    assert not _flag(_complete(3, feats, [0.0, 0.5, -0.5], default_left=dl))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3)).round(1)
    X[:, 1][::7] = 0.5
    X[::11, 2] = np.nan
    for ens in (same, mixed):
        a = treeinner.tree_shap(ens, X)
        with oblivious.general_path():
            ref = treeinner.tree_shap(ens.replace(), X)
        np.testing.assert_allclose(a.values.sum(axis=1) + a.bias, ens.predict_margin(X),
                                   atol=1e-12)  # fmt: skip
        np.testing.assert_allclose(a.values, ref.values, rtol=1e-12, atol=1e-14)
