"""The conversion cache: a booster object converted twice, unchanged, is parsed once.

An entry is keyed on the booster's own serialization, hashed (``Export.fingerprint``: blake2b
of the bytes the adapter parses and of everything else the conversion reads from the object),
the object's type, and the ``learning_rate`` and ``reg_lambda`` arguments. A booster trained
further or changed in any way serializes differently, so its next conversion misses: the cache
cannot serve a stale ensemble. The serialization is what a miss parses, so a miss costs no
extra serialization. A few entries (least recently used dropped first) bound the memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

#: Ensembles kept (each is a few MB for a 500-tree model of depth 6).
MAXSIZE = 8


class LRUCache:
    """A small thread-safe least-recently-used mapping."""

    def __init__(self, maxsize: int = MAXSIZE) -> None:
        """An empty cache of at most ``maxsize`` entries."""
        self.maxsize = int(maxsize)
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any:
        """The value stored under ``key`` (now the most recently used), or None."""
        with self._lock:
            if key not in self._data:
                self.misses += 1
                return None
            self.hits += 1
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key``, dropping the least recently used beyond ``maxsize``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        """Number of entries."""
        return len(self._data)


def key_of(model: Any, fingerprint: bytes, given: tuple) -> tuple:
    """The cache key of converting ``model`` (whose ``Export.fingerprint()`` is given) with
    the caller's ``Overrides``."""
    return (type(model), fingerprint, *(_number(v) for v in given))


def _number(v: Any) -> Any:
    """An override argument as the conversion reads it: None or a float (anything else gets a
    key of its own, and the conversion reports it)."""
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return object()
