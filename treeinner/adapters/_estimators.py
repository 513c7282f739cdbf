"""An unfitted scikit-learn estimator that trains the way a saved model was trained, from the
parameters its file stores (``treeinner select --strategy recursive`` refits it): LightGBM's
text model keeps every training parameter, CatBoost's model its training options; XGBoost's
model file keeps the objective and the number of rounds but not the tree parameters
(``max_depth``, ``learning_rate``, ...), which the caller must give."""

from __future__ import annotations

import inspect
from typing import Any

from .._errors import InputError, UnsupportedModelError
from ..ensemble import TreeEnsemble

__all__ = ["training_estimator"]

_CLASSIFY = {
    "xgboost": ("binary:", "multi:"),
    "lightgbm": ("binary", "multiclass", "multiclassova", "cross_entropy", "xentropy"),
    "catboost": ("Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll"),
}
#: LightGBM parameters of the run, not of the model (I/O, machines, devices, the data)
_LGB_RUN = {
    "num_iterations", "num_class", "header", "local_listen_port", "num_machines", "machines",
    "machine_list_filename", "time_out", "pre_partition", "gpu_platform_id", "gpu_device_id",
    "num_gpu", "gpu_use_dp", "data", "valid", "output_model", "input_model", "task",
    "saved_feature_importance_type", "precise_float_parser", "parser_config_file",
}  # fmt: skip


def _classifier(ens: TreeEnsemble) -> bool:
    """Whether the model's objective is a classifier's (its scikit-learn wrapper's kind)."""
    return ens.objective.startswith(_CLASSIFY.get(ens.source, ()))


def _xgboost(ens: TreeEnsemble, path: str, params: dict) -> Any:
    """XGBoost: the objective and the rounds from the model, the tree parameters from
    ``params`` (required)."""
    if not params:
        raise InputError(
            "An XGBoost model file keeps its objective and number of rounds but not the "
            "parameters its trees were grown with (max_depth, learning_rate, ...): give them "
            'as JSON, e.g. --params \'{"max_depth": 6, "learning_rate": 0.3}\' (the rest take '
            "XGBoost's defaults)."
        )
    import xgboost as xgb

    cls = xgb.XGBClassifier if _classifier(ens) else xgb.XGBRegressor
    base: dict[str, Any] = {"n_estimators": ens.n_iterations}
    if not _classifier(ens):
        base["objective"] = ens.objective
    return cls(**{**base, **params})


def _lightgbm(ens: TreeEnsemble, path: str, params: dict) -> Any:
    """LightGBM: every training parameter of the text model but the run's own."""
    import lightgbm as lgb

    try:
        stored = dict(lgb.Booster(model_file=path).params)
    except Exception as e:  # LightGBMError: a JSON dump, not the text model
        raise InputError(
            f"LightGBM could not read the training parameters of {path!r} ({e}); save the "
            "model as text (booster.save_model('model.txt'))."
        ) from e
    kept = {k: v for k, v in stored.items() if k not in _LGB_RUN}
    kept.setdefault("verbose", -1)
    cls = lgb.LGBMClassifier if _classifier(ens) else lgb.LGBMRegressor
    return cls(**{"n_estimators": ens.n_iterations, **kept, **params})


def _catboost(ens: TreeEnsemble, path: str, params: dict) -> Any:
    """CatBoost: the model's training options its estimator takes, and its categorical
    features."""
    import catboost as cb

    model = cb.CatBoost()
    try:
        model.load_model(path, format="json" if path.endswith(".json") else "cbm")
        stored = model.get_all_params()
    except Exception as e:  # CatBoostError
        raise InputError(f"CatBoost could not read the training options of {path!r}: {e}") from e
    cls = cb.CatBoostClassifier if _classifier(ens) else cb.CatBoostRegressor
    accepted = set(inspect.signature(cls.__init__).parameters)
    kept = {k: v for k, v in stored.items() if k in accepted and k != "class_names"}
    cats = list(model.get_cat_feature_indices())
    if cats:
        kept["cat_features"] = cats
    kept.update(verbose=False, allow_writing_files=False)
    return cls(**{**kept, **params})


def training_estimator(ens: TreeEnsemble, path: str, params: dict | None = None) -> Any:
    """An unfitted estimator of the booster that wrote ``path`` (converted to ``ens``), with
    the training parameters the file stores, updated by ``params``.

    Raises
    ------
    UnsupportedModelError
        For a model whose file stores no training parameters (scikit-learn's, saved by
        treeinner).
    InputError
        For an XGBoost model without ``params`` (its file keeps no tree parameters).
    """
    build = {"xgboost": _xgboost, "lightgbm": _lightgbm, "catboost": _catboost}.get(ens.source)
    if build is None:
        raise UnsupportedModelError(
            f"A {ens.source} model file keeps no training parameters to refit the model with; "
            "use treeinner.TreeInnerSelector(strategy='recursive') on the estimator in Python."
        )
    return build(ens, path, dict(params or {}))
