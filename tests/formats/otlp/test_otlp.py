"""aefgate.formats.otlp: OTLP/JSON and protobuf, against protobuf's own JSON mapping and the SDK's requests."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from google.protobuf.json_format import MessageToDict

from aefgate.errors import Refusal
from aefgate.formats.otlp.codec import (
    _recode_ids,
    decode_body,
    encode_body,
    from_json,
    iter_file,
    nanos_to_time,
    time_to_nanos,
    to_json,
    value_of,
)
from tests._shared import SAMPLES

OTEL = SAMPLES / "otel"


def _rich_logs():
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.schema_url = "https://opentelemetry.io/schemas/1.0"
    rl.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
    sl = rl.scope_logs.add()
    sl.scope.name, sl.scope.version = "s", "1"
    rec = sl.log_records.add()
    rec.time_unix_nano = 1796080907512565929
    rec.observed_time_unix_nano = 2**63 + 5
    rec.severity_number = 13
    rec.trace_id = bytes(range(16))
    rec.span_id = bytes(range(8))
    rec.flags = 3
    rec.event_name = "gen_ai.evaluation.result"
    rec.body.SetInParent()  # an empty AnyValue, as the SDK writes it
    for k, v in (("s", AnyValue(string_value="é ✓")), ("b", AnyValue(bool_value=True)),
                 ("i", AnyValue(int_value=-(2**62))), ("d", AnyValue(double_value=4.0)),
                 ("nan", AnyValue(double_value=math.nan)), ("inf", AnyValue(double_value=-math.inf)),
                 ("bytes", AnyValue(bytes_value=b"\x00\xff")),
                 ("arr", AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="x")]))),
                 ("kv", AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(double_value=.5))])))):
        rec.attributes.add(key=k, value=v)
    return req


def test_to_json_is_protobufs_mapping_with_hex_ids():
    req = _rich_logs()
    mine = to_json(req, "logs")
    ref = _recode_ids(MessageToDict(req, use_integers_for_enums=True), "logs", True, "")
    assert mine == ref
    rec = mine["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert rec["traceId"] == bytes(range(16)).hex() and rec["timeUnixNano"] == "1796080907512565929"
    assert rec["body"] == {}
    attrs = {a["key"]: value_of(a["value"]) for a in rec["attributes"]}
    assert attrs["i"] == -(2**62) and attrs["arr"] == [1, "x"] and attrs["kv"] == {"a": 0.5}
    back = from_json(mine, "logs")  # and back, the same message
    assert back == req


def test_the_sdk_requests_both_forms():
    for signal in ("logs", "traces"):
        lines = [json.loads(x) for x in (OTEL / f"{signal}.otlp.jsonl").read_text().splitlines()]
        bodies = [(OTEL / f"{signal}-{i}.pb").read_bytes() for i in (1, 2)]
        assert [decode_body(b, signal) for b in bodies] == lines
        assert [encode_body(d, signal) for d in lines] == bodies  # byte for byte, as the SDK sent them
        assert [d for i in (1, 2) for _, d in iter_file(OTEL / f"{signal}-{i}.pb", signal)] == lines
        assert decode_body(gzip.compress(bodies[0]), signal, content_encoding="gzip") == lines[0]
        assert decode_body(json.dumps(lines[0]).encode(), signal, content_type="application/json") == lines[0]


@pytest.mark.parametrize("body,ctype,rule", [
    (b"\x0a\xff\xff\xff", "application/x-protobuf", "OTLP-1"),
    (b"{", "application/json", "OTLP-1"),
    (b'{"resourceLogs": 5}', "application/json", "OTLP-1"),
    (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz"}]}]}]}', "application/json", "OTLP-1"),
    (gzip.compress(b"\x00" * (65 * 1024 * 1024)), "application/x-protobuf", "OTLP-2"),
])
def test_bad_bodies_are_refused(body, ctype, rule):
    with pytest.raises(Refusal) as e:
        decode_body(body, "logs", content_type=ctype)
    assert e.value.rule == rule


def test_times():
    assert nanos_to_time("1790950000250000000") == "2026-10-02T14:06:40.25Z"
    assert nanos_to_time(0) is None and nanos_to_time("0") is None
    assert time_to_nanos("2026-10-02T14:06:40.25Z") == 1790950000250000000
    assert time_to_nanos(nanos_to_time("1796080907512565929")) == 1796080907512565929
    with pytest.raises(ValueError):
        time_to_nanos("1969-12-31T23:59:59Z")
