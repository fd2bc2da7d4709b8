"""The JSON of Inspect logs: reading it (with Inspect's ``NaN``) and writing it.

Inspect writes its unscored value as the bare token ``NaN``, which is not JSON. This module reads the JSON text
of an Inspect log as the standard library's ``json`` module does, with three differences, all refused as
``IN-6`` (inspect.md, "Inspect -> AEF", Refused: "a log that is not I-JSON ... holding ``Infinity`` or
``-Infinity``"), with the line and column of the offending token:

- ``NaN`` is read as a float NaN; ``Infinity`` and ``-Infinity`` are refused;
- a number literal beyond binary64 (``1e400``, which ``json`` would read as an infinity) is refused, and so is
  an integer literal of more digits than Python converts (``sys.get_int_max_str_digits()``, 4300);
- a member name given twice in one object is refused (I-JSON; ``json`` would keep the last).

Everything else is as ``json`` reads it: invalid UTF-8, a byte-order mark, a syntax error, a raw control
character in a string, nesting deeper than the interpreter's recursion limit are refused (``IN-6``) with their
place; unpaired surrogate escapes and depth (AEF's 64, [ENC-17]) are left to the caller.

A ``.json`` log can be large, so it is read incrementally (:class:`JsonStream`): the file is decoded in chunks,
each top-level member and each sample is parsed on its own by the C scanner (``JSONDecoder.raw_decode``), and
only the text of the value being parsed is held. One value (a sample, or a member of the log such as
``eval``) is at most :data:`MAX_VALUE_CHARS` characters; the file itself has no bound.

Writing (:func:`dumps`) is compact JSON with ``NaN`` as the bare token, as Inspect writes it; infinities are
refused (``IN-FMT-7``), since this reader refuses them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, BinaryIO, Iterator

from aefgate.errors import Refusal
from aefgate.formats.inspect import rules

RULE_JSON = rules.JSON
RULE_WRITE = rules.WRITE

MIB = 1024 * 1024
MAX_VALUE_CHARS = 512 * MIB  # one sample or one top-level member of a .json log, in characters
READ_CHUNK = 1 * MIB  # bytes read from a .json log at a time
_TRUNCATION_MARGIN = 16  # an error this close to the end of the buffer may be the buffer's end, not the text's

_WS = re.compile(r"[ \t\n\r]*")
# The tokens of JSON (with Inspect's constants), for finding the place of a refused token. The text up to that
# token was read by the scanner already, so it is well formed.
_TOKEN = re.compile(
    r"""(?P<ws>[ \t\n\r]+)
      | (?P<str>"[^"\\]*(?:\\.[^"\\]*)*")
      | (?P<num>-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][-+]?[0-9]+)?)
      | (?P<inf>-?Infinity)
      | (?P<lit>NaN|true|false|null)
      | (?P<punct>[{}\[\]:,])""",
    re.X | re.S,
)


class _Reject(Exception):
    """Raised inside the scanner's hooks; turned into a Refusal with the token's place."""

    def __init__(self, kind: str, detail: str):
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail


def _parse_constant(name: str) -> float:
    if name == "NaN":
        return math.nan
    raise _Reject("infinity", name)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _Reject("overflow", text)
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Reject("duplicate", key)
            seen.add(key)
    return obj


_raw_decode = json.JSONDecoder(
    object_pairs_hook=_object, parse_float=_parse_float, parse_constant=_parse_constant
).raw_decode


def _int_digit_limit() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get else 0


def _find_offender(buf: str, start: int, kind: str, detail: str) -> tuple[int, int] | None:
    """The span ``(begin, end)`` in ``buf`` of the token the scanner refused (error path only), or None."""
    stack: list[list] = []  # [kind, keys, expecting_key] for objects, [kind] for arrays
    pos = start
    limit = _int_digit_limit()
    n = len(buf)
    while pos < n:
        m = _TOKEN.match(buf, pos)
        if m is None:
            return None
        tok_kind = m.lastgroup
        if tok_kind in ("frac", "exp"):  # pragma: no cover - lastgroup names the outer group
            tok_kind = "num"
        tok = m.group()
        span = (m.start(), m.end())
        pos = m.end()
        if tok_kind == "ws":
            continue
        if tok_kind == "punct":
            if tok in "{[":
                stack.append(["obj", set(), True] if tok == "{" else ["arr"])
                continue
            if tok in "}]":
                if stack:
                    stack.pop()
                if not stack:
                    return None
                continue
            if tok == "," and stack and stack[-1][0] == "obj":
                stack[-1][2] = True
            elif tok == ":" and stack and stack[-1][0] == "obj":
                stack[-1][2] = False
            continue
        if tok_kind == "str" and stack and stack[-1][0] == "obj" and stack[-1][2]:
            if kind == "duplicate":
                try:
                    key = json.loads(tok)
                except ValueError:  # pragma: no cover - the scanner read it already
                    return None
                if key in stack[-1][1]:
                    return span
                stack[-1][1].add(key)
            continue
        if kind == "infinity" and tok_kind == "inf":
            return span
        if tok_kind == "num":
            if kind == "overflow" and (m.group("frac") or m.group("exp")):
                if math.isinf(float(tok)):
                    return span
            if kind == "bigint" and not (m.group("frac") or m.group("exp")):
                if limit and len(tok.lstrip("-")) > limit:
                    return span
        if not stack:
            return None  # a scalar at the top, not the offender
    return None


def _message(kind: str, detail: str) -> str:
    if kind == "infinity":
        return (f"{detail} is not a number a log may hold: only NaN (Inspect's unscored value) is read, "
                "infinities are refused")
    if kind == "overflow":
        shown = detail if len(detail) <= 40 else detail[:37] + "..."
        return f"the number {shown} is beyond binary64 (it would read as an infinity)"
    if kind == "duplicate":
        return f"the member name {detail!r} appears twice in one object (I-JSON)"
    if kind == "bigint":
        return f"an integer literal of more than {_int_digit_limit()} digits"
    return detail  # pragma: no cover


class JsonStream:
    """JSON text read from a binary file in chunks (or from a string), with line and column tracking.

    ``where`` names the source in refusals (``<where>:<line>:<column>``, 1-based, the column in characters).
    Only the text from the value being parsed onwards is kept; consumed text is dropped as the buffer grows.
    """

    def __init__(self, source: BinaryIO | None, where: str, *, text: str = "", line: int = 1, column: int = 1,
                 track_bytes: bool = False, byte_offset: int = 0):
        self.source = source
        self.where = where
        self.buf = text
        self.pos = 0
        self.eof = source is None
        self._pending = b""  # the bytes of a UTF-8 sequence cut by the chunk boundary
        self._line = line  # line of buf[0]
        self._col = column  # column of buf[0]
        self._track_bytes = track_bytes
        self._byte = byte_offset  # byte offset of buf[0] (when tracked)
        self._bytes_read = byte_offset  # bytes taken from the source so far

    # -- positions ----------------------------------------------------------------------------------------------

    def location(self, i: int) -> tuple[int, int]:
        """(line, column) of ``buf[i]``."""
        newlines = self.buf.count("\n", 0, i)
        if newlines:
            return self._line + newlines, i - self.buf.rfind("\n", 0, i)
        return self._line, self._col + i

    def place(self, i: int) -> str:
        line, col = self.location(i)
        return f"{self.where}:{line}:{col}"

    def byte_offset(self, i: int) -> int:
        """The byte offset in the source of ``buf[i]`` (only while bytes are tracked)."""
        assert self._track_bytes
        return self._byte + len(self.buf[:i].encode("utf-8"))

    def stop_tracking_bytes(self) -> None:
        self._track_bytes = False

    def refuse(self, rule: str, message: str, i: int | None = None) -> Refusal:
        return Refusal(rule, message, self.place(self.pos if i is None else i))

    # -- reading ------------------------------------------------------------------------------------------------

    def _drop_consumed(self) -> None:
        k = self.pos
        if k == 0:
            return
        dropped = self.buf[:k]
        newlines = dropped.count("\n")
        if newlines:
            self._line += newlines
            self._col = k - dropped.rfind("\n")
        else:
            self._col += k
        if self._track_bytes:
            self._byte += len(dropped.encode("utf-8"))
        self.buf = self.buf[k:]
        self.pos = 0

    def _read_more(self, want: int) -> None:
        """Append at least ``want`` more bytes' worth of text (or reach the end of the source)."""
        if self.eof:
            return
        if self.pos > len(self.buf) // 2:
            self._drop_consumed()
        assert self.source is not None
        data = self.source.read(max(want, READ_CHUNK))
        if not data:
            self.eof = True
            if self._pending:
                self._bad_utf8(self._pending, 0, self._bytes_read - len(self._pending))
            return
        raw = self._pending + data
        start_byte = self._bytes_read - len(self._pending)
        self._bytes_read += len(data)
        cut = len(raw)
        # do not split a UTF-8 sequence: keep an incomplete one for the next read
        i = len(raw) - 1
        while i >= 0 and i >= len(raw) - 4 and (raw[i] & 0xC0) == 0x80:
            i -= 1
        if i >= 0 and raw[i] >= 0xC0:
            need = 2 if raw[i] < 0xE0 else 3 if raw[i] < 0xF0 else 4
            if len(raw) - i < need:
                cut = i
        try:
            text = raw[:cut].decode("utf-8")
        except UnicodeDecodeError as e:
            self._bad_utf8(raw[:cut], e.start, start_byte)
        self._pending = raw[cut:]
        if not self.buf and start_byte == 0 and text.startswith("\ufeff"):
            raise self.refuse(RULE_JSON, "the log begins with a byte order mark (U+FEFF), which JSON text "
                                         "does not", 0)
        self.buf += text

    def _bad_utf8(self, raw: bytes, bad: int, start_byte: int) -> None:
        valid = raw[:bad].decode("utf-8", errors="replace")
        self.buf += valid
        raise self.refuse(RULE_JSON, f"the log is not UTF-8 (byte offset {start_byte + bad})",
                          len(self.buf)) from None

    def skip_ws(self) -> None:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or self.eof:
                return
            self._read_more(READ_CHUNK)

    def peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        self.skip_ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            found = repr(c) if c else "the end of the text"
            raise self.refuse(RULE_JSON, f"not JSON: expected {what}, found {found}")
        self.pos += 1
        return c

    def at_end(self) -> bool:
        return self.peek() == ""

    def elements(self) -> Iterator[int]:
        """Walk the array at the current position: yields once per element, with the position where it starts;
        the caller reads the element (:meth:`value`, or a walk of its own) before asking for the next."""
        self.expect("[", "'['")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            self.skip_ws()
            yield self.pos
            if self.expect(",]", "',' or ']'") == "]":
                return

    def members(self, what: str = "'{'") -> Iterator[str]:
        """Walk the object at the current position: yields each member name, the caller reading its value before
        asking for the next; a name that appears twice is refused (I-JSON)."""
        self.expect("{", what)
        if self.peek() == "}":
            self.pos += 1
            return
        seen: set[str] = set()
        while True:
            if self.peek() != '"':
                raise self.refuse(RULE_JSON, "not JSON: expected a member name")
            at = self.pos
            key = self.value()
            self.expect(":", "':'")
            if key in seen:
                raise self.refuse(RULE_JSON, f"the member name {key!r} appears twice in one object (I-JSON)", at)
            seen.add(key)
            yield key
            if self.expect(",}", "',' or '}'") == "}":
                return

    def value(self, *, facts: bool = False) -> Any:
        """Parse the JSON value at the current position (after white space); with ``facts``, return
        ``(value, TextFacts)``."""
        self.skip_ws()
        while True:
            start = self.pos
            try:
                obj, end = _raw_decode(self.buf, start)
            except _Reject as r:
                span = _find_offender(self.buf, start, r.kind, r.detail)
                if not self.eof and (span is None or span[1] >= len(self.buf)):
                    self._grow(start)
                    continue
                raise self.refuse(RULE_JSON, _message(r.kind, r.detail), span[0] if span else start) from None
            except RecursionError:
                raise self.refuse(RULE_JSON, "the value is nested too deeply to be read", start) from None
            except json.JSONDecodeError as e:
                if not self.eof and (e.msg.startswith("Unterminated string")
                                     or e.pos >= len(self.buf) - _TRUNCATION_MARGIN):
                    self._grow(start)
                    continue
                raise self.refuse(RULE_JSON, f"not JSON: {e.msg}", e.pos) from None
            except ValueError:  # an integer literal beyond the interpreter's digit limit
                span = _find_offender(self.buf, start, "bigint", "")
                if not self.eof and (span is None or span[1] >= len(self.buf)):
                    self._grow(start)
                    continue
                raise self.refuse(RULE_JSON, _message("bigint", ""), span[0] if span else start) from None
            if end >= len(self.buf) and not self.eof:
                # a number or a literal may go on in the next chunk
                self._grow(start)
                continue
            self.pos = end
            if facts:
                return obj, text_facts(self.buf, start, end)
            return obj

    def _grow(self, start: int) -> None:
        size = len(self.buf) - start
        if size > MAX_VALUE_CHARS:
            raise self.refuse(rules.BOUND, f"one value of the log is longer than {MAX_VALUE_CHARS // MIB} MiB of "
                                             "text, the reader's bound", start)
        self._read_more(max(READ_CHUNK, size))


def loads(data: bytes | str, where: str, *, facts: bool = False) -> Any:
    """Read one JSON text (a whole member of a ``.eval``) as :mod:`json` does, with Inspect's ``NaN``.

    Refuses (``IN-6``) invalid UTF-8, a byte-order mark, infinities, literals beyond binary64, a member name
    twice in one object, trailing text, with ``<where>:<line>:<column>``. With ``facts``, returns
    ``(value, TextFacts)``.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            prefix = data[: e.start].decode("utf-8", errors="replace")
            line = prefix.count("\n") + 1
            col = len(prefix) - prefix.rfind("\n")
            raise Refusal(RULE_JSON, f"not UTF-8 (byte offset {e.start})", f"{where}:{line}:{col}") from None
    else:
        text = data
    stream = JsonStream(None, where, text=text)
    if text.startswith("\ufeff"):
        raise stream.refuse(RULE_JSON, "the text begins with a byte order mark (U+FEFF), which JSON text does not",
                            0)
    if stream.at_end():
        raise stream.refuse(RULE_JSON, "not JSON: the text is empty")
    value = stream.value()
    if not stream.at_end():
        raise stream.refuse(RULE_JSON, "not JSON: text after the value")
    if facts:  # white space around the value changes none of its facts
        return value, text_facts(data if isinstance(data, bytes) else text)
    return value


# -- what a value's text says about it -----------------------------------------------------------------------------

# Bytes tables for text_facts: what is not a bracket, a quote or a backslash is deleted; digits become "0", the
# rest " ". Translating is a table lookup per byte in C, much faster than a regular expression over the text.
_KEEP = b'[]{}"'
_DROP_ALL_BUT_STRUCTURE = bytes(b for b in range(256) if b not in _KEEP)
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_STRING = re.compile(rb'"[^"]*"')  # a string once its escaped backslashes and quotes are gone
_EMPTY_PAIR = re.compile(rb"\[\]|\{\}")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
LONG_DIGITS = 309  # an integer literal beyond binary64 (about 1.8e308) has at least this many digits
_LONG_RUN = b"0" * LONG_DIGITS


class TextFacts:
    """What the JSON text of one value (read by this module, so well formed) says about the value, found by
    regular expressions over the text instead of a walk over the value:

    - ``depth``: the nesting depth of its arrays and objects (a top-level object is 1, a scalar 0);
    - ``surrogate_escapes``: a ``\\uD800``..``\\uDFFF`` escape occurs (a pair's half, or an unpaired surrogate:
      only an escape can put a surrogate into a string read from UTF-8);
    - ``long_digit_runs``: a run of :data:`LONG_DIGITS` digits occurs (in a string, or an integer literal beyond
      binary64).

    ``surrogate_escapes`` and ``long_digit_runs`` are "maybe"s (false means none); ``depth`` is exact.
    """

    __slots__ = ("depth", "surrogate_escapes", "long_digit_runs")

    def __init__(self, depth: int, surrogate_escapes: bool, long_digit_runs: bool):
        self.depth = depth
        self.surrogate_escapes = surrogate_escapes
        self.long_digit_runs = long_digit_runs

    def __repr__(self) -> str:
        return (f"TextFacts(depth={self.depth}, surrogate_escapes={self.surrogate_escapes}, "
                f"long_digit_runs={self.long_digit_runs})")


def text_facts(text: str | bytes, start: int = 0, end: int | None = None) -> TextFacts:
    """The :class:`TextFacts` of the well-formed JSON value ``text[start:end]`` (UTF-8 bytes, or str)."""
    if start or end is not None:
        text = text[start:end]
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    plain = data
    if b"\\" in plain:  # an escaped backslash, then an escaped quote, go: no quote left is not a string's end
        plain = plain.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = plain.translate(None, _DROP_ALL_BUT_STRUCTURE)  # brackets, strings reduced to their brackets
    # removing two adjacent quotes keeps the pairing of the others: an empty string goes, or two strings side by
    # side become one string holding both contents; brackets outside strings stay
    structure = structure.replace(b'""', b"")
    if b'"' in structure:
        structure = _STRING.sub(b"", structure)
    depth = 0
    while structure:  # each pass removes the innermost pairs: as many passes as levels
        structure, n = _EMPTY_PAIR.subn(b"", structure)
        if not n:  # pragma: no cover - the text was read as JSON, so its brackets pair up
            raise ValueError("brackets that do not pair up")
        depth += 1
    surrogate = b"\\u" in data and _SURROGATE_ESCAPE.search(data) is not None
    return TextFacts(depth, surrogate, _LONG_RUN in data.translate(_DIGITS_AS_ZERO))


# -- writing ------------------------------------------------------------------------------------------------------


def _find_infinity(value: Any, path: str = "") -> str | None:
    """The JSON pointer of the first infinite float in ``value`` (iterative), or None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, float):
            if math.isinf(v):
                return p or "/"
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                stack.append((x, f"{p}/{str(k).replace('~', '~0').replace('/', '~1')}"))
        elif isinstance(v, (list, tuple)):
            for i in range(len(v) - 1, -1, -1):
                stack.append((v[i], f"{p}/{i}"))
    return None


def dumps(value: Any, where: str = "") -> bytes:
    """Compact UTF-8 JSON with ``NaN`` as the bare token (as Inspect writes it).

    Refuses (``IN-FMT-7``) infinities and values JSON cannot hold (sets, bytes, objects, circular references).
    A string holding an unpaired surrogate is written escaped (``\\udXXX``), since UTF-8 cannot hold it.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as e:
        raise Refusal(RULE_WRITE, f"a value JSON cannot hold: {e}", where) from None
    if "Infinity" in text:
        pointer = _find_infinity(value)
        if pointer is not None:
            raise Refusal(RULE_WRITE, f"an infinite number at {pointer}: Inspect logs are read without "
                                      "infinities (IN-6), so none is written", where)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, allow_nan=True, separators=(",", ":")).encode("ascii")
