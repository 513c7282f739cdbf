"""Pieces every adapter shares: warnings about inexact node values, joining parsed trees."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np


def warn_notes(notes: Sequence[str], inexact: Sequence[str], stacklevel: int = 5) -> None:
    """Warn each note, then once about the reasons regularized node values are inexact."""
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=stacklevel)
    if inexact:
        warnings.warn(
            "Regularized node values (PreDecomp) will not be exact for this model: "
            + "; ".join(inexact)
            + ".",
            UserWarning,
            stacklevel=stacklevel,
        )


def join_trees(parsed: Sequence[dict]) -> tuple[dict[str, np.ndarray], Callable[[str], np.ndarray]]:
    """Join per-tree arrays into the ensemble's global ones.

    Each tree is a dict with tree-local ``left``/``right`` child indices (-1 at leaves) and
    ``cat_words`` (one uint32 array per node). Returns the global ``tree_offsets``, ``left``,
    ``right``, ``cat_offsets`` and ``cat_words``, and a function concatenating any other
    per-node field over the trees.
    """
    offsets = np.zeros(len(parsed) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([p["left"].shape[0] for p in parsed])
    out = {"tree_offsets": offsets}
    for key in ("left", "right"):
        out[key] = np.concatenate(
            [np.where(p[key] >= 0, p[key] + off, -1) for p, off in zip(parsed, offsets)]
        )
    words = [w for p in parsed for w in p["cat_words"]]
    cat_offsets = np.zeros(len(words) + 1, dtype=np.int64)
    cat_offsets[1:] = np.cumsum([w.shape[0] for w in words])
    out["cat_offsets"] = cat_offsets
    out["cat_words"] = np.concatenate(words) if words else np.zeros(0, dtype=np.uint32)

    def field(k: str) -> np.ndarray:
        return np.concatenate([p[k] for p in parsed])

    return out, field
