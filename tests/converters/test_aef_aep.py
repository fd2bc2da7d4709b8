"""AEF <-> AEP, as docs/mappings/aep.md defines it (rules AEP-1 .. AEP-18).

Every complete shared example run is exported and imported back: the imported run verifies intact, and a
field-by-field comparison finds lost exactly what the page's "What does not carry over" lists (each lost field is
matched to a sentence of that section, which must be on the page). Exports are byte-identical twice over, ids are
the page's formula, a metadata ceiling carries none of the run's free text, and every refusal names its rule.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from aefgate.converters.aep import vocabulary as aep_common
from aefgate.converters.aep import exporter as aep_exporter
from aefgate.converters.cloudevents import exporter as ce_exporter
from aefgate.aef import verifier
from aefgate.converters.aep import importer as aep_importer
import aefgate.converters.aep as aep_pkg
from aefgate.converters.fidelity import fidelity
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.builder import RunBuilder
from aefgate.aef.verifier import verify_run
from tests._shared import EXAMPLES, REPO, SAMPLES, SEALED_EXAMPLE_RUNS, SHARED, copy_run

PAGE = REPO / "docs" / "mappings" / "aep.md"
RUNS = SEALED_EXAMPLE_RUNS + [EXAMPLES / "aef-inspect" / "input"]
IDS = [f"{p.parent.name}/{p.name}" for p in RUNS]
AT = "2026-12-01T00:00:00Z"
GOLDEN = SHARED / "spec" / "aep" / "conformance" / "fixtures" / "golden" / "golden.jsonl"


def _needs_aep(name: str):
    """A name of aefgate.formats.aep (the module is part of the package: no skip when it is missing)."""
    return getattr(importlib.import_module("aefgate.formats.aep"), name)


def _lines(run: Path) -> list[dict]:
    return [v for _, v in jsonio.iter_ndjson(run / "results.ndjson")]


def _roundtrip(src: Path, tmp: Path, **opts) -> tuple[Path, Path]:
    events = tmp / "events.jsonl"
    aep_exporter.to_aep(src, events, **opts)
    out = aep_importer.from_aep(events, tmp / "back", at=AT)
    return events, out


# -- round trips: the registry's harness (aefgate.converters.fidelity) against the page's declared losses --------


@pytest.mark.parametrize("src", RUNS, ids=IDS)
@pytest.mark.parametrize("ceiling", ["metadata", "redacted", "full"])
def test_round_trip_verifies_and_loses_only_the_list(src: Path, ceiling: str):
    report = fidelity("aep", src, options={"max_capture": ceiling})
    assert report.ok and report.back_outcome == "intact", report.summary()
    assert {"results:resultId", "results:state", "results:caseId", "results:path"} <= set(report.kept)
    if ceiling == "full" and jsonio.read_json(src / "run.json").get("contentCapture", "on") == "on":
        c = report.fields.get("results:reason")  # at full, every reason travels; a line with a reasoning blob and no
        if c is not None:                        # reason gets its text as reason, the evidence item's difference
            assert c.kept == sum(1 for x in _lines(src) if "reason" in x), "at full, reasons travel"
            assert all(t.startswith("Evidence:") for t in c.losses), c


@pytest.mark.parametrize("log", ["epochs_mean.eval", "epochs_majority.eval", "basic.json"])
def test_round_trip_of_inspect_samples(log: str, tmp_path: Path):
    """Runs imported from the real Inspect logs: intact after the round trip, and what differs is declared. An
    epochs log's run holds each case's trials then its rollup: the way back writes the rollups last (AEP-15)."""
    from aefgate.converters.inspect.importer import from_inspect

    src = from_inspect(SAMPLES / "inspect" / log, tmp_path / "run", at=AT)
    for ceiling in ("metadata", "full"):
        report = fidelity("aep", src, options={"max_capture": ceiling})
        assert report.ok, report.summary()
        if log.startswith("epochs"):
            assert "results:order" in dict(report.lost)
    if log.startswith("epochs"):
        _events, back = _roundtrip(src, tmp_path / "back")
        rollups = [i for i, ln in enumerate(_lines(back)) if "trials" in ln]
        assert rollups and rollups == list(range(len(_lines(back)) - len(rollups), len(_lines(back))))


def test_kept_fields_are_equal(tmp_path: Path):
    """What the page says is exact comes back equal: states, scores, the tree, times, trace links, usage."""
    src = EXAMPLES / "aef-inspect" / "input"
    _e, back = _roundtrip(src, tmp_path)
    o = {ln["resultId"]: ln for ln in _lines(src)}
    b = {ln["resultId"]: ln for ln in _lines(back)}
    for rid, ln in o.items():
        for k in ("caseId", "path", "state", "scores", "severity", "component", "aggregation", "usage", "startedAt",
                  "endedAt", "traceLink", "verdictRule", "evaluator", "durationMs", "turns"):
            assert b[rid].get(k) == ln.get(k), (rid, k)
        assert (b[rid].get("parentResultId") or None) == (ln.get("parentResultId") or None)


def test_worked_example_import(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    _e, back = _roundtrip(src, tmp_path)
    reasons = {ln["caseId"] + "/" + ln["path"]: ln.get("reason") for ln in _lines(back)}
    placeholder = "not exported (AEP capture metadata)"
    assert sorted(k for k, v in reasons.items() if v == placeholder) == [
        "case-17/triage/groundedness", "case-20/triage", "case-21/triage", "case-22/triage"]
    assert reasons["case-19/triage"] is None and len(reasons) == 9
    _e2, full = _roundtrip(src, tmp_path / "full", max_capture="full")
    r = {ln["caseId"] + "/" + ln["path"]: ln.get("reason") for ln in _lines(full)}
    assert r["case-17/triage/helpfulness"].startswith("The answer escalated the refund")
    orig = {ln["caseId"] + "/" + ln["path"]: ln.get("reason") for ln in _lines(src)}
    assert r["case-19/triage"] == orig["case-19/triage"] and "\u2028" in r["case-19/triage"]  # kept to the byte


def test_trials_round_trip(tmp_path: Path):
    src = EXAMPLES / "inspect-aef" / "run"
    _e, back = _roundtrip(src, tmp_path)
    o = {ln["resultId"]: ln for ln in _lines(src)}
    b = {ln["resultId"]: ln for ln in _lines(back)}
    assert any("trials" in ln for ln in o.values()) and any("trial" in ln for ln in o.values())
    for rid, ln in o.items():
        assert b[rid].get("trial") == ln.get("trial")
        assert b[rid].get("trials") == ln.get("trials")


# -- determinism ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("src", RUNS, ids=IDS)
def test_double_export_is_byte_identical(src: Path, tmp_path: Path):
    aep_exporter.to_aep(src, tmp_path / "a.jsonl", max_capture="full")
    aep_exporter.to_aep(src, tmp_path / "b.jsonl", max_capture="full")
    a = (tmp_path / "a.jsonl").read_bytes()
    assert a == (tmp_path / "b.jsonl").read_bytes()
    assert a.endswith(b"\n") and b"\n\n" not in a and b"\r" not in a.replace(b"\\r", b"")


def test_ids_are_the_pages_formula(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    v = verify_run(src)
    events = list(aep_exporter.export_events(src))
    h = v.run_hash[:16]
    lines = _lines(src)
    expected = []
    for ln in lines:
        for k in range(max(1, len(ln.get("scores") or ()))):
            expected.append(f"aef-{h}-{ln['resultId']}-e{k}")
    assert [e["id"] for e in events] == expected
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(e["epoch"] == 0 and e["session"] == "01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10" for e in events)
    assert events[0]["source"] == "aep://aefgate/agent/support-triage/session/01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10"
    # a run that differs but shares the runId gets other ids ([RUN-13])
    other = list(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "run"))
    assert not {e["id"] for e in events} & {e["id"] for e in other}


def test_worked_example_on_the_page():
    src = EXAMPLES / "aef-inspect" / "input"
    events = list(aep_exporter.export_events(src))
    ev = events[2]
    assert ev["data"]["aef"]["path"] == "triage/helpfulness" and ev["seq"] == 2
    page = PAGE.read_text(encoding="utf-8")
    shown = re.search(r"```json\n(\{\"aep\".*?)\n```", page, re.S).group(1)
    assert shown == jsonio.dump_line(ev).decode("utf-8").rstrip("\n")


# -- the envelope ---------------------------------------------------------------------------------------------------


def test_every_event_passes_validate_event(tmp_path: Path):
    validate_event = _needs_aep("validate_event")
    for src in RUNS:
        for ceiling in ("none", "metadata", "full"):
            for ev in aep_exporter.export_events(src, max_capture=ceiling):
                assert validate_event(ev) is None, (src, ev["id"], validate_event(ev))


def test_states_severity_label_and_traceparent():
    events = list(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input"))
    by_path = {(e["run"], e["data"]["aef"]["path"]): e for e in events}
    assert [e["data"]["gen_ai.evaluation.score.label"] for e in events] == [
        ln["state"] for ln in _lines(EXAMPLES / "aef-inspect" / "input")]
    assert by_path[("case-17", "triage/helpfulness")]["traceparent"] == \
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    sev = {(k[0]): e["severity"] for k, e in by_path.items() if k[1] == "triage"}
    assert sev == {"case-17": "warning", "case-18": "notice", "case-19": "notice", "case-20": "notice",
                   "case-21": "info", "case-22": "warning"}
    na = by_path[("case-17", "triage/groundedness")]
    assert "gen_ai.evaluation.score.value" not in na["data"]
    assert na["data"]["gen_ai.evaluation.name"] == "triage/groundedness"
    assert na["severity"] == "info"


def test_trace_id_only_and_agent_options(tmp_path: Path):
    src = EXAMPLES / "otel-aef" / "run"
    events = list(aep_exporter.export_events(src, agent="triage bot", source_host="evals.example"))
    line = next(e for e in events if e["data"]["aef"]["path"] == "Coherence")
    assert "traceparent" not in line and line["data"]["aef"]["traceId"] == "0af7651916cd43dd8448eb211c80319c"
    assert line["agent"] == "triage bot"
    assert line["source"].startswith("aep://evals.example/agent/triage%20bot/session/")


def test_cause_map(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    cmap = tmp_path / "causes.json"
    cmap.write_text(json.dumps({"case-18": "01RUNFIN18", "r_b75a850bf7391d59bb946e65234b129f": "01RUNFIN19"}))
    events = list(aep_exporter.export_events(src, cause_map=str(cmap)))
    causes = {e["run"]: e.get("cause") for e in events}
    assert causes["case-18"] == "01RUNFIN18" and causes["case-19"] == "01RUNFIN19" and causes["case-17"] is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"case-18": 3}')
    with pytest.raises(Refusal) as e:
        aep_exporter.export_events(src, cause_map=str(bad))
    assert e.value.rule == "AEP-7" and e.value.exit_code == 2


# -- capture ----------------------------------------------------------------------------------------------------------


def _probes(run: Path) -> list[str]:
    """The run's free text: every reason, every reasoning blob's text, every overlay reason."""
    out = []
    for ln in _lines(run):
        if "reason" in ln:
            out.append(ln["reason"])
        r = ln.get("reasoning")
        if r:
            h = r["blob"][7:]
            try:
                out.append((run / "blobs" / "sha256" / h[:2] / h).read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError):
                pass
    ev = run / "overlays" / "events.ndjson"
    if ev.exists():
        out += [e["reason"] for _, e in jsonio.iter_ndjson(ev) if "reason" in e]
    from aefgate.aef.vocab import STATES

    return [p for p in out if len(p) >= 6 and p not in STATES]  # a reason that is a state name is also the label


@pytest.mark.parametrize("src", RUNS, ids=IDS)
def test_metadata_ceiling_carries_no_free_text(src: Path, tmp_path: Path):
    aep_exporter.to_aep(src, tmp_path / "e.jsonl")  # default: metadata
    raw = (tmp_path / "e.jsonl").read_text(encoding="utf-8")
    decoded = json.dumps([json.loads(x) for x in raw.splitlines()], ensure_ascii=False)
    for probe in _probes(src):
        assert probe not in decoded, probe
    for line in raw.splitlines():
        ev = json.loads(line)
        assert ev["capture"] == "metadata"
        for field in aep_common.REDACTED_FIELDS[ev["type"]]:
            head, _, tail = field.partition(".")
            d = ev["data"]
            assert (tail not in d.get(head, {})) if field == "guardrail.explanation" else field not in d


def test_full_ceiling_carries_the_explanation_and_off_runs_never_do(tmp_path: Path):
    events = list(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input", max_capture="full"))
    ex = {e["data"]["aef"]["path"] + "@" + e["run"]: e["data"].get("gen_ai.evaluation.explanation") for e in events}
    assert ex["triage/helpfulness@case-17"].startswith("The answer escalated the refund")  # the reasoning blob
    assert ex["triage@case-22"] == "The judge returned HTTP 429 three times."
    assert all(e["capture"] == "full" for e in events)
    off = list(aep_exporter.export_events(EXAMPLES / "inspect-aef" / "run-off", max_capture="full"))
    assert off and all(e["capture"] == "metadata" for e in off)  # AEP-8: never above the run's contentCapture
    assert not any("gen_ai.evaluation.explanation" in e["data"] for e in off)
    none = list(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input", max_capture="none"))
    assert none and all("data" not in e and e["capture"] == "none" for e in none)


def test_redacted_ceiling_runs_the_pipeline_or_is_refused(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    run = copy_run(src, tmp_path / "run")
    from aefgate.aef import decisions as ov

    ov.decide(run, kind="annotate", by="reviewer-1", reason="mail alice@example.com, token=abc123secret", at=AT)
    events = list(aep_exporter.export_events(run, max_capture="redacted"))
    assert all(e["capture"] == "redacted" for e in events)  # the pipeline ran: the claim is minted (AEP-0001 §8.2(e))
    note = events[-1]["data"]["comment"]
    assert "alice@example.com" not in note and "abc123secret" not in note and "[REDACTED:" in note
    ex = {e["data"]["aef"]["path"] + "@" + e["run"]: e["data"].get("gen_ai.evaluation.explanation")
          for e in events if "path" in e["data"]["aef"]}
    assert ex["triage@case-22"] == "The judge returned HTTP 429 three times."  # nothing to redact: kept
    for ev in events:
        assert _needs_aep("capture_problem")(ev) is None


def test_redacted_fields_match_the_schema_annotations():
    capture_classes = _needs_aep("capture_classes")
    for etype, fields in aep_common.REDACTED_FIELDS.items():
        classes = capture_classes(etype)  # JSON pointers into data -> class
        pointers = {"/guardrail/explanation" if f == "guardrail.explanation" else "/" + f for f in fields}
        assert {k for k, v in classes.items() if v == "redacted"} == pointers, (etype, classes)


def test_unknown_capture_level_is_refused():
    with pytest.raises(Refusal) as e:
        aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input", max_capture="verbatim")
    assert e.value.rule == "AEP-8" and e.value.exit_code == 2


# -- human judgments, graders, guardrails -------------------------------------------------------------------------


def _synthetic(tmp: Path) -> Path:
    """A sealed run with a HUMAN-graded line, an attack (red-team) line, an uncalibrated and a calibrated judge."""
    header = {"runId": "aep-synth-1", "subject": {"ref": "agent:support/triage", "kind": "agent"},
              "execution": {"targetMode": "scripted"}, "startedAt": "2026-10-05T08:00:00Z", "contentCapture": "on",
              "judges": [{"model": "judge-a", "calibration": {"labelSet": "labels:l@1", "n": 10, "accuracy": 0.9,
                                                              "measuredAt": "2026-09-01T00:00:00Z"}}]}
    out = tmp / "synth"
    with RunBuilder(out, header, metrics=[{"id": "quality", "kind": "score", "direction": "higher_better",
                                           "scale": {"min": 0, "max": 1}}]) as b:
        b.add_case("c1", {"path": "quality", "evaluator": {"id": "human:review"}, "state": "passed",
                          "scores": [{"metric": "quality", "value": 0.9}], "annotator": {"kind": "HUMAN"},
                          "reason": "Reviewer note: solid answer", "endedAt": "2026-10-05T08:01:00Z"})
        b.add_case("c1", {"path": "judged", "evaluator": {"id": "llm:q"}, "state": "scored",
                          "scores": [{"metric": "quality", "value": 0.5}],
                          "annotator": {"kind": "LLM", "model": "judge-b"}})
        b.add_case("c1", {"path": "judged-cal", "evaluator": {"id": "llm:q2"}, "state": "scored",
                          "scores": [{"metric": "quality", "value": 0.6}],
                          "annotator": {"kind": "LLM", "model": "judge-a"}})
        b.add_case("p1", {"path": "resisted", "evaluator": {"id": "redteam:jailbreak", "version": "2"},
                          "state": "failed", "severity": "high", "reason": "Attack prompt: ignore all rules",
                          "attack": {"technique": "role-play jailbreak", "success": True,
                                     "taxonomy": [{"scheme": "owasp-llm", "id": "LLM01"}]}})
        b.finish("completed", ended_at="2026-10-05T08:03:00Z",
                 summary={"lanes": [{"lane": "main", "metrics": [{"metric": "quality", "path": "quality"}]}]},
                 seal="ingest", sealed_at="2026-10-05T08:04:00Z")
    return out


def test_human_lines_are_feedback_and_graders_are_marked(tmp_path: Path):
    run = _synthetic(tmp_path)
    events = list(aep_exporter.export_events(run, max_capture="full"))
    kinds = [(e["type"], e["data"]["aef"]["path"]) for e in events]
    assert kinds == [(aep_common.T_FEEDBACK, "quality"), (aep_common.T_EVAL, "judged"), (aep_common.T_EVAL, "judged-cal"),
                     (aep_common.T_EVAL, "resisted"), (aep_common.T_GUARD, "resisted")]
    fb = events[0]["data"]
    assert fb["rating"] == 0.9 and fb["label"] == "passed" and fb["source"] == "human"
    assert fb["comment"] == "Reviewer note: solid answer" and fb["aef"]["metric"] == "quality"
    assert fb["aef"]["grader"] == {"type": "HUMAN"}
    assert events[1]["data"]["aef"]["grader"] == {"type": "MODEL", "confidence": "UNCALIBRATED"}
    assert events[2]["data"]["aef"]["grader"] == {"type": "MODEL"}
    g = events[4]["data"]["guardrail"]
    assert g == {"stage": "input", "verdict": "allowed",
                 "categories": [{"name": "role-play jailbreak"}, {"name": "owasp-llm:LLM01"}],
                 "detector": {"name": "redteam:jailbreak", "version": "2"},
                 "explanation": "Attack prompt: ignore all rules"}
    assert events[4]["severity"] == "error" and events[4]["id"].endswith("-g")
    meta = list(aep_exporter.export_events(run))
    assert "explanation" not in meta[4]["data"]["guardrail"] and "comment" not in meta[0]["data"]
    back = aep_importer.import_events(meta, tmp_path / "back", at=AT)
    assert verify_run(back).outcome == "intact"
    lines = {ln["path"]: ln for ln in _lines(back)}
    assert lines["quality"]["annotator"] == {"kind": "HUMAN"}
    assert lines["resisted"]["attack"] == {"technique": "role-play jailbreak", "success": True,
                                          "taxonomy": [{"scheme": "owasp-llm", "id": "LLM01"}]}
    assert "reason" not in lines["resisted"]  # a failed line needs none ([RES-2]): the text did not come through
    assert set(lines) == {"quality", "judged", "judged-cal", "resisted"}
    assert lines["quality"]["evaluator"] == {"id": "human:review"}
    # at full, the whole run comes back but for the page's list
    full = aep_importer.import_events(events, tmp_path / "back-full", at=AT)
    assert verify_run(full).outcome == "intact"
    report = fidelity("aep", run, options={"max_capture": "full"})
    assert report.ok and "results:reason" not in dict(report.lost), report.summary()
    assert {ln["path"]: ln.get("reason") for ln in _lines(full)}["resisted"] == "Attack prompt: ignore all rules"


@pytest.mark.parametrize("member, value", [
    ("trials", 5), ("parent", 7), ("lane", ["x"]), ("metric", 3), ("traceId", "zz"), ("attack", "x"),
    ("annotator", "LLM"), ("path", ""), ("trial", "0"), ("normalized", 7), ("scoreLabel", ""),
    ("evaluatorVersion", 2), ("component", "x"), ("aggregation", 1), ("usage", {}), ("startedAt", "soon"),
])
def test_wrong_aef_members_are_refused_never_a_traceback(member: str, value, tmp_path: Path):
    events = list(aep_exporter.export_events(_synthetic(tmp_path), max_capture="full"))
    bad = [dict(e) for e in events]
    for e in bad:
        e["data"] = dict(e["data"], aef=dict(e["data"]["aef"], **{member: value}))
    with pytest.raises(Refusal) as r:
        aep_importer.import_events(bad, tmp_path / "back", at=AT)
    assert r.value.exit_code == 2 and not (tmp_path / "back").exists()


def test_overlay_decisions_become_feedback(tmp_path: Path):
    from aefgate.aef import decisions as ov

    run = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "run")
    r1 = "r_1264eeb36620c9cbe97b71ffdbcfd331"
    ov.decide(run, kind="approve", by="reviewer-42", reason="Reviewed the sealed evidence", at=AT)
    ov.decide(run, kind="override", by="reviewer-42", reason="Judge misread the policy text", result=r1,
              state="passed", at=AT)
    ov.decide(run, kind="acknowledge", by="reviewer-7", reason="Seen", at=AT)
    ov.decide(run, kind="waive", by="reviewer-7", reason="Known flaky judge call", result=r1,
              expires="2027-01-01T00:00:00Z", at=AT)
    # an event after the last sealed batch is unsealed: never emitted
    with open(run / "overlays" / "events.ndjson", "ab") as f:
        f.write(jsonio.dump_line({"schemaVersion": "1.0", "eventId": "ov_unsealed1", "kind": "reject",
                                  "target": {"run": "01928f3e-7c1a-7b2e-9a51-3f2c0d4e8a10"},
                                  "by": {"identity": "mallory"}, "at": AT}))
    events = list(aep_exporter.export_events(run, max_capture="full"))
    fb = [e for e in events if e["type"] == aep_common.T_FEEDBACK]
    assert [e["data"]["aef"]["decision"] for e in fb] == ["approve", "override", "waive"]
    approve, override, waive = fb
    assert approve["data"]["rating"] == 1 and "run" not in approve and approve["severity"] == "info"
    assert override["data"]["label"] == "passed" and override["run"] == "case-17"
    assert override["cause"] == next(e["id"] for e in events if e["id"].endswith(f"{r1}-e0"))
    assert override["data"]["comment"] == "Judge misread the policy text" and override["severity"] == "notice"
    assert waive["data"]["aef"]["expires"] == "2027-01-01T00:00:00Z"
    assert [e["seq"] for e in events] == list(range(len(events)))
    meta = list(aep_exporter.export_events(run))
    assert not any("comment" in e.get("data", {}) for e in meta)
    back = aep_importer.import_events(meta, tmp_path / "back", at=AT)  # AEP-15: decisions are not imported
    assert verify_run(back).outcome == "intact" and not (back / "overlays").exists()
    assert len(_lines(back)) == len(_lines(run))


# -- the way back: foreign events, CloudEvents --------------------------------------------------------------------------


def test_foreign_golden_events_import(tmp_path: Path):
    events = [json.loads(x) for x in GOLDEN.read_text(encoding="utf-8").splitlines() if x.strip()]
    assess = [e for e in events if e["type"].startswith("assessment.")]
    assert len(assess) == 3
    src = tmp_path / "golden.jsonl"
    src.write_bytes(b"".join(jsonio.dump_line(e) for e in assess))
    back = aep_importer.from_aep(src, tmp_path / "back", at=AT, target_mode="replayed")
    assert verify_run(back).outcome == "intact"
    run = jsonio.read_json(back / "run.json")
    assert run["runId"] == "s_assess" and run["subject"] == {"ref": "agent:claude-code", "kind": "agent"}
    assert run["contentCapture"] == "on" and run["execution"]["targetMode"] == "replayed"
    lines = {ln["path"]: ln for ln in _lines(back)}
    ev = lines["answer_relevance"]
    assert ev["caseId"] == "r_assess1" and ev["state"] == "scored"
    assert ev["scores"] == [{"metric": "answer_relevance", "value": 0.42, "label": "fail"}]
    assert ev["reason"] == "the answer omitted the buffer bound the question asked for"
    fb = lines["feedback"]
    assert fb["annotator"] == {"kind": "HUMAN"} and fb["scores"][0]["value"] == -1
    assert fb["evidence"]  # the correction, as an `expected` evidence record
    g = lines["guardrail/output"]
    assert g["state"] == "failed" and g["evaluator"] == {"id": "guard-model:v3", "version": "3.1"}
    assert g["ext"]["aefgate.aep"]["guardrail"]["verdict"] == "blocked"
    assert "explanation" not in g["ext"]["aefgate.aep"]["guardrail"]
    # and out again: the imported guardrail is re-emitted as a guardrail verdict (AEP-11)
    again = list(aep_exporter.export_events(back))
    assert [e["type"] for e in again if e["type"] == aep_common.T_GUARD] == [aep_common.T_GUARD]


def test_non_assessment_events_and_redeliveries_are_not_imported(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    events = list(aep_exporter.export_events(src))
    other = {"aep": "0.1", "id": "x1", "type": "run.finished", "time": AT, "source": events[0]["source"],
             "agent": "a", "session": events[0]["session"], "seq": 99}
    future = dict(events[0], aep="1.0", id="future")
    with pytest.warns(UserWarning, match="1 event"):  # AEP-0003 §3.1: skipped, reported once
        back = aep_importer.import_events([other, *events, events[3], future], tmp_path / "back", at=AT)
    assert len(_lines(back)) == len(_lines(src))
    assert aep_common._utc("2026-07-03T12:22:00.123456789+02:00") == "2026-07-03T10:22:00.123456Z"
    assert aep_common._utc("2026-07-03T10:22:00") is None  # no offset: not RFC 3339


def test_cloudevents_round_trip(tmp_path: Path):
    src = EXAMPLES / "aef-inspect" / "input"
    ce_exporter.to_cloudevents(src, tmp_path / "ce.jsonl")
    first = json.loads((tmp_path / "ce.jsonl").read_text().splitlines()[0])
    assert "specversion" in first
    back = aep_importer.from_cloudevents(tmp_path / "ce.jsonl", tmp_path / "back", at=AT)
    assert verify_run(back).outcome == "intact"
    assert jsonio.read_json(back / "run.json")["imported"]["from"] == "aep 0.1 (cloudevents)"
    # binary mode: one HTTP binary-mode message per line, read back by the bridge gives the AEP export's events
    from aefgate.formats.cloudevents import from_http

    ce_exporter.to_cloudevents(src, tmp_path / "bin.jsonl", mode="binary")
    aep_exporter.to_aep(src, tmp_path / "aep.jsonl")
    binary = [json.loads(x) for x in (tmp_path / "bin.jsonl").read_text().splitlines()]
    aep = [json.loads(x) for x in (tmp_path / "aep.jsonl").read_text().splitlines()]
    assert all(msg["headers"]["ce-specversion"] == "1.0" for msg in binary)
    back = [from_http(msg["headers"], msg["body"].encode()) for msg in binary]
    for ev in back:  # the AIGP grader also travels as extension attributes (docs/mappings/aigp.md)
        grader = (ev["data"].get("aef") or {}).get("grader") or {}
        assert ev.pop("aigpgrader", None) == grader.get("type")
        assert ev.pop("aigpconfidence", None) == grader.get("confidence")
    assert any("grader" in (ev["data"].get("aef") or {}) for ev in back)
    assert back == aep
    with pytest.raises(Refusal) as e:
        ce_exporter.to_cloudevents(src, tmp_path / "other.jsonl", mode="batch")
    assert e.value.rule == "CONV-3" and not (tmp_path / "other.jsonl").exists()


# -- refusals ---------------------------------------------------------------------------------------------------------


def test_unverified_run_is_refused_with_exit_1(tmp_path: Path):
    run = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "run")
    p = run / "results.ndjson"
    p.write_bytes(p.read_bytes().replace(b'"value":0.55', b'"value":0.56', 1))
    with pytest.raises(Refusal) as e:
        aep_exporter.to_aep(run, tmp_path / "out.jsonl")
    assert e.value.rule == "AEP-1" and e.value.exit_code == 1
    assert not (tmp_path / "out.jsonl").exists()
    (run / "seal.json").unlink()
    p.write_bytes(p.read_bytes().replace(b'"value":0.56', b'"value":0.55', 1))
    with pytest.raises(Refusal) as e:  # unsealed: verifies, but is not intact
        aep_exporter.export_events(run)
    assert e.value.rule == "AEP-1" and e.value.exit_code == 1 and "unsealed" in e.value.message


@pytest.mark.parametrize("bad, rule", [
    (b'{"aep":"0.1",\n', "AEP-13"),
    (b"[1,2]\n", "AEP-13"),
    (b'{"aep":"0.1","id":"a","type":"assessment.evaluation.recorded","time":"yesterday","source":"aep://h/a",'
     b'"agent":"a","session":"s","seq":0}\n', "AEP-13"),
    (b'{"aep":"0.1","id":"a","type":"assessment.evaluation.recorded","time":"2026-01-01T00:00:00Z",'
     b'"source":"aep://h/a","agent":"a","session":"s","seq":0,"data":{"gen_ai.evaluation.score.value":"high"}}\n',
     "AEP-13"),
])
def test_malformed_events_are_refused_with_file_and_line(bad: bytes, rule: str, tmp_path: Path):
    good = jsonio.dump_line(next(iter(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input"))))
    src = tmp_path / "events.jsonl"
    src.write_bytes(good + bad)
    with pytest.raises(Refusal) as e:
        aep_importer.from_aep(src, tmp_path / "back")
    assert e.value.exit_code == 2
    assert e.value.rule == rule or e.value.where.endswith(":2"), e.value
    assert e.value.where == f"{src}:2"
    assert not (tmp_path / "back").exists()


def test_import_refusals(tmp_path: Path):
    events = list(aep_exporter.export_events(EXAMPLES / "aef-inspect" / "input"))
    with pytest.raises(Refusal) as e:
        aep_importer.import_events([], tmp_path / "a")
    assert e.value.rule == "AEP-14"
    other = dict(events[1], session="another", id="x")
    with pytest.raises(Refusal) as e:
        aep_importer.import_events([events[0], other], tmp_path / "b")
    assert e.value.rule == "AEP-14" and e.value.where == "<events>:2"
    orphan = [e for e in events if e["data"]["aef"].get("parent")][:1]
    with pytest.raises(Refusal) as e:
        aep_importer.import_events(orphan, tmp_path / "c")
    assert e.value.rule == "AEP-15"
    clash = dict(events[0], id="clash")
    clash["data"] = dict(events[0]["data"], **{"gen_ai.evaluation.score.label": "passed"})
    with pytest.raises(Refusal) as e:
        aep_importer.import_events([events[0], clash], tmp_path / "d")
    assert e.value.rule == "AEP-15"
    assert not any((tmp_path / x).exists() for x in "abcd")
    # several sessions are one run when run_id is given
    ok = aep_importer.import_events([events[4], dict(events[5], session="another", id="y")], tmp_path / "e", run_id="merged",
                         at=AT)
    assert jsonio.read_json(ok / "run.json")["imported"]["asserted"][0] == "runId"


def _bullets(title: str) -> list[str]:
    """The bullets under ``title`` in "What does not carry over", backticks removed, whitespace collapsed."""
    text = PAGE.read_text(encoding="utf-8")
    rest = text[text.index(title) + len(title):]
    out: list[str] = []
    for line in rest.splitlines()[1:]:
        if line.startswith("- "):
            out.append(line[2:])
        elif line.startswith("  ") and out:
            out[-1] += " " + line.strip()
        else:
            break
    return [" ".join(x.replace("`", "").split()) for x in out]


def test_losses_are_the_pages_list():
    assert [x.text for x in aep_pkg.LOSSES_TO_AEP] == _bullets("**AEF -> AEP.**")
    assert [x.text for x in aep_pkg.LOSSES_FROM_AEP] == (_bullets("**AEP -> AEF** (of events aefgate exported).")
                                       + _bullets("**AEP -> AEF** (foreign events)."))


def test_registry_entries():
    from aefgate.converters.cloudevents import CONVERTERS as CE

    names = {(c.source, c.target): c for c in aep_pkg.CONVERTERS + CE}
    assert {k for k, c in names.items() if c in aep_pkg.CONVERTERS} == {("aef", "aep"), ("aep", "aef")}
    assert {("aef", "cloudevents"), ("cloudevents", "aef")} <= set(names)
    assert {o.name for o in names[("aef", "aep")].options} == {"max_capture", "agent", "source_host", "cause_map"}
    assert {o.name for o in names[("aef", "cloudevents")].options} >= {"mode"}
    assert {o.name for o in names[("aep", "aef")].options} == {"at", "run_id", "target_mode"}
    assert names[("aef", "aep")].losses == aep_pkg.LOSSES_TO_AEP
    assert names[("aep", "aef")].losses == aep_pkg.LOSSES_FROM_AEP


def test_convert_through_the_registry(tmp_path: Path):
    from aefgate.converters.registry import Registry

    reg = Registry(aep_pkg.CONVERTERS)
    out = tmp_path / "e.jsonl"
    from aefgate.converters.registry import run_route

    run_route(reg.find_route("aef", "aep"), EXAMPLES / "aef-inspect" / "input", out, {"max_capture": "full"})
    run_route(reg.find_route("aep", "aef"), out, tmp_path / "back", {"at": AT})
    assert verify_run(tmp_path / "back").outcome == "intact"


# -- the export in worker processes (ranges of results.ndjson): the same bytes as in one process ----------------------


def _export_both(run: Path, tmp: Path, monkeypatch, name: str, fn=None, **opts) -> tuple[bytes, bytes, int]:
    """The export (``fn``, default ``to_aep``) with AEFGATE_WORKERS=0 and =2 (threshold lowered), and how often
    the one pass ran in worker processes (the verifier's parallel path, mapping beside its checks)."""
    fn = aep_exporter.to_aep if fn is None else fn
    calls = []
    parallel = verifier._RunVerifier._parallel_results

    def spy(self, *a, **k):
        if self.mapper is not None:
            calls.append(1)
        return parallel(self, *a, **k)

    monkeypatch.setattr(verifier._RunVerifier, "_parallel_results", spy)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    out = {}
    for workers in ("0", "2"):
        monkeypatch.setenv("AEFGATE_WORKERS", workers)
        path = tmp / f"{name}-{workers}.jsonl"
        fn(run, path, **opts)
        out[workers] = path.read_bytes()
    return out["0"], out["2"], len(calls)


@pytest.mark.parametrize("level", ["metadata", "full"])
@pytest.mark.parametrize("src", RUNS, ids=IDS)
def test_parallel_export_same_bytes_example_runs(tmp_path: Path, monkeypatch, src: Path, level: str):
    """Every example run (several scores a line, people's judgments, guardrails, trials, offset times), one line a
    range: the envelope seq counts across ranges exactly as in one process."""
    monkeypatch.setattr(verifier, "_RANGE", 1)
    one, many, calls = _export_both(src, tmp_path, monkeypatch, "x", max_capture=level)
    assert calls == 1 and one == many and one
    events = [json.loads(x) for x in many.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))


def _plain_big_run(tmp: Path, lines: int = 3000) -> Path:
    """A bench run of ``lines`` lines, sealed at a fixed time: the same bytes every time."""
    import sys

    from aefgate.aef.sealer import seal_run

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from make_runs import make_run
    finally:
        sys.path.remove(str(REPO / "bench"))
    run = make_run(tmp / "plain", lines)
    seal_run(run, sealed_at=AT)
    return run


def _big_run(tmp: Path, lines: int = 3000) -> Path:
    import sys

    from aefgate.aef import decisions as ov
    from aefgate.aef.sealer import seal_run

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from make_runs import make_run
    finally:
        sys.path.remove(str(REPO / "bench"))
    run = make_run(tmp / "big", lines)
    seal_run(run, sealed_at=AT)
    rids = [v["resultId"] for v in _lines(run)]
    ov.decide(run, kind="override", by="reviewer-42", reason="Judge misread the policy", result=rids[2500],
              state="passed", at=AT)
    ov.decide(run, kind="approve", by="reviewer-42", reason="Reviewed", at=AT)
    ov.decide(run, kind="reject", by="reviewer-7", reason="Wrong", result=rids[7], at=AT)
    ov.decide(run, kind="annotate", by="reviewer-7", reason="See the ticket", result=rids[1501], at=AT)
    return run


@pytest.mark.parametrize("level", ["metadata", "full"])
def test_parallel_export_same_bytes_big_run(tmp_path: Path, monkeypatch, level: str):
    """A bench run of many ranges, with overlay decisions targeting lines of different ranges and a cause map."""
    run = _big_run(tmp_path)
    monkeypatch.setattr(verifier, "_RANGE", 64 * 1024)
    assert (run / "results.ndjson").stat().st_size > 10 * 64 * 1024
    lines = _lines(run)
    cmap = tmp_path / "causes.json"
    cmap.write_text(json.dumps({**{lines[i]["caseId"]: f"01CASE{i}" for i in range(0, 3000, 97)},
                                **{lines[i]["resultId"]: f"01RES{i}" for i in range(5, 3000, 131)}}))
    for opts in ({}, {"cause_map": str(cmap)}):
        one, many, calls = _export_both(run, tmp_path, monkeypatch, f"c{len(opts)}", max_capture=level, **opts)
        assert calls == 1 and one == many
        events = [json.loads(x) for x in many.splitlines()]
        assert [e["seq"] for e in events] == list(range(len(events))) and len(events) == 3000 + 4
        fb = events[-4:]
        assert [e["data"]["aef"]["decision"] for e in fb] == ["override", "approve", "reject", "annotate"]
        by_id = {e["id"]: e for e in events}
        assert by_id[fb[0]["cause"]]["data"]["aef"]["path"] == lines[2500]["path"]
        assert fb[3]["cause"].endswith(f"{lines[1501]['resultId']}-e0")
        if opts:
            assert sum("cause" in e for e in events[:-4]) > 0


@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_parallel_cloudevents_export_same_bytes(tmp_path: Path, monkeypatch, mode: str):
    """export cloudevents runs through the same ranges (AEP-18): in one process and in workers, the bytes of each
    AEP event's CloudEvents line, in order (the bench run with overlay decisions, and every example run)."""
    from aefgate.formats.cloudevents.ndjson import line_value as _export_value
    from aefgate.aef import jsonio

    monkeypatch.setattr(verifier, "_RANGE", 64 * 1024)
    for k, run in enumerate([_big_run(tmp_path)] + list(RUNS)):
        def with_grader(ev: dict) -> dict:  # the AIGP grader as extension attributes (docs/mappings/aigp.md)
            g = (ev.get("data") or {}).get("aef", {}).get("grader")
            if not g:
                return ev
            return {**ev, "aigpgrader": g["type"], **({"aigpconfidence": g["confidence"]} if "confidence" in g
                                                       else {})}

        expected = b"".join(jsonio.dump_line(_export_value(with_grader(ev), str(run), mode))
                            for ev in aep_exporter.export_events(run, max_capture="full"))
        one, many, calls = _export_both(run, tmp_path, monkeypatch, f"ce-{mode}-{k}",
                                        fn=lambda r, p, **o: ce_exporter.to_cloudevents(r, p, mode=mode, **o),
                                        max_capture="full")
        assert calls == 1 and one == many == expected and one


def test_parallel_export_default_threshold(tmp_path: Path, monkeypatch):
    """Below the verifier's _PARALLEL_FROM (and without AEFGATE_WORKERS) the one pass stays in this process."""
    monkeypatch.delenv("AEFGATE_WORKERS", raising=False)
    assert verifier._workers_for(verifier._PARALLEL_FROM - 1) == 0
    monkeypatch.setenv("AEFGATE_WORKERS", "0")
    assert verifier._workers_for(1 << 40) == 0
    monkeypatch.setenv("AEFGATE_WORKERS", "3")
    assert verifier._workers_for(10) == 3


@pytest.mark.parametrize("damage", ["garbled", "no-final-lf"])
def test_run_changed_during_the_pass_is_refused_alike(tmp_path: Path, monkeypatch, damage: str):
    """results.ndjson changed once run.json was read (the mapper has begun): the pass reads the changed file, the
    run does not verify, nothing is written, and the refusal is the same in one process and in workers."""
    run = _big_run(tmp_path)
    monkeypatch.setattr(verifier, "_RANGE", 64 * 1024)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    begin = aep_exporter._AepMapper.begin
    path = run / "results.ndjson"
    original = path.read_bytes()

    def damaged(self, *a, **k):
        begin(self, *a, **k)  # the run header read: now the file changes
        data = bytearray(original)
        if damage == "garbled":
            starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A][:-1]
            s = starts[2222]  # line 2223, in a later range
            data[s] = ord("[")
        else:
            data[-1:] = b" "
        path.write_bytes(bytes(data))

    monkeypatch.setattr(aep_exporter._AepMapper, "begin", damaged)
    seen = {}
    for workers in ("0", "2"):
        monkeypatch.setenv("AEFGATE_WORKERS", workers)
        out = tmp_path / f"out-{workers}.jsonl"
        with pytest.raises(Refusal) as r:
            aep_exporter.to_aep(run, out, max_capture="full")
        assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
        seen[workers] = (r.value.rule, r.value.where, r.value.message, r.value.exit_code)
        path.write_bytes(original)
    assert seen["0"] == seen["2"]
    assert seen["2"][0] == "AEP-1" and seen["2"][3] == 1
    # the first problem in §3.9's order: the file no longer has the digest its seal records
    assert "this one is invalid: " in seen["2"][2] and seen["2"][2].endswith(" at results.ndjson")


# -- byte-identical to the exports before the one pass (issue 20) --------------------------------------------------

EXPORT_DIGESTS = json.loads((Path(__file__).parent / "data" / "aep_export_digests.json").read_text())


@pytest.mark.parametrize("workers", ["0", "2"])
def test_exports_byte_identical_to_before_the_one_pass(tmp_path: Path, monkeypatch, workers: str):
    """tests/converters/data/aep_export_digests.json holds the SHA-256 of each export (AEP JSONL, CloudEvents
    structured and binary, at the metadata and full ceilings) of every example run and of a generated run of
    3,000 lines (bench/make_runs.py, sealed at a fixed time), as the exporter wrote them before issue 20 (commit 48a99b7, verify then read again). The
    one pass writes the same bytes, in one process and in worker processes (one range per 64 KiB)."""
    import hashlib

    monkeypatch.setenv("AEFGATE_WORKERS", workers)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(verifier, "_RANGE", 64 * 1024)
    big = _plain_big_run(tmp_path)
    runs = list(zip(IDS, RUNS)) + [("bench-3000", big)]
    got = {}
    k = 0
    for name, run in runs:
        for level in ("metadata", "full"):
            for fmt in ("aep", "structured", "binary"):
                k += 1
                p = tmp_path / f"o{k}.jsonl"
                if fmt == "aep":
                    aep_exporter.to_aep(run, p, max_capture=level)
                else:
                    ce_exporter.to_cloudevents(run, p, mode=fmt, max_capture=level)
                got[f"{name}|{level}|{fmt}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    assert got == EXPORT_DIGESTS
