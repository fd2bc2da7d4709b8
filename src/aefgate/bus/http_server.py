"""The one HTTP layer of aefgate's services: ``serve otlp`` and ``serve ingest``'s HTTP intake.

Both run on aiohttp's server (``aiohttp.web``), with the limits set here once:

- a request line or header line of at most :data:`MAX_LINE` bytes, a header field of at most :data:`MAX_FIELD`
  (aiohttp answers 400 past them);
- a body of at most the service's ``max_body`` bytes, read within :data:`BODY_TIMEOUT` seconds (a slow client is
  answered 408 and does not hold a slot forever); a gzip ``Content-Encoding`` is undone as the body is read, within
  the same bound (so a gzip bomb is 413, not a blown memory);
- an idle kept-alive connection is closed after :data:`KEEPALIVE` seconds.

:func:`read_body` reads a body under those limits; :func:`start` serves an application on a host and port;
:func:`metrics_server` serves a Prometheus registry (``prometheus-client``) on its own port.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["BODY_TIMEOUT", "BodyError", "KEEPALIVE", "MAX_FIELD", "MAX_LINE", "application", "metrics_server",
           "read_body", "start"]

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


def application(max_body: int) -> Any:
    from aiohttp import web

    return web.Application(client_max_size=max_body + 1)


async def read_body(request: Any, max_body: int, timeout: float = BODY_TIMEOUT) -> bytes:
    """The request's body, decompressed here when it came ``gzip`` or ``deflate`` (never past ``max_body``), at
    most ``max_body`` bytes, within ``timeout`` seconds: :class:`BodyError` otherwise (415 for another
    ``Content-Encoding``)."""
    import zlib

    encoding = request.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding not in ("identity", "gzip", "deflate"):
        raise BodyError(415, f"Content-Encoding {encoding!r}: gzip, deflate or none")
    if request.content_length is not None and request.content_length > max_body:
        raise BodyError(413, f"the body is over {max_body} bytes")
    try:
        body = await asyncio.wait_for(request.content.read(max_body + 1), timeout)
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


async def start(app: Any, host: str, port: int) -> Any:
    """Serve ``app`` on ``host:port``; returns the runner (``await runner.cleanup()`` stops it). ``CLI-2`` for an
    address that cannot be listened on (a port in use, out of range)."""
    from aiohttp import web

    from aefgate.errors import Refusal

    if not 0 < port < 65536:
        raise Refusal("CLI-2", f"port {port} is not 1-65535", "--listen")

    runner = web.AppRunner(app, access_log=None, handle_signals=False, max_line_size=MAX_LINE,
                           max_field_size=MAX_FIELD, keepalive_timeout=KEEPALIVE, auto_decompress=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        raise Refusal("CLI-2", f"cannot listen on {host}:{port}: {e.strerror or e}", "--listen") from None
    return runner


def metrics_server(listen: str, registry: Any) -> None:
    """Serve ``registry`` as Prometheus text on ``HOST:PORT`` (``/metrics``), in a thread of its own."""
    from prometheus_client import start_http_server

    from aefgate.errors import Refusal

    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise Refusal("CLI-2", f"--metrics-listen is HOST:PORT (a port 1-65535), not {listen!r}", "--metrics-listen")
    try:
        start_http_server(int(port), addr=host.strip("[]"), registry=registry)
    except OSError as e:
        raise Refusal("CLI-2", f"cannot listen on {listen}: {e.strerror or e}", "--metrics-listen") from None
