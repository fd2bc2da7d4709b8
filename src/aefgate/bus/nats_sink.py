"""JetStream destination: ``nats://[user:pass@]host[:port]/SUBJECT`` (docs/design/bus.md, "NATS").

Each event is one JetStream publish with an acknowledgement (a ``PubAck``: the stream stored it, or already had
it), carried in the CloudEvents NATS binding (:mod:`aefgate.bus.codec`) with ``Nats-Msg-Id`` set to the event id,
so that JetStream's duplicate window makes a re-publish idempotent. At most ``window`` events are unacknowledged
at a time. Each is a core-NATS publish with a reply subject of its own under one wildcard inbox subscription,
whose answers (PubAcks, API errors, no-responders statuses) are matched to the sends here (the lean ack path, see
"Publishing" below and docs/design/bus.md, "The ack path"). A lost acknowledgement is retried with the same id,
a failed one too (connection errors, timeouts, no responders, JetStream 503), with backoff, until the event's
deadline; any other JetStream error is permanent. The first event given up stops the publish (:attr:`NatsSink.fatal`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

from aefgate.bus import codec
from aefgate.bus.nats_connect import AuthFailed, connect
from aefgate.bus.sinks import ACKED, DUPLICATE, FAILED, Item, ResultCallback
from aefgate.errors import Refusal
from aefgate.masking import mask
from aefgate.net.retry import Policy, backoff

_BAD_NAME = re.compile(r"[^A-Za-z0-9_-]")


def stream_name(subject: str) -> str:
    """The stream ``create_stream`` makes for ``subject``: upper case, every character other than a letter, digit,
    ``_`` or ``-`` (``.`` first of all) written ``_``: ``aef.results`` -> ``AEF_RESULTS``."""
    return _BAD_NAME.sub("_", subject).upper()


async def _quiet(*_args: Any) -> None:
    return None


def _retryable(e: BaseException) -> bool:
    import nats.errors  # lazy: nats-py is heavy, loaded only for a NATS destination
    import nats.js.errors as jse  # lazy: nats-py is heavy, loaded only for a NATS destination

    if isinstance(e, (jse.NoStreamResponseError, jse.ServiceUnavailableError)):
        return True
    if isinstance(e, jse.APIError):  # JetStream said no: permanent, unless it is unavailable for now
        return getattr(e, "code", None) in (503, 408, None)
    return isinstance(e, (nats.errors.Error, OSError, asyncio.TimeoutError, asyncio.CancelledError))


def _api_error(err: dict) -> Exception:
    """The nats-py exception for a JetStream API error ``{"code", "err_code", "description"}`` (503:
    ``ServiceUnavailableError``, retried; any other code: permanent)."""
    import nats.js.errors as jse  # lazy: nats-py is heavy, loaded only for a NATS destination

    code = err.get("code")
    kw = {"code": code if type(code) is int else None, "err_code": err.get("err_code"),
          "description": str(err.get("description", ""))}
    cls = {503: jse.ServiceUnavailableError, 500: jse.ServerError, 404: jse.NotFoundError,
           400: jse.BadRequestError}.get(kw["code"], jse.APIError)
    return cls(**kw)


_RAW_MEMBERS = ("_send_command", "_flush_queue", "_flush_pending", "_pending_data_size", "_max_pending_size",
                "_max_payload", "stats", "is_closed", "is_draining_pubs", "is_connected")


def raw_path(nc: Any) -> bool:
    """Whether header blocks can be sent as they are on this nats-py client ("The wire", docs/design/bus.md): it has
    the members nats-py's own ``publish`` uses (2.9 to 2.16), and ``AEFGATE_NATS_RAW`` is not ``0``."""
    if os.environ.get("AEFGATE_NATS_RAW", "").strip() == "0":
        return False
    return all(hasattr(nc, m) for m in _RAW_MEMBERS) and isinstance(getattr(nc, "stats", None), dict)


def _describe(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return mask(f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text)


class NatsSink:
    kind = "nats"

    def __init__(self, dest: Any, fmt: str, mode: str, policy: Policy, window: int, create_stream: bool,
                 result: ResultCallback) -> None:
        self.dest = dest
        self.fmt, self.mode = fmt, mode
        self.policy = policy
        self.window = window
        self.create_stream = create_stream
        self.result = result
        self.fatal: str | None = None
        self.attempts = 0
        self.stream: str | None = None
        self.created = False
        self.nc = None
        self.js = None
        self._slots: asyncio.Semaphore | None = None
        self._inflight: dict[str, Item] = {}  # reply token -> the item that send carried
        self._seq = 0
        self._prefix = ""
        self._plen = 0
        self._outstanding = 0
        self._idle: asyncio.Event | None = None
        self._watchdog: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._raw = False  # header blocks are sent as they are ("The wire")
        self._head = b""
        self._errors: Any = None

    # -- connection ------------------------------------------------------------------------------------------------

    async def open(self) -> None:
        import nats  # lazy: nats-py is heavy, loaded only for a NATS destination
        import nats.js.errors as jse  # lazy: nats-py is heavy, loaded only for a NATS destination

        self._slots = asyncio.Semaphore(self.window)
        self._idle = asyncio.Event()
        self._idle.set()
        deadline = time.monotonic() + self.policy.timeout
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                # nats-py retries a first connection as it reconnects (forever here): bounded by our deadline; the
                # connection's TLS and credentials are the destination's (bus/nats_connect.py)
                self.nc = await connect(
                    self.dest.url, getattr(self.dest, "auth", None), timeout=max(0.2, min(5.0, remaining)),
                    connect_timeout=max(0.2, min(2.0, remaining)), reconnect_time_wait=0.2, error_cb=_quiet,
                    disconnected_cb=_quiet, reconnected_cb=_quiet, closed_cb=_quiet, name="aefgate-publish",
                    # the subject was checked by parse_destination (PUB-1), the reply subjects are ours
                    skip_subject_validation=True)
                break
            except AuthFailed as e:  # refused before anything is sent: an input error, not a timeout
                raise Refusal("PUB-6", f"NATS authentication failed: {e}", self.dest.display) from None
            except Exception as e:  # nats-py raises NoServersError, OSError, TimeoutError ...
                if isinstance(e, asyncio.TimeoutError):
                    e = asyncio.TimeoutError("no connection")
                reason = f"cannot connect to {self.dest.display}: {_describe(e)}"
                wait = backoff(attempt)
                attempt += 1
                if attempt > self.policy.retries or time.monotonic() + wait >= deadline:
                    self.fatal = reason
                    return
                await asyncio.sleep(wait)
        self.js = self.nc.jetstream()
        subject = self.dest.subject
        try:
            try:
                self.stream = await self.js.find_stream_name_by_subject(subject)
            except jse.NotFoundError:
                self.stream = None
            if self.stream is None:
                if not self.create_stream:
                    raise Refusal("PUB-4", f"no JetStream stream covers the subject {subject!r}: create one, or "
                                  f"give option 'create_stream'", self.dest.display)
                self.stream = stream_name(subject)
                await self.js.add_stream(name=self.stream, subjects=[subject])
                self.created = True
        except Refusal:
            await self.close()
            raise
        except Exception as e:
            self.fatal = f"JetStream at {self.dest.display} does not answer: {_describe(e)}"
            return
        try:
            self._prefix = self.nc.new_inbox() + "."
            self._plen = len(self._prefix)
            await self.nc.subscribe(self._prefix + "*", cb=self._on_reply)
        except Exception as e:
            self.fatal = f"cannot subscribe at {self.dest.display}: {_describe(e)}"
            return
        import nats.errors  # lazy: nats-py is heavy, loaded only for a NATS destination

        self._errors = nats.errors
        self._raw = raw_path(self.nc)
        self._head = b"HPUB " + subject.encode() + b" " + self._prefix.encode()
        self._watchdog = asyncio.get_running_loop().create_task(self._watch_acks())

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for t in list(self._tasks):
            t.cancel()
        if self.nc is not None:
            try:
                await asyncio.wait_for(self.nc.close(), 2.0)
            except Exception:  # closing a connection to a dead server: nothing left to save
                pass
            self.nc = None

    # -- publishing ------------------------------------------------------------------------------------------------
    #
    # The lean ack path: every publish is a plain core-NATS publish (``nc.publish``) with a reply subject
    # ``<inbox>.<n>`` (``n`` counts the sends), and one wildcard subscription ``<inbox>.*`` receives the JetStream
    # answers. ``_inflight`` maps ``n`` to the item sent; an answer for an ``n`` no longer there (an attempt given
    # up as overdue) is ignored. No future, no task and no PubAck object per message.

    async def submit(self, item: Item) -> None:
        await self._slots.acquire()
        if item.body is None:  # not encoded by the producer (a resumed spool)
            headers, body = codec.message(item.event, self.fmt, self.mode)
            headers["Nats-Msg-Id"] = item.id
            item.headers, item.body = headers, body
        now = time.monotonic()
        item.deadline = now + self.policy.timeout
        item.attempt = 0
        if not self._outstanding:
            self._idle.clear()
        self._outstanding += 1
        await self._send(item, now)

    async def flush(self) -> None:
        await self._idle.wait()

    async def _send(self, item: Item, now: float | None = None) -> None:
        if now is None:
            now = time.monotonic()
        self.attempts += 1
        self._seq = seq = self._seq + 1
        token = str(seq)
        item.expiry = now + self.policy.attempt_wait(item.deadline - now)
        self._inflight[token] = item  # before the publish: its answer can come while the publish awaits
        try:
            await self._publish(seq, token, item)
        except Exception as e:  # the connection is closed, the outbound buffer full ...
            if self._inflight.pop(token, None) is not None:
                self._failed_attempt(item, e)

    async def _publish(self, seq: int, token: str, item: Item) -> None:
        """One core-NATS publish of the item with the reply subject ``<inbox>.<seq>``. A header block (the
        producer's) goes out as it is, as the ``HPUB`` nats-py's ``publish`` would have written ("The wire")."""
        hdr, body = item.headers, item.body
        nc = self.nc
        if type(hdr) is not bytes:
            await nc.publish(self.dest.subject, body, reply=self._prefix + token, headers=hdr)
            return
        if not self._raw:
            await nc.publish(self.dest.subject, body, reply=self._prefix + token,
                             headers=codec.parse_header_block(hdr))
            return
        # nats-py's Client.publish and _send_publish (2.9 to 2.16), but for the header block, which is given
        errors = self._errors
        if nc.is_closed:
            raise errors.ConnectionClosedError
        if nc.is_draining_pubs:
            raise errors.ConnectionDrainingError
        size = len(body)
        if not nc.is_connected and (nc._max_pending_size <= 0
                                    or size + nc._pending_data_size > nc._max_pending_size):
            raise errors.OutboundBufferLimitError
        if size > nc._max_payload:
            raise errors.MaxPayloadError
        hl = len(hdr)
        stats = nc.stats
        stats["out_msgs"] += 1
        stats["out_bytes"] += size
        await nc._send_command(b"%s%d %d %d\r\n%s%s\r\n" % (self._head, seq, hl, hl + size, hdr, body))
        if nc._flush_queue is not None and nc._flush_queue.empty():
            await nc._flush_pending()

    async def _on_reply(self, msg: Any) -> None:
        """One JetStream answer: a PubAck (``{"stream", "seq"[, "duplicate": true]}``), an API error
        (``{"error": {"code", "description"}}``), or a status message (503: no responders)."""
        item = self._inflight.pop(msg.subject[self._plen:], None)
        if item is None:
            return
        data = msg.data
        if data[:10] == b'{"stream":' and b'"seq":' in data and b'"error"' not in data \
                and b'"duplicate"' not in data:  # the usual PubAck: stored
            self._final(item, ACKED, None)
            return
        try:
            self._answer(item, msg.headers, data)
        except Exception as e:  # never lose the item (nats-py would swallow the error): a failed attempt
            self._failed_attempt(item, e)

    def _answer(self, item: Item, headers: Any, data: bytes) -> None:
        """Any answer other than a plain PubAck: read in full."""
        import nats.errors  # lazy: nats-py is heavy, loaded only for a NATS destination
        import nats.js.errors as jse  # lazy: nats-py is heavy, loaded only for a NATS destination

        status = (headers or {}).get("Status")
        if not data and status is not None:
            if status == "503":
                self._failed_attempt(item, jse.NoStreamResponseError())
            else:
                self._failed_attempt(item, nats.errors.Error(
                    f"status {status} {(headers or {}).get('Description', '')}".strip()))
            return
        try:
            resp = json.loads(data)
        except ValueError:
            resp = None
        if isinstance(resp, dict) and isinstance(resp.get("error"), dict):
            self._failed_attempt(item, _api_error(resp["error"]))
        elif isinstance(resp, dict) and type(resp.get("seq")) is int and "stream" in resp:
            self._final(item, DUPLICATE if resp.get("duplicate") is True else ACKED, None)
        else:  # not an answer JetStream gives: the message is not known to be stored
            self._failed_attempt(item, nats.errors.Error(
                f"an answer that is not a JetStream acknowledgement: {bytes(data[:200])!r}"))

    def _failed_attempt(self, item: Item, e: BaseException) -> None:
        reason = _describe(e)
        item.attempt += 1
        wait = backoff(item.attempt - 1)
        if self.fatal is not None:
            self._final(item, FAILED, f"{reason} (not retried: the publish stopped: {self.fatal})")
        elif not _retryable(e):
            self._final(item, FAILED, f"JetStream refused the event: {reason}")
        elif item.attempt > self.policy.retries:
            self._final(item, FAILED, f"{reason} (after {item.attempt} attempts)")
        elif time.monotonic() + wait >= item.deadline:
            self._final(item, FAILED, f"{reason} (no acknowledgement within the {self.policy.timeout:g} s "
                                      f"deadline, {item.attempt} attempts)")
        else:
            task = asyncio.get_running_loop().create_task(self._resend(item, wait))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _resend(self, item: Item, wait: float) -> None:
        await asyncio.sleep(wait)
        if self.fatal is not None:
            self._final(item, FAILED, f"not retried: the publish stopped: {self.fatal}")
            return
        await self._send(item)

    def _final(self, item: Item, status: str, reason: str | None) -> None:
        if status == FAILED and self.fatal is None:
            self.fatal = f"event {item.id}: {reason}"
        item.headers = item.body = item.line = None
        self.result(item, status, reason)
        self._outstanding -= 1
        self._slots.release()
        if self._outstanding == 0:
            self._idle.set()

    async def _watch_acks(self) -> None:
        """Give up the attempts whose acknowledgement is overdue (each then retries or fails)."""
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            overdue = [t for t, it in self._inflight.items() if it.expiry <= now]
            for t in overdue:
                item = self._inflight.pop(t, None)
                if item is not None:
                    self._failed_attempt(item, asyncio.TimeoutError(
                        f"no acknowledgement within {self.policy.attempt_wait(self.policy.timeout):.2g} s"))

    def describe(self) -> dict:
        return {"stream": self.stream, "streamCreated": self.created}
