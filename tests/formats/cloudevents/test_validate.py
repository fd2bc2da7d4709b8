"""is_valid_cloudevent: the CloudEvents 1.0 attribute-name and type rules (AEP-0005 §5.2)."""

from __future__ import annotations

import pytest

from aefgate.formats.cloudevents import ce_forward, is_valid_cloudevent
from tests.formats.cloudevents._fixtures import CE_EVENTS, GOLDEN_EVENTS

BASE = {"specversion": "1.0", "id": "e-1", "source": "aep://host/agent/a", "type": "com.example.t"}


def test_every_pinned_and_produced_cloudevent_is_valid() -> None:
    for ce in CE_EVENTS:
        assert is_valid_cloudevent(ce, strict=True) is None
    for e in GOLDEN_EVENTS:
        assert is_valid_cloudevent(ce_forward(e), strict=True) is None


@pytest.mark.parametrize(
    "ce",
    [
        BASE,
        {**BASE, "source": "/relative/path"},
        {**BASE, "source": "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"},
        {**BASE, "time": "2026-07-03T10:15:04.123456789+02:00"},
        {**BASE, "time": "2024-02-29T00:00:00z"},
        {**BASE, "datacontenttype": "application/json; charset=utf-8", "data": {"a": 1}},
        {**BASE, "data_base64": "aGVsbG8="},
        {**BASE, "dataschema": "https://example.com/schema.json"},
        {**BASE, "ext1": "x", "ext2": 2147483647, "ext3": -2147483648, "ext4": True},
        {**BASE, "averyveryverylongname1": "x"},  # over 20 characters: a SHOULD, valid unless strict
    ],
)
def test_valid(ce: dict) -> None:
    assert is_valid_cloudevent(ce) is None


@pytest.mark.parametrize(
    "ce,needle",
    [
        ({k: v for k, v in BASE.items() if k != "id"}, "id"),
        ({k: v for k, v in BASE.items() if k != "source"}, "source"),
        ({k: v for k, v in BASE.items() if k != "type"}, "type"),
        ({k: v for k, v in BASE.items() if k != "specversion"}, "specversion"),
        ({**BASE, "specversion": "0.3"}, "specversion"),
        ({**BASE, "id": ""}, "id"),
        ({**BASE, "id": 5}, "id"),
        ({**BASE, "source": "has space"}, "source"),
        ({**BASE, "source": "1abc:x"}, "source"),
        ({**BASE, "time": "2026-07-03T10:15:04"}, "time"),  # no time zone
        ({**BASE, "time": "2026-07-03"}, "time"),
        ({**BASE, "time": "20260703T101504Z"}, "time"),  # ISO 8601 basic form is not RFC 3339
        ({**BASE, "time": "2023-02-29T00:00:00Z"}, "time"),
        ({**BASE, "time": "2026-07-03T25:00:00Z"}, "time"),
        ({**BASE, "datacontenttype": "json"}, "datacontenttype"),
        ({**BASE, "dataschema": "relative/schema"}, "dataschema"),
        ({**BASE, "subject": ""}, "subject"),
        ({**BASE, "subject": "tab\there"}, "subject"),
        ({**BASE, "Upper": "x"}, "Upper"),
        ({**BASE, "with_underscore": "x"}, "with_underscore"),
        ({**BASE, "ext": None}, "ext"),
        ({**BASE, "ext": 1.5}, "ext"),
        ({**BASE, "ext": {"a": 1}}, "ext"),
        ({**BASE, "ext": 2**31}, "ext"),
        ({**BASE, "ext": "bell\x07"}, "ext"),
        ({**BASE, "ext": "\ufffe"}, "ext"),
        ({**BASE, "data": {}, "data_base64": "AA=="}, "data_base64"),
        ({**BASE, "data_base64": "not base64!"}, "data_base64"),
    ],
)
def test_invalid(ce: dict, needle: str) -> None:
    reason = is_valid_cloudevent(ce)
    assert reason is not None and needle in reason


def test_strict_applies_the_20_character_should() -> None:
    ce = {**BASE, "averyveryverylongname1": "x"}
    assert "20" in (is_valid_cloudevent(ce, strict=True) or "")


@pytest.mark.parametrize("value", [None, [], "x", 1])
def test_not_an_object(value: object) -> None:
    assert is_valid_cloudevent(value) is not None
