"""``aefgate serve otlp`` on a disk that fills up (issue 28): a real, small tmpfs as its ``--out``, filled until the
kernel answers ENOSPC. The request the journal cannot take is answered 503 with ``Retry-After`` (nothing of it
kept), ``/healthz`` is 503 while the journal cannot be written, writing resumes by itself once space returns, a run
whose seal failed on the full disk is sealed later with every acknowledged record once, SIGTERM ends the process
within its drain time with no traceback and no temporary folder left. Also the bounded window of request bodies
recognised as retries (docs/gateway.md, "Retries")."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aefgate.bus.otlp_receiver import Bodies, Journal, JournalError
from aefgate.aef.verifier import verify_run
from tests.bus.test_otlp_receiver import Service, _lines
from tests.conftest import aefgate, cli_env


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs mounted for the test (unmounted after it)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount permission): {p.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _fill(disk: Path) -> Path:
    """Write a filler file until the disk answers ENOSPC; returns it (delete it to give the space back)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        block = b"\xaa" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    return filler


def _logs(run: str, cases: range) -> bytes:
    """An OTLP/JSON logs request: one evaluation event per case, of suite run ``run`` (several KiB: more than the
    page a journal's end may still have free)."""
    recs = [{"timeUnixNano": str(1_800_000_000_000_000_000 + i), "eventName": "gen_ai.evaluation.result",
             "attributes": [{"key": "gen_ai.evaluation.name", "value": {"stringValue": "Relevance"}},
                            {"key": "test.case.name", "value": {"stringValue": f"case-{i:03d}"}},
                            {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": i / 100}},
                            {"key": "gen_ai.evaluation.explanation", "value": {"stringValue": "x" * 200}}]}
            for i in cases]
    doc = {"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "disk-app"}},
        {"key": "test.suite.run.id", "value": {"stringValue": run}}]}, "scopeLogs": [{"logRecords": recs}]}]}
    return json.dumps(doc).encode()


class LoggedService(Service):
    """A :class:`Service` whose stderr goes to a file, read while it runs."""

    def start(self) -> "LoggedService":
        self.errfile = self.out.parent / f"stderr-{self.port}.txt"
        err = open(self.errfile, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aefgate", "serve", "otlp", "--out", str(self.out), "--listen",
             f"127.0.0.1:{self.port}", "--metrics-listen", f"127.0.0.1:{self.mport}", "--idle", "1", "--json",
             *self.extra], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=cli_env())
        err.close()
        self._wait(lambda: self._health() == 200, "the receiver did not start")
        return self

    def _health(self) -> int | None:
        try:
            return self.get("/healthz")[0]
        except OSError:
            return None

    def err(self) -> str:
        return self.errfile.read_text()

    def _wait(self, cond, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            assert self.proc.poll() is None, f"the receiver ended: {self.err()}"
            time.sleep(0.05)
        raise AssertionError(f"{what}: {self.err()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode(), self.err()


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in [*out.glob(".*.tmp-*"), *(out / ".otlp").glob(".build-*")])


def test_a_full_disk_is_an_outage_the_receiver_survives(small_disk: Path):
    out = small_disk / "runs"
    svc = LoggedService(out).start()
    try:
        first = _logs("full-disk", range(0, 20))
        assert svc.post("/v1/logs", first, "application/json")[0] == 200  # acknowledged before the disk filled
        filler = _fill(small_disk)
        second = _logs("full-disk", range(20, 40))
        status, headers, body = svc.post("/v1/logs", second, "application/json")  # the journal's write fails
        assert status == 503 and headers["retry-after"].isdigit(), body
        assert b"[IO-1]" in body and b"No space left on device" in body
        status, body = svc.get("/healthz")
        assert status == 503 and b"No space left on device" in body  # not ready while the journal cannot write
        assert svc.post("/v1/logs", second, "application/json")[0] == 503  # the retry, still full: 503 again
        filler.unlink()  # the space comes back: no restart
        svc._wait(lambda: svc._health() == 200, "the receiver did not become ready again")
        status, _h, body = svc.post("/v1/logs", second, "application/json")
        assert status == 200 and json.loads(body).get("partialSuccess", {}).get("rejectedLogRecords") in (None, "0")
        # full again: the group goes idle, its seal fails on the full disk, its records stay journaled
        filler = _fill(small_disk)
        svc._wait(lambda: "not sealed full-disk" in svc.err(), "no seal was tried on the full disk")
        assert svc.get("/healthz")[0] == 503
        assert not (out / "full-disk").exists() and _leftovers(out) == []
        filler.unlink()
        svc._wait(lambda: svc._health() == 200, "the receiver did not become ready again")
        assert svc.post("/v1/logs", first, "application/json")[0] == 200  # a retry of an acknowledged body: kept once
        svc._wait(lambda: (out / "full-disk").is_dir(), "the run was not sealed once the disk had space again")
        m = svc.metrics()
        assert m['aefgate_otlp_requests_total{signal="logs",status="503"}'] == 2
    finally:
        rc, stdout, err = svc.stop()
    assert rc == 0, err
    assert "Traceback" not in err and "unavailable: " in err and "available: the disk takes writes again" in err
    counts = json.loads(stdout)
    assert counts["runs"] == 1 and counts["duplicates"] == 1 and counts["unavailable"] == 2
    run = out / "full-disk"
    assert sorted(x["caseId"] for x in _lines(run)) == [f"case-{i:03d}" for i in range(40)]  # each exactly once
    assert verify_run(run).outcome == "intact"
    assert aefgate("verify", run).returncode == 0
    assert _leftovers(out) == [] and not (out / ".otlp" / ".probe").exists()


def test_sigterm_on_a_full_disk_ends_in_the_drain_time_and_leaves_nothing(small_disk: Path):
    out = small_disk / "runs"
    svc = LoggedService(out, "--drain-timeout", "5").start()
    first = _logs("sigterm-run", range(0, 15))
    assert svc.post("/v1/logs", first, "application/json")[0] == 200
    filler = _fill(small_disk)
    assert svc.post("/v1/logs", _logs("sigterm-run", range(15, 30)), "application/json")[0] == 503
    rc, _out, err = svc.stop(timeout=5 + 10)  # the drain time, and the interpreter's own exit
    assert rc == 0, err
    assert "Traceback" not in err and "left open 1 runs" in err
    assert _leftovers(out) == [] and not (out / "sigterm-run").exists()
    # a crashed build's leftovers, from a process killed mid-build: removed at the next start (never acknowledged)
    filler.unlink()
    (out / ".otlp" / ".build-k1ll3d").mkdir()
    (out / ".otlp" / ".build-k1ll3d" / "logs.jsonl").write_bytes(b"{}\n")
    (out / ".sigterm-run.tmp-0123abcd").mkdir()
    svc = LoggedService(out).start()
    assert _leftovers(out) == []
    svc._wait(lambda: (out / "sigterm-run").is_dir(), "the journaled run was not sealed after the restart")
    rc, stdout, err = svc.stop()
    assert rc == 0 and "Traceback" not in err, err
    assert json.loads(stdout)["runs"] == 1
    run = out / "sigterm-run"
    assert sorted(x["caseId"] for x in _lines(run)) == [f"case-{i:03d}" for i in range(15)]
    assert aefgate("verify", run).returncode == 0


def test_a_journal_append_on_a_full_disk_keeps_nothing_of_it(small_disk: Path):
    path = small_disk / "j" / "journal.ndjson"
    j = Journal(path)
    j.append([b'{"seq": 1}\n'])
    good = path.stat().st_size
    filler = _fill(small_disk)
    with pytest.raises(JournalError) as e:
        j.append([b'{"seq": 2, "pad": "' + b"y" * 200_000 + b'"}\n'])  # fails part-way: cut back
    assert e.value.errno == errno.ENOSPC
    assert path.stat().st_size == good and not j.torn
    filler.unlink()
    j.append([b'{"seq": 3}\n'])
    j.close()
    with open(path, "ab") as f:
        f.write(b'{"seq": 4, "torn')  # a crash mid-write: never acknowledged
    again = Journal(path)
    assert again.entries == [{"seq": 1}, {"seq": 3}]
    assert (again.dropped_lines, again.dropped_bytes) == (1, len(b'{"seq": 4, "torn'))
    again.close()
    assert path.read_bytes() == b'{"seq": 1}\n{"seq": 3}\n'


def test_the_window_of_known_bodies_is_bounded():
    b = Bodies(window=600, limit=3)
    for i in range(10):  # ten requests, each placed in run R<i>, each run sealed
        d = bytes([i]) * 16
        b.begin(d)
        b.end(d, {f"run:R{i}"})
        assert d in b  # open: a retry is kept once
        b.close(f"run:R{i}")
    assert len(b) == 3 and bytes([9]) * 16 in b and bytes([0]) * 16 not in b  # the oldest left first
    b.begin(b"n" * 16)
    b.end(b"n" * 16, None)  # never journaled: its retry is a new request
    assert b"n" * 16 not in b and not b.holders


def test_a_body_again_after_its_run_was_sealed(tmp_path: Path):
    """Within --dedup-window: answered 200, counted a duplicate, nothing kept. Past it (0 here): a new run."""
    body = _logs("again", range(3))
    for window, runs, duplicates in (("600", ["again"], 2), ("0", ["again", "again-00000002"], 1)):
        out = tmp_path / f"runs-{window}"
        svc = LoggedService(out, "--dedup-window", window).start()
        try:
            assert svc.post("/v1/logs", body, "application/json")[0] == 200
            assert svc.post("/v1/logs", body, "application/json")[0] == 200  # its run open: a retry, kept once
            svc._wait(lambda: (out / "again").is_dir(), "not sealed")
            assert svc.post("/v1/logs", body, "application/json")[0] == 200  # after the seal
        finally:
            rc, stdout, err = svc.stop()
        assert rc == 0, err
        assert [p.name for p in svc.runs()] == runs and json.loads(stdout)["duplicates"] == duplicates
        for run in svc.runs():
            assert sorted(x["caseId"] for x in _lines(run)) == ["case-000", "case-001", "case-002"]
