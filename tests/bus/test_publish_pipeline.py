"""The publish pipeline (a forked child verifies, exports and encodes in one pass; this process sends) and the lean
JetStream ack path (one wildcard inbox, PubAcks matched here), on a real nats-server: the forked and the in-process
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

from aefgate.bus import codec, publish, resume
from aefgate.bus.pipeline import Producer
from aefgate.bus.spool import read_pending
from aefgate.converters.aep.exporter import export_events
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
    # NATS: the headers come as the header block the sink sends as it is
    assert len(chunk) == 256 and all(it.body and it.line and type(it.headers) is bytes for it in chunk)
    assert all(codec.parse_header_block(it.headers)["Nats-Msg-Id"] == it.id for it in chunk)
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
    from aefgate.aef import jsonio
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


# -- the one pass in the child (docs/design/bus.md, "Pipeline") -------------------------------------------------------
#
# The child verifies the run with pipeline._PublishMapper: every checked line (with the explanation read from its
# reasoning blob) is spooled into an unnamed temporary file during the verification; nothing is sent before the
# verdict, and the events are made from the spool after it. The tests change the run
# during the pass by wrapping the mapper's methods (patched before the fork: the child and the verifier's worker
# processes inherit them). AEFGATE_WORKERS=2 makes the verifier use two worker processes even for a small run (the
# lines are then spooled by them); unset, a small run is verified and spooled in the child itself.

WORKERS = [None, "2"]


def _children() -> set[int]:
    """The pids of this process's children (zombies included: they are children until reaped)."""
    out: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out |= {int(p) for p in f.read().split()}
        except OSError:
            pass
    return out


def _flip(path) -> None:
    """A change that keeps every line decodable (and the file's length): only a digest sees it."""
    data = path.read_bytes()
    assert b'"passed"' in data
    path.write_bytes(data.replace(b'"passed"', b'"failed"', 1))


@pytest.fixture
def tmpdir_for_spill(tmp_path, monkeypatch):
    """The temporary directory the child's unlinked file is made in (checked empty afterwards)."""
    import tempfile

    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _workers(monkeypatch, workers: str | None) -> None:
    if workers is not None:
        monkeypatch.setenv("AEFGATE_WORKERS", workers)
    else:
        monkeypatch.delenv("AEFGATE_WORKERS", raising=False)


def _mark_spooled(monkeypatch, marker) -> None:
    """``marker`` is made when the child has spooled checked lines (during the pass, before the verdict)."""
    from aefgate.bus import pipeline

    real_put = pipeline._PublishMapper.put

    def put(self, payload):
        real_put(self, payload)
        if self.size:
            marker.touch()

    monkeypatch.setattr(pipeline._PublishMapper, "put", put)


@pytest.mark.parametrize("workers", WORKERS)
def test_run_that_does_not_verify_sends_nothing(nats_server, tmp_path, monkeypatch, capsys, tmpdir_for_spill,
                                                workers) -> None:
    run = copy_run(RUN, tmp_path / "run")
    _flip(run / "results.ndjson")  # no longer what the seal records; every line still reads (and is mapped)
    _workers(monkeypatch, workers)
    spooled = tmp_path / "spooled"
    _mark_spooled(monkeypatch, spooled)
    before = _children()
    code, _out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.bad2", "--create-stream", "--spool",
                         tmp_path / "sp", "--json", capsys=capsys)
    assert code == 1 and "[AEP-1]" in err and "only a run that verifies intact" in err, err
    assert spooled.exists()  # the lines were checked and spooled during the pass, before the verdict
    assert stream_count(nats_server.url, "AEF_BAD2") == -1  # nothing sent, no stream created
    assert not (tmp_path / "sp").exists()
    assert list(tmpdir_for_spill.iterdir()) == []  # the temporary file is gone (it never had a name)
    assert _children() <= before  # the child reaped


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("what", ["results", "blob"])
def test_run_changed_during_the_pass_sends_nothing(nats_server, tmp_path, monkeypatch, capsys, tmpdir_for_spill,
                                                   workers, what) -> None:
    # changed once the verification has read run.json and handed it to the mapper, before any result line is read
    from aefgate.bus import pipeline

    run = copy_run(RUN, tmp_path / "run")
    blob = next(p for p in (run / "blobs").rglob("*") if p.is_file())  # the reasoning text of a line (AEP-9)
    _workers(monkeypatch, workers)
    real_begin = pipeline._PublishMapper.begin

    def begin(self, doc, summary):
        real_begin(self, doc, summary)
        if what == "results":
            _flip(run / "results.ndjson")
        else:
            blob.write_bytes(b"not what was sealed\n")

    monkeypatch.setattr(pipeline._PublishMapper, "begin", begin)
    before = _children()
    code, _out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.changed", "--create-stream",
                         "--max-capture", "full", "--json", capsys=capsys)
    assert code == 1 and "[AEP-1]" in err and "only a run that verifies intact" in err, err
    assert ("results.ndjson" if what == "results" else f"blobs/sha256/{blob.parent.name}/{blob.name}") in err, err
    assert stream_count(nats_server.url, "AEF_CHANGED") == -1  # refused before V: nothing sent
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before


@pytest.mark.parametrize("workers", WORKERS)
def test_blob_read_changed_then_restored_sends_nothing(nats_server, tmp_path, monkeypatch, capsys,
                                                       tmpdir_for_spill, workers) -> None:
    # the blob is changed while the lines are mapped (the explanation read from it) and put back before the
    # verification hashes the blobs (after results.ndjson): the run verifies intact, but what the mapping read is
    # not what was verified; the mapper's refusal comes before V
    from aefgate.bus import pipeline

    run = copy_run(RUN, tmp_path / "run")
    blob = next(p for p in (run / "blobs").rglob("*") if p.is_file())
    sealed = blob.read_bytes()
    _workers(monkeypatch, workers)
    real_begin, real_map_lines = pipeline._PublishMapper.begin, pipeline._PublishMapper.map_lines

    def begin(self, doc, summary):
        real_begin(self, doc, summary)
        blob.write_bytes(b"not what was sealed\n")

    def map_lines(self, lines, base):  # in the child, or in a worker process
        try:
            return real_map_lines(self, lines, base)
        finally:
            blob.write_bytes(sealed)

    monkeypatch.setattr(pipeline._PublishMapper, "begin", begin)
    monkeypatch.setattr(pipeline._PublishMapper, "map_lines", map_lines)
    before = _children()
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.blob", "--create-stream",
                         "--max-capture", "full", "--json", capsys=capsys)
    assert code == 1 and "the run changed after it was verified" in err, err
    assert json.loads(out)["error"]["where"] == f"blobs/sha256/{blob.parent.name}/{blob.name}"
    assert stream_count(nats_server.url, "AEF_BLOB") == -1
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before


def _decided_run(tmp_path, monkeypatch, lines: int = 3_000):
    """A bench run with overlay decisions targeting lines of different ranges (AEP-12), cut in ranges of 64 KiB."""
    from aefgate.aef import decisions as ov
    from aefgate.aef import verifier

    run = big_run(tmp_path, lines)
    rids = [json.loads(x)["resultId"] for x in (run / "results.ndjson").read_bytes().splitlines()]
    at = "2026-10-03T00:00:00Z"
    ov.decide(run, kind="override", by="reviewer-42", reason="Judge misread the policy", result=rids[2500],
              state="passed", at=at)
    ov.decide(run, kind="approve", by="reviewer-42", reason="Reviewed", at=at)
    ov.decide(run, kind="reject", by="reviewer-7", reason="Wrong", result=rids[7], at=at)
    monkeypatch.setattr(verifier, "_RANGE", 64 * 1024)  # inherited by the child and its workers
    assert (run / "results.ndjson").stat().st_size > 10 * 64 * 1024
    return run


@pytest.mark.parametrize("workers", WORKERS)
def test_forked_pass_and_in_process_send_the_same(nats_server, tmp_path, monkeypatch, tmpdir_for_spill,
                                                  workers) -> None:
    # the pass in the child or in its worker processes (many ranges), with decision events numbered after the
    # result events, against the in-process producer
    run = _decided_run(tmp_path, monkeypatch)
    n = len(list(export_events(run)))
    before = _children()
    monkeypatch.setenv("AEFGATE_WORKERS", "0")
    rep = publish(run, f"{nats_server.url}/plain.s", create_stream=True)
    assert rep.ok and rep.acked == n
    _workers(monkeypatch, workers)
    rep = publish(run, f"{nats_server.url}/forked.s", create_stream=True, spool=tmp_path / "sp")
    assert rep.ok and rep.acked == n and rep.pending == 0
    forked = stream_messages(nats_server.url, "FORKED_S")
    assert len(forked) == n and forked == stream_messages(nats_server.url, "PLAIN_S")
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before


def test_a_producer_given_up_during_the_pass_ends_with_its_workers(tmp_path, monkeypatch, tmpdir_for_spill) -> None:
    # the parent gives up before the verdict (an exception, an interrupt): the child is ended at once, and the
    # verifier's worker processes with it (not left to finish the pass or to die on a broken pipe)
    from aefgate.bus import pipeline

    run = _decided_run(tmp_path, monkeypatch)
    monkeypatch.setenv("AEFGATE_WORKERS", "2")
    real = pipeline._PublishMapper.map_lines

    def slow(self, lines, base):  # in the workers: the pass lasts
        time.sleep(0.5)
        return real(self, lines, base)

    monkeypatch.setattr(pipeline._PublishMapper, "map_lines", slow)
    p = Producer(run, {}, kind="nats", fmt="cloudevents", mode="structured", batch=1, spool_lines=False)
    pid = p.pid

    def grandchildren() -> set[int]:
        out: set[int] = set()
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    out |= {int(x) for x in f.read().split()}
            except OSError:  # a thread of the child's that ended meanwhile
                pass
        return out

    deadline = time.monotonic() + 60
    while len(grandchildren()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    workers = grandchildren()
    assert len(workers) == 2
    t0 = time.monotonic()
    p.close()  # SIGTERM: the child unwinds at once (killed after 5 s, where Python missed the signal)
    assert time.monotonic() - t0 < 8 and _gone(pid)

    def running(w: int) -> bool:  # a zombie waits for init to reap it: it has ended
        try:
            with open(f"/proc/{w}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while any(running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(running(w) for w in workers)
    assert list(tmpdir_for_spill.iterdir()) == []


def _all_items(p: Producer) -> tuple[list[list], BaseException | None]:
    """Every chunk the producer gives, and the exception that ended them (None at the end)."""
    chunks: list[list] = []

    async def go():
        async for chunk in p.chunks():
            chunks.append(chunk)

    try:
        asyncio.run(go())
    except Exception as e:  # noqa: BLE001 - returned to the test
        return chunks, e
    return chunks, None


@pytest.mark.parametrize("workers", WORKERS)
def test_frames_hold_every_event_in_order(tmp_path, monkeypatch, tmpdir_for_spill, workers) -> None:
    from aefgate.bus.pipeline import FRAME

    run = _decided_run(tmp_path, monkeypatch)
    events = list(export_events(run))
    _workers(monkeypatch, workers)
    with Producer(run, {}, kind="nats", fmt="cloudevents", mode="structured", batch=1, spool_lines=True) as p:
        p.verified()
        chunks, error = _all_items(p)
    assert error is None and p.done and p.count == len(events)
    assert all(0 < len(c) <= FRAME for c in chunks)
    items = [it for c in chunks for it in c]
    assert [it.index for it in items] == list(range(len(events)))
    assert [it.id for it in items] == [e["id"] for e in events]
    assert list(tmpdir_for_spill.iterdir()) == []


def test_structured_fast_path_is_codec_message() -> None:
    # the child's structured encoder gives codec.message's bytes, for the usual events and for the others
    from aefgate.bus import codec
    from aefgate.bus.pipeline import _encoder

    encode = _encoder("nats", "cloudevents", "structured", 1, False)
    events = list(export_events(RUN, max_capture="full"))
    base = events[0]
    variants = [dict(base, seq=2**31 - 1), dict(base, time="2028-02-29T00:00:00Z"), dict(base, cause="c-1"),
                dict(base, traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"), dict(base, ext1="x"),
                dict(base, time="2024-02-29T23:59:60.5+01:00"), dict(base, data={"x": None})]
    for ev in events + variants:
        headers, body = codec.message(ev, "cloudevents", "structured")
        block = codec.nats_header_block({**headers, "Nats-Msg-Id": ev["id"]})
        assert block is not None and encode(ev) == (ev["id"], block, body, None, None)
    refused = [dict(base, seq=2**31), dict(base, seq=True), dict(base, time="2026-02-29T00:00:00Z"),
               dict(base, time="2026-02-30T00:00:00Z"),
               dict(base, id=""), dict(base, run="a\nb"), dict(base, severity="loud"), dict(base, type="nope"),
               dict(base, data=[1]), dict(base, agent=["x"]), dict(base, source="s\x7f"),
               dict(base, data={"x": float("nan")}), dict(base, agent=type("S", (str,), {})(base["agent"]))]
    for ev in refused:
        with pytest.raises(Refusal) as want:
            codec.message(ev, "cloudevents", "structured")
        with pytest.raises(Refusal) as got:
            encode(ev)
        assert (got.value.rule, got.value.message, got.value.where) == \
            (want.value.rule, want.value.message, want.value.where)


def test_refusal_of_the_bridge_after_the_events_before_it(nats_server, monkeypatch, tmpdir_for_spill) -> None:
    # an agent the CloudEvents bridge refuses (a noncharacter; AEP-3 refuses control characters before): raised
    # after V, as in one process
    got = []
    for workers in (None, "2", "0"):
        _workers(monkeypatch, workers)
        with pytest.raises(Refusal) as e:
            publish(RUN, f"{nats_server.url}/bridge.s{len(got)}", create_stream=True, agent="bad\ufdd0agent")
        got.append((e.value.rule, e.value.where, e.value.exit_code))
    assert got[0] == got[1] == got[2] and got[0][0] in ("B4", "CE-2")
    assert list(tmpdir_for_spill.iterdir()) == []


@pytest.mark.parametrize("workers", WORKERS)
def test_refusal_of_the_bridge_midway(tmp_path, monkeypatch, tmpdir_for_spill, workers) -> None:
    # a cause (AEP-7) the bridge refuses for the events of one case in the middle of the run: the producer gives
    # exactly the events before the first of them, then the refusal, as the in-process producer does
    from aefgate.bus.pipeline import encoded_items

    run = _decided_run(tmp_path, monkeypatch)
    lines = [json.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    case = lines[1800]["caseId"]
    cmap = {case: "bad\ufdd0cause"}
    events = list(export_events(run, cause_map=cmap))
    k = next(i for i, e in enumerate(events) if e.get("cause") == "bad\ufdd0cause")
    assert 1000 < k < len(events) - 100
    spec = {"kind": "nats", "fmt": "cloudevents", "mode": "structured", "batch": 1, "spool_lines": False}
    local = []
    with pytest.raises(Refusal) as want:
        for it in encoded_items(events, **spec):
            local.append((it.id, it.headers, it.body))
    assert len(local) == k
    _workers(monkeypatch, workers)
    with Producer(run, {"cause_map": cmap}, **spec) as p:
        p.verified()  # the run verifies: V
        chunks, error = _all_items(p)
    assert isinstance(error, Refusal)
    assert (error.rule, error.message, error.where, error.exit_code) == \
        (want.value.rule, want.value.message, want.value.where, want.value.exit_code)
    assert [(it.id, it.headers, it.body) for c in chunks for it in c] == local
    assert list(tmpdir_for_spill.iterdir()) == []


def test_nats_header_blocks_of_the_encoder_are_nats_header_block() -> None:
    # the encoder's shortcut (the repeated headers' block, then the id) gives nats_header_block's bytes, and ids
    # nats-py would rewrite (spaces at the ends, CR/LF, non-ASCII) take the general path
    from aefgate.bus.pipeline import _encoder

    base = list(export_events(RUN))[0]
    ids = [base["id"], " lead", "trail ", "in ner", "a\r\nb", "ünïcode", "x"]
    for fmt, mode in (("aep", "structured"), ("cloudevents", "structured"), ("cloudevents", "binary")):
        encode = _encoder("nats", fmt, mode, 1, False)
        for eid in ids:
            ev = dict(base, id=eid)
            try:
                headers, body = codec.message(ev, fmt, mode)
            except Refusal:
                continue  # the bridge refuses this id (as the encoder does: checked elsewhere)
            headers["Nats-Msg-Id"] = eid
            got = encode(ev)
            assert got[1] == codec.nats_header_block(headers) and got[2] == body, (fmt, mode, eid)
    assert b"Nats-Msg-Id: a  b\r\n" in _encoder("nats", "aep", "structured", 1, False)(dict(base, id="a\r\nb"))[1]


def test_spooled_lines_come_back_exactly(tmp_path) -> None:
    # the pass keeps each batch of checked lines in the child's temporary file (msgpack; pickle for an integer
    # beyond 64 bits, which msgpack does not hold): what comes back after the verdict is exactly what was checked,
    # with the explanations read in the pass (AEP-9: the reasoning blob's text, at a full ceiling)
    import tempfile

    import msgspec

    from aefgate.bus import pipeline
    from aefgate.converters.aep import exporter as aep_exporter
    from aefgate.aef import jsonio

    run = copy_run(RUN, tmp_path / "run")
    lines = [jsonio.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    checked = aep_exporter.check_options(run, max_capture="full")
    with tempfile.TemporaryFile(buffering=0) as spool:
        m = pipeline._PublishMapper(checked, aep_exporter.sealed_run_hash(run), None, spool)
        m.begin(jsonio.loads((run / "run.json").read_bytes()), None)
        expls = [m.ctx.explanation(line) for line in lines]
        assert any(e is not None for e in expls)  # the run has reasoning blobs
        big = [dict(lines[0], ext={"n": 2**70, "m": -(2**64), "f": 0.1 + 0.2, "s": "\u00e9\U0001f600"})]
        with pytest.raises(OverflowError):
            msgspec.msgpack.encode(big)
        batches = [list(enumerate(lines[:2], 1)), list(enumerate(lines[2:], 3)), [(99, big[0])]]
        for b in batches:
            m.put(m.map(b, None))
        back = list(pipeline._spooled_lines(spool, m.size))
    assert [x[0] for x in back] == [[d for _, d in b] for b in batches]
    assert back[0][1] + back[1][1] == expls and back[2][1] == [expls[0]]
    got = back[2][0][0]["ext"]
    assert type(got["n"]) is int and got["n"] == 2**70 and got["m"] == -(2**64) and got["f"] == 0.1 + 0.2
