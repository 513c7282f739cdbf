"""treeinner: debiased feature importance for already-trained gradient boosted trees."""

from ._errors import (
    InputError,
    InputTypeError,
    ModelFormatError,
    TreeinnerError,
    UnsupportedModelError,
)
from ._gain import total_gain
from ._inner import forest_inner, tree_inner
from ._input import FeatureNamesWarning
from ._methods import METHODS, OPTIONAL_METHODS
from ._significance import significance
from .adapters import from_model, load
from .attribution import Attribution, node_values, predecomp, saabas
from .ensemble import TreeEnsemble
from .importance import importance
from .interactions import Interactions, tree_inner_interactions, tree_shap_interactions
from .interventional import tree_shap_interventional
from .objectives import SoftLabels
from .selection import select_features
from .treeshap import tree_shap
from .unbiased import unbiased_gain

__all__ = [
    "METHODS",
    "OPTIONAL_METHODS",
    "Attribution",
    "FeatureNamesWarning",
    "InputError",
    "InputTypeError",
    "Interactions",
    "ModelFormatError",
    "SoftLabels",
    "TreeEnsemble",
    "TreeInnerSelector",
    "TreeinnerError",
    "UnsupportedModelError",
    "forest_inner",
    "from_model",
    "importance",
    "load",
    "node_values",
    "predecomp",
    "saabas",
    "select_features",
    "significance",
    "total_gain",
    "tree_inner",
    "tree_inner_interactions",
    "tree_shap",
    "tree_shap_interactions",
    "tree_shap_interventional",
    "unbiased_gain",
]


def _version() -> str:
    """The installed distribution's version (``pyproject.toml`` holds the one copy)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("treeinner")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        return "0+unknown"


__version__ = _version()


def __getattr__(name: str):
    # imported on first use: the native booster and the selector load scikit-learn, the plots
    # matplotlib (lazily, inside each function)
    import importlib

    if name in ("booster", "plot"):
        return importlib.import_module(f".{name}", __name__)
    if name == "TreeInnerSelector":
        return importlib.import_module("._selector", __name__).TreeInnerSelector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
