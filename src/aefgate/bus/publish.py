"""``aefgate publish``: a verified run's assessment events onto an event bus, at least once (docs/design/bus.md).

:func:`publish` exports the run's AEP events (``aefgate.converters.aep_exporter.export_events``: only a run that
verifies intact, AEP-1) and sends them to a destination, each until it is acknowledged or given up;
:func:`resume` sends the events a spool holds. For a network destination the verification, the export and the
encoding run in a forked child (:mod:`aefgate.bus.pipeline`) while this process sends. Both return a
:class:`PublishReport`; its ``ok`` is true only when every event was acknowledged. Refusals
(:class:`aefgate.errors.Refusal`) come before anything is sent or written: ``PUB-1`` a destination URL, ``PUB-2``
an option, ``PUB-3`` a spool, ``PUB-4`` no JetStream stream for the subject, ``OUT-1`` an output that exists, and
the export's own (``AEP-1`` exit 1, ``AEP-7``, ``AEP-8``).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, AsyncIterator, BinaryIO, Iterator
from urllib.parse import unquote, urlsplit

from aefgate import progress
from aefgate.bus import codec
from aefgate.bus.http_sink import HttpSink
from aefgate.bus.nats_connect import NatsAuth
from aefgate.bus.nats_sink import NatsSink
from aefgate.bus.pipeline import Producer, encoded_items
from aefgate.bus.sinks import ACKED, DUPLICATE, FAILED, UNSENT, Item
from aefgate.bus.spool import Spool
from aefgate.converters.aep.exporter import export_events
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.fsutil import (
    atomic_lines,
    check_file_destination,
    check_outside,
    write_lines,
)
from aefgate.masking import has_userinfo, mask, mask_url, strip_userinfo
from aefgate.net.retry import Policy

CHUNK = 256  # events sent before the client may write and the spool's acknowledgements are synced
SPOOL_GROUP = 8  # chunks appended to the spool with one fsync at most (those that arrived during the last one)
DEFAULT_WINDOW = 512  # unacknowledged JetStream publishes at most
MAX_FAILURES = 10  # failure reasons kept in a report
DEFAULTS = {"format": "cloudevents", "mode": "structured", "batch": 1, "retries": 5, "timeout": 30.0,
            "create_stream": False}
_SUBJECT_TOKEN = re.compile(r"[^\s*>]+")


# -- destinations -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """A parsed destination (``to``): ``kind`` is ``stdout``, ``file``, ``http`` or ``nats``."""

    url: str
    kind: str
    path: Path | None = None  # file
    scheme: str = ""
    host: str = ""
    port: int = 0
    target: str = "/"  # http: path and query
    server: str = ""  # nats: the server URL (with its credentials)
    subject: str = ""  # nats
    auth: Any = None  # nats: a bus.nats_connect.NatsAuth (TLS, credentials file, NKEY, token)

    @property
    def display(self) -> str:
        """The URL with its credentials masked (``nats://***@host:4222/s``: what reports and messages show)."""
        if self.kind not in ("http", "nats"):
            return self.url
        return mask_url(self.url)

    @property
    def stored(self) -> str:
        """The URL without its credentials (what the spool keeps: they are given again on a resume)."""
        return strip_userinfo(self.url) if self.kind in ("http", "nats") else self.url


def parse_destination(url: str) -> Destination:
    """``-``, ``file:PATH`` (``file:///abs/path``), ``http(s)://host[:port]/path``, ``nats://host[:port]/SUBJECT``;
    anything else is refused (``PUB-1``)."""
    if type(url) is not str or not url:
        raise Refusal("PUB-1", "no destination: give option 'to' (a URL)", "option 'to'")
    if url == "-":
        return Destination(url, "stdout")
    shown = mask_url(url)  # a refusal names the URL without its credentials
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "file":
        rest = url[5:]
        if rest.startswith("//"):
            parts = urlsplit(url)
            if parts.netloc not in ("", "localhost"):
                raise Refusal("PUB-1", "a file: URL names a file on this host", url)
            rest = unquote(parts.path)
        if not rest:
            raise Refusal("PUB-1", "file: needs a path (file:events.jsonl)", url)
        return Destination(url, "file", path=Path(rest))
    if scheme in ("http", "https", "nats"):
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise Refusal("PUB-1", f"not a valid URL: {mask(e)}", shown) from None
        if not parts.hostname:
            raise Refusal("PUB-1", "the URL names no host", shown)
        if parts.fragment:
            raise Refusal("PUB-1", "a destination URL has no #fragment", shown)
        if scheme == "nats":
            if parts.query:
                raise Refusal("PUB-1", "a nats:// destination takes no query", shown)
            subject = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
            if not subject:
                raise Refusal("PUB-1", "a nats:// destination names the subject: nats://host:port/SUBJECT", shown)
            if not all(_SUBJECT_TOKEN.fullmatch(t) for t in subject.split(".")):
                raise Refusal("PUB-1", f"{subject!r} is not a subject to publish to (tokens separated by '.', "
                              f"no wildcard, no white space)", shown)
            server = parts._replace(path="", query="", fragment="").geturl()
            return Destination(url, "nats", scheme=scheme, host=parts.hostname, port=port or 4222, server=server,
                               subject=subject)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if parts.username or parts.password:
            raise Refusal("PUB-1", "credentials in an http(s) URL are not supported", shown)
        return Destination(url, "http", scheme=scheme, host=parts.hostname,
                           port=port or (443 if scheme == "https" else 80), target=target)
    raise Refusal("PUB-1", f"unknown destination {'scheme ' + repr(mask(scheme)) if scheme else repr(shown)}: use "
                  f"nats://host:port/SUBJECT, http(s)://..., file:PATH or - (stdout)", shown)


def check_options(dest: Destination, *, format: str, mode: str, batch: Any, retries: Any, timeout: Any,
                  create_stream: bool, spool: Any, window: Any) -> None:
    """``PUB-2``: each option's value, and the options that do not apply to the destination."""
    if format not in codec.FORMATS:
        raise Refusal("PUB-2", f"option 'format' is aep or cloudevents, not {format!r}", "option 'format'")
    if mode not in codec.MODES:
        raise Refusal("PUB-2", f"option 'mode' is structured or binary, not {mode!r}", "option 'mode'")
    if format == "aep" and mode != "structured":
        raise Refusal("PUB-2", "option 'mode=binary' is a CloudEvents content mode: it needs "
                      "option 'format=cloudevents'", "option 'mode'")
    for name, value, low in (("option 'batch'", batch, 1), ("option 'retries'", retries, 0)):
        if type(value) is not int or value < low or value > 100_000:
            raise Refusal("PUB-2", f"{name} is an integer from {low} to 100000, not {value!r}", name)
    if type(window) is not int or not 1 <= window <= 100_000:
        raise Refusal("PUB-2", f"the window is an integer from 1 to 100000, not {window!r}", "window")
    if type(timeout) not in (int, float) or not math.isfinite(timeout) or not 0 < timeout <= 86400:
        raise Refusal("PUB-2", f"option 'timeout' is a number of seconds above 0 (at most 86400), not {timeout!r}",
                      "option 'timeout'")
    if batch > 1 and dest.kind != "http":
        raise Refusal("PUB-2", "option 'batch' applies to http(s) destinations", "option 'batch'")
    if batch > 1 and mode == "binary":
        raise Refusal("PUB-2", "a batch is structured (application/cloudevents-batch+json): option 'batch' above 1 "
                      "does not go with option 'mode=binary'", "option 'batch'")
    if create_stream and dest.kind != "nats":
        raise Refusal("PUB-2", "option 'create_stream' applies to nats:// destinations", "option 'create_stream'")
    if spool is not None and dest.kind not in ("nats", "http"):
        raise Refusal("PUB-2", "a spool keeps unacknowledged events of a nats:// or http(s):// destination; a file "
                      "or stdout is written whole or not at all", "option 'spool'")


# -- the report -------------------------------------------------------------------------------------------------------


@dataclass
class PublishReport:
    """What a publish did. ``acked`` counts every acknowledged event, ``duplicate`` those of them JetStream
    acknowledged as already stored; ``failed`` events were sent and given up; ``unsent`` were never sent (the
    publish stopped first). ``ok``: every event acknowledged."""

    to: str
    kind: str
    format: str
    mode: str
    run: str | None = None
    resumed: str | None = None
    total: int = 0
    published: int = 0
    acked: int = 0
    duplicate: int = 0
    failed: int = 0
    unsent: int = 0
    attempts: int = 0
    seconds: float = 0.0
    spool: str | None = None
    pending: int | None = None
    reason: str | None = None
    failures: list[dict] = field(default_factory=list)
    destination: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.acked == self.total and self.failed == 0 and self.unsent == 0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict:
        out = {
            "outcome": "complete" if self.ok else "incomplete", "to": self.to, "transport": self.kind,
            "format": self.format, "mode": self.mode, "run": self.run, "resumed": self.resumed,
            "total": self.total, "published": self.published, "acked": self.acked, "duplicate": self.duplicate,
            "failed": self.failed, "unsent": self.unsent, "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
            "eventsPerSecond": round(self.acked / self.seconds, 1) if self.seconds > 0 else None,
            "spool": self.spool, "pending": self.pending, "reason": self.reason, "failures": self.failures,
            "destination": self.destination, "warnings": self.warnings, "exitCode": self.exit_code,
        }
        return out

    def _take(self, item: Item, status: str, reason: str | None) -> None:
        if status == ACKED:
            self.acked += 1
        elif status == DUPLICATE:
            self.acked += 1
            self.duplicate += 1
        elif status == FAILED:
            self.failed += 1
            reason = mask(reason) if reason is not None else None
            if self.reason is None:
                self.reason = reason
            if len(self.failures) < MAX_FAILURES:
                self.failures.append({"id": item.id, "reason": reason})
        else:
            self.unsent += 1
        if status != UNSENT:
            self.published += 1


# -- the driver -------------------------------------------------------------------------------------------------------


def _make_sink(dest: Destination, opts: dict, window: int, result):
    policy = Policy(retries=opts["retries"], timeout=float(opts["timeout"]))
    if dest.kind == "nats":
        return NatsSink(dest, opts["format"], opts["mode"], policy, window, opts["create_stream"], result)
    return HttpSink(dest, opts["format"], opts["mode"], opts["batch"], policy, result)


_END = object()


async def _chunks(source: Iterator[Item]) -> AsyncIterator[list[Item]]:
    """A synchronous stream of items as lists of :data:`CHUNK` (a resumed spool, an in-process export)."""
    while True:
        chunk = list(islice(source, CHUNK))
        if not chunk:
            return
        yield chunk


async def _drive(sink, chunks: AsyncIterator[list[Item]], spool: Spool | None, write_ahead: bool,
                 report: PublishReport) -> None:
    """Send every chunk; a feeder task reads the next chunks meanwhile and (write-ahead) appends each to the spool
    and fsyncs it in a worker thread before handing it on, so the disk's latency overlaps the sending of the chunk
    before. Acknowledgements are written to the spool's log in the same thread, one write in flight at a time."""
    write_ahead = write_ahead and spool is not None
    loop = asyncio.get_running_loop()
    # two threads: the events file's appends (one at a time) and the acknowledgement log's (one at a time)
    disk = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aefgate-spool") if spool is not None else None
    ready: asyncio.Queue = asyncio.Queue(maxsize=2)
    acks: list = [None]

    def sync_acks() -> None:
        if spool is not None and (acks[0] is None or acks[0].done()):
            if acks[0] is not None:
                acks[0].result()  # a write error surfaces here
            data = spool.take_acks()
            if data:
                acks[0] = disk.submit(spool.write_acks, data)

    async def next_chunk():
        got = await ready.get()
        if isinstance(got, BaseException):
            raise got
        return got

    feeder = loop.create_task(_feed(chunks, ready, spool, disk, write_ahead))
    try:
        await _send_chunks(sink, next_chunk, sync_acks, report)
    finally:
        if not feeder.done():
            feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        if disk is not None:
            disk.shutdown(wait=True)  # no spool write left running when the spool is closed
            if acks[0] is not None and acks[0].exception() is not None:
                raise acks[0].exception()
    report.attempts = sink.attempts
    if sink.fatal is not None and report.reason is None:
        report.reason = mask(sink.fatal)
    report.destination = sink.describe()


async def _pull(chunks: AsyncIterator[list[Item]], into: asyncio.Queue) -> None:
    """Put each chunk on ``into``, then ``_END``, or the exception that ended the chunks."""
    try:
        async for chunk in chunks:
            await into.put(chunk)
        await into.put(_END)
    except asyncio.CancelledError:
        raise
    except BaseException as e:  # a refusal met by the export (the run changed) ...
        await into.put(e)


async def _feed(chunks: AsyncIterator[list[Item]], ready: asyncio.Queue, spool: Spool | None, disk, write_ahead: bool
                ) -> None:
    """The feeder of :func:`_drive`: the chunks onto ``ready``; write-ahead, each group of them first appended to
    the spool (one fsync, in the ``disk`` thread)."""
    if not write_ahead:
        await _pull(chunks, ready)
        return
    # group commit: the chunks that arrived while the last append was being fsynced are appended together,
    # with one fsync, before any of them is handed on (write-ahead)
    arrived: asyncio.Queue = asyncio.Queue(maxsize=SPOOL_GROUP)
    puller = asyncio.get_running_loop().create_task(_pull(chunks, arrived))
    try:
        while True:
            group = [await arrived.get()]
            while len(group) < SPOOL_GROUP and not arrived.empty():
                group.append(arrived.get_nowait())
            tail = None
            if group[-1] is _END or isinstance(group[-1], BaseException):
                tail = group.pop()
            if group:
                try:
                    await asyncio.wrap_future(disk.submit(spool.append_items, [it for c in group for it in c]))
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # a spool write error: nothing of the group is sent
                    await ready.put(e)
                    return
                for chunk in group:
                    await ready.put(chunk)
            if tail is not None:
                await ready.put(tail)
                return
    finally:
        if not puller.done():
            puller.cancel()
        await asyncio.gather(puller, return_exceptions=True)


async def _send_chunks(sink, next_chunk, sync_acks, report: PublishReport) -> None:
    """Submit the items of each chunk to ``sink`` until the end or a fatal error, then close it; what was never
    sent is counted (and spooled by the feeder when the spool is new)."""
    ended = False
    try:
        while sink.fatal is None:
            chunk = await next_chunk()
            if chunk is _END:
                ended = True
                break
            report.total += len(chunk)
            for k, item in enumerate(chunk):
                if sink.fatal is not None:
                    for rest in chunk[k:]:
                        report._take(rest, UNSENT, None)
                    break
                await sink.submit(item)
            # let the client write what it holds: the server acknowledges it while the next chunk comes
            await asyncio.sleep(0)
            sync_acks()
        await sink.flush()
    finally:
        await sink.close()
    # what was never sent: counted, and spooled (by the feeder) when the spool is new
    while not ended:
        chunk = await next_chunk()
        if chunk is _END:
            break
        report.total += len(chunk)
        for item in chunk:
            report._take(item, UNSENT, None)


async def _network(dest: Destination, opts: dict, report: PublishReport, window: int, chunks_fn,
                   make_spool, write_ahead: bool) -> Spool | None:
    """Open the sink, then (nothing refused) make the spool, then send; returns the spool, open."""
    holder: list[Spool | None] = [None]
    bar = progress.start("publish events", None, "acknowledged")

    def result(item: Item, status: str, reason: str | None) -> None:
        report._take(item, status, reason)
        bar.advance()
        sp = holder[0]
        if sp is not None and status in (ACKED, DUPLICATE):
            sp.mark_acked(item.index)

    sink = _make_sink(dest, opts, window, result)
    await sink.open()  # a refusal here (PUB-4) comes before anything is written
    try:
        holder[0] = make_spool() if make_spool is not None else None
        chunks = chunks_fn(holder[0])
    except BaseException:
        await sink.close()
        raise
    try:
        await _drive(sink, chunks, holder[0], write_ahead, report)
    except BaseException:
        if holder[0] is not None:
            holder[0].close()  # consistent as it is (write-ahead): resumable
        raise
    finally:
        bar.close()
    return holder[0]


def _with_auth(dest: Destination, nats_auth: Any) -> Destination:
    """``dest`` with its NATS connection options (``PUB-2`` for another kind of destination; ``CLI-2`` for a
    missing file or a bad combination, before anything is sent)."""
    if nats_auth is None or not nats_auth.given():
        return dest
    if dest.kind != "nats":
        raise Refusal("PUB-2", "the NATS connection options (TLS, credentials, NKEY, token) apply to a nats:// "
                      "destination", "nats_auth")
    nats_auth.check()
    return replace(dest, auth=nats_auth)


def _spool_meta(dest: Destination, opts: dict, run: str | None, max_capture: str) -> dict:
    now = _now()
    return {"nats": dest.auth.to_json() if dest.auth is not None else None, "destination": dest.stored, "credentialsGiven": has_userinfo(dest.url), "options": {"format": opts["format"], "mode": opts["mode"],
                                                 "batch": opts["batch"], "retries": opts["retries"],
                                                 "timeout": opts["timeout"], "createStream": opts["create_stream"]},
            "run": run, "maxCapture": max_capture, "createdAt": now, "updatedAt": now}


# -- file and stdout --------------------------------------------------------------------------------------------------


# -- the API ----------------------------------------------------------------------------------------------------------


def publish(run_dir: str | os.PathLike[str], to: str, *, format: str = "cloudevents", mode: str = "structured",
            max_capture: str = "metadata", agent: str | None = None, source_host: str | None = None,
            cause_map: Any = None, policy: Any = None, batch: int = 1, retries: int = 5, timeout: float = 30.0,
            spool: str | os.PathLike[str] | None = None, create_stream: bool = False,
            window: int = DEFAULT_WINDOW, stdout: BinaryIO | None = None, nats_auth: Any = None) -> PublishReport:
    """Publish the AEP events of the run at ``run_dir`` to ``to`` (docs/design/bus.md).

    Refusals (exit 2, or 1 for a run that does not verify) are raised before anything is sent or written. A
    publish that could not deliver every event returns a report whose ``ok`` is false; with ``spool``, the events
    not acknowledged are then in that folder, for :func:`resume`. ``nats_auth`` (a
    :class:`aefgate.bus.nats_connect.NatsAuth`): TLS and credentials of a ``nats://`` destination.
    """
    dest = _with_auth(parse_destination(to), nats_auth)
    opts = {"format": format, "mode": mode, "batch": batch, "retries": retries, "timeout": timeout,
            "create_stream": bool(create_stream)}
    check_options(dest, **opts, spool=spool, window=window)
    spool_path = Path(spool) if spool is not None else None
    if spool_path is not None:
        Spool.check_new(spool_path)
        check_outside(spool_path, (run_dir,))  # OUT-2: the spool is not written inside the run
    if dest.kind == "file":
        check_file_destination(dest.path, (run_dir,))  # absent, under a folder (OUT-1), not in the run (OUT-2)
    options = {k: v for k, v in {"max_capture": max_capture, "agent": agent, "source_host": source_host,
                                  "cause_map": cause_map, "policy": policy}.items() if v is not None}
    if dest.kind in ("file", "stdout"):
        events = export_events(run_dir, **options)  # verifies the run (AEP-1) and every option first
        report = PublishReport(to=dest.display, kind=dest.kind, format=format, mode=mode, run=str(run_dir))
        t0 = time.perf_counter()
        lines = (codec.line(ev, format, mode) for ev in events)
        if dest.kind == "file":
            n = atomic_lines(dest.path, lines)
        else:
            n = write_lines(stdout if stdout is not None else sys.stdout.buffer, lines, 1 << 16)
        report.total = report.published = report.acked = n
        report.seconds = time.perf_counter() - t0
        return report
    make_spool = None
    if spool_path is not None:
        meta = _spool_meta(dest, opts, str(run_dir), max_capture)
        make_spool = lambda: Spool.create(spool_path, meta)  # noqa: E731
    spec = {"kind": dest.kind, "fmt": format, "mode": mode, "batch": batch, "spool_lines": spool_path is not None}
    if _fork_producer():
        # verify, export and encode in a forked child; this process only sends (docs/design/bus.md, "Pipeline")
        with Producer(run_dir, options, **spec) as producer:
            _load_client(dest.kind)  # while the child verifies: the client library is not loaded after the verdict
            producer.verified()  # the run verifies (AEP-1) and the options are accepted, or this raises
            report = PublishReport(to=dest.display, kind=dest.kind, format=format, mode=mode, run=str(run_dir))
            t0 = time.perf_counter()
            sp = asyncio.run(_network(dest, opts, report, window, lambda _sp: producer.chunks(), make_spool, True))
    else:
        events = export_events(run_dir, **options)  # verifies the run (AEP-1) and every option first
        report = PublishReport(to=dest.display, kind=dest.kind, format=format, mode=mode, run=str(run_dir))
        t0 = time.perf_counter()
        sp = asyncio.run(_network(dest, opts, report, window, lambda _sp: _chunks(encoded_items(events, **spec)),
                                  make_spool, True))
    report.seconds = time.perf_counter() - t0
    if sp is not None:
        report.spool = str(spool_path)
        report.pending = sp.close(compact=True, updates={"updatedAt": _now()})
    return report


def _load_client(kind: str) -> None:
    """Import what the sink of ``kind`` uses: nats-py (with aiohttp, ~0.3 s) for NATS."""
    if kind == "nats":
        import nats  # noqa: F401
        import nats.errors  # noqa: F401
        import nats.js.errors  # noqa: F401


def _fork_producer() -> bool:
    """Whether the export runs in a forked child: where ``os.fork`` exists, unless ``AEFGATE_WORKERS=0`` (everything
    in this process, as for the verification and the export)."""
    return hasattr(os, "fork") and os.environ.get("AEFGATE_WORKERS", "").strip() != "0"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def resume(spool_dir: str | os.PathLike[str], to: str | None = None, *, format: str | None = None,
           mode: str | None = None, batch: int | None = None, retries: int | None = None,
           timeout: float | None = None, create_stream: bool | None = None, window: int = DEFAULT_WINDOW,
           stdout: BinaryIO | None = None, nats_auth: Any = None) -> PublishReport:
    """Send the events a spool holds pending, to the destination and with the options it records (each one given
    here overrides it). The spool is updated as acknowledgements come, and compacted at the end: it then holds
    exactly the events still not acknowledged. ``nats_auth``: the NATS connection options; without them, those
    the spool recorded (file paths and a variable's name: the spool keeps no secret)."""
    root = Path(spool_dir)
    sp = Spool.open(root)
    try:
        meta = sp.meta
        rec = meta.get("options") or {}
        given = {"format": format, "mode": mode, "batch": batch, "retries": retries, "timeout": timeout,
                 "create_stream": create_stream}
        recorded = {"format": rec.get("format"), "mode": rec.get("mode"), "batch": rec.get("batch"),
                    "retries": rec.get("retries"), "timeout": rec.get("timeout"),
                    "create_stream": rec.get("createStream")}
        opts = {k: (given[k] if given[k] is not None else recorded[k] if recorded[k] is not None else DEFAULTS[k])
                for k in DEFAULTS}
        opts["create_stream"] = bool(opts["create_stream"])
        url = to if to is not None else meta.get("destination")
        dest = parse_destination(url)
        if nats_auth is None or not nats_auth.given():
            nats_auth = NatsAuth.from_json(meta.get("nats")) if dest.kind == "nats" else None
        dest = _with_auth(dest, nats_auth)
        if dest.kind not in ("nats", "http"):
            raise Refusal("PUB-2", "a spool is resumed to a nats:// or http(s):// destination", "option 'to'")
        if opts["create_stream"] and dest.kind != "nats":
            opts["create_stream"] = False if create_stream is None else opts["create_stream"]
        if opts["batch"] > 1 and dest.kind != "http" and batch is None:
            opts["batch"] = 1
        check_options(dest, **opts, spool=root, window=window)
        report = PublishReport(to=dest.display, kind=dest.kind, format=opts["format"], mode=opts["mode"],
                               run=meta.get("run"), resumed=str(root), spool=str(root))
        if to is None and meta.get("credentialsGiven"):
            report.warnings.append(
                "the spool keeps the destination without the credentials its URL carried: give them again (the "
                "destination URL with user:password@), or give the connection's credentials (a credentials file, an "
                "NKEY, a token)")
        if meta.get("state") != "closed" or sp.incomplete_tail:
            report.warnings.append(
                "the publish that made this spool did not finish: events after the last one spooled were never "
                "sent; publish the run again to send them (ids are deterministic: a consumer dedupes the rest)")
        t0 = time.perf_counter()

        def source(_sp):
            for i, raw in sp.pending():
                yield Item(i, jsonio.loads(raw))

        asyncio.run(_network(dest, opts, report, window, lambda _sp: _chunks(source(_sp)), lambda: sp, False))
        report.seconds = time.perf_counter() - t0
        report.pending = sp.close(compact=True, updates={"destination": dest.stored, "updatedAt": _now(),
                                                         "nats": dest.auth.to_json() if dest.auth else None})
        return report
    finally:
        sp.close()
