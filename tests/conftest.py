"""Fixtures shared by the test modules: one quiet conversion and the shared random models.

The same helpers are plain functions in ``tests._helpers`` for module-level code (a test
module's own builders), re-exported here.
"""

from __future__ import annotations

import pytest

from tests._helpers import lgb_case, quiet, quiet_ensemble, xgb_case

__all__ = ["lgb_case", "quiet", "quiet_ensemble", "xgb_case"]


@pytest.fixture(name="quiet_ensemble", scope="session")
def _quiet_ensemble():
    """``treeinner.from_model`` without its warnings (``tests._helpers.quiet_ensemble``)."""
    return quiet_ensemble


@pytest.fixture(name="xgb_case", scope="session")
def _xgb_case():
    """``make_case(seed)`` of ``tests._xgb_cases``, each case trained once per test process."""
    return xgb_case


@pytest.fixture(name="lgb_case", scope="session")
def _lgb_case():
    """``make_case(seed, objective=...)`` of ``tests._lgb_cases``, trained once per process."""
    return lgb_case
