"""The command line's error types and how an error becomes one line."""

from __future__ import annotations

PROG = "treeinner"


class CLIError(Exception):
    """A user error the command line reports on one line (exit status 1)."""


class UsageError(Exception):
    """A command-line usage error (exit status 2)."""


def one_line(e: BaseException) -> str:
    """The message of ``e`` on one line (a KeyError names the missing key)."""
    text = " ".join(str(e).split())
    if isinstance(e, KeyError) and len(e.args) == 1:
        text = f"missing key {e.args[0]!r}"
    return text or type(e).__name__


# Library messages that spell a Python call, and the command line's spelling of the same.
_SPELLINGS = {"pass y as treeinner.SoftLabels(y)": "pass --soft-labels"}


def cli_spelling(text: str) -> str:
    """A library message with its Python spellings replaced by the command line's."""
    for python, cli in _SPELLINGS.items():
        text = text.replace(python, cli)
    return text
