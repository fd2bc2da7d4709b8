"""The CloudEvents export's struct path (``converters.cloudevents.fast``, issue 31) writes the bytes of the dict path
(``result_events``, ``_with_aigp``, ``ce_forward``, ``_encode``) for the same lines, or refuses as it refuses: every
branch of the AEP mapping, the AIGP extension attributes, and the values ``ce_forward`` checks (ids, times, runs,
sequence numbers, the export's constant members), both real code paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aefgate.converters.aep import exporter as X
from aefgate.converters.cloudevents import exporter as CE
from aefgate.converters.cloudevents import fast as F
from aefgate.errors import Refusal
from aefgate.formats.cloudevents.ndjson import line_value
from tests.converters.test_aep_fast_encoding import _ctx, _lines

WHERE = "runs/r"


def _dict_out(ctx: X._Export, lines: list[dict], targets: set[str], seq: int = 0):
    """The dict path, as ``to_cloudevents``'s encode does it over ``result_events`` (bytes, seen, seq), or the
    refusal."""
    ctx.seq = seq
    seen: dict = {}
    try:
        evs = list(X.result_events(ctx, lines, targets, seen, None))
        blob = X._encode([line_value(X._with_aigp(ev), WHERE, "structured") for ev in evs]) if evs else b""
    except Refusal as e:
        return ("refused", e.rule, e.message, e.where)
    return blob, seen, ctx.seq


def _fast_out(ctx: X._Export, lines: list[dict], targets: set[str], seq: int = 0):
    ctx.seq = seq
    seen: dict = {}
    try:
        blob = b"".join(F.encoder(WHERE)(ctx, lines, targets, seen))
    except Refusal as e:
        return ("refused", e.rule, e.message, e.where)
    return blob, seen, ctx.seq


def _both(tmp: Path, lines, targets=frozenset(), ceiling="metadata", cmap=None, judges=None, seq=0, **ctx_attrs):
    out = []
    for make in (_fast_out, _dict_out):
        ctx = _ctx(tmp, ceiling, cmap or {}, judges)
        for k, v in ctx_attrs.items():
            setattr(ctx, k, v)
        out.append(make(ctx, lines, set(targets), seq))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.function_scoped_fixture])
@given(lines=_lines(), ceiling=st.sampled_from(["none", "metadata", "full"]), cause=st.booleans(),
       target=st.booleans())
def test_struct_path_writes_the_dict_paths_bytes(tmp_path, lines, ceiling, cause, target):
    cmap = {lines[0]["resultId"]: "ev-1", "case-2": "ev-2"} if cause else {}
    targets = {lines[-1]["resultId"]} if target else set()
    judges = [{"model": "calibrated-judge", "calibration": {"method": "x"}}]
    fast, ref = _both(tmp_path, lines, targets, ceiling, cmap, judges)
    assert fast == ref


def _line(i, **kw) -> dict:
    line = {"resultId": f"r_{i}", "caseId": "c", "path": "p", "evaluator": {"id": "e"}, "state": "scored",
            "endedAt": "2026-01-01T00:00:00Z", "scores": [{"metric": "m", "value": 1}, {"metric": "n", "value": 2}]}
    line.update(kw)
    return line


@pytest.mark.parametrize("lines, refused", [
    ([_line(0), _line(1, resultId="r_é")], False),  # a legal non-ASCII id: the full check accepts it
    ([_line(0), _line(1, resultId="r_\x7f")], True),  # a control character: refused
    ([_line(0), _line(1, endedAt="2026-02-30T00:00:00Z")], True),  # not a day
    ([_line(0), _line(1, endedAt=None, startedAt=None)], False),  # no time of its own: the run's
    ([_line(0), _line(1, caseId="cé")], False),
    ([_line(0), _line(1, caseId="c\n")], True),
    ([_line(0, annotator={"kind": "LLM", "model": "m"}), _line(1, annotator={"kind": "CODE"}),
      _line(2, aggregation={"method": "WeightedSum"}), _line(3, annotator={"kind": "HUMAN"})], False),
    ([_line(0, scores=[{"metric": "m", "value": None}]), _line(1)], False),  # null: the dict path for the batch
    ([_line(0, scores=[{"metric": "m", "value": float("inf")}])], True),
    ([_line(0, traceLink={"traceId": "ab" * 16, "spanId": "cd" * 8}), _line(1, attack={"technique": "t"})], False),
])
def test_checked_values_and_fallbacks(tmp_path, lines, refused):
    fast, ref = _both(tmp_path, lines)
    assert fast == ref
    assert (fast[0] == "refused") is refused


def test_constant_members_and_sequence_numbers(tmp_path):
    """The export's constants (agent, source, session) that the fast checks do not clear, and a sequence number
    over CloudEvents' Integer range (refused, CE-2) or reaching it in a later batch."""
    lines = [_line(i) for i in range(3)]
    for attrs in ({"agent": "agent-é"}, {"agent": "a\tb"}, {"run_id": "ru\x01n"}, {"source": "aep://h/é"}):
        fast, ref = _both(tmp_path, lines, **attrs)
        assert fast == ref
    fast, ref = _both(tmp_path, lines, seq=2**31 - 3)
    assert fast == ref and fast[0] == "refused" and fast[1] == "CE-2"
    fast, ref = _both(tmp_path, lines, seq=2**31 - 7)
    assert fast == ref and fast[0] != "refused"


def test_batches_and_numbering(tmp_path, monkeypatch):
    """Batch by batch: a batch that falls back does not disturb the numbering or the targets of the others."""
    monkeypatch.setattr(X, "_BATCH", 2)
    lines = [_line(0), _line(1, resultId="r_é"), _line(2, scores=[{"metric": "m", "value": None}]), _line(3),
             _line(4, caseId="c2")]
    fast, ref = _both(tmp_path, lines, targets={"r_é", "r_4"})
    assert fast == ref
    assert fast[2] == 9 and set(fast[1]) == {"r_é", "r_4"}


def test_the_export_takes_the_struct_path_for_structured_mode(tmp_path, monkeypatch):
    """``to_cloudevents`` gives its encoder the struct path (``encode.fast``) in structured mode only, and
    ``_AepMapper.map`` uses it without redaction."""
    made = []
    real = F.encoder
    monkeypatch.setattr(CE, "encoder", lambda where: made.append(where) or real(where))
    seen_encoders = []
    monkeypatch.setattr(CE, "_write_jsonl", lambda run, out, options, encode: seen_encoders.append(encode) or out)
    CE.to_cloudevents(tmp_path / "run", tmp_path / "a.jsonl")
    CE.to_cloudevents(tmp_path / "run", tmp_path / "b.jsonl", mode="binary")
    assert len(made) == 1 and getattr(seen_encoders[0], "fast", None) is not None
    assert getattr(seen_encoders[1], "fast", None) is None

    line = _line(0, annotator={"kind": "LLM", "model": "m"})
    calls = []

    def encode(batch):
        return X._encode([line_value(X._with_aigp(ev), WHERE, "structured") for ev in batch])

    fast = F.encoder(WHERE)
    encode.fast = lambda *a: calls.append(1) or fast(*a)
    for redact, used in ((None, True), (lambda ev, _lvl: ev, False)):
        calls.clear()
        m = X._AepMapper(None, "ab" * 32, encode, None)
        m.ctx, m.targets, m.redact = _ctx(tmp_path, "metadata", {}), set(), redact
        m.pid = -1
        data, _seen, seq = m.map([(1, line)], 0)
        assert bool(calls) is used
        assert data == _dict_out(_ctx(tmp_path, "metadata", {}), [line], set())[0]
        assert b'"aigpgrader":"MODEL","aigpconfidence":' in data
        assert seq == 2
