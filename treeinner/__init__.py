"""treeinner: debiased feature importance for already-trained gradient boosted trees."""

from .adapters import from_model, load
from .attribution import Attribution, node_values, predecomp, saabas
from .ensemble import TreeEnsemble
from .importance import forest_inner, importance, total_gain, tree_inner
from .treeshap import tree_shap
from .unbiased import unbiased_gain

__all__ = [
    "Attribution",
    "TreeEnsemble",
    "forest_inner",
    "from_model",
    "importance",
    "load",
    "node_values",
    "predecomp",
    "saabas",
    "total_gain",
    "tree_inner",
    "tree_shap",
    "unbiased_gain",
]
__version__ = "0.1.0.dev0"


def __getattr__(name: str):
    if name == "booster":  # the native booster, imported on first use (it loads scikit-learn)
        import importlib

        return importlib.import_module(".booster", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
