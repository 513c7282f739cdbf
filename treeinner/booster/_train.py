"""The boosting loop and tree growth of the native booster (the heavy work is in
``treeinner.kernels.histogram``; this module only keeps the per-node bookkeeping)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._errors import InputError
from ..kernels import histogram as K
from ..kernels._threads import n_chunks, n_threads
from ..objectives import Objective

# Work below which a kernel runs on the calling thread: waking the thread pool costs more
# (and, on a machine busy with other work, far more). Rows x features of a histogram batch;
# split candidates (nodes x features x bins) of a split search; rows of a row-wise kernel.
_PARALLEL_HIST_WORK = 1 << 17
_PARALLEL_CANDIDATES = 1 << 15
_PARALLEL_ROWS = 1 << 15


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


@dataclass
class Binned:
    """The training matrix as bins, and the bins' upper bounds."""

    bins: np.ndarray  # (n, p) uint8 / uint16, for histograms
    bins_t: np.ndarray  # (p, n) the same, feature-major, for the row partition
    cuts: np.ndarray  # (p, max_value_bins) float64
    n_bins: np.ndarray  # (p,) int64 value bins per feature
    off: np.ndarray  # (p,) int64 first histogram bin of each feature
    nbp: np.ndarray  # (p,) int64 histogram bins per feature (value bins + missing)
    n_hbins: int


def bin_data(X: np.ndarray, max_bins: int) -> Binned:
    """Bin every feature of ``X`` into at most ``max_bins - 1`` value bins plus a missing bin."""
    n, p = X.shape
    max_value_bins = max_bins - 1
    X = np.ascontiguousarray(X, dtype=np.float64)
    cuts = np.zeros((p, max_value_bins), dtype=np.float64)
    n_bins = np.zeros(p, dtype=np.int64)
    K.find_cuts(X, max_value_bins, cuts, n_bins)
    dtype = np.uint8 if max_bins <= 256 else np.uint16
    bins = np.empty((n, p), dtype=dtype)
    bins_t = np.empty((p, n), dtype=dtype)
    K.apply_bins(X, cuts, n_bins, bins, bins_t)
    nbp = n_bins + 1
    off = np.zeros(p, dtype=np.int64)
    off[1:] = np.cumsum(nbp)[:-1]
    return Binned(bins, bins_t, cuts, n_bins, off, nbp, int(nbp.sum()))


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
        self.S = 3 if (cfg.unbiased or cfg.min_samples_leaf > 1) else 2
        self.msl = max(cfg.min_samples_leaf, 1)
        n = binned.bins.shape[0]
        self.tmp = np.empty(n, dtype=np.int32)
        self.pool = _Pool(self.HP * binned.n_hbins * self.S, 8)
        self.best_first = cfg.num_leaves is not None
        self.max_depth = cfg.max_depth if cfg.max_depth is not None else 1 << 30
        self.key = K.R_SCORE3 if cfg.unbiased else K.R_GAIN

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

    def _build(
        self, t: _Tree, ids: list[int], idx, gh, feats, fblock, sub_parent=(), sub_small=()
    ) -> None:
        """Histograms of the nodes ``ids``; then slots ``sub_parent`` minus ``sub_small``."""
        if not ids:
            return
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

    def _find(self, t: _Tree, ids: list[int], feats) -> None:
        if not ids:
            return
        m = len(ids)
        slots = self._slots(t, ids)
        totals = np.empty((m, self.HP, 3))
        res_i = np.empty((m, K.N_IRES), dtype=np.int64)
        res_f = np.empty((m, K.N_FRES), dtype=np.float64)
        work = m * int(self.b.nbp[feats].sum())
        nch = n_chunks(work, m * feats.shape[0]) if work >= _PARALLEL_CANDIDATES else 1
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
        )
        for k, ri, rf in zip(ids, res_i.tolist(), res_f.tolist()):
            t.evaluated[k] = True
            t.feature[k] = ri[K.R_FEATURE]
            t.bin[k] = ri[K.R_BIN]
            t.default_left[k] = ri[K.R_DEFAULT_LEFT]
            t.scores[k] = rf

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
        frontier: list[int] = []
        if self._can_split(t, 0):
            t.slot[0] = pool.alloc()
            self._build(t, [0], idx, gh, feats, fblock)
            self._find(t, [0], feats)
            if t.feature[0] >= 0:
                frontier.append(0)
            else:
                pool.release(t.slot[0])
                t.slot[0] = -1
        n_leaves = 1
        threshold = cfg.min_split_gain
        while frontier:
            if self.best_first:
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
            m = len(batch)
            bounds = np.array([t.bounds[k] for k in batch], dtype=np.int64)
            feature = np.array([t.feature[k] for k in batch], dtype=np.int64)
            thr_bin = np.array([t.bin[k] for k in batch], dtype=np.int64)
            dl = np.array([t.default_left[k] for k in batch], dtype=np.int64)
            cb = np.empty((m, 2, self.P + 1), dtype=np.int64)
            rows = int(bounds[:, -1].sum() - bounds[:, 0].sum())
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
            )
            child_bounds = cb.tolist()
            more = (not self.best_first) or n_leaves < cfg.num_leaves
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
                if not any(need) or parent_slot < 0:
                    pool.release(parent_slot)
                    for c, nd in zip(kids, need):
                        if nd:
                            t.slot[c] = pool.alloc()
                            to_build.append(c)
                            to_find.append(c)
                    continue
                rows = [t.bounds[c][self.HP] - t.bounds[c][0] for c in kids]
                s_i = 0 if rows[0] <= rows[1] else 1
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
            self._build(t, to_build, idx, gh, feats, fblock, sub_parent, sub_small)
            for c in scratch:
                pool.release(t.slot[c])
                t.slot[c] = -1
            for sl in spare:
                pool.release(sl)
            to_find.sort()
            self._find(t, to_find, feats)
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
        threshold[inner] = self.b.cuts[best_feature[inner], np.array(t.bin, dtype=np.int64)[inner]]
        default_left = np.where(is_leaf, 0, np.array(t.default_left)).astype(np.uint8)
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
        )
        return tree


@dataclass
class TrainResult:
    trees: list[TreeArrays]
    tree_group: list[int]
    importance: np.ndarray
    evals_result: dict[str, dict[str, list[float]]]
    best_iteration: int
    n_rounds: int


def _role_sizes(n_in: int, cfg: Config) -> list[int]:
    if not cfg.unbiased:
        return [n_in]
    if cfg.same_heldout:
        half = n_in // 2
        return [n_in - half, half]
    third = n_in // 3
    return [n_in - 2 * third, third, third]


def train(
    X: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    obj: Objective,
    base_margin: np.ndarray,
    cfg: Config,
    rng: np.random.Generator,
    eval_sets: list[tuple[np.ndarray, np.ndarray]],
) -> TrainResult:
    """Boost ``cfg.n_estimators`` rounds of ``obj.n_outputs`` trees on (X, y, w)."""
    n, p = X.shape
    n_out = obj.n_outputs
    binned = bin_data(X, cfg.max_bins)
    n_in = n if cfg.subsample >= 1.0 else max(1, int(round(cfg.subsample * n)))
    sizes = _role_sizes(n_in, cfg)
    if min(sizes) < 1:
        raise InputError(
            f"Too few rows ({n_in} used per tree) to divide into the {len(sizes)} row sets of "
            "split='unbiased'."
        )
    n_hparts = len(sizes)
    n_parts = n_hparts + (1 if n_in < n else 0)
    grower = Grower(binned, cfg, n_parts, n_hparts)
    random_rows = n_parts > 1
    idx_template = np.arange(n, dtype=np.int32)
    bounds_template = np.array([0, n], dtype=np.int64)
    idx = np.empty(n, dtype=np.int32)
    role = np.empty(n, dtype=np.int64)
    role_of_rank = np.repeat(np.arange(n_parts), sizes + ([n - n_in] if n_in < n else []))
    n_feat = max(1, int(round(cfg.colsample_bytree * p)))
    threads = n_threads()

    F = np.tile(base_margin, (n, 1))
    gh_all = np.empty((n_out, n, 2), dtype=np.float64)
    evals = [(Xe, ye, np.tile(base_margin, (Xe.shape[0], 1))) for Xe, ye in eval_sets]
    evals_result: dict[str, dict[str, list[float]]] = {
        f"validation_{k}": {"loss": []} for k in range(len(eval_sets))
    }
    trees: list[TreeArrays] = []
    groups: list[int] = []
    importance = np.zeros(p)
    best_iter, best_loss = -1, np.inf
    rounds = 0
    for it in range(cfg.n_estimators):
        K.round_gradients(
            obj.code, obj.prm, y, w, F, gh_all, None if n * n_out >= _PARALLEL_ROWS else 1
        )
        for c in range(n_out):
            if random_rows:
                role[rng.permutation(n)] = role_of_rank
                bounds0 = np.empty(n_parts + 1, dtype=np.int64)
                K.group_rows(role, n_parts, idx, bounds0)
            else:
                idx[:] = idx_template
                bounds0 = bounds_template.copy()
            if n_feat < p:
                feats = np.sort(rng.choice(p, size=n_feat, replace=False)).astype(np.int64)
            else:
                feats = np.arange(p, dtype=np.int64)
            T = max(1, min(threads, feats.shape[0]))
            fblock = np.round(np.linspace(0, feats.shape[0], T + 1)).astype(np.int64)
            tree = grower.grow(idx, bounds0, gh_all[c], feats, fblock, F, c)
            for Xe, _, Fe in evals:
                K.add_tree(
                    Xe,
                    tree.left,
                    tree.right,
                    tree.feature,
                    tree.threshold,
                    tree.default_left,
                    tree.value,
                    Fe,
                    c,
                    None if Xe.shape[0] >= _PARALLEL_ROWS else 1,
                )
            trees.append(tree)
            groups.append(c)
        rounds = it + 1
        if evals:
            for k, (_, ye, Fe) in enumerate(evals):
                evals_result[f"validation_{k}"]["loss"].append(
                    obj.loss(ye, Fe[:, 0] if n_out == 1 else Fe)
                )
            last = evals_result[f"validation_{len(evals) - 1}"]["loss"][-1]
            if last < best_loss:
                best_loss, best_iter = last, it
            elif cfg.early_stopping_rounds is not None and it - best_iter >= (
                cfg.early_stopping_rounds
            ):
                break
    if best_iter < 0:  # no eval set (or a loss that never was a number)
        best_iter = rounds - 1
    if cfg.early_stopping_rounds is not None and evals:  # the loss history stays complete
        keep = (best_iter + 1) * n_out
        trees, groups = trees[:keep], groups[:keep]
        rounds = best_iter + 1
    for t in trees:
        if cfg.unbiased:  # every evaluated split's score_3, taken or not (paper 000, Remark)
            ok = t.best_feature >= 0
            np.add.at(importance, t.best_feature[ok], t.score3[ok])
        else:
            inner = t.left >= 0
            np.add.at(importance, t.feature[inner], t.gain[inner])
    return TrainResult(trees, groups, importance, evals_result, best_iter, rounds)
