"""Fetching sessions from a live Evaluation API (docs/mappings/evaluation-api.md, "Live import"): ``GET
BASE/api/v2/evaluation/status?sessionId=ID`` (or ``/api/evaluation/status``, v1) until a terminal status.

- ``200`` with ``NOT_READY``: polled again after the poll interval (doubling from ``poll`` up to 30 s, or the
  server's ``Retry-After``), until the status is terminal or ``timeout`` seconds passed since the first request;
  then the last ``NOT_READY`` body is the session's response (the importer makes it an ``error`` line, EVAPI-12).
- ``404``: the session does not exist: ``EVAPI-13`` (exit 2).
- ``401`` / ``403``: the service refused the credentials: ``EVAPI-15`` (exit 2; the token is never shown).
- ``429``, ``5xx``, a connection error or a slow answer (each request waits at most ``request_timeout``): retried
  with backoff (``Retry-After`` honoured) until the deadline, then ``EVAPI-14`` (exit 1) naming the endpoint and
  the last status.
- Any other status, or a body that is no response: ``EVAPI-14`` / ``EVAPI-1``.

The bearer token comes from an environment variable (``--token-env VAR``); it is sent in the ``Authorization``
header only, never in the URL, never written to any file or message.
"""

from __future__ import annotations

import http.client
import ssl
import time
from typing import Callable, Iterator
from urllib.parse import quote, urlsplit

from aefgate.masking import mask, mask_url
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.formats.evaluation_api import TERMINAL, parse
from aefgate.net.retry import retry_after

__all__ = ["fetch_sessions", "status_url"]

PATHS = {"v2": "/api/v2/evaluation/status", "v1": "/api/evaluation/status"}
MAX_BODY = 16 << 20


def status_url(base: str, session: str, version: str = "v2") -> str:
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal("CLI-2", f"option 'url' is http(s)://host[:port][/prefix], not {mask_url(base)!r}",
                      "option 'url'")
    if parts.query or parts.fragment:
        raise Refusal("CLI-2", "option 'url' has no query or fragment (the token goes in a header: option "
                               "'token_env')", "option 'url'")
    return f"{base.rstrip('/')}{PATHS[version]}?sessionId={quote(session, safe='')}"


def _get(url: str, headers: dict[str, str], wait: float) -> tuple[int, dict[str, str], bytes]:
    p = urlsplit(url)
    if p.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(p.hostname, p.port, timeout=wait,
                                                                       context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(p.hostname, p.port, timeout=wait)
    try:
        conn.request("GET", f"{p.path}?{p.query}", headers=headers)
        resp = conn.getresponse()
        data = resp.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise Refusal("EVAPI-14", f"an answer over {MAX_BODY} bytes", mask_url(url.split("?")[0]),
                          exit_code=EXIT_INTEGRITY)
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def fetch_sessions(base: str, sessions: list[str], *, token: str | None = None, timeout: float = 300.0,
                   poll: float = 1.0, request_timeout: float = 30.0, version: str = "v2",
                   sleep: Callable[[float], None] = time.sleep,
                   say: Callable[[str], None] = lambda s: None) -> Iterator[tuple[str, bytes, str | None, str]]:
    """``(where, body, None, session)`` per session, its terminal response (or its last ``NOT_READY`` at the
    deadline); refusals as the module docstring says."""

    if timeout <= 0 or poll <= 0 or request_timeout <= 0:
        raise Refusal("CLI-2", "option 'timeout', option 'poll' and option 'request_timeout' are more than 0",
                      "option 'timeout'")
    headers = {"Accept": "application/json", "User-Agent": "aefgate"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for session in sessions:
        if not session:
            raise Refusal("CLI-2", "option 'session' is not empty", "option 'session'")
        url = status_url(base, session, version)
        endpoint = mask_url(url.split("?")[0])  # what messages show: a URL's userinfo masked (never sent either)
        where = f"{endpoint}?sessionId={quote(session, safe='')}"
        deadline = time.monotonic() + timeout
        interval = poll
        attempt = 0
        last = "no answer"
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            try:
                status, hdrs, body = _get(url, headers, max(0.1, min(request_timeout, remaining)))
            except (OSError, http.client.HTTPException) as e:
                status, hdrs, body = 0, {}, b""
                last = mask(f"{type(e).__name__}: {e}")
            if status == 200:
                resp, _raw = parse(body, where)
                if resp.status in TERMINAL:
                    say(f"session {session}: {resp.status} (request {attempt})")
                    yield where, body, None, session
                    break
                last = "NOT_READY"
            elif status == 404:
                raise Refusal("EVAPI-13", f"the service has no session {session!r} (404)", where)
            elif status in (401, 403):
                raise Refusal("EVAPI-15", f"the service refused the credentials ({status}): check option 'token_env'",
                              endpoint)
            elif status == 429 or status >= 500:
                last = f"HTTP {status}"
            elif status != 0:
                raise Refusal("EVAPI-14", f"{endpoint} answered {status}", where, exit_code=EXIT_INTEGRITY)
            wait = retry_after(hdrs.get("retry-after")) if status else None
            wait = interval if wait is None else wait
            if time.monotonic() + wait >= deadline:
                if status == 200:  # still NOT_READY: the snapshot is the answer (EVAPI-12)
                    say(f"session {session}: still NOT_READY after {timeout:g} s")
                    yield where, body, None, session
                    break
                raise Refusal("EVAPI-14", f"{endpoint} gave no answer for session {session!r} within {timeout:g} s "
                                          f"({attempt} requests; last: {last})", where, exit_code=EXIT_INTEGRITY)
            sleep(wait)
            interval = min(30.0, interval * 2)
