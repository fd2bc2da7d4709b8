"""Networking that the bus and the converters both use, below both (docs/design/bus.md, "Layers"):

- :mod:`aefgate.net.http_server`: the one HTTP server layer of aefgate's services (aiohttp, its limits),
  :func:`~aefgate.net.http_server.hostport` (a ``HOST:PORT`` option read);
- :mod:`aefgate.net.retry`: the retry policy, full-jitter backoff, ``Retry-After``;
- :mod:`aefgate.net.otlp_http`: sending OTLP over HTTP.

It depends only on the core modules (``aefgate.errors``, ``aefgate.masking``, ...) and on ``aefgate.formats``.
"""
