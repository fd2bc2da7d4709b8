"""AIGP grader types (RFC-032 §5) carried through the converters (docs/mappings/aigp.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from aefgate.converters.aep.exporter import export_events
from aefgate.converters.cloudevents.exporter import to_cloudevents
from aefgate.converters.aigp import annotator_kind, grader_of
from aefgate.converters.evaluation_api.importer import from_evaluation_api
from aefgate.converters.inspect.importer import from_inspect
from aefgate.converters.otel.exporter import export_records
from aefgate.converters.otel.importer import from_otel
from aefgate.aef import jsonio
from tests._shared import CONFORMANCE, SAMPLES

AT = "2026-12-04T00:00:00Z"
COMPLETED = CONFORMANCE / "valid" / "completed-eval" / "run"  # judge gpt-5.1 with a calibration


def test_the_table() -> None:
    assert grader_of({"annotator": {"kind": "CODE"}}) == {"type": "CODE"}
    assert grader_of({"annotator": {"kind": "HUMAN"}}) == {"type": "HUMAN"}
    assert grader_of({"annotator": {"kind": "HYBRID"}}) == {"type": "COMPOSITE"}
    assert grader_of({"annotator": {"kind": "OTHER"}}) is None
    assert grader_of({"state": "passed"}) is None
    assert grader_of({"aggregation": {"strategy": "Min"}}) == {"type": "COMPOSITE"}
    assert grader_of({"aggregation": {}, "annotator": {"kind": "LLM", "model": "m"}}, {"m"}) == {"type": "MODEL"}
    assert grader_of({"annotator": {"kind": "LLM", "model": "m"}}) == {"type": "MODEL", "confidence": "UNCALIBRATED"}
    assert grader_of({"annotator": {"kind": "LLM"}}, {"m"}) == {"type": "MODEL", "confidence": "UNCALIBRATED"}
    assert [annotator_kind(x) for x in ("MODEL", "CODE", "HUMAN", "COMPOSITE", "llm_judge", "deterministic",
                                        "human", "other", None)] == \
        ["LLM", "CODE", "HUMAN", "HYBRID", "LLM", "CODE", "HUMAN", None, None]


@pytest.fixture(scope="module")
def insights(tmp_path_factory) -> Path:
    """The Evaluation API sample: every insight graded by an LLM, no judge calibrated."""
    return from_evaluation_api(SAMPLES / "evaluation-api" / "finished.json", tmp_path_factory.mktemp("a") / "run",
                               subject="agent:acme-support", at=AT)


def _aep_graders(run: Path) -> list:
    return [((ev.get("data") or {}).get("aef") or {}).get("grader") for ev in export_events(run)]


def _otlp_graders(run: Path) -> list:
    out = []
    for doc in export_records(run, aigp=True):
        for rl in doc["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for rec in sl["logRecords"]:
                    a = {x["key"]: x["value"]["stringValue"] for x in rec["attributes"] if x["key"].startswith("aigp")}
                    out.append(a or None)
    return out


def test_an_uncalibrated_model_grader_is_marked_in_aep_cloudevents_and_otlp(insights: Path, tmp_path: Path) -> None:
    want = {"type": "MODEL", "confidence": "UNCALIBRATED"}
    aep = _aep_graders(insights)
    assert aep and all(g == want for g in aep)
    ce = to_cloudevents(insights, tmp_path / "ce.jsonl")
    events = [json.loads(x) for x in ce.read_text().splitlines()]
    assert events and all(e["aigpgrader"] == "MODEL" and e["aigpconfidence"] == "UNCALIBRATED" for e in events)
    assert all(e["data"]["aef"]["grader"] == want for e in events)
    # OTLP: the insights with a score (a line without one needs a summary entry naming its metric, OT-1)
    doc = json.loads((SAMPLES / "evaluation-api" / "finished.json").read_bytes())
    doc["results"] = [s for s in doc["results"] if s["type"] != "GROUP" and s["value"]["type"] in ("boolean",
                                                                                                     "number")]
    (tmp_path / "scored.json").write_text(json.dumps(doc))
    scored = from_evaluation_api(tmp_path / "scored.json", tmp_path / "scored", subject="agent:x", at=AT)
    otlp = _otlp_graders(scored)
    assert len(otlp) == 2
    assert all(a == {"aigp.grader.type": "MODEL", "aigp.grader.confidence": "UNCALIBRATED"} for a in otlp)


def test_a_calibrated_judge_and_a_composite_tree(tmp_path: Path) -> None:
    lines = [x for _, x in jsonio.iter_ndjson(COMPLETED / "results.ndjson")]
    graders = _aep_graders(COMPLETED)
    kinds = {(x.get("annotator") or {}).get("kind") for x in lines}
    assert {"LLM", "CODE"} <= kinds
    assert {"type": "MODEL"} in graders and {"type": "CODE"} in graders and {"type": "COMPOSITE"} in graders
    assert not any(g and g.get("confidence") for g in graders)  # gpt-5.1 has a calibration in run.json
    assert {"aigp.grader.type": "MODEL"} in _otlp_graders(COMPLETED)
    # without the calibration the same judge is uncalibrated
    run = tmp_path / "run"
    from tests._shared import copy_run

    copy_run(COMPLETED, run)
    header = jsonio.read_json(run / "run.json")
    judges = copy.deepcopy(header["judges"])
    assert any(j.get("calibration") for j in judges)
    from aefgate.converters.aigp import calibrated_models

    assert grader_of(next(x for x in lines if (x.get("annotator") or {}).get("kind") == "LLM"),
                     calibrated_models({"judges": [{k: v for k, v in j.items() if k != "calibration"}
                                                   for j in judges]})) == {"type": "MODEL",
                                                                           "confidence": "UNCALIBRATED"}


def test_otel_export_without_aigp_is_the_pages() -> None:
    keys = [x["key"] for doc in export_records(COMPLETED) for rl in doc["resourceLogs"] for sl in rl["scopeLogs"]
            for rec in sl["logRecords"] for x in rec["attributes"]]
    assert keys and not any(k.startswith("aigp") for k in keys)


def test_inspect_grader_types(tmp_path: Path) -> None:
    run = from_inspect(SAMPLES / "inspect" / "basic.json", tmp_path / "run", at=AT, grader_types=True)
    by_eval = {}
    for _, x in jsonio.iter_ndjson(run / "results.ndjson"):
        by_eval.setdefault(x["evaluator"]["id"], set()).add(json.dumps(x.get("annotator"), sort_keys=True))
    assert by_eval["match"] == {json.dumps({"kind": "CODE"})}
    assert by_eval["answer_length"] == {"null"}  # the task's own scorer: the log does not say who graded
    plain = from_inspect(SAMPLES / "inspect" / "basic.json", tmp_path / "plain", at=AT)
    assert not any("annotator" in x for _, x in jsonio.iter_ndjson(plain / "results.ndjson"))


def test_otel_evaluator_type_is_read(tmp_path: Path) -> None:
    doc = json.loads((SAMPLES / "otel" / "logs.otlp.jsonl").read_text().splitlines()[0])
    for rl in doc["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for rec in sl["logRecords"]:
                rec["attributes"].append({"key": "gen_ai.evaluation.evaluator.type",
                                          "value": {"stringValue": "llm_judge"}})
    src = tmp_path / "logs.jsonl"
    src.write_text(json.dumps(doc) + "\n")
    run = from_otel(src, tmp_path / "run", at=AT)
    anns = [x.get("annotator") for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
    assert anns and all(a == {"kind": "LLM"} for a in anns)


def test_store_v1_and_assert_samples_carry_their_graders(tmp_path: Path) -> None:
    """The LLM judges of the store v1 sample and of the ASSERT worked example are MODEL graders, uncalibrated (no
    judge of either run has a calibration), in the AEP export; a composite node is COMPOSITE."""
    from aefgate.converters.assert_ai.importer import from_assert
    from aefgate.converters.store_v1.importer import from_store_v1
    from tests.formats.store_v1.workspace import RUN1, SAMPLE

    store = from_store_v1(SAMPLE, tmp_path / "sv1", run=RUN1, at=AT).path
    kit = next((SAMPLES / "assert" / "agenteval-billing-safety").rglob("manifest.json")).parent
    red = from_assert(kit, tmp_path / "assert", at=AT)
    for run in (store, red):
        graders = [g for g in _aep_graders(run) if g]
        assert {"type": "MODEL", "confidence": "UNCALIBRATED"} in graders, run
        assert {"type": "COMPOSITE"} in graders or any(g["type"] == "CODE" for g in graders), run
