"""The AEP export's struct path (``exporter._encode_fast``) writes the bytes of the dict path (``result_events`` and
``_encode``) for the same lines: every branch of the mapping (feedback, guardrails, cause maps, traceparents, scores
with labels and normalized values, annotators with promptHash, nulls, explanations), both real code paths."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aefgate.converters.aep import exporter as X
from aefgate.converters.aep.vocabulary import EXT_KEY
from aefgate.errors import Refusal

HEX = "0123456789abcdef"


def _ctx(tmp: Path, ceiling: str, cause_map: dict[str, str], judges: list | None = None) -> X._Export:
    run = {"runId": "run-1", "endedAt": "2026-01-01T00:00:00Z", "judges": judges or []}
    return X._Export(tmp, run, "ab" * 32, ceiling, "agent/1", "aefgate", cause_map)


def _dict_bytes(ctx: X._Export, lines: list[dict], targets: set[str]) -> tuple[bytes, dict, int]:
    ctx.seq = 0
    seen: dict = {}
    out = []
    batch: list[dict] = []
    for ev in X.result_events(ctx, lines, targets, seen, None):
        batch.append(ev)
        if len(batch) >= X._BATCH:
            out.append(X._encode(batch))
            batch = []
    if batch:
        out.append(X._encode(batch))
    return b"".join(out), seen, ctx.seq


def _fast_bytes(ctx: X._Export, lines: list[dict], targets: set[str]) -> tuple[bytes, dict, int]:
    ctx.seq = 0
    seen: dict = {}
    return b"".join(X._encode_fast(ctx, lines, targets, seen)), seen, ctx.seq


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_nonnull = st.one_of(st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), _text)
# a null (or the word in a string) sends a batch to the dict path: rare, so that most batches take the struct path
_scalar = st.integers(0, 19).flatmap(lambda i: st.none() if i == 0 else st.just("null") if i == 1 else _nonnull)
_json = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6)


@st.composite
def _line(draw, i: int = 0) -> dict:
    rid = f"r_{i:032x}"
    line: dict = {"schemaVersion": "1.0", "resultId": rid, "caseId": f"case-{draw(st.integers(0, 3))}",
                  "path": draw(st.sampled_from(["triage", "triage/policy", "a/b/c"])),
                  "evaluator": draw(st.sampled_from([{"id": "check:x"}, {"id": "judge:y", "version": "2"},
                                                     {"id": "m", "version": 3}])),
                  "state": draw(st.sampled_from(["passed", "failed", "warn", "scored", "error", "skipped", "odd"]))}
    if draw(st.booleans()):
        line["severity"] = draw(st.sampled_from(["none", "low", "medium", "high", "critical", "weird"]))
    if draw(st.booleans()):
        line["parentResultId"] = draw(st.sampled_from(["", "r_parent"]))
    for k in ("trial", "trials"):
        if draw(st.booleans()):
            line[k] = draw(st.integers(0, 3))
    for k in ("component", "aggregation", "verdictRule", "uncertainty", "lane", "durationMs", "turns", "usage",
              "startedAt", "endedAt"):
        if draw(st.integers(0, 3)) == 0:
            line[k] = draw(_json) if k not in ("startedAt", "endedAt") else draw(
                st.sampled_from(["2026-02-02T00:00:00Z", "2026-03-03T00:00:00.5Z"]))
    if draw(st.booleans()):
        ann = {"kind": draw(st.sampled_from(["HUMAN", "LLM", "CODE", "OTHER", "MODEL"]))}
        if draw(st.booleans()):
            ann["model"] = draw(st.sampled_from(["gpt-x", "calibrated-judge"]))
        if draw(st.booleans()):
            ann["promptHash"] = "sha256:" + "0" * 64
        if draw(st.booleans()):
            ann["id"] = draw(_text)
        line["annotator"] = ann
    if draw(st.booleans()):
        scores = []
        for _ in range(draw(st.integers(0, 3))):
            s = {"metric": draw(st.sampled_from(["m1", "m2"])), "value": draw(_scalar)}
            if draw(st.booleans()):
                s["normalized"] = draw(st.floats(0, 1))
            if draw(st.booleans()):
                s["label"] = draw(_text)
            scores.append(s)
        line["scores"] = scores
    if draw(st.booleans()):
        line["reason"] = draw(st.one_of(_text, st.integers()))
    if draw(st.integers(0, 2)) == 0:
        tl = {}
        if draw(st.booleans()):
            tl["traceId"] = "AB" * 16
        if draw(st.booleans()):
            tl["spanId"] = "cd" * 8
        line["traceLink"] = tl
    g = draw(st.integers(0, 4))
    if g == 1:
        line["attack"] = {"technique": "jailbreak", "success": draw(st.sampled_from([True, False, "maybe"])),
                          "taxonomy": [{"scheme": "owasp", "id": "LLM01"}]}
    elif g == 2:
        line["ext"] = {EXT_KEY: {"guardrail": {"stage": "output", "verdict": "flagged", "explanation": "x"}}}
    elif g == 3:
        line["ext"] = {"other": draw(_json)}
    return line


@st.composite
def _lines(draw) -> list[dict]:
    return [draw(_line(i)) for i in range(draw(st.integers(1, 6)))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.function_scoped_fixture])
@given(lines=_lines(), ceiling=st.sampled_from(["none", "metadata", "full"]), cause=st.booleans(),
       target=st.booleans())
def test_struct_path_writes_the_dict_paths_bytes(tmp_path, lines, ceiling, cause, target):
    cmap = {lines[0]["resultId"]: "ev-1", "case-2": "ev-2"} if cause else {}
    targets = {lines[-1]["resultId"]} if target else set()
    judges = [{"model": "calibrated-judge", "calibration": {"method": "x"}}]
    ref_ctx = _ctx(tmp_path, ceiling, cmap, judges)
    fast_ctx = _ctx(tmp_path, ceiling, cmap, judges)
    assert _fast_bytes(fast_ctx, lines, targets) == _dict_bytes(ref_ctx, lines, targets)


def test_struct_path_batches_with_null_and_non_finite_numbers(tmp_path, monkeypatch):
    """A batch holding ``null`` is made again by the dict path (the other batches keep the struct path, the
    numbering goes on); a non-finite number is refused as ``jsonio.dump_line`` refuses it."""
    monkeypatch.setattr(X, "_BATCH", 2)

    def line(i, value):
        return {"resultId": f"r_{i}", "caseId": "c", "path": "p", "evaluator": {"id": "e"}, "state": "scored",
                "scores": [{"metric": "m", "value": value}, {"metric": "n", "value": 1}]}

    lines = [line(0, 1), line(1, None), line(2, "null"), line(3, 2.5), line(4, 3)]
    targets = {"r_1", "r_4"}
    got = _fast_bytes(_ctx(tmp_path, "metadata", {}), lines, targets)
    assert got == _dict_bytes(_ctx(tmp_path, "metadata", {}), lines, targets)
    assert got[1] == {"r_1": ("c", "p", None, "aef-abababababababab-r_1-e0"),
                      "r_4": ("c", "p", None, "aef-abababababababab-r_4-e0")}
    assert got[2] == 10
    bad = [line(0, 1), line(1, float("nan"))]
    for make in (_fast_bytes, _dict_bytes):
        with pytest.raises(Refusal):
            make(_ctx(tmp_path, "metadata", {}), bad, set())


def test_the_mapper_takes_the_struct_path_only_for_plain_aep(tmp_path, monkeypatch):
    """``_AepMapper.map`` uses the struct path for ``_encode`` without redaction, and the dict path otherwise."""
    calls = []
    real = X._encode_fast
    monkeypatch.setattr(X, "_encode_fast", lambda *a: calls.append(1) or real(*a))
    line = {"resultId": "r_1", "caseId": "c", "path": "p", "evaluator": {"id": "e"}, "state": "passed"}
    for encode, redact, used in ((X._encode, None, True), (lambda b: X._encode(b), None, False),
                                 (X._encode, lambda ev, _lvl: ev, False)):
        calls.clear()
        m = X._AepMapper(None, "ab" * 32, encode, None)
        m.ctx, m.targets, m.redact = _ctx(tmp_path, "metadata", {}), set(), redact
        m.pid = -1
        data, _seen, seq = m.map([(1, line)], 0)
        assert bool(calls) is used
        assert data == X._encode([*X.result_events(_ctx(tmp_path, "metadata", {}), [line], set(), {}, None)])
        assert seq == 1
    assert msgspec.json.decode(data.strip())["seq"] == 0
