"""AEP JSONL files (AEP-0003 §3.1): one event per line, LF-delimited, UTF-8, no blank lines.

Reading is the project's strict NDJSON reader (``aefgate.aef.jsonio``): a byte-order mark, a CR, a blank
line or a last line without its LF are refused (``AEP-0003§3.1``, at the file); a line that is not strict I-JSON
(invalid UTF-8, a member twice in one object, ``NaN``, a number that overflows, nesting over 64, a line over
4 MiB) is refused with the reader's own rule (``ENC-1``, ``ENC-2``, ``ENC-3``, ``ENC-17``) at ``path:line``; an
event that is not valid is refused as :func:`aefgate.formats.aep.event_schema.check_event` refuses it, at
``path:line``.

AEP-0003 §3.1 rule 3: "a reader encountering an unsupported major version MUST skip the line and SHOULD report
it once". A line whose ``aep`` is a string other than ``0.1`` is skipped, and ``on_skip(lineno, version)`` (when
given) is called once per distinct version. In 0.x every minor version is a major one (semantic versioning's
rule for 0.y.z), so ``0.2`` is skipped too (choice recorded in docs/design/aep-format.md).

Writing: :func:`write_events` writes every event as one compact line (``jsonio.dump_line``) into a temporary
sibling file, renamed into place once complete: a reader never sees a half-written file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

from aefgate.errors import Refusal
from aefgate.aef.jsonio import MAX_DOC, JsonProblem, dump_line, iter_lines, loads
from aefgate.formats.aep.event_schema import check_event
from aefgate.fsutil import atomic_lines

__all__ = ["read_events", "write_events"]

_FRAMING = {"ENC-5", "ENC-7"}  # the NDJSON framing rules, which are AEP-0003 §3.1's


def read_events(
    path: str | Path,
    *,
    validate: bool = True,
    on_skip: Callable[[int, str], None] | None = None,
) -> Iterator[tuple[int, dict]]:
    """Yield ``(lineno, event)`` (1-based) for every line of the AEP JSONL file ``path``; raise :class:`Refusal`
    at the first line (or file) that does not read or is not a valid event (``validate=False`` skips the
    schema check). Lines of an unsupported version are skipped (see the module docstring)."""
    p = Path(path)
    reported: set[str] = set()
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        raise Refusal("CLI-1", "no such file", str(p)) from None
    except OSError as e:
        raise Refusal("CLI-1", f"cannot read the file: {e.strerror or e}", str(p)) from None
    with f:
        lines = iter_lines(f, max_line=MAX_DOC)
        while True:
            try:
                item = next(lines, None)
            except JsonProblem as e:
                rule = "AEP-0003§3.1" if e.rule in _FRAMING else e.rule
                raise Refusal(rule, f"not an AEP JSONL file: {e.reason}", str(p)) from None
            if item is None:
                return
            lineno, raw = item
            where = f"{p}:{lineno}"
            if raw is None:
                raise Refusal("ENC-17", f"line over {MAX_DOC} bytes", where)
            try:
                event = loads(raw)
            except JsonProblem as e:
                raise e.refusal(where) from None
            version = event.get("aep")
            if type(version) is str and version != "0.1":
                if version not in reported:
                    reported.add(version)
                    if on_skip is not None:
                        on_skip(lineno, version)
                continue
            if validate:
                check_event(event, where)
            yield lineno, event


def write_events(path: str | Path, events: Iterable[dict], *, durable: bool = True) -> int:
    """Write ``events`` to ``path`` as AEP JSONL, atomically (a temporary sibling renamed into place; an
    existing file is replaced); returns how many were written. Events are written as they are (validate
    them first)."""
    return atomic_lines(path, (dump_line(e) for e in events), durable=durable, replace=True)
