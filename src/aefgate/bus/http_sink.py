"""HTTP destination: ``http(s)://host[:port]/path`` (docs/design/bus.md, "HTTP").

Each request is a ``POST`` in the CloudEvents HTTP binding: binary mode (``ce-*`` headers, the data as the body),
structured mode (``application/cloudevents+json``), or with ``batch > 1`` a batch of up to ``batch`` events
(``application/cloudevents-batch+json``). An event is acknowledged when the request carrying it got a 2xx answer.
One request is in flight at a time, over one kept-alive connection (standard library ``http.client``, in a worker
thread). Connection errors, timeouts, 429 and 5xx are retried (``Retry-After`` honoured) until the request's
deadline; a 3xx or another 4xx is a permanent failure, reported with the status and the first line of the body.
The first request given up stops the publish (:attr:`HttpSink.fatal`).
"""

from __future__ import annotations

import asyncio
import http.client
import ssl
import time
from typing import Any

from aefgate.bus import codec
from aefgate.net.retry import Policy, backoff, retry_after
from aefgate.bus.sinks import ACKED, FAILED, UNSENT, Item, ResultCallback

_MAX_BODY = 64 * 1024  # the most of an answer's body read (enough for its first line)


def _first_line(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    line = text.splitlines()[0].strip() if text else ""
    return line[:200] + ("..." if len(line) > 200 else "")


class HttpSink:
    kind = "http"

    def __init__(self, dest: Any, fmt: str, mode: str, batch: int, policy: Policy, result: ResultCallback) -> None:
        self.dest = dest
        self.fmt, self.mode = fmt, mode
        self.batch = batch
        self.policy = policy
        self.result = result
        self.fatal: str | None = None
        self.attempts = 0
        self.requests = 0
        self._buf: list[Item] = []
        self._conn: http.client.HTTPConnection | None = None

    async def open(self) -> None:
        return None

    async def submit(self, item: Item) -> None:
        self._buf.append(item)
        if len(self._buf) >= self.batch:
            await self._send_buf()

    async def flush(self) -> None:
        if self._buf:
            await self._send_buf()

    async def close(self) -> None:
        for item in self._buf:
            self.result(item, UNSENT, None)
        self._buf.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _send_buf(self) -> None:
        items, self._buf = self._buf, []
        if self.fatal is not None:
            for item in items:
                self.result(item, UNSENT, None)
            return
        ok, reason = await asyncio.to_thread(self._deliver, items)
        for item in items:
            self.result(item, ACKED if ok else FAILED, reason)
        if not ok:
            self.fatal = reason

    # -- one request, with its retries (in a worker thread) ----------------------------------------------------------

    def _encode(self, items: list[Item]) -> tuple[dict[str, str], bytes]:
        if self.batch > 1:
            return codec.batch((it.event for it in items), self.fmt)
        it = items[0]
        if it.body is not None:  # encoded by the producer
            return it.headers, it.body
        return codec.message(it.event, self.fmt, self.mode)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            d = self.dest
            if d.scheme == "https":
                self._conn = http.client.HTTPSConnection(d.host, d.port, timeout=timeout,
                                                         context=ssl.create_default_context())
            else:
                self._conn = http.client.HTTPConnection(d.host, d.port, timeout=timeout)
        conn = self._conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _request(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, Any, bytes]:
        conn = self._connection(timeout)
        try:
            conn.request("POST", self.dest.target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read(_MAX_BODY)
            if resp.will_close or not resp.isclosed():  # an answer longer than we read: start afresh
                self._drop()
            return resp.status, resp.reason, resp.headers, data
        except BaseException:
            self._drop()
            raise

    def _deliver(self, items: list[Item]) -> tuple[bool, str | None]:
        headers, body = self._encode(items)
        headers = {**headers, "user-agent": "aefgate-publish"}
        deadline = time.monotonic() + self.policy.timeout
        attempt = 0
        self.requests += 1
        while True:
            remaining = deadline - time.monotonic()
            self.attempts += 1
            wait: float | None = None
            try:
                status, phrase, rheaders, data = self._request(headers, body, self.policy.attempt_wait(remaining))
            except (OSError, http.client.HTTPException) as e:
                reason = f"connection error: {type(e).__name__}: {e}".rstrip(": ")
            else:
                if 200 <= status < 300:
                    return True, None
                line = _first_line(data)
                reason = f"HTTP {status} {phrase}" + (f": {line}" if line else "")
                if status == 429 or status >= 500:
                    wait = retry_after(rheaders.get("Retry-After"))
                else:
                    return False, reason + (" (redirects are not followed)" if 300 <= status < 400 else "")
            attempt += 1
            if wait is None:
                wait = backoff(attempt - 1)
            if attempt > self.policy.retries:
                return False, f"{reason} (after {attempt} attempts)"
            if time.monotonic() + wait >= deadline:
                return False, f"{reason} (gave up: the {self.policy.timeout:g} s deadline, {attempt} attempts)"
            time.sleep(wait)

    def describe(self) -> dict:
        return {"requests": self.requests}
