"""Event files: one JSON value per line (NDJSON), read strictly and written atomically and deterministically.

Reading goes through the project's strict NDJSON reader (:func:`aefgate.formats.aef.jsonio.iter_ndjson`: UTF-8,
I-JSON, LF framing); a line that does not read is a :class:`~aefgate.errors.Refusal` at ``path:line`` with the
reader's rule (``ENC-n``). Writing is :func:`aefgate.formats.aef.jsonio.dump_line` per value into a temporary
sibling file, renamed into place only when every line is written (the streaming form of
:func:`aefgate.fsutil.atomic_write`: an export of a million events is not held in memory); on any error the
temporary file is removed and nothing appears at the destination. Same values in, same bytes out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

from aefgate.errors import Refusal
from aefgate.formats.aef import jsonio
from aefgate.fsutil import atomic_lines

__all__ = ["iter_jsonl", "read_jsonl", "write_jsonl"]



def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(lineno, value)`` for every line of the NDJSON file ``path`` (1-based), strictly."""
    p = Path(path)
    if not p.is_file():
        raise Refusal("CLI-1", "no such file" if not p.exists() else "not a regular file (a folder, a pipe, a device?)",
                      str(p))
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
