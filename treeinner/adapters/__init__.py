"""Adapters: turn each booster's own model (object or file) into a TreeEnsemble.

Every booster module (``xgboost``, ``lightgbm``, ``catboost``) has the same interface, and
``from_model`` and ``load`` dispatch through the table ``ADAPTERS`` of them:

* booster objects: ``matches(obj)`` (by the type's package, without importing any booster
  library), ``export(obj) -> Export`` (the booster's own serialization, and anything else the
  conversion reads from the object), ``from_export(exported, given) -> Conversion`` (parse and
  assemble; ``given``: the caller's ``Overrides``) and ``from_booster(obj, *, learning_rate,
  reg_lambda) -> TreeEnsemble`` (both, uncached);
* files: ``sniff_file(head)`` and ``from_file(path, data, given)`` for the booster's own
  non-JSON formats, ``matches_document(doc)`` and ``from_document(doc, given)`` for a decoded
  JSON or UBJSON document.

A ``Conversion`` is the ensemble with the warnings its conversion gives; ``emit`` gives them.
``from_model`` caches conversions, keyed on the export's fingerprint (see ``_cache``): a
booster converted again unchanged is not parsed again. ``load`` never unpickles.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .._errors import InputTypeError, ModelFormatError
from ..ensemble import TreeEnsemble
from . import _cache, catboost, lightgbm, xgboost
from ._common import emit, library_of
from ._records import Overrides

__all__ = ["ADAPTERS", "clear_cache", "from_model", "load"]

#: The booster modules, in the order ``load`` tries them on a decoded document.
ADAPTERS = (xgboost, catboost, lightgbm)
_CACHE = _cache.LRUCache(_cache.MAXSIZE)


def clear_cache() -> None:
    """Forget every cached conversion (``from_model`` on booster objects)."""
    _CACHE.clear()


def from_model(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Convert a fitted booster into a ``treeinner.TreeEnsemble``.

    Converting the same unchanged booster again returns the same ensemble without parsing it
    again; a booster trained further or changed in any way is converted anew.

    Parameters
    ----------
    model : TreeEnsemble or a fitted booster
        ``xgboost.Booster``, ``XGBRegressor``, ``XGBClassifier``, ``XGBRanker``;
        ``lightgbm.Booster``, ``LGBMRegressor``, ``LGBMClassifier``, ``LGBMRanker``;
        ``CatBoost``, ``CatBoostRegressor``, ``CatBoostClassifier``; treeinner's own
        ``GBMRegressor``, ``GBMClassifier`` (their ``ensemble_``). A TreeEnsemble is returned
        as it is.
    learning_rate : float, optional
        The learning rate the model was trained with; by default read from the booster's
        configuration or recovered from the trees' statistics.
    reg_lambda : float, optional
        The L2 penalty on leaf values; by default read or recovered like ``learning_rate``.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    TypeError
        If the object is not a supported model.
    NotImplementedError
        If the model uses an option treeinner does not support (named in the message).
    """
    if isinstance(model, TreeEnsemble):
        return _override(model, learning_rate, reg_lambda)
    if library_of(model) == "treeinner" and hasattr(model, "_treeinner_ensemble"):
        return _override(model._treeinner_ensemble(), learning_rate, reg_lambda)
    adapter = next((a for a in ADAPTERS if a.matches(model)), None)
    if adapter is None:
        raise InputTypeError(
            f"Cannot explain a {type(model).__module__}.{type(model).__name__}: expected an "
            "XGBoost, LightGBM or CatBoost model (Booster or scikit-learn wrapper), or a "
            "TreeEnsemble."
        )
    exported = adapter.export(model)
    given = Overrides(learning_rate, reg_lambda)
    key = _cache.key_of(model, exported.fingerprint(), given)
    conversion = _CACHE.get(key)
    if conversion is None:
        conversion = adapter.from_export(exported, given)
        _CACHE.put(key, conversion)
    return emit(conversion)


def _override(ens: TreeEnsemble, learning_rate: Any, reg_lambda: Any) -> TreeEnsemble:
    """A TreeEnsemble with the given learning rate and lambda (itself when neither is given)."""
    changes: dict[str, Any] = {}
    if learning_rate is not None:
        changes["learning_rate"] = [float(learning_rate)] * ens.n_trees
    if reg_lambda is not None:
        changes["reg_lambda"] = float(reg_lambda)
    return ens.replace(**changes) if changes else ens


def load(
    path: str | os.PathLike,
    *,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
) -> TreeEnsemble:
    """Read a model file: a saved TreeEnsemble (``.npz``), an XGBoost ``.json``/``.ubj`` model,
    a LightGBM model text file or ``dump_model()`` JSON, or a CatBoost ``.json`` or ``.cbm``
    model (the latter read through catboost itself).

    The file type is recognised from its content, not its name. Nothing is ever unpickled.

    Parameters
    ----------
    path : str or path-like
        The file to read.
    learning_rate, reg_lambda : float, optional
        As in ``from_model``: by default recovered from the trees' statistics, with a
        warning when that is impossible.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        If the file is corrupt, truncated, or not a model treeinner reads.
    """
    path = os.fspath(path)
    with open(path, "rb") as fh:
        data = fh.read()
    head = data[:64]
    if head.startswith(b"PK\x03\x04"):
        return _override(TreeEnsemble.load_npz(path), learning_rate, reg_lambda)
    if head[:1] == b"\x80":
        raise ModelFormatError(
            f"{path!r} is a Python pickle; treeinner never unpickles files. Save the model in "
            "the booster's own format (e.g. XGBoost's save_model('model.json'))."
        )
    given = Overrides(learning_rate, reg_lambda)
    adapter = next((a for a in ADAPTERS if a.sniff_file(head)), None)
    if adapter is not None:
        return emit(adapter.from_file(path, data, given))
    doc = _document(path, data, head)
    adapter = next((a for a in ADAPTERS if a.matches_document(doc)), None)
    if adapter is None:
        raise ModelFormatError(f"{path!r} is JSON but not a model treeinner can read.")
    return emit(adapter.from_document(doc, given))


def _document(path: str, data: bytes, head: bytes) -> Any:
    """A JSON or UBJSON file decoded (ValueError for anything else, or a corrupt one)."""
    stripped = head.lstrip()
    if not stripped.startswith(b"{"):
        raise ModelFormatError(f"{path!r} is not a model file treeinner can read.")
    if stripped[1:].lstrip()[:1] in (b'"', b"}"):
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ModelFormatError(
                f"{path!r} is not valid JSON (truncated or corrupt?): {e}"
            ) from e
    from ._ubjson import loads

    try:
        return loads(data)
    except ValueError as e:
        raise ModelFormatError(f"{path!r} is not valid UBJSON (truncated or corrupt?): {e}") from e
