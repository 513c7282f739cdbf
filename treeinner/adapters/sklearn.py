"""scikit-learn's gradient boosting estimators: ``HistGradientBoostingRegressor`` and
``HistGradientBoostingClassifier`` (``_sk_hgb``), ``GradientBoostingRegressor`` and
``GradientBoostingClassifier`` (``_sk_gb``).

These are in-memory estimators only: scikit-learn has no model file format but pickle, and
treeinner never unpickles, so ``load`` reads no scikit-learn file. ``export`` reads the
fitted trees into a NumPy archive written without pickle (``_sk_dump``), whose bytes key the
conversion cache; ``from_export`` converts it.
"""

from __future__ import annotations

from typing import Any

from .._errors import InputTypeError, ModelFormatError
from ..ensemble import TreeEnsemble
from . import _sk_dump, _sk_gb, _sk_hgb
from ._common import emit, library_of
from ._records import Conversion, Export, Overrides

__all__ = ["export", "from_booster", "from_document", "from_export", "from_file",
           "matches", "matches_document", "sniff_file"]  # fmt: skip

#: the estimators' base classes, by the module converting them
_KINDS = {"BaseHistGradientBoosting": _sk_hgb, "BaseGradientBoosting": _sk_gb}
_CONVERTERS = {"hgb": _sk_hgb, "gb": _sk_gb}


def _kind(obj: Any) -> Any:
    """The module converting ``obj`` (by the names of its base classes), or None."""
    if library_of(obj) != "sklearn":
        return None
    names = {c.__name__ for c in type(obj).__mro__}
    return next((m for base, m in _KINDS.items() if base in names), None)


def matches(obj: Any) -> bool:
    """Whether ``obj`` is one of scikit-learn's gradient boosting estimators."""
    return _kind(obj) is not None


def export(obj: Any) -> Export:
    """The fitted trees and settings of a scikit-learn gradient boosting estimator, as the
    bytes of a NumPy archive (no pickle)."""
    module = _kind(obj)
    if module is None:
        raise InputTypeError(
            f"{type(obj).__name__} is not a scikit-learn gradient boosting estimator "
            "(HistGradientBoosting* or GradientBoosting*)."
        )
    return Export(module.dump(obj))


def from_export(exported: Export, given: Overrides) -> Conversion:
    """Convert what ``export`` serialized (warnings returned, not given)."""
    meta, _ = _sk_dump.read(exported.data)
    module = _CONVERTERS.get(str(meta.get("kind")))
    if module is None:
        raise ModelFormatError("Corrupt scikit-learn model dump: unknown estimator kind.")
    return module.convert(exported.data, given)


def from_booster(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """A fitted scikit-learn gradient boosting estimator as a TreeEnsemble (not cached)."""
    return emit(from_export(export(model), Overrides(learning_rate, reg_lambda)))


def sniff_file(head: bytes) -> bool:
    """Never: scikit-learn models have no file format but pickle, which is never read."""
    return False


def from_file(path: str, data: bytes, given: Overrides) -> Conversion:
    """Refuse: there is no scikit-learn model file treeinner reads."""
    raise ModelFormatError(
        f"{path!r}: scikit-learn models are converted from the fitted estimator in memory "
        "(treeinner.from_model(est)); their only file format is pickle, which is never read."
    )


def matches_document(doc: Any) -> bool:
    """Never: scikit-learn writes no JSON model document."""
    return False


def from_document(doc: Any, given: Overrides) -> Conversion:
    """Refuse: there is no scikit-learn JSON model document."""
    raise ModelFormatError("scikit-learn models have no JSON document treeinner reads.")
