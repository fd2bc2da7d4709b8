"""Capture: the x-aep-capture classes, ceilings (the conformance downlevel and capture-gating corpora), the
redacting re-emitter, and a property: no secret crosses a ceiling."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aefgate.errors import Refusal
from aefgate.aef.jsonio import dumps
from aefgate.formats.aep import (
    CAPTURE_LEVELS,
    SECRET,
    Redactor,
    apply_ceiling,
    capture_classes,
    capture_problem,
    gate_form_values,
    validate_event,
)

from ._aep import cases, golden, ids

DOWNLEVEL = cases("downlevel")["cases"]
GATING = cases("capture-gating")["cases"]
GOLDEN = golden()
HOME = "/home/operator"


def _json(v) -> str:
    return json.dumps(v, sort_keys=True)


# -- the conformance corpora -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", DOWNLEVEL, ids=ids(DOWNLEVEL))
def test_downlevel_cases(case):
    event = case["event"]
    before = copy.deepcopy(event)
    out = apply_ceiling(event, case["ceiling"])
    assert event == before  # never mutates its input
    assert out is not event
    assert out["capture"] == case["expect_capture"]
    if case["expect_data"] is None:
        assert "data" not in out
    else:
        assert _json(out["data"]) == _json(case["expect_data"])
    # the envelope is otherwise untouched
    assert {k: v for k, v in out.items() if k not in ("data", "capture")} == {
        k: v for k, v in event.items() if k not in ("data", "capture")}
    # the result is a valid event that honors its capture, and a second pass changes nothing
    assert validate_event(out) is None
    assert capture_problem(out) is None
    assert apply_ceiling(out, case["ceiling"]) == out


@pytest.mark.parametrize("case", GATING, ids=ids(GATING))
def test_capture_gating_cases(case):
    assert _json(gate_form_values(case["fields"], case["values"], case["ceiling"])) == _json(case["expect"])


def test_capture_gating_redacted_runs_the_pipeline_when_given_one():
    fields = [{"id": "name", "type": "string", "label": "Name"}, {"id": "n", "type": "number", "label": "N"}]
    values = {"name": "mail me at ops@example.com", "n": 2}
    out = gate_form_values(fields, values, "redacted", redactor=Redactor(home=HOME))
    assert out == {"name": "mail me at [REDACTED:pii]", "n": 2}
    assert gate_form_values(fields, values, "full", redactor=Redactor(home=HOME)) == values


def test_ceiling_equal_or_above_is_a_copy():
    for e in GOLDEN:
        cap = e.get("capture", "metadata")
        for ceiling in ("metadata", "redacted", "full"):
            if ["none", "metadata", "redacted", "full"].index(ceiling) >= ["none", "metadata", "redacted",
                                                                            "full"].index(cap):
                out = apply_ceiling(e, ceiling)
                assert out == e and out is not e


def test_golden_at_every_ceiling():
    order = ["none", "metadata", "redacted", "full"]
    for e in GOLDEN:
        before = copy.deepcopy(e)
        for ceiling in order:
            for red in (None, Redactor(home=HOME)):
                out = apply_ceiling(e, ceiling, redactor=red)
                assert e == before
                assert validate_event(out) is None, (e["id"], ceiling, validate_event(out))
                assert capture_problem(out) is None
                got = order.index(out.get("capture", "metadata"))
                assert got <= order.index(ceiling)
                assert got <= order.index(e.get("capture", "metadata"))  # never up-level
                if ceiling == "none":
                    assert "data" not in out


def test_redacting_re_emitter_keeps_redacted_fields_after_the_pipeline():
    case = next(c for c in DOWNLEVEL if c["event"]["id"] == "DL10")  # full, verbatim result_redacted
    event = copy.deepcopy(case["event"])
    event["data"]["result_redacted"] = "token=abc123def456 sent to jane@example.com from /home/alice/x"
    out = apply_ceiling(event, "redacted", redactor=Redactor(home=HOME))
    assert out["capture"] == "redacted"
    assert "result" not in out["data"]  # full-class: dropped
    assert out["data"]["result_redacted"] == f"token={SECRET} sent to [REDACTED:pii] from ~/x"
    assert out["data"]["result_digest"] == event["data"]["result_digest"]
    # a redacted source: unchanged by a mechanical hop (DL12), through the pipeline again by a redacting one
    src = dict(out, data={**out["data"], "result_redacted": "password: hunter2"})
    assert apply_ceiling(src, "redacted") == src
    again = apply_ceiling(src, "redacted", redactor=Redactor(home=HOME))
    assert again["data"]["result_redacted"] == f"password: {SECRET}"
    dl12 = next(c for c in DOWNLEVEL if c["event"]["id"] == "DL12")
    assert apply_ceiling(dl12["event"], "redacted", redactor=Redactor(home=HOME))["data"] == dl12["expect_data"]


def test_starred_fields_through_a_redacting_re_emitter():
    case = next(c for c in DOWNLEVEL if c["event"]["id"] == "DL3")
    event = copy.deepcopy(case["event"])
    event["capture"] = "full"
    event["data"]["prompt"] = "Use key AKIAIOSFODNN7EXAMPLE?"
    out = apply_ceiling(event, "redacted", redactor=Redactor(home=HOME))
    assert out["capture"] == "redacted"
    assert out["data"]["prompt"] == f"Use key {SECRET}?"
    assert out["data"]["fields"][0]["choices"][0]["label"] == "PostgreSQL"
    # without one: metadata, structural placeholders
    mech = apply_ceiling(event, "redacted")
    assert mech["capture"] == "metadata" and mech["data"] == case["expect_data"]


def test_prompt_synthesis_without_subject():
    case = next(c for c in DOWNLEVEL if c["event"]["id"] == "DL4")
    event = {k: v for k, v in case["event"].items() if k != "subject"}
    assert apply_ceiling(event, "metadata")["data"]["prompt"] == "claude-code requests permission"


def test_bad_ceiling_and_bad_capture_are_refused():
    with pytest.raises(Refusal) as info:
        apply_ceiling(GOLDEN[0], "secret")
    assert info.value.rule == "AEP-0001§8.2"
    with pytest.raises(Refusal):
        apply_ceiling(dict(GOLDEN[0], capture="everything"), "metadata")
    with pytest.raises(Refusal):
        gate_form_values([], {}, "all")


# -- classes -------------------------------------------------------------------------------------------------------


def test_capture_classes():
    assert capture_classes("assessment.evaluation.recorded") == {
        "/gen_ai.evaluation.name": "metadata",
        "/gen_ai.evaluation.score.value": "metadata",
        "/gen_ai.evaluation.score.label": "metadata",
        "/gen_ai.evaluation.explanation": "redacted",
        "/evaluator": "metadata",
    }
    fb = capture_classes("assessment.feedback.received")
    assert {k for k, v in fb.items() if v == "redacted"} == {"/comment", "/correction"}
    gr = capture_classes("assessment.guardrail.recorded")
    assert gr["/guardrail/explanation"] == "redacted"
    assert gr["/guardrail/categories/*/score"] == "metadata"
    tc = capture_classes("tool.completed")
    assert tc["/result"] == "full" and tc["/result_redacted"] == "redacted" and tc["/tool/name"] == "metadata"
    assert capture_classes("resource.citation.recorded")["/citations/*/cited_text"] == "full"
    assert capture_classes("x.acme.session.custom_blob") == {}
    assert set(CAPTURE_LEVELS) == {"metadata", "redacted", "full"}


def test_capture_problem():
    e = next(c["event"] for c in DOWNLEVEL if c["event"]["id"] == "DL5")
    assert capture_problem(e) is None  # redacted event, redacted field
    assert capture_problem(dict(e, capture="metadata")) == (
        "/data/error/message: a redacted-class field in an event of capture metadata (AEP-0002 §5.1 rule 1)")
    assert capture_problem(dict(e, capture="none")).startswith("/data:")
    docs = next(c["event"] for c in DOWNLEVEL if c["event"]["type"] == "resource.retrieval.returned")
    assert capture_problem(dict(docs, capture="redacted")).startswith("/data/documents/0/content:")


# -- property: nothing secret crosses a ceiling ----------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_WORDS = st.lists(st.sampled_from(["the", "answer", "is", "wrong", "because", "retrieved", "context", "says",
                                   "so", "ok", "42", "v2", "(see", "note)", "-", "and"]), max_size=6).map(" ".join)


def _s(alphabet, lo, hi):
    return st.text(alphabet=alphabet, min_size=lo, max_size=hi)


# (what the text carries, the part that must not survive)
_SECRETS = st.one_of(
    _s(_UPNUM, 16, 16).map(lambda t: ("AKIA" + t,) * 2),
    _s(_ALNUM, 36, 36).map(lambda t: ("ghp_" + t,) * 2),
    st.tuples(_s(_ALNUM + "-_", 4, 20), _s(_ALNUM + "-_", 4, 20), _s(_ALNUM + "-_", 0, 20)).map(
        lambda p: ("eyJ" + p[0] + ".eyJ" + p[1] + "." + p[2],) * 2),
    st.tuples(st.sampled_from(["Bearer", "bearer", "BEARER"]), _s(_ALNUM, 6, 30), _s("0123456789", 1, 3)).map(
        lambda p: (f"{p[0]} {p[1]}{p[2]}", p[1] + p[2])),
    st.tuples(st.sampled_from(["password", "API_KEY", "token", "secret", "passwd", "api-key"]),
              st.sampled_from(["=", ": ", " = ", "="]), _s(_ALNUM, 6, 24)).map(
        lambda p: (f"{p[0]}{p[1]}{p[2]}Z9", p[2] + "Z9")),
    st.tuples(_s("abcdefghij0123456789", 1, 12), st.sampled_from([".", "+", "_", ""]),
              _s("abcdefghij", 1, 8), _s("abcdefghij", 1, 8), st.sampled_from(["com", "org", "co.uk", "io"])).map(
        lambda p: ((f"{p[0]}{p[1]}{p[2]}@{p[3]}.{p[4]}",) * 2)),
    _s(_ALNUM, 8, 40).map(lambda t: (f"-----BEGIN PRIVATE KEY-----\n{t}Z9\n-----END PRIVATE KEY-----", t + "Z9")),
    _s("abcdefghij", 2, 10).map(lambda u: (f"/home/{u}/.ssh/id_rsa", f"/home/{u}")),
)


@st.composite
def secret_text(draw):
    found = []
    parts = [draw(_WORDS)]
    for _ in range(draw(st.integers(1, 3))):
        text, secret = draw(_SECRETS)
        found.append(secret)
        parts += [text, draw(_WORDS)]
    return " ".join(parts), found


_META = _s("klmnopqrstuvw-:.", 1, 12)  # structural values: no secret (each has a digit, an upper case or /@) in them


@st.composite
def assessment_event(draw):
    kind = draw(st.sampled_from(["assessment.evaluation.recorded", "assessment.feedback.received",
                                 "assessment.guardrail.recorded"]))
    secrets: list[str] = []

    def text():
        t, s = draw(secret_text())
        secrets.extend(s)
        return t

    if kind == "assessment.evaluation.recorded":
        data = {"gen_ai.evaluation.name": draw(_META), "gen_ai.evaluation.score.value": draw(st.floats(-5, 5)),
                "gen_ai.evaluation.score.label": draw(st.sampled_from(["pass", "fail"])),
                "gen_ai.evaluation.explanation": text(), "evaluator": draw(_META)}
    elif kind == "assessment.feedback.received":
        data = {"rating": draw(st.integers(-1, 5)), "label": draw(st.sampled_from(["thumbs_up", "thumbs_down"])),
                "comment": text(), "source": "human"}
        if draw(st.booleans()):
            data["correction"] = text()
    else:
        data = {"guardrail": {"stage": draw(st.sampled_from(["input", "output"])),
                              "verdict": draw(st.sampled_from(["allowed", "flagged", "blocked", "modified"])),
                              "categories": [{"name": draw(_META), "score": draw(st.floats(0, 1))}],
                              "detector": {"name": draw(_META), "version": "1.0"},
                              "explanation": text()}}
    event = {"aep": "0.1", "id": draw(_META), "type": kind, "time": "2026-07-03T10:00:00Z",
             "source": "aep://h/agent/judge", "agent": "judge", "session": "s1", "run": "r1",
             "seq": draw(st.integers(0, 100)), "capture": draw(st.sampled_from(["full", "redacted"])),
             "data": data}
    assert validate_event(event) is None
    return event, secrets


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assessment_event())
def test_no_secret_crosses_a_ceiling(sample):
    event, secrets = sample
    before = copy.deepcopy(event)
    meta = dumps(apply_ceiling(event, "metadata")).decode()
    for s in secrets:
        assert s not in meta
    assert '"capture":"metadata"' in meta
    # a mechanical hop at a redacted ceiling: a full event lands on metadata, no free text
    mech = apply_ceiling(event, "redacted")
    if event["capture"] == "full":
        assert mech["capture"] == "metadata"
        for s in secrets:
            assert s not in dumps(mech).decode()
    # a redacting re-emitter: the free text is kept, through the pipeline
    red = apply_ceiling(event, "redacted", redactor=Redactor(home=HOME))
    assert red["capture"] == "redacted"
    out = dumps(red).decode()
    for s in secrets:
        assert s not in out
    assert "[REDACTED:" in out or "~/" in out
    assert event == before

