"""Issue 28: every HTTP server reads a request's body whole, however it arrives on the wire.

The bodies are sent over a raw socket in many small writes (with ``Content-Length`` and with chunked encoding, the
chunk framing itself split), slowly (within the body timeout), and over the limit; and the real OpenTelemetry SDK
exports batches of 512, 2,048 and 8,192 records into ``serve otlp``. Real servers on loopback, in subprocesses:
``serve otlp`` and ``serve ingest --from http://`` (both read bodies through ``aefgate.net.http_server.read_body``).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aefgate.bus.ingest import run_name
from aefgate.aef.verifier import verify_run
from aefgate.formats.cloudevents import to_batch_http, to_binary_http, to_structured_http
from tests.bus._nats import free_port
from tests.bus.test_ingest import ENTRY, SPEC, AT, _events, reference, results, wait_for
from tests.bus.test_otlp_receiver import Service


# -- the wire ---------------------------------------------------------------------------------------------------

def _pieces(data: bytes, rng: random.Random, smallest: int, largest: int) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.randint(smallest, largest)
        out.append(data[i:i + n])
        i += n
    return out


def _chunked(body: bytes, rng: random.Random) -> bytes:
    """``body`` in chunked transfer coding, chunks of 1 to 3,000 bytes, then the last chunk."""
    out = bytearray()
    for part in _pieces(body, rng, 1, 3000):
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


def raw_post(port: int, path: str, headers: dict[str, str], body: bytes, *, chunked: bool = False,
             smallest: int = 1, largest: int = 1500, pause: float = 0.002, seed: int = 28,
             max_writes: int = 3000) -> tuple[int, dict[str, str], bytes]:
    """POST over a raw socket, the request (head and body, the chunk framing included) cut into writes of
    ``smallest``..``largest`` bytes with ``pause`` seconds between them (Nagle off: each write its own segment)."""
    rng = random.Random(seed)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}")
    wire = ("\r\n".join(head) + "\r\n\r\n").encode() + (_chunked(body, rng) if chunked else body)
    writes = _pieces(wire, rng, smallest, largest)
    assert len(writes) <= max_writes, f"{len(writes)} writes: keep the loop bounded"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for w in writes:
            s.sendall(w)
            if pause:
                time.sleep(pause)
        r = http.client.HTTPResponse(s)
        r.begin()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


# -- OTLP bodies ------------------------------------------------------------------------------------------------

def logs_body(suite: str, cases: int, pad: int = 0) -> bytes:
    """An OTLP/protobuf logs request: ``cases`` evaluation events of the suite run ``suite``."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(k: str, v) -> KeyValue:
        return KeyValue(key=k, value=AnyValue(double_value=v) if isinstance(v, float) else AnyValue(string_value=v))

    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend([kv("service.name", "gw-evals"), kv("test.suite.run.id", suite)])
    sl = rl.scope_logs.add()
    sl.scope.name = "gw"
    t = time.time_ns()
    for i in range(cases):
        r = sl.log_records.add()
        r.time_unix_nano = t + i
        r.event_name = "gen_ai.evaluation.result"
        r.attributes.extend([kv("gen_ai.evaluation.name", "Relevance"), kv("test.case.name", f"case-{i}"),
                             kv("gen_ai.evaluation.score.value", float(i % 5)),
                             kv("gen_ai.evaluation.explanation", f"why {i} " + "x" * pad)])
    return req.SerializeToString()


def _accepted(status: int, body: bytes) -> bool:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    return status == 200 and ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records == 0


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.ndjson").read_text().splitlines()]


@pytest.fixture(scope="module")
def otlp(tmp_path_factory):
    svc = Service(tmp_path_factory.mktemp("otlp") / "runs", "--max-body", "2000000").start()
    yield svc
    if svc.proc is not None and svc.proc.poll() is None:
        svc.proc.kill()
        svc.proc.wait(timeout=10)


PB = {"Content-Type": "application/x-protobuf"}


def _wait_runs(svc: Service, names: list[str], timeout: float = 120.0) -> None:
    """Wait for the runs to be sealed; on a timeout, stop the receiver and show what it said."""
    try:
        wait_for(lambda: all((svc.out / n).is_dir() for n in names), timeout=timeout, what=f"the runs {names}")
    except AssertionError:
        rc, _out, err = svc.stop()
        raise AssertionError(f"runs {sorted(p.name for p in svc.out.iterdir())}, not all of {names}; the receiver "
                             f"(exit {rc}) said:\n{err[-3000:]}") from None


def test_otlp_bodies_in_many_small_writes_are_read_whole(otlp):
    """The issue's reproducer (two writes 10 ms apart), tiny writes, ~1 KB writes, chunked with the chunk framing
    split: every request 200 with nothing rejected, every record in its sealed run."""
    sent = {}
    cases = [("two-writes", 40, dict(smallest=700, largest=700, pause=0.01)),  # head+start, then the rest
             ("tiny-writes", 20, dict(smallest=1, largest=16, pause=0.0005)),
             ("kb-writes", 300, dict(smallest=200, largest=1500, pause=0.002)),
             ("chunked-tiny", 20, dict(chunked=True, smallest=1, largest=16, pause=0.0005)),
             ("chunked-kb", 300, dict(chunked=True, smallest=200, largest=1500, pause=0.002)),
             ("gzip-chunked", 300, dict(chunked=True, smallest=50, largest=400, pause=0.002, gzip=True))]
    for suite, n, how in cases:
        body = logs_body(f"gw-{suite}", n, pad=40)
        headers = dict(PB)
        if how.pop("gzip", False):
            import gzip

            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        status, _h, answer = raw_post(otlp.port, "/v1/logs", headers, body, **how)
        assert _accepted(status, answer), (suite, status, answer)
        sent[f"gw-{suite}"] = n
    _wait_runs(otlp, list(sent))
    for suite, n in sent.items():
        run = otlp.out / suite
        assert verify_run(run).outcome == "intact"
        assert sorted(x["caseId"] for x in _lines(run)) == sorted(f"case-{i}" for i in range(n))


def test_otlp_a_slow_body_within_the_timeout_is_read(otlp):
    body = logs_body("gw-slow", 30)
    t0 = time.monotonic()
    # ~3 s for the body: 15 writes 0.2 s apart (the body timeout is 30 s)
    status, _h, answer = raw_post(otlp.port, "/v1/logs", PB, body, smallest=len(body) // 14 + 1,
                                  largest=len(body) // 14 + 1, pause=0.2)
    assert time.monotonic() - t0 > 2.5
    assert _accepted(status, answer)
    _wait_runs(otlp, ["gw-slow"])
    assert len(_lines(otlp.out / "gw-slow")) == 30


def test_otlp_an_over_limit_body_is_413_however_it_comes(otlp):
    big = logs_body("gw-big", 2, pad=2_100_000)  # over --max-body 2,000,000
    assert len(big) > 2_000_000
    status, _h, _b = raw_post(otlp.port, "/v1/logs", PB, big, smallest=60000, largest=60000, pause=0.0)
    assert status == 413  # announced by Content-Length
    status, _h, _b = raw_post(otlp.port, "/v1/logs", PB, big, chunked=True, smallest=60000, largest=60000,
                              pause=0.0)
    assert status == 413  # found while reading the chunks
    assert not (otlp.out / "gw-big").exists()
    assert otlp.get("/healthz")[0] == 200


SDK_BATCHES = r'''
import json, sys
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

url = sys.argv[1]
report = []


class Counting(OTLPLogExporter):
    def export(self, batch):
        result = super().export(batch)
        report.append({"records": len(batch), "result": result.name})
        return result


for size in map(int, sys.argv[2:]):
    resource = Resource.create({"service.name": "gw-sdk", "test.suite.run.id": f"gw-sdk-{size}"})
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(Counting(endpoint=url + "/v1/logs", timeout=60),
                                                        max_queue_size=size, max_export_batch_size=size,
                                                        schedule_delay_millis=600000))
    logger = lp.get_logger("evals")
    for i in range(size):
        logger.emit(event_name="gen_ai.evaluation.result", severity_number=SeverityNumber.INFO,
                    attributes={"gen_ai.evaluation.name": "Relevance", "gen_ai.evaluation.score.value": float(i % 5),
                                "test.case.name": f"case-{i}", "gen_ai.evaluation.explanation": f"because {i}"})
    lp.force_flush(120000)
    lp.shutdown()
print(json.dumps(report))
'''


def test_the_sdk_exports_batches_of_512_2048_and_8192_records(otlp):
    sizes = [512, 2048, 8192]
    p = subprocess.run([sys.executable, "-c", SDK_BATCHES, otlp.url, *map(str, sizes)], capture_output=True,
                       text=True, timeout=300, env=os.environ.copy())
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    # one request per batch, each acknowledged (the SDK does not retry a 400: a refused batch would be lost)
    assert report == [{"records": n, "result": "SUCCESS"} for n in sizes], (report, p.stderr[-2000:])
    _wait_runs(otlp, [f"gw-sdk-{n}" for n in sizes])
    for n in sizes:
        run = otlp.out / f"gw-sdk-{n}"
        assert verify_run(run).outcome == "intact"
        assert sorted(x["caseId"] for x in _lines(run)) == sorted(f"case-{i}" for i in range(n))


# -- serve ingest --from http:// ----------------------------------------------------------------------------------

def test_ingest_http_bodies_in_small_writes_chunked_and_slow(tmp_path):
    if not SPEC.is_dir():
        pytest.fail(f"the AEF spec examples are missing: {SPEC}")
    events = _events("aef-inspect/input")
    port = free_port()
    out = tmp_path / "out"
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", f"http://127.0.0.1:{port}",
                                 "--out", str(out), "--idle", "120", "--at-fixed", AT, "--json"],
                                stdout=subprocess.PIPE, stderr=err)
    try:
        def up() -> bool:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/healthz")
                return c.getresponse().status == 200
            except OSError:
                return False

        wait_for(up, what="the HTTP intake")
        assert len(events) >= 9
        requests = [(to_binary_http(e), dict(smallest=1, largest=8, pause=0.0005)) for e in events[:2]]
        requests += [(to_structured_http(e), dict(chunked=True, smallest=1, largest=12, pause=0.0005))
                     for e in events[2:4]]
        requests.append((to_batch_http(events[4:6]), dict(smallest=100, largest=900, pause=0.002)))
        requests.append((to_batch_http(events[6:8]), dict(chunked=True, smallest=100, largest=900)))
        slow = to_batch_http(events[8:])
        step = len(slow[1]) // 10 + 1
        requests.append((slow, dict(smallest=step, largest=step, pause=0.25)))  # ~3 s, the bound is 30 s
        accepted = 0
        for (headers, body), how in requests:
            status, _h, answer = raw_post(port, "/", dict(headers), body, **how)
            assert status == 202, (status, answer)
            accepted += json.loads(answer)["accepted"]
        assert accepted == len(events)
        # over the limit (32 MiB), chunked: 413, nothing journaled
        status, _h, answer = raw_post(port, "/", {"content-type": "application/json"}, b" " * (32 * 1024 * 1024 + 10),
                                      chunked=True, smallest=1 << 20, largest=1 << 20, pause=0.0)
        assert status == 413 and json.loads(answer)["error"]["rule"] == "INGEST-1"
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
    stats = json.loads(stdout)
    assert stats["dead"] == 0 and stats["events"] == len(events)
    name = run_name(events[0]["session"])
    assert verify_run(out / name).outcome == "intact"
    assert results(out / name) == results(reference(events, tmp_path))
