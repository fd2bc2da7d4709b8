"""``aefgate publish`` to HTTP, on a real ``ThreadingHTTPServer`` on loopback scripted to fail: 503, 429 with
Retry-After, 400; binary, structured and batched modes, every request read back with the cloudevents SDK's parser."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cloudevents.core.bindings import http as sdk_http
from cloudevents.core.formats.json import JSONFormat

from aefgate.bus import publish
from aefgate.net.retry import retry_after
from aefgate.converters.aep.exporter import export_events
from aefgate.formats.cloudevents import from_http
from tests.bus.test_publish_nats import RUN, cli


class Receiver:
    """An HTTP receiver on 127.0.0.1: answers the first requests from ``script`` (``(status, headers, body)``),
    then 200; keeps every request (``requests``) and the accepted ones (``accepted``)."""

    def __init__(self, script=()) -> None:
        self.script = list(script)
        self.requests: list[tuple[dict, bytes]] = []
        self.accepted: list[tuple[dict, bytes]] = []
        self.times: list[float] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer.lock:
                    outer.requests.append((headers, body))
                    outer.times.append(time.monotonic())
                    status, extra, text = outer.script.pop(0) if outer.script else (200, {}, b"")
                    if 200 <= status < 300:
                        outer.accepted.append((headers, body))
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def sdk_events(headers: dict, body: bytes) -> list:
    """What the cloudevents SDK's own parsers read in a request: the HTTP binding (binary or structured), or the
    JSON format for each member of a batch (the SDK has no batch reader)."""
    if headers["content-type"].startswith("application/cloudevents-batch+json"):
        fmt = JSONFormat()
        return [fmt.read(None, json.dumps(item).encode()) for item in json.loads(body)]
    return [sdk_http.from_http(sdk_http.HTTPMessage(headers=headers, body=body), JSONFormat())]


def received_events(rx: Receiver) -> list[dict]:
    out: list[dict] = []
    for headers, body in rx.accepted:
        got = from_http(headers, body)
        out.extend(got if isinstance(got, list) else [got])
    return out


@pytest.mark.parametrize("mode,batch", [("structured", 1), ("binary", 1), ("structured", 4)])
def test_retries_then_every_event_once(mode: str, batch: int) -> None:
    expected = list(export_events(RUN))
    script = [(503, {}, b"busy\n"), (429, {"Retry-After": "0"}, b""), (503, {"Retry-After": "0"}, b""),
              (429, {"Retry-After": "1"}, b"slow down\nplease")]
    with Receiver(script) as rx:
        rep = publish(RUN, rx.url, mode=mode, batch=batch, retries=5, timeout=10)
    assert rep.ok, rep.to_json()
    assert (rep.total, rep.acked, rep.failed, rep.unsent, rep.duplicate) == (len(expected), len(expected), 0, 0, 0)
    ids = {e["id"] for e in expected}
    assert rep.attempts == len(rx.requests) == len(rx.accepted) + 4
    assert received_events(rx) == expected  # every event, once, in order, none twice
    # Retry-After: 1 was honoured: the request after the 429 came at least ~1 s later
    assert rx.times[4] - rx.times[3] >= 0.9
    for headers, body in rx.requests:
        if batch > 1:
            assert headers["content-type"] == "application/cloudevents-batch+json"
        elif mode == "binary":
            assert "ce-id" in headers and headers["content-type"] == "application/json"
        else:
            assert headers["content-type"] == "application/cloudevents+json"
        for ce in sdk_events(headers, body):  # the SDK reads every request we sent
            assert ce.get_specversion() == "1.0" and ce.get_id() in ids and ce.get_source()
    sdk_ids = [ce.get_id() for h, b in rx.accepted for ce in sdk_events(h, b)]
    assert sdk_ids == [e["id"] for e in expected]


def test_400_fails_fast_with_the_reason(tmp_path, capsys) -> None:
    with Receiver([(400, {"content-type": "text/plain"}, b"schema says no: data.rating\nmore detail\n")]) as rx:
        code, out, err = cli("publish", RUN, "--to", rx.url, "--json", "--spool", tmp_path / "sp", capsys=capsys)
        assert len(rx.requests) == 1  # no retry, no further request
    rep = json.loads(out)
    n = len(list(export_events(RUN)))
    assert code == 1 and rep["outcome"] == "incomplete" and rep["exitCode"] == 1
    assert rep["failed"] == 1 and rep["unsent"] == n - 1 and rep["acked"] == 0
    assert "HTTP 400" in rep["reason"] and "schema says no: data.rating" in rep["reason"]
    assert "more detail" not in rep["reason"]
    assert "[PUB-5]" in err and "HTTP 400" in err
    assert rep["pending"] == n
    # resumed to a receiver that accepts: every event, once
    with Receiver() as rx:
        code, out, err = cli("publish", "--resume", tmp_path / "sp", "--to", rx.url, "--json", capsys=capsys)
    assert code == 0, err
    assert received_events(rx) == list(export_events(RUN))


def test_5xx_beyond_retries_or_deadline(capsys) -> None:
    with Receiver([(503, {}, b"down")] * 10) as rx:
        rep = publish(RUN, rx.url, retries=2, timeout=10)
    assert not rep.ok and rep.failed == 1 and len(rx.requests) == 3
    assert "HTTP 503" in rep.reason and "after 3 attempts" in rep.reason
    with Receiver([(429, {"Retry-After": "30"}, b"")] * 10) as rx:  # a Retry-After past the deadline: given up
        t0 = time.monotonic()
        rep = publish(RUN, rx.url, retries=5, timeout=2)
    assert not rep.ok and time.monotonic() - t0 < 2 and "deadline" in rep.reason


def test_connection_refused_is_retried_then_reported() -> None:
    with Receiver() as rx:
        url = rx.url
    rep = publish(RUN, url, retries=2, timeout=3)
    assert not rep.ok and rep.failed == 1 and "connection error" in rep.reason


def test_retry_after_forms() -> None:
    assert retry_after("0") == 0 and retry_after("12") == 12
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480 - 10) == pytest.approx(10)
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # in the past
    assert retry_after("soon") is None and retry_after(None) is None


def test_resume_a_spool_left_by_a_crashed_publisher(tmp_path) -> None:
    import os

    from aefgate.bus import resume
    from aefgate.bus.spool import Spool
    from aefgate.aef import jsonio

    events = list(export_events(RUN))
    with Receiver() as rx:
        sp = Spool.create(tmp_path / "sp", {"destination": rx.url, "options": {"format": "aep"}, "run": str(RUN)})
        sp.append(jsonio.dump_line(e) for e in events[:4])
        sp.mark_acked(1)
        sp.sync_acks()
        sp._events.write(jsonio.dump_line(events[4])[:-9])  # a line cut by the crash
        sp._events.flush()
        os.close(sp._lock_fd)  # the process died: its lock went with it
        rep = resume(tmp_path / "sp")
        assert rep.ok and rep.total == 3 and rep.warnings and "did not finish" in rep.warnings[0]
        assert [jsonio.loads(b) for _h, b in rx.accepted] == [events[0], events[2], events[3]]
    meta = jsonio.read_json(tmp_path / "sp" / "spool.json")
    assert meta["state"] == "closed" and meta["pending"] == 0 and meta["generation"] == 1
    assert sorted(p.name for p in (tmp_path / "sp").iterdir()) == ["acked-1.log", "events-1.jsonl", "lock",
                                                                   "spool.json"]
