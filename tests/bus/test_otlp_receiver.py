"""``aefgate serve otlp`` as a process, driven by the real OpenTelemetry Python SDK and its OTLP/HTTP exporters (as
an application would), by raw requests (bad bodies, retries), and by ``aefgate export otel --to``."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests._shared import EXAMPLES, SAMPLES
from tests.conftest import aefgate, cli_env

OTEL = SAMPLES / "otel"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """One ``aefgate serve otlp`` process on free loopback ports."""

    def __init__(self, out: Path, *extra: str) -> None:
        self.out = out
        self.port, self.mport = _port(), _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = extra
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Service":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aefgate", "serve", "otlp", "--out", str(self.out), "--listen",
             f"127.0.0.1:{self.port}", "--metrics-listen", f"127.0.0.1:{self.mport}", "--idle", "1", "--json",
             *self.extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=cli_env())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"the receiver did not start: {self.proc.stderr.read1().decode()}")

    def get(self, path: str, port: int | None = None) -> tuple[int, bytes]:
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, path: str, body: bytes, ctype: str = "application/x-protobuf",
             headers: dict | None = None) -> tuple[int, dict, bytes]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("POST", path, body=body, headers={"Content-Type": ctype, **(headers or {})})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def metrics(self) -> dict[str, float]:
        status, body = self.get("/metrics", self.mport)
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line.startswith("aefgate_") and "_created" not in line:
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        assert self.proc is not None
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out.decode(), err.decode()

    def runs(self) -> list[Path]:
        return sorted(p for p in self.out.iterdir() if p.is_dir() and not p.name.startswith("."))


def _lines(run: Path) -> list[dict]:
    return [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]


def _spans(run: Path) -> set[tuple[str, str]]:
    out = set()
    if (run / "traces.otlp.jsonl").exists():
        for _, d in jsonio.iter_ndjson(run / "traces.otlp.jsonl"):
            for rs in d["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out |= {(sp["traceId"], sp["spanId"]) for sp in ss["spans"]}
    return out


SDK_APP = r'''
import sys
from opentelemetry import trace, context
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

url, cases = sys.argv[1], int(sys.argv[2])
resource = Resource.create({"service.name": "evals-app", "test.suite.run.id": sys.argv[3]})
if sys.argv[4:] == ["grpc"]:  # the OTLP/gRPC exporters, to the receiver's --grpc-listen
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GLog
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GSpan
    spans, logs = GSpan(endpoint=url, insecure=True), GLog(endpoint=url, insecure=True)
else:
    spans, logs = OTLPSpanExporter(endpoint=url + "/v1/traces"), OTLPLogExporter(endpoint=url + "/v1/logs")
tp = TracerProvider(resource=resource)
tp.add_span_processor(BatchSpanProcessor(spans))
lp = LoggerProvider(resource=resource)
lp.add_log_record_processor(BatchLogRecordProcessor(logs))
tracer = tp.get_tracer("evals")
logger = lp.get_logger("evals")
for i in range(cases):
    with tracer.start_as_current_span("invoke_agent travel", attributes={"gen_ai.agent.id": "agent-7",
                                                                           "gen_ai.operation.name": "invoke_agent"}) as sp:
        with tracer.start_as_current_span("chat gpt-x"):
            pass
        ctx = trace.set_span_in_context(sp)
    for metric, value, label in (("Relevance", 4.0, "relevant"), ("Groundedness", 0.5, None)):
        attrs = {"gen_ai.evaluation.name": metric, "gen_ai.evaluation.score.value": value,
                 "test.case.name": f"case-{i}", "gen_ai.evaluation.explanation": f"why {i}"}
        if label:
            attrs["gen_ai.evaluation.score.label"] = label
        logger.emit(event_name="gen_ai.evaluation.result", context=ctx, severity_number=SeverityNumber.INFO,
                    attributes=attrs)
tp.force_flush()
lp.force_flush()
tp.shutdown()
lp.shutdown()
'''


def _run_app(url: str, cases: int, suite_run: str, *extra: str) -> None:
    p = subprocess.run([sys.executable, "-c", SDK_APP, url, str(cases), suite_run, *extra], capture_output=True,
                       text=True,
                       timeout=120, env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100",
                                         "OTEL_BLRP_SCHEDULE_DELAY": "100"})
    assert p.returncode == 0, p.stderr


def test_the_sdk_exports_into_sealed_runs(tmp_path: Path):
    svc = Service(tmp_path / "runs").start()
    try:
        _run_app(svc.url, 3, "nightly-7")
        m = svc.metrics()
        assert m['aefgate_otlp_records_received_total{signal="logs"}'] == 6
        assert m['aefgate_otlp_records_received_total{signal="traces"}'] == 6  # 3 x (agent span + chat span)
        deadline = time.monotonic() + 20  # the run is sealed once its group is idle (1 s)
        while not svc.runs() and time.monotonic() < deadline:
            time.sleep(0.1)
        # the run folder is renamed into place just before the counter counts it: read the counter until then
        while svc.metrics().get("aefgate_runs_sealed_total") != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert svc.metrics().get("aefgate_runs_sealed_total") == 1
    finally:
        rc, out, err = svc.stop()
    assert rc == 0, err
    assert json.loads(out)["runs"] == 1
    (run,) = svc.runs()
    assert run.name == "nightly-7"
    assert verify_run(run).outcome == "intact"
    lines = _lines(run)
    assert sorted((x["caseId"], x["path"]) for x in lines) == sorted(
        (f"case-{i}", m) for i in range(3) for m in ("Relevance", "Groundedness"))
    assert all(x["traceLink"]["spanId"] for x in lines)
    assert {(x["traceLink"]["traceId"], x["traceLink"]["spanId"]) for x in lines} <= _spans(run)
    assert len(_spans(run)) == 6
    header = jsonio.read_json(run / "run.json")
    assert header["runId"] == "nightly-7" and header["subject"]["telemetry"] == {"agentId": "agent-7",
                                                                                   "serviceName": "evals-app"}


def test_sigkill_loses_no_acknowledged_record_and_seals_no_duplicate(tmp_path: Path):
    out = tmp_path / "runs"
    svc = Service(out).start()
    for name in ("traces-1", "logs-1"):
        status, _h, _b = svc.post(f"/v1/{name.split('-')[0]}", (OTEL / f"{name}.pb").read_bytes())
        assert status == 200  # acknowledged: in the journal
    svc.proc.kill()  # SIGKILL, mid-stream
    svc.proc.wait()
    svc = Service(out).start()
    for name in ("logs-1", "traces-2", "logs-2"):  # logs-1 again: the exporter's retry of an unanswered request
        status, _h, _b = svc.post(f"/v1/{name.split('-')[0]}", (OTEL / f"{name}.pb").read_bytes())
        assert status == 200
    rc, _out, err = svc.stop()
    assert rc == 0, err
    (run,) = svc.runs()  # one run, whole, written once
    assert verify_run(run).outcome == "intact"
    assert [(x["caseId"], x["path"]) for x in _lines(run)] == [
        ("book-flight-basic", "Relevance"), ("book-flight-basic", "Groundedness"), ("refund-policy", "Relevance"),
        ("refund-policy", "Groundedness")]
    assert len(_spans(run)) == 4
    svc = Service(out).start()  # a restart after the seal: nothing is written again ...
    for name in ("traces-1", "logs-1"):  # ... and the same service's next records are a new run, never dropped
        assert svc.post(f"/v1/{name.split('-')[0]}", (OTEL / f"{name}.pb").read_bytes())[0] == 200
    rc, out_, _err = svc.stop()
    assert rc == 0 and json.loads(out_)["runs"] == 1
    runs = svc.runs()
    assert len(runs) == 2 and run in runs
    (new,) = [r for r in runs if r != run]
    assert verify_run(new).outcome == "intact" and len(_lines(new)) == 2


def test_bad_bodies_get_their_status_and_never_stop_the_service(tmp_path: Path):
    from google.rpc import status_pb2
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    svc = Service(tmp_path / "runs", "--max-body", "200000").start()
    try:
        status, _h, body = svc.post("/v1/logs", b"\x0a\xff\xff garbage")
        assert status == 400
        assert status_pb2.Status.FromString(body).message  # the OTLP/HTTP error body
        status, _h, _b = svc.post("/v1/logs", b"{not json", "application/json")
        assert status == 400
        status, _h, _b = svc.post("/v1/logs", b"\x00" * 300_000)  # over --max-body
        assert status == 413
        bomb = gzip.compress(b"\x00" * (80 * 1024 * 1024))  # 80 MiB of zeros in ~80 KB
        status, _h, _b = svc.post("/v1/logs", bomb, headers={"Content-Encoding": "gzip"})
        assert status == 413
        # a request with one event the page cannot place: accepted, that record rejected (partial success)
        doc = json.loads((EXAMPLES / "otel-aef" / "refusals" / "pending.jsonl").read_text())
        good = json.loads((EXAMPLES / "otel-aef" / "input.jsonl").read_text().split("\n")[0])
        doc["resourceLogs"] += good["resourceLogs"]
        status, headers, body = svc.post("/v1/logs", json.dumps(doc).encode(), "application/json")
        assert status == 200 and headers["content-type"].startswith("application/json")
        ps = json.loads(body)["partialSuccess"]
        assert int(ps["rejectedLogRecords"]) == 1 and "OT-6" in ps["errorMessage"]
        status, _h, body = svc.post("/v1/logs", gzip.compress((OTEL / "logs-1.pb").read_bytes()),
                                    headers={"Content-Encoding": "gzip"})
        assert status == 200 and ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records == 0
        # a content type or an encoding OTLP/HTTP does not have: 415, nothing kept
        assert svc.post("/v1/logs", (OTEL / "logs-1.pb").read_bytes(), "text/plain")[0] == 415
        assert svc.post("/v1/logs", (OTEL / "logs-1.pb").read_bytes(), headers={"Content-Encoding": "br"})[0] == 415
        assert svc.post("/v1/logs", (OTEL / "logs-1.pb").read_bytes(), headers={"Content-Encoding": "gzip"})[0] == 400
        assert svc.get("/healthz")[0] == 200
        m = svc.metrics()
        assert m['aefgate_otlp_requests_total{signal="logs",status="400"}'] == 3  # with the false gzip
        assert m['aefgate_otlp_requests_total{signal="logs",status="415"}'] == 2
        assert m['aefgate_otlp_requests_total{signal="logs",status="413"}'] == 2
    finally:
        rc, out, err = svc.stop()
    assert rc == 0, err
    assert json.loads(out)["runs"] == 2  # the good event's service, and the sample's


def test_export_otel_into_the_receiver_which_signs(tmp_path: Path):
    keys = tmp_path / "keys"
    assert aefgate("keygen", keys, "--identity", "git:gateway@example.com").returncode == 0
    svc = Service(tmp_path / "runs", "--key", str(keys / "private.pem")).start()
    try:
        p = aefgate("export", "otel", EXAMPLES / "aef-inspect" / "input", "--to", svc.url, "--json")
        assert p.returncode == 0, p.stderr
    finally:
        rc, _out, err = svc.stop()
    assert rc == 0, err
    assert "sealed    support-api-" in err and "stopped   " in err  # the service's lines on stderr
    (run,) = svc.runs()
    assert verify_run(run).outcome == "intact"
    p = aefgate("verify", run, "--policy", keys / "policy.json", "--json")
    assert p.returncode == 0 and "git:gateway@example.com" in json.dumps(json.loads(p.stdout)["signedBy"])
    assert len(_lines(run)) == 9
    assert len(_spans(run)) == 2  # the run's own traces came along


def test_the_sdk_exports_over_grpc(tmp_path: Path):
    gport = _port()
    svc = Service(tmp_path / "runs", "--grpc-listen", f"127.0.0.1:{gport}").start()
    try:
        _run_app(f"127.0.0.1:{gport}", 2, "grpc-run", "grpc")
    finally:
        rc, out, err = svc.stop()
    assert rc == 0, err
    (run,) = svc.runs()
    assert run.name == "grpc-run" and verify_run(run).outcome == "intact"
    assert len(_lines(run)) == 4 and len(_spans(run)) == 4
