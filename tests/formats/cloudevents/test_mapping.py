"""AEP-0005 §1-§2, §5: the forward map against the pinned CloudEvents, the inverse, the inbound cases, refusals."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from aefgate.errors import Refusal
from aefgate.formats.cloudevents import Diagnostic, ce_forward, ce_inverse, is_valid_cloudevent
from tests.formats.cloudevents._fixtures import (
    CE_LINES,
    ENVELOPE_SCHEMA,
    GOLDEN_EVENTS,
    IDS,
    INBOUND_CASES,
    PAIRS,
    canonical,
)

_SCHEMA = json.loads(ENVELOPE_SCHEMA.read_text("utf-8"))
_ENVELOPE = jsonschema.Draft202012Validator(_SCHEMA, format_checker=jsonschema.FormatChecker())


def test_the_fixtures_are_line_for_line() -> None:
    assert len(PAIRS) == 64
    assert [c["id"] for _, c in PAIRS] == [g["id"] for g, _ in PAIRS]


@pytest.mark.parametrize("golden,expected", PAIRS, ids=IDS)
def test_forward_is_the_pinned_cloudevent(golden: dict, expected: dict) -> None:
    ce = ce_forward(golden)
    assert ce == expected  # §5.1: as JSON values
    assert canonical(ce) == canonical(expected)
    assert is_valid_cloudevent(ce, strict=True) is None  # §5.2


@pytest.mark.parametrize("i", range(len(PAIRS)), ids=IDS)
def test_forward_writes_the_pinned_member_order(i: int) -> None:
    # the pinned lines are compact, ASCII-escaped JSON: the same serialization of ce_forward gives the same bytes
    assert json.dumps(ce_forward(GOLDEN_EVENTS[i]), separators=(",", ":")).encode() == CE_LINES[i]


@pytest.mark.parametrize("golden,expected", PAIRS, ids=IDS)
def test_inverse_gives_the_golden_event_back(golden: dict, expected: dict) -> None:
    assert canonical(ce_inverse(ce_forward(golden))) == canonical(golden)  # §5.1 round-trip identity
    diags: list[Diagnostic] = []
    assert ce_inverse(expected, diagnostics=diags) == golden  # the pinned CE read directly
    assert diags == []


def test_forward_does_not_change_its_input() -> None:
    for e in GOLDEN_EVENTS:
        before = copy.deepcopy(e)
        ce_forward(e)
        assert e == before


@pytest.mark.parametrize("case", INBOUND_CASES, ids=[c["name"] for c in INBOUND_CASES])
def test_inbound_cases(case: dict) -> None:
    diags: list[Diagnostic] = []
    got = ce_inverse(case["ce"], diagnostics=diags)
    assert got == case["expected"]
    assert list(_ENVELOPE.iter_errors(got)) == []
    dropped = sorted(set(case["ce"]) - set(ce_forward(case["expected"])))
    assert [d.attribute for d in diags] == dropped  # one diagnostic per dropped attribute, none otherwise


def test_inbound_grammar_illegal_name_is_dropped_with_a_diagnostic() -> None:
    case = next(c for c in INBOUND_CASES if "aep_bad" in c["ce"])
    diags: list[Diagnostic] = []
    got = ce_inverse(case["ce"], diagnostics=diags)
    assert "aep_bad" not in got
    assert len(diags) == 1 and diags[0].attribute == "aep_bad" and diags[0].rule == "CE-5"


def _ce0() -> dict:
    return ce_forward(GOLDEN_EVENTS[0])


@pytest.mark.parametrize(
    "change,dropped",
    [
        ({"agent": "x"}, "agent"),  # legal grammar, but an AEP core name: cannot be an extension (AEP-0001 §5.4)
        ({"averyveryverylongname1": "x"}, "averyveryverylongname1"),  # over 20 characters
        ({"Upper": "x"}, "Upper"),
        ({"nothing": None}, "nothing"),
        ({"afloat": 1.5}, "afloat"),
        ({"anobject": {"a": 1}}, "anobject"),
        ({"bigint": 2**31}, "bigint"),
        ({"dataschema": "https://example.com/s.json"}, "dataschema"),
    ],
)
def test_inverse_drops_what_cannot_ride_the_envelope(change: dict, dropped: str) -> None:
    ce = {**_ce0(), **change}
    diags: list[Diagnostic] = []
    assert ce_inverse(ce, diagnostics=diags) == GOLDEN_EVENTS[0]
    assert [d.attribute for d in diags] == [dropped]


def test_inverse_keeps_integer_and_boolean_extensions() -> None:
    ce = {**_ce0(), "acmecount": 7, "acmeflag": False}
    got = ce_inverse(ce)
    assert got["acmecount"] == 7 and got["acmeflag"] is False
    assert ce_forward(got) == ce


def test_inverse_reads_json_media_type_variants_with_a_diagnostic() -> None:
    ce = {**_ce0(), "datacontenttype": "application/json; charset=utf-8"}
    diags: list[Diagnostic] = []
    assert ce_inverse(ce, diagnostics=diags) == GOLDEN_EVENTS[0]
    assert [d.rule for d in diags] == ["B1"]


def _without(d: dict, *names: str) -> dict:
    return {k: v for k, v in d.items() if k not in names}


@pytest.mark.parametrize(
    "ce,rule,where",
    [
        ({**_ce0(), "type": "com.example.order.created"}, "B3", "type"),  # §2 rule 3: foreign
        ({**_ce0(), "type": "dev.aep.Not An Aep Type"}, "B3", "type"),
        (_without(_ce0(), "aepversion"), "B4", "aepversion"),
        (_without(_ce0(), "aepagentid"), "B4", "aepagentid"),
        (_without(_ce0(), "time"), "B2", "time"),
        (_without(_ce0(), "id"), "CE-1", "id"),
        ({**_ce0(), "specversion": "0.3"}, "CE-1", "specversion"),
        ({**_ce0(), "time": "2026-07-03 10:14:00"}, "CE-1", "time"),
        ({**_ce0(), "aepsequence": "0"}, "B4", "aepsequence"),
        ({**_ce0(), "aepsequence": -1}, "B4", "aepsequence"),
        ({**_ce0(), "aepsequence": True}, "B4", "aepsequence"),
        ({**_ce0(), "aepseverity": "loud"}, "B4", "aepseverity"),
        ({**_ce0(), "aepcapture": ["full"]}, "B4", "aepcapture"),
        ({**_ce0(), "traceparent": "00-xyz"}, "B5", "traceparent"),
        ({**_ce0(), "data": [1, 2]}, "CE-3", "data"),
        ({**_without(_ce0(), "data"), "data_base64": "AAAA"}, "CE-3", "data_base64"),
        ({**_ce0(), "datacontenttype": "text/plain"}, "CE-3", "datacontenttype"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_inverse_refusals(ce: dict, rule: str, where: str) -> None:
    with pytest.raises(Refusal) as ei:
        ce_inverse(ce, "f.jsonl:3")
    assert ei.value.rule == rule
    assert ei.value.where == f"f.jsonl:3/{where}"
    assert ei.value.exit_code == 2


@pytest.mark.parametrize("value", [None, [], "text", 3])
def test_inverse_refuses_a_non_object(value: object) -> None:
    with pytest.raises(Refusal) as ei:
        ce_inverse(value)  # type: ignore[arg-type]
    assert ei.value.rule == "CE-1"


def _e0() -> dict:
    return copy.deepcopy(GOLDEN_EVENTS[0])


@pytest.mark.parametrize(
    "event,rule,where",
    [
        ({**_e0(), "type": "Session Started"}, "B3", "type"),
        (_without(_e0(), "type"), "B3", "type"),
        (_without(_e0(), "id"), "B2", "id"),
        ({**_e0(), "source": ""}, "B2", "source"),
        ({**_e0(), "time": "yesterday"}, "B2", "time"),
        ({**_e0(), "time": "2026-02-30T10:00:00Z"}, "B2", "time"),
        ({**_e0(), "time": "2026-07-03T10:14:00"}, "B2", "time"),
        ({**_e0(), "data": "text"}, "B2", "data"),
        (_without(_e0(), "aep"), "B4", "aep"),
        (_without(_e0(), "agent"), "B4", "agent"),
        ({**_e0(), "seq": -1}, "B4", "seq"),
        ({**_e0(), "seq": 1.0}, "B4", "seq"),
        ({**_e0(), "seq": 2**31}, "CE-2", "seq"),  # CE Integer is 32-bit; AEP's seq is not bounded
        ({**_e0(), "severity": {"level": 1}}, "B4", "severity"),
        ({**_e0(), "capture": "everything"}, "B4", "capture"),
        ({**_e0(), "traceparent": "not-a-traceparent"}, "B5", "traceparent"),
        ({**_e0(), "subject": "line\nbreak"}, "CE-2", "subject"),
        ({**_e0(), "session": "s\u0085"}, "CE-2", "session"),
        ({**_e0(), "Acme": "x"}, "B4", "Acme"),
        ({**_e0(), "specversion": "1.0"}, "B4", "specversion"),
        ({**_e0(), "dataschema": "https://x"}, "B4", "dataschema"),
        ({**_e0(), "aepsequence": 5}, "B4", "aepsequence"),  # would collide with the B4 name of seq
        ({**_e0(), "acmelist": [1]}, "B4", "acmelist"),
        ({**_e0(), "acmebig": -(2**31) - 1}, "CE-2", "acmebig"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_forward_refusals(event: dict, rule: str, where: str) -> None:
    with pytest.raises(Refusal) as ei:
        ce_forward(event, "in.jsonl:7")
    assert ei.value.rule == rule
    assert ei.value.where == f"in.jsonl:7/{where}"


def test_forward_refuses_a_non_object() -> None:
    with pytest.raises(Refusal) as ei:
        ce_forward(["not", "an", "event"])  # type: ignore[arg-type]
    assert ei.value.rule == "CE-1"


def test_non_ascii_strings_are_carried() -> None:
    e = {**_e0(), "subject": "naïve — 文字", "acmenote": "é\u00ad"}
    ce = ce_forward(e)
    assert ce["subject"] == e["subject"] and ce["acmenote"] == "é\u00ad"
    assert is_valid_cloudevent(ce, strict=True) is None
    assert ce_inverse(ce) == e


def test_optional_attributes_are_not_materialized() -> None:
    minimal = next(e for e in GOLDEN_EVENTS if set(e) == {"aep", "id", "type", "time", "source", "agent",
                                                          "session", "seq"})
    ce = ce_forward(minimal)
    assert set(ce) == {"specversion", "id", "source", "type", "time", "aepversion", "aepagentid", "aepsessionid",
                       "aepsequence"}
    assert "datacontenttype" not in ce  # B1: only with data
    assert ce_inverse(ce) == minimal
