"""Adapters: turn each booster's own model (object or file) into a TreeEnsemble.

``from_model`` dispatches on the object's type without importing any booster library that the
object does not come from; ``load`` sniffs a file's content (never unpickling it).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..ensemble import TreeEnsemble

__all__ = ["from_model", "load"]


def _module_of(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def from_model(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Convert a fitted booster into a ``treeinner.TreeEnsemble``.

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
        if learning_rate is None and reg_lambda is None:
            return model
        changes: dict[str, Any] = {}
        if learning_rate is not None:
            changes["learning_rate"] = [float(learning_rate)] * model.n_trees
        if reg_lambda is not None:
            changes["reg_lambda"] = float(reg_lambda)
        return model.replace(**changes)
    mod = _module_of(model)
    if mod == "treeinner" and hasattr(model, "_treeinner_ensemble"):  # treeinner.booster
        return from_model(
            model._treeinner_ensemble(), learning_rate=learning_rate, reg_lambda=reg_lambda
        )
    if mod == "xgboost":
        from . import xgboost as xgb_adapter

        if not (hasattr(model, "save_raw") or hasattr(model, "get_booster")):
            raise TypeError(f"{type(model).__name__} is not an XGBoost booster or model.")
        if hasattr(model, "get_booster"):
            try:
                model.get_booster()
            except Exception as e:  # NotFittedError and the like
                raise ValueError(f"The {type(model).__name__} is not fitted: {e}") from e
        return xgb_adapter.from_booster(model, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if mod == "lightgbm":
        from . import lightgbm as lgb_adapter

        return lgb_adapter.from_booster(model, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if mod == "catboost":
        from . import catboost as cb_adapter

        return cb_adapter.from_model(model, learning_rate=learning_rate, reg_lambda=reg_lambda)
    raise TypeError(
        f"Cannot explain a {type(model).__module__}.{type(model).__name__}: expected an XGBoost, "
        "LightGBM or CatBoost model (Booster or scikit-learn wrapper), or a TreeEnsemble."
    )


def _sniff(head: bytes) -> str:
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if head[:1] in (b"\x80",) or head.startswith(b"\x80\x04") or head.startswith(b"\x80\x05"):
        return "pickle"
    if head.startswith(b"CBM1"):
        return "catboost"
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n"):
        return "lightgbm"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        rest = stripped[1:].lstrip()
        if rest[:1] in (b'"', b"}"):
            return "json"
        return "ubjson"
    if stripped.startswith(b"binf") or head[:4] == b"\x00\x00\x00?":
        return "xgboost-binary"
    return "unknown"


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
    kind = _sniff(data[:64])
    if kind == "npz":
        ens = TreeEnsemble.load_npz(path)
        return from_model(ens, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if kind == "pickle":
        raise ValueError(
            f"{path!r} is a Python pickle; treeinner never unpickles files. Save the model in "
            "the booster's own format (e.g. XGBoost's save_model('model.json'))."
        )
    if kind == "lightgbm":
        from . import lightgbm as lgb_adapter

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path!r} is not a valid LightGBM model file: {e}") from e
        return lgb_adapter.from_string(text, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if kind == "catboost":
        from . import catboost as cb_adapter

        return cb_adapter.from_cbm(path, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if kind == "xgboost-binary":
        raise ValueError(
            f"{path!r} is an XGBoost model in the deprecated binary format; load it with "
            "xgboost and save it as .json or .ubj."
        )
    if kind == "json":
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"{path!r} is not valid JSON (truncated or corrupt?): {e}") from e
    elif kind == "ubjson":
        from ._ubjson import loads

        try:
            doc = loads(data)
        except ValueError as e:
            raise ValueError(f"{path!r} is not valid UBJSON (truncated or corrupt?): {e}") from e
    else:
        raise ValueError(f"{path!r} is not a model file treeinner can read.")
    from . import xgboost as xgb_adapter

    if xgb_adapter.is_xgboost_model(doc):
        return xgb_adapter.from_dict(doc, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if isinstance(doc, dict) and ("oblivious_trees" in doc or "features_info" in doc):
        from . import catboost as cb_adapter

        return cb_adapter.from_json(doc, learning_rate=learning_rate, reg_lambda=reg_lambda)
    if isinstance(doc, dict) and "tree_info" in doc:
        from . import lightgbm as lgb_adapter

        return lgb_adapter.from_dump(doc, learning_rate=learning_rate, reg_lambda=reg_lambda)
    raise ValueError(f"{path!r} is JSON but not a model treeinner can read.")
