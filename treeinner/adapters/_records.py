"""The records of the adapter interface: what an adapter exports from a booster object
(``Export``), the caller's overrides (``Overrides``), what it parsed (``Tree``, ``Parts``, with its
booster's conventions ``Booster`` and the model's ``Objective``) and what a conversion gives
(``Conversion``). ``INTERFACE`` names the functions every booster module has."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from .._format import LinearLeaves
from ..ensemble import TreeEnsemble

#: The functions every booster module has (see ``treeinner.adapters``).
INTERFACE = (
    "matches",
    "export",
    "from_export",
    "from_booster",
    "sniff_file",
    "from_file",
    "matches_document",
    "from_document",
)
INEXACT = "Regularized node values (PreDecomp) will not be exact for this model"


class KernelObjective(Protocol):
    """``kernel_objective(name, params, n_outputs, prm) -> (code, prm)`` of an adapter.

    Parameters
    ----------
    name : str
        The objective in the booster's spelling (``TreeEnsemble.objective``).
    params : dict
        Its parameters (``TreeEnsemble.objective_params``).
    n_outputs : int
        Number of outputs.
    prm : ndarray of float64
        The parameter vector with defaults filled in (the ``P_*`` slots of
        ``treeinner._format``); a modified copy is returned.

    Returns
    -------
    (int, ndarray)
        The kernel objective code and its parameters in the booster's conventions.

    Raises
    ------
    NotImplementedError
        For an objective with no per-row gradient here (named in the message).
    """

    def __call__(
        self, name: str, params: dict, n_outputs: int, prm: np.ndarray
    ) -> tuple[int, np.ndarray]:
        """The kernel code and parameter vector of objective ``name``."""
        ...


class Export(NamedTuple):
    """A booster object serialized for conversion (what ``export(obj)`` of an adapter returns).

    ``data`` is the model as the booster serializes it, which the adapter parses; ``extra``
    everything else the conversion reads from the object (its configuration, or its identity
    when the ensemble keeps a reference to it), as bytes; ``model`` the object, for conversions
    that keep it. ``fingerprint()`` hashes both: equal fingerprints, equal conversions.
    """

    data: bytes
    extra: bytes = b""
    model: Any = None

    def fingerprint(self) -> bytes:
        """blake2b of ``data`` and ``extra`` (length-prefixed, so they cannot run together)."""
        h = hashlib.blake2b(digest_size=32)
        for part in (self.data, self.extra):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.digest()


class Overrides(NamedTuple):
    """The ``learning_rate`` and ``reg_lambda`` a caller gives (None: read from the model)."""

    learning_rate: float | None = None
    reg_lambda: float | None = None


class Conversion(NamedTuple):
    """A converted model: the ensemble and the warnings its conversion gives (see ``emit``)."""

    ensemble: TreeEnsemble
    warnings: tuple[str, ...] = ()


class Tree(NamedTuple):
    """One parsed tree in the ensemble's layout: per node, tree-local child indices (-1 at a
    leaf) and the ``TreeEnsemble`` fields of the same names; its categorical sets as the number
    of words of each node (``cat_sizes``) and the words, node after node (see ``cat_sets``).
    None for both: no categorical sets."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    split_type: np.ndarray
    default_left: np.ndarray
    missing_type: np.ndarray
    value: np.ndarray
    cover: np.ndarray
    count: np.ndarray  # type: ignore[assignment]  # the field shadows tuple.count
    gain: np.ndarray
    leaf_id: np.ndarray
    cat_sizes: np.ndarray | None = None
    cat_words: np.ndarray | None = None


class Booster(NamedTuple):
    """A booster's conventions, the same for all its models (the ``TreeEnsemble`` fields of
    the same names, its ``KernelObjective``, and the first words of the warning that lists why
    node values are inexact)."""

    source: str
    decision_rule: str
    float32_sum: bool
    node_weight: str
    kernel_objective: KernelObjective
    inexact_heading: str = INEXACT
    l2_scaled_by_mean_weight: bool = False


class Objective(NamedTuple):
    """A model's objective in its booster's spelling, its parameters and number of outputs."""

    name: str
    params: dict
    n_outputs: int


#: ``input_map(joined) -> (input_map, feature_names)``: an input map built from the joined node
#: arrays (``join_trees``), and the feature names with the columns it adds
InputMapFactory = Callable[[dict[str, np.ndarray]], tuple[Any, Sequence[str]]]


@dataclass
class Parts:
    """What an adapter parsed, in the ensemble's terms: the input of ``assemble``.

    The fields are the ``TreeEnsemble`` fields of the same names, except ``booster`` (the
    conventions), ``trees`` (the parsed trees), ``objective`` (which gives ``objective``,
    ``objective_params`` and, with the booster's ``KernelObjective``, the gradient fields),
    ``notes`` (warnings about values the adapter had to assume) and ``input_map`` (a factory,
    see ``InputMapFactory``).
    """

    booster: Booster
    trees: Sequence[Tree]
    tree_group: np.ndarray
    tree_iteration: np.ndarray
    learning_rate: np.ndarray
    base_margin: np.ndarray
    feature_names: Sequence[str]
    named: bool
    reg_lambda: float
    objective: Objective
    source_version: str
    tree_weight: np.ndarray | None = None
    categories: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    inexact: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reverse_levels: bool = False
    linear_leaves: LinearLeaves | None = None
    input_map: InputMapFactory | None = None
    #: the booster's own node values of the trees whose ``value`` moved an intercept out
    #: (tree index -> values), and the base margin it sums them from (see ``assemble``)
    booster_trees: dict[int, np.ndarray] = field(default_factory=dict)
    booster_base: np.ndarray | None = None
