"""OTLP logs and traces, in both encodings (OTLP specification 1.x, "OTLP/JSON" and protobuf).

- **OTLP/JSON** (what a run's ``logs.otlp.jsonl`` / ``traces.otlp.jsonl`` and OpenTelemetry's file exporter hold):
  one ``LogsData`` / ``TracesData`` object per line, lowerCamelCase keys, trace and span ids as lowercase hex,
  64-bit integers as decimal strings; unknown fields are ignored by readers. Lines are read strictly (I-JSON,
  :mod:`aefgate.aef.jsonio`), one at a time.
- **OTLP protobuf**: a request body (``ExportLogsServiceRequest`` / ``ExportTraceServiceRequest``, the same fields
  as ``LogsData`` / ``TracesData``), parsed and written by ``opentelemetry-proto``'s generated messages, never by
  hand; gzip-compressed bodies are read too. :func:`to_json` and :func:`from_json` convert between the two with
  protobuf's own JSON mapping plus OTLP/JSON's one difference (ids in hex, not base64).

Refusals: ``OTLP-1`` a file or body that is not OTLP in the encoding it claims (with its place: ``file:line``).
"""

from __future__ import annotations

import base64
import copy
import datetime
import functools
import gzip
import os
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.times import parse_time

__all__ = ["MAX_BODY", 
    "SIGNALS",
    "attributes",
    "decode_body",
    "encode_body",
    "from_json",
    "is_null_id",
    "iter_file",
    "nanos_to_time",
    "time_to_nanos",
    "to_json",
    "value_of",
]

SIGNALS = ("logs", "traces")
_TOP = {"logs": "resourceLogs", "traces": "resourceSpans"}
MAX_BODY = 64 * 1024 * 1024  # a decompressed request body, at most (a gzip bomb is refused past it)


def _request_type(signal: str) -> Any:
    if signal == "logs":
        # lazy: opentelemetry-proto and protobuf (heavy): only where a request is (de)coded
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        return ExportLogsServiceRequest
    if signal == "traces":
        # lazy: opentelemetry-proto and protobuf (heavy)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        return ExportTraceServiceRequest
    raise ValueError(f"signal is logs or traces, not {signal!r}")


# -- ids: hex in OTLP/JSON, base64 in protobuf's JSON mapping ------------------------------------------------------


def _items_with_ids(doc: Mapping[str, Any], signal: str) -> Iterator[tuple[dict, tuple[str, ...]]]:
    def lst(x: Any, key: str) -> list:
        v = x.get(key) if isinstance(x, dict) else None
        return v if isinstance(v, list) else []

    if signal == "logs":
        for rl in lst(doc, "resourceLogs"):
            for sl in lst(rl, "scopeLogs"):
                for rec in lst(sl, "logRecords"):
                    if isinstance(rec, dict):
                        yield rec, ("traceId", "spanId")
    else:
        for rs in lst(doc, "resourceSpans"):
            for ss in lst(rs, "scopeSpans"):
                for sp in lst(ss, "spans"):
                    if isinstance(sp, dict):
                        yield sp, ("traceId", "spanId", "parentSpanId")
                        for link in lst(sp, "links"):
                            if isinstance(link, dict):
                                yield link, ("traceId", "spanId")


def _recode_ids(doc: dict, signal: str, to_hex: bool, where: str) -> dict:
    for item, keys in _items_with_ids(doc, signal):
        for k in keys:
            v = item.get(k)
            if not isinstance(v, str) or v == "":
                continue
            try:
                item[k] = base64.b64decode(v, validate=True).hex() if to_hex else \
                    base64.b64encode(bytes.fromhex(v)).decode("ascii")
            except ValueError:
                raise Refusal("OTLP-1", f"{k} {v!r} is not {'base64' if to_hex else 'hex'}", where) from None
    return doc


_ID_FIELDS = frozenset({"trace_id", "span_id", "parent_span_id"})
_MSG, _HEX, _B64, _INT64, _DOUBLE, _OTHER = range(6)
_PLAN: dict[Any, tuple[str, int, bool]] = {}  # field descriptor -> (JSON name, kind, repeated)


def _plan(fd: Any) -> tuple[str, int, bool]:
    from google.protobuf.descriptor import FieldDescriptor as F  # lazy: protobuf (heavy)

    if fd.type == F.TYPE_MESSAGE:
        kind = _MSG
    elif fd.type == F.TYPE_BYTES:
        kind = _HEX if fd.name in _ID_FIELDS else _B64
    elif fd.type in (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64, F.TYPE_SINT64):
        kind = _INT64
    elif fd.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        kind = _DOUBLE
    else:
        kind = _OTHER
    repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == F.LABEL_REPEATED
    plan = _PLAN[fd] = (fd.json_name, kind, bool(repeated))
    return plan


def _one(kind: int, v: Any) -> Any:
    if kind == _MSG:
        return _plain(v)
    if kind == _HEX:
        return v.hex()
    if kind == _B64:
        return base64.b64encode(v).decode("ascii")
    if kind == _INT64:
        return str(v)
    if kind == _DOUBLE:
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"
    return v


_KV = "opentelemetry.proto.common.v1.KeyValue"
_ANY = "opentelemetry.proto.common.v1.AnyValue"
_SCALAR = {"string_value": "stringValue", "bool_value": "boolValue"}


def _any_value(v: Any) -> dict:
    """An ``AnyValue`` as :func:`_plain` gives it, without the generic walk (most of a request's values)."""
    which = v.WhichOneof("value")
    if which is None:
        return {}
    if which in _SCALAR:
        return {_SCALAR[which]: getattr(v, which)}
    if which == "int_value":
        return {"intValue": str(v.int_value)}
    if which == "double_value":
        return {"doubleValue": _one(_DOUBLE, v.double_value)}
    return _plain(v)


def _plain(message: Any) -> dict:
    """A message as protobuf's JSON mapping gives it (``MessageToDict(use_integers_for_enums=True)``: lowerCamelCase
    names, 64-bit integers as strings, bytes in base64, enums as numbers, fields at their default left out), but
    with OTLP/JSON's trace and span ids in hex, walking the generated message's set fields directly (the generic
    mapping is most of a request's decoding time); the tests compare both."""
    out: dict[str, Any] = {}
    for fd, value in message.ListFields():
        plan = _PLAN.get(fd) or _plan(fd)
        name, kind, repeated = plan
        if repeated:
            if kind == _MSG and fd.message_type.full_name == _KV:  # attributes: the bulk of a request
                out[name] = [{"key": kv.key, "value": _any_value(kv.value)} if kv.key and kv.HasField("value")
                             else _plain(kv) for kv in value]
            else:
                out[name] = [_one(kind, v) for v in value]
        elif kind == _MSG:
            out[name] = _plain(value)
        elif kind == _OTHER:
            out[name] = value
        else:
            out[name] = _one(kind, value)
    return out


def to_json(message: Any, signal: str, where: str = "") -> dict:
    """A protobuf request (or ``LogsData`` / ``TracesData``) as its OTLP/JSON object."""
    return _plain(message)


def from_json(doc: Mapping[str, Any], signal: str, where: str = "") -> Any:
    """An OTLP/JSON object as the protobuf request of its signal (unknown fields ignored, as OTLP/JSON says)."""
    from google.protobuf.json_format import ParseDict, ParseError  # lazy: protobuf (heavy)

    d = _recode_ids(copy.deepcopy(dict(doc)), signal, False, where)
    msg = _request_type(signal)()
    try:
        ParseDict(d, msg, ignore_unknown_fields=True)
    except (ParseError, ValueError, TypeError) as e:
        raise Refusal("OTLP-1", f"not OTLP/JSON {signal}: {e}", where) from None
    return msg


def decode_body(data: bytes, signal: str, *, content_type: str = "application/x-protobuf",
                content_encoding: str | None = None, where: str = "") -> dict:
    """An OTLP/HTTP request body (protobuf or JSON, gzip or not) as its OTLP/JSON object. ``OTLP-1`` for one that
    does not decode; ``OTLP-2`` for one that decompresses past :data:`MAX_BODY`."""
    if (content_encoding or "").lower() == "gzip" or data[:2] == b"\x1f\x8b":
        data = _gunzip(data, where)
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            doc = jsonio.loads(data, max_size=MAX_BODY)
        except jsonio.JsonProblem as e:
            raise Refusal("OTLP-1", f"not JSON: {e.reason}", where) from None
        if not isinstance(doc.get(_TOP[signal], []), list):
            raise Refusal("OTLP-1", f"{_TOP[signal]} is a list", where)
        from_json(doc, signal, where)  # the same checks a protobuf body gets (types, ids)
        return doc
    from google.protobuf.message import DecodeError  # lazy: protobuf (heavy)

    msg = _request_type(signal)()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError) as e:
        raise Refusal("OTLP-1", f"not an OTLP protobuf {signal} request: {e}", where) from None
    return to_json(msg, signal, where)


def encode_body(doc: Mapping[str, Any], signal: str, encoding: str = "protobuf") -> bytes:
    """An OTLP/JSON object as a request body: ``protobuf`` (the default of OTLP/HTTP) or ``json``."""
    if encoding == "json":
        return jsonio.dumps(doc)
    return from_json(doc, signal).SerializeToString()


def _gunzip(data: bytes, where: str) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, MAX_BODY + 1)
    except zlib.error as e:
        raise Refusal("OTLP-1", f"not gzip: {e}", where) from None
    if len(out) > MAX_BODY or d.unconsumed_tail:
        raise Refusal("OTLP-2", f"the body decompresses past {MAX_BODY} bytes", where)
    return out


# -- files ---------------------------------------------------------------------------------------------------------


def iter_file(path: str | os.PathLike[str], signal: str) -> Iterator[tuple[str, dict]]:
    """The OTLP/JSON objects of a file, one at a time, with their place: a ``.pb`` file is one protobuf request
    body (gzip or not); any other file is OTLP/JSON as it comes: JSON Lines (one object per line, the file
    exporter's form) or one document spread over lines (pretty-printed, as the opentelemetry-proto examples are),
    gzip or not. A UTF-8 byte-order mark, CRLF line ends, blank lines and any JSON white space around an object are
    tolerated (they are not the object); each object is read by the one JSON reader (:mod:`jsonio`)."""
    p = Path(path)
    if p.suffix.lower() in (".pb", ".protobuf", ".bin"):
        data = p.read_bytes()
        yield f"{p}", decode_body(data, signal, where=str(p))
        return
    with open(p, "rb") as f:
        head = f.read(2)
        f.seek(0)
        stream: Any = gzip.GzipFile(fileobj=f) if head == b"\x1f\x8b" else f
        try:
            yield from _json_objects(p, stream, signal)
        except (OSError, EOFError, zlib.error) as e:
            raise Refusal("OTLP-1", f"cannot read {p.name}: {e}", str(p)) from None


_WS = b" \t\r\n"


def _json_objects(p: Path, stream: Any, signal: str) -> Iterator[tuple[str, dict]]:
    """JSON Lines, or (when the first object does not end on its first line) one document over the whole file."""
    lineno = 0
    first = True
    while True:
        raw = stream.readline(jsonio.MAX_DOC + 2)
        if not raw:
            return
        lineno += 1
        where = f"{p}:{lineno}"
        if len(raw) > jsonio.MAX_DOC + 1 and not raw.endswith(b"\n"):
            raise Refusal("OTLP-1", f"a line over {jsonio.MAX_DOC} bytes", where)
        if first and raw.startswith(jsonio.BOM):
            raw = raw[len(jsonio.BOM):]
        text = raw.strip(_WS)
        if not text:
            continue
        try:
            doc = jsonio.loads(text)
        except jsonio.JsonProblem as e:
            if not first:
                raise Refusal("OTLP-1", f"not an OTLP/JSON object: {e.reason} (an OTLP/JSON file holds one object "
                                        "per line, or one document)", where) from None
            # one document over several lines: the rest of the file is read whole (bounded)
            rest = stream.read(MAX_BODY + 1 - len(raw))
            whole = (raw + rest).strip(_WS)
            if len(raw) + len(rest) > MAX_BODY:
                raise Refusal("OTLP-1", f"an OTLP/JSON document over {MAX_BODY} bytes", str(p))
            try:
                doc = jsonio.loads(whole, max_size=MAX_BODY)
            except jsonio.JsonProblem as e2:
                raise Refusal("OTLP-1", f"not an OTLP/JSON object: {e2.reason} (an OTLP/JSON file holds one "
                                        "object per line, or one document)", str(p)) from None
            yield str(p), _checked(doc, signal, str(p))
            return
        first = False
        yield where, _checked(doc, signal, where)


def _checked(doc: Any, signal: str, where: str) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get(_TOP[signal], []), list):
        raise Refusal("OTLP-1", f"not OTLP/JSON {signal}: {_TOP[signal]} is not a list", where)
    other = _TOP["traces" if signal == "logs" else "logs"]
    if _TOP[signal] not in doc and other in doc:
        raise Refusal("OTLP-1", f"OTLP/JSON {'traces' if signal == 'logs' else 'logs'}, where {signal} "
                                "are expected", where)
    return doc


def is_null_id(value: Any) -> bool:
    """An absent or all-zero trace or span id: OTLP's "no parent" (an empty id, or only ``0`` digits)."""
    return not isinstance(value, str) or not value.strip("0")


# -- values --------------------------------------------------------------------------------------------------------


_ANY_KEYS = frozenset({"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue",
                       "bytesValue"})
_INT64 = (-(2**63), 2**63 - 1)


def value_of(any_value: Any, where: str = "") -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value (``intValue`` as int; arrays and kvlists recursively); None for
    an empty one. ``OTLP-1`` for one that is not an ``AnyValue`` of OTLP's proto: more than one member of its
    ``value`` oneof, an ``intValue`` that is not an int64 (a decimal string or an integer), a ``doubleValue`` that is
    not a number (or ``NaN``/``Infinity``/``-Infinity``, as proto3 JSON writes them)."""
    if not isinstance(any_value, dict) or not any_value:
        return None
    if len(any_value) > 1 and sum(1 for k in any_value if k in _ANY_KEYS) > 1:
        raise Refusal("OTLP-1", f"an AnyValue holds one value, not {sorted(k for k in any_value if k in _ANY_KEYS)} "
                                "(the value oneof)", where)
    k, v = next(((k, v) for k, v in any_value.items() if k in _ANY_KEYS), next(iter(any_value.items())))
    if k == "intValue":
        if isinstance(v, str) and v.lstrip("-").isdigit() and v.isascii() and len(v) <= 20:
            n = int(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            n = v
        else:
            raise Refusal("OTLP-1", f"intValue is an int64 (a decimal string or an integer), not {str(v)[:40]!r}",
                          where)
        if not _INT64[0] <= n <= _INT64[1]:
            raise Refusal("OTLP-1", f"intValue {str(n)[:40]} is outside int64", where)
        return n
    if k == "doubleValue":
        if isinstance(v, str):
            if v not in ("NaN", "Infinity", "-Infinity"):
                raise Refusal("OTLP-1", f"doubleValue is a number, not {v[:40]!r}", where)
            return float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Refusal("OTLP-1", f"doubleValue is a number, not {str(v)[:40]!r}", where)
        return v
    if k == "arrayValue":
        return [value_of(x, where) for x in (v or {}).get("values", [])]
    if k == "kvlistValue":
        return {kv.get("key"): value_of(kv.get("value"), where) for kv in (v or {}).get("values", [])}
    return v


def attributes(attrs: Iterable[Any] | None) -> dict[str, Any]:
    """A list of OTLP/JSON ``KeyValue`` as ``{key: AnyValue}`` (the raw value object, the last of a repeated
    key)."""
    out: dict[str, Any] = {}
    for a in attrs or ():
        if isinstance(a, dict) and isinstance(a.get("key"), str):
            out[a["key"]] = a.get("value")
    return out


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def nanos_to_time(nanos: Any) -> str | None:
    """``timeUnixNano`` (a decimal string or an integer) as an [ENC-8] UTC time, fraction digits trimmed; None for
    0 or absent (unknown)."""
    if nanos in (None, "", 0, "0"):
        return None
    if isinstance(nanos, bool) or not isinstance(nanos, (int, str)):
        raise ValueError("not a fixed64")
    n = int(nanos)
    if not 0 < n < 1 << 64:  # OTLP's fixed64: never negative ("-5" is no time before 1970), at most 2**64 - 1
        raise ValueError("outside fixed64")
    secs, frac = divmod(n, 1_000_000_000)
    text = _second_text(secs)
    digits = f"{frac:09d}".rstrip("0")
    return text + ("." + digits if digits else "") + "Z"


@functools.lru_cache(maxsize=4096)
def _second_text(secs: int) -> str:
    """The whole seconds of a time, ``YYYY-MM-DDTHH:MM:SS`` (events of one second share it: cached)."""
    return (_EPOCH + datetime.timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")


def time_to_nanos(text: str) -> int:
    """An [ENC-8] UTC time as nanoseconds since 1970 (``ValueError`` for one that is not, or is before 1970)."""
    secs, nanos = parse_time(text)
    unix = secs - _EPOCH_ORDINAL_SECS
    if unix < 0:
        raise ValueError("before 1970")
    return unix * 1_000_000_000 + nanos


_EPOCH_ORDINAL_SECS = datetime.date(1970, 1, 1).toordinal() * 86400
