"""Routing kernels against a slow, obviously-correct reference router written from the rules.

The reference never calls the package's kernels. It follows the documented rules:

* numeric split: left iff ``x <= threshold`` ("float64 <="), ``float32(x) < float32(threshold)``
  ("float32 <") or ``float32(x) <= float32(threshold)`` ("float32 <="), in np.float32;
* missing_type 0 (NaN): NaN takes default_left; 1 (Zero): NaN and ``|x| <= 1e-35f`` take
  default_left; 2 (None): NaN is read as 0.0 and compared normally (categorical nodes too);
* split_type 1: set members go right, 2: set members go left; the category is ``int(x)`` (x first
  rounded to float32 under the float32 rules), valid only for ``0 <= x < 2**31 - 1`` (split_type
  2: ``-1 < x``, as LightGBM truncates toward zero first); ``c`` is a
  member iff bit ``c % 32`` of the node's word ``c // 32`` is set (missing words are 0);
* margin: ``base_margin[g]`` plus the leaf values of group g's trees in tree order, each step
  rounded to float32 when ``float32_sum``; leaf_index returns ``leaf_id`` of the leaf.

A scalar reference (one value at a time, plain Python) states the rules; a row-vectorised copy
of it makes the large inputs affordable and is itself checked against the scalar one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from treeinner import TreeEnsemble
from treeinner.kernels import _threads, routing

F32 = np.float32
RULES = ("float64 <=", "float32 <", "float32 <=")
ZERO_EPS = float(np.float32(1e-35))  # LightGBM kZeroThreshold, a float
MAX_CAT = 2**31 - 1
F32_MAX = float(np.finfo(np.float32).max)
F32_OVERFLOW = F32_MAX + 2.0**103  # from here on float64 rounds to +inf in float32
SERIAL_WORK = _threads.SERIAL_WORK


def f32(x):
    """float32 rounding without the overflow warning (1e39 -> inf is what we want)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(F32)


# ---------------------------------------------------------------------- the reference
def ref_goes_left(ens, n, x):
    """Whether value ``x`` goes left at inner node ``n``: the documented rules, one value."""
    x = float(x)
    mt = int(ens.missing_type[n])
    default_left = bool(ens.default_left[n])
    if math.isnan(x):
        if mt == 2:
            x = 0.0
        else:
            return default_left
    elif mt == 1 and abs(x) <= ZERO_EPS:
        return default_left
    st = int(ens.split_type[n])
    rule = ens.decision_rule
    if st == 0:
        t = float(ens.threshold[n])
        if rule == "float64 <=":
            return x <= t
        if rule == "float32 <":
            return bool(f32(x) < f32(t))
        return bool(f32(x) <= f32(t))
    if rule.startswith("float32"):
        x = float(f32(x))
    in_set = False
    if (x > -1 if st == 2 else x >= 0) and x < MAX_CAT:  # LightGBM truncates toward 0
        c = int(x)
        words = ens.cat_words[ens.cat_offsets[n] : ens.cat_offsets[n + 1]]
        word = int(words[c // 32]) if c // 32 < len(words) else 0
        in_set = (word >> (c % 32)) & 1 == 1
    return in_set if st == 2 else not in_set


def ref_path(ens, t, row):
    """Global nodes visited by ``row`` in tree ``t``, root to leaf."""
    n = int(ens.tree_offsets[t])
    path = [n]
    while ens.left[n] >= 0:
        x = row[ens.feature[n]]
        n = int(ens.left[n] if ref_goes_left(ens, n, x) else ens.right[n])
        path.append(n)
    return path


def ref_leaves_scalar(ens, X, trees):
    return np.array(
        [[ref_path(ens, t, row)[-1] for t in trees] for row in X], dtype=np.int64
    ).reshape(len(X), len(trees))


def ref_goes_left_vec(ens, n, x):
    """:func:`ref_goes_left` for arrays of (inner node, value) pairs, the same rules in numpy."""
    mt = ens.missing_type[n]
    st = ens.split_type[n]
    default_left = ens.default_left[n] != 0
    nan = np.isnan(x)
    to_default = (nan & (mt != 2)) | ((mt == 1) & (np.abs(x) <= ZERO_EPS))
    x = np.where(nan, 0.0, x)  # NaN reaching a comparison is a missing_type 2 NaN
    t = ens.threshold[n]
    rule = ens.decision_rule
    if rule == "float64 <=":
        num_left = x <= t
    elif rule == "float32 <":
        num_left = f32(x) < f32(t)
    else:
        num_left = f32(x) <= f32(t)
    xc = f32(x).astype(np.float64) if rule.startswith("float32") else x
    valid = np.where(st == 2, xc > -1, xc >= 0) & (xc < MAX_CAT)
    c = np.where(valid, xc, 0.0).astype(np.int64)
    n_words = ens.cat_offsets[n + 1] - ens.cat_offsets[n]
    has_word = valid & (c // 32 < n_words)
    word = np.zeros(n.shape, dtype=np.int64)
    word[has_word] = ens.cat_words[ens.cat_offsets[n[has_word]] + c[has_word] // 32]
    in_set = has_word & (((word >> (c % 32)) & 1) == 1)
    cat_left = np.where(st == 2, in_set, ~in_set)
    return np.where(to_default, default_left, np.where(st == 0, num_left, cat_left))


def ref_leaves(ens, X, trees):
    """Global leaf reached by every row (rows x ``trees``), vectorised over rows."""
    out = np.empty((X.shape[0], len(trees)), dtype=np.int64)
    for j, t in enumerate(trees):
        node = np.full(X.shape[0], ens.tree_offsets[t], dtype=np.int64)
        while True:
            rows = np.flatnonzero(ens.left[node] >= 0)
            if rows.size == 0:
                break
            n = node[rows]
            gl = ref_goes_left_vec(ens, n, X[rows, ens.feature[n]])
            node[rows] = np.where(gl, ens.left[n], ens.right[n])
        out[:, j] = node
    return out


def ref_trees(ens, iteration_range):
    """Trees of ``iteration_range`` ([start, stop), stop 0 = all), in order."""
    if iteration_range is None:
        return np.arange(ens.n_trees)
    start, stop = iteration_range
    if stop == 0:
        stop = int(ens.tree_iteration.max()) + 1
    it = ens.tree_iteration
    return np.flatnonzero((it >= start) & (it < stop))


def ref_margin(ens, leaves, trees):
    acc = np.tile(np.asarray(ens.base_margin, dtype=np.float64), (leaves.shape[0], 1))
    for j, t in enumerate(trees):
        g = ens.tree_group[t]
        v = ens.value[leaves[:, j]]
        if ens.float32_sum:
            acc[:, g] = (acc[:, g].astype(F32) + v.astype(F32)).astype(np.float64)
        else:
            acc[:, g] = acc[:, g] + v
    return acc[:, 0] if ens.n_outputs == 1 else acc


# ---------------------------------------------------------------------- diagnostics
def describe_node(ens, n, x):
    kind = {0: "numeric", 1: "cat(set->right)", 2: "cat(set->left)"}[int(ens.split_type[n])]
    words = ens.cat_words[ens.cat_offsets[n] : ens.cat_offsets[n + 1]]
    return (
        f"node {n} {kind} missing_type={int(ens.missing_type[n])} "
        f"default_left={int(ens.default_left[n])} feature={int(ens.feature[n])} "
        f"threshold={ens.threshold[n]!r} bound={ens._bound[n]!r} "
        f"words={[hex(int(w)) for w in words]} x={float(x)!r} "
        f"-> ref {'left' if ref_goes_left(ens, n, x) else 'right'}"
    )


def leaf_mismatch_report(ens, X, trees, expected_ids, got_ids):
    r, j = (int(v) for v in np.argwhere(expected_ids != got_ids)[0])
    t = int(trees[j])
    path = ref_path(ens, t, X[r])
    lines = [
        f"{ens.decision_rule!r}: row {r}, tree {t} (depth {int(ens._tree_depth[t])}): "
        f"expected leaf_id {expected_ids[r, j]} (node {path[-1]}, depth {len(path) - 1}), "
        f"got {got_ids[r, j]}"
    ]
    lines += ["  " + describe_node(ens, n, X[r, ens.feature[n]]) for n in path[:-1]]
    return "\n".join(lines)


def check(ens, X, iteration_range=None, scalar_rows=12):
    """Compare predict_margin and leaf_index with the reference on X."""
    trees = ref_trees(ens, iteration_range)
    if trees.size:
        assert np.all(np.diff(trees) == 1), "test bug: an iteration's trees are not consecutive"
    leaves = ref_leaves(ens, X, trees)
    # the vectorised reference is the scalar one
    k = min(scalar_rows, X.shape[0])
    np.testing.assert_array_equal(leaves[:k], ref_leaves_scalar(ens, X[:k], trees))
    expected_ids = ens.leaf_id[leaves]
    got_ids = ens.leaf_index(X, iteration_range=iteration_range)
    assert got_ids.shape == expected_ids.shape
    if not np.array_equal(got_ids, expected_ids):
        pytest.fail(leaf_mismatch_report(ens, X, trees, expected_ids, got_ids))
    expected = ref_margin(ens, leaves, trees)
    got = ens.predict_margin(X, iteration_range=iteration_range)
    assert got.shape == expected.shape
    if not np.array_equal(got, expected):
        bad = np.argwhere(got != expected)[0]
        pytest.fail(
            f"margin mismatch at {tuple(int(b) for b in bad)}: expected "
            f"{expected[tuple(bad)]!r}, got {got[tuple(bad)]!r} "
            f"(float32_sum={ens.float32_sum})"
        )


# ---------------------------------------------------------------------- random ensembles
SPECIAL_X = np.array(
    [
        0.0,
        -0.0,
        1e-36,
        -1e-36,
        1e-35,
        -1e-35,
        np.nextafter(1e-35, 1.0),
        -np.nextafter(1e-35, 1.0),
        5e-324,
        np.nan,
        np.inf,
        -np.inf,
        1.0,
        2.0,
        2.5,
        2.9999999999,
        3.0,
        -1.0,
        -0.5,
        31.0,
        31.999,
        32.0,
        33.0,
        63.0,
        64.0,
        95.0,
        95.5,
        96.0,
        127.0,
        1e12,
        2147483520.0,  # largest float32 below 2**31
        2147483583.0,  # rounds down to 2147483520 in float32
        2147483584.0,  # rounds up to 2**31 in float32 (tie, even)
        2147483646.0,
        2147483647.0,
        2147483648.0,
        1e39,
        -1e39,
        F32_MAX,
        -F32_MAX,
        F32_OVERFLOW,
        np.nextafter(F32_OVERFLOW, 0.0),
        -F32_OVERFLOW,
    ]
)


def _threshold_pool(rng, rule, k):
    """Thresholds for one feature: a mix of ordinary and awkward values."""
    pool = []
    for _ in range(k):
        u = rng.random()
        if u < 0.4:
            t = float(rng.normal() * 10.0 ** rng.integers(-3, 4))
        elif u < 0.6:
            t = float(rng.integers(-5, 100)) + rng.choice([0.0, 0.5, 0.25])
        elif u < 0.95:
            t = float(rng.choice([0.0, -0.0, 1e-36, -1e-36, 1e-35, 2.5, 1e12, 5e-324, F32_MAX]))
        else:  # the extremes (non-finite thresholds are refused: test_infinite_threshold...)
            t = float(rng.choice([F32_MAX, -F32_MAX, 1e30, -1e30]))
        if rule.startswith("float32"):
            t = float(f32(t))  # the float32 boosters store float32 thresholds
        pool.append(t)
    return pool


def _grow(rng, kind, max_depth, cap=300):
    """Local child lists of a random tree shape; node 0 is the root."""
    left, right, depth = [-1], [-1], [0]
    spine = {0}
    stack = [0]
    while stack:
        i = stack.pop()
        d = depth[i]
        if kind == "leaf":
            split = False
        elif kind == "stump":
            split = d == 0
        elif kind == "full":
            split = d < max_depth
        elif kind == "chain":
            split = d < max_depth and i in spine
        else:
            split = d < max_depth and rng.random() < (0.95 if d < 2 else 0.75)
        if not split or len(left) + 2 > cap:
            continue
        a, b = len(left), len(left) + 1
        left[i], right[i] = a, b
        left += [-1, -1]
        right += [-1, -1]
        depth += [d + 1, d + 1]
        if kind == "chain":
            spine.add(a if rng.random() < 0.5 else b)
        stack += [a, b]
    return left, right


def random_ensemble(rng, *, n_outputs=None, rule=None):
    p = int(rng.integers(1, 31))
    rule = rule or str(rng.choice(RULES))
    n_out = n_outputs or int(rng.integers(1, 4))
    used = rng.choice(p, size=int(rng.integers(1, p + 1)), replace=False)
    fast = rng.random() < 0.25  # no categorical or Zero nodes: the top layout's fast path
    p_cat = 0.0 if fast else float(rng.choice([0.0, 0.3, 0.6, 1.0]))
    mt_p = [0.5, 0.0, 0.5] if fast else list(rng.dirichlet([1.0, 1.0, 1.0]))
    pools = {int(f): _threshold_pool(rng, rule, int(rng.integers(1, 6))) for f in used}

    # iterations: 1..6, each with 1..3 consecutive trees (or one per output)
    groups, iters = [], []
    for it in range(int(rng.integers(1, 7))):
        g = list(range(n_out)) if rng.random() < 0.5 else list(rng.integers(0, n_out, 3))
        g = g[: int(rng.integers(1, len(g) + 1))]
        groups += g
        iters += [it] * len(g)

    cols = {k: [] for k in ("left", "right", "feature", "threshold", "split_type")}
    cols.update({k: [] for k in ("default_left", "missing_type", "value", "leaf_id")})
    cat_words, cat_counts, offsets = [], [], [0]
    shapes = ["leaf", "stump", "chain", "random", "full"]
    for _ in groups:
        kind = str(rng.choice(shapes, p=[0.06, 0.1, 0.24, 0.45, 0.15]))
        max_depth = int(rng.integers(1, 15)) if kind != "full" else int(rng.integers(1, 9))
        ll, rr = _grow(rng, kind, max_depth)
        m = len(ll)
        base = offsets[-1]
        # nodes in the tree's slice: root first, the others shuffled (children anywhere)
        order = np.concatenate([[0], 1 + rng.permutation(m - 1)]).astype(np.int64)
        pos = np.empty(m, dtype=np.int64)
        pos[order] = np.arange(m)  # local node -> position in the slice
        ll, rr = np.array(ll)[order], np.array(rr)[order]
        inner = ll >= 0
        feature = np.where(inner, rng.choice(used, m), -1)
        st = np.where(inner & (rng.random(m) < p_cat), rng.integers(1, 3, m), 0)
        pick = rng.integers(0, 1000, m)
        thr = [
            pools[f][k % len(pools[f])] if s == 0 and f >= 0 else np.nan
            for f, s, k in zip(feature.tolist(), st.tolist(), pick.tolist())
        ]
        cols["left"].append(np.where(inner, base + pos[ll], -1))
        cols["right"].append(np.where(inner, base + pos[rr], -1))
        cols["feature"].append(feature)
        cols["threshold"].append(np.array(thr, dtype=np.float64))
        cols["split_type"].append(st)
        cols["default_left"].append(rng.integers(0, 2, m))
        cols["missing_type"].append(rng.choice(3, m, p=mt_p))
        scale = rng.choice([0.01, 1.0, 50.0], m)
        cols["value"].append(np.where(inner, 0.0, rng.normal(size=m) * scale))
        cols["leaf_id"].append(np.where(inner, -1, rng.permutation(10 * m)[:m]))
        n_words = np.where(st > 0, rng.integers(0, 4, m), 0)
        density = np.repeat(rng.random(m), n_words)[:, None]
        bits = rng.random((int(n_words.sum()), 32)) < density
        cat_words.append((bits.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1))
        cat_counts.append(n_words)
        offsets.append(base + m)
    cols = {k: np.concatenate(v) for k, v in cols.items()}
    cat_counts = np.concatenate(cat_counts)
    cat_words = np.concatenate(cat_words)

    n_nodes = offsets[-1]
    n_trees = len(groups)
    if rng.random() < 0.5:
        base_margin = rng.normal(size=n_out)  # usually not a float32 value
    else:
        base_margin = f32(rng.normal(size=n_out)).astype(np.float64)
    ens = TreeEnsemble(
        tree_offsets=np.array(offsets),
        **cols,
        cover=np.full(n_nodes, np.nan),
        count=np.full(n_nodes, np.nan),
        gain=np.zeros(n_nodes),
        cat_offsets=np.concatenate([[0], np.cumsum(cat_counts, dtype=np.int64)]),
        cat_words=cat_words.astype(np.uint32),
        tree_group=np.array(groups),
        tree_iteration=np.array(iters),
        learning_rate=np.ones(n_trees),
        tree_weight=np.ones(n_trees),
        base_margin=base_margin,
        feature_names=tuple(f"f{i}" for i in range(p)),
        decision_rule=rule,
        float32_sum=bool(rng.random() < 0.5),
    )
    return ens, pools


def random_X(rng, ens, pools, n):
    """Rows mixing ordinary values, exact thresholds and their neighbours, specials, NaN."""
    p = ens.n_features
    X = rng.normal(size=(n, p)) * 10.0 ** rng.integers(-2, 3, size=p)
    u = rng.random((n, p))
    # categorical-looking values: integers and fractions
    ints = rng.integers(-2, 100, size=(n, p)).astype(np.float64)
    ints += rng.choice([0.0, 0.0, 0.5, 0.9999999999, -1e-12], size=(n, p))
    X = np.where(u < 0.5, X, ints)
    X = np.where(u < 0.7, X, rng.choice(SPECIAL_X, size=(n, p)))
    for f, pool in pools.items():
        t = np.array(pool)
        with np.errstate(over="ignore", invalid="ignore"):
            t32 = f32(t)
            near = np.concatenate(
                [
                    t,
                    np.nextafter(t, np.inf),
                    np.nextafter(t, -np.inf),
                    np.nextafter(t32, F32(np.inf)).astype(np.float64),
                    np.nextafter(t32, F32(-np.inf)).astype(np.float64),
                    # halfway to the next float32 (a rounding tie) and its float64 neighbours
                    (t + np.nextafter(t32, F32(np.inf)).astype(np.float64)) / 2,
                    np.nextafter((t + np.nextafter(t32, F32(np.inf))) / 2, np.inf),
                    np.nextafter((t + np.nextafter(t32, F32(-np.inf))) / 2, -np.inf),
                ]
            )
        near = near[~np.isnan(near)]
        rows = rng.random(n) < 0.35
        X[rows, f] = rng.choice(near, size=int(rows.sum()))
    X[rng.random((n, p)) < 0.08] = np.nan
    return np.ascontiguousarray(X)


def random_range(rng, ens):
    n_it = ens.n_iterations
    start = int(rng.integers(0, n_it + 1))
    stop = int(rng.integers(start, n_it + 1))
    return (start, 0) if rng.random() < 0.2 else (start, stop)


N_ENSEMBLES = 300
CHUNK = 10


@pytest.mark.parametrize("chunk", range(N_ENSEMBLES // CHUNK))
def test_random_ensembles_serial(chunk):
    """300 random ensembles, small inputs (calling thread only), full and partial tree ranges."""
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        rng = np.random.default_rng(seed)
        ens, pools = random_ensemble(rng)
        X = random_X(rng, ens, pools, int(rng.integers(1, 150)))
        assert X.shape[0] * ens.n_trees < SERIAL_WORK
        try:
            check(ens, X)
            check(ens, X, random_range(rng, ens))
        except BaseException as e:
            e.args = (f"seed {seed}: {e.args[0] if e.args else ''}",) + e.args[1:]
            raise


@pytest.mark.parametrize("seed", range(1000, 1024))
def test_random_ensembles_parallel(seed):
    """Inputs with rows x trees >= SERIAL_WORK, which the kernels spread over threads."""
    rng = np.random.default_rng(seed)
    ens, pools = random_ensemble(rng)
    n = -(-SERIAL_WORK // ens.n_trees) + int(rng.integers(0, 200))
    X = random_X(rng, ens, pools, n)
    assert X.shape[0] * ens.n_trees >= SERIAL_WORK  # spread over threads
    check(ens, X, scalar_rows=4)
    check(ens, X, random_range(rng, ens), scalar_rows=4)


def test_random_shapes_cover_the_layout():
    """The generator makes stumps, single leaves and trees below and beyond TOP_DEPTH."""
    depths, rules, kinds, mts = set(), set(), set(), set()
    for seed in range(N_ENSEMBLES):
        ens, _ = random_ensemble(np.random.default_rng(seed))
        depths |= set(ens._tree_depth.tolist())
        rules.add(ens.decision_rule)
        inner = ens.left >= 0
        kinds |= set(ens.split_type[inner].tolist())
        mts |= set(ens.missing_type[inner].tolist())
    assert {0, 1, routing.TOP_DEPTH, routing.TOP_DEPTH + 1, 14} <= depths
    assert rules == set(RULES) and kinds == {0, 1, 2} and mts == {0, 1, 2}


# ---------------------------------------------------------------------- every node kind
def _probe_ensemble(rule, configs, prefix):
    """One tree per node config: ``prefix`` always-left nodes on feature 1, then the node
    under test on feature 0 (leaf ids 1 = left, 2 = right)."""
    cols = {
        k: []
        for k in (
            "left",
            "right",
            "feature",
            "threshold",
            "split_type",
            "default_left",
            "missing_type",
            "value",
            "leaf_id",
        )
    }
    words_all, counts, offsets = [], [], [0]

    def add(left, right, feature, thr, st, dl, mt, value, leaf_id, words=()):
        cols["left"].append(left)
        cols["right"].append(right)
        cols["feature"].append(feature)
        cols["threshold"].append(thr)
        cols["split_type"].append(st)
        cols["default_left"].append(dl)
        cols["missing_type"].append(mt)
        cols["value"].append(value)
        cols["leaf_id"].append(leaf_id)
        words_all.extend(words)
        counts.append(len(words))

    for st, mt, dl, thr, words in configs:
        b = offsets[-1]
        # prefix node i at b + 2i: left -> next prefix node (or the probe), right -> leaf b+2i+1
        for i in range(prefix):
            add(b + 2 * i + 2, b + 2 * i + 1, 1, 1.0, 0, 0, 0, 0.0, -1)  # x1 = 0 goes left
            add(-1, -1, -1, np.nan, 0, 0, 0, 100.0, 100 + i)
        p = b + 2 * prefix
        add(p + 1, p + 2, 0, thr, st, dl, mt, 0.0, -1, words)
        add(-1, -1, -1, np.nan, 0, 0, 0, 1.0, 1)
        add(-1, -1, -1, np.nan, 0, 0, 0, 2.0, 2)
        offsets.append(p + 3)
    n_nodes, n_trees = offsets[-1], len(configs)
    return TreeEnsemble(
        tree_offsets=np.array(offsets),
        **{k: np.array(v) for k, v in cols.items()},
        cover=np.full(n_nodes, np.nan),
        count=np.full(n_nodes, np.nan),
        gain=np.zeros(n_nodes),
        cat_offsets=np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]),
        cat_words=np.array(words_all, dtype=np.uint32),
        tree_group=np.zeros(n_trees, dtype=np.int32),
        tree_iteration=np.arange(n_trees),
        learning_rate=np.ones(n_trees),
        tree_weight=np.ones(n_trees),
        base_margin=np.zeros(1),
        feature_names=("x", "zero"),
        decision_rule=rule,
        float32_sum=False,
    )


PROBE_THRESHOLDS = [0.0, -0.0, 1e-36, -1e-36, 2.5, 1e-35, 32.0, -1.0, 1e12, F32_MAX, -F32_MAX]
PROBE_WORDS = [
    (),
    (0b1101,),  # {0, 2, 3}
    (0xFFFFFFFF, 0x1),  # {0..31, 32}
    (0x0, 0x80000000, 0x80000001),  # {63, 64, 95}
]


@pytest.mark.parametrize("prefix", [0, 5, routing.TOP_DEPTH - 1, routing.TOP_DEPTH, 12])
@pytest.mark.parametrize("rule", RULES)
def test_every_node_kind(rule, prefix):
    """Each (split_type, missing_type, default_left, threshold or set) against every special
    value, with the node at depth ``prefix`` (inside the top layout or below it)."""
    configs = []
    for mt in (0, 1, 2):
        for dl in (0, 1):
            for thr in PROBE_THRESHOLDS:
                configs.append((0, mt, dl, float(f32(thr)) if rule != "float64 <=" else thr, ()))
            for st in (1, 2):
                for words in PROBE_WORDS:
                    configs.append((st, mt, dl, np.nan, words))
    ens = _probe_ensemble(rule, configs, prefix)
    xs = np.concatenate([SPECIAL_X, np.nextafter(SPECIAL_X, np.inf), [2.5 + 2**-51]])
    X = np.column_stack([xs, np.zeros_like(xs)])
    check(ens, X, scalar_rows=len(xs) if prefix == 0 else 4)
    big = np.tile(X, (-(-SERIAL_WORK // (ens.n_trees * len(xs))) + 1, 1))
    assert big.shape[0] * ens.n_trees >= SERIAL_WORK  # spread over threads
    check(ens, big, scalar_rows=0)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("thr", [np.inf, -np.inf, np.nan])
def test_infinite_threshold_is_refused(rule, thr):
    """Only LightGBM writes +-inf thresholds (x <= inf splits NaN from every number), and
    "float32(x) < -inf" has no float64 bound: other such ensembles are refused when built."""
    if rule == "float64 <=" and not np.isnan(thr):
        _probe_ensemble(rule, [(0, 0, 0, thr, ())], prefix=0)  # accepted
        return
    with pytest.raises(ValueError, match="non-finite threshold"):
        _probe_ensemble(rule, [(0, 0, 0, thr, ())], prefix=0)


# ---------------------------------------------------------------------- the float32 bounds
def _bound_probe_values(t32):
    t = t32.astype(np.float64)
    with np.errstate(over="ignore"):
        up = np.nextafter(t32, F32(np.inf)).astype(np.float64)
        dn = np.nextafter(t32, F32(-np.inf)).astype(np.float64)
    cands = [t, up, dn, (t + up) / 2, (t + dn) / 2]
    out = []
    for c in cands:
        out += [c, np.nextafter(c, np.inf), np.nextafter(c, -np.inf)]
    return np.concatenate(out)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("rule", ["float32 <", "float32 <="])
def test_bound_matches_decision_rule(rule):
    """``x <= _bound`` (what the kernels compare) is the float32 rule, on the values where the
    float32 rounding decides: thresholds, their float32 neighbours and the ties between them."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=3000, dtype=np.uint64).astype(np.uint32)
    t32 = bits.view(F32)
    specials = [0.0, -0.0, 1.0, 2.5, 1e-36, -1e-36, 1e-45, -1e-45, 1.17549435e-38, 1e12]
    specials += [F32_MAX, -F32_MAX]
    t32 = np.concatenate([t32[np.isfinite(t32)], f32(specials)])
    ens = _probe_ensemble(rule, [(0, 0, 0, float(t), ()) for t in t32], prefix=0)
    inner = np.flatnonzero(ens.left >= 0)
    extra = np.array([np.inf, -np.inf, F32_OVERFLOW, -F32_OVERFLOW, 1e39, -1e39, 0.0, -0.0])
    for n, t in zip(inner, t32, strict=True):
        x = np.concatenate([_bound_probe_values(np.array([t])), extra])
        x = x[~np.isnan(x)]
        expected = f32(x) < t if rule == "float32 <" else f32(x) <= t
        got = x <= ens._bound[n]
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, f"threshold {t!r}: x={x[bad[0]]!r} bound={ens._bound[n]!r}"


def test_float64_rule_bound_is_threshold():
    rng = np.random.default_rng(3)
    ens, _ = random_ensemble(rng, rule="float64 <=")
    num = (ens.left >= 0) & (ens.split_type == 0)
    np.testing.assert_array_equal(ens._bound[num], ens.threshold[num])


# ---------------------------------------------------------------------- small special cases
def test_groups_without_trees_and_empty_ranges():
    """An output no tree adds to keeps its base margin; an empty range gives no leaf columns."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        ens, pools = random_ensemble(rng, n_outputs=3)
        X = random_X(rng, ens, pools, 70)
        check(ens, X)
        for start in range(ens.n_iterations + 1):
            check(ens, X, (start, start))


def test_single_leaf_trees_only():
    rng = np.random.default_rng(5)
    n_trees = 4
    ens = TreeEnsemble(
        tree_offsets=np.arange(n_trees + 1),
        left=-np.ones(n_trees),
        right=-np.ones(n_trees),
        feature=-np.ones(n_trees),
        threshold=np.full(n_trees, np.nan),
        split_type=np.zeros(n_trees),
        default_left=np.zeros(n_trees),
        missing_type=np.zeros(n_trees),
        value=rng.normal(size=n_trees),
        cover=np.full(n_trees, np.nan),
        count=np.full(n_trees, np.nan),
        gain=np.zeros(n_trees),
        leaf_id=np.zeros(n_trees),
        cat_offsets=np.zeros(n_trees + 1),
        cat_words=np.zeros(0),
        tree_group=np.array([0, 1, 0, 1]),
        tree_iteration=np.array([0, 0, 1, 1]),
        learning_rate=np.ones(n_trees),
        tree_weight=np.ones(n_trees),
        base_margin=np.array([0.1, -0.2]),
        feature_names=("a", "b", "c"),
    )
    X = np.full((SERIAL_WORK // 2, 3), np.nan)
    check(ens, X[:5])
    check(ens, X, (1, 2))
    check(ens, X)
