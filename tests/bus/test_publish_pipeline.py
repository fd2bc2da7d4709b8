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


# -- the export beside the verification (docs/design/bus.md, "Pipeline") ----------------------------------------------
#
# The forked child starts the verification in a grandchild and exports into an unlinked temporary file meanwhile.
# The tests order the two processes with marker files (no timing): wrappers of aep_exporter._verify_intact (run by the
# grandchild) and of aep_exporter._verified_lines (run by the exporting child) wait for each other's markers; the
# monkeypatches are made before the fork, so both processes inherit them.


def _wait_for(path, deadline: float = 120.0) -> None:
    """Until ``path`` exists (a marker the other process writes); gives up after ``deadline`` s so that a broken
    ordering fails the test's assertions instead of hanging it."""
    end = time.monotonic() + deadline
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.005)


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


class _Order:
    """The markers and the wrappers (installed with :meth:`install`)."""

    def __init__(self, tmp, monkeypatch) -> None:
        from aefgate.converters.aep import exporter as aep_exporter

        self.dir = tmp / "markers"
        self.dir.mkdir()
        self.verified = self.dir / "verified"  # the grandchild's verification is done (its verdict not yet sent)
        self.exported = self.dir / "exported"  # the pre-export has read every line of results.ndjson
        self.pre_done = self.dir / "pre-done"  # the pre-export has written its last record and ends
        self.pid = self.dir / "verifier.pid"
        self.pre = self.dir / "pre.pid"  # the pre-export's pid and niceness
        self.spilled = self.dir / "spilled"  # the child opened its temporary file
        self.aep_exporter = aep_exporter
        self.monkeypatch = monkeypatch
        self.real_verify = aep_exporter._verify_intact

    def install(self, *, verdict_after_export: bool = False, before_reading=None, after_verify=None) -> None:
        import tempfile

        from aefgate.bus import pipeline

        if "AEFGATE_PUBLISH_BUFFER" not in os.environ:  # the pre-export is off by default: these tests are about it
            self.monkeypatch.setenv("AEFGATE_PUBLISH_BUFFER", str(pipeline.SUGGESTED_BUFFER))

        order = self
        real_iter = pipeline._Lines.__iter__
        real_pre = pipeline._pre_export

        def verify(root, policy=None):
            order.pid.write_text(str(os.getpid()))
            try:
                verdict = order.real_verify(root, policy)
                if after_verify is not None:  # the run changes once verified, before the verdict is sent
                    after_verify()
                return verdict
            finally:
                order.verified.touch()
                if verdict_after_export:  # the pre-export has done all its work: the verdict finds it complete
                    _wait_for(order.pre_done)

        def lines(self):
            if self.start == 0 and not order.pre.exists():  # the pre-export (or, without one, the child)
                tmp = order.pre.with_name(f"pre.{os.getpid()}.tmp")  # whole or absent: the process may be killed
                tmp.write_text(f"{os.getpid()} {os.sched_getscheduler(0)}")
                os.replace(tmp, order.pre)
                if before_reading is not None:  # once the grandchild has read the run
                    _wait_for(order.verified)
                    before_reading()
            yield from real_iter(self)
            if self.eof:
                order.exported.touch()

        def pre_export(*args, **kwargs):
            try:
                return real_pre(*args, **kwargs)
            finally:
                order.pre_done.touch()

        real_tmp = tempfile.TemporaryFile

        def temporary_file(*args, **kwargs):
            order.spilled.touch()
            return real_tmp(*args, **kwargs)

        self.monkeypatch.setattr(self.aep_exporter, "_verify_intact", verify)
        self.monkeypatch.setattr(pipeline._Lines, "__iter__", lines)
        self.monkeypatch.setattr(pipeline, "_pre_export", pre_export)
        self.monkeypatch.setattr(tempfile, "TemporaryFile", temporary_file)

    def gone(self) -> bool:
        """The verifying grandchild and the pre-export were reaped (no /proc entry: not even a zombie)."""
        pids = [int(self.pid.read_text())]
        if self.pre.exists():
            pids.append(int(self.pre.read_text().split()[0]))
        return not any(os.path.exists(f"/proc/{p}") for p in pids)

    def pre_policy(self) -> int:
        return int(self.pre.read_text().split()[1])


@pytest.fixture
def tmpdir_for_spill(tmp_path, monkeypatch):
    """The temporary directory the child's unlinked file is made in (checked empty afterwards)."""
    import tempfile

    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_run_that_does_not_verify_export_done_first_sends_nothing(nats_server, tmp_path, monkeypatch, capsys,
                                                                   tmpdir_for_spill) -> None:
    run = copy_run(RUN, tmp_path / "run")
    _flip(run / "results.ndjson")  # no longer what the seal records
    order = _Order(tmp_path, monkeypatch)
    order.install(verdict_after_export=True)
    before = _children()
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.bad2", "--create-stream", "--spool",
                         tmp_path / "sp", "--json", capsys=capsys)
    assert code == 1 and "[AEP-1]" in err and "only a run that verifies intact" in err
    assert order.exported.exists() and order.spilled.exists()  # the export was done (buffered) before the verdict
    # by the pre-export, at the lowest priority: it takes only the CPU the verification leaves
    assert order.pre_policy() == os.SCHED_IDLE
    assert stream_count(nats_server.url, "AEF_BAD2") == -1  # nothing sent, no stream created
    assert not (tmp_path / "sp").exists()
    assert list(tmpdir_for_spill.iterdir()) == []  # the temporary file is gone (it never had a name)
    assert _children() <= before and order.gone()  # child and grandchild reaped


def test_run_changed_after_verification_export_done_first(nats_server, tmp_path, monkeypatch, capsys,
                                                          tmpdir_for_spill) -> None:
    run = copy_run(RUN, tmp_path / "run")
    order = _Order(tmp_path, monkeypatch)
    # the grandchild verifies the sealed bytes; then (before reading) the pre-export's file is changed
    order.install(verdict_after_export=True, before_reading=lambda: _flip(run / "results.ndjson"))
    before = _children()
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.changed", "--create-stream", "--json",
                         capsys=capsys)
    assert code == 1 and "[AEP-1]" in err and "the run changed after it was verified" in err, err
    assert json.loads(out)["error"]["where"] == "results.ndjson"
    assert stream_count(nats_server.url, "AEF_CHANGED") == -1  # found before V: nothing sent
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before and order.gone()


def test_run_changed_after_verification_verdict_first(nats_server, tmp_path, monkeypatch, capsys,
                                                      tmpdir_for_spill) -> None:
    run = big_run(tmp_path, 2_000)
    n = len(list(export_events(run)))
    monkeypatch.setenv("AEFGATE_PUBLISH_BUFFER", "1")  # full after the first frame: the verdict is waited for
    order = _Order(tmp_path, monkeypatch)
    # changed between the verification and its verdict: whether the pre-export read the first frame before it was
    # killed at the verdict or the child exports from the start, the lines read are the changed ones (a change made
    # when the pre-export starts reading raced with that kill: a pre-export killed first left the run unchanged)
    # (and the pre-export does not read before the verification is done)
    order.install(after_verify=lambda: _flip(run / "results.ndjson"), before_reading=lambda: None)
    before = _children()
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.late", "--create-stream", "--json",
                         capsys=capsys)
    # V came with the first frame; the digest, compared before D, refuses the export (exit 1) after the events
    assert code == 1 and "[AEP-1]" in err and "the run changed after it was verified" in err, err
    assert json.loads(out)["error"]["where"] == "results.ndjson"
    # V came first: the destination was opened (the stream created, which happens only after V) and events may
    # have gone out before the refusal; how many reached the stream depends on when the parent met the R frame
    # (the connection is closed at the refusal with what nats-py still buffered: 0 is possible)
    assert 0 <= stream_count(nats_server.url, "AEF_LATE") <= n
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before and order.gone()


def test_blob_changed_after_verification(nats_server, tmp_path, monkeypatch, capsys, tmpdir_for_spill) -> None:
    run = copy_run(RUN, tmp_path / "run")
    blob = next(p for p in (run / "blobs").rglob("*") if p.is_file())
    order = _Order(tmp_path, monkeypatch)
    order.install(verdict_after_export=True, before_reading=lambda: blob.write_bytes(b"not what was sealed\n"))
    code, out, err = cli("publish", run, "--to", f"{nats_server.url}/aef.blob", "--create-stream",
                         "--max-capture", "full", "--json", capsys=capsys)
    assert code == 1 and "the run changed after it was verified" in err, err
    assert json.loads(out)["error"]["where"].startswith("blobs/sha256/")
    assert stream_count(nats_server.url, "AEF_BLOB") == -1


@pytest.mark.parametrize("cap", ["0", "1", "300000", "268435456", None])
def test_buffer_bounds_give_the_same_messages(nats_server, tmp_path, monkeypatch, tmpdir_for_spill, cap) -> None:
    # 0: no pre-export; 1: it stops after its first frame; 300000: after a few frames; 256 MiB (the suggested
    # bound): the pre-export stopped by the verdict or done first; None: the default (no pre-export); each against
    # the in-process producer
    run = big_run(tmp_path, 3_000)
    n = len(list(export_events(run)))
    before = _children()
    monkeypatch.setenv("AEFGATE_WORKERS", "0")
    rep = publish(run, f"{nats_server.url}/plain.s", create_stream=True)
    monkeypatch.delenv("AEFGATE_WORKERS")
    assert rep.ok and rep.acked == n
    if cap is not None:
        monkeypatch.setenv("AEFGATE_PUBLISH_BUFFER", cap)
    rep = publish(run, f"{nats_server.url}/capped.s", create_stream=True, spool=tmp_path / "sp")
    assert rep.ok and rep.acked == n and rep.pending == 0
    assert stream_messages(nats_server.url, "CAPPED_S") == stream_messages(nats_server.url, "PLAIN_S")
    assert list(tmpdir_for_spill.iterdir()) == []
    assert _children() <= before


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


def test_refusal_of_the_bridge_in_the_pre_export(nats_server, monkeypatch, tmpdir_for_spill) -> None:
    # an agent the CloudEvents bridge refuses (a noncharacter; AEP-3 refuses control characters before): the
    # pre-export meets the refusal before the verdict; it is raised after V, as in one process
    got = []
    for workers in (None, "0"):
        if workers is not None:
            monkeypatch.setenv("AEFGATE_WORKERS", workers)
        with pytest.raises(Refusal) as e:
            publish(RUN, f"{nats_server.url}/bridge.s{len(got)}", create_stream=True, agent="bad\ufdd0agent")
        got.append((e.value.rule, e.value.where, e.value.exit_code))
    assert got[0] == got[1] and got[0][0] in ("B4", "CE-2")
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
