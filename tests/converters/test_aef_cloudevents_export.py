"""Every CloudEvent `aefgate export cloudevents` writes is CloudEvents 1.0 (attribute names and types), and the
cloudevents SDK's own parser reads every one of them, structured and binary, back to the event the AEP export gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http as sdk_from_http
from cloudevents.core.formats.json import JSONFormat

from aefgate.converters.aep import exporter as aep_exporter
from aefgate.converters.cloudevents import exporter as ce_exporter
from aefgate.formats.cloudevents import ce_forward, is_valid_cloudevent
from tests._shared import EXAMPLES, SEALED_EXAMPLE_RUNS

RUNS = SEALED_EXAMPLE_RUNS + [EXAMPLES / "aef-inspect" / "input"]


@pytest.mark.parametrize("src", RUNS, ids=lambda p: "/".join(p.parts[-3:]))
def test_exported_cloudevents_are_valid_and_the_sdk_reads_them(src: Path, tmp_path: Path) -> None:
    # (lines split at LF only: str.splitlines would also split at the U+2028 one example's reason holds)
    aep = [json.loads(x) for x in aep_exporter.to_aep(src, tmp_path / "aep.jsonl", max_capture="full")
           .read_bytes().split(b"\n")[:-1]]
    structured = [json.loads(x) for x in ce_exporter.to_cloudevents(src, tmp_path / "ce.jsonl", max_capture="full")
                  .read_bytes().split(b"\n")[:-1]]
    binary = [json.loads(x) for x in ce_exporter.to_cloudevents(src, tmp_path / "bin.jsonl", mode="binary",
                                                           max_capture="full").read_bytes().split(b"\n")[:-1]]
    assert len(aep) == len(structured) == len(binary) > 0
    fmt = JSONFormat()
    for event, ce, msg in zip(aep, structured, binary):
        # the bridge's event, plus the AIGP grader as extension attributes (docs/mappings/aigp.md)
        grader = (event["data"].get("aef") or {}).get("grader") or {}
        assert ce.pop("aigpgrader", None) == grader.get("type")
        assert ce.pop("aigpconfidence", None) == grader.get("confidence")
        assert ce == ce_forward(event)
        assert is_valid_cloudevent(ce, strict=True) is None, ce
        parsed = fmt.read(None, json.dumps(ce).encode())  # the SDK's JSON event format
        assert parsed.get_id() == ce["id"] and parsed.get_type() == ce["type"] and parsed.get_data() == ce["data"]
        sdk = sdk_from_http(HTTPMessage(msg["headers"], msg["body"].encode("utf-8")), fmt)  # binary content mode
        assert sdk.get_id() == ce["id"] and sdk.get_source() == ce["source"] and sdk.get_data() == ce["data"]
        for name in ce:
            if name not in ("data", "data_base64"):
                assert sdk.get_attributes()[name] is not None, name
