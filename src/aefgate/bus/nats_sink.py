"""JetStream destination: ``nats://[user:pass@]host[:port]/SUBJECT`` (docs/design/bus.md, "NATS").

Each event is one JetStream publish with an acknowledgement (a ``PubAck``: the stream stored it, or already had
it), carried in the CloudEvents NATS binding (:mod:`aefgate.bus.codec`) with ``Nats-Msg-Id`` set to the event id,
so that JetStream's duplicate window makes a re-publish idempotent. At most ``window`` events are unacknowledged
at a time (nats-py's asynchronous publish). A lost acknowledgement is retried with the same id, a failed one too
(connection errors, timeouts, no responders, JetStream 503), with backoff, until the event's deadline; any other
JetStream error is permanent. The first event given up stops the publish (:attr:`NatsSink.fatal`).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from aefgate.bus import codec
from aefgate.bus.retry import Policy, backoff
from aefgate.bus.sinks import ACKED, DUPLICATE, FAILED, Item, ResultCallback
from aefgate.errors import Refusal

_BAD_NAME = re.compile(r"[^A-Za-z0-9_-]")


def stream_name(subject: str) -> str:
    """The stream ``--create-stream`` makes for ``subject``: upper case, every character other than a letter, digit,
    ``_`` or ``-`` (``.`` first of all) written ``_``: ``aef.results`` -> ``AEF_RESULTS``."""
    return _BAD_NAME.sub("_", subject).upper()


async def _quiet(*_args: Any) -> None:
    return None


def _retryable(e: BaseException) -> bool:
    import nats.errors
    import nats.js.errors as jse

    if isinstance(e, (jse.NoStreamResponseError, jse.ServiceUnavailableError)):
        return True
    if isinstance(e, jse.APIError):  # JetStream said no: permanent, unless it is unavailable for now
        return getattr(e, "code", None) in (503, 408, None)
    return isinstance(e, (nats.errors.Error, OSError, asyncio.TimeoutError, asyncio.CancelledError))


def _describe(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text


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
        self._watch: dict[Any, Item] = {}
        self._outstanding = 0
        self._idle: asyncio.Event | None = None
        self._watchdog: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- connection ------------------------------------------------------------------------------------------------

    async def open(self) -> None:
        import nats
        import nats.js.errors as jse

        self._slots = asyncio.Semaphore(self.window)
        self._idle = asyncio.Event()
        self._idle.set()
        deadline = time.monotonic() + self.policy.timeout
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            nc = nats.NATS()
            try:
                # nats-py retries a first connection as it reconnects (forever here): bounded by our deadline
                await asyncio.wait_for(nc.connect(
                    servers=[self.dest.server], connect_timeout=max(0.2, min(2.0, remaining)),
                    allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=0.2,
                    error_cb=_quiet, disconnected_cb=_quiet, reconnected_cb=_quiet, closed_cb=_quiet,
                    name="aefgate-publish"), timeout=max(0.2, min(5.0, remaining)))
                self.nc = nc
                break
            except Exception as e:  # nats-py raises NoServersError, OSError, TimeoutError ...
                try:
                    await asyncio.wait_for(nc.close(), 1.0)
                except Exception:
                    pass
                if isinstance(e, asyncio.TimeoutError):
                    e = asyncio.TimeoutError("no connection")
                reason = f"cannot connect to {self.dest.display}: {_describe(e)}"
                wait = backoff(attempt)
                attempt += 1
                if attempt > self.policy.retries or time.monotonic() + wait >= deadline:
                    self.fatal = reason
                    return
                await asyncio.sleep(wait)
        self.js = self.nc.jetstream(publish_async_max_pending=self.window)
        subject = self.dest.subject
        try:
            try:
                self.stream = await self.js.find_stream_name_by_subject(subject)
            except jse.NotFoundError:
                self.stream = None
            if self.stream is None:
                if not self.create_stream:
                    raise Refusal("PUB-4", f"no JetStream stream covers the subject {subject!r}: create one, or "
                                  f"pass --create-stream", self.dest.display)
                self.stream = stream_name(subject)
                await self.js.add_stream(name=self.stream, subjects=[subject])
                self.created = True
        except Refusal:
            await self.close()
            raise
        except Exception as e:
            self.fatal = f"JetStream at {self.dest.display} does not answer: {_describe(e)}"
            return
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

    async def submit(self, item: Item) -> None:
        await self._slots.acquire()
        headers, body = codec.message(item.event, self.fmt, self.mode)
        headers["Nats-Msg-Id"] = item.id
        item.headers, item.body = headers, body
        item.deadline = time.monotonic() + self.policy.timeout
        item.attempt = 0
        self._outstanding += 1
        self._idle.clear()
        await self._send(item)

    async def flush(self) -> None:
        await self._idle.wait()

    async def _send(self, item: Item) -> None:
        remaining = item.deadline - time.monotonic()
        self.attempts += 1
        try:
            # no wait_stall: our own window (self._slots) never lets nats-py's fill; a wait_stall would make
            # nats-py start a task per publish (asyncio.wait_for), a third of the throughput
            fut = await self.js.publish_async(self.dest.subject, item.body, headers=item.headers)
        except Exception as e:  # the connection is closed, the outbound buffer full ...
            self._failed_attempt(item, e)
            return
        item.expiry = time.monotonic() + self.policy.attempt_wait(remaining)
        self._watch[fut] = item
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future) -> None:
        item = self._watch.pop(fut, None)
        if item is None:
            return
        if fut.cancelled():
            self._failed_attempt(item, asyncio.TimeoutError(
                f"no acknowledgement within {self.policy.attempt_wait(self.policy.timeout):.2g} s"))
            return
        e = fut.exception()
        if e is not None:
            self._failed_attempt(item, e)
            return
        self._final(item, DUPLICATE if fut.result().duplicate else ACKED, None)

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
        item.headers = item.body = None
        self.result(item, status, reason)
        self._outstanding -= 1
        self._slots.release()
        if self._outstanding == 0:
            self._idle.set()

    async def _watch_acks(self) -> None:
        """Cancel the publishes whose acknowledgement is overdue (their callback then retries or gives up)."""
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            overdue = [f for f, it in self._watch.items() if it.expiry <= now]
            for f in overdue:
                if not f.done():
                    f.cancel()

    def describe(self) -> dict:
        return {"stream": self.stream, "streamCreated": self.created}


def consume_all(url: str, stream: str, *, timeout: float = 5.0) -> list[tuple[dict, bytes]]:  # pragma: no cover
    """Every message of ``stream`` as ``(headers, payload)`` (for tools and tests; reads the whole stream)."""

    async def go() -> list[tuple[dict, bytes]]:
        import nats

        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            info = await js.stream_info(stream)
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                msg = await js.get_msg(stream, seq)
                out.append((dict(msg.headers or {}), msg.data))
            return out
        finally:
            await nc.close()

    return asyncio.run(go())
