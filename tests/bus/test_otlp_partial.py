"""``aefgate serve otlp`` on what the real OpenTelemetry SDK sends (issue 27), over HTTP protobuf, HTTP JSON and
gRPC: each event the page cannot place is rejected alone (``partialSuccess``), counted per reason in the status
lines and ``/metrics``, and in the sealed run's ``ext``; the rest is sealed, each line with its time; a parented
event without a case takes its span's response id. ``export otel --to``: trials come back as trial lines, and a
receiver that rejects records makes the command exit 1."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests._shared import SAMPLES
from tests.bus.test_otlp_receiver import Service, _lines, _port
from tests.conftest import aefgate, one_json
from tests.converters.test_otel_sdk import Capture, sdk  # noqa: F401 - the module's SDK bodies (a fixture)


def _with_suite_run(doc: dict, run: str) -> dict:
    for rl in doc["resourceLogs"]:
        rl["resource"]["attributes"].append({"key": "test.suite.run.id", "value": {"stringValue": run}})
    return doc


def _wait_runs(svc: Service, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(svc.runs()) < n and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(scope="module")
def received(sdk, tmp_path_factory) -> dict:  # noqa: F811
    """One receiver, given the SDK's request three ways (one run each: the suite run id differs) and a request of
    three events with one NaN score; its runs, answers, metrics and stderr."""
    import grpc
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as lpb
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc as lgrpc

    gport = _port()
    svc = Service(tmp_path_factory.mktemp("rx") / "runs", "--grpc-listen", f"127.0.0.1:{gport}").start()
    answers = {}
    try:
        assert svc.post("/v1/traces", sdk["traces"])[0] == 200
        # HTTP protobuf: the body exactly as the SDK sent it (its resource names no suite run: grouped by service)
        status, _h, body = svc.post("/v1/logs", sdk["logs"])
        assert status == 200
        answers["protobuf"] = lpb.ExportLogsServiceResponse.FromString(body).partial_success
        # HTTP JSON: the same request in OTLP/JSON, another suite run
        doc = _with_suite_run(json.loads((sdk["dir"] / "logs.jsonl").read_text()), "json-run")
        status, _h, body = svc.post("/v1/logs", json.dumps(doc, indent=1).encode(), "application/json")
        assert status == 200
        answers["json"] = json.loads(body)["partialSuccess"]
        # gRPC: the SDK's request, another suite run
        req = lpb.ExportLogsServiceRequest.FromString(sdk["logs"])
        req.resource_logs[0].resource.attributes.add(key="test.suite.run.id").value.string_value = "grpc-run"
        with grpc.insecure_channel(f"127.0.0.1:{gport}") as ch:
            answers["grpc"] = lgrpc.LogsServiceStub(ch).Export(req, timeout=30).partial_success
        # one NaN among three scores
        three = {"resourceLogs": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "nan-app"}},
            {"key": "test.suite.run.id", "value": {"stringValue": "nan-run"}}]},
            "scopeLogs": [{"logRecords": [
                {"timeUnixNano": str(1_800_000_000_000_000_000 + i), "eventName": "gen_ai.evaluation.result",
                 "attributes": [{"key": "gen_ai.evaluation.name", "value": {"stringValue": "Score"}},
                                {"key": "test.case.name", "value": {"stringValue": f"c{i}"}},
                                {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": v}}]}
                for i, v in enumerate((0.5, "NaN", 1.0))]}]}]}
        body = ParseDict(three, lpb.ExportLogsServiceRequest()).SerializeToString()
        status, _h, resp = svc.post("/v1/logs", body)
        answers["nan"] = lpb.ExportLogsServiceResponse.FromString(resp).partial_success
        _wait_runs(svc, 4)
        metrics = svc.metrics()
    finally:
        rc, out, err = svc.stop()
    assert rc == 0, err
    return {"runs": {r.name: r for r in svc.runs()}, "answers": answers, "metrics": metrics, "err": err,
            "out": json.loads(out), "sdk": sdk}


def test_each_unplaceable_event_is_rejected_alone(received: dict):
    a = received["answers"]
    assert a["protobuf"].rejected_log_records == 3 and a["grpc"].rejected_log_records == 3
    assert int(a["json"]["rejectedLogRecords"]) == 3
    assert "[OT-6]" in a["protobuf"].error_message and "'Toxicity'" in a["protobuf"].error_message
    assert a["nan"].rejected_log_records == 1 and "finite" in a["nan"].error_message


def test_rejected_counts_per_reason_in_metrics_status_and_run(received: dict):
    m = received["metrics"]
    for reason in ("OT-6 label-without-value", "OT-6 non-finite", "OT-6 duplicate"):
        key = f'aefgate_otlp_records_rejected_total{{reason="{reason}",signal="logs"}}'
        assert m[key] == (4 if reason == "OT-6 non-finite" else 3), (key, m)
    assert received["out"]["rejected"] == 10
    assert received["out"]["rejectedByReason"] == {"OT-6 duplicate": 3, "OT-6 label-without-value": 3,
                                                   "OT-6 non-finite": 4}
    assert "10 events rejected (OT-6 duplicate: 3, OT-6 label-without-value: 3, OT-6 non-finite: 4)" in \
        received["err"]
    runs = received["runs"]
    assert sorted(runs) == ["grpc-run", "json-run", "nan-run", "sdk-evals-00000002"]
    for name, rejected in (("grpc-run", 3), ("json-run", 3), ("nan-run", 1), ("sdk-evals-00000002", 3)):
        ext = jsonio.read_json(runs[name] / "run.json")["ext"]["aefgate.otel"]
        assert ext["rejectedAtIntake"] == rejected, (name, ext)
        assert f"sealed    {name}:" in received["err"]


def test_the_rest_is_sealed_with_times_trials_and_the_parents_response_id(received: dict):
    sdk = received["sdk"]
    for name in ("grpc-run", "json-run", "sdk-evals-00000002"):
        run = received["runs"][name]
        assert verify_run(run).outcome == "intact"
        lines = _lines(run)
        assert len(lines) == 7 and all("endedAt" in x for x in lines)
        # no case on the event: its parent span's response id where the run holds the span (the receiver gives a
        # span to the first run of its trace), else the span's id
        with_spans = (run / "traces.otlp.jsonl").is_file()
        assert [x["caseId"] for x in lines if x["path"] == "Relevance"] == ["resp-1" if with_spans else sdk["span_id"]]
        assert [(x["path"], x.get("trial"), "trials" in x) for x in lines if x["caseId"] == "case-4"] == [
            ("Acc", 0, False), ("Acc", 1, False), ("Acc", None, True)]
    nan = _lines(received["runs"]["nan-run"])
    assert sorted(x["caseId"] for x in nan) == ["c0", "c2"]
    traces = received["runs"]["sdk-evals-00000002"] / "traces.otlp.jsonl"
    assert traces.is_file() and sdk["span_id"] in traces.read_text()  # the first run of the trace


def test_a_run_with_epochs_goes_out_and_the_receiver_seals_its_trials(tmp_path: Path):
    from aefgate.converters.inspect.importer import from_inspect

    run = from_inspect(SAMPLES / "inspect" / "epochs_mean.eval", tmp_path / "run", at="2026-12-01T00:00:00Z")
    orig = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
    svc = Service(tmp_path / "runs").start()
    try:
        p = aefgate("export", "otel", run, "--to", svc.url, "--json")
        assert p.returncode == 0, p.stderr
        sent = one_json(p.stdout)
        assert sent["logs"]["rejected"] == 0
        _wait_runs(svc, 1)
    finally:
        rc, _out, err = svc.stop()
    assert rc == 0, err
    (back,) = svc.runs()
    assert verify_run(back).outcome == "intact"
    lines = _lines(back)
    assert sum("trial" in x for x in lines) == sum(len(x.get("scores") or [None]) for x in orig if "trial" in x)
    assert sum("trials" in x for x in lines) == sum(len(x.get("scores") or [None]) for x in orig if "trials" in x)
    subject = jsonio.read_json(run / "run.json")["subject"]["ref"]
    # the run names no service: the events carry its subject's name, and the receiver names the run after it
    assert back.name.startswith(subject.partition(":")[2].replace("/", "_") + "-")


def test_export_to_a_receiver_that_rejects_exits_1_with_the_count(tmp_path: Path):
    from tests._shared import EXAMPLES

    cap = Capture(reject=2)
    try:
        p = aefgate("export", "otel", EXAMPLES / "aef-inspect" / "input", "--to", cap.url)
        pj = aefgate("export", "otel", EXAMPLES / "aef-inspect" / "input", "--to", cap.url, "--json")
    finally:
        cap.close()
    assert p.returncode == 1, p.stderr
    assert "error [OTLP-3]" in p.stderr and "rejected 2 of 9 logs records" in p.stderr
    assert "2 records not kept: test receiver" in p.stderr
    assert pj.returncode == 1, pj.stderr
    out = one_json(pj.stdout)  # one JSON value: what was sent, and the error
    assert out["logs"]["rejected"] == 2 and out["logs"]["records"] == 9
    assert out["error"]["rule"] == "OTLP-3" and "rejected 2 of 9 logs records" in out["error"]["message"]


def test_service_name_on_export(tmp_path: Path):
    from tests._shared import EXAMPLES

    out = tmp_path / "e.jsonl"
    p = aefgate("export", "otel", EXAMPLES / "aef-otel-aef-redteam" / "run", out, "--service-name", "red-team",
                "--name-from", "path")
    assert p.returncode == 0, p.stderr
    docs = [x for _, x in jsonio.iter_ndjson(out)]
    assert all(d["resourceLogs"][0]["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "red-team"}}] for d in docs)


def test_a_restarted_receiver_still_counts_what_it_rejected(tmp_path: Path):
    """The rejected counts are journaled with their request: after a SIGKILL, the run sealed by the restarted
    receiver still says how many events of its group were rejected."""
    import signal

    doc = {"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "restart-app"}},
        {"key": "test.suite.run.id", "value": {"stringValue": "restart-run"}}]},
        "scopeLogs": [{"logRecords": [
            {"observedTimeUnixNano": str(1_800_000_000_000_000_000 + i), "eventName": "gen_ai.evaluation.result",
             "attributes": [{"key": "gen_ai.evaluation.name", "value": {"stringValue": "Score"}},
                            {"key": "test.case.name", "value": {"stringValue": f"c{i}"}},
                            {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": v}}]}
            for i, v in enumerate((0.5, "NaN", "Infinity"))]}]}]}
    out = tmp_path / "runs"
    svc = Service(out).start()
    status, _h, body = svc.post("/v1/logs", json.dumps(doc).encode(), "application/json")
    assert status == 200 and int(json.loads(body)["partialSuccess"]["rejectedLogRecords"]) == 2
    svc.proc.kill()
    svc.proc.wait()
    svc = Service(out).start()
    rc, _out, err = svc.stop(signal.SIGTERM)
    assert rc == 0, err
    (run,) = svc.runs()
    assert jsonio.read_json(run / "run.json")["ext"]["aefgate.otel"] == {"rejectedAtIntake": 2, "observedTimes": 1}
    assert [x["caseId"] for x in _lines(run)] == ["c0"]
    assert _lines(run)[0]["endedAt"] == "2027-01-15T08:00:00Z"


def test_a_refused_group_names_its_kept_copy(tmp_path: Path):
    """A group the importer refuses as a whole (here two services under one suite run id, OT-4) is kept in
    .otlp/refused/, and the refusal names that copy (never the build's temporary file), on stderr too."""
    def resource(service: str) -> dict:
        return {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}},
                                            {"key": "test.suite.run.id", "value": {"stringValue": "mixed"}}]},
                "scopeLogs": [{"logRecords": [{"timeUnixNano": "1800000000000000000",
                                               "eventName": "gen_ai.evaluation.result", "attributes": [
                    {"key": "gen_ai.evaluation.name", "value": {"stringValue": "Score"}},
                    {"key": "test.case.name", "value": {"stringValue": service}},
                    {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": 1.0}}]}]}]}

    svc = Service(tmp_path / "runs").start()
    try:
        doc = {"resourceLogs": [resource("app-a"), resource("app-b")]}
        assert svc.post("/v1/logs", json.dumps(doc).encode(), "application/json")[0] == 200
    finally:
        rc, _out, err = svc.stop()
    assert rc == 0, err
    kept = tmp_path / "runs" / ".otlp" / "refused" / "mixed.jsonl"
    error = json.loads((kept.parent / "mixed.error.json").read_text())["error"]
    assert error["rule"] == "OT-4" and error["where"] == f"{kept}:2"  # the second resource, its own line
    assert f"refused   mixed: [OT-4] at {kept}:2:" in err and ".build-" not in err
