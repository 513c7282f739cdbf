"""The library's own exception types.

Every error treeinner raises on purpose is a :class:`TreeinnerError`, and also the builtin
exception callers already catch (``ValueError``, ``TypeError`` or ``NotImplementedError``), so
``except ValueError`` keeps working and ``except treeinner.TreeinnerError`` tells a refused
model or a refused argument from a bug. Anything else escaping a public function is a bug.
"""

from __future__ import annotations

__all__ = [
    "InputError",
    "InputTypeError",
    "ModelFormatError",
    "TreeinnerError",
    "UnsupportedModelError",
]


class TreeinnerError(Exception):
    """Base class of every error treeinner raises on purpose."""


class ModelFormatError(TreeinnerError, ValueError):
    """A model (file, booster object or ensemble arrays) that cannot be a valid model: corrupt,
    truncated or inconsistent. The message names the field and, where there is one, the tree
    and the node."""


class UnsupportedModelError(ModelFormatError, NotImplementedError):
    """A valid model using an option treeinner does not support (an objective, a split kind);
    a ``ModelFormatError`` and a ``NotImplementedError``."""


class InputError(TreeinnerError, ValueError):
    """An argument or data set a function cannot use (wrong shape, NaN labels, out of range)."""


class InputTypeError(TreeinnerError, TypeError):
    """An argument of a type a function does not take."""
