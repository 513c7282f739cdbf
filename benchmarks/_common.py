"""Small helpers shared by the benchmark scripts (``benchmarks/`` is on ``sys.path`` when a
script runs, so they import this module by name)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version(dist: str) -> str | None:
    """The installed version of the distribution ``dist``, or None if it is not installed."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return None
