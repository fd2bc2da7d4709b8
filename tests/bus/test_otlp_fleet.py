"""Past one machine: two ``aefgate serve otlp --bus`` receivers and two ``aefgate serve ingest`` nodes (each with its
own ``--out``: separate hosts) on one real nats-server. The real OpenTelemetry SDK exports as applications behind a
load balancer would: a run's logs through one receiver, its spans through the other. What must hold
(docs/gateway.md, "Past one machine"): every run is sealed exactly once, in one output, with every record and span
sent, verifies ``intact``; a request sent again (to the other receiver) is stored once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nats

from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests.bus.test_ingest import (  # noqa: F401  (_no_service_left: the autouse fixture that kills leftovers)
    Serve, _no_service_left, wait_for,
)
from tests.bus.test_otlp_receiver import OTEL, Service, _lines, _spans
from tests.conftest import cli_env

SUBJECT = "otlp.evals"

APP = r'''
import sys
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

logs_url, traces_url, cases, suite = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
resource = Resource.create({"service.name": "fleet-evals", "test.suite.run.id": suite})
tp = TracerProvider(resource=resource)
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url + "/v1/traces")))
lp = LoggerProvider(resource=resource)
lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=logs_url + "/v1/logs")))
tracer, logger = tp.get_tracer("evals"), lp.get_logger("evals")
for i in range(cases):
    with tracer.start_as_current_span("invoke_agent fleet", attributes={"gen_ai.agent.id": "agent-9"}) as sp:
        with tracer.start_as_current_span("chat gpt-x"):
            pass
        ctx = trace.set_span_in_context(sp)
    for metric, value in (("Relevance", 4.0), ("Groundedness", 0.5)):
        logger.emit(event_name="gen_ai.evaluation.result", context=ctx, severity_number=SeverityNumber.INFO,
                    attributes={"gen_ai.evaluation.name": metric, "gen_ai.evaluation.score.value": value,
                                "test.case.name": f"case-{i}"})
    if i % 5 == 4:
        tp.force_flush()
        lp.force_flush()
tp.force_flush()
lp.force_flush()
tp.shutdown()
lp.shutdown()
'''


class BusReceiver(Service):
    """``aefgate serve otlp --bus`` (no ``--out``: the runs are the ingest fleet's)."""

    def __init__(self, bus: str, *extra: str) -> None:
        super().__init__(Path("/nonexistent"), *extra)
        self.bus = bus

    def start(self) -> "BusReceiver":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aefgate", "serve", "otlp", "--bus", self.bus, "--listen",
             f"127.0.0.1:{self.port}", "--metrics-listen", f"127.0.0.1:{self.mport}", "--json", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=cli_env())
        wait_for(lambda: self._healthy(), 30, "the receiver")
        return self

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(self.proc.stderr.read().decode())
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False


def _app(logs_url: str, traces_url: str, cases: int, suite: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", APP, logs_url, traces_url, str(cases), suite],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100"})


def _stream_count(url: str, subject: str) -> int:
    async def go() -> int:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            name = await js.find_stream_name_by_subject(subject)
            info = await js.stream_info(name, subjects_filter=subject)
            return int((info.state.subjects or {}).get(subject, 0))
        finally:
            await nc.close()
    return asyncio.run(go())


def _all_runs(outs: list[Path]) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for out in outs:
        if out.exists():
            for p in out.iterdir():
                if p.is_dir() and not p.name.startswith("."):
                    found.setdefault(p.name, []).append(p)
    return found


def test_two_receivers_and_two_ingest_nodes_seal_every_run_once_whole(nats_server, tmp_path: Path) -> None:
    bus = f"{nats_server.url}/{SUBJECT}"
    r1, r2 = BusReceiver(bus).start(), BusReceiver(bus).start()
    outs = [tmp_path / "host-a", tmp_path / "host-b"]
    nodes = [Serve(outs[i], f"{bus}", "--durable", "ingest", "--node", f"n{i}", idle=2.0) for i in range(2)]
    try:
        wait_for(lambda: all("consuming" in n.text() for n in nodes), 30, "the ingest nodes")
        # a load balancer in front: each suite's logs through one receiver, its spans through the other
        apps = [_app(r1.url, r2.url, 12, "suite-a"), _app(r2.url, r1.url, 8, "suite-b")]
        # the SDK sample (service.name travel-assistant-evals, no suite run id: grouped by service), its logs
        # request sent twice, to both receivers (an exporter retrying on another receiver): stored once
        for rx, name in ((r1, "traces-1"), (r2, "traces-2"), (r1, "logs-1"), (r2, "logs-2"), (r2, "logs-1")):
            status, _h, body = rx.post(f"/v1/{name.split('-')[0]}", (OTEL / f"{name}.pb").read_bytes())
            assert status == 200, body
        for p in apps:
            _out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        # what the receivers acknowledged, before any run is sealed: 20 cases x 2 events + 4 sample events
        m1, m2 = r1.metrics(), r2.metrics()
        logs = m1['aefgate_otlp_records_received_total{signal="logs"}'] + \
            m2['aefgate_otlp_records_received_total{signal="logs"}']
        spans = m1['aefgate_otlp_records_received_total{signal="traces"}'] + \
            m2['aefgate_otlp_records_received_total{signal="traces"}']
        assert logs == 20 * 2 + 2 * 2 + 2  # logs-1 counted twice: each receiver took it
        assert spans == 20 * 2 + 2 * 2
        # JetStream stored the retried request once (the same Nats-Msg-Id from either receiver)
        assert _stream_count(nats_server.url, SUBJECT) >= 3
        expect = {"suite-a": 12, "suite-b": 8, "otel~svc~travel-assistant-evals": 2}
        wait_for(lambda: set(_all_runs(outs)) >= {f"otel~{k}" if not k.startswith("otel~") else k for k in expect},
                 60, "the runs")
    finally:
        stats = [n.stop() for n in nodes]
        for rx in (r1, r2):
            rc, out, err = rx.stop()
            assert rc == 0, err
    found = _all_runs(outs)
    assert sorted(found) == ["otel~suite-a", "otel~suite-b", "otel~svc~travel-assistant-evals"]
    assert all(len(v) == 1 for v in found.values()), found  # sealed once, on one node
    assert sum(s["runs"] for s in stats) == 3
    assert sum(s["forwarded"] for s in stats) > 0  # records taken by one node for the other node's runs
    for suite, cases in (("suite-a", 12), ("suite-b", 8)):
        (run,) = found[f"otel~{suite}"]
        assert verify_run(run).outcome == "intact"
        lines = _lines(run)
        assert sorted((x["caseId"], x["path"]) for x in lines) == sorted(
            (f"case-{i}", m) for i in range(cases) for m in ("Relevance", "Groundedness"))
        assert len(_spans(run)) == cases * 2  # every span, sent through the other receiver, once
        assert {(x["traceLink"]["traceId"], x["traceLink"]["spanId"]) for x in lines} <= _spans(run)
        header = jsonio.read_json(run / "run.json")
        assert header["runId"] == suite and header["imported"]["from"] == "aefgate serve ingest (OTLP)"
        assert header["subject"]["ref"] == "agent:fleet-evals"
    (run,) = found["otel~svc~travel-assistant-evals"]
    assert verify_run(run).outcome == "intact"
    lines = _lines(run)
    assert sorted((x["caseId"], x["path"]) for x in lines) == [
        ("book-flight-basic", "Groundedness"), ("book-flight-basic", "Relevance"), ("refund-policy", "Groundedness"),
        ("refund-policy", "Relevance")]  # logs-1 twice, its events once
    assert len(_spans(run)) == 4
    # the same records as one receiver on one machine builds from the same requests
    local = Service(tmp_path / "local").start()
    try:
        for name in ("traces-1", "traces-2", "logs-1", "logs-2"):
            assert local.post(f"/v1/{name.split('-')[0]}", (OTEL / f"{name}.pb").read_bytes())[0] == 200
    finally:
        local.stop()
    (ref,) = local.runs()

    def no_id(xs: list[dict]) -> list[dict]:  # result ids are made of the run id: the service's and its sequence
        return [{k: v for k, v in x.items() if k != "resultId"} for x in xs]

    assert no_id(_lines(ref)) == no_id(lines)
    assert _spans(ref) == _spans(run)
    assert jsonio.read_json(ref / "run.json")["subject"] == jsonio.read_json(run / "run.json")["subject"]


def test_the_bus_receiver_refuses_what_it_cannot_publish(nats_server, tmp_path: Path) -> None:
    # --out or --key with --bus: the fleet's; a malformed --bus
    for extra in (["--bus", f"{nats_server.url}/{SUBJECT}", "--out", str(tmp_path / "o")],
                  ["--bus", "http://127.0.0.1:1/x"], ["--bus", f"{nats_server.url}/a.*"]):
        p = subprocess.run([sys.executable, "-m", "aefgate", "serve", "otlp", *extra, "--json"], capture_output=True,
                           text=True, env=cli_env(), timeout=60)
        assert p.returncode == 2, p.stderr
        assert json.loads(p.stdout)["error"]["rule"] == "CLI-2"
    assert not (tmp_path / "o").exists()
    # the bus goes away: requests are answered 503 + Retry-After (the exporter retries), never 200
    rx = BusReceiver(f"{nats_server.url}/{SUBJECT}", "--bus-timeout", "1").start()
    try:
        assert rx.post("/v1/logs", (OTEL / "logs-1.pb").read_bytes())[0] == 200
        nats_server.stop()
        status, headers, _b = rx.post("/v1/logs", (OTEL / "logs-2.pb").read_bytes())
        assert status == 503 and headers["retry-after"] == "1"
        assert rx.proc.poll() is None
    finally:
        rc, _out, err = rx.stop(signal.SIGTERM)
    assert rc == 0, err
