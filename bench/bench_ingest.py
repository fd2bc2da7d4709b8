"""Ingest throughput: events/s from JetStream into sealed runs, by one node or a fleet of nodes.

    python bench/bench_ingest.py [--sessions 20] [--events 2000] [--max-inflight 256] [--nodes 1 2] [--shared-out]
                                 [--warm] [--idle 0.5]

Starts a nats-server (JetStream, loopback, the test suite's helper), publishes SESSIONS x EVENTS assessment events
(structured CloudEvents) with nats-py, then, for each count N of `--nodes` (side by side, on the same stream, each
count with its own durable consumer), starts N `aefgate serve ingest` processes at once on one durable, each with
its own `--out` (separate folders standing for separate hosts; `--idle`, 0.5 s by default), and times them from the
processes' start until every session's run is sealed in one of the outputs (journal, forwarding to the session's
owner, build, verify and seal included; process start-up and the idle wait too). Each sealed run is then verified,
and the sessions are checked to be sealed once, whole (no second generation). The last line is the throughput of
each count as a ratio to the first count's. With `--shared-out` the N processes share one `--out` instead (the
one-host setup, which the service before issue 6 also supported: the baseline for N processes, run with that
version on PYTHONPATH).

With `--warm` the events are not published beforehand: the N processes are started, and once all of them pull (the
durable's waiting pull requests), the events are published (a subject of their own per count) and the time runs
from the first publish until every run is sealed. Without it, the node whose fetch comes first takes the first event
of every session while it may be the only live node, so it is offered all the sessions (docs/design/ingest.md,
"Across hosts"): a start-up effect, which `--warm` leaves out (a fleet in its steady state).
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

from aefgate.aef.verifier import verify_run  # noqa: E402
from aefgate.formats.cloudevents import to_structured  # noqa: E402
from tests.bus._nats import NatsServer  # noqa: E402


def event(s: int, i: int) -> dict:
    return {"aep": "0.1", "id": f"e-{s}-{i}", "type": "assessment.evaluation.recorded", "time": "2026-10-02T14:00:00Z",
            "source": f"aep://bench/agent/a/session/s{s}", "agent": "a", "session": f"s{s}", "run": f"case-{i % 50}",
            "seq": i, "severity": "info", "capture": "metadata",
            "data": {"gen_ai.evaluation.name": f"m{i // 50}", "gen_ai.evaluation.score.value": (i % 100) / 100,
                     "evaluator": "bench"}}


async def _waiting(url: str, durable: str) -> int:
    nc = await nats.connect(url)
    try:
        return (await nc.jetstream().consumer_info("AEP", durable)).num_waiting
    except nats.js.errors.NotFoundError:
        return 0
    finally:
        await nc.close()


async def _publish(url: str, subject: str, payloads: list[bytes], create: bool = False) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    if create:
        await js.add_stream(name="AEP", subjects=["aep.>"])
    for body in payloads:
        await js.publish_async(subject, body)
    await js.publish_async_completed()
    await nc.close()


def run_fleet(url: str, base: Path, nodes: int, a, n: int, payloads: list[bytes]) -> float:
    outs = [base / f"host{0 if a.shared_out else i}" / "runs" for i in range(nodes)]
    subject = f"aep.warm{nodes}" if a.warm else "aep.bench"
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "aefgate", "serve", "ingest", "--from", f"{url}/{subject}",
                               "--durable", f"bench{nodes}", "--out", str(out), "--idle", str(a.idle), "--max-inflight",
                               str(a.max_inflight), "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
             for out in outs]
    outs = sorted(set(outs))
    if a.warm:
        while asyncio.run(_waiting(url, f"bench{nodes}")) < nodes:
            time.sleep(0.1)
        t0 = time.monotonic()
        asyncio.run(_publish(url, subject, payloads))

    def sealed() -> list[Path]:
        return [x for out in outs if out.exists() for x in out.iterdir() if not x.name.startswith(".")]

    while len(sealed()) < a.sessions:
        for p in procs:
            if p.poll() is not None:
                raise SystemExit(f"serve ingest exited with {p.returncode}")
        time.sleep(0.05)
    dt = time.monotonic() - t0
    for p in procs:
        p.send_signal(signal.SIGTERM)
    stats = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    runs = sealed()
    outcomes = {verify_run(r).outcome for r in runs}
    lines = sum(sum(1 for _ in open(r / "results.ndjson", "rb")) for r in runs)
    print(json.dumps({"nodes": nodes, "sessions": a.sessions, "events": n, "seconds": round(dt, 2),
                      "eventsPerSecond": round(n / dt), "runs": len(runs), "resultLines": lines,
                      "outcomes": sorted(outcomes), "runsPerNode": [s["runs"] for s in stats],
                      "forwarded": [s.get("forwarded", 0) for s in stats], "sharedOut": a.shared_out, "warm": a.warm,
                      "idle": a.idle,
                      "stats": stats}))
    if len(runs) != a.sessions or "." in "".join(r.name for r in runs):
        raise SystemExit("a session was not sealed once, whole")
    return n / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--max-inflight", type=int, default=256)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1])
    ap.add_argument("--shared-out", action="store_true")
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--idle", type=float, default=0.5)
    a = ap.parse_args(argv)
    n = a.sessions * a.events
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        srv = NatsServer(tmp / "nats").start()
        try:
            payloads = [to_structured(event(s, i)) for i in range(a.events) for s in range(a.sessions)]
            asyncio.run(_publish(srv.url, "aep.bench", [] if a.warm else payloads, create=True))
            rates = []
            for nodes in a.nodes:
                rates.append(run_fleet(srv.url, tmp / f"fleet-{nodes}", nodes, a, n, payloads))
            if len(rates) > 1:
                print(json.dumps({"ratios": {str(k): round(r / rates[0], 2) for k, r in zip(a.nodes, rates)}}))
        finally:
            srv.stop()
            shutil.rmtree(tmp / "nats", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
