"""``aefgate serve otlp``: an OTLP/HTTP receiver that turns evaluation events into sealed runs (docs/gateway.md).

An application points its standard OTLP/HTTP exporter at it (``OTEL_EXPORTER_OTLP_ENDPOINT``). The HTTP layer is
aiohttp's server (``aiohttp.web``); this module holds what the receiver does with a request:

1. **Intake** (``POST /v1/logs``, ``POST /v1/traces``; protobuf or JSON, gzip or not). A body over ``max_body``
   is 413; one that decompresses past its bound (a gzip bomb) is 413; one that does not decode is 400 (with a
   ``google.rpc.Status`` body, as the OTLP/HTTP specification says). A gzip body is decompressed as it is read
   (aiohttp), never past the bound. Each ``gen_ai.evaluation.result`` record is
   checked on its own against the page's rules (OT-6: a name, a case, a placeable state); a record that fails is
   rejected and counted in the answer's ``partial_success`` with the first reason. Everything else is accepted.
2. **Journal.** The accepted request is appended to ``OUT/.otlp/journal.ndjson`` and the file fsynced (requests
   arriving together share one fsync) before the answer 200: a crash loses nothing that was acknowledged. When
   more than ``queue`` requests wait for the journal, the answer is 503 with ``Retry-After: 1``. When the journal
   cannot be written (a full disk) the batch is cut back off the file and answered 503 with ``Retry-After: 5``
   (:class:`DiskFull`); the receiver is unavailable (``/healthz`` 503) until :meth:`Receiver.prober` sees the disk
   take writes again, then resumes by itself. A retried body is recognised within a bounded window (:class:`Bodies`).
3. **Runs.** Records are grouped into runs: by ``test.suite.run.id`` when the record or its resource carries one,
   else by ``service.name``; a run is sealed when its group has been idle for ``idle`` seconds (or at SIGTERM). Its
   spans are those of the traces its events are parented to. The run is written by the OpenTelemetry importer
   (:func:`aefgate.converters.otel.importer.from_otel`: imported, sealed ``ingest``, ``--key`` signs it) into
   ``OUT/<runId>``, atomically; then the journal records it as sealed. A retried request's records (the same record
   twice in a group) are kept once.
4. **Restart.** The journal is replayed: sealed runs are skipped (a run folder that exists is not written again),
   open groups are rebuilt and sealed when idle. A torn last line (a crash mid-write) is dropped: it was never
   acknowledged. A run whose build fails on a full disk goes back to its group and is sealed later. The build's
   temporary folders are removed at start and at every exit (:meth:`Receiver.clean_temporaries`).

``GET /healthz`` answers 200 once the journal is open, 503 while it cannot be written. Prometheus metrics
(``prometheus-client``) on their own listener: requests by signal and status, records received and rejected, runs
sealed and refused, the journal's size and the queue's depth.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from aefgate.bus.otlp_bus import Publisher, has_spans
from aefgate.converters.otel.conventions import (
    RUN_ID_KEY,
    group_key,
    is_evaluation,
    result_mark,
    run_id_part,
)
from aefgate.converters.otel.importer import EventCheck, Unplaceable, from_otel
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.signatures import signing_key_of
from aefgate.formats.otlp import (
    MAX_BODY,
    attributes,
    decode_body,
    is_null_id,
    to_json,
    value_of,
)
from aefgate.fsutil import fsync_dir
from aefgate.masking import mask
from aefgate.net.http_server import (
    BodyError,
    application,
    hostport,
    metrics_server,
    read_body,
    start,
)

__all__ = ["Receiver", "serve"]


# -- the journal ----------------------------------------------------------------------------------------------------


class JournalError(OSError):
    """The journal could not be written (a full disk, a quota, an I/O error): nothing of the write is kept."""


class Journal:
    """An append-only file of JSON lines, fsynced per batch of appends.

    A write is all or nothing: an append that fails part-way (``ENOSPC`` after some bytes, an ``fdatasync`` that
    fails) is cut back to the journal's last good offset before :class:`JournalError` is raised, so that no torn
    line is ever followed by an acknowledged one. When even the cut fails, the journal stays ``torn`` and the next
    append (or :meth:`repair`) cuts it first. A replay skips what is not a whole line of JSON: a torn last line is
    cut off the file, and counted (``dropped_lines``, ``dropped_bytes``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.dropped_lines = 0
        self.dropped_bytes = 0
        self.entries = list(self._replay())
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size  # the last good offset: every byte before it is whole lines
        self.torn = False
        self.lock = threading.Lock()

    def _replay(self):
        if not self.path.exists():
            return
        good = 0  # the end of the last whole line
        with open(self.path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    self.dropped_lines += 1  # a torn last line: never acknowledged
                    self.dropped_bytes += len(raw)
                    break
                good += len(raw)
                try:
                    entry = json.loads(raw)
                except ValueError:
                    self.dropped_lines += 1  # not a record: skipped, never read as one
                    self.dropped_bytes += len(raw)
                    continue
                if isinstance(entry, dict):
                    yield entry
        if good != self.path.stat().st_size:
            with open(self.path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())

    def _cut(self) -> None:
        os.ftruncate(self.fd, self.size)
        self.torn = False

    def repair(self) -> None:
        """Cut a torn end left by a failed append (raises OSError when it still cannot be cut)."""
        with self.lock:
            if self.torn:
                self._cut()

    def append(self, lines: list[bytes]) -> None:
        """Append ``lines`` and fdatasync them; :class:`JournalError` (nothing kept) when the file cannot take
        them."""
        with self.lock:  # the writer's thread and the sealer both append
            try:
                if self.torn:
                    self._cut()
                view = memoryview(b"".join(lines))
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
                os.fdatasync(self.fd)  # the data and the size: what a replay needs
            except OSError as e:
                self.torn = True
                with contextlib.suppress(OSError):
                    self._cut()  # shrinking a file needs no space
                raise JournalError(e.errno, e.strerror or str(e), str(self.path)) from None
            self.size = os.fstat(self.fd).st_size

    def restart(self, line: bytes) -> None:
        """Replace the journal by ``line`` alone (a compaction): written aside and renamed over it, so that a
        failed write (a full disk) leaves the journal as it was (:class:`JournalError`)."""
        with self.lock:
            tmp = self.path.with_name(self.path.name + ".new")
            try:
                with open(tmp, "wb") as f:
                    f.write(line)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
                fsync_dir(self.path.parent)
            except OSError as e:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise JournalError(e.errno, e.strerror or str(e), str(self.path)) from None
            os.close(self.fd)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self.size = os.fstat(self.fd).st_size
            self.torn = False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- grouping into runs ---------------------------------------------------------------------------------------------


@dataclass
class Group:
    key: tuple[str, str]
    run_id: str
    service: str | None
    docs: list[dict] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)  # result_mark of each event: OT-6's "the same metric twice"
    trace_ids: set[str] = field(default_factory=set)
    events: int = 0
    rejected: int = 0  # the group's evaluation events rejected at intake (partial success): in the sealed run's ext
    last: float = 0.0
    taken_spans: dict[str, list[dict]] = field(default_factory=dict)  # the spans a seal under way took
    merged: list[str] = field(default_factory=list)  # run ids of groups merged into it while its seal was retried


class Assembler:
    """Records -> groups (one future run each); spans by trace id."""

    def __init__(self, sealed: set[str]) -> None:
        self.groups: dict[tuple[str, str], Group] = {}
        self.spans: dict[str, list[dict]] = {}  # trace id -> TracesData subsets holding its spans
        self.sealed = sealed
        self.taken: set[str] = set(sealed)
        self.pending: dict[tuple[str, str], set[bytes]] = {}  # result marks of a group not made yet
        self.pending_rejected: dict[tuple[str, str], int] = {}  # rejected events of a group not made yet

    def _group(self, key: tuple[str, str], service: str | None, seq: int, now: float) -> Group:
        g = self.groups.get(key)
        if g is None:
            base = run_id_part(key[1]) if key[0] == "run" else f"{run_id_part(key[1])}-{seq:08d}"
            rid = base if base not in self.taken else f"{base}-{seq:08d}"
            self.taken.add(rid)
            g = self.groups[key] = Group(key, rid, service)
            g.seen = self.pending.pop(key, set())
            g.rejected = self.pending_rejected.pop(key, 0)
        g.last = now
        return g

    def reject(self, key: tuple[str, str], n: int) -> None:
        """Count ``n`` evaluation events of the group ``key`` rejected at intake."""
        g = self.groups.get(key)
        if g is not None:
            g.rejected += n
        else:
            self.pending_rejected[key] = self.pending_rejected.get(key, 0) + n

    def add_logs(self, seq: int, doc: dict, now: float, marks: bool = False) -> set[str]:
        """Place a journaled request's records in their groups; with ``marks`` (a replay), also note each event's
        result mark, which the intake check noted when the request came. Returns the run ids of those groups."""
        check = EventCheck() if marks else None
        runs: set[str] = set()
        for rl in doc.get("resourceLogs") or ():
            res = attributes((rl.get("resource") or {}).get("attributes"))
            service = value_of(res.get("service.name"))
            service = service if isinstance(service, str) and service else None
            res_run = value_of(res.get(RUN_ID_KEY))
            for sl in rl.get("scopeLogs") or ():
                by_group: dict[tuple[str, str], list] = {}
                for rec in sl.get("logRecords") or ():
                    key = group_key(rec, res_run, service)
                    by_group.setdefault(key, []).append(rec)
                for key, recs in by_group.items():
                    g = self._group(key, service, seq, now)
                    runs.add(g.run_id)
                    piece = {k: v for k, v in rl.items() if k != "scopeLogs"}
                    piece["scopeLogs"] = [{**{k: v for k, v in sl.items() if k != "logRecords"}, "logRecords": recs}]
                    g.docs.append({"resourceLogs": [piece]})
                    for rec in recs:
                        if is_evaluation(rec):
                            g.events += 1
                            mark = check.mark(rec) if check is not None else None
                            if mark is not None:
                                g.seen.add(mark)
                            if not is_null_id(rec.get("traceId")):
                                g.trace_ids.add(rec["traceId"].lower())
        return runs

    def add_traces(self, doc: dict) -> set[str]:
        """Keep a journaled request's spans by trace id; returns those trace ids."""
        tids: set[str] = set()
        for rs in doc.get("resourceSpans") or ():
            for ss in rs.get("scopeSpans") or ():
                by_trace: dict[str, list] = {}
                for sp in ss.get("spans") or ():
                    by_trace.setdefault(str(sp.get("traceId", "")).lower(), []).append(sp)
                for tid, spans in by_trace.items():
                    piece = {**{k: v for k, v in rs.items() if k != "scopeSpans"},
                             "scopeSpans": [{**{k: v for k, v in ss.items() if k != "spans"}, "spans": spans}]}
                    self.spans.setdefault(tid, []).append({"resourceSpans": [piece]})
                    tids.add(tid)
        return tids

    def idle(self, now: float, window: float) -> list[Group]:
        return [g for g in self.groups.values() if now - g.last >= window]

    def take(self, g: Group) -> tuple[list[dict], list[dict]]:
        """A group's logs and the traces of its events, removed from the state (:meth:`give_back` undoes it)."""
        self.groups.pop(g.key, None)
        g.taken_spans = {tid: self.spans.pop(tid) for tid in sorted(g.trace_ids) if tid in self.spans}
        traces = [d for pieces in g.taken_spans.values() for d in pieces]
        return g.docs, traces

    def give_back(self, g: Group) -> None:
        """A group whose run could not be written (a full disk): back in the state, as if never taken, with the
        records that reached its key meanwhile (a group made since then is merged into it)."""
        for tid, pieces in g.taken_spans.items():
            self.spans[tid] = pieces + self.spans.get(tid, [])
        g.taken_spans = {}
        new = self.groups.get(g.key)
        if new is not None:
            g.docs += new.docs
            g.seen |= new.seen
            g.trace_ids |= new.trace_ids
            g.events += new.events
            g.rejected += new.rejected
            g.last = max(g.last, new.last)
            g.merged.append(new.run_id)
        self.groups[g.key] = g


# -- intake checks ---------------------------------------------------------------------------------------------------


def check_records(doc: dict, where: str, asm: Assembler | None = None) -> tuple[dict, "Rejections"]:
    """The logs request without the evaluation events the page cannot place (each checked on its own by the
    importer's own check, OT-6 and [ENC-3]; and, with ``asm``, against the results its run already holds: the same
    case, metric and trial again), and what was rejected, by reason and by group."""
    out = Rejections()
    check = EventCheck()
    for rl in doc.get("resourceLogs") or ():
        res = attributes((rl.get("resource") or {}).get("attributes"))
        service = value_of(res.get("service.name"))
        res_run = value_of(res.get(RUN_ID_KEY))
        for sl in rl.get("scopeLogs") or ():
            kept = []
            for rec in sl.get("logRecords") or ():
                if is_evaluation(rec):
                    a = attributes(rec.get("attributes"))
                    key = group_key(rec, res_run, service, a)
                    try:
                        line = check.line(rec, where, a)
                        if asm is not None:
                            g = asm.groups.get(key)
                            mark = result_mark(line)
                            seen = g.seen if g is not None else asm.pending.setdefault(key, set())
                            if mark in seen:
                                check.line(rec, where, a, seen=seen)  # raises: the same result again (OT-6)
                            seen.add(mark)
                            out.noted.append((seen, mark))
                    except Unplaceable as e:
                        out.add(e, key)
                        continue
                    except Refusal as e:  # an event that is not OTLP (a time that is not a number)
                        out.add(Unplaceable(e.rule, e.message, where, case=None, evaluation=None), key)
                        continue
                kept.append(rec)
            sl["logRecords"] = kept
    return doc, out


class Rejections:
    """The evaluation events a request's intake rejected: the count, the first message, the count per reason
    (``<rule> <kind>``: ``OT-6 no-case``, ``OT-6 duplicate``, ...) and per group."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""
        self.reasons: dict[str, int] = {}
        self.groups: dict[tuple[str, str], int] = {}
        self.noted: list[tuple[set[bytes], bytes]] = []  # the result marks the check noted (undone by forget)

    def forget(self) -> None:
        """Undo the result marks the check noted: the request was not journaled, its retry is no repeat."""
        for seen, mark in self.noted:
            seen.discard(mark)
        self.noted = []

    def add(self, e: Any, key: tuple[str, str]) -> None:
        self.count += 1
        self.first = self.first or f"[{e.rule}] {e.message}"
        r = f"{e.rule} {e.kind}"
        self.reasons[r] = self.reasons.get(r, 0) + 1
        self.groups[key] = self.groups.get(key, 0) + 1


# -- the receiver -----------------------------------------------------------------------------------------------------


class QueueFull(Exception):
    """More requests wait for the journal than the receiver queues: the client is to retry later."""

    retry_after = 1


class DiskFull(QueueFull):
    """The journal (or a run) cannot be written now (a full disk, a quota, an I/O error): 503 with Retry-After,
    OTLP/gRPC ``UNAVAILABLE``; the client retries, and writing resumes by itself once the disk takes it."""

    retry_after = 5


def _disk_error(e: BaseException) -> OSError | None:
    """The OSError behind ``e`` (itself, or the cause of a refusal such as IO-1), or None."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError):
            return e
        if isinstance(e, Refusal) and e.rule == "IO-1":
            return OSError(errno.EIO, e.message)
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def _why(e: OSError) -> str:
    """``No space left on device`` (errno's text), never a traceback."""
    return e.strerror or (os.strerror(e.errno) if e.errno else str(e) or type(e).__name__)


class Bodies:
    """The request bodies the receiver recognises when they come again (an exporter's retry of a request whose
    answer it lost), as digests: a bounded window, never every body since the start (docs/gateway.md, "Retries").

    - a body whose records are in a run not sealed yet (its logs in an open group; its spans kept for a run) is
      remembered until that run is sealed: a retry is kept once;
    - then it stays in a window of the last ``limit`` bodies sealed within ``window`` seconds (the oldest leave
      first): a retry of it is answered 200 and counted as a duplicate (``duplicates``), nothing is kept;
    - past that window the same body is new records: they go to a new run.

    Memory: the open bodies (no more than the open groups hold anyway) plus at most ``limit`` digests."""

    def __init__(self, window: float = 600.0, limit: int = 10000) -> None:
        self.window = window
        self.limit = limit
        self.open: dict[bytes, int] = {}  # digest -> holders (run:ID, trace:ID, a request under way) not closed
        self.holders: dict[str, set[bytes]] = {}  # holder -> the digests it holds
        self.recent: OrderedDict[bytes, float] = OrderedDict()  # digest -> when its last holder closed

    def __contains__(self, digest: bytes) -> bool:
        if digest in self.open:
            return True
        t = self.recent.get(digest)
        return t is not None and time.monotonic() - t < self.window

    def __len__(self) -> int:
        return len(self.open) + len(self.recent)

    def begin(self, digest: bytes) -> None:
        """A request under way with this body (journaled, not yet placed)."""
        self.open[digest] = self.open.get(digest, 0) + 1

    def end(self, digest: bytes, holders: set[str] | None) -> None:
        """The request is placed (``holders``: where its records are) or, with None, was not journaled (a retry of
        it is a new request)."""
        for h in holders or ():
            if digest not in self.holders.setdefault(h, set()):
                self.holders[h].add(digest)
                self.open[digest] = self.open.get(digest, 0) + 1
        self._release(digest, remember=holders is not None)

    def close(self, holder: str) -> None:
        """A run is sealed (``run:ID``), a trace's spans are taken or dropped (``trace:ID``)."""
        for d in self.holders.pop(holder, ()):
            self._release(d, remember=True)

    def close_all(self, prefix: str) -> None:
        for h in [h for h in self.holders if h.startswith(prefix)]:
            self.close(h)

    def _release(self, digest: bytes, remember: bool) -> None:
        n = self.open.get(digest, 0) - 1
        if n > 0:
            self.open[digest] = n
            return
        self.open.pop(digest, None)
        if remember:
            self.recent[digest] = time.monotonic()
            self.recent.move_to_end(digest)
            self.prune()

    def prune(self) -> None:
        now = time.monotonic()
        while self.recent and (len(self.recent) > self.limit
                               or now - next(iter(self.recent.values())) >= self.window):
            self.recent.popitem(last=False)


class Receiver:
    def __init__(self, out: Path, *, idle: float = 5.0, key: Any = None, max_body: int = 16 * 1024 * 1024,
                 queue: int = 1024, subject: str | None = None, say: Callable[[str], None] | None = None,
                 metrics: Any = None, dedup_window: float = 600.0, dedup_limit: int = 10000) -> None:
        self.out = out
        self.idle_window = idle
        self.key = key
        self.max_body = max_body
        self.subject = subject
        self.say = say or (lambda s: None)
        self.state = out / ".otlp"
        self.state.mkdir(parents=True, exist_ok=True)
        self.clean_temporaries()  # a previous process's, never acknowledged (the journal holds what was)
        self.journal = Journal(self.state / "journal.ndjson")
        if self.journal.dropped_lines:
            self.say(f"journal   {self.journal.dropped_lines} torn or unreadable lines ({self.journal.dropped_bytes} "
                     "bytes) skipped: never acknowledged")
        self.broken: str | None = None  # why the journal or a run cannot be written now: 503, /healthz 503
        self.probe_every = 0.5  # seconds between two checks that the disk takes writes again
        self.stopping = False
        self.queue: asyncio.Queue | None = None
        self.queue_bound = queue
        self.metrics = metrics
        self.counts = {"requests": 0, "events": 0, "records": 0, "runs": 0, "rejected": 0, "duplicates": 0,
                       "unavailable": 0}
        self.reasons: dict[str, int] = {}  # rejected evaluation events per reason ("OT-6 no-case")
        self.compact_at = 64 * 1024 * 1024  # journal bytes past which it restarts once nothing is open
        self.asm = Assembler(set())
        self.bodies = Bodies(dedup_window, dedup_limit)  # the bodies a retry is recognised by: a bounded window
        self.seq = 0
        now = time.monotonic()
        for e in self.journal.entries:  # replay, in order: the same groups and run ids as before the stop
            if "seq" in e:
                self.seq = max(self.seq, e["seq"])
                self._apply(e, now, replay=True)
            elif "seqFrom" in e:
                self.seq = max(self.seq, e["seqFrom"])
            elif "sealed" in e:
                for g in list(self.asm.groups.values()):
                    if g.run_id == e["sealed"]:
                        self._taken(g, self.asm.take(g))
                self.asm.sealed.add(e["sealed"])
        self.journal.entries = []
        self.ready = True

    def _apply(self, entry: dict, now: float, replay: bool = False) -> None:
        if entry["signal"] == "logs":
            for kind, value, n in entry.get("rejected") or ():
                self.asm.reject((kind, value), n)
            holders = {f"run:{r}" for r in self.asm.add_logs(entry["seq"], entry["doc"], now, marks=replay)}
        else:
            holders = {f"trace:{t}" for t in self.asm.add_traces(entry["doc"])}
        if "body" in entry:
            digest = bytes.fromhex(entry["body"])
            if replay:
                self.bodies.begin(digest)
            self.bodies.end(digest, holders)

    def _taken(self, g: Group, _taken: Any = None) -> None:
        """A group's run is sealed (or refused): the bodies it held, and its spans', leave the open window."""
        for rid in [g.run_id, *g.merged]:
            self.bodies.close(f"run:{rid}")
        for tid in g.taken_spans:
            self.bodies.close(f"trace:{tid}")
        g.taken_spans = {}

    def clean_temporaries(self) -> int:
        """Remove the temporary folders a build leaves while it runs (``OUT/.otlp/.build-*``, ``OUT/.<run>.tmp-*``
        of :func:`aefgate.fsutil.atomic_dir`): at start (a previous process was killed), and at every exit. Never
        acknowledged data: a request is acknowledged once in the journal, and the journal keeps it until its run
        is renamed into place. Returns how many were removed."""
        n = 0
        tmp = re.compile(r"^\..+\.tmp-[0-9a-f]{8}$")
        for p in [*self.state.glob(".build-*"), *(p for p in self.out.glob(".*.tmp-*") if tmp.match(p.name))]:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
                n += not p.exists()
        with contextlib.suppress(OSError):
            (self.state / "journal.ndjson.new").unlink()
        return n

    # -- HTTP ---------------------------------------------------------------------------------------------------

    async def handle(self, request: Any, signal_name: str) -> Any:
        from aiohttp import (
            web,  # lazy: the services' dependency, not every command's (aefgate.bus's import)
        )

        ctype = request.headers.get("Content-Type", "")
        kind = ctype.split(";")[0].strip().lower()
        as_json = kind == "application/json"
        if kind not in ("application/x-protobuf", "application/json"):
            return self._error(415, f"Content-Type {ctype!r}: application/x-protobuf or application/json", False,
                               signal_name)
        try:
            body = await read_body(request, self.max_body)
        except BodyError as e:
            return self._error(e.status, e.message, as_json, signal_name)
        try:  # (aiohttp has undone a Content-Encoding: gzip as it read, within the bound above)
            doc = decode_body(body, signal_name, content_type=ctype, where="body")
        except Refusal as e:
            return self._error(413 if e.rule == "OTLP-2" else 400, e.message, as_json, signal_name)
        try:
            rejected, reason = await self.accept(signal_name, doc, body)
        except QueueFull as e:
            self._count(signal_name, 503)
            return web.Response(status=503, headers={"Retry-After": str(e.retry_after)},
                                text=f"{e.args[0] if e.args else 'the journal is behind'}\n")
        except Refusal as e:  # --bus: a record larger than a bus message
            return self._error(413, e.message, as_json, signal_name)
        except Exception as e:  # unforeseen: one line on stderr (masked), never a traceback quoting the request
            self.say(f"error     {signal_name} request not taken: {type(e).__name__}: {mask(e)}")
            self._count(signal_name, 500)
            return web.Response(status=500,
                                text="internal error: the request was not taken (see the server log); retry later\n")
        self._count(signal_name, 200)
        return self._success(signal_name, as_json, rejected, reason)

    async def accept(self, signal_name: str, doc: dict, body: bytes) -> tuple[int, str]:
        """The intake of one decoded request, whatever carried it (HTTP or gRPC): a retried body is kept once, the
        evaluation events the page cannot place are rejected, the rest is journaled (fsynced) and placed in its
        runs. Returns the rejected count and the first reason; :class:`QueueFull` when the journal is behind."""
        digest = hashlib.sha256(signal_name.encode() + b"\0" + body).digest()
        if digest in self.bodies:  # an exporter's retry of a request whose answer it lost: kept once
            self.counts["duplicates"] += 1
            return 0, ""
        assert self.queue is not None
        if self.broken is not None:  # the disk is full: nothing is taken until it writes again
            self.counts["unavailable"] += 1
            raise DiskFull(f"[IO-1] the journal cannot be written now ({self.broken}); retry later")
        if self.queue.full():  # before the check notes the request's results: a retry is not a repeat of them
            raise QueueFull()
        rej = Rejections()
        if signal_name == "logs":
            doc, rej = check_records(doc, "body", self.asm)
        self.seq += 1
        seq = self.seq
        self.bodies.begin(digest)
        entry: dict[str, Any] = {"seq": seq, "signal": signal_name, "body": digest.hex(), "doc": doc}
        if rej.groups:  # journaled: a restarted receiver still counts them in their runs
            entry["rejected"] = [[k[0], k[1], n] for k, n in rej.groups.items()]
        line = jsonio.dump_line(entry)
        done = asyncio.get_running_loop().create_future()
        # the writer places the request in its runs once it is journaled, or undoes what its check noted when it
        # could not be (whatever becomes of this handler: a client gone does not change what the journal holds)
        self.queue.put_nowait((line, done, entry, rej))
        try:
            await asyncio.shield(done)  # fsynced
        except JournalError as e:  # not journaled (a full disk): nothing of it is kept, its retry is new
            self.counts["unavailable"] += 1
            raise DiskFull(f"[IO-1] the journal cannot be written now ({_why(e)}); retry later") from None
        n = _records(doc, signal_name)
        self.counts["requests"] += 1
        self.counts["records"] += n
        self._rejected(signal_name, n, rej)
        return rej.count, rej.first

    def _rejected(self, signal_name: str, n: int, rej: "Rejections") -> None:
        """Count a request's records and its rejected events, per reason (status lines, ``/metrics``)."""
        self.counts["rejected"] = self.counts.get("rejected", 0) + rej.count
        for r, k in rej.reasons.items():
            self.reasons[r] = self.reasons.get(r, 0) + k
        if self.metrics is not None:
            self.metrics.records.labels(signal_name).inc(n)
            for r, k in rej.reasons.items():
                self.metrics.rejected.labels(signal_name, r).inc(k)

    def rejected_text(self) -> str:
        """``, 3 events rejected (OT-6 no-case: 2, OT-6 duplicate: 1)``, or nothing."""
        if not self.counts.get("rejected"):
            return ""
        parts = ", ".join(f"{r}: {k}" for r, k in sorted(self.reasons.items()))
        return f", {self.counts['rejected']} events rejected ({parts})"

    def _count(self, signal_name: str, status: int) -> None:
        if self.metrics is not None:
            self.metrics.requests.labels(signal_name, str(status)).inc()

    def _success(self, signal_name: str, as_json: bool, rejected: int, reason: str) -> Any:
        from aiohttp import web  # lazy: as in handle

        # lazy: the protobuf classes are heavy, and only an answer needs them
        if signal_name == "logs":
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
                ExportLogsServiceResponse as R,
            )
        else:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                ExportTraceServiceResponse as R,
            )
        resp = R()
        if rejected:
            resp.partial_success.rejected_log_records = rejected
            resp.partial_success.error_message = reason
        if as_json:
            from google.protobuf.json_format import MessageToJson  # lazy: as above

            return web.Response(status=200, body=MessageToJson(resp, indent=None).encode(),
                                content_type="application/json")
        return web.Response(status=200, body=resp.SerializeToString(), content_type="application/x-protobuf")

    def _error(self, status: int, message: str, as_json: bool, signal_name: str) -> Any:
        from aiohttp import web  # lazy: as in handle
        from google.rpc import status_pb2  # lazy: the protobuf classes are heavy

        self._count(signal_name, status)
        if self.metrics is not None:
            self.metrics.rejected.labels(signal_name, str(status)).inc()
        st = status_pb2.Status(code=3 if status == 400 else 8, message=message)
        if as_json:
            return web.Response(status=status, body=json.dumps({"code": st.code, "message": message}).encode(),
                                content_type="application/json")
        return web.Response(status=status, body=st.SerializeToString(), content_type="application/x-protobuf")

    # -- the journal writer and the sealer ----------------------------------------------------------------------

    async def writer(self) -> None:
        """Journal the queued requests, a batch per fsync. A batch the journal cannot take (a full disk) is
        answered 503 (nothing of it kept) and the receiver is unavailable until :meth:`prober` sees the disk take
        writes again; the writer itself never stops."""
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            batch = [first]
            while not self.queue.empty() and len(batch) < 256:
                batch.append(self.queue.get_nowait())
            try:
                await loop.run_in_executor(None, self.journal.append, [b[0] for b in batch])
            except Exception as e:
                err = e if isinstance(e, JournalError) else JournalError(errno.EIO, f"{type(e).__name__}: {e}")
                self.unavailable(_why(err))
                for _line, fut, entry, rej in batch:
                    self.bodies.end(bytes.fromhex(entry["body"]), None)
                    rej.forget()
                    if not fut.done():
                        fut.set_exception(err)
                        fut.exception()  # retrieved: a handler gone is no "never retrieved" warning
                continue
            now = time.monotonic()
            for _line, fut, entry, _rej in batch:
                self._apply(entry, now)  # in its runs before the answer goes
                if not fut.done():
                    fut.set_result(None)
            if self.metrics is not None:
                self.metrics.journal.set(self.journal.size)
                self.metrics.depth.set(self.queue.qsize())

    def unavailable(self, why: str) -> None:
        """The journal or a run cannot be written: say it once, answer 503 until the disk takes writes again."""
        if self.broken is None:
            self.say(f"unavailable: the journal or a run cannot be written in {self.out} ({why}); answering 503 "
                     "with Retry-After until it can (nothing acknowledged is lost)")
        self.broken = why

    def _probe(self) -> None:
        """Whether the disk takes writes again: the journal's torn end cut, then 64 KiB written and fsynced."""
        self.journal.repair()
        probe = self.state / ".probe"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(b"\0" * 65536)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()

    async def prober(self) -> None:
        """While unavailable, check every ``probe_every`` seconds whether the disk takes writes again; then
        resume (no restart)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.probe_every)
            if self.broken is None:
                continue
            try:
                await loop.run_in_executor(None, self._probe)
            except OSError as e:
                self.broken = _why(e)
                continue
            self.broken = None
            self.say("available: the disk takes writes again; requests are journaled and runs sealed")

    def status(self) -> str:
        c = self.counts
        return (f"status    {c['requests']} requests, {c['records']} records, {c['runs']} runs sealed "
                f"({c['events']} events), {len(self.asm.groups)} open, "
                f"{self.queue.qsize() if self.queue is not None else 0} waiting for the journal"
                + self.rejected_text())

    async def reporter(self, every: float = 10.0) -> None:
        """A status line on stderr every ``every`` seconds while something changed."""
        last = ""
        while True:
            await asyncio.sleep(every)
            line = self.status()
            if line != last:
                self.say(line)
                last = line

    async def sealer(self) -> None:
        """Seal the idle groups, until ``stopping`` (never cancelled mid-seal: a group taken is sealed or given
        back)."""
        while not self.stopping:
            await asyncio.sleep(min(0.5, self.idle_window / 2))
            for g in self.asm.idle(time.monotonic(), self.idle_window):
                if self.broken is not None or self.stopping:  # retried once the disk takes writes again
                    break
                await self.seal(g)
            self.bodies.prune()
            if not self.asm.groups and self.journal.size > self.compact_at and self.broken is None:
                self.compact()

    async def seal(self, g: Group) -> bool:
        """Write the group's run (or keep a refused group aside) and journal it as sealed. A run that cannot be
        written (a full disk) is not lost: the group goes back, its records still journaled, and is sealed once
        the disk takes writes again (or after a restart). Returns whether the group is done."""
        docs, traces = self.asm.take(g)
        loop = asyncio.get_running_loop()
        if g.events:
            try:
                ok = await loop.run_in_executor(None, self._build, g, docs, traces)
            except Exception as e:
                err = _disk_error(e)
                if err is None:
                    raise
                self.asm.give_back(g)
                self.unavailable(_why(err))
                self.say(f"not sealed {g.run_id}: {_why(err)}; its records stay journaled, sealed once the disk "
                         "takes writes again")
                return False
        else:
            ok = None
        try:
            await loop.run_in_executor(None, self.journal.append, [jsonio.dump_line({"sealed": g.run_id})])
        except JournalError as e:  # the run is in place: a replay finds its folder and does not write it again
            self.unavailable(_why(e))
        self.asm.sealed.add(g.run_id)
        self._taken(g)
        if ok:
            self.counts["runs"] += 1
            self.counts["events"] += g.events
            if self.metrics is not None:
                self.metrics.sealed.inc()
        elif ok is False and self.metrics is not None:
            self.metrics.refused.inc()
        return True

    def _build(self, g: Group, docs: list[dict], traces: list[dict]) -> bool:
        dest = self.out / g.run_id
        if dest.exists():  # built before a crash that came before its journal mark
            return True
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=self.state))
        try:
            logs = work / "logs.jsonl"
            logs.write_bytes(b"".join(jsonio.dump_line(d) for d in docs))
            trace_files = []
            if traces and has_spans(traces, docs):
                (work / "traces.jsonl").write_bytes(b"".join(jsonio.dump_line(d) for d in traces))
                trace_files = [work / "traces.jsonl"]
            elif traces:
                self.say(f"warning   {g.run_id}: a span an event is parented to never arrived; the run is written "
                         f"without its traces ({len(traces)} requests' spans not kept)")
            subject = self.subject or f"agent:{g.service or 'otlp-receiver'}"
            try:
                skipped: list[dict] = []
                from_otel(logs, dest, traces=trace_files, run_id=g.run_id, source="aefgate serve otlp",
                          subject=subject, key=self.key, skip_unplaceable=True, skipped=skipped,
                          rejected_before=g.rejected)
            except Refusal as e:
                if _disk_error(e) is not None:  # the disk, not the records: retried
                    raise
                refused = self.state / "refused"
                refused.mkdir(exist_ok=True)
                kept = refused / f"{g.run_id}.jsonl"
                shutil.copyfile(logs, kept)
                # the refusal names the kept copy, not the build's temporary file (removed below)
                e = Refusal(e.rule, e.message.replace(str(logs), str(kept)), e.where.replace(str(logs), str(kept)),
                            exit_code=e.exit_code)
                (refused / f"{g.run_id}.error.json").write_bytes(jsonio.dumps(e.to_json()))
                self.say(f"refused   {g.run_id}: [{e.rule}] at {e.where}: {e.message}")
                return False
            for x in skipped:  # placeable at intake, not once the run's spans gave their cases: named, never silent
                self.say(f"left out  {g.run_id}: [{x['rule']}] {x['message']} (case {x['case']!r}, evaluation "
                         f"{x['evaluation']!r})")
            left = g.rejected + len(skipped)
            self.say(f"sealed    {g.run_id}: {g.events - len(skipped)} events"
                     + (", with traces" if trace_files else "")
                     + (f"; {left} events of its group rejected (in its run.json ext)" if left else ""))
            return True
        finally:
            shutil.rmtree(work, ignore_errors=True)

    async def drain(self, deadline: float | None = None) -> None:
        """Seal every open group (SIGTERM), then empty the journal: every record in it is in a sealed run. With the
        disk full, or past ``deadline`` (``time.monotonic()``), the groups left stay in the journal: the next start
        seals them."""
        for g in list(self.asm.groups.values()):
            if self.broken is not None or (deadline is not None and time.monotonic() >= deadline):
                break
            if not await self.seal(g):
                break
        if self.asm.groups:
            self.say(f"left open {len(self.asm.groups)} runs (" + (f"{self.broken}" if self.broken else
                     "the drain time is over") + "): their records stay journaled, sealed after the next start")
            return
        self.compact()

    def compact(self) -> None:
        """With no open group and no request waiting, every journaled record is in a sealed run (or was dropped
        with its refused group): the journal restarts empty. Its spans without a run are dropped with it. A disk
        that cannot take the new journal leaves the old one (replayed as it is)."""
        if self.asm.groups or (self.queue is not None and not self.queue.empty()):
            return
        try:
            # the sequence goes on: a run id made of it is never given twice (a folder that exists is a built run)
            self.journal.restart(jsonio.dump_line({"seqFrom": self.seq}))
        except JournalError as e:
            self.say(f"journal   not compacted ({_why(e)}): kept as it is")
            return
        self.asm.spans.clear()
        self.bodies.close_all("trace:")


class BusReceiver(Receiver):
    """``bus=nats://HOST:PORT/SUBJECT``: a request's records go to JetStream (:class:`aefgate.bus.otlp_bus.
    Publisher`) and the answer is 200 once JetStream acknowledged every message of it; the ``serve ingest`` fleet
    builds the runs. No journal and no run here; the evaluation events are checked on their own (OT-6) as without
    the bus, the repeats of a (case, metric) in a run are left out when the run is built."""

    def __init__(self, bus: Any, *, max_body: int, queue: int, subject: str | None,
                 say: Callable[[str], None] | None, metrics: Any) -> None:
        self.bus = bus
        self.max_body = max_body
        self.subject = subject
        self.say = say or (lambda s: None)
        self.metrics = metrics
        self.queue = None
        self.queue_bound = queue
        self.inflight = 0
        self.counts = {"requests": 0, "records": 0, "published": 0, "rejected": 0}
        self.reasons = {}
        self.ready = True

    async def accept(self, signal_name: str, doc: dict, body: bytes) -> tuple[int, str]:
        digest = hashlib.sha256(signal_name.encode() + b"\0" + body).hexdigest()[:32]
        rej = Rejections()
        if signal_name == "logs":
            doc, rej = check_records(doc, "body")
        if self.inflight >= self.queue_bound:
            raise QueueFull("more requests wait for JetStream than option 'queue' allows")
        self.inflight += 1
        try:
            await self.bus.publish(signal_name, doc, digest, self.subject, rej.groups)
        except Refusal:
            raise
        except Exception as e:  # the bus is down or slow: nothing acknowledged, the exporter retries
            raise QueueFull(f"JetStream did not acknowledge: {type(e).__name__}: {e}") from None
        finally:
            self.inflight -= 1
        n = _records(doc, signal_name)
        self.counts["requests"] += 1
        self.counts["records"] += n
        self.counts["published"] = self.bus.published
        self._rejected(signal_name, n, rej)
        if self.metrics is not None:
            self.metrics.depth.set(self.inflight)
        return rej.count, rej.first

    def status(self) -> str:
        c = self.counts
        return (f"status    {c['requests']} requests, {c['records']} records, {c['published']} messages on "
                f"{self.bus.stream}, {self.inflight} waiting for JetStream" + self.rejected_text())


def _records(doc: dict, signal_name: str) -> int:
    if signal_name == "logs":
        return sum(len(s.get("logRecords") or ()) for r in doc.get("resourceLogs") or ()
                   for s in r.get("scopeLogs") or ())
    return sum(len(s.get("spans") or ()) for r in doc.get("resourceSpans") or () for s in r.get("scopeSpans") or ())


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import (  # lazy: only with metrics asked for
            CollectorRegistry,
            Counter,
            Gauge,
        )

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("aefgate_otlp_requests", "OTLP/HTTP requests, by signal and status",
                                ["signal", "status"], registry=r)
        self.records = Counter("aefgate_otlp_records_received", "records accepted (log records, spans)", ["signal"],
                               registry=r)
        self.rejected = Counter("aefgate_otlp_records_rejected", "records or requests rejected, and why",
                                ["signal", "reason"], registry=r)
        self.sealed = Counter("aefgate_runs_sealed", "runs written and sealed", registry=r)
        self.refused = Counter("aefgate_runs_refused", "groups the importer refused (kept in .otlp/refused)",
                               registry=r)
        self.journal = Gauge("aefgate_journal_bytes", "size of the journal", registry=r)
        self.depth = Gauge("aefgate_queue_depth", "requests waiting for the journal", registry=r)


async def _grpc_server(rx: Receiver, listen: str) -> Any:
    """OTLP/gRPC (``LogsService/Export``, ``TraceService/Export``) on ``listen``, the same intake as HTTP: the
    answer comes once the records are journaled; ``RESOURCE_EXHAUSTED`` when the journal is behind (the exporters
    retry it), ``INVALID_ARGUMENT`` for a request the mapping cannot read."""
    try:  # lazy: grpc is an optional extra (aefgate[grpc])
        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as lpb
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc as lgrpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as tpb
        from opentelemetry.proto.collector.trace.v1 import (
            trace_service_pb2_grpc as tgrpc,
        )
    except ImportError:
        raise Refusal("CLI-3", "option 'grpc_listen' needs the grpc extra: pip install 'aefgate[grpc]'",
                      "option 'grpc_listen'") from None

    async def export(signal_name: str, request: Any, context: Any, response: Any) -> Any:
        try:
            doc = to_json(request, signal_name, "grpc")
        except Refusal as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        try:
            rejected, reason = await rx.accept(signal_name, doc, request.SerializeToString())
        except DiskFull as e:  # retryable: the exporter tries again
            rx._count(signal_name, 503)
            await context.abort(grpc.StatusCode.UNAVAILABLE, e.args[0])
        except QueueFull as e:
            rx._count(signal_name, 503)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, e.args[0] if e.args else "the journal is behind")
        except Refusal as e:  # --bus: a record larger than a bus message
            rx._count(signal_name, 413)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        rx._count(signal_name, 200)
        if rejected:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = reason
        return response

    class Logs(lgrpc.LogsServiceServicer):
        async def Export(self, request, context):  # noqa: N802
            return await export("logs", request, context, lpb.ExportLogsServiceResponse())

    class Traces(tgrpc.TraceServiceServicer):
        async def Export(self, request, context):  # noqa: N802
            return await export("traces", request, context, tpb.ExportTraceServiceResponse())

    server = grpc.aio.server(options=[("grpc.max_receive_message_length", rx.max_body)])
    lgrpc.add_LogsServiceServicer_to_server(Logs(), server)
    tgrpc.add_TraceServiceServicer_to_server(Traces(), server)
    server.add_insecure_port(listen)
    await server.start()
    return server


def serve(out: str | os.PathLike[str] | None, *, listen: str = "127.0.0.1:4318", metrics_listen: str | None = None,
          idle: float = 5.0, key: Any = None, max_body: int = 16 * 1024 * 1024, queue: int = 1024,
          subject: str | None = None, say: Callable[[str], None] | None = None,
          grpc_listen: str | None = None, bus: str | None = None, bus_timeout: float = 10.0,
          nats_auth: Any = None, drain: float = 30.0, dedup_window: float = 600.0) -> dict:
    """Run the receiver until SIGTERM or SIGINT, then seal every open run and return the counts. With ``bus``
    (``nats://HOST:PORT/SUBJECT``) the records go to JetStream instead, for the ``serve ingest`` fleet; ``out`` and
    ``key`` are then the fleet's (``serve ingest --out --key``), not given here; ``nats_auth``
    (:class:`aefgate.bus.nats_connect.NatsAuth`: TLS, a credentials file, an NKEY, a token) is how it reaches NATS.
    ``drain``: the seconds SIGTERM may take (the requests under way answered, the open runs sealed; what is left
    stays journaled for the next start). ``dedup_window``: the seconds a sealed run's request bodies are still
    recognised as retries (:class:`Bodies`)."""
    from aiohttp import (
        web,  # lazy: the services' dependency, not every command's (aefgate.bus's import)
    )

    host, port = hostport(listen, "listen")
    _check_serve_options(grpc_listen=grpc_listen, idle=idle, max_body=max_body, queue=queue, drain=drain,
                         dedup_window=dedup_window, subject=subject)
    publisher = _bus_publisher(bus, bus_timeout=bus_timeout, nats_auth=nats_auth, out=out, key=key)
    signing_key = signing_key_of(key)
    outdir = Path(out) if out is not None else None
    if outdir is not None:
        if outdir.exists() and not outdir.is_dir():
            raise Refusal("OUT-1", "the output is not a folder", str(outdir))
        outdir.mkdir(parents=True, exist_ok=True)
    metrics = Metrics() if metrics_listen else None
    if metrics is not None:
        metrics_server(metrics_listen, metrics.registry)
    say = say or (lambda s: None)
    if publisher is not None:
        rx: Receiver = BusReceiver(publisher, max_body=max_body, queue=queue, subject=subject, say=say,
                                   metrics=metrics)
    else:
        assert outdir is not None
        rx = Receiver(outdir, idle=idle, key=signing_key, max_body=max_body, queue=queue, subject=subject, say=say,
                      metrics=metrics, dedup_window=dedup_window)
    try:
        asyncio.run(_serve_until_stopped(rx, publisher, web, host=host, port=port, grpc_listen=grpc_listen,
                                         max_body=max_body, queue=queue, drain=drain, outdir=outdir, say=say))
    finally:
        if publisher is None:
            rx.journal.close()
            rx.clean_temporaries()  # every exit: SIGTERM, SIGINT, an error
    if publisher is not None:
        say(f"stopped   {rx.counts['requests']} requests, {rx.counts['records']} records, "
            f"{rx.counts['published']} messages published" + rx.rejected_text())
    else:
        say(f"stopped   {rx.counts['requests']} requests, {rx.counts['records']} records, "
            f"{rx.counts['runs']} runs sealed" + rx.rejected_text())
    return {**rx.counts, "rejectedByReason": dict(sorted(rx.reasons.items()))}


def _check_serve_options(*, grpc_listen: str | None, idle: float, max_body: int, queue: int, drain: float,
                         dedup_window: float, subject: str | None) -> None:
    """Refuse (CLI-2) the options of :func:`serve` out of their ranges."""
    if grpc_listen is not None:
        hostport(grpc_listen, "grpc_listen")
    if idle <= 0 or max_body <= 0 or queue <= 0:
        raise Refusal("CLI-2", "option 'idle', option 'max_body' and option 'queue' are more than 0",
                      "option 'idle'")
    if not 0 < drain <= 3600:
        raise Refusal("CLI-2", "option 'drain' is more than 0 and at most 3600 seconds", "option 'drain'")
    if not 0 <= dedup_window <= 86400:
        raise Refusal("CLI-2", "option 'dedup_window' is 0 to 86400 seconds", "option 'dedup_window'")
    if max_body > MAX_BODY:
        raise Refusal("CLI-2", f"option 'max_body' is at most {MAX_BODY}", "option 'max_body'")
    if subject is not None and not subject:
        raise Refusal("CLI-2", "option 'subject' is not empty", "option 'subject'")


def _bus_publisher(bus: str | None, *, bus_timeout: float, nats_auth: Any, out: Any, key: Any) -> Publisher | None:
    """The JetStream publisher of :func:`serve` for option 'bus' (then with neither option 'out' nor option 'key'),
    else None (then with option 'out')."""
    publisher = None
    if bus is not None:
        if not 0 < bus_timeout <= 600:
            raise Refusal("CLI-2", "option 'bus_timeout' is more than 0 and at most 600 seconds",
                          "option 'bus_timeout'")
        publisher = Publisher(bus, timeout=bus_timeout, nats_auth=nats_auth)
        if out is not None or key is not None:
            raise Refusal("CLI-2", "with option 'bus' the runs are built, sealed and signed by serve ingest (its "
                          "option 'out' and option 'key'): give neither option 'out' nor option 'key' here",
                          "option 'out'" if out is not None else "option 'key'")
    elif out is None:
        raise Refusal("CLI-2", "option 'out' (the folder where the runs go), or option 'bus' "
                      "(nats://HOST:PORT/SUBJECT)", "option 'out'")
    return publisher


def _receiver_app(rx: Receiver, max_body: int, web):
    """The aiohttp application of :func:`serve` (``web``: ``aiohttp.web``): OTLP/HTTP ``/v1/logs`` and
    ``/v1/traces``, and ``/healthz``."""
    app = application(max_body)
    app.router.add_post("/v1/logs", lambda r: rx.handle(r, "logs"))
    app.router.add_post("/v1/traces", lambda r: rx.handle(r, "traces"))

    async def healthz(_r):
        broken = getattr(rx, "broken", None)
        if broken is not None:  # not ready: the journal cannot be written (a full disk)
            return web.Response(status=503, headers={"Retry-After": str(DiskFull.retry_after)},
                                text=f"unavailable: [IO-1] the journal cannot be written ({broken})\n")
        return web.Response(text="ok\n")

    app.router.add_get("/healthz", healthz)
    return app


async def _serve_until_stopped(rx: Receiver, publisher: Publisher | None, web, *, host: str, port: int,
                               grpc_listen: str | None, max_body: int, queue: int, drain: float,
                               outdir: Path | None, say: Callable[[str], None]) -> None:
    """Listen (OTLP/HTTP, and OTLP/gRPC with ``grpc_listen``) until SIGTERM or SIGINT, then stop (:func:`_stop_bus`,
    :func:`_stop_runs`)."""
    if publisher is not None:
        await publisher.connect()  # before listening: a request is taken only when it can be published
    else:
        rx.queue = asyncio.Queue(maxsize=queue)
    app = _receiver_app(rx, max_body, web)
    runner = await start(app, host, port, shutdown_timeout=max(1.0, drain / 3))
    grpc_server = await _grpc_server(rx, grpc_listen) if grpc_listen else None
    if grpc_server is not None:
        say(f"listening grpc://{grpc_listen} (OTLP/gRPC)")
    if publisher is not None:
        say(f"listening http://{host}:{port} (OTLP/HTTP /v1/logs, /v1/traces), records onto {publisher.subject} "
            f"(stream {publisher.stream}; spans on {publisher.trace_prefix}.<trace id>)")
    else:
        say(f"listening http://{host}:{port} (OTLP/HTTP /v1/logs, /v1/traces), runs into {outdir}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    if publisher is not None:
        await _stop_bus(rx, publisher, runner, grpc_server, stop)
    else:
        await _stop_runs(rx, runner, grpc_server, stop, drain)


async def _stop_bus(rx: Receiver, publisher: Publisher, runner, grpc_server, stop: asyncio.Event) -> None:
    """With option 'bus': report until stopped, then answer the requests under way and close the publisher."""
    reporter = asyncio.create_task(rx.reporter())
    await stop.wait()
    if grpc_server is not None:
        await grpc_server.stop(grace=10)
    await runner.shutdown()  # no new request; those under way are published and answered
    await runner.cleanup()
    reporter.cancel()
    await asyncio.gather(reporter, return_exceptions=True)
    await publisher.close()


async def _stop_runs(rx: Receiver, runner, grpc_server, stop: asyncio.Event, drain: float) -> None:
    """With option 'out': write, seal, report and probe until stopped, then within ``drain`` seconds answer the
    requests under way, finish the seal under way and seal the open runs (:meth:`Receiver.drain`)."""
    tasks = [asyncio.create_task(rx.writer()), asyncio.create_task(rx.sealer()),
             asyncio.create_task(rx.reporter()), asyncio.create_task(rx.prober())]
    await stop.wait()
    deadline = time.monotonic() + drain  # SIGTERM ends within it, the disk full or not
    if grpc_server is not None:
        await grpc_server.stop(grace=min(10.0, drain / 3))
    await runner.shutdown()  # no new request; those under way finish (or fail: 503) within the runner's time
    await runner.cleanup()
    while rx.queue.qsize() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    rx.stopping = True  # the sealer ends after the seal under way (never cut in the middle of one)
    tasks[2].cancel()
    await asyncio.wait([tasks[1]], timeout=max(0.0, deadline - time.monotonic()))
    await rx.drain(deadline)
    for t in (tasks[0], tasks[3]):
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _stderr(line: str) -> None:  # pragma: no cover - the CLI's sink
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
