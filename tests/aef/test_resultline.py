"""aefgate.aef.resultline: the typed fast path of the reader schema of a result line (issue 20).

Three judges of every instance: ``typed`` (the msgspec Structs and the rules in Python), the generic compiled
validator ``validator("result", "reader")``, and jsonschema with [ENC-15]'s reading of ``$`` (the ENC15 oracle of
test_schema.py). The claims:

* soundness: whenever ``typed`` accepts, the generic validator and the oracle accept;
* exactness: ``reader_valid(doc) == (validator("result", "reader")(doc) is None)``, always;
* usefulness: ``typed`` accepts every line of the spec's runs and of a run made like bench/make_runs.py's, and the
  valid boundary cases below (except where it is stricter on purpose: integral floats as integers).

The instances: every results.ndjson line of the spec's corpus (conformance/ and interop/examples/), lines made like
bench/make_runs.py's, a line carrying every member, hypothesis mutations of all of them (test_schema.py's
``_mutate``), instances generated from the reader schema (test_schema.py's ``_gen``), strings for every
pattern-checked member, and explicit cases at and beyond each bound.
"""

from __future__ import annotations

import copy
import importlib.util
import random
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aefgate.aef import jsonio
from aefgate.aef.resultline import ResultLine, reader_valid, typed
from aefgate.aef.schema import validator
from tests._shared import AEF, SEALED_EXAMPLE_RUNS
from tests.aef.test_schema import ENC15, SCHEMAS, SETTINGS, _gen, _mutate

REPO = Path(__file__).resolve().parents[2]
GENERIC = validator("result", "reader")
ORACLE = ENC15[("result", "reader")]
MAX_SAFE = 9007199254740991
SHA = "sha256:" + "ab" * 32
RID1 = "r_" + "0123456789abcdef" * 2
RID2 = "r_" + "fedcba9876543210" * 2


def judge(doc: Any) -> str:
    """Checks the three judges against each other; returns ``fast`` (typed accepts), ``valid`` (only the generic
    path does) or ``invalid``."""
    generic = GENERIC(doc)
    t = typed(doc)
    if t is not None:
        assert isinstance(t, ResultLine)
        assert generic is None, ("typed accepts what the schema refuses", generic, doc)
    assert reader_valid(doc) == (generic is None), (generic, doc)
    assert ORACLE.is_valid(doc) == (generic is None), (generic, doc)
    if t is not None:
        return "fast"
    return "valid" if generic is None else "invalid"


# ---------------------------------------------------------------------------------------------
# the instances


def _corpus_lines() -> list[tuple[str, dict]]:
    out = []
    for sub in ("conformance", "interop/examples"):
        for path in sorted((AEF / sub).rglob("results.ndjson")):
            for i, raw in enumerate(path.read_bytes().split(b"\n"), 1):
                if raw.strip():
                    try:
                        out.append((f"{path.relative_to(AEF)}:{i}", jsonio.loads(raw)))
                    except jsonio.JsonProblem:
                        pass  # a refusal vector of the encoding rules
    return out


CORPUS = _corpus_lines()


def _load_make_runs():
    spec = importlib.util.spec_from_file_location("_bench_make_runs", REPO / "bench" / "make_runs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_bench_make_runs", mod)
    spec.loader.exec_module(mod)
    return mod


MAKE_RUNS = _load_make_runs()
RNG = random.Random(5)
BENCH_LINES = [line for i in range(0, 400_000, 9_973) for line in MAKE_RUNS.case_lines(i, RNG)]

RICH = {  # every member of the reader schema, valid, each once
    "schemaVersion": "1.0",
    "resultId": RID1,
    "parentResultId": RID2,
    "caseId": "case-1",
    "path": "triage/judge",
    "trials": {"n": 3, "passed": 2, "aggregation": "PassAtK", "agree": False, "k": 2},
    "evaluator": {"id": "judge:x", "version": "3"},
    "state": "failed",
    "reason": "below the threshold",
    "scores": [{"metric": "m", "value": 0.4, "normalized": 0.4, "label": "I"}, {"metric": "n", "value": 7}],
    "verdictRule": {"expr": "m >= 0.5", "threshold": 0.5, "source": "suite"},
    "annotator": {"kind": "LLM", "model": "gpt-5.1", "promptHash": SHA, "rubricDigest": SHA,
                  "panel": {"agree": 2, "of": 3}},
    "reasoning": {"blob": SHA, "bytes": 120},
    "uncertainty": {"stderr": 0.1, "ci": {"low": 0.2, "high": 0.6, "level": 0.95, "method": "bootstrap"}},
    "usage": [{"role": "judge", "model": "gpt-5.1", "gen_ai.usage.input_tokens": 10,
               "gen_ai.usage.output_tokens": 5, "costUsd": 0.01, "costSource": "price table",
               "gen_ai.usage.cache_read.input_tokens": 2, "gen_ai.usage.cache_write.input_tokens": 1,
               "gen_ai.usage.reasoning.output_tokens": 3}],
    "traceLink": {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"},
    "aggregation": {"strategy": "WeightedSum", "threshold": 0.8, "score": 0.4, "rulePath": "threshold",
                    "measured": 2, "total": 3, "minimumMeasuredShare": 0.5,
                    "unmeasured": {"not_measured": 0, "not_applicable": 1, "skipped": 0, "error": 0, "pending": 0},
                    "decisive": [RID1, RID2]},
    "component": {"weight": 0.5, "required": True},
    "evidence": ["E-1", "E-a.b_c-D"],
    "ext": {"org.example": {"k": [1, 2.5, None, True]}},
    "lane": "quality",
    "severity": "high",
    "durationMs": 12.5,
    "turns": 2,
    "attack": {"technique": "prompt injection", "success": None,
               "taxonomy": [{"scheme": "owasp-llm", "id": "LLM01"}, {"scheme": "mitre-atlas", "id": "AML.T0051"}]},
    "startedAt": "2026-10-02T14:00:00.123456789Z",
    "endedAt": "2026-10-02T14:00:01Z",
}

SEEDS = [doc for _, doc in CORPUS] + BENCH_LINES + [RICH]


def test_instances_are_there():
    assert len(CORPUS) > 100
    assert len(BENCH_LINES) > 100
    assert judge(RICH) == "fast"


# ---------------------------------------------------------------------------------------------
# usefulness: the typed path takes the lines real producers write


def test_typed_accepts_every_corpus_line():
    for where, doc in CORPUS:
        assert judge(doc) == "fast", where


def test_typed_accepts_every_line_of_the_sealed_example_runs():
    n = 0
    for run in SEALED_EXAMPLE_RUNS:
        for raw in (run / "results.ndjson").read_bytes().splitlines():
            doc = jsonio.loads(raw)
            assert typed(doc) is not None, (run, doc)
            n += 1
    assert n > 50


def test_typed_accepts_a_generated_run(tmp_path):
    run = MAKE_RUNS.make_run(tmp_path / "run", 400)
    raws = (run / "results.ndjson").read_bytes().splitlines()
    assert len(raws) == 400
    for raw in raws:
        doc = jsonio.loads(raw)
        assert typed(doc) is not None, doc
        assert reader_valid(doc)
    for doc in BENCH_LINES:
        assert judge(doc) == "fast", doc


# ---------------------------------------------------------------------------------------------
# hypothesis: mutations, generated instances, strings


@settings(max_examples=500, **SETTINGS)
@given(data=st.data())
def test_mutations_agree(data):
    doc = data.draw(st.sampled_from(SEEDS), label="seed")
    event(judge(_mutate(data, doc)))


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_generated_instances_agree(data):
    inst = _gen(data, "reader", "result.schema.json", SCHEMAS["reader"]["result.schema.json"])
    if data.draw(st.booleans(), label="mutate"):
        inst = _mutate(data, inst)
    event(judge(inst))


# Every string the typed path checks a pattern or a length of (in msgspec or in Python), with a valid value.
STRING_MEMBERS = {
    ("schemaVersion",): "1.0",
    ("resultId",): RID1,
    ("parentResultId",): RID2,
    ("caseId",): "case-1",
    ("path",): "triage/judge",
    ("aggregation", "decisive", 1): RID2,
    ("evidence", 0): "E-1",
    ("reasoning", "blob"): SHA,
    ("annotator", "promptHash"): SHA,
    ("annotator", "rubricDigest"): SHA,
    ("traceLink", "traceId"): "0af7651916cd43dd8448eb211c80319c",
    ("traceLink", "spanId"): "b7ad6b7169203331",
    ("lane",): "quality",
    ("startedAt",): "2026-10-02T14:00:00.123456789Z",
    ("endedAt",): "2026-10-02T14:00:01Z",
    ("evaluator", "id"): "judge:x",
    ("evaluator", "version"): "3",
    ("reason",): "below the threshold",
    ("scores", 0, "metric"): "m",
    ("scores", 0, "label"): "I",
    ("attack", "technique"): "prompt injection",
    ("attack", "taxonomy", 0, "id"): "LLM01",
    ("usage", 0, "model"): "gpt-5.1",
    ("usage", 0, "costSource"): "price table",
    ("uncertainty", "ci", "method"): "bootstrap",
    ("verdictRule", "expr"): "m >= 0.5",
    ("verdictRule", "source"): "suite",
    ("annotator", "model"): "gpt-5.1",
}
ALPHABET = sorted(set("0123456789abcdefABCDEFrsz_-.:/ TZE\n\r\t\x00\x1f\x7f\x85\x9f\xa0\u2028é\U0001F600"))


def _set(doc: dict, path: tuple, value: Any) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for tok in path[:-1]:
        node = node[tok]
    node[path[-1]] = value
    return doc


@st.composite
def _variant(draw, good: str) -> str:
    kind = draw(st.sampled_from(["text", "edit", "newline", "repeat"]))
    if kind == "text":
        return draw(st.text(st.sampled_from(ALPHABET), max_size=40))
    if kind == "newline":
        return good + "\n"
    if kind == "repeat":  # lengths around the bounds
        return (good * 1100)[: draw(st.sampled_from([0, 1, 15, 16, 17, 31, 32, 33, 34, 35, 63, 64, 65, 71, 72, 127,
                                                     128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025]))]
    i = draw(st.integers(0, len(good)))
    c = draw(st.sampled_from(ALPHABET))
    how = draw(st.sampled_from(["insert", "replace", "delete", "upper"]))
    if how == "insert":
        return good[:i] + c + good[i:]
    if how == "replace":
        return good[:i] + c + good[i + 1:]
    if how == "delete":
        return good[:i] + good[i + 1:]
    return good.upper()


@settings(max_examples=400, **SETTINGS)
@given(data=st.data())
def test_strings_decide_alike(data):
    """For a string member of an otherwise valid line, the typed path is exact, not only sound: it accepts the line
    exactly when the schema does (no string rule is left to the fallback)."""
    path = data.draw(st.sampled_from(sorted(STRING_MEMBERS, key=str)), label="member")
    s = data.draw(_variant(STRING_MEMBERS[path]), label="string")
    doc = _set(RICH, path, s)
    verdict = judge(doc)
    assert verdict != "valid", (path, s)
    event(verdict)


# ---------------------------------------------------------------------------------------------
# explicit cases: each constraint at and beyond its bound

DELETE = object()
TRIALS = {"n": 3, "passed": 2, "aggregation": "PassAtK", "agree": False}


def _case(changes: dict) -> dict:
    doc = copy.deepcopy(RICH)
    for path, value in changes.items():
        path = path if isinstance(path, tuple) else (path,)
        node = doc
        for tok in path[:-1]:
            node = node[tok]
        if value is DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = copy.deepcopy(value)
    return doc


F, V, X = "fast", "valid", "invalid"  # typed accepts; only the generic path accepts; refused
CASES = [
    # schemaVersion, ids, text
    ({"schemaVersion": "1.7"}, F), ({"schemaVersion": "1.10"}, F), ({"schemaVersion": "1.00"}, X),
    ({"schemaVersion": "2.0"}, X), ({"schemaVersion": "1.0\n"}, X), ({"schemaVersion": 1.0}, X),
    ({"resultId": RID1 + "\n"}, X), ({"resultId": RID1.upper()}, X), ({"resultId": RID1[:-1]}, X),
    ({"resultId": RID1 + "0"}, X), ({"resultId": None}, X), ({"resultId": DELETE}, X),
    ({"parentResultId": None}, F), ({"parentResultId": DELETE}, F), ({"parentResultId": ""}, X),
    ({"parentResultId": RID2 + "\n"}, X), ({"parentResultId": 5}, X),
    ({"caseId": "x" * 256}, F), ({"caseId": "x" * 257}, X), ({"caseId": ""}, X), ({"caseId": "a\n"}, X),
    ({"caseId": "a\x7f"}, X), ({"caseId": "a\x85"}, X), ({"caseId": "a\x9f"}, X), ({"caseId": "a\xa0b"}, F),
    ({"caseId": "a\u2028b"}, F), ({"caseId": "a b"}, F), ({"caseId": "\U0001F600" * 256}, F),
    ({"caseId": "\U0001F600" * 257}, X), ({"caseId": "\u200b"}, F), ({"caseId": None}, X),
    ({"path": "p" * 1024}, F), ({"path": "p" * 1025}, X), ({"path": "a\tb"}, X), ({"path": DELETE}, X),
    # trial, trials
    ({"trials": DELETE, "trial": 0}, F), ({"trials": DELETE, "trial": 999}, F), ({"trials": DELETE, "trial": 1000}, X),
    ({"trials": DELETE, "trial": -1}, X), ({"trials": DELETE, "trial": 2.0}, V), ({"trials": DELETE, "trial": 2.5}, X),
    ({"trials": DELETE, "trial": True}, X), ({"trials": DELETE, "trial": "1"}, X),
    ({"trials": DELETE, "trial": None}, X), ({"trial": 0}, X), ({"trial": 2.0}, X),
    ({("trials", "n"): 1000, ("trials", "passed"): 1000}, F), ({("trials", "n"): 1001}, X), ({("trials", "n"): 0}, X),
    ({("trials", "passed"): 1001}, X), ({("trials", "passed"): -1}, X), ({("trials", "passed"): 2.0}, V),
    ({("trials", "k"): MAX_SAFE}, F), ({("trials", "k"): MAX_SAFE + 1}, X), ({("trials", "k"): 2**64}, X),
    ({("trials", "k"): 0}, X), ({("trials", "k"): DELETE}, F), ({("trials", "agree"): 1}, X),
    ({("trials", "agree"): DELETE}, X), ({("trials", "aggregation"): 1}, X), ({"trials": TRIALS}, F),
    ({"trials": None}, X),
    # state, reason and scores (RES-2)
    ({"state": "bogus"}, X), ({"state": None}, X), ({"state": "scored"}, F), ({"state": "passed", "reason": DELETE}, F),
    ({"state": "skipped", "scores": DELETE}, F), ({"state": "skipped", "scores": DELETE, "reason": DELETE}, X),
    ({"state": "skipped"}, X), ({"state": "pending", "scores": []}, X), ({"state": "error", "scores": None}, X),
    ({"state": "not_measured", "scores": DELETE}, F), ({"state": "not_applicable", "scores": DELETE}, F),
    ({"state": "error", "scores": DELETE, "reason": ""}, X),
    ({"reason": "x" * 4096}, F), ({"reason": "x" * 4097}, X), ({"reason": "é" * 4096}, F),
    ({"reason": "\U0001F600" * 4096}, F), ({"reason": "\U0001F600" * 4097}, X), ({"reason": ""}, X),
    ({"reason": "line\nbreak\n"}, F),
    # scores
    ({"scores": []}, F), ({"scores": [{"metric": "m", "value": 1}] * 256}, F),
    ({"scores": [{"metric": "m", "value": 1}] * 257}, X), ({("scores", 0, "value"): True}, X),
    ({("scores", 0, "value"): 10**30}, F), ({("scores", 0, "value"): -(10**30)}, F),
    ({("scores", 0, "value"): -1e308}, F), ({("scores", 0, "value"): "1"}, X), ({("scores", 0, "value"): None}, X),
    ({("scores", 0, "value"): DELETE}, X), ({("scores", 0, "normalized"): 1}, F),
    ({("scores", 0, "normalized"): 0}, F), ({("scores", 0, "normalized"): -0.0}, F),
    ({("scores", 0, "normalized"): 1.0000001}, X), ({("scores", 0, "normalized"): -1e-300}, X),
    ({("scores", 0, "normalized"): None}, F), ({("scores", 0, "normalized"): 2**64}, X),
    ({("scores", 0, "normalized"): True}, X), ({("scores", 0, "label"): "x" * 64}, F),
    ({("scores", 0, "label"): "x" * 65}, X), ({("scores", 0, "label"): ""}, X), ({("scores", 0, "metric"): ""}, X),
    ({("scores", 0, "metric"): "m" * 257}, X), ({"scores": [5]}, X), ({"scores": {}}, X),
    # verdictRule
    ({("verdictRule", "threshold"): None}, F), ({("verdictRule", "threshold"): 10**20}, F),
    ({("verdictRule", "threshold"): "x"}, X), ({("verdictRule", "expr"): ""}, X),
    ({("verdictRule", "expr"): DELETE}, X), ({("verdictRule", "source"): "s" * 512}, F),
    ({("verdictRule", "source"): "s" * 513}, X),
    # annotator
    ({("annotator", "kind"): DELETE}, X), ({("annotator", "kind"): "ROBOT"}, F), ({("annotator", "kind"): None}, X),
    ({("annotator", "promptHash"): SHA + "\n"}, X), ({("annotator", "promptHash"): SHA.upper()}, X),
    ({("annotator", "rubricDigest"): SHA[:-1]}, X), ({("annotator", "model"): "m" * 256}, F),
    ({("annotator", "model"): "m" * 257}, X), ({("annotator", "model"): ""}, F),
    ({("annotator", "panel", "agree"): MAX_SAFE}, F), ({("annotator", "panel", "agree"): MAX_SAFE + 1}, X),
    ({("annotator", "panel", "of"): 0}, X), ({("annotator", "panel", "of"): 3.0}, V),
    ({("annotator", "panel", "of"): DELETE}, X), ({("annotator", "panel", "agree"): 5}, F),  # agree > of: not schema
    # reasoning
    ({("reasoning", "blob"): SHA + "\n"}, X), ({("reasoning", "blob"): "sha256:" + "0" * 63}, X),
    ({("reasoning", "bytes"): 0}, F), ({("reasoning", "bytes"): -1}, X), ({("reasoning", "bytes"): 120.0}, V),
    ({("reasoning", "bytes"): MAX_SAFE + 1}, X), ({("reasoning", "blob"): DELETE}, X),
    # uncertainty
    ({"uncertainty": None}, F), ({"uncertainty": {}}, F), ({("uncertainty", "stderr"): -0.1}, X),
    ({("uncertainty", "stderr"): 0}, F), ({("uncertainty", "ci", "level"): 0}, X),
    ({("uncertainty", "ci", "level"): 1}, X), ({("uncertainty", "ci", "level"): 1e-300}, F),
    ({("uncertainty", "ci", "level"): 0.9999999999999999}, F), ({("uncertainty", "ci", "level"): -0.0}, X),
    ({("uncertainty", "ci", "level"): True}, X), ({("uncertainty", "ci", "low"): DELETE}, X),
    ({("uncertainty", "ci", "method"): "m" * 64}, F), ({("uncertainty", "ci", "method"): "m" * 65}, X),
    ({("uncertainty", "ci"): None}, X), ({"uncertainty": []}, X),
    # usage
    ({"usage": []}, X), ({"usage": [{"role": "agent"}] * 8}, F), ({"usage": [{"role": "agent"}] * 9}, X),
    ({("usage", 0, "role"): DELETE}, X), ({("usage", 0, "role"): 7}, X),
    ({("usage", 0, "gen_ai.usage.input_tokens"): MAX_SAFE}, F),
    ({("usage", 0, "gen_ai.usage.input_tokens"): MAX_SAFE + 1}, X),
    ({("usage", 0, "gen_ai.usage.output_tokens"): -1}, X),
    ({("usage", 0, "gen_ai.usage.cache_read.input_tokens"): 2**64}, X),
    ({("usage", 0, "gen_ai.usage.cache_write.input_tokens"): 1.5}, X),
    ({("usage", 0, "gen_ai.usage.reasoning.output_tokens"): 3.0}, V),
    ({("usage", 0, "input_tokens"): -5}, F),  # not the member's name: an unknown member
    ({("usage", 0, "costUsd"): -1}, X), ({("usage", 0, "costUsd"): 0}, F), ({("usage", 0, "costUsd"): 10**40}, F),
    ({("usage", 0, "costSource"): "c" * 129}, X), ({("usage", 0, "model"): ""}, X),
    # traceLink
    ({("traceLink", "traceId"): "0" * 31}, X), ({("traceLink", "traceId"): "0" * 32 + "\n"}, X),
    ({("traceLink", "spanId"): DELETE}, F), ({("traceLink", "spanId"): "A" * 16}, X),
    ({("traceLink", "traceId"): DELETE}, X),
    # aggregation, component
    ({("aggregation", "decisive"): [RID1] * 1024}, F), ({("aggregation", "decisive"): [RID1] * 1025}, X),
    ({("aggregation", "decisive"): []}, F), ({("aggregation", "decisive"): [RID1, "r_x"]}, X),
    ({("aggregation", "decisive"): [None]}, X), ({("aggregation", "minimumMeasuredShare"): 1}, F),
    ({("aggregation", "minimumMeasuredShare"): 1.5}, X), ({("aggregation", "measured"): MAX_SAFE + 1}, X),
    ({("aggregation", "total"): 3.0}, V), ({("aggregation", "threshold"): None}, F),
    ({("aggregation", "score"): True}, X), ({("aggregation", "rulePath"): DELETE}, X),
    ({("aggregation", "unmeasured", "pending"): -1}, X), ({("aggregation", "unmeasured"): {}}, F),
    ({("aggregation", "measured"): 9}, F),  # measured > total: a rule of the verifier, not of the schema
    ({("component", "weight"): -1}, X), ({("component", "weight"): 0}, F), ({("component", "required"): "yes"}, X),
    # evidence, ext, lane, severity, numbers
    ({"evidence": ["E-" + "a" * 64]}, F), ({"evidence": ["E-" + "a" * 65]}, X), ({"evidence": ["E-a\n"]}, X),
    ({"evidence": ["E-"]}, X), ({"evidence": ["E-1"] * 256}, F), ({"evidence": ["E-1"] * 257}, X),
    ({"evidence": []}, F), ({"evidence": [1]}, X),
    ({"ext": {}}, F), ({"ext": []}, X), ({"ext": None}, X), ({"ext": {"a": {"b": [{"c": None}]}}}, F),
    ({"lane": "a" * 128}, F), ({"lane": "a" * 129}, X), ({"lane": "a b"}, X), ({"lane": "a\n"}, X), ({"lane": ""}, X),
    ({"lane": "A-z_0.9:x"}, F), ({"severity": "catastrophic"}, F), ({"severity": 1}, X),
    ({"durationMs": 0}, F), ({"durationMs": -0.0}, F), ({"durationMs": -1}, X), ({"durationMs": 1e308}, F),
    ({"durationMs": 2**70}, F), ({"durationMs": -(2**70)}, X),
    ({"turns": 1}, F), ({"turns": 0}, X), ({"turns": MAX_SAFE}, F), ({"turns": MAX_SAFE + 1}, X),
    ({"turns": 2**63}, X), ({"turns": 2**64}, X), ({"turns": 10**40}, X), ({"turns": 2.0}, V),
    ({"turns": 9007199254740992.0}, X), ({"turns": -(2**64)}, X),
    # attack
    ({("attack", "technique"): ""}, X), ({("attack", "technique"): DELETE}, X),
    ({("attack", "taxonomy", 1): {"scheme": "owasp-llm", "id": "LLM01"}}, X),  # a duplicate item
    ({("attack", "taxonomy", 1): {"scheme": "owasp-llm", "id": "LLM01", "note": 1}}, V),  # not a duplicate
    ({("attack", "taxonomy", 1): {"scheme": "owasp-llm", "id": "LLM02"}}, F),
    ({("attack", "taxonomy"): [{"scheme": "s", "id": str(i)} for i in range(32)]}, F),
    ({("attack", "taxonomy"): [{"scheme": "s", "id": str(i)} for i in range(33)]}, X),
    ({("attack", "taxonomy", 0, "id"): "x" * 65}, X), ({("attack", "taxonomy", 0, "scheme"): DELETE}, X),
    ({("attack", "success"): True}, F), ({("attack", "success"): 1}, X),
    # times (the schema's pattern; whether the day exists is the verifier's _time_exists)
    ({"startedAt": "2026-02-31T00:00:00Z"}, F), ({"startedAt": "0000-01-01T00:00:00Z"}, X),
    ({"startedAt": "0001-01-01T00:00:00Z"}, F), ({"startedAt": "2026-10-02T14:00:00.123456789Z"}, F),
    ({"startedAt": "2026-10-02T14:00:00.1234567890Z"}, X), ({"startedAt": "2026-10-02T14:00:00z"}, X),
    ({"startedAt": "2026-10-02T24:00:00Z"}, X), ({"startedAt": "2026-10-02T14:00:00Z\n"}, X),
    ({"endedAt": "2026-10-02T14:00:00.123456789Z\n", "startedAt": "2026-10-02T14:00:00.123456789Z\n"}, X),
    ({"endedAt": "2026-10-02T14:00:00.123456789Z"}, F), ({"endedAt": "2026-10-02T14:00:00+00:00"}, X),
    ({"startedAt": DELETE, "endedAt": "bad"}, X), ({"startedAt": "bad", "endedAt": "bad"}, X),
    # the evaluator, unknown members
    ({("evaluator", "id"): "e" * 256}, F), ({("evaluator", "id"): "e" * 257}, X), ({("evaluator", "id"): ""}, X),
    ({("evaluator", "version"): "v" * 64}, F), ({("evaluator", "version"): "v" * 65}, X),
    ({"evaluator": DELETE}, X), ({"evaluator": None}, X), ({"evaluator": {"id": "x", "other": [1]}}, F),
    ({"futureMember": {"x": 1}}, F), ({"gen_ai.usage.input_tokens": -1}, F),
]


@pytest.mark.parametrize("changes, expected", CASES, ids=[str(i) for i in range(len(CASES))])
def test_bounds(changes, expected):
    assert judge(_case(changes)) == expected, changes


def test_bench_line_bounds():
    """The same on a line as the benchmark writes it (a composite root with its times)."""
    head = BENCH_LINES[0]
    assert "aggregation" in head and "startedAt" in head
    assert judge(head) == "fast"
    assert judge({**head, "turns": 3.0}) == "valid"
    assert judge({**head, "endedAt": head["startedAt"] + "\n"}) == "invalid"
    assert judge({**head, "parentResultId": head["resultId"] + "\n"}) == "invalid"
    assert judge({**head, "schemaVersion": "1.0\n"}) == "invalid"


@pytest.mark.parametrize("doc", [None, [], "x", 1, {}, {"schemaVersion": "1.0"}, [RICH]])
def test_not_a_line(doc):
    assert typed(doc) is None
    assert reader_valid(doc) is False
    assert GENERIC(doc) is not None


def test_typed_gives_the_struct():
    line = typed(RICH)
    assert line.resultId == RID1 and line.parentResultId == RID2
    assert line.usage[0].input_tokens == 10 and line.usage[0].reasoning_output_tokens == 3
    assert line.attack.taxonomy[1].id == "AML.T0051" and line.attack.success is None
    assert line.ext == RICH["ext"]
    root = typed(BENCH_LINES[0])
    assert root.parentResultId is None and root.trial is msgspec.UNSET
    assert msgspec.to_builtins(typed(BENCH_LINES[1])) == BENCH_LINES[1]
