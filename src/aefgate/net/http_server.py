"""The one HTTP layer of aefgate's services: ``serve otlp``, ``serve ingest``'s HTTP intake, ``serve evaluation-api``.

Both run on aiohttp's server (``aiohttp.web``), with the limits set here once:

- a request line or header line of at most :data:`MAX_LINE` bytes, a header field of at most :data:`MAX_FIELD`
  (aiohttp answers 400 past them);
- a body of at most the service's ``max_body`` bytes, read within :data:`BODY_TIMEOUT` seconds (a slow client is
  answered 408 and does not hold a slot forever); a gzip ``Content-Encoding`` is undone as the body is read, within
  the same bound (so a gzip bomb is 413, not a blown memory);
- an idle kept-alive connection is closed after :data:`KEEPALIVE` seconds;
- a body is read whole (to ``Content-Length``, or to the last chunk), however many writes it came in (issue 28:
  aiohttp's ``read(n)`` returns what is buffered);
- a request aiohttp cannot parse is logged in one line, ``malformed request from PEER: 400 REASON``, never with a
  traceback quoting the request's header lines (:func:`server_logger`).

:func:`read_body` reads a body under those limits; :func:`start` serves an application on a host and port;
:func:`metrics_server` serves a Prometheus registry (``prometheus-client``) on its own port; :func:`hostport` reads a
``HOST:PORT`` option. A refusal names the option as the caller's parameter (``option 'listen'``); the command line
writes it as its flag.

aiohttp and prometheus-client are imported where they are used (``# lazy``): a service's dependencies, not every
command's.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any

from aefgate.errors import Refusal
from aefgate.masking import mask

__all__ = ["BODY_TIMEOUT", "BodyError", "KEEPALIVE", "MAX_FIELD", "MAX_LINE", "application", "metrics_server",
           "hostport", "read_body", "server_logger", "start"]

MAX_LINE = 8190
MAX_FIELD = 8190
BODY_TIMEOUT = 30.0
KEEPALIVE = 75.0


class BodyError(Exception):
    """A body the service does not read: ``status`` 413 (over the bound) or 408 (too slow, or cut off)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def hostport(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:4318`` for IPv6) read from the option named ``option`` (a parameter's name,
    ``listen``): ``CLI-2`` unless the port is 1-65535 and the host is given."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise Refusal("CLI-2", f"option '{option}' is HOST:PORT (a port 1-65535), not {text!r}", f"option '{option}'")
    return host.strip("[]"), int(port)


def application(max_body: int) -> Any:
    from aiohttp import web  # lazy: a service's dependency, not every command's

    return web.Application(client_max_size=max_body + 1)


async def _read_whole(stream: Any, max_body: int) -> bytes:
    """Every byte of the body, to its end (``Content-Length`` bytes, or the last chunk of a chunked body), however
    many writes it came in; it stops at ``max_body + 1`` bytes (the caller answers 413). A body that ends before
    its ``Content-Length`` raises (aiohttp's ``ContentLengthError``/``ClientPayloadError``): the caller's 400.

    (``StreamReader.read(n)`` returns what is buffered, as little as one byte: the whole body is read in a loop
    until the stream's end, never from one call.)"""
    parts: list[bytes] = []
    size = 0
    while size <= max_body:
        chunk = await stream.read(max_body + 1 - size)
        if not chunk:  # the end of the body
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


async def read_body(request: Any, max_body: int, timeout: float = BODY_TIMEOUT) -> bytes:
    """The request's body, decompressed here when it came ``gzip`` or ``deflate`` (never past ``max_body``), at
    most ``max_body`` bytes, read whole (to ``Content-Length``, or to the last chunk) within ``timeout`` seconds
    however it is split on the wire: :class:`BodyError` otherwise (415 for another ``Content-Encoding``)."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding not in ("identity", "gzip", "deflate"):
        raise BodyError(415, f"Content-Encoding {encoding!r}: gzip, deflate or none")
    if request.content_length is not None and request.content_length > max_body:
        raise BodyError(413, f"the body is over {max_body} bytes")
    try:
        body = await asyncio.wait_for(_read_whole(request.content, max_body), timeout)
    except asyncio.TimeoutError:
        raise BodyError(408, f"the body did not arrive within {timeout:g} s") from None
    except Exception as e:  # a connection cut, a bad chunked encoding
        raise BodyError(400, f"the body could not be read: {type(e).__name__}") from None
    if len(body) > max_body:
        raise BodyError(413, f"the body is over {max_body} bytes")
    if encoding != "identity":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        try:
            out = d.decompress(body, max_body + 1)
        except zlib.error as e:
            raise BodyError(400, f"the body is not {encoding}: {e}") from None
        if len(out) > max_body or d.unconsumed_tail:
            raise BodyError(413, f"the body decompresses past {max_body} bytes")
        body = out
    return body


class _OneLine(logging.Filter):
    """aiohttp logs a request it cannot parse with a traceback whose last lines quote the offending bytes (a header
    line: perhaps a bearer token). Such a record becomes one line, ``malformed request from PEER: STATUS REASON``,
    the reason cut before any quoted request bytes; any other record keeps its traceback, masked
    (:func:`aefgate.masking.mask`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import (
            HttpProcessingError,  # lazy: a service's dependency
        )

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (HttpProcessingError, ConnectionError)) or (
                exc is not None and type(exc).__module__.startswith("aiohttp.http_exceptions")):
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "malformed request from %s: %s"
            record.args = (peer, _reason(exc))
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
            return True
        record.msg = mask(record.getMessage())
        record.args = ()
        if record.exc_info:
            record.exc_text = mask(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def _reason(exc: BaseException) -> str:
    """``400 Invalid header token``: the status and the first line of aiohttp's message, cut before any quoted
    bytes of the request."""
    status = getattr(exc, "code", None) or 400
    text = str(getattr(exc, "message", "") or type(exc).__name__)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    for cut in (" b'", ' b"', " '", ' "', ": b", "=b'", '=b"'):
        if cut in first:
            first = first[: first.index(cut)]
    return f"{status} {first.strip().rstrip(':.').strip() or type(exc).__name__}"


def server_logger() -> logging.Logger:
    """The logger aefgate's HTTP servers give aiohttp: ``aefgate.http``, one line per malformed request (no
    traceback, no request bytes), written on stderr like the services' own lines."""
    log = logging.getLogger("aefgate.http")
    if not any(isinstance(f, _OneLine) for f in log.filters):
        log.addFilter(_OneLine())
        log.propagate = False
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


async def start(app: Any, host: str, port: int, shutdown_timeout: float | None = None) -> Any:
    """Serve ``app`` on ``host:port``; returns the runner (``await runner.cleanup()`` stops it). ``CLI-2`` for an
    address that cannot be listened on (a port in use, out of range). ``shutdown_timeout``: the seconds a stop
    waits for the requests under way (aiohttp's default, 60, when None)."""
    from aiohttp import web  # lazy: a service's dependency, not every command's

    if not 0 < port < 65536:
        raise Refusal("CLI-2", f"port {port} is not 1-65535", "option 'listen'")

    runner = web.AppRunner(app, access_log=None, handle_signals=False, max_line_size=MAX_LINE,
                           max_field_size=MAX_FIELD, keepalive_timeout=KEEPALIVE, auto_decompress=False,
                           logger=server_logger(),
                           **({"shutdown_timeout": shutdown_timeout} if shutdown_timeout is not None else {}))
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        raise Refusal("CLI-2", f"cannot listen on {host}:{port}: {e.strerror or e}", "option 'listen'") from None
    return runner


def metrics_server(listen: str, registry: Any) -> None:
    """Serve ``registry`` as Prometheus text on ``HOST:PORT`` (``/metrics``), in a thread of its own."""
    from prometheus_client import (
        start_http_server,  # lazy: an optional dependency (the service's metrics)
    )

    host, port = hostport(listen, "metrics_listen")
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise Refusal("CLI-2", f"cannot listen on {listen}: {e.strerror or e}", "option 'metrics_listen'") from None
