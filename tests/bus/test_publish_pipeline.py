"""The publish pipeline (a forked child verifies, exports and encodes; this process sends) and the lean JetStream
ack path (one wildcard inbox, PubAcks matched here), on a real nats-server: the forked and the in-process
producers put the same messages in the stream; JetStream's own error answers (permanent, retried) give the
reports docs/design/bus.md describes; a run that does not verify sends and writes nothing, even with
--create-stream; the child is always reaped."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import pytest

from aefgate.bus import publish, resume
from aefgate.bus.pipeline import Producer
from aefgate.bus.spool import read_pending
from aefgate.converters.aef_aep import export_events
from aefgate.errors import Refusal
from tests._shared import copy_run
from tests.bus.test_publish_nats import RUN, big_run, cli, stream_count, stream_messages


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _add_stream(url: str, name: str, subject: str, **config) -> None:
    async def go():
        import nats

        nc = await nats.connect(url)
        try:
            await nc.jetstream().add_stream(name=name, subjects=[subject], **config)
        finally:
            await nc.close()

    asyncio.run(go())


@pytest.mark.parametrize("fmt,mode", [("cloudevents", "structured"), ("cloudevents", "binary"), ("aep", "structured")])
def test_forked_and_in_process_producers_send_the_same(nats_server, monkeypatch, fmt, mode) -> None:
    n = len(list(export_events(RUN)))
    rep = publish(RUN, f"{nats_server.url}/fork.s", format=fmt, mode=mode, create_stream=True)
    assert rep.ok and (rep.acked, rep.duplicate, rep.attempts) == (n, 0, n)
    monkeypatch.setenv("AEFGATE_WORKERS", "0")  # everything in this process
    rep = publish(RUN, f"{nats_server.url}/local.s", format=fmt, mode=mode, create_stream=True)
    assert rep.ok and (rep.acked, rep.duplicate, rep.attempts) == (n, 0, n)
    forked = stream_messages(nats_server.url, "FORK_S")
    local = stream_messages(nats_server.url, "LOCAL_S")
    assert len(forked) == n and forked == local  # same headers, same payloads, same order
    # and again over the forked path: every one a duplicate (the ack parser reads "duplicate": true)
    monkeypatch.delenv("AEFGATE_WORKERS")
    rep = publish(RUN, f"{nats_server.url}/local.s", format=fmt, mode=mode)
    assert rep.ok and (rep.acked, rep.duplicate) == (n, n)
    assert stream_count(nats_server.url, "LOCAL_S") == n


def test_run_that_does_not_verify_creates_no_stream(nats_server, tmp_path, capsys) -> None:
    run = copy_run(RUN, tmp_path / "run")
    res = run / "results.ndjson"
    res.write_bytes(res.read_bytes().replace(b'"passed"', b'"failed"', 1))
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.bad", "--create-stream", "--spool",
                         tmp_path / "sp", "--json", capsys=capsys)
    assert code == 1 and "[AEP-1]" in err and json.loads(out)["error"]["rule"] == "AEP-1"
    assert stream_count(nats_server.url, "AEF_BAD") == -1  # not created: nothing reached the server
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no spool


def test_the_child_is_reaped(tmp_path) -> None:
    # a refusal from the child (an option the export refuses): raised here with its rule and exit code
    p = Producer(RUN, {"max_capture": "everything"}, kind="nats", fmt="cloudevents", mode="structured", batch=1,
                 spool_lines=False)
    pid = p.pid
    with p, pytest.raises(Refusal) as e:
        p.verified()
    assert e.value.rule == "AEP-8" and e.value.exit_code == 2 and _gone(pid)
    # a consumer that stops after the first frame of a long export: the child ends (broken pipe), reaped
    run = big_run(tmp_path, 20_000)
    p = Producer(run, {}, kind="nats", fmt="cloudevents", mode="structured", batch=1, spool_lines=True)
    pid = p.pid

    async def first():
        agen = p.chunks()
        chunk = await agen.__anext__()
        await agen.aclose()
        return chunk

    with p:
        p.verified()
        chunk = asyncio.run(first())
    assert len(chunk) == 256 and all(it.body and it.line and it.headers["Nats-Msg-Id"] == it.id for it in chunk)
    assert [it.index for it in chunk] == list(range(256)) and _gone(pid)


def test_permanent_jetstream_error_fails_fast(nats_server, tmp_path, capsys) -> None:
    _add_stream(nats_server.url, "SMALL", "aef.small", max_msg_size=100)  # every event is larger
    n = len(list(export_events(RUN)))
    code, out, err = cli("publish", RUN, "--to", f"{nats_server.url}/aef.small", "--spool", tmp_path / "sp",
                         "--json", capsys=capsys)
    rep = json.loads(out)
    assert code == 1 and "[PUB-5]" in err
    assert rep["acked"] == 0 and rep["failed"] >= 1 and rep["failed"] + rep["unsent"] == n
    assert rep["attempts"] == rep["failed"]  # a permanent error is never retried
    assert "JetStream refused the event" in rep["reason"] and "message size exceeds maximum" in rep["reason"]
    assert rep["pending"] == n and len(read_pending(tmp_path / "sp")) == n


def test_503_from_jetstream_is_retried_then_given_up(nats_server, tmp_path) -> None:
    # a stream that takes 3 messages and then answers 503 "maximum messages exceeded" (discard new)
    _add_stream(nats_server.url, "FULL", "aef.full", max_msgs=3, discard="new")
    n = len(list(export_events(RUN)))
    rep = publish(RUN, f"{nats_server.url}/aef.full", spool=tmp_path / "sp", timeout=2.0, retries=2)
    assert not rep.ok and rep.acked == 3 and rep.failed >= 1 and rep.acked + rep.failed + rep.unsent == n
    assert "maximum messages exceeded" in rep.reason and ("after 3 attempts" in rep.reason
                                                          or "deadline" in rep.reason)
    assert rep.attempts > rep.published  # retried
    assert rep.pending == n - 3 and len(read_pending(tmp_path / "sp")) == n - 3


def test_no_responders_when_the_stream_goes(nats_server, tmp_path) -> None:
    run = big_run(tmp_path, 20_000)
    n = len(list(export_events(run)))
    url = f"{nats_server.url}/aef.gone"
    _add_stream(nats_server.url, "GONE", "aef.gone")
    box: dict = {}

    def go() -> None:
        try:
            box["report"] = publish(run, url, spool=tmp_path / "sp", timeout=1.5, retries=3)
        except BaseException as e:  # pragma: no cover - shown below
            box["error"] = e

    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + 60
    while stream_count(nats_server.url, "GONE") < 1000 and time.monotonic() < deadline and t.is_alive():
        time.sleep(0.01)

    async def delete():
        import nats

        nc = await nats.connect(nats_server.url)
        try:
            await nc.jetstream().delete_stream("GONE")
        finally:
            await nc.close()

    asyncio.run(delete())
    t.join(120)
    assert not t.is_alive() and "error" not in box, box.get("error")
    rep = box["report"]
    assert not rep.ok and 0 < rep.acked < n and rep.acked + rep.failed + rep.unsent == n
    assert "no response from stream" in rep.reason, rep.reason
    assert rep.pending == n - rep.acked == len(read_pending(tmp_path / "sp"))
    # the stream back: resume delivers exactly the rest
    _add_stream(nats_server.url, "GONE", "aef.gone")
    rep2 = resume(tmp_path / "sp")
    assert rep2.ok and rep2.acked == n - rep.acked and rep2.pending == 0


def test_http_batches_from_the_child_with_a_spool(tmp_path) -> None:
    # the child sends the events themselves for --batch N > 1 (the sink encodes the batch) and their spool lines
    from aefgate.formats.aef import jsonio
    from tests.bus.test_publish_http import Receiver, received_events

    expected = list(export_events(RUN))
    n = len(expected)
    with Receiver([(200, {}, b""), (400, {}, b"no more\n")]) as rx:
        rep = publish(RUN, rx.url, batch=4, spool=tmp_path / "sp")
    assert not rep.ok and (rep.acked, rep.failed, rep.unsent) == (4, 4, n - 8) and "HTTP 400" in rep.reason
    assert received_events(rx) == expected[:4]
    spooled = (tmp_path / "sp" / "events-1.jsonl").read_bytes()
    assert spooled == b"".join(jsonio.dump_line(e) for e in expected[4:])  # the child's lines, byte for byte
    with Receiver() as rx:
        rep = resume(tmp_path / "sp", to=rx.url)
    assert rep.ok and rep.acked == rep.total == n - 4 and rep.pending == 0
    assert received_events(rx) == expected[4:]
