"""Validation against the AEP schemas: the golden corpus, the invalid corpus (single events and streams),
mutations, refusals, and a differential check against jsonschema (Draft 2020-12) as the oracle."""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from aefgate.errors import Refusal
from aefgate.aef import schema as S
from aefgate.formats.aep import (
    CORE_ATTRIBUTES,
    check_event,
    payload_schema,
    registered_types,
    rule_for,
    stream_problems,
    validate_event,
)
from aefgate.formats.aep.event_schema import ENVELOPE_ID, SCHEMA_DIR, load_schema_documents

from ._aep import AEP, cases, golden, ids

GOLDEN = golden()
INVALID = cases("invalid")["cases"]
SINGLE = [c for c in INVALID if "event" in c]
STREAMS = [c for c in INVALID if "events" in c]


# -- the oracle ----------------------------------------------------------------------------------------------------

_DOCS = load_schema_documents()
_REGISTRY = Registry().with_resources((uri, Resource(doc, DRAFT202012)) for uri, doc in _DOCS.items())
_ENV = jsonschema.Draft202012Validator(_DOCS[ENVELOPE_ID], registry=_REGISTRY)
_PAYLOAD = {
    uri.rsplit("/", 1)[1][: -len(".schema.json")]: jsonschema.Draft202012Validator(doc, registry=_REGISTRY)
    for uri, doc in _DOCS.items()
    if uri != ENVELOPE_ID
}


def oracle(event) -> bool:
    """jsonschema's verdict, with the same reading: the envelope, then ``data`` (when present) against the
    payload schema of the type (when it has one)."""
    if not _ENV.is_valid(event):
        return False
    if isinstance(event, dict) and "data" in event and event.get("type") in _PAYLOAD:
        return _PAYLOAD[event["type"]].is_valid(event["data"])
    return True


# -- the packaged schemas are the specification's -------------------------------------------------------------------


def test_packaged_schemas_are_the_specifications():
    spec = sorted(p.relative_to(AEP / "schemas").as_posix() for p in (AEP / "schemas").rglob("*.json"))
    ours = sorted(p.relative_to(SCHEMA_DIR).as_posix() for p in SCHEMA_DIR.rglob("*.json"))
    assert ours == spec
    for rel in spec:
        assert (SCHEMA_DIR / rel).read_bytes() == (AEP / "schemas" / rel).read_bytes(), rel


def test_every_registered_type_with_a_schema_has_a_payload_validator():
    for name, row in registered_types().items():
        assert (payload_schema(name) is not None) == (row["schema"] is not None), name


# -- golden ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", GOLDEN, ids=[f"{e['id']}:{e['type']}" for e in GOLDEN])
def test_golden_events_are_valid(event):
    assert validate_event(event) is None
    check_event(event, "golden")
    assert oracle(event)


def test_golden_stream_has_no_cross_event_problem():
    assert stream_problems(GOLDEN) == []


def _required(event: dict) -> list[str]:
    out = ["aep", "id", "type", "time", "source", "agent"]
    if not event["type"].startswith("agent."):
        out.append("session")
    return out


@pytest.mark.parametrize("event", GOLDEN, ids=[f"{e['id']}:{e['type']}" for e in GOLDEN])
def test_golden_mutations_are_invalid(event):
    for name in _required(event):
        bad = {k: v for k, v in event.items() if k != name}
        why = validate_event(bad)
        assert why is not None and why.startswith(f"/{name}:"), (name, why)
        assert not oracle(bad)
    for name, wrong in (("aep", 1), ("id", 7), ("type", None), ("time", 3.5), ("source", []), ("agent", {}),
                        ("seq", "1"), ("epoch", -1), ("severity", "fatal"), ("capture", "everything"),
                        ("data", "text"), ("traceparent", "00-zz")):
        bad = dict(event)
        bad[name] = wrong
        why = validate_event(bad)
        assert why is not None and why.startswith(f"/{name}:"), (name, why)
        assert not oracle(bad)
    if event["type"].startswith("agent."):
        bad = dict(event, seq=0)
        assert validate_event(bad) == "/seq: no value is allowed here"
    elif "seq" in event:
        bad = {k: v for k, v in event.items() if k != "seq"}
        assert validate_event(bad) == "/seq: required member is missing"


# -- invalid ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SINGLE, ids=ids(SINGLE))
def test_invalid_events_are_refused(case):
    why = validate_event(case["event"])
    assert why is not None and why.startswith("/"), why
    assert not oracle(case["event"])
    with pytest.raises(Refusal) as info:
        check_event(case["event"], "cases.json:1")
    r = info.value
    assert r.exit_code == 2 and r.where == "cases.json:1" and why in r.message
    assert r.rule == rule_for(why, case["event"])
    # the rule id is the section the case cites (AEP-0001 §5.2 -> AEP-0001§5.2), or the section above it
    cited = [doc + "§" + sec.rstrip(".")
             for doc, secs in re.findall(r"(AEP-\d{4})((?:\s*/?\s*§[\d.]+)+)", case["rule"])
             for sec in re.findall(r"§([\d.]+)", secs)]
    if case["name"] == "command with seq":
        # the case cites AEP-0004 §2.2 (not part of this specification copy); AEP-0001 §5.2 states the same
        # exception for commands ("inbound control.* commands ... MUST omit seq")
        cited.append("AEP-0001§5.2")
    assert any(ref == r.rule or ref.startswith(r.rule + ".") or ref.startswith(r.rule + "#")
               for ref in cited), (r.rule, case["rule"])


@pytest.mark.parametrize("case", STREAMS, ids=ids(STREAMS))
def test_invalid_streams_are_refused(case):
    events = case["events"]
    assert all(validate_event(e) is None for e in events)  # each event is fine alone
    problems = stream_problems(events)
    assert problems, case["name"]
    index, rule, message = problems[0]
    assert index == len(events) - 1 or rule == "AEP-0002§5.3"
    assert rule.replace("§", " §").split(" §")[0] in case["rule"], (rule, case["rule"])
    # the stream minus its offending event is fine
    assert stream_problems(events[:index]) == []


def test_redelivery_is_not_a_collision():
    e = GOLDEN[0]
    assert stream_problems([e, copy.deepcopy(e)]) == []


def test_rules_by_pointer():
    assert rule_for("/session: required member is missing") == "AEP-0001§5.2"
    assert rule_for("/type: x") == "AEP-0001§6"
    assert rule_for("/data/state: x") == "AEP-0002§5"
    assert rule_for("/acmeext: x") == "AEP-0001§5.4"
    assert rule_for("(root): not an object") == "AEP-SCHEMA"


def test_not_an_object():
    for bad in (None, [], "event", 3):
        why = validate_event(bad)
        assert why is not None and why.startswith("(root)")
        with pytest.raises(Refusal) as info:
            check_event(bad)
        assert info.value.rule == "AEP-SCHEMA"


def test_extension_attributes():
    base = dict(GOLDEN[0])
    assert validate_event(dict(base, acmeregion="eu-1", acmen=3, acmeflag=True)) is None
    assert validate_event(dict(base, acmeratio=1.5)).startswith("/acmeratio:")
    assert validate_event(dict(base, acmenull=None)).startswith("/acmenull:")
    assert validate_event(dict(base, **{"Acme": "v"})).startswith("/Acme:")
    assert validate_event(dict(base, **{"a" * 21: "v"})).startswith("/" + "a" * 21)
    assert validate_event(dict(base, **{"a" * 20: "v"})) is None


# -- differential against jsonschema ---------------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.sampled_from(
        ["", "0.1", "x", "tool.completed", "agent.presence", "control.cancel", "attention.routed",
         "x.acme.run.custom", "x.acme.control.stop", "metadata", "full", "none", "info", "fatal", "output",
         "blocked", "select", "form", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.sampled_from(["id", "name", "label", "type", "x"]), inner, max_size=3)),
                       max_leaves=6)
_NAMES = st.one_of(st.sampled_from(sorted(CORE_ATTRIBUTES)), st.sampled_from(["acme", "acme_x", "Acme", "a" * 21]))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw):
    event = copy.deepcopy(draw(st.sampled_from(GOLDEN)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(event) if p]
        op = draw(st.sampled_from(["set", "delete", "add"]))
        if op == "add":
            event[draw(_NAMES)] = draw(_VALUES)
            continue
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        parent = event
        for tok in path[:-1]:
            parent = parent[tok]
        if op == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(_VALUES)
    return event


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_differential_against_jsonschema(event):
    why = validate_event(event)
    assert (why is None) == oracle(event), why


def test_differential_on_golden_and_invalid_corpus():
    for e in GOLDEN + [c["event"] for c in SINGLE] + [e for c in STREAMS for e in c["events"]]:
        assert (validate_event(e) is None) == oracle(e), e.get("id")


# -- the compiler generalization (aefgate.aef.schema.compile_schemas) -------------------------------------


def test_compile_schemas_property_names_and_annotation_prefixes():
    doc = {"$id": "urn:t/one.schema.json", "type": "object", "x-note": "ignored",
           "properties": {"known": {"type": "string", "x-aep-capture": "metadata"}},
           "propertyNames": {"pattern": "^[a-z]{1,5}$"},
           "additionalProperties": {"type": "integer"}}
    with pytest.raises(S.SchemaError):
        S.compile_schemas([doc])  # x-* keywords are annotations only when asked
    fn = S.compile_schemas([doc], annotation_prefixes=("x-",))["urn:t/one.schema.json"]
    oracle_v = jsonschema.Draft202012Validator(doc)
    for inst in ({}, {"known": "a"}, {"known": 1}, {"abc": 2}, {"abc": "2"}, {"ABC": 2}, {"toolong": 1},
                 {"known": "a", "b": 1, "c": True}):
        assert (fn(inst) is None) == oracle_v.is_valid(inst), inst
    assert fn({"ABC": 2}) == '/ABC: "ABC" is not an allowed member name'
    # in a boolean context (if) too
    doc2 = {"$id": "urn:t/two.schema.json", "if": {"propertyNames": {"pattern": "^a"}},
            "then": {"required": ["a"]}}
    fn2 = S.compile_schemas([doc2])["urn:t/two.schema.json"]
    for inst in ({}, {"ab": 1}, {"a": 1, "ab": 1}, {"b": 1}):
        assert (fn2(inst) is None) == jsonschema.Draft202012Validator(doc2).is_valid(inst), inst
