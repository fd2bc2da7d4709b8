"""The OTLP receiver's sustained rate, side by side with a receiver that discards.

    python bench/bench_otlp_receiver.py [--events 20000] [--repeat 3]

The client is the real OpenTelemetry SDK (``LoggerProvider`` + ``BatchLogRecordProcessor`` +
``OTLPLogExporter``, protobuf over HTTP, batches of 512), emitting ``--events`` ``gen_ai.evaluation.result``
records as an evaluation harness does; its time is from the first emit to the end of ``force_flush`` (every
record answered). The servers, each its own process on loopback: ``aefgate serve otlp`` (decode, check, journal,
fsync, answer; ``--idle`` long, so no run is sealed during the measure) and a discard receiver (aiohttp, reads the
body and answers 200 with an empty ExportLogsServiceResponse: the same HTTP stack, none of the work). Reports
events/s of each (best of ``--repeat``) and the ratio aefgate / discard, and aefgate's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CLIENT = r'''
import sys, time
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

url, n = sys.argv[1], int(sys.argv[2])
lp = LoggerProvider(resource=Resource.create({"service.name": "bench-evals"}))
lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=url + "/v1/logs"),
                                                    max_queue_size=n + 1, max_export_batch_size=512,
                                                    schedule_delay_millis=50))
logger = lp.get_logger("bench")
t0 = time.perf_counter()
for i in range(n):
    logger.emit(event_name="gen_ai.evaluation.result", severity_number=SeverityNumber.INFO,
                attributes={"gen_ai.evaluation.name": ("Relevance", "Groundedness")[i % 2],
                            "gen_ai.evaluation.score.value": (i % 50) / 10, "test.case.name": f"case-{i // 2}",
                            "gen_ai.evaluation.explanation": f"explanation {i}"})
lp.force_flush(600_000)
print(time.perf_counter() - t0)
'''

DISCARD = r'''
import sys
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
EMPTY = ExportLogsServiceResponse().SerializeToString()
async def logs(request):
    await request.read()
    return web.Response(body=EMPTY, content_type="application/x-protobuf")
async def healthz(request):
    return web.Response(text="ok")
app = web.Application(client_max_size=64 * 1024 * 1024)
app.router.add_post("/v1/logs", logs)
app.router.add_get("/healthz", healthz)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
'''


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str) -> None:
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not start")


def client(url: str, n: int) -> float:
    p = subprocess.run([sys.executable, "-c", CLIENT, url, str(n)], capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return float(p.stdout.strip().splitlines()[-1])


def peak_rss(pid: int) -> float:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    best = {"aefgate": None, "discard": None}
    rss = 0.0
    for _ in range(a.repeat):
        for name in ("aefgate", "discard"):
            work = Path(tempfile.mkdtemp(prefix="aefgate-bench-rx-"))
            p = port()
            url = f"http://127.0.0.1:{p}"
            if name == "aefgate":
                cmd = [sys.executable, "-m", "aefgate", "serve", "otlp", "--out", str(work / "runs"), "--listen",
                       f"127.0.0.1:{p}", "--idle", "3600"]
            else:
                cmd = [sys.executable, "-c", DISCARD, str(p)]
            srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_up(url)
                dt = client(url, a.events)
                if name == "aefgate":
                    rss = max(rss, peak_rss(srv.pid))
            finally:
                srv.kill()
                srv.wait()
                shutil.rmtree(work, ignore_errors=True)
            if best[name] is None or dt < best[name]:
                best[name] = dt
    ra, rd = a.events / best["aefgate"], a.events / best["discard"]
    print(f"{a.events} events, best of {a.repeat}")
    print(f"aefgate serve otlp : {best['aefgate']:6.2f} s  {ra:8.0f} events/s  peak RSS {rss:.0f} MB")
    print(f"discard receiver   : {best['discard']:6.2f} s  {rd:8.0f} events/s")
    print(f"ratio aefgate / discard: {ra / rd:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
