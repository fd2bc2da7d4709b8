"""AEP Events on the CloudEvents wire: the JSON event format and the HTTP, Kafka and AMQP protocol bindings.

Every ``to_*`` function takes an AEP Event (a dict), maps it with :func:`ce_forward` and hands the CloudEvent to
the ``cloudevents`` SDK's 2.x bindings (``cloudevents.core.formats.json.JSONFormat``,
``cloudevents.core.bindings.http`` / ``.kafka`` / ``.amqp``); every ``from_*`` function reads a message through
the same bindings and returns the AEP Event (:func:`ce_inverse`). Refusals are :class:`aefgate.errors.Refusal`.

Where the SDK departs from the CloudEvents specification, or from AEP-0005's bit-for-bit inverse, aefgate works
around it here, and only here (docs/design/cloudevents-bridge.md, "SDK deviations"):

1. ``time``: the SDK's ``CloudEvent`` holds ``time`` as a ``datetime`` and its readers parse it with
   ``dateutil.isoparse``. Writing re-renders it (``.000Z`` becomes ``Z``, ``.221Z`` becomes ``.221000Z``) and
   digits past the microsecond are cut (a changed value); reading accepts texts that are not RFC 3339
   (``20260703T101504Z``, a date alone). So the bridge hands the SDK's writers an event object of its own
   (:class:`_WireEvent`, the SDK's ``BaseCloudEvent`` protocol) whose ``time`` is the RFC 3339 string as written,
   and on reading takes ``time`` from the raw header / property (percent-decoded as the SDK does).
2. Booleans: the SDK writes an extension boolean into an HTTP or Kafka header with ``str()`` (``True``); the
   CloudEvents type system's canonical string is ``true`` / ``false``. The bridge passes the canonical strings.
3. Structured mode and batches are read with aefgate's strict JSON reader (``jsonio.loads``: I-JSON, a member
   twice is refused), not with the SDK's ``json.loads`` (which keeps the last of two members silently); a batch
   (``application/cloudevents-batch+json``) has no SDK support at all.
4. Binary-mode bodies are parsed strictly too (the SDK falls back to a text string when JSON does not parse).

Binary modes carry no types (CloudEvents: every header is a string): the bridge restores the two integer
attributes it knows (``aepsequence``, ``aepepoch``); an integer or boolean AEP extension attribute comes back as
its canonical string through binary HTTP and Kafka (AMQP keeps native types).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping
from urllib.parse import unquote

from cloudevents.core.bindings import amqp as ce_amqp
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.formats.json import JSONFormat

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.formats.cloudevents.mapping import Diagnostic, _json_type, ce_forward, ce_inverse

__all__ = [
    "STRUCTURED_CONTENT_TYPE",
    "BATCH_CONTENT_TYPE",
    "to_structured",
    "from_structured",
    "to_binary_http",
    "to_structured_http",
    "to_batch_http",
    "from_http",
    "to_kafka",
    "from_kafka",
    "to_amqp",
    "from_amqp",
]

STRUCTURED_CONTENT_TYPE = JSONFormat.CONTENT_TYPE  # application/cloudevents+json
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"
_FORMAT = JSONFormat()
_INT_ATTRS = ("aepsequence", "aepepoch")
_CANONICAL_UINT = re.compile(r"0|[1-9][0-9]{0,9}")
_JSON_MEDIA = JSONFormat.JSON_CONTENT_TYPE_PATTERN


class _WireEvent:
    """A CloudEvent as the SDK's bindings read it (``cloudevents.core.base.BaseCloudEvent``), holding attribute
    values exactly as the bridge gives them (``time`` the RFC 3339 string as written: SDK deviation 1)."""

    __slots__ = ("_attributes", "_data")

    def __init__(self, attributes: dict[str, Any], data: Any = None) -> None:
        self._attributes = attributes
        self._data = data

    def get_attributes(self) -> dict[str, Any]:
        return dict(self._attributes)

    def get_data(self) -> Any:
        return self._data

    def get_extension(self, name: str) -> Any:
        return self._attributes.get(name)

    def get_id(self) -> str:
        return self._attributes["id"]

    def get_source(self) -> str:
        return self._attributes["source"]

    def get_type(self) -> str:
        return self._attributes["type"]

    def get_specversion(self) -> str:
        return self._attributes["specversion"]

    def get_datacontenttype(self) -> str | None:
        return self._attributes.get("datacontenttype")

    def get_dataschema(self) -> str | None:
        return self._attributes.get("dataschema")

    def get_subject(self) -> str | None:
        return self._attributes.get("subject")

    def get_time(self) -> Any:
        return self._attributes.get("time")


def _split(ce: dict, *, strings: bool) -> _WireEvent:
    """The CE dict as a :class:`_WireEvent`; with ``strings``, every attribute in its canonical string form (for
    bindings whose headers are strings: SDK deviation 2)."""
    attrs: dict[str, Any] = {}
    for k, v in ce.items():
        if k == "data":
            continue
        if strings and type(v) is not str:
            v = ("true" if v else "false") if type(v) is bool else str(v)
        attrs[k] = v
    return _WireEvent(attrs, ce.get("data"))


def _inverse(ce: dict, where: str, diagnostics: list[Diagnostic] | None) -> dict:
    return ce_inverse(ce, where, diagnostics=diagnostics)


def _strict_json(buf: bytes, where: str, *, top_object: bool = True) -> Any:
    try:
        return jsonio.loads(buf, top_object=top_object)
    except jsonio.JsonProblem as e:
        raise Refusal("CE-1", f"not a JSON text: {e.reason}", where) from None


def _media(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


def _restore_types(attrs: dict[str, Any], where: str) -> None:
    """Binary modes carry strings: the integer attributes the bridge knows get their type back."""
    for name in _INT_ATTRS:
        v = attrs.get(name)
        if type(v) is str:
            if not _CANONICAL_UINT.fullmatch(v):
                raise Refusal("B4", f"{name} must be an integer >= 0 in its canonical string form, not {v!r}",
                              f"{where}/{name}" if where else name)
            attrs[name] = int(v)


def _binary_ce(event: Any, raw_time: str | None, body: bytes, content_type: str | None, where: str) -> dict:
    """The structured-JSON dict of a binary-mode message read by the SDK (``event`` is our :class:`_WireEvent`)."""
    attrs = event.get_attributes()
    for name in ("data", "data_base64"):
        if name in attrs:
            raise Refusal("CE-6", f"{name} is not a CloudEvents attribute: in binary mode the data is the body", where)
    if raw_time is not None:
        attrs["time"] = raw_time  # SDK deviation 1
    _restore_types(attrs, where)
    ce = dict(attrs)
    if body:
        if content_type is not None and not _JSON_MEDIA.match(content_type):
            raise Refusal("CE-3", f"the body's media type {content_type!r} is not JSON: it cannot be an AEP payload",
                          where)
        ce["data"] = _strict_json(body, where, top_object=False)  # SDK deviation 4
    return ce


def _sdk_read(reader: Any, *args: Any, where: str) -> Any:
    """Run an SDK reader with a factory that keeps what it read, turning its exceptions into refusals."""
    try:
        return reader(*args, _FORMAT, _WireEvent)
    except Refusal:
        raise
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError) as e:
        raise Refusal("CE-1", f"the CloudEvents binding does not read this message: {e}", where) from None


# -- the JSON event format (structured mode) --------------------------------------------------------------------


def to_structured(event: dict) -> bytes:
    """The AEP Event as one CloudEvent in the JSON event format (``application/cloudevents+json``)."""
    return _FORMAT.write(_split(ce_forward(event), strings=False))


def from_structured(data: bytes, *, where: str = "", diagnostics: list[Diagnostic] | None = None) -> dict:
    """The AEP Event of one JSON-format CloudEvent (strict JSON: SDK deviation 3)."""
    return _inverse(_strict_json(data, where), where, diagnostics)


# -- HTTP -----------------------------------------------------------------------------------------------------------


def to_binary_http(event: dict) -> tuple[dict[str, str], bytes]:
    """HTTP binary content mode: ``(headers, body)`` (``ce-*`` headers, ``content-type`` for the data)."""
    msg = ce_http.to_binary(_split(ce_forward(event), strings=True), _FORMAT)
    return dict(msg.headers), msg.body


def to_structured_http(event: dict) -> tuple[dict[str, str], bytes]:
    """HTTP structured content mode: ``({"content-type": "application/cloudevents+json"}, body)``."""
    msg = ce_http.to_structured(_split(ce_forward(event), strings=False), _FORMAT)
    return dict(msg.headers), msg.body


def to_batch_http(events: Iterable[dict]) -> tuple[dict[str, str], bytes]:
    """HTTP batched content mode: a JSON array of JSON-format CloudEvents (the SDK has no batch writer)."""
    parts = [to_structured(e) for e in events]
    return {"content-type": BATCH_CONTENT_TYPE}, b"[" + b",".join(parts) + b"]"


def from_http(headers: Mapping[str, str], body: bytes, *, where: str = "",
              diagnostics: list[Diagnostic] | None = None) -> dict | list[dict]:
    """The AEP Event(s) of an HTTP message: binary mode (any ``ce-`` header, the SDK's rule), structured mode
    (``application/cloudevents+json``), or a batch (``application/cloudevents-batch+json``: a list)."""
    lower: dict[str, str] = {}
    for k, v in headers.items():
        if type(k) is not str or type(v) is not str:
            raise Refusal("CE-6", "HTTP header names and values are strings", where)
        lk = k.lower()
        if lk in lower:
            raise Refusal("CE-6", f"the header {lk!r} appears twice (in two spellings)", where)
        lower[lk] = v
    body = bytes(body or b"")
    content_type = lower.get("content-type")
    if any(k.startswith(ce_http.CE_PREFIX) for k in lower):
        raw_time = lower.get("ce-time")
        ev = _sdk_read(ce_http.from_binary, ce_http.HTTPMessage(headers=lower, body=b""), where=where)
        ce = _binary_ce(ev, unquote(raw_time) if raw_time is not None else None, body, content_type, where)
        return _inverse(ce, where, diagnostics)
    media = _media(content_type)
    if media == BATCH_CONTENT_TYPE:
        batch = _strict_json(body, where, top_object=False)
        if type(batch) is not list:
            raise Refusal("CE-6", f"a batch is a JSON array, not {_json_type(batch)}", where)
        out = []
        for i, item in enumerate(batch):
            out.append(_inverse(item, f"{where}[{i}]" if where else f"[{i}]", diagnostics))
        return out
    if media == STRUCTURED_CONTENT_TYPE:
        return from_structured(body, where=where, diagnostics=diagnostics)
    raise Refusal("CE-6", f"not a CloudEvents HTTP message: no ce- header, and content-type {content_type!r} is "
                  f"neither {STRUCTURED_CONTENT_TYPE} nor {BATCH_CONTENT_TYPE}", where)


# -- Kafka ----------------------------------------------------------------------------------------------------------


def to_kafka(event: dict, *, structured: bool = False) -> tuple[str | bytes | None, dict[str, bytes], bytes]:
    """Kafka: ``(key, headers, value)``, binary content mode (``ce_*`` headers) unless ``structured``.

    The key is the event's ``partitionkey`` extension attribute (the CloudEvents Partitioning extension, the
    SDK's default key mapper), None without one.
    """
    wire = _split(ce_forward(event), strings=not structured)
    msg = (ce_kafka.to_structured if structured else ce_kafka.to_binary)(wire, _FORMAT)
    return msg.key, dict(msg.headers), msg.value


def from_kafka(key: str | bytes | None, headers: Mapping[str, bytes], value: bytes, *, where: str = "",
               diagnostics: list[Diagnostic] | None = None) -> dict:
    """The AEP Event of a Kafka message (binary mode when a ``ce_`` header is present, else structured). A key
    becomes the ``partitionkey`` extension attribute (CloudEvents Kafka binding)."""
    hdrs: dict[str, bytes] = {}
    for k, v in headers.items():
        if type(k) is not str or not isinstance(v, (bytes, bytearray)):
            raise Refusal("CE-6", "Kafka header names are strings and values bytes", where)
        hdrs[k] = bytes(v)
    if any(k.lower().startswith(ce_kafka.CE_PREFIX) for k in hdrs):
        raw_time = next((v for k, v in hdrs.items() if k.lower() == "ce_time"), None)
        ev = _sdk_read(ce_kafka.from_binary, ce_kafka.KafkaMessage(headers=hdrs, key=key, value=b""), where=where)
        content_type = next((v.decode("utf-8", "replace") for k, v in hdrs.items() if k.lower() == "content-type"),
                            None)
        try:
            time_text = raw_time.decode("utf-8") if raw_time is not None else None
        except UnicodeDecodeError:
            raise Refusal("CE-1", "the ce_time header is not UTF-8", where) from None
        ce = _binary_ce(ev, time_text, bytes(value or b""), content_type, where)
        return _inverse(ce, where, diagnostics)
    ce = _strict_json(bytes(value or b""), where)
    if key is not None:  # as the SDK's structured reader does
        try:
            ce["partitionkey"] = key.decode("utf-8") if isinstance(key, bytes) else key
        except UnicodeDecodeError:
            raise Refusal("CE-6", "the Kafka key is not UTF-8", where) from None
    return _inverse(ce, where, diagnostics)


# -- AMQP -----------------------------------------------------------------------------------------------------------


def to_amqp(event: dict, *, structured: bool = False) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """AMQP 1.0: ``(properties, application_properties, application_data)``, binary content mode
    (``cloudEvents_*`` application properties, native integer and boolean values; ``time`` in its canonical
    string form, which the AMQP binding allows and which keeps it exact) unless ``structured``."""
    wire = _split(ce_forward(event), strings=False)
    msg = (ce_amqp.to_structured if structured else ce_amqp.to_binary)(wire, _FORMAT)
    return dict(msg.properties), dict(msg.application_properties), msg.application_data


def _render_time(dt: datetime) -> str:
    """An AMQP timestamp (milliseconds) as RFC 3339 UTC with milliseconds."""
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{dt.microsecond // 1000:03d}Z"


def from_amqp(properties: Mapping[str, Any], application_properties: Mapping[str, Any], application_data: bytes,
              *, where: str = "", diagnostics: list[Diagnostic] | None = None) -> dict:
    """The AEP Event of an AMQP message (binary mode when a ``cloudEvents_`` / ``cloudEvents:`` application
    property is present, else structured)."""
    props, app = dict(properties), dict(application_properties)
    prefixes = (ce_amqp.CE_PREFIX_UNDERSCORE, ce_amqp.CE_PREFIX_COLON)
    if any(type(k) is str and k.startswith(prefixes) for k in app):
        raw_time = next((v for k, v in app.items() if k in ("cloudEvents_time", "cloudEvents:time")), None)
        ev = _sdk_read(ce_amqp.from_binary, ce_amqp.AMQPMessage(properties=props, application_properties=app,
                                                                application_data=b""), where=where)
        if type(raw_time) is str:
            time_text: str | None = raw_time
        elif isinstance(ev.get_time(), datetime):  # a native AMQP timestamp
            time_text = _render_time(ev.get_time())
        else:
            time_text = None
        ce = _binary_ce(ev, time_text, bytes(application_data or b""), props.get("content-type"), where)
        return _inverse(ce, where, diagnostics)
    return from_structured(bytes(application_data or b""), where=where, diagnostics=diagnostics)
