"""The boosting loop and tree growth of the native booster (the heavy work is in
``treeinner.kernels.histogram``; this module only keeps the per-node bookkeeping)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import InputError
from .._format import CAT_SET_LEFT, NUMERIC
from ..kernels import histogram as K
from ..kernels._threads import n_chunks, n_threads
from ..objectives import Objective

# Work below which a kernel runs on the calling thread: waking the thread pool costs more
# (and, on a machine busy with other work, far more). Rows x features of a histogram batch;
# split candidates (nodes x features x bins) of a split search; rows of a row-wise kernel.
_PARALLEL_HIST_WORK = 1 << 17
_PARALLEL_CANDIDATES = 1 << 15
_PARALLEL_ROWS = 1 << 15
# Memory of the group test's prefix sums: at least this, or 2 bytes per value of the numeric
# features (the binned data already take 2 per value)
_GT_MIN_TABLE_BYTES = 256 << 20


@dataclass
class Config:
    """Validated training parameters (see the estimators' docstrings)."""

    n_estimators: int
    learning_rate: float
    max_depth: int | None
    num_leaves: int | None
    min_child_weight: float
    min_samples_leaf: int
    reg_lambda: float
    min_split_gain: float
    max_bins: int
    subsample: float
    colsample_bytree: float
    unbiased: bool
    same_heldout: bool  # unbiased_ratio "1:1+1": D1' = D2'
    early_stopping_rounds: int | None
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 32
    cat_smooth: float = 10.0
    cat_l2: float = 10.0
    min_data_per_group: int = 100
    pvalue: bool = False  # split="pvalue": the feature by the p-value of its best split
    min_split_pvalue: float = 1.0  # split only below this p-value (1.0: no limit)
    # feature-selecting boosting (Han et al. 2020): the penalty mu of a feature no tree has
    # used yet; "root" scales every tree's gains by its root's Newton residual sum of squares
    feature_penalty: float = 0.0
    penalty_scaling: str = "none"  # "none" (GBFS) or "root" (A-GBM)
    group_test: bool = False  # split_search="group_test" (GT-GBM)
    n_select: int = 10  # s of the group test
    delta: float = 0.1  # delta of the group test

    @property
    def selecting(self) -> bool:
        """Whether the trees track which features the model uses (penalty or group test)."""
        return self.feature_penalty > 0.0 or self.group_test

    def catp(self) -> np.ndarray:
        """The categorical parameters as ``find_splits`` takes them (slots ``K.C_*``)."""
        out = np.zeros(K.N_CATP, dtype=np.float64)
        out[K.C_MAX_ONEHOT] = self.max_cat_to_onehot
        out[K.C_MAX_THRESHOLD] = self.max_cat_threshold
        out[K.C_SMOOTH] = self.cat_smooth
        out[K.C_L2] = self.cat_l2
        out[K.C_MIN_GROUP] = self.min_data_per_group
        return out


@dataclass
class Binned:
    """The training matrix as bins, and the bins' upper bounds."""

    bins: np.ndarray  # (n, p) uint8 / uint16, for histograms
    bins_t: np.ndarray  # (p, n) the same, feature-major, for the row partition
    cuts: np.ndarray  # (p, max_value_bins) float64 (unused for categorical features)
    n_bins: np.ndarray  # (p,) int64 value bins per feature
    off: np.ndarray  # (p,) int64 first histogram bin of each feature
    nbp: np.ndarray  # (p,) int64 histogram bins per feature (value bins + missing)
    n_hbins: int
    is_cat: np.ndarray | None = None  # (p,) uint8: categorical features
    # per categorical feature: its training codes (sorted, distinct, int64) and their bins
    cat_codes: dict[int, np.ndarray] | None = None
    cat_bin: dict[int, np.ndarray] | None = None

    @property
    def has_cat(self) -> bool:
        return self.is_cat is not None and bool(self.is_cat.any())


def check_categorical(X: np.ndarray, features: np.ndarray, names: list[str] | None = None) -> None:
    """Raise an InputError unless every value of the columns ``features`` of ``X`` is NaN or
    a non-negative integer below 2**31 - 1 (a category code)."""
    for f in features.tolist():
        col = X[:, f]
        v = col[~np.isnan(col)]
        bad = v[(v < 0) | (v != np.floor(v)) | (v >= K.MAX_CAT_CODE)]
        if bad.size:
            name = repr(names[f]) if names is not None else f"{f}"
            raise InputError(
                f"Categorical feature {name} has values that are not category codes (integers "
                f"from 0 to 2**31 - 2, or NaN for missing), e.g. {float(bad[0])!r}; code the "
                "categories as non-negative integers, or pass a pandas categorical column."
            )


def _cat_bins(col: np.ndarray, max_value_bins: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Bins of one categorical column (non-negative integer codes, NaN missing): its distinct
    codes (sorted), the bin of each, and the number of value bins. With at most
    ``max_value_bins`` codes, one bin per code in code order; otherwise the ``max_value_bins -
    1`` most frequent codes (ties: the smaller code) get a bin each, in code order, and the
    rest share the last bin."""
    v = col[~np.isnan(col)]
    if v.size == 0:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64), 0
    codes, counts = np.unique(v, return_counts=True)
    k = codes.shape[0]
    if k <= max_value_bins:
        return codes, np.arange(k, dtype=np.int64), k
    keep = np.sort(np.lexsort((codes, -counts))[: max_value_bins - 1])  # positions in codes
    bin_of = np.full(k, max_value_bins - 1, dtype=np.int64)
    bin_of[keep] = np.arange(keep.shape[0], dtype=np.int64)
    return codes, bin_of, max_value_bins


def bin_data(X: np.ndarray, max_bins: int, is_cat: np.ndarray | None = None) -> Binned:
    """Bin every feature of ``X`` into at most ``max_bins - 1`` value bins plus a missing bin.

    Categorical features (``is_cat``, uint8 per feature; codes checked by
    ``check_categorical``) get a bin per category (``_cat_bins``)."""
    n, p = X.shape
    max_value_bins = max_bins - 1
    X = np.ascontiguousarray(X, dtype=np.float64)
    skip = np.zeros(p, dtype=np.uint8) if is_cat is None else is_cat.astype(np.uint8)
    cuts = np.zeros((p, max_value_bins), dtype=np.float64)
    n_bins = np.zeros(p, dtype=np.int64)
    K.find_cuts(X, max_value_bins, cuts, n_bins, skip=skip)
    dtype = np.uint8 if max_bins <= 256 else np.uint16
    bins = np.empty((n, p), dtype=dtype)
    bins_t = np.empty((p, n), dtype=dtype)
    K.apply_bins(X, cuts, n_bins, bins, bins_t, skip=skip)
    cat_codes: dict[int, np.ndarray] = {}
    cat_bin: dict[int, np.ndarray] = {}
    for f in np.flatnonzero(skip).tolist():
        codes, bin_of, nb = _cat_bins(X[:, f], max_value_bins)
        n_bins[f] = nb
        cat_codes[f], cat_bin[f] = codes.astype(np.int64), bin_of
        K.apply_cat_bins(X, f, codes, bin_of, nb, bins, bins_t)
    nbp = n_bins + 1
    off = np.zeros(p, dtype=np.int64)
    off[1:] = np.cumsum(nbp)[:-1]
    return Binned(bins, bins_t, cuts, n_bins, off, nbp, int(nbp.sum()), skip, cat_codes, cat_bin)


@dataclass
class TreeArrays:
    """One grown tree, nodes in creation order (root first), children local indices."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    G: np.ndarray
    H: np.ndarray
    C: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    best_feature: np.ndarray  # feature of every evaluated node's best split (-1: none)
    score3: np.ndarray  # its score_3 (unbiased gain on D2'; the gain in gain mode)
    split_type: np.ndarray  # int8: NUMERIC, or CAT_SET_LEFT (the set's categories go left)
    cat_offsets: np.ndarray  # (n + 1,) int64: each node's words in cat_words
    cat_words: np.ndarray  # uint32 bitsets of the categorical nodes' left sets
    split_order: np.ndarray  # int64: the split nodes in the order they were split
    root_scale: float  # the gains' divisor of penalty_scaling="root" (1.0 otherwise)


def feature_blocks(n_feats: int, threads: int) -> np.ndarray:
    """Boundaries (int64) of the feature blocks of a histogram pass: ``n_feats`` features in
    one block per thread, at most one per feature."""
    T = max(1, min(threads, n_feats))
    return np.round(np.linspace(0, n_feats, T + 1)).astype(np.int64)


class _Pool:
    """Histogram slots in one flat array, grown on demand."""

    def __init__(self, slot_size: int, capacity: int) -> None:
        self.slot_size = slot_size
        self.data = np.empty(slot_size * capacity, dtype=np.float64)
        self.free = list(range(capacity - 1, -1, -1))
        self.capacity = capacity

    def alloc(self) -> int:
        if not self.free:
            new = np.empty(self.slot_size * self.capacity * 2, dtype=np.float64)
            new[: self.data.shape[0]] = self.data
            self.data = new
            self.free = list(range(2 * self.capacity - 1, self.capacity - 1, -1))
            self.capacity *= 2
        return self.free.pop()

    def release(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)


_NO_SCORES = [-np.inf] * K.N_FRES  # of a node not evaluated


class _Tree:
    """Per-node bookkeeping of the tree being grown (plain lists: nodes are few)."""

    def __init__(self, bounds0: tuple[int, ...]) -> None:
        self.depth = [0]
        self.bounds = [bounds0]
        self.slot = [-1]
        self.left = [-1]
        self.right = [-1]
        self.feature = [-1]
        self.bin = [-1]
        self.default_left = [0]
        self.scores: list[list[float]] = [_NO_SCORES]  # replaced, never changed in place
        self.evaluated = [False]
        self.cat: list[np.ndarray | None] = [None]  # a categorical split's left bins (uint8)
        self.order: list[int] = []  # split nodes, in the order they were split

    def add(self, depth: int, bounds: tuple[int, ...]) -> int:
        self.depth.append(depth)
        self.bounds.append(bounds)
        self.slot.append(-1)
        self.left.append(-1)
        self.right.append(-1)
        self.feature.append(-1)
        self.bin.append(-1)
        self.default_left.append(0)
        self.evaluated.append(False)
        self.scores.append(_NO_SCORES)
        self.cat.append(None)
        return len(self.depth) - 1


class Grower:
    """Grows one tree at a time on fixed binned data.

    Parameters
    ----------
    binned : Binned
    cfg : Config
    n_parts : int
        Parts of every node's rows (histogram parts, plus one for rows left out by
        subsampling).
    n_hparts : int
        Leading parts histogrammed: 1 (gain), 3 (D, D1', D2') or 2 (D, D' with D1' = D2').
    """

    def __init__(self, binned: Binned, cfg: Config, n_parts: int, n_hparts: int) -> None:
        self.b = binned
        self.cfg = cfg
        self.P = n_parts
        self.HP = n_hparts
        self.S = (
            3 if (cfg.unbiased or cfg.pvalue or cfg.min_samples_leaf > 1 or binned.has_cat) else 2
        )
        p = binned.n_bins.shape[0]
        self.is_cat = binned.is_cat if binned.is_cat is not None else np.zeros(p, np.uint8)
        self.catp = cfg.catp()
        self.msl = max(cfg.min_samples_leaf, 1)
        n = binned.bins.shape[0]
        self.tmp = np.empty(n, dtype=np.int32)
        self.pool = _Pool(self.HP * binned.n_hbins * self.S, 8)
        self.best_first = cfg.num_leaves is not None
        self.max_depth = cfg.max_depth if cfg.max_depth is not None else 1 << 30
        self.key = K.R_SCORE3 if cfg.unbiased else K.R_GAIN
        # Feature selection (Han et al. 2020): per penalty, the features already used (uint8,
        # set as splits are made; a multitask model shares its group's mask between tasks)
        # and its mu; a feature's penalty is scale * sum of the mus whose mask lacks it.
        self.masks: list[np.ndarray] = []
        self.mus: list[float] = []
        if cfg.selecting:
            self.masks.append(np.zeros(p, dtype=np.uint8))
            self.mus.append(cfg.feature_penalty)
        self.scale = 1.0
        self.gt: Any = None  # a kernels.group_test.GroupTester with split_search="group_test"
        self.n_feature_histograms = 0  # (node, feature) histograms built from rows

    # ------------------------------------------------------------------ helpers
    def _can_split(self, t: _Tree, k: int) -> bool:
        """Whether node k is above the depth limit and has enough rows in every histogram part
        for two children."""
        if t.depth[k] >= self.max_depth:
            return False
        b = t.bounds[k]
        need = 2 * self.msl
        for r in range(self.HP):
            if b[r + 1] - b[r] < need:
                return False
        return True

    @staticmethod
    def _slots(t: _Tree, ids: list[int]) -> np.ndarray:
        slots = np.array([t.slot[k] for k in ids], dtype=np.int64)
        if slots.min() < 0:  # the kernels would index the pool from its end
            raise RuntimeError("treeinner.booster internal error: a node has no histogram.")
        return slots

    def _penalty(self) -> np.ndarray | None:
        """Every feature's penalty, in gain units, for the tree being grown (None: none)."""
        if not any(self.mus):
            return None
        pen = np.zeros(self.b.n_bins.shape[0], dtype=np.float64)
        for mask, mu in zip(self.masks, self.mus):
            if mu:
                pen += mu * (mask == 0)
        return pen * self.scale

    def _root_scale(self, idx: np.ndarray, bounds0: np.ndarray, gh: np.ndarray) -> float:
        """The Newton residual sum of squares of the tree's split rows, ``sum (wg)^2 / (wh) -
        G^2 / (H + lambda)`` (rows with wh > 0 in the first sum): with squared error, unit
        weights and lambda = 0 the root's residual sum of squares of A-GBM; it bounds every
        split's gain in the tree, so gain / scale is in [0, 1] for splits of positive gain.
        1.0 when it is not positive (a tree with nothing to fit)."""
        rows = idx[bounds0[0] : bounds0[self.HP]]
        g = gh[rows, 0]
        h = gh[rows, 1]
        pos = h > 0
        d = float(np.sum(g[pos] ** 2 / h[pos])) - float(g.sum()) ** 2 / (
            float(h.sum()) + self.cfg.reg_lambda
        )
        return d if d > 0 else 1.0

    def _node_features(self, t: _Tree, k: int, idx, gh, in_tree: np.ndarray) -> np.ndarray:
        """Group test: the features node ``k`` scans, its group-test candidates, the features
        the model uses already and the categorical features, those of the tree's column sample
        (``in_tree``, bool per feature)."""
        b = t.bounds[k]
        cfg = self.cfg
        cand = self.gt.candidates(
            idx, b[0], b[self.HP], gh, cfg.reg_lambda, cfg.min_child_weight, float(self.msl)
        )
        keep = np.zeros(in_tree.shape[0], dtype=bool)
        keep[cand] = True
        for mask in self.masks:
            keep |= mask != 0
        keep |= self.is_cat != 0
        return np.flatnonzero(keep & in_tree).astype(np.int64)

    def _evaluate_each(self, t: _Tree, ids: list[int], idx, gh, in_tree: np.ndarray) -> None:
        """Group test: build and search every node of ``ids`` on its own feature set."""
        for k in ids:
            fk = self._node_features(t, k, idx, gh, in_tree)
            if fk.shape[0] == 0:
                t.evaluated[k] = True
                t.feature[k] = -1
                continue
            self._build(t, [k], idx, gh, fk, feature_blocks(fk.shape[0], n_threads()))
            self._find(t, [k], fk, idx, gh)

    def _build(
        self, t: _Tree, ids: list[int], idx, gh, feats, fblock, sub_parent=(), sub_small=()
    ) -> None:
        """Histograms of the nodes ``ids``; then slots ``sub_parent`` minus ``sub_small``."""
        if not ids:
            return
        self.n_feature_histograms += len(ids) * int(feats.shape[0])
        bounds = np.array([t.bounds[k] for k in ids], dtype=np.int64)
        slots = self._slots(t, ids)
        rows = sum(t.bounds[k][self.HP] - t.bounds[k][0] for k in ids)
        if rows * feats.shape[0] < _PARALLEL_HIST_WORK or fblock.shape[0] <= 2:
            fblock = fblock[[0, -1]]  # one chunk on the calling thread: one pass over the rows
        K.build_histograms(
            self.b.bins,
            gh,
            idx,
            bounds,
            self.HP,
            feats,
            fblock,
            self.b.off,
            self.b.nbp,
            self.pool.data,
            slots,
            self.b.n_hbins,
            self.S,
            np.array(sub_parent, dtype=np.int64),
            np.array(sub_small, dtype=np.int64),
        )

    def _find(self, t: _Tree, ids: list[int], feats, idx, gh) -> None:
        if not ids:
            return
        m = len(ids)
        slots = self._slots(t, ids)
        totals = np.empty((m, self.HP, 3))
        res_i = np.empty((m, K.N_IRES), dtype=np.int64)
        res_f = np.empty((m, K.N_FRES), dtype=np.float64)
        work = m * int(self.b.nbp[feats].sum())
        nch = n_chunks(work, m * feats.shape[0]) if work >= _PARALLEL_CANDIDATES else 1
        pvalue = None
        if self.cfg.pvalue:  # the nodes' sums of g^2, g^3, g^4 over their split rows
            starts = np.array([t.bounds[k][0] for k in ids], dtype=np.int64)
            ends = np.array([t.bounds[k][self.HP] for k in ids], dtype=np.int64)
            powers = np.empty((m, 3), dtype=np.float64)
            rows = int((ends - starts).sum())
            K.node_power_sums(
                gh, idx, starts, ends, powers,
                n_chunks(rows, m) if m > 1 and rows >= _PARALLEL_ROWS else 1,
            )  # fmt: skip
            pvalue = (powers, np.log(self.cfg.min_split_pvalue))
        K.find_splits(
            self.pool.data,
            slots,
            totals,
            self.HP,
            self.b.n_hbins,
            self.S,
            feats,
            self.b.off,
            self.b.n_bins,
            self.cfg.reg_lambda,
            self.cfg.min_child_weight,
            float(self.msl),
            self.cfg.unbiased,
            res_i,
            res_f,
            nch,
            self.is_cat,
            self.catp,
            pvalue=pvalue,
            penalty=self._penalty(),
        )
        kind = res_i[:, K.R_CAT]
        masks = None
        if np.any(kind != K.CAT_NONE):  # the left bins of categorical splits, while the
            feature = np.maximum(res_i[:, K.R_FEATURE], 0)  # histograms are at hand
            masks = np.zeros((m, int(self.b.nbp[feature].max())), dtype=np.uint8)
            K.cat_left_bins(
                self.pool.data,
                slots,
                self.HP,
                self.b.n_hbins,
                feature,
                self.b.off,
                self.b.n_bins,
                self.catp,
                np.ascontiguousarray(kind),
                np.ascontiguousarray(res_i[:, K.R_BIN]),
                masks,
            )
        for q, (k, ri, rf) in enumerate(zip(ids, res_i.tolist(), res_f.tolist())):
            t.evaluated[k] = True
            t.feature[k] = ri[K.R_FEATURE]
            t.bin[k] = ri[K.R_BIN]
            t.default_left[k] = ri[K.R_DEFAULT_LEFT]
            t.scores[k] = rf
            f = ri[K.R_FEATURE]
            if ri[K.R_CAT] != K.CAT_NONE:
                assert masks is not None  # allocated when a feature is categorical
                t.cat[k] = masks[q, : self.b.nbp[f]].copy()
            else:
                t.cat[k] = None

    # ------------------------------------------------------------------ growth
    def grow(
        self,
        idx: np.ndarray,
        bounds0: np.ndarray,
        gh: np.ndarray,
        feats: np.ndarray,
        fblock: np.ndarray,
        F: np.ndarray,
        output: int,
    ) -> TreeArrays:
        """Grow one tree on the rows ``idx`` (parts ``bounds0``) with gradients ``gh`` and add
        its leaf values to column ``output`` of the training margins ``F``.

        Depth-wise (``num_leaves`` None): every node of a level whose best split scores above
        ``min_split_gain`` is split at once, its children evaluated together. Best-first: the
        open node with the highest score (the lowest node number among ties) is split, until
        ``num_leaves`` leaves or no score above ``min_split_gain``. A child's histogram is built
        for the smaller child only; the larger one's is its parent's minus the smaller's.

        Returns the tree.
        """
        cfg = self.cfg
        pool = self.pool
        key = self.key
        t = _Tree(tuple(bounds0.tolist()))
        self.scale = self._root_scale(idx, bounds0, gh) if cfg.penalty_scaling == "root" else 1.0
        in_tree = np.zeros(self.b.n_bins.shape[0], dtype=bool)
        in_tree[feats] = True
        frontier: list[int] = []
        if self._can_split(t, 0):
            t.slot[0] = pool.alloc()
            if self.gt is not None:
                self._evaluate_each(t, [0], idx, gh, in_tree)
            else:
                self._build(t, [0], idx, gh, feats, fblock)
                self._find(t, [0], feats, idx, gh)
            if t.feature[0] >= 0:
                frontier.append(0)
            else:
                pool.release(t.slot[0])
                t.slot[0] = -1
        n_leaves = 1
        threshold = cfg.min_split_gain
        while frontier:
            if cfg.num_leaves is not None:  # best-first
                if n_leaves >= cfg.num_leaves:
                    break
                j = max(frontier, key=lambda k: (t.scores[k][key], -k))
                if not t.scores[j][key] > threshold:
                    break
                frontier.remove(j)
                batch = [j]
            else:
                batch = [k for k in frontier if t.scores[k][key] > threshold]
                for k in frontier:
                    if not t.scores[k][key] > threshold:
                        pool.release(t.slot[k])
                        t.slot[k] = -1
                frontier = []
                if not batch:
                    break
            n_leaves += len(batch)
            t.order.extend(batch)
            for mask in self.masks:
                for k in batch:
                    mask[t.feature[k]] = 1
            m = len(batch)
            bounds = np.array([t.bounds[k] for k in batch], dtype=np.int64)
            feature = np.array([t.feature[k] for k in batch], dtype=np.int64)
            thr_bin = np.array([t.bin[k] for k in batch], dtype=np.int64)
            dl = np.array([t.default_left[k] for k in batch], dtype=np.int64)
            cb = np.empty((m, 2, self.P + 1), dtype=np.int64)
            rows = int(bounds[:, -1].sum() - bounds[:, 0].sum())
            is_cat = np.array([t.cat[k] is not None for k in batch], dtype=np.uint8)
            masks = np.zeros((m, int(self.b.nbp[feature].max()) if is_cat.any() else 1), np.uint8)
            for q, k in enumerate(batch):
                cat = t.cat[k]
                if cat is not None:
                    masks[q, : cat.shape[0]] = cat
            K.partition(
                self.b.bins_t,
                idx,
                self.tmp,
                bounds,
                feature,
                thr_bin,
                dl,
                self.b.n_bins[feature],
                cb,
                n_chunks(rows, m) if m > 1 and rows >= _PARALLEL_ROWS else 1,
                is_cat,
                masks,
            )
            child_bounds = cb.tolist()
            more = cfg.num_leaves is None or n_leaves < cfg.num_leaves
            to_build: list[int] = []
            to_find: list[int] = []
            sub_parent: list[int] = []
            sub_small: list[int] = []
            scratch: list[int] = []  # children built only to be subtracted from their parent
            spare: list[int] = []  # parents' slots no child takes over
            for q, k in enumerate(batch):
                kids = [t.add(t.depth[k] + 1, tuple(child_bounds[q][side])) for side in (0, 1)]
                t.left[k], t.right[k] = kids
                need = [more and self._can_split(t, c) for c in kids]
                parent_slot = t.slot[k]
                t.slot[k] = -1
                if not any(need) or parent_slot < 0 or self.gt is not None:
                    pool.release(parent_slot)
                    for c, nd in zip(kids, need):
                        if nd:
                            t.slot[c] = pool.alloc()
                            to_build.append(c)
                            to_find.append(c)
                    continue
                kid_rows = [t.bounds[c][self.HP] - t.bounds[c][0] for c in kids]
                s_i = 0 if kid_rows[0] <= kid_rows[1] else 1
                small, large = kids[s_i], kids[1 - s_i]
                t.slot[small] = pool.alloc()
                to_build.append(small)
                if need[1 - s_i]:
                    t.slot[large] = parent_slot
                    sub_parent.append(parent_slot)
                    sub_small.append(t.slot[small])
                    to_find.append(large)
                else:
                    spare.append(parent_slot)
                if need[s_i]:
                    to_find.append(small)
                else:  # built only to be subtracted from its parent
                    scratch.append(small)
            to_find.sort()
            if self.gt is not None:  # every child on its own features: nothing to subtract
                self._evaluate_each(t, to_find, idx, gh, in_tree)
            else:
                self._build(t, to_build, idx, gh, feats, fblock, sub_parent, sub_small)
                for c in scratch:
                    pool.release(t.slot[c])
                    t.slot[c] = -1
                for sl in spare:
                    pool.release(sl)
                self._find(t, to_find, feats, idx, gh)
            for c in to_find:
                if t.feature[c] >= 0:
                    frontier.append(c)
                else:
                    pool.release(t.slot[c])
                    t.slot[c] = -1
        for k in frontier:
            pool.release(t.slot[k])
            t.slot[k] = -1
        return self._finish(t, idx, gh, F, output)

    def _finish(self, t: _Tree, idx, gh, F, output: int) -> TreeArrays:
        n = len(t.depth)
        left = np.array(t.left, dtype=np.int32)
        right = np.array(t.right, dtype=np.int32)
        is_leaf = left < 0
        leaves = np.flatnonzero(is_leaf)
        bounds = np.array(t.bounds, dtype=np.int64)
        starts = np.ascontiguousarray(bounds[leaves, 0])
        ends = np.ascontiguousarray(bounds[leaves, self.P])
        sums = np.empty((leaves.shape[0], 3))
        leaf_values = np.empty(leaves.shape[0])
        lam = self.cfg.reg_lambda
        lr = self.cfg.learning_rate
        nch = n_chunks(idx.shape[0], leaves.shape[0]) if idx.shape[0] >= _PARALLEL_ROWS else 1
        K.finish_leaves(gh, idx, starts, ends, lr, lam, F, output, sums, leaf_values, nch)
        G = np.zeros(n)
        H = np.zeros(n)
        C = np.zeros(n)
        G[leaves], H[leaves], C[leaves] = sums[:, 0], sums[:, 1], sums[:, 2]
        Gs, Hs, Cs = G.tolist(), H.tolist(), C.tolist()  # Python floats: the same sums, faster
        lt, rt = t.left, t.right
        for k in range(n - 1, -1, -1):  # children are created after their parent
            a = lt[k]
            if a >= 0:
                b = rt[k]
                Gs[k] = Gs[a] + Gs[b]
                Hs[k] = Hs[a] + Hs[b]
                Cs[k] = Cs[a] + Cs[b]
        G, H, C = np.array(Gs), np.array(Hs), np.array(Cs)
        value = np.zeros(n)
        value[leaves] = leaf_values
        gain = np.zeros(n)
        inner = np.flatnonzero(~is_leaf)
        lc, rc = left[inner], right[inner]
        score = G**2 / (H + lam)
        gain[inner] = score[lc] + score[rc] - score[inner]
        best_feature = np.array(t.feature, dtype=np.int64)
        best_feature[~np.array(t.evaluated, dtype=bool)] = -1
        feature = np.where(is_leaf, -1, best_feature).astype(np.int32)
        threshold = np.full(n, np.nan)
        num = np.array([c is None for c in t.cat], dtype=bool) & ~is_leaf
        threshold[num] = self.b.cuts[best_feature[num], np.array(t.bin, dtype=np.int64)[num]]
        default_left = np.where(is_leaf, 0, np.array(t.default_left)).astype(np.uint8)
        split_type = np.full(n, NUMERIC, dtype=np.int8)
        cat_offsets = np.zeros(n + 1, dtype=np.int64)
        words: list[np.ndarray] = []
        for k in inner.tolist():
            mask = t.cat[k]
            if mask is None:
                continue
            f = int(best_feature[k])
            split_type[k] = CAT_SET_LEFT
            default_left[k] = mask[self.b.n_bins[f]]  # the missing bin's side
            assert self.b.cat_codes is not None and self.b.cat_bin is not None  # categorical
            left_codes = self.b.cat_codes[f][mask[self.b.cat_bin[f]] != 0]
            words.append(_bitset(left_codes))
            cat_offsets[k + 1] = words[-1].shape[0]
        cat_offsets = np.cumsum(cat_offsets)
        cat_words = np.concatenate(words) if words else np.zeros(0, dtype=np.uint32)
        score3 = np.array([sc[K.R_SCORE3] for sc in t.scores])
        score3[best_feature < 0] = 0.0
        tree = TreeArrays(
            left,
            right,
            feature,
            threshold,
            default_left,
            G,
            H,
            C,
            value,
            gain,
            best_feature,
            score3,
            split_type,
            cat_offsets,
            cat_words,
            np.array(t.order, dtype=np.int64),
            self.scale,
        )
        return tree


def _bitset(codes: np.ndarray) -> np.ndarray:
    """The category codes ``codes`` (non-negative int64) as a bitset of uint32 words (bit
    ``c % 32`` of word ``c // 32``), as long as the largest code needs."""
    if codes.shape[0] == 0:
        return np.zeros(0, dtype=np.uint32)
    words = np.zeros(int(codes.max()) // 32 + 1, dtype=np.uint32)
    np.bitwise_or.at(words, codes // 32, (np.uint32(1) << (codes % 32).astype(np.uint32)))
    return words


@dataclass
class TrainResult:
    trees: list[TreeArrays]
    tree_group: list[int]
    importance: np.ndarray
    evals_result: dict[str, dict[str, list[float]]]
    best_iteration: int
    n_rounds: int
    # training margins after every grown tree (rows routed by their bins; before any
    # early-stopping truncation)
    margin: np.ndarray
    # categorical features and the training codes of each (sorted, distinct)
    categorical: np.ndarray
    cat_codes: dict[int, np.ndarray]
    # the features split on, in the order of their first split (``selection_order``)
    selected: np.ndarray
    # (node, feature) histograms built from rows; pseudo-feature histograms of the group test
    n_histograms: dict[str, int]


def _role_sizes(n_in: int, cfg: Config) -> list[int]:
    if not cfg.unbiased:
        return [n_in]
    if cfg.same_heldout:
        half = n_in // 2
        return [n_in - half, half]
    third = n_in // 3
    return [n_in - 2 * third, third, third]


def categorical_mask(categorical_features: Any, p: int) -> np.ndarray:
    """The categorical features as a bool mask of ``p``: from None (none), a bool mask of
    length ``p`` or column indices (negative ones count from the end)."""
    mask = np.zeros(p, dtype=bool)
    if categorical_features is None:
        return mask
    arr = np.asarray(categorical_features)
    if arr.dtype == bool:
        if arr.shape != (p,):
            raise InputError(
                f"categorical_features as a boolean mask must have one entry per feature ({p}), "
                f"got shape {arr.shape}."
            )
        return arr.copy()
    if arr.size == 0:
        return mask
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise InputError(
            "categorical_features must be column indices or a boolean mask, got "
            f"{categorical_features!r}."
        )
    if np.any((arr < -p) | (arr >= p)):
        raise InputError(f"categorical_features {arr.tolist()} outside the {p} columns of X.")
    mask[arr] = True
    return mask


class Trainer:
    """The boosting of one model, a round at a time (``train`` runs every round; a multitask
    model interleaves the rounds of its tasks' trainers).

    ``categorical_features``: column indices or a boolean mask of the features whose values
    are category codes (non-negative integers, NaN missing; see ``check_categorical``), split
    by partitions of their categories; ``feature_names`` only name columns in errors. Column
    names and pandas categorical columns are resolved by the estimators.
    """

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        w: np.ndarray,
        obj: Objective,
        base_margin: np.ndarray,
        cfg: Config,
        rng: np.random.Generator,
        eval_sets: list[tuple[np.ndarray, np.ndarray]],
        categorical_features: Any = None,
        feature_names: list[str] | None = None,
    ) -> None:
        n, p = X.shape
        self.n, self.p = n, p
        self.y, self.w, self.obj, self.cfg, self.rng = y, w, obj, cfg, rng
        self.n_out = n_out = obj.n_outputs
        is_cat = categorical_mask(categorical_features, p)
        cat_idx = np.flatnonzero(is_cat)
        check_categorical(X, cat_idx, feature_names)
        for k, (Xe, _) in enumerate(eval_sets):
            try:
                check_categorical(Xe, cat_idx, feature_names)
            except InputError as e:
                raise InputError(f"eval_set[{k}]: {e}") from None
        self.is_cat = is_cat
        self.binned = binned = bin_data(X, cfg.max_bins, is_cat.astype(np.uint8))
        n_in = n if cfg.subsample >= 1.0 else max(1, int(round(cfg.subsample * n)))
        sizes = _role_sizes(n_in, cfg)
        if min(sizes) < 1:
            raise InputError(
                f"Too few rows ({n_in} used per tree) to divide into the {len(sizes)} row sets "
                "of split='unbiased'."
            )
        n_hparts = len(sizes)
        self.n_parts = n_parts = n_hparts + (1 if n_in < n else 0)
        self.grower = Grower(binned, cfg, n_parts, n_hparts)
        if cfg.group_test:
            from ..kernels.group_test import GroupTester

            eligible = np.flatnonzero(~is_cat).astype(np.int64)
            budget = max(_GT_MIN_TABLE_BYTES, 2 * n * eligible.shape[0])
            try:
                self.grower.gt = GroupTester(
                    binned.bins_t, binned.n_bins, eligible, cfg.n_select, cfg.delta, rng,
                    max_table_bytes=budget,
                )  # fmt: skip
            except ValueError as e:  # the prefix-sum table would not fit
                raise InputError(
                    f"split_search='group_test' cannot keep its prefix sums in memory ({e}); "
                    "use fewer rows, a smaller n_select or a larger delta."
                ) from None
        self.random_rows = n_parts > 1
        self.idx_template = np.arange(n, dtype=np.int32)
        self.bounds_template = np.array([0, n], dtype=np.int64)
        self.idx = np.empty(n, dtype=np.int32)
        self.role = np.empty(n, dtype=np.int64)
        self.role_of_rank = np.repeat(np.arange(n_parts), sizes + ([n - n_in] if n_in < n else []))
        self.n_feat = max(1, int(round(cfg.colsample_bytree * p)))
        self.threads = n_threads()
        self.F = np.tile(base_margin, (n, 1))
        self.gh_all = np.empty((n_out, n, 2), dtype=np.float64)
        self.evals = [(Xe, ye, np.tile(base_margin, (Xe.shape[0], 1))) for Xe, ye in eval_sets]
        self.evals_result: dict[str, dict[str, list[float]]] = {
            f"validation_{k}": {"loss": []} for k in range(len(eval_sets))
        }
        self.trees: list[TreeArrays] = []
        self.groups: list[int] = []
        self.best_iter, self.best_loss = -1, np.inf
        self.rounds = 0
        self.stopped = False

    def step(self) -> bool:
        """Grow one round (``n_outputs`` trees); False, growing nothing, once early stopping
        has stopped the training or every round is grown."""
        cfg, n, p, n_out = self.cfg, self.n, self.p, self.n_out
        if self.stopped or self.rounds >= cfg.n_estimators:
            return False
        it = self.rounds
        rng, idx, F = self.rng, self.idx, self.F
        K.round_gradients(
            self.obj.code, self.obj.prm, self.y, self.w, F, self.gh_all,
            None if n * n_out >= _PARALLEL_ROWS else 1,
        )  # fmt: skip
        for c in range(n_out):
            if self.random_rows:
                self.role[rng.permutation(n)] = self.role_of_rank
                bounds0 = np.empty(self.n_parts + 1, dtype=np.int64)
                K.group_rows(self.role, self.n_parts, idx, bounds0)
            else:
                idx[:] = self.idx_template
                bounds0 = self.bounds_template.copy()
            if self.n_feat < p:
                feats = np.sort(rng.choice(p, size=self.n_feat, replace=False)).astype(np.int64)
            else:
                feats = np.arange(p, dtype=np.int64)
            fblock = feature_blocks(feats.shape[0], self.threads)
            tree = self.grower.grow(idx, bounds0, self.gh_all[c], feats, fblock, F, c)
            for Xe, _, Fe in self.evals:
                K.add_tree(
                    Xe, tree.left, tree.right, tree.feature, tree.threshold, tree.default_left,
                    tree.value, Fe, c, None if Xe.shape[0] >= _PARALLEL_ROWS else 1,
                    tree.split_type, tree.cat_offsets, tree.cat_words,
                )  # fmt: skip
            self.trees.append(tree)
            self.groups.append(c)
        self.rounds = it + 1
        if self.evals:
            for k, (_, ye, Fe) in enumerate(self.evals):
                self.evals_result[f"validation_{k}"]["loss"].append(
                    self.obj.loss(ye, Fe[:, 0] if n_out == 1 else Fe)
                )
            last = self.evals_result[f"validation_{len(self.evals) - 1}"]["loss"][-1]
            if last < self.best_loss:
                self.best_loss, self.best_iter = last, it
            elif cfg.early_stopping_rounds is not None and it - self.best_iter >= (
                cfg.early_stopping_rounds
            ):
                self.stopped = True
        return True

    def result(self) -> TrainResult:
        """The trained model (after early stopping, the rounds up to the best one)."""
        cfg, n_out = self.cfg, self.n_out
        trees, groups, rounds, best_iter = self.trees, self.groups, self.rounds, self.best_iter
        if best_iter < 0:  # no eval set (or a loss that never was a number)
            best_iter = rounds - 1
        if cfg.early_stopping_rounds is not None and self.evals:  # the loss history stays
            keep = (best_iter + 1) * n_out  # complete
            trees, groups = trees[:keep], groups[:keep]
            rounds = best_iter + 1
        importance = np.zeros(self.p)
        for t in trees:
            # every evaluated split's score_3, taken or not (Zhang et al. 2023, Remark)
            if cfg.unbiased:
                ok = t.best_feature >= 0
                np.add.at(importance, t.best_feature[ok], t.score3[ok])
            else:
                inner = t.left >= 0
                np.add.at(importance, t.feature[inner], t.gain[inner])
        gt = self.grower.gt
        return TrainResult(
            trees,
            groups,
            importance,
            self.evals_result,
            best_iter,
            rounds,
            self.F,
            self.is_cat,
            self.binned.cat_codes or {},
            selection_order(trees),
            {
                "feature_histograms": self.grower.n_feature_histograms,
                "pseudo_feature_histograms": 0 if gt is None else int(gt.n_pseudo_histograms),
            },
        )


def selection_order(trees: list[TreeArrays]) -> np.ndarray:
    """The features the trees split on, in the order of their first split (int64)."""
    seen: dict[int, None] = {}
    for t in trees:
        for k in t.split_order.tolist():
            seen.setdefault(int(t.feature[k]), None)
    return np.array(list(seen), dtype=np.int64)


def train(
    X: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    obj: Objective,
    base_margin: np.ndarray,
    cfg: Config,
    rng: np.random.Generator,
    eval_sets: list[tuple[np.ndarray, np.ndarray]],
    categorical_features: Any = None,
    feature_names: list[str] | None = None,
) -> TrainResult:
    """Boost ``cfg.n_estimators`` rounds of ``obj.n_outputs`` trees on (X, y, w) (see
    ``Trainer``)."""
    trainer = Trainer(
        X, y, w, obj, base_margin, cfg, rng, eval_sets, categorical_features, feature_names
    )
    while trainer.step():
        pass
    return trainer.result()
