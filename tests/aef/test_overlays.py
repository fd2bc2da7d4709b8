"""Overlays (spec 04 §4.2, §4.3; spec 09 §9.2.1): the chain verifier, the effective view, authorized redactions and
``decide``, on copies of the sealed example run.

Crafted chains are written here by a small independent writer (hashlib and json, not aefgate's code), so the
verifier is checked against bytes it did not produce; ``decide`` is checked against the same verifier and the writer
schemas.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.aef import decisions, overlays as ov
from aefgate.aef.schema import validator
from aefgate.aef.verifier import verify_run
from tests._shared import EXAMPLES, copy_run

SOURCE = EXAMPLES / "aef-inspect" / "input"
RUN_ID = "01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10"
RUN_HASH = "f16b6a74505a359810e44611732c4d53ff61d32852983b165414811eb6a6627b"
R1 = "r_479d157f3423e95d566bcbfc0c6d2461"  # case-17 triage, failed (line 1)
R2 = "r_bb4438fbedb43552a9fe55695931d5e4"  # case-17 triage/policy, passed (line 2)
R5 = "r_3b156bcb57417545db27c39e78c955bd"  # case-18 triage, warn (line 5)
BLOB = "635221c9c64f48e2843e4186b0a1b66f07a1492c14dcb866bb83dba6a5e5fef5"
BLOB_PATH = f"blobs/sha256/63/{BLOB}"
EVENTS = "overlays/events.ndjson"
T0 = "2026-10-05T09:00:00Z"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(SOURCE, tmp_path / "run")


# -- an independent writer of events and batches ---------------------------------------------------------------------

_counter = iter(range(1, 1_000_000))


def event(kind: str, *, eid: str | None = None, by: str = "reviewer-42", at: str = T0, assurance="self-attested",
          run_id: str = RUN_ID, run_hash: str | None = RUN_HASH, **fields) -> dict:
    target = {"run": run_id}
    if run_hash is not None:
        target["runHash"] = run_hash
    for k in ("result", "requirement", "blob"):
        if k in fields:
            target[k] = fields.pop(k)
    ev = {"schemaVersion": "1.0", "eventId": eid or f"ov_t{next(_counter)}", "kind": kind, "target": target}
    ev.update(fields)
    ev.setdefault("reason", "because")
    ev["by"] = {"identity": by, "assurance": assurance}
    ev["at"] = at
    return ev


def line(ev: dict) -> bytes:
    return json.dumps(ev, separators=(",", ":")).encode() + b"\n"


def seals(run: Path) -> list[Path]:
    return sorted((run / "overlays").glob("seal-[0-9][0-9][0-9][0-9].json"))


def add_batch(run: Path, content, **over) -> dict:
    """Append ``content`` (events, or raw bytes) to the events file and seal it as the next batch. ``over`` replaces
    predicate members (``batch``, ``offset``, ``length``, ``previous``, ``runId``, ``runHash``), ``digest`` the
    subject digest, ``n`` the file number."""
    ovd = run / "overlays"
    ovd.mkdir(exist_ok=True)
    data = content if isinstance(content, bytes) else b"".join(line(e) for e in content)
    events = ovd / "events.ndjson"
    offset = events.stat().st_size if events.exists() else 0
    with open(events, "ab") as f:
        f.write(data)
    n = over.pop("n", len(seals(run)) + 1)
    previous = None
    if n > 1:
        prev = ovd / f"seal-{n - 1:04d}.json"
        previous = {"path": f"overlays/seal-{n - 1:04d}.json", "sha256": hashlib.sha256(prev.read_bytes()).hexdigest()}
    pred = {"schemaVersion": "1.0", "runId": RUN_ID, "runHash": RUN_HASH, "batch": n, "offset": offset,
            "length": len(data), "previous": previous}
    digest = over.pop("digest", None)
    pred.update(over)
    if digest is None:
        with open(events, "rb") as f:
            f.seek(pred["offset"])
            digest = hashlib.sha256(f.read(pred["length"])).hexdigest()
    statement = {"_type": "https://in-toto.io/Statement/v1",
                 "subject": [{"name": EVENTS, "digest": {"sha256": digest}}],
                 "predicateType": "https://agenteval.dev/aef/1/overlay-batch", "predicate": pred}
    (ovd / f"seal-{n:04d}.json").write_text(json.dumps(statement, indent=2))
    return statement


def problems(run: Path) -> list[list[str]]:
    return ov.verify_chain(run).to_json()["problems"]


def view(run: Path, at: str = "2026-10-10T00:00:00Z", policy=None) -> dict:
    return ov.effective_view(run, at, policy)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- a clean chain ---------------------------------------------------------------------------------------------------


def test_no_overlays(run: Path) -> None:
    assert problems(run) == []
    assert view(run) == {"results": [], "reviews": [], "waivers": [], "withheld": [], "unsealedEvents": 0,
                         "assurance": []}


def test_crafted_chain_verifies_and_views(run: Path) -> None:
    a = event("approve", eid="ov_a")
    o1 = event("override", eid="ov_o1", result=R5, state="passed")
    o2 = event("adjudicate", eid="ov_o2", result=R5, state="failed")  # the last one wins ([OVL-7])
    o3 = event("override", eid="ov_o3", result=R1, state="passed")
    r1 = event("approve", eid="ov_r1", result=R2)
    r2 = event("reject", eid="ov_r2", result=R2)  # the last one wins ([OVL-8])
    r3 = event("reject", eid="ov_r3", result=R1)
    n = event("annotate", eid="ov_n", requirement="REQ-1")
    add_batch(run, [a, o1, o2])
    add_batch(run, [o3, r1])
    add_batch(run, [r2, r3, n])
    assert problems(run) == []
    v = view(run)
    # results in results.ndjson order, whatever the event order ([OVL-6] applies, §9.2.1 orders)
    assert v["results"] == [
        {"resultId": R1, "sealedState": "failed", "effectiveState": "passed", "event": "ov_o3"},
        {"resultId": R5, "sealedState": "warn", "effectiveState": "failed", "event": "ov_o2"},
    ]
    assert v["reviews"] == [
        {"target": "run", "status": "approve", "event": "ov_a"},
        {"target": R1, "status": "reject", "event": "ov_r3"},
        {"target": R2, "status": "reject", "event": "ov_r2"},
    ]
    assert v["assurance"] == [{"event": e, "shown": "self-attested"}
                              for e in ("ov_a", "ov_o1", "ov_o2", "ov_o3", "ov_r1", "ov_r2", "ov_r3", "ov_n")]
    assert v["unsealedEvents"] == 0 and v["waivers"] == [] and v["withheld"] == []


def test_claimed_assurance_is_not_shown(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a", assurance="signed"),
                    event("approve", eid="ov_b", assurance="authenticated")])
    assert [a["shown"] for a in view(run)["assurance"]] == ["self-attested", "self-attested"]


def test_unknown_kind_is_an_annotation(run: Path) -> None:
    add_batch(run, [event("escalate", eid="ov_x", result=R1, state="passed"), event("approve", eid="ov_a")])
    assert problems(run) == []
    v = view(run)
    assert v["results"] == [] and [r["event"] for r in v["reviews"]] == ["ov_a"]
    assert [a["event"] for a in v["assurance"]] == ["ov_x", "ov_a"]


def test_waivers_active_and_expired(run: Path) -> None:
    w1 = event("waive", eid="ov_w1", requirement="REQ-42", at="2026-10-05T00:00:00Z",
               expires="2026-11-01T00:00:00Z")
    w2 = event("waive", eid="ov_w2", result=R1, at="2026-10-05T00:00:00Z", expires="2026-10-06T00:00:00.5Z")
    add_batch(run, [w1, w2])

    def active(at: str) -> list[bool]:
        return [w["active"] for w in view(run, at)["waivers"]]

    assert active("2026-10-04T23:59:59.999999999Z") == [False, False]  # before its at
    assert active("2026-10-05T00:00:00Z") == [True, True]  # at <= T
    assert active("2026-10-06T00:00:00.499Z") == [True, True]
    assert active("2026-10-06T00:00:00.500000000Z") == [True, False]  # T < expires, compared as times
    assert active("2026-11-01T00:00:00Z") == [False, False]  # expired at expires
    v = view(run, "2026-10-20T00:00:00Z")
    assert v["waivers"] == [
        {"target": {"requirement": "REQ-42"}, "expires": "2026-11-01T00:00:00Z", "active": True, "event": "ov_w1"},
        {"target": {"result": R1}, "expires": "2026-10-06T00:00:00.5Z", "active": False, "event": "ov_w2"},
    ]


# -- tampered chains: exactly the [OVL-5] codes, and what the view ignores ---------------------------------------------


def three_batches(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_b1")])
    add_batch(run, [event("override", eid="ov_b2", result=R1, state="passed")])
    add_batch(run, [event("reject", eid="ov_b3", result=R2)])


def test_batch_edited(run: Path) -> None:
    three_batches(run)
    p = run / EVENTS
    data = p.read_bytes()
    p.write_bytes(data.replace(b'"reason":"because"', b'"reason":"BECAUSE"', 1))  # inside batch 1
    assert problems(run) == [["overlays/seal-0001.json", "batch-digest"]]
    v = view(run)
    # batch 1 does not verify: neither it nor the later batches (which verify on their own) have an effect
    assert v["reviews"] == [] and v["results"] == [] and v["assurance"] == []
    assert v["unsealedEvents"] == 3


def test_later_batches_after_a_broken_one_have_no_effect(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_b1")])
    add_batch(run, [event("override", eid="ov_b2", result=R1, state="passed")], runHash="0" * 64)
    add_batch(run, [event("reject", eid="ov_b3")])
    assert problems(run) == [["overlays/seal-0002.json", "run-hash"]]
    v = view(run)
    assert v["reviews"] == [{"target": "run", "status": "approve", "event": "ov_b1"}]
    assert v["results"] == [] and [a["event"] for a in v["assurance"]] == ["ov_b1"]
    assert v["unsealedEvents"] == 2


def test_seal_removed(run: Path) -> None:
    three_batches(run)
    (run / "overlays" / "seal-0002.json").unlink()
    # missing below the highest; its bytes are unclaimed; the next one's previous names a missing file; its offset is
    # not checked
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0002.json", "missing"],
                             ["overlays/seal-0003.json", "previous"]]
    v = view(run)
    assert [a["event"] for a in v["assurance"]] == ["ov_b1"] and v["unsealedEvents"] == 2


def test_newest_seal_removed_leaves_uncovered_bytes(run: Path) -> None:
    three_batches(run)
    (run / "overlays" / "seal-0003.json").unlink()
    assert problems(run) == [[EVENTS, "uncovered"]]
    v = view(run)
    assert [a["event"] for a in v["assurance"]] == ["ov_b1", "ov_b2"] and v["unsealedEvents"] == 1


def test_newest_batch_removed_with_its_seal_verifies(run: Path) -> None:
    """What the chain cannot show (§4.2)."""
    three_batches(run)
    (run / "overlays" / "seal-0003.json").unlink()
    p = run / EVENTS
    p.write_bytes(b"".join(p.read_bytes().splitlines(keepends=True)[:2]))
    assert problems(run) == []


def test_batch_ending_mid_line(run: Path) -> None:
    data = line(event("approve", eid="ov_a")) + line(event("reject", eid="ov_b"))
    add_batch(run, data, length=len(data) - 10)
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0001.json", "line-boundary"]]
    assert view(run)["reviews"] == [] and view(run)["unsealedEvents"] == 2


def test_batch_starting_mid_line(run: Path) -> None:
    first = line(event("approve", eid="ov_a"))
    add_batch(run, first)
    second = line(event("reject", eid="ov_b"))
    add_batch(run, second, offset=len(first) + 3, length=len(second) - 3)
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0002.json", "line-boundary"],
                             ["overlays/seal-0002.json", "offset"]]


def test_range_past_the_end_of_the_file(run: Path) -> None:
    data = line(event("approve", eid="ov_a"))
    add_batch(run, data, length=len(data) + 100, digest=hashlib.sha256(data).hexdigest())
    assert problems(run) == [["overlays/seal-0001.json", "batch-digest"], ["overlays/seal-0001.json", "line-boundary"]]
    assert view(run)["reviews"] == []


def test_seals_without_events_file(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    (run / EVENTS).unlink()
    assert problems(run) == [["overlays/seal-0001.json", "batch-digest"], ["overlays/seal-0001.json", "line-boundary"]]


def test_uncovered_bytes_after_the_last_batch(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    with open(run / EVENTS, "ab") as f:  # an interrupted write: a line without its seal
        f.write(line(event("reject", eid="ov_b")))
    assert problems(run) == [[EVENTS, "uncovered"]]
    v = view(run)
    assert v["reviews"] == [{"target": "run", "status": "approve", "event": "ov_a"}]
    assert v["unsealedEvents"] == 1


def test_unfinished_last_line_is_no_line(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    with open(run / EVENTS, "ab") as f:
        f.write(line(event("reject", eid="ov_b"))[:-20])  # a crash mid-line
    assert problems(run) == [[EVENTS, "uncovered"]]
    v = view(run)
    assert v["unsealedEvents"] == 0 and [r["status"] for r in v["reviews"]] == ["approve"]
    report = ov.verify_chain(run)
    assert report.unfinished > 0 and report.verified == 1


def test_event_id_twice(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_same")])
    add_batch(run, [event("reject", eid="ov_same"), event("annotate", eid="ov_n")])
    assert problems(run) == [[f"{EVENTS}:2", "event-id"]]  # the later of the two
    v = view(run)
    assert v["reviews"] == [{"target": "run", "status": "approve", "event": "ov_same"}]
    assert [a["event"] for a in v["assurance"]] == ["ov_same", "ov_n"]  # the batch still verifies


def test_events_targeting_outside_the_run(run: Path) -> None:
    add_batch(run, [
        event("approve", eid="ov_1", run_id="another-run"),
        event("approve", eid="ov_2", run_hash="0" * 64),
        event("override", eid="ov_3", result="r_" + "0" * 32, state="passed"),
        event("approve", eid="ov_4", run_hash=None),  # runHash is optional
        event("approve", eid="ov_1"),  # the id of a target line is recorded: event-id too
    ])
    assert problems(run) == [[f"{EVENTS}:1", "target"], [f"{EVENTS}:2", "target"], [f"{EVENTS}:3", "target"],
                             [f"{EVENTS}:5", "event-id"]]
    v = view(run)
    assert v["reviews"] == [{"target": "run", "status": "approve", "event": "ov_4"}] and v["results"] == []
    assert [a["event"] for a in v["assurance"]] == ["ov_4"]


def test_event_invalid_lines(run: Path) -> None:
    good = event("approve", eid="ov_ok")
    data = (b'{"not": "an event"}\n' + line(event("override", eid="ov_p", result=R1, state="pending"))
            + b"\n" + line(event("reject", eid="ov_cr"))[:-1] + b"\r\n" + b"[1]\n"
            + line(event("waive", eid="ov_w", requirement="X"))  # a waiver needs expires
            + line(event("approve", eid="ov_d", at="2026-02-30T00:00:00Z"))  # a day that does not exist
            + line(event("approve", eid="ov_ok"))  # an invalid line's id is not recorded: no event-id
            + line(good))
    add_batch(run, data)
    assert problems(run) == [[f"{EVENTS}:{i}", "event-invalid"] for i in range(1, 8)] + [[f"{EVENTS}:9", "event-id"]]
    v = view(run)
    assert [a["event"] for a in v["assurance"]] == ["ov_ok"]


def test_line_paths_order_by_number(run: Path) -> None:
    lines = [line(event("annotate")) for _ in range(11)]
    lines[1] = b"{}\n"
    lines[9] = b"{}\n"
    add_batch(run, b"".join(lines))
    assert problems(run) == [[f"{EVENTS}:2", "event-invalid"], [f"{EVENTS}:10", "event-invalid"]]


def test_file_dropped_into_overlays(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    ovd = run / "overlays"
    (ovd / "notes.txt").write_text("hello")
    (ovd / ".DS_Store").write_bytes(b"\0")
    (ovd / "seal-12345.json").write_text("{}")
    (ovd / "seal-0001.json.bak").write_text("{}")
    (ovd / "sub").mkdir()
    (ovd / "sub" / "events.ndjson").write_text("")
    (ovd / "empty").mkdir()  # an empty folder is ignored
    (ovd / "seal-0007.dsse.json").write_text("{}")  # an orphan batch signature: a batch signature, no problem
    os.symlink(run / "run.json", ovd / "link.json")
    assert problems(run) == [[f"overlays/{n}", "unexpected-file"] for n in
                             (".DS_Store", "link.json", "notes.txt", "seal-0001.json.bak", "seal-12345.json",
                              "sub/events.ndjson")]
    assert view(run)["reviews"] == [{"target": "run", "status": "approve", "event": "ov_a"}]
    assert verify_run(run).outcome == "intact"  # nothing under overlays/ is a problem of the run


def test_links_are_never_followed(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.ndjson"
    outside.write_bytes(line(event("approve", eid="ov_a")))
    (run / "overlays").mkdir()
    os.symlink(outside, run / EVENTS)
    assert problems(run) == [[EVENTS, "unexpected-file"]]
    assert view(run)["reviews"] == []


def test_seal_0000(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    (run / "overlays" / "seal-0000.json").write_text("not even JSON")
    assert problems(run) == [["overlays/seal-0000.json", "batch-number"]]
    assert len(view(run)["reviews"]) == 1


def test_wrong_previous(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    add_batch(run, [event("reject", eid="ov_b")], previous={"path": "overlays/seal-0001.json", "sha256": "0" * 64})
    add_batch(run, [event("annotate", eid="ov_c")])
    assert problems(run) == [["overlays/seal-0002.json", "previous"]]
    assert [a["event"] for a in view(run)["assurance"]] == ["ov_a"]


def test_previous_naming_another_file(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    first = (run / "overlays" / "seal-0001.json").read_bytes()
    add_batch(run, [event("reject", eid="ov_b")],
              previous={"path": "overlays/seal-0003.json", "sha256": hashlib.sha256(first).hexdigest()})
    assert problems(run) == [["overlays/seal-0002.json", "previous"]]


def test_batch_one_with_a_previous(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")], previous={"path": "overlays/seal-0000.json", "sha256": "0" * 64})
    # the reader schema requires previous null for batch 1: the seal is not valid, and its bytes are unclaimed
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0001.json", "batch-invalid"]]


def test_batch_one_not_at_the_start(run: Path) -> None:
    first = line(event("approve", eid="ov_a"))
    second = line(event("reject", eid="ov_b"))
    add_batch(run, first + second, offset=len(first), length=len(second))
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0001.json", "offset"]]
    assert view(run)["unsealedEvents"] == 2


def test_previous_of_batch_one_named_by_file_number(run: Path) -> None:
    """seal-0001.json claiming batch 2 (with a previous): batch-number and previous, both by the file's number."""
    add_batch(run, [event("approve", eid="ov_a")], batch=2,
              previous={"path": "overlays/seal-0001.json", "sha256": "0" * 64})
    assert problems(run) == [["overlays/seal-0001.json", "batch-number"], ["overlays/seal-0001.json", "previous"]]


def test_batch_invalid(run: Path) -> None:
    three_batches(run)
    (run / "overlays" / "seal-0001.json").write_text('{"_type": "x"}')
    # not checked further; the next one's previous no longer matches; batch 1's bytes are unclaimed
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0001.json", "batch-invalid"],
                             ["overlays/seal-0002.json", "previous"]]
    assert view(run)["assurance"] == [] and view(run)["unsealedEvents"] == 3


def test_batch_number_run_id_run_hash(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")], batch=1)
    add_batch(run, [event("reject", eid="ov_b")], batch=3, runId="another-run", runHash="1" * 64)
    assert problems(run) == [["overlays/seal-0002.json", "batch-number"], ["overlays/seal-0002.json", "run-hash"],
                             ["overlays/seal-0002.json", "run-id"]]


def test_offset_overlapping_the_previous_batch(run: Path) -> None:
    first = line(event("approve", eid="ov_a"))
    add_batch(run, first)
    add_batch(run, line(event("reject", eid="ov_b")), offset=0, length=len(first))
    # the second claims the first's bytes again: offset; its own line is then uncovered
    assert problems(run) == [[EVENTS, "uncovered"], ["overlays/seal-0002.json", "offset"]]


def test_run_hash_is_the_sealed_value(run: Path) -> None:
    """[SEAL-4]: with a valid seal.json, the run's run hash is its predicate.runHash, even with a file changed;
    without one, the hash recomputed from the files."""
    add_batch(run, [event("approve", eid="ov_a")])
    (run / "summary.json").write_bytes((run / "summary.json").read_bytes() + b" ")
    assert problems(run) == []
    (run / "seal.json").unlink()
    recomputed = verify_run(run).run_hash
    assert recomputed != RUN_HASH
    assert problems(run) == [[f"{EVENTS}:1", "target"], ["overlays/seal-0001.json", "run-hash"]]


def test_too_many_lines_is_limit(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aefgate.aef import jsonio

    monkeypatch.setattr(jsonio, "MAX_LINES", 3)
    add_batch(run, [event("approve", eid="ov_a"), event("annotate", eid="ov_b")])
    add_batch(run, [event("reject", eid="ov_c"), event("annotate", eid="ov_d")])
    with open(run / EVENTS, "ab") as f:
        f.write(line(event("annotate", eid="ov_e")))
    assert problems(run) == [[EVENTS, "limit"], [EVENTS, "uncovered"]]
    v = view(run)
    # batch 1 is within the lines read and stands; nothing after it is read
    assert [a["event"] for a in v["assurance"]] == ["ov_a", "ov_b"] and v["unsealedEvents"] == 0


def test_too_many_files_is_limit_once(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ov, "MAX_OVERLAY_FILES", 4)
    add_batch(run, [event("approve", eid="ov_a")])
    for i in range(5):
        (run / "overlays" / f"junk-{i}").write_text("x")
    assert problems(run) == [["overlays", "limit"]]
    assert len(view(run)["reviews"]) == 1  # the chain is still checked from the files it names


# -- decide ---------------------------------------------------------------------------------------------------------


def test_decide_every_kind(run: Path) -> None:
    at = "2026-10-05T10:00:00Z"
    outs = [
        decisions.decide(run, kind="approve", by="reviewer-42", reason="Reviewed the sealed evidence", at=at),
        decisions.decide(run, kind="reject", by="reviewer-7", reason="Wrong answer", result=R1, at=at),
        decisions.decide(run, kind="override", by="reviewer-42", reason="Judge misread", result=R1, state="passed", at=at),
        decisions.decide(run, kind="adjudicate", by="panel", reason="Split resolved", result=R5, state="failed", at=at),
        decisions.decide(run, kind="waive", by="reviewer-42", reason="Pending retest", requirement="REQ-42", at=at,
                  expires="2026-11-01T00:00:00Z"),
        decisions.decide(run, kind="waive", by="reviewer-42", reason="Known flake", result=R2, at=at,
                  expires="2026-10-06T00:00:00Z"),
        decisions.decide(run, kind="acknowledge", by="reviewer-42", reason="Seen", result=R5, at=at),
        decisions.decide(run, kind="accept_baseline", by="reviewer-42", reason="New baseline", at=at),
        decisions.decide(run, kind="annotate", by="reviewer-42", reason="A note", requirement="REQ-7", at=at),
        decisions.decide(run, kind="redact", by="dpo", reason="Personal data", blob=BLOB, at=at),
    ]
    assert [o["batch"] for o in outs] == list(range(1, 11))
    ids = [o["eventId"] for o in outs]
    assert len(set(ids)) == 10
    assert problems(run) == []
    event_w = validator("overlay-event", "writer")
    seal_w = validator("overlay-seal", "writer")
    lines = (run / EVENTS).read_bytes().splitlines()
    assert len(lines) == 10
    for raw, o in zip(lines, outs):
        ev = json.loads(raw)
        assert event_w(ev) is None and ev == o["event"]
        assert ev["target"]["run"] == RUN_ID and ev["target"]["runHash"] == RUN_HASH
        assert ev["by"]["assurance"] == "self-attested" and ev["at"] == at
    for n, p in enumerate(seals(run), 1):
        st = json.loads(p.read_bytes())
        assert seal_w(st) is None and st["predicate"]["batch"] == n and st["predicate"]["runHash"] == RUN_HASH
    v = view(run, "2026-10-20T00:00:00Z")
    assert v["results"] == [
        {"resultId": R1, "sealedState": "failed", "effectiveState": "passed", "event": ids[2]},
        {"resultId": R5, "sealedState": "warn", "effectiveState": "failed", "event": ids[3]},
    ]
    assert v["reviews"] == [{"target": "run", "status": "approve", "event": ids[0]},
                            {"target": R1, "status": "reject", "event": ids[1]}]
    assert v["waivers"] == [
        {"target": {"requirement": "REQ-42"}, "expires": "2026-11-01T00:00:00Z", "active": True, "event": ids[4]},
        {"target": {"result": R2}, "expires": "2026-10-06T00:00:00Z", "active": False, "event": ids[5]},
    ]
    assert v["withheld"] == []  # an unsigned redaction withholds nothing
    assert v["unsealedEvents"] == 0
    assert v["assurance"] == [{"event": i, "shown": "self-attested"} for i in ids]
    # the sealed run is untouched
    assert verify_run(run).describe() == "intact (unsigned)"


def test_decide_refusals_leave_the_run_unchanged(run: Path) -> None:
    decisions.decide(run, kind="approve", by="a", reason="ok")
    before = snapshot(run)
    cases = [
        dict(kind="approve", by="a", reason="   "),
        dict(kind="approve", by="", reason="ok"),
        dict(kind="approve", by="a", reason="ok", result="r_" + "0" * 32),
        dict(kind="override", by="a", reason="ok", result=R1, state="pending"),
        dict(kind="override", by="a", reason="ok", result=R1),
        dict(kind="override", by="a", reason="ok", state="passed"),
        dict(kind="approve", by="a", reason="ok", requirement="REQ-1"),
        dict(kind="reject", by="a", reason="ok", expires="2099-01-01T00:00:00Z"),
        dict(kind="approve", by="a", reason="ok", state="passed"),
        dict(kind="waive", by="a", reason="ok", requirement="R", state="passed", expires="2099-01-01T00:00:00Z"),
        dict(kind="waive", by="a", reason="ok", expires="2099-01-01T00:00:00Z"),
        dict(kind="waive", by="a", reason="ok", result=R1, requirement="R", expires="2099-01-01T00:00:00Z"),
        dict(kind="waive", by="a", reason="ok", requirement="R"),
        dict(kind="waive", by="a", reason="ok", requirement="R", at=T0, expires=T0),
        dict(kind="waive", by="a", reason="ok", requirement="R", at=T0, expires="2026-10-05T08:59:59Z"),
        dict(kind="waive", by="a", reason="ok", requirement="R", expires="tomorrow"),
        dict(kind="redact", by="a", reason="ok"),
        dict(kind="redact", by="a", reason="ok", blob="0" * 64),
        dict(kind="publish", by="a", reason="ok"),
        dict(kind="approve", by="a", reason="ok", key_path=run.parent / "no-such-key.pem"),
    ]
    for kw in cases:
        with pytest.raises(Refusal) as e:
            decisions.decide(run, **kw)
        assert e.value.exit_code == 2, kw
    assert snapshot(run) == before


def test_decide_refuses_unsealed_and_invalid_runs(run: Path, tmp_path: Path) -> None:
    unsealed = copy_run(SOURCE, tmp_path / "unsealed")
    (unsealed / "seal.json").unlink()
    before = snapshot(unsealed)
    with pytest.raises(Refusal) as e:
        decisions.decide(unsealed, kind="approve", by="a", reason="ok")
    assert e.value.exit_code == 1 and snapshot(unsealed) == before
    p = run / "metrics.json"
    p.write_bytes(p.read_bytes() + b"\n")
    before = snapshot(run)
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="approve", by="a", reason="ok")
    assert e.value.exit_code == 1 and "digest at metrics.json" in e.value.message
    assert snapshot(run) == before


def test_decide_refuses_a_broken_chain(run: Path) -> None:
    add_batch(run, [event("approve", eid="ov_a")])
    p = run / EVENTS
    p.write_bytes(p.read_bytes().replace(b"because", b"BECAUSE"))
    before = snapshot(run)
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="approve", by="a", reason="ok")
    assert e.value.exit_code == 1 and "batch-digest" in e.value.message
    assert snapshot(run) == before


def test_decide_after_event_problems_appends(run: Path) -> None:
    """Problems about single events do not stop the chain: a new batch still verifies."""
    add_batch(run, b"{}\n" + line(event("approve", eid="ov_a")))
    out = decisions.decide(run, kind="reject", by="a", reason="changed my mind")
    assert out["batch"] == 2
    assert problems(run) == [[f"{EVENTS}:1", "event-invalid"]]
    assert view(run)["reviews"] == [{"target": "run", "status": "reject", "event": out["eventId"]}]


def test_interrupted_write(run: Path) -> None:
    decisions.decide(run, kind="approve", by="a", reason="ok")
    with open(run / EVENTS, "ab") as f:  # a crash between appending the line and writing its seal
        f.write(line(event("reject", eid="ov_crashed")))
    v = view(run)
    assert v["unsealedEvents"] == 1 and v["reviews"][0]["status"] == "approve"
    before = snapshot(run)
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="annotate", by="a", reason="note")
    assert e.value.exit_code == 2
    assert "1 unsealed event line" in e.value.message and "interrupted" in e.value.message
    assert snapshot(run) == before
    # someone deals with it (drops the unsealed line): deciding works again
    size = json.loads((run / "overlays" / "seal-0001.json").read_bytes())["predicate"]["length"]
    os.truncate(run / EVENTS, size)
    assert decisions.decide(run, kind="annotate", by="a", reason="note")["batch"] == 2
    assert problems(run) == []


def test_interrupted_mid_line(run: Path) -> None:
    decisions.decide(run, kind="approve", by="a", reason="ok")
    with open(run / EVENTS, "ab") as f:
        f.write(b'{"schemaVersion":"1.0","eventId":"ov_')
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="annotate", by="a", reason="note")
    assert e.value.exit_code == 2 and "unfinished last line" in e.value.message


def test_decide_refuses_an_orphan_signature_for_the_next_batch(run: Path) -> None:
    decisions.decide(run, kind="approve", by="a", reason="ok")
    (run / "overlays" / "seal-0002.dsse.json").write_text("{}")
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="annotate", by="a", reason="note")
    assert e.value.exit_code == 1 and e.value.where == "overlays/seal-0002.dsse.json"


# -- signatures: assurance and redactions ([OVL-3], [OVL-10]) ----------------------------------------------------------

signatures = pytest.importorskip("aefgate.aef.signatures")


@pytest.fixture
def keys(tmp_path: Path) -> dict:
    """Test keys (P-256 and Ed25519) and trust policies: dpo may redact, alice may not, mallory is not trusted."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    out: dict = {}
    entries = []
    for name, private, may in (("dpo", ec.generate_private_key(ec.SECP256R1()), ["redact"]),
                               ("alice", ed25519.Ed25519PrivateKey.generate(), []),
                               ("mallory", ec.generate_private_key(ec.SECP256R1()), ["redact"])):
        path = tmp_path / f"{name}.pem"
        path.write_bytes(private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()))
        out[name] = path
        public = private.public_key().public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
        entry = {"identity": f"oidc:{name}", "publicKey": public.decode("ascii")}
        if may:
            entry["may"] = may
        if name != "mallory":
            entries.append(entry)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"keys": entries}))
    out["policy"] = policy
    return out


def test_signed_batch_assurance(run: Path, keys: dict) -> None:
    a = decisions.decide(run, kind="approve", by="oidc:alice", reason="ok", key_path=keys["alice"])
    b = decisions.decide(run, kind="reject", by="oidc:dpo", reason="no", result=R1, key_path=keys["alice"])  # alice signs
    c = decisions.decide(run, kind="annotate", by="oidc:mallory", reason="n", key_path=keys["mallory"])  # untrusted key
    d = decisions.decide(run, kind="annotate", by="oidc:dpo", reason="n")  # unsigned
    assert a["signature"] == "overlays/seal-0001.dsse.json" and a["event"]["by"]["assurance"] == "signed"
    assert (run / "overlays" / "seal-0001.dsse.json").is_file()
    assert problems(run) == []
    shown = {x["event"]: x["shown"] for x in view(run, policy=keys["policy"])["assurance"]}
    assert shown == {a["eventId"]: "signed", b["eventId"]: "self-attested", c["eventId"]: "self-attested",
                     d["eventId"]: "self-attested"}
    # without a policy nothing is verified
    assert {x["shown"] for x in view(run)["assurance"]} == {"self-attested"}
    # a signature that no longer matches its seal verifies for no one
    env = run / "overlays" / "seal-0001.dsse.json"
    doc = json.loads(env.read_bytes())
    doc["payload"] = signatures.b64encode(b"{}")
    env.write_text(json.dumps(doc))
    assert view(run, policy=keys["policy"])["assurance"][0]["shown"] == "self-attested"


def test_authorized_redaction_withholds_a_deleted_blob(run: Path, keys: dict) -> None:
    out = decisions.decide(run, kind="redact", by="oidc:dpo", reason="personal data", blob=BLOB, key_path=keys["dpo"])
    policy = signatures.TrustPolicy.load(keys["policy"])
    assert ov.authorized_redactions(run, policy) == {BLOB_PATH}
    assert ov.authorized_redactions(run, keys["policy"]) == {BLOB_PATH}  # a path works too
    assert ov.authorized_redactions(run, None) == set()
    v = view(run, policy=keys["policy"])
    assert v["withheld"] == [BLOB] and v["assurance"] == [{"event": out["eventId"], "shown": "signed"}]
    (run / BLOB_PATH).unlink()
    withheld = verify_run(run, withheld_ok=ov.authorized_redactions(run, policy))
    assert withheld.outcome == "intact" and withheld.withheld == 1
    assert withheld.problems == [(BLOB_PATH, "withheld")]
    assert withheld.describe() == "intact, 1 withheld (unsigned)"
    # without the policy, the same deletion is missing: the run is invalid
    plain = verify_run(run, withheld_ok=ov.authorized_redactions(run, None))
    assert plain.outcome == "invalid" and (BLOB_PATH, "missing") in plain.problems
    # deciding still works on the run with a withheld blob, given the policy
    assert decisions.decide(run, kind="annotate", by="oidc:dpo", reason="erased", policy=policy)["batch"] == 2
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="annotate", by="oidc:dpo", reason="erased")
    assert e.value.exit_code == 1


def test_unauthorized_redactions_withhold_nothing(run: Path, keys: dict) -> None:
    decisions.decide(run, kind="redact", by="oidc:dpo", reason="unsigned", blob=BLOB)
    decisions.decide(run, kind="redact", by="oidc:alice", reason="alice may not redact", blob=BLOB, key_path=keys["alice"])
    decisions.decide(run, kind="redact", by="oidc:dpo", reason="signed by alice, not dpo", blob=BLOB,
              key_path=keys["alice"])
    decisions.decide(run, kind="redact", by="oidc:mallory", reason="untrusted", blob=BLOB, key_path=keys["mallory"])
    assert ov.authorized_redactions(run, keys["policy"]) == set()
    assert view(run, policy=keys["policy"])["withheld"] == []
    (run / BLOB_PATH).unlink()
    v = verify_run(run, withheld_ok=ov.authorized_redactions(run, keys["policy"]))
    assert v.outcome == "invalid" and (BLOB_PATH, "missing") in v.problems


def test_redaction_in_an_unverified_batch_withholds_nothing(run: Path, keys: dict) -> None:
    decisions.decide(run, kind="approve", by="a", reason="ok")
    decisions.decide(run, kind="redact", by="oidc:dpo", reason="pd", blob=BLOB, key_path=keys["dpo"])
    assert ov.authorized_redactions(run, keys["policy"]) == {BLOB_PATH}
    p = run / EVENTS
    p.write_bytes(p.read_bytes().replace(b'"reason":"ok"', b'"reason":"OK"'))  # batch 1 broken
    assert ov.authorized_redactions(run, keys["policy"]) == set()


def test_decide_refuses_bad_keys_before_writing(run: Path, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    def pem(key, enc=serialization.NoEncryption()) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    bad = {
        "malformed.pem": b"-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n",
        "encrypted.pem": pem(ec.generate_private_key(ec.SECP256R1()),
                             serialization.BestAvailableEncryption(b"secret")),
        "p384.pem": pem(ec.generate_private_key(ec.SECP384R1())),
        "rsa.pem": pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    }
    before = snapshot(run)
    for name, data in bad.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(Refusal) as e:
            decisions.decide(run, kind="approve", by="a", reason="ok", key_path=path)
        assert e.value.exit_code == 2, name
    assert snapshot(run) == before
    assert not (run / "overlays").exists()


def test_reading_does_not_depend_on_chunks(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The events file is split as it is streamed: every chunk size gives the same problems and view."""
    from aefgate.aef import jsonio

    add_batch(run, [event("approve", eid="ov_a"), event("override", eid="ov_b", result=R1, state="passed")])
    add_batch(run, b"\n{}\n" + line(event("reject", eid="ov_c", result=R1, reason="x" * 600)))
    with open(run / EVENTS, "ab") as f:
        f.write(line(event("annotate", eid="ov_d")) + b'{"unfinished":')
    monkeypatch.setattr(jsonio, "MAX_DOC", 450)  # the reject line is now over the line limit
    expected = [[EVENTS, "uncovered"], [f"{EVENTS}:3", "event-invalid"], [f"{EVENTS}:4", "event-invalid"],
                [f"{EVENTS}:5", "event-invalid"]]
    first = None
    for chunk in (1, 2, 7, 64, 1 << 20):
        monkeypatch.setattr(ov, "_CHUNK", chunk)
        assert problems(run) == expected, chunk
        v = view(run)
        first = first or v
        assert v == first and v["unsealedEvents"] == 1 and len(v["assurance"]) == 2


def test_a_failed_write_is_rolled_back(run: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A storage failure after writing started is exit 1, and the decision's own unsealed line (and signature) are
    removed again."""
    decisions.decide(run, kind="approve", by="a", reason="ok")
    before = snapshot(run)
    real = decisions._create_new

    def failing(path: Path, data: bytes) -> None:
        if path.name.endswith(".dsse.json"):
            return real(path, data)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(decisions, "_create_new", failing)
    with pytest.raises(Refusal) as e:
        decisions.decide(run, kind="annotate", by="a", reason="note")
    assert e.value.exit_code == 1 and "No space left" in e.value.message
    assert snapshot(run) == before
    sig = pytest.importorskip("aefgate.aef.signatures")
    key = tmp_path / "k.pem"
    key.write_bytes(sig.keygen("ed25519", "a")[0])
    with pytest.raises(Refusal):
        decisions.decide(run, kind="annotate", by="a", reason="note", key_path=key)
    assert snapshot(run) == before
    monkeypatch.setattr(decisions, "_create_new", real)
    assert decisions.decide(run, kind="annotate", by="a", reason="note", key_path=key)["batch"] == 2
    assert problems(run) == []


def test_integral_numbers_in_a_seal(run: Path) -> None:
    """[ENC-4]: 2.0 and 2e0 are the integer 2."""
    data = line(event("approve", eid="ov_a"))
    add_batch(run, [event("approve", eid="ov_a")])
    p = run / "overlays" / "seal-0001.json"
    st = json.loads(p.read_text())
    text = json.dumps(st).replace('"batch": 1,', '"batch": 1.0,').replace(
        f'"length": {len(data)}', f'"length": {float(len(data))}').replace('"offset": 0', '"offset": 0e0')
    assert "1.0" in text and "0e0" in text
    p.write_text(text)
    assert problems(run) == []
