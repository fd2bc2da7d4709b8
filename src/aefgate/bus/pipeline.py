"""The producer of ``aefgate publish``: verify, export and encode in a forked child (docs/design/bus.md, "Pipeline").

:class:`Producer` forks a child process that runs ``export_events`` (the verification of the run first, AEP-1,
and the export's option checks) and encodes every event into what the destination sends (NATS: the headers with
``Nats-Msg-Id`` and the payload; HTTP one event per request: headers and body; HTTP batches: the AEP event itself,
the sink encodes the batch), plus the spool line (``jsonio.dump_line`` of the AEP event) when there is a spool.
The child streams them to the parent through a pipe, in frames of :data:`FRAME` events (pickled: exact, and the
cheapest to read back), so that on two cores the export and the encoding overlap the parent's network work.

Frames: one kind byte, a 4-byte little-endian length, the pickled payload.

- ``V`` the run verified and the options are accepted (always the first frame of a run that exports);
- ``M`` a list of ``(id, headers, body, line, event)``, in export order;
- ``R`` a refusal ``(rule, message, where, exit_code)``: before ``V`` (the run does not verify, a bad option), or
  later (the run changed after it was verified), after the events before it;
- ``E`` an unexpected error in the child (its traceback), ``D`` the end (the number of events).

Nothing is sent before ``V``: the parent reads it (:meth:`Producer.verified`, which raises the child's refusal
exactly as ``export_events`` would have) before it opens the destination.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import struct
import time
import traceback
from typing import Any, AsyncIterator, Iterable, Iterator

from aefgate.bus.sinks import Item
from aefgate.errors import Refusal

FRAME = 256  # events per frame
_HEAD = struct.Struct("<cI")
_PIPE_SIZE = 1 << 20  # asked of the kernel for the pipe (F_SETPIPE_SZ); the default (64 KiB) if refused
_F_SETPIPE_SZ = 1031


class ProducerError(RuntimeError):
    """The child failed in an unexpected way (a bug: its traceback is the message)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _send(fd: int, kind: bytes, payload: Any) -> None:
    blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _HEAD.pack(kind, len(blob)) + blob)


def _encoder(kind: str, fmt: str, mode: str, batch: int, spool_lines: bool):
    """``event -> (id, headers, body, line, event)``: what is sent for it (NATS: the binding's headers with
    ``Nats-Msg-Id``, and the payload; HTTP, one event a request: headers and body), its spool line when there is a
    spool, and the event itself only where the sink needs it (an HTTP batch is encoded by the sink)."""
    from aefgate.bus import codec
    from aefgate.formats.aef import jsonio

    message, dump_line = codec.message, jsonio.dump_line
    nats = kind == "nats"
    if kind == "http" and batch > 1:
        def encode(ev: dict) -> tuple:
            return ev.get("id"), None, None, dump_line(ev) if spool_lines else None, ev
    else:
        def encode(ev: dict) -> tuple:
            eid = ev.get("id")
            headers, body = message(ev, fmt, mode)
            if nats:
                headers["Nats-Msg-Id"] = eid
            return eid, headers, body, dump_line(ev) if spool_lines else None, None
    return encode


def encoded_items(events: Iterable[dict], *, kind: str, fmt: str, mode: str, batch: int,
                  spool_lines: bool) -> Iterator[Item]:
    """The same items as :meth:`Producer.chunks`, encoded in this process (``AEFGATE_WORKERS=0``, or no fork)."""
    encode = _encoder(kind, fmt, mode, batch, spool_lines)
    for i, ev in enumerate(events):
        eid, headers, body, line, event = encode(ev)
        it = Item(i, event, eid)
        it.headers, it.body, it.line = headers, body, line
        yield it


def _child(fd: int, run_dir: Any, options: dict, kind: str, fmt: str, mode: str, batch: int,
           spool_lines: bool) -> None:
    """The child's whole life: export, encode, stream."""
    from aefgate.converters.aef_aep import export_events

    try:
        try:
            events = export_events(run_dir, **options)  # verifies the run (AEP-1) and every option first
        except Refusal as e:
            _send(fd, b"R", (e.rule, e.message, e.where, e.exit_code))
            return
        _send(fd, b"V", None)
        encode = _encoder(kind, fmt, mode, batch, spool_lines)
        out: list[tuple] = []
        n = 0
        try:
            for ev in events:
                out.append(encode(ev))
                if len(out) >= FRAME:
                    _send(fd, b"M", out)
                    n += len(out)
                    out = []
        except Refusal as e:
            if out:
                _send(fd, b"M", out)
            _send(fd, b"R", (e.rule, e.message, e.where, e.exit_code))
            return
        if out:
            _send(fd, b"M", out)
            n += len(out)
        _send(fd, b"D", n)
    except BrokenPipeError:  # the parent stopped reading (it gave up or was interrupted)
        pass
    except BaseException:
        try:
            _send(fd, b"E", traceback.format_exc())
        except BaseException:
            pass


class Producer:
    """A forked child exporting and encoding a run's events (see the module's doc). Use as a context manager."""

    def __init__(self, run_dir: Any, options: dict, *, kind: str, fmt: str, mode: str, batch: int,
                 spool_lines: bool) -> None:
        rfd, wfd = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(wfd, _F_SETPIPE_SZ, _PIPE_SIZE)
        except OSError:
            pass
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.close(rfd)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _child(wfd, run_dir, options, kind, fmt, mode, batch, spool_lines)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(wfd)
        self.pid = pid
        self._fd = rfd
        self._reader: asyncio.StreamReader | None = None
        self._transport = None
        self.done = False
        self.count = 0

    # -- the first frame, read before the event loop runs ----------------------------------------------------------

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            b = os.read(self._fd, n)
            if not b:
                raise ProducerError("the export process ended without a word")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def verified(self) -> None:
        """Wait for the child's verdict on the run and its options: return when they are accepted, raise the
        child's :class:`Refusal` otherwise (the same as ``export_events`` would have raised here)."""
        kind, size = _HEAD.unpack(self._read_exact(_HEAD.size))
        payload = pickle.loads(self._read_exact(size))
        if kind == b"V":
            return
        self._raise(kind, payload)

    def _raise(self, kind: bytes, payload: Any) -> None:
        self.done = True
        if kind == b"R":
            rule, message, where, exit_code = payload
            raise Refusal(rule, message, where, exit_code=exit_code)
        if kind == b"E":
            raise ProducerError(f"the export process failed:\n{payload}")
        raise ProducerError(f"the export process sent an unknown frame {kind!r}")

    # -- the rest, in the event loop ---------------------------------------------------------------------------------

    async def chunks(self) -> AsyncIterator[list[Item]]:
        """The events as :class:`Item` lists (one per frame), with their wire form (``headers``, ``body``) and
        spool line set; raises a refusal the child met on the way, where it met it."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_PIPE_SIZE, loop=loop)
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(self._fd, "rb", buffering=0))
        self._fd = -1  # the transport owns it
        head_size, unpack, loads = _HEAD.size, _HEAD.unpack, pickle.loads
        index = 0
        try:
            while True:
                try:
                    kind, size = unpack(await reader.readexactly(head_size))
                    payload = loads(await reader.readexactly(size))
                except asyncio.IncompleteReadError:
                    raise ProducerError("the export process ended early") from None
                if kind == b"M":
                    items = []
                    for eid, headers, body, line, event in payload:
                        it = Item(index, event, eid)
                        it.headers, it.body, it.line = headers, body, line
                        items.append(it)
                        index += 1
                    self.count = index
                    yield items
                elif kind == b"D":
                    self.done = True
                    return
                else:
                    self._raise(kind, payload)
        finally:
            self._transport.close()
            self._transport = None

    def close(self) -> None:
        """Stop reading and reap the child: a child still exporting gets a broken pipe at its next write and
        ends (its own workers with it); one that does not end within 10 s is killed."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.pid:
            deadline = time.monotonic() + 10.0
            while True:
                try:
                    pid, _status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid:
                    break
                if time.monotonic() > deadline:
                    try:
                        os.kill(self.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    try:
                        os.waitpid(self.pid, 0)
                    except ChildProcessError:
                        pass
                    break
                time.sleep(0.005)
            self.pid = 0

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
