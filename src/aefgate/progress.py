"""Progress of long work, reported by the library and shown by the command line.

Library code says what it is doing, whether or not anybody shows it::

    with progress.task("verify results.ndjson", total=size, unit="bytes") as t:
        ...
        t.advance(n)

By default nobody listens and a task costs a context-variable read. The command line (``aefgate.cli.render``)
installs a display (:func:`showing`) for a command when stderr is a terminal and ``--json`` was not given: then a
task that is still running after a short delay (``AEFGATE_PROGRESS_DELAY`` seconds, 0.5 by default) appears as a
rich progress bar on stderr (done / total, in lines, samples, events or bytes), and disappears when it ends.
Work done in other processes is reported by the parent as it collects their results.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from typing import Any, Iterator, Protocol

__all__ = ["Display", "Task", "showing", "start", "task"]


class Display(Protocol):
    def start(self, label: str, total: int | None, unit: str) -> Any: ...

    def update(self, handle: Any, completed: int) -> None: ...

    def stop(self, handle: Any) -> None: ...


_display: contextvars.ContextVar[Display | None] = contextvars.ContextVar("aefgate_progress", default=None)


class Task:
    """One piece of long work: :meth:`advance` as it goes (cheap: the display is told at most ten times a
    second)."""

    __slots__ = ("_display", "_label", "_total", "_unit", "_done", "_handle", "_started", "_next", "_delay")

    def __init__(self, display: Display | None, label: str, total: int | None, unit: str) -> None:
        self._display, self._label, self._total, self._unit = display, label, total, unit
        self._done = 0
        self._handle: Any = None
        self._started = time.monotonic()
        self._delay = _delay()
        self._next = self._started + self._delay

    @property
    def done(self) -> int:
        return self._done

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._display is None:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.1
        if self._handle is None:
            self._handle = self._display.start(self._label, self._total, self._unit)
        self._display.update(self._handle, self._done)

    def set_total(self, total: int | None) -> None:
        self._total = total

    def close(self) -> None:
        if self._display is not None and self._handle is not None:
            self._display.update(self._handle, self._done)
            self._display.stop(self._handle)
            self._handle = None


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("AEFGATE_PROGRESS_DELAY", "0.5")))
    except ValueError:
        return 0.5


def start(label: str, total: int | None = None, unit: str = "") -> Task:
    """A :class:`Task` the caller closes (:meth:`Task.close`) when the work ends."""
    return Task(_display.get(), label, total, unit)


@contextlib.contextmanager
def task(label: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """A :class:`Task` for the block, closed (its bar removed) when the block ends."""
    t = start(label, total, unit)
    try:
        yield t
    finally:
        t.close()


@contextlib.contextmanager
def showing(display: Display | None) -> Iterator[None]:
    """Show the tasks started in the block on ``display`` (None: show nothing)."""
    token = _display.set(display)
    try:
        yield
    finally:
        _display.reset(token)
