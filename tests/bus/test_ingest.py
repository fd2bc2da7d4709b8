"""``aefgate serve ingest``: real nats-server and a real HTTP endpoint on loopback, the service in a subprocess.

The service runs through the typer app with the ``serve`` group registered by ``serve_cmds.register`` (ENTRY), as
``aefgate serve ingest`` does once the group is wired into ``aefgate.cli.app``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest

from aefgate.bus.ingest import run_name
from aefgate.converters.aep.exporter import export_events
from aefgate.converters.aep.importer import from_aep
from aefgate.aef.verifier import verify_run
from aefgate.formats.cloudevents import to_batch_http, to_binary_http, to_structured, to_structured_http
from tests.bus._nats import free_port

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "aef" / "interop" / "examples"
if not SPEC.is_dir():
    SPEC = Path("/work/shared/spec/aef/interop/examples")
AT = "2026-12-01T00:00:00Z"
ENTRY = ("import sys; from aefgate.cli import app as a, serve_cmds\n"
         "if 'serve' not in [g.name for g in a.app.registered_groups]: serve_cmds.register(a.app, a.aef_app)\n"
         "sys.exit(a.run())")


def _events(name: str) -> list[dict]:
    return list(export_events(SPEC / name))


@pytest.fixture(scope="module")
def session_a() -> list[dict]:
    if not SPEC.is_dir():
        pytest.fail(f"the AEF spec examples are missing: {SPEC}")
    return _events("aef-inspect/input")


@pytest.fixture(scope="module")
def session_b() -> list[dict]:
    return _events("otel-aef/run")


# -- helpers ----------------------------------------------------------------------------------------------------


_STARTED: list["Serve"] = []


@pytest.fixture(autouse=True)
def _no_service_left():
    """A failing test must not leave its service running: each one started is killed (by its pid) at teardown."""
    yield
    while _STARTED:
        s = _STARTED.pop()
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=10)
        s.err.close()


class Serve:
    def __init__(self, out: Path, source: str, *extra: str, idle: float = 1.0, log: Path | None = None):
        _STARTED.append(self)
        self.log = log or out.parent / f"serve-{time.time_ns()}.log"
        self.err = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, "serve", "ingest", "--from", source, "--out", str(out), "--idle", str(idle),
             "--at-fixed", AT, "--json", *extra],
            stdout=subprocess.PIPE, stderr=self.err)

    def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 30) -> dict | None:
        """Send ``sig`` (None: it was sent already) and wait for the process; its JSON stats unless killed."""
        if sig is not None:
            self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=timeout)
        self.err.close()
        if sig == signal.SIGKILL:
            return None
        assert self.proc.returncode == 0, self.log.read_text()
        return json.loads(out)

    def text(self) -> str:
        return self.log.read_text()


def wait_for(cond, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def runs(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) if out.exists() else []


def results(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "results.ndjson").read_text().splitlines()]


def run_hash(run: Path) -> str:
    return json.loads((run / "seal.json").read_text())["predicate"]["runHash"]


def reference(events: list[dict], tmp: Path) -> Path:
    src = tmp / f"ref-{time.time_ns()}.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    return from_aep(src, tmp / f"ref-{time.time_ns()}", at=AT)


def nats_message(event: dict, binary: bool) -> tuple[dict, bytes]:
    if binary:
        headers, body = to_binary_http(event)
        headers = dict(headers)
    else:
        headers, body = {"content-type": "application/cloudevents+json"}, to_structured(event)
    headers["Nats-Msg-Id"] = event["id"]
    return headers, body


async def _publish(url: str, messages: list[tuple[dict, bytes]], subject: str = "aep.assess",
                   stream: str | None = "AEP") -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    if stream:
        try:
            await js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            await js.add_stream(name=stream, subjects=["aep.>"])
    for headers, body in messages:
        await js.publish(subject, body, headers=headers)
    await nc.close()


def publish(url: str, messages: list[tuple[dict, bytes]], **kw) -> None:
    asyncio.run(_publish(url, messages, **kw))


def consumer(url: str, durable: str, stream: str = "AEP"):
    async def info():
        nc = await nats.connect(url)
        try:
            return await nc.jetstream().consumer_info(stream, durable)
        finally:
            await nc.close()

    return asyncio.run(info())


def acked(url: str, durable: str) -> int:
    try:
        return consumer(url, durable).ack_floor.stream_seq
    except nats.js.errors.NotFoundError:
        return 0


# -- tests ------------------------------------------------------------------------------------------------------


def test_run_name_is_safe_and_deterministic() -> None:
    assert run_name("01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10") == "01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10"
    assert run_name("a/b c.d") == "a%2Fb%20c%2Ed"
    assert run_name("..") == "%2E%2E" and run_name(".x") == "%2Ex"
    assert run_name("é") == "%C3%A9"
    long = run_name("x" * 1000)
    assert len(long) <= 200 and long == run_name("x" * 1000) and long != run_name("x" * 999)


def test_nats_ingest_gives_the_run_from_aep_gives(nats_server, tmp_path, session_a) -> None:
    publish(nats_server.url, [nats_message(e, binary=i % 2 == 1) for i, e in enumerate(session_a)])
    out = tmp_path / "out"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest")
    name = run_name(session_a[0]["session"])
    wait_for(lambda: name in runs(out), what="the sealed run")
    stats = serve.stop()
    assert runs(out) == [name]
    v = verify_run(out / name)
    assert v.outcome == "intact", v.problems
    ref = reference(session_a, tmp_path)
    assert results(out / name) == results(ref)
    run = json.loads((out / name / "run.json").read_text())
    assert run["imported"]["from"] == "aep 0.1 (cloudevents)"
    assert stats["events"] == 9 and stats["runs"] == 1 and stats["dead"] == 0
    assert not list((out / ".journal").iterdir())  # sealed: the journal is gone
    info = consumer(nats_server.url, "ingest")
    assert info.num_ack_pending == 0 and info.num_pending == 0


def test_sigkill_mid_session_and_restart_gives_the_same_run(nats_server, tmp_path, session_a) -> None:
    msgs = [nats_message(e, binary=i % 2 == 0) for i, e in enumerate(session_a)]
    name = run_name(session_a[0]["session"])
    out = tmp_path / "out"
    publish(nats_server.url, msgs[:5])  # the first five events
    first = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--max-inflight", "2",
                  "--ack-wait", "1", idle=4.0)
    wait_for(lambda: acked(nats_server.url, "ingest") >= 5, what="five acks")
    journal = out / ".journal" / f"{name}.jsonl"
    assert len(journal.read_text().splitlines()) == 5  # acknowledged only once in the journal
    first.stop(signal.SIGKILL)  # a crash mid-session
    assert runs(out) == []
    # the rest, and three redeliveries of events already taken (new message ids: the stream keeps them)
    again = [(dict(h, **{"Nats-Msg-Id": h["Nats-Msg-Id"] + "-again"}), b) for h, b in msgs[:3]]
    publish(nats_server.url, msgs[5:] + again)
    second = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--max-inflight", "2",
                   "--ack-wait", "1", idle=4.0)
    wait_for(lambda: name in runs(out), what="the sealed run after the restart")
    stats = second.stop()
    assert runs(out) == [name]  # one run: no second generation from the redeliveries
    assert stats["duplicates"] == 3
    assert verify_run(out / name).outcome == "intact"

    # the uninterrupted run of the same events (the same stream, its own durable and output)
    ref_out = tmp_path / "uninterrupted"
    ref = Serve(ref_out, nats_server.url + "/aep.assess", "--durable", "uninterrupted")
    wait_for(lambda: name in runs(ref_out), what="the uninterrupted run")
    ref.stop()
    assert len(results(out / name)) == len(session_a)
    assert results(out / name) == results(ref_out / name)
    assert run_hash(out / name) == run_hash(ref_out / name)
    assert (out / name / "run.json").read_bytes() == (ref_out / name / "run.json").read_bytes()


def test_two_processes_share_one_durable_consumer(nats_server, tmp_path, session_a, session_b) -> None:
    messages = []
    for i in range(max(len(session_a), len(session_b))):  # the two sessions interleaved
        for evs in (session_a, session_b):
            if i < len(evs):
                messages.append(nats_message(evs[i], binary=i % 2 == 0))
    publish(nats_server.url, [])  # the stream exists before the consumers bind
    out = tmp_path / "out"
    args = ("--durable", "shared", "--max-inflight", "1")
    one = Serve(out, nats_server.url + "/aep.assess", *args, idle=2.0)
    two = Serve(out, nats_server.url + "/aep.assess", *args, idle=2.0)

    def waiting() -> int:
        try:
            return consumer(nats_server.url, "shared").num_waiting
        except nats.js.errors.NotFoundError:
            return 0

    wait_for(lambda: waiting() >= 2, what="both processes pulling")
    publish(nats_server.url, messages)
    names = sorted(run_name(s[0]["session"]) for s in (session_a, session_b))
    wait_for(lambda: runs(out) == names, timeout=60, what="both runs")
    s1, s2 = one.stop(), two.stop()
    assert runs(out) == names  # no second generation: the sessions were sealed once
    assert s1["events"] + s2["events"] == len(messages)  # every event taken once overall
    assert s1["received"] > 0 and s2["received"] > 0, (s1, s2)  # the load was shared
    assert s1["runs"] + s2["runs"] == 2
    for evs in (session_a, session_b):
        run = out / run_name(evs[0]["session"])
        assert verify_run(run).outcome == "intact"
        assert results(run) == results(reference(evs, tmp_path))


def test_malformed_nats_messages_are_dead_lettered_and_acked(nats_server, tmp_path, session_a) -> None:
    good = [nats_message(e, binary=False) for e in session_a]
    wrong_type = dict(session_a[0], type="agent.started", id="x-1", data={})
    no_session = {k: v for k, v in session_a[1].items() if k != "session"}
    bad = [
        ({}, b"not json at all"),
        ({"content-type": "application/cloudevents+json"}, b'{"specversion": "1.0"}'),  # not a valid CloudEvent
        ({}, json.dumps(wrong_type).encode()),  # AEP, not an assessment
        ({}, json.dumps(no_session).encode()),  # not a valid AEP event
        ({}, b"[1, 2]"),  # neither AEP nor CloudEvents
        ({"ce-specversion": "1.0", "ce-id": "x", "ce-source": "s", "ce-type": "dev.aep.assessment.evaluation.recorded"},
         b"{}"),  # binary mode without the AEP attributes
        ({}, b"\xff\xfe"),
    ]
    mixed = good[:3] + bad[:4] + good[3:6] + bad[4:] + good[6:]
    publish(nats_server.url, mixed)
    out = tmp_path / "out"
    dead = tmp_path / "dead.jsonl"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--dead-letter", str(dead),
                  "--max-inflight", "4")
    name = run_name(session_a[0]["session"])
    wait_for(lambda: name in runs(out), what="the sealed run")
    stats = serve.stop()
    assert stats["dead"] == len(bad) and stats["events"] == len(good)
    records = [json.loads(ln) for ln in dead.read_text().splitlines()]
    assert len(records) == len(bad)
    assert all(r["reason"] and r["rule"] and r["where"].startswith("nats:AEP#") and "message" in r for r in records)
    assert "bodyBase64" in records[-1]["message"]
    assert results(out / name) == results(reference(session_a, tmp_path))
    info = consumer(nats_server.url, "ingest")
    assert info.num_ack_pending == 0 and info.num_pending == 0  # the bad ones were acked too


def _post(port: int, headers: dict, body: bytes, path: str = "/") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        conn.close()


def test_http_binary_structured_batch_and_malformed(tmp_path, session_a) -> None:
    port = free_port()
    out = tmp_path / "out"
    dead = out / ".ingest" / "dead-letter.jsonl"
    mport = free_port()
    serve = Serve(out, f"http://127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{mport}",
                  idle=120.0)  # only the shutdown seals
    name = run_name(session_a[0]["session"])
    journal = out / ".journal" / f"{name}.jsonl"

    def up() -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    wait_for(up, what="the HTTP endpoint")
    n = 0
    for e in session_a[:3]:  # binary mode
        status, body = _post(port, *to_binary_http(e))
        n += 1
        assert (status, body) == (202, {"accepted": 1})
        assert len(journal.read_text().splitlines()) == n  # in the journal when the 202 came
    for e in session_a[3:5]:  # structured mode
        assert _post(port, *to_structured_http(e))[0] == 202
    h, b = to_batch_http(session_a[5:8])
    assert _post(port, h, b) == (202, {"accepted": 3})
    assert len(journal.read_text().splitlines()) == 8
    bad = [({"content-type": "application/cloudevents+json"}, b"{nope"),
           ({"content-type": "application/json"}, json.dumps(dict(session_a[0], type="agent.started")).encode()),
           # a batch with one bad event: refused whole, nothing of it journaled
           (to_batch_http(session_a[8:])[0], b"[" + to_structured(session_a[8]) + b', {"specversion": "1.0"}]'),
           ({"content-type": "text/html"}, b"<p>")]
    for h, b in bad:
        status, body = _post(port, h, b)
        assert status == 400 and body["error"]["rule"], body
    assert len(journal.read_text().splitlines()) == 8
    assert len(dead.read_text().splitlines()) == len(bad)
    # the service is still up; plain AEP JSON is taken too, and a redelivery is harmless
    assert _post(port, {"content-type": "application/json"}, json.dumps(session_a[8]).encode())[0] == 202
    assert _post(port, *to_binary_http(session_a[0]))[0] == 202
    assert runs(out) == []
    # the shared HTTP layer's limits (aefgate.net.http_server): a body over the bound, another method
    big = _post(port, {"content-type": "application/json"}, b" " * (32 * 1024 * 1024 + 10))
    assert big[0] == 413 and big[1]["error"]["rule"] == "INGEST-1"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("PUT", "/", body=b"{}")
    assert conn.getresponse().status == 405
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)  # Prometheus metrics
    conn.request("GET", "/metrics")
    metrics = conn.getresponse().read().decode()
    conn.close()
    counters = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line.startswith("aefgate_ingest_"))
    assert float(counters["aefgate_ingest_dead_total"]) == len(bad)
    stats = serve.stop()  # SIGTERM: drain and flush
    assert runs(out) == [name]
    assert stats["runs"] == 1 and stats["duplicates"] == 1 and stats["dead"] == len(bad)
    assert float(counters["aefgate_ingest_events_total"]) == stats["events"]  # the scrape came after the last event
    assert verify_run(out / name).outcome == "intact"
    assert results(out / name) == results(reference(session_a, tmp_path))


def test_late_batch_of_a_sealed_session_is_a_second_run(nats_server, tmp_path, session_a) -> None:
    publish(nats_server.url, [nats_message(e, binary=False) for e in session_a[:4]])
    out = tmp_path / "out"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", idle=1.0)
    name = run_name(session_a[0]["session"])
    wait_for(lambda: name in runs(out), what="the first run")
    # late: the rest, and a redelivery of an event already sealed (dropped, not a line of the second run)
    publish(nats_server.url, [nats_message(e, binary=False) for e in session_a[4:]]
            + [({"Nats-Msg-Id": "again"}, to_structured(session_a[0]))])
    wait_for(lambda: f"{name}.2" in runs(out), what="the second run")
    stats = serve.stop()
    assert runs(out) == [name, f"{name}.2"]
    assert stats["duplicates"] == 1
    assert len(results(out / name)) + len(results(out / f"{name}.2")) == len(session_a)
    for r in (name, f"{name}.2"):
        assert verify_run(out / r).outcome == "intact"


def test_a_session_the_importer_refuses_is_dead_lettered(nats_server, tmp_path, session_a) -> None:
    # two states for one line (AEP-15): each event is fine alone, the session is not
    twin = json.loads(json.dumps(session_a[2]))
    twin["id"] += "-twin"
    twin["data"]["gen_ai.evaluation.score.label"] = "passed"
    publish(nats_server.url, [nats_message(e, binary=False) for e in session_a] + [nats_message(twin, False)])
    out = tmp_path / "out"
    dead = tmp_path / "dead.jsonl"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--dead-letter", str(dead), idle=0.5)
    wait_for(lambda: dead.exists() and len(dead.read_text().splitlines()) == len(session_a) + 1,
             what="the session's events dead-lettered")
    stats = serve.stop()
    assert stats["refused_sessions"] == 1 and runs(out) == []
    assert all(json.loads(ln)["rule"] == "AEP-15" for ln in dead.read_text().splitlines())
    assert not list((out / ".journal").iterdir()) and not list((out / ".ingest" / "rejected").iterdir())


def test_dead_letters_on_a_nats_subject(nats_server, tmp_path, session_a) -> None:
    publish(nats_server.url, [({}, b"{oops")] + [nats_message(e, binary=True) for e in session_a])
    out = tmp_path / "out"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--dead-letter", "nats:aep.dead")
    name = run_name(session_a[0]["session"])
    wait_for(lambda: name in runs(out), what="the sealed run")
    assert serve.stop()["dead"] == 1

    async def last():
        nc = await nats.connect(nats_server.url)
        try:
            return await nc.jetstream().get_last_msg("AEP", "aep.dead")  # the stream holds aep.>
        finally:
            await nc.close()

    record = json.loads(asyncio.run(last()).data)
    assert record["rule"] == "INGEST-1" and record["message"]["body"] == "{oops"


def test_nats_server_restart_mid_session(nats_server, tmp_path, session_a) -> None:
    msgs = [nats_message(e, binary=False) for e in session_a]
    publish(nats_server.url, msgs[:4])
    out = tmp_path / "out"
    serve = Serve(out, nats_server.url + "/aep.assess", "--durable", "ingest", "--ack-wait", "2", idle=6.0)
    wait_for(lambda: acked(nats_server.url, "ingest") >= 4, what="four acks")
    nats_server.restart()  # SIGKILL and start again, same store: the service reconnects
    publish(nats_server.url, msgs[4:])
    name = run_name(session_a[0]["session"])
    wait_for(lambda: name in runs(out), timeout=60, what="the sealed run")
    serve.stop()
    assert runs(out) == [name]
    assert results(out / name) == results(reference(session_a, tmp_path))


def test_sigterm_stops_a_service_still_waiting_for_its_nats_server(tmp_path) -> None:
    """nats-py keeps retrying a server that is down, also the first time: SIGTERM must still end the service
    cleanly (exit 0, its counters as one JSON value, nothing written)."""
    out = tmp_path / "out"
    s = Serve(out, f"nats://127.0.0.1:{free_port()}/aef.results", "--durable", "gw")
    wait_for(lambda: "ConnectionRefusedError" in s.text(), what="a failed connection attempt")
    stats = s.stop(timeout=30)
    assert stats["received"] == 0 and stats["runs"] == 0
    assert "stopped before connecting" in s.text()
    assert runs(out) == []
