"""Adapters: turn each booster's own model (object or file) into a TreeEnsemble.

Every booster module (``xgboost``, ``lightgbm``, ``catboost``, ``sklearn``) has the same
interface, and ``from_model`` and ``load`` dispatch through the table ``ADAPTERS`` of them:

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
import re
import sys
import threading
from typing import Any

import numpy as np

from .._errors import InputTypeError, ModelFormatError
from ..ensemble import TreeEnsemble
from . import _cache, catboost, lightgbm, sklearn, xgboost
from ._common import emit, library_of
from ._estimators import training_estimator
from ._records import Overrides

__all__ = ["ADAPTERS", "clear_cache", "from_model", "load", "training_estimator"]

#: The booster modules, in the order ``load`` tries them on a decoded document.
ADAPTERS = (xgboost, catboost, lightgbm, sklearn)
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
        ``CatBoost``, ``CatBoostRegressor``, ``CatBoostClassifier``; scikit-learn's
        ``HistGradientBoostingRegressor``/``Classifier`` and
        ``GradientBoostingRegressor``/``Classifier``; treeinner's own
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
            "XGBoost, LightGBM or CatBoost model (Booster or scikit-learn wrapper), a "
            "scikit-learn (Hist)GradientBoosting estimator, or a TreeEnsemble."
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
            return _json_loads(path, data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelFormatError(
                f"{path!r} is not valid JSON (truncated or corrupt?): {e}"
            ) from e
    from ._ubjson import loads

    try:
        return loads(data)
    except ValueError as e:
        raise ModelFormatError(f"{path!r} is not valid UBJSON (truncated or corrupt?): {e}") from e


#: the deepest JSON nesting ``load`` reads (a LightGBM dump nests one level per tree level)
MAX_JSON_DEPTH = 100_000


def _json_loads(path: str, text: str) -> Any:
    """``json.loads``; a document nested deeper than Python's recursion limit allows (a valid
    LightGBM dump of a deep tree) is decoded in a thread with a stack and a recursion limit
    large enough for its depth (both restored), up to ``MAX_JSON_DEPTH`` levels."""
    try:
        return json.loads(text)
    except RecursionError:
        pass
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', "", text).encode("utf-8")
    b = np.frombuffer(no_strings, dtype=np.uint8)
    depth = int(np.cumsum(np.isin(b, (91, 123)).astype(np.int64) - np.isin(b, (93, 125))).max())
    remedy = "save the model in the booster's own format instead (LightGBM: the model text file)"
    if depth > MAX_JSON_DEPTH:
        raise ModelFormatError(
            f"{path!r} nests JSON {depth} levels deep, more than the {MAX_JSON_DEPTH} treeinner "
            f"reads; {remedy}."
        )
    out: dict[str, Any] = {}

    def decode() -> None:
        """Decode ``text`` into ``out`` (its error, if any, too)."""
        try:
            out["doc"] = json.loads(text)
        except (RecursionError, ValueError) as e:
            out["error"] = e

    limit, stack = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(max(limit, 2 * depth + 1_000))
    try:
        threading.stack_size(32 * 2**20 + 2048 * depth)
        try:
            worker = threading.Thread(target=decode, name="treeinner-json")
            worker.start()
        finally:
            threading.stack_size(stack)
        worker.join()
    except (ValueError, RuntimeError) as e:  # no thread with that stack on this platform
        out["error"] = RecursionError(str(e))
    finally:
        sys.setrecursionlimit(limit)
    if isinstance(out.get("error"), RecursionError):
        raise ModelFormatError(
            f"{path!r} nests JSON {depth} levels deep, more than this Python's JSON decoder "
            f"allows; {remedy}."
        )
    if "error" in out:
        raise out["error"]
    _check_deep_links(path, out["doc"])
    return out["doc"]


#: how deep a JSON value may nest below its nearest tree-node link (``left_child`` or
#: ``right_child``, the only nesting that grows with a tree's depth)
_MAX_LOCAL_DEPTH = 64


def _check_deep_links(path: str, doc: Any) -> None:
    """A document decoded past the recursion limit may nest deeply only through the child
    links of a tree's nodes (a LightGBM dump): any other deep value would overflow the stack
    of whatever reads it next (a message's repr, a copy), so it is refused (iteratively)."""
    stack: list[tuple[Any, int, str]] = [(doc, 0, "")]
    while stack:
        obj, local, where = stack.pop()
        if local > _MAX_LOCAL_DEPTH:
            raise ModelFormatError(
                f"{path!r} nests JSON more than {_MAX_LOCAL_DEPTH} levels deep at {where or '/'} "
                "outside a tree's child links: corrupt."
            )
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in items:
            if isinstance(value, (dict, list)):
                child = (
                    0
                    if key in ("left_child", "right_child") and isinstance(value, dict)
                    else local + 1
                )
                stack.append((value, child, f"{where}/{key}" if len(where) < 200 else where))
