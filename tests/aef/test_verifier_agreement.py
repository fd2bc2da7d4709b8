"""Problem lists where aefgate and the reference verifier (``aef_verify.py run``) once differed (issue 20).

1. A byte changed in the root result line of the completed-eval run: [RES-6] defines a node's children as "the
   distinct resultIds of the lines whose parentResultId is its resultId", whatever their case, so a composite whose
   caseId changed keeps its three children: its lines are `parent` problems ([RES-5], §3.9), its `total` still
   counts them, and no `aggregation` problem is reported.
2. A secret-bearing ``deployment.endpoint`` ([RUN-10]) makes run.json fail its schema; [SEAL-6] still compares the
   seal's predicate (and runId, and status) with run.json as read: no rule blocks the seal's checks on a schema
   problem (§3.9's blocking covers the rules of its own table).

Every expected list is written by hand from the specification's tables (§3.9, [SEAL-6]), in §3.9's order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.aef.verifier import verify_run
from tests._shared import CONFORMANCE, EXAMPLES, copy_run

COMPLETED_EVAL = CONFORMANCE / "valid" / "completed-eval" / "run"  # sealed; line 1 is case-17's composite
NO_DEPLOYMENT = EXAMPLES / "inspect-aef" / "run"  # sealed; run.json has no deployment (the predicate's is null)
SECRET_ENDPOINT = "https://user:secret@example.com/v1"  # user information: the schema refuses it ([RUN-10])


def _sealed_copy(tmp_path: Path, src: Path = COMPLETED_EVAL) -> Path:
    run = copy_run(src, tmp_path / "run")
    assert (run / "seal.json").is_file()
    return run


def _change_byte(run: Path, lineno: int, before: bytes, after: bytes) -> None:
    """Replace the one occurrence of ``before`` in line ``lineno`` of results.ndjson by ``after`` (same length,
    one byte different)."""
    assert len(before) == len(after) and sum(a != b for a, b in zip(before, after)) == 1
    p = run / "results.ndjson"
    lines = p.read_bytes().split(b"\n")
    assert lines[lineno - 1].count(before) == 1
    lines[lineno - 1] = lines[lineno - 1].replace(before, after)
    p.write_bytes(b"\n".join(lines))


def _edit_run_json(run: Path, edit) -> None:
    d = json.loads((run / "run.json").read_text())
    edit(d)
    (run / "run.json").write_text(json.dumps(d, indent=2, ensure_ascii=False))


# -- 1. the root result line ---------------------------------------------------------------------------------------


def test_root_line_case_changed(tmp_path):
    run = _sealed_copy(tmp_path)
    # line 1: case-17 -> case-07 (one byte)
    _change_byte(run, 1, b'"caseId":"case-17"', b'"caseId":"case-07"')
    v = verify_run(run)
    assert v.outcome == "invalid"
    assert v.problems == [
        ("results.ndjson", "digest"),  # [SEAL-6]: a sealed file whose bytes changed
        ("results.ndjson:1", "result-id"),  # [RES-4]: the caseId is part of the hash
        # §3.9 parent: lines 2-4 (case-17) name line 1, now a line of another case
        ("results.ndjson:2", "parent"),
        ("results.ndjson:3", "parent"),
        ("results.ndjson:4", "parent"),
        # and no aggregation at line 1: lines 2-4 still name its resultId, so they are its three children
        # ([RES-6]): total 3, measured 2 + unmeasured 1, its decisive id (line 3's) one of them
    ]


def test_child_line_case_changed(tmp_path):
    run = _sealed_copy(tmp_path)
    _change_byte(run, 2, b'"caseId":"case-17"', b'"caseId":"case-07"')
    v = verify_run(run)
    # line 2 is still one of line 1's three children ([RES-6]); its own problems are at its line
    assert v.problems == [
        ("results.ndjson", "digest"),
        ("results.ndjson:2", "parent"),
        ("results.ndjson:2", "result-id"),
    ]


def test_root_line_result_id_changed(tmp_path):
    run = _sealed_copy(tmp_path)
    # line 1's resultId r_479d... -> r_079d... (one byte): no line names that id
    _change_byte(run, 1, b'"resultId":"r_479d', b'"resultId":"r_079d')
    v = verify_run(run)
    assert v.problems == [
        ("gates.ndjson:1", "gate"),  # the gate names r_479d..., now no line of the run
        ("results.ndjson", "digest"),
        # [RES-6]: no line's parentResultId is r_079d...: no children, against a total of 3 (and its decisive id
        # is no child)
        ("results.ndjson:1", "aggregation"),
        ("results.ndjson:1", "result-id"),  # not the [RES-4] hash of the line
        ("results.ndjson:2", "parent"),  # r_479d... is no line of the run
        ("results.ndjson:3", "parent"),
        ("results.ndjson:4", "parent"),
    ]


@pytest.mark.parametrize("window", ["0", "1", "3", "4096"])
@pytest.mark.parametrize("line", [1, 2])
def test_case_changed_spilled(tmp_path, monkeypatch, line, window):
    """The spilled path (state on disk, a window of recent lines) counts the children of another case too."""
    from tests.aef.test_verifier_spill import _both, _same

    run = _sealed_copy(tmp_path)
    _change_byte(run, line, b'"caseId":"case-17"', b'"caseId":"case-07"')
    memory, spilled = _both(monkeypatch, run, window)
    _same(memory, spilled)
    assert ("results.ndjson:1", "aggregation") not in spilled.problems


# -- 2. the seal against a run.json that fails its schema ------------------------------------------------------------


def test_secret_endpoint_added_after_sealing(tmp_path):
    run = _sealed_copy(tmp_path, NO_DEPLOYMENT)
    _edit_run_json(run, lambda d: d.update(deployment={"ref": "deployment:x/y", "endpoint": SECRET_ENDPOINT}))
    v = verify_run(run)
    assert v.outcome == "invalid"
    assert v.problems == [
        ("run.json", "digest"),  # [SEAL-6]
        ("run.json", "schema"),  # [RUN-10]: the reader schema refuses user information in the endpoint
        ("seal.json", "predicate"),  # [SEAL-6]: a deployment where the predicate's is null ([SEAL-5])
    ]


def test_secret_endpoint_only(tmp_path):
    """The predicate compares the deployment's ref only ([SEAL-6]): a changed endpoint alone is no predicate
    problem."""
    run = _sealed_copy(tmp_path)
    _edit_run_json(run, lambda d: d["deployment"].update(endpoint=SECRET_ENDPOINT))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "schema")]
    _edit_run_json(run, lambda d: d["deployment"].update(ref="deployment:support/other@dev"))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "schema"), ("seal.json", "predicate")]


def test_run_id_and_run_open_against_a_run_json_failing_its_schema(tmp_path):
    run = _sealed_copy(tmp_path)
    _edit_run_json(run, lambda d: (d["deployment"].update(endpoint=SECRET_ENDPOINT), d.update(runId="another-run")))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "schema"), ("seal.json", "run-id")]
    run = _sealed_copy(tmp_path / "2")
    _edit_run_json(run, lambda d: (d["deployment"].update(endpoint=SECRET_ENDPOINT), d.update(status="running"),
                                   d.pop("endedAt")))
    # running: run-open; no endedAt to equal the predicate's closedAt: predicate
    assert verify_run(run).problems == [
        ("run.json", "digest"),
        ("run.json", "run-open"),
        ("run.json", "schema"),
        ("seal.json", "predicate"),
    ]


@pytest.mark.parametrize(
    ("member", "value", "seal_problems"),
    [
        # the fields the predicate holds "as run.json gives them" ([SEAL-5]): absent or of another type, they
        # do not give them (a difference); never a crash
        ("producer", "agenteval-cli", [("seal.json", "predicate")]),
        ("producer", [], [("seal.json", "predicate")]),
        ("subject", None, [("seal.json", "predicate")]),
        ("deployment", "deployment:support/support-triage@dev", [("seal.json", "predicate")]),
        ("deployment", None, [("seal.json", "predicate")]),  # null: no deployment, where the predicate has one
        ("suite", [], [("seal.json", "predicate")]),
        ("judges", {}, [("seal.json", "predicate")]),  # not the [] of no judges
        ("judges", [1], [("seal.json", "predicate")]),
        ("judges", "ab", [("seal.json", "predicate")]),
        ("endedAt", 5, [("seal.json", "predicate")]),
        ("endedAt", "2026-10-02T14:06:23.004", [("seal.json", "predicate")]),  # no zone: not a time ([ENC-8])
        ("endedAt", "2026-02-31T14:06:23.004Z", [("seal.json", "predicate")]),  # a time that does not exist
        ("startedAt", "2026-02-31T14:02:11.120Z", []),  # schema ([ENC-8]); the predicate holds no startedAt
        ("runId", 7, [("seal.json", "run-id")]),
        ("status", 1, []),  # not running
        ("schemaVersion", 5, []),  # nothing the seal compares
        ("config", "x", []),
    ],
)
def test_ill_typed_run_json_against_the_seal(tmp_path, member, value, seal_problems):
    run = _sealed_copy(tmp_path)
    _edit_run_json(run, lambda d: d.update({member: value}))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "schema")] + seal_problems


def test_run_json_that_does_not_read_is_not_compared(tmp_path):
    """A run.json that is not I-JSON (two members with one name, [ENC-2]) is `encoding`: nothing was read to
    compare with the predicate."""
    run = _sealed_copy(tmp_path)
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text.replace('"status": "completed",', '"status": "completed", "status": "running",'))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "encoding")]
