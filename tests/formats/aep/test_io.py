"""AEP JSONL files: strict reading (refusals name the rule and path:line) and atomic writing."""

from __future__ import annotations

import json

import pytest

from aefgate.errors import Refusal
from aefgate.formats.aep import read_events, write_events

from ._aep import GOLDEN, golden

LINE = json.dumps(golden()[0], separators=(",", ":")).encode()


def test_golden_round_trips(tmp_path):
    events = [e for _, e in read_events(GOLDEN)]
    assert events == golden()
    out = tmp_path / "copy.jsonl"
    assert write_events(out, events) == len(events)
    assert [e for _, e in read_events(out)] == events
    assert [n for n, _ in read_events(out)] == list(range(1, len(events) + 1))
    assert out.read_bytes().endswith(b"\n") and b"\r" not in out.read_bytes()
    assert not list(tmp_path.glob(".*tmp*"))


def _refusal(tmp_path, data: bytes) -> Refusal:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(data)
    with pytest.raises(Refusal) as info:
        list(read_events(p))
    return info.value


@pytest.mark.parametrize("line, rule", [
    (b'{"aep":"0.1","aep":"0.1"}', "ENC-2"),  # a member twice
    (b'{"aep":"0.1","x":NaN}', "ENC-1"),
    (b'{"aep":"0.1","x":1e400}', "ENC-3"),
    (b'{"aep":"0.1","x":"\xff"}', "ENC-1"),  # not UTF-8
    (b'[1,2]', "ENC-1"),
])
def test_bad_json_is_refused_at_its_line(tmp_path, line, rule):
    r = _refusal(tmp_path, LINE + b"\n" + line + b"\n")
    assert r.rule == rule and r.where.endswith("bad.jsonl:2") and r.exit_code == 2


@pytest.mark.parametrize("data", [LINE + b"\n\n" + LINE + b"\n", LINE + b"\r\n", LINE, b"\xef\xbb\xbf" + LINE + b"\n"])
def test_bad_framing_is_refused(tmp_path, data):
    r = _refusal(tmp_path, data)
    assert r.rule == "AEP-0003§3.1" and r.where.endswith("bad.jsonl")


def test_invalid_event_is_refused_at_its_line(tmp_path):
    bad = json.loads(LINE)
    del bad["session"]
    r = _refusal(tmp_path, LINE + b"\n" + json.dumps(bad).encode() + b"\n")
    assert r.rule == "AEP-0001§5.2" and r.where.endswith("bad.jsonl:2") and "/session" in r.message
    p = tmp_path / "bad.jsonl"
    assert len(list(read_events(p, validate=False))) == 2


def test_unsupported_version_lines_are_skipped_and_reported_once(tmp_path):
    other = json.loads(LINE)
    other["aep"] = "1.0"
    p = tmp_path / "mixed.jsonl"
    p.write_bytes(b"".join(x + b"\n" for x in [LINE, json.dumps(other).encode(), json.dumps(other).encode(), LINE]))
    seen = []
    got = list(read_events(p, on_skip=lambda n, v: seen.append((n, v))))
    assert [n for n, _ in got] == [1, 4]
    assert seen == [(2, "1.0")]


def test_missing_file(tmp_path):
    with pytest.raises(Refusal) as info:
        list(read_events(tmp_path / "nope.jsonl"))
    assert info.value.rule == "CLI-1"


def test_write_failure_leaves_nothing(tmp_path):
    out = tmp_path / "x.jsonl"

    def events():
        yield json.loads(LINE)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_events(out, events())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Refusal):
        write_events(out, [{"x": float("nan")}])
    assert list(tmp_path.iterdir()) == []
