"""``aefgate serve ingest``: a gateway that turns a stream of AEP assessment events back into sealed AEF runs.

The design is in docs/design/ingest.md. In short:

- **Intake** (NATS JetStream pull consumer, or an HTTP endpoint taking CloudEvents): every message is decoded
  (CloudEvents binary mode with ``ce-*`` headers, structured mode, a batch, or plain AEP JSON) and each event checked
  on its own the way the importer reads it (:func:`check_event`). A message that fails is written to the dead-letter
  sink with its reason and acknowledged; it never blocks the messages after it.
- **Journal**: the events of a message are appended to the write-ahead journal of their session,
  ``OUT/.journal/<name>.jsonl`` (``<name>`` = :func:`run_name` of the session), under an exclusive ``flock``, and
  fsynced; only then is the message acknowledged (NATS) or answered ``202`` (HTTP). A message is thus acknowledged
  once it is durably on disk, in the journal that the run will be built from.
- **Sealing**: a session whose journal has not been written for ``idle`` seconds (the journal file's mtime, so
  several processes sharing ``OUT`` agree), or every session this process wrote to when it shuts down, is built
  with :func:`aefgate.converters.aep.importer.import_events` into ``OUT/.ingest/staging/``, fsynced, its event keys
  recorded in ``OUT/.ingest/sealed/<run>.keys``, renamed to ``OUT/<run>`` (the commit point) and its journal
  removed. Duplicates (the same ``(source, id)``, AEP-0001 §7: a redelivery) are dropped when the run is built,
  also against the runs already sealed for the session; a crash at any point loses nothing that was acknowledged,
  and replaying the journal after a restart gives the same sealed run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import signal
import socket
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import unquote, urlsplit

from aefgate.bus.names import _SAFE, _token, run_name
from aefgate.bus.nats_connect import AuthFailed, connect, server_of
from aefgate.bus.otlp_bus import HDR_SIGNAL, build_run, fetch_spans, journal_lines
from aefgate.converters.aep import vocabulary as aep_common
from aefgate.converters.aep import importer as aep_importer
from aefgate.converters.aep.importer import import_events
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.formats.cloudevents import (
    BATCH_CONTENT_TYPE,
    STRUCTURED_CONTENT_TYPE,
    ce_forward,
    ce_inverse,
    from_http,
)
from aefgate.fsutil import atomic_write, fsync_dir, fsync_tree
from aefgate.masking import kept_headers, mask, mask_url
from aefgate.net.http_server import (
    BodyError,
    application,
    metrics_server,
    read_body,
    start,
)

__all__ = [
    "IngestConfig",
    "Stats",
    "Store",
    "Fleet",
    "check_event",
    "decode_http",
    "decode_nats",
    "node_name",
    "run_name",
    "serve_ingest",
]

JOURNAL_DIR = ".journal"
STATE_DIR = ".ingest"
DEFAULT_DEAD_LETTER = ".ingest/dead-letter.jsonl"
MAX_BODY = 32 << 20  # an HTTP request body
DRAIN_MAX = 5.0  # seconds a stopping node keeps journaling what other nodes forward to it
HEARTBEAT = 2.0  # seconds between a node's presence updates; a node silent for 5 of them is no longer offered sessions


# -- names and keys ---------------------------------------------------------------------------------------------


def generation_name(name: str, gen: int) -> str:
    """``<name>`` for the first run of a session, ``<name>.2``, ``<name>.3`` ... for later ones."""
    return name if gen == 1 else f"{name}.{gen}"


def event_key(event: dict) -> str:
    """The dedupe key of an event: 32 hex digits of SHA-256 over ``source``, NUL, ``id`` (AEP-0001 §7)."""
    return hashlib.sha256(f"{event['source']}\0{event['id']}".encode("utf-8")).hexdigest()[:32]


def _now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _log(message: str) -> None:
    sys.stderr.write(f"{_now_text()} ingest: {mask(message)}\n")
    sys.stderr.flush()


# -- decoding and checking --------------------------------------------------------------------------------------


def check_event(event: Any, where: str) -> dict:
    """One event checked as the importer reads it (AEP-13): a JSON object, a valid AEP 0.x event, one of the three
    ``assessment.*`` types, with a session; the importer's own per-event checks. Returns the event; refuses with
    :class:`Refusal` (rule ``INGEST-2`` for a wrong type or major version, else the importer's rule)."""
    if not isinstance(event, dict):
        raise Refusal("AEP-13", "an event is a JSON object", where)
    version = event.get("aep")
    if not isinstance(version, str) or not version:
        raise Refusal("AEP-13", "an AEP event has a string aep (AEP-0001 §5.1)", where)
    if version.split(".", 1)[0] != "0":
        raise Refusal("INGEST-2", f"AEP version {version!r}: only major version 0 is read", where)
    etype = event.get("type")
    if etype not in aep_common.ASSESSMENT_TYPES:
        raise Refusal("INGEST-2", f"type {etype!r} is not an assessment event (AEP-0009): nothing to ingest",
                      where)
    aep_importer.check_event(event, where)  # the importer's checks on this event alone
    return event


def _plain_or_structured(body: bytes, where: str) -> list[tuple[dict, bool]]:
    try:
        value = jsonio.loads(body, top_object=False)
    except jsonio.JsonProblem as e:
        raise Refusal("INGEST-1", f"not JSON: {e.reason}", where) from None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Refusal("INGEST-1", "an empty batch", where)
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, dict) and "specversion" in item:
            out.append((ce_inverse(item, w), True))
        elif isinstance(item, dict):
            out.append((item, False))
        else:
            raise Refusal("INGEST-1", "neither an AEP event nor a CloudEvent (a JSON object)", w)
    return out


def decode_http(headers: dict[str, str], body: bytes, where: str) -> list[tuple[dict, bool]]:
    """The AEP events of one HTTP request, each with whether it came as a CloudEvent: binary mode (``ce-*``
    headers), structured (``application/cloudevents+json``), batch (``application/cloudevents-batch+json``), or
    plain AEP JSON (``application/json``: an event or an array of events)."""
    lower = {k.lower(): v for k, v in headers.items()}
    media = (lower.get("content-type") or "").split(";", 1)[0].strip().lower()
    if any(k.startswith("ce-") for k in lower) or media in (STRUCTURED_CONTENT_TYPE, BATCH_CONTENT_TYPE):
        keep = {k: v for k, v in lower.items() if k.startswith("ce-") or k == "content-type"}
        got = from_http(keep, body, where=where)
        return [(e, True) for e in (got if isinstance(got, list) else [got])]
    if media not in ("", "application/json", "application/x-ndjson", "text/plain"):
        raise Refusal("INGEST-1", f"content-type {media!r}: not CloudEvents and not AEP JSON", where)
    return _plain_or_structured(body, where)


def decode_nats(headers: dict[str, str] | None, data: bytes, where: str) -> list[tuple[dict, bool]]:
    """The AEP events of one NATS message (the CloudEvents NATS binding): binary mode when a ``ce-`` header is
    present (the headers are the attributes, the data the event's data), else the payload is a structured
    CloudEvent, a batch (``content-type: application/cloudevents-batch+json``), or plain AEP JSON."""
    return decode_http(dict(headers or {}), bytes(data or b""), where)


# -- the dead-letter sink ---------------------------------------------------------------------------------------


def _raw(headers: Any, body: bytes) -> dict:
    """A message as a dead letter keeps it: its body whole, and of its headers only the content type and the
    CloudEvents attributes (``redact.kept_headers``); the names of the others in ``headersLeftOut`` (never a
    value: ``Authorization``, ``Cookie``, ...)."""
    try:
        text = body.decode("utf-8")
        msg: dict[str, Any] = {"body": text}
    except UnicodeDecodeError:
        msg = {"bodyBase64": base64.b64encode(body).decode("ascii")}
    if headers:
        kept = kept_headers(headers)
        if kept:
            msg["headers"] = kept
        left = sorted({str(k) for k in headers} - set(kept))
        if left:
            msg["headersLeftOut"] = left
    return msg


class DeadLetter:
    """Malformed messages, one JSON line each: ``{"at", "rule", "where", "reason", "message": {"headers"?,
    "body" | "bodyBase64"}}`` appended to a file (fsynced before the message is acknowledged), or published on a
    NATS subject (``nats:SUBJECT``; flushed before the acknowledgement)."""

    def __init__(self, target: str, out: Path):
        self.subject: str | None = None
        self.path: Path | None = None
        if target.startswith("nats:"):
            self.subject = target[len("nats:"):]
            if not self.subject:
                raise Refusal("CLI-2", "a dead-letter subject is nats:SUBJECT", "option 'dead_letter'")
        else:
            self.path = Path(target) if os.path.isabs(target) or target != DEFAULT_DEAD_LETTER else out / target
        self.pending: list[bytes] = []
        self.nc: Any = None
        self.count = 0

    def add(self, refusal: Refusal, raw: dict) -> None:
        self.count += 1
        _log(f"dead-letter [{refusal.rule}] at {refusal.where}: {refusal.message}")
        rec = {"at": _now_text(), "rule": refusal.rule, "where": mask(refusal.where), "reason": mask(refusal.message),
               "message": raw}
        self.pending.append(jsonio.dumps(rec) + b"\n")

    async def flush(self) -> None:
        if not self.pending:
            return
        lines, self.pending = self.pending, []
        if self.subject is not None:
            if self.nc is None:
                raise RuntimeError("a NATS dead-letter subject needs a NATS connection")
            for line in lines:
                await self.nc.publish(self.subject, line[:-1])
            await self.nc.flush()
            return
        await asyncio.to_thread(self._append, lines)

    def _append(self, lines: list[bytes]) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # messages are the senders' data
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077 and st.st_uid == os.geteuid() and stat.S_ISREG(st.st_mode):
                os.fchmod(fd, 0o600)  # a file an earlier version made 0644
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, b"".join(lines))
            os.fsync(fd)
        finally:
            os.close(fd)


# -- the journal and the sealed runs ----------------------------------------------------------------------------


@dataclass
class Stats:
    received: int = 0  # messages (NATS) or requests (HTTP)
    events: int = 0  # events journaled
    dead: int = 0  # messages or requests dead-lettered
    runs: int = 0  # runs sealed
    sealed_events: int = 0  # distinct events in sealed runs
    duplicates: int = 0  # journaled events dropped as redeliveries when their run was built
    refused_sessions: int = 0  # sessions whose run the importer refused (their events dead-lettered)
    forwarded: int = 0  # events taken from the source and forwarded to the node owning their session
    claimed: int = 0  # sessions this node claimed (for itself or, by rendezvous hashing, for another node)
    started: float = field(default_factory=time.monotonic)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "started"}
        d["seconds"] = round(time.monotonic() - self.started, 3)
        return d


def _open_locked(path: Path, flags: int, blocking: bool = True) -> int | None:
    """An fd of ``path`` under an exclusive flock, checked to still be the file at ``path`` (a sealer may have
    removed it while we waited); None when ``path`` is gone or, without ``blocking``, locked by someone else."""
    while True:
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
        if not flags & os.O_CREAT:
            return None


@dataclass
class SealOutcome:
    name: str  # the journal's name
    run: Path | None = None  # the run written
    events: int = 0
    duplicates: int = 0
    refusal: Refusal | None = None
    rejected: Path | None = None  # the journal moved aside, to dead-letter
    dropped: list = field(default_factory=list)  # OTLP: (refusal, record) of evaluation events left out (OT-6)
    note: str = ""  # OTLP: what the run lacks (its traces), or why there is none


class Store:
    """``OUT``: the journals (``.journal/``), the sealed runs and their key files (``.ingest/sealed/``)."""

    def __init__(self, out: Path, *, at: str | None = None, key: Any = None, target_mode: str | None = None):
        self.out = out
        self.journal = out / JOURNAL_DIR
        self.state = out / STATE_DIR
        self.sealed = self.state / "sealed"
        self.staging = self.state / "staging"
        self.rejected = self.state / "rejected"
        for d in (self.out, self.journal, self.sealed, self.staging, self.rejected):
            d.mkdir(parents=True, exist_ok=True)
        self.at = at
        self.key = key
        self.target_mode = target_mode
        # a journal's idle time counts from its last write or from this start, whichever is later: the time the
        # service was down is no producer's gap (a restart after a crash must not seal a session the backlog, or
        # the producer's next event, is still about to extend)
        self.started = time.time()
        self._executor = None
        # OTLP runs: (where, trace ids) -> the stored trace pieces (NATS: read from the stream at seal time)
        self.fetch_spans: Callable[[str, list[str]], list[dict]] | None = None

    # recovery -------------------------------------------------------------------------------------------------

    def recover(self) -> list[Path]:
        """After a crash: remove staging leftovers and key files whose run was never committed (renamed into
        place); return the rejected journals still to be dead-lettered. Journals need nothing: they are read when
        their session is sealed."""
        for p in self.staging.iterdir():
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        for p in self.sealed.glob("*.keys"):
            if not (self.out / p.name[: -len(".keys")]).is_dir():
                p.unlink(missing_ok=True)
        for p in self.out.glob(".*.tmp-*"):  # an interrupted rename of atomic_dir
            shutil.rmtree(p, ignore_errors=True)
        return sorted(self.rejected.glob("*.jsonl"))

    # appending ------------------------------------------------------------------------------------------------

    def append(self, batches: dict[str, list[bytes]]) -> None:
        """Append each session's journal lines and fsync them: when this returns, they are durable."""
        def one(item: tuple[str, list[bytes]]) -> bool:
            name, lines = item
            path = self.journal / f"{name}.jsonl"
            new = not path.exists()
            fd = _open_locked(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            assert fd is not None
            try:
                view = memoryview(b"".join(lines))
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            return new

        items = list(batches.items())
        if len(items) == 1:
            created = one(items[0])
        else:  # the fsyncs of several journals at once (the file system commits them together)
            created = any(list(self._pool().map(one, items)))
        if created:
            fsync_dir(self.journal)

    def _pool(self):
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="journal")
        return self._executor

    # sealing --------------------------------------------------------------------------------------------------

    def journals(self) -> list[str]:
        return sorted(p.name[: -len(".jsonl")] for p in self.journal.glob("*.jsonl"))

    def idle(self, idle: float, now: float | None = None, *, since_start: bool = True) -> list[str]:
        """The journals not written for ``idle`` seconds, counted from this start at the earliest (``since_start``;
        without it, from their last write alone)."""
        now = time.time() if now is None else now
        floor = self.started if since_start else 0.0
        out = []
        for p in self.journal.glob("*.jsonl"):
            try:
                if now - max(p.stat().st_mtime, floor) >= idle:
                    out.append(p.name[: -len(".jsonl")])
            except FileNotFoundError:
                pass
        return sorted(out)

    def _sealed_keys(self, name: str) -> tuple[set[str], int]:
        """The keys of the session's committed runs, and the next generation number."""
        keys: set[str] = set()
        gen = 1
        while (self.out / generation_name(name, gen)).exists():
            kf = self.sealed / f"{generation_name(name, gen)}.keys"
            if kf.exists():
                keys.update(kf.read_text("ascii").split())
            gen += 1
        return keys, gen

    def _records(self, path: Path) -> Iterator[tuple[int, dict]]:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    _log(f"{path}:{lineno}: a partial last line (never acknowledged), ignored")
                    return
                try:
                    rec = jsonio.loads(raw)
                except jsonio.JsonProblem as e:
                    _log(f"{path}:{lineno}: not a journal record ({e.reason}), ignored")
                    continue
                yield lineno, rec

    def seal(self, name: str, *, idle: float | None = None, since_start: bool = True) -> SealOutcome | None:
        """Build, seal and commit the run of journal ``name`` (when it is idle for ``idle`` seconds; always with
        None). None when there is nothing to do (gone, locked by another process, no longer idle)."""
        path = self.journal / f"{name}.jsonl"
        fd = _open_locked(path, os.O_RDWR, blocking=False)
        if fd is None:
            return None
        try:
            floor = self.started if since_start else 0.0
            if idle is not None and time.time() - max(os.fstat(fd).st_mtime, floor) < idle:
                return None
            done, gen = self._sealed_keys(name)
            outcome = SealOutcome(name)
            keys: dict[str, None] = {}
            gname = generation_name(name, gen)
            stage = self.staging / f"{gname}-{secrets.token_hex(4)}"
            try:
                try:
                    recs = self._new_records(path, done, keys, outcome)
                    if not recs:  # only redeliveries of sealed events
                        self._drop(path)
                        return outcome
                    count = self._build(recs, len(keys), stage, gen, gname, path, outcome)
                    if count is None:  # logs without an evaluation event make no run
                        self._drop(path)
                        return outcome
                except Refusal as r:
                    return self._reject(name, path, stage, outcome, r)
                outcome.run, outcome.events = self._commit(gname, stage, keys, path), count
                return outcome
            except BaseException:  # a disk error, an interrupt: no staged folder or key file is left behind
                shutil.rmtree(stage, ignore_errors=True)
                with contextlib.suppress(OSError):
                    (self.sealed / f".{gname}.keys.tmp").unlink()
                if not (self.out / gname).exists():  # not committed: its keys count for nothing
                    with contextlib.suppress(OSError):
                        (self.sealed / f"{gname}.keys").unlink()
                raise
        finally:
            os.close(fd)

    def _new_records(self, path: Path, done: set[str], keys: dict[str, None], outcome: SealOutcome) -> list[dict]:
        """The records of journal ``path`` to seal: in stream order (NATS: the stream sequence, whichever process
        took the message), else as journaled; the first copy of an event (or of an OTLP piece) is kept, its key
        added to ``keys``; the others (and those ``done`` already) counted as duplicates."""
        out = []
        for _lineno, rec in sorted(self._records(path), key=lambda lr: (lr[1].get("n", 0), lr[0])):
            k = rec["k"]
            if k in done or k in keys:
                outcome.duplicates += 1
                continue
            keys[k] = None
            out.append(rec)
        return out

    def _build(self, recs: list[dict], nkeys: int, stage: Path, gen: int, gname: str, path: Path,
               outcome: SealOutcome) -> int | None:
        """Build and seal the run of ``recs`` in ``stage``: the number of events it holds, or None when it makes no
        run (OTLP logs without an evaluation event)."""
        if "o" in recs[0]:  # OTLP records (bus/otlp_bus.py): the OpenTelemetry importer builds the run
            work = self.staging / f".{gname}-{secrets.token_hex(4)}.otlp"
            try:
                built = build_run(recs, stage, work, gen=gen, at=self.at, key=self.key,
                                  target_mode=self.target_mode, fetch_spans=self.fetch_spans)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if built is None:
                outcome.note = "no gen_ai.evaluation.result event: no run"
                return None
            outcome.dropped = built.dropped
            outcome.note = built.warning
            return built.events
        import_events([(r["w"], ce_forward(r["e"]) if r.get("ce") else r["e"]) for r in recs], stage,
                      at=self.at, key=self.key, target_mode=self.target_mode, name=str(path))
        return nkeys

    def _reject(self, name: str, path: Path, stage: Path, outcome: SealOutcome, r: Refusal) -> SealOutcome:
        """A journal whose run is refused: set aside in ``rejected/`` with the refusal, nothing staged kept."""
        shutil.rmtree(stage, ignore_errors=True)
        outcome.refusal = r
        aside = self.rejected / f"{name}.{time.time_ns()}.jsonl"
        os.rename(path, aside)
        fsync_dir(self.rejected)
        fsync_dir(self.journal)
        outcome.rejected = aside
        return outcome

    def _commit(self, gname: str, stage: Path, keys: dict[str, None], path: Path) -> Path:
        """Commit a staged run: its event keys written (fsynced), the run renamed into ``out`` (the commit point),
        the journal dropped. Returns the run's folder."""
        fsync_tree(stage)
        kf = self.sealed / f"{gname}.keys"
        tmp = self.sealed / f".{gname}.keys.tmp"
        with open(tmp, "wb") as f:
            f.write("".join(k + "\n" for k in keys).encode("ascii"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, kf)
        fsync_dir(self.sealed)
        dest = self.out / gname
        os.rename(stage, dest)  # the commit point: the keys count from now on
        fsync_dir(self.out)
        self._drop(path)
        return dest

    def _drop(self, path: Path) -> None:
        path.unlink()
        fsync_dir(self.journal)


def rejected_records(path: Path) -> Iterator[dict]:
    """The journal records of a rejected journal (to dead-letter)."""
    with open(path, "rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                try:
                    yield jsonio.loads(raw)
                except jsonio.JsonProblem:
                    continue


# -- the fleet: session ownership across nodes ------------------------------------------------------------------


NODE_FILE = "node"  # OUT/.ingest/node: the node's name, kept across restarts


def node_name(out: Path, given: str | None = None) -> str:
    """The node's name: ``node`` (the option) when given (``[A-Za-z0-9_-]``, at most 64 characters), else the one kept in
    ``OUT/.ingest/node``, else ``<hostname>-<12 hex digits of the SHA-256 of OUT's real path>`` (written there,
    so a restart with the same ``OUT`` is the same node even when the host name changed). Processes sharing one
    ``OUT`` are one node."""
    kept = out / STATE_DIR / NODE_FILE
    if given is not None:
        if not given or len(given) > 64 or not set(given) <= _SAFE:
            raise Refusal("CLI-2", "a node name is 1 to 64 characters of [A-Za-z0-9_-]", "option 'node'")
        name = given
    else:
        try:
            name = kept.read_text("ascii").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            name = ""
        if not name or not set(name) <= _SAFE:
            host = _token(socket.gethostname() or "host", 40)
            name = f"{host}-{hashlib.sha256(str(out.resolve()).encode('utf-8')).hexdigest()[:12]}"
    try:
        if kept.read_text("ascii").strip() == name:
            return name
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    kept.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(kept, name.encode("ascii") + b"\n")
    return name


def claim_key(name: str) -> str:
    """The key-value key of a session's claim: ``s.`` and 32 hex digits of the SHA-256 of its run name."""
    return "s." + hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]


class Fleet:
    """Several ``serve ingest`` nodes (each with its own ``OUT``) on one durable consumer (docs/design/ingest.md,
    "Across hosts"). A session belongs to the node that first claimed it in the key-value bucket
    ``aefgate_ingest_<stream>_<durable>`` (atomic ``create``; the value is the node's name; a claim is never
    released: the owner keeps the session's sealed keys, so later generations and redeliveries must reach it).
    A node that takes events of another node's session forwards them, as journal records, to the stream
    ``AEFGATE_INGEST_<stream>_<durable>`` on the subject ``aefgate.ingest.<stream>_<durable>.node.<owner>``
    (work-queue retention, ``Nats-Msg-Id`` a digest of the records); each node pulls its own subject through the
    durable consumer ``node-<name>`` and journals what it gets like its own intake."""

    def __init__(self, js: Any, nc: Any, node: str, stream: str, durable: str, *, ack_wait: float):
        self.js, self.nc, self.node = js, nc, node
        tag = _token(f"{stream}_{durable}", 100)
        self.bucket = f"aefgate_ingest_{tag}"
        self.stream = f"AEFGATE_INGEST_{tag}"
        self.prefix = f"aefgate.ingest.{tag}.node"
        self.ack_wait = ack_wait
        self.kv: Any = None
        self.psub: Any = None
        self.owners: dict[str, str] = {}  # run name -> owner (claims never change: a cache, bounded below)
        self.claimed = 0  # sessions this node claimed (for itself or for another node)
        self.nodes_kv: Any = None  # presence: one key per live node, expiring unless refreshed
        self.live: list[str] = [node]
        self.live_at = 0.0

    async def setup(self) -> None:
        """Find or create the bucket, the forwarding stream and this node's consumer; several processes may do
        it at once (creating what exists with the same configuration is not an error; a lost race is retried
        by looking the thing up)."""
        import nats.js.errors as jse  # lazy: nats-py is heavy, and only the NATS source needs it
        from nats.js.api import (
            AckPolicy,
            ConsumerConfig,
            DeliverPolicy,
            KeyValueConfig,
            RetentionPolicy,
            StorageType,
            StreamConfig,
        )

        where = f"nats stream {self.stream}, bucket {self.bucket}"
        for attempt in range(5):
            try:
                try:
                    self.kv = await self.js.key_value(self.bucket)
                except jse.BucketNotFoundError:
                    self.kv = await self.js.create_key_value(KeyValueConfig(bucket=self.bucket, history=1,
                                                                            storage=StorageType.FILE))
                try:
                    self.nodes_kv = await self.js.key_value(self.bucket + "_nodes")
                except jse.BucketNotFoundError:
                    self.nodes_kv = await self.js.create_key_value(KeyValueConfig(
                        bucket=self.bucket + "_nodes", history=1, ttl=5 * HEARTBEAT, storage=StorageType.MEMORY))
                try:
                    await self.js.stream_info(self.stream)
                except jse.NotFoundError:
                    await self.js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.prefix}.*"],
                                                          retention=RetentionPolicy.WORK_QUEUE,
                                                          storage=StorageType.FILE, duplicate_window=120.0))
                config = ConsumerConfig(durable_name=f"node-{self.node}", ack_policy=AckPolicy.EXPLICIT,
                                        deliver_policy=DeliverPolicy.ALL, ack_wait=self.ack_wait,
                                        filter_subject=f"{self.prefix}.{self.node}")
                self.psub = await self.js.pull_subscribe(f"{self.prefix}.{self.node}", durable=f"node-{self.node}",
                                                         stream=self.stream, config=config)
                await self.beat()  # present once its consumer exists: what is forwarded to it is consumed
                return
            except Exception as e:  # an API error (a lost creation race) or a timeout: look up again
                if attempt == 4:
                    text = getattr(e, "description", None) or f"{type(e).__name__}: {e}"
                    raise Refusal("INGEST-5", f"cannot set up the fleet's state: {text}", where) from None
                await asyncio.sleep(0.1 * (attempt + 1))

    async def beat(self) -> None:
        """This node's presence (the nodes bucket expires a key not refreshed for ``5 * HEARTBEAT`` seconds)."""
        await self.nodes_kv.put(f"n.{self.node}", _now_text().encode("ascii"))

    async def heartbeat(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), HEARTBEAT)
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                break
            try:
                await self.beat()
            except Exception as e:  # a reconnect: the next beat comes soon enough
                _log(f"heartbeat: {type(e).__name__}: {e}")

    async def leave(self) -> None:
        """No longer offered new sessions (a clean stop; a crash just lets the key expire)."""
        try:
            await self.nodes_kv.delete(f"n.{self.node}")
        except Exception:
            pass

    async def _live(self) -> list[str]:
        """The live nodes (this one always among them), looked up at most once a second."""
        import nats.js.errors as jse  # lazy: nats-py is heavy, and only the NATS source needs it

        if time.monotonic() - self.live_at >= 1.0:
            try:
                keys = await self.nodes_kv.keys()
            except jse.NoKeysError:
                keys = []
            self.live = sorted({k[2:] for k in keys if k.startswith("n.")} | {self.node})
            self.live_at = time.monotonic()
        return self.live

    async def owner(self, name: str) -> str:
        """The node that owns the session ``name``. When nobody owns it yet, it is claimed for the live node that
        rendezvous hashing prefers (the highest SHA-256 of node name, NUL, run name): sessions spread over the
        fleet, whichever node took their first event; ``create`` is atomic, so the first claim wins."""
        import nats.js.errors as jse  # lazy: nats-py is heavy, and only the NATS source needs it

        known = self.owners.get(name)
        if known is not None:
            return known
        key = claim_key(name)
        while True:
            live = await self._live()
            prefer = max(live, key=lambda n: hashlib.sha256(f"{n}\0{name}".encode("utf-8")).digest())
            try:
                await self.kv.create(key, prefer.encode("ascii"))
                owner = prefer
                self.claimed += 1
                break
            except jse.KeyWrongLastSequenceError:
                try:
                    entry = await self.kv.get(key)
                except (jse.KeyNotFoundError, jse.KeyDeletedError):  # deleted by an operator meanwhile
                    continue
                owner = (entry.value or b"").decode("ascii", "replace")
                break
        if len(self.owners) >= 100_000:
            self.owners.clear()
        self.owners[name] = owner
        return owner

    async def forward(self, by_owner: dict[str, list[bytes]]) -> None:
        """Publish each owner's journal records on its subject and wait for JetStream's acknowledgements: when
        this returns, they are stored (and stay until the owner has journaled them)."""
        limit = max(4096, int(getattr(self.nc, "max_payload", 1 << 20) or (1 << 20)) - 4096)

        async def one(owner: str, lines: list[bytes]) -> None:
            chunk: list[bytes] = []
            size = 0
            for line in lines + [b""]:
                if chunk and (not line or size + len(line) > limit):
                    data = b"".join(chunk)
                    await self.js.publish(f"{self.prefix}.{owner}", data, timeout=max(2.0, self.ack_wait / 3),
                                          headers={"Nats-Msg-Id": hashlib.sha256(data).hexdigest()[:32]})
                    chunk, size = [], 0
                if line:
                    chunk.append(line)
                    size += len(line)

        await asyncio.gather(*(one(o, ls) for o, ls in by_owner.items()))


# -- the service ------------------------------------------------------------------------------------------------


@dataclass
class IngestConfig:
    source: str  # nats://host:port/SUBJECT or http://127.0.0.1:PORT
    out: Path
    durable: str | None = None
    idle: float = 5.0
    dead_letter: str | None = None
    max_inflight: int = 64
    at: str | None = None
    key: Any = None
    target_mode: str | None = None
    ack_wait: float = 30.0
    on_ready: Callable[[], None] | None = None
    node: str | None = None  # NATS: this node's name (default: kept in OUT/.ingest/node, see node_name)
    metrics_listen: str | None = None  # HOST:PORT of the Prometheus metrics (docs/gateway.md)
    nats_auth: Any = None  # NATS: a bus.nats_connect.NatsAuth (TLS, credentials file, NKEY, token)


class _Service:
    def __init__(self, cfg: IngestConfig):
        if cfg.max_inflight < 1:
            raise Refusal("CLI-2", "option 'max_inflight' is at least 1", "option 'max_inflight'")
        if cfg.idle < 0:
            raise Refusal("CLI-2", "option 'idle' is a number of seconds >= 0", "option 'idle'")
        self.cfg = cfg
        self.store = Store(cfg.out, at=cfg.at, key=cfg.key, target_mode=cfg.target_mode)
        self.dead = DeadLetter(cfg.dead_letter or DEFAULT_DEAD_LETTER, cfg.out)
        self.stats = Stats()
        self.touched: set[str] = set()
        self.stop = asyncio.Event()
        self.scan_every = max(0.05, min(1.0, cfg.idle / 4))
        self.lock = asyncio.Lock()  # one journal operation at a time in this process
        self.fleet: Fleet | None = None
        self.intake_done = asyncio.Event()  # NATS: no more fetches from the source (the node loop then drains)
        self.caught_up = asyncio.Event()  # NATS: the backlog forwarded to this node is journaled (idle scans wait)

    # shared ---------------------------------------------------------------------------------------------------

    def _records(self, events: list[tuple[dict, bool]], where: str, seq: int | None = None) -> dict[str, list[bytes]]:
        """Checks every event (all or nothing for one message) and gives the journal lines by session."""
        out: dict[str, list[bytes]] = {}
        for i, (ev, ce) in enumerate(events):
            w = where if len(events) == 1 else f"{where}[{i}]"
            check_event(ev, w)
            rec = {"k": event_key(ev), "w": w, "ce": ce, "e": ev}
            if seq is not None:
                rec["n"] = seq
            out.setdefault(run_name(ev["session"]), []).append(jsonio.dumps(rec) + b"\n")
        return out

    @staticmethod
    def _merge(into: dict[str, list[bytes]], part: dict[str, list[bytes]]) -> None:
        for k, v in part.items():
            into.setdefault(k, []).extend(v)

    async def _append(self, batches: dict[str, list[bytes]]) -> None:
        if batches:
            async with self.lock:
                await asyncio.to_thread(self.store.append, batches)
            self.touched.update(batches)
            self.stats.events += sum(len(v) for v in batches.values())

    async def _seal(self, names: list[str], idle: float | None, since_start: bool = True) -> None:
        for name in names:
            async with self.lock:
                try:
                    outcome = await asyncio.to_thread(self.store.seal, name, idle=idle, since_start=since_start)
                except Exception as e:  # a bug or a disk error: keep the journal, say so, go on
                    _log(f"cannot seal {name}: {type(e).__name__}: {e}")
                    continue
            if outcome is None:
                continue
            self.touched.discard(name)
            self.stats.duplicates += outcome.duplicates
            for refusal, record in outcome.dropped:  # OTLP: evaluation events the run could not hold
                self.dead.add(refusal, {"otlpLogRecord": record})
                self.stats.dead += 1
            if outcome.dropped:
                await self.dead.flush()
            if outcome.run is not None:
                self.stats.runs += 1
                self.stats.sealed_events += outcome.events
                _log(f"sealed {outcome.run.name} ({outcome.events} events, {outcome.duplicates} duplicates)"
                     + (f"; {outcome.note}" if outcome.note else ""))
            elif outcome.refusal is not None:
                self.stats.refused_sessions += 1
                await self._dead_letter_journal(outcome.rejected, outcome.refusal)
            elif outcome.note:
                _log(f"{name}: {outcome.note}")
            else:
                _log(f"{name}: only redeliveries of sealed events ({outcome.duplicates}), nothing to seal")

    async def _dead_letter_journal(self, path: Path | None, refusal: Refusal) -> None:
        if path is None:
            return
        for rec in rejected_records(path):
            self.dead.add(Refusal(refusal.rule, f"the session's run was refused: {refusal.message}",
                                  rec.get("w") or refusal.where),
                          {"event": rec.get("e")} if "e" in rec else {"otlp": rec.get("o")})
            self.stats.dead += 1
        await self.dead.flush()
        path.unlink(missing_ok=True)

    async def _scanner(self) -> None:
        if self.fleet is not None:  # after a restart, what other nodes forwarded meanwhile is journaled first
            stop = asyncio.create_task(self.stop.wait())
            up = asyncio.create_task(self.caught_up.wait())
            await asyncio.wait({stop, up}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            up.cancel()
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), self.scan_every)
            except asyncio.TimeoutError:
                pass
            if self.stop.is_set():
                break
            await self._seal(self.store.idle(self.cfg.idle), self.cfg.idle)

    async def _startup(self) -> None:
        for path in self.store.recover():
            await self._dead_letter_journal(path, Refusal("AEP-14", "refused before a restart", str(path)))

    async def _shutdown(self) -> None:
        """Drain: everything taken is journaled and acknowledged already; seal this process's sessions, and the
        journals already idle."""
        await self._seal(sorted(self.touched), None)
        # e.g. journals left by a crash, idle by their last write (as before the restart rule: the process stops)
        await self._seal(self.store.idle(self.cfg.idle, since_start=False), self.cfg.idle, since_start=False)
        await self.dead.flush()

    def _signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass

    # NATS -----------------------------------------------------------------------------------------------------

    async def run_nats(self) -> None:
        """Consume the JetStream subject of option 'source' through the shared durable pull consumer, as a node of
        the fleet, until stopped; then seal what is left and close the connection."""
        from nats.js.api import (  # lazy: nats-py is heavy, and only the NATS source needs it
            AckPolicy,
            ConsumerConfig,
            DeliverPolicy,
        )

        u = urlsplit(self.cfg.source)
        subject = unquote(u.path.lstrip("/"))
        if not subject:
            raise Refusal("CLI-2", "option 'source' (nats://HOST:PORT/SUBJECT) names a subject", "option 'source'")
        if not self.cfg.durable:
            raise Refusal("CLI-2", "a NATS source needs option 'durable' (a name: the shared pull consumer)",
                          "option 'durable'")
        server = mask_url(server_of(self.cfg.source))  # what the log shows: no credentials
        nc = await self._connect_nats(server)
        if nc is None:
            _log(f"stopped before connecting to {server}")
            return
        try:
            self.dead.nc = nc
            js = nc.jetstream()
            try:
                stream = await js.find_stream_name_by_subject(subject)
            except Exception:
                raise Refusal("INGEST-3", f"no JetStream stream holds the subject {subject!r}: create one (e.g. "
                              "with aefgate publish, or nats stream add)", mask_url(self.cfg.source)) from None
            config = ConsumerConfig(durable_name=self.cfg.durable, ack_policy=AckPolicy.EXPLICIT,
                                    deliver_policy=DeliverPolicy.ALL, ack_wait=self.cfg.ack_wait,
                                    max_ack_pending=max(1000, self.cfg.max_inflight * 4))
            self.fleet = Fleet(js, nc, node_name(self.cfg.out, self.cfg.node), stream, self.cfg.durable,
                               ack_wait=self.cfg.ack_wait)
            await self.fleet.setup()  # before the first claim: what is forwarded to this node has a consumer
            loop = asyncio.get_running_loop()

            def spans(where: str, trace_ids: list[str]) -> list[dict]:  # called by a seal, in a worker thread
                return asyncio.run_coroutine_threadsafe(fetch_spans(js, where, trace_ids), loop).result(120)

            self.store.fetch_spans = spans
            psub = await js.pull_subscribe(subject, durable=self.cfg.durable, stream=stream, config=config)
            await self._consume_nats(psub, subject, stream)
            try:
                await nc.flush(timeout=5)  # the last acknowledgements
            except Exception as e:  # the server is gone: unacknowledged messages are redelivered, nothing lost
                _log(f"cannot flush the acknowledgements: {type(e).__name__}: {e}")
        finally:
            try:
                await asyncio.wait_for(nc.close(), 5)
            except Exception:  # a close that cannot reach the server must not hold the shutdown
                pass

    async def _connect_nats(self, server: str):
        """Connect to option 'source', or None when stopped before it could: a server that is down is waited for
        (one log line per new kind of error, no traceback), one that refuses the credentials is INGEST-6."""
        last_error: list[str] = [""]

        async def on_error(e: Exception) -> None:  # one line per new kind of error, no traceback
            text = f"{type(e).__name__}: {e}"
            if text != last_error[0]:
                last_error[0] = text
                _log(f"nats: {text}")

        async def on_reconnect() -> None:
            last_error[0] = ""
            _log("nats: reconnected")

        # nats-py keeps trying a server that is down (max_reconnect_attempts=-1), also for the first connection:
        # SIGTERM/SIGINT must still stop the service while it waits (nothing was taken, nothing to seal); a server
        # that refuses the credentials (or a TLS handshake that fails) is INGEST-6 at once, not a wait
        try:
            return await connect(self.cfg.source, self.cfg.nats_auth, stop=self.stop, reconnect_time_wait=0.5,
                                 name=f"aefgate-ingest-{os.getpid()}", error_cb=on_error,
                                 reconnected_cb=on_reconnect)
        except AuthFailed as e:
            raise Refusal("INGEST-6", f"NATS authentication failed: {e}", server) from None

    async def _consume_nats(self, psub, subject: str, stream: str) -> None:
        """Fetch and take the messages of ``psub`` until stopped, with the fleet's tasks beside (the scan of idle
        journals, the sessions forwarded to this node, the heartbeat); then leave the fleet and seal what is left."""
        import nats  # lazy: as above

        await self._startup()
        _log(f"consuming {subject!r} (stream {stream}, durable {self.cfg.durable}) into {self.cfg.out} "
             f"as node {self.fleet.node}")
        if self.cfg.on_ready:
            self.cfg.on_ready()
        scanner = asyncio.create_task(self._scanner())
        forwarded = asyncio.create_task(self._node_loop())
        beats = asyncio.create_task(self.fleet.heartbeat(self.intake_done))
        try:
            while not self.stop.is_set():
                try:
                    msgs = await psub.fetch(self.cfg.max_inflight, timeout=min(1.0, max(0.2, self.scan_every)))
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    continue
                except (nats.errors.ConnectionClosedError, nats.errors.NoServersError):
                    raise
                except Exception as e:  # a reconnect in progress, a server restart
                    _log(f"fetch: {type(e).__name__}: {e}")
                    await asyncio.sleep(0.2)
                    continue
                await self._take_nats(msgs, stream)
        finally:
            self.stop.set()
            self.intake_done.set()
            await beats
            await self.fleet.leave()  # no new session is claimed for this node from now on
            await forwarded  # drains what other nodes forwarded here, until it is quiet
            await scanner
        await self._shutdown()

    async def _take_nats(self, msgs: list, stream: str) -> None:
        batches: dict[str, list[bytes]] = {}
        for m in msgs:
            self.stats.received += 1
            try:
                seq = int(m.metadata.sequence.stream)
            except Exception:
                seq = None
            where = f"nats:{stream}#{seq if seq is not None else '?'}"
            try:
                if m.headers and HDR_SIGNAL in m.headers:  # OTLP records from serve otlp --bus (otlp_bus.py)
                    part = journal_lines(m.headers, m.data, where, seq)
                else:
                    part = self._records(decode_nats(m.headers, m.data, where), where, seq)
            except Refusal as r:
                self.dead.add(r, _raw(m.headers, m.data))
                self.stats.dead += 1
                continue
            except Exception as e:  # never crash on one message
                self.dead.add(Refusal("INGEST-1", f"unreadable: {type(e).__name__}: {e}", where),
                              _raw(m.headers, m.data))
                self.stats.dead += 1
                continue
            self._merge(batches, part)
        try:
            remote: dict[str, list[bytes]] = {}
            if self.fleet is not None and batches:
                names = list(batches)
                owners = await asyncio.gather(*(self.fleet.owner(n) for n in names))
                for name, owner in zip(names, owners):
                    if owner != self.fleet.node:
                        remote.setdefault(owner, []).extend(batches.pop(name))
                await self.fleet.forward(remote)  # stored in JetStream for the owners
            await self._append(batches)  # durable: journal lines fsynced
            await self.dead.flush()
        except Exception as e:  # the disk or the bus, not the messages: nothing acknowledged, delivered again
            _log(f"cannot journal or forward a batch ({type(e).__name__}: {e}); not acknowledged, retrying")
            for m in msgs:
                try:
                    await m.nak()
                except Exception:  # the connection is down: JetStream redelivers after AckWait anyway
                    pass
            await asyncio.sleep(1.0)
            return
        self.stats.forwarded += sum(len(v) for v in remote.values())
        if self.fleet is not None:
            self.stats.claimed = self.fleet.claimed
        for m in msgs:
            await m.ack()

    async def _node_loop(self) -> None:
        """Journal what other nodes forwarded to this one (journal records, already checked), then acknowledge
        it. After the intake stops, goes on until nothing came for two fetches in a row, or for at most
        ``DRAIN_MAX`` seconds (a drain: the other nodes' last batches, forwarded within a second of a fleet-wide
        SIGTERM, land here before this node seals; when the others keep running, what they forward later waits in
        the stream for this node's next start)."""
        import nats  # lazy: nats-py is heavy, and only the NATS source needs it

        assert self.fleet is not None
        quiet = 0
        drain_end: float | None = None
        while True:
            if self.intake_done.is_set():
                drain_end = drain_end or time.monotonic() + DRAIN_MAX
                if quiet >= 2 or time.monotonic() >= drain_end:
                    break
            try:
                msgs = await self.fleet.psub.fetch(self.cfg.max_inflight, timeout=0.5)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                self.caught_up.set()
                if self.intake_done.is_set():
                    quiet += 1
                continue
            except (nats.errors.ConnectionClosedError, nats.errors.NoServersError):
                return
            except Exception as e:  # a reconnect in progress
                _log(f"fetch (forwarded): {type(e).__name__}: {e}")
                if self.intake_done.is_set():
                    quiet += 1
                await asyncio.sleep(0.2)
                continue
            quiet = 0
            batches: dict[str, list[bytes]] = {}
            for m in msgs:
                for line in bytes(m.data or b"").splitlines(keepends=True):
                    try:
                        rec = jsonio.loads(line)
                        name = rec["j"] if "o" in rec else run_name(rec["e"]["session"])
                    except Exception as e:  # not what a node forwards: kept aside, never blocks
                        self.dead.add(Refusal("INGEST-1", f"not a forwarded journal record: {e}",
                                              f"nats:{self.fleet.stream}"), _raw(m.headers, line))
                        self.stats.dead += 1
                        continue
                    batches.setdefault(name, []).append(line if line.endswith(b"\n") else line + b"\n")
            try:
                await self._append(batches)
                await self.dead.flush()
            except Exception as e:
                _log(f"cannot journal a forwarded batch ({type(e).__name__}: {e}); not acknowledged, retrying")
                await asyncio.sleep(1.0)
                continue
            for m in msgs:
                await m.ack()
            if len(msgs) < self.cfg.max_inflight:
                self.caught_up.set()

    # HTTP -----------------------------------------------------------------------------------------------------

    async def run_http(self) -> None:
        """The HTTP intake, on the services' one HTTP layer (:mod:`aefgate.net.http_server`: aiohttp, its limits):
        ``POST`` any path (CloudEvents binary, structured or batch mode, or plain AEP JSON), ``GET /healthz`` and
        ``/stats``; another method is 405."""
        from aiohttp import (
            web,  # lazy: the services' dependency, not every command's (aefgate.bus's import)
        )

        u = urlsplit(self.cfg.source)
        host, port = u.hostname or "127.0.0.1", u.port or 8080
        self.slots = asyncio.Semaphore(self.cfg.max_inflight)
        self.busy = 0
        await self._startup()

        def answer(status: int, value: dict) -> web.Response:
            return web.Response(status=status, body=jsonio.dumps(value), content_type="application/json")

        async def handle(request: web.Request) -> web.Response:
            if request.method == "GET" and request.path in ("/healthz", "/stats"):
                return answer(200, {"ok": True, "stats": self.stats.as_dict()})
            if request.method != "POST":
                return answer(405, {"error": {"rule": "INGEST-1", "message": "POST events"}})
            try:
                body = await read_body(request, MAX_BODY)
            except BodyError as e:
                return answer(e.status, {"error": {"rule": "INGEST-1", "message": e.message}})
            status, value = await self._take_http(dict(request.headers), body, request.path_qs)
            return answer(status, value)

        app = application(MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = await start(app, host, port)
        _log(f"listening on http://{host}:{port} into {self.cfg.out}")
        if self.cfg.on_ready:
            self.cfg.on_ready()
        scanner = asyncio.create_task(self._scanner())
        await self.stop.wait()
        await runner.shutdown()  # no new request; those under way are answered
        await runner.cleanup()
        await scanner
        while self.busy:  # requests already read are answered before the flush
            await asyncio.sleep(0.02)
        await self._shutdown()

    async def _take_http(self, headers: dict[str, str], body: bytes, target: str) -> tuple[int, dict]:
        async with self.slots:
            self.busy += 1
            try:
                self.stats.received += 1
                where = f"http:{self.stats.received}"
                try:
                    part = self._records(decode_http(headers, body, where), where)
                except Refusal as r:
                    self.dead.add(r, _raw(headers, body))
                    self.stats.dead += 1
                    await self.dead.flush()
                    return 400, r.to_json()
                except Exception as e:
                    r = Refusal("INGEST-1", f"unreadable: {type(e).__name__}: {e}", where)
                    self.dead.add(r, _raw(headers, body))
                    self.stats.dead += 1
                    await self.dead.flush()
                    return 400, r.to_json()
                batches: dict[str, list[bytes]] = {}
                self._merge(batches, part)
                try:
                    await self._append(batches)  # fsynced before the 202
                except OSError as e:
                    _log(f"cannot journal a request ({e}): 503")
                    return 503, {"error": {"rule": "INGEST-4", "where": where, "message": f"not stored: {e}"}}
                return 202, {"accepted": sum(len(v) for v in batches.values())}
            finally:
                self.busy -= 1


class _StatsCollector:
    """The service's counters as Prometheus metrics, read at each scrape: ``aefgate_ingest_<counter>_total``."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self):
        from prometheus_client.core import (
            CounterMetricFamily,  # lazy: only with metrics asked for
        )

        for k, v in self.stats.as_dict().items():
            if k != "seconds":
                yield CounterMetricFamily(f"aefgate_ingest_{k}", f"serve ingest: {k}", value=v)


async def _serve(cfg: IngestConfig) -> Stats:
    svc = _Service(cfg)
    svc._signals()
    if cfg.metrics_listen:
        from prometheus_client import (
            CollectorRegistry,  # lazy: only with metrics asked for
        )

        registry = CollectorRegistry()
        registry.register(_StatsCollector(svc.stats))
        metrics_server(cfg.metrics_listen, registry)
    scheme = urlsplit(cfg.source).scheme
    if scheme == "nats":
        await svc.run_nats()
    elif scheme == "http":
        await svc.run_http()
    else:
        raise Refusal("CLI-2", "option 'source' is nats://HOST:PORT/SUBJECT or http://HOST:PORT", "option 'source'")
    return svc.stats


def serve_ingest(cfg: IngestConfig) -> Stats:
    """Run the gateway until SIGTERM or SIGINT; returns the counters. Refuses a bad configuration (``CLI-2``) or
    a NATS subject no stream holds (``INGEST-3``)."""
    scheme = urlsplit(cfg.source).scheme
    if scheme not in ("nats", "http"):
        raise Refusal("CLI-2", "option 'source' is nats://HOST:PORT/SUBJECT or http://HOST:PORT", "option 'source'")
    if scheme == "http" and (cfg.dead_letter or "").startswith("nats:"):
        raise Refusal("CLI-2", "a nats: dead-letter subject needs a NATS source; give a file", "option 'dead_letter'")
    if scheme == "http" and cfg.node is not None:
        raise Refusal("CLI-2", "option 'node' names a node of a NATS fleet; an HTTP intake is one host's",
                      "option 'node'")
    if scheme == "http" and cfg.nats_auth is not None and cfg.nats_auth.given():
        raise Refusal("CLI-2", "the NATS connection options (TLS, credentials, NKEY, token) go with a NATS source",
                      "nats_auth")
    if scheme == "nats" and cfg.nats_auth is not None:
        cfg.nats_auth.check()  # a missing file or a bad combination before anything is taken
    if scheme == "nats":
        cfg.node = node_name(cfg.out, cfg.node)  # refuses a bad name before connecting; kept in OUT/.ingest/node
    return asyncio.run(_serve(cfg))
