"""catboost adapter (not written yet): every entry point raises NotImplementedError."""

from __future__ import annotations

from typing import Any


def _missing(*_: Any, **__: Any) -> Any:
    raise NotImplementedError("catboost models are not supported yet.")


from_booster = from_model = from_string = from_dump = from_json = from_cbm = _missing
kernel_objective = _missing
