"""The AEP-0005 CloudEvents bridge: AEP Event <-> CloudEvents 1.0 (JSON format, structured mode), as plain dicts.

Forward (:func:`ce_forward`, AEP-0005 §1): B1 constants, B2 pass-through, B3 type prefix, B4 attribute table
(and AEP extension attributes verbatim), B5 ``traceparent`` unprefixed. Inverse (:func:`ce_inverse`, §2): the
reverse, bit-for-bit modulo member order; unknown extension attributes preserved when their names are legal AEP
extension names (AEP-0001 §5.4), dropped with a :class:`Diagnostic` otherwise.

Both are plain dict transformations (no SDK object per event): the forward map runs on bulk exports.

Refusals (:class:`aefgate.errors.Refusal`, exit 2). Rule ids are AEP-0005's where it numbers the rule
(``B1``..``B5``), else aefgate's own ``CE-n`` (docs/design/cloudevents-bridge.md):

- ``B2``: a required pass-through attribute (``id``, ``source``, ``time``) missing or not a non-empty string;
  ``data`` not a JSON object;
- ``B3``: a ``type`` that is not an AEP type (forward), or a CloudEvent whose ``type`` is not under ``dev.aep.``
  (inverse: a foreign CloudEvent, out of scope by §2 rule 3);
- ``B4``: an envelope attribute of the wrong JSON type or value (``seq`` not an integer >= 0, ``severity`` not
  in its enum ...), a missing ``aep``/``agent`` (``aepversion``/``aepagentid``), an AEP extension attribute with
  an ill-formed name, a non-scalar value, or a name that would collide with a CloudEvents attribute;
- ``B5``: a ``traceparent`` that is not a W3C traceparent;
- ``CE-1``: not a JSON object, or not a valid CloudEvents 1.0 event (:func:`is_valid_cloudevent`'s reason);
- ``CE-2``: a value CloudEvents cannot carry (an integer outside CE's 32-bit Integer range, a string with a
  character CE's String type forbids);
- ``CE-3``: inbound data that cannot be an AEP ``data`` object (``data_base64``, a non-JSON
  ``datacontenttype``, a ``data`` that is not an object).

Layering: CloudEvents 1.0's value types (``value_types.py``: :func:`bad_chars`, the Integer range, RFC 3339 times) are
below both this module and the validity check (``conformance.py``), which this module uses: ``value_types`` < ``conformance``
< ``mapping``. The value helpers stay importable from here.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from aefgate.errors import Refusal
from aefgate.formats.cloudevents.conformance import core_problem
from aefgate.formats.cloudevents.value_types import _INT_MAX, _INT_MIN, _json_type, rfc3339, bad_chars

__all__ = [
    "TYPE_ROOT",
    "SPECVERSION",
    "DATACONTENTTYPE",
    "AEP_TO_CE",
    "AEP_TYPE",
    "CE_TO_AEP",
    "Diagnostic",
    "ce_forward",
    "ce_inverse",
    "rfc3339",
]

SPECVERSION = "1.0"  # B1
DATACONTENTTYPE = "application/json"  # B1
TYPE_ROOT = "dev.aep."  # B3 (placeholder root, frozen at the naming decision)
_ROOT_LEN = len(TYPE_ROOT)

# B4/B5: the table of AEP-0005 §1, in its order (the order the CE attributes are written in)
AEP_TO_CE: dict[str, str] = {
    "aep": "aepversion",
    "agent": "aepagentid",
    "session": "aepsessionid",
    "run": "aeprunid",
    "step": "aepstep",
    "seq": "aepsequence",
    "epoch": "aepepoch",
    "cause": "aepcausationid",
    "severity": "aepseverity",
    "capture": "aepcapture",
    "traceparent": "traceparent",  # B5: the Distributed Tracing extension, unprefixed
}
CE_TO_AEP: dict[str, str] = {v: k for k, v in AEP_TO_CE.items()}

# AEP-0001 §5.1: the sixteen context attributes plus data
AEP_CORE = frozenset(
    ["aep", "id", "type", "subject", "time", "source", "agent", "session", "run", "step", "seq", "epoch", "cause",
     "traceparent", "severity", "capture", "data"]
)
# the order an AEP event is written in (the golden corpus's order)
_AEP_ORDER = ("aep", "id", "type", "subject", "time", "source", "agent", "session", "run", "step", "seq", "epoch",
              "cause", "severity", "capture", "traceparent")
# CloudEvents 1.0 context attributes and the JSON format's data members: an AEP extension attribute may not take
# one of these names (it would overwrite a B1/B2/B4 attribute or claim a CE meaning it does not have)
CE_CORE = frozenset(["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema",
                     "data", "data_base64"])
_RESERVED_EXT = CE_CORE | frozenset(AEP_TO_CE.values())

_EXT_NAME = re.compile(r"[a-z0-9]{1,20}")  # AEP-0001 §5.4 (CloudEvents' extension-name constraint)
#: an AEP event type (AEP-0001 §4: a category and its sub-types, or an ``x.`` vendor type); B3
AEP_TYPE = re.compile(
    r"(?:agent|session|run|progress|tool|delegation|attention|resource|error|state|assessment|message|control)"
    r"(?:\.[a-z0-9_]+)+|x\.[a-z0-9_-]+\.[a-z0-9_]+(?:\.[a-z0-9_]+)+"
)
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
SEVERITIES = frozenset(["debug", "info", "notice", "warning", "error", "critical"])
CAPTURES = frozenset(["none", "metadata", "redacted", "full"])

# attributes whose value is a non-empty string (the schema's minLength 1), by AEP name
_STRING_ATTRS = frozenset(["aep", "id", "subject", "source", "agent", "session", "run", "step", "cause"])


class Diagnostic(NamedTuple):
    """An inbound attribute the inverse dropped (AEP-0005 §2 rule 2 "dropped with a diagnostic", B1 constants)."""

    attribute: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.attribute}: {self.message}"


def _where(where: str, attr: str) -> str:
    return f"{where}/{attr}" if where else attr


def _check_envelope_value(name: str, value: Any, where: str, ce_name: str | None = None) -> None:
    """One AEP context attribute's value (AEP-0001 §5.1, the envelope schema); ``name`` is its AEP name."""
    shown = ce_name or name
    rule = "B5" if name == "traceparent" else ("B2" if name in ("id", "source", "subject", "time") else "B4")
    t = type(value)
    if name in _STRING_ATTRS or name == "time":
        if t is not str or not value:
            raise Refusal(rule, f"{shown} must be a non-empty string, not {_show(value)}", _where(where, shown))
    elif name == "seq" or name == "epoch":
        if t is not int or value < 0:
            raise Refusal(rule, f"{shown} must be an integer >= 0, not {_show(value)}", _where(where, shown))
        if value > _INT_MAX:
            raise Refusal("CE-2", f"{shown} {value} is over CloudEvents' Integer range (at most 2^31-1)",
                          _where(where, shown))
        return
    elif name == "severity":
        if t is not str or value not in SEVERITIES:
            raise Refusal(rule, f"{shown} must be one of {', '.join(sorted(SEVERITIES))}, not {_show(value)}",
                          _where(where, shown))
    elif name == "capture":
        if t is not str or value not in CAPTURES:
            raise Refusal(rule, f"{shown} must be one of {', '.join(sorted(CAPTURES))}, not {_show(value)}",
                          _where(where, shown))
    elif name == "traceparent":
        if t is not str or not _TRACEPARENT.fullmatch(value):
            raise Refusal("B5", f"{shown} is not a W3C traceparent: {_show(value)}", _where(where, shown))
    if bad_chars(value):
        raise Refusal("CE-2", f"{shown} holds a character CloudEvents' String type forbids (a control character, "
                      "a surrogate or a noncharacter)", _where(where, shown))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ext_value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be an extension attribute value (AEP-0001 §5.4, CloudEvents 1.0 types), or None."""
    t = type(value)
    if t is str:
        if bad_chars(value):
            return "a string with a character CloudEvents' String type forbids"
        return None
    if t is bool:
        return None
    if t is int:
        if value < _INT_MIN or value > _INT_MAX:
            return f"the integer {value} is outside CloudEvents' Integer range (32-bit)"
        return None
    return f"a {_json_type(value)} (extension attributes are strings, integers or booleans)"


# ------------------------------------------------------------------------------------------------------------------
# forward: AEP -> CE (AEP-0005 §1)
# ------------------------------------------------------------------------------------------------------------------


def ce_forward(event: dict, where: str = "") -> dict:
    """The CloudEvents 1.0 structured-JSON form of the AEP Event ``event`` (AEP-0005 §1, B1..B5).

    The members are written in the pinned order (``conformance/fixtures/ce-roundtrip/ce-expected.jsonl``):
    ``specversion, id, source, type, subject, time, datacontenttype``, the B4/B5 table in its order, the AEP
    extension attributes in their order, ``data``. ``where`` prefixes the place of a refusal (``file:line``).

    A plain dict transformation with a fast path: each value is checked with a few type tests (an ASCII string
    is checked for control characters with ``str.isprintable``); only a value the fast path does not clear goes
    through the full check, which accepts it (a legal non-ASCII string) or refuses it.
    """
    if type(event) is not dict:
        raise Refusal("CE-1", f"an AEP event is a JSON object, not {_json_type(event)}", where)
    get = event.get
    typ = get("type")
    if type(typ) is not str or not AEP_TYPE.fullmatch(typ):
        raise Refusal("B3", f"type must be an AEP type ({{category}}.{{rest}} or x.{{vendor}}.{{category}}.{{rest}})"
                      f", not {_show(typ)}", _where(where, "type"))
    ce: dict[str, Any] = {"specversion": SPECVERSION}  # B1
    v = get("id")  # B2
    if not (type(v) is str and v and v.isascii() and v.isprintable()):
        _check_envelope_value("id", v, where)
    ce["id"] = v
    v = get("source")
    if not (type(v) is str and v and v.isascii() and v.isprintable()):
        _check_envelope_value("source", v, where)
    ce["source"] = v
    ce["type"] = TYPE_ROOT + typ  # B3
    v = get("subject", _ABSENT)
    if v is not _ABSENT:
        if not (type(v) is str and v and v.isascii() and v.isprintable()):
            _check_envelope_value("subject", v, where)
        ce["subject"] = v
    v = get("time")
    if type(v) is not str or not rfc3339(v):
        raise Refusal("B2", f"time is not an RFC 3339 date-time with a time zone: {_show(v)}", _where(where, "time"))
    ce["time"] = v
    data = get("data", _ABSENT)
    if data is not _ABSENT:
        if type(data) is not dict:
            raise Refusal("B2", f"data must be a JSON object, not {_json_type(data)}", _where(where, "data"))
        ce["datacontenttype"] = DATACONTENTTYPE  # B1
    for name, ce_name, kind in _TABLE:  # B4, B5
        v = get(name, _ABSENT)
        if v is _ABSENT:
            if kind is _REQUIRED:
                raise Refusal("B4", f"the AEP envelope requires {name} (AEP-0001 §5.1)", _where(where, name))
            continue  # absent optional attributes produce no CE attribute (defaults are not materialized)
        t = type(v)
        if kind is _UINT:
            if not (t is int and 0 <= v <= _INT_MAX):
                _check_envelope_value(name, v, where)
        elif kind is _STR or kind is _REQUIRED:
            if not (t is str and v and v.isascii() and v.isprintable()):
                _check_envelope_value(name, v, where)
        elif not (t is str and v in kind):  # an enum (severity, capture) or _TP
            _check_envelope_value(name, v, where)
        ce[ce_name] = v
    # every core attribute present has one CE member (data's is written last, datacontenttype stands in for it
    # until then), plus specversion: a longer event carries extension attributes
    if len(event) > len(ce) - 1:
        for name, v in event.items():  # AEP extension attributes pass through verbatim (B4)
            if name in AEP_CORE:
                continue
            if not _EXT_NAME.fullmatch(name):
                raise Refusal("B4", f"extension attribute name {_show(name)} is not [a-z0-9]{{1,20}} (AEP-0001 §5.4)",
                              _where(where, name))
            if name in _RESERVED_EXT:
                raise Refusal("B4", f"extension attribute {name!r} collides with the CloudEvents attribute {name!r} "
                              "the bridge writes or reserves", _where(where, name))
            problem = _ext_value_problem(v)
            if problem:
                raise Refusal("CE-2" if type(v) in (str, int) else "B4",
                              f"extension attribute {name!r} cannot be a CloudEvents value: {problem}",
                              _where(where, name))
            ce[name] = v
    if data is not _ABSENT:
        ce["data"] = data  # B2
    return ce


_REQUIRED, _STR, _UINT = object(), object(), object()
_TP: frozenset = frozenset()  # traceparent: never "in" it, so always the full check (its pattern)
_KINDS = {"aep": _REQUIRED, "agent": _REQUIRED, "session": _STR, "run": _STR, "step": _STR, "seq": _UINT,
          "epoch": _UINT, "cause": _STR, "severity": SEVERITIES, "capture": CAPTURES, "traceparent": _TP}
_TABLE = tuple((name, ce_name, _KINDS[name]) for name, ce_name in AEP_TO_CE.items())


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover
        return "<absent>"


_ABSENT: Any = _Absent()

# ------------------------------------------------------------------------------------------------------------------
# inverse: CE -> AEP (AEP-0005 §2)
# ------------------------------------------------------------------------------------------------------------------

_JSON_MEDIA = re.compile(r"\s*application/json\s*(;.*)?", re.IGNORECASE | re.DOTALL)


def _inverse_type(ce: Any, where: str) -> str:
    """CE-1, B3: the CloudEvent is a valid CloudEvents 1.0 event whose type is an AEP type under ``dev.aep.``;
    that AEP type."""
    if type(ce) is not dict:
        raise Refusal("CE-1", f"a CloudEvent is a JSON object, not {_json_type(ce)}", where)
    problem = core_problem(ce)
    if problem is not None:
        attr, reason = problem
        raise Refusal("CE-1", f"not a valid CloudEvents 1.0 event: {reason}", _where(where, attr) if attr else where)
    typ = ce["type"]
    if not typ.startswith(TYPE_ROOT):
        raise Refusal("B3", f"type {_show(typ)} is not under {TYPE_ROOT}: a foreign CloudEvent is out of the "
                      "bridge's scope (AEP-0005 §2 rule 3; lifting it is an adapter's job)", _where(where, "type"))
    bare = typ[_ROOT_LEN:]
    if not AEP_TYPE.fullmatch(bare):
        raise Refusal("B3", f"type {_show(typ)} does not carry an AEP type after {TYPE_ROOT}", _where(where, "type"))
    return bare


def _check_inverse_envelope(mapped: dict[str, Any], where: str) -> None:
    """B4, B2: the AEP envelope's required members are there, and its ``subject``, ``id`` and ``source`` are
    non-empty strings."""
    for name in ("aep", "agent"):
        if name not in mapped:
            raise Refusal("B4", f"{AEP_TO_CE[name]} is missing: the AEP envelope requires {name} (AEP-0001 §5.1)",
                          _where(where, AEP_TO_CE[name]))
    if "time" not in mapped:
        raise Refusal("B2", "time is missing: the AEP envelope requires it (AEP-0001 §5.1)", _where(where, "time"))
    if "subject" in mapped:
        _check_envelope_value("subject", mapped["subject"], where)
    _check_envelope_value("id", mapped["id"], where)
    _check_envelope_value("source", mapped["source"], where)


def ce_inverse(ce: dict, where: str = "", *, diagnostics: list[Diagnostic] | None = None) -> dict:
    """The AEP Event a CloudEvent carries (AEP-0005 §2).

    Rule 1: the B1 constants dropped, the B3 prefix stripped, the B4/B5 table reversed, B2 passed through: for a
    bridged event the result is the original, bit-for-bit modulo member order (written in the golden corpus's
    order). Rule 2: other extension attributes are preserved when their names are legal AEP extension names
    (``[a-z0-9]{1,20}``, not an AEP core name) with a CloudEvents scalar value, else dropped, each drop appended
    to ``diagnostics`` when given. Rule 3: a CloudEvent whose type is not under ``dev.aep.`` is refused (``B3``).
    """
    bare = _inverse_type(ce, where)

    def drop(attr: str, rule: str, message: str) -> None:
        if diagnostics is not None:
            diagnostics.append(Diagnostic(attr, rule, message))

    mapped: dict[str, Any] = {"id": ce["id"], "type": bare, "source": ce["source"]}
    extensions: dict[str, Any] = {}
    data = _ABSENT
    for name, v in ce.items():
        if name in ("specversion", "id", "source", "type"):
            continue
        if name == "time" or name == "subject":  # B2
            mapped[name] = v
        elif name == "data":
            if type(v) is not dict:
                raise Refusal("CE-3", f"data must be a JSON object to be an AEP payload, not {_json_type(v)}",
                              _where(where, "data"))
            data = v
        elif name == "data_base64":
            raise Refusal("CE-3", "data_base64: binary data cannot be an AEP payload (a JSON object)",
                          _where(where, "data_base64"))
        elif name == "datacontenttype":
            if not _JSON_MEDIA.fullmatch(v):
                if "data" in ce:
                    raise Refusal("CE-3", f"datacontenttype {_show(v)}: an AEP payload is application/json",
                                  _where(where, name))
                drop(name, "B1", f"datacontenttype {_show(v)} without data dropped")
            elif v != DATACONTENTTYPE:
                drop(name, "B1", f"datacontenttype {_show(v)} read as the B1 constant {DATACONTENTTYPE}")
            # the B1 constant itself is dropped silently
        elif name == "dataschema":
            drop(name, "CE-4", "dataschema has no AEP counterpart and is dropped")
        else:
            aep_name = CE_TO_AEP.get(name)
            if aep_name is not None:  # B4, B5 reversed
                _check_envelope_value(aep_name, v, where, name)
                mapped[aep_name] = v
                continue
            # AEP-0005 §2 rule 2: unknown extension attributes
            if not _EXT_NAME.fullmatch(name):
                drop(name, "CE-5", f"extension attribute name {_show(name)} is not a legal AEP extension name "
                     "([a-z0-9]{1,20}, AEP-0001 §5.4): dropped")
            elif name in AEP_CORE:
                drop(name, "CE-5", f"extension attribute {name!r} collides with the AEP core attribute {name!r} "
                     "(AEP-0001 §5.4): dropped")
            else:
                vp = _ext_value_problem(v)
                if vp:
                    drop(name, "CE-5", f"extension attribute {name!r} cannot ride the AEP envelope: {vp}: dropped")
                else:
                    extensions[name] = v
    _check_inverse_envelope(mapped, where)
    out: dict[str, Any] = {}
    for name in _AEP_ORDER:
        v = mapped.get(name, _ABSENT)
        if v is not _ABSENT:
            out[name] = v
    out.update(extensions)
    if data is not _ABSENT:
        out["data"] = data
    return out
