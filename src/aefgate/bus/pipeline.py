"""The producer of ``aefgate publish``: verify, export and encode in a forked child, in one pass over the run
(docs/design/bus.md, "Pipeline"; :mod:`aefgate.formats.aef.onepass`).

:class:`Producer` forks a child process that checks the export's options (as ``export_events`` does), then runs the
one pass itself: :func:`onepass.verify_mapping` verifies the run (AEP-1; with its own worker processes for a large
run) while :class:`_PublishMapper` makes each checked result line's AEP events (as ``export_events`` makes them) and
encodes each into what the destination sends (NATS: the headers with ``Nats-Msg-Id`` and the payload; HTTP one
event per request: headers and body; HTTP batches: the AEP event itself, the sink encodes the batch), plus the
spool line (``jsonio.dump_line`` of the AEP event) when there is a spool. The encoded events are pickled into the
pipe's frames where they are made (in the worker processes for a large run) and appended to an unnamed temporary
file: nothing is sent before the verdict. At the verdict the child sends a refusal (the file dropped unread), or
``V``, the file's frames (``sendfile`` into the pipe), the decision events (AEP-12) and ``D``. The parent reads the
pipe in frames of at most :data:`FRAME` events (pickled: exact, and the cheapest to read back).

What is sent is what was verified: the mapper is handed the run.json the verification read and hashed and each
result line as the verifier checked it (the lines' bytes hashed by the same reads, or, across worker processes,
by each worker and again by the verifier: a difference is a framing problem, so the run is not intact); every blob
read must hash to its name; the run hash the events are named with (AEP-4, the seal's) must be the verdict's.
After the verdict the child reads nothing of the run.

Frames: one kind byte, a 4-byte little-endian length, the pickled payload.

- ``V`` the run verified and the options are accepted (always the first frame of a run that exports);
- ``M`` a list of ``(id, headers, body, line, event)``, in export order;
- ``R`` a refusal ``(rule, message, where, exit_code)``: before ``V`` (a bad option, the run does not verify or
  changed during the pass, a refusal of the export's own: nothing is sent), or later (an event the bridge refuses,
  as in one process where events are encoded as they are sent), after the events before it;
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
from aefgate.formats.aef.onepass import LineMapper

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


def _frame(kind: bytes, payload: Any) -> bytes:
    blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(kind, len(blob)) + blob


def _send(fd: int, kind: bytes, payload: Any) -> None:
    _write_all(fd, _frame(kind, payload))


def _encoder(kind: str, fmt: str, mode: str, batch: int, spool_lines: bool):
    """``event -> (id, headers, body, line, event)``: what is sent for it (NATS: the binding's headers with
    ``Nats-Msg-Id``, as a header block (:func:`codec.nats_header_block`) when they make one, and the payload; HTTP,
    one event a request: headers and body), its spool line when there is a spool, and the event itself only where
    the sink needs it (an HTTP batch is encoded by the sink)."""
    from aefgate.bus import codec
    from aefgate.formats.aef import jsonio

    message, dump_line, block = codec.message, jsonio.dump_line, codec.nats_header_block
    if fmt == "cloudevents" and mode == "structured":
        message = _structured(message)
    if kind == "http" and batch > 1:
        def encode(ev: dict) -> tuple:
            return ev.get("id"), None, None, dump_line(ev) if spool_lines else None, ev
    elif kind == "nats":
        def encode(ev: dict) -> tuple:
            # the headers as the header block the sink sends as it is (NatsSink: "The wire"), when they make one
            eid = ev.get("id")
            headers, body = message(ev, fmt, mode)
            hdr = block(headers, eid) if type(eid) is str else None
            headers["Nats-Msg-Id"] = eid
            return eid, headers if hdr is None else hdr, body, dump_line(ev) if spool_lines else None, None
    else:
        def encode(ev: dict) -> tuple:
            headers, body = message(ev, fmt, mode)
            return ev.get("id"), headers, body, dump_line(ev) if spool_lines else None, None
    return encode


#: the members of the export's usual event (aep_exporter._result_events' literal envelope): all core attributes
_USUAL = frozenset(("aep", "id", "type", "time", "source", "agent", "session", "run", "seq", "epoch", "severity",
                    "capture", "data"))


def _structured(message):
    """``codec.message(ev, "cloudevents", "structured")``, the same bytes, with a fast path for the export's usual
    event (:data:`_USUAL`, no extension attribute): the CloudEvent is built in ``ce_forward``'s member order, and
    the values ``ce_forward`` checks are checked the same way, those that repeat over a run (the source, the agent,
    the session, the type, the time) once each (remembered). Anything else, and any value that fails a check, goes
    through ``codec.message`` itself (which then refuses it as before)."""
    from aefgate.formats.aef import jsonio
    from aefgate.formats.cloudevents import STRUCTURED_CONTENT_TYPE
    from aefgate.formats.cloudevents import mapping

    dumps, usual = jsonio.dumps, _USUAL
    sev_ok, cap_ok = mapping.SEVERITIES, mapping.CAPTURES
    root, dct, spec = mapping.TYPE_ROOT, mapping.DATACONTENTTYPE, mapping.SPECVERSION
    type_re, rfc3339 = mapping._AEP_TYPE.fullmatch, mapping._rfc3339
    top = 2**31 - 1  # CloudEvents' Integer
    types: set[str] = set()  # cleared: an AEP type (B3)
    times: set[str] = set()  # cleared: RFC 3339 (B2)
    envs: set[tuple] = set()  # cleared (aep, source, agent, session): non-empty printable ASCII strings (B2, B4)

    def plain(v: Any) -> bool:
        return type(v) is str and bool(v) and v.isascii() and v.isprintable()

    def learn(typ: Any, time: Any, env: tuple) -> bool:
        """Check the repeated values not seen yet, remember those that pass; whether all pass."""
        for seen in (types, times, envs):
            if len(seen) >= 4096:
                seen.clear()
        if type(typ) is not str or type(time) is not str or not all(type(v) is str for v in env):
            return False
        if typ not in types:
            if not type_re(typ):
                return False
            types.add(typ)
        if time not in times:
            if not rfc3339(time):
                return False
            times.add(time)
        if env not in envs:
            if not all(plain(v) for v in env):
                return False
            envs.add(env)
        return True

    def encode(ev: dict, fmt: str, mode: str) -> tuple[dict[str, str], bytes]:
        if type(ev) is dict and ev.keys() == usual:
            eid, run, seq, epoch, sev, cap, data = (ev["id"], ev["run"], ev["seq"], ev["epoch"], ev["severity"],
                                                    ev["capture"], ev["data"])
            typ, time, aep, source, agent, session = (ev["type"], ev["time"], ev["aep"], ev["source"], ev["agent"],
                                                      ev["session"])
            env = (aep, source, agent, session)
            # a value equal to a cleared string but not a str (a subclass) is not cleared: ce_forward refuses it
            if type(typ) is str and type(time) is str and type(aep) is str and type(source) is str \
                    and type(agent) is str and type(session) is str:
                known = typ in types and time in times and env in envs
            else:
                known = False
            if (type(eid) is str and eid and eid.isascii() and eid.isprintable()
                    and type(run) is str and run and run.isascii() and run.isprintable()
                    and type(seq) is int and 0 <= seq <= top and type(epoch) is int and 0 <= epoch <= top
                    and type(sev) is str and sev in sev_ok and type(cap) is str and cap in cap_ok
                    and type(data) is dict and (known or learn(typ, time, env))):
                return {"content-type": STRUCTURED_CONTENT_TYPE}, dumps({
                    "specversion": spec, "id": eid, "source": source, "type": root + typ, "time": time,
                    "datacontenttype": dct, "aepversion": aep, "aepagentid": agent, "aepsessionid": session,
                    "aeprunid": run, "aepsequence": seq, "aepepoch": epoch, "aepseverity": sev, "aepcapture": cap,
                    "data": data})
        return message(ev, fmt, mode)

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


# -- the child: the one pass ------------------------------------------------------------------------------------------


def _refusal_tuple(e: Refusal) -> tuple:
    return e.rule, e.message, e.where, e.exit_code


class _PublishMapper(LineMapper):
    """The one pass's mapper of ``publish`` (:mod:`aefgate.formats.aef.onepass`): the AEP events of each result
    line (as ``aep_exporter._AepMapper`` makes them, numbered across lines), each encoded into what the sink sends
    (:func:`_encoder`), as ready ``M`` frames of at most :data:`FRAME` items, pickled where the lines are mapped
    (in the verifier's worker processes for a large run: the process running the pass only writes bytes);
    :meth:`put` appends them to ``spool``, an unnamed temporary file that nothing sends before the verdict.

    A refusal of the encoder's (an event the CloudEvents bridge refuses) is not the mapper's failure: it is kept
    (:attr:`late`) with the frames of the events before it and sent after them, as in one process, where the
    events are encoded as they are sent; the events of the lines after it are still made (so that a refusal of the
    export's own, raised before anything is sent in one process, is met) but not encoded. A refusal of the
    export's (``begin``: ``AEP-8``; a blob that is not what its name says: ``AEP-1``) is the mapper's failure,
    sent before ``V`` (nothing is sent), as ``export_events`` raises it in one process."""

    rule = "AEP-1"
    counts = True

    def __init__(self, checked: Any, run_hash: str | None, encode, spool: Any) -> None:
        super().__init__()
        self.checked, self.run_hash, self.encode, self.spool = checked, run_hash, encode, spool
        self.seen: dict[str, tuple] = {}
        self.size = 0  # bytes spooled: whole frames, from offset 0
        self.n = 0  # items spooled
        self.late: tuple | None = None  # the encoder's refusal, after the spooled items

    def begin(self, run: dict, summary: dict | None) -> None:
        from aefgate.converters.aep import exporter as aep_exporter
        from aefgate.errors import EXIT_INTEGRITY

        if self.run_hash is None:
            raise Refusal("AEP-1", "the run has no seal to name its events by", "seal.json", exit_code=EXIT_INTEGRITY)
        self.ctx, self.decisions, self.targets, self.redact = aep_exporter._context(self.checked, self.run_hash, run)
        self.ctx.check_blobs = True  # a blob is read before the verification hashed it: it must hash to its name
        self.result_events = aep_exporter._result_events

    def count(self, data: bytes) -> int:
        from aefgate.converters.aep import exporter as aep_exporter

        return aep_exporter._count_events(data)

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> tuple:
        ctx = self.ctx
        if base is not None:
            ctx.seq = base
        seen: dict[str, tuple] = {}
        encode, dumps, pack, frame = self.encode, pickle.dumps, _HEAD.pack, FRAME
        frames: list[bytes] = []
        out: list[tuple] = []
        n = 0
        late = self.late  # in this process: the encoder refused an earlier event (nothing after it is sent)
        for ev in self.result_events(ctx, [line for _, line in lines], self.targets, seen, self.redact):
            if late is not None:
                continue  # after the encoder's refusal: only the export's own refusals matter
            try:
                out.append(encode(ev))
            except Refusal as e:
                late = _refusal_tuple(e)
                continue
            if len(out) >= frame:
                blob = dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
                frames.append(pack(b"M", len(blob)))
                frames.append(blob)
                n += len(out)
                out = []
        if out:
            blob = dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            frames.append(pack(b"M", len(blob)))
            frames.append(blob)
            n += len(out)
        return b"".join(frames), n, seen, ctx.seq, late

    def put(self, payload: tuple) -> None:
        if _STOPPING:  # SIGTERM, whose exception was lost (_terminated)
            raise SystemExit(143)
        data, n, seen, seq, late = payload
        if self.late is not None:  # the encoder refused an earlier event: nothing after it is sent
            return
        if data:
            _write_all(self.spool.fileno(), data)
            self.size += len(data)
            self.n += n
        if seen:
            self.seen.update(seen)
        self.ctx.seq = seq  # where the decision events go on numbering (the lines may be mapped in workers)
        self.late = late


def _run(fd: int, checked: Any, policy: Any, encode) -> None:
    """The child's work: the one pass (:func:`onepass.verify_mapping`: the verification, with its own worker
    processes for a large run, while :class:`_PublishMapper` spools the encoded frames), then, by the verdict:
    ``R`` (the run is not intact: the refusal ``export_events`` gives; a refusal of the export's; the run changed
    during the pass) with nothing sent, or ``V``, the spooled frames, and the decision events (AEP-12) with ``D``
    (or the encoder's refusal after the events before it)."""
    import tempfile

    from aefgate.converters.aep import exporter as aep_exporter
    from aefgate.errors import EXIT_INTEGRITY
    from aefgate.formats.aef.onepass import MappingError, verify_mapping

    root = checked.root
    with tempfile.TemporaryFile(prefix="aefgate-publish-", buffering=0) as spool:  # no name on Linux
        mapper = _PublishMapper(checked, aep_exporter._sealed_run_hash(root), encode, spool)
        try:
            v = verify_mapping(root, mapper, policy=policy)
            aep_exporter._check_intact(v, root)  # AEP-1: the refusal export_events gives
            if mapper.failure is not None:
                raise mapper.failure
            if v.run_hash != mapper.run_hash:  # pragma: no cover - intact means the seal's run hash is the run's
                raise Refusal("AEP-1", "the run changed during the export", str(root), exit_code=EXIT_INTEGRITY)
        except Refusal as e:
            _send(fd, b"R", _refusal_tuple(e))
            return
        except MappingError as e:  # a bug of the mapping: its traceback
            _send(fd, b"E", str(e))
            return
        if _STOPPING:  # pragma: no cover - SIGTERM after the last batch, its exception lost (_terminated)
            raise SystemExit(143)
        # the decision events (AEP-12), numbered after the result events; what follows them, by the same rule
        tail: list[bytes] = []
        end: tuple[bytes, Any] = (b"R", mapper.late) if mapper.late is not None else (b"D", None)
        if mapper.late is None:
            out: list[tuple] = []
            try:
                for ev in aep_exporter._decision_events(mapper.ctx, mapper.decisions, mapper.seen, mapper.redact):
                    out.append(mapper.encode(ev))
            except Refusal as e:
                end = (b"R", _refusal_tuple(e))
            for i in range(0, len(out), FRAME):
                tail.append(_frame(b"M", out[i:i + FRAME]))
            if end[0] == b"D":
                end = (b"D", mapper.n + len(out))
        _send(fd, b"V", None)
        _copy_file(spool.fileno(), fd, 0, mapper.size)
        for data in tail:
            _write_all(fd, data)
        _send(fd, *end)


def _copy_file(src: int, dst: int, offset: int, length: int) -> None:
    """``length`` bytes of the file ``src`` from ``offset`` into the pipe ``dst``: ``sendfile``, else read/write."""
    size = offset + length
    try:
        while offset < size:
            n = os.sendfile(dst, src, offset, min(size - offset, 1 << 30))
            if n == 0:  # pragma: no cover - the file is shorter than written
                raise ProducerError("the temporary file of the export is shorter than written")
            offset += n
        return
    except BrokenPipeError:
        raise
    except (OSError, AttributeError):  # pragma: no cover - no sendfile to a pipe here
        pass
    while offset < size:  # pragma: no cover
        chunk = os.pread(src, min(size - offset, 1 << 20), offset)
        if not chunk:
            raise ProducerError("the temporary file of the export is shorter than written")
        _write_all(dst, chunk)
        offset += len(chunk)


def _child_signals() -> None:
    """In the child: SIGINT as by default (an interrupt ends it), SIGTERM (from :meth:`Producer.close`) unwinds it
    (:func:`_terminated`). In the processes it forks (the verification's workers) SIGTERM is the default again at
    once, as their pool expects when it ends them with it (a handler in Python misses a signal that comes just
    before a blocking call: a worker could wait forever on a lock its killed sibling held)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, _terminated)
    os.register_at_fork(after_in_child=_default_signals)


def _default_signals() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_STOPPING = False  # the child was asked to end (SIGTERM)


def _terminated(_signum: int, _frame: Any) -> None:
    """SIGTERM in the child: unwind, as an exit does (the verification stops its worker processes and removes its
    temporary files on the way; the temporary file of the frames has no name). Where Python ignores the exception
    (a handler run inside an at-fork callback or a finalizer), the next batch the mapper is given raises it again
    (:meth:`_PublishMapper.put`)."""
    global _STOPPING
    _STOPPING = True
    raise SystemExit(143)


def _child(fd: int, run_dir: Any, options: dict, kind: str, fmt: str, mode: str, batch: int,
           spool_lines: bool) -> None:
    """The child's whole life: the options checked (as ``export_events`` checks them, before the verification),
    then the one pass and what follows the verdict (:func:`_run`)."""
    from aefgate.converters.aep import exporter as aep_exporter

    try:
        opts = dict(options)
        policy = opts.pop("policy", None)
        try:
            checked = aep_exporter._check_options(run_dir, **opts)  # before the verification, as export_events does
        except Refusal as e:
            _send(fd, b"R", _refusal_tuple(e))
            return
        _run(fd, checked, policy, _encoder(kind, fmt, mode, batch, spool_lines))
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
                _child_signals()
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
                        items.append(Item(index, event, eid, headers, body, line))
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
        """Stop reading and reap the child. A child that has not sent its last frame (the parent gave up: a
        refusal, an exception, an interrupt; the pass may have seconds to go) is ended with ``SIGTERM``, which
        it unwinds from, ending its worker processes (:func:`_terminated`), and killed if it has not ended within
        5 s (its workers then end when they find its pipes closed); a child that had sent its last frame is given
        10 s."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.pid:
            patience = 10.0
            if not self.done:
                patience = 5.0  # unwinding takes milliseconds; the rest is the rare signal Python did not act on
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:  # pragma: no cover - not reaped yet: it exists
                    pass
            deadline = time.monotonic() + patience
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
