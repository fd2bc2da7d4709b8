"""Ingest throughput: events/s from JetStream into sealed runs.

    python bench/bench_ingest.py [--sessions 20] [--events 2000] [--max-inflight 256]

Starts a nats-server (JetStream, loopback, the test suite's helper), publishes SESSIONS x EVENTS assessment events
(structured CloudEvents) with nats-py, then starts one `aefgate serve ingest` process (`--idle 0.5`) and times it from
process start until every session's run is sealed in the output folder (journal, build, verify and seal included;
process start-up and the idle wait too). Each sealed run is then verified.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nats  # noqa: E402

from aefgate.formats.aef.verifier import verify_run  # noqa: E402
from aefgate.formats.cloudevents import to_structured  # noqa: E402
from tests.bus._nats import NatsServer  # noqa: E402


def event(s: int, i: int) -> dict:
    return {"aep": "0.1", "id": f"e-{s}-{i}", "type": "assessment.evaluation.recorded", "time": "2026-10-02T14:00:00Z",
            "source": f"aep://bench/agent/a/session/s{s}", "agent": "a", "session": f"s{s}", "run": f"case-{i % 50}",
            "seq": i, "severity": "info", "capture": "metadata",
            "data": {"gen_ai.evaluation.name": f"m{i // 50}", "gen_ai.evaluation.score.value": (i % 100) / 100,
                     "evaluator": "bench"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--max-inflight", type=int, default=256)
    a = ap.parse_args(argv)
    n = a.sessions * a.events
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        srv = NatsServer(tmp / "nats").start()
        try:
            async def publish() -> None:
                nc = await nats.connect(srv.url)
                js = nc.jetstream()
                await js.add_stream(name="AEP", subjects=["aep.>"])
                for i in range(a.events):
                    for s in range(a.sessions):
                        await js.publish_async("aep.bench", to_structured(event(s, i)))
                await js.publish_async_completed()
                await nc.close()

            asyncio.run(publish())
            out = tmp / "out"
            t0 = time.monotonic()
            p = subprocess.Popen([sys.executable, "-m", "aefgate", "serve", "ingest", "--from", srv.url + "/aep.bench",
                                  "--durable", "bench", "--out", str(out), "--idle", "0.5", "--max-inflight",
                                  str(a.max_inflight), "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            while not (out.exists() and len([x for x in out.iterdir() if not x.name.startswith(".")]) == a.sessions):
                if p.poll() is not None:
                    raise SystemExit(f"serve ingest exited with {p.returncode}")
                time.sleep(0.05)
            dt = time.monotonic() - t0
            p.send_signal(signal.SIGTERM)
            stats = json.loads(p.communicate(timeout=60)[0])
            runs = [x for x in out.iterdir() if not x.name.startswith(".")]
            outcomes = {verify_run(r).outcome for r in runs}
            print(json.dumps({"sessions": a.sessions, "events": n, "seconds": round(dt, 2),
                              "eventsPerSecond": round(n / dt), "outcomes": sorted(outcomes), "stats": stats}))
        finally:
            srv.stop()
            shutil.rmtree(tmp / "nats", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
