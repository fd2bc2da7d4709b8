"""The msgspec models of every AEF document (models.py), against the writer schemas and the example runs."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from aefgate.formats.aef import jsonio, models
from aefgate.formats.aef.models import from_dict, to_dict
from aefgate.formats.aef.schema import validator
from tests._shared import AEF, CONFORMANCE, EXAMPLES

WRITER = AEF / "schemas" / "writer"

JSON_FILES = {
    "run.json": models.Run,
    "metrics.json": models.Metrics,
    "summary.json": models.Summary,
    "seal.json": models.Seal,
}
NDJSON_FILES = {
    "results.ndjson": models.Result,
    "evidence.ndjson": models.Evidence,
    "gates.ndjson": models.GateDecision,
}


def _run_folders() -> list[Path]:
    """Every folder holding run.json under interop/examples/*/ and the conformance completed-eval run."""
    found = sorted({p.parent for p in EXAMPLES.glob("*/**/run.json")})
    found.append(CONFORMANCE / "valid" / "completed-eval" / "run")
    return found


RUN_FOLDERS = _run_folders()


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values, and of the same JSON type: an integer stays an integer (2 is not 2.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


def test_there_are_example_runs():
    assert len(RUN_FOLDERS) >= 15, RUN_FOLDERS


@pytest.mark.parametrize("run_dir", RUN_FOLDERS, ids=lambda p: str(p.relative_to(AEF)))
def test_every_document_of_the_example_runs_round_trips(run_dir: Path):
    """Each real document converts to its model and back to an equal dict (JSON values, types kept)."""
    seen = 0
    for name, cls in JSON_FILES.items():
        p = run_dir / name
        if p.is_file():
            doc = jsonio.read_json(p)
            model = from_dict(cls, doc)
            assert isinstance(model, cls)
            assert _same_json(to_dict(model), doc), name
            seen += 1
    for name, cls in NDJSON_FILES.items():
        p = run_dir / name
        if p.is_file():
            for lineno, doc in jsonio.iter_ndjson(p):
                assert _same_json(to_dict(from_dict(cls, doc)), doc), f"{name}:{lineno}"
                seen += 1
    assert seen >= 1


def test_round_trip_covers_every_line_kind():
    """The examples exercise composites, trials, rollups, evidence, gates and seals."""
    results = [doc for d in RUN_FOLDERS if (d / "results.ndjson").is_file()
               for _, doc in jsonio.iter_ndjson(d / "results.ndjson")]
    assert any("aggregation" in r for r in results)
    assert any("trials" in r for r in results)
    assert any("trial" in r for r in results)
    assert any("reasoning" in r for r in results)
    assert any("usage" in r for r in results)
    assert any((d / "gates.ndjson").is_file() for d in RUN_FOLDERS)
    assert any((d / "seal.json").is_file() for d in RUN_FOLDERS)


# -- field by field against the writer schemas ---------------------------------------------------------------------


def _schemas() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in WRITER.glob("*.schema.json")}


SCHEMAS = _schemas()


def _pointer(doc: Any, frag: str) -> Any:
    for tok in [t for t in frag.split("/") if t]:
        doc = doc[tok.replace("~1", "/").replace("~0", "~")]
    return doc


def _resolve(schema: dict, file: str) -> tuple[dict, str]:
    """Follow ``$ref`` (and a lone ``allOf`` wrapper) to the schema that describes the value."""
    while True:
        if "$ref" in schema:
            target, _, frag = schema["$ref"].partition("#")
            file = target or file
            schema = _pointer(SCHEMAS[file], frag)
            continue
        if "allOf" in schema and len(schema["allOf"]) == 1 and "type" not in schema and "properties" not in schema:
            schema = schema["allOf"][0]
            continue
        return schema, file


def _branches(schema: dict, file: str) -> list[tuple[dict, str]]:
    schema, file = _resolve(schema, file)
    if "anyOf" in schema:
        out = []
        for b in schema["anyOf"]:
            out.extend(_branches(b, file))
        return out
    return [(schema, file)]


def _nullable(schema: dict, file: str) -> bool:
    for b, _ in _branches(schema, file):
        t = b.get("type")
        if t == "null" or (isinstance(t, list) and "null" in t):
            return True
    return False


def _strip(tp: Any) -> tuple[list[Any], bool]:
    """The members of a type union without UnsetType and None; whether None was one of them."""
    args = typing.get_args(tp) if typing.get_origin(tp) is typing.Union else (tp,)
    return [a for a in args if a is not msgspec.UnsetType and a is not type(None)], type(None) in args


def _literal_values(tp: Any) -> set:
    return set(typing.get_args(tp)) if typing.get_origin(tp) is typing.Literal else set()


def _check_value(tp: Any, schema: dict, file: str, where: str) -> None:
    members, _ = _strip(tp)
    branches = [(b, f) for b, f in _branches(schema, file) if b.get("type") != "null"]
    for m in members:
        if isinstance(m, type) and issubclass(m, msgspec.Struct):
            objs = [(b, f) for b, f in branches if "properties" in b]
            assert len(objs) == 1, f"{where}: no single object schema for {m.__name__}"
            _check_struct(m, *objs[0], where)
        elif typing.get_origin(m) is list:
            arrays = [(b, f) for b, f in branches if b.get("type") == "array"]
            assert arrays, f"{where}: the schema has no array"
            _check_value(typing.get_args(m)[0], arrays[0][0]["items"], arrays[0][1], where + "[]")
        elif typing.get_origin(m) is typing.Literal:
            allowed: set = set()
            for b, _ in branches:
                if "enum" in b:
                    allowed |= set(b["enum"])
                if "const" in b:
                    allowed.add(b["const"])
            assert _literal_values(m) == allowed, f"{where}: {_literal_values(m)} != {allowed}"


def _check_struct(cls: type[msgspec.Struct], schema: dict, file: str, where: str) -> None:
    schema, file = _resolve(schema, file)
    props = schema["properties"]
    fields = {f.encode_name: f for f in msgspec.structs.fields(cls)}
    assert set(fields) == set(props), f"{where} ({cls.__name__}): {sorted(set(fields) ^ set(props))}"
    required = set(schema.get("required", ()))
    for name, f in fields.items():
        w = f"{where}/{name}"
        assert f.required == (name in required), f"{w}: required is {name in required} in the schema"
        if not f.required:
            assert f.default is msgspec.UNSET, f"{w}: an optional member defaults to UNSET (omitted when absent)"
        _, has_none = _strip(f.type)
        assert has_none == _nullable(props[name], file), f"{w}: null is allowed in one and not the other"
        _check_value(f.type, props[name], file, w)


@pytest.mark.parametrize("name", sorted(models.DOCUMENT_MODELS))
def test_models_follow_the_writer_schema_field_by_field(name: str):
    """Member names, required members, nullability and enum values: exactly the writer schema's, at every depth."""
    file = f"{name}.schema.json"
    _check_struct(models.DOCUMENT_MODELS[name], SCHEMAS[file], file, name)


def test_every_document_schema_has_a_model():
    documents = {"run", "result", "metrics", "summary", "evidence", "gate-decision", "seal", "overlay-event",
                 "overlay-seal", "trust-policy"}
    assert set(models.DOCUMENT_MODELS) == documents


# -- documents without an example run ------------------------------------------------------------------------------

OVERLAY_EVENTS = [
    {"schemaVersion": "1.0", "eventId": "ov_1", "kind": "approve", "target": {"run": "run-1", "runHash": "a" * 64},
     "by": {"identity": "oidc:https://id.example/alice", "assurance": "self-attested"}, "at": "2026-10-03T09:00:00Z"},
    {"schemaVersion": "1.0", "eventId": "ov_2", "kind": "override",
     "target": {"run": "run-1", "result": "r_479d157f3423e95d566bcbfc0c6d2461"}, "state": "passed",
     "reason": "The judge misread the policy.", "by": {"identity": "key:abc", "assurance": "signed"},
     "at": "2026-10-03T09:01:00.5Z", "ext": {"org.example": {"ticket": 12}}},
    {"schemaVersion": "1.0", "eventId": "ov_3", "kind": "waive", "target": {"run": "run-1", "requirement": "REQ-7"},
     "reason": "Known issue", "expires": "2026-11-01T00:00:00Z",
     "by": {"identity": "key:abc", "assurance": "authenticated"}, "at": "2026-10-03T09:02:00Z"},
    {"schemaVersion": "1.0", "eventId": "ov_4", "kind": "redact", "target": {"run": "run-1", "blob": "b" * 64},
     "reason": "personal data", "by": {"identity": "key:abc", "assurance": "signed"}, "at": "2026-10-03T09:03:00Z"},
]

OVERLAY_SEALS = [
    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "overlays/events.ndjson", "digest": {"sha256": "c" * 64}}],
     "predicateType": "https://agenteval.dev/aef/1/overlay-batch",
     "predicate": {"schemaVersion": "1.0", "runId": "run-1", "batch": 1, "offset": 0, "length": 412,
                   "previous": None, "runHash": "d" * 64}},
    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "overlays/events.ndjson", "digest": {"sha256": "e" * 64}}],
     "predicateType": "https://agenteval.dev/aef/1/overlay-batch",
     "predicate": {"schemaVersion": "1.0", "runId": "run-1", "batch": 2, "offset": 412, "length": 200,
                   "previous": {"path": "overlays/seal-0001.json", "sha256": "f" * 64}, "runHash": "d" * 64}},
]

PEM = (
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n"
    "-----END PUBLIC KEY-----\n"
)
TRUST_POLICIES = [
    {"keys": [{"identity": "git:alice@example.com", "publicKey": PEM}]},
    {"schemaVersion": "1.0", "keys": [{"identity": "spiffe://example/ci", "publicKey": PEM, "may": ["redact"]}]},
]


@pytest.mark.parametrize(
    "name,cls,doc",
    [("overlay-event", models.OverlayEvent, d) for d in OVERLAY_EVENTS]
    + [("overlay-seal", models.OverlaySeal, d) for d in OVERLAY_SEALS]
    + [("trust-policy", models.TrustPolicy, d) for d in TRUST_POLICIES],
)
def test_overlay_and_policy_documents_round_trip(name: str, cls: type, doc: dict):
    assert validator(name, "writer")(doc) is None  # the documents are real, writer-valid ones
    model = from_dict(cls, doc)
    assert _same_json(to_dict(model), doc)


# -- building documents ---------------------------------------------------------------------------------------------


def test_absent_members_are_omitted_and_null_is_written():
    line = models.Result(
        schema_version="1.0",
        result_id="r_" + "0" * 32,
        case_id="c1",
        path="q",
        evaluator=models.Evaluator(id="check"),
        state="failed",
        parent_result_id=None,
        scores=[models.Score(metric="q", value=0, normalized=None)],
        usage=[models.Usage(role="judge", input_tokens=10, cost_usd=0.5)],
        component=models.Component(weight=0, required=True),
    )
    d = to_dict(line)
    assert d == {
        "schemaVersion": "1.0", "resultId": "r_" + "0" * 32, "caseId": "c1", "path": "q",
        "evaluator": {"id": "check"}, "state": "failed", "parentResultId": None,
        "scores": [{"metric": "q", "value": 0, "normalized": None}],
        "usage": [{"role": "judge", "gen_ai.usage.input_tokens": 10, "costUsd": 0.5}],
        "component": {"weight": 0, "required": True},
    }
    assert validator("result", "writer")(d) is None
    assert jsonio.dumps(line) == jsonio.dumps(d)


def test_models_of_special_names():
    summary = from_dict(models.Summary, {
        "schemaVersion": "1.0", "runId": "r", "lanes": [{"lane": "main", "metrics": [
            {"metric": "m", "path": "p", "n": 0, "N": 2, "notMeasured": 2, "value": None,
             "verdict": "not_measured"}]}]})
    entry = summary.lanes[0].metrics[0]
    assert (entry.N, entry.n, entry.not_measured, entry.value) == (2, 0, 2, None)
    agg = from_dict(models.Aggregation, {"strategy": "Own", "rulePath": "threshold", "measured": 1, "total": 2,
                                         "unmeasured": {"not_applicable": 1}})
    assert agg.unmeasured.not_applicable == 1 and agg.rule_path == "threshold"
    assert to_dict(agg)["unmeasured"] == {"not_applicable": 1}
    imported = from_dict(models.Imported, {"from": "inspect_ai", "asserted": ["subject.ref"]})
    assert imported.from_ == "inspect_ai" and to_dict(imported) == {"from": "inspect_ai", "asserted": ["subject.ref"]}
    seal_doc = json.loads((CONFORMANCE / "valid" / "completed-eval" / "run" / "seal.json").read_text())
    seal = from_dict(models.Seal, seal_doc)
    assert seal.type_ == "https://in-toto.io/Statement/v1" and len(seal.predicate.run_hash) == 64


def test_numbers_keep_their_json_type():
    s = from_dict(models.Score, {"metric": "m", "value": 3})
    f = from_dict(models.Score, {"metric": "m", "value": 3.0})
    assert type(s.value) is int and type(f.value) is float
    assert jsonio.dumps(s) == b'{"metric":"m","value":3}'
    assert jsonio.dumps(f) == b'{"metric":"m","value":3.0}'


@pytest.mark.parametrize(
    "cls,doc",
    [
        (models.Result, {"schemaVersion": "1.0", "resultId": "r_x", "caseId": "c", "path": "p",
                         "evaluator": {"id": "e"}, "state": "passed", "colour": "red"}),  # a member no schema has
        (models.Result, {"schemaVersion": "1.0", "resultId": "r_x", "caseId": "c", "path": "p",
                         "evaluator": {"id": "e"}, "state": "sealed"}),  # no such state
        (models.Score, {"metric": "m", "value": True}),  # a boolean is not a number
        (models.Score, {"metric": "m"}),  # value is required
        (models.Run, {"schemaVersion": "2.0"}),
        (models.Metric, {"id": "m", "kind": "score", "direction": "none", "scale": "bounded"}),
    ],
)
def test_from_dict_refuses_what_the_types_cannot_hold(cls: type, doc: dict):
    with pytest.raises(msgspec.ValidationError):
        from_dict(cls, doc)
