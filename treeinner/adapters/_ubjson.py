"""A small, strict reader of Universal Binary JSON (the format of XGBoost ``.ubj`` models).

Typed numeric arrays (``[$d#L...``) come back as NumPy arrays read in one step. Truncated or
malformed input of any kind raises ``ModelFormatError`` (a ``ValueError``): counts are checked
against the bytes left before anything is allocated, nesting is bounded, and the time taken is
linear in the input.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .._errors import ModelFormatError

_INT = {b"i": (">i1", 1), b"U": (">u1", 1), b"I": (">i2", 2), b"l": (">i4", 4), b"L": (">i8", 8)}
_NUM = {**_INT, b"d": (">f4", 4), b"D": (">f8", 8)}
_MAX_DEPTH = 64


class _Reader:
    def __init__(self, buf: bytes) -> None:
        """A reader at the start of ``buf``."""
        self.buf = buf
        self.pos = 0
        self.short_length: int | None = None  # where a string length is not an int64

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (ValueError when the data ends first)."""
        if n < 0 or self.pos + n > len(self.buf):
            raise ModelFormatError("truncated UBJSON data")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def marker(self) -> bytes:
        """The next type marker, no-ops skipped."""
        m = self.take(1)
        while m == b"N":  # no-op
            m = self.take(1)
        return m

    def number(self, m: bytes) -> Any:
        """A scalar of numeric type ``m``."""
        dt, size = _NUM[m]
        return np.frombuffer(self.take(size), dtype=dt)[0].item()

    def length(self) -> int:
        """A non-negative length (an integer of any integer type)."""
        m = self.marker()
        if m not in _INT:
            raise ModelFormatError(f"bad UBJSON length marker {m!r}")
        n = self.number(m)
        if n < 0:
            raise ModelFormatError("negative UBJSON length")
        return n

    def string(self) -> str:
        """A length-prefixed UTF-8 string (an object key too). Its length is an int64 (``L``):
        XGBoost writes no other and reads no other."""
        if self.buf[self.pos : self.pos + 1] != b"L" and self.short_length is None:
            self.short_length = self.pos  # refused once the whole value is read
        try:
            return self.take(self.length()).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ModelFormatError("invalid UTF-8 in UBJSON string") from e

    def value(self, m: bytes, depth: int) -> Any:
        """A value of type ``m`` (containers nest at most ``_MAX_DEPTH`` deep)."""
        if depth > _MAX_DEPTH:
            raise ModelFormatError("UBJSON nested too deeply")
        if m in _NUM:
            return self.number(m)
        if m == b"S":
            return self.string()
        if m == b"C":
            return self.take(1).decode("latin-1")
        if m == b"H":  # a high-precision number, as text
            text = self.string()
            try:
                return float(text)
            except ValueError as e:
                raise ModelFormatError(f"bad UBJSON high-precision number {text[:40]!r}") from e
        if m == b"Z":
            return None
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"[":
            return self.array(depth)
        if m == b"{":
            return self.obj(depth)
        raise ModelFormatError(f"unknown UBJSON marker {m!r} at byte {self.pos - 1}")

    def _header(self) -> tuple[bytes | None, int | None]:
        """A container's optional ``$type`` and ``#count``."""
        typ = count = None
        if self.buf[self.pos : self.pos + 1] == b"$":
            self.pos += 1
            typ = self.take(1)
            if self.take(1) != b"#":
                raise ModelFormatError("UBJSON typed container without a count")
            count = self.length()
        elif self.buf[self.pos : self.pos + 1] == b"#":
            self.pos += 1
            count = self.length()
        return typ, count

    def _check_count(self, typ: bytes | None, count: int | None) -> None:
        """Refuse counts that cannot fit the remaining data."""
        if count is None:
            return
        if typ in (b"Z", b"T", b"F", b"N"):
            raise ModelFormatError("UBJSON typed container of a zero-size type")
        # every element takes at least one byte: a larger count is a corrupt header
        if count > len(self.buf) - self.pos:
            raise ModelFormatError("UBJSON container count exceeds the data")

    def array(self, depth: int) -> Any:
        """An array (a typed numeric one as a NumPy array)."""
        typ, count = self._header()
        self._check_count(typ, count)
        if typ is not None and typ in _NUM:
            assert count is not None  # a typed array has a count (_check_count)
            dt, size = _NUM[typ]
            raw = self.take(size * count)
            return np.frombuffer(raw, dtype=dt).astype(dt[1:])
        out = []
        if count is not None:
            for _ in range(count):
                out.append(self.value(typ if typ is not None else self.marker(), depth + 1))
            return out
        while True:
            m = self.marker()
            if m == b"]":
                return out
            out.append(self.value(m, depth + 1))

    def obj(self, depth: int) -> dict:
        """An object as a dict."""
        typ, count = self._header()
        self._check_count(typ, count)
        out = {}
        if count is not None:
            for _ in range(count):
                k = self.string()
                out[k] = self.value(typ if typ is not None else self.marker(), depth + 1)
            return out
        while True:
            if self.buf[self.pos : self.pos + 1] == b"}":
                self.pos += 1
                return out
            k = self.string()
            out[k] = self.value(self.marker(), depth + 1)


def loads(buf: bytes) -> Any:
    """Decode one UBJSON value from ``buf``.

    Parameters
    ----------
    buf : bytes

    Returns
    -------
    object
        dicts, lists, scalars and NumPy arrays (for typed numeric arrays).
    """
    r = _Reader(bytes(buf))
    try:
        out = r.value(r.marker(), 0)
    except ModelFormatError:
        raise
    except (struct.error, KeyError, IndexError, ValueError, OverflowError, RecursionError) as e:
        raise ModelFormatError(f"corrupt UBJSON data: {type(e).__name__}: {e}") from e
    if r.short_length is not None:
        raise ModelFormatError(
            f"UBJSON string length at byte {r.short_length} is not an int64 ('L'), the only "
            "length XGBoost reads"
        )
    return out
