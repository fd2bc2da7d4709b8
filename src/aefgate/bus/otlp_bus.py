"""OTLP records on a JetStream bus: ``aefgate serve otlp --bus`` publishes them, the ``aefgate serve ingest`` fleet
assembles them into runs (docs/gateway.md, "Past one machine"; docs/design/ingest.md, "OTLP records").

**The messages.** A receiver with ``--bus nats://HOST:PORT/SUBJECT`` publishes

- each logs request on ``SUBJECT``, as OTLP/JSON (``Content-Type: application/json``), with the headers
  ``Aefgate-Otlp: logs``, ``Aefgate-Traces: <stream> <SUBJECT>.trace`` (where the spans are) and, with
  ``--subject``, ``Aefgate-Subject``; split below the server's ``max_payload`` when larger;
- each traces request split by trace id, on ``SUBJECT.trace.<trace id>`` (OTLP/JSON, ``Aefgate-Otlp: traces``):
  the spans of a trace are found by their subject when a run referencing it is sealed, on whichever node owns it.

Every message has ``Nats-Msg-Id`` = 32 hex digits of SHA-256 over the signal and the request body as received,
then the piece's number: an exporter's retry of a request (the same body) within the stream's duplicate window is
stored once. The receiver answers 200 only once JetStream acknowledged every message of the request.

**The assembly.** ``serve ingest`` reads the logs messages from its durable consumer on ``SUBJECT`` (the trace
subjects are not in its filter), checks each evaluation event on its own (OT-6), and journals the records by run:
the group of ``test.suite.run.id`` (on the record or its resource), else of ``service.name``: the journal names
``otel~<run id>`` and ``otel~svc~<service>`` (percent-encoded like a session's; ``~`` never occurs in a session's
name), which the fleet's ownership rules treat like sessions: one owner node each, the others forward to it. When
the owner seals a run (idle for ``--idle`` seconds, or at SIGTERM), it reads the records in the source stream's
order, drops repeats (the same piece twice: a retry past the duplicate window) and later evaluation events that
repeat a (case, metric) pair (OT-6; dead-lettered), fetches the spans of the events' traces from the stream (each
span once), and builds the run with the OpenTelemetry importer (:func:`aefgate.converters.otel.importer.from_otel`).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import unquote, urlsplit

from aefgate.bus.names import _token, run_name
from aefgate.bus.nats_connect import AuthFailed, connect
from aefgate.converters.otel.conventions import (
    RUN_ID_KEY,
    group_key,
    is_evaluation,
    run_id_part,
)
from aefgate.converters.otel.importer import EventCheck, from_otel
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.times import parse_time
from aefgate.formats.otlp import attributes, decode_body, is_null_id, value_of
from aefgate.masking import mask, mask_url

__all__ = [
    "Publisher",
    "journal_lines",
    "build_run",
    "has_spans",
    "group_key",
    "journal_name",
    "run_id_of",
    "split",
    "by_trace",
]

HDR_SIGNAL = "Aefgate-Otlp"
HDR_SUBJECT = "Aefgate-Subject"
HDR_TRACES = "Aefgate-Traces"
HDR_REJECTED = "Aefgate-Rejected"  # the request's evaluation events the receiver rejected, per group (JSON)
PREFIX = "otel~"
_TOP = {"logs": ("resourceLogs", "scopeLogs", "logRecords"), "traces": ("resourceSpans", "scopeSpans", "spans")}


# -- runs: keys, journal names, run ids ---------------------------------------------------------------------------


def journal_name(key: tuple[str, str]) -> str:
    return PREFIX + run_name(key[1]) if key[0] == "run" else PREFIX + "svc~" + run_name(key[1])


def run_id_of(key: tuple[str, str], gen: int) -> str:
    """The run id of a group's ``gen``-th run: the suite run id or the service name (made an id), ``.<gen>`` after
    the first (the folder's generation suffix)."""
    base = run_id_part(key[1])
    return base if gen == 1 else f"{base}.{gen}"


# -- splitting a request ------------------------------------------------------------------------------------------


def _items(doc: dict, signal: str) -> Iterator[tuple[dict, dict, dict]]:
    top, mid, leaf = _TOP[signal]
    for r in doc.get(top) or ():
        for s in r.get(mid) or ():
            for item in s.get(leaf) or ():
                yield r, s, item


def _assemble(triples: list[tuple[dict, dict, dict]], signal: str) -> dict:
    """A request of ``triples`` (resource, scope, item), consecutive items of one resource and scope together."""
    top, mid, leaf = _TOP[signal]
    out: list[dict] = []
    last_r = last_s = None
    for r, s, item in triples:
        if r is not last_r:
            out.append({**{k: v for k, v in r.items() if k != mid}, mid: []})
            last_r, last_s = r, None
        if s is not last_s:
            out[-1][mid].append({**{k: v for k, v in s.items() if k != leaf}, leaf: []})
            last_s = s
        out[-1][mid][-1][leaf].append(item)
    return {top: out}


def split(doc: dict, signal: str, limit: int) -> list[bytes]:
    """The request as OTLP/JSON pieces of at most ``limit`` bytes each (one piece when it fits); OTLP-2 when a
    single record is larger."""
    whole = jsonio.dumps(doc)
    if len(whole) <= limit:
        return [whole]
    pieces: list[bytes] = []
    chunk: list[tuple[dict, dict, dict]] = []
    size = 0
    for r, s, item in _items(doc, signal):
        n = len(jsonio.dumps(item)) + 256 + sum(len(jsonio.dumps(v)) for k, v in r.items() if k != _TOP[signal][1])
        if n > limit:
            raise Refusal("OTLP-2", f"a record of {n} bytes is over the bus's message size ({limit} bytes)", "body")
        if chunk and size + n > limit:
            pieces.append(jsonio.dumps(_assemble(chunk, signal)))
            chunk, size = [], 0
        chunk.append((r, s, item))
        size += n
    if chunk:
        pieces.append(jsonio.dumps(_assemble(chunk, signal)))
    return pieces


def by_trace(doc: dict) -> dict[str, dict]:
    """A traces request split by trace id (lowercase hex; spans without one are not kept: no event can name them)."""
    groups: dict[str, list] = {}
    for r, s, span in _items(doc, "traces"):
        tid = str(span.get("traceId") or "").lower()
        if re.fullmatch(r"[0-9a-f]{32}", tid):
            groups.setdefault(tid, []).append((r, s, span))
    return {tid: _assemble(t, "traces") for tid, t in groups.items()}


# -- the receiver's side: publishing ------------------------------------------------------------------------------


class Publisher:
    """The receiver's JetStream connection: ``nats://HOST:PORT/SUBJECT``. The stream holding ``SUBJECT`` is used
    when one exists (it must hold ``SUBJECT.trace.*`` too, or another stream must); else the stream
    ``AEFGATE_OTLP_<SUBJECT>`` is created with both subjects (file storage, limits retention, ``max_age`` 7 days,
    2-minute duplicate window)."""

    def __init__(self, url: str, *, timeout: float = 10.0, nats_auth: Any = None) -> None:
        u = urlsplit(url)
        self.subject = unquote(u.path.lstrip("/"))
        if u.scheme != "nats" or not u.hostname or not self.subject or any(c in self.subject for c in " *>"):
            raise Refusal("CLI-2", f"option 'bus' is nats://HOST:PORT/SUBJECT (a subject without wildcards), not "
                          f"{mask_url(url)!r}",
                          "option 'bus'")
        self.server = f"nats://{u.hostname}:{u.port or 4222}"
        self.url = url
        self.nats_auth = nats_auth  # bus.nats_connect.NatsAuth: TLS, credentials file, NKEY, token
        self.timeout = timeout
        self.nc: Any = None
        self.js: Any = None
        self.stream = ""
        self.trace_stream = ""
        self.limit = 1 << 20
        self.published = 0

    @property
    def trace_prefix(self) -> str:
        return f"{self.subject}.trace"

    async def connect(self) -> None:
        import nats.js.errors as jse  # lazy: nats-py is heavy, and only a bus service needs it
        from nats.js.api import (  # lazy: as above
            RetentionPolicy,
            StorageType,
            StreamConfig,
        )

        try:
            self.nc = await connect(self.url, self.nats_auth, timeout=self.timeout, connect_timeout=self.timeout,
                                    reconnect_time_wait=0.5, name="aefgate-serve-otlp")
        except AuthFailed as e:
            raise Refusal("OTLP-4", f"NATS authentication failed: {e}", "option 'bus'") from None
        except Exception as e:
            raise Refusal("OTLP-3", f"cannot connect to {self.server}: {mask(f'{type(e).__name__}: {e}')}",
                          "option 'bus'", exit_code=1) from None
        self.js = self.nc.jetstream(timeout=self.timeout)
        try:
            try:
                self.stream = await self.js.find_stream_name_by_subject(self.subject)
            except jse.NotFoundError:
                self.stream = f"AEFGATE_OTLP_{_token(self.subject, 100)}"
                await self.js.add_stream(StreamConfig(
                    name=self.stream, subjects=[self.subject, f"{self.trace_prefix}.*"], storage=StorageType.FILE,
                    retention=RetentionPolicy.LIMITS, max_age=7 * 24 * 3600.0, duplicate_window=120.0))
            try:
                self.trace_stream = await self.js.find_stream_name_by_subject(f"{self.trace_prefix}.0")
            except jse.NotFoundError:
                raise Refusal("INGEST-3", f"the stream {self.stream} holds {self.subject!r} but no stream holds "
                              f"{self.trace_prefix}.*, where the spans go: add that subject to a stream",
                              mask_url(self.url)) from None
        except Refusal:
            await self.close()
            raise
        except Exception as e:
            await self.close()
            raise Refusal("OTLP-3", f"JetStream at {self.server}: {mask(f'{type(e).__name__}: {e}')}",
                          "option 'bus'", exit_code=1) from None
        self.limit = max(4096, int(getattr(self.nc, "max_payload", 1 << 20) or (1 << 20)) - 4096)

    async def publish(self, signal: str, doc: dict, digest: str, subject: str | None = None,
                      rejected: dict[tuple[str, str], int] | None = None) -> None:
        """Publish a request's pieces and wait until JetStream acknowledged every one (an exception otherwise).
        ``rejected``: the evaluation events the intake rejected, per group (``Aefgate-Rejected`` on the first piece:
        the run that is built counts them)."""
        jobs: list[tuple[str, bytes, dict]] = []
        if signal == "logs":
            headers = {HDR_SIGNAL: "logs", "Content-Type": "application/json",
                       HDR_TRACES: f"{self.trace_stream} {self.trace_prefix}"}
            if subject:
                headers[HDR_SUBJECT] = subject
            for i, piece in enumerate(split(doc, "logs", self.limit)):
                extra = {HDR_REJECTED: jsonio.dumps([[k[0], k[1], n] for k, n in rejected.items()]).decode()} \
                    if rejected and i == 0 else {}
                jobs.append((self.subject, piece, {**headers, **extra, "Nats-Msg-Id": f"{digest}-{i}"}))
        else:
            headers = {HDR_SIGNAL: "traces", "Content-Type": "application/json"}
            for tid, part in sorted(by_trace(doc).items()):
                for i, piece in enumerate(split(part, "traces", self.limit)):
                    jobs.append((f"{self.trace_prefix}.{tid}", piece,
                                 {**headers, "Nats-Msg-Id": f"{digest}-{tid}-{i}"}))
        await asyncio.gather(*(self.js.publish(s, d, timeout=self.timeout, headers=h) for s, d, h in jobs))
        self.published += len(jobs)

    async def close(self) -> None:
        if self.nc is not None:
            try:
                await asyncio.wait_for(self.nc.drain(), 5)
            except Exception:
                pass
            self.nc = None


# -- the ingest side: journal records -----------------------------------------------------------------------------


def journal_lines(headers: dict[str, str], data: bytes, where: str, seq: int | None) -> dict[str, list[bytes]]:
    """A logs message from the bus as journal lines by run (journal name): ``{"k": digest of the piece, "w":
    where, "n": stream sequence, "j": journal name, "g": [kind, value], "o": OTLP/JSON piece, "t": where the
    spans are, "s": subject}``. Every evaluation event is checked on its own first (OT-6); a message is taken whole
    or not at all."""
    signal = headers.get(HDR_SIGNAL)
    if signal != "logs":
        raise Refusal("INGEST-1", f"{HDR_SIGNAL}: {signal!r}: the ingest reads logs messages; spans are read from "
                      "their trace subjects when a run is sealed", where)
    ctype = headers.get("Content-Type") or "application/json"
    doc = decode_body(data, "logs", content_type=ctype, where=where)
    check = EventCheck()
    groups: dict[tuple[str, str], list[tuple[dict, dict, dict]]] = {}
    for rl in doc.get("resourceLogs") or ():
        res = attributes((rl.get("resource") or {}).get("attributes"))
        service, res_run = value_of(res.get("service.name")), value_of(res.get(RUN_ID_KEY))
        for sl in rl.get("scopeLogs") or ():
            for rec in sl.get("logRecords") or ():
                if not isinstance(rec, dict):
                    raise Refusal("OTLP-1", "a logRecord is an object", where)
                if is_evaluation(rec):
                    check.line(rec, where)
                groups.setdefault(group_key(rec, res_run, service), []).append((rl, sl, rec))
    rejected: dict[tuple[str, str], int] = {}
    if headers.get(HDR_REJECTED):
        try:
            rejected = {(str(k), str(v)): int(n) for k, v, n in jsonio.loads(headers[HDR_REJECTED].encode(),
                                                                             top_object=False)}
        except (jsonio.JsonProblem, TypeError, ValueError):
            raise Refusal("INGEST-1", f"{HDR_REJECTED}: not a list of [kind, value, count]", where) from None
    for key in rejected:
        groups.setdefault(key, [])
    out: dict[str, list[bytes]] = {}
    traces = headers.get(HDR_TRACES)
    subject = headers.get(HDR_SUBJECT)
    for key, triples in groups.items():
        piece = _assemble(triples, "logs")
        name = journal_name(key)
        # a group with only rejected events: a piece of no record, told apart by the message it came in (a retry of
        # the message is the same, and kept once)
        k = hashlib.sha256(jsonio.dumps(piece) if triples else b"rejected\0" + data).hexdigest()[:32]
        rec: dict[str, Any] = {"k": k, "w": where, "j": name, "g": list(key), "o": piece}
        if rejected.get(key):
            rec["r"] = rejected[key]
        if seq is not None:
            rec["n"] = seq
        if traces:
            rec["t"] = traces
        if subject:
            rec["s"] = subject
        out.setdefault(name, []).append(jsonio.dumps(rec) + b"\n")
    return out


# -- the ingest side: building a run ------------------------------------------------------------------------------


def has_spans(traces: list[dict], docs: list[dict]) -> bool:
    """Whether every span an event is parented to is among ``traces`` (a traceLink must name a span of
    traces.otlp.jsonl, RUN-14)."""
    spans = {(str(sp.get("traceId", "")).lower(), str(sp.get("spanId", "")).lower())
             for d in traces for _r, _s, sp in _items(d, "traces")}
    for d in docs:
        for _r, _s, rec in _items(d, "logs"):
            if is_evaluation(rec) and not is_null_id(rec.get("spanId")) and not is_null_id(rec.get("traceId")):
                if (str(rec.get("traceId", "")).lower(), rec["spanId"].lower()) not in spans:
                    return False
    return True


@dataclass
class Built:
    events: int = 0
    dropped: list[tuple[Refusal, dict]] = field(default_factory=list)  # OT-6 repeats, with the record
    traces: bool = False
    warning: str = ""


def build_run(records: Iterable[dict], stage: Path, work: Path, *, gen: int, at: str | None, key: Any,
              target_mode: str | None, fetch_spans: Callable[[str, list[str]], list[dict]] | None) -> Built | None:
    """The run of a group's journal records (in stream order, repeats already dropped) at ``stage``. None when
    they hold no evaluation event (the group's other logs make no run)."""
    check = EventCheck()
    seen: set[bytes] = set()  # the marks of the results placed: a later event repeating one is OT-6
    built = Built()
    last: str | None = None  # the latest event time: a fixed seal time (--at-fixed) never precedes the run's end
    docs: list[dict] = []
    trace_ids: dict[str, None] = {}
    where_traces: str | None = None
    group: tuple[str, str] | None = None
    subject: str | None = None
    service: str | None = None
    intake_rejected = 0
    for rec in records:
        group = group or (rec["g"][0], rec["g"][1])
        intake_rejected += rec.get("r", 0)
        subject = subject or rec.get("s")
        where_traces = where_traces or rec.get("t")
        triples = []
        for rl, sl, lr in _items(rec["o"], "logs"):
            if is_evaluation(lr):
                try:
                    line = check.line(lr, rec["w"], seen=seen)
                except Refusal as r:  # a later event repeating a (case, metric): OT-6, dead-lettered
                    built.dropped.append((r, lr))
                    continue
                built.events += 1
                if "endedAt" in line and (last is None or parse_time(line["endedAt"]) > parse_time(last)):
                    last = line["endedAt"]
                if not is_null_id(lr.get("traceId")):
                    trace_ids.setdefault(lr["traceId"].lower(), None)
                if service is None:
                    s = value_of(attributes((rl.get("resource") or {}).get("attributes")).get("service.name"))
                    service = s if isinstance(s, str) and s else None
            triples.append((rl, sl, lr))
        if triples:
            docs.append(_assemble(triples, "logs"))
    if not built.events or group is None:
        return None
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs.jsonl"
    logs.write_bytes(b"".join(jsonio.dump_line(d) for d in docs))
    trace_files: list[Path] = []
    if trace_ids and where_traces and fetch_spans is not None:
        seen: set[tuple[str, str]] = set()
        traces: list[dict] = []
        for d in fetch_spans(where_traces, list(trace_ids)):
            keep = []
            for r, s, sp in _items(d, "traces"):
                k = (str(sp.get("traceId", "")).lower(), str(sp.get("spanId", "")).lower())
                if k not in seen:  # a span stored twice (a retry past the duplicate window) is kept once
                    seen.add(k)
                    keep.append((r, s, sp))
            if keep:
                traces.append(_assemble(keep, "traces"))
        if traces and has_spans(traces, docs):
            (work / "traces.jsonl").write_bytes(b"".join(jsonio.dump_line(d) for d in traces))
            trace_files = [work / "traces.jsonl"]
            built.traces = True
        elif traces:
            built.warning = "a span an event is parented to never arrived: the run is written without its traces"
    if at is not None and last is not None and parse_time(last) > parse_time(at):
        at = last
    from_otel(logs, stage, traces=trace_files, run_id=run_id_of(group, gen), source="aefgate serve ingest (OTLP)",
              subject=subject or f"agent:{service or 'otlp-receiver'}", target_mode=target_mode or "live", at=at,
              key=key, skip_unplaceable=True, rejected_before=intake_rejected + len(built.dropped))
    return built


async def fetch_spans(js: Any, where: str, trace_ids: list[str]) -> list[dict]:
    """The stored trace pieces of ``trace_ids`` (``where`` = ``"<stream> <subject prefix>"``), in stream order per
    trace, the traces in the order given."""
    import nats.js.errors as jse  # lazy: nats-py is heavy, and only a bus service needs it

    stream, _, prefix = where.partition(" ")
    out: list[dict] = []
    for tid in trace_ids:
        seq = 1
        while True:
            try:
                msg = await js.get_msg(stream, seq=seq, subject=f"{prefix}.{tid}", next=True)
            except jse.NotFoundError:
                break
            out.append(decode_body(msg.data or b"", "traces", content_type="application/json",
                                   where=f"nats:{stream}#{msg.seq}"))
            seq = msg.seq + 1
    return out
