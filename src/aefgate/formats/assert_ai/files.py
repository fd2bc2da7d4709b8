"""Reading ASSERT's files as assert-ai writes them: JSON documents, JSON Lines read one line at a time, YAML.

assert-ai writes with Python's ``json`` module (so a value may be ``NaN`` or ``Infinity``, and the files are UTF-8
with LF or CRLF line ends) and its configuration with a YAML library. Everything here refuses what does not read,
with the file and line, under rule ``ASSERT-2`` (``ASSERT-7`` for YAML); nothing here knows what the values mean
(that is :mod:`.model`).

- :func:`read_object`: a JSON file whose top is an object;
- :func:`iter_jsonl`: the lines of a JSON Lines file as ``(line number, byte offset, raw bytes, object)``, streaming
  (memory holds one line); blank lines are skipped, as ``assert_ai.core.io.load_jsonl`` skips them;
- :func:`read_line_at`: one line again, by the offset :func:`iter_jsonl` gave;
- :func:`read_yaml`: a YAML file whose top is a mapping (:func:`aefgate.formats.yamlio.load`: ``yaml.safe_load``,
  no Python objects are built, within the bounds below).

Bounded as every reader of aefgate (:func:`aefgate.aef.jsonio.loads_tolerant`, :mod:`aefgate.formats.yamlio`):
nesting at most 64 deep, no number literal beyond binary64 (``1e400``, an integer of 309 digits; Python's ``json``
writes an infinity as ``Infinity``, never so), no unpaired surrogate (``"\ud800"``: Python's ``json`` can write one,
but it is not Unicode text and no run can hold it), under the file's rule (ASSERT-2, ASSERT-7). Every file is opened
only if it is a regular file (a pipe, a device, a link that loops is refused: never read as absent, never a hang).
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import yaml

from aefgate.errors import Refusal
from aefgate.formats import yamlio
from aefgate.aef import jsonio
from aefgate.fsutil import open_regular

__all__ = ["MAX_LINE", "iter_jsonl", "read_line_at", "read_object", "read_row_from", "read_yaml", "sha256_file"]

#: the longest JSON Lines line read (an inference row holds the whole conversation and its model calls)
MAX_LINE = 256 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20
_MAX_YAML = 4 * 1024 * 1024  # as a JSON document of AEF ([ENC-17]): PyYAML reads about 1 MiB a second


def _parse(raw: bytes, where: str) -> Any:
    """One JSON text as Python's ``json`` writes it (``NaN``, ``Infinity`` taken), within aefgate's bounds."""
    try:
        return jsonio.loads_tolerant(raw, nonfinite=True)
    except jsonio.JsonProblem as e:
        reason = e.reason
        if reason.startswith("not UTF-8"):
            reason += ": assert-ai writes UTF-8"
        elif e.rule in ("ENC-17", "ENC-3", "ENC-2"):
            reason = f"{reason} ([{e.rule}])"
        elif not reason.startswith("not JSON"):
            reason = f"not JSON: {reason}"
        raise Refusal("ASSERT-2", reason, where) from None


def _open(p: Path) -> BinaryIO:
    """``p`` opened for reading when it is a regular file (ASSERT-1 when it cannot be opened, ASSERT-2 when it is a
    pipe, a device, a folder: never read, never waited on)."""
    try:
        return open_regular(p)
    except OSError as e:
        rule = "ASSERT-2" if e.errno in (errno.EINVAL, errno.ELOOP) else "ASSERT-1"
        raise Refusal(rule, f"cannot be read: {e.strerror or e}", str(p)) from None


def read_object(path: str | os.PathLike[str], *, max_size: int = 64 * 1024 * 1024) -> tuple[dict, bytes]:
    """The object a JSON file holds, and the file's bytes (ASSERT-2 when it is not one)."""
    p = Path(path)
    with _open(p) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_size:
            raise Refusal("ASSERT-2", f"{size} bytes: more than the {max_size} a document of ASSERT's is read at",
                          str(p))
        raw = f.read(max_size + 1)
    if len(raw) > max_size:
        raise Refusal("ASSERT-2", f"more than the {max_size} bytes a document of ASSERT's is read at", str(p))
    body = raw[3:] if raw.startswith(_BOM) else raw
    value = _parse(body, str(p))
    if not isinstance(value, dict):
        raise Refusal("ASSERT-2", f"the file holds a JSON {_kind(value)}, not an object", str(p))
    return value, raw


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def _lines(f: BinaryIO, where: str) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset, bytes without the line end) of each line, read in chunks."""
    lineno = 0
    offset = 0
    buf = b""
    first = True
    while True:
        chunk = f.read(_CHUNK)
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
                offset = 3
        if not chunk:
            break
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            lineno += 1
            line = buf[start:nl]
            yield lineno, offset, line[:-1] if line.endswith(b"\r") else line
            offset += nl + 1 - start
            start = nl + 1
        buf = buf[start:]
        if len(buf) > MAX_LINE:
            raise Refusal("ASSERT-2", f"a line longer than {MAX_LINE} bytes", f"{where}:{lineno + 1}")
    if buf:
        lineno += 1
        yield lineno, offset, buf[:-1] if buf.endswith(b"\r") else buf


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, bytes, dict]]:
    """``(line number, byte offset, raw bytes, object)`` for each non-blank line of a JSON Lines file, in file
    order; ASSERT-2 at ``<file>:<line>`` for a line that is not a JSON object."""
    p = Path(path)
    where = str(p)
    with _open(p) as f:
        for lineno, offset, raw in _lines(f, where):
            if not raw.strip():
                continue
            value = _parse(raw, f"{where}:{lineno}")
            if not isinstance(value, dict):
                raise Refusal("ASSERT-2", f"the line holds a JSON {_kind(value)}, not an object",
                              f"{where}:{lineno}")
            yield lineno, offset, raw, value


def read_line_at(f: BinaryIO, offset: int, where: str) -> tuple[bytes, dict]:
    """The raw bytes (no line end) and the object of the line starting at ``offset`` of an open file."""
    f.seek(offset)
    raw = f.readline(MAX_LINE + 2)
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    value = _parse(raw, where)
    if not isinstance(value, dict):  # pragma: no cover - iter_jsonl read the same bytes before
        raise Refusal("ASSERT-2", "the line is not a JSON object", where)
    return raw, value


def read_row_from(f: BinaryIO, offset: int, where: str) -> tuple[bytes, dict, int] | None:
    """The first non-blank line at or after ``offset`` (the start of a line) of an open file, as
    :func:`read_line_at` reads it, and the offset of the line after it; None at the end of the file. So a caller
    reads the rows of a file in order, as :func:`iter_jsonl` gives them, from any row's offset on."""
    f.seek(offset)
    while True:
        line = f.readline(MAX_LINE + 2)
        if not line:
            return None
        nxt = offset + len(line)
        raw = line[:-1] if line.endswith(b"\n") else line
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if raw.strip():
            break
        offset = nxt
    value = _parse(raw, f"{where} (offset {offset})")
    if not isinstance(value, dict):  # pragma: no cover - iter_jsonl read the same bytes before
        raise Refusal("ASSERT-2", "the line is not a JSON object", f"{where} (offset {offset})")
    return raw, value, nxt


def read_yaml(path: str | os.PathLike[str]) -> tuple[dict, bytes]:
    """The mapping a YAML file holds and its bytes (ASSERT-7 at ``<file>:<line>`` when it does not parse or its top
    is not a mapping). An empty file is an empty mapping."""
    p = Path(path)
    with _open(p) as f:
        raw = f.read(_MAX_YAML + 1)
    if len(raw) > _MAX_YAML:
        raise Refusal("ASSERT-7", f"more than the {_MAX_YAML} bytes a configuration is read at", str(p))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Refusal("ASSERT-7", f"not UTF-8 (byte {e.start})", str(p)) from None
    try:
        value = yamlio.load(text)
    except yamlio.YamlProblem as e:
        where = f"{p}:{e.line}" if e.line is not None else str(p)
        raise Refusal("ASSERT-7", f"{e.reason} ([{e.rule}])", where) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise Refusal("ASSERT-7", f"not YAML: {problem}", where) from None
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise Refusal("ASSERT-7", f"the configuration is a YAML {type(value).__name__}, not a mapping", str(p))
    return value, raw


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with _open(Path(path)) as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()
