"""Sealing ([SEAL-1]..[SEAL-5]) against the seals the reference tools wrote for the shared runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.aef.sealer import build_manifest, check_seal, seal_run
from aefgate.aef.verifier import verify_run
from tests._shared import AEF, copy_run

SEALED = sorted({p.parent for p in AEF.rglob("seal.json") if (p.parent / "run.json").is_file()})


def test_there_are_sealed_runs():
    assert len(SEALED) >= 9


@pytest.mark.parametrize("run", SEALED, ids=lambda p: str(p.relative_to(AEF)))
def test_manifest_and_run_hash_match_the_reference_seal(run):
    seal = json.loads((run / "seal.json").read_text())
    man = build_manifest(run)
    assert man.run_hash == seal["predicate"]["runHash"]
    assert [(p, h) for p, h, _ in man.entries] == [(s["name"], s["digest"]["sha256"]) for s in seal["subject"]]
    chk = check_seal(run)
    assert chk.problems == [] and chk.run_hash == seal["predicate"]["runHash"]
    # [SEAL-3]: one line per file, two spaces around the size
    first = man.text.splitlines()[0].split("  ")
    assert len(first) == 3 and first[1].isdigit()


@pytest.mark.parametrize("run", SEALED, ids=lambda p: str(p.relative_to(AEF)))
def test_resealing_gives_the_reference_seal(tmp_path, run):
    ref = json.loads((run / "seal.json").read_text())
    copy = copy_run(run, tmp_path / "run")
    (copy / "seal.json").unlink()
    before = {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    sealed_at = ref["predicate"]["sealedAt"]
    h = seal_run(copy, sealed_by=ref["predicate"]["sealedBy"], sealed_at=sealed_at)
    assert h == ref["predicate"]["runHash"]
    mine = json.loads((copy / "seal.json").read_text())
    assert mine == ref  # the same statement, as JSON values
    assert {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name != "seal.json"} == before
    v = verify_run(copy)
    assert (v.outcome, v.problems) == ("intact", [])


def _unsealed(tmp_path: Path) -> Path:
    run = copy_run(AEF / "conformance" / "valid" / "completed-eval" / "run", tmp_path / "run")
    (run / "seal.json").unlink()
    return run


def test_refusals_leave_the_run_unchanged(tmp_path):
    run = _unsealed(tmp_path)
    snapshot = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}

    def refused(rule, **kw):
        with pytest.raises(Refusal) as e:
            seal_run(run, **kw)
        assert e.value.rule == rule and e.value.exit_code == 2
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == snapshot

    refused("SEAL-5", sealed_by="someone")
    refused("SEAL-1", sealed_at="2026-10-02T14:06:23.003Z")  # before endedAt ...23.004Z
    refused("ENC-8", sealed_at="yesterday")
    # a file a run folder does not hold would be unexpected-file once sealed
    (run / "notes").mkdir()
    (run / "notes" / "x").write_text("x")
    snapshot = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    refused("RUN-2")
    (run / "notes" / "x").unlink()
    (run / "notes").rmdir()
    # a run that does not verify is not sealed, by either sealer
    summary = run / "summary.json"
    summary.write_bytes(summary.read_bytes().replace(b'"value": 0.665,', b'"value": 0.7,'))
    snapshot = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    refused("SEAL-1", sealed_by="ingest")
    refused("RUN-4", sealed_by="producer")


def test_open_run_and_resealing_refused(tmp_path):
    run = _unsealed(tmp_path)
    assert seal_run(run, sealed_at="2026-10-02T14:06:23.004Z")  # exactly at the close is fine
    with pytest.raises(Refusal) as e:
        seal_run(run)
    assert e.value.rule == "SEAL-1"
    d = json.loads((run / "run.json").read_text())
    d["status"] = "running"
    d.pop("endedAt")
    (run / "seal.json").unlink()
    (run / "run.json").write_text(json.dumps(d))
    with pytest.raises(Refusal) as e:
        seal_run(run)
    assert e.value.rule == "SEAL-1" and not (run / "seal.json").exists()


def test_ingest_seal(tmp_path):
    run = _unsealed(tmp_path)
    h = seal_run(run, sealed_by="ingest", sealed_at="2026-12-01T00:00:00Z")
    seal = json.loads((run / "seal.json").read_text())
    assert seal["predicate"]["sealedBy"] == "ingest" and seal["predicate"]["runHash"] == h
    assert verify_run(run).outcome == "intact"
    assert not [p for p in run.iterdir() if p.name.startswith(".")]  # no temporary file left behind
