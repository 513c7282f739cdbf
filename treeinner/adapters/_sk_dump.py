"""The in-memory dump of a fitted scikit-learn gradient boosting estimator: every array and
setting the conversion reads, written with ``numpy.savez`` (no pickle; the settings as one
JSON document), so that the bytes key the conversion cache and ``from_export`` reads nothing
from the object itself."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from .._errors import ModelFormatError

_META = "__meta__"


def write(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """``meta`` (JSON-serializable) and named arrays as the bytes of an ``.npz`` archive."""
    buf = io.BytesIO()
    blob = np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    members: dict[str, Any] = {_META: blob}
    members.update((k, np.ascontiguousarray(v)) for k, v in arrays.items())
    np.savez(buf, **members)
    return buf.getvalue()


def read(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The settings and arrays ``write`` stored (never unpickling)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop(_META).tobytes().decode("utf-8"))
    except (ValueError, KeyError, OSError) as e:
        raise ModelFormatError(f"Corrupt scikit-learn model dump: {e}") from e
    return meta, arrays


def feature_names(est: Any, n_features: int) -> tuple[list[str], bool]:
    """The estimator's ``feature_names_in_`` (DataFrame columns) and True, else generated
    ``f0, f1, ...`` and False."""
    names = getattr(est, "feature_names_in_", None)
    if names is not None and len(names) == n_features:
        return [str(v) for v in names], True
    return [f"f{i}" for i in range(n_features)], False


def plain(v: Any) -> Any:
    """A NumPy scalar as the Python scalar JSON stores."""
    return v.item() if isinstance(v, np.generic) else v
