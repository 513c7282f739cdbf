"""treeinner: debiased feature importance for already-trained gradient boosted trees."""

from .adapters import from_model, load
from .ensemble import TreeEnsemble

__all__ = ["TreeEnsemble", "from_model", "load"]
__version__ = "0.1.0.dev0"
