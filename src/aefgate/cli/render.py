"""Output of the command line: one JSON value on stdout, everything for people on stderr (rich).

Nothing else in the CLI writes to stdout: a command either calls :func:`emit_json` once, or prints through
:func:`console`, which writes to stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any

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


def emit_json(value: Any) -> None:
    """Write ``value`` as one JSON value and a newline on stdout (the one JSON writer: ``jsonio.dumps``)."""
    from aefgate.formats.aef import jsonio

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

