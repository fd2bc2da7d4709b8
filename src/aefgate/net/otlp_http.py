"""Sending OTLP over HTTP (OTLP specification, "OTLP/HTTP"): what ``aefgate export otel --to URL`` uses.

``send(url, signal, docs)`` POSTs OTLP/JSON objects (``LogsData`` / ``TracesData``) to ``URL/v1/logs`` or
``URL/v1/traces`` (a URL that already ends with the signal's path is used as it is), merged into requests of at
most :data:`BATCH_RECORDS` records, as protobuf (``application/x-protobuf``, the default) or JSON
(``application/json``), with the caller's headers. A request is retried (full-jitter backoff, or the server's
``Retry-After``) on a connection error, a timeout, 429, 502, 503 and 504, the retryable answers of the
specification, until its deadline (:class:`~aefgate.net.retry.Policy`); any other answer is final. A 200 answer's
``partial_success`` (rejected records and a message) is reported. The connection is the standard library's
``http.client`` (kept alive between requests).

A request given up, or answered with a final error, raises ``OTLP-3`` (exit 1: not every record was delivered)
naming the endpoint, the status and the first line of the body.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import urlsplit

from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.formats.otlp import encode_body
from aefgate.masking import mask, mask_url
from aefgate.net.retry import Policy, backoff, retry_after

__all__ = ["BATCH_RECORDS", "SendReport", "endpoint", "send"]

BATCH_RECORDS = 512
RETRYABLE = frozenset({429, 502, 503, 504})
_TOP = {"logs": ("resourceLogs", "scopeLogs", "logRecords"), "traces": ("resourceSpans", "scopeSpans", "spans")}


@dataclass
class SendReport:
    endpoint: str
    requests: int = 0
    records: int = 0
    rejected: int = 0
    attempts: int = 0
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"endpoint": self.endpoint, "requests": self.requests, "records": self.records,
                "rejected": self.rejected, "attempts": self.attempts, "messages": self.messages}


def endpoint(url: str, signal: str) -> str:
    """The signal's URL: ``URL/v1/logs`` (or ``/v1/traces``) unless ``url`` already ends with it. ``PUB-1`` for a
    URL that is not http(s)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal("PUB-1", f"an OTLP/HTTP endpoint is http(s)://host[:port][/path], not {mask_url(url)!r}",
                      "option 'to'")
    suffix = "/v1/logs" if signal == "logs" else "/v1/traces"
    path = parts.path.rstrip("/")
    if path.endswith(suffix):
        return url
    return f"{parts.scheme}://{parts.netloc}{path}{suffix}"


def _count(doc: Mapping[str, Any], signal: str) -> int:
    top, scope, items = _TOP[signal]
    return sum(len(s.get(items) or ()) for r in doc.get(top) or () for s in r.get(scope) or ())


def _batches(docs: Iterable[Mapping[str, Any]], signal: str) -> Iterator[tuple[dict, int]]:
    top = _TOP[signal][0]
    merged: list = []
    n = 0
    for doc in docs:
        merged.extend(doc.get(top) or ())
        n += _count(doc, signal)
        if n >= BATCH_RECORDS:
            yield {top: merged}, n
            merged, n = [], 0
    if merged:
        yield {top: merged}, n


class _Client:
    def __init__(self, url: str, timeout: float) -> None:
        self.parts = urlsplit(url)
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes, headers: Mapping[str, str], wait: float) -> tuple[int, dict[str, str], bytes]:
        if self.conn is None:
            host, port = self.parts.hostname, self.parts.port
            if self.parts.scheme == "https":
                self.conn = http.client.HTTPSConnection(host, port, timeout=wait,
                                                        context=ssl.create_default_context())
            else:
                self.conn = http.client.HTTPConnection(host, port, timeout=wait)
        self.conn.timeout = wait
        if self.conn.sock is not None:
            self.conn.sock.settimeout(wait)
        path = self.parts.path or "/"
        try:
            self.conn.request("POST", path + (f"?{self.parts.query}" if self.parts.query else ""), body=body,
                              headers=dict(headers))
            resp = self.conn.getresponse()
            data = resp.read(1 << 20)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _partial(data: bytes, signal: str, ctype: str) -> tuple[int, str]:
    """The rejected count and message of a 200 answer's partial_success (0, "" when it has none)."""
    if not data:
        return 0, ""
    try:
        if "json" in ctype:
            ps = json.loads(data).get("partialSuccess") or {}
            key = "rejectedLogRecords" if signal == "logs" else "rejectedSpans"
            return int(ps.get(key) or 0), str(ps.get("errorMessage") or "")
        if signal == "logs":
            # lazy: the protobuf classes are heavy, and only a protobuf answer needs them
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
                ExportLogsServiceResponse as R,
            )
        else:
            # lazy: as above
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                ExportTraceServiceResponse as R,
            )
        r = R()
        r.ParseFromString(data)
        ps = r.partial_success
        rejected = ps.rejected_log_records if signal == "logs" else ps.rejected_spans
        return int(rejected), ps.error_message
    except Exception:  # an answer we cannot read says nothing of rejections
        return 0, ""


def _first_line(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    line = text.splitlines()[0].strip() if text else ""
    return line[:200]


def send(url: str, signal: str, docs: Iterable[Mapping[str, Any]], *, encoding: str = "protobuf",
         headers: Mapping[str, str] | None = None, policy: Policy | None = None,
         report: SendReport | None = None) -> SendReport:
    """POST ``docs`` (OTLP/JSON objects of ``signal``) to the OTLP/HTTP endpoint of ``url`` (see the module
    docstring); returns what was sent. ``OTLP-3`` (exit 1) when a request is given up or refused."""
    if encoding not in ("protobuf", "json"):
        raise Refusal("PUB-2", f"option 'encoding' is protobuf or json, not {encoding!r}", "option 'encoding'")
    target = endpoint(url, signal)
    policy = policy or Policy()
    rep = report or SendReport(target)
    hdrs = {"Content-Type": "application/x-protobuf" if encoding == "protobuf" else "application/json",
            "User-Agent": "aefgate-otlp"}
    hdrs.update(headers or {})
    client = _Client(target, policy.timeout)
    try:
        for doc, n in _batches(docs, signal):
            body = encode_body(doc, signal, encoding)
            _post(client, target, body, hdrs, policy, rep, signal)
            rep.requests += 1
            rep.records += n
    finally:
        client.close()
    return rep


def _post(client: _Client, target: str, body: bytes, headers: Mapping[str, str], policy: Policy,
          rep: SendReport, signal: str) -> None:
    shown = mask_url(target)  # messages name the endpoint without credentials, and never echo a header sent
    secrets = [v for k, v in headers.items() if k.lower() not in ("content-type", "user-agent")]
    deadline = time.monotonic() + policy.timeout
    attempt = 0
    while True:
        rep.attempts += 1
        remaining = deadline - time.monotonic()
        why: str
        wait: float | None = None
        try:
            status, resp_headers, data = client.post(body, headers, policy.attempt_wait(remaining))
        except (OSError, http.client.HTTPException) as e:
            why = mask(f"{type(e).__name__}: {e}", secrets)
        else:
            if 200 <= status < 300:
                rejected, message = _partial(data, signal, resp_headers.get("content-type", ""))
                if rejected or message:
                    rep.rejected += rejected
                    rep.messages.append(message or f"{rejected} records rejected")
                return
            why = mask(f"HTTP {status}" + (f": {_first_line(data)}" if data else ""), secrets)
            if status not in RETRYABLE:
                raise Refusal("OTLP-3", f"{shown} refused the records: {why}", shown, exit_code=EXIT_INTEGRITY)
            wait = retry_after(resp_headers.get("retry-after"))
        if attempt >= policy.retries:
            raise Refusal("OTLP-3", f"given up after {attempt + 1} attempts ({why})", shown,
                          exit_code=EXIT_INTEGRITY)
        pause = wait if wait is not None else backoff(attempt)
        if time.monotonic() + pause >= deadline:
            raise Refusal("OTLP-3", f"no answer before the deadline ({policy.timeout:g} s; last: {why})",
                          shown, exit_code=EXIT_INTEGRITY)
        time.sleep(pause)
        attempt += 1
