"""A small dependency-free progress bar for the command line, drawn on stderr.

The bar counts steps (chunks of rows, or whole methods that cannot be split). In ``"auto"``
mode it is drawn only when the stream is a terminal and only once the work has taken longer
than ``delay`` seconds, so quick runs print nothing. ``"always"`` draws from the first step on
any stream (used by the tests and for logs); ``"never"`` draws nothing. The environment variable
``TREEINNER_PROGRESS`` (``auto``, ``always`` or ``never``) sets the default mode.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

MODES = ("auto", "always", "never")
ENV_VAR = "TREEINNER_PROGRESS"


def resolve_mode(mode: str | None) -> str:
    """The progress mode: ``mode`` if given, else ``$TREEINNER_PROGRESS``, else ``"auto"``.

    Parameters
    ----------
    mode : {"auto", "always", "never"} or None

    Returns
    -------
    str
        One of ``MODES``.

    Raises
    ------
    ValueError
        If the mode (or the environment variable) is not one of ``MODES``.
    """
    if mode is None:
        mode = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
        if mode not in MODES:
            raise ValueError(f"{ENV_VAR}={mode!r}; expected one of {', '.join(MODES)}.")
    if mode not in MODES:
        raise ValueError(f"progress mode {mode!r}; expected one of {', '.join(MODES)}.")
    return mode


class Progress:
    """A one-line text progress bar.

    Parameters
    ----------
    total : int
        Number of steps.
    desc : str
        Text in front of the bar.
    mode : {"auto", "always", "never"}
        See the module docstring.
    delay : float
        In ``"auto"`` mode, seconds of work before the bar first appears.
    stream : text stream, optional
        Where to draw (default ``sys.stderr``).
    width : int
        Characters of the bar itself.
    """

    def __init__(
        self,
        total: int,
        desc: str = "",
        mode: str = "auto",
        delay: float = 2.0,
        stream: TextIO | None = None,
        width: int = 28,
    ) -> None:
        self.total = max(int(total), 1)
        self.desc = desc
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.done = 0
        self.label = ""
        self._start = time.perf_counter()
        self._last_draw = -1.0
        self._drawn_len = 0
        self._last_state: tuple[int, str] | None = None
        self.drawn = False
        self.throttle = 0.0  # "always" draws every update (tests and logs see each step)
        if mode == "never":
            self.enabled, self.delay = False, 0.0
        elif mode == "always":
            self.enabled, self.delay = True, 0.0
        else:
            isatty = getattr(self.stream, "isatty", None)
            self.enabled, self.delay = bool(isatty and isatty()), float(delay)
            self.throttle = 0.1

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_label(self, label: str) -> None:
        """Show ``label`` (what is being computed) after the counts."""
        self.label = label
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        """Mark ``n`` more steps done and redraw."""
        self.done = min(self.done + n, self.total)
        self._draw(force=self.done == self.total)

    def close(self) -> None:
        """Finish the line (if anything was drawn) so later output starts on a new line."""
        if self.drawn:
            if self._last_state != (self.done, self.label):
                self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
        self.enabled = False

    def _draw(self, force: bool) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        elapsed = now - self._start
        if elapsed < self.delay:
            return
        if not force and self.drawn and now - self._last_draw < self.throttle:
            return
        frac = self.done / self.total
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        text = (
            f"{self.desc} [{bar}] {frac:4.0%} {self.done}/{self.total}"
            f" {self.label} {elapsed:.1f}s".rstrip()
        )
        pad = " " * max(self._drawn_len - len(text), 0)
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._drawn_len = len(text)
        self._last_state = (self.done, self.label)
        self._last_draw = now
        self.drawn = True
