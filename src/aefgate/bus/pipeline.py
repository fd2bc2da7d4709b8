"""The producer of ``aefgate publish``: verify, export and encode in a forked child, in one pass over the run
(docs/design/bus.md, "Pipeline"; :mod:`aefgate.aef.onepass`).

:class:`Producer` forks a child process that checks the export's options (as ``export_events`` does), then runs the
one pass itself: :func:`verifier.verify_run` (with a mapper) verifies the run (AEP-1; with its own worker processes for a large
run) while :class:`_PublishMapper` keeps each batch of checked result lines (with the explanations read from their
reasoning blobs) in an unnamed temporary file: nothing is sent before the verdict. At the verdict the child sends a
refusal (the file dropped unread), or ``V`` and then makes the AEP events from the file (as ``export_events`` makes
them), encodes each into what the destination sends (NATS: the headers with ``Nats-Msg-Id`` and the payload; HTTP
one event per request: headers and body; HTTP batches: the AEP event itself, the sink encodes the batch; plus the
spool line, ``jsonio.dump_line`` of the AEP event, when there is a spool) and sends them, then the decision events
(AEP-12) and ``D``, while the parent sends the events before them. The parent reads the pipe in frames of at most
:data:`FRAME` events (pickled: exact, and the cheapest to read back).

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
import tempfile
import time
import traceback
from typing import Any, AsyncIterator, Iterable, Iterator

import msgspec

from aefgate.bus import codec
from aefgate.bus.sinks import Item
from aefgate.converters.aep import exporter as aep_exporter
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.aef import jsonio
from aefgate.aef.onepass import LineMapper, MappingError
from aefgate.formats.cloudevents import STRUCTURED_CONTENT_TYPE, mapping

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


#: the members of the export's usual event (aep_exporter.result_events' literal envelope): all core attributes
_USUAL = frozenset(("aep", "id", "type", "time", "source", "agent", "session", "run", "seq", "epoch", "severity",
                    "capture", "data"))


def _structured(message):
    """``codec.message(ev, "cloudevents", "structured")``, the same bytes, with a fast path for the export's usual
    event (:data:`_USUAL`, no extension attribute): the CloudEvent is built in ``ce_forward``'s member order, and
    the values ``ce_forward`` checks are checked the same way, those that repeat over a run (the source, the agent,
    the session, the type, the time) once each (remembered). Anything else, and any value that fails a check, goes
    through ``codec.message`` itself (which then refuses it as before)."""
    dumps, usual = jsonio.dumps, _USUAL
    sev_ok, cap_ok = mapping.SEVERITIES, mapping.CAPTURES
    root, dct, spec = mapping.TYPE_ROOT, mapping.DATACONTENTTYPE, mapping.SPECVERSION
    type_re, rfc3339 = mapping.AEP_TYPE.fullmatch, mapping.rfc3339
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
    """The one pass's mapper of ``publish`` (:mod:`aefgate.aef.onepass`): each batch of checked result
    lines is kept as it was verified (the decoded lines, with the explanation each line's events carry, AEP-9,
    read from its reasoning blob now: a blob that is not what its name says is the export's refusal, ``AEP-1``,
    before anything is sent), packed where the lines are checked (msgpack, exact for every value a verified line
    holds; pickle for an integer beyond 64 bits) and appended by :meth:`put` to ``spool``, an unnamed temporary
    file that nothing sends before the verdict.

    The events are made and encoded after the verdict, from the spool, while the parent sends them
    (:func:`_send_spooled`): the pass costs about what the verification alone costs, and the mapping overlaps the
    sending (docs/design/bus.md, "Pipeline"). What is mapped is still only what was verified: the lines as the
    verifier checked them (never read again from the run), the explanations read and hashed during the pass, the
    run.json and overlay decisions read at :meth:`begin`. A refusal of the export's (``begin``: ``AEP-8``; a blob
    that is not what its name says: ``AEP-1``) is the mapper's failure, sent before ``V`` (nothing is sent), as
    ``export_events`` raises it in one process."""

    rule = "AEP-1"
    counts = False  # numbered after the verdict, in line order, in the child

    def __init__(self, checked: Any, run_hash: str | None, encode, spool: Any) -> None:
        super().__init__()
        self.checked, self.run_hash, self.encode, self.spool = checked, run_hash, encode, spool
        self.size = 0  # bytes spooled: whole records, from offset 0

    def begin(self, run: dict, summary: dict | None) -> None:
        if self.run_hash is None:
            raise Refusal("AEP-1", "the run has no seal to name its events by", "seal.json", exit_code=EXIT_INTEGRITY)
        self.ctx, self.decisions, self.targets, self.redact = aep_exporter.export_context(self.checked, self.run_hash,
                                                                                          run)
        self.ctx.check_blobs = True  # a blob is read before the verification hashed it: it must hash to its name
        self.packer = msgspec.msgpack.Encoder()

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> bytes:
        docs = [line for _, line in lines]
        ctx = self.ctx
        expls = [ctx.explanation(line) for line in docs] if ctx.text else None  # AEP-9: read (and hashed) now
        record = [docs, expls]
        try:
            blob, kind = self.packer.encode(record), b"m"
        except OverflowError:  # an integer msgpack does not hold: exact in pickle
            blob, kind = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL), b"p"
        return _HEAD.pack(kind, len(blob)) + blob

    def put(self, payload: bytes) -> None:
        if _STOPPING:  # SIGTERM, whose exception was lost (_terminated)
            raise SystemExit(143)
        _write_all(self.spool.fileno(), payload)
        self.size += len(payload)


def _spooled_lines(spool: Any, size: int) -> Iterator[tuple[list[dict], list | None]]:
    """The batches :meth:`_PublishMapper.put` spooled, in line order: ``(lines, explanations or None)``."""
    unpack = msgspec.msgpack.Decoder().decode
    head = _HEAD.size
    with open(os.dup(spool.fileno()), "rb", buffering=1 << 20) as f:
        f.seek(0)
        offset = 0
        while offset < size:
            kind, n = _HEAD.unpack(f.read(head))
            blob = f.read(n)
            if len(blob) != n:  # pragma: no cover - the file is shorter than written
                raise ProducerError("the temporary file of the export is shorter than written")
            offset += head + n
            lines, expls = unpack(blob) if kind == b"m" else pickle.loads(blob)
            yield lines, expls


def _send_spooled(fd: int, mapper: _PublishMapper) -> None:
    """After ``V``: the result events of the spooled lines (as ``export_events`` makes them, numbered in line
    order), then the decision events (AEP-12), each encoded into what the sink sends, in ``M`` frames of at most
    :data:`FRAME` items, then ``D``; an event the encoder refuses (the CloudEvents bridge) ends them with its
    refusal ``R`` after the events before it, as in one process, where the events are encoded as they are sent."""
    ctx, encode, redact, targets = mapper.ctx, mapper.encode, mapper.redact, mapper.targets
    seen: dict[str, tuple] = {}
    current: dict[int, Any] = {}
    ctx.explanation = lambda line: current[id(line)]  # the explanations read during the pass
    out: list[tuple] = []
    n = 0

    def flush() -> None:
        nonlocal out, n
        if out:
            _send(fd, b"M", out)
            n += len(out)
            out = []

    def events() -> Iterator[dict]:
        for lines, expls in _spooled_lines(mapper.spool, mapper.size):
            if _STOPPING:  # pragma: no cover - SIGTERM, its exception lost (_terminated)
                raise SystemExit(143)
            current.clear()
            if expls is not None:
                current.update(zip(map(id, lines), expls))
            yield from aep_exporter.result_events(ctx, lines, targets, seen, redact)
        yield from aep_exporter.decision_events(ctx, mapper.decisions, seen, redact)

    for ev in events():
        try:
            out.append(encode(ev))
        except Refusal as e:
            flush()
            _send(fd, b"R", _refusal_tuple(e))
            return
        if len(out) >= FRAME:
            flush()
    flush()
    _send(fd, b"D", n)


def _run(fd: int, checked: Any, policy: Any, encode) -> None:
    """The child's work: the one pass (``verify_run(mapper=)``: the verification, with its own worker
    processes for a large run, while :class:`_PublishMapper` spools the checked lines), then, by the verdict:
    ``R`` (the run is not intact: the refusal ``export_events`` gives; a refusal of the export's; the run changed
    during the pass) with nothing sent, or ``V`` and the events made from the spool (:func:`_send_spooled`)."""
    root = checked.root
    with tempfile.TemporaryFile(prefix="aefgate-publish-", buffering=0) as spool:  # no name on Linux
        mapper = _PublishMapper(checked, aep_exporter.sealed_run_hash(root), encode, spool)
        try:
            aep_exporter.verify_for_export(root, mapper, policy)  # AEP-1: the refusals export_events gives
        except Refusal as e:
            _send(fd, b"R", _refusal_tuple(e))
            return
        except MappingError as e:  # a bug of the mapping: its traceback
            _send(fd, b"E", str(e))
            return
        if _STOPPING:  # pragma: no cover - SIGTERM after the last batch, its exception lost (_terminated)
            raise SystemExit(143)
        _send(fd, b"V", None)
        _send_spooled(fd, mapper)


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
    try:
        opts = dict(options)
        policy = opts.pop("policy", None)
        try:
            checked = aep_exporter.check_options(run_dir, **opts)  # before the verification, as export_events does
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
            import fcntl  # lazy: POSIX only (a platform without it keeps the default pipe size)

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
