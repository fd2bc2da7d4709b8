"""The event-file converter AEP <-> CloudEvents, through the registry, on the conformance fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.converters.cloudevents import CONVERTERS
from aefgate.converters.registry import Registry, run_route
from aefgate.errors import Refusal
from aefgate.formats.cloudevents import from_http, is_valid_cloudevent
from tests.formats.cloudevents._fixtures import CE_EVENTS, GOLDEN, GOLDEN_EVENTS, GOLDEN_LINES

REG = Registry(CONVERTERS)


def _convert(src: Path, dst: Path, source: str, target: str, **options: object) -> Path:
    return run_route(REG.find_route(source, target), src, dst, options)


def _values(path: Path) -> list:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_registered_directions() -> None:
    direct = {(c.source, c.target) for c in CONVERTERS if "aef" not in (c.source, c.target)}
    assert direct == {("aep", "cloudevents"), ("cloudevents", "aep")}
    # AEP is not the hub (AEF is): both are direct converters between two formats
    fmt = {f["format"]: f for f in REG.formats()}
    direct = {(c["source"], c["target"]): c for c in fmt["cloudevents"]["direct"]}
    assert direct[("aep", "cloudevents")]["fidelity"] == ["exact"]
    assert direct[("cloudevents", "aep")]["fidelity"] != ["exact"]
    assert [o["name"] for o in direct[("aep", "cloudevents")]["options"]] == ["mode"]
    assert [c.name for c in REG.find_route("aep", "cloudevents")] == ["aep-to-cloudevents"]


def test_structured_round_trip(tmp_path: Path) -> None:
    ce = _convert(GOLDEN, tmp_path / "cloudevents.jsonl", "aep", "cloudevents")
    assert _values(ce) == CE_EVENTS  # line for line, the pinned CloudEvents
    assert all(is_valid_cloudevent(c, strict=True) is None for c in _values(ce))
    back = _convert(ce, tmp_path / "aep.jsonl", "cloudevents", "aep")
    assert _values(back) == GOLDEN_EVENTS
    # written in the golden corpus's member order, compact UTF-8: most lines come back byte for byte
    same = sum(a == b for a, b in zip(back.read_bytes().splitlines(), GOLDEN_LINES))
    assert same >= 50


def test_binary_round_trip(tmp_path: Path) -> None:
    out = _convert(GOLDEN, tmp_path / "binary.jsonl", "aep", "cloudevents", mode="binary")
    lines = _values(out)
    assert len(lines) == len(GOLDEN_EVENTS)
    for line, event in zip(lines, GOLDEN_EVENTS):
        assert set(line) == {"headers", "body"}
        assert line["headers"]["ce-id"] == event["id"]
        assert from_http(line["headers"], line["body"].encode()) == event
    back = _convert(out, tmp_path / "aep.jsonl", "cloudevents", "aep")
    assert _values(back) == GOLDEN_EVENTS


@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_output_is_deterministic(tmp_path: Path, mode: str) -> None:
    a = _convert(GOLDEN, tmp_path / "a.jsonl", "aep", "cloudevents", mode=mode)
    b = _convert(GOLDEN, tmp_path / "b.jsonl", "aep", "cloudevents", mode=mode)
    assert a.read_bytes() == b.read_bytes()
    c = _convert(a, tmp_path / "c.jsonl", "cloudevents", "aep")
    d = _convert(b, tmp_path / "d.jsonl", "cloudevents", "aep")
    assert c.read_bytes() == d.read_bytes()


@pytest.mark.parametrize("mode", ["sideways", ""])
def test_unknown_mode_is_refused(tmp_path: Path, mode: str) -> None:
    with pytest.raises(Refusal) as ei:
        _convert(GOLDEN, tmp_path / "x.jsonl", "aep", "cloudevents", mode=mode)
    assert ei.value.rule == "CONV-3"
    assert list(tmp_path.iterdir()) == []


def _with_bad_line(tmp_path: Path, lineno: int, bad: bytes, lines: list[bytes]) -> Path:
    src = tmp_path / "in.jsonl"
    out = list(lines)
    out[lineno - 1] = bad
    src.write_bytes(b"\n".join(out) + b"\n")
    return src


@pytest.mark.parametrize(
    "bad,rule",
    [
        (b'{"aep":"0.1","id":"x","type":"tool.requested","time":"2026-07-03T10:15:03Z","source":"aep://h",'
         b'"agent":"a","seq":-4}', "B4"),
        (b'{"aep":"0.1","id":"x","type":"Tool Requested","time":"2026-07-03T10:15:03Z","source":"aep://h",'
         b'"agent":"a"}', "B3"),
        (b'{"id": 1, "id": 2}', "ENC-2"),
        (b"not json", "ENC-1"),
        (b"[1, 2]", "ENC-1"),  # the strict reader: an NDJSON line of an event file is an object
        # the bridge maps it, but it is no valid AEP event (a session-scoped type without seq): refused
        (b'{"aep":"0.1","id":"x","type":"assessment.evaluation.recorded","time":"2026-07-03T10:15:03Z",'
         b'"source":"aep://h","agent":"a","session":"s"}', "AEP-0001\u00a75.2"),
        (b'{"aep":"0.1","id":"x","type":"assessment.evaluation.recorded","time":"2026-07-03T10:15:03Z",'
         b'"source":"aep://h","agent":"a","session":"s","seq":0,"data":{"gen_ai.evaluation.name":5}}',
         "AEP-0002\u00a75"),
    ],
)
def test_a_bad_aep_line_is_refused_and_nothing_is_written(tmp_path: Path, bad: bytes, rule: str) -> None:
    src = _with_bad_line(tmp_path, 40, bad, GOLDEN_LINES)
    for mode in ("structured", "binary"):
        dst = tmp_path / f"out-{mode}.jsonl"
        with pytest.raises(Refusal) as ei:
            _convert(src, dst, "aep", "cloudevents", mode=mode)
        assert ei.value.rule == rule
        assert ei.value.exit_code == 2
        assert ei.value.where.startswith(f"{src}:40")
        assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no temporary file left


@pytest.mark.parametrize(
    "bad,rule",
    [
        (json.dumps({**CE_EVENTS[0], "type": "com.example.foreign"}).encode(), "B3"),
        (json.dumps({k: v for k, v in CE_EVENTS[0].items() if k != "aepagentid"}).encode(), "B4"),
        (json.dumps({"headers": {"content-type": "text/plain"}, "body": "hi"}).encode(), "CE-6"),
        (json.dumps({"headers": [], "body": ""}).encode(), "CE-7"),
        (b'{"specversion":"1.0","specversion":"1.0"}', "ENC-2"),
        # a CloudEvent the bridge reads whose AEP event is not valid (no aepsequence: no seq): refused
        (json.dumps({k: v for k, v in CE_EVENTS[0].items() if k != "aepsequence"}).encode(), "AEP-0001\u00a75.2"),
    ],
)
def test_a_bad_cloudevents_line_is_refused_and_nothing_is_written(tmp_path: Path, bad: bytes, rule: str) -> None:
    ce_lines = [json.dumps(c, separators=(",", ":")).encode() for c in CE_EVENTS]
    src = _with_bad_line(tmp_path, 12, bad, ce_lines)
    dst = tmp_path / "out.jsonl"
    with pytest.raises(Refusal) as ei:
        _convert(src, dst, "cloudevents", "aep")
    assert ei.value.rule == rule
    assert ei.value.where.startswith(f"{src}:12")
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_dropped_attributes_are_reported(tmp_path: Path) -> None:
    from aefgate.converters.cloudevents import _cloudevents_to_aep as _run_import

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({**CE_EVENTS[0], "aep_bad": "x"}) + "\n" + json.dumps(CE_EVENTS[1]) + "\n")
    report = _run_import(src, tmp_path / "out.jsonl")
    assert report["events"] == 2
    assert len(report["dropped"]) == 1 and report["dropped"][0].startswith(f"{src}:1: [CE-5] aep_bad")
    assert _values(tmp_path / "out.jsonl") == GOLDEN_EVENTS[:2]


def test_a_batch_line_is_read(tmp_path: Path) -> None:
    from aefgate.formats.cloudevents import to_batch_http

    headers, body = to_batch_http(GOLDEN_EVENTS[:3])
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"headers": headers, "body": body.decode()}) + "\n")
    out = _convert(src, tmp_path / "out.jsonl", "cloudevents", "aep")
    assert _values(out) == GOLDEN_EVENTS[:3]


def test_an_existing_destination_is_refused(tmp_path: Path) -> None:
    dst = tmp_path / "exists.jsonl"
    dst.write_text("keep\n")
    with pytest.raises(Refusal) as ei:
        _convert(GOLDEN, dst, "aep", "cloudevents")
    assert ei.value.rule == "OUT-1"
    assert dst.read_text() == "keep\n"


# -- the parallel export (forked workers for a large file) gives the same bytes and the same refusals ------------


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """The golden events repeated past a few worker batches."""
    from aefgate.converters.cloudevents import direct as mod

    src = tmp_path / "many.jsonl"
    n = 2 * mod._BATCH + 100
    src.write_bytes(b"".join(GOLDEN_LINES[i % len(GOLDEN_LINES)] + b"\n" for i in range(n)))
    return src


@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_parallel_export_gives_the_same_bytes(tmp_path: Path, many: Path, mode: str) -> None:
    from aefgate.converters.cloudevents.direct import export_file

    one = tmp_path / "one.jsonl"
    two = tmp_path / "two.jsonl"
    assert export_file(many, one, mode=mode, workers=0) == export_file(many, two, mode=mode, workers=2)
    assert one.read_bytes() == two.read_bytes()
    assert len(one.read_bytes().splitlines()) == 2 * 8192 + 100


@pytest.mark.parametrize("workers", [0, 2])
def test_parallel_export_refuses_the_first_bad_line(tmp_path: Path, many: Path, workers: int) -> None:
    from aefgate.converters.cloudevents.direct import export_file

    lines = many.read_bytes().splitlines()
    lines[9000] = b'{"aep":"0.1"}'  # line 9001: no type
    lines[12000] = b"not json"  # a later bad line, in another batch
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    dst = tmp_path / "out.jsonl"
    with pytest.raises(Refusal) as ei:
        export_file(src, dst, workers=workers)
    assert (ei.value.rule, ei.value.where) == ("B3", f"{src}:9001/type")
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "many.jsonl"]


@pytest.mark.parametrize("workers", [0, 2])
def test_export_refuses_a_framing_defect(tmp_path: Path, workers: int) -> None:
    from aefgate.converters.cloudevents.direct import export_file

    src = tmp_path / "cr.jsonl"
    src.write_bytes(b"\r\n".join(GOLDEN_LINES) + b"\r\n")
    dst = tmp_path / "out.jsonl"
    with pytest.raises(Refusal) as ei:
        export_file(src, dst, workers=workers)
    assert ei.value.rule == "ENC-5" and ei.value.where == str(src)
    assert not dst.exists()
    src.write_bytes(b"\n".join(GOLDEN_LINES))  # no final LF
    with pytest.raises(Refusal) as ei:
        export_file(src, dst, workers=workers)
    assert ei.value.rule == "ENC-7"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cr.jsonl"]
