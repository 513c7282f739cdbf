"""The tree format's constants and node structures, shared by the kernels, adapters and ensemble.

Pure NumPy: this module imports nothing from treeinner, so every layer can import it.

* ``split_type`` codes (``NUMERIC``, ``CAT_SET_RIGHT``, ``CAT_SET_LEFT``) and ``missing_type``
  codes (``MISSING_NAN``, ``MISSING_ZERO``, ``MISSING_NONE``) of a node.
* ``DECISION_RULES``: how each booster compares a value with a numeric threshold.
* Kernel objective codes (``SQUARED`` ... ``OVA``) and the slots of their float64 parameter
  vector (``P_HESS_SCALE`` ... ``P_SIGMOID``, ``N_PARAMS`` long); ``default_grad_params``.
* ``NODE_WEIGHTS``: the node weights TreeSHAP can split by.
* ``Nodes`` and ``Layout``: the named tuples of arrays the Numba kernels take (Numba reads
  their fields by name, like pynndescent's ``FlatTree``); ``LinearLeaves``: the linear leaf
  models of LightGBM linear trees.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "CAT_SET_LEFT",
    "CAT_SET_RIGHT",
    "DECISION_RULES",
    "GAMMA",
    "HINGE",
    "LOGISTIC",
    "MISSING_NAN",
    "MISSING_NONE",
    "MISSING_ZERO",
    "NODE_WEIGHTS",
    "NUMERIC",
    "N_OBJECTIVES",
    "N_PARAMS",
    "OBJECTIVE_NAMES",
    "OVA",
    "POISSON",
    "PSEUDO_HUBER",
    "P_HESS_SCALE",
    "P_HUBER",
    "P_MAX_DELTA",
    "P_MIN_HESS",
    "P_POS_WEIGHT",
    "P_SIGMOID",
    "P_TWEEDIE",
    "SOFTMAX",
    "SQUARED",
    "SQUARED_LOG",
    "TWEEDIE",
    "Layout",
    "LinearLeaves",
    "Nodes",
    "default_grad_params",
]

# ---------------------------------------------------------------------- node codes
# split_type
NUMERIC = 0
CAT_SET_RIGHT = 1  # categorical: members of the node's set go right (XGBoost)
CAT_SET_LEFT = 2  # categorical: members of the node's set go left (LightGBM)

# missing_type
MISSING_NAN = 0  # NaN takes the default direction
MISSING_ZERO = 1  # NaN and |x| <= 1e-35f take the default direction (LightGBM "Zero")
MISSING_NONE = 2  # NaN is read as 0.0 (LightGBM "None")

#: How each source booster compares a value with a numeric threshold.
DECISION_RULES = {
    "float32 <": "go left iff float32(x) < threshold (XGBoost)",
    "float64 <=": "go left iff x <= threshold in float64 (LightGBM)",
    "float32 <=": "go left iff float32(x) <= border (CatBoost: right iff float32(x) > border)",
}

#: The node weights path-dependent TreeSHAP can split by: hessian sums or training row counts.
NODE_WEIGHTS = ("cover", "count")

# ---------------------------------------------------------------------- kernel objectives
SQUARED = 0
LOGISTIC = 1
SOFTMAX = 2
POISSON = 3
GAMMA = 4
TWEEDIE = 5
PSEUDO_HUBER = 6
SQUARED_LOG = 7
HINGE = 8
OVA = 9  # one-vs-all: an independent logistic per class (LightGBM multiclassova)
N_OBJECTIVES = 10

#: A readable name of every kernel objective code.
OBJECTIVE_NAMES = {
    SQUARED: "squared error",
    LOGISTIC: "logistic",
    SOFTMAX: "softmax",
    POISSON: "poisson",
    GAMMA: "gamma",
    TWEEDIE: "tweedie",
    PSEUDO_HUBER: "pseudo-Huber",
    SQUARED_LOG: "squared log error",
    HINGE: "hinge",
    OVA: "one-vs-all logistic",
}

# slots of the parameter vector
P_HESS_SCALE = 0  # multiplies the hessian (softmax: XGBoost 2, LightGBM K / (K - 1))
P_MAX_DELTA = 1  # Poisson: hessian exp(F + max_delta_step)
P_TWEEDIE = 2  # tweedie variance power
P_HUBER = 3  # pseudo-Huber slope
P_POS_WEIGHT = 4  # logistic: weight of positive rows (scale_pos_weight)
P_MIN_HESS = 5  # floor of the hessian
P_SIGMOID = 6  # logistic and one-vs-all: p = sigmoid(sigmoid * F) (LightGBM's "sigmoid")
N_PARAMS = 7


def default_grad_params(scale_pos_weight: float = 1.0) -> np.ndarray:
    """The neutral parameter vector: hessian scale 1, no floor, sigmoid 1.

    Parameters
    ----------
    scale_pos_weight : float
        Weight of positive labels of a logistic objective.

    Returns
    -------
    ndarray of float64, shape (N_PARAMS,)
    """
    prm = np.zeros(N_PARAMS)
    prm[P_HESS_SCALE] = 1.0
    prm[P_POS_WEIGHT] = float(scale_pos_weight)
    prm[P_MIN_HESS] = 0.0
    prm[P_SIGMOID] = 1.0
    return prm


# ---------------------------------------------------------------------- structures
class Nodes(NamedTuple):
    """The node arrays of an ensemble as the kernels take them (``TreeEnsemble._nodes()``).

    Child indices are global (into the concatenated arrays of all trees), -1 at a leaf;
    ``bound`` is the float64 threshold of the unified rule "go left iff x <= bound" (see
    ``treeinner._thresholds``). The other fields are the ``TreeEnsemble`` arrays of the same
    names.
    """

    left: np.ndarray  # int32
    right: np.ndarray  # int32
    feature: np.ndarray  # int32
    bound: np.ndarray  # float64
    split_type: np.ndarray  # int8
    default_left: np.ndarray  # uint8
    missing_type: np.ndarray  # int8
    cat_offsets: np.ndarray  # int64
    cat_words: np.ndarray  # uint32
    value: np.ndarray  # float64
    leaf_id: np.ndarray  # int32
    tree_offsets: np.ndarray  # int64
    tree_group: np.ndarray  # int32


class Layout(NamedTuple):
    """The top levels of every tree as complete binary trees (``TreeEnsemble._layout``; built
    by ``kernels.routing.build_top_layout``, which documents the encoding).

    ``top_depth[t]`` levels of tree t are stored in heap order from ``top_off[t]`` in ``meta``
    (column, flags and node of each slot) and ``tbound`` (its bound); ``bottom`` maps the slots
    below the last level, from ``bot_off[t]``, to nodes; ``tree_flags`` marks trees with
    general (categorical or missing-zero) nodes in their top levels or deeper than them;
    ``used`` lists the features the model splits on (the columns of the routing buffer).
    All int64 except ``tbound`` (float64).
    """

    top_depth: np.ndarray
    top_off: np.ndarray
    bot_off: np.ndarray
    meta: np.ndarray
    tbound: np.ndarray
    bottom: np.ndarray
    tree_flags: np.ndarray
    used: np.ndarray


class LinearLeaves(NamedTuple):
    """The linear leaf models of LightGBM linear trees (``TreeEnsemble.linear_leaves``).

    Entry i is leaf ``leaf[i]`` (the booster's leaf number) of tree ``tree[i]``: a row reaching
    it adds ``delta[i]`` (the model's constant minus the leaf value) plus
    ``coeff[ptr[i]:ptr[i + 1]]`` times its features ``features[ptr[i]:ptr[i + 1]]``, unless
    one of those features is NaN (the leaf value then stands). Leaves with no entry are
    constant.
    """

    tree: np.ndarray  # int64, (m,)
    leaf: np.ndarray  # int64, (m,)
    delta: np.ndarray  # float64, (m,)
    ptr: np.ndarray  # int64, (m + 1,)
    features: np.ndarray  # int64, (ptr[-1],)
    coeff: np.ndarray  # float64, (ptr[-1],)
