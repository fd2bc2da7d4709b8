"""The wire forms of an AEP event for each destination (docs/design/bus.md, "Formats").

``format="aep"``: the AEP event itself, compact JSON (``application/json``). ``format="cloudevents"``: the AEP-0005
bridge (:mod:`aefgate.formats.cloudevents`), in ``structured`` mode (the JSON event format,
``application/cloudevents+json``) or ``binary`` mode (attributes as ``ce-`` headers, the data as the body).

The CloudEvents NATS protocol binding (1.0.1) is built here from the HTTP binding's pieces: the ``cloudevents`` SDK
has no NATS binding. Binary mode: every context attribute is a NATS header ``ce-<name>`` (the same header names and
values as the HTTP binding, percent-encoded where HTTP requires it, which also keeps every value a valid NATS
header line), ``datacontenttype`` is ``content-type``, the data is the payload. Structured mode: the payload is the
JSON event format, with the header ``content-type: application/cloudevents+json``.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Mapping

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.formats.cloudevents import (
    BATCH_CONTENT_TYPE,
    STRUCTURED_CONTENT_TYPE,
    ce_forward,
    from_http,
    from_structured,
    to_batch_http,
    to_binary_http,
)

FORMATS = ("aep", "cloudevents")
MODES = ("structured", "binary")
AEP_CONTENT_TYPE = "application/json"


def message(event: dict, fmt: str, mode: str) -> tuple[dict[str, str], bytes]:
    """``(headers, body)`` of one event: the HTTP binding's message, and the NATS binding's (same headers)."""
    if fmt == "aep":
        return {"content-type": AEP_CONTENT_TYPE}, jsonio.dumps(event)
    if mode == "binary":
        return to_binary_http(event)
    # the JSON event format of the bridge's CloudEvent (what ``export cloudevents`` writes per line), with aefgate's
    # JSON writer: the same CloudEvent as ``to_structured_http`` gives, about twice as fast as the SDK's writer
    return {"content-type": STRUCTURED_CONTENT_TYPE}, jsonio.dumps(ce_forward(event))


def batch(events: Iterable[dict], fmt: str) -> tuple[dict[str, str], bytes]:
    """One HTTP request carrying several events: ``application/cloudevents-batch+json`` (or a JSON array of AEP
    events, ``application/json``)."""
    if fmt == "aep":
        return {"content-type": AEP_CONTENT_TYPE}, b"[" + b",".join(jsonio.dumps(e) for e in events) + b"]"
    return to_batch_http(events)


def line(event: dict, fmt: str, mode: str) -> bytes:
    """One JSONL line for a file or stdout: the AEP event; the structured CloudEvent; or, in binary mode, the
    HTTP binary-mode message as ``{"headers", "body"}`` (the line shape of ``aefgate export cloudevents``)."""
    if fmt == "aep":
        return jsonio.dump_line(event)
    if mode == "binary":
        headers, body = to_binary_http(event)
        return jsonio.dump_line({"headers": headers, "body": body.decode("utf-8")})
    return jsonio.dump_line(ce_forward(event))


# nats-py's own rules for a header block (nats/aio/client.py, ``Client._send_publish``, 2.16): a name is an RFC 7230
# token, CR and LF in a value are written as spaces, names and values are stripped
_NATS_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NATS_NEWLINES = str.maketrans({"\r": " ", "\n": " "})


def nats_header_block(headers: Mapping[str, str], msg_id: str | None = None) -> bytes | None:
    """The header block of a NATS ``HPUB`` carrying ``headers`` (then ``Nats-Msg-Id: msg_id`` when given), byte for
    byte what nats-py's ``publish`` writes for them (``NATS/1.0``, a ``name: value`` line each, a blank line), so
    that it can be built once, where the event is encoded, instead of on every send. None when a name is empty or
    not a token (nats-py skips or refuses it: such a message is sent through ``publish`` itself). The lines of
    ``headers`` are remembered when there are at most two (structured CloudEvents' and AEP JSON's single
    ``content-type`` repeats over a run), so most events only add their id."""
    items = tuple(headers.items())
    head = _cached_lines(items) if len(items) <= 2 else _lines(items)
    if head is None:
        return None
    if msg_id is None:
        return head + b"\r\n"
    if msg_id.isascii() and msg_id.isprintable() and msg_id[:1] != " " and msg_id[-1:] != " ":
        value = msg_id.encode()  # what nats-py's strip and CR/LF translation leave as it is
    else:
        value = msg_id.strip().translate(_NATS_NEWLINES).encode()
    return b"%sNats-Msg-Id: %s\r\n\r\n" % (head, value)


def _lines(items: tuple) -> bytes | None:
    """``NATS/1.0`` and the ``name: value`` lines of ``items`` (no final blank line), or None."""
    parts = [b"NATS/1.0\r\n"]
    for k, v in items:
        name = k.strip()
        if not name or not _NATS_NAME.fullmatch(name):
            return None
        parts.append(b"%s: %s\r\n" % (name.encode(), v.strip().translate(_NATS_NEWLINES).encode()))
    return b"".join(parts)


_cached_lines = functools.lru_cache(maxsize=64)(_lines)


def parse_header_block(block: bytes) -> dict[str, str]:
    """The headers of a block :func:`nats_header_block` made (for a client that cannot send the block as it is)."""
    out = {}
    for ln in block.decode().split("\r\n")[1:]:
        if ln:
            name, _, value = ln.partition(": ")
            out[name] = value
    return out


def from_nats(headers: Mapping[str, str] | None, payload: bytes, *, where: str = "") -> dict:
    """The AEP event of a NATS message that :func:`message` made (binary or structured CloudEvent, or AEP JSON).
    Headers other than ``ce-*`` and ``content-type`` (``Nats-Msg-Id`` ...) are ignored."""
    hdrs = {k.lower(): v for k, v in (headers or {}).items()
            if k.lower().startswith("ce-") or k.lower() == "content-type"}
    media = hdrs.get("content-type", "").split(";", 1)[0].strip().lower()
    if any(k.startswith("ce-") for k in hdrs) or media in (STRUCTURED_CONTENT_TYPE, BATCH_CONTENT_TYPE):
        ev = from_http(hdrs, payload, where=where)
        if isinstance(ev, list):
            raise Refusal("CE-6", "a NATS message carries one event, not a batch", where)
        return ev
    if media == AEP_CONTENT_TYPE:
        return jsonio.loads(payload)
    return from_structured(payload, where=where)
