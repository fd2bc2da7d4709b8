"""Issue 28: no secret in any output, log or file aefgate writes.

The masking function (``aefgate.masking``) on literal inputs; then the real commands: ``serve ingest``'s
dead-letter file (headers kept, credentials never, mode 0600), PUB-1 / PUB-5 / EVAPI-14 messages and the publish
spool with a URL's password, and the three HTTP servers' one log line for a malformed request (no traceback, no
header line).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aefgate.masking import kept_headers, mask, mask_headers, mask_url, strip_userinfo
from tests.bus._nats import free_port
from tests.bus.test_ingest import AT, ENTRY, SPEC, wait_for
from tests.conftest import aefgate, cli_env

SECRET = "s3cr3t-Pa55"
TOKEN = "tok-9f8e7d6c5b4a"
COOKIE = "sid=cookie-0a1b2c3d"


# -- the masking function ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, shown", [
    ("cannot connect to nats://alice:s3cr3t-Pa55@127.0.0.1:4222/aef.x: refused",
     "cannot connect to nats://***@127.0.0.1:4222/aef.x: refused"),
    ("nats://tok-9f8e7d6c5b4a@host:4222", "nats://***@host:4222"),
    ("Authorization: Bearer tok-9f8e7d6c5b4a", "Authorization: Bearer ***"),
    ("header x-api-key=tok-9f8e7d6c5b4a was refused", "header x-api-key=*** was refused"),
    ("Cookie: sid=cookie-0a1b2c3d", "Cookie: ***"),
    ("GET https://h/p?token=tok-9f8e7d6c5b4a&x=1", "GET https://h/p?token=***&x=1"),
    ("password=s3cr3t-Pa55", "password=***"),
    ("NATS authentication failed: Authorization Violation", "NATS authentication failed: Authorization Violation"),
    ("no credential here: nats://127.0.0.1:4222/a.b", "no credential here: nats://127.0.0.1:4222/a.b"),
])
def test_mask(text, shown):
    assert mask(text) == shown


def test_mask_url_strip_userinfo_and_headers():
    assert mask_url("nats://alice:s3cr3t-Pa55@[::1]:4222/aef.x") == "nats://***@[::1]:4222/aef.x"
    assert mask_url("https://api.example/v2?api_key=k1&q=2") == "https://api.example/v2?api_key=***&q=2"
    assert strip_userinfo("nats://alice:s3cr3t-Pa55@127.0.0.1:4222/aef.x") == "nats://127.0.0.1:4222/aef.x"
    assert mask("the server echoed tok-9f8e7d6c5b4a", secrets=[TOKEN]) == "the server echoed ***"
    assert mask_headers({"Authorization": "Bearer x", "Content-Type": "a/b", "X-Auth-Token": "t"}) == {
        "Authorization": "***", "Content-Type": "a/b", "X-Auth-Token": "***"}
    assert kept_headers({"Content-Type": "application/json", "ce-id": "e1", "ce-type": "t", "Authorization": "B x",
                         "Cookie": COOKIE, "Proxy-Authorization": "x", "X-Api-Key": "k", "Nats-Msg-Id": "n"}) == {
        "Content-Type": "application/json", "ce-id": "e1", "ce-type": "t"}


# -- serve ingest: the dead-letter file -----------------------------------------------------------------------------

def _raw_http(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)  # the server closes the connection after its answer (Connection: close, or a 400)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _up(port: int, path: str = "/healthz") -> bool:
    try:
        return _raw_http(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()).startswith(
            b"HTTP/1.1 200")
    except OSError:
        return False


# requests aiohttp cannot parse, each with a credential in a header line that is malformed or beside one
MALFORMED = [
    b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization Bearer tok-9f8e7d6c5b4a\r\nContent-Length: 0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-9f8e7d6c5b4a\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nCookie: sid=cookie-0a1b2c3d" + b"a" * 9000 + b"\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nX-Api-Key: tok-9f8e7d6c5b4a\x01\r\nContent-Length: 0\r\n\r\n",
]


def _no_secret(text: str) -> None:
    for s in (SECRET, TOKEN, COOKIE, "cookie-0a1b2c3d"):
        assert s not in text, f"{s!r} leaked: {text[-2000:]}"


def _malformed_logged_in_one_line(port: int, log: str) -> None:
    for req in MALFORMED:
        assert _raw_http(port, req).startswith(b"HTTP/1.")
    time.sleep(0.3)


def _check_log(log: str) -> None:
    _no_secret(log)
    assert "Traceback" not in log and "Error handling request" not in log, log
    lines = [ln for ln in log.splitlines() if "malformed request" in ln]
    assert len(lines) == len(MALFORMED), log
    assert all(ln.startswith("malformed request from 127.0.0.1: 400 ") for ln in lines), lines


def test_ingest_dead_letters_keep_no_credential_and_are_0600(tmp_path):
    from aefgate.formats.cloudevents import to_binary_http

    if not SPEC.is_dir():
        pytest.fail(f"the AEF spec examples are missing: {SPEC}")
    from tests.bus.test_ingest import _events

    event = _events("aef-inspect/input")[0]
    port = free_port()
    out = tmp_path / "out"
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", f"http://127.0.0.1:{port}",
                                 "--out", str(out), "--idle", "120", "--at-fixed", AT, "--json"],
                                stdout=subprocess.PIPE, stderr=err, env=cli_env())
    try:
        wait_for(lambda: _up(port), what="the HTTP intake")
        secret_headers = {"Authorization": f"Bearer {TOKEN}", "Cookie": COOKIE, "X-Api-Key": SECRET,
                          "Proxy-Authorization": f"Basic {SECRET}"}
        headers, _body = to_binary_http(event)
        bad = [({"content-type": "application/cloudevents+json", **secret_headers}, b"{nope"),
               ({**dict(headers), **secret_headers}, b"\xff\xfe not the data")]
        import http.client

        for h, b in bad:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("POST", "/", body=b, headers=h)
            assert c.getresponse().status == 400
            c.close()
        _malformed_logged_in_one_line(port, "")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0
    dead = out / ".ingest" / "dead-letter.jsonl"
    text = dead.read_text()
    _no_secret(text)
    records = [json.loads(x) for x in text.splitlines()]
    assert len(records) == 2
    assert {k.lower(): v for k, v in records[0]["message"]["headers"].items()} == {
        "content-type": "application/cloudevents+json"}
    assert records[0]["message"]["body"] == "{nope"
    kept = {k.lower(): v for k, v in records[1]["message"]["headers"].items()}
    assert kept["ce-id"] == event["id"] and kept["content-type"] == headers["content-type"]
    assert set(kept) == {"content-type"} | {k.lower() for k in headers if k.lower().startswith("ce-")}
    left = {k.lower() for k in records[1]["message"]["headersLeftOut"]}
    assert {"authorization", "cookie", "x-api-key", "proxy-authorization"} <= left
    assert stat.S_IMODE(dead.stat().st_mode) == 0o600
    _check_log(log.read_text())


def test_serve_otlp_and_evaluation_api_log_one_line_per_malformed_request(tmp_path):
    from tests.bus.test_otlp_receiver import Service

    svc = Service(tmp_path / "runs").start()
    try:
        _malformed_logged_in_one_line(svc.port, "")
    finally:
        rc, _out, err = svc.stop()
    assert rc == 0
    _check_log(err)

    port = free_port()
    run = SPEC / "aef-inspect" / "run"
    with open(tmp_path / "evapi.log", "wb") as errf:
        proc = subprocess.Popen([sys.executable, "-m", "aefgate", "serve", "evaluation-api", str(run), "--listen",
                                 f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=errf, env=cli_env())
    try:
        wait_for(lambda: _up(port), what="serve evaluation-api")
        _malformed_logged_in_one_line(port, "")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    _check_log((tmp_path / "evapi.log").read_text())


# -- publish: PUB-1, PUB-5 and the spool -------------------------------------------------------------------------

RUN = SPEC / "aef-inspect" / "run"


def test_publish_refusals_and_reports_mask_the_url_password(tmp_path):
    r = aefgate("publish", RUN, "--to", f"nats://alice:{SECRET}@127.0.0.1:4222/aef.*")
    assert r.returncode == 2 and "PUB-1" in r.stderr
    _no_secret(r.stderr + r.stdout)
    assert "nats://***@127.0.0.1:4222/aef.*" in r.stderr
    r = aefgate("publish", RUN, "--to", f"https://bob:{SECRET}@example.invalid/x")
    assert r.returncode == 2 and "PUB-1" in r.stderr
    _no_secret(r.stderr + r.stdout)
    # nothing listens there: PUB-5 with the reason, the URL masked in the message, the report and the spool
    dead = free_port()
    spool = tmp_path / "spool"
    r = aefgate("publish", RUN, "--to", f"nats://alice:{SECRET}@127.0.0.1:{dead}/aef.results", "--timeout", "1",
                "--retries", "1", "--spool", spool, "--json")
    assert r.returncode == 1, r.stderr
    _no_secret(r.stderr + r.stdout)
    report = json.loads(r.stdout)
    assert report["to"] == f"nats://***@127.0.0.1:{dead}/aef.results"
    assert "cannot connect to nats://***@" in report["reason"]
    for f in spool.iterdir():
        _no_secret(f.read_text(errors="replace"))
    meta = json.loads((spool / "spool.json").read_text())
    assert meta["destination"] == f"nats://127.0.0.1:{dead}/aef.results"
    assert meta["credentialsGiven"] is True
    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    # resume without the credentials: told to give them again; still nothing in clear
    r = aefgate("publish", "--resume", spool, "--timeout", "1", "--retries", "0", "--json")
    assert r.returncode == 1
    _no_secret(r.stderr + r.stdout)
    assert any("without the credentials" in w for w in json.loads(r.stdout)["warnings"])


def test_publish_spool_keeps_the_destination_without_credentials(nats_server, tmp_path):
    """A real publish (nats-server without auth takes any user) with a spool: no password in any spool file."""
    url = nats_server.url.replace("nats://", f"nats://alice:{SECRET}@") + "/aef.gw"
    spool = tmp_path / "spool"
    r = aefgate("publish", RUN, "--to", url, "--create-stream", "--spool", spool, "--json")
    assert r.returncode == 0, r.stderr
    _no_secret(r.stderr + r.stdout)
    for f in spool.iterdir():
        _no_secret(f.read_text(errors="replace"))
    assert json.loads((spool / "spool.json").read_text())["destination"] == nats_server.url + "/aef.gw"


def test_evaluation_api_live_masks_the_url_password(tmp_path):
    dead = free_port()
    r = aefgate("import", "evaluation-api", tmp_path / "out", "--url", f"http://bob:{SECRET}@127.0.0.1:{dead}",
                "--session", "s-1", "--subject", "agent:x", "--timeout", "1", "--poll", "0.2")
    assert r.returncode == 1 and "EVAPI-14" in r.stderr, r.stderr
    _no_secret(r.stderr + r.stdout)
    assert f"http://***@127.0.0.1:{dead}/api/v2/evaluation/status" in r.stderr


def test_ingest_nats_dead_letters_keep_no_credential(nats_server, tmp_path):
    """The NATS intake: a malformed message whose NATS headers carry credentials is dead-lettered without them."""
    from tests.bus.test_ingest import publish

    publish(nats_server.url, [({"content-type": "application/cloudevents+json", "Authorization": f"Bearer {TOKEN}",
                                "X-Api-Key": SECRET, "ce-id": "x-1", "Nats-Msg-Id": "gw-dead-1"}, b"{nope")])
    out = tmp_path / "out"
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "ingest", "--from",
                                 f"{nats_server.url}/aep.assess", "--durable", "gw-dead", "--out", str(out), "--idle",
                                 "120", "--at-fixed", AT, "--json"], stdout=subprocess.PIPE, stderr=err,
                                env=cli_env())
    dead = out / ".ingest" / "dead-letter.jsonl"
    try:
        wait_for(lambda: dead.is_file() and dead.read_text().strip(), what="the dead letter")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
    _no_secret(dead.read_text() + log.read_text())
    (rec,) = [json.loads(x) for x in dead.read_text().splitlines()]
    assert {k.lower(): v for k, v in rec["message"]["headers"].items()} == {
        "content-type": "application/cloudevents+json", "ce-id": "x-1"}
    assert {"authorization", "x-api-key", "nats-msg-id"} <= {k.lower() for k in rec["message"]["headersLeftOut"]}
    assert stat.S_IMODE(dead.stat().st_mode) == 0o600
