"""AgentEval store v1 -> AEF (spec 07 §7.5; docs/mappings/store-v1.md): the sample workspace's two runs, their
result lines written here by hand from §7.5 and the sample's files (never from the converter's output), and
workspaces built with the store's real layout for every row of the tables and every refusal."""

from __future__ import annotations

import hashlib
import json
import re
import tracemalloc
from pathlib import Path

import pytest

from aefgate.converters.store_v1.importer import from_store_v1
from aefgate.errors import Refusal
from aefgate.aef.verifier import verify_run
from tests._shared import REPO
from tests.formats.store_v1.workspace import (
    RUN1,
    RUN2,
    SAMPLE,
    SUBJECT_DIR,
    Store,
    assertion,
    sanitize,
    scenario,
    tree,
    tree_output,
)

AT = "2026-12-01T00:00:00Z"
US = "\u001f"


def rid(run_id: str, case_id: str, path: str, trial: str = "") -> str:
    """[RES-4], computed here from the spec's formula."""
    return "r_" + hashlib.sha256(US.join((run_id, case_id, path, trial)).encode("utf-8")).hexdigest()[:32]


def lines(run: Path, name: str = "results.ndjson") -> list[dict]:
    return [json.loads(x) for x in (run / name).read_text(encoding="utf-8").splitlines()]


def doc(run: Path, name: str) -> dict:
    return json.loads((run / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory) -> dict[str, Path]:
    """The sample's two runs migrated with the defaults (mocked, content capture on) and --at fixed."""
    base = tmp_path_factory.mktemp("store-v1")
    return {RUN1: from_store_v1(SAMPLE, base / "r1", run=RUN1, at=AT).path,
            RUN2: from_store_v1(SUBJECT_DIR / "runs" / RUN2, base / "r2", at=AT).path}


ZERO = {"not_measured": 0, "not_applicable": 0, "skipped": 0, "error": 0}

# The completed run's lines, from §7.5 and the sample's scenario files (file-name order: gdpr-erasure, refund-order,
# tone-escalation), content capture on. Evidence ids: docs/mappings/store-v1.md.
EXPECTED_RUN1 = [
    {"caseId": "gdpr-erasure", "path": "scenario", "lane": "eval",
     "evaluator": {"id": "gdpr.art17", "version": "1.0.0"},  # the comparability facts' key and version
     "state": "failed", "severity": "medium",  # tree label fail, severity medium
     "scores": [{"metric": "score", "value": 0.7}, {"metric": "_lifted.severity_ordinal", "value": 2}],
     "usage": [{"role": "other", "costUsd": 0.0007}],
     "evidence": ["E-s1-input", "E-s1-eval", "E-compliance-1"],  # control art-17 names gdpr-erasure
     "ext": {"agenteval.store-v1": {
         "name": "GDPR Art. 17 erasure request", "passed": False, "score": 0.7,
         "comparability": {"evalKey": "gdpr.art17", "evalVersion": "1.0.0", "effectiveBar": 0.75},
         "stimulusHash": "sha256:2553dc03747fefb0f179a96d1163d384d453d3026b05df978bb2139e79866264"}},
     "aggregation": {"strategy": "Own", "rulePath": "threshold", "score": 0.7, "threshold": 0.75,
                     "measured": 1, "total": 1, "unmeasured": ZERO}},
    {"caseId": "gdpr-erasure", "path": "scenario/assertions/1",
     "evaluator": {"id": "HaveCalledTool(CreateErasureTicket)"}, "state": "passed",
     "component": {"weight": 0, "required": False}},
    {"caseId": "refund-order", "path": "scenario", "lane": "eval", "evaluator": {"id": "agenteval.scenario"},
     "state": "passed",  # no eval-result tree: ScenarioResult.Passed, no severity
     "scores": [{"metric": "score", "value": 0.92}, {"metric": "relevance", "value": 0.94},
                {"metric": "groundedness", "value": 0.9}],
     "durationMs": 3214.5871, "usage": [{"role": "other", "costUsd": 0.0041}],
     "evidence": ["E-s2-input", "E-s2-output", "E-trace"],  # the trace names refund-order
     "ext": {"agenteval.store-v1": {"name": "Refund a damaged order", "passed": True, "score": 0.92}},
     "aggregation": {"strategy": "Own", "rulePath": "threshold", "score": 0.92, "measured": 3, "total": 4,
                     "unmeasured": {**ZERO, "not_measured": 1}}},
    {"caseId": "refund-order", "path": "scenario/assertions/1", "evaluator": {"id": "HaveCalledTool(LookupOrder)"},
     "state": "passed", "component": {"weight": 0, "required": False}},
    {"caseId": "refund-order", "path": "scenario/assertions/2", "evaluator": {"id": "HaveCalledTool(IssueRefund)"},
     "state": "passed", "component": {"weight": 0, "required": False}},
    {"caseId": "refund-order", "path": "scenario/assertions/3", "evaluator": {"id": "HaveCallCount"},
     "state": "failed", "reason": "Expected 2 tool call(s), but 3 were made.",
     "component": {"weight": 0, "required": False}},
    {"caseId": "refund-order", "path": "scenario/assertions/4",
     "evaluator": {"id": "HaveToolCallLatencyUnder(IssueRefund, 2000ms)"},
     "state": "not_measured",  # Inconclusive: not measured, its message the reason
     "reason": "Tool timing was not captured for IssueRefund, so the latency bound cannot be checked.",
     "component": {"weight": 0, "required": False}},
    {"caseId": "tone-escalation", "path": "scenario", "lane": "eval",
     "evaluator": {"id": "support.tone", "version": "2.0.0"},
     "state": "error",  # label error; a typed absence: no scores, the judge's summary as reason
     "reason": "Judge response was not valid JSON (output stopped at the 4096-token limit).",
     "annotator": {"kind": "LLM", "model": "gpt-4o-mini"},  # no rubricDigest: 16 hex is no SHA-256
     "usage": [{"role": "other", "costUsd": 0.0026}],
     "evidence": ["E-s3-input", "E-s3-eval", "E-compliance-1"],  # control art-12 names tone-escalation
     "ext": {"agenteval.store-v1": {
         "name": "Cancelled flight, angry customer", "passed": False, "score": 0,
         "comparability": {"evalKey": "support.tone", "evalVersion": "2.0.0", "effectiveBar": 0.7,
                           "judge": {"rubricDigest": "3e9b07c5a1d4f286", "subjectRelation": "differentModel",
                                     "modelId": "gpt-4o-mini"}},
         "stimulusHash": "sha256:5a3783a40b83f905ba1ee0abfd2dc4e20fc60ac50671e3fac4b77c51ad25e0f0",
         "metrics": {"_lifted.severity_ordinal": 0}}}},
]


def _with_ids(run_id: str, expected: list[dict]) -> list[dict]:
    out, roots = [], {}
    for e in expected:
        line = {"schemaVersion": "1.0", "resultId": rid(run_id, e["caseId"], e["path"])}
        if e["path"] == "scenario":
            roots[e["caseId"]] = line["resultId"]
        else:
            line["parentResultId"] = roots[e["caseId"]]
        out.append({**line, **e})
    return out


def test_completed_run_lines_are_what_7_5_prescribes(sample_runs):
    got = lines(sample_runs[RUN1])
    assert got == _with_ids(RUN1, EXPECTED_RUN1)
    # the ids are the bound part: the store's run id, the scenario's id, scenario and scenario/assertions/<n>
    assert got[0]["resultId"] == rid("2026-05-20_09-14-07_3fa9c2e1", "gdpr-erasure", "scenario")


def test_completed_run_header(sample_runs):
    run = doc(sample_runs[RUN1], "run.json")
    assert run["runId"] == RUN1 and run["status"] == "completed"
    assert run["producer"]["name"] == "aefgate"
    assert run["imported"] == {"from": "agenteval store v1 (AgentEval 0.43.0.0)",
                               "asserted": ["execution.targetMode", "contentCapture"]}
    assert run["subject"] == {"ref": "agent:Support%20Agent", "kind": "agent", "version": "1.4.2"}
    assert run["execution"] == {"targetMode": "mocked"} and run["contentCapture"] == "on"
    assert run["startedAt"] == "2026-05-20T09:14:07.4137251Z"
    assert run["endedAt"] == "2026-05-20T09:14:55.6301344Z"  # + 00:00:48.2164093
    assert run["judges"] == [{"model": "gpt-4o-mini"}]
    assert "suite" not in run and "deployment" not in run
    ext = run["ext"]["agenteval.store-v1"]
    assert ext["git"] == {"commit": "9f2c4e1a7b3d5f6081a2c3d4e5f60718293a4b5c", "branch": "main", "dirty": False}
    assert ext["run"]["kind"] == "eval" and ext["run"]["harness"] == "xunit" and ext["run"]["seed"] == 42
    assert ext["contentHash"] == "sha256:9aaa7ff3832c381695ac2aa78b88b9e8428bafe940e1e363215800710fb6e039"
    assert ext["environment"]["runner"] == "GitHub Actions 12" and "machine" not in ext["environment"]
    assert run["ext"]["aefgate.store-v1"]["omitted"] == ["environment.machine"]


def test_no_file_of_a_migrated_run_holds_the_machine_name(sample_runs):
    for run, machine in ((sample_runs[RUN1], "fv-az1742-318"), (sample_runs[RUN2], "DEV-LAPTOP-07")):
        assert machine not in (run / "run.json").read_text()
        for f in run.rglob("*"):
            if f.is_file():
                assert machine.encode() not in f.read_bytes(), f


def test_completed_run_summary_and_metrics(sample_runs):
    s = doc(sample_runs[RUN1], "summary.json")
    # pass: refund-order passed, gdpr-erasure failed, tone-escalation (error) not measured
    # score: 0.7 and 0.92 measured
    entries = {e["metric"]: e for e in s["lanes"][0]["metrics"]}
    assert s["lanes"][0]["lane"] == "eval" and list(entries) == ["pass", "score"]
    assert {k: entries["pass"][k] for k in ("path", "N", "n", "notMeasured", "value", "verdict")} == \
        {"path": "scenario", "N": 3, "n": 2, "notMeasured": 1, "value": 0.5, "verdict": "scored"}
    assert entries["score"]["n"] == 2 and entries["score"]["value"] == pytest.approx(0.81, abs=1e-12)
    assert "rule" not in entries["pass"] and "rule" not in entries["score"]
    assert s["cost"]["totalUsd"] == 0.0074
    assert s["usage"] == [{"role": "other", "gen_ai.usage.input_tokens": 6213, "gen_ai.usage.output_tokens": 4496}]
    assert s["ext"]["agenteval.store-v1"] == {"verdict": "FAIL", "stats": {"total": 3, "passed": 1, "failed": 2,
                                                                            "warnings": 0, "skipped": 0},
                                              "metrics": {"score": 0.54, "relevance": 0.94}}
    decl = {m["id"]: m for m in doc(sample_runs[RUN1], "metrics.json")["metrics"]}
    assert decl["pass"]["kind"] == "rate"
    for m in ("score", "relevance", "groundedness", "_lifted.severity_ordinal"):
        assert decl[m]["direction"] == "none" and decl[m]["kind"] == "score"


def test_evidence_compliance_blob_is_the_original_bytes(sample_runs):
    run = sample_runs[RUN1]
    ev = {e["evidenceId"]: e for e in lines(run, "evidence.ndjson")}
    assert set(ev) == {"E-compliance-1", "E-trace", "E-s1-input", "E-s1-eval", "E-s2-input", "E-s2-output",
                       "E-s3-input", "E-s3-eval"}
    original = (SAMPLE / "compliance" / "gdpr" / "Support Agent" / "2026-05-20_09-15-31" / "evidence.json").read_bytes()
    comp = ev["E-compliance-1"]
    assert comp["kind"] == "compliance_artifact"
    blob = run / "blobs" / "sha256" / comp["digest"][7:9] / comp["digest"][7:]
    assert blob.read_bytes() == original
    trace = ev["E-trace"]
    assert trace["kind"] == "transcript"
    assert (run / "blobs" / "sha256" / trace["digest"][7:9] / trace["digest"][7:]).read_bytes() == \
        (SUBJECT_DIR / "runs" / RUN1 / "traces" / "agent-trace.json").read_bytes()
    assert ev["E-s1-eval"]["kind"] == "other" and ev["E-s2-output"]["kind"] == "output"
    # the input's blob is the input text: its SHA-256 is the store's stimulusHash (no CR in it)
    assert ev["E-s1-input"]["digest"] == "sha256:2553dc03747fefb0f179a96d1163d384d453d3026b05df978bb2139e79866264"


def test_interrupted_run_is_aborted(sample_runs):
    run = doc(sample_runs[RUN2], "run.json")
    assert run["status"] == "aborted" and "never completed" in run["abortReason"]
    assert run["startedAt"] == run["endedAt"] == "2026-05-21T16:02:44.9051163Z"
    assert run["imported"]["asserted"] == ["execution.targetMode", "contentCapture", "status", "endedAt",
                                           "abortReason"]
    got = lines(sample_runs[RUN2])
    assert [(x["caseId"], x["path"], x["state"]) for x in got] == [
        ("refund-order", "scenario", "passed"), ("refund-order", "scenario/assertions/1", "passed"),
        ("refund-order", "scenario/assertions/2", "passed"), ("refund-order", "scenario/assertions/3", "passed")]
    assert got[0]["resultId"] == rid(RUN2, "refund-order", "scenario")
    s = doc(sample_runs[RUN2], "summary.json")
    assert "cost" not in s and "ext" not in s and s["lanes"][0]["metrics"][0]["value"] == 1


def test_both_runs_verify_intact(sample_runs):
    for run in sample_runs.values():
        v = verify_run(run)
        assert v.outcome == "intact", v.problems
        assert json.loads((run / "seal.json").read_text())["predicate"]["sealedBy"] == "ingest"


def test_migrating_twice_gives_the_same_run(sample_runs, tmp_path: Path):
    again = from_store_v1(SAMPLE, tmp_path / "again", run=RUN1, at=AT)
    assert again.run_hash == verify_run(sample_runs[RUN1]).run_hash
    assert (again.path / "results.ndjson").read_bytes() == (sample_runs[RUN1] / "results.ndjson").read_bytes()


def test_content_capture_off(tmp_path: Path):
    m = from_store_v1(SAMPLE, tmp_path / "off", run=RUN1, at=AT, content_capture="off", target_mode="live")
    assert verify_run(m.path).outcome == "intact"
    run = doc(m.path, "run.json")
    assert run["contentCapture"] == "off" and run["execution"]["targetMode"] == "live"
    ev = lines(m.path, "evidence.ndjson")
    assert [e["evidenceId"] for e in ev] == ["E-compliance-1"]  # not content: kept
    got = {(x["caseId"], x["path"]): x for x in lines(m.path)}
    tone = got[("tone-escalation", "scenario")]
    assert tone["state"] == "error" and "Judge response" not in tone["reason"] and "store v1" in tone["reason"]
    for x in got.values():
        assert "stimulusHash" not in x.get("ext", {}).get("agenteval.store-v1", {})
    assert "evidence" not in got[("refund-order", "scenario")]  # no input, output or trace to cite
    # the ids do not depend on the options
    assert [x["resultId"] for x in got.values()] == [x["resultId"] for x in _with_ids(RUN1, EXPECTED_RUN1)]


def test_signed_with_key(tmp_path: Path):
    from aefgate.aef.signatures import TrustPolicy, keygen
    from aefgate.aef.verifier import verify_run as trusted

    private, _public, entry = keygen("ecdsa-p256", "git:migrator@example.com")
    (tmp_path / "k.pem").write_bytes(private)
    m = from_store_v1(SAMPLE, tmp_path / "signed", run=RUN2, at=AT, key=tmp_path / "k.pem")
    assert m.signed and (m.path / "attestation.dsse.json").is_file()
    v = trusted(m.path, policy=TrustPolicy.from_json({"keys": [entry]}))
    assert v.outcome == "intact" and v.signed_by == ["git:migrator@example.com"]


def test_subject_override_is_asserted(tmp_path: Path):
    m = from_store_v1(SAMPLE, tmp_path / "s", run=RUN2, at=AT, subject="agent:support/support-agent")
    run = doc(m.path, "run.json")
    assert run["subject"]["ref"] == "agent:support/support-agent" and "subject.ref" in run["imported"]["asserted"]
    with pytest.raises(Refusal) as e:
        from_store_v1(SAMPLE, tmp_path / "bad", run=RUN2, subject="Support Agent")
    assert e.value.rule == "CLI-2" and not (tmp_path / "bad").exists()


def test_losses_are_the_pages_list():
    from aefgate.converters.store_v1.losses import LOSSES_FROM_STORE_V1

    page = (REPO / "docs" / "mappings" / "store-v1.md").read_text()
    section = page.split("## What does not carry over", 1)[1].split("\n## ", 1)[0]
    items = [re.sub(r"\s+", " ", x).strip() for x in re.split(r"\n- ", section)[1:]]
    assert items == [x.text for x in LOSSES_FROM_STORE_V1]


# -- built workspaces -------------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "ws" / ".agenteval")


RID = "2026-06-01_10-00-00_a1b2c3d4"


def _migrate(store: Store, tmp_path: Path, name: str = "out", **kw):
    return from_store_v1(store.root, tmp_path / name, run=kw.pop("run", RID), at=AT, **kw)


def test_workflow_subject_and_names_needing_enc13(store: Store, tmp_path: Path):
    name = "Bücher/Flow ß 100%"
    subj = store.subject(name, kind="workflow", version="v 1 (beta)")
    assert subj.name == sanitize(name) != name  # the folder is Sanitize(name): readers take the name from JSON
    store.run(subj, RID, [scenario("a/b ü", passed=False, score=0.25)], kind="workflow", version="v 1 (beta)")
    m = _migrate(store, tmp_path)
    assert verify_run(m.path).outcome == "intact"
    run = doc(m.path, "run.json")
    assert run["subject"] == {"ref": "workflow:B%C3%BCcher/Flow%20%C3%9F%20100%25", "kind": "workflow"}
    assert run["ext"]["agenteval.store-v1"]["subject"]["version"] == "v 1 (beta)"  # not exact: kept in ext
    assert any("not an exact version" in n for n in run["ext"]["aefgate.store-v1"]["notes"])
    (line,) = lines(m.path)
    assert (line["caseId"], line["state"], line["resultId"]) == ("a/b ü", "failed", rid(RID, "a/b ü", "scenario"))
    assert "severity" not in line  # no tree: nothing gives a severity


def test_the_state_table(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    cases = [  # (scenario id, tree, expected state, severity)
        ("l-pass", tree("k", "pass", passed=True, value=0.9), "passed", None),
        ("l-fail", tree("k", "fail", severity="high"), "failed", "high"),
        ("l-warn", tree("k", "warn", severity="low"), "warn", "low"),
        ("l-error", tree("k", "error", value=0), "error", None),
        ("l-skipped", tree("k", "skipped", value=0, summary="The check did not run."), "skipped", None),
        ("l-inapplicable", tree("k", "inapplicable", value=0, measurement="notApplicable"), "not_applicable", None),
        ("m-na", tree("k", "fail", measurement="notApplicable"), "not_applicable", None),
        ("m-nm", tree("k", "fail", measurement="notMeasured", recommendations=["", "Supply a registry."]),
         "not_measured", None),
        ("free-yes", tree("k", "borderline", passed=True, severity="low"), "passed", None),
        ("free-no", tree("k", "Meh", passed=False, severity="medium"), "failed", "medium"),
    ]
    scenarios = [scenario(sid, output=tree_output(t), passed=t["score"]["passed"], score=t["score"]["value"],
                          metrics={"dim": 1}) for sid, t, _, _ in cases]
    scenarios.append(scenario("no-tree", passed=False, score=0.1, cost=0, duration="00:00:00"))
    store.run(subj, RID, scenarios)
    m = _migrate(store, tmp_path)
    assert verify_run(m.path).outcome == "intact"
    got = {x["caseId"]: x for x in lines(m.path)}
    for sid, t, state, severity in cases:
        line = got[sid]
        assert line["state"] == state, sid
        assert line.get("severity") == severity, sid
        assert line["evaluator"] == {"id": "k", "version": "1.0.0"}  # no facts: the tree's metric
        assert line["annotator"] == {"kind": "CODE"}  # atomic-code provenance
        if state in ("passed", "failed", "warn"):
            assert [s["metric"] for s in line["scores"]] == ["score", "dim"]
        else:
            assert "scores" not in line and line["reason"]  # a typed absence: a reason, no scores ([RES-2])
            assert line["ext"]["agenteval.store-v1"]["metrics"] == {"dim": 1}
    assert got["l-skipped"]["reason"] == "The check did not run."  # the tree's summary
    assert got["m-nm"]["reason"] == "Supply a registry."  # else its first (non-empty) recommendation
    assert got["l-error"]["reason"].startswith("store v1: ")  # else a generated one
    assert (got["no-tree"]["state"], "severity" in got["no-tree"]) == ("failed", False)
    assert got["no-tree"]["evaluator"] == {"id": "agenteval.scenario"}
    # AgentEval's defaults when nothing was recorded (0 cost, 00:00:00) give no usage and no durationMs
    assert "usage" not in got["no-tree"] and "durationMs" not in got["no-tree"]
    assert got["l-pass"]["usage"] == [{"role": "other", "costUsd": 0.001}] and got["l-pass"]["durationMs"] == 1500


def test_typed_absence_with_assertions_and_renamed_metrics(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    t = tree("k", "skipped", value=0)
    store.run(subj, RID, [
        scenario("absent", output=tree_output(t), passed=False, score=0,
                 assertions=[assertion("A"), assertion("B", "inconclusive")],
                 comparability={"evalKey": "k", "evalVersion": "3.1.0", "effectiveBar": 0.8}),
        scenario("measured", metrics={"pass": 1, "score": 0.5, "other": 2}, assertions=[assertion("C", "failed")]),
    ])
    m = _migrate(store, tmp_path)
    assert verify_run(m.path).outcome == "intact"
    got = {(x["caseId"], x["path"]): x for x in lines(m.path)}
    root = got[("absent", "scenario")]
    assert root["evaluator"] == {"id": "k", "version": "3.1.0"}
    assert root["aggregation"] == {"strategy": "Own", "rulePath": "nothing-measured", "score": None,
                                   "threshold": 0.8, "measured": 1, "total": 2,
                                   "unmeasured": {**ZERO, "not_measured": 1}}
    b = got[("absent", "scenario/assertions/2")]
    assert b["state"] == "not_measured" and b["reason"]  # inconclusive without a message: a generated reason
    measured = got[("measured", "scenario")]
    assert [s["metric"] for s in measured["scores"]] == ["score", "dimension:pass", "dimension:score", "other"]
    assert "threshold" not in measured["aggregation"]  # no bar recorded: none written (never 0)
    decl = {d["id"] for d in doc(m.path, "metrics.json")["metrics"]}
    assert {"dimension:pass", "dimension:score", "other"} <= decl


def test_runs_of_other_kinds_and_their_other_files(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    rdir = store.run(subj, RID, [scenario("q1")], run_kind="memory-benchmark")
    (rdir / "memory.json").write_text('{"questions": 1}')
    (rdir / "reports").mkdir()
    (rdir / "reports" / "report.md").write_text("# Report\n")
    (rdir / "scenarios" / "q1.json.0badf00d.tmp").write_text("leftover")
    store.run(subj, "2026-06-01_11-00-00_a1b2c3d4", [scenario("q1")], run_kind="red team")
    m = _migrate(store, tmp_path)
    assert verify_run(m.path).outcome == "intact"
    assert {x["lane"] for x in lines(m.path) if x["path"] == "scenario"} == {"memory-benchmark"}
    assert doc(m.path, "summary.json")["lanes"][0]["lane"] == "memory-benchmark"
    files = [(e["evidenceId"], e["kind"], e["description"]) for e in lines(m.path, "evidence.ndjson")
             if e["evidenceId"].startswith("E-file-")]
    assert [(i, k) for i, k, _ in files] == [("E-file-1", "document"), ("E-file-2", "document")]
    assert "memory.json" in files[0][2] and "reports/report.md" in files[1][2]
    off = _migrate(store, tmp_path, "off", content_capture="off")
    assert not (off.path / "evidence.ndjson").exists()
    other = _migrate(store, tmp_path, "main", run="2026-06-01_11-00-00_a1b2c3d4")
    assert {x["lane"] for x in lines(other.path)} == {"main"}  # the kind is not an id


def test_machine_name_is_never_copied(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    store.run(subj, RID, [scenario("s")], environment={"machine": "alice-laptop", "os": "Linux", "ci": True,
                                                       "runner": "ALICE-LAPTOP", "dotnetVersion": ".NET 9"})
    m = _migrate(store, tmp_path)
    text = (m.path / "run.json").read_text()
    assert "alice-laptop" not in text.lower()
    assert doc(m.path, "run.json")["ext"]["aefgate.store-v1"]["omitted"] == ["environment.machine",
                                                                            "environment.runner"]


def test_a_refused_run_leaves_nothing(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    store.run(subj, "run one", [scenario("s")])  # a folder name that is no AEF id (space)
    out = tmp_path / "outs" / "run"
    with pytest.raises(Refusal) as e:
        from_store_v1(store.root, out, run="run one", at=AT)
    assert e.value.rule == "SV1-9" and e.value.where.endswith("run one/manifest.json")
    assert not out.exists() and not (tmp_path / "outs").exists()
    # a refusal of a line (over 4 MiB) is the AEF writer's rule, at the scenario file
    store.run(subj, RID, [scenario("big", huge="x" * (5 << 20))])
    with pytest.raises(Refusal) as e:
        from_store_v1(store.root, out, run=RID, at=AT)
    assert e.value.rule == "ENC-17" and e.value.where.endswith("big.json")
    assert not out.parent.exists()  # no temporary folder either (nor the parents made for it)


def test_a_run_id_twice_in_the_workspace(store: Store, tmp_path: Path):
    store.run(store.subject("A"), RID, [scenario("s")])
    store.run(store.subject("B"), RID, [scenario("s")])
    with pytest.raises(Refusal) as e:
        _migrate(store, tmp_path)
    assert e.value.rule == "SV1-1" and "twice" in e.value.message


def test_a_100_mb_trace_is_streamed(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    rdir = store.run(subj, RID, [scenario("s1")], trace={"scenarioId": "s1", "events": []})
    trace = rdir / "traces" / "agent-trace.json"
    chunk = b"a" * (1 << 20)
    with open(trace, "wb") as f:
        f.write(b'{"runId":"' + RID.encode() + b'","scenarioId":"s1","events":[{"timestamp":'
                b'"2026-06-01T10:00:01+00:00","kind":"tool_result","payload":"')
        for _ in range(100):
            f.write(chunk)
        f.write(b'"}]}')
    size = trace.stat().st_size
    assert size > 100 << 20
    tracemalloc.start()
    try:
        m = _migrate(store, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, f"{peak / (1 << 20):.1f} MiB of Python objects: the trace was loaded"
    ev = {e["evidenceId"]: e for e in lines(m.path, "evidence.ndjson")}
    blob = m.path / "blobs" / "sha256" / ev["E-trace"]["digest"][7:9] / ev["E-trace"]["digest"][7:]
    assert blob.stat().st_size == size
    assert lines(m.path)[0]["evidence"] == ["E-s1-input", "E-s1-output", "E-trace"]
    assert verify_run(m.path).outcome == "intact"


def test_values_aef_cannot_hold_are_refused_at_their_file(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    rdir = store.run(subj, RID, [scenario("s", assertions=[assertion("A" * 300)])])
    with pytest.raises(Refusal) as e:
        _migrate(store, tmp_path)
    assert (e.value.rule, e.value.where) == ("SV1-9", f"{rdir / 'scenarios' / 's.json'} (assertion 1)")
    (rdir / "scenarios" / "s.json").unlink()
    store_doc = scenario("s", metrics={"": 1})
    (rdir / "scenarios" / "s.json").write_text(json.dumps(store_doc))
    with pytest.raises(Refusal) as e:
        _migrate(store, tmp_path)
    assert (e.value.rule, e.value.where) == ("SV1-9", str(rdir / "scenarios" / "s.json"))
    assert not (tmp_path / "out").exists()
