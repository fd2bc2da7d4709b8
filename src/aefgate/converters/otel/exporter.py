"""AEF -> OpenTelemetry (interop/opentelemetry.md, "AEF -> OpenTelemetry"; rules OT-1, OT-2, OT-3, OT-7, OT-8,
OT-9): a run that verifies -> one OTLP/JSON ``LogsData`` line per result line, one ``gen_ai.evaluation.result``
record per score (or one without a value for a line without scores).

- OT-8: only a run that verifies (``intact``, or ``unsealed``: a running run) is exported; else exit 1.
- OT-7: the sealed lines, in file order; overlays are not applied.
- OT-2: scope ``agenteval``; the resource holds ``service.name`` from ``subject.telemetry.serviceName`` (no resource
  without one).
- OT-1: a line without scores is named after the summary entry's metric at its path; a line whose name the summary
  does not give is refused, unless ``name_from="path"`` (aefgate's extension, docs/mappings/otel.md: the event is
  named after the line's path, which the import reads back as the path).
- OT-3: a run with ``contentCapture: off`` writes no explanation; else the line's ``reason``, or its reasoning blob's
  text.
- OT-9: refused as a whole: a reasoning blob that is not UTF-8 or over 4 MiB, a time ``timeUnixNano`` cannot hold.

Each record: ``timeUnixNano`` (the line's ``endedAt``, else ``startedAt``), ``eventName``, ``traceId``/``spanId``
(``traceLink``), then the attributes ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` (the state, RUN-14), ``error.type`` (``_OTHER`` for ``state: error``),
``gen_ai.evaluation.explanation``, ``test.case.name``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import msgspec

from aefgate.aef import jsonio
from aefgate.aef.onepass import LineMapper
from aefgate.aef.runfs import blob_path
from aefgate.converters.aigp import calibrated_models, grader_of, otel_attributes
from aefgate.converters.checks import verified
from aefgate.converters.otel.conventions import (
    CASE_NAME,
    ERROR_TYPE,
    EVALUATION_NAME,
    EVENT,
    EXPLANATION,
    SCORE_LABEL,
    SCORE_VALUE,
    SERVICE_NAME,
    TRIAL,
    TRIALS_AGGREGATION,
    TRIALS_K,
    is_evaluation,
)
from aefgate.errors import Refusal
from aefgate.formats.otlp import time_to_nanos
from aefgate.fsutil import atomic_file, check_file_destination, parents_for
from aefgate.net.otlp_http import send

__all__ = ["export_records", "send_otel", "to_otel"]

SCOPE = "agenteval"
MAX_REASONING = 4 * 1024 * 1024  # OT-9
MAX_NANOS = 2**64 - 1  # fixed64: up to 2554


def _s(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def _summary_names(summary: dict | None) -> dict[str, str]:
    """path -> the metric of the summary's (first) entry at that path (OT-1), from the summary.json the verification
    read (None: the run has none)."""
    out: dict[str, str] = {}
    for lane in (summary or {}).get("lanes", []):
        for e in lane.get("metrics", []):
            out.setdefault(e["path"], e["metric"])
    return out


def _explanation(root: Path, line: dict, content_on: bool, where: str) -> str | None:
    if not content_on:  # OT-3
        return None
    if line.get("reason"):
        return line["reason"]
    reasoning = line.get("reasoning")
    if not isinstance(reasoning, dict) or "blob" not in reasoning:
        return None
    hexd = reasoning["blob"].split(":", 1)[1]
    p = root / blob_path(hexd)
    if p.stat().st_size > MAX_REASONING:
        raise Refusal("OT-9", f"the reasoning blob is over {MAX_REASONING} bytes", where)
    data = p.read_bytes()
    if hashlib.sha256(data).hexdigest() != hexd:  # read before the verification hashes it: its bytes are its name
        raise Refusal("OT-8", "the run changed during the export", str(p), exit_code=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("OT-9", "the reasoning blob is not UTF-8: no explanation can hold it", where) from None


def _nanos(line: dict, where: str) -> str | None:
    t = line.get("endedAt") or line.get("startedAt")
    if t is None:
        return None
    try:
        n = time_to_nanos(t)
    except ValueError:
        raise Refusal("OT-9", f"{t} is before 1970: timeUnixNano cannot hold it", where) from None
    if n > MAX_NANOS:
        raise Refusal("OT-9", f"{t} is past 2554: timeUnixNano cannot hold it", where)
    return str(n)


def export_records(run_dir: str | os.PathLike[str], *, aigp: bool = False,
                   name_from: str = "summary", service_name: str | None = None,
                   service_from_subject: bool = False) -> Iterator[dict]:
    """The run's ``LogsData`` objects, one per result line (see the module docstring). The run is verified while
    they are made, in one pass (OT-8; :mod:`aefgate.aef.onepass`), and kept in an unnamed temporary file
    until the verdict: a refusal of the run or of any line (OT-9) comes from this call, before anything is
    yielded. With ``aigp``, each record also carries the line's AIGP grader as ``aigp.grader.type`` /
    ``aigp.grader.confidence`` (docs/mappings/aigp.md; off by default: the page maps ``annotator.kind`` to nothing,
    and its checked examples are written without them)."""
    spool = tempfile.TemporaryFile(prefix="aefgate-otel-")
    try:
        _one_pass(Path(run_dir), spool, aigp, name_from, service_name, service_from_subject)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise

    def records() -> Iterator[dict]:
        decode = msgspec.json.Decoder().decode
        with spool:
            for raw in spool:
                yield decode(raw)

    return records()


NAME_FROM = ("summary", "path")
def subject_service(run: dict) -> str | None:
    """A service name made of the run's subject: its ``ref`` without the kind prefix (``agent:travel`` ->
    ``travel``)."""
    ref = (run.get("subject") or {}).get("ref")
    if not isinstance(ref, str) or not ref:
        return None
    _kind, sep, rest = ref.partition(":")
    return rest if sep and rest else ref


def _one_pass(root: Path, out, aigp: bool, name_from: str = "summary", service_name: str | None = None,
              from_subject: bool = False) -> None:
    """Verify the run (OT-8) while its records are written to ``out`` (JSON lines)."""
    if name_from not in NAME_FROM:
        raise Refusal("CLI-2", f"option 'name_from' is summary or path, not {name_from!r}", "option 'name_from'")
    if service_name is not None and not service_name:
        raise Refusal("CLI-2", "option 'service_name' is not empty", "option 'service_name'")
    verified(root, "OT-8", mapper=_OtelMapper(root, out, aigp, name_from, service_name, from_subject))


class _OtelMapper(LineMapper):
    """Each result line's ``LogsData`` line (OT-1, OT-2, OT-3, OT-7, OT-9), made as the run is verified."""

    rule = "OT-8"

    def __init__(self, root: Path, out, aigp: bool, name_from: str = "summary", service_name: str | None = None,
                 from_subject: bool = False) -> None:
        super().__init__()
        self.root, self.out, self.aigp, self.name_from = root, out, aigp, name_from
        self.service_name, self.from_subject = service_name, from_subject

    def begin(self, run: dict, summary: dict | None) -> None:
        self.calibrated = calibrated_models(run)
        service = ((run.get("subject") or {}).get("telemetry") or {}).get("serviceName")
        if self.service_name is not None:
            service = self.service_name
        elif self.from_subject:  # aefgate's extension (send_otel): a receiver groups the run's events by service
            service = service or subject_service(run)
        self.content_on = run.get("contentCapture") != "off"
        self.names = _summary_names(summary)
        self.resource = {"resource": {"attributes": [_s(SERVICE_NAME, service)]}} if service else {}

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> bytes:
        return b"".join([jsonio.dump_line(self.record(lineno, line)) for lineno, line in lines])

    def put(self, payload: bytes) -> None:
        self.out.write(payload)

    def record(self, lineno: int, line: dict) -> dict:
        where = f"results.ndjson:{lineno}"
        head: dict[str, Any] = {}
        nanos = _nanos(line, where)
        if nanos is not None:
            head["timeUnixNano"] = nanos
        head["eventName"] = EVENT
        link = line.get("traceLink") or {}
        if link.get("traceId"):
            head["traceId"] = link["traceId"]
            if link.get("spanId"):
                head["spanId"] = link["spanId"]
        tail = [_s(SCORE_LABEL, line["state"])]
        if line["state"] == "error":
            tail.append(_s(ERROR_TYPE, "_OTHER"))
        expl = _explanation(self.root, line, self.content_on, where)
        if expl is not None:
            tail.append(_s(EXPLANATION, expl))
        tail.append(_s(CASE_NAME, line["caseId"]))
        if "trial" in line:  # aefgate's attributes for trials (docs/mappings/otel.md; the conventions have none)
            tail.append({"key": TRIAL, "value": {"intValue": str(line["trial"])}})
        elif "trials" in line:
            tail.append(_s(TRIALS_AGGREGATION, line["trials"]["aggregation"]))
            if line["trials"].get("k") is not None:
                tail.append({"key": TRIALS_K, "value": {"intValue": str(line["trials"]["k"])}})
        if self.aigp:
            tail.extend(otel_attributes(grader_of(line, self.calibrated)))
        records = []
        scores = line.get("scores") or []
        if scores:
            for s in scores:
                attrs = [_s(EVALUATION_NAME, s["metric"]),
                         {"key": SCORE_VALUE, "value": {"doubleValue": s["value"]}}]
                records.append({**head, "attributes": attrs + tail})
        else:
            name = self.names.get(line["path"])
            if name is None and self.name_from == "path":  # aefgate's extension (docs/mappings/otel.md)
                name = line["path"]
            if name is None:
                raise Refusal("OT-1", f"a line without scores at {line['path']!r}, and no summary entry names "
                                      "its metric: the event has no name (option 'name_from=path' names it "
                                      "after the line's path)", where)
            records.append({**head, "attributes": [_s(EVALUATION_NAME, name)] + tail})
        return {"resourceLogs": [{**self.resource, "scopeLogs": [{"scope": {"name": SCOPE}, "logRecords": records}]}]}


def to_otel(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], *, aigp: bool = False,
            name_from: str = "summary", service_name: str | None = None) -> Path:
    """The run's evaluation events as an OTLP/JSON logs file (one ``LogsData`` per line), written atomically:
    nothing appears at ``out_path`` unless every line was exported."""
    out = Path(out_path)
    check_file_destination(out, (run_dir,))
    with parents_for(out), atomic_file(out) as f:
        _one_pass(Path(run_dir), f, aigp, name_from, service_name)
    return out


def _own_logs(root: Path) -> Iterator[dict]:
    """The run's own ``logs.otlp.jsonl``, without its ``gen_ai.evaluation.result`` records (the export sends the
    lines' events instead: an imported run's events would otherwise arrive twice)."""
    p = root / "logs.otlp.jsonl"
    if not p.is_file():
        return
    for _, doc in jsonio.iter_ndjson(p):
        kept = []
        for rl in doc.get("resourceLogs") or ():
            scopes = []
            for sl in rl.get("scopeLogs") or ():
                recs = [r for r in sl.get("logRecords") or () if not is_evaluation(r)]
                if recs:
                    scopes.append({**sl, "logRecords": recs})
            if scopes:
                kept.append({**rl, "scopeLogs": scopes})
        if kept:
            yield {"resourceLogs": kept}


def send_otel(run_dir: str | os.PathLike[str], url: str, *, encoding: str = "protobuf",
              headers: dict[str, str] | None = None, policy: Any = None, aigp: bool = False,
              name_from: str = "summary", service_name: str | None = None) -> dict[str, Any]:
    """Send the run over OTLP/HTTP to ``url`` (the events' ``service.name``: ``service_name``, else the run's, else its
    subject's name): its evaluation events (as :func:`export_records` makes them) and the
    other records of its own ``logs.otlp.jsonl`` to ``/v1/logs``, its ``traces.otlp.jsonl`` to ``/v1/traces``.
    Nothing is sent before the run verified (OT-8) and every line was mapped (OT-1, OT-9): the events are built
    first. Returns what each signal's requests carried; ``OTLP-3`` (exit 1) when a request is given up or refused."""
    root = Path(run_dir)
    # a receiver groups the events of one run by their service: named after the subject when the run names none
    events = list(export_records(root, aigp=aigp, name_from=name_from, service_name=service_name,
                                 service_from_subject=True))  # every refusal before the first request
    logs = send(url, "logs", [*events, *_own_logs(root)], encoding=encoding, headers=headers, policy=policy)
    out: dict[str, Any] = {"logs": logs.to_json()}
    traces = root / "traces.otlp.jsonl"
    if traces.is_file():
        out["traces"] = send(url, "traces", (doc for _, doc in jsonio.iter_ndjson(traces)), encoding=encoding,
                             headers=headers, policy=policy).to_json()
    return out
