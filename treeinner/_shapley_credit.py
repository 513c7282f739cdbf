"""Per-feature credit of splits on feature combinations, by Shapley values over permutations.

CatBoost's CTR splits read a target statistic of a combination of features (``plan`` with
``noise_cat``, say): one kernel column whose attributions the input map credits equally to
every feature of the combination, so a feature the target does not depend on takes part of
what its partner gives. For a held-out score that is a sum over splits (the centred initial
form), the score ``v_c(S)`` of a combination column ``c`` on features ``S`` is split among
them as a Shapley value: ``v_c(T)`` for a part ``T`` of ``S`` is the column's score with
the features outside ``T`` permuted among the evaluation rows (one permutation of them
jointly, so their joint distribution is kept and their tie to the target and to the rest is
broken), and ``v_c`` of no feature is 0. A feature independent of the target and of the other
features then has an expected credit of 0 in every combination (its marginal contributions
compare two columns equal in distribution).

All the scores the Shapley values need come from one model: the trees that split on a
combination column are copied once per set ``P`` of permuted features (every non-empty,
proper part of some combination's features), each copy reading the columns of the evaluation
rows with ``P`` permuted, and crediting its combination columns ``c`` (with ``P`` inside
``c``'s features) to their features with the Shapley weights of the part ``S \\ P`` kept. The
original trees credit a combination's score equally (the weight of the full set), the copies
credit nothing else. Every method that sums per-split terms over the trees then gives the
Shapley credit with its own machinery, the per-row terms of a standard error included (a
row's terms are added over all copies before they are squared), and so does a Dask collection
(each partition permutes its own rows, the same way in every pass).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .ensemble import TreeEnsemble

__all__ = ["shapley_credit_ensemble"]


def _weight(k: int, s: int) -> float:
    """The Shapley weight of a part of size ``k`` of ``s`` players (the others outside)."""
    return math.factorial(k) * math.factorial(s - k - 1) / math.factorial(s)


def _runs(combos: dict[int, tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Every set of features permuted together: the non-empty proper parts of each
    combination's features, in a fixed order."""
    parts: set[tuple[int, ...]] = set()
    for feats in combos.values():
        for k in range(1, len(feats)):
            parts.update(itertools.combinations(feats, k))
    return sorted(parts, key=lambda p: (len(p), p))


def _run_credit(
    base: np.ndarray, combos: dict[int, tuple[int, ...]], permuted: tuple[int, ...]
) -> np.ndarray:
    """The credit of the kernel columns in the copy that permutes ``permuted``: for each
    combination column whose features hold them, the Shapley weights of the part kept
    (``+w(|T| - 1)`` for its features in T, ``-w(|T|)`` for the permuted ones); 0 elsewhere."""
    out = np.zeros_like(base)
    gone = set(permuted)
    for c, feats in combos.items():
        if not gone < set(feats):
            continue
        kept = [f for f in feats if f not in gone]
        s, t = len(feats), len(kept)
        out[c, kept] = _weight(t - 1, s)
        out[c, list(permuted)] = -_weight(t, s)
    return out


class PermutedRouting:
    """An input map that gives the kernels' input of a model copied per permuted set: the
    base map's columns of X, then for each set its columns of X with those features permuted
    among the rows (the same permutation for every call on rows of one length).

    Attributes mirror the base input map's (``credit`` stacked over the copies)."""

    def __init__(self, base: Any, runs: list[tuple[int, ...]], credit: np.ndarray) -> None:
        self.base = base
        self.runs = runs
        self.credit = credit
        self.n_raw = base.n_raw
        self.output_names = base.output_names
        self.routes_off_path = base.routes_off_path
        width = base.credit.shape[0]
        self.column_names = tuple(
            name
            if k == 0
            else f"{name} ({'+'.join(base.output_names[f] for f in runs[k - 1])} permuted)"
            for k in range(len(runs) + 1)
            for name in base.column_names[:width]
        )

    def transform(self, X: Any) -> np.ndarray:
        """The base columns of X, then those of X with each set of features permuted."""
        import pandas as pd

        blocks = [self.base.transform(X)]
        n = blocks[0].shape[0]
        frame = X if isinstance(X, pd.DataFrame) else None
        if frame is None:
            from . import _input

            nw_frame = _input.as_frame(X)
            frame = (
                self.base._pandas(nw_frame)
                if nw_frame is not None
                else pd.DataFrame(np.asarray(X, dtype=object))
            )
        for k, permuted in enumerate(self.runs):
            order = np.random.default_rng([n, k, *permuted]).permutation(n)
            shuffled = frame.copy()
            for f in permuted:  # a Series keeps its dtype (pandas categories)
                shuffled.isetitem(f, frame.iloc[order, f].set_axis(frame.index))
            blocks.append(self.base.transform(shuffled))
        return np.ascontiguousarray(np.hstack(blocks))

    def players(self) -> tuple[np.ndarray, np.ndarray]:
        """TreeSHAP's players of the copied model: each copy's columns are the players of
        the base model's (``treeshap.players_of``) in a range of their own, credited as that
        copy credits them."""
        from .treeshap import players_of

        base_player, base_pcredit = players_of(self.base.credit)
        width, n_p = base_player.shape[0], base_pcredit.shape[0]
        n_copies = self.credit.shape[0] // width
        player = np.concatenate([base_player + k * n_p for k in range(n_copies)])
        pcredit = np.zeros((n_copies * n_p, base_pcredit.shape[1]))
        pcredit[:n_p] = base_pcredit
        for k in range(1, n_copies):
            # a player's columns share one base credit row, hence one row in every copy
            pcredit[k * n_p + base_player] = self.credit[k * width : (k + 1) * width]
        return player, pcredit


def shapley_credit_ensemble(ens: TreeEnsemble) -> TreeEnsemble:
    """``ens`` itself when no split reads a combination of features; else the model with the
    trees that do copied once per permuted set (``PermutedRouting``), whose sums over splits
    credit each combination by its Shapley values (the module docstring)."""
    if ens.input_map is None:
        return ens
    combos = ens._combination_columns()
    if not combos:
        return ens
    runs = _runs(combos)
    base = np.asarray(ens.input_map.credit, dtype=np.float64)
    width = base.shape[0]
    credits = [base] + [_run_credit(base, combos, p) for p in runs]
    inner = ens.left >= 0
    tree = ens._node_tree
    # per copy, the trees it needs: those splitting on a combination column it credits
    reads = np.zeros((len(runs), ens.n_trees), dtype=bool)
    for k, cr in enumerate(credits[1:]):
        cols = np.flatnonzero(np.any(cr != 0, axis=1))
        hit = inner & np.isin(ens.feature, cols)
        reads[k, np.unique(tree[hit])] = True
    pieces: list[tuple[int, int]] = []  # (tree, copy): each tree then its copies, in order
    for t in range(ens.n_trees):
        pieces.append((t, 0))
        pieces.extend((t, int(k) + 1) for k in np.flatnonzero(reads[:, t]))
    return _copied(ens, pieces, width, PermutedRouting(ens.input_map, runs, np.vstack(credits)))


def _copied(
    ens: TreeEnsemble, pieces: list[tuple[int, int]], width: int, routing: PermutedRouting
) -> TreeEnsemble:
    """The ensemble of the trees ``pieces`` (tree, copy), copy ``k`` reading kernel columns
    ``k * width + j`` where the tree reads ``j``."""
    off = ens.tree_offsets
    node_fields = (
        "left", "right", "feature", "threshold", "split_type", "default_left", "missing_type",
        "value", "cover", "count", "gain", "leaf_id",
    )  # fmt: skip
    parts: dict[str, list[np.ndarray]] = {name: [] for name in node_fields}
    sizes = [0]
    cat_sizes: list[np.ndarray] = []
    words: list[np.ndarray] = []
    start = 0
    for t, k in pieces:
        lo, hi = int(off[t]), int(off[t + 1])
        for name in node_fields:
            a = getattr(ens, name)[lo:hi]
            if name in ("left", "right"):
                a = np.where(a >= 0, a - lo + start, -1)
            elif name == "feature":
                a = np.where(ens.left[lo:hi] >= 0, a + k * width, a)
            parts[name].append(a)
        cat_sizes.append(np.diff(ens.cat_offsets[lo : hi + 1]))
        words.append(ens.cat_words[ens.cat_offsets[lo] : ens.cat_offsets[hi]])
        start += hi - lo
        sizes.append(start)
    trees = np.array([t for t, _ in pieces])
    cat_offsets = np.zeros(start + 1, dtype=np.int64)
    cat_offsets[1:] = np.cumsum(np.concatenate(cat_sizes))
    n_copies = routing.credit.shape[0] // width
    names = tuple(
        name if k == 0 else f"{name}#{k}" for k in range(n_copies) for name in ens.feature_names
    )
    return ens.replace(
        **{name: np.concatenate(v) for name, v in parts.items()},
        tree_offsets=np.asarray(sizes, dtype=np.int64),
        cat_offsets=cat_offsets,
        cat_words=np.concatenate(words) if words else ens.cat_words[:0],
        tree_group=ens.tree_group[trees],
        tree_iteration=ens.tree_iteration[trees],
        learning_rate=ens.learning_rate[trees],
        tree_weight=ens.tree_weight[trees],
        feature_names=names,
        categories={k * width + f: v for k in range(n_copies) for f, v in ens.categories.items()},
        input_map=routing,
        booster_value=None,  # attributions only: margins are the original ensemble's
        booster_base=None,
    )
