"""Event files: one JSON value per line (NDJSON), read strictly and written atomically and deterministically.

Reading goes through the project's strict NDJSON reader (:func:`aefgate.aef.jsonio.iter_ndjson`: UTF-8,
I-JSON, LF framing); a line that does not read is a :class:`~aefgate.errors.Refusal` at ``path:line`` with the
reader's rule (``ENC-n``). Writing is :func:`aefgate.aef.jsonio.dump_line` per value into a temporary
sibling file, renamed into place only when every line is written (the streaming form of
:func:`aefgate.fsutil.atomic_write`: an export of a million events is not held in memory); on any error the
temporary file is removed and nothing appears at the destination. Same values in, same bytes out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.formats.cloudevents.bindings import from_http, to_binary_http
from aefgate.formats.cloudevents.mapping import ce_forward, ce_inverse
from aefgate.fsutil import atomic_lines, input_file_problem

__all__ = ["is_cloudevents_line", "iter_jsonl", "line_events", "read_jsonl", "write_jsonl"]



def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(lineno, value)`` for every line of the NDJSON file ``path`` (1-based), strictly."""
    p = Path(path)
    problem = input_file_problem(p)
    if problem is not None:
        raise Refusal("CLI-1", problem, str(p))
    try:
        yield from jsonio.iter_ndjson(p)
    except jsonio.JsonProblem as e:
        lineno = getattr(e, "lineno", None)
        raise Refusal(e.rule, e.reason, f"{p}:{lineno}" if lineno else str(p)) from None


def read_jsonl(path: str | Path) -> Iterator[Any]:
    """Every line's value of the NDJSON file ``path``, strictly (see :func:`iter_jsonl`)."""
    for _lineno, value in iter_jsonl(path):
        yield value


def write_jsonl(path: str | Path, values: Iterable[Any], *, durable: bool = True) -> int:
    """Write ``values`` one per line to ``path`` (which must not exist, OUT-1), atomically; returns the count.

    ``values`` may be a generator that raises (a refusal half-way): the destination is then never created.
    """
    path = Path(path)
    if path.is_dir():
        raise Refusal("OUT-1", "the destination is a folder", str(path))
    return atomic_lines(path, (jsonio.dump_line(v) for v in values), durable=durable)


def is_cloudevents_line(value: Any) -> bool:
    """Whether a line's value of an event file is a CloudEvent: a JSON-format one (``specversion``), or an HTTP
    message ``{"headers", "body"}`` (binary, structured or a batch). A value with ``aep`` is an AEP event, even when
    it carries extension attributes named ``headers`` and ``body``."""
    return type(value) is dict and ("specversion" in value or (
        "headers" in value and "body" in value and "aep" not in value))


def line_events(value: Any, where: str, diagnostics: list | None = None) -> list[dict]:
    """The AEP events of one CloudEvents line (:func:`is_cloudevents_line`): one for a JSON-format event, one or
    more for an HTTP message (a batch). Refusals at ``where`` (``CE-7`` for a message line of the wrong shape)."""
    if "specversion" in value:
        return [ce_inverse(value, where, diagnostics=diagnostics)]
    headers, body = value["headers"], value["body"]
    if type(headers) is not dict or type(body) is not str:
        raise Refusal("CE-7", 'an HTTP message line is {"headers": object, "body": string}', where)
    got = from_http(headers, body.encode("utf-8"), where=where, diagnostics=diagnostics)
    return got if isinstance(got, list) else [got]


#: the shapes of a CloudEvents file's lines: ``structured`` (the JSON event format) or ``binary`` (an HTTP binary
#: content mode message, ``{"headers", "body"}``)
MODES = ("structured", "binary")


def check_mode(mode: str) -> None:
    """CONV-3 for a mode that is not one of :data:`MODES`."""
    if mode not in MODES:
        raise Refusal("CONV-3", f"option 'mode' is structured or binary, not {mode!r}", "option 'mode'")


def line_value(event: Any, where: str, mode: str) -> Any:
    """One AEP Event as its CloudEvents line value in ``mode`` (refusals at ``where``)."""
    if mode == "structured":
        return ce_forward(event, where)
    try:
        headers, body = to_binary_http(event)
    except Refusal as e:
        raise Refusal(e.rule, e.message, where + (f"/{e.where}" if e.where else "")) from None
    return {"headers": headers, "body": body.decode("utf-8")}
