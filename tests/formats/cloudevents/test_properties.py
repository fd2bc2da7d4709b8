"""Property tests: generated AEP events survive the bridge and every binding exactly."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from aefgate.formats.cloudevents import (
    ce_forward,
    ce_inverse,
    from_amqp,
    from_http,
    from_kafka,
    from_structured,
    is_valid_cloudevent,
    to_amqp,
    to_binary_http,
    to_kafka,
    to_structured,
)
from aefgate.formats.cloudevents.mapping import AEP_CORE, bad_chars
from tests.formats.cloudevents._fixtures import GOLDEN_EVENTS

# strings CloudEvents can carry: no controls, surrogates or noncharacters
ce_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(
    lambda s: not bad_chars(s)
)
ext_name = st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True).filter(
    lambda n: n not in AEP_CORE and n not in {"specversion", "datacontenttype", "dataschema"}
    and not n.startswith("aep") and n != "traceparent" and n != "partitionkey"
)
ext_value = st.one_of(ce_text, st.booleans(), st.integers(-(2**31), 2**31 - 1))
times = st.from_regex(
    r"20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?"
    r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])",
    fullmatch=True,
)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(10**12), 10**12), ce_text)
payload = st.dictionaries(ce_text, st.one_of(json_scalar, st.lists(json_scalar, max_size=3)), max_size=4)


@st.composite
def events(draw) -> dict:
    e = copy.deepcopy(draw(st.sampled_from(GOLDEN_EVENTS)))
    e["time"] = draw(times)
    e["id"] = draw(ce_text)
    if draw(st.booleans()):
        e["subject"] = draw(ce_text)
    for name, value in draw(st.dictionaries(ext_name, ext_value, max_size=3)).items():
        e[name] = value
    if draw(st.booleans()):
        e["data"] = draw(payload)
    return e


@settings(max_examples=150, deadline=None)
@given(events())
def test_bridge_round_trip(e: dict) -> None:
    ce = ce_forward(e)
    assert is_valid_cloudevent(ce, strict=True) is None
    assert ce_inverse(ce) == e
    assert from_structured(to_structured(e)) == e
    assert from_amqp(*to_amqp(e)) == e
    assert from_amqp(*to_amqp(e, structured=True)) == e
    assert from_kafka(*to_kafka(e, structured=True)) == e


def _stringly(e: dict) -> dict:
    """What a binary mode gives back: extension integers and booleans as their canonical strings."""
    out = {}
    for k, v in e.items():
        if k not in AEP_CORE and not isinstance(v, str):
            v = ("true" if v else "false") if isinstance(v, bool) else str(v)
        out[k] = v
    return out


@settings(max_examples=150, deadline=None)
@given(events())
def test_binary_modes(e: dict) -> None:
    assert from_http(*to_binary_http(e)) == _stringly(e)
    assert from_kafka(*to_kafka(e)) == _stringly(e)
