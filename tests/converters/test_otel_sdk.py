"""OpenTelemetry -> AEF on what the real OpenTelemetry SDK (1.45) sends (issue 27): ``Logger.emit(event_name=...)``
records (no ``timeUnixNano``: only the observed time), records with a time, label-only events, ``error.type`` events,
an event under a span that names no case, the legacy ``event.name`` attribute, a NaN score, a metric scored twice,
trial attributes; captured as the SDK's OTLP/HTTP exporter POSTs them to a capture server on loopback, then read as
protobuf bodies, as OTLP/JSON (one line, and pretty-printed with a BOM and CRLF), and with and without their
traces. The expected values are written here by hand from what the app emitted."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from pathlib import Path

import pytest

from aefgate.converters.otel.importer import Unplaceable, from_otel
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests.conftest import aefgate, one_json

T_GROUNDED = 1_700_000_000_250_000_000  # the one event given a time: 2023-11-14T22:13:20.25Z


class Capture:
    """An OTLP/HTTP endpoint on loopback that keeps every body it is sent and answers 200 (``{}`` partial
    success), or with ``reject`` a partial success rejecting that many records."""

    def __init__(self, reject: int = 0) -> None:
        self.bodies: list[tuple[str, str, bytes]] = []
        cap = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                cap.bodies.append((self.path, self.headers.get("Content-Type", ""), body))
                from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

                resp = ExportLogsServiceResponse()
                if reject and self.path.endswith("/v1/logs"):
                    resp.partial_success.rejected_log_records = reject
                    resp.partial_success.error_message = f"{reject} records not kept: test receiver"
                data = resp.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _emit_app(url: str) -> dict:
    """The app: one tracer, one logger, the SDK's batch processors and OTLP/HTTP exporters (protobuf)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "sdk-evals"})
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces")))
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=url + "/v1/logs")))
    tracer, logger = tp.get_tracer("evals"), lp.get_logger("evals")
    ev = "gen_ai.evaluation.result"

    def emit(attrs: dict, **kw) -> None:
        logger.emit(event_name=kw.pop("event_name", ev), attributes=attrs, **kw)

    with tracer.start_as_current_span("invoke_agent travel", attributes={"gen_ai.response.id": "resp-1",
                                                                         "gen_ai.agent.id": "agent-9"}) as sp:
        ctx = trace.set_span_in_context(sp)
        span_id = format(sp.get_span_context().span_id, "016x")
        trace_id = format(sp.get_span_context().trace_id, "032x")
    # under the span, naming no case: the conventions' preferred form (its case is the span's response id)
    emit({"gen_ai.evaluation.name": "Relevance", "gen_ai.evaluation.score.value": 4.0,
          "gen_ai.evaluation.score.label": "relevant"}, context=ctx)
    # a label that is not a state name and no value (the conventions allow it): unplaceable (OT-6)
    emit({"gen_ai.evaluation.name": "Toxicity", "gen_ai.evaluation.score.label": "not_toxic",
          "test.case.name": "case-2"})
    emit({"gen_ai.evaluation.name": "Groundedness", "gen_ai.evaluation.score.value": 0.5,
          "test.case.name": "case-2"}, timestamp=T_GROUNDED)
    emit({"gen_ai.evaluation.name": "Coherence", "error.type": "timeout", "test.case.name": "case-2"})
    emit({"gen_ai.evaluation.name": "Fluency", "gen_ai.evaluation.score.value": float("nan"),
          "test.case.name": "case-2"})  # non-finite: unplaceable ([ENC-3])
    emit({"gen_ai.evaluation.name": "Groundedness", "gen_ai.evaluation.score.value": 0.7,
          "test.case.name": "case-2"})  # the same metric twice for the case: the later one is unplaceable
    # the legacy form: the event's name as the event.name attribute, no eventName
    logger.emit(attributes={"event.name": ev, "gen_ai.evaluation.name": "Safety", "gen_ai.evaluation.score.value": 1.0,
                            "test.case.name": "case-3"})
    for trial, value in ((0, 1.0), (1, 0.0)):  # aefgate's trial attributes
        emit({"gen_ai.evaluation.name": "Acc", "gen_ai.evaluation.score.value": value, "test.case.name": "case-4",
              "aefgate.trial": trial})
    emit({"gen_ai.evaluation.name": "Acc", "gen_ai.evaluation.score.value": 0.5, "test.case.name": "case-4",
          "aefgate.trials.aggregation": "Mean"})
    tp.force_flush()
    lp.force_flush()
    tp.shutdown()
    lp.shutdown()
    return {"span_id": span_id, "trace_id": trace_id}


def _hex_ids(doc: dict) -> dict:
    """OTLP/JSON's ids: protobuf's JSON mapping writes bytes in base64, OTLP/JSON in lowercase hex."""
    for top, mid, leaf in (("resourceLogs", "scopeLogs", "logRecords"), ("resourceSpans", "scopeSpans", "spans")):
        for r in doc.get(top, []):
            for s in r.get(mid, []):
                for item in s.get(leaf, []):
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in item:
                            item[k] = base64.b64decode(item[k]).hex()
    return doc


@pytest.fixture(scope="module")
def sdk(tmp_path_factory) -> dict:
    """The SDK's bodies, once for the module: ``logs.pb``/``traces.pb`` (as sent), ``logs.jsonl`` (OTLP/JSON, one
    line), ``pretty.json`` (the same document pretty-printed, a BOM, CRLF line ends)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    d = tmp_path_factory.mktemp("sdk")
    cap = Capture()
    try:
        ids = _emit_app(cap.url)
    finally:
        cap.close()
    logs = [b for p, _c, b in cap.bodies if p == "/v1/logs"]
    traces = [b for p, _c, b in cap.bodies if p == "/v1/traces"]
    assert len(logs) == 1 and len(traces) == 1  # one batch each (force_flush)
    (d / "logs.pb").write_bytes(logs[0])
    (d / "traces.pb").write_bytes(traces[0])
    doc = _hex_ids(MessageToDict(ExportLogsServiceRequest.FromString(logs[0]), use_integers_for_enums=True))
    (d / "logs.jsonl").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    (d / "pretty.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(doc, indent=2).replace("\n", "\r\n").encode()
                                    + b"\r\n\r\n")
    return {"dir": d, **ids, "logs": logs[0], "traces": traces[0]}


def _lines(run: Path) -> list[dict]:
    return [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]


AT = "2099-01-01T00:00:00Z"  # after the events (the app emits them now)
LEFT_OUT = [("OT-6", "case-2", "Toxicity"), ("OT-6", "case-2", "Fluency"), ("OT-6", "case-2", "Groundedness")]


def test_without_the_option_the_refusal_names_case_and_evaluation(sdk: dict, tmp_path: Path):
    with pytest.raises(Unplaceable) as e:
        from_otel(sdk["dir"] / "logs.pb", tmp_path / "run", at=AT)
    assert e.value.rule == "OT-6" and (e.value.case, e.value.evaluation) == ("case-2", "Toxicity")
    assert "case 'case-2'" in e.value.message and "evaluation 'Toxicity'" in e.value.message
    assert not (tmp_path / "run").exists()


def test_every_placeable_event_becomes_a_line_with_its_time(sdk: dict, tmp_path: Path):
    skipped: list[dict] = []
    run = from_otel(sdk["dir"] / "logs.pb", tmp_path / "run", at=AT, skip_unplaceable=True, skipped=skipped)
    assert verify_run(run).outcome == "intact"
    assert [(x["rule"], x["case"], x["evaluation"]) for x in skipped] == LEFT_OUT
    assert [x["where"] for x in skipped] == [str(sdk["dir"] / "logs.pb")] * 3
    assert "not a state name" in skipped[0]["message"] and "finite" in skipped[1]["message"]
    assert "twice" in skipped[2]["message"]
    lines = {(x["caseId"], x["path"], x.get("trial"), "trials" in x): x for x in _lines(run)}
    # no case on the event: its parent span's id (no traces given); with traces, its response id (below)
    assert set(lines) == set([(sdk["span_id"], "Relevance", None, False), ("case-2", "Groundedness", None, False),
                                    ("case-2", "Coherence", None, False), ("case-3", "Safety", None, False),
                                    ("case-4", "Acc", 0, False), ("case-4", "Acc", 1, False),
                                    ("case-4", "Acc", None, True)])
    assert all("endedAt" in x for x in lines.values())  # the observed time where the event has none
    assert lines[("case-2", "Groundedness", None, False)]["endedAt"] == "2023-11-14T22:13:20.25Z"
    assert lines[("case-2", "Coherence", None, False)]["state"] == "error"
    assert lines[("case-2", "Coherence", None, False)]["reason"] == "timeout"
    assert lines[(sdk["span_id"], "Relevance", None, False)]["traceLink"] == {"traceId": sdk["trace_id"],
                                                                            "spanId": sdk["span_id"]}
    rollup = lines[("case-4", "Acc", None, True)]
    assert rollup["trials"]["n"] == 2 and rollup["trials"]["aggregation"] == "Mean"
    header = jsonio.read_json(run / "run.json")
    assert header["ext"]["aefgate.otel"] == {"unplaceable": 3, "observedTimes": 6}
    assert header["startedAt"] != AT and header["endedAt"] != AT  # from the events' times, not the clock
    assert {"startedAt", "endedAt"} <= set(header["imported"]["asserted"])


def test_a_parented_event_takes_its_parents_response_id(sdk: dict, tmp_path: Path):
    run = from_otel(sdk["dir"] / "logs.pb", tmp_path / "run", traces=[sdk["dir"] / "traces.pb"], at=AT,
                    skip_unplaceable=True)
    rel = [x for x in _lines(run) if x["path"] == "Relevance"]
    assert [x["caseId"] for x in rel] == ["resp-1"]
    assert jsonio.read_json(run / "run.json")["subject"]["telemetry"] == {"agentId": "agent-9",
                                                                         "serviceName": "sdk-evals"}


def test_json_lines_and_a_pretty_printed_document_import_like_the_body(sdk: dict, tmp_path: Path):
    # the layout of opentelemetry-proto's examples/logs.json: pretty-printed, times as JSON numbers, ids in
    # upper-case hex
    doc = json.loads((sdk["dir"] / "logs.jsonl").read_text())
    for rec in doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        for k in ("timeUnixNano", "observedTimeUnixNano"):
            if k in rec:
                rec[k] = int(rec[k])
        for k in ("traceId", "spanId"):
            if k in rec:
                rec[k] = rec[k].upper()
    (tmp_path / "proto-example.json").write_text(json.dumps(doc, indent=4) + "\n")
    files = [sdk["dir"] / "logs.pb", sdk["dir"] / "logs.jsonl", sdk["dir"] / "pretty.json",
             tmp_path / "proto-example.json"]
    runs = [from_otel(f, tmp_path / f"run-{i}", at=AT, skip_unplaceable=True, run_id="r") for i, f in enumerate(files)]
    first = (runs[0] / "results.ndjson").read_bytes()
    assert all((r / "results.ndjson").read_bytes() == first for r in runs[1:])
    assert all((r / "logs.otlp.jsonl").read_bytes() == (runs[0] / "logs.otlp.jsonl").read_bytes() for r in runs[:3])


def test_an_sdk_record_with_an_empty_body_imports_without_content(sdk: dict, tmp_path: Path):
    """The SDK writes ``body: {}`` on every record: no content, so --content-capture off imports them (a record with
    an explanation is still refused, [SEC-6])."""
    run = from_otel(sdk["dir"] / "logs.pb", tmp_path / "run", at=AT, skip_unplaceable=True, content_capture="off")
    assert jsonio.read_json(run / "run.json")["contentCapture"] == "off"
    assert len(_lines(run)) == 7
    doc = json.loads((sdk["dir"] / "logs.jsonl").read_text())
    rec = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert rec["body"] == {}
    rec["body"] = {"stringValue": "the prompt"}
    (tmp_path / "content.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(Refusal) as e:
        from_otel(tmp_path / "content.jsonl", tmp_path / "off", at=AT, skip_unplaceable=True, content_capture="off")
    assert e.value.rule == "content-capture"


def test_all_zero_ids_are_no_parent(sdk: dict, tmp_path: Path):
    doc = json.loads((sdk["dir"] / "logs.jsonl").read_text())
    for rec in doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        rec["traceId"], rec["spanId"] = "0" * 32, "0" * 16
        for a in rec["attributes"]:
            if a["key"] == "gen_ai.evaluation.name" and a["value"]["stringValue"] == "Relevance":
                rec["attributes"].append({"key": "test.case.name", "value": {"stringValue": "case-1"}})
                break
    (tmp_path / "zero.jsonl").write_text(json.dumps(doc) + "\n")
    run = from_otel(tmp_path / "zero.jsonl", tmp_path / "run", at=AT, skip_unplaceable=True)
    assert not any("traceLink" in x for x in _lines(run))
    assert {x["caseId"] for x in _lines(run)} == {"case-1", "case-2", "case-3", "case-4"}


def test_the_cli_lists_what_it_left_out(sdk: dict, tmp_path: Path):
    r = aefgate("import", "otel", sdk["dir"] / "logs.jsonl", tmp_path / "run", "--at", AT, "--json")
    assert r.returncode == 2 and r.stdout and not r.stderr.count("Traceback")
    err = one_json(r.stdout)["error"]
    assert err["rule"] == "OT-6" and "case 'case-2'" in err["message"] and "'Toxicity'" in err["message"]
    assert err["where"] == f"{sdk['dir'] / 'logs.jsonl'}:1"
    r = aefgate("import", "otel", sdk["dir"] / "logs.jsonl", tmp_path / "run", "--at", AT, "--json",
                "--skip-unplaceable")
    assert r.returncode == 0, r.stderr
    out = one_json(r.stdout)
    assert [(x["rule"], x["case"], x["evaluation"]) for x in out["leftOut"]] == LEFT_OUT
    assert out["results"] == 7
    for _rule, case, name in LEFT_OUT:
        assert f"case '{case}', evaluation '{name}'" in r.stderr
    assert "left out  3 evaluation events" in r.stderr


def test_events_of_several_suite_runs_are_one_run_each(sdk: dict, tmp_path: Path):
    """``test.suite.run.id`` separates runs as the receiver groups them (one rule): an input of two is refused
    naming both, unless option 'suite_run' picks one, whose id is then the run id."""
    doc = json.loads((sdk["dir"] / "logs.jsonl").read_text())
    recs = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    for i, rec in enumerate(recs):
        rec["attributes"].append({"key": "test.suite.run.id", "value": {"stringValue": "night-a" if i < 3
                                                                        else "night-b"}})
    (tmp_path / "two.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(Refusal) as e:
        from_otel(tmp_path / "two.jsonl", tmp_path / "run", at=AT, skip_unplaceable=True)
    assert e.value.rule == "OT-4" and "'night-a'" in e.value.message and "'night-b'" in e.value.message
    assert e.value.where == "option 'suite_run'"
    skipped: list[dict] = []
    run = from_otel(tmp_path / "two.jsonl", tmp_path / "a", at=AT, skip_unplaceable=True, suite_run="night-a",
                    skipped=skipped)
    assert jsonio.read_json(run / "run.json")["runId"] == "night-a"
    assert sorted(x["path"] for x in _lines(run)) == ["Groundedness", "Relevance"]  # Toxicity left out
    assert [x["evaluation"] for x in skipped] == ["Toxicity"]
    kept = [r for _, d in jsonio.iter_ndjson(run / "logs.otlp.jsonl") for rl in d["resourceLogs"]
            for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    assert len(kept) == 3
