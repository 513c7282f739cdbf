"""Turn each booster's comparison rule into one float64 rule: go left iff ``x <= bound``.

XGBoost routes left when ``float32(x) < t`` and CatBoost when ``float32(x) <= border``. Because
rounding a float64 to float32 is monotone, each of these is equivalent to ``x <= b`` for one
float64 ``b``: the largest float64 whose float32 rounding still satisfies the rule. Computing
``b`` once per node when the ensemble is built lets every kernel compare in float64 without
casting each input value, and stays bit-exact with the booster.
"""

from __future__ import annotations

import numpy as np

_F32_MAX = float(np.finfo(np.float32).max)
# Half an ulp above float32 max: float64 values from here on round to +inf in float32.
_F32_OVERFLOW = _F32_MAX + 2.0**103


def float32_le_bound(s: np.ndarray) -> np.ndarray:
    """Return ``b`` (float64) with ``x <= b`` iff ``float32(x) <= s``, for float32 values ``s``.

    Parameters
    ----------
    s : ndarray of float32
        Finite float32 thresholds (``-inf`` and ``+inf`` are handled as well).

    Returns
    -------
    ndarray of float64
    """
    s = np.asarray(s, dtype=np.float32)
    s64 = s.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        up = np.nextafter(s, np.float32(np.inf)).astype(np.float64)
        up = np.where(s64 == _F32_MAX, 2.0 * _F32_OVERFLOW - _F32_MAX, up)
        mid = 0.5 * (s64 + up)  # exact: 25 significant bits fit in a float64
    # A float64 exactly at the midpoint rounds to the float32 with an even mantissa.
    even = (s.view(np.uint32) & np.uint32(1)) == 0
    bound = np.where(even, mid, np.nextafter(mid, -np.inf))
    bound = np.where(s64 == -np.inf, -_F32_OVERFLOW, bound)
    bound = np.where(s64 == np.inf, np.inf, bound)
    return bound


def float32_lt_bound(t: np.ndarray) -> np.ndarray:
    """Return ``b`` (float64) with ``x <= b`` iff ``float32(x) < t``, for float32 values ``t``."""
    t = np.asarray(t, dtype=np.float32)
    with np.errstate(over="ignore"):
        below = np.nextafter(t, np.float32(-np.inf))
    return float32_le_bound(below)
