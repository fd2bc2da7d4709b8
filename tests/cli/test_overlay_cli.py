"""The overlay commands as real processes: ``aefgate view``, ``aefgate decide``, ``aefgate aef chain``, ``aefgate aef
view``; two ``decide`` processes at once; an interrupted write; every refusal of ``decide`` (exit code, message,
nothing written)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aefgate.aef import decisions as ov
from tests._shared import EXAMPLES, copy_run
from tests.conftest import aefgate, cli_env, one_json

SOURCE = EXAMPLES / "aef-inspect" / "input"
R1 = "r_479d157f3423e95d566bcbfc0c6d2461"
R5 = "r_3b156bcb57417545db27c39e78c955bd"
BLOB = "635221c9c64f48e2843e4186b0a1b66f07a1492c14dcb866bb83dba6a5e5fef5"
BLOB_PATH = f"blobs/sha256/63/{BLOB}"
EVENTS = "overlays/events.ndjson"
AT = "2026-10-05T10:00:00Z"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(SOURCE, tmp_path / "run")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def decide(run: Path, *args: str):
    return aefgate("decide", run, *args)


def chain(run: Path) -> list:
    p = aefgate("aef", "chain", run)
    assert p.returncode == 0, p.stderr
    return one_json(p.stdout)["problems"]


@pytest.mark.parametrize("cmd", [["view"], ["decide"], ["aef", "chain"], ["aef", "view"]], ids=" ".join)
def test_help(cmd: list[str]) -> None:
    p = aefgate(*cmd, "--help")
    assert p.returncode == 0 and "Usage" in p.stdout


def test_decide_and_view(run: Path) -> None:
    p = decide(run, "--kind", "approve", "--by", "reviewer-42", "--reason", "Reviewed the sealed evidence",
               "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    out = one_json(p.stdout)
    assert out["batch"] == 1 and out["seal"] == "overlays/seal-0001.json" and out["signature"] is None
    assert out["identityVerified"] is False and out["eventId"].startswith("ov_")
    p = decide(run, "--kind", "override", "--by", "reviewer-42", "--reason", "Judge misread", "--result", R1,
               "--state", "passed", "--at", AT)
    assert p.returncode == 0 and p.stdout == ""
    assert "sealed    batch 2" in p.stderr and "self-attested" in p.stderr
    p = decide(run, "--kind", "waive", "--requirement", "REQ-42", "--by", "reviewer-42", "--reason",
               "Temporary exception pending retest", "--expires", "2026-11-01T00:00:00Z", "--at", AT)
    assert p.returncode == 0, p.stderr
    assert chain(run) == []

    p = aefgate("aef", "view", run, "--at", "2026-10-20T00:00:00Z")
    assert p.returncode == 0, p.stderr
    v = one_json(p.stdout)
    assert set(v) == {"results", "reviews", "waivers", "withheld", "unsealedEvents", "assurance"}
    assert v["results"] == [{"resultId": R1, "sealedState": "failed", "effectiveState": "passed",
                             "event": v["results"][0]["event"]}]
    assert v["reviews"][0]["target"] == "run" and v["reviews"][0]["status"] == "approve"
    assert v["waivers"][0]["active"] is True and v["unsealedEvents"] == 0 and len(v["assurance"]) == 3
    expired = one_json(aefgate("aef", "view", run, "--at", "2026-11-01T00:00:00Z").stdout)
    assert expired["waivers"][0]["active"] is False

    p = aefgate("view", run, "--at", "2026-11-02T00:00:00Z", "--json")
    assert p.returncode == 0, p.stderr
    full = one_json(p.stdout)
    assert full["verification"]["outcome"] == "intact" and full["chain"]["problems"] == []
    assert full["chain"]["batches"] == 3 and full["chain"]["verifiedBatches"] == 3
    assert full["view"]["waivers"][0]["active"] is False
    p = aefgate("view", run, "--at", "2026-11-02T00:00:00Z")
    assert p.returncode == 0 and p.stdout == ""
    for text in ("intact (unsigned)", "3 batches, 3 verified", "failed", "passed", "approve", "expired",
                 "REQ-42", "unsealed  0"):
        assert text in p.stderr, text


def test_two_decides_at_once(run: Path) -> None:
    """Two processes started together: both end sealed, in some order, with a chain that verifies."""
    procs = [subprocess.Popen([sys.executable, "-m", "aefgate", "decide", str(run), "--kind", kind, "--by", by,
                               "--reason", "at once", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), text=True)
             for kind, by in (("approve", "alice"), ("reject", "bob"))]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    batches = sorted(json.loads(o[0])["batch"] for o in outs)
    assert batches == [1, 2]
    assert chain(run) == []
    lines = (run / EVENTS).read_bytes().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["kind"] in ("approve", "reject") for x in lines)
    v = one_json(aefgate("aef", "view", run, "--at", "2030-01-01T00:00:00Z").stdout)
    assert len(v["assurance"]) == 2 and v["unsealedEvents"] == 0


def test_decides_queued_behind_a_lock(run: Path) -> None:
    """Both processes pass their preflight on an empty chain and then wait for the lock: the second must read the
    chain the first left (batch 2, chained to batch 1), never write from its stale reading."""
    (run / "overlays").mkdir()
    (run / EVENTS).touch()
    fd = os.open(run / EVENTS, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        procs = [subprocess.Popen([sys.executable, "-m", "aefgate", "decide", str(run), "--kind", "annotate",
                                   "--by", f"writer-{i}", "--reason", "queued", "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), text=True)
                 for i in range(3)]
        time.sleep(4)  # long enough for all three to load, verify, pass the preflight and block on the lock
        assert all(p.poll() is None for p in procs), "a decide did not wait for the lock"
        assert not list((run / "overlays").glob("seal-*"))
    finally:
        os.close(fd)
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert sorted(json.loads(o[0])["batch"] for o in outs) == [1, 2, 3]
    assert chain(run) == []


def test_interrupted_write(run: Path) -> None:
    assert decide(run, "--kind", "approve", "--by", "a", "--reason", "ok").returncode == 0
    ev = json.loads((run / EVENTS).read_bytes())
    ev["eventId"] = "ov_crashed"
    ev["kind"] = "reject"
    with open(run / EVENTS, "ab") as f:  # appended, never sealed: a crash between the line and its seal
        f.write(json.dumps(ev).encode() + b"\n")
    v = one_json(aefgate("aef", "view", run, "--at", AT).stdout)
    assert v["unsealedEvents"] == 1 and v["reviews"][0]["status"] == "approve"
    assert chain(run) == [[EVENTS, "uncovered"]]
    p = aefgate("view", run)
    assert p.returncode == 0 and "1 event line after the last verified batch" in p.stderr
    before = snapshot(run)
    p = decide(run, "--kind", "approve", "--by", "a", "--reason", "again")
    assert p.returncode == 2
    assert p.stderr.startswith(f"error [OVL-4] at {EVENTS}: ") and "interrupted" in p.stderr
    assert "1 unsealed event line" in p.stderr
    assert snapshot(run) == before


REFUSALS = {
    # name: (args, exit code, rule)
    "blank reason": (["--kind", "approve", "--by", "a", "--reason", "  "], 2, "OVL-1"),
    "blank identity": (["--kind", "approve", "--by", " ", "--reason", "ok"], 2, "OVL-1"),
    "result not in the run": (["--kind", "approve", "--by", "a", "--reason", "ok", "--result", "r_" + "0" * 32],
                              2, "OVL-2"),
    "state pending": (["--kind", "override", "--by", "a", "--reason", "ok", "--result", R1, "--state", "pending"],
                      2, "RES-3"),
    "override without state": (["--kind", "override", "--by", "a", "--reason", "ok", "--result", R1], 2, "OVL-1"),
    "adjudicate without result": (["--kind", "adjudicate", "--by", "a", "--reason", "ok", "--state", "passed"],
                                  2, "OVL-1"),
    "unknown state": (["--kind", "override", "--by", "a", "--reason", "ok", "--result", R1, "--state", "great"],
                      2, "OVL-1"),
    "state on approve": (["--kind", "approve", "--by", "a", "--reason", "ok", "--state", "passed"], 2, "OVL-1"),
    "state on waive": (["--kind", "waive", "--by", "a", "--reason", "ok", "--requirement", "R", "--state",
                        "passed", "--expires", "2099-01-01T00:00:00Z"], 2, "OVL-1"),
    "state on annotate": (["--kind", "annotate", "--by", "a", "--reason", "ok", "--state", "passed"], 2, "OVL-1"),
    "requirement on approve": (["--kind", "approve", "--by", "a", "--reason", "ok", "--requirement", "R"],
                               2, "OVL-1"),
    "requirement on reject": (["--kind", "reject", "--by", "a", "--reason", "ok", "--requirement", "R"],
                              2, "OVL-1"),
    "expires on approve": (["--kind", "approve", "--by", "a", "--reason", "ok", "--expires",
                            "2099-01-01T00:00:00Z"], 2, "OVL-9"),
    "expires on reject": (["--kind", "reject", "--by", "a", "--reason", "ok", "--result", R1, "--expires",
                           "2099-01-01T00:00:00Z"], 2, "OVL-9"),
    "waive without target": (["--kind", "waive", "--by", "a", "--reason", "ok", "--expires",
                              "2099-01-01T00:00:00Z"], 2, "OVL-1"),
    "waive with two targets": (["--kind", "waive", "--by", "a", "--reason", "ok", "--result", R1,
                                "--requirement", "R", "--expires", "2099-01-01T00:00:00Z"], 2, "OVL-1"),
    "waive without expires": (["--kind", "waive", "--by", "a", "--reason", "ok", "--requirement", "R"],
                              2, "OVL-9"),
    "expires at the decision time": (["--kind", "waive", "--by", "a", "--reason", "ok", "--requirement", "R",
                                      "--at", AT, "--expires", "2026-10-05T10:00:00.000Z"], 2, "OVL-9"),
    "expires before the decision time": (["--kind", "waive", "--by", "a", "--reason", "ok", "--requirement", "R",
                                          "--at", AT, "--expires", "2026-10-01T00:00:00Z"], 2, "OVL-9"),
    "expires not a UTC time": (["--kind", "waive", "--by", "a", "--reason", "ok", "--requirement", "R",
                                "--expires", "2026-11-01T00:00:00+01:00"], 2, "ENC-8"),
    "unknown kind": (["--kind", "bless", "--by", "a", "--reason", "ok"], 2, "OVL-1"),
    "redact without blob": (["--kind", "redact", "--by", "a", "--reason", "ok"], 2, "OVL-1"),
    "redact of a blob not in the run": (["--kind", "redact", "--by", "a", "--reason", "ok", "--blob", "0" * 64],
                                        2, "OVL-1"),
    "blob on approve": (["--kind", "approve", "--by", "a", "--reason", "ok", "--blob", BLOB], 2, "OVL-1"),
    "bad --at": (["--kind", "approve", "--by", "a", "--reason", "ok", "--at", "yesterday"], 2, "ENC-8"),
    "missing key": (["--kind", "approve", "--by", "a", "--reason", "ok", "--key", "/nonexistent/key.pem"],
                    2, "SIG-2"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_decide_refusals(run: Path, name: str) -> None:
    args, code, rule = REFUSALS[name]
    ov.decide(run, kind="approve", by="a", reason="first")  # set up in process: the refusal is what runs here
    before = snapshot(run)
    p = decide(run, *args)
    assert p.returncode == code, p.stderr
    assert p.stdout == "" and p.stderr.startswith(f"error [{rule}]") and p.stderr.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert snapshot(run) == before
    p = decide(run, *args, "--json")
    assert p.returncode == code and one_json(p.stdout)["error"]["rule"] == rule
    assert snapshot(run) == before


@pytest.mark.parametrize("kind", ["malformed", "encrypted", "unsupported"])
def test_decide_refuses_bad_keys(run: Path, tmp_path: Path, kind: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = tmp_path / "key.pem"
    if kind == "malformed":
        key.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    else:
        curve = ec.SECP256R1() if kind == "encrypted" else ec.SECP384R1()
        enc = serialization.BestAvailableEncryption(b"pw") if kind == "encrypted" else serialization.NoEncryption()
        key.write_bytes(ec.generate_private_key(curve).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc))
    before = snapshot(run)
    p = decide(run, "--kind", "approve", "--by", "a", "--reason", "ok", "--key", key)
    assert p.returncode == 2 and p.stderr.startswith("error [SIG-2]"), p.stderr
    assert snapshot(run) == before


def test_decide_refuses_unsealed_and_invalid_runs(run: Path, tmp_path: Path) -> None:
    unsealed = copy_run(SOURCE, tmp_path / "unsealed")
    (unsealed / "seal.json").unlink()
    before = snapshot(unsealed)
    p = decide(unsealed, "--kind", "approve", "--by", "a", "--reason", "ok")
    assert p.returncode == 1 and p.stderr.startswith("error [OVL-4] at seal.json: the run is not sealed")
    assert snapshot(unsealed) == before
    (run / "summary.json").write_bytes((run / "summary.json").read_bytes() + b" ")
    before = snapshot(run)
    p = decide(run, "--kind", "approve", "--by", "a", "--reason", "ok")
    assert p.returncode == 1 and "the run is invalid" in p.stderr
    assert snapshot(run) == before
    p = decide(tmp_path / "nowhere", "--kind", "approve", "--by", "a", "--reason", "ok")
    assert p.returncode == 2 and p.stderr.startswith("error [RUN-1]")


def test_decide_refuses_a_broken_chain(run: Path) -> None:
    ov.decide(run, kind="approve", by="a", reason="ok")
    (run / "overlays" / "seal-0002.json").write_text("{}")
    before = snapshot(run)
    p = decide(run, "--kind", "approve", "--by", "a", "--reason", "ok")
    assert p.returncode == 1 and "batch-invalid at overlays/seal-0002.json" in p.stderr
    assert snapshot(run) == before


def test_aef_operations_input_errors(run: Path, tmp_path: Path) -> None:
    for args in (["aef", "chain", tmp_path / "nowhere"], ["aef", "view", tmp_path / "nowhere", "--at", AT],
                 ["aef", "view", run, "--at", "tomorrow"], ["aef", "view", run],
                 ["aef", "view", run, "--at", AT, "--policy", tmp_path / "none.json"],
                 ["view", run, "--at", "not a time"]):
        p = aefgate(*args)
        assert p.returncode == 2 and p.stdout == "" and p.stderr, args
        assert "Traceback" not in p.stderr
    bad = tmp_path / "bad-policy.json"
    bad.write_text('{"keys": [{"identity": "x", "publicKey": "nope"}]}')
    p = aefgate("aef", "view", run, "--at", AT, "--policy", bad)
    assert p.returncode == 2 and p.stdout == ""


def test_aef_chain_reports_problems_with_exit_0(run: Path) -> None:
    ov.decide(run, kind="approve", by="a", reason="ok")
    (run / "overlays" / "notes.txt").write_text("x")
    with open(run / EVENTS, "ab") as f:
        f.write(b"{}\n")
    p = aefgate("aef", "chain", run)
    assert p.returncode == 0
    assert one_json(p.stdout) == {"problems": [[EVENTS, "uncovered"], [f"{EVENTS}:2", "event-invalid"],
                                               ["overlays/notes.txt", "unexpected-file"]]}
    p = aefgate("view", run, "--json")
    assert p.returncode == 0  # view never fails on what it shows
    assert one_json(p.stdout)["chain"]["problems"][0] == [EVENTS, "uncovered"]


def test_signed_redaction_end_to_end(run: Path, tmp_path: Path) -> None:
    signatures = pytest.importorskip("aefgate.aef.signatures")
    priv, _pub, entry = signatures.keygen("ecdsa-p256", "oidc:dpo", ["redact"])
    key = tmp_path / "dpo.pem"
    key.write_bytes(priv)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"keys": [entry]}))
    p = decide(run, "--kind", "redact", "--by", "oidc:dpo", "--reason", "personal data", "--blob",
               f"sha256:{BLOB}", "--key", key, "--json")
    assert p.returncode == 0, p.stderr
    out = one_json(p.stdout)
    assert out["signature"] == "overlays/seal-0001.dsse.json" and out["keyid"].startswith("sha256:")
    assert (run / out["signature"]).is_file()
    (run / BLOB_PATH).unlink()
    v = one_json(aefgate("aef", "view", run, "--at", AT, "--policy", policy).stdout)
    assert v["withheld"] == [BLOB] and v["assurance"][0]["shown"] == "signed"
    assert one_json(aefgate("aef", "view", run, "--at", AT).stdout)["withheld"] == []
    p = aefgate("view", run, "--policy", policy)
    assert p.returncode == 0 and "intact, 1 withheld" in p.stderr and "authorized" in p.stderr
    p = aefgate("view", run)
    assert p.returncode == 0 and "invalid" in p.stderr and "not authorized" in p.stderr
    # deciding on the run with its withheld blob needs the policy that authorizes it
    assert decide(run, "--kind", "annotate", "--by", "a", "--reason", "n").returncode == 1
    p = decide(run, "--kind", "annotate", "--by", "a", "--reason", "n", "--policy", policy)
    assert p.returncode == 0, p.stderr


def test_unsigned_redaction_warns(run: Path) -> None:
    p = decide(run, "--kind", "redact", "--by", "a", "--reason", "pd", "--blob", BLOB_PATH)
    assert p.returncode == 0 and "an unsigned redaction withholds nothing" in p.stderr
