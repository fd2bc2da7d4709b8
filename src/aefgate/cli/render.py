"""Output of the command line: one JSON value on stdout, everything for people on stderr (rich).

Nothing else in the CLI writes to stdout: a command either calls :func:`emit_json` once, or prints through
:func:`console`, which writes to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

from rich.console import Console
from rich.markup import escape

from aefgate.errors import one_line

_console: Console | None = None


def console() -> Console:
    """The rich console, on stderr."""
    global _console
    if _console is None:
        _console = Console(stderr=True, highlight=False, soft_wrap=False)
    return _console


class RichDisplay:
    """The progress of long work (:mod:`aefgate.progress`) as rich bars on stderr, removed when each task ends."""

    def __init__(self, c: Console) -> None:
        self.console = c
        self.progress: Any = None

    def start(self, label: str, total: int | None, unit: str) -> Any:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TextColumn("{task.completed:,}/{task.fields[shown_total]} {task.fields[unit]}"),
                                     TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
                                     transient=True)
            self.progress.start()
        shown = f"{total:,}" if total is not None else "?"
        return self.progress.add_task(label, total=total, unit=unit, shown_total=shown)

    def update(self, handle: Any, completed: int) -> None:
        if self.progress is not None:
            self.progress.update(handle, completed=completed)

    def stop(self, handle: Any) -> None:
        if self.progress is None:
            return
        if len(self.progress.tasks) > 1:
            self.progress.remove_task(handle)
            return
        self.progress.stop()  # its last rendering shows the task done, then (transient) it is cleared
        self.progress = None


@contextlib.contextmanager
def progress_display(*, quiet: bool) -> Iterator[None]:
    """Show long work as progress bars while the block runs: only when stderr is a terminal and not ``quiet``
    (``--json``)."""
    from aefgate import progress

    c = console()
    display = None if quiet or not c.is_terminal else RichDisplay(c)
    try:
        with progress.showing(display):
            yield
    finally:
        if display is not None and display.progress is not None:
            display.progress.stop()


def emit_json(value: Any) -> None:
    """Write ``value`` as one JSON value and a newline on stdout (the one JSON writer: ``jsonio.dumps``)."""
    from aefgate.aef import jsonio

    data = jsonio.dumps(value) + b"\n"
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def error_line(rule: str, where: str, message: str) -> str:
    """``error [RULE] at WHERE: message`` (``at WHERE`` left out when there is no place)."""
    loc = f" at {one_line(where)}" if where else ""
    return f"error [{rule}]{loc}: {one_line(message)}"


def print_error(rule: str, where: str, message: str) -> None:
    """One line on stderr, never markup-interpreted (paths may hold brackets)."""
    sys.stderr.write(error_line(rule, where, message) + "\n")
    sys.stderr.flush()


def debug() -> bool:
    return os.environ.get("AEFGATE_DEBUG", "") == "1"


_STYLE = {"intact": "bold green", "unsealed": "bold yellow", "invalid": "bold red"}


def show_verification(v: Any, run_dir: str, *, anchors_given: bool = False, signature: str | None = None) -> None:
    """The human report of a verification: outcome, run hash, every problem in order, withheld count, and with a
    trust policy, ``signature``: who the attestation is signed by, or why nobody (§4.5)."""
    c = console()
    style = _STYLE.get(v.outcome, "bold")
    c.print(f"run       {escape(str(run_dir))}")
    c.print(f"outcome   [{style}]{escape(v.describe())}[/]")  # [SIG-7]: intact is never "authentic"
    c.print(f"run hash  {escape(v.run_hash) if v.run_hash else '(none)'}")
    if signature is not None:
        c.print(f"signed by {escape(signature)}", soft_wrap=True)
    if anchors_given:
        anchored = {True: "yes: the run hash is one of the anchors", False: "no: the run hash is not anchored",
                    None: "not checked"}[v.anchored]
        c.print(f"anchored  {anchored}")
    problems = list(v.problems)
    c.print(f"problems  {len(problems) or 'none'}")
    for path, code in problems:
        c.print(f"  {escape(str(path))}  [red]{escape(str(code))}[/]")
    c.print(f"withheld  {v.withheld}")

