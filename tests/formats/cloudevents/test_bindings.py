"""The CloudEvents wire: the JSON event format and the HTTP, Kafka and AMQP bindings, read back by the real SDK
(``cloudevents`` 2.x, ``cloudevents.core``) and by the bridge."""

from __future__ import annotations

import copy
import json
from datetime import datetime

import pytest
from cloudevents.core.bindings import amqp as sdk_amqp
from cloudevents.core.bindings import http as sdk_http
from cloudevents.core.bindings import kafka as sdk_kafka
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from dateutil.parser import isoparse

from aefgate.errors import Refusal
from aefgate.formats.cloudevents import (
    BATCH_CONTENT_TYPE,
    ce_forward,
    from_amqp,
    from_http,
    from_kafka,
    from_structured,
    is_valid_cloudevent,
    to_amqp,
    to_batch_http,
    to_binary_http,
    to_kafka,
    to_structured,
    to_structured_http,
)
from tests.formats.cloudevents._fixtures import GOLDEN_EVENTS, IDS

FMT = JSONFormat()


def _sdk_view(ce: dict, *, strings: bool) -> tuple[dict, object]:
    """What the SDK's CloudEvent holds for ``ce``: attributes (time a datetime; with ``strings``, every other
    attribute as a binary-mode header string) and data."""
    attrs = {}
    for k, v in ce.items():
        if k == "data":
            continue
        if k == "time":
            v = isoparse(v)
        elif strings and not isinstance(v, str):
            v = ("true" if v else "false") if isinstance(v, bool) else str(v)
        attrs[k] = v
    return attrs, ce.get("data")


def _same_as_sdk(sdk_event: CloudEvent, ce: dict, *, strings: bool) -> None:
    assert isinstance(sdk_event, CloudEvent)  # the SDK's own class, validated by its constructor
    attrs, data = _sdk_view(ce, strings=strings)
    assert sdk_event.get_attributes() == attrs
    assert sdk_event.get_data() == data


@pytest.mark.parametrize("event", GOLDEN_EVENTS, ids=IDS)
def test_structured_json(event: dict) -> None:
    ce = ce_forward(event)
    body = to_structured(event)
    assert json.loads(body) == ce  # the JSON event format is the pinned structured form
    _same_as_sdk(FMT.read(None, body), ce, strings=False)
    assert from_structured(body) == event


@pytest.mark.parametrize("event", GOLDEN_EVENTS, ids=IDS)
def test_http_binary(event: dict) -> None:
    ce = ce_forward(event)
    headers, body = to_binary_http(event)
    assert all(k == "content-type" or k.startswith("ce-") for k in headers)
    assert ("content-type" in headers) == ("data" in event)
    _same_as_sdk(sdk_http.from_http(sdk_http.HTTPMessage(headers=headers, body=body), FMT), ce, strings=True)
    assert from_http(headers, body) == event
    # header names are case-insensitive
    assert from_http({k.upper(): v for k, v in headers.items()}, body) == event


@pytest.mark.parametrize("event", GOLDEN_EVENTS, ids=IDS)
def test_http_structured(event: dict) -> None:
    headers, body = to_structured_http(event)
    assert headers == {"content-type": "application/cloudevents+json"}
    _same_as_sdk(sdk_http.from_http(sdk_http.HTTPMessage(headers=headers, body=body), FMT), ce_forward(event),
                 strings=False)
    assert from_http(headers, body) == event


def test_http_batch() -> None:
    headers, body = to_batch_http(GOLDEN_EVENTS)
    assert headers == {"content-type": BATCH_CONTENT_TYPE}
    assert json.loads(body) == [ce_forward(e) for e in GOLDEN_EVENTS]
    assert from_http(headers, body) == GOLDEN_EVENTS
    assert from_http({"Content-Type": BATCH_CONTENT_TYPE + "; charset=utf-8"}, b"[]") == []


@pytest.mark.parametrize("event", GOLDEN_EVENTS, ids=IDS)
def test_kafka(event: dict) -> None:
    ce = ce_forward(event)
    key, headers, value = to_kafka(event)
    assert key is None  # no partitionkey extension attribute
    msg = sdk_kafka.KafkaMessage(headers=headers, key=key, value=value)
    _same_as_sdk(sdk_kafka.from_kafka(msg, FMT), ce, strings=True)
    assert from_kafka(key, headers, value) == event
    key, headers, value = to_kafka(event, structured=True)
    _same_as_sdk(sdk_kafka.from_kafka(sdk_kafka.KafkaMessage(headers=headers, key=key, value=value), FMT), ce,
                 strings=False)
    assert from_kafka(key, headers, value) == event


def test_kafka_key_is_the_partitionkey_extension() -> None:
    event = {**copy.deepcopy(GOLDEN_EVENTS[0]), "partitionkey": "s_8f2c"}
    for structured in (False, True):
        key, headers, value = to_kafka(event, structured=structured)
        assert key == "s_8f2c"
        assert from_kafka(key, headers, value) == event
        assert from_kafka(key.encode(), headers, value) == event


@pytest.mark.parametrize("event", GOLDEN_EVENTS, ids=IDS)
def test_amqp(event: dict) -> None:
    ce = ce_forward(event)
    props, app, data = to_amqp(event)
    assert all(k.startswith("cloudEvents_") for k in app)
    sdk_event = sdk_amqp.from_amqp(sdk_amqp.AMQPMessage(properties=props, application_properties=app,
                                                        application_data=data), FMT)
    _same_as_sdk(sdk_event, ce, strings=False)  # AMQP keeps native integers and booleans
    assert from_amqp(props, app, data) == event
    props, app, data = to_amqp(event, structured=True)
    assert app == {}
    assert from_amqp(props, app, data) == event


def test_amqp_native_timestamp_is_read() -> None:
    event = copy.deepcopy(GOLDEN_EVENTS[3])  # time 2026-07-03T10:15:04.221Z
    props, app, data = to_amqp(event)
    app["cloudEvents_time"] = int(isoparse(event["time"]).timestamp() * 1000)  # an AMQP timestamp, as the SDK writes
    assert from_amqp(props, app, data) == event
    # the colon prefix of the AMQP binding is read too
    app2 = {k.replace("cloudEvents_", "cloudEvents:"): v for k, v in app.items()}
    assert from_amqp(props, app2, data) == event


# -- where the SDK departs from the spec or from a bit-for-bit inverse (bindings.py, SDK deviations) ---------------

EXACT_TIMES = ["2026-07-03T10:15:04.000Z", "2026-07-03T10:15:04.123456789Z", "2026-07-03T12:15:04.5+02:00",
               "2026-07-03t10:15:04z"]


@pytest.mark.parametrize("time", EXACT_TIMES)
def test_time_is_carried_exactly_through_every_binding(time: str) -> None:
    event = {**copy.deepcopy(GOLDEN_EVENTS[3]), "time": time}
    assert from_structured(to_structured(event)) == event
    assert from_http(*to_binary_http(event)) == event
    assert from_http(*to_structured_http(event)) == event
    assert from_kafka(*to_kafka(event)) == event
    assert from_amqp(*to_amqp(event)) == event


def test_the_sdk_rerenders_time() -> None:
    """Deviation 1's reason: the SDK's own event re-renders ``time``. If this starts failing, the SDK keeps time
    exactly and the workaround in bindings.py can go."""
    sdk_event = CloudEvent({"id": "1", "source": "/s", "type": "t", "time": isoparse("2026-07-03T10:15:04.000Z")})
    assert json.loads(FMT.write(sdk_event))["time"] != "2026-07-03T10:15:04.000Z"
    headers = sdk_http.to_binary(sdk_event, FMT).headers
    assert headers["ce-time"] != "2026-07-03T10:15:04.000Z"


def test_booleans_are_canonical_strings_in_headers() -> None:
    event = {**copy.deepcopy(GOLDEN_EVENTS[0]), "acmeflag": True, "acmecount": 12}
    headers, body = to_binary_http(event)
    assert headers["ce-acmeflag"] == "true" and headers["ce-acmecount"] == "12"
    _, kheaders, _ = to_kafka(event)
    assert kheaders["ce_acmeflag"] == b"true"
    # binary modes carry no types: an integer or boolean extension comes back as its string (documented loss)
    got = from_http(headers, body)
    assert got["acmeflag"] == "true" and got["acmecount"] == "12"
    # structured mode and AMQP keep them
    assert from_structured(to_structured(event)) == event
    assert from_amqp(*to_amqp(event)) == event


def test_percent_encoding_of_header_values() -> None:
    event = {**copy.deepcopy(GOLDEN_EVENTS[2]), "subject": "Bash — 100% \"done\""}
    headers, body = to_binary_http(event)
    assert headers["ce-subject"].isascii() and " " not in headers["ce-subject"]
    assert from_http(headers, body) == event
    assert is_valid_cloudevent(ce_forward(event), strict=True) is None


# -- refusals ---------------------------------------------------------------------------------------------------


def _binary0() -> tuple[dict, bytes]:
    return to_binary_http(GOLDEN_EVENTS[3])


@pytest.mark.parametrize(
    "headers,body,rule",
    [
        ({**_binary0()[0], "ce-aepsequence": "03"}, _binary0()[1], "B4"),
        ({**_binary0()[0], "ce-aepsequence": "x"}, _binary0()[1], "B4"),
        ({**_binary0()[0], "ce-time": "not a time"}, _binary0()[1], "CE-1"),
        ({**_binary0()[0], "ce-time": "20260703T101504Z"}, _binary0()[1], "CE-1"),
        ({**_binary0()[0], "CE-ID": "again"}, _binary0()[1], "CE-6"),
        ({**_binary0()[0], "ce-type": "com.example.other"}, _binary0()[1], "B3"),
        ({**_binary0()[0], "ce-data": "{}"}, _binary0()[1], "CE-6"),
        (_binary0()[0], b'{"a": 1, "a": 2}', "CE-1"),
        (_binary0()[0], b"[1, 2]", "CE-3"),
        (_binary0()[0], b"not json", "CE-1"),
        ({**_binary0()[0], "content-type": "text/plain"}, b"hello", "CE-3"),
        ({"content-type": "application/json"}, b"{}", "CE-6"),
        ({"content-type": "application/cloudevents+json"}, b'{"specversion": "1.0"}', "CE-1"),
        ({"content-type": "application/cloudevents+json"}, b"\xff", "CE-1"),
        ({"content-type": BATCH_CONTENT_TYPE}, b"{}", "CE-6"),
        ({"content-type": BATCH_CONTENT_TYPE}, b"[1]", "CE-1"),
    ],
)
def test_from_http_refusals(headers: dict, body: bytes, rule: str) -> None:
    with pytest.raises(Refusal) as ei:
        from_http(headers, body, where="msg")
    assert ei.value.rule == rule
    assert ei.value.where.startswith("msg")


def test_from_kafka_and_amqp_refusals() -> None:
    key, headers, value = to_kafka(GOLDEN_EVENTS[3])
    with pytest.raises(Refusal) as ei:
        from_kafka(key, {**headers, "ce_aepepoch": b"-1"}, value)
    assert ei.value.rule == "B4"
    with pytest.raises(Refusal) as ei:
        from_kafka(None, {"content-type": b"application/cloudevents+json"}, b"{")
    assert ei.value.rule == "CE-1"
    props, app, data = to_amqp(GOLDEN_EVENTS[3])
    with pytest.raises(Refusal) as ei:
        from_amqp(props, {**app, "cloudEvents_aepseverity": "loud"}, data)
    assert ei.value.rule == "B4"
    with pytest.raises(Refusal) as ei:
        from_amqp(props, {**app, "cloudEvents_time": "garbage"}, data)
    assert ei.value.rule == "CE-1"


def test_sdk_event_time_type() -> None:
    # the SDK's readers give a datetime for time, which _same_as_sdk compares against the exact string
    headers, body = to_binary_http(GOLDEN_EVENTS[0])
    ev = sdk_http.from_http(sdk_http.HTTPMessage(headers=headers, body=body), FMT)
    assert isinstance(ev.get_time(), datetime)
