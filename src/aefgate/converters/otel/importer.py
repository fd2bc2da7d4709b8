"""OpenTelemetry -> AEF (interop/opentelemetry.md, "OpenTelemetry -> AEF"; rules OT-4, OT-5, OT-6, OT-8): OTLP logs
(and the traces they belong to) -> an imported AEF run, sealed ``ingest``.

Every log record is kept as it was (``logs.otlp.jsonl``, one ``LogsData`` per input line or request); every
``gen_ai.evaluation.result`` event becomes a result line, in input order:

- ``caseId``: ``test.case.name``, else ``gen_ai.response.id``; ``path`` and ``evaluator.id``: the metric name
  (``gen_ai.evaluation.name``); ``endedAt``: ``timeUnixNano``; ``traceLink``: the record's ``traceId``/``spanId``.
- the state (OT-5, OT-6): ``error.type`` -> ``error`` (the explanation, else the type, as ``reason``; the label
  ``error`` beside it is fine); a label that is a state name -> that state (a typed absence needs an explanation and
  no value; ``pending`` is refused); another label -> ``scored`` with the label kept (it needs a value); a value
  alone -> ``scored``. The explanation is the ``reason`` (cut to 4096 characters).
- refused (OT-6): no metric name, no case, the same metric twice for one case, nothing measured, and the other
  combinations above. Records that are not evaluation events are kept in ``logs.otlp.jsonl`` only.

The run header (OT-4): the run id, source, subject and target mode the caller gives (or their defaults), status
``completed``, ``startedAt``/``endedAt`` the earliest and latest event time (the conversion time when no event has
one), ``contentCapture`` ``on`` unless asked, all listed in ``imported.asserted``; ``subject.telemetry`` from the
resource's ``service.name`` (one service per run: two are refused) and the parent span's ``gen_ai.agent.id``;
``otel.schemaUrls`` from the schema URLs met. Each metric with a value is declared ``score``/``none``/``unbounded``.
Traces (``--traces``) are kept in ``traces.otlp.jsonl``. The run is verified before it is sealed (OT-8).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from aefgate.converters.common import check_import_options
from aefgate.converters.otel.common import TRIAL, TRIALS_AGGREGATION, TRIALS_K
from aefgate.converters.aigp import annotator_kind
from aefgate.errors import Refusal
from aefgate.formats.aef import jsonio
from aefgate.formats.aef.vocab import STATES, TYPED_ABSENCES
from aefgate.formats.otlp import attributes, iter_file, nanos_to_time, value_of
from aefgate.progress import task as progress_task

__all__ = ["from_otel", "input_files"]

EVENT = "gen_ai.evaluation.result"
MAX_REASON = 4096
MAX_LABEL = 64


def input_files(path: str | os.PathLike[str]) -> list[Path]:
    """A file, or the ``.jsonl``/``.json``/``.pb`` files of a folder in name order."""
    p = Path(path)
    if p.is_dir():
        files = sorted(q for q in p.iterdir() if q.is_file() and q.suffix.lower() in (".jsonl", ".json", ".pb"))
        if not files:
            raise Refusal("CLI-1", "the folder holds no .jsonl, .json or .pb file", str(p))
        return files
    if not p.exists():
        raise Refusal("CLI-1", "no such file", str(p))
    from aefgate.fsutil import input_file_problem

    problem = input_file_problem(p)
    if problem:
        raise Refusal("CLI-1", problem, str(p))
    return [p]


#: a typed absence's reason when the run keeps no content and the event has no explanation (docs/mappings/otel.md)
NO_CONTENT_REASON = "{state}: the event carries no explanation (the run keeps no content, OT-3)"


class _Events:
    """What the logs give, read one request at a time: each event's line (:meth:`read` yields them), and what the
    run's header needs (the earliest and latest time, the services, the schema URLs, the parent spans). Memory
    holds no line: a first pass checks every event and gathers the header's facts, a second writes the lines."""

    def __init__(self, content_on: bool) -> None:
        self.content_on = content_on
        self.events = 0
        self.seen: set[bytes] = set()  # 8-byte digests of (case, metric): OT-6's "the same metric twice"
        self.first_time: tuple[int, str] | None = None
        self.last_time: tuple[int, str] | None = None
        self.services: dict[str, str] = {}
        self.schema_urls: dict[str, None] = {}
        self.spans: set[tuple[str, str]] = set()  # the events' parent spans, when traces are given
        self.collect_spans = False

    def read(self, where: str, doc: dict) -> Iterator[dict[str, Any]]:
        for i, rl in enumerate(doc.get("resourceLogs") or ()):
            if not isinstance(rl, dict):
                raise Refusal("OTLP-1", "a resourceLogs entry is an object", where)
            res = attributes((rl.get("resource") or {}).get("attributes"))
            service = value_of(res.get("service.name"))
            if isinstance(rl.get("schemaUrl"), str) and rl["schemaUrl"]:
                self.schema_urls.setdefault(rl["schemaUrl"], None)
            for sl in rl.get("scopeLogs") or ():
                if not isinstance(sl, dict):
                    raise Refusal("OTLP-1", "a scopeLogs entry is an object", where)
                if isinstance(sl.get("schemaUrl"), str) and sl["schemaUrl"]:
                    self.schema_urls.setdefault(sl["schemaUrl"], None)
                for rec in sl.get("logRecords") or ():
                    if not isinstance(rec, dict):
                        raise Refusal("OTLP-1", "a logRecord is an object", where)
                    if not self.content_on and ("body" in rec or any(
                            k in attributes(rec.get("attributes")) for k in ("gen_ai.evaluation.explanation",))):
                        raise Refusal("content-capture", "contentCapture is off, and the record carries content (an "
                                      "explanation or a body): a run that keeps no content cannot hold it in "
                                      "logs.otlp.jsonl ([SEC-6])", where)
                    if rec.get("eventName") != EVENT:
                        continue
                    if isinstance(service, str) and service:
                        self.services.setdefault(service, where)
                        if len(self.services) > 1:
                            raise Refusal("OT-4", f"events of two services ({', '.join(self.services)}): one run "
                                                  "holds one service's events", where)
                    yield self._event(rec, where)

    def _event(self, rec: dict, where: str) -> dict[str, Any]:
        a = attributes(rec.get("attributes"))
        name = value_of(a.get("gen_ai.evaluation.name"))
        if not isinstance(name, str) or not name:
            raise Refusal("OT-6", "an evaluation event without gen_ai.evaluation.name", where)
        case = value_of(a.get("test.case.name"))
        if not isinstance(case, str) or not case:
            case = value_of(a.get("gen_ai.response.id"))
        if not isinstance(case, str) or not case:
            raise Refusal("OT-6", f"the event {name!r} names no case (neither test.case.name nor "
                                  "gen_ai.response.id)", where)
        trial, rollup = _trial_of(a, where)
        key = hashlib.blake2b(jsonio.dumps([case, name, trial, rollup is not None]), digest_size=8).digest()
        if key in self.seen:
            which = f" in its trial {trial}" if trial is not None else " (its rollup)" if rollup is not None else ""
            raise Refusal("OT-6", f"the metric {name!r} twice for the case {case!r}{which}", where)
        self.seen.add(key)
        value = value_of(a.get("gen_ai.evaluation.score.value"))
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise Refusal("OT-6", f"gen_ai.evaluation.score.value is a number, not {value!r}", where)
        label = value_of(a.get("gen_ai.evaluation.score.label"))
        if label is not None and not isinstance(label, str):
            raise Refusal("OT-6", "gen_ai.evaluation.score.label is a string", where)
        expl = value_of(a.get("gen_ai.evaluation.explanation"))
        if expl is not None and not isinstance(expl, str):
            raise Refusal("OT-6", "gen_ai.evaluation.explanation is a string", where)
        etype = value_of(a.get("error.type"))
        line: dict[str, Any] = {"caseId": case, "path": name, "evaluator": {"id": name}}
        # who graded, when the event says (docs/mappings/aigp.md): OpenTelemetry's proposed evaluator type (PR #359:
        # llm_judge, deterministic, human), else aefgate's aigp.grader.type (export otel --aigp); COMPOSITE is a
        # result tree's, not an annotator's, and is not read back
        kind = annotator_kind(value_of(a.get("gen_ai.evaluation.evaluator.type")))
        if kind is None and value_of(a.get("aigp.grader.type")) != "COMPOSITE":
            kind = annotator_kind(value_of(a.get("aigp.grader.type")))
        if kind is not None:
            line["annotator"] = {"kind": kind}
        score: dict[str, Any] | None = None
        if etype is not None:  # OT-5
            if value is not None:
                raise Refusal("OT-6", "error.type beside a value: an evaluation that ended in an error has no score",
                              where)
            if label not in (None, "error"):
                raise Refusal("OT-6", f"the label {label!r} beside error.type: only error can stand there", where)
            line["state"] = "error"
            line["reason"] = expl if expl else str(etype)
        elif label in STATES:
            if label == "pending":
                raise Refusal("OT-6", "the label pending: an imported run is closed, nothing in it is pending", where)
            if label in TYPED_ABSENCES:
                if value is not None:
                    raise Refusal("OT-6", f"the typed absence {label} with a value", where)
                if not expl and self.content_on:
                    raise Refusal("OT-6", f"the typed absence {label} without an explanation (its reason, RES-2)",
                                  where)
                if not expl:  # aefgate's extension: under contentCapture off the export writes none (OT-3)
                    line["reason"] = NO_CONTENT_REASON.format(state=label)
            line["state"] = label
            if value is not None:
                score = {"metric": name, "value": value}
        elif label is not None:
            if value is None:
                raise Refusal("OT-6", f"the label {label!r} is not a state name, and the event has no value", where)
            line["state"] = "scored"
            score = {"metric": name, "value": value, "label": label[:MAX_LABEL]}
        elif value is not None:
            line["state"] = "scored"
            score = {"metric": name, "value": value}
        else:
            raise Refusal("OT-6", "nothing measured: no label, no value and no error.type", where)
        if expl and "reason" not in line:
            line["reason"] = expl[:MAX_REASON]
        elif "reason" in line:
            line["reason"] = line["reason"][:MAX_REASON]
        if score is not None:
            line["scores"] = [score]
        try:
            t = nanos_to_time(rec.get("timeUnixNano"))
        except (TypeError, ValueError):
            raise Refusal("OTLP-1", f"timeUnixNano {rec.get('timeUnixNano')!r} is not a number", where) from None
        if t is not None:
            line["endedAt"] = t
            n = int(rec["timeUnixNano"])
            if self.first_time is None or n < self.first_time[0]:
                self.first_time = (n, t)
            if self.last_time is None or n > self.last_time[0]:
                self.last_time = (n, t)
        tid, sid = rec.get("traceId"), rec.get("spanId")
        if isinstance(tid, str) and tid:
            line["traceLink"] = {"traceId": tid.lower(), **({"spanId": sid.lower()} if isinstance(sid, str) and sid
                                                          else {})}
            if isinstance(sid, str) and sid and self.collect_spans:
                self.spans.add((tid.lower(), sid.lower()))
        line["_where"] = where
        if trial is not None:
            line["_trial"] = trial
        if rollup is not None:
            line["_rollup"] = rollup
        self.events += 1
        return line


def _trial_of(a: dict[str, Any], where: str) -> tuple[int | None, dict[str, Any] | None]:
    """The event's trial (``aefgate.trial``) or rollup (``aefgate.trials.aggregation``, ``aefgate.trials.k``)."""
    trial = value_of(a.get(TRIAL))
    agg = value_of(a.get(TRIALS_AGGREGATION))
    k = value_of(a.get(TRIALS_K))
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int) or trial < 0):
        raise Refusal("OT-6", f"{TRIAL} is a trial number (an integer, 0 or more), not {trial!r}", where)
    if agg is not None and not isinstance(agg, str):
        raise Refusal("OT-6", f"{TRIALS_AGGREGATION} is an aggregation name, not {agg!r}", where)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise Refusal("OT-6", f"{TRIALS_K} is an integer, 1 or more, not {k!r}", where)
    if trial is not None and agg is not None:
        raise Refusal("OT-6", f"{TRIAL} beside {TRIALS_AGGREGATION}: an event is a trial or a rollup", where)
    if agg is None:
        if k is not None:
            raise Refusal("OT-6", f"{TRIALS_K} without {TRIALS_AGGREGATION}", where)
        return trial, None
    return None, {"aggregation": agg, **({"k": k} if k is not None else {})}


def _add(b: Any, line: dict, at_event: str, trial: int | None, rollup: dict | None = None) -> None:
    """Write one event's line: a trial line, a rollup ([RES-8]) or a case's line; a refusal names the event."""
    try:
        if trial is not None:
            b.add_trial(line["caseId"], line, trial)
        elif rollup is not None:
            b.add_rollup(line["caseId"], line, **rollup)
        else:
            b.add_case(line["caseId"], line)
    except Refusal as e:
        raise Refusal(e.rule, f"{e.message} (the imported line: {e.where})", at_event, exit_code=e.exit_code) from None


def _agent_id(trace_files: list[Path], spans: set[tuple[str, str]]) -> str | None:
    """``gen_ai.agent.id`` of the first span an event is parented to that has one."""
    for f in trace_files:
        for _w, doc in iter_file(f, "traces"):
            for rs in doc.get("resourceSpans") or ():
                for ss in (rs or {}).get("scopeSpans") or ():
                    for sp in (ss or {}).get("spans") or ():
                        key = (str(sp.get("traceId", "")).lower(), str(sp.get("spanId", "")).lower())
                        if key in spans:
                            agent = value_of(attributes(sp.get("attributes")).get("gen_ai.agent.id"))
                            if isinstance(agent, str) and agent:
                                return agent
    return None


def from_otel(
    logs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    traces: Iterable[str | os.PathLike[str]] = (),
    run_id: str | None = None,
    source: str | None = None,
    subject: str | None = None,
    subject_kind: str = "agent",
    target_mode: str = "live",
    content_capture: str = "on",
    at: str | None = None,
    key: Any = None,
) -> Path:
    """Import OTLP logs (``.jsonl`` OTLP/JSON files, ``.pb`` request bodies, or folders of them) and, with
    ``traces``, their traces, as one AEF run at ``out_dir`` (absent or empty), sealed ``ingest`` at ``at`` (default
    now), signed with ``key``. See the module docstring for the mapping and its refusals."""
    from aefgate.formats.aef.builder import RunBuilder
    from aefgate.formats.aef.sealer import NotVerified
    from aefgate.formats.aef.signatures import signing_key_of
    from aefgate.formats.aef.verifier import in_one_process
    from aefgate.formats.aef.times import now, parse_time
    from aefgate.fsutil import check_destination

    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    for name, value in (("option 'subject'", subject), ("option 'run_id'", run_id), ("option 'from'", source)):
        if value is not None and not value:
            raise Refusal("CLI-2", f"{name} is not empty", name)
    signing_key = signing_key_of(key)  # before anything is written
    log_files = [f for p in ([logs] if isinstance(logs, (str, os.PathLike)) else logs) for f in input_files(p)]
    trace_files = [f for p in traces for f in input_files(p)]
    out = Path(os.path.abspath(out_dir))
    check_destination(out, inputs=tuple(log_files) + tuple(trace_files))

    def requests() -> Iterator[tuple[str, dict]]:
        for f in log_files:
            yield from iter_file(f, "logs")

    # pass 1: every event checked (every refusal before anything is written), the header's facts gathered
    ev = _Events(content_capture == "on")
    ev.collect_spans = bool(trace_files)
    digest = hashlib.sha256()  # of the records as values: the JSON and protobuf forms of a request give one run id
    with progress_task("check OTLP logs", len(log_files), "files") as bar:
        current = None
        for where, doc in requests():
            for _line in ev.read(where, doc):
                pass
            digest.update(jsonio.dump_line(doc))
            file = where.rsplit(":", 1)[0]
            if file != current:
                current = file
                bar.advance()
    if not ev.events:
        raise Refusal("OT-6", "no gen_ai.evaluation.result event to import", str(log_files[0]))
    service = next(iter(ev.services), None)
    agent = _agent_id(trace_files, ev.spans)
    rid = run_id or f"otel-{digest.hexdigest()[:16]}"
    ref = subject or (f"agent:{service}" if service else None)
    if ref is None:
        raise Refusal("OT-4", "no subject: the events name no service (resource service.name); give option 'subject'",
                      "option 'subject'")
    when = at or now()
    header: dict[str, Any] = {
        "runId": rid,
        "subject": {"ref": ref, "kind": subject_kind or "agent"},
        "execution": {"targetMode": target_mode},
        "startedAt": ev.first_time[1] if ev.first_time else when,
        "contentCapture": content_capture,
    }
    telemetry = {k: v for k, v in (("agentId", agent), ("serviceName", service)) if v}
    if telemetry:
        header["subject"]["telemetry"] = telemetry
    if ev.schema_urls:
        header["otel"] = {"schemaUrls": list(ev.schema_urls)}
    asserted = ["runId", "status", "subject.ref", "subject.kind", "execution.targetMode", "startedAt", "endedAt",
                "contentCapture"]
    origin = source or "OpenTelemetry OTLP"
    # pass 2: the records and the lines written, one request at a time
    lines = _Events(content_capture == "on")
    declared: set[str] = set()
    rollups: list[tuple[str, dict, dict]] = []
    try:
        with RunBuilder(out, header, metrics=[], imported_from=origin, asserted=asserted) as b, \
                progress_task("import OTLP events", ev.events, "events") as bar:
            for f in trace_files:
                for _w, doc in iter_file(f, "traces"):
                    b.add_otlp("traces", doc)
            for where, doc in requests():
                b.add_otlp("logs", doc)
                for line in lines.read(where, doc):
                    for s in line.get("scores", ()):
                        if s["metric"] not in declared:
                            declared.add(s["metric"])
                            b.declare_metric(s["metric"], "score", "none", "unbounded")
                    at_event = line.pop("_where")
                    trial, rollup = line.pop("_trial", None), line.pop("_rollup", None)
                    if rollup is not None:  # written once every trial is in (a run may list a rollup first)
                        rollups.append((at_event, line, rollup))
                        continue
                    _add(b, line, at_event, trial)
                    bar.advance()
            for at_event, line, rollup in rollups:
                _add(b, line, at_event, None, rollup)
                bar.advance()
            with in_one_process():  # the verification before the seal, in this process: flat memory
                ended = ev.last_time[1] if ev.last_time else when
                # no --at: sealed now, or at the run's end when the events' clock runs ahead of this one
                sealed = at or (ended if parse_time(ended) > parse_time(when) else when)
                b.finish("completed", ended_at=ended, summary={"lanes": []}, seal="ingest", sealed_at=sealed,
                         signing_key=signing_key)
    except NotVerified as e:
        raise e.as_refusal("OT-8", "the imported run") from None
    return out
