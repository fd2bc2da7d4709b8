"""The producer of ``aefgate publish``: verify, export and encode in forked processes (docs/design/bus.md,
"Pipeline").

:class:`Producer` forks a child process that checks the export's options (as ``export_events`` does) and forks two
grandchildren: one verifies the run (AEP-1) and sends its verdict; the other (the pre-export: only when
``AEFGATE_PUBLISH_BUFFER`` is set above 0, off by default), at the lowest priority, exports the run's events from
the start without waiting for the verdict and encodes each into what the destination sends (NATS: the headers with
``Nats-Msg-Id`` and the payload; HTTP one event per request: headers and body; HTTP batches: the AEP event itself,
the sink encodes the batch), plus the spool line (``jsonio.dump_line`` of the AEP event) when there is a spool, as
frames in an unlinked temporary file (at most ``AEFGATE_PUBLISH_BUFFER`` bytes). Without it the child exports
everything after the verdict, with the same integrity checks.
At the verdict the child stops the pre-export at a line's end; a refusal is sent on and the file dropped; an accepted
verdict sends ``V``, the file's frames, then the rest of the export, made by the child from where the pre-export
stopped. The parent reads the pipe in frames of :data:`FRAME` events (pickled: exact, and the cheapest to read back).

The export reads the run beside the verification, so it proves it read what was verified: run.json and every line
of results.ndjson taken are hashed and compared with the verification's digests (those the seal records), the run
hash (the seal's, read by the exporter) with the verdict's, and every blob read with its name; a mismatch is
``AEP-1`` "the run changed after it was verified" (exit 1), before ``V`` when the export ended before the verdict
(nothing is sent), else before ``D``.

Frames: one kind byte, a 4-byte little-endian length, the pickled payload.

- ``V`` the run verified and the options are accepted (always the first frame of a run that exports);
- ``M`` a list of ``(id, headers, body, line, event)``, in export order;
- ``R`` a refusal ``(rule, message, where, exit_code)``: before ``V`` (the run does not verify, a bad option, the
  run changed and nothing was sent yet), or later (the run changed, an event the bridge refuses), after the events
  before it;
- ``E`` an unexpected error in the child (its traceback), ``D`` the end (the number of events).

Nothing is sent before ``V``: the parent reads it (:meth:`Producer.verified`, which raises the child's refusal
exactly as ``export_events`` would have) before it opens the destination.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pickle
import signal
import struct
import time
import traceback
from collections import deque
from typing import Any, AsyncIterator, Iterable, Iterator

import msgspec

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


# -- the child: the verification and the pre-export in grandchildren ---------------------------------------------------

# bytes of encoded frames the pre-export may hold in the temporary file (AEFGATE_PUBLISH_BUFFER; 0, the default: no
# pre-export, the export follows the verdict; docs/design/bus.md, "Is it faster?")
BUFFER = 0
SUGGESTED_BUFFER = 256 << 20  # what AEFGATE_PUBLISH_BUFFER was by default until 2026-12-02 (about 240,000 events)
QUEUE = 32 << 20  # bytes of frames made after the verdict waiting for the pipe (behind the file's), at most
PRE_NICE = 19  # the pre-export's niceness where SCHED_IDLE is not available: it takes the CPU the verification leaves
_DIGESTED = ("run.json", "results.ndjson")  # the sealed files the export reads whole (blobs: by their names)


class _Stop(Exception):
    """The child has sent its last frame (a refusal, an error): it ends."""


def _buffer_cap() -> int:
    """``AEFGATE_PUBLISH_BUFFER``, else :data:`BUFFER` (bytes; 0: no export before the verdict)."""
    from aefgate.formats.aef.spill import bound

    return bound("AEFGATE_PUBLISH_BUFFER", BUFFER)


def _refusal_tuple(e: Refusal) -> tuple:
    return e.rule, e.message, e.where, e.exit_code


def _changed(where: str) -> Refusal:
    from aefgate.errors import EXIT_INTEGRITY

    return Refusal("AEP-1", "the run changed after it was verified", where, exit_code=EXIT_INTEGRITY)


def _read_frame(fd: int) -> tuple[bytes, Any] | None:
    """One frame from a blocking pipe, or None at its end."""
    def exact(n: int) -> bytes | None:
        chunks = []
        while n:
            b = os.read(fd, n)
            if not b:
                return None
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    head = exact(_HEAD.size)
    if head is None:
        return None
    kind, size = _HEAD.unpack(head)
    blob = exact(size)
    return None if blob is None else (kind, pickle.loads(blob))


def _fork(life, *args) -> int:
    """Fork a grandchild running ``life(*args)``; its pid."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            life(*args)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    return pid


def _reap(pid: int, kill: bool = False) -> None:
    if not pid:
        return
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # pragma: no cover
        pass


class _Lines:
    """results.ndjson's lines from byte ``start`` (after ``taken`` lines), decoded as ``aep_exporter._verified_lines``
    decodes them (a line that no longer decodes: the run changed, ``AEP-1``). ``taken``, ``consumed`` and ``digest``
    account for the lines the consumer is done with (it asked for the next one, or the iteration ended): their
    number, the offset after them, their bytes hashed on top of ``digest`` as given (the bytes before ``start``: at
    the end of the file it is then the file's digest). ``eof``: every line was taken."""

    def __init__(self, path: Any, start: int = 0, taken: int = 0, digest: Any = None) -> None:
        self.path, self.start, self.taken = path, start, taken
        self.digest = digest if digest is not None else hashlib.sha256()
        self.consumed = start
        self.eof = False

    def __iter__(self) -> Iterator[dict]:
        decode = msgspec.json.Decoder().decode
        update = self.digest.update
        lineno = self.taken
        with open(self.path, "rb") as f:
            f.seek(self.start)
            carry = b""
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                buf = carry + chunk if carry else chunk
                parts = buf.split(b"\n")
                carry = parts.pop()
                view = memoryview(buf)
                pos = 0
                for raw in parts:
                    lineno += 1
                    try:
                        line = decode(raw)
                    except (msgspec.DecodeError, RecursionError):
                        line = None
                    if type(line) is not dict:
                        raise _changed(f"results.ndjson:{lineno}")
                    end = pos + len(raw) + 1
                    yield line
                    update(view[pos:end])  # done with: accounted
                    self.taken = lineno
                    self.consumed += end - pos
                    pos = end
                view.release()
            if carry:
                raise _changed(f"results.ndjson:{lineno + 1}")
            self.eof = True


def _setup(aep_exporter: Any, checked: Any, run_hash: str | None) -> tuple:
    """What the export needs (``aep_exporter._context``), from run.json as read here and the run hash (the seal's, read
    here, when None), with the run hash and run.json's digest: ``(ctx, decisions, targets, redact, run_hash,
    run.json's sha256)``."""
    from aefgate.formats.aef import jsonio

    root = checked.root
    if run_hash is None:
        with open(root / "seal.json", "rb") as f:
            run_hash = msgspec.json.decode(f.read(jsonio.MAX_SEAL + 1), type=_SealHead).predicate.runHash
    with open(root / "run.json", "rb") as f:
        buf = f.read(jsonio.MAX_DOC + 1)
    run = jsonio.loads(buf, max_size=jsonio.MAX_DOC)
    ctx, decisions, targets, redact = aep_exporter._context(checked, run_hash, run)
    ctx.check_blobs = True
    return ctx, decisions, targets, redact, run_hash, hashlib.sha256(buf).hexdigest()


class _SealPredicate(msgspec.Struct):
    runHash: str  # noqa: N815


class _SealHead(msgspec.Struct):
    predicate: _SealPredicate


# -- the grandchildren ------------------------------------------------------------------------------------------------


def _verifier(fd: int, root: Any, policy: Any) -> None:
    """The verifying grandchild: verify the run (AEP-1) and send the verdict: ``V`` with the run hash and the
    digests the verification read for :data:`_DIGESTED` (those the seal records: the run is intact), or ``R``."""
    from aefgate.converters.aep.exporter import _verify_intact

    try:
        try:
            v = _verify_intact(root, policy)
        except Refusal as e:
            _send(fd, b"R", _refusal_tuple(e))
            return
        files = getattr(v.manifest, "_src", None)
        digests: dict[str, str] = {}
        if files is not None and hasattr(files, "digest"):
            for name in _DIGESTED:
                d = files.digest(name)
                if d is not None:
                    digests[name] = d[0]
        else:  # pragma: no cover - a manifest over a list
            digests = {path: h for path, h, _size in v.manifest.entries if path in _DIGESTED}
        _send(fd, b"V", (v.run_hash, digests))
    except BrokenPipeError:  # the child has gone
        pass
    except BaseException:
        try:
            _send(fd, b"E", traceback.format_exc())
        except BaseException:
            pass


def _lowest_priority() -> None:
    """This process runs only on CPU nobody else wants: ``SCHED_IDLE`` (Linux; allowed to any process, and this
    process ends at the verdict: nothing to restore), else :data:`PRE_NICE` more niceness."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        pass
    try:  # pragma: no cover
        os.nice(PRE_NICE)
    except OSError:  # pragma: no cover
        pass


def _pre_export(spill: int, cap: int, checked: Any, encode) -> None:
    """The pre-exporting grandchild, at the lowest priority (:func:`_lowest_priority`): export and encode from the
    start of the run into the temporary file ``spill``, as records (a frame's head and pickle): ``I`` what the export
    set out with (the run hash, run.json's digest, the decisions and their targets), then ``M`` frames of whole
    lines, each followed by a checkpoint ``C`` (the lines taken, the offset after them and their digest, the next
    sequence number, the targets seen, ``eof``: the export is complete), until the end of the export or ``cap``
    bytes; ``R`` a refusal met (after the events before it), ``X`` nothing done (its set-up failed: the child does
    it again after the verdict), ``E`` an unexpected error. The child kills it at the verdict whatever it is doing
    and goes on from the last checkpoint: it never waits for this process, which a busy machine may starve."""
    from aefgate.converters.aep import exporter as aep_exporter

    _lowest_priority()

    def record(kind: bytes, payload: Any) -> int:
        blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        data = _HEAD.pack(kind, len(blob)) + blob
        _write_all(spill, data)
        return len(data)

    try:
        try:
            ctx, decisions, targets, redact, run_hash, run_digest = _setup(aep_exporter, checked, None)
        except Exception:  # met again by the child, after the verdict
            record(b"X", None)
            return
        record(b"I", dict(run_hash=run_hash, run_digest=run_digest, decisions=decisions, targets=targets))
        lines = _Lines(checked.root / "results.ndjson")
        seen: dict[str, tuple] = {}
        spilled = n = 0
        out: list[tuple] = []
        last = 0  # lines.taken at the previous event: it changes at a line's first event
        try:
            for ev in aep_exporter._result_events(ctx, lines, targets, seen, redact):
                if lines.taken != last:
                    last = lines.taken
                    if len(out) >= FRAME:  # whole lines: a checkpoint after them
                        spilled += record(b"M", out)
                        n += len(out)
                        out = []
                        record(b"C", dict(taken=lines.taken, consumed=lines.consumed,
                                          prefix=lines.digest.hexdigest(), seq=ctx.seq - 1, seen=seen, eof=False,
                                          n=n))
                        if spilled >= cap:
                            return
                out.append(encode(ev))
            for ev in aep_exporter._decision_events(ctx, decisions, seen, redact):
                out.append(encode(ev))
        except Refusal as e:
            if out:
                record(b"M", out)
            record(b"R", _refusal_tuple(e))
            return
        if out:
            record(b"M", out)
            n += len(out)
        record(b"C", dict(taken=lines.taken, consumed=lines.consumed, prefix=lines.digest.hexdigest(), seq=ctx.seq,
                          seen=seen, eof=True, n=n))
    except BaseException:
        try:
            record(b"E", traceback.format_exc())
        except BaseException:
            pass


def _scan(fd: int) -> tuple[dict | None, tuple[bytes, Any] | None, list[tuple[int, int]]]:
    """The pre-export's file, read back after it ended: its ``I`` record, its last complete record other than a
    frame (``C``, ``R``, ``X`` or ``E``; a record cut short by the kill is not complete) and the ``(offset,
    length)`` of the ``M`` frames before that record."""
    size = os.fstat(fd).st_size
    offset = 0
    init = last = None
    frames: list[tuple[int, int]] = []
    upto = 0
    while offset + _HEAD.size <= size:
        kind, length = _HEAD.unpack(os.pread(fd, _HEAD.size, offset))
        end = offset + _HEAD.size + length
        if end > size:
            break
        if kind == b"M":
            frames.append((offset, end - offset))
        else:
            payload = pickle.loads(os.pread(fd, length, offset + _HEAD.size))
            if kind == b"I":
                init = payload
            else:
                last, upto = (kind, payload), len(frames)
        offset = end
    return init, last, frames[:upto]


# -- the child --------------------------------------------------------------------------------------------------------


class _Run:
    """One child's work: the grandchildren, the temporary file, the pipe to the parent."""

    def __init__(self, fd: int, checked: Any, policy: Any, encode) -> None:
        self.fd, self.checked, self.encode = fd, checked, encode
        self.vpid = self.epid = 0
        self.vfd = -1
        self.spill: Any = None
        try:
            rfd, wfd = os.pipe()
            self.vpid = _fork(self._verifier_life, rfd, wfd, checked.root, policy)
            os.close(wfd)
            self.vfd = rfd
            # what _context imports (verify_chain), once for the pre-export and this process, while the verifier works
            from aefgate.formats.aef import overlays  # noqa: F401
            cap = _buffer_cap()
            if cap > 0:
                import tempfile

                self.spill = tempfile.TemporaryFile(prefix="aefgate-publish-", buffering=0)  # no name on Linux
                self.epid = _fork(self._pre_life, cap)
        except BaseException:
            self.close()
            raise

    def _verifier_life(self, rfd: int, wfd: int, root: Any, policy: Any) -> None:
        os.close(rfd)
        os.close(self.fd)  # the pipe to the parent is the child's alone
        _verifier(wfd, root, policy)

    def _pre_life(self, cap: int) -> None:
        os.close(self.fd)
        os.close(self.vfd)
        _pre_export(self.spill.fileno(), cap, self.checked, self.encode)

    def close(self) -> None:
        """Every grandchild reaped: the pre-export killed if still running (it holds nothing but the temporary
        file), the verification waited for (it is not interrupted: it takes its worker processes down with it when
        it ends); the temporary file closed (it never had a name)."""
        _reap(self.epid, kill=True)
        self.epid = 0
        if self.vfd >= 0:
            os.close(self.vfd)
            self.vfd = -1
        _reap(self.vpid)
        self.vpid = 0
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    # -- the steps -------------------------------------------------------------------------------------------------

    def verdict(self) -> tuple[str, dict[str, str]]:
        """Wait for the verdict; a refusal or an error is sent on (:class:`_Stop`); ``(run hash, digests)``."""
        got = _read_frame(self.vfd)
        os.close(self.vfd)
        self.vfd = -1
        _reap(self.vpid)
        self.vpid = 0
        if got is None:
            got = (b"E", "the verification process ended without a verdict\n")
        kind, payload = got
        if kind != b"V":
            _reap(self.epid, kill=True)
            self.epid = 0
            _send(self.fd, kind, payload)
            raise _Stop
        return payload

    def refuse(self, e: Refusal) -> None:
        _send(self.fd, b"R", _refusal_tuple(e))
        raise _Stop

    def run(self) -> None:
        from aefgate.converters.aep import exporter as aep_exporter

        try:  # while the grandchildren work; checked against the verdict, and made again when it does not fit
            early = _setup(aep_exporter, self.checked, None)
        except Exception:
            early = None
        run_hash, digests = self.verdict()

        def setup() -> tuple:
            got = early if early is not None and early[4] == run_hash else _setup(aep_exporter, self.checked, run_hash)
            if got[5] != digests.get("run.json"):
                self.refuse(_changed("run.json"))
            return got

        # the pre-export is stopped where it is (never waited for); its file read back
        _reap(self.epid, kill=True)
        self.epid = 0
        init, last, frames = _scan(self.spill.fileno()) if self.spill is not None else (None, None, [])
        kind, payload = last if last is not None else (b"X", None)
        if kind in (b"R", b"C") and init is None:  # pragma: no cover - I is written first
            kind, payload = b"X", None
        if kind == b"E":
            _send(self.fd, b"E", payload)
            raise _Stop
        if kind in (b"R", b"C"):
            if init["run_hash"] != run_hash:
                self.refuse(_changed("seal.json"))
            if init["run_digest"] != digests.get("run.json"):
                self.refuse(_changed("run.json"))
        if kind == b"R":
            if payload[0] == "AEP-1":  # the run changed after it was verified: nothing is sent
                self.refuse(Refusal(payload[0], payload[1], payload[2], exit_code=payload[3]))
            _send(self.fd, b"V", None)
            feed = _Feed(self.fd, self.spill, frames)
            self.spill = None
            try:
                feed.put(b"R", payload)  # after the events before it, as in one process
            finally:
                feed.finish()
            return
        if kind == b"C" and payload["eof"]:  # the whole export is in the file: its digest first, then it is sent
            if payload["prefix"] != digests.get("results.ndjson"):
                self.refuse(_changed("results.ndjson"))
            _send(self.fd, b"V", None)
            feed = _Feed(self.fd, self.spill, frames)
            self.spill = None
            try:
                feed.put(b"D", payload["n"])
            finally:
                feed.finish()
            return
        if kind == b"C":  # the rest from the checkpoint: the bytes taken must still be the file's first ones
            ctx, _decisions, _targets, redact, _rh, _rd = setup()
            digest = _prefix_digest(self.checked.root / "results.ndjson", payload["consumed"])
            if digest.hexdigest() != payload["prefix"]:
                self.refuse(_changed("results.ndjson"))
            ctx.seq = payload["seq"]
            decisions, targets, seen = init["decisions"], init["targets"], payload["seen"]
            lines = _Lines(self.checked.root / "results.ndjson", payload["consumed"], payload["taken"], digest)
            n = payload["n"]
        else:  # no checkpoint: everything from here
            ctx, decisions, targets, redact, _rh, _rd = setup()
            seen = {}
            lines = _Lines(self.checked.root / "results.ndjson")
            n = 0
            frames = []
        _send(self.fd, b"V", None)
        # the file's frames and the next ones go to the pipe from a thread: the export goes on meanwhile
        feed = _Feed(self.fd, self.spill, frames)
        self.spill = None  # the feed's now
        try:
            encode, put = self.encode, feed.put
            out: list[tuple] = []
            try:
                for ev in aep_exporter._result_events(ctx, lines, targets, seen, redact):
                    out.append(encode(ev))
                    if len(out) >= FRAME:
                        put(b"M", out)
                        n += len(out)
                        out = []
                for ev in aep_exporter._decision_events(ctx, decisions, seen, redact):
                    out.append(encode(ev))
            except Refusal as e:
                if out:
                    put(b"M", out)
                put(b"R", _refusal_tuple(e))
                return
            if out:
                put(b"M", out)
                n += len(out)
            if lines.digest.hexdigest() != digests.get("results.ndjson"):
                put(b"R", _refusal_tuple(_changed("results.ndjson")))
                return
            put(b"D", n)
        finally:
            feed.finish()


class _Feed:
    """The frames to the parent, written by a thread: the pre-export's frames first (``sendfile`` from its file),
    then the frames :meth:`put` queues (pickled here), so that the export goes on while the parent reads the file's
    frames. At most :data:`QUEUE` bytes wait in the queue (:meth:`put` waits beyond); an error of the thread's (the
    parent has gone: ``EPIPE``) is raised by the next :meth:`put` or by :meth:`finish`."""

    def __init__(self, fd: int, spill: Any, frames: list[tuple[int, int]]) -> None:
        import threading

        self.fd, self.spill, self.frames = fd, spill, frames
        self.queue: deque = deque()
        self.queued = 0
        self.done = False
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="aefgate-feed", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        cond, queue = self.cond, self.queue
        try:
            if self.frames:
                src = self.spill.fileno()
                for offset, length in self.frames:
                    _copy_file(src, self.fd, offset, length)
            if self.spill is not None:
                self.spill.close()
                self.spill = None
            while True:
                with cond:
                    while not queue and not self.done:
                        cond.wait()
                    if not queue:
                        return
                    data = queue.popleft()
                    self.queued -= len(data)
                    cond.notify_all()
                _write_all(self.fd, data)
        except BaseException as e:
            with cond:
                self.error = e
                cond.notify_all()

    def put(self, kind: bytes, payload: Any) -> None:
        blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        data = _HEAD.pack(kind, len(blob)) + blob
        with self.cond:
            while self.queued > QUEUE and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise self.error
            self.queue.append(data)
            self.queued += len(data)
            self.cond.notify_all()

    def finish(self) -> None:
        """Everything queued written (or the thread's error raised), the thread joined."""
        with self.cond:
            self.done = True
            self.cond.notify_all()
        self.thread.join()
        if self.spill is not None:
            self.spill.close()
            self.spill = None
        if self.error is not None:
            raise self.error


def _prefix_digest(path: Any, size: int) -> Any:
    """SHA-256 of the first ``size`` bytes of the file (a hash object, to go on with)."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        left = size
        while left:
            chunk = f.read(min(left, 1 << 22))
            if not chunk:
                raise _changed("results.ndjson")
            h.update(chunk)
            left -= len(chunk)
    return h


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


def _child(fd: int, run_dir: Any, options: dict, kind: str, fmt: str, mode: str, batch: int,
           spool_lines: bool) -> None:
    """The child's whole life: the options checked, the verification and the pre-export started in grandchildren,
    the verdict awaited, then the pre-export's frames and the rest of the export streamed."""
    from aefgate.converters.aep import exporter as aep_exporter

    try:
        opts = dict(options)
        policy = opts.pop("policy", None)
        try:
            checked = aep_exporter._check_options(run_dir, **opts)  # before the verification, as export_events does
        except Refusal as e:
            _send(fd, b"R", _refusal_tuple(e))
            return
        work = _Run(fd, checked, policy, _encoder(kind, fmt, mode, batch, spool_lines))
        try:
            work.run()
        except _Stop:
            pass
        except Refusal as e:  # met after an accepted verdict (an option that depends on the run: AEP-8)
            _send(fd, b"R", _refusal_tuple(e))
        finally:
            work.close()
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
