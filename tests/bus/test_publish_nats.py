"""``aefgate publish`` to JetStream, on a real nats-server (tests/bus/_nats.py): every event once, idempotent
re-publish, and a server killed mid-publish: exit 1, the spool holds exactly the unacknowledged events, ``--resume``
delivers them, the stream ends with every event exactly once."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path


from aefgate.bus import codec, publish, resume
from aefgate.bus.nats_sink import stream_name
from aefgate.bus.spool import read_pending
from aefgate.converters.aep.exporter import export_events
from aefgate.formats.cloudevents import from_structured
from tests._shared import EXAMPLES, REPO

RUN = EXAMPLES / "aef-inspect" / "input"
SUBJECT = "aef.results"


def cli(*args, capsys=None) -> tuple[int, str, str]:
    """The CLI in this process (``aefgate.cli.app.run``), with ``publish`` registered as the lead will."""
    from aefgate.cli import app as appmod
    from aefgate.cli import publish_cmds

    if "publish" not in [c.name for c in appmod.app.registered_commands]:
        publish_cmds.register(appmod.app, appmod.aef_app)
    code = appmod.run([str(a) for a in args])
    out = err = ""
    if capsys is not None:
        out, err = capsys.readouterr()
    return code, out, err


def stream_messages(url: str, stream: str) -> list[tuple[dict, bytes]]:
    """Every message of the stream, in order (an ephemeral pull consumer, fetched in batches)."""

    async def go():
        import nats
        import nats.errors

        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            info = await js.stream_info(stream)
            total = info.state.messages
            out: list[tuple[dict, bytes]] = []
            if total:
                from nats.js.api import AckPolicy, ConsumerConfig

                psub = await js.pull_subscribe(info.config.subjects[0], stream=stream,
                                               config=ConsumerConfig(ack_policy=AckPolicy.NONE))
                while len(out) < total:
                    try:
                        msgs = await psub.fetch(min(1000, total - len(out)), timeout=2)
                    except nats.errors.TimeoutError:
                        break
                    out.extend((dict(m.headers or {}), m.data) for m in msgs)
                await psub.unsubscribe()
            return out
        finally:
            await nc.close()

    return asyncio.run(go())


def stream_count(url: str, stream: str) -> int:
    async def go():
        import nats

        nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False)
        try:
            return (await nc.jetstream().stream_info(stream)).state.messages
        finally:
            await nc.close()

    try:
        return asyncio.run(go())
    except Exception:
        return -1


def big_run(tmp: Path, lines: int) -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from make_runs import make_run
    finally:
        sys.path.pop(0)
    from aefgate.aef.sealer import seal_run

    run = make_run(tmp / "big", lines)
    seal_run(run, sealed_by="producer")
    return run


def test_publish_every_event_once_then_idempotent(nats_server, tmp_path, capsys) -> None:
    url = f"{nats_server.url}/{SUBJECT}"
    expected = list(export_events(RUN))
    code, out, err = cli("publish", RUN, "--to", url, "--create-stream", "--json", capsys=capsys)
    assert code == 0, err
    rep = json.loads(out)
    n = len(expected)
    assert rep["outcome"] == "complete" and rep["exitCode"] == 0
    assert (rep["total"], rep["published"], rep["acked"], rep["duplicate"], rep["failed"], rep["unsent"]) == \
        (n, n, n, 0, 0, 0)
    assert rep["destination"] == {"stream": "AEF_RESULTS", "streamCreated": True} and stream_name(SUBJECT) == \
        "AEF_RESULTS"
    msgs = stream_messages(nats_server.url, "AEF_RESULTS")
    assert len(msgs) == n
    for (headers, payload), ev in zip(msgs, expected):
        assert headers["content-type"] == "application/cloudevents+json"  # NATS binding, structured mode
        assert headers["Nats-Msg-Id"] == ev["id"]
        assert from_structured(payload) == ev  # the CloudEvents inverse gives the exported event back
    # again, in binary mode: every event acknowledged as a duplicate, the stream unchanged
    code, out, err = cli("publish", RUN, "--to", url, "--mode", "binary", "--json", capsys=capsys)
    rep = json.loads(out)
    assert code == 0 and (rep["acked"], rep["duplicate"]) == (n, n), err
    assert rep["destination"]["streamCreated"] is False
    assert len(stream_messages(nats_server.url, "AEF_RESULTS")) == n
    # the human report
    code, out, err = cli("publish", RUN, "--to", url, capsys=capsys)
    assert code == 0 and out == ""
    assert f"acked {n} ({n} duplicates)" in err and "complete" in err


def test_binary_mode_headers_read_back(nats_server) -> None:
    url = f"{nats_server.url}/aef.bin"
    expected = list(export_events(RUN))
    rep = publish(RUN, url, mode="binary", create_stream=True)
    assert rep.ok and rep.acked == len(expected)
    msgs = stream_messages(nats_server.url, "AEF_BIN")
    for (headers, payload), ev in zip(msgs, expected):
        assert headers["ce-id"] == ev["id"] and headers["ce-specversion"] == "1.0"
        assert headers["content-type"] == "application/json"  # datacontenttype
        assert codec.from_nats(headers, payload) == ev
    # format aep: the AEP event as JSON
    rep = publish(RUN, f"{nats_server.url}/aef.raw", format="aep", create_stream=True)
    assert rep.ok
    msgs = stream_messages(nats_server.url, "AEF_RAW")
    assert [json.loads(p) for _h, p in msgs] == expected
    assert [codec.from_nats(h, p) for h, p in msgs] == expected


def test_no_stream_is_refused_and_nothing_written(nats_server, tmp_path, capsys) -> None:
    code, out, err = cli("publish", RUN, "--to", f"{nats_server.url}/none.here", "--spool", tmp_path / "sp",
                         capsys=capsys)
    assert code == 2 and "[PUB-4]" in err and "--create-stream" in err
    assert not (tmp_path / "sp").exists()


def test_server_down_from_the_start_spools_everything(nats_server, tmp_path, capsys) -> None:
    url = f"{nats_server.url}/{SUBJECT}"
    nats_server.stop()
    code, out, err = cli("publish", RUN, "--to", url, "--spool", tmp_path / "sp", "--timeout", "1", "--retries", "2",
                         "--create-stream", "--json", capsys=capsys)
    rep = json.loads(out)
    n = len(list(export_events(RUN)))
    assert code == 1 and rep["outcome"] == "incomplete" and rep["unsent"] == n and rep["acked"] == 0
    assert "cannot connect" in rep["reason"] and "[PUB-5]" in err
    assert [e["id"] for e in read_pending(tmp_path / "sp")] == [e["id"] for e in export_events(RUN)]
    nats_server.start()
    code, out, err = cli("publish", "--resume", tmp_path / "sp", "--json", capsys=capsys)
    rep = json.loads(out)
    assert code == 0 and rep["acked"] == n and rep["pending"] == 0, err
    assert len(stream_messages(nats_server.url, "AEF_RESULTS")) == n
    assert read_pending(tmp_path / "sp") == []


def test_kill_mid_publish_then_resume(nats_server, tmp_path) -> None:
    run = big_run(tmp_path, 20_000)
    expected_ids = [e["id"] for e in export_events(run)]
    n = len(expected_ids)
    url = f"{nats_server.url}/{SUBJECT}"
    spool = tmp_path / "spool"
    box: dict = {}

    def go() -> None:
        try:
            box["report"] = publish(run, url, create_stream=True, spool=spool, timeout=2.0, retries=3)
        except BaseException as e:  # pragma: no cover - shown by the assertion below
            box["error"] = e

    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + 60
    while stream_count(nats_server.url, "AEF_RESULTS") < 2000 and time.monotonic() < deadline and t.is_alive():
        time.sleep(0.01)
    nats_server.stop()  # SIGKILL, mid-publish
    t.join(120)
    assert not t.is_alive() and "error" not in box, box.get("error")
    rep = box["report"]
    assert not rep.ok and rep.exit_code == 1
    assert 0 < rep.acked < n and rep.total == n
    assert rep.acked + rep.failed + rep.unsent == n
    assert rep.pending == n - rep.acked
    pending = [e["id"] for e in read_pending(spool)]
    assert len(pending) == len(set(pending)) == n - rep.acked
    # the spool holds exactly the unacknowledged events, in order
    nats_server.start()
    in_stream = [h["Nats-Msg-Id"] for h, _p in stream_messages(nats_server.url, "AEF_RESULTS")]
    acked_before = set(expected_ids) - set(pending)
    assert len(in_stream) == stream_count(nats_server.url, "AEF_RESULTS"), (len(in_stream), rep.acked)
    assert acked_before <= set(in_stream)  # an acknowledged event is in the stream
    assert pending == [i for i in expected_ids if i not in acked_before]
    # resume: exactly those are delivered; whatever got through unacknowledged is deduplicated
    rep2 = resume(spool)
    assert rep2.ok and rep2.total == len(pending) and rep2.acked == len(pending), rep2.to_json()
    assert rep2.pending == 0 and read_pending(spool) == []
    ids = [h["Nats-Msg-Id"] for h, _p in stream_messages(nats_server.url, "AEF_RESULTS")]
    assert sorted(ids) == sorted(expected_ids) and len(ids) == n  # every event exactly once
    # resuming a spool with nothing pending does nothing, successfully
    rep3 = resume(spool)
    assert rep3.ok and rep3.total == 0


def test_header_blocks_sent_as_they_are_match_nats_py(nats_server) -> None:
    """The wire (docs/design/bus.md): a header block made where the event is encoded goes out as exactly the HPUB
    nats-py's own ``publish`` writes for the same headers (bytes compared on a live connection), and the server
    stores the same message either way; with ``AEFGATE_NATS_RAW=0`` the block is sent through ``publish``."""
    import os

    from aefgate.bus.nats_sink import NatsSink
    from aefgate.bus.publish import parse_destination
    from aefgate.net.retry import Policy

    events = list(export_events(RUN, max_capture="full"))
    cases = []
    for ev in events[:3]:
        for fmt, mode in (("cloudevents", "structured"), ("cloudevents", "binary"), ("aep", "structured")):
            headers, body = codec.message(ev, fmt, mode)
            headers["Nats-Msg-Id"] = f"{ev['id']}.{fmt}.{mode}"  # one stored message each
            cases.append((headers, body))
    # odd values nats-py rewrites: stripped, CR/LF as spaces
    cases.append(({"content-type": " text/plain ", "X-Odd": "a\r\nb", "Nats-Msg-Id": "odd-1"}, b"{}"))
    assert codec.nats_header_block({"bad name": "x"}) is None and codec.nats_header_block({" ": "x"}) is None

    async def go(raw: bool) -> tuple[list[bytes], list[bytes]]:
        results = []
        sink = NatsSink(parse_destination(f"{nats_server.url}/wire.{int(raw)}"), "cloudevents", "structured",
                        Policy(retries=1, timeout=10), 8, True, lambda it, st, why: results.append(st))
        await sink.open()
        assert sink.fatal is None and sink._raw is raw
        nc = sink.nc
        ours, theirs = [], []
        real = nc._send_command

        async def capture(cmd, priority=False):
            ours.append(bytes(cmd))
            await real(cmd, priority)

        nc._send_command = capture
        from aefgate.bus.sinks import Item

        for i, (headers, body) in enumerate(cases):
            it = Item(i, None, headers["Nats-Msg-Id"])
            it.headers, it.body = codec.nats_header_block(headers), body
            await sink.submit(it)
        await sink.flush()

        async def keep(cmd, priority=False):  # nats-py's own bytes for the same sends, not sent
            theirs.append(bytes(cmd))

        nc._send_command = keep
        for i, (headers, body) in enumerate(cases):
            await nc.publish(sink.dest.subject, body, reply=f"{sink._prefix}{i + 1}", headers=dict(headers))
        nc._send_command = real
        await sink.close()
        assert results == ["acked"] * len(cases)
        return ours, theirs

    ours, theirs = asyncio.run(go(True))
    assert ours == theirs and len(ours) == len(cases)
    os.environ["AEFGATE_NATS_RAW"] = "0"
    try:
        ours0, theirs0 = asyncio.run(go(False))
    finally:
        del os.environ["AEFGATE_NATS_RAW"]
    assert ours0 == theirs0 and len(ours0) == len(cases)
    stored = stream_messages(nats_server.url, stream_name("wire.1"))
    assert stored == stream_messages(nats_server.url, stream_name("wire.0"))
    assert [(h, b) for h, b in stored] == [
        ({k.strip(): v.strip().replace("\r", " ").replace("\n", " ") for k, v in h.items()}, b) for h, b in cases]
