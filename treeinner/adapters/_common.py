"""What every adapter shares: the one assembly step that turns the records an adapter fills
(``_records.Parts``) into a TreeEnsemble (``assemble``), giving its warnings (``emit``), and
small helpers (corrupt-model errors, categorical bitsets, choosing a value, the gradient
conventions of an objective).

An adapter reads its booster's own dump in named phases (header and parameters, trees,
statistics it must recover, the objective's conventions) and ends with ``assemble(Parts(...))``;
everything from joining the per-tree arrays to constructing the ensemble happens here, once.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _calls
from .._errors import ModelFormatError
from .._format import OVA, SOFTMAX, default_grad_params
from ..ensemble import TreeEnsemble
from ._records import Conversion, KernelObjective, Parts, Tree


# ---------------------------------------------------------------------- errors and helpers
class Corrupt(ModelFormatError):
    """A model document that cannot be a valid model (the message names the booster)."""


def corrupt(booster: str, msg: str) -> Corrupt:
    """``Corrupt(f"Corrupt {booster} model: {msg}")``."""
    return Corrupt(f"Corrupt {booster} model: {msg}")


def library_of(obj: Any) -> str:
    """The top-level package an object's type comes from (``"xgboost"``, ``"lightgbm"``...)."""
    return type(obj).__module__.split(".")[0]


def bitset(members: np.ndarray) -> np.ndarray:
    """A set of non-negative category codes as uint32 words (bit ``c % 32`` of word ``c // 32``)."""
    members = np.asarray(members, dtype=np.int64)
    w = np.zeros(int(members.max()) // 32 + 1 if members.size else 0, dtype=np.uint32)
    np.bitwise_or.at(w, members // 32, np.uint32(1) << (members % 32).astype(np.uint32))
    return w


def cat_sets(n_nodes: int, words: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A tree's categorical sets, ``{node: words}``, as ``Tree.cat_sizes`` and ``.cat_words``."""
    sizes = np.zeros(n_nodes, dtype=np.int64)
    for node, w in words.items():
        sizes[node] = w.shape[0]
    flat = [words[k] for k in sorted(words)]
    return sizes, (np.concatenate(flat) if flat else np.zeros(0, dtype=np.uint32))


def pick(explicit: Any, *found: tuple[Any, str]) -> tuple[Any, list[str]]:
    """Choose a value: ``explicit`` when given, else the first ``(value, note)`` whose value is
    not None. Returns the value and the chosen candidate's note (empty: none) as a list."""
    if explicit is not None:
        return explicit, []
    for value, note in found:
        if value is not None:
            return value, [note] if note else []
    raise ModelFormatError("pick() needs a candidate with a value (a default).")


# ---------------------------------------------------------------------- objectives
def gradient_fields(
    kernel_objective: KernelObjective, name: str, params: dict, n_outputs: int
) -> dict[str, Any]:
    """The ``TreeEnsemble`` gradient fields of objective ``name`` (with ``params``, for
    ``n_outputs`` outputs) in a booster's conventions (its ``kernel_objective``):
    ``grad_objective``, ``grad_params`` and ``no_gradient`` (the NotImplementedError's message,
    and code -1, when the objective has no gradient here)."""
    prm = default_grad_params(float(params.get("scale_pos_weight", 1.0)))
    try:
        code, prm = kernel_objective(name, params, n_outputs, prm)
    except NotImplementedError as e:
        return {"grad_objective": -1, "grad_params": prm, "no_gradient": str(e)}
    if n_outputs > 1 and code not in (SOFTMAX, OVA):  # multi-target (XGBoost num_target)
        why = (
            f"Objective {name!r} with {n_outputs} outputs (multi-target) has no per-row "
            "gradient here: the gradient methods take one label per row. Prediction and "
            "TreeSHAP are supported."
        )
        return {"grad_objective": -1, "grad_params": prm, "no_gradient": why}
    return {"grad_objective": int(code), "grad_params": prm, "no_gradient": ""}


# ---------------------------------------------------------------------- records
# ---------------------------------------------------------------------- assembly
def join_trees(trees: Sequence[Tree]) -> dict[str, np.ndarray]:
    """Join per-tree arrays into the ensemble's global node arrays (``tree_offsets``, global
    child indices, ``cat_offsets`` and ``cat_words``, and every other ``Tree`` field)."""
    offsets = np.zeros(len(trees) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([t.left.shape[0] for t in trees])
    out = {"tree_offsets": offsets}
    for key in ("left", "right"):
        kids = [getattr(t, key) for t in trees]
        out[key] = np.concatenate([np.where(c >= 0, c + o, -1) for c, o in zip(kids, offsets)])
    for key in Tree._fields[2:-2]:
        out[key] = np.concatenate([getattr(t, key) for t in trees])
    sizes = [np.zeros(t.left.shape[0], np.int64) if t.cat_sizes is None else t.cat_sizes
             for t in trees]  # fmt: skip
    cat_offsets = np.zeros(offsets[-1] + 1, dtype=np.int64)
    cat_offsets[1:] = np.cumsum(np.concatenate(sizes))
    out["cat_offsets"] = cat_offsets
    words = [t.cat_words for t in trees if t.cat_words is not None]
    out["cat_words"] = np.concatenate(words) if words else np.zeros(0, dtype=np.uint32)
    return out


def _messages(parts: Parts) -> tuple[str, ...]:
    """The warnings of a conversion: each note, then one listing why node values are inexact."""
    out = list(parts.notes)
    if parts.inexact:
        out.append(f"{parts.booster.inexact_heading}: " + "; ".join(parts.inexact) + ".")
    return tuple(out)


def assemble(parts: Parts) -> Conversion:
    """The one assembly step of every adapter: join the trees, build the input map if any, and
    construct the TreeEnsemble with its booster conventions; the warnings are returned with it
    (``emit`` gives them)."""
    joined: dict[str, Any] = join_trees(parts.trees)
    input_map, names = None, parts.feature_names
    if parts.input_map is not None:
        input_map, names = parts.input_map(joined)
    b, obj = parts.booster, parts.objective
    booster_value = None
    if parts.booster_trees:
        booster_value = joined["value"].copy()
        off = joined["tree_offsets"]
        for k, v in parts.booster_trees.items():
            booster_value[off[k] : off[k + 1]] = v
    ens = TreeEnsemble(
        **joined,
        tree_group=parts.tree_group,
        tree_iteration=parts.tree_iteration,
        learning_rate=parts.learning_rate,
        tree_weight=np.ones(len(parts.trees)) if parts.tree_weight is None else parts.tree_weight,
        base_margin=parts.base_margin,
        feature_names=tuple(names),
        named=parts.named,
        reg_lambda=parts.reg_lambda,
        objective=obj.name,
        objective_params=obj.params,
        decision_rule=b.decision_rule,
        float32_sum=b.float32_sum,
        source=b.source,
        source_version=parts.source_version,
        categories=parts.categories,
        params=parts.params,
        inexact=tuple(parts.inexact),
        node_weight=b.node_weight,
        reverse_levels=parts.reverse_levels,
        l2_scaled_by_mean_weight=b.l2_scaled_by_mean_weight,
        linear_leaves=parts.linear_leaves,
        booster_value=booster_value,
        booster_base=None if booster_value is None else parts.booster_base,
        input_map=input_map,
        **gradient_fields(b.kernel_objective, obj.name, obj.params, obj.n_outputs),
    )
    return Conversion(ens, _messages(parts))


def emit(conversion: Conversion) -> TreeEnsemble:
    """Give a conversion's warnings (attributed to the first caller outside treeinner, the
    user's line) and return its ensemble. A conversion served from the cache warns again, as a
    new one would."""
    if conversion.warnings:
        level = _calls.user_stacklevel()
        for msg in conversion.warnings:
            warnings.warn(msg, UserWarning, stacklevel=level)
    return conversion.ensemble
