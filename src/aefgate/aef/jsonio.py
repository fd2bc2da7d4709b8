"""Strict I-JSON and NDJSON: the one reader and the one writer of every AEF file (spec 02).

Reading
-------
``loads(buf)`` reads one JSON text under [ENC-1]..[ENC-4] and [ENC-17]:

- UTF-8 without a byte-order mark; one value; an object at the top ([ENC-1]);
- I-JSON ([ENC-2]): a member name twice in one object, at any depth, is refused, and so is an unpaired
  surrogate escape;
- finite numbers ([ENC-3]): ``NaN``/``Infinity`` tokens and literals that overflow binary64 (``1e400``, or an
  integer of 309 digits) are refused;
- nesting depth at most 64 and size at most 4 MiB (per document or NDJSON line) ([ENC-17]), refused as ``limit``.

Problems raise :class:`JsonProblem` whose ``code`` is the §3.9 code: ``encoding`` or ``limit``.

``loads_tolerant(buf)`` is the same reader for the formats whose own readers are more lenient than AEF (AgentEval's
System.Text.Json keeps the last of two members; Python's ``json``, which writes ASSERT's files, writes ``NaN`` and
``Infinity``): it takes duplicates (the last value kept) and, on request, the non-finite tokens, but keeps the
bounds every reader of aefgate has: nesting depth at most 64 (``limit``, ENC-17) and no number literal that
overflows binary64 (``1e400``, an integer of 309 digits or more: ``encoding``, ENC-3), and no unpaired surrogate
(ENC-2), so that nothing read can fail later when it is written into a run.

msgspec parses (fast, in C) and already refuses invalid UTF-8, control characters in strings, unpaired
surrogates, ``NaN`` and floats out of range. It keeps the last of two members with one name, so duplicates are
detected here, without giving up msgspec's speed on ordinary input:

- fast path: if re-encoding the decoded value with msgspec gives back exactly the input bytes, no member was
  dropped (a dropped member would make the re-encoding shorter), so there is no duplicate. Every compact
  document written by msgspec, or by any writer with the same number spelling, takes this path;
- otherwise the text is parsed again by the standard library's C scanner with an ``object_pairs_hook`` that sees
  every member, which is exact.

Integers are kept as Python ints (exact); whether an integer fits a schema's range is a ``schema`` question
([ENC-4]), except for literals too large for binary64 at all, which are ``encoding`` ([ENC-3]).

NDJSON ([ENC-5]..[ENC-7]): :func:`iter_lines` splits a file on LF alone while it is read in chunks (so memory does
not grow with the file), checks the framing (no CR, no blank line, a final LF, no BOM) and the line limits, and can
feed every byte to a hash at the same time, so a verifier reads each file once. A framing defect raises
``JsonProblem`` for the whole file (§3.9: reported once, at the file's path, and none of its lines is read); a line
over 4 MiB is yielded as ``None`` (its problem is ``limit`` at ``<file>:<line>``) and is never held in memory whole.

Writing
-------
``dumps`` writes compact JSON (no insignificant white space, UTF-8, integers in plain digits) and refuses
non-finite numbers; ``dump_line`` adds the LF of NDJSON framing.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import msgspec

from aefgate.errors import Refusal

MIB = 1024 * 1024
MAX_DOC = 4 * MIB  # [ENC-17]: a JSON file or one NDJSON line
MAX_SEAL = 40 * MIB  # §9.3: the limit for a seal document
MAX_DEPTH = 64
MAX_LINES = 1_000_000
MAX_FILES = 100_000
MAX_BLOB = 1024 * MIB

BOM = b"\xef\xbb\xbf"
_CHUNK = 1 * MIB

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_BIG_DIGITS = re.compile(rb"[0-9]{309}")
_MAX_FLOAT_INT = int(
    # the largest integer that still rounds to a finite binary64: max float + half an ulp (exclusive)
    (2**1024 - 2**970)
)


class JsonProblem(Exception):
    """A document or line that does not read: ``code`` is ``encoding`` or ``limit`` (§3.9)."""

    def __init__(self, code: str, reason: str, rule: str = "ENC-1"):
        self.code = code
        self.reason = reason
        self.rule = rule
        super().__init__(f"{code}: {reason}")

    def refusal(self, where: str) -> Refusal:
        """The same problem as a :class:`Refusal`, for commands that refuse the input."""
        return Refusal(self.rule, self.reason, where)


class _Duplicate(Exception):
    pass


def _pairs_hook(pairs: list) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return d


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _depth(value: Any) -> int:
    """Nesting depth of objects and arrays (a scalar is 0, ``{}`` is 1), without recursion: level by level, keeping
    only the containers of the next level (a scalar is never pushed)."""
    level = [value] if type(value) in (dict, list) else []
    depth = 0
    while level:
        depth += 1
        nxt: list = []
        for v in level:
            items = v.values() if type(v) is dict else v
            nxt.extend([x for x in items if type(x) is dict or type(x) is list])
        level = nxt
    return depth


def _has_overflowing_int(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is int:
            if v >= _MAX_FLOAT_INT or v <= -_MAX_FLOAT_INT:
                return True
        elif t is dict:
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
    return False


def _too_deep(buf: bytes, value: Any, max_depth: int = MAX_DEPTH) -> bool:
    # a cheap certificate first (every level needs a bracket)
    return buf.count(b"{") + buf.count(b"[") > max_depth and _depth(value) > max_depth


def _overflows(buf: bytes, value: Any) -> bool:
    return (
        len(buf) >= 309
        and len(buf) - len(buf.translate(None, b"0123456789")) >= 309  # cheap: enough digits at all
        and _BIG_DIGITS.search(buf) is not None
        and _has_overflowing_int(value)
    )


def loads(buf: bytes, *, max_size: int = MAX_DOC, top_object: bool = True) -> Any:
    """Read one strict JSON text (see the module docstring). Raises :class:`JsonProblem`."""
    if len(buf) > max_size:
        raise JsonProblem("limit", f"{len(buf)} bytes, over the limit of {max_size}", "ENC-17")
    if buf[:3] == BOM:
        raise JsonProblem("encoding", "a byte-order mark", "ENC-1")
    try:
        value = _decoder.decode(buf)
    except RecursionError:  # msgspec stops at Python's recursion limit, far beyond MAX_DEPTH
        raise JsonProblem("limit", f"nesting deeper than {MAX_DEPTH}", "ENC-17") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        rule = "ENC-3" if "out of range" in msg else ("ENC-2" if "surrogate" in msg else "ENC-1")
        raise JsonProblem("encoding", msg, rule) from None
    if top_object and type(value) is not dict:
        raise JsonProblem("encoding", "the top-level value is not an object", "ENC-1")
    # depth: a cheap certificate first (every level needs a bracket); inline, as the size check below (the hot path)
    if buf.count(b"{") + buf.count(b"[") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise JsonProblem("limit", f"nesting deeper than {MAX_DEPTH}", "ENC-17")
    # duplicates: the re-encoding certificate, else the exact slow path
    if _encoder.encode(value) != buf.strip(b" \t\r\n"):
        try:
            json.loads(buf, object_pairs_hook=_pairs_hook, parse_constant=_refuse_constant)
        except _Duplicate as e:
            raise JsonProblem("encoding", f"member {e.args[0]!r} appears twice in one object", "ENC-2") from None
        except (ValueError, RecursionError) as e:  # pragma: no cover - msgspec already refused these
            raise JsonProblem("encoding", str(e), "ENC-1") from None
    if (
        len(buf) >= 309
        and len(buf) - len(buf.translate(None, b"0123456789")) >= 309  # cheap: enough digits at all
        and _BIG_DIGITS.search(buf)
        and _has_overflowing_int(value)
    ):
        raise JsonProblem("encoding", "a number overflows binary64", "ENC-3")
    return value


def _finite_float(text: str) -> float:
    f = float(text)
    if math.isinf(f):
        raise _Overflow(text)
    return f


def _bounded_int(text: str) -> int:
    if len(text) >= 309:  # (a sign counts: "-" and 308 digits still fits)
        v = int(text) if len(text) < 4300 else None
        if v is None or v >= _MAX_FLOAT_INT or v <= -_MAX_FLOAT_INT:
            raise _Overflow(text)
        return v
    return int(text)


class _Overflow(Exception):
    pass


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_in(value: Any) -> str | None:
    """The first string (member names included) holding an unpaired surrogate, or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            if _SURROGATE.search(v):
                return v
        elif t is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
    return None


def loads_tolerant(
    buf: bytes | memoryview, *, max_depth: int = MAX_DEPTH, nonfinite: bool = False, top_object: bool = False
) -> Any:
    """One JSON text read as lenient writers' readers read it (see the module docstring): a member given twice keeps
    its last value, ``NaN``/``Infinity``/``-Infinity`` are read as floats when ``nonfinite``, a byte-order mark is
    refused (the caller skips one where its format allows it). Still bounded: nesting deeper than ``max_depth``
    (``limit``, ENC-17), a number literal that overflows binary64 (``encoding``, ENC-3), an unpaired surrogate
    (``encoding``, ENC-2), text that is not UTF-8 or not JSON (``encoding``, ENC-1). Raises :class:`JsonProblem`."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    try:
        value = _decoder.decode(buf)
    except RecursionError:
        raise JsonProblem("limit", f"nesting deeper than {max_depth}", "ENC-17") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        if "out of range" in msg:
            raise JsonProblem("encoding", "a number overflows binary64", "ENC-3") from None
        # the standard library's reader says exactly what is wrong (msgspec calls a lone high surrogate at the end of
        # a string "truncated"), and reads what Python's json writes and msgspec refuses (NaN, Infinity)
        value = _stdlib_nonfinite(buf, max_depth, nonfinite)
        if not nonfinite:  # pragma: no cover - the standard library read what msgspec refused: refused all the same
            raise JsonProblem("encoding", msg, "ENC-1")
    else:
        if _too_deep(buf, value, max_depth):
            raise JsonProblem("limit", f"nesting deeper than {max_depth}", "ENC-17")
        if _overflows(buf, value):
            raise JsonProblem("encoding", "a number overflows binary64", "ENC-3")
    if top_object and type(value) is not dict:
        raise JsonProblem("encoding", "the top-level value is not an object", "ENC-1")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _stdlib_nonfinite(buf: bytes, max_depth: int, nonfinite: bool = True) -> Any:
    """What msgspec refuses: the standard library's reader, with the same bounds, taking ``NaN`` and ``Infinity``
    (what Python's ``json`` writes) when ``nonfinite``; raises :class:`JsonProblem` with what is wrong otherwise."""
    try:
        text = buf.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonProblem("encoding", f"not UTF-8 (byte {e.start})", "ENC-1") from None
    try:
        value = json.loads(text, parse_float=_finite_float, parse_int=_bounded_int,
                           **({} if nonfinite else {"parse_constant": _no_constant}))
    except _Overflow:
        raise JsonProblem("encoding", "a number overflows binary64", "ENC-3") from None
    except RecursionError:
        raise JsonProblem("limit", f"nesting deeper than {max_depth}", "ENC-17") from None
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string"):  # the text ends inside a value:
            # said as msgspec says it (callers tell a truncated file by these words)
            raise JsonProblem("encoding", "Input data was truncated", "ENC-1") from None
        raise JsonProblem("encoding", f"not JSON: {e}", "ENC-1") from None
    except ValueError as e:
        raise JsonProblem("encoding", f"not JSON: {e}", "ENC-1") from None
    if _depth(value) > max_depth:
        raise JsonProblem("limit", f"nesting deeper than {max_depth}", "ENC-17")
    if _surrogate_in(value) is not None:
        raise JsonProblem("encoding", "an unpaired surrogate escape (not Unicode text)", "ENC-2")
    return value


_lines_decoder = msgspec.json.Decoder()
_DIGIT_RUNS = bytes(48 if 48 <= i <= 57 else 120 for i in range(256))  # digits -> "0", every other byte -> "x"
_DIGITS_309 = b"0" * 309  # a number of 309 digits or more: maybe beyond binary64 ([ENC-3])


def loads_lines(data: bytes, count: int) -> list | None:
    """:func:`loads` of every line of ``data`` (``count`` whole lines, each ended by LF, none over ``MAX_DOC``) in
    two msgspec calls, when every line takes the fast path: the lines decode, each is an object, re-encoding them
    gives ``data`` back exactly (so no member was dropped: no duplicate, [ENC-2]), no line nests deeper than
    ``MAX_DEPTH`` and ``data`` holds no run of 309 digits ([ENC-3]). None otherwise: then read each line with
    :func:`loads`, which says which line fails and why. The same values :func:`loads` gives, line by line."""
    try:
        docs = _lines_decoder.decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(docs) != count or _encoder.encode_lines(docs) != data:
        return None
    if data[:3] == BOM or data.translate(_DIGIT_RUNS).find(_DIGITS_309) >= 0:
        return None
    for d in docs:
        if type(d) is not dict:
            return None
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH:  # some line may nest deep: check each
        start = 0
        for d in docs:
            end = data.index(b"\n", start)
            if data.count(b"{", start, end) + data.count(b"[", start, end) > MAX_DEPTH and _depth(d) > MAX_DEPTH:
                return None
            start = end + 1
    return docs


def read_json(path: str | Path, *, max_size: int = MAX_DOC, top_object: bool = True) -> Any:
    """Read a JSON file strictly. Raises :class:`JsonProblem` (a file over ``max_size`` is not read)."""
    p = Path(path)
    with open(p, "rb") as f:
        buf = f.read(max_size + 1)
    return loads(buf, max_size=max_size, top_object=top_object)


def iter_lines(
    f: BinaryIO,
    *,
    max_line: int = MAX_DOC,
    max_lines: int = MAX_LINES,
    on_bytes: Callable[[bytes], Any] | None = None,
) -> Iterator[tuple[int, bytes | None]]:
    """Split an NDJSON stream on LF, checking the framing as it goes ([ENC-5]..[ENC-7], [ENC-17]).

    Yields ``(lineno, line)`` (1-based, without the LF), or ``(lineno, None)`` for a line over ``max_line``
    bytes (a ``limit`` problem at ``<file>:<line>``; its bytes are skipped, never held whole). Raises
    :class:`JsonProblem` for a framing defect of the whole file (a BOM, a CR, a blank line, no final LF:
    ``encoding``) or more than ``max_lines`` lines (``limit``). ``on_bytes`` sees every byte read (a hash).
    """
    lineno = 0
    carry = b""
    skipping = False  # inside an over-long line
    first = True
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        if on_bytes is not None:
            on_bytes(chunk)
        if first:
            first = False
            if chunk[:3] == BOM:
                raise JsonProblem("encoding", "a byte-order mark", "ENC-5")
        if b"\r" in chunk:
            raise JsonProblem("encoding", "a CR (only LF separates lines)", "ENC-5")
        parts = chunk.split(b"\n")
        last = parts.pop()  # the unfinished tail (b"" when the chunk ends in LF)
        for part in parts:
            lineno += 1
            if lineno > max_lines:
                raise JsonProblem("limit", f"more than {max_lines} lines", "ENC-17")
            if skipping:
                skipping = False
                yield lineno, None
                continue
            if carry:
                part = carry + part
                carry = b""
            if not part:
                raise JsonProblem("encoding", f"a blank line (line {lineno})", "ENC-5")
            if len(part) > max_line:
                yield lineno, None
            else:
                yield lineno, part
        if skipping:
            continue
        if carry or last:
            if len(carry) + len(last) > max_line:
                carry = b""
                skipping = True
            else:
                carry += last
    if carry or skipping:
        raise JsonProblem("encoding", "the last line does not end in LF: the file is incomplete", "ENC-7")


def iter_ndjson(path: str | Path, *, max_line: int = MAX_DOC) -> Iterator[tuple[int, Any]]:
    """Read an NDJSON file strictly, one ``(lineno, value)`` at a time.

    Raises :class:`JsonProblem` at the first problem; its ``where`` attribute is set to ``<file>:<line>`` for a
    line problem. Use :func:`iter_lines` and :func:`loads` to collect every line's problem instead.
    """
    p = Path(path)
    with open(p, "rb") as f:
        for lineno, raw in iter_lines(f, max_line=max_line):
            if raw is None:
                e = JsonProblem("limit", f"line {lineno} is over {max_line} bytes", "ENC-17")
                e.lineno = lineno  # type: ignore[attr-defined]
                raise e
            try:
                yield lineno, loads(raw)
            except JsonProblem as e:
                e.lineno = lineno  # type: ignore[attr-defined]
                raise


# -- writing -------------------------------------------------------------------------------------------------------


def _enc_hook(obj: Any) -> Any:
    raise TypeError(f"cannot write a {type(obj).__name__} as JSON")


_writer = msgspec.json.Encoder(enc_hook=_enc_hook)


def _check_finite(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                raise Refusal("ENC-3", "a number that is not finite cannot be written")
        elif t is dict:
            stack.extend(v.values())
        elif t is list or t is tuple:
            stack.extend(v)


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8, integers in plain digits; refuses NaN and infinities ([ENC-3])."""
    if not isinstance(obj, (dict, list)):
        obj = msgspec.to_builtins(obj)
    out = _writer.encode(obj)
    # msgspec writes NaN and the infinities as null: bytes without "null" held only finite numbers, and the walk
    # that finds the offending number is needed only when "null" occurs (a null, or the word in a string)
    if b"null" in out:
        _check_finite(obj)
    return out


def dump_line(obj: Any) -> bytes:
    """One NDJSON line: :func:`dumps` and an LF."""
    return dumps(obj) + b"\n"
