"""Issue 28, operations of ``serve ingest``: a restart after a crash does not split a session into two runs because
the idle window ran out while the service was down; and a seal that fails half-way leaves no staged folder."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from aefgate.bus.ingest import Store, run_name
from aefgate.aef.verifier import verify_run
from aefgate.formats.cloudevents import to_binary_http
from tests.bus._nats import free_port
from tests.bus.test_ingest import AT, ENTRY, SPEC, _events, reference, results, wait_for


def _start(out, port, log, idle: float) -> subprocess.Popen:
    err = open(log, "ab")
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", f"http://127.0.0.1:{port}",
                             "--out", str(out), "--idle", str(idle), "--at-fixed", AT, "--json"],
                            stdout=subprocess.PIPE, stderr=err)
    err.close()

    def up() -> bool:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            return c.getresponse().status == 200
        except OSError:
            return False

    wait_for(up, what="the HTTP intake")
    return proc


def _post(port: int, event: dict) -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("POST", "/", *reversed(to_binary_http(event)))
        return c.getresponse().status
    finally:
        c.close()


def test_a_restart_after_downtime_does_not_split_the_session(tmp_path):
    if not SPEC.is_dir():
        pytest.fail(f"the AEF spec examples are missing: {SPEC}")
    events = _events("aef-inspect/input")
    out, log, port, idle = tmp_path / "out", tmp_path / "serve.log", free_port(), 3.0
    name = run_name(events[0]["session"])
    proc = _start(out, port, log, idle)
    try:
        for e in events[:4]:
            assert _post(port, e) == 202
        proc.kill()  # a crash mid-session: the first events are journaled (acknowledged)
        proc.wait(timeout=10)
        time.sleep(idle + 1.0)  # down for longer than the idle window
        proc = _start(out, port, log, idle)
        t0 = time.monotonic()
        time.sleep(1.5)  # the service scans for idle journals every 0.75 s: it has looked at least once
        for e in events[4:]:  # the producer goes on, within the idle window of the service being back
            assert _post(port, e) == 202
        assert time.monotonic() - t0 < idle - 0.5, "the test's requests came too late to show anything"
        wait_for(lambda: (out / name).is_dir(), timeout=30, what="the run sealed")
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
    runs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert runs == [name], (runs, log.read_text()[-2000:])  # one run, not <name> and <name>.2
    assert verify_run(out / name).outcome == "intact"
    assert results(out / name) == results(reference(events, tmp_path))
    assert json.loads(stdout)["runs"] == 1


def test_a_seal_that_fails_leaves_no_staged_folder(tmp_path):
    """The run is built and staged, then its key file cannot be written (its temporary name is taken by a folder:
    an OSError, as a full disk would give): nothing is left in staging, the journal stays, a later seal makes the
    run."""
    events = _events("aef-inspect/input")
    out = tmp_path / "out"
    store = Store(out, at=AT)
    name = run_name(events[0]["session"])
    lines = [json.dumps({"k": f"{i:032x}", "w": f"http:{i}", "ce": False, "e": e}).encode() + b"\n"
             for i, e in enumerate(events)]
    store.append({name: lines})
    blocker = out / ".ingest" / "sealed" / f".{name}.keys.tmp"
    blocker.mkdir()
    with pytest.raises(OSError):
        store.seal(name)
    assert list((out / ".ingest" / "staging").iterdir()) == []
    assert not (out / name).exists() and not (out / ".ingest" / "sealed" / f"{name}.keys").exists()
    assert (out / ".journal" / f"{name}.jsonl").is_file()  # kept: nothing acknowledged is lost
    blocker.rmdir()
    outcome = store.seal(name)
    assert outcome is not None and outcome.run == out / name
    assert verify_run(out / name).outcome == "intact"
    assert results(out / name) == results(reference(events, tmp_path))
